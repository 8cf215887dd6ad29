/* check_kn_sparse.c - SparseReshape, SparseFillEmptyRows, RaggedTensorToTensor
 * (kernels/cpu/kn_cpu_sparse.c) and StringToHashBucketFast / Strong
 * (kernels/cpu/kn_cpu_hash.c).
 *
 * The sparse and ragged cases are the examples of TensorFlow's op
 * documentation (tf.sparse.reshape, tf.sparse.fill_empty_rows,
 * tf.RaggedTensor.to_tensor) or worked out by hand from it. The hash buckets
 * of "Hello", "TensorFlow", "2.x" (fast: [0, 2, 2]) and of "Hello", "TF"
 * (strong, key [1, 2]: [2, 0]) are the examples of TensorFlow's
 * tf.strings.to_hash_bucket_fast / _strong pages; the full 64-bit values
 * (taken modulo 2^63 - 1 here) of strings of each length class of
 * FarmHash (0-16, 17-32, 33-64, > 64 bytes) were computed with an
 * independent FarmHash Fingerprint64 and SipHash-2-4 (the npm packages
 * farmhash-modern 1.1.0 and siphash 1.2.0; the 17- and 19-byte ones also
 * with farmhash 5.0.1, a build of FarmHash's own C++), not with this code. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "util_node.h"

/* tu_run of a node made for this one call; the node is freed after. */
static ms_status run_new(const char *op, const char *name, rt_tensor *const *in, int nin,
                         rt_tensor **out, int nout) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    ms_status st = tu_run(d, in, nin, out, nout);
    tu_node_free(d);
    return st;
}

/* ---- SparseReshape ---- */

START_TEST(test_sparse_reshape) {
    /* tf.sparse.reshape's example: shape [2, 3, 6] -> [9, -1] = [9, 4] */
    rt_tensor *in[3] = {TU_I64(TU_SHAPE(5, 3), 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 2, 3),
                        TU_I64(TU_SHAPE(3), 2, 3, 6), TU_I64(TU_SHAPE(2), 9, -1)};
    rt_tensor *o[2];
    ck_assert_int_eq(run_new("SparseReshape", "sr", in, 3, o, 2), MS_OK);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(5, 2), 0, 0, 0, 1, 1, 2, 4, 2, 8, 1);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(2), 9, 4);
    tu_unref(o, 2);
    /* two unknown dims, a size mismatch, an index outside the old shape */
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(2), -1, -1);
    tu_run_fail(tu_node_new("SparseReshape", "sr_2unk"), in, 3, 2, MS_EINVAL, "only one");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(2), 5, 5);
    tu_run_fail(tu_node_new("SparseReshape", "sr_size"), in, 3, 2, MS_EINVAL, "36 dense values");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(2), 9, 4);
    rt_tensor_unref(in[0]);
    in[0] = TU_I64(TU_SHAPE(1, 3), 0, 3, 0);
    tu_run_fail(tu_node_new("SparseReshape", "sr_oob"), in, 3, 2, MS_EINVAL,
                "indices[0, 1] = 3 is not in [0, 3)");
    /* no entries: an empty index matrix keeps its shape [0, 2] */
    rt_tensor_unref(in[0]);
    in[0] = tu_t(RT_DT_INT64, TU_SHAPE(0, 3), NULL, 0);
    ck_assert_int_eq(run_new("SparseReshape", "sr_empty", in, 3, o, 2), MS_OK);
    tu_check_shape(o[0], RT_DT_INT64, TU_SHAPE(0, 2));
    tu_unref(o, 2);
    tu_unref(in, 3);
}
END_TEST

/* ---- SparseFillEmptyRows ---- */

