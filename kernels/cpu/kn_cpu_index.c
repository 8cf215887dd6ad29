/* kn_cpu_index.c - CPU kernels that select, place or bin values by index:
 * TopKV2, OneHot, Bucketize, GatherNd, BroadcastTo, EnsureShape, SegmentSum,
 * UnsortedSegmentSum, ScatterNd, Where, StringToNumber and SparseToDense.
 *
 * Semantics follow TensorFlow's kernels (topk_op.cc, one_hot_op.cc,
 * bucketize_op.cc, gather_nd_op.cc, broadcast_to_op.cc, shape_ops.cc):
 * TopKV2 breaks ties by the lower index; OneHot writes off_value for an
 * index outside [0, depth); Bucketize counts the boundaries <= x; GatherNd
 * rejects an out-of-range index with INVALID_ARGUMENT naming it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "kn_gather.h"

/* Reads element i of a numeric tensor as double (for sorting and binning). */
static int num_get(const rt_tensor *t, int64_t i, double *v) {
    switch (t->dtype) {
    case RT_DT_FLOAT: *v = ((const float *)t->data)[i]; return 1;
    case RT_DT_DOUBLE: *v = ((const double *)t->data)[i]; return 1;
    case RT_DT_INT32: *v = ((const int32_t *)t->data)[i]; return 1;
    case RT_DT_INT64: *v = (double)((const int64_t *)t->data)[i]; return 1;
    case RT_DT_UINT8: *v = ((const uint8_t *)t->data)[i]; return 1;
    default: return 0;
    }
}

static int is_num(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE || dt == RT_DT_INT32 || dt == RT_DT_INT64 ||
           dt == RT_DT_UINT8;
}

/* Index element i of an int32/int64 tensor. */
static int64_t idx_get(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT64 ? ((const int64_t *)t->data)[i]
                                   : ((const int32_t *)t->data)[i];
}

static int is_idx(rt_dtype dt) {
    return dt == RT_DT_INT32 || dt == RT_DT_INT64;
}

/* "[2,3]" as TensorFlow prints shapes in these ops' messages; static
 * per-thread buffers, two rotating. */
static const char *tf_shp(const rt_shape *s) {
    static _Thread_local char buf[2][RT_MAX_RANK * 21 + 8];
    static _Thread_local int which;
    char *b = buf[which++ & 1];
    size_t n = 0;
    b[n++] = '[';
    for (int d = 0; d < s->rank; d++) {
        if (d > 0) b[n++] = ',';
        if (s->dim[d] < 0)
            n += (size_t)snprintf(b + n, sizeof(buf[0]) - n, "?");
        else
            n += (size_t)snprintf(b + n, sizeof(buf[0]) - n, "%lld", (long long)s->dim[d]);
    }
    b[n++] = ']';
    b[n] = '\0';
    return b;
}

/* ---- TopKV2 ---- */

typedef struct {
    double v;   /* floats */
    uint64_t u; /* integers: an order-preserving key, exact for all 64 bits */
    int64_t i;
} topk_item;

static int topk_cmp(const void *pa, const void *pb) {
    const topk_item *a = pa, *b = pb;
    /* NaN ranks above every number (a total order keeps qsort defined) */
    int na = a->v != a->v, nb = b->v != b->v;
    if (na != nb) return na ? -1 : 1;
    if (a->v > b->v) return -1;
    if (a->v < b->v) return 1;
    if (a->u > b->u) return -1;
    if (a->u < b->u) return 1;
    return (a->i > b->i) - (a->i < b->i); /* ties: lower index first */
}

static int topk_type_ok(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE || dt == RT_DT_INT8 || dt == RT_DT_INT16 ||
           dt == RT_DT_INT32 || dt == RT_DT_INT64 || dt == RT_DT_UINT8 || dt == RT_DT_UINT16 ||
           dt == RT_DT_UINT32 || dt == RT_DT_UINT64;
}

/* Element j of x (a topk_type_ok type) as a sort item: floats in v, integers as u (signed ones
 * with the sign bit flipped, so unsigned order is their order). */
