/* check_npy.c - runtime/savedmodel/rt_npy (.npy/.npz) and server/cli/cli_npformat (numpy's
 * str of an array). References come from numpy itself (Debian's
 * /usr/bin/python3 writes the files and the expected text) or are derived by
 * hand from the .npy format description. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_npy.h"
#include "cli_npformat.h"
#include "util_cli.h"

static char g_dir[1024];

static void make_tmp(void) { util_cli_tmpdir(g_dir, sizeof(g_dir)); }

static void rm_tmp(void) { util_cli_rmtree(g_dir); }

static char *path_in(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

/* ---- round trip ---- */

static void round_trip(rt_tensor *t) {
    uint8_t *b = NULL;
    size_t n = 0;
    ck_assert_int_eq(rt_npy_write_mem(t, &b, &n), MS_OK);
    rt_tensor *back = NULL;
    ck_assert_int_eq(rt_npy_read_mem(b, n, "mem", &back), MS_OK);
    ck_assert_msg(rt_tensor_equal(t, back), "round trip changed %s tensor",
                  rt_dtype_name(t->dtype));
    /* Data starts on a 64-byte boundary. */
    if (t->dtype != RT_DT_STRING) ck_assert_uint_eq((n - rt_tensor_nbytes(t)) % 64, 0);
    free(b);
    rt_tensor_unref(back);
    rt_tensor_unref(t);
}

START_TEST(test_round_trip_all_dtypes) {
    int64_t d23[] = {2, 3}, d4[] = {4}, d0[] = {0}, d3[] = {3, 1, 1};
    float f[] = {1.5f, -2.0f, 0.0f, 1e-20f, 3.25f, -0.5f};
    double d[] = {1.0 / 3, -1e300, 0.0, 2.5};
    int8_t i1[] = {-128, 0, 127, 5};
    int16_t i2[] = {-32768, 1, 32767, -2};
    int32_t i4[] = {-2147483647 - 1, 7, 2147483647};
    int64_t i8[] = {INT64_MIN, -1, INT64_MAX, 42};
    uint8_t u1[] = {0, 255, 7, 8};
    uint16_t u2[] = {0, 65535, 9, 10};
    uint32_t u4[] = {0, 4294967295u, 11, 12};
    uint64_t u8[] = {0, UINT64_MAX, 13, 14};
    uint8_t b1[] = {1, 0, 1, 1};
    uint16_t f2[] = {0x3C00, 0xC000, 0x7C00, 0x0001}; /* float16 1, -2, inf, 2^-24 */
    round_trip(util_cli_tensor(RT_DT_FLOAT, 2, d23, f));
    round_trip(util_cli_tensor(RT_DT_HALF, 1, d4, f2));
    round_trip(util_cli_tensor(RT_DT_DOUBLE, 1, d4, d));
    round_trip(util_cli_tensor(RT_DT_INT8, 1, d4, i1));
    round_trip(util_cli_tensor(RT_DT_INT16, 1, d4, i2));
    round_trip(util_cli_tensor(RT_DT_INT32, 3, d3, i4));
    round_trip(util_cli_tensor(RT_DT_INT64, 1, d4, i8));
    round_trip(util_cli_tensor(RT_DT_UINT8, 1, d4, u1));
    round_trip(util_cli_tensor(RT_DT_UINT16, 1, d4, u2));
    round_trip(util_cli_tensor(RT_DT_UINT32, 1, d4, u4));
    round_trip(util_cli_tensor(RT_DT_UINT64, 1, d4, u8));
    round_trip(util_cli_tensor(RT_DT_BOOL, 1, d4, b1));
    round_trip(util_cli_tensor(RT_DT_FLOAT, 0, NULL, f));
    round_trip(util_cli_tensor(RT_DT_FLOAT, 1, d0, NULL));
    rt_str s[] = {{(const uint8_t *)"ab", 2}, {(const uint8_t *)"c", 1}, {(const uint8_t *)"", 0}};
    rt_shape sh = rt_shape_make(1, (int64_t[]){3});
    rt_tensor *st = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &st), MS_OK);
    round_trip(st);
}
END_TEST

