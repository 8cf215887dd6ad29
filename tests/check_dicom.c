/* check_dicom.c - the DICOM parser and pixel module on hand-built byte
 * buffers: implicit / explicit LE / explicit BE, no meta, undefined lengths,
 * nested sequences, deflate, encapsulated frames; and hostile input
 * (truncation, lengths past EOF, absurd dimensions, deep nesting, odd
 * lengths, random corruption) which must give a clear error, never a crash.
 *
 * Expected values are computed by hand in the comments: stored words of a
 * 12-bit signed image with garbage in bits 12-15, slope 2, intercept -1024. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dcm_parse.h"
#include "dcm_pixel.h"
#include "util_dicom.h"

#define TS_IMPLICIT "1.2.840.10008.1.2"
#define TS_EXPLICIT "1.2.840.10008.1.2.1"
#define TS_BIG      "1.2.840.10008.1.2.2"
#define TS_DEFLATE  "1.2.840.10008.1.2.1.99"
#define TS_ENCAPS   "1.2.840.10008.1.2.1.98"
#define TS_JPEG     "1.2.840.10008.1.2.4.50"

/* 2x2 words: 0xF005 -> 5, 0x0FFF -> -1, 0x1800 -> -2048, 0x07FF -> 2047
 * (12 bits stored, two's complement). HU = 2 * sv - 1024. */
static const uint16_t k_words[4] = {0xF005, 0x0FFF, 0x1800, 0x07FF};
static const float k_hu[4] = {-1014.f, -1026.f, -5120.f, 3070.f};

/* Data set body (no meta) of the 2x2 image; `extra` runs before Pixel Data. */
static void body_2x2(ut_dbuf *d, void (*extra)(ut_dbuf *d)) {
    ut_dbuf_str(d, 0x0008, 0x0060, "CS", "CT");
    if (extra) extra(d);
    ut_dbuf_image(d, 2, 2, 16, 12, 1, "MONOCHROME2");
    ut_dbuf_str(d, 0x0028, 0x1052, "DS", "-1024");
    ut_dbuf_str(d, 0x0028, 0x1053, "DS", "2");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", 8);
    for (int i = 0; i < 4; i++)
        ut_dbuf_u16(d, k_words[i]);
}

static void file_2x2(ut_dbuf *d, const char *ts, int explicit_vr, int be,
                     void (*extra)(ut_dbuf *d)) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, ts);
    d->explicit_vr = explicit_vr;
    d->be = be;
    body_2x2(d, extra);
}

static void check_hu(const uint8_t *p, size_t n) {
    dcm_image *img = NULL;
    ms_status st = dcm_decode_hu(p, n, NULL, &img);
    ck_assert_msg(st == MS_OK, "decode failed: %s", ms_errmsg());
    ck_assert_uint_eq(img->frames, 1);
    ck_assert_uint_eq(img->rows, 2);
    ck_assert_uint_eq(img->cols, 2);
    ck_assert_uint_eq(img->samples, 1);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(img->data[i], k_hu[i]);
    dcm_image_free(img);
}

static void expect_einval(const uint8_t *p, size_t n, const char *needle) {
    dcm_image *img = NULL;
    ms_err_clear();
    ms_status st = dcm_decode_hu(p, n, NULL, &img);
    ck_assert_msg(st == MS_EINVAL, "expected EINVAL, got %s (%s)", ms_status_name(st), ms_errmsg());
    ck_assert_ptr_null(img);
    ck_assert_msg(ms_errmsg()[0] != '\0', "no reason given");
    if (needle)
        ck_assert_msg(strstr(ms_errmsg(), needle) != NULL, "message '%s' lacks '%s'", ms_errmsg(),
                      needle);
}

/* ---- encodings ---- */

START_TEST(explicit_le) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

