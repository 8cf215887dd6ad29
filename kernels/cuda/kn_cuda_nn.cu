/* kn_cuda_nn.cu - pooling, spatial mean, concat (kn_cuda_nn.cuh). */
#include <cuda_runtime.h>

#include <float.h>
#include <math.h>

#include "kn_cuda_nn.cuh"
#include "kn_cuda_rt.cuh"

static const int kThreads = 256;

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b > 65535ll * 16) b = 65535ll * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

template <bool kMax>
__global__ void pool_kernel(kn_cuda_pool_shape s, const float *__restrict__ x, float *__restrict__ y) {
    const int64_t total = (int64_t)s.n * s.oh * s.ow * s.c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int ch = (int)(t % s.c);
        int64_t r = t / s.c;
        const int ox = (int)(r % s.ow);
        r /= s.ow;
        const int oy = (int)(r % s.oh);
        const int b = (int)(r / s.oh);
        const int y0 = oy * s.sh - s.pad_top, x0 = ox * s.sw - s.pad_left;
        float acc = kMax ? -INFINITY : 0.f; /* a window of padding only: -inf, as the CPU */
        bool any = false;
        int count = 0;
        for (int ky = 0; ky < s.kh; ky++) {
            const int iy = y0 + ky;
            if (iy < 0 || iy >= s.h) continue;
            for (int kx = 0; kx < s.kw; kx++) {
                const int ix = x0 + kx;
                if (ix < 0 || ix >= s.w) continue;
                const float v = x[(((int64_t)b * s.h + iy) * s.w + ix) * s.c + ch];
                if (kMax) {
                    if (!any || v > acc || v != v) acc = v; /* NaN propagates */
                } else {
                    acc = __fadd_rn(acc, v);
                }
                any = true;
                count++;
            }
        }
        y[t] = kMax ? acc : (count ? __fdiv_rn(acc, (float)count) : 0.f);
    }
}

static ms_status check_pool(const kn_cuda_pool_shape *s, const char *op) {
    if (s->n <= 0 || s->h <= 0 || s->w <= 0 || s->c <= 0 || s->kh <= 0 || s->kw <= 0 ||
        s->sh <= 0 || s->sw <= 0 || s->oh <= 0 || s->ow <= 0 || s->pad_top < 0 || s->pad_left < 0)
        return ms_errf(MS_EINVAL, "%s (cuda): bad shape", op);
    return MS_OK;
}

extern "C" ms_status kn_cuda_maxpool(const kn_cuda_pool_shape *s, const float *x, float *y,
                                     void *stream) {
    ms_status st = check_pool(s, "MaxPool");
    if (st != MS_OK) return st;
    pool_kernel<true><<<grid_for((int64_t)s->n * s->oh * s->ow * s->c), kThreads, 0,
                        (cudaStream_t)stream>>>(*s, x, y);
    return kn_cuda_check_launch("MaxPool (cuda)");
}

extern "C" ms_status kn_cuda_avgpool(const kn_cuda_pool_shape *s, const float *x, float *y,
                                     void *stream) {
    ms_status st = check_pool(s, "AvgPool");
    if (st != MS_OK) return st;
    pool_kernel<false><<<grid_for((int64_t)s->n * s->oh * s->ow * s->c), kThreads, 0,
                         (cudaStream_t)stream>>>(*s, x, y);
    return kn_cuda_check_launch("AvgPool (cuda)");
}

/* One thread per (n, c): walks the plane in row order (coalesced across c). */
__global__ void mean_kernel(const float *__restrict__ x, int n, int hw, int c,
                            float *__restrict__ y) {
    const int64_t total = (int64_t)n * c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = t / c, ch = t % c;
        const float *p = x + b * (int64_t)hw * c + ch;
        float acc = 0.f;
        for (int i = 0; i < hw; i++) acc = __fadd_rn(acc, p[(int64_t)i * c]);
        y[t] = __fdiv_rn(acc, (float)hw);
    }
}

