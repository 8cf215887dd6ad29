/* check_cuda_backend.c - graphs on the GPU through the CUDA backend's table
 * (kernels/cuda/kn_cuda_backend), against the CPU backend (ctest label
 * `gpu`). Without a CUDA build or a usable GPU it prints one line and exits
 * 77 (skipped); bench/gpu/run.sh runs it on a GPU machine.
 *
 *   convnet_matches_cpu   the util_convnet network (every op family of the
 *                         table: cuDNN Conv2D with an uneven SAME, depthwise,
 *                         batch-norm, pools, Mean, Reshape, ConcatV2, cuBLASLt
 *                         MatMul, elementwise, Softmax, Transpose, Pad,
 *                         ResizeBilinear; ArgMax on the CPU), unfused and after
 *                         load-time fusion (_FusedConv2D, _FusedMatMul), three
 *                         requests each: within 1e-5 relative (+1e-6 absolute)
 *                         of the CPU, ArgMax equal
 *   padded_pool_transposed_matmul
 *                         MaxPool with EXPLICIT padding (ONNX MaxPool's pads)
 *                         and MatMul / _FusedMatMul with transpose_a,
 *                         transpose_b and both, and Sub / Mul broadcasting
 *                         [2, 9, 8, 3] against [2, 1, 1, 3] either way round
 *                         (an instance norm), unfused and fused: on the GPU
 *                         (no "runs on the CPU inside the CUDA backend" line at
 *                         load) and within 1e-5 relative of the CPU
 *   movenet_matches_cpu   util_convnet's movenet (StridedSlice with masks, Slice,
 *                         GatherV2, Sum / Max / Prod / Mean over several axes,
 *                         ResizeNearestNeighbor, BatchMatMulV2 with a broadcast
 *                         y and with adj_y, and int32 StridedSlice / GatherV2 of
 *                         Shape's value), three requests: within 1e-5 relative
 *                         (+1e-6 absolute) of the CPU, int32 results equal
 *   half_plus_two         the TF1 (also pinned to /device:GPU:0), TF2 and matrix
 *                         SavedModels loaded with rt_model_load_on: the CPU's bytes
 *   dicom_split           DcmDecodeHU -> DcmWindow split at load (host
 *                         _DcmDecodeRaw, GPU _DcmPixelTransform): real files
 *                         alone and in batches (native words and compressed
 *                         HU), with and without resize, NHWC / NCHW: the
 *                         fused CPU pass's bytes, bit for bit
 *   budget_cap            a --per_process_gpu_memory_fraction too small for
 *                         the network's filters refuses the plan naming the flag
 *   plan_arena            the convnet's second and third runs take their device
 *                         tensors and temporaries from the plan's arena (the
 *                         CPU's numbers);
 *                         freeing the plan gives its bytes back to the budget
 *                         and to cudaMemGetInfo
 *   plan_graphs           with CUDA graphs on, five runs of the convnet (the
 *                         sizing run, the capture, three replays) within the
 *                         CPU's tolerance; the log says what was captured
 *   memory_returns        after the graph and the backend are freed the budget
 *                         holds what it held before and cudaMemGetInfo's free
 *                         memory is back (within 64 MiB of library state)
 * Check runs without fork here (CUDA is initialised in the parent). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kn_cuda_probe.h"

#ifndef DCMSERVE_HAVE_CUDA
int main(void) {
    printf("cuda_backend: skipped: this build has no CUDA backend (DCMSERVE_CUDA=OFF or no nvcc)\n");
    return 77;
}
#else

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_cuda_backend.h"
#include "kn_cuda_mem.h"
#include "kn_cuda_rt.cuh"
#include "ms_log.h"
#include "rt_exec.h"
#include "rt_fuse.h"
#include "rt_graph.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_bundle.h"
#include "util_convnet.h"
#include "util_node.h"
#include "util_testdev.h"

static int g_gpu;
static uint64_t g_total;
static kn_backend *g_cpu, *g_dev;

static void check_close(const rt_tensor *got, const rt_tensor *want, const char *what) {
    ck_assert_int_eq(got->buf->device, 0);
    ck_assert_int_eq(got->dtype, want->dtype);
    ck_assert_msg(rt_shape_equal(&got->shape, &want->shape), "%s: shape differs", what);
    if (want->dtype != RT_DT_FLOAT) {
        ck_assert_msg(rt_tensor_equal(got, want), "%s differs from the CPU", what);
        return;
    }
    const float *g = got->data, *w = want->data;
    for (int64_t i = 0; i < want->nelem; i++)
        ck_assert_msg(fabsf(g[i] - w[i]) <= 1e-5f * fabsf(w[i]) + 1e-6f,
                      "%s[%lld]: GPU %.9g, CPU %.9g", what, (long long)i, g[i], w[i]);
}

static rt_graph *convnet(rt_gb *gb, int fused, kn_backend *device) {
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_graph *g = NULL;
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g), MS_OK);
    if (fused) ck_assert_int_eq(rt_fuse_graph(g, NULL), MS_OK);
    g->device = device;
    return g;
}

static ms_status plan_of(rt_graph *g, rt_plan **p) {
    rt_edge fe, fo[UT_CONVNET_NFETCH];
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    for (int i = 0; i < UT_CONVNET_NFETCH; i++)
        ck_assert_int_eq(rt_graph_tensor(g, ut_convnet_fetches[i], &fo[i]), MS_OK);
    return rt_plan_build(g, &fe, 1, fo, UT_CONVNET_NFETCH, NULL, 0, p);
}

static void run(rt_plan *p, rt_tensor *x, rt_tensor **outs) {
    kn_ctx ctx = {.nthreads = 1};
    ms_status st = rt_plan_run(p, &ctx, NULL, &x, outs);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
}

/* One request of x on the CPU plan p0 and the GPU plan p1, whose n <= 16
 * fetches are named names: within the tolerance of the CPU's numbers. */
