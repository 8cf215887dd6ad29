/* check_demo_model.c - the bundled DICOM demo model (runtime/savedmodel/rt_demo_model.c):
 * what rt_demo_model_write puts in saved_model.pb (signature, DcmDecodeHU's
 * OpDef in stripped_op_list, TensorFlow-valid attrs, no variables), and the
 * model loaded by our runtime computing mean_hu and tissue_fraction on a
 * batch of two synthetic DICOM files of different sizes, with values worked
 * out by hand below (including HU exactly on each bin boundary and padding
 * that would change the counts if the mask were ignored; a colour file in
 * the batch). Real CT files against pydicom + numpy: tests/it_demo_model.py. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "rt_demo_model.h"
#include "rt_model.h"
#include "tf_savedmodel.pb-c.h"
#include "util_bundle.h"
#include "util_dicom.h"

/* ---- files and folders ---- */

/* Explicit VR LE, rows x cols, 16-bit unsigned stored values v, slope 1,
 * intercept -1000 (HU = v - 1000). */
static void make_file(ut_dbuf *d, uint16_t rows, uint16_t cols, const uint16_t *v) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, "1.2.840.10008.1.2.1");
    ut_dbuf_str(d, 0x0008, 0x0060, "CS", "CT");
    ut_dbuf_image(d, rows, cols, 16, 16, 0, "MONOCHROME2");
    ut_dbuf_str(d, 0x0028, 0x1052, "DS", "-1000");
    ut_dbuf_str(d, 0x0028, 0x1053, "DS", "1");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", (uint32_t)rows * cols * 2);
    for (int i = 0; i < rows * cols; i++)
        ut_dbuf_u16(d, v[i]);
}

/* Explicit VR LE, 1 x 2 RGB, 16 bits per sample, interleaved, no Modality
 * LUT (HU = the stored values): pixels (10, 20, 30) and (200, 400, 1000). */
static void make_rgb_file(ut_dbuf *d) {
    static const uint16_t v[6] = {10, 20, 30, 200, 400, 1000};
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, "1.2.840.10008.1.2.1");
    ut_dbuf_us(d, 0x0028, 0x0002, 3);
    ut_dbuf_str(d, 0x0028, 0x0004, "CS", "RGB");
    ut_dbuf_us(d, 0x0028, 0x0006, 0);
    ut_dbuf_us(d, 0x0028, 0x0010, 1);
    ut_dbuf_us(d, 0x0028, 0x0011, 2);
    ut_dbuf_us(d, 0x0028, 0x0100, 16);
    ut_dbuf_us(d, 0x0028, 0x0101, 16);
    ut_dbuf_us(d, 0x0028, 0x0102, 15);
    ut_dbuf_us(d, 0x0028, 0x0103, 0);
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", 12);
    for (int i = 0; i < 6; i++)
        ut_dbuf_u16(d, v[i]);
}

static rt_tensor *batch(int n, const ut_dbuf *files) {
    rt_str s[4];
    for (int i = 0; i < n; i++)
        s[i] = (rt_str){.data = files[i].p, .len = files[i].n};
    rt_shape sh = rt_shape_make(1, (int64_t[]){n});
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &t), MS_OK);
    return t;
}

/* Writes the demo model into a fresh temp folder: dir gets the folder, vdir
 * its version folder "<dir>/1". */
static void write_model(char *dir, size_t dn, char *vdir, size_t vn) {
    ck_assert_int_eq(ut_mkdtemp(dir, dn), 0);
    snprintf(vdir, vn, "%s/1", dir);
    ck_assert_msg(rt_demo_model_write(vdir) == MS_OK, "%s", ms_errmsg());
}

/* ---- saved_model.pb lookups ---- */

static const Tensorflow__NodeDef *find_node(const Tensorflow__GraphDef *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++)
        if (strcmp(g->node[i]->name, name) == 0) return g->node[i];
    ck_abort_msg("no node %s", name);
    return NULL;
}

static const Tensorflow__AttrValue *attr(const Tensorflow__NodeDef *n, const char *key) {
    for (size_t i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i]->key, key) == 0) return n->attr[i]->value;
    return NULL;
}

