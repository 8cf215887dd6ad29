/* check_kn_nn.c - CPU nn kernels: Conv2D, DepthwiseConv2dNative,
 * Conv2DBackpropInput, MaxPool, AvgPool, FusedBatchNormV3, ResizeBilinear,
 * ResizeNearestNeighbor.
 *
 * Small cases have their expected values worked out by hand in comments.
 * Larger random cases compare Conv2D/depthwise against a direct loop written
 * from the op's definition, and Conv2DBackpropInput against the adjoint
 * identity <conv(x), dy> = <x, backprop(dy)>. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util_node.h"

#define S TU_SHAPE

static Tensorflow__NodeDef *conv_node(const char *op, const char *pad, int64_t sh, int64_t sw,
                                      int nchw) {
    Tensorflow__NodeDef *d = tu_node_new(op, "conv");
    tu_attr_s(d, "padding", pad);
    if (nchw) {
        tu_attr_s(d, "data_format", "NCHW");
        tu_attr_ints(d, "strides", 1, 1, sh, sw);
    } else {
        tu_attr_ints(d, "strides", 1, sh, sw, 1);
    }
    return d;
}

static rt_tensor *run2(Tensorflow__NodeDef *d, rt_tensor *a, rt_tensor *b) {
    rt_tensor *in[2] = {a, b};
    rt_tensor *o = tu_run1(d, in, 2);
    tu_unref(in, 2);
    return o;
}

/* x = [[1,2,3],[4,5,6],[7,8,9]] as (1,3,3,1); f = [[1,0],[0,1]] as (2,2,1,1). */
static rt_tensor *x33(void) {
    return tu_iota_f32(S(1, 3, 3, 1), 1, 1);
}
static rt_tensor *fdiag(void) {
    return TU_F32(S(2, 2, 1, 1), 1, 0, 0, 1);
}

