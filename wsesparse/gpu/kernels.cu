// CUDA kernels of wsesparse's GPU backend, compiled at first use by CuPy (NVRTC) and cached;
// wsesparse/gpu/_module.py lists the instantiations. Self-contained (no CUDA headers), so the
// same file also compiles with nvcc (tests/gpu/test_host.py builds it where nvcc is installed).
//
// Every output element is summed by one thread (or one fixed shuffle tree) in a fixed order:
// no atomics, so a product is bitwise reproducible run to run.

struct __align__(8) wc64 { float re, im; };
struct __align__(16) wc128 { double re, im; };

template <typename T> __device__ __forceinline__ T w_zero() { return T(0); }
template <> __device__ __forceinline__ wc64 w_zero<wc64>() { return wc64{0.f, 0.f}; }
template <> __device__ __forceinline__ wc128 w_zero<wc128>() { return wc128{0.0, 0.0}; }

// acc + a * x
__device__ __forceinline__ float w_fma(float acc, float a, float x) { return fmaf(a, x, acc); }
__device__ __forceinline__ double w_fma(double acc, double a, double x) { return fma(a, x, acc); }
__device__ __forceinline__ wc64 w_fma(wc64 acc, wc64 a, wc64 x) {
    acc.re = fmaf(a.re, x.re, acc.re); acc.re = fmaf(-a.im, x.im, acc.re);
    acc.im = fmaf(a.re, x.im, acc.im); acc.im = fmaf(a.im, x.re, acc.im);
    return acc;
}
__device__ __forceinline__ wc128 w_fma(wc128 acc, wc128 a, wc128 x) {
    acc.re = fma(a.re, x.re, acc.re); acc.re = fma(-a.im, x.im, acc.re);
    acc.im = fma(a.re, x.im, acc.im); acc.im = fma(a.im, x.re, acc.im);
    return acc;
}

__device__ __forceinline__ float w_add(float a, float b) { return a + b; }
__device__ __forceinline__ double w_add(double a, double b) { return a + b; }
__device__ __forceinline__ wc64 w_add(wc64 a, wc64 b) { return wc64{a.re + b.re, a.im + b.im}; }
__device__ __forceinline__ wc128 w_add(wc128 a, wc128 b) {
    return wc128{a.re + b.re, a.im + b.im};
}

__device__ __forceinline__ float w_conj(float a) { return a; }
__device__ __forceinline__ double w_conj(double a) { return a; }
__device__ __forceinline__ wc64 w_conj(wc64 a) { return wc64{a.re, -a.im}; }
__device__ __forceinline__ wc128 w_conj(wc128 a) { return wc128{a.re, -a.im}; }

