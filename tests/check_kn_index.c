/* check_kn_index.c - CPU kernels of kn_cpu_index.c (TopKV2, OneHot,
 * Bucketize, GatherNd, BroadcastTo, EnsureShape) and the trigonometric
 * unary ops (Cos, Sin, Tan). Expected values are worked out by hand; the
 * OneHot, Bucketize, GatherNd and BroadcastTo cases are the examples of
 * TensorFlow's API documentation for tf.one_hot, tf.raw_ops.Bucketize,
 * tf.gather_nd and tf.broadcast_to. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_opdefs.h"
#include "util_node.h"

#define S TU_SHAPE

START_TEST(topk) {
    /* rows [1,3,2,3] and [5,4,6,0], k=2: the tie 3/3 goes to the lower index */
    rt_tensor *in[2] = {TU_F32(S(2, 4), 1, 3, 2, 3, 5, 4, 6, 0), TU_I32(TU_SCALAR, 2)};
    rt_tensor *o[2] = {NULL, NULL};
    Tensorflow__NodeDef *d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(tu_run(d, in, 2, o, 2), MS_OK);
    TU_CHECK_F32(o[0], S(2, 2), 0, 3, 3, 6, 5);
    TU_CHECK_INT(o[1], RT_DT_INT32, S(2, 2), 1, 3, 2, 0);
    tu_unref(o, 2);
    tu_node_free(d);
    /* int64 indices asked for; k = 0 gives empty rows */
    d = tu_node_new("TopKV2", "top");
    tu_attr_type(d, "index_type", RT_DT_INT64);
    ((int32_t *)in[1]->data)[0] = 0;
    ck_assert_int_eq(tu_run(d, in, 2, o, 2), MS_OK);
    tu_check_shape(o[0], RT_DT_FLOAT, S(2, 0));
    tu_check_shape(o[1], RT_DT_INT64, S(2, 0));
    tu_unref(o, 2);
    tu_node_free(d);
    /* k larger than the row; negative k */
    ((int32_t *)in[1]->data)[0] = 5;
    tu_run_fail(tu_node_new("TopKV2", "bad_top"), in, 2, 2, MS_EINVAL, "Had 4, needed 5");
    ((int32_t *)in[1]->data)[0] = -1;
    tu_run_fail(tu_node_new("TopKV2", "bad_top"), in, 2, 2, MS_EINVAL, "k >= 0");
    tu_unref(in, 2);
    /* 64-bit integers compare exactly: 2^63 + 1 above 2^63 (equal as
     * doubles, which would keep index order), int64 -2^62 - 1 below -2^62 */
    const uint64_t two63 = (uint64_t)1 << 63;
    rt_tensor *big[2] = {tu_t(RT_DT_UINT64, S(3), TU_NV(uint64_t, two63, two63 + 1, 5)),
                         TU_I32(TU_SCALAR, 2)};
    d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(tu_run(d, big, 2, o, 2), MS_OK);
    ck_assert_uint_eq(((uint64_t *)o[0]->data)[0], two63 + 1);
    ck_assert_uint_eq(((uint64_t *)o[0]->data)[1], two63);
    TU_CHECK_INT(o[1], RT_DT_INT32, S(2), 1, 0);
    tu_unref(o, 2);
    tu_node_free(d);
    rt_tensor_unref(big[0]);
    big[0] = TU_I64(S(3), -((int64_t)1 << 62) - 1, -((int64_t)1 << 62), -5);
    d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(tu_run(d, big, 2, o, 2), MS_OK);
    TU_CHECK_INT(o[0], RT_DT_INT64, S(2), -5, -((int64_t)1 << 62));
    TU_CHECK_INT(o[1], RT_DT_INT32, S(2), 2, 1);
    tu_unref(o, 2);
    tu_node_free(d);
    tu_unref(big, 2);
    /* int32 values, no rows at all */
    rt_tensor *in2[2] = {TU_I32(S(3), 7, -2, 9), TU_I64(TU_SCALAR, 1)};
    d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(tu_run(d, in2, 2, o, 2), MS_OK);
    TU_CHECK_INT(o[0], RT_DT_INT32, S(1), 9);
    TU_CHECK_INT(o[1], RT_DT_INT32, S(1), 2);
    tu_unref(o, 2);
    tu_node_free(d);
    tu_unref(in2, 2);
    rt_tensor *in3[2] = {tu_t(RT_DT_FLOAT, S(0, 4), NULL, 0), TU_I32(TU_SCALAR, 2)};
    d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(tu_run(d, in3, 2, o, 2), MS_OK);
    tu_check_shape(o[0], RT_DT_FLOAT, S(0, 2));
    tu_unref(o, 2);
    tu_node_free(d);
    tu_unref(in3, 2);
}
END_TEST

