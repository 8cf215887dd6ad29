/* kn_threadpool.c - a small fork-join pool for intra-op parallelism.
 *
 * A model runs many short parallel sections back to back (one or more per
 * op, often well under a millisecond each). Waking a sleeping thread through
 * a condition variable costs several microseconds each way, so workers spin
 * for a short while (SPIN_NS) after a job before they sleep, and the caller
 * spins the same while before it waits for stragglers. Idle, the pool
 * sleeps. */
#include "kn_threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#define POOL_MAX 64
#define SPIN_NS 50000 /* 50 us */

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
static atomic_int g_active; /* workers inside g_job; changed under g_mu */
static atomic_uint g_seq;   /* g_job_seq, readable without g_mu (spinning) */
static atomic_int g_nice = -1; /* kn_threadpool_set_nice */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until cond(arg) holds or SPIN_NS pass; returns whether it held. */
static int spin_until(int (*cond)(const void *), const void *arg) {
    int64_t t0 = 0;
    for (int i = 0;; i++) {
        if (cond(arg)) return 1;
        cpu_relax();
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (t0 == 0) t0 = t;
            else if (t - t0 > SPIN_NS) return 0;
        }
    }
}

static int seq_moved(const void *seen) {
    return atomic_load_explicit(&g_seq, memory_order_acquire) != *(const unsigned *)seen;
}

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

void kn_threadpool_set_nice(int nice) { atomic_store(&g_nice, nice > 19 ? 19 : nice); }

static void *worker(void *unused) {
    (void)unused;
    int nice = atomic_load(&g_nice);
    if (nice >= 0) (void)setpriority(PRIO_PROCESS, (id_t)gettid(), nice);
    unsigned seen = 0;
    for (;;) {
        spin_until(seq_moved, &seen); /* the next job usually follows at once */
        pthread_mutex_lock(&g_mu);
        while (g_job == NULL || g_job_seq == seen) {
            if (g_job == NULL) seen = g_job_seq; /* finished before we came */
            pthread_cond_wait(&g_work_cv, &g_mu);
        }
        seen = g_job_seq;
        job *j = g_job;
        atomic_fetch_add(&g_active, 1);
        pthread_mutex_unlock(&g_mu);
        run_chunks(j);
        pthread_mutex_lock(&g_mu);
        /* The job lives on its caller's stack: the caller waits for us. */
        if (atomic_fetch_sub(&g_active, 1) == 1) pthread_cond_broadcast(&g_done_cv);
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

static int job_done(const void *arg) {
    const job *j = arg;
    return atomic_load((atomic_int *)&j->pending) == 0 && atomic_load(&g_active) == 0;
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

void kn_parallel_for(int nthreads, int64_t n, int64_t min_chunk,
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
    atomic_store_explicit(&g_seq, g_job_seq, memory_order_release);
    pthread_cond_broadcast(&g_work_cv);
    pthread_mutex_unlock(&g_mu);
    run_chunks(&j);
    pthread_mutex_lock(&g_mu);
    g_job = NULL; /* no new worker joins */
    pthread_mutex_unlock(&g_mu);
    if (!spin_until(job_done, &j)) {
        pthread_mutex_lock(&g_mu);
        while (atomic_load(&j.pending) > 0 || atomic_load(&g_active) > 0)
            pthread_cond_wait(&g_done_cv, &g_mu);
        pthread_mutex_unlock(&g_mu);
    }
    pthread_mutex_unlock(&g_busy);
}
