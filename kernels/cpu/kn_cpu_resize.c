/* kn_cpu_resize.c - ResizeBicubic, ResizeArea and CropAndResize, the image
 * ops of detection and classification serving graphs, with TensorFlow's
 * arithmetic (resize_bicubic_op, resize_area_op, crop_and_resize_op):
 *
 * ResizeBicubic: Keys' cubic convolution, A = -0.75 (legacy sampling and
 * align_corners) or A = -0.5 (half_pixel_centers, where taps outside the
 * image get weight 0 and the rest are renormalised); coefficients quantised
 * to 1/1024 of a pixel as TensorFlow's table; taps clamped into the image;
 * columns first, then rows, in float.
 * ResizeArea: each output pixel is the mean of the input cells its box
 * covers, partial cells weighted by the covered fraction, in float.
 * CropAndResize: boxes [n, 4] normalised (y1, x1, y2, x2) (flipped boxes
 * mirror; parts outside the image read extrapolation_value), box_ind [n]
 * into the batch, crop_size int32 [2]; bilinear or nearest sampling; a
 * 1-pixel side samples the box centre.
 * All three output float32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_resize.h"
#include "kn_cpu_util.h"

/* Scratch slot of the per-column / per-row tap tables. */
enum { SCR_TAPS };

static void free_state(void *state) { free(state); }

static int64_t bound(int64_t v, int64_t limit) { return v < 0 ? 0 : v > limit - 1 ? limit - 1 : v; }

/* The common start of ResizeBicubic and ResizeArea: checks the inputs (dims
 * = N, H, W, C; out_hw = new height, width) and makes the float output. */
static ms_status resize_output(kn_ctx *ctx, const kn_node *node, rt_tensor *const *in,
                               int64_t dims[4], int64_t out_hw[2], rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    if ((st = kn__resize_check(node, in[0], in[1], dims, out_hw)) != MS_OK) return st;
    rt_shape os = {.rank = 4, .dim = {dims[0], out_hw[0], out_hw[1], dims[3]}};
    return kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0]);
}

/* ====================================================================== */
/* ResizeBicubic                                                          */
/* ====================================================================== */

enum { KEYS_TABLE = 1024 };

/* TensorFlow's coefficient table entry 2*i + part (InitCoeffsTable), computed
 * directly: x = i / 1024 stored in float, the cubic evaluated in double and
 * stored in float; part 1 is the outer tap at x + 1. */
static float keys_coef(double a, int64_t i, int part) {
    float x = (float)((double)i * 1.0 / KEYS_TABLE);
    if (part == 0) return (float)(((a + 2) * x - (a + 3)) * x * x + 1);
    x = (float)(x + 1.0);
    return (float)(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
}

typedef struct cubic_taps {
    int64_t idx[4];
    float w[4];
} cubic_taps;

static void cubic_weights(int64_t out, int64_t in, float scale, int half_pixel, cubic_taps *t) {
    const double a = half_pixel ? -0.5 : -0.75;
    for (int64_t o = 0; o < out; o++) {
        float f = half_pixel ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
        int64_t loc = (int64_t)floorf(f);
        float delta = f - (float)loc;
        int64_t off = lrintf(delta * KEYS_TABLE);
        float w[4] = {keys_coef(a, off, 1), keys_coef(a, off, 0), keys_coef(a, KEYS_TABLE - off, 0),
                      keys_coef(a, KEYS_TABLE - off, 1)};
        for (int k = 0; k < 4; k++) {
            t[o].idx[k] = bound(loc - 1 + k, in);
            /* Keys (half-pixel): a tap that fell outside the image is dropped. */
            t[o].w[k] = (half_pixel && t[o].idx[k] != loc - 1 + k) ? 0.0f : w[k];
        }
        if (half_pixel) {
            float sum = t[o].w[0] + t[o].w[1] + t[o].w[2] + t[o].w[3];
            if (fabsf(sum) >= 1000.0f * 1.17549435e-38f) {
                float inv = 1.0f / sum;
                for (int k = 0; k < 4; k++)
                    t[o].w[k] *= inv;
            }
        }
    }
}

typedef struct cubic_job {
    const rt_tensor *x;
    float *y;
    const cubic_taps *ys, *xs;
    int64_t H, W, C, OH, OW;
} cubic_job;

static float dot4(const float *w, float v0, float v1, float v2, float v3) {
    return v0 * w[0] + v1 * w[1] + v2 * w[2] + v3 * w[3];
}

static void cubic_rows(void *arg, int64_t b, int64_t e) {
    const cubic_job *j = arg;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / j->OH, oy = r % j->OH;
        const cubic_taps *ty = &j->ys[oy];
        int64_t row[4];
        for (int k = 0; k < 4; k++)
            row[k] = (n * j->H + ty->idx[k]) * j->W;
        float *y = j->y + r * j->OW * C;
        for (int64_t ox = 0; ox < j->OW; ox++) {
            const cubic_taps *tx = &j->xs[ox];
            for (int64_t c = 0; c < C; c++, y++) {
                float h[4];
                for (int k = 0; k < 4; k++) {
                    float v[4];
                    for (int q = 0; q < 4; q++)
                        v[q] = kn__load_f(j->x->data, j->x->dtype, (row[k] + tx->idx[q]) * C + c);
                    h[k] = dot4(tx->w, v[0], v[1], v[2], v[3]);
                }
                *y = dot4(ty->w, h[0], h[1], h[2], h[3]);
            }
        }
    }
}

