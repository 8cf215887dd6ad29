/* kn_cpu_onnx_cache.c - our own op for ONNX's TensorScatter (emitted by
 * runtime/onnx; a SavedModel holding it runs in dcmserve only, docs/onnx.md):
 *
 *   OnnxTensorScatter  past_cache, update (same rank and type; every dim
 *                      the same but attr axis's, where update's is at most
 *                      past's) [, write_indices (int64, (batch)) when attr
 *                      has_indices; else zeros] -> present_cache: past with,
 *                      for each index prefix p of the dims before axis and
 *                      s < update's length along axis, the slice at
 *                      write_indices[p[0]] + s replaced by update's slice s
 *                      (ONNX TensorScatter 24, a KV cache's write). attrs
 *                      axis (1..rank-1: dim 0 is the batch), mode (0
 *                      linear: the position must lie inside the cache, else
 *                      the run fails with INVALID_ARGUMENT; 1 circular: taken
 *                      modulo the cache's length).
 */
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

static ms_status tensor_scatter_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int has_ix = kn_attr_i(node, "has_indices", 0) != 0;
    ms_status st = kn__need_inputs(node, in, 2 + has_ix);
    if (st != MS_OK) return st;
    const rt_tensor *P = in[0], *U = in[1], *W = has_ix ? in[2] : NULL;
    int r = P->shape.rank, circ = kn_attr_i(node, "mode", 0) == 1;
    int64_t axis = kn_attr_i(node, "axis", -2);
    if (axis < 0) axis += r;
    if (!rt_dtype_is_pod(P->dtype) || U->dtype != P->dtype)
        return KN_EINVAL(node, "past_cache (%s) and update (%s) must be one plain type",
                         rt_dtype_name(P->dtype), rt_dtype_name(U->dtype));
    int ok = r >= 2 && axis >= 1 && axis < r && U->shape.rank == r;
    for (int d = 0; ok && d < r; d++)
        ok = d == axis ? U->shape.dim[d] <= P->shape.dim[d] : U->shape.dim[d] == P->shape.dim[d];
    if (!ok)
        return KN_EINVAL(node,
                         "past_cache %s, update %s, axis %lld: want the same rank (>= 2), the same "
                         "dims but the axis's (1..rank-1), where update's is at most past's",
                         kn__shp(&P->shape), kn__shp(&U->shape), (long long)axis);
    int64_t B = P->shape.dim[0], S = P->shape.dim[axis], L = U->shape.dim[axis];
    if (W != NULL && (W->dtype != RT_DT_INT64 || W->shape.rank != 1 || W->shape.dim[0] != B))
        return KN_EINVAL(node, "write_indices %s %s: want int64 (%lld)", rt_dtype_name(W->dtype),
                         kn__shp(&W->shape), (long long)B);
    const int64_t *wi = W != NULL ? W->data : NULL;
    /* Linear writes must stay inside the cache: checked before anything is written. */
    for (int64_t b = 0; !circ && L > 0 && b < B; b++) {
        int64_t w = wi != NULL ? wi[b] : 0;
        if (w < 0 || w > S - L)
            return KN_EINVAL(node, "write index %lld of batch %lld: %lld steps do not fit a cache "
                                   "of %lld (mode linear)",
                             (long long)w, (long long)b, (long long)L, (long long)S);
    }
    if ((st = kn__output(ctx, node, 0, P->dtype, &P->shape, out)) != MS_OK) return st;
    size_t es = rt_dtype_size(P->dtype);
    if (P->nelem > 0) memcpy((*out)->data, P->data, (size_t)P->nelem * es);
    if (U->nelem == 0) return MS_OK;
    int64_t pre = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        pre *= P->shape.dim[d];
    for (int d = (int)axis + 1; d < r; d++)
        inner *= P->shape.dim[d];
    int64_t per_b = pre / B; /* prefixes per batch row */
    size_t blk = (size_t)inner * es;
    char *o = (*out)->data;
    const char *u = U->data;
    for (int64_t p = 0; p < pre; p++) {
        if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
        int64_t w = wi != NULL ? wi[p / per_b] : 0;
        for (int64_t s = 0; s < L; s++) {
            int64_t pos = w + s;
            if (circ) pos = ((pos % S) + S) % S;
            memcpy(o + (size_t)(p * S + pos) * blk, u + (size_t)(p * L + s) * blk, blk);
        }
    }
    return MS_OK;
}

const kn_kernel kn_cpu_onnx_cache_kernels[] = {
    {.op = "OnnxTensorScatter", .compute = tensor_scatter_compute},
    {.op = NULL},
};
