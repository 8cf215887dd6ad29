/* check_bundle.c - tensor bundle reader/writer against TensorFlow's files,
 * byte-level layout, round trips and corruption. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_bundle.h"
#include "rt_sstable.h"
#include "rt_tensor.h"
#include "tf_savedmodel.pb-c.h"
#include "util_bundle.h"

/* Independent CRC-32C (bit at a time) and mask, for the byte-level test. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}
static uint32_t mask_by_hand(uint32_t c) {
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static char *sm_prefix(const char *model, char *buf, size_t n) {
    char rel[512];
    snprintf(rel, sizeof(rel), "savedmodels/%s/variables/variables", model);
    return ut_data_path(rel, buf, n);
}

static char *tmp_prefix(char *dir, size_t dn, char *prefix, size_t pn) {
    ck_assert_int_eq(ut_mkdtemp(dir, dn), 0);
    snprintf(prefix, pn, "%s/variables", dir);
    return prefix;
}

static float read_scalar_f32(rt_bundle *b, const char *key) {
    rt_tensor *t = NULL;
    ms_status st = rt_bundle_read(b, key, &t);
    ck_assert_msg(st == MS_OK, "%s: %s", key, ms_errmsg());
    ck_assert_int_eq(t->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(t->shape.rank, 0);
    float v = rt_tensor_f32(t)[0];
    rt_tensor_unref(t);
    return v;
}

/* ===================== real TensorFlow bundles ===================== */

static const struct {
    const char *model;
    const char *keys[8];
    float vals[8]; /* for the float scalars, same order; NAN-free */
} real[] = {
    {"saved_model_half_plus_two_cpu/00000123",
     {"a", "a2", "b", "c", "c2", NULL},
     {0.5f, 0.5f, 2.0f, 3.0f, 3.0f}},
    {"saved_model_half_plus_two_gpu/00000123", {"a", "b", "c", NULL}, {0.5f, 2.0f, 3.0f}},
    {"saved_model_half_plus_two_2_versions/00000123", {"a", "b", "c", NULL}, {0.5f, 2.0f, 3.0f}},
    {"saved_model_half_plus_two_2_versions/00000124", {"a", "b", "c", NULL}, {0.5f, 2.0f, 3.0f}},
    {"saved_model_counter/00000123", {"counter", NULL}, {0.0f}},
    {"saved_model_half_plus_two_tf2_cpu/00000123",
     {"_CHECKPOINTABLE_OBJECT_GRAPH", "a/.ATTRIBUTES/VARIABLE_VALUE",
      "b/.ATTRIBUTES/VARIABLE_VALUE", "c/.ATTRIBUTES/VARIABLE_VALUE", NULL},
     {0, 0.5f, 2.0f, 3.0f}},
};

START_TEST(real_bundle_values) {
    char prefix[1024];
    rt_bundle *b;
    sm_prefix(real[_i].model, prefix, sizeof(prefix));
    ms_status st = rt_bundle_open(prefix, &b);
    ck_assert_msg(st == MS_OK, "%s: %s", prefix, ms_errmsg());
    int n = 0;
    while (real[_i].keys[n])
        n++;
    ck_assert_int_eq(rt_bundle_count(b), n);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(rt_bundle_key(b, i), real[_i].keys[i]);
        if (i > 0)
            ck_assert_int_lt(strcmp(rt_bundle_key(b, i - 1), rt_bundle_key(b, i)), 0);
        if (strcmp(real[_i].keys[i], "_CHECKPOINTABLE_OBJECT_GRAPH") == 0) {
            /* A DT_STRING scalar: per the data file, one 613-byte string
             * (varint e5 04) holding a serialized TrackableObjectGraph whose
             * first field is tag 0x0a, length 0x98 0x01. */
            rt_tensor *t;
            ck_assert_int_eq(rt_bundle_read(b, real[_i].keys[i], &t), MS_OK);
            ck_assert_int_eq(t->dtype, RT_DT_STRING);
            ck_assert_int_eq(t->shape.rank, 0);
            ck_assert_uint_eq(rt_tensor_strs(t)[0].len, 613);
            ck_assert_uint_eq(rt_tensor_strs(t)[0].data[0], 0x0a);
            ck_assert_uint_eq(rt_tensor_strs(t)[0].data[1], 0x98);
            ck_assert_uint_eq(rt_tensor_strs(t)[0].data[2], 0x01);
            rt_tensor_unref(t);
            continue;
        }
        ck_assert(read_scalar_f32(b, real[_i].keys[i]) == real[_i].vals[i]);
        rt_dtype dt;
        rt_shape sh;
        ck_assert_int_eq(rt_bundle_info(b, real[_i].keys[i], &dt, &sh), MS_OK);
        ck_assert_int_eq(dt, RT_DT_FLOAT);
        ck_assert_int_eq(sh.rank, 0);
    }
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_bundle_read(b, "no_such_tensor", &t), MS_ENOTFOUND);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_errmsg(), "no_such_tensor") != NULL, "%s", ms_errmsg());
    ck_assert_int_eq(rt_bundle_read(b, "", &t), MS_ENOTFOUND); /* the header is no tensor */
    rt_bundle_close(b);
    ck_assert_msg(rt_bundle_verify(prefix) == MS_OK, "%s", ms_errmsg());
}
END_TEST

