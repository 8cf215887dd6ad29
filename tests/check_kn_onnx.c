/* check_kn_onnx.c - our own ops for ONNX operators (kernels/cpu/kn_cpu_onnx.c):
 * OnnxGridSample, OnnxScatterND, OnnxScatterElements, OnnxGatherElements,
 * OnnxLpPool, OnnxPool,
 * OnnxNonMaxSuppression, OnnxDFT (kn_cpu_fft.c), OnnxCausalConvWithState, OnnxUnique, OnnxDet,
 * OnnxReverseSequence, against
 * values worked out by hand from the ONNX operator definitions (comments give the
 * arithmetic), with empty tensors and hostile values. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "util_node.h"

enum { NEAREST, LINEAR, CUBIC };
enum { ZEROS, BORDER, REFLECT };

static rt_tensor *gs(rt_tensor *x, rt_tensor *grid, int mode, int pad, int align) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxGridSample", "gs");
    tu_attr_i(d, "mode", mode);
    tu_attr_i(d, "padding", pad);
    tu_attr_i(d, "align_corners", align);
    rt_tensor *in[2] = {x, grid};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(grid);
    return o;
}

START_TEST(test_grid_sample_linear) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4);
    /* align_corners: -1 / 1 are the corner pixels' centres; (0, 0) the
     * middle, (1 + 2 + 3 + 4) / 4; grid holds (x, y). */
    rt_tensor *o = gs(x, TU_F32(TU_SHAPE(1, 1, 4, 2), -1, -1, 1, 1, 0, 0, 1, -1), LINEAR, ZEROS, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 4), 1e-6f, 1, 4, 2.5f, 2);
    rt_tensor_unref(o);
    /* Without align_corners -1 is the outer edge, pixel coordinate -0.5:
     * a quarter of pixel (0, 0) with zeros; the border and reflection
     * repeat pixel (0, 0) for the three outside neighbours. (1, 1) is 1.5:
     * a quarter of pixel (1, 1). */
    const int pads[3] = {ZEROS, BORDER, REFLECT};
    const float want_a[3] = {0.25f, 1, 1}, want_b[3] = {1, 4, 4};
    for (int p = 0; p < 3; p++) {
        o = gs(x, TU_F32(TU_SHAPE(1, 1, 2, 2), -1, -1, 1, 1), LINEAR, pads[p], 0);
        float w[2] = {want_a[p], want_b[p]};
        tu_check_f32(o, TU_SHAPE(1, 1, 1, 2), w, 2, 1e-6f);
        rt_tensor_unref(o);
    }
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_grid_sample_nearest_cubic) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4);
    /* No align: (0, 0) -> 0.5, rounded half to even -> pixel (0, 0);
     * (0.5, 0.5) -> 1.0 -> pixel (1, 1); x = 1 -> 1.5 -> 2: outside, so 0
     * with zeros and column 1 with border (y 0 -> 0.5 -> 0). */
    rt_tensor *o = gs(x, TU_F32(TU_SHAPE(1, 1, 3, 2), 0, 0, 0.5f, 0.5f, 1, 0), NEAREST, ZEROS, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 3), 0, 1, 4, 0);
    rt_tensor_unref(o);
    o = gs(x, TU_F32(TU_SHAPE(1, 1, 1, 2), 1, 0), NEAREST, BORDER, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 0, 2);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* Cubic (Keys, a = -0.75): at a pixel centre the weights are 0, 1, 0, 0,
     * so (0, 0) with align_corners on 3 x 3 is the middle pixel; a constant
     * image stays constant anywhere with border padding (weights sum to 1). */
    x = tu_iota_f32(TU_SHAPE(1, 1, 3, 3), 0, 1);
    o = gs(x, TU_F32(TU_SHAPE(1, 1, 1, 2), 0, 0), CUBIC, ZEROS, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 1e-6f, 4);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(1, 1, 3, 3), 5, 5, 5, 5, 5, 5, 5, 5, 5);
    o = gs(x, TU_F32(TU_SHAPE(1, 1, 2, 2), 0.3f, -0.2f, -0.9f, 0.95f), CUBIC, BORDER, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 2), 1e-5f, 5, 5);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_grid_sample_3d_and_hostile) {
    /* (1, 1, 2, 2, 2) of 0..7, align_corners: the centre is the mean 3.5;
     * (x, y, z) = (1, -1, -1) is z 0, y 0, x 1: element 1. */
    rt_tensor *x = tu_iota_f32(TU_SHAPE(1, 1, 2, 2, 2), 0, 1);
    rt_tensor *o = gs(x, TU_F32(TU_SHAPE(1, 1, 1, 2, 3), 0, 0, 0, 1, -1, -1), LINEAR, ZEROS, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1, 2), 1e-6f, 3.5f, 1);
    rt_tensor_unref(o);
    rt_tensor *in[2] = {x, TU_F32(TU_SHAPE(1, 1, 1, 1, 3), 0, 0, 0)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxGridSample", "gs_cubic3d");
    tu_attr_i(d, "mode", CUBIC);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "not supported");
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(1, 1, 1, 2), 0, 0);
    tu_run_fail(tu_node_new("OnnxGridSample", "gs_rank"), in, 2, 1, MS_EINVAL, "grid");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(x);
    /* Far-away and NaN coordinates: 0 outside with zeros, the border pixel
     * with border, NaN for NaN; never an out-of-range read. */
    x = TU_F32(TU_SHAPE(1, 1, 2, 2), 1, 2, 3, 4);
    const int modes[3] = {NEAREST, LINEAR, CUBIC};
    for (int m = 0; m < 3; m++) {
        o = gs(x, TU_F32(TU_SHAPE(1, 1, 2, 2), 1e30f, 1e30f, NAN, 0), modes[m], ZEROS, 0);
        TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 2), 0, 0, NAN);
        rt_tensor_unref(o);
        o = gs(x, TU_F32(TU_SHAPE(1, 1, 1, 2), -1e30f, -1e30f), modes[m], REFLECT, 0);
        ck_assert(isfinite(((float *)o->data)[0]));
        rt_tensor_unref(o);
    }
    o = gs(x, TU_F32(TU_SHAPE(1, 1, 1, 2), 1e30f, 1e30f), LINEAR, BORDER, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 0, 4);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* Empty batch and empty input planes. */
    rt_tensor *e, *eg;
    rt_shape es = {.rank = 4, .dim = {0, 1, 2, 2}}, egs = {.rank = 4, .dim = {0, 1, 3, 2}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &es, &e), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &egs, &eg), MS_OK);
    o = gs(e, eg, LINEAR, ZEROS, 0);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 1, 1, 3));
    rt_tensor_unref(o);
    rt_tensor_unref(e);
    rt_shape zs = {.rank = 4, .dim = {1, 1, 0, 2}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &zs, &e), MS_OK);
    o = gs(e, TU_F32(TU_SHAPE(1, 1, 1, 2), 0, 0), LINEAR, ZEROS, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1, 1), 0, 0);
    rt_tensor_unref(o);
    in[0] = e;
    in[1] = TU_F32(TU_SHAPE(1, 1, 1, 2), 0, 0);
    d = tu_node_new("OnnxGridSample", "gs_empty_border");
    tu_attr_i(d, "padding", BORDER);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "empty");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(e);
}
END_TEST

