/* kn_reduce.h - the merged axes of a reduction, shared by the CPU reduction
 * kernels and the CUDA backend's plan so that both walk the same shape:
 * size-1 axes dropped, neighbouring axes that are both kept or both reduced
 * merged into one. Shape arithmetic only.
 */
#ifndef KN_REDUCE_H
#define KN_REDUCE_H

#include <stdint.h>

#include "rt_tensor.h"

/* A reduction after merging. */
typedef struct kn_reduce_axes {
    int rank;                 /* merged rank, >= 1 */
    int64_t dim[RT_MAX_RANK]; /* merged dims */
    int red[RT_MAX_RANK];     /* 1 where the merged dim is reduced */
    int64_t nout, count;      /* output elements, reduced elements per output */
} kn_reduce_axes;

/* The merged axes of the reduction of a tensor of shape x over the axes d
 * where red[d] is non-zero. A reduction with no axis left (a scalar, or all
 * axes of size 1) is one kept axis of size 1. */
void kn_reduce_axes_merge(const rt_shape *x, const int *red, kn_reduce_axes *out);

#endif /* KN_REDUCE_H */
