/* check_kn_shape.c - CPU shape kernels: views (Reshape, Squeeze, ExpandDims),
 * ConcatV2, Pack, Transpose, Pad/PadV2/MirrorPad, Shape, Fill, Slice,
 * StridedSlice, Split, SplitV, Tile; the ONNX forms OnnxSlice, OnnxPad,
 * OnnxSqueeze, OnnxUnsqueeze and OnnxResize. Expected values worked out by
 * hand. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "util_node.h"

#define S TU_SHAPE

/* Runs op on inputs (which it unrefs) and returns output 0. */
static rt_tensor *run(Tensorflow__NodeDef *d, rt_tensor **in, int nin) {
    rt_tensor *o = tu_run1(d, in, nin);
    tu_unref(in, nin);
    return o;
}

START_TEST(reshape) {
    /* (2,3) -> [3,-1] = (3,2), same order of values; shape input int64. */
    rt_tensor *in[2] = {TU_F32(S(2, 3), 0, 1, 2, 3, 4, 5), TU_I64(S(2), 3, -1)};
    rt_tensor *o = run(tu_node_new("Reshape", "r"), in, 2);
    TU_CHECK_F32(o, S(3, 2), 0, 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    /* to a scalar with an empty shape */
    rt_tensor *in2[2] = {TU_I32(S(1, 1), 42), tu_t(RT_DT_INT32, S(0), NULL, 0)};
    o = run(tu_node_new("Reshape", "r"), in2, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 42);
    rt_tensor_unref(o);
    /* errors: two -1; 6 values into 4 */
    rt_tensor *x = TU_F32(S(2, 3), 0, 1, 2, 3, 4, 5);
    rt_tensor *in3[2] = {x, TU_I32(S(2), -1, -1)};
    tu_run_fail(tu_node_new("Reshape", "bad_reshape"), in3, 2, 1, MS_EINVAL, "-1");
    rt_tensor_unref(in3[1]);
    in3[1] = TU_I32(S(1), 4);
    tu_run_fail(tu_node_new("Reshape", "bad_reshape"), in3, 2, 1, MS_EINVAL, "(4)");
    tu_unref(in3, 2);
}
END_TEST

START_TEST(squeeze_expand) {
    rt_tensor *x = tu_iota_f32(S(1, 2, 1, 3), 0, 1);
    rt_tensor *o = tu_run1(tu_node_new("Squeeze", "sq"), &x, 1);
    TU_CHECK_F32(o, S(2, 3), 0, 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("Squeeze", "sq");
    tu_attr_ints(d, "squeeze_dims", -2); /* dim 2 */
    o = tu_run1(d, &x, 1);
    tu_check_shape(o, RT_DT_FLOAT, S(1, 2, 3));
    rt_tensor_unref(o);
    d = tu_node_new("Squeeze", "bad_sq");
    tu_attr_ints(d, "squeeze_dims", 1); /* size 2 */
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "not 1");
    rt_tensor_unref(x);

    rt_tensor *in[2] = {TU_F32(S(2, 3), 0, 1, 2, 3, 4, 5), TU_I32(TU_SCALAR, 0)};
    o = tu_run1(tu_node_new("ExpandDims", "e"), in, 2);
    TU_CHECK_F32(o, S(1, 2, 3), 0, 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = -1;
    o = tu_run1(tu_node_new("ExpandDims", "e"), in, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(2, 3, 1));
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = 3;
    tu_run_fail(tu_node_new("ExpandDims", "bad_e"), in, 2, 1, MS_EINVAL, "out of range");
    tu_unref(in, 2);
}
END_TEST

START_TEST(concat) {
    /* [[1,2],[3,4]] ++ [[5],[6]] along axis 1 (given as -1) = [[1,2,5],[3,4,6]] */
    rt_tensor *in[3] = {TU_F32(S(2, 2), 1, 2, 3, 4), TU_F32(S(2, 1), 5, 6), TU_I32(TU_SCALAR, -1)};
    Tensorflow__NodeDef *d = tu_node_new("ConcatV2", "c");
    tu_attr_i(d, "N", 2);
    rt_tensor *o = tu_run1(d, in, 3);
    TU_CHECK_F32(o, S(2, 3), 0, 1, 2, 5, 3, 4, 6);
    rt_tensor_unref(o);
    /* along axis 0 with (1,2) [7,8]: rows appended */
    rt_tensor *in2[3] = {in[0], TU_F32(S(1, 2), 7, 8), TU_I64(TU_SCALAR, 0)};
    o = tu_run1(tu_node_new("ConcatV2", "c"), in2, 3);
    TU_CHECK_F32(o, S(3, 2), 0, 1, 2, 3, 4, 7, 8);
    rt_tensor_unref(o);
    /* (2,2) and (2,1) along axis 0: widths differ */
    rt_tensor *in3[3] = {in[0], in[1], in2[2]};
    tu_run_fail(tu_node_new("ConcatV2", "bad_concat"), in3, 3, 1, MS_EINVAL, "does not match");
    tu_unref(in, 3);
    rt_tensor_unref(in2[1]);
    rt_tensor_unref(in2[2]);
}
END_TEST

START_TEST(concat_v1_unpack) {
    /* Concat takes the axis first: [[1,2]] ++ [[3,4]] on axis 1 = [[1,2,3,4]] */
    rt_tensor *in[3] = {TU_I32(TU_SCALAR, 1), TU_F32(S(1, 2), 1, 2), TU_F32(S(1, 2), 3, 4)};
    rt_tensor *o = tu_run1(tu_node_new("Concat", "c"), in, 3);
    TU_CHECK_F32(o, S(1, 4), 0, 1, 2, 3, 4);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* Unpack (2,3) = [[0,1,2],[3,4,5]] on axis 1: columns [0,3], [1,4], [2,5] */
    rt_tensor *x = tu_iota_f32(S(2, 3), 0, 1);
    Tensorflow__NodeDef *d = tu_node_new("Unpack", "u");
    tu_attr_i(d, "num", 3);
    tu_attr_i(d, "axis", 1);
    rt_tensor *outs[3] = {0};
    ck_assert_int_eq(tu_run(d, &x, 1, outs, 3), MS_OK);
    TU_CHECK_F32(outs[0], S(2), 0, 0, 3);
    TU_CHECK_F32(outs[1], S(2), 0, 1, 4);
    TU_CHECK_F32(outs[2], S(2), 0, 2, 5);
    tu_unref(outs, 3);
    tu_node_free(d);
    /* axis 0 into 2 outputs: the rows */
    d = tu_node_new("Unpack", "u");
    tu_attr_i(d, "num", 2);
    ck_assert_int_eq(tu_run(d, &x, 1, outs, 2), MS_OK);
    TU_CHECK_F32(outs[0], S(3), 0, 0, 1, 2);
    TU_CHECK_F32(outs[1], S(3), 0, 3, 4, 5);
    tu_unref(outs, 2);
    tu_node_free(d);
    d = tu_node_new("Unpack", "bad_unpack");
    tu_attr_i(d, "num", 3);
    tu_run_fail(d, &x, 1, 3, MS_EINVAL, "num");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(pack) {
    rt_tensor *in[2] = {TU_I32(S(2), 1, 2), TU_I32(S(2), 3, 4)};
    Tensorflow__NodeDef *d = tu_node_new("Pack", "p");
    tu_attr_i(d, "N", 2);
    rt_tensor *o = tu_run1(d, in, 2); /* axis 0: [[1,2],[3,4]] */
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 2), 1, 2, 3, 4);
    rt_tensor_unref(o);
    d = tu_node_new("Pack", "p");
    tu_attr_i(d, "axis", -1); /* axis 1: [[1,3],[2,4]] */
    o = tu_run1(d, in, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(2, 2), 1, 3, 2, 4);
    rt_tensor_unref(o);
    d = tu_node_new("Pack", "bad_pack");
    tu_attr_i(d, "axis", 2);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "axis");
    tu_unref(in, 2);
}
END_TEST

