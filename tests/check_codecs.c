/* check_codecs.c - dcm_codec_decode against independent references.
 *
 * Real frames: every encapsulated file of Debian's pydicom test data, split
 * into frames by pydicom and compared with pydicom + GDCM's pixel_array
 * (tests/tools/dump_frames.py). Generated frames (tests/tools/gen_streams.py):
 * streams made by independent encoders from known native pixels - GDCM's
 * gdcmconv (JPEG lossless, JPEG-LS lossless and near-lossless, JPEG 2000
 * lossless and irreversible, RLE, 8-bit lossy JPEG), OpenJPH's ojph_compress
 * (HTJ2K), and small Python encoders for JPEG lossless (all predictors, point
 * transform, restarts, separate scans) and 12-bit sequential DCT, whose
 * streams pydicom + GDCM must decode first. Also the dispatcher's own checks,
 * deflate / encapsulated-native frames and concurrent decoding. Hostile input
 * is in check_codecs_hostile.c. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <charls/charls.h>
#include <zlib.h>

#include "dcm_codec.h"
#include "dcm_codec_int.h"
#include "ms_status.h"
#include "util_codecs.h"

static ucodec_frame *g_frames;
static size_t g_nframes;

static const char *kind_name(dcm_codec_kind k) {
    static const char *const names[] = {"native",        "jpeg-baseline", "jpeg-extended",
                                        "jpeg-lossless", "jpeg-ls",       "j2k",
                                        "rle",           "deflate-frame", "encaps-native"};
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
        snprintf(why, whylen, "max difference %u > tolerance %d (reference: %s)", d, fr->tolerance,
                 fr->source);
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

/* Decodes every frame and compares it with its reference; prints the failures
 * and the pass count per codec and source. One test rather than one per frame:
 * forking an ASan process per frame costs more than decoding it. */
START_TEST(test_summary) {
    size_t pass[16][2] = {{0}}, total[16][2] = {{0}}, fails = 0;
    for (size_t i = 0; i < g_nframes; i++) {
        char why[1200];
        int gen = strcmp(g_frames[i].source, "pydicom+gdcm") != 0;
        unsigned k = (unsigned)g_frames[i].kind & 15u;
        total[k][gen]++;
        if (check_one(&g_frames[i], why, sizeof(why))) {
            pass[k][gen]++;
        } else {
            fails++;
            printf("FAIL %s (%s, %s): %s\n", g_frames[i].name, kind_name(g_frames[i].kind),
                   g_frames[i].frame_path, why);
        }
    }
    printf("codec frames passing (pydicom test files | generated streams):\n");
    for (unsigned k = 0; k < 16; k++)
        if (total[k][0] + total[k][1])
            printf("  %-14s %3zu/%-3zu | %3zu/%-3zu\n", kind_name((dcm_codec_kind)k), pass[k][0],
                   total[k][0], pass[k][1], total[k][1]);
    fflush(stdout);
    ck_assert_msg(fails == 0, "%zu frames differ from their reference (listed above)", fails);
    ck_assert_uint_gt(g_nframes, 100);
}
END_TEST

/* Our DCT decoder (written for 12-bit) also decodes 8-bit streams: it must agree
 * with libjpeg-turbo within one stored value on every 8-bit frame it supports
 * (no chroma subsampling). */
START_TEST(test_own_dct_decoder_matches_libjpeg) {
    size_t compared = 0;
    for (size_t i = 0; i < g_nframes; i++) {
        const ucodec_frame *fr = &g_frames[i];
        if (fr->kind != DCM_CODEC_JPEG_BASELINE || fr->tolerance < 0) continue;
        size_t len, n = ucodec_frame_size(&fr->geom);
        uint8_t *data = ucodec_read_file(fr->frame_path, &len);
        uint8_t *a = malloc(n), *b = malloc(n);
        int rgb_a = -1, rgb_b = -1;
        ck_assert_int_eq(dcm_codec_decode(fr->kind, data, len, &fr->geom, a, n, &rgb_a), MS_OK);
        ms_status st = dcm__jpeg12_decode(data, len, &fr->geom, b, n, &rgb_b);
        if (st == MS_OK) {
            uint32_t d = ucodec_max_diff(&fr->geom, a, b);
            ck_assert_msg(d <= 1, "%s: own DCT differs from libjpeg by %u", fr->name, d);
            ck_assert_int_eq(rgb_a, rgb_b);
            compared++;
        } else {
            ck_assert_msg(st == MS_ENOTSUP, "%s: %s", fr->name, ms_errmsg());
        }
        free(a);
        free(b);
        free(data);
    }
    ck_assert_uint_ge(compared, 5);
}
END_TEST

