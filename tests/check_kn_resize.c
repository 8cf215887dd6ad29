/* check_kn_resize.c - CPU kernels ResizeBicubic, ResizeArea and
 * CropAndResize.
 *
 * Expected values are worked out by hand in the comments from TensorFlow's
 * definitions: Keys' cubic coefficients (A = -0.75 legacy, -0.5 half-pixel
 * with outside taps dropped and the rest renormalised), box means weighted by
 * covered fractions, and CropAndResize's box-to-pixel mapping. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "util_node.h"

#define S TU_SHAPE

static rt_tensor *resize(const char *op, rt_tensor *x, int32_t h, int32_t w, int align, int half) {
    Tensorflow__NodeDef *d = tu_node_new(op, "rs");
    tu_attr_b(d, "align_corners", align);
    if (half) tu_attr_b(d, "half_pixel_centers", half);
    rt_tensor *in[2] = {x, TU_I32(S(2), h, w)};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(in[1]);
    return o;
}

START_TEST(bicubic_half_pixel) {
    /* x = [[0,1],[2,3]] (2r + c) to 4x4, half-pixel, A = -0.5. Output
     * position o samples (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25.
     * -0.25: floor -1, delta 0.75: taps -2..1, only 0 and 1 inside, with
     *   k(0.25) = 111/128 and k(1.25) = -9/128 -> renormalised 37/34, -3/34.
     * 0.25: taps -1..2, inside 0 and 1: k(0.25) = 111/128, k(0.75) = 29/128
     *   -> 111/140, 29/140. 0.75 and 1.25 mirror these.
     * The weights sum to 1, so on 2r + c the result is 2 p[y] + p[x] with
     * p = the weighted source index: -3/34, 29/140, 111/140, 37/34. */
    rt_tensor *x = TU_F32(S(1, 2, 2, 1), 0, 1, 2, 3);
    rt_tensor *o = resize("ResizeBicubic", x, 4, 4, 0, 1);
    const double p[4] = {-3.0 / 34, 29.0 / 140, 111.0 / 140, 37.0 / 34};
    float want[16];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            want[r * 4 + c] = (float)(2 * p[r] + p[c]);
    tu_check_f32(o, S(1, 4, 4, 1), want, 16, 1e-6f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(bicubic_legacy_align) {
    /* A = -0.75: k(0) = 1, k(1) = k(2) = 0, k(0.5) = 0.59375, k(1.5) = -0.09375.
     * Legacy [0, 10] to 4: sources 0, 0.5, 1, 1.5 with taps clamped (no
     * renormalising):
     *   0.5: taps 0,0,1,1 -> -0.09375*0 + 0.59375*0 + 0.59375*10 - 0.09375*10 = 5
     *   1.5: taps 0,1,1,1 -> 0.59375*10 + 0.59375*10 - 0.09375*10 = 10.9375 */
    rt_tensor *x = TU_U8(S(1, 1, 2, 1), 0, 10);
    rt_tensor *o = resize("ResizeBicubic", x, 1, 4, 0, 0);
    TU_CHECK_F32(o, S(1, 1, 4, 1), 1e-6f, 0, 5, 10, 10.9375f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* align_corners [0, 10, 0] to 5: scale 2/4, sources 0, 0.5, 1, 1.5, 2:
     *   0.5: taps 0,0,1,2 -> 0.59375*10 = 5.9375; 1.5: taps 0,1,2,2 -> same. */
    x = TU_I32(S(1, 1, 3, 1), 0, 10, 0);
    o = resize("ResizeBicubic", x, 1, 5, 1, 0);
    TU_CHECK_F32(o, S(1, 1, 5, 1), 1e-6f, 0, 5.9375f, 10, 5.9375f, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(area_box_means) {
    /* 4x4 of 0..15 to 2x2: means of the 2x2 blocks
     * (0+1+4+5)/4 = 2.5, (2+3+6+7)/4 = 4.5, 10.5, 12.5; two channels (the
     * second negated) to check the channel stride. */
    float v[32];
    for (int i = 0; i < 16; i++) {
        v[2 * i] = (float)i;
        v[2 * i + 1] = (float)-i;
    }
    rt_tensor *x = tu_t(RT_DT_FLOAT, S(1, 4, 4, 2), v, 32);
    rt_tensor *o = resize("ResizeArea", x, 2, 2, 0, 0);
    TU_CHECK_F32(o, S(1, 2, 2, 2), 1e-6f, 2.5f, -2.5f, 4.5f, -4.5f, 10.5f, -10.5f, 12.5f, -12.5f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(area_fractional) {
    /* [[1,2,3],[4,5,6],[7,8,9]] to 2x2: scale 1.5, output 0 covers cell 0
     * fully and half of cell 1; output 1 half of cell 1 and all of cell 2;
     * each box has area 2.25:
     * (0,0): 1 + 2*.5 + 4*.5 + 5*.25 = 5.25  -> 2.3333
     * (0,1): 2*.5 + 3 + 5*.25 + 6*.5 = 8.25  -> 3.6667
     * (1,0): 4*.5 + 5*.25 + 7 + 8*.5 = 14.25 -> 6.3333
     * (1,1): 5*.25 + 6*.5 + 8*.5 + 9 = 17.25 -> 7.6667 */
    rt_tensor *x = TU_F64(S(1, 3, 3, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9);
    rt_tensor *o = resize("ResizeArea", x, 2, 2, 0, 0);
    TU_CHECK_F32(o, S(1, 2, 2, 1), 1e-6f, 5.25f / 2.25f, 8.25f / 2.25f, 14.25f / 2.25f,
                 17.25f / 2.25f);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* align_corners [0,10,20] to 2: scale (3-1)/(2-1) = 2; output 1 covers
     * cells 2 and 3, and cell 3 is clamped to cell 2: (20 + 20) / 2 = 20;
     * output 0 = (0 + 10) / 2 = 5. */
    x = TU_F32(S(1, 1, 3, 1), 0, 10, 20);
    o = resize("ResizeArea", x, 1, 2, 1, 0);
    TU_CHECK_F32(o, S(1, 1, 2, 1), 1e-6f, 5, 20);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(resize_empty_and_errors) {
    /* empty batch: an empty output of the new size */
    rt_tensor *x = tu_t(RT_DT_FLOAT, S(0, 2, 2, 3), NULL, 0);
    rt_tensor *o = resize("ResizeBicubic", x, 5, 7, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 5, 7, 3));
    rt_tensor_unref(o);
    o = resize("ResizeArea", x, 1, 1, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 1, 1, 3));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* run-time sizes: negative, zero, and one whose output overflows */
    rt_tensor *in[2] = {TU_F32(S(1, 1, 1, 3), 1, 2, 3), TU_I32(S(2), -1, 4)};
    tu_run_fail(tu_node_new("ResizeBicubic", "neg"), in, 2, 1, MS_EINVAL, "positive");
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(2), 4, 0);
    tu_run_fail(tu_node_new("ResizeArea", "zero"), in, 2, 1, MS_EINVAL, "positive");
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(2), INT32_MAX, INT32_MAX);
    rt_tensor *out = NULL;
    Tensorflow__NodeDef *d = tu_node_new("ResizeArea", "huge");
    ck_assert_int_ne(tu_run(d, in, 2, &out, 1), MS_OK);
    ck_assert_msg(strstr(ms_errmsg(), "output 0") != NULL, "%s", ms_errmsg());
    tu_node_free(d);
    rt_tensor_unref(in[1]);
    /* both flags; a dtype the op does not take */
    in[1] = TU_I32(S(2), 2, 2);
    d = tu_node_new("ResizeBicubic", "flags");
    tu_attr_b(d, "align_corners", 1);
    tu_attr_b(d, "half_pixel_centers", 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "half_pixel_centers");
    rt_tensor_unref(in[0]);
    in[0] = TU_BOOL(S(1, 1, 1, 1), 1);
    tu_run_fail(tu_node_new("ResizeArea", "b8"), in, 2, 1, MS_ENOTSUP, "DT_BOOL");
    /* ... also when attr T says so, before any request (at load) */
    rt_tensor_unref(in[0]);
    in[0] = TU_F32(S(1, 1, 1, 1), 1);
    d = tu_node_new("ResizeBicubic", "str_t");
    tu_attr_type(d, "T", RT_DT_STRING);
    tu_run_fail(d, in, 2, 1, MS_ENOTSUP, "DT_STRING");
    tu_unref(in, 2);
}
END_TEST

/* ---- CropAndResize ---- */

static Tensorflow__NodeDef *crop_node(const char *method, float extrapolation) {
    Tensorflow__NodeDef *d = tu_node_new("CropAndResize", "crop");
    if (method != NULL) tu_attr_s(d, "method", method);
    tu_attr_f(d, "extrapolation_value", extrapolation);
    return d;
}

static rt_tensor *crop(Tensorflow__NodeDef *d, rt_tensor *img, rt_tensor *boxes, rt_tensor *ind,
                       int32_t h, int32_t w) {
    rt_tensor *in[4] = {img, boxes, ind, TU_I32(S(2), h, w)};
    rt_tensor *o = tu_run1(d, in, 4);
    tu_unref(in + 1, 3);
    return o;
}

/* Batch of two 3x3 images: 3r + c, and 100 + 3r + c. */
static rt_tensor *img2(void) {
    float v[18];
    for (int i = 0; i < 18; i++)
        v[i] = (float)(i % 9 + (i / 9) * 100);
    return tu_t(RT_DT_FLOAT, S(2, 3, 3, 1), v, 18);
}

START_TEST(crop_flipped_and_outside) {
    rt_tensor *img = img2(), *o;
    /* Flipped box (1,1)-(0,0), 3x3: rows and columns sampled at 2, 1, 0:
     * the image rotated by 180 degrees. */
    o = crop(crop_node(NULL, 0), img, TU_F32(S(1, 4), 1, 1, 0, 0), TU_I32(S(1), 0), 3, 3);
    TU_CHECK_F32(o, S(1, 3, 3, 1), 0, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    rt_tensor_unref(o);
    /* Box y -0.5..0.5 of image 1: rows at -1 (outside: extrapolation -1), 0,
     * 1. Box x 0.25..1.25 of image 0, rows 0..1: columns at 0.5, 1.5, 2.5
     * (outside): 3y + x interpolated, then -1. */
    o = crop(crop_node("bilinear", -1), img,
             TU_F32(S(2, 4), -0.5f, 0, 0.5f, 1, 0, 0.25f, 1, 1.25f), TU_I32(S(2), 1, 0), 3, 3);
    TU_CHECK_F32(o, S(2, 3, 3, 1), 1e-6f, -1, -1, -1, 100, 101, 102, 103, 104, 105, /* box 0 */
                 0.5f, 1.5f, -1, 3.5f, 4.5f, -1, 6.5f, 7.5f, -1);               /* box 1 */
    rt_tensor_unref(o);
    rt_tensor_unref(img);
}
END_TEST

START_TEST(crop_nearest_and_centre) {
    rt_tensor *img = img2(), *o;
    /* nearest, box 0.25..0.75 both ways, 2x2: coordinates 0.5 and 1.5,
     * rounded half away from zero to 1 and 2 -> pixels (1,1) (1,2) (2,1)
     * (2,2) = 4, 5, 7, 8 (bilinear would give 2, 3, 5, 6). */
    o = crop(crop_node("nearest", 0), img, TU_F32(S(1, 4), 0.25f, 0.25f, 0.75f, 0.75f),
             TU_I32(S(1), 0), 2, 2);
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 4, 5, 7, 8);
    rt_tensor_unref(o);
    o = crop(crop_node("bilinear", 0), img, TU_F32(S(1, 4), 0.25f, 0.25f, 0.75f, 0.75f),
             TU_I32(S(1), 0), 2, 2);
    TU_CHECK_F32(o, S(1, 2, 2, 1), 1e-6f, 2, 3, 5, 6);
    rt_tensor_unref(o);
    /* crop_size 1x1 samples the box centre: y (0+1)/2 * 2 = 1,
     * x (0+0.5)/2 * 2 = 0.5 -> 3*1 + 0.5 = 3.5 (image 1: 103.5). */
    o = crop(crop_node(NULL, 0), img, TU_F32(S(2, 4), 0, 0, 1, 0.5f, 0, 0, 1, 0.5f),
             TU_I32(S(2), 0, 1), 1, 1);
    TU_CHECK_F32(o, S(2, 1, 1, 1), 1e-6f, 3.5f, 103.5f);
    rt_tensor_unref(o);
    /* uint8 image, 2 channels: the centre of the whole image is pixel (1,1) */
    rt_tensor *u = TU_U8(S(1, 3, 3, 2), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                         17);
    o = crop(crop_node(NULL, 0), u, TU_F32(S(1, 4), 0, 0, 1, 1), TU_I32(S(1), 0), 1, 1);
    TU_CHECK_F32(o, S(1, 1, 1, 2), 0, 8, 9);
    rt_tensor_unref(o);
    rt_tensor_unref(u);
    rt_tensor_unref(img);
}
END_TEST

START_TEST(crop_empty_and_errors) {
    rt_tensor *img = img2(), *o;
    /* zero boxes: an empty output, from a batch and from an empty batch */
    o = crop(crop_node(NULL, 0), img, tu_t(RT_DT_FLOAT, S(0, 4), NULL, 0),
             tu_t(RT_DT_INT32, S(0), NULL, 0), 2, 3);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 2, 3, 1));
    rt_tensor_unref(o);
    rt_tensor *empty = tu_t(RT_DT_FLOAT, S(0, 3, 3, 1), NULL, 0);
    o = crop(crop_node(NULL, 0), empty, tu_t(RT_DT_FLOAT, S(0, 4), NULL, 0),
             tu_t(RT_DT_INT32, S(0), NULL, 0), 2, 3);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 2, 3, 1));
    rt_tensor_unref(o);
    /* a box into an empty batch, or past the batch */
    rt_tensor *in[4] = {empty, TU_F32(S(1, 4), 0, 0, 1, 1), TU_I32(S(1), 0), TU_I32(S(2), 2, 2)};
    tu_run_fail(crop_node(NULL, 0), in, 4, 1, MS_EINVAL, "box_ind");
    in[0] = img;
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(S(1), 2);
    tu_run_fail(crop_node(NULL, 0), in, 4, 1, MS_EINVAL, "box_ind");
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(S(1), 1);
    /* run-time crop sizes: zero, negative, overflowing */
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(S(2), 0, 2);
    tu_run_fail(crop_node(NULL, 0), in, 4, 1, MS_EINVAL, "crop_size");
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(S(2), 3, -2);
    tu_run_fail(crop_node(NULL, 0), in, 4, 1, MS_EINVAL, "crop_size");
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(S(2), INT32_MAX, INT32_MAX);
    rt_tensor *out = NULL;
    Tensorflow__NodeDef *d = crop_node(NULL, 0);
    ck_assert_int_ne(tu_run(d, in, 4, &out, 1), MS_OK);
    ck_assert_msg(strstr(ms_errmsg(), "output 0") != NULL, "%s", ms_errmsg());
    tu_node_free(d);
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(S(2), 2, 2);
    /* a box that is not finite; an unknown method */
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(S(1, 4), 0, NAN, 1, 1);
    tu_run_fail(crop_node(NULL, 0), in, 4, 1, MS_EINVAL, "finite");
    tu_run_fail(crop_node("bicubic", 0), in, 4, 1, MS_EINVAL, "method");
    d = crop_node(NULL, 0);
    tu_attr_type(d, "T", RT_DT_BOOL);
    tu_run_fail(d, in, 4, 1, MS_ENOTSUP, "DT_BOOL");
    tu_unref(in + 1, 3);
    rt_tensor_unref(empty);
    rt_tensor_unref(img);
}
END_TEST

