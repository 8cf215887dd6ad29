/* check_cuda_backend_ops.c - the both-backends op test's GPU half (ctest
 * label `gpu`): every case of the op table (util_opcases) run on the CPU
 * kernels and on the CUDA backend (kn_cuda_backend_new: its inputs copied to
 * the GPU, its kernel prepared with the constant inputs, its outputs copied
 * back), compared with the op's tolerance: bit for bit where the GPU does
 * the CPU's one IEEE operation or moves bytes, 1e-5 relative where it sums
 * in another order (cuBLASLt, cuDNN, reductions) or uses other
 * transcendental functions. Cases the GPU path does not take (empty
 * tensors, a ConcatV2 of 2,000 inputs) run the CPU kernel inside the
 * backend and must give the same answers too. bench/gpu/run.sh runs it,
 * also under compute-sanitizer. Without a CUDA build or a usable GPU it
 * prints one line and exits 77 (skipped); its CPU half, the same table on
 * the test device, is check_backend_ops.
 *   tf32_products   the matrix-product and convolution cases again with
 *                   --precision=tf32 (kn_cuda_precision_set; plans made
 *                   after it): within 1e-2 relative of the CPU (TF32 keeps
 *                   10 mantissa bits of each operand); prints the largest
 *                   absolute difference per op family (what tf32 changes). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cuda_probe.h"

#ifndef DCMSERVE_HAVE_CUDA
int main(void) {
    printf("cuda_backend_ops: skipped: this build has no CUDA backend (DCMSERVE_CUDA=OFF or no "
           "nvcc)\n");
    return 77;
}
#else

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_cuda_backend.h"
#include "kn_cuda_mem.h"
#include "kn_cuda_precision.h"
#include "util_node.h"
#include "util_opcases.h"

static kn_backend *g_cpu, *g_dev;

START_TEST(test_cases_match_cpu) {
    ut_opcase *cases = NULL;
    int n = ut_opcases(&cases);
    for (int i = 0; i < n; i++)
        ut_opcase_check(g_cpu, g_dev, &cases[i]);
    printf("cuda_backend_ops: %d cases on %s\n", n, kn_backend_name(g_dev));
    ut_opcases_free(cases, n);
}
END_TEST

/* The cases whose plans --precision changes: cuBLASLt products and cuDNN
 * convolutions. */
static int tf32_family(const char *op) {
    return strstr(op, "MatMul") != NULL || strstr(op, "Conv") != NULL;
}

START_TEST(test_tf32_products) {
    ut_opcase *cases = NULL;
    int n = ut_opcases(&cases), ran = 0;
    double mm = 0, conv = 0;
    kn_cuda_precision_set(KN_CUDA_TF32);
    for (int i = 0; i < n; i++) {
        if (!tf32_family(cases[i].def->op)) continue;
        ut_opcase_check_tol(g_cpu, g_dev, &cases[i], 1e-2f,
                            strstr(cases[i].def->op, "MatMul") ? &mm : &conv);
        ran++;
    }
    kn_cuda_precision_set(KN_CUDA_FP32);
    ck_assert_int_ge(ran, 20);
    printf("cuda_backend_ops: --precision=tf32: %d cases, largest |GPU - CPU|: matrix products "
           "%.3g, convolutions %.3g\n", ran, mm, conv);
    ut_opcases_free(cases, n);
}
END_TEST

int main(void) {
    kn_cuda_report r;
    kn_cuda_probe(NULL, &r);
    kn_device_spec spec = {KN_DEVICE_AUTO, -1};
    char why[768];
    int gpu = -1;
    kn_device_select(&spec, &r, &gpu, why, sizeof why);
    if (gpu < 0) {
        printf("cuda_backend_ops: skipped: no usable GPU: %s\n", r.reason);
        return 77;
    }
    printf("cuda_backend_ops: %s\n", why);
    setenv("CK_FORK", "no", 1); /* CUDA is initialised in this process */
    kn_cuda_budget_set(0, r.gpu[gpu].total_bytes);
    g_cpu = kn_cpu_backend_new(1);
    if (kn_cuda_backend_new(gpu, g_cpu, &g_dev) != MS_OK) {
        printf("cuda_backend_ops: %s\n", ms_errmsg());
        return 1;
    }
    const tu_case cases[] = {{"cases_match_cpu", test_cases_match_cpu},
                             {"tf32_products", test_tf32_products}};
    int rc = tu_suite_main("cuda_backend_ops", cases, sizeof(cases) / sizeof(cases[0]));
    kn_backend_free(g_dev);
    kn_backend_free(g_cpu);
    return rc;
}
#endif
