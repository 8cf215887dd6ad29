/* check_limits.c - no fixed limits on a graph's size: SavedModels written by
 * the graph builder with a RestoreV2 of 10,000 tensors (and an AddN of
 * 10,000 inputs), a node of 2,000 outputs, and a graph of 200,000 nodes load
 * and run with the CPU backend and give the values worked out below. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_bundle.h"
#include "util_node.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static rt_tensor *scalar_f(float v) {
    rt_shape s = rt_shape_make(0, NULL);
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    rt_tensor_f32(t)[0] = v;
    return t;
}

static rt_tensor *vector_f(int n) {
    rt_shape s = rt_shape_make(1, (int64_t[]){n});
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int i = 0; i < n; i++) rt_tensor_f32(t)[i] = (float)i;
    return t;
}

/* Writes g into a fresh temporary folder's version 1 (frees g); loads it.
 * load_s (may be NULL): the load's wall and CPU seconds. */
static rt_model *write_and_load(rt_gb *g, kn_backend *be, char *dir, size_t n, double *load_s) {
    char vdir[512];
    ut_gb_write(g, dir, n, vdir, sizeof vdir);
    rt_model *m;
    double t0 = now_s(), c0 = (double)clock() / CLOCKS_PER_SEC;
    ms_status st = ut_load_serve(vdir, be, &m);
    if (load_s) load_s[0] = now_s() - t0, load_s[1] = (double)clock() / CLOCKS_PER_SEC - c0;
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
    return m;
}

/* 10,000 TF1 variables v_i = i mod 100, all restored by one save/RestoreV2
 * (10,000 outputs) and summed by one AddN (10,000 inputs):
 * sum = 100 * (0 + 1 + ... + 99) = 100 * 4950 = 495000, exact in float
 * (every partial sum is an integer below 2^24). */
