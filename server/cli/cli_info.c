/* cli_info.c - `dcmserve info [--json]`: version, build options, the CPU
 * features in use and, per GPU, name / driver / runtime / cuBLAS / cuDNN
 * versions / free memory, or the reason no GPU is usable. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_flags.h"
#include "kn_cpu_gemm.h"
#include "kn_cuda_probe.h"
#include "ms_build.h"

static const char *cublas_str(int v, char *buf, size_t n) {
    if (v <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    return buf;
}

static const char *cudnn_str(int v, char *buf, size_t n) {
    if (v <= 0)
        snprintf(buf, n, "none");
    else /* cuDNN 9: major*10000 + minor*100 + patch */
        snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    return buf;
}

void cli_print_version(void) {
    printf("dcmserve %s (commit %s, build %s, CUDA %s, sanitizers %s)\n", ms_build_version(),
           ms_build_commit(), ms_build_type(), ms_build_cuda() ? "on" : "off",
           ms_build_sanitize() ? "on" : "off");
}

static void print_text(const kn_cuda_report *r, const char *isa, long cores) {
    char a[24], b[24], c[24], d[24];
    cli_print_version();
    if (r->built)
        printf("build: CUDA on (runtime %s, compute capabilities %s; driver, cuBLAS and cuDNN "
               "loaded at run time)\n",
               kn_cuda_version_str(r->runtime_version, a, sizeof a), r->archs);
    else
        printf("build: CUDA off\n");
    printf("cpu: %ld cores, kernels use %s\n", cores, isa);
    printf("driver: %s, runtime: %s, cuBLAS: %s, cuDNN: %s\n",
           kn_cuda_version_str(r->driver_version, a, sizeof a),
           kn_cuda_version_str(r->runtime_version, b, sizeof b),
           cublas_str(r->cublas_version, c, sizeof c), cudnn_str(r->cudnn_version, d, sizeof d));
    for (int i = 0; i < r->ngpus; i++) {
        const kn_cuda_gpu *g = &r->gpu[i];
        printf("gpu %d: %s, compute %d.%d, %llu MiB total, %llu MiB free, %s%s\n", i, g->name,
               g->cc_major, g->cc_minor, (unsigned long long)(g->total_bytes >> 20),
               (unsigned long long)(g->free_bytes >> 20), g->usable ? "usable" : "not usable: ",
               g->usable ? "" : g->reason);
    }
    if (r->nusable == 0) printf("gpu: none usable: %s\n", r->reason);
}

static int print_json(const kn_cuda_report *r, const char *isa, long cores) {
    char a[24];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", ms_build_version());
    cJSON *build = cJSON_AddObjectToObject(root, "build");
    cJSON_AddStringToObject(build, "commit", ms_build_commit());
    cJSON_AddStringToObject(build, "type", ms_build_type());
    cJSON_AddBoolToObject(build, "sanitize", ms_build_sanitize());
    cJSON_AddBoolToObject(build, "cuda", r->built);
    cJSON *caps = cJSON_AddArrayToObject(build, "compute_capabilities");
    char archs[128];
    snprintf(archs, sizeof archs, "%s", r->archs);
    for (char *save = NULL, *t = strtok_r(archs, " ", &save); t; t = strtok_r(NULL, " ", &save))
        cJSON_AddItemToArray(caps, cJSON_CreateString(t));
    if (r->built)
        cJSON_AddStringToObject(build, "cuda_runtime",
                                kn_cuda_version_str(r->runtime_version, a, sizeof a));
    else
        cJSON_AddNullToObject(build, "cuda_runtime");
    cJSON *cpu = cJSON_AddObjectToObject(root, "cpu");
    cJSON_AddNumberToObject(cpu, "cores", (double)cores);
    cJSON_AddStringToObject(cpu, "kernels", isa);
    cJSON *cuda = cJSON_AddObjectToObject(root, "cuda");
    if (r->driver_version > 0)
        cJSON_AddStringToObject(cuda, "driver", kn_cuda_version_str(r->driver_version, a, sizeof a));
    else
        cJSON_AddNullToObject(cuda, "driver");
    if (r->cublas_version > 0)
        cJSON_AddStringToObject(cuda, "cublas", cublas_str(r->cublas_version, a, sizeof a));
    else
        cJSON_AddNullToObject(cuda, "cublas");
    if (r->cudnn_version > 0)
        cJSON_AddStringToObject(cuda, "cudnn", cudnn_str(r->cudnn_version, a, sizeof a));
    else
        cJSON_AddNullToObject(cuda, "cudnn");
    cJSON *gpus = cJSON_AddArrayToObject(root, "gpus");
    for (int i = 0; i < r->ngpus; i++) {
        const kn_cuda_gpu *g = &r->gpu[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "name", g->name);
        snprintf(a, sizeof a, "%d.%d", g->cc_major, g->cc_minor);
        cJSON_AddStringToObject(o, "compute_capability", a);
        cJSON_AddNumberToObject(o, "total_bytes", (double)g->total_bytes);
        cJSON_AddNumberToObject(o, "free_bytes", (double)g->free_bytes);
        cJSON_AddBoolToObject(o, "usable", g->usable);
        if (g->usable)
            cJSON_AddNullToObject(o, "reason");
        else
            cJSON_AddStringToObject(o, "reason", g->reason);
        cJSON_AddItemToArray(gpus, o);
    }
    cJSON_AddNumberToObject(root, "usable_gpus", r->nusable);
    if (r->nusable == 0)
        cJSON_AddStringToObject(root, "reason", r->reason);
    else
        cJSON_AddNullToObject(root, "reason");
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (s == NULL) {
        fprintf(stderr, "dcmserve info: out of memory\n");
        return 1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

int cli_info(int argc, char **argv) {
    int json = 0, help = 0;
    cli_flag flags[] = {
        {"json", CLI_FLAG_BOOL, NULL, &json},
        {"help", CLI_FLAG_BOOL, NULL, &help},
        {NULL, 0, NULL, NULL},
    };
    if (cli_flags_parse("info", argc, argv, flags) != 0) return 2;
    if (help) {
        printf("usage: dcmserve info [--json]\n\n"
               "Prints the version, the build options (CUDA on/off, compute capabilities), the CPU\n"
               "kernels in use and, per GPU, its name, driver / runtime / cuBLAS / cuDNN versions\n"
               "and free memory, or the reason no GPU is usable. --json: the same as one object.\n");
        return 0;
    }
    kn_cuda_report r;
    kn_cuda_probe(&(kn_cuda_probe_opts){.libs_always = 1}, &r);
    const char *isa = kn__gemm_isa_name(kn__gemm_isa());
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (json) return print_json(&r, isa, cores);
    print_text(&r, isa, cores);
    return 0;
}
