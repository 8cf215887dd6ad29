/* kn_cuda_probe.c - GPU diagnosis through dlopen (kn_cuda_probe.h).
 *
 * The driver API is called through pointers looked up with dlsym, declared
 * here with plain C types (CUresult = int, CUdevice = int, CUcontext = void
 * *), so this file needs no CUDA header and compiles in every build. */
#include "kn_cuda_probe.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KN_CUDA_RUNTIME_VERSION
#define KN_CUDA_RUNTIME_VERSION 0
#endif
#ifndef KN_CUDA_ARCHS
#define KN_CUDA_ARCHS ""
#endif

/* A GPU with less free memory than this is reported as out of memory. */
#define KN_CUDA_MIN_FREE ((uint64_t)256 << 20)

/* The driver API values used here (cuda.h, stable across releases). */
enum {
    CU_OK = 0,
    CU_ERR_OUT_OF_MEMORY = 2,
    CU_ERR_INSUFFICIENT_DRIVER = 35,
    CU_ERR_DEVICE_UNAVAILABLE = 46,
    CU_ERR_NO_DEVICE = 100,
    CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76,
    CU_ATTR_COMPUTE_MODE = 20,
};

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_name_fn)(char *, int, int);
typedef int (*cu_device_attr_fn)(int *, int, int);
typedef int (*cu_device_mem_fn)(size_t *, int);
typedef int (*cu_ctx_retain_fn)(void **, int);
typedef int (*cu_ctx_release_fn)(int);
typedef int (*cu_ctx_set_fn)(void *);
typedef int (*cu_mem_info_fn)(size_t *, size_t *);
typedef int (*cu_err_fn)(int, const char **);

typedef struct drv {
    cu_init_fn init;
    cu_int_fn driver_version, device_count;
    cu_device_get_fn device_get;
    cu_device_name_fn device_name;
    cu_device_attr_fn device_attr;
    cu_device_mem_fn device_mem;
    cu_ctx_retain_fn ctx_retain;
    cu_ctx_release_fn ctx_release;
    cu_ctx_set_fn ctx_set;
    cu_mem_info_fn mem_info;
    cu_err_fn err_name;
} drv;

const char *kn_cuda_version_str(int v, char *buf, size_t n) {
    if (v <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

static const char *cu_err(const drv *d, int rc, char *buf, size_t n) {
    const char *name = NULL;
    if (d->err_name == NULL || d->err_name(rc, &name) != CU_OK || name == NULL)
        snprintf(buf, n, "CUresult %d", rc);
    else
        snprintf(buf, n, "%s", name);
    return buf;
}

/* dlopen by soname, then from the toolkit's library folder of the build. */
static void *open_lib(const char *name, int toolkit_dir, char *err, size_t n) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) return h;
    const char *e = dlerror();
    snprintf(err, n, "%s", e ? e : "dlopen failed");
#ifdef KN_CUDA_LIBDIR
    if (toolkit_dir && strchr(name, '/') == NULL) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", KN_CUDA_LIBDIR, name);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) return h;
    }
#else
    (void)toolkit_dir;
#endif
    return NULL;
}

static int has_device_nodes(const char *dir, char *why, size_t n) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(why, n, "no NVIDIA device nodes: cannot read %s", dir);
        return 0;
    }
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if ((strncmp(s, "nvidia", 6) == 0 && s[6] >= '0' && s[6] <= '9') || strcmp(s, "dxg") == 0) {
            found = 1;
            break;
        }
    }
    closedir(d);
    if (!found)
        snprintf(why, n,
                 "no NVIDIA device nodes (%s/nvidia[0-9]*): no GPU is visible to this machine or "
                 "container",
                 dir);
    return found;
}

