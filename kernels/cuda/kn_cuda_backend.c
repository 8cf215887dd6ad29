/* kn_cuda_backend.c - the CUDA backend's kernel table (kn_cuda_backend.h).
 *
 * Host C over the launchers of the kernels/cuda .cuh headers. The op list, the
 * broadcast / padding / activation decisions are plain arithmetic and build
 * in every configuration; the table, its memory and copies only with CUDA
 * (DCMSERVE_HAVE_CUDA), since they call the nvcc-compiled launchers. */
#include "kn_cuda_backend.h"
#include "kn_dicom_xform.h"
#include "kn_reduce.h"
#include "kn_slice.h"

#include <stdint.h>
#include <string.h>

/* ================= host-side: the op list and decisions ================= */

static const char *const g_ops[] = {
    "Add",        "AddV2",        "AvgPool",   "AvgPool3D",        "BatchMatMul",
    "BatchMatMulV2",              "BatchMatMulV3",                 "BiasAdd",
    "ConcatV2",   "Conv2D",       "Conv2DBackpropInput",           "Conv3D",
    "DepthwiseConv2dNative",      "Elu",       "FusedBatchNorm",   "FusedBatchNormV2",
    "FusedBatchNormV3",           "Gather",    "GatherV2",         "LeakyRelu",
    "MatMul",     "Max",          "MaxPool",   "MaxPool3D",        "Maximum",
    "Mean",       "Min",          "Minimum",   "Mul",              "Pad",
    "PadV2",      "Prod",         "RealDiv",   "Relu",             "Relu6",
    "Reshape",    "ResizeBilinear",            "ResizeNearestNeighbor",
    "Rsqrt",      "Sigmoid",      "Slice",     "Softmax",          "Square",
    "StridedSlice",               "Sub",       "Sum",              "Tanh",
    "Transpose",  "_DcmPixelTransform",        "_FusedConv2D",
    "_FusedDepthwiseConv2dNative",                              "_FusedMatMul",
    NULL};

const char *const *kn_cuda_backend_ops(void) {
    return g_ops;
}

static int op_index(const char *op) {
    for (int i = 0; g_ops[i]; i++)
        if (strcmp(op, g_ops[i]) == 0) return i;
    return -1;
}

int kn_cuda_backend_has_op(const char *op) {
    return op != NULL && op_index(op) >= 0;
}

ms_status kn_cuda__spatial(int64_t in, int64_t k, int64_t s, int64_t d, int same, int64_t *out,
                           int64_t *pad_lo, int64_t *pad_hi) {
    if (in < 0 || k < 1 || s < 1 || d < 1)
        return ms_errf(MS_EINVAL, "bad window: input %lld, kernel %lld, stride %lld, dilation %lld",
                       (long long)in, (long long)k, (long long)s, (long long)d);
    int64_t ek = (k - 1) * d + 1; /* the dilated kernel's extent */
    if (same == 1) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + ek - in;
        if (total < 0) total = 0;
        *pad_lo = total / 2; /* TensorFlow puts the odd one at the end */
        *pad_hi = total - *pad_lo;
    } else {
        if (same == 0) *pad_lo = *pad_hi = 0;
        if (*pad_lo < 0 || *pad_hi < 0) return ms_errf(MS_EINVAL, "negative explicit padding");
        int64_t span = in + *pad_lo + *pad_hi - ek;
        if (span < 0)
            return ms_errf(MS_EINVAL, "window %lld (dilated) is larger than the padded input %lld",
                           (long long)ek, (long long)(in + *pad_lo + *pad_hi));
        *out = span / s + 1;
    }
    return MS_OK;
}

static int suffix_of(const rt_shape *small, const rt_shape *big, int64_t *nb) {
    int lead = 0;
    while (lead < small->rank && small->dim[lead] == 1) lead++;
    int r = small->rank - lead;
    if (r > big->rank || small->rank > big->rank) return 0;
    int64_t n = 1;
    for (int i = 0; i < r; i++) {
        if (small->dim[lead + i] != big->dim[big->rank - r + i]) return 0;
        n *= small->dim[lead + i];
    }
    if (n <= 0) return 0;
    *nb = n;
    return 1;
}

int kn_cuda__bcast(const rt_shape *a, const rt_shape *b, int commutative, int64_t *nb, int *swap) {
    *swap = 0;
    if (suffix_of(b, a, nb)) return 1;
    if (commutative && suffix_of(a, b, nb)) {
        *swap = 1;
        return 1;
    }
    return 0;
}

int kn_cuda__bcast_general(const rt_shape *a, const rt_shape *b, rt_shape *out,
                           kn_cuda_bcast_shape *s) {
    const int rank = a->rank > b->rank ? a->rank : b->rank;
    if (rank > KN_CUDA_BCAST_RANK || rank > RT_MAX_RANK) return 0;
    int64_t da[KN_CUDA_BCAST_RANK], db[KN_CUDA_BCAST_RANK];
    memset(out, 0, sizeof(*out));
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        int ia = d - (rank - a->rank), ib = d - (rank - b->rank);
        da[d] = ia >= 0 ? a->dim[ia] : 1;
        db[d] = ib >= 0 ? b->dim[ib] : 1;
        if (da[d] <= 0 || db[d] <= 0) return 0;
        if (da[d] != db[d] && da[d] != 1 && db[d] != 1) return 0;
        out->dim[d] = da[d] > db[d] ? da[d] : db[d];
    }
    /* row-major strides of each operand, 0 on its broadcast axes; size-1
     * output axes dropped */
    int64_t stra = 1, strb = 1;
    int64_t dim[KN_CUDA_BCAST_RANK], sa[KN_CUDA_BCAST_RANK], sb[KN_CUDA_BCAST_RANK];
    int k = 0;
    for (int d = rank - 1; d >= 0; d--) {
        if (out->dim[d] != 1) {
            dim[k] = out->dim[d];
            sa[k] = da[d] == 1 ? 0 : stra;
            sb[k] = db[d] == 1 ? 0 : strb;
            k++;
        }
        stra *= da[d];
        strb *= db[d];
    }
    /* dim / sa / sb are innermost first; merge an axis into the one inside
     * it when both operands step across them as one axis */
    memset(s, 0, sizeof(*s));
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (m > 0 && sa[i] == s->sa[m - 1] * s->dim[m - 1] && sb[i] == s->sb[m - 1] * s->dim[m - 1]) {
            s->dim[m - 1] *= dim[i];
            continue;
        }
        s->dim[m] = dim[i], s->sa[m] = sa[i], s->sb[m] = sb[i];
        m++;
    }
    if (m == 0) s->dim[m] = 1, s->sa[m] = 0, s->sb[m] = 0, m = 1; /* one value */
    /* outermost first, as the kernel walks them */
    for (int i = 0; i < m / 2; i++) {
        int j = m - 1 - i;
        int64_t t = s->dim[i];
        s->dim[i] = s->dim[j], s->dim[j] = t;
        t = s->sa[i], s->sa[i] = s->sa[j], s->sa[j] = t;
        t = s->sb[i], s->sb[i] = s->sb[j], s->sb[j] = t;
    }
    s->rank = m;
    return 1;
}

/* Values of kn_cuda_act (kn_cuda_elementwise.cuh), kept in step by a
 * static check in the CUDA part below. */
int kn_cuda__act(const char *name, size_t len) {
    static const char *const names[] = {"Relu", "Relu6", "Sigmoid", "Tanh"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == len && memcmp(name, names[i], len) == 0) return i + 1;
    return -1;
}

void kn_cuda__reduce_plan(const rt_shape *x, const int *red, kn_cuda_reduce_shape *p) {
    kn_reduce_axes ax;
    kn_reduce_axes_merge(x, red, &ax);
    memset(p, 0, sizeof(*p));
    p->rank = ax.rank;
    for (int d = 0; d < ax.rank; d++)
        p->dim[d] = ax.dim[d], p->red[d] = ax.red[d];
    p->nout = ax.nout;
    p->count = ax.count;
}

/* The strided copy of processing shape ps (one axis per input axis) with
 * element strides st from base: size-1 axes dropped, axes merged where the
 * outer one steps over exactly the inner one's run. */
static void strided_make(const rt_shape *ps, const int64_t *st, int64_t base, kn_cuda_strided *p) {
    memset(p, 0, sizeof(*p));
    p->base = base;
    for (int d = 0; d < ps->rank; d++) {
        if (ps->dim[d] == 1) continue;
        if (p->rank > 0 && ps->dim[d] != 0 && p->dim[p->rank - 1] != 0 &&
            p->stride[p->rank - 1] == st[d] * ps->dim[d]) {
            p->dim[p->rank - 1] *= ps->dim[d];
            p->stride[p->rank - 1] = st[d];
            continue;
        }
        p->dim[p->rank] = ps->dim[d];
        p->stride[p->rank] = st[d];
        p->rank++;
    }
    if (p->rank == 0) {
        p->rank = 1;
        p->dim[0] = 1;
        p->stride[0] = 0;
    }
}

static void strides_of(const rt_shape *x, int64_t *st) {
    int64_t s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= x->dim[d];
    }
}

int kn_cuda__slice(const rt_shape *x, const int64_t *begin, const int64_t *size, int n,
                   kn_cuda_strided *p, rt_shape *os) {
    if (n != x->rank || x->rank > RT_MAX_RANK) return 0;
    int64_t ist[RT_MAX_RANK], st[RT_MAX_RANK], base = 0;
    strides_of(x, ist);
    *os = (rt_shape){.rank = x->rank};
    for (int d = 0; d < x->rank; d++) {
        int64_t dn = x->dim[d], b = begin[d], sz = size[d];
        if (b >= 0 && b <= dn && sz == -1) sz = dn - b;
        if (b < 0 || b > dn || sz < 0 || sz > dn - b) return 0;
        os->dim[d] = sz;
        base += b * ist[d];
        st[d] = ist[d];
    }
    strided_make(os, st, base, p);
    return 1;
}

int kn_cuda__strided_slice(const rt_shape *x, const int64_t *begin, const int64_t *end,
                           const int64_t *strides, int n, const int64_t masks[5],
                           kn_cuda_strided *p, rt_shape *os) {
    kn_slice sl;
    char why[256];
    if (!kn_slice_canon(x, begin, end, strides, n, masks, &sl, why, sizeof why)) return 0;
    int64_t ist[RT_MAX_RANK], st[RT_MAX_RANK], base = 0;
    strides_of(x, ist);
    for (int d = 0; d < x->rank; d++) {
        if (sl.ps.dim[d] > 0) base += sl.start[d] * ist[d]; /* an empty axis reads nothing */
        st[d] = sl.shrink[d] ? 0 : sl.stride[d] * ist[d];
    }
    *os = sl.os;
    strided_make(&sl.ps, st, base, p);
    return 1;
}

int kn_cuda__gather_shape(const rt_shape *p, const rt_shape *ix, int64_t axis, int64_t batch_dims,
                          kn_cuda_gather_shape *g, rt_shape *os) {
    int64_t bd = batch_dims < 0 ? batch_dims + ix->rank : batch_dims;
    if (bd < 0 || bd > ix->rank) return 0;
    if (axis < 0) axis += p->rank;
    if (axis < bd || axis >= p->rank) return 0;
    int a = (int)axis, b = (int)bd;
    for (int d = 0; d < b; d++)
        if (p->dim[d] != ix->dim[d]) return 0;
    if (p->rank - 1 + ix->rank - b > RT_MAX_RANK) return 0;
    *os = (rt_shape){.rank = 0};
    *g = (kn_cuda_gather_shape){.nb = 1, .outer = 1, .n = p->dim[a], .per = 1, .inner = 1};
    for (int d = 0; d < a; d++) os->dim[os->rank++] = p->dim[d];
    for (int d = b; d < ix->rank; d++) os->dim[os->rank++] = ix->dim[d];
    for (int d = a + 1; d < p->rank; d++) os->dim[os->rank++] = p->dim[d];
    for (int d = 0; d < b; d++) g->nb *= p->dim[d];
    for (int d = b; d < a; d++) g->outer *= p->dim[d];
    for (int d = a + 1; d < p->rank; d++) g->inner *= p->dim[d];
    for (int d = b; d < ix->rank; d++) g->per *= ix->dim[d];
    return 1;
}

