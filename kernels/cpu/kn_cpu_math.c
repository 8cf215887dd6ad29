/* kn_cpu_math.c - CPU kernels of the less common math and layout ops that
 * Keras / TF exports contain: the unary functions Erfc, Log1p, Expm1, Atan,
 * Asin, Acos, Sinh, Cosh, Asinh, Acosh, Atanh, Softsign, Rint and the tests
 * IsNan / IsInf / IsFinite; ClipByValue; Cumsum / Cumprod; Size and Rank;
 * MatrixBandPart; All / Any; CheckNumerics, Assert and PreventGradient;
 * DepthToSpace / SpaceToDepth (NHWC).
 *
 * Semantics follow TensorFlow's op documentation: ClipByValue takes scalar
 * bounds or bounds of the input's shape; Cumsum's exclusive / reverse attrs;
 * MatrixBandPart keeps (m, n) where (num_lower < 0 || m - n <= num_lower)
 * && (num_upper < 0 || n - m <= num_upper); CheckNumerics fails with
 * INVALID_ARGUMENT naming its message when the tensor holds a NaN or an
 * infinity; Assert evaluates its condition and, when false, fails with
 * INVALID_ARGUMENT "assertion failed: [data 0] [data 1] ..." (each data
 * tensor summarised to its first `summarize` values, as TensorFlow prints
 * them); DepthToSpace uses the DCR order (depth = (bh * b + bw) * C + c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* ====================================================================== */
/* unary float functions                                                  */
/* ====================================================================== */

static double softsign(double x) {
    return x / (1 + fabs(x));
}

typedef struct math_un {
    const char *op;
    double (*fd)(double);
    float (*ff)(float);
    int test; /* 1 IsNan, 2 IsInf, 3 IsFinite: bool output */
} math_un;

static float softsignf(float x) {
    return x / (1 + fabsf(x));
}

/* clang-format off */
static const math_un un_table[] = {
    {"Erfc", erfc, erfcf, 0},   {"Log1p", log1p, log1pf, 0}, {"Expm1", expm1, expm1f, 0},
    {"Atan", atan, atanf, 0},   {"Asin", asin, asinf, 0},    {"Acos", acos, acosf, 0},
    {"Sinh", sinh, sinhf, 0},   {"Cosh", cosh, coshf, 0},    {"Asinh", asinh, asinhf, 0},
    {"Acosh", acosh, acoshf, 0}, {"Atanh", atanh, atanhf, 0}, {"Softsign", softsign, softsignf, 0},
    {"Rint", rint, rintf, 0},
    {"IsNan", NULL, NULL, 1},   {"IsInf", NULL, NULL, 2},    {"IsFinite", NULL, NULL, 3},
};
/* clang-format on */

static ms_status un_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const math_un *u = NULL;
    for (size_t i = 0; i < sizeof(un_table) / sizeof(un_table[0]); i++)
        if (strcmp(un_table[i].op, node->op) == 0) u = &un_table[i];
    const rt_tensor *x = in[0];
    if (u == NULL || (x->dtype != RT_DT_FLOAT && x->dtype != RT_DT_DOUBLE))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    int dbl = x->dtype == RT_DT_DOUBLE;
    if ((st = kn__output(ctx, node, 0, u->test ? RT_DT_BOOL : x->dtype, &x->shape, &out[0])) !=
        MS_OK)
        return st;
    for (int64_t i = 0; i < x->nelem; i++) {
        double v = dbl ? ((const double *)x->data)[i] : ((const float *)x->data)[i];
        if (u->test) {
            int r = u->test == 1 ? isnan(v) : u->test == 2 ? isinf(v) : isfinite(v);
            ((uint8_t *)out[0]->data)[i] = r != 0;
        } else if (dbl) {
            ((double *)out[0]->data)[i] = u->fd(v);
        } else {
            ((float *)out[0]->data)[i] = u->ff(((const float *)x->data)[i]);
        }
    }
    return MS_OK;
}

/* ====================================================================== */
/* ClipByValue                                                            */
/* ====================================================================== */

static double num_at(const rt_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RT_DT_FLOAT: return ((const float *)t->data)[i];
    case RT_DT_DOUBLE: return ((const double *)t->data)[i];
    case RT_DT_INT32: return ((const int32_t *)t->data)[i];
    default: return (double)((const int64_t *)t->data)[i];
    }
}

static void num_put(rt_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case RT_DT_FLOAT: ((float *)t->data)[i] = (float)v; break;
    case RT_DT_DOUBLE: ((double *)t->data)[i] = v; break;
    case RT_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    default: ((int64_t *)t->data)[i] = (int64_t)v; break;
    }
}