START_TEST(implicit_le) {
    ut_dbuf d;
    file_2x2(&d, TS_IMPLICIT, 0, 0, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

START_TEST(explicit_be) {
    ut_dbuf d;
    file_2x2(&d, TS_BIG, 1, 1, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

START_TEST(no_meta_sniffed) {
    for (int v = 0; v < 3; v++) {
        ut_dbuf d;
        ut_dbuf_init(&d, v != 0, v == 2);
        body_2x2(&d, NULL);
        dcm_dataset *ds = NULL;
        ck_assert_int_eq(dcm_parse(d.p, d.n, NULL, &ds), MS_OK);
        ck_assert_int_eq(ds->has_meta, 0);
        ck_assert_int_eq(ds->explicit_vr, v != 0);
        ck_assert_int_eq(ds->big_endian, v == 2);
        dcm_dataset_free(ds);
        check_hu(d.p, d.n);
        /* With allow_no_meta off the same bytes are refused. */
        dcm_limits lim;
        dcm_limits_default(&lim);
        lim.allow_no_meta = 0;
        ck_assert_int_eq(dcm_parse(d.p, d.n, &lim, &ds), MS_EINVAL);
        ut_dbuf_free(&d);
    }
}
END_TEST

START_TEST(dicm_without_preamble) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    check_hu(d.p + 128, d.n - 128);
    ut_dbuf_free(&d);
}
END_TEST

/* A body that says implicit while the TS says explicit (and back). */
START_TEST(ts_mismatch_sniffed) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 0, 0, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
    file_2x2(&d, TS_IMPLICIT, 1, 0, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

/* A second group-0002 block in the data set must not change the syntax. */
static void second_meta(ut_dbuf *d) {
    (void)d;
}
START_TEST(meta_bounded_by_group_length) {
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    ut_dbuf_str(&d, 0x0002, 0x0010, "UI", TS_JPEG); /* after the group length's end */
    body_2x2(&d, second_meta);
    dcm_dataset *ds = NULL;
    ck_assert_int_eq(dcm_parse(d.p, d.n, NULL, &ds), MS_OK);
    ck_assert_str_eq(ds->ts_uid, TS_EXPLICIT);
    dcm_dataset_free(ds);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

/* ---- sequences ---- */

/* SQ (undefined) > item (undefined) > SQ (defined) > item (defined) > CS,
 * then an empty undefined SQ, a UN of undefined length holding implicit
 * items, and a private defined-length SQ. */
static void nested(ut_dbuf *d) {
    ut_dbuf inner;
    ut_dbuf_init(&inner, d->explicit_vr, d->be);
    ut_dbuf_str(&inner, 0x0008, 0x0100, "SH", "T-D1100");
    ut_dbuf item;
    ut_dbuf_init(&item, d->explicit_vr, d->be);
    ut_dbuf_item(&item, 0xE000, (uint32_t)inner.n);
    ut_dbuf_bytes(&item, inner.p, inner.n);

    ut_dbuf_hdr(d, 0x0008, 0x1140, "SQ", 0xFFFFFFFF);
    ut_dbuf_item(d, 0xE000, 0xFFFFFFFF);
    ut_dbuf_hdr(d, 0x0008, 0x2218, "SQ", (uint32_t)item.n);
    ut_dbuf_bytes(d, item.p, item.n);
    ut_dbuf_item(d, 0xE00D, 0);
    ut_dbuf_item(d, 0xE0DD, 0);
    ut_dbuf_hdr(d, 0x0008, 0x2228, "SQ", 0xFFFFFFFF);
    ut_dbuf_item(d, 0xE0DD, 0);
    if (d->explicit_vr && !d->be) {
        /* UN, undefined length: implicit VR LE inside. */
        ut_dbuf_hdr(d, 0x0009, 0x1010, "UN", 0xFFFFFFFF);
        ut_dbuf_item(d, 0xE000, 0xFFFFFFFF);
        ut_dbuf_u16(d, 0x0009);
        ut_dbuf_u16(d, 0x1011);
        ut_dbuf_u32(d, 4);
        ut_dbuf_bytes(d, "ABCD", 4);
        ut_dbuf_item(d, 0xE00D, 0);
        ut_dbuf_item(d, 0xE0DD, 0);
    }
    ut_dbuf_free(&inner);
    ut_dbuf_free(&item);
}

START_TEST(nested_sequences) {
    for (int v = 0; v < 3; v++) {
        ut_dbuf d;
        file_2x2(&d, v == 0 ? TS_IMPLICIT : v == 1 ? TS_EXPLICIT : TS_BIG, v != 0, v == 2, nested);
        dcm_dataset *ds = NULL;
        ck_assert_msg(dcm_parse(d.p, d.n, NULL, &ds) == MS_OK, "%s", ms_errmsg());
        int64_t sq = dcm_find(ds, DCM_NO_PARENT, DCM_TAG(0x0008, 0x1140));
        ck_assert_int_ge(sq, 0);
        ck_assert_uint_eq(dcm_item_count(ds, (uint32_t)sq), 1);
        int64_t it = dcm_item(ds, (uint32_t)sq, 0);
        ck_assert_int_ge(it, 0);
        if (v != 0) { /* implicit VR: (0008,2218) is not in our dictionary: opaque */
            int64_t sq2 = dcm_find(ds, (uint32_t)it, DCM_TAG(0x0008, 0x2218));
            ck_assert_int_ge(sq2, 0);
            int64_t it2 = dcm_item(ds, (uint32_t)sq2, 0);
            int64_t cv = dcm_find(ds, (uint32_t)it2, DCM_TAG(0x0008, 0x0100));
            char buf[32];
            dcm_get_string(ds, cv, buf, sizeof(buf));
            ck_assert_str_eq(buf, "T-D1100");
            /* Not visible at the top level. */
            ck_assert_int_lt(dcm_find(ds, DCM_NO_PARENT, DCM_TAG(0x0008, 0x0100)), 0);
        }
        if (v == 1) {
            int64_t un = dcm_find(ds, DCM_NO_PARENT, DCM_TAG(0x0009, 0x1010));
            ck_assert_int_ge(un, 0);
            int64_t uit = dcm_item(ds, (uint32_t)un, 0);
            ck_assert_int_ge(dcm_find(ds, (uint32_t)uit, DCM_TAG(0x0009, 0x1011)), 0);
        }
        dcm_dataset_free(ds);
        check_hu(d.p, d.n);
        ut_dbuf_free(&d);
    }
}
END_TEST

/* Modality LUT Sequence: 4 entries from first value -1 (an SS descriptor in
 * explicit VR; in implicit VR 'US or SS' follows PixelRepresentation 1, as
 * pydicom reads it): sv 5 -> last entry, -1 -> entry 0, -2048 -> below:
 * entry 0, 2047 -> last entry. */
static void mlut(ut_dbuf *d) {
    ut_dbuf it;
    ut_dbuf_init(&it, d->explicit_vr, d->be);
    ut_dbuf_hdr(&it, 0x0028, 0x3002, d->explicit_vr ? "SS" : "US", 6);
    ut_dbuf_u16(&it, 4);
    ut_dbuf_u16(&it, 0xFFFF);
    ut_dbuf_u16(&it, 16);
    ut_dbuf_hdr(&it, 0x0028, 0x3006, "OW", 8);
    ut_dbuf_u16(&it, 100);
    ut_dbuf_u16(&it, 200);
    ut_dbuf_u16(&it, 300);
    ut_dbuf_u16(&it, 400);
    ut_dbuf_hdr(d, 0x0028, 0x3000, "SQ", 0xFFFFFFFF);
    ut_dbuf_item(d, 0xE000, (uint32_t)it.n);
    ut_dbuf_bytes(d, it.p, it.n);
    ut_dbuf_item(d, 0xE0DD, 0);
    ut_dbuf_free(&it);
}

START_TEST(modality_lut_sequence) {
    for (int v = 0; v < 2; v++) {
        ut_dbuf d;
        ut_dbuf_init(&d, 1, 0);
        ut_dbuf_meta(&d, v ? TS_EXPLICIT : TS_IMPLICIT);
        d.explicit_vr = v;
        ut_dbuf_str(&d, 0x0008, 0x0060, "CS", "CT");
        ut_dbuf_image(&d, 2, 2, 16, 12, 1, "MONOCHROME2");
        mlut(&d);
        ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OW", 8);
        for (int i = 0; i < 4; i++)
            ut_dbuf_u16(&d, k_words[i]);
        dcm_image *img = NULL;
        ck_assert_msg(dcm_decode_hu(d.p, d.n, NULL, &img) == MS_OK, "%s", ms_errmsg());
        ck_assert_int_eq(img->info.rescale_source, DCM_RESCALE_LUT);
        /* sv 5: 5-(-1)=6 -> clamp 3 -> 400; -1 -> 0 -> 100; -2048 -> 0 -> 100; 2047 -> 400. */
        const float want[4] = {400.f, 100.f, 100.f, 400.f};
        for (int i = 0; i < 4; i++)
            ck_assert_float_eq(img->data[i], want[i]);
        dcm_image_free(img);
        ut_dbuf_free(&d);
    }
}
END_TEST

/* ---- deflate ---- */

static size_t raw_deflate(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t m = z.total_out;
    deflateEnd(&z);
    return m;
}

START_TEST(deflated) {
    ut_dbuf body;
    ut_dbuf_init(&body, 1, 0);
    body_2x2(&body, nested);
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_DEFLATE);
    uint8_t z[4096];
    size_t zn = raw_deflate(body.p, body.n, z, sizeof(z));
    ut_dbuf_bytes(&d, z, zn);
    check_hu(d.p, d.n);
    /* Truncated deflate stream. */
    expect_einval(d.p, d.n - zn / 2, "deflate");
    /* Inflated size over the limit: a zip bomb is stopped. */
    dcm_limits lim;
    dcm_limits_default(&lim);
    lim.max_inflated = body.n / 2;
    dcm_dataset *ds = NULL;
    ck_assert_int_eq(dcm_parse(d.p, d.n, &lim, &ds), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "limit"));
    /* Garbage instead of deflate data. */
    memset(d.p + d.n - zn, 0xFF, zn);
    expect_einval(d.p, d.n, "deflate");
    ut_dbuf_free(&d);
    ut_dbuf_free(&body);
}
END_TEST

/* ---- encapsulated pixel data ---- */

/* Encapsulated uncompressed (1.2.840.10008.1.2.1.98): frames are native
 * bytes, so the frame mapping is checked end to end without a codec.
 * nfr frames of the 2x2 image; frame f's words are k_words[(i + f) % 4]. */
static void encaps_file(ut_dbuf *d, int nfr, int split, int bot, int delim) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, TS_ENCAPS);
    ut_dbuf_str(d, 0x0008, 0x0060, "CS", "CT");
    char nf[8];
    snprintf(nf, sizeof(nf), "%d", nfr);
    ut_dbuf_str(d, 0x0028, 0x0008, "IS", nf);
    ut_dbuf_image(d, 2, 2, 16, 12, 1, "MONOCHROME2");
    ut_dbuf_str(d, 0x0028, 0x1052, "DS", "-1024");
    ut_dbuf_str(d, 0x0028, 0x1053, "DS", "2");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OB", 0xFFFFFFFF);
    ut_dbuf_item(d, 0xE000, bot ? (uint32_t)(4 * nfr) : 0);
    uint32_t off = 0;
    for (int f = 0; f < nfr && bot; f++) {
        ut_dbuf_u32(d, off);
        off += split ? 8 + 4 + 8 + 4 : 8 + 8;
    }
    for (int f = 0; f < nfr; f++) {
        uint8_t b[8];
        for (int i = 0; i < 4; i++) {
            uint16_t w = k_words[(i + f) % 4];
            b[2 * i] = (uint8_t)w;
            b[2 * i + 1] = (uint8_t)(w >> 8);
        }
        if (split) {
            ut_dbuf_item(d, 0xE000, 4);
            ut_dbuf_bytes(d, b, 4);
            ut_dbuf_item(d, 0xE000, 4);
            ut_dbuf_bytes(d, b + 4, 4);
        } else {
            ut_dbuf_item(d, 0xE000, 8);
            ut_dbuf_bytes(d, b, 8);
        }
    }
    if (delim) ut_dbuf_item(d, 0xE0DD, 0);
}

/* Decodes serially and with frames on 3 threads; both must give the frames. */
static void check_frames(const ut_dbuf *d, int nfr) {
    for (uint32_t threads = 1; threads <= 3; threads += 2) {
        dcm_limits lim;
        dcm_limits_default(&lim);
        lim.threads = threads;
        dcm_image *img = NULL;
        ck_assert_msg(dcm_decode_hu(d->p, d->n, &lim, &img) == MS_OK, "%s", ms_errmsg());
        ck_assert_uint_eq(img->frames, (unsigned)nfr);
        for (int f = 0; f < nfr; f++)
            for (int i = 0; i < 4; i++)
                ck_assert_float_eq(img->data[f * 4 + i], k_hu[(i + f) % 4]);
        dcm_image_free(img);
    }
}

START_TEST(encaps_frames) {
    ut_dbuf d;
    encaps_file(&d, 3, 0, 0, 1); /* empty BOT, one fragment per frame */
    check_frames(&d, 3);
    ut_dbuf_free(&d);
    encaps_file(&d, 3, 1, 1, 1); /* BOT, two fragments per frame */
    check_frames(&d, 3);
    ut_dbuf_free(&d);
    encaps_file(&d, 1, 1, 0, 1); /* one frame over two fragments, empty BOT */
    check_frames(&d, 1);
    ut_dbuf_free(&d);
    encaps_file(&d, 3, 0, 0, 0); /* no final sequence delimiter: tolerated */
    check_frames(&d, 3);
    ut_dbuf_free(&d);
    encaps_file(&d, 3, 1, 0, 1); /* empty BOT, 6 fragments, no markers: refused */
    expect_einval(d.p, d.n, "cannot map");
    ut_dbuf_free(&d);
    encaps_file(&d, 3, 1, 1, 1);                            /* bogus BOT offset */
    size_t bot_at = d.n - 3 * (8 + 4 + 8 + 4) - 8 - 12 + 4; /* second offset */
    d.p[bot_at] = 7;
    expect_einval(d.p, d.n, "offset table");
    ut_dbuf_free(&d);
    encaps_file(&d, 3, 0, 0, 1); /* fragment length past EOF */
    d.p[d.n - 8 - 8 - 4] = 0x40;
    expect_einval(d.p, d.n, "runs past");
    ut_dbuf_free(&d);
}
END_TEST

/* lim.header_only: the walk stops at the top-level pixel data. Broken
 * fragments and bytes after the pixel data are never read; a native file's
 * pixels stay reachable (a native view), an encapsulated one's need a full
 * parse, and the general decoder refuses the header-only data set. */
START_TEST(header_only_parse) {
    dcm_limits lim;
    dcm_limits_default(&lim);
    lim.header_only = 1;
    ut_dbuf d;
    encaps_file(&d, 3, 0, 0, 1);
    d.p[d.n - 8 - 8 - 4] = 0x40; /* last fragment's length past EOF */
    expect_einval(d.p, d.n, "runs past");
    dcm_dataset *ds = NULL;
    ck_assert_msg(dcm_parse(d.p, d.n, &lim, &ds) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(ds->header_only, 1);
    ck_assert_int_eq(ds->encapsulated, 1);
    ck_assert_uint_eq(ds->nfrags, 0);
    dcm_info info;
    ck_assert_int_eq(dcm_read_info(ds, &info), MS_OK);
    ck_assert_uint_eq(info.frames, 3);
    ck_assert_uint_eq(info.rows, 2);
    ck_assert_int_eq(info.encapsulated, 1);
    dcm_image *img = NULL;
    ck_assert_int_eq(dcm_decode_hu_ds(ds, NULL, &img), MS_EINTERNAL);
    ck_assert_ptr_null(img);
    dcm_dataset_free(ds);
    ut_dbuf_free(&d);
    /* native: garbage after the pixel data is not read; the pixels are */
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    ut_dbuf_bytes(&d, "\xE0\x7F\x10\x00OB\0\0\xFF\xFF\xFF\x7F", 12);
    ds = NULL;
    ck_assert_int_ne(dcm_parse(d.p, d.n, NULL, &ds), MS_OK);
    ck_assert_msg(dcm_parse(d.p, d.n, &lim, &ds) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(ds->header_only, 1);
    ck_assert_int_eq(dcm_read_info(ds, &info), MS_OK);
    dcm_native_view v;
    ck_assert_int_eq(dcm_native_view_of(ds, &info, NULL, 0, &v), 1);
    const uint64_t p0 = dcm_pixels_decoded();
    float hu[4];
    dcm_native_view_hu(&v, 0, 2, hu);
    ck_assert_uint_eq(dcm_pixels_decoded() - p0, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(hu[i], k_hu[i]);
    dcm_dataset_free(ds);
    ut_dbuf_free(&d);
}
END_TEST

/* Frame starts found from codec markers when the BOT is empty (JPEG SOI). */
START_TEST(encaps_marker_mapping) {
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_JPEG);
    ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OB", 0xFFFFFFFF);
    ut_dbuf_item(&d, 0xE000, 0);
    const uint8_t soi[4] = {0xFF, 0xD8, 0x00, 0x00}, mid[4] = {1, 2, 3, 4};
    const uint8_t *frag[5] = {soi, mid, mid, soi, mid};
    for (int i = 0; i < 5; i++) {
        ut_dbuf_item(&d, 0xE000, 4);
        ut_dbuf_bytes(&d, frag[i], 4);
    }
    ut_dbuf_item(&d, 0xE0DD, 0);
    dcm_dataset *ds = NULL;
    ck_assert_int_eq(dcm_parse(d.p, d.n, NULL, &ds), MS_OK);
    ck_assert_uint_eq(ds->nfrags, 5);
    uint32_t starts[3];
    ck_assert_int_eq(dcm_encaps_map(ds, 2, starts), MS_OK);
    ck_assert_uint_eq(starts[0], 0);
    ck_assert_uint_eq(starts[1], 3);
    ck_assert_uint_eq(starts[2], 5);
    ck_assert_int_eq(dcm_encaps_map(ds, 3, starts), MS_EINVAL);
    dcm_dataset_free(ds);
    ut_dbuf_free(&d);
}
END_TEST

/* ---- hostile input ---- */

START_TEST(every_truncation_fails_cleanly) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, nested);
    for (size_t n = 0; n < d.n; n++) {
        dcm_image *img = NULL;
        ms_status st = dcm_decode_hu(d.p, n, NULL, &img);
        ck_assert_msg(st == MS_EINVAL, "prefix %zu: %s (%s)", n, ms_status_name(st), ms_errmsg());
        ck_assert_ptr_null(img);
    }
    ut_dbuf_free(&d);
}
END_TEST

START_TEST(length_past_eof) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    /* Pixel Data length 0x7FFFFFF0: last 12 bytes before the 8 value bytes. */
    size_t at = d.n - 8 - 4;
    d.p[at] = 0xF0;
    d.p[at + 1] = 0xFF;
    d.p[at + 2] = 0xFF;
    d.p[at + 3] = 0x7F;
    expect_einval(d.p, d.n, "runs past");
    ut_dbuf_free(&d);
    /* Short VR length desync (0xFFFF on a CS). */
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    uint8_t *cs = memmem(d.p, d.n,
                         "CS\x02\x00"
                         "CT",
                         6);
    ck_assert_ptr_nonnull(cs);
    cs[2] = cs[3] = 0xFF;
    expect_einval(d.p, d.n, NULL);
    ut_dbuf_free(&d);
    /* A defined-length sequence longer than the file. */
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    ut_dbuf_hdr(&d, 0x0008, 0x1140, "SQ", 1000);
    ut_dbuf_item(&d, 0xE000, 0);
    expect_einval(d.p, d.n, "runs past");
    ut_dbuf_free(&d);
}
END_TEST

