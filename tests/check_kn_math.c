/* check_kn_math.c - the ops of kernels/cpu/kn_cpu_math.c and BatchMatMulV3,
 * against TensorFlow's documented examples (tf.math.rint, tf.clip_by_value,
 * tf.math.cumsum, tf.linalg.band_part, tf.nn.depth_to_space /
 * space_to_depth) and values worked out by hand (libm identities such as
 * atan(1) = pi / 4). */
#include <check.h>
#include <math.h>

#include "util_node.h"

static rt_tensor *run_un(const char *op, rt_tensor *x) {
    return tu_run1(tu_node_new(op, op), &x, 1);
}

START_TEST(test_unary) {
    const double PI = 3.14159265358979323846;
    rt_tensor *x = TU_F32(TU_SHAPE(2), 0, 1), *o;
    o = run_un("Erfc", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 1, 0.15729920705f),
    rt_tensor_unref(o);
    o = run_un("Log1p", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)log(2.0)),
    rt_tensor_unref(o);
    o = run_un("Expm1", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)(exp(1.0) - 1)),
    rt_tensor_unref(o);
    o = run_un("Atan", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)(PI / 4)),
    rt_tensor_unref(o);
    o = run_un("Asin", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)(PI / 2)),
    rt_tensor_unref(o);
    o = run_un("Acos", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, (float)(PI / 2), 0),
    rt_tensor_unref(o);
    o = run_un("Sinh", x),
    TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)((exp(1.0) - exp(-1.0)) / 2)), rt_tensor_unref(o);
    o = run_un("Cosh", x),
    TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 1, (float)((exp(1.0) + exp(-1.0)) / 2)), rt_tensor_unref(o);
    o = run_un("Asinh", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, (float)log(1 + sqrt(2.0))),
    rt_tensor_unref(o);
    o = run_un("Softsign", x), TU_CHECK_F32(o, TU_SHAPE(2), 1e-6f, 0, 0.5f), rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F64(TU_SHAPE(2), 1, 2);
    o = run_un("Acosh", x), TU_CHECK_F64(o, TU_SHAPE(2), 1e-12, 0, log(2 + sqrt(3.0))),
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F64(TU_SHAPE(2), 0, 0.5);
    o = run_un("Atanh", x), TU_CHECK_F64(o, TU_SHAPE(2), 1e-12, 0, 0.5 * log(3.0)),
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* tf.math.rint's example: halves to even */
    x = TU_F32(TU_SHAPE(7), -1.7f, -1.5f, -0.2f, 0.2f, 1.5f, 1.7f, 2.0f);
    o = run_un("Rint", x), TU_CHECK_F32(o, TU_SHAPE(7), 0, -2, -2, -0, 0, 2, 2, 2),
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(4), 1, NAN, INFINITY, -INFINITY);
    o = run_un("IsNan", x), TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 0, 1, 0, 0),
    rt_tensor_unref(o);
    o = run_un("IsInf", x), TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 0, 0, 1, 1),
    rt_tensor_unref(o);
    o = run_un("IsFinite", x), TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 1, 0, 0, 0),
    rt_tensor_unref(o);
    tu_run_fail(tu_node_new("CheckNumerics", "cn"), &x, 1, 1, MS_EINVAL, "Tensor had");
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(1), 3);
    o = run_un("CheckNumerics", x), TU_CHECK_F32(o, TU_SHAPE(1), 0, 3), rt_tensor_unref(o);
    o = run_un("PreventGradient", x), TU_CHECK_F32(o, TU_SHAPE(1), 0, 3), rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_I32(TU_SHAPE(1), 1);
    tu_run_fail(tu_node_new("Log1p", "log1p_int"), &x, 1, 1, MS_ENOTSUP, "not supported");
    rt_tensor_unref(x);
    /* empty input */
    x = tu_t(RT_DT_FLOAT, TU_SHAPE(0), NULL, 0);
    o = run_un("Expm1", x), tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0)), rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_clip) {
    /* tf.clip_by_value's example */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(2, 3), -10, -1, 0, 0, 2, 10), TU_F32(TU_SCALAR, -1),
                        TU_F32(TU_SCALAR, 1)};
    rt_tensor *o = tu_run1(tu_node_new("ClipByValue", "clip"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, -1, -1, 0, 0, 1, 1);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    rt_tensor *ii[3] = {TU_I64(TU_SHAPE(3), -5, 5, 50), TU_I64(TU_SHAPE(3), 0, 6, 0),
                        TU_I64(TU_SCALAR, 10)};
    o = tu_run1(tu_node_new("ClipByValue", "clip_elem"), ii, 3);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(3), 0, 6, 10);
    rt_tensor_unref(o);
    rt_tensor_unref(ii[1]);
    ii[1] = TU_I64(TU_SHAPE(2), 0, 0);
    tu_run_fail(tu_node_new("ClipByValue", "clip_shape"), ii, 3, 1, MS_EINVAL, "scalar");
    tu_unref(ii, 3);
}
END_TEST

