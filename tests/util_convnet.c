/* util_convnet.c - the test networks of util_convnet.h. */
#include "util_convnet.h"

#include <check.h>
#include <stdint.h>

const char *const ut_convnet_fetches[UT_CONVNET_NFETCH] = {"sm", "am", "tr", "pd", "rs", "mean"};
const char *const ut_convnet_host_nodes[] = {"am", NULL};

static float lcg(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xFFFF) / 65536.0f - 0.5f; /* [-0.5, 0.5) */
}

static void constf(rt_gb *gb, const char *name, rt_shape s, unsigned seed, float scale, float bias) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) ((float *)t->data)[i] = bias + scale * lcg(&seed);
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

void ut_gb_consti(rt_gb *gb, const char *name, int rank, const int64_t *dims, const int32_t *v) {
    rt_tensor *t = NULL;
    rt_shape s = rt_shape_make(rank, dims);
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT32, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) ((int32_t *)t->data)[i] = v[i];
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

static Tensorflow__NodeDef *node2(rt_gb *gb, const char *op, const char *name, const char *a,
                                  const char *b) {
    Tensorflow__NodeDef *n = rt_gb_node(gb, op, name);
    rt_gb_input(gb, n, a);
    if (b) rt_gb_input(gb, n, b);
    rt_gb_attr_type(gb, n, "T", RT_DT_FLOAT);
    return n;
}

static void window(rt_gb *gb, Tensorflow__NodeDef *n, const char *key, int64_t a, int64_t b) {
    int64_t v[4] = {1, a, b, 1};
    rt_gb_attr_ilist(gb, n, key, v, 4);
}

