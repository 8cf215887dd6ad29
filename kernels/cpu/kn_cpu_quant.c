/* kn_cpu_quant.c - ops of our own for ONNX's linear quantisation (emitted by
 * runtime/onnx/rt_onnx_quant.c; docs/onnx.md):
 *
 *   OnnxQuantizeLinear   x (float), scale (float), [zero_point (attr T)] ->
 *                        y (attr T: int8, uint8, int16, uint16, int32, int4,
 *                        uint4, int2, uint2): saturate(rint(x / scale) +
 *                        zero_point), the division in float32 and rint
 *                        rounding half to even; T float8 / float4: x / scale
 *                        (zero_point must be 0) cast as ONNX's Cast with
 *                        attr saturate (rt_lowp.h).
 *   OnnxDequantizeLinear x (int8, uint8, int16, uint16, int32, the int4 /
 *                        int2 and float8 / float4 types), scale (float),
 *                        [zero_point (x's type)] -> (x - zero_point) * scale,
 *                        in float32 (x and zero_point converted first).
 *   Both: attr axis (normalised), block_size; attr has_zp says whether
 *   input 2 is present. scale (and zero_point) is one value (per tensor),
 *   1-D along axis (per axis), or with block_size > 0 x's shape with
 *   ceil(dim / block_size) at axis (blocked).
 *   OnnxDynamicQuantizeLinear x (float) -> y (uint8), y_scale, y_zero_point
 *                        as ONNX DynamicQuantizeLinear 11.
 *   OnnxMatMulInteger    a, b (int8 / uint8), [a_zero_point], [b_zero_point] (one
 *                        value, or a's rows / b's columns) -> int32
 *                        (a - a_zp) @ (b - b_zp); b rank 2 or a's batch dims;
 *                        attrs has_za, has_zb say which zero points are given.
 *   OnnxQLinearMatMul    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp ->
 *                        saturate(rint(acc * (a_scale * b_scale / y_scale)) +
 *                        y_zp), the product in double as ONNX's reference.
 *   OnnxConvInteger      x, w (int8 / uint8, rank 4), [x_zp], [w_zp] (attrs
 *                        has_za, has_zb) -> int32 2-D convolution; attrs pads
 *                        (top, left, bottom, right), strides, dilations, group.
 *   OnnxQLinearConv      x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp,
 *                        [B] (attr has_b) -> as OnnxQLinearMatMul over the
 *                        convolution's sums plus B; w_scale / w_zp one value or
 *                        one per output channel.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "rt_lowp.h"

/* Range of an integer quantisation type; 0 when not one. */
static int qrange(rt_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case RT_DT_INT8: *lo = -128, *hi = 127; return 1;
    case RT_DT_UINT8: *lo = 0, *hi = 255; return 1;
    case RT_DT_INT16: *lo = -32768, *hi = 32767; return 1;
    case RT_DT_UINT16: *lo = 0, *hi = 65535; return 1;
    case RT_DT_INT32: *lo = -2147483648.0, *hi = 2147483647.0; return 1;
    case RT_DT_INT4: *lo = -8, *hi = 7; return 1;
    case RT_DT_UINT4: *lo = 0, *hi = 15; return 1;
    case RT_DT_INT2: *lo = -2, *hi = 1; return 1;
    case RT_DT_UINT2: *lo = 0, *hi = 3; return 1;
    default: return 0;
    }
}

static double qget(const void *p, rt_dtype dt, int64_t i) {
    switch (dt) {
    case RT_DT_INT8: return ((const int8_t *)p)[i];
    case RT_DT_UINT8: return ((const uint8_t *)p)[i];
    case RT_DT_INT16: return ((const int16_t *)p)[i];
    case RT_DT_UINT16: return ((const uint16_t *)p)[i];
    case RT_DT_INT32: return ((const int32_t *)p)[i];
    default: return rt_lowp_to_f64(dt, ((const uint8_t *)p)[i]); /* int4 ... float8 */
    }
}