/* Reading a TF bundle and writing its tensors again (in TF's data order)
 * gives TensorFlow's data file byte for byte, and its index too where TF
 * stored the index block raw (the Snappy ones differ only by compression). */
START_TEST(real_bundle_rewrite_identical) {
    static const struct {
        const char *model;
        int index_identical;
    } cases[] = {
        {"saved_model_half_plus_two_gpu/00000123", 1},
        {"saved_model_half_plus_two_2_versions/00000123", 1},
        {"saved_model_counter/00000123", 1},
        {"saved_model_half_plus_two_cpu/00000123", 0},
        {"saved_model_half_plus_two_tf2_cpu/00000123", 0},
    };
    char prefix[1024], dir[256], out[512], pa[1200], pb[1200];
    rt_bundle *b;
    sm_prefix(cases[_i].model, prefix, sizeof(prefix));
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_OK);
    tmp_prefix(dir, sizeof(dir), out, sizeof(out));
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(out, &w), MS_OK);
    /* TF's data order is that of its offsets; find it from the data file:
     * the tensors of these models were written in key order except the TF2
     * object graph, which comes last. */
    int n = rt_bundle_count(b);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            const char *k = rt_bundle_key(b, i);
            int is_graph = strcmp(k, "_CHECKPOINTABLE_OBJECT_GRAPH") == 0;
            if (is_graph != pass)
                continue;
            rt_tensor *t;
            ck_assert_int_eq(rt_bundle_read(b, k, &t), MS_OK);
            ck_assert_int_eq(rt_bundle_writer_add(w, k, t), MS_OK);
            rt_tensor_unref(t);
        }
    }
    ck_assert_msg(rt_bundle_writer_finish(w) == MS_OK, "%s", ms_errmsg());
    rt_bundle_close(b);

    size_t na, nb;
    snprintf(pa, sizeof(pa), "%s.data-00000-of-00001", prefix);
    snprintf(pb, sizeof(pb), "%s.data-00000-of-00001", out);
    uint8_t *a = ut_read_file(pa, &na), *c = ut_read_file(pb, &nb);
    ck_assert(a && c);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(a, c, na) == 0);
    free(a);
    free(c);
    snprintf(pa, sizeof(pa), "%s.index", prefix);
    snprintf(pb, sizeof(pb), "%s.index", out);
    a = ut_read_file(pa, &na);
    c = ut_read_file(pb, &nb);
    ck_assert(a && c);
    if (cases[_i].index_identical) {
        ck_assert_uint_eq(na, nb);
        ck_assert(memcmp(a, c, na) == 0);
    }
    free(a);
    free(c);
    ck_assert_int_eq(rt_bundle_verify(out), MS_OK);
    ut_rmtree(dir);
}
END_TEST

/* ===================== round trips ===================== */

static rt_tensor *make_pod(rt_dtype dt, int rank, const int64_t *dims, unsigned seed) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    uint8_t *p = t->data;
    for (size_t i = 0; i < rt_tensor_nbytes(t); i++)
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 3));
    if (dt == RT_DT_BOOL)
        for (size_t i = 0; i < rt_tensor_nbytes(t); i++)
            p[i] &= 1;
    return t;
}

