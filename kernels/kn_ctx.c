/* kn_ctx.c - the services every kernel gets from its context: output tensors
 * from a buffer pool, the intra-op parallel-for, cancellation. The executor
 * (runtime/graph) fills a kn_ctx per run; kernels only call these. */
#include "kn_ctx.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kn_threadpool.h"
#include "ms_memlimit.h"

/* ================= buffer pool ================= */

/* Free buffers are kept for reuse, at most POOL_KEEP of them and at most
 * max_free bytes in all (a burst of large requests must not stay resident),
 * and each is freed once it has been idle for its reuse window: a
 * process-wide trimmer thread, started with the first pool, walks every live
 * pool for that and then hands freed heap memory back to the system
 * (malloc_trim).
 *
 * The reuse window follows the request rate: it is idle_ms, or POOL_GAP_MULT
 * times the longest pause between two buffer requests of this pool seen in
 * the last idle_max_ms, whichever is longer, and never more than idle_max_ms.
 * A fixed window shorter than the time between a client's requests (a
 * whole CT series takes seconds to send and parse on a loaded machine) made
 * every request fault its volume in again; pauses longer than idle_max_ms /
 * POOL_GAP_MULT are not a rate worth keeping memory for and are ignored, so
 * after a burst memory still goes back within idle_max_ms at the most.
 *
 * One exception, learned from a miss: a client that repeats one large
 * request slowly (a 600-slice series that takes 30 s of wall time on a
 * starved CPU) asks for its volume again only after the window above has
 * freed it. The trimmer remembers the POOL_GHOSTS largest buffers it freed
 * in the last such window (size and when they came back); a get that finds no free buffer but a
 * remembered one of its size learns how long that buffer would have had to
 * wait (the come-back time), and from then on buffers are kept for
 * POOL_GAP_MULT times the longest come-back time learned, up to
 * POOL_BACK_MULT x idle_max_ms. What is learned lapses unless a get keeps
 * arriving within that window, so memory of a burst still goes back within
 * one such window after the client stops. Not where idle_max_ms <=
 * idle_ms (a fixed window is asked for). */
#define POOL_KEEP 64                                   /* most free buffers kept */
#define POOL_IDLE_MS_DEFAULT 2000                      /* shortest reuse window */
#define POOL_IDLE_MAX_MS_DEFAULT 20000                 /* longest reuse window */
#define POOL_GAP_MULT 2
#define POOL_TRIM_PERIOD_MS 250
#define POOL_GHOSTS 8    /* buffers freed by the trimmer that are remembered */
#define POOL_BACK_MULT 6 /* the learned window's cap, in idle_max_ms */

struct kn_pool {
    pthread_mutex_t mu;
    atomic_int refs;   /* creator + every live pooled buffer */
    int nfree;
    size_t free_bytes; /* sum of the free buffers' sizes */
    size_t max_free;
    int64_t idle_ms;     /* shortest reuse window; < 0: never trimmed */
    int64_t idle_max_ms; /* longest reuse window */
    int64_t last_get_ms; /* the last kn_pool_get (monotonic; 0: none yet) */
    int64_t gap_ms;      /* longest pause between two gets counted ... */
    int64_t gap_at_ms;   /* ... and when it ended */
    int64_t back_ms;     /* the longest come-back time learned (0: none) ... */
    int64_t back_until;  /* ... used for buffers freed until then */
    rt_buf *free_list[POOL_KEEP];
    int64_t expire_ms[POOL_KEEP]; /* when each free buffer's window ends (monotonic) */
    int64_t freed_ms[POOL_KEEP];  /* when each came back */
    struct {
        size_t size;
        int64_t freed_ms; /* 0: an empty slot */
    } ghost[POOL_GHOSTS]; /* buffers the trimmer freed, the largest kept (pool_remember) */
    kn_pool *prev, *next;        /* the trimmer's list of live pools */
};