static rt_tensor *cum(const char *op, rt_tensor *x, int64_t axis, int excl, int rev) {
    Tensorflow__NodeDef *d = tu_node_new(op, "cum");
    tu_attr_b(d, "exclusive", excl);
    tu_attr_b(d, "reverse", rev);
    rt_tensor *in[2] = {x, TU_I32(TU_SCALAR, (int32_t)axis)};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(in[1]);
    return o;
}

START_TEST(test_cumsum) {
    /* tf.math.cumsum's examples over [1, 2, 3] (a, b, c) */
    rt_tensor *x = TU_F32(TU_SHAPE(3), 1, 2, 3), *o;
    o = cum("Cumsum", x, 0, 0, 0), TU_CHECK_F32(o, TU_SHAPE(3), 0, 1, 3, 6), rt_tensor_unref(o);
    o = cum("Cumsum", x, 0, 1, 0), TU_CHECK_F32(o, TU_SHAPE(3), 0, 0, 1, 3), rt_tensor_unref(o);
    o = cum("Cumsum", x, 0, 0, 1), TU_CHECK_F32(o, TU_SHAPE(3), 0, 6, 5, 3), rt_tensor_unref(o);
    o = cum("Cumsum", x, -1, 1, 1), TU_CHECK_F32(o, TU_SHAPE(3), 0, 5, 3, 0), rt_tensor_unref(o);
    o = cum("Cumprod", x, 0, 0, 0), TU_CHECK_F32(o, TU_SHAPE(3), 0, 1, 2, 6), rt_tensor_unref(o);
    o = cum("Cumprod", x, 0, 1, 0), TU_CHECK_F32(o, TU_SHAPE(3), 0, 1, 1, 2), rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_I64(TU_SHAPE(2, 2), 1, 2, 3, 4);
    o = cum("Cumsum", x, 0, 0, 0), TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2, 2), 1, 2, 4, 6),
    rt_tensor_unref(o);
    o = cum("Cumsum", x, 1, 1, 0), TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2, 2), 0, 1, 0, 3),
    rt_tensor_unref(o);
    rt_tensor *in[2] = {x, TU_I32(TU_SCALAR, 2)};
    tu_run_fail(tu_node_new("Cumsum", "cum_axis"), in, 2, 1, MS_EINVAL, "out of range");
    tu_unref(in, 2);
}
END_TEST

START_TEST(test_size_rank_band) {
    rt_tensor *x = tu_iota_f32(TU_SHAPE(2, 3, 4), 0, 1), *o;
    o = run_un("Rank", x), TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 3), rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("Size", "size64");
    tu_attr_type(d, "out_type", RT_DT_INT64);
    o = tu_run1(d, &x, 1), TU_CHECK_INT(o, RT_DT_INT64, TU_SCALAR, 24), rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* tf.linalg.band_part's example */
    rt_tensor *in[3] = {
        TU_F32(TU_SHAPE(4, 4), 0, 1, 2, 3, -1, 0, 1, 2, -2, -1, 0, 1, -3, -2, -1, 0),
        TU_I64(TU_SCALAR, 1), TU_I64(TU_SCALAR, -1)};
    o = tu_run1(tu_node_new("MatrixBandPart", "band"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(4, 4), 0, 0, 1, 2, 3, -1, 0, 1, 2, 0, -1, 0, 1, 0, 0, -1, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    rt_tensor_unref(in[2]);
    in[1] = TU_I64(TU_SCALAR, 2);
    in[2] = TU_I64(TU_SCALAR, 1);
    o = tu_run1(tu_node_new("MatrixBandPart", "band2"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(4, 4), 0, 0, 1, 0, 0, -1, 0, 1, 0, -2, -1, 0, 1, 0, -2, -1, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SCALAR, 5);
    tu_run_fail(tu_node_new("MatrixBandPart", "band_big"), in, 3, 1, MS_EINVAL, "num_lower");
    tu_unref(in, 3);
}
END_TEST

START_TEST(test_all_any) {
    rt_tensor *in[2] = {TU_BOOL(TU_SHAPE(2, 2), 1, 1, 0, 1), TU_I32(TU_SHAPE(1), 1)};
    rt_tensor *o = tu_run1(tu_node_new("All", "all"), in, 2);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(2), 1, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(1), 0);
    o = tu_run1(tu_node_new("Any", "any"), in, 2);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(2), 1, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(2), 0, 1);
    Tensorflow__NodeDef *d = tu_node_new("All", "all_keep");
    tu_attr_b(d, "keep_dims", 1);
    o = tu_run1(d, in, 2);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(1, 1), 0);
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