/* The header of a (3, 1) float32 array, derived by hand: the dict text is
 * 59 bytes; 10 + 59 + 1 = 70, padded with 58 spaces to 128, so the length
 * field says 118 and the data starts at byte 128. */
START_TEST(test_header_bytes_by_hand) {
    int64_t dims[] = {3, 1};
    float v[] = {2.5f, 3.0f, 4.5f};
    rt_tensor *t = util_cli_tensor(RT_DT_FLOAT, 2, dims, v);
    uint8_t *b;
    size_t n;
    ck_assert_int_eq(rt_npy_write_mem(t, &b, &n), MS_OK);
    ck_assert_uint_eq(n, 128 + 12);
    ck_assert_int_eq(memcmp(b, "\x93NUMPY\x01\x00", 8), 0);
    ck_assert_uint_eq(b[8], 118);
    ck_assert_uint_eq(b[9], 0);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1), }";
    ck_assert_int_eq(memcmp(b + 10, dict, strlen(dict)), 0);
    for (size_t i = 10 + strlen(dict); i < 127; i++) ck_assert_uint_eq(b[i], ' ');
    ck_assert_uint_eq(b[127], '\n');
    ck_assert_int_eq(memcmp(b + 128, v, 12), 0);
    free(b);
    rt_tensor_unref(t);
}
END_TEST

/* Our files byte-for-byte equal numpy.save's for the same arrays. */
START_TEST(test_bytes_equal_numpy) {
    make_tmp();
    char p[1200];
    int64_t d31[] = {3, 1}, d3[] = {3}, d20[] = {2, 0};
    float f[] = {2.5f, 3.0f, 4.5f};
    int64_t i8[] = {1, -2, 3};
    uint8_t b1[] = {1};
    rt_tensor *t[5];
    t[0] = util_cli_tensor(RT_DT_FLOAT, 2, d31, f);
    t[1] = util_cli_tensor(RT_DT_INT64, 1, d3, i8);
    t[2] = util_cli_tensor(RT_DT_BOOL, 0, NULL, b1);
    t[3] = util_cli_tensor(RT_DT_UINT16, 2, d20, NULL);
    rt_str s[] = {{(const uint8_t *)"ab", 2}, {(const uint8_t *)"c", 1}};
    rt_shape sh = rt_shape_make(1, (int64_t[]){2});
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &t[4]), MS_OK);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "ours%d.npy", i);
        ck_assert_int_eq(rt_npy_write_file(path_in(name, p, sizeof(p)), t[i]), MS_OK);
        rt_tensor_unref(t[i]);
    }
    ck_assert_int_eq(util_cli_python(g_dir,
                                     "import numpy as np\n"
                                     "np.save('np0.npy', np.array([[2.5],[3.0],[4.5]], "
                                     "dtype=np.float32))\n"
                                     "np.save('np1.npy', np.array([1,-2,3], dtype=np.int64))\n"
                                     "np.save('np2.npy', np.array(True))\n"
                                     "np.save('np3.npy', np.zeros((2,0), dtype=np.uint16))\n"
                                     "np.save('np4.npy', np.array([b'ab', b'c']))\n"),
                     0);
    for (int i = 0; i < 5; i++) {
        char name[32], q[1200];
        size_t na, nb;
        snprintf(name, sizeof(name), "ours%d.npy", i);
        char *a = util_cli_read_file(path_in(name, p, sizeof(p)), &na);
        snprintf(name, sizeof(name), "np%d.npy", i);
        char *b = util_cli_read_file(path_in(name, q, sizeof(q)), &nb);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_msg(na == nb && memcmp(a, b, na) == 0, "file %d differs from numpy's", i);
        free(a);
        free(b);
    }
    rm_tmp();
}
END_TEST