static pthread_mutex_t g_pools_mu = PTHREAD_MUTEX_INITIALIZER;
static kn_pool *g_pools;
static pthread_once_t g_trimmer_once = PTHREAD_ONCE_INIT;
/* Set when a large buffer went back to the allocator outside the trimmer
 * (over the byte cap): glibc may keep such memory until malloc_trim. */
static atomic_int g_pools_dirty;

/* Millisecond resolution is all the idle trim needs: the coarse clock is a
 * plain read (it runs on every buffer release). */
static int64_t pool_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Removes free buffer i from the list, under p->mu (the last one takes its place). */
static void pool_unlist(kn_pool *p, int i) {
    p->nfree--;
    p->free_list[i] = p->free_list[p->nfree];
    p->expire_ms[i] = p->expire_ms[p->nfree];
    p->freed_ms[i] = p->freed_ms[p->nfree];
}

/* The longest come-back time learned (see the top). */
static int64_t pool_back_cap(const kn_pool *p) {
    return p->idle_max_ms * POOL_BACK_MULT / POOL_GAP_MULT;
}

/* Remembers, under p->mu, a buffer of `size` that came back at freed_ms and
 * is freed by the trimmer at `now`: in an empty or lapsed slot, else in
 * place of the smallest one remembered if not larger (a model's many small
 * intermediate buffers must not push out its volume's). */
static void pool_remember(kn_pool *p, size_t size, int64_t freed_ms, int64_t now) {
    int slot = -1;
    for (int i = 0; i < POOL_GHOSTS; i++) {
        if (p->ghost[i].freed_ms == 0 || now - p->ghost[i].freed_ms > pool_back_cap(p)) {
            slot = i;
            break;
        }
        if (slot < 0 || p->ghost[i].size < p->ghost[slot].size) slot = i;
    }
    if (p->ghost[slot].freed_ms != 0 && now - p->ghost[slot].freed_ms <= pool_back_cap(p) &&
        p->ghost[slot].size > size)
        return;
    p->ghost[slot].size = size;
    p->ghost[slot].freed_ms = freed_ms;
}

/* Frees, under p->mu, the free buffers whose window ended before `cutoff`
 * (all of them for INT64_MAX). Returns the bytes freed. The trimmer
 * (remember set) keeps each one's size and return time as a ghost (see the
 * top). The pool's references held by those buffers are dropped by the
 * caller (n_out of them), outside the lock. */
static size_t pool_drop_idle(kn_pool *p, int64_t cutoff, int remember, int *n_out) {
    size_t bytes = 0;
    int n = 0;
    for (int i = 0; i < p->nfree;) {
        if (p->expire_ms[i] < cutoff) {
            rt_buf *b = p->free_list[i];
            if (remember) pool_remember(p, b->size, p->freed_ms[i], cutoff);
            bytes += b->size;
            free(b->data);
            free(b);
            pool_unlist(p, i);
            n++;
        } else {
            i++;
        }
    }
    p->free_bytes -= bytes;
    *n_out = n;
    return bytes;
}

static void *pool_trimmer(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec ts = {0, POOL_TRIM_PERIOD_MS * 1000000L};
        nanosleep(&ts, NULL);
        size_t freed = 0;
        int64_t now = pool_now_ms();
        pthread_mutex_lock(&g_pools_mu);
        for (kn_pool *p = g_pools; p != NULL; p = p->next) {
            int n = 0;
            pthread_mutex_lock(&p->mu);
            if (p->idle_ms >= 0) freed += pool_drop_idle(p, now, 1, &n);
            pthread_mutex_unlock(&p->mu);
            /* Those buffers held references, but the pool's creator still
             * holds one (it is on this list), so this never frees the pool. */
            atomic_fetch_sub(&p->refs, n);
        }
        pthread_mutex_unlock(&g_pools_mu);
        if (freed > 0 || atomic_exchange(&g_pools_dirty, 0)) malloc_trim(0);
    }
    return NULL;
}