/* Batches, channels and many rows (the kernels split rows over threads) on
 * linear images v = 10 r + c + 100 ch + 1000 n, where a box mean is the
 * value at the box centre and a bilinear sample the value at its
 * coordinates. */
START_TEST(strides_linear) {
    enum { N = 2, H = 8, W = 9, C = 3 };
    float v[N * H * W * C];
    for (int n = 0; n < N; n++)
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++)
                for (int ch = 0; ch < C; ch++)
                    v[((n * H + r) * W + c) * C + ch] = (float)(10 * r + c + 100 * ch + 1000 * n);
    rt_tensor *x = tu_t(RT_DT_FLOAT, S(N, H, W, C), v, N * H * W * C);
    /* area 8x9 -> 4x3: boxes of 2 rows and 3 columns, centres at row
     * 2i + 0.5 and column 3j + 1 */
    rt_tensor *o = resize("ResizeArea", x, 4, 3, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, S(N, 4, 3, C));
    for (int n = 0; n < N; n++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                for (int ch = 0; ch < C; ch++) {
                    double want = 10 * (2 * i + 0.5) + (3 * j + 1) + 100 * ch + 1000 * n;
                    double got = rt_tensor_f32(o)[((n * 4 + i) * 3 + j) * C + ch];
                    ck_assert_msg(fabs(got - want) < 1e-3, "area %d %d %d %d: %g != %g", n, i, j,
                                  ch, got, want);
                }
    rt_tensor_unref(o);
    /* crops 5x4 of three boxes inside the image, one flipped */
    const float bx[12] = {0.1f, 0.2f, 0.9f, 0.7f, 0.8f, 0.9f, 0.3f, 0.1f, 0, 0, 1, 1};
    const int32_t bi[3] = {1, 0, 1};
    o = crop(crop_node(NULL, 0), x, tu_t(RT_DT_FLOAT, S(3, 4), bx, 12),
             tu_t(RT_DT_INT32, S(3), bi, 3), 5, 4);
    tu_check_shape(o, RT_DT_FLOAT, S(3, 5, 4, C));
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 4; j++)
                for (int ch = 0; ch < C; ch++) {
                    const float *q = bx + 4 * b;
                    double ry = (q[0] + (q[2] - q[0]) * i / 4.0) * (H - 1);
                    double cx = (q[1] + (q[3] - q[1]) * j / 3.0) * (W - 1);
                    double want = 10 * ry + cx + 100 * ch + 1000 * bi[b];
                    double got = rt_tensor_f32(o)[((b * 5 + i) * 4 + j) * C + ch];
                    ck_assert_msg(fabs(got - want) < 1e-3, "crop %d %d %d %d: %g != %g", b, i, j,
                                  ch, got, want);
                }
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"bicubic", bicubic_half_pixel},     {"bicubic", bicubic_legacy_align},
        {"area", area_box_means},            {"area", area_fractional},
        {"errors", resize_empty_and_errors}, {"crop", crop_flipped_and_outside},
        {"crop", crop_nearest_and_centre},   {"crop", crop_empty_and_errors},
        {"strides", strides_linear},
    };
    return tu_suite_main("kn_resize", cases, sizeof cases / sizeof cases[0]);
}