extern "C" ms_status kn_cuda_spatial_mean(const float *x, int n, int hw, int c, float *y,
                                          void *stream) {
    if (n <= 0 || hw <= 0 || c <= 0)
        return ms_errf(MS_EINVAL, "Mean (cuda): bad shape %dx%dx%d", n, hw, c);
    mean_kernel<<<grid_for((int64_t)n * c), kThreads, 0, (cudaStream_t)stream>>>(x, n, hw, c, y);
    return kn_cuda_check_launch("Mean (cuda)");
}

struct concat_args {
    const float *src[64];
    int64_t inner[64];
    int64_t start[65];
    int k;
};

__global__ void concat_kernel(concat_args a, int64_t outer, float *__restrict__ y) {
    const int64_t row = a.start[a.k], total = outer * row;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = t / row, j = t % row;
        int i = 0;
        while (i + 1 < a.k && j >= a.start[i + 1]) i++;
        y[t] = a.src[i][o * a.inner[i] + (j - a.start[i])];
    }
}

extern "C" ms_status kn_cuda_concat(const float *const *srcs, const int64_t *inner, int k,
                                    int64_t outer, float *y, void *stream) {
    if (k < 1 || k > 64 || outer < 0)
        return ms_errf(MS_EINVAL, "ConcatV2 (cuda): %d inputs (1..64), outer %lld", k,
                       (long long)outer);
    concat_args a;
    a.k = k;
    a.start[0] = 0;
    for (int i = 0; i < k; i++) {
        if (inner[i] < 0) return ms_errf(MS_EINVAL, "ConcatV2 (cuda): input %d has size %lld", i, (long long)inner[i]);
        a.src[i] = srcs[i];
        a.inner[i] = inner[i];
        a.start[i + 1] = a.start[i] + inner[i];
    }
    if (outer == 0 || a.start[k] == 0) return MS_OK;
    concat_kernel<<<grid_for(outer * a.start[k]), kThreads, 0, (cudaStream_t)stream>>>(a, outer, y);
    return kn_cuda_check_launch("ConcatV2 (cuda)");
}

/* kernels/cpu/kn_cpu_nn.c: bilinear_weights, then bilinear_f32_rows. */
__device__ __forceinline__ void lerp_at(int64_t i, int64_t in, float scale, int half_pixel,
                                        int64_t *lo, int64_t *hi, float *lerp) {
    float v = half_pixel ? __fsub_rn(__fmul_rn(__fadd_rn((float)i, 0.5f), scale), 0.5f)
                         : __fmul_rn((float)i, scale);
    float fl = floorf(v);
    int64_t l = (int64_t)fl, h = (int64_t)ceilf(v);
    l = l > 0 ? l : 0;
    h = h < in - 1 ? h : in - 1;
    if (l > in - 1) l = in - 1;
    if (h < 0) h = 0;
    *lo = l;
    *hi = h;
    *lerp = __fsub_rn(v, fl);
}

__global__ void resize_kernel(const float *__restrict__ x, int n, int h, int w, int c, int oh,
                              int ow, float hs, float ws, int half_pixel, float *__restrict__ y) {
    const int64_t total = (int64_t)n * oh * ow * c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = t % c;
        int64_t r = t / c;
        const int64_t ox = r % ow;
        r /= ow;
        const int64_t oy = r % oh, b = r / oh;
        int64_t ylo, yhi, xlo, xhi;
        float ly, lx;
        lerp_at(oy, h, hs, half_pixel, &ylo, &yhi, &ly);
        lerp_at(ox, w, ws, half_pixel, &xlo, &xhi, &lx);
        const float *top = x + (b * h + ylo) * (int64_t)w * c;
        const float *bot = x + (b * h + yhi) * (int64_t)w * c;
        const float tl = top[xlo * c + ch], tr = top[xhi * c + ch];
        const float bl = bot[xlo * c + ch], br = bot[xhi * c + ch];
        const float tt = __fadd_rn(tl, __fmul_rn(__fsub_rn(tr, tl), lx));
        const float bo = __fadd_rn(bl, __fmul_rn(__fsub_rn(br, bl), lx));
        y[t] = __fadd_rn(tt, __fmul_rn(__fsub_rn(bo, tt), ly));
    }
}

