/* kn_cuda_reduce.cuh - Sum, Mean, Max, Min and Prod of float32 over any set
 * of axes (kn_cuda_reduce.cu).
 *
 * The input's shape is first merged as the CPU kernel merges it
 * (kernels/cpu/kn_cpu_reduce.c): size-1 axes dropped, neighbouring axes that
 * are both kept or both reduced merged into one (kn_cuda__reduce_plan in
 * kn_cuda_backend.c, host code). Each output accumulates in double, as the
 * CPU kernel does, and is rounded to float once (Mean: the double sum divided
 * by the count first).
 *
 *   many outputs (>= 2048) or short reductions (< 256 elements): one thread
 *             per output walks its elements in memory order, the CPU's
 *             order: bit-identical to the CPU kernel
 *   few outputs, long reductions: one block of 256 threads per output, each
 *             thread a strided double partial sum, then a tree in shared
 *             memory. Max / Min are exact (order-free); Sum / Mean / Prod
 *             differ from the CPU only by the rounding of double partials
 *             (far below float's 1e-5 relative)
 * NaN inputs are skipped by Max / Min as by the CPU (`x > acc`, starting at
 * -inf / +inf). */
#ifndef KN_CUDA_REDUCE_CUH
#define KN_CUDA_REDUCE_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

typedef enum kn_cuda_redop {
    KN_CUDA_RED_SUM,
    KN_CUDA_RED_MEAN,
    KN_CUDA_RED_MAX,
    KN_CUDA_RED_MIN,
    KN_CUDA_RED_PROD
} kn_cuda_redop;

/* A reduction after merging: rank 1..8 merged axes, red[d] 1 where axis d
 * is reduced; nout outputs (the kept axes in order), count elements reduced
 * into each. */
typedef struct kn_cuda_reduce_shape {
    int rank;
    int64_t dim[8];
    int red[8];
    int64_t nout, count;
} kn_cuda_reduce_shape;

/* y[nout] = op over x (the plan's input, row-major). MS_EINVAL for a bad
 * plan; the launch error as MS_EDEVICE. */
ms_status kn_cuda_reduce(kn_cuda_redop op, const kn_cuda_reduce_shape *p, const float *x, float *y,
                         void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_REDUCE_CUH */