static void qput(void *p, rt_dtype dt, int64_t i, double v) {
    switch (dt) {
    case RT_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case RT_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case RT_DT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case RT_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case RT_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((uint8_t *)p)[i] = rt_lowp_from_i64(dt, (int64_t)v, 1, RT_E8M0_UP); break;
    }
}

/* r (an integer-valued double) saturated to [lo, hi]; NaN gives 0. */
static double qsat(double r, double lo, double hi) {
    if (r != r) return 0;
    return r < lo ? lo : r > hi ? hi : r;
}

/* Where element (o, a, i) of x viewed as [outer, A, inner] finds its scale:
 * s_outer/s_a/s_inner strides and the block size (1 per axis). */
typedef struct q_map {
    int64_t outer, A, inner;
    int64_t so, sa, si, block;
} q_map;

/* Checks scale's shape against x's and fills m. */
static ms_status q_layout(const kn_node *node, const rt_tensor *X, const rt_tensor *S, q_map *m) {
    int r = X->shape.rank;
    int64_t axis = kn_attr_i(node, "axis", 1), block = kn_attr_i(node, "block_size", 0);
    if (block < 0) return KN_EINVAL(node, "block_size %lld is negative", (long long)block);
    memset(m, 0, sizeof(*m));
    m->outer = 1, m->A = 1, m->inner = X->nelem, m->block = 1;
    if (S->nelem == 1 && S->shape.rank <= 1 && block == 0) return MS_OK; /* per tensor */
    if (r == 0 || axis < 0 || axis >= r)
        return KN_EINVAL(node, "axis %lld out of range for x %s", (long long)axis,
                         kn__shp(&X->shape));
    m->outer = 1, m->inner = 1, m->A = X->shape.dim[axis];
    for (int i = 0; i < axis; i++)
        m->outer *= X->shape.dim[i];
    for (int i = (int)axis + 1; i < r; i++)
        m->inner *= X->shape.dim[i];
    if (block == 0) {
        if (S->shape.rank != 1 || S->shape.dim[0] != m->A)
            return KN_EINVAL(node, "scale %s: want one value or %lld along axis %lld of x %s",
                             kn__shp(&S->shape), (long long)m->A, (long long)axis,
                             kn__shp(&X->shape));
        m->sa = 1;
        return MS_OK;
    }
    int64_t nb = (m->A + block - 1) / block;
    int ok = S->shape.rank == r;
    for (int i = 0; ok && i < r; i++)
        ok = S->shape.dim[i] == (i == axis ? nb : X->shape.dim[i]);
    if (!ok)
        return KN_EINVAL(node, "scale %s: want x %s with %lld blocks of %lld at axis %lld",
                         kn__shp(&S->shape), kn__shp(&X->shape), (long long)nb, (long long)block,
                         (long long)axis);
    m->block = block, m->si = 1, m->sa = m->inner, m->so = nb * m->inner;
    return MS_OK;
}

/* Scale (and zero-point) index of element (o, a, i). */
static int64_t q_at(const q_map *m, int64_t o, int64_t a, int64_t i) {
    return o * m->so + (a / m->block) * m->sa + i * m->si;
}

/* Shared checks of OnnxQuantizeLinear / OnnxDequantizeLinear. */
static ms_status q_inputs(const kn_node *node, rt_tensor *const *in, rt_dtype qt, q_map *m,
                          const rt_tensor **zp) {
    int has_zp = (int)kn_attr_i(node, "has_zp", 0);
    ms_status st = kn__need_inputs(node, in, has_zp ? 3 : 2);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *S = in[1];
    if (S->dtype != RT_DT_FLOAT)
        return KN_EINVAL(node, "scale is %s; want float", rt_dtype_name(S->dtype));
    if ((st = q_layout(node, X, S, m)) != MS_OK) return st;
    *zp = has_zp ? in[2] : NULL;
    /* One value each may differ in rank ([1] with a scalar scale, as ONNX's
     * tests give); otherwise the shapes match. */
    int one = *zp != NULL && (*zp)->nelem == 1 && S->nelem == 1 && (*zp)->shape.rank <= 1 &&
              S->shape.rank <= 1;
    if (*zp != NULL &&
        ((*zp)->dtype != qt || (!one && !rt_shape_equal(&(*zp)->shape, &S->shape))))
        return KN_EINVAL(node, "zero_point %s %s: want %s %s like scale",
                         rt_dtype_name((*zp)->dtype), kn__shp(&(*zp)->shape), rt_dtype_name(qt),
                         kn__shp(&S->shape));
    return MS_OK;
}

