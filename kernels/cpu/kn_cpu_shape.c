/* kn_cpu_shape.c - CPU kernels of the shape group: Reshape, Squeeze,
 * ExpandDims (views), ConcatV2, Pack, Split, SplitV (block copies),
 * Transpose, Pad, PadV2, MirrorPad, Slice, StridedSlice, Tile (table-driven
 * gathers, see kn__gather_run), Shape and Fill; ONNX's Slice, Pad,
 * Squeeze and Unsqueeze with run-time inputs (OnnxSlice, OnnxPad,
 * OnnxSqueeze, OnnxUnsqueeze: ops of ours, emitted by the ONNX importer).
 *
 * All copying ops work on any fixed-size dtype by element size; DT_STRING is
 * reported as unsupported except by the view ops and Shape.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "kn_gather.h"
#include "kn_slice.h"

static ms_status pod_size(const kn_node *n, rt_dtype dt, size_t *es) {
    *es = rt_dtype_size(dt);
    if (*es == 0 || !rt_dtype_is_pod(dt))
        return kn__errf(MS_ENOTSUP, n, "dtype %s is not supported", rt_dtype_name(dt));
    return MS_OK;
}

/* Row-major element strides of a shape. Unsigned arithmetic: an empty
 * tensor may have dims whose product overflows, and its strides go unused. */
static void strides_of(const rt_shape *s, int64_t *st) {
    uint64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        st[d] = (int64_t)acc;
        acc *= (uint64_t)s->dim[d];
    }
}

static int64_t prod(const rt_shape *s, int from, int to) {
    uint64_t p = 1;
    for (int d = from; d < to; d++)
        p *= (uint64_t)s->dim[d];
    return (int64_t)p;
}

/* ====================================================================== */
/* views: Reshape, Squeeze, ExpandDims                                    */
/* ====================================================================== */

static ms_status reshape_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)ctx;
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    int64_t v[RT_MAX_RANK];
    int cnt;
    if (in[1]->shape.rank > 1)
        return KN_EINVAL(node, "shape must be a vector, got shape %s", kn__shp(&in[1]->shape));
    if ((st = kn__read_ints(node, in[1], "shape", v, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    rt_shape s = {.rank = cnt};
    int unknown = -1;
    int64_t known = 1;
    for (int d = 0; d < cnt; d++) {
        if (v[d] == -1) {
            if (unknown >= 0) return KN_EINVAL(node, "only one dimension of shape may be -1");
            unknown = d;
        } else if (v[d] < 0) {
            return KN_EINVAL(node, "shape[%d] = %lld is negative", d, (long long)v[d]);
        } else {
            if (v[d] > 0 && known > INT64_MAX / v[d])
                return KN_EINVAL(node, "shape %s is too large", kn__shp(&s));
            known *= v[d];
        }
        s.dim[d] = v[d];
    }
    if (unknown >= 0) {
        if (known == 0)
            return KN_EINVAL(node,
                             "cannot infer the -1 dimension of an empty shape for input "
                             "%s",
                             kn__shp(&in[0]->shape));
        if (in[0]->nelem % known != 0)
            return KN_EINVAL(node,
                             "input of %lld values %s does not fit shape with -1 (known "
                             "product %lld)",
                             (long long)in[0]->nelem, kn__shp(&in[0]->shape), (long long)known);
        s.dim[unknown] = in[0]->nelem / known;
    }
    if (rt_shape_nelem(&s) != in[0]->nelem)
        return KN_EINVAL(node, "cannot reshape %s (%lld values) to %s", kn__shp(&in[0]->shape),
                         (long long)in[0]->nelem, kn__shp(&s));
    return rt_tensor_view(in[0], &s, &out[0]);
}

static ms_status squeeze_dims(const kn_node *node, int64_t *dims, int *n) {
    const char *key = kn_attr_has(node, "squeeze_dims") ? "squeeze_dims" : "axis";
    int cnt = kn_attr_ilist(node, key, dims, RT_MAX_RANK);
    if (cnt > RT_MAX_RANK) return KN_EINVAL(node, "%s has %d entries, too many", key, cnt);
    *n = cnt < 0 ? 0 : cnt;
    return MS_OK;
}

static ms_status squeeze_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    int64_t dims[RT_MAX_RANK];
    int n;
    return squeeze_dims(node, dims, &n);
}

static ms_status squeeze_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)ctx;
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    int64_t dims[RT_MAX_RANK];
    int n;
    if ((st = squeeze_dims(node, dims, &n)) != MS_OK) return st;
    const rt_shape *is = &in[0]->shape;
    int drop[RT_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a = kn__axis(dims[i], is->rank);
        if (a < 0)
            return KN_EINVAL(node, "squeeze dim %lld out of range for input %s", (long long)dims[i],
                             kn__shp(is));
        if (is->dim[a] != 1)
            return KN_EINVAL(node, "cannot squeeze dim %d of input %s: its size is not 1", a,
                             kn__shp(is));
        drop[a] = 1;
    }
    rt_shape s = {.rank = 0};
    for (int d = 0; d < is->rank; d++) {
        if (n == 0 ? is->dim[d] == 1 : drop[d]) continue;
        s.dim[s.rank++] = is->dim[d];
    }
    return rt_tensor_view(in[0], &s, &out[0]);
}

static ms_status expand_dims_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)ctx;
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    int64_t axis;
    if ((st = kn__read_int1(node, in[1], "dim", &axis)) != MS_OK) return st;
    const rt_shape *is = &in[0]->shape;
    if (is->rank >= RT_MAX_RANK)
        return KN_EINVAL(node, "input %s already has the maximum rank", kn__shp(is));
    int a = kn__axis(axis, is->rank + 1);
    if (a < 0)
        return KN_EINVAL(node, "dim %lld out of range [%d, %d] for input %s", (long long)axis,
                         -is->rank - 1, is->rank, kn__shp(is));
    rt_shape s = {.rank = is->rank + 1};
    for (int d = 0, k = 0; d < s.rank; d++)
        s.dim[d] = d == a ? 1 : is->dim[k++];
    return rt_tensor_view(in[0], &s, &out[0]);
}

