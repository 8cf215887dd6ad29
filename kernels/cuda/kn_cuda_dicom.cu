/* kn_cuda_dicom.cu - the fused DICOM kernel (kn_cuda_dicom.cuh). */
#include <cuda_runtime.h>

#include "kn_cuda_dicom.cuh"
#include "kn_cuda_rt.cuh"

struct dicom_args {
    kn_cuda_pix pix;
    uint32_t mask, sign;
    float slope, intercept;
    int window;
    float lo, hi, range;
    uint32_t ih, iw, oh, ow, channels;
    int nchw;
    float sy, sx;
};

/* HU of stored value i of a frame: the CPU's hu_u16 / hu_s16 / uint8 path. */
__device__ __forceinline__ float hu_at(const dicom_args &a, const void *frame, uint64_t i) {
    int32_t sv;
    if (a.pix == KN_CUDA_PIX_U8) {
        sv = (int32_t)(((const uint8_t *)frame)[i] & a.mask);
    } else {
        uint32_t w = ((const uint16_t *)frame)[i];
        if (a.pix == KN_CUDA_PIX_S16)
            sv = (int32_t)((w & a.mask) ^ a.sign) - (int32_t)a.sign;
        else
            sv = (int32_t)(w & a.mask);
    }
    return __fadd_rn(__fmul_rn((float)sv, a.slope), a.intercept);
}

__device__ __forceinline__ int64_t clampi(int64_t v, int64_t hi) {
    return v < 0 ? 0 : (v > hi ? hi : v);
}

__global__ void dicom_fused_kernel(const uint8_t *__restrict__ raw, uint32_t n, dicom_args a,
                                   float *__restrict__ out) {
    const uint64_t plane = (uint64_t)a.oh * a.ow;
    const uint64_t total = plane * n;
    const uint64_t in_plane = (uint64_t)a.ih * a.iw;
    const uint64_t elt = a.pix == KN_CUDA_PIX_U8 ? 1 : 2;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t img = t / plane, o = t - img * plane;
        const uint32_t y = (uint32_t)(o / a.ow), x = (uint32_t)(o - (uint64_t)y * a.ow);
        const void *frame = raw + img * in_plane * elt;
        float v;
        if (a.oh == a.ih && a.ow == a.iw) {
            v = hu_at(a, frame, o);
        } else {
            /* dcm_resize_bilinear, term by term */
            float fy = __fsub_rn(__fmul_rn(__fadd_rn((float)y, 0.5f), a.sy), 0.5f);
            float y0f = floorf(fy);
            float dy = __fsub_rn(fy, y0f);
            int64_t y0 = (int64_t)y0f, y1 = y0 + 1;
            y0 = clampi(y0, (int64_t)a.ih - 1);
            y1 = clampi(y1, (int64_t)a.ih - 1);
            float fx = __fsub_rn(__fmul_rn(__fadd_rn((float)x, 0.5f), a.sx), 0.5f);
            float x0f = floorf(fx);
            float dx = __fsub_rn(fx, x0f);
            int64_t x0 = (int64_t)x0f, x1 = x0 + 1;
            x0 = clampi(x0, (int64_t)a.iw - 1);
            x1 = clampi(x1, (int64_t)a.iw - 1);
            float tl = hu_at(a, frame, (uint64_t)y0 * a.iw + (uint64_t)x0);
            float tr = hu_at(a, frame, (uint64_t)y0 * a.iw + (uint64_t)x1);
            float bl = hu_at(a, frame, (uint64_t)y1 * a.iw + (uint64_t)x0);
            float br = hu_at(a, frame, (uint64_t)y1 * a.iw + (uint64_t)x1);
            float top = __fadd_rn(tl, __fmul_rn(__fsub_rn(tr, tl), dx));
            float bot = __fadd_rn(bl, __fmul_rn(__fsub_rn(br, bl), dx));
            v = __fadd_rn(top, __fmul_rn(__fsub_rn(bot, top), dy));
        }
        if (a.window) {
            /* window_loop: x < lo -> lo, then x > hi -> hi (NaN passes), then scale */
            if (v < a.lo) v = a.lo;
            if (v > a.hi) v = a.hi;
            v = __fdiv_rn(__fsub_rn(v, a.lo), a.range);
        }
        if (a.nchw) {
            float *dst = out + img * plane * a.channels + o;
            for (uint32_t k = 0; k < a.channels; k++) dst[(uint64_t)k * plane] = v;
        } else {
            float *dst = out + (img * plane + o) * a.channels;
            for (uint32_t k = 0; k < a.channels; k++) dst[k] = v;
        }
    }
}