int kn_cuda__bmm(const rt_shape *x, const rt_shape *y, int adj_x, int adj_y, int same_batch,
                 kn_cuda_bmm *p) {
    memset(p, 0, sizeof(*p));
    const int rx = x->rank, ry = y->rank;
    if (rx < 2 || ry < 2) return 0;
    p->m = x->dim[rx - (adj_x ? 1 : 2)], p->k = x->dim[rx - (adj_x ? 2 : 1)];
    int64_t k2 = y->dim[ry - (adj_y ? 1 : 2)];
    p->n = y->dim[ry - (adj_y ? 2 : 1)];
    if (p->k != k2) return 0;
    const int bx = rx - 2, by = ry - 2, br = bx > by ? bx : by;
    if (same_batch) {
        if (bx != by) return 0;
        for (int d = 0; d < bx; d++)
            if (x->dim[d] != y->dim[d]) return 0;
    }
    if (br + 2 > RT_MAX_RANK) return 0;
    /* numpy broadcast of the batch dims, aligned at the right; strides of
     * each operand's batch dims in elements, 0 where it is broadcast */
    int64_t sx = p->m * p->k, sw = p->k * p->n, nx = 1, nw = 1;
    p->brank = br;
    p->batch = 1;
    for (int i = 0; i < br; i++) {
        int d = br - 1 - i, dx = bx - 1 - i, dy = by - 1 - i;
        int64_t ex = dx >= 0 ? x->dim[dx] : 1, ey = dy >= 0 ? y->dim[dy] : 1;
        if (ex != ey && ex != 1 && ey != 1) return 0;
        int64_t e = ex == 1 ? ey : ex;
        p->bdim[d] = e;
        p->bsx[d] = ex == 1 ? 0 : sx;
        p->bsw[d] = ey == 1 ? 0 : sw;
        sx *= ex, sw *= ey, nx *= ex, nw *= ey;
        p->batch *= e;
    }
    p->out = (rt_shape){.rank = br + 2};
    for (int d = 0; d < br; d++) p->out.dim[d] = p->bdim[d];
    p->out.dim[br] = p->m, p->out.dim[br + 1] = p->n;
    if (p->batch == 0 || p->m == 0 || p->n == 0 || p->k == 0) return 0;
    if (nx == p->batch && nw == p->batch) {
        p->mode = KN_CUDA_BMM_STRIDED;
        p->stride_x = p->m * p->k, p->stride_w = p->k * p->n;
    } else if (nw == 1 && nx == p->batch && !adj_x) {
        p->mode = KN_CUDA_BMM_FLAT; /* x's batches are rows of one GEMM */
    } else {
        p->mode = KN_CUDA_BMM_LOOP;
    }
    return 1;
}

void kn_cuda__bmm_offsets(const kn_cuda_bmm *p, int64_t i, int64_t *ox, int64_t *ow) {
    *ox = *ow = 0;
    for (int d = p->brank - 1; d >= 0; d--) {
        int64_t c = i % p->bdim[d];
        *ox += c * p->bsx[d];
        *ow += c * p->bsw[d];
        i /= p->bdim[d];
    }
}

#ifndef DCMSERVE_HAVE_CUDA

ms_status kn_cuda_backend_new(int gpu, kn_backend *cpu, kn_backend **out) {
    (void)gpu;
    (void)cpu;
    *out = NULL;
    return ms_errf(MS_ENOTSUP,
                   "this build has no CUDA backend (built with DCMSERVE_CUDA=OFF or without nvcc)");
}

#else /* DCMSERVE_HAVE_CUDA */

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "kn_cuda_conv.cuh"
#include "kn_cuda_convnd.cuh"
#include "kn_cuda_dicom.cuh"
#include "kn_cuda_elementwise.cuh"
#include "kn_cuda_gemm.cuh"
#include "kn_cuda_index.cuh"
#include "kn_cuda_mem.h"
#include "kn_cuda_nn.cuh"
#include "kn_memplan.h"
#include "kn_cuda_reduce.cuh"
#include "kn_cuda_rt.cuh"
#include "ms_log.h"

_Static_assert(KN_CUDA_ACT_RELU == 1 && KN_CUDA_ACT_RELU6 == 2 && KN_CUDA_ACT_SIGMOID == 3 &&
                   KN_CUDA_ACT_TANH == 4,
               "kn_cuda__act's numbering follows kn_cuda_act");

/* ================= workers: stream, staging, device blocks ================= */

typedef struct worker worker;

/* One cudaMalloc (a kn_cuda_arena of exactly its size), reused by any
 * worker: released, it records an event on the stream of the worker that
 * used it last; a worker that takes it from the cache makes its own stream
 * wait for that event first (nothing waits on the host). */
typedef struct dblock {
    kn_cuda_arena *a;
    void *ptr;
    uint64_t size;
    void *ev;            /* recorded when the block went back to the cache */
    worker *w;           /* whose stream used it last */
    struct dblock *next; /* in the cache */
} dblock;

struct worker {
    uint64_t gen;
    int capturing;   /* a CUDA graph capture is on (be_graph_begin) */
    int capture_bad; /* the captured work used memory or work that a replay cannot repeat */
    void *stream;
    void *pinned;
    size_t pinned_size;
    worker *next;
};

typedef struct cuda_be {
    kn_backend b;
    int gpu;
    kn_backend *cpu;
    char name[32];
    uint64_t gen;
    pthread_mutex_t mu; /* the worker list */
    worker *workers;
    pthread_mutex_t cache_mu; /* blocks come back from any thread */
    dblock *cache;
} cuda_be;

static pthread_mutex_t g_be_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_be *g_be;   /* the process's CUDA backend (prepare has no backend argument) */
static uint64_t g_gen;  /* backends made so far: a thread's worker is for one of them */
static _Thread_local worker *tls_w;
static _Thread_local uint64_t tls_gen;

/* The calling thread's worker (a stream per inference worker), made on its
 * first use. */
