/* check_codecs_hostile.c - dcm_codec_decode on hostile input: every test frame
 * (see check_codecs.c and tests/tools/) truncated at several points, with
 * random bytes flipped, and with a header geometry that disagrees with the
 * stream. Decoding must fail with MS_EINVAL (or MS_ENOTSUP) and a reason, and
 * never read or write out of bounds (run in the ASan/UBSan build). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_codec.h"
#include "ms_status.h"
#include "util_codecs.h"

static ucodec_frame *g_frames;
static size_t g_nframes;

static ms_status decode_frame(const ucodec_frame *fr, const uint8_t *data, size_t len,
                              uint8_t **out, int *rgb) {
    size_t n = ucodec_frame_size(&fr->geom);
    *out = calloc(n ? n : 1, 1);
    ck_assert_ptr_nonnull(*out);
    return dcm_codec_decode(fr->kind, data, len, &fr->geom, *out, n, rgb);
}

/* ---- hostile input ---- */

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Truncations must fail with a reason (or, for the last few bytes of a stream
 * whose end is padding, still decode); never crash (ASan build). */
static void truncated_stream_one(size_t idx) {
    const ucodec_frame *fr = &g_frames[idx];
    size_t len;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    ck_assert_ptr_nonnull(data);
    const size_t cuts[] = {1, 10, 64, len / 3, (len * 3) / 4};
    for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
        if (cuts[c] >= len) continue;
        /* An exact-size copy so that ASan sees any over-read. */
        uint8_t *cut = malloc(cuts[c]);
        memcpy(cut, data, cuts[c]);
        uint8_t *out = NULL;
        int rgb;
        ms_err_clear();
        ms_status st = decode_frame(fr, cut, cuts[c], &out, &rgb);
        ck_assert_msg(st == MS_EINVAL, "%s cut to %zu of %zu bytes: status %s (%s)", fr->name,
                      cuts[c], len, ms_status_name(st), ms_errmsg());
        ck_assert_msg(ms_errmsg()[0] != '\0', "%s: error without a reason", fr->name);
        free(out);
        free(cut);
    }
    free(data);
}

static void flipped_bytes_one(size_t idx) {
    const ucodec_frame *fr = &g_frames[idx];
    size_t len;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    ck_assert_ptr_nonnull(data);
    uint32_t seed = 12345u + (uint32_t)idx;
    for (int round = 0; round < 8; round++) {
        uint8_t *bad = malloc(len);
        memcpy(bad, data, len);
        int nflip = 1 + (int)(lcg(&seed) % 8);
        for (int k = 0; k < nflip; k++) {
            /* Half the flips hit the first 300 bytes, where the headers are. */
            size_t pos = (k & 1) ? lcg(&seed) % len : lcg(&seed) % (len < 300 ? len : 300);
            bad[pos] ^= (uint8_t)(1u + lcg(&seed) % 255u);
        }
        uint8_t *out = NULL;
        int rgb;
        ms_err_clear();
        ms_status st = decode_frame(fr, bad, len, &out, &rgb);
        if (st != MS_OK) {
            ck_assert_msg(st == MS_EINVAL || st == MS_ENOTSUP, "%s: status %s (%s)", fr->name,
                          ms_status_name(st), ms_errmsg());
            ck_assert_msg(ms_errmsg()[0] != '\0', "%s: error without a reason", fr->name);
        }
        free(out);
        free(bad);
    }
    free(data);
}

static void geometry_mismatch_one(size_t idx) {
    const ucodec_frame *fr = &g_frames[idx];
    size_t len;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    ck_assert_ptr_nonnull(data);
    for (int v = 0; v < 3; v++) {
        ucodec_frame bad = *fr;
        bad.geom.photometric = bad.photometric;
        if (v == 0) bad.geom.rows += 1;
        if (v == 1) bad.geom.cols += 8;
        if (v == 2) bad.geom.samples = fr->geom.samples == 1 ? 3 : 1;
        uint8_t *out = NULL;
        int rgb;
        ms_err_clear();
        ms_status st = decode_frame(&bad, data, len, &out, &rgb);
        ck_assert_msg(st == MS_EINVAL, "%s variant %d: status %s (%s)", fr->name, v,
                      ms_status_name(st), ms_errmsg());
        free(out);
    }
    free(data);
}

/* One test per kind of damage, each over all frames: forking an ASan process
 * per frame costs more than the decoding. */
START_TEST(test_truncated_stream) {
    for (size_t i = 0; i < g_nframes; i++) truncated_stream_one(i);
}
END_TEST

START_TEST(test_flipped_bytes) {
    for (size_t i = 0; i < g_nframes; i++) flipped_bytes_one(i);
}
END_TEST

START_TEST(test_geometry_mismatch) {
    for (size_t i = 0; i < g_nframes; i++) geometry_mismatch_one(i);
}
END_TEST

static Suite *hostile_suite(void) {
    Suite *s = suite_create("codecs_hostile");
    TCase *tc = tcase_create("hostile");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, test_truncated_stream);
    tcase_add_test(tc, test_flipped_bytes);
    tcase_add_test(tc, test_geometry_mismatch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_nframes = ucodec_load_all(&g_frames);
    if (g_nframes == 0) {
        fprintf(stderr, "check_codecs_hostile: no frames\n");
        return 1;
    }
    SRunner *sr = srunner_create(hostile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free(g_frames);
    return failed == 0 ? 0 : 1;
}
