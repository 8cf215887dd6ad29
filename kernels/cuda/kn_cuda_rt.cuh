/* kn_cuda_rt.cuh - device memory, pinned host memory and streams for the
 * CUDA backend (kn_cuda_rt.cu). A C interface: host code of kernels/cuda and
 * the gpu tests include it; nothing outside kernels/cuda and tests does.
 *
 * Every function checks its CUDA call and returns MS_OK, or MS_EDEVICE (or
 * MS_ENOMEM for allocation failures) with the message "<op>: <cudaError
 * name>: <cuda error string>", so a failed request names the op and the
 * error. A sticky device error (the context is lost) sets kn_cuda_sticky()
 * (kn_cuda_mem.h): the process must restart; health goes NOT_SERVING.
 *
 * Memory: an arena is one cudaMalloc charged against the process budget of
 * kn_cuda_mem.h (the --per_process_gpu_memory_fraction cap), bump-allocated;
 * the backend table makes its device blocks and the plans' arenas
 * (kn_memplan.h) from them. Freeing an arena returns the memory at once. */
#ifndef KN_CUDA_RT_CUH
#define KN_CUDA_RT_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "ms_status.h"

/* Selects the device for the calling thread. */
ms_status kn_cuda_set_device(int dev);
/* cudaMemGetInfo of the current device. */
ms_status kn_cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);
/* Sticky errors: kn_cuda_sticky() in kn_cuda_mem.h. */

typedef struct kn_cuda_arena kn_cuda_arena;
/* Reserves `bytes` in the process budget (MS_ENOMEM with the cap explained
 * when over it), then one cudaMalloc of that size. `what` names the owner in
 * messages ("model m version 3"). */
ms_status kn_cuda_arena_new(const char *what, uint64_t bytes, kn_cuda_arena **out);
/* 256-byte aligned bump allocation; NULL when the arena is full. */
void *kn_cuda_arena_alloc(kn_cuda_arena *a, uint64_t bytes);
/* Forgets every allocation (between requests). */
void kn_cuda_arena_reset(kn_cuda_arena *a);
uint64_t kn_cuda_arena_size(const kn_cuda_arena *a);
/* cudaFree and returns the bytes to the budget. NULL-safe. */
void kn_cuda_arena_free(kn_cuda_arena *a);

/* Pinned (page-locked) host memory for staging copies. */
ms_status kn_cuda_host_alloc(size_t bytes, void **out);
void kn_cuda_host_free(void *p);

/* One stream per inference worker. */
ms_status kn_cuda_stream_new(void **out);
void kn_cuda_stream_free(void *s);
ms_status kn_cuda_stream_sync(void *s, const char *op);

/* Events order work across streams: a device block last used on stream A
 * and handed to stream B makes B wait for an event recorded on A. */
ms_status kn_cuda_event_new(void **out);
void kn_cuda_event_free(void *ev);
ms_status kn_cuda_event_record(void *ev, void *s, const char *op);
ms_status kn_cuda_stream_wait_event(void *s, void *ev, const char *op);

/* Asynchronous copies on stream s (pinned host memory for true overlap). */
ms_status kn_cuda_h2d(void *dst, const void *src, size_t bytes, void *s, const char *op);
ms_status kn_cuda_d2h(void *dst, const void *src, size_t bytes, void *s, const char *op);

/* CUDA graphs (docs/gpu.md, Memory): capture_begin starts capturing the
 * work queued on stream s by the calling thread (thread-local mode: an unsafe
 * call such as cudaMalloc or a synchronisation on this thread makes the
 * capture fail; nothing captured runs); capture_end ends it and, when keep
 * is set and the capture is valid, instantiates it into *exec (else *exec
 * is NULL and the error says why); graph_launch queues an instantiated
 * graph on stream s; graph_free destroys it (NULL-safe). */
ms_status kn_cuda_capture_begin(void *s);
ms_status kn_cuda_capture_end(void *s, int keep, void **exec);
ms_status kn_cuda_graph_launch(void *exec, void *s);
void kn_cuda_graph_free(void *exec);

/* For the kernels' launchers: MS_OK, or the error of the last launch
 * (cudaGetLastError) named after `op`. */
ms_status kn_cuda_check_launch(const char *op);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_RT_CUH */
