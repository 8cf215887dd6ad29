/* check_signatures.c - signatures/sig_signature: lookup, validation messages
 * for each failure kind (against the SignatureDefs of the real test models,
 * unpacked with rt_savedmodel_read, and hand-made ones), defaults, output
 * filters, and sig_run on loaded models (a hand-made one built from host ops,
 * and the real test models). Expected messages are written out by hand from
 * the SignatureDefs listed in tests/data/savedmodels/README.md and TF Serving's
 * texts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_model.h"
#include "kn_cpu_backend.h"
#include "sig_signature.h"
#include "util_cli.h"

/* ---- helpers ---- */

static Tensorflow__SavedModel *read_model(const char *rel) {
    char dir[2048];
    Tensorflow__SavedModel *sm = NULL;
    util_cli_model_dir(rel, dir, sizeof(dir));
    ck_assert_msg(rt_savedmodel_read(dir, &sm) == MS_OK, "%s: %s", dir, ms_errmsg());
    ck_assert_uint_ge(sm->n_meta_graphs, 1);
    return sm;
}

static const Tensorflow__SignatureDef *find(const Tensorflow__SavedModel *sm, const char *key) {
    const Tensorflow__SignatureDef *sd = NULL;
    ck_assert_int_eq(sig_find(sm->meta_graphs[0], key, &sd), MS_OK);
    ck_assert_ptr_nonnull(sd);
    return sd;
}

/* Validates and checks code and full message. */
static void expect_err(const char *sig, const Tensorflow__SignatureDef *sd, const sig_input *in,
                       int nin, ms_status code, const char *msg) {
    ms_err_clear();
    ms_status st = sig_validate(sig, sd, in, nin);
    ck_assert_msg(st == code, "status %s, want %s (%s)", ms_status_name(st), ms_status_name(code),
                  ms_errmsg());
    if (msg) ck_assert_str_eq(ms_errmsg(), msg);
}

static rt_tensor *f32(int rank, const int64_t *dims) {
    return util_cli_tensor(RT_DT_FLOAT, rank, dims, NULL);
}

/* ---- lookup ---- */

START_TEST(test_find) {
    Tensorflow__SavedModel *sm = read_model("saved_model_half_plus_two_cpu/00000123");
    const Tensorflow__SignatureDef *a = NULL, *b = NULL;
    ck_assert_int_eq(sig_find(sm->meta_graphs[0], "", &a), MS_OK);
    ck_assert_int_eq(sig_find(sm->meta_graphs[0], NULL, &b), MS_OK);
    ck_assert_ptr_eq(a, b);
    ck_assert_str_eq(a->method_name, "tensorflow/serving/predict");
    ck_assert_ptr_nonnull(sig_input_info(a, "x"));
    ck_assert_str_eq(sig_input_info(a, "x")->name, "x:0");
    ck_assert_str_eq(sig_output_info(a, "y")->name, "y:0");
    ck_assert_ptr_null(sig_input_info(a, "y"));
    ck_assert_ptr_null(sig_output_info(a, "x"));
    const Tensorflow__SignatureDef *r = find(sm, "regress_x2_to_y3");
    ck_assert_str_eq(r->method_name, "tensorflow/serving/regress");
    ck_assert_str_eq(sig_input_info(r, "inputs")->name, "x2:0");
    ck_assert_int_eq(sig_find(sm->meta_graphs[0], "nope", &r), MS_EPRECOND);
    ck_assert_ptr_null(r);
    ck_assert_ptr_eq(strstr(ms_errmsg(), "Serving signature key \"nope\" not found. Signature keys: "),
                     ms_errmsg());
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "\"regress_x2_to_y3\""));
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

