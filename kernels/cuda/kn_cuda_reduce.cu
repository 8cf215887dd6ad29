/* kn_cuda_reduce.cu - Sum / Mean / Max / Min / Prod over merged axes
 * (kn_cuda_reduce.cuh). */
#include <cuda_runtime.h>

#include <math.h>

#include "kn_cuda_reduce.cuh"
#include "kn_cuda_rt.cuh"

static const int kThreads = 256;
static const int64_t kThreadPerOutput = 2048; /* outputs from which each gets one thread */
static const int64_t kShortReduce = 256;      /* reductions shorter than this: one thread */

static unsigned grid_for(int64_t n, int64_t per) {
    int64_t b = (n + per - 1) / per;
    if (b > 65535ll * 16) b = 65535ll * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

/* The merged shape split into the kept axes (in order: output index order)
 * and the reduced ones (in order: memory order), with their input strides. */
struct red_args {
    int op;
    double init;
    int nk, nr;
    int64_t kdim[8], kstride[8];
    int64_t rdim[8], rstride[8];
    int64_t nout, count;
};

__device__ __forceinline__ double red_step(int op, double a, double v) {
    switch (op) {
    case KN_CUDA_RED_PROD: return a * v;
    case KN_CUDA_RED_MAX: return v > a ? v : a;
    case KN_CUDA_RED_MIN: return v < a ? v : a;
    default: return a + v; /* Sum, Mean */
    }
}

__device__ __forceinline__ float red_final(const red_args &a, double v) {
    if (a.op == KN_CUDA_RED_MEAN) v /= (double)a.count;
    return (float)v;
}

/* Input offset of output o (the kept axes, the last fastest). */
__device__ __forceinline__ int64_t kept_base(const red_args &a, int64_t o) {
    int64_t off = 0;
    for (int d = a.nk - 1; d >= 0; d--) {
        off += (o % a.kdim[d]) * a.kstride[d];
        o /= a.kdim[d];
    }
    return off;
}

/* Offset of the q-th reduced element among axes [0, upto) (the last fastest). */
__device__ __forceinline__ int64_t red_offset(const red_args &a, int64_t q, int upto) {
    int64_t off = 0;
    for (int d = upto - 1; d >= 0; d--) {
        off += (q % a.rdim[d]) * a.rstride[d];
        q /= a.rdim[d];
    }
    return off;
}

/* One thread per output, its elements in memory order (the CPU's order). */
__global__ void reduce_thread_kernel(red_args a, const float *__restrict__ x,
                                     float *__restrict__ y) {
    const int64_t last = a.rdim[a.nr - 1], lstride = a.rstride[a.nr - 1];
    const int64_t outer = a.count / last;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < a.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = kept_base(a, o);
        double acc = a.init;
        for (int64_t q = 0; q < outer; q++) {
            const float *p = x + base + red_offset(a, q, a.nr - 1);
            for (int64_t j = 0; j < last; j++) acc = red_step(a.op, acc, (double)p[j * lstride]);
        }
        y[o] = red_final(a, acc);
    }
}

/* One block per output: strided partials, then a tree in shared memory. */
__global__ void reduce_block_kernel(red_args a, const float *__restrict__ x,
                                    float *__restrict__ y) {
    __shared__ double part[256];
    for (int64_t o = blockIdx.x; o < a.nout; o += gridDim.x) {
        const int64_t base = kept_base(a, o);
        double acc = a.init;
        for (int64_t q = threadIdx.x; q < a.count; q += blockDim.x)
            acc = red_step(a.op, acc, (double)x[base + red_offset(a, q, a.nr)]);
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s)
                part[threadIdx.x] = red_step(a.op, part[threadIdx.x], part[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) y[o] = red_final(a, part[0]);
        __syncthreads(); /* part[] is reused by the next output */
    }
}

/* Reverses the first n axes of dim and stride in place. */
static void reverse_axes(int64_t *dim, int64_t *stride, int n) {
    for (int i = 0; i < n / 2; i++) {
        int64_t t = dim[i];
        dim[i] = dim[n - 1 - i];
        dim[n - 1 - i] = t;
        t = stride[i];
        stride[i] = stride[n - 1 - i];
        stride[n - 1 - i] = t;
    }
}

extern "C" ms_status kn_cuda_reduce(kn_cuda_redop op, const kn_cuda_reduce_shape *p, const float *x,
                                    float *y, void *stream) {
    if (p->rank < 1 || p->rank > 8 || (int)op < KN_CUDA_RED_SUM || (int)op > KN_CUDA_RED_PROD)
        return ms_errf(MS_EINVAL, "Reduce (cuda): bad plan (rank %d, op %d)", p->rank, (int)op);
    red_args a = {};
    a.op = (int)op;
    a.init = op == KN_CUDA_RED_PROD  ? 1.0
             : op == KN_CUDA_RED_MAX ? -INFINITY
             : op == KN_CUDA_RED_MIN ? INFINITY
                                     : 0.0;
    int64_t stride = 1, nout = 1, count = 1;
    for (int d = p->rank - 1; d >= 0; d--) {
        if (p->dim[d] <= 0) return ms_errf(MS_EINVAL, "Reduce (cuda): empty axis %d", d);
        (p->red[d] ? count : nout) *= p->dim[d];
        stride *= p->dim[d];
    }
    if (nout != p->nout || count != p->count)
        return ms_errf(MS_EINVAL, "Reduce (cuda): the plan's counts do not match its axes");
    stride = 1;
    int nk = 0, nr = 0;
    for (int d = p->rank - 1; d >= 0; d--) { /* counted from the back, then reversed */
        if (p->red[d])
            a.rdim[nr] = p->dim[d], a.rstride[nr++] = stride;
        else
            a.kdim[nk] = p->dim[d], a.kstride[nk++] = stride;
        stride *= p->dim[d];
    }
    reverse_axes(a.kdim, a.kstride, nk);
    reverse_axes(a.rdim, a.rstride, nr);
    if (nr == 0) { /* nothing reduced (all axes kept): one element per output */
        a.rdim[0] = 1, a.rstride[0] = 0, nr = 1;
    }
    a.nk = nk, a.nr = nr, a.nout = nout, a.count = count;
    if (nout >= kThreadPerOutput || count < kShortReduce)
        reduce_thread_kernel<<<grid_for(nout, kThreads), kThreads, 0, (cudaStream_t)stream>>>(a, x,
                                                                                              y);
    else
        reduce_block_kernel<<<grid_for(nout, 1), kThreads, 0, (cudaStream_t)stream>>>(a, x, y);
    return kn_cuda_check_launch("Reduce (cuda)");
}
