/* OpenMP shims so the kernels also build without OpenMP (WSESPARSE_OPENMP=0). */
#ifndef WSESPARSE_OMP_COMPAT_H
#define WSESPARSE_OMP_COMPAT_H
#ifdef _OPENMP
#include <omp.h>
static inline int wsesparse_has_openmp(void) { return 1; }
/* A barrier of the enclosing parallel region. Cython's prange loops inside a
 * `with parallel()` block are `omp for nowait`: one phase that reads what the
 * previous one wrote needs this between them, called by every thread. */
static inline void wsesparse_barrier(void)
{
#pragma omp barrier
}
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int wsesparse_has_openmp(void) { return 0; }
static inline void wsesparse_barrier(void) {}
#endif

/* The number of CPUs this process may run on (sched_getaffinity; the set
 * grows until the kernel accepts its size), or -1 where that is unknown.
 * os.sched_getaffinity does the same at about three times the cost, which a
 * small product notices. Needs _GNU_SOURCE, which Python.h defines first. */
#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__linux__) && defined(CPU_ALLOC)
#include <errno.h>
static inline int wsesparse_available_cores(void)
{
    for (int n = 1024; n <= (1 << 22); n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        const size_t size = CPU_ALLOC_SIZE(n);
        if (set == NULL) return -1;
        if (sched_getaffinity(0, size, set) == 0) {
            const int count = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return count > 0 ? count : -1;
        }
        CPU_FREE(set);
        if (errno != EINVAL) return -1;
    }
    return -1;
}
#else
static inline int wsesparse_available_cores(void) { return -1; }
#endif
#endif
