/* kn_cuda_gemm.cu - cuBLASLt GEMM with fused epilogue (kn_cuda_gemm.cuh).
 *
 * Row-major Y = X . W is computed as the column-major product
 * Y^T (N x M) = W^T (N x K) . X^T (K x M): the row-major buffers are those
 * column-major matrices already, so no transpose is needed (MatMul's
 * transpose_a / transpose_b are cuBLASLt's TRANSB / TRANSA), and the bias
 * (one value per row of the column-major result, i.e. per output feature)
 * is cuBLASLt's bias vector. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "kn_cuda_gemm.cuh"
extern "C" {
#include "kn_cuda_precision.h"
}

/* ---- cuBLASLt by dlopen ---- */
struct lt_api {
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
    decltype(&cublasLtMatrixLayoutSetAttribute) layout_set;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
    cublasLtHandle_t handle;
};

static lt_api g_lt;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_err[384];

template <typename T> static bool sym(void *h, T *fn, const char *name) {
    *fn = (T)dlsym(h, name);
    if (*fn == NULL) snprintf(g_err, sizeof g_err, "libcublasLt.so.13 lacks %s", name);
    return *fn != NULL;
}

/* --precision: fp32 keeps every product in FP32 (no TF32); tf32 lets
 * cuBLASLt use TF32 tensor cores (FP32 operands, sums and results). */
static cublasComputeType_t compute_type(void) {
    return kn_cuda_precision_get() == KN_CUDA_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F;
}

static void lt_load(void) {
    void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(g_err, sizeof g_err, "cuBLASLt not loadable: %s", e ? e : "dlopen failed");
        return;
    }
    lt_api a = {};
    if (!sym(h, &a.create, "cublasLtCreate") || !sym(h, &a.desc_create, "cublasLtMatmulDescCreate") ||
        !sym(h, &a.desc_destroy, "cublasLtMatmulDescDestroy") ||
        !sym(h, &a.desc_set, "cublasLtMatmulDescSetAttribute") ||
        !sym(h, &a.layout_create, "cublasLtMatrixLayoutCreate") ||
        !sym(h, &a.layout_destroy, "cublasLtMatrixLayoutDestroy") ||
        !sym(h, &a.layout_set, "cublasLtMatrixLayoutSetAttribute") ||
        !sym(h, &a.pref_create, "cublasLtMatmulPreferenceCreate") ||
        !sym(h, &a.pref_destroy, "cublasLtMatmulPreferenceDestroy") ||
        !sym(h, &a.pref_set, "cublasLtMatmulPreferenceSetAttribute") ||
        !sym(h, &a.heuristic, "cublasLtMatmulAlgoGetHeuristic") || !sym(h, &a.matmul, "cublasLtMatmul"))
        return;
    cublasStatus_t s = a.create(&a.handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(g_err, sizeof g_err, "cublasLtCreate: status %d", (int)s);
        return;
    }
    g_lt = a;
}

/* A cuBLASLt matmul as MatMul and BatchMatMul plan it: the descriptor, the
 * layouts of A, B and C (D alike), the chosen algorithm and its workspace. */
typedef struct lt_plan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    uint64_t workspace;
} lt_plan;

/* Row-major Y[M, N] = op(X) . op(W) as the column-major product
 * Y^T = op(W)^T . op(X)^T: sets p's TRANSA / TRANSB (W is A: stored [N, K]
 * when trans_w; X is B: stored [K, M] when trans_x) and makes the layouts of
 * A, B and C as stored, before the op (column-major: a row-major [R, C] is
 * C x R with ld C). On failure *what names the step. */