START_TEST(test_fill_empty_rows) {
    /* tf.sparse.fill_empty_rows' example: rows 1 and 4 of [5, 6] are empty */
    rt_tensor *in[4] = {TU_I64(TU_SHAPE(4, 2), 0, 1, 0, 3, 2, 0, 3, 1),
                        TU_I64(TU_SHAPE(4), 10, 20, 30, 40), TU_I64(TU_SHAPE(2), 5, 6),
                        TU_I64(TU_SCALAR, -1)};
    rt_tensor *o[4];
    ck_assert_int_eq(run_new("SparseFillEmptyRows", "fe", in, 4, o, 4), MS_OK);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(6, 2), 0, 1, 0, 3, 1, 0, 2, 0, 3, 1, 4, 0);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(6), 10, 20, -1, 30, 40, -1);
    TU_CHECK_INT(o[2], RT_DT_BOOL, TU_SHAPE(5), 0, 1, 0, 0, 1);
    TU_CHECK_INT(o[3], RT_DT_INT64, TU_SHAPE(4), 0, 1, 3, 4);
    tu_unref(o, 4);
    /* a row index outside dense_shape[0] */
    rt_tensor_unref(in[0]);
    in[0] = TU_I64(TU_SHAPE(4, 2), 0, 1, 0, 3, 5, 0, 3, 1);
    tu_run_fail(tu_node_new("SparseFillEmptyRows", "fe_oob"), in, 4, 4, MS_EINVAL,
                "indices(2, 0) is invalid");
    tu_unref(in, 4);
    /* no entries at all: every row gets the default; strings are copied */
    const char *dflt[] = {"oov"};
    rt_tensor *e[4] = {tu_t(RT_DT_INT64, TU_SHAPE(0, 2), NULL, 0), tu_strings(TU_SHAPE(0), NULL, 0),
                       TU_I64(TU_SHAPE(2), 2, 3), tu_strings(TU_SCALAR, dflt, 1)};
    ck_assert_int_eq(run_new("SparseFillEmptyRows", "fe_empty", e, 4, o, 4), MS_OK);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(2, 2), 0, 0, 1, 0);
    tu_check_shape(o[1], RT_DT_STRING, TU_SHAPE(2));
    for (int i = 0; i < 2; i++) {
        const rt_str *sv = rt_tensor_strs(o[1]);
        ck_assert_uint_eq(sv[i].len, 3);
        ck_assert_int_eq(memcmp(sv[i].data, "oov", 3), 0);
    }
    TU_CHECK_INT(o[2], RT_DT_BOOL, TU_SHAPE(2), 1, 1);
    tu_check_shape(o[3], RT_DT_INT64, TU_SHAPE(0));
    tu_unref(o, 4);
    tu_unref(e, 4);
}
END_TEST

/* ---- RaggedTensorToTensor ---- */

static Tensorflow__NodeDef *ragged_node(const char *name, int n, const char *const *types) {
    Tensorflow__NodeDef *d = tu_node_new("RaggedTensorToTensor", name);
    tu_attr_slist(d, "row_partition_types", n, types);
    tu_attr_i(d, "num_row_partition_tensors", n);
    return d;
}

