/* check_lowp.c - the low-precision element types (common/rt_lowp.h) and the
 * CPU Cast kernel on them. Every float8 bit pattern is decoded and compared
 * with the value the format's definition gives, written out here per format
 * (sign, exponent field minus bias, implicit leading one, subnormals at
 * exponent 0, the format's NaN / Inf codes); encoding is checked to give
 * back every finite code, to round midpoints to the even neighbour, and at
 * the saturation boundaries with and without saturate (ONNX Cast 25). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rt_lowp.h"
#include "rt_tensor_proto.h"
#include "util_node.h"

#define S TU_SHAPE

typedef struct fmt {
    rt_dtype dt;
    int ebits, mbits, bias;
    double max;
} fmt;

static const fmt fmts[] = {
    {RT_DT_FLOAT8_E4M3FN, 4, 3, 7, 448.0},  {RT_DT_FLOAT8_E4M3FNUZ, 4, 3, 8, 240.0},
    {RT_DT_FLOAT8_E5M2, 5, 2, 15, 57344.0}, {RT_DT_FLOAT8_E5M2FNUZ, 5, 2, 16, 57344.0},
    {RT_DT_FLOAT4_E2M1FN, 2, 1, 1, 6.0},
};
#define NFMT (int)(sizeof(fmts) / sizeof(fmts[0]))

/* The code's value by the definition; *nan / *inf for the special codes. */
static double by_definition(const fmt *f, unsigned c, int *nan) {
    int nb = 1 + f->ebits + f->mbits;
    unsigned s = (c >> (nb - 1)) & 1, e = (c >> f->mbits) & ((1u << f->ebits) - 1),
             m = c & ((1u << f->mbits) - 1);
    *nan = 0;
    if ((f->dt == RT_DT_FLOAT8_E4M3FNUZ || f->dt == RT_DT_FLOAT8_E5M2FNUZ) && c == 0x80) *nan = 1;
    if (f->dt == RT_DT_FLOAT8_E4M3FN && e == 15 && m == 7) *nan = 1;
    if (f->dt == RT_DT_FLOAT8_E5M2 && e == 31) {
        if (m != 0)
            *nan = 1;
        else
            return s ? -INFINITY : INFINITY;
    }
    double v = e == 0 ? m * pow(2.0, 1 - f->bias) / (1 << f->mbits)
                      : (1.0 + (double)m / (1 << f->mbits)) * pow(2.0, (int)e - f->bias);
    return s ? -v : v;
}

START_TEST(decode_every_code) {
    for (int k = 0; k < NFMT; k++) {
        const fmt *f = &fmts[k];
        int n = 1 << (1 + f->ebits + f->mbits);
        double mx = 0;
        for (int c = 0; c < n; c++) {
            int nan;
            double want = by_definition(f, (unsigned)c, &nan);
            double got = rt_lowp_to_f64(f->dt, (uint8_t)c);
            if (nan) {
                ck_assert_msg(isnan(got), "%s 0x%02x: %g, want NaN", rt_dtype_name(f->dt), c, got);
                continue;
            }
            ck_assert_msg(got == want && signbit(got) == signbit(want), "%s 0x%02x: %g, want %g",
                          rt_dtype_name(f->dt), c, got, want);
            if (isfinite(got) && got > mx) mx = got;
        }
        ck_assert_msg(mx == f->max, "%s: largest %g, want %g", rt_dtype_name(f->dt), mx, f->max);
    }
    /* float4 reads the low 4 bits only */
    ck_assert(rt_lowp_to_f64(RT_DT_FLOAT4_E2M1FN, 0xF7) == 6.0);
    /* e8m0: 2^(c - 127); 0xFF NaN */
    for (int c = 0; c < 255; c++)
        ck_assert(rt_lowp_to_f64(RT_DT_FLOAT8_E8M0, (uint8_t)c) == ldexp(1.0, c - 127));
    ck_assert(isnan(rt_lowp_to_f64(RT_DT_FLOAT8_E8M0, 0xFF)));
}
END_TEST

