/* check_codecs.c - dcm_codec_decode against independent references.
 *
 * Real frames: every encapsulated file of Debian's pydicom test data, split
 * into frames by pydicom and compared with pydicom + GDCM's pixel_array
 * (tests/tools/dump_frames.py). Generated frames: streams made by independent
 * encoders (tests/tools/gen_streams.py: GDCM, CharLS via gdcmconv, OpenJPEG's
 * opj_compress, OpenJPH's ojph_compress, and a small Python JPEG-lossless
 * encoder checked against GDCM) from known native pixels. Then hostile input:
 * truncation, flipped bytes, geometry that disagrees with the stream, and
 * concurrent decoding. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "dcm_codec.h"
#include "ms_status.h"
#include "util_codecs.h"

static ucodec_frame *g_frames;
static size_t g_nframes;

static const char *kind_name(dcm_codec_kind k) {
    static const char *const names[] = {"native", "jpeg-baseline", "jpeg-extended",
                                        "jpeg-lossless", "jpeg-ls", "j2k", "rle",
                                        "deflate-frame", "encaps-native"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* Decodes frame fr; returns status, fills *out (malloc'ed) and *rgb. */
static ms_status decode_frame(const ucodec_frame *fr, const uint8_t *data, size_t len,
                              uint8_t **out, int *rgb) {
    size_t n = ucodec_frame_size(&fr->geom);
    *out = calloc(n ? n : 1, 1);
    ck_assert_ptr_nonnull(*out);
    return dcm_codec_decode(fr->kind, data, len, &fr->geom, *out, n, rgb);
}

/* ---- decoding real and generated frames against references ---- */

static int check_one(const ucodec_frame *fr, char *why, size_t whylen) {
    size_t len, rlen;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    uint8_t *ref = ucodec_read_file(fr->ref_path, &rlen);
    uint8_t *out = NULL;
    int rgb = -1, ok = 0;
    if (data == NULL || ref == NULL) {
        snprintf(why, whylen, "cannot read %s or its reference", fr->frame_path);
        goto done;
    }
    if (rlen != ucodec_frame_size(&fr->geom)) {
        snprintf(why, whylen, "reference is %zu bytes, expected %zu", rlen,
                 ucodec_frame_size(&fr->geom));
        goto done;
    }
    ms_status st = decode_frame(fr, data, len, &out, &rgb);
    if (fr->tolerance < 0) {
        /* Corrupt on purpose: a clear error is the right answer. */
        ok = st == MS_EINVAL && ms_errmsg()[0] != '\0';
        snprintf(why, whylen, "expected a decode error, got %s (%s)", ms_status_name(st),
                 ms_errmsg());
        goto done;
    }
    if (st != MS_OK) {
        snprintf(why, whylen, "decode failed: %s: %s", ms_status_name(st), ms_errmsg());
        goto done;
    }
    uint32_t d = ucodec_max_diff(&fr->geom, out, ref);
    if (d > (uint32_t)fr->tolerance) {
        snprintf(why, whylen, "max difference %u > tolerance %d (reference: %s)", d,
                 fr->tolerance, fr->source);
        goto done;
    }
    if (rgb != fr->expect_rgb) {
        snprintf(why, whylen, "rgb_converted %d, expected %d", rgb, fr->expect_rgb);
        goto done;
    }
    snprintf(why, whylen, "max difference %u", d);
    ok = 1;
done:
    free(data);
    free(ref);
    free(out);
    return ok;
}

START_TEST(test_frame_matches_reference) {
    const ucodec_frame *fr = &g_frames[_i];
    char why[1200];
    int ok = check_one(fr, why, sizeof(why));
    ck_assert_msg(ok, "%s (%s, %s): %s", fr->name, kind_name(fr->kind), fr->frame_path, why);
}
END_TEST

/* Prints the pass count per codec and source; fails if anything failed. */
START_TEST(test_summary) {
    size_t pass[16][2] = {{0}}, total[16][2] = {{0}}, fails = 0;
    for (size_t i = 0; i < g_nframes; i++) {
        char why[1200];
        int gen = strcmp(g_frames[i].source, "pydicom+gdcm") != 0;
        unsigned k = (unsigned)g_frames[i].kind & 15u;
        total[k][gen]++;
        if (check_one(&g_frames[i], why, sizeof(why)))
            pass[k][gen]++;
        else
            fails++;
    }
    printf("codec frames passing (pydicom test files | generated streams):\n");
    for (unsigned k = 0; k < 16; k++)
        if (total[k][0] + total[k][1])
            printf("  %-14s %3zu/%-3zu | %3zu/%-3zu\n", kind_name((dcm_codec_kind)k), pass[k][0],
                   total[k][0], pass[k][1], total[k][1]);
    ck_assert_uint_eq(fails, 0);
    ck_assert_uint_gt(g_nframes, 40);
}
END_TEST

