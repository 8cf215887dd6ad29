/* kn_slice.h - TensorFlow's StridedSlice spec made canonical, shared by the
 * CPU kernel and the CUDA backend's plan so that both slice the same
 * elements and refuse the same specs with the same messages. Shape
 * arithmetic only: no tensor is read or written.
 */
#ifndef KN_SLICE_H
#define KN_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "rt_tensor.h"

/* The most begin / end / strides entries of one spec. */
#define KN_SLICE_MAX_SPEC 31

/* One StridedSlice made dense and canonical: per input axis d the first
 * index start[d] (in range when count[d] > 0), the step stride[d] (non-zero)
 * and the number of elements count[d]; shrink[d] 1 where the axis is shrunk
 * (count 1, dropped from the output). ps: the processing shape (count per
 * input axis); os: the output shape (new axes 1, shrunk axes dropped). */
typedef struct kn_slice {
    int64_t start[RT_MAX_RANK];
    int64_t stride[RT_MAX_RANK];
    int shrink[RT_MAX_RANK];
    rt_shape ps, os;
} kn_slice;

/* Canonicalises the StridedSlice of an input of shape x by the n entries of
 * begin, end and strides and the masks {begin, end, ellipsis, new_axis,
 * shrink_axis}, as TensorFlow's ValidateStridedSliceOp: the sparse spec
 * (ellipsis, implied after the last entry when absent, and new axes) is
 * expanded to one entry per input axis, then begin and end are wrapped and
 * clamped. Returns 1 with *out filled, or 0 with the reason in err (a
 * sentence fragment without the node, always NUL-terminated). */
int kn_slice_canon(const rt_shape *x, const int64_t *begin, const int64_t *end,
                   const int64_t *strides, int n, const int64_t masks[5], kn_slice *out, char *err,
                   size_t errlen);

#endif /* KN_SLICE_H */