static rt_tensor *d2s(const char *op, rt_tensor *x, int64_t b) {
    Tensorflow__NodeDef *d = tu_node_new(op, op);
    tu_attr_i(d, "block_size", b);
    return tu_run1(d, &x, 1);
}

START_TEST(test_depth_to_space) {
    /* tf.nn.depth_to_space's examples */
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 1, 4), 1, 2, 3, 4), *o;
    o = d2s("DepthToSpace", x, 2), TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 1), 0, 1, 2, 3, 4);
    rt_tensor *back = d2s("SpaceToDepth", o, 2);
    TU_CHECK_F32(back, TU_SHAPE(1, 1, 1, 4), 0, 1, 2, 3, 4);
    tu_unref(&back, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(1, 1, 1, 12), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    o = d2s("DepthToSpace", x, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_I32(TU_SHAPE(1, 2, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    o = d2s("DepthToSpace", x, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(1, 4, 4, 1), 1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11,
                 12, 15, 16);
    back = d2s("SpaceToDepth", o, 2);
    TU_CHECK_INT(back, RT_DT_INT32, TU_SHAPE(1, 2, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                 14, 15, 16);
    rt_tensor_unref(back);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("DepthToSpace", "d2s_bad");
    tu_attr_i(d, "block_size", 3);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "divisible");
    rt_tensor_unref(x);
}
END_TEST

/* Assert: a true condition passes (no outputs); a false one fails with
 * INVALID_ARGUMENT "assertion failed: [d0] [d1] ...", each data tensor
 * printed as TensorFlow prints it, its first `summarize` values (3 by default). */
START_TEST(test_assert) {
    rt_tensor *msg = tu_strings(TU_SCALAR, (const char *const[]){"x must be positive:"}, 1);
    rt_tensor *x = TU_F32(TU_SHAPE(4), 1.5f, -2, 3, 4);
    rt_tensor *m2 = TU_I32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    rt_tensor *empty = tu_t(RT_DT_FLOAT, TU_SHAPE(0), (const float[]){0}, 0);
    rt_tensor *yes = TU_BOOL(TU_SCALAR, 1), *no = TU_BOOL(TU_SCALAR, 0);
    rt_tensor *in[5] = {yes, msg, x, m2, empty};
    Tensorflow__NodeDef *ok = tu_node_new("Assert", "ok");
    ck_assert_int_eq(tu_run(ok, in, 5, NULL, 0), MS_OK);
    tu_node_free(ok);
    in[0] = no;
    tu_run_fail(tu_node_new("Assert", "check_x"), in, 5, 0, MS_EINVAL,
                "assertion failed: [x must be positive:] [1.5 -2 3...] [[1 2][3...]] []");
    /* summarize 10 prints every value */
    Tensorflow__NodeDef *d = tu_node_new("Assert", "check_all");
    tu_attr_i(d, "summarize", 10);
    tu_run_fail(d, in, 4, 0, MS_EINVAL,
                "assertion failed: [x must be positive:] [1.5 -2 3 4] [[1 2][3 4]]");
    /* no data: the message alone */
    tu_run_fail(tu_node_new("Assert", "bare"), in, 1, 0, MS_EINVAL, "assertion failed: ");
    in[0] = x;
    tu_run_fail(tu_node_new("Assert", "bad_cond"), in, 1, 0, MS_EINVAL,
                "condition must be a bool scalar");
    rt_tensor *all[] = {msg, x, m2, empty, yes, no};
    tu_unref(all, 6);
}
END_TEST

START_TEST(test_batch_matmul_v3) {
    /* x [2, 2, 2] broadcast against y [2, 2]: batch 0 by hand, batch 1 = I y */
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(2, 2, 2), 1, 2, 3, 4, 1, 0, 0, 1),
                        TU_F32(TU_SHAPE(2, 2), 5, 6, 7, 8)};
    rt_tensor *o = tu_run1(tu_node_new("BatchMatMulV3", "bmm3"), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2), 0, 19, 22, 43, 50, 5, 6, 7, 8);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("BatchMatMulV3", "bmm3_adj");
    tu_attr_b(d, "adj_y", 1);
    o = tu_run1(d, in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2), 0, 17, 23, 39, 53, 5, 7, 6, 8);
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"unary", test_unary},
        {"clip", test_clip},
        {"cumsum", test_cumsum},
        {"size_rank_band", test_size_rank_band},
        {"all_any", test_all_any},
        {"depth_to_space", test_depth_to_space},
        {"batch_matmul_v3", test_batch_matmul_v3},
        {"assert", test_assert},
    };
    return tu_suite_main("kn_math", cases, sizeof(cases) / sizeof(cases[0]));
}