START_TEST(roundtrip_dtypes) {
    static const int64_t d23[] = {2, 3}, d0[] = {0, 4}, d5[] = {5}, d8[] = {1, 2, 1, 2, 1, 2, 1, 2};
    static const rt_dtype pods[] = {RT_DT_FLOAT,     RT_DT_DOUBLE,   RT_DT_INT32,  RT_DT_UINT8,
                                    RT_DT_INT16,     RT_DT_INT8,     RT_DT_INT64,  RT_DT_BOOL,
                                    RT_DT_COMPLEX64, RT_DT_BFLOAT16, RT_DT_UINT16, RT_DT_COMPLEX128,
                                    RT_DT_HALF,      RT_DT_UINT32,   RT_DT_UINT64};
    enum { NPOD = sizeof(pods) / sizeof(pods[0]) };
    rt_tensor *ts[NPOD + 8];
    char names[NPOD + 8][64];
    int n = 0;
    for (int i = 0; i < NPOD; i++) {
        snprintf(names[n], 64, "pod/%s", rt_dtype_name(pods[i]));
        ts[n++] = make_pod(pods[i], 2, d23, (unsigned)i);
    }
    snprintf(names[n], 64, "scalar");
    ts[n++] = make_pod(RT_DT_FLOAT, 0, NULL, 99);
    snprintf(names[n], 64, "empty_f32");
    ts[n++] = make_pod(RT_DT_FLOAT, 2, d0, 1);
    snprintf(names[n], 64, "rank8");
    ts[n++] = make_pod(RT_DT_INT32, 8, d8, 7);
    /* Strings: empty, binary with NULs, long (varint length of 2 bytes). */
    static char longs[300];
    memset(longs, 'L', sizeof(longs));
    rt_str strs[5] = {{(const uint8_t *)"", 0},
                      {(const uint8_t *)"a\0b", 3},
                      {(const uint8_t *)longs, sizeof(longs)},
                      {(const uint8_t *)"dicom", 5},
                      {(const uint8_t *)"\xff\xfe", 2}};
    rt_shape s5 = rt_shape_make(1, d5), s0 = {0}, se = rt_shape_make(1, (int64_t[]){0});
    ck_assert_int_eq(rt_tensor_new_strings(&s5, strs, &ts[n]), MS_OK);
    snprintf(names[n++], 64, "str/vec");
    ck_assert_int_eq(rt_tensor_new_strings(&s0, strs + 3, &ts[n]), MS_OK);
    snprintf(names[n++], 64, "str/scalar");
    ck_assert_int_eq(rt_tensor_new_strings(&se, strs, &ts[n]), MS_OK);
    snprintf(names[n++], 64, "str/empty");

    char dir[256], prefix[512];
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    /* Add in reverse order: the index must come out sorted anyway. */
    for (int i = n - 1; i >= 0; i--)
        ck_assert_msg(rt_bundle_writer_add(w, names[i], ts[i]) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_bundle_writer_add(w, names[0], ts[0]), MS_EINVAL);
    ck_assert_int_eq(rt_bundle_writer_add(w, "", ts[0]), MS_EINVAL);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);

    rt_bundle *b;
    ck_assert_msg(rt_bundle_open(prefix, &b) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_bundle_count(b), n);
    for (int i = 1; i < n; i++)
        ck_assert_int_lt(strcmp(rt_bundle_key(b, i - 1), rt_bundle_key(b, i)), 0);
    for (int i = 0; i < n; i++) {
        rt_tensor *t;
        ck_assert_msg(rt_bundle_read(b, names[i], &t) == MS_OK, "%s: %s", names[i], ms_errmsg());
        ck_assert_msg(rt_tensor_equal(t, ts[i]), "%s differs", names[i]);
        rt_tensor_unref(t);
    }
    rt_bundle_close(b);
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_OK);
    for (int i = 0; i < n; i++)
        rt_tensor_unref(ts[i]);
    ut_rmtree(dir);
}
END_TEST

