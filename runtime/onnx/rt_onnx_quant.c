/* rt_onnx_quant.c - ONNX linear quantisation: QuantizeLinear (10-25),
 * DequantizeLinear (10-25), DynamicQuantizeLinear (11), MatMulInteger (10)
 * QLinearMatMul (10, 21), ConvInteger (10) and QLinearConv (10, 2-D) -> our own ops of kernels/cpu/kn_cpu_quant.c
 * (OnnxQuantizeLinear, ...), which compute as ONNX's definitions: float32
 * division, rint (half to even), saturation to the integer type.
 *
 * Integer types int8, uint8, int16, uint16, int4, uint4, int2, uint2 (and
 * int32 for DequantizeLinear's input), float8 (but e8m0) and float4e2m1;
 * scales float32. float16 / bfloat16 scales are refused by name, as are
 * precision other than float32.
 */
#include <string.h>

#include "rt_lowp.h"
#include "rt_onnx_ext.h"

/* 1 for the types quantisation writes (int32: dequantize only): the
 * integer ones and the low-precision ones but float8e8m0 (rt_lowp.h). */
static int q_int(rt_dtype dt, int with32) {
    return dt == RT_DT_INT8 || dt == RT_DT_UINT8 || dt == RT_DT_INT16 || dt == RT_DT_UINT16 ||
           (with32 && dt == RT_DT_INT32) || (rt_dtype_is_lowp(dt) && dt != RT_DT_FLOAT8_E8M0);
}

/* The quantised types, for messages. */
#define Q_TYPES                                                                                    \
    "int8, uint8, int16, uint16, int4, uint4, int2, uint2, float8e4m3fn, float8e4m3fnuz, "        \
    "float8e5m2, float8e5m2fnuz, float4e2m1"