extern "C" ms_status kn_cuda_dicom_check(const kn_cuda_dicom_params *p) {
    if (p->pix != KN_CUDA_PIX_U8 && p->pix != KN_CUDA_PIX_U16 && p->pix != KN_CUDA_PIX_S16)
        return ms_errf(MS_EINVAL, "fused DICOM kernel: unknown pixel kind %d", (int)p->pix);
    uint32_t maxbits = p->pix == KN_CUDA_PIX_U8 ? 8 : 16;
    if (p->bits_stored < 1 || p->bits_stored > maxbits)
        return ms_errf(MS_EINVAL, "fused DICOM kernel: BitsStored %u for %u-bit pixels",
                       p->bits_stored, maxbits);
    if (p->ih == 0 || p->iw == 0 || p->oh == 0 || p->ow == 0)
        return ms_errf(MS_EINVAL, "fused DICOM kernel: empty frame (%ux%u -> %ux%u)", p->ih, p->iw,
                       p->oh, p->ow);
    if (p->channels != 1 && p->channels != 3)
        return ms_errf(MS_EINVAL, "fused DICOM kernel: %u output channels (1 or 3)", p->channels);
    if (p->window && !(p->hi - p->lo > 0))
        return ms_errf(MS_EINVAL, "fused DICOM kernel: empty window [%g, %g]", (double)p->lo,
                       (double)p->hi);
    return MS_OK;
}

extern "C" uint64_t kn_cuda_dicom_bytes(uint32_t n, const kn_cuda_dicom_params *p) {
    uint64_t elt = p->pix == KN_CUDA_PIX_U8 ? 1 : 2;
    return (uint64_t)n * ((uint64_t)p->ih * p->iw * elt + (uint64_t)p->oh * p->ow * p->channels * 4);
}

extern "C" ms_status kn_cuda_dicom_fused(const void *d_raw, uint32_t n,
                                         const kn_cuda_dicom_params *p, float *d_out,
                                         void *stream) {
    ms_status st = kn_cuda_dicom_check(p);
    if (st != MS_OK || n == 0) return st;
    dicom_args a;
    a.pix = p->pix;
    a.mask = p->bits_stored >= 16 ? 0xFFFFu : ((1u << p->bits_stored) - 1u);
    a.sign = p->pix == KN_CUDA_PIX_S16 ? (1u << (p->bits_stored - 1)) : 0u;
    a.slope = p->slope;
    a.intercept = p->intercept;
    a.window = p->window;
    a.lo = p->lo;
    a.hi = p->hi;
    a.range = p->hi - p->lo; /* host float32 subtraction, as dcm_window */
    a.ih = p->ih;
    a.iw = p->iw;
    a.oh = p->oh;
    a.ow = p->ow;
    a.channels = p->channels;
    a.nchw = p->nchw;
    a.sy = (float)p->ih / (float)p->oh;
    a.sx = (float)p->iw / (float)p->ow;
    const uint64_t total = (uint64_t)p->oh * p->ow * n;
    const int threads = 256;
    uint64_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535ull * 16) blocks = 65535ull * 16; /* grid-stride loop covers the rest */
    dicom_fused_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
        (const uint8_t *)d_raw, n, a, d_out);
    return kn_cuda_check_launch("DcmDecodeHU (cuda fused DICOM kernel)");
}

/* ---- _DcmPixelTransform (kn_dicom_xform.h) ---- */

/* Windowed value of (r, c, k) of file b's padded plane: kn_cpu_dcmxform.c's
 * plane(). */