static rt_tensor *scatter(const char *op, int red, int axis, rt_tensor *data, rt_tensor *ix,
                          rt_tensor *upd) {
    Tensorflow__NodeDef *d = tu_node_new(op, "sc");
    tu_attr_i(d, "reduction", red);
    tu_attr_i(d, "axis", axis);
    rt_tensor *in[3] = {data, ix, upd};
    rt_tensor *o = tu_run1(d, in, 3);
    rt_tensor_unref(ix);
    rt_tensor_unref(upd);
    return o;
}

START_TEST(test_scatter_nd) {
    rt_tensor *x = TU_F32(TU_SHAPE(4), 1, 2, 3, 4);
    /* indices [[1], [3]] take updates 10 and 20 at 1 and 3; -1 is 3. */
    const float want[5][4] = {
        {1, 10, 3, 20}, {1, 12, 3, 24}, {1, 20, 3, 80}, {1, 10, 3, 20}, {1, 2, 3, 4}};
    for (int red = 0; red < 5; red++) {
        rt_tensor *o = scatter("OnnxScatterND", red, 0, x, TU_I64(TU_SHAPE(2, 1), 1, -1),
                               TU_F32(TU_SHAPE(2), 10, 20));
        tu_check_f32(o, TU_SHAPE(4), want[red], 4, 0);
        rt_tensor_unref(o);
    }
    /* Duplicates add up; whole rows as slices. */
    rt_tensor *o =
        scatter("OnnxScatterND", 1, 0, x, TU_I64(TU_SHAPE(2, 1), 0, 0), TU_F32(TU_SHAPE(2), 1, 1));
    TU_CHECK_F32(o, TU_SHAPE(4), 0, 3, 2, 3, 4);
    rt_tensor_unref(o);
    rt_tensor *m = TU_I32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    o = scatter("OnnxScatterND", 0, 0, m, TU_I64(TU_SHAPE(1, 1), 1), TU_I32(TU_SHAPE(1, 2), 7, 8));
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 1, 2, 7, 8);
    rt_tensor_unref(o);
    /* No indices: data unchanged. */
    rt_tensor *ei, *eu;
    rt_shape eis = {.rank = 2, .dim = {0, 1}}, eus = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT64, &eis, &ei), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &eus, &eu), MS_OK);
    o = scatter("OnnxScatterND", 0, 0, x, ei, eu);
    TU_CHECK_F32(o, TU_SHAPE(4), 0, 1, 2, 3, 4);
    rt_tensor_unref(o);
    rt_tensor *in[3] = {x, TU_I64(TU_SHAPE(1, 1), 4), TU_F32(TU_SHAPE(1), 9)};
    tu_run_fail(tu_node_new("OnnxScatterND", "nd_range"), in, 3, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(1, 2), 0, 0);
    tu_run_fail(tu_node_new("OnnxScatterND", "nd_fit"), in, 3, 1, MS_EINVAL, "do not fit");
    tu_unref(in + 1, 2);
    rt_tensor_unref(x);
    rt_tensor_unref(m);
}
END_TEST