static ms_status quantize_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                  rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    rt_dtype qt = kn_attr_type(node, "T", RT_DT_UINT8);
    double lo = 0, hi = 0;
    q_map m;
    const rt_tensor *Z;
    int fl = rt_dtype_is_lowp_float(qt) && qt != RT_DT_FLOAT8_E8M0;
    int saturate = (int)kn_attr_i(node, "saturate", 1);
    if (!fl && !qrange(qt, &lo, &hi))
        return KN_EINVAL(node, "output type %s is not a quantisation type", rt_dtype_name(qt));
    ms_status st = q_inputs(node, in, qt, &m, &Z);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    if (X->dtype != RT_DT_FLOAT)
        return KN_EINVAL(node, "x is %s; want float", rt_dtype_name(X->dtype));
    if ((st = kn__output(ctx, node, 0, qt, &X->shape, &out[0])) != MS_OK) return st;
    const float *x = X->data, *s = in[1]->data;
    for (int64_t o = 0, k = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t i = 0; i < m.inner; i++, k++) {
                int64_t j = q_at(&m, o, a, i);
                double z = Z ? qget(Z->data, qt, j) : 0;
                if (fl && z != 0) /* ONNX: float8 / float4 zero points are 0 */
                    return KN_EINVAL(node, "zero_point of %s must be 0", rt_dtype_name(qt));
                if (fl) /* x / scale in float32, then one rounding to qt */
                    ((uint8_t *)out[0]->data)[k] =
                        rt_lowp_from_f64(qt, (double)(x[k] / s[j]), saturate, RT_E8M0_UP);
                else
                    qput(out[0]->data, qt, k, qsat((double)rintf(x[k] / s[j]) + z, lo, hi));
            }
    return MS_OK;
}

static ms_status dequantize_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    double lo, hi;
    q_map m;
    const rt_tensor *Z;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    if (!qrange(X->dtype, &lo, &hi) &&
        !(rt_dtype_is_lowp_float(X->dtype) && X->dtype != RT_DT_FLOAT8_E8M0))
        return KN_EINVAL(node, "x is %s; want a quantisation type",
                         rt_dtype_name(X->dtype));
    if ((st = q_inputs(node, in, X->dtype, &m, &Z)) != MS_OK) return st;
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &X->shape, &out[0])) != MS_OK) return st;
    const float *s = in[1]->data;
    float *y = out[0]->data;
    for (int64_t o = 0, k = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t i = 0; i < m.inner; i++, k++) {
                int64_t j = q_at(&m, o, a, i);
                float z = Z ? (float)qget(Z->data, X->dtype, j) : 0.0f;
                y[k] = ((float)qget(X->data, X->dtype, k) - z) * s[j];
            }
    return MS_OK;
}

/* DynamicQuantizeLinear 11: the range [min(0, min x), max(0, max x)] mapped
 * onto 0..255, all in float32 as ONNX's definition. */