START_TEST(transpose) {
    /* [[0,1,2],[3,4,5]]^T = [[0,3],[1,4],[2,5]] */
    rt_tensor *in[2] = {TU_F32(S(2, 3), 0, 1, 2, 3, 4, 5), TU_I32(S(2), 1, 0)};
    rt_tensor *o = run(tu_node_new("Transpose", "t"), in, 2);
    TU_CHECK_F32(o, S(3, 2), 0, 0, 3, 1, 4, 2, 5);
    rt_tensor_unref(o);
    /* (2,3,4) iota, perm [2,0,1]: out[k][i][j] = in[i][j][k] = 12i + 4j + k */
    rt_tensor *in2[2] = {tu_iota_f32(S(2, 3, 4), 0, 1), TU_I64(S(3), 2, 0, 1)};
    o = tu_run1(tu_node_new("Transpose", "t"), in2, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(4, 2, 3));
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                ck_assert_float_eq(rt_tensor_f32(o)[(k * 2 + i) * 3 + j], 12 * i + 4 * j + k);
    rt_tensor_unref(o);
    rt_tensor_unref(in2[1]);
    in2[1] = TU_I32(S(3), 0, 0, 1);
    tu_run_fail(tu_node_new("Transpose", "bad_perm"), in2, 2, 1, MS_EINVAL, "permutation");
    tu_unref(in2, 2);
}
END_TEST

START_TEST(pad) {
    /* [[1,2],[3,4]] with paddings [[1,0],[0,2]]: one row above, two columns right. */
    rt_tensor *in[3] = {TU_F32(S(2, 2), 1, 2, 3, 4), TU_I32(S(2, 2), 1, 0, 0, 2),
                        TU_F32(TU_SCALAR, 9)};
    rt_tensor *o = tu_run1(tu_node_new("Pad", "p"), in, 2);
    TU_CHECK_F32(o, S(3, 4), 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("PadV2", "p"), in, 3);
    TU_CHECK_F32(o, S(3, 4), 0, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* int8 elements (1-byte path) with padding on the inner dim only: [5] -> [0,5,0] */
    rt_tensor *b = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT8, &S(1), &b), MS_OK);
    ((int8_t *)b->data)[0] = 5;
    rt_tensor *in2[2] = {b, TU_I64(S(1, 2), 1, 1)};
    o = run(tu_node_new("Pad", "p"), in2, 2);
    TU_CHECK_INT(o, RT_DT_INT8, S(3), 0, 5, 0);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(mirror_pad) {
    /* REFLECT [1,2,3] by (2,2): 3,2 | 1,2,3 | 2,1 */
    rt_tensor *in[2] = {TU_F32(S(3), 1, 2, 3), TU_I32(S(1, 2), 2, 2)};
    Tensorflow__NodeDef *d = tu_node_new("MirrorPad", "m");
    tu_attr_s(d, "mode", "REFLECT");
    rt_tensor *o = tu_run1(d, in, 2);
    TU_CHECK_F32(o, S(7), 0, 3, 2, 1, 2, 3, 2, 1);
    rt_tensor_unref(o);
    /* SYMMETRIC: 2,1 | 1,2,3 | 3,2 */
    d = tu_node_new("MirrorPad", "m");
    tu_attr_s(d, "mode", "SYMMETRIC");
    o = tu_run1(d, in, 2);
    TU_CHECK_F32(o, S(7), 0, 2, 1, 1, 2, 3, 3, 2);
    rt_tensor_unref(o);
    /* REFLECT by 3 on a dim of 3 is invalid */
    ((int32_t *)in[1]->data)[0] = 3;
    d = tu_node_new("MirrorPad", "bad_mirror");
    tu_attr_s(d, "mode", "REFLECT");
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "at most 2");
    tu_unref(in, 2);
    /* 2-D REFLECT by 1 everywhere: rows map 1,0,1,0 and columns 1,0,1,2,1:
     * [1,2,3] -> [2,1,2,3,2], [4,5,6] -> [5,4,5,6,5] */
    rt_tensor *in2[2] = {TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6), TU_I32(S(2, 2), 1, 1, 1, 1)};
    d = tu_node_new("MirrorPad", "m");
    tu_attr_s(d, "mode", "REFLECT");
    o = run(d, in2, 2);
    TU_CHECK_F32(o, S(4, 5), 0, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2);
    rt_tensor_unref(o);
    d = tu_node_new("MirrorPad", "bad_mode");
    tu_attr_s(d, "mode", "WRAP");
    tu_run_fail(d, in2, 0, 1, MS_EINVAL, "mode");
}
END_TEST