START_TEST(writer_abort_and_empty) {
    char dir[256], prefix[512], path[600];
    struct stat sb;
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_scalar_f32(1.0f, &t), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_add(w, "x", t), MS_OK);
    rt_bundle_writer_abort(w);
    snprintf(path, sizeof(path), "%s.index", prefix);
    ck_assert_int_ne(stat(path, &sb), 0);
    ck_assert_int_eq(rmdir(dir), 0); /* nothing left behind, temp file included */

    /* A bundle with no tensors: header only. */
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);
    rt_bundle *b;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_OK);
    ck_assert_int_eq(rt_bundle_count(b), 0);
    rt_bundle_close(b);
    rt_tensor_unref(t);
    ut_rmtree(dir);
}
END_TEST

/* ===================== byte layout ===================== */

static size_t put(uint8_t *p, size_t at, const void *src, size_t n) {
    memcpy(p + at, src, n);
    return at + n;
}
static size_t put_trailer(uint8_t *p, size_t block_at, size_t at) {
    p[at] = 0; /* no compression */
    uint32_t m = mask_by_hand(crc_bitwise(p + block_at, at + 1 - block_at));
    p[at + 1] = (uint8_t)m;
    p[at + 2] = (uint8_t)(m >> 8);
    p[at + 3] = (uint8_t)(m >> 16);
    p[at + 4] = (uint8_t)(m >> 24);
    return at + 5;
}

START_TEST(byte_layout) {
    /* One tensor "w" = float[2]{1.0, -2.0}. Expected files, from the formats:
     *  data: 00 00 80 3f  00 00 00 c0
     *  index data block @0:
     *    ""  : shared 0, non_shared 0, len 6, header 08 01 1a 02 08 01
     *    "w" : 00 01 0f 'w', entry 08 01 | 12 04 12 02 08 02 | 28 08 | 35 crc
     *    restarts: 00000000, count 01000000              -> 36 bytes + trailer
     *  metaindex @41: 00000000 01000000                  -> 8 bytes + trailer
     *  index @54: 00 01 02 'x' 00 24 (successor of "w"; handle 0/36), restarts
     *                                                     -> 14 bytes + trailer
     *  footer @73: 29 08 36 0e, zeros to 40, 57 fb 80 8b 24 75 47 db -> 121 */
    static const uint8_t data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    uint8_t want[121];
    memset(want, 0, sizeof(want));
    uint32_t ecrc = mask_by_hand(crc_bitwise(data, 8));
    uint8_t e0[] = {0x00, 0x00, 0x06, 0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    uint8_t e1[] = {0x00,
                    0x01,
                    0x0f,
                    'w',
                    0x08,
                    0x01,
                    0x12,
                    0x04,
                    0x12,
                    0x02,
                    0x08,
                    0x02,
                    0x28,
                    0x08,
                    0x35,
                    (uint8_t)ecrc,
                    (uint8_t)(ecrc >> 8),
                    (uint8_t)(ecrc >> 16),
                    (uint8_t)(ecrc >> 24)};
    uint8_t r1[] = {0, 0, 0, 0, 1, 0, 0, 0};
    uint8_t ix[] = {0x00, 0x01, 0x02, 'x', 0x00, 0x24};
    uint8_t ft[] = {0x29, 0x08, 0x36, 0x0e};
    uint8_t magic[] = {0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb};
    size_t at = put(want, 0, e0, sizeof(e0));
    at = put(want, at, e1, sizeof(e1));
    at = put(want, at, r1, sizeof(r1));
    ck_assert_uint_eq(at, 36);
    at = put_trailer(want, 0, at);
    ck_assert_uint_eq(at, 41);
    at = put(want, at, r1, sizeof(r1));
    at = put_trailer(want, 41, at);
    ck_assert_uint_eq(at, 54);
    at = put(want, at, ix, sizeof(ix));
    at = put(want, at, r1, sizeof(r1));
    at = put_trailer(want, 54, at);
    ck_assert_uint_eq(at, 73);
    put(want, at, ft, sizeof(ft));
    put(want, 121 - 8, magic, sizeof(magic));

    char dir[256], prefix[512], path[600];
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    rt_tensor *t;
    rt_shape s = rt_shape_make(1, (int64_t[]){2});
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    rt_tensor_f32(t)[0] = 1.0f;
    rt_tensor_f32(t)[1] = -2.0f;
    ck_assert_int_eq(rt_bundle_writer_add(w, "w", t), MS_OK);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);

    size_t n;
    snprintf(path, sizeof(path), "%s.data-00000-of-00001", prefix);
    uint8_t *got = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(n, 8);
    ck_assert(memcmp(got, data, 8) == 0);
    free(got);
    snprintf(path, sizeof(path), "%s.index", prefix);
    got = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(n, sizeof(want));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "index byte %zu: %02x, want %02x", i, got[i], want[i]);
    free(got);
    ut_rmtree(dir);
}
END_TEST

