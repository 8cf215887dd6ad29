/* kn_cpu_onnx.c - ops of our own for ONNX operators no TF op means exactly
 * (emitted by runtime/onnx; a SavedModel holding them runs in dcmserve
 * only, docs/onnx.md):
 *
 *   OnnxGridSample     X (N, C, [D,] H, W), grid (N, [Do,] Ho, Wo, 2|3) ->
 *                      (N, C, [Do,] Ho, Wo). attrs: mode (0 nearest, 1 linear,
 *                      2 cubic - 4-D only), padding (0 zeros, 1 border,
 *                      2 reflection), align_corners. ONNX GridSample 16-22:
 *                      grid values in [-1, 1] map to the corner pixels'
 *                      centres (align_corners) or edges; nearest rounds half to
 *                      even; cubic is Keys' with a = -0.75; border clamps,
 *                      reflection mirrors at the edges (or centres).
 *   OnnxScatterND      data, indices (int64, last dim k), updates ->
 *                      data with the slices data[idx] set (or combined) from
 *                      updates. attr reduction (0 none, 1 add, 2 mul, 3 max,
 *                      4 min).
 *   OnnxScatterElements data, indices (int64, same rank), updates (indices'
 *                      shape) -> data with data[.., idx, ..] (on axis) set /
 *                      combined. attrs axis, reduction as above.
 *   OnnxGatherElements data, indices (int32 / int64, same rank, each dim but
 *                      axis's at most data's) -> data[.., idx, ..] (on axis),
 *                      the indices' shape. attr axis.
 *   OnnxLpPool         X (N, C, 1-3 spatial dims) -> (sum of |x|^p over each
 *                      window)^(1/p); attrs ksize, strides, dilations, pads
 *                      (explicit; zeros outside), p.
 *   OnnxPool           X as OnnxLpPool -> the max (mode 1) or mean (mode 2) of
 *                      each dilated window (ONNX MaxPool / AveragePool with
 *                      dilations); attrs as OnnxLpPool less p, plus ceil_mode
 *                      (a last window starting in the end padding is dropped)
 *                      and count_include_pad (the mean divides by the taps
 *                      inside the padded extent instead of inside X).
 *   OnnxNonMaxSuppression boxes, scores, max per class, iou and score
 *                      thresholds -> (K, 3) int64 (batch, class, box); greedy
 *                      by score (ties: lower index), IoU > threshold suppresses.
 *   (OnnxDFT: kn_cpu_fft.c, over KissFFT.)
 *   OnnxCausalConvWithState input, weight, bias, past state -> output and
 *                      present state (ONNX CausalConvWithState 27, depthwise).
 *   OnnxUnique         X -> Y, indices, inverse indices, counts (ONNX Unique).
 *   OnnxDet            (..., M, M) -> determinants; OnnxReverseSequence.
 *
 * Negative indices count from the end; an index out of range fails the run
 * (INVALID_ARGUMENT), as duplicate-free updates are applied in order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* ---- GridSample ---- */

#define GS_COORD_MAX 1e12f /* keeps coordinates inside int64 after floor */

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECT };

static float gs_denorm(float g, int64_t len, int align) {
    return align ? (g + 1) / 2.0f * (float)(len - 1) : ((g + 1) * (float)len - 1) / 2.0f;
}

