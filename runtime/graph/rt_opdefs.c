/* rt_opdefs.c - output-argument tables for ops (see rt_opdefs.h). */
#include "rt_opdefs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Built-in output args. Each entry: "name" (one output), "name*ATTR" (a list
 * whose length is int attr ATTR), "name+ATTR" (a list as long as type-list
 * attr ATTR). An op with no entries has no outputs. Ops not listed here and
 * not in the model's op list have one output named "output". */
typedef struct {
    const char *op;
    const char *args[7];
    int none;   /* explicitly zero outputs */
} opdef_entry;

/* clang-format off */
static const opdef_entry builtin[] = {
    {"NoOp", {NULL}, 1},
    {"AssignVariableOp", {NULL}, 1},
    {"AssignAddVariableOp", {NULL}, 1},
    {"AssignSubVariableOp", {NULL}, 1},
    {"DisableCopyOnRead", {NULL}, 1},
    {"MergeV2Checkpoints", {NULL}, 1},
    {"IdentityN", {"output+T"}, 0},
    {"PartitionedCall", {"output+Tout"}, 0},
    {"StatefulPartitionedCall", {"output+Tout"}, 0},
    {"FusedBatchNormV3", {"y", "batch_mean", "batch_variance", "reserve_space_1",
                          "reserve_space_2", "reserve_space_3"}, 0},
    {"FusedBatchNorm", {"y", "batch_mean", "batch_variance", "reserve_space_1",
                        "reserve_space_2"}, 0},
    {"FusedBatchNormV2", {"y", "batch_mean", "batch_variance", "reserve_space_1",
                          "reserve_space_2"}, 0},
    {"Split", {"output*num_split"}, 0},
    {"SplitV", {"output*num_split"}, 0},
    {"Unpack", {"output*num"}, 0},
    {"VarHandleOp", {"resource"}, 0},
    {"ReadVariableOp", {"value"}, 0},
    {"Assign", {"output_ref"}, 0},
    {"AssignAdd", {"output_ref"}, 0},
    {"AssignSub", {"output_ref"}, 0},
    {"VariableV2", {"ref"}, 0},
    {"Add", {"z"}, 0}, {"AddV2", {"z"}, 0}, {"Mul", {"z"}, 0}, {"Sub", {"z"}, 0},
    {"RealDiv", {"z"}, 0}, {"Maximum", {"z"}, 0}, {"Minimum", {"z"}, 0},
    {"Greater", {"z"}, 0}, {"Less", {"z"}, 0}, {"GreaterEqual", {"z"}, 0},
    {"LessEqual", {"z"}, 0}, {"Equal", {"z"}, 0}, {"LogicalAnd", {"z"}, 0},
    {"LogicalOr", {"z"}, 0}, {"Pow", {"z"}, 0},
    {"MatMul", {"product"}, 0},
    {"Relu", {"activations"}, 0}, {"Relu6", {"activations"}, 0},
    {"LeakyRelu", {"activations"}, 0},
    {"Softmax", {"softmax"}, 0},
    {"Cast", {"y"}, 0}, {"Sigmoid", {"y"}, 0}, {"Tanh", {"y"}, 0}, {"Square", {"y"}, 0},
    {"Sqrt", {"y"}, 0}, {"Rsqrt", {"y"}, 0}, {"Exp", {"y"}, 0}, {"Neg", {"y"}, 0},
    {"Abs", {"y"}, 0}, {"Floor", {"y"}, 0}, {"LogicalNot", {"y"}, 0},
    {"MaxPool", {"output"}, 0}, {"AvgPool", {"output"}, 0},
    {"ResizeBilinear", {"resized_images"}, 0}, {"ResizeNearestNeighbor", {"resized_images"}, 0},
    {"ResizeBicubic", {"resized_images"}, 0}, {"ResizeArea", {"resized_images"}, 0},
    {"CropAndResize", {"crops"}, 0},
    {"DcmDecodeHU", {"hu", "mask"}, 0},
    /* ONNX forms with run-time inputs (kn_cpu_shape.c, emitted by the ONNX importer). */
    {"OnnxSlice", {"output"}, 0}, {"OnnxPad", {"output"}, 0},
    {"OnnxSqueeze", {"output"}, 0}, {"OnnxUnsqueeze", {"output"}, 0},
    {"OnnxResize", {"output"}, 0},
    /* Checkpoint plumbing in TF2 exports' saver functions. */
    {"ShardedFilename", {"filename"}, 0}, {"StringJoin", {"output"}, 0},
    {"SaveV2", {NULL}, 1}, {"Save", {NULL}, 1}, {"SaveSlices", {NULL}, 1},
    {"RestoreV2", {"tensors+dtypes"}, 0}, {"Restore", {"tensor"}, 0},
    {"ShardedFilespec", {"filename"}, 0},
    /* Control flow. */
    {"While", {"output+T"}, 0}, {"StatelessWhile", {"output+T"}, 0},
    {"If", {"output+Tout"}, 0}, {"StatelessIf", {"output+Tout"}, 0},
    {"Case", {"output+Tout"}, 0}, {"StatelessCase", {"output+Tout"}, 0},
    {"Switch", {"output_false", "output_true"}, 0}, {"Merge", {"output", "value_index"}, 0},
    {"Enter", {"output"}, 0}, {"Exit", {"output"}, 0}, {"NextIteration", {"output"}, 0},
    {"LoopCond", {"output"}, 0},
    /* TensorList (TF2) and TensorArray (TF1). */
    {"TensorListReserve", {"handle"}, 0}, {"EmptyTensorList", {"handle"}, 0},
    {"TensorListFromTensor", {"output_handle"}, 0}, {"TensorListGetItem", {"item"}, 0},
    {"TensorListSetItem", {"output_handle"}, 0}, {"TensorListStack", {"tensor"}, 0},
    {"TensorListLength", {"length"}, 0}, {"TensorListElementShape", {"element_shape"}, 0},
    {"TensorListPushBack", {"output_handle"}, 0},
    {"TensorListConcatV2", {"tensor", "lengths"}, 0},
    {"TensorListGather", {"values"}, 0}, {"TensorListScatterIntoExistingList", {"output_handle"}, 0},
    {"TensorListResize", {"output_handle"}, 0}, {"TensorListSplit", {"output_handle"}, 0},
    {"TensorListPopBack", {"output_handle", "tensor"}, 0},
    {"TensorArrayV3", {"handle", "flow"}, 0}, {"TensorArrayReadV3", {"value"}, 0},
    {"TensorArrayWriteV3", {"flow_out"}, 0}, {"TensorArrayGatherV3", {"value"}, 0},
    {"TensorArrayScatterV3", {"flow_out"}, 0}, {"TensorArraySizeV3", {"size"}, 0},
    {"TensorArrayCloseV3", {NULL}, 1},
    {"TensorArrayConcatV3", {"value", "lengths"}, 0}, {"TensorArraySplitV3", {"flow_out"}, 0},
    /* Stateless random (Philox). */
    {"StatelessRandomGetKeyCounter", {"key", "counter"}, 0},
    /* tf.Example parsing. */
    {"ParseExample", {"sparse_indices*Nsparse", "sparse_values+sparse_types",
                      "sparse_shapes*Nsparse", "dense_values+Tdense"}, 0},
    {"ParseExampleV2", {"sparse_indices*num_sparse", "sparse_values+sparse_types",
                        "sparse_shapes*num_sparse", "dense_values+Tdense",
                        "ragged_values+ragged_value_types", "ragged_row_splits+ragged_split_types"}, 0},
    {"ParseSingleExample", {"sparse_indices*num_sparse", "sparse_values+sparse_types",
                            "sparse_shapes*num_sparse", "dense_values+Tdense"}, 0},
    /* Element-wise ops whose output arg is not "output". */
    {"Log", {"y"}, 0}, {"Log1p", {"y"}, 0}, {"Reciprocal", {"y"}, 0}, {"Sin", {"y"}, 0},
    {"Cos", {"y"}, 0}, {"Erf", {"y"}, 0}, {"Sign", {"y"}, 0}, {"Round", {"y"}, 0},
    {"Ceil", {"y"}, 0}, {"IsNan", {"y"}, 0}, {"Transpose", {"y"}, 0},
    {"Softplus", {"activations"}, 0}, {"Elu", {"activations"}, 0},
    {"Selu", {"activations"}, 0}, {"LogSoftmax", {"logsoftmax"}, 0},
    {"NotEqual", {"z"}, 0}, {"FloorDiv", {"z"}, 0}, {"FloorMod", {"z"}, 0},
    {"Mod", {"z"}, 0}, {"DivNoNan", {"z"}, 0}, {"SquaredDifference", {"z"}, 0},
    {"Div", {"z"}, 0}, {"BatchMatMulV2", {"output"}, 0},
    {"TopKV2", {"values", "indices"}, 0}, {"Unique", {"y", "idx"}, 0},
    {"Tan", {"y"}, 0}, {"Where", {"index"}, 0},
    /* Lookup tables (rt_ops_table.c). */
    {"HashTableV2", {"table_handle"}, 0}, {"MutableHashTableV2", {"table_handle"}, 0},
    {"LookupTableFindV2", {"values"}, 0}, {"LookupTableSizeV2", {"size"}, 0},
    /* Sparse and ragged tensors (kn_cpu_sparse.c). */
    {"SparseReshape", {"output_indices", "output_shape"}, 0},
    {"SparseFillEmptyRows", {"output_indices", "output_values", "empty_row_indicator",
                             "reverse_index_map"}, 0},
    {"RaggedTensorToTensor", {"result"}, 0},
    /* Every other op with a kernel, with TensorFlow's output-arg names (a
     * function body reads "node:arg:i"; check_opdefs fails when a kernel's op
     * has no entry here). Element-wise math: x -> y. */
    {"Acos", {"y"}, 0}, {"Acosh", {"y"}, 0}, {"Asin", {"y"}, 0}, {"Asinh", {"y"}, 0},
    {"Atan", {"y"}, 0}, {"Atanh", {"y"}, 0}, {"Cosh", {"y"}, 0}, {"Sinh", {"y"}, 0},
    {"Erfc", {"y"}, 0}, {"Expm1", {"y"}, 0}, {"Inv", {"y"}, 0}, {"Rint", {"y"}, 0},
    {"IsFinite", {"y"}, 0}, {"IsInf", {"y"}, 0}, {"OnesLike", {"y"}, 0},
    {"ZerosLike", {"y"}, 0}, {"Softsign", {"activations"}, 0},
    {"AddN", {"sum"}, 0}, {"ClipByValue", {"output"}, 0}, {"Select", {"output"}, 0},
    {"SelectV2", {"output"}, 0}, {"CheckNumerics", {"output"}, 0},
    {"Bucketize", {"output"}, 0}, {"TruncateDiv", {"z"}, 0}, {"TruncateMod", {"z"}, 0},
    {"Atan2", {"z"}, 0}, {"Xlogy", {"z"}, 0}, {"Assert", {NULL}, 1},
    {"LeftShift", {"z"}, 0}, {"RightShift", {"z"}, 0},
    {"BitwiseAnd", {"z"}, 0}, {"BitwiseOr", {"z"}, 0}, {"BitwiseXor", {"z"}, 0}, {"Invert", {"y"}, 0},
    {"Bitcast", {"output"}, 0},
    /* Reductions, scans, arg-extrema. */
    {"All", {"output"}, 0}, {"Any", {"output"}, 0}, {"Max", {"output"}, 0},
    {"Min", {"output"}, 0}, {"Mean", {"output"}, 0}, {"Prod", {"output"}, 0},
    {"Sum", {"output"}, 0}, {"ArgMax", {"output"}, 0}, {"ArgMin", {"output"}, 0},
    {"Cumsum", {"out"}, 0}, {"Cumprod", {"out"}, 0},
    /* Matrix products, convolutions, pooling. */
    {"BatchMatMul", {"output"}, 0}, {"BatchMatMulV3", {"output"}, 0},
    {"Einsum", {"output"}, 0}, {"MatrixBandPart", {"band"}, 0},
    {"BiasAdd", {"output"}, 0}, {"BiasAddV1", {"output"}, 0},
    {"Conv2D", {"output"}, 0}, {"Conv2DBackpropInput", {"output"}, 0},
    {"Conv3D", {"output"}, 0}, {"Conv3DBackpropInputV2", {"output"}, 0},
    {"DepthwiseConv2dNative", {"output"}, 0}, {"_FusedConv2D", {"output"}, 0},
    {"_FusedConv3D", {"output"}, 0}, {"_FusedDepthwiseConv2dNative", {"output"}, 0},
    {"_FusedMatMul", {"product"}, 0}, {"MaxPoolV2", {"output"}, 0},
    {"MaxPool3D", {"output"}, 0}, {"AvgPool3D", {"output"}, 0},
    /* Shapes, layout, indexing. */
    {"Const", {"output"}, 0}, {"Identity", {"output"}, 0}, {"Snapshot", {"output"}, 0},
    {"StopGradient", {"output"}, 0}, {"PreventGradient", {"output"}, 0},
    {"EnsureShape", {"output"}, 0}, {"Placeholder", {"output"}, 0},
    {"PlaceholderV2", {"output"}, 0}, {"PlaceholderWithDefault", {"output"}, 0},
    {"Shape", {"output"}, 0}, {"Size", {"output"}, 0}, {"Rank", {"output"}, 0},
    {"Reshape", {"output"}, 0}, {"Squeeze", {"output"}, 0}, {"ExpandDims", {"output"}, 0},
    {"BroadcastTo", {"output"}, 0}, {"Fill", {"output"}, 0}, {"Range", {"output"}, 0},
    {"Tile", {"output"}, 0}, {"Pack", {"output"}, 0}, {"Concat", {"output"}, 0},
    {"ConcatV2", {"output"}, 0}, {"Slice", {"output"}, 0}, {"StridedSlice", {"output"}, 0},
    {"Pad", {"output"}, 0}, {"PadV2", {"output"}, 0}, {"MirrorPad", {"output"}, 0},
    {"Reverse", {"output"}, 0}, {"ReverseV2", {"output"}, 0}, {"OneHot", {"output"}, 0},
    {"Gather", {"output"}, 0}, {"GatherV2", {"output"}, 0}, {"GatherNd", {"output"}, 0},
    {"ResourceGather", {"output"}, 0}, {"ResourceGatherNd", {"output"}, 0},
    {"ScatterNd", {"output"}, 0}, {"TensorScatterUpdate", {"output"}, 0},
    {"SparseToDense", {"dense"}, 0},
    {"BatchToSpaceND", {"output"}, 0}, {"SpaceToBatchND", {"output"}, 0},
    {"DepthToSpace", {"output"}, 0}, {"SpaceToDepth", {"output"}, 0},
    {"ExtractImagePatches", {"patches"}, 0},
    {"ImageProjectiveTransformV2", {"transformed_images"}, 0},
    {"ImageProjectiveTransformV3", {"transformed_images"}, 0},
    /* Non-max suppression (kn_cpu_nms.c). */
    {"NonMaxSuppressionV2", {"selected_indices"}, 0},
    {"NonMaxSuppressionV3", {"selected_indices"}, 0},
    {"NonMaxSuppressionV4", {"selected_indices", "valid_outputs"}, 0},
    {"NonMaxSuppressionV5", {"selected_indices", "selected_scores", "valid_outputs"}, 0},
    {"CombinedNonMaxSuppression", {"nmsed_boxes", "nmsed_scores", "nmsed_classes",
                                   "valid_detections"}, 0},
    /* FFT and complex numbers (kn_cpu_fft.c, kn_cpu_complex.c). */
    {"FFT", {"output"}, 0}, {"IFFT", {"output"}, 0}, {"FFT2D", {"output"}, 0},
    {"IFFT2D", {"output"}, 0}, {"FFT3D", {"output"}, 0}, {"IFFT3D", {"output"}, 0},
    {"RFFT", {"output"}, 0}, {"RFFT2D", {"output"}, 0}, {"RFFT3D", {"output"}, 0},
    {"IRFFT", {"output"}, 0}, {"IRFFT2D", {"output"}, 0}, {"IRFFT3D", {"output"}, 0},
    {"ComplexAbs", {"y"}, 0}, {"Real", {"output"}, 0}, {"Imag", {"output"}, 0},
    {"Complex", {"out"}, 0}, {"Angle", {"output"}, 0}, {"Conj", {"output"}, 0},
    /* Segments. */
    {"SegmentSum", {"output"}, 0}, {"UnsortedSegmentSum", {"output"}, 0},
    {"SparseSegmentSum", {"output"}, 0}, {"SparseSegmentMean", {"output"}, 0},
    {"SparseSegmentSqrtN", {"output"}, 0}, {"SparseSegmentSumWithNumSegments", {"output"}, 0},
    {"SparseSegmentMeanWithNumSegments", {"output"}, 0},
    {"SparseSegmentSqrtNWithNumSegments", {"output"}, 0},
    /* Strings, random, variables, tables, TF1 reference loops. */
    {"StringToHashBucketFast", {"output"}, 0}, {"StringToHashBucketStrong", {"output"}, 0},
    {"StringToNumber", {"output"}, 0}, {"StringToHashBucket", {"output"}, 0},
    {"StringLength", {"output"}, 0}, {"StringLower", {"output"}, 0},
    {"StringUpper", {"output"}, 0}, {"Substr", {"output"}, 0}, {"StringStrip", {"output"}, 0},
    {"StringSplitV2", {"indices", "values", "shape"}, 0},
    {"StringSplit", {"indices", "values", "shape"}, 0}, {"AsString", {"output"}, 0},
    {"RegexReplace", {"output"}, 0}, {"StaticRegexReplace", {"output"}, 0},
    {"RegexFullMatch", {"output"}, 0}, {"StaticRegexFullMatch", {"output"}, 0},
    {"UniqueV2", {"y", "idx"}, 0}, {"UniqueWithCounts", {"y", "idx", "count"}, 0},
    {"UniqueWithCountsV2", {"y", "idx", "count"}, 0},
    {"StatelessRandomGetAlg", {"alg"}, 0},
    {"StatelessRandomNormal", {"output"}, 0}, {"StatelessRandomNormalV2", {"output"}, 0},
    {"StatelessRandomUniform", {"output"}, 0}, {"StatelessRandomUniformV2", {"output"}, 0},
    {"StatelessRandomUniformIntV2", {"output"}, 0},
    {"VarIsInitializedOp", {"is_initialized"}, 0}, {"Variable", {"ref"}, 0},
    {"InitializeTableV2", {NULL}, 1}, {"InitializeTableFromTextFileV2", {NULL}, 1},
    {"LookupTableImportV2", {NULL}, 1}, {"LookupTableInsertV2", {NULL}, 1},
    {"RefEnter", {"output"}, 0}, {"RefExit", {"output"}, 0},
    {"RefNextIteration", {"output"}, 0}, {"RefSwitch", {"output_false", "output_true"}, 0},
    {"RefMerge", {"output", "value_index"}, 0},
    /* DICOM (runtime/dicom/dcm_ops.c) and TensorFlow I/O's decoder. */
    {"DcmDecodeWindow", {"output"}, 0}, {"DcmWindow", {"output"}, 0},
    {"DcmDecodeVolume", {"output", "geometry"}, 0}, {"IO>DecodeDICOMImage", {"output"}, 0},
    {"DcmEncodeSeg", {"output"}, 0}, {"_DcmResampleBack", {"output"}, 0},
    /* sliding-window inference (runtime/graph/rt_ops_sw.c), written by import-onnx */
    {"_SlidingWindow", {"output"}, 0},
    /* ONNX operators without a TF equivalent (kernels/cpu/kn_cpu_onnx.c). */
    {"OnnxGridSample", {"output"}, 0}, {"OnnxScatterND", {"output"}, 0},
    {"OnnxScatterElements", {"output"}, 0}, {"OnnxLpPool", {"output"}, 0},
    {"OnnxGatherElements", {"output"}, 0},
    {"OnnxPool", {"output", "indices"}, 0},
    {"OnnxNonMaxSuppression", {"output"}, 0}, {"OnnxDFT", {"output"}, 0},
    {"OnnxSTFT", {"output"}, 0}, {"OnnxMelWeightMatrix", {"output"}, 0},
    {"OnnxTensorScatter", {"output"}, 0},
    {"OnnxCausalConvWithState", {"output", "present_state"}, 0},
    {"OnnxUnique", {"y", "indices", "inverse_indices", "counts"}, 0},
    {"OnnxDet", {"output"}, 0}, {"OnnxReverseSequence", {"output"}, 0},
    {"OnnxRoiAlign", {"output"}, 0}, {"OnnxMaxUnpool", {"output"}, 0},
    {"OnnxCol2Im", {"output"}, 0}, {"OnnxDeformConv", {"output"}, 0},
    /* ONNX string ops (kernels/cpu/kn_cpu_onnx_str.c). */
    {"OnnxStringConcat", {"output"}, 0}, {"OnnxStringSplit", {"y", "z"}, 0},
    {"OnnxStringNormalizer", {"output"}, 0},
    {"OnnxRNN", {"y", "y_h", "y_c"}, 0},
    /* ONNX linear quantisation (kernels/cpu/kn_cpu_quant.c). */
    {"OnnxQuantizeLinear", {"output"}, 0}, {"OnnxDequantizeLinear", {"output"}, 0},
    {"OnnxDynamicQuantizeLinear", {"y", "y_scale", "y_zero_point"}, 0},
    {"OnnxMatMulInteger", {"output"}, 0}, {"OnnxQLinearMatMul", {"output"}, 0},
    {"OnnxConvInteger", {"output"}, 0}, {"OnnxQLinearConv", {"output"}, 0},
};
/* clang-format on */

