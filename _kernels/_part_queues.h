/*
 * Row parts handed to a team with affinity: thread t first takes the parts of its own queue,
 * the same rows at every call of the same partition, so the slice of the matrix it read at
 * the last call may still be in its own L2; then it takes what is left in the other queues,
 * so that a thread that lost its core to another process does not hold the team up (what
 * OpenMP's schedule(dynamic, 1) gave, which hands parts out in the order threads arrive and
 * so moves every slice between cores from call to call). docs/tuning.md, "Parts that stay
 * with their thread".
 *
 * A call makes its queues (ws_part_queues; the TLR phases, whose items differ in size,
 * ws_part_queues_by_work), then runs ws_part_take (through _part_trace.h's ws_part_step) in a
 * loop starting at queue t: in iteration t of a prange(T, schedule="static", chunksize=1),
 * which runs on team thread t at every call of a team of one size (_spmm.pyx's sweeps), or on
 * thread t = threadid() of a parallel block (_tlrmvm.pyx's phases).
 * Parts are independent and each is taken once, so which thread takes a part never changes
 * a result.
 *
 * WS_PARTS_SHARED=1 (an A/B switch): one queue, every thread taking from it, as
 * schedule(dynamic, 1) did.
 */
#ifndef WSESPARSE_PART_QUEUES_H
#define WSESPARSE_PART_QUEUES_H

#include <stdint.h>
#include <stdlib.h>

#ifndef WS_PARTS_SHARED
#define WS_PARTS_SHARED 0
#endif

/* One cache line a queue: a thread's claims on its own queue touch no other thread's line. */
typedef struct {
    int64_t next; /* the next part to hand out (runs past end once the queue is empty) */
    int64_t end;  /* one past the queue's last part */
    char pad_[64 - 2 * sizeof(int64_t)];
} ws_part_queue;

/* Queues for n_parts parts among n_threads threads: queue k holds parts
 * [n_parts * k / n, n_parts * (k + 1) / n), n = *n_queues = n_threads (1 with
 * WS_PARTS_SHARED, or where the allocation fails: then `one` holds every part). Release with
 * ws_part_queues_free(q, one). */
static inline ws_part_queue *ws_part_queues(int64_t n_parts, int64_t n_threads,
                                            ws_part_queue *one, int64_t *n_queues)
{
    void *mem = NULL;
    ws_part_queue *q;
    int64_t k, n = n_threads < 1 ? 1 : n_threads;
    if (WS_PARTS_SHARED || n == 1
            || posix_memalign(&mem, 64, (size_t)n * sizeof(ws_part_queue)) != 0) {
        one->next = 0;
        one->end = n_parts;
        *n_queues = 1;
        return one;
    }
    q = (ws_part_queue *)mem;
    for (k = 0; k < n; k++) {
        q[k].next = n_parts * k / n;
        q[k].end = n_parts * (k + 1) / n;
    }
    *n_queues = n;
    return q;
}

/* The same queues with boundaries by work instead of by count (the TLR phases, whose items
 * differ in size): cum[p] is the work of parts 0..p (non-decreasing), and part p goes to
 * queue floor(n (cum[p - 1] + cum[p]) / (2 cum[n_parts - 1])), the thread whose equal share
 * of the work holds the part's middle (the last queue also takes parts of no work at the
 * end). Queues stay by count where cum is NULL or all the work is 0; a thread whose share
 * holds no part's middle gets an empty queue (it takes the others'). */
static inline ws_part_queue *ws_part_queues_by_work(int64_t n_parts, int64_t n_threads,
                                                    const int64_t *cum, ws_part_queue *one,
                                                    int64_t *n_queues)
{
    ws_part_queue *q = ws_part_queues(n_parts, n_threads, one, n_queues);
    const int64_t n = *n_queues, total = n_parts > 0 && cum != NULL ? cum[n_parts - 1] : 0;
    int64_t k, p = 0;
    if (n == 1 || total <= 0) return q;
    for (k = 0; k < n; k++) {
        q[k].next = p;
        /* (2 total n fits: the TLR phases' work is rows x outputs, far below 2^62 / n) */
        while (p < n_parts && (k == n - 1
                               || ((p > 0 ? cum[p - 1] : 0) + cum[p]) * n < 2 * total * (k + 1)))
            p++;
        q[k].end = p;
    }
    return q;
}

static inline void ws_part_queues_free(ws_part_queue *q, ws_part_queue *one)
{
    if (q != one) free(q);
}

/* The next part for the iteration that holds *at (the queue it drains: its own, iteration
 * t % n_queues, at first) and *left (queues it has not found empty: n_queues at first), or
 * -1 once every queue is empty. A queue is read before it is claimed from, so that a thread
 * done with its own parts writes no other thread's line where nothing is left. */
static inline int64_t ws_part_take(ws_part_queue *q, int64_t n_queues, int64_t *at,
                                   int64_t *left)
{
    while (*left > 0) {
        ws_part_queue *s = q + *at;
        if (__atomic_load_n(&s->next, __ATOMIC_RELAXED) < s->end) {
            const int64_t p = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED);
            if (p < s->end) return p;
        }
        *at = *at + 1 == n_queues ? 0 : *at + 1;
        *left -= 1;
    }
    return -1;
}

/* part_takes's count of one take (_spmm.pyx: a test of the queues). */
static inline void ws_part_count(int64_t *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

#endif