START_TEST(shape_fill) {
    rt_tensor *x = tu_iota_f32(S(2, 3, 4), 0, 1);
    rt_tensor *o = tu_run1(tu_node_new("Shape", "s"), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(3), 2, 3, 4);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("Shape", "s");
    tu_attr_type(d, "out_type", RT_DT_INT64);
    o = tu_run1(d, &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, S(3), 2, 3, 4);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor *in[2] = {TU_I32(S(2), 2, 3), TU_F32(TU_SCALAR, 7)};
    o = run(tu_node_new("Fill", "f"), in, 2);
    TU_CHECK_F32(o, S(2, 3), 0, 7, 7, 7, 7, 7, 7);
    rt_tensor_unref(o);
    rt_tensor *in2[2] = {TU_I64(S(1), 2), TU_I32(TU_SCALAR, -4)};
    o = run(tu_node_new("Fill", "f"), in2, 2);
    TU_CHECK_INT(o, RT_DT_INT32, S(2), -4, -4);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(slice) {
    /* (3,4) iota, begin [1,1], size [2,-1]: rows 1-2, columns 1-3 */
    rt_tensor *in[3] = {tu_iota_f32(S(3, 4), 0, 1), TU_I32(S(2), 1, 1), TU_I32(S(2), 2, -1)};
    rt_tensor *o = tu_run1(tu_node_new("Slice", "s"), in, 3);
    TU_CHECK_F32(o, S(2, 3), 0, 5, 6, 7, 9, 10, 11);
    rt_tensor_unref(o);
    ((int32_t *)in[2]->data)[0] = 3; /* rows 1..3 of 3 */
    tu_run_fail(tu_node_new("Slice", "bad_slice"), in, 3, 1, MS_EINVAL, "out of bounds");
    tu_unref(in, 3);
}
END_TEST

/* StridedSlice of x with the given begin/end/strides and masks. */
static Tensorflow__NodeDef *ss(int bm, int em, int el, int na, int sh) {
    Tensorflow__NodeDef *d = tu_node_new("StridedSlice", "ss");
    tu_attr_i(d, "begin_mask", bm);
    tu_attr_i(d, "end_mask", em);
    tu_attr_i(d, "ellipsis_mask", el);
    tu_attr_i(d, "new_axis_mask", na);
    tu_attr_i(d, "shrink_axis_mask", sh);
    return d;
}

static rt_tensor *ss_run(Tensorflow__NodeDef *d, rt_tensor *x, rt_tensor *b, rt_tensor *e,
                         rt_tensor *s) {
    rt_tensor *in[4] = {x, b, e, s};
    rt_tensor *o = tu_run1(d, in, 4);
    tu_unref(in + 1, 3);
    return o;
}

START_TEST(strided_slice) {
    rt_tensor *x = tu_iota_f32(S(3, 4), 0, 1), *v = tu_iota_f32(S(6), 0, 1);
    rt_tensor *o;
    /* x[0:3:2, 1:4:2] = rows 0,2 x columns 1,3 = [[1,3],[9,11]] */
    o = ss_run(ss(0, 0, 0, 0, 0), x, TU_I32(S(2), 0, 1), TU_I32(S(2), 3, 4), TU_I32(S(2), 2, 2));
    TU_CHECK_F32(o, S(2, 2), 0, 1, 3, 9, 11);
    rt_tensor_unref(o);
    /* v[::-1] = [5,4,3,2,1,0] (begin and end masked) */
    o = ss_run(ss(1, 1, 0, 0, 0), v, TU_I32(S(1), 0), TU_I32(S(1), 0), TU_I32(S(1), -1));
    TU_CHECK_F32(o, S(6), 0, 5, 4, 3, 2, 1, 0);
    rt_tensor_unref(o);
    /* v[4:1:-2] = [4,2] */
    o = ss_run(ss(0, 0, 0, 0, 0), v, TU_I32(S(1), 4), TU_I32(S(1), 1), TU_I32(S(1), -2));
    TU_CHECK_F32(o, S(2), 0, 4, 2);
    rt_tensor_unref(o);
    /* v[1:100] clamps the end: [1..5] */
    o = ss_run(ss(0, 0, 0, 0, 0), v, TU_I64(S(1), 1), TU_I64(S(1), 100), TU_I64(S(1), 1));
    TU_CHECK_F32(o, S(5), 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    /* v[-1] (shrink) = scalar 5 */
    o = ss_run(ss(0, 0, 0, 0, 1), v, TU_I32(S(1), -1), TU_I32(S(1), 0), TU_I32(S(1), 1));
    TU_CHECK_F32(o, TU_SCALAR, 0, 5);
    rt_tensor_unref(o);
    /* x[1] = row 1 = [4,5,6,7] */
    o = ss_run(ss(0, 0, 0, 0, 1), x, TU_I32(S(1), 1), TU_I32(S(1), 2), TU_I32(S(1), 1));
    TU_CHECK_F32(o, S(4), 0, 4, 5, 6, 7);
    rt_tensor_unref(o);
    /* x[newaxis, :, 1]: new axis, all rows, column 1 shrunk -> (1,3) = [[1,5,9]] */
    o = ss_run(ss(2, 2, 0, 1, 4), x, TU_I32(S(3), 0, 0, 1), TU_I32(S(3), 0, 0, 2),
               TU_I32(S(3), 1, 1, 1));
    TU_CHECK_F32(o, S(1, 3), 0, 1, 5, 9);
    rt_tensor_unref(o);
    /* (2,3,4) iota y[..., 1] = y[i][j][1] = 12i + 4j + 1 */
    rt_tensor *y = tu_iota_f32(S(2, 3, 4), 0, 1);
    o = ss_run(ss(0, 0, 1, 0, 2), y, TU_I32(S(2), 0, 1), TU_I32(S(2), 0, 2), TU_I32(S(2), 1, 1));
    TU_CHECK_F32(o, S(2, 3), 0, 1, 5, 9, 13, 17, 21);
    rt_tensor_unref(o);
    /* y[1:, ..., ::3] -> (1,3,2): y[1][j][k] for k in {0,3} = 12 + 4j + k */
    o = ss_run(ss(0, 0, 2, 0, 0), y, TU_I32(S(3), 1, 0, 0), TU_I32(S(3), 2, 0, 4),
               TU_I32(S(3), 1, 1, 3));
    TU_CHECK_F32(o, S(1, 3, 2), 0, 12, 15, 16, 19, 20, 23);
    rt_tensor_unref(o);
    rt_tensor_unref(y);
    /* an ellipsis bit past the given entries is ignored: v[1:3] = [1,2] */
    o = ss_run(ss(0, 0, 4, 0, 0), v, TU_I32(S(1), 1), TU_I32(S(1), 3), TU_I32(S(1), 1));
    TU_CHECK_F32(o, S(2), 0, 1, 2);
    rt_tensor_unref(o);
    /* errors: zero stride; shrink index out of range */
    rt_tensor *in[4] = {v, TU_I32(S(1), 0), TU_I32(S(1), 2), TU_I32(S(1), 0)};
    Tensorflow__NodeDef *d = tu_node_new("StridedSlice", "bad_ss");
    tu_run_fail(d, in, 4, 1, MS_EINVAL, "non-zero");
    ((int32_t *)in[1]->data)[0] = 6;
    ((int32_t *)in[3]->data)[0] = 1;
    tu_run_fail(ss(0, 0, 0, 0, 1), in, 4, 1, MS_EINVAL, "out of bounds");
    tu_unref(in + 1, 3);
    rt_tensor_unref(x);
    rt_tensor_unref(v);
}
END_TEST

START_TEST(split) {
    /* (2,4) iota split in 2 along axis 1: [[0,1],[4,5]] and [[2,3],[6,7]] */
    rt_tensor *in[2] = {TU_I32(TU_SCALAR, 1), tu_iota_f32(S(2, 4), 0, 1)};
    Tensorflow__NodeDef *d = tu_node_new("Split", "sp");
    tu_attr_i(d, "num_split", 2);
    rt_tensor *o[3] = {0};
    ck_assert_int_eq(tu_run(d, in, 2, o, 2), MS_OK);
    TU_CHECK_F32(o[0], S(2, 2), 0, 0, 1, 4, 5);
    TU_CHECK_F32(o[1], S(2, 2), 0, 2, 3, 6, 7);
    tu_unref(o, 2);
    tu_node_free(d);
    d = tu_node_new("Split", "bad_split");
    tu_attr_i(d, "num_split", 3);
    tu_run_fail(d, in, 2, 3, MS_EINVAL, "divisible");
    tu_unref(in, 2);
    /* SplitV [0..4] by [2,-1]: [0,1] and [2,3,4] */
    rt_tensor *in2[3] = {tu_iota_f32(S(5), 0, 1), TU_I32(S(2), 2, -1), TU_I32(TU_SCALAR, 0)};
    d = tu_node_new("SplitV", "spv");
    tu_attr_i(d, "num_split", 2);
    ck_assert_int_eq(tu_run(d, in2, 3, o, 2), MS_OK);
    TU_CHECK_F32(o[0], S(2), 0, 0, 1);
    TU_CHECK_F32(o[1], S(3), 0, 2, 3, 4);
    tu_unref(o, 2);
    tu_node_free(d);
    ((int32_t *)in2[1]->data)[1] = 4; /* 2 + 4 != 5 */
    d = tu_node_new("SplitV", "bad_splitv");
    tu_attr_i(d, "num_split", 2);
    tu_run_fail(d, in2, 3, 2, MS_EINVAL, "add up");
    tu_unref(in2, 3);
}
END_TEST

START_TEST(tile) {
    rt_tensor *in[2] = {TU_F32(S(2, 2), 1, 2, 3, 4), TU_I32(S(2), 1, 2)};
    rt_tensor *o = tu_run1(tu_node_new("Tile", "t"), in, 2);
    TU_CHECK_F32(o, S(2, 4), 0, 1, 2, 1, 2, 3, 4, 3, 4);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = 2;
    ((int32_t *)in[1]->data)[1] = 1;
    o = tu_run1(tu_node_new("Tile", "t"), in, 2);
    TU_CHECK_F32(o, S(4, 2), 0, 1, 2, 3, 4, 1, 2, 3, 4);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = -1;
    tu_run_fail(tu_node_new("Tile", "bad_tile"), in, 2, 1, MS_EINVAL, "negative");
    tu_unref(in, 2);
}
END_TEST

START_TEST(gather) {
    rt_tensor *p = TU_F32(S(3, 2), 1, 2, 3, 4, 5, 6);
    /* rows 2 and 0 */
    rt_tensor *in[3] = {p, TU_I32(S(2), 2, 0), TU_I32(TU_SCALAR, 0)};
    rt_tensor *o = tu_run1(tu_node_new("GatherV2", "g"), in, 3);
    TU_CHECK_F32(o, S(2, 2), 0, 5, 6, 1, 2);
    rt_tensor_unref(o);
    /* axis 1 with indices [[1,0],[1,1]]: out[r] = [[p[r][1], p[r][0]], [p[r][1], p[r][1]]] */
    rt_tensor_unref(in[1]);
    rt_tensor_unref(in[2]);
    in[1] = TU_I64(S(2, 2), 1, 0, 1, 1);
    in[2] = TU_I64(TU_SCALAR, -1);
    o = tu_run1(tu_node_new("GatherV2", "g"), in, 3);
    TU_CHECK_F32(o, S(3, 2, 2), 0, 2, 1, 2, 2, 4, 3, 4, 4, 6, 5, 6, 6);
    rt_tensor_unref(o);
    /* scalar index drops the axis: row 1 = [3,4] (Gather v1, axis 0) */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SCALAR, 1);
    o = tu_run1(tu_node_new("Gather", "g"), in, 2);
    TU_CHECK_F32(o, S(2), 0, 3, 4);
    rt_tensor_unref(o);
    ((int32_t *)in[1]->data)[0] = 3;
    tu_run_fail(tu_node_new("Gather", "bad_gather"), in, 2, 1, MS_EINVAL, "not in [0, 3)");
    tu_unref(in, 3);
}
END_TEST

static rt_tensor *range3(rt_tensor *a, rt_tensor *b, rt_tensor *c) {
    rt_tensor *in[3] = {a, b, c};
    rt_tensor *o = tu_run1(tu_node_new("Range", "r"), in, 3);
    tu_unref(in, 3);
    return o;
}

START_TEST(range) {
    rt_tensor *o = range3(TU_I32(TU_SCALAR, 0), TU_I32(TU_SCALAR, 10), TU_I32(TU_SCALAR, 3));
    TU_CHECK_INT(o, RT_DT_INT32, S(4), 0, 3, 6, 9);
    rt_tensor_unref(o);
    o = range3(TU_I64(TU_SCALAR, 5), TU_I64(TU_SCALAR, 1), TU_I64(TU_SCALAR, -2));
    TU_CHECK_INT(o, RT_DT_INT64, S(2), 5, 3);
    rt_tensor_unref(o);
    o = range3(TU_F32(TU_SCALAR, 0), TU_F32(TU_SCALAR, 1), TU_F32(TU_SCALAR, 0.25f));
    TU_CHECK_F32(o, S(4), 0, 0, 0.25f, 0.5f, 0.75f);
    rt_tensor_unref(o);
    /* 0 to 1 by 0.1: ceil(1 / 0.1) = 10 values, 0 first, about 0.9 last */
    o = range3(TU_F32(TU_SCALAR, 0), TU_F32(TU_SCALAR, 1), TU_F32(TU_SCALAR, 0.1f));
    tu_check_shape(o, RT_DT_FLOAT, S(10));
    ck_assert_float_eq(rt_tensor_f32(o)[0], 0);
    ck_assert_float_eq_tol(rt_tensor_f32(o)[9], 0.9f, 1e-5f);
    rt_tensor_unref(o);
    rt_tensor *in[3] = {TU_I32(TU_SCALAR, 0), TU_I32(TU_SCALAR, 5), TU_I32(TU_SCALAR, 0)};
    tu_run_fail(tu_node_new("Range", "bad_range"), in, 3, 1, MS_EINVAL, "delta");
    ((int32_t *)in[2]->data)[0] = -1;
    tu_run_fail(tu_node_new("Range", "bad_range"), in, 3, 1, MS_EINVAL, "cannot reach");
    tu_unref(in, 3);
}
END_TEST

/* Sizes from tensors that would overflow int64 arithmetic are refused. */
START_TEST(huge_sizes) {
    rt_tensor *x = TU_F32(S(2, 2), 1, 2, 3, 4);
    /* 2 * (2^62) overflows int64 */
    rt_tensor *in[2] = {x, TU_I64(S(2), INT64_MAX / 2 + 1, 4)};
    tu_run_fail(tu_node_new("Tile", "huge_tile"), in, 2, 1, MS_EINVAL, "too large");
    rt_tensor_unref(in[1]);
    /* each dim fits but the element count does not: refused by the output allocator */
    in[1] = TU_I64(S(2), INT64_MAX / 2, 4);
    tu_run_fail(tu_node_new("Tile", "huge_tile"), in, 2, 1, MS_EINVAL, "shape");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(S(3), INT64_MAX / 2, 4, -1);
    tu_run_fail(tu_node_new("Reshape", "huge_reshape"), in, 2, 1, MS_EINVAL, "too large");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(S(2, 2), INT64_MAX - 1, 0, 0, 1);
    tu_run_fail(tu_node_new("Pad", "huge_pad"), in, 2, 1, MS_EINVAL, "too large");
    rt_tensor_unref(in[1]);
    rt_tensor *sl[3] = {x, TU_I64(S(2), INT64_MIN, 0), TU_I64(S(2), -1, -1)};
    tu_run_fail(tu_node_new("Slice", "huge_slice"), sl, 3, 1, MS_EINVAL, "out of bounds");
    tu_unref(sl, 3);
    /* an empty tensor with huge dims is fine where the result is empty too */
    rt_tensor *e = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &S(0, 3), &e), MS_OK);
    rt_tensor *tin[2] = {e, TU_I32(S(2), 5, 1000000)};
    rt_tensor *o = tu_run1(tu_node_new("Tile", "t"), tin, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 3000000));
    rt_tensor_unref(o);
    tu_unref(tin, 2);
}
END_TEST

