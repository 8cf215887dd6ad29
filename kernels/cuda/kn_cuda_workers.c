/* kn_cuda_workers.c - the CUDA backend's runtime under its op files
 * (kn_cuda.h): the process's one backend, the per-thread workers (a stream
 * and pinned staging each), device blocks and tensors, the copies between
 * host and GPU, the load-time upload of constants, and the CPU fallback of
 * a node (its inputs copied to the host, its outputs back). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* ================= workers: stream, staging, device blocks ================= */

static pthread_mutex_t g_be_mu = PTHREAD_MUTEX_INITIALIZER;
static kn_cuda_be *g_be; /* the process's CUDA backend (prepare has no backend argument) */
static uint64_t g_gen;   /* backends made so far: a thread's worker is for one of them */
static _Thread_local kn_cuda_worker *tls_w;
static _Thread_local uint64_t tls_gen;

kn_cuda_be *kn_cuda__be_get(void) {
    return g_be;
}

ms_status kn_cuda__be_register(kn_cuda_be *be) {
    pthread_mutex_lock(&g_be_mu);
    if (g_be != NULL) {
        pthread_mutex_unlock(&g_be_mu);
        return ms_errf(MS_EBUSY, "a CUDA backend exists already (one per process)");
    }
    be->gen = ++g_gen;
    g_be = be;
    pthread_mutex_unlock(&g_be_mu);
    return MS_OK;
}

void kn_cuda__be_unregister(kn_cuda_be *be) {
    pthread_mutex_lock(&g_be_mu);
    if (g_be == be) g_be = NULL;
    pthread_mutex_unlock(&g_be_mu);
}

/* The calling thread's worker (a stream per inference worker), made on its
 * first use. */
