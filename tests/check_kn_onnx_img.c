/* check_kn_onnx_img.c - our own ops for ONNX's image operators
 * (kernels/cpu/kn_cpu_onnx_img.c): OnnxRoiAlign, OnnxMaxUnpool, OnnxCol2Im, OnnxDeformConv,
 * against values worked out by hand from the ONNX operator definitions
 * (comments give the arithmetic), with empty tensors and hostile sizes. */
#include <check.h>
#include <math.h>

#include "util_node.h"

/* X (2, 1, 2, 2): batch 0 f(y, x) = 1 + x + 2y, batch 1 ten times that. */
static rt_tensor *ra_x(void) {
    return TU_F32(TU_SHAPE(2, 1, 2, 2), 1, 2, 3, 4, 10, 20, 30, 40);
}

static Tensorflow__NodeDef *ra_node(int64_t oh, int64_t ow, int64_t ratio, int max, int half) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxRoiAlign", "ra");
    tu_attr_i(d, "output_height", oh);
    tu_attr_i(d, "output_width", ow);
    tu_attr_i(d, "sampling_ratio", ratio);
    tu_attr_f(d, "spatial_scale", 1.0f);
    tu_attr_i(d, "mode", max);
    tu_attr_i(d, "half_pixel", half);
    return d;
}

static rt_tensor *ra(rt_tensor *x, rt_tensor *rois, rt_tensor *bi, int64_t oh, int64_t ow,
                     int64_t ratio, int max, int half) {
    rt_tensor *in[3] = {x, rois, bi};
    rt_tensor *o = tu_run1(ra_node(oh, ow, ratio, max, half), in, 3);
    rt_tensor_unref(rois);
    rt_tensor_unref(bi);
    return o;
}

START_TEST(test_roi_align) {
    rt_tensor *x = ra_x();
    /* output_half_pixel, roi (0, 0, 1, 1), one sample at (0.5, 0.5): the
     * four pixels a quarter each, (1 + 2 + 3 + 4) / 4 = 2.5; in batch 1, 25. */
    rt_tensor *o = ra(x, TU_F32(TU_SHAPE(2, 4), 0, 0, 1, 1, 0, 0, 1, 1), TU_I64(TU_SHAPE(2), 0, 1),
                      1, 1, 1, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(2, 1, 1, 1), 1e-6f, 2.5f, 25);
    rt_tensor_unref(o);
    /* half_pixel, roi (0, 0, 2, 2) shifted to (-0.5, -0.5)..(1.5, 1.5), 2x2
     * bins of 1, one sample each at the pixel centres 0 and 1: X itself. */
    o = ra(x, TU_F32(TU_SHAPE(1, 4), 0, 0, 2, 2), TU_I64(TU_SHAPE(1), 0), 2, 2, 1, 0, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 1, 2, 3, 4);
    rt_tensor_unref(o);
    /* roi (0, 0, 1, 1), 2x2 samples at 0.25 / 0.75: avg of f = 1.75, 2.25,
     * 2.75, 3.25 is 2.5; max takes per sample the largest weighted corner:
     * (0.25, 0.25): 0.5625*1; (y .25, x .75): 0.5625*2 = 1.125; (.75, .25):
     * 0.5625*3 = 1.6875; (.75, .75): 0.5625*4 = 2.25 -> 2.25. */
    o = ra(x, TU_F32(TU_SHAPE(1, 4), 0, 0, 1, 1), TU_I64(TU_SHAPE(1), 0), 1, 1, 2, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 1e-6f, 2.5f);
    rt_tensor_unref(o);
    o = ra(x, TU_F32(TU_SHAPE(1, 4), 0, 0, 1, 1), TU_I64(TU_SHAPE(1), 0), 1, 1, 2, 1, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 1e-6f, 2.25f);
    rt_tensor_unref(o);
    /* A sample beyond the image (5.5 > width 2) counts as 0. */
    o = ra(x, TU_F32(TU_SHAPE(1, 4), 5, 5, 6, 6), TU_I64(TU_SHAPE(1), 0), 1, 1, 1, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 0, 0);
    rt_tensor_unref(o);
    /* No rois: an empty (0, 1, 3, 2) output. */
    rt_tensor *r0 = NULL, *b0 = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 4), &r0), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT64, &TU_SHAPE(0), &b0), MS_OK);
    o = ra(x, r0, b0, 3, 2, 0, 0, 1);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 1, 3, 2));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_roi_align_hostile) {
    rt_tensor *in[3] = {ra_x(), TU_F32(TU_SHAPE(1, 4), 0, 0, 1, 1), TU_I64(TU_SHAPE(1), 2)};
    tu_run_fail(ra_node(1, 1, 1, 0, 0), in, 3, 1, MS_EINVAL, "batch index 2");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(1), 0);
    /* sampling_ratio 0 over a roi of 1e30 pixels: too many samples, not a hang */
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(1, 4), 0, 0, 1e30f, 1e30f);
    tu_run_fail(ra_node(1, 1, 0, 0, 0), in, 3, 1, MS_EINVAL, "too many samples");
    rt_tensor_unref(in[1]);
    /* A NaN extent (half_pixel: no 1x1 floor) has no sample count. */
    in[1] = TU_F32(TU_SHAPE(1, 4), 0, 0, NAN, 1);
    tu_run_fail(ra_node(1, 1, 0, 0, 1), in, 3, 1, MS_EINVAL, "too many samples");
    tu_run_fail(ra_node(0, 1, 1, 0, 0), in, 3, 1, MS_EINVAL, "output_height 0");
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(1, 3), 0, 0, 1);
    tu_run_fail(ra_node(1, 1, 1, 0, 0), in, 3, 1, MS_EINVAL, "(R, 4)");
    tu_unref(in, 3);
}
END_TEST