START_TEST(test_gather_elements) {
    rt_tensor *x = TU_U8(TU_SHAPE(2, 3), 10, 11, 12, 20, 21, 22);
    /* axis 1, indices (2, 2): row 0 takes columns 2 and -3 (0), row 1
     * columns 1 and 1. */
    Tensorflow__NodeDef *d = tu_node_new("OnnxGatherElements", "ge");
    tu_attr_i(d, "axis", 1);
    rt_tensor *in[2] = {x, TU_I64(TU_SHAPE(2, 2), 2, -3, 1, 1)};
    rt_tensor *o = tu_run1(d, in, 2);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(2, 2), 12, 10, 21, 21);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    /* axis 0 with int32 indices of shape (1, 3): x[i][j] for (i, j) =
     * (1, 0), (0, 1), (1, 2). */
    d = tu_node_new("OnnxGatherElements", "ge0");
    in[1] = TU_I32(TU_SHAPE(1, 3), 1, 0, 1);
    o = tu_run1(d, in, 2);
    TU_CHECK_INT(o, RT_DT_UINT8, TU_SHAPE(1, 3), 20, 11, 22);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    d = tu_node_new("OnnxGatherElements", "ge_range");
    tu_attr_i(d, "axis", 1);
    in[1] = TU_I64(TU_SHAPE(1, 1), 3);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(3, 1), 0, 0, 0); /* 3 rows of 2 */
    d = tu_node_new("OnnxGatherElements", "ge_fit");
    tu_attr_i(d, "axis", 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "do not fit");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_scatter_elements) {
    rt_tensor *z = TU_F32(TU_SHAPE(2, 3), 0, 0, 0, 0, 0, 0);
    /* axis 1: row 0 gets 5 at column 2, row 1 gets 6 at column 0 (-3). */
    rt_tensor *o = scatter("OnnxScatterElements", 0, 1, z, TU_I64(TU_SHAPE(2, 1), 2, -3),
                           TU_F32(TU_SHAPE(2, 1), 5, 6));
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 0, 0, 5, 6, 0, 0);
    rt_tensor_unref(o);
    /* axis 0 on (3, 2) of 0..5: [[2, 0]] puts 7 at (2, 0) and 8 at (0, 1);
     * with max only the larger stays (7 > 4, 8 > 1); with min neither. */
    rt_tensor *x = TU_I64(TU_SHAPE(3, 2), 0, 1, 2, 3, 4, 5);
    o = scatter("OnnxScatterElements", 3, 0, x, TU_I64(TU_SHAPE(1, 2), 2, 0),
                TU_I64(TU_SHAPE(1, 2), 7, 8));
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(3, 2), 0, 8, 2, 3, 7, 5);
    rt_tensor_unref(o);
    o = scatter("OnnxScatterElements", 4, 0, x, TU_I64(TU_SHAPE(1, 2), 2, 0),
                TU_I64(TU_SHAPE(1, 2), 7, 8));
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(3, 2), 0, 1, 2, 3, 4, 5);
    rt_tensor_unref(o);
    rt_tensor *in[3] = {z, TU_I64(TU_SHAPE(1, 1), 3), TU_F32(TU_SHAPE(1, 1), 1)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxScatterElements", "se_range");
    tu_attr_i(d, "axis", 1);
    tu_run_fail(d, in, 3, 1, MS_EINVAL, "out of range");
    tu_unref(in + 1, 2);
    in[1] = TU_I64(TU_SHAPE(1), 0);
    in[2] = TU_F32(TU_SHAPE(1), 1);
    tu_run_fail(tu_node_new("OnnxScatterElements", "se_rank"), in, 3, 1, MS_EINVAL, "ranks");
    tu_unref(in + 1, 2);
    in[1] = TU_I64(TU_SHAPE(1, 1), 0);
    in[2] = TU_F32(TU_SHAPE(1, 1), 1);
    d = tu_node_new("OnnxScatterElements", "se_red");
    tu_attr_i(d, "reduction", 9);
    tu_run_fail(d, in, 3, 1, MS_EINVAL, "reduction");
    tu_unref(in + 1, 2);
    rt_tensor_unref(z);
    rt_tensor_unref(x);
}
END_TEST

