/* check_kn_dtypes.c - the CPU elementwise kernels on the narrower and
 * unsigned integer types, double, float16 and bfloat16 (the element types an
 * ONNX model brings): wrapping arithmetic, truncating division and both
 * remainders, unsigned comparisons, float16 / bfloat16 arithmetic rounded
 * to nearest even, Cast's rounding, saturation and NaN rules, shifts,
 * Bitcast, string equality, and Exp / Log / Cumprod / Sum computed in
 * double (not through float). Expected
 * values are worked out by hand in the comments. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util_node.h"

#define S TU_SHAPE
#define T8(shape, ...) tu_t(RT_DT_INT8, (shape), TU_NV(int8_t, __VA_ARGS__))
#define T16(shape, ...) tu_t(RT_DT_INT16, (shape), TU_NV(int16_t, __VA_ARGS__))
#define U16(shape, ...) tu_t(RT_DT_UINT16, (shape), TU_NV(uint16_t, __VA_ARGS__))
#define U32(shape, ...) tu_t(RT_DT_UINT32, (shape), TU_NV(uint32_t, __VA_ARGS__))
#define U64(shape, ...) tu_t(RT_DT_UINT64, (shape), TU_NV(uint64_t, __VA_ARGS__))
/* float16 / bfloat16 tensors from their bits */
#define H16(shape, ...) tu_t(RT_DT_HALF, (shape), TU_NV(uint16_t, __VA_ARGS__))
#define BF16(shape, ...) tu_t(RT_DT_BFLOAT16, (shape), TU_NV(uint16_t, __VA_ARGS__))

static rt_tensor *bin(const char *op, rt_tensor *a, rt_tensor *b) {
    rt_tensor *in[2] = {a, b};
    rt_tensor *o = tu_run1(tu_node_new(op, "n"), in, 2);
    tu_unref(in, 2);
    return o;
}

static rt_tensor *cast(rt_tensor *x, rt_dtype to) {
    Tensorflow__NodeDef *d = tu_node_new("Cast", "cast");
    tu_attr_type(d, "SrcT", x->dtype);
    tu_attr_type(d, "DstT", to);
    rt_tensor *o = tu_run1(d, &x, 1);
    rt_tensor_unref(x);
    return o;
}

/* o has dtype dt, shape s and exactly the bytes of want (n elements). */
static void check_bits(rt_tensor *o, rt_dtype dt, rt_shape s, const void *want, int n) {
    tu_check_shape(o, dt, s);
    ck_assert_int_eq(o->nelem, n);
    for (int i = 0; i < n; i++) {
        size_t es = rt_dtype_size(dt);
        ck_assert_msg(memcmp((const uint8_t *)o->data + i * es, (const uint8_t *)want + i * es,
                             es) == 0,
                      "element %d differs", i);
    }
    rt_tensor_unref(o);
}
#define CHECK_BITS(o, dt, T, shape, ...) check_bits((o), (dt), (shape), TU_NV(T, __VA_ARGS__))

/* ---- integers ---- */

START_TEST(int_arith_wraps) {
    /* int8: 100 + 100 = 200 - 256 = -56; -128 - 1 = 127 */
    CHECK_BITS(bin("AddV2", T8(S(2), 100, -128), T8(S(2), 100, 0)), RT_DT_INT8, int8_t, S(2), -56,
               -128);
    CHECK_BITS(bin("Sub", T8(S(1), -128), T8(S(1), 1)), RT_DT_INT8, int8_t, S(1), 127);
    /* uint8: 3 - 5 = 254 */
    CHECK_BITS(bin("Sub", TU_U8(S(1), 3), TU_U8(S(1), 5)), RT_DT_UINT8, uint8_t, S(1), 254);
    /* uint16: 300 * 300 = 90000 = 65536 + 24464; int16: 200 * 200 = 40000 - 65536 = -25536 */
    CHECK_BITS(bin("Mul", U16(S(1), 300), U16(S(1), 300)), RT_DT_UINT16, uint16_t, S(1), 24464);
    CHECK_BITS(bin("Mul", T16(S(1), 200), T16(S(1), 200)), RT_DT_INT16, int16_t, S(1), -25536);
    /* uint64: max + 2 = 1; uint32: 0 - 1 = 4294967295 */
    CHECK_BITS(bin("Add", U64(S(1), UINT64_MAX), U64(S(1), 2)), RT_DT_UINT64, uint64_t, S(1), 1);
    CHECK_BITS(bin("Sub", U32(S(1), 0), U32(S(1), 1)), RT_DT_UINT32, uint32_t, S(1), UINT32_MAX);
    /* broadcasting a scalar: max/min of uint32 [1, 4000000000] with 3 */
    CHECK_BITS(bin("Maximum", U32(S(2), 1, 4000000000u), U32(TU_SCALAR, 3)), RT_DT_UINT32,
               uint32_t, S(2), 3, 4000000000u);
    CHECK_BITS(bin("Minimum", T8(S(2), -5, 7), T8(TU_SCALAR, 3)), RT_DT_INT8, int8_t, S(2), -5, 3);
}
END_TEST