static Tensorflow__NodeDef *mu_node(void) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxMaxUnpool", "mu");
    tu_attr_ilist(d, "ksize", 2, (int64_t[]){2, 2});
    tu_attr_ilist(d, "strides", 2, (int64_t[]){2, 2});
    tu_attr_ilist(d, "pads", 4, (int64_t[]){0, 0, 0, 0});
    return d;
}

START_TEST(test_max_unpool) {
    /* 2x2 pooled by 2x2 windows, stride 2: the default output is 4x4; flat
     * indices 5, 7, 13, 15 are (1, 1), (1, 3), (3, 1), (3, 3). */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(1, 1, 2, 2), 5, 6, 7, 8),
                        TU_I64(TU_SHAPE(1, 1, 2, 2), 5, 7, 13, 15),
                        TU_I64(TU_SHAPE(4), 1, 1, 5, 5)};
    rt_tensor *o = tu_run1(mu_node(), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 4, 4), 0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8);
    rt_tensor_unref(o);
    /* output_shape 5x5: the same coordinates, zeros after. */
    o = tu_run1(mu_node(), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 5, 5), 0, 0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0,
                 8, 0, 0, 0, 0, 0, 0);
    rt_tensor_unref(o);
    /* An output too small for (1, 3), an index past the 16 elements, a
     * negative one: refused. */
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(4), 1, 1, 3, 3);
    tu_run_fail(mu_node(), in, 3, 1, MS_EINVAL, "outside");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(1, 1, 2, 2), 5, 7, 13, 16);
    tu_run_fail(mu_node(), in, 2, 1, MS_EINVAL, "index 16");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(1, 1, 2, 2), -1, 7, 13, 15);
    tu_run_fail(mu_node(), in, 2, 1, MS_EINVAL, "index -1");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(4), 1, 1, (int64_t)1 << 40, (int64_t)1 << 40);
    tu_run_fail(mu_node(), in, 3, 1, MS_EINVAL, "too large");
    tu_unref(in, 3);
    /* Empty X (no rows): an output of zero rows too. */
    rt_tensor *e[2] = {NULL, NULL};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(1, 1, 0, 2), &e[0]), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT64, &TU_SHAPE(1, 1, 0, 2), &e[1]), MS_OK);
    o = tu_run1(mu_node(), e, 2);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(1, 1, 0, 4));
    rt_tensor_unref(o);
    tu_unref(e, 2);
}
END_TEST

