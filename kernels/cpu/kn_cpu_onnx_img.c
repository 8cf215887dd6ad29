/* kn_cpu_onnx_img.c - our own ops for ONNX's image operators that no TF op
 * means exactly (emitted by runtime/onnx/rt_onnx_img.c; docs/onnx.md):
 *
 *   OnnxRoiAlign   X (N, C, H, W) float, rois (R, 4) float (x1, y1, x2, y2),
 *                  batch_indices (R) int64 -> (R, C, output_height,
 *                  output_width). attrs output_height, output_width,
 *                  sampling_ratio (0: ceil(roi size / bins) per bin),
 *                  spatial_scale, mode (0 avg, 1 max), half_pixel (1: the
 *                  ROI shifted by -0.5, opset 16's default; 0: opset 10's
 *                  output_half_pixel, each ROI at least 1x1). Bilinear
 *                  samples as ONNX RoiAlign 10-22 (its reference and ONNX
 *                  Runtime): max mode takes, per bin, the maximum over the
 *                  samples of the largest of the four weighted corners.
 *   OnnxMaxUnpool  X (N, C, spatial...), I (int64, X's shape: flat indices
 *                  into the default output, X's spatial dims unpooled by
 *                  attrs ksize, strides, pads), [output shape (int64, X's
 *                  rank)] -> zeros of the output shape with each X[i] at the
 *                  coordinates of I[i], in order (ONNX MaxUnpool 9-22).
 *   OnnxCol2Im     input (N, C * prod(block), L), image_shape (int64, D),
 *                  block_shape (int64, D) -> (N, C, image_shape...): each
 *                  column's block added at its sliding-window position.
 *                  attrs dilations, pads (begin..., end...), strides (D each;
 *                  empty: 1s / 0s). ONNX Col2Im 18.
 *   OnnxDeformConv X, W, offset, B, mask -> the 2-D convolution of X sampled
 *                  (bilinear, zeros outside) at each tap's position moved by
 *                  its offset, scaled by the mask (ONNX DeformConv 19-22);
 *                  B and mask empty when absent.
 *
 * Sizes come at run time, so every one is checked here: a shape that does
 * not fit, an index out of range or work above KN_IMG_WORK_MAX fails the run
 * with INVALID_ARGUMENT naming it. RoiAlign, Col2Im and DeformConv poll the
 * request's cancellation once per output row (or block), so a deadline
 * stops a large run.
 */
#include <math.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

#define KN_IMG_WORK_MAX ((int64_t)1 << 36) /* samples / adds of one run */
#define KN_IMG_DIMS 6                       /* spatial dims of Col2Im */

/* ---- RoiAlign ---- */

typedef struct {
    int64_t pos[4];
    float w[4];
} ra_sample;

/* The bilinear sample of a (height x width) plane at (y, x): corner offsets
 * and weights, all weights 0 outside [-1, size] (ONNX's rule). */
static ra_sample ra_at(float y, float x, int64_t height, int64_t width) {
    ra_sample s = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (height < 1 || width < 1) return s;
    if (!(y >= -1.0f && y <= (float)height && x >= -1.0f && x <= (float)width)) return s;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= height - 1) {
        yh = yl = height - 1;
        y = (float)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= width - 1) {
        xh = xl = width - 1;
        x = (float)xl;
    } else {
        xh = xl + 1;
    }
    float ly = y - (float)yl, lx = x - (float)xl, hy = 1 - ly, hx = 1 - lx;
    s.pos[0] = yl * width + xl, s.pos[1] = yl * width + xh;
    s.pos[2] = yh * width + xl, s.pos[3] = yh * width + xh;
    s.w[0] = hy * hx, s.w[1] = hy * lx, s.w[2] = ly * hx, s.w[3] = ly * lx;
    return s;
}

/* Samples per bin along one axis: sampling_ratio, or ceil(extent / bins);
 * -1 when that is not a count we can run (NaN, infinite, above the bound). */
static int64_t ra_grid(int64_t ratio, float extent, int64_t bins) {
    if (ratio > 0) return ratio;
    double g = ceil((double)extent / (double)bins);
    if (!(g <= (double)KN_IMG_WORK_MAX)) return -1;
    return g < 1 ? 0 : (int64_t)g;
}

typedef struct {
    float x0, y0, bh, bw; /* the roi's start and bin size in pixels */
    int64_t gh, gw;       /* samples per bin */
} ra_roi;

/* The geometry of roi (x1, y1, x2, y2); 0 when its samples (times nc
 * channels and oh x ow bins) are not a count we can run. */
