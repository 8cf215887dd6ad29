/* kn_cpu_image.c - CPU kernels of the image group.
 *
 * DcmWindow: window, normalise, lay out and optionally resize a batch of
 * images (the step after DcmDecodeHU; it knows nothing of DICOM itself).
 *   inputs  x:    DT_FLOAT (N, H, W, C)
 *           mask: DT_FLOAT (N, H, W, 1), optional: where each image has pixels
 *                 (top-left rectangle); with `size`, only that part is resized
 *   attrs   center, width: float           L and W (width > 0)
 *           data_format: string = "NHWC"   or "NCHW"
 *           size: list(int) = []           [h, w]: bilinear, half-pixel centers
 *   output  DT_FLOAT (N, h, w, C) or (N, C, h, w)
 *   value   lo = (float)(L - W/2), hi = (float)(L + W/2) (double, rounded once);
 *           y = (min(max(x, lo), hi) - lo) / (hi - lo) in float32, then resized.
 *   OpDef: inputs {x: float, mask: float (optional: nin 1 or 2)}, outputs
 *   {y: float}, attrs center:float, width:float, data_format:string,
 *   size:list(int).
 *
 * OnnxResize: ONNX's Resize for the ONNX importer (below).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

typedef kn_window win_state;

static ms_status win_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    win_state w;
    ms_status st = kn_window_attrs(n, &w);
    if (st != MS_OK) return st;
    win_state *s = malloc(sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    *s = w;
    *state = s;
    return MS_OK;
}

/* Bilinear resize, TensorFlow's half-pixel-centers convention, reading a
 * (ih, iw) window of an image whose rows are `stride` pixels apart. */
static void resize(const float *in, uint64_t stride, uint32_t ih, uint32_t iw, uint32_t c,
                   float *out, uint32_t oh, uint32_t ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    for (uint32_t y = 0; y < oh; y++) {
        float fy = ((float)y + 0.5f) * sy - 0.5f, y0f = floorf(fy), dy = fy - y0f;
        int64_t y0 = (int64_t)y0f, y1 = y0 + 1;
        y0 = y0 < 0 ? 0 : y0 > (int64_t)ih - 1 ? (int64_t)ih - 1 : y0;
        y1 = y1 < 0 ? 0 : y1 > (int64_t)ih - 1 ? (int64_t)ih - 1 : y1;
        for (uint32_t x = 0; x < ow; x++) {
            float fx = ((float)x + 0.5f) * sx - 0.5f, x0f = floorf(fx), dx = fx - x0f;
            int64_t x0 = (int64_t)x0f, x1 = x0 + 1;
            x0 = x0 < 0 ? 0 : x0 > (int64_t)iw - 1 ? (int64_t)iw - 1 : x0;
            x1 = x1 < 0 ? 0 : x1 > (int64_t)iw - 1 ? (int64_t)iw - 1 : x1;
            for (uint32_t k = 0; k < c; k++) {
                float tl = in[((uint64_t)y0 * stride + (uint64_t)x0) * c + k];
                float tr = in[((uint64_t)y0 * stride + (uint64_t)x1) * c + k];
                float bl = in[((uint64_t)y1 * stride + (uint64_t)x0) * c + k];
                float br = in[((uint64_t)y1 * stride + (uint64_t)x1) * c + k];
                float top = tl + (tr - tl) * dx, bot = bl + (br - bl) * dx;
                out[((uint64_t)y * ow + x) * c + k] = top + (bot - top) * dy;
            }
        }
    }
}