static ms_status dynq_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    if (X->dtype != RT_DT_FLOAT)
        return KN_EINVAL(node, "x is %s; want float", rt_dtype_name(X->dtype));
    if (X->nelem == 0) return KN_EINVAL(node, "x is empty: no range to quantise");
    rt_shape sc = {0};
    if ((st = kn__output(ctx, node, 0, RT_DT_UINT8, &X->shape, &out[0])) != MS_OK ||
        (st = kn__output(ctx, node, 1, RT_DT_FLOAT, &sc, &out[1])) != MS_OK ||
        (st = kn__output(ctx, node, 2, RT_DT_UINT8, &sc, &out[2])) != MS_OK)
        return st;
    const float *x = X->data;
    float mn = 0, mx = 0;
    for (int64_t k = 0; k < X->nelem; k++) {
        if (x[k] < mn) mn = x[k];
        if (x[k] > mx) mx = x[k];
    }
    float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    float zp0 = 0.0f - mn / scale;
    float zp = rintf(zp0 < 0 ? 0 : zp0 > 255 ? 255 : zp0);
    for (int64_t k = 0; k < X->nelem; k++)
        ((uint8_t *)out[0]->data)[k] = (uint8_t)qsat((double)(rintf(x[k] / scale) + zp), 0, 255);
    *(float *)out[1]->data = scale;
    *(uint8_t *)out[2]->data = (uint8_t)zp;
    return MS_OK;
}

/* ---- MatMulInteger / QLinearMatMul ---- */

/* Zero point z of a matrix operand: one value, or n values (a's rows, b's
 * columns); 0 when absent. */
static ms_status mm_zp(const kn_node *node, const rt_tensor *z, rt_dtype dt, int64_t n,
                       const char *what, int *per) {
    *per = 0;
    if (z == NULL) return MS_OK;
    if (z->dtype != dt)
        return KN_EINVAL(node, "%s is %s; want %s", what, rt_dtype_name(z->dtype),
                         rt_dtype_name(dt));
    if (z->nelem == 1) return MS_OK;
    if (z->shape.rank == 1 && z->shape.dim[0] == n) {
        *per = 1;
        return MS_OK;
    }
    return KN_EINVAL(node, "%s %s: want one value or %lld", what, kn__shp(&z->shape),
                     (long long)n);
}

/* acc (int32, [batch, M, N]) = (a - za) @ (b - zb); out shape in *shp. */
static ms_status mm_int(const kn_node *node, const rt_tensor *A, const rt_tensor *B,
                        const rt_tensor *ZA, const rt_tensor *ZB, int32_t **acc, rt_shape *shp) {
    int ra = A->shape.rank, rb = B->shape.rank;
    if ((A->dtype != RT_DT_INT8 && A->dtype != RT_DT_UINT8) ||
        (B->dtype != RT_DT_INT8 && B->dtype != RT_DT_UINT8))
        return KN_EINVAL(node, "a %s, b %s: want int8 or uint8", rt_dtype_name(A->dtype),
                         rt_dtype_name(B->dtype));
    if (ra < 2 || rb < 2 || A->shape.dim[ra - 1] != B->shape.dim[rb - 2] ||
        (rb > 2 && (rb != ra || memcmp(A->shape.dim, B->shape.dim,
                                       (size_t)(ra - 2) * sizeof(int64_t)) != 0)))
        return KN_EINVAL(node, "a %s, b %s: want [..., M, K] and [K, N] or [..., K, N]",
                         kn__shp(&A->shape), kn__shp(&B->shape));
    int64_t M = A->shape.dim[ra - 2], K = A->shape.dim[ra - 1], N = B->shape.dim[rb - 1];
    int pa, pb;
    ms_status st = mm_zp(node, ZA, A->dtype, M, "a_zero_point", &pa);
    if (st == MS_OK) st = mm_zp(node, ZB, B->dtype, N, "b_zero_point", &pb);
    if (st != MS_OK) return st;
    *shp = A->shape;
    shp->dim[ra - 1] = N;
    int64_t n = rt_shape_nelem(shp), batch = M != 0 && N != 0 ? n / (M * N) : 0;
    *acc = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    if (*acc == NULL) return kn__errf(MS_ENOMEM, node, "no memory for %lld sums", (long long)n);
    for (int64_t bt = 0; bt < batch; bt++) {
        int64_t ob = rb > 2 ? bt * K * N : 0;
        for (int64_t i = 0; i < M; i++) {
            int32_t za = ZA ? (int32_t)qget(ZA->data, A->dtype, pa ? i : 0) : 0;
            int32_t *row = *acc + (bt * M + i) * N;
            for (int64_t k = 0; k < K; k++) {
                int32_t av = (int32_t)qget(A->data, A->dtype, (bt * M + i) * K + k) - za;
                for (int64_t j = 0; j < N; j++) {
                    int32_t zb = ZB ? (int32_t)qget(ZB->data, B->dtype, pb ? j : 0) : 0;
                    row[j] += av * ((int32_t)qget(B->data, B->dtype, ob + k * N + j) - zb);
                }
            }
        }
    }
    return MS_OK;
}