static const Tensorflow__AttrValue *attr(const Tensorflow__NodeDef *d, const char *key) {
    if (d == NULL) return NULL;
    for (size_t i = 0; i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

static int list_len(const Tensorflow__NodeDef *d, const char *key) {
    const Tensorflow__AttrValue *a = attr(d, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST) return 0;
    return (int)a->list->n_type;
}

static int int_attr(const Tensorflow__NodeDef *d, const char *key) {
    const Tensorflow__AttrValue *a = attr(d, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_I) return 0;
    return (int)a->i;
}

static const Tensorflow__OpDef *model_opdef(const Tensorflow__MetaGraphDef *mg, const char *op) {
    if (mg == NULL || mg->meta_info_def == NULL || mg->meta_info_def->stripped_op_list == NULL)
        return NULL;
    const Tensorflow__OpList *l = mg->meta_info_def->stripped_op_list;
    for (size_t i = 0; i < l->n_op; i++)
        if (l->op[i]->name && strcmp(l->op[i]->name, op) == 0) return l->op[i];
    return NULL;
}

#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

/* The table's entries by op name, sorted once: every node of a graph looks
 * its op up (a linear scan cost a graph of 200,000 nodes a tenth of a second). */
static const opdef_entry *sorted[NBUILTIN];
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int by_op(const void *a, const void *b) {
    return strcmp((*(const opdef_entry *const *)a)->op, (*(const opdef_entry *const *)b)->op);
}

static void sort_builtin(void) {
    for (size_t i = 0; i < NBUILTIN; i++) sorted[i] = &builtin[i];
    qsort(sorted, NBUILTIN, sizeof(sorted[0]), by_op);
}

static const opdef_entry *builtin_opdef(const char *op) {
    pthread_once(&sorted_once, sort_builtin);
    size_t lo = 0, hi = NBUILTIN;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid]->op, op);
        if (c == 0) return sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int rt_opdef_listed(const char *op) {
    return builtin_opdef(op) != NULL;
}

/* Walks the output args; returns the flat index of `want` (or the total
 * count when want is NULL); -1 if want is not found. */
static int walk(const Tensorflow__MetaGraphDef *mg, const char *op, const Tensorflow__NodeDef *d,
                const char *want) {
    int idx = 0;
    const Tensorflow__OpDef *od = model_opdef(mg, op);
    if (od != NULL) {
        for (size_t i = 0; i < od->n_output_arg; i++) {
            const Tensorflow__OpDef__ArgDef *a = od->output_arg[i];
            if (want && strcmp(a->name, want) == 0) return idx;
            if (a->number_attr && a->number_attr[0])
                idx += int_attr(d, a->number_attr);
            else if (a->type_list_attr && a->type_list_attr[0])
                idx += list_len(d, a->type_list_attr);
            else
                idx += 1;
        }
        return want ? -1 : idx;
    }
    const opdef_entry *e = builtin_opdef(op);
    if (e == NULL) {
        if (want) return strcmp(want, "output") == 0 ? 0 : -1;
        return 1;
    }
    for (int i = 0; i < 7 && e->args[i]; i++) {
        const char *s = e->args[i];
        size_t nlen = strcspn(s, "*+");
        if (want && strlen(want) == nlen && strncmp(s, want, nlen) == 0) return idx;
        if (s[nlen] == '*')
            idx += int_attr(d, s + nlen + 1);
        else if (s[nlen] == '+')
            idx += list_len(d, s + nlen + 1);
        else
            idx += 1;
    }
    return want ? -1 : idx;
}

int rt_opdef_num_outputs(const Tensorflow__MetaGraphDef *mg, const char *op,
                         const Tensorflow__NodeDef *def) {
    return walk(mg, op, def, NULL);
}

int rt_opdef_output_index(const Tensorflow__MetaGraphDef *mg, const char *op,
                          const Tensorflow__NodeDef *def, const char *arg) {
    return walk(mg, op, def, arg);
}
