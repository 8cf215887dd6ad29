/* check_kn_reduce.c - CPU reduce-group kernels: Sum/Mean/Max/Min/Prod,
 * Softmax, MatMul, BiasAdd, ArgMax/ArgMin. Expected values worked out by
 * hand in the comments. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "util_node.h"

#define S TU_SHAPE

/* op(x, axes) with keep_dims; unrefs axes, keeps x. */
static rt_tensor *red(const char *op, rt_tensor *x, rt_tensor *axes, int keep) {
    Tensorflow__NodeDef *d = tu_node_new(op, "red");
    if (keep >= 0) tu_attr_b(d, "keep_dims", keep);
    rt_tensor *in[2] = {x, axes};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(axes);
    return o;
}

START_TEST(sum_mean) {
    /* x = [[1,2,3],[4,5,6]] */
    rt_tensor *x = TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), *o;
    o = red("Sum", x, TU_I32(TU_SCALAR, 0), -1); /* columns: [5,7,9] */
    TU_CHECK_F32(o, S(3), 0, 5, 7, 9);
    rt_tensor_unref(o);
    o = red("Sum", x, TU_I32(S(1), 1), 0); /* rows: [6,15] */
    TU_CHECK_F32(o, S(2), 0, 6, 15);
    rt_tensor_unref(o);
    o = red("Sum", x, TU_I64(S(1), -1), 1); /* keep_dims: (2,1) */
    TU_CHECK_F32(o, S(2, 1), 0, 6, 15);
    rt_tensor_unref(o);
    o = red("Sum", x, TU_I32(S(2), 0, 1), 0); /* all: 21 */
    TU_CHECK_F32(o, TU_SCALAR, 0, 21);
    rt_tensor_unref(o);
    o = red("Mean", x, TU_I32(S(1), 1), 0); /* [6/3, 15/3] = [2,5] */
    TU_CHECK_F32(o, S(2), 0, 2, 5);
    rt_tensor_unref(o);
    o = red("Mean", x, TU_I32(S(2), 1, 0), 1); /* 21/6 = 3.5, shape (1,1) */
    TU_CHECK_F32(o, S(1, 1), 0, 3.5f);
    rt_tensor_unref(o);
    o = red("Sum", x, tu_t(RT_DT_INT32, S(0), NULL, 0), 0); /* no axes: unchanged */
    TU_CHECK_F32(o, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(max_min_prod) {
    rt_tensor *x = TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), *o;
    o = red("Max", x, TU_I32(TU_SCALAR, 0), 0); /* [4,5,6] */
    TU_CHECK_F32(o, S(3), 0, 4, 5, 6);
    rt_tensor_unref(o);
    o = red("Min", x, TU_I32(TU_SCALAR, 1), 0); /* [1,4] */
    TU_CHECK_F32(o, S(2), 0, 1, 4);
    rt_tensor_unref(o);
    o = red("Prod", x, TU_I32(TU_SCALAR, 1), 0); /* [1*2*3, 4*5*6] = [6,120] */
    TU_CHECK_F32(o, S(2), 0, 6, 120);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor *xi = TU_I32(S(2, 2), 1, 2, 3, 5);
    o = red("Sum", xi, TU_I32(TU_SCALAR, 0), 0); /* [4,7] */
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 4, 7);
    rt_tensor_unref(o);
    o = red("Mean", xi, TU_I32(TU_SCALAR, 1), 0); /* integer mean: [3/2, 8/2] = [1,4] */
    TU_CHECK_INT(o, RT_DT_INT32, S(2), 1, 4);
    rt_tensor_unref(o);
    o = red("Max", xi, TU_I32(S(2), 0, 1), 0); /* 5 */
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 5);
    rt_tensor_unref(o);
    rt_tensor_unref(xi);
}
END_TEST