__device__ __forceinline__ float w_shfl_xor(float v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ __forceinline__ double w_shfl_xor(double v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ __forceinline__ wc64 w_shfl_xor(wc64 v, int m) {
    return wc64{__shfl_xor_sync(0xffffffffu, v.re, m), __shfl_xor_sync(0xffffffffu, v.im, m)};
}
__device__ __forceinline__ wc128 w_shfl_xor(wc128 v, int m) {
    return wc128{__shfl_xor_sync(0xffffffffu, v.re, m), __shfl_xor_sync(0xffffffffu, v.im, m)};
}

// The stored range [start, end) of CSR row `row`. CHK (one-shot products, whose structure
// nobody checked): clamped to what may be read (a bad row counts as empty), and the
// csr_check bits of what is wrong with it returned (0: nothing).
template <bool CHK, typename I>
__device__ __forceinline__ int csr_row_range(const I* __restrict__ indptr, long long row,
                                             long long n_stored, long long& start,
                                             long long& end) {
    start = indptr[row];
    end = indptr[row + 1];
    int bad = 0;
    if (CHK) {
        if (row == 0 && start != 0) bad |= 1;
        if (end < start) { bad |= 2; end = start; }
        if (end > n_stored) { bad |= 4; end = n_stored; }
        if (start < 0) { bad |= 1; start = 0; }
        if (start > end) start = end;
    }
    return bad;
}

// V consecutive elements, loaded and stored as one access of V * sizeof(T) bytes (<= 16).
template <typename T, int V> struct __align__(V * sizeof(T)) w_vec { T v[V]; };

// ---------------------------------------------------------------------------------- CSR x dense
// Y[row, col] = sum_k data[k] * X[indices[k], col] over k in [indptr[row], indptr[row + 1]).
//
// A group of 2**gs_log consecutive lanes (1..32, aligned in the warp) takes one row: 2**q_log
// column lanes, each owning V consecutive columns, times P = 2**(gs_log - q_log) nonzero lanes,
// lane p taking nonzeros start + p, start + p + P, ... in order. The P partial sums meet in a
// fixed xor-shuffle tree. blockIdx.y picks the block of 2**q_log * V columns. X is row-major
// with row stride ldx (elements) and, when V > 1, 16-byte aligned rows; Y[row, col] is at
// Y[row * ldy_row + col * ldy_col].
//
// CHK = false: the host checked the structure (a prepared DeviceCSR). CHK = true (one-shot
// products): the kernel checks what it reads and reads nothing out of bounds (bad rows count
// as empty, bad indices are skipped); a thread that found a fault stores its csr_check bits
// (below) to *flags, a word of mapped host memory the host zeroed and reads after the launch
// (plain racing stores: any nonzero value means "run csr_check for the message").
// n_inner: rows of X; n_stored: length of indices. CSR_UNROLL nonzeros of a lane are loaded
// before their sums (any depth gives the same sums in the same order).
#ifndef CSR_UNROLL
#define CSR_UNROLL 4
#endif
static_assert(CSR_UNROLL >= 1, "CSR_UNROLL: nonzeros a lane loads at a time, at least 1");
template <typename T, typename I, int V, bool CHK>
__global__ void __launch_bounds__(256) csr_dense(
        const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ data,
        const T* __restrict__ X, T* __restrict__ Y, long long n_rows, long long n_cols,
        long long ldx, long long ldy_row, long long ldy_col, int gs_log, int q_log,
        long long n_inner, long long n_stored, volatile int* flags) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long row = tid >> gs_log;
    const int lane = threadIdx.x & ((1 << gs_log) - 1);
    const int q = lane & ((1 << q_log) - 1);
    const int p = lane >> q_log;
    const int P = 1 << (gs_log - q_log);
    const long long col = ((long long)blockIdx.y * (1 << q_log) + q) * V;
    T acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = w_zero<T>();
    int bad = 0;
    if (row < n_rows && col < n_cols) {
        long long start, end;
        bad |= csr_row_range<CHK>(indptr, row, n_stored, start, end);
        long long k = start + p;
        if (col + V <= n_cols) {
            const T* xc = X + col;
            for (; k + (CSR_UNROLL - 1) * P < end; k += CSR_UNROLL * P) {
                // The values are read in the loop over the indices (k < end <= n_stored: in
                // bounds) instead of after their check. Measured: one-shot products at 8
                // columns took 0.74-0.97x the time on an H100 and an H200, float64 SpMV
                // 0.89-0.98x; float32 SpMV (V = 1) took 1.02-1.06x and keeps the old order
                // (docs/gpu.md). nvcc 13.0 (sm_90) still puts the value loads after the
                // branch; what changed there is that a lane's values and X rows are all
                // loaded before its first multiply-add. Either order gives the same sums.
                constexpr bool values_first = V > 1 || sizeof(T) > 4;
                I c[CSR_UNROLL];
                T a[CSR_UNROLL];
                bool out_of_range = false;
#pragma unroll
                for (int u = 0; u < CSR_UNROLL; ++u) {
                    c[u] = indices[k + u * P];
                    if (values_first) a[u] = data[k + u * P];
                    if (CHK) out_of_range |= (unsigned long long)c[u]
                                             >= (unsigned long long)n_inner;
                }
                if (CHK && out_of_range) {
                    bad |= 8;
                    break;
                }
                if (!values_first) {
#pragma unroll
                    for (int u = 0; u < CSR_UNROLL; ++u) a[u] = data[k + u * P];
                }
                w_vec<T, V> x[CSR_UNROLL];
#pragma unroll
                for (int u = 0; u < CSR_UNROLL; ++u)
                    x[u] = *reinterpret_cast<const w_vec<T, V>*>(xc + c[u] * ldx);
#pragma unroll
                for (int v = 0; v < V; ++v)
#pragma unroll
                    for (int u = 0; u < CSR_UNROLL; ++u) acc[v] = w_fma(acc[v], a[u], x[u].v[v]);
            }
            for (; k < end; k += P) {
                const I c0 = indices[k];
                if (CHK && (unsigned long long)c0 >= (unsigned long long)n_inner) {
                    bad |= 8;
                    break;
                }
                const w_vec<T, V> x0 = *reinterpret_cast<const w_vec<T, V>*>(xc + c0 * ldx);
                const T a0 = data[k];
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] = w_fma(acc[v], a0, x0.v[v]);
            }
        } else {  // the last, partial block of columns
            for (; k < end; k += P) {
                const I c0 = indices[k];
                if (CHK && (unsigned long long)c0 >= (unsigned long long)n_inner) {
                    bad |= 8;
                    break;
                }
                const T* xr = X + (long long)c0 * ldx;
                const T a0 = data[k];
#pragma unroll
                for (int v = 0; v < V; ++v)
                    if (col + v < n_cols) acc[v] = w_fma(acc[v], a0, xr[col + v]);
            }
        }
    }
    if (CHK && bad) *flags = bad;
    for (int m = 1 << q_log; m < (1 << gs_log); m <<= 1) {
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = w_add(acc[v], w_shfl_xor(acc[v], m));
    }
    if (p != 0 || row >= n_rows || col >= n_cols) return;
    T* y = Y + row * ldy_row;
    if (ldy_col == 1 && col + V <= n_cols) {
        w_vec<T, V> out;
#pragma unroll
        for (int v = 0; v < V; ++v) out.v[v] = acc[v];
        *reinterpret_cast<w_vec<T, V>*>(y + col) = out;
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
            if (col + v < n_cols) y[(col + v) * ldy_col] = acc[v];
    }
}