/* Files numpy writes (every supported dtype, big-endian, v2.0) read back with
 * the values numpy was given. */
START_TEST(test_read_numpy_files) {
    make_tmp();
    ck_assert_int_eq(
        util_cli_python(g_dir,
                        "import numpy as np\n"
                        "for c in ['f4','f8','i1','i2','i4','i8','u1','u2','u4','u8']:\n"
                        "    np.save(c + '.npy', np.array([[1, 2, 3], [4, 5, 100]], dtype=c))\n"
                        "np.save('b1.npy', np.array([True, False, True]))\n"
                        "np.save('be.npy', np.array([1, 256, -2], dtype='>i4'))\n"
                        "np.save('bef.npy', np.array([0.5, -3.0], dtype='>f8'))\n"
                        "np.save('neg.npy', np.array([-1.5, -7], dtype='f4'))\n"
                        "from numpy.lib import format as F\n"
                        "with open('v2.npy', 'wb') as f:\n"
                        "    F.write_array(f, np.arange(5, dtype='i2'), version=(2, 0))\n"),
        0);
    const struct {
        const char *file;
        rt_dtype dt;
    } cases[] = {
        {"f4", RT_DT_FLOAT},  {"f8", RT_DT_DOUBLE}, {"i1", RT_DT_INT8},  {"i2", RT_DT_INT16},
        {"i4", RT_DT_INT32},  {"i8", RT_DT_INT64},  {"u1", RT_DT_UINT8}, {"u2", RT_DT_UINT16},
        {"u4", RT_DT_UINT32}, {"u8", RT_DT_UINT64},
    };
    char p[1200], name[32];
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        rt_tensor *t = NULL;
        snprintf(name, sizeof(name), "%s.npy", cases[c].file);
        ck_assert_int_eq(rt_npy_read_file(path_in(name, p, sizeof(p)), &t), MS_OK);
        ck_assert_int_eq(t->dtype, cases[c].dt);
        ck_assert_int_eq(t->shape.rank, 2);
        ck_assert_int_eq(t->shape.dim[0], 2);
        ck_assert_int_eq(t->shape.dim[1], 3);
        const double want[] = {1, 2, 3, 4, 5, 100};
        for (int i = 0; i < 6; i++) {
            double v;
            switch (t->dtype) {
            case RT_DT_FLOAT: v = ((float *)t->data)[i]; break;
            case RT_DT_DOUBLE: v = ((double *)t->data)[i]; break;
            case RT_DT_INT8: v = ((int8_t *)t->data)[i]; break;
            case RT_DT_INT16: v = ((int16_t *)t->data)[i]; break;
            case RT_DT_INT32: v = ((int32_t *)t->data)[i]; break;
            case RT_DT_INT64: v = (double)((int64_t *)t->data)[i]; break;
            case RT_DT_UINT8: v = ((uint8_t *)t->data)[i]; break;
            case RT_DT_UINT16: v = ((uint16_t *)t->data)[i]; break;
            case RT_DT_UINT32: v = ((uint32_t *)t->data)[i]; break;
            default: v = (double)((uint64_t *)t->data)[i]; break;
            }
            ck_assert_msg(v == want[i], "%s[%d] = %g", cases[c].file, i, v);
        }
        rt_tensor_unref(t);
    }
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_npy_read_file(path_in("b1.npy", p, sizeof(p)), &t), MS_OK);
    ck_assert_int_eq(t->dtype, RT_DT_BOOL);
    ck_assert_int_eq(((uint8_t *)t->data)[0], 1);
    ck_assert_int_eq(((uint8_t *)t->data)[1], 0);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_npy_read_file(path_in("be.npy", p, sizeof(p)), &t), MS_OK);
    ck_assert_int_eq(t->dtype, RT_DT_INT32);
    ck_assert_int_eq(((int32_t *)t->data)[1], 256);
    ck_assert_int_eq(((int32_t *)t->data)[2], -2);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_npy_read_file(path_in("bef.npy", p, sizeof(p)), &t), MS_OK);
    ck_assert(((double *)t->data)[0] == 0.5 && ((double *)t->data)[1] == -3.0);
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_npy_read_file(path_in("v2.npy", p, sizeof(p)), &t), MS_OK);
    ck_assert_int_eq(t->dtype, RT_DT_INT16);
    ck_assert_int_eq(t->nelem, 5);
    ck_assert_int_eq(((int16_t *)t->data)[4], 4);
    rt_tensor_unref(t);
    rm_tmp();
}
END_TEST