/* Quantize/DequantizeLinear: x, scale, [zero_point]. */
static ms_status op_qdq(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int deq = strcmp(n->op_type, "DequantizeLinear") == 0;
    rt__ox_value *X, *S, *Z = rt__ox_in(cv, n, 2);
    const char *x, *s, *z = NULL, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK || (st = rt__ox_need(cv, n, 1, &S, &s)))
        return st;
    /* A float16 scale (DequantizeLinear: y is float16) is taken when x has at
     * most 8 significant bits: (x - zero_point) * scale is then exact in
     * float32, and its one rounding to float16 is y's. */
    int half = deq && S->dt == RT_DT_HALF &&
               (X->dt == RT_DT_INT8 || X->dt == RT_DT_UINT8 || rt_dtype_is_lowp(X->dt));
    if (S->dt != RT_DT_FLOAT && !half)
        return rt__ox_err(cv, MS_ENOTSUP, "x_scale is %s; supported: float%s",
                          rt_dtype_name(S->dt), deq ? " (float16 for 8-bit and smaller x)" : "");
    if (half) s = rt__tf_cast(cv, rt__ox_printf(cv, "%s/scale_f32", h), s, RT_DT_HALF, RT_DT_FLOAT);
    int64_t prec = rt__ox_attr_i(n, "precision", 0);
    if (prec != 0 && prec != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "precision %s; supported: float",
                          rt__ox_onnx_type_name((int32_t)prec));
    int64_t od = rt__ox_attr_i(n, "output_dtype", 0);
    rt_dtype qt = deq ? X->dt : RT_DT_UINT8;
    if (deq && od != 0 && od != (half ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16
                                      : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT))
        return rt__ox_err(cv, MS_ENOTSUP, "output_dtype %s; supported: float (the scale's)",
                          rt__ox_onnx_type_name((int32_t)od));
    if (!deq && od != 0) {
        qt = rt__ox_onnx_dtype((int32_t)od);
        if (!q_int(qt, 0))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "output_dtype %s; supported: " Q_TYPES,
                              rt__ox_onnx_type_name((int32_t)od));
    }
    if (Z != NULL) {
        if (!deq && od != 0 && Z->dt != qt)
            return rt__ox_err(cv, MS_EINVAL, "y_zero_point is %s but output_dtype is %s",
                              rt_dtype_name(Z->dt), rt_dtype_name(qt));
        if ((st = rt__ox_need(cv, n, 2, &Z, &z)) != MS_OK) return st;
        if (!deq) qt = Z->dt;
        if (Z->dt != qt)
            return rt__ox_err(cv, MS_EINVAL, "zero_point is %s, x is %s", rt_dtype_name(Z->dt),
                              rt_dtype_name(qt));
    }
    if (deq ? !q_int(X->dt, 1) : X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "x is %s; supported: %s", rt_dtype_name(X->dt),
                          deq ? Q_TYPES ", int32" : "float");
    if (!q_int(qt, deq))
        return rt__ox_err(cv, MS_ENOTSUP, "quantised type %s; supported: " Q_TYPES,
                          rt_dtype_name(qt));
    int64_t block = rt__ox_attr_i(n, "block_size", 0);
    int64_t ns = rt__ox_nelem(S);
    int per_tensor = block == 0 && S->rank >= 0 && S->rank <= 1 && ns == 1;
    int axis = 0;
    if (!per_tensor) {
        if (cv->opset < 13)
            return rt__ox_err(cv, MS_EINVAL, "scale must be one value before opset 13");
        axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 1), X->rank);
        if (X->rank < 0 || axis < 0)
            return rt__ox_err(cv, MS_EINVAL, "axis %lld out of range for x of rank %d",
                              (long long)rt__ox_attr_i(n, "axis", 1), X->rank);
        if (block < 0 || block > OX_DIM_MAX)
            return rt__ox_err(cv, MS_EINVAL, "block_size %lld out of range", (long long)block);
    }
    Tensorflow__NodeDef *d =
        rt__tf_node(cv, deq ? "OnnxDequantizeLinear" : "OnnxQuantizeLinear", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, s);
    if (z != NULL) rt__tf_input(cv, d, z);
    rt__tf_attr_i(cv, d, "has_zp", z != NULL);
    rt__tf_attr_i(cv, d, "axis", axis);
    rt__tf_attr_i(cv, d, "block_size", block);
    rt__tf_attr_type(cv, d, "T", qt);
    if (!deq) rt__tf_attr_i(cv, d, "saturate", rt__ox_attr_i(n, "saturate", 1) != 0);
    const char *y = d->name;
    if (half) y = rt__tf_cast(cv, rt__ox_printf(cv, "%s/half", h), y, RT_DT_FLOAT, RT_DT_HALF);
    rt__ox_def_out(cv, n, 0, half ? RT_DT_HALF : deq ? RT_DT_FLOAT : qt, X->rank, X->dim, y);
    return MS_OK;
}

/* DynamicQuantizeLinear 11: y, y_scale, y_zero_point from one node. */
static ms_status op_dynq(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "x is %s; supported: float", rt_dtype_name(X->dt));
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxDynamicQuantizeLinear", h);
    rt__tf_input(cv, d, x);
    rt__ox_def_out(cv, n, 0, RT_DT_UINT8, X->rank, X->dim, rt__tf_out(cv, d, 0));
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, 0, NULL, rt__tf_out(cv, d, 1));
    rt__ox_def_out(cv, n, 2, RT_DT_UINT8, 0, NULL, rt__tf_out(cv, d, 2));
    return MS_OK;
}

/* Output dims of a [..., M, K] @ [K, N] or [..., K, N]; 0 with *st set when
 * the ranks do not fit. */
static int mm_dims(rt__ox_conv *cv, const rt__ox_value *A, const rt__ox_value *B, int64_t *od,
                   ms_status *st) {
    if (A->rank < 2 || B->rank < 2 || (B->rank > 2 && B->rank != A->rank)) {
        *st = rt__ox_err(cv, MS_ENOTSUP,
                         "a of rank %d, b of rank %d; supported: [..., M, K] with [K, N] or "
                         "b of a's rank",
                         A->rank, B->rank);
        return 0;
    }
    memcpy(od, A->dim, (size_t)A->rank * sizeof(int64_t));
    od[A->rank - 1] = B->dim[B->rank - 1];
    return 1;
}

static int q_8bit(const rt__ox_value *v) {
    return v->dt == RT_DT_INT8 || v->dt == RT_DT_UINT8;
}

