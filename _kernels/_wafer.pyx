# cython: language_level=3
"""Event-level cycle accounting of the streamed sparse GEMM (weight streaming).

``wsesparse.wafer.estimate`` validates every argument before calling in:
``indptr`` has ``n_out + 1`` nondecreasing entries from 0, each index in
``indices[:indptr[-1]]`` lies in ``[0, len(row_of_feature))``, every
``row_of_feature`` entry lies in ``[0, rows)``, ``features_per_row`` has
``rows`` entries, and all cycle parameters are >= 0 (``buffer_depth`` >= 1,
``intake_per_cycle`` > 0). Bounds checks are off (see setup.py).

The recurrence is documented once, in ``wsesparse/wafer/estimate.py``; the
executor (``wsesparse/wafer/execute.py``) implements it again in Python while it
moves real numbers, and the tests require the two to agree exactly.
"""

cimport cython
from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport ceil, log
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport calloc, free

import numpy as np

ctypedef fused idx_t:
    int32_t
    int64_t

ctypedef fused jdx_t:
    int32_t
    int64_t

# The long loops below leave their nogil section every this many inner steps
# to let Python handle signals (Ctrl-C raises KeyboardInterrupt within
# milliseconds instead of after the whole simulation).
cdef int64_t _SIGNAL_CHECK_STEPS = 1 << 22


cdef inline int64_t _arrival(int64_t message, double rate) nogil:
    # Cycle at which the 1-based ``message``-th intake message is delivered. The
    # small slack keeps exact multiples (k / rate integral) from rounding up.
    return <int64_t>ceil(message / rate - 1e-9)


cdef inline int64_t _max(int64_t a, int64_t b) nogil:
    return a if a > b else b


