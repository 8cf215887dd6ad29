/* kn_cuda_ops_shape.c - the CUDA table's data-movement ops: ConcatV2, Transpose,
 * Pad / PadV2 and Reshape.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

ms_status kn_cuda__op_concat(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    int k = node->nin - 1;
    if (k < 1 || k > 64) KN_CUDA_FALLBACK("number of inputs");
    rt_tensor *ax = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, k, &ax);
    if (st != MS_OK) return st;
    int64_t axis = 0;
    int na = kn_cuda__int_values(ax, &axis, 1);
    rt_tensor_unref(ax);
    const rt_shape *s0 = &in[0]->shape;
    if (na != 1 || s0->rank < 1) KN_CUDA_FALLBACK("axis");
    if (axis < 0) axis += s0->rank;
    if (axis < 0 || axis >= s0->rank) KN_CUDA_FALLBACK("axis");
    const float *srcs[64];
    int64_t inner[64], outer = 1, total = 0;
    for (int d = 0; d < axis; d++)
        outer *= s0->dim[d];
    rt_shape os = *s0;
    for (int i = 0; i < k; i++) {
        const rt_shape *si = &in[i]->shape;
        if (!kn_cuda__is_f32(in[i]) || si->rank != s0->rank) KN_CUDA_FALLBACK("dtypes or ranks");
        for (int d = 0; d < si->rank; d++)
            if (d != axis && si->dim[d] != s0->dim[d]) KN_CUDA_FALLBACK("shapes");
        inner[i] = in[i]->nelem / (outer ? outer : 1);
        if (inner[i] <= 0 || outer == 0) KN_CUDA_FALLBACK("empty inputs");
        total += si->dim[axis];
        srcs[i] = kn_cuda__fp(in[i]);
    }
    os.dim[axis] = total;
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_concat(srcs, inner, k, outer, (float *)out[0]->data, w->stream);
}

ms_status kn_cuda__op_transpose(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                                kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    /* a copy: any 4-byte dtype moves as float bits */
    if (x->dtype == RT_DT_STRING || rt_dtype_size(x->dtype) != 4 || x->shape.rank > 8 ||
        x->shape.rank < 1 || x->nelem == 0)
        KN_CUDA_FALLBACK("dtype or rank");
    rt_tensor *pt = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &pt);
    if (st != MS_OK) return st;
    int64_t v[8];
    int n = kn_cuda__int_values(pt, v, 8), perm[8], seen = 0;
    rt_tensor_unref(pt);
    if (n != x->shape.rank) KN_CUDA_FALLBACK("perm");
    rt_shape os = {.rank = n};
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || (seen & (1 << v[i]))) KN_CUDA_FALLBACK("perm");
        seen |= 1 << v[i];
        perm[i] = (int)v[i];
        os.dim[i] = x->shape.dim[v[i]];
    }
    if ((st = kn_cuda__dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_transpose(kn_cuda__fp(x), n, x->shape.dim, perm, (float *)out[0]->data,
                             w->stream);
}

ms_status kn_cuda__op_pad(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                          kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank != 4 || x->nelem == 0)
        KN_CUDA_FALLBACK("not a 4-D float tensor");
    rt_tensor *pt = NULL, *cv = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &pt);
    if (st != MS_OK) return st;
    int64_t p[8];
    int n = kn_cuda__int_values(pt, p, 8);
    rt_tensor_unref(pt);
    float value = 0.0f;
    if (node->nin > 2) {
        if ((st = kn_cuda__host_input(w, s, in, 2, &cv)) != MS_OK) return st;
        int ok = kn_cuda__is_f32(cv) && cv->nelem == 1;
        if (ok) value = kn_cuda__fp(cv)[0];
        rt_tensor_unref(cv);
        if (!ok) KN_CUDA_FALLBACK("constant_values");
    }
    if (n != 8 || p[0] || p[1] || p[6] || p[7]) KN_CUDA_FALLBACK("padding of batch or channels");
    for (int i = 2; i < 6; i++)
        if (p[i] < 0 || p[i] > INT32_MAX / 4) KN_CUDA_FALLBACK("negative padding");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (N > INT32_MAX || H > INT32_MAX || W > INT32_MAX || C > INT32_MAX) KN_CUDA_FALLBACK("sizes");
    rt_shape os = {.rank = 4, .dim = {N, H + p[2] + p[3], W + p[4] + p[5], C}};
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_pad_nhwc(kn_cuda__fp(x), (int)N, (int)H, (int)W, (int)C, (int)p[2], (int)p[3],
                            (int)p[4], (int)p[5], value, (float *)out[0]->data, w->stream);
}

ms_status kn_cuda__op_reshape(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                              kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (x->dtype == RT_DT_STRING) KN_CUDA_FALLBACK("strings");
    rt_tensor *sh = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &sh);
    if (st != MS_OK) return st;
    int64_t v[RT_MAX_RANK];
    int n = kn_cuda__int_values(sh, v, RT_MAX_RANK), unknown = -1;
    rt_tensor_unref(sh);
    if (n < 0) KN_CUDA_FALLBACK("shape");
    rt_shape os = {.rank = n};
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] == -1 && unknown < 0)
            unknown = i;
        else if (v[i] < 0)
            KN_CUDA_FALLBACK("shape");
        else
            known *= v[i];
        os.dim[i] = v[i];
    }
    if (unknown >= 0) {
        if (known == 0 || x->nelem % known != 0) KN_CUDA_FALLBACK("shape");
        os.dim[unknown] = x->nelem / known;
    }
    if (rt_shape_nelem(&os) != x->nelem)
        KN_CUDA_FALLBACK("shape"); /* the CPU kernel gives the error */
    return rt_tensor_view(x, &os, &out[0]);
}

#endif /* DCMSERVE_HAVE_CUDA */