START_TEST(string_layout) {
    /* Strings {"ab", ""}: lengths 02 00, masked crc of the lengths as uint32
     * LE (02000000 00000000), then "ab". Entry crc over (uint32 lengths,
     * stored checksum, bytes). */
    char dir[256], prefix[512], path[600];
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    rt_str strs[2] = {{(const uint8_t *)"ab", 2}, {(const uint8_t *)"", 0}};
    rt_shape s = rt_shape_make(1, (int64_t[]){2});
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new_strings(&s, strs, &t), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_add(w, "s", t), MS_OK);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);
    uint8_t lens32[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    uint32_t lck = mask_by_hand(crc_bitwise(lens32, 8));
    uint8_t want[8] = {
        0x02, 0x00, (uint8_t)lck, (uint8_t)(lck >> 8), (uint8_t)(lck >> 16), (uint8_t)(lck >> 24),
        'a',  'b'};
    size_t n;
    snprintf(path, sizeof(path), "%s.data-00000-of-00001", prefix);
    uint8_t *got = ut_read_file(path, &n);
    ck_assert_uint_eq(n, 8);
    ck_assert(memcmp(got, want, 8) == 0);
    free(got);
    rt_bundle *b;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_OK);
    ck_assert_int_eq(rt_bundle_read(b, "s", &t), MS_OK);
    ck_assert_uint_eq(rt_tensor_strs(t)[0].len, 2);
    ck_assert_uint_eq(rt_tensor_strs(t)[1].len, 0);
    rt_tensor_unref(t);
    rt_bundle_close(b);
    ut_rmtree(dir);
}
END_TEST

/* ===================== corruption ===================== */

/* Writes a small bundle (float "a", string "s") into a fresh folder. */
static void write_small(char *dir, size_t dn, char *prefix, size_t pn) {
    tmp_prefix(dir, dn, prefix, pn);
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(prefix, &w), MS_OK);
    rt_tensor *t;
    rt_shape s = rt_shape_make(1, (int64_t[]){4});
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int i = 0; i < 4; i++)
        rt_tensor_f32(t)[i] = (float)i + 0.25f;
    ck_assert_int_eq(rt_bundle_writer_add(w, "a", t), MS_OK);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_tensor_scalar_string("hello", 5, &t), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_add(w, "s", t), MS_OK);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);
}

static void flip_byte(const char *path, size_t at) {
    size_t n;
    uint8_t *p = ut_read_file(path, &n);
    ck_assert(p && at < n);
    p[at] ^= 0x10;
    ck_assert_int_eq(ut_write_file(path, p, n), 0);
    free(p);
}

static void truncate_to(const char *path, size_t len) {
    ck_assert_int_eq(truncate(path, (off_t)len), 0);
}

START_TEST(corrupt_index_block_crc) {
    char dir[256], prefix[512], path[600];
    write_small(dir, sizeof(dir), prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s.index", prefix);
    flip_byte(path, 5);
    rt_bundle *b = NULL;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(ms_errmsg(), "variables.index: block crc mismatch at offset 0");
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_EDATALOSS);
    ut_rmtree(dir);
}
END_TEST

START_TEST(corrupt_data_entry_crc) {
    char dir[256], prefix[512], path[600];
    write_small(dir, sizeof(dir), prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s.data-00000-of-00001", prefix);
    flip_byte(path, 6); /* inside "a" (bytes 0..15) */
    rt_bundle *b;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_OK); /* sizes still fine */
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_bundle_read(b, "a", &t), MS_EDATALOSS);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(ms_errmsg(), "variables.data-00000-of-00001: crc mismatch for tensor 'a' "
                                  "(offset 0, size 16)");
    ck_assert_int_eq(rt_bundle_read(b, "s", &t), MS_OK); /* the other tensor is fine */
    rt_tensor_unref(t);
    rt_bundle_close(b);
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_EDATALOSS);
    ut_rmtree(dir);
}
END_TEST