// ------------------------------------------------------------------------- SpMV of long rows
// y[row * ldy] = sum_k data[k] * x[indices[k] * ldx] over the row's nonzeros, one warp a row,
// for rows of dozens of nonzeros or more (the host picks it by the mean row length). Index and
// value arrays start on 16-byte boundaries (the host checks), so the 4 nonzeros from a
// multiple of 4 on load as 16-byte accesses: csr_dense's lanes load one 4- or 8-byte index
// and value at a time, and this took 0.86-0.96x its time on an H200 (docs/gpu.md). Lane l
// sums, in this order: nonzero start + l of the row's head (up to 3, before its first
// multiple of 4), the 4 nonzeros from a + 4 l + 128 j for j = 0, 1, ... (a: that multiple),
// then nonzero b + l of its tail (b: the last multiple of 4 at or below the row's end); the
// 32 sums meet in a fixed xor-shuffle tree. So every product sums in a fixed order (not
// csr_dense's). CHK as in csr_dense: every read stays in bounds (a bad row counts as empty,
// a lane leaves its row at a bad index of its own), the fault goes to *flags and the host
// discards the result. tests/gpu/test_kernel_emulation.py runs this section on the CPU
// under AddressSanitizer.
template <typename T>
__device__ __forceinline__ void w_load4(const T* __restrict__ p, T (&out)[4]) {
    constexpr int V = sizeof(T) >= 16 ? 1 : (sizeof(T) >= 4 ? 16 / (int)sizeof(T) : 4);
#pragma unroll
    for (int i = 0; i < 4; i += V) {
        const w_vec<T, V> q = *reinterpret_cast<const w_vec<T, V>*>(p + i);
#pragma unroll
        for (int j = 0; j < V; ++j) out[i + j] = q.v[j];
    }
}

template <typename I>
__device__ __forceinline__ bool w_outside(I c, long long n) {
    return (unsigned long long)(long long)c >= (unsigned long long)n;
}

