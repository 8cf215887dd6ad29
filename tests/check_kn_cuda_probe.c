/* check_kn_cuda_probe.c - the host side of the CUDA backend, on any machine:
 * --device parsing, the GPU diagnosis (kernels/cuda/kn_cuda_probe.c) driven
 * through its real inputs (a device folder, driver library names), the
 * device choice over reports, and the --per_process_gpu_memory_fraction
 * budget (kn_cuda_mem.c); in a CUDA build also the host-side filter
 * conversion for cuDNN (TensorFlow HWIO / depthwise -> KRSC), checked by a
 * direct grouped convolution over the converted filter, as cuDNN defines
 * it, against the CPU backend's Conv2D / DepthwiseConv2dNative. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kn_cuda_mem.h"
#ifdef DCMSERVE_HAVE_CUDA
#include "kn_cuda_conv.cuh"
#endif
#include "kn_cuda_probe.h"
#include "util_node.h"

#define MIB ((uint64_t)1 << 20)

START_TEST(test_parse) {
    kn_device_spec s;
    ck_assert_int_eq(kn_device_parse(NULL, &s), MS_OK);
    ck_assert_int_eq(s.kind, KN_DEVICE_AUTO);
    ck_assert_int_eq(kn_device_parse("auto", &s), MS_OK);
    ck_assert_int_eq(s.kind, KN_DEVICE_AUTO);
    ck_assert_int_eq(kn_device_parse("cpu", &s), MS_OK);
    ck_assert_int_eq(s.kind, KN_DEVICE_CPU);
    ck_assert_int_eq(kn_device_parse("cuda", &s), MS_OK);
    ck_assert_int_eq(s.kind, KN_DEVICE_CUDA);
    ck_assert_int_eq(s.index, -1);
    ck_assert_int_eq(kn_device_parse("cuda:3", &s), MS_OK);
    ck_assert_int_eq(s.kind, KN_DEVICE_CUDA);
    ck_assert_int_eq(s.index, 3);
    ck_assert_int_eq(kn_device_parse("gpu:0", &s), MS_OK);
    ck_assert_int_eq(s.index, 0);
    const char *bad[] = {"cuda:", "cuda:-1", "cuda:x", "cuda:99", "tpu", "cuda0", "CPU", "cuda:1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(kn_device_parse(bad[i], &s), MS_EINVAL);
        ck_assert_msg(strstr(ms_errmsg(), bad[i]) != NULL, "%s: %s", bad[i], ms_errmsg());
    }
}
END_TEST

static char g_dir[64];

static void make_dev_dir(int with_node) {
    snprintf(g_dir, sizeof g_dir, "/tmp/kn_cuda_probe_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    if (with_node) {
        char p[128];
        snprintf(p, sizeof p, "%s/nvidia0", g_dir);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
}

static void drop_dev_dir(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/nvidia0", g_dir);
    unlink(p);
    rmdir(g_dir);
}

/* No device nodes: the first reason, whatever the machine has. */
START_TEST(test_no_device_nodes) {
    make_dev_dir(0);
    kn_cuda_report r;
    kn_cuda_probe(&(kn_cuda_probe_opts){.dev_dir = g_dir}, &r);
    drop_dev_dir();
    ck_assert_int_eq(r.nusable, 0);
    ck_assert_int_eq(r.ngpus, 0);
#ifdef DCMSERVE_HAVE_CUDA
    ck_assert_int_eq(r.built, 1);
    ck_assert_int_gt(r.runtime_version, 0);
    ck_assert_msg(strstr(r.reason, "no NVIDIA device nodes") != NULL, "%s", r.reason);
    ck_assert_msg(strstr(r.reason, g_dir) != NULL, "%s", r.reason);
#else
    ck_assert_int_eq(r.built, 0);
    ck_assert_msg(strstr(r.reason, "no CUDA backend") != NULL, "%s", r.reason);
#endif
}
END_TEST

/* Device nodes but no driver library: "no driver library" with dlerror. */
START_TEST(test_no_driver_library) {
#ifndef DCMSERVE_HAVE_CUDA
    return; /* a build without CUDA stops at the first check (test_no_device_nodes) */
#endif
    make_dev_dir(1);
    kn_cuda_report r;
    kn_cuda_probe(&(kn_cuda_probe_opts){.dev_dir = g_dir, .libcuda = "libdcmserve-absent-cuda.so.1"},
                  &r);
    ck_assert_int_eq(r.nusable, 0);
    ck_assert_msg(strncmp(r.reason, "no driver library: ", 19) == 0, "%s", r.reason);
    ck_assert_msg(strstr(r.reason, "libdcmserve-absent-cuda.so.1") != NULL, "%s", r.reason);
    /* A library that is not NVIDIA's driver: the missing entry point is named. */
    kn_cuda_probe(&(kn_cuda_probe_opts){.dev_dir = g_dir, .libcuda = "libm.so.6"}, &r);
    drop_dev_dir();
    ck_assert_int_eq(r.nusable, 0);
    ck_assert_msg(strstr(r.reason, "lacks cuInit") != NULL, "%s", r.reason);
}
END_TEST

