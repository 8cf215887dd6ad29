/* kn_cuda_conv.cu - cuDNN convolution (kn_cuda_conv.cuh). */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kn_cuda_conv.cuh"
extern "C" {
#include "kn_cuda_precision.h"
}

struct dnn_api {
    decltype(&cudnnCreate) create;
    decltype(&cudnnDestroy) destroy;
    decltype(&cudnnSetStream) set_stream;
    decltype(&cudnnGetErrorString) err;
    decltype(&cudnnCreateTensorDescriptor) tdesc_create;
    decltype(&cudnnSetTensor4dDescriptor) tdesc_set;
    decltype(&cudnnDestroyTensorDescriptor) tdesc_destroy;
    decltype(&cudnnCreateFilterDescriptor) fdesc_create;
    decltype(&cudnnSetFilter4dDescriptor) fdesc_set;
    decltype(&cudnnDestroyFilterDescriptor) fdesc_destroy;
    decltype(&cudnnCreateConvolutionDescriptor) cdesc_create;
    decltype(&cudnnSetConvolution2dDescriptor) cdesc_set;
    decltype(&cudnnSetConvolutionGroupCount) cdesc_groups;
    decltype(&cudnnSetConvolutionMathType) cdesc_math;
    decltype(&cudnnDestroyConvolutionDescriptor) cdesc_destroy;
    decltype(&cudnnGetConvolution2dForwardOutputDim) out_dim;
    decltype(&cudnnGetConvolutionForwardAlgorithm_v7) algo_v7;
    decltype(&cudnnGetConvolutionForwardWorkspaceSize) ws_size;
    decltype(&cudnnConvolutionForward) forward;
};

static dnn_api g_dnn;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_err[384];

template <typename T> static bool sym(void *h, T *fn, const char *name) {
    *fn = (T)dlsym(h, name);
    if (*fn == NULL) snprintf(g_err, sizeof g_err, "libcudnn.so.9 lacks %s", name);
    return *fn != NULL;
}

static void dnn_load(void) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(g_err, sizeof g_err, "cuDNN not loadable: %s", e ? e : "dlopen failed");
        return;
    }
    dnn_api a = {};
    if (sym(h, &a.create, "cudnnCreate") && sym(h, &a.destroy, "cudnnDestroy") &&
        sym(h, &a.set_stream, "cudnnSetStream") && sym(h, &a.err, "cudnnGetErrorString") &&
        sym(h, &a.tdesc_create, "cudnnCreateTensorDescriptor") &&
        sym(h, &a.tdesc_set, "cudnnSetTensor4dDescriptor") &&
        sym(h, &a.tdesc_destroy, "cudnnDestroyTensorDescriptor") &&
        sym(h, &a.fdesc_create, "cudnnCreateFilterDescriptor") &&
        sym(h, &a.fdesc_set, "cudnnSetFilter4dDescriptor") &&
        sym(h, &a.fdesc_destroy, "cudnnDestroyFilterDescriptor") &&
        sym(h, &a.cdesc_create, "cudnnCreateConvolutionDescriptor") &&
        sym(h, &a.cdesc_set, "cudnnSetConvolution2dDescriptor") &&
        sym(h, &a.cdesc_groups, "cudnnSetConvolutionGroupCount") &&
        sym(h, &a.cdesc_math, "cudnnSetConvolutionMathType") &&
        sym(h, &a.cdesc_destroy, "cudnnDestroyConvolutionDescriptor") &&
        sym(h, &a.out_dim, "cudnnGetConvolution2dForwardOutputDim") &&
        sym(h, &a.algo_v7, "cudnnGetConvolutionForwardAlgorithm_v7") &&
        sym(h, &a.ws_size, "cudnnGetConvolutionForwardWorkspaceSize") &&
        sym(h, &a.forward, "cudnnConvolutionForward"))
        g_dnn = a;
}

struct kn_cuda_conv {
    kn_cuda_conv_shape s;
    int oh, ow;
    cudnnHandle_t handle;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace;
};

#define DNN(call, what)                                                                            \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                          \
            st = ms_errf(MS_EDEVICE, "Conv2D (cuDNN): %s: %s", what, g_dnn.err(s_));              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

