/* check_dicom_sizes.c - a DICOM file whose declared size is impossible for
 * the bytes it carries (Rows = Columns = 65535 with 32 KB of pixel data;
 * NumberOfFrames = 2^31-1; more frames than fragments) is the file's fault:
 * DcmDecodeHU with a request budget answers MS_EINVAL (INVALID_ARGUMENT), not
 * MS_ENOMEM (RESOURCE_EXHAUSTED, which clients retry), because the size is
 * checked against the bytes present before the budget is asked. A file
 * too large for the budget but whose bytes are all there stays MS_ENOMEM. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_ctx.h"
#include "ms_budget.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_ops.h"
#include "util_dicom.h"
#include "util_node.h"

#define GIB ((uint64_t)1 << 30)

/* Explicit VR LE, 16-bit MONOCHROME2, `frames` ("" = no NumberOfFrames),
 * native pixel data of `bytes` zero bytes, or encapsulated (RLE) with
 * `frags` fragments of 16 bytes each when frags > 0. */
static void make(ut_dbuf *d, uint16_t rows, uint16_t cols, const char *frames, uint32_t bytes,
                 int frags) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, frags ? "1.2.840.10008.1.2.5" : "1.2.840.10008.1.2.1");
    ut_dbuf_us(d, 0x0028, 0x0002, 1);
    ut_dbuf_str(d, 0x0028, 0x0004, "CS", "MONOCHROME2");
    if (frames[0]) ut_dbuf_str(d, 0x0028, 0x0008, "IS", frames);
    ut_dbuf_us(d, 0x0028, 0x0010, rows);
    ut_dbuf_us(d, 0x0028, 0x0011, cols);
    ut_dbuf_us(d, 0x0028, 0x0100, 16);
    ut_dbuf_us(d, 0x0028, 0x0101, 16);
    ut_dbuf_us(d, 0x0028, 0x0102, 15);
    ut_dbuf_us(d, 0x0028, 0x0103, 0);
    uint8_t zero[16] = {0};
    if (frags == 0) {
        ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", bytes);
        for (uint32_t i = 0; i < bytes; i += 16) ut_dbuf_bytes(d, zero, 16);
        return;
    }
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OB", 0xFFFFFFFFu);
    ut_dbuf_item(d, 0xE000, 0); /* empty basic offset table */
    for (int f = 0; f < frags; f++) {
        ut_dbuf_item(d, 0xE000, 16);
        ut_dbuf_bytes(d, zero, 16);
    }
    ut_dbuf_item(d, 0xE0DD, 0);
}

/* Runs DcmDecodeHU on one file with a request budget of `limit` bytes. */
static ms_status decode(const ut_dbuf *f, uint64_t limit) {
    rt_str s = {.data = f->p, .len = (int64_t)f->n};
    rt_shape sh = rt_shape_make(1, (int64_t[]){1});
    rt_tensor *in = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, &s, &in), MS_OK);
    Tensorflow__NodeDef def = TENSORFLOW__NODE_DEF__INIT;
    def.name = "dec";
    def.op = "DcmDecodeHU";
    kn_node kn = {.name = "dec", .op = "DcmDecodeHU", .def = &def, .attrs = &rt_nodedef_attrs,
                  .nin = 1, .nout = 2};
    ms_budget budget;
    ms_budget_init(&budget, limit);
    kn_ctx ctx = {.nthreads = 1, .budget = &budget};
    const kn_kernel *k = rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU");
    ck_assert_ptr_nonnull(k);
    void *state = NULL;
    rt_tensor *out[2] = {NULL, NULL};
    ms_status st = k->prepare ? k->prepare(&kn, NULL, &state) : MS_OK;
    if (st == MS_OK) st = k->compute(&ctx, &kn, state, &in, out);
    if (k->release && state) k->release(state);
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);
    rt_tensor_unref(in);
    ck_assert_uint_eq(atomic_load(&budget.used), 0);
    return st;
}

START_TEST(test_sizes) {
    ut_dbuf d;
    /* 65535 x 65535 x 16 bits needs 8.6 GB; 32 KB are there. */
    make(&d, 65535, 65535, "", 32768, 0);
    ck_assert_int_eq(decode(&d, GIB), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "pixel data has 32768 bytes") != NULL, "%s", ms_errmsg());
    ut_dbuf_free(&d);
    /* NumberOfFrames 2^31-1 of 16 x 16: 512 bytes are there. */
    make(&d, 16, 16, "2147483647", 512, 0);
    ck_assert_int_eq(decode(&d, GIB), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "2147483647 frames") != NULL, "%s", ms_errmsg());
    ut_dbuf_free(&d);
    /* Encapsulated: 2^31-1 frames in 3 fragments. */
    make(&d, 16, 16, "2147483647", 0, 3);
    ck_assert_int_eq(decode(&d, GIB), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "fragments") != NULL, "%s", ms_errmsg());
    ut_dbuf_free(&d);
    /* All bytes there and within the budget: decodes. */
    make(&d, 16, 16, "2", 1024, 0);
    ck_assert_msg(decode(&d, GIB) == MS_OK, "%s", ms_errmsg());
    ut_dbuf_free(&d);
    /* All bytes there, over the budget (2 frames of 16 x 16 as float32 are
     * 2 KB, the budget 1000 bytes): still RESOURCE_EXHAUSTED. */
    make(&d, 16, 16, "2", 1024, 0);
    ck_assert_int_eq(decode(&d, 1000), MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "--max_request_memory_bytes") != NULL, "%s", ms_errmsg());
    ut_dbuf_free(&d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dicom_sizes");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sizes);
    suite_add_tcase(s, tc);
    return tu_suite_run(s);
}