static cublasStatus_t lt_operands(lt_plan *p, int64_t m, int64_t n, int64_t k, int trans_x,
                                  int trans_w, const char **what) {
    cublasOperation_t ta = trans_w ? CUBLAS_OP_T : CUBLAS_OP_N,
                      tb = trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    *what = "transa";
    if ((s = g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) != CUBLAS_STATUS_SUCCESS)
        return s;
    *what = "transb";
    if ((s = g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) != CUBLAS_STATUS_SUCCESS)
        return s;
    *what = "layout A";
    s = trans_w ? g_lt.layout_create(&p->la, CUDA_R_32F, (uint64_t)k, (uint64_t)n, k)
                : g_lt.layout_create(&p->la, CUDA_R_32F, (uint64_t)n, (uint64_t)k, n);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    *what = "layout B";
    s = trans_x ? g_lt.layout_create(&p->lb, CUDA_R_32F, (uint64_t)m, (uint64_t)k, m)
                : g_lt.layout_create(&p->lb, CUDA_R_32F, (uint64_t)k, (uint64_t)m, k);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    *what = "layout C";
    return g_lt.layout_create(&p->lc, CUDA_R_32F, (uint64_t)n, (uint64_t)m, n);
}

/* Chooses p's algorithm: the heuristic's first for p's descriptor and
 * layouts with at most 32 MiB of workspace and, where align is not NULL, at
 * least align[0..3] bytes of alignment of A, B, C and D. Returns the status
 * of the first call that failed, *what naming it (for the caller's message);
 * *found is 0 where no algorithm fits, else p->algo and p->workspace are set. */
static cublasStatus_t lt_pick(lt_plan *p, const uint32_t *align, int *found, const char **what) {
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res = {};
    uint64_t max_ws = 32u << 20;
    *found = 0;
    *what = "preference";
    cublasStatus_t s = g_lt.pref_create(&pref);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    *what = "workspace preference";
    s = g_lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws);
    if (s == CUBLAS_STATUS_SUCCESS && align != NULL) {
        static const cublasLtMatmulPreferenceAttributes_t attr[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        static const char *const name[4] = {"alignment of A", "alignment of B", "alignment of C",
                                            "alignment of D"};
        for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++) {
            *what = name[i];
            s = g_lt.pref_set(pref, attr[i], &align[i], sizeof align[i]);
        }
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        *what = "cublasLtMatmulAlgoGetHeuristic";
        s = g_lt.heuristic(g_lt.handle, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, found);
    }
    if (s == CUBLAS_STATUS_SUCCESS && *found >= 1) {
        p->algo = res.algo;
        p->workspace = res.workspaceSize;
    }
    g_lt.pref_destroy(pref);
    return s;
}

/* Runs p on stream: D = A . B in cuBLASLt's terms (alpha 1, beta 0), with
 * A = w, B = x and C = D = y. */
static cublasStatus_t lt_run(const lt_plan *p, const float *x, const float *w, float *y,
                             void *workspace, void *stream) {
    const float one = 1.f, zero = 0.f;
    return g_lt.matmul(g_lt.handle, p->desc, &one, w, p->la, x, p->lb, &zero, y, p->lc, y, p->lc,
                       &p->algo, workspace, p->workspace, (cudaStream_t)stream);
}

/* Destroys what p holds (any part may be NULL). */
static void lt_release(lt_plan *p) {
    if (p->lc) g_lt.layout_destroy(p->lc);
    if (p->lb) g_lt.layout_destroy(p->lb);
    if (p->la) g_lt.layout_destroy(p->la);
    if (p->desc) g_lt.desc_destroy(p->desc);
}

struct kn_cuda_gemm {
    int64_t m, n, k;
    int has_bias;
    lt_plan lt;
};

#define LT(call, what)                                                                             \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            st = ms_errf(MS_EDEVICE, "MatMul (cuBLASLt) %lldx%lldx%lld: %s: status %d",           \
                         (long long)m, (long long)n, (long long)k, what, (int)s_);                 \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

extern "C" ms_status kn_cuda_gemm_plan(int64_t m, int64_t n, int64_t k, int has_bias,
                                       kn_cuda_act act, kn_cuda_gemm **out) {
    return kn_cuda_gemm_plan_t(m, n, k, 0, 0, has_bias, act, out);
}