START_TEST(conv_valid_same) {
    /* VALID: out[i][j] = x[i][j] + x[i+1][j+1] = [1+5, 2+6, 4+8, 5+9] */
    rt_tensor *o = run2(conv_node("Conv2D", "VALID", 1, 1, 0), x33(), fdiag());
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 6, 8, 12, 14);
    rt_tensor_unref(o);
    /* SAME stride 1: pad total 1 goes after (bottom/right), so the last
     * row/column only see their own x: [[6,8,3],[12,14,6],[7,8,9]] */
    o = run2(conv_node("Conv2D", "SAME", 1, 1, 0), x33(), fdiag());
    TU_CHECK_F32(o, S(1, 3, 3, 1), 0, 6, 8, 3, 12, 14, 6, 7, 8, 9);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(conv_same_stride2) {
    /* x 4x4 = 1..16, 3x3 ones, stride 2 SAME: out 2x2, pad top/left 0 and
     * bottom/right 1. Windows: rows/cols 0-2 and 2-3:
     * (0,0) 1+2+3+5+6+7+9+10+11 = 54; (0,1) 3+4+7+8+11+12 = 45;
     * (1,0) 9+10+11+13+14+15 = 72;     (1,1) 11+12+15+16 = 54 */
    rt_tensor *f = tu_iota_f32(S(3, 3, 1, 1), 1, 0);
    rt_tensor *o = run2(conv_node("Conv2D", "SAME", 2, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1), f);
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 54, 45, 72, 54);
    rt_tensor_unref(o);
    /* VALID stride 2 on the same: only window (0,0) fits -> 54 */
    o = run2(conv_node("Conv2D", "VALID", 2, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1),
             tu_iota_f32(S(3, 3, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 1, 1, 1), 0, 54);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(conv_dilated) {
    /* x[r][c] = 5r + c (5x5), 2x2 ones dilated by 2 (effective 3x3), VALID:
     * out[i][j] = x[i][j] + x[i][j+2] + x[i+2][j] + x[i+2][j+2] = 20i + 4j + 24 */
    Tensorflow__NodeDef *d = conv_node("Conv2D", "VALID", 1, 1, 0);
    tu_attr_ints(d, "dilations", 1, 2, 2, 1);
    rt_tensor *o = run2(d, tu_iota_f32(S(1, 5, 5, 1), 0, 1), tu_iota_f32(S(2, 2, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 3, 3, 1), 0, 24, 28, 32, 44, 48, 52, 64, 68, 72);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(conv_channels_1x1) {
    /* pixels [1,2] and [3,4]; 1x1 filter rows (in channels) [1,0,1], [0,1,1]
     * -> [c0, c1, c0 + c1] per pixel */
    rt_tensor *o = run2(conv_node("Conv2D", "VALID", 1, 1, 0), TU_F32(S(1, 1, 2, 2), 1, 2, 3, 4),
                        TU_F32(S(1, 1, 2, 3), 1, 0, 1, 0, 1, 1));
    TU_CHECK_F32(o, S(1, 1, 2, 3), 0, 1, 2, 3, 3, 4, 7);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(conv_nchw) {
    /* NCHW (1,2,3,3): channel 0 = 1..9, channel 1 = 10..90 step 10.
     * Output channel 0: diag filter on channel 0 -> [6,8,12,14] (as above);
     * output channel 1: 2x2 window sums of channel 1:
     * 10(1+2+4+5) = 120, 10(2+3+5+6) = 160, 10(4+5+7+8) = 240, 10(5+6+8+9) = 280. */
    rt_tensor *x =
        tu_t(RT_DT_FLOAT, S(1, 2, 3, 3),
             (const float[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90}, 18);
    /* HWIO f[kh][kw][ci][co]: co 0 = diag on ci 0; co 1 = ones on ci 1 */
    rt_tensor *f = TU_F32(S(2, 2, 2, 2), 1, 0, 0, 1, /* kh0 kw0: ci0 -> (1,0), ci1 -> (0,1) */
                          0, 0, 0, 1,                /* kh0 kw1 */
                          0, 0, 0, 1,                /* kh1 kw0 */
                          1, 0, 0, 1);               /* kh1 kw1 */
    rt_tensor *o = run2(conv_node("Conv2D", "VALID", 1, 1, 1), x, f);
    TU_CHECK_F32(o, S(1, 2, 2, 2), 0, 6, 8, 12, 14, 120, 160, 240, 280);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(conv_explicit) {
    /* explicit_paddings top 1, right 1 on x33 with 2x2 ones: out 3x3,
     * out[0] = [1+2, 2+3, 3], out[1] = [1+2+4+5, 2+3+5+6, 3+6], out[2] = [24, 28, 15] */
    Tensorflow__NodeDef *d = conv_node("Conv2D", "EXPLICIT", 1, 1, 0);
    tu_attr_ints(d, "explicit_paddings", 0, 0, 1, 0, 0, 1, 0, 0);
    rt_tensor *o = run2(d, x33(), tu_iota_f32(S(2, 2, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 3, 3, 1), 0, 3, 5, 3, 12, 16, 9, 24, 28, 15);
    rt_tensor_unref(o);
}
END_TEST

/* ---- random cases against the definition ---- */

static float frand(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static rt_tensor *rand_t(rt_shape s, unsigned *seed) {
    rt_tensor *t = tu_iota_f32(s, 0, 0);
    for (int64_t i = 0; i < t->nelem; i++)
        rt_tensor_f32(t)[i] = frand(seed);
    return t;
}

/* Output size and leading pad as documented for tf.nn.conv2d. */
static void ref_dim(int64_t in, int64_t k, int64_t s, int64_t dil, int same, int64_t *out,
                    int64_t *pad) {
    int64_t eff = (k - 1) * dil + 1;
    if (same) {
        *out = (in + s - 1) / s;
        int64_t need = (*out - 1) * s + eff - in;
        *pad = need > 0 ? need / 2 : 0;
    } else {
        *out = (in - eff) / s + 1;
        *pad = 0;
    }
}

/* Index of (n, h, w, c) in a tensor of the given layout. */
static int64_t at(int nchw, int64_t H, int64_t W, int64_t C, int64_t n, int64_t h, int64_t w,
                  int64_t c) {
    return nchw ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

typedef struct conv_case {
    int64_t N, H, W, C, KH, KW, M; /* M: output channels (Conv2D) or multiplier */
    int64_t sh, sw, dh, dw;
    int same, nchw;
} conv_case;

/* Conv2D with `groups` groups (filter depth C / groups), or depthwise. */
static void check_conv_ref(const conv_case *k, int depthwise, int64_t groups, unsigned seed) {
    int64_t OH, OW, pt, pl;
    ref_dim(k->H, k->KH, k->sh, k->dh, k->same, &OH, &pt);
    ref_dim(k->W, k->KW, k->sw, k->dw, k->same, &OW, &pl);
    int64_t OC = depthwise ? k->C * k->M : k->M;
    rt_shape xs = k->nchw ? S(k->N, k->C, k->H, k->W) : S(k->N, k->H, k->W, k->C);
    const int64_t cg = k->C / groups, ocg = k->M / groups;
    rt_tensor *x = rand_t(xs, &seed), *f = rand_t(S(k->KH, k->KW, cg, k->M), &seed);
    Tensorflow__NodeDef *d = conv_node(depthwise ? "DepthwiseConv2dNative" : "Conv2D",
                                       k->same ? "SAME" : "VALID", k->sh, k->sw, k->nchw);
    if (k->nchw)
        tu_attr_ints(d, "dilations", 1, 1, k->dh, k->dw);
    else
        tu_attr_ints(d, "dilations", 1, k->dh, k->dw, 1);
    rt_tensor *in[2] = {x, f};
    rt_tensor *o = tu_run1(d, in, 2);
    tu_check_shape(o, RT_DT_FLOAT, k->nchw ? S(k->N, OC, OH, OW) : S(k->N, OH, OW, OC));
    const float *X = x->data, *F = f->data, *Y = o->data;
    for (int64_t n = 0; n < k->N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t oc = 0; oc < OC; oc++) {
                    double acc = 0;
                    for (int64_t kh = 0; kh < k->KH; kh++)
                        for (int64_t kw = 0; kw < k->KW; kw++) {
                            int64_t ih = oh * k->sh - pt + kh * k->dh;
                            int64_t iw = ow * k->sw - pl + kw * k->dw;
                            if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                            if (depthwise) {
                                int64_t c = oc / k->M, m = oc % k->M;
                                acc += X[at(k->nchw, k->H, k->W, k->C, n, ih, iw, c)] *
                                       F[((kh * k->KW + kw) * k->C + c) * k->M + m];
                            } else {
                                int64_t c0 = (oc / ocg) * cg; /* the group's channels */
                                for (int64_t c = 0; c < cg; c++)
                                    acc += X[at(k->nchw, k->H, k->W, k->C, n, ih, iw, c0 + c)] *
                                           F[((kh * k->KW + kw) * cg + c) * k->M + oc];
                            }
                        }
                    float got = Y[at(k->nchw, OH, OW, OC, n, oh, ow, oc)];
                    ck_assert_msg(fabs(got - acc) <= 1e-4 * (1 + fabs(acc)),
                                  "n%lld oh%lld ow%lld oc%lld: got %g expected %g", (long long)n,
                                  (long long)oh, (long long)ow, (long long)oc, got, acc);
                }
    tu_unref(in, 2);
    rt_tensor_unref(o);
}

/* clang-format off */
static const conv_case conv_cases[] = {
    /* N  H  W  C KH KW M  sh sw dh dw same nchw */
    {2, 7, 6, 3, 3, 3, 4, 1, 1, 1, 1, 1, 0},
    {2, 7, 6, 3, 3, 3, 4, 1, 1, 1, 1, 1, 1},
    {1, 9, 8, 2, 3, 2, 3, 2, 3, 1, 1, 1, 0},
    {1, 9, 8, 2, 3, 2, 3, 2, 3, 1, 1, 0, 1},
    {2, 8, 8, 3, 3, 3, 2, 1, 1, 2, 3, 1, 0},
    {2, 8, 8, 3, 3, 3, 2, 2, 1, 2, 1, 0, 1},
    {1, 5, 5, 4, 1, 1, 5, 2, 2, 1, 1, 1, 1},
    {1, 6, 7, 2, 5, 4, 3, 2, 2, 1, 1, 1, 0},
};
/* clang-format on */

START_TEST(conv_reference) {
    for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++)
        check_conv_ref(&conv_cases[i], 0, 1, 17u + (unsigned)i);
}
END_TEST

START_TEST(depthwise_reference) {
    for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++) {
        conv_case k = conv_cases[i];
        k.M = 1 + (int64_t)(i % 3); /* multipliers 1..3 */
        check_conv_ref(&k, 1, 1, 99u + (unsigned)i);
    }
}
END_TEST

START_TEST(conv_grouped) {
    /* 6 input channels in 2 or 3 groups, NHWC and NCHW, 1x1 and 3x3 */
    static const conv_case g[] = {
        {2, 6, 5, 6, 3, 3, 4, 1, 1, 1, 1, 1, 0},
        {1, 6, 5, 6, 3, 3, 6, 2, 1, 1, 2, 0, 1},
        {1, 4, 4, 6, 1, 1, 6, 1, 1, 1, 1, 0, 0},
    };
    check_conv_ref(&g[0], 0, 2, 5u);
    check_conv_ref(&g[1], 0, 3, 6u);
    check_conv_ref(&g[2], 0, 3, 7u);
    /* hand case: 2 groups of 1 channel, 1x1 filter [[2, 3]] (depth 1, 2 out
     * channels): pixel [a, b] -> [2a, 3b] */
    rt_tensor *o = run2(conv_node("Conv2D", "VALID", 1, 1, 0), TU_F32(S(1, 1, 2, 2), 1, 10, 2, 20),
                        TU_F32(S(1, 1, 1, 2), 2, 3));
    TU_CHECK_F32(o, S(1, 1, 2, 2), 0, 2, 30, 4, 60);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(depthwise_hand) {
    /* pixels [1,10],[2,20],[3,30],[4,40]; 2x2 filter: channel 0 all ones
     * -> 1+2+3+4 = 10; channel 1 only top-left weight 2 -> 2*10 = 20 */
    rt_tensor *o = run2(conv_node("DepthwiseConv2dNative", "VALID", 1, 1, 0),
                        TU_F32(S(1, 2, 2, 2), 1, 10, 2, 20, 3, 30, 4, 40),
                        TU_F32(S(2, 2, 2, 1), 1, 2, 1, 0, 1, 0, 1, 0));
    TU_CHECK_F32(o, S(1, 1, 1, 2), 0, 10, 20);
    rt_tensor_unref(o);
    /* multiplier 2 with a 1x1 filter: channel 0 -> (1, -1), channel 1 -> (0.5, 2);
     * pixel [a, b] -> [a, -a, 0.5b, 2b] */
    o = run2(conv_node("DepthwiseConv2dNative", "VALID", 1, 1, 0),
             TU_F32(S(1, 2, 2, 2), 1, 10, 2, 20, 3, 30, 4, 40),
             TU_F32(S(1, 1, 2, 2), 1, -1, 0.5f, 2));
    TU_CHECK_F32(o, S(1, 2, 2, 4), 0, 1, -1, 5, 20, 2, -2, 10, 40, 3, -3, 15, 60, 4, -4, 20, 80);
    rt_tensor_unref(o);
    /* 3x3 ones, stride 2 SAME on x33: pad 1 on every side; windows
     * x[0..1][0..1] = 12, x[0..1][1..2] = 16, x[1..2][0..1] = 24, x[1..2][1..2] = 28 */
    o = run2(conv_node("DepthwiseConv2dNative", "SAME", 2, 2, 0), x33(),
             tu_iota_f32(S(3, 3, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 12, 16, 24, 28);
    rt_tensor_unref(o);
}
END_TEST

/* ---- Conv2DBackpropInput ---- */

static rt_tensor *backprop(Tensorflow__NodeDef *d, rt_tensor *sizes, rt_tensor *f, rt_tensor *dy) {
    rt_tensor *in[3] = {sizes, f, dy};
    rt_tensor *o = tu_run1(d, in, 3);
    tu_unref(in, 3);
    return o;
}

START_TEST(backprop_hand) {
    /* VALID stride 1, diag filter, dy = [[1,2],[3,4]]: dx = dy at the
     * top-left plus dy shifted by (1,1):
     * [[1,2,0],[3,4,0],[0,0,0]] + [[0,0,0],[0,1,2],[0,3,4]] = [[1,2,0],[3,5,2],[0,3,4]] */
    rt_tensor *o = backprop(conv_node("Conv2DBackpropInput", "VALID", 1, 1, 0),
                            TU_I32(S(4), 1, 3, 3, 1), fdiag(), TU_F32(S(1, 2, 2, 1), 1, 2, 3, 4));
    TU_CHECK_F32(o, S(1, 3, 3, 1), 0, 1, 2, 0, 3, 5, 2, 0, 3, 4);
    rt_tensor_unref(o);
    /* SAME stride 2, 3x3 ones, input 4x4: dy[oh][ow] spreads over rows and
     * columns 2o..2o+2 (< 4). Row r receives oh in {0},{0},{0,1},{1} for
     * r = 0..3, likewise columns, so dx[r][c] sums dy over those sets:
     * [1,1,3,2],[1,1,3,2],[4,4,10,6],[3,3,7,4] */
    o = backprop(conv_node("Conv2DBackpropInput", "SAME", 2, 2, 0), TU_I32(S(4), 1, 4, 4, 1),
                 tu_iota_f32(S(3, 3, 1, 1), 1, 0), TU_F32(S(1, 2, 2, 1), 1, 2, 3, 4));
    TU_CHECK_F32(o, S(1, 4, 4, 1), 0, 1, 1, 3, 2, 1, 1, 3, 2, 4, 4, 10, 6, 3, 3, 7, 4);
    rt_tensor_unref(o);
}
END_TEST

/* <conv(x), dy> must equal <x, backprop(dy)> for every x and dy. */
START_TEST(backprop_adjoint) {
    for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++) {
        const conv_case *k = &conv_cases[i];
        unsigned seed = 1234u + (unsigned)i;
        int64_t OH, OW, pt, pl;
        ref_dim(k->H, k->KH, k->sh, k->dh, k->same, &OH, &pt);
        ref_dim(k->W, k->KW, k->sw, k->dw, k->same, &OW, &pl);
        rt_shape xs = k->nchw ? S(k->N, k->C, k->H, k->W) : S(k->N, k->H, k->W, k->C);
        rt_shape ys = k->nchw ? S(k->N, k->M, OH, OW) : S(k->N, OH, OW, k->M);
        rt_tensor *x = rand_t(xs, &seed), *f = rand_t(S(k->KH, k->KW, k->C, k->M), &seed);
        rt_tensor *dy = rand_t(ys, &seed);
        Tensorflow__NodeDef *d =
            conv_node("Conv2D", k->same ? "SAME" : "VALID", k->sh, k->sw, k->nchw);
        Tensorflow__NodeDef *b =
            conv_node("Conv2DBackpropInput", k->same ? "SAME" : "VALID", k->sh, k->sw, k->nchw);
        if (k->nchw) {
            tu_attr_ints(d, "dilations", 1, 1, k->dh, k->dw);
            tu_attr_ints(b, "dilations", 1, 1, k->dh, k->dw);
        } else {
            tu_attr_ints(d, "dilations", 1, k->dh, k->dw, 1);
            tu_attr_ints(b, "dilations", 1, k->dh, k->dw, 1);
        }
        rt_tensor *cin[2] = {x, f};
        rt_tensor *y = tu_run1(d, cin, 2);
        rt_tensor *sizes = TU_I32(S(4), (int32_t)xs.dim[0], (int32_t)xs.dim[1], (int32_t)xs.dim[2],
                                  (int32_t)xs.dim[3]);
        rt_tensor *bin[3] = {sizes, f, dy};
        rt_tensor *dx = tu_run1(b, bin, 3);
        tu_check_shape(dx, RT_DT_FLOAT, xs);
        double lhs = 0, rhs = 0;
        for (int64_t j = 0; j < y->nelem; j++)
            lhs += (double)rt_tensor_f32(y)[j] * rt_tensor_f32(dy)[j];
        for (int64_t j = 0; j < x->nelem; j++)
            rhs += (double)rt_tensor_f32(x)[j] * rt_tensor_f32(dx)[j];
        ck_assert_msg(fabs(lhs - rhs) <= 1e-3 * (1 + fabs(lhs)), "case %zu: %g vs %g", i, lhs, rhs);
        rt_tensor *all[6] = {x, f, dy, y, sizes, dx};
        tu_unref(all, 6);
    }
}
END_TEST

/* ---- pools ---- */

static Tensorflow__NodeDef *pool_node(const char *op, const char *pad, int64_t k, int64_t s,
                                      int nchw) {
    Tensorflow__NodeDef *d = conv_node(op, pad, s, s, nchw);
    if (nchw)
        tu_attr_ints(d, "ksize", 1, 1, k, k);
    else
        tu_attr_ints(d, "ksize", 1, k, k, 1);
    return d;
}

static rt_tensor *run1(Tensorflow__NodeDef *d, rt_tensor *x) {
    rt_tensor *o = tu_run1(d, &x, 1);
    rt_tensor_unref(x);
    return o;
}

START_TEST(pool_valid) {
    /* 4x4 = 1..16, 2x2 windows stride 2: max [6,8,14,16];
     * mean [(1+2+5+6)/4, (3+4+7+8)/4, (9+10+13+14)/4, (11+12+15+16)/4] */
    rt_tensor *o = run1(pool_node("MaxPool", "VALID", 2, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 6, 8, 14, 16);
    rt_tensor_unref(o);
    o = run1(pool_node("AvgPool", "VALID", 2, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 3.5f, 5.5f, 11.5f, 13.5f);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(pool_same) {
    /* 3x3 windows stride 2 SAME on 4x4 (pad bottom/right 1): windows rows/cols
     * 0-2 and 2-3. Max: [11,12,15,16]. Avg over valid elements only:
     * 54/9 = 6, 45/6 = 7.5, 72/6 = 12, 54/4 = 13.5 */
    rt_tensor *o = run1(pool_node("MaxPool", "SAME", 3, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 11, 12, 15, 16);
    rt_tensor_unref(o);
    o = run1(pool_node("AvgPool", "SAME", 3, 2, 0), tu_iota_f32(S(1, 4, 4, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 2, 2, 1), 1e-6f, 6, 7.5f, 12, 13.5f);
    rt_tensor_unref(o);
    /* 3x3 stride 1 SAME on x33: corners average 4 values, edges 6, centre 9:
     * (1+2+4+5)/4 = 3, (1+..+6)/6 = 3.5, (2+3+5+6)/4 = 4,
     * (1+2+4+5+7+8)/6 = 4.5, 45/9 = 5, (2+3+5+6+8+9)/6 = 5.5,
     * (4+5+7+8)/4 = 6, (4+..+9)/6 = 6.5, (5+6+8+9)/4 = 7 */
    o = run1(pool_node("AvgPool", "SAME", 3, 1, 0), x33());
    TU_CHECK_F32(o, S(1, 3, 3, 1), 1e-6f, 3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7);
    rt_tensor_unref(o);
}
END_TEST

START_TEST(pool_explicit) {
    /* MaxPool 2x2 stride 2 on x33 with one padding row/column on every side
     * (padded 5x5, out (3 + 2 - 2 + 2) / 2 = 2): windows rows/cols {-1,0} and
     * {1,2}: max(x[0][0]) = 1, max(2,3) = 3, max(4,7) = 7, max(5,6,8,9) = 9 */
    Tensorflow__NodeDef *d = pool_node("MaxPool", "EXPLICIT", 2, 2, 0);
    tu_attr_ints(d, "explicit_paddings", 0, 0, 1, 1, 1, 1, 0, 0);
    rt_tensor *o = run1(d, x33());
    TU_CHECK_F32(o, S(1, 2, 2, 1), 0, 1, 3, 7, 9);
    rt_tensor_unref(o);
    rt_tensor *x = x33();
    d = pool_node("AvgPool", "EXPLICIT", 2, 2, 0);
    free(d->name);
    d->name = strdup("bad_avg_explicit");
    tu_attr_ints(d, "explicit_paddings", 0, 0, 1, 1, 1, 1, 0, 0);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "EXPLICIT");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(pool_nchw_and_errors) {
    /* NCHW (1,2,2,2): channel 0 = [1,2,3,4], channel 1 = [8,7,6,5];
     * 2x2 VALID: max [4, 8], mean [2.5, 6.5] */
    rt_tensor *o =
        run1(pool_node("MaxPool", "VALID", 2, 2, 1), TU_F32(S(1, 2, 2, 2), 1, 2, 3, 4, 8, 7, 6, 5));
    TU_CHECK_F32(o, S(1, 2, 1, 1), 0, 4, 8);
    rt_tensor_unref(o);
    o = run1(pool_node("AvgPool", "VALID", 2, 2, 1), TU_F32(S(1, 2, 2, 2), 1, 2, 3, 4, 8, 7, 6, 5));
    TU_CHECK_F32(o, S(1, 2, 1, 1), 0, 2.5f, 6.5f);
    rt_tensor_unref(o);
    /* NHWC with 2 channels interleaved: same numbers in NHWC order */
    o = run1(pool_node("MaxPool", "VALID", 2, 2, 0), TU_F32(S(1, 2, 2, 2), 1, 8, 2, 7, 3, 6, 4, 5));
    TU_CHECK_F32(o, S(1, 1, 1, 2), 0, 4, 8);
    rt_tensor_unref(o);
    rt_tensor *x = x33();
    Tensorflow__NodeDef *d = tu_node_new("MaxPool", "bad_pool");
    tu_attr_s(d, "padding", "VALID");
    tu_attr_ints(d, "strides", 1, 1, 1, 1);
    tu_attr_ints(d, "ksize", 2, 2, 2, 1);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "batch");
    /* a 5x5 window on 3x3 VALID: (3 - 5 + 1) / 1 = -1 output rows */
    tu_run_fail(pool_node("AvgPool", "VALID", 5, 1, 0), &x, 1, 1, MS_EINVAL, "does not fit");
    /* a 4x4 window gives (3 - 4 + 1) / 1 = 0 rows: an empty result, as in TensorFlow */
    rt_tensor *o0 = tu_run1(pool_node("AvgPool", "VALID", 4, 1, 0), &x, 1);
    tu_check_shape(o0, RT_DT_FLOAT, S(1, 0, 0, 1));
    rt_tensor_unref(o0);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(conv_errors) {
    rt_tensor *in[2] = {x33(), fdiag()};
    Tensorflow__NodeDef *d = tu_node_new("Conv2D", "bad_conv");
    tu_attr_s(d, "padding", "FULL");
    tu_attr_ints(d, "strides", 1, 1, 1, 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "padding");
    d = tu_node_new("Conv2D", "bad_conv");
    tu_attr_s(d, "padding", "VALID");
    tu_attr_ints(d, "strides", 2, 1, 1, 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "strides");
    d = tu_node_new("Conv2D", "huge_stride");
    tu_attr_s(d, "padding", "SAME");
    tu_attr_ints(d, "strides", 1, INT64_MAX, 1, 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "strides");
    d = tu_node_new("Conv2D", "huge_dilation");
    tu_attr_s(d, "padding", "SAME");
    tu_attr_ints(d, "strides", 1, 1, 1, 1);
    tu_attr_ints(d, "dilations", 1, 1, (int64_t)1 << 40, 1);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "dilations");
    /* filter expecting 2 input channels for a 1-channel input */
    rt_tensor *f2 = tu_iota_f32(S(1, 1, 2, 1), 1, 0);
    rt_tensor *in2[2] = {in[0], f2};
    tu_run_fail(conv_node("Conv2D", "VALID", 1, 1, 0), in2, 2, 1, MS_EINVAL, "channels");
    /* an input without channels cannot feed a filter of depth 1 */
    rt_tensor *empty = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &S(1, 2, 2, 0), &empty), MS_OK);
    rt_tensor *in3[2] = {empty, in[1]};
    Tensorflow__NodeDef *d0 = conv_node("Conv2D", "VALID", 1, 1, 0);
    free(d0->name);
    d0->name = strdup("no_channels");
    tu_run_fail(d0, in3, 2, 1, MS_EINVAL, "channels");
    rt_tensor_unref(empty);
    /* backprop with dy of the wrong size */
    rt_tensor *bin[3] = {TU_I32(S(4), 1, 3, 3, 1), in[1],
                         TU_F32(S(1, 3, 3, 1), 0, 0, 0, 0, 0, 0, 0, 0, 0)};
    Tensorflow__NodeDef *b = conv_node("Conv2DBackpropInput", "VALID", 1, 1, 0);
    free(b->name);
    b->name = strdup("bad_backprop");
    tu_run_fail(b, bin, 3, 1, MS_EINVAL, "out_backprop");
    rt_tensor_unref(bin[0]);
    rt_tensor_unref(bin[2]);
    rt_tensor_unref(f2);
    tu_unref(in, 2);
}
END_TEST

/* ---- FusedBatchNormV3 ---- */

START_TEST(batch_norm) {
    /* scale [2,1], offset [0.5,0], mean [1,2], var [3.99,0.24], eps 0.01:
     * std [2, 0.5]; channel 0: 2(x-1)/2 + 0.5 = x - 0.5; channel 1: (x-2)/0.5 = 2x - 4.
     * NHWC pixels [1,2],[3,4] -> [0.5, 0], [2.5, 4] */
    for (int nchw = 0; nchw < 2; nchw++) {
        rt_tensor *in[5] = {nchw ? TU_F32(S(1, 2, 1, 2), 1, 3, 2, 4)
                                 : TU_F32(S(1, 1, 2, 2), 1, 2, 3, 4),
                            TU_F32(S(2), 2, 1), TU_F32(S(2), 0.5f, 0), TU_F32(S(2), 1, 2),
                            TU_F32(S(2), 3.99f, 0.24f)};
        Tensorflow__NodeDef *d = tu_node_new("FusedBatchNormV3", "bn");
        tu_attr_b(d, "is_training", 0);
        tu_attr_f(d, "epsilon", 0.01f);
        if (nchw) tu_attr_s(d, "data_format", "NCHW");
        rt_tensor *o[6] = {0};
        ck_assert_int_eq(tu_run(d, in, 5, o, 6), MS_OK);
        if (nchw)
            TU_CHECK_F32(o[0], S(1, 2, 1, 2), 1e-5f, 0.5f, 2.5f, 0, 4);
        else
            TU_CHECK_F32(o[0], S(1, 1, 2, 2), 1e-5f, 0.5f, 0, 2.5f, 4);
        TU_CHECK_F32(o[1], S(2), 0, 1, 2); /* batch_mean = mean */
        TU_CHECK_F32(o[2], S(2), 0, 3.99f, 0.24f);
        for (int i = 3; i < 6; i++)
            ck_assert_ptr_nonnull(o[i]);
        tu_unref(o, 6);
        tu_node_free(d);
        /* training mode is refused with a clear error */
        d = tu_node_new("FusedBatchNormV3", "bn_train");
        tu_attr_b(d, "is_training", 1);
        tu_run_fail(d, in, 5, 6, MS_ENOTSUP, "is_training");
        /* channel count mismatch */
        rt_tensor_unref(in[1]);
        in[1] = TU_F32(S(3), 1, 1, 1);
        d = tu_node_new("FusedBatchNormV3", "bad_bn");
        tu_attr_b(d, "is_training", 0);
        tu_run_fail(d, in, 5, 6, MS_EINVAL, "scale");
        tu_unref(in, 5);
    }
}
END_TEST

START_TEST(batch_norm_v1) {
    /* FusedBatchNorm (5 outputs), NHWC, default epsilon 1e-4: one channel with
     * scale 1, offset 0, mean 2, variance 0.9999 -> y = (x - 2) / 1 */
    rt_tensor *in[5] = {TU_F32(S(1, 1, 3, 1), 1, 2, 4), TU_F32(S(1), 1), TU_F32(S(1), 0),
                        TU_F32(S(1), 2), TU_F32(S(1), 0.9999f)};
    Tensorflow__NodeDef *d = tu_node_new("FusedBatchNorm", "bn");
    tu_attr_b(d, "is_training", 0);
    rt_tensor *o[5] = {0};
    ck_assert_int_eq(tu_run(d, in, 5, o, 5), MS_OK);
    TU_CHECK_F32(o[0], S(1, 1, 3, 1), 1e-5f, -1, 0, 2);
    TU_CHECK_F32(o[2], S(1), 0, 0.9999f);
    tu_unref(o, 5);
    tu_node_free(d);
    tu_unref(in, 5);
}
END_TEST

/* ---- 3-D ---- */

static Tensorflow__NodeDef *node3(const char *op, const char *pad, int64_t k, int64_t st,
                                  int ncdhw) {
    Tensorflow__NodeDef *d = tu_node_new(op, "v");
    tu_attr_s(d, "padding", pad);
    if (ncdhw) {
        tu_attr_s(d, "data_format", "NCDHW");
        tu_attr_ints(d, "strides", 1, 1, st, st, st);
        if (k) tu_attr_ints(d, "ksize", 1, 1, k, k, k);
    } else {
        tu_attr_ints(d, "strides", 1, st, st, st, 1);
        if (k) tu_attr_ints(d, "ksize", 1, k, k, k, 1);
    }
    return d;
}

START_TEST(conv3d_hand) {
    /* x[d][h][w] = 4d + 2h + w + 1 (2x2x2), 2x2x2 ones. VALID: sum 1..8 = 36.
     * SAME (padding after): each output sums the voxels at or after it:
     * (0,0,0) 36, (0,0,1) 2+4+6+8 = 20, (0,1,0) 3+4+7+8 = 22, (0,1,1) 4+8 = 12,
     * (1,0,0) 5+6+7+8 = 26, (1,0,1) 6+8 = 14, (1,1,0) 7+8 = 15, (1,1,1) 8 */
    rt_tensor *o = run2(node3("Conv3D", "VALID", 0, 1, 0), tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1),
                        tu_iota_f32(S(2, 2, 2, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 1, 1, 1, 1), 0, 36);
    rt_tensor_unref(o);
    o = run2(node3("Conv3D", "SAME", 0, 1, 0), tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1),
             tu_iota_f32(S(2, 2, 2, 1, 1), 1, 0));
    TU_CHECK_F32(o, S(1, 2, 2, 2, 1), 0, 36, 20, 22, 12, 26, 14, 15, 8);
    rt_tensor_unref(o);
    /* pools on the same volume: max 8, mean 4.5; SAME stride 1 means over the
     * voxels at or after each position: (0,0,0) 36/8, (0,1,1) 12/2, (1,1,0) 15/2, (1,1,1) 8 */
    o = run1(node3("MaxPool3D", "VALID", 2, 2, 0), tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 1, 1, 1, 1), 0, 8);
    rt_tensor_unref(o);
    o = run1(node3("AvgPool3D", "SAME", 2, 1, 0), tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1));
    TU_CHECK_F32(o, S(1, 2, 2, 2, 1), 1e-6f, 4.5f, 5, 5.5f, 6, 6.5f, 7, 7.5f, 8);
    rt_tensor_unref(o);
    /* NCDHW, 2 channels [1,2] and [5,3] along w: max [2,5], mean [1.5,4] */
    Tensorflow__NodeDef *d = tu_node_new("MaxPool3D", "v");
    tu_attr_s(d, "padding", "VALID");
    tu_attr_s(d, "data_format", "NCDHW");
    tu_attr_ints(d, "strides", 1, 1, 1, 1, 1);
    tu_attr_ints(d, "ksize", 1, 1, 1, 1, 2);
    o = run1(d, TU_F32(S(1, 2, 1, 1, 2), 1, 2, 5, 3));
    TU_CHECK_F32(o, S(1, 2, 1, 1, 1), 0, 2, 5);
    rt_tensor_unref(o);
    rt_tensor *x = tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1);
    d = tu_node_new("MaxPool3D", "bad_pool3d");
    tu_attr_s(d, "padding", "VALID");
    tu_attr_ints(d, "strides", 1, 1, 1, 1);
    tu_attr_ints(d, "ksize", 1, 1, 1, 1, 1);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "5 values");
    rt_tensor_unref(x);
}
END_TEST

/* Conv3D against the direct definition on random volumes. */
START_TEST(conv3d_reference) {
    static const struct {
        int64_t N, D, H, W, C, K, M, s, dil;
        int same, ncdhw;
    } cs[] = {
        {2, 5, 4, 6, 3, 3, 4, 1, 1, 1, 0},
        {1, 6, 5, 5, 2, 3, 3, 2, 1, 1, 1},
        {1, 7, 6, 6, 2, 2, 2, 1, 2, 0, 0},
        {1, 5, 5, 5, 3, 2, 2, 2, 1, 0, 1},
    };
    for (size_t t = 0; t < sizeof(cs) / sizeof(cs[0]); t++) {
        unsigned seed = 4242u + (unsigned)t;
        int64_t in[3] = {cs[t].D, cs[t].H, cs[t].W}, out[3], pad[3];
        for (int i = 0; i < 3; i++)
            ref_dim(in[i], cs[t].K, cs[t].s, cs[t].dil, cs[t].same, &out[i], &pad[i]);
        int nc = cs[t].ncdhw;
        int64_t C = cs[t].C, M = cs[t].M, K = cs[t].K;
        rt_shape xs = nc ? S(cs[t].N, C, in[0], in[1], in[2]) : S(cs[t].N, in[0], in[1], in[2], C);
        rt_tensor *x = rand_t(xs, &seed), *f = rand_t(S(K, K, K, C, M), &seed);
        Tensorflow__NodeDef *d = node3("Conv3D", cs[t].same ? "SAME" : "VALID", 0, cs[t].s, nc);
        if (nc)
            tu_attr_ints(d, "dilations", 1, 1, cs[t].dil, cs[t].dil, cs[t].dil);
        else
            tu_attr_ints(d, "dilations", 1, cs[t].dil, cs[t].dil, cs[t].dil, 1);
        rt_tensor *io[2] = {x, f};
        rt_tensor *o = tu_run1(d, io, 2);
        tu_check_shape(o, RT_DT_FLOAT,
                       nc ? S(cs[t].N, M, out[0], out[1], out[2])
                          : S(cs[t].N, out[0], out[1], out[2], M));
        const float *X = x->data, *F = f->data, *Y = o->data;
        for (int64_t n = 0; n < cs[t].N; n++)
            for (int64_t a = 0; a < out[0]; a++)
                for (int64_t b = 0; b < out[1]; b++)
                    for (int64_t c = 0; c < out[2]; c++)
                        for (int64_t m = 0; m < M; m++) {
                            double acc = 0;
                            for (int64_t kd = 0; kd < K; kd++)
                                for (int64_t kh = 0; kh < K; kh++)
                                    for (int64_t kw = 0; kw < K; kw++) {
                                        int64_t i0 = a * cs[t].s - pad[0] + kd * cs[t].dil;
                                        int64_t i1 = b * cs[t].s - pad[1] + kh * cs[t].dil;
                                        int64_t i2 = c * cs[t].s - pad[2] + kw * cs[t].dil;
                                        if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] ||
                                            i2 < 0 || i2 >= in[2])
                                            continue;
                                        for (int64_t ci = 0; ci < C; ci++) {
                                            int64_t xi =
                                                nc ? (((n * C + ci) * in[0] + i0) * in[1] + i1) *
                                                             in[2] +
                                                         i2
                                                   : (((n * in[0] + i0) * in[1] + i1) * in[2] +
                                                      i2) * C +
                                                         ci;
                                            acc += X[xi] *
                                                   F[(((kd * K + kh) * K + kw) * C + ci) * M + m];
                                        }
                                    }
                            int64_t yi =
                                nc ? (((n * M + m) * out[0] + a) * out[1] + b) * out[2] + c
                                   : (((n * out[0] + a) * out[1] + b) * out[2] + c) * M + m;
                            ck_assert_msg(fabs(Y[yi] - acc) <= 1e-4 * (1 + fabs(acc)),
                                          "case %zu: got %g expected %g", t, Y[yi], acc);
                        }
        tu_unref(io, 2);
        rt_tensor_unref(o);
    }
}
END_TEST

/* ---- resize ---- */

static rt_tensor *resize(const char *op, rt_tensor *x, int32_t h, int32_t w, int align, int half) {
    Tensorflow__NodeDef *d = tu_node_new(op, "rs");
    tu_attr_b(d, "align_corners", align);
    tu_attr_b(d, "half_pixel_centers", half);
    rt_tensor *in[2] = {x, TU_I32(S(2), h, w)};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(in[1]);
    return o;
}

START_TEST(resize_bilinear) {
    /* x = [[0,1],[2,3]] is linear (2r + c), so bilinear values are 2r' + c'
     * at the mapped source coordinates r', c'. */
    rt_tensor *x = TU_F32(S(1, 2, 2, 1), 0, 1, 2, 3), *o;
    /* align_corners: scale (2-1)/(3-1) = 0.5 -> coordinates 0, 0.5, 1 */
    o = resize("ResizeBilinear", x, 3, 3, 1, 0);
    TU_CHECK_F32(o, S(1, 3, 3, 1), 1e-6f, 0, 0.5f, 1, 1, 1.5f, 2, 2, 2.5f, 3);
    rt_tensor_unref(o);
    /* legacy: scale 2/3 -> coordinates 0, 2/3, 4/3 (clamped to 1) */
    o = resize("ResizeBilinear", x, 3, 3, 0, 0);
    TU_CHECK_F32(o, S(1, 3, 3, 1), 1e-6f, 0, 2.0f / 3, 1, 4.0f / 3, 2, 7.0f / 3, 2, 8.0f / 3, 3);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* one row [0,10,20,30] (value 10c): 4 -> 3 columns
     * half-pixel: c' = (j + 0.5) * 4/3 - 0.5 = 1/6, 3/2, 17/6 -> 1.667, 15, 28.333
     * legacy:     c' = j * 4/3 = 0, 4/3, 8/3                -> 0, 13.333, 26.667
     * align:      c' = j * 3/2 = 0, 1.5, 3                  -> 0, 15, 30 */
    x = TU_F32(S(1, 1, 4, 1), 0, 10, 20, 30);
    o = resize("ResizeBilinear", x, 1, 3, 0, 1);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 1e-5f, 10.0f / 6, 15, 170.0f / 6);
    rt_tensor_unref(o);
    o = resize("ResizeBilinear", x, 1, 3, 0, 0);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 1e-5f, 0, 40.0f / 3, 80.0f / 3);
    rt_tensor_unref(o);
    o = resize("ResizeBilinear", x, 1, 3, 1, 0);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 1e-5f, 0, 15, 30);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* uint8 [0,10] upscaled to 4 with half-pixel: c' = -0.25 (clamped to 0),
     * 0.25, 0.75, 1.25 (clamped to 1) -> float [0, 2.5, 7.5, 10] */
    x = TU_U8(S(1, 1, 2, 1), 0, 10);
    o = resize("ResizeBilinear", x, 1, 4, 0, 1);
    TU_CHECK_F32(o, S(1, 1, 4, 1), 1e-6f, 0, 2.5f, 7.5f, 10);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(resize_nearest) {
    /* [0,10,20,30] -> 3 columns:
     * legacy  floor(j * 4/3)         = 0,1,2 -> 0,10,20
     * align   round(j * 3/2)         = 0,2,3 -> 0,20,30
     * half    floor((j + 0.5) * 4/3) = 0,2,3 -> 0,20,30 */
    rt_tensor *x = TU_I32(S(1, 1, 4, 1), 0, 10, 20, 30), *o;
    o = resize("ResizeNearestNeighbor", x, 1, 3, 0, 0);
    TU_CHECK_INT(o, RT_DT_INT32, S(1, 1, 3, 1), 0, 10, 20);
    rt_tensor_unref(o);
    o = resize("ResizeNearestNeighbor", x, 1, 3, 1, 0);
    TU_CHECK_INT(o, RT_DT_INT32, S(1, 1, 3, 1), 0, 20, 30);
    rt_tensor_unref(o);
    o = resize("ResizeNearestNeighbor", x, 1, 3, 0, 1);
    TU_CHECK_INT(o, RT_DT_INT32, S(1, 1, 3, 1), 0, 20, 30);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* [0,10] -> 3: legacy floor(0, 2/3, 4/3) = 0,0,1; align round(0, .5, 1) = 0,1,1;
     * half floor(1/3, 1, 5/3) = 0,1,1 */
    x = TU_F32(S(1, 1, 2, 1), 0, 10);
    o = resize("ResizeNearestNeighbor", x, 1, 3, 0, 0);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 0, 0, 0, 10);
    rt_tensor_unref(o);
    o = resize("ResizeNearestNeighbor", x, 1, 3, 1, 0);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 0, 0, 10, 10);
    rt_tensor_unref(o);
    o = resize("ResizeNearestNeighbor", x, 1, 3, 0, 1);
    TU_CHECK_F32(o, S(1, 1, 3, 1), 0, 0, 10, 10);
    rt_tensor_unref(o);
    /* 2-D with 2 channels, 2x2 -> 4x4 legacy: each pixel becomes a 2x2 block */
    rt_tensor *y = TU_F32(S(1, 2, 2, 2), 1, -1, 2, -2, 3, -3, 4, -4);
    o = resize("ResizeNearestNeighbor", y, 4, 4, 0, 0);
    tu_check_shape(o, RT_DT_FLOAT, S(1, 4, 4, 2));
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            float v = (float)(1 + (r / 2) * 2 + c / 2);
            ck_assert_float_eq(rt_tensor_f32(o)[(r * 4 + c) * 2], v);
            ck_assert_float_eq(rt_tensor_f32(o)[(r * 4 + c) * 2 + 1], -v);
        }
    rt_tensor_unref(o);
    rt_tensor_unref(y);
    /* errors: both flags; bad size */
    Tensorflow__NodeDef *d = tu_node_new("ResizeBilinear", "bad_resize");
    tu_attr_b(d, "align_corners", 1);
    tu_attr_b(d, "half_pixel_centers", 1);
    rt_tensor *in[2] = {x, TU_I32(S(2), 0, 3)};
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "half_pixel_centers");
    tu_run_fail(tu_node_new("ResizeNearestNeighbor", "bad_size"), in, 2, 1, MS_EINVAL, "positive");
    tu_unref(in, 2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_nn");
    struct {
        const char *name;
        const TTest *t;
    } tests[] = {
        {"conv", conv_valid_same},
        {"conv", conv_same_stride2},
        {"conv", conv_dilated},
        {"conv", conv_channels_1x1},
        {"conv", conv_nchw},
        {"conv", conv_explicit},
        {"conv_ref", conv_reference},
        {"depthwise", depthwise_reference},
        {"conv_grouped", conv_grouped},
        {"depthwise", depthwise_hand},
        {"backprop", backprop_hand},
        {"backprop", backprop_adjoint},
        {"pool", pool_valid},
        {"pool", pool_same},
        {"pool", pool_nchw_and_errors},
        {"pool", pool_explicit},
        {"errors", conv_errors},
        {"batch_norm", batch_norm},
        {"batch_norm", batch_norm_v1},
        {"resize", resize_bilinear},
        {"resize", resize_nearest},
        {"conv3d", conv3d_hand},
        {"conv3d", conv3d_reference},
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
