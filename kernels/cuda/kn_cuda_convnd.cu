/* kn_cuda_convnd.cu - cuDNN Nd convolution: forward and backward data
 * (kn_cuda_convnd.cuh). */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kn_cuda_convnd.cuh"
extern "C" {
#include "kn_cuda_precision.h"
}

struct ndnn_api {
    decltype(&cudnnCreate) create;
    decltype(&cudnnDestroy) destroy;
    decltype(&cudnnSetStream) set_stream;
    decltype(&cudnnGetErrorString) err;
    decltype(&cudnnCreateTensorDescriptor) tdesc_create;
    decltype(&cudnnSetTensorNdDescriptorEx) tdesc_set;
    decltype(&cudnnDestroyTensorDescriptor) tdesc_destroy;
    decltype(&cudnnCreateFilterDescriptor) fdesc_create;
    decltype(&cudnnSetFilterNdDescriptor) fdesc_set;
    decltype(&cudnnDestroyFilterDescriptor) fdesc_destroy;
    decltype(&cudnnCreateConvolutionDescriptor) cdesc_create;
    decltype(&cudnnSetConvolutionNdDescriptor) cdesc_set;
    decltype(&cudnnSetConvolutionMathType) cdesc_math;
    decltype(&cudnnDestroyConvolutionDescriptor) cdesc_destroy;
    decltype(&cudnnGetConvolutionNdForwardOutputDim) out_dim;
    decltype(&cudnnGetConvolutionForwardAlgorithm_v7) fwd_algo;
    decltype(&cudnnGetConvolutionForwardWorkspaceSize) fwd_ws;
    decltype(&cudnnConvolutionForward) forward;
    decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) bwd_algo;
    decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) bwd_ws;
    decltype(&cudnnConvolutionBackwardData) backward_data;
};

static ndnn_api g_nd;
static pthread_once_t g_nd_once = PTHREAD_ONCE_INIT;
static char g_nd_err[384];

template <typename T> static bool nd_sym(void *h, T *fn, const char *name) {
    *fn = (T)dlsym(h, name);
    if (*fn == NULL) snprintf(g_nd_err, sizeof g_nd_err, "libcudnn.so.9 lacks %s", name);
    return *fn != NULL;
}

static void nd_load(void) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(g_nd_err, sizeof g_nd_err, "cuDNN not loadable: %s", e ? e : "dlopen failed");
        return;
    }
    ndnn_api a = {};
    if (nd_sym(h, &a.create, "cudnnCreate") && nd_sym(h, &a.destroy, "cudnnDestroy") &&
        nd_sym(h, &a.set_stream, "cudnnSetStream") && nd_sym(h, &a.err, "cudnnGetErrorString") &&
        nd_sym(h, &a.tdesc_create, "cudnnCreateTensorDescriptor") &&
        nd_sym(h, &a.tdesc_set, "cudnnSetTensorNdDescriptorEx") &&
        nd_sym(h, &a.tdesc_destroy, "cudnnDestroyTensorDescriptor") &&
        nd_sym(h, &a.fdesc_create, "cudnnCreateFilterDescriptor") &&
        nd_sym(h, &a.fdesc_set, "cudnnSetFilterNdDescriptor") &&
        nd_sym(h, &a.fdesc_destroy, "cudnnDestroyFilterDescriptor") &&
        nd_sym(h, &a.cdesc_create, "cudnnCreateConvolutionDescriptor") &&
        nd_sym(h, &a.cdesc_set, "cudnnSetConvolutionNdDescriptor") &&
        nd_sym(h, &a.cdesc_math, "cudnnSetConvolutionMathType") &&
        nd_sym(h, &a.cdesc_destroy, "cudnnDestroyConvolutionDescriptor") &&
        nd_sym(h, &a.out_dim, "cudnnGetConvolutionNdForwardOutputDim") &&
        nd_sym(h, &a.fwd_algo, "cudnnGetConvolutionForwardAlgorithm_v7") &&
        nd_sym(h, &a.fwd_ws, "cudnnGetConvolutionForwardWorkspaceSize") &&
        nd_sym(h, &a.forward, "cudnnConvolutionForward") &&
        nd_sym(h, &a.bwd_algo, "cudnnGetConvolutionBackwardDataAlgorithm_v7") &&
        nd_sym(h, &a.bwd_ws, "cudnnGetConvolutionBackwardDataWorkspaceSize") &&
        nd_sym(h, &a.backward_data, "cudnnConvolutionBackwardData"))
        g_nd = a;
}

