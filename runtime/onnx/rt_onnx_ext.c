/* rt_onnx_ext.c - the table of the ops declared in rt_onnx_ext.h and the
 * GatherV2 helper the files behind it share. */
#include <string.h>

#include "rt_onnx_ext.h"

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } ext[] = {
    {"Attention", rt__ox_op_attention},
    {"RotaryEmbedding", rt__ox_op_rotary},
    {"NegativeLogLikelihoodLoss", rt__ox_op_nll_loss},
    {"SoftmaxCrossEntropyLoss", rt__ox_op_sce_loss},
};
/* clang-format on */

rt__ox_handler rt__ox_ext_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (strcmp(ext[i].op, op_type) == 0) return ext[i].fn;
    rt__ox_handler h = rt__ox_misc_handler(op_type);
    return h ? h : rt__ox_scatter_handler(op_type);
}

Tensorflow__NodeDef *rt__ox_gather_node(rt__ox_conv *cv, const char *h, const char *x, rt_dtype dt,
                                        const char *ix, rt_dtype idt, int axis) {
    Tensorflow__NodeDef *g = rt__tf_node(cv, "GatherV2", h);
    rt__tf_input(cv, g, x);
    rt__tf_input(cv, g, ix);
    rt__tf_input(cv, g, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", g->name), axis));
    rt__tf_attr_type(cv, g, "Tparams", dt);
    rt__tf_attr_type(cv, g, "Tindices", idt);
    rt__tf_attr_type(cv, g, "Taxis", RT_DT_INT32);
    rt__tf_attr_i(cv, g, "batch_dims", 0);
    return g;
}
