/* check_sstable.c - CRC-32C, Snappy blocks (libsnappy through the table
 * reader's rt_sst_snappy_uncompress) and the LevelDB table format. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_coding.h"
#include "rt_crc32c.h"
#include "rt_sstable.h"

#include <snappy-c.h>
#include "util_bundle.h"

/* Bit-at-a-time CRC-32C straight from the definition, to compare with. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* ===================== crc32c ===================== */

START_TEST(crc_known_vectors) {
    /* The standard check value and the iSCSI (RFC 3720 B.4) vectors. */
    uint8_t buf[32];
    ck_assert_uint_eq(rt_crc32c("123456789", 9), 0xE3069283u);
    memset(buf, 0, 32);
    ck_assert_uint_eq(rt_crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    ck_assert_uint_eq(rt_crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    ck_assert_uint_eq(rt_crc32c(buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    ck_assert_uint_eq(rt_crc32c(buf, 32), 0x113FDB5Cu);
    ck_assert_uint_eq(rt_crc32c(NULL, 0), 0);
}
END_TEST

START_TEST(crc_matches_bitwise_and_portable) {
    enum { N = 3000 };
    uint8_t *buf = malloc(N + 8);
    for (int i = 0; i < N + 8; i++)
        buf[i] = (uint8_t)rnd();
    for (int off = 0; off < 8; off++) {
        for (size_t n = 0; n < N; n += 1 + n / 3) {
            uint32_t want = crc_bitwise(buf + off, n);
            ck_assert_uint_eq(rt_crc32c(buf + off, n), want);
            ck_assert_uint_eq(rt__crc32c_extend_portable(0, buf + off, n), want);
        }
    }
    free(buf);
    ck_assert(strcmp(rt_crc32c_impl(), "sse4.2") == 0 || strcmp(rt_crc32c_impl(), "slice8") == 0);
}
END_TEST

START_TEST(crc_extend_and_mask) {
    const char *a = "hello ", *b = "world, this is crc32c";
    char ab[64];
    snprintf(ab, sizeof(ab), "%s%s", a, b);
    uint32_t whole = rt_crc32c(ab, strlen(ab));
    ck_assert_uint_eq(rt_crc32c_extend(rt_crc32c(a, strlen(a)), b, strlen(b)), whole);
    uint32_t m = rt_crc32c_mask(whole);
    ck_assert_uint_ne(m, whole);
    ck_assert_uint_ne(rt_crc32c_mask(m), m);
    ck_assert_uint_eq(rt_crc32c_unmask(m), whole);
    /* mask(c) = rotr(c, 15) + 0xa282ead8, by hand for c = 1: rotr gives 1 << 17. */
    ck_assert_uint_eq(rt_crc32c_mask(1), (1u << 17) + 0xa282ead8u);
    ck_assert_uint_eq(rt_crc32c_mask(0), 0xa282ead8u);
    for (int i = 0; i < 1000; i++) {
        uint32_t c = rnd() * 2654435761u;
        ck_assert_uint_eq(rt_crc32c_unmask(rt_crc32c_mask(c)), c);
    }
}
END_TEST

/* ===================== snappy ===================== */

static void expect_decode(const uint8_t *z, size_t zn, const void *want, size_t wn) {
    uint8_t *out = NULL;
    size_t got = 12345;
    ms_status st = rt_sst_snappy_uncompress(z, zn, 256, &out, &got);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    ck_assert_uint_eq(got, wn);
    ck_assert(memcmp(out, want, wn) == 0);
    free(out);
}

START_TEST(snappy_hand_vectors) {
    /* Each vector is written out element by element from the format rules. */
    static const uint8_t empty[] = {0x00};
    expect_decode(empty, sizeof(empty), "", 0);
    /* literal "abc": tag (3-1)<<2 = 0x08 */
    static const uint8_t lit[] = {0x03, 0x08, 'a', 'b', 'c'};
    expect_decode(lit, sizeof(lit), "abc", 3);
    /* "abc" then copy-1 (len 9 -> (9-4)<<2 | 1 = 0x15, offset 3): overlapping */
    static const uint8_t c1[] = {0x0c, 0x08, 'a', 'b', 'c', 0x15, 0x03};
    expect_decode(c1, sizeof(c1), "abcabcabcabc", 12);
    /* 70 x 'a': literal 'a', copy-2 len 64 off 1 (0xfe 01 00), copy-2 len 5 (0x12 01 00) */
    static const uint8_t c2[] = {0x46, 0x00, 'a', 0xfe, 0x01, 0x00, 0x12, 0x01, 0x00};
    char a70[70];
    memset(a70, 'a', 70);
    expect_decode(c2, sizeof(c2), a70, 70);
    /* "xyzxyz": literal xyz, copy-4 len 3 ((3-1)<<2 | 3 = 0x0b) offset 3 */
    static const uint8_t c4[] = {0x06, 0x08, 'x', 'y', 'z', 0x0b, 0x03, 0x00, 0x00, 0x00};
    expect_decode(c4, sizeof(c4), "xyzxyz", 6);
    /* 100-byte literal: tag 60<<2 = 0xf0, one length byte 99 */
    uint8_t big[3 + 100];
    char want[100];
    big[0] = 100;
    big[1] = 0xf0;
    big[2] = 99;
    for (int i = 0; i < 100; i++)
        big[3 + i] = (uint8_t)(want[i] = (char)('0' + i % 10));
    expect_decode(big, sizeof(big), want, 100);
}
END_TEST

START_TEST(snappy_copy1_high_offset) {
    /* 300-byte literal (tag 61<<2 = 0xf4, length-1 = 299 = 0x2b 0x01), then
     * copy-1 of 8 bytes at offset 260 = 0x104: tag = 1 | (8-4)<<2 | 1<<5 = 0x31,
     * offset low byte 0x04. Output 308 bytes. */
    uint8_t z[2 + 3 + 300 + 2], want[308];
    size_t k = 0;
    z[k++] = 0xb4;
    z[k++] = 0x02;
    z[k++] = 0xf4;
    z[k++] = 0x2b;
    z[k++] = 0x01;
    for (int i = 0; i < 300; i++)
        z[k++] = want[i] = (uint8_t)(i * 7 + 1);
    z[k++] = 0x31;
    z[k++] = 0x04;
    memcpy(want + 300, want + 300 - 260, 8);
    uint8_t *out = NULL;
    size_t got;
    ck_assert_int_eq(rt_sst_snappy_uncompress(z, k, 400, &out, &got), MS_OK);
    ck_assert_uint_eq(got, 308);
    ck_assert(memcmp(out, want, 308) == 0);
    free(out);
}
END_TEST

START_TEST(snappy_hostile) {
    struct {
        const char *what;
        uint8_t z[12];
        size_t n;
    } bad[] = {
        {"empty input", {0}, 0},
        {"unterminated preamble", {0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 6},
        {"preamble above 2^32", {0xff, 0xff, 0xff, 0xff, 0x7f}, 5},
        {"copy offset 0", {0x08, 0x00, 'a', 0x11, 0x00}, 5},
        {"copy before start", {0x08, 0x00, 'a', 0x11, 0x02}, 5},
        {"copy-2 before start", {0x08, 0x00, 'a', 0x1e, 0x05, 0x00}, 6},
        {"copy-4 offset huge", {0x08, 0x00, 'a', 0x1f, 0xff, 0xff, 0xff, 0xff}, 8},
        {"literal overruns input", {0x05, 0x10, 'a', 'b'}, 4},
        {"literal length bytes missing", {0x05, 0xf4, 0x01}, 3},
        {"truncated copy-1", {0x05, 0x00, 'a', 0x11}, 4},
        {"truncated copy-2", {0x05, 0x00, 'a', 0x12, 0x01}, 5},
        {"truncated copy-4", {0x05, 0x00, 'a', 0x13, 0x01, 0x00}, 6},
        {"output shorter than declared", {0x05, 0x04, 'a', 'b'}, 4},
        {"output longer than declared", {0x01, 0x04, 'a', 'b'}, 4},
        {"copy longer than declared", {0x03, 0x00, 'a', 0x11, 0x01}, 5},
        {"declared above capacity", {0x41, 0x00, 'a'}, 3},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *out = NULL;
        size_t got;
        ms_status st = rt_sst_snappy_uncompress(bad[i].z, bad[i].n, 64, &out, &got);
        ck_assert_msg(st == MS_EDATALOSS, "%s: accepted", bad[i].what);
        ck_assert(strncmp(ms_errmsg(), "snappy:", 7) == 0);
        ck_assert_ptr_null(out);
    }
    /* The allocating form refuses a huge declared length before allocating. */
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 'a'};
    uint8_t *p = NULL;
    size_t n;
    ck_assert_int_eq(rt_sst_snappy_uncompress(huge, sizeof(huge), 1 << 20, &p, &n), MS_EDATALOSS);
    ck_assert_ptr_null(p);
}
END_TEST

static void roundtrip(const uint8_t *src, size_t n, size_t *zn_out) {
    size_t zn = snappy_max_compressed_length(n);
    uint8_t *z = malloc(zn);
    ck_assert_int_eq(snappy_compress((const char *)src, n, (char *)z, &zn), SNAPPY_OK);
    uint8_t *back = NULL;
    size_t bn = 0;
    ms_status st = rt_sst_snappy_uncompress(z, zn, n, &back, &bn);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    ck_assert_uint_eq(bn, n);
    ck_assert(n == 0 || memcmp(back, src, n) == 0);
    free(back);
    free(z);
    if (zn_out)
        *zn_out = zn;
}

START_TEST(snappy_roundtrip) {
    size_t sizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 100, 4095, 65536, 65537, 200003};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s], zn;
        uint8_t *buf = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)rnd(); /* incompressible */
        roundtrip(buf, n, &zn);
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)("float weights "[i % 14] + (i / 1000) % 3); /* repetitive */
        roundtrip(buf, n, &zn);
        if (n >= 4095)
            ck_assert_uint_lt(zn, n / 4);
        for (size_t i = 0; i < n; i++)
            buf[i] = (rnd() & 7) == 0 ? (uint8_t)rnd() : (uint8_t)(i & 0x3f); /* mixed */
        roundtrip(buf, n, NULL);
        free(buf);
    }
}
END_TEST

