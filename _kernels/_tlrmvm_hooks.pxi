# The test hooks of _tlrmvm.pyx (included there after the helpers they call): the queues
# and phase-2 blocks a product makes, for tests that compare them with the items' work.


def queues_by_work(const int64_t[::1] cum not None, int n_threads):
    """The queues ``ws_part_queues_by_work`` (_part_queues.h) makes for items of running
    work ``cum`` on ``n_threads`` threads: an (n_queues, 2) int64 array of each queue's first
    item and one past its last (a test hook)."""
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    cdef Py_ssize_t n = cum.shape[0]
    cdef ws_part_queue one
    cdef int64_t n_queues
    cdef ws_part_queue* qs = ws_part_queues_by_work(n, n_threads, &cum[0] if n else NULL, &one,
                                                    &n_queues)
    return _queue_bounds(qs, n_queues, &one)


cdef object _queue_bounds(ws_part_queue* qs, int64_t n_queues, ws_part_queue* one):
    """The hooks' answer: each queue's (first, end), as an (n_queues, 2) int64 array; frees
    the queues."""
    out = cnp.PyArray_ZEROS(2, [n_queues, 2], cnp.NPY_INT64, 0)
    cdef int64_t[:, ::1] o = out
    cdef Py_ssize_t k
    for k in range(n_queues):
        o[k, 0] = qs[k].next
        o[k, 1] = qs[k].end
    ws_part_queues_free(qs, one)
    return out


def phase_queues(tuple index_arrays not None, cnp.ndarray items not None, bint adjoint,
                 int phase, int n_threads):
    """The queues a product makes for phase ``phase`` (1 or 3) of its ``items`` on
    ``n_threads`` threads (``_phase_cum``; ``index_arrays`` as ``tlr_matmat`` takes them,
    row_ptr to perm): an (n_queues, 2) int64 array of each queue's first item and one past
    its last (a test hook)."""
    if n_threads < 1 or phase not in (1, 3):
        raise ValueError(f"need n_threads >= 1 and phase 1 or 3, got {n_threads}, {phase}")
    if len(index_arrays) < 6:  # (read below without bounds checks)
        raise ValueError(f"need the index arrays {_INDEX_NAMES[:6]}, got {len(index_arrays)}")
    _need_items(items, "items")
    cdef int a
    for a in range(6):
        _need(<cnp.ndarray?>index_arrays[a], cnp.NPY_INT64, 1, False, _INDEX_NAMES[a])
    cdef const int64_t* it = _i64(items)
    cdef Py_ssize_t n = cnp.PyArray_DIM(items, 0), k
    # (phase 1 of the forward and 3 of the adjoint run over tile columns, the others rows)
    cdef cnp.ndarray tile_ptr = index_arrays[1 if adjoint != (phase == 1) else 0]
    cdef int64_t n_tiles = cnp.PyArray_DIM(tile_ptr, 0) - 1
    for k in range(n):  # (the kernels trust the plan's items; this hook checks them)
        if not 0 <= it[3 * k] < n_tiles or not 0 <= it[3 * k + 1] <= it[3 * k + 2]:
            raise ValueError(f"item {k} is not a (tile, start, stop) of this operator")
    cdef const int64_t* ptrs[6]
    for a in range(6):
        ptrs[a] = _i64(index_arrays[a])
    cdef int64_t* cum = _phase_cum(adjoint, phase, it, n, ptrs, n_threads)
    cdef ws_part_queue one
    cdef int64_t n_queues
    cdef ws_part_queue* qs = ws_part_queues_by_work(n, n_threads, cum, &one, &n_queues)
    free(cum)
    return _queue_bounds(qs, n_queues, &one)


def shuffle_block(Py_ssize_t K, int n_threads):
    """Positions per block of phase 2 for ``K`` positions on ``n_threads`` threads
    (``_shuffle_block``; the trace counts phase 2 in these blocks)."""
    if K < 0 or n_threads < 1:  # (the C helper divides by 4 n_threads)
        raise ValueError(f"need K >= 0 and n_threads >= 1, got {K}, {n_threads}")
    return _shuffle_block(K, n_threads)
