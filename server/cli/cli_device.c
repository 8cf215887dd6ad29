/* cli_device.c - --device: probe, choose, log once (cli_device.h). */
#include "cli_device.h"

#include <stdio.h>
#include <string.h>

#include "kn_cuda_backend.h"
#include "kn_cuda_mem.h"
#include "kn_cuda_precision.h"
#include "kn_cuda_probe.h"
#include "ms_log.h"

int cli_device_choose(const char *cmd, const char *device, double gpu_memory_fraction,
                      const char *precision, int *gpu) {
    kn_device_spec spec;
    kn_cuda_precision prec;
    *gpu = -1;
    if (kn_device_parse(device, &spec) != MS_OK || kn_cuda_precision_parse(precision, &prec) != MS_OK) {
        fprintf(stderr, "dcmserve %s: %s\n", cmd, ms_errmsg());
        return 2;
    }
    kn_cuda_report r;
    if (spec.kind == KN_DEVICE_CPU)
        memset(&r, 0, sizeof r); /* --device=cpu: the GPU and its driver are not touched */
    else
        kn_cuda_probe(NULL, &r);
    char why[768];
    if (kn_device_select(&spec, &r, gpu, why, sizeof why) != MS_OK) {
        MS_ERROR("%s", ms_errmsg());
        fprintf(stderr, "dcmserve %s: %s\n", cmd, ms_errmsg());
        return 1;
    }
    MS_INFO("%s", why);
    if (*gpu >= 0) {
        kn_cuda_budget_set(gpu_memory_fraction, r.gpu[*gpu].total_bytes);
        kn_cuda_precision_set(prec); /* before any plan is made */
        MS_INFO("--precision=%s: matrix products and convolutions on the GPU in %s",
                kn_cuda_precision_name(prec),
                prec == KN_CUDA_TF32 ? "TF32 (tensor cores allowed)" : "FP32 (no TF32)");
    } else if (prec != KN_CUDA_FP32) {
        MS_INFO("--precision=%s has no effect: the CPU computes in FP32", kn_cuda_precision_name(prec));
    }
    return 0;
}

int cli_device_open(const char *cmd, const char *device, int gpu, kn_backend *cpu,
                    kn_backend **dev) {
    *dev = NULL;
    if (gpu < 0) return 0;
    kn_device_spec spec;
    int asked = kn_device_parse(device, &spec) == MS_OK && spec.kind != KN_DEVICE_AUTO;
    if (kn_cuda_backend_new(gpu, cpu, dev) != MS_OK) {
        if (asked) {
            MS_ERROR("--device=%s: %s", device, ms_errmsg());
            fprintf(stderr, "dcmserve %s: --device=%s: %s\n", cmd, device, ms_errmsg());
            return 1;
        }
        MS_WARN("device auto: CPU, the CUDA backend of GPU %d failed: %s", gpu, ms_errmsg());
        return 0;
    }
    MS_INFO("CUDA backend %s: nodes with a GPU kernel run there, the others on the CPU "
            "(one placement line per plan)",
            kn_backend_name(*dev));
    return 0;
}
