/* rt_onnx_1d.c - rank-3 (1-D: N, C, L) Conv, ConvTranspose, MaxPool and
 * AveragePool, converted as the same node at rank 4 with a height of 1:
 * x [N, C, L] -> [N, C, 1, L], weights [M, C/g, k] -> [M, C/g, 1, k] (the
 * same memory order), kernel_shape / strides / dilations [1, v], pads
 * [0, b, 0, e], output_padding [0, v]; the rank-4 handler converts that node
 * and its result is squeezed back. A height of 1 with these attributes
 * computes exactly the 1-D op. */
#include <string.h>

#include "rt_onnx_int.h"

/* Value v with a size-1 axis inserted at 2, under name `name`. */
static ms_status lift(rt__ox_conv *cv, rt__ox_value *v, const char *name, rt__ox_value **out) {
    int64_t d[4] = {v->dim[0], v->dim[1], 1, v->dim[2]};
    rt__ox_value *o = rt__ox_define(cv, name, v->dt, 4, d);
    if (v->f) {
        o->f = v->f; /* [A, B, k] and [A, B, 1, k] share the order */
    } else {
        const char *t;
        ms_status st = rt__ox_tf(cv, v, &t);
        if (st != MS_OK) return st;
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "ExpandDims", name);
        rt__tf_input(cv, nd, t);
        rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", name), 2));
        rt__tf_attr_type(cv, nd, "T", v->dt);
        rt__tf_attr_type(cv, nd, "Tdim", RT_DT_INT32);
        o->tf = nd->name;
    }
    *out = o;
    return MS_OK;
}

/* Attribute a of a 1-D node as its 2-D form (the same when not spatial). */
static const Onnx__AttributeProto *attr2d(rt__ox_conv *cv, const Onnx__AttributeProto *a) {
    const char *k = a->name ? a->name : "";
    int pads = strcmp(k, "pads") == 0;
    int lead0 = strcmp(k, "output_padding") == 0;
    if (!pads && !lead0 && strcmp(k, "kernel_shape") != 0 && strcmp(k, "strides") != 0 &&
        strcmp(k, "dilations") != 0 && strcmp(k, "output_shape") != 0)
        return a;
    Onnx__AttributeProto *b = rt__ox_alloc(cv, sizeof(*b));
    *b = *a;
    b->ints = rt__ox_alloc(cv, 4 * sizeof(int64_t));
    if (pads && a->n_ints == 2) {
        b->ints[1] = a->ints[0], b->ints[3] = a->ints[1];
        b->n_ints = 4;
    } else if (!pads && a->n_ints == 1) {
        b->ints[0] = lead0 ? 0 : 1, b->ints[1] = a->ints[0];
        b->n_ints = 2;
    } else {
        return a; /* a wrong count: the rank-4 handler refuses it */
    }
    return b;
}

ms_status rt__ox_op1d(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_handler h4) {
    rt__ox_value *X = NULL, *W = rt__ox_in(cv, n, 1), *X4, *W4 = NULL;
    ms_status st;
    const char *h = rt__ox_hint_of(n);
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        return rt__ox_err(cv, MS_ENOTSUP, "only the first output is supported at rank 3");
    if ((st = lift(cv, X, rt__ox_printf(cv, "%s/as_2d", h), &X4)) != MS_OK) return st;
    int conv = strcmp(n->op_type, "Conv") == 0 || strcmp(n->op_type, "ConvTranspose") == 0;
    if (conv && W != NULL && W->rank == 3 &&
        (st = lift(cv, W, rt__ox_printf(cv, "%s/w_2d", h), &W4)) != MS_OK)
        return st;
    Onnx__NodeProto m = *n;
    m.input = rt__ox_alloc(cv, (n->n_input + 1) * sizeof(char *));
    for (size_t i = 0; i < n->n_input; i++)
        m.input[i] = n->input[i];
    m.input[0] = (char *)X4->name;
    if (W4 != NULL) m.input[1] = (char *)W4->name;
    const char *y4 = rt__ox_printf(cv, "%s/out_2d", h);
    m.n_output = 1;
    m.output = rt__ox_alloc(cv, sizeof(char *));
    m.output[0] = (char *)y4;
    m.attribute = rt__ox_alloc(cv, (n->n_attribute + 1) * sizeof(*m.attribute));
    for (size_t i = 0; i < n->n_attribute; i++)
        m.attribute[i] = (Onnx__AttributeProto *)attr2d(cv, n->attribute[i]);
    if ((st = h4(cv, &m)) != MS_OK) return st;
    rt__ox_value *Y4 = rt__ox_find(cv, y4);
    const char *y;
    if (Y4 == NULL || Y4->rank != 4) return rt__ox_err(cv, MS_EINTERNAL, "no 2-D result");
    if ((st = rt__ox_tf(cv, Y4, &y)) != MS_OK) return st;
    Tensorflow__NodeDef *sq = rt__tf_node(cv, "Squeeze", h);
    rt__tf_input(cv, sq, y);
    int64_t ax = 2;
    rt__tf_attr_ilist(cv, sq, "squeeze_dims", &ax, 1);
    rt__tf_attr_type(cv, sq, "T", Y4->dt);
    int64_t od[3] = {Y4->dim[0], Y4->dim[1], Y4->dim[3]};
    rt__ox_def_out(cv, n, 0, Y4->dt, 3, od, sq->name);
    return MS_OK;
}