static int64_t int_at(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static int is_num(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE || dt == RT_DT_INT32 || dt == RT_DT_INT64;
}

static ms_status clip_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *lo = in[1], *hi = in[2];
    if (!is_num(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    for (int k = 1; k < 3; k++) {
        if (in[k]->dtype != x->dtype)
            return KN_EINVAL(node, "clip bound %d is %s, the input %s", k,
                             rt_dtype_name(in[k]->dtype), rt_dtype_name(x->dtype));
        if (in[k]->shape.rank != 0 && !rt_shape_equal(&in[k]->shape, &x->shape))
            return KN_EINVAL(node,
                             "clip bound %d must be a scalar or of the input's shape %s, "
                             "got %s",
                             k, kn__shp(&x->shape), kn__shp(&in[k]->shape));
    }
    if ((st = kn__output(ctx, node, 0, x->dtype, &x->shape, &out[0])) != MS_OK) return st;
    int isint = x->dtype == RT_DT_INT32 || x->dtype == RT_DT_INT64;
    for (int64_t i = 0; i < x->nelem; i++) {
        int64_t li = lo->shape.rank ? i : 0, hi_i = hi->shape.rank ? i : 0;
        if (isint) {
            int64_t v = int_at(x, i), l = int_at(lo, li), h = int_at(hi, hi_i);
            v = v < l ? l : v;
            v = v > h ? h : v;
            if (x->dtype == RT_DT_INT64)
                ((int64_t *)out[0]->data)[i] = v;
            else
                ((int32_t *)out[0]->data)[i] = (int32_t)v;
        } else {
            /* min(max(x, lo), hi); a NaN input stays NaN */
            double v = num_at(x, i), l = num_at(lo, li), h = num_at(hi, hi_i);
            v = v < l ? l : v;
            v = v > h ? h : v;
            num_put(out[0], i, v);
        }
    }
    return MS_OK;
}

/* ====================================================================== */
/* Cumsum, Cumprod                                                        */
/* ====================================================================== */

static ms_status cum_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!is_num(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    int64_t axis;
    if ((st = kn__read_int1(node, in[1], "axis", &axis)) != MS_OK) return st;
    int a = kn__axis(axis, x->shape.rank);
    if (a < 0)
        return KN_EINVAL(node, "axis %lld is out of range for input %s", (long long)axis,
                         kn__shp(&x->shape));
    int prod = strcmp(node->op, "Cumprod") == 0;
    int excl = kn_attr_b(node, "exclusive", 0), rev = kn_attr_b(node, "reverse", 0);
    if ((st = kn__output(ctx, node, 0, x->dtype, &x->shape, &out[0])) != MS_OK) return st;
    int64_t n = x->shape.dim[a], inner = 1, outer = 1;
    for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.dim[d];
    for (int d = 0; d < a; d++) outer *= x->shape.dim[d];
    int isint = x->dtype == RT_DT_INT32 || x->dtype == RT_DT_INT64;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++) {
            double acc = prod ? 1 : 0;
            uint64_t iacc = prod ? 1 : 0; /* integers wrap as TensorFlow's do */
            for (int64_t j = 0; j < n; j++) {
                int64_t k = rev ? n - 1 - j : j, idx = (o * n + k) * inner + q;
                double v = isint ? 0 : num_at(x, idx);
                uint64_t iv = isint ? (uint64_t)int_at(x, idx) : 0;
                double before = acc;
                uint64_t ibefore = iacc;
                acc = prod ? acc * v : acc + v;
                iacc = prod ? iacc * iv : iacc + iv;
                if (!isint)
                    num_put(out[0], idx, excl ? before : acc);
                else if (x->dtype == RT_DT_INT64)
                    ((int64_t *)out[0]->data)[idx] = (int64_t)(excl ? ibefore : iacc);
                else
                    ((int32_t *)out[0]->data)[idx] = (int32_t)(uint32_t)(excl ? ibefore : iacc);
            }
        }
    return MS_OK;
}

/* ====================================================================== */
/* Size, Rank                                                             */
/* ====================================================================== */

static ms_status size_rank_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    int rank = strcmp(node->op, "Rank") == 0;
    rt_dtype ot = rank ? RT_DT_INT32 : kn_attr_type(node, "out_type", RT_DT_INT32);
    if (ot != RT_DT_INT32 && ot != RT_DT_INT64)
        return KN_EINVAL(node, "out_type must be int32 or int64, got %s", rt_dtype_name(ot));
    int64_t v = rank ? in[0]->shape.rank : in[0]->nelem;
    if (ot == RT_DT_INT32 && v > INT32_MAX)
        return KN_EINVAL(node, "size %lld does not fit in int32", (long long)v);
    rt_shape scalar = {.rank = 0};
    if ((st = kn__output(ctx, node, 0, ot, &scalar, &out[0])) != MS_OK) return st;
    if (ot == RT_DT_INT64)
        *(int64_t *)out[0]->data = v;
    else
        *(int32_t *)out[0]->data = (int32_t)v;
    return MS_OK;
}

