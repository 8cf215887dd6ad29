/* kn_cuda_convnd.cuh - N-d convolutions on the GPU through cuDNN's Nd
 * descriptors (kn_cuda_convnd.cu): Conv3D (NDHWC, forward) and the
 * transposed convolutions Conv2DBackpropInput (NHWC) and 3-D (NDHWC) as
 * cuDNN's backward-data convolution. FP32, filters in cuDNN's K[D]RSC
 * order (kn_cuda_conv_filter_from_tf with the spatial sizes flattened).
 *
 * cuDNN (libcudnn.so.9, the same library as kn_cuda_conv) is opened with
 * dlopen at the first plan. A plan is made once per shape: descriptors,
 * the algorithm from cuDNN's heuristic (forward or backward-data _v7, kept
 * in the plan) and its workspace size. Math is CUDNN_FMA_MATH (no TF32;
 * CUDNN_TENSOR_OP_MATH with --precision=tf32, kn_cuda_precision.h):
 * results differ from the CPU by summation order only (1e-5 relative in
 * check_cuda_ops). Padding is symmetric (cuDNN's); a TensorFlow SAME
 * padding split unevenly is refused (MS_ENOTSUP) and the caller runs the
 * CPU kernel. Runs of one plan must not overlap (its handle takes the
 * stream). */
#ifndef KN_CUDA_CONVND_CUH
#define KN_CUDA_CONVND_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

/* The geometry of the forward convolution y = conv(x, w); a backward-data
 * plan computes dx (shape of x) from dy (shape of y) with the same filter. */
typedef struct kn_cuda_convnd_shape {
    int rank;          /* spatial rank: 2 (H, W) or 3 (D, H, W) */
    int backward_data; /* 0: forward; 1: transposed (backward data) */
    int n, c, oc;      /* batch, channels of x, channels of y */
    int in[3];         /* x's spatial sizes */
    int k[3];          /* filter's spatial sizes */
    int stride[3], dil[3];
    int pad_lo[3], pad_hi[3]; /* must be equal per axis */
} kn_cuda_convnd_shape;

typedef struct kn_cuda_convnd kn_cuda_convnd;

ms_status kn_cuda_convnd_plan(const kn_cuda_convnd_shape *s, kn_cuda_convnd **out);
/* y's spatial sizes (the forward output) of the plan's geometry. */
void kn_cuda_convnd_out(const kn_cuda_convnd *p, int out[3]);
uint64_t kn_cuda_convnd_workspace(const kn_cuda_convnd *p);
/* Forward: src = x, dst = y. Backward data: src = dy, dst = dx. w is the
 * filter in K[D]RSC order (K = oc, C = c). Workspace from the caller. */
ms_status kn_cuda_convnd_run(const kn_cuda_convnd *p, const float *src, const float *w, float *dst,
                             void *workspace, void *stream);
void kn_cuda_convnd_free(kn_cuda_convnd *p);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_CONVND_CUH */
