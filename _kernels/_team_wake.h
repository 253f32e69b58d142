/*
 * What waking the kernels' OpenMP team after an idle spell costs: a probe that one parallel
 * region of the SpMV or SpMM sweep takes when wsesparse/_threads.py has armed it.
 *
 * On shared VMs a vCPU idle for 30 ms or more comes back milliseconds after a region wakes
 * its thread, and the caller's thread is held up as long: after 0.2 s idle, a 1 M-nonzero
 * SpMV on 2 threads took 7.5 ms, its second thread arriving after 3.6 ms and the first
 * thread finishing its parts only after 7 (alone it takes 1.9 ms); docs/tuning.md, "Timing
 * after an idle spell". _threads.py arms the probe for the first team call of a spell, the
 * region records its time, and _threads.py runs products of later spells alone that one
 * thread finishes sooner than the team would after such a wake.
 *
 * The state is this header's: only _spmm.pyx includes it (as _out_pool.h in _runtime.pyx).
 */
#ifndef WSESPARSE_TEAM_WAKE_H
#define WSESPARSE_TEAM_WAKE_H

#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC when armed, else 0. A region starting more than
 * WS_WAKE_MAX_AGE_NS after that (the armed call ran a kernel without the probe) drops it. */
static long long ws_wake_armed_at = 0;
/* The last probed region's time, ns (-1 before the first). */
static long long ws_wake_region = -1;
/* Probed regions so far: tells the caller whether its armed call was probed. */
static long long ws_wake_count = 0;
#define WS_WAKE_MAX_AGE_NS 1000000LL

static inline long long ws_wake_now_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void ws_wake_arm(void)
{
    __atomic_store_n(&ws_wake_armed_at, ws_wake_now_(), __ATOMIC_RELAXED);
}

/* Called by the caller's thread before a parallel region: the region's start time when the
 * probe is armed and fresh, else 0 (one load when unarmed). The exchange disarms it: of two
 * calls from two Python threads, one takes the probe. */
static inline long long ws_wake_begin(void)
{
    long long t0, armed;
    if (__atomic_load_n(&ws_wake_armed_at, __ATOMIC_RELAXED) == 0)
        return 0;
    armed = __atomic_exchange_n(&ws_wake_armed_at, 0, __ATOMIC_RELAXED);
    t0 = ws_wake_now_();
    if (armed == 0 || t0 - armed > WS_WAKE_MAX_AGE_NS)
        return 0;
    return t0;
}

/* Called by the caller's thread after the probed region. */
static inline void ws_wake_end(long long t0)
{
    __atomic_store_n(&ws_wake_region, ws_wake_now_() - t0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ws_wake_count, 1, __ATOMIC_RELAXED);
}

#endif