START_TEST(one_hot) {
    /* tf.one_hot([0, 2, -1, 1], 3, 5.0, 0.0): -1 is out of range -> all off */
    rt_tensor *in[4] = {TU_I32(S(4), 0, 2, -1, 1), TU_I32(TU_SCALAR, 3),
                        TU_F32(TU_SCALAR, 5), TU_F32(TU_SCALAR, 0)};
    rt_tensor *o = tu_run1(tu_node_new("OneHot", "oh"), in, 4);
    TU_CHECK_F32(o, S(4, 3), 0, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0);
    rt_tensor_unref(o);
    /* axis 0: the depth axis first, (3, 4) */
    Tensorflow__NodeDef *d = tu_node_new("OneHot", "oh");
    tu_attr_i(d, "axis", 0);
    o = tu_run1(d, in, 4);
    TU_CHECK_F32(o, S(3, 4), 0, 5, 0, 0, 0, 0, 0, 0, 5, 0, 5, 0, 0);
    rt_tensor_unref(o);
    /* index equal to depth is out of range too */
    ((int32_t *)in[0]->data)[0] = 3;
    o = tu_run1(tu_node_new("OneHot", "oh"), in, 4);
    TU_CHECK_F32(o, S(4, 3), 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = -1;
    tu_run_fail(tu_node_new("OneHot", "bad_oh"), in, 4, 1, MS_EINVAL, "non-negative");
    ((int32_t *)in[1]->data)[0] = 3;
    d = tu_node_new("OneHot", "bad_oh");
    tu_attr_i(d, "axis", 3);
    tu_run_fail(d, in, 4, 1, MS_EINVAL, "axis");
    tu_unref(in, 4);
    /* empty indices: (0, depth) */
    rt_tensor *in2[4] = {tu_t(RT_DT_INT64, S(0), NULL, 0), TU_I32(TU_SCALAR, 2),
                         TU_I32(TU_SCALAR, 1), TU_I32(TU_SCALAR, 0)};
    o = tu_run1(tu_node_new("OneHot", "oh"), in2, 4);
    tu_check_shape(o, RT_DT_INT32, S(0, 2));
    rt_tensor_unref(o);
    tu_unref(in2, 4);
}
END_TEST

START_TEST(bucketize) {
    /* boundaries [0, 10, 100]: [[-5, 10000], [150, 10], [5, 100]] ->
     * [[0, 3], [3, 2], [1, 3]] (a value on a boundary goes to the bucket above) */
    rt_tensor *x = TU_I32(S(3, 2), -5, 10000, 150, 10, 5, 100);
    Tensorflow__NodeDef *d = tu_node_new("Bucketize", "b");
    tu_attr_flist(d, "boundaries", 3, (const float[]){0, 10, 100});
    rt_tensor *o = tu_run1(d, &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(3, 2), 0, 3, 3, 2, 1, 3);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* floats, no boundaries at all -> bucket 0 */
    x = TU_F32(S(2), -1.5f, 0.25f);
    d = tu_node_new("Bucketize", "b");
    tu_attr_flist(d, "boundaries", 1, (const float[]){0.25f});
    o = tu_run1(d, &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 0, 1);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("Bucketize", "b"), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 0, 0);
    rt_tensor_unref(o);
    /* unsorted boundaries fail at prepare */
    d = tu_node_new("Bucketize", "bad_b");
    tu_attr_flist(d, "boundaries", 2, (const float[]){3, 1});
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "sorted");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(gather_nd) {
    /* params [[1,2],[3,4]]: indices [[0,0],[1,1]] -> [1,4]; [[1],[0]] -> rows */
    rt_tensor *in[2] = {TU_F32(S(2, 2), 1, 2, 3, 4), TU_I32(S(2, 2), 0, 0, 1, 1)};
    rt_tensor *o = tu_run1(tu_node_new("GatherNd", "g"), in, 2);
    TU_CHECK_F32(o, S(2), 0, 1, 4);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(S(2, 1), 1, 0);
    o = tu_run1(tu_node_new("GatherNd", "g"), in, 2);
    TU_CHECK_F32(o, S(2, 2), 0, 3, 4, 1, 2);
    rt_tensor_unref(o);
    /* batch of index tuples (2,1,2) -> (2,1) */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(2, 1, 2), 0, 1, 1, 0);
    o = tu_run1(tu_node_new("GatherNd", "g"), in, 2);
    TU_CHECK_F32(o, S(2, 1), 0, 2, 3);
    rt_tensor_unref(o);
    /* out of range: named with its position and the params shape */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(2, 2), 0, 0, 0, 2);
    tu_run_fail(tu_node_new("GatherNd", "bad_g"), in, 2, 1, MS_EINVAL,
                "indices[1] = [0,2] does not index into param shape [2,2]");
    ((int32_t *)in[1]->data)[3] = -1;
    tu_run_fail(tu_node_new("GatherNd", "bad_g"), in, 2, 1, MS_EINVAL, "[0,-1]");
    /* index depth beyond the params rank */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(1, 3), 0, 0, 0);
    tu_run_fail(tu_node_new("GatherNd", "bad_g"), in, 2, 1, MS_EINVAL, "<= params rank");
    /* no index tuples */
    rt_tensor_unref(in[1]);
    in[1] = tu_t(RT_DT_INT32, S(0, 2), NULL, 0);
    o = tu_run1(tu_node_new("GatherNd", "g"), in, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(0));
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