START_TEST(reduce_layouts) {
    /* NHWC global average pool: (1,2,2,2) with channel 0 = 1,2,3,4 and
     * channel 1 = 10,20,30,40 -> means 2.5 and 25, keep_dims (1,1,1,2). */
    rt_tensor *x = TU_F32(S(1, 2, 2, 2), 1, 10, 2, 20, 3, 30, 4, 40);
    rt_tensor *o = red("Mean", x, TU_I32(S(2), 1, 2), 1);
    TU_CHECK_F32(o, S(1, 1, 1, 2), 0, 2.5f, 25);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* (2,3,2) iota summed over the middle axis: out[i][k] = sum_j (6i + 2j + k)
     * = 18i + 6 + 3k -> [[6,9],[24,27]] */
    x = tu_iota_f32(S(2, 3, 2), 0, 1);
    o = red("Sum", x, TU_I32(S(1), 1), 0);
    TU_CHECK_F32(o, S(2, 2), 0, 6, 9, 24, 27);
    rt_tensor_unref(o);
    /* outer and inner reduced, middle kept: for each j, sum over i, k in {0,1}
     * of (6i + 2j + k) = (6 + 6) + 4 * 2j + (1 + 1) = 8j + 14 */
    o = red("Sum", x, TU_I32(S(2), 0, 2), 0);
    TU_CHECK_F32(o, S(3), 0, 14, 22, 30);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* (64, 1000) of ones summed over axis 1 -> 1000 each (parallel rows) */
    x = tu_iota_f32(S(64, 1000), 1, 0);
    o = red("Sum", x, TU_I32(S(1), 1), 0);
    tu_check_shape(o, RT_DT_FLOAT, S(64));
    for (int i = 0; i < 64; i++)
        ck_assert_float_eq(rt_tensor_f32(o)[i], 1000);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(reduce_errors) {
    rt_tensor *in[2] = {TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), TU_I32(S(1), 2)};
    tu_run_fail(tu_node_new("Sum", "bad_sum"), in, 2, 1, MS_EINVAL, "out of range");
    tu_unref(in, 2);
}
END_TEST

START_TEST(softmax) {
    /* row [1,2,3]: e^-2, e^-1, 1 = 0.1353353, 0.3678794, 1 (sum 1.5032147)
     * -> 0.0900306, 0.2447285, 0.6652410; rows [0,0] and [1000,1000] -> 0.5 */
    rt_tensor *x = TU_F32(S(3, 3), 1, 2, 3, 0, 0, 0, 1000, 1000, 1000);
    rt_tensor *o = tu_run1(tu_node_new("Softmax", "sm"), &x, 1);
    float third = 1.0f / 3;
    TU_CHECK_F32(o, S(3, 3), 1e-5f, 0.0900306f, 0.2447285f, 0.6652410f, third, third, third, third,
                 third, third);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F32(TU_SCALAR, 1);
    tu_run_fail(tu_node_new("Softmax", "bad_sm"), &x, 1, 1, MS_EINVAL, "rank");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(matmul) {
    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]:
     * 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64, 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154 */
    rt_tensor *a = TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), *b = TU_F32(S(3, 2), 7, 8, 9, 10, 11, 12);
    rt_tensor *at = TU_F32(S(3, 2), 1, 4, 2, 5, 3, 6), *bt = TU_F32(S(2, 3), 7, 9, 11, 8, 10, 12);
    rt_tensor *cases[4][2] = {{a, b}, {at, b}, {a, bt}, {at, bt}};
    for (int i = 0; i < 4; i++) {
        Tensorflow__NodeDef *d = tu_node_new("MatMul", "mm");
        tu_attr_b(d, "transpose_a", i & 1);
        tu_attr_b(d, "transpose_b", (i >> 1) & 1);
        rt_tensor *o = tu_run1(d, cases[i], 2);
        TU_CHECK_F32(o, S(2, 2), 0, 58, 64, 139, 154);
        rt_tensor_unref(o);
    }
    rt_tensor *dd[2] = {TU_F64(S(1, 2), 1, 2), TU_F64(S(2, 1), 3, 4)}; /* 1*3 + 2*4 = 11 */
    rt_tensor *o = tu_run1(tu_node_new("MatMul", "mm"), dd, 2);
    TU_CHECK_F64(o, S(1, 1), 0, 11);
    rt_tensor_unref(o);
    tu_unref(dd, 2);
    rt_tensor *bad[2] = {a, a}; /* (2,3) x (2,3) */
    tu_run_fail(tu_node_new("MatMul", "bad_mm"), bad, 2, 1, MS_EINVAL, "inner");
    rt_tensor_unref(a);
    rt_tensor_unref(b);
    rt_tensor_unref(at);
    rt_tensor_unref(bt);
}
END_TEST

