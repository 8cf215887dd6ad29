/* kn_cuda_ops_reduce.c - the CUDA table's reductions: Sum, Mean, Max, Min, Prod
 * over any axes.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* Sum / Mean / Max / Min / Prod over any axes (kn_cuda_reduce). */
ms_status kn_cuda__op_reduce(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0];
    if (!kn_cuda__is_f32(x)) KN_CUDA_FALLBACK("not float32");
    if (x->nelem == 0) KN_CUDA_FALLBACK("empty tensors");
    rt_tensor *ax = NULL;
    ms_status st = kn_cuda__host_input(w, s, in, 1, &ax);
    if (st != MS_OK) return st;
    int64_t v[64];
    int n = ax->shape.rank > 1 ? -1 : kn_cuda__int_values(ax, v, 64), red[RT_MAX_RANK] = {0};
    rt_tensor_unref(ax);
    const int rank = x->shape.rank;
    for (int i = 0; i < n; i++) {
        int64_t a = v[i] < 0 ? v[i] + rank : v[i];
        if (a < 0 || a >= rank)
            n = -1;
        else
            red[a] = 1;
    }
    if (n < 0) KN_CUDA_FALLBACK("reduction_indices"); /* the CPU kernel gives the error */
    rt_shape os = {.rank = 0};
    for (int d = 0; d < rank; d++)
        if (!red[d])
            os.dim[os.rank++] = x->shape.dim[d];
        else if (s->keep_dims)
            os.dim[os.rank++] = 1;
    kn_cuda_reduce_shape p;
    kn_cuda__reduce_plan(&x->shape, red, &p);
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    return kn_cuda_reduce(s->redop, &p, kn_cuda__fp(x), (float *)out[0]->data, w->stream);
}

#endif /* DCMSERVE_HAVE_CUDA */
