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

const kn_kernel kn_cpu_image_kernels[] = {
    {.op = "DcmWindow", .prepare = win_prepare, .compute = win_compute, .release = free},
    {.op = NULL},
};