/* MatMulInteger 10: a, b, [a_zero_point], [b_zero_point] -> int32. */
static ms_status op_mmint(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *A, *B, *Z;
    const char *a, *b, *z, *h = rt__ox_hint_of(n);
    int64_t od[OX_MAXR];
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &A, &a)) != MS_OK || (st = rt__ox_need(cv, n, 1, &B, &b)))
        return st;
    if (!q_8bit(A) || !q_8bit(B))
        return rt__ox_err(cv, MS_ENOTSUP, "a %s, b %s; supported: int8, uint8",
                          rt_dtype_name(A->dt), rt_dtype_name(B->dt));
    if (!mm_dims(cv, A, B, od, &st)) return st;
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxMatMulInteger", h);
    rt__tf_input(cv, d, a);
    rt__tf_input(cv, d, b);
    for (int i = 2; i < 4; i++) {
        int has = rt__ox_in(cv, n, i) != NULL;
        if (has) {
            if ((st = rt__ox_need(cv, n, i, &Z, &z)) != MS_OK) return st;
            rt__tf_input(cv, d, z);
        }
        rt__tf_attr_i(cv, d, i == 2 ? "has_za" : "has_zb", has);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_INT32, A->rank, od, d->name);
    return MS_OK;
}

/* QLinearMatMul 10, 21: eight inputs, float32 scales, 8-bit integers. */
static ms_status op_qlmm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *v[8];
    const char *t[8], *h = rt__ox_hint_of(n);
    int64_t od[OX_MAXR];
    ms_status st;
    for (int i = 0; i < 8; i++)
        if ((st = rt__ox_need(cv, n, i, &v[i], &t[i])) != MS_OK) return st;
    if (v[1]->dt != RT_DT_FLOAT || v[4]->dt != RT_DT_FLOAT || v[6]->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "scales %s, %s, %s; supported: float",
                          rt_dtype_name(v[1]->dt), rt_dtype_name(v[4]->dt),
                          rt_dtype_name(v[6]->dt));
    if (!q_8bit(v[0]) || !q_8bit(v[3]) || !q_8bit(v[7]))
        return rt__ox_err(cv, MS_ENOTSUP, "a %s, b %s, y %s; supported: int8, uint8",
                          rt_dtype_name(v[0]->dt), rt_dtype_name(v[3]->dt),
                          rt_dtype_name(v[7]->dt));
    if (!mm_dims(cv, v[0], v[3], od, &st)) return st;
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxQLinearMatMul", h);
    for (int i = 0; i < 8; i++)
        rt__tf_input(cv, d, t[i]);
    rt__ox_def_out(cv, n, 0, v[7]->dt, v[0]->rank, od, d->name);
    return MS_OK;
}


/* ConvInteger 10 / QLinearConv 10: rank-4 (2-D) only, explicit pads or
 * auto_pad VALID; the attributes go to the op as explicit lists. */