static void pool_start_trimmer(void) {
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    /* Without the thread, pools still honour their byte cap; only the idle
     * trim is lost. */
    (void)pthread_create(&t, &a, pool_trimmer, NULL);
    pthread_attr_destroy(&a);
}

static int64_t pool_env(const char *name, int64_t dflt) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return dflt;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end == '\0' && x >= 0 ? (int64_t)x : dflt;
}

size_t kn_pool_default_max_free(int64_t request_budget, long long memory_limit) {
    uint64_t quarter = memory_limit > 0 ? (uint64_t)memory_limit / 4 : 0;
    uint64_t cap = request_budget > 0 && (uint64_t)request_budget < quarter
                       ? (uint64_t)request_budget
                       : quarter;
    if (cap < KN_POOL_MAX_FREE_MIN) cap = KN_POOL_MAX_FREE_MIN;
    return cap > SIZE_MAX ? SIZE_MAX : (size_t)cap;
}

/* 0 until set or first needed (reading the cgroup files once, not per pool). */
static _Atomic size_t g_default_max_free;

void kn_pool_set_default_max_free(size_t max_free_bytes) {
    atomic_store(&g_default_max_free, max_free_bytes);
}

static size_t pool_default_max_free(void) {
    size_t v = atomic_load(&g_default_max_free);
    if (v == 0) {
        v = kn_pool_default_max_free((int64_t)MS_BUDGET_DEFAULT, ms_memory_limit());
        size_t unset = 0;
        /* a value set meanwhile wins */
        if (!atomic_compare_exchange_strong(&g_default_max_free, &unset, v)) v = unset;
    }
    return v;
}

kn_pool *kn_pool_new(void) {
    kn_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->refs, 1);
    int64_t cap = pool_env("DCMSERVE_POOL_MAX_FREE_BYTES", -1);
    p->max_free = cap >= 0 ? (size_t)cap : pool_default_max_free();
    p->idle_ms = pool_env("DCMSERVE_POOL_IDLE_MS", POOL_IDLE_MS_DEFAULT);
    p->idle_max_ms = pool_env("DCMSERVE_POOL_IDLE_MAX_MS", POOL_IDLE_MAX_MS_DEFAULT);
    pthread_once(&g_trimmer_once, pool_start_trimmer);
    pthread_mutex_lock(&g_pools_mu);
    p->next = g_pools;
    if (g_pools) g_pools->prev = p;
    g_pools = p;
    pthread_mutex_unlock(&g_pools_mu);
    return p;
}

void kn_pool_set_limits(kn_pool *p, size_t max_free_bytes, int64_t idle_ms) {
    pthread_mutex_lock(&p->mu);
    p->max_free = max_free_bytes;
    p->idle_ms = idle_ms;
    pthread_mutex_unlock(&p->mu);
}

void kn_pool_set_idle_max(kn_pool *p, int64_t idle_max_ms) {
    pthread_mutex_lock(&p->mu);
    p->idle_max_ms = idle_max_ms;
    pthread_mutex_unlock(&p->mu);
}

/* The reuse window of a buffer freed now, under p->mu (see the top). */
static int64_t pool_window_ms(const kn_pool *p, int64_t now) {
    int64_t w = p->idle_ms;
    if (p->gap_ms > 0 && now - p->gap_at_ms <= p->idle_max_ms) {
        int64_t g = p->gap_ms * POOL_GAP_MULT;
        if (g > w) w = g;
    }
    w = w < p->idle_max_ms ? w : (p->idle_max_ms > p->idle_ms ? p->idle_max_ms : p->idle_ms);
    if (p->back_ms > 0 && now <= p->back_until && p->back_ms * POOL_GAP_MULT > w)
        w = p->back_ms * POOL_GAP_MULT;
    return w;
}