static void big_dims(ut_dbuf *d) {
    ut_dbuf_str(d, 0x0028, 0x0008, "IS", "2147483647");
}

START_TEST(absurd_dimensions) {
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    big_dims(&d);
    ut_dbuf_image(&d, 65535, 65535, 16, 16, 0, "MONOCHROME2");
    ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OW", 8);
    for (int i = 0; i < 4; i++)
        ut_dbuf_u16(&d, 0);
    expect_einval(d.p, d.n, "limit");
    ut_dbuf_free(&d);
    /* Within the limit but more than the data present. */
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    ut_dbuf_image(&d, 512, 512, 16, 16, 0, "MONOCHROME2");
    ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OW", 8);
    for (int i = 0; i < 4; i++)
        ut_dbuf_u16(&d, 0);
    expect_einval(d.p, d.n, "need");
    ut_dbuf_free(&d);
}
END_TEST

/* Bad module values, each on its own copy of the 2x2 file. */
static void patch_us(ut_dbuf *d, uint16_t el, uint16_t v) {
    uint8_t pat[6] = {0x28, 0x00, (uint8_t)el, (uint8_t)(el >> 8), 'U', 'S'};
    uint8_t *p = memmem(d->p, d->n, pat, 6);
    ck_assert_ptr_nonnull(p);
    p[8] = (uint8_t)v;
    p[9] = (uint8_t)(v >> 8);
}

