/* check_dicom_model.c - the DICOM demo model (runtime/dcm_demo_model.c) is
 * written, loaded by the runtime and run on a batch of two hand-built files
 * of different sizes; expected outputs are worked out by hand below. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_demo_model.h"
#include "kn_backend.h"
#include "ms_log.h"
#include "rt_model.h"
#include "util_bundle.h"
#include "util_dicom.h"

/* rows x cols, 16-bit unsigned stored values v, slope 1, intercept -1000. */
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

START_TEST(demo_model_batch) {
    /* File A, 2x3: HU 0..5 -> mean 2.5; all six in [0, 300): fractions 0, 0, 1, 0.
     * File B, 2x4: HU -1000 -500 -400 -1 0 299 300 1000 -> mean -302/8 = -37.75;
     * two pixels in each band: fractions .25 .25 .25 .25 (boundaries: -400 and
     * 0 and 300 belong to the upper band). The batch is padded to 2x4. */
    const uint16_t a[6] = {1000, 1001, 1002, 1003, 1004, 1005};
    const uint16_t b[8] = {0, 500, 600, 999, 1000, 1299, 1300, 2000};
    ut_dbuf f[2];
    make_file(&f[0], 2, 3, a);
    make_file(&f[1], 2, 4, b);

    char dir[256], vdir[512];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(vdir, sizeof(vdir), "%s/1", dir);
    ck_assert_msg(dcm_demo_model_write(vdir) == MS_OK, "%s", ms_errmsg());

    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(2);
    static const char *const serve[] = {"serve"};
    rt_model *m = NULL;
    ck_assert_msg(rt_model_load(vdir, serve, 1, be, &m) == MS_OK, "load: %s", ms_errmsg());

    rt_str s[2] = {{f[0].p, f[0].n}, {f[1].p, f[1].n}};
    rt_shape sh = rt_shape_make(1, (int64_t[]){2});
    rt_tensor *in = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &in), MS_OK);
    rt_feed feed = {"dicom:0", in};
    const char *fetch[2] = {"mean_hu:0", "tissue_fraction:0"};
    rt_tensor *out[2] = {NULL, NULL};
    ck_assert_msg(rt_model_run(m, &feed, 1, fetch, 2, NULL, 0, NULL, out) == MS_OK, "run: %s",
                  ms_errmsg());
    ck_assert_int_eq(out[0]->shape.rank, 1);
    ck_assert_int_eq(out[0]->shape.dim[0], 2);
    ck_assert_float_eq(rt_tensor_f32(out[0])[0], 2.5f);
    ck_assert_float_eq(rt_tensor_f32(out[0])[1], -37.75f);
    ck_assert_int_eq(out[1]->shape.rank, 2);
    ck_assert_int_eq(out[1]->shape.dim[0], 2);
    ck_assert_int_eq(out[1]->shape.dim[1], 4);
    const float want[8] = {0, 0, 1, 0, .25f, .25f, .25f, .25f};
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(rt_tensor_f32(out[1])[i], want[i]);
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);

    /* A bad file in the batch: INVALID_ARGUMENT naming its index. */
    s[1].len = 150;
    rt_tensor_unref(in);
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &in), MS_OK);
    feed.tensor = in;
    out[0] = out[1] = NULL;
    ck_assert_int_eq(rt_model_run(m, &feed, 1, fetch, 2, NULL, 0, NULL, out), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "dicom[1]") != NULL, "%s", ms_errmsg());

    rt_tensor_unref(in);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_dbuf_free(&f[0]);
    ut_dbuf_free(&f[1]);
    ut_rmtree(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dicom_model");
    TCase *tc = tcase_create("demo");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, demo_model_batch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