/* Mirrors x at lo and hi until it lies between them. */
static float gs_reflect(float x, float lo, float hi) {
    float range = hi - lo;
    if (!(range > 0)) return lo;
    if (x < lo) {
        float dx = lo - x;
        int64_t n = (int64_t)(dx / range);
        float r = dx - (float)n * range;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        float dx = x - hi;
        int64_t n = (int64_t)(dx / range);
        float r = dx - (float)n * range;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct {
    int nd;              /* spatial dims: 2 or 3 */
    const int64_t *size; /* their sizes, outermost first */
    float lo[3], hi[3];  /* the reflection borders */
    int pad;
} gs_geom;

/* The pixel at integer coordinates c (outermost first) of one channel. */
static float gs_pixel(const gs_geom *g, const float *img, const int64_t *c) {
    int64_t off = 0;
    for (int k = 0; k < g->nd; k++) {
        int64_t i = c[k], s = g->size[k];
        if (g->pad == GS_ZEROS) {
            if (i < 0 || i >= s) return 0.0f;
        } else if (g->pad == GS_BORDER) {
            i = i < 0 ? 0 : i >= s ? s - 1 : i;
        } else {
            i = (int64_t)gs_reflect((float)i, g->lo[k], g->hi[k]);
            i = i < 0 ? 0 : i >= s ? s - 1 : i;
        }
        off = off * s + i;
    }
    return img[off];
}

static void gs_cubic_coeffs(float x, float *c) {
    const float a = -0.75f;
    x = fabsf(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

/* One output value at continuous coordinates x (outermost first). */
static float gs_sample(const gs_geom *g, const float *img, const float *x, int mode) {
    int nd = g->nd;
    int64_t c[3];
    if (mode == GS_NEAREST) {
        for (int k = 0; k < nd; k++)
            c[k] = (int64_t)x[k];
        return gs_pixel(g, img, c);
    }
    if (mode == GS_LINEAR) {
        int64_t base[3];
        float frac[3];
        for (int k = 0; k < nd; k++) {
            float f = floorf(x[k]);
            base[k] = (int64_t)f;
            frac[k] = x[k] - f;
        }
        float acc = 0;
        for (int corner = 0; corner < (1 << nd); corner++) {
            float w = 1;
            for (int k = 0; k < nd; k++) {
                int up = (corner >> (nd - 1 - k)) & 1;
                c[k] = base[k] + up;
                w *= up ? frac[k] : 1 - frac[k];
            }
            acc += w * gs_pixel(g, img, c);
        }
        return acc;
    }
    /* cubic, 2-D: 4 x 4 neighbours from (floor - 1). */
    int64_t y0 = (int64_t)floorf(x[0]) - 1, x0 = (int64_t)floorf(x[1]) - 1;
    float cx[4], cy[4], v[4];
    gs_cubic_coeffs(x[1] - (float)x0 - 1, cx);
    gs_cubic_coeffs(x[0] - (float)y0 - 1, cy);
    for (int i = 0; i < 4; i++) {
        v[i] = 0;
        for (int j = 0; j < 4; j++) {
            c[0] = y0 + i, c[1] = x0 + j;
            v[i] += cx[j] * gs_pixel(g, img, c);
        }
    }
    return cy[0] * v[0] + cy[1] * v[1] + cy[2] * v[2] + cy[3] * v[3];
}

static ms_status grid_sample_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *G = in[1];
    int mode = (int)kn_attr_i(node, "mode", GS_LINEAR), pad = (int)kn_attr_i(node, "padding", 0);
    int align = kn_attr_i(node, "align_corners", 0) != 0;
    if (X->dtype != RT_DT_FLOAT || G->dtype != RT_DT_FLOAT)
        return KN_EINVAL(node, "X and grid must be float, got %s and %s", rt_dtype_name(X->dtype),
                         rt_dtype_name(G->dtype));
    int r = X->shape.rank, nd = r - 2;
    if ((r != 4 && r != 5) || G->shape.rank != r || G->shape.dim[0] != X->shape.dim[0] ||
        G->shape.dim[r - 1] != nd)
        return KN_EINVAL(node, "X %s and grid %s: want (N, C, spatial...) and (N, out..., %d)",
                         kn__shp(&X->shape), kn__shp(&G->shape), nd);
    if (mode < GS_NEAREST || mode > GS_CUBIC || pad < GS_ZEROS || pad > GS_REFLECT ||
        (mode == GS_CUBIC && nd != 2))
        return KN_EINVAL(node, "mode %d / padding %d is not supported for %d-D", mode, pad, nd);
    rt_shape os = {.rank = r};
    os.dim[0] = X->shape.dim[0];
    os.dim[1] = X->shape.dim[1];
    for (int k = 0; k < nd; k++)
        os.dim[2 + k] = G->shape.dim[1 + k];
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    gs_geom g = {.nd = nd, .size = X->shape.dim + 2, .pad = pad};
    int64_t plane = 1, opl = 1;
    for (int k = 0; k < nd; k++) {
        plane *= g.size[k];
        opl *= os.dim[2 + k];
        g.lo[k] = align ? 0.0f : -0.5f;
        g.hi[k] = align ? (float)g.size[k] - 1 : (float)g.size[k] - 0.5f;
    }
    if (plane == 0) {
        /* Nothing to sample from: zeros padding reads 0, the others have no
         * pixel to repeat. */
        if (pad != GS_ZEROS) return KN_EINVAL(node, "an empty input has no border to repeat");
        memset(out[0]->data, 0, (size_t)out[0]->nelem * sizeof(float));
        return MS_OK;
    }
    int64_t N = os.dim[0], C = os.dim[1];
    const float *xd = X->data, *gd = G->data;
    float *yd = out[0]->data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < opl; p++) {
            const float *gp = gd + (b * opl + p) * nd;
            float x[3];
            int nan = 0, oob = 0;
            for (int k = 0; k < nd; k++) {
                /* grid holds (x, y[, z]): innermost dim first */
                float v = gs_denorm(gp[nd - 1 - k], g.size[k], align);
                if (isnan(v)) nan = 1;
                v = v < -GS_COORD_MAX ? -GS_COORD_MAX : v > GS_COORD_MAX ? GS_COORD_MAX : v;
                if (mode == GS_NEAREST) v = nearbyintf(v);
                if (v < g.lo[k] || v > g.hi[k]) oob = 1;
                x[k] = v;
            }
            if (oob && pad == GS_BORDER)
                for (int k = 0; k < nd; k++)
                    x[k] = x[k] < 0                        ? 0
                           : x[k] > (float)(g.size[k] - 1) ? (float)(g.size[k] - 1)
                                                           : x[k];
            else if (oob && pad == GS_REFLECT)
                for (int k = 0; k < nd; k++)
                    x[k] = gs_reflect(x[k], g.lo[k], g.hi[k]);
            for (int64_t c = 0; c < C; c++)
                yd[(b * C + c) * opl + p] =
                    nan ? NAN : gs_sample(&g, xd + (b * C + c) * plane, x, mode);
        }
    return MS_OK;
}

/* ---- ScatterND / ScatterElements ---- */

enum { SC_NONE, SC_ADD, SC_MUL, SC_MAX, SC_MIN };

#define SC_COMBINE(T)                                                                              \
    static void sc_##T(T *d, const T *u, int64_t n, int red) {                                     \
        for (int64_t i = 0; i < n; i++)                                                            \
            switch (red) {                                                                         \
            case SC_ADD:                                                                           \
                d[i] += u[i];                                                                      \
                break;                                                                             \
            case SC_MUL:                                                                           \
                d[i] *= u[i];                                                                      \
                break;                                                                             \
            case SC_MAX:                                                                           \
                d[i] = d[i] > u[i] ? d[i] : u[i];                                                  \
                break;                                                                             \
            case SC_MIN:                                                                           \
                d[i] = d[i] < u[i] ? d[i] : u[i];                                                  \
                break;                                                                             \
            default:                                                                               \
                d[i] = u[i];                                                                       \
            }                                                                                      \
    }
SC_COMBINE(float)
SC_COMBINE(int32_t)
SC_COMBINE(int64_t)

/* d[0..n) = combine(d, u) in type dt (reduction none: plain copy, any type). */
static void sc_apply(rt_dtype dt, size_t es, void *d, const void *u, int64_t n, int red) {
    if (red == SC_NONE)
        memcpy(d, u, (size_t)n * es);
    else if (dt == RT_DT_FLOAT)
        sc_float(d, u, n, red);
    else if (dt == RT_DT_INT32)
        sc_int32_t(d, u, n, red);
    else
        sc_int64_t(d, u, n, red);
}

/* Common checks; copies data into the output. */
static ms_status sc_begin(kn_ctx *ctx, const kn_node *node, rt_tensor *const *in, rt_tensor **out,
                          int *red) {
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *D = in[0], *I = in[1], *U = in[2];
    *red = (int)kn_attr_i(node, "reduction", SC_NONE);
    if (*red < SC_NONE || *red > SC_MIN) return KN_EINVAL(node, "reduction %d unknown", *red);
    if (!rt_dtype_is_pod(D->dtype) || U->dtype != D->dtype)
        return KN_EINVAL(node, "data (%s) and updates (%s) must be one plain type",
                         rt_dtype_name(D->dtype), rt_dtype_name(U->dtype));
    if (*red != SC_NONE && D->dtype != RT_DT_FLOAT && D->dtype != RT_DT_INT32 &&
        D->dtype != RT_DT_INT64)
        return KN_EINVAL(node, "reductions need float, int32 or int64 data, got %s",
                         rt_dtype_name(D->dtype));
    if (I->dtype != RT_DT_INT64)
        return KN_EINVAL(node, "indices must be int64, got %s", rt_dtype_name(I->dtype));
    if ((st = kn__output(ctx, node, 0, D->dtype, &D->shape, out)) != MS_OK) return st;
    if (D->nelem > 0) memcpy((*out)->data, D->data, (size_t)D->nelem * rt_dtype_size(D->dtype));
    return MS_OK;
}

static ms_status scatter_nd_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int red;
    ms_status st = sc_begin(ctx, node, in, out, &red);
    if (st != MS_OK) return st;
    const rt_tensor *D = in[0], *I = in[1], *U = in[2];
    int r = D->shape.rank, q = I->shape.rank;
    int64_t k = q >= 1 ? I->shape.dim[q - 1] : -1;
    if (q < 1 || k < 0 || k > r || U->shape.rank != q - 1 + r - (int)k)
        return KN_EINVAL(node, "indices %s do not fit data %s", kn__shp(&I->shape),
                         kn__shp(&D->shape));
    for (int i = 0; i < q - 1; i++)
        if (U->shape.dim[i] != I->shape.dim[i])
            return KN_EINVAL(node, "updates %s do not match indices %s", kn__shp(&U->shape),
                             kn__shp(&I->shape));
    int64_t slice = 1;
    for (int i = (int)k; i < r; i++) {
        if (U->shape.dim[q - 1 + i - (int)k] != D->shape.dim[i])
            return KN_EINVAL(node, "updates %s do not match data %s", kn__shp(&U->shape),
                             kn__shp(&D->shape));
        slice *= D->shape.dim[i];
    }
    int64_t nidx = 1;
    for (int i = 0; i < q - 1; i++)
        nidx *= I->shape.dim[i];
    size_t es = rt_dtype_size(D->dtype);
    const int64_t *ix = I->data;
    for (int64_t j = 0; j < nidx; j++) {
        int64_t off = 0;
        for (int64_t m = 0; m < k; m++) {
            int64_t v = ix[j * k + m], s = D->shape.dim[m];
            if (v < 0) v += s;
            if (v < 0 || v >= s)
                return KN_EINVAL(node, "index %lld is out of range for dim %lld of size %lld",
                                 (long long)ix[j * k + m], (long long)m, (long long)s);
            off = off * s + v;
        }
        sc_apply(D->dtype, es, (char *)(*out)->data + (size_t)(off * slice) * es,
                 (const char *)U->data + (size_t)(j * slice) * es, slice, red);
    }
    return MS_OK;
}

