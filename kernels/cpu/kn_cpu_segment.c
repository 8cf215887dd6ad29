/* kn_cpu_segment.c - SparseSegmentSum / Mean / SqrtN (and their
 * WithNumSegments forms) and TensorScatterUpdate, as TensorFlow defines them.
 *
 * SparseSegment*(data, indices, segment_ids[, num_segments]):
 *   out[s] = reduce over i with segment_ids[i] == s of data[indices[i]]
 *   (Sum; Mean divides by the count, SqrtN by its square root; an empty
 *   segment is 0). out has num_segments (default segment_ids[last] + 1)
 *   rows of data.shape[1:]. segment_ids must be sorted and in range, indices
 *   in [0, data rows): INVALID_ARGUMENT otherwise. float and double data.
 * TensorScatterUpdate(tensor, indices [..., K], updates): a copy of tensor
 *   with the slices tensor[indices[j]] replaced by updates[j] (later
 *   duplicates win); an index outside tensor is INVALID_ARGUMENT. Any plain
 *   dtype. */
#include <math.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

typedef enum { SEG_SUM, SEG_MEAN, SEG_SQRTN } seg_kind;

static int64_t ival(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

static ms_status segment_run(kn_ctx *ctx, const kn_node *n, rt_tensor *const *in, rt_tensor **out,
                             seg_kind kind, int with_num) {
    ms_status st = kn__need_inputs(n, in, with_num ? 4 : 3);
    if (st != MS_OK) return st;
    const rt_tensor *data = in[0], *idx = in[1], *seg = in[2];
    if (data->dtype != RT_DT_FLOAT && data->dtype != RT_DT_DOUBLE)
        return KN_EINVAL(n, "data of %s is not supported (float, double)",
                         rt_dtype_name(data->dtype));
    if (data->shape.rank < 1) return KN_EINVAL(n, "data must have rank >= 1");
    if ((idx->dtype != RT_DT_INT32 && idx->dtype != RT_DT_INT64) ||
        (seg->dtype != RT_DT_INT32 && seg->dtype != RT_DT_INT64))
        return KN_EINVAL(n, "indices and segment_ids must be int32 or int64");
    if (idx->shape.rank != 1 || seg->shape.rank != 1 || idx->nelem != seg->nelem)
        return KN_EINVAL(n, "indices %s and segment_ids %s must be vectors of one length",
                         kn__shp(&idx->shape), kn__shp(&seg->shape));
    int64_t nseg = seg->nelem ? ival(seg, seg->nelem - 1) + 1 : 0;
    if (with_num && (st = kn__read_int1(n, in[3], "num_segments", &nseg)) != MS_OK) return st;
    if (nseg < 0) return KN_EINVAL(n, "num_segments must be >= 0");
    int64_t rows = data->shape.dim[0], inner = rows ? data->nelem / rows : 0;
    for (int64_t i = 0; i < seg->nelem; i++) {
        int64_t s = ival(seg, i), r = ival(idx, i);
        if (s < 0 || s >= nseg)
            return KN_EINVAL(n, "segment_ids[%lld] = %lld is out of range [0, %lld)",
                             (long long)i, (long long)s, (long long)nseg);
        if (i > 0 && s < ival(seg, i - 1))
            return KN_EINVAL(n, "segment ids are not increasing");
        if (r < 0 || r >= rows)
            return KN_EINVAL(n, "indices[%lld] = %lld is out of range [0, %lld)", (long long)i,
                             (long long)r, (long long)rows);
    }
    rt_shape os = data->shape;
    os.dim[0] = nseg;
    if ((st = kn__output(ctx, n, 0, data->dtype, &os, out)) != MS_OK) return st;
    int dbl = data->dtype == RT_DT_DOUBLE;
    memset((*out)->data, 0, (size_t)(*out)->nelem * rt_dtype_size(data->dtype));
    for (int64_t i = 0; i < seg->nelem;) {
        int64_t s = ival(seg, i), j = i;
        for (; j < seg->nelem && ival(seg, j) == s; j++) {
            int64_t r = ival(idx, j);
            for (int64_t k = 0; k < inner; k++) {
                if (dbl)
                    ((double *)(*out)->data)[s * inner + k] +=
                        ((const double *)data->data)[r * inner + k];
                else
                    ((float *)(*out)->data)[s * inner + k] +=
                        ((const float *)data->data)[r * inner + k];
            }
        }
        double cnt = (double)(j - i);
        double div = kind == SEG_MEAN ? cnt : kind == SEG_SQRTN ? sqrt(cnt) : 1.0;
        if (div != 1.0)
            for (int64_t k = 0; k < inner; k++) {
                if (dbl)
                    ((double *)(*out)->data)[s * inner + k] /= div;
                else
                    ((float *)(*out)->data)[s * inner + k] /= (float)div;
            }
        i = j;
    }
    return MS_OK;
}

#define SEG_OP(fn, kind, with)                                                                     \
    static ms_status fn(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,           \
                        rt_tensor **out) {                                                         \
        (void)st_;                                                                                 \
        return segment_run(ctx, n, in, out, kind, with);                                           \
    }
SEG_OP(seg_sum, SEG_SUM, 0)
SEG_OP(seg_mean, SEG_MEAN, 0)
SEG_OP(seg_sqrtn, SEG_SQRTN, 0)
SEG_OP(seg_sum_n, SEG_SUM, 1)
SEG_OP(seg_mean_n, SEG_MEAN, 1)
SEG_OP(seg_sqrtn_n, SEG_SQRTN, 1)

static ms_status scatter_update(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st_;
    ms_status st = kn__need_inputs(n, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *t = in[0], *idx = in[1], *up = in[2];
    size_t es = rt_dtype_size(t->dtype);
    if (!rt_dtype_is_pod(t->dtype) || es == 0)
        return KN_EINVAL(n, "dtype %s is not supported", rt_dtype_name(t->dtype));
    if (up->dtype != t->dtype) return KN_EINVAL(n, "updates must have the tensor's dtype");
    if (idx->dtype != RT_DT_INT32 && idx->dtype != RT_DT_INT64)
        return KN_EINVAL(n, "indices must be int32 or int64");
    if (idx->shape.rank < 1) return KN_EINVAL(n, "indices must have rank >= 1");
    int k = (int)idx->shape.dim[idx->shape.rank - 1];
    if (k > t->shape.rank)
        return KN_EINVAL(n, "index depth %d exceeds the tensor's rank %d", k, t->shape.rank);
    int64_t nidx = 1; /* index tuples: prod(indices.shape[:-1]); K = 0 replaces everything */
    for (int d = 0; d < idx->shape.rank - 1; d++) nidx *= idx->shape.dim[d];
    /* updates: indices.shape[:-1] + tensor.shape[k:] */
    rt_shape want = {.rank = idx->shape.rank - 1 + t->shape.rank - k};
    if (want.rank > RT_MAX_RANK) return KN_EINVAL(n, "updates rank too large");
    for (int d = 0; d < idx->shape.rank - 1; d++) want.dim[d] = idx->shape.dim[d];
    for (int d = k; d < t->shape.rank; d++) want.dim[idx->shape.rank - 1 + d - k] = t->shape.dim[d];
    int same = up->shape.rank == want.rank;
    for (int d = 0; same && d < want.rank; d++) same = up->shape.dim[d] == want.dim[d];
    if (!same)
        return KN_EINVAL(n, "updates shape %s must be %s", kn__shp(&up->shape), kn__shp(&want));
    int64_t slice = 1;
    for (int d = k; d < t->shape.rank; d++) slice *= t->shape.dim[d];
    if ((st = kn__output(ctx, n, 0, t->dtype, &t->shape, out)) != MS_OK) return st;
    memcpy((*out)->data, t->data, (size_t)t->nelem * es);
    for (int64_t j = 0; j < nidx; j++) {
        int64_t off = 0;
        for (int d = 0; d < k; d++) {
            int64_t v = ival(idx, j * k + d);
            if (v < 0 || v >= t->shape.dim[d])
                return KN_EINVAL(n, "indices[%lld] does not index into shape %s", (long long)j,
                                 kn__shp(&t->shape));
            off = off * t->shape.dim[d] + v;
        }
        memcpy((char *)(*out)->data + (size_t)(off * slice) * es,
               (const char *)up->data + (size_t)(j * slice) * es, (size_t)slice * es);
    }
    return MS_OK;
}

const kn_kernel kn_cpu_segment_kernels[] = {
    {.op = "SparseSegmentSum", .compute = seg_sum},
    {.op = "SparseSegmentMean", .compute = seg_mean},
    {.op = "SparseSegmentSqrtN", .compute = seg_sqrtn},
    {.op = "SparseSegmentSumWithNumSegments", .compute = seg_sum_n},
    {.op = "SparseSegmentMeanWithNumSegments", .compute = seg_mean_n},
    {.op = "SparseSegmentSqrtNWithNumSegments", .compute = seg_sqrtn_n},
    {.op = "TensorScatterUpdate", .compute = scatter_update},
    {.op = NULL},
};