/* ====================================================================== */
/* MatrixBandPart                                                         */
/* ====================================================================== */

static ms_status band_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!rt_dtype_is_pod(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    if (x->shape.rank < 2)
        return KN_EINVAL(node, "input must be at least rank 2, got %s", kn__shp(&x->shape));
    int64_t lower, upper;
    if ((st = kn__read_int1(node, in[1], "num_lower", &lower)) != MS_OK ||
        (st = kn__read_int1(node, in[2], "num_upper", &upper)) != MS_OK)
        return st;
    int64_t M = x->shape.dim[x->shape.rank - 2], N = x->shape.dim[x->shape.rank - 1];
    if (lower > M)
        return KN_EINVAL(node, "num_lower %lld must not exceed %lld", (long long)lower,
                         (long long)M);
    if (upper > N)
        return KN_EINVAL(node, "num_upper %lld must not exceed %lld", (long long)upper,
                         (long long)N);
    if ((st = kn__output(ctx, node, 0, x->dtype, &x->shape, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(x->dtype);
    int64_t mats = M * N > 0 ? x->nelem / (M * N) : 0;
    uint8_t *o = out[0]->data;
    const uint8_t *s = x->data;
    for (int64_t b = 0; b < mats; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                size_t off = (size_t)((b * M + m) * N + n) * es;
                int keep = (lower < 0 || m - n <= lower) && (upper < 0 || n - m <= upper);
                if (keep)
                    memcpy(o + off, s + off, es);
                else
                    memset(o + off, 0, es);
            }
    return MS_OK;
}

/* ====================================================================== */
/* All, Any                                                               */
/* ====================================================================== */

static ms_status allany_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_BOOL)
        return KN_EINVAL(node, "input must be bool, got %s", rt_dtype_name(x->dtype));
    int64_t axes[64];
    int na;
    if ((st = kn__read_ints(node, in[1], "reduction_indices", axes, 64, &na)) != MS_OK) return st;
    int red[RT_MAX_RANK] = {0}, rank = x->shape.rank;
    for (int i = 0; i < na; i++) {
        int a = kn__axis(axes[i], rank);
        if (a < 0)
            return KN_EINVAL(node, "reduction index %lld out of range for input %s",
                             (long long)axes[i], kn__shp(&x->shape));
        red[a] = 1;
    }
    int keep = kn_attr_b(node, "keep_dims", 0), all = strcmp(node->op, "All") == 0;
    rt_shape os = {.rank = 0};
    int64_t ostride[RT_MAX_RANK], acc = 1;
    for (int d = rank - 1; d >= 0; d--) {
        ostride[d] = red[d] ? 0 : acc;
        if (!red[d]) acc *= x->shape.dim[d];
    }
    for (int d = 0; d < rank; d++)
        if (!red[d])
            os.dim[os.rank++] = x->shape.dim[d];
        else if (keep)
            os.dim[os.rank++] = 1;
    if ((st = kn__output(ctx, node, 0, RT_DT_BOOL, &os, &out[0])) != MS_OK) return st;
    uint8_t *o = out[0]->data;
    memset(o, all ? 1 : 0, (size_t)out[0]->nelem);
    const uint8_t *s = x->data;
    int64_t idx[RT_MAX_RANK] = {0}, off = 0;
    for (int64_t i = 0; i < x->nelem; i++) {
        if (all)
            o[off] = o[off] && s[i];
        else
            o[off] = o[off] || s[i];
        for (int d = rank - 1; d >= 0; d--) {
            off += ostride[d];
            if (++idx[d] < x->shape.dim[d]) break;
            off -= ostride[d] * x->shape.dim[d];
            idx[d] = 0;
        }
    }
    return MS_OK;
}

/* ====================================================================== */
/* CheckNumerics, PreventGradient                                         */
/* ====================================================================== */

static ms_status check_numerics_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->dtype == RT_DT_FLOAT || x->dtype == RT_DT_DOUBLE) {
        int nan = 0, inf = 0;
        for (int64_t i = 0; i < x->nelem; i++) {
            double v = x->dtype == RT_DT_FLOAT ? ((const float *)x->data)[i]
                                               : ((const double *)x->data)[i];
            nan |= isnan(v) != 0;
            inf |= isinf(v) != 0;
        }
        if (nan || inf) {
            size_t len = 0;
            const char *msg = kn_attr_s(node, "message", &len);
            return KN_EINVAL(node, "%.*s : Tensor had %s values", (int)(len > 200 ? 200 : len),
                             msg ? msg : "",
                             nan && inf ? "Inf and NaN"
                             : nan      ? "NaN"
                                        : "Inf");
        }
    }
    out[0] = rt_tensor_ref(in[0]);
    return MS_OK;
}