/* ====================================================================== */
/* ConcatV2, Pack                                                          */
/* ====================================================================== */

/* Concatenation over `outer` rows: output row o is the inputs' row o blocks
 * one after the other (blk[k] elements each). */
typedef struct concat_job {
    rt_tensor *const *in;
    int nv;
    int64_t blk[64]; /* per input, elements per row (nv <= 64 here) */
    int64_t orow;    /* elements per output row */
    size_t es;
    uint8_t *dst;
} concat_job;

/* 4-byte elements in short blocks (channels of NHWC tensors): inline vector
 * copies, no memcpy call per block. */
KN_VEC_DEFINE(concat_rows4, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const concat_job *j = arg;
    for (int64_t o = b; o < e; o++) {
        uint32_t *d = (uint32_t *)j->dst + o * j->orow;
        for (int k = 0; k < j->nv; k++) {
            const int64_t n = j->blk[k];
            const uint32_t *s = (const uint32_t *)j->in[k]->data + o * n;
            for (int64_t i = 0; i < n; i++)
                d[i] = s[i];
            d += n;
        }
    }
})

static void concat_rows(void *arg, int64_t b, int64_t e) {
    const concat_job *j = arg;
    for (int64_t o = b; o < e; o++) {
        uint8_t *d = j->dst + (size_t)(o * j->orow) * j->es;
        for (int k = 0; k < j->nv; k++) {
            kn__copy(d, (const uint8_t *)j->in[k]->data + (size_t)(o * j->blk[k]) * j->es,
                     j->blk[k], j->es);
            d += (size_t)j->blk[k] * j->es;
        }
    }
}

/* ConcatV2 (values..., axis) and Concat (concat_dim, values...). */
static ms_status concat_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *all_in, rt_tensor **out) {
    (void)state;
    int nv = node->nin - 1;
    if (nv < 1) return KN_EINVAL(node, "needs at least one value and the axis");
    ms_status st = kn__need_inputs(node, all_in, node->nin);
    if (st != MS_OK) return st;
    int v1 = strcmp(node->op, "Concat") == 0;
    rt_tensor *const *in = v1 ? all_in + 1 : all_in;
    int64_t axis;
    if ((st = kn__read_int1(node, v1 ? all_in[0] : all_in[nv], "axis", &axis)) != MS_OK) return st;
    const rt_tensor *t0 = in[0];
    int rank = t0->shape.rank;
    if (rank == 0) return KN_EINVAL(node, "cannot concatenate scalars");
    int a = kn__axis(axis, rank);
    if (a < 0) return KN_EINVAL(node, "axis %lld out of range for rank %d", (long long)axis, rank);
    size_t es;
    if ((st = pod_size(node, t0->dtype, &es)) != MS_OK) return st;
    rt_shape os = t0->shape;
    os.dim[a] = 0;
    for (int k = 0; k < nv; k++) {
        const rt_tensor *t = in[k];
        if (t->dtype != t0->dtype)
            return KN_EINVAL(node, "input %d has dtype %s, input 0 has %s", k,
                             rt_dtype_name(t->dtype), rt_dtype_name(t0->dtype));
        if (t->shape.rank != rank)
            return KN_EINVAL(node, "input %d has shape %s, input 0 has %s", k, kn__shp(&t->shape),
                             kn__shp(&t0->shape));
        for (int d = 0; d < rank; d++)
            if (d != a && t->shape.dim[d] != t0->shape.dim[d])
                return KN_EINVAL(node,
                                 "input %d shape %s does not match input 0 shape %s "
                                 "outside axis %d",
                                 k, kn__shp(&t->shape), kn__shp(&t0->shape), a);
        if (os.dim[a] > INT64_MAX - t->shape.dim[a])
            return KN_EINVAL(node, "concatenated dimension is too large");
        os.dim[a] += t->shape.dim[a];
    }
    if ((st = kn__output(ctx, node, 0, t0->dtype, &os, &out[0])) != MS_OK) return st;
    int64_t outer = prod(&os, 0, a), after = prod(&os, a + 1, rank);
    uint8_t *dst = out[0]->data;
    if (out[0]->nelem == 0) return MS_OK;
    if (nv <= 64 && outer > 1) {
        /* Parallel over rows; short 4-byte blocks copied inline. */
        concat_job job = {.in = in, .nv = nv, .orow = os.dim[a] * after, .es = es, .dst = dst};
        for (int k = 0; k < nv; k++)
            job.blk[k] = in[k]->shape.dim[a] * after;
        int64_t chunk = job.orow > 0 && job.orow < 16384 ? 16384 / job.orow : 1;
        int small = es == 4 && job.orow <= 1024;
        kn_ctx_parallel_for(ctx, outer, chunk, small ? concat_rows4 : concat_rows, &job);
        return MS_OK;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < nv; k++) {
            int64_t blk = in[k]->shape.dim[a] * after;
            kn__copy(dst, (const uint8_t *)in[k]->data + (size_t)(o * blk) * es, blk, es);
            dst += (size_t)blk * es;
        }
    return MS_OK;
}