static ms_status scatter_elements_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                          rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    int red;
    ms_status st = sc_begin(ctx, node, in, out, &red);
    if (st != MS_OK) return st;
    const rt_tensor *D = in[0], *I = in[1], *U = in[2];
    int r = D->shape.rank, axis = kn__axis(kn_attr_i(node, "axis", 0), r);
    if (r < 1 || axis < 0 || I->shape.rank != r || U->shape.rank != r)
        return KN_EINVAL(node, "data %s, indices %s, updates %s: ranks must match",
                         kn__shp(&D->shape), kn__shp(&I->shape), kn__shp(&U->shape));
    for (int i = 0; i < r; i++)
        if (U->shape.dim[i] != I->shape.dim[i] || (i != axis && I->shape.dim[i] > D->shape.dim[i]))
            return KN_EINVAL(node, "indices %s do not fit data %s / updates %s", kn__shp(&I->shape),
                             kn__shp(&D->shape), kn__shp(&U->shape));
    size_t es = rt_dtype_size(D->dtype);
    const int64_t *ix = I->data;
    int64_t pos[RT_MAX_RANK] = {0};
    for (int64_t e = 0; e < I->nelem; e++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) {
            int64_t v = pos[i], s = D->shape.dim[i];
            if (i == axis) {
                v = ix[e];
                if (v < 0) v += s;
                if (v < 0 || v >= s)
                    return KN_EINVAL(node, "index %lld is out of range for axis size %lld",
                                     (long long)ix[e], (long long)s);
            }
            off = off * s + v;
        }
        sc_apply(D->dtype, es, (char *)(*out)->data + (size_t)off * es,
                 (const char *)U->data + (size_t)e * es, 1, red);
        for (int i = r - 1; i >= 0; i--) {
            if (++pos[i] < I->shape.dim[i]) break;
            pos[i] = 0;
        }
    }
    return MS_OK;
}