START_TEST(bad_module_values) {
    struct {
        uint16_t el, v;
        const char *msg;
    } cases[] = {
        {0x0100, 0, "BitsAllocated"}, {0x0101, 17, "BitsStored"}, {0x0002, 0, "SamplesPerPixel"},
        {0x0010, 0, "rows"},          {0x0101, 0, "BitsStored"},  {0x0100, 12, "BitsAllocated"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ut_dbuf d;
        file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
        patch_us(&d, cases[i].el, cases[i].v);
        expect_einval(d.p, d.n, cases[i].msg);
        ut_dbuf_free(&d);
    }
    /* Non-numeric slope, NumberOfFrames 0. */
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, NULL);
    uint8_t *p = memmem(d.p, d.n,
                        "DS\x02\x00"
                        "2 ",
                        6);
    ck_assert_ptr_nonnull(p);
    p[4] = 'x';
    expect_einval(d.p, d.n, "RescaleSlope");
    ut_dbuf_free(&d);
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    ut_dbuf_str(&d, 0x0028, 0x0008, "IS", "0");
    body_2x2(&d, NULL);
    expect_einval(d.p, d.n, "NumberOfFrames");
    ut_dbuf_free(&d);
    /* No pixel data at all. */
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    ut_dbuf_image(&d, 2, 2, 16, 12, 1, "MONOCHROME2");
    expect_einval(d.p, d.n, "no Pixel Data");
    ut_dbuf_free(&d);
}
END_TEST