static float resize_scale(int64_t in, int64_t out, int align) {
    return (align && out > 1) ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

extern "C" ms_status kn_cuda_resize_bilinear(const float *x, int n, int h, int w, int c, int oh,
                                             int ow, int align_corners, int half_pixel, float *y,
                                             void *stream) {
    if (n <= 0 || h <= 0 || w <= 0 || c <= 0 || oh <= 0 || ow <= 0 || (align_corners && half_pixel))
        return ms_errf(MS_EINVAL, "ResizeBilinear (cuda): bad shape or align_corners with "
                                  "half_pixel_centers");
    resize_kernel<<<grid_for((int64_t)n * oh * ow * c), kThreads, 0, (cudaStream_t)stream>>>(
        x, n, h, w, c, oh, ow, resize_scale(h, oh, align_corners), resize_scale(w, ow, align_corners),
        half_pixel, y);
    return kn_cuda_check_launch("ResizeBilinear (cuda)");
}

struct transpose_args {
    int rank;
    int64_t ystride[8]; /* strides of y's dimensions */
    int64_t xstride[8]; /* stride in x of y's dimension i (x's dimension perm[i]) */
    int64_t ydim[8];
};

__global__ void transpose_kernel(transpose_args a, int64_t total, const float *__restrict__ x,
                                 float *__restrict__ y) {
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = t, src = 0;
        for (int i = 0; i < a.rank; i++) {
            const int64_t idx = r / a.ystride[i];
            r -= idx * a.ystride[i];
            src += idx * a.xstride[i];
        }
        y[t] = x[src];
    }
}

extern "C" ms_status kn_cuda_transpose(const float *x, int rank, const int64_t *dims,
                                       const int *perm, float *y, void *stream) {
    if (rank < 1 || rank > 8) return ms_errf(MS_EINVAL, "Transpose (cuda): rank %d (1..8)", rank);
    transpose_args a;
    int64_t xs[8], total = 1;
    unsigned seen = 0;
    for (int i = rank - 1; i >= 0; i--) {
        if (dims[i] < 0) return ms_errf(MS_EINVAL, "Transpose (cuda): dimension %d is %lld", i, (long long)dims[i]);
        xs[i] = total;
        total *= dims[i];
    }
    a.rank = rank;
    for (int i = 0; i < rank; i++) {
        if (perm[i] < 0 || perm[i] >= rank || (seen & (1u << perm[i])))
            return ms_errf(MS_EINVAL, "Transpose (cuda): perm is not a permutation of 0..%d", rank - 1);
        seen |= 1u << perm[i];
        a.ydim[i] = dims[perm[i]];
        a.xstride[i] = xs[perm[i]];
    }
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) {
        a.ystride[i] = st;
        st *= a.ydim[i];
    }
    if (total == 0) return MS_OK;
    transpose_kernel<<<grid_for(total), kThreads, 0, (cudaStream_t)stream>>>(a, total, x, y);
    return kn_cuda_check_launch("Transpose (cuda)");
}

__global__ void pad_kernel(const float *__restrict__ x, int n, int h, int w, int c, int top,
                           int left, int oh, int ow, float value, float *__restrict__ y) {
    const int64_t total = (int64_t)n * oh * ow * c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = t % c;
        int64_t r = t / c;
        const int ox = (int)(r % ow);
        r /= ow;
        const int oy = (int)(r % oh);
        const int64_t b = r / oh;
        const int iy = oy - top, ix = ox - left;
        y[t] = (iy >= 0 && iy < h && ix >= 0 && ix < w)
                   ? x[((b * h + iy) * (int64_t)w + ix) * c + ch]
                   : value;
    }
}