static ms_status win_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    const win_state *s = state;
    const rt_tensor *x = in[0];
    const rt_tensor *m = n->nin > 1 ? in[1] : NULL;
    if (s == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    if (x->dtype != RT_DT_FLOAT || x->shape.rank != 4)
        return ms_errf(MS_EINVAL, "%s: x must be float32 (N, H, W, C)", n->name);
    const int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2],
                  C = x->shape.dim[3];
    if (m && (m->dtype != RT_DT_FLOAT || m->shape.rank != 4 || m->shape.dim[0] != N ||
              m->shape.dim[1] != H || m->shape.dim[2] != W || m->shape.dim[3] != 1))
        return ms_errf(MS_EINVAL, "%s: mask must be float32 (N, H, W, 1) like x", n->name);
    const int64_t oh = s->size[0] ? s->size[0] : H, ow = s->size[1] ? s->size[1] : W;
    rt_shape sh = s->nchw ? rt_shape_make(4, (int64_t[]){N, C, oh, ow})
                          : rt_shape_make(4, (int64_t[]){N, oh, ow, C});
    ms_status st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0]);
    if (st != MS_OK) return st;
    float *y = rt_tensor_f32(out[0]);
    const float *xv = rt_tensor_f32(x);
    const uint64_t plane = (uint64_t)H * W * C, oplane = (uint64_t)oh * ow * C;
    /* Per-thread scratch (kn__scratch): no allocation per request. */
    float *win = kn__scratch(0, (size_t)(plane ? plane : 1) * sizeof(float));
    float *res = (s->nchw && plane) ? kn__scratch(1, (size_t)oplane * sizeof(float)) : NULL;
    if (win == NULL || (s->nchw && plane && res == NULL)) {
        kn__scratch_done(0, win);
        kn__scratch_done(1, res);
        rt_tensor_unref(out[0]);
        out[0] = NULL;
        return ms_errf(MS_ENOMEM, "%s: out of memory", n->name);
    }
    for (int64_t b = 0; b < N; b++) {
        const float *src = xv + (uint64_t)b * plane;
        for (uint64_t i = 0; i < plane; i++) {
            float v = src[i];
            v = v < s->lo ? s->lo : v;
            v = v > s->hi ? s->hi : v;
            win[i] = (v - s->lo) / s->range;
        }
        /* The image's own extent: rows/cols of the mask's top-left rectangle. */
        uint32_t ih = (uint32_t)H, iw = (uint32_t)W;
        if (m && s->size[0]) {
            const float *mv = rt_tensor_f32(m) + (uint64_t)b * H * W;
            ih = iw = 0;
            while (ih < (uint32_t)H && mv[(uint64_t)ih * W] > 0)
                ih++;
            while (iw < (uint32_t)W && mv[iw] > 0)
                iw++;
            if (ih == 0 || iw == 0) ih = (uint32_t)H, iw = (uint32_t)W;
        }
        float *dst = y + (uint64_t)b * oplane;
        float *hwc = s->nchw ? res : dst;
        if (s->size[0])
            resize(win, (uint64_t)W, ih, iw, (uint32_t)C, hwc, (uint32_t)oh, (uint32_t)ow);
        else
            memcpy(hwc, win, (size_t)plane * sizeof(float));
        if (s->nchw)
            for (int64_t k = 0; k < C; k++)
                for (uint64_t p = 0; p < (uint64_t)oh * ow; p++)
                    dst[(uint64_t)k * oh * ow + p] = hwc[p * C + k];
    }
    kn__scratch_done(0, win);
    kn__scratch_done(1, res);
    return MS_OK;
}


/* ---- OnnxResize -------------------------------------------------------
 * ONNX's Resize (opset 10-19 semantics), for the forms TF's resize ops do
 * not express (emitted by the ONNX importer; TF's ops stay for the rest).
 *   inputs  x: float (any rank); roi: float (2 * len(axes) values or
 *           empty); scales: float (len(axes) values or empty); sizes: int64
 *           (len(axes) values or empty; wins over scales)
 *   attrs   mode: nearest | linear | cubic
 *           coordinate_transformation_mode: half_pixel | half_pixel_symmetric
 *             | pytorch_half_pixel | align_corners | asymmetric |
 *             tf_crop_and_resize
 *           nearest_mode: round_prefer_floor | round_prefer_ceil | floor | ceil
 *           cubic_coeff_a: float, exclude_outside: int, extrapolation_value:
 *           float, antialias: int, axes: list(int) (absent: all),
 *           keep_aspect_ratio_policy: stretch | not_larger | not_smaller
 * Computed as ONNX's reference does: one axis at a time (from the last), in
 * double, each output index mapped back to a source coordinate and
 * interpolated from its neighbours (edge-clamped). */

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum { CT_HALF, CT_HALF_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_CROP };
enum { NM_RPF, NM_RPC, NM_FLOOR, NM_CEIL };

typedef struct rz_attrs {
    int mode, ctm, nm, exclude, antialias, policy, naxes;
    double a, extrap;
    int64_t axes[RT_MAX_RANK];
} rz_attrs;

/* Index of string attr key's value in names (absent: dflt), or -1. */
static int rz_pick(const kn_node *n, const char *key, const char *const *names, int cnt,
                   const char *dflt) {
    for (int i = 0; i < cnt; i++)
        if (kn_attr_s_eq(n, key, names[i], dflt)) return i;
    return -1;
}

