/* kn_cuda_index.cu - gather, strided copy (Slice / StridedSlice), nearest
 * resize (kn_cuda_index.cuh). Elements move as unsigned integers of their
 * size: any dtype of 1, 2, 4 or 8 bytes, bit for bit. */
#include <cuda_runtime.h>

#include <math.h>

#include "kn_cuda_index.cuh"
#include "kn_cuda_rt.cuh"

static const int kThreads = 256;

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b > 65535ll * 16) b = 65535ll * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

/* ---- strided copy ---- */

struct strided_args {
    int rank;
    int64_t dim[8], stride[8];
    int64_t base, total;
};

template <typename T>
__global__ void strided_kernel(strided_args a, const T *__restrict__ x, T *__restrict__ y) {
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = t, src = a.base;
        for (int d = a.rank - 1; d >= 0; d--) {
            src += (r % a.dim[d]) * a.stride[d];
            r /= a.dim[d];
        }
        y[t] = x[src];
    }
}

extern "C" ms_status kn_cuda_strided_copy(const kn_cuda_strided *p, const void *x, size_t es,
                                          void *y, void *stream) {
    if (p->rank < 1 || p->rank > 8)
        return ms_errf(MS_EINVAL, "StridedSlice (cuda): rank %d (1..8)", p->rank);
    strided_args a = {};
    a.rank = p->rank, a.base = p->base, a.total = 1;
    for (int d = 0; d < p->rank; d++) {
        if (p->dim[d] < 0)
            return ms_errf(MS_EINVAL, "StridedSlice (cuda): dimension %d is negative", d);
        a.dim[d] = p->dim[d], a.stride[d] = p->stride[d];
        a.total *= p->dim[d];
    }
    if (a.total == 0) return MS_OK;
    cudaStream_t s = (cudaStream_t)stream;
    switch (es) {
    case 1:
        strided_kernel<uint8_t>
            <<<grid_for(a.total), kThreads, 0, s>>>(a, (const uint8_t *)x, (uint8_t *)y);
        break;
    case 2:
        strided_kernel<uint16_t>
            <<<grid_for(a.total), kThreads, 0, s>>>(a, (const uint16_t *)x, (uint16_t *)y);
        break;
    case 4:
        strided_kernel<uint32_t>
            <<<grid_for(a.total), kThreads, 0, s>>>(a, (const uint32_t *)x, (uint32_t *)y);
        break;
    case 8:
        strided_kernel<uint64_t>
            <<<grid_for(a.total), kThreads, 0, s>>>(a, (const uint64_t *)x, (uint64_t *)y);
        break;
    default: return ms_errf(MS_EINVAL, "StridedSlice (cuda): element size %zu (1, 2, 4 or 8)", es);
    }
    return kn_cuda_check_launch("StridedSlice (cuda)");
}

/* ---- gather ---- */

/* Units of U (the largest of 8, 4, 2, 1 bytes dividing a row of inner
 * elements and both pointers): t = ((b * outer + o) * per + i) * ru + k. */
template <typename U>
__global__ void gather_kernel(kn_cuda_gather_shape g, int64_t ru, int64_t total,
                              const U *__restrict__ params, const void *__restrict__ indices,
                              int idx64, U *__restrict__ y) {
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = t % ru, row = t / ru;
        const int64_t i = row % g.per, bo = row / g.per; /* bo = b * outer + o */
        const int64_t b = bo / g.outer;
        const int64_t ii = b * g.per + i;
        const int64_t v =
            idx64 ? ((const int64_t *)indices)[ii] : (int64_t)((const int32_t *)indices)[ii];
        y[t] = (v >= 0 && v < g.n) ? params[(bo * g.n + v) * ru + k] : (U)0;
    }
}