void ut_convnet_build(rt_gb *gb) {
    rt_shape xs = {.rank = 4, .dim = {2, 9, 8, 3}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    constf(gb, "f1", (rt_shape){.rank = 4, .dim = {3, 3, 3, 4}}, 1, 0.8f, 0.0f);
    constf(gb, "bias1", (rt_shape){.rank = 1, .dim = {4}}, 2, 0.4f, 0.05f);
    constf(gb, "dwf", (rt_shape){.rank = 4, .dim = {3, 3, 4, 2}}, 3, 0.8f, 0.0f);
    constf(gb, "bn_scale", (rt_shape){.rank = 1, .dim = {8}}, 4, 0.5f, 1.0f);
    constf(gb, "bn_offset", (rt_shape){.rank = 1, .dim = {8}}, 5, 0.2f, 0.0f);
    constf(gb, "bn_mean", (rt_shape){.rank = 1, .dim = {8}}, 6, 0.2f, 0.0f);
    constf(gb, "bn_var", (rt_shape){.rank = 1, .dim = {8}}, 7, 0.5f, 0.6f);
    constf(gb, "w", (rt_shape){.rank = 2, .dim = {40, 5}}, 8, 0.6f, 0.0f);
    constf(gb, "b", (rt_shape){.rank = 1, .dim = {5}}, 9, 0.2f, 0.0f);
    constf(gb, "half", (rt_shape){.rank = 0}, 10, 0.0f, 0.5f);
    constf(gb, "den", (rt_shape){.rank = 1, .dim = {5}}, 11, 0.5f, 1.5f);
    constf(gb, "two", (rt_shape){.rank = 0}, 12, 0.0f, 0.75f);

    Tensorflow__NodeDef *c1 = node2(gb, "Conv2D", "c1", "x", "f1");
    window(gb, c1, "strides", 2, 2);
    rt_gb_attr_str(gb, c1, "padding", "SAME");
    node2(gb, "BiasAdd", "b1", "c1", "bias1");
    rt_gb_unary(gb, "Relu", "r1", "b1", RT_DT_FLOAT);
    Tensorflow__NodeDef *d1 = node2(gb, "DepthwiseConv2dNative", "d1", "r1", "dwf");
    window(gb, d1, "strides", 1, 1);
    rt_gb_attr_str(gb, d1, "padding", "SAME");
    Tensorflow__NodeDef *bn = node2(gb, "FusedBatchNormV3", "bn", "d1", "bn_scale");
    rt_gb_input(gb, bn, "bn_offset");
    rt_gb_input(gb, bn, "bn_mean");
    rt_gb_input(gb, bn, "bn_var");
    rt_gb_attr_type(gb, bn, "U", RT_DT_FLOAT);
    rt_gb_attr_f(gb, bn, "epsilon", 0.001f);
    rt_gb_attr_b(gb, bn, "is_training", 0);
    rt_gb_unary(gb, "Relu6", "r2", "bn", RT_DT_FLOAT);
    Tensorflow__NodeDef *mp = node2(gb, "MaxPool", "mp", "r2", NULL);
    window(gb, mp, "ksize", 2, 2);
    window(gb, mp, "strides", 2, 2);
    rt_gb_attr_str(gb, mp, "padding", "VALID");
    Tensorflow__NodeDef *ap = node2(gb, "AvgPool", "ap", "r2", NULL);
    window(gb, ap, "ksize", 3, 3);
    window(gb, ap, "strides", 1, 1);
    rt_gb_attr_str(gb, ap, "padding", "SAME");
    ut_gb_consti(gb, "axes", 1, (int64_t[]){2}, (int32_t[]){1, 2});
    Tensorflow__NodeDef *mean = node2(gb, "Mean", "mean", "ap", "axes");
    rt_gb_attr_type(gb, mean, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(gb, mean, "keep_dims", 0);
    ut_gb_consti(gb, "flat_shape", 1, (int64_t[]){2}, (int32_t[]){-1, 32});
    Tensorflow__NodeDef *fl = node2(gb, "Reshape", "fl", "mp", "flat_shape");
    rt_gb_attr_type(gb, fl, "Tshape", RT_DT_INT32);
    ut_gb_consti(gb, "cat_axis", 0, NULL, (int32_t[]){1});
    Tensorflow__NodeDef *cat = node2(gb, "ConcatV2", "cat", "fl", "mean");
    rt_gb_input(gb, cat, "cat_axis");
    rt_gb_attr_i(gb, cat, "N", 2);
    rt_gb_attr_type(gb, cat, "Tidx", RT_DT_INT32);
    rt_gb_matmul(gb, "mm", "cat", "w", 0, 0, RT_DT_FLOAT);
    node2(gb, "BiasAdd", "ba", "mm", "b");
    rt_gb_unary(gb, "Tanh", "th", "ba", RT_DT_FLOAT);
    rt_gb_unary(gb, "Sigmoid", "sg", "ba", RT_DT_FLOAT);
    rt_gb_binary(gb, "AddV2", "ad", "th", "sg", RT_DT_FLOAT);
    rt_gb_binary(gb, "Mul", "mu", "half", "ad", RT_DT_FLOAT); /* scalar first: swapped */
    rt_gb_binary(gb, "Sub", "sub", "mu", "ba", RT_DT_FLOAT);
    rt_gb_binary(gb, "RealDiv", "dv", "sub", "den", RT_DT_FLOAT);
    rt_gb_binary(gb, "Maximum", "mx", "dv", "mu", RT_DT_FLOAT);
    rt_gb_binary(gb, "Minimum", "mn", "mx", "two", RT_DT_FLOAT);
    rt_gb_unary(gb, "Softmax", "sm", "mn", RT_DT_FLOAT);
    ut_gb_consti(gb, "am_axis", 0, NULL, (int32_t[]){1});
    Tensorflow__NodeDef *am = rt_gb_node(gb, "ArgMax", "am");
    rt_gb_input(gb, am, "sm");
    rt_gb_input(gb, am, "am_axis");
    rt_gb_attr_type(gb, am, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, am, "Tidx", RT_DT_INT32);
    rt_gb_attr_type(gb, am, "output_type", RT_DT_INT64);
    ut_gb_consti(gb, "perm", 1, (int64_t[]){4}, (int32_t[]){0, 3, 1, 2});
    Tensorflow__NodeDef *tr = node2(gb, "Transpose", "tr", "ap", "perm");
    rt_gb_attr_type(gb, tr, "Tperm", RT_DT_INT32);
    ut_gb_consti(gb, "pads", 2, (int64_t[]){4, 2}, (int32_t[]){0, 0, 1, 2, 0, 1, 0, 0});
    Tensorflow__NodeDef *pd = node2(gb, "Pad", "pd", "mp", "pads");
    rt_gb_attr_type(gb, pd, "Tpaddings", RT_DT_INT32);
    ut_gb_consti(gb, "rsize", 1, (int64_t[]){2}, (int32_t[]){3, 5});
    Tensorflow__NodeDef *rs = node2(gb, "ResizeBilinear", "rs", "mp", "rsize");
    rt_gb_attr_b(gb, rs, "half_pixel_centers", 1);
}

rt_tensor *ut_convnet_input(unsigned seed) {
    rt_shape xs = {.rank = 4, .dim = {2, 9, 8, 3}};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &xs, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) ((float *)t->data)[i] = 2.0f * lcg(&seed);
    return t;
}

/* ---- the data-movement / reduction / BatchMatMul network ---- */

const char *const ut_movenet_fetches[UT_MOVENET_NFETCH] = {"ss", "sl", "sum", "mx", "pr", "me",
                                                           "rn", "bm", "bm2", "dim0", "g2"};
const char *const ut_movenet_host_nodes[] = {"sh", NULL};

/* op(inputs...) with T = t (and no other type attr). */
static Tensorflow__NodeDef *nodev(rt_gb *gb, const char *op, const char *name, rt_dtype t,
                                  const char *const *ins) {
    Tensorflow__NodeDef *n = rt_gb_node(gb, op, name);
    for (int i = 0; ins[i]; i++) rt_gb_input(gb, n, ins[i]);
    if (t != RT_DT_INVALID) rt_gb_attr_type(gb, n, "T", t);
    return n;
}

void ut_gb_reduce(rt_gb *gb, const char *op, const char *name, const char *x, const char *axes,
                  int keep) {
    Tensorflow__NodeDef *n = nodev(gb, op, name, RT_DT_FLOAT, (const char *[]){x, axes, NULL});
    rt_gb_attr_type(gb, n, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(gb, n, "keep_dims", keep);
}

void ut_movenet_build(rt_gb *gb) {
    rt_shape xs = {.rank = 4, .dim = {2, 6, 5, 4}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    /* x[:, 1:5:2, :, 0:3]: begin mask on 0, end mask on 0 and 2 */
    ut_gb_consti(gb, "ss_b", 1, (int64_t[]){4}, (int32_t[]){0, 1, 0, 0});
    ut_gb_consti(gb, "ss_e", 1, (int64_t[]){4}, (int32_t[]){0, 5, 0, 3});
    ut_gb_consti(gb, "ss_s", 1, (int64_t[]){4}, (int32_t[]){1, 2, 1, 1});
    Tensorflow__NodeDef *ss =
        nodev(gb, "StridedSlice", "ss", RT_DT_FLOAT, (const char *[]){"x", "ss_b", "ss_e", "ss_s", NULL});
    rt_gb_attr_type(gb, ss, "Index", RT_DT_INT32);
    rt_gb_attr_i(gb, ss, "begin_mask", 1);
    rt_gb_attr_i(gb, ss, "end_mask", 5);
    ut_gb_consti(gb, "sl_b", 1, (int64_t[]){4}, (int32_t[]){0, 1, 1, 0});
    ut_gb_consti(gb, "sl_s", 1, (int64_t[]){4}, (int32_t[]){-1, 3, 3, -1});
    Tensorflow__NodeDef *sl = nodev(gb, "Slice", "sl", RT_DT_FLOAT, (const char *[]){"x", "sl_b", "sl_s", NULL});
    rt_gb_attr_type(gb, sl, "Index", RT_DT_INT32);
    ut_gb_consti(gb, "gi", 1, (int64_t[]){3}, (int32_t[]){3, 0, 2});
    ut_gb_consti(gb, "gax", 0, NULL, (int32_t[]){3});
    Tensorflow__NodeDef *g = nodev(gb, "GatherV2", "g", RT_DT_INVALID, (const char *[]){"x", "gi", "gax", NULL});
    rt_gb_attr_type(gb, g, "Tparams", RT_DT_FLOAT);
    rt_gb_attr_type(gb, g, "Tindices", RT_DT_INT32);
    rt_gb_attr_type(gb, g, "Taxis", RT_DT_INT32);
    ut_gb_consti(gb, "ax12", 1, (int64_t[]){2}, (int32_t[]){1, 2});
    ut_gb_consti(gb, "ax03", 1, (int64_t[]){2}, (int32_t[]){0, 3});
    ut_gb_consti(gb, "axl", 0, NULL, (int32_t[]){-1});
    ut_gb_reduce(gb, "Sum", "sum", "g", "ax12", 1);
    ut_gb_reduce(gb, "Max", "mx", "ss", "ax03", 0);
    ut_gb_reduce(gb, "Prod", "pr", "sl", "axl", 0);
    ut_gb_reduce(gb, "Mean", "me", "x", "ax03", 0);
    ut_gb_consti(gb, "rsz", 1, (int64_t[]){2}, (int32_t[]){9, 7});
    Tensorflow__NodeDef *rn =
        nodev(gb, "ResizeNearestNeighbor", "rn", RT_DT_FLOAT, (const char *[]){"x", "rsz", NULL});
    rt_gb_attr_b(gb, rn, "half_pixel_centers", 1);
    constf(gb, "bw", (rt_shape){.rank = 2, .dim = {4, 2}}, 21, 0.8f, 0.0f);
    Tensorflow__NodeDef *bm = nodev(gb, "BatchMatMulV2", "bm", RT_DT_FLOAT, (const char *[]){"sl", "bw", NULL});
    rt_gb_attr_b(gb, bm, "adj_x", 0);
    rt_gb_attr_b(gb, bm, "adj_y", 0);
    Tensorflow__NodeDef *bm2 = nodev(gb, "BatchMatMulV2", "bm2", RT_DT_FLOAT, (const char *[]){"x", "x", NULL});
    rt_gb_attr_b(gb, bm2, "adj_x", 0);
    rt_gb_attr_b(gb, bm2, "adj_y", 1);
    Tensorflow__NodeDef *sh = nodev(gb, "Shape", "sh", RT_DT_FLOAT, (const char *[]){"x", NULL});
    rt_gb_attr_type(gb, sh, "out_type", RT_DT_INT32);
    ut_gb_consti(gb, "d_b", 1, (int64_t[]){1}, (int32_t[]){0});
    ut_gb_consti(gb, "d_e", 1, (int64_t[]){1}, (int32_t[]){1});
    ut_gb_consti(gb, "d_s", 1, (int64_t[]){1}, (int32_t[]){1});
    Tensorflow__NodeDef *d0 =
        nodev(gb, "StridedSlice", "dim0", RT_DT_INT32, (const char *[]){"sh", "d_b", "d_e", "d_s", NULL});
    rt_gb_attr_type(gb, d0, "Index", RT_DT_INT32);
    rt_gb_attr_i(gb, d0, "shrink_axis_mask", 1);
    ut_gb_consti(gb, "gi2", 1, (int64_t[]){2}, (int32_t[]){3, 1});
    ut_gb_consti(gb, "gax0", 0, NULL, (int32_t[]){0});
    Tensorflow__NodeDef *g2 = nodev(gb, "GatherV2", "g2", RT_DT_INVALID, (const char *[]){"sh", "gi2", "gax0", NULL});
    rt_gb_attr_type(gb, g2, "Tparams", RT_DT_INT32);
    rt_gb_attr_type(gb, g2, "Tindices", RT_DT_INT32);
    rt_gb_attr_type(gb, g2, "Taxis", RT_DT_INT32);
}

rt_tensor *ut_movenet_input(unsigned seed) {
    rt_shape xs = {.rank = 4, .dim = {2, 6, 5, 4}};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &xs, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) ((float *)t->data)[i] = 2.0f * lcg(&seed);
    return t;
}
