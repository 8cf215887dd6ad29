/* kn_cuda_probe.h - is there a usable NVIDIA GPU, and if not, why not.
 *
 * Host code only, no CUDA header: the driver (libcuda.so.1), cuBLAS(Lt) and
 * cuDNN are opened with dlopen, so a CUDA build runs on machines without any
 * of them and reports the reason instead of failing in the dynamic loader.
 * The checks, in order (the first that fails is the reason):
 *   1. this build has CUDA (DCMSERVE_CUDA at configure time);
 *   2. the device nodes exist (<dev>/nvidia[0-9]*, or <dev>/dxg under WSL);
 *   3. the driver library loads and cuInit succeeds;
 *   4. the driver is new enough for the runtime we were built with (both
 *      versions shown when it is not);
 *   5. the driver reports at least one device;
 *   6. cuBLAS, cuBLASLt and cuDNN load;
 *   7. per device: a context can be made (busy / exclusive / out of memory
 *      are reported per GPU) and its free memory read.
 * kn_device_select() turns a --device value and a report into a choice.
 */
#ifndef KN_CUDA_PROBE_H
#define KN_CUDA_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

#define KN_CUDA_MAX_GPUS 16

typedef struct kn_cuda_gpu {
    int index;
    char name[128];
    int cc_major, cc_minor;
    uint64_t total_bytes;
    uint64_t free_bytes; /* 0 when not read */
    int usable;
    char reason[256]; /* why this GPU is not usable ("" when usable) */
} kn_cuda_gpu;

typedef struct kn_cuda_report {
    int built;               /* this binary has the CUDA backend compiled in */
    const char *archs;       /* compute capabilities compiled ("80-real 90"), "" when not built */
    int runtime_version;     /* CUDA runtime built against (13000 = 13.0); 0 when not built */
    int driver_version;      /* what the driver supports (cuDriverGetVersion); 0 = unknown */
    int cublas_version;      /* major*10000 + minor*100 + patch; 0 = not loaded */
    int cudnn_version;       /* cudnnGetVersion(); 0 = not loaded */
    int ngpus;               /* devices the driver reports (at most KN_CUDA_MAX_GPUS kept) */
    kn_cuda_gpu gpu[KN_CUDA_MAX_GPUS];
    int nusable;             /* GPUs with usable = 1 */
    char reason[512];        /* when nusable == 0: one line saying why */
} kn_cuda_report;

typedef struct kn_cuda_probe_opts {
    const char *dev_dir;     /* NULL: "/dev" */
    const char *libcuda;     /* NULL: "libcuda.so.1" */
    const char *libcublas;   /* NULL: "libcublas.so.13" */
    const char *libcublaslt; /* NULL: "libcublasLt.so.13" */
    const char *libcudnn;    /* NULL: "libcudnn.so.9" */
    int skip_context;        /* 1: do not create a context (no free memory, no busy check) */
    int libs_always;         /* 1: load cuBLAS / cuDNN for their versions even without a GPU */
} kn_cuda_probe_opts;

/* Fills *r. Never fails: every problem becomes r->reason / gpu[i].reason.
 * o may be NULL (defaults). Thread-compatible (call it once at start). */
void kn_cuda_probe(const kn_cuda_probe_opts *o, kn_cuda_report *r);

/* "13.0" from 13000 into buf (n >= 16); "none" for 0. */
const char *kn_cuda_version_str(int v, char *buf, size_t n);

/* ---- --device ---- */
typedef enum kn_device_kind { KN_DEVICE_AUTO, KN_DEVICE_CPU, KN_DEVICE_CUDA } kn_device_kind;

typedef struct kn_device_spec {
    kn_device_kind kind;
    int index; /* KN_DEVICE_CUDA: the GPU index, -1 = the first usable */
} kn_device_spec;

/* Parses "auto", "cpu", "cuda", "cuda:N" (also "gpu", "gpu:N"); NULL or ""
 * means auto. MS_EINVAL naming the value otherwise. */
ms_status kn_device_parse(const char *s, kn_device_spec *out);

/* Chooses the device: *gpu = the GPU index, or -1 for the CPU; `why` gets
 * one line saying what was chosen and why (for the one start-up log line).
 * With KN_DEVICE_CUDA and no usable GPU (or GPU N not usable): MS_EDEVICE
 * with the diagnosis as the message. */
ms_status kn_device_select(const kn_device_spec *spec, const kn_cuda_report *r, int *gpu,
                           char *why, size_t why_len);

#endif /* KN_CUDA_PROBE_H */
