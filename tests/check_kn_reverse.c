/* check_kn_reverse.c - ReverseV2 and TF1 Reverse (kernels/cpu/kn_cpu_reverse.c)
 * against values written out by hand. */
#include <check.h>

#include "util_node.h"

static rt_tensor *rev(rt_tensor *x, rt_tensor *axis) {
    rt_tensor *in[2] = {x, axis};
    rt_tensor *o = tu_run1(tu_node_new("ReverseV2", "rev"), in, 2);
    rt_tensor_unref(axis);
    return o;
}

START_TEST(test_reverse_v2) {
    rt_tensor *x = TU_F32(TU_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
    rt_tensor *o = rev(x, TU_I32(TU_SHAPE(1), 1));
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 3, 2, 1, 6, 5, 4);
    rt_tensor_unref(o);
    o = rev(x, TU_I64(TU_SHAPE(1), 0));
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 4, 5, 6, 1, 2, 3);
    rt_tensor_unref(o);
    o = rev(x, TU_I32(TU_SHAPE(2), 0, -1));
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 6, 5, 4, 3, 2, 1);
    rt_tensor_unref(o);
    rt_tensor *none;
    rt_shape s0 = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT32, &s0, &none), MS_OK);
    o = rev(x, none);
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 1, 2, 3, 4, 5, 6);
    rt_tensor_unref(o);
    /* The middle axis of (2, 2, 2): rows of 2 move as blocks. */
    rt_tensor *y = TU_I32(TU_SHAPE(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7);
    o = rev(y, TU_I32(TU_SHAPE(1), 1));
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2, 2), 2, 3, 0, 1, 6, 7, 4, 5);
    rt_tensor_unref(o);
    /* The time axis of a (batch 1, time 3, features 2) sequence (Bidirectional). */
    rt_tensor *seq = TU_F32(TU_SHAPE(1, 3, 2), 1, 2, 3, 4, 5, 6);
    o = rev(seq, TU_I32(TU_SHAPE(1), 1));
    TU_CHECK_F32(o, TU_SHAPE(1, 3, 2), 0, 5, 6, 3, 4, 1, 2);
    rt_tensor_unref(o);
    rt_tensor *in[2];
    in[0] = x;
    in[1] = TU_I32(TU_SHAPE(1), 2);
    tu_run_fail(tu_node_new("ReverseV2", "r_bad"), in, 2, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(2), 1, -1);
    tu_run_fail(tu_node_new("ReverseV2", "r_dup"), in, 2, 1, MS_EINVAL, "twice");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(x);
    rt_tensor_unref(y);
    rt_tensor_unref(seq);
}
END_TEST

START_TEST(test_reverse_empty_and_tf1) {
    rt_tensor *e;
    rt_shape s = {.rank = 2, .dim = {0, 3}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &e), MS_OK);
    rt_tensor *o = rev(e, TU_I32(TU_SHAPE(1), 0));
    tu_check_shape(o, RT_DT_FLOAT, s);
    rt_tensor_unref(o);
    rt_tensor_unref(e);
    rt_tensor *x = TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    rt_tensor *in[2] = {x, TU_BOOL(TU_SHAPE(2), 1, 0)};
    o = tu_run1(tu_node_new("Reverse", "r1"), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 3, 4, 1, 2);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_BOOL(TU_SHAPE(1), 1);
    tu_run_fail(tu_node_new("Reverse", "r1_bad"), in, 2, 1, MS_EINVAL, "bool vector");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"reverse_v2", test_reverse_v2},
        {"reverse_empty_and_tf1", test_reverse_empty_and_tf1},
    };
    return tu_suite_main("kn_reverse", cases, sizeof(cases) / sizeof(cases[0]));
}
