/* kn_cpu_dcmxform.c - _DcmPixelTransform on the CPU (kn_dicom_xform.h): the
 * device half of a split DcmDecodeWindow, run on the host. It repeats the
 * float32 expressions of runtime/dicom/dcm_fused.c in the same order (HU,
 * window, horizontal then vertical blend), so the split graph gives the bytes
 * of the fused op; check_dicom_fused compares them on real files. It is the
 * CPU kernel the CUDA backend falls back on, and the reference its device
 * kernel is checked against (check_cuda_backend). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_ctx.h"
#include "kn_dicom_xform.h"

/* Two float32 roundings per step, never a fused multiply-add. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static ms_status xf_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    kn_dcm_xform_attrs *a = calloc(1, sizeof(*a));
    if (a == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = kn_dcm_xform_attrs_read(n, a);
    if (st != MS_OK) {
        free(a);
        return st;
    }
    *state = a;
    return MS_OK;
}

static inline float win1(float x, float lo, float hi, float range) {
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    return (x - lo) / range;
}

typedef struct xf_job {
    const kn_dcm_xform_geom *g;
    const kn_dcm_xform_file *files;
    const void *raw;
    float *y;
    ms_status *st;
} xf_job;

/* The windowed (H, W, C) plane of file b into p. */
static void plane(const xf_job *j, int64_t b, float *restrict p) {
    const kn_dcm_xform_geom *g = j->g;
    const kn_dcm_xform_file *f = &j->files[b];
    const uint32_t H = g->H, W = g->W, C = g->C;
    for (uint32_t r = 0; r < H; r++) {
        float *row = p + (size_t)r * W * C;
        uint32_t w = r < f->rows ? f->cols : 0;
        if (g->raw_float) {
            const float *src = (const float *)j->raw + (((uint64_t)b * H + r) * W) * C;
            for (size_t i = 0; i < (size_t)w * C; i++)
                row[i] = win1(src[i], g->lo, g->hi, g->range);
        } else {
            const uint16_t *src = (const uint16_t *)j->raw + ((uint64_t)b * H + r) * W;
            for (uint32_t x = 0; x < w; x++) {
                int32_t v = (int32_t)((src[x] & f->mask) ^ f->sign) - (int32_t)f->sign;
                float prod = (float)v * f->slope;
                row[x] = win1(prod + f->intercept, g->lo, g->hi, g->range);
            }
        }
        for (size_t i = (size_t)w * C; i < (size_t)W * C; i++)
            row[i] = g->wpad;
    }
}

static void put(const kn_dcm_xform_geom *g, float *base, uint32_t y, uint32_t x, uint32_t k,
                float v) {
    if (g->nchw)
        base[((uint64_t)k * g->oh + y) * g->ow + x] = v;
    else
        base[((uint64_t)y * g->ow + x) * g->C + k] = v;
}

static ms_status one(const xf_job *j, int64_t b) {
    const kn_dcm_xform_geom *g = j->g;
    const uint32_t W = g->W, C = g->C, oh = g->oh, ow = g->ow;
    float *p = malloc(sizeof(float) * (size_t)g->H * W * C + 3 * sizeof(float) * ow + 16);
    if (p == NULL)
        return ms_errf(MS_ENOMEM, "out of memory for the pixels of dicom[%lld]", (long long)b);
    plane(j, b, p);
    float *base = j->y + (uint64_t)b * oh * ow * C;
    if (!g->resize) {
        for (uint32_t y = 0; y < oh; y++)
            for (uint32_t x = 0; x < ow; x++)
                for (uint32_t k = 0; k < C; k++)
                    put(g, base, y, x, k, p[((size_t)y * W + x) * C + k]);
        free(p);
        return MS_OK;
    }
    const kn_dcm_xform_file *f = &j->files[b];
    const uint32_t ih = g->masked ? f->rows : g->H, iw = g->masked ? f->cols : g->W;
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    int32_t *x0 = (int32_t *)(p + (size_t)g->H * W * C), *x1 = x0 + ow;
    float *dx = (float *)(x1 + ow);
    for (uint32_t x = 0; x < ow; x++) {
        float fx = ((float)x + 0.5f) * sx - 0.5f, x0f = floorf(fx);
        int64_t a = (int64_t)x0f, c1 = a + 1;
        a = a < 0 ? 0 : a > (int64_t)iw - 1 ? (int64_t)iw - 1 : a;
        c1 = c1 < 0 ? 0 : c1 > (int64_t)iw - 1 ? (int64_t)iw - 1 : c1;
        x0[x] = (int32_t)a;
        x1[x] = (int32_t)c1;
        dx[x] = fx - x0f;
    }
    for (uint32_t y = 0; y < oh; y++) {
        float fy = ((float)y + 0.5f) * sy - 0.5f, y0f = floorf(fy), dy = fy - y0f;
        int64_t r0 = (int64_t)y0f, r1 = r0 + 1;
        r0 = r0 < 0 ? 0 : r0 > (int64_t)ih - 1 ? (int64_t)ih - 1 : r0;
        r1 = r1 < 0 ? 0 : r1 > (int64_t)ih - 1 ? (int64_t)ih - 1 : r1;
        const float *t = p + (size_t)r0 * W * C, *bo = p + (size_t)r1 * W * C;
        for (uint32_t x = 0; x < ow; x++)
            for (uint32_t k = 0; k < C; k++) {
                float a = t[(size_t)x0[x] * C + k], c = t[(size_t)x1[x] * C + k];
                float top = a + (c - a) * dx[x];
                a = bo[(size_t)x0[x] * C + k], c = bo[(size_t)x1[x] * C + k];
                float bot = a + (c - a) * dx[x];
                put(g, base, y, x, k, top + (bot - top) * dy);
            }
    }
    free(p);
    return MS_OK;
}

static void range_files(void *arg, int64_t b, int64_t e) {
    xf_job *j = arg;
    for (int64_t i = b; i < e; i++)
        j->st[i] = one(j, i);
}

static ms_status xf_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    const kn_dcm_xform_attrs *a = state;
    if (a == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    const kn_dcm_xform_file *files = (const kn_dcm_xform_file *)in[1]->data;
    kn_dcm_xform_geom g;
    ms_status st =
        kn_dcm_xform_geometry(n, a, in[0], in[1], in[1]->dtype == RT_DT_UINT8 ? files : NULL, &g);
    if (st != MS_OK) return st;
    rt_shape sh = g.nchw ? rt_shape_make(4, (int64_t[]){g.n, g.C, g.oh, g.ow})
                         : rt_shape_make(4, (int64_t[]){g.n, g.oh, g.ow, g.C});
    if ((st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0])) != MS_OK) return st;
    ms_status *sts = calloc((size_t)g.n + 1, sizeof(*sts));
    if (sts == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    xf_job j = {.g = &g, .files = files, .raw = in[0]->data, .y = rt_tensor_f32(out[0]), .st = sts};
    kn_ctx_parallel_for(ctx, g.n, 1, range_files, &j);
    for (uint32_t i = 0; i < g.n && st == MS_OK; i++)
        st = sts[i];
    free(sts);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

const kn_kernel kn_cpu_dcmxform_kernels[] = {
    {.op = KN_DCM_XFORM_OP, .prepare = xf_prepare, .compute = xf_compute, .release = free},
    {.op = NULL},
};