static rt_tensor *lp(rt_tensor *x, int64_t k, int64_t pb, int64_t pe, int64_t dil, int64_t p) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxLpPool", "lp");
    tu_attr_ints(d, "ksize", k);
    tu_attr_ints(d, "strides", 1);
    tu_attr_ints(d, "dilations", dil);
    tu_attr_ints(d, "pads", pb, pe);
    tu_attr_i(d, "p", p);
    return tu_run1(d, &x, 1);
}

START_TEST(test_lp_pool) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 3), 3, -4, 0);
    /* p 2 over windows of 2: |(3, -4)| = 5, |(-4, 0)| = 4; padded by one on
     * each side the outer windows see 3 and 0 alone. p 1 with dilation 2:
     * |3| + |0|. p 3 of (3, -4): cbrt(27 + 64). */
    rt_tensor *o = lp(x, 2, 0, 0, 1, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2), 1e-6f, 5, 4);
    rt_tensor_unref(o);
    o = lp(x, 2, 1, 1, 1, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 4), 1e-6f, 3, 5, 4, 0);
    rt_tensor_unref(o);
    o = lp(x, 2, 0, 0, 2, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 1), 1e-6f, 3);
    rt_tensor_unref(o);
    o = lp(x, 2, 0, 0, 1, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2), 1e-5f, cbrtf(91), 4);
    rt_tensor_unref(o);
    /* A window wider than the padded input, and an empty batch. */
    Tensorflow__NodeDef *d = tu_node_new("OnnxLpPool", "lp_wide");
    tu_attr_ints(d, "ksize", 5);
    tu_attr_ints(d, "strides", 1);
    tu_attr_ints(d, "dilations", 1);
    tu_attr_ints(d, "pads", 0, 0);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "does not fit");
    rt_tensor_unref(x);
    rt_shape es = {.rank = 3, .dim = {0, 2, 3}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &es, &x), MS_OK);
    o = lp(x, 2, 0, 0, 1, 2);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 2, 2));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

static rt_tensor *pool(rt_tensor *x, int mode, int64_t k, int64_t st, int64_t dil, int64_t pb,
                       int64_t pe, int ceil_mode, int cip) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxPool", "pool");
    tu_attr_ints(d, "ksize", k);
    tu_attr_ints(d, "strides", st);
    tu_attr_ints(d, "dilations", dil);
    tu_attr_ints(d, "pads", pb, pe);
    tu_attr_i(d, "mode", mode);
    tu_attr_i(d, "ceil_mode", ceil_mode);
    tu_attr_i(d, "count_include_pad", cip);
    return tu_run1(d, &x, 1);
}

START_TEST(test_pool_dilated) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 5), 1, 5, 2, 8, 3);
    /* max, kernel 2 dilation 2 (extent 3), stride 1: taps (0, 2), (1, 3),
     * (2, 4) -> 2, 8, 3 */
    rt_tensor *o = pool(x, 1, 2, 1, 2, 0, 0, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3), 0, 2, 8, 3);
    rt_tensor_unref(o);
    /* mean, stride 3, ceil: (5 - 3) / 3 rounds up to 1 -> 2 windows; the
     * second's taps 3 and 5, 5 outside X and the (empty) padding: 8 / 1;
     * the first (1 + 2) / 2 */
    o = pool(x, 2, 2, 3, 2, 0, 0, 1, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2), 1e-6f, 1.5f, 8);
    rt_tensor_unref(o);
    /* pads 1, 1, ceil: ceil(4 / 3) + 1 = 3 windows, the last starting at 6 >=
     * 5 + 1 (in the end padding) is dropped. The first's taps -1 (pad) and 1
     * (5): count_include_pad 5 / 2, else 5 / 1; the second (2 + 3) / 2. */
    o = pool(x, 2, 2, 3, 2, 1, 1, 1, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2), 1e-6f, 2.5f, 2.5f);
    rt_tensor_unref(o);
    o = pool(x, 2, 2, 3, 2, 1, 1, 1, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2), 1e-6f, 5, 2.5f);
    rt_tensor_unref(o);
    /* max, kernel 1 stride 2, end pad 1, ceil: ceil(5 / 2) + 1 = 4, the
     * window at 6 >= 5 dropped -> taps 0, 2, 4 */
    o = pool(x, 1, 1, 2, 1, 0, 1, 1, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3), 0, 1, 2, 3);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* MaxPool's Indices: 2 x 3 plane of channel 1 (flat offset 6), 2 x 2
     * windows, stride 1: maxima 9 at (0, 1) and 10 at (1, 2) -> 6 + 1, 6 + 5;
     * storage_order 1 counts (h, w) as w * 2 + h: 6 + 2, 6 + 5. Channel 0
     * is all 0: ties take the first tap, (0, 0) and (0, 1). */
    x = TU_F32(TU_SHAPE(1, 2, 2, 3), 0, 0, 0, 0, 0, 0, 1, 9, 2, 3, 4, 10);
    for (int order = 0; order < 2; order++) {
        Tensorflow__NodeDef *pd = tu_node_new("OnnxPool", "pool_ix");
        tu_attr_ints(pd, "ksize", 2, 2);
        tu_attr_ints(pd, "strides", 1, 1);
        tu_attr_ints(pd, "dilations", 1, 1);
        tu_attr_ints(pd, "pads", 0, 0, 0, 0);
        tu_attr_i(pd, "mode", 1);
        tu_attr_i(pd, "storage_order", order);
        rt_tensor *po[2] = {NULL, NULL};
        ck_assert_int_eq(tu_run(pd, &x, 1, po, 2), MS_OK);
        TU_CHECK_F32(po[0], TU_SHAPE(1, 2, 1, 2), 0, 0, 0, 9, 10);
        if (order == 0)
            TU_CHECK_INT(po[1], RT_DT_INT64, TU_SHAPE(1, 2, 1, 2), 0, 1, 7, 11);
        else
            TU_CHECK_INT(po[1], RT_DT_INT64, TU_SHAPE(1, 2, 1, 2), 0, 2, 8, 11);
        tu_unref(po, 2);
        tu_node_free(pd);
    }
    /* a window of padding only: X (1), taps -1 and 1 */
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(1, 1, 1), 7);
    Tensorflow__NodeDef *d = tu_node_new("OnnxPool", "pool_pad");
    tu_attr_ints(d, "ksize", 2);
    tu_attr_ints(d, "strides", 1);
    tu_attr_ints(d, "dilations", 2);
    tu_attr_ints(d, "pads", 1, 1);
    tu_attr_i(d, "mode", 1);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "no element");
    rt_tensor_unref(x);
    /* an empty batch */
    rt_shape es = {.rank = 3, .dim = {0, 1, 5}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &es, &x), MS_OK);
    o = pool(x, 2, 2, 1, 2, 0, 0, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 1, 3));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

