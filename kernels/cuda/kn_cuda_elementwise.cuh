/* kn_cuda_elementwise.cuh - own CUDA kernels for elementwise ops, bias +
 * activation and softmax (kn_cuda_elementwise.cu). FP32, contiguous tensors.
 * Every launcher checks its arguments, launches on `stream` and returns the
 * launch error named after the op (MS_EDEVICE). Arithmetic is the CPU
 * backend's float32 expression without contraction (no FMA), so Add / Sub /
 * Mul / Div / Maximum / Minimum / BiasAdd / Relu / Relu6 are bit-identical to
 * kernels/cpu; Sigmoid, Tanh and Softmax use CUDA's expf / tanhf (within
 * 2 ulp; the gpu tests check 1e-5 relative). */
#ifndef KN_CUDA_ELEMENTWISE_CUH
#define KN_CUDA_ELEMENTWISE_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

typedef enum kn_cuda_binop {
    KN_CUDA_ADD, KN_CUDA_SUB, KN_CUDA_MUL, KN_CUDA_DIV, KN_CUDA_MAX, KN_CUDA_MIN
} kn_cuda_binop;

typedef enum kn_cuda_act {
    KN_CUDA_ACT_NONE, KN_CUDA_ACT_RELU, KN_CUDA_ACT_RELU6, KN_CUDA_ACT_SIGMOID, KN_CUDA_ACT_TANH
} kn_cuda_act;

/* out[i] = a[i] op b[i % nb] for i < n (nb divides n: same shape, or b
 * broadcast over the leading dimensions). */
ms_status kn_cuda_binary(kn_cuda_binop op, const float *a, const float *b, int64_t nb, float *out,
                         int64_t n, void *stream);
/* General broadcasting (TensorFlow's rules), e.g. an instance norm's
 * x [N, H, W, C] - mean [N, 1, 1, C]: the output's dimensions (size-1 axes
 * dropped, runs of axes that index both operands alike merged) and each
 * operand's element stride per dimension, 0 where it is broadcast. */
#define KN_CUDA_BCAST_RANK 8
typedef struct kn_cuda_bcast_shape {
    int rank;
    int64_t dim[KN_CUDA_BCAST_RANK];
    int64_t sa[KN_CUDA_BCAST_RANK], sb[KN_CUDA_BCAST_RANK];
} kn_cuda_bcast_shape;
/* out[i] = a[ia(i)] op b[ib(i)] for the n = prod(dim) outputs. */
ms_status kn_cuda_binary_bcast(kn_cuda_binop op, const float *a, const float *b,
                               const kn_cuda_bcast_shape *s, float *out, int64_t n, void *stream);
/* out[r, c] = act(x[r, c] + bias[c]) over rows x cols (bias may be NULL). */
ms_status kn_cuda_bias_act(const float *x, const float *bias, kn_cuda_act act, float *out,
                           int64_t rows, int64_t cols, void *stream);
/* out[r, c] = act(x[r, c] * mul[c] + add[c]): inference batch-norm with the
 * per-channel coefficients the CPU computes (kernels/cpu FusedBatchNorm:
 * mul = scale / sqrtf(var + eps), add = offset - mean * scale / ...), two
 * roundings, no FMA: bit-identical to the CPU for act NONE / RELU / RELU6. */
ms_status kn_cuda_channel_affine(const float *x, const float *mul, const float *add,
                                 kn_cuda_act act, float *out, int64_t rows, int64_t cols,
                                 void *stream);
/* Unary ops with the CPU's float32 expressions (kernels/cpu
 * kn_cpu_elementwise.c): Square x * x, Rsqrt 1 / sqrtf(x), LeakyRelu
 * x > 0 ? x : x * alpha (round-to-nearest, no FMA: bit-identical); Elu
 * x < 0 ? expm1f(x) : x (CUDA's expm1f: 1e-5 relative). alpha is LeakyRelu's. */
typedef enum kn_cuda_unop {
    KN_CUDA_SQUARE, KN_CUDA_RSQRT, KN_CUDA_LEAKY_RELU, KN_CUDA_ELU
} kn_cuda_unop;

ms_status kn_cuda_unary(kn_cuda_unop op, const float *x, float alpha, float *out, int64_t n,
                        void *stream);

/* Softmax over the last dimension: rows x cols. */
ms_status kn_cuda_softmax(const float *x, float *out, int64_t rows, int64_t cols, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_ELEMENTWISE_CUH */