/* OnnxGatherElements: out[pos] = data[pos with idx[pos] on axis]; out has
 * the indices' shape (known at run time only). */
static ms_status gather_elements_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                         rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *D = in[0], *I = in[1];
    int r = D->shape.rank, axis = kn__axis(kn_attr_i(node, "axis", 0), r);
    if (!rt_dtype_is_pod(D->dtype))
        return KN_EINVAL(node, "data of %s is not supported", rt_dtype_name(D->dtype));
    if (I->dtype != RT_DT_INT64 && I->dtype != RT_DT_INT32)
        return KN_EINVAL(node, "indices must be int32 or int64, got %s", rt_dtype_name(I->dtype));
    if (r < 1 || axis < 0 || I->shape.rank != r)
        return KN_EINVAL(node, "data %s, indices %s: ranks must match, axis in range",
                         kn__shp(&D->shape), kn__shp(&I->shape));
    for (int i = 0; i < r; i++)
        if (i != axis && I->shape.dim[i] > D->shape.dim[i])
            return KN_EINVAL(node, "indices %s do not fit data %s", kn__shp(&I->shape),
                             kn__shp(&D->shape));
    if ((st = kn__output(ctx, node, 0, D->dtype, &I->shape, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(D->dtype);
    int64_t pos[RT_MAX_RANK] = {0};
    for (int64_t e = 0; e < I->nelem; e++) {
        int64_t off = 0;
        for (int i = 0; i < r; i++) {
            int64_t v = pos[i], s = D->shape.dim[i];
            if (i == axis) {
                int64_t ix = I->dtype == RT_DT_INT64 ? ((const int64_t *)I->data)[e]
                                                     : ((const int32_t *)I->data)[e];
                v = ix < 0 ? ix + s : ix;
                if (v < 0 || v >= s)
                    return KN_EINVAL(node, "index %lld is out of range for axis size %lld",
                                     (long long)ix, (long long)s);
            }
            off = off * s + v;
        }
        memcpy((char *)out[0]->data + (size_t)e * es, (const char *)D->data + (size_t)off * es,
               es);
        for (int i = r - 1; i >= 0; i--) {
            if (++pos[i] < I->shape.dim[i]) break;
            pos[i] = 0;
        }
    }
    return MS_OK;
}

/* ---- LpPool, dilated MaxPool / AveragePool ---- */

/* Output length of a window of extent ext, stride s over n (pads included)
 * whose input proper starts at lo and has length in; ceil_mode rounds up but
 * drops a last window starting in the end padding. -1 if it does not fit. */
static int64_t pool_len(int64_t in, int64_t lo, int64_t n, int64_t ext, int64_t s, int ceil_mode) {
    if (ext > n) return -1;
    if (!ceil_mode) return (n - ext) / s + 1;
    int64_t o = (n - ext + s - 1) / s + 1;
    if ((o - 1) * s >= in + lo) o--;
    return o;
}

/* OnnxLpPool: (sum over each window of |x|^p)^(1/p), N-D (1 to 3 spatial
 * dims), the padding contributing zeros. attrs ksize, strides, dilations
 * (one per spatial dim), pads (begins then ends), p (>= 1). OnnxPool: the
 * max or mean of the taps inside X (mode 1, 2), ceil_mode,
 * count_include_pad. */
static ms_status lp_pool_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    int r = X->shape.rank, nd = r - 2;
    int64_t k[3], s[3], d[3], pads[6], p = kn_attr_i(node, "p", 2);
    int is_pool = strcmp(node->op, "OnnxPool") == 0;
    int mode = is_pool ? (int)kn_attr_i(node, "mode", 1) : 0;
    int ceil_mode = mode != 0 && kn_attr_i(node, "ceil_mode", 0) != 0;
    int cip = kn_attr_i(node, "count_include_pad", 0) != 0;
    if (X->dtype != RT_DT_FLOAT) return KN_EINVAL(node, "X must be float");
    if (nd < 1 || nd > 3 || kn_attr_ilist(node, "ksize", k, 3) != nd ||
        kn_attr_ilist(node, "strides", s, 3) != nd ||
        kn_attr_ilist(node, "dilations", d, 3) != nd ||
        kn_attr_ilist(node, "pads", pads, 6) != 2 * nd || p < 1 || (is_pool && mode != 1 && mode != 2))
        return KN_EINVAL(node,
                         "X %s: want (N, C, 1 to 3 spatial dims) and one ksize, stride, "
                         "dilation and two pads per spatial dim, p >= 1, mode 1 or 2",
                         kn__shp(&X->shape));
    rt_shape os = {.rank = r};
    os.dim[0] = X->shape.dim[0];
    os.dim[1] = X->shape.dim[1];
    int64_t plane = 1, opl = 1;
    for (int i = 0; i < nd; i++) {
        int64_t ext = (k[i] - 1) * d[i] + 1, n = X->shape.dim[2 + i] + pads[i] + pads[nd + i];
        int64_t o = k[i] < 1 || s[i] < 1 || d[i] < 1 || pads[i] < 0 || pads[nd + i] < 0
                        ? -1
                        : pool_len(X->shape.dim[2 + i], pads[i], n, ext, s[i], ceil_mode);
        if (o < 1)
            return KN_EINVAL(node, "window %lld (dilation %lld, stride %lld) does not fit %lld",
                             (long long)k[i], (long long)d[i], (long long)s[i], (long long)n);
        os.dim[2 + i] = o;
        plane *= X->shape.dim[2 + i];
        opl *= os.dim[2 + i];
    }
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    int64_t *ix = NULL, order = kn_attr_i(node, "storage_order", 0);
    if (mode == 1 && node->nout > 1) {
        if ((st = kn__output(ctx, node, 1, RT_DT_INT64, &os, &out[1])) != MS_OK) return st;
        ix = out[1]->data;
    }
    if (out[0]->nelem == 0) return MS_OK;
    const int64_t *in_d = X->shape.dim + 2, *out_d = os.dim + 2;
    int64_t kn = 1;
    for (int i = 0; i < nd; i++)
        kn *= k[i];
    const float *xd = X->data;
    float *yd = out[0]->data;
    for (int64_t pl = 0; pl < os.dim[0] * os.dim[1]; pl++) {
        const float *src = xd + pl * plane;
        for (int64_t o = 0; o < opl; o++) {
            int64_t oc[3], rem = o, taps = 0, padded = 0;
            for (int i = nd - 1; i >= 0; i--) {
                oc[i] = rem % out_d[i];
                rem /= out_d[i];
            }
            double acc = mode == 1 ? -INFINITY : 0;
            int64_t best = -1; /* offset of the maximum in the plane */
            for (int64_t w = 0; w < kn; w++) {
                int64_t off = 0, wr = w;
                int inside = 1, in_pad = 1;
                for (int i = nd - 1; i >= 0; i--) {
                    int64_t kc = wr % k[i];
                    wr /= k[i];
                    int64_t c = oc[i] * s[i] - pads[i] + kc * d[i];
                    if (c < 0 || c >= in_d[i]) inside = 0;
                    if (c < -pads[i] || c >= in_d[i] + pads[nd + i]) in_pad = 0;
                }
                padded += in_pad;
                if (!inside) continue;
                taps++;
                wr = w;
                int64_t mul = 1;
                for (int i = nd - 1; i >= 0; i--) {
                    int64_t kc = wr % k[i];
                    wr /= k[i];
                    off += (oc[i] * s[i] - pads[i] + kc * d[i]) * mul;
                    mul *= in_d[i];
                }
                double v = (double)src[off];
                if (mode == 1) {
                    if (best < 0 || v > acc || v != v) acc = v, best = off;
                } else if (mode == 2) {
                    acc += v;
                } else {
                    v = fabs(v);
                    acc += p == 1 ? v : p == 2 ? v * v : pow(v, (double)p);
                }
            }
            if (mode != 0 && taps == 0)
                return KN_EINVAL(node, "a window holds no element of X (pads too large)");
            if (ix != NULL) { /* flat index in X; storage_order 1: spatial dims column-major */
                int64_t at = best;
                if (order == 1) {
                    int64_t c[3], rm = best, mul = 1;
                    for (int i = nd - 1; i >= 0; i--)
                        c[i] = rm % in_d[i], rm /= in_d[i];
                    at = 0;
                    for (int i = 0; i < nd; i++)
                        at += c[i] * mul, mul *= in_d[i];
                }
                ix[pl * opl + o] = pl * plane + at;
            }
            yd[pl * opl + o] = (float)(mode == 1   ? acc
                                       : mode == 2 ? acc / (double)(cip ? padded : taps)
                                       : p == 1    ? acc
                                       : p == 2    ? sqrt(acc)
                                                   : pow(acc, 1.0 / (double)p));
        }
    }
    return MS_OK;
}

/* ---- NonMaxSuppression ---- */

typedef struct {
    float score;
    int64_t index;
} nms_cand;

/* Higher score first; equal scores by the lower box index. */
static int nms_cmp(const void *a, const void *b) {
    const nms_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Box i as (x min, y min, x max, y max). */
static void nms_box(const float *b, int center, float *o) {
    if (center) {
        o[0] = b[0] - b[2] / 2, o[2] = b[0] + b[2] / 2;
        o[1] = b[1] - b[3] / 2, o[3] = b[1] + b[3] / 2;
    } else {
        o[0] = fminf(b[1], b[3]), o[2] = fmaxf(b[1], b[3]);
        o[1] = fminf(b[0], b[2]), o[3] = fmaxf(b[0], b[2]);
    }
}

/* 1 when a and b overlap by more than thr (intersection over union). */
static int nms_suppress(const float *a, const float *b, int center, float thr) {
    float p[4], q[4];
    nms_box(a, center, p);
    nms_box(b, center, q);
    float iw = fminf(p[2], q[2]) - fmaxf(p[0], q[0]), ih = fminf(p[3], q[3]) - fmaxf(p[1], q[1]);
    float inter = fmaxf(iw, 0.0f) * fmaxf(ih, 0.0f);
    if (!(inter > 0)) return 0;
    float a1 = (p[2] - p[0]) * (p[3] - p[1]), a2 = (q[2] - q[0]) * (q[3] - q[1]);
    float uni = a1 + a2 - inter;
    if (!(a1 > 0) || !(a2 > 0) || !(uni > 0)) return 0;
    return inter / uni > thr;
}

/* boxes (B, N, 4), scores (B, C, N), max per class (int64, one value),
 * iou threshold and score threshold (float, one value each) -> selected
 * (K, 3) int64 rows (batch, class, box), per batch and class in selection
 * order. attrs center_point_box, use_score_threshold. */
static ms_status nms_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 5);
    if (st != MS_OK) return st;
    const rt_tensor *B = in[0], *S = in[1];
    if (B->dtype != RT_DT_FLOAT || S->dtype != RT_DT_FLOAT || B->shape.rank != 3 ||
        S->shape.rank != 3 || B->shape.dim[2] != 4 || S->shape.dim[0] != B->shape.dim[0] ||
        S->shape.dim[2] != B->shape.dim[1])
        return KN_EINVAL(node, "boxes %s and scores %s: want float (B, N, 4) and (B, C, N)",
                         kn__shp(&B->shape), kn__shp(&S->shape));
    if (in[2]->dtype != RT_DT_INT64 || in[2]->nelem != 1 || in[3]->dtype != RT_DT_FLOAT ||
        in[3]->nelem != 1 || in[4]->dtype != RT_DT_FLOAT || in[4]->nelem != 1)
        return KN_EINVAL(node, "max_output_boxes_per_class (int64), iou_threshold and "
                               "score_threshold (float) must hold one value each");
    int64_t maxk = *(const int64_t *)in[2]->data, nb = B->shape.dim[0], nc = S->shape.dim[1],
            n = B->shape.dim[1];
    float iou = *(const float *)in[3]->data, sthr = *(const float *)in[4]->data;
    int center = kn_attr_i(node, "center_point_box", 0) != 0;
    int use_thr = kn_attr_i(node, "use_score_threshold", 0) != 0;
    if (maxk < 0) maxk = 0;
    if (maxk > n) maxk = n;
    /* Worst case every box of every class: the rows are filled, then the
     * output is made that long. */
    nms_cand *cand = malloc((size_t)(n > 0 ? n : 1) * sizeof(*cand));
    int64_t *sel = malloc((size_t)(maxk > 0 ? maxk : 1) * sizeof(int64_t));
    int64_t cap = 64, cnt = 0, *rows = malloc((size_t)cap * 3 * sizeof(int64_t));
    if (cand == NULL || sel == NULL || rows == NULL) {
        st = MS_ENOMEM;
        goto done;
    }
    for (int64_t b = 0; b < nb && maxk > 0; b++)
        for (int64_t c = 0; c < nc; c++) {
            const float *sc = (const float *)S->data + (b * nc + c) * n;
            const float *bx = (const float *)B->data + b * n * 4;
            int64_t m = 0, ns = 0;
            for (int64_t i = 0; i < n; i++)
                if (!use_thr || sc[i] > sthr) cand[m].score = sc[i], cand[m++].index = i;
            qsort(cand, (size_t)m, sizeof(*cand), nms_cmp);
            for (int64_t i = 0; i < m && ns < maxk; i++) {
                int keep = 1;
                for (int64_t j = 0; j < ns && keep; j++)
                    if (nms_suppress(bx + cand[i].index * 4, bx + sel[j] * 4, center, iou))
                        keep = 0;
                if (!keep) continue;
                sel[ns++] = cand[i].index;
                if (cnt == cap) {
                    int64_t *nr = realloc(rows, (size_t)cap * 2 * 3 * sizeof(int64_t));
                    if (nr == NULL) {
                        st = MS_ENOMEM;
                        goto done;
                    }
                    rows = nr, cap *= 2;
                }
                rows[cnt * 3] = b, rows[cnt * 3 + 1] = c, rows[cnt * 3 + 2] = cand[i].index;
                cnt++;
            }
        }
    rt_shape os = {.rank = 2, .dim = {cnt, 3}};
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &os, &out[0])) == MS_OK && cnt > 0)
        memcpy(out[0]->data, rows, (size_t)cnt * 3 * sizeof(int64_t));
