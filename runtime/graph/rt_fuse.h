/* rt_fuse.h - load-time graph fusion (a small "remapper" after TensorFlow's
 * grappler pass of that name). Runtime-internal.
 *
 * rt_graph_build runs rt_fuse_graph once, after function inlining and before
 * any kernel is bound or prepared. It rewrites these patterns of float nodes
 * into the fused ops the CPU kernels run in one pass over memory:
 *
 *  1. Conv2D | DepthwiseConv2dNative | MatMul -> BiasAdd [-> act]
 *       ==> _FusedConv2D | _FusedDepthwiseConv2dNative | _FusedMatMul,
 *           fused_ops [BiasAdd(, act)], num_args 1, inputs (x, filter, bias)
 *  2. _FusedConv2D | _FusedMatMul with fused_ops [BiasAdd] or (conv only)
 *     [FusedBatchNorm] -- or pattern 1's result without an activation --
 *     -> Add | AddV2 (the conv on either side) [-> act]
 *       ==> the same op with fused_ops [BiasAdd | FusedBatchNorm, Add(, act)],
 *           num_args 2 (5 with FusedBatchNorm), the addend as the last input
 *
 *  3. DcmDecodeHU (no size attr) -> DcmWindow, the window's x (and mask)
 *     being the decode's only uses
 *       ==> DcmDecodeWindow (runtime/dicom/dcm_fused.c): the decode's attrs,
 *           the window's, masked = (DcmWindow had the mask); input contents
 *
 *  4. Sum | Mean (float, Const axes) over an expression of elementwise ops
 *     (Add/AddV2, Sub, Mul, RealDiv, Maximum, Minimum, SquaredDifference,
 *     Less/LessEqual/Greater/GreaterEqual, LogicalAnd/Or/Not, Neg, Abs,
 *     Square, Cast bool -> float) whose nodes are used only inside that
 *     expression (no control edges), over at most 8 input tensors and scalar
 *     float Consts
 *       ==> _FusedMapReduce (kernels/cpu/kn_cpu_reduce.c), a new node (not in
 *           the name map) with one output per reduction: reductions with the
 *           same inputs (as a set), axes and keep_dims share one node, so one
 *           pass over the inputs computes them all. Each Sum / Mean becomes
 *           Identity(its output) and keeps its original form as its twin; the
 *           absorbed nodes point at it (fused_into). The program is in attrs
 *           (Tleaves, consts, ops, args, outputs, reductions, axes,
 *           keep_dims); results are bit-identical to the unfused ops (the
 *           kernel's header says how the sums keep reduce_compute's double).
 *
 * act is Relu, Relu6, LeakyRelu (alpha -> leakyrelu_alpha), Elu, Sigmoid or
 * Tanh. A chain is fused only when each intermediate tensor has exactly one
 * consumer (control edges from a node that also waits on the chain's last
 * node do not count, see rt_fuse.c), and, for Add, when the addend's shape
 * is known at load (static shape propagation) to broadcast into the conv's
 * output, so the fused node computes exactly what Add computed.
 *
 * The fused node takes the index and name of the chain's LAST node, so
 * "relu_26:0" keeps meaning the same value for every consumer and fetch. The
 * other chain nodes stay unchanged in the graph (rt_gnode.fused_into names
 * the fused node), so fetching them still gives their own unfused value, and
 * plans prune them when nothing needs them. The last node's original form is
 * kept as an extra node, unnamed in the name map (rt_gnode.unfused): a plan
 * whose feeds replace a tensor inside a fused chain uses it instead of the
 * fused node (rt_plan_build), so the feed is honoured.
 *
 * The fused NodeDefs (and their new attrs) belong to the graph and are freed
 * by rt_graph_free (rt_graph_alloc); unchanged attr values are
 * borrowed from the original conv's NodeDef.
 *
 * DCMSERVE_GRAPH_FUSION=0 in the environment turns the pass off (for
 * debugging and before/after measurements).
 */
#ifndef RT_FUSE_H
#define RT_FUSE_H

#include "ms_status.h"
#include "rt_graph.h"

/* 0 when the environment variable DCMSERVE_GRAPH_FUSION is "0", "off" or
 * "false"; 1 otherwise. Read at every call (each model load). */
int rt_fuse_enabled(void);

/* Fuses g in place (see above); nodes must be resolved and none prepared.
 * Returns MS_OK (also when nothing matched) or MS_ENOMEM. On error g may hold
 * some fusions already, all consistent, and is freed as usual. The number of
 * fused chains goes to *nfused when nfused is not NULL. */
ms_status rt_fuse_graph(rt_graph *g, int *nfused);

#endif /* RT_FUSE_H */
