/* util_convnet.h - a small NHWC network that touches every op family of the
 * CUDA backend's table (kernels/cuda/kn_cuda_backend.h), for the tests that
 * compare a device placement with the CPU run (check_kn_cuda_backend on the
 * CPU, check_cuda_backend on a GPU). */
#ifndef UTIL_CONVNET_H
#define UTIL_CONVNET_H

#include "rt_graphbuild.h"

/* x [2, 9, 8, 3] -> Conv2D (3x3, stride 2, SAME: uneven on W) -> BiasAdd ->
 * Relu -> DepthwiseConv2dNative (x2) -> FusedBatchNormV3 -> Relu6 ->
 * {MaxPool 2/2 VALID -> Reshape [-1, 32] | AvgPool 3/1 SAME -> Mean(1, 2)}
 * -> ConcatV2 -> MatMul -> BiasAdd -> Tanh + Sigmoid -> Mul 0.5 -> Sub ->
 * RealDiv -> Maximum -> Minimum -> Softmax -> ArgMax (no GPU kernel), plus
 * Transpose, Pad and ResizeBilinear of the pooled maps.
 * Fetch names: ut_convnet_fetches. Weights are fixed pseudo-random values. */
#define UT_CONVNET_NFETCH 6
extern const char *const ut_convnet_fetches[UT_CONVNET_NFETCH];
/* The nodes whose op has no CUDA kernel. */
extern const char *const ut_convnet_host_nodes[];
void ut_convnet_build(rt_gb *gb);
/* The input: [2, 9, 8, 3] floats from seed. New reference. */
rt_tensor *ut_convnet_input(unsigned seed);

/* x [2, 6, 5, 4] -> StridedSlice (begin / end masks, stride 2), Slice,
 * GatherV2 (axis 3) -> Sum (1, 2, keep_dims), Max (0, 3) of the strided
 * slice, Prod (-1) of the slice, Mean (0, 3) of x, ResizeNearestNeighbor
 * (half_pixel_centers), BatchMatMulV2 of the slice by a [4, 2] constant (a
 * broadcast y) and of x by x (adj_y), and on Shape(x) (int32, a host op):
 * StridedSlice (shrink_axis) and GatherV2: the ops added to the CUDA table
 * with the data movement, reductions and BatchMatMul.
 * Fetch names: ut_movenet_fetches. */
#define UT_MOVENET_NFETCH 11
extern const char *const ut_movenet_fetches[UT_MOVENET_NFETCH];
extern const char *const ut_movenet_host_nodes[];
void ut_movenet_build(rt_gb *gb);
/* The input: [2, 6, 5, 4] floats from seed. New reference. */
rt_tensor *ut_movenet_input(unsigned seed);

/* An int32 Const `name` of shape dims (rank 0..2) holding v. */
void ut_gb_consti(rt_gb *gb, const char *name, int rank, const int64_t *dims, const int32_t *v);
/* A float reduction `op` (Sum, Mean, Max, Min, Prod) of x over the int32
 * Const axes, keep_dims as given. */
void ut_gb_reduce(rt_gb *gb, const char *op, const char *name, const char *x, const char *axes,
                  int keep);

#endif /* UTIL_CONVNET_H */