static rt_tensor *nms(rt_tensor *boxes, rt_tensor *scores, int64_t maxk, float iou, float thr,
                      int use_thr, int center) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxNonMaxSuppression", "nms");
    tu_attr_i(d, "center_point_box", center);
    tu_attr_i(d, "use_score_threshold", use_thr);
    rt_tensor *in[5] = {boxes, scores, TU_I64(TU_SCALAR, maxk), TU_F32(TU_SCALAR, iou),
                        TU_F32(TU_SCALAR, thr)};
    rt_tensor *o = tu_run1(d, in, 5);
    tu_unref(in + 2, 3);
    return o;
}

START_TEST(test_nms) {
    /* Three unit boxes (y1, x1, y2, x2): box 1 is box 0 moved by 0.5 in x
     * (IoU 0.5 / 1.5 = 1/3), box 2 far away. Scores 0.9, 0.8, 0.7 in class
     * 0 and reversed in class 1. */
    rt_tensor *b = TU_F32(TU_SHAPE(1, 3, 4), 0, 0, 1, 1, 0, 0.5f, 1, 1.5f, 5, 5, 6, 6);
    rt_tensor *s = TU_F32(TU_SHAPE(1, 2, 3), 0.9f, 0.8f, 0.7f, 0.7f, 0.8f, 0.9f);
    /* IoU threshold 0.3 < 1/3: box 1 goes in class 0, box 0 in class 1. */
    rt_tensor *o = nms(b, s, 3, 0.3f, 0, 0, 0);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(4, 3), 0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1);
    rt_tensor_unref(o);
    /* Threshold 0.5 keeps all; at most 2 per class; score > 0.75 drops 0.7. */
    o = nms(b, s, 2, 0.5f, 0.75f, 1, 0);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(4, 3), 0, 0, 0, 0, 0, 1, 0, 1, 2, 0, 1, 1);
    rt_tensor_unref(o);
    /* No boxes wanted: an empty (0, 3) result. Centre format (xc, yc, w, h)
     * of the same boxes gives the same answer as the corners. */
    o = nms(b, s, 0, 0.5f, 0, 0, 0);
    tu_check_shape(o, RT_DT_INT64, TU_SHAPE(0, 3));
    rt_tensor_unref(o);
    rt_tensor *bc = TU_F32(TU_SHAPE(1, 3, 4), 0.5f, 0.5f, 1, 1, 1, 0.5f, 1, 1, 5.5f, 5.5f, 1, 1);
    o = nms(bc, s, 3, 0.3f, 0, 0, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(4, 3), 0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1);
    rt_tensor_unref(o);
    rt_tensor *in[5] = {b, TU_F32(TU_SHAPE(1, 1, 2), 1, 2), TU_I64(TU_SCALAR, 1),
                        TU_F32(TU_SCALAR, 0), TU_F32(TU_SCALAR, 0)};
    tu_run_fail(tu_node_new("OnnxNonMaxSuppression", "nms_bad"), in, 5, 1, MS_EINVAL, "scores");
    tu_unref(in + 1, 4);
    tu_unref((rt_tensor *[]){b, s, bc}, 3);
}
END_TEST

