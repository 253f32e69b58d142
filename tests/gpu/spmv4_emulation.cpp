// csr_spmv4 (wsesparse/gpu/kernels.cu) run on the CPU, one emulated lane at a time, built
// with g++ and AddressSanitizer by tests/gpu/test_kernel_emulation.py, which extracts the
// kernel's source into "spmv4_kernel.inc". Checks, on random valid and corrupt structures
// with exactly sized arrays (so any read past them is an ASan error): the checking kernel
// flags a structure exactly when it is corrupt; on valid ones both kernels give, bitwise,
// the sums of tests/gpu_helpers.py's _spmv4_lane_order (each lane's FMAs in that order, then
// the xor tree). Prints "cases N valid V flagged F fails X"; exits 1 on a failure.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(n)
#define __align__(n) alignas(n)
struct emu_dim { unsigned x; };
static emu_dim blockIdx, threadIdx, blockDim;
// The xor tree: each lane's value at the tree's first step (m = 16) is recorded, and the
// shuffle returns 0, so the lane keeps its own partial sum; the harness replays the tree.
static std::vector<double> emu_partial[32];
template <typename V> static V __shfl_xor_sync(unsigned, V v, int m) {
    if (m == 16) emu_partial[threadIdx.x & 31].push_back((double)v);
    return V(0);
}
#include "spmv4_kernel.inc"

template <typename T> static T* alloc(size_t n) {   // exactly n, on a 16-byte boundary
    void* p = nullptr;
    if (posix_memalign(&p, 16, std::max<size_t>(n, 1) * sizeof(T))) abort();
    return static_cast<T*>(p);
}

static long long n_cases = 0, n_valid = 0, n_flagged = 0, n_fails = 0;

static std::vector<long long> lane_order(long long start, long long end, int lane) {
    const long long a = std::min((start + 3) & ~3LL, end), b = std::max(end & ~3LL, a);
    std::vector<long long> order;
    if (lane < a - start) order.push_back(start + lane);
    for (long long k = a + 4 * lane; k < b; k += 128)
        for (int j = 0; j < 4; ++j) order.push_back(k + j);
    if (lane < end - b) order.push_back(b + lane);
    return order;
}

template <typename T> static T tree(std::vector<T> p) {   // the xor tree of 32 lanes
    for (int m = 16; m >= 1; m >>= 1) {
        std::vector<T> q(32);
        for (int l = 0; l < 32; ++l) q[l] = p[l] + p[l ^ m];
        p = q;
    }
    return p[0];
}