START_TEST(int_div_mod) {
    /* Div truncates: -7 / 2 = -3, 7 / -2 = -3; int8 -128 / -1 wraps to -128 */
    CHECK_BITS(bin("Div", T16(S(2), -7, 7), T16(S(2), 2, -2)), RT_DT_INT16, int16_t, S(2), -3, -3);
    CHECK_BITS(bin("Div", T8(S(1), -128), T8(S(1), -1)), RT_DT_INT8, int8_t, S(1), -128);
    /* unsigned: 4000000000 / 3 = 1333333333 */
    CHECK_BITS(bin("Div", U32(S(1), 4000000000u), U32(S(1), 3)), RT_DT_UINT32, uint32_t, S(1),
               1333333333u);
    /* FloorMod takes the divisor's sign: -7 mod 3 = 2, 7 mod -3 = -2;
     * TruncateMod the dividend's: -7 % 3 = -1, 7 % -3 = 1 */
    CHECK_BITS(bin("FloorMod", T8(S(2), -7, 7), T8(S(2), 3, -3)), RT_DT_INT8, int8_t, S(2), 2, -2);
    CHECK_BITS(bin("TruncateMod", T8(S(2), -7, 7), T8(S(2), 3, -3)), RT_DT_INT8, int8_t, S(2), -1,
               1);
    /* uint64 beyond int64: (2^63 + 5) mod 10 = 9223372036854775813 mod 10 = 3 */
    CHECK_BITS(bin("FloorMod", U64(S(1), (1ull << 63) + 5), U64(S(1), 10)), RT_DT_UINT64, uint64_t,
               S(1), 3);
    /* an integer zero divisor is an error, not a trap */
    rt_tensor *in[2] = {U16(S(2), 1, 2), U16(S(2), 1, 0)};
    tu_run_fail(tu_node_new("Div", "div0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_run_fail(tu_node_new("FloorMod", "mod0"), in, 2, 1, MS_EINVAL, "division by zero");
    tu_unref(in, 2);
}
END_TEST

START_TEST(int_compare_unsigned) {
    /* uint64 2^63 > 1 (a signed compare would say no); uint8 200 > 100 */
    rt_tensor *o = bin("Greater", U64(S(2), 1ull << 63, 0), U64(S(2), 1, 0));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 1, 0);
    rt_tensor_unref(o);
    o = bin("LessEqual", TU_U8(S(2), 200, 7), TU_U8(S(2), 100, 7));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 0, 1);
    rt_tensor_unref(o);
    o = bin("Equal", T16(S(3), -1, 2, 3), T16(S(3), -1, 3, 3));
    TU_CHECK_INT(o, RT_DT_BOOL, S(3), 1, 0, 1);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(empty_tensors) {
    /* (0) + (0) and (0, 3) + (3): empty results of the right type and shape */
    rt_tensor *o = bin("Add", tu_t(RT_DT_INT8, S(0), NULL, 0), tu_t(RT_DT_INT8, S(0), NULL, 0));
    tu_check_shape(o, RT_DT_INT8, S(0));
    rt_tensor_unref(o);
    o = bin("Mul", tu_t(RT_DT_HALF, S(0, 3), NULL, 0), H16(S(3), 0x3C00, 0x3C00, 0x3C00));
    tu_check_shape(o, RT_DT_HALF, S(0, 3));
    rt_tensor_unref(o);
    o = cast(tu_t(RT_DT_DOUBLE, S(2, 0), NULL, 0), RT_DT_BFLOAT16);
    tu_check_shape(o, RT_DT_BFLOAT16, S(2, 0));
    rt_tensor_unref(o);
}
END_TEST

/* ---- float16 / bfloat16 arithmetic ---- */

START_TEST(half_arith_rounds_to_even) {
    /* 1 + 2^-11 is halfway between 1 (0x3C00) and 1 + 2^-10 (0x3C01): even 0x3C00.
     * (1 + 2^-10) + 2^-11 is halfway between 0x3C01 and 0x3C02: even 0x3C02.
     * 2^-11 is 0x1000. */
    CHECK_BITS(bin("AddV2", H16(S(2), 0x3C00, 0x3C01), H16(S(2), 0x1000, 0x1000)), RT_DT_HALF,
               uint16_t, S(2), 0x3C00, 0x3C02);
    /* 60000 + 60000 overflows to inf (0x7C00); 60000 is 0x7B53 */
    CHECK_BITS(bin("Add", H16(S(1), 0x7B53), H16(S(1), 0x7B53)), RT_DT_HALF, uint16_t, S(1),
               0x7C00);
    /* Maximum propagates NaN (0x7E00); max(-2, 3) = 3 (0xC000, 0x4200) */
    CHECK_BITS(bin("Maximum", H16(S(2), 0x7E00, 0xC000), H16(S(2), 0x3C00, 0x4200)), RT_DT_HALF,
               uint16_t, S(2), 0x7E00, 0x4200);
    /* 1 / 3 = 0.333251953125 = 0x3555 */
    CHECK_BITS(bin("RealDiv", H16(S(1), 0x3C00), H16(S(1), 0x4200)), RT_DT_HALF, uint16_t, S(1),
               0x3555);
    /* fmod(-7, 3) = -1 (0xBC00); floor mod = 2 (0x4000); -7 = 0xC700, 3 = 0x4200 */
    CHECK_BITS(bin("TruncateMod", H16(S(1), 0xC700), H16(S(1), 0x4200)), RT_DT_HALF, uint16_t,
               S(1), 0xBC00);
    CHECK_BITS(bin("FloorMod", H16(S(1), 0xC700), H16(S(1), 0x4200)), RT_DT_HALF, uint16_t, S(1),
               0x4000);
    rt_tensor *o = bin("Less", H16(S(2), 0xC000, 0x7E00), H16(S(2), 0x3C00, 0x3C00));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 1, 0); /* -2 < 1; NaN < 1 is false */
    rt_tensor_unref(o);
    /* bfloat16: 1.5 * 1.5 = 2.25 = 0x4010 (1.5 = 0x3FC0); 1 + 2^-8 (a tie) -> 1.0 */
    CHECK_BITS(bin("Mul", BF16(S(1), 0x3FC0), BF16(S(1), 0x3FC0)), RT_DT_BFLOAT16, uint16_t, S(1),
               0x4010);
    CHECK_BITS(bin("Add", BF16(S(1), 0x3F80), BF16(S(1), 0x3B80)), RT_DT_BFLOAT16, uint16_t, S(1),
               0x3F80);
}
END_TEST

