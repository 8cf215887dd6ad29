/* rt_onnx_ext.c - the table of the ops declared in rt_onnx_ext.h. */
#include <string.h>

#include "rt_onnx_ext.h"

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } ext[] = {
    {"Attention", rt__ox_op_attention},
    {"RotaryEmbedding", rt__ox_op_rotary},
    {"NegativeLogLikelihoodLoss", rt__ox_op_nll_loss},
    {"SoftmaxCrossEntropyLoss", rt__ox_op_sce_loss},
    {"STFT", rt__ox_op_stft},
    {"MelWeightMatrix", rt__ox_op_mel},
};
/* clang-format on */

rt__ox_handler rt__ox_ext_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (strcmp(ext[i].op, op_type) == 0) return ext[i].fn;
    rt__ox_handler h = rt__ox_misc_handler(op_type);
    if (h == NULL) h = rt__ox_scatter_handler(op_type);
    if (h == NULL) h = rt__ox_img_handler(op_type);
    if (h == NULL) h = rt__ox_str_handler(op_type);
    if (h == NULL) h = rt__ox_rnn_handler(op_type);
    if (h == NULL) h = rt__ox_ctrl_handler(op_type);
    return h ? h : rt__ox_quant_handler(op_type);
}
