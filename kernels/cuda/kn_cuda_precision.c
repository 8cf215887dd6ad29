/* kn_cuda_precision.c - --precision (kn_cuda_precision.h). */
#include "kn_cuda_precision.h"

#include <stdatomic.h>
#include <string.h>

static atomic_int g_precision = KN_CUDA_FP32;

ms_status kn_cuda_precision_parse(const char *s, kn_cuda_precision *out) {
    *out = KN_CUDA_FP32;
    if (s == NULL || s[0] == '\0' || strcmp(s, "fp32") == 0) return MS_OK;
    if (strcmp(s, "tf32") == 0) {
        *out = KN_CUDA_TF32;
        return MS_OK;
    }
    if (strcmp(s, "fp16") == 0)
        return ms_errf(MS_ENOTSUP, "--precision=fp16 is not implemented: the CUDA backend has no "
                                   "half-precision kernels yet (use fp32 or tf32)");
    return ms_errf(MS_EINVAL, "--precision: expected fp32, tf32 or fp16, got \"%s\"", s);
}

void kn_cuda_precision_set(kn_cuda_precision p) {
    atomic_store(&g_precision, p == KN_CUDA_TF32 ? KN_CUDA_TF32 : KN_CUDA_FP32);
}

kn_cuda_precision kn_cuda_precision_get(void) {
    return (kn_cuda_precision)atomic_load(&g_precision);
}

const char *kn_cuda_precision_name(kn_cuda_precision p) {
    return p == KN_CUDA_TF32 ? "tf32" : "fp32";
}
