/* check_kn_space.c - SpaceToBatchND / BatchToSpaceND (kernels/cpu/
 * kn_cpu_space.c) on the examples of TensorFlow's tf.space_to_batch_nd /
 * tf.batch_to_space documentation, and ExtractImagePatches on those of
 * tf.image.extract_patches (each BatchToSpaceND example is the
 * inverse of a SpaceToBatchND one there). */
#include <check.h>

#include "util_node.h"

static rt_tensor *run3(const char *op, rt_tensor *x, rt_tensor *block, rt_tensor *pads) {
    rt_tensor *in[3] = {x, block, pads};
    rt_tensor *o = tu_run1(tu_node_new(op, op), in, 3);
    rt_tensor_unref(block);
    rt_tensor_unref(pads);
    return o;
}

START_TEST(test_space_batch_docs) {
    /* example 3: [1, 4, 4, 1] of 1..16, block [2, 2] -> [4, 2, 2, 1] */
    rt_tensor *x = tu_iota_f32(TU_SHAPE(1, 4, 4, 1), 1, 1);
    rt_tensor *o =
        run3("SpaceToBatchND", x, TU_I32(TU_SHAPE(2), 2, 2), TU_I32(TU_SHAPE(2, 2), 0, 0, 0, 0));
    TU_CHECK_F32(o, TU_SHAPE(4, 2, 2, 1), 0, 1, 3, 9, 11, 2, 4, 10, 12, 5, 7, 13, 15, 6, 8, 14, 16);
    rt_tensor *back =
        run3("BatchToSpaceND", o, TU_I32(TU_SHAPE(2), 2, 2), TU_I32(TU_SHAPE(2, 2), 0, 0, 0, 0));
    ck_assert(rt_tensor_equal(back, x));
    rt_tensor_unref(back);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* example 2: channels travel along: [1, 2, 2, 3] -> [4, 1, 1, 3] */
    x = tu_iota_f32(TU_SHAPE(1, 2, 2, 3), 1, 1);
    o = run3("SpaceToBatchND", x, TU_I64(TU_SHAPE(2), 2, 2), TU_I64(TU_SHAPE(2, 2), 0, 0, 0, 0));
    TU_CHECK_F32(o, TU_SHAPE(4, 1, 1, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* example 4: [2, 2, 4, 1], paddings [[0, 0], [2, 0]] -> [8, 1, 3, 1] */
    x = tu_iota_f32(TU_SHAPE(2, 2, 4, 1), 1, 1);
    o = run3("SpaceToBatchND", x, TU_I32(TU_SHAPE(2), 2, 2), TU_I32(TU_SHAPE(2, 2), 0, 0, 2, 0));
    TU_CHECK_F32(o, TU_SHAPE(8, 1, 3, 1), 0, 0, 1, 3, 0, 9, 11, 0, 2, 4, 0, 10, 12, 0, 5, 7, 0, 13,
                 15, 0, 6, 8, 0, 14, 16);
    back = run3("BatchToSpaceND", o, TU_I32(TU_SHAPE(2), 2, 2), TU_I32(TU_SHAPE(2, 2), 0, 0, 2, 0));
    ck_assert(rt_tensor_equal(back, x));
    rt_tensor_unref(back);
    rt_tensor_unref(o);
    /* errors: a size the block does not divide, a batch the blocks do not */
    rt_tensor *in[3] = {x, TU_I32(TU_SHAPE(2), 3, 2), TU_I32(TU_SHAPE(2, 2), 0, 0, 0, 0)};
    tu_run_fail(tu_node_new("SpaceToBatchND", "s2b_div"), in, 3, 1, MS_EINVAL, "not divisible");
    tu_run_fail(tu_node_new("BatchToSpaceND", "b2s_div"), in, 3, 1, MS_EINVAL, "not divisible");
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(TU_SHAPE(2), 0, 0);
    tu_run_fail(tu_node_new("SpaceToBatchND", "s2b_pads"), in, 3, 1, MS_EINVAL, "paddings");
    tu_unref(in, 3);
}
END_TEST

static rt_tensor *patches(rt_tensor *x, int64_t rate, const char *pad) {
    Tensorflow__NodeDef *d = tu_node_new("ExtractImagePatches", "patches");
    tu_attr_ints(d, "ksizes", 1, 3, 3, 1);
    tu_attr_ints(d, "strides", 1, 5, 5, 1);
    tu_attr_ints(d, "rates", 1, rate, rate, 1);
    tu_attr_s(d, "padding", pad);
    return tu_run1(d, &x, 1);
}

START_TEST(test_extract_patches) {
    /* tf.image.extract_patches' examples: a 10 x 10 image of 1..100, 3 x 3
     * patches every 5 pixels, rates 1 and 2 */
    rt_tensor *x = tu_iota_f32(TU_SHAPE(1, 10, 10, 1), 1, 1);
    rt_tensor *o = patches(x, 1, "VALID");
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 9), 0, 1, 2, 3, 11, 12, 13, 21, 22, 23, 6, 7, 8, 16, 17, 18,
                 26, 27, 28, 51, 52, 53, 61, 62, 63, 71, 72, 73, 56, 57, 58, 66, 67, 68, 76, 77,
                 78);
    rt_tensor_unref(o);
    o = patches(x, 2, "VALID");
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 9), 0, 1, 3, 5, 21, 23, 25, 41, 43, 45, 6, 8, 10, 26, 28, 30,
                 46, 48, 50, 51, 53, 55, 71, 73, 75, 91, 93, 95, 56, 58, 60, 76, 78, 80, 96, 98,
                 100);
    rt_tensor_unref(o);
    /* SAME pads: output 2 x 2 (ceil(10 / 5)), padding (5 + 3 - 10) / 2 = 0
     * before, so the same patches as VALID here */
    o = patches(x, 1, "SAME");
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(1, 2, 2, 9));
    ck_assert_float_eq(((float *)o->data)[0], 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* a 2 x 2 image, one 3 x 3 SAME patch with stride 2: total padding
     * (1 - 1) * 2 + 3 - 2 = 1, none before and 1 after (TensorFlow's SAME) */
    x = TU_F32(TU_SHAPE(1, 2, 2, 1), 1, 2, 3, 4);
    Tensorflow__NodeDef *d = tu_node_new("ExtractImagePatches", "p_same");
    tu_attr_ints(d, "ksizes", 1, 3, 3, 1);
    tu_attr_ints(d, "strides", 1, 2, 2, 1);
    tu_attr_ints(d, "rates", 1, 1, 1, 1);
    tu_attr_s(d, "padding", "SAME");
    o = tu_run1(d, &x, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 9), 0, 1, 2, 0, 3, 4, 0, 0, 0, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"space_batch_docs", test_space_batch_docs},
        {"extract_patches", test_extract_patches},
    };
    return tu_suite_main("kn_space", cases, sizeof(cases) / sizeof(cases[0]));
}
