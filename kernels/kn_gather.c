/* kn_gather.c - GatherV2 (with batch_dims) and GatherNd over host tensors,
 * shared by the CPU kernels and the resource-variable host ops
 * (kn_gather.h). Semantics and messages follow TensorFlow's gather ops:
 * an out-of-range index is INVALID_ARGUMENT naming it. */
#include "kn_gather.h"

#include <stdio.h>
#include <string.h>

#include "kn_ctx.h"

/* "[2,3]" as TensorFlow prints shapes; two rotating per-thread buffers. */
static const char *shp(const rt_shape *s) {
    static _Thread_local char buf[2][RT_MAX_RANK * 21 + 8];
    static _Thread_local int which;
    char *b = buf[which++ & 1];
    size_t n = 0;
    b[n++] = '[';
    for (int d = 0; d < s->rank; d++)
        n += (size_t)snprintf(b + n, sizeof(buf[0]) - n, "%s%lld", d ? "," : "",
                              (long long)s->dim[d]);
    b[n++] = ']';
    b[n] = '\0';
    return b;
}

static int64_t prod(const rt_shape *s, int from, int to) {
    uint64_t p = 1; /* unsigned: an empty tensor's other dims may overflow */
    for (int d = from; d < to; d++) p *= (uint64_t)s->dim[d];
    return (int64_t)p;
}

static int64_t idx_get(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static ms_status new_out(kn_ctx *ctx, const kn_node *n, rt_dtype dt, const rt_shape *s,
                         rt_tensor **out) {
    ms_status st = kn_ctx_output(ctx, 0, dt, s, out);
    if (st != MS_OK)
        return ms_errwrap(st, "node '%s' (%s): output 0 of shape %s", n->name, n->op, shp(s));
    return MS_OK;
}

static ms_status check_types(const kn_node *n, const rt_tensor *p, const rt_tensor *ix,
                             size_t *es) {
    *es = rt_dtype_size(p->dtype);
    if (*es == 0 || !rt_dtype_is_pod(p->dtype))
        return kn__errf(MS_ENOTSUP, n, "params of %s are not supported", rt_dtype_name(p->dtype));
    if (ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64)
        return kn__errf(MS_EINVAL, n, "indices must be int32 or int64, got %s",
                    rt_dtype_name(ix->dtype));
    return MS_OK;
}

ms_status kn_gather_axis(kn_ctx *ctx, const kn_node *node, const rt_tensor *p, const rt_tensor *ix,
                         int64_t axis, int64_t batch_dims, rt_tensor **out) {
    size_t es;
    ms_status st = check_types(node, p, ix, &es);
    if (st != MS_OK) return st;
    int64_t bd = batch_dims < 0 ? batch_dims + ix->shape.rank : batch_dims;
    if (bd < 0 || bd > ix->shape.rank)
        return kn__errf(MS_EINVAL, node, "batch_dims %lld is not in [-%d, %d] for indices %s",
                    (long long)batch_dims, ix->shape.rank, ix->shape.rank, shp(&ix->shape));
    if (axis < 0) axis += p->shape.rank;
    if (axis < bd || axis >= p->shape.rank)
        return kn__errf(MS_EINVAL, node, "axis %lld is out of range for params %s and batch_dims %lld",
                    (long long)axis, shp(&p->shape), (long long)bd);
    int a = (int)axis, b = (int)bd;
    for (int d = 0; d < b; d++)
        if (p->shape.dim[d] != ix->shape.dim[d])
            return kn__errf(MS_EINVAL, node, "params %s and indices %s differ in batch dimension %d",
                        shp(&p->shape), shp(&ix->shape), d);
    if (p->shape.rank - 1 + ix->shape.rank - b > RT_MAX_RANK)
        return kn__errf(MS_EINVAL, node, "result rank is too large");
    rt_shape os = {.rank = 0};
    for (int d = 0; d < a; d++) os.dim[os.rank++] = p->shape.dim[d];
    for (int d = b; d < ix->shape.rank; d++) os.dim[os.rank++] = ix->shape.dim[d];
    for (int d = a + 1; d < p->shape.rank; d++) os.dim[os.rank++] = p->shape.dim[d];
    int64_t n = p->shape.dim[a], nb = prod(&p->shape, 0, b), outer = prod(&p->shape, b, a);
    int64_t inner = prod(&p->shape, a + 1, p->shape.rank);
    int64_t per = prod(&ix->shape, b, ix->shape.rank); /* indices per batch */
    for (int64_t i = 0; i < ix->nelem; i++) {
        int64_t v = idx_get(ix, i);
        if (v < 0 || v >= n)
            return kn__errf(MS_EINVAL, node, "indices[%lld] = %lld is not in [0, %lld)", (long long)i,
                        (long long)v, (long long)n);
    }
    if ((st = new_out(ctx, node, p->dtype, &os, out)) != MS_OK) return st;
    if ((*out)->nelem == 0) return MS_OK;
    uint8_t *dst = (*out)->data;
    const uint8_t *src = p->data;
    size_t row = (size_t)inner * es;
    for (int64_t bi = 0; bi < nb; bi++)
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = bi * per; i < (bi + 1) * per; i++) {
                memcpy(dst, src + (size_t)((bi * outer + o) * n + idx_get(ix, i)) * row, row);
                dst += row;
            }
    return MS_OK;
}