START_TEST(test_fortran_order_rejected) {
    make_tmp();
    ck_assert_int_eq(util_cli_python(g_dir, "import numpy as np\n"
                                            "np.save('f.npy', np.asfortranarray(np.ones((2, 3), "
                                            "dtype='f4')))\n"),
                     0);
    char p[1200];
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_npy_read_file(path_in("f.npy", p, sizeof(p)), &t), MS_EINVAL);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "Fortran order"));
    rm_tmp();
}
END_TEST

/* A valid image with the dict text replaced. */
static ms_status read_with_header(const char *dict, size_t data_bytes) {
    uint8_t buf[512];
    size_t hl = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hl & 0xff);
    buf[9] = (uint8_t)(hl >> 8);
    memcpy(buf + 10, dict, hl);
    memset(buf + 10 + hl, 0, data_bytes);
    rt_tensor *t = NULL;
    ms_status st = rt_npy_read_mem(buf, 10 + hl + data_bytes, "test", &t);
    if (t) rt_tensor_unref(t);
    return st;
}

START_TEST(test_bad_files) {
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    ck_assert_int_eq(read_with_header(good, 8), MS_OK);
    /* Data too short / too long. */
    ck_assert_int_eq(read_with_header(good, 7), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "truncated"));
    ck_assert_int_eq(read_with_header(good, 9), MS_EINVAL);
    /* Unsupported or malformed descr. */
    ck_assert_int_eq(
        read_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8),
        MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "unsupported dtype"));
    ck_assert_int_eq(
        read_with_header("{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", 3),
        MS_EINVAL);
    ck_assert_int_eq(
        read_with_header("{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }", 4),
        MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                      "'shape': (1,), }",
                                      4),
                     MS_EINVAL);
    /* Missing / unknown / duplicate keys, bad values, junk. */
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'shape': (1,), }", 4), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "fortran_order"));
    ck_assert_int_eq(
        read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4),
        MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': "
                                      "False, 'shape': (1,)}",
                                      4),
                     MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 4),
                     MS_EINVAL);
    ck_assert_int_eq(
        read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4),
        MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2", 8),
                     MS_EINVAL);
    ck_assert_int_eq(
        read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4),
        MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                      "(4294967296, 4294967296, 4294967296), }",
                                      4),
                     MS_EINVAL);
    ck_assert_int_eq(read_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                      "(1,1,1,1,1,1,1,1,1), }",
                                      4),
                     MS_EINVAL);
    /* Bad magic, unknown version, header longer than the file. */
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_npy_read_mem("\x93NUMPZ\x01\x00\x00\x00", 10, "m", &t), MS_EINVAL);
    ck_assert_int_eq(rt_npy_read_mem("\x93NUMPY\x09\x00\x00\x00", 10, "m", &t), MS_EINVAL);
    ck_assert_int_eq(rt_npy_read_mem("\x93NUMPY\x01\x00\xff\x00{", 11, "m", &t), MS_EINVAL);
    ck_assert_int_eq(rt_npy_read_mem("\x93NU", 4, "m", &t), MS_EINVAL);
    ck_assert_ptr_null(t);
    /* A missing file is MS_ENOTFOUND. */
    ck_assert_int_eq(rt_npy_read_file("/nonexistent/dir/x.npy", &t), MS_ENOTFOUND);
}
END_TEST