static rt_tensor *dft(rt_tensor *x, int64_t len, int inv, int one) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxDFT", "dft");
    tu_attr_i(d, "axis", 1);
    tu_attr_i(d, "inverse", inv);
    tu_attr_i(d, "onesided", one);
    rt_tensor *in[2] = {x, TU_I64(TU_SCALAR, len)};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(in[1]);
    return o;
}

START_TEST(test_dft) {
    /* DFT of (1, 2, 3, 4): 10, -2 + 2i, -2, -2 - 2i; one-sided keeps the
     * first three; their inverse (N = 4, Hermitian) is the signal again;
     * dft_length 2 takes (1, 2): 3, -1. */
    rt_tensor *x = TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4);
    rt_tensor *o = dft(x, -1, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 4, 2), 1e-5f, 10, 0, -2, 2, -2, 0, -2, -2);
    rt_tensor_unref(o);
    o = dft(x, -1, 0, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 3, 2), 1e-5f, 10, 0, -2, 2, -2, 0);
    rt_tensor *back = dft(o, -1, 1, 1);
    TU_CHECK_F32(back, TU_SHAPE(1, 4, 1), 1e-5f, 1, 2, 3, 4);
    tu_unref((rt_tensor *[]){o, back}, 2);
    o = dft(x, 2, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2), 1e-5f, 3, 0, -1, 0);
    rt_tensor_unref(o);
    rt_tensor *in[2] = {x, TU_I64(TU_SCALAR, 0)};
    tu_run_fail(tu_node_new("OnnxDFT", "dft_len0"), in, 2, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in[1]);
    rt_tensor_unref(x);
    in[0] = TU_F32(TU_SHAPE(1, 1, 3), 1, 2, 3);
    in[1] = TU_I64(TU_SCALAR, -1);
    tu_run_fail(tu_node_new("OnnxDFT", "dft_last3"), in, 2, 1, MS_EINVAL, "1 or 2");
    tu_unref(in, 2);
}
END_TEST

/* The DFT of complex x (n points) by its definition, in double:
 * X[k] = sum_j x[j] exp(-+2 pi i j k / n), scaled 1 / n when inverse. */
static void naive_dft(const float *x, int64_t n, int inv, double *out) {
    for (int64_t k = 0; k < n; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n; j++) {
            double a = (inv ? 2 : -2) * M_PI * (double)((j * k) % n) / (double)n;
            re += x[2 * j] * cos(a) - x[2 * j + 1] * sin(a);
            im += x[2 * j] * sin(a) + x[2 * j + 1] * cos(a);
        }
        out[2 * k] = inv ? re / (double)n : re;
        out[2 * k + 1] = inv ? im / (double)n : im;
    }
}

START_TEST(test_dft_lengths) {
    /* Complex signals of lengths with small factors, a prime KissFFT takes
     * (7) and one above the Bluestein threshold (257), forward and inverse,
     * against the definition; x[j] = (sin j, cos 3j). */
    const int64_t lens[] = {1, 6, 7, 16, 257};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int inv = 0; inv < 2; inv++) {
            int64_t n = lens[li];
            rt_tensor *x = NULL;
            ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(1, n, 2), &x), MS_OK);
            float *xd = x->data;
            for (int64_t j = 0; j < n; j++)
                xd[2 * j] = sinf((float)j), xd[2 * j + 1] = cosf(3.0f * (float)j);
            double *want = malloc((size_t)n * 2 * sizeof(double));
            naive_dft(xd, n, inv, want);
            rt_tensor *o = dft(x, -1, inv, 0);
            tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(1, n, 2));
            const float *od = o->data;
            for (int64_t i = 0; i < 2 * n; i++)
                ck_assert_msg(fabs(od[i] - want[i]) <= 1e-4 * (double)n,
                              "n %lld inv %d [%lld]: %g, want %g", (long long)n, inv,
                              (long long)i, od[i], want[i]);
            free(want);
            tu_unref((rt_tensor *[]){x, o}, 2);
        }
}
END_TEST