/* Identifying attributes (PS3.15 Basic Profile) and private ones are never
 * quoted in an error; other values may be (the slope below). */
static void phi_elems(ut_dbuf *d) {
    ut_dbuf_str(d, 0x0009, 0x1001, "DS", "PRIVSECRET");
    ut_dbuf_str(d, 0x0010, 0x0010, "PN", "DOE^JANE");
    ut_dbuf_str(d, 0x0010, 0x1030, "DS", "WEIGHTSECRET");
    ut_dbuf_str(d, 0x0020, 0x0010, "SH", "STUDYSECRET");
}

START_TEST(phi_never_quoted) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, phi_elems);
    dcm_dataset *ds = NULL;
    ck_assert_int_eq(dcm_parse(d.p, d.n, NULL, &ds), MS_OK);
    const uint32_t tags[] = {DCM_TAG(0x0009, 0x1001), DCM_TAG(0x0010, 0x0010),
                             DCM_TAG(0x0010, 0x1030), DCM_TAG(0x0020, 0x0010)};
    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
        ck_assert(dcm_tag_identifying(tags[i]));
        double v;
        int64_t at = dcm_find(ds, DCM_NO_PARENT, tags[i]);
        ck_assert_int_ge(at, 0);
        ms_err_clear();
        ck_assert_int_eq(dcm_get_number(ds, at, 0, &v), MS_EINVAL);
        ck_assert_msg(strstr(ms_errmsg(), "SECRET") == NULL && strstr(ms_errmsg(), "DOE") == NULL,
                      "the message quotes an identifying value: %s", ms_errmsg());
        ck_assert_msg(strstr(ms_errmsg(), "is not a number") != NULL, "%s", ms_errmsg());
    }
    ck_assert(!dcm_tag_identifying(DCM_TAG(0x0028, 0x1053)));
    ck_assert(!dcm_tag_identifying(DCM_TAG(0x0008, 0x0060)));
    dcm_dataset_free(ds);
    ut_dbuf_free(&d);
    /* A non-identifying value is still quoted. */
    file_2x2(&d, TS_EXPLICIT, 1, 0, phi_elems);
    uint8_t *p = memmem(d.p, d.n, "DS\x02\x00" "2 ", 6);
    ck_assert_ptr_nonnull(p);
    p[4] = 'x';
    expect_einval(d.p, d.n, "'x'");
    ut_dbuf_free(&d);
}
END_TEST