static ms_status pack_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    int nv = node->nin;
    if (nv < 1) return KN_EINVAL(node, "needs at least one input");
    ms_status st = kn__need_inputs(node, in, nv);
    if (st != MS_OK) return st;
    const rt_tensor *t0 = in[0];
    int rank = t0->shape.rank;
    if (rank >= RT_MAX_RANK) return KN_EINVAL(node, "input rank %d is too large", rank);
    int64_t axis = kn_attr_i(node, "axis", 0);
    int a = kn__axis(axis, rank + 1);
    if (a < 0)
        return KN_EINVAL(node, "axis %lld out of range [%d, %d]", (long long)axis, -rank - 1, rank);
    size_t es;
    if ((st = pod_size(node, t0->dtype, &es)) != MS_OK) return st;
    for (int k = 1; k < nv; k++)
        if (in[k]->dtype != t0->dtype || !rt_shape_equal(&in[k]->shape, &t0->shape))
            return KN_EINVAL(node, "input %d (%s %s) differs from input 0 (%s %s)", k,
                             rt_dtype_name(in[k]->dtype), kn__shp(&in[k]->shape),
                             rt_dtype_name(t0->dtype), kn__shp(&t0->shape));
    rt_shape os = {.rank = rank + 1};
    for (int d = 0, j = 0; d < os.rank; d++)
        os.dim[d] = d == a ? nv : t0->shape.dim[j++];
    if ((st = kn__output(ctx, node, 0, t0->dtype, &os, &out[0])) != MS_OK) return st;
    int64_t outer = prod(&t0->shape, 0, a), blk = prod(&t0->shape, a, rank);
    uint8_t *dst = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < nv; k++) {
            kn__copy(dst, (const uint8_t *)in[k]->data + (size_t)(o * blk) * es, blk, es);
            dst += (size_t)blk * es;
        }
    return MS_OK;
}

/* Unpack: output k is input[..., k, ...] along axis (num = the axis size). */
static ms_status unpack_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank;
    int64_t axis = kn_attr_i(node, "axis", 0);
    int a = kn__axis(axis, rank);
    if (a < 0)
        return KN_EINVAL(node, "axis %lld out of range for input %s", (long long)axis,
                         kn__shp(&x->shape));
    if (x->shape.dim[a] != node->nout)
        return KN_EINVAL(node, "dimension %d of input %s must equal num = %d", a,
                         kn__shp(&x->shape), node->nout);
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    rt_shape os = {.rank = 0};
    for (int d = 0; d < rank; d++)
        if (d != a) os.dim[os.rank++] = x->shape.dim[d];
    int64_t outer = prod(&x->shape, 0, a), inner = prod(&x->shape, a + 1, rank);
    for (int k = 0; k < node->nout; k++) {
        if ((st = kn__output(ctx, node, k, x->dtype, &os, &out[k])) != MS_OK) return st;
        for (int64_t o = 0; o < outer && inner > 0; o++)
            kn__copy((uint8_t *)out[k]->data + (size_t)(o * inner) * es,
                     (const uint8_t *)x->data + (size_t)((o * node->nout + k) * inner) * es, inner,
                     es);
    }
    return MS_OK;
}

/* ====================================================================== */
/* Split, SplitV                                                           */
/* ====================================================================== */

static ms_status split_common(kn_ctx *ctx, const kn_node *node, const rt_tensor *v, int a,
                              const int64_t *sizes, int nsplit, rt_tensor **out) {
    size_t es;
    ms_status st = pod_size(node, v->dtype, &es);
    if (st != MS_OK) return st;
    int rank = v->shape.rank;
    int64_t outer = prod(&v->shape, 0, a), after = prod(&v->shape, a + 1, rank);
    int64_t off = 0;
    for (int k = 0; k < nsplit; k++) {
        rt_shape s = v->shape;
        s.dim[a] = sizes[k];
        if ((st = kn__output(ctx, node, k, v->dtype, &s, &out[k])) != MS_OK) return st;
        int64_t blk = sizes[k] * after;
        for (int64_t o = 0; o < outer; o++)
            kn__copy((uint8_t *)out[k]->data + (size_t)(o * blk) * es,
                     (const uint8_t *)v->data + (size_t)((o * v->shape.dim[a] + off) * after) * es,
                     blk, es);
        off += sizes[k];
    }
    return MS_OK;
}

static ms_status split_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    int64_t ns = kn_attr_i(node, "num_split", -1);
    if (ns < 1) return KN_EINVAL(node, "num_split must be >= 1, got %lld", (long long)ns);
    if (ns != node->nout)
        return KN_EINVAL(node, "num_split %lld differs from the node's %d outputs", (long long)ns,
                         node->nout);
    return MS_OK;
}

static ms_status split_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    int64_t axis;
    if ((st = kn__read_int1(node, in[0], "split_dim", &axis)) != MS_OK) return st;
    const rt_tensor *v = in[1];
    int a = kn__axis(axis, v->shape.rank);
    if (a < 0)
        return KN_EINVAL(node, "split_dim %lld out of range for input %s", (long long)axis,
                         kn__shp(&v->shape));
    int ns = node->nout;
    if (ns < 1) return KN_EINVAL(node, "no outputs");
    if (v->shape.dim[a] % ns != 0)
        return KN_EINVAL(node, "dimension %d of input %s is not divisible by num_split %d", a,
                         kn__shp(&v->shape), ns);
    int64_t *sizes = malloc((size_t)ns * sizeof(*sizes));
    if (sizes == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    for (int k = 0; k < ns; k++)
        sizes[k] = v->shape.dim[a] / ns;
    st = split_common(ctx, node, v, a, sizes, ns, out);
    free(sizes);
    return st;
}

static ms_status splitv_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *v = in[0];
    int64_t axis;
    if ((st = kn__read_int1(node, in[2], "split_dim", &axis)) != MS_OK) return st;
    int a = kn__axis(axis, v->shape.rank);
    if (a < 0)
        return KN_EINVAL(node, "split_dim %lld out of range for input %s", (long long)axis,
                         kn__shp(&v->shape));
    int ns = node->nout;
    if (ns < 1 || in[1]->nelem != ns)
        return KN_EINVAL(node, "size_splits has %lld values for %d outputs",
                         (long long)in[1]->nelem, ns);
    int64_t *sizes = malloc((size_t)ns * sizeof(*sizes));
    if (sizes == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    int cnt, unknown = -1;
    int64_t sum = 0;
    if ((st = kn__read_ints(node, in[1], "size_splits", sizes, ns, &cnt)) != MS_OK) goto done;
    for (int k = 0; k < ns; k++) {
        if (sizes[k] == -1) {
            if (unknown >= 0) {
                st = KN_EINVAL(node, "size_splits may hold only one -1");
                goto done;
            }
            unknown = k;
        } else if (sizes[k] < 0 || sizes[k] > v->shape.dim[a]) {
            st = KN_EINVAL(node, "size_splits[%d] = %lld is out of range for input %s", k,
                           (long long)sizes[k], kn__shp(&v->shape));
            goto done;
        } else {
            sum += sizes[k];
        }
    }
    if (unknown >= 0 && sum <= v->shape.dim[a])
        sizes[unknown] = v->shape.dim[a] - sum;
    else if (unknown >= 0 || sum != v->shape.dim[a]) {
        st = KN_EINVAL(node, "size_splits (sum %lld) do not add up to dimension %d of input %s",
                       (long long)sum, a, kn__shp(&v->shape));
        goto done;
    }
    st = split_common(ctx, node, v, a, sizes, ns, out);
done:
    free(sizes);
    return st;
}