START_TEST(encode_round_trips_and_ties_to_even) {
    for (int k = 0; k < NFMT; k++) {
        const fmt *f = &fmts[k];
        int n = 1 << (1 + f->ebits + f->mbits);
        for (int c = 0; c < n; c++) {
            int nan;
            double v = by_definition(f, (unsigned)c, &nan);
            if (nan || isinf(v)) continue;
            for (int sat = 0; sat <= 1; sat++)
                ck_assert_msg(rt_lowp_from_f64(f->dt, v, sat, RT_E8M0_UP) == c,
                              "%s %g -> 0x%02x, want 0x%02x", rt_dtype_name(f->dt), v,
                              rt_lowp_from_f64(f->dt, v, sat, RT_E8M0_UP), c);
        }
        /* positive codes in increasing order: 0 .. max code */
        int top = (1 << (f->ebits + f->mbits)) - 1;
        for (int c = 0; c < top; c++) {
            int n1, n2;
            double a = by_definition(f, (unsigned)c, &n1),
                   b = by_definition(f, (unsigned)c + 1, &n2);
            if (n1 || n2 || isinf(b)) break;
            double mid = (a + b) / 2;
            int even = (c & 1) ? c + 1 : c;
            ck_assert_msg(rt_lowp_from_f64(f->dt, mid, 1, RT_E8M0_UP) == even,
                          "%s midpoint %g of 0x%02x", rt_dtype_name(f->dt), mid, c);
            ck_assert(rt_lowp_from_f64(f->dt, nextafter(mid, 0), 1, RT_E8M0_UP) == c);
            ck_assert(rt_lowp_from_f64(f->dt, nextafter(mid, INFINITY), 1, RT_E8M0_UP) == c + 1);
        }
    }
}
END_TEST

START_TEST(saturation_nan_inf_and_zero) {
    /* E4M3FN: max 448 (0x7E); 464 is the tie with the next step (480): even -> 448 */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, 464, 0, 0), 0x7E);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, 465, 1, 0), 0x7E);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, 465, 0, 0), 0x7F);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, -INFINITY, 1, 0), 0xFE);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, -INFINITY, 0, 0), 0xFF);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, NAN, 1, 0), 0x7F);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, -0.0, 1, 0), 0x80);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FN, -0x1p-11, 1, 0), 0x80);
    /* E4M3FNUZ: max 240 (0x7F), overflow and NaN are 0x80, no -0 */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, 247.9, 0, 0), 0x7F);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, 248, 1, 0), 0x7F);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, -248, 1, 0), 0xFF);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, 248, 0, 0), 0x80);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, INFINITY, 0, 0), 0x80);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, -0.0, 1, 0), 0x00);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E4M3FNUZ, -0x1p-12, 1, 0), 0x00);
    /* E5M2: max 57344 (0x7B); 61440 ties to 65536 (even) = overflow; Inf 0x7C */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2, 61439, 0, 0), 0x7B);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2, 61440, 0, 0), 0x7C);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2, 61440, 1, 0), 0x7B);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2, -INFINITY, 0, 0), 0xFC);
    ck_assert(
        isnan(rt_lowp_to_f64(RT_DT_FLOAT8_E5M2, rt_lowp_from_f64(RT_DT_FLOAT8_E5M2, NAN, 0, 0))));
    /* E5M2FNUZ: overflow without saturate is NaN (0x80) */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2FNUZ, 61440, 0, 0), 0x80);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E5M2FNUZ, -61440, 1, 0), 0xFF);
    /* E2M1: no Inf / NaN: beyond 6 is 6 either way, NaN 0x8 */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT4_E2M1FN, 7, 0, 0), 0x7);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT4_E2M1FN, -INFINITY, 0, 0), 0xF);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT4_E2M1FN, 5, 1, 0), 0x6);    /* tie 4 / 6 */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT4_E2M1FN, 0.25, 1, 0), 0x0); /* tie 0 / 0.5 */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT4_E2M1FN, NAN, 1, 0), 0x8);
}
END_TEST

START_TEST(e8m0_round_modes) {
    /* 1.25, 1.5, 1.75 times 2^3 and 2^3 itself (0x82 = 2^3) */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 8, 1, RT_E8M0_UP), 0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 8, 1, RT_E8M0_DOWN), 0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 8, 1, RT_E8M0_NEAREST), 0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 10, 1, RT_E8M0_UP), 0x83);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 10, 1, RT_E8M0_DOWN), 0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 10, 1, RT_E8M0_NEAREST), 0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 12, 1, RT_E8M0_NEAREST), 0x83);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, nextafter(12, 0), 1, RT_E8M0_NEAREST),
                      0x82);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 14, 1, RT_E8M0_DOWN), 0x82);
    /* no zero: 0 is the smallest value; Inf saturates to 2^127 or is NaN */
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, 0, 1, RT_E8M0_UP), 0x00);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, INFINITY, 1, RT_E8M0_UP), 0xFE);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, INFINITY, 0, RT_E8M0_UP), 0xFF);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_FLOAT8_E8M0, NAN, 1, RT_E8M0_UP), 0xFF);
    /* int64 beyond 2^53: rounds once (2^62 + 1 is above 2^62: up gives 2^63) */
    ck_assert_uint_eq(rt_lowp_from_i64(RT_DT_FLOAT8_E8M0, (1LL << 62) + 1, 1, RT_E8M0_UP),
                      127 + 63);
}
END_TEST