static void topk_get(const rt_tensor *x, int64_t j, topk_item *it) {
    const void *d = x->data;
    it->v = 0;
    it->u = 0;
    switch (x->dtype) {
    case RT_DT_FLOAT: it->v = ((const float *)d)[j]; return;
    case RT_DT_DOUBLE: it->v = ((const double *)d)[j]; return;
    case RT_DT_INT8: it->u = (uint64_t)(int64_t)((const int8_t *)d)[j]; break;
    case RT_DT_INT16: it->u = (uint64_t)(int64_t)((const int16_t *)d)[j]; break;
    case RT_DT_INT32: it->u = (uint64_t)(int64_t)((const int32_t *)d)[j]; break;
    case RT_DT_INT64: it->u = (uint64_t)((const int64_t *)d)[j]; break;
    case RT_DT_UINT8: it->u = ((const uint8_t *)d)[j]; return;
    case RT_DT_UINT16: it->u = ((const uint16_t *)d)[j]; return;
    case RT_DT_UINT32: it->u = ((const uint32_t *)d)[j]; return;
    case RT_DT_UINT64: it->u = ((const uint64_t *)d)[j]; return;
    default: return;
    }
    it->u ^= (uint64_t)1 << 63;
}

static ms_status topk_compute(kn_ctx *ctx, const kn_node *node, void *state,
                              rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!topk_type_ok(x->dtype))
        return KN_EINVAL(node, "input must be a real number tensor, got %s",
                         rt_dtype_name(x->dtype));
    if (x->shape.rank < 1)
        return KN_EINVAL(node, "input must be at least 1-dimensional, got shape %s",
                         tf_shp(&x->shape));
    int64_t k;
    if ((st = kn__read_int1(node, in[1], "k", &k)) != MS_OK) return st;
    if (k < 0) return KN_EINVAL(node, "Need k >= 0, got %lld", (long long)k);
    int64_t n = x->shape.dim[x->shape.rank - 1];
    if (n < k)
        return KN_EINVAL(node, "input must have at least k columns. Had %lld, needed %lld",
                         (long long)n, (long long)k);
    rt_dtype itype = kn_attr_type(node, "index_type", RT_DT_INT32);
    if (!is_idx(itype))
        return KN_EINVAL(node, "index_type must be int32 or int64, got %s",
                         rt_dtype_name(itype));
    rt_shape os = x->shape;
    os.dim[os.rank - 1] = k;
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    if (node->nout > 1 && (st = kn__output(ctx, node, 1, itype, &os, &out[1])) != MS_OK)
        return st;
    int64_t rows = n > 0 ? x->nelem / n : 0;
    if (k == 0 || rows == 0) return MS_OK;
    topk_item *items = malloc((size_t)n * sizeof(*items));
    if (items == NULL)
        return kn__errf(MS_ENOMEM, node, "out of memory for %lld values", (long long)n);
    size_t es = rt_dtype_size(x->dtype);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < n; j++) {
            topk_get(x, r * n + j, &items[j]);
            items[j].i = j;
        }
        /* sorted=false allows any order; sorted order satisfies it too. */
        qsort(items, (size_t)n, sizeof(*items), topk_cmp);
        for (int64_t j = 0; j < k; j++) {
            int64_t src = r * n + items[j].i, dst = r * k + j;
            memcpy((uint8_t *)out[0]->data + dst * es, (const uint8_t *)x->data + src * es, es);
            if (out[1] == NULL) continue;
            if (itype == RT_DT_INT64)
                ((int64_t *)out[1]->data)[dst] = items[j].i;
            else
                ((int32_t *)out[1]->data)[dst] = (int32_t)items[j].i;
        }
    }
    free(items);
    return MS_OK;
}

/* ---- OneHot ---- */