static ms_status bicubic_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    const kn__resize_attrs *ra = state;
    int64_t d[4], o[2];
    ms_status st = resize_output(ctx, node, in, d, o, out);
    if (st != MS_OK || out[0]->nelem == 0) return st;
    cubic_taps *t = kn__scratch(SCR_TAPS, (size_t)(o[0] + o[1]) * sizeof(*t));
    if (t == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    cubic_weights(o[0], d[1], kn__resize_scale(d[1], o[0], ra->align_corners), ra->half_pixel, t);
    cubic_weights(o[1], d[2], kn__resize_scale(d[2], o[1], ra->align_corners), ra->half_pixel,
                  t + o[0]);
    cubic_job job = {.x = in[0],
                     .y = out[0]->data,
                     .ys = t,
                     .xs = t + o[0],
                     .H = d[1],
                     .W = d[2],
                     .C = d[3],
                     .OH = o[0],
                     .OW = o[1]};
    int64_t chunk = 1024 / (o[1] * d[3]) > 1 ? 1024 / (o[1] * d[3]) : 1;
    kn_ctx_parallel_for(ctx, d[0] * o[0], chunk, cubic_rows, &job);
    kn__scratch_done(SCR_TAPS, t);
    return MS_OK;
}

/* ====================================================================== */
/* ResizeArea                                                             */
/* ====================================================================== */

/* The cells [start, end) of one output column or row, and the covered
 * fraction of the first and last (TensorFlow's CachedInterpolation). */
typedef struct area_span {
    int64_t start, end;
    float start_scale, last_scale;
} area_span;

/* Covered fraction of cell v by the output box [lo, hi) of width `scale`. */
static float area_cover(int64_t v, float lo, float hi, float scale) {
    if ((float)v < lo) return (float)(v + 1) > hi ? scale : (float)(v + 1) - lo;
    return (float)(v + 1) > hi ? hi - (float)v : 1.0f;
}

static void area_spans(int64_t out, float scale, area_span *s) {
    for (int64_t o = 0; o < out; o++) {
        float lo = (float)o * scale, hi = (float)(o + 1) * scale;
        s[o].start = (int64_t)floorf(lo);
        s[o].end = (int64_t)ceilf(hi);
        s[o].start_scale = area_cover(s[o].start, lo, hi, scale);
        s[o].last_scale = area_cover(s[o].end - 1, lo, hi, scale);
    }
}

typedef struct area_job {
    const rt_tensor *x;
    float *y;
    const area_span *ys, *xs;
    float hs, inv_area;
    int64_t H, W, C, OH, OW;
} area_job;

static void area_rows(void *arg, int64_t b, int64_t e) {
    const area_job *j = arg;
    const int64_t C = j->C, W = j->W;
    const void *x = j->x->data;
    const rt_dtype dt = j->x->dtype;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / j->OH, oy = r % j->OH;
        const area_span *sy = &j->ys[oy];
        float lo = (float)oy * j->hs, hi = (float)(oy + 1) * j->hs;
        float *y = j->y + r * j->OW * C;
        for (int64_t ox = 0; ox < j->OW; ox++) {
            const area_span *sx = &j->xs[ox];
            for (int64_t c = 0; c < C; c++, y++) {
                float sum = 0;
                for (int64_t i = sy->start; i < sy->end; i++) {
                    int64_t row = (n * j->H + bound(i, j->H)) * W;
                    float sum_y = kn__load_f(x, dt, (row + bound(sx->start, W)) * C + c) *
                                  sx->start_scale;
                    if (sx->start + 1 != sx->end) {
                        for (int64_t k = sx->start + 1; k < sx->end - 1; k++)
                            sum_y += kn__load_f(x, dt, (row + bound(k, W)) * C + c);
                        sum_y += kn__load_f(x, dt, (row + bound(sx->end - 1, W)) * C + c) *
                                 sx->last_scale;
                    }
                    sum += sum_y * area_cover(i, lo, hi, j->hs);
                }
                *y = sum * j->inv_area;
            }
        }
    }
}