START_TEST(corrupt_string_tensor) {
    /* "s" starts at 16: length varint (1 byte), 4-byte length crc, "hello". */
    static const struct {
        size_t at;
        const char *msg;
    } cases[] = {
        {16, "bad string length"}, /* 0x05 -> 0x15: longer than the entry */
        {18, "string lengths crc mismatch"},
        {22, "crc mismatch for tensor 's'"},
    };
    char dir[256], prefix[512], path[600];
    write_small(dir, sizeof(dir), prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s.data-00000-of-00001", prefix);
    flip_byte(path, cases[_i].at);
    rt_bundle *b;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_OK);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_bundle_read(b, "s", &t), MS_EDATALOSS);
    ck_assert_msg(strstr(ms_errmsg(), cases[_i].msg) != NULL, "%s", ms_errmsg());
    rt_bundle_close(b);
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_EDATALOSS);
    ut_rmtree(dir);
}
END_TEST

START_TEST(corrupt_files) {
    char dir[256], prefix[512], path[600], dpath[600];
    rt_bundle *b = NULL;
    write_small(dir, sizeof(dir), prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s.index", prefix);
    snprintf(dpath, sizeof(dpath), "%s.data-00000-of-00001", prefix);
    size_t n;
    uint8_t *orig = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(orig);

    switch (_i) {
    case 0: /* truncated index */
        truncate_to(path, n - 10);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
        ck_assert_msg(strncmp(ms_errmsg(), "variables.index: bad table magic", 32) == 0, "%s",
                      ms_errmsg());
        truncate_to(path, 30);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
        ck_assert_msg(strncmp(ms_errmsg(), "variables.index: truncated", 26) == 0, "%s",
                      ms_errmsg());
        break;
    case 1: /* wrong magic */
        flip_byte(path, n - 3);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
        ck_assert_msg(strstr(ms_errmsg(), "bad table magic") != NULL, "%s", ms_errmsg());
        break;
    case 2: /* missing shard */
        ck_assert_int_eq(unlink(dpath), 0);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
        ck_assert_str_eq(ms_errmsg(), "variables.data-00000-of-00001: missing");
        ck_assert_int_eq(rt_bundle_verify(prefix), MS_EDATALOSS);
        break;
    case 3: /* short shard */
        truncate_to(dpath, 20);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
        ck_assert_str_eq(ms_errmsg(),
                         "variables.data-00000-of-00001: truncated: 20 bytes, the index needs 26");
        break;
    case 4: /* missing index */
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_ENOTFOUND);
        ck_assert_str_eq(ms_errmsg(), "variables.index: missing");
        break;
    case 5: /* every single-byte flip of the index is caught (or harmless) */
        for (size_t i = 0; i < n; i++) {
            uint8_t *p = malloc(n);
            memcpy(p, orig, n);
            p[i] ^= 0x01;
            ck_assert_int_eq(ut_write_file(path, p, n), 0);
            free(p);
            ms_status st = rt_bundle_open(prefix, &b);
            if (st == MS_OK) {
                ck_assert_msg(i >= n - 48 && i < n - 8, "flip at %zu accepted", i);
                rt_bundle_close(b);
            } else {
                ck_assert_int_eq(st, MS_EDATALOSS);
            }
            b = NULL;
        }
        break;
    }
    ck_assert_ptr_null(b);
    free(orig);
    ut_rmtree(dir);
}
END_TEST

/* A header that is not first, a bad header, an entry whose size does not fit
 * its dtype: all detected. Built with rt_sst directly. */