/* ---- hostile input ---- */

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Truncations must fail with a reason (or, for the last few bytes of a stream
 * whose end is padding, still decode); never crash (ASan build). */
START_TEST(test_truncated_stream) {
    const ucodec_frame *fr = &g_frames[_i];
    size_t len;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    ck_assert_ptr_nonnull(data);
    const size_t cuts[] = {1, 2, 10, 64, len / 4, len / 2, (len * 3) / 4};
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
END_TEST

START_TEST(test_flipped_bytes) {
    const ucodec_frame *fr = &g_frames[_i];
    size_t len;
    uint8_t *data = ucodec_read_file(fr->frame_path, &len);
    ck_assert_ptr_nonnull(data);
    uint32_t seed = 12345u + (uint32_t)_i;
    for (int round = 0; round < 24; round++) {
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
END_TEST

START_TEST(test_geometry_mismatch) {
    const ucodec_frame *fr = &g_frames[_i];
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
END_TEST

/* ---- dispatch, deflate, encapsulated native ---- */

static dcm_frame_geom mono16(uint32_t rows, uint32_t cols) {
    dcm_frame_geom g = {.rows = rows, .cols = cols, .samples = 1, .bits_allocated = 16,
                        .bits_stored = 12, .pixel_rep = 0, .planar = 0,
                        .photometric = "MONOCHROME2"};
    return g;
}

START_TEST(test_dispatch_rejects_bad_arguments) {
    uint8_t buf[64] = {0xFF, 0xD8, 0xFF, 0xD9}, out[32];
    dcm_frame_geom g = mono16(4, 4);
    int rgb = 7;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 31, &rgb), MS_EINVAL);
    ck_assert_int_eq(rgb, 0);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "32"));
    g.bits_stored = 17;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 32, &rgb), MS_EINVAL);
    g = mono16(0, 4);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 0, &rgb), MS_EINVAL);
    g = mono16(4, 4);
    g.samples = 2;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 64, &rgb), MS_EINVAL);
    g = mono16(4, 4);
    g.bits_allocated = 12;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 32, &rgb), MS_EINVAL);
    g = mono16(4, 4);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_NONE, buf, 64, &g, out, 32, &rgb), MS_EINVAL);
    ck_assert_int_eq(dcm_codec_decode((dcm_codec_kind)99, buf, 64, &g, out, 32, &rgb),
                     MS_ENOTSUP);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 0, &g, out, 32, &rgb), MS_EINVAL);
    /* SOI then EOI: no frame header. */
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_JPEG_LOSSLESS, buf, 4, &g, out, 32, &rgb),
                     MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "SOF"));
    /* RLE header that promises more segments than the geometry has. */
    memset(buf, 0, sizeof(buf));
    buf[0] = 3;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, buf, 64, &g, out, 32, &rgb), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "segments"));
}
END_TEST

/* Raw-deflates src with zlib (an independent encoder). */
static size_t raw_deflate(const uint8_t *src, size_t n, uint8_t *dst, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    z.next_out = dst;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t out = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

START_TEST(test_deflate_frame) {
    enum { R = 37, C = 53 };
    static uint8_t px[R * C * 2], z[R * C * 4], out[R * C * 2];
    for (size_t i = 0; i < sizeof(px); i++) px[i] = (uint8_t)((i * 7919u) >> 3);
    size_t zn = raw_deflate(px, sizeof(px), z, sizeof(z));
    dcm_frame_geom g = mono16(R, C);
    int rgb;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &g, out, sizeof(out), &rgb),
                     MS_OK);
    ck_assert_mem_eq(out, px, sizeof(px));
    /* A trailing pad byte (even fragment length) is fine. */
    z[zn] = 0;
    ck_assert_int_eq(
        dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn + 1, &g, out, sizeof(out), &rgb), MS_OK);
    /* Truncated stream, stream too long for the geometry, too short, garbage. */
    ck_assert_int_eq(
        dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn / 2, &g, out, sizeof(out), &rgb),
        MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "truncated"));
    dcm_frame_geom small = mono16(R - 1, C);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &small, out,
                                      sizeof(out) - 2 * C, &rgb),
                     MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "more than"));
    static uint8_t big[(R + 1) * C * 2];
    dcm_frame_geom large = mono16(R + 1, C);
    ck_assert_int_eq(
        dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &large, big, sizeof(big), &rgb),
        MS_EINVAL);
    memset(z, 0xFF, 16);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &g, out, sizeof(out), &rgb),
                     MS_EINVAL);
}
END_TEST