static ms_status mmint_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    /* attrs has_za / has_zb: which zero points follow a and b, in order */
    int ha = (int)kn_attr_i(node, "has_za", 0), hb = (int)kn_attr_i(node, "has_zb", 0);
    if ((st = kn__need_inputs(node, in, 2 + ha + hb)) != MS_OK) return st;
    const rt_tensor *za = ha ? in[2] : NULL, *zb = hb ? in[2 + ha] : NULL;
    int32_t *acc = NULL;
    rt_shape shp;
    if ((st = mm_int(node, in[0], in[1], za, zb, &acc, &shp)) != MS_OK) goto done;
    if ((st = kn__output(ctx, node, 0, RT_DT_INT32, &shp, &out[0])) != MS_OK) goto done;
    memcpy(out[0]->data, acc, (size_t)out[0]->nelem * sizeof(int32_t));
done:
    free(acc);
    return st;
}

/* One float value of a scale input (a single value). */
static ms_status one_f(const kn_node *node, const rt_tensor *t, const char *what, float *v) {
    if (t->dtype != RT_DT_FLOAT || t->nelem != 1)
        return KN_EINVAL(node, "%s %s %s: want one float", what, rt_dtype_name(t->dtype),
                         kn__shp(&t->shape));
    *v = *(const float *)t->data;
    return MS_OK;
}

/* Checks y's zero point (one int8 or uint8) and gives its type's range. */
static ms_status y_zp(const kn_node *node, const rt_tensor *YZ, double *lo, double *hi) {
    if (!qrange(YZ->dtype, lo, hi) || YZ->nelem != 1 ||
        (YZ->dtype != RT_DT_INT8 && YZ->dtype != RT_DT_UINT8))
        return KN_EINVAL(node, "y_zero_point %s %s: want one int8 or uint8",
                         rt_dtype_name(YZ->dtype), kn__shp(&YZ->shape));
    return MS_OK;
}

static ms_status qlmm_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 8);
    if (st != MS_OK) return st;
    float as, bs, ys;
    double lo, hi;
    int32_t *acc = NULL;
    rt_shape shp;
    const rt_tensor *YZ = in[7];
    if ((st = one_f(node, in[1], "a_scale", &as)) != MS_OK ||
        (st = one_f(node, in[4], "b_scale", &bs)) != MS_OK ||
        (st = one_f(node, in[6], "y_scale", &ys)) != MS_OK)
        return st;
    if ((st = y_zp(node, YZ, &lo, &hi)) != MS_OK) return st;
    if ((st = mm_int(node, in[0], in[3], in[2], in[5], &acc, &shp)) != MS_OK) goto done;
    if ((st = kn__output(ctx, node, 0, YZ->dtype, &shp, &out[0])) != MS_OK) goto done;
    double f = (double)(float)((as * bs) / ys), z = qget(YZ->data, YZ->dtype, 0);
    for (int64_t k = 0; k < out[0]->nelem; k++)
        qput(out[0]->data, YZ->dtype, k, qsat(rint((double)acc[k] * f) + z, lo, hi));
done:
    free(acc);
    return st;
}


/* ---- ConvInteger / QLinearConv (2-D) ---- */