static ms_status get_worker(cuda_be *be, worker **out) {
    if (tls_w != NULL && tls_gen == be->gen) {
        *out = tls_w;
        return MS_OK;
    }
    ms_status st = kn_cuda_set_device(be->gpu);
    if (st != MS_OK) return st;
    worker *w = calloc(1, sizeof(*w));
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

static void block_free(dblock *d) {
    kn_cuda_event_free(d->ev);
    kn_cuda_arena_free(d->a); /* cudaFree waits for the device */
    free(d);
}

/* Frees every cached (idle) block; cudaFree waits for the device, so work
 * still queued on a block is done first. */
static void trim_caches(cuda_be *be) {
    pthread_mutex_lock(&be->cache_mu);
    dblock *d = be->cache;
    be->cache = NULL;
    pthread_mutex_unlock(&be->cache_mu);
    while (d) {
        dblock *nx = d->next;
        block_free(d);
        d = nx;
    }
}

/* One cudaMalloc charged to the budget; when the cap or the device is full,
 * the idle blocks go back first and it is tried once more. */
static ms_status arena_new_trim(cuda_be *be, const char *what, uint64_t bytes, kn_cuda_arena **out) {
    ms_status st = kn_cuda_arena_new(what, bytes, out);
    if (st == MS_ENOMEM) {
        trim_caches(be);
        st = kn_cuda_arena_new(what, bytes, out);
    }
    return st;
}

/* A device block of at least `bytes` for worker w: the best cached fit
 * (up to twice the size), else one new cudaMalloc charged to the budget. */
static ms_status block_get(cuda_be *be, worker *w, uint64_t bytes, const char *what, dblock **out) {
    if (bytes == 0) bytes = 256;
    /* a block outside the plan's arena: a replay would write it after it went back */
    if (w->capturing) w->capture_bad = 1;
    pthread_mutex_lock(&be->cache_mu);
    dblock **best = NULL;
    for (dblock **p = &be->cache; *p; p = &(*p)->next)
        if ((*p)->size >= bytes && (*p)->size / 2 <= bytes && (best == NULL || (*p)->size < (*best)->size))
            best = p;
    dblock *d = NULL;
    if (best != NULL) {
        d = *best;
        *best = d->next;
        d->next = NULL;
    }
    pthread_mutex_unlock(&be->cache_mu);
    ms_status st = MS_OK;
    if (d != NULL) {
        /* another stream may still read or write it: order after that work */
        if (d->w != w && (st = kn_cuda_stream_wait_event(w->stream, d->ev, "a cached GPU block")) != MS_OK) {
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
    st = arena_new_trim(be, what, bytes, &d->a);
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
 * planned one is a dblock without an arena (a == NULL) that block_put only
 * frees: the bytes belong to the plan's arena, and its next user is ordered
 * after this step's work on the stream (or by arena_begin's event). */
static ms_status tmp_get(cuda_be *be, worker *w, uint64_t bytes, const char *what, dblock **out) {
    void *planned = kn_devtmp_take(bytes);
    if (planned == NULL) return block_get(be, w, bytes, what, out);
    dblock *d = calloc(1, sizeof(*d));
    if (d == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    d->ptr = planned;
    d->size = bytes;
    d->w = w;
    *out = d;
    return MS_OK;
}

/* Back to the cache, from any thread: the event marks the end of the work
 * its last worker's stream has queued on it. */
static void block_put(dblock *d) {
    if (d == NULL) return;
    if (d->a == NULL) { /* a planned temporary (tmp_get) */
        free(d);
        return;
    }
    cuda_be *be = g_be;
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
    block_put(b->owner);
}

/* A new device tensor of dt / shape for worker w. */
static ms_status dev_tensor(cuda_be *be, worker *w, const kn_node *node, rt_dtype dt,
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
    dblock *d = NULL;
    ms_status st = block_get(be, w, bytes, what, &d);
    if (st != MS_OK) return st;
    rt_buf *buf = rt_buf_wrap(d->ptr, (size_t)d->size, block_buf_release, d);
    if (buf == NULL) {
        block_put(d);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    buf->device = KN_CUDA_MEM;
    st = rt_tensor_new_on(dt, shape, buf, 0, out);
    rt_buf_unref(buf);
    return st;
}

static ms_status ensure_pinned(worker *w, size_t bytes) {
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
static ms_status copy_in(cuda_be *be, worker *w, const kn_node *node, const rt_tensor *host,
                         rt_tensor **out) {
    *out = NULL;
    if (host->buf != NULL && host->buf->device != 0)
        return ms_errf(MS_EINTERNAL, "copy to the GPU: the tensor is not in host memory");
    if (w->capturing) w->capture_bad = 1; /* host memory and a wait: no graph */
    rt_tensor *t = NULL;
    ms_status st = dev_tensor(be, w, node, host->dtype, &host->shape, &t);
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
static ms_status copy_out(worker *w, const rt_tensor *dev, rt_tensor **out) {
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

/* ================= backend slots ================= */

static const char *be_name(kn_backend *b) {
    return ((cuda_be *)b->ctx)->name;
}

static ms_status be_to_device(kn_backend *b, rt_tensor *host, rt_tensor **out) {
    cuda_be *be = b->ctx;
    worker *w = NULL;
    ms_status st = get_worker(be, &w);
    return st != MS_OK ? st : copy_in(be, w, NULL, host, out);
}

static ms_status be_to_host(kn_backend *b, rt_tensor *dev, rt_tensor **out) {
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    return st != MS_OK ? st : copy_out(w, dev, out);
}

static ms_status be_sync(kn_backend *b) {
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    return st != MS_OK ? st : kn_cuda_stream_sync(w->stream, "cuda sync");
}

static const kn_kernel *be_kernel(kn_backend *b, const char *op);

/* CUDA graphs (kn_backend_i.graph_*, docs/gpu.md): the executor brackets a
 * segment of device nodes of a sized plan; the work their kernels queue on
 * this worker's stream is captured (not run) and, when nothing in it needs
 * the host or memory outside the plan's arena, instantiated for replay. */
static ms_status be_graph_begin(kn_backend *b) {
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    if (st != MS_OK) return st;
    if (w->capturing) return ms_errf(MS_EINTERNAL, "a CUDA graph capture is on already");
    w->capture_bad = 0;
    if ((st = kn_cuda_capture_begin(w->stream)) == MS_OK) w->capturing = 1;
    return st;
}

static ms_status be_graph_end(kn_backend *b, void **graph) {
    *graph = NULL;
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    if (st != MS_OK) return st;
    if (!w->capturing) return ms_errf(MS_EINTERNAL, "no CUDA graph capture is on");
    w->capturing = 0;
    st = kn_cuda_capture_end(w->stream, !w->capture_bad, graph);
    if (st == MS_OK) return MS_OK;
    return w->capture_bad ? ms_errf(MS_ENOTSUP, "the segment used memory outside the plan's arena "
                                                "or the CPU")
                          : st;
}

static ms_status be_graph_launch(kn_backend *b, void *graph) {
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    return st != MS_OK ? st : kn_cuda_graph_launch(graph, w->stream);
}

static void be_graph_free(kn_backend *b, void *graph) {
    (void)b;
    kn_cuda_graph_free(graph);
}

/* A plan's device arena (kn_backend_i.arena_*): one cudaMalloc charged to
 * the budget, used by one run at a time on its worker's stream; a run on
 * another worker waits for the previous run's work on it (an event, nothing
 * waits on the host). */
typedef struct plan_arena {
    kn_cuda_arena *a;
    void *base;
    void *ev;
    worker *w; /* whose stream used it last; NULL: none yet */
} plan_arena;

static ms_status be_arena_new(kn_backend *b, const char *what, uint64_t bytes, void **out) {
    cuda_be *be = b->ctx;
    plan_arena *pa = calloc(1, sizeof(*pa));
    if (pa == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = kn_cuda_event_new(&pa->ev);
    if (st == MS_OK) st = arena_new_trim(be, what, bytes, &pa->a);
    if (st != MS_OK) {
        kn_cuda_event_free(pa->ev);
        free(pa);
        return st;
    }
    pa->base = kn_cuda_arena_alloc(pa->a, kn_cuda_arena_size(pa->a));
    *out = pa;
    return MS_OK;
}

static ms_status be_arena_begin(kn_backend *b, void *arena, void **base) {
    plan_arena *pa = arena;
    worker *w = NULL;
    ms_status st = get_worker(b->ctx, &w);
    if (st == MS_OK && pa->w != NULL && pa->w != w)
        st = kn_cuda_stream_wait_event(w->stream, pa->ev, "a plan's device arena");
    if (st != MS_OK) return st;
    pa->w = w;
    *base = pa->base;
    return MS_OK;
}

static void be_arena_end(kn_backend *b, void *arena) {
    plan_arena *pa = arena;
    (void)b;
    /* a failed record leaves no event to wait on: the next worker syncs */
    if (pa->w != NULL && kn_cuda_event_record(pa->ev, pa->w->stream, "a plan's device arena") != MS_OK)
        (void)kn_cuda_stream_sync(pa->w->stream, "a plan's device arena");
}

static void be_arena_free(kn_backend *b, void *arena) {
    plan_arena *pa = arena;
    (void)b;
    if (pa == NULL) return;
    kn_cuda_event_free(pa->ev);
    kn_cuda_arena_free(pa->a); /* cudaFree waits for the device */
    free(pa);
}

/* After every model on it is freed: the device tensors' blocks are back. */
static void be_free(kn_backend *b) {
    cuda_be *be = b->ctx;
    pthread_mutex_lock(&g_be_mu);
    if (g_be == be) g_be = NULL; /* a block released from now on is freed, not cached */
    pthread_mutex_unlock(&g_be_mu);
    trim_caches(be);
    for (worker *w = be->workers; w;) {
        worker *nx = w->next;
        kn_cuda_stream_free(w->stream);
        kn_cuda_host_free(w->pinned);
        free(w);
        w = nx;
    }
    pthread_mutex_destroy(&be->mu);
    pthread_mutex_destroy(&be->cache_mu);
    free(be);
}

ms_status kn_cuda_backend_new(int gpu, kn_backend *cpu, kn_backend **out) {
    *out = NULL;
    if (cpu == NULL) return ms_errf(MS_EINVAL, "the CUDA backend needs the CPU backend");
    ms_status st = kn_cuda_set_device(gpu);
    if (st != MS_OK) return ms_errwrap(st, "GPU %d", gpu);
    uint64_t fr = 0, tot = 0;
    if ((st = kn_cuda_mem_info(&fr, &tot)) != MS_OK) return ms_errwrap(st, "GPU %d", gpu);
    pthread_mutex_lock(&g_be_mu);
    if (g_be != NULL) {
        pthread_mutex_unlock(&g_be_mu);
        return ms_errf(MS_EBUSY, "a CUDA backend exists already (one per process)");
    }
    cuda_be *be = calloc(1, sizeof(*be));
    if (be == NULL) {
        pthread_mutex_unlock(&g_be_mu);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    be->gpu = gpu;
    be->cpu = cpu;
    be->gen = ++g_gen;
    snprintf(be->name, sizeof be->name, "cuda:%d", gpu);
    pthread_mutex_init(&be->mu, NULL);
    pthread_mutex_init(&be->cache_mu, NULL);
    be->b = (kn_backend){.api_version = KN_BACKEND_API_VERSION,
                         .iface = {.name = be_name, .kernel = be_kernel, .sync = be_sync,
                                   .free = be_free, .to_device = be_to_device,
                                   .to_host = be_to_host, .arena_new = be_arena_new,
                                   .arena_begin = be_arena_begin, .arena_end = be_arena_end,
                                   .arena_free = be_arena_free, .graph_begin = be_graph_begin,
                                   .graph_end = be_graph_end, .graph_launch = be_graph_launch,
                                   .graph_free = be_graph_free},
                         .ctx = be,
                         .intra_op_threads = cpu->intra_op_threads};
    g_be = be;
    pthread_mutex_unlock(&g_be_mu);
    *out = &be->b;
    return MS_OK;
}

/* ================= the kernels ================= */

typedef enum op_kind {
    K_BINARY, K_ACT, K_BIAS, K_SOFTMAX, K_MATMUL, K_CONV, K_BN, K_MAXPOOL, K_AVGPOOL, K_REDUCE,
    K_CONCAT, K_RESIZE, K_TRANSPOSE, K_PAD, K_RESHAPE, K_DCMXFORM, K_UNARY, K_CONVND, K_POOL3D,
    K_BMM, K_GATHER, K_NEAREST, K_SLICE, K_SSLICE
} op_kind;

#define MAX_PLANS 16
#define MAX_CONST 8

typedef struct conv_entry {
    kn_cuda_conv_shape shape;
    kn_cuda_conv *plan;
} conv_entry;

typedef struct convnd_entry {
    kn_cuda_convnd_shape shape;
    kn_cuda_convnd *plan;
} convnd_entry;

typedef struct gemm_entry {
    int64_t m, n, k;
    kn_cuda_gemm *plan;
} gemm_entry;

typedef struct bgemm_entry {
    int64_t key[6]; /* batch, m, n, k, stride_x, stride_w */
    kn_cuda_bgemm *plan;
} bgemm_entry;

typedef struct op_state {
    op_kind kind;
    const kn_kernel *cpu; /* the same op on the CPU: attribute checks and the fallback */
    void *cpu_state;
    int host;             /* decided at load: this node always runs the CPU kernel */
    atomic_int warned;    /* the request-time fallback was logged */
    rt_tensor *cin[MAX_CONST]; /* host values of constant inputs (NULL: not constant) */
    /* attributes */
    kn_cuda_binop binop;
    int commutative;
    kn_cuda_act act;
    int depthwise, fuse_bias, fuse_bn, fuse_add, nargs;
    int same, explicit_pad; /* padding SAME / EXPLICIT (else VALID) */
    int64_t pads[4];        /* EXPLICIT: top, bottom, left, right */
    int64_t sh, sw, dh, dw, kh, kw;
    float eps;
    int align_corners, half_pixel, keep_dims;
    kn_dcm_xform_attrs dcm; /* _DcmPixelTransform */
    /* converted constants on the GPU, uploaded at load */
    kn_cuda_arena *wmem, *bnmem;
    float *w_ohwi;          /* filter in cuDNN's order */
    float *bn_mul, *bn_add; /* batch-norm coefficients */
    /* plans, one per shape (made at the first request of a shape: warm-up) */
    pthread_mutex_t mu;     /* the caches; a cuDNN plan's runs (its handle takes the stream) */
    conv_entry conv[MAX_PLANS];
    int nconv;
    gemm_entry gemm[MAX_PLANS];
    int ngemm;
    /* Conv3D / Conv2DBackpropInput (K_CONVND), MaxPool3D / AvgPool3D (K_POOL3D) */
    kn_cuda_unop unop;
    float alpha;            /* LeakyRelu */
    int rank3, backward;    /* 3-D; a transposed convolution */
    int64_t k3[3], s3[3], d3[3];
    convnd_entry convnd[MAX_PLANS];
    int nconvnd;
    /* reductions, BatchMatMul, gather, StridedSlice */
    kn_cuda_redop redop;
    int adj_x, adj_y, same_batch, v2;
    int64_t batch_dims;
    int64_t masks[5]; /* begin, end, ellipsis, new_axis, shrink_axis */
    bgemm_entry bgemm[MAX_PLANS];
    int nbgemm;
} op_state;

static void op_release(void *state) {
    op_state *s = state;
    if (s == NULL) return;
    if (s->cpu && s->cpu->release) s->cpu->release(s->cpu_state);
    for (int i = 0; i < MAX_CONST; i++) rt_tensor_unref(s->cin[i]);
    for (int i = 0; i < s->nconv; i++) kn_cuda_conv_free(s->conv[i].plan);
    for (int i = 0; i < s->ngemm; i++) kn_cuda_gemm_free(s->gemm[i].plan);
    for (int i = 0; i < s->nconvnd; i++) kn_cuda_convnd_free(s->convnd[i].plan);
    for (int i = 0; i < s->nbgemm; i++) kn_cuda_bgemm_free(s->bgemm[i].plan);
    kn_cuda_arena_free(s->wmem);
    kn_cuda_arena_free(s->bnmem);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int str_is(const char *s, size_t len, const char *want) {
    return s != NULL && strlen(want) == len && memcmp(s, want, len) == 0;
}

/* NHWC [1, a, b, 1] list attribute (ksize, strides, dilations). */
static int nhwc_pair(const kn_node *n, const char *key, int64_t dflt, int64_t *a, int64_t *b) {
    int64_t v[8];
    int c = kn_attr_ilist(n, key, v, 8);
    if (c < 0) {
        *a = *b = dflt;
        return 1;
    }
    if (c != 4 || v[0] != 1 || v[3] != 1) return 0;
    *a = v[1];
    *b = v[2];
    return 1;
}

/* padding / explicit_paddings; 0 when the GPU path cannot take them. */
static int padding_attr(const kn_node *n, op_state *s) {
    if (kn_attr_s_eq(n, "padding", "SAME", "VALID")) {
        s->same = 1;
        return 1;
    }
    if (kn_attr_s_eq(n, "padding", "VALID", "VALID")) return 1;
    if (kn_attr_s_eq(n, "padding", "EXPLICIT", "VALID")) {
        int64_t p[8];
        if (kn_attr_ilist(n, "explicit_paddings", p, 8) != 8) return 0;
        if (p[0] || p[1] || p[6] || p[7]) return 0; /* batch / channel padding */
        s->explicit_pad = 1;
        memcpy(s->pads, p + 2, sizeof s->pads);
        return 1;
    }
    return 0;
}

/* Host floats in `nparts` pieces to one new arena (*arena, charged to the
 * budget, freed with the node), waited for; dst[i] the pieces on the GPU. */
static ms_status upload_floats(worker *w, const char *what, const float *const *parts,
                               const size_t *counts, int nparts, kn_cuda_arena **arena,
                               float **dst) {
    size_t total = 0;
    for (int i = 0; i < nparts; i++) total += counts[i] + 64; /* 256-byte alignment per piece */
    ms_status st = kn_cuda_arena_new(what, (uint64_t)total * sizeof(float), arena);
    if (st != MS_OK) return st;
    for (int i = 0; i < nparts && st == MS_OK; i++) {
        dst[i] = kn_cuda_arena_alloc(*arena, (uint64_t)(counts[i] ? counts[i] : 1) * sizeof(float));
        if (dst[i] == NULL) st = ms_errf(MS_EINTERNAL, "%s: arena too small", what);
        else if (counts[i] > 0)
            st = kn_cuda_h2d(dst[i], parts[i], counts[i] * sizeof(float), w->stream, what);
    }
    if (st == MS_OK) st = kn_cuda_stream_sync(w->stream, what);
    return st;
}

/* A constant filter (HWIO, or depthwise HWCM) to cuDNN's OHWI, uploaded once. */
static ms_status upload_conv_filter(worker *w, const kn_node *n, op_state *s, const rt_tensor *f) {
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != 4) return MS_OK; /* the request path checks */
    int kh = (int)f->shape.dim[0], kw = (int)f->shape.dim[1], ci = (int)f->shape.dim[2],
        co = (int)f->shape.dim[3];
    size_t cnt = (size_t)f->nelem;
    float *ohwi = malloc((cnt ? cnt : 1) * sizeof(float));
    if (ohwi == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    kn_cuda_conv_filter_from_tf(f->data, kh, kw, ci, co, s->depthwise, ohwi);
    char what[300];
    snprintf(what, sizeof what, "the filter of node '%s'", n->name);
    const float *parts[1] = {ohwi};
    ms_status st = upload_floats(w, what, parts, &cnt, 1, &s->wmem, &s->w_ohwi);
    free(ohwi);
    return st;
}

/* A constant Conv3D filter (DHWIO) or Conv2DBackpropInput filter (HWIO,
 * I = the output's channels, O = out_backprop's) to cuDNN's K[D]RSC with
 * K = O, C = I: the Conv2D conversion with the spatial axes flattened. */
static ms_status upload_convnd_filter(worker *w, const kn_node *n, op_state *s, const rt_tensor *f) {
    const int r = s->rank3 ? 3 : 2;
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != r + 2) return MS_OK; /* the request path checks */
    int64_t sp = 1;
    for (int i = 0; i < r; i++) sp *= f->shape.dim[i];
    int ci = (int)f->shape.dim[r], co = (int)f->shape.dim[r + 1];
    size_t cnt = (size_t)f->nelem;
    float *krsc = malloc((cnt ? cnt : 1) * sizeof(float));
    if (krsc == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    kn_cuda_conv_filter_from_tf(f->data, (int)sp, 1, ci, co, 0, krsc);
    char what[300];
    snprintf(what, sizeof what, "the filter of node '%s'", n->name);
    const float *parts[1] = {krsc};
    ms_status st = upload_floats(w, what, parts, &cnt, 1, &s->wmem, &s->w_ohwi);
    free(krsc);
    return st;
}

/* Batch-norm coefficients, as the CPU kernels compute them: the op's form
 * (mul = scale * (1 / sqrtf(var + eps))) or the fused conv's (mul = scale /
 * sqrtf(var + eps)). */
static void bn_coefs(int fused_form, const float *sc, const float *of, const float *mu,
                     const float *var, float eps, int64_t C, float *mul, float *add) {
    for (int64_t c = 0; c < C; c++) {
        if (fused_form) {
            float m = sc[c] / sqrtf(var[c] + eps);
            mul[c] = m;
            add[c] = of[c] - mu[c] * m;
        } else {
            float inv = 1.0f / sqrtf(var[c] + eps);
            mul[c] = sc[c] * inv;
            add[c] = of[c] - mu[c] * sc[c] * inv;
        }
    }
}

/* The 4 batch-norm vectors from in[first..first+3] when all are float
 * constants of one length C. */
static int bn_const(op_state *s, int first, int64_t *C) {
    for (int i = 0; i < 4; i++) {
        const rt_tensor *t = first + i < MAX_CONST ? s->cin[first + i] : NULL;
        if (t == NULL || t->dtype != RT_DT_FLOAT || t->shape.rank != 1) return 0;
        if (i == 0) *C = t->nelem;
        else if (t->nelem != *C) return 0;
    }
    return 1;
}

static ms_status upload_bn(worker *w, const kn_node *n, op_state *s, int first, int fused_form) {
    int64_t C = 0;
    if (!bn_const(s, first, &C)) return MS_OK; /* computed per request */
    float *coef = malloc((size_t)(2 * C + 1) * sizeof(float));
    if (coef == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    bn_coefs(fused_form, s->cin[first]->data, s->cin[first + 1]->data, s->cin[first + 2]->data,
             s->cin[first + 3]->data, s->eps, C, coef, coef + C);
    char what[300];
    snprintf(what, sizeof what, "the batch-norm coefficients of node '%s'", n->name);
    const float *parts[2] = {coef, coef + C};
    size_t cnt[2] = {(size_t)C, (size_t)C};
    float *dst[2] = {NULL, NULL};
    ms_status st = upload_floats(w, what, parts, cnt, 2, &s->bnmem, dst);
    free(coef);
    s->bn_mul = dst[0];
    s->bn_add = dst[1];
    return st;
}

/* Conv3D / MaxPool3D / AvgPool3D (NDHWC) and Conv2DBackpropInput (NHWC):
 * the spatial strides, dilations, ksize and padding; 0 with *why set when
 * the GPU path cannot take them. */
static int ndhwc_attrs(const kn_node *n, op_state *s, const char **why) {
    const int r = s->rank3 ? 3 : 2, nd = r + 2;
    const char *fmt = s->rank3 ? "NDHWC" : "NHWC";
    if (!kn_attr_s_eq(n, "data_format", fmt, fmt)) {
        *why = s->rank3 ? "data_format is not NDHWC" : "data_format is not NHWC";
        return 0;
    }
    const char *keys[3] = {"strides", "dilations", s->kind == K_POOL3D ? "ksize" : NULL};
    int64_t *dst[3] = {s->s3, s->d3, s->k3};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 3; i++) dst[k][i] = 1;
        if (keys[k] == NULL) continue;
        int64_t v[8];
        int c = kn_attr_ilist(n, keys[k], v, 8);
        if (c < 0) continue;
        if (c != nd || v[0] != 1 || v[nd - 1] != 1) {
            *why = k == 0 ? "strides on batch / channels"
                   : k == 1 ? "dilations on batch / channels" : "ksize on batch / channels";
            return 0;
        }
        for (int i = 0; i < r; i++) dst[k][i] = v[1 + i];
    }
    if (!padding_attr(n, s) || s->explicit_pad) {
        *why = "padding";
        return 0;
    }
    return 1;
}

/* Reads the attributes the GPU path needs; sets *why when the node must run
 * the CPU kernel (decided at load). */
static ms_status parse_attrs(const kn_node *n, op_state *s, const char **why) {
    const char *op = n->op;
    *why = NULL;
    s->act = KN_CUDA_ACT_NONE;
    if (strcmp(op, "Add") == 0 || strcmp(op, "AddV2") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_ADD, s->commutative = 1;
    } else if (strcmp(op, "Sub") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_SUB;
    } else if (strcmp(op, "Mul") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_MUL, s->commutative = 1;
    } else if (strcmp(op, "RealDiv") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_DIV;
    } else if (strcmp(op, "Maximum") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_MAX, s->commutative = 1;
    } else if (strcmp(op, "Minimum") == 0) {
        s->kind = K_BINARY, s->binop = KN_CUDA_MIN, s->commutative = 1;
    } else if (kn_cuda__act(op, strlen(op)) > 0) {
        s->kind = K_ACT, s->act = (kn_cuda_act)kn_cuda__act(op, strlen(op));
    } else if (strcmp(op, KN_DCM_XFORM_OP) == 0) {
        s->kind = K_DCMXFORM;
        ms_status st = kn_dcm_xform_attrs_read(n, &s->dcm);
        if (st != MS_OK) return st;
    } else if (strcmp(op, "BiasAdd") == 0) {
        s->kind = K_BIAS;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
    } else if (strcmp(op, "Softmax") == 0) {
        s->kind = K_SOFTMAX;
    } else if (strcmp(op, "MatMul") == 0 || strcmp(op, "_FusedMatMul") == 0) {
        s->kind = K_MATMUL;
        s->adj_x = kn_attr_b(n, "transpose_a", 0);
        s->adj_y = kn_attr_b(n, "transpose_b", 0);
    } else if (strcmp(op, "Square") == 0 || strcmp(op, "Rsqrt") == 0 ||
               strcmp(op, "LeakyRelu") == 0 || strcmp(op, "Elu") == 0) {
        s->kind = K_UNARY;
        s->unop = op[0] == 'S' ? KN_CUDA_SQUARE : op[0] == 'R' ? KN_CUDA_RSQRT
                  : op[0] == 'L' ? KN_CUDA_LEAKY_RELU : KN_CUDA_ELU;
        s->alpha = kn_attr_f(n, "alpha", 0.2f);
    } else if (strcmp(op, "Conv2DBackpropInput") == 0 || strcmp(op, "Conv3D") == 0 ||
               strcmp(op, "MaxPool3D") == 0 || strcmp(op, "AvgPool3D") == 0) {
        s->rank3 = strstr(op, "3D") != NULL;
        s->backward = strcmp(op, "Conv2DBackpropInput") == 0;
        s->kind = strstr(op, "Pool3D") != NULL ? K_POOL3D : K_CONVND;
        if (s->kind == K_POOL3D) s->binop = op[0] == 'M' ? KN_CUDA_MAX : KN_CUDA_ADD;
        if (!ndhwc_attrs(n, s, why)) return MS_OK;
    } else if (strstr(op, "Conv2D") != NULL || strstr(op, "DepthwiseConv2dNative") != NULL) {
        s->kind = K_CONV;
        s->depthwise = strstr(op, "Depthwise") != NULL;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
        else if (!nhwc_pair(n, "strides", 1, &s->sh, &s->sw)) *why = "strides on batch / channels";
        else if (!nhwc_pair(n, "dilations", 1, &s->dh, &s->dw)) *why = "dilations on batch / channels";
        else if (!padding_attr(n, s)) *why = "padding";
    } else if (strncmp(op, "FusedBatchNorm", 14) == 0) {
        s->kind = K_BN;
        s->eps = kn_attr_f(n, "epsilon", 0.0001f);
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
    } else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AvgPool") == 0) {
        s->kind = op[0] == 'M' ? K_MAXPOOL : K_AVGPOOL;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
        else if (!nhwc_pair(n, "ksize", 1, &s->kh, &s->kw)) *why = "ksize on batch / channels";
        else if (!nhwc_pair(n, "strides", 1, &s->sh, &s->sw)) *why = "strides on batch / channels";
        else if (!padding_attr(n, s) || (s->explicit_pad && s->kind != K_MAXPOOL))
            *why = "padding"; /* EXPLICIT: MaxPool only, as on the CPU */
    } else if (strcmp(op, "Sum") == 0 || strcmp(op, "Mean") == 0 || strcmp(op, "Max") == 0 ||
               strcmp(op, "Min") == 0 || strcmp(op, "Prod") == 0) {
        s->kind = K_REDUCE;
        s->redop = op[0] == 'S' ? KN_CUDA_RED_SUM : op[0] == 'P' ? KN_CUDA_RED_PROD
                   : op[1] == 'e' ? KN_CUDA_RED_MEAN : op[1] == 'a' ? KN_CUDA_RED_MAX
                   : KN_CUDA_RED_MIN;
        s->keep_dims = kn_attr_b(n, "keep_dims", 0);
    } else if (strncmp(op, "BatchMatMul", 11) == 0) {
        s->kind = K_BMM;
        s->adj_x = kn_attr_b(n, "adj_x", 0);
        s->adj_y = kn_attr_b(n, "adj_y", 0);
        s->same_batch = strcmp(op, "BatchMatMul") == 0;
    } else if (strcmp(op, "GatherV2") == 0 || strcmp(op, "Gather") == 0) {
        s->kind = K_GATHER;
        s->v2 = op[6] == 'V';
        s->batch_dims = s->v2 ? kn_attr_i(n, "batch_dims", 0) : 0;
    } else if (strcmp(op, "ResizeNearestNeighbor") == 0) {
        s->kind = K_NEAREST;
        s->align_corners = kn_attr_b(n, "align_corners", 0);
        s->half_pixel = kn_attr_b(n, "half_pixel_centers", 0);
    } else if (strcmp(op, "Slice") == 0) {
        s->kind = K_SLICE;
    } else if (strcmp(op, "StridedSlice") == 0) {
        static const char *const keys[5] = {"begin_mask", "end_mask", "ellipsis_mask",
                                            "new_axis_mask", "shrink_axis_mask"};
        s->kind = K_SSLICE;
        for (int i = 0; i < 5; i++) s->masks[i] = kn_attr_i(n, keys[i], 0);
    } else if (strcmp(op, "ConcatV2") == 0) {
        s->kind = K_CONCAT;
    } else if (strcmp(op, "ResizeBilinear") == 0) {
        s->kind = K_RESIZE;
        s->align_corners = kn_attr_b(n, "align_corners", 0);
        s->half_pixel = kn_attr_b(n, "half_pixel_centers", 0);
    } else if (strcmp(op, "Transpose") == 0) {
        s->kind = K_TRANSPOSE;
    } else if (strcmp(op, "Pad") == 0 || strcmp(op, "PadV2") == 0) {
        s->kind = K_PAD;
    } else if (strcmp(op, "Reshape") == 0) {
        s->kind = K_RESHAPE;
    } else {
        return ms_errf(MS_EINTERNAL, "CUDA backend: no kernel for op %s", op);
    }
    if (n->op[0] == '_' && *why == NULL) { /* _FusedConv2D / _FusedMatMul: fused_ops */
        const char *ops[4];
        size_t lens[4];
        int cnt = kn_attr_slist(n, "fused_ops", ops, lens, 4), i = 0;
        if (cnt < 0) cnt = 0;
        if (cnt > 3) {
            *why = "fused_ops";
            return MS_OK;
        }
        if (i < cnt && str_is(ops[i], lens[i], "BiasAdd")) {
            s->fuse_bias = 1, s->nargs = 1, i++;
        } else if (i < cnt && s->kind == K_CONV && str_is(ops[i], lens[i], "FusedBatchNorm")) {
            s->fuse_bn = 1, s->nargs = 4, i++;
            s->eps = kn_attr_f(n, "epsilon", 0.0001f);
        }
        if (s->nargs > 0 && i < cnt && str_is(ops[i], lens[i], "Add")) s->fuse_add = 1, s->nargs++, i++;
        if (i < cnt) {
            int a = kn_cuda__act(ops[i], lens[i]);
            if (a < 0) *why = "a fused activation without a GPU kernel (LeakyRelu, Elu)";
            else s->act = (kn_cuda_act)a, i++;
        }
        if (*why == NULL && i != cnt) *why = "fused_ops";
    }
    return MS_OK;
}

static ms_status op_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    cuda_be *be = g_be;
    if (be == NULL) return ms_errf(MS_EINTERNAL, "node '%s': the CUDA backend is gone", node->name);
    op_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    ms_status st = MS_OK;
    s->cpu = kn_backend_kernel(be->cpu, node->op);
    if (s->cpu == NULL) {
        st = ms_errf(MS_ENOTSUP, "node '%s': op %s has no CPU kernel to fall back on", node->name,
                     node->op);
        goto fail;
    }
    if (s->cpu->prepare && (st = s->cpu->prepare(node, const_in, &s->cpu_state)) != MS_OK) goto fail;
    for (int i = 0; const_in && i < node->nin && i < MAX_CONST; i++)
        s->cin[i] = const_in[i] ? rt_tensor_ref(const_in[i]) : NULL;
    const char *why = NULL;
    if ((st = parse_attrs(node, s, &why)) != MS_OK) goto fail;
    if (why != NULL) {
        s->host = 1;
        MS_INFO("node '%s' (%s): runs on the CPU inside the CUDA backend (%s)", node->name,
                node->op, why);
    } else if (s->kind == K_CONVND && s->cin[1] != NULL) {
        worker *w = NULL;
        if ((st = get_worker(be, &w)) != MS_OK ||
            (st = upload_convnd_filter(w, node, s, s->cin[1])) != MS_OK)
            goto fail;
    } else if ((s->kind == K_CONV && s->cin[1] != NULL) || (s->kind == K_BN) ||
               (s->kind == K_CONV && s->fuse_bn)) {
        worker *w = NULL;
        if ((st = get_worker(be, &w)) != MS_OK) goto fail;
        if (s->kind == K_CONV && s->cin[1] != NULL && (st = upload_conv_filter(w, node, s, s->cin[1])) != MS_OK)
            goto fail;
        if (s->kind == K_BN && (st = upload_bn(w, node, s, 1, 0)) != MS_OK) goto fail;
        if (s->kind == K_CONV && s->fuse_bn && (st = upload_bn(w, node, s, 2, 1)) != MS_OK)
            goto fail;
    }
    *state = s;
    return MS_OK;
fail:
    op_release(s);
    return st;
}

/* ---- request path ---- */

/* Runs the node's CPU kernel: inputs copied to the host, outputs back. */
static ms_status host_run(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out, const char *why) {
    if (why != NULL && atomic_exchange(&s->warned, 1) == 0)
        MS_WARN("node '%s' (%s): this request runs on the CPU inside the CUDA backend (%s); logged "
                "once per node", node->name, node->op, why);
    rt_tensor *hin[256] = {0}, *hout[256] = {0};
    ms_status st = MS_OK;
    if (w->capturing) w->capture_bad = 1; /* the CPU's part is not in a graph */
    if (node->nin > 256 || node->nout > 256) return ms_errf(MS_ENOTSUP, "too many inputs");
    for (int i = 0; i < node->nin && st == MS_OK; i++)
        st = in[i]->buf && in[i]->buf->device == KN_CUDA_MEM ? copy_out(w, in[i], &hin[i])
                                                              : (hin[i] = rt_tensor_ref(in[i]), MS_OK);
    if (st == MS_OK) st = s->cpu->compute(ctx, node, s->cpu_state, hin, hout);
    for (int i = 0; i < node->nout && st == MS_OK; i++)
        if (hout[i] != NULL) st = copy_in(be, w, node, hout[i], &out[i]);
    for (int i = 0; i < 256; i++) {
        rt_tensor_unref(hin[i]);
        rt_tensor_unref(hout[i]);
    }
    return st;
}

#define FALLBACK(reason) return host_run(be, w, ctx, node, s, in, out, (reason))

static int is_f32(const rt_tensor *t) {
    return t != NULL && t->dtype == RT_DT_FLOAT;
}

static const float *F(const rt_tensor *t) {
    return (const float *)t->data;
}

/* The host value of input i: its constant, or a copy from the GPU. */
static ms_status host_input(worker *w, op_state *s, rt_tensor *const *in, int i, rt_tensor **out) {
    if (i < MAX_CONST && s->cin[i] != NULL) {
        *out = rt_tensor_ref(s->cin[i]);
        return MS_OK;
    }
    return copy_out(w, in[i], out);
}

/* Integer vector values of a host tensor (int32 / int64), at most max. */
static int int_values(const rt_tensor *t, int64_t *v, int max) {
    if (t->nelem > max) return -1;
    for (int64_t i = 0; i < t->nelem; i++) {
        if (t->dtype == RT_DT_INT32) v[i] = ((const int32_t *)t->data)[i];
        else if (t->dtype == RT_DT_INT64) v[i] = ((const int64_t *)t->data)[i];
        else return -1;
    }
    return (int)t->nelem;
}

static ms_status run_act(op_state *s, float *y, int64_t n, kn_cuda_act act, worker *w) {
    (void)s;
    if (act == KN_CUDA_ACT_NONE || n == 0) return MS_OK;
    return kn_cuda_bias_act(y, NULL, act, y, 1, n, w->stream);
}

static ms_status c_binary(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    if (!is_f32(in[0]) || !is_f32(in[1])) FALLBACK("not float32");
    int64_t nb = 0;
    int swap = 0;
    if (!kn_cuda__bcast(&in[0]->shape, &in[1]->shape, s->commutative, &nb, &swap)) {
        rt_shape os;
        kn_cuda_bcast_shape bs;
        if (!kn_cuda__bcast_general(&in[0]->shape, &in[1]->shape, &os, &bs))
            FALLBACK("shapes that do not broadcast");
        ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
        if (st != MS_OK) return st;
        return kn_cuda_binary_bcast(s->binop, F(in[0]), F(in[1]), &bs, (float *)out[0]->data,
                                    out[0]->nelem, w->stream);
    }
    const rt_tensor *a = swap ? in[1] : in[0], *b = swap ? in[0] : in[1];
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &a->shape, &out[0]);
    if (st != MS_OK) return st;
    return kn_cuda_binary(s->binop, F(a), F(b), nb, (float *)out[0]->data, a->nelem, w->stream);
}

static ms_status c_act(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                       rt_tensor *const *in, rt_tensor **out) {
    if (!is_f32(in[0])) FALLBACK("not float32");
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &in[0]->shape, &out[0]);
    if (st != MS_OK || in[0]->nelem == 0) return st;
    return kn_cuda_bias_act(F(in[0]), NULL, s->act, (float *)out[0]->data, 1, in[0]->nelem,
                            w->stream);
}

static ms_status c_bias(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                        rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0], *b = in[1];
    if (!is_f32(x) || !is_f32(b) || x->shape.rank < 1 || b->shape.rank != 1 ||
        b->nelem != x->shape.dim[x->shape.rank - 1] || b->nelem == 0)
        FALLBACK("shapes or dtypes");
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK || x->nelem == 0) return st;
    return kn_cuda_bias_act(F(x), F(b), KN_CUDA_ACT_NONE, (float *)out[0]->data,
                            x->nelem / b->nelem, b->nelem, w->stream);
}

static ms_status c_softmax(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                           rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank < 1) FALLBACK("shapes or dtypes");
    int64_t cols = x->shape.dim[x->shape.rank - 1];
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK || x->nelem == 0) return st;
    return kn_cuda_softmax(F(x), (float *)out[0]->data, x->nelem / cols, cols, w->stream);
}

/* Bias (+ addend) (+ activation) after a GEMM or convolution, in place on
 * y (rows x cols): the CPU's order, act(y + bias + addend). */
static ms_status epilogue(op_state *s, worker *w, float *y, int64_t rows, int64_t cols,
                          const float *bias, const float *addend, int act_done) {
    ms_status st = MS_OK;
    int64_t n = rows * cols;
    if (n == 0) return MS_OK;
    kn_cuda_act act = act_done ? KN_CUDA_ACT_NONE : s->act;
    if (bias != NULL)
        st = kn_cuda_bias_act(y, bias, addend ? KN_CUDA_ACT_NONE : act, y, rows, cols, w->stream);
    if (st == MS_OK && addend != NULL) {
        st = kn_cuda_binary(KN_CUDA_ADD, y, addend, n, y, n, w->stream);
        if (st == MS_OK) st = run_act(s, y, n, act, w);
    } else if (st == MS_OK && bias == NULL) {
        st = run_act(s, y, n, act, w);
    }
    return st;
}

static ms_status c_matmul(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *a = in[0], *b = in[1];
    if (!is_f32(a) || !is_f32(b) || a->shape.rank != 2 || b->shape.rank != 2 ||
        a->shape.dim[s->adj_x ? 0 : 1] != b->shape.dim[s->adj_y ? 1 : 0])
        FALLBACK("shapes or dtypes");
    /* transpose_a / transpose_b (kept in adj_x / adj_y): a is [K, M], b [N, K] */
    int64_t M = a->shape.dim[s->adj_x ? 1 : 0], K = a->shape.dim[s->adj_x ? 0 : 1],
            N = b->shape.dim[s->adj_y ? 0 : 1];
    const rt_tensor *bias = s->fuse_bias ? in[2] : NULL, *add = s->fuse_add ? in[3] : NULL;
    if (bias && (!is_f32(bias) || bias->nelem != N)) FALLBACK("bias shape");
    if (add && (!is_f32(add) || add->nelem != M * N)) FALLBACK("addend shape");
    rt_shape os = {.rank = 2, .dim = {M, N}};
    if (M == 0 || N == 0 || K == 0) FALLBACK("empty operands");
    int fuse_relu = bias && !add && s->act == KN_CUDA_ACT_RELU;
    kn_cuda_gemm *plan = NULL;
    ms_status st = MS_OK;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->ngemm; i++)
        if (s->gemm[i].m == M && s->gemm[i].n == N && s->gemm[i].k == K) plan = s->gemm[i].plan;
    if (plan == NULL && s->ngemm < MAX_PLANS) {
        st = kn_cuda_gemm_plan_t(M, N, K, s->adj_x, s->adj_y, bias && !add,
                                 fuse_relu ? KN_CUDA_ACT_RELU : KN_CUDA_ACT_NONE, &plan);
        if (st == MS_OK) s->gemm[s->ngemm++] = (gemm_entry){M, N, K, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) FALLBACK("more shapes than the plan cache holds");
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    dblock *ws = NULL;
    uint64_t wsb = kn_cuda_gemm_workspace(plan);
    if (wsb > 0 && (st = tmp_get(be, w, wsb, "a cuBLASLt workspace", &ws)) != MS_OK) return st;
    float *y = (float *)out[0]->data;
    st = kn_cuda_gemm_run(plan, F(a), F(b), bias && !add ? F(bias) : NULL, y, ws ? ws->ptr : NULL,
                          w->stream);
    block_put(ws);
    if (st != MS_OK) return st;
    if (bias && !add) /* bias (and ReLU) done by cuBLASLt */
        return fuse_relu ? MS_OK : run_act(s, y, M * N, s->act, w);
    return epilogue(s, w, y, M, N, bias ? F(bias) : NULL, add ? F(add) : NULL, 0);
}

static ms_status c_conv(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                        rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0], *f = in[1];
    if (!is_f32(x) || !is_f32(f) || x->shape.rank != 4 || f->shape.rank != 4)
        FALLBACK("shapes or dtypes");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    int64_t kh = f->shape.dim[0], kw = f->shape.dim[1];
    if (f->shape.dim[2] != C) FALLBACK("grouped convolution");
    int64_t oc = s->depthwise ? C * f->shape.dim[3] : f->shape.dim[3];
    int64_t oh, ow, pt = s->pads[0], pb = s->pads[1], pl = s->pads[2], pr = s->pads[3];
    int mode = s->same ? 1 : s->explicit_pad ? -1 : 0;
    if (kn_cuda__spatial(H, kh, s->sh, s->dh, mode, &oh, &pt, &pb) != MS_OK ||
        kn_cuda__spatial(W, kw, s->sw, s->dw, mode, &ow, &pl, &pr) != MS_OK)
        FALLBACK("window larger than the input");
    if (N * H * W * C == 0 || oc == 0 || oh <= 0 || ow <= 0) FALLBACK("empty tensors");
    if (N > INT32_MAX || H + pt + pb > INT32_MAX || W + pl + pr > INT32_MAX || C > INT32_MAX ||
        oc > INT32_MAX)
        FALLBACK("sizes beyond cuDNN's int");
    const rt_tensor *bias = s->fuse_bias ? in[2] : NULL;
    const rt_tensor *add = s->fuse_add ? in[1 + s->nargs] : NULL;
    if (bias && (!is_f32(bias) || bias->nelem != oc)) FALLBACK("bias shape");
    if (add && (!is_f32(add) || add->nelem != N * oh * ow * oc)) FALLBACK("addend shape");
    if (s->fuse_bn)
        for (int i = 2; i < 6; i++)
            if (!is_f32(in[i]) || in[i]->nelem != oc) FALLBACK("batch-norm argument shapes");
    int uneven = pt != pb || pl != pr;
    kn_cuda_conv_shape cs = {.n = (int)N, .h = (int)(uneven ? H + pt + pb : H),
                             .w = (int)(uneven ? W + pl + pr : W), .c = (int)C, .kh = (int)kh,
                             .kw = (int)kw, .oc = (int)oc, .groups = s->depthwise ? (int)C : 1,
                             .sh = (int)s->sh, .sw = (int)s->sw, .dh = (int)s->dh, .dw = (int)s->dw,
                             .pad_top = uneven ? 0 : (int)pt, .pad_bottom = uneven ? 0 : (int)pb,
                             .pad_left = uneven ? 0 : (int)pl, .pad_right = uneven ? 0 : (int)pr};
    ms_status st = MS_OK;
    dblock *xpad = NULL, *wt = NULL, *ws = NULL, *bn = NULL;
    kn_cuda_conv *plan = NULL;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconv; i++)
        if (memcmp(&s->conv[i].shape, &cs, sizeof cs) == 0) plan = s->conv[i].plan;
    if (plan == NULL && s->nconv < MAX_PLANS) {
        st = kn_cuda_conv_plan(&cs, &plan);
        if (st == MS_OK) s->conv[s->nconv++] = (conv_entry){cs, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) FALLBACK("more shapes than the plan cache holds");
    int poh = 0, pow_ = 0;
    kn_cuda_conv_out_hw(plan, &poh, &pow_);
    if (poh != oh || pow_ != ow)
        return ms_errf(MS_EINTERNAL, "node '%s': cuDNN gives %dx%d, TensorFlow %lldx%lld",
                       node->name, poh, pow_, (long long)oh, (long long)ow);
    rt_shape os = {.rank = 4, .dim = {N, oh, ow, oc}};
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    float *y = (float *)out[0]->data;
    const float *xp = F(x), *wp = s->w_ohwi;
    if (uneven) { /* TensorFlow's uneven SAME: pad explicitly, then a VALID convolution */
        uint64_t nb = (uint64_t)N * cs.h * cs.w * C * sizeof(float);
        if ((st = tmp_get(be, w, nb, "a padded convolution input", &xpad)) != MS_OK) goto done;
        if ((st = kn_cuda_pad_nhwc(xp, (int)N, (int)H, (int)W, (int)C, (int)pt, (int)pb, (int)pl,
                                   (int)pr, 0.0f, xpad->ptr, w->stream)) != MS_OK)
            goto done;
        xp = xpad->ptr;
    }
    if (wp == NULL) { /* a filter computed in the graph: reorder it on the GPU */
        if ((st = tmp_get(be, w, (uint64_t)f->nelem * sizeof(float), "a reordered filter", &wt)) != MS_OK)
            goto done;
        int64_t dims[4] = {kh, kw, f->shape.dim[2], f->shape.dim[3]};
        static const int conv_perm[4] = {3, 0, 1, 2}, dw_perm[3] = {2, 0, 1};
        if (s->depthwise) {
            int64_t d3[3] = {kh, kw, oc};
            st = kn_cuda_transpose(F(f), 3, d3, dw_perm, wt->ptr, w->stream);
        } else {
            st = kn_cuda_transpose(F(f), 4, dims, conv_perm, wt->ptr, w->stream);
        }
        if (st != MS_OK) goto done;
        wp = wt->ptr;
    }
    uint64_t wsb = kn_cuda_conv_workspace(plan);
    if (wsb > 0 && (st = tmp_get(be, w, wsb, "a cuDNN workspace", &ws)) != MS_OK) goto done;
    pthread_mutex_lock(&s->mu);
    st = kn_cuda_conv_run(plan, xp, wp, y, ws ? ws->ptr : NULL, w->stream);
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) goto done;
    int64_t rows = N * oh * ow;
    if (s->fuse_bn) {
        const float *mul = s->bn_mul, *addc = s->bn_add;
        if (mul == NULL) { /* coefficients from tensors of the graph: on the host */
            rt_tensor *h[4] = {0};
            float *coef = malloc((size_t)(2 * oc) * sizeof(float));
            for (int i = 0; i < 4 && st == MS_OK; i++) st = host_input(w, s, in, 2 + i, &h[i]);
            if (st == MS_OK && coef == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
            if (st == MS_OK) {
                bn_coefs(1, F(h[0]), F(h[1]), F(h[2]), F(h[3]), s->eps, oc, coef, coef + oc);
                st = tmp_get(be, w, (uint64_t)(2 * oc) * sizeof(float), "batch-norm coefficients", &bn);
            }
            if (w->capturing) w->capture_bad = 1; /* host values of this request: no graph */
            if (st == MS_OK)
                st = kn_cuda_h2d(bn->ptr, coef, (size_t)(2 * oc) * sizeof(float), w->stream,
                                 "batch-norm coefficients");
            if (st == MS_OK) st = kn_cuda_stream_sync(w->stream, "batch-norm coefficients");
            for (int i = 0; i < 4; i++) rt_tensor_unref(h[i]);
            free(coef);
            if (st != MS_OK) goto done;
            mul = bn->ptr;
            addc = mul + oc;
        }
        st = kn_cuda_channel_affine(y, mul, addc, add ? KN_CUDA_ACT_NONE : s->act, y, rows, oc,
                                    w->stream);
        if (st == MS_OK && add) st = epilogue(s, w, y, rows, oc, NULL, F(add), 0);
    } else {
        st = epilogue(s, w, y, rows, oc, bias ? F(bias) : NULL, add ? F(add) : NULL, 0);
    }
done:
    block_put(xpad);
    block_put(wt);
    block_put(ws);
    block_put(bn);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

static ms_status c_bn(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                      rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank != 4) FALLBACK("shapes or dtypes");
    int64_t C = x->shape.dim[3];
    for (int i = 1; i < 5; i++)
        if (!is_f32(in[i]) || in[i]->shape.rank != 1 || in[i]->nelem != C) FALLBACK("argument shapes");
    if (s->bn_mul == NULL || C == 0) FALLBACK("batch-norm arguments computed in the graph");
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK) return st;
    if (x->nelem > 0)
        st = kn_cuda_channel_affine(F(x), s->bn_mul, s->bn_add, KN_CUDA_ACT_NONE,
                                    (float *)out[0]->data, x->nelem / C, C, w->stream);
    for (int i = 1; i < node->nout && i < 6 && st == MS_OK; i++)
        out[i] = rt_tensor_ref(in[i % 2 ? 3 : 4]);
    return st;
}