static void fetches_match(rt_plan *p0, rt_plan *p1, rt_tensor *x, const char *const *names, int n,
                          int fused) {
    rt_tensor *want[16] = {0}, *got[16] = {0};
    ck_assert_int_le(n, 16);
    run(p0, x, want);
    run(p1, x, got);
    for (int i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s%s", names[i], fused ? " (fused)" : "");
        check_close(got[i], want[i], what);
        rt_tensor_unref(got[i]);
        rt_tensor_unref(want[i]);
    }
}

static void request_matches(rt_plan *p0, rt_plan *p1, rt_tensor *x, int fused) {
    fetches_match(p0, p1, x, ut_convnet_fetches, UT_CONVNET_NFETCH, fused);
}

static void convnet_case(int fused) {
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_convnet_build(gb);
    rt_graph *g0 = convnet(gb, fused, NULL), *g1 = convnet(gb, fused, g_dev);
    rt_plan *p0 = NULL, *p1 = NULL;
    ck_assert_int_eq(plan_of(g0, &p0), MS_OK);
    ms_status st = plan_of(g1, &p1);
    ck_assert_msg(st == MS_OK, "plan on the GPU: %s", ms_errmsg());
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = ut_convnet_input(100 + (unsigned)rep);
        request_matches(p0, p1, x, fused);
        rt_tensor_unref(x);
    }
    rt_plan_free(p0);
    rt_plan_free(p1);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}

START_TEST(test_convnet_matches_cpu) {
    convnet_case(0);
    convnet_case(1);
}
END_TEST