static ms_status rz_parse(const kn_node *n, rz_attrs *r) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel",    "half_pixel_symmetric",
                                       "pytorch_half_pixel", "align_corners",
                                       "asymmetric",    "tf_crop_and_resize"};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const pols[] = {"stretch", "not_larger", "not_smaller"};
    r->mode = rz_pick(n, "mode", modes, 3, "nearest");
    r->ctm = rz_pick(n, "coordinate_transformation_mode", ctms, 6, "half_pixel");
    r->nm = rz_pick(n, "nearest_mode", nms, 4, "round_prefer_floor");
    r->policy = rz_pick(n, "keep_aspect_ratio_policy", pols, 3, "stretch");
    if (r->mode < 0 || r->ctm < 0 || r->nm < 0 || r->policy < 0)
        return KN_EINVAL(n, "unknown mode, coordinate_transformation_mode, nearest_mode or "
                            "keep_aspect_ratio_policy");
    r->a = kn_attr_f(n, "cubic_coeff_a", -0.75f);
    r->extrap = kn_attr_f(n, "extrapolation_value", 0.0f);
    r->exclude = kn_attr_i(n, "exclude_outside", 0) != 0;
    r->antialias = kn_attr_i(n, "antialias", 0) != 0;
    r->naxes = kn_attr_ilist(n, "axes", r->axes, RT_MAX_RANK);
    if (r->naxes > RT_MAX_RANK) return KN_EINVAL(n, "too many axes");
    return MS_OK;
}

static ms_status rz_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    rz_attrs r;
    return rz_parse(node, &r);
}

/* Source coordinate of output index o on an axis of in_n -> out_n. */
static double rz_coord(const rz_attrs *r, int64_t o, double scale, int64_t in_n, int64_t out_n,
                       double rs, double re) {
    switch (r->ctm) {
    case CT_HALF_SYM: {
        double adj = (double)out_n / (scale * (double)in_n);
        return (double)in_n / 2.0 * (1.0 - adj) + ((double)o + 0.5) / scale - 0.5;
    }
    case CT_PYTORCH:
        return scale * (double)in_n > 1.0 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
    case CT_ALIGN: { /* the reference divides by scale * in_n - 1, not out_n - 1 */
        double ow = scale * (double)in_n;
        return ow == 1.0 ? 0.0 : (double)o * (double)(in_n - 1) / (ow - 1.0);
    }
    case CT_ASYM:
        return (double)o / scale;
    case CT_CROP:
        return out_n > 1 ? rs * (double)(in_n - 1) +
                               (double)o * (re - rs) * (double)(in_n - 1) / (double)(out_n - 1)
                         : 0.5 * (rs + re) * (double)(in_n - 1);
    default:
        return ((double)o + 0.5) / scale - 0.5;
    }
}

static double rz_cubic(double x, double A) {
    x = fabs(x);
    if (x < 1.0) return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    if (x < 2.0) return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    return 0.0;
}

/* Taps of one output index: source indices (clamped) and weights; n = 0
 * marks an extrapolated point (tf_crop_and_resize outside the input). */
typedef struct rz_taps {
    int64_t n, *idx;
    double *w;
} rz_taps;

/* The taps per output of an axis: tap count first (the same for every
 * output), then fills idx / w (out_n * per entries). */
static int64_t rz_tap_count(const rz_attrs *r, double scale) {
    if (r->mode == RZ_NEAREST) return 1;
    if (!r->antialias) return r->mode == RZ_LINEAR ? 2 : 4;
    double s = scale < 1.0 ? scale : 1.0;
    int64_t start = (int64_t)floor((r->mode == RZ_LINEAR ? -1.0 : -2.0) / s) + 1;
    return 2 - 2 * start;
}

