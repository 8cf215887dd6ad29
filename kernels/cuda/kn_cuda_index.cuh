/* kn_cuda_index.cuh - data movement by index (kn_cuda_index.cu): GatherV2 /
 * Gather, Slice / StridedSlice as one strided copy, ResizeNearestNeighbor.
 * Copies of elements of 1, 2, 4 or 8 bytes, whatever their dtype: exact.
 * The host decides the geometry (kn_cuda_backend.c: kn_cuda__strided_slice,
 * kn_cuda__slice, the gather's sizes), the kernels only move elements. */
#ifndef KN_CUDA_INDEX_CUH
#define KN_CUDA_INDEX_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

/* A strided copy: the output (rank dims, row-major) element at coordinates
 * c is the source element base + sum c[d] * stride[d] (in elements; a
 * stride may be negative or 0). */
typedef struct kn_cuda_strided {
    int rank; /* 1..8 */
    int64_t dim[8];
    int64_t stride[8];
    int64_t base;
} kn_cuda_strided;

/* y = the strided copy p of x; es: element size, 1, 2, 4 or 8 bytes. */
ms_status kn_cuda_strided_copy(const kn_cuda_strided *p, const void *x, size_t es, void *y,
                               void *stream);

/* GatherV2 with batch_dims: params viewed as [nb, outer, n, inner] elements
 * of es bytes, indices as [nb, per] (int32 when idx64 is 0, else int64);
 * y[b, o, i, k] = params[b, o, idx[b, i], k]. An index outside [0, n) (the
 * caller checks them on the host first) gives zeros. */
typedef struct kn_cuda_gather_shape {
    int64_t nb, outer, n, per, inner;
} kn_cuda_gather_shape;

ms_status kn_cuda_gather(const kn_cuda_gather_shape *g, const void *params, size_t es,
                         const void *indices, int idx64, void *y, void *stream);

/* ResizeNearestNeighbor of x (n, h, w, c; elements of es bytes) to
 * (n, oh, ow, c): TensorFlow's source index as the CPU kernel computes it
 * (kernels/cpu/kn_cpu_nn.c nearest_index): scale = align_corners && out > 1 ?
 * (in - 1) / (out - 1) : in / out in float; v = (half_pixel ? i + 0.5 : i)
 * * scale in float; align_corners ? roundf(v) : floorf(v), clamped to
 * [0, in - 1]. */
ms_status kn_cuda_resize_nearest(const void *x, size_t es, int64_t n, int64_t h, int64_t w,
                                 int64_t c, int64_t oh, int64_t ow, int align_corners,
                                 int half_pixel, void *y, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_INDEX_CUH */
