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
