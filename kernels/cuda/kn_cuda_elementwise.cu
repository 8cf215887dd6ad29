/* kn_cuda_elementwise.cu - elementwise, bias+activation and softmax kernels
 * (kn_cuda_elementwise.cuh). */
#include <cuda_runtime.h>

#include <float.h>

#include "kn_cuda_elementwise.cuh"
#include "kn_cuda_rt.cuh"

static const int kThreads = 256;

static unsigned grid_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b > 65535ll * 16) b = 65535ll * 16; /* grid-stride loops cover the rest */
    return (unsigned)(b < 1 ? 1 : b);
}

__device__ __forceinline__ float binop(kn_cuda_binop op, float x, float y) {
    switch (op) {
    case KN_CUDA_ADD: return __fadd_rn(x, y);
    case KN_CUDA_SUB: return __fsub_rn(x, y);
    case KN_CUDA_MUL: return __fmul_rn(x, y);
    case KN_CUDA_DIV: return __fdiv_rn(x, y);
    case KN_CUDA_MAX: return x > y ? x : y;
    default: return x < y ? x : y;
    }
}

__device__ __forceinline__ float act_of(kn_cuda_act act, float v) {
    switch (act) {
    case KN_CUDA_ACT_RELU: return v > 0.f ? v : 0.f;
    case KN_CUDA_ACT_RELU6: return v > 0.f ? (v < 6.f ? v : 6.f) : 0.f;
    case KN_CUDA_ACT_SIGMOID: return 1.f / (1.f + expf(-v));
    case KN_CUDA_ACT_TANH: return tanhf(v);
    default: return v;
    }
}

__global__ void binary_kernel(kn_cuda_binop op, const float *__restrict__ a,
                              const float *__restrict__ b, int64_t nb, float *__restrict__ out,
                              int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = binop(op, a[i], b[nb == n ? i : i % nb]);
}

__global__ void binary_bcast_kernel(kn_cuda_binop op, const float *__restrict__ a,
                                    const float *__restrict__ b, kn_cuda_bcast_shape s,
                                    float *__restrict__ out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, ia = 0, ib = 0;
        for (int d = s.rank - 1; d >= 0; d--) {
            const int64_t c = r % s.dim[d];
            r /= s.dim[d];
            ia += c * s.sa[d];
            ib += c * s.sb[d];
        }
        out[i] = binop(op, a[ia], b[ib]);
    }
}

__global__ void bias_act_kernel(const float *__restrict__ x, const float *__restrict__ bias,
                                kn_cuda_act act, float *__restrict__ out, int64_t rows,
                                int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (bias) v = __fadd_rn(v, bias[i % cols]);
        out[i] = act_of(act, v);
    }
}

__global__ void affine_kernel(const float *__restrict__ x, const float *__restrict__ mul,
                              const float *__restrict__ add, kn_cuda_act act,
                              float *__restrict__ out, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % cols;
        out[i] = act_of(act, __fadd_rn(__fmul_rn(x[i], mul[c]), add[c]));
    }
}

/* One block per row: max, then sum of exp, then scale. */
__global__ void softmax_kernel(const float *__restrict__ x, float *__restrict__ out,
                               int64_t rows, int64_t cols) {
    __shared__ float red[kThreads];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *orow = out + r * cols;
        float m = -FLT_MAX;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
        red[threadIdx.x] = m;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
            __syncthreads();
        }
        m = red[0];
        __syncthreads();
        float sum = 0.f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            float e = expf(xr[c] - m);
            orow[c] = e;
            sum += e;
        }
        red[threadIdx.x] = sum;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        const float inv = 1.f / red[0];
        __syncthreads();
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) orow[c] *= inv;
    }
}

extern "C" ms_status kn_cuda_binary(kn_cuda_binop op, const float *a, const float *b, int64_t nb,
                                    float *out, int64_t n, void *stream) {
    if (n < 0 || nb <= 0 || (n > 0 && n % nb != 0) || (unsigned)op > KN_CUDA_MIN)
        return ms_errf(MS_EINVAL, "cuda binary op: bad sizes n=%lld nb=%lld or op %d",
                       (long long)n, (long long)nb, (int)op);
    if (n == 0) return MS_OK;
    binary_kernel<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, a, b, nb, out, n);
    return kn_cuda_check_launch("elementwise (cuda)");
}

