/* check_savedmodels.c - the real TensorFlow SavedModels of tests/data/savedmodels
 * loaded and run through the runtime (rt_model_load + rt_model_run by tensor
 * names), and damaged model directories failing with clear messages. Values
 * come from the test data's README. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_log.h"
#include "kn_cpu_backend.h"
#include "rt_model.h"
#include "rt_tensor_proto.h"
#include "util_bundle.h"

static kn_backend *be;
static const char *serve[] = {"serve"};

static void setup(void) {
    ms_log_set_level(MS_LOG_ERROR);
    be = kn_cpu_backend_new(1);
}

static void teardown(void) {
    kn_backend_free(be);
}

static char *model_dir(const char *rel, char *buf, size_t n) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "savedmodels/%s", rel);
    return ut_data_path(tmp, buf, n);
}

static rt_model *load(const char *rel) {
    char dir[1024];
    rt_model *m = NULL;
    ms_status st = rt_model_load(model_dir(rel, dir, sizeof dir), serve, 1, be, &m);
    ck_assert_msg(st == MS_OK, "load %s: %s", rel, ms_errmsg());
    return m;
}

/* The tensor name a signature gives to an input or output key. */
static const char *sig_name(const rt_model *m, const char *sig, const char *key, int output) {
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    for (size_t i = 0; i < mg->n_signature_def; i++) {
        if (strcmp(mg->signature_def[i]->key, sig) != 0) continue;
        const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
        size_t n = output ? sd->n_outputs : sd->n_inputs;
        for (size_t k = 0; k < n; k++) {
            const Tensorflow__SignatureDef__InputsEntry *e =
                output ? (const void *)sd->outputs[k] : (const void *)sd->inputs[k];
            if (strcmp(e->key, key) == 0) return e->value->name;
        }
    }
    ck_abort_msg("signature %s has no %s %s", sig, output ? "output" : "input", key);
    return NULL;
}

static rt_tensor *floats(int rank, const int64_t *dims, const float *v) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    memcpy(t->data, v, sizeof(float) * (size_t)t->nelem);
    return t;
}

