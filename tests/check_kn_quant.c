/* check_kn_quant.c - ONNX linear quantisation ops (kernels/cpu/kn_cpu_quant.c):
 * OnnxQuantizeLinear, OnnxDequantizeLinear, OnnxDynamicQuantizeLinear,
 * OnnxMatMulInteger, OnnxQLinearMatMul, OnnxConvInteger, OnnxQLinearConv, against values worked out by hand
 * from the ONNX definitions (comments give the arithmetic): rounding ties go
 * to even, results saturate, per-axis and blocked scales, empty tensors. */
#include <check.h>

#include "util_node.h"

static Tensorflow__NodeDef *qnode(const char *op, rt_dtype t, int has_zp, int axis, int block) {
    Tensorflow__NodeDef *d = tu_node_new(op, "q");
    tu_attr_type(d, "T", t);
    tu_attr_i(d, "has_zp", has_zp);
    tu_attr_i(d, "axis", axis);
    tu_attr_i(d, "block_size", block);
    return d;
}

START_TEST(test_quantize_ties_saturation) {
    /* scale 1, zero point 10: rint(2.5) = 2 -> 12, rint(3.5) = 4 -> 14,
     * rint(-2.5) = -2 -> 8, 1000 -> 255 (saturated), -1 -> 9, 0.49 -> 10;
     * -20 -> -10 -> 0 (saturated low). */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(7), 2.5f, 3.5f, -2.5f, 1000, -1, 0.49f, -20),
                        TU_F32(TU_SCALAR, 1), TU_U8(TU_SCALAR, 10)};
    rt_tensor *o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_UINT8, 1, 0, 0), in, 3);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(7), 12, 14, 8, 255, 9, 10, 0);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* int8 without a zero point, scale 2: -600/2 = -300 -> -128, 255/2 =
     * 127.5 -> 128 -> 127, -257/2 = -128.5 -> -128, 1/2 = 0.5 -> 0,
     * 3/2 = 1.5 -> 2. */
    rt_tensor *in2[2] = {TU_F32(TU_SHAPE(5), -600, 255, -257, 1, 3), TU_F32(TU_SHAPE(1), 2)};
    o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_INT8, 0, 0, 0), in2, 2);
    TU_CHECK_INT(o, RT_DT_INT8, TU_SHAPE(5), -128, 127, -128, 0, 2);
    rt_tensor_unref(o);
    /* int16 and uint16 ranges: 80000 / 2 = 40000 -> 32767 (int16), 40000
     * (uint16); -40000 -> -32768 (int16), 0 (uint16); 150000 / 2 = 75000 ->
     * 65535 (uint16). */
    rt_tensor_unref(in2[0]);
    in2[0] = TU_F32(TU_SHAPE(3), 80000, -80000, 150000);
    o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_INT16, 0, 0, 0), in2, 2);
    TU_CHECK_INT(o, RT_DT_INT16, TU_SHAPE(3), 32767, -32768, 32767);
    rt_tensor_unref(o);
    o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_UINT16, 0, 0, 0), in2, 2);
    TU_CHECK_INT(o, RT_DT_UINT16, TU_SHAPE(3), 40000, 0, 65535);
    rt_tensor_unref(o);
    tu_unref(in2, 2);
}
END_TEST

START_TEST(test_per_axis) {
    /* x (2, 3), axis 1, scales (1, 2, 4), int8 zero points (0, 1, -1):
     * row 0: 1/1 = 1; 2/2 = 1 + 1 = 2; 3/4 = 0.75 -> 1 - 1 = 0;
     * row 1: 4; 5/2 = 2.5 -> 2 + 1 = 3; 6/4 = 1.5 -> 2 - 1 = 1. */
    rt_tensor *s = TU_F32(TU_SHAPE(3), 1, 2, 4);
    rt_tensor *z = tu_t(RT_DT_INT8, TU_SHAPE(3), TU_NV(int8_t, 0, 1, -1));
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), s, z};
    rt_tensor *q = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_INT8, 1, 1, 0), in, 3);
    TU_CHECK_INT(q, RT_DT_INT8, TU_SHAPE(2, 3), 1, 2, 0, 4, 3, 1);
    /* Back: (x - zp) * s: row 0: 1, (2 - 1) * 2 = 2, (0 + 1) * 4 = 4;
     * row 1: 4, (3 - 1) * 2 = 4, (1 + 1) * 4 = 8. */
    rt_tensor *din[3] = {q, s, z};
    rt_tensor *o = tu_run1(qnode("OnnxDequantizeLinear", RT_DT_INT8, 1, 1, 0), din, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 1, 2, 4, 4, 4, 8);
    rt_tensor_unref(o);
    rt_tensor_unref(q);
    /* A scale of the wrong length along the axis fails the run. */
    rt_tensor *bad[2] = {in[0], TU_F32(TU_SHAPE(2), 1, 2)};
    tu_run_fail(qnode("OnnxQuantizeLinear", RT_DT_INT8, 0, 1, 0), bad, 2, 1, MS_EINVAL, "scale");
    tu_unref(bad, 2);
    tu_unref(in + 1, 2);
}
END_TEST