/* acc (int32, [N, M, OH, OW]) = conv(x - zx, w - zw) with attrs pads (t, l,
 * b, r), strides, dilations, group; zw one value or one per output channel. */
static ms_status conv_int(const kn_node *node, const rt_tensor *X, const rt_tensor *W,
                          const rt_tensor *ZX, const rt_tensor *ZW, int32_t **acc, rt_shape *shp) {
    int64_t p[4] = {0, 0, 0, 0}, st[2] = {1, 1}, dl[2] = {1, 1};
    int64_t g = kn_attr_i(node, "group", 1);
    kn_attr_ilist(node, "pads", p, 4);
    kn_attr_ilist(node, "strides", st, 2);
    kn_attr_ilist(node, "dilations", dl, 2);
    if ((X->dtype != RT_DT_INT8 && X->dtype != RT_DT_UINT8) ||
        (W->dtype != RT_DT_INT8 && W->dtype != RT_DT_UINT8))
        return KN_EINVAL(node, "x %s, w %s: want int8 or uint8", rt_dtype_name(X->dtype),
                         rt_dtype_name(W->dtype));
    if (X->shape.rank != 4 || W->shape.rank != 4 || g < 1 || st[0] < 1 || st[1] < 1 ||
        dl[0] < 1 || dl[1] < 1 || p[0] < 0 || p[1] < 0 || p[2] < 0 || p[3] < 0)
        return KN_EINVAL(node, "x %s, w %s: want rank 4, positive strides and dilations",
                         kn__shp(&X->shape), kn__shp(&W->shape));
    int64_t N = X->shape.dim[0], C = X->shape.dim[1], H = X->shape.dim[2], Wd = X->shape.dim[3];
    int64_t M = W->shape.dim[0], CG = W->shape.dim[1], KH = W->shape.dim[2], KW = W->shape.dim[3];
    if (C != CG * g || M % g != 0)
        return KN_EINVAL(node, "x %s, w %s, group %lld: channels do not fit", kn__shp(&X->shape),
                         kn__shp(&W->shape), (long long)g);
    int64_t OH = (H + p[0] + p[2] - dl[0] * (KH - 1) - 1) / st[0] + 1;
    int64_t OW = (Wd + p[1] + p[3] - dl[1] * (KW - 1) - 1) / st[1] + 1;
    if (OH < 0) OH = 0;
    if (OW < 0) OW = 0;
    int pz;
    if (ZX != NULL && (ZX->dtype != X->dtype || ZX->nelem != 1))
        return KN_EINVAL(node, "x_zero_point: want one %s", rt_dtype_name(X->dtype));
    ms_status s = mm_zp(node, ZW, W->dtype, M, "w_zero_point", &pz);
    if (s != MS_OK) return s;
    *shp = (rt_shape){.rank = 4, .dim = {N, M, OH, OW}};
    int64_t n = N * M * OH * OW;
    *acc = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    if (*acc == NULL) return kn__errf(MS_ENOMEM, node, "no memory for %lld sums", (long long)n);
    int32_t zx = ZX ? (int32_t)qget(ZX->data, X->dtype, 0) : 0;
    int64_t mg = M / g;
    for (int64_t b = 0; b < N; b++)
        for (int64_t m = 0; m < M; m++) {
            int32_t zw = ZW ? (int32_t)qget(ZW->data, W->dtype, pz ? m : 0) : 0;
            int64_t c0 = (m / mg) * CG;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int32_t sum = 0;
                    for (int64_t c = 0; c < CG; c++)
                        for (int64_t kh = 0; kh < KH; kh++) {
                            int64_t ih = oh * st[0] - p[0] + kh * dl[0];
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t iw = ow * st[1] - p[1] + kw * dl[1];
                                if (iw < 0 || iw >= Wd) continue;
                                int32_t xv = (int32_t)qget(X->data, X->dtype,
                                                           ((b * C + c0 + c) * H + ih) * Wd + iw);
                                int32_t wv = (int32_t)qget(W->data, W->dtype,
                                                           ((m * CG + c) * KH + kh) * KW + kw);
                                sum += (xv - zx) * (wv - zw);
                            }
                        }
                    (*acc)[((b * M + m) * OH + oh) * OW + ow] = sum;
                }
        }
    return MS_OK;
}

