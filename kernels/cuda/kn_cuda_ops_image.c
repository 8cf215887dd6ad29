/* kn_cuda_ops_image.c - the CUDA table's image ops: ResizeBilinear,
 * ResizeNearestNeighbor and the DICOM pixel transform (_DcmPixelTransform).
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* ResizeNearestNeighbor of the dtypes the CPU kernel takes. */
ms_status kn_cuda__op_nearest(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                              kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    static const rt_dtype ok[] = {RT_DT_FLOAT, RT_DT_DOUBLE,  RT_DT_INT8,  RT_DT_UINT8,
                                  RT_DT_INT16, RT_DT_UINT16,  RT_DT_INT32, RT_DT_INT64,
                                  RT_DT_HALF,  RT_DT_BFLOAT16};
    int known = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        known |= x->dtype == ok[i];
    if (!known || x->shape.rank != 4) KN_CUDA_FALLBACK("shapes or dtypes");
    rt_tensor *sz = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &sz);
    if (st != MS_OK) return st;
    int64_t v[2];
    int n = sz->dtype == RT_DT_INT32 && sz->shape.rank == 1 ? kn_cuda__int_values(sz, v, 2) : -1;
    rt_tensor_unref(sz);
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (n != 2 || v[0] <= 0 || v[1] <= 0 || N <= 0 || H <= 0 || W <= 0 || C <= 0 || H > INT32_MAX ||
        W > INT32_MAX)
        KN_CUDA_FALLBACK("size"); /* the CPU kernel gives the error */
    rt_shape os = {.rank = 4, .dim = {N, v[0], v[1], C}};
    if ((st = kn_cuda__dev_tensor(be, w, node, x->dtype, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_resize_nearest(x->data, rt_dtype_size(x->dtype), N, H, W, C, v[0], v[1],
                                  s->align_corners, s->half_pixel, out[0]->data, w->stream);
}

ms_status kn_cuda__op_resize(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank != 4) KN_CUDA_FALLBACK("shapes or dtypes");
    rt_tensor *sz = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &sz);
    if (st != MS_OK) return st;
    int64_t v[2];
    int n = kn_cuda__int_values(sz, v, 2);
    rt_tensor_unref(sz);
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    if (n != 2 || v[0] <= 0 || v[1] <= 0 || v[0] > INT32_MAX || v[1] > INT32_MAX ||
        N * H * W * C == 0 || N > INT32_MAX || H > INT32_MAX || W > INT32_MAX || C > INT32_MAX)
        KN_CUDA_FALLBACK("size");
    rt_shape os = {.rank = 4, .dim = {N, v[0], v[1], C}};
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_resize_bilinear(kn_cuda__fp(x), (int)N, (int)H, (int)W, (int)C, (int)v[0],
                                   (int)v[1], s->align_corners, s->half_pixel,
                                   (float *)out[0]->data, w->stream);
}

/* _DcmPixelTransform: the raw pixels and per-file params are on the GPU
 * (the planner's copies from _DcmDecodeRaw); one kernel gives the model's
 * input. */
ms_status kn_cuda__op_dcmxform(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                               kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    kn_dcm_xform_geom g;
    if (kn_dcm_xform_geometry(node, &s->dcm, in[0], in[1], NULL, &g) != MS_OK)
        KN_CUDA_FALLBACK("raw pixel layout"); /* the CPU kernel gives the error */
    rt_shape os = g.nchw ? rt_shape_make(4, (int64_t[]){g.n, g.C, g.oh, g.ow})
                         : rt_shape_make(4, (int64_t[]){g.n, g.oh, g.ow, g.C});
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    return kn_cuda_dicom_xform(in[0]->data, (const kn_dcm_xform_file *)in[1]->data, &g,
                               (float *)out[0]->data, w->stream);
}

#endif /* DCMSERVE_HAVE_CUDA */
