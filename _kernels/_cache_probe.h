/*
 * How fast one core reads a buffer that fits a given cache level: the panel
 * rule (wsesparse/csr.py) sizes the slice of X a sweep re-reads by the
 * fastest level it can count on, and on some machines (VMs reporting a host's
 * shared L3, say) data beyond L2 comes at DRAM speed.
 *
 * ws_read_gbps(nbytes, repeats): GB/s of the fastest of ``repeats`` passes
 * summing a freshly touched buffer of ``nbytes`` (rounded down to 64-byte
 * lines), or -1.0 if that is no whole line, ``repeats`` < 1 or the buffer
 * cannot be allocated. The sums go to a volatile so the reads are not dropped.
 */
#ifndef WSESPARSE_CACHE_PROBE_H
#define WSESPARSE_CACHE_PROBE_H

#include <stdlib.h>
#include <stdint.h>
#include <time.h>

static volatile double ws_probe_sink;

static double ws_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double ws_read_gbps(size_t nbytes, int repeats)
{
    size_t n = nbytes / 64 * 8; /* 8-byte words, whole lines */
    if (n == 0 || repeats < 1) return -1.0;
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 64, n * sizeof(uint64_t)) != 0) return -1.0;
    for (size_t i = 0; i < n; ++i) buf[i] = i;
    double best = 1e30;
    uint64_t total = 0;
    for (int r = 0; r < repeats; ++r) {
        /* An integer sum: the compiler vectorizes it (integer adds may be
           reordered), so the loads, not the adds, set the pace. */
        uint64_t s = 0;
        double t0 = ws_seconds();
        for (size_t i = 0; i < n; ++i) s += buf[i];
        double t = ws_seconds() - t0;
        total += s;
        if (t < best) best = t;
    }
    ws_probe_sink = (double)total;
    free(buf);
    return best > 0 ? (double)(n * sizeof(uint64_t)) / best * 1e-9 : -1.0;
}

#endif
