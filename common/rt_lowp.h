/* rt_lowp.h - the low-precision element types (ONNX's FLOAT8E4M3FN,
 * FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0, FLOAT4E2M1, INT4,
 * UINT4, INT2, UINT2): one element per byte (rt_tensor.h), converted to and
 * from double by ONNX's Cast rules (opset 25).
 *
 * Float formats (sign, exponent bits, mantissa bits, bias):
 *   E4M3FN   1.4.3 bias 7,  no Inf, NaN S.1111.111, max 448
 *   E4M3FNUZ 1.4.3 bias 8,  no Inf, no -0, NaN 0x80 only, max 240
 *   E5M2     1.5.2 bias 15, Inf S.11111.00, NaN S.11111.xx, max 57344
 *   E5M2FNUZ 1.5.2 bias 16, no Inf, no -0, NaN 0x80 only, max 57344
 *   E2M1     1.2.1 bias 1,  no Inf, no NaN, max 6 (in the low 4 bits)
 *   E8M0     0.8.0 bias 127: 2^(b-127), 0xFF NaN, no zero, no sign
 * Encoding rounds once, to nearest even (E8M0: by its round mode). With
 * `saturate` (ONNX's default) Inf and values beyond the largest finite value
 * become that value (sign kept); without it they become Inf where the type
 * has one, else NaN. NaN stays NaN (E2M1, which has none: 0x8, as ONNX's
 * reference gives). -0 and negative values that round to zero become +0 in
 * the FNUZ types, which have no -0.
 * Integer formats wrap: the value modulo 2^bits, read back sign-extended for
 * INT4 / INT2 (ONNX Cast's rule for integer targets); from floating point
 * the value is first truncated toward zero (NaN -> 0, +-Inf and values beyond
 * int64 saturate at int64's range).
 */
#ifndef RT_LOWP_H
#define RT_LOWP_H

#include <stdint.h>

#include "rt_tensor.h"

/* Rounding of a cast to FLOAT8E8M0 (ONNX Cast's round_mode): UP rounds away
 * from zero to the next power of two, DOWN toward zero, NEAREST to the
 * nearer one, ties (1.5 * 2^e) up. */
typedef enum rt_e8m0_round { RT_E8M0_UP = 0, RT_E8M0_DOWN = 1, RT_E8M0_NEAREST = 2 } rt_e8m0_round;

/* True for the types above. */
int rt_dtype_is_lowp(rt_dtype dt);
/* True for the low-precision floating types (float8, float4, e8m0). */
int rt_dtype_is_lowp_float(rt_dtype dt);
/* Bits of one element of a low-precision type (8, 4 or 2); 0 for others. */
int rt_lowp_bits(rt_dtype dt);

/* The exact value of element byte b of type dt (only its low rt_lowp_bits
 * bits are read). NaN for NaN codes; 0 for types this module does not hold. */
double rt_lowp_to_f64(rt_dtype dt, uint8_t b);
/* x as an element of floating low-precision type dt (see above for the
 * rules); `round` matters only for RT_DT_FLOAT8_E8M0. 0 for other types. */
uint8_t rt_lowp_from_f64(rt_dtype dt, double x, int saturate, rt_e8m0_round round);
/* Integer v as an element of dt: integer types wrap (modulo 2^bits), float
 * types take v's value (one rounding: |v| beyond 2^53 keeps a sticky bit). */
uint8_t rt_lowp_from_i64(rt_dtype dt, int64_t v, int saturate, rt_e8m0_round round);
/* The integer value of an element of INT4 / UINT4 / INT2 / UINT2. */
int rt_lowp_to_int(rt_dtype dt, uint8_t b);

/* Unpacks n elements of dt from ONNX's packed layout (4-bit types two per
 * byte, 2-bit four per byte, element 0 in the lowest bits) into one byte per
 * element (signed integer types sign-extended); 8-bit types are copied.
 * `in` holds rt_lowp_packed_size(dt, n) bytes. */
void rt_lowp_unpack(rt_dtype dt, const uint8_t *in, int64_t n, uint8_t *out);
/* Index of the first of n element bytes of dt that is not the one-byte form
 * of an element (4- and 2-bit types: the value sign-extended (INT4, INT2)
 * or zero-extended); -1 when all are (always for the 8-bit types). */
int64_t rt_lowp_first_invalid(rt_dtype dt, const uint8_t *p, int64_t n);
/* Bytes that n packed elements of dt take ((n * bits + 7) / 8). */
int64_t rt_lowp_packed_size(rt_dtype dt, int64_t n);

#endif /* RT_LOWP_H */