START_TEST(broadcast_to) {
    /* [1,2,3] to (3,3): the row repeated */
    rt_tensor *in[2] = {TU_I32(S(3), 1, 2, 3), TU_I32(S(2), 3, 3)};
    rt_tensor *o = tu_run1(tu_node_new("BroadcastTo", "bt"), in, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(3, 3), 1, 2, 3, 1, 2, 3, 1, 2, 3);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    /* a column (3,1) to (2,3,2): each value twice, the whole twice */
    rt_tensor *in2[2] = {TU_F32(S(3, 1), 1, 2, 3), TU_I64(S(3), 2, 3, 2)};
    o = tu_run1(tu_node_new("BroadcastTo", "bt"), in2, 2);
    TU_CHECK_F32(o, S(2, 3, 2), 0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
    rt_tensor_unref(o);
    /* incompatible: 3 against 2 */
    rt_tensor_unref(in2[1]);
    in2[1] = TU_I32(S(2), 2, 2);
    tu_run_fail(tu_node_new("BroadcastTo", "bad_bt"), in2, 2, 1, MS_EINVAL,
                "Unable to broadcast tensor of shape [3,1] to tensor of shape [2,2]");
    /* to an empty shape (a new leading dim of 0) */
    rt_tensor_unref(in2[1]);
    in2[1] = TU_I32(S(3), 0, 3, 1);
    o = tu_run1(tu_node_new("BroadcastTo", "bt"), in2, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 3, 1));
    rt_tensor_unref(o);
    tu_unref(in2, 2);
}
END_TEST

