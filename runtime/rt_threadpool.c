/* rt_threadpool.c - a small fork-join pool for intra-op parallelism. */
#include "rt_threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define POOL_MAX 64

typedef struct job {
    void (*fn)(void *arg, int64_t begin, int64_t end);
    void *arg;
    int64_t n, chunk;
    atomic_llong next;     /* next chunk start */
    atomic_int pending;    /* chunks not finished */
} job;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_busy = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static int g_nthreads;
static job *g_job;          /* guarded by g_mu */
static unsigned g_job_seq;  /* guarded by g_mu */
static int g_active;        /* workers inside g_job; guarded by g_mu */

static void run_chunks(job *j) {
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next, j->chunk);
        if (b >= j->n) return;
        int64_t e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->arg, b, e);
        if (atomic_fetch_sub(&j->pending, 1) == 1) {
            pthread_mutex_lock(&g_mu);
            pthread_cond_broadcast(&g_done_cv);
            pthread_mutex_unlock(&g_mu);
        }
    }
}

static void *worker(void *unused) {
    (void)unused;
    unsigned seen = 0;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_job == NULL || g_job_seq == seen) pthread_cond_wait(&g_work_cv, &g_mu);
        seen = g_job_seq;
        job *j = g_job;
        g_active++;
        pthread_mutex_unlock(&g_mu);
        run_chunks(j);
        pthread_mutex_lock(&g_mu);
        /* The job lives on its caller's stack: the caller waits for us. */
        if (--g_active == 0) pthread_cond_broadcast(&g_done_cv);
    }
    return NULL;
}

/* Grows the pool to `want` helper threads (the caller is one more). */
static void ensure_threads(int want) {
    if (want > POOL_MAX) want = POOL_MAX;
    pthread_mutex_lock(&g_mu);
    while (g_nthreads < want) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, worker, NULL);
        pthread_attr_destroy(&a);
        if (rc != 0) break;
        g_nthreads++;
    }
    pthread_mutex_unlock(&g_mu);
}

void rt_parallel_for(int nthreads, int64_t n, int64_t min_chunk,
                     void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    if (nthreads <= 1 || n <= min_chunk || pthread_mutex_trylock(&g_busy) != 0) {
        fn(arg, 0, n);
        return;
    }
    ensure_threads(nthreads - 1);
    job j;
    j.fn = fn;
    j.arg = arg;
    j.n = n;
    /* A few chunks per thread balance uneven work without much overhead. */
    int64_t chunk = (n + (int64_t)nthreads * 4 - 1) / ((int64_t)nthreads * 4);
    j.chunk = chunk < min_chunk ? min_chunk : chunk;
    atomic_init(&j.next, 0);
    atomic_init(&j.pending, (int)((n + j.chunk - 1) / j.chunk));
    pthread_mutex_lock(&g_mu);
    g_job = &j;
    g_job_seq++;
    pthread_cond_broadcast(&g_work_cv);
    pthread_mutex_unlock(&g_mu);
    run_chunks(&j);
    pthread_mutex_lock(&g_mu);
    g_job = NULL; /* no new worker joins */
    while (atomic_load(&j.pending) > 0 || g_active > 0) pthread_cond_wait(&g_done_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_busy);
}
