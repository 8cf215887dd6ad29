/* kn_ctx.c - the services every kernel gets from its context: output tensors
 * from a buffer pool, the intra-op parallel-for, cancellation. The executor
 * (runtime/graph) fills a kn_ctx per run; kernels only call these. */
#include "kn_ctx.h"

#include <stdlib.h>
#include <string.h>

#include "kn_threadpool.h"

/* ================= buffer pool ================= */

#define POOL_KEEP 64   /* most free buffers kept */

struct kn_pool {
    pthread_mutex_t mu;
    atomic_int refs;   /* creator + every live pooled buffer */
    int nfree;
    rt_buf *free_list[POOL_KEEP];
};

kn_pool *kn_pool_new(void) {
    kn_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->refs, 1);
    return p;
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
    /* Free what is idle now; buffers in use come back through pooled_release. */
    pthread_mutex_lock(&p->mu);
    int n = p->nfree;
    rt_buf *idle[POOL_KEEP];
    memcpy(idle, p->free_list, sizeof(rt_buf *) * (size_t)n);
    p->nfree = 0;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++) {
        free(idle[i]->data);
        free(idle[i]);
        pool_unref(p);
    }
    pool_unref(p);
}

/* A pooled buffer's last reference dropped: keep it for reuse. The generic
 * rt_buf_unref frees the rt_buf struct after release() returns, so we hand
 * the memory to a fresh struct. */
static void pooled_release(rt_buf *b) {
    kn_pool *p = b->owner;
    rt_buf *keep = calloc(1, sizeof(*keep));
    pthread_mutex_lock(&p->mu);
    if (keep != NULL && p->nfree < POOL_KEEP && atomic_load(&p->refs) > 1) {
        *keep = (rt_buf){.data = b->data, .size = b->size, .release = pooled_release, .owner = p};
        p->free_list[p->nfree++] = keep;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    pthread_mutex_unlock(&p->mu);
    free(keep);
    free(b->data);
    pool_unref(p);
}

rt_buf *kn_pool_get(kn_pool *p, size_t size) {
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int i = 0; i < p->nfree; i++) {
        size_t s = p->free_list[i]->size;
        if (s >= size && s <= size * 2 + 256 && (best < 0 || s < p->free_list[best]->size))
            best = i;
    }
    if (best >= 0) {
        rt_buf *b = p->free_list[best];
        p->free_list[best] = p->free_list[--p->nfree];
        pthread_mutex_unlock(&p->mu);
        atomic_init(&b->refs, 1);
        return b;
    }
    pthread_mutex_unlock(&p->mu);
    rt_buf *b = rt_buf_alloc(size);
    if (b == NULL) return NULL;
    b->release = pooled_release;
    b->owner = p;
    atomic_fetch_add(&p->refs, 1);
    return b;
}

/* ================= kernel context services ================= */

ms_status kn_ctx_output(kn_ctx *ctx, int idx, rt_dtype dt, const rt_shape *shape, rt_tensor **out) {
    (void)idx;
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

