/* kn_cuda_nn.cuh - own CUDA kernels for pooling, the spatial mean and
 * concatenation (kn_cuda_nn.cu); FP32, NHWC.
 *
 *   MaxPool   exact (the maximum of the same floats); padded positions are
 *             skipped, as TensorFlow
 *   AvgPool   sum in window order divided by the count of in-image
 *             positions (TensorFlow's SAME semantics): 1e-5 relative
 *   Mean      over H and W (global average pooling): sum in row order, one
 *             division: 1e-5 relative
 *   Concat    along any axis (outer x inner blocks): a copy, exact
 *   ResizeBilinear  the CPU kernel's expressions: exact
 *   Transpose, Pad  copies: exact
 *   MaxPool3D exact; AvgPool3D sums in window order (d, h, w) and scales by
 *             1 / count as kernels/cpu/kn_cpu_conv3d.c: exact against that
 *             kernel, 1e-5 relative in check_cuda_ops */
#ifndef KN_CUDA_NN_CUH
#define KN_CUDA_NN_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

typedef struct kn_cuda_pool_shape {
    int n, h, w, c;
    int kh, kw, sh, sw;
    int pad_top, pad_left; /* bottom/right padding follows from oh, ow */
    int oh, ow;
} kn_cuda_pool_shape;

ms_status kn_cuda_maxpool(const kn_cuda_pool_shape *s, const float *x, float *y, void *stream);
ms_status kn_cuda_avgpool(const kn_cuda_pool_shape *s, const float *x, float *y, void *stream);
/* y[n, c] = mean over h, w of x[n, h, w, c]. */
ms_status kn_cuda_spatial_mean(const float *x, int n, int hw, int c, float *y, void *stream);
/* Concatenates k tensors that share the outer size: input i is outer x
 * inner[i] floats, the output outer x sum(inner). srcs is a host array of
 * device pointers (k <= 64). */
ms_status kn_cuda_concat(const float *const *srcs, const int64_t *inner, int k, int64_t outer,
                         float *y, void *stream);

/* ResizeBilinear of x (n, h, w, c) to (n, oh, ow, c) with TensorFlow's
 * align_corners / half_pixel_centers, the CPU kernel's float32 expressions
 * in its order (kernels/cpu/kn_cpu_nn.c): bit-identical. */
ms_status kn_cuda_resize_bilinear(const float *x, int n, int h, int w, int c, int oh, int ow,
                                  int align_corners, int half_pixel, float *y, void *stream);

/* Transpose of a tensor of rank <= 8: y's dimension i is x's dimension
 * perm[i] (TensorFlow's Transpose). A copy: exact. */
ms_status kn_cuda_transpose(const float *x, int rank, const int64_t *dims, const int *perm,
                            float *y, void *stream);
/* Zero (or `value`) padding of NHWC: y is (n, h + top + bottom, w + left +
 * right, c) (TensorFlow's Pad / PadV2 on the spatial axes; also the explicit
 * padding before a cuDNN convolution whose SAME padding is uneven). */
ms_status kn_cuda_pad_nhwc(const float *x, int n, int h, int w, int c, int top, int bottom,
                           int left, int right, float value, float *y, void *stream);

/* MaxPool3D / AvgPool3D of NDHWC (TensorFlow's SAME / VALID through the
 * front padding; the back padding follows from od, oh, ow; padded voxels
 * are skipped, averages count the in-volume voxels only). */
typedef struct kn_cuda_pool3_shape {
    int n, d, h, w, c;
    int kd, kh, kw, sd, sh, sw;
    int pad_d, pad_h, pad_w;
    int od, oh, ow;
} kn_cuda_pool3_shape;

ms_status kn_cuda_pool3d(const kn_cuda_pool3_shape *s, int is_max, const float *x, float *y,
                         void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_NN_CUH */
