/* rt_onnx_opset.c - which versions of each ONNX op the converter implements
 * (per op, not per model) and which attributes its handler reads.
 *
 * ONNX versions each op on its own: a model declaring opset X means, for
 * every op, the newest definition of that op whose since-version is <= X (the
 * operator changelog). Most new definitions only add element types (which the
 * handlers check themselves); the others add inputs or attributes or change a
 * meaning. So each row lists the since-versions the handler implements and
 * those it does not; the definition in force at the model's opset must be an
 * implemented one. Since-versions that only add types may be left out of a
 * row (the earlier implemented one then stays in force, which is the same
 * thing). The attribute list names every attribute the handler reads: any
 * other attribute on a node is refused by name, so an attribute added by a
 * newer definition, or a legacy one, is never ignored. "name=V" admits the
 * attribute only at the integer value V (its default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_onnx.h"
#include "rt_onnx_int.h"

#define OX_NV 12 /* versions per list */

typedef struct ox_opdef {
    const char *op;
    int16_t impl[OX_NV]; /* since-versions implemented, ascending, 0-terminated */
    int16_t skip[OX_NV]; /* since-versions not implemented, ascending, 0-terminated */
    const char *attrs;   /* space-separated attribute names the handler reads */
} ox_opdef;

/* clang-format off */
#define TYPES25 21, 23, 24, 25 /* type-list ops: each release adds new element types */
static const ox_opdef ox_defs[] = {
    {"Abs", {6, 13}, {1}, ""},
    {"Acos", {7, 22}, {0}, ""},
    {"Acosh", {9, 22}, {0}, ""},
    {"And", {7}, {1}, ""},
    {"ArgMax", {1, 11, 12, 13}, {0}, "axis keepdims select_last_index"},
    {"ArgMin", {1, 11, 12, 13}, {0}, "axis keepdims select_last_index"},
    {"Asin", {7, 22}, {0}, ""},
    {"Asinh", {9, 22}, {0}, ""},
    {"Atan", {7, 22}, {0}, ""},
    {"Atanh", {9, 22}, {0}, ""},
    {"Attention", {23, 24}, {0}, "is_causal kv_num_heads q_num_heads qk_matmul_output_mode scale softcap softmax_precision=1"},
    {"CastLike", {15, 19, TYPES25}, {0}, "round_mode saturate"},
    {"Ceil", {6, 13}, {1}, ""},
    {"Celu", {12, 28}, {0}, "alpha"},
    {"Cos", {7, 22}, {0}, ""},
    {"Cosh", {9, 22}, {0}, ""},
    {"CumSum", {11, 14}, {0}, "exclusive reverse"},
    {"Elu", {6, 22}, {1}, "alpha"},
    {"Equal", {7, 11, 13, 19}, {1}, ""},
    {"Erf", {9, 13}, {0}, ""},
    {"Expand", {8, 13}, {0}, ""},
    {"GRU", {7, 14, 22}, {1, 3}, "activations clip direction hidden_size layout linear_before_reset"},
    {"GatherElements", {11, 13}, {0}, "axis"},
    {"Gelu", {20}, {0}, "approximate"},
    {"Greater", {7, 9, 13}, {1}, ""},
    {"GreaterOrEqual", {12, 16}, {0}, ""},
    {"Hardmax", {13}, {1, 11}, "axis"},
    {"IsInf", {10, 20}, {0}, "detect_negative detect_positive"},
    {"IsNaN", {9, 13, 20}, {0}, ""},
    {"LSTM", {7, 14, 22}, {1}, "activations clip direction hidden_size input_forget layout"},
    {"LayerNormalization", {17}, {0}, "axis epsilon stash_type"},
    {"Less", {7, 9, 13}, {1}, ""},
    {"LessOrEqual", {12, 16}, {0}, ""},
    {"Log", {6, 13}, {1}, ""},
    {"Mean", {8, 13}, {1, 6}, ""},
    {"Mish", {18, 22}, {0}, ""},
    {"Mod", {10, 13}, {0}, "fmod"},
    {"NegativeLogLikelihoodLoss", {12, 13, 22}, {0}, "ignore_index reduction"},
    {"Not", {1}, {0}, ""},
    {"Or", {7}, {1}, ""},
    {"PRelu", {7, 9, 16}, {1, 6}, ""},
    {"RNN", {7, 14, 22}, {1}, "activations clip direction hidden_size layout"},
    {"Range", {11, 27}, {0}, "stash_type=1"},
    {"Reciprocal", {6, 13}, {1}, ""},
    {"RMSNormalization", {23}, {0}, "axis epsilon stash_type"},
    {"Round", {11, 22}, {0}, ""},
    {"Selu", {6, 22}, {1}, "alpha gamma"},
    {"Sign", {9, 13}, {0}, ""},
    {"Sin", {7, 22}, {0}, ""},
    {"Sinh", {9, 22}, {0}, ""},
    {"Size", {1, 13, 19, TYPES25}, {0}, ""},
    {"SoftmaxCrossEntropyLoss", {12, 13}, {0}, "ignore_index reduction"},
    {"Softplus", {1, 22}, {0}, ""},
    {"Softsign", {1, 22}, {0}, ""},
    {"Sum", {8, 13}, {1, 6}, ""},
    {"Tan", {7, 22}, {0}, ""},
    {"ThresholdedRelu", {10, 22}, {0}, "alpha"},
    {"Tile", {6, 13}, {1}, ""},
    {"TopK", {10, 11, 24}, {1}, "axis largest sorted"},
    {"Trilu", {14}, {0}, "upper"},
    {"Where", {9, 16}, {0}, ""},
    {"Xor", {7}, {1}, ""},
    {"Swish", {24}, {0}, "alpha"},
    {"SwiGLU", {28}, {0}, "alpha"},
    {"Shrink", {9}, {0}, "bias lambd"},
    {"LpNormalization", {1, 22}, {0}, "axis p"},
    {"EyeLike", {9, 22}, {0}, "dtype k"},
    {"SpaceToDepth", {1, 13}, {0}, "blocksize"},
    {"DepthToSpace", {1, 11, 13}, {0}, "blocksize mode"},
    {"OneHot", {9, 11}, {0}, "axis"},
    {"GatherND", {11, 12, 13}, {0}, "batch_dims"},
    {"HannWindow", {17}, {0}, "output_datatype=1 periodic"},
    {"HammingWindow", {17}, {0}, "output_datatype=1 periodic"},
    {"BlackmanWindow", {17}, {0}, "output_datatype=1 periodic"},
    {"MeanVarianceNormalization", {9, 13}, {0}, "axes"},
    {"NonZero", {9, 13}, {0}, ""},
    {"Compress", {9, 11}, {0}, "axis"},
    {"CenterCropPad", {18}, {0}, "axes"},
    {"AffineGrid", {20}, {0}, "align_corners"},
    {"CumProd", {26}, {0}, "exclusive reverse"},
    {"GroupNormalization", {18, 21}, {0}, "epsilon num_groups stash_type"},
    {"LRN", {1, 13}, {0}, "alpha beta bias size"},
    {"RotaryEmbedding", {23}, {0}, "interleaved num_heads rotary_embedding_dim"},
    {"GridSample", {16, 20, 22}, {0}, "align_corners mode padding_mode"},
    {"ScatterND", {11, 13, 16, 18}, {0}, "reduction"},
    {"ScatterElements", {11, 13, 16, 18}, {0}, "axis reduction"},
    {"Scatter", {9}, {11}, "axis"},
    {"NonMaxSuppression", {10, 11}, {0}, "center_point_box"},
    {"RoiAlign", {10, 16, 22}, {0}, "coordinate_transformation_mode mode output_height output_width sampling_ratio spatial_scale"},
    {"MaxUnpool", {9, 11, 22}, {0}, "kernel_shape pads strides"},
    {"Col2Im", {18}, {0}, "dilations pads strides"},
    {"DeformConv", {19, 22}, {0}, "dilations group kernel_shape offset_group pads strides"},
    {"DFT", {17, 20}, {0}, "axis inverse onesided"},
    {"STFT", {17}, {0}, "onesided"},
    {"TensorScatter", {24}, {0}, "axis mode"},
    {"MelWeightMatrix", {17}, {0}, "output_datatype"},
    {"CausalConvWithState", {27}, {0}, "activation"},
    {"Unique", {11}, {0}, "axis sorted"},
    {"Det", {11, 22}, {0}, ""},
    {"Einsum", {12}, {0}, "equation"},
    {"ReverseSequence", {10}, {0}, "batch_axis time_axis"},
    {"StringConcat", {20}, {0}, ""},
    {"StringSplit", {20}, {0}, "delimiter maxsplit"},
    {"RegexFullMatch", {20}, {0}, "pattern"},
    {"StringNormalizer", {10}, {0}, "case_change_action is_case_sensitive locale stopwords"},
    {"QuantizeLinear", {10, 13, 19, 21, 23, 24, 25}, {0}, "axis block_size output_dtype precision saturate"},
    {"DequantizeLinear", {10, 13, 19, 21, 23, 24, 25}, {0}, "axis block_size output_dtype"},
    {"DynamicQuantizeLinear", {11}, {0}, ""},
    {"MatMulInteger", {10}, {0}, ""},
    {"QLinearMatMul", {10, 21}, {0}, ""},
    {"ConvInteger", {10}, {0}, "auto_pad dilations group kernel_shape pads strides"},
    {"QLinearConv", {10}, {0}, "auto_pad dilations group kernel_shape pads strides"},
    {"LpPool", {2, 11, 18, 22}, {1}, "auto_pad ceil_mode=0 dilations kernel_shape p pads strides"},
    {"If", {1, 11, 13, 16, 19, 21, 23, 24, 25}, {0}, "else_branch then_branch"},
    {"Loop", {1, 11, 13, 16, 19, 21, 23, 24, 25}, {0}, "body"},
    {"Scan", {8, 9, 11, 16, 19, 21, 23, 24, 25}, {0}, "body directions num_scan_inputs scan_input_axes scan_input_directions scan_output_axes scan_output_directions"},
    {"Add", {7, 13, 14}, {1, 6}, ""},
    {"AveragePool", {7, 10, 11, 19, 22}, {1}, "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides"},
    {"BatchNormalization", {7, 9, 14, 15}, {1, 6}, "epsilon momentum training_mode"},
    {"BitCast", {26}, {0}, "to"},
    {"BitShift", {11}, {0}, "direction"},
    {"BitwiseAnd", {18}, {0}, ""},
    {"BitwiseNot", {18}, {0}, ""},
    {"BitwiseOr", {18}, {0}, ""},
    {"BitwiseXor", {18}, {0}, ""},
    {"Cast", {6, 9, 13, 19, TYPES25}, {1}, "round_mode to saturate"},
    {"Clip", {6, 11, 12, 13}, {1}, "min max"},
    {"Concat", {4, 11, 13}, {1}, "axis"},
    {"Constant", {1, 9, 11, 12, 13, 19, TYPES25}, {0}, "value value_float value_floats value_int value_ints"},
    {"ConstantOfShape", {9, 20, TYPES25}, {0}, "value"},
    {"Conv", {1, 11, 22}, {0}, "auto_pad dilations group kernel_shape pads strides"},
    {"ConvTranspose", {1, 11, 22}, {0}, "auto_pad dilations group kernel_shape output_padding output_shape pads strides"},
    {"Div", {7, 13, 14}, {1, 6}, ""},
    {"Dropout", {7, 10, 12, 13, 22}, {1, 6}, "ratio seed"},
    {"Exp", {6, 13}, {1}, ""},
    {"Flatten", {1, 9, 11, 13, TYPES25}, {0}, "axis"},
    {"Floor", {6, 13}, {1}, ""},
    {"Gather", {1, 11, 13}, {0}, "axis"},
    {"Gemm", {7, 9, 11, 13}, {1, 6}, "alpha beta transA transB"},
    {"GlobalAveragePool", {1, 22}, {0}, ""},
    {"GlobalMaxPool", {1, 22}, {0}, ""},
    {"HardSigmoid", {6, 22}, {1}, "alpha beta"},
    {"HardSwish", {14, 22}, {0}, ""},
    {"Identity", {1, 13, 14, 16, 19, TYPES25}, {0}, ""},
    {"InstanceNormalization", {6, 22}, {1}, "epsilon"},
    {"LeakyRelu", {6, 16}, {1}, "alpha"},
    {"MatMul", {1, 9, 13}, {0}, ""},
    {"Max", {8, 12, 13}, {1, 6}, ""},
    {"MaxPool", {8, 10, 11, 12, 22}, {1}, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides"},
    {"Min", {8, 12, 13}, {1, 6}, ""},
    {"Mul", {7, 13, 14}, {1, 6}, ""},
    {"Neg", {6, 13}, {1}, ""},
    {"Pad", {2, 11, 13, 18, 19, TYPES25}, {1}, "mode pads value"},
    {"Pow", {7, 12, 13, 15}, {1}, ""},
    {"ReduceMax", {1, 11, 12, 13, 18, 20}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceMean", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceMin", {1, 11, 12, 13, 18, 20}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceSum", {1, 11, 13}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceProd", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceSumSquare", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceL1", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceL2", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceLogSum", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"ReduceLogSumExp", {1, 11, 13, 18}, {0}, "axes keepdims noop_with_empty_axes"},
    {"Relu", {6, 13, 14}, {1}, ""},
    {"Reshape", {5, 13, 14, 19, TYPES25}, {1}, "allowzero"},
    {"Resize", {10, 11, 13, 18, 19}, {0}, "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value keep_aspect_ratio_policy mode nearest_mode"},
    {"Shape", {1, 13, 15, 19, TYPES25}, {0}, "end start"},
    {"Sigmoid", {6, 13}, {1}, ""},
    {"Slice", {1, 10, 11, 13}, {0}, "axes ends starts"},
    {"Softmax", {1, 11, 13}, {0}, "axis"},
    {"LogSoftmax", {1, 11, 13}, {0}, "axis"},
    {"Split", {2, 11, 13, 18}, {1}, "axis num_outputs split"},
    {"Sqrt", {6, 13}, {1}, ""},
    {"Squeeze", {1, 11, 13, TYPES25}, {0}, "axes"},
    {"Sub", {7, 13, 14}, {1, 6}, ""},
    {"Tanh", {6, 13}, {1}, ""},
    {"Transpose", {1, 13, TYPES25}, {0}, "perm"},
    {"Unsqueeze", {1, 11, 13, TYPES25}, {0}, "axes"},
    {"Upsample", {7, 9}, {1, 10}, "mode scales"},
};
/* clang-format on */

static const ox_opdef *ox_def(const char *op) {
    for (size_t i = 0; i < sizeof(ox_defs) / sizeof(ox_defs[0]); i++)
        if (strcmp(ox_defs[i].op, op) == 0) return &ox_defs[i];
    return NULL;
}

/* The since-version in force at opset, from both lists; *impl = 1 when it
 * is an implemented one. 0 when none is (the op did not exist yet). */
static int in_force(const ox_opdef *d, int64_t opset, int *impl) {
    int best = 0;
    *impl = 0;
    for (int k = 0; k < 2; k++) {
        const int16_t *l = k ? d->skip : d->impl;
        for (int i = 0; i < OX_NV && l[i]; i++)
            if (l[i] <= opset && l[i] > best) {
                best = l[i];
                *impl = !k;
            }
    }
    return best;
}

int rt_onnx_op_accepts(const char *op, int64_t opset) {
    const ox_opdef *d = ox_def(op);
    int impl;
    if (d == NULL || opset < 1 || opset > RT_ONNX_MAX_OPSET) return 0;
    return in_force(d, opset, &impl) > 0 && impl;
}

const char *rt_onnx_op_name(size_t i) {
    return i < sizeof(ox_defs) / sizeof(ox_defs[0]) ? ox_defs[i].op : NULL;
}

/* 1 when attribute a is in the space-separated list (a "name=V" entry only
 * with integer value V). */
static int attr_listed(const char *list, const Onnx__AttributeProto *a) {
    size_t len = strlen(a->name);
    for (const char *p = list; *p;) {
        const char *e = p + strcspn(p, " ");
        const char *eq = memchr(p, '=', (size_t)(e - p));
        size_t klen = (size_t)((eq ? eq : e) - p);
        if (klen == len && memcmp(p, a->name, len) == 0)
            return eq == NULL || (a->has_i && a->i == strtoll(eq + 1, NULL, 10) && a->n_ints == 0);
        p = *e ? e + 1 : e;
    }
    return 0;
}

ms_status rt__ox_check_version(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const ox_opdef *d = ox_def(n->op_type ? n->op_type : "");
    if (d == NULL) return MS_OK; /* the handler lookup names it */
    int impl;
    int v = in_force(d, cv->opset, &impl);
    if (v == 0 || !impl) {
        char buf[96] = "";
        size_t o = 0;
        for (int64_t x = 1; x <= RT_ONNX_MAX_OPSET && o + 12 < sizeof buf; x++) {
            if (!rt_onnx_op_accepts(d->op, x) || (x > 1 && rt_onnx_op_accepts(d->op, x - 1)))
                continue;
            int64_t y = x;
            while (y < RT_ONNX_MAX_OPSET && rt_onnx_op_accepts(d->op, y + 1))
                y++;
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%lld-%lld", o ? ", " : "",
                                  (long long)x, (long long)y);
        }
        if (v == 0)
            return rt__ox_err(cv, MS_ENOTSUP, "the op does not exist at opset %lld",
                              (long long)cv->opset);
        return rt__ox_err(cv, MS_ENOTSUP,
                          "opset %lld: version %d of the op is not supported (opsets accepted "
                          "for %s: %s)",
                          (long long)cv->opset, v, d->op, buf);
    }
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (a->name && !attr_listed(d->attrs, a))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "opset %lld: attribute \"%s\" (this form or value) is not supported",
                              (long long)cv->opset, a->name);
    }
    return MS_OK;
}
