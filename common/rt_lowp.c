/* rt_lowp.c - low-precision element types: decode, encode, unpack (rt_lowp.h). */
#include "rt_lowp.h"

#include <math.h>
#include <string.h>

/* One floating format of at most 8 bits (E8M0 aside). */
typedef struct lp_fmt {
    int ebits, mbits, bias;
    int has_inf; /* E5M2: S.11111.00 */
    int fnuz;    /* no -0; NaN is 0x80 */
    int fn_nan;  /* E4M3FN: NaN is S.1111.111 */
    uint8_t nan; /* the positive NaN code (sign added where the type has one) */
    double max;  /* largest finite value */
} lp_fmt;

static const lp_fmt *fmt_of(rt_dtype dt) {
    static const lp_fmt e4m3fn = {4, 3, 7, 0, 0, 1, 0x7F, 448.0};
    static const lp_fmt e4m3fnuz = {4, 3, 8, 0, 1, 0, 0x80, 240.0};
    static const lp_fmt e5m2 = {5, 2, 15, 1, 0, 0, 0x7E, 57344.0};
    static const lp_fmt e5m2fnuz = {5, 2, 16, 0, 1, 0, 0x80, 57344.0};
    static const lp_fmt e2m1 = {2, 1, 1, 0, 0, 0, 0x8, 6.0};
    switch (dt) {
    case RT_DT_FLOAT8_E4M3FN:
        return &e4m3fn;
    case RT_DT_FLOAT8_E4M3FNUZ:
        return &e4m3fnuz;
    case RT_DT_FLOAT8_E5M2:
        return &e5m2;
    case RT_DT_FLOAT8_E5M2FNUZ:
        return &e5m2fnuz;
    case RT_DT_FLOAT4_E2M1FN:
        return &e2m1;
    default:
        return NULL;
    }
}

int rt_lowp_bits(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT8_E5M2:
    case RT_DT_FLOAT8_E4M3FN:
    case RT_DT_FLOAT8_E4M3FNUZ:
    case RT_DT_FLOAT8_E5M2FNUZ:
    case RT_DT_FLOAT8_E8M0:
        return 8;
    case RT_DT_INT4:
    case RT_DT_UINT4:
    case RT_DT_FLOAT4_E2M1FN:
        return 4;
    case RT_DT_INT2:
    case RT_DT_UINT2:
        return 2;
    default:
        return 0;
    }
}

int rt_dtype_is_lowp(rt_dtype dt) {
    return rt_lowp_bits(dt) != 0;
}

int rt_dtype_is_lowp_float(rt_dtype dt) {
    return fmt_of(dt) != NULL || dt == RT_DT_FLOAT8_E8M0;
}

int rt_lowp_to_int(rt_dtype dt, uint8_t b) {
    switch (dt) {
    case RT_DT_INT4:
        return (b & 0x8) ? (int)(b & 0xF) - 16 : (int)(b & 0xF);
    case RT_DT_UINT4:
        return b & 0xF;
    case RT_DT_INT2:
        return (b & 0x2) ? (int)(b & 0x3) - 4 : (int)(b & 0x3);
    case RT_DT_UINT2:
        return b & 0x3;
    default:
        return 0;
    }
}

double rt_lowp_to_f64(rt_dtype dt, uint8_t b) {
    if (dt == RT_DT_FLOAT8_E8M0) return b == 0xFF ? NAN : ldexp(1.0, (int)b - 127);
    const lp_fmt *f = fmt_of(dt);
    if (f == NULL) return rt_lowp_to_int(dt, b);
    int nb = 1 + f->ebits + f->mbits;
    b &= (uint8_t)((1u << nb) - 1);
    unsigned sign = b >> (nb - 1);
    unsigned e = (b >> f->mbits) & ((1u << f->ebits) - 1);
    unsigned m = b & ((1u << f->mbits) - 1);
    unsigned emax = (1u << f->ebits) - 1;
    if (f->fnuz && b == 0x80) return NAN;
    if (f->fn_nan && e == emax && m == (1u << f->mbits) - 1) return NAN;
    if (f->has_inf && e == emax) return m ? NAN : sign ? -INFINITY : INFINITY;
    double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return sign ? -v : v;
}

/* E8M0 by round mode r; sign ignored (the type has none). */
static uint8_t e8m0_from(double x, int saturate, rt_e8m0_round r) {
    if (isnan(x)) return 0xFF;
    double a = fabs(x);
    if (isinf(a)) return saturate ? 0xFE : 0xFF;
    if (a == 0) return 0x00; /* no zero: the smallest value */
    int ex;
    double fr = frexp(a, &ex); /* a = fr * 2^ex, fr in [0.5, 1) */
    int e = ex - 1;            /* 2^e <= a < 2^(e+1) */
    int up = fr > 0.5 && (r == RT_E8M0_UP || (r == RT_E8M0_NEAREST && fr >= 0.75));
    e += up;
    if (e < -127) return 0x00;
    if (e > 127) return saturate ? 0xFE : 0xFF;
    return (uint8_t)(e + 127);
}

