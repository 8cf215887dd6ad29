/* kn_cpu_imgproj.c - ImageProjectiveTransformV3 / V2 (Keras RandomRotation,
 * RandomZoom, RandomTranslation run them at serving time), as TensorFlow
 * defines them.
 *
 * images (N, H, W, C); transforms (N, 8) or (1, 8) float32, one row
 * [a0 a1 a2 b0 b1 b2 c0 c1] per image mapping an output point (x, y) to the
 * input point ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k) with
 * k = c0 x + c1 y + 1 (k == 0: fill_value); output_shape int32 [2] (new
 * height, width); V3's fill_value float32 scalar (V2: 0).
 * fill_mode: CONSTANT (points outside read fill_value), REFLECT
 * (d c b a | a b c d | d c b a), WRAP (a b c d | a b c d), NEAREST
 * (a a a a | a b c d | d d d d); the mapped coordinate is then clamped into
 * the image. interpolation: NEAREST (round half away from zero) or BILINEAR
 * (over the four neighbours, any outside reads fill_value). All coordinate
 * arithmetic is float32, as TensorFlow's. Images float or double. */
#include <math.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

typedef enum { FILL_CONSTANT, FILL_REFLECT, FILL_WRAP, FILL_NEAREST } fill_mode;

typedef struct {
    const rt_tensor *img;
    const float *tr;
    int64_t tr_rows;
    int64_t oh, ow;
    fill_mode mode;
    int bilinear;
    double fill;
    void *out;
} proj_job;

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

static float map_coord(float c, int64_t len, fill_mode mode) {
    switch (mode) {
    case FILL_REFLECT:
        if (c < 0) {
            if (len <= 1) {
                c = 0;
            } else {
                const int64_t sz2 = 2 * len;
                if (c < (float)sz2) c = (float)(sz2 * (int64_t)(-c / (float)sz2)) + c;
                c = (c < (float)-len) ? c + (float)sz2 : -c - 1;
            }
        } else if (c > (float)(len - 1)) {
            if (len <= 1) {
                c = 0;
            } else {
                const int64_t sz2 = 2 * len;
                c -= (float)(sz2 * (int64_t)(c / (float)sz2));
                if (c >= (float)len) c = (float)sz2 - c - 1;
            }
        }
        return clampf(c, 0.0f, (float)(len - 1));
    case FILL_WRAP:
        if (c < 0) {
            if (len <= 1) {
                c = 0;
            } else {
                const int64_t sz = len - 1;
                c += (float)(len * ((int64_t)(-c / (float)sz) + 1));
            }
        } else if (c > (float)(len - 1)) {
            if (len <= 1) {
                c = 0;
            } else {
                const int64_t sz = len - 1;
                c -= (float)(len * (int64_t)(c / (float)sz));
            }
        }
        return clampf(c, 0.0f, (float)(len - 1));
    case FILL_NEAREST:
        return clampf(c, 0.0f, (float)(len - 1));
    case FILL_CONSTANT:
    default:
        return c;
    }
}

static double read_px(const proj_job *j, int64_t b, int64_t y, int64_t x, int64_t ch) {
    const rt_tensor *im = j->img;
    int64_t h = im->shape.dim[1], w = im->shape.dim[2], c = im->shape.dim[3];
    if (y < 0 || y >= h || x < 0 || x >= w) return j->fill;
    int64_t off = ((b * h + y) * w + x) * c + ch;
    return im->dtype == RT_DT_FLOAT ? (double)((const float *)im->data)[off]
                                    : ((const double *)im->data)[off];
}

static void proj_rows(void *arg, int64_t begin, int64_t end) {
    const proj_job *j = arg;
    const rt_tensor *im = j->img;
    int64_t h = im->shape.dim[1], w = im->shape.dim[2], nc = im->shape.dim[3];
    for (int64_t row = begin; row < end; row++) { /* row = b * oh + y */
        int64_t b = row / j->oh, oy = row % j->oh;
        const float *t = j->tr + (j->tr_rows == 1 ? 0 : b * 8);
        for (int64_t ox = 0; ox < j->ow; ox++) {
            const float fx = (float)ox, fy = (float)oy;
            const float k = t[6] * fx + t[7] * fy + 1.0f;
            int64_t base = (row * j->ow + ox) * nc;
            for (int64_t ch = 0; ch < nc; ch++) {
                double v;
                if (k == 0.0f) {
                    v = j->fill;
                } else {
                    const float ix = (t[0] * fx + t[1] * fy + t[2]) / k;
                    const float iy = (t[3] * fx + t[4] * fy + t[5]) / k;
                    const float x = map_coord(ix, w, j->mode), y = map_coord(iy, h, j->mode);
                    if (!j->bilinear) {
                        v = read_px(j, b, (int64_t)roundf(y), (int64_t)roundf(x), ch);
                    } else {
                        const float y0 = floorf(y), x0 = floorf(x);
                        const float y1 = y0 + 1, x1 = x0 + 1;
                        const int64_t iy0 = (int64_t)y0, ix0 = (int64_t)x0;
                        const int64_t iy1 = (int64_t)y1, ix1 = (int64_t)x1;
                        const float vy0 = (x1 - x) * (float)read_px(j, b, iy0, ix0, ch) +
                                          (x - x0) * (float)read_px(j, b, iy0, ix1, ch);
                        const float vy1 = (x1 - x) * (float)read_px(j, b, iy1, ix0, ch) +
                                          (x - x0) * (float)read_px(j, b, iy1, ix1, ch);
                        v = (double)((y1 - y) * vy0 + (y - y0) * vy1);
                    }
                }
                if (im->dtype == RT_DT_FLOAT)
                    ((float *)j->out)[base + ch] = (float)v;
                else
                    ((double *)j->out)[base + ch] = v;
            }
        }
    }
}

