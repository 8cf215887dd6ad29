/* check_onnx_load.c - a version folder holding model.onnx loads through
 * rt_model_load once the ONNX converter is installed (rt_onnx_load.h): the
 * test model `mobile` (weights in the external file mobile.weights beside it)
 * loads, names its signature by the graph and runs within 1e-4 of ONNX
 * Runtime's stored output; without the converter the load is refused saying
 * so; saved_model.pb wins over model.onnx in one folder; external data through
 * a link leaving the folder is refused. Uses tests/data/onnx and
 * tests/data/savedmodels. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kn_cpu_backend.h"
#include "rt_model.h"
#include "rt_onnx_load.h"
#include "util_bundle.h"
#include "util_node.h"
#include "util_onnx.h"

static kn_backend *be;
static char top[256], ver[300];

static void sh(const char *cmd) {
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* <top>/1/model.onnx + mobile.weights: the mobile test model. */
static void setup(void) {
    char cmd[2048];
    ck_assert_int_eq(ut_mkdtemp(top, sizeof top), 0);
    snprintf(ver, sizeof ver, "%s/1", top);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/model.onnx'", ver,
             tox_path("mobile.onnx"), ver);
    sh(cmd);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/mobile.weights'", tox_path("mobile.weights"), ver);
    sh(cmd);
    be = kn_cpu_backend_new(1);
    rt_onnx_serve_enable();
}

static void teardown(void) {
    rt_model_set_onnx_converter(NULL);
    kn_backend_free(be);
    ut_rmtree(top);
}

START_TEST(test_loads_and_runs) {
    rt_model *m = NULL;
    ck_assert_msg(ut_load_serve(ver, be, &m) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_model_format_of(m), RT_MODEL_FMT_ONNX);
    const Tensorflow__SignatureDef *sd = tox_sig(rt_model_meta_graph(m), "serving_default");
    ck_assert_ptr_nonnull(sd);
    const Tensorflow__TensorInfo *in = tox_sig_input(sd, "image");
    const Tensorflow__TensorInfo *out = tox_sig_output(sd, "scores");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    rt_tensor *x = NULL, *want = NULL, *got = NULL;
    ck_assert_int_eq(tox_npy_read(tox_path("mobile.in.image.npy"), &x), MS_OK);
    ck_assert_int_eq(tox_npy_read(tox_path("mobile.out.scores.npy"), &want), MS_OK);
    rt_feed feed = {in->name, x};
    const char *fetch = out->name;
    ck_assert_msg(rt_model_run(m, &feed, 1, &fetch, 1, NULL, 0, NULL, &got) == MS_OK, "%s",
                  ms_errmsg());
    double d = tox_max_abs_diff(got, want);
    ck_assert_msg(d >= 0 && d <= 1e-4, "max |dcmserve - ORT| = %g", d);
    rt_tensor_unref(x);
    rt_tensor_unref(want);
    rt_tensor_unref(got);
    rt_model_unref(m);
}
END_TEST

START_TEST(test_without_converter) {
    rt_model_set_onnx_converter(NULL);
    rt_model *m = NULL;
    ck_assert_int_eq(ut_load_serve(ver, be, &m), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "no ONNX importer") != NULL, "%s", ms_errmsg());
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_dir_format) {
    ms_dir d;
    ck_assert_int_eq(ms_dir_open(ver, &d), MS_OK);
    ck_assert_int_eq(rt_model_dir_format(&d), RT_MODEL_FMT_ONNX);
    ms_dir_close(&d);
    ck_assert_int_eq(ms_dir_open(top, &d), MS_OK);
    ck_assert_int_eq(rt_model_dir_format(&d), RT_MODEL_FMT_NONE);
    ms_dir_close(&d);
}
END_TEST

/* half_plus_two's files beside model.onnx: the SavedModel is what loads. */
START_TEST(test_savedmodel_wins) {
    char cmd[2048], src[512];
    ut_data_path("savedmodels/saved_model_half_plus_two_cpu/00000123", src, sizeof src);
    snprintf(cmd, sizeof cmd, "cp -r '%s'/. '%s'/", src, ver);
    sh(cmd);
    ms_dir d;
    ck_assert_int_eq(ms_dir_open(ver, &d), MS_OK);
    ck_assert_int_eq(rt_model_dir_format(&d), RT_MODEL_FMT_SAVEDMODEL);
    ms_dir_close(&d);
    rt_model *m = NULL;
    ck_assert_msg(ut_load_serve(ver, be, &m) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_model_format_of(m), RT_MODEL_FMT_SAVEDMODEL);
    const Tensorflow__SignatureDef *sd = tox_sig(rt_model_meta_graph(m), "serving_default");
    ck_assert_ptr_nonnull(sd);
    ck_assert_ptr_nonnull(tox_sig_input(sd, "x"));
    rt_model_unref(m);
}
END_TEST

/* mobile.weights a link to a copy outside the version folder. */
START_TEST(test_external_data_outside) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mv '%s/mobile.weights' '%s/outside.weights' && ln -s "
             "'%s/outside.weights' '%s/mobile.weights'", ver, top, top, ver);
    sh(cmd);
    rt_model *m = NULL;
    ms_status st = ut_load_serve(ver, be, &m);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_msg(strstr(ms_errmsg(), "mobile.weights") && strstr(ms_errmsg(), "outside"), "%s",
                  ms_errmsg());
    /* nothing of the file outside is told */
    ck_assert_msg(strstr(ms_errmsg(), "outside.weights") == NULL, "%s", ms_errmsg());
}
END_TEST

int main(void) {
    Suite *s = suite_create("onnx_load");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_loads_and_runs);
    tcase_add_test(tc, test_without_converter);
    tcase_add_test(tc, test_dir_format);
    tcase_add_test(tc, test_savedmodel_wins);
    tcase_add_test(tc, test_external_data_outside);
    suite_add_tcase(s, tc);
    return tu_suite_run(s);
}