#ifndef SPMV4_UNROLL
#define SPMV4_UNROLL 2
#endif
template <typename T, typename I, bool CHK>
__global__ void __launch_bounds__(256) csr_spmv4(
        const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ data,
        const T* __restrict__ x, T* __restrict__ y, long long n_rows, long long ldx,
        long long ldy, long long n_inner, long long n_stored, volatile int* flags) {
    constexpr int U = SPMV4_UNROLL;
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= n_rows) return;                          // (the whole warp: one row a warp)
    long long start, end;
    int bad = csr_row_range<CHK>(indptr, row, n_stored, start, end);
    T acc = w_zero<T>();
    long long a = (start + 3) & ~3LL, b = end & ~3LL;
    if (a > end) a = end;
    if (b < a) b = a;
    if (lane < a - start) {
        const I c = indices[start + lane];
        if (CHK && w_outside(c, n_inner)) bad |= 8;
        else acc = w_fma(acc, data[start + lane], x[c * ldx]);
    }
    long long k = a + 4 * lane;
    for (; k + 128 * (U - 1) < b; k += 128 * U) {
        I c[U][4];
        T v[U][4];
        bool outside = false;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            w_load4(indices + k + 128 * u, c[u]);
            w_load4(data + k + 128 * u, v[u]);
            if (CHK) {
#pragma unroll
                for (int j = 0; j < 4; ++j) outside |= w_outside(c[u][j], n_inner);
            }
        }
        if (CHK && outside) { bad |= 8; break; }
        T xv[U][4];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < 4; ++j) xv[u][j] = x[c[u][j] * ldx];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc = w_fma(acc, v[u][j], xv[u][j]);
    }
    if (!(CHK && bad)) {
        for (; k < b; k += 128) {
            I c[4];
            T v[4];
            w_load4(indices + k, c);
            w_load4(data + k, v);
            bool outside = false;
            if (CHK) {
#pragma unroll
                for (int j = 0; j < 4; ++j) outside |= w_outside(c[j], n_inner);
            }
            if (CHK && outside) { bad |= 8; break; }
#pragma unroll
            for (int j = 0; j < 4; ++j) acc = w_fma(acc, v[j], x[c[j] * ldx]);
        }
    }
    if (!(CHK && bad) && lane < end - b) {
        const I c = indices[b + lane];
        if (CHK && w_outside(c, n_inner)) bad |= 8;
        else acc = w_fma(acc, data[b + lane], x[c * ldx]);
    }
    if (CHK && bad) *flags = bad;
    for (int m = 16; m >= 1; m >>= 1) acc = w_add(acc, w_shfl_xor(acc, m));
    if (lane == 0) y[row * ldy] = acc;
}

__device__ __forceinline__ float w_shfl(float v, int j, unsigned mask) {
    return __shfl_sync(mask, v, j);
}
__device__ __forceinline__ double w_shfl(double v, int j, unsigned mask) {
    return __shfl_sync(mask, v, j);
}
__device__ __forceinline__ wc64 w_shfl(wc64 v, int j, unsigned mask) {
    return wc64{__shfl_sync(mask, v.re, j), __shfl_sync(mask, v.im, j)};
}
__device__ __forceinline__ wc128 w_shfl(wc128 v, int j, unsigned mask) {
    return wc128{__shfl_sync(mask, v.re, j), __shfl_sync(mask, v.im, j)};
}

// D[row, indices[k]] += data[k] into a zeroed row-major D (row stride ldd), for a checked
// structure: one warp per row, 32 nonzeros at a time; lanes holding the same column add
// their values in lane order and the lowest of them stores, so duplicates add up in a fixed
// order without atomics.
template <typename T, typename I>
__global__ void __launch_bounds__(256) csr_densify(
        const I* __restrict__ indptr, const I* __restrict__ indices, const T* __restrict__ data,
        T* __restrict__ D, long long n_rows, long long ldd) {
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= n_rows) return;        // whole warps: row is the same on all 32 lanes
    const long long start = indptr[row], end = indptr[row + 1];
    T* d = D + row * ldd;
    for (long long k0 = start; k0 < end; k0 += 32) {
        const long long k = k0 + lane;
        const bool on = k < end;
        const unsigned active = __ballot_sync(0xffffffffu, on);
        if (on) {
            const long long c = indices[k];
            const T v = data[k];
            const unsigned peers = __match_any_sync(active, c);
            if (peers == (1u << lane)) {
                d[c] = w_add(d[c], v);
            } else {
                T sum = w_zero<T>();
                for (unsigned m = peers; m; m &= m - 1)
                    sum = w_add(sum, w_shfl(v, __ffs(m) - 1, peers));
                if (lane == __ffs(peers) - 1) d[c] = w_add(d[c], sum);
            }
        }
        __syncwarp();
    }
}

