/* kn_cuda_conv.cuh - 2-D convolution on the GPU through cuDNN
 * (kn_cuda_conv.cu): Conv2D and, with groups = input channels,
 * DepthwiseConv2dNative; NHWC FP32 activations, filters in cuDNN's KRSC
 * (OHWI) order, converted once from TensorFlow's layouts at load.
 *
 * cuDNN (libcudnn.so.9) is opened with dlopen at the first plan. A plan is
 * made once per shape: descriptors, the forward algorithm (cuDNN's
 * heuristic, kept in the plan, not searched per request) and its workspace
 * size. Math is CUDNN_FMA_MATH (FP32, no TF32): results differ from the CPU
 * by summation order and FMA rounding only (1e-5 relative in check_cuda_ops);
 * CUDNN_TENSOR_OP_MATH (TF32 allowed) with --precision=tf32
 * (kn_cuda_precision.h).
 * cuDNN pads symmetrically: TensorFlow SAME padding whose top/left and
 * bottom/right differ is refused (MS_ENOTSUP) so the node stays on the CPU.
 * Runs of one plan must not overlap (its cuDNN handle takes the stream). */
#ifndef KN_CUDA_CONV_CUH
#define KN_CUDA_CONV_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

typedef struct kn_cuda_conv_shape {
    int n, h, w, c;   /* input, NHWC */
    int kh, kw, oc;   /* filter size and output channels (depthwise: c * multiplier) */
    int groups;       /* 1, or c for a depthwise convolution */
    int sh, sw;       /* strides */
    int dh, dw;       /* dilations (1 = none) */
    int pad_top, pad_bottom, pad_left, pad_right;
} kn_cuda_conv_shape;

typedef struct kn_cuda_conv kn_cuda_conv;

ms_status kn_cuda_conv_plan(const kn_cuda_conv_shape *s, kn_cuda_conv **out);
/* Output height / width of the plan. */
void kn_cuda_conv_out_hw(const kn_cuda_conv *p, int *oh, int *ow);
uint64_t kn_cuda_conv_workspace(const kn_cuda_conv *p);
/* y (n, oh, ow, oc) = conv(x, w_ohwi) on `stream`; workspace from the caller. */
ms_status kn_cuda_conv_run(const kn_cuda_conv *p, const float *x, const float *w_ohwi, float *y,
                           void *workspace, void *stream);
void kn_cuda_conv_free(kn_cuda_conv *p);

/* Host-side filter conversion to OHWI: Conv2D's HWIO [kh, kw, ci, oc], or
 * (depthwise = 1) DepthwiseConv2dNative's [kh, kw, c, m] (output channel
 * c * m + j, one input channel per group). */
void kn_cuda_conv_filter_from_tf(const float *tf, int kh, int kw, int ci, int co, int depthwise,
                                 float *ohwi);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_CONV_CUH */
