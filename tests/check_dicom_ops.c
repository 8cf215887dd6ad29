/* check_dicom_ops.c - the DICOM graph ops run alone (no graph, ctx NULL):
 * DcmDecodeHU (batch of files of different sizes -> padded HU + mask, per-file
 * resize, errors naming the batch index), DcmWindow (window, NCHW layout,
 * bilinear resize with and without a mask) and IO>DecodeDICOMImage.
 * Expected values are worked out by hand in the comments. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_ops.h"
#include "tf_framework.pb-c.h"
#include "util_dicom.h"

/* ---- a NodeDef with a few attrs ---- */

typedef struct tnode {
    Tensorflow__NodeDef def;
    Tensorflow__NodeDef__AttrEntry ent[8];
    Tensorflow__NodeDef__AttrEntry *entp[8];
    Tensorflow__AttrValue val[8];
    Tensorflow__AttrValue__ListValue list[8];
    int64_t ints[8][2];
    kn_node kn;
} tnode;

static void tnode_init(tnode *t, const char *op, int nin, int nout) {
    memset(t, 0, sizeof(*t));
    tensorflow__node_def__init(&t->def);
    t->def.name = (char *)"n";
    t->def.op = (char *)op;
    t->def.attr = t->entp;
    t->kn = (kn_node){.name = "n", .op = op, .def = &t->def, .attrs = &rt_nodedef_attrs, .nin = nin, .nout = nout};
}

static Tensorflow__AttrValue *tnode_attr(tnode *t, const char *key) {
    size_t k = t->def.n_attr++;
    tensorflow__node_def__attr_entry__init(&t->ent[k]);
    tensorflow__attr_value__init(&t->val[k]);
    t->ent[k].key = (char *)key;
    t->ent[k].value = &t->val[k];
    t->entp[k] = &t->ent[k];
    return &t->val[k];
}

static void attr_f(tnode *t, const char *key, float f) {
    Tensorflow__AttrValue *v = tnode_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    v->f = f;
}

static void attr_s(tnode *t, const char *key, const char *s) {
    Tensorflow__AttrValue *v = tnode_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s;
    v->s.len = strlen(s);
}

static void attr_type(tnode *t, const char *key, rt_dtype dt) {
    Tensorflow__AttrValue *v = tnode_attr(t, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)dt;
}

static void attr_pair(tnode *t, const char *key, int64_t h, int64_t w) {
    size_t k = t->def.n_attr;
    Tensorflow__AttrValue *v = tnode_attr(t, key);
    tensorflow__attr_value__list_value__init(&t->list[k]);
    t->ints[k][0] = h;
    t->ints[k][1] = w;
    t->list[k].n_i = 2;
    t->list[k].i = t->ints[k];
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = &t->list[k];
}

static void attr_size(tnode *t, int64_t h, int64_t w) {
    attr_pair(t, "size", h, w);
}

/* Runs prepare + compute + release of `op` on the node. */
static ms_status run_op(const kn_kernel *k, tnode *t, rt_tensor *const *in, rt_tensor **out) {
    void *state = NULL;
    ms_status st = k->prepare ? k->prepare(&t->kn, NULL, &state) : MS_OK;
    if (st == MS_OK) st = k->compute(NULL, &t->kn, state, in, out);
    if (k->release && state) k->release(state);
    return st;
}

static const kn_kernel *cpu_kernel(const char *op) {
    kn_backend *b = kn_cpu_backend_new(1);
    const kn_kernel *k = kn_backend_kernel(b, op);
    kn_backend_free(b);
    return k;
}

/* ---- files ---- */

/* rows x cols, 16-bit unsigned, values v[i], slope 1 intercept -1000. */
static void make_file(ut_dbuf *d, uint16_t rows, uint16_t cols, const uint16_t *v) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, "1.2.840.10008.1.2.1");
    ut_dbuf_image(d, rows, cols, 16, 16, 0, "MONOCHROME2");
    ut_dbuf_str(d, 0x0028, 0x1052, "DS", "-1000");
    ut_dbuf_str(d, 0x0028, 0x1053, "DS", "1");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", (uint32_t)rows * cols * 2);
    for (int i = 0; i < rows * cols; i++)
        ut_dbuf_u16(d, v[i]);
}

static rt_tensor *strings(int n, const ut_dbuf *files) {
    rt_str s[4];
    for (int i = 0; i < n; i++)
        s[i] = (rt_str){.data = files[i].p, .len = files[i].n};
    rt_shape sh = rt_shape_make(1, (int64_t[]){n});
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &t), MS_OK);
    return t;
}