static int ra_geom(const float *roi, float scale, int half, int64_t oh, int64_t ow, int64_t ratio,
                   int64_t nc, ra_roi *g) {
    float off = half ? 0.5f : 0.0f;
    g->x0 = roi[0] * scale - off, g->y0 = roi[1] * scale - off;
    float rw = roi[2] * scale - off - g->x0, rh = roi[3] * scale - off - g->y0;
    if (!half) rw = fmaxf(rw, 1.0f), rh = fmaxf(rh, 1.0f);
    g->bh = rh / (float)oh, g->bw = rw / (float)ow;
    g->gh = ra_grid(ratio, rh, oh), g->gw = ra_grid(ratio, rw, ow);
    if (g->gh < 0 || g->gw < 0 || (g->gh > 0 && g->gw > KN_IMG_WORK_MAX / g->gh)) return 0;
    return g->gh * g->gw == 0 || nc * oh * ow <= KN_IMG_WORK_MAX / (g->gh * g->gw);
}

static ms_status roi_align_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *R = in[1], *B = in[2];
    if (X->dtype != RT_DT_FLOAT || X->shape.rank != 4 || R->dtype != RT_DT_FLOAT ||
        R->shape.rank != 2 || R->shape.dim[1] != 4 || B->dtype != RT_DT_INT64 ||
        B->shape.rank != 1 || B->shape.dim[0] != R->shape.dim[0])
        return KN_EINVAL(node,
                         "X %s, rois %s, batch_indices %s: want float (N, C, H, W), float "
                         "(R, 4) and int64 (R)",
                         kn__shp(&X->shape), kn__shp(&R->shape), kn__shp(&B->shape));
    int64_t oh = kn_attr_i(node, "output_height", 1), ow = kn_attr_i(node, "output_width", 1);
    int64_t ratio = kn_attr_i(node, "sampling_ratio", 0), mode = kn_attr_i(node, "mode", 0);
    int half = kn_attr_i(node, "half_pixel", 1) != 0;
    float scale = kn_attr_f(node, "spatial_scale", 1.0f);
    if (oh < 1 || ow < 1 || oh > KN_IMG_WORK_MAX / ow || ratio < 0 || ratio > KN_IMG_WORK_MAX ||
        (mode != 0 && mode != 1) || !isfinite(scale))
        return KN_EINVAL(node, "output_height %lld, output_width %lld, sampling_ratio %lld, "
                               "mode %lld, spatial_scale %g are out of range",
                         (long long)oh, (long long)ow, (long long)ratio, (long long)mode,
                         (double)scale);
    int64_t nb = X->shape.dim[0], nc = X->shape.dim[1], h = X->shape.dim[2], w = X->shape.dim[3],
            nr = R->shape.dim[0];
    rt_shape os = {.rank = 4, .dim = {nr, nc, oh, ow}};
    if (nr > 0 && nc > KN_IMG_WORK_MAX / nr / (oh * ow))
        return KN_EINVAL(node, "output %s is too large", kn__shp(&os));
    const float *xd = X->data, *rd = R->data;
    const int64_t *bd = B->data;
    /* Every roi checked before the output is made (a failed run leaves
     * none), and the samples of all of them bounded together. */
    int64_t work = 0;
    for (int64_t r = 0; r < nr; r++) {
        ra_roi g;
        if (bd[r] < 0 || bd[r] >= nb)
            return KN_EINVAL(node, "batch index %lld of roi %lld is outside 0..%lld",
                             (long long)bd[r], (long long)r, (long long)nb - 1);
        if (!ra_geom(rd + r * 4, scale, half, oh, ow, ratio, nc, &g) ||
            (work += g.gh * g.gw * nc * oh * ow) > KN_IMG_WORK_MAX)
            return KN_EINVAL(node, "roi %lld (%g, %g, %g, %g) needs too many samples",
                             (long long)r, (double)rd[r * 4], (double)rd[r * 4 + 1],
                             (double)rd[r * 4 + 2], (double)rd[r * 4 + 3]);
    }
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    float *y = out[0]->data;
    for (int64_t r = 0; r < nr; r++) {
        ra_roi g;
        ra_geom(rd + r * 4, scale, half, oh, ow, ratio, nc, &g);
        int64_t b = bd[r], gh = g.gh, gw = g.gw;
        float x0 = g.x0, y0 = g.y0, bh = g.bh, bw = g.bw;
        float count = (float)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t c = 0; c < nc; c++) {
            const float *plane = xd + (b * nc + c) * h * w;
            for (int64_t ph = 0; ph < oh; ph++) {
                if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
                for (int64_t pw = 0; pw < ow; pw++) {
                    float acc = 0;
                    int first = 1;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        float yy = y0 + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            float xx = x0 + (float)pw * bw + ((float)ix + 0.5f) * bw / (float)gw;
                            ra_sample s = ra_at(yy, xx, h, w);
                            float v[4];
                            for (int k = 0; k < 4; k++)
                                v[k] = s.w[k] == 0 ? 0 : s.w[k] * plane[s.pos[k]];
                            if (mode == 0) {
                                acc += v[0] + v[1] + v[2] + v[3];
                            } else {
                                float m = fmaxf(fmaxf(fmaxf(v[0], v[1]), v[2]), v[3]);
                                acc = first ? m : fmaxf(acc, m);
                                first = 0;
                            }
                        }
                    }
                    y[((r * nc + c) * oh + ph) * ow + pw] = mode == 0 ? acc / count : acc;
                }
            }
        }
    }
    return MS_OK;
}