static void expect_floats(const rt_tensor *t, int rank, const int64_t *dims, const float *v) {
    ck_assert_int_eq(t->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(t->shape.rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(t->shape.dim[i], dims[i]);
    for (int64_t i = 0; i < t->nelem; i++)
        ck_assert_msg(rt_tensor_f32(t)[i] == v[i], "element %lld: %g != %g", (long long)i,
                      rt_tensor_f32(t)[i], v[i]);
}

/* Runs sig's single input -> single output. */
static rt_tensor *run1(rt_model *m, const char *sig, const char *in_key, rt_tensor *x,
                       const char *out_key) {
    rt_feed f = {sig_name(m, sig, in_key, 0), x};
    const char *fetch = sig_name(m, sig, out_key, 1);
    rt_tensor *out = NULL;
    ms_status st = rt_model_run(m, &f, x ? 1 : 0, &fetch, 1, NULL, 0, NULL, &out);
    ck_assert_msg(st == MS_OK, "run %s: %s", sig, ms_errmsg());
    return out;
}

START_TEST(test_half_plus_two_tf1) {
    const char *names[] = {"saved_model_half_plus_two_cpu/00000123",
                           "saved_model_half_plus_two_gpu/00000123",
                           "saved_model_half_plus_two_2_versions/00000124"};
    rt_model *m = load(names[_i]);
    int64_t d[2] = {3, 1};
    rt_tensor *x = floats(2, d, (float[]){1, 2, 5});
    rt_tensor *y = run1(m, "serving_default", "x", x, "y");
    expect_floats(y, 2, d, (float[]){2.5f, 3.0f, 4.5f});
    rt_tensor_unref(y);
    /* regress_x2_to_y3: y3 = 0.5 * x2 + 3 */
    y = run1(m, "regress_x2_to_y3", "inputs", x, "outputs");
    expect_floats(y, 2, d, (float[]){3.5f, 4.0f, 5.5f});
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
}
END_TEST

START_TEST(test_half_plus_two_tf2) {
    rt_model *m = load("saved_model_half_plus_two_tf2_cpu/00000123");
    int64_t d[1] = {1};
    rt_tensor *x = floats(1, d, (float[]){1.0f});
    rt_tensor *y = run1(m, "serving_default", "x", x, "y");
    expect_floats(y, 1, d, (float[]){2.5f});
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
}
END_TEST

START_TEST(test_matrix_half_plus_two) {
    rt_model *m = load("matrix_half_plus_two/1");
    int64_t d[3] = {1, 3, 3};
    float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, want[9];
    for (int i = 0; i < 9; i++) want[i] = 0.5f * in[i] + 2.0f;
    rt_tensor *x = floats(3, d, in);
    rt_tensor *y = run1(m, "serving_default", "x", x, "y");
    expect_floats(y, 3, d, want);
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
}
END_TEST

START_TEST(test_counter_sequence) {
    rt_model *m = load("saved_model_counter/00000123");
    int64_t none[1] = {0};
    float expect[5] = {0, 1, 0, 1, 4};
    const char *sigs[5] = {"get_counter", "incr_counter", "reset_counter", "incr_counter",
                           "incr_counter_by"};
    for (int i = 0; i < 5; i++) {
        rt_tensor *delta = NULL;
        const char *in_key = NULL;
        if (i == 4) {
            delta = floats(0, none, (float[]){3.0f});
            in_key = "delta";
        }
        rt_feed f = {in_key ? sig_name(m, sigs[i], in_key, 0) : NULL, delta};
        const char *fetch = sig_name(m, sigs[i], "output", 1);
        rt_tensor *out = NULL;
        ck_assert_msg(rt_model_run(m, &f, delta ? 1 : 0, &fetch, 1, NULL, 0, NULL, &out) == MS_OK,
                      "%s: %s", sigs[i], ms_errmsg());
        ck_assert_msg(rt_tensor_f32(out)[0] == expect[i], "step %d (%s): %g", i, sigs[i],
                      rt_tensor_f32(out)[0]);
        rt_tensor_unref(out);
        rt_tensor_unref(delta);
    }
    rt_model_unref(m);
}
END_TEST

START_TEST(test_unsupported_signature_says_op) {
    /* classify_x_to_y parses tf.Example (ParseExample): an Example
     * {features {feature {key "x" value {float_list {value 3}}}}}, written
     * out byte by byte, gives 0.5 * 3 + 2; an empty string lacks the
     * required feature x and the error names the op. */
    rt_model *m = load("saved_model_half_plus_two_cpu/00000123");
    static const uint8_t ex[] = {0x0a, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, 'x',  0x12, 0x08,
                                 0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0x40, 0x40};
    rt_shape s = {1, {1}};
    rt_str str = {ex, sizeof ex};
    rt_tensor *good;
    ck_assert_int_eq(rt_tensor_new_strings(&s, &str, &good), MS_OK);
    rt_feed f = {sig_name(m, "classify_x_to_y", "inputs", 0), good};
    const char *fetch = sig_name(m, "classify_x_to_y", "scores", 1);
    rt_tensor *out = NULL;
    ck_assert_msg(rt_model_run(m, &f, 1, &fetch, 1, NULL, 0, NULL, &out) == MS_OK, "%s",
                  ms_errmsg());
    ck_assert(out->nelem == 1 && rt_tensor_f32(out)[0] == 3.5f);
    rt_tensor_unref(out);
    rt_tensor_unref(good);
    rt_tensor *ex0;
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &s, &ex0), MS_OK);
    f.tensor = ex0;
    out = NULL;
    ck_assert_int_eq(rt_model_run(m, &f, 1, &fetch, 1, NULL, 0, NULL, &out), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "ParseExample"));
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "is required but could not be found"));
    rt_tensor_unref(ex0);
    rt_model_unref(m);
}
END_TEST

/* ---- damaged model directories ---- */

static char tmp[256];

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *d = ut_read_file(from, &n);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(ut_write_file(to, d, n), 0);
    free(d);
}

/* Copies half_plus_two_cpu into tmp/1 and returns that path. */
static const char *copy_model(char *dst, size_t cap) {
    char src[1024], a[1200], b[1200];
    ck_assert_int_eq(ut_mkdtemp(tmp, sizeof tmp), 0);
    snprintf(dst, cap, "%s/1", tmp);
    mkdir(dst, 0755);
    snprintf(a, sizeof a, "%s/variables", dst);
    mkdir(a, 0755);
    model_dir("saved_model_half_plus_two_cpu/00000123", src, sizeof src);
    const char *files[] = {"saved_model.pb", "variables/variables.index",
                           "variables/variables.data-00000-of-00001"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dst, files[i]);
        copy_file(a, b);
    }
    return dst;
}