START_TEST(ensure_shape) {
    rt_tensor *x = tu_iota_f32(S(2, 3), 0, 1);
    Tensorflow__NodeDef *d = tu_node_new("EnsureShape", "es");
    tu_attr_shape(d, "shape", 2, (const int64_t[]){-1, 3});
    rt_tensor *o = tu_run1(d, &x, 1);
    ck_assert_ptr_eq(o, x); /* passes the input through */
    rt_tensor_unref(o);
    d = tu_node_new("EnsureShape", "es");
    tu_attr_shape(d, "shape", -1, NULL);
    o = tu_run1(d, &x, 1);
    ck_assert_ptr_eq(o, x);
    rt_tensor_unref(o);
    d = tu_node_new("EnsureShape", "bad_es");
    tu_attr_shape(d, "shape", 2, (const int64_t[]){3, 3});
    tu_run_fail(d, &x, 1, 1, MS_EINVAL,
                "Shape of tensor bad_es [2,3] is not compatible with expected shape [3,3]");
    d = tu_node_new("EnsureShape", "bad_es");
    tu_attr_shape(d, "shape", 1, (const int64_t[]){6});
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "expected shape [6]");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(trig) {
    const double pi = 3.14159265358979323846;
    rt_tensor *x = TU_F32(S(3), 0, (float)(pi / 2), (float)pi);
    rt_tensor *o = tu_run1(tu_node_new("Cos", "c"), &x, 1);
    TU_CHECK_F32(o, S(3), 1e-6f, 1, 0, -1);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("Sin", "s"), &x, 1);
    TU_CHECK_F32(o, S(3), 1e-6f, 0, 1, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor *y = TU_F64(S(2), pi / 4, -pi / 4);
    o = tu_run1(tu_node_new("Tan", "t"), &y, 1);
    TU_CHECK_F64(o, S(2), 1e-12, 1, -1);
    rt_tensor_unref(o);
    rt_tensor_unref(y);
}
END_TEST

START_TEST(segments) {
    /* tf.math.segment_sum's example: rows 0 and 1 into segment 0 */
    rt_tensor *in[3] = {TU_I32(S(3, 4), 1, 2, 3, 4, 4, 3, 2, 1, 5, 6, 7, 8),
                        TU_I32(S(3), 0, 0, 1), TU_I32(TU_SCALAR, 2)};
    rt_tensor *o = tu_run1(tu_node_new("SegmentSum", "ss"), in, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 4), 5, 5, 5, 5, 5, 6, 7, 8);
    rt_tensor_unref(o);
    tu_unref(&in[1], 1);
    in[1] = TU_I64(S(3), 1, 0, 0);
    tu_run_fail(tu_node_new("SegmentSum", "bad_ss"), in, 2, 1, MS_EINVAL, "not increasing");
    /* tf.math.unsorted_segment_sum's example: ids [0, 1, 0], 2 segments */
    ((int64_t *)in[1]->data)[0] = 0;
    ((int64_t *)in[1]->data)[1] = 1;
    o = tu_run1(tu_node_new("UnsortedSegmentSum", "us"), in, 3);
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 4), 6, 8, 10, 12, 4, 3, 2, 1);
    rt_tensor_unref(o);
    /* a negative id drops its row; an id >= num_segments is an error */
    ((int64_t *)in[1]->data)[1] = -1;
    o = tu_run1(tu_node_new("UnsortedSegmentSum", "us"), in, 3);
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 4), 6, 8, 10, 12, 0, 0, 0, 0);
    rt_tensor_unref(o);
    ((int64_t *)in[1]->data)[1] = 2;
    tu_run_fail(tu_node_new("UnsortedSegmentSum", "bad_us"), in, 3, 1, MS_EINVAL,
                "segment_ids[1] = 2 is out of range [0, 2)");
    tu_unref(in, 3);
    /* empty data: all-zero segments */
    rt_tensor *in2[3] = {tu_t(RT_DT_FLOAT, S(0, 2), NULL, 0), tu_t(RT_DT_INT32, S(0), NULL, 0),
                         TU_I32(TU_SCALAR, 1)};
    o = tu_run1(tu_node_new("UnsortedSegmentSum", "us"), in2, 3);
    TU_CHECK_F32(o, S(1, 2), 0, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("SegmentSum", "ss"), in2, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 2));
    rt_tensor_unref(o);
    tu_unref(in2, 3);
}
END_TEST

