/* kn_cpu_elementwise.c - CPU kernels of the elementwise group: binary
 * arithmetic and comparisons with numpy broadcasting, unary math and
 * activations, Select/SelectV2 and Cast.
 *
 * Binary and unary ops are table-driven: prepare() finds the op's row (a
 * function per dtype) and stores a pointer to it as the node state; compute()
 * broadcasts and runs the loop over chunks of the output in parallel.
 * Integer arithmetic wraps (computed in unsigned types) as TensorFlow's does
 * on two's complement hardware, never trapping.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "rt_lowp.h"

/* dtype slots of the op tables */
enum {
    T_F32,
    T_F64,
    T_I32,
    T_I64,
    T_U8,
    T_BOOL,
    T_I8,
    T_I16,
    T_U16,
    T_U32,
    T_U64,
    T_F16,
    T_BF16,
    T_STR,
    T_C64,
    T_C128,
    T_COUNT
};

static int type_slot(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT:
        return T_F32;
    case RT_DT_DOUBLE:
        return T_F64;
    case RT_DT_INT32:
        return T_I32;
    case RT_DT_INT64:
        return T_I64;
    case RT_DT_UINT8:
        return T_U8;
    case RT_DT_BOOL:
        return T_BOOL;
    case RT_DT_INT8:
        return T_I8;
    case RT_DT_INT16:
        return T_I16;
    case RT_DT_UINT16:
        return T_U16;
    case RT_DT_UINT32:
        return T_U32;
    case RT_DT_UINT64:
        return T_U64;
    case RT_DT_HALF:
        return T_F16;
    case RT_DT_BFLOAT16:
        return T_BF16;
    case RT_DT_STRING:
        return T_STR;
    case RT_DT_COMPLEX64:
        return T_C64;
    case RT_DT_COMPLEX128:
        return T_C128;
    default:
        return -1;
    }
}

/* The integer slots (their divisions check for a zero divisor). */
static int slot_is_int(int slot) {
    return slot == T_I32 || slot == T_I64 || slot == T_U8 || slot == T_I8 || slot == T_I16 ||
           slot == T_U16 || slot == T_U32 || slot == T_U64;
}

/* ====================================================================== */
/* binary ops                                                             */
/* ====================================================================== */

/* o[i] = f(a[i*sa], b[i*sb]) for i < n; strides are 0 or 1. */
typedef void (*bin_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n);