/* ---- dispatch, deflate, encapsulated native ---- */

static dcm_frame_geom mono16(uint32_t rows, uint32_t cols) {
    dcm_frame_geom g = {.rows = rows,
                        .cols = cols,
                        .samples = 1,
                        .bits_allocated = 16,
                        .bits_stored = 12,
                        .pixel_rep = 0,
                        .planar = 0,
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
    ck_assert_int_eq(dcm_codec_decode((dcm_codec_kind)99, buf, 64, &g, out, 32, &rgb), MS_ENOTSUP);
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
    ck_assert_int_eq(
        dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &small, out, sizeof(out) - 2 * C, &rgb),
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
    dcm_frame_geom g = {.rows = 10,
                        .cols = 10,
                        .samples = 1,
                        .bits_allocated = 1,
                        .bits_stored = 1,
                        .photometric = "MONOCHROME2"};
    int rgb;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_DEFLATE_FRAME, z, zn, &g, out, 13, &rgb), MS_OK);
    ck_assert_mem_eq(out, px, 13);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_RLE, z, zn, &g, out, 13, &rgb), MS_ENOTSUP);
}
END_TEST

START_TEST(test_encapsulated_native) {
    uint8_t px[3 * 5 * 3 + 1], out[3 * 5 * 3];
    for (size_t i = 0; i < sizeof(px); i++) px[i] = (uint8_t)(i * 11);
    dcm_frame_geom g = {.rows = 3,
                        .cols = 5,
                        .samples = 3,
                        .bits_allocated = 8,
                        .bits_stored = 8,
                        .photometric = "RGB"};
    int rgb;
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 45, &g, out, 45, &rgb), MS_OK);
    ck_assert_mem_eq(out, px, 45);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 46, &g, out, 45, &rgb), MS_OK);
    ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_ENCAPS_NATIVE, px, 44, &g, out, 45, &rgb),
                     MS_EINVAL);
}
END_TEST

/* JPEG-LS interleave modes: GDCM writes sample-interleaved streams only, so
 * the CharLS encoder makes NONE (planar, which dcm_jpegls.c interleaves) and
 * LINE streams here, at 8 and 12 bits, and into a 16-bit container; the
 * reference is the encoded image itself (lossless). */
static size_t ls_encode(const void *src, size_t src_size, int width, int height, int bits,
                        int comps, charls_interleave_mode ilv, uint8_t *dst, size_t cap) {
    charls_jpegls_encoder *enc = charls_jpegls_encoder_create();
    charls_frame_info fi = {.width = (uint32_t)width,
                            .height = (uint32_t)height,
                            .bits_per_sample = bits,
                            .component_count = comps};
    size_t written = 0;
    ck_assert_ptr_nonnull(enc);
    ck_assert_int_eq(charls_jpegls_encoder_set_frame_info(enc, &fi), 0);
    ck_assert_int_eq(charls_jpegls_encoder_set_interleave_mode(enc, ilv), 0);
    ck_assert_int_eq(charls_jpegls_encoder_set_destination_buffer(enc, dst, cap), 0);
    ck_assert_int_eq(charls_jpegls_encoder_encode_from_buffer(enc, src, src_size, 0), 0);
    ck_assert_int_eq(charls_jpegls_encoder_get_bytes_written(enc, &written), 0);
    charls_jpegls_encoder_destroy(enc);
    return written;
}