START_TEST(scatter_nd) {
    /* tf.scatter_nd's example: [4],[3],[1],[7] <- 9,10,11,12 into 8 zeros */
    rt_tensor *in[3] = {TU_I32(S(4, 1), 4, 3, 1, 7), TU_F32(S(4), 9, 10, 11, 12),
                        TU_I32(S(1), 8)};
    rt_tensor *o = tu_run1(tu_node_new("ScatterNd", "sn"), in, 3);
    TU_CHECK_F32(o, S(8), 0, 0, 11, 0, 10, 9, 0, 0, 12);
    rt_tensor_unref(o);
    /* duplicates add up */
    ((int32_t *)in[0]->data)[1] = 4;
    o = tu_run1(tu_node_new("ScatterNd", "sn"), in, 3);
    TU_CHECK_F32(o, S(8), 0, 0, 11, 0, 0, 19, 0, 0, 12);
    rt_tensor_unref(o);
    ((int32_t *)in[0]->data)[2] = 8;
    tu_run_fail(tu_node_new("ScatterNd", "bad_sn"), in, 3, 1, MS_EINVAL, "out of range [0, 8)");
    tu_unref(in, 3);
    /* rows into a (3, 2) matrix; updates of the wrong shape */
    rt_tensor *in2[3] = {TU_I64(S(2, 1), 2, 0), TU_I32(S(2, 2), 1, 2, 3, 4), TU_I32(S(2), 3, 2)};
    o = tu_run1(tu_node_new("ScatterNd", "sn"), in2, 3);
    TU_CHECK_INT(o, RT_DT_INT32, S(3, 2), 3, 4, 0, 0, 1, 2);
    rt_tensor_unref(o);
    rt_tensor_unref(in2[2]);
    in2[2] = TU_I32(S(2), 3, 3);
    tu_run_fail(tu_node_new("ScatterNd", "bad_sn"), in2, 3, 1, MS_EINVAL, "updates shape [2,2]");
    tu_unref(in2, 3);
}
END_TEST