/* ---- Assert ---- */

typedef struct sumbuf {
    char *p;
    size_t n, o;
    int64_t left; /* values still to print (summarize) */
} sumbuf;

static void sb_put(sumbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_put(sumbuf *b, const char *fmt, ...) {
    if (b->o >= b->n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->o, b->n - b->o, fmt, ap);
    va_end(ap);
    b->o += k > 0 ? (size_t)k : 0;
}

/* Element i of t as TensorFlow prints it (floats in the shortest form that
 * reads back, strings as they are). */
static void put_value(sumbuf *b, const rt_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RT_DT_FLOAT: {
        float v = ((const float *)t->data)[i];
        char s[32];
        snprintf(s, sizeof s, "%.6g", v);
        if (strtof(s, NULL) != v) snprintf(s, sizeof s, "%.9g", v);
        sb_put(b, "%s", s);
        break;
    }
    case RT_DT_DOUBLE: {
        double v = ((const double *)t->data)[i];
        char s[40];
        snprintf(s, sizeof s, "%.6g", v);
        if (strtod(s, NULL) != v) snprintf(s, sizeof s, "%.17g", v);
        sb_put(b, "%s", s);
        break;
    }
    case RT_DT_STRING: {
        const rt_str *v = &rt_tensor_strs(t)[i];
        sb_put(b, "%.*s", (int)(v->len > 512 ? 512 : v->len), (const char *)v->data);
        break;
    }
    case RT_DT_INT32: sb_put(b, "%d", ((const int32_t *)t->data)[i]); break;
    case RT_DT_INT64: sb_put(b, "%lld", (long long)((const int64_t *)t->data)[i]); break;
    case RT_DT_BOOL:
    case RT_DT_UINT8: sb_put(b, "%u", ((const uint8_t *)t->data)[i]); break;
    case RT_DT_INT8: sb_put(b, "%d", ((const int8_t *)t->data)[i]); break;
    case RT_DT_INT16: sb_put(b, "%d", ((const int16_t *)t->data)[i]); break;
    case RT_DT_UINT16: sb_put(b, "%u", ((const uint16_t *)t->data)[i]); break;
    default: sb_put(b, "<%s>", rt_dtype_name(t->dtype)); break;
    }
}

/* Dimension d of t from element *at on, TensorFlow's layout: values of the
 * last dimension separated by spaces, the others bracketed; "..." once
 * `summarize` values are out. */
static void put_dim(sumbuf *b, const rt_tensor *t, int d, int64_t *at) {
    int64_t n = t->shape.dim[d];
    for (int64_t i = 0; i < n && b->left > 0; i++) {
        if (d == t->shape.rank - 1) {
            if (i) sb_put(b, " ");
            put_value(b, t, (*at)++);
            if (--b->left == 0 && *at < t->nelem) sb_put(b, "...");
        } else {
            sb_put(b, "[");
            put_dim(b, t, d + 1, at);
            sb_put(b, "]");
        }
    }
}

static ms_status assert_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)state, (void)out;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *c = in[0];
    if (c->dtype != RT_DT_BOOL || c->nelem != 1)
        return KN_EINVAL(node, "condition must be a bool scalar, got %s %s",
                         rt_dtype_name(c->dtype), kn__shp(&c->shape));
    if (*(const uint8_t *)c->data) return MS_OK;
    int64_t summarize = kn_attr_i(node, "summarize", 3);
    char msg[4096];
    sumbuf b = {.p = msg, .n = sizeof msg};
    sb_put(&b, "assertion failed: ");
    for (int i = 1; i < node->nin; i++) {
        const rt_tensor *t = in[i];
        b.left = summarize < 0 ? t->nelem : summarize;
        sb_put(&b, "%s[", i > 1 ? " " : "");
        if (t->shape.rank == 0 && b.left > 0)
            put_value(&b, t, 0);
        else if (t->nelem > 0)
            put_dim(&b, t, 0, &(int64_t){0});
        sb_put(&b, "]");
    }
    if (b.o >= sizeof msg) memcpy(msg + sizeof msg - 4, "...", 4);
    /* not kn__errf: its message is shorter than an assert's data may be */
    return ms_errf(MS_EINVAL, "node '%s' (%s): %s", node->name, node->op, msg);
}

