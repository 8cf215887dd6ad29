/* kn_cpu_resize.h - what the resize kernels share (ResizeBilinear and
 * ResizeNearestNeighbor in kn_cpu_nn.c; ResizeBicubic, ResizeArea and
 * CropAndResize in kn_cpu_resize.c): the align_corners / half_pixel_centers
 * attributes, TensorFlow's resize scale, the images/size checks of its
 * ImageResizerState and a float read of any numeric input element.
 */
#ifndef KN_CPU_RESIZE_H
#define KN_CPU_RESIZE_H

#include <stdint.h>

#include "kn_backend.h"
#include "kn_cpu_util.h"

/* Whether images of dtype dt are taken (TensorFlow's resize and crop ops'
 * T: the integers up to 64 bits, half, bfloat16, float, double). */
static inline int kn__resize_dtype_ok(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT:
    case RT_DT_DOUBLE:
    case RT_DT_INT8:
    case RT_DT_UINT8:
    case RT_DT_INT16:
    case RT_DT_UINT16:
    case RT_DT_INT32:
    case RT_DT_INT64:
    case RT_DT_HALF:
    case RT_DT_BFLOAT16:
        return 1;
    default:
        return 0;
    }
}

typedef struct kn__resize_attrs {
    int align_corners, half_pixel;
} kn__resize_attrs;

/* Prepare of the Resize* ops: a malloc'd kn__resize_attrs in *state (free()
 * releases it); MS_EINVAL when both align_corners and half_pixel_centers,
 * MS_ENOTSUP when attr T is a dtype kn__resize_dtype_ok refuses. */
ms_status kn__resize_prepare(const kn_node *node, rt_tensor *const *const_in, void **state);

/* TensorFlow's CalculateResizeScale: (in-1)/(out-1) with align_corners and
 * out > 1, else in/out, in float. */
float kn__resize_scale(int64_t in, int64_t out, int align);

/* Checks images (4-D NHWC, non-empty H, W, C below 2^31, a numeric dtype the
 * resize ops take) and size (int32 [2], both positive) as TensorFlow's
 * ImageResizerState; sets dims = N, H, W, C and out_hw = new height, width. */
ms_status kn__resize_check(const kn_node *node, const rt_tensor *x, const rt_tensor *size,
                           int64_t dims[4], int64_t out_hw[2]);

/* Element i of a numeric tensor's data as float (0 for other dtypes; callers
 * check dtypes first). Inline: it sits in the per-element loops. */
static inline float kn__load_f(const void *p, rt_dtype dt, int64_t i) {
    switch (dt) {
    case RT_DT_FLOAT:
        return ((const float *)p)[i];
    case RT_DT_DOUBLE:
        return (float)((const double *)p)[i];
    case RT_DT_INT8:
        return ((const int8_t *)p)[i];
    case RT_DT_UINT8:
        return ((const uint8_t *)p)[i];
    case RT_DT_INT16:
        return ((const int16_t *)p)[i];
    case RT_DT_UINT16:
        return ((const uint16_t *)p)[i];
    case RT_DT_INT32:
        return (float)((const int32_t *)p)[i];
    case RT_DT_INT64:
        return (float)((const int64_t *)p)[i];
    case RT_DT_HALF:
        return kn__half_to_f32(((const uint16_t *)p)[i]);
    case RT_DT_BFLOAT16:
        return kn__bf16_to_f32(((const uint16_t *)p)[i]);
    default:
        return 0;
    }
}

#endif