/* ---- MaxUnpool ---- */

/* *off = the offset in os of flat index idx of the default shape ds (dtotal
 * elements); 0 when idx or its coordinates lie outside. */
static int mu_offset(int64_t idx, int64_t dtotal, const rt_shape *ds, const rt_shape *os,
                     int64_t *off) {
    if (idx < 0 || idx >= dtotal) return 0;
    int64_t mul = 1;
    *off = 0;
    for (int i = ds->rank - 1; i >= 0; i--) {
        int64_t c = idx % ds->dim[i];
        idx /= ds->dim[i];
        if (c >= os->dim[i]) return 0;
        *off += c * mul, mul *= os->dim[i];
    }
    return 1;
}

/* X, I and, when given, the output shape: the indices count in the default
 * output (X's spatial dims unpooled: (in - 1) * stride + kernel - pads, N and
 * C as X's); a larger output shape keeps each element at its coordinates
 * (zeros after), as ONNX's reference. */
static ms_status max_unpool_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *I = in[1], *S = node->nin > 2 ? in[2] : NULL;
    int r = X->shape.rank, nd = r - 2;
    if (!rt_dtype_is_pod(X->dtype) || I->dtype != RT_DT_INT64 || r < 3 ||
        !rt_shape_equal(&X->shape, &I->shape) ||
        (S && (S->dtype != RT_DT_INT64 || S->shape.rank != 1 || S->shape.dim[0] != r)))
        return KN_EINVAL(node,
                         "X %s (%s), indices %s (%s): want X (N, C, spatial...), int64 indices "
                         "of its shape and one int64 output dim per dim of X",
                         kn__shp(&X->shape), rt_dtype_name(X->dtype), kn__shp(&I->shape),
                         rt_dtype_name(I->dtype));
    int64_t k[RT_MAX_RANK], str[RT_MAX_RANK], pad[2 * RT_MAX_RANK];
    if (kn_attr_ilist(node, "ksize", k, RT_MAX_RANK) != nd ||
        kn_attr_ilist(node, "strides", str, RT_MAX_RANK) != nd ||
        kn_attr_ilist(node, "pads", pad, 2 * RT_MAX_RANK) != 2 * nd)
        return KN_EINVAL(node, "ksize and strides need %d values, pads %d", nd, 2 * nd);
    rt_shape ds = {.rank = r, .dim = {X->shape.dim[0], X->shape.dim[1]}}, os = {.rank = r};
    int64_t dtotal = ds.dim[0] * ds.dim[1], total = 1;
    for (int i = 0; i < nd; i++) {
        if (k[i] < 1 || k[i] > KN_IMG_WORK_MAX || str[i] < 1 || str[i] > KN_IMG_WORK_MAX ||
            pad[i] < 0 || pad[i] > KN_IMG_WORK_MAX || pad[nd + i] < 0 ||
            pad[nd + i] > KN_IMG_WORK_MAX)
            return KN_EINVAL(node, "ksize, strides, pads out of range");
        int64_t in_d = X->shape.dim[2 + i];
        ds.dim[2 + i] = in_d < 1 ? 0 : (in_d - 1) * str[i] + k[i] - pad[i] - pad[nd + i];
        if (ds.dim[2 + i] < 0 || (ds.dim[2 + i] > 0 && dtotal > KN_IMG_WORK_MAX / ds.dim[2 + i]))
            return KN_EINVAL(node, "the default output of spatial dim %d does not fit", i);
        dtotal *= ds.dim[2 + i];
    }
    for (int i = 0; i < r; i++) {
        int64_t d = S ? ((const int64_t *)S->data)[i] : ds.dim[i];
        if (d < 0 || (d > 0 && total > KN_IMG_WORK_MAX / d))
            return KN_EINVAL(node, "output_shape dim %d (%lld) is negative or too large", i,
                             (long long)d);
        os.dim[i] = d, total *= d;
    }
    const int64_t *id = I->data;
    int64_t off;
    for (int64_t e = 0; e < X->nelem; e++) /* all checked before the output is made */
        if (!mu_offset(id[e], dtotal, &ds, &os, &off))
            return KN_EINVAL(node, "index %lld is outside the output %s", (long long)id[e],
                             kn__shp(&os));
    if ((st = kn__output(ctx, node, 0, X->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(X->dtype);
    if (total > 0) memset(out[0]->data, 0, (size_t)total * es);
    for (int64_t e = 0; e < X->nelem; e++) {
        mu_offset(id[e], dtotal, &ds, &os, &off);
        memcpy((char *)out[0]->data + (size_t)off * es, (const char *)X->data + (size_t)e * es,
               es);
    }
    return MS_OK;
}

/* ---- Col2Im ---- */

/* attr key's want values into v (absent: dflt each); 0 when it has another count. */
static int c2i_list(const kn_node *node, const char *key, int want, int64_t dflt, int64_t *v) {
    int64_t tmp[2 * KN_IMG_DIMS + 1];
    int got = kn_attr_ilist(node, key, tmp, 2 * KN_IMG_DIMS + 1);
    if (got <= 0) {
        for (int i = 0; i < want; i++)
            v[i] = dflt;
        return 1;
    }
    if (got != want) return 0;
    memcpy(v, tmp, (size_t)want * sizeof(int64_t));
    return 1;
}

static ms_status col2im_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *IS = in[1], *BS = in[2];
    int nd = IS->shape.rank == 1 ? (int)IS->shape.dim[0] : -1;
    if (X->dtype != RT_DT_FLOAT || X->shape.rank != 3 || IS->dtype != RT_DT_INT64 ||
        BS->dtype != RT_DT_INT64 || nd < 1 || nd > KN_IMG_DIMS || BS->shape.rank != 1 ||
        BS->shape.dim[0] != nd)
        return KN_EINVAL(node,
                         "input %s, image_shape %s, block_shape %s: want float (N, C*K, L) and "
                         "two int64 vectors of 1 to %d dims, the same length",
                         kn__shp(&X->shape), kn__shp(&IS->shape), kn__shp(&BS->shape),
                         KN_IMG_DIMS);
    int64_t img[KN_IMG_DIMS], blk[KN_IMG_DIMS], dil[KN_IMG_DIMS], str[KN_IMG_DIMS],
        pad[2 * KN_IMG_DIMS], nl[KN_IMG_DIMS];
    if (!c2i_list(node, "dilations", nd, 1, dil) || !c2i_list(node, "strides", nd, 1, str) ||
        !c2i_list(node, "pads", 2 * nd, 0, pad))
        return KN_EINVAL(node, "dilations and strides need %d values, pads %d", nd, 2 * nd);
    int64_t kprod = 1, lprod = 1, iprod = 1;
    for (int i = 0; i < nd; i++) {
        img[i] = ((const int64_t *)IS->data)[i], blk[i] = ((const int64_t *)BS->data)[i];
        if (img[i] < 0 || img[i] > KN_IMG_WORK_MAX || blk[i] < 1 || blk[i] > KN_IMG_WORK_MAX ||
            dil[i] < 1 || dil[i] > KN_IMG_WORK_MAX || str[i] < 1 || str[i] > KN_IMG_WORK_MAX ||
            pad[i] < 0 || pad[i] > KN_IMG_WORK_MAX || pad[nd + i] < 0 ||
            pad[nd + i] > KN_IMG_WORK_MAX)
            return KN_EINVAL(node, "dim %d: image %lld, block %lld, dilation %lld, stride %lld, "
                                   "pads %lld %lld out of range",
                             i, (long long)img[i], (long long)blk[i], (long long)dil[i],
                             (long long)str[i], (long long)pad[i], (long long)pad[nd + i]);
        int64_t span = img[i] + pad[i] + pad[nd + i] - (dil[i] * (blk[i] - 1) + 1);
        nl[i] = span < 0 ? 0 : span / str[i] + 1;
        if (kprod > KN_IMG_WORK_MAX / blk[i] || (nl[i] > 0 && lprod > KN_IMG_WORK_MAX / nl[i]) ||
            (img[i] > 0 && iprod > KN_IMG_WORK_MAX / img[i]))
            return KN_EINVAL(node, "the image or block shape is too large");
        kprod *= blk[i], lprod *= nl[i], iprod *= img[i];
    }
    int64_t n = X->shape.dim[0], ck = X->shape.dim[1], l = X->shape.dim[2];
    if (ck % kprod != 0 || l != lprod)
        return KN_EINVAL(node, "input %s: dim 1 must be C * %lld (the block's size) and dim 2 "
                               "%lld (the blocks that fit)",
                         kn__shp(&X->shape), (long long)kprod, (long long)lprod);
    int64_t c = ck / kprod;
    rt_shape os = {.rank = 2 + nd, .dim = {n, c}};
    for (int i = 0; i < nd; i++)
        os.dim[2 + i] = img[i];
    if (n * c > 0 && iprod > KN_IMG_WORK_MAX / (n * c))
        return KN_EINVAL(node, "output %s is too large", kn__shp(&os));
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    float *y = out[0]->data;
    const float *x = X->data;
    if (n * c * iprod > 0) memset(y, 0, (size_t)(n * c * iprod) * sizeof(float));
    for (int64_t b = 0; b < n * c; b++)
        for (int64_t k = 0; k < kprod; k++) {
            if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
            int64_t kp[KN_IMG_DIMS], rem = k;
            for (int i = nd - 1; i >= 0; i--)
                kp[i] = rem % blk[i], rem /= blk[i];
            const float *col = x + (b * kprod + k) * l;
            for (int64_t j = 0; j < l; j++) {
                int64_t off = 0, jr = j, lp[KN_IMG_DIMS];
                for (int i = nd - 1; i >= 0; i--)
                    lp[i] = jr % nl[i], jr /= nl[i];
                int inside = 1;
                for (int i = 0; i < nd && inside; i++) {
                    int64_t p = lp[i] * str[i] - pad[i] + kp[i] * dil[i];
                    inside = p >= 0 && p < img[i];
                    off = off * img[i] + p;
                }
                if (inside) y[b * iprod + off] += col[j];
            }
        }
    return MS_OK;
}

/* ---- DeformConv ---- */

/* X plane (h x w) at (y, x), bilinear with zeros outside (per corner). */
static float dc_sample(const float *p, int64_t h, int64_t w, float y, float x) {
    if (!(y > -1.0f && y < (float)h && x > -1.0f && x < (float)w)) return 0;
    float fy = floorf(y), fx = floorf(x);
    int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    float ly = y - fy, lx = x - fx, v = 0;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            int64_t yy = y0 + dy, xx = x0 + dx;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            v += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * p[yy * w + xx];
        }
    return v;
}