START_TEST(batch_matmul) {
    /* x (2,1,2) = [[1,2]], [[3,4]] times y (2,1) = [[5],[6]] for both batches:
     * 1*5 + 2*6 = 17, 3*5 + 4*6 = 39 */
    rt_tensor *in[2] = {TU_F32(S(2, 1, 2), 1, 2, 3, 4), TU_F32(S(2, 1), 5, 6)};
    rt_tensor *o = tu_run1(tu_node_new("BatchMatMulV2", "bmm"), in, 2);
    TU_CHECK_F32(o, S(2, 1, 1), 0, 17, 39);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    /* batch dims (2,1) x (1,3) -> (2,3): a0 = [1,2], a1 = [3,4];
     * b0 = [1,0], b1 = [0,1], b2 = [1,1]: a_i . b_j = [1,2,3], [3,4,7] */
    rt_tensor *in2[2] = {TU_F32(S(2, 1, 1, 2), 1, 2, 3, 4),
                         TU_F32(S(1, 3, 2, 1), 1, 0, 0, 1, 1, 1)};
    o = tu_run1(tu_node_new("BatchMatMulV2", "bmm"), in2, 2);
    TU_CHECK_F32(o, S(2, 3, 1, 1), 0, 1, 2, 3, 3, 4, 7);
    rt_tensor_unref(o);
    tu_run_fail(tu_node_new("BatchMatMul", "bad_bmm"), in2, 2, 1, MS_EINVAL, "batch");
    tu_unref(in2, 2);
    /* adj_x: [[1,2],[3,4]]^T [1,1]^T = [4,6]; adj_y: [[1,2],[3,4]] ([[1,1]])^T = [3,7] */
    rt_tensor *in3[2] = {TU_F32(S(1, 2, 2), 1, 2, 3, 4), TU_F32(S(1, 2, 1), 1, 1)};
    Tensorflow__NodeDef *d = tu_node_new("BatchMatMulV2", "bmm");
    tu_attr_b(d, "adj_x", 1);
    o = tu_run1(d, in3, 2);
    TU_CHECK_F32(o, S(1, 2, 1), 0, 4, 6);
    rt_tensor_unref(o);
    rt_tensor_unref(in3[1]);
    in3[1] = TU_F32(S(1, 1, 2), 1, 1);
    d = tu_node_new("BatchMatMul", "bmm");
    tu_attr_b(d, "adj_y", 1);
    o = tu_run1(d, in3, 2);
    TU_CHECK_F32(o, S(1, 2, 1), 0, 3, 7);
    rt_tensor_unref(o);
    tu_unref(in3, 2);
}
END_TEST