START_TEST(deep_nesting) {
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    for (int i = 0; i < 10000; i++) {
        ut_dbuf_hdr(&d, 0x0008, 0x1140, "SQ", 0xFFFFFFFF);
        ut_dbuf_item(&d, 0xE000, 0xFFFFFFFF);
    }
    expect_einval(d.p, d.n, "nested deeper");
    ut_dbuf_free(&d);
    /* 60 levels (under the default cap of 64), properly closed, parse. */
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, TS_EXPLICIT);
    for (int i = 0; i < 60; i++) {
        ut_dbuf_hdr(&d, 0x0008, 0x1140, "SQ", 0xFFFFFFFF);
        ut_dbuf_item(&d, 0xE000, 0xFFFFFFFF);
    }
    for (int i = 0; i < 60; i++) {
        ut_dbuf_item(&d, 0xE00D, 0);
        ut_dbuf_item(&d, 0xE0DD, 0);
    }
    body_2x2(&d, NULL);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

static void odd(ut_dbuf *d) {
    ut_dbuf_hdr(d, 0x0008, 0x0070, "LO", 3);
    ut_dbuf_bytes(d, "GE ", 3);
}

START_TEST(odd_length_tolerated) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, odd);
    check_hu(d.p, d.n);
    ut_dbuf_free(&d);
}
END_TEST

