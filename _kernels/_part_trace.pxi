# The Python side of the part trace (_part_trace.h), included by _spmm.pyx and _tlrmvm.pyx:
# each module arms and reads its own.

# The buffers part_trace_arm has handed to _part_trace.h, the last the one in use. None is
# ever freed: a sweep on another Python thread may still write into one it took (a larger
# one is made only for more parts, with room for twice as many).
cdef list _trace_buffers = []
cdef object _trace_buffer = None


def part_trace_arm(Py_ssize_t capacity):
    """Arm this module's part trace (_part_trace.h) for its next sweep of at most
    ``capacity`` parts; read it with ``part_trace()``. The sweeps: in _spmm an SpMV (plain
    or by value codes) or SpMM (with several panels, the first panel's); in _tlrmvm a
    product's three phases (phase 1's items, phase 2's blocks, phase 3's items)."""
    global _trace_buffer
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    if (_trace_buffer is None
            or (_trace_buffer.shape[0] - WS_TRACE_HEAD) // 3 < capacity):
        _trace_buffer = cnp.PyArray_ZEROS(1, [WS_TRACE_HEAD + 3 * max(2 * capacity, 64)],
                                          cnp.NPY_INT64, 0)
        _trace_buffers.append(_trace_buffer)
    ws_trace_arm(<int64_t*>cnp.PyArray_DATA(_trace_buffer), capacity)


def part_trace():
    """The armed trace once a sweep has taken it: ``(parts, joined, phases)``; None when no
    sweep has recorded it (not yet, or one of more parts than it holds).

    ``parts``: an int64 array of one row per part (the team thread that took it, its start
    and its end, in nanoseconds from the caller's start of the sweep); ``joined``: the
    caller's time after the team joined; ``phases``: the first part of the second and the
    third phase (both ``len(parts)`` for a sweep of one phase)."""
    if _trace_buffer is None or _trace_buffer[0] < 0:
        return None
    n = int(_trace_buffer[0])
    head = WS_TRACE_HEAD
    return (_trace_buffer[head:head + 3 * n].reshape(n, 3).copy(), int(_trace_buffer[1]),
            (int(_trace_buffer[3]), int(_trace_buffer[4])))