static void rz_taps_fill(const rz_attrs *r, double x, double scale, int64_t in_n, int64_t per,
                         int64_t *idx, double *w, int64_t *n) {
    double x0 = floor(x), ratio = x - x0;
    *n = per;
    if (r->mode == RZ_NEAREST) {
        int64_t i = (int64_t)x0;
        if (ratio != 0.0) {
            int up = r->nm == NM_RPF ? ratio > 0.5 : r->nm == NM_RPC ? ratio >= 0.5 : r->nm == NM_CEIL;
            i += up;
        }
        idx[0] = i < 0 ? 0 : i >= in_n ? in_n - 1 : i;
        w[0] = 1.0;
        return;
    }
    if (ratio == 0.0) ratio = 1.0, x0 -= 1.0; /* as the reference: the pair (x - 1, x) */
    int64_t start = 1 - per / 2;
    double s = r->antialias && scale < 1.0 ? scale : 1.0, sum = 0.0;
    for (int64_t k = 0; k < per; k++) {
        double t = ((double)(start + k) - ratio) * s;
        double c = r->mode == RZ_LINEAR ? fmax(0.0, 1.0 - fabs(t)) : rz_cubic(t, r->a);
        int64_t i = (int64_t)x0 + start + k;
        if (r->exclude && (i < 0 || i >= in_n)) c = 0.0;
        idx[k] = i < 0 ? 0 : i >= in_n ? in_n - 1 : i;
        w[k] = c;
        sum += c;
    }
    if ((r->antialias || r->exclude) && sum != 0.0)
        for (int64_t k = 0; k < per; k++)
            w[k] /= sum;
}

/* One axis: src (outer, in_n, inner) -> dst (outer, out_n, inner). */
static ms_status rz_axis(const kn_node *node, const rz_attrs *r, const double *src, double *dst,
                         int64_t outer, int64_t in_n, int64_t out_n, int64_t inner, double scale,
                         double rs, double re) {
    int64_t per = rz_tap_count(r, scale);
    if (per < 1 || per > ((int64_t)1 << 24) / (out_n > 0 ? out_n : 1))
        return KN_EINVAL(node, "a scale of %g needs too many taps", scale);
    int64_t *idx = malloc((size_t)(out_n * per + 1) * sizeof(int64_t));
    double *w = malloc((size_t)(out_n * per + 1) * sizeof(double));
    int64_t *cnt = malloc((size_t)(out_n + 1) * sizeof(int64_t));
    if (idx == NULL || w == NULL || cnt == NULL) {
        free(idx), free(w), free(cnt);
        return kn__errf(MS_ENOMEM, node, "out of memory");
    }
    for (int64_t o = 0; o < out_n; o++) {
        double x = rz_coord(r, o, scale, in_n, out_n, rs, re);
        if (r->ctm == CT_CROP && (x < 0.0 || x > (double)(in_n - 1)))
            cnt[o] = 0;
        else
            rz_taps_fill(r, x, scale, in_n, per, idx + o * per, w + o * per, &cnt[o]);
    }
    for (int64_t b = 0; b < outer; b++)
        for (int64_t o = 0; o < out_n; o++) {
            double *d = dst + (b * out_n + o) * inner;
            if (cnt[o] == 0) {
                for (int64_t c = 0; c < inner; c++)
                    d[c] = r->extrap;
                continue;
            }
            for (int64_t c = 0; c < inner; c++)
                d[c] = 0.0;
            for (int64_t k = 0; k < cnt[o]; k++) {
                const double *s = src + (b * in_n + idx[o * per + k]) * inner;
                double wk = w[o * per + k];
                for (int64_t c = 0; c < inner; c++)
                    d[c] += wk * s[c];
            }
        }
    free(idx), free(w), free(cnt);
    return MS_OK;
}