static ms_status forward_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    out[0] = rt_tensor_ref(in[0]);
    return MS_OK;
}

/* ====================================================================== */
/* DepthToSpace, SpaceToDepth (NHWC)                                      */
/* ====================================================================== */

static ms_status d2s_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int to_space = strcmp(node->op, "DepthToSpace") == 0;
    int64_t b = kn_attr_i(node, "block_size", 0);
    if (b < 2) return KN_EINVAL(node, "block_size must be at least 2, got %lld", (long long)b);
    if (!kn_attr_s_eq(node, "data_format", "NHWC", "NHWC"))
        return kn__errf(MS_ENOTSUP, node, "only data_format NHWC is supported");
    if (!rt_dtype_is_pod(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    if (x->shape.rank != 4) return KN_EINVAL(node, "input must be 4-D, got %s", kn__shp(&x->shape));
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    rt_shape os = x->shape;
    if (to_space) {
        if (C % (b * b) != 0)
            return KN_EINVAL(node, "input depth %lld is not divisible by block_size squared %lld",
                             (long long)C, (long long)(b * b));
        os.dim[1] = H * b, os.dim[2] = W * b, os.dim[3] = C / (b * b);
    } else {
        if (H % b != 0 || W % b != 0)
            return KN_EINVAL(node,
                             "height %lld and width %lld must be divisible by block_size %lld",
                             (long long)H, (long long)W, (long long)b);
        os.dim[1] = H / b, os.dim[2] = W / b, os.dim[3] = C * b * b;
    }
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(x->dtype);
    /* walk the space-side tensor [N, Hs, Ws, Cs]; its depth-side element is
     * [n, h / b, w / b, ((h % b) * b + w % b) * Cs + c] */
    const rt_shape *sp = to_space ? &os : &x->shape;
    int64_t Hs = sp->dim[1], Ws = sp->dim[2], Cs = sp->dim[3], Cd = Cs * b * b;
    const uint8_t *src = x->data;
    uint8_t *dst = out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < Hs; h++)
            for (int64_t w = 0; w < Ws; w++) {
                size_t soff = (size_t)(((n * Hs + h) * Ws + w) * Cs) * es;
                size_t doff = (size_t)((((n * (Hs / b) + h / b) * (Ws / b) + w / b) * Cd) +
                                       ((h % b) * b + w % b) * Cs) *
                              es;
                if (to_space)
                    memcpy(dst + soff, src + doff, (size_t)Cs * es);
                else
                    memcpy(dst + doff, src + soff, (size_t)Cs * es);
            }
    return MS_OK;
}

#define UNM(name)                                                                                  \
    { .op = name, .compute = un_compute }

/* clang-format off */
const kn_kernel kn_cpu_math_kernels[] = {
    UNM("Erfc"), UNM("Log1p"), UNM("Expm1"), UNM("Atan"), UNM("Asin"), UNM("Acos"),
    UNM("Sinh"), UNM("Cosh"), UNM("Asinh"), UNM("Acosh"), UNM("Atanh"), UNM("Softsign"),
    UNM("Rint"), UNM("IsNan"), UNM("IsInf"), UNM("IsFinite"),
    {.op = "ClipByValue", .compute = clip_compute},
    {.op = "Cumsum", .compute = cum_compute},
    {.op = "Cumprod", .compute = cum_compute},
    {.op = "Size", .compute = size_rank_compute},
    {.op = "Rank", .compute = size_rank_compute},
    {.op = "MatrixBandPart", .compute = band_compute},
    {.op = "All", .compute = allany_compute},
    {.op = "Any", .compute = allany_compute},
    {.op = "CheckNumerics", .compute = check_numerics_compute},
    {.op = "Assert", .compute = assert_compute},
    {.op = "PreventGradient", .compute = forward_compute},
    {.op = "DepthToSpace", .compute = d2s_compute},
    {.op = "SpaceToDepth", .compute = d2s_compute},
    {.op = NULL},
};
/* clang-format on */