/* ---- ONNX forms with run-time inputs (OnnxSlice, OnnxPad, OnnxSqueeze,
 * OnnxUnsqueeze): ONNX's semantics, values worked out by hand. ---- */

START_TEST(onnx_slice) {
    /* [0..9] from -3 to INT64_MAX: 7, 8, 9 (the end clamps to 10). */
    rt_tensor *in[5] = {tu_iota_f32(S(10), 0, 1), TU_I64(S(1), -3), TU_I64(S(1), INT64_MAX),
                        TU_I32(S(1), 0), TU_I64(S(1), 1)};
    rt_tensor *o = tu_run1(tu_node_new("OnnxSlice", "s"), in, 5);
    TU_CHECK_F32(o, S(3), 0, 7, 8, 9);
    rt_tensor_unref(o);
    /* From the last back to INT64_MIN by -3: start 9, end clamps to -1
     * (through index 0): 9, 6, 3, 0. */
    rt_tensor_unref(in[1]), in[1] = TU_I64(S(1), -1);
    rt_tensor_unref(in[2]), in[2] = TU_I64(S(1), INT64_MIN);
    rt_tensor_unref(in[4]), in[4] = TU_I64(S(1), -3);
    o = tu_run1(tu_node_new("OnnxSlice", "s"), in, 5);
    TU_CHECK_F32(o, S(4), 0, 9, 6, 3, 0);
    rt_tensor_unref(o);
    /* Start past the end: empty. */
    rt_tensor_unref(in[1]), in[1] = TU_I64(S(1), 5);
    rt_tensor_unref(in[2]), in[2] = TU_I64(S(1), 2);
    rt_tensor_unref(in[4]), in[4] = TU_I64(S(1), 1);
    o = tu_run1(tu_node_new("OnnxSlice", "s"), in, 5);
    tu_check_shape(o, RT_DT_FLOAT, S(0));
    rt_tensor_unref(o);
    /* Step 0 and a repeated axis are refused. */
    rt_tensor_unref(in[4]), in[4] = TU_I64(S(1), 0);
    tu_run_fail(tu_node_new("OnnxSlice", "bad_step"), in, 5, 1, MS_EINVAL, "step");
    tu_unref(in, 5);
    /* (2,3) [[0,1,2],[3,4,5]], axis -1 from 1 to 3: [[1,2],[4,5]]; axes [0, 0]
     * is refused. */
    rt_tensor *in2[5] = {tu_iota_f32(S(2, 3), 0, 1), TU_I64(S(1), 1), TU_I64(S(1), 3),
                         TU_I64(S(1), -1), TU_I64(S(1), 1)};
    o = tu_run1(tu_node_new("OnnxSlice", "s"), in2, 5);
    TU_CHECK_F32(o, S(2, 2), 0, 1, 2, 4, 5);
    rt_tensor_unref(o);
    tu_unref(in2 + 1, 4);
    in2[1] = TU_I64(S(2), 0, 0), in2[2] = TU_I64(S(2), 1, 1), in2[3] = TU_I64(S(2), 0, 0);
    in2[4] = TU_I64(S(2), 1, 1);
    tu_run_fail(tu_node_new("OnnxSlice", "bad_axes"), in2, 5, 1, MS_EINVAL, "repeated");
    rt_tensor_unref(in2[4]), in2[4] = TU_I64(S(1), 1);
    tu_run_fail(tu_node_new("OnnxSlice", "bad_len"), in2, 5, 1, MS_EINVAL, "steps");
    tu_unref(in2, 5);
}
END_TEST