static ms_status op_qconv(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int ql = strcmp(n->op_type, "QLinearConv") == 0;
    int wi = ql ? 3 : 1, nin = (int)n->n_input;
    rt__ox_value *X, *W, *v;
    const char *t, *h = rt__ox_hint_of(n);
    ms_status st;
    if (ql && nin < 8) return rt__ox_err(cv, MS_EINVAL, "%d inputs; QLinearConv needs 8 or 9", nin);
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, wi, &W, NULL)) != MS_OK)
        return st;
    if (X->rank != 4 || W->rank != 4)
        return rt__ox_err(cv, MS_ENOTSUP, "x of rank %d, w of rank %d; supported: 2-D (rank 4)",
                          X->rank, W->rank);
    if (!q_8bit(X) || !q_8bit(W))
        return rt__ox_err(cv, MS_ENOTSUP, "x %s, w %s; supported: int8, uint8",
                          rt_dtype_name(X->dt), rt_dtype_name(W->dt));
    if (!rt__ox_attr_is(n, "auto_pad", "NOTSET", "NOTSET") &&
        !rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET"))
        return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME_UPPER / SAME_LOWER; supported: NOTSET, "
                          "VALID");
    int64_t p[4] = {0, 0, 0, 0}, s2[2] = {1, 1}, d2[2] = {1, 1}, k[2];
    int np = rt__ox_attr_ints(n, "pads", p, 4), ns = rt__ox_attr_ints(n, "strides", s2, 2);
    int nd = rt__ox_attr_ints(n, "dilations", d2, 2), nk = rt__ox_attr_ints(n, "kernel_shape", k, 2);
    if ((np >= 0 && np != 4) || (ns >= 0 && ns != 2) || (nd >= 0 && nd != 2) ||
        (nk >= 0 && (nk != 2 || (W->dim[2] >= 0 && k[0] != W->dim[2]) ||
                     (W->dim[3] >= 0 && k[1] != W->dim[3]))))
        return rt__ox_err(cv, MS_EINVAL, "pads, strides, dilations or kernel_shape do not fit 2-D");
    for (int i = 0; i < 4; i++)
        if (rt__ox_out_of(p[i], 0, OX_DIM_MAX) || (i < 2 && (rt__ox_out_of(s2[i], 1, OX_DIM_MAX) ||
                                                             rt__ox_out_of(d2[i], 1, OX_DIM_MAX))))
            return rt__ox_err(cv, MS_EINVAL, "pads, strides or dilations out of range");
    int64_t g = rt__ox_attr_i(n, "group", 1);
    if (rt__ox_out_of(g, 1, OX_DIM_MAX)) return rt__ox_err(cv, MS_EINVAL, "group out of range");
    Tensorflow__NodeDef *d = rt__tf_node(cv, ql ? "OnnxQLinearConv" : "OnnxConvInteger", h);
    int present = 0;
    for (int i = 0; i < nin && i < (ql ? 9 : 4); i++) {
        if (rt__ox_in(cv, n, i) == NULL) {
            if (ql && i < 8) return rt__ox_err(cv, MS_EINVAL, "input %d is required", i);
            if (!ql) rt__tf_attr_i(cv, d, i == 2 ? "has_za" : "has_zb", 0);
            continue;
        }
        if ((st = rt__ox_need(cv, n, i, &v, &t)) != MS_OK) return st;
        if (ql && (i == 1 || i == 4 || i == 6) && v->dt != RT_DT_FLOAT)
            return rt__ox_err(cv, MS_ENOTSUP, "input %d is %s; scales supported: float", i,
                              rt_dtype_name(v->dt));
        rt__tf_input(cv, d, t);
        if (!ql && i >= 2) rt__tf_attr_i(cv, d, i == 2 ? "has_za" : "has_zb", 1);
        present = i;
    }
    if (ql) rt__tf_attr_i(cv, d, "has_b", present == 8);
    rt__tf_attr_ilist(cv, d, "pads", p, 4);
    rt__tf_attr_ilist(cv, d, "strides", s2, 2);
    rt__tf_attr_ilist(cv, d, "dilations", d2, 2);
    rt__tf_attr_i(cv, d, "group", g);
    int64_t od[4] = {X->dim[0], W->dim[0], -1, -1};
    for (int i = 0; i < 2; i++)
        if (X->dim[2 + i] >= 0 && W->dim[2 + i] >= 0) {
            int64_t o = (X->dim[2 + i] + p[i] + p[i + 2] - d2[i] * (W->dim[2 + i] - 1) - 1) / s2[i] + 1;
            od[2 + i] = o < 0 ? 0 : o;
        }
    rt_dtype yt = RT_DT_INT32;
    if (ql) {
        rt__ox_value *YZ = rt__ox_in(cv, n, 7);
        if (!q_8bit(YZ))
            return rt__ox_err(cv, MS_ENOTSUP, "y_zero_point is %s; supported: int8, uint8",
                              rt_dtype_name(YZ->dt));
        yt = YZ->dt;
    }
    rt__ox_def_out(cv, n, 0, yt, 4, od, d->name);
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } tab[] = {
    {"QuantizeLinear", op_qdq}, {"DequantizeLinear", op_qdq},
    {"DynamicQuantizeLinear", op_dynq}, {"MatMulInteger", op_mmint},
    {"QLinearMatMul", op_qlmm}, {"ConvInteger", op_qconv}, {"QLinearConv", op_qconv},
};
/* clang-format on */

rt__ox_handler rt__ox_quant_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(tab[i].op, op_type) == 0) return tab[i].fn;
    return NULL;
}