/* A get of `size` at `now` found no free buffer, under p->mu: if the trimmer
 * freed one that would have served it, learn how long after its return it
 * was asked for again (see the top). */
static void pool_learn_back(kn_pool *p, size_t size, int64_t now) {
    if (p->idle_ms < 0 || p->idle_max_ms <= p->idle_ms) return;
    int64_t cap = pool_back_cap(p);
    for (int i = 0; i < POOL_GHOSTS; i++) {
        size_t s = p->ghost[i].size;
        if (p->ghost[i].freed_ms == 0 || s < size || s > size * 2 + 256) continue;
        int64_t back = now - p->ghost[i].freed_ms;
        p->ghost[i].freed_ms = 0; /* learned once */
        if (back > cap) continue;
        if (now > p->back_until) p->back_ms = 0; /* lapsed: learn afresh */
        if (back > p->back_ms) p->back_ms = back;
        p->back_until = now + p->back_ms * POOL_GAP_MULT;
        return;
    }
}

/* Records a get at `now`, under p->mu: the pause since the previous one
 * counts towards the window if it is short enough to be a request rate, and
 * replaces the remembered one if longer or if that one is too old. */
static void pool_note_get(kn_pool *p, int64_t now) {
    if (p->last_get_ms > 0) {
        int64_t gap = now - p->last_get_ms;
        if (gap * POOL_GAP_MULT <= p->idle_max_ms &&
            (gap >= p->gap_ms || now - p->gap_at_ms > p->idle_max_ms)) {
            p->gap_ms = gap;
            p->gap_at_ms = now;
        }
    }
    p->last_get_ms = now;
}