/* ===================== sstable ===================== */

/* Real TF-written index files: path, key list, whether the data block is Snappy. */
static const struct {
    const char *path;
    const char *keys[8];
    int snappy;
} real_idx[] = {
    {"savedmodels/saved_model_half_plus_two_cpu/00000123/variables/variables.index",
     {"", "a", "a2", "b", "c", "c2", NULL},
     1},
    {"savedmodels/saved_model_half_plus_two_gpu/00000123/variables/variables.index",
     {"", "a", "b", "c", NULL},
     0},
    {"savedmodels/saved_model_half_plus_two_2_versions/00000124/variables/"
     "variables.index",
     {"", "a", "b", "c", NULL},
     0},
    {"savedmodels/saved_model_counter/00000123/variables/variables.index",
     {"", "counter", NULL},
     0},
    {"savedmodels/saved_model_half_plus_two_tf2_cpu/00000123/variables/variables.index",
     {"", "_CHECKPOINTABLE_OBJECT_GRAPH", "a/.ATTRIBUTES/VARIABLE_VALUE",
      "b/.ATTRIBUTES/VARIABLE_VALUE", "c/.ATTRIBUTES/VARIABLE_VALUE", NULL},
     1},
};

static uint8_t *load_data(const char *rel, size_t *n) {
    char path[1024];
    uint8_t *p = ut_read_file(ut_data_path(rel, path, sizeof(path)), n);
    ck_assert_msg(p != NULL, "cannot read %s", path);
    return p;
}

