/* kn_cuda_ops_index.c - the CUDA table's indexing ops: GatherV2 / Gather, Slice
 * and StridedSlice, for any 1/2/4/8-byte dtype.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* Element size of a dtype the index kernels move (1, 2, 4 or 8 bytes of
 * plain data); 0 for others (strings, complex128, resources). */
size_t kn_cuda__move_size(rt_dtype dt) {
    size_t es = rt_dtype_size(dt);
    if (dt == RT_DT_STRING || !rt_dtype_is_pod(dt)) return 0;
    return es == 1 || es == 2 || es == 4 || es == 8 ? es : 0;
}

/* GatherV2 / Gather of any 1/2/4/8-byte dtype; the indices are checked on
 * the host (their constant, or a copy from the GPU) so that an index out of
 * range gives the CPU kernel's error. */
ms_status kn_cuda__op_gather(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *p = in[0], *ix = in[1];
    size_t es = kn_cuda__move_size(p->dtype);
    if (es == 0) KN_CUDA_FALLBACK("dtype");
    if (ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) KN_CUDA_FALLBACK("indices dtype");
    int64_t axis = 0;
    ms_status st = MS_OK;
    if (s->v2) {
        rt_tensor *at = NULL;
        if ((st = kn_cuda__host_input(w, s, in, 2, &at)) != MS_OK) return st;
        int na = at->shape.rank > 1 ? -1 : kn_cuda__int_values(at, &axis, 1);
        rt_tensor_unref(at);
        if (na != 1) KN_CUDA_FALLBACK("axis");
    }
    kn_cuda_gather_shape g;
    rt_shape os;
    if (!kn_cuda__gather_shape(&p->shape, &ix->shape, axis, s->batch_dims, &g, &os))
        KN_CUDA_FALLBACK("shapes"); /* the CPU kernel gives the error */
    if (rt_shape_nelem(&os) == 0) KN_CUDA_FALLBACK("empty tensors");
    rt_tensor *hix = NULL;
    if ((st = kn_cuda__host_input(w, s, in, 1, &hix)) != MS_OK) return st;
    int bad = 0;
    for (int64_t i = 0; i < hix->nelem && !bad; i++) {
        int64_t v = hix->dtype == RT_DT_INT32 ? ((const int32_t *)hix->data)[i]
                                              : ((const int64_t *)hix->data)[i];
        bad = v < 0 || v >= g.n;
    }
    rt_tensor_unref(hix);
    if (bad) KN_CUDA_FALLBACK("an index out of range"); /* the CPU kernel gives the error */
    if ((st = kn_cuda__dev_tensor(be, w, node, p->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_gather(&g, p->data, es, ix->data, ix->dtype == RT_DT_INT64, out[0]->data,
                          w->stream);
}

/* Slice / StridedSlice as one strided copy of any 1/2/4/8-byte dtype. */
ms_status kn_cuda__op_slice(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                            kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    size_t es = kn_cuda__move_size(x->dtype);
    if (es == 0) KN_CUDA_FALLBACK("dtype");
    const int nv = s->kind == KN_CUDA_K_SSLICE ? 3 : 2;
    int64_t v[3][31];
    int cnt[3] = {-1, -1, -1};
    ms_status st = MS_OK;
    for (int i = 0; i < nv; i++) {
        rt_tensor *t = NULL;
        if ((st = kn_cuda__host_input(w, s, in, 1 + i, &t)) != MS_OK) return st;
        cnt[i] = t->shape.rank > 1 ? -1 : kn_cuda__int_values(t, v[i], 31);
        rt_tensor_unref(t);
        if (cnt[i] < 0) KN_CUDA_FALLBACK("begin / end / size / strides");
    }
    kn_cuda_strided p;
    rt_shape os;
    int ok = 0;
    if (s->kind == KN_CUDA_K_SSLICE)
        ok = cnt[0] == cnt[1] && cnt[0] == cnt[2] &&
             kn_cuda__strided_slice(&x->shape, v[0], v[1], v[2], cnt[0], s->masks, &p, &os);
    else
        ok = cnt[0] == cnt[1] && kn_cuda__slice(&x->shape, v[0], v[1], cnt[0], &p, &os);
    if (!ok) KN_CUDA_FALLBACK("begin / end / size / strides"); /* the CPU kernel gives the error */
    if (rt_shape_nelem(&os) <= 0) KN_CUDA_FALLBACK("empty tensors");
    if ((st = kn_cuda__dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_strided_copy(&p, x->data, es, out[0]->data, w->stream);
}

#endif /* DCMSERVE_HAVE_CUDA */