ms_status kn_cuda__get_worker(kn_cuda_be *be, kn_cuda_worker **out) {
    if (tls_w != NULL && tls_gen == be->gen) {
        *out = tls_w;
        return MS_OK;
    }
    ms_status st = kn_cuda_set_device(be->gpu);
    if (st != MS_OK) return st;
    kn_cuda_worker *w = calloc(1, sizeof(*w));
    if (w == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if ((st = kn_cuda_stream_new(&w->stream)) != MS_OK) {
        free(w);
        return st;
    }
    w->gen = be->gen;
    pthread_mutex_lock(&be->mu);
    w->next = be->workers;
    be->workers = w;
    pthread_mutex_unlock(&be->mu);
    tls_w = w;
    tls_gen = be->gen;
    *out = w;
    return MS_OK;
}

static void block_free(kn_cuda_block *d) {
    kn_cuda_event_free(d->ev);
    kn_cuda_arena_free(d->a); /* cudaFree waits for the device */
    free(d);
}

/* Frees every cached (idle) block; cudaFree waits for the device, so work
 * still queued on a block is done first. */
void kn_cuda__trim_caches(kn_cuda_be *be) {
    pthread_mutex_lock(&be->cache_mu);
    kn_cuda_block *d = be->cache;
    be->cache = NULL;
    pthread_mutex_unlock(&be->cache_mu);
    while (d) {
        kn_cuda_block *nx = d->next;
        block_free(d);
        d = nx;
    }
}

/* One cudaMalloc charged to the budget; when the cap or the device is full,
 * the idle blocks go back first and it is tried once more. */
ms_status kn_cuda__arena_new_trim(kn_cuda_be *be, const char *what, uint64_t bytes,
                                  kn_cuda_arena **out) {
    ms_status st = kn_cuda_arena_new(what, bytes, out);
    if (st == MS_ENOMEM) {
        kn_cuda__trim_caches(be);
        st = kn_cuda_arena_new(what, bytes, out);
    }
    return st;
}

/* A device block of at least `bytes` for worker w: the best cached fit
 * (up to twice the size), else one new cudaMalloc charged to the budget. */
ms_status kn_cuda__block_get(kn_cuda_be *be, kn_cuda_worker *w, uint64_t bytes, const char *what,
                             kn_cuda_block **out) {
    if (bytes == 0) bytes = 256;
    /* a block outside the plan's arena: a replay would write it after it went back */
    if (w->capturing) w->capture_bad = 1;
    pthread_mutex_lock(&be->cache_mu);
    kn_cuda_block **best = NULL;
    for (kn_cuda_block **p = &be->cache; *p; p = &(*p)->next)
        if ((*p)->size >= bytes && (*p)->size / 2 <= bytes &&
            (best == NULL || (*p)->size < (*best)->size))
            best = p;
    kn_cuda_block *d = NULL;
    if (best != NULL) {
        d = *best;
        *best = d->next;
        d->next = NULL;
    }
    pthread_mutex_unlock(&be->cache_mu);
    ms_status st = MS_OK;
    if (d != NULL) {
        /* another stream may still read or write it: order after that work */
        if (d->w != w &&
            (st = kn_cuda_stream_wait_event(w->stream, d->ev, "a cached GPU block")) != MS_OK) {
            block_free(d);
            return st;
        }
        d->w = w;
        *out = d;
        return MS_OK;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if ((st = kn_cuda_event_new(&d->ev)) != MS_OK) {
        free(d);
        return st;
    }
    st = kn_cuda__arena_new_trim(be, what, bytes, &d->a);
    if (st != MS_OK) {
        kn_cuda_event_free(d->ev);
        free(d);
        return st;
    }
    d->size = kn_cuda_arena_size(d->a);
    d->ptr = kn_cuda_arena_alloc(d->a, d->size);
    d->w = w;
    *out = d;
    return MS_OK;
}

/* A temporary of the running step (a workspace, a padded input, a
 * reordered filter, coefficients): the step's planned region of the plan's
 * arena (kn_devtmp_take, kn_memplan.h), else a block of the cache. A
 * planned one is a kn_cuda_block without an arena (a == NULL) that block_put only
 * frees: the bytes belong to the plan's arena, and its next user is ordered
 * after this step's work on the stream (or by arena_begin's event). */
ms_status kn_cuda__tmp_get(kn_cuda_be *be, kn_cuda_worker *w, uint64_t bytes, const char *what,
                           kn_cuda_block **out) {
    void *planned = kn_devtmp_take(bytes);
    if (planned == NULL) return kn_cuda__block_get(be, w, bytes, what, out);
    kn_cuda_block *d = calloc(1, sizeof(*d));
    if (d == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    d->ptr = planned;
    d->size = bytes;
    d->w = w;
    *out = d;
    return MS_OK;
}

/* Back to the cache, from any thread: the event marks the end of the work
 * its last worker's stream has queued on it. */
void kn_cuda__block_put(kn_cuda_block *d) {
    if (d == NULL) return;
    if (d->a == NULL) { /* a planned temporary (tmp_get) */
        free(d);
        return;
    }
    kn_cuda_be *be = kn_cuda__be_get();
    if (be == NULL || kn_cuda_event_record(d->ev, d->w->stream, "a released GPU block") != MS_OK) {
        block_free(d);
        return;
    }
    pthread_mutex_lock(&be->cache_mu);
    d->next = be->cache;
    be->cache = d;
    pthread_mutex_unlock(&be->cache_mu);
}

static void block_buf_release(rt_buf *b) {
    kn_cuda__block_put(b->owner);
}

/* A new device tensor of dt / shape for worker w. */
ms_status kn_cuda__dev_tensor(kn_cuda_be *be, kn_cuda_worker *w, const kn_node *node, rt_dtype dt,
                              const rt_shape *shape, rt_tensor **out) {
    *out = NULL;
    if (dt == RT_DT_STRING || !rt_dtype_is_pod(dt))
        return ms_errf(MS_ENOTSUP, "%s: %s tensors cannot live in GPU memory",
                       node ? node->name : "copy", rt_dtype_name(dt));
    int64_t n = rt_shape_nelem(shape);
    if (n < 0) return ms_errf(MS_EINVAL, "%s: bad output shape", node ? node->name : "copy");
    uint64_t bytes = (uint64_t)n * rt_dtype_size(dt);
    void *planned = kn_devout_take(bytes); /* the plan's arena (kn_memplan.h) */
    if (planned != NULL) {
        rt_buf *pb = rt_buf_wrap(planned, (size_t)bytes, NULL, NULL);
        if (pb == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        pb->device = KN_CUDA_MEM;
        ms_status pst = rt_tensor_new_on(dt, shape, pb, 0, out);
        rt_buf_unref(pb);
        return pst;
    }
    char what[300];
    snprintf(what, sizeof what, "a GPU tensor of %s", node ? node->name : "a copy");
    kn_cuda_block *d = NULL;
    ms_status st = kn_cuda__block_get(be, w, bytes, what, &d);
    if (st != MS_OK) return st;
    rt_buf *buf = rt_buf_wrap(d->ptr, (size_t)d->size, block_buf_release, d);
    if (buf == NULL) {
        kn_cuda__block_put(d);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    buf->device = KN_CUDA_MEM;
    st = rt_tensor_new_on(dt, shape, buf, 0, out);
    rt_buf_unref(buf);
    return st;
}

static ms_status ensure_pinned(kn_cuda_worker *w, size_t bytes) {
    if (w->pinned_size >= bytes && w->pinned != NULL) return MS_OK;
    size_t want = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
    void *p = NULL;
    ms_status st = kn_cuda_host_alloc(want, &p);
    if (st != MS_OK) return st;
    kn_cuda_host_free(w->pinned); /* every copy through it was waited for */
    w->pinned = p;
    w->pinned_size = want;
    return MS_OK;
}

/* Host -> device through the worker's pinned staging; waits for the copy. */
ms_status kn_cuda__copy_in(kn_cuda_be *be, kn_cuda_worker *w, const kn_node *node,
                           const rt_tensor *host, rt_tensor **out) {
    *out = NULL;
    if (host->buf != NULL && host->buf->device != 0)
        return ms_errf(MS_EINTERNAL, "copy to the GPU: the tensor is not in host memory");
    if (w->capturing) w->capture_bad = 1; /* host memory and a wait: no graph */
    rt_tensor *t = NULL;
    ms_status st = kn_cuda__dev_tensor(be, w, node, host->dtype, &host->shape, &t);
    if (st != MS_OK) return st;
    size_t nb = rt_tensor_nbytes(host);
    if (nb > 0) {
        if ((st = ensure_pinned(w, nb)) == MS_OK) {
            memcpy(w->pinned, host->data, nb);
            if ((st = kn_cuda_h2d(t->data, w->pinned, nb, w->stream, "copy to the GPU")) == MS_OK)
                st = kn_cuda_stream_sync(w->stream, "copy to the GPU");
        }
    }
    if (st != MS_OK) {
        rt_tensor_unref(t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* Device -> host; waits for the stream, so errors of earlier asynchronous
 * kernels of this worker surface here. */
ms_status kn_cuda__copy_out(kn_cuda_worker *w, const rt_tensor *dev, rt_tensor **out) {
    *out = NULL;
    if (dev->buf == NULL || dev->buf->device != KN_CUDA_MEM)
        return ms_errf(MS_EINTERNAL, "copy to the host: the tensor is not in GPU memory");
    if (w->capturing) w->capture_bad = 1; /* a wait on the host: no graph */
    size_t nb = rt_tensor_nbytes(dev);
    rt_buf *buf = rt_buf_alloc(nb ? nb : 1);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    rt_tensor *t = NULL;
    ms_status st = rt_tensor_new_on(dev->dtype, &dev->shape, buf, 0, &t);
    rt_buf_unref(buf);
    if (st != MS_OK) return st;
    if (nb > 0) {
        if ((st = ensure_pinned(w, nb)) == MS_OK &&
            (st = kn_cuda_d2h(w->pinned, dev->data, nb, w->stream, "copy to the host")) == MS_OK &&
            (st = kn_cuda_stream_sync(w->stream, "copy to the host")) == MS_OK)
            memcpy(t->data, w->pinned, nb);
    } else {
        st = kn_cuda_stream_sync(w->stream, "copy to the host");
    }
    if (st != MS_OK) {
        rt_tensor_unref(t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* Host floats in `nparts` pieces to one new arena (*arena, charged to the
 * budget, freed with the node), waited for; dst[i] the pieces on the GPU. */
ms_status kn_cuda__upload_floats(kn_cuda_worker *w, const char *what, const float *const *parts,
                                 const size_t *counts, int nparts, kn_cuda_arena **arena,
                                 float **dst) {
    size_t total = 0;
    for (int i = 0; i < nparts; i++)
        total += counts[i] + 64; /* 256-byte alignment per piece */
    ms_status st = kn_cuda_arena_new(what, (uint64_t)total * sizeof(float), arena);
    if (st != MS_OK) return st;
    for (int i = 0; i < nparts && st == MS_OK; i++) {
        dst[i] = kn_cuda_arena_alloc(*arena, (uint64_t)(counts[i] ? counts[i] : 1) * sizeof(float));
        if (dst[i] == NULL)
            st = ms_errf(MS_EINTERNAL, "%s: arena too small", what);
        else if (counts[i] > 0)
            st = kn_cuda_h2d(dst[i], parts[i], counts[i] * sizeof(float), w->stream, what);
    }
    if (st == MS_OK) st = kn_cuda_stream_sync(w->stream, what);
    return st;
}

/* ---- request path ---- */

/* Runs the node's CPU kernel: inputs copied to the host, outputs back. The
 * host tensors' slots are sized to the node (a RestoreV2 or IdentityN of
 * thousands of tensors is one node): no fixed limit. */
ms_status kn_cuda__host_run(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                            kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out, const char *why) {
    if (why != NULL && atomic_exchange(&s->warned, 1) == 0)
        MS_WARN("node '%s' (%s): this request runs on the CPU inside the CUDA backend (%s); logged "
                "once per node",
                node->name, node->op, why);
    if (w->capturing) w->capture_bad = 1; /* the CPU's part is not in a graph */
    if (node->nin < 0 || node->nout < 0)
        return ms_errf(MS_EINTERNAL, "node '%s': %d inputs, %d outputs", node->name, node->nin,
                       node->nout);
    size_t slots = (size_t)node->nin + (size_t)node->nout;
    rt_tensor **hin = calloc(slots ? slots : 1, sizeof(*hin));
    if (hin == NULL)
        return ms_errf(MS_ENOMEM, "node '%s': out of memory for %zu tensor slots", node->name,
                       slots);
    rt_tensor **hout = hin + node->nin;
    ms_status st = MS_OK;
    for (int i = 0; i < node->nin && st == MS_OK; i++)
        st = in[i]->buf && in[i]->buf->device == KN_CUDA_MEM
                 ? kn_cuda__copy_out(w, in[i], &hin[i])
                 : (hin[i] = rt_tensor_ref(in[i]), MS_OK);
    if (st == MS_OK) st = s->cpu->compute(ctx, node, s->cpu_state, hin, hout);
    for (int i = 0; i < node->nout && st == MS_OK; i++)
        if (hout[i] != NULL) st = kn_cuda__copy_in(be, w, node, hout[i], &out[i]);
    for (size_t i = 0; i < slots; i++) rt_tensor_unref(hin[i]);
    free(hin);
    return st;
}

/* The host value of input i: its constant, or a copy from the GPU. */
ms_status kn_cuda__host_input(kn_cuda_worker *w, kn_cuda_op *s, rt_tensor *const *in, int i,
                              rt_tensor **out) {
    if (i < KN_CUDA_MAX_CONST && s->cin[i] != NULL) {
        *out = rt_tensor_ref(s->cin[i]);
        return MS_OK;
    }
    return kn_cuda__copy_out(w, in[i], out);
}

/* Integer vector values of a host tensor (int32 / int64), at most max. */
int kn_cuda__int_values(const rt_tensor *t, int64_t *v, int max) {
    if (t->nelem > max) return -1;
    for (int64_t i = 0; i < t->nelem; i++) {
        if (t->dtype == RT_DT_INT32)
            v[i] = ((const int32_t *)t->data)[i];
        else if (t->dtype == RT_DT_INT64)
            v[i] = ((const int64_t *)t->data)[i];
        else
            return -1;
    }
    return (int)t->nelem;
}

#endif /* DCMSERVE_HAVE_CUDA */