extern "C" ms_status kn_cuda_conv_plan(const kn_cuda_conv_shape *s, kn_cuda_conv **out) {
    *out = NULL;
    if (s->n <= 0 || s->h <= 0 || s->w <= 0 || s->c <= 0 || s->kh <= 0 || s->kw <= 0 ||
        s->oc <= 0 || s->groups <= 0 || s->c % s->groups != 0 || s->oc % s->groups != 0 ||
        s->sh <= 0 || s->sw <= 0 || s->dh <= 0 || s->dw <= 0 || s->pad_top < 0 ||
        s->pad_left < 0 || s->pad_bottom < 0 || s->pad_right < 0)
        return ms_errf(MS_EINVAL, "Conv2D (cuDNN): bad shape");
    if (s->pad_top != s->pad_bottom || s->pad_left != s->pad_right)
        return ms_errf(MS_ENOTSUP,
                       "Conv2D (cuDNN): asymmetric padding %d/%d x %d/%d is not supported by cuDNN",
                       s->pad_top, s->pad_bottom, s->pad_left, s->pad_right);
    pthread_once(&g_once, dnn_load);
    if (g_dnn.forward == NULL) return ms_errf(MS_EDEVICE, "Conv2D (cuDNN): %s", g_err);
    ms_status st = MS_OK;
    kn_cuda_conv *p = (kn_cuda_conv *)calloc(1, sizeof(*p));
    if (p == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    p->s = *s;
    int on = 0, oc = 0, oh = 0, ow = 0, nalgo = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    DNN(g_dnn.create(&p->handle), "cudnnCreate");
    DNN(g_dnn.tdesc_create(&p->xd), "cudnnCreateTensorDescriptor");
    DNN(g_dnn.tdesc_create(&p->yd), "cudnnCreateTensorDescriptor");
    DNN(g_dnn.fdesc_create(&p->wd), "cudnnCreateFilterDescriptor");
    DNN(g_dnn.cdesc_create(&p->cd), "cudnnCreateConvolutionDescriptor");
    DNN(g_dnn.tdesc_set(p->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s->n, s->c, s->h, s->w),
        "input descriptor");
    DNN(g_dnn.fdesc_set(p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, s->oc, s->c / s->groups, s->kh,
                        s->kw),
        "filter descriptor");
    DNN(g_dnn.cdesc_set(p->cd, s->pad_top, s->pad_left, s->sh, s->sw, s->dh, s->dw,
                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "convolution descriptor");
    DNN(g_dnn.cdesc_groups(p->cd, s->groups), "group count");
    /* --precision: fp32 keeps FMA math (no TF32); tf32 lets cuDNN use tensor cores */
    DNN(g_dnn.cdesc_math(p->cd, kn_cuda_precision_get() == KN_CUDA_TF32 ? CUDNN_TENSOR_OP_MATH
                                                                         : CUDNN_FMA_MATH),
        "math type");
    DNN(g_dnn.out_dim(p->cd, p->xd, p->wd, &on, &oc, &oh, &ow), "output size");
    if (on != s->n || oc != s->oc || oh <= 0 || ow <= 0) {
        st = ms_errf(MS_EINVAL, "Conv2D (cuDNN): output %dx%dx%dx%d", on, oh, ow, oc);
        goto fail;
    }
    p->oh = oh;
    p->ow = ow;
    DNN(g_dnn.tdesc_set(p->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, on, oc, oh, ow),
        "output descriptor");
    DNN(g_dnn.algo_v7(p->handle, p->xd, p->wd, p->cd, p->yd, 8, &nalgo, perf), "algorithm");
    {
        int pick = -1;
        for (int i = 0; i < nalgo && pick < 0; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS) pick = i;
        if (pick < 0) {
            st = ms_errf(MS_ENOTSUP, "Conv2D (cuDNN): no forward algorithm for this shape");
            goto fail;
        }
        p->algo = perf[pick].algo;
    }
    DNN(g_dnn.ws_size(p->handle, p->xd, p->wd, p->cd, p->yd, p->algo, &p->workspace),
        "workspace size");
    *out = p;
    return MS_OK;
fail:
    kn_cuda_conv_free(p);
    return st;
}

extern "C" void kn_cuda_conv_out_hw(const kn_cuda_conv *p, int *oh, int *ow) {
    *oh = p->oh;
    *ow = p->ow;
}

extern "C" uint64_t kn_cuda_conv_workspace(const kn_cuda_conv *p) { return p->workspace; }

extern "C" ms_status kn_cuda_conv_run(const kn_cuda_conv *p, const float *x, const float *w_ohwi,
                                      float *y, void *workspace, void *stream) {
    ms_status st = MS_OK;
    const float one = 1.f, zero = 0.f;
    if (p->workspace > 0 && workspace == NULL)
        return ms_errf(MS_EINVAL, "Conv2D (cuDNN): the plan needs %zu bytes of workspace",
                       p->workspace);
    DNN(g_dnn.set_stream(p->handle, (cudaStream_t)stream), "cudnnSetStream");
    DNN(g_dnn.forward(p->handle, &one, p->xd, x, p->wd, w_ohwi, p->cd, p->algo, workspace,
                      p->workspace, &zero, p->yd, y),
        "cudnnConvolutionForward");
    return MS_OK;
fail:
    return st;
}

extern "C" void kn_cuda_conv_free(kn_cuda_conv *p) {
    if (p == NULL) return;
    if (p->cd) g_dnn.cdesc_destroy(p->cd);
    if (p->wd) g_dnn.fdesc_destroy(p->wd);
    if (p->yd) g_dnn.tdesc_destroy(p->yd);
    if (p->xd) g_dnn.tdesc_destroy(p->xd);
    if (p->handle) g_dnn.destroy(p->handle);
    free(p);
}

extern "C" void kn_cuda_conv_filter_from_tf(const float *tf, int kh, int kw, int ci, int co,
                                            int depthwise, float *ohwi) {
    for (int y = 0; y < kh; y++)
        for (int x = 0; x < kw; x++)
            for (int i = 0; i < ci; i++)
                for (int o = 0; o < co; o++) {
                    float v = tf[(((size_t)y * kw + x) * ci + i) * co + o];
                    if (depthwise) /* [kh, kw, c, m] -> out channel i*co+o, one input */
                        ohwi[(((size_t)i * co + o) * kh + y) * kw + x] = v;
                    else /* HWIO -> OHWI */
                        ohwi[(((size_t)o * kh + y) * kw + x) * ci + i] = v;
                }
}