// ------------------------------------------------------------------------------------- TLR-MVM
// Row of x that position i of a segment reads: perm[i] (a fused gather) or i itself.
__device__ __forceinline__ long long w_xrow(const long long* __restrict__ perm, long long i) {
    return perm ? perm[i] : i;
}

// Bases stored in 16 bits (DeviceTLR(storage=...)): MT, the stored element, is widened to T
// on load, and the sums run in T. w_f16 is IEEE binary16, w_bf16 bfloat16 (the high half of
// a float32); the x2 forms are complex (re, im). MT = T stores T itself.
struct w_f16 { unsigned short v; };
struct w_bf16 { unsigned short v; };
struct __align__(4) w_f16x2 { unsigned short re, im; };
struct __align__(4) w_bf16x2 { unsigned short re, im; };
__device__ __forceinline__ float w_wide(w_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.v));
    return f;
}
__device__ __forceinline__ float w_wide(w_bf16 h) { return __uint_as_float((unsigned)h.v << 16); }
// w_as<T>(m): a stored element as T (MT = T: as it is).
template <typename T> __device__ __forceinline__ T w_as(T m) { return m; }
template <typename T> __device__ __forceinline__ T w_as(w_f16 m) { return T(w_wide(m)); }
template <typename T> __device__ __forceinline__ T w_as(w_bf16 m) { return T(w_wide(m)); }
template <typename T> __device__ __forceinline__ T w_as(w_f16x2 m) {
    return T{w_wide(w_f16{m.re}), w_wide(w_f16{m.im})};
}
template <typename T> __device__ __forceinline__ T w_as(w_bf16x2 m) {
    return T{w_wide(w_bf16{m.re}), w_wide(w_bf16{m.im})};
}
#define W_M(m) (w_as<T>(m))

// A "segment" g is a row-major R_g x C_g block M_g of one stacked basis (U or V) at m_off[g];
// x_off[g], y_off[g] are its first row of the input and of the output. Inputs and outputs are
// row-major with S columns (right-hand sides), row strides ldx and ldy.