uint8_t rt_lowp_from_f64(rt_dtype dt, double x, int saturate, rt_e8m0_round round) {
    if (dt == RT_DT_FLOAT8_E8M0) return e8m0_from(x, saturate, round);
    const lp_fmt *f = fmt_of(dt);
    if (f == NULL) {
        if (!rt_dtype_is_lowp(dt)) return 0;
        int64_t i;
        if (x != x)
            i = 0;
        else if (x <= -9223372036854775808.0)
            i = INT64_MIN;
        else if (x >= 9223372036854775808.0)
            i = INT64_MAX;
        else
            i = (int64_t)x; /* truncation toward zero */
        return rt_lowp_from_i64(dt, i, saturate, round);
    }
    int nb = 1 + f->ebits + f->mbits;
    uint8_t sign = signbit(x) ? (uint8_t)(1u << (nb - 1)) : 0;
    uint8_t maxcode =
        (uint8_t)(f->fn_nan ? (0x7F - 1)
                            : ((1u << (nb - 1)) - 1) - (f->has_inf ? (1u << f->mbits) : 0));
    if (isnan(x)) return f->fnuz || dt == RT_DT_FLOAT4_E2M1FN ? f->nan : (uint8_t)(f->nan | sign);
    double a = fabs(x);
    if (isinf(a) || a > f->max) {
        /* Beyond max: values that still round to max are max, as RNE gives. */
        if (!isinf(a)) {
            int ex;
            frexp(f->max, &ex);
            double q = ldexp(1.0, ex - 1 - f->mbits); /* the spacing at max */
            if (nearbyint(a / q) * q == f->max) return (uint8_t)(maxcode | sign);
        }
        if (saturate || dt == RT_DT_FLOAT4_E2M1FN) return (uint8_t)(maxcode | sign);
        if (f->has_inf) return (uint8_t)(((1u << (nb - 1)) - (1u << f->mbits)) | sign);
        return f->fnuz ? f->nan : (uint8_t)(f->nan | sign);
    }
    int emin = 1 - f->bias; /* exponent of the smallest normal */
    int ex;
    frexp(a, &ex);
    int e = a == 0 ? emin : ex - 1;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - f->mbits); /* spacing of the grid at a */
    double r = nearbyint(a / q);         /* round to nearest even; exact scaling */
    double v = r * q;
    if (v == 0) return f->fnuz ? 0 : sign;
    uint8_t code;
    if (v < ldexp(1.0, emin)) {
        code = (uint8_t)r; /* subnormal: exponent field 0 */
    } else {
        frexp(v, &ex);
        int ev = ex - 1;
        unsigned m = (unsigned)(v / ldexp(1.0, ev - f->mbits)) - (1u << f->mbits);
        code = (uint8_t)(((unsigned)(ev + f->bias) << f->mbits) | m);
    }
    return (uint8_t)(code | sign);
}

uint8_t rt_lowp_from_i64(rt_dtype dt, int64_t v, int saturate, rt_e8m0_round round) {
    switch (dt) {
    case RT_DT_INT4:
        return (uint8_t)(int8_t)rt_lowp_to_int(dt, (uint8_t)((uint64_t)v & 0xF));
    case RT_DT_UINT4:
        return (uint8_t)((uint64_t)v & 0xF);
    case RT_DT_INT2:
        return (uint8_t)(int8_t)rt_lowp_to_int(dt, (uint8_t)((uint64_t)v & 0x3));
    case RT_DT_UINT2:
        return (uint8_t)((uint64_t)v & 0x3);
    default:
        break;
    }
    /* Beyond 2^53 keep a sticky bit for what (double) would drop, so the
     * value rounds once to the target. */
    int neg = v < 0;
    uint64_t u = neg ? 0 - (uint64_t)v : (uint64_t)v;
    int s = 0;
    while ((u >> s) >= (1ull << 53))
        s++;
    uint64_t w = (u >> s) | ((u & ((1ull << s) - 1)) != 0);
    double d = ldexp((double)w, s);
    return rt_lowp_from_f64(dt, neg ? -d : d, saturate, round);
}

int64_t rt_lowp_packed_size(rt_dtype dt, int64_t n) {
    int bits = rt_lowp_bits(dt);
    return bits == 0 ? 0 : (n * bits + 7) / 8;
}

void rt_lowp_unpack(rt_dtype dt, const uint8_t *in, int64_t n, uint8_t *out) {
    int bits = rt_lowp_bits(dt);
    if (bits == 8) {
        if (n > 0) memcpy(out, in, (size_t)n);
        return;
    }
    int per = 8 / bits;
    for (int64_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)((in[i / per] >> ((i % per) * bits)) & ((1u << bits) - 1));
        out[i] = dt == RT_DT_INT4 || dt == RT_DT_INT2 ? (uint8_t)(int8_t)rt_lowp_to_int(dt, b) : b;
    }
}

int64_t rt_lowp_first_invalid(rt_dtype dt, const uint8_t *p, int64_t n) {
    int bits = rt_lowp_bits(dt);
    if (bits == 0 || bits == 8) return -1;
    int sign = dt == RT_DT_INT4 || dt == RT_DT_INT2;
    for (int64_t i = 0; i < n; i++) {
        uint8_t low = (uint8_t)(p[i] & ((1u << bits) - 1));
        uint8_t want = sign ? (uint8_t)(int8_t)rt_lowp_to_int(dt, low) : low;
        if (p[i] != want) return i;
    }
    return -1;
}