/* Every single-byte corruption of a valid header either parses or fails
 * cleanly (the sanitizer build catches out-of-bounds reads). */
START_TEST(test_header_mutations) {
    int64_t dims[] = {2, 3};
    rt_tensor *t = util_cli_tensor(RT_DT_INT16, 2, dims, NULL);
    uint8_t *b;
    size_t n;
    ck_assert_int_eq(rt_npy_write_mem(t, &b, &n), MS_OK);
    rt_tensor_unref(t);
    const uint8_t vals[] = {0, '\'', '(', ')', ',', '}', '9', 0xff, ' ', 'L'};
    for (size_t i = 0; i < 128; i++) {
        for (size_t k = 0; k < sizeof(vals); k++) {
            uint8_t old = b[i];
            b[i] = vals[k];
            rt_tensor *r = NULL;
            ms_status st = rt_npy_read_mem(b, n, "mut", &r);
            if (st == MS_OK) {
                ck_assert_ptr_nonnull(r);
                rt_tensor_unref(r);
            } else {
                ck_assert_ptr_null(r);
            }
            b[i] = old;
        }
        /* Truncated at every length. */
        rt_tensor *r = NULL;
        ck_assert_int_ne(rt_npy_read_mem(b, i, "trunc", &r), MS_OK);
    }
    free(b);
}
END_TEST

START_TEST(test_npz) {
    make_tmp();
    ck_assert_int_eq(util_cli_python(g_dir, "import numpy as np\n"
                                            "a = np.array([[1.5], [2.0]], dtype='f4')\n"
                                            "b = np.arange(6, dtype='i8').reshape(2, 3)\n"
                                            "np.savez('two.npz', a=a, b=b)\n"
                                            "np.savez_compressed('twoc.npz', a=a, b=b)\n"
                                            "np.savez('one.npz', only=b)\n"),
                     0);
    char p[1200];
    const char *files[] = {"two.npz", "twoc.npz"};
    for (int f = 0; f < 2; f++) {
        path_in(files[f], p, sizeof(p));
        ck_assert(rt_npy_is_zip_file(p));
        rt_tensor *t = NULL;
        ck_assert_int_eq(rt_npz_read_file(p, "a", &t), MS_OK);
        ck_assert_int_eq(t->dtype, RT_DT_FLOAT);
        ck_assert_int_eq(t->shape.rank, 2);
        ck_assert(((float *)t->data)[0] == 1.5f && ((float *)t->data)[1] == 2.0f);
        rt_tensor_unref(t);
        ck_assert_int_eq(rt_npz_read_file(p, "b.npy", &t), MS_OK);
        ck_assert_int_eq(t->dtype, RT_DT_INT64);
        ck_assert_int_eq(((int64_t *)t->data)[5], 5);
        rt_tensor_unref(t);
        t = NULL;
        ck_assert_int_eq(rt_npz_read_file(p, "c", &t), MS_ENOTFOUND);
        ck_assert_ptr_nonnull(strstr(ms_errmsg(), "a, b"));
        ck_assert_int_eq(rt_npz_read_file(p, NULL, &t), MS_EINVAL);
        ck_assert_ptr_null(t);
    }
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_npz_read_file(path_in("one.npz", p, sizeof(p)), NULL, &t), MS_OK);
    ck_assert_int_eq(t->nelem, 6);
    rt_tensor_unref(t);
    /* An .npy file is not a zip. */
    ck_assert(!rt_npy_is_zip_file(path_in("script.py", p, sizeof(p))));
    ck_assert_int_eq(rt_npz_read_file(path_in("script.py", p, sizeof(p)), NULL, &t), MS_EINVAL);
    rm_tmp();
}
END_TEST

/* ---- numpy-style text ---- */

/* Python writes arrays and str(array) for each; our reader + formatter must
 * give the same text. */