START_TEST(test_blocked_and_empty) {
    /* x (1, 4), axis 1, blocks of 2, scales (1, 10): 1, 2, 25/10 = 2.5 -> 2,
     * 35/10 = 3.5 -> 4. */
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(1, 4), 1, 2, 25, 35), TU_F32(TU_SHAPE(1, 2), 1, 10)};
    rt_tensor *o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_UINT8, 0, 1, 2), in, 2);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(1, 4), 1, 2, 2, 4);
    rt_tensor_unref(o);
    /* Three blocks' scales for two blocks fail. */
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(1, 3), 1, 1, 1);
    tu_run_fail(qnode("OnnxQuantizeLinear", RT_DT_UINT8, 0, 1, 2), in, 2, 1, MS_EINVAL, "blocks");
    tu_unref(in, 2);
    /* Empty x: empty result of the same shape, both ways. */
    rt_tensor *e[2] = {tu_t(RT_DT_FLOAT, TU_SHAPE(0, 3), NULL, 0), TU_F32(TU_SCALAR, 1)};
    o = tu_run1(qnode("OnnxQuantizeLinear", RT_DT_UINT8, 0, 0, 0), e, 2);
    tu_check_shape(o, RT_DT_UINT8, TU_SHAPE(0, 3));
    rt_tensor *de[2] = {o, e[1]};
    rt_tensor *f = tu_run1(qnode("OnnxDequantizeLinear", RT_DT_UINT8, 0, 0, 0), de, 2);
    tu_check_shape(f, RT_DT_FLOAT, TU_SHAPE(0, 3));
    rt_tensor_unref(f);
    rt_tensor_unref(o);
    tu_unref(e, 2);
}
END_TEST

START_TEST(test_dequantize_int32) {
    /* int32 x, zero point 0 absent: x * 0.5. */
    rt_tensor *in[2] = {TU_I32(TU_SHAPE(3), -3, 0, 7), TU_F32(TU_SCALAR, 0.5f)};
    rt_tensor *o = tu_run1(qnode("OnnxDequantizeLinear", RT_DT_INT32, 0, 0, 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(3), 0, -1.5f, 0, 3.5f);
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

START_TEST(test_dynamic_quantize) {
    /* min -51, max 204: scale (204 + 51) / 255 = 1, zero point 0 + 51 = 51;
     * y = rint(x) + 51: 0, 255, rint(2.5) = 2 -> 53. */
    rt_tensor *x = TU_F32(TU_SHAPE(3), -51, 204, 2.5f);
    rt_tensor *o[3] = {NULL, NULL, NULL};
    Tensorflow__NodeDef *d = tu_node_new("OnnxDynamicQuantizeLinear", "dq");
    ck_assert_int_eq(tu_run(d, &x, 1, o, 3), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[0], RT_DT_UINT8, TU_SHAPE(3), 0, 255, 53);
    TU_CHECK_F32(o[1], TU_SCALAR, 0, 1);
    TU_CHECK_INT(o[2], RT_DT_UINT8, TU_SCALAR, 51);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    /* Only positive values: the range starts at 0, zero point 0. */
    x = TU_F32(TU_SHAPE(2), 0.5f, 255);
    d = tu_node_new("OnnxDynamicQuantizeLinear", "dq");
    ck_assert_int_eq(tu_run(d, &x, 1, o, 3), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[0], RT_DT_UINT8, TU_SHAPE(2), 0, 255); /* rint(0.5) = 0 */
    TU_CHECK_INT(o[2], RT_DT_UINT8, TU_SCALAR, 0);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    x = tu_t(RT_DT_FLOAT, TU_SHAPE(0), NULL, 0);
    tu_run_fail(tu_node_new("OnnxDynamicQuantizeLinear", "dq"), &x, 1, 3, MS_EINVAL, "empty");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_matmul_integer) {
    /* (a - 1) @ (b - 5) = [[0, 1], [2, 3]] @ [[0, 1], [2, 3]] = [[2, 3], [6, 11]]. */
    rt_tensor *in[4] = {TU_U8(TU_SHAPE(2, 2), 1, 2, 3, 4), TU_U8(TU_SHAPE(2, 2), 5, 6, 7, 8),
                        TU_U8(TU_SCALAR, 1), TU_U8(TU_SCALAR, 5)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxMatMulInteger", "mm");
    tu_attr_i(d, "has_za", 1);
    tu_attr_i(d, "has_zb", 1);
    rt_tensor *o = tu_run1(d, in, 4);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 2, 3, 6, 11);
    rt_tensor_unref(o);
    /* Only b's zero point, per column (5, 6): a @ [[0, 0], [2, 2]] =
     * [[4, 4], [8, 8]]. */
    rt_tensor *in2[3] = {in[0], in[1], TU_U8(TU_SHAPE(2), 5, 6)};
    d = tu_node_new("OnnxMatMulInteger", "mm");
    tu_attr_i(d, "has_zb", 1);
    o = tu_run1(d, in2, 3);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 4, 4, 8, 8);
    rt_tensor_unref(o);
    rt_tensor_unref(in2[2]);
    tu_unref(in, 4);
}
END_TEST

START_TEST(test_qlinear_matmul) {
    /* a (1, 2) = (4, 4), scale 0.5; b - 1 = [[1, 0], [4, 254]], scale 1;
     * y scale 4, zero point 200: factor 0.5 * 1 / 4 = 0.125;
     * column 0: 4 + 16 = 20 -> 2.5 -> 2 -> 202;
     * column 1: 4 * 254 = 1016 -> 127 -> 327 -> 255 (saturated). */
    rt_tensor *in[8] = {TU_U8(TU_SHAPE(1, 2), 4, 4), TU_F32(TU_SCALAR, 0.5f),
                        TU_U8(TU_SCALAR, 0),         TU_U8(TU_SHAPE(2, 2), 2, 1, 5, 255),
                        TU_F32(TU_SCALAR, 1),        TU_U8(TU_SCALAR, 1),
                        TU_F32(TU_SCALAR, 4),        TU_U8(TU_SCALAR, 200)};
    rt_tensor *o = tu_run1(tu_node_new("OnnxQLinearMatMul", "qmm"), in, 8);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(1, 2), 202, 255);
    rt_tensor_unref(o);
    /* Mismatched inner dimensions fail. */
    rt_tensor_unref(in[3]);
    in[3] = TU_U8(TU_SHAPE(3, 1), 1, 2, 3);
    tu_run_fail(tu_node_new("OnnxQLinearMatMul", "qmm"), in, 8, 1, MS_EINVAL, "[K, N]");
    tu_unref(in, 8);
}
END_TEST

