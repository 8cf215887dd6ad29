/* rt_onnx_ext.h - handlers of the ONNX ops converted in rt_onnx_attn.c
 * (Attention) and rt_onnx_loss.c (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss), rt_onnx_signal.c (STFT, MelWeightMatrix), rt_onnx_misc.c (smaller ops), and the small emission helpers they
 * share. rt_onnx_ops.c's lookup asks rt__ox_ext_handler for the ops its own tables lack.
 */
#ifndef RT_ONNX_EXT_H
#define RT_ONNX_EXT_H

#include "rt_onnx_int.h"

/* The handler of an op converted in the files above, or NULL. */
rt__ox_handler rt__ox_ext_handler(const char *op_type);
/* The handler of an op of rt_onnx_misc.c (Swish, SwiGLU, Shrink, LpNormalization,
 * EyeLike, SpaceToDepth, DepthToSpace, OneHot, GatherND, the windows,
 * MeanVarianceNormalization, NonZero, Compress, CenterCropPad, AffineGrid,
 * CumProd, GroupNormalization, LRN), or NULL. */
rt__ox_handler rt__ox_misc_handler(const char *op_type);
/* The handler of GridSample, ScatterND, ScatterElements, Scatter, LpPool,
 * NonMaxSuppression, DFT, CausalConvWithState, Unique, Det, ReverseSequence
 * (rt_onnx_scatter.c: our own ops of kernels/cpu/kn_cpu_onnx.c), or NULL. */
rt__ox_handler rt__ox_scatter_handler(const char *op_type);
/* The handler of RoiAlign, MaxUnpool, Col2Im, DeformConv (rt_onnx_img.c: our own ops of
 * kernels/cpu/kn_cpu_onnx_img.c), or NULL. */
rt__ox_handler rt__ox_img_handler(const char *op_type);
/* The handler of RNN, GRU, LSTM (rt_onnx_rnn.c: OnnxRNN), or NULL. */
rt__ox_handler rt__ox_rnn_handler(const char *op_type);
/* The handler of If, Loop, Scan (rt_onnx_ctrl.c: StatelessIf and
 * StatelessWhile over library functions), or NULL. */
rt__ox_handler rt__ox_ctrl_handler(const char *op_type);
/* The handler of QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv (rt_onnx_quant.c), or NULL. */
rt__ox_handler rt__ox_quant_handler(const char *op_type);
/* The handler of StringConcat, StringSplit, StringNormalizer (rt_onnx_str.c:
 * our own ops of kernels/cpu/kn_cpu_onnx_str.c), or NULL. */
rt__ox_handler rt__ox_str_handler(const char *op_type);
/* MaxPool / AveragePool given dilations (rt_onnx_scatter.c: OnnxPool). */
ms_status rt__ox_op_window_pool(rt__ox_conv *cv, const Onnx__NodeProto *n);

ms_status rt__ox_op_attention(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_rotary(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_nll_loss(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_sce_loss(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* STFT and MelWeightMatrix (rt_onnx_signal.c). */
ms_status rt__ox_op_stft(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_mel(rt__ox_conv *cv, const Onnx__NodeProto *n);

/* GatherV2 node of x (type dt) at the indices ix (type idt) on axis, with
 * batch_dims 0 (rt_onnx_attn.c, as rt__ox_reduce). */
Tensorflow__NodeDef *rt__ox_gather_node(rt__ox_conv *cv, const char *h, const char *x, rt_dtype dt,
                                        const char *ix, rt_dtype idt, int axis);

/* TF reduction `op` (Sum, Max, Mean, ...) of x of type dt over the int32
 * axes ax[0..na), keeping them as 1s when keep. */
const char *rt__ox_reduce(rt__ox_conv *cv, const char *op, const char *h, const char *x,
                          rt_dtype dt, const int64_t *ax, int na, int keep);

#endif /* RT_ONNX_EXT_H */