START_TEST(test_dft_axes_and_hostile) {
    /* x (1, 2, 2, 1) along axis 1: each of the 2 inner columns separately,
     * (1, 3) -> 4, -2 and (2, 5) -> 7, -3; along axis 2 (the run-time axis
     * input of opset 20): rows (1, 2) -> 3, -1 and (3, 5) -> 8, -2. */
    rt_tensor *x = TU_F32(TU_SHAPE(1, 2, 2, 1), 1, 2, 3, 5);
    rt_tensor *o = dft(x, -1, 0, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 2), 1e-5f, 4, 0, 7, 0, -2, 0, -3, 0);
    rt_tensor_unref(o);
    Tensorflow__NodeDef *d = tu_node_new("OnnxDFT", "dft_axis_in");
    rt_tensor *in3[3] = {x, TU_I64(TU_SCALAR, -1), TU_I64(TU_SCALAR, -2)};
    o = tu_run1(d, in3, 3);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 2), 1e-5f, 3, 0, -1, 0, 8, 0, -2, 0);
    rt_tensor_unref(o);
    tu_unref(in3 + 1, 2);
    /* Zero padding: dft_length 4 over (1, 3) along axis 1 column 0 is the
     * DFT of (1, 3, 0, 0): 4, 1 - 3i, -2, 1 + 3i. */
    o = dft(x, 4, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(1, 4, 2, 2));
    const float *od = o->data;
    const float want[8] = {4, 0, 1, -3, -2, 0, 1, 3};
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 2; c++)
            ck_assert_float_eq_tol(od[(k * 2) * 2 + c], want[k * 2 + c], 1e-5f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* Empty batch: an empty output of the transformed shape. */
    rt_tensor *e = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 5, 1), &e), MS_OK);
    o = dft(e, -1, 0, 1);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 3, 2));
    tu_unref((rt_tensor *[]){o, e}, 2);
    /* A transform length far above any real signal is refused before
     * anything is allocated. */
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(1, 2, 1), 1, 2), TU_I64(TU_SCALAR, (int64_t)1 << 40)};
    tu_run_fail(tu_node_new("OnnxDFT", "dft_huge"), in, 2, 1, MS_EINVAL, "above");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SCALAR, -1);
    rt_tensor *bad_axis[3] = {in[0], in[1], TU_I64(TU_SCALAR, 2)};
    tu_run_fail(tu_node_new("OnnxDFT", "dft_axis2"), bad_axis, 3, 1, MS_EINVAL, "axis");
    rt_tensor_unref(bad_axis[2]);
    /* A cancelled request stops it with CANCELLED; not cancelled, it runs. */
    o = tu_check_cancel(tu_node_new("OnnxDFT", "dft_cancel"), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2), 1e-6f, 3, 0, -1, 0);
    rt_tensor_unref(o);
    tu_unref(in, 2);
}
END_TEST

START_TEST(test_causal_conv) {
    /* past (4) ++ input (1, 2, 3) under weights (1, 10) + 0.5:
     * 4 + 10 + 0.5, 1 + 20 + 0.5, 2 + 30 + 0.5; the new state is the last
     * step, 3. SiLU of 0.5 (zero weights) is 0.5 / (1 + e^-0.5). */
    rt_tensor *x = TU_F32(TU_SHAPE(1, 1, 3), 1, 2, 3);
    rt_tensor *in[4] = {x, TU_F32(TU_SHAPE(1, 1, 2), 1, 10), TU_F32(TU_SHAPE(1), 0.5f),
                        TU_F32(TU_SHAPE(1, 1, 1), 4)};
    rt_tensor *o[2];
    Tensorflow__NodeDef *d = tu_node_new("OnnxCausalConvWithState", "cc");
    ck_assert_int_eq(tu_run(d, in, 4, o, 2), MS_OK);
    tu_node_free(d);
    TU_CHECK_F32(o[0], TU_SHAPE(1, 1, 3), 1e-6f, 14.5f, 21.5f, 32.5f);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 0, 3);
    tu_unref(o, 2);
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(1, 1, 2), 0, 0);
    d = tu_node_new("OnnxCausalConvWithState", "cc_silu");
    tu_attr_i(d, "activation", 1);
    ck_assert_int_eq(tu_run(d, in, 4, o, 2), MS_OK);
    tu_node_free(d);
    float v = 0.5f / (1.0f + expf(-0.5f));
    TU_CHECK_F32(o[0], TU_SHAPE(1, 1, 3), 1e-6f, v, v, v);
    tu_unref(o, 2);
    /* A past state of the wrong length. */
    rt_tensor_unref(in[3]);
    in[3] = TU_F32(TU_SHAPE(1, 1, 2), 0, 0);
    tu_run_fail(tu_node_new("OnnxCausalConvWithState", "cc_bad"), in, 4, 2, MS_EINVAL, "past");
    tu_unref(in, 4);
}
END_TEST

static void unique(rt_tensor *x, int sorted, int axis, rt_tensor **o) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxUnique", "uq");
    tu_attr_i(d, "sorted", sorted);
    tu_attr_i(d, "has_axis", axis >= 0);
    tu_attr_i(d, "axis", axis >= 0 ? axis : 0);
    ck_assert_msg(tu_run(d, &x, 1, o, 4) == MS_OK, "%s", ms_errmsg());
    tu_node_free(d);
}