#define SYM(h, field, name)                                                                        \
    do {                                                                                           \
        *(void **)(&d.field) = dlsym(h, name);                                                     \
        if (d.field == NULL) {                                                                     \
            snprintf(r->reason, sizeof r->reason,                                                  \
                     "driver library %s lacks %s (driver too old or not NVIDIA's)", libcuda, name); \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void probe_libs(const kn_cuda_probe_opts *o, kn_cuda_report *r, char *why, size_t n) {
    const char *names[3] = {o && o->libcublas ? o->libcublas : "libcublas.so.13",
                            o && o->libcublaslt ? o->libcublaslt : "libcublasLt.so.13",
                            o && o->libcudnn ? o->libcudnn : "libcudnn.so.9"};
    why[0] = '\0';
    for (int i = 0; i < 3; i++) {
        char err[384];
        void *h = open_lib(names[i], 1, err, sizeof err);
        if (h == NULL) {
            if (why[0] == '\0')
                snprintf(why, n, "%s not loadable: %.300s", i == 2 ? "cuDNN" : "cuBLAS", err);
            continue;
        }
        if (i == 0) {
            int (*prop)(int, int *);
            *(void **)(&prop) = dlsym(h, "cublasGetProperty");
            int ma = 0, mi = 0, pa = 0;
            if (prop && prop(0, &ma) == 0 && prop(1, &mi) == 0 && prop(2, &pa) == 0)
                r->cublas_version = ma * 10000 + mi * 100 + pa;
        } else if (i == 2) {
            size_t (*ver)(void);
            *(void **)(&ver) = dlsym(h, "cudnnGetVersion");
            if (ver) r->cudnn_version = (int)ver();
        }
        /* kept open: the backend uses them, and unloading CUDA libraries is
         * not something they promise to survive */
    }
}

void kn_cuda_probe(const kn_cuda_probe_opts *o, kn_cuda_report *r) {
    memset(r, 0, sizeof(*r));
    r->archs = KN_CUDA_ARCHS;
    r->runtime_version = KN_CUDA_RUNTIME_VERSION;
#ifndef DCMSERVE_HAVE_CUDA
    (void)o;
    (void)has_device_nodes;
    (void)probe_libs;
    (void)open_lib;
    (void)cu_err;
    snprintf(r->reason, sizeof r->reason,
             "this build has no CUDA backend (built with DCMSERVE_CUDA=OFF or without nvcc)");
    return;
#else
    r->built = 1;
    const char *dev = o && o->dev_dir ? o->dev_dir : "/dev";
    const char *libcuda = o && o->libcuda ? o->libcuda : "libcuda.so.1";
    char libwhy[400];
    int libs_done = 0;
    if (o && o->libs_always) {
        probe_libs(o, r, libwhy, sizeof libwhy);
        libs_done = 1;
    }
    if (!has_device_nodes(dev, r->reason, sizeof r->reason)) return;
    char err[384];
    void *h = open_lib(libcuda, 0, err, sizeof err);
    if (h == NULL) {
        snprintf(r->reason, sizeof r->reason, "no driver library: %s", err);
        return;
    }
    drv d = {0};
    SYM(h, init, "cuInit");
    SYM(h, driver_version, "cuDriverGetVersion");
    SYM(h, device_count, "cuDeviceGetCount");
    SYM(h, device_get, "cuDeviceGet");
    SYM(h, device_name, "cuDeviceGetName");
    SYM(h, device_attr, "cuDeviceGetAttribute");
    SYM(h, device_mem, "cuDeviceTotalMem_v2");
    SYM(h, ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(h, ctx_release, "cuDevicePrimaryCtxRelease_v2");
    SYM(h, ctx_set, "cuCtxSetCurrent");
    SYM(h, mem_info, "cuMemGetInfo_v2");
    SYM(h, err_name, "cuGetErrorName");
    char rt[16], dv[16], eb[96];
    if (d.driver_version(&r->driver_version) != CU_OK) r->driver_version = 0;
    if (r->driver_version > 0 && r->driver_version / 1000 < r->runtime_version / 1000) {
        snprintf(r->reason, sizeof r->reason,
                 "driver too old: it supports CUDA %s, this build needs the CUDA %s runtime "
                 "(update the NVIDIA driver)",
                 kn_cuda_version_str(r->driver_version, dv, sizeof dv),
                 kn_cuda_version_str(r->runtime_version, rt, sizeof rt));
        return;
    }
    int rc = d.init(0);
    if (rc != CU_OK) {
        if (rc == CU_ERR_NO_DEVICE)
            snprintf(r->reason, sizeof r->reason, "the driver reports no CUDA device (cuInit: %s)",
                     cu_err(&d, rc, eb, sizeof eb));
        else if (rc == CU_ERR_INSUFFICIENT_DRIVER)
            snprintf(r->reason, sizeof r->reason,
                     "driver too old: it supports CUDA %s, this build needs %s (cuInit: %s)",
                     kn_cuda_version_str(r->driver_version, dv, sizeof dv),
                     kn_cuda_version_str(r->runtime_version, rt, sizeof rt),
                     cu_err(&d, rc, eb, sizeof eb));
        else
            snprintf(r->reason, sizeof r->reason, "the driver did not initialise (cuInit: %s)",
                     cu_err(&d, rc, eb, sizeof eb));
        return;
    }
    int count = 0;
    rc = d.device_count(&count);
    if (rc != CU_OK || count <= 0) {
        snprintf(r->reason, sizeof r->reason, "the driver reports no CUDA device (%s)",
                 rc != CU_OK ? cu_err(&d, rc, eb, sizeof eb) : "count 0");
        return;
    }
    r->ngpus = count > KN_CUDA_MAX_GPUS ? KN_CUDA_MAX_GPUS : count;
    if (!libs_done) probe_libs(o, r, libwhy, sizeof libwhy);
    for (int i = 0; i < r->ngpus; i++) {
        kn_cuda_gpu *g = &r->gpu[i];
        int dev_h = 0;
        g->index = i;
        if ((rc = d.device_get(&dev_h, i)) != CU_OK) {
            snprintf(g->reason, sizeof g->reason, "cuDeviceGet: %s", cu_err(&d, rc, eb, sizeof eb));
            continue;
        }
        if (d.device_name(g->name, (int)sizeof g->name, dev_h) != CU_OK) snprintf(g->name, sizeof g->name, "?");
        d.device_attr(&g->cc_major, CU_ATTR_CC_MAJOR, dev_h);
        d.device_attr(&g->cc_minor, CU_ATTR_CC_MINOR, dev_h);
        size_t total = 0;
        if (d.device_mem(&total, dev_h) == CU_OK) g->total_bytes = total;
        if (g->cc_major < 8) {
            snprintf(g->reason, sizeof g->reason,
                     "compute capability %d.%d: this build has code for 8.0 and later", g->cc_major,
                     g->cc_minor);
            continue;
        }
        if (libwhy[0] != '\0') {
            snprintf(g->reason, sizeof g->reason, "%.250s", libwhy);
            continue;
        }
        if (o == NULL || !o->skip_context) {
            void *ctx = NULL;
            rc = d.ctx_retain(&ctx, dev_h);
            if (rc != CU_OK) {
                snprintf(g->reason, sizeof g->reason, "%s: %s",
                         rc == CU_ERR_DEVICE_UNAVAILABLE ? "device busy or unavailable (compute mode)"
                         : rc == CU_ERR_OUT_OF_MEMORY    ? "out of device memory"
                                                         : "no context",
                         cu_err(&d, rc, eb, sizeof eb));
                continue;
            }
            size_t fr = 0, tot = 0;
            if (d.ctx_set(ctx) == CU_OK && d.mem_info(&fr, &tot) == CU_OK) g->free_bytes = fr;
            d.ctx_set(NULL);
            d.ctx_release(dev_h);
            if (g->free_bytes < KN_CUDA_MIN_FREE) {
                snprintf(g->reason, sizeof g->reason, "out of device memory: %llu MiB free",
                         (unsigned long long)(g->free_bytes >> 20));
                continue;
            }
        }
        g->usable = 1;
        r->nusable++;
    }
    if (r->nusable == 0) {
        if (r->ngpus == 1 || libwhy[0] != '\0')
            snprintf(r->reason, sizeof r->reason, "GPU 0 (%.100s): %.300s", r->gpu[0].name,
                     libwhy[0] ? libwhy : r->gpu[0].reason);
        else
            snprintf(r->reason, sizeof r->reason, "none of %d GPUs is usable; GPU 0 (%.100s): %.250s",
                     r->ngpus, r->gpu[0].name, r->gpu[0].reason);
    }
    /* libcuda stays loaded: the CUDA runtime uses the same driver. */
#endif
}

ms_status kn_device_parse(const char *s, kn_device_spec *out) {
    out->kind = KN_DEVICE_AUTO;
    out->index = -1;
    if (s == NULL || s[0] == '\0' || strcmp(s, "auto") == 0) return MS_OK;
    if (strcmp(s, "cpu") == 0) {
        out->kind = KN_DEVICE_CPU;
        return MS_OK;
    }
    const char *rest = NULL;
    if (strncmp(s, "cuda", 4) == 0)
        rest = s + 4;
    else if (strncmp(s, "gpu", 3) == 0)
        rest = s + 3;
    if (rest != NULL) {
        out->kind = KN_DEVICE_CUDA;
        if (*rest == '\0') return MS_OK;
        if (*rest == ':' && rest[1] >= '0' && rest[1] <= '9') {
            char *end = NULL;
            long v = strtol(rest + 1, &end, 10);
            if (*end == '\0' && v >= 0 && v < KN_CUDA_MAX_GPUS) {
                out->index = (int)v;
                return MS_OK;
            }
        }
    }
    out->kind = KN_DEVICE_AUTO;
    return ms_errf(MS_EINVAL, "--device: expected auto, cpu, cuda or cuda:N (N < %d), got \"%s\"",
                   KN_CUDA_MAX_GPUS, s);
}

ms_status kn_device_select(const kn_device_spec *spec, const kn_cuda_report *r, int *gpu,
                           char *why, size_t why_len) {
    *gpu = -1;
    if (spec->kind == KN_DEVICE_CPU) {
        snprintf(why, why_len, "device cpu: chosen with --device=cpu");
        return MS_OK;
    }
    int pick = -1;
    if (spec->index >= 0) {
        if (spec->index >= r->ngpus) {
            if (r->ngpus == 0)
                return ms_errf(MS_EDEVICE, "--device=cuda:%d: no usable GPU: %s", spec->index,
                               r->reason);
            return ms_errf(MS_EDEVICE, "--device=cuda:%d: the driver reports %d GPU(s)",
                           spec->index, r->ngpus);
        }
        if (!r->gpu[spec->index].usable)
            return ms_errf(MS_EDEVICE, "--device=cuda:%d: GPU %d (%s) is not usable: %s",
                           spec->index, spec->index, r->gpu[spec->index].name,
                           r->gpu[spec->index].reason);
        pick = spec->index;
    } else {
        for (int i = 0; i < r->ngpus && pick < 0; i++)
            if (r->gpu[i].usable) pick = i;
    }
    if (pick < 0) {
        if (spec->kind == KN_DEVICE_CUDA)
            return ms_errf(MS_EDEVICE, "--device=cuda: no usable GPU: %s", r->reason);
        snprintf(why, why_len, "device auto: CPU, no usable GPU: %s", r->reason);
        return MS_OK;
    }
    *gpu = pick;
    const kn_cuda_gpu *g = &r->gpu[pick];
    snprintf(why, why_len, "device %s: GPU %d (%s, compute %d.%d, %llu MiB free)",
             spec->kind == KN_DEVICE_AUTO ? "auto" : "cuda", pick, g->name, g->cc_major,
             g->cc_minor, (unsigned long long)(g->free_bytes >> 20));
    return MS_OK;
}