/* Graph-building helpers for padded_pool_transposed_matmul. */
static void pt_const(rt_gb *gb, const char *name, int rank, int64_t d0, int64_t d1, unsigned seed) {
    rt_tensor *t = NULL;
    rt_shape s = {.rank = rank, .dim = {d0, d1}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)t->data)[i] = (float)((seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    }
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

static void pt_reshape(rt_gb *gb, const char *name, const char *from, int32_t d0, int32_t d1) {
    char sh[64];
    snprintf(sh, sizeof sh, "%s_shape", name);
    ut_gb_consti(gb, sh, 1, (int64_t[]){2}, (int32_t[]){d0, d1});
    Tensorflow__NodeDef *n = rt_gb_node(gb, "Reshape", name);
    rt_gb_input(gb, n, from);
    rt_gb_input(gb, n, sh);
    rt_gb_attr_type(gb, n, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, n, "Tshape", RT_DT_INT32);
}

#define PT_NFETCH 7
static const char *const pt_fetches[PT_NFETCH] = {"mp",       "ba",        "mm_a",  "mm_ab",
                                                  "centered", "rcentered", "scaled"};

/* x [2, 9, 8, 3] -> MaxPool 3x3 / 2, EXPLICIT pads (top 1, bottom 2, left 1,
 * right 1) -> [2, 5, 4, 3] -> Reshape [2, 60] -> MatMul(transpose_b, w_t
 * [5, 60]) -> BiasAdd (fused: _FusedMatMul); Reshape [60, 2] ->
 * MatMul(transpose_a, w [60, 4]) and MatMul(transpose_a, transpose_b, w_t). */
static void pt_build(rt_gb *gb) {
    rt_shape xs = {.rank = 4, .dim = {2, 9, 8, 3}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    Tensorflow__NodeDef *mp = rt_gb_node(gb, "MaxPool", "mp");
    rt_gb_input(gb, mp, "x");
    rt_gb_attr_type(gb, mp, "T", RT_DT_FLOAT);
    rt_gb_attr_ilist(gb, mp, "ksize", (int64_t[]){1, 3, 3, 1}, 4);
    rt_gb_attr_ilist(gb, mp, "strides", (int64_t[]){1, 2, 2, 1}, 4);
    rt_gb_attr_str(gb, mp, "padding", "EXPLICIT");
    rt_gb_attr_ilist(gb, mp, "explicit_paddings", (int64_t[]){0, 0, 1, 2, 1, 1, 0, 0}, 8);
    pt_reshape(gb, "flat", "mp", 2, 60);
    pt_reshape(gb, "flat_t", "mp", 60, 2);
    pt_const(gb, "w_t", 2, 5, 60, 21);
    pt_const(gb, "w", 2, 60, 4, 22);
    pt_const(gb, "b", 1, 5, 0, 23);
    rt_gb_matmul(gb, "mm_b", "flat", "w_t", 0, 1, RT_DT_FLOAT);
    Tensorflow__NodeDef *ba = rt_gb_node(gb, "BiasAdd", "ba");
    rt_gb_input(gb, ba, "mm_b");
    rt_gb_input(gb, ba, "b");
    rt_gb_attr_type(gb, ba, "T", RT_DT_FLOAT);
    rt_gb_matmul(gb, "mm_a", "flat_t", "w", 1, 0, RT_DT_FLOAT);
    rt_gb_matmul(gb, "mm_ab", "flat_t", "w_t", 1, 1, RT_DT_FLOAT);
    /* an instance norm's broadcasts: x - mean [2, 1, 1, 3], mean - x, mean * x */
    ut_gb_consti(gb, "hw", 1, (int64_t[]){2}, (int32_t[]){1, 2});
    ut_gb_reduce(gb, "Mean", "mean", "x", "hw", 1);
    rt_gb_binary(gb, "Sub", "centered", "x", "mean", RT_DT_FLOAT);
    rt_gb_binary(gb, "Sub", "rcentered", "mean", "x", RT_DT_FLOAT);
    rt_gb_binary(gb, "Mul", "scaled", "mean", "x", RT_DT_FLOAT);
}

/* Builds the plan of g with stderr in a file; 1 when the log says a node
 * runs on the CPU inside the CUDA backend. */
static int pt_plan(rt_graph *g, rt_plan **p) {
    rt_edge fe, fo[PT_NFETCH];
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    for (int i = 0; i < PT_NFETCH; i++)
        ck_assert_int_eq(rt_graph_tensor(g, pt_fetches[i], &fo[i]), MS_OK);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    ck_assert(saved >= 0 && f != NULL);
    dup2(fileno(f), 2);
    ms_log_level lvl = ms_log_get_level();
    ms_log_set_level(MS_LOG_INFO);
    ms_status st = rt_plan_build(g, &fe, 1, fo, PT_NFETCH, NULL, 0, p);
    ms_log_set_level(lvl);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    char line[1024];
    int fell = 0;
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        fputs(line, stderr);
        if (strstr(line, "inside the CUDA backend")) fell = 1;
    }
    fclose(f);
    return fell;
}

START_TEST(test_padded_pool_transposed_matmul) {
    for (int fused = 0; fused < 2; fused++) {
        rt_gb *gb = NULL;
        ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
        pt_build(gb);
        rt_graph *g0 = convnet(gb, fused, NULL), *g1 = convnet(gb, fused, g_dev);
        rt_plan *p0 = NULL, *p1 = NULL;
        ck_assert_int_eq(pt_plan(g0, &p0), 0);
        ck_assert_msg(pt_plan(g1, &p1) == 0, "a node fell back to the CPU (fused %d)", fused);
        for (int rep = 0; rep < 2; rep++) {
            rt_tensor *x = ut_convnet_input(300 + (unsigned)rep);
            fetches_match(p0, p1, x, pt_fetches, PT_NFETCH, fused);
            rt_tensor_unref(x);
        }
        rt_plan_free(p0);
        rt_plan_free(p1);
        rt_graph_free(g0);
        rt_graph_free(g1);
        rt_gb_free(gb);
    }
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

START_TEST(test_movenet_matches_cpu) {
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_movenet_build(gb);
    rt_graph *g[2] = {convnet(gb, 0, NULL), convnet(gb, 0, g_dev)};
    rt_plan *p[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        rt_edge fe, fo[UT_MOVENET_NFETCH];
        ck_assert_int_eq(rt_graph_tensor(g[k], "x", &fe), MS_OK);
        for (int i = 0; i < UT_MOVENET_NFETCH; i++)
            ck_assert_int_eq(rt_graph_tensor(g[k], ut_movenet_fetches[i], &fo[i]), MS_OK);
        ms_status st = rt_plan_build(g[k], &fe, 1, fo, UT_MOVENET_NFETCH, NULL, 0, &p[k]);
        ck_assert_msg(st == MS_OK, "plan %d: %s", k, ms_errmsg());
    }
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = ut_movenet_input(200 + (unsigned)rep);
        fetches_match(p[0], p[1], x, ut_movenet_fetches, UT_MOVENET_NFETCH, 0);
        rt_tensor_unref(x);
    }
    for (int k = 0; k < 2; k++) {
        rt_plan_free(p[k]);
        rt_graph_free(g[k]);
    }
    rt_gb_free(gb);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

static const char *sig_tensor(const rt_model *m, int output) {
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    for (size_t i = 0; i < mg->n_signature_def; i++) {
        if (strcmp(mg->signature_def[i]->key, "serving_default") != 0) continue;
        const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
        if (output && sd->n_outputs > 0) return sd->outputs[0]->value->name;
        if (!output && sd->n_inputs > 0) return sd->inputs[0]->value->name;
    }
    return NULL;
}

START_TEST(test_half_plus_two) {
    static const char *const models[] = {"saved_model_half_plus_two_cpu/00000123",
                                         "saved_model_half_plus_two_gpu/00000123",
                                         "saved_model_half_plus_two_tf2_cpu/00000123",
                                         "matrix_half_plus_two/1"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        char rel[256], dir[1024];
        snprintf(rel, sizeof rel, "savedmodels/%s", models[k]);
        ck_assert_ptr_nonnull(ut_data_path(rel, dir, sizeof dir));
        const char *serve[] = {"serve"};
        rt_model *m0 = NULL, *m1 = NULL;
        ck_assert_msg(rt_model_load(dir, serve, 1, g_cpu, &m0) == MS_OK, "%s", ms_errmsg());
        ms_status st = rt_model_load_on(dir, serve, 1, g_cpu, g_dev, &m1);
        ck_assert_msg(st == MS_OK, "%s on the GPU: %s", models[k], ms_errmsg());
        const char *in = sig_tensor(m0, 0), *out = sig_tensor(m0, 1);
        rt_shape xs = strstr(models[k], "matrix") ? (rt_shape){.rank = 2, .dim = {2, 2}}
                                                  : (rt_shape){.rank = 2, .dim = {3, 1}};
        rt_tensor *x = NULL;
        ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &xs, &x), MS_OK);
        for (int64_t i = 0; i < x->nelem; i++) ((float *)x->data)[i] = 1.0f + 2.5f * (float)i;
        rt_feed f = {in, x};
        rt_tensor *want = NULL, *got = NULL;
        ck_assert_msg(rt_model_run(m0, &f, 1, &out, 1, NULL, 0, NULL, &want) == MS_OK, "%s",
                      ms_errmsg());
        st = rt_model_run(m1, &f, 1, &out, 1, NULL, 0, NULL, &got);
        ck_assert_msg(st == MS_OK, "%s on the GPU: %s", models[k], ms_errmsg());
        ck_assert_int_eq(got->buf->device, 0);
        ck_assert_msg(rt_tensor_equal(got, want), "%s: the GPU run differs", models[k]);
        rt_tensor_unref(want);
        rt_tensor_unref(got);
        rt_tensor_unref(x);
        rt_model_unref(m0);
        rt_model_unref(m1);
    }
}
END_TEST