extern "C" ms_status kn_cuda_gather(const kn_cuda_gather_shape *g, const void *params, size_t es,
                                    const void *indices, int idx64, void *y, void *stream) {
    if (g->nb < 0 || g->outer < 0 || g->n < 0 || g->per < 0 || g->inner < 0 ||
        (es != 1 && es != 2 && es != 4 && es != 8))
        return ms_errf(MS_EINVAL, "GatherV2 (cuda): bad shape or element size %zu", es);
    const int64_t rowb = g->inner * (int64_t)es, rows = g->nb * g->outer * g->per;
    if (rowb == 0 || rows == 0) return MS_OK;
    if (g->n == 0) return ms_errf(MS_EINVAL, "GatherV2 (cuda): gathering from an empty axis");
    const uintptr_t al = (uintptr_t)params | (uintptr_t)y;
    size_t u = 8;
    while (u > 1 && (rowb % (int64_t)u != 0 || al % u != 0)) u /= 2;
    const int64_t ru = rowb / (int64_t)u, total = rows * ru;
    cudaStream_t s = (cudaStream_t)stream;
    switch (u) {
    case 8:
        gather_kernel<uint64_t><<<grid_for(total), kThreads, 0, s>>>(
            *g, ru, total, (const uint64_t *)params, indices, idx64, (uint64_t *)y);
        break;
    case 4:
        gather_kernel<uint32_t><<<grid_for(total), kThreads, 0, s>>>(
            *g, ru, total, (const uint32_t *)params, indices, idx64, (uint32_t *)y);
        break;
    case 2:
        gather_kernel<uint16_t><<<grid_for(total), kThreads, 0, s>>>(
            *g, ru, total, (const uint16_t *)params, indices, idx64, (uint16_t *)y);
        break;
    default:
        gather_kernel<uint8_t><<<grid_for(total), kThreads, 0, s>>>(
            *g, ru, total, (const uint8_t *)params, indices, idx64, (uint8_t *)y);
        break;
    }
    return kn_cuda_check_launch("GatherV2 (cuda)");
}

/* ---- nearest-neighbour resize ---- */

__device__ __forceinline__ int64_t nearest_src(int64_t i, int64_t in, float scale, int align,
                                               int half) {
    const float fi = __ll2float_rn(i);
    const float v = half ? __fmul_rn(__fadd_rn(fi, 0.5f), scale) : __fmul_rn(fi, scale);
    int64_t s = align ? (int64_t)roundf(v) : (int64_t)floorf(v);
    if (s > in - 1) s = in - 1;
    if (s < 0) s = 0;
    return s;
}

struct nearest_args {
    int64_t n, h, w, c, oh, ow;
    float hs, ws;
    int align, half;
};

template <typename T>
__global__ void nearest_kernel(nearest_args a, const T *__restrict__ x, T *__restrict__ y) {
    const int64_t total = a.n * a.oh * a.ow * a.c;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = t % a.c;
        int64_t r = t / a.c;
        const int64_t ox = r % a.ow;
        r /= a.ow;
        const int64_t oy = r % a.oh, b = r / a.oh;
        const int64_t iy = nearest_src(oy, a.h, a.hs, a.align, a.half);
        const int64_t ix = nearest_src(ox, a.w, a.ws, a.align, a.half);
        y[t] = x[((b * a.h + iy) * a.w + ix) * a.c + ch];
    }
}

/* The CPU kernel's resize_scale, in float on the host. */
static float nearest_scale(int64_t in, int64_t out, int align) {
    return (align && out > 1) ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

extern "C" ms_status kn_cuda_resize_nearest(const void *x, size_t es, int64_t n, int64_t h,
                                            int64_t w, int64_t c, int64_t oh, int64_t ow,
                                            int align_corners, int half_pixel, void *y,
                                            void *stream) {
    if (n < 0 || h <= 0 || w <= 0 || c <= 0 || oh <= 0 || ow <= 0)
        return ms_errf(MS_EINVAL, "ResizeNearestNeighbor (cuda): bad shape");
    nearest_args a = {n,
                      h,
                      w,
                      c,
                      oh,
                      ow,
                      nearest_scale(h, oh, align_corners),
                      nearest_scale(w, ow, align_corners),
                      align_corners,
                      half_pixel};
    const int64_t total = n * oh * ow * c;
    if (total == 0) return MS_OK;
    cudaStream_t s = (cudaStream_t)stream;
    switch (es) {
    case 1:
        nearest_kernel<uint8_t>
            <<<grid_for(total), kThreads, 0, s>>>(a, (const uint8_t *)x, (uint8_t *)y);
        break;
    case 2:
        nearest_kernel<uint16_t>
            <<<grid_for(total), kThreads, 0, s>>>(a, (const uint16_t *)x, (uint16_t *)y);
        break;
    case 4:
        nearest_kernel<uint32_t>
            <<<grid_for(total), kThreads, 0, s>>>(a, (const uint32_t *)x, (uint32_t *)y);
        break;
    case 8:
        nearest_kernel<uint64_t>
            <<<grid_for(total), kThreads, 0, s>>>(a, (const uint64_t *)x, (uint64_t *)y);
        break;
    default:
        return ms_errf(MS_EINVAL, "ResizeNearestNeighbor (cuda): element size %zu (1, 2, 4 or 8)",
                       es);
    }
    return kn_cuda_check_launch("ResizeNearestNeighbor (cuda)");
}