done:
    if (st == MS_ENOMEM)
        st = kn__errf(MS_ENOMEM, node, "out of memory for %lld boxes", (long long)n);
    free(cand);
    free(sel);
    free(rows);
    return st;
}

/* ---- CausalConvWithState ---- */

/* input (B, C, L), weight (C, 1, K), bias (C), past state (B, C, K - 1)
 * -> output (B, C, L): the depthwise convolution of past ++ input (each
 * output sees its K - 1 predecessors), SiLU when attr activation is 1;
 * present state (B, C, K - 1): the last K - 1 steps of past ++ input. */
static ms_status causal_conv_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *W = in[1], *Bs = in[2], *P = in[3];
    int act = (int)kn_attr_i(node, "activation", 0);
    if (X->dtype != RT_DT_FLOAT || W->dtype != RT_DT_FLOAT || Bs->dtype != RT_DT_FLOAT ||
        P->dtype != RT_DT_FLOAT || X->shape.rank != 3 || W->shape.rank != 3 ||
        W->shape.dim[0] != X->shape.dim[1] || W->shape.dim[1] != 1 || W->shape.dim[2] < 1 ||
        Bs->shape.rank != 1 || Bs->shape.dim[0] != X->shape.dim[1] || P->shape.rank != 3 ||
        P->shape.dim[0] != X->shape.dim[0] || P->shape.dim[1] != X->shape.dim[1] ||
        P->shape.dim[2] != W->shape.dim[2] - 1)
        return KN_EINVAL(node,
                         "input %s, weight %s, bias %s, past %s: want float (B, C, L), "
                         "(C, 1, K), (C), (B, C, K - 1)",
                         kn__shp(&X->shape), kn__shp(&W->shape), kn__shp(&Bs->shape),
                         kn__shp(&P->shape));
    int64_t B = X->shape.dim[0], C = X->shape.dim[1], L = X->shape.dim[2], K = W->shape.dim[2];
    rt_shape ps = P->shape;
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &X->shape, &out[0])) != MS_OK ||
        (st = kn__output(ctx, node, 1, RT_DT_FLOAT, &ps, &out[1])) != MS_OK)
        return st;
    const float *x = X->data, *w = W->data, *b = Bs->data, *pd = P->data;
    float *y = out[0]->data, *ns = out[1]->data;
    for (int64_t bc = 0; bc < B * C; bc++) {
        int64_t c = bc % C;
        const float *xr = x + bc * L, *pr = pd + bc * (K - 1), *wr = w + c * K;
        /* element t of past ++ input */
#define CC_AT(t) ((t) < K - 1 ? pr[(t)] : xr[(t) - (K - 1)])
        for (int64_t t = 0; t < L; t++) {
            float acc = b[c];
            for (int64_t j = 0; j < K; j++)
                acc += wr[j] * CC_AT(t + j);
            y[bc * L + t] = act == 1 ? acc / (1.0f + expf(-acc)) : acc;
        }
        for (int64_t j = 0; j < K - 1; j++)
            ns[bc * (K - 1) + j] = CC_AT(L + j);
#undef CC_AT
    }
    return MS_OK;
}

