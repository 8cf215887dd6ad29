/* kn_cuda_ops_gemm.c - the CUDA table's matrix products: MatMul / _FusedMatMul
 * and BatchMatMul / V2 / V3 through cuBLASLt.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

ms_status kn_cuda__op_matmul(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *a = in[0], *b = in[1];
    if (!kn_cuda__is_f32(a) || !kn_cuda__is_f32(b) || a->shape.rank != 2 || b->shape.rank != 2 ||
        a->shape.dim[s->adj_x ? 0 : 1] != b->shape.dim[s->adj_y ? 1 : 0])
        KN_CUDA_FALLBACK("shapes or dtypes");
    /* transpose_a / transpose_b (kept in adj_x / adj_y): a is [K, M], b [N, K] */
    int64_t M = a->shape.dim[s->adj_x ? 1 : 0], K = a->shape.dim[s->adj_x ? 0 : 1],
            N = b->shape.dim[s->adj_y ? 0 : 1];
    const rt_tensor *bias = s->fuse_bias ? in[2] : NULL, *add = s->fuse_add ? in[3] : NULL;
    if (bias && (!kn_cuda__is_f32(bias) || bias->nelem != N)) KN_CUDA_FALLBACK("bias shape");
    if (add && (!kn_cuda__is_f32(add) || add->nelem != M * N)) KN_CUDA_FALLBACK("addend shape");
    rt_shape os = {.rank = 2, .dim = {M, N}};
    if (M == 0 || N == 0 || K == 0) KN_CUDA_FALLBACK("empty operands");
    int fuse_relu = bias && !add && s->act == KN_CUDA_ACT_RELU;
    kn_cuda_gemm *plan = NULL;
    ms_status st = MS_OK;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->ngemm; i++)
        if (s->gemm[i].m == M && s->gemm[i].n == N && s->gemm[i].k == K) plan = s->gemm[i].plan;
    if (plan == NULL && s->ngemm < KN_CUDA_MAX_PLANS) {
        st = kn_cuda_gemm_plan_t(M, N, K, s->adj_x, s->adj_y, bias && !add,
                                 fuse_relu ? KN_CUDA_ACT_RELU : KN_CUDA_ACT_NONE, &plan);
        if (st == MS_OK) s->gemm[s->ngemm++] = (kn_cuda_gemm_entry){M, N, K, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) KN_CUDA_FALLBACK("more shapes than the plan cache holds");
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    kn_cuda_block *ws = NULL;
    uint64_t wsb = kn_cuda_gemm_workspace(plan);
    if (wsb > 0 && (st = kn_cuda__tmp_get(be, w, wsb, "a cuBLASLt workspace", &ws)) != MS_OK)
        return st;
    float *y = (float *)out[0]->data;
    st = kn_cuda_gemm_run(plan, kn_cuda__fp(a), kn_cuda__fp(b),
                          bias && !add ? kn_cuda__fp(bias) : NULL, y, ws ? ws->ptr : NULL,
                          w->stream);
    kn_cuda__block_put(ws);
    if (st != MS_OK) return st;
    if (bias && !add) /* bias (and ReLU) done by cuBLASLt */
        return fuse_relu ? MS_OK : kn_cuda__run_act(s, y, M * N, s->act, w);
    return kn_cuda__epilogue(s, w, y, M, N, bias ? kn_cuda__fp(bias) : NULL,
                             add ? kn_cuda__fp(add) : NULL, 0);
}

/* BatchMatMul / V2 / V3 through cuBLASLt: equal batches as one
 * strided-batched GEMM, a broadcast y as one GEMM over x's rows, other
 * broadcasts as one GEMM per output batch. */
ms_status kn_cuda__op_bmm(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                          kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *a = in[0], *b = in[1];
    if (!kn_cuda__is_f32(a) || !kn_cuda__is_f32(b)) KN_CUDA_FALLBACK("not float32");
    kn_cuda_bmm g;
    if (!kn_cuda__bmm(&a->shape, &b->shape, s->adj_x, s->adj_y, s->same_batch, &g))
        KN_CUDA_FALLBACK("shapes (or an empty product)"); /* the CPU kernel gives the error */
    int64_t key[6] = {g.mode == KN_CUDA_BMM_STRIDED ? g.batch : 1,
                      g.mode == KN_CUDA_BMM_FLAT ? g.batch * g.m : g.m,
                      g.n,
                      g.k,
                      g.mode == KN_CUDA_BMM_STRIDED ? g.stride_x
                      : g.mode == KN_CUDA_BMM_LOOP  ? g.m * g.k
                                                    : 0,
                      g.mode == KN_CUDA_BMM_STRIDED ? g.stride_w
                      : g.mode == KN_CUDA_BMM_LOOP  ? g.k * g.n
                                                    : 0};
    if (key[0] > INT32_MAX || key[1] > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
        KN_CUDA_FALLBACK("sizes beyond cuBLASLt's int");
    kn_cuda_bgemm *plan = NULL;
    ms_status st = MS_OK;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nbgemm; i++)
        if (memcmp(s->bgemm[i].key, key, sizeof key) == 0) plan = s->bgemm[i].plan;
    if (plan == NULL && s->nbgemm < KN_CUDA_MAX_PLANS) {
        st =
            kn_cuda_bgemm_plan(key[0], key[1], g.n, g.k, s->adj_x, s->adj_y, key[4], key[5], &plan);
        if (st == MS_OK) {
            memcpy(s->bgemm[s->nbgemm].key, key, sizeof key);
            s->bgemm[s->nbgemm++].plan = plan;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) KN_CUDA_FALLBACK("more shapes than the plan cache holds");
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &g.out, &out[0])) != MS_OK) return st;
    kn_cuda_block *ws = NULL;
    uint64_t wsb = kn_cuda_bgemm_workspace(plan);
    if (wsb > 0 && (st = kn_cuda__block_get(be, w, wsb, "a cuBLASLt workspace", &ws)) != MS_OK)
        goto done;
    float *y = (float *)out[0]->data;
    if (g.mode != KN_CUDA_BMM_LOOP) {
        st = kn_cuda_bgemm_run(plan, kn_cuda__fp(a), kn_cuda__fp(b), y, ws ? ws->ptr : NULL,
                               w->stream);
    } else {
        for (int64_t i = 0; i < g.batch && st == MS_OK; i++) {
            int64_t ox = 0, ow = 0;
            kn_cuda__bmm_offsets(&g, i, &ox, &ow);
            st = kn_cuda_bgemm_run(plan, kn_cuda__fp(a) + ox, kn_cuda__fp(b) + ow,
                                   y + i * g.m * g.n, ws ? ws->ptr : NULL, w->stream);
        }
    }
done:
    kn_cuda__block_put(ws);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

#endif /* DCMSERVE_HAVE_CUDA */