extern "C" ms_status kn_cuda_gemm_plan_t(int64_t m, int64_t n, int64_t k, int trans_x,
                                         int trans_w, int has_bias, kn_cuda_act act,
                                         kn_cuda_gemm **out) {
    *out = NULL;
    if (m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return ms_errf(MS_EINVAL, "MatMul (cuBLASLt): bad shape %lldx%lldx%lld", (long long)m,
                       (long long)n, (long long)k);
    if (act != KN_CUDA_ACT_NONE && act != KN_CUDA_ACT_RELU)
        return ms_errf(MS_ENOTSUP, "MatMul (cuBLASLt): activation %d is not fused", (int)act);
    pthread_once(&g_once, lt_load);
    if (g_lt.matmul == NULL) return ms_errf(MS_EDEVICE, "MatMul (cuBLASLt): %s", g_err);
    ms_status st = MS_OK;
    kn_cuda_gemm *g = (kn_cuda_gemm *)calloc(1, sizeof(*g));
    if (g == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    g->m = m, g->n = n, g->k = k, g->has_bias = has_bias;
    int found = 0;
    const char *what = NULL;
    cublasLtEpilogue_t epi = has_bias ? (act == KN_CUDA_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                                 : CUBLASLT_EPILOGUE_BIAS)
                                      : (act == KN_CUDA_ACT_RELU ? CUBLASLT_EPILOGUE_RELU
                                                                 : CUBLASLT_EPILOGUE_DEFAULT);
    cudaDataType_t bias_t = CUDA_R_32F;
    LT(g_lt.desc_create(&g->lt.desc, compute_type(), CUDA_R_32F), "cublasLtMatmulDescCreate");
    LT(g_lt.desc_set(g->lt.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    if (has_bias)
        LT(g_lt.desc_set(g->lt.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t),
           "bias type");
    LT(lt_operands(&g->lt, m, n, k, trans_x, trans_w, &what), what);
    LT(lt_pick(&g->lt, NULL, &found, &what), what);
    if (found < 1) {
        st = ms_errf(MS_ENOTSUP, "MatMul (cuBLASLt) %lldx%lldx%lld: no algorithm", (long long)m,
                     (long long)n, (long long)k);
        goto fail;
    }
    *out = g;
    return MS_OK;
fail:
    kn_cuda_gemm_free(g);
    return st;
}

extern "C" uint64_t kn_cuda_gemm_workspace(const kn_cuda_gemm *g) {
    return g->lt.workspace;
}

extern "C" ms_status kn_cuda_gemm_run(const kn_cuda_gemm *g, const float *x, const float *w,
                                      const float *bias, float *y, void *workspace, void *stream) {
    const int64_t m = g->m, n = g->n, k = g->k;
    ms_status st = MS_OK;
    if (g->has_bias) {
        if (bias == NULL) return ms_errf(MS_EINVAL, "MatMul (cuBLASLt): the plan needs a bias");
        /* the pointer is part of the descriptor: plans are per node, runs
         * of one plan are serialised by its caller */
        LT(g_lt.desc_set(g->lt.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
           "bias pointer");
    }
    if (g->lt.workspace > 0 && workspace == NULL)
        return ms_errf(MS_EINVAL, "MatMul (cuBLASLt): the plan needs %llu bytes of workspace",
                       (unsigned long long)g->lt.workspace);
    LT(lt_run(&g->lt, x, w, y, workspace, stream), "cublasLtMatmul");
    return MS_OK;
fail:
    return st;
}

extern "C" void kn_cuda_gemm_free(kn_cuda_gemm *g) {
    if (g == NULL) return;
    lt_release(&g->lt);
    free(g);
}

/* ---- BatchMatMul: strided-batched GEMM with transposes ----
 *
 * Row-major Y[b] (m x n) = op(X[b]) . op(W[b]) is the column-major
 * Y[b]^T (n x m) = op(W[b])^T . op(X[b])^T: cuBLASLt's A is W, its B is X.
 * W row-major k x n is column-major n x k (ld n), used as is; adjoint, it is
 * row-major n x k = column-major k x n (ld k), transposed by cuBLASLt. The
 * same for X: m x k row-major is k x m column-major (ld k); adjoint, k x m
 * row-major is m x k column-major (ld m), transposed. */
struct kn_cuda_bgemm {
    int64_t batch, m, n, k;
    lt_plan lt;
};

/* The alignment (bytes, a power of two up to 256, cuBLASLt's default
 * assumption) of float pointers that step by `stride` elements from a
 * 256-byte-aligned base. */
static uint32_t align_of(int64_t stride) {
    uint32_t a = 256;
    while (a > 4 && stride != 0 && ((uint64_t)stride * 4) % a != 0) a /= 2;
    return a;
}

static cublasStatus_t set_batch(cublasLtMatrixLayout_t l, int32_t count, int64_t stride) {
    cublasStatus_t s = g_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = g_lt.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return s;
}

#define BLT(call, what)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            st = ms_errf(                                                                          \
                MS_EDEVICE, "BatchMatMul (cuBLASLt) %lld x %lldx%lldx%lld: %s: status %d",         \
                (long long)batch, (long long)m, (long long)n, (long long)k, what, (int)s_);        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

extern "C" ms_status kn_cuda_bgemm_plan(int64_t batch, int64_t m, int64_t n, int64_t k, int adj_x,
                                        int adj_y, int64_t stride_x, int64_t stride_w,
                                        kn_cuda_bgemm **out) {
    *out = NULL;
    if (batch <= 0 || m <= 0 || n <= 0 || k <= 0 || batch > INT32_MAX || m > INT32_MAX ||
        n > INT32_MAX || k > INT32_MAX || stride_x < 0 || stride_w < 0)
        return ms_errf(MS_EINVAL, "BatchMatMul (cuBLASLt): bad shape %lld x %lldx%lldx%lld",
                       (long long)batch, (long long)m, (long long)n, (long long)k);
    pthread_once(&g_once, lt_load);
    if (g_lt.matmul == NULL) return ms_errf(MS_EDEVICE, "BatchMatMul (cuBLASLt): %s", g_err);
    ms_status st = MS_OK;
    kn_cuda_bgemm *g = (kn_cuda_bgemm *)calloc(1, sizeof(*g));
    if (g == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    g->batch = batch, g->m = m, g->n = n, g->k = k;
    int found = 0;
    const char *what = NULL;
    BLT(g_lt.desc_create(&g->lt.desc, compute_type(), CUDA_R_32F), "cublasLtMatmulDescCreate");
    BLT(lt_operands(&g->lt, m, n, k, adj_x, adj_y, &what), what);
    if (batch > 1) {
        BLT(set_batch(g->lt.la, (int32_t)batch, stride_w), "batch of A");
        BLT(set_batch(g->lt.lb, (int32_t)batch, stride_x), "batch of B");
        BLT(set_batch(g->lt.lc, (int32_t)batch, m * n), "batch of C");
    }
    {
        /* batches (or the caller's per-batch runs) start at multiples of the
         * strides: only algorithms that take that alignment */
        const uint32_t ay = align_of(m * n);
        const uint32_t align[4] = {align_of(stride_w), align_of(stride_x), ay, ay};
        BLT(lt_pick(&g->lt, align, &found, &what), what);
    }
    if (found < 1) {
        st = ms_errf(MS_ENOTSUP, "BatchMatMul (cuBLASLt) %lld x %lldx%lldx%lld: no algorithm",
                     (long long)batch, (long long)m, (long long)n, (long long)k);
        goto fail;
    }
    *out = g;
    return MS_OK;
fail:
    kn_cuda_bgemm_free(g);
    return st;
}

extern "C" uint64_t kn_cuda_bgemm_workspace(const kn_cuda_bgemm *g) {
    return g->lt.workspace;
}

extern "C" ms_status kn_cuda_bgemm_run(const kn_cuda_bgemm *g, const float *x, const float *w,
                                       float *y, void *workspace, void *stream) {
    const int64_t batch = g->batch, m = g->m, n = g->n, k = g->k;
    ms_status st = MS_OK;
    if (g->lt.workspace > 0 && workspace == NULL)
        return ms_errf(MS_EINVAL, "BatchMatMul (cuBLASLt): the plan needs %llu bytes of workspace",
                       (unsigned long long)g->lt.workspace);
    BLT(lt_run(&g->lt, x, w, y, workspace, stream), "cublasLtMatmul");
    return MS_OK;
fail:
    return st;
}

extern "C" void kn_cuda_bgemm_free(kn_cuda_bgemm *g) {
    if (g == NULL) return;
    lt_release(&g->lt);
    free(g);
}