/* X (N, C, H, W), W (M, C / group, kH, kW), offset (N, G * 2 * kH * kW, oH,
 * oW), B (M), mask (N, G * kH * kW, oH, oW) (B and mask: any empty tensor
 * for none) -> (N, M, oH, oW). attrs strides, pads (4), dilations, group,
 * offset_group (G). */
static ms_status deform_conv_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 5);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *W = in[1], *O = in[2], *B = in[3], *M = in[4];
    int ok = X->dtype == RT_DT_FLOAT && W->dtype == RT_DT_FLOAT && O->dtype == RT_DT_FLOAT &&
             B->dtype == RT_DT_FLOAT && M->dtype == RT_DT_FLOAT && X->shape.rank == 4 &&
             W->shape.rank == 4 && O->shape.rank == 4;
    int64_t str[2] = {1, 1}, pad[4] = {0, 0, 0, 0}, dil[2] = {1, 1};
    int64_t grp = kn_attr_i(node, "group", 1), og = kn_attr_i(node, "offset_group", 1);
    ok = ok && kn_attr_ilist(node, "strides", str, 2) == 2 &&
         kn_attr_ilist(node, "pads", pad, 4) == 4 && kn_attr_ilist(node, "dilations", dil, 2) == 2;
    int64_t n = ok ? X->shape.dim[0] : 0, c = ok ? X->shape.dim[1] : 0, h = ok ? X->shape.dim[2] : 0,
            w = ok ? X->shape.dim[3] : 0, m = ok ? W->shape.dim[0] : 0,
            kh = ok ? W->shape.dim[2] : 0, kw = ok ? W->shape.dim[3] : 0, oh = 0, ow = 0;
    for (int i = 0; ok && i < 2; i++)
        ok = str[i] >= 1 && str[i] <= KN_IMG_WORK_MAX && dil[i] >= 1 &&
             dil[i] <= KN_IMG_WORK_MAX && pad[i] >= 0 && pad[i] <= KN_IMG_WORK_MAX &&
             pad[2 + i] >= 0 && pad[2 + i] <= KN_IMG_WORK_MAX;
    ok = ok && grp >= 1 && og >= 1 && c % grp == 0 && c % og == 0 && m % grp == 0 &&
         W->shape.dim[1] == c / grp && kh >= 1 && kw >= 1;
    if (ok) {
        int64_t sh = h + pad[0] + pad[2] - (dil[0] * (kh - 1) + 1);
        int64_t sw = w + pad[1] + pad[3] - (dil[1] * (kw - 1) + 1);
        oh = sh < 0 ? 0 : sh / str[0] + 1, ow = sw < 0 ? 0 : sw / str[1] + 1;
        rt_shape os = {.rank = 4, .dim = {n, og * 2 * kh * kw, oh, ow}};
        ok = rt_shape_equal(&O->shape, &os) && (B->nelem == 0 || (B->shape.rank == 1 &&
                                                                 B->shape.dim[0] == m));
        os.dim[1] = og * kh * kw;
        ok = ok && (M->nelem == 0 || rt_shape_equal(&M->shape, &os));
    }
    if (!ok)
        return KN_EINVAL(node,
                         "X %s, W %s, offset %s, B %s, mask %s do not fit (want X (N, C, H, W), "
                         "W (M, C/group, kH, kW), offset (N, offset_group*2*kH*kW, oH, oW), B "
                         "(M), mask (N, offset_group*kH*kW, oH, oW)) or the attributes are out "
                         "of range",
                         kn__shp(&X->shape), kn__shp(&W->shape), kn__shp(&O->shape),
                         kn__shp(&B->shape), kn__shp(&M->shape));
    int64_t k = kh * kw, cg = c / grp, mg = m / grp;
    /* multiply-adds: every output element sums C/group * k products */
    int64_t outs = n * oh * ow; /* bounded by offset's size */
    if (outs > 0 && m > 0 && (m > KN_IMG_WORK_MAX / outs || cg * k > KN_IMG_WORK_MAX / (outs * m)))
        return KN_EINVAL(node, "the convolution is too large (more than 2^36 multiply-adds)");
    rt_shape os = {.rank = 4, .dim = {n, m, oh, ow}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    const float *xd = X->data, *wd = W->data, *od = O->data, *bd = B->data, *md = M->data;
    float *y = out[0]->data;
    int64_t plane = oh * ow, cpo = c / og;
    for (int64_t b = 0; b < n; b++)
        for (int64_t oc = 0; oc < m; oc++) {
            int64_t g = oc / mg;
            for (int64_t p = 0; p < plane; p++) {
                int64_t py = p / ow, px = p % ow;
                if (px == 0 && kn_ctx_cancelled(ctx))
                    return kn__errf(MS_ECANCELED, node, "cancelled");
                float acc = B->nelem ? bd[oc] : 0;
                for (int64_t ci = 0; ci < cg; ci++) {
                    int64_t ch = g * cg + ci, o = ch / cpo;
                    const float *xp = xd + (b * c + ch) * h * w;
                    for (int64_t t = 0; t < k; t++) {
                        int64_t i = t / kw, j = t % kw;
                        const float *off = od + ((b * og + o) * 2 * k + 2 * t) * plane + p;
                        float yy = (float)(py * str[0] - pad[0] + i * dil[0]) + off[0];
                        float xx = (float)(px * str[1] - pad[1] + j * dil[1]) + off[plane];
                        float v = dc_sample(xp, h, w, yy, xx);
                        if (M->nelem) v *= md[((b * og + o) * k + t) * plane + p];
                        acc += v * wd[(oc * cg + ci) * k + t];
                    }
                }
                y[(b * m + oc) * plane + p] = acc;
            }
        }
    return MS_OK;
}

const kn_kernel kn_cpu_onnx_img_kernels[] = {
    {.op = "OnnxDeformConv", .compute = deform_conv_compute},
    {.op = "OnnxRoiAlign", .compute = roi_align_compute},
    {.op = "OnnxMaxUnpool", .compute = max_unpool_compute},
    {.op = "OnnxCol2Im", .compute = col2im_compute},
    {.op = NULL},
};