START_TEST(sst_real_indexes) {
    const char *rel = real_idx[_i].path;
    size_t n;
    uint8_t *file = load_data(rel, &n);
    rt_sst *t;
    ms_status st = rt_sst_open(file, n, "variables.index", &t);
    ck_assert_msg(st == MS_OK, "%s: %s", rel, ms_errmsg());
    size_t nk = 0;
    while (real_idx[_i].keys[nk])
        nk++;
    ck_assert_uint_eq(rt_sst_count(t), nk);
    ck_assert_uint_eq(rt_sst_num_blocks(t), 1);
    for (size_t i = 0; i < nk; i++) {
        rt_slice k, v;
        rt_sst_entry(t, i, &k, &v);
        ck_assert_uint_eq(k.len, strlen(real_idx[_i].keys[i]));
        ck_assert(memcmp(k.data, real_idx[_i].keys[i], k.len) == 0);
        ck_assert_int_eq(rt_sst_find(t, k.data, k.len), (long)i);
    }
    ck_assert_int_eq(rt_sst_find(t, "zz", 2), -1);
    ck_assert_int_eq(rt_sst_find(t, "a0", 2), -1);
    /* The header under "" is BundleHeaderProto{num_shards: 1, version {producer: 1}}. */
    rt_slice hv;
    rt_sst_entry(t, 0, NULL, &hv);
    static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    ck_assert_uint_eq(hv.len, sizeof(hdr));
    ck_assert(memcmp(hv.data, hdr, sizeof(hdr)) == 0);

    /* Writing the same entries again must give TensorFlow's bytes exactly
     * when TF stored the block raw; for Snappy files, the same entries. */
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(NULL, &w), MS_OK);
    for (size_t i = 0; i < nk; i++) {
        rt_slice k, v;
        rt_sst_entry(t, i, &k, &v);
        ck_assert_int_eq(rt_sst_writer_add(w, k.data, k.len, v.data, v.len), MS_OK);
    }
    uint8_t *out;
    size_t on;
    ck_assert_int_eq(rt_sst_writer_finish(w, &out, &on), MS_OK);
    if (!real_idx[_i].snappy) {
        ck_assert_uint_eq(on, n);
        ck_assert(memcmp(out, file, n) == 0);
    } else {
        rt_sst *t2;
        ck_assert_int_eq(rt_sst_open(out, on, "copy", &t2), MS_OK);
        ck_assert_uint_eq(rt_sst_count(t2), nk);
        rt_sst_free(t2);
        /* The real file is longer raw: its data block was compressed. */
        ck_assert_uint_gt(on, n);
    }
    free(out);
    rt_sst_free(t);
    free(file);
}
END_TEST

