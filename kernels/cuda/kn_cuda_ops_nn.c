/* kn_cuda_ops_nn.c - the CUDA table's network layers: Softmax, FusedBatchNorm
 * (its coefficients uploaded at load), MaxPool / AvgPool and the 3-D pools.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* Batch-norm coefficients, as the CPU kernels compute them: the op's form
 * (mul = scale * (1 / sqrtf(var + eps))) or the fused conv's (mul = scale /
 * sqrtf(var + eps)). */
void kn_cuda__bn_coefs(int fused_form, const float *sc, const float *of, const float *mu,
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
static int bn_const(kn_cuda_op *s, int first, int64_t *C) {
    for (int i = 0; i < 4; i++) {
        const rt_tensor *t = first + i < KN_CUDA_MAX_CONST ? s->cin[first + i] : NULL;
        if (t == NULL || t->dtype != RT_DT_FLOAT || t->shape.rank != 1) return 0;
        if (i == 0)
            *C = t->nelem;
        else if (t->nelem != *C)
            return 0;
    }
    return 1;
}

ms_status kn_cuda__upload_bn(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s, int first,
                             int fused_form) {
    int64_t C = 0;
    if (!bn_const(s, first, &C)) return MS_OK; /* computed per request */
    float *coef = malloc((size_t)(2 * C + 1) * sizeof(float));
    if (coef == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    kn_cuda__bn_coefs(fused_form, s->cin[first]->data, s->cin[first + 1]->data,
                      s->cin[first + 2]->data, s->cin[first + 3]->data, s->eps, C, coef, coef + C);
    char what[300];
    snprintf(what, sizeof what, "the batch-norm coefficients of node '%s'", n->name);
    const float *parts[2] = {coef, coef + C};
    size_t cnt[2] = {(size_t)C, (size_t)C};
    float *dst[2] = {NULL, NULL};
    ms_status st = kn_cuda__upload_floats(w, what, parts, cnt, 2, &s->bnmem, dst);
    free(coef);
    s->bn_mul = dst[0];
    s->bn_add = dst[1];
    return st;
}

ms_status kn_cuda__op_softmax(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                              kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank < 1) KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t cols = x->shape.dim[x->shape.rank - 1];
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK || x->nelem == 0) return st;
    return kn_cuda_softmax(kn_cuda__fp(x), (float *)out[0]->data, x->nelem / cols, cols, w->stream);
}

ms_status kn_cuda__op_bn(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                         kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank != 4) KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t C = x->shape.dim[3];
    for (int i = 1; i < 5; i++)
        if (!kn_cuda__is_f32(in[i]) || in[i]->shape.rank != 1 || in[i]->nelem != C)
            KN_CUDA_FALLBACK("argument shapes");
    if (s->bn_mul == NULL || C == 0) KN_CUDA_FALLBACK("batch-norm arguments computed in the graph");
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK) return st;
    if (x->nelem > 0)
        st = kn_cuda_channel_affine(kn_cuda__fp(x), s->bn_mul, s->bn_add, KN_CUDA_ACT_NONE,
                                    (float *)out[0]->data, x->nelem / C, C, w->stream);
    for (int i = 1; i < node->nout && i < 6 && st == MS_OK; i++)
        out[i] = rt_tensor_ref(in[i % 2 ? 3 : 4]);
    return st;
}

ms_status kn_cuda__op_pool(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                           kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank != 4) KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    int64_t oh, ow, pt = s->pads[0], pb = s->pads[1], pl = s->pads[2], pr = s->pads[3];
    int mode = s->same ? 1 : s->explicit_pad ? -1 : 0;
    if (kn_cuda__spatial(H, s->kh, s->sh, 1, mode, &oh, &pt, &pb) != MS_OK ||
        kn_cuda__spatial(W, s->kw, s->sw, 1, mode, &ow, &pl, &pr) != MS_OK)
        KN_CUDA_FALLBACK("window larger than the input");
    if (pt > INT32_MAX / 4 || pl > INT32_MAX / 4) KN_CUDA_FALLBACK("sizes");
    if (N * H * W * C == 0 || oh <= 0 || ow <= 0 || N > INT32_MAX || H > INT32_MAX ||
        W > INT32_MAX || C > INT32_MAX)
        KN_CUDA_FALLBACK("sizes");
    rt_shape os = {.rank = 4, .dim = {N, oh, ow, C}};
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    kn_cuda_pool_shape ps = {.n = (int)N,
                             .h = (int)H,
                             .w = (int)W,
                             .c = (int)C,
                             .kh = (int)s->kh,
                             .kw = (int)s->kw,
                             .sh = (int)s->sh,
                             .sw = (int)s->sw,
                             .pad_top = (int)pt,
                             .pad_left = (int)pl,
                             .oh = (int)oh,
                             .ow = (int)ow};
    return s->kind == KN_CUDA_K_MAXPOOL
               ? kn_cuda_maxpool(&ps, kn_cuda__fp(x), (float *)out[0]->data, w->stream)
               : kn_cuda_avgpool(&ps, kn_cuda__fp(x), (float *)out[0]->data, w->stream);
}

ms_status kn_cuda__op_pool3d(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x) || x->shape.rank != 5) KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t o[3], lo[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        int64_t hi = 0;
        if (kn_cuda__spatial(x->shape.dim[1 + i], s->k3[i], s->s3[i], 1, s->same, &o[i], &lo[i],
                             &hi) != MS_OK)
            KN_CUDA_FALLBACK("window larger than the input");
        if (s->k3[i] > INT32_MAX || s->s3[i] > INT32_MAX || o[i] <= 0) KN_CUDA_FALLBACK("sizes");
    }
    for (int i = 0; i < 5; i++)
        if (x->shape.dim[i] <= 0 || x->shape.dim[i] > INT32_MAX) KN_CUDA_FALLBACK("sizes");
    rt_shape os = {.rank = 5, .dim = {x->shape.dim[0], o[0], o[1], o[2], x->shape.dim[4]}};
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    kn_cuda_pool3_shape ps = {.n = (int)x->shape.dim[0],
                              .d = (int)x->shape.dim[1],
                              .h = (int)x->shape.dim[2],
                              .w = (int)x->shape.dim[3],
                              .c = (int)x->shape.dim[4],
                              .kd = (int)s->k3[0],
                              .kh = (int)s->k3[1],
                              .kw = (int)s->k3[2],
                              .sd = (int)s->s3[0],
                              .sh = (int)s->s3[1],
                              .sw = (int)s->s3[2],
                              .pad_d = (int)lo[0],
                              .pad_h = (int)lo[1],
                              .pad_w = (int)lo[2],
                              .od = (int)o[0],
                              .oh = (int)o[1],
                              .ow = (int)o[2]};
    return kn_cuda_pool3d(&ps, s->binop == KN_CUDA_MAX, kn_cuda__fp(x), (float *)out[0]->data,
                          w->stream);
}

#endif /* DCMSERVE_HAVE_CUDA */