static ms_status c_pool(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                        rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank != 4) FALLBACK("shapes or dtypes");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    int64_t oh, ow, pt = s->pads[0], pb = s->pads[1], pl = s->pads[2], pr = s->pads[3];
    int mode = s->same ? 1 : s->explicit_pad ? -1 : 0;
    if (kn_cuda__spatial(H, s->kh, s->sh, 1, mode, &oh, &pt, &pb) != MS_OK ||
        kn_cuda__spatial(W, s->kw, s->sw, 1, mode, &ow, &pl, &pr) != MS_OK)
        FALLBACK("window larger than the input");
    if (pt > INT32_MAX / 4 || pl > INT32_MAX / 4) FALLBACK("sizes");
    if (N * H * W * C == 0 || oh <= 0 || ow <= 0 || N > INT32_MAX || H > INT32_MAX ||
        W > INT32_MAX || C > INT32_MAX)
        FALLBACK("sizes");
    rt_shape os = {.rank = 4, .dim = {N, oh, ow, C}};
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    kn_cuda_pool_shape ps = {.n = (int)N, .h = (int)H, .w = (int)W, .c = (int)C, .kh = (int)s->kh,
                             .kw = (int)s->kw, .sh = (int)s->sh, .sw = (int)s->sw,
                             .pad_top = (int)pt, .pad_left = (int)pl, .oh = (int)oh, .ow = (int)ow};
    return s->kind == K_MAXPOOL ? kn_cuda_maxpool(&ps, F(x), (float *)out[0]->data, w->stream)
                                : kn_cuda_avgpool(&ps, F(x), (float *)out[0]->data, w->stream);
}