START_TEST(ints_wrap_and_unpack) {
    /* INT4 reads its nibble sign-extended: 0x8..0xF are -8..-1 */
    for (int b = 0; b < 16; b++) {
        ck_assert_int_eq(rt_lowp_to_int(RT_DT_INT4, (uint8_t)b), b < 8 ? b : b - 16);
        ck_assert_int_eq(rt_lowp_to_int(RT_DT_UINT4, (uint8_t)(b | 0xF0)), b);
    }
    ck_assert_int_eq(rt_lowp_to_int(RT_DT_INT2, 2), -2);
    ck_assert_int_eq(rt_lowp_to_int(RT_DT_UINT2, 0xFE), 2);
    /* modulo 2^bits: 9 -> -7 (int4), -9 -> 7, -1 -> 3 (uint2), 2 -> -2 (int2) */
    ck_assert_int_eq((int8_t)rt_lowp_from_i64(RT_DT_INT4, 9, 1, 0), -7);
    ck_assert_int_eq((int8_t)rt_lowp_from_f64(RT_DT_INT4, -9.7, 1, 0), 7); /* truncated first */
    ck_assert_uint_eq(rt_lowp_from_i64(RT_DT_UINT2, -1, 1, 0), 3);
    ck_assert_int_eq((int8_t)rt_lowp_from_i64(RT_DT_INT2, 2, 1, 0), -2);
    ck_assert_uint_eq(rt_lowp_from_f64(RT_DT_UINT4, NAN, 1, 0), 0);
    /* ONNX's packing: element 0 in the low bits */
    const uint8_t p4[] = {0x87, 0xA9, 0x0F}, p2[] = {0x39, 0x02};
    uint8_t u[8];
    rt_lowp_unpack(RT_DT_INT4, p4, 5, u);
    const int8_t w4[] = {7, -8, -7, -6, -1};
    ck_assert_mem_eq(u, w4, 5);
    ck_assert_int_eq(rt_lowp_packed_size(RT_DT_INT4, 5), 3);
    rt_lowp_unpack(RT_DT_UINT2, p2, 5, u);
    const uint8_t w2[] = {1, 2, 3, 0, 2};
    ck_assert_mem_eq(u, w2, 5);
    ck_assert_int_eq(rt_lowp_packed_size(RT_DT_UINT2, 5), 2);
}
END_TEST

static rt_tensor *cast(rt_tensor *x, rt_dtype to, int saturate, const char *round_mode) {
    Tensorflow__NodeDef *d = tu_node_new("Cast", "cast");
    tu_attr_type(d, "SrcT", x->dtype);
    tu_attr_type(d, "DstT", to);
    if (saturate >= 0) tu_attr_b(d, "saturate", saturate);
    if (round_mode) tu_attr_s(d, "round_mode", round_mode);
    rt_tensor *o = tu_run1(d, &x, 1);
    rt_tensor_unref(x);
    return o;
}

START_TEST(cast_kernel) {
    /* float -> E4M3FN: 0.3 -> 0.3125 (0x2A: 1.25 * 2^-2), 1e6 saturates (0x7E)
     * or is NaN (0x7F) without saturate; -0 keeps its sign */
    rt_tensor *o = cast(TU_F32(S(3), 0.3f, 1e6f, -0.0f), RT_DT_FLOAT8_E4M3FN, -1, NULL);
    TU_CHECK_INT(o, RT_DT_FLOAT8_E4M3FN, S(3), 0x2A, 0x7E, 0x80);
    rt_tensor_unref(o);
    o = cast(TU_F32(S(1), 1e6f), RT_DT_FLOAT8_E4M3FN, 0, NULL);
    TU_CHECK_INT(o, RT_DT_FLOAT8_E4M3FN, S(1), 0x7F);
    rt_tensor_unref(o);
    /* E5M2 bits -> float: 0x3C = 1.0, 0x7C = Inf, 0x01 = 2^-16 */
    o = cast(tu_t(RT_DT_FLOAT8_E5M2, S(3), TU_NV(uint8_t, 0x3C, 0x7C, 0x01)), RT_DT_FLOAT, -1,
             NULL);
    TU_CHECK_F32(o, S(3), 0, 1.0f, INFINITY, 0x1p-16f);
    rt_tensor_unref(o);
    /* float -> e8m0 by round_mode: 10 -> 16 (up) or 8 (down) */
    o = cast(TU_F32(S(1), 10.0f), RT_DT_FLOAT8_E8M0, 1, "down");
    TU_CHECK_INT(o, RT_DT_FLOAT8_E8M0, S(1), 0x82);
    rt_tensor_unref(o);
    o = cast(TU_F32(S(1), 10.0f), RT_DT_FLOAT8_E8M0, 1, NULL);
    TU_CHECK_INT(o, RT_DT_FLOAT8_E8M0, S(1), 0x83);
    rt_tensor_unref(o);
    /* int4 -> int8 sign-extends; int32 -> int4 wraps; float16 -> uint2 */
    o = cast(tu_t(RT_DT_INT4, S(2), TU_NV(int8_t, -8, 7)), RT_DT_INT8, -1, NULL);
    TU_CHECK_INT(o, RT_DT_INT8, S(2), -8, 7);
    rt_tensor_unref(o);
    o = cast(TU_I32(S(3), 8, -9, 15), RT_DT_INT4, -1, NULL); /* -8, 7, -1 in int8_t bytes */
    TU_CHECK_INT(o, RT_DT_INT4, S(3), 0xF8, 7, 0xFF);
    rt_tensor_unref(o);
    /* float16 bits 0x4200 = 3.0, 0xBC00 = -1.0 */
    o = cast(tu_t(RT_DT_HALF, S(2), TU_NV(uint16_t, 0x4200, 0xBC00)), RT_DT_UINT2, -1, NULL);
    TU_CHECK_INT(o, RT_DT_UINT2, S(2), 3, 3);
    rt_tensor_unref(o);
    /* an unknown round_mode is refused */
    Tensorflow__NodeDef *d = tu_node_new("Cast", "cast");
    tu_attr_type(d, "DstT", RT_DT_FLOAT8_E8M0);
    tu_attr_s(d, "round_mode", "sideways");
    rt_tensor *x = TU_F32(S(1), 1.0f);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "round_mode");
    rt_tensor_unref(x);
}
END_TEST