def stream_gemm(const idx_t[::1] indptr, const jdx_t[::1] indices,
                const int32_t[::1] row_of_feature, const int64_t[::1] features_per_row,
                int rows, int cols, bint dense, int64_t axpy_cycles, int64_t overhead_cycles,
                int64_t reduce_cycles, int64_t hop_cycles, int buffer_depth,
                double intake_per_cycle):
    """Simulate one pass of the stream; return ``(cycles, row_busy, row_stall)``.

    ``dense=True`` costs the same layout with every weight nonzero: row r then
    gets ``features_per_row[r]`` AXPYs per output and the intake carries
    ``n_in`` weights per output.
    """
    cdef Py_ssize_t n_out = indptr.shape[0] - 1
    cdef Py_ssize_t n_in = row_of_feature.shape[0]
    cdef int64_t[::1] busy = np.zeros(rows, dtype=np.int64)
    cdef int64_t[::1] stall = np.zeros(rows, dtype=np.int64)
    cdef int64_t total = 0
    cdef int64_t *cnt = <int64_t *>calloc(rows, sizeof(int64_t))
    cdef int64_t *fc = <int64_t *>calloc(rows, sizeof(int64_t))      # compute thread free
    cdef int64_t *rfree = <int64_t *>calloc(rows, sizeof(int64_t))   # reduction thread free
    cdef int64_t *ehist = <int64_t *>calloc(<size_t>rows * buffer_depth, sizeof(int64_t))
    cdef Py_ssize_t i, p, r, d, s, slot, i0, i1
    cdef int64_t before, t_first, t_ctrl, lat, start, ready, fin, g, prev_g, e, work, n
    # Outputs per nogil chunk: about _SIGNAL_CHECK_STEPS row updates.
    cdef Py_ssize_t chunk = <Py_ssize_t>(_SIGNAL_CHECK_STEPS // (rows + 1)) + 1
    if cnt == NULL or fc == NULL or rfree == NULL or ehist == NULL:
        free(cnt); free(fc); free(rfree); free(ehist)
        raise MemoryError()
    i0 = 0
    try:
        while i0 < n_out:
            i1 = i0 + chunk if n_out - i0 > chunk else n_out
            with nogil:
                for i in range(i0, i1):
                    # Intake: messages are weights in output-major order plus one control
                    # message per output.
                    if dense:
                        before = <int64_t>i * n_in + i
                        t_first = _arrival(before + 1, intake_per_cycle)
                        t_ctrl = _arrival(before + n_in + 1, intake_per_cycle)
                    else:
                        before = <int64_t>indptr[i] + i
                        t_first = _arrival(before + 1, intake_per_cycle)
                        t_ctrl = _arrival(<int64_t>indptr[i + 1] + i + 1, intake_per_cycle)
                        for p in range(indptr[i], indptr[i + 1]):
                            cnt[row_of_feature[indices[p]]] += 1
                    slot = i % buffer_depth
                    # Compute threads: AXPYs of this output, then copy + reset once the
                    # control message is in and a partial-sum buffer is free.
                    for r in range(rows):
                        n = features_per_row[r] if dense else cnt[r]
                        cnt[r] = 0
                        lat = hop_cycles * (r + cols)   # down the intake column, then across the row
                        start = _max(fc[r], t_first + lat)
                        work = n * axpy_cycles
                        ready = _max(start + work, t_ctrl + lat)
                        fin = _max(ready, ehist[r * buffer_depth + slot]) + overhead_cycles
                        stall[r] += fin - fc[r] - work - overhead_cycles
                        busy[r] += work + overhead_cycles
                        fc[r] = fin
                    # Reduction ring of this column: starts below the destination row
                    # d = i mod rows and ends on it; cut-through, one hop per step.
                    d = i % rows
                    s = d + 1
                    if s == rows:
                        s = 0
                    r = s
                    prev_g = 0
                    e = 0
                    for p in range(rows):
                        g = _max(fc[r], rfree[r])
                        if p > 0:
                            g = _max(g, prev_g + hop_cycles)
                        e = g + reduce_cycles
                        rfree[r] = e
                        ehist[r * buffer_depth + slot] = e
                        prev_g = g
                        r += 1
                        if r == rows:
                            r = 0
                    if e > total:
                        total = e
            i0 = i1
            PyErr_CheckSignals()  # raises KeyboardInterrupt on Ctrl-C
    finally:
        free(cnt); free(fc); free(rfree); free(ehist)
    return total, np.asarray(busy), np.asarray(stall)


cdef inline uint64_t _splitmix(uint64_t *state) nogil:
    state[0] += 0x9E3779B97F4A7C15ULL
    cdef uint64_t z = state[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


def random_pattern(int64_t n_out, int64_t n_in, double density, uint64_t seed):
    """Uniform random sparsity pattern (each entry kept with ``density``).

    Returns ``(indptr, indices)`` as int64/int32 arrays with sorted indices.
    Geometric skipping costs O(nnz), so a GPT-3 layer (60 M nonzeros) takes well
    under a second.
    """
    cdef int64_t expected = <int64_t>(density * n_out * n_in * 1.01 + 1024)
    cdef int64_t[::1] indptr = np.zeros(n_out + 1, dtype=np.int64)
    indices_arr = np.empty(expected, dtype=np.int32)
    cdef int32_t[::1] indices = indices_arr
    cdef uint64_t state = seed
    cdef double log_q = log(1.0 - density) if density < 1.0 else 0.0
    cdef int64_t pos = 0, total = n_out * n_in, k = 0, gap, row = 0, col = 0
    cdef double u
    while True:
        if (k & (_SIGNAL_CHECK_STEPS - 1)) == 0:
            PyErr_CheckSignals()  # raises KeyboardInterrupt on Ctrl-C
        if density >= 1.0:
            gap = 0
        else:
            u = ((_splitmix(&state) >> 11) + 0.5) * (1.0 / 9007199254740992.0)
            gap = <int64_t>(log(u) / log_q)
        pos += gap
        if pos >= total:
            break
        col += gap
        while col >= n_in:    # a gap rarely spans more than one row
            col -= n_in
            row += 1
        if k == indices.shape[0]:
            indices_arr = np.resize(indices_arr, 2 * k + 1024)
            indices = indices_arr
        indices[k] = <int32_t>col
        indptr[row + 1] += 1
        k += 1
        pos += 1
        col += 1
    return np.cumsum(indptr), indices_arr[:k].copy()