size_t kn_pool_free_bytes(kn_pool *p) {
    pthread_mutex_lock(&p->mu);
    size_t n = p->free_bytes;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void pool_unref(kn_pool *p) {
    if (atomic_fetch_sub(&p->refs, 1) != 1) return;
    for (int i = 0; i < p->nfree; i++) {
        free(p->free_list[i]->data);
        free(p->free_list[i]);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void kn_pool_release(kn_pool *p) {
    if (p == NULL) return;
    /* Off the trimmer's list first: after this only buffers in use hold
     * the pool, and they come back through pooled_release. */
    pthread_mutex_lock(&g_pools_mu);
    if (p->prev) p->prev->next = p->next;
    else g_pools = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    pthread_mutex_unlock(&g_pools_mu);
    /* Free what is idle now; from here on nothing is kept (refs check in
     * pooled_release is not enough alone: the creator's ref is dropped last). */
    pthread_mutex_lock(&p->mu);
    int n = 0;
    pool_drop_idle(p, INT64_MAX, 0, &n);
    p->max_free = 0;
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_sub(&p->refs, n);
    pool_unref(p);
}

/* A pooled buffer's last reference dropped: keep it, struct and memory, for
 * reuse (release_frees is set on pool buffers, so rt_buf_unref leaves the
 * struct to us), or free both. */
static void pooled_release(rt_buf *b) {
    kn_pool *p = b->owner;
    pthread_mutex_lock(&p->mu);
    if (p->nfree < POOL_KEEP && atomic_load(&p->refs) > 1 &&
        b->size <= p->max_free - p->free_bytes && p->free_bytes <= p->max_free) {
        int64_t now = pool_now_ms();
        p->expire_ms[p->nfree] = now + pool_window_ms(p, now);
        p->freed_ms[p->nfree] = now;
        p->free_list[p->nfree++] = b;
        p->free_bytes += b->size;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    pthread_mutex_unlock(&p->mu);
    if (b->size >= ((size_t)1 << 20)) atomic_store(&g_pools_dirty, 1);
    free(b->data);
    free(b);
    pool_unref(p);
}

/* Asks the kernel for transparent huge pages on the 2 MiB-aligned inside of a
 * fresh large buffer (before anything touched it): a 150 MB CT volume is
 * then faulted in as about 70 pages of 2 MiB instead of 36,000 of 4 KiB,
 * where the fault handling, not the zeroing, was most of the cost. Only
 * advice: where THP is off or no huge page is free, nothing changes. */
#define POOL_HUGE_MIN ((size_t)8 << 20)
#define POOL_HUGE_PAGE ((uintptr_t)2 << 20)
static void pool_advise_huge(void *data, size_t size) {
#ifdef MADV_HUGEPAGE
    if (size < POOL_HUGE_MIN) return;
    uintptr_t lo = ((uintptr_t)data + POOL_HUGE_PAGE - 1) & ~(POOL_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)data + size) & ~(POOL_HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)data;
    (void)size;
#endif
}

rt_buf *kn_pool_get(kn_pool *p, size_t size) {
    pthread_mutex_lock(&p->mu);
    int64_t now = pool_now_ms();
    pool_note_get(p, now);
    int best = -1;
    for (int i = 0; i < p->nfree; i++) {
        size_t s = p->free_list[i]->size;
        if (s >= size && s <= size * 2 + 256 && (best < 0 || s < p->free_list[best]->size))
            best = i;
    }
    if (best >= 0) {
        rt_buf *b = p->free_list[best];
        p->free_bytes -= b->size;
        pool_unlist(p, best);
        /* a client still at its slow cadence keeps what was learned */
        if (p->back_ms > 0 && now <= p->back_until) p->back_until = now + p->back_ms * POOL_GAP_MULT;
        pthread_mutex_unlock(&p->mu);
        atomic_init(&b->refs, 1);
        return b;
    }
    pool_learn_back(p, size, now);
    pthread_mutex_unlock(&p->mu);
    rt_buf *b = rt_buf_alloc(size);
    if (b == NULL) return NULL;
    pool_advise_huge(b->data, size);
    b->release = pooled_release;
    b->release_frees = 1;
    b->owner = p;
    atomic_fetch_add(&p->refs, 1);
    return b;
}

/* ================= kernel context services ================= */

ms_status kn_ctx_output(kn_ctx *ctx, int idx, rt_dtype dt, const rt_shape *shape, rt_tensor **out) {
    (void)idx;
    if (ctx != NULL && ctx->budget != NULL && dt != RT_DT_STRING && rt_dtype_is_pod(dt)) {
        int64_t n = rt_shape_nelem(shape);
        size_t es = rt_dtype_size(dt);
        if (n > 0 && (uint64_t)n <= SIZE_MAX / es) {
            ms_status bst = ms_budget_check(ctx->budget, (uint64_t)n * es, "a node output");
            if (bst != MS_OK) return bst;
        }
    }
    if (ctx == NULL || ctx->pool == NULL || dt == RT_DT_STRING || !rt_dtype_is_pod(dt))
        return rt_tensor_new(dt, shape, out);
    int64_t n = rt_shape_nelem(shape);
    if (n < 0) {
        char sb[128];
        return ms_errf(MS_EINVAL, "invalid output shape %s", rt_shape_str(shape, sb, sizeof sb));
    }
    size_t es = rt_dtype_size(dt);
    if ((uint64_t)n > SIZE_MAX / es) return ms_errf(MS_ENOMEM, "output too large");
    rt_buf *b = kn_pool_get(ctx->pool, (size_t)n * es);
    if (b == NULL) return ms_errf(MS_ENOMEM, "out of memory for a %lld-element output", (long long)n);
    ms_status st = rt_tensor_new_on(dt, shape, b, 0, out);
    rt_buf_unref(b);
    return st;
}

void kn_ctx_parallel_for(kn_ctx *ctx, int64_t n, int64_t min_chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    kn_parallel_for(ctx ? ctx->nthreads : 1, n, min_chunk, fn, arg);
}

int kn_ctx_cancelled(kn_ctx *ctx) {
    return ctx && ctx->cancelled && atomic_load(ctx->cancelled);
}