START_TEST(test_unique) {
    /* (2, 1, 1, 3, 4, 3): sorted 1 2 3 4 first seen at 1 0 3 4; input i
     * is output 1 0 0 2 3 2; counts 2 1 2 1. Unsorted: 2 1 3 4 in order of
     * first occurrence. */
    rt_tensor *x = TU_I64(TU_SHAPE(6), 2, 1, 1, 3, 4, 3), *o[4];
    unique(x, 1, -1, o);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(4), 1, 2, 3, 4);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(4), 1, 0, 3, 4);
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(6), 1, 0, 0, 2, 3, 2);
    TU_CHECK_INT(o[3], RT_DT_INT64, TU_SHAPE(4), 2, 1, 2, 1);
    tu_unref(o, 4);
    unique(x, 0, -1, o);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(4), 2, 1, 3, 4);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(4), 0, 1, 3, 4);
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(6), 0, 1, 1, 2, 3, 2);
    TU_CHECK_INT(o[3], RT_DT_INT64, TU_SHAPE(4), 1, 2, 2, 1);
    tu_unref(o, 4);
    rt_tensor_unref(x);
    /* Rows of (3, 2): (1, 0) twice and (0, 1) once; sorted (0, 1) first. */
    x = TU_F32(TU_SHAPE(3, 2), 1, 0, 1, 0, 0, 1);
    unique(x, 1, 0, o);
    TU_CHECK_F32(o[0], TU_SHAPE(2, 2), 0, 0, 1, 1, 0);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(2), 2, 0);
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(3), 1, 1, 0);
    TU_CHECK_INT(o[3], RT_DT_INT64, TU_SHAPE(2), 1, 2);
    tu_unref(o, 4);
    rt_tensor_unref(x);
    rt_shape es = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &es, &x), MS_OK);
    unique(x, 1, -1, o);
    tu_check_shape(o[0], RT_DT_FLOAT, es);
    tu_check_shape(o[2], RT_DT_INT64, es);
    tu_unref(o, 4);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_det_revseq) {
    /* det [[1, 2], [3, 4]] = -2; [[0, 1], [1, 0]] needs a row swap: -1;
     * [[1, 2], [2, 4]] is singular: 0. [[2, 0, 1], [1, 3, 2], [1, 1, 2]]:
     * 2 (6 - 2) - 0 + 1 (1 - 3) = 6. */
    rt_tensor *x = TU_F32(TU_SHAPE(3, 2, 2), 1, 2, 3, 4, 0, 1, 1, 0, 1, 2, 2, 4);
    rt_tensor *o = tu_run1(tu_node_new("OnnxDet", "det"), &x, 1);
    TU_CHECK_F32(o, TU_SHAPE(3), 1e-6f, -2, -1, 0);
    tu_unref((rt_tensor *[]){o, x}, 2);
    x = TU_F32(TU_SHAPE(3, 3), 2, 0, 1, 1, 3, 2, 1, 1, 2);
    o = tu_run1(tu_node_new("OnnxDet", "det3"), &x, 1);
    TU_CHECK_F32(o, TU_SCALAR, 1e-5f, 6);
    tu_unref((rt_tensor *[]){o, x}, 2);
    x = TU_F32(TU_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
    tu_run_fail(tu_node_new("OnnxDet", "det_rect"), &x, 1, 1, MS_EINVAL, "square");
    rt_tensor_unref(x);
    /* Time-major (T 3, B 2): batch 0 reverses its first 3 steps, batch 1
     * its first 1 (unchanged). */
    rt_tensor *in[2] = {TU_I32(TU_SHAPE(3, 2), 0, 10, 1, 11, 2, 12), TU_I64(TU_SHAPE(2), 3, 1)};
    o = tu_run1(tu_node_new("OnnxReverseSequence", "rs"), in, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(3, 2), 2, 10, 1, 11, 0, 12);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(2), 4, 1);
    tu_run_fail(tu_node_new("OnnxReverseSequence", "rs_long"), in, 2, 1, MS_EINVAL, "outside");
    tu_unref(in, 2);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"grid_sample_linear", test_grid_sample_linear},
        {"grid_sample_nearest_cubic", test_grid_sample_nearest_cubic},
        {"grid_sample_3d_and_hostile", test_grid_sample_3d_and_hostile},
        {"scatter_nd", test_scatter_nd},
        {"scatter_elements", test_scatter_elements},
        {"gather_elements", test_gather_elements},
        {"lp_pool", test_lp_pool},
        {"pool", test_pool_dilated},
        {"nms", test_nms},
        {"dft", test_dft},
        {"dft_lengths", test_dft_lengths},
        {"dft_axes_and_hostile", test_dft_axes_and_hostile},
        {"causal_conv", test_causal_conv},
        {"unique", test_unique},
        {"det_revseq", test_det_revseq},
    };
    return tu_suite_main("kn_onnx", cases, sizeof(cases) / sizeof(cases[0]));
}