START_TEST(bad_entries) {
    char dir[256], prefix[512], path[600], dpath[600];
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s.index", prefix);
    snprintf(dpath, sizeof(dpath), "%s.data-00000-of-00001", prefix);
    ck_assert_int_eq(ut_write_file(dpath, "\0\0\0\0\0\0\0\0", 8), 0);
    static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    static const uint8_t hdr_new[] = {0x08, 0x01, 0x1a, 0x02, 0x10, 0x05}; /* min_consumer 5 */
    static const uint8_t hdr_two[] = {0x08, 0x02};                         /* 2 shards */
    /* float shape [3] but size 8 */
    static const uint8_t ent_badsize[] = {0x08, 0x01, 0x12, 0x04, 0x12,
                                          0x02, 0x08, 0x03, 0x28, 0x08};
    static const uint8_t ent_shard[] = {0x08, 0x01, 0x12, 0x00, 0x18, 0x03, 0x28, 0x04};
    static const struct {
        const uint8_t *h;
        size_t hn;
        int with_header;
        const uint8_t *e;
        size_t en;
        ms_status st;
        const char *msg;
    } cases[] = {
        {hdr, sizeof(hdr), 0, ent_badsize, sizeof(ent_badsize), MS_EDATALOSS, "no header entry"},
        {hdr, sizeof(hdr), 1, ent_badsize, sizeof(ent_badsize), MS_EDATALOSS,
         "'t' is 8 bytes, DT_FLOAT(3) needs 12"},
        {hdr, sizeof(hdr), 1, ent_shard, sizeof(ent_shard), MS_EDATALOSS, "is in shard 3 of 1"},
        {hdr_new, sizeof(hdr_new), 1, ent_shard, sizeof(ent_shard), MS_ENOTSUP,
         "needs bundle reader version 5"},
        {hdr_two, sizeof(hdr_two), 1, ent_shard, sizeof(ent_shard), MS_EDATALOSS, "shard 3 of 2"},
        {(const uint8_t *)"\xff", 1, 1, ent_shard, sizeof(ent_shard), MS_EDATALOSS,
         "header entry does not parse"},
    };
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(NULL, &w), MS_OK);
    if (cases[_i].with_header)
        ck_assert_int_eq(rt_sst_writer_add(w, "", 0, cases[_i].h, cases[_i].hn), MS_OK);
    ck_assert_int_eq(rt_sst_writer_add(w, "t", 1, cases[_i].e, cases[_i].en), MS_OK);
    uint8_t *file;
    size_t n;
    ck_assert_int_eq(rt_sst_writer_finish(w, &file, &n), MS_OK);
    ck_assert_int_eq(ut_write_file(path, file, n), 0);
    free(file);
    rt_bundle *b = NULL;
    ck_assert_int_eq(rt_bundle_open(prefix, &b), cases[_i].st);
    ck_assert_msg(strstr(ms_errmsg(), cases[_i].msg) != NULL, "%s", ms_errmsg());
    ck_assert_ptr_null(b);
    ut_rmtree(dir);
}
END_TEST

/* Packs a BundleEntryProto for the hand-built indexes below. */
static size_t pack_entry(uint8_t *buf, rt_dtype dt, int rank, const int64_t *dims, int shard,
                         int64_t off, int64_t size, uint32_t masked_crc, int sliced) {
    Tensorflow__BundleEntryProto e = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
    Tensorflow__TensorShapeProto sh = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim d[4], *dp[4];
    Tensorflow__TensorSliceProto sl = TENSORFLOW__TENSOR_SLICE_PROTO__INIT, *slp = &sl;
    for (int i = 0; i < rank; i++) {
        Tensorflow__TensorShapeProto__Dim init = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
        d[i] = init;
        d[i].size = dims[i];
        dp[i] = &d[i];
    }
    sh.n_dim = (size_t)rank;
    sh.dim = dp;
    e.dtype = (Tensorflow__DataType)dt;
    e.shape = &sh;
    e.shard_id = shard;
    e.offset = off;
    e.size = size;
    e.crc32c = masked_crc;
    if (sliced) {
        e.n_slices = 1;
        e.slices = &slp;
    }
    return tensorflow__bundle_entry_proto__pack(&e, buf);
}

/* Two shards, a big-endian header, a sliced entry: built by hand (TF's
 * BundleWriter makes one shard; MergeBundles and old writers make more). */