/* ---- the split DICOM graph: _DcmDecodeRaw on the host, _DcmPixelTransform
 * on the GPU, against the fused pass on the CPU, bit for bit ---- */

static ms_status dicom_run(rt_graph *g, rt_tensor *x, rt_tensor **out) {
    rt_edge fe, fo;
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "win", &fo), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, &fe, 1, &fo, 1, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    kn_ctx ctx = {.nthreads = 1};
    *out = NULL;
    st = rt_plan_run(p, &ctx, NULL, &x, out);
    rt_plan_free(p);
    return st;
}

START_TEST(test_dicom_split) {
    const char *src = getenv("DCM_SRC");
    const char *pd = getenv("DCM_PYDICOM_FILES");
    if (pd == NULL) pd = "/usr/lib/python3/dist-packages/pydicom/data/test_files";
    static const char *const names[] = {"CT_small.dcm", "MR_small.dcm", "JPEG2000.dcm",
                                        "MR_small_RLE.dcm", "SC_rgb_rle.dcm"};
    char paths[6][1024];
    snprintf(paths[0], sizeof paths[0], "%s/tests/data/onnx/ct64.dcm", src ? src : ".");
    for (int i = 0; i < 5; i++) snprintf(paths[i + 1], sizeof paths[i + 1], "%s/%s", pd, names[i]);
    const char *all[6];
    for (int i = 0; i < 6; i++) all[i] = paths[i];
    int compared = 0;
    for (int c = 0; c < 3; c++) { /* no resize NHWC; resize masked NHWC; resize NCHW */
        rt_gb *gb = NULL;
        ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
        ut_dicom_window_graph(gb, c, 224, 200);
        Tensorflow__MetaGraphDef *mg = NULL;
        ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
        rt_graph *g0 = NULL, *g1 = NULL;
        ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g0), MS_OK);
        ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g1), MS_OK);
        g1->device = g_dev; /* before fusion, as rt_model_load_on */
        ck_assert_int_eq(rt_fuse_graph(g0, NULL), MS_OK);
        ck_assert_int_eq(rt_fuse_graph(g1, NULL), MS_OK);
        ck_assert_str_eq(g1->nodes[rt_graph_find(g1, "win")].kn.op, "_DcmPixelTransform");
        /* each file alone, the native three together, all together */
        for (int b = 0; b < 8; b++) {
            rt_tensor *in = b < 6 ? ut_dicom_strings(all + b, 1) : ut_dicom_strings(all, b == 6 ? 3 : 6);
            if (in == NULL) continue;
            rt_tensor *want = NULL, *got = NULL;
            ms_status s0 = dicom_run(g0, in, &want), s1 = dicom_run(g1, in, &got);
            ck_assert_msg((s0 == MS_OK) == (s1 == MS_OK), "case %d batch %d: CPU %d, GPU %d", c,
                          b, s0, s1);
            if (s0 == MS_OK) {
                ck_assert_int_eq(got->buf->device, 0);
                ck_assert(rt_shape_equal(&got->shape, &want->shape));
                const float *gv = got->data, *wv = want->data;
                for (int64_t i = 0; i < want->nelem; i++)
                    ck_assert_msg(memcmp(&gv[i], &wv[i], 4) == 0,
                                  "case %d batch %d [%lld]: GPU %.9g, CPU %.9g", c, b,
                                  (long long)i, gv[i], wv[i]);
                compared++;
            }
            rt_tensor_unref(in);
            rt_tensor_unref(want);
            rt_tensor_unref(got);
        }
        rt_graph_free(g0);
        rt_graph_free(g1);
        rt_gb_free(gb);
    }
    printf("cuda_backend: dicom_split: %d batches bit-identical to the CPU\n", compared);
    ck_assert_int_ge(compared, 9);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