static ms_status convint_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int ha = (int)kn_attr_i(node, "has_za", 0), hb = (int)kn_attr_i(node, "has_zb", 0);
    ms_status st = kn__need_inputs(node, in, 2 + ha + hb);
    if (st != MS_OK) return st;
    int32_t *acc = NULL;
    rt_shape shp;
    if ((st = conv_int(node, in[0], in[1], ha ? in[2] : NULL, hb ? in[2 + ha] : NULL, &acc,
                       &shp)) != MS_OK)
        goto done;
    if ((st = kn__output(ctx, node, 0, RT_DT_INT32, &shp, &out[0])) != MS_OK) goto done;
    memcpy(out[0]->data, acc, (size_t)out[0]->nelem * sizeof(int32_t));
done:
    free(acc);
    return st;
}

/* QLinearConv 10: x, x_scale, x_zp, w, w_scale (one or per output
 * channel), w_zp, y_scale, y_zp, [B int32] (attr has_b). */
static ms_status qlconv_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int hb = (int)kn_attr_i(node, "has_b", 0);
    ms_status st = kn__need_inputs(node, in, 8 + hb);
    if (st != MS_OK) return st;
    float xs, ys;
    double lo, hi;
    int32_t *acc = NULL;
    rt_shape shp;
    const rt_tensor *WS = in[4], *YZ = in[7], *B = hb ? in[8] : NULL;
    if ((st = one_f(node, in[1], "x_scale", &xs)) != MS_OK ||
        (st = one_f(node, in[6], "y_scale", &ys)) != MS_OK)
        return st;
    if ((st = y_zp(node, YZ, &lo, &hi)) != MS_OK) return st;
    if ((st = conv_int(node, in[0], in[3], in[2], in[5], &acc, &shp)) != MS_OK) goto done;
    int64_t M = shp.dim[1], hw = shp.dim[2] * shp.dim[3];
    if (WS->dtype != RT_DT_FLOAT || (WS->nelem != 1 && WS->nelem != M) ||
        (B != NULL && (B->dtype != RT_DT_INT32 || B->nelem != M))) {
        st = KN_EINVAL(node, "w_scale %s, B: want float w_scale and int32 B of one per output "
                       "channel (%lld)", kn__shp(&WS->shape), (long long)M);
        goto done;
    }
    if ((st = kn__output(ctx, node, 0, YZ->dtype, &shp, &out[0])) != MS_OK) goto done;
    const float *ws = WS->data;
    double z = qget(YZ->data, YZ->dtype, 0);
    for (int64_t k = 0; k < out[0]->nelem; k++) {
        int64_t m = (k / hw) % M;
        double f = (double)(float)((xs * ws[WS->nelem == 1 ? 0 : m]) / ys);
        int32_t a = acc[k] + (B ? ((const int32_t *)B->data)[m] : 0);
        qput(out[0]->data, YZ->dtype, k, qsat(rint((double)a * f) + z, lo, hi));
    }
done:
    free(acc);
    return st;
}

const kn_kernel kn_cpu_quant_kernels[] = {
    {.op = "OnnxQuantizeLinear", .compute = quantize_compute},
    {.op = "OnnxDequantizeLinear", .compute = dequantize_compute},
    {.op = "OnnxDynamicQuantizeLinear", .compute = dynq_compute},
    {.op = "OnnxMatMulInteger", .compute = mmint_compute},
    {.op = "OnnxQLinearMatMul", .compute = qlmm_compute},
    {.op = "OnnxConvInteger", .compute = convint_compute},
    {.op = "OnnxQLinearConv", .compute = qlconv_compute},
    {.op = NULL},
};