/* ---- Cast ---- */

START_TEST(cast_to_half_ties_and_range) {
    /* 2.5 is exact (0x4100); 2049 is halfway between 2048 (0x6800) and 2050
     * (0x6801): even 0x6800; 2051 between 0x6801 and 2052 (0x6802): 0x6802;
     * 65519 rounds down to 65504 (0x7BFF); 65520 is the tie above: inf;
     * 2^-24 is the smallest subnormal (0x0001); 2^-25 a tie with 0: 0;
     * NaN stays NaN (quiet, 0x7E00); -inf is 0xFC00. */
    CHECK_BITS(cast(TU_F32(S(10), 2.5f, 2049, 2051, 65519, 65520, 0x1p-24f, 0x1p-25f, NAN,
                           -INFINITY, -0.0f),
                    RT_DT_HALF),
               RT_DT_HALF, uint16_t, S(10), 0x4100, 0x6800, 0x6802, 0x7BFF, 0x7C00, 0x0001, 0x0000,
               0x7E00, 0xFC00, 0x8000);
    /* From double in one rounding: 1 + 2^-11 + 2^-40 lies above the tie
     * 1 + 2^-11, so it rounds up to 0x3C01; through float (which drops the
     * 2^-40) it would be the tie and round to even 0x3C00. */
    CHECK_BITS(cast(TU_F64(S(2), 1 + 0x1p-11 + 0x1p-40, 1.5 * 0x1p-25), RT_DT_HALF), RT_DT_HALF,
               uint16_t, S(2), 0x3C01, 0x0001);
    /* From integers: 2049 -> 0x6800, -70000 -> -inf */
    CHECK_BITS(cast(TU_I32(S(2), 2049, -70000), RT_DT_HALF), RT_DT_HALF, uint16_t, S(2), 0x6800,
               0xFC00);
}
END_TEST