START_TEST(test_budget_cap) {
    kn_cuda_budget_set(1e-9, g_total); /* about 140 bytes: not even one filter */
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_convnet_build(gb);
    rt_graph *g = convnet(gb, 0, g_dev);
    rt_plan *p = NULL;
    ms_status st = plan_of(g, &p);
    ck_assert_int_eq(st, MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "--per_process_gpu_memory_fraction") != NULL, "%s",
                  ms_errmsg());
    printf("cuda_backend: refused: %s\n", ms_errmsg());
    rt_graph_free(g);
    rt_gb_free(gb);
    kn_cuda_budget_set(0, g_total);
}
END_TEST

/* The plan's arena: the second run of the convnet's shape takes its device
 * tensors from one arena charged to the budget; freeing the plan (as an
 * unload does) gives exactly its bytes back and cudaMemGetInfo sees them. */
START_TEST(test_plan_arena) {
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_convnet_build(gb);
    rt_graph *g0 = convnet(gb, 1, NULL), *g1 = convnet(gb, 1, g_dev);
    rt_plan *p0 = NULL, *p1 = NULL;
    ck_assert_int_eq(plan_of(g0, &p0), MS_OK);
    ck_assert_msg(plan_of(g1, &p1) == MS_OK, "%s", ms_errmsg());
    rt_plan_meminfo mi;
    uint64_t held = 0;
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = ut_convnet_input(300 + (unsigned)rep);
        request_matches(p0, p1, x, 1);
        rt_tensor_unref(x);
        ck_assert_int_eq(rt_plan_memory(p1, 0, &mi), MS_OK);
        ck_assert_int_eq(mi.arenas, 1);
        held = kn_cuda_budget_held();
        ck_assert_uint_ge(held, mi.bytes);
    }
    printf("cuda_backend: plan arena: %d tensors, %d temporaries, %llu KiB\n", mi.ntensors,
           mi.ntemps, (unsigned long long)(mi.bytes >> 10));
    uint64_t free0 = 0, free1 = 0, tot = 0;
    ck_assert_int_eq(kn_cuda_mem_info(&free0, &tot), MS_OK);
    uint64_t bytes = mi.bytes;
    rt_plan_free(p1);
    ck_assert_uint_eq(kn_cuda_budget_held(), held - bytes);
    ck_assert_int_eq(kn_cuda_mem_info(&free1, &tot), MS_OK);
    ck_assert_uint_ge(free1, free0); /* cudaFree gave it back (the driver rounds to pages) */
    rt_plan_free(p0);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