static char *make_key(int i, char *buf, size_t n) {
    snprintf(buf, n, "layer_%04d/kernel/.ATTRIBUTES/VARIABLE_VALUE", i);
    return buf;
}

START_TEST(sst_roundtrip_many_blocks) {
    int compress = _i; /* 0 none, 1 snappy */
    rt_sst_options o = rt_sst_options_default();
    o.block_size = 1024;
    o.compression = compress ? RT_SST_COMPRESSION_SNAPPY : RT_SST_COMPRESSION_NONE;
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(&o, &w), MS_OK);
    enum { N = 2000 };
    char key[128];
    uint8_t val[300];
    for (int i = 0; i < N; i++) {
        make_key(i, key, sizeof(key));
        size_t vl = (size_t)(i % 97) * 3;
        for (size_t j = 0; j < vl; j++)
            val[j] = (uint8_t)(i + (j % 5));
        ck_assert_int_eq(rt_sst_writer_add(w, key, strlen(key), val, vl), MS_OK);
    }
    /* Out-of-order and duplicate keys are refused. */
    ck_assert_int_eq(rt_sst_writer_add(w, "a", 1, "", 0), MS_EINVAL);
    ck_assert_int_eq(rt_sst_writer_add(w, key, strlen(key), "", 0), MS_EINVAL);
    uint8_t *file;
    size_t n;
    ck_assert_int_eq(rt_sst_writer_finish(w, &file, &n), MS_OK);
    rt_sst *t;
    ck_assert_msg(rt_sst_open(file, n, "t", &t) == MS_OK, "%s", ms_errmsg());
    ck_assert_uint_eq(rt_sst_count(t), N);
    ck_assert_uint_gt(rt_sst_num_blocks(t), 50);
    for (int i = 0; i < N; i++) {
        rt_slice k, v;
        rt_sst_entry(t, (size_t)i, &k, &v);
        make_key(i, key, sizeof(key));
        ck_assert_uint_eq(k.len, strlen(key));
        ck_assert(memcmp(k.data, key, k.len) == 0);
        ck_assert_uint_eq(v.len, (size_t)(i % 97) * 3);
        for (size_t j = 0; j < v.len; j++)
            ck_assert_uint_eq(v.data[j], (uint8_t)(i + (j % 5)));
    }
    if (compress) {
        /* Compressible blocks are stored with type 1: find one trailer that says so
         * by checking the file is much smaller than the raw payload. */
        ck_assert_uint_lt(n, (size_t)N * 150);
    }
    rt_sst_free(t);
    free(file);
}
END_TEST