START_TEST(cast_to_bf16) {
    /* 2.5 = 0x4020 exactly; 257 is halfway between 256 (0x4380) and 258
     * (0x4381): even 0x4380; 259 between 0x4381 and 260 (0x4382): 0x4382;
     * NaN stays NaN. */
    rt_tensor *o = cast(TU_F32(S(4), 2.5f, 257, 259, NAN), RT_DT_BFLOAT16);
    tu_check_shape(o, RT_DT_BFLOAT16, S(4));
    const uint16_t *b = o->data;
    ck_assert_uint_eq(b[0], 0x4020);
    ck_assert_uint_eq(b[1], 0x4380);
    ck_assert_uint_eq(b[2], 0x4382);
    ck_assert_uint_eq(b[3] & 0x7F80, 0x7F80);
    ck_assert_uint_ne(b[3] & 0x7F, 0);
    rt_tensor_unref(o);
    /* int64 2^60 + 2^52 + 1 lies just above the tie between 2^60 (0x5D80) and
     * 2^60 + 2^53 (0x5D81): 0x5D81. (double) alone would drop the 1 and
     * round the tie to even 0x5D80. */
    CHECK_BITS(cast(TU_I64(S(2), (1LL << 60) + (1LL << 52) + 1, (1LL << 60) + (1LL << 52)),
                    RT_DT_BFLOAT16),
               RT_DT_BFLOAT16, uint16_t, S(2), 0x5D81, 0x5D80);
    /* back to float: exact */
    o = cast(BF16(S(2), 0x4020, 0xC380), RT_DT_FLOAT);
    TU_CHECK_F32(o, S(2), 0, 2.5f, -256);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(cast_nan_inf_to_int_and_bool) {
    /* NaN -> 0, +inf saturates to the type's maximum, -inf to its minimum
     * (0 for unsigned); to bool NaN is "not zero": true. */
    CHECK_BITS(cast(TU_F32(S(3), NAN, INFINITY, -INFINITY), RT_DT_INT16), RT_DT_INT16, int16_t,
               S(3), 0, INT16_MAX, INT16_MIN);
    CHECK_BITS(cast(TU_F64(S(3), NAN, INFINITY, -INFINITY), RT_DT_UINT64), RT_DT_UINT64, uint64_t,
               S(3), 0, UINT64_MAX, 0);
    CHECK_BITS(cast(H16(S(3), 0x7E00, 0x0000, 0xBC00), RT_DT_BOOL), RT_DT_BOOL, uint8_t, S(3), 1, 0,
               1);
    /* float16 -2.75 (0xC180) truncates toward zero: -2 */
    CHECK_BITS(cast(H16(S(1), 0xC180), RT_DT_INT8), RT_DT_INT8, int8_t, S(1), -2);
    /* uint64 above int64's range to double and float */
    rt_tensor *o = cast(U64(S(1), UINT64_MAX), RT_DT_DOUBLE);
    TU_CHECK_F64(o, S(1), 0, 18446744073709551616.0);
    rt_tensor_unref(o);
    /* int16 -1 -> uint16 wraps to 65535 */
    CHECK_BITS(cast(T16(S(1), -1), RT_DT_UINT16), RT_DT_UINT16, uint16_t, S(1), 65535);
}
END_TEST

/* ---- shifts and Bitcast ---- */

START_TEST(shifts_and_bitcast) {
    /* uint8 1 << 7 = 128, 255 << 1 = 254 (wraps), 1 << 8 = 0 (by the width) */
    CHECK_BITS(bin("LeftShift", TU_U8(S(3), 1, 255, 1), TU_U8(S(3), 7, 1, 8)), RT_DT_UINT8,
               uint8_t, S(3), 128, 254, 0);
    /* uint64 2^63 >> 63 = 1 (logical, no sign); >> 64 = 0 */
    CHECK_BITS(bin("RightShift", U64(S(2), 1ull << 63, 1ull << 63), U64(S(2), 63, 64)),
               RT_DT_UINT64, uint64_t, S(2), 1, 0);
    /* float 1.0 is 0x3F800000 = 1065353216 as int32; -0.0 is 0x80000000 */
    Tensorflow__NodeDef *d = tu_node_new("Bitcast", "bc");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_type(d, "type", RT_DT_INT32);
    rt_tensor *x = TU_F32(S(2), 1.0f, -0.0f);
    rt_tensor *o = tu_run1(d, &x, 1);
    rt_tensor_unref(x);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 1065353216, INT32_MIN);
    rt_tensor_unref(o);
    /* element sizes must match */
    d = tu_node_new("Bitcast", "bc2");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_type(d, "type", RT_DT_INT64);
    x = TU_F32(S(2), 1.0f, 2.0f);
    tu_run_fail(d, &x, 1, 1, MS_ENOTSUP, "element sizes");
    rt_tensor_unref(x);
}
END_TEST