START_TEST(test_deflate_bits_allocated_1) {
    /* SEG frames: 1 bit per pixel, packed; 10x10 -> 13 bytes. */
    uint8_t px[13], z[64], out[13];
    for (int i = 0; i < 13; i++) px[i] = (uint8_t)(0x5A ^ i);
    size_t zn = raw_deflate(px, 13, z, sizeof(z));
    dcm_frame_geom g = {.rows = 10, .cols = 10, .samples = 1, .bits_allocated = 1,
                        .bits_stored = 1, .photometric = "MONOCHROME2"};
    int rgb;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &g, out, 13, &rgb), MS_OK);
    ck_assert_mem_eq(out, px, 13);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, z, zn, &g, out, 13, &rgb), MS_ENOTSUP);
}
END_TEST

START_TEST(test_encapsulated_native) {
    uint8_t px[3 * 5 * 3 + 1], out[3 * 5 * 3];
    for (size_t i = 0; i < sizeof(px); i++) px[i] = (uint8_t)(i * 11);
    dcm_frame_geom g = {.rows = 3, .cols = 5, .samples = 3, .bits_allocated = 8,
                        .bits_stored = 8, .photometric = "RGB"};
    int rgb;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 45, &g, out, 45, &rgb), MS_OK);
    ck_assert_mem_eq(out, px, 45);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 46, &g, out, 45, &rgb), MS_OK);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 44, &g, out, 45, &rgb),
                     MS_EINVAL);
}
END_TEST

/* ---- concurrency: codecs keep no shared state ---- */

static void *thread_main(void *arg) {
    size_t t = (size_t)arg, bad = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (size_t i = t % 3; i < g_nframes; i += 3) {
            char why[1200];
            if (!check_one(&g_frames[i], why, sizeof(why))) bad++;
        }
    }
    return (void *)bad;
}

START_TEST(test_concurrent_decoding) {
    pthread_t th[6];
    for (size_t t = 0; t < 6; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, (void *)t), 0);
    size_t bad = 0;
    for (size_t t = 0; t < 6; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad += (size_t)r;
    }
    ck_assert_uint_eq(bad, 0);
}
END_TEST

static Suite *codecs_suite(void) {
    Suite *s = suite_create("codecs");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_frame_matches_reference, 0, (int)g_nframes);
    tcase_add_test(tc, test_summary);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_truncated_stream, 0, (int)g_nframes);
    tcase_add_loop_test(tc, test_flipped_bytes, 0, (int)g_nframes);
    tcase_add_loop_test(tc, test_geometry_mismatch, 0, (int)g_nframes);
    suite_add_tcase(s, tc);
    tc = tcase_create("dispatch");
    tcase_add_test(tc, test_dispatch_rejects_bad_arguments);
    tcase_add_test(tc, test_deflate_frame);
    tcase_add_test(tc, test_deflate_bits_allocated_1);
    tcase_add_test(tc, test_encapsulated_native);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_concurrent_decoding);
    suite_add_tcase(s, tc);
    return s;
}

/* Appends the frames of dir's manifest to g_frames. */
static void add_manifest(const char *dir) {
    ucodec_frame *v = NULL;
    size_t n = ucodec_load_manifest(dir, &v);
    if (n == 0) return;
    ucodec_frame *all = realloc(g_frames, (g_nframes + n) * sizeof(*all));
    if (all == NULL) exit(2);
    memcpy(all + g_nframes, v, n * sizeof(*v));
    g_frames = all;
    g_nframes += n;
    free(v);
    for (size_t i = 0; i < g_nframes; i++) g_frames[i].geom.photometric = g_frames[i].photometric;
}

/* Runs tests/tools/<script> into dir unless dir's manifest is newer than the
 * script (the data only changes with the scripts and Debian's packages). */
static int make_frames(const char *script, const char *dir) {
    char path[1200], args[1200];
    struct stat sm, ss;
    const char *src = getenv("DCM_SRC");
    snprintf(path, sizeof(path), "%s/tests/tools/%s", src ? src : ".", script);
    if (stat(path, &ss) != 0) return -1;
    snprintf(args, sizeof(args), "%s/manifest.tsv", dir);
    if (getenv("DCM_CODEC_REGEN") == NULL && stat(args, &sm) == 0 && sm.st_size > 0 &&
        sm.st_mtime > ss.st_mtime)
        return 0;
    snprintf(args, sizeof(args), "'%s' 2>/dev/null", dir);
    return ucodec_run_tool(script, args);
}

int main(void) {
    char real[1024], gen[1024];
    ucodec_work_dir("codec_frames", real, sizeof(real));
    ucodec_work_dir("codec_generated", gen, sizeof(gen));
    if (make_frames("dump_frames.py", real) != 0 || make_frames("gen_streams.py", gen) != 0) {
        fprintf(stderr, "check_codecs: making test frames failed (tests/tools/*.py)\n");
        return 1;
    }
    add_manifest(real);
    add_manifest(gen);
    if (g_nframes == 0) {
        fprintf(stderr, "check_codecs: no frames\n");
        return 1;
    }
    SRunner *sr = srunner_create(codecs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free(g_frames);
    return failed == 0 ? 0 : 1;
}