// Transposed products, all segments in one launch: y[y_off + c, s] = sum_r M_g[r, c] *
// x[xrow(r), s], xrow(r) = x_off + r, or perm[x_off + r] when perm is given (the TLR phase-2
// gather, fused into phase 3). Block b takes segment blk_seg[b], columns blk_c0[b] + tx
// (tx < 32), the r-range split over blockDim.y <= 16 row groups whose partial sums meet in shared
// memory in a fixed order. SC >= S columns per launch (the host loops over chunks of SC).
template <typename T, int SC, typename MT = T>
__global__ void __launch_bounds__(512) seg_gemv_t(
        const MT* __restrict__ M, const long long* __restrict__ m_off,
        const int* __restrict__ rows, const int* __restrict__ cols,
        const long long* __restrict__ x_off, const long long* __restrict__ y_off,
        const int* __restrict__ blk_seg, const int* __restrict__ blk_c0,
        const long long* __restrict__ perm, const T* __restrict__ x, T* __restrict__ y,
        int S, long long ldx, long long ldy) {
    __shared__ T part[16][32];
    const int g = blk_seg[blockIdx.x];
    const int R = rows[g], C = cols[g];
    const int c = blk_c0[blockIdx.x] + threadIdx.x;
    const int ty = threadIdx.y, RG = blockDim.y;
    T acc[SC];
#pragma unroll
    for (int s = 0; s < SC; ++s) acc[s] = w_zero<T>();
    if (c < C) {
        const MT* Mg = M + m_off[g] + c;
        const long long xo = x_off[g];
        int r = ty;
        for (; r + 3 * RG < R; r += 4 * RG) {
            const T m0 = W_M(Mg[(long long)r * C]);
            const T m1 = W_M(Mg[(long long)(r + RG) * C]);
            const T m2 = W_M(Mg[(long long)(r + 2 * RG) * C]);
            const T m3 = W_M(Mg[(long long)(r + 3 * RG) * C]);
            const long long i0 = w_xrow(perm, xo + r);
            const long long i1 = w_xrow(perm, xo + r + RG);
            const long long i2 = w_xrow(perm, xo + r + 2 * RG);
            const long long i3 = w_xrow(perm, xo + r + 3 * RG);
#pragma unroll
            for (int s = 0; s < SC; ++s) {
                if (s < S) {
                    acc[s] = w_fma(acc[s], m0, x[i0 * ldx + s]);
                    acc[s] = w_fma(acc[s], m1, x[i1 * ldx + s]);
                    acc[s] = w_fma(acc[s], m2, x[i2 * ldx + s]);
                    acc[s] = w_fma(acc[s], m3, x[i3 * ldx + s]);
                }
            }
        }
        for (; r < R; r += RG) {
            const T m0 = W_M(Mg[(long long)r * C]);
            const long long i0 = w_xrow(perm, xo + r);
#pragma unroll
            for (int s = 0; s < SC; ++s)
                if (s < S) acc[s] = w_fma(acc[s], m0, x[i0 * ldx + s]);
        }
    }
#pragma unroll
    for (int s = 0; s < SC; ++s) {
        if (s >= S) break;
        part[ty][threadIdx.x] = acc[s];
        __syncthreads();
        if (ty == 0 && c < C) {
            T sum = part[0][threadIdx.x];
            for (int t = 1; t < RG; ++t) sum = w_add(sum, part[t][threadIdx.x]);
            y[(y_off[g] + c) * ldy + s] = sum;
        }
        __syncthreads();
    }
}

// Row products with conjugated M (the adjoint's phases): y[y_off + c, s] = sum_{r < C_g}
// conj(M_g[c, r]) * x[xrow(r), s] for c < R_g. One warp per output row: lanes over r, then a
// fixed xor-shuffle tree; out_seg[w], out_row[w] name warp w's segment and row c.
template <typename T, int SC, typename MT = T>
__global__ void __launch_bounds__(256) seg_gemv_h(
        const MT* __restrict__ M, const long long* __restrict__ m_off,
        const int* __restrict__ rows, const int* __restrict__ cols,
        const long long* __restrict__ x_off, const long long* __restrict__ y_off,
        const int* __restrict__ out_seg, const int* __restrict__ out_row, long long n_out,
        const long long* __restrict__ perm, const T* __restrict__ x, T* __restrict__ y,
        int S, long long ldx, long long ldy) {
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    T acc[SC];
#pragma unroll
    for (int s = 0; s < SC; ++s) acc[s] = w_zero<T>();
    int g = 0, c = 0;
    if (w < n_out) {
        g = out_seg[w];
        c = out_row[w];
        const int L = cols[g];
        const MT* Mr = M + m_off[g] + (long long)c * L;
        const long long xo = x_off[g];
        int r = lane;
        for (; r + 32 < L; r += 64) {
            const T m0 = w_conj(W_M(Mr[r])), m1 = w_conj(W_M(Mr[r + 32]));
            const long long i0 = w_xrow(perm, xo + r);
            const long long i1 = w_xrow(perm, xo + r + 32);
#pragma unroll
            for (int s = 0; s < SC; ++s) {
                if (s < S) {
                    acc[s] = w_fma(acc[s], m0, x[i0 * ldx + s]);
                    acc[s] = w_fma(acc[s], m1, x[i1 * ldx + s]);
                }
            }
        }
        for (; r < L; r += 32) {
            const T m0 = w_conj(W_M(Mr[r]));
            const long long i0 = w_xrow(perm, xo + r);
#pragma unroll
            for (int s = 0; s < SC; ++s)
                if (s < S) acc[s] = w_fma(acc[s], m0, x[i0 * ldx + s]);
        }
    }
#pragma unroll
    for (int s = 0; s < SC; ++s) {
        for (int m = 16; m >= 1; m >>= 1) acc[s] = w_add(acc[s], w_shfl_xor(acc[s], m));
    }
    if (w >= n_out || lane != 0) return;
#pragma unroll
    for (int s = 0; s < SC; ++s)
        if (s < S) y[(y_off[g] + c) * ldy + s] = acc[s];
}