/* ---- bitwise and / or / xor / invert ---- */

START_TEST(bitwise_ops) {
    /* int8: -1 (0xFF) & 0x0F = 15, -128 (0x80) | 1 = -127, 0x55 ^ -1 = 0xAA = -86 */
    CHECK_BITS(bin("BitwiseAnd", T8(S(3), -1, -128, 0x55), T8(S(3), 0x0F, 1, -1)), RT_DT_INT8,
               int8_t, S(3), 15, -128 & 1, 0x55 & -1);
    CHECK_BITS(bin("BitwiseOr", T8(S(3), -1, -128, 0x55), T8(S(3), 0x0F, 1, -1)), RT_DT_INT8,
               int8_t, S(3), -1, -127, -1);
    CHECK_BITS(bin("BitwiseXor", T8(S(3), -1, -128, 0x55), T8(S(3), 0x0F, 1, -1)), RT_DT_INT8,
               int8_t, S(3), -16, -127, -86);
    /* uint64 broadcast of a (1) against (2): 0xF0..0 ^ {0xFF, high bit} */
    CHECK_BITS(bin("BitwiseXor", U64(S(2), 0xFFull, 1ull << 63), U64(S(1), 0x0Full)),
               RT_DT_UINT64, uint64_t, S(2), 0xF0ull, (1ull << 63) | 0x0Full);
    /* int32 and uint16 */
    CHECK_BITS(bin("BitwiseAnd", TU_I32(S(2), 6, INT32_MIN), TU_I32(S(2), 3, -1)), RT_DT_INT32,
               int32_t, S(2), 2, INT32_MIN);
    CHECK_BITS(bin("BitwiseOr", U16(S(2), 0x0100, 0), U16(S(2), 0x0001, 0)), RT_DT_UINT16,
               uint16_t, S(2), 0x0101, 0);
    /* empty in, empty out */
    rt_tensor *o = bin("BitwiseAnd", tu_t(RT_DT_INT64, S(0), NULL, 0), TU_I64(S(1), 5));
    tu_check_shape(o, RT_DT_INT64, S(0));
    rt_tensor_unref(o);
    /* Invert: int16 0 -> -1, 5 -> -6; uint8 0x0F -> 0xF0; uint32 0 -> max */
    rt_tensor *x = T16(S(2), 0, 5);
    o = tu_run1(tu_node_new("Invert", "inv"), &x, 1);
    rt_tensor_unref(x);
    CHECK_BITS(o, RT_DT_INT16, int16_t, S(2), -1, -6);
    x = TU_U8(S(1), 0x0F);
    o = tu_run1(tu_node_new("Invert", "inv"), &x, 1);
    rt_tensor_unref(x);
    CHECK_BITS(o, RT_DT_UINT8, uint8_t, S(1), 0xF0);
    x = U32(S(1), 0);
    o = tu_run1(tu_node_new("Invert", "inv"), &x, 1);
    rt_tensor_unref(x);
    CHECK_BITS(o, RT_DT_UINT32, uint32_t, S(1), UINT32_MAX);
    x = tu_t(RT_DT_INT32, S(2, 0), NULL, 0);
    o = tu_run1(tu_node_new("Invert", "inv"), &x, 1);
    rt_tensor_unref(x);
    tu_check_shape(o, RT_DT_INT32, S(2, 0));
    rt_tensor_unref(o);
    /* not for floats */
    x = TU_F32(S(1), 1.0f);
    tu_run_fail(tu_node_new("Invert", "inv"), &x, 1, 1, MS_ENOTSUP, "dtype");
    rt_tensor_unref(x);
}
END_TEST

/* ---- double (ONNX Exp, Log, CumProd, ReduceLogSumExp) ---- */