/* Sum / Mean / Max / Min / Prod over any axes (kn_cuda_reduce). */
static ms_status c_reduce(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x)) FALLBACK("not float32");
    if (x->nelem == 0) FALLBACK("empty tensors");
    rt_tensor *ax = NULL;
    ms_status st = host_input(w, s, in, 1, &ax);
    if (st != MS_OK) return st;
    int64_t v[64];
    int n = ax->shape.rank > 1 ? -1 : int_values(ax, v, 64), red[RT_MAX_RANK] = {0};
    rt_tensor_unref(ax);
    const int rank = x->shape.rank;
    for (int i = 0; i < n; i++) {
        int64_t a = v[i] < 0 ? v[i] + rank : v[i];
        if (a < 0 || a >= rank) n = -1;
        else red[a] = 1;
    }
    if (n < 0) FALLBACK("reduction_indices"); /* the CPU kernel gives the error */
    rt_shape os = {.rank = 0};
    for (int d = 0; d < rank; d++)
        if (!red[d]) os.dim[os.rank++] = x->shape.dim[d];
        else if (s->keep_dims) os.dim[os.rank++] = 1;
    kn_cuda_reduce_shape p;
    kn_cuda__reduce_plan(&x->shape, red, &p);
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_reduce(s->redop, &p, F(x), (float *)out[0]->data, w->stream);
}