START_TEST(test_jpegls_interleave_modes) {
    enum { W = 23, H = 17, N = W * H * 3 };
    static uint16_t planar16[N], inter16[N], out16[N];
    static uint8_t planar8[N], inter8[N], out8[N], stream[4 * N + 4096];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < W * H; i++) {
            const int v = (i * (7 + 5 * c) + c * 1000 + (i / W) * 13) & 0xFFF;
            planar16[c * W * H + i] = inter16[i * 3 + c] = (uint16_t)v;
            planar8[c * W * H + i] = inter8[i * 3 + c] = (uint8_t)(v >> 4);
        }
    const charls_interleave_mode modes[] = {
        CHARLS_INTERLEAVE_MODE_NONE, CHARLS_INTERLEAVE_MODE_LINE, CHARLS_INTERLEAVE_MODE_SAMPLE};
    for (int m = 0; m < 3; m++) {
        const int planar = modes[m] == CHARLS_INTERLEAVE_MODE_NONE;
        int rgb = -1;
        /* 8 bits into BitsAllocated 8 and into BitsAllocated 16. */
        size_t n =
            ls_encode(planar ? planar8 : inter8, N, W, H, 8, 3, modes[m], stream, sizeof(stream));
        dcm_frame_geom g = {.rows = H,
                            .cols = W,
                            .samples = 3,
                            .bits_allocated = 8,
                            .bits_stored = 8,
                            .photometric = "RGB"};
        ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_JPEGLS, stream, n, &g, out8, N, &rgb), MS_OK);
        ck_assert_mem_eq(out8, inter8, N);
        g.bits_allocated = 16;
        ck_assert_int_eq(
            dcm_codec_decode(DCM_CODEC_JPEGLS, stream, n, &g, out16, sizeof(out16), &rgb), MS_OK);
        for (int i = 0; i < N; i++) ck_assert_uint_eq(out16[i], inter8[i]);
        /* 12 bits. */
        n = ls_encode(planar ? planar16 : inter16, sizeof(planar16), W, H, 12, 3, modes[m], stream,
                      sizeof(stream));
        g.bits_stored = 12;
        ck_assert_int_eq(
            dcm_codec_decode(DCM_CODEC_JPEGLS, stream, n, &g, out16, sizeof(out16), &rgb), MS_OK);
        ck_assert_mem_eq(out16, inter16, sizeof(out16));
        ck_assert_int_eq(rgb, 0);
        /* 12-bit samples do not fit BitsAllocated 8. */
        g.bits_allocated = 8;
        g.bits_stored = 8;
        ck_assert_int_eq(dcm_codec_decode(DCM_CODEC_JPEGLS, stream, n, &g, out8, N, &rgb),
                         MS_EINVAL);
    }
}
END_TEST

/* ---- concurrency: codecs keep no shared state ---- */

static void *thread_main(void *arg) {
    size_t t = (size_t)arg, bad = 0;
    /* Two threads per frame, at different times. */
    for (size_t i = t % 3; i < g_nframes; i += 3) {
        char why[1200];
        if (!check_one(&g_frames[i], why, sizeof(why))) bad++;
    }
    return (void *)bad;
}

START_TEST(test_concurrent_decoding) {
    pthread_t th[6];
    for (size_t t = 0; t < 6; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, (void *)t), 0);
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
    tcase_add_test(tc, test_summary);
    tcase_add_test(tc, test_own_dct_decoder_matches_libjpeg);
    suite_add_tcase(s, tc);
    tc = tcase_create("dispatch");
    tcase_add_test(tc, test_dispatch_rejects_bad_arguments);
    tcase_add_test(tc, test_deflate_frame);
    tcase_add_test(tc, test_deflate_bits_allocated_1);
    tcase_add_test(tc, test_encapsulated_native);
    tcase_add_test(tc, test_jpegls_interleave_modes);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_concurrent_decoding);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_nframes = ucodec_load_all(&g_frames);
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