#define DEF_BIN(name, TI, TO, EXPR)                                                                \
    static void name(const void *a_, int64_t sa, const void *b_, int64_t sb, void *o_,             \
                     int64_t n) {                                                                  \
        const TI *a = a_;                                                                          \
        const TI *b = b_;                                                                          \
        TO *o = o_;                                                                                \
        if (sa == 1 && sb == 1) {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI x = a[i], y = b[i];                                                             \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (sb == 1) {                                                                      \
            TI x = a[0];                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI y = b[i];                                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (sa == 1) {                                                                      \
            TI y = b[0];                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI x = a[i];                                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            TI x = a[0], y = b[0];                                                                 \
            TO v = (TO)(EXPR);                                                                     \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = v;                                                                          \
        }                                                                                          \
    }

/* float32 fast paths: o[r * C + i] = f(a[r * ra + i * sa], b[r * rb + i * sb])
 * for r < rows, i < C, with sa, sb in {0, 1}: whole tensors (rows 1) and
 * rows of a collapsed 2-D broadcast (a tensor plus a row vector over the
 * last dimension, BiasAdd-like) in one call, vectorised through ISA clones
 * (KN_VEC_DEFINE); same expression as the scalar code, so bit-identical. */
typedef void (*bin_rows_fn)(const float *a, int64_t ra, int64_t sa, const float *b, int64_t rb,
                            int64_t sb, float *o, int64_t rows, int64_t C);

#define DEF_BIN_F32(name, EXPR)                                                                    \
    KN_VEC_DEFINE(name##_rows,                                                                     \
                  (const float *a0, int64_t ra, int64_t sa, const float *b0, int64_t rb,           \
                   int64_t sb, float *o0, int64_t rows, int64_t C),                                \
                  (a0, ra, sa, b0, rb, sb, o0, rows, C), {                                         \
                      for (int64_t r = 0; r < rows; r++) {                                         \
                          const float *a = a0 + r * ra, *b = b0 + r * rb;                          \
                          float *o = o0 + r * C;                                                   \
                          if (sa == 1 && sb == 1) {                                                \
                              for (int64_t i = 0; i < C; i++) {                                    \
                                  float x = a[i], y = b[i];                                        \
                                  o[i] = (EXPR);                                                   \
                              }                                                                    \
                          } else if (sb == 1) {                                                    \
                              float x = a[0];                                                      \
                              for (int64_t i = 0; i < C; i++) {                                    \
                                  float y = b[i];                                                  \
                                  o[i] = (EXPR);                                                   \
                              }                                                                    \
                          } else if (sa == 1) {                                                    \
                              float y = b[0];                                                      \
                              for (int64_t i = 0; i < C; i++) {                                    \
                                  float x = a[i];                                                  \
                                  o[i] = (EXPR);                                                   \
                              }                                                                    \
                          } else {                                                                 \
                              float x = a[0], y = b[0];                                            \
                              float v = (EXPR);                                                    \
                              for (int64_t i = 0; i < C; i++)                                      \
                                  o[i] = v;                                                        \
                          }                                                                        \
                      }                                                                            \
                  })                                                                               \
    static void name(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n) {   \
        name##_rows(a, 0, sa, b, 0, sb, o, 1, n);                                                  \
    }

/* Arithmetic for float, double and the wrapping integer types. */
#define DEF_ARITH(op, EXPR_F, EXPR_I32, EXPR_I64)                                                  \
    DEF_BIN_F32(op##_f32, EXPR_F)                                                                  \
    DEF_BIN(op##_f64, double, double, EXPR_F)                                                      \
    DEF_BIN(op##_i32, int32_t, int32_t, EXPR_I32)                                                  \
    DEF_BIN(op##_i64, int64_t, int64_t, EXPR_I64)

DEF_ARITH(add, x + y, (int32_t)((uint32_t)x + (uint32_t)y), (int64_t)((uint64_t)x + (uint64_t)y))
DEF_ARITH(sub, x - y, (int32_t)((uint32_t)x - (uint32_t)y), (int64_t)((uint64_t)x - (uint64_t)y))
DEF_ARITH(mul, x *y, (int32_t)((uint32_t)x *(uint32_t)y), (int64_t)((uint64_t)x *(uint64_t)y))
/* NaN propagates, as TensorFlow's Maximum/Minimum (Eigen PropagateNaN). */
DEF_ARITH(max, (x > y || x != x) ? x : y, x > y ? x : y, x > y ? x : y)
DEF_ARITH(min, (x < y || x != x) ? x : y, x < y ? x : y, x < y ? x : y)
DEF_BIN_F32(div_f32, x / y)
DEF_BIN(div_f64, double, double, x / y)
DEF_BIN(pow_f32, float, float, powf(x, y))
DEF_BIN(pow_f64, double, double, pow(x, y))
DEF_BIN_F32(sqdiff_f32, (x - y) * (x - y))
DEF_BIN(sqdiff_f64, double, double, (x - y) * (x - y))
DEF_BIN(divnonan_f32, float, float, y == 0 ? 0 : x / y)
DEF_BIN(divnonan_f64, double, double, y == 0 ? 0 : x / y)
DEF_BIN(floordiv_f32, float, float, floorf(x / y))
DEF_BIN(floordiv_f64, double, double, floor(x / y))
/* FloorMod of floats: the remainder takes the divisor's sign (Python %). */
DEF_BIN(floormod_f32, float, float,
        fmodf(x, y) != 0 && ((fmodf(x, y) < 0) != (y < 0)) ? fmodf(x, y) + y : fmodf(x, y))
DEF_BIN(floormod_f64, double, double,
        fmod(x, y) != 0 && ((fmod(x, y) < 0) != (y < 0)) ? fmod(x, y) + y : fmod(x, y))
/* Integer floor division and modulo; divisors are checked non-zero before
 * the loop runs, and MIN / -1 wraps (computed through the negation). */
#define I_FDIV(T, UT)                                                                              \
    (y == -1 ? (T)(0u - (UT)x) : ((x % y != 0 && ((x < 0) != (y < 0))) ? x / y - 1 : x / y))
#define I_FMOD(T) (y == -1 ? (T)0 : ((x % y != 0 && ((x % y < 0) != (y < 0))) ? x % y + y : x % y))
DEF_BIN(floordiv_i32, int32_t, int32_t, I_FDIV(int32_t, uint32_t))
DEF_BIN(floordiv_i64, int64_t, int64_t, I_FDIV(int64_t, uint64_t))
DEF_BIN(floormod_i32, int32_t, int32_t, I_FMOD(int32_t))
DEF_BIN(floormod_i64, int64_t, int64_t, I_FMOD(int64_t))
/* Div and Mod (= TruncateDiv / TruncateMod) of integers: C's truncating
 * division and its remainder (sign of the dividend), MIN / -1 wrapping. */
#define I_TDIV(T, UT) (y == -1 ? (T)(0u - (UT)x) : x / y)
#define I_TMOD(T) (y == -1 ? (T)0 : x % y)
DEF_BIN(tdiv_i32, int32_t, int32_t, I_TDIV(int32_t, uint32_t))
DEF_BIN(tdiv_i64, int64_t, int64_t, I_TDIV(int64_t, uint64_t))
DEF_BIN(tmod_i32, int32_t, int32_t, I_TMOD(int32_t))
DEF_BIN(tmod_i64, int64_t, int64_t, I_TMOD(int64_t))
/* Mod of floats: fmod (the remainder takes the dividend's sign). */
DEF_BIN(tmod_f32, float, float, fmodf(x, y))
DEF_BIN(tmod_f64, double, double, fmod(x, y))
/* Atan2(y, x): the first input is y. */
DEF_BIN(atan2_f32, float, float, atan2f(x, y))
DEF_BIN(atan2_f64, double, double, atan2(x, y))
/* Xlogy(x, y) = x * log(y), and 0 where x == 0 (whatever y is). */
DEF_BIN(xlogy_f32, float, float, x == 0 ? 0.0f : x * logf(y))
DEF_BIN(xlogy_f64, double, double, x == 0 ? 0.0 : x * log(y))

/* The narrower and the unsigned integer types: arithmetic wraps, computed
 * in uint64_t (no promotion to int that could overflow); signed division
 * truncates as above, unsigned floor and truncating division agree. */
#define WRAP(T, OP) (T)((uint64_t)x OP (uint64_t)y)
#define DEF_INT_COMMON(s, T)                                                                       \
    DEF_BIN(add_##s, T, T, WRAP(T, +))                                                             \
    DEF_BIN(sub_##s, T, T, WRAP(T, -))                                                             \
    DEF_BIN(mul_##s, T, T, WRAP(T, *))                                                             \
    DEF_BIN(max_##s, T, T, x > y ? x : y)                                                          \
    DEF_BIN(min_##s, T, T, x < y ? x : y)
#define DEF_SINT(s, T, UT)                                                                         \
    DEF_INT_COMMON(s, T)                                                                           \
    DEF_BIN(tdiv_##s, T, T, I_TDIV(T, UT))                                                         \
    DEF_BIN(tmod_##s, T, T, I_TMOD(T))                                                             \
    DEF_BIN(floordiv_##s, T, T, I_FDIV(T, UT))                                                     \
    DEF_BIN(floormod_##s, T, T, I_FMOD(T))
#define DEF_UINT(s, T)                                                                             \
    DEF_INT_COMMON(s, T)                                                                           \
    DEF_BIN(tdiv_##s, T, T, x / y)                                                                 \
    DEF_BIN(tmod_##s, T, T, x % y)                                                                 \
    DEF_BIN(floordiv_##s, T, T, x / y)                                                             \
    DEF_BIN(floormod_##s, T, T, x % y)
/* Shifts of unsigned integers (ONNX BitShift): a shift by the width or
 * more gives 0 (C leaves it undefined); right shifts are logical. */
#define DEF_SHIFTS(s, T, BITS)                                                                     \
    DEF_BIN(shl_##s, T, T, y >= (BITS) ? (T)0 : (T)(x << y))                                       \
    DEF_BIN(shr_##s, T, T, y >= (BITS) ? (T)0 : (T)(x >> y))
DEF_SHIFTS(u8, uint8_t, 8)
DEF_SHIFTS(u16, uint16_t, 16)
DEF_SHIFTS(u32, uint32_t, 32)
DEF_SHIFTS(u64, uint64_t, 64)
#define SHIFT_ROW(name, p)                                                                         \
    {                                                                                              \
        name, {[T_U8] = p##_u8, [T_U16] = p##_u16, [T_U32] = p##_u32, [T_U64] = p##_u64}, 0, 0,    \
            NULL                                                                                   \
    }
/* Bitwise and / or / xor of every integer type (ONNX BitwiseAnd, BitwiseOr,
 * BitwiseXor): the two's complement bits, computed unsigned. */
#define DEF_BITWISE(s, T)                                                                          \
    DEF_BIN(band_##s, T, T, WRAP(T, &))                                                            \
    DEF_BIN(bor_##s, T, T, WRAP(T, |))                                                             \
    DEF_BIN(bxor_##s, T, T, WRAP(T, ^))
DEF_BITWISE(i8, int8_t)
DEF_BITWISE(i16, int16_t)
DEF_BITWISE(i32, int32_t)
DEF_BITWISE(i64, int64_t)
DEF_BITWISE(u8, uint8_t)
DEF_BITWISE(u16, uint16_t)
DEF_BITWISE(u32, uint32_t)
DEF_BITWISE(u64, uint64_t)
DEF_SINT(i8, int8_t, uint8_t)
DEF_SINT(i16, int16_t, uint16_t)
DEF_UINT(u8, uint8_t)
DEF_UINT(u16, uint16_t)
DEF_UINT(u32, uint32_t)
DEF_UINT(u64, uint64_t)

/* float16 and bfloat16: each element is widened to float, computed as the
 * float op does and rounded back to nearest even, as numpy and ONNX Runtime
 * compute them. */
#define DEF_BIN_16(name, LOAD, TO, STORE, EXPR)                                                    \
    static void name(const void *a_, int64_t sa, const void *b_, int64_t sb, void *o_,             \
                     int64_t n) {                                                                  \
        const uint16_t *a = a_;                                                                    \
        const uint16_t *b = b_;                                                                    \
        TO *o = o_;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float x = LOAD(a[i * sa]), y = LOAD(b[i * sb]);                                        \
            o[i] = STORE(EXPR);                                                                    \
        }                                                                                          \
    }
#define AS_BOOL(v) (uint8_t)(v)
#define DEF_FLOAT16(s, LOAD, STORE)                                                                \
    DEF_BIN_16(add_##s, LOAD, uint16_t, STORE, x + y)                                              \
    DEF_BIN_16(sub_##s, LOAD, uint16_t, STORE, x - y)                                              \
    DEF_BIN_16(mul_##s, LOAD, uint16_t, STORE, x *y)                                               \
    DEF_BIN_16(div_##s, LOAD, uint16_t, STORE, x / y)                                              \
    DEF_BIN_16(max_##s, LOAD, uint16_t, STORE, (x > y || x != x) ? x : y)                          \
    DEF_BIN_16(min_##s, LOAD, uint16_t, STORE, (x < y || x != x) ? x : y)                          \
    DEF_BIN_16(pow_##s, LOAD, uint16_t, STORE, powf(x, y))                                         \
    DEF_BIN_16(tmod_##s, LOAD, uint16_t, STORE, fmodf(x, y))                                       \
    DEF_BIN_16(floordiv_##s, LOAD, uint16_t, STORE, floorf(x / y))                                 \
    DEF_BIN_16(floormod_##s, LOAD, uint16_t, STORE,                                                \
               fmodf(x, y) != 0 && ((fmodf(x, y) < 0) != (y < 0)) ? fmodf(x, y) + y : fmodf(x, y)) \
    DEF_BIN_16(gt_##s, LOAD, uint8_t, AS_BOOL, x > y)                                              \
    DEF_BIN_16(ge_##s, LOAD, uint8_t, AS_BOOL, x >= y)                                             \
    DEF_BIN_16(lt_##s, LOAD, uint8_t, AS_BOOL, x < y)                                              \
    DEF_BIN_16(le_##s, LOAD, uint8_t, AS_BOOL, x <= y)                                             \
    DEF_BIN_16(eq_##s, LOAD, uint8_t, AS_BOOL, x == y)                                             \
    DEF_BIN_16(ne_##s, LOAD, uint8_t, AS_BOOL, x != y)
DEF_FLOAT16(f16, kn__half_to_f32, kn__f32_to_half)
DEF_FLOAT16(bf16, kn__bf16_to_f32, kn__f32_to_bf16)

#define DEF_CMP(op, EXPR)                                                                          \
    DEF_BIN(op##_f32, float, uint8_t, EXPR)                                                        \
    DEF_BIN(op##_f64, double, uint8_t, EXPR)                                                       \
    DEF_BIN(op##_i32, int32_t, uint8_t, EXPR)                                                      \
    DEF_BIN(op##_i64, int64_t, uint8_t, EXPR)                                                      \
    DEF_BIN(op##_u8, uint8_t, uint8_t, EXPR)                                                       \
    DEF_BIN(op##_i8, int8_t, uint8_t, EXPR)                                                        \
    DEF_BIN(op##_i16, int16_t, uint8_t, EXPR)                                                      \
    DEF_BIN(op##_u16, uint16_t, uint8_t, EXPR)                                                     \
    DEF_BIN(op##_u32, uint32_t, uint8_t, EXPR)                                                     \
    DEF_BIN(op##_u64, uint64_t, uint8_t, EXPR)

DEF_CMP(gt, x > y)
DEF_CMP(ge, x >= y)
DEF_CMP(lt, x < y)
DEF_CMP(le, x <= y)
DEF_CMP(eq, x == y)
DEF_BIN(eq_b, uint8_t, uint8_t, (x != 0) == (y != 0))
DEF_CMP(ne, x != y)
DEF_BIN(ne_b, uint8_t, uint8_t, (x != 0) != (y != 0))

/* complex64 / complex128 as C's _Complex (TensorFlow's layout: real part
 * first); products and quotients as C (Annex G) computes them, as
 * std::complex does for TensorFlow. */
typedef float _Complex c64;
typedef double _Complex c128;
#define DEF_CPLX(s, T)                                                                             \
    DEF_BIN(add_##s, T, T, x + y)                                                                  \
    DEF_BIN(sub_##s, T, T, x - y)                                                                  \
    DEF_BIN(mul_##s, T, T, x *y)                                                                   \
    DEF_BIN(div_##s, T, T, x / y)                                                                  \
    DEF_BIN(eq_##s, T, uint8_t, x == y)                                                            \
    DEF_BIN(ne_##s, T, uint8_t, x != y)
DEF_CPLX(c64, c64)
DEF_CPLX(c128, c128)
#define CPLX(p) [T_C64] = p##_c64, [T_C128] = p##_c128
/* Strings compare by their bytes. */
DEF_BIN(eq_s, rt_str, uint8_t, x.len == y.len && (x.len == 0 || memcmp(x.data, y.data, x.len) == 0))
DEF_BIN(ne_s, rt_str, uint8_t, x.len != y.len || (x.len != 0 && memcmp(x.data, y.data, x.len) != 0))
DEF_BIN(and_b, uint8_t, uint8_t, x &&y)
DEF_BIN(or_b, uint8_t, uint8_t, x || y)

typedef struct bin_op {
    const char *op;
    bin_fn fn[T_COUNT];
    int out_bool;     /* output dtype is DT_BOOL instead of the input's */
    int int_divisor;  /* integer inputs: the second must hold no zero */
    bin_rows_fn rows; /* float32 2-D fast path, or NULL */
} bin_op;

/* Every slot of prefix p: the float, integer and 16-bit float kernels. */
#define ALL_INTS(p)                                                                                \
    [T_I32] = p##_i32, [T_I64] = p##_i64, [T_U8] = p##_u8, [T_I8] = p##_i8, [T_I16] = p##_i16,     \
    [T_U16] = p##_u16, [T_U32] = p##_u32, [T_U64] = p##_u64
#define ALL_NUM(p) [T_F32] = p##_f32, [T_F64] = p##_f64, [T_F16] = p##_f16, [T_BF16] = p##_bf16, ALL_INTS(p)
#define ARITH_ROW(name, p)                                                                         \
    {                                                                                              \
        name, {ALL_NUM(p)}, 0, 0, p##_f32_rows                                                     \
    }
#define CMP_ROW(name, p)                                                                           \
    {                                                                                              \
        name, {ALL_NUM(p)}, 1, 0, NULL                                                             \
    }

/* clang-format off */
static const bin_op bin_ops[] = {
    {"Add", {ALL_NUM(add), CPLX(add)}, 0, 0, add_f32_rows},
    {"AddV2", {ALL_NUM(add), CPLX(add)}, 0, 0, add_f32_rows},
    {"Sub", {ALL_NUM(sub), CPLX(sub)}, 0, 0, sub_f32_rows},
    {"Mul", {ALL_NUM(mul), CPLX(mul)}, 0, 0, mul_f32_rows},
    {"RealDiv", {[T_F32] = div_f32, [T_F64] = div_f64, [T_F16] = div_f16, [T_BF16] = div_bf16,
                 CPLX(div)}, 0, 0, div_f32_rows},
    ARITH_ROW("Maximum", max),
    ARITH_ROW("Minimum", min),
    {"Pow", {[T_F32] = pow_f32, [T_F64] = pow_f64, [T_F16] = pow_f16, [T_BF16] = pow_bf16}, 0, 0,
     NULL},
    CMP_ROW("Greater", gt),
    CMP_ROW("GreaterEqual", ge),
    CMP_ROW("Less", lt),
    CMP_ROW("LessEqual", le),
    {"Equal", {ALL_NUM(eq), [T_BOOL] = eq_b, [T_STR] = eq_s, CPLX(eq)}, 1, 0, NULL},
    {"NotEqual", {ALL_NUM(ne), [T_BOOL] = ne_b, [T_STR] = ne_s, CPLX(ne)}, 1, 0, NULL},
    {"SquaredDifference", {[T_F32] = sqdiff_f32, [T_F64] = sqdiff_f64}, 0, 0, sqdiff_f32_rows},
    {"DivNoNan", {[T_F32] = divnonan_f32, [T_F64] = divnonan_f64}, 0, 0, NULL},
    {"FloorDiv", {ALL_NUM(floordiv)}, 0, 1, NULL},
    {"FloorMod", {ALL_NUM(floormod)}, 0, 1, NULL},
    {"Div", {[T_F32] = div_f32, [T_F64] = div_f64, [T_F16] = div_f16, [T_BF16] = div_bf16,
             ALL_INTS(tdiv), CPLX(div)}, 0, 1, NULL},
    {"TruncateDiv", {ALL_INTS(tdiv)}, 0, 1, NULL},
    {"Mod", {ALL_NUM(tmod)}, 0, 1, NULL},
    {"TruncateMod", {ALL_NUM(tmod)}, 0, 1, NULL},
    {"Atan2", {[T_F32] = atan2_f32, [T_F64] = atan2_f64}, 0, 0, NULL},
    {"Xlogy", {[T_F32] = xlogy_f32, [T_F64] = xlogy_f64}, 0, 0, NULL},
    SHIFT_ROW("LeftShift", shl),
    SHIFT_ROW("RightShift", shr),
    {"BitwiseAnd", {ALL_INTS(band)}, 0, 0, NULL},
    {"BitwiseOr", {ALL_INTS(bor)}, 0, 0, NULL},
    {"BitwiseXor", {ALL_INTS(bxor)}, 0, 0, NULL},
    {"LogicalAnd", {[T_BOOL] = and_b}, 1, 0, NULL},
    {"LogicalOr", {[T_BOOL] = or_b}, 1, 0, NULL},
};
/* clang-format on */

static ms_status bin_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    if (node->nin != 2) return KN_EINVAL(node, "expected 2 inputs, got %d", node->nin);
    for (size_t i = 0; i < sizeof(bin_ops) / sizeof(bin_ops[0]); i++)
        if (strcmp(bin_ops[i].op, node->op) == 0) {
            *state = (void *)&bin_ops[i];
            return MS_OK;
        }
    return kn__errf(MS_EINTERNAL, node, "no elementwise table row for this op");
}

typedef struct ew_job {
    const kn_bcast *bc;
    int nargs;
    const uint8_t *src[KN_BCAST_MAX];
    size_t esize[KN_BCAST_MAX];
    uint8_t *dst;
    size_t osize;
    bin_fn bfn;
    bin_rows_fn rows; /* float32 2-D fast path */
    size_t sel_size;  /* Select: element size of t/e */
} ew_job;

/* Walks output elements [begin, end) row segment by row segment. */
#define EW_SEGMENTS(job, begin, end, BODY)                                                         \
    do {                                                                                           \
        const kn_bcast *bc_ = (job)->bc;                                                           \
        const int lastd_ = bc_->rank - 1;                                                          \
        const int64_t inner_ = bc_->dim[lastd_];                                                   \
        int64_t pos_ = (begin);                                                                    \
        while (pos_ < (end)) {                                                                     \
            int64_t row_ = pos_ / inner_, j_ = pos_ % inner_;                                      \
            int64_t n_ = inner_ - j_;                                                              \
            if (n_ > (end)-pos_) n_ = (end)-pos_;                                                  \
            int64_t offs_[KN_BCAST_MAX];                                                           \
            kn__bcast_row(bc_, row_, offs_, (job)->nargs);                                         \
            int64_t s_[KN_BCAST_MAX];                                                              \
            for (int k_ = 0; k_ < (job)->nargs; k_++) {                                            \
                s_[k_] = bc_->stride[k_][lastd_];                                                  \
                offs_[k_] += j_ * s_[k_];                                                          \
            }                                                                                      \
            BODY;                                                                                  \
            pos_ += n_;                                                                            \
        }                                                                                          \
    } while (0)

static void bin_chunk(void *arg, int64_t begin, int64_t end) {
    ew_job *job = arg;
    EW_SEGMENTS(job, begin, end,
                job->bfn(job->src[0] + (size_t)offs_[0] * job->esize[0], s_[0],
                         job->src[1] + (size_t)offs_[1] * job->esize[1], s_[1],
                         job->dst + (size_t)pos_ * job->osize, n_));
}

/* Over rows [begin, end) of a collapsed 2-D broadcast, float32. */
static void bin_rows_chunk(void *arg, int64_t begin, int64_t end) {
    const ew_job *job = arg;
    const kn_bcast *bc = job->bc;
    const int64_t C = bc->dim[1];
    job->rows((const float *)job->src[0] + begin * bc->stride[0][0], bc->stride[0][0],
              bc->stride[0][1], (const float *)job->src[1] + begin * bc->stride[1][0],
              bc->stride[1][0], bc->stride[1][1], (float *)job->dst + begin * C, end - begin, C);
}

static ms_status bin_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    const bin_op *op = state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    if (in[0]->dtype != in[1]->dtype)
        return KN_EINVAL(node, "inputs have different dtypes %s and %s",
                         rt_dtype_name(in[0]->dtype), rt_dtype_name(in[1]->dtype));
    int slot = type_slot(in[0]->dtype);
    if (slot < 0 || op->fn[slot] == NULL)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(in[0]->dtype));
    if (op->int_divisor && slot_is_int(slot)) {
        /* An integer element is zero when all its bytes are. */
        const size_t es = rt_dtype_size(in[1]->dtype);
        const uint8_t *d = in[1]->data;
        for (int64_t i = 0; i < in[1]->nelem; i++) {
            uint8_t any = 0;
            for (size_t k = 0; k < es; k++)
                any |= d[(size_t)i * es + k];
            if (any == 0) return KN_EINVAL(node, "integer division by zero");
        }
    }
    kn_bcast bc;
    const rt_shape *shapes[2] = {&in[0]->shape, &in[1]->shape};
    if ((st = kn__bcast_init(&bc, node, shapes, 2)) != MS_OK) return st;
    rt_dtype odt = op->out_bool ? RT_DT_BOOL : in[0]->dtype;
    if ((st = kn__output(ctx, node, 0, odt, &bc.out, &out[0])) != MS_OK) return st;
    ew_job job = {.bc = &bc, .nargs = 2, .bfn = op->fn[slot], .osize = rt_dtype_size(odt)};
    for (int k = 0; k < 2; k++) {
        job.src[k] = in[k]->data;
        job.esize[k] = slot == T_STR ? sizeof(rt_str) : rt_dtype_size(in[k]->dtype);
    }
    job.dst = out[0]->data;
    if (out[0]->nelem == 0) return MS_OK;
    if (slot == T_F32 && op->rows != NULL && bc.rank == 2) {
        job.rows = op->rows;
        int64_t chunk = 16384 / bc.dim[1];
        kn_ctx_parallel_for(ctx, bc.dim[0], chunk > 0 ? chunk : 1, bin_rows_chunk, &job);
        return MS_OK;
    }
    kn_ctx_parallel_for(ctx, out[0]->nelem, 16384, bin_chunk, &job);
    return MS_OK;
}

/* ====================================================================== */
/* unary ops                                                              */
/* ====================================================================== */

typedef void (*un_fn)(const void *in, void *out, int64_t n, float alpha);

#define DEF_UN(name, TI, TO, EXPR)                                                                 \
    static void name(const void *in_, void *out_, int64_t n, float alpha) {                        \
        const TI *in = in_;                                                                        \
        TO *o = out_;                                                                              \
        (void)alpha;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                          \
            TI x = in[i];                                                                          \
            o[i] = (TO)(EXPR);                                                                     \
        }                                                                                          \
    }
#define DEF_UN_F(op, EXPR_F, EXPR_D)                                                               \
    DEF_UN(op##_f32, float, float, EXPR_F)                                                         \
    DEF_UN(op##_f64, double, double, EXPR_D)

/* float32 with ISA clones (KN_VEC_DEFINE): the simple activations that
 * follow convolutions, vectorised, same expression (bit-identical). */
#define DEF_UN_F32V(name, EXPR)                                                                    \
    KN_VEC_DEFINE(name, (const void *in_, void *out_, int64_t n, float alpha),                     \
                  (in_, out_, n, alpha), {                                                         \
                      const float *in = in_;                                                       \
                      float *o = out_;                                                             \
                      (void)alpha;                                                                 \
                      for (int64_t i = 0; i < n; i++) {                                            \
                          float x = in[i];                                                         \
                          o[i] = (EXPR);                                                           \
                      }                                                                            \
                  })
#define DEF_UN_FV(op, EXPR_F, EXPR_D)                                                              \
    DEF_UN_F32V(op##_f32, EXPR_F)                                                                  \
    DEF_UN(op##_f64, double, double, EXPR_D)

DEF_UN_FV(square, x *x, x *x)
DEF_UN_F(sqrt, sqrtf(x), sqrt(x))
DEF_UN_F(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
DEF_UN_F(exp, expf(x), exp(x))
DEF_UN_F(cos, cosf(x), cos(x))
DEF_UN_F(sin, sinf(x), sin(x))
DEF_UN_F(tan, tanf(x), tan(x))
DEF_UN_FV(neg, -x, -x)
DEF_UN_FV(abs, fabsf(x), fabs(x))
DEF_UN_FV(relu, x > 0 ? x : 0, x > 0 ? x : 0)
DEF_UN_FV(relu6, x > 6 ? 6 : (x > 0 ? x : 0), x > 6 ? 6 : (x > 0 ? x : 0))
/* Sigmoid and Tanh in float32 through kn__vexpf (vectorised, within a few
 * ulp of the libm forms 1 / (1 + expf(-x)) and tanhf):
 *   sigmoid: e = exp(-|x|) <= 1, s = 1 / (1 + e), x >= 0 ? s : e * s
 *            (no overflow, subnormal results for very negative x);
 *   tanh:    |x| < 0.625: Cephes' odd polynomial x + x^3 P(x^2) (no
 *            cancellation near 0); else sign(x) (1 - 2 / (exp(2|x|) + 1)). */
/* clang-format off */
DEF_UN_F32V(sigmoid_f32, ({
                float e_ = kn__vexpf(-fabsf(x)), s_ = 1.0f / (1.0f + e_);
                x >= 0 ? s_ : e_ * s_;
            }))
/* clang-format on */
DEF_UN(sigmoid_f64, double, double, 1.0 / (1.0 + exp(-x)))
DEF_UN_F32V(tanh_f32, ({
                float a_ = fabsf(x), z_ = x * x;
                float p_ = -5.70498872745e-3f;
                p_ = p_ * z_ + 2.06390887954e-2f;
                p_ = p_ * z_ - 5.37397155531e-2f;
                p_ = p_ * z_ + 1.33314422036e-1f;
                p_ = p_ * z_ - 3.33332819422e-1f;
                float small_ = p_ * z_ * x + x;
                float big_ = 1.0f - 2.0f / (kn__vexpf(2.0f * a_) + 1.0f);
                big_ = x < 0 ? -big_ : big_;
                a_ < 0.625f ? small_ : big_;
            }))
DEF_UN(tanh_f64, double, double, tanh(x))
DEF_UN_FV(leaky, x > 0 ? x : x * alpha, x > 0 ? x : x * (double)alpha)
DEF_UN_F(floor, floorf(x), floor(x))
DEF_UN_F(ceil, ceilf(x), ceil(x))
/* Round half to even, as TensorFlow's Round (rint in the default mode). */
DEF_UN_F(round, rintf(x), rint(x))
DEF_UN_F(log, logf(x), log(x))
DEF_UN_F(recip, 1.0f / x, 1.0 / x)
DEF_UN_F(softplus, x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)),
         x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))
DEF_UN_F(elu, x < 0 ? expm1f(x) : x, x < 0 ? expm1(x) : x)
#define SELU_SCALE 1.0507009873554804934193349852946
#define SELU_ALPHA 1.6732632423543772848170429916717
DEF_UN_F(selu, x < 0 ? (float)(SELU_SCALE * SELU_ALPHA) * expm1f(x) : (float)SELU_SCALE * x,
         x < 0 ? SELU_SCALE * SELU_ALPHA * expm1(x) : SELU_SCALE * x)
DEF_UN_F(erf, erff(x), erf(x))
DEF_UN_F(sign, (float)((x > 0) - (x < 0)), (double)((x > 0) - (x < 0)))
DEF_UN(sign_i32, int32_t, int32_t, (x > 0) - (x < 0))
DEF_UN(sign_i64, int64_t, int64_t, (x > 0) - (x < 0))
DEF_UN(square_i32, int32_t, int32_t, (int32_t)((uint32_t)x *(uint32_t)x))
DEF_UN(square_i64, int64_t, int64_t, (int64_t)((uint64_t)x *(uint64_t)x))
DEF_UN(neg_i32, int32_t, int32_t, (int32_t)(0u - (uint32_t)x))
DEF_UN(neg_i64, int64_t, int64_t, (int64_t)(0u - (uint64_t)x))
DEF_UN(abs_i32, int32_t, int32_t, x < 0 ? (int32_t)(0u - (uint32_t)x) : x)
DEF_UN(abs_i64, int64_t, int64_t, x < 0 ? (int64_t)(0u - (uint64_t)x) : x)
DEF_UN(relu_i32, int32_t, int32_t, x > 0 ? x : 0)
DEF_UN(relu_i64, int64_t, int64_t, x > 0 ? x : 0)
DEF_UN(relu6_i32, int32_t, int32_t, x > 6 ? 6 : (x > 0 ? x : 0))
DEF_UN(relu6_i64, int64_t, int64_t, x > 6 ? 6 : (x > 0 ? x : 0))
DEF_UN(not_b, uint8_t, uint8_t, !x)
DEF_UN(neg_c64, c64, c64, -x)
DEF_UN(neg_c128, c128, c128, -x)
DEF_UN(square_c64, c64, c64, x *x)
DEF_UN(square_c128, c128, c128, x *x)
/* Invert (ONNX BitwiseNot): every bit flipped, of every integer type. */
DEF_UN(inv_i8, int8_t, int8_t, ~(uint8_t)x)
DEF_UN(inv_i16, int16_t, int16_t, ~(uint16_t)x)
DEF_UN(inv_i32, int32_t, int32_t, ~(uint32_t)x)
DEF_UN(inv_i64, int64_t, int64_t, ~(uint64_t)x)
DEF_UN(inv_u8, uint8_t, uint8_t, ~x)
DEF_UN(inv_u16, uint16_t, uint16_t, ~x)
DEF_UN(inv_u32, uint32_t, uint32_t, ~x)
DEF_UN(inv_u64, uint64_t, uint64_t, ~x)

typedef struct un_op {
    const char *op;
    un_fn fn[T_COUNT];
} un_op;

#define UN_F(name, p)                                                                              \
    {                                                                                              \
        name, {                                                                                    \
            [T_F32] = p##_f32, [T_F64] = p##_f64                                                   \
        }                                                                                          \
    }
#define UN_FI(name, p)                                                                             \
    {                                                                                              \
        name, {                                                                                    \
            [T_F32] = p##_f32, [T_F64] = p##_f64, [T_I32] = p##_i32, [T_I64] = p##_i64             \
        }                                                                                          \
    }

/* clang-format off */
static const un_op un_ops[] = {
    {"Square", {[T_F32] = square_f32, [T_F64] = square_f64, [T_I32] = square_i32,
                [T_I64] = square_i64, CPLX(square)}},
    UN_F("Sqrt", sqrt),
    UN_F("Rsqrt", rsqrt),
    UN_F("Exp", exp),
    {"Neg", {[T_F32] = neg_f32, [T_F64] = neg_f64, [T_I32] = neg_i32, [T_I64] = neg_i64,
             CPLX(neg)}},
    UN_FI("Abs", abs),
    UN_FI("Relu", relu),
    UN_FI("Relu6", relu6),
    UN_F("Sigmoid", sigmoid),
    UN_F("Tanh", tanh),
    UN_F("LeakyRelu", leaky),
    UN_F("Floor", floor),
    UN_F("Ceil", ceil),
    UN_F("Round", round),
    UN_F("Log", log),
    UN_F("Reciprocal", recip),
    UN_F("Inv", recip),
    UN_F("Softplus", softplus),
    UN_F("Elu", elu),
    UN_F("Selu", selu),
    UN_F("Erf", erf),
    UN_F("Cos", cos),
    UN_F("Sin", sin),
    UN_F("Tan", tan),
    UN_FI("Sign", sign),
    {"LogicalNot", {[T_BOOL] = not_b}},
    {"Invert", {ALL_INTS(inv)}},
};
/* clang-format on */

typedef struct un_state {
    const un_op *op;
    float alpha;
} un_state;

static ms_status un_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    if (node->nin != 1) return KN_EINVAL(node, "expected 1 input, got %d", node->nin);
    for (size_t i = 0; i < sizeof(un_ops) / sizeof(un_ops[0]); i++)
        if (strcmp(un_ops[i].op, node->op) == 0) {
            un_state *s = malloc(sizeof(*s));
            if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
            s->op = &un_ops[i];
            s->alpha = kn_attr_f(node, "alpha", 0.2f);
            *state = s;
            return MS_OK;
        }
    return kn__errf(MS_EINTERNAL, node, "no elementwise table row for this op");
}

static void un_release(void *state) {
    free(state);
}

typedef struct un_job {
    un_fn fn;
    const uint8_t *src;
    uint8_t *dst;
    size_t esize;
    float alpha;
} un_job;

static void un_chunk(void *arg, int64_t begin, int64_t end) {
    un_job *j = arg;
    j->fn(j->src + (size_t)begin * j->esize, j->dst + (size_t)begin * j->esize, end - begin,
          j->alpha);
}

static ms_status un_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    const un_state *s = state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    int slot = type_slot(in[0]->dtype);
    if (slot < 0 || s->op->fn[slot] == NULL)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(in[0]->dtype));
    if ((st = kn__output(ctx, node, 0, in[0]->dtype, &in[0]->shape, &out[0])) != MS_OK) return st;
    un_job job = {.fn = s->op->fn[slot],
                  .src = in[0]->data,
                  .dst = out[0]->data,
                  .esize = rt_dtype_size(in[0]->dtype),
                  .alpha = s->alpha};
    if (in[0]->nelem > 0) kn_ctx_parallel_for(ctx, in[0]->nelem, 16384, un_chunk, &job);
    return MS_OK;
}

/* ====================================================================== */
/* Select / SelectV2                                                      */
/* ====================================================================== */

static void sel_chunk(void *arg, int64_t begin, int64_t end) {
    ew_job *job = arg;
    const size_t es = job->sel_size;
    EW_SEGMENTS(job, begin, end, {
        const uint8_t *c = job->src[0] + offs_[0];
        const uint8_t *t = job->src[1] + (size_t)offs_[1] * es;
        const uint8_t *e = job->src[2] + (size_t)offs_[2] * es;
        uint8_t *o = job->dst + (size_t)pos_ * es;
        for (int64_t i = 0; i < n_; i++) {
            const uint8_t *p =
                c[i * s_[0]] ? t + (size_t)(i * s_[1]) * es : e + (size_t)(i * s_[2]) * es;
            memcpy(o + (size_t)i * es, p, es);
        }
    });
}

static ms_status select_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *c = in[0], *t = in[1], *e = in[2];
    if (c->dtype != RT_DT_BOOL)
        return KN_EINVAL(node, "condition must be bool, got %s", rt_dtype_name(c->dtype));
    if (t->dtype != e->dtype)
        return KN_EINVAL(node, "then/else dtypes differ: %s and %s", rt_dtype_name(t->dtype),
                         rt_dtype_name(e->dtype));
    if (!rt_dtype_is_pod(t->dtype) || rt_dtype_size(t->dtype) == 0)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(t->dtype));
    rt_shape cshape = c->shape;
    if (strcmp(node->op, "Select") == 0) {
        /* Select (v1): t and e equal; cond equal to them, a scalar, or a
         * vector over t's first dimension. */
        if (!rt_shape_equal(&t->shape, &e->shape))
            return KN_EINVAL(node, "then and else shapes differ: %s and %s", kn__shp(&t->shape),
                             kn__shp(&e->shape));
        if (!rt_shape_equal(&c->shape, &t->shape) && c->shape.rank != 0) {
            if (c->shape.rank != 1 || t->shape.rank < 1 || c->shape.dim[0] != t->shape.dim[0])
                return KN_EINVAL(node,
                                 "condition shape %s must equal %s or be a vector of length "
                                 "of its first dimension",
                                 kn__shp(&c->shape), kn__shp(&t->shape));
            cshape.rank = t->shape.rank;
            for (int d = 1; d < cshape.rank; d++)
                cshape.dim[d] = 1;
        }
    }
    kn_bcast bc;
    const rt_shape *shapes[3] = {&cshape, &t->shape, &e->shape};
    if ((st = kn__bcast_init(&bc, node, shapes, 3)) != MS_OK) return st;
    if ((st = kn__output(ctx, node, 0, t->dtype, &bc.out, &out[0])) != MS_OK) return st;
    ew_job job = {.bc = &bc, .nargs = 3, .dst = out[0]->data, .sel_size = rt_dtype_size(t->dtype)};
    job.src[0] = c->data;
    job.src[1] = t->data;
    job.src[2] = e->data;
    if (out[0]->nelem > 0) kn_ctx_parallel_for(ctx, out[0]->nelem, 16384, sel_chunk, &job);
    return MS_OK;
}

/* ====================================================================== */
/* Cast                                                                   */
/* ====================================================================== */

/* A loaded element: exactly one of the three members is meaningful. */
typedef struct cval {
    int kind; /* 0 signed, 1 unsigned, 2 floating */
    int64_t i;
    uint64_t u;
    double f;
    double fi; /* imaginary part of a complex source (kind 2), else 0 */
} cval;

static int cast_supported(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT:
    case RT_DT_DOUBLE:
    case RT_DT_HALF:
    case RT_DT_BFLOAT16:
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32:
    case RT_DT_INT64:
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32:
    case RT_DT_UINT64:
    case RT_DT_BOOL:
    case RT_DT_COMPLEX64:
    case RT_DT_COMPLEX128:
    case RT_DT_QINT8:
    case RT_DT_QUINT8:
    case RT_DT_QINT16:
    case RT_DT_QUINT16:
    case RT_DT_QINT32:
        return 1;
    default:
        return rt_dtype_is_lowp(dt);
    }
}

static cval cast_load(const void *p, rt_dtype dt, int64_t i) {
    cval v = {0, 0, 0, 0, 0};
    switch (dt) {
    case RT_DT_FLOAT:
        v.kind = 2;
        v.f = ((const float *)p)[i];
        break;
    case RT_DT_DOUBLE:
        v.kind = 2;
        v.f = ((const double *)p)[i];
        break;
    case RT_DT_HALF:
        v.kind = 2;
        v.f = kn__half_to_f32(((const uint16_t *)p)[i]);
        break;
    case RT_DT_BFLOAT16:
        v.kind = 2;
        v.f = kn__bf16_to_f32(((const uint16_t *)p)[i]);
        break;
    case RT_DT_COMPLEX64: /* to a real type: the real part, as TensorFlow's Cast */
        v.kind = 2;
        v.f = ((const float *)p)[2 * i];
        v.fi = ((const float *)p)[2 * i + 1];
        break;
    case RT_DT_COMPLEX128:
        v.kind = 2;
        v.f = ((const double *)p)[2 * i];
        v.fi = ((const double *)p)[2 * i + 1];
        break;
    case RT_DT_INT8:
    case RT_DT_QINT8:
        v.i = ((const int8_t *)p)[i];
        break;
    case RT_DT_INT16:
    case RT_DT_QINT16:
        v.i = ((const int16_t *)p)[i];
        break;
    case RT_DT_INT32:
    case RT_DT_QINT32:
        v.i = ((const int32_t *)p)[i];
        break;
    case RT_DT_INT64:
        v.i = ((const int64_t *)p)[i];
        break;
    case RT_DT_UINT8:
    case RT_DT_QUINT8:
        v.kind = 1;
        v.u = ((const uint8_t *)p)[i];
        break;
    case RT_DT_UINT16:
    case RT_DT_QUINT16:
        v.kind = 1;
        v.u = ((const uint16_t *)p)[i];
        break;
    case RT_DT_UINT32:
        v.kind = 1;
        v.u = ((const uint32_t *)p)[i];
        break;
    case RT_DT_UINT64:
        v.kind = 1;
        v.u = ((const uint64_t *)p)[i];
        break;
    case RT_DT_BOOL:
        v.kind = 1;
        v.u = ((const uint8_t *)p)[i] != 0;
        break;
    default:
        /* float8 / float4 / e8m0 by value, int4 / int2 as integers */
        if (rt_dtype_is_lowp_float(dt)) {
            v.kind = 2;
            v.f = rt_lowp_to_f64(dt, ((const uint8_t *)p)[i]);
        } else if (rt_dtype_is_lowp(dt)) {
            v.i = rt_lowp_to_int(dt, ((const uint8_t *)p)[i]);
        }
        break;
    }
    return v;
}

/* Float to integer: truncation toward zero, saturating at the type's range,
 * NaN -> 0 (C leaves these undefined; we never trap). */
static int64_t f_to_i(double f, int64_t lo, int64_t hi) {
    if (f != f) return 0;
    if (f <= (double)lo) return lo;
    if (f >= (double)hi) return hi;
    return (int64_t)f;
}
static uint64_t f_to_u(double f, uint64_t hi) {
    if (f != f || f <= 0) return 0;
    if (f >= (double)hi) return hi;
    return (uint64_t)f;
}
/* Integer-valued element as the signed/unsigned bit pattern C conversion would give. */
static int64_t v_as_i(cval v, int64_t lo, int64_t hi) {
    if (v.kind == 2) return f_to_i(v.f, lo, hi);
    return v.kind == 1 ? (int64_t)v.u : v.i;
}
static uint64_t v_as_u(cval v, uint64_t hi) {
    if (v.kind == 2) return f_to_u(v.f, hi);
    return v.kind == 1 ? v.u : (uint64_t)v.i;
}
static double v_as_f(cval v) {
    return v.kind == 2 ? v.f : v.kind == 1 ? (double)v.u : (double)v.i;
}
static float v_as_f32(cval v) {
    /* Directly from the integer so that int64 -> float rounds once. */
    return v.kind == 2 ? (float)v.f : v.kind == 1 ? (float)v.u : (float)v.i;
}

/* The element as a double that rounds to any format of at most 52
 * mantissa bits as the element itself would: integers beyond 2^53 keep a
 * sticky bit for what (double) would drop, so half and bfloat16 round
 * once, to nearest even. */
static double v_as_f_narrow(cval v) {
    if (v.kind == 2) return v.f;
    int neg = v.kind == 0 && v.i < 0;
    uint64_t u = v.kind == 1 ? v.u : neg ? 0 - (uint64_t)v.i : (uint64_t)v.i;
    int s = 0;
    while ((u >> s) >= (1ull << 53))
        s++;
    uint64_t w = (u >> s) | ((u & ((1ull << s) - 1)) != 0);
    double d = ldexp((double)w, s);
    return neg ? -d : d;
}

static void cast_store(void *p, rt_dtype dt, int64_t i, cval v) {
    switch (dt) {
    case RT_DT_FLOAT:
        ((float *)p)[i] = v_as_f32(v);
        break;
    case RT_DT_DOUBLE:
        ((double *)p)[i] = v_as_f(v);
        break;
    case RT_DT_HALF: /* one rounding (through float would make two) */
        ((uint16_t *)p)[i] = kn__f64_to_half(v_as_f_narrow(v));
        break;
    case RT_DT_BFLOAT16:
        ((uint16_t *)p)[i] = kn__f64_to_bf16(v_as_f_narrow(v));
        break;
    case RT_DT_COMPLEX64:
        ((float *)p)[2 * i] = v_as_f32(v);
        ((float *)p)[2 * i + 1] = (float)v.fi;
        break;
    case RT_DT_COMPLEX128:
        ((double *)p)[2 * i] = v_as_f(v);
        ((double *)p)[2 * i + 1] = v.fi;
        break;
    case RT_DT_INT8:
    case RT_DT_QINT8:
        ((int8_t *)p)[i] = (int8_t)v_as_i(v, INT8_MIN, INT8_MAX);
        break;
    case RT_DT_INT16:
    case RT_DT_QINT16:
        ((int16_t *)p)[i] = (int16_t)v_as_i(v, INT16_MIN, INT16_MAX);
        break;
    case RT_DT_INT32:
    case RT_DT_QINT32:
        ((int32_t *)p)[i] = (int32_t)v_as_i(v, INT32_MIN, INT32_MAX);
        break;
    case RT_DT_INT64:
        ((int64_t *)p)[i] = v_as_i(v, INT64_MIN, INT64_MAX);
        break;
    case RT_DT_UINT8:
    case RT_DT_QUINT8:
        ((uint8_t *)p)[i] = (uint8_t)v_as_u(v, UINT8_MAX);
        break;
    case RT_DT_UINT16:
    case RT_DT_QUINT16:
        ((uint16_t *)p)[i] = (uint16_t)v_as_u(v, UINT16_MAX);
        break;
    case RT_DT_UINT32:
        ((uint32_t *)p)[i] = (uint32_t)v_as_u(v, UINT32_MAX);
        break;
    case RT_DT_UINT64:
        ((uint64_t *)p)[i] = v_as_u(v, UINT64_MAX);
        break;
    case RT_DT_BOOL:
        ((uint8_t *)p)[i] = v.kind == 2 ? v.f != 0 || v.fi != 0 : v.kind == 1 ? v.u != 0 : v.i != 0;
        break;
    default:
        break;
    }
}

typedef struct cast_job {
    const void *src;
    void *dst;
    rt_dtype sdt, ddt;
    int saturate;          /* to float8: ONNX Cast's saturate */
    rt_e8m0_round round;   /* to float8e8m0: ONNX Cast's round_mode */
} cast_job;

/* Element i of j's source as an element of its low-precision target type. */
static uint8_t cast_lowp(const cast_job *j, int64_t i) {
    cval v = cast_load(j->src, j->sdt, i);
    if (v.kind == 2) return rt_lowp_from_f64(j->ddt, v.f, j->saturate, j->round);
    if (v.kind == 0 || v.u <= (uint64_t)INT64_MAX)
        return rt_lowp_from_i64(j->ddt, v.kind == 0 ? v.i : (int64_t)v.u, j->saturate, j->round);
    if (!rt_dtype_is_lowp_float(j->ddt)) /* integer targets keep the low bits */
        return rt_lowp_from_i64(j->ddt, (int64_t)(v.u & 0xFF), j->saturate, j->round);
    /* above 2^63: halve with a sticky bit (exact for the few bits kept) */
    return rt_lowp_from_f64(j->ddt, 2.0 * (double)((v.u >> 1) | (v.u & 1)), j->saturate,
                            j->round);
}

#define CAST_FAST(ST, DT)                                                                          \
    do {                                                                                           \
        const ST *s = j->src;                                                                      \
        DT *d = j->dst;                                                                            \
        for (int64_t i = begin; i < end; i++)                                                      \
            d[i] = (DT)s[i];                                                                       \
        return;                                                                                    \
    } while (0)

static void cast_chunk(void *arg, int64_t begin, int64_t end) {
    cast_job *j = arg;
    if (rt_dtype_is_lowp(j->ddt)) {
        uint8_t *d = j->dst;
        for (int64_t i = begin; i < end; i++)
            d[i] = cast_lowp(j, i);
        return;
    }
    /* Lossless-by-C-rules pairs common in imaging pipelines run typed loops. */
    if (j->ddt == RT_DT_FLOAT) {
        switch (j->sdt) {
        case RT_DT_BOOL: {
            /* Masks (Cast of a comparison) in imaging graphs: any non-zero
             * byte is true, as TensorFlow reads a bool. */
            const uint8_t *restrict s = j->src;
            float *restrict d = j->dst;
            for (int64_t i = begin; i < end; i++)
                d[i] = s[i] != 0 ? 1.f : 0.f;
            return;
        }
        case RT_DT_UINT8:
            CAST_FAST(uint8_t, float);
        case RT_DT_INT8:
            CAST_FAST(int8_t, float);
        case RT_DT_UINT16:
            CAST_FAST(uint16_t, float);
        case RT_DT_INT16:
            CAST_FAST(int16_t, float);
        case RT_DT_INT32:
            CAST_FAST(int32_t, float);
        case RT_DT_DOUBLE:
            CAST_FAST(double, float);
        default:
            break;
        }
    } else if (j->ddt == RT_DT_DOUBLE && j->sdt == RT_DT_FLOAT) {
        CAST_FAST(float, double);
    } else if (j->ddt == RT_DT_INT64 && j->sdt == RT_DT_INT32) {
        CAST_FAST(int32_t, int64_t);
    }
    for (int64_t i = begin; i < end; i++)
        cast_store(j->dst, j->ddt, i, cast_load(j->src, j->sdt, i));
}

/* The node's round_mode attribute (ONNX Cast's, for float8e8m0 targets;
 * "up" when absent). */
static ms_status cast_round_mode(const kn_node *node, rt_e8m0_round *out) {
    size_t n = 0;
    const char *s = kn_attr_s(node, "round_mode", &n);
    *out = RT_E8M0_UP;
    if (s == NULL || (n == 2 && memcmp(s, "up", 2) == 0)) return MS_OK;
    if (n == 4 && memcmp(s, "down", 4) == 0) {
        *out = RT_E8M0_DOWN;
        return MS_OK;
    }
    if (n == 7 && memcmp(s, "nearest", 7) == 0) {
        *out = RT_E8M0_NEAREST;
        return MS_OK;
    }
    return KN_EINVAL(node, "round_mode \"%.*s\" is not one of up, down, nearest", (int)n, s);
}

static ms_status cast_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    rt_e8m0_round r;
    ms_status st = cast_round_mode(node, &r);
    if (st != MS_OK) return st;
    rt_dtype d = kn_attr_type(node, "DstT", RT_DT_INVALID);
    if (!cast_supported(d))
        return KN_EINVAL(node, "DstT %s is not a supported cast target", rt_dtype_name(d));
    rt_dtype s = kn_attr_type(node, "SrcT", RT_DT_INVALID);
    if (s != RT_DT_INVALID && !cast_supported(s))
        return KN_EINVAL(node, "SrcT %s is not a supported cast source", rt_dtype_name(s));
    return MS_OK;
}

static ms_status cast_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    rt_dtype d = kn_attr_type(node, "DstT", RT_DT_INVALID);
    if (!cast_supported(d))
        return KN_EINVAL(node, "DstT %s is not a supported cast target", rt_dtype_name(d));
    if (!cast_supported(in[0]->dtype))
        return KN_EINVAL(node, "cannot cast from %s", rt_dtype_name(in[0]->dtype));
    if (d == in[0]->dtype) {
        out[0] = rt_tensor_ref(in[0]);
        return MS_OK;
    }
    if ((st = kn__output(ctx, node, 0, d, &in[0]->shape, &out[0])) != MS_OK) return st;
    cast_job job = {.src = in[0]->data,
                    .dst = out[0]->data,
                    .sdt = in[0]->dtype,
                    .ddt = d,
                    .saturate = kn_attr_b(node, "saturate", 1)};
    if ((st = cast_round_mode(node, &job.round)) != MS_OK) return st;
    if (in[0]->nelem > 0) kn_ctx_parallel_for(ctx, in[0]->nelem, 16384, cast_chunk, &job);
    return MS_OK;
}

/* Bitcast between types of one element size: the bytes unchanged under
 * the new type (ONNX BitCast; TF's also changes the shape when the sizes
 * differ, which is refused here). */
static ms_status bitcast_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    rt_dtype d = kn_attr_type(node, "type", RT_DT_INVALID);
    size_t es = rt_dtype_size(in[0]->dtype);
    if (!rt_dtype_is_pod(d) || !rt_dtype_is_pod(in[0]->dtype) || rt_dtype_size(d) != es)
        return kn__errf(MS_ENOTSUP, node, "bitcast from %s to %s (element sizes must be equal)",
                        rt_dtype_name(in[0]->dtype), rt_dtype_name(d));
    if ((st = kn__output(ctx, node, 0, d, &in[0]->shape, &out[0])) != MS_OK) return st;
    if (in[0]->nelem > 0) memcpy(out[0]->data, in[0]->data, rt_tensor_nbytes(in[0]));
    return MS_OK;
}

/* ====================================================================== */
/* ZerosLike, OnesLike, AddN                                              */
/* ====================================================================== */

static ms_status fill_like_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    rt_dtype dt = in[0]->dtype;
    int ones = strcmp(node->op, "OnesLike") == 0;
    int slot = type_slot(dt);
    if (!rt_dtype_is_pod(dt) || rt_dtype_size(dt) == 0 ||
        (ones && slot != T_F32 && slot != T_F64 && slot != T_I32 && slot != T_I64 &&
         slot != T_U8 && slot != T_BOOL))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(dt));
    if ((st = kn__output(ctx, node, 0, dt, &in[0]->shape, &out[0])) != MS_OK) return st;
    int64_t n = out[0]->nelem;
    if (!ones) {
        memset(out[0]->data, 0, rt_tensor_nbytes(out[0]));
        return MS_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case RT_DT_FLOAT:
            ((float *)out[0]->data)[i] = 1;
            break;
        case RT_DT_DOUBLE:
            ((double *)out[0]->data)[i] = 1;
            break;
        case RT_DT_INT32:
            ((int32_t *)out[0]->data)[i] = 1;
            break;
        case RT_DT_INT64:
            ((int64_t *)out[0]->data)[i] = 1;
            break;
        default:
            ((uint8_t *)out[0]->data)[i] = 1;
            break;
        }
    }
    return MS_OK;
}

typedef struct addn_job {
    rt_tensor *const *in;
    int n;
    void *dst;
    int slot;
} addn_job;

static void addn_chunk(void *arg, int64_t b, int64_t e) {
    const addn_job *j = arg;
    for (int k = 0; k < j->n; k++) {
        const void *src = j->in[k]->data;
        switch (j->slot) {
        case T_F32:
            if (k == 0)
                memcpy((float *)j->dst + b, (const float *)src + b, (size_t)(e - b) * 4);
            else
                add_f32((float *)j->dst + b, 1, (const float *)src + b, 1, (float *)j->dst + b,
                        e - b);
            break;
        case T_F64:
            if (k == 0)
                memcpy((double *)j->dst + b, (const double *)src + b, (size_t)(e - b) * 8);
            else
                add_f64((double *)j->dst + b, 1, (const double *)src + b, 1, (double *)j->dst + b,
                        e - b);
            break;
        case T_I32:
            if (k == 0)
                memcpy((int32_t *)j->dst + b, (const int32_t *)src + b, (size_t)(e - b) * 4);
            else
                add_i32((int32_t *)j->dst + b, 1, (const int32_t *)src + b, 1,
                        (int32_t *)j->dst + b, e - b);
            break;
        default:
            if (k == 0)
                memcpy((int64_t *)j->dst + b, (const int64_t *)src + b, (size_t)(e - b) * 8);
            else
                add_i64((int64_t *)j->dst + b, 1, (const int64_t *)src + b, 1,
                        (int64_t *)j->dst + b, e - b);
            break;
        }
    }
}

static ms_status addn_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    if (node->nin < 1) return KN_EINVAL(node, "needs at least one input");
    ms_status st = kn__need_inputs(node, in, node->nin);
    if (st != MS_OK) return st;
    int slot = type_slot(in[0]->dtype);
    if (slot != T_F32 && slot != T_F64 && slot != T_I32 && slot != T_I64)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(in[0]->dtype));
    for (int k = 1; k < node->nin; k++)
        if (in[k]->dtype != in[0]->dtype || !rt_shape_equal(&in[k]->shape, &in[0]->shape))
            return KN_EINVAL(node, "input %d (%s %s) differs from input 0 (%s %s)", k,
                             rt_dtype_name(in[k]->dtype), kn__shp(&in[k]->shape),
                             rt_dtype_name(in[0]->dtype), kn__shp(&in[0]->shape));
    if ((st = kn__output(ctx, node, 0, in[0]->dtype, &in[0]->shape, &out[0])) != MS_OK) return st;
    addn_job job = {.in = in, .n = node->nin, .dst = out[0]->data, .slot = slot};
    if (out[0]->nelem > 0) kn_ctx_parallel_for(ctx, out[0]->nelem, 16384, addn_chunk, &job);
    return MS_OK;
}

/* ====================================================================== */

#define BIN(name)                                                                                  \
    { .op = name, .prepare = bin_prepare, .compute = bin_compute }
#define UN(name)                                                                                   \
    { .op = name, .prepare = un_prepare, .compute = un_compute, .release = un_release }

const kn_kernel kn_cpu_elementwise_kernels[] = {
    BIN("Add"),
    BIN("AddV2"),
    BIN("Sub"),
    BIN("Mul"),
    BIN("RealDiv"),
    BIN("Maximum"),
    BIN("Minimum"),
    BIN("Pow"),
    BIN("Greater"),
    BIN("GreaterEqual"),
    BIN("Less"),
    BIN("LessEqual"),
    BIN("Equal"),
    BIN("NotEqual"),
    BIN("SquaredDifference"),
    BIN("DivNoNan"),
    BIN("FloorDiv"),
    BIN("FloorMod"),
    BIN("Div"),
    BIN("TruncateDiv"),
    BIN("Mod"),
    BIN("TruncateMod"),
    BIN("Atan2"),
    BIN("Xlogy"),
    BIN("LeftShift"),
    BIN("RightShift"),
    BIN("BitwiseAnd"),
    BIN("BitwiseOr"),
    BIN("BitwiseXor"),
    BIN("LogicalAnd"),
    BIN("LogicalOr"),
    UN("Square"),
    UN("Sqrt"),
    UN("Rsqrt"),
    UN("Exp"),
    UN("Neg"),
    UN("Abs"),
    UN("Relu"),
    UN("Relu6"),
    UN("Sigmoid"),
    UN("Tanh"),
    UN("LeakyRelu"),
    UN("Floor"),
    UN("LogicalNot"),
    UN("Invert"),
    UN("Ceil"),
    UN("Round"),
    UN("Log"),
    UN("Reciprocal"),
    UN("Inv"),
    UN("Softplus"),
    UN("Elu"),
    UN("Selu"),
    UN("Erf"),
    UN("Cos"),
    UN("Sin"),
    UN("Tan"),
    UN("Sign"),
    {.op = "Select", .compute = select_compute},
    {.op = "SelectV2", .compute = select_compute},
    {.op = "Cast", .prepare = cast_prepare, .compute = cast_compute},
    {.op = "Bitcast", .compute = bitcast_compute},
    {.op = "ZerosLike", .compute = fill_like_compute},
    {.op = "OnesLike", .compute = fill_like_compute},
    {.op = "AddN", .compute = addn_compute},
    {.op = NULL},
};