/* BatchMatMul / V2 / V3 through cuBLASLt: equal batches as one
 * strided-batched GEMM, a broadcast y as one GEMM over x's rows, other
 * broadcasts as one GEMM per output batch. */
static ms_status c_bmm(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                       rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *a = in[0], *b = in[1];
    if (!is_f32(a) || !is_f32(b)) FALLBACK("not float32");
    kn_cuda_bmm g;
    if (!kn_cuda__bmm(&a->shape, &b->shape, s->adj_x, s->adj_y, s->same_batch, &g))
        FALLBACK("shapes (or an empty product)"); /* the CPU kernel gives the error */
    int64_t key[6] = {g.mode == KN_CUDA_BMM_STRIDED ? g.batch : 1,
                      g.mode == KN_CUDA_BMM_FLAT ? g.batch * g.m : g.m, g.n, g.k,
                      g.mode == KN_CUDA_BMM_STRIDED ? g.stride_x
                      : g.mode == KN_CUDA_BMM_LOOP  ? g.m * g.k : 0,
                      g.mode == KN_CUDA_BMM_STRIDED ? g.stride_w
                      : g.mode == KN_CUDA_BMM_LOOP  ? g.k * g.n : 0};
    if (key[0] > INT32_MAX || key[1] > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
        FALLBACK("sizes beyond cuBLASLt's int");
    kn_cuda_bgemm *plan = NULL;
    ms_status st = MS_OK;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nbgemm; i++)
        if (memcmp(s->bgemm[i].key, key, sizeof key) == 0) plan = s->bgemm[i].plan;
    if (plan == NULL && s->nbgemm < MAX_PLANS) {
        st = kn_cuda_bgemm_plan(key[0], key[1], g.n, g.k, s->adj_x, s->adj_y, key[4], key[5],
                                &plan);
        if (st == MS_OK) {
            memcpy(s->bgemm[s->nbgemm].key, key, sizeof key);
            s->bgemm[s->nbgemm++].plan = plan;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) FALLBACK("more shapes than the plan cache holds");
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &g.out, &out[0])) != MS_OK) return st;
    dblock *ws = NULL;
    uint64_t wsb = kn_cuda_bgemm_workspace(plan);
    if (wsb > 0 && (st = block_get(be, w, wsb, "a cuBLASLt workspace", &ws)) != MS_OK) goto done;
    float *y = (float *)out[0]->data;
    if (g.mode != KN_CUDA_BMM_LOOP) {
        st = kn_cuda_bgemm_run(plan, F(a), F(b), y, ws ? ws->ptr : NULL, w->stream);
    } else {
        for (int64_t i = 0; i < g.batch && st == MS_OK; i++) {
            int64_t ox = 0, ow = 0;
            kn_cuda__bmm_offsets(&g, i, &ox, &ow);
            st = kn_cuda_bgemm_run(plan, F(a) + ox, F(b) + ow, y + i * g.m * g.n,
                                   ws ? ws->ptr : NULL, w->stream);
        }
    }