START_TEST(test_conv_integer) {
    /* x - 1 = [[0, 1], [2, 3]], w 2x2 of ones: one window, 0 + 1 + 2 + 3 = 6;
     * with one column of zero padding on the right a second window at
     * columns 1..2: 1 + 3 = 4. */
    rt_tensor *in[9] = {TU_U8(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4), TU_U8(TU_SHAPE(1, 1, 2, 2), 1, 1, 1, 1),
                        TU_U8(TU_SCALAR, 1)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxConvInteger", "ci");
    tu_attr_i(d, "has_za", 1);
    tu_attr_ints(d, "pads", 0, 0, 0, 1);
    rt_tensor *o = tu_run1(d, in, 3);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(1, 1, 1, 2), 6, 4);
    rt_tensor_unref(o);
    /* QLinearConv: x (as above) scale 0.5, zero point 1; w scale 1 (one per
     * output channel), zero point 0; y scale 2, zero point 0; B 4: factor
     * 0.5 * 1 / 2 = 0.25; (6 + 4) * 0.25 = 2.5 -> 2, (4 + 4) * 0.25 = 2. */
    rt_tensor *x = in[0], *w = in[1], *zx = in[2];
    rt_tensor *q[9] = {x, TU_F32(TU_SCALAR, 0.5f), zx, w, TU_F32(TU_SHAPE(1), 1),
                       TU_U8(TU_SCALAR, 0), TU_F32(TU_SCALAR, 2), TU_U8(TU_SCALAR, 0),
                       TU_I32(TU_SHAPE(1), 4)};
    d = tu_node_new("OnnxQLinearConv", "qc");
    tu_attr_i(d, "has_b", 1);
    tu_attr_ints(d, "pads", 0, 0, 0, 1);
    o = tu_run1(d, q, 9);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(1, 1, 1, 2), 2, 2);
    rt_tensor_unref(o);
    /* Channels that do not fit the group fail. */
    d = tu_node_new("OnnxConvInteger", "ci");
    tu_attr_i(d, "group", 2);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "channels");
    tu_unref(q + 4, 5);
    rt_tensor_unref(q[1]);
    tu_unref(in, 3);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"quantize_ties_saturation", test_quantize_ties_saturation},
        {"per_axis", test_per_axis},
        {"blocked_and_empty", test_blocked_and_empty},
        {"dequantize_int32", test_dequantize_int32},
        {"dynamic_quantize", test_dynamic_quantize},
        {"matmul_integer", test_matmul_integer},
        {"qlinear_matmul", test_qlinear_matmul},
        {"conv_integer", test_conv_integer},
    };
    return tu_suite_main("kn_quant", cases, sizeof(cases) / sizeof(cases[0]));
}