static ms_status onehot_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[0], *on = in[2], *off = in[3];
    if (!is_idx(ix->dtype) && ix->dtype != RT_DT_UINT8)
        return KN_EINVAL(node, "indices must be uint8, int32 or int64, got %s",
                         rt_dtype_name(ix->dtype));
    int64_t depth;
    if ((st = kn__read_int1(node, in[1], "depth", &depth)) != MS_OK) return st;
    if (depth < 0)
        return KN_EINVAL(node, "depth must be non-negative, got: %lld", (long long)depth);
    if (on->nelem != 1 || off->nelem != 1)
        return KN_EINVAL(node, "on_value and off_value must be scalars, got shapes %s and %s",
                         tf_shp(&on->shape), tf_shp(&off->shape));
    if (on->dtype != off->dtype || !rt_dtype_is_pod(on->dtype))
        return KN_EINVAL(node, "on_value (%s) and off_value (%s) must be one numeric dtype",
                         rt_dtype_name(on->dtype), rt_dtype_name(off->dtype));
    int rank = ix->shape.rank;
    if (rank + 1 > RT_MAX_RANK)
        return KN_EINVAL(node, "indices rank %d leaves no room for the depth axis", rank);
    int64_t axis = kn_attr_i(node, "axis", -1);
    if (axis < -1 || axis > rank)
        return KN_EINVAL(node, "Expected axis to be -1 or between [0, %d).  But received: %lld",
                         rank + 1, (long long)axis);
    int a = axis == -1 ? rank : (int)axis;
    rt_shape os = {.rank = rank + 1};
    for (int d = 0, s = 0; d < rank + 1; d++) os.dim[d] = d == a ? depth : ix->shape.dim[s++];
    if ((st = kn__output(ctx, node, 0, on->dtype, &os, &out[0])) != MS_OK) return st;
    /* indices as (pre, post) around the axis; output (pre, depth, post). */
    int64_t pre = 1, post = 1;
    for (int d = 0; d < a; d++) pre *= ix->shape.dim[d];
    for (int d = a; d < rank; d++) post *= ix->shape.dim[d];
    size_t es = rt_dtype_size(on->dtype);
    uint8_t *o = out[0]->data;
    for (int64_t e = 0; e < out[0]->nelem; e++) memcpy(o + (size_t)e * es, off->data, es);
    for (int64_t p = 0; p < pre; p++)
        for (int64_t q = 0; q < post; q++) {
            int64_t i = p * post + q;
            int64_t v = ix->dtype == RT_DT_UINT8 ? ((const uint8_t *)ix->data)[i] : idx_get(ix, i);
            if (v < 0 || v >= depth) continue;
            memcpy(o + (size_t)((p * depth + v) * post + q) * es, on->data, es);
        }
    return MS_OK;
}

/* ---- Bucketize ---- */

#define BUCKETS_MAX 4096

typedef struct {
    int n;
    float b[];
} bucket_state;

static ms_status bucketize_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    int n = kn_attr_flist(node, "boundaries", NULL, 0);
    if (n < 0) n = 0;
    if (n > BUCKETS_MAX)
        return KN_EINVAL(node, "%d boundaries, at most %d supported", n, BUCKETS_MAX);
    bucket_state *s = malloc(sizeof(*s) + (size_t)(n > 0 ? n : 1) * sizeof(float));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    s->n = n;
    if (n > 0) kn_attr_flist(node, "boundaries", s->b, n);
    for (int i = 1; i < n; i++)
        if (!(s->b[i - 1] <= s->b[i])) {
            double a = s->b[i - 1], b = s->b[i];
            free(s);
            return KN_EINVAL(node, "Expected sorted boundaries, got %g before %g", a, b);
        }
    *state = s;
    return MS_OK;
}

static ms_status bucketize_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const bucket_state *bs = state;
    const rt_tensor *x = in[0];
    if (!is_num(x->dtype))
        return KN_EINVAL(node, "input must be numeric, got %s", rt_dtype_name(x->dtype));
    if ((st = kn__output(ctx, node, 0, RT_DT_INT32, &x->shape, &out[0])) != MS_OK) return st;
    int32_t *o = out[0]->data;
    for (int64_t i = 0; i < x->nelem; i++) {
        double v = 0; /* is_num above: num_get sets it */
        num_get(x, i, &v);
        /* upper bound: the first boundary > v */
        int lo = 0, hi = bs ? bs->n : 0;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if ((double)bs->b[mid] <= v)
                lo = mid + 1;
            else
                hi = mid;
        }
        o[i] = lo;
    }
    return MS_OK;
}

/* ---- GatherNd (kernels/kn_gather.c) ---- */

static ms_status gathernd_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                  rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    return kn_gather_nd(ctx, node, in[0], in[1], &out[0]);
}

/* ---- BroadcastTo ---- */