/* ---- Unique ---- */

typedef struct {
    const char *base; /* (outer, n, inner) elements of size es */
    int64_t n, inner, outer;
    rt_dtype dt;
} uq_ctx;

static _Thread_local const uq_ctx *uq_cur; /* qsort has no context argument */

static int uq_cmp_elem(rt_dtype dt, const char *a, const char *b) {
#define UQ_CMP(T)                                                                                  \
    do {                                                                                           \
        T x = *(const T *)a, y = *(const T *)b;                                                    \
        return x < y ? -1 : x > y ? 1 : 0;                                                         \
    } while (0)
    if (dt == RT_DT_FLOAT) UQ_CMP(float);
    if (dt == RT_DT_INT32) UQ_CMP(int32_t);
    if (dt == RT_DT_INT64) UQ_CMP(int64_t);
    UQ_CMP(uint8_t);
#undef UQ_CMP
}

/* Slices i and j compared in memory order (outer major), then by index. */
static int uq_cmp_slices(int64_t i, int64_t j) {
    const uq_ctx *c = uq_cur;
    size_t es = rt_dtype_size(c->dt);
    for (int64_t o = 0; o < c->outer; o++)
        for (int64_t q = 0; q < c->inner; q++) {
            int r = uq_cmp_elem(c->dt, c->base + (size_t)((o * c->n + i) * c->inner + q) * es,
                                c->base + (size_t)((o * c->n + j) * c->inner + q) * es);
            if (r) return r;
        }
    return 0;
}

