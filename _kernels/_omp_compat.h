/* OpenMP shims so the kernels also build without OpenMP (WSESPARSE_OPENMP=0). */
#ifndef WSESPARSE_OMP_COMPAT_H
#define WSESPARSE_OMP_COMPAT_H
#ifdef _OPENMP
#include <omp.h>
static inline int wsesparse_has_openmp(void) { return 1; }
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int wsesparse_has_openmp(void) { return 0; }
#endif
#endif