static ms_status broadcast_to_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                      rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!rt_dtype_is_pod(x->dtype))
        return KN_EINVAL(node, "input of %s is not supported", rt_dtype_name(x->dtype));
    int64_t dims[RT_MAX_RANK];
    int cnt;
    if ((st = kn__read_ints(node, in[1], "shape", dims, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    rt_shape os = rt_shape_make(cnt, dims);
    int ok = x->shape.rank <= cnt;
    for (int d = 0; ok && d < cnt; d++) {
        if (dims[d] < 0) ok = 0;
        int xd = d - (cnt - x->shape.rank);
        if (ok && xd >= 0 && x->shape.dim[xd] != 1 && x->shape.dim[xd] != dims[d]) ok = 0;
    }
    if (!ok)
        return KN_EINVAL(node, "Unable to broadcast tensor of shape %s to tensor of shape %s",
                         tf_shp(&x->shape), tf_shp(&os));
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    /* source strides over the output's dims (0 where broadcast) */
    int64_t sstride[RT_MAX_RANK] = {0}, acc = 1;
    for (int d = cnt - 1; d >= 0; d--) {
        int xd = d - (cnt - x->shape.rank);
        if (xd < 0) continue;
        sstride[d] = x->shape.dim[xd] == 1 ? 0 : acc;
        acc *= x->shape.dim[xd];
    }
    size_t es = rt_dtype_size(x->dtype);
    int64_t coord[RT_MAX_RANK] = {0}, src = 0;
    uint8_t *o = out[0]->data;
    for (int64_t e = 0; e < out[0]->nelem; e++) {
        memcpy(o + (size_t)e * es, (const uint8_t *)x->data + (size_t)src * es, es);
        for (int d = cnt - 1; d >= 0; d--) {
            src += sstride[d];
            if (++coord[d] < dims[d]) break;
            src -= sstride[d] * coord[d];
            coord[d] = 0;
        }
    }
    return MS_OK;
}

/* ---- EnsureShape ---- */

static ms_status ensure_shape_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                      rt_tensor *const *in, rt_tensor **out) {
    (void)ctx;
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    rt_shape want;
    if (kn_attr_shape(node, "shape", &want) != MS_OK) want.rank = -1; /* absent: anything */
    int ok = want.rank < 0 || want.rank == in[0]->shape.rank;
    for (int d = 0; ok && want.rank > 0 && d < want.rank; d++)
        if (want.dim[d] >= 0 && want.dim[d] != in[0]->shape.dim[d]) ok = 0;
    if (!ok)
        return KN_EINVAL(node, "Shape of tensor %s %s is not compatible with expected shape %s.",
                         node->name, tf_shp(&in[0]->shape),
                         want.rank < 0 ? "<unknown>" : tf_shp(&want));
    out[0] = rt_tensor_ref(in[0]);
    return MS_OK;
}

/* ---- SegmentSum, UnsortedSegmentSum, ScatterNd ---- */

/* dst[j] += src[j] for n elements of a numeric dtype. */
static void add_into(rt_dtype dt, void *dst, const void *src, int64_t n) {
    for (int64_t j = 0; j < n; j++) switch (dt) {
        case RT_DT_FLOAT: ((float *)dst)[j] += ((const float *)src)[j]; break;
        case RT_DT_DOUBLE: ((double *)dst)[j] += ((const double *)src)[j]; break;
        case RT_DT_INT32: ((int32_t *)dst)[j] += ((const int32_t *)src)[j]; break;
        case RT_DT_INT64: ((int64_t *)dst)[j] += ((const int64_t *)src)[j]; break;
        default: ((uint8_t *)dst)[j] += ((const uint8_t *)src)[j]; break;
        }
}

/* Sums rows of data (ids->shape being data's leading dims) into segments.
 * sorted: SegmentSum (ids sorted, output rows = last id + 1); else
 * UnsortedSegmentSum with num_segments rows, ids outside [0, n) dropped
 * when negative (as TensorFlow does) and an error when too large. */
static ms_status segment_sum(kn_ctx *ctx, const kn_node *node, rt_tensor *const *in,
                             rt_tensor **out, int sorted) {
    const rt_tensor *x = in[0], *ids = in[1];
    if (!is_num(x->dtype))
        return KN_EINVAL(node, "data must be numeric, got %s", rt_dtype_name(x->dtype));
    if (!is_idx(ids->dtype))
        return KN_EINVAL(node, "segment_ids must be int32 or int64, got %s",
                         rt_dtype_name(ids->dtype));
    int ok = ids->shape.rank <= x->shape.rank && (!sorted || ids->shape.rank == 1);
    for (int d = 0; ok && d < ids->shape.rank; d++) ok = ids->shape.dim[d] == x->shape.dim[d];
    if (!ok)
        return KN_EINVAL(node, "segment_ids shape %s must be a prefix of data shape %s",
                         tf_shp(&ids->shape), tf_shp(&x->shape));
    int64_t nseg;
    ms_status st;
    if (sorted) {
        nseg = ids->nelem > 0 ? idx_get(ids, ids->nelem - 1) + 1 : 0;
        for (int64_t i = 0; i < ids->nelem; i++) {
            int64_t v = idx_get(ids, i);
            if (v < 0 || (i > 0 && v < idx_get(ids, i - 1)))
                return KN_EINVAL(node, "segment ids are not increasing: segment_ids[%lld] = %lld",
                                 (long long)i, (long long)v);
        }
    } else {
        if ((st = kn__read_int1(node, in[2], "num_segments", &nseg)) != MS_OK) return st;
        if (nseg < 0)
            return KN_EINVAL(node, "num_segments must be non-negative, got %lld",
                             (long long)nseg);
    }
    rt_shape os = {.rank = x->shape.rank - ids->shape.rank + 1};
    os.dim[0] = nseg;
    int64_t row = 1;
    for (int d = ids->shape.rank; d < x->shape.rank; d++) {
        os.dim[d - ids->shape.rank + 1] = x->shape.dim[d];
        row *= x->shape.dim[d];
    }
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(x->dtype);
    memset(out[0]->data, 0, (size_t)out[0]->nelem * es);
    for (int64_t i = 0; i < ids->nelem; i++) {
        int64_t v = idx_get(ids, i);
        if (v < 0) continue; /* unsorted only: TensorFlow drops negative ids */
        if (v >= nseg)
            return KN_EINVAL(node, "segment_ids[%lld] = %lld is out of range [0, %lld)",
                             (long long)i, (long long)v, (long long)nseg);
        add_into(x->dtype, (uint8_t *)out[0]->data + (size_t)(v * row) * es,
                 (const uint8_t *)x->data + (size_t)(i * row) * es, row);
    }
    return MS_OK;
}

static ms_status segment_sum_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    return st != MS_OK ? st : segment_sum(ctx, node, in, out, 1);
}