/* ====================================================================== */
/* gathers: Transpose, Pad, Slice, StridedSlice, Tile                     */
/* ====================================================================== */

/* Makes output 0 (dtype of src, shape os) and, unless it is empty (*done
 * set), the tables of g over gather shape gs (os itself, or the same data
 * seen with other size-1 axes, as StridedSlice's new and shrunk axes). The
 * caller fills g->tab, runs and destroys g. Allocating the output first
 * validates the sizes before any table memory is sized from them. */
static ms_status gather_begin(kn_ctx *ctx, const kn_node *node, kn_gather *g, const rt_tensor *src,
                              const rt_shape *os, const rt_shape *gs, size_t es, rt_tensor **out,
                              int *done) {
    *done = 0;
    ms_status st = kn__output(ctx, node, 0, src->dtype, os, &out[0]);
    if (st != MS_OK) return st;
    if (out[0]->nelem == 0) {
        *done = 1;
        return MS_OK;
    }
    if ((st = kn__gather_init(g, gs, es)) != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
        return st;
    }
    g->src = src->data;
    g->dst = out[0]->data;
    return MS_OK;
}

static ms_status transpose_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int64_t perm[RT_MAX_RANK];
    int cnt;
    if ((st = kn__read_ints(node, in[1], "perm", perm, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    int rank = x->shape.rank;
    if (cnt != rank)
        return KN_EINVAL(node, "perm has %d values for input %s", cnt, kn__shp(&x->shape));
    int seen[RT_MAX_RANK] = {0}, ident = 1;
    for (int d = 0; d < rank; d++) {
        if (perm[d] < 0 || perm[d] >= rank || seen[perm[d]])
            return KN_EINVAL(node, "perm is not a permutation of 0..%d", rank - 1);
        seen[perm[d]] = 1;
        if (perm[d] != d) ident = 0;
    }
    if (ident) {
        out[0] = rt_tensor_ref(in[0]);
        return MS_OK;
    }
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    rt_shape os = {.rank = rank};
    for (int d = 0; d < rank; d++)
        os.dim[d] = x->shape.dim[perm[d]];
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    for (int d = 0; d < rank; d++)
        for (int64_t c = 0; c < os.dim[d]; c++)
            g.tab[d][c] = c * ist[perm[d]];
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

enum { PAD_CONSTANT, PAD_REFLECT, PAD_SYMMETRIC };

static ms_status pad_mode(const kn_node *node, int *mode) {
    *mode = PAD_CONSTANT;
    if (strcmp(node->op, "MirrorPad") != 0) return MS_OK;
    if (kn_attr_s_eq(node, "mode", "REFLECT", NULL))
        *mode = PAD_REFLECT;
    else if (kn_attr_s_eq(node, "mode", "SYMMETRIC", NULL))
        *mode = PAD_SYMMETRIC;
    else
        return KN_EINVAL(node, "mode must be REFLECT or SYMMETRIC");
    return MS_OK;
}

static ms_status pad_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    int mode;
    return pad_mode(node, &mode);
}

static ms_status pad_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    int mode;
    ms_status st = pad_mode(node, &mode);
    if (st != MS_OK) return st;
    int is_v2 = strcmp(node->op, "PadV2") == 0;
    if ((st = kn__need_inputs(node, in, is_v2 ? 3 : 2)) != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank;
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    const rt_tensor *p = in[1];
    if (p->shape.rank != 2 || p->shape.dim[0] != rank || p->shape.dim[1] != 2)
        return KN_EINVAL(node, "paddings must have shape (%d, 2), got %s", rank,
                         kn__shp(&p->shape));
    int64_t pads[2 * RT_MAX_RANK];
    int cnt;
    if ((st = kn__read_ints(node, p, "paddings", pads, 2 * RT_MAX_RANK, &cnt)) != MS_OK) return st;
    uint8_t padval[16] = {0};
    if (is_v2) {
        if (in[2]->dtype != x->dtype || in[2]->nelem != 1)
            return KN_EINVAL(node, "constant_values must be one %s value", rt_dtype_name(x->dtype));
        memcpy(padval, in[2]->data, es);
    }
    rt_shape os = {.rank = rank};
    for (int d = 0; d < rank; d++) {
        int64_t b = pads[2 * d], a = pads[2 * d + 1], n = x->shape.dim[d];
        if (b < 0 || a < 0)
            return KN_EINVAL(node, "paddings for dim %d are negative (%lld, %lld)", d, (long long)b,
                             (long long)a);
        if (b > (INT64_MAX - n) / 2 || a > (INT64_MAX - n) / 2)
            return KN_EINVAL(node, "paddings for dim %d are too large", d);
        int64_t lim = mode == PAD_REFLECT ? n - 1 : n;
        if (mode != PAD_CONSTANT && (b > lim || a > lim))
            return KN_EINVAL(node,
                             "paddings (%lld, %lld) of dim %d must be at most %lld for "
                             "input %s",
                             (long long)b, (long long)a, d, (long long)lim, kn__shp(&x->shape));
        os.dim[d] = n + b + a;
    }
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++) {
        int64_t n = x->shape.dim[d], b = pads[2 * d];
        for (int64_t c = 0; c < os.dim[d]; c++) {
            int64_t s = c - b;
            if (s < 0 || s >= n) {
                if (mode == PAD_CONSTANT) {
                    g.tab[d][c] = KN_GATHER_PAD;
                    continue;
                }
                if (s < 0)
                    s = mode == PAD_REFLECT ? -s : -s - 1;
                else
                    s = mode == PAD_REFLECT ? 2 * n - 2 - s : 2 * n - 1 - s;
            }
            g.tab[d][c] = s * ist[d];
        }
    }
    g.pad = padval;
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

static ms_status slice_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank, nb, ns;
    int64_t begin[RT_MAX_RANK], size[RT_MAX_RANK];
    if ((st = kn__read_ints(node, in[1], "begin", begin, RT_MAX_RANK, &nb)) != MS_OK) return st;
    if ((st = kn__read_ints(node, in[2], "size", size, RT_MAX_RANK, &ns)) != MS_OK) return st;
    if (nb != rank || ns != rank)
        return KN_EINVAL(node, "begin and size need %d values for input %s, got %d and %d", rank,
                         kn__shp(&x->shape), nb, ns);
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    rt_shape os = {.rank = rank};
    for (int d = 0; d < rank; d++) {
        int64_t n = x->shape.dim[d];
        if (begin[d] >= 0 && begin[d] <= n && size[d] == -1) size[d] = n - begin[d];
        if (begin[d] < 0 || begin[d] > n || size[d] < 0 || size[d] > n - begin[d])
            return KN_EINVAL(node, "begin %lld size %lld out of bounds for dim %d of input %s",
                             (long long)begin[d], (long long)size[d], d, kn__shp(&x->shape));
        os.dim[d] = size[d];
    }
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++)
        for (int64_t c = 0; c < os.dim[d]; c++)
            g.tab[d][c] = (begin[d] + c) * ist[d];
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

/* StridedSlice, following TensorFlow's ValidateStridedSliceOp: the spec is
 * made canonical by kn_slice_canon (shared with the CUDA backend), then
 * gathered. */
static ms_status strided_slice_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                       rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    const int rank = x->shape.rank;
    int64_t sb[KN_SLICE_MAX_SPEC], se[KN_SLICE_MAX_SPEC], ss[KN_SLICE_MAX_SPEC];
    int nb, ne, nst;
    if ((st = kn__read_ints(node, in[1], "begin", sb, KN_SLICE_MAX_SPEC, &nb)) != MS_OK) return st;
    if ((st = kn__read_ints(node, in[2], "end", se, KN_SLICE_MAX_SPEC, &ne)) != MS_OK) return st;
    if ((st = kn__read_ints(node, in[3], "strides", ss, KN_SLICE_MAX_SPEC, &nst)) != MS_OK)
        return st;
    if (nb != ne || nb != nst)
        return KN_EINVAL(node, "begin, end and strides have %d, %d and %d values", nb, ne, nst);
    int64_t masks[5]; /* as kn_slice_canon takes them */
    masks[0] = kn_attr_i(node, "begin_mask", 0);
    masks[1] = kn_attr_i(node, "end_mask", 0);
    masks[2] = kn_attr_i(node, "ellipsis_mask", 0);
    masks[3] = kn_attr_i(node, "new_axis_mask", 0);
    masks[4] = kn_attr_i(node, "shrink_axis_mask", 0);
    kn_slice sl;
    char why[256];
    if (!kn_slice_canon(&x->shape, sb, se, ss, nb, masks, &sl, why, sizeof why))
        return KN_EINVAL(node, "%s", why);
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &sl.os, &sl.ps, es, out, &done)) != MS_OK || done)
        return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++)
        for (int64_t c = 0; c < sl.ps.dim[d]; c++)
            g.tab[d][c] = (sl.start[d] + c * sl.stride[d]) * ist[d];
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

