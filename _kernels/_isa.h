/*
 * WS_ISA: the vector instructions the compiler targeted for this extension module, as a
 * string (``_spmm.KERNEL_ISA``, ``_tlrmvm.KERNEL_ISA``; ``wsesparse bench`` prints them).
 * A checkout built in place without -march=native once went unnoticed for two sessions
 * of measurements: the benchmarks now say which build they time.
 */
#ifndef WSESPARSE_ISA_H
#define WSESPARSE_ISA_H
#if defined(__AVX512F__)
#define WS_ISA "avx512f"
#elif defined(__AVX2__) && defined(__FMA__)
#define WS_ISA "avx2+fma"
#elif defined(__AVX__)
#define WS_ISA "avx"
#elif defined(__x86_64__) || defined(_M_X64)
#define WS_ISA "x86-64 baseline (sse2)"
#else
#define WS_ISA "baseline"
#endif
#endif