START_TEST(test_ragged_to_tensor) {
    /* tf.RaggedTensor.to_tensor's example: [[9, 8, 7], [], [6, 5], [4]] */
    const char *splits[] = {"ROW_SPLITS"}, *rowids[] = {"FIRST_DIM_SIZE", "VALUE_ROWIDS"};
    rt_tensor *in[5] = {TU_I64(TU_SCALAR, -1), TU_I32(TU_SHAPE(6), 9, 8, 7, 6, 5, 4),
                        TU_I32(TU_SCALAR, 0), TU_I64(TU_SHAPE(5), 0, 3, 3, 5, 6), NULL};
    rt_tensor *o = tu_run1(ragged_node("r_splits", 1, splits), in, 4);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(4, 3), 9, 8, 7, 0, 0, 0, 6, 5, 0, 4, 0, 0);
    rt_tensor_unref(o);
    /* a shape cuts and pads: [2, 2]; [-1, 4] keeps all rows, pads to 4 */
    rt_tensor_unref(in[0]);
    in[0] = TU_I64(TU_SHAPE(2), 2, 2);
    o = tu_run1(ragged_node("r_cut", 1, splits), in, 4);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 9, 8, 0, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(in[0]);
    in[0] = TU_I64(TU_SHAPE(2), -1, 4);
    o = tu_run1(ragged_node("r_pad", 1, splits), in, 4);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(4, 4), 9, 8, 7, 0, 0, 0, 0, 0, 6, 5, 0, 0, 4, 0, 0, 0);
    rt_tensor_unref(o);
    /* the same ragged tensor as FIRST_DIM_SIZE + VALUE_ROWIDS */
    rt_tensor_unref(in[0]);
    rt_tensor_unref(in[3]);
    in[0] = TU_I64(TU_SCALAR, -1);
    in[3] = TU_I64(TU_SCALAR, 4);
    in[4] = TU_I64(TU_SHAPE(6), 0, 0, 0, 2, 2, 3);
    o = tu_run1(ragged_node("r_rowids", 2, rowids), in, 5);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(4, 3), 9, 8, 7, 0, 0, 0, 6, 5, 0, 4, 0, 0);
    rt_tensor_unref(o);
    /* rowids past FIRST_DIM_SIZE, unsorted rowids, decreasing splits */
    rt_tensor_unref(in[4]);
    in[4] = TU_I64(TU_SHAPE(6), 0, 0, 0, 2, 2, 4);
    tu_run_fail(ragged_node("r_bad_rowid", 2, rowids), in, 5, 1, MS_EINVAL, "[5] = 4");
    rt_tensor_unref(in[4]);
    in[4] = TU_I64(TU_SHAPE(6), 0, 2, 0, 2, 2, 3);
    tu_run_fail(ragged_node("r_unsorted", 2, rowids), in, 5, 1, MS_EINVAL, "sorted");
    rt_tensor_unref(in[3]);
    rt_tensor_unref(in[4]);
    in[4] = NULL;
    in[3] = TU_I64(TU_SHAPE(5), 0, 3, 2, 5, 6);
    tu_run_fail(ragged_node("r_decr", 1, splits), in, 4, 1, MS_EINVAL, "decreases");
    tu_unref(in, 5);
}
END_TEST

START_TEST(test_ragged_nested) {
    /* [[[1, 2], [3]], [[4]]]: two ragged levels -> [2, 2, 2] */
    const char *splits2[] = {"ROW_SPLITS", "ROW_SPLITS"};
    rt_tensor *in[5] = {TU_I64(TU_SCALAR, -1), TU_F32(TU_SHAPE(4), 1, 2, 3, 4),
                        TU_F32(TU_SCALAR, 0), TU_I64(TU_SHAPE(3), 0, 2, 3),
                        TU_I64(TU_SHAPE(4), 0, 2, 3, 4)};
    rt_tensor *o = tu_run1(ragged_node("r_nested", 2, splits2), in, 5);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2), 0, 1, 2, 3, 0, 4, 0, 0, 0);
    rt_tensor_unref(o);
    tu_unref(in, 5);
    /* uniform inner dims: values [3, 2], rows [2, 0, 1], default [7, 8]
     * broadcast to each missing row */
    const char *splits[] = {"ROW_SPLITS"};
    rt_tensor *v[4] = {TU_I64(TU_SCALAR, -1), TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6),
                       TU_F32(TU_SHAPE(2), 7, 8), TU_I32(TU_SHAPE(4), 0, 2, 2, 3)};
    o = tu_run1(ragged_node("r_inner", 1, splits), v, 4);
    TU_CHECK_F32(o, TU_SHAPE(3, 2, 2), 0, 1, 2, 3, 4, 7, 8, 7, 8, 5, 6, 7, 8);
    rt_tensor_unref(o);
    /* a default that does not broadcast to [2] */
    rt_tensor_unref(v[2]);
    v[2] = TU_F32(TU_SHAPE(3), 7, 8, 9);
    tu_run_fail(ragged_node("r_bad_dflt", 1, splits), v, 4, 1, MS_EINVAL, "broadcast");
    tu_unref(v, 4);
    /* no rows at all */
    rt_tensor *z[4] = {TU_I64(TU_SCALAR, -1), tu_t(RT_DT_FLOAT, TU_SHAPE(0), NULL, 0),
                       TU_F32(TU_SCALAR, 0), TU_I64(TU_SHAPE(1), 0)};
    o = tu_run1(ragged_node("r_zero", 1, splits), z, 4);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 0));
    rt_tensor_unref(o);
    tu_unref(z, 4);
}
END_TEST