static ms_status tile_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank, cnt;
    int64_t m[RT_MAX_RANK];
    if ((st = kn__read_ints(node, in[1], "multiples", m, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    if (cnt != rank)
        return KN_EINVAL(node, "multiples has %d values for input %s", cnt, kn__shp(&x->shape));
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    rt_shape os = {.rank = rank};
    for (int d = 0; d < rank; d++) {
        if (m[d] < 0)
            return KN_EINVAL(node, "multiples[%d] = %lld is negative", d, (long long)m[d]);
        if (m[d] > 0 && x->shape.dim[d] > INT64_MAX / m[d])
            return KN_EINVAL(node, "multiples[%d] = %lld makes the result too large", d,
                             (long long)m[d]);
        os.dim[d] = x->shape.dim[d] * m[d];
    }
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++)
        for (int64_t c = 0; c < os.dim[d]; c++)
            g.tab[d][c] = (c % x->shape.dim[d]) * ist[d];
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

/* ====================================================================== */
/* Shape, Fill                                                            */
/* ====================================================================== */

static ms_status shape_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    rt_dtype t = kn_attr_type(node, "out_type", RT_DT_INT32);
    if (t != RT_DT_INT32 && t != RT_DT_INT64)
        return KN_EINVAL(node, "out_type must be int32 or int64, got %s", rt_dtype_name(t));
    return MS_OK;
}

static ms_status shape_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    if ((st = shape_prepare(node, NULL, &state)) != MS_OK) return st;
    rt_dtype t = kn_attr_type(node, "out_type", RT_DT_INT32);
    const rt_shape *is = &in[0]->shape;
    rt_shape os = {.rank = 1, .dim = {is->rank}};
    if ((st = kn__output(ctx, node, 0, t, &os, &out[0])) != MS_OK) return st;
    for (int d = 0; d < is->rank; d++) {
        if (t == RT_DT_INT32) {
            if (is->dim[d] > INT32_MAX)
                return KN_EINVAL(node, "dim %d of %s does not fit int32", d, kn__shp(is));
            ((int32_t *)out[0]->data)[d] = (int32_t)is->dim[d];
        } else {
            ((int64_t *)out[0]->data)[d] = is->dim[d];
        }
    }
    return MS_OK;
}