// Many right-hand sides, conjugated rows (adjoint phases): one warp per output row, lanes =
// LR = 32 / LS row positions x LS right-hand sides, so the x loads of a warp are LS
// consecutive values of LR rows; the LR partial sums meet in a fixed xor-shuffle tree.
// (The forward phases take seg_gemv_t<T, 8>: lanes over the right-hand sides there were
// 1.55x slower for 2-4 of them on an H100; docs/gpu.md.)
template <typename T, int LS, typename MT = T>
__global__ void __launch_bounds__(256) seg_gemm_h(
        const MT* __restrict__ M, const long long* __restrict__ m_off,
        const int* __restrict__ rows, const int* __restrict__ cols,
        const long long* __restrict__ x_off, const long long* __restrict__ y_off,
        const int* __restrict__ out_seg, const int* __restrict__ out_row, long long n_out,
        const long long* __restrict__ perm, const T* __restrict__ x, T* __restrict__ y,
        int S, long long ldx, long long ldy) {
    constexpr int LR = 32 / LS;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int s = lane % LS, lr = lane / LS;
    T acc = w_zero<T>();
    int g = 0, c = 0;
    if (w < n_out && s < S) {
        g = out_seg[w];
        c = out_row[w];
        const int L = cols[g];
        const MT* Mr = M + m_off[g] + (long long)c * L;
        const long long xo = x_off[g];
        const T* xs = x + s;
        int r = lr;
        for (; r + LR < L; r += 2 * LR) {
            const T m0 = w_conj(W_M(Mr[r])), m1 = w_conj(W_M(Mr[r + LR]));
            const long long i0 = w_xrow(perm, xo + r);
            const long long i1 = w_xrow(perm, xo + r + LR);
            const T x0 = xs[i0 * ldx], x1 = xs[i1 * ldx];
            acc = w_fma(acc, m0, x0);
            acc = w_fma(acc, m1, x1);
        }
        for (; r < L; r += LR) {
            const long long i0 = w_xrow(perm, xo + r);
            acc = w_fma(acc, w_conj(W_M(Mr[r])), xs[i0 * ldx]);
        }
    }
    for (int m = LS; m < 32; m <<= 1) acc = w_add(acc, w_shfl_xor(acc, m));
    if (w >= n_out || lr != 0 || s >= S) return;
    y[(y_off[g] + c) * ldy + s] = acc;
}

// ------------------------------------------------------------------------------ structure check
// OR of the failures of a CSR structure (bits: 1 indptr[0] != 0, 2 indptr decreases, 4 indptr[-1]
// over the n_stored indices, 8 an index of the first min(indptr[-1], n_stored) outside
// [0, n_cols)) into *flags, which the host zeroed. The host reads it once before a product.
template <typename I>
__global__ void __launch_bounds__(256) csr_check(
        const I* __restrict__ indptr, const I* __restrict__ indices, long long n_rows,
        long long n_cols, long long n_stored, int* __restrict__ flags) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long n = indptr[n_rows];
    n = n < 0 ? 0 : (n > n_stored ? n_stored : n);
    const long long todo = n_rows > n ? n_rows : n;
    int f = 0;
    for (long long i = tid; i < todo; i += stride) {
        if (i < n_rows && indptr[i + 1] < indptr[i]) f |= 2;
        if (i < n) {
            const long long c = indices[i];
            if (c < 0 || c >= n_cols) f |= 8;
        }
    }
    if (tid == 0) {
        if (indptr[0] != 0) f |= 1;
        if (indptr[n_rows] > n_stored) f |= 4;
    }
    for (int m = 16; m >= 1; m >>= 1) f |= __shfl_xor_sync(0xffffffffu, f, m);
    if ((threadIdx.x & 31) == 0 && f) atomicOr(flags, f);
}