START_TEST(log_softmax) {
    /* [1,2,3]: x - 3 - ln(e^-2 + e^-1 + 1) = x - 3 - 0.4076059 */
    rt_tensor *x = TU_F32(S(1, 3), 1, 2, 3);
    rt_tensor *o = tu_run1(tu_node_new("LogSoftmax", "ls"), &x, 1);
    TU_CHECK_F32(o, S(1, 3), 1e-5f, -2.4076059f, -1.4076059f, -0.4076059f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(bias_add) {
    rt_tensor *in[2] = {TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), TU_F32(S(3), 10, 20, 30)};
    rt_tensor *o = tu_run1(tu_node_new("BiasAdd", "b"), in, 2);
    TU_CHECK_F32(o, S(2, 3), 0, 11, 22, 33, 14, 25, 36);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    /* NCHW (1,2,2,2) iota + [100,200]: channel 0 = 0..3, channel 1 = 4..7 */
    rt_tensor *in2[2] = {tu_iota_f32(S(1, 2, 2, 2), 0, 1), TU_F32(S(2), 100, 200)};
    Tensorflow__NodeDef *d = tu_node_new("BiasAdd", "b");
    tu_attr_s(d, "data_format", "NCHW");
    o = tu_run1(d, in2, 2);
    TU_CHECK_F32(o, S(1, 2, 2, 2), 0, 100, 101, 102, 103, 204, 205, 206, 207);
    rt_tensor_unref(o);
    /* NHWC on the same tensor: last dim is 2 as well -> +100/+200 alternating */
    o = tu_run1(tu_node_new("BiasAdd", "b"), in2, 2);
    TU_CHECK_F32(o, S(1, 2, 2, 2), 0, 100, 201, 102, 203, 104, 205, 106, 207);
    rt_tensor_unref(o);
    /* int32 [[1,2],[3,INT32_MAX]] + [10, 1]: the last one wraps to INT32_MIN */
    rt_tensor *ii[2] = {TU_I32(S(2, 2), 1, 2, 3, INT32_MAX), TU_I32(S(2), 10, 1)};
    o = tu_run1(tu_node_new("BiasAdd", "b"), ii, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 2), 11, 3, 13, INT32_MIN);
    rt_tensor_unref(o);
    tu_unref(ii, 2);
    /* BiasAddV1 has no data_format: always the last dimension */
    o = tu_run1(tu_node_new("BiasAddV1", "b"), in2, 2);
    TU_CHECK_F32(o, S(1, 2, 2, 2), 0, 100, 201, 102, 203, 104, 205, 106, 207);
    rt_tensor_unref(o);
    rt_tensor_unref(in2[1]);
    in2[1] = TU_F32(S(3), 1, 2, 3);
    tu_run_fail(tu_node_new("BiasAdd", "bad_bias"), in2, 2, 1, MS_EINVAL, "bias length");
    d = tu_node_new("BiasAdd", "bad_fmt");
    tu_attr_s(d, "data_format", "NDHWC");
    tu_run_fail(d, in2, 2, 1, MS_EINVAL, "data_format");
    tu_unref(in2, 2);
}
END_TEST

START_TEST(argmax) {
    /* [[1,5,3],[7,2,7]]: row maxima at 1 and 0 (first of the tied 7s);
     * column maxima rows [1,0,1]; row minima [0,1] */
    rt_tensor *in[2] = {TU_F32(S(2, 3), 1, 5, 3, 7, 2, 7), TU_I32(TU_SCALAR, 1)};
    rt_tensor *o = tu_run1(tu_node_new("ArgMax", "am"), in, 2);
    TU_CHECK_INT(o, RT_DT_INT64, S(2), 1, 0);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("ArgMin", "am"), in, 2);
    TU_CHECK_INT(o, RT_DT_INT64, S(2), 0, 1);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = 0;
    Tensorflow__NodeDef *d = tu_node_new("ArgMax", "am");
    tu_attr_type(d, "output_type", RT_DT_INT32);
    o = tu_run1(d, in, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(3), 1, 0, 1);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = 2;
    tu_run_fail(tu_node_new("ArgMax", "bad_argmax"), in, 2, 1, MS_EINVAL, "out of range");
    tu_unref(in, 2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_reduce");
    struct {
        const char *name;
        const TTest *t;
    } tests[] = {
        {"sum_mean", sum_mean},         {"max_min_prod", max_min_prod},
        {"layouts", reduce_layouts},    {"errors", reduce_errors},
        {"softmax", softmax},           {"matmul", matmul},
        {"bias_add", bias_add},         {"argmax", argmax},
        {"batch_matmul", batch_matmul}, {"log_softmax", log_softmax},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_test(tc, tests[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