static ms_status fill_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    int64_t dims[RT_MAX_RANK];
    int cnt;
    if (in[0]->shape.rank != 1)
        return KN_EINVAL(node, "dims must be a vector, got shape %s", kn__shp(&in[0]->shape));
    if ((st = kn__read_ints(node, in[0], "dims", dims, RT_MAX_RANK, &cnt)) != MS_OK) return st;
    if (in[1]->nelem != 1 || in[1]->shape.rank != 0)
        return KN_EINVAL(node, "value must be a scalar, got shape %s", kn__shp(&in[1]->shape));
    size_t es;
    if ((st = pod_size(node, in[1]->dtype, &es)) != MS_OK) return st;
    rt_shape os = {.rank = cnt};
    for (int d = 0; d < cnt; d++) {
        if (dims[d] < 0)
            return KN_EINVAL(node, "dims[%d] = %lld is negative", d, (long long)dims[d]);
        os.dim[d] = dims[d];
    }
    if ((st = kn__output(ctx, node, 0, in[1]->dtype, &os, &out[0])) != MS_OK) return st;
    uint8_t *o = out[0]->data;
    int64_t n = out[0]->nelem;
    switch (es) {
    case 1:
        memset(o, *(const uint8_t *)in[1]->data, (size_t)n);
        break;
    case 4: {
        uint32_t v, *p = (uint32_t *)(void *)o;
        memcpy(&v, in[1]->data, 4);
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
        break;
    }
    case 8: {
        uint64_t v, *p = (uint64_t *)(void *)o;
        memcpy(&v, in[1]->data, 8);
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(o + (size_t)i * es, in[1]->data, es);
    }
    return MS_OK;
}

/* ====================================================================== */
/* GatherV2, Range                                                        */
/* ====================================================================== */

/* GatherV2(params, indices, axis) with batch_dims; Gather(params, indices)
 * uses axis 0, batch_dims 0 (kernels/kn_gather.c). */
static ms_status gather_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    int v2 = strcmp(node->op, "Gather") != 0;
    ms_status st = kn__need_inputs(node, in, v2 ? 3 : 2);
    if (st != MS_OK) return st;
    int64_t axis = 0, bd = v2 ? kn_attr_i(node, "batch_dims", 0) : 0;
    if (v2 && (st = kn__read_int1(node, in[2], "axis", &axis)) != MS_OK) return st;
    return kn_gather_axis(ctx, node, in[0], in[1], axis, bd, &out[0]);
}

static ms_status range_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    rt_dtype dt = in[0]->dtype;
    for (int i = 0; i < 3; i++)
        if (in[i]->dtype != dt || in[i]->nelem != 1)
            return KN_EINVAL(node, "start, limit and delta must be scalars of one dtype");
    int64_t size;
    if (dt == RT_DT_INT32 || dt == RT_DT_INT64) {
        int64_t v[3];
        for (int i = 0; i < 3; i++)
            v[i] = dt == RT_DT_INT32 ? ((const int32_t *)in[i]->data)[0]
                                     : ((const int64_t *)in[i]->data)[0];
        if (v[2] == 0) return KN_EINVAL(node, "delta must not be 0");
        if ((v[2] > 0 && v[0] > v[1]) || (v[2] < 0 && v[0] < v[1]))
            return KN_EINVAL(node, "start %lld cannot reach limit %lld with delta %lld",
                             (long long)v[0], (long long)v[1], (long long)v[2]);
        /* In unsigned arithmetic so that extreme ranges cannot overflow. */
        uint64_t span =
            v[2] > 0 ? (uint64_t)v[1] - (uint64_t)v[0] : (uint64_t)v[0] - (uint64_t)v[1];
        uint64_t step = v[2] > 0 ? (uint64_t)v[2] : 0u - (uint64_t)v[2];
        uint64_t cnt = span / step + (span % step != 0);
        if (cnt > (uint64_t)INT32_MAX)
            return KN_EINVAL(node, "range of %llu values is too large", (unsigned long long)cnt);
        size = (int64_t)cnt;
        rt_shape os = {.rank = 1, .dim = {size}};
        if ((st = kn__output(ctx, node, 0, dt, &os, &out[0])) != MS_OK) return st;
        for (int64_t i = 0; i < size; i++) {
            int64_t x = (int64_t)((uint64_t)v[0] + (uint64_t)i * (uint64_t)v[2]);
            if (dt == RT_DT_INT32)
                ((int32_t *)out[0]->data)[i] = (int32_t)x;
            else
                ((int64_t *)out[0]->data)[i] = x;
        }
        return MS_OK;
    }
    if (dt != RT_DT_FLOAT && dt != RT_DT_DOUBLE)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(dt));
    double v[3];
    for (int i = 0; i < 3; i++)
        v[i] =
            dt == RT_DT_FLOAT ? ((const float *)in[i]->data)[0] : ((const double *)in[i]->data)[0];
    if (v[2] == 0 || v[2] != v[2]) return KN_EINVAL(node, "delta must be a non-zero number");
    if ((v[2] > 0 && v[0] > v[1]) || (v[2] < 0 && v[0] < v[1]))
        return KN_EINVAL(node, "start %g cannot reach limit %g with delta %g", v[0], v[1], v[2]);
    /* Size and values computed in the tensor's type, as TensorFlow does
     * (values by repeated addition of delta). */
    double cnt = dt == RT_DT_FLOAT ? ceilf(fabsf(((float)v[1] - (float)v[0]) / (float)v[2]))
                                   : ceil(fabs((v[1] - v[0]) / v[2]));
    if (!(cnt <= (double)INT32_MAX)) return KN_EINVAL(node, "range is too large");
    size = (int64_t)cnt;
    rt_shape os = {.rank = 1, .dim = {size}};
    if ((st = kn__output(ctx, node, 0, dt, &os, &out[0])) != MS_OK) return st;
    if (dt == RT_DT_FLOAT) {
        float val = (float)v[0], d = (float)v[2];
        for (int64_t i = 0; i < size; i++, val += d)
            ((float *)out[0]->data)[i] = val;
    } else {
        double val = v[0];
        for (int64_t i = 0; i < size; i++, val += v[2])
            ((double *)out[0]->data)[i] = val;
    }
    return MS_OK;
}