START_TEST(multi_shard_big_endian_sliced) {
    char dir[256], prefix[512], path[600];
    tmp_prefix(dir, sizeof(dir), prefix, sizeof(prefix));
    /* shard 0: "a" int32[2] {1, -2} big-endian; shard 1: 3 pad bytes, then
     * "b" float {0.5} big-endian at offset 3. */
    static const uint8_t d0[8] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
    static const uint8_t d1[7] = {9, 9, 9, 0x3f, 0x00, 0x00, 0x00};
    snprintf(path, sizeof(path), "%s.data-00000-of-00002", prefix);
    ck_assert_int_eq(ut_write_file(path, d0, 8), 0);
    snprintf(path, sizeof(path), "%s.data-00001-of-00002", prefix);
    ck_assert_int_eq(ut_write_file(path, d1, 7), 0);
    static const uint8_t hdr[] = {0x08, 0x02, 0x10, 0x01, 0x1a, 0x02, 0x08, 0x01};
    uint8_t ea[64], eb[64], es[64];
    size_t na = pack_entry(ea, RT_DT_INT32, 1, (int64_t[]){2}, 0, 0, 8,
                           mask_by_hand(crc_bitwise(d0, 8)), 0);
    size_t nb =
        pack_entry(eb, RT_DT_FLOAT, 0, NULL, 1, 3, 4, mask_by_hand(crc_bitwise(d1 + 3, 4)), 0);
    size_t ns = pack_entry(es, RT_DT_FLOAT, 1, (int64_t[]){4}, 0, 0, 0, 0, 1);
    rt_sst_writer *w;
    ck_assert_int_eq(rt_sst_writer_new(NULL, &w), MS_OK);
    ck_assert_int_eq(rt_sst_writer_add(w, "", 0, hdr, sizeof(hdr)), MS_OK);
    ck_assert_int_eq(rt_sst_writer_add(w, "a", 1, ea, na), MS_OK);
    ck_assert_int_eq(rt_sst_writer_add(w, "b", 1, eb, nb), MS_OK);
    ck_assert_int_eq(rt_sst_writer_add(w, "part", 4, es, ns), MS_OK);
    uint8_t *file;
    size_t n;
    ck_assert_int_eq(rt_sst_writer_finish(w, &file, &n), MS_OK);
    snprintf(path, sizeof(path), "%s.index", prefix);
    ck_assert_int_eq(ut_write_file(path, file, n), 0);
    free(file);

    rt_bundle *b;
    ck_assert_msg(rt_bundle_open(prefix, &b) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_bundle_count(b), 3);
    rt_tensor *t;
    ck_assert_msg(rt_bundle_read(b, "a", &t) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(((int32_t *)t->data)[0], 1);
    ck_assert_int_eq(((int32_t *)t->data)[1], -2);
    rt_tensor_unref(t);
    ck_assert_msg(rt_bundle_read(b, "b", &t) == MS_OK, "%s", ms_errmsg());
    ck_assert(rt_tensor_f32(t)[0] == 0.5f);
    rt_tensor_unref(t);
    t = NULL;
    ck_assert_int_eq(rt_bundle_read(b, "part", &t), MS_ENOTSUP);
    ck_assert_ptr_null(t);
    rt_bundle_close(b);
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_OK);

    /* Shard 1 missing: named in the error. */
    snprintf(path, sizeof(path), "%s.data-00001-of-00002", prefix);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rt_bundle_open(prefix, &b), MS_EDATALOSS);
    ck_assert_str_eq(ms_errmsg(), "variables.data-00001-of-00002: missing");
    ut_rmtree(dir);
}
END_TEST

static Suite *bundle_suite(void) {
    Suite *s = suite_create("bundle");
    TCase *tc = tcase_create("real");
    tcase_add_loop_test(tc, real_bundle_values, 0, (int)(sizeof(real) / sizeof(real[0])));
    tcase_add_loop_test(tc, real_bundle_rewrite_identical, 0, 5);
    suite_add_tcase(s, tc);
    tc = tcase_create("roundtrip");
    tcase_add_test(tc, roundtrip_dtypes);
    tcase_add_test(tc, writer_abort_and_empty);
    suite_add_tcase(s, tc);
    tc = tcase_create("layout");
    tcase_add_test(tc, byte_layout);
    tcase_add_test(tc, string_layout);
    suite_add_tcase(s, tc);
    tc = tcase_create("corruption");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, corrupt_index_block_crc);
    tcase_add_test(tc, corrupt_data_entry_crc);
    tcase_add_loop_test(tc, corrupt_string_tensor, 0, 3);
    tcase_add_loop_test(tc, corrupt_files, 0, 6);
    tcase_add_loop_test(tc, bad_entries, 0, 6);
    tcase_add_test(tc, multi_shard_big_endian_sliced);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(bundle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