done:
    block_put(ws);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

/* Element size of a dtype the index kernels move (1, 2, 4 or 8 bytes of
 * plain data); 0 for others (strings, complex128, resources). */
static size_t move_size(rt_dtype dt) {
    size_t es = rt_dtype_size(dt);
    if (dt == RT_DT_STRING || !rt_dtype_is_pod(dt)) return 0;
    return es == 1 || es == 2 || es == 4 || es == 8 ? es : 0;
}

/* GatherV2 / Gather of any 1/2/4/8-byte dtype; the indices are checked on
 * the host (their constant, or a copy from the GPU) so that an index out of
 * range gives the CPU kernel's error. */
static ms_status c_gather(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *p = in[0], *ix = in[1];
    size_t es = move_size(p->dtype);
    if (es == 0) FALLBACK("dtype");
    if (ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) FALLBACK("indices dtype");
    int64_t axis = 0;
    ms_status st = MS_OK;
    if (s->v2) {
        rt_tensor *at = NULL;
        if ((st = host_input(w, s, in, 2, &at)) != MS_OK) return st;
        int na = at->shape.rank > 1 ? -1 : int_values(at, &axis, 1);
        rt_tensor_unref(at);
        if (na != 1) FALLBACK("axis");
    }
    kn_cuda_gather_shape g;
    rt_shape os;
    if (!kn_cuda__gather_shape(&p->shape, &ix->shape, axis, s->batch_dims, &g, &os))
        FALLBACK("shapes"); /* the CPU kernel gives the error */
    if (rt_shape_nelem(&os) == 0) FALLBACK("empty tensors");
    rt_tensor *hix = NULL;
    if ((st = host_input(w, s, in, 1, &hix)) != MS_OK) return st;
    int bad = 0;
    for (int64_t i = 0; i < hix->nelem && !bad; i++) {
        int64_t v = hix->dtype == RT_DT_INT32 ? ((const int32_t *)hix->data)[i]
                                              : ((const int64_t *)hix->data)[i];
        bad = v < 0 || v >= g.n;
    }
    rt_tensor_unref(hix);
    if (bad) FALLBACK("an index out of range"); /* the CPU kernel gives the error */
    if ((st = dev_tensor(be, w, node, p->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_gather(&g, p->data, es, ix->data, ix->dtype == RT_DT_INT64, out[0]->data,
                          w->stream);
}

/* ResizeNearestNeighbor of the dtypes the CPU kernel takes. */
static ms_status c_nearest(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                           rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    static const rt_dtype ok[] = {RT_DT_FLOAT, RT_DT_DOUBLE, RT_DT_INT8,  RT_DT_UINT8,
                                  RT_DT_INT16, RT_DT_UINT16, RT_DT_INT32, RT_DT_INT64,
                                  RT_DT_HALF,  RT_DT_BFLOAT16};
    int known = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) known |= x->dtype == ok[i];
    if (!known || x->shape.rank != 4) FALLBACK("shapes or dtypes");
    rt_tensor *sz = NULL;
    ms_status st = host_input(w, s, in, 1, &sz);
    if (st != MS_OK) return st;
    int64_t v[2];
    int n = sz->dtype == RT_DT_INT32 && sz->shape.rank == 1 ? int_values(sz, v, 2) : -1;
    rt_tensor_unref(sz);
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (n != 2 || v[0] <= 0 || v[1] <= 0 || N <= 0 || H <= 0 || W <= 0 || C <= 0 ||
        H > INT32_MAX || W > INT32_MAX)
        FALLBACK("size"); /* the CPU kernel gives the error */
    rt_shape os = {.rank = 4, .dim = {N, v[0], v[1], C}};
    if ((st = dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_resize_nearest(x->data, rt_dtype_size(x->dtype), N, H, W, C, v[0], v[1],
                                  s->align_corners, s->half_pixel, out[0]->data, w->stream);
}

/* Slice / StridedSlice as one strided copy of any 1/2/4/8-byte dtype. */
static ms_status c_slice(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                         rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    size_t es = move_size(x->dtype);
    if (es == 0) FALLBACK("dtype");
    const int nv = s->kind == K_SSLICE ? 3 : 2;
    int64_t v[3][31];
    int cnt[3] = {-1, -1, -1};
    ms_status st = MS_OK;
    for (int i = 0; i < nv; i++) {
        rt_tensor *t = NULL;
        if ((st = host_input(w, s, in, 1 + i, &t)) != MS_OK) return st;
        cnt[i] = t->shape.rank > 1 ? -1 : int_values(t, v[i], 31);
        rt_tensor_unref(t);
        if (cnt[i] < 0) FALLBACK("begin / end / size / strides");
    }
    kn_cuda_strided p;
    rt_shape os;
    int ok = 0;
    if (s->kind == K_SSLICE)
        ok = cnt[0] == cnt[1] && cnt[0] == cnt[2] &&
             kn_cuda__strided_slice(&x->shape, v[0], v[1], v[2], cnt[0], s->masks, &p, &os);
    else
        ok = cnt[0] == cnt[1] && kn_cuda__slice(&x->shape, v[0], v[1], cnt[0], &p, &os);
    if (!ok) FALLBACK("begin / end / size / strides"); /* the CPU kernel gives the error */
    if (rt_shape_nelem(&os) <= 0) FALLBACK("empty tensors");
    if ((st = dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_strided_copy(&p, x->data, es, out[0]->data, w->stream);
}

static ms_status c_concat(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    int k = node->nin - 1;
    if (k < 1 || k > 64) FALLBACK("number of inputs");
    rt_tensor *ax = NULL;
    ms_status st = host_input(w, s, in, k, &ax);
    if (st != MS_OK) return st;
    int64_t axis = 0;
    int na = int_values(ax, &axis, 1);
    rt_tensor_unref(ax);
    const rt_shape *s0 = &in[0]->shape;
    if (na != 1 || s0->rank < 1) FALLBACK("axis");
    if (axis < 0) axis += s0->rank;
    if (axis < 0 || axis >= s0->rank) FALLBACK("axis");
    const float *srcs[64];
    int64_t inner[64], outer = 1, total = 0;
    for (int d = 0; d < axis; d++) outer *= s0->dim[d];
    rt_shape os = *s0;
    for (int i = 0; i < k; i++) {
        const rt_shape *si = &in[i]->shape;
        if (!is_f32(in[i]) || si->rank != s0->rank) FALLBACK("dtypes or ranks");
        for (int d = 0; d < si->rank; d++)
            if (d != axis && si->dim[d] != s0->dim[d]) FALLBACK("shapes");
        inner[i] = in[i]->nelem / (outer ? outer : 1);
        if (inner[i] <= 0 || outer == 0) FALLBACK("empty inputs");
        total += si->dim[axis];
        srcs[i] = F(in[i]);
    }
    os.dim[axis] = total;
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_concat(srcs, inner, k, outer, (float *)out[0]->data, w->stream);
}

static ms_status c_resize(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank != 4) FALLBACK("shapes or dtypes");
    rt_tensor *sz = NULL;
    ms_status st = host_input(w, s, in, 1, &sz);
    if (st != MS_OK) return st;
    int64_t v[2];
    int n = int_values(sz, v, 2);
    rt_tensor_unref(sz);
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (n != 2 || v[0] <= 0 || v[1] <= 0 || v[0] > INT32_MAX || v[1] > INT32_MAX ||
        N * H * W * C == 0 || N > INT32_MAX || H > INT32_MAX || W > INT32_MAX || C > INT32_MAX)
        FALLBACK("size");
    rt_shape os = {.rank = 4, .dim = {N, v[0], v[1], C}};
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_resize_bilinear(F(x), (int)N, (int)H, (int)W, (int)C, (int)v[0], (int)v[1],
                                   s->align_corners, s->half_pixel, (float *)out[0]->data, w->stream);
}

static ms_status c_transpose(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                             rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    /* a copy: any 4-byte dtype moves as float bits */
    if (x->dtype == RT_DT_STRING || rt_dtype_size(x->dtype) != 4 || x->shape.rank > 8 ||
        x->shape.rank < 1 || x->nelem == 0)
        FALLBACK("dtype or rank");
    rt_tensor *pt = NULL;
    ms_status st = host_input(w, s, in, 1, &pt);
    if (st != MS_OK) return st;
    int64_t v[8];
    int n = int_values(pt, v, 8), perm[8], seen = 0;
    rt_tensor_unref(pt);
    if (n != x->shape.rank) FALLBACK("perm");
    rt_shape os = {.rank = n};
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || (seen & (1 << v[i]))) FALLBACK("perm");
        seen |= 1 << v[i];
        perm[i] = (int)v[i];
        os.dim[i] = x->shape.dim[v[i]];
    }
    if ((st = dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_transpose(F(x), n, x->shape.dim, perm, (float *)out[0]->data, w->stream);
}

static ms_status c_pad(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                       rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank != 4 || x->nelem == 0) FALLBACK("not a 4-D float tensor");
    rt_tensor *pt = NULL, *cv = NULL;
    ms_status st = host_input(w, s, in, 1, &pt);
    if (st != MS_OK) return st;
    int64_t p[8];
    int n = int_values(pt, p, 8);
    rt_tensor_unref(pt);
    float value = 0.0f;
    if (node->nin > 2) {
        if ((st = host_input(w, s, in, 2, &cv)) != MS_OK) return st;
        int ok = is_f32(cv) && cv->nelem == 1;
        if (ok) value = F(cv)[0];
        rt_tensor_unref(cv);
        if (!ok) FALLBACK("constant_values");
    }
    if (n != 8 || p[0] || p[1] || p[6] || p[7]) FALLBACK("padding of batch or channels");
    for (int i = 2; i < 6; i++)
        if (p[i] < 0 || p[i] > INT32_MAX / 4) FALLBACK("negative padding");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (N > INT32_MAX || H > INT32_MAX || W > INT32_MAX || C > INT32_MAX) FALLBACK("sizes");
    rt_shape os = {.rank = 4, .dim = {N, H + p[2] + p[3], W + p[4] + p[5], C}};
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_pad_nhwc(F(x), (int)N, (int)H, (int)W, (int)C, (int)p[2], (int)p[3], (int)p[4],
                            (int)p[5], value, (float *)out[0]->data, w->stream);
}

static ms_status c_reshape(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                           rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (x->dtype == RT_DT_STRING) FALLBACK("strings");
    rt_tensor *sh = NULL;
    ms_status st = host_input(w, s, in, 1, &sh);
    if (st != MS_OK) return st;
    int64_t v[RT_MAX_RANK];
    int n = int_values(sh, v, RT_MAX_RANK), unknown = -1;
    rt_tensor_unref(sh);
    if (n < 0) FALLBACK("shape");
    rt_shape os = {.rank = n};
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] == -1 && unknown < 0) unknown = i;
        else if (v[i] < 0) FALLBACK("shape");
        else known *= v[i];
        os.dim[i] = v[i];
    }
    if (unknown >= 0) {
        if (known == 0 || x->nelem % known != 0) FALLBACK("shape");
        os.dim[unknown] = x->nelem / known;
    }
    if (rt_shape_nelem(&os) != x->nelem) FALLBACK("shape"); /* the CPU kernel gives the error */
    return rt_tensor_view(x, &os, &out[0]);
}

/* _DcmPixelTransform: the raw pixels and per-file params are on the GPU
 * (the planner's copies from _DcmDecodeRaw); one kernel gives the model's
 * input. */
static ms_status c_dcmxform(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                            rt_tensor *const *in, rt_tensor **out) {
    kn_dcm_xform_geom g;
    if (kn_dcm_xform_geometry(node, &s->dcm, in[0], in[1], NULL, &g) != MS_OK)
        FALLBACK("raw pixel layout"); /* the CPU kernel gives the error */
    rt_shape os = g.nchw ? rt_shape_make(4, (int64_t[]){g.n, g.C, g.oh, g.ow})
                         : rt_shape_make(4, (int64_t[]){g.n, g.oh, g.ow, g.C});
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    return kn_cuda_dicom_xform(in[0]->data, (const kn_dcm_xform_file *)in[1]->data, &g,
                               (float *)out[0]->data, w->stream);
}

static ms_status c_unary(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                         rt_tensor *const *in, rt_tensor **out) {
    if (!is_f32(in[0])) FALLBACK("not float32");
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &in[0]->shape, &out[0]);
    if (st != MS_OK || in[0]->nelem == 0) return st;
    return kn_cuda_unary(s->unop, F(in[0]), s->alpha, (float *)out[0]->data, in[0]->nelem,
                         w->stream);
}