static rt_tensor *un(const char *op, rt_tensor *x) {
    rt_tensor *o = tu_run1(tu_node_new(op, "un"), &x, 1);
    rt_tensor_unref(x);
    return o;
}

START_TEST(double_exp_log_cumprod_logsumexp) {
    /* exp(0) = 1, exp(1) = e = 2.718281828459045; exp(1e-10) = 1 + 1e-10 +
     * 5e-21 = 1.0000000001 (through float it would be 1: 1e-10 is below
     * float's half ulp of 1); exp(10 ln 2) = 1024 */
    rt_tensor *o = un("Exp", TU_F64(S(4), 0, 1, 1e-10, 10 * M_LN2));
    TU_CHECK_F64(o, S(4), 1e-15, 1, 2.718281828459045, 1.0000000001, 1024);
    rt_tensor_unref(o);
    /* log(e) = 1; log(1e300) = 300 ln 10 = 690.7755278982137 (1e300 is
     * beyond float's range) */
    o = un("Log", TU_F64(S(2), M_E, 1e300));
    TU_CHECK_F64(o, S(2), 1e-15, 1, 690.7755278982137);
    rt_tensor_unref(o);
    /* Cumprod of [1 + 2^-40, 1 + 2^-40, 4]: 1 + 2^-40, (1 + 2^-40)^2 =
     * 1 + 2^-39 + 2^-80 (rounds to 1 + 2^-39), 4 + 2^-37; float would give
     * 1, 1, 4. Exclusive and reversed: [(1 + 2^-40) 4, 4, 1]. */
    double a = 1 + ldexp(1, -40);
    rt_tensor *in[2] = {TU_F64(S(3), a, a, 4), TU_I32(TU_SCALAR, 0)};
    o = tu_run1(tu_node_new("Cumprod", "cp"), in, 2);
    TU_CHECK_F64(o, S(3), 1e-16, a, 1 + ldexp(1, -39), 4 + ldexp(1, -37));
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("Cumprod", "cp");
    tu_attr_b(d, "exclusive", 1);
    tu_attr_b(d, "reverse", 1);
    o = tu_run1(d, in, 2);
    TU_CHECK_F64(o, S(3), 1e-16, 4 * a, 4, 1);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    /* ReduceLogSumExp as the converter lowers it, Log(Sum(Exp(x))), of
     * [100, 100]: exp(100) = 2.69e43 overflows float but not double;
     * log(2 exp(100)) = 100 + ln 2 = 100.69314718055995 */
    rt_tensor *r[2] = {un("Exp", TU_F64(S(2), 100, 100)), TU_I32(S(1), 0)};
    d = tu_node_new("Sum", "sum");
    tu_attr_b(d, "keep_dims", 0);
    o = un("Log", tu_run1(d, r, 2));
    tu_unref(r, 2);
    TU_CHECK_F64(o, TU_SCALAR, 1e-15, 100.69314718055995);
    rt_tensor_unref(o);
}
END_TEST

/* ---- strings ---- */

START_TEST(string_equal) {
    /* by bytes: "ab" == "ab", "ab" != "abc" (a prefix), "" == "", broadcast
     * of a scalar "x" */
    const char *a[] = {"ab", "ab", ""}, *b[] = {"ab", "abc", ""}, *c[] = {"x"};
    rt_tensor *o = bin("Equal", tu_strings(S(3), a, 3), tu_strings(S(3), b, 3));
    TU_CHECK_INT(o, RT_DT_BOOL, S(3), 1, 0, 1);
    rt_tensor_unref(o);
    const char *d[] = {"x", "y"};
    o = bin("NotEqual", tu_strings(S(2), d, 2), tu_strings(TU_SCALAR, c, 1));
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 0, 1);
    rt_tensor_unref(o);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"int", int_arith_wraps},
        {"int", int_div_mod},
        {"int", int_compare_unsigned},
        {"empty", empty_tensors},
        {"half", half_arith_rounds_to_even},
        {"cast", cast_to_half_ties_and_range},
        {"cast", cast_to_bf16},
        {"cast", cast_nan_inf_to_int_and_bool},
        {"bits", shifts_and_bitcast},
        {"bits", bitwise_ops},
        {"string", string_equal},
        {"double", double_exp_log_cumprod_logsumexp},
    };
    return tu_suite_main("kn_dtypes", cases, sizeof(cases) / sizeof(cases[0]));
}
