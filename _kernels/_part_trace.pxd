# The part trace of the sweeps (_part_trace.h), cimported by _spmm and _tlrmvm; each module
# gets its own armed state, and _part_trace.pxi its part_trace_arm and part_trace.
from libc.stdint cimport int64_t

from _part_queues cimport ws_part_queue

cdef extern from "_part_trace.h" nogil:
    int WS_TRACE_HEAD
    void ws_trace_arm(int64_t* buf, int64_t cap)
    int64_t* ws_trace_begin(int64_t n_parts, int64_t* t0)
    int64_t ws_trace_now_()
    void ws_trace_part(int64_t* b, int64_t part, int64_t thread, int64_t t0, int64_t start)
    void ws_trace_end(int64_t* b, int64_t n_parts, int64_t t0)
    void ws_trace_end3(int64_t* b, int64_t n_parts, int64_t t0, int64_t p2, int64_t p3)
    void ws_trace_one(int64_t* b, int64_t t0)
    int64_t* ws_trace_shift(int64_t* b, int64_t first)
    int64_t ws_part_step(ws_part_queue* q, int64_t n_queues, int64_t* at, int64_t* left,
                         int64_t* b, int64_t t0, int64_t done, int64_t* ts, int64_t thread)