/* ---- StringToHashBucketFast / Strong ---- */

static Tensorflow__NodeDef *hash_node(const char *op, const char *name, int64_t buckets) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    tu_attr_i(d, "num_buckets", buckets);
    if (op[18] == 'S') tu_attr_ints(d, "key", 1, 2); /* StringToHashBucketStrong */
    return d;
}

START_TEST(test_hash_bucket_docs) {
    const char *s3[] = {"Hello", "TensorFlow", "2.x"}, *s2[] = {"Hello", "TF"};
    rt_tensor *a = tu_strings(TU_SHAPE(3), s3, 3), *b = tu_strings(TU_SHAPE(2), s2, 2);
    rt_tensor *o = tu_run1(hash_node("StringToHashBucketFast", "hf", 3), &a, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(3), 0, 2, 2);
    rt_tensor_unref(o);
    o = tu_run1(hash_node("StringToHashBucketStrong", "hs", 3), &b, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2), 2, 0);
    rt_tensor_unref(o);
    tu_run_fail(hash_node("StringToHashBucketFast", "hf_zero", 0), &a, 1, 1, MS_EINVAL,
                "num_buckets");
    rt_tensor *num = TU_F32(TU_SHAPE(1), 1);
    tu_run_fail(hash_node("StringToHashBucketFast", "hf_num", 3), &num, 1, 1, MS_EINVAL, "string");
    rt_tensor_unref(num);
    /* an empty batch */
    rt_tensor *e = tu_strings(TU_SHAPE(0), NULL, 0);
    o = tu_run1(hash_node("StringToHashBucketFast", "hf_empty", 3), &e, 1);
    tu_check_shape(o, RT_DT_INT64, TU_SHAPE(0));
    rt_tensor_unref(o);
    tu_unref(&e, 1);
    rt_tensor_unref(a);
    rt_tensor_unref(b);
}
END_TEST

START_TEST(test_hash_bucket_lengths) {
    const char *s[] = {
        "",
        "a",
        "abcdefgh",
        "0123456789abcdefXYZ",
        "The quick brown fox jumps over the lazy dog",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
        "The quick brown fox jumps over the lazy dog. 0123456789 abcdefghijklmnopqrstuvwxyz "
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ!",
    };
    rt_tensor *x = tu_strings(TU_SHAPE(8), s, 8);
    rt_tensor *o = tu_run1(hash_node("StringToHashBucketFast", "hf_len", INT64_MAX), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(8), 1936946117179621456LL, 3694432073954588132LL,
                 9145071594317031690LL, 4324627561306006267LL, 3152101869897863477LL,
                 6916188127298655160LL, 4023130470993650269LL, 5123605712246234137LL);
    rt_tensor_unref(o);
    o = tu_run1(hash_node("StringToHashBucketStrong", "hs_len", INT64_MAX), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(8), 443797209252341628LL, 5158252350249958646LL,
                 2649018002260510109LL, 5245182634520094738LL, 4761918157535839729LL,
                 7638880622090919837LL, 3504868468111526114LL, 4419492361627186650LL);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"sparse_reshape", test_sparse_reshape},
        {"fill_empty_rows", test_fill_empty_rows},
        {"ragged_to_tensor", test_ragged_to_tensor},
        {"ragged_nested", test_ragged_nested},
        {"hash_bucket_docs", test_hash_bucket_docs},
        {"hash_bucket_lengths", test_hash_bucket_lengths},
    };
    return tu_suite_main("kn_sparse", cases, sizeof(cases) / sizeof(cases[0]));
}