/* Random corruption of a valid file: any status, never a crash (run under
 * ASan/UBSan in the sanitizer build). Deterministic LCG. */
START_TEST(random_corruption) {
    ut_dbuf d;
    file_2x2(&d, TS_EXPLICIT, 1, 0, nested);
    uint8_t *buf = malloc(d.n);
    uint32_t s = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, d.p, d.n);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            s = s * 1103515245u + 12345u;
            size_t at = 132 + (s >> 8) % (d.n - 132);
            s = s * 1103515245u + 12345u;
            buf[at] = (uint8_t)(s >> 16);
        }
        dcm_image *img = NULL;
        ms_status st = dcm_decode_hu(buf, d.n, NULL, &img);
        ck_assert_msg(st == MS_OK || st == MS_EINVAL || st == MS_ENOTSUP, "iter %d: %s (%s)", iter,
                      ms_status_name(st), ms_errmsg());
        ck_assert(st == MS_OK ? img != NULL : img == NULL);
        dcm_image_free(img);
    }
    free(buf);
    ut_dbuf_free(&d);
}
END_TEST

/* ---- window ---- */

START_TEST(window_values) {
    /* L=40 W=400: lo=-160, hi=240, range 400. */
    const float hu[6] = {-1000.f, -160.f, 0.f, 40.f, 240.f, 3000.f};
    const float want[6] = {0.f, 0.f, 160.f / 400.f, 0.5f, 1.f, 1.f};
    float out[6];
    ck_assert_int_eq(dcm_window(hu, out, 6, 40, 400), MS_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(out[i], want[i]);
    ck_assert_int_eq(dcm_window(hu, out, 6, 40, 0), MS_EINVAL);
    ck_assert_int_eq(dcm_window(hu, out, 6, 40, -5), MS_EINVAL);
}
END_TEST

static Suite *dicom_suite(void) {
    Suite *s = suite_create("dicom");
    TCase *tc = tcase_create("encodings");
    tcase_add_test(tc, explicit_le);
    tcase_add_test(tc, implicit_le);
    tcase_add_test(tc, explicit_be);
    tcase_add_test(tc, no_meta_sniffed);
    tcase_add_test(tc, dicm_without_preamble);
    tcase_add_test(tc, ts_mismatch_sniffed);
    tcase_add_test(tc, meta_bounded_by_group_length);
    suite_add_tcase(s, tc);
    tc = tcase_create("sequences");
    tcase_add_test(tc, nested_sequences);
    tcase_add_test(tc, header_only_parse);
    tcase_add_test(tc, modality_lut_sequence);
    suite_add_tcase(s, tc);
    tc = tcase_create("deflate");
    tcase_add_test(tc, deflated);
    suite_add_tcase(s, tc);
    tc = tcase_create("encapsulated");
    tcase_add_test(tc, encaps_frames);
    tcase_add_test(tc, encaps_marker_mapping);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostile");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_truncation_fails_cleanly);
    tcase_add_test(tc, length_past_eof);
    tcase_add_test(tc, absurd_dimensions);
    tcase_add_test(tc, bad_module_values);
    tcase_add_test(tc, deep_nesting);
    tcase_add_test(tc, odd_length_tolerated);
    tcase_add_test(tc, random_corruption);
    suite_add_tcase(s, tc);
    tc = tcase_create("window");
    tcase_add_test(tc, window_values);
    tcase_add_test(tc, phi_never_quoted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(dicom_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