static int uq_cmp(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    int r = uq_cmp_slices(i, j);
    return r ? r : (i > j) - (i < j);
}

static int uq_by_first(const void *a, const void *b) {
    const int64_t *x = a, *y = b; /* (first index, group) pairs */
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* X -> Y (the distinct slices along attr axis, or of the flattened input
 * when attr has_axis is 0), indices (first occurrence of each), inverse
 * indices (each input slice's position in Y) and counts; Y sorted when attr
 * sorted, else in order of first occurrence. float, int32, int64, bool. */
static ms_status unique_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    if (X->dtype != RT_DT_FLOAT && X->dtype != RT_DT_INT32 && X->dtype != RT_DT_INT64 &&
        X->dtype != RT_DT_BOOL)
        return KN_EINVAL(node, "X must be float, int32, int64 or bool, got %s",
                         rt_dtype_name(X->dtype));
    int r = X->shape.rank, has_axis = kn_attr_i(node, "has_axis", 0) != 0;
    int axis = has_axis ? kn__axis(kn_attr_i(node, "axis", 0), r) : 0;
    if (has_axis && axis < 0)
        return KN_EINVAL(node, "axis out of range for %s", kn__shp(&X->shape));
    uq_ctx c = {.base = X->data, .dt = X->dtype, .n = X->nelem, .inner = 1, .outer = 1};
    if (has_axis) {
        c.n = X->shape.dim[axis];
        for (int i = 0; i < axis; i++)
            c.outer *= X->shape.dim[i];
        for (int i = axis + 1; i < r; i++)
            c.inner *= X->shape.dim[i];
    }
    int64_t n = c.n, *ord = malloc((size_t)(n + 1) * sizeof(int64_t));
    int64_t *grp = malloc((size_t)(n + 1) * sizeof(int64_t));
    int64_t *pairs = malloc((size_t)(2 * n + 2) * sizeof(int64_t));
    int64_t *pos = malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!ord || !grp || !pairs || !pos) {
        st = kn__errf(MS_ENOMEM, node, "out of memory for %lld slices", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        ord[i] = i;
    uq_cur = &c;
    if (c.outer * c.inner > 0) qsort(ord, (size_t)n, sizeof(int64_t), uq_cmp);
    /* Groups of equal slices in sorted order: (first index, group id). */
    int64_t U = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || c.outer * c.inner == 0 || uq_cmp_slices(ord[i - 1], ord[i]) != 0) {
            pairs[2 * U] = ord[i], pairs[2 * U + 1] = U;
            U++;
        }
        grp[ord[i]] = U - 1;
    }
    uq_cur = NULL;
    if (!kn_attr_i(node, "sorted", 1)) qsort(pairs, (size_t)U, 2 * sizeof(int64_t), uq_by_first);
    for (int64_t u = 0; u < U; u++)
        pos[pairs[2 * u + 1]] = u; /* group id -> output position */
    rt_shape ys = {.rank = 1, .dim = {U}}, us = {.rank = 1, .dim = {U}},
             ns = {.rank = 1, .dim = {n}};
    if (has_axis) {
        ys = X->shape;
        ys.dim[axis] = U;
    }
    if ((st = kn__output(ctx, node, 0, X->dtype, &ys, &out[0])) != MS_OK ||
        (st = kn__output(ctx, node, 1, RT_DT_INT64, &us, &out[1])) != MS_OK ||
        (st = kn__output(ctx, node, 2, RT_DT_INT64, &ns, &out[2])) != MS_OK ||
        (st = kn__output(ctx, node, 3, RT_DT_INT64, &us, &out[3])) != MS_OK)
        goto done;
    size_t es = rt_dtype_size(X->dtype);
    int64_t *first = out[1]->data, *inv = out[2]->data, *cnt = out[3]->data;
    for (int64_t u = 0; u < U; u++) {
        first[u] = pairs[2 * u];
        cnt[u] = 0;
        for (int64_t o = 0; o < c.outer; o++)
            memcpy((char *)out[0]->data + (size_t)((o * U + u) * c.inner) * es,
                   c.base + (size_t)((o * n + first[u]) * c.inner) * es, (size_t)c.inner * es);
    }
    for (int64_t i = 0; i < n; i++) {
        inv[i] = pos[grp[i]];
        cnt[inv[i]]++;
    }
done:
    free(ord);
    free(grp);
    free(pairs);
    free(pos);
    return st;
}