ms_status kn_gather_nd(kn_ctx *ctx, const kn_node *node, const rt_tensor *p, const rt_tensor *ix,
                       rt_tensor **out) {
    size_t es;
    ms_status st = check_types(node, p, ix, &es);
    if (st != MS_OK) return st;
    if (ix->shape.rank < 1)
        return kn__errf(MS_EINVAL, node, "indices must be at least a vector, got shape %s",
                    shp(&ix->shape));
    int64_t depth = ix->shape.dim[ix->shape.rank - 1];
    if (depth > p->shape.rank)
        return kn__errf(MS_EINVAL, node,
                    "index innermost dimension length must be <= params rank; saw: %lld vs. %d",
                    (long long)depth, p->shape.rank);
    rt_shape os = {.rank = ix->shape.rank - 1 + p->shape.rank - (int)depth};
    if (os.rank > RT_MAX_RANK) return kn__errf(MS_EINVAL, node, "output rank %d is too large", os.rank);
    int r = 0;
    for (int d = 0; d < ix->shape.rank - 1; d++) os.dim[r++] = ix->shape.dim[d];
    int64_t slice = 1;
    for (int d = (int)depth; d < p->shape.rank; d++) {
        os.dim[r++] = p->shape.dim[d];
        slice *= p->shape.dim[d];
    }
    int64_t nidx = prod(&ix->shape, 0, ix->shape.rank - 1); /* index tuples */
    if (p->nelem == 0 && nidx > 0 && slice > 0 && depth > 0)
        return kn__errf(MS_EINVAL, node,
                    "Requested more than 0 entries, but params is empty. Params shape: %s",
                    shp(&p->shape));
    if ((st = new_out(ctx, node, p->dtype, &os, out)) != MS_OK) return st;
    for (int64_t i = 0; i < nidx; i++) {
        int64_t off = 0;
        for (int64_t d = 0; d < depth; d++) {
            int64_t v = idx_get(ix, i * depth + d);
            if (v < 0 || v >= p->shape.dim[d]) {
                /* TensorFlow's message: the tuple's position and its values */
                char where[RT_MAX_RANK * 21 + 8], ixs[RT_MAX_RANK * 21 + 8];
                size_t nw = 0, m = 0;
                int lead = ix->shape.rank - 1;
                int64_t coord[RT_MAX_RANK] = {0}, rem = i;
                for (int e = lead - 1; e >= 0; e--) {
                    coord[e] = ix->shape.dim[e] ? rem % ix->shape.dim[e] : 0;
                    rem = ix->shape.dim[e] ? rem / ix->shape.dim[e] : 0;
                }
                where[0] = '\0';
                for (int e = 0; e < lead; e++)
                    nw += (size_t)snprintf(where + nw, sizeof(where) - nw, "%s%lld", e ? "," : "",
                                           (long long)coord[e]);
                ixs[0] = '\0';
                for (int64_t e = 0; e < depth && m < sizeof(ixs) - 24; e++)
                    m += (size_t)snprintf(ixs + m, sizeof(ixs) - m, "%s%lld", e ? "," : "",
                                          (long long)idx_get(ix, i * depth + e));
                rt_tensor_unref(*out);
                *out = NULL;
                return kn__errf(MS_EINVAL, node,
                            "indices[%s] = [%s] does not index into param shape %s", where, ixs,
                            shp(&p->shape));
            }
            off = off * p->shape.dim[d] + v;
        }
        if (slice > 0)
            memcpy((uint8_t *)(*out)->data + (size_t)(i * slice) * es,
                   (const uint8_t *)p->data + (size_t)(off * slice) * es, (size_t)slice * es);
    }
    return MS_OK;
}