START_TEST(test_npformat_matches_numpy) {
    make_tmp();
    static const char *script =
        "import numpy as np\n"
        "cases = [\n"
        "  np.array([[2.5], [3.0], [4.5]], dtype='f4'),\n"
        "  np.array([2.5], dtype='f4'),\n"
        "  np.array(4.0, dtype='f4'), np.array(0.0, dtype='f4'), np.array(1e-5, dtype='f4'),\n"
        "  np.array(1/3, dtype='f4'), np.array(-2.5e20), np.array(1/3),\n"
        "  np.array([0.1, 1/3, -7], dtype='f4'), np.array([0.1, 1/3, -7]),\n"
        "  np.array([1e-5, 1.0, -2.5e10], dtype='f4'), np.array([1e-5, 1.0]),\n"
        "  np.array([1e8, 2.5]), np.array([0.0, 0.0], dtype='f4'),\n"
        "  np.array([np.nan, 1.0, -np.inf]), np.array([np.inf, np.nan]),\n"
        "  np.arange(30, dtype='f4') * 1.5, np.arange(2000).reshape(2, 1000),\n"
        "  np.arange(24, dtype='i4').reshape(2, 3, 4) - 5,\n"
        "  np.arange(3000, dtype='f4').reshape(10, 300) / 7,\n"
        "  np.array([True, False]), np.array([True, True]), np.array(False),\n"
        "  np.array([b'ab', b'c', b\"x'y\", b'\\x00\\xff\\n']),\n"
        "  np.array([0, 255], dtype='u1'), np.array([2**64 - 1, 0], dtype='u8'),\n"
        "  np.array([-128, 5], dtype='i1'), np.zeros((2, 0), dtype='f4'),\n"
        "  np.array([[1.25, -100.5], [3, 4]], dtype='f8'),\n"
        "  np.array([123456.789, 0.001], dtype='f4'),\n"
        "  np.linspace(0, 1, 40).reshape(4, 10),\n"
        "]\n"
        "for i, a in enumerate(cases):\n"
        "    np.save('c%d.npy' % i, a)\n"
        "    open('c%d.txt' % i, 'w').write(str(a))\n"
        "open('count', 'w').write(str(len(cases)))\n";
    ck_assert_int_eq(util_cli_python(g_dir, script), 0);
    char p[1200];
    char *cnt = util_cli_read_file(path_in("count", p, sizeof(p)), NULL);
    ck_assert_ptr_nonnull(cnt);
    int n = atoi(cnt);
    free(cnt);
    ck_assert_int_gt(n, 20);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        rt_tensor *t = NULL;
        snprintf(name, sizeof(name), "c%d.npy", i);
        ck_assert_int_eq(rt_npy_read_file(path_in(name, p, sizeof(p)), &t), MS_OK);
        snprintf(name, sizeof(name), "c%d.txt", i);
        char *want = util_cli_read_file(path_in(name, p, sizeof(p)), NULL);
        char *got = cli_npformat(t);
        ck_assert_ptr_nonnull(want);
        ck_assert_ptr_nonnull(got);
        if (strcmp(want, got) != 0) {
            fprintf(stderr, "case %d differs:\n--- numpy\n%s\n--- ours\n%s\n", i, want, got);
            bad++;
        }
        free(want);
        free(got);
        rt_tensor_unref(t);
    }
    ck_assert_int_eq(bad, 0);
    rm_tmp();
}
END_TEST

static Suite *npy_suite(void) {
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("round_trip");
    tcase_add_test(tc, test_round_trip_all_dtypes);
    suite_add_tcase(s, tc);
    tc = tcase_create("bytes");
    tcase_add_test(tc, test_header_bytes_by_hand);
    tcase_add_test(tc, test_bytes_equal_numpy);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("read");
    tcase_add_test(tc, test_read_numpy_files);
    tcase_add_test(tc, test_fortran_order_rejected);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad_files");
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_header_mutations);
    suite_add_tcase(s, tc);
    tc = tcase_create("npz");
    tcase_add_test(tc, test_npz);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("npformat");
    tcase_add_test(tc, test_npformat_matches_numpy);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
