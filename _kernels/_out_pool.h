/*
 * A numpy memory handler (NEP 49) that keeps the last freed large product
 * outputs for reuse.
 *
 * glibc serves allocations of 32 MiB and more with a fresh mmap every time
 * (its dynamic mmap threshold stops growing there), so every large result
 * array starts as untouched pages that the kernel faults in and zeroes while
 * the product writes them: at 32 MiB that cost more than the product itself
 * (M = K = 4096, N = 1024, float64, density 0.001: 9.6 ms with a new output,
 * 5.3 ms writing into an existing one; MKL keeps freed buffers in the same
 * way). sparse_matmul makes its large outputs with this handler active (only
 * for that np.empty call); such an array is an ordinary owner of its data, and
 * when it is freed its buffer waits in one of WS_POOL_SLOTS slots for a
 * request of exactly its size (the next product of the same shape in a loop).
 * Buffers come from posix_memalign (64-byte aligned, rows of the output on
 * cache lines) with the transparent-huge-page advice numpy gives its own.
 */
#ifndef WSESPARSE_OUT_POOL_H
#define WSESPARSE_OUT_POOL_H

#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <numpy/ndarraytypes.h>

#define WS_POOL_SLOTS 2

static struct {
    void *ptr;
    size_t size;
    unsigned long long age;  /* when it was parked: the oldest leaves first */
} ws_pool[WS_POOL_SLOTS];
static unsigned long long ws_pool_clock = 0;
/* Requests below min are left to malloc (glibc reuses its heap for them);
 * buffers above max are returned to the system at once. */
static size_t ws_pool_min = (size_t)32 << 20;
static size_t ws_pool_max = (size_t)1 << 30;
static pthread_mutex_t ws_pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void *ws_pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= ws_pool_min) {
        pthread_mutex_lock(&ws_pool_lock);
        for (int s = 0; s < WS_POOL_SLOTS; ++s) {
            if (ws_pool[s].ptr != NULL && ws_pool[s].size == size) {
                void *p = ws_pool[s].ptr;
                ws_pool[s].ptr = NULL;
                pthread_mutex_unlock(&ws_pool_lock);
                return p;
            }
        }
        pthread_mutex_unlock(&ws_pool_lock);
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (size >= ((size_t)1 << 22)) {
        const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        const uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1);
        const uintptr_t end = (uintptr_t)p + size;
        if (end > start)
            madvise((void *)start, end - start, MADV_HUGEPAGE);  /* advice only */
    }
#endif
    return p;
}

static void *ws_pool_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    return calloc(nelem ? nelem : 1, elsize ? elsize : 1);
}

static void *ws_pool_realloc(void *ctx, void *ptr, size_t new_size)
{
    (void)ctx;
    return realloc(ptr, new_size ? new_size : 1);
}

static void ws_pool_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    if (size >= ws_pool_min && size <= ws_pool_max) {
        pthread_mutex_lock(&ws_pool_lock);
        int slot = -1;
        for (int s = 0; s < WS_POOL_SLOTS && slot < 0; ++s)  /* an empty slot, */
            if (ws_pool[s].ptr == NULL)
                slot = s;
        if (slot < 0) {  /* else the oldest one */
            slot = 0;
            for (int s = 1; s < WS_POOL_SLOTS; ++s)
                if (ws_pool[s].age < ws_pool[slot].age)
                    slot = s;
        }
        void *evicted = ws_pool[slot].ptr;
        ws_pool[slot].ptr = ptr;
        ws_pool[slot].size = size;
        ws_pool[slot].age = ++ws_pool_clock;
        pthread_mutex_unlock(&ws_pool_lock);
        free(evicted);
        return;
    }
    free(ptr);
}

/* Returns the buffers waiting in the slots to the system; how many bytes. */
static size_t ws_pool_release(void)
{
    size_t released = 0;
    void *ptrs[WS_POOL_SLOTS];
    pthread_mutex_lock(&ws_pool_lock);
    for (int s = 0; s < WS_POOL_SLOTS; ++s) {
        ptrs[s] = ws_pool[s].ptr;
        if (ptrs[s] != NULL)
            released += ws_pool[s].size;
        ws_pool[s].ptr = NULL;
    }
    pthread_mutex_unlock(&ws_pool_lock);
    for (int s = 0; s < WS_POOL_SLOTS; ++s)
        free(ptrs[s]);
    return released;
}

/* Bytes waiting in the slots. */
static size_t ws_pool_cached(void)
{
    size_t total = 0;
    pthread_mutex_lock(&ws_pool_lock);
    for (int s = 0; s < WS_POOL_SLOTS; ++s)
        if (ws_pool[s].ptr != NULL)
            total += ws_pool[s].size;
    pthread_mutex_unlock(&ws_pool_lock);
    return total;
}

static PyDataMem_Handler ws_pool_handler = {
    "wsesparse_output_pool",
    1,
    {NULL, ws_pool_malloc, ws_pool_calloc, ws_pool_realloc, ws_pool_free},
};

/* The handler as the capsule numpy's PyDataMem_SetHandler takes (new reference). */
static PyObject *ws_pool_capsule(void)
{
    return PyCapsule_New(&ws_pool_handler, "mem_handler", NULL);
}

#endif