static rt_tensor *floats(int64_t n0, int64_t n1, int64_t n2, int64_t n3, const float *v) {
    rt_shape sh = rt_shape_make(4, (int64_t[]){n0, n1, n2, n3});
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &sh, &t), MS_OK);
    memcpy(t->data, v, (size_t)t->nelem * sizeof(float));
    return t;
}

/* ---- DcmDecodeHU ---- */

START_TEST(decode_batch_padded) {
    /* File 0: 2x3 values 1000..1005 -> HU 0..5. File 1: 3x2 values 900, 1100,
     * ... -> HU -100, 100, 200, 300, 400, 500. Batch H = W = 3. */
    const uint16_t a[6] = {1000, 1001, 1002, 1003, 1004, 1005};
    const uint16_t b[6] = {900, 1100, 1200, 1300, 1400, 1500};
    ut_dbuf f[2];
    make_file(&f[0], 2, 3, a);
    make_file(&f[1], 3, 2, b);
    rt_tensor *in = strings(2, f), *out[2] = {NULL, NULL};
    tnode t;
    tnode_init(&t, "DcmDecodeHU", 1, 2);
    attr_f(&t, "pad_value", -2000.f);
    const kn_kernel *k = rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU");
    ck_assert_ptr_nonnull(k);
    ck_assert_msg(run_op(k, &t, &in, out) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(out[0]->shape.rank, 4);
    ck_assert_int_eq(out[0]->shape.dim[0], 2);
    ck_assert_int_eq(out[0]->shape.dim[1], 3);
    ck_assert_int_eq(out[0]->shape.dim[2], 3);
    ck_assert_int_eq(out[0]->shape.dim[3], 1);
    const float want_hu[18] = {0,    1,   2,     3,   4,   5,     -2000, -2000, -2000,
                               -100, 100, -2000, 200, 300, -2000, 400,   500,   -2000};
    const float want_m[18] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0};
    for (int i = 0; i < 18; i++) {
        ck_assert_float_eq(rt_tensor_f32(out[0])[i], want_hu[i]);
        ck_assert_float_eq(rt_tensor_f32(out[1])[i], want_m[i]);
    }
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);
    rt_tensor_unref(in);
    ut_dbuf_free(&f[0]);
    ut_dbuf_free(&f[1]);
}
END_TEST

