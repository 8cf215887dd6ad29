/* kn_cuda_ops_elementwise.c - the CUDA table's elementwise ops: the binary ops (Add, Sub, Mul,
 * RealDiv, Maximum, Minimum), the activations, BiasAdd, the unary ops (Square, Rsqrt, LeakyRelu,
 * Elu), and the bias / addend / activation epilogue of GEMMs and convolutions. Part of the CUDA
 * backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

ms_status kn_cuda__run_act(kn_cuda_op *s, float *y, int64_t n, kn_cuda_act act, kn_cuda_worker *w) {
    (void)s;
    if (act == KN_CUDA_ACT_NONE || n == 0) return MS_OK;
    return kn_cuda_bias_act(y, NULL, act, y, 1, n, w->stream);
}

ms_status kn_cuda__op_binary(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    if (!kn_cuda__is_f32(in[0]) || !kn_cuda__is_f32(in[1])) KN_CUDA_FALLBACK("not float32");
    int64_t nb = 0;
    int swap = 0;
    if (!kn_cuda__bcast(&in[0]->shape, &in[1]->shape, s->commutative, &nb, &swap)) {
        rt_shape os;
        kn_cuda_bcast_shape bs;
        if (!kn_cuda__bcast_general(&in[0]->shape, &in[1]->shape, &os, &bs))
            KN_CUDA_FALLBACK("shapes that do not broadcast");
        ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0]);
        if (st != MS_OK) return st;
        return kn_cuda_binary_bcast(s->binop, kn_cuda__fp(in[0]), kn_cuda__fp(in[1]), &bs,
                                    (float *)out[0]->data, out[0]->nelem, w->stream);
    }
    const rt_tensor *a = swap ? in[1] : in[0], *b = swap ? in[0] : in[1];
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &a->shape, &out[0]);
    if (st != MS_OK) return st;
    return kn_cuda_binary(s->binop, kn_cuda__fp(a), kn_cuda__fp(b), nb, (float *)out[0]->data,
                          a->nelem, w->stream);
}

ms_status kn_cuda__op_act(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                          kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    if (!kn_cuda__is_f32(in[0])) KN_CUDA_FALLBACK("not float32");
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &in[0]->shape, &out[0]);
    if (st != MS_OK || in[0]->nelem == 0) return st;
    return kn_cuda_bias_act(kn_cuda__fp(in[0]), NULL, s->act, (float *)out[0]->data, 1,
                            in[0]->nelem, w->stream);
}

ms_status kn_cuda__op_bias(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                           kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0], *b = in[1];
    if (!kn_cuda__is_f32(x) || !kn_cuda__is_f32(b) || x->shape.rank < 1 || b->shape.rank != 1 ||
        b->nelem != x->shape.dim[x->shape.rank - 1] || b->nelem == 0)
        KN_CUDA_FALLBACK("shapes or dtypes");
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st != MS_OK || x->nelem == 0) return st;
    return kn_cuda_bias_act(kn_cuda__fp(x), kn_cuda__fp(b), KN_CUDA_ACT_NONE, (float *)out[0]->data,
                            x->nelem / b->nelem, b->nelem, w->stream);
}

/* Bias (+ addend) (+ activation) after a GEMM or convolution, in place on
 * y (rows x cols): the CPU's order, act(y + bias + addend). */
ms_status kn_cuda__epilogue(kn_cuda_op *s, kn_cuda_worker *w, float *y, int64_t rows, int64_t cols,
                            const float *bias, const float *addend, int act_done) {
    ms_status st = MS_OK;
    int64_t n = rows * cols;
    if (n == 0) return MS_OK;
    kn_cuda_act act = act_done ? KN_CUDA_ACT_NONE : s->act;
    if (bias != NULL)
        st = kn_cuda_bias_act(y, bias, addend ? KN_CUDA_ACT_NONE : act, y, rows, cols, w->stream);
    if (st == MS_OK && addend != NULL) {
        st = kn_cuda_binary(KN_CUDA_ADD, y, addend, n, y, n, w->stream);
        if (st == MS_OK) st = kn_cuda__run_act(s, y, n, act, w);
    } else if (st == MS_OK && bias == NULL) {
        st = kn_cuda__run_act(s, y, n, act, w);
    }
    return st;
}

ms_status kn_cuda__op_unary(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                            kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    if (!kn_cuda__is_f32(in[0])) KN_CUDA_FALLBACK("not float32");
    ms_status st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &in[0]->shape, &out[0]);
    if (st != MS_OK || in[0]->nelem == 0) return st;
    return kn_cuda_unary(s->unop, kn_cuda__fp(in[0]), s->alpha, (float *)out[0]->data, in[0]->nelem,
                         w->stream);
}

#endif /* DCMSERVE_HAVE_CUDA */