struct kn_cuda_convnd {
    kn_cuda_convnd_shape s;
    int out[3];
    cudnnHandle_t handle;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd;
    size_t workspace;
};

static const char *nd_op(const kn_cuda_convnd_shape *s) {
    if (s->backward_data) return s->rank == 2 ? "Conv2DBackpropInput" : "Conv3DBackpropInput";
    return s->rank == 2 ? "Conv2D" : "Conv3D";
}

#define NDNN(call, what)                                                                           \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                          \
            st = ms_errf(MS_EDEVICE, "%s (cuDNN): %s: %s", nd_op(&p->s), what, g_nd.err(s_));      \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

extern "C" ms_status kn_cuda_convnd_plan(const kn_cuda_convnd_shape *s, kn_cuda_convnd **out) {
    *out = NULL;
    if (s->rank != 2 && s->rank != 3) return ms_errf(MS_EINVAL, "convolution (cuDNN): rank %d", s->rank);
    const char *op = nd_op(s);
    int bad = s->n <= 0 || s->c <= 0 || s->oc <= 0;
    for (int i = 0; i < s->rank; i++)
        bad |= s->in[i] <= 0 || s->k[i] <= 0 || s->stride[i] <= 0 || s->dil[i] <= 0 ||
               s->pad_lo[i] < 0 || s->pad_hi[i] < 0;
    if (bad) return ms_errf(MS_EINVAL, "%s (cuDNN): bad shape", op);
    for (int i = 0; i < s->rank; i++)
        if (s->pad_lo[i] != s->pad_hi[i])
            return ms_errf(MS_ENOTSUP,
                           "%s (cuDNN): asymmetric padding %d/%d on axis %d is not supported by cuDNN",
                           op, s->pad_lo[i], s->pad_hi[i], i);
    pthread_once(&g_nd_once, nd_load);
    if (g_nd.backward_data == NULL) return ms_errf(MS_EDEVICE, "%s (cuDNN): %s", op, g_nd_err);
    ms_status st = MS_OK;
    kn_cuda_convnd *p = (kn_cuda_convnd *)calloc(1, sizeof(*p));
    if (p == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    p->s = *s;
    const int nd = s->rank + 2;
    int xdims[5], wdims[5], ydims[5] = {0};
    xdims[0] = s->n, xdims[1] = s->c, wdims[0] = s->oc, wdims[1] = s->c;
    for (int i = 0; i < s->rank; i++) xdims[2 + i] = s->in[i], wdims[2 + i] = s->k[i];
    NDNN(g_nd.create(&p->handle), "cudnnCreate");
    NDNN(g_nd.tdesc_create(&p->xd), "cudnnCreateTensorDescriptor");
    NDNN(g_nd.tdesc_create(&p->yd), "cudnnCreateTensorDescriptor");
    NDNN(g_nd.fdesc_create(&p->wd), "cudnnCreateFilterDescriptor");
    NDNN(g_nd.cdesc_create(&p->cd), "cudnnCreateConvolutionDescriptor");
    NDNN(g_nd.tdesc_set(p->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, nd, xdims), "input descriptor");
    NDNN(g_nd.fdesc_set(p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, nd, wdims), "filter descriptor");
    NDNN(g_nd.cdesc_set(p->cd, s->rank, s->pad_lo, s->stride, s->dil, CUDNN_CROSS_CORRELATION,
                        CUDNN_DATA_FLOAT),
         "convolution descriptor");
    NDNN(g_nd.cdesc_math(p->cd, kn_cuda_precision_get() == KN_CUDA_TF32 ? CUDNN_TENSOR_OP_MATH
                                                                          : CUDNN_FMA_MATH),
         "math type");
    NDNN(g_nd.out_dim(p->cd, p->xd, p->wd, nd, ydims), "output size");
    if (ydims[0] != s->n || ydims[1] != s->oc) {
        st = ms_errf(MS_EINVAL, "%s (cuDNN): output batch %d, channels %d", op, ydims[0], ydims[1]);
        goto fail;
    }
    for (int i = 0; i < s->rank; i++) {
        if (ydims[2 + i] <= 0) {
            st = ms_errf(MS_EINVAL, "%s (cuDNN): empty output on axis %d", op, i);
            goto fail;
        }
        p->out[i] = ydims[2 + i];
    }
    NDNN(g_nd.tdesc_set(p->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, nd, ydims), "output descriptor");
    if (!s->backward_data) {
        cudnnConvolutionFwdAlgoPerf_t perf[8];
        int cnt = 0, pick = -1;
        NDNN(g_nd.fwd_algo(p->handle, p->xd, p->wd, p->cd, p->yd, 8, &cnt, perf), "algorithm");
        for (int i = 0; i < cnt && pick < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS) pick = i;
        if (pick < 0) {
            st = ms_errf(MS_ENOTSUP, "%s (cuDNN): no forward algorithm for this shape", op);
            goto fail;
        }
        p->fwd = perf[pick].algo;
        NDNN(g_nd.fwd_ws(p->handle, p->xd, p->wd, p->cd, p->yd, p->fwd, &p->workspace),
             "workspace size");
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[8];
        int cnt = 0, pick = -1;
        NDNN(g_nd.bwd_algo(p->handle, p->wd, p->yd, p->cd, p->xd, 8, &cnt, perf), "algorithm");
        for (int i = 0; i < cnt && pick < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS) pick = i;
        if (pick < 0) {
            st = ms_errf(MS_ENOTSUP, "%s (cuDNN): no backward-data algorithm for this shape", op);
            goto fail;
        }
        p->bwd = perf[pick].algo;
        NDNN(g_nd.bwd_ws(p->handle, p->wd, p->yd, p->cd, p->xd, p->bwd, &p->workspace),
             "workspace size");
    }
    *out = p;
    return MS_OK;
fail:
    kn_cuda_convnd_free(p);
    return st;
}

extern "C" void kn_cuda_convnd_out(const kn_cuda_convnd *p, int out[3]) {
    for (int i = 0; i < 3; i++) out[i] = i < p->s.rank ? p->out[i] : 1;
}

extern "C" uint64_t kn_cuda_convnd_workspace(const kn_cuda_convnd *p) { return p->workspace; }

extern "C" ms_status kn_cuda_convnd_run(const kn_cuda_convnd *p, const float *src, const float *w,
                                        float *dst, void *workspace, void *stream) {
    ms_status st = MS_OK;
    const float one = 1.f, zero = 0.f;
    if (src == NULL || w == NULL || dst == NULL)
        return ms_errf(MS_EINVAL, "%s (cuDNN): NULL tensor", nd_op(&p->s));
    if (p->workspace > 0 && workspace == NULL)
        return ms_errf(MS_EINVAL, "%s (cuDNN): the plan needs %zu bytes of workspace",
                       nd_op(&p->s), p->workspace);
    NDNN(g_nd.set_stream(p->handle, (cudaStream_t)stream), "cudnnSetStream");
    if (!p->s.backward_data)
        NDNN(g_nd.forward(p->handle, &one, p->xd, src, p->wd, w, p->cd, p->fwd, workspace,
                          p->workspace, &zero, p->yd, dst),
             "cudnnConvolutionForward");
    else
        NDNN(g_nd.backward_data(p->handle, &one, p->wd, w, p->yd, src, p->cd, p->bwd, workspace,
                                p->workspace, &zero, p->xd, dst),
             "cudnnConvolutionBackwardData");
    return MS_OK;
fail:
    return st;
}

extern "C" void kn_cuda_convnd_free(kn_cuda_convnd *p) {
    if (p == NULL) return;
    if (p->cd) g_nd.cdesc_destroy(p->cd);
    if (p->wd) g_nd.fdesc_destroy(p->wd);
    if (p->yd) g_nd.tdesc_destroy(p->yd);
    if (p->xd) g_nd.tdesc_destroy(p->xd);
    if (p->handle) g_nd.destroy(p->handle);
    free(p);
}