static ms_status area_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    const kn__resize_attrs *ra = state;
    int64_t d[4], o[2];
    ms_status st = resize_output(ctx, node, in, d, o, out);
    if (st != MS_OK || out[0]->nelem == 0) return st;
    float hs = kn__resize_scale(d[1], o[0], ra->align_corners);
    float ws = kn__resize_scale(d[2], o[1], ra->align_corners);
    area_span *s = kn__scratch(SCR_TAPS, (size_t)(o[0] + o[1]) * sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    area_spans(o[0], hs, s);
    area_spans(o[1], ws, s + o[0]);
    area_job job = {.x = in[0],
                    .y = out[0]->data,
                    .ys = s,
                    .xs = s + o[0],
                    .hs = hs,
                    /* float(1.0 / float(hs * ws)), as TensorFlow. */
                    .inv_area = (float)(1.0 / (double)(hs * ws)),
                    .H = d[1],
                    .W = d[2],
                    .C = d[3],
                    .OH = o[0],
                    .OW = o[1]};
    kn_ctx_parallel_for(ctx, d[0] * o[0], 1, area_rows, &job);
    kn__scratch_done(SCR_TAPS, s);
    return MS_OK;
}

/* ====================================================================== */
/* CropAndResize                                                          */
/* ====================================================================== */

typedef struct crop_attrs {
    int nearest;
    float extrapolation;
} crop_attrs;

static ms_status crop_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    rt_dtype t = kn_attr_type(node, "T", RT_DT_FLOAT);
    if (!kn__resize_dtype_ok(t))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(t));
    crop_attrs a = {.extrapolation = kn_attr_f(node, "extrapolation_value", 0.0f)};
    if (kn_attr_s_eq(node, "method", "nearest", NULL)) {
        a.nearest = 1;
    } else if (!kn_attr_s_eq(node, "method", "bilinear", "bilinear")) {
        return KN_EINVAL(node, "method must be 'bilinear' or 'nearest'");
    }
    crop_attrs *p = malloc(sizeof(*p));
    if (p == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    *p = a;
    *state = p;
    return MS_OK;
}

typedef struct crop_job {
    const crop_attrs *a;
    const rt_tensor *img;
    const float *boxes;
    const int32_t *box_ind;
    float *y;
    int64_t H, W, C, CH, CW;
} crop_job;

/* Source coordinate of output position i of `len` along one side of a box
 * from lo to hi (normalised) in an image side of `size`; len == 1 samples the
 * centre, computed in double as TensorFlow's 0.5 * (lo + hi) * (size - 1). */
static float crop_coord(float lo, float hi, int64_t i, int64_t len, int64_t size, float scale) {
    if (len > 1) return lo * (float)(size - 1) + (float)i * scale;
    return (float)(0.5 * (double)(lo + hi) * (double)(size - 1));
}

static void crop_rows(void *arg, int64_t b, int64_t e) {
    const crop_job *j = arg;
    const int64_t C = j->C, H = j->H, W = j->W;
    const void *x = j->img->data;
    const rt_dtype dt = j->img->dtype;
    for (int64_t r = b; r < e; r++) {
        int64_t bi = r / j->CH, oy = r % j->CH;
        const float *bx = j->boxes + bi * 4;
        const float y1 = bx[0], x1 = bx[1], y2 = bx[2], x2 = bx[3];
        const int64_t base = (int64_t)j->box_ind[bi] * H * W;
        float hsc = j->CH > 1 ? (y2 - y1) * (float)(H - 1) / (float)(j->CH - 1) : 0;
        float wsc = j->CW > 1 ? (x2 - x1) * (float)(W - 1) / (float)(j->CW - 1) : 0;
        float *y = j->y + r * j->CW * C;
        float iy = crop_coord(y1, y2, oy, j->CH, H, hsc);
        if (iy < 0 || iy > (float)(H - 1)) {
            for (int64_t k = 0; k < j->CW * C; k++)
                y[k] = j->a->extrapolation;
            continue;
        }
        int64_t top = (int64_t)floorf(iy), bot = (int64_t)ceilf(iy), near_y = (int64_t)roundf(iy);
        float ly = iy - (float)top;
        for (int64_t ox = 0; ox < j->CW; ox++, y += C) {
            float ix = crop_coord(x1, x2, ox, j->CW, W, wsc);
            if (ix < 0 || ix > (float)(W - 1)) {
                for (int64_t c = 0; c < C; c++)
                    y[c] = j->a->extrapolation;
                continue;
            }
            if (j->a->nearest) {
                int64_t p = (base + near_y * W + (int64_t)roundf(ix)) * C;
                for (int64_t c = 0; c < C; c++)
                    y[c] = kn__load_f(x, dt, p + c);
                continue;
            }
            int64_t left = (int64_t)floorf(ix), right = (int64_t)ceilf(ix);
            float lx = ix - (float)left;
            int64_t tl = (base + top * W + left) * C, tr = (base + top * W + right) * C;
            int64_t bl = (base + bot * W + left) * C, br = (base + bot * W + right) * C;
            for (int64_t c = 0; c < C; c++) {
                float vtl = kn__load_f(x, dt, tl + c), vtr = kn__load_f(x, dt, tr + c);
                float vbl = kn__load_f(x, dt, bl + c), vbr = kn__load_f(x, dt, br + c);
                float t = vtl + (vtr - vtl) * lx;
                float bo = vbl + (vbr - vbl) * lx;
                y[c] = t + (bo - t) * ly;
            }
        }
    }
}

