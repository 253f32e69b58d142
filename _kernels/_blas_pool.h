/*
 * OpenBLAS's parallel calls on the kernels' OpenMP team (wsesparse/_blas_share.py).
 *
 * OpenBLAS built with pthreads (numpy's and scipy's wheels) runs a threaded call (dgemm,
 * dgemv, ddot, ...) on its own server threads, which busy-wait about 0.1 s after each call
 * on the cores the kernels' threads need next. Given a callback (0.3.28 and later:
 * openblas_set_threads_callback_function), it hands each call's jobs to the callback
 * instead: ws_blas_callback runs them on this module's OpenMP team, so one pool of threads
 * serves both libraries.
 *
 * The callback receives dojob = OpenBLAS's exec_threads(slot, job, 0), which marks the
 * slot's entry of OpenBLAS's thread_status array busy and uses the slot's scratch buffer
 * (allocated at first use). Slots 0 .. blas_num_threads - 2 belong to the library's
 * server threads, which would run a job they find marked there: so jobs take slots from
 * ws_blas_base on (the largest blas_num_threads of the libraries registered, read at each
 * call), and the Python side registers only libraries where every such slot exists
 * (below MAX_THREADS). Level-3 jobs wait for each other, so all of a call's jobs must run
 * at once: on an OpenMP team of exactly that many threads, or else (inside a parallel
 * region, or a team the runtime would make smaller) on threads created for the call. One
 * call at a time (a mutex): the slots are shared, so threaded BLAS calls from several
 * Python threads take turns. OpenBLAS 0.3.28's exec_threads used a slot's buffer without
 * allocating it (NULL past the server threads' slots: a crash), fixed upstream after it;
 * wsesparse/_blas_share.py takes only 0.3.30 and 0.3.31, whose code was read.
 */
#ifndef WSESPARSE_BLAS_POOL_H
#define WSESPARSE_BLAS_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "_omp_compat.h"

typedef void (*ws_blas_dojob)(int slot, void *job, int data);

#define WS_BLAS_LIBS 8
static const volatile int *ws_blas_nthreads[WS_BLAS_LIBS];  /* each library's count */
static int ws_blas_nlibs = 0;
static int ws_blas_max_slots = 0;  /* the smallest MAX_THREADS of those libraries */
static pthread_mutex_t ws_blas_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int ws_blas_team = 0;      /* threads of the last call's team */
static volatile double ws_blas_when = 0;   /* CLOCK_MONOTONIC seconds at its end */
static volatile long ws_blas_calls = 0;    /* calls run, and how many on own threads */
static volatile long ws_blas_thread_calls = 0;
static int ws_blas_force_threads = 0;      /* (tests: always the threads path) */

typedef struct {
    ws_blas_dojob dojob;
    void *job;
    int slot, data;
} ws_blas_job;

static void *ws_blas_run(void *p)
{
    ws_blas_job *j = (ws_blas_job *)p;
    j->dojob(j->slot, j->job, j->data);
    return NULL;
}

/* Jobs 1.. on threads created for the call, job 0 on the caller. A thread that cannot
 * be started stops the process: the jobs already started may wait for it forever
 * (level-3 jobs wait for each other), and OpenBLAS stops the process too when it cannot
 * start its own threads. */
static void ws_blas_on_threads(ws_blas_dojob dojob, int numjobs, size_t elsize,
                               char *jobdata, int data, int base)
{
    ws_blas_job jobs[64];
    pthread_t tid[64];
    for (int i = 0; i < numjobs; ++i) {
        jobs[i].dojob = dojob;
        jobs[i].job = jobdata + (size_t)i * elsize;
        jobs[i].slot = base + i;
        jobs[i].data = data;
    }
    for (int i = 1; i < numjobs; ++i)
        if (pthread_create(&tid[i], NULL, ws_blas_run, &jobs[i]) != 0) {
            fprintf(stderr, "wsesparse: could not start %d threads for an OpenBLAS "
                    "call\n", numjobs);
            abort();
        }
    ws_blas_run(&jobs[0]);
    for (int i = 1; i < numjobs; ++i)
        pthread_join(tid[i], NULL);
}

static void ws_blas_callback(int sync, ws_blas_dojob dojob, int numjobs, size_t elsize,
                             void *jobdata, int data)
{
    (void)sync;  /* (always 1: the call returns when its jobs are done) */
    pthread_mutex_lock(&ws_blas_lock);
    int base = 0;
    for (int k = 0; k < ws_blas_nlibs; ++k)
        if (*ws_blas_nthreads[k] > base)
            base = *ws_blas_nthreads[k];
    int team = numjobs, done = 0;
    if (base + numjobs > ws_blas_max_slots || numjobs > 64) {
        /* Registration keeps this from happening (a library whose thread count was raised
         * past half its slots after it): no slot is free, and level-3 jobs run one after
         * the other wait for each other forever. OpenBLAS stops the process too when it
         * cannot start its threads. */
        fprintf(stderr, "wsesparse: OpenBLAS asked for %d threads from slot %d of %d while "
                "its calls ran on wsesparse's threads (raise BLAS thread counts outside "
                "wsesparse.accelerated() blocks)\n", numjobs, base, ws_blas_max_slots);
        abort();
    }
#ifdef _OPENMP
    if (!done && numjobs > 1 && !ws_blas_force_threads && !omp_in_parallel()
        && !omp_get_dynamic() && numjobs <= omp_get_thread_limit()) {
        int short_team = 0;
#pragma omp parallel num_threads(numjobs)
        {
            const int t = omp_get_thread_num();
            if (omp_get_num_threads() == numjobs)
                dojob(base + t, (char *)jobdata + (size_t)t * elsize, data);
            else if (t == 0)
                short_team = 1;
        }
        done = !short_team;
    }
#endif
    if (!done && numjobs == 1) {
        dojob(base, jobdata, data);
        team = 1;
        done = 1;
    }
    if (!done) {
        ws_blas_on_threads(dojob, numjobs, elsize, (char *)jobdata, data, base);
        ws_blas_thread_calls = ws_blas_thread_calls + 1;
        team = 1;  /* (the OpenMP team did not run) */
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ws_blas_when = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    ws_blas_team = team;
    ws_blas_calls = ws_blas_calls + 1;
    pthread_mutex_unlock(&ws_blas_lock);
}

/* In a child forked while another thread was inside the callback the lock stays taken
 * (that thread does not exist there): a fresh one. Called by the child only. */
static void ws_blas_after_fork_child(void)
{
    pthread_mutex_init(&ws_blas_lock, NULL);
}

/* The thread counts of the libraries whose calls come here (n <= WS_BLAS_LIBS) and the
 * smallest of their MAX_THREADS; 0 on success. */
static int ws_blas_register(const int **counts, int n, int max_slots)
{
    if (n < 0 || n > WS_BLAS_LIBS || max_slots < 1)
        return -1;
    pthread_mutex_lock(&ws_blas_lock);
    for (int k = 0; k < n; ++k)
        ws_blas_nthreads[k] = counts[k];
    ws_blas_nlibs = n;
    ws_blas_max_slots = max_slots;
    pthread_mutex_unlock(&ws_blas_lock);
    return 0;
}

#endif