static Tensorflow__NodeDef *c2i_node(int64_t stride) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxCol2Im", "c2i");
    if (stride > 1) tu_attr_ilist(d, "strides", 1, (int64_t[]){stride});
    return d;
}

START_TEST(test_col2im) {
    /* One 2x2 block filling a 2x2 image: the column is the image. */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4), TU_I64(TU_SHAPE(2), 2, 2),
                        TU_I64(TU_SHAPE(2), 2, 2)};
    rt_tensor *o = tu_run1(tu_node_new("OnnxCol2Im", "c2i"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 0, 1, 2, 3, 4);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* 1-D image 3, block 2: two windows at 0 and 1; row k of the input is
     * block element k: pos 0 = 1, pos 1 = 2 + 3 (overlap adds), pos 2 = 4. */
    rt_tensor *in1[3] = {TU_F32(TU_SHAPE(1, 2, 2), 1, 2, 3, 4), TU_I64(TU_SHAPE(1), 3),
                         TU_I64(TU_SHAPE(1), 2)};
    o = tu_run1(c2i_node(1), in1, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3), 0, 1, 5, 4);
    rt_tensor_unref(o);
    /* image 4, stride 2: windows at 0 and 2: pos 0 = 1, 2 = 2, 1 = 3, 3 = 4. */
    rt_tensor_unref(in1[1]);
    in1[1] = TU_I64(TU_SHAPE(1), 4);
    o = tu_run1(c2i_node(2), in1, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 4), 0, 1, 3, 2, 4);
    rt_tensor_unref(o);
    /* image 4 with stride 1 has 3 windows, not 2: refused naming them. */
    tu_run_fail(c2i_node(1), in1, 3, 1, MS_EINVAL, "blocks that fit");
    rt_tensor_unref(in1[2]);
    in1[2] = TU_I64(TU_SHAPE(1), 0);
    tu_run_fail(c2i_node(1), in1, 3, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in1[1]);
    rt_tensor_unref(in1[2]);
    in1[1] = TU_I64(TU_SHAPE(1), (int64_t)1 << 50);
    in1[2] = TU_I64(TU_SHAPE(1), 2);
    tu_run_fail(c2i_node(1), in1, 3, 1, MS_EINVAL, "out of range");
    tu_unref(in1, 3);
    /* No images (N 0): an empty output of the image's shape. */
    rt_tensor *e[3] = {NULL, TU_I64(TU_SHAPE(2), 2, 2), TU_I64(TU_SHAPE(2), 2, 2)};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 4, 1), &e[0]), MS_OK);
    o = tu_run1(tu_node_new("OnnxCol2Im", "c2i"), e, 3);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 1, 2, 2));
    rt_tensor_unref(o);
    tu_unref(e, 3);
}
END_TEST

static Tensorflow__NodeDef *dc_node(void) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxDeformConv", "dc");
    tu_attr_ilist(d, "strides", 2, (int64_t[]){1, 1});
    tu_attr_ilist(d, "pads", 4, (int64_t[]){0, 0, 0, 0});
    tu_attr_ilist(d, "dilations", 2, (int64_t[]){1, 1});
    tu_attr_i(d, "group", 1);
    tu_attr_i(d, "offset_group", 1);
    return d;
}