START_TEST(sst_empty_table) {
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(NULL, &w), MS_OK);
    uint8_t *file;
    size_t n;
    ck_assert_int_eq(rt_sst_writer_finish(w, &file, &n), MS_OK);
    /* metaindex (8+5) + index (8+5) + footer 48 */
    ck_assert_uint_eq(n, 13 + 13 + 48);
    rt_sst *t;
    ck_assert_int_eq(rt_sst_open(file, n, "t", &t), MS_OK);
    ck_assert_uint_eq(rt_sst_count(t), 0);
    rt_sst_free(t);
    free(file);
}
END_TEST

/* Every single-byte corruption and every truncation of a small table is
 * either rejected with MS_EDATALOSS or (footer padding only) harmless. */
START_TEST(sst_corruption_sweep) {
    rt_sst_options o = rt_sst_options_default();
    o.block_size = 64;
    o.compression = _i ? RT_SST_COMPRESSION_SNAPPY : RT_SST_COMPRESSION_NONE;
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(&o, &w), MS_OK);
    char key[64];
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "key%02d", i);
        ck_assert_int_eq(rt_sst_writer_add(w, key, strlen(key), "valuevaluevalue", 15), MS_OK);
    }
    uint8_t *file;
    size_t n;
    ck_assert_int_eq(rt_sst_writer_finish(w, &file, &n), MS_OK);
    uint8_t *copy = malloc(n);
    int rejected = 0;
    for (size_t pos = 0; pos < n; pos++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(copy, file, n);
            copy[pos] ^= (uint8_t)(1u << bit);
            rt_sst *t = NULL;
            ms_status st = rt_sst_open(copy, n, "t", &t);
            if (st == MS_OK) {
                /* Only the footer's zero padding is unchecked. */
                ck_assert_msg(pos >= n - RT_SST_FOOTER_LEN && pos < n - 8, "flip at %zu accepted",
                              pos);
                ck_assert_uint_eq(rt_sst_count(t), 12);
                rt_sst_free(t);
            } else {
                ck_assert_int_eq(st, MS_EDATALOSS);
                rejected++;
            }
        }
    }
    ck_assert_int_gt(rejected, (int)n);
    for (size_t len = 0; len < n; len++) {
        rt_sst *t = NULL;
        ck_assert_int_eq(rt_sst_open(file, len, "t", &t), MS_EDATALOSS);
    }
    free(copy);
    free(file);
}
END_TEST

