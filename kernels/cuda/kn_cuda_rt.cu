/* kn_cuda_rt.cu - device memory, pinned memory, streams (kn_cuda_rt.cuh). */
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include "kn_cuda_rt.cuh"

extern "C" {
#include "kn_cuda_mem.h"
}

/* Errors after which the context is unusable (CUDA docs: "sticky"). */
static bool is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
        return true;
    default:
        return false;
    }
}

static ms_status fail(cudaError_t e, const char *op) {
    if (is_sticky(e)) kn_cuda_set_sticky();
    ms_status code = e == cudaErrorMemoryAllocation ? MS_ENOMEM : MS_EDEVICE;
    return ms_errf(code, "%s: %s: %s%s", op ? op : "cuda", cudaGetErrorName(e),
                   cudaGetErrorString(e),
                   is_sticky(e) ? " (sticky device error: the server must restart)" : "");
}

#define CK(call, op)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return fail(e_, op);                                                \
    } while (0)

extern "C" ms_status kn_cuda_set_device(int dev) {
    CK(cudaSetDevice(dev), "cudaSetDevice");
    return MS_OK;
}

extern "C" ms_status kn_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes) {
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return MS_OK;
}

extern "C" ms_status kn_cuda_check_launch(const char *op) {
    CK(cudaGetLastError(), op);
    return MS_OK;
}

struct kn_cuda_arena {
    char *base;
    uint64_t size, used;
};

extern "C" ms_status kn_cuda_arena_new(const char *what, uint64_t bytes, kn_cuda_arena **out) {
    *out = NULL;
    if (bytes == 0) bytes = 256;
    bytes = (bytes + 255) & ~(uint64_t)255;
    ms_status st = kn_cuda_budget_take(what, bytes);
    if (st != MS_OK) return st;
    kn_cuda_arena *a = (kn_cuda_arena *)calloc(1, sizeof(*a));
    if (a == NULL) {
        kn_cuda_budget_give(bytes);
        return ms_errf(MS_ENOMEM, "out of host memory");
    }
    cudaError_t e = cudaMalloc((void **)&a->base, bytes);
    if (e != cudaSuccess) {
        free(a);
        kn_cuda_budget_give(bytes);
        st = fail(e, "cudaMalloc");
        return ms_errwrap(st, "%s: device arena of %llu MiB", what,
                          (unsigned long long)(bytes >> 20));
    }
    a->size = bytes;
    *out = a;
    return MS_OK;
}

extern "C" void *kn_cuda_arena_alloc(kn_cuda_arena *a, uint64_t bytes) {
    uint64_t b = (bytes + 255) & ~(uint64_t)255;
    if (b < bytes || b > a->size - a->used) return NULL;
    void *p = a->base + a->used;
    a->used += b;
    return p;
}

extern "C" void kn_cuda_arena_reset(kn_cuda_arena *a) { a->used = 0; }

extern "C" uint64_t kn_cuda_arena_size(const kn_cuda_arena *a) { return a->size; }

extern "C" void kn_cuda_arena_free(kn_cuda_arena *a) {
    if (a == NULL) return;
    /* cudaFree synchronises the device; an error here cannot be acted on
     * beyond marking a sticky failure. */
    cudaError_t e = cudaFree(a->base);
    if (e != cudaSuccess && is_sticky(e)) kn_cuda_set_sticky();
    kn_cuda_budget_give(a->size);
    free(a);
}

extern "C" ms_status kn_cuda_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    CK(cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocPortable), "cudaHostAlloc");
    return MS_OK;
}

extern "C" void kn_cuda_host_free(void *p) {
    if (p) (void)cudaFreeHost(p);
}

extern "C" ms_status kn_cuda_stream_new(void **out) {
    cudaStream_t s = NULL;
    *out = NULL;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    *out = (void *)s;
    return MS_OK;
}

extern "C" void kn_cuda_stream_free(void *s) {
    if (s) (void)cudaStreamDestroy((cudaStream_t)s);
}

extern "C" ms_status kn_cuda_stream_sync(void *s, const char *op) {
    CK(cudaStreamSynchronize((cudaStream_t)s), op);
    return MS_OK;
}

extern "C" ms_status kn_cuda_event_new(void **out) {
    cudaEvent_t e = NULL;
    *out = NULL;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    *out = (void *)e;
    return MS_OK;
}

extern "C" void kn_cuda_event_free(void *ev) {
    if (ev) (void)cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" ms_status kn_cuda_event_record(void *ev, void *s, const char *op) {
    CK(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)s), op);
    return MS_OK;
}

extern "C" ms_status kn_cuda_stream_wait_event(void *s, void *ev, const char *op) {
    CK(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)ev, 0), op);
    return MS_OK;
}

extern "C" ms_status kn_cuda_h2d(void *dst, const void *src, size_t bytes, void *s, const char *op) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)s), op);
    return MS_OK;
}

extern "C" ms_status kn_cuda_d2h(void *dst, const void *src, size_t bytes, void *s, const char *op) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s), op);
    return MS_OK;
}

/* ---- CUDA graphs: capture of a stream's work and replay ---- */

extern "C" ms_status kn_cuda_capture_begin(void *s) {
    /* thread-local: an unsafe call (cudaMalloc, a synchronisation) on this
     * thread invalidates the capture; other workers' threads are not hindered */
    CK(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeThreadLocal),
       "cudaStreamBeginCapture");
    return MS_OK;
}

extern "C" ms_status kn_cuda_capture_end(void *s, int keep, void **exec) {
    *exec = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)s, &g);
    if (e != cudaSuccess || !keep) {
        if (g != NULL) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError(); /* a capture error is not the next launch's */
        if (e != cudaSuccess) return fail(e, "cudaStreamEndCapture");
        return ms_errf(MS_ENOTSUP, "capture discarded");
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(e, "cudaGraphInstantiate");
    }
    *exec = (void *)x;
    return MS_OK;
}

extern "C" ms_status kn_cuda_graph_launch(void *exec, void *s) {
    CK(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s), "cudaGraphLaunch");
    return MS_OK;
}

extern "C" void kn_cuda_graph_free(void *exec) {
    if (exec) (void)cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