static ms_status unsorted_segment_sum_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                              rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    return st != MS_OK ? st : segment_sum(ctx, node, in, out, 0);
}

/* ScatterNd(indices, updates, shape): zeros of `shape` with updates added at
 * the indexed positions (duplicates sum, as in TensorFlow). */
static ms_status scatter_nd_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[0], *up = in[1];
    if (!is_idx(ix->dtype))
        return KN_EINVAL(node, "indices must be int32 or int64, got %s", rt_dtype_name(ix->dtype));
    if (!is_num(up->dtype))
        return KN_EINVAL(node, "updates must be numeric, got %s", rt_dtype_name(up->dtype));
    int64_t dims[RT_MAX_RANK];
    int cnt;
    if ((st = kn__read_ints(node, in[2], "shape", dims, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    rt_shape os = rt_shape_make(cnt, dims);
    int64_t depth = ix->shape.rank > 0 ? ix->shape.dim[ix->shape.rank - 1] : 1;
    int lead = ix->shape.rank > 0 ? ix->shape.rank - 1 : 0;
    /* updates must be indices.shape[:-1] + shape[depth:] */
    int ok = depth <= cnt && up->shape.rank == lead + cnt - (int)depth;
    for (int d = 0; ok && d < lead; d++) ok = up->shape.dim[d] == ix->shape.dim[d];
    for (int d = (int)depth; ok && d < cnt; d++) ok = up->shape.dim[lead + d - depth] == dims[d];
    for (int d = 0; ok && d < cnt; d++) ok = dims[d] >= 0;
    if (!ok)
        return KN_EINVAL(node,
                         "updates shape %s does not match indices shape %s and output shape %s",
                         tf_shp(&up->shape), tf_shp(&ix->shape), tf_shp(&os));
    if ((st = kn__output(ctx, node, 0, up->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(up->dtype);
    memset(out[0]->data, 0, (size_t)out[0]->nelem * es);
    int64_t slice = 1, nidx = 1;
    for (int d = (int)depth; d < cnt; d++) slice *= dims[d];
    for (int d = 0; d < lead; d++) nidx *= ix->shape.dim[d];
    for (int64_t i = 0; i < nidx; i++) {
        int64_t off = 0;
        for (int64_t d = 0; d < depth; d++) {
            int64_t v = idx_get(ix, i * depth + d);
            if (v < 0 || v >= dims[d])
                return KN_EINVAL(node, "indices[%lld] has %lld out of range [0, %lld) in dim %lld",
                                 (long long)i, (long long)v, (long long)dims[d], (long long)d);
            off = off * dims[d] + v;
        }
        add_into(up->dtype, (uint8_t *)out[0]->data + (size_t)(off * slice) * es,
                 (const uint8_t *)up->data + (size_t)(i * slice) * es, slice);
    }
    return MS_OK;
}

/* ---- Where (one input): coordinates of the true / non-zero elements ---- */

static ms_status where_compute(kn_ctx *ctx, const kn_node *node, void *state,
                               rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!rt_dtype_is_pod(x->dtype))
        return KN_EINVAL(node, "input of %s is not supported", rt_dtype_name(x->dtype));
    size_t es = rt_dtype_size(x->dtype);
    static const uint8_t zero[16];
    /* non-zero by bytes; a float -0.0 is zero too */
#define KN_WHERE_NZ(i)                                                                             \
    (x->dtype == RT_DT_FLOAT    ? ((const float *)x->data)[i] != 0                                 \
     : x->dtype == RT_DT_DOUBLE ? ((const double *)x->data)[i] != 0                                \
                                : memcmp((const uint8_t *)x->data + (size_t)(i)*es, zero, es) != 0)
    int64_t count = 0;
    for (int64_t i = 0; i < x->nelem; i++) count += KN_WHERE_NZ(i);
    rt_shape os = {.rank = 2, .dim = {count, x->shape.rank}};
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &os, &out[0])) != MS_OK) return st;
    int64_t *o = out[0]->data;
    for (int64_t i = 0, r = 0; i < x->nelem; i++) {
        if (!KN_WHERE_NZ(i)) continue;
        int64_t rem = i;
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            o[r * x->shape.rank + d] = rem % x->shape.dim[d];
            rem /= x->shape.dim[d];
        }
        r++;
    }
#undef KN_WHERE_NZ
    return MS_OK;
}