START_TEST(where) {
    /* [[true, false], [false, true]] -> [[0, 0], [1, 1]] */
    rt_tensor *x = TU_BOOL(S(2, 2), 1, 0, 0, 1);
    rt_tensor *o = tu_run1(tu_node_new("Where", "w"), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, S(2, 2), 0, 0, 1, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* floats: -0.0 counts as zero; a 3-d input gives 3 coordinates per row */
    x = TU_F32(S(1, 2, 2), 0, -0.0f, 2.5f, -1);
    o = tu_run1(tu_node_new("Where", "w"), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, S(2, 3), 0, 1, 0, 0, 1, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* nothing true; an empty input */
    x = TU_I32(S(3), 0, 0, 0);
    o = tu_run1(tu_node_new("Where", "w"), &x, 1);
    tu_check_shape(o, RT_DT_INT64, S(0, 1));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = tu_t(RT_DT_BOOL, S(0, 4), NULL, 0);
    o = tu_run1(tu_node_new("Where", "w"), &x, 1);
    tu_check_shape(o, RT_DT_INT64, S(0, 2));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

/* A string tensor of the given C strings. */
static rt_tensor *strs(rt_shape sh, const char *const *v, int n) {
    rt_str sv[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++) sv[i] = (rt_str){(const uint8_t *)v[i], strlen(v[i])};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, sv, &t), MS_OK);
    return t;
}

START_TEST(string_to_number) {
    rt_tensor *x = strs(S(4), (const char *[]){"1.5", " -2 ", "1e3", "0"}, 4);
    rt_tensor *o = tu_run1(tu_node_new("StringToNumber", "sn"), &x, 1);
    TU_CHECK_F32(o, S(4), 0, 1.5f, -2, 1000, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = strs(S(2), (const char *[]){"2147483647", "-7"}, 2);
    Tensorflow__NodeDef *d = tu_node_new("StringToNumber", "sn");
    tu_attr_type(d, "out_type", RT_DT_INT32);
    o = tu_run1(d, &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 2147483647, -7);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* int32 overflow; trailing junk; an empty string; the value is not echoed */
    x = strs(S(1), (const char *[]){"2147483648"}, 1);
    d = tu_node_new("StringToNumber", "bad_sn");
    tu_attr_type(d, "out_type", RT_DT_INT32);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL,
                "could not correctly convert string 0 (10 bytes) to DT_INT32");
    rt_tensor_unref(x);
    x = strs(S(2), (const char *[]){"4", "4x"}, 2);
    tu_run_fail(tu_node_new("StringToNumber", "bad_sn"), &x, 1, 1, MS_EINVAL, "string 1 (2 bytes)");
    rt_tensor_unref(x);
    x = strs(S(1), (const char *[]){""}, 1);
    d = tu_node_new("StringToNumber", "bad_sn");
    tu_attr_type(d, "out_type", RT_DT_INT64);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "to DT_INT64");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(sparse_to_dense) {
    /* (0,1)=5 and (2,0)=7 in a (3,2) of -1 */
    rt_tensor *in[4] = {TU_I64(S(2, 2), 0, 1, 2, 0), TU_I32(S(2), 3, 2), TU_F32(S(2), 5, 7),
                        TU_F32(TU_SCALAR, -1)};
    rt_tensor *o = tu_run1(tu_node_new("SparseToDense", "sd"), in, 4);
    TU_CHECK_F32(o, S(3, 2), 0, -1, 5, -1, -1, 7, -1);
    rt_tensor_unref(o);
    /* out of order: rejected unless validate_indices is false */
    int64_t *ix = in[0]->data;
    ix[0] = 2, ix[1] = 0, ix[2] = 0, ix[3] = 1;
    tu_run_fail(tu_node_new("SparseToDense", "bad_sd"), in, 4, 1, MS_EINVAL, "out of order");
    Tensorflow__NodeDef *d = tu_node_new("SparseToDense", "sd");
    tu_attr_b(d, "validate_indices", 0);
    o = tu_run1(d, in, 4);
    TU_CHECK_F32(o, S(3, 2), 0, -1, 7, -1, -1, 5, -1);
    rt_tensor_unref(o);
    ix[0] = 3;
    tu_run_fail(tu_node_new("SparseToDense", "bad_sd"), in, 4, 1, MS_EINVAL, "out of bounds");
    tu_unref(in, 4);
    /* vector indices, one scalar value for all */
    rt_tensor *in2[4] = {TU_I32(S(2), 1, 3), TU_I32(S(1), 4), TU_I32(TU_SCALAR, 9),
                         TU_I32(TU_SCALAR, 0)};
    o = tu_run1(tu_node_new("SparseToDense", "sd"), in2, 4);
    TU_CHECK_INT(o, RT_DT_INT32, S(4), 0, 9, 0, 9);
    rt_tensor_unref(o);
    tu_unref(in2, 4);
}
END_TEST

START_TEST(opdefs) {
    /* function bodies name outputs "top:indices:0": the built-in table knows them */
    Tensorflow__NodeDef *d = tu_node_new("TopKV2", "top");
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "TopKV2", d), 2);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TopKV2", d, "values"), 0);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TopKV2", d, "indices"), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "Cos", d, "y"), 0);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "Tan", d, "z"), -1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "Where", d, "index"), 0);
    tu_node_free(d);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"topk", topk},
        {"one_hot", one_hot},
        {"bucketize", bucketize},
        {"gather_nd", gather_nd},
        {"broadcast_to", broadcast_to},
        {"ensure_shape", ensure_shape},
        {"trig", trig},
        {"segments", segments},
        {"scatter_nd", scatter_nd},
        {"where", where},
        {"string_to_number", string_to_number},
        {"sparse_to_dense", sparse_to_dense},
        {"opdefs", opdefs},
    };
    return tu_suite_main("kn_index", cases, sizeof(cases) / sizeof(cases[0]));
}
