# The part queues of the sweeps (_part_queues.h), cimported by _spmm and _tlrmvm.
from libc.stdint cimport int64_t

cdef extern from "_part_queues.h" nogil:
    ctypedef struct ws_part_queue:
        int64_t next
        int64_t end
    ws_part_queue* ws_part_queues(int64_t n_parts, int64_t n_threads, ws_part_queue* one,
                                  int64_t* n_queues)
    ws_part_queue* ws_part_queues_by_work(int64_t n_parts, int64_t n_threads,
                                          const int64_t* cum, ws_part_queue* one,
                                          int64_t* n_queues)
    void ws_part_queues_free(ws_part_queue* q, ws_part_queue* one)
    void ws_part_count(int64_t* c)
    int WS_PARTS_SHARED