/* ---- StringToNumber ---- */

/* Parses one string (surrounding white space allowed, nothing else) as
 * out_type. The value is never echoed in the message: strings may hold
 * patient data, and errors reach logs. */
static ms_status str_to_num(const kn_node *node, const rt_str *sv, int64_t i, rt_dtype dt,
                            void *dst) {
    char buf[128];
    if (sv->len >= sizeof(buf))
        return KN_EINVAL(node, "StringToNumberOp could not correctly convert string %lld: "
                               "%llu bytes is too long for a number",
                         (long long)i, (unsigned long long)sv->len);
    memcpy(buf, sv->data, sv->len);
    buf[sv->len] = '\0';
    char *end = NULL;
    errno = 0;
    int ok;
    if (dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE) {
        double v = strtod(buf, &end);
        ok = end != buf;
        if (dt == RT_DT_FLOAT)
            *(float *)dst = (float)v;
        else
            *(double *)dst = v;
    } else {
        long long v = strtoll(buf, &end, 10);
        ok = end != buf && errno != ERANGE &&
             (dt == RT_DT_INT64 || (v >= INT32_MIN && v <= INT32_MAX));
        if (dt == RT_DT_INT64)
            *(int64_t *)dst = v;
        else
            *(int32_t *)dst = (int32_t)v;
    }
    while (ok && end && isspace((unsigned char)*end)) end++;
    if (!ok || (end && *end != '\0'))
        return KN_EINVAL(node, "StringToNumberOp could not correctly convert string %lld (%llu "
                               "bytes) to %s",
                         (long long)i, (unsigned long long)sv->len, rt_dtype_name(dt));
    return MS_OK;
}

static ms_status string_to_number_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                          rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    if (in[0]->dtype != RT_DT_STRING)
        return KN_EINVAL(node, "input must be DT_STRING, got %s", rt_dtype_name(in[0]->dtype));
    rt_dtype dt = kn_attr_type(node, "out_type", RT_DT_FLOAT);
    if (dt != RT_DT_FLOAT && dt != RT_DT_DOUBLE && dt != RT_DT_INT32 && dt != RT_DT_INT64)
        return kn__errf(MS_ENOTSUP, node, "out_type %s is not supported", rt_dtype_name(dt));
    if ((st = kn__output(ctx, node, 0, dt, &in[0]->shape, &out[0])) != MS_OK) return st;
    const rt_str *sv = rt_tensor_strs(in[0]);
    size_t es = rt_dtype_size(dt);
    for (int64_t i = 0; i < in[0]->nelem; i++)
        if ((st = str_to_num(node, &sv[i], i, dt, (uint8_t *)out[0]->data + (size_t)i * es)) !=
            MS_OK)
            return st;
    return MS_OK;
}