/* OnnxPad of [1,2,3] by (before, after) in mode m; value 9. */
static rt_tensor *pad3(const char *m, int64_t b, int64_t a) {
    rt_tensor *in[4] = {TU_F32(S(3), 1, 2, 3), TU_I64(S(2), b, a), TU_F32(TU_SCALAR, 9),
                        TU_I64(S(1), 0)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxPad", "p");
    tu_attr_s(d, "mode", m);
    return run(d, in, 4);
}

START_TEST(onnx_pad) {
    rt_tensor *o = pad3("constant", 2, 1);
    TU_CHECK_F32(o, S(6), 0, 9, 9, 1, 2, 3, 9);
    rt_tensor_unref(o);
    o = pad3("edge", 2, 1);
    TU_CHECK_F32(o, S(6), 0, 1, 1, 1, 2, 3, 3);
    rt_tensor_unref(o);
    o = pad3("wrap", 2, 1); /* -2 -> 1, -1 -> 2, 3 -> 0 */
    TU_CHECK_F32(o, S(6), 0, 2, 3, 1, 2, 3, 1);
    rt_tensor_unref(o);
    o = pad3("reflect", 2, 1); /* -2 -> 2, -1 -> 1, 3 -> 1 */
    TU_CHECK_F32(o, S(6), 0, 3, 2, 1, 2, 3, 2);
    rt_tensor_unref(o);
    o = pad3("reflect", 3, 0); /* reflects again past the edge, as numpy: -3 -> 1 */
    TU_CHECK_F32(o, S(6), 0, 2, 3, 2, 1, 2, 3);
    rt_tensor_unref(o);
    o = pad3("constant", -1, 1); /* a negative pad removes */
    TU_CHECK_F32(o, S(3), 0, 2, 3, 9);
    rt_tensor_unref(o);
    o = pad3("edge", -3, 0); /* everything removed */
    tu_check_shape(o, RT_DT_FLOAT, S(0));
    rt_tensor_unref(o);
    /* (2,2) padded on axis 1 only, one column before: [[0,1,2],[0,3,4]]. */
    rt_tensor *in[4] = {TU_F32(S(2, 2), 1, 2, 3, 4), TU_I64(S(2), 1, 0), TU_F32(TU_SCALAR, 0),
                        TU_I64(S(1), -1)};
    o = tu_run1(tu_node_new("OnnxPad", "p"), in, 4);
    TU_CHECK_F32(o, S(2, 3), 0, 0, 1, 2, 0, 3, 4);
    rt_tensor_unref(o);
    /* pads not 2 per axis; too negative */
    rt_tensor_unref(in[1]), in[1] = TU_I64(S(4), 1, 0, 0, 0);
    tu_run_fail(tu_node_new("OnnxPad", "bad_pads"), in, 4, 1, MS_EINVAL, "pads");
    rt_tensor_unref(in[1]), in[1] = TU_I64(S(2), -2, -1);
    tu_run_fail(tu_node_new("OnnxPad", "bad_pads"), in, 4, 1, MS_EINVAL, "do not fit");
    tu_unref(in, 4);
    /* An empty input: constant pads fill, edge cannot. */
    rt_tensor *in2[4] = {tu_t(RT_DT_FLOAT, S(0), NULL, 0), TU_I64(S(2), 1, 1),
                         TU_F32(TU_SCALAR, 7), TU_I64(S(1), 0)};
    o = tu_run1(tu_node_new("OnnxPad", "p"), in2, 4);
    TU_CHECK_F32(o, S(2), 0, 7, 7);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("OnnxPad", "bad_edge");
    tu_attr_s(d, "mode", "edge");
    tu_run_fail(d, in2, 4, 1, MS_EINVAL, "empty");
    d = tu_node_new("OnnxPad", "bad_mode");
    tu_attr_s(d, "mode", "symmetric");
    tu_run_fail(d, in2, 4, 1, MS_EINVAL, "mode");
    tu_unref(in2, 4);
}
END_TEST

START_TEST(onnx_squeeze) {
    /* Unsqueeze (2,3) at 0 and -1 (of the output's rank 4): (1,2,3,1). */
    rt_tensor *in[2] = {tu_iota_f32(S(2, 3), 0, 1), TU_I64(S(2), 0, -1)};
    rt_tensor *o = tu_run1(tu_node_new("OnnxUnsqueeze", "u"), in, 2);
    TU_CHECK_F32(o, S(1, 2, 3, 1), 0, 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]), in[1] = TU_I64(S(2), 1, 1);
    tu_run_fail(tu_node_new("OnnxUnsqueeze", "bad_axes"), in, 2, 1, MS_EINVAL, "repeated");
    tu_unref(in, 2);
    /* Squeeze (1,2,1,3) at -2: (1,2,3); an empty list drops every 1; axis 1
     * (size 2) is refused. */
    rt_tensor *in2[2] = {tu_iota_f32(S(1, 2, 1, 3), 0, 1), TU_I64(S(1), -2)};
    o = tu_run1(tu_node_new("OnnxSqueeze", "s"), in2, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(1, 2, 3));
    rt_tensor_unref(o);
    rt_tensor_unref(in2[1]), in2[1] = tu_t(RT_DT_INT64, S(0), NULL, 0);
    o = tu_run1(tu_node_new("OnnxSqueeze", "s"), in2, 2);
    TU_CHECK_F32(o, S(2, 3), 0, 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    rt_tensor_unref(in2[1]), in2[1] = TU_I32(S(1), 1);
    tu_run_fail(tu_node_new("OnnxSqueeze", "bad_sq"), in2, 2, 1, MS_EINVAL, "size 1");
    tu_unref(in2, 2);
    /* An empty tensor (0,1) squeezed at 1: (0). */
    rt_tensor *in3[2] = {tu_t(RT_DT_FLOAT, S(0, 1), NULL, 0), TU_I64(S(1), 1)};
    o = run(tu_node_new("OnnxSqueeze", "s"), in3, 2);
    tu_check_shape(o, RT_DT_FLOAT, S(0));
    rt_tensor_unref(o);
}
END_TEST

/* OnnxResize of x by scales (sizes NULL) or sizes; roi may be NULL. */
static rt_tensor *resize(rt_tensor *x, rt_tensor *roi, rt_tensor *scales, rt_tensor *sizes,
                         const char *mode, const char *ctm, const char *nm) {
    rt_tensor *in[4] = {x, roi ? roi : tu_t(RT_DT_FLOAT, S(0), NULL, 0),
                        scales ? scales : tu_t(RT_DT_FLOAT, S(0), NULL, 0),
                        sizes ? sizes : tu_t(RT_DT_INT64, S(0), NULL, 0)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxResize", "rz");
    tu_attr_s(d, "mode", mode);
    tu_attr_s(d, "coordinate_transformation_mode", ctm);
    tu_attr_s(d, "nearest_mode", nm);
    tu_attr_f(d, "extrapolation_value", 7);
    return run(d, in, 4);
}

START_TEST(onnx_resize) {
    /* Linear, half_pixel, [0, 10] by 2: source -0.25, 0.25, 0.75, 1.25
     * (edge-clamped neighbours): 0, 2.5, 7.5, 10. */
    rt_tensor *o = resize(TU_F32(S(2), 0, 10), NULL, TU_F32(S(1), 2), NULL, "linear",
                          "half_pixel", "floor");
    TU_CHECK_F32(o, S(4), 1e-6, 0, 2.5, 7.5, 10);
    rt_tensor_unref(o);
    /* Nearest to size 3 from [1, 2] (scale 1.5). asymmetric/floor: 0, 0.67,
     * 1.33 -> 1, 1, 2; half_pixel: -0.17, 0.5, 1.17 -> round_prefer_ceil
     * takes the tie up (1, 2, 2), round_prefer_floor down (1, 1, 2). */
    o = resize(TU_F32(S(2), 1, 2), NULL, NULL, TU_I64(S(1), 3), "nearest", "asymmetric",
               "floor");
    TU_CHECK_F32(o, S(3), 0, 1, 1, 2);
    rt_tensor_unref(o);
    o = resize(TU_F32(S(2), 1, 2), NULL, NULL, TU_I64(S(1), 3), "nearest", "half_pixel",
               "round_prefer_ceil");
    TU_CHECK_F32(o, S(3), 0, 1, 2, 2);
    rt_tensor_unref(o);
    o = resize(TU_F32(S(2), 1, 2), NULL, NULL, TU_I64(S(1), 3), "nearest", "half_pixel",
               "round_prefer_floor");
    TU_CHECK_F32(o, S(3), 0, 1, 1, 2);
    rt_tensor_unref(o);
    /* tf_crop_and_resize, roi [0.5, 1] of [0, 10, 20] to 2: sources 1 and 2
     * (10, 20); roi [0.5, 1.5]: the second source 3 lies outside -> 7. */
    o = resize(TU_F32(S(3), 0, 10, 20), TU_F32(S(2), 0.5, 1), NULL, TU_I64(S(1), 2), "linear",
               "tf_crop_and_resize", "floor");
    TU_CHECK_F32(o, S(2), 1e-6, 10, 20);
    rt_tensor_unref(o);
    o = resize(TU_F32(S(3), 0, 10, 20), TU_F32(S(2), 0.5, 1.5), NULL, TU_I64(S(1), 2), "linear",
               "tf_crop_and_resize", "floor");
    TU_CHECK_F32(o, S(2), 1e-6, 10, 7);
    rt_tensor_unref(o);
    /* Empty in, empty out; an empty input cannot grow. */
    o = resize(tu_t(RT_DT_FLOAT, S(0), NULL, 0), NULL, NULL, TU_I64(S(1), 0), "linear",
               "half_pixel", "floor");
    tu_check_shape(o, RT_DT_FLOAT, S(0));
    rt_tensor_unref(o);
    rt_tensor *bad[4] = {tu_t(RT_DT_FLOAT, S(0), NULL, 0), tu_t(RT_DT_FLOAT, S(0), NULL, 0),
                         tu_t(RT_DT_FLOAT, S(0), NULL, 0), TU_I64(S(1), 2)};
    tu_run_fail(tu_node_new("OnnxResize", "bad_empty"), bad, 4, 1, MS_EINVAL, "empty");
    tu_unref(bad, 4);
}
END_TEST

START_TEST(onnx_resize_antialias_axes) {
    /* Antialiased linear by 0.5 of [0, 4, 8, 12]: the triangle stretched to 4
     * taps, weights (0.25, 0.75, 0.75, 0.25) / 2 around sources 0.5 and 2.5:
     * 0*.125 + 0*.375 + 4*.375 + 8*.125 = 2.5 and 4*.125 + 8*.375 + 12*.375 +
     * 12*.125 = 9.5. */
    rt_tensor *in[4] = {TU_F32(S(4), 0, 4, 8, 12), tu_t(RT_DT_FLOAT, S(0), NULL, 0),
                        TU_F32(S(1), 0.5), tu_t(RT_DT_INT64, S(0), NULL, 0)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxResize", "rz");
    tu_attr_s(d, "mode", "linear");
    tu_attr_i(d, "antialias", 1);
    rt_tensor *o = run(d, in, 4);
    TU_CHECK_F32(o, S(2), 1e-6, 2.5, 9.5);
    rt_tensor_unref(o);
    /* axes [1] of [[1,2],[3,4]] by 2, nearest asymmetric floor:
     * [[1,1,2,2],[3,3,4,4]]. */
    rt_tensor *in2[4] = {TU_F32(S(2, 2), 1, 2, 3, 4), tu_t(RT_DT_FLOAT, S(0), NULL, 0),
                         TU_F32(S(1), 2), tu_t(RT_DT_INT64, S(0), NULL, 0)};
    d = tu_node_new("OnnxResize", "rz");
    tu_attr_s(d, "coordinate_transformation_mode", "asymmetric");
    tu_attr_s(d, "nearest_mode", "floor");
    int64_t ax = 1;
    tu_attr_ilist(d, "axes", 1, &ax);
    o = tu_run1(d, in2, 4);
    TU_CHECK_F32(o, S(2, 4), 0, 1, 1, 2, 2, 3, 3, 4, 4);
    rt_tensor_unref(o);
    /* not_larger: sizes (2, 2) of a (2, 4) input keep the aspect ratio with
     * the smaller factor 0.5: (1, 2). */
    rt_tensor_unref(in2[2]), in2[2] = tu_t(RT_DT_FLOAT, S(0), NULL, 0);
    rt_tensor_unref(in2[0]), in2[0] = tu_iota_f32(S(2, 4), 0, 1);
    rt_tensor_unref(in2[3]), in2[3] = TU_I64(S(2), 2, 2);
    d = tu_node_new("OnnxResize", "rz");
    tu_attr_s(d, "keep_aspect_ratio_policy", "not_larger");
    o = tu_run1(d, in2, 4);
    tu_check_shape(o, RT_DT_FLOAT, S(1, 2));
    rt_tensor_unref(o);
    d = tu_node_new("OnnxResize", "bad_mode");
    tu_attr_s(d, "mode", "bicubic");
    tu_run_fail(d, in2, 4, 1, MS_EINVAL, "mode");
    tu_unref(in2, 4);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_shape");
    struct {
        const char *name;
        const TTest *t;
    } tests[] = {
        {"reshape", reshape},
        {"squeeze_expand", squeeze_expand},
        {"concat", concat},
        {"pack", pack},
        {"concat_v1_unpack", concat_v1_unpack},
        {"transpose", transpose},
        {"pad", pad},
        {"mirror_pad", mirror_pad},
        {"shape_fill", shape_fill},
        {"slice", slice},
        {"strided_slice", strided_slice},
        {"split", split},
        {"tile", tile},
        {"huge_sizes", huge_sizes},
        {"gather", gather},
        {"range", range},
        {"onnx_slice", onnx_slice},
        {"onnx_pad", onnx_pad},
        {"onnx_squeeze", onnx_squeeze},
        {"onnx_resize", onnx_resize},
        {"onnx_resize_antialias_axes", onnx_resize_antialias_axes},
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