/* ---- Det ---- */

/* (..., M, M) float -> (...): LU with partial pivoting in double. */
static ms_status det_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0];
    int r = X->shape.rank;
    if (X->dtype != RT_DT_FLOAT || r < 2 || X->shape.dim[r - 1] != X->shape.dim[r - 2])
        return KN_EINVAL(node, "want float square matrices (..., M, M), got %s",
                         kn__shp(&X->shape));
    int64_t M = X->shape.dim[r - 1];
    rt_shape os = {.rank = r - 2};
    for (int i = 0; i < r - 2; i++)
        os.dim[i] = X->shape.dim[i];
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    double *a = malloc((size_t)(M * M + 1) * sizeof(double));
    if (a == NULL)
        return kn__errf(MS_ENOMEM, node, "out of memory for %lld x %lld", (long long)M,
                        (long long)M);
    const float *xd = X->data;
    float *yd = out[0]->data;
    for (int64_t b = 0; b < out[0]->nelem; b++) {
        for (int64_t i = 0; i < M * M; i++)
            a[i] = xd[b * M * M + i];
        double det = 1;
        for (int64_t k = 0; k < M && det != 0; k++) {
            int64_t p = k;
            for (int64_t i = k + 1; i < M; i++)
                if (fabs(a[i * M + k]) > fabs(a[p * M + k])) p = i;
            if (a[p * M + k] == 0) {
                det = 0;
                break;
            }
            if (p != k) {
                for (int64_t j = 0; j < M; j++) {
                    double t = a[k * M + j];
                    a[k * M + j] = a[p * M + j], a[p * M + j] = t;
                }
                det = -det;
            }
            det *= a[k * M + k];
            for (int64_t i = k + 1; i < M; i++) {
                double f = a[i * M + k] / a[k * M + k];
                for (int64_t j = k; j < M; j++)
                    a[i * M + j] -= f * a[k * M + j];
            }
        }
        yd[b] = (float)det;
    }
    free(a);
    return MS_OK;
}

/* ---- ReverseSequence ---- */

/* x, sequence_lens (int64, one per batch entry) -> x with the first
 * len[b] steps along attr time_axis reversed for each b along attr
 * batch_axis (0 / 1, the other one time). */
static ms_status revseq_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *L = in[1];
    int ba = (int)kn_attr_i(node, "batch_axis", 1), ta = (int)kn_attr_i(node, "time_axis", 0);
    int r = X->shape.rank;
    if (!rt_dtype_is_pod(X->dtype) || r < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)) ||
        L->dtype != RT_DT_INT64 || L->shape.rank != 1 || L->shape.dim[0] != X->shape.dim[ba])
        return KN_EINVAL(node,
                         "x %s, sequence_lens %s: want rank >= 2, one int64 length per "
                         "batch entry, batch and time axes 0 and 1",
                         kn__shp(&X->shape), kn__shp(&L->shape));
    if ((st = kn__output(ctx, node, 0, X->dtype, &X->shape, &out[0])) != MS_OK) return st;
    if (X->nelem == 0) return MS_OK;
    size_t es = rt_dtype_size(X->dtype), row = es;
    for (int i = 2; i < r; i++)
        row *= (size_t)X->shape.dim[i];
    int64_t d0 = X->shape.dim[0], d1 = X->shape.dim[1], T = X->shape.dim[ta];
    const int64_t *len = L->data;
    for (int64_t b = 0; b < X->shape.dim[ba]; b++)
        if (len[b] < 0 || len[b] > T)
            return KN_EINVAL(node, "sequence length %lld is outside 0..%lld", (long long)len[b],
                             (long long)T);
    for (int64_t i = 0; i < d0; i++)
        for (int64_t j = 0; j < d1; j++) {
            int64_t b = ba == 0 ? i : j, t = ba == 0 ? j : i, src = t < len[b] ? len[b] - 1 - t : t;
            int64_t si = ba == 0 ? i : src, sj = ba == 0 ? src : j;
            memcpy((char *)out[0]->data + (size_t)(i * d1 + j) * row,
                   (const char *)X->data + (size_t)(si * d1 + sj) * row, row);
        }
    return MS_OK;
}

const kn_kernel kn_cpu_onnx_kernels[] = {
    {.op = "OnnxDet", .compute = det_compute},
    {.op = "OnnxReverseSequence", .compute = revseq_compute},
    {.op = "OnnxUnique", .compute = unique_compute},
    {.op = "OnnxCausalConvWithState", .compute = causal_conv_compute},
    {.op = "OnnxNonMaxSuppression", .compute = nms_compute},
    {.op = "OnnxLpPool", .compute = lp_pool_compute},
    {.op = "OnnxPool", .compute = lp_pool_compute},
    {.op = "OnnxGridSample", .compute = grid_sample_compute},
    {.op = "OnnxScatterND", .compute = scatter_nd_compute},
    {.op = "OnnxScatterElements", .compute = scatter_elements_compute},
    {.op = "OnnxGatherElements", .compute = gather_elements_compute},
    {.op = NULL},
};