/* ====================================================================== */
/* ONNX forms whose "attribute" inputs (starts, pads, axes) are tensors    */
/* computed at run time; the ONNX importer emits these ops when they are   */
/* not constants (with constants it emits the TF ops above).               */
/* ====================================================================== */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Reads the int vector input i into v and checks that it has n values. */
static ms_status onnx_ints(const kn_node *node, const rt_tensor *t, const char *what, int64_t *v,
                           int max, int n) {
    int cnt;
    ms_status st = kn__read_ints(node, t, what, v, max, &cnt);
    if (st != MS_OK) return st;
    if (cnt != n) return KN_EINVAL(node, "%s has %d values, expected %d", what, cnt, n);
    return MS_OK;
}

/* OnnxSlice(x, starts, ends, axes, steps): ONNX Slice-13, all five inputs
 * present with as many values each (the importer supplies 0..n-1 and 1s for
 * absent axes and steps). Negative starts and ends count from the end; then
 * positive steps clamp both to [0, d], negative steps the start to
 * [0, d - 1] and the end to [-1, d - 1] (-1: through index 0). */
static ms_status onnx_slice_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 5);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank, n;
    int64_t sv[RT_MAX_RANK], ev[RT_MAX_RANK], av[RT_MAX_RANK], pv[RT_MAX_RANK];
    if ((st = kn__read_ints(node, in[1], "starts", sv, RT_MAX_RANK, &n)) != MS_OK ||
        (st = onnx_ints(node, in[2], "ends", ev, RT_MAX_RANK, n)) != MS_OK ||
        (st = onnx_ints(node, in[3], "axes", av, RT_MAX_RANK, n)) != MS_OK ||
        (st = onnx_ints(node, in[4], "steps", pv, RT_MAX_RANK, n)) != MS_OK)
        return st;
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    int64_t b[RT_MAX_RANK], step[RT_MAX_RANK];
    uint8_t seen[RT_MAX_RANK] = {0};
    rt_shape os = x->shape;
    for (int d = 0; d < rank; d++)
        b[d] = 0, step[d] = 1;
    for (int i = 0; i < n; i++) {
        int a = kn__axis(av[i], rank);
        if (a < 0 || seen[a])
            return KN_EINVAL(node, "axis %lld is out of range or repeated for input %s",
                             (long long)av[i], kn__shp(&x->shape));
        seen[a] = 1;
        int64_t d = x->shape.dim[a], p = pv[i];
        if (p == 0) return KN_EINVAL(node, "step of axis %d is 0", a);
        /* Into [-d - 1, d + 1] first, so that adding d cannot overflow. */
        int64_t s = clamp64(sv[i], -d - 1, d + 1), e = clamp64(ev[i], -d - 1, d + 1);
        if (s < 0) s += d;
        if (e < 0) e += d;
        uint64_t ap = p > 0 ? (uint64_t)p : 0u - (uint64_t)p, cnt;
        if (p > 0) {
            s = clamp64(s, 0, d);
            e = clamp64(e, 0, d);
            cnt = e > s ? (uint64_t)(e - s - 1) / ap + 1 : 0;
        } else {
            s = clamp64(s, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            cnt = s > e ? (uint64_t)(s - e - 1) / ap + 1 : 0;
        }
        b[a] = s;
        step[a] = cnt > 1 ? p : 1; /* a single element needs no step (no overflow) */
        os.dim[a] = (int64_t)cnt;
    }
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++)
        for (int64_t c = 0; c < os.dim[d]; c++)
            g.tab[d][c] = (b[d] + c * step[d]) * ist[d];
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

enum { OPAD_CONSTANT, OPAD_REFLECT, OPAD_EDGE, OPAD_WRAP };

static ms_status onnx_pad_mode(const kn_node *node, int *mode) {
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    for (int m = 0; m < 4; m++)
        if (kn_attr_s_eq(node, "mode", names[m], "constant")) {
            *mode = m;
            return MS_OK;
        }
    return KN_EINVAL(node, "mode must be constant, reflect, edge or wrap");
}

static ms_status onnx_pad_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    int mode;
    return onnx_pad_mode(node, &mode);
}

/* Source index of output position s (relative to the input's start) of an
 * axis of n elements in a non-constant mode; n >= 1. */
static int64_t onnx_pad_src(int mode, int64_t s, int64_t n) {
    if (mode == OPAD_EDGE) return clamp64(s, 0, n - 1);
    if (mode == OPAD_WRAP) return ((s % n) + n) % n;
    if (n == 1) return 0; /* reflect */
    int64_t per = 2 * (n - 1), m = ((s % per) + per) % per;
    return m < n ? m : per - m;
}

/* OnnxPad(x, pads, constant_value, axes), attr mode: ONNX Pad-18. pads has
 * the begins then the ends of the listed axes; negative pads remove
 * elements. constant_value is one element of x's type. */