static void expect_load_error(const char *dir, const char **tags, int ntags, const char *needle) {
    rt_model *m = NULL;
    ms_status st = rt_model_load(dir, tags, ntags, be, &m);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(ms_errmsg(), needle) != NULL, "message '%s' lacks '%s'", ms_errmsg(),
                  needle);
}

static void edit_file(const char *path, long off, int truncate_to) {
    size_t n;
    uint8_t *d = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(d);
    if (truncate_to >= 0) n = (size_t)truncate_to;
    if (off >= 0) d[off < 0 ? 0 : (size_t)off % n] ^= 0x5a;
    ck_assert_int_eq(ut_write_file(path, d, n), 0);
    free(d);
}

START_TEST(test_bad_dirs) {
    char dir[512], p[700];
    /* 0 missing saved_model.pb */
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/saved_model.pb", dir);
    unlink(p);
    expect_load_error(dir, serve, 1, "no saved_model.pb");
    ut_rmtree(tmp);
    /* 1 truncated saved_model.pb */
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/saved_model.pb", dir);
    edit_file(p, -1, 100);
    expect_load_error(dir, serve, 1, "cannot parse SavedModel");
    ut_rmtree(tmp);
    /* 1b corrupt saved_model.pb (bytes that are no protobuf) */
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/saved_model.pb", dir);
    uint8_t junk[64];
    memset(junk, 0xff, sizeof junk);
    ck_assert_int_eq(ut_write_file(p, junk, sizeof junk), 0);
    expect_load_error(dir, serve, 1, "cannot parse SavedModel");
    ut_rmtree(tmp);
    /* 2 missing variables shard */
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", dir);
    unlink(p);
    expect_load_error(dir, serve, 1, "variables.data-00000-of-00001");
    ut_rmtree(tmp);
    /* 3 crc mismatch in the data shard (a's value flipped) */
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", dir);
    edit_file(p, 0, -1);
    expect_load_error(dir, serve, 1, "crc");
    ut_rmtree(tmp);
    /* 4 wrong tag set */
    copy_model(dir, sizeof dir);
    const char *tags[2] = {"serve", "gpu"};
    expect_load_error(dir, tags, 2, "no MetaGraphDef with tag-set {serve, gpu}");
    ut_rmtree(tmp);
    /* 5 not a directory at all */
    expect_load_error("/nonexistent/model/1", serve, 1, "no saved_model.pb");
}
END_TEST

START_TEST(test_unknown_op_fails_load) {
    char dir[512], p[700];
    copy_model(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/saved_model.pb", dir);
    size_t n;
    uint8_t *d = ut_read_file(p, &n);
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, d);
    free(d);
    ck_assert_ptr_nonnull(sm);
    /* y = Add(Mul(a, x), b): make the Mul an op nobody knows. */
    Tensorflow__GraphDef *gd = sm->meta_graphs[0]->graph_def;
    int changed = 0;
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, "Mul") == 0) {
            free(gd->node[i]->op);
            gd->node[i]->op = strdup("FrobnicateV9");
            changed = 1;
        }
    ck_assert(changed);
    n = tensorflow__saved_model__get_packed_size(sm);
    d = malloc(n);
    tensorflow__saved_model__pack(sm, d);
    ck_assert_int_eq(ut_write_file(p, d, n), 0);
    free(d);
    tensorflow__saved_model__free_unpacked(sm, NULL);
    expect_load_error(dir, serve, 1, "1 unsupported op: FrobnicateV9; nodes: FrobnicateV9 'Mul'");
    ut_rmtree(tmp);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("savedmodels");
    TCase *tc = tcase_create("run");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_half_plus_two_tf1, 0, 3);
    tcase_add_test(tc, test_half_plus_two_tf2);
    tcase_add_test(tc, test_matrix_half_plus_two);
    tcase_add_test(tc, test_counter_sequence);
    tcase_add_test(tc, test_unsupported_signature_says_op);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad_dirs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bad_dirs);
    tcase_add_test(tc, test_unknown_op_fails_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