static kn_cuda_report two_gpus(void) {
    kn_cuda_report r;
    memset(&r, 0, sizeof r);
    r.built = 1;
    r.ngpus = 2;
    snprintf(r.gpu[0].name, sizeof r.gpu[0].name, "GPU-A");
    snprintf(r.gpu[0].reason, sizeof r.gpu[0].reason, "device busy or unavailable (compute mode)");
    snprintf(r.gpu[1].name, sizeof r.gpu[1].name, "GPU-B");
    r.gpu[1].index = 1;
    r.gpu[1].usable = 1;
    r.gpu[1].cc_major = 9;
    r.gpu[1].free_bytes = 1000 * MIB;
    r.nusable = 1;
    return r;
}

START_TEST(test_select) {
    int gpu = 7;
    char why[512];
    kn_device_spec s;
    /* nothing usable */
    kn_cuda_report none;
    memset(&none, 0, sizeof none);
    snprintf(none.reason, sizeof none.reason, "no NVIDIA device nodes (/dev/nvidia[0-9]*)");
    kn_device_parse("auto", &s);
    ck_assert_int_eq(kn_device_select(&s, &none, &gpu, why, sizeof why), MS_OK);
    ck_assert_int_eq(gpu, -1);
    ck_assert_msg(strstr(why, "CPU") && strstr(why, none.reason), "%s", why);
    kn_device_parse("cuda", &s);
    ck_assert_int_eq(kn_device_select(&s, &none, &gpu, why, sizeof why), MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), none.reason) != NULL, "%s", ms_errmsg());
    kn_device_parse("cuda:1", &s);
    ck_assert_int_eq(kn_device_select(&s, &none, &gpu, why, sizeof why), MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), none.reason) != NULL, "%s", ms_errmsg());
    kn_device_parse("cpu", &s);
    ck_assert_int_eq(kn_device_select(&s, &none, &gpu, why, sizeof why), MS_OK);
    ck_assert_int_eq(gpu, -1);
    /* GPU 0 busy, GPU 1 usable */
    kn_cuda_report r = two_gpus();
    kn_device_parse("auto", &s);
    ck_assert_int_eq(kn_device_select(&s, &r, &gpu, why, sizeof why), MS_OK);
    ck_assert_int_eq(gpu, 1);
    ck_assert_msg(strstr(why, "GPU-B") != NULL, "%s", why);
    kn_device_parse("cuda", &s);
    ck_assert_int_eq(kn_device_select(&s, &r, &gpu, why, sizeof why), MS_OK);
    ck_assert_int_eq(gpu, 1);
    kn_device_parse("cuda:0", &s);
    ck_assert_int_eq(kn_device_select(&s, &r, &gpu, why, sizeof why), MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), "busy") && strstr(ms_errmsg(), "GPU-A"), "%s", ms_errmsg());
    kn_device_parse("cuda:5", &s);
    ck_assert_int_eq(kn_device_select(&s, &r, &gpu, why, sizeof why), MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), "2 GPU(s)") != NULL, "%s", ms_errmsg());
    kn_device_parse("cpu", &s);
    ck_assert_int_eq(kn_device_select(&s, &r, &gpu, why, sizeof why), MS_OK);
    ck_assert_int_eq(gpu, -1);
}
END_TEST