START_TEST(test_deform_conv) {
    /* X f(y, x) = 1 + x + 2y on 2x2, a 1x1 kernel of weight 2. Offsets 0:
     * 2 X. Offsets (dy 0, dx 0.5): samples 1.5, (x 1.5: half of pixel 2,
     * the other half outside) 1, 3.5, 2, doubled 3, 2, 7, 4. With mask 0.5
     * and bias 1: 2.5, 2, 4.5, 3. */
    rt_tensor *none = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0), &none), MS_OK);
    rt_tensor *in[5] = {TU_F32(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4), TU_F32(TU_SHAPE(1, 1, 1, 1), 2),
                        TU_F32(TU_SHAPE(1, 2, 2, 2), 0, 0, 0, 0, 0, 0, 0, 0), none, none};
    rt_tensor *o = tu_run1(dc_node(), in, 5);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 2, 4, 6, 8);
    rt_tensor_unref(o);
    for (int i = 4; i < 8; i++)
        ((float *)in[2]->data)[i] = 0.5f;
    o = tu_run1(dc_node(), in, 5);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 3, 2, 7, 4);
    rt_tensor_unref(o);
    in[3] = TU_F32(TU_SHAPE(1), 1);
    in[4] = TU_F32(TU_SHAPE(1, 1, 2, 2), 0.5f, 0.5f, 0.5f, 0.5f);
    o = tu_run1(dc_node(), in, 5);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 2.5f, 2, 4.5f, 3);
    rt_tensor_unref(o);
    /* Offsets far outside or NaN sample zeros (only the bias remains). */
    ((float *)in[2]->data)[0] = 1e30f, ((float *)in[2]->data)[1] = NAN;
    o = tu_run1(dc_node(), in, 5);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 1, 1, 4.5f, 3);
    rt_tensor_unref(o);
    /* An offset of the wrong shape is refused naming the shapes. */
    rt_tensor *bad[5] = {in[0], in[1], TU_F32(TU_SHAPE(1, 2, 1, 2), 0, 0, 0, 0), in[3], in[4]};
    tu_run_fail(dc_node(), bad, 5, 1, MS_EINVAL, "do not fit");
    rt_tensor_unref(bad[2]);
    tu_unref(in, 5);
    /* No images: an empty (0, 1, 2, 2) output. */
    rt_tensor *e[5] = {NULL, TU_F32(TU_SHAPE(1, 1, 1, 1), 2), NULL, none, none};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 1, 2, 2), &e[0]), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 2, 2, 2), &e[2]), MS_OK);
    o = tu_run1(dc_node(), e, 5);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 1, 2, 2));
    rt_tensor_unref(o);
    tu_unref(e, 3);
    rt_tensor_unref(none);
}
END_TEST

/* A cancelled request stops RoiAlign, Col2Im and DeformConv with CANCELLED
 * (they poll once per output row or block); the same call not cancelled runs. */
static void check_cancel(Tensorflow__NodeDef *d, rt_tensor **in, int nin) {
    rt_tensor_unref(tu_check_cancel(d, in, nin));
}

START_TEST(test_cancel) {
    rt_tensor *ra_in[3] = {ra_x(), TU_F32(TU_SHAPE(1, 4), 0, 0, 1, 1), TU_I64(TU_SHAPE(1), 0)};
    check_cancel(ra_node(2, 2, 1, 0, 0), ra_in, 3);
    tu_unref(ra_in, 3);
    rt_tensor *c2i_in[3] = {TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4), TU_I64(TU_SHAPE(2), 2, 2),
                            TU_I64(TU_SHAPE(2), 2, 2)};
    check_cancel(tu_node_new("OnnxCol2Im", "c2i"), c2i_in, 3);
    tu_unref(c2i_in, 3);
    rt_tensor *none = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0), &none), MS_OK);
    rt_tensor *dc_in[5] = {TU_F32(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4),
                           TU_F32(TU_SHAPE(1, 1, 1, 1), 2),
                           TU_F32(TU_SHAPE(1, 2, 2, 2), 0, 0, 0, 0, 0, 0, 0, 0), none, none};
    check_cancel(dc_node(), dc_in, 5);
    tu_unref(dc_in, 3);
    rt_tensor_unref(none);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"roi_align", test_roi_align},
        {"roi_align_hostile", test_roi_align_hostile},
        {"max_unpool", test_max_unpool},
        {"col2im", test_col2im},
        {"deform_conv", test_deform_conv},
        {"cancel", test_cancel},
    };
    return tu_suite_main("kn_onnx_img", cases, sizeof(cases) / sizeof(cases[0]));
}