__device__ __forceinline__ float xf_pix(const kn_dcm_xform_geom &g, const void *raw,
                                        const kn_dcm_xform_file &f, uint64_t b, uint32_t r,
                                        uint32_t c, uint32_t k) {
    if (r >= f.rows || c >= f.cols || r >= g.H || c >= g.W) return g.wpad; /* bounds-safe */
    float x;
    if (g.raw_float) {
        x = ((const float *)raw)[(((uint64_t)b * g.H + r) * g.W + c) * g.C + k];
    } else {
        uint32_t w = ((const uint16_t *)raw)[((uint64_t)b * g.H + r) * g.W + c];
        int32_t v = (int32_t)((w & f.mask) ^ f.sign) - (int32_t)f.sign;
        x = __fadd_rn(__fmul_rn((float)v, f.slope), f.intercept);
    }
    if (x < g.lo) x = g.lo;
    if (x > g.hi) x = g.hi;
    return __fdiv_rn(__fsub_rn(x, g.lo), g.range);
}

__device__ __forceinline__ int64_t xf_clamp(int64_t v, int64_t hi) {
    return v < 0 ? 0 : (v > hi ? hi : v);
}

__global__ void dicom_xform_kernel(const void *__restrict__ raw,
                                   const kn_dcm_xform_file *__restrict__ files,
                                   kn_dcm_xform_geom g, float *__restrict__ out) {
    const uint64_t plane = (uint64_t)g.oh * g.ow;
    const uint64_t per = plane * g.C;
    const uint64_t total = per * g.n;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * blockDim.x) {
        /* t enumerates (b, y, x, k) in NHWC order */
        const uint64_t b = t / per;
        uint64_t o = t - b * per;
        const uint32_t k = (uint32_t)(o % g.C);
        o /= g.C;
        const uint32_t y = (uint32_t)(o / g.ow), x = (uint32_t)(o - (uint64_t)y * g.ow);
        const kn_dcm_xform_file f = files[b];
        float v;
        if (!g.resize) {
            v = xf_pix(g, raw, f, b, y, x, k);
        } else {
            const uint32_t ih = g.masked ? f.rows : g.H, iw = g.masked ? f.cols : g.W;
            const float sy = __fdiv_rn((float)ih, (float)g.oh);
            const float sx = __fdiv_rn((float)iw, (float)g.ow);
            float fy = __fsub_rn(__fmul_rn(__fadd_rn((float)y, 0.5f), sy), 0.5f);
            float y0f = floorf(fy), dy = __fsub_rn(fy, y0f);
            int64_t r0 = (int64_t)y0f, r1 = r0 + 1;
            r0 = xf_clamp(r0, (int64_t)ih - 1);
            r1 = xf_clamp(r1, (int64_t)ih - 1);
            float fx = __fsub_rn(__fmul_rn(__fadd_rn((float)x, 0.5f), sx), 0.5f);
            float x0f = floorf(fx), dx = __fsub_rn(fx, x0f);
            int64_t c0 = (int64_t)x0f, c1 = c0 + 1;
            c0 = xf_clamp(c0, (int64_t)iw - 1);
            c1 = xf_clamp(c1, (int64_t)iw - 1);
            float a = xf_pix(g, raw, f, b, (uint32_t)r0, (uint32_t)c0, k);
            float c = xf_pix(g, raw, f, b, (uint32_t)r0, (uint32_t)c1, k);
            float top = __fadd_rn(a, __fmul_rn(__fsub_rn(c, a), dx));
            a = xf_pix(g, raw, f, b, (uint32_t)r1, (uint32_t)c0, k);
            c = xf_pix(g, raw, f, b, (uint32_t)r1, (uint32_t)c1, k);
            float bot = __fadd_rn(a, __fmul_rn(__fsub_rn(c, a), dx));
            v = __fadd_rn(top, __fmul_rn(__fsub_rn(bot, top), dy));
        }
        if (g.nchw)
            out[((b * g.C + k) * g.oh + y) * g.ow + x] = v;
        else
            out[t] = v;
    }
}

extern "C" ms_status kn_cuda_dicom_xform(const void *d_raw, const kn_dcm_xform_file *d_files,
                                         const kn_dcm_xform_geom *g, float *d_out, void *stream) {
    const uint64_t total = (uint64_t)g->n * g->oh * g->ow * g->C;
    if (total == 0) return MS_OK;
    const int threads = 256;
    uint64_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535ull * 16) blocks = 65535ull * 16; /* grid-stride loop covers the rest */
    dicom_xform_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(d_raw, d_files, *g,
                                                                              d_out);
    return kn_cuda_check_launch("_DcmPixelTransform (cuda)");
}