START_TEST(test_names_and_shapes) {
    char buf[64];
    ck_assert_str_eq(sig_dtype_name(1), "DT_FLOAT");
    ck_assert_str_eq(sig_dtype_name(101), "DT_FLOAT_REF");
    ck_assert_str_eq(sig_dtype_name(7), "DT_STRING");
    ck_assert_str_eq(sig_dtype_name(23), "DT_UINT64");
    ck_assert_str_eq(sig_dtype_name(999), "DT_INVALID");
    ck_assert_str_eq(sig_shape_str(NULL, buf, sizeof(buf)), "()");
    Tensorflow__SavedModel *sm = read_model("saved_model_half_plus_two_cpu/00000123");
    const Tensorflow__SignatureDef *sd = find(sm, "serving_default");
    ck_assert_str_eq(sig_shape_str(sig_input_info(sd, "x")->tensor_shape, buf, sizeof(buf)),
                     "(-1, 1)");
    sd = find(sm, "classify_x_to_y");
    ck_assert_str_eq(sig_shape_str(sig_input_info(sd, "inputs")->tensor_shape, buf, sizeof(buf)),
                     "unknown_rank");
    tensorflow__saved_model__free_unpacked(sm, NULL);
    sm = read_model("saved_model_half_plus_two_tf2_cpu/00000123");
    sd = find(sm, "serving_default");
    ck_assert_str_eq(sig_shape_str(sig_input_info(sd, "x")->tensor_shape, buf, sizeof(buf)), "(1)");
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

/* ---- validation against the real SignatureDefs ---- */

START_TEST(test_validate_half_plus_two) {
    Tensorflow__SavedModel *sm = read_model("saved_model_half_plus_two_cpu/00000123");
    const Tensorflow__SignatureDef *sd = find(sm, "serving_default");
    int64_t d31[] = {3, 1}, d32[] = {3, 2}, d3[] = {3};
    rt_tensor *ok = f32(2, d31), *wide = f32(2, d32), *flat = f32(1, d3);
    rt_tensor *i32 = util_cli_tensor(RT_DT_INT32, 2, d31, NULL);

    sig_input good[] = {{"x", ok}};
    expect_err("serving_default", sd, good, 1, MS_OK, NULL);
    expect_err("", sd, good, 1, MS_OK, NULL);

    /* Extra key. */
    sig_input extra[] = {{"x", ok}, {"z", ok}};
    expect_err("serving_default", sd, extra, 2, MS_EINVAL,
               "signature \"serving_default\": input size does not match signature: 2!=1 "
               "len({x,z}) != len({x}). Sent extra: {z}. Missing but required: {}.");
    /* Missing key (no defaults in this model). */
    expect_err(NULL, sd, NULL, 0, MS_EINVAL,
               "signature \"serving_default\": input size does not match signature: 0!=1 "
               "len({}) != len({x}). Sent extra: {}. Missing but required: {x}.");
    /* Same count, wrong name. */
    sig_input renamed[] = {{"inputs", ok}};
    expect_err("serving_default", sd, renamed, 1, MS_EINVAL,
               "signature \"serving_default\": input tensor alias not found in signature: "
               "inputs. Inputs expected to be in the set {x}.");
    /* Duplicate key. */
    sig_input dup[] = {{"x", ok}, {"x", ok}};
    expect_err("serving_default", sd, dup, 2, MS_EINVAL,
               "signature \"serving_default\": input \"x\" given more than once");
    /* dtype. */
    sig_input wrong_dt[] = {{"x", i32}};
    expect_err("serving_default", sd, wrong_dt, 1, MS_EINVAL,
               "signature \"serving_default\": input \"x\": expected dtype DT_FLOAT, got "
               "DT_INT32");
    /* rank. */
    sig_input wrong_rank[] = {{"x", flat}};
    expect_err("serving_default", sd, wrong_rank, 1, MS_EINVAL,
               "signature \"serving_default\": input \"x\": expected rank 2 with shape (-1, 1), "
               "got rank 1 with shape (3)");
    /* dimension. */
    sig_input wrong_dim[] = {{"x", wide}};
    expect_err("serving_default", sd, wrong_dim, 1, MS_EINVAL,
               "signature \"serving_default\": input \"x\": dimension 1 must be 1 (signature "
               "shape (-1, 1)), got 2 in shape (3, 2)");
    /* Any batch size fits -1. */
    int64_t d71[] = {7, 1}, d01[] = {0, 1};
    rt_tensor *b7 = f32(2, d71), *b0 = f32(2, d01);
    sig_input seven[] = {{"x", b7}}, zero[] = {{"x", b0}};
    expect_err("serving_default", sd, seven, 1, MS_OK, NULL);
    expect_err("serving_default", sd, zero, 1, MS_OK, NULL);

    /* Unknown rank (classify_x_to_y's DT_STRING input): any shape, dtype
     * still checked. */
    const Tensorflow__SignatureDef *cl = find(sm, "classify_x_to_y");
    rt_str s = {(const uint8_t *)"abc", 3};
    rt_tensor *str0 = NULL, *str23 = NULL;
    rt_shape sc = {0}, s23 = rt_shape_make(2, (int64_t[]){2, 3});
    rt_str s6[6] = {s, s, s, s, s, s};
    ck_assert_int_eq(rt_tensor_new_strings(&sc, &s, &str0), MS_OK);
    ck_assert_int_eq(rt_tensor_new_strings(&s23, s6, &str23), MS_OK);
    sig_input c1[] = {{"inputs", str0}}, c2[] = {{"inputs", str23}}, c3[] = {{"inputs", ok}};
    expect_err("classify_x_to_y", cl, c1, 1, MS_OK, NULL);
    expect_err("classify_x_to_y", cl, c2, 1, MS_OK, NULL);
    expect_err("classify_x_to_y", cl, c3, 1, MS_EINVAL,
               "signature \"classify_x_to_y\": input \"inputs\": expected dtype DT_STRING, got "
               "DT_FLOAT");

    rt_tensor *all[] = {ok, wide, flat, i32, b7, b0, str0, str23};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rt_tensor_unref(all[i]);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

START_TEST(test_validate_tf2_defaults) {
    Tensorflow__SavedModel *sm = read_model("saved_model_half_plus_two_tf2_cpu/00000123");
    const Tensorflow__SignatureDef *sd = find(sm, "serving_default");
    ck_assert_uint_eq(sd->n_defaults, 1);
    /* x may be left out: the SignatureDef has a default for it. */
    expect_err("serving_default", sd, NULL, 0, MS_OK, NULL);
    int64_t d1[] = {1}, d2[] = {2};
    rt_tensor *one = f32(1, d1), *two = f32(1, d2);
    sig_input ok[] = {{"x", one}}, bad[] = {{"x", two}}, extra[] = {{"q", one}};
    expect_err("serving_default", sd, ok, 1, MS_OK, NULL);
    /* Shape (1) has no -1: a batch of 2 does not fit. */
    expect_err("serving_default", sd, bad, 1, MS_EINVAL,
               "signature \"serving_default\": input \"x\": dimension 0 must be 1 (signature "
               "shape (1)), got 2 in shape (2)");
    /* Extra keys are still refused. */
    expect_err("serving_default", sd, extra, 1, MS_EINVAL,
               "signature \"serving_default\": input tensor alias not found in signature: q. "
               "Inputs expected to be in the set {x}.");
    rt_tensor_unref(one);
    rt_tensor_unref(two);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

START_TEST(test_validate_counter) {
    Tensorflow__SavedModel *sm = read_model("saved_model_counter/00000123");
    const Tensorflow__SignatureDef *get = find(sm, "get_counter");
    expect_err("get_counter", get, NULL, 0, MS_OK, NULL);
    rt_tensor *sc = f32(0, NULL);
    sig_input x[] = {{"x", sc}};
    expect_err("get_counter", get, x, 1, MS_EINVAL,
               "signature \"get_counter\": input size does not match signature: 1!=0 len({x}) "
               "!= len({}). Sent extra: {x}. Missing but required: {}.");
    /* The outputs are DT_FLOAT_REF in the SignatureDef. */
    ck_assert_int_eq((int)sig_output_info(get, "output")->dtype, 101);
    const Tensorflow__SignatureDef *by = find(sm, "incr_counter_by");
    sig_input delta[] = {{"delta", sc}};
    expect_err("incr_counter_by", by, delta, 1, MS_OK, NULL);
    expect_err("incr_counter_by", by, NULL, 0, MS_EINVAL,
               "signature \"incr_counter_by\": input size does not match signature: 0!=1 "
               "len({}) != len({delta}). Sent extra: {}. Missing but required: {delta}.");
    rt_tensor_unref(sc);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

/* ---- hand-made SignatureDefs ---- */

START_TEST(test_validate_batch_and_ref) {
    util_sm *sm = util_sm_new();
    Tensorflow__SignatureDef *sd = util_sm_sig(sm, "multi", "tensorflow/serving/predict");
    int64_t a_dims[] = {-1, 2}, b_dims[] = {-1}, c_dims[] = {2, -1};
    util_sm_sig_input(sm, sd, "a", "a:0", 1, 2, a_dims);
    util_sm_sig_input(sm, sd, "b", "b:0", 103 /* DT_INT32_REF */, 1, b_dims);
    util_sm_sig_input(sm, sd, "c", "c:0", 1, 2, c_dims);
    util_sm_sig_input(sm, sd, "d", "d:0", 1, -2, NULL); /* no shape at all */
    float dflt[] = {1, 2};
    int64_t d2[] = {2};
    util_sm_sig_default_f32(sm, sd, "d", 1, d2, dflt);

    int64_t a3[] = {3, 2}, a2[] = {2, 2}, b3[] = {3}, b2[] = {2}, c25[] = {2, 5}, d45[] = {4, 5};
    rt_tensor *ta3 = f32(2, a3), *ta2 = f32(2, a2), *tc = f32(2, c25), *td = f32(2, d45);
    rt_tensor *tb3 = util_cli_tensor(RT_DT_INT32, 1, b3, NULL);
    rt_tensor *tb2 = util_cli_tensor(RT_DT_INT32, 1, b2, NULL);

    /* _REF dtype counts as its base; c's fixed dim 0 (2) is not a batch dim;
     * d has no shape; d may be omitted (default). */
    sig_input ok[] = {{"a", ta3}, {"b", tb3}, {"c", tc}};
    expect_err("multi", sd, ok, 3, MS_OK, NULL);
    sig_input ok2[] = {{"a", ta3}, {"b", tb3}, {"c", tc}, {"d", td}};
    expect_err("multi", sd, ok2, 4, MS_OK, NULL);
    /* Batch sizes differ between a and b (both -1 in dim 0). */
    sig_input batch[] = {{"a", ta3}, {"b", tb2}, {"c", tc}};
    expect_err("multi", sd, batch, 3, MS_EINVAL,
               "signature \"multi\": inconsistent batch size (dimension 0) across inputs: \"a\" "
               "has 3, \"b\" has 2");
    sig_input batch2[] = {{"b", tb3}, {"a", ta2}, {"c", tc}};
    expect_err("multi", sd, batch2, 3, MS_EINVAL,
               "signature \"multi\": inconsistent batch size (dimension 0) across inputs: \"b\" "
               "has 3, \"a\" has 2");
    /* Several missing and extra keys, listed sorted; d is not "required". */
    sig_input few[] = {{"zz", ta3}, {"b", tb3}, {"yy", ta3}};
    expect_err("multi", sd, few, 3, MS_EINVAL,
               "signature \"multi\": input size does not match signature: 3!=4 len({b,yy,zz}) "
               "!= len({a,b,c,d}). Sent extra: {yy,zz}. Missing but required: {a,c}.");
    /* A float tensor where the _REF int input is. */
    sig_input wrong[] = {{"a", ta3}, {"b", ta3}, {"c", tc}};
    expect_err("multi", sd, wrong, 3, MS_EINVAL,
               "signature \"multi\": input \"b\": expected dtype DT_INT32, got DT_FLOAT");

    rt_tensor *all[] = {ta3, ta2, tc, td, tb3, tb2};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) rt_tensor_unref(all[i]);
    util_sm_free(sm);
}
END_TEST

/* ---- sig_run on a hand-made model (host ops only) ---- */

static char g_dir[1024];

/* x (-1, 2) -> y = Identity(x) under two aliases; w (2) with a default;
 * a variable counter with get / incr / incr_by / reset signatures. */
static void build_model(void) {
    util_cli_tmpdir(g_dir, sizeof(g_dir));
    util_sm *sm = util_sm_new();
    int64_t x_dims[] = {-1, 2}, w_dims[] = {2};
    float wdef[] = {0, 0}, one[] = {1}, zero[] = {0};
    Tensorflow__NodeDef *n = util_sm_node(sm, "x", "Placeholder", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_shape(sm, n, "shape", 2, x_dims);
    n = util_sm_node(sm, "y", "Identity", (const char *[]){"x", NULL});
    util_sm_attr_type(sm, n, "T", RT_DT_FLOAT);
    n = util_sm_node(sm, "wdef", "Const", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_f32(sm, n, "value", 1, w_dims, wdef);
    n = util_sm_node(sm, "w", "PlaceholderWithDefault", (const char *[]){"wdef", NULL});
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_shape(sm, n, "shape", 1, w_dims);
    n = util_sm_node(sm, "wo", "Identity", (const char *[]){"w", NULL});
    util_sm_attr_type(sm, n, "T", RT_DT_FLOAT);
    n = util_sm_node(sm, "counter", "VariableV2", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_shape(sm, n, "shape", 0, NULL);
    n = util_sm_node(sm, "one", "Const", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_f32(sm, n, "value", 0, NULL, one);
    n = util_sm_node(sm, "zero", "Const", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_f32(sm, n, "value", 0, NULL, zero);
    n = util_sm_node(sm, "delta", "Placeholder", NULL);
    util_sm_attr_type(sm, n, "dtype", RT_DT_FLOAT);
    util_sm_attr_shape(sm, n, "shape", -1, NULL);
    n = util_sm_node(sm, "incr", "AssignAdd", (const char *[]){"counter", "one", NULL});
    util_sm_attr_type(sm, n, "T", RT_DT_FLOAT);
    n = util_sm_node(sm, "incr_by", "AssignAdd", (const char *[]){"counter", "delta", NULL});
    util_sm_attr_type(sm, n, "T", RT_DT_FLOAT);
    n = util_sm_node(sm, "reset", "Assign", (const char *[]){"counter", "zero", NULL});
    util_sm_attr_type(sm, n, "T", RT_DT_FLOAT);

    Tensorflow__SignatureDef *sd = util_sm_sig(sm, "serving_default", "tensorflow/serving/predict");
    util_sm_sig_input(sm, sd, "x", "x:0", 1, 2, x_dims);
    util_sm_sig_output(sm, sd, "y", "y:0", 1, 2, x_dims);
    util_sm_sig_output(sm, sd, "also_y", "y", 1, 2, x_dims);
    sd = util_sm_sig(sm, "with_default", "tensorflow/serving/predict");
    util_sm_sig_input(sm, sd, "x", "x:0", 1, 2, x_dims);
    util_sm_sig_input(sm, sd, "w", "w:0", 1, 1, w_dims);
    float wd[] = {7, 8};
    util_sm_sig_default_f32(sm, sd, "w", 1, w_dims, wd);
    util_sm_sig_output(sm, sd, "xo", "y:0", 1, 2, x_dims);
    util_sm_sig_output(sm, sd, "wo", "wo:0", 1, 1, w_dims);
    const char *keys[] = {"get", "incr", "incr_by", "reset"};
    const char *names[] = {"counter:0", "incr:0", "incr_by:0", "reset:0"};
    for (int i = 0; i < 4; i++) {
        sd = util_sm_sig(sm, keys[i], "tensorflow/serving/predict");
        util_sm_sig_output(sm, sd, "output", names[i], 101, 0, NULL);
        if (i == 2) util_sm_sig_input(sm, sd, "delta", "delta:0", 1, -1, NULL);
    }
    util_sm_write(sm, g_dir);
    util_sm_free(sm);
}

static void rm_model(void) { util_cli_rmtree(g_dir); }

static rt_model *load(const char *dir, kn_backend **be) {
    *be = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(*be);
    rt_model *m = NULL;
    const char *tags[] = {"serve"};
    ck_assert_msg(rt_model_load(dir, tags, 1, *be, &m) == MS_OK, "load %s: %s", dir, ms_errmsg());
    return m;
}

/* Runs a scalar-output signature and returns its value. */
static float run_scalar(rt_model *m, const char *sig, const sig_input *in, int nin) {
    sig_output *o = NULL;
    int no = 0;
    ck_assert_msg(sig_run(m, sig, in, nin, NULL, 0, NULL, &o, &no) == MS_OK, "%s: %s", sig,
                  ms_errmsg());
    ck_assert_int_eq(no, 1);
    ck_assert_str_eq(o[0].key, "output");
    ck_assert_int_eq(o[0].tensor->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(o[0].tensor->nelem, 1);
    float v = rt_tensor_f32(o[0].tensor)[0];
    sig_outputs_free(o, no);
    return v;
}

START_TEST(test_run_handmade) {
    build_model();
    kn_backend *be;
    rt_model *m = load(g_dir, &be);
    int64_t d22[] = {2, 2};
    float xv[] = {1, 2, 3, 4};
    rt_tensor *x = util_cli_tensor(RT_DT_FLOAT, 2, d22, xv);
    sig_input in[] = {{"x", x}};

    /* All outputs, sorted by key. */
    sig_output *o = NULL;
    int no = 0;
    ck_assert_int_eq(sig_run(m, "", in, 1, NULL, 0, NULL, &o, &no), MS_OK);
    ck_assert_int_eq(no, 2);
    ck_assert_str_eq(o[0].key, "also_y");
    ck_assert_str_eq(o[1].key, "y");
    ck_assert(rt_tensor_equal(o[0].tensor, x));
    ck_assert(rt_tensor_equal(o[1].tensor, x));
    sig_outputs_free(o, no);

    /* A filter picks and orders. */
    const char *filter[] = {"y"};
    ck_assert_int_eq(sig_run(m, NULL, in, 1, filter, 1, NULL, &o, &no), MS_OK);
    ck_assert_int_eq(no, 1);
    ck_assert_str_eq(o[0].key, "y");
    sig_outputs_free(o, no);
    const char *bad_filter[] = {"y", "nope"};
    ck_assert_int_eq(sig_run(m, NULL, in, 1, bad_filter, 2, NULL, &o, &no), MS_EINVAL);
    ck_assert_ptr_null(o);
    ck_assert_str_eq(ms_errmsg(), "signature \"serving_default\": output tensor alias not found in "
                                  "signature: nope. Outputs expected to be in the set {also_y,y}.");
    const char *dup_filter[] = {"y", "y"};
    ck_assert_int_eq(sig_run(m, NULL, in, 1, dup_filter, 2, NULL, &o, &no), MS_EINVAL);
    ck_assert_str_eq(ms_errmsg(),
                     "signature \"serving_default\": duplicate output tensor alias: y");

    /* Validation happens before running. */
    ck_assert_int_eq(sig_run(m, NULL, NULL, 0, NULL, 0, NULL, &o, &no), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "Missing but required: {x}."));
    ck_assert_int_eq(sig_run(m, "nope", in, 1, NULL, 0, NULL, &o, &no), MS_EPRECOND);
    ck_assert_ptr_eq(strstr(ms_errmsg(), "Serving signature key \"nope\" not found. Signature keys: "),
                     ms_errmsg());
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "\"serving_default\""));
    ck_assert_int_eq(sig_run(m, SIG_INIT_OP_KEY, NULL, 0, NULL, 0, NULL, &o, &no), MS_EPRECOND);

    /* Defaults: w omitted -> [7, 8] from the SignatureDef, not the graph's
     * own default [0, 0]; given -> as given. */
    ck_assert_int_eq(sig_run(m, "with_default", in, 1, NULL, 0, NULL, &o, &no), MS_OK);
    ck_assert_int_eq(no, 2);
    ck_assert_str_eq(o[0].key, "wo");
    ck_assert_int_eq(o[0].tensor->nelem, 2);
    ck_assert(rt_tensor_f32(o[0].tensor)[0] == 7.0f && rt_tensor_f32(o[0].tensor)[1] == 8.0f);
    sig_outputs_free(o, no);
    int64_t d2[] = {2};
    float wv[] = {-1, 5};
    rt_tensor *w = util_cli_tensor(RT_DT_FLOAT, 1, d2, wv);
    sig_input in2[] = {{"x", x}, {"w", w}};
    ck_assert_int_eq(sig_run(m, "with_default", in2, 2, NULL, 0, NULL, &o, &no), MS_OK);
    ck_assert(rt_tensor_equal(o[0].tensor, w));
    sig_outputs_free(o, no);

    /* Stateful sequence within one loaded model. */
    float three = 3;
    rt_tensor *delta = util_cli_tensor(RT_DT_FLOAT, 0, NULL, &three);
    sig_input din[] = {{"delta", delta}};
    ck_assert(run_scalar(m, "get", NULL, 0) == 0.0f);
    ck_assert(run_scalar(m, "incr", NULL, 0) == 1.0f);
    ck_assert(run_scalar(m, "reset", NULL, 0) == 0.0f);
    ck_assert(run_scalar(m, "incr", NULL, 0) == 1.0f);
    ck_assert(run_scalar(m, "incr_by", din, 1) == 4.0f);
    ck_assert(run_scalar(m, "get", NULL, 0) == 4.0f);

    rt_tensor_unref(delta);
    rt_tensor_unref(w);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    rm_model();
}
END_TEST

/* ---- sig_run on the real test models ---- */

START_TEST(test_run_counter) {
    char dir[2048];
    kn_backend *be;
    rt_model *m = load(util_cli_model_dir("saved_model_counter/00000123", dir, sizeof(dir)), &be);
    float three = 3;
    rt_tensor *delta = util_cli_tensor(RT_DT_FLOAT, 0, NULL, &three);
    sig_input din[] = {{"delta", delta}};
    /* README: get -> 0, incr -> 1, reset -> 0, incr -> 1, incr_by(3) -> 4. */
    ck_assert(run_scalar(m, "get_counter", NULL, 0) == 0.0f);
    ck_assert(run_scalar(m, "incr_counter", NULL, 0) == 1.0f);
    ck_assert(run_scalar(m, "reset_counter", NULL, 0) == 0.0f);
    ck_assert(run_scalar(m, "incr_counter", NULL, 0) == 1.0f);
    ck_assert(run_scalar(m, "incr_counter_by", din, 1) == 4.0f);
    rt_tensor_unref(delta);
    rt_model_unref(m);
    kn_backend_free(be);
}
END_TEST

START_TEST(test_run_half_plus_two) {
    char dir[2048];
    kn_backend *be;
    rt_model *m =
        load(util_cli_model_dir("saved_model_half_plus_two_cpu/00000123", dir, sizeof(dir)), &be);
    int64_t d31[] = {3, 1};
    float xv[] = {1, 2, 5};
    rt_tensor *x = util_cli_tensor(RT_DT_FLOAT, 2, d31, xv);
    sig_input in[] = {{"x", x}};
    sig_output *o = NULL;
    int no = 0;
    ck_assert_msg(sig_run(m, "", in, 1, NULL, 0, NULL, &o, &no) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(no, 1);
    ck_assert_str_eq(o[0].key, "y");
    /* y = 0.5 x + 2. */
    const float want[] = {2.5f, 3.0f, 4.5f};
    ck_assert_int_eq(o[0].tensor->nelem, 3);
    for (int i = 0; i < 3; i++) ck_assert(rt_tensor_f32(o[0].tensor)[i] == want[i]);
    sig_outputs_free(o, no);
    sig_input in2[] = {{"inputs", x}};
    ck_assert_msg(sig_run(m, "regress_x2_to_y3", in2, 1, NULL, 0, NULL, &o, &no) == MS_OK, "%s",
                  ms_errmsg());
    /* y3 = 0.5 x2 + 3. */
    const float want3[] = {3.5f, 4.0f, 5.5f};
    for (int i = 0; i < 3; i++) ck_assert(rt_tensor_f32(o[0].tensor)[i] == want3[i]);
    sig_outputs_free(o, no);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
}
END_TEST

START_TEST(test_run_tf2_defaults) {
    char dir[2048];
    kn_backend *be;
    rt_model *m = load(
        util_cli_model_dir("saved_model_half_plus_two_tf2_cpu/00000123", dir, sizeof(dir)), &be);
    int64_t d1[] = {1};
    float xv[] = {1};
    rt_tensor *x = util_cli_tensor(RT_DT_FLOAT, 1, d1, xv);
    sig_input in[] = {{"x", x}};
    sig_output *o = NULL;
    int no = 0;
    ck_assert_msg(sig_run(m, NULL, in, 1, NULL, 0, NULL, &o, &no) == MS_OK, "%s", ms_errmsg());
    ck_assert(rt_tensor_f32(o[0].tensor)[0] == 2.5f);
    sig_outputs_free(o, no);
    /* x omitted: the default [0.0] gives 2.0. */
    ck_assert_msg(sig_run(m, NULL, NULL, 0, NULL, 0, NULL, &o, &no) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(o[0].tensor->nelem, 1);
    ck_assert(rt_tensor_f32(o[0].tensor)[0] == 2.0f);
    sig_outputs_free(o, no);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
}
END_TEST

static Suite *signatures_suite(void) {
    Suite *s = suite_create("signatures");
    TCase *tc = tcase_create("lookup");
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_names_and_shapes);
    suite_add_tcase(s, tc);
    tc = tcase_create("validate");
    tcase_add_test(tc, test_validate_half_plus_two);
    tcase_add_test(tc, test_validate_tf2_defaults);
    tcase_add_test(tc, test_validate_counter);
    tcase_add_test(tc, test_validate_batch_and_ref);
    suite_add_tcase(s, tc);
    tc = tcase_create("run_handmade");
    tcase_add_test(tc, test_run_handmade);
    suite_add_tcase(s, tc);
    tc = tcase_create("run_models");
    tcase_add_test(tc, test_run_counter);
    tcase_add_test(tc, test_run_half_plus_two);
    tcase_add_test(tc, test_run_tf2_defaults);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(signatures_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