/* CUDA graphs (--cuda_graphs): with graphs on, the convnet's runs after the
 * sizing run capture its segments of device nodes once and replay them,
 * within the CPU's tolerance like every run; the capture and each replay
 * log a line (which segments were captured or refused, and why). */
START_TEST(test_plan_graphs) {
    rt_device_graphs_set(1);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_convnet_build(gb);
    rt_graph *g0 = convnet(gb, 1, NULL), *g1 = convnet(gb, 1, g_dev);
    rt_plan *p0 = NULL, *p1 = NULL;
    ck_assert_int_eq(plan_of(g0, &p0), MS_OK);
    ck_assert_msg(plan_of(g1, &p1) == MS_OK, "%s", ms_errmsg());
    for (int rep = 0; rep < 5; rep++) {
        rt_tensor *x = ut_convnet_input(500 + (unsigned)rep);
        request_matches(p0, p1, x, 1);
        rt_tensor_unref(x);
    }
    rt_plan_free(p1);
    rt_plan_free(p0);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    rt_device_graphs_set(0);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

START_TEST(test_memory_returns) {
    kn_backend_free(g_dev); /* its block caches go back */
    g_dev = NULL;
    uint64_t free0 = 0, tot = 0, free1 = 0;
    ck_assert_int_eq(kn_cuda_mem_info(&free0, &tot), MS_OK);
    uint64_t held0 = kn_cuda_budget_held();
    ck_assert_msg(kn_cuda_backend_new(g_gpu, g_cpu, &g_dev) == MS_OK, "%s", ms_errmsg());
    convnet_case(1);
    ck_assert_uint_gt(kn_cuda_budget_held(), held0); /* the cached blocks */
    kn_backend_free(g_dev);
    g_dev = NULL;
    ck_assert_uint_eq(kn_cuda_budget_held(), held0);
    ck_assert_int_eq(kn_cuda_mem_info(&free1, &tot), MS_OK);
    printf("cuda_backend: free before %llu MiB, after %llu MiB\n", (unsigned long long)(free0 >> 20),
           (unsigned long long)(free1 >> 20));
    ck_assert_msg(free1 + (64ull << 20) >= free0, "GPU memory not returned: %llu -> %llu MiB",
                  (unsigned long long)(free0 >> 20), (unsigned long long)(free1 >> 20));
}
END_TEST

int main(void) {
    kn_cuda_report r;
    kn_cuda_probe(NULL, &r);
    kn_device_spec spec = {KN_DEVICE_AUTO, -1};
    char why[768];
    g_gpu = -1;
    kn_device_select(&spec, &r, &g_gpu, why, sizeof why);
    if (g_gpu < 0) {
        printf("cuda_backend: skipped: no usable GPU: %s\n", r.reason);
        return 77;
    }
    printf("cuda_backend: %s\n", why);
    setenv("CK_FORK", "no", 1);
    g_total = r.gpu[g_gpu].total_bytes;
    kn_cuda_budget_set(0, g_total);
    g_cpu = kn_cpu_backend_new(1);
    if (kn_cuda_backend_new(g_gpu, g_cpu, &g_dev) != MS_OK) {
        printf("cuda_backend: %s\n", ms_errmsg());
        return 1;
    }
    const tu_case cases[] = {
        {"convnet_matches_cpu", test_convnet_matches_cpu},
        {"padded_pool_transposed_matmul", test_padded_pool_transposed_matmul},
        {"movenet_matches_cpu", test_movenet_matches_cpu},
        {"half_plus_two", test_half_plus_two},
        {"dicom_split", test_dicom_split},
        {"budget_cap", test_budget_cap},
        {"plan_arena", test_plan_arena},
        {"plan_graphs", test_plan_graphs},
        {"memory_returns", test_memory_returns},
    };
    int rc = tu_suite_main("cuda_backend", cases, sizeof(cases) / sizeof(cases[0]));
    kn_backend_free(g_dev);
    kn_backend_free(g_cpu);
    return rc;
}
#endif