START_TEST(restore_10000_tensors) {
    enum { NV = 10000 };
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    Tensorflow__NodeDef *sum = NULL;
    const char **reads = malloc(sizeof(*reads) * NV);
    ck_assert_ptr_nonnull(reads);
    for (int i = 0; i < NV; i++) {
        rt_tensor *v = scalar_f((float)(i % 100));
        char name[32];
        snprintf(name, sizeof name, "v_%d", i);
        Tensorflow__NodeDef *r = rt_gb_variable(g, name, v);
        rt_tensor_unref(v);
        ck_assert_ptr_nonnull(r);
        reads[i] = r->name;
    }
    sum = rt_gb_node(g, "AddN", "sum");
    for (int i = 0; i < NV; i++) rt_gb_input(g, sum, reads[i]);
    rt_gb_attr_i(g, sum, "N", NV);
    rt_gb_attr_type(g, sum, "T", RT_DT_FLOAT);
    free(reads);
    rt_shape s0 = rt_shape_make(0, NULL);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_output(g, sig, "sum", "sum:0", RT_DT_FLOAT, &s0);
    ck_assert_int_eq(rt_gb_num_variables(g), NV);

    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    char dir[256];
    rt_model *m = write_and_load(g, be, dir, sizeof dir, NULL);
    const char *fetch[3] = {"sum:0", "v_9999/read:0", "v_1234/read:0"};
    rt_tensor *outs[3] = {NULL, NULL, NULL};
    ms_status st = rt_model_run(m, NULL, 0, fetch, 3, NULL, 0, NULL, outs);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert_float_eq(rt_tensor_f32(outs[0])[0], 495000.0f);
    ck_assert_float_eq(rt_tensor_f32(outs[1])[0], 99.0f);
    ck_assert_float_eq(rt_tensor_f32(outs[2])[0], 34.0f);
    for (int i = 0; i < 3; i++) rt_tensor_unref(outs[i]);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

/* One Unpack of 2,000 outputs, packed again in reverse order by one Pack of
 * 2,000 inputs: y[i] = x[1999 - i] (x = 0, 1, ..., 1999 fed). */
START_TEST(node_of_2000_outputs) {
    enum { N = 2000 };
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(1, (int64_t[]){N});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    Tensorflow__NodeDef *u = rt_gb_node(g, "Unpack", "unpack");
    rt_gb_input(g, u, "x");
    rt_gb_attr_i(g, u, "num", N);
    rt_gb_attr_i(g, u, "axis", 0);
    rt_gb_attr_type(g, u, "T", RT_DT_FLOAT);
    Tensorflow__NodeDef *p = rt_gb_node(g, "Pack", "y");
    for (int i = N - 1; i >= 0; i--) {
        char in[32];
        snprintf(in, sizeof in, i ? "unpack:%d" : "unpack", i);
        rt_gb_input(g, p, in);
    }
    rt_gb_attr_i(g, p, "N", N);
    rt_gb_attr_i(g, p, "axis", 0);
    rt_gb_attr_type(g, p, "T", RT_DT_FLOAT);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &xs);

    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    char dir[256];
    rt_model *m = write_and_load(g, be, dir, sizeof dir, NULL);
    rt_tensor *x = vector_f(N);
    rt_feed f = {"x:0", x};
    const char *fetch[1] = {"y:0"};
    rt_tensor *y = NULL;
    ms_status st = rt_model_run(m, &f, 1, fetch, 1, NULL, 0, NULL, &y);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert_int_eq(y->shape.rank, 1);
    ck_assert_int_eq(y->shape.dim[0], N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(rt_tensor_f32(y)[i] == (float)(N - 1 - i), "y[%d] = %g", i,
                      rt_tensor_f32(y)[i]);
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

/* A graph of 200,000 nodes: x, then a chain of 199,999 Neg nodes (an odd
 * count: y = -x). The chain is as deep as the graph, so a recursive walk
 * anywhere on the load path would overflow the stack here. */
START_TEST(graph_of_200000_nodes) {
    enum { NODES = 200000 };
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(1, (int64_t[]){3});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    const char *prev = "x";
    for (int i = 1; i < NODES; i++) {
        char name[32];
        snprintf(name, sizeof name, i == NODES - 1 ? "y" : "n%d", i);
        Tensorflow__NodeDef *n = rt_gb_unary(g, "Neg", name, prev, RT_DT_FLOAT);
        ck_assert_ptr_nonnull(n);
        prev = n->name;
    }
    ck_assert_int_eq(rt_gb_graph(g)->n_node, NODES);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &xs);

    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    char dir[256];
    double load_s[2] = {0, 0};
    rt_model *m = write_and_load(g, be, dir, sizeof dir, load_s);
    /* for docs/benchmarks.md; not checked against a bound (machine load) */
    printf("graph_of_200000_nodes: loaded in %.3f s (%.3f s of CPU)\n", load_s[0], load_s[1]);
    rt_shape s3 = rt_shape_make(1, (int64_t[]){3});
    rt_tensor *x;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s3, &x), MS_OK);
    rt_tensor_f32(x)[0] = 1.5f, rt_tensor_f32(x)[1] = -2.0f, rt_tensor_f32(x)[2] = 0.0f;
    rt_feed f = {"x:0", x};
    const char *fetch[1] = {"y:0"};
    rt_tensor *y = NULL;
    ms_status st = rt_model_run(m, &f, 1, fetch, 1, NULL, 0, NULL, &y);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert_float_eq(rt_tensor_f32(y)[0], -1.5f);
    ck_assert_float_eq(rt_tensor_f32(y)[1], 2.0f);
    ck_assert_float_eq(rt_tensor_f32(y)[2], 0.0f);
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    /* DCM_LIMITS_KEEP=1 keeps the model for measuring `dcmserve` on it */
    if (getenv("DCM_LIMITS_KEEP"))
        printf("graph_of_200000_nodes: kept %s/1\n", dir);
    else
        ut_rmtree(dir);
}
END_TEST

static Suite *limits_suite(void) {
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("savedmodel");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, restore_10000_tensors);
    tcase_add_test(tc, node_of_2000_outputs);
    tcase_add_test(tc, graph_of_200000_nodes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tu_suite_run(limits_suite());
}