/* ---- SparseToDense(sparse_indices, output_shape, sparse_values, default_value) ---- */

static ms_status sparse_to_dense_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                         rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[0], *vals = in[2], *dflt = in[3];
    if (!is_idx(ix->dtype) || ix->shape.rank > 2)
        return KN_EINVAL(node,
                         "sparse_indices must be an int32/int64 scalar, vector or matrix, got %s "
                         "%s",
                         rt_dtype_name(ix->dtype), tf_shp(&ix->shape));
    int64_t dims[RT_MAX_RANK];
    int cnt;
    if ((st = kn__read_ints(node, in[1], "output_shape", dims, RT_MAX_RANK, &cnt)) != MS_OK)
        return st;
    int64_t n = ix->shape.rank == 0 ? 1 : ix->shape.dim[0];
    int64_t r = ix->shape.rank == 2 ? ix->shape.dim[1] : 1;
    if (r != cnt)
        return KN_EINVAL(node, "sparse_indices has %lld columns, output_shape %d dims",
                         (long long)r, cnt);
    if (vals->dtype != dflt->dtype || !rt_dtype_is_pod(vals->dtype) || dflt->nelem != 1 ||
        (vals->nelem != 1 && vals->nelem != n) || vals->shape.rank > 1)
        return KN_EINVAL(node,
                         "sparse_values (%s %s) must be a scalar or %lld values and default_value "
                         "(%s %s) a scalar of the same dtype",
                         rt_dtype_name(vals->dtype), tf_shp(&vals->shape), (long long)n,
                         rt_dtype_name(dflt->dtype), tf_shp(&dflt->shape));
    rt_shape os = rt_shape_make(cnt, dims);
    for (int d = 0; d < cnt; d++)
        if (dims[d] < 0)
            return KN_EINVAL(node, "output_shape %s has a negative dim", tf_shp(&os));
    if ((st = kn__output(ctx, node, 0, vals->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(vals->dtype);
    uint8_t *o = out[0]->data;
    for (int64_t e = 0; e < out[0]->nelem; e++) memcpy(o + (size_t)e * es, dflt->data, es);
    int validate = kn_attr_b(node, "validate_indices", 1);
    int64_t prev = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int64_t d = 0; d < r; d++) {
            int64_t v = idx_get(ix, i * r + d);
            if (v < 0 || v >= dims[d])
                return KN_EINVAL(node, "indices[%lld] is out of bounds: index %lld of dim %lld "
                                       "not in [0, %lld)",
                                 (long long)i, (long long)v, (long long)d, (long long)dims[d]);
            off = off * dims[d] + v;
        }
        if (validate && off <= prev)
            return KN_EINVAL(node, "indices[%lld] is %s", (long long)i,
                             off == prev ? "repeated" : "out of order");
        prev = off;
        memcpy(o + (size_t)off * es, (const uint8_t *)vals->data + (vals->nelem == 1 ? 0 : i) * es,
               es);
    }
    return MS_OK;
}

const kn_kernel kn_cpu_index_kernels[] = {
    {.op = "TopKV2", .compute = topk_compute},
    {.op = "OneHot", .compute = onehot_compute},
    {.op = "Bucketize", .prepare = bucketize_prepare, .compute = bucketize_compute,
     .release = free},
    {.op = "GatherNd", .compute = gathernd_compute},
    {.op = "BroadcastTo", .compute = broadcast_to_compute},
    {.op = "EnsureShape", .compute = ensure_shape_compute},
    {.op = "SegmentSum", .compute = segment_sum_compute},
    {.op = "UnsortedSegmentSum", .compute = unsorted_segment_sum_compute},
    {.op = "ScatterNd", .compute = scatter_nd_compute},
    {.op = "Where", .compute = where_compute},
    {.op = "StringToNumber", .compute = string_to_number_compute},
    {.op = "SparseToDense", .compute = sparse_to_dense_compute},
    {.op = NULL},
};