/* Conv3D (x, filter) and Conv2DBackpropInput (input_sizes, filter,
 * out_backprop) through one cuDNN Nd plan per shape. */
static ms_status c_convnd(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const int r = s->rank3 ? 3 : 2;
    const rt_tensor *f = in[1], *src = s->backward ? in[2] : in[0];
    if (!is_f32(f) || !is_f32(src) || f->shape.rank != r + 2 || src->shape.rank != r + 2)
        FALLBACK("shapes or dtypes");
    int64_t xs[5]; /* the forward convolution's input x: N, spatial..., C */
    ms_status st = MS_OK;
    if (s->backward) {
        rt_tensor *sz = NULL;
        if ((st = host_input(w, s, in, 0, &sz)) != MS_OK) return st;
        int cnt = int_values(sz, xs, 5);
        rt_tensor_unref(sz);
        if (cnt != r + 2) FALLBACK("input_sizes"); /* the CPU kernel gives the error */
    } else {
        for (int i = 0; i < r + 2; i++) xs[i] = src->shape.dim[i];
    }
    const int64_t C = xs[r + 1], OC = f->shape.dim[r + 1];
    if (f->shape.dim[r] != C) FALLBACK("filter channels");
    kn_cuda_convnd_shape cs;
    memset(&cs, 0, sizeof cs);
    cs.rank = r, cs.backward_data = s->backward;
    int64_t osp[3] = {1, 1, 1}, total = xs[0] * C * OC;
    for (int i = 0; i < r; i++) {
        int64_t lo = 0, hi = 0;
        if (kn_cuda__spatial(xs[1 + i], f->shape.dim[i], s->s3[i], s->d3[i], s->same, &osp[i], &lo,
                             &hi) != MS_OK)
            FALLBACK("window larger than the input");
        if (lo != hi) FALLBACK("uneven SAME padding (cuDNN pads symmetrically)");
        if (xs[1 + i] > INT32_MAX || f->shape.dim[i] > INT32_MAX || s->s3[i] > INT32_MAX ||
            s->d3[i] > INT32_MAX || lo > INT32_MAX)
            FALLBACK("sizes beyond cuDNN's int");
        cs.in[i] = (int)xs[1 + i], cs.k[i] = (int)f->shape.dim[i], cs.stride[i] = (int)s->s3[i];
        cs.dil[i] = (int)s->d3[i], cs.pad_lo[i] = cs.pad_hi[i] = (int)lo;
        total *= xs[1 + i] * osp[i];
    }
    if (total == 0) FALLBACK("empty tensors");
    if (xs[0] > INT32_MAX || C > INT32_MAX || OC > INT32_MAX) FALLBACK("sizes beyond cuDNN's int");
    cs.n = (int)xs[0], cs.c = (int)C, cs.oc = (int)OC;
    rt_shape ys = {.rank = r + 2}, xshape = {.rank = r + 2};
    ys.dim[0] = xs[0], ys.dim[r + 1] = OC;
    for (int i = 0; i < r + 2; i++) xshape.dim[i] = xs[i];
    for (int i = 0; i < r; i++) ys.dim[1 + i] = osp[i];
    if (s->backward && !rt_shape_equal(&src->shape, &ys)) FALLBACK("out_backprop shape");
    kn_cuda_convnd *plan = NULL;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconvnd; i++)
        if (memcmp(&s->convnd[i].shape, &cs, sizeof cs) == 0) plan = s->convnd[i].plan;
    if (plan == NULL && s->nconvnd < MAX_PLANS) {
        st = kn_cuda_convnd_plan(&cs, &plan);
        if (st == MS_OK) s->convnd[s->nconvnd++] = (convnd_entry){cs, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) FALLBACK("more shapes than the plan cache holds");
    int po[3];
    kn_cuda_convnd_out(plan, po);
    for (int i = 0; i < r; i++)
        if (po[i] != osp[i])
            return ms_errf(MS_EINTERNAL, "node '%s': cuDNN's output size %d on axis %d, TensorFlow's %lld",
                           node->name, po[i], i, (long long)osp[i]);
    if ((st = dev_tensor(be, w, node, RT_DT_FLOAT, s->backward ? &xshape : &ys, &out[0])) != MS_OK)
        return st;
    dblock *wt = NULL, *ws = NULL;
    const float *wp = s->w_ohwi;
    if (wp == NULL) { /* a filter computed in the graph: [spatial, C, OC] -> [OC, spatial, C] */
        if ((st = tmp_get(be, w, (uint64_t)f->nelem * sizeof(float), "a reordered filter", &wt)) != MS_OK)
            goto done;
        int64_t sp = f->nelem / (C * OC), d3[3] = {sp, C, OC};
        static const int perm[3] = {2, 0, 1};
        if ((st = kn_cuda_transpose(F(f), 3, d3, perm, wt->ptr, w->stream)) != MS_OK) goto done;
        wp = wt->ptr;
    }
    uint64_t wsb = kn_cuda_convnd_workspace(plan);
    if (wsb > 0 && (st = tmp_get(be, w, wsb, "a cuDNN workspace", &ws)) != MS_OK) goto done;
    pthread_mutex_lock(&s->mu);
    st = kn_cuda_convnd_run(plan, F(src), wp, (float *)out[0]->data, ws ? ws->ptr : NULL, w->stream);
    pthread_mutex_unlock(&s->mu);
done:
    block_put(wt);
    block_put(ws);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

static ms_status c_pool3d(cuda_be *be, worker *w, kn_ctx *ctx, const kn_node *node, op_state *s,
                          rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!is_f32(x) || x->shape.rank != 5) FALLBACK("shapes or dtypes");
    int64_t o[3], lo[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        int64_t hi = 0;
        if (kn_cuda__spatial(x->shape.dim[1 + i], s->k3[i], s->s3[i], 1, s->same, &o[i], &lo[i], &hi) != MS_OK)
            FALLBACK("window larger than the input");
        if (s->k3[i] > INT32_MAX || s->s3[i] > INT32_MAX || o[i] <= 0) FALLBACK("sizes");
    }
    for (int i = 0; i < 5; i++)
        if (x->shape.dim[i] <= 0 || x->shape.dim[i] > INT32_MAX) FALLBACK("sizes");
    rt_shape os = {.rank = 5, .dim = {x->shape.dim[0], o[0], o[1], o[2], x->shape.dim[4]}};
    ms_status st = dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    kn_cuda_pool3_shape ps = {
        .n = (int)x->shape.dim[0], .d = (int)x->shape.dim[1], .h = (int)x->shape.dim[2],
        .w = (int)x->shape.dim[3], .c = (int)x->shape.dim[4], .kd = (int)s->k3[0],
        .kh = (int)s->k3[1], .kw = (int)s->k3[2], .sd = (int)s->s3[0], .sh = (int)s->s3[1],
        .sw = (int)s->s3[2], .pad_d = (int)lo[0], .pad_h = (int)lo[1], .pad_w = (int)lo[2],
        .od = (int)o[0], .oh = (int)o[1], .ow = (int)o[2]};
    return kn_cuda_pool3d(&ps, s->binop == KN_CUDA_MAX, F(x), (float *)out[0]->data, w->stream);
}

static ms_status op_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    op_state *s = state;
    cuda_be *be = g_be;
    if (be == NULL) return ms_errf(MS_EINTERNAL, "node '%s': the CUDA backend is gone", node->name);
    worker *w = NULL;
    ms_status st = get_worker(be, &w);
    if (st != MS_OK) return st;
    for (int i = 0; i < node->nin; i++)
        if (in[i] == NULL || in[i]->buf == NULL || in[i]->buf->device != KN_CUDA_MEM)
            return ms_errf(MS_EINTERNAL, "node '%s': input %d is not in GPU memory", node->name, i);
    if (s->host) return host_run(be, w, ctx, node, s, in, out, NULL);
    switch (s->kind) {
    case K_BINARY: return c_binary(be, w, ctx, node, s, in, out);
    case K_ACT: return c_act(be, w, ctx, node, s, in, out);
    case K_BIAS: return c_bias(be, w, ctx, node, s, in, out);
    case K_SOFTMAX: return c_softmax(be, w, ctx, node, s, in, out);
    case K_MATMUL: return c_matmul(be, w, ctx, node, s, in, out);
    case K_CONV: return c_conv(be, w, ctx, node, s, in, out);
    case K_BN: return c_bn(be, w, ctx, node, s, in, out);
    case K_MAXPOOL:
    case K_AVGPOOL: return c_pool(be, w, ctx, node, s, in, out);
    case K_REDUCE: return c_reduce(be, w, ctx, node, s, in, out);
    case K_BMM: return c_bmm(be, w, ctx, node, s, in, out);
    case K_GATHER: return c_gather(be, w, ctx, node, s, in, out);
    case K_NEAREST: return c_nearest(be, w, ctx, node, s, in, out);
    case K_SLICE:
    case K_SSLICE: return c_slice(be, w, ctx, node, s, in, out);
    case K_CONCAT: return c_concat(be, w, ctx, node, s, in, out);
    case K_RESIZE: return c_resize(be, w, ctx, node, s, in, out);
    case K_TRANSPOSE: return c_transpose(be, w, ctx, node, s, in, out);
    case K_PAD: return c_pad(be, w, ctx, node, s, in, out);
    case K_RESHAPE: return c_reshape(be, w, ctx, node, s, in, out);
    case K_DCMXFORM: return c_dcmxform(be, w, ctx, node, s, in, out);
    case K_UNARY: return c_unary(be, w, ctx, node, s, in, out);
    case K_CONVND: return c_convnd(be, w, ctx, node, s, in, out);
    case K_POOL3D: return c_pool3d(be, w, ctx, node, s, in, out);
    }
    return ms_errf(MS_EINTERNAL, "node '%s': unknown kind", node->name);
}

#define NOPS (sizeof(g_ops) / sizeof(g_ops[0]) - 1)
static kn_kernel g_table[NOPS];
static pthread_once_t g_table_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
    for (size_t i = 0; i < NOPS; i++)
        g_table[i] = (kn_kernel){.op = g_ops[i], .prepare = op_prepare, .compute = op_compute,
                                 .release = op_release};
}

static const kn_kernel *be_kernel(kn_backend *b, const char *op) {
    (void)b;
    pthread_once(&g_table_once, table_init);
    int i = op_index(op);
    return i < 0 ? NULL : &g_table[i];
}

#endif /* DCMSERVE_HAVE_CUDA */