/* A TensorProto of dtype dt, shape [n], tensor_content bytes. */
static ms_status from_content(rt_dtype dt, const uint8_t *bytes, size_t n, rt_tensor **out) {
    Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__TensorShapeProto sh = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim d = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dims[1] = {&d};
    d.size = (int64_t)n;
    sh.dim = dims;
    sh.n_dim = 1;
    p.dtype = (Tensorflow__DataType)dt;
    p.tensor_shape = &sh;
    p.tensor_content.data = (uint8_t *)bytes;
    p.tensor_content.len = n;
    return rt_tensor_from_request_proto(&p, NULL, NULL, out);
}

START_TEST(tensor_proto_one_byte_per_element) {
    /* float8: every byte is an element; the output goes back as the same bytes */
    const uint8_t f8[] = {0x00, 0x7F, 0xFF, 0x38};
    rt_tensor *t = NULL;
    ck_assert_int_eq(from_content(RT_DT_FLOAT8_E4M3FN, f8, 4, &t), MS_OK);
    Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
    ck_assert_int_eq(rt_tensor_to_proto(t, 0, &p), MS_OK);
    ck_assert_int_eq(p.dtype, 25); /* TensorFlow's DT_FLOAT8_E4M3FN */
    ck_assert_uint_eq(p.tensor_content.len, 4);
    ck_assert_mem_eq(p.tensor_content.data, f8, 4);
    rt_tensor_proto_clear(&p);
    rt_tensor_unref(t);
    /* int4: -8..7 sign-extended; 0x08 (bits beyond the nibble's sign) is refused */
    const uint8_t i4[] = {0xF8, 0x07, 0x00}, bad[] = {0x01, 0x08};
    ck_assert_int_eq(from_content(RT_DT_INT4, i4, 3, &t), MS_OK);
    rt_tensor_unref(t);
    t = NULL;
    ck_assert_int_eq(from_content(RT_DT_INT4, bad, 2, &t), MS_EINVAL);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "byte 1 (0x08)"));
    const uint8_t u2[] = {0x03, 0x04};
    ck_assert_int_eq(from_content(RT_DT_UINT2, u2, 2, &t), MS_EINVAL);
    /* the typed value fields have no slot for these types: refused */
    Tensorflow__TensorProto q = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__TensorShapeProto sh = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    int32_t iv[] = {1};
    q.dtype = (Tensorflow__DataType)RT_DT_FLOAT8_E5M2;
    q.tensor_shape = &sh;
    q.int_val = iv;
    q.n_int_val = 1;
    ck_assert_int_eq(rt_tensor_from_request_proto(&q, NULL, NULL, &t), MS_EINVAL);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"decode", decode_every_code},
        {"encode", encode_round_trips_and_ties_to_even},
        {"encode", saturation_nan_inf_and_zero},
        {"e8m0", e8m0_round_modes},
        {"int", ints_wrap_and_unpack},
        {"cast", cast_kernel},
        {"proto", tensor_proto_one_byte_per_element},
    };
    return tu_suite_main("lowp", cases, sizeof(cases) / sizeof(cases[0]));
}