START_TEST(test_budget) {
    kn_cuda_budget_set(0.5, 1000 * MIB);
    ck_assert_int_eq(kn_cuda_budget_take("model a version 1", 400 * MIB), MS_OK);
    ck_assert_int_eq(kn_cuda_budget_take("model b version 1", 200 * MIB), MS_ENOMEM);
    const char *m = ms_errmsg();
    ck_assert_msg(strstr(m, "model b version 1 needs 200 MiB") != NULL, "%s", m);
    ck_assert_msg(strstr(m, "--per_process_gpu_memory_fraction=0.5 allows 500 MiB") != NULL, "%s", m);
    ck_assert_msg(strstr(m, "400 MiB are held") != NULL, "%s", m);
    ck_assert_uint_eq(kn_cuda_budget_held(), 400 * MIB);
    ck_assert_int_eq(kn_cuda_budget_take("model c version 1", 100 * MIB), MS_OK);
    kn_cuda_budget_give(400 * MIB); /* a unloads */
    ck_assert_uint_eq(kn_cuda_budget_held(), 100 * MIB);
    ck_assert_int_eq(kn_cuda_budget_take("model b version 1", 400 * MIB), MS_OK);
    ck_assert_int_eq(kn_cuda_budget_take("huge", UINT64_MAX), MS_ENOMEM);
    kn_cuda_budget_give(500 * MIB);
    ck_assert_uint_eq(kn_cuda_budget_held(), 0);
    /* no fraction: the device's memory is the cap */
    kn_cuda_budget_set(0, 1000 * MIB);
    ck_assert_int_eq(kn_cuda_budget_take("big", 1001 * MIB), MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "the device has 1000 MiB") != NULL, "%s", ms_errmsg());
    ck_assert_int_eq(kn_cuda_budget_take("fits", 1000 * MIB), MS_OK);
    kn_cuda_budget_give(1000 * MIB);
}
END_TEST

START_TEST(test_version_str) {
    char b[16];
    ck_assert_str_eq(kn_cuda_version_str(13000, b, sizeof b), "13.0");
    ck_assert_str_eq(kn_cuda_version_str(12080, b, sizeof b), "12.8");
    ck_assert_str_eq(kn_cuda_version_str(0, b, sizeof b), "none");
}
END_TEST

#ifdef DCMSERVE_HAVE_CUDA
/* y[n,oy,ox,o] = sum over ky, kx and the group's input channels i of
 * x[n, oy*s + ky - pad, ox*s + kx - pad, g*cpg + i] * w[o, ky, kx, i] (OHWI). */
static void grouped_conv(const float *x, int n, int h, int w, int c, const float *ohwi, int k,
                         int oc, int groups, int s, int pad, int oh, int ow, float *y) {
    const int cpg = c / groups, opg = oc / groups;
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int o = 0; o < oc; o++) {
                    double acc = 0;
                    const int g = o / opg;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            int iy = oy * s + ky - pad, ix = ox * s + kx - pad;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                            for (int i = 0; i < cpg; i++)
                                acc += (double)x[(((size_t)b * h + iy) * w + ix) * c + g * cpg + i] *
                                       ohwi[(((size_t)o * k + ky) * k + kx) * cpg + i];
                        }
                    y[(((size_t)b * oh + oy) * ow + ox) * oc + o] = (float)acc;
                }
}

START_TEST(test_conv_filter_layout) {
    for (int dw = 0; dw < 2; dw++) {
        const int n = 2, h = 9, w = 7, c = 4, k = 3, m = dw ? 3 : 6, oc = dw ? c * m : m;
        rt_tensor *x = tu_iota_f32(TU_SHAPE(n, h, w, c), -1.f, 0.013f);
        rt_tensor *f = tu_iota_f32(TU_SHAPE(k, k, c, m), 0.7f, -0.011f);
        Tensorflow__NodeDef *def = tu_node_new(dw ? "DepthwiseConv2dNative" : "Conv2D", "c");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_ints(def, "strides", 1, 1, 1, 1);
        tu_attr_s(def, "padding", "SAME");
        rt_tensor *in[2] = {x, f};
        rt_tensor *want = tu_run1(def, in, 2);
        float *ohwi = malloc(sizeof(float) * (size_t)(k * k * c * m));
        kn_cuda_conv_filter_from_tf(rt_tensor_f32(f), k, k, c, m, dw, ohwi);
        float *y = malloc(sizeof(float) * (size_t)want->nelem);
        grouped_conv(rt_tensor_f32(x), n, h, w, c, ohwi, k, oc, dw ? c : 1, 1, 1, h, w, y);
        tu_check_f32(want, TU_SHAPE(n, h, w, oc), y, (int)want->nelem, 1e-5f);
        free(y);
        free(ohwi);
        tu_unref(&want, 1);
        tu_unref(&x, 1);
        tu_unref(&f, 1);
    }
}
END_TEST
#endif

int main(void) {
    const tu_case cases[] = {
        {"parse", test_parse},
        {"no_device_nodes", test_no_device_nodes},
        {"no_driver_library", test_no_driver_library},
        {"select", test_select},
        {"budget", test_budget},
        {"version_str", test_version_str},
#ifdef DCMSERVE_HAVE_CUDA
        {"conv_filter_layout", test_conv_filter_layout},
#endif
    };
    return tu_suite_main("kn_cuda_probe", cases, sizeof(cases) / sizeof(cases[0]));
}