static ms_status onnx_pad_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                  rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int mode, na;
    ms_status st = onnx_pad_mode(node, &mode);
    if (st != MS_OK) return st;
    if ((st = kn__need_inputs(node, in, 4)) != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank;
    size_t es;
    if ((st = pod_size(node, x->dtype, &es)) != MS_OK) return st;
    int64_t av[RT_MAX_RANK], pv[2 * RT_MAX_RANK], pb[RT_MAX_RANK] = {0}, pa[RT_MAX_RANK] = {0};
    if ((st = kn__read_ints(node, in[3], "axes", av, RT_MAX_RANK, &na)) != MS_OK ||
        (st = onnx_ints(node, in[1], "pads", pv, 2 * RT_MAX_RANK, 2 * na)) != MS_OK)
        return st;
    if (in[2]->dtype != x->dtype || in[2]->nelem != 1)
        return KN_EINVAL(node, "constant_value must be one %s value", rt_dtype_name(x->dtype));
    uint8_t seen[RT_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = kn__axis(av[i], rank);
        if (a < 0 || seen[a])
            return KN_EINVAL(node, "axis %lld is out of range or repeated for input %s",
                             (long long)av[i], kn__shp(&x->shape));
        seen[a] = 1;
        pb[a] = pv[i];
        pa[a] = pv[i + na];
    }
    rt_shape os = {.rank = rank};
    for (int d = 0; d < rank; d++) {
        int64_t n = x->shape.dim[d];
        if (pb[d] < -n || pa[d] < -n || pb[d] > INT32_MAX || pa[d] > INT32_MAX ||
            n + pb[d] + pa[d] < 0)
            return KN_EINVAL(node, "pads (%lld, %lld) do not fit dim %d of input %s",
                             (long long)pb[d], (long long)pa[d], d, kn__shp(&x->shape));
        os.dim[d] = n + pb[d] + pa[d];
        if (mode != OPAD_CONSTANT && n == 0 && os.dim[d] > 0)
            return KN_EINVAL(node, "cannot pad the empty dim %d of input %s in this mode", d,
                             kn__shp(&x->shape));
    }
    int64_t ist[RT_MAX_RANK];
    strides_of(&x->shape, ist);
    kn_gather g;
    int done;
    if ((st = gather_begin(ctx, node, &g, x, &os, &os, es, out, &done)) != MS_OK || done) return st;
    if (rank == 0) g.tab[0][0] = 0;
    for (int d = 0; d < rank; d++) {
        int64_t n = x->shape.dim[d];
        for (int64_t c = 0; c < os.dim[d]; c++) {
            int64_t s = c - pb[d];
            if (s < 0 || s >= n) {
                if (mode == OPAD_CONSTANT) {
                    g.tab[d][c] = KN_GATHER_PAD;
                    continue;
                }
                s = onnx_pad_src(mode, s, n);
            }
            g.tab[d][c] = s * ist[d];
        }
    }
    g.pad = in[2]->data;
    kn__gather_run(ctx, &g);
    kn__gather_destroy(&g);
    return MS_OK;
}

/* OnnxUnsqueeze(x, axes) / OnnxSqueeze(x, axes): ONNX's forms with the axes
 * as a run-time tensor (a view of x). Unsqueeze counts the axes in the
 * output's rank; Squeeze's axes must be dims of 1, and an empty list drops
 * every dim of 1. Repeated axes are refused. */
static ms_status onnx_squeeze_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                      rt_tensor *const *in, rt_tensor **out) {
    (void)ctx;
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_shape *is = &in[0]->shape;
    int unsq = strcmp(node->op, "OnnxUnsqueeze") == 0, na;
    int64_t av[RT_MAX_RANK];
    if ((st = kn__read_ints(node, in[1], "axes", av, RT_MAX_RANK, &na)) != MS_OK) return st;
    int orank = unsq ? is->rank + na : is->rank;
    if (orank > RT_MAX_RANK)
        return KN_EINVAL(node, "%d axes inserted into input %s exceed the maximum rank", na,
                         kn__shp(is));
    uint8_t mark[RT_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = kn__axis(av[i], orank);
        if (a < 0 || mark[a] || (!unsq && is->dim[a] != 1))
            return KN_EINVAL(node, "axis %lld is out of range, repeated or not of size 1 for "
                                   "input %s",
                             (long long)av[i], kn__shp(is));
        mark[a] = 1;
    }
    rt_shape s = {.rank = 0};
    for (int d = 0, k = 0; d < orank; d++) {
        if (unsq)
            s.dim[s.rank++] = mark[d] ? 1 : is->dim[k++];
        else if (!(mark[d] || (na == 0 && is->dim[d] == 1)))
            s.dim[s.rank++] = is->dim[d];
    }
    return rt_tensor_view(in[0], &s, &out[0]);
}

/* ====================================================================== */

const kn_kernel kn_cpu_shape_kernels[] = {
    {.op = "Reshape", .compute = reshape_compute},
    {.op = "Squeeze", .prepare = squeeze_prepare, .compute = squeeze_compute},
    {.op = "ExpandDims", .compute = expand_dims_compute},
    {.op = "ConcatV2", .compute = concat_compute},
    {.op = "Concat", .compute = concat_compute},
    {.op = "Unpack", .compute = unpack_compute},
    {.op = "Pack", .compute = pack_compute},
    {.op = "Split", .prepare = split_prepare, .compute = split_compute},
    {.op = "SplitV", .prepare = split_prepare, .compute = splitv_compute},
    {.op = "Transpose", .compute = transpose_compute},
    {.op = "Pad", .prepare = pad_prepare, .compute = pad_compute},
    {.op = "PadV2", .prepare = pad_prepare, .compute = pad_compute},
    {.op = "MirrorPad", .prepare = pad_prepare, .compute = pad_compute},
    {.op = "Slice", .compute = slice_compute},
    {.op = "StridedSlice", .compute = strided_slice_compute},
    {.op = "Tile", .compute = tile_compute},
    {.op = "Shape", .prepare = shape_prepare, .compute = shape_compute},
    {.op = "Fill", .compute = fill_compute},
    {.op = "GatherV2", .compute = gather_compute},
    {.op = "Gather", .compute = gather_compute},
    {.op = "Range", .compute = range_compute},
    {.op = "OnnxSlice", .compute = onnx_slice_compute},
    {.op = "OnnxPad", .prepare = onnx_pad_prepare, .compute = onnx_pad_compute},
    {.op = "OnnxSqueeze", .compute = onnx_squeeze_compute},
    {.op = "OnnxUnsqueeze", .compute = onnx_squeeze_compute},
    {.op = NULL},
};
