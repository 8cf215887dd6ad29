/* kn_cuda_gemm.cuh - MatMul / Dense on the GPU through cuBLASLt with the
 * bias + activation epilogue fused (kn_cuda_gemm.cu).
 *
 *   Y[M, N] = act(X[M, K] . W[K, N] + bias[N])      row-major FP32
 *
 * cuBLASLt is opened with dlopen (libcublasLt.so.13) at the first plan, so a
 * binary without it still starts. A plan is made once per shape at load /
 * warm-up (the algorithm from cuBLASLt's heuristic is kept in it), then run
 * per request on the caller's stream with the caller's workspace. Compute is
 * CUBLAS_COMPUTE_32F (no TF32): results differ from the CPU's only by the
 * summation order (checked to 1e-5 relative by check_cuda_ops);
 * CUBLAS_COMPUTE_32F_FAST_TF32 with --precision=tf32 (kn_cuda_precision.h),
 * for plans made after it is set. */
#ifndef KN_CUDA_GEMM_CUH
#define KN_CUDA_GEMM_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kn_cuda_elementwise.cuh"
#include "ms_status.h"

typedef struct kn_cuda_gemm kn_cuda_gemm;

/* act: NONE or RELU are fused into cuBLASLt's epilogue; others fail with
 * MS_ENOTSUP (run kn_cuda_bias_act after a plain GEMM instead). has_bias:
 * the plan adds bias[N]. */
ms_status kn_cuda_gemm_plan(int64_t m, int64_t n, int64_t k, int has_bias, kn_cuda_act act,
                            kn_cuda_gemm **out);
/* The same with TensorFlow's MatMul transpose_a / transpose_b: X stored as
 * [K, M] when trans_x, W stored as [N, K] when trans_w (Y stays [M, N]). */
ms_status kn_cuda_gemm_plan_t(int64_t m, int64_t n, int64_t k, int trans_x, int trans_w,
                              int has_bias, kn_cuda_act act, kn_cuda_gemm **out);
/* Workspace bytes the plan's algorithm needs (device memory, from the arena). */
uint64_t kn_cuda_gemm_workspace(const kn_cuda_gemm *g);
ms_status kn_cuda_gemm_run(const kn_cuda_gemm *g, const float *x, const float *w,
                           const float *bias, float *y, void *workspace, void *stream);
void kn_cuda_gemm_free(kn_cuda_gemm *g);

/* BatchMatMul: Y[b] (m x n) = op(X[b]) . op(W[b]) for b < batch, row-major
 * FP32, op the transpose when adj_x / adj_y (TensorFlow's adjoint of a real
 * matrix). X[b] starts at x + b * stride_x, W[b] at w + b * stride_w
 * (elements; stride_x = m * k and stride_w = k * n for packed batches), Y[b]
 * at y + b * m * n. One strided-batched cuBLASLt call per run (one plain
 * GEMM when batch is 1); CUBLAS_COMPUTE_32F, no TF32 (FAST_TF32 with
 * --precision=tf32): at fp32 1e-5 relative against the CPU's per-batch sgemm. Broadcasts that are not a stride are the
 * caller's (a loop of batch-1 plans: pass the strides its x / w offsets are
 * multiples of, so that the plan's algorithm takes their alignment; y's
 * offsets are multiples of m * n). The bases must be 256-byte aligned (device
 * tensors are). */
typedef struct kn_cuda_bgemm kn_cuda_bgemm;

ms_status kn_cuda_bgemm_plan(int64_t batch, int64_t m, int64_t n, int64_t k, int adj_x, int adj_y,
                             int64_t stride_x, int64_t stride_w, kn_cuda_bgemm **out);
uint64_t kn_cuda_bgemm_workspace(const kn_cuda_bgemm *g);
ms_status kn_cuda_bgemm_run(const kn_cuda_bgemm *g, const float *x, const float *w, float *y,
                            void *workspace, void *stream);
void kn_cuda_bgemm_free(kn_cuda_bgemm *g);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_GEMM_CUH */