static ms_status crop_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *img = in[0], *boxes = in[1], *ind = in[2], *cs = in[3];
    if (img->shape.rank != 4)
        return KN_EINVAL(node, "image must be 4-D NHWC, got %s", kn__shp(&img->shape));
    if (!kn__resize_dtype_ok(img->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(img->dtype));
    const int64_t N = img->shape.dim[0], H = img->shape.dim[1], W = img->shape.dim[2],
                  C = img->shape.dim[3];
    if (H <= 0 || W <= 0 || H > INT32_MAX || W > INT32_MAX)
        return KN_EINVAL(node, "image %s must have height and width in [1, 2^31)",
                         kn__shp(&img->shape));
    if (boxes->dtype != RT_DT_FLOAT || ind->dtype != RT_DT_INT32)
        return KN_EINVAL(node, "boxes must be float and box_ind int32, got %s and %s",
                         rt_dtype_name(boxes->dtype), rt_dtype_name(ind->dtype));
    int64_t nb = 0;
    if (boxes->nelem != 0 || ind->nelem != 0) {
        if (boxes->shape.rank != 2 || boxes->shape.dim[1] != 4)
            return KN_EINVAL(node, "boxes must be [num_boxes, 4], got %s", kn__shp(&boxes->shape));
        nb = boxes->shape.dim[0];
        if (ind->shape.rank != 1 || ind->shape.dim[0] != nb)
            return KN_EINVAL(node, "box_ind must be [%lld], got %s", (long long)nb,
                             kn__shp(&ind->shape));
    }
    if (cs->dtype != RT_DT_INT32 || cs->shape.rank != 1 || cs->nelem != 2)
        return KN_EINVAL(node, "crop_size must be an int32 vector [height, width], got %s %s",
                         rt_dtype_name(cs->dtype), kn__shp(&cs->shape));
    const int32_t *csz = cs->data;
    if (csz[0] <= 0 || csz[1] <= 0)
        return KN_EINVAL(node, "crop_size must be positive, got [%d, %d]", (int)csz[0],
                         (int)csz[1]);
    const float *bv = boxes->data;
    const int32_t *iv = ind->data;
    for (int64_t i = 0; i < nb; i++) {
        for (int k = 0; k < 4; k++)
            if (!isfinite(bv[i * 4 + k]))
                return KN_EINVAL(node, "boxes[%lld] has a value that is not finite", (long long)i);
        if (iv[i] < 0 || iv[i] >= N)
            return KN_EINVAL(node, "box_ind[%lld] = %d is outside [0, %lld)", (long long)i,
                             (int)iv[i], (long long)N);
    }
    rt_shape os = {.rank = 4, .dim = {nb, csz[0], csz[1], C}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    crop_job job = {.a = state,
                    .img = img,
                    .boxes = bv,
                    .box_ind = iv,
                    .y = out[0]->data,
                    .H = H,
                    .W = W,
                    .C = C,
                    .CH = csz[0],
                    .CW = csz[1]};
    kn_ctx_parallel_for(ctx, nb * csz[0], 1, crop_rows, &job);
    return MS_OK;
}

/* ====================================================================== */

const kn_kernel kn_cpu_resize_kernels[] = {
    {.op = "ResizeBicubic",
     .prepare = kn__resize_prepare,
     .compute = bicubic_compute,
     .release = free_state},
    {.op = "ResizeArea", .prepare = kn__resize_prepare, .compute = area_compute,
     .release = free_state},
    {.op = "CropAndResize", .prepare = crop_prepare, .compute = crop_compute,
     .release = free_state},
    {.op = NULL},
};
