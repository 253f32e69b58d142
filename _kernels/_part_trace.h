/*
 * A trace of one sweep's row parts: which thread took each part, and when it started and
 * ended it, in nanoseconds from the caller's start of the sweep. For the question a 16-core
 * run must answer (issue #27): where a sweep on T threads loses against 1/T of one thread's
 * time. Late starts show a team waking slowly, parts that take longer than on one thread show
 * cores contending for caches or memory, threads that end late show an imbalance.
 * benchmarks/part_trace.py reads it through part_trace_arm and part_trace (_part_trace.pxi).
 *
 * Armed with a buffer, the next sweep (of any product, or the first panel of a product of
 * several) takes it and records itself; unarmed, a sweep pays one load. The state below is
 * static: _spmm.pyx and _tlrmvm.pyx (through _part_trace.pxd) each have their own, armed
 * and read by the functions of _part_trace.pxi. A TLR product traces its three phases as one
 * sweep: phase 1's items, then phase 2's blocks, then phase 3's items (ws_trace_end3).
 */
#ifndef WSESPARSE_PART_TRACE_H
#define WSESPARSE_PART_TRACE_H

#include <stdint.h>
#include <time.h>

#include "_part_queues.h"

/* The armed buffer (NULL when unarmed). Layout: WS_TRACE_HEAD values, [0] the parts traced
 * (-1 until a sweep took it), [1] the caller's time after the team joined, [2] its capacity
 * in parts (in the buffer, so that a sweep reads the capacity of the buffer it took), [3] and
 * [4] the first part of the second and the third phase (both the number of parts, as [0],
 * for a sweep of one phase); then 3 per part: the thread, its start and its end. */
#define WS_TRACE_HEAD 5

static int64_t *ws_trace_armed = NULL;

static inline int64_t ws_trace_now_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void ws_trace_arm(int64_t *buf, int64_t cap)
{
    buf[0] = -1;
    buf[2] = cap;
    __atomic_store_n(&ws_trace_armed, buf, __ATOMIC_RELEASE);
}

/* Called by the caller before a sweep of n_parts parts: the buffer if armed (disarming it;
 * a sweep of more parts than it holds takes it without recording: [0] stays -1), else NULL.
 * *t0 gets the start. */
static inline int64_t *ws_trace_begin(int64_t n_parts, int64_t *t0)
{
    int64_t *b;
    if (__atomic_load_n(&ws_trace_armed, __ATOMIC_RELAXED) == NULL) return NULL;
    b = __atomic_exchange_n(&ws_trace_armed, NULL, __ATOMIC_ACQUIRE);
    if (b == NULL || n_parts > b[2]) return NULL;
    *t0 = ws_trace_now_();
    return b;
}

static inline void ws_trace_part(int64_t *b, int64_t part, int64_t thread, int64_t t0,
                                 int64_t start)
{
    int64_t *r = b + WS_TRACE_HEAD + 3 * part;
    r[0] = thread;
    r[1] = start - t0;
    r[2] = ws_trace_now_() - t0;
}

/* Called by the caller after the team joined, for a sweep of three phases whose second and
 * third begin at parts p2 and p3 (b may be NULL: not traced). */
static inline void ws_trace_end3(int64_t *b, int64_t n_parts, int64_t t0, int64_t p2,
                                 int64_t p3)
{
    if (b == NULL) return;
    b[1] = ws_trace_now_() - t0;
    b[3] = p2;
    b[4] = p3;
    __atomic_store_n(&b[0], n_parts, __ATOMIC_RELEASE);
}

/* Called by the caller after the sweep's team joined (b may be NULL: not traced). */
static inline void ws_trace_end(int64_t *b, int64_t n_parts, int64_t t0)
{
    ws_trace_end3(b, n_parts, t0, n_parts, n_parts);
}

/* The buffer as seen by a phase whose part q is part `first` + q of the sweep (NULL stays
 * NULL): the TLR phases step through their own queues with ws_part_step. */
static inline int64_t *ws_trace_shift(int64_t *b, int64_t first)
{
    return b == NULL ? NULL : b + 3 * first;
}

/* A sweep of one part, without a team: its trace (b may be NULL). */
static inline void ws_trace_one(int64_t *b, int64_t t0)
{
    if (b == NULL) return;
    ws_trace_part(b, 0, 0, t0, t0);
    ws_trace_end(b, 1, t0);
}

/* The sweeps' step through the queues: records part `done` (started at *ts; -1 before the
 * first) when b traces, then takes the next part (ws_part_take) and notes its start. */
static inline int64_t ws_part_step(ws_part_queue *q, int64_t n_queues, int64_t *at,
                                   int64_t *left, int64_t *b, int64_t t0, int64_t done,
                                   int64_t *ts, int64_t thread)
{
    int64_t p;
    if (b != NULL && done >= 0) ws_trace_part(b, done, thread, t0, *ts);
    p = ws_part_take(q, n_queues, at, left);
    if (b != NULL) *ts = ws_trace_now_();
    return p;
}

#endif