extern "C" ms_status kn_cuda_binary_bcast(kn_cuda_binop op, const float *a, const float *b,
                                          const kn_cuda_bcast_shape *s, float *out, int64_t n,
                                          void *stream) {
    int64_t total = 1;
    for (int d = 0; d < s->rank; d++) total = s->dim[d] > 0 ? total * s->dim[d] : -1;
    if (s->rank < 1 || s->rank > KN_CUDA_BCAST_RANK || total != n || n <= 0 ||
        (unsigned)op > KN_CUDA_MIN)
        return ms_errf(MS_EINVAL, "cuda broadcast binary op: bad shape (rank %d, n=%lld) or op %d",
                       s->rank, (long long)n, (int)op);
    binary_bcast_kernel<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, a, b, *s, out, n);
    return kn_cuda_check_launch("elementwise with broadcast (cuda)");
}

extern "C" ms_status kn_cuda_bias_act(const float *x, const float *bias, kn_cuda_act act,
                                      float *out, int64_t rows, int64_t cols, void *stream) {
    if (rows < 0 || cols <= 0 || (unsigned)act > KN_CUDA_ACT_TANH)
        return ms_errf(MS_EINVAL, "cuda bias+activation: bad shape %lldx%lld or activation %d",
                       (long long)rows, (long long)cols, (int)act);
    if (rows == 0) return MS_OK;
    bias_act_kernel<<<grid_for(rows * cols), kThreads, 0, (cudaStream_t)stream>>>(x, bias, act,
                                                                                 out, rows, cols);
    return kn_cuda_check_launch("BiasAdd+activation (cuda)");
}

extern "C" ms_status kn_cuda_softmax(const float *x, float *out, int64_t rows, int64_t cols,
                                     void *stream) {
    if (rows < 0 || cols <= 0)
        return ms_errf(MS_EINVAL, "cuda softmax: bad shape %lldx%lld", (long long)rows,
                       (long long)cols);
    if (rows == 0) return MS_OK;
    unsigned blocks = rows > 65535ll * 16 ? 65535u * 16u : (unsigned)rows;
    softmax_kernel<<<blocks, kThreads, 0, (cudaStream_t)stream>>>(x, out, rows, cols);
    return kn_cuda_check_launch("Softmax (cuda)");
}

extern "C" ms_status kn_cuda_channel_affine(const float *x, const float *mul, const float *add,
                                            kn_cuda_act act, float *out, int64_t rows,
                                            int64_t cols, void *stream) {
    if (rows < 0 || cols <= 0 || mul == NULL || add == NULL || (unsigned)act > KN_CUDA_ACT_TANH)
        return ms_errf(MS_EINVAL, "cuda batch-norm: bad shape %lldx%lld or coefficients",
                       (long long)rows, (long long)cols);
    if (rows == 0) return MS_OK;
    affine_kernel<<<grid_for(rows * cols), kThreads, 0, (cudaStream_t)stream>>>(x, mul, add, act,
                                                                               out, rows, cols);
    return kn_cuda_check_launch("FusedBatchNorm (cuda)");
}

__global__ void unary_kernel(kn_cuda_unop op, const float *__restrict__ x, float alpha,
                             float *__restrict__ out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        float r;
        switch (op) {
        case KN_CUDA_SQUARE: r = __fmul_rn(v, v); break;
        case KN_CUDA_RSQRT: r = __fdiv_rn(1.0f, __fsqrt_rn(v)); break;
        case KN_CUDA_LEAKY_RELU: r = v > 0 ? v : __fmul_rn(v, alpha); break;
        default: r = v < 0 ? expm1f(v) : v; break;
        }
        out[i] = r;
    }
}

extern "C" ms_status kn_cuda_unary(kn_cuda_unop op, const float *x, float alpha, float *out,
                                   int64_t n, void *stream) {
    static const char *const names[] = {"Square (cuda)", "Rsqrt (cuda)", "LeakyRelu (cuda)",
                                        "Elu (cuda)"};
    if (n < 0 || (unsigned)op > KN_CUDA_ELU || (n > 0 && (x == NULL || out == NULL)))
        return ms_errf(MS_EINVAL, "cuda unary op: bad size %lld or op %d", (long long)n, (int)op);
    if (n == 0) return MS_OK;
    unary_kernel<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, x, alpha, out, n);
    return kn_cuda_check_launch(names[op]);
}
