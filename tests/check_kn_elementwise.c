/* check_kn_elementwise.c - CPU elementwise kernels: binary arithmetic and
 * comparisons with broadcasting, unary math, Select and Cast. Expected values
 * are worked out by hand in the comments. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "util_node.h"

#define S TU_SHAPE

static rt_tensor *bin(const char *op, rt_tensor *a, rt_tensor *b) {
    rt_tensor *in[2] = {a, b};
    rt_tensor *o = tu_run1(tu_node_new(op, "n"), in, 2);
    tu_unref(in, 2);
    return o;
}

static rt_tensor *un(Tensorflow__NodeDef *d, rt_tensor *a) {
    rt_tensor *o = tu_run1(d, &a, 1);
    rt_tensor_unref(a);
    return o;
}

/* ---- arithmetic ---- */

START_TEST(add_same_shape) {
    /* [1,2,3] + [10,20,30] = [11,22,33] */
    rt_tensor *o = bin("Add", TU_F32(S(3), 1, 2, 3), TU_F32(S(3), 10, 20, 30));
    TU_CHECK_F32(o, S(3), 0, 11, 22, 33);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(addv2_broadcast_row) {
    /* [[1,2,3],[4,5,6]] + [10,20,30] adds the row to each row. */
    rt_tensor *o = bin("AddV2", TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), TU_F32(S(3), 10, 20, 30));
    TU_CHECK_F32(o, S(2, 3), 0, 11, 22, 33, 14, 25, 36);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(add_broadcast_both) {
    /* (2,1) + (1,3): out[i][j] = a[i] + b[j]; a = [1,2], b = [10,20,30]. */
    rt_tensor *o = bin("Add", TU_F32(S(2, 1), 1, 2), TU_F32(S(1, 3), 10, 20, 30));
    TU_CHECK_F32(o, S(2, 3), 0, 11, 21, 31, 12, 22, 32);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(add_broadcast_middle) {
    /* (2,1,2) + (3,1) -> (2,3,2): out[i][j][k] = a[i][k] + b[j];
     * a = [[1,2],[3,4]], b = [10,20,30]. */
    rt_tensor *o = bin("Add", TU_F32(S(2, 1, 2), 1, 2, 3, 4), TU_F32(S(3, 1), 10, 20, 30));
    TU_CHECK_F32(o, S(2, 3, 2), 0, 11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(add_scalar_and_large) {
    /* scalar 0.5 + (3) */
    rt_tensor *o = bin("Add", TU_F32(TU_SCALAR, 0.5f), TU_F32(S(3), 1, 2, 3));
    TU_CHECK_F32(o, S(3), 0, 1.5f, 2.5f, 3.5f);
    rt_tensor_unref(o);
    /* 300x257 + (257): many parallel chunks crossing rows; element (r,c)
     * = (r*257 + c) + 1000*c. */
    rt_tensor *a = tu_iota_f32(S(300, 257), 0, 1), *b = tu_iota_f32(S(257), 0, 1000);
    o = bin("Add", a, b);
    tu_check_shape(o, RT_DT_FLOAT, S(300, 257));
    for (int r = 0; r < 300; r++)
        for (int c = 0; c < 257; c++)
            ck_assert_float_eq(rt_tensor_f32(o)[r * 257 + c], (float)(r * 257 + c + 1000 * c));
    rt_tensor_unref(o);
}
END_TEST

START_TEST(add_int_wraps) {
    /* int32: 2147483647 + 1 wraps to -2147483648; 5 + -7 = -2. */
    rt_tensor *o = bin("Add", TU_I32(S(2), INT32_MAX, 5), TU_I32(S(2), 1, -7));
    TU_CHECK_INT(o, RT_DT_INT32, S(2), INT32_MIN, -2);
    rt_tensor_unref(o);
    /* int64: 2^40 + 3 */
    o = bin("AddV2", TU_I64(S(1), 1099511627776LL), TU_I64(TU_SCALAR, 3));
    TU_CHECK_INT(o, RT_DT_INT64, S(1), 1099511627779LL);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(sub_mul_div) {
    /* [5,7] - [1,2] = [4,5]; 10 - [1,2,3] = [9,8,7] */
    rt_tensor *o = bin("Sub", TU_F32(S(2), 5, 7), TU_F32(S(2), 1, 2));
    TU_CHECK_F32(o, S(2), 0, 4, 5);
    rt_tensor_unref(o);
    o = bin("Sub", TU_F32(TU_SCALAR, 10), TU_F32(S(3), 1, 2, 3));
    TU_CHECK_F32(o, S(3), 0, 9, 8, 7);
    rt_tensor_unref(o);
    /* [2,3] * [4,5] = [8,15]; int32 [-3,4] * 6 = [-18,24] */
    o = bin("Mul", TU_F32(S(2), 2, 3), TU_F32(S(2), 4, 5));
    TU_CHECK_F32(o, S(2), 0, 8, 15);
    rt_tensor_unref(o);
    o = bin("Mul", TU_I32(S(2), -3, 4), TU_I32(TU_SCALAR, 6));
    TU_CHECK_INT(o, RT_DT_INT32, S(2), -18, 24);
    rt_tensor_unref(o);
    /* [1,3,1] / [2,4,0] = [0.5, 0.75, inf]; double 1/8 = 0.125 */
    o = bin("RealDiv", TU_F32(S(3), 1, 3, 1), TU_F32(S(3), 2, 4, 0));
    TU_CHECK_F32(o, S(3), 0, 0.5f, 0.75f, INFINITY);
    rt_tensor_unref(o);
    o = bin("RealDiv", TU_F64(S(1), 1), TU_F64(S(1), 8));
    TU_CHECK_F64(o, S(1), 0, 0.125);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(max_min_pow) {
    /* max([1,5,-2],[3,2,-1]) = [3,5,-1]; min = [1,2,-2] */
    rt_tensor *o = bin("Maximum", TU_F32(S(3), 1, 5, -2), TU_F32(S(3), 3, 2, -1));
    TU_CHECK_F32(o, S(3), 0, 3, 5, -1);
    rt_tensor_unref(o);
    o = bin("Minimum", TU_F32(S(3), 1, 5, -2), TU_F32(S(3), 3, 2, -1));
    TU_CHECK_F32(o, S(3), 0, 1, 2, -2);
    rt_tensor_unref(o);
    /* NaN on either side propagates. */
    o = bin("Maximum", TU_F32(S(2), NAN, 1), TU_F32(S(2), 1, NAN));
    TU_CHECK_F32(o, S(2), 0, NAN, NAN);
    rt_tensor_unref(o);
    /* int32 clamp-like: max([-4, 9], 0) = [0, 9] */
    o = bin("Maximum", TU_I32(S(2), -4, 9), TU_I32(TU_SCALAR, 0));
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 0, 9);
    rt_tensor_unref(o);
    /* 2^3 = 8, 9^0.5 = 3, 4^-1 = 0.25 */
    o = bin("Pow", TU_F32(S(3), 2, 9, 4), TU_F32(S(3), 3, 0.5f, -1));
    TU_CHECK_F32(o, S(3), 1e-6f, 8, 3, 0.25f);
    rt_tensor_unref(o);
}
END_TEST

/* ---- comparisons and logic ---- */

START_TEST(comparisons) {
    /* [1,2,3] against scalar 2 */
    static const struct {
        const char *op;
        int64_t want[3];
    } c[] = {{"Greater", {0, 0, 1}},
             {"GreaterEqual", {0, 1, 1}},
             {"Less", {1, 0, 0}},
             {"LessEqual", {1, 1, 0}},
             {"Equal", {0, 1, 0}}};
    for (int i = 0; i < 5; i++) {
        rt_tensor *o = bin(c[i].op, TU_F32(S(3), 1, 2, 3), TU_F32(TU_SCALAR, 2));
        tu_check_int(o, RT_DT_BOOL, S(3), c[i].want, 3);
        rt_tensor_unref(o);
        o = bin(c[i].op, TU_I32(S(3), 1, 2, 3), TU_I32(S(1), 2));
        tu_check_int(o, RT_DT_BOOL, S(3), c[i].want, 3);
        rt_tensor_unref(o);
    }
    /* broadcast (2,1) vs (2): [[1],[3]] > [2,0] = [[0,1],[1,1]] */
    rt_tensor *o = bin("Greater", TU_I64(S(2, 1), 1, 3), TU_I64(S(2), 2, 0));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2, 2), 0, 1, 1, 1);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(logical) {
    rt_tensor *o = bin("LogicalAnd", TU_BOOL(S(4), 1, 1, 0, 0), TU_BOOL(S(4), 1, 0, 1, 0));
    TU_CHECK_INT(o, RT_DT_BOOL, S(4), 1, 0, 0, 0);
    rt_tensor_unref(o);
    o = bin("LogicalOr", TU_BOOL(S(4), 1, 1, 0, 0), TU_BOOL(S(4), 1, 0, 1, 0));
    TU_CHECK_INT(o, RT_DT_BOOL, S(4), 1, 1, 1, 0);
    rt_tensor_unref(o);
    o = un(tu_node_new("LogicalNot", "n"), TU_BOOL(S(2), 1, 0));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 0, 1);
    rt_tensor_unref(o);
    o = bin("Equal", TU_BOOL(S(2), 1, 0), TU_BOOL(S(2), 1, 1));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 1, 0);
    rt_tensor_unref(o);
}
END_TEST

/* ---- unary ---- */

START_TEST(unary_math) {
    rt_tensor *o;
    /* Square: (-3)^2 = 9, 0.5^2 = 0.25; int32 (-4)^2 = 16 */
    o = un(tu_node_new("Square", "n"), TU_F32(S(2), -3, 0.5f));
    TU_CHECK_F32(o, S(2), 0, 9, 0.25f);
    rt_tensor_unref(o);
    o = un(tu_node_new("Square", "n"), TU_I32(S(1), -4));
    TU_CHECK_INT(o, RT_DT_INT32, S(1), 16);
    rt_tensor_unref(o);
    /* Sqrt(4) = 2, Sqrt(2.25) = 1.5; Rsqrt(4) = 0.5, Rsqrt(0.25) = 2 */
    o = un(tu_node_new("Sqrt", "n"), TU_F32(S(2), 4, 2.25f));
    TU_CHECK_F32(o, S(2), 1e-7f, 2, 1.5f);
    rt_tensor_unref(o);
    o = un(tu_node_new("Rsqrt", "n"), TU_F32(S(2), 4, 0.25f));
    TU_CHECK_F32(o, S(2), 1e-6f, 0.5f, 2);
    rt_tensor_unref(o);
    /* Exp(0) = 1, Exp(1) = e = 2.718281828 */
    o = un(tu_node_new("Exp", "n"), TU_F32(S(2), 0, 1));
    TU_CHECK_F32(o, S(2), 1e-6f, 1, 2.718281828f);
    rt_tensor_unref(o);
    /* Neg, Abs (float and int32) */
    o = un(tu_node_new("Neg", "n"), TU_F32(S(2), 1, -2));
    TU_CHECK_F32(o, S(2), 0, -1, 2);
    rt_tensor_unref(o);
    o = un(tu_node_new("Neg", "n"), TU_I64(S(1), 5));
    TU_CHECK_INT(o, RT_DT_INT64, S(1), -5);
    rt_tensor_unref(o);
    o = un(tu_node_new("Abs", "n"), TU_F32(S(2), -1.5f, 2));
    TU_CHECK_F32(o, S(2), 0, 1.5f, 2);
    rt_tensor_unref(o);
    o = un(tu_node_new("Abs", "n"), TU_I32(S(2), -7, 7));
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 7, 7);
    rt_tensor_unref(o);
    /* Floor(-1.5) = -2, Floor(1.5) = 1, Floor(2) = 2 */
    o = un(tu_node_new("Floor", "n"), TU_F32(S(3), -1.5f, 1.5f, 2));
    TU_CHECK_F32(o, S(3), 0, -2, 1, 2);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(activations) {
    rt_tensor *o;
    o = un(tu_node_new("Relu", "n"), TU_F32(S(3), -1, 0, 2));
    TU_CHECK_F32(o, S(3), 0, 0, 0, 2);
    rt_tensor_unref(o);
    o = un(tu_node_new("Relu6", "n"), TU_F32(S(3), -1, 3, 7));
    TU_CHECK_F32(o, S(3), 0, 0, 3, 6);
    rt_tensor_unref(o);
    /* Sigmoid(0) = 0.5; Sigmoid(ln 3) = 1 / (1 + 1/3) = 0.75 */
    o = un(tu_node_new("Sigmoid", "n"), TU_F32(S(2), 0, logf(3)));
    TU_CHECK_F32(o, S(2), 1e-6f, 0.5f, 0.75f);
    rt_tensor_unref(o);
    /* Tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6 */
    o = un(tu_node_new("Tanh", "n"), TU_F32(S(2), 0, logf(2)));
    TU_CHECK_F32(o, S(2), 1e-6f, 0, 0.6f);
    rt_tensor_unref(o);
    /* LeakyRelu alpha 0.1: -2 -> -0.2, 3 -> 3; default alpha 0.2: -1 -> -0.2 */
    Tensorflow__NodeDef *d = tu_node_new("LeakyRelu", "n");
    tu_attr_f(d, "alpha", 0.1f);
    o = un(d, TU_F32(S(2), -2, 3));
    TU_CHECK_F32(o, S(2), 1e-7f, -0.2f, 3);
    rt_tensor_unref(o);
    o = un(tu_node_new("LeakyRelu", "n"), TU_F32(S(1), -1));
    TU_CHECK_F32(o, S(1), 1e-7f, -0.2f);
    rt_tensor_unref(o);
}
END_TEST

/* ---- Select ---- */

START_TEST(select_v1) {
    /* cond vector over the first dim: row 0 from t, row 1 from e. */
    rt_tensor *in[3] = {TU_BOOL(S(2), 1, 0), TU_F32(S(2, 2), 1, 2, 3, 4),
                        TU_F32(S(2, 2), 10, 20, 30, 40)};
    rt_tensor *o = tu_run1(tu_node_new("Select", "sel"), in, 3);
    TU_CHECK_F32(o, S(2, 2), 0, 1, 2, 30, 40);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* same-shape cond, int32 */
    rt_tensor *in2[3] = {TU_BOOL(S(3), 0, 1, 0), TU_I32(S(3), 1, 2, 3), TU_I32(S(3), 7, 8, 9)};
    o = tu_run1(tu_node_new("Select", "sel"), in2, 3);
    TU_CHECK_INT(o, RT_DT_INT32, S(3), 7, 2, 9);
    rt_tensor_unref(o);
    tu_unref(in2, 3);
}
END_TEST

START_TEST(select_v2_broadcast) {
    /* cond (2,1) = [[T],[F]], t scalar 1, e (3) = [5,6,7] -> [[1,1,1],[5,6,7]] */
    rt_tensor *in[3] = {TU_BOOL(S(2, 1), 1, 0), TU_F32(TU_SCALAR, 1), TU_F32(S(3), 5, 6, 7)};
    rt_tensor *o = tu_run1(tu_node_new("SelectV2", "sel"), in, 3);
    TU_CHECK_F32(o, S(2, 3), 0, 1, 1, 1, 5, 6, 7);
    rt_tensor_unref(o);
    tu_unref(in, 3);
}
END_TEST

/* ---- Cast ---- */

static rt_tensor *cast(rt_tensor *x, rt_dtype to) {
    Tensorflow__NodeDef *d = tu_node_new("Cast", "cast");
    tu_attr_type(d, "SrcT", x->dtype);
    tu_attr_type(d, "DstT", to);
    return un(d, x);
}

START_TEST(cast_float_int) {
    /* truncation toward zero; 3e9 saturates to INT32_MAX; NaN -> 0 */
    rt_tensor *o = cast(TU_F32(S(4), 1.7f, -1.7f, 3e9f, NAN), RT_DT_INT32);
    TU_CHECK_INT(o, RT_DT_INT32, S(4), 1, -1, INT32_MAX, 0);
    rt_tensor_unref(o);
    /* to uint8: -1 -> 0, 300 -> 255, 3.9 -> 3 */
    o = cast(TU_F32(S(3), -1, 300, 3.9f), RT_DT_UINT8);
    TU_CHECK_INT(o, RT_DT_UINT8, S(3), 0, 255, 3);
    rt_tensor_unref(o);
    o = cast(TU_I32(S(2), -5, 16777217), RT_DT_FLOAT);
    /* 16777217 = 2^24 + 1 is not a float: rounds to even 16777216 */
    TU_CHECK_F32(o, S(2), 0, -5, 16777216.0f);
    rt_tensor_unref(o);
    o = cast(TU_U8(S(2), 0, 255), RT_DT_FLOAT);
    TU_CHECK_F32(o, S(2), 0, 0, 255);
    rt_tensor_unref(o);
    rt_tensor *u16 = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_UINT16, &S(2), &u16), MS_OK);
    ((uint16_t *)u16->data)[0] = 65535;
    ((uint16_t *)u16->data)[1] = 1024;
    o = cast(u16, RT_DT_FLOAT);
    TU_CHECK_F32(o, S(2), 0, 65535, 1024);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(cast_int_widths_and_bool) {
    /* int64 2^32 + 5 -> int32 keeps the low 32 bits: 5; -1 -> -1 */
    rt_tensor *o = cast(TU_I64(S(2), 4294967301LL, -1), RT_DT_INT32);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 5, -1);
    rt_tensor_unref(o);
    o = cast(TU_I32(S(1), -5), RT_DT_INT64);
    TU_CHECK_INT(o, RT_DT_INT64, S(1), -5);
    rt_tensor_unref(o);
    /* float -> bool: nonzero is true */
    o = cast(TU_F32(S(3), 0, 0.5f, -2), RT_DT_BOOL);
    TU_CHECK_INT(o, RT_DT_BOOL, S(3), 0, 1, 1);
    rt_tensor_unref(o);
    o = cast(TU_BOOL(S(2), 1, 0), RT_DT_FLOAT);
    TU_CHECK_F32(o, S(2), 0, 1, 0);
    rt_tensor_unref(o);
    o = cast(TU_BOOL(S(2), 1, 0), RT_DT_INT64);
    TU_CHECK_INT(o, RT_DT_INT64, S(2), 1, 0);
    rt_tensor_unref(o);
    /* double -> float and float -> double */
    o = cast(TU_F64(S(1), 0.25), RT_DT_FLOAT);
    TU_CHECK_F32(o, S(1), 0, 0.25f);
    rt_tensor_unref(o);
    o = cast(TU_F32(S(1), 1.5f), RT_DT_DOUBLE);
    TU_CHECK_F64(o, S(1), 0, 1.5);
    rt_tensor_unref(o);
    /* int32 -> int8 wraps: 300 = 0x12C -> 0x2C = 44 */
    o = cast(TU_I32(S(1), 300), RT_DT_INT8);
    TU_CHECK_INT(o, RT_DT_INT8, S(1), 44);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(cast_half) {
    /* 1/3 -> half 0x3555 = (1 + 341/1024) / 4 = 0.333251953125; 1.0 -> 0x3C00;
     * 65520 overflows to inf (0x7C00); -2 -> 0xC000. */
    rt_tensor *h = cast(TU_F32(S(4), 1.0f / 3, 1, 65520, -2), RT_DT_HALF);
    tu_check_shape(h, RT_DT_HALF, S(4));
    const uint16_t *b = h->data;
    ck_assert_uint_eq(b[0], 0x3555);
    ck_assert_uint_eq(b[1], 0x3C00);
    ck_assert_uint_eq(b[2], 0x7C00);
    ck_assert_uint_eq(b[3], 0xC000);
    rt_tensor *o = cast(h, RT_DT_FLOAT);
    TU_CHECK_F32(o, S(4), 0, 0.333251953125f, 1, INFINITY, -2);
    rt_tensor_unref(o);
    /* bfloat16 of 1.0 is 0x3F80; 1 + 2^-8 is a tie that rounds to even 1.0 */
    rt_tensor *bf = cast(TU_F32(S(2), 1, 1.00390625f), RT_DT_BFLOAT16);
    ck_assert_uint_eq(((uint16_t *)bf->data)[0], 0x3F80);
    ck_assert_uint_eq(((uint16_t *)bf->data)[1], 0x3F80);
    rt_tensor_unref(bf);
}
END_TEST

/* ---- further ops ---- */

START_TEST(more_binary) {
    rt_tensor *o;
    o = bin("NotEqual", TU_F32(S(3), 1, 2, 3), TU_F32(TU_SCALAR, 2));
    TU_CHECK_INT(o, RT_DT_BOOL, S(3), 1, 0, 1);
    rt_tensor_unref(o);
    /* (1-3)^2 = 4, (5-2)^2 = 9 */
    o = bin("SquaredDifference", TU_F32(S(2), 1, 5), TU_F32(S(2), 3, 2));
    TU_CHECK_F32(o, S(2), 0, 4, 9);
    rt_tensor_unref(o);
    /* 1/0 -> 0, 2/4 = 0.5 */
    o = bin("DivNoNan", TU_F32(S(2), 1, 2), TU_F32(S(2), 0, 4));
    TU_CHECK_F32(o, S(2), 0, 0, 0.5f);
    rt_tensor_unref(o);
    /* floor(7/2) = 3, floor(-7/2) = -4 */
    o = bin("FloorDiv", TU_F32(S(2), 7, -7), TU_F32(TU_SCALAR, 2));
    TU_CHECK_F32(o, S(2), 0, 3, -4);
    rt_tensor_unref(o);
    /* integers round toward minus infinity: 7//2 = 3, -7//2 = -4, 7//-2 = -4,
     * -7//-2 = 3; INT32_MIN // -1 wraps to INT32_MIN instead of trapping */
    o = bin("FloorDiv", TU_I32(S(5), 7, -7, 7, -7, INT32_MIN), TU_I32(S(5), 2, 2, -2, -2, -1));
    TU_CHECK_INT(o, RT_DT_INT32, S(5), 3, -4, -4, 3, INT32_MIN);
    rt_tensor_unref(o);
    /* Python-style modulo: 7%3 = 1, -7%3 = 2, 7%-3 = -2, -7%-3 = -1 */
    o = bin("FloorMod", TU_I64(S(4), 7, -7, 7, -7), TU_I64(S(4), 3, 3, -3, -3));
    TU_CHECK_INT(o, RT_DT_INT64, S(4), 1, 2, -2, -1);
    rt_tensor_unref(o);
    /* 7.5 mod 2 = 1.5, -7.5 mod 2 = 0.5 */
    o = bin("FloorMod", TU_F32(S(2), 7.5f, -7.5f), TU_F32(TU_SCALAR, 2));
    TU_CHECK_F32(o, S(2), 1e-6f, 1.5f, 0.5f);
    rt_tensor_unref(o);
    rt_tensor *in[2] = {TU_I32(S(2), 1, 2), TU_I32(S(2), 1, 0)};
    tu_run_fail(tu_node_new("FloorDiv", "div0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_run_fail(tu_node_new("FloorMod", "mod0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_unref(in, 2);
}
END_TEST

/* Div, TruncateDiv, Mod, TruncateMod, Atan2, Xlogy as TensorFlow documents
 * them; the values are worked out in the comments. */
START_TEST(div_mod_atan2_xlogy) {
    rt_tensor *o;
    /* float Div is true division: 7/2 = 3.5, -7/2 = -3.5 */
    o = bin("Div", TU_F32(S(2), 7, -7), TU_F32(TU_SCALAR, 2));
    TU_CHECK_F32(o, S(2), 0, 3.5f, -3.5f);
    rt_tensor_unref(o);
    /* integer Div truncates toward zero (C): 7/2 = 3, -7/2 = -3, 7/-2 = -3,
     * -7/-2 = 3; INT32_MIN / -1 wraps to INT32_MIN instead of trapping */
    o = bin("Div", TU_I32(S(5), 7, -7, 7, -7, INT32_MIN), TU_I32(S(5), 2, 2, -2, -2, -1));
    TU_CHECK_INT(o, RT_DT_INT32, S(5), 3, -3, -3, 3, INT32_MIN);
    rt_tensor_unref(o);
    o = bin("TruncateDiv", TU_I64(S(4), 7, -7, 7, -7), TU_I64(S(4), 2, 2, -2, -2));
    TU_CHECK_INT(o, RT_DT_INT64, S(4), 3, -3, -3, 3);
    rt_tensor_unref(o);
    /* Mod = TruncateMod: truncatediv(x, y) * y + mod(x, y) = x, so the
     * remainder has the dividend's sign: 7%3 = 1, -7%3 = -1, 7%-3 = 1,
     * -7%-3 = -1; INT32_MIN % -1 = 0 */
    o = bin("Mod", TU_I32(S(5), 7, -7, 7, -7, INT32_MIN), TU_I32(S(5), 3, 3, -3, -3, -1));
    TU_CHECK_INT(o, RT_DT_INT32, S(5), 1, -1, 1, -1, 0);
    rt_tensor_unref(o);
    o = bin("TruncateMod", TU_I64(S(4), 7, -7, 7, -7), TU_I64(S(4), 3, 3, -3, -3));
    TU_CHECK_INT(o, RT_DT_INT64, S(4), 1, -1, 1, -1);
    rt_tensor_unref(o);
    /* fmod: 7.5 mod 2 = 1.5, -7.5 mod 2 = -1.5 (FloorMod gives 0.5) */
    o = bin("Mod", TU_F32(S(2), 7.5f, -7.5f), TU_F32(TU_SCALAR, 2));
    TU_CHECK_F32(o, S(2), 0, 1.5f, -1.5f);
    rt_tensor_unref(o);
    rt_tensor *in[2] = {TU_I32(S(2), 1, 2), TU_I32(S(2), 1, 0)};
    tu_run_fail(tu_node_new("Div", "div0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_run_fail(tu_node_new("Mod", "mod0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_unref(in, 2);
    /* Atan2(y, x), the angle of the point (x, y): (1, 1) pi/4, (-1, 1)
     * 3pi/4, (-1, -1) -3pi/4, (-1, 0) pi, (0, 0) 0 */
    o = bin("Atan2", TU_F32(S(5), 1, 1, -1, 0, 0), TU_F32(S(5), 1, -1, -1, -1, 0));
    TU_CHECK_F32(o, S(5), 1e-6f, 0.78539816f, 2.35619449f, -2.35619449f, 3.14159265f, 0);
    rt_tensor_unref(o);
    /* Xlogy(x, y) = x * log(y), 0 where x == 0 even for y = 0 or y < 0:
     * 2 * log(e) = 2, 3 * log(1) = 0, 0 * log(0) = 0, 0 * log(-1) = 0 */
    o = bin("Xlogy", TU_F64(S(4), 2, 3, 0, 0), TU_F64(S(4), 2.718281828459045, 1, 0, -1));
    tu_check_f64(o, S(4), (const double[]){2, 0, 0, 0}, 4, 1e-12);
    rt_tensor_unref(o);
    /* 1 * log(0) = -inf */
    o = bin("Xlogy", TU_F32(TU_SCALAR, 1), TU_F32(TU_SCALAR, 0));
    ck_assert(isinf(rt_tensor_f32(o)[0]) && rt_tensor_f32(o)[0] < 0);
    rt_tensor_unref(o);
    /* empty tensors: (0) with a scalar, (0, 3) with (3) broadcast to empty */
    static const char *const ops[] = {"Div", "Mod", "Atan2", "Xlogy"};
    for (int i = 0; i < 4; i++) {
        o = bin(ops[i], tu_t(RT_DT_FLOAT, S(0), (const float[]){0}, 0), TU_F32(TU_SCALAR, 2));
        tu_check_shape(o, RT_DT_FLOAT, S(0));
        rt_tensor_unref(o);
        o = bin(ops[i], tu_t(RT_DT_FLOAT, S(0, 3), (const float[]){0}, 0), TU_F32(S(3), 1, 2, 3));
        tu_check_shape(o, RT_DT_FLOAT, S(0, 3));
        rt_tensor_unref(o);
    }
    /* an empty integer divisor holds no zero */
    o = bin("Div", TU_I32(S(1), 5), tu_t(RT_DT_INT32, S(0), (const int32_t[]){0}, 0));
    tu_check_shape(o, RT_DT_INT32, S(0));
    rt_tensor_unref(o);
}
END_TEST

START_TEST(more_unary) {
    rt_tensor *o;
    o = un(tu_node_new("Ceil", "n"), TU_F32(S(2), -1.5f, 1.2f));
    TU_CHECK_F32(o, S(2), 0, -1, 2);
    rt_tensor_unref(o);
    /* half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -1.7 -> -2 */
    o = un(tu_node_new("Round", "n"), TU_F32(S(4), 0.5f, 1.5f, 2.5f, -1.7f));
    TU_CHECK_F32(o, S(4), 0, 0, 2, 2, -2);
    rt_tensor_unref(o);
    o = un(tu_node_new("Log", "n"), TU_F32(S(2), 1, 2.718281828f));
    TU_CHECK_F32(o, S(2), 1e-6f, 0, 1);
    rt_tensor_unref(o);
    o = un(tu_node_new("Reciprocal", "n"), TU_F32(S(2), 4, -0.5f));
    TU_CHECK_F32(o, S(2), 0, 0.25f, -2);
    rt_tensor_unref(o);
    /* softplus(0) = ln 2 = 0.6931472; softplus(100) = 100; softplus(-100) ~ e^-100 ~ 0 */
    o = un(tu_node_new("Softplus", "n"), TU_F32(S(3), 0, 100, -100));
    TU_CHECK_F32(o, S(3), 1e-6f, 0.6931472f, 100, 0);
    rt_tensor_unref(o);
    /* elu(-1) = e^-1 - 1 = -0.6321206 */
    o = un(tu_node_new("Elu", "n"), TU_F32(S(2), -1, 2));
    TU_CHECK_F32(o, S(2), 1e-6f, -0.6321206f, 2);
    rt_tensor_unref(o);
    /* selu(1) = 1.0507010; selu(-1) = 1.0507010 * 1.6732632 * (e^-1 - 1) = -1.1113307 */
    o = un(tu_node_new("Selu", "n"), TU_F32(S(2), 1, -1));
    TU_CHECK_F32(o, S(2), 1e-6f, 1.0507010f, -1.1113307f);
    rt_tensor_unref(o);
    /* erf(1) = 0.8427008 */
    o = un(tu_node_new("Erf", "n"), TU_F32(S(2), 0, 1));
    TU_CHECK_F32(o, S(2), 1e-6f, 0, 0.8427008f);
    rt_tensor_unref(o);
    o = un(tu_node_new("Sign", "n"), TU_F32(S(3), -3, 0, 2));
    TU_CHECK_F32(o, S(3), 0, -1, 0, 1);
    rt_tensor_unref(o);
    o = un(tu_node_new("Sign", "n"), TU_I32(S(3), -5, 0, 9));
    TU_CHECK_INT(o, RT_DT_INT32, S(3), -1, 0, 1);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(fill_like_addn) {
    rt_tensor *o = un(tu_node_new("ZerosLike", "z"), TU_I32(S(2), 5, 6));
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 0, 0);
    rt_tensor_unref(o);
    o = un(tu_node_new("OnesLike", "o"), TU_F32(S(2, 1), 5, 6));
    TU_CHECK_F32(o, S(2, 1), 0, 1, 1);
    rt_tensor_unref(o);
    rt_tensor *in[3] = {TU_F32(S(2), 1, 2), TU_F32(S(2), 10, 20), TU_F32(S(2), 100, 200)};
    Tensorflow__NodeDef *d = tu_node_new("AddN", "sum");
    tu_attr_i(d, "N", 3);
    o = tu_run1(d, in, 3);
    TU_CHECK_F32(o, S(2), 0, 111, 222);
    rt_tensor_unref(o);
    rt_tensor_unref(in[2]);
    in[2] = TU_F32(S(1), 1);
    tu_run_fail(tu_node_new("AddN", "bad_addn"), in, 3, 1, MS_EINVAL, "differs");
    tu_unref(in, 3);
}
END_TEST

/* ---- errors ---- */

START_TEST(errors) {
    rt_tensor *a = TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), *b = TU_F32(S(2), 1, 2);
    rt_tensor *in[2] = {a, b};
    tu_run_fail(tu_node_new("Add", "bad_add"), in, 2, 1, MS_EINVAL, "incompatible");
    rt_tensor *c = TU_I32(S(3), 1, 2, 3);
    rt_tensor *in2[2] = {a, c};
    tu_run_fail(tu_node_new("Mul", "mixed"), in2, 2, 1, MS_EINVAL, "dtypes");
    rt_tensor *in3[2] = {c, c};
    tu_run_fail(tu_node_new("RealDiv", "intdiv"), in3, 2, 1, MS_ENOTSUP, "DT_INT32");
    tu_run_fail(tu_node_new("LogicalAnd", "notbool"), in, 2, 1, MS_ENOTSUP, NULL);
    /* Select v1: cond of length 3 for t of shape (2,3) */
    rt_tensor *cond = TU_BOOL(S(3), 1, 0, 1);
    rt_tensor *in4[3] = {cond, a, a};
    tu_run_fail(tu_node_new("Select", "badsel"), in4, 3, 1, MS_EINVAL, "condition");
    /* Cast without DstT fails in prepare */
    tu_run_fail(tu_node_new("Cast", "nodst"), &a, 1, 1, MS_EINVAL, "DstT");
    rt_tensor_unref(a);
    rt_tensor_unref(b);
    rt_tensor_unref(c);
    rt_tensor_unref(cond);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_elementwise");
    struct {
        const char *name;
        const TTest *t;
    } tests[] = {
        {"add", add_same_shape},
        {"broadcast", addv2_broadcast_row},
        {"broadcast", add_broadcast_both},
        {"broadcast", add_broadcast_middle},
        {"broadcast", add_scalar_and_large},
        {"int", add_int_wraps},
        {"arith", sub_mul_div},
        {"arith", max_min_pow},
        {"compare", comparisons},
        {"logical", logical},
        {"unary", unary_math},
        {"unary", activations},
        {"select", select_v1},
        {"select", select_v2_broadcast},
        {"cast", cast_float_int},
        {"cast", cast_int_widths_and_bool},
        {"cast", cast_half},
        {"errors", errors},
        {"more", more_binary},
        {"more", div_mod_atan2_xlogy},
        {"more", more_unary},
        {"more", fill_like_addn},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_test(tc, tests[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