static ms_status onnx_resize_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    rz_attrs r;
    ms_status st = rz_parse(node, &r);
    if (st != MS_OK) return st;
    if ((st = kn__need_inputs(node, in, 4)) != MS_OK) return st;
    const rt_tensor *x = in[0];
    int rank = x->shape.rank, na = r.naxes;
    if (x->dtype != RT_DT_FLOAT || in[1]->dtype != RT_DT_FLOAT || in[2]->dtype != RT_DT_FLOAT)
        return KN_EINVAL(node, "x, roi and scales must be float");
    int64_t ax[RT_MAX_RANK];
    uint8_t seen[RT_MAX_RANK] = {0};
    if (na < 0) {
        na = rank;
        for (int i = 0; i < rank; i++)
            ax[i] = i;
    }
    for (int i = 0; i < na; i++) {
        int a = kn__axis(r.naxes < 0 ? ax[i] : r.axes[i], rank);
        if (a < 0 || seen[a]) return KN_EINVAL(node, "axes out of range or repeated");
        seen[a] = 1;
        ax[i] = a;
    }
    double scale[RT_MAX_RANK], rs[RT_MAX_RANK], re[RT_MAX_RANK];
    rt_shape os = x->shape;
    for (int d = 0; d < rank; d++)
        scale[d] = 1.0, rs[d] = 0.0, re[d] = 1.0;
    if (in[1]->nelem > 0) {
        if (in[1]->nelem != 2 * na) return KN_EINVAL(node, "roi needs %d values", 2 * na);
        const float *v = in[1]->data;
        for (int i = 0; i < na; i++)
            rs[ax[i]] = v[i], re[ax[i]] = v[i + na];
    }
    if (in[3]->nelem > 0) {
        int64_t sz[RT_MAX_RANK];
        int c;
        if ((st = kn__read_ints(node, in[3], "sizes", sz, RT_MAX_RANK, &c)) != MS_OK) return st;
        if (c != na) return KN_EINVAL(node, "sizes has %d values for %d axes", c, na);
        double pick = r.policy == 1 ? INFINITY : 0.0;
        for (int i = 0; i < na; i++) {
            int64_t d = x->shape.dim[ax[i]];
            if (sz[i] < 0 || sz[i] > INT32_MAX)
                return KN_EINVAL(node, "size %lld for a dim of %lld", (long long)sz[i],
                                 (long long)d);
            double q = d ? (double)sz[i] / (double)d : 1.0; /* empty: checked below */
            scale[ax[i]] = q, os.dim[ax[i]] = sz[i];
            pick = r.policy == 1 ? fmin(pick, q) : fmax(pick, q);
        }
        for (int i = 0; i < na && r.policy != 0; i++) {
            scale[ax[i]] = pick;
            os.dim[ax[i]] = (int64_t)floor(pick * (double)x->shape.dim[ax[i]] + 0.5);
        }
    } else if (in[2]->nelem > 0) {
        if (in[2]->nelem != na) return KN_EINVAL(node, "scales has %lld values for %d axes",
                                                 (long long)in[2]->nelem, na);
        const float *v = in[2]->data;
        for (int i = 0; i < na; i++) {
            double o = floor((double)x->shape.dim[ax[i]] * (double)v[i]);
            if (!(v[i] > 0.0f) || !(o <= (double)INT32_MAX))
                return KN_EINVAL(node, "scale %g is not positive or too large", (double)v[i]);
            scale[ax[i]] = v[i], os.dim[ax[i]] = (int64_t)o;
        }
    } else {
        return KN_EINVAL(node, "neither scales nor sizes given");
    }
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    if (x->nelem == 0) {
        rt_tensor_unref(out[0]), out[0] = NULL;
        return KN_EINVAL(node, "cannot resize the empty input %s to %s", kn__shp(&x->shape),
                         kn__shp(&os));
    }
    /* Work in double, one axis at a time from the last. */
    rt_shape cur = x->shape;
    double *buf = malloc((size_t)x->nelem * sizeof(double));
    if (buf == NULL) goto oom;
    for (int64_t i = 0; i < x->nelem; i++)
        buf[i] = ((const float *)x->data)[i];
    for (int a = rank - 1; a >= 0; a--) {
        int crop = r.ctm == CT_CROP && (rs[a] != 0.0 || re[a] != 1.0);
        if (os.dim[a] == cur.dim[a] && scale[a] == 1.0 && !crop) continue;
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < a; d++)
            outer *= cur.dim[d];
        for (int d = a + 1; d < rank; d++)
            inner *= cur.dim[d];
        double *next = malloc((size_t)(outer * os.dim[a] * inner) * sizeof(double) + 8);
        if (next == NULL) goto oom;
        st = rz_axis(node, &r, buf, next, outer, cur.dim[a], os.dim[a], inner, scale[a], rs[a],
                     re[a]);
        free(buf);
        buf = next;
        if (st != MS_OK) {
            free(buf);
            rt_tensor_unref(out[0]), out[0] = NULL;
            return st;
        }
        cur.dim[a] = os.dim[a];
    }
    for (int64_t i = 0; i < out[0]->nelem; i++)
        ((float *)out[0]->data)[i] = (float)buf[i];
    free(buf);
    return MS_OK;
oom:
    free(buf);
    rt_tensor_unref(out[0]), out[0] = NULL;
    return kn__errf(MS_ENOMEM, node, "out of memory");
}

const kn_kernel kn_cpu_image_kernels[] = {
    {.op = "DcmWindow", .prepare = win_prepare, .compute = win_compute, .release = free},
    {.op = "OnnxResize", .prepare = rz_prepare, .compute = onnx_resize_compute},
    {.op = NULL},
};
