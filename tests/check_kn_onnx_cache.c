/* check_kn_onnx_cache.c - OnnxTensorScatter (kernels/cpu/kn_cpu_onnx_cache.c),
 * ONNX TensorScatter's KV-cache write, against values worked out by hand
 * (comments give them), with empty tensors, hostile indices and
 * cancellation. */
#include <check.h>

#include "util_node.h"

static Tensorflow__NodeDef *ts_node(int has_ix, int64_t axis, int circ) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxTensorScatter", "ts");
    tu_attr_i(d, "has_indices", has_ix);
    tu_attr_i(d, "axis", axis);
    tu_attr_i(d, "mode", circ);
    return d;
}

START_TEST(test_tensor_scatter) {
    /* Cache (2, 3, 1) of batch 0: 1, 2, 3, batch 1: 4, 5, 6; one step
     * (2, 1, 1) of 7, 8 written at 2 and 0 along axis 1. */
    rt_tensor *p = TU_F32(TU_SHAPE(2, 3, 1), 1, 2, 3, 4, 5, 6);
    rt_tensor *in[3] = {p, TU_F32(TU_SHAPE(2, 1, 1), 7, 8), TU_I64(TU_SHAPE(2), 2, 0)};
    rt_tensor *o = tu_run1(ts_node(1, 1, 0), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 3, 1), 0, 1, 2, 7, 8, 5, 6);
    rt_tensor_unref(o);
    tu_unref(in + 1, 2);
    /* Two steps (7, 8), (9, 10) at 2 and 1, circular: batch 0 writes 2 and
     * 3 mod 3 = 0 -> 8, 2, 7; batch 1 writes 1, 2 -> 4, 9, 10. */
    in[1] = TU_F32(TU_SHAPE(2, 2, 1), 7, 8, 9, 10);
    in[2] = TU_I64(TU_SHAPE(2), 2, 1);
    o = tu_run1(ts_node(1, 1, 1), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 3, 1), 0, 8, 2, 7, 4, 9, 10);
    rt_tensor_unref(o);
    /* The same linear: batch 0's 2 + 2 steps pass the cache's 3. */
    tu_run_fail(ts_node(1, 1, 0), in, 3, 1, MS_EINVAL, "do not fit");
    /* No write_indices: both at 0 -> 7, 8, 3 and 9, 10, 6. */
    o = tu_run1(ts_node(0, 1, 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 3, 1), 0, 7, 8, 3, 9, 10, 6);
    rt_tensor_unref(o);
    /* axis -1 (the last dim; the prefix (batch, 3) rows): int32 data of
     * (2, 1, 2) into (2, 1, 3) at 1 and 0: 0, 1, 2 and 3, 4, 0. */
    rt_tensor *ip = TU_I32(TU_SHAPE(2, 1, 3), 0, 0, 0, 0, 0, 0);
    rt_tensor *in2[3] = {ip, TU_I32(TU_SHAPE(2, 1, 2), 1, 2, 3, 4), TU_I64(TU_SHAPE(2), 1, 0)};
    o = tu_run1(ts_node(1, -1, 0), in2, 3);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 1, 3), 0, 1, 2, 3, 4, 0);
    rt_tensor_unref(o);
    tu_unref(in2, 3);
    tu_unref(in + 1, 2);
    /* An empty update leaves the cache as it was; an empty batch is empty. */
    rt_tensor *e = NULL, *pe = NULL, *ue = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(2, 0, 1), &e), MS_OK);
    in[1] = e;
    o = tu_run1(ts_node(0, 1, 1), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 3, 1), 0, 1, 2, 3, 4, 5, 6);
    rt_tensor_unref(o);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 3, 1), &pe), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 1, 1), &ue), MS_OK);
    rt_tensor *in3[2] = {pe, ue};
    o = tu_run1(ts_node(0, 1, 0), in3, 2);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 3, 1));
    tu_unref((rt_tensor *[]){o, e, pe, ue, p}, 5);
}
END_TEST

START_TEST(test_tensor_scatter_refused) {
    rt_tensor *p = TU_F32(TU_SHAPE(2, 3, 1), 1, 2, 3, 4, 5, 6);
    /* Hostile write indices (far past, negative), a longer update, the
     * batch axis, a wrong indices shape. */
    rt_tensor *in[3] = {p, TU_F32(TU_SHAPE(2, 1, 1), 7, 8),
                        TU_I64(TU_SHAPE(2), (int64_t)1 << 62, 0)};
    tu_run_fail(ts_node(1, 1, 0), in, 3, 1, MS_EINVAL, "do not fit");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(2), -1, 0);
    tu_run_fail(ts_node(1, 1, 0), in, 3, 1, MS_EINVAL, "do not fit");
    tu_run_fail(ts_node(1, 0, 0), in, 3, 1, MS_EINVAL, "axis");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(3), 0, 0, 0);
    tu_run_fail(ts_node(1, 1, 0), in, 3, 1, MS_EINVAL, "write_indices");
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(2, 4, 1), 1, 2, 3, 4, 5, 6, 7, 8);
    tu_run_fail(ts_node(0, 1, 1), in, 2, 1, MS_EINVAL, "at most");
    tu_unref(in, 3);
}
END_TEST

START_TEST(test_cancel) {
    /* A cancelled request stops it with CANCELLED; not cancelled, it runs. */
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(1, 2, 1), 1, 2), TU_F32(TU_SHAPE(1, 1, 1), 3)};
    rt_tensor *o = tu_check_cancel(ts_node(0, 1, 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 1), 0, 3, 2);
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"tensor_scatter", test_tensor_scatter},
        {"tensor_scatter_refused", test_tensor_scatter_refused},
        {"cancel", test_cancel},
    };
    return tu_suite_main("kn_onnx_cache", cases, sizeof(cases) / sizeof(cases[0]));
}