START_TEST(sst_error_messages) {
    size_t n;
    uint8_t *file = load_data(real_idx[3].path, &n);
    rt_sst *t;
    /* flip a byte inside the data block (offset 0, 38 bytes) */
    file[10] ^= 0x40;
    ck_assert_int_eq(rt_sst_open(file, n, "variables.index", &t), MS_EDATALOSS);
    ck_assert_str_eq(ms_errmsg(), "variables.index: block crc mismatch at offset 0");
    file[10] ^= 0x40;
    file[n - 1] ^= 1;
    ck_assert_int_eq(rt_sst_open(file, n, "variables.index", &t), MS_EDATALOSS);
    ck_assert_msg(strstr(ms_errmsg(), "bad table magic") != NULL, "%s", ms_errmsg());
    file[n - 1] ^= 1;
    ck_assert_int_eq(rt_sst_open(file, 20, "variables.index", &t), MS_EDATALOSS);
    ck_assert_msg(strstr(ms_errmsg(), "variables.index: truncated") != NULL, "%s", ms_errmsg());
    free(file);
}
END_TEST

/* ---- hostile block contents behind valid crcs ---- */

static void put_block(rt_bytes *f, const uint8_t *p, size_t n, uint64_t *off, uint64_t *size) {
    *off = f->len;
    *size = n;
    rt_bytes_append(f, p, n);
    uint8_t type = 0;
    rt_bytes_put_u8(f, type);
    rt_bytes_put_fixed32(f, rt_crc32c_mask(rt_crc32c_extend(rt_crc32c(p, n), &type, 1)));
}

/* A table whose data block (as_index = 0) or index block (1) has the given
 * contents; everything else well formed and every crc right. */
static uint8_t *wrap_block(const uint8_t *c, size_t cn, int as_index, size_t *n) {
    rt_bytes f = RT_BYTES_INIT;
    uint64_t doff = 0, dsize = 0, moff, msize, ioff, isize;
    static const uint8_t empty[8] = {0, 0, 0, 0, 1, 0, 0, 0};
    if (!as_index)
        put_block(&f, c, cn, &doff, &dsize);
    put_block(&f, empty, 8, &moff, &msize);
    if (as_index) {
        put_block(&f, c, cn, &ioff, &isize);
    } else {
        /* one index entry: key "\xff", handle (doff, dsize) */
        uint8_t ib[32];
        size_t k = 0;
        ib[k++] = 0;
        ib[k++] = 1;
        ib[k++] = 2;
        ib[k++] = 0xff;
        ib[k++] = (uint8_t)doff;
        ib[k++] = (uint8_t)dsize;
        memcpy(ib + k, empty, 8);
        put_block(&f, ib, k + 8, &ioff, &isize);
    }
    uint8_t foot[48] = {0};
    size_t k = rt_varint64_encode(foot, moff);
    k += rt_varint64_encode(foot + k, msize);
    k += rt_varint64_encode(foot + k, ioff);
    rt_varint64_encode(foot + k, isize);
    static const uint8_t magic[8] = {0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb};
    memcpy(foot + 40, magic, 8);
    rt_bytes_append(&f, foot, 48);
    ck_assert(rt_bytes_ok(&f));
    return rt_bytes_take(&f, n);
}

