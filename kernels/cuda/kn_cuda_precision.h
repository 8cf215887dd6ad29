/* kn_cuda_precision.h - the arithmetic the CUDA backend's matrix products and
 * convolutions use (--precision, docs/gpu.md), host-side only.
 *
 * fp32 (the default): cuBLASLt with CUBLAS_COMPUTE_32F and cuDNN with
 * CUDNN_FMA_MATH, no TF32 anywhere, so the GPU's answers stay within 1e-5
 * relative of the CPU's. tf32: cuBLASLt with CUBLAS_COMPUTE_32F_FAST_TF32
 * and cuDNN with CUDNN_TENSOR_OP_MATH, so Ampere and later GPUs may use their
 * TF32 tensor cores (10-bit mantissa products, FP32 sums and storage);
 * tensors stay FP32 and the other kernels are unchanged. fp16 (half-precision
 * tensors) is refused: the kernels and conversions for it do not exist. One
 * setting per process, read by plans made after it is set. */
#ifndef KN_CUDA_PRECISION_H
#define KN_CUDA_PRECISION_H

#include "ms_status.h"

typedef enum kn_cuda_precision { KN_CUDA_FP32 = 0, KN_CUDA_TF32 = 1 } kn_cuda_precision;

/* "fp32" / "tf32" (NULL or "": fp32). MS_ENOTSUP for "fp16", MS_EINVAL for
 * any other value; the message names the flag and the values. */
ms_status kn_cuda_precision_parse(const char *s, kn_cuda_precision *out);
/* The process's setting (default KN_CUDA_FP32); thread-safe. */
void kn_cuda_precision_set(kn_cuda_precision p);
kn_cuda_precision kn_cuda_precision_get(void);
/* "fp32" / "tf32". */
const char *kn_cuda_precision_name(kn_cuda_precision p);

#endif /* KN_CUDA_PRECISION_H */