static ms_status proj_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)st_;
    int v3 = strcmp(n->op, "ImageProjectiveTransformV3") == 0;
    ms_status st = kn__need_inputs(n, in, v3 ? 4 : 3);
    if (st != MS_OK) return st;
    const rt_tensor *im = in[0], *tr = in[1], *os = in[2];
    if (im->shape.rank != 4)
        return KN_EINVAL(n, "Input images must have rank 4, got %s", kn__shp(&im->shape));
    if (im->dtype != RT_DT_FLOAT && im->dtype != RT_DT_DOUBLE)
        return KN_EINVAL(n, "images of %s are not supported (float, double)",
                         rt_dtype_name(im->dtype));
    if (tr->dtype != RT_DT_FLOAT || tr->shape.rank != 2 || tr->shape.dim[1] != 8 ||
        (tr->shape.dim[0] != 1 && tr->shape.dim[0] != im->shape.dim[0]))
        return KN_EINVAL(n, "Input transform should be num_images x 8 or 1 x 8, got %s %s",
                         rt_dtype_name(tr->dtype), kn__shp(&tr->shape));
    if (os->dtype != RT_DT_INT32 || os->shape.rank != 1 || os->nelem != 2)
        return KN_EINVAL(n, "output shape must be 1-dimensional with 2 int32 elements, got %s",
                         kn__shp(&os->shape));
    const int32_t *hw = os->data;
    if (hw[0] < 0 || hw[1] < 0) return KN_EINVAL(n, "output dimensions must be non-negative");
    proj_job j = {.img = im, .tr = tr->data, .tr_rows = tr->shape.dim[0], .oh = hw[0],
                  .ow = hw[1]};
    if (v3) {
        const rt_tensor *fv = in[3];
        if (fv->dtype != RT_DT_FLOAT || fv->nelem != 1 || fv->shape.rank != 0)
            return KN_EINVAL(n, "fill_value must be a float32 scalar, got %s %s",
                             rt_dtype_name(fv->dtype), kn__shp(&fv->shape));
        j.fill = ((const float *)fv->data)[0];
        if (im->dtype == RT_DT_FLOAT) j.fill = (float)j.fill;
    }
    static const char *const modes[] = {"CONSTANT", "REFLECT", "WRAP", "NEAREST"};
    int m = -1;
    for (int i = 0; i < 4 && m < 0; i++)
        if (kn_attr_s_eq(n, "fill_mode", modes[i], "CONSTANT")) m = i;
    if (m < 0) return KN_EINVAL(n, "fill_mode must be CONSTANT, REFLECT, WRAP or NEAREST");
    j.mode = (fill_mode)m;
    if (kn_attr_s_eq(n, "interpolation", "BILINEAR", ""))
        j.bilinear = 1;
    else if (!kn_attr_s_eq(n, "interpolation", "NEAREST", ""))
        return KN_EINVAL(n, "interpolation must be NEAREST or BILINEAR");
    rt_shape s = {.rank = 4, .dim = {im->shape.dim[0], hw[0], hw[1], im->shape.dim[3]}};
    if ((st = kn__output(ctx, n, 0, im->dtype, &s, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    if (im->shape.dim[1] == 0 || im->shape.dim[2] == 0) { /* every read is outside */
        for (int64_t i = 0; i < out[0]->nelem; i++) {
            if (im->dtype == RT_DT_FLOAT)
                ((float *)out[0]->data)[i] = (float)j.fill;
            else
                ((double *)out[0]->data)[i] = j.fill;
        }
        return MS_OK;
    }
    j.out = out[0]->data;
    kn_ctx_parallel_for(ctx, s.dim[0] * s.dim[1], 8, proj_rows, &j);
    return MS_OK;
}

const kn_kernel kn_cpu_imgproj_kernels[] = {
    {.op = "ImageProjectiveTransformV3", .compute = proj_compute},
    {.op = "ImageProjectiveTransformV2", .compute = proj_compute},
    {.op = NULL},
};
