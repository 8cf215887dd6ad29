/* kn_cpu_reverse.c - ReverseV2 (Keras Bidirectional layers run their
 * backward RNN over a reversed sequence) and TF1's Reverse (bool dims).
 *
 * out[i0, ..., ik] = in[j0, ..., jk] with jd = n_d - 1 - id on the reversed
 * axes. The trailing axes after the last reversed one are copied as one
 * contiguous block per row. Negative axes count from the end; an axis out of
 * range or given twice is INVALID_ARGUMENT, as in TensorFlow. Any plain
 * dtype; strings are not supported. */
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

static ms_status reverse_run(kn_ctx *ctx, const kn_node *n, const rt_tensor *x, const int *rev,
                             rt_tensor **out) {
    int rank = x->shape.rank;
    size_t es = rt_dtype_size(x->dtype);
    if (!rt_dtype_is_pod(x->dtype) || es == 0)
        return KN_EINVAL(n, "dtype %s is not supported", rt_dtype_name(x->dtype));
    ms_status st = kn__output(ctx, n, 0, x->dtype, &x->shape, out);
    if (st != MS_OK || x->nelem == 0) return st;
    int last = -1;
    for (int d = 0; d < rank; d++)
        if (rev[d] && x->shape.dim[d] > 1) last = d;
    if (last < 0) {
        memcpy((*out)->data, x->data, (size_t)x->nelem * es);
        return MS_OK;
    }
    size_t block = es;
    for (int d = last + 1; d < rank; d++) block *= (size_t)x->shape.dim[d];
    int64_t stride[RT_MAX_RANK], idx[RT_MAX_RANK] = {0};
    int64_t s = (int64_t)block;
    for (int d = last; d >= 0; d--) {
        stride[d] = s;
        s *= x->shape.dim[d];
    }
    int64_t rows = x->nelem * (int64_t)es / (int64_t)block;
    const char *src = x->data;
    char *dst = (*out)->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int d = 0; d <= last; d++)
            off += (rev[d] ? x->shape.dim[d] - 1 - idx[d] : idx[d]) * stride[d];
        memcpy(dst + (size_t)r * block, src + off, block);
        for (int d = last; d >= 0; d--) {
            if (++idx[d] < x->shape.dim[d]) break;
            idx[d] = 0;
        }
    }
    return MS_OK;
}

static ms_status reverse_v2_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)st_;
    ms_status st = kn__need_inputs(n, in, 2);
    if (st != MS_OK) return st;
    int rank = in[0]->shape.rank, count = 0, rev[RT_MAX_RANK] = {0};
    int64_t axes[RT_MAX_RANK + 1];
    if ((st = kn__read_ints(n, in[1], "axis", axes, RT_MAX_RANK + 1, &count)) != MS_OK) return st;
    if (count > rank) return KN_EINVAL(n, "%d axes for a tensor of rank %d", count, rank);
    for (int i = 0; i < count; i++) {
        int a = kn__axis(axes[i], rank);
        if (a < 0)
            return KN_EINVAL(n, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        if (rev[a]) return KN_EINVAL(n, "axis %d is given twice", a);
        rev[a] = 1;
    }
    return reverse_run(ctx, n, in[0], rev, out);
}

/* TF1 Reverse: dims is a bool vector, one per axis. */
static ms_status reverse_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)st_;
    ms_status st = kn__need_inputs(n, in, 2);
    if (st != MS_OK) return st;
    int rank = in[0]->shape.rank, rev[RT_MAX_RANK] = {0};
    if (in[1]->dtype != RT_DT_BOOL || in[1]->shape.rank != 1 || in[1]->nelem != rank)
        return KN_EINVAL(n, "dims must be a bool vector of %d values", rank);
    for (int d = 0; d < rank; d++) rev[d] = ((const uint8_t *)in[1]->data)[d] != 0;
    return reverse_run(ctx, n, in[0], rev, out);
}

const kn_kernel kn_cpu_reverse_kernels[] = {
    {.op = "ReverseV2", .compute = reverse_v2_compute},
    {.op = "Reverse", .compute = reverse_compute},
    {.op = NULL},
};