extern "C" ms_status kn_cuda_pad_nhwc(const float *x, int n, int h, int w, int c, int top,
                                      int bottom, int left, int right, float value, float *y,
                                      void *stream) {
    if (n < 0 || h < 0 || w < 0 || c < 0 || top < 0 || bottom < 0 || left < 0 || right < 0)
        return ms_errf(MS_EINVAL, "Pad (cuda): bad shape or padding");
    const int oh = h + top + bottom, ow = w + left + right;
    const int64_t total = (int64_t)n * oh * ow * c;
    if (total == 0) return MS_OK;
    pad_kernel<<<grid_for(total), kThreads, 0, (cudaStream_t)stream>>>(x, n, h, w, c, top, left, oh,
                                                                      ow, value, y);
    return kn_cuda_check_launch("Pad (cuda)");
}

/* One thread per output value; the CPU kernel's order (d, h, w) and its
 * expressions: the maximum with `v > m ? v : m` from -FLT_MAX, the average
 * as sum * (1 / count). */
__global__ void pool3_kernel(kn_cuda_pool3_shape s, int is_max, const float *__restrict__ x,
                             float *__restrict__ y) {
    const int64_t total = (int64_t)s.n * s.od * s.oh * s.ow * s.c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int ch = (int)(t % s.c);
        int64_t r = t / s.c;
        const int ox = (int)(r % s.ow);
        r /= s.ow;
        const int oy = (int)(r % s.oh);
        r /= s.oh;
        const int oz = (int)(r % s.od);
        const int64_t b = r / s.od;
        int z0 = oz * s.sd - s.pad_d, y0 = oy * s.sh - s.pad_h, x0 = ox * s.sw - s.pad_w;
        int z1 = z0 + s.kd, y1 = y0 + s.kh, x1 = x0 + s.kw;
        z0 = z0 < 0 ? 0 : z0, y0 = y0 < 0 ? 0 : y0, x0 = x0 < 0 ? 0 : x0;
        z1 = z1 > s.d ? s.d : z1, y1 = y1 > s.h ? s.h : y1, x1 = x1 > s.w ? s.w : x1;
        float acc = is_max ? -FLT_MAX : 0.f;
        int count = 0;
        for (int iz = z0; iz < z1; iz++)
            for (int iy = y0; iy < y1; iy++)
                for (int ix = x0; ix < x1; ix++, count++) {
                    const float v = x[(((b * s.d + iz) * s.h + iy) * (int64_t)s.w + ix) * s.c + ch];
                    if (is_max) acc = v > acc ? v : acc;
                    else acc = __fadd_rn(acc, v);
                }
        if (!is_max && count > 0) acc = __fmul_rn(acc, __fdiv_rn(1.0f, (float)count));
        y[t] = acc;
    }
}

extern "C" ms_status kn_cuda_pool3d(const kn_cuda_pool3_shape *s, int is_max, const float *x,
                                    float *y, void *stream) {
    const char *op = is_max ? "MaxPool3D (cuda)" : "AvgPool3D (cuda)";
    if (s->n <= 0 || s->d <= 0 || s->h <= 0 || s->w <= 0 || s->c <= 0 || s->kd <= 0 ||
        s->kh <= 0 || s->kw <= 0 || s->sd <= 0 || s->sh <= 0 || s->sw <= 0 || s->od <= 0 ||
        s->oh <= 0 || s->ow <= 0 || s->pad_d < 0 || s->pad_h < 0 || s->pad_w < 0 || x == NULL ||
        y == NULL)
        return ms_errf(MS_EINVAL, "%s: bad shape", op);
    const int64_t total = (int64_t)s->n * s->od * s->oh * s->ow * s->c;
    pool3_kernel<<<grid_for(total), kThreads, 0, (cudaStream_t)stream>>>(*s, is_max, x, y);
    return kn_cuda_check_launch(op);
}