template <typename T, typename I, bool CHK>
static void one_case(std::mt19937_64& g) {
    const int n_rows = 1 + g() % 4;
    const long long n_inner = g() % 60;
    std::vector<long long> ip(n_rows + 1, 0);
    for (int r = 0; r < n_rows; ++r) ip[r + 1] = ip[r] + ((g() % 3) ? g() % 700 : g() % 8);
    const long long n_stored = ip[n_rows] + ((g() % 2) ? g() % 9 : 0);
    const long long odd[] = {LLONG_MAX, LLONG_MIN, -1, -2, -5, INT_MAX, INT_MIN, INT_MAX - 1};
    auto any = [&]() -> long long {
        if (g() % 2) return (long long)(I)odd[g() % 8];
        return (long long)(g() % (n_stored + 20)) - 10;
    };
    const int fault = CHK ? (int)(g() % 8) : -1;   // 0-3: indptr, 4-6: indices, 7: none
    switch (fault) {
        case 0: ip[0] = any(); break;
        case 1: ip[1 + g() % n_rows] = any(); break;
        case 2: ip[n_rows] = n_stored + 1 + g() % 7; break;
        case 3: for (auto& v : ip) if (g() % 2) v = any(); break;
        default: break;
    }
    I* indptr = alloc<I>(n_rows + 1);
    for (int r = 0; r <= n_rows; ++r) ip[r] = (long long)(indptr[r] = (I)ip[r]);
    I* indices = alloc<I>(n_stored);
    T* data = alloc<T>(n_stored);
    std::uniform_real_distribution<double> unit(-1, 1);
    for (long long k = 0; k < n_stored; ++k) {
        indices[k] = n_inner ? (I)(g() % n_inner) : 0;
        data[k] = (T)unit(g);
    }
    if (fault >= 4 && n_stored) {          // bad indices anywhere: head, groups, remainder, tail
        for (int t = 0, n = 1 + g() % 3; t < n; ++t)
            indices[g() % n_stored] = (I)((g() % 2) ? n_inner + (long long)(g() % 5) : odd[g() % 8]);
    }
    const long long ldx = 1 + g() % 3, nx = n_inner ? (n_inner - 1) * ldx + 1 : 0;
    T* x = alloc<T>(nx);
    for (long long i = 0; i < nx; ++i) x[i] = (T)unit(g);
    bool valid = ip[0] == 0 && ip[n_rows] <= n_stored;
    for (int r = 0; r < n_rows; ++r) valid = valid && ip[r + 1] >= ip[r];
    for (long long k = 0; valid && k < ip[n_rows]; ++k)
        valid = (long long)indices[k] >= 0 && (long long)indices[k] < n_inner;
    if (!CHK && !valid) { free(indptr); free(indices); free(data); free(x); return; }
    T* y = alloc<T>(n_rows);
    int flags = 0;
    blockDim.x = 256;
    for (long long row = 0; row < n_rows; ++row) {
        for (auto& p : emu_partial) p.clear();
        for (int lane = 0; lane < 32; ++lane) {
            const long long tid = row * 32 + lane;
            blockIdx.x = (unsigned)(tid / 256);
            threadIdx.x = (unsigned)(tid % 256);
            csr_spmv4<T, I, CHK>(indptr, indices, data, x, y, n_rows, ldx, 1, n_inner, n_stored,
                                 &flags);
        }
        if (!valid) continue;
        std::vector<T> got(32), want(32);
        std::vector<long long> seen;
        for (int l = 0; l < 32; ++l) {
            if (emu_partial[l].size() != 1) { std::printf("lane %d: no tree\n", l); ++n_fails; return; }
            got[l] = (T)emu_partial[l][0];
            T acc = 0;
            for (long long k : lane_order(ip[row], ip[row + 1], l)) {
                acc = std::fma(data[k], x[(long long)indices[k] * ldx], acc);
                seen.push_back(k);
            }
            want[l] = acc;
        }
        std::sort(seen.begin(), seen.end());
        for (size_t i = 0; i < seen.size(); ++i)
            if (seen[i] != ip[row] + (long long)i) { std::printf("order misses a nonzero\n"); ++n_fails; break; }
        if ((long long)seen.size() != ip[row + 1] - ip[row]) ++n_fails;
        const T a = tree(got), b = tree(want);
        if (std::memcmp(&a, &b, sizeof(T))) {
            std::printf("row %lld [%lld, %lld): %.17g, want %.17g\n", row, ip[row], ip[row + 1],
                        (double)a, (double)b);
            ++n_fails;
        }
    }
    ++n_cases;
    n_valid += valid;
    if (CHK) {
        n_flagged += flags != 0;
        if (valid != (flags == 0)) {
            std::printf("flags %d for a %s structure (fault kind %d)\n", flags,
                        valid ? "valid" : "corrupt", fault);
            ++n_fails;
        }
    }
    free(indptr); free(indices); free(data); free(x); free(y);
}

int main(int argc, char** argv) {
    std::mt19937_64 g(argc > 1 ? std::atoll(argv[1]) : 1);
    const int n = argc > 2 ? std::atoi(argv[2]) : 2000;
    for (int i = 0; i < n; ++i) {
        one_case<double, int, true>(g);
        one_case<double, long long, true>(g);
        one_case<float, int, true>(g);
        one_case<double, int, false>(g);
        one_case<float, long long, false>(g);
    }
    std::printf("cases %lld valid %lld flagged %lld fails %lld\n", n_cases, n_valid, n_flagged,
                n_fails);
    return n_fails != 0;
}