START_TEST(decode_resize_per_file) {
    /* 1x2 file [0, 10] HU resized to 1x4: src x = (x+0.5)/2-0.5 =
     * -0.25, 0.25, 0.75, 1.25 -> 0, 2.5, 7.5, 10. */
    const uint16_t a[2] = {1000, 1010};
    ut_dbuf f[1];
    make_file(&f[0], 1, 2, a);
    rt_tensor *in = strings(1, f), *out[2] = {NULL, NULL};
    tnode t;
    tnode_init(&t, "DcmDecodeHU", 1, 2);
    attr_size(&t, 1, 4);
    ck_assert_msg(run_op(rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU"), &t, &in, out) == MS_OK, "%s",
                  ms_errmsg());
    const float want[4] = {0.f, 2.5f, 7.5f, 10.f};
    ck_assert_int_eq(out[0]->nelem, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(rt_tensor_f32(out[0])[i], want[i]);
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);
    rt_tensor_unref(in);
    ut_dbuf_free(&f[0]);
}
END_TEST

START_TEST(decode_error_names_index) {
    const uint16_t a[2] = {1000, 1010};
    ut_dbuf f[3];
    make_file(&f[0], 1, 2, a);
    make_file(&f[1], 1, 2, a);
    make_file(&f[2], 1, 2, a);
    f[2].n -= 3; /* truncated pixel data */
    rt_tensor *in = strings(3, f), *out[2] = {NULL, NULL};
    tnode t;
    tnode_init(&t, "DcmDecodeHU", 1, 2);
    ck_assert_int_eq(run_op(rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU"), &t, &in, out), MS_EINVAL);
    ck_assert_msg(strncmp(ms_errmsg(), "dicom[2]: ", 10) == 0, "%s", ms_errmsg());
    ck_assert_ptr_null(out[0]);
    rt_tensor_unref(in);
    for (int i = 0; i < 3; i++)
        ut_dbuf_free(&f[i]);
}
END_TEST

/* A 1x2 file with Modality `mod` (NULL: no Modality element). */
static void make_file_mod(ut_dbuf *d, const char *mod, uint16_t rows, uint16_t cols) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, "1.2.840.10008.1.2.1");
    if (mod != NULL) ut_dbuf_str(d, 0x0008, 0x0060, "CS", mod);
    ut_dbuf_image(d, rows, cols, 16, 16, 0, "MONOCHROME2");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", (uint32_t)rows * cols * 2);
    for (int i = 0; i < rows * cols; i++)
        ut_dbuf_u16(d, (uint16_t)(1000 + i));
}

/* Runs DcmDecodeHU with attrs modalities/expect_size over one file. */
static ms_status run_guarded(const ut_dbuf *f, const char *mods, int64_t eh, int64_t ew) {
    rt_tensor *in = strings(1, f), *out[2] = {NULL, NULL};
    tnode t;
    tnode_init(&t, "DcmDecodeHU", 1, 2);
    if (mods != NULL) attr_s(&t, "modalities", mods);
    if (eh > 0) attr_pair(&t, "expect_size", eh, ew);
    ms_status st = run_op(rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU"), &t, &in, out);
    if (st == MS_OK) ck_assert_ptr_nonnull(out[0]);
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);
    rt_tensor_unref(in);
    return st;
}

START_TEST(decode_modality_guard) {
    ut_dbuf ct, mr, none;
    make_file_mod(&ct, "CT", 1, 2);
    make_file_mod(&mr, "MR", 1, 2);
    make_file_mod(&none, NULL, 1, 2);
    ck_assert_msg(run_guarded(&ct, "CT", 0, 0) == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(run_guarded(&mr, "CT,MR", 0, 0) == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(run_guarded(&mr, NULL, 0, 0) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(run_guarded(&mr, "CT", 0, 0), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "'MR'") && strstr(ms_errmsg(), "takes CT"), "%s",
                  ms_errmsg());
    /* "C" is not a prefix match for "CT". */
    ck_assert_int_eq(run_guarded(&ct, "C,CTX", 0, 0), MS_EINVAL);
    ck_assert_int_eq(run_guarded(&none, "CT", 0, 0), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "missing") != NULL, "%s", ms_errmsg());
    ut_dbuf_free(&ct);
    ut_dbuf_free(&mr);
    ut_dbuf_free(&none);
}
END_TEST

START_TEST(decode_expect_size) {
    ut_dbuf f;
    make_file_mod(&f, "CT", 2, 3);
    ck_assert_msg(run_guarded(&f, NULL, 2, 3) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(run_guarded(&f, NULL, 3, 2), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "2x3") && strstr(ms_errmsg(), "3x2"), "%s", ms_errmsg());
    ut_dbuf_free(&f);
}
END_TEST

/* ---- DcmWindow ---- */

START_TEST(window_layout) {
    /* L=40 W=400: lo -160, hi 240. (1, 1, 2, 3): pixel 0 = (-1000, 40, 0),
     * pixel 1 = (240, 1000, -160) -> (0, .5, .4) and (1, 1, 0); NCHW puts the
     * channels first: [0, 1, .5, 1, .4, 0]. */
    const float x[6] = {-1000, 40, 0, 240, 1000, -160};
    rt_tensor *in = floats(1, 1, 2, 3, x), *out = NULL;
    tnode t;
    tnode_init(&t, "DcmWindow", 1, 1);
    attr_f(&t, "center", 40.f);
    attr_f(&t, "width", 400.f);
    attr_s(&t, "data_format", "NCHW");
    const kn_kernel *k = cpu_kernel("DcmWindow");
    ck_assert_ptr_nonnull(k);
    ck_assert_msg(run_op(k, &t, &in, &out) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(out->shape.dim[1], 3);
    ck_assert_int_eq(out->shape.dim[2], 1);
    ck_assert_int_eq(out->shape.dim[3], 2);
    const float want[6] = {0.f, 1.f, 0.5f, 1.f, 160.f / 400.f, 0.f};
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(rt_tensor_f32(out)[i], want[i]);
    rt_tensor_unref(out);
    /* Width 0 is refused at prepare. */
    tnode_init(&t, "DcmWindow", 1, 1);
    attr_f(&t, "center", 40.f);
    attr_f(&t, "width", 0.f);
    ck_assert_int_eq(run_op(k, &t, &in, &out), MS_EINVAL);
    rt_tensor_unref(in);
}
END_TEST

START_TEST(window_resize_with_mask) {
    /* Window center .5 width 1 maps [0,1] to itself. The image's 2x2 part
     * [[0, .25], [.5, .75]] sits in a 3x3 tensor (the rest 99, masked out);
     * resized to 4x4 (half-pixel centers, hand-computed):
     *   row 0: 0, .0625, .1875, .25     row 1: .125, .1875, .3125, .375
     *   row 2: .375, .4375, .5625, .625  row 3: .5, .5625, .6875, .75 */
    const float x[9] = {0, .25f, 99, .5f, .75f, 99, 99, 99, 99};
    const float m[9] = {1, 1, 0, 1, 1, 0, 0, 0, 0};
    rt_tensor *in[2] = {floats(1, 3, 3, 1, x), floats(1, 3, 3, 1, m)}, *out = NULL;
    tnode t;
    tnode_init(&t, "DcmWindow", 2, 1);
    attr_f(&t, "center", .5f);
    attr_f(&t, "width", 1.f);
    attr_size(&t, 4, 4);
    ck_assert_msg(run_op(cpu_kernel("DcmWindow"), &t, in, &out) == MS_OK, "%s", ms_errmsg());
    const float want[16] = {0,     .0625f, .1875f, .25f,  .125f, .1875f, .3125f, .375f,
                            .375f, .4375f, .5625f, .625f, .5f,   .5625f, .6875f, .75f};
    ck_assert_int_eq(out->nelem, 16);
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq_tol(rt_tensor_f32(out)[i], want[i], 1e-7);
    rt_tensor_unref(out);
    rt_tensor_unref(in[0]);
    rt_tensor_unref(in[1]);
}
END_TEST

/* ---- IO>DecodeDICOMImage ---- */

START_TEST(tfio_decode) {
    /* Stored values, no rescale: 2x2 12-bit signed words 0xF005 0x0FFF 0x1800
     * 0x07FF -> 5, -1, -2048, 2047; as uint16 negatives clamp to 0. */
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, "1.2.840.10008.1.2.1");
    ut_dbuf_image(&d, 2, 2, 16, 12, 1, "MONOCHROME2");
    ut_dbuf_str(&d, 0x0028, 0x1052, "DS", "-1024");
    ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OW", 8);
    const uint16_t w[4] = {0xF005, 0x0FFF, 0x1800, 0x07FF};
    for (int i = 0; i < 4; i++)
        ut_dbuf_u16(&d, w[i]);
    rt_str s = {.data = d.p, .len = d.n};
    rt_tensor *in = NULL, *out = NULL;
    rt_shape sc = rt_shape_make(0, NULL);
    ck_assert_int_eq(rt_tensor_new_strings(&sc, &s, &in), MS_OK);
    const kn_kernel *k = rt_ops_host_kernel(rt_model_host_ops, "IO>DecodeDICOMImage");
    ck_assert_ptr_nonnull(k);
    tnode t;
    tnode_init(&t, "IO>DecodeDICOMImage", 1, 1);
    attr_type(&t, "dtype", RT_DT_FLOAT);
    ck_assert_msg(run_op(k, &t, &in, &out) == MS_OK, "%s", ms_errmsg());
    const float wf[4] = {5, -1, -2048, 2047};
    ck_assert_int_eq(out->shape.rank, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(rt_tensor_f32(out)[i], wf[i]);
    rt_tensor_unref(out);
    tnode_init(&t, "IO>DecodeDICOMImage", 1, 1);
    ck_assert_int_eq(run_op(k, &t, &in, &out), MS_OK); /* default uint16 */
    const uint16_t wu[4] = {5, 0, 0, 2047};
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(((uint16_t *)out->data)[i], wu[i]);
    rt_tensor_unref(out);
    rt_tensor_unref(in);
    /* Corrupt bytes: skip -> empty tensor; strict -> error. */
    d.n = 140;
    s.len = d.n;
    ck_assert_int_eq(rt_tensor_new_strings(&sc, &s, &in), MS_OK);
    tnode_init(&t, "IO>DecodeDICOMImage", 1, 1);
    ck_assert_int_eq(run_op(k, &t, &in, &out), MS_OK);
    ck_assert_int_eq(out->nelem, 0);
    rt_tensor_unref(out);
    tnode_init(&t, "IO>DecodeDICOMImage", 1, 1);
    attr_s(&t, "on_error", "strict");
    out = NULL;
    ck_assert_int_eq(run_op(k, &t, &in, &out), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "dicom[0]") != NULL, "%s", ms_errmsg());
    rt_tensor_unref(in);
    ut_dbuf_free(&d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dicom_ops");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, decode_batch_padded);
    tcase_add_test(tc, decode_resize_per_file);
    tcase_add_test(tc, decode_error_names_index);
    tcase_add_test(tc, decode_modality_guard);
    tcase_add_test(tc, decode_expect_size);
    suite_add_tcase(s, tc);
    tc = tcase_create("window");
    tcase_add_test(tc, window_layout);
    tcase_add_test(tc, window_resize_with_mask);
    suite_add_tcase(s, tc);
    tc = tcase_create("tfio");
    tcase_add_test(tc, tfio_decode);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
