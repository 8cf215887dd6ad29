/* cli_device.c - --device: probe, choose, log once (cli_device.h). */
#include "cli_device.h"

#include <stdio.h>
#include <string.h>

#include "kn_cuda_mem.h"
#include "kn_cuda_probe.h"
#include "ms_log.h"

int cli_device_choose(const char *cmd, const char *device, double gpu_memory_fraction, int *gpu) {
    kn_device_spec spec;
    *gpu = -1;
    if (kn_device_parse(device, &spec) != MS_OK) {
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
        /* Honest about what runs where: the executor has no CUDA placement
         * yet (docs/gpu.md), so every node runs on the CPU backend. */
        MS_WARN("CUDA backend: graph ops do not run on the GPU yet; every node falls back to the "
                "CPU backend (docs/gpu.md)");
    }
    return 0;
}