START_TEST(sst_hostile_blocks) {
    static const struct {
        int as_index;
        uint8_t c[40];
        size_t n;
        const char *msg;
    } cases[] = {
        {0, {1, 2, 3}, 3, "too short"},
        {0, {0, 0, 0, 0, 0xff, 0xff, 0, 0}, 8, "bad restart count"},
        {0, {0, 1, 0, 'a', 9, 0, 0, 0, 1, 0, 0, 0}, 12, "restart 9 out of range"},
        {0, {0, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0}, 12, "entries but no restarts"},
        {0, {2, 1, 0, 'a', 0, 0, 0, 0, 1, 0, 0, 0}, 12, "entry overruns"},
        {0, {0, 1, 9, 'a', 0, 0, 0, 0, 1, 0, 0, 0}, 12, "entry overruns"},
        {0, {0, 0x80, 0, 0, 0, 0, 1, 0, 0, 0}, 10, "bad entry header"},
        {0, {0, 1, 0, 'b', 0, 1, 0, 'a', 0, 0, 0, 0, 1, 0, 0, 0}, 16, "keys out of order"},
        {0, {0, 1, 0, 'b', 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, 16, "keys out of order"},
        {1, {0, 1, 3, 'a', 0x80, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0}, 15, "lies outside the file"},
        {1, {0, 1, 3, 'a', 0, 1, 7, 0, 0, 0, 0, 1, 0, 0, 0}, 15, "bad block handle"},
        {1, {0, 1, 1, 'a', 0, 0, 0, 0, 0, 1, 0, 0, 0}, 13, "bad block handle"},
        /* two empty keys with empty values (found by fuzzing: NULL + 0) */
        {0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, 14, "keys out of order"},
    };
    size_t n;
    uint8_t *file = wrap_block(cases[_i].c, cases[_i].n, cases[_i].as_index, &n);
    rt_sst *t = NULL;
    ck_assert_int_eq(rt_sst_open(file, n, "h", &t), MS_EDATALOSS);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_errmsg(), cases[_i].msg) != NULL, "case %d: %s", _i, ms_errmsg());
    free(file);
}
END_TEST

START_TEST(sst_index_key_below_block) {
    /* data block with key "b"; index entry key "a" < "b" */
    static const uint8_t data[] = {0, 1, 0, 'b', 0, 0, 0, 0, 1, 0, 0, 0};
    size_t n;
    uint8_t *file = wrap_block(data, sizeof(data), 0, &n);
    rt_sst *t = NULL;
    ck_assert_int_eq(rt_sst_open(file, n, "h", &t), MS_OK); /* index key 0xff: fine */
    ck_assert_uint_eq(rt_sst_count(t), 1);
    rt_sst_free(t);
    /* Rewrite the index key byte 0xff -> 'a' and fix that block's crc. */
    size_t ik = sizeof(data) + 5 + 13 + 3; /* data, metaindex, then entry header */
    ck_assert_uint_eq(file[ik], 0xff);
    file[ik] = 'a';
    size_t ib = sizeof(data) + 5 + 13, il = 6 + 8;
    uint32_t crc = rt_crc32c(file + ib, il + 1);
    rt_store_le32(file + ib + il + 1, rt_crc32c_mask(crc));
    ck_assert_int_eq(rt_sst_open(file, n, "h", &t), MS_EDATALOSS);
    ck_assert_msg(strstr(ms_errmsg(), "index key below the last key") != NULL, "%s", ms_errmsg());
    free(file);
}
END_TEST

static Suite *sstable_suite(void) {
    Suite *s = suite_create("sstable");
    TCase *tc = tcase_create("crc32c");
    tcase_add_test(tc, crc_known_vectors);
    tcase_add_test(tc, crc_matches_bitwise_and_portable);
    tcase_add_test(tc, crc_extend_and_mask);
    suite_add_tcase(s, tc);
    tc = tcase_create("snappy");
    tcase_add_test(tc, snappy_hand_vectors);
    tcase_add_test(tc, snappy_copy1_high_offset);
    tcase_add_test(tc, snappy_hostile);
    tcase_add_test(tc, snappy_roundtrip);
    suite_add_tcase(s, tc);
    tc = tcase_create("table");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, sst_real_indexes, 0, (int)(sizeof(real_idx) / sizeof(real_idx[0])));
    tcase_add_loop_test(tc, sst_roundtrip_many_blocks, 0, 2);
    tcase_add_test(tc, sst_empty_table);
    tcase_add_loop_test(tc, sst_corruption_sweep, 0, 2);
    tcase_add_test(tc, sst_error_messages);
    tcase_add_loop_test(tc, sst_hostile_blocks, 0, 13);
    tcase_add_test(tc, sst_index_key_below_block);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(sstable_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