static const Tensorflow__TensorInfo *sig_input(const Tensorflow__SignatureDef *sd,
                                               const char *key) {
    for (size_t i = 0; i < sd->n_inputs; i++)
        if (strcmp(sd->inputs[i]->key, key) == 0) return sd->inputs[i]->value;
    ck_abort_msg("signature has no input %s", key);
    return NULL;
}

static const Tensorflow__TensorInfo *sig_output(const Tensorflow__SignatureDef *sd,
                                                const char *key) {
    for (size_t i = 0; i < sd->n_outputs; i++)
        if (strcmp(sd->outputs[i]->key, key) == 0) return sd->outputs[i]->value;
    ck_abort_msg("signature has no output %s", key);
    return NULL;
}

static void check_info(const Tensorflow__TensorInfo *ti, const char *name, int dtype, int rank,
                       const int64_t *dims) {
    ck_assert_str_eq(ti->name, name);
    ck_assert_int_eq(ti->dtype, dtype);
    ck_assert_ptr_nonnull(ti->tensor_shape);
    ck_assert_uint_eq(ti->tensor_shape->n_dim, (size_t)rank);
    for (int i = 0; i < rank; i++)
        ck_assert_int_eq(ti->tensor_shape->dim[i]->size, dims[i]);
}

START_TEST(saved_model_contents) {
    char dir[256], vdir[512], path[600];
    write_model(dir, sizeof(dir), vdir, sizeof(vdir));
    struct stat sb;
    snprintf(path, sizeof(path), "%s/variables", vdir);
    ck_assert_int_ne(stat(path, &sb), 0); /* no variables, no folder */
    snprintf(path, sizeof(path), "%s/saved_model.pb", vdir);
    size_t n;
    uint8_t *pb = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(pb);
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, pb);
    free(pb);
    ck_assert_ptr_nonnull(sm);
    ck_assert_uint_eq(sm->n_meta_graphs, 1);
    const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[0];
    ck_assert_ptr_null(mg->saver_def);

    /* Signature. */
    ck_assert_uint_eq(mg->n_signature_def, 1);
    ck_assert_str_eq(mg->signature_def[0]->key, "serving_default");
    const Tensorflow__SignatureDef *sd = mg->signature_def[0]->value;
    ck_assert_str_eq(sd->method_name, "tensorflow/serving/predict");
    ck_assert_uint_eq(sd->n_inputs, 1);
    ck_assert_uint_eq(sd->n_outputs, 2);
    check_info(sig_input(sd, "dicom"), "dicom:0", TENSORFLOW__DATA_TYPE__DT_STRING, 1,
               (int64_t[]){-1});
    check_info(sig_output(sd, "mean_hu"), "mean_hu:0", TENSORFLOW__DATA_TYPE__DT_FLOAT, 1,
               (int64_t[]){-1});
    check_info(sig_output(sd, "tissue_fraction"), "tissue_fraction:0",
               TENSORFLOW__DATA_TYPE__DT_FLOAT, 2, (int64_t[]){-1, 4});

    /* DcmDecodeHU's OpDef, as documented in runtime/dicom/dcm_ops.c. */
    const Tensorflow__OpList *ol = mg->meta_info_def->stripped_op_list;
    ck_assert_ptr_nonnull(ol);
    ck_assert_uint_eq(ol->n_op, 1);
    const Tensorflow__OpDef *od = ol->op[0];
    ck_assert_str_eq(od->name, "DcmDecodeHU");
    ck_assert_uint_eq(od->n_input_arg, 1);
    ck_assert_str_eq(od->input_arg[0]->name, "contents");
    ck_assert_int_eq(od->input_arg[0]->type, TENSORFLOW__DATA_TYPE__DT_STRING);
    ck_assert_uint_eq(od->n_output_arg, 2);
    ck_assert_str_eq(od->output_arg[0]->name, "hu");
    ck_assert_str_eq(od->output_arg[1]->name, "mask");
    ck_assert_int_eq(od->output_arg[0]->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_int_eq(od->output_arg[1]->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_uint_eq(od->n_attr, 3);
    ck_assert_str_eq(od->attr[0]->name, "frame");
    ck_assert_str_eq(od->attr[0]->type, "int");
    ck_assert_int_eq(od->attr[0]->default_value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
    ck_assert_str_eq(od->attr[1]->name, "size");
    ck_assert_str_eq(od->attr[1]->type, "list(int)");
    ck_assert_int_eq(od->attr[1]->default_value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_LIST);
    ck_assert_uint_eq(od->attr[1]->default_value->list->n_i, 0);
    ck_assert_str_eq(od->attr[2]->name, "pad_value");
    ck_assert_str_eq(od->attr[2]->type, "float");
    ck_assert_int_eq(od->attr[2]->default_value->value_case, TENSORFLOW__ATTR_VALUE__VALUE_F);

    /* Nodes carry the attrs TensorFlow's registry defines, and no others. */
    const Tensorflow__GraphDef *g = mg->graph_def;
    const Tensorflow__NodeDef *dec = find_node(g, "DcmDecodeHU");
    ck_assert_str_eq(dec->op, "DcmDecodeHU");
    ck_assert_uint_eq(dec->n_input, 1);
    ck_assert_str_eq(dec->input[0], "dicom");
    ck_assert_uint_eq(dec->n_attr, 3);
    const Tensorflow__NodeDef *and = find_node(g, "in_fat_water");
    ck_assert_str_eq(and->op, "LogicalAnd");
    ck_assert_uint_eq(and->n_attr, 0);
    const Tensorflow__NodeDef *cast = find_node(g, "air/float");
    ck_assert_str_eq(cast->op, "Cast");
    ck_assert_int_eq(attr(cast, "SrcT")->type, TENSORFLOW__DATA_TYPE__DT_BOOL);
    ck_assert_int_eq(attr(cast, "DstT")->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    const Tensorflow__NodeDef *pack = find_node(g, "counts");
    ck_assert_str_eq(pack->op, "Pack");
    ck_assert_uint_eq(pack->n_input, 4);
    ck_assert_int_eq(attr(pack, "N")->i, 4);
    ck_assert_int_eq(attr(pack, "axis")->i, 1);
    ck_assert_str_eq(find_node(g, "mean_hu")->op, "RealDiv");
    ck_assert_str_eq(find_node(g, "tissue_fraction")->op, "RealDiv");
    ck_assert_int_eq(attr(find_node(g, "total_keep"), "keep_dims")->b, 1);
    tensorflow__saved_model__free_unpacked(sm, NULL);
    ut_rmtree(dir);
}
END_TEST

/* ---- running it ---- */

typedef struct loaded {
    char dir[256];
    kn_backend *be;
    rt_model *m;
} loaded;

static void load(loaded *l) {
    char vdir[512];
    write_model(l->dir, sizeof(l->dir), vdir, sizeof(vdir));
    ms_log_set_level(MS_LOG_ERROR);
    l->be = kn_cpu_backend_new(2);
    ck_assert_ptr_nonnull(l->be);
    static const char *const serve[] = {"serve"};
    ms_status st = rt_model_load(vdir, serve, 1, l->be, &l->m);
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
}

static void unload(loaded *l) {
    rt_model_unref(l->m);
    kn_backend_free(l->be);
    ut_rmtree(l->dir);
}

static ms_status run(loaded *l, rt_tensor *in, rt_tensor **outs) {
    rt_feed f = {"dicom:0", in};
    static const char *const fetch[2] = {"mean_hu:0", "tissue_fraction:0"};
    outs[0] = outs[1] = NULL;
    return rt_model_run(l->m, &f, 1, fetch, 2, NULL, 0, NULL, outs);
}

/* File A, 2x3: HU -1000, -400, -1, 0, 299, 300 (stored = HU + 1000).
 *   bins: < -400 {-1000}; [-400, 0) {-400, -1}; [0, 300) {0, 299}; >= 300 {300}
 *   counts 1, 2, 2, 1 of 6; sum -802, mean -802/6.
 * File B, 3x4: HU -500, -450, -400, -350, 0, 100, 200, 250, 400, 1000, 2000,
 * 3000. counts 2, 2, 4, 4 of 12; sum -1700 + 550 + 6400 = 5250, mean 437.5. In
 * the batch A is padded to 3x4 with HU 0: six padded pixels that would land in
 * bin [0, 300) if the mask were ignored. Every value is a small integer, so
 * sums and counts are exact in float and the expected values are the float
 * quotients below. */
static const uint16_t file_a[6] = {0, 600, 999, 1000, 1299, 1300};
static const uint16_t file_b[12] = {500,  550,  600,  650,  1000, 1100,
                                    1200, 1250, 1400, 2000, 3000, 4000};

static void expect_a(const float *mean, const float *frac) {
    ck_assert_float_eq(*mean, -802.0f / 6.0f);
    ck_assert_float_eq(frac[0], 1.0f / 6.0f);
    ck_assert_float_eq(frac[1], 2.0f / 6.0f);
    ck_assert_float_eq(frac[2], 2.0f / 6.0f);
    ck_assert_float_eq(frac[3], 1.0f / 6.0f);
}

static void expect_b(const float *mean, const float *frac) {
    ck_assert_float_eq(*mean, 437.5f);
    ck_assert_float_eq(frac[0], 2.0f / 12.0f);
    ck_assert_float_eq(frac[1], 2.0f / 12.0f);
    ck_assert_float_eq(frac[2], 4.0f / 12.0f);
    ck_assert_float_eq(frac[3], 4.0f / 12.0f);
}

static void check_shapes(rt_tensor *const *outs, int64_t n) {
    ck_assert_int_eq(outs[0]->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(outs[0]->shape.rank, 1);
    ck_assert_int_eq(outs[0]->shape.dim[0], n);
    ck_assert_int_eq(outs[1]->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(outs[1]->shape.rank, 2);
    ck_assert_int_eq(outs[1]->shape.dim[0], n);
    ck_assert_int_eq(outs[1]->shape.dim[1], 4);
}

START_TEST(batch_of_two_sizes) {
    loaded l;
    load(&l);
    ut_dbuf f[2];
    make_file(&f[0], 2, 3, file_a);
    make_file(&f[1], 3, 4, file_b);
    /* Both orders: the smaller file padded at index 0, then at index 1. */
    for (int order = 0; order < 2; order++) {
        ut_dbuf pair[2] = {f[order], f[1 - order]};
        rt_tensor *in = batch(2, pair), *outs[2];
        ms_status st = run(&l, in, outs);
        ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
        check_shapes(outs, 2);
        const float *mean = rt_tensor_f32(outs[0]), *frac = rt_tensor_f32(outs[1]);
        int ia = order == 0 ? 0 : 1, ib = 1 - ia;
        expect_a(mean + ia, frac + 4 * ia);
        expect_b(mean + ib, frac + 4 * ib);
        rt_tensor_unref(outs[0]);
        rt_tensor_unref(outs[1]);
        rt_tensor_unref(in);
    }
    ut_dbuf_free(&f[0]);
    ut_dbuf_free(&f[1]);
    unload(&l);
}
END_TEST

START_TEST(single_file) {
    loaded l;
    load(&l);
    ut_dbuf f[1];
    make_file(&f[0], 2, 3, file_a);
    rt_tensor *in = batch(1, f), *outs[2];
    ck_assert_msg(run(&l, in, outs) == MS_OK, "run: %s", ms_errmsg());
    check_shapes(outs, 1);
    expect_a(rt_tensor_f32(outs[0]), rt_tensor_f32(outs[1]));
    rt_tensor_unref(outs[0]);
    rt_tensor_unref(outs[1]);
    rt_tensor_unref(in);
    ut_dbuf_free(&f[0]);
    unload(&l);
}
END_TEST

/* One 512x512 file at two threads: large enough for the native HU path and
 * the fused sums to split their work over the pool. Expected values from
 * exact integer counts and sums here (every HU an integer: the float sums
 * are these integers rounded once). */
START_TEST(large_file_two_threads) {
    loaded l;
    load(&l);
    enum { R = 512, C = 512 };
    uint16_t *v = malloc(sizeof(uint16_t) * R * C);
    ck_assert_ptr_nonnull(v);
    uint32_t x = 7;
    int64_t cnt[4] = {0}, sum = 0;
    for (int i = 0; i < R * C; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (uint16_t)((x >> 8) % 4096);
        const int hu = (int)v[i] - 1000;
        sum += hu;
        cnt[hu < -400 ? 0 : hu < 0 ? 1 : hu < 300 ? 2 : 3]++;
    }
    ut_dbuf f[1];
    make_file(&f[0], R, C, v);
    for (int rep = 0; rep < 3; rep++) { /* buffers reused from the pool */
        rt_tensor *in = batch(1, f), *outs[2];
        ck_assert_msg(run(&l, in, outs) == MS_OK, "run: %s", ms_errmsg());
        check_shapes(outs, 1);
        const float n = (float)(R * C);
        ck_assert_float_eq(rt_tensor_f32(outs[0])[0], (float)sum / n);
        for (int k = 0; k < 4; k++)
            ck_assert_float_eq(rt_tensor_f32(outs[1])[k], (float)cnt[k] / n);
        rt_tensor_unref(outs[0]);
        rt_tensor_unref(outs[1]);
        rt_tensor_unref(in);
    }
    ut_dbuf_free(&f[0]);
    free(v);
    unload(&l);
}
END_TEST

/* A colour file makes the batch C = 3: its six samples count one each
 * (bins 0, 0, 4, 2 of 6; sum 10 + 20 + 30 + 200 + 400 + 1000 = 1660), and
 * the grey file A, replicated into three channels, keeps its results. */
START_TEST(colour_file_in_batch) {
    loaded l;
    load(&l);
    ut_dbuf f[2];
    make_file(&f[0], 2, 3, file_a);
    make_rgb_file(&f[1]);
    rt_tensor *in = batch(2, f), *outs[2];
    ck_assert_msg(run(&l, in, outs) == MS_OK, "run: %s", ms_errmsg());
    check_shapes(outs, 2);
    const float *mean = rt_tensor_f32(outs[0]), *frac = rt_tensor_f32(outs[1]);
    expect_a(mean, frac);
    ck_assert_float_eq(mean[1], 1660.0f / 6.0f);
    ck_assert_float_eq(frac[4], 0.0f);
    ck_assert_float_eq(frac[5], 0.0f);
    ck_assert_float_eq(frac[6], 4.0f / 6.0f);
    ck_assert_float_eq(frac[7], 2.0f / 6.0f);
    rt_tensor_unref(outs[0]);
    rt_tensor_unref(outs[1]);
    rt_tensor_unref(in);
    ut_dbuf_free(&f[0]);
    ut_dbuf_free(&f[1]);
    unload(&l);
}
END_TEST

START_TEST(corrupt_file_names_index) {
    loaded l;
    load(&l);
    ut_dbuf f[2];
    make_file(&f[0], 2, 3, file_a);
    make_file(&f[1], 3, 4, file_b);
    f[1].n -= 5; /* pixel data cut short */
    rt_tensor *in = batch(2, f), *outs[2];
    ck_assert_int_eq(run(&l, in, outs), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "dicom[1]: ") != NULL, "%s", ms_errmsg());
    ck_assert_ptr_null(outs[0]);
    ck_assert_ptr_null(outs[1]);
    rt_tensor_unref(in);
    /* The model still runs afterwards. */
    f[1].n += 5;
    in = batch(2, f);
    ck_assert_msg(run(&l, in, outs) == MS_OK, "run: %s", ms_errmsg());
    expect_b(rt_tensor_f32(outs[0]) + 1, rt_tensor_f32(outs[1]) + 4);
    rt_tensor_unref(outs[0]);
    rt_tensor_unref(outs[1]);
    rt_tensor_unref(in);
    ut_dbuf_free(&f[0]);
    ut_dbuf_free(&f[1]);
    unload(&l);
}
END_TEST

static Suite *demo_model_suite(void) {
    Suite *s = suite_create("demo_model");
    TCase *tc = tcase_create("saved_model");
    tcase_add_test(tc, saved_model_contents);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, batch_of_two_sizes);
    tcase_add_test(tc, single_file);
    tcase_add_test(tc, large_file_two_threads);
    tcase_add_test(tc, colour_file_in_batch);
    tcase_add_test(tc, corrupt_file_names_index);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(demo_model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
