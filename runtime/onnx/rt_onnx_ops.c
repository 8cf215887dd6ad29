/* rt_onnx_ops.c - ONNX op handlers for the ONNX -> TF converter: the compute ops (convolution, normalisation, pools, reductions,
 * elementwise, dense, softmax) and the op table. Shape, data-movement and
 * constant ops are in rt_onnx_shape.c.
 *
 * Each handler reads its inputs from the value table, emits TF nodes and
 * defines its outputs (dtype, static shape as far as known, TF tensor name,
 * layout). Values known at conversion time (initializers, Constant, shape
 * arithmetic) are folded and only become Const nodes when a real op consumes
 * them. Layout-aware handlers keep 4-D activations in the graph layout
 * (cv->nhwc); the others see ONNX order through rt__ox_tf. A handler fails
 * with MS_ENOTSUP for attribute values it does not translate; the message
 * names the node.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "rt_onnx_ext.h"
#include "rt_onnx_int.h"

typedef struct win2d {
    int64_t k[2], s[2], d[2];
    int64_t pads[4];     /* ONNX order: top, left, bottom, right */
    const char *padding; /* "VALID", "SAME" or NULL = needs an explicit Pad */
    int64_t out[2];      /* output H, W (-1 unknown) */
} win2d;

/* Reads kernel/strides/dilations/pads/auto_pad for input spatial dims in_hw
 * and decides how TF expresses the padding. */
static ms_status window(rt__ox_conv *cv, const Onnx__NodeProto *n, const int64_t *in_hw,
                        const int64_t *kernel, int ceil_mode, win2d *w) {
    int64_t tmp[8];
    w->k[0] = kernel[0];
    w->k[1] = kernel[1];
    w->s[0] = w->s[1] = w->d[0] = w->d[1] = 1;
    int c = rt__ox_attr_ints(n, "strides", tmp, 8);
    if (c == 2)
        w->s[0] = tmp[0], w->s[1] = tmp[1];
    else if (c >= 0)
        return rt__ox_err(cv, MS_ENOTSUP, "only 2-D windows are supported");
    c = rt__ox_attr_ints(n, "dilations", tmp, 8);
    if (c == 2)
        w->d[0] = tmp[0], w->d[1] = tmp[1];
    else if (c >= 0)
        return rt__ox_err(cv, MS_ENOTSUP, "only 2-D windows are supported");
    memset(w->pads, 0, sizeof(w->pads));
    c = rt__ox_attr_ints(n, "pads", tmp, 8);
    if (c == 4)
        memcpy(w->pads, tmp, sizeof(w->pads));
    else if (c >= 0)
        return rt__ox_err(cv, MS_ENOTSUP, "pads must have 4 values for 2-D");
    int same_upper = rt__ox_attr_is(n, "auto_pad", "SAME_UPPER", "NOTSET");
    int same_lower = rt__ox_attr_is(n, "auto_pad", "SAME_LOWER", "NOTSET");
    int valid = rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET");
    if (!rt__ox_attr_is(n, "auto_pad", "NOTSET", "NOTSET") && !same_upper && !same_lower && !valid)
        return rt__ox_err(cv, MS_EINVAL, "unknown auto_pad value");
    if (valid) memset(w->pads, 0, sizeof(w->pads));
    for (int a = 0; a < 2; a++)
        if (rt__ox_out_of(w->k[a], 1, OX_WIN_MAX) || rt__ox_out_of(w->s[a], 1, OX_WIN_MAX) ||
            rt__ox_out_of(w->d[a], 1, OX_WIN_MAX) || rt__ox_out_of(w->pads[a], 0, OX_WIN_MAX) ||
            rt__ox_out_of(w->pads[a + 2], 0, OX_WIN_MAX))
            return rt__ox_err(cv, MS_EINVAL,
                              "kernel, strides, dilations and pads must be in "
                              "1..2^20 (pads 0..2^20)");
    int64_t same[4];
    int known = in_hw[0] >= 0 && in_hw[1] >= 0;
    for (int a = 0; a < 2; a++) {
        int64_t keff = (w->k[a] - 1) * w->d[a] + 1;
        if (known) {
            int64_t o = (in_hw[a] + w->s[a] - 1) / w->s[a];
            int64_t tot = (o - 1) * w->s[a] + keff - in_hw[a];
            if (tot < 0) tot = 0;
            same[a] = tot / 2;
            same[a + 2] = tot - tot / 2;
        } else {
            same[a] = same[a + 2] = -1;
        }
    }
    if (same_upper || same_lower) {
        if (!known) return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME needs static spatial dims");
        memcpy(w->pads, same, sizeof(same));
        if (same_lower)
            for (int a = 0; a < 2; a++) {
                int64_t t = w->pads[a];
                w->pads[a] = w->pads[a + 2];
                w->pads[a + 2] = t;
            }
    }
    if (ceil_mode && known) {
        /* Extra end padding so that floor division gives the ceil result. */
        for (int a = 0; a < 2; a++) {
            int64_t keff = (w->k[a] - 1) * w->d[a] + 1;
            int64_t span = in_hw[a] + w->pads[a] + w->pads[a + 2] - keff;
            int64_t oc = (span + w->s[a] - 1) / w->s[a] + 1;
            /* The last window must start inside the input or the begin pad. */
            if ((oc - 1) * w->s[a] >= in_hw[a] + w->pads[a]) oc--;
            int64_t extra = (oc - 1) * w->s[a] + keff - (in_hw[a] + w->pads[a] + w->pads[a + 2]);
            if (extra > 0) w->pads[a + 2] += extra;
        }
    } else if (ceil_mode) {
        return rt__ox_err(cv, MS_ENOTSUP, "ceil_mode needs static spatial dims");
    }
    int zero = 1, is_same = known;
    for (int i = 0; i < 4; i++) {
        if (w->pads[i] != 0) zero = 0;
        if (w->pads[i] != same[i]) is_same = 0;
    }
    w->padding = zero ? "VALID" : is_same ? "SAME" : NULL;
    for (int a = 0; a < 2; a++) {
        int64_t keff = (w->k[a] - 1) * w->d[a] + 1;
        w->out[a] =
            in_hw[a] < 0 ? -1 : (in_hw[a] + w->pads[a] + w->pads[a + 2] - keff) / w->s[a] + 1;
    }
    return MS_OK;
}

/* Applies an explicit Pad when the window's padding is not SAME/VALID. */
static const char *pad_for_window(rt__ox_conv *cv, const char *hint, const char *x, win2d *w,
                                  float value) {
    if (w->padding != NULL) return x;
    int64_t p[8];
    rt__ox_lay4(cv, p, 0, 0, w->pads[0], w->pads[1]);
    rt__ox_lay4(cv, p + 4, 0, 0, w->pads[2], w->pads[3]);
    w->padding = "VALID";
    return rt__ox_emit_pad(cv, rt__ox_printf(cv, "%s/pad", hint), x, RT_DT_FLOAT, 4, p, "constant",
                           value);
}

/* ======================================================================
 * Convolution
 * ====================================================================== */

static const char *conv2d_node(rt__ox_conv *cv, const char *op, const char *hint, const char *x,
                               const char *filter, const win2d *w) {
    int64_t l[4];
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, hint);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, filter);
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__ox_lay4(cv, l, 1, 1, w->s[0], w->s[1]);
    rt__tf_attr_ilist(cv, nd, "strides", l, 4);
    rt__ox_lay4(cv, l, 1, 1, w->d[0], w->d[1]);
    rt__tf_attr_ilist(cv, nd, "dilations", l, 4);
    rt__tf_attr_s(cv, nd, "padding", w->padding);
    if (strcmp(w->padding, "EXPLICIT") == 0) {
        /* TF's explicit_paddings: (before, after) per dimension, in the
         * data_format's order. */
        int64_t b[4], e[4], p[8];
        rt__ox_lay4(cv, b, 0, 0, w->pads[0], w->pads[1]);
        rt__ox_lay4(cv, e, 0, 0, w->pads[2], w->pads[3]);
        for (int i = 0; i < 4; i++)
            p[2 * i] = b[i], p[2 * i + 1] = e[i];
        rt__tf_attr_ilist(cv, nd, "explicit_paddings", p, 8);
    }
    rt__tf_attr_s(cv, nd, "data_format", rt__ox_data_format(cv));
    return nd->name;
}

/* TF filter [kh, kw, cin, cout] from ONNX weights [M, C/g, kh, kw] restricted
 * to output channels [m0, m0 + mc). */
static float *hwio(rt__ox_conv *cv, const rt__ox_value *W, int64_t m0, int64_t mc) {
    int64_t ci = W->dim[1], kh = W->dim[2], kw = W->dim[3];
    float *f = rt__ox_alloc(cv, (size_t)(kh * kw * ci * mc) * sizeof(float));
    for (int64_t m = 0; m < mc; m++)
        for (int64_t c = 0; c < ci; c++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++)
                    f[((y * kw + x) * ci + c) * mc + m] =
                        W->f[(((m0 + m) * ci + c) * kh + y) * kw + x];
    return f;
}

static ms_status op_conv(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    {
        rt__ox_value *X5 = rt__ox_in(cv, n, 0);
        if (X5 != NULL && X5->rank == 5) return rt__ox_op3_conv(cv, n);
        if (X5 != NULL && X5->rank == 3) return rt__ox_op1d(cv, n, op_conv);
    }
    rt__ox_value *X = NULL, *W = NULL, *B = rt__ox_in(cv, n, 2);
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need4(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &W, NULL)) != MS_OK)
        return st;
    /* Weights computed at run time (static shape): TF's filter is their HWIO
     * transpose (group 1), or for depthwise (group = C, one input channel
     * per group) [C, mult, kh, kw] transposed to [kh, kw, C, mult]. */
    const char *wrt = NULL;
    int64_t grp = rt__ox_attr_i(n, "group", 1);
    int rt_w = !W->f && W->rank == 4 && W->dt == RT_DT_FLOAT &&
               rt__ox_count_unknown(4, W->dim) == 0;
    int rt_dw = rt_w && grp > 1 && W->dim[1] == 1 && X->dim[1] == grp && W->dim[0] % grp == 0;
    if (rt_w && (grp == 1 || rt_dw)) {
        static const int64_t to_hwio[4] = {2, 3, 1, 0}, dw[4] = {2, 3, 0, 1};
        const char *wt;
        if ((st = rt__ox_tf(cv, W, &wt)) != MS_OK) return st;
        if (rt_dw) {
            int64_t cm[4] = {grp, W->dim[0] / grp, W->dim[2], W->dim[3]};
            wt = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/w_cm", h), wt, RT_DT_FLOAT, 4, cm);
        }
        wrt = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/filter", h), wt, RT_DT_FLOAT, 4,
                               rt_dw ? dw : to_hwio);
    } else if (!W->f || W->rank != 4) {
        return rt__ox_err(cv, MS_ENOTSUP,
                          "weights must be a 4-D float tensor, constant unless group is 1 or "
                          "depthwise");
    }
    int64_t M = W->dim[0], Cg = W->dim[1], g = rt__ox_attr_i(n, "group", 1);
    int64_t C = X->dim[1] >= 0 ? X->dim[1] : Cg * g;
    if (g < 1 || Cg * g != C || M % g != 0)
        return rt__ox_err(cv, MS_EINVAL,
                          "group %lld does not fit weights [%lld, %lld, ...] and %lld "
                          "input channels",
                          (long long)g, (long long)M, (long long)Cg, (long long)C);
    int64_t ks[2] = {W->dim[2], W->dim[3]};
    win2d w;
    if ((st = window(cv, n, X->dim + 2, ks, 0, &w)) != MS_OK) return st;
    /* Pads that are neither SAME nor VALID go into the convolution itself
     * (padding EXPLICIT) instead of a separate Pad copy. */
    if (w.padding == NULL) w.padding = "EXPLICIT";
    int64_t fd[4] = {ks[0], ks[1], Cg, M};
    const char *y;
    if (wrt != NULL) {
        y = conv2d_node(cv, g == 1 ? "Conv2D" : "DepthwiseConv2dNative", h, x, wrt, &w);
    } else if (g == 1) {
        y = conv2d_node(
            cv, "Conv2D", h, x,
            rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/filter", h), 4, fd, hwio(cv, W, 0, M)), &w);
    } else if (Cg == 1) {
        /* Depthwise: output channel c*mult + k reads input channel c, which is
         * TF's DepthwiseConv2dNative order; filter [kh, kw, C, mult]. */
        int64_t mult = M / C, dd[4] = {ks[0], ks[1], C, mult};
        float *f = rt__ox_alloc(cv, (size_t)(ks[0] * ks[1] * M) * sizeof(float));
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < mult; k++)
                for (int64_t yy = 0; yy < ks[0] * ks[1]; yy++)
                    f[(yy * C + c) * mult + k] = W->f[(c * mult + k) * ks[0] * ks[1] + yy];
        y = conv2d_node(cv, "DepthwiseConv2dNative", h, x,
                        rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/filter", h), 4, dd, f), &w);
    } else {
        /* Grouped: split channels, one Conv2D per group, concatenate. */
        Tensorflow__NodeDef *sp = rt__tf_node(cv, "Split", rt__ox_printf(cv, "%s/split", h));
        rt__tf_input(cv, sp,
                     rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", sp->name), rt__ox_chan_axis(cv)));
        rt__tf_input(cv, sp, x);
        rt__tf_attr_i(cv, sp, "num_split", g);
        rt__tf_attr_type(cv, sp, "T", RT_DT_FLOAT);
        Tensorflow__NodeDef *cat = NULL;
        const char **parts = rt__ox_alloc(cv, (size_t)g * sizeof(char *));
        int64_t mg = M / g, gd[4] = {ks[0], ks[1], Cg, mg};
        for (int64_t k = 0; k < g; k++) {
            const char *hk = rt__ox_printf(cv, "%s/g%lld", h, (long long)k);
            parts[k] = conv2d_node(cv, "Conv2D", hk, rt__tf_out(cv, sp, (int)k),
                                   rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/filter", hk), 4, gd,
                                                    hwio(cv, W, k * mg, mg)),
                                   &w);
        }
        cat = rt__tf_node(cv, "ConcatV2", rt__ox_printf(cv, "%s/concat", h));
        for (int64_t k = 0; k < g; k++)
            rt__tf_input(cv, cat, parts[k]);
        rt__tf_input(cv, cat,
                     rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", cat->name), rt__ox_chan_axis(cv)));
        rt__tf_attr_i(cv, cat, "N", g);
        rt__tf_attr_type(cv, cat, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, cat, "Tidx", RT_DT_INT32);
        y = cat->name;
    }
    if (B != NULL) {
        const char *bt = NULL;
        if (!B->f && B->dt == RT_DT_FLOAT && B->rank == 1 && B->dim[0] == M &&
            (st = rt__ox_tf(cv, B, &bt)) != MS_OK)
            return st;
        if ((!B->f && bt == NULL) || rt__ox_nelem(B) != M)
            return rt__ox_err(cv, MS_ENOTSUP, "bias must be %lld floats", (long long)M);
        Tensorflow__NodeDef *ba = rt__tf_node(cv, "BiasAdd", rt__ox_printf(cv, "%s/bias_add", h));
        rt__tf_input(cv, ba, y);
        rt__tf_input(cv, ba, bt ? bt
                                : rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/bias", h), 1, &M,
                                                   B->f));
        rt__tf_attr_type(cv, ba, "T", RT_DT_FLOAT);
        rt__tf_attr_s(cv, ba, "data_format", rt__ox_data_format(cv));
        y = ba->name;
    }
    int64_t od[4] = {X->dim[0], M, w.out[0], w.out[1]};
    rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, od, y);
    return MS_OK;
}

/* One group of a 2-D ConvTranspose: y = the transposed convolution of x
 * (graph layout) with filter [kh, kw, Co, Ci] (TF's form), before its pads
 * are cropped: full[] is its static spatial size (-1: dynamic; the sizes then
 * come from x's shape at run time). */
static const char *deconv_group(rt__ox_conv *cv, const char *h, const char *x,
                                const rt__ox_value *X, const char *filter, int64_t Co,
                                const int64_t *k, const int64_t *s, const int64_t *d,
                                const int64_t *op, const int64_t *pads, const int64_t *full) {
    int64_t ek[2] = {(k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1};
    const char *sizes, *crop_size = NULL;
    if (X->dim[0] >= 0 && full[0] >= 0 && full[1] >= 0) {
        int64_t sz[4];
        rt__ox_lay4(cv, sz, X->dim[0], Co, full[0], full[1]);
        sizes = rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/input_sizes", h), 4, sz);
    } else {
        /* shape * [1, 0, s, s] + [0, Co, ek + op - s, ...]; the crop keeps
         * that minus the pads. */
        int64_t mul[4], add[4], cut[4];
        rt__ox_lay4(cv, mul, 1, 0, s[0], s[1]);
        rt__ox_lay4(cv, add, 0, Co, ek[0] + op[0] - s[0], ek[1] + op[1] - s[1]);
        rt__ox_lay4(cv, cut, 0, 0, pads[0] + pads[2], pads[1] + pads[3]);
        sizes = rt__ox_deconv_sizes(cv, h, x, 4, mul, add, cut, &crop_size);
    }
    int64_t l[4];
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Conv2DBackpropInput", h);
    rt__tf_input(cv, nd, sizes);
    rt__tf_input(cv, nd, filter);
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__ox_lay4(cv, l, 1, 1, s[0], s[1]);
    rt__tf_attr_ilist(cv, nd, "strides", l, 4);
    rt__ox_lay4(cv, l, 1, 1, d[0], d[1]);
    rt__tf_attr_ilist(cv, nd, "dilations", l, 4);
    rt__tf_attr_s(cv, nd, "padding", "VALID");
    rt__tf_attr_s(cv, nd, "data_format", rt__ox_data_format(cv));
    const char *y = nd->name;
    if (pads[0] || pads[1] || pads[2] || pads[3]) {
        int64_t oh = full[0] < 0 ? -1 : full[0] - pads[0] - pads[2];
        int64_t ow = full[1] < 0 ? -1 : full[1] - pads[1] - pads[3];
        Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/crop", h));
        int64_t b[4], z[4];
        rt__ox_lay4(cv, b, 0, 0, pads[0], pads[1]);
        rt__ox_lay4(cv, z, -1, Co, oh, ow);
        rt__tf_input(cv, sl, y);
        rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", sl->name), 4, b));
        rt__tf_input(cv, sl, crop_size ? crop_size
                                       : rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", sl->name),
                                                       4, z));
        rt__tf_attr_type(cv, sl, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
        y = sl->name;
    }
    return y;
}

/* Slice of t (graph layout when lay, else as it is) on axis ax: [b, b + n). */
static const char *slice_axis(rt__ox_conv *cv, const char *h, const char *t, int ax, int64_t b,
                              int64_t n) {
    int64_t bg[4] = {0, 0, 0, 0}, sz[4] = {-1, -1, -1, -1};
    bg[ax] = b;
    sz[ax] = n;
    Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", h);
    rt__tf_input(cv, sl, t);
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", h), 4, bg));
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", h), 4, sz));
    rt__tf_attr_type(cv, sl, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
    return sl->name;
}

/* ConvTranspose on NCHW: Conv2DBackpropInput (dilations as TF's), the pads
 * cropped after it. output_shape and auto_pad SAME give the pads by ONNX's
 * rule (total = s * (in - 1) + output_padding + (k - 1) * d + 1 - out; SAME
 * has out = in * s; SAME_UPPER and an explicit output_shape put the odd one at
 * the end, SAME_LOWER at the start); a negative end pad (an output_shape up to
 * stride - 1 past the full size) grows the output like output_padding.
 * group g runs g transposed convolutions on the channel slices and
 * concatenates them. */
static ms_status op_conv_transpose(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    {
        rt__ox_value *X5 = rt__ox_in(cv, n, 0);
        if (X5 != NULL && X5->rank == 5) return rt__ox_op3_conv_transpose(cv, n);
        if (X5 != NULL && X5->rank == 3) return rt__ox_op1d(cv, n, op_conv_transpose);
    }
    rt__ox_value *X = NULL, *W = NULL, *B = rt__ox_in(cv, n, 2);
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need4(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &W, NULL)) != MS_OK)
        return st;
    if (W->rank != 4 || W->dt != RT_DT_FLOAT || rt__ox_count_unknown(4, W->dim) != 0)
        return rt__ox_err(cv, MS_ENOTSUP, "weights must be a 4-D float tensor of static shape");
    int64_t g = rt__ox_attr_i(n, "group", 1);
    int upper = rt__ox_attr_is(n, "auto_pad", "SAME_UPPER", "NOTSET");
    int lower = rt__ox_attr_is(n, "auto_pad", "SAME_LOWER", "NOTSET");
    if (!upper && !lower && !rt__ox_attr_is(n, "auto_pad", "NOTSET", "NOTSET") &&
        !rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET"))
        return rt__ox_err(cv, MS_EINVAL, "auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    int64_t Ci = W->dim[0], Cog = W->dim[1], kh = W->dim[2], kw = W->dim[3];
    if (rt__ox_out_of(g, 1, OX_WIN_MAX) || Ci % g != 0)
        return rt__ox_err(cv, MS_EINVAL, "group must divide the %lld input channels",
                          (long long)Ci);
    int64_t Co = Cog * g, k[2] = {kh, kw};
    int64_t s[2] = {1, 1}, d[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, op[2] = {0, 0}, tmp[8];
    int64_t osh[2] = {-1, -1};
    if (rt__ox_attr_ints(n, "strides", tmp, 8) == 2) s[0] = tmp[0], s[1] = tmp[1];
    if (rt__ox_attr_ints(n, "dilations", tmp, 8) == 2) d[0] = tmp[0], d[1] = tmp[1];
    if (rt__ox_attr_ints(n, "pads", tmp, 8) == 4) memcpy(pads, tmp, sizeof(pads));
    if (rt__ox_attr_ints(n, "output_padding", tmp, 8) == 2) op[0] = tmp[0], op[1] = tmp[1];
    if (rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET")) memset(pads, 0, sizeof(pads));
    int nos = rt__ox_attr_ints(n, "output_shape", tmp, 8);
    if (nos >= 2) osh[0] = tmp[nos - 2], osh[1] = tmp[nos - 1];
    else if (rt__ox_attr(n, "output_shape"))
        return rt__ox_err(cv, MS_EINVAL, "output_shape must give the output's height and width");
    for (int a = 0; a < 2; a++)
        if (rt__ox_out_of(s[a], 1, OX_WIN_MAX) || rt__ox_out_of(d[a], 1, OX_WIN_MAX) ||
            rt__ox_out_of(op[a], 0, s[a] - 1) || rt__ox_out_of(pads[a], 0, OX_WIN_MAX) ||
            rt__ox_out_of(pads[a + 2], 0, OX_WIN_MAX) ||
            (osh[a] != -1 && rt__ox_out_of(osh[a], 0, OX_DIM_MAX)))
            return rt__ox_err(cv, MS_EINVAL,
                              "strides and dilations must be in 1..2^20, output_padding below "
                              "the stride, pads in 0..2^20");
    if (X->dim[1] >= 0 && X->dim[1] != Ci)
        return rt__ox_err(cv, MS_EINVAL, "weights expect %lld input channels, input has %lld",
                          (long long)Ci, (long long)X->dim[1]);
    int64_t ek[2] = {(kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1};
    if ((upper || lower) && osh[0] < 0)
        for (int a = 0; a < 2; a++)
            osh[a] = X->dim[2 + a] < 0 ? -2 : X->dim[2 + a] * s[a];
    if (osh[0] != -1) {
        /* pads from the wanted output size (ONNX's rule, docstring above) */
        for (int a = 0; a < 2; a++) {
            if (X->dim[2 + a] < 0 || osh[a] < 0)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "output_shape / auto_pad SAME need the input's height and "
                                  "width known at conversion time");
            int64_t tot = s[a] * (X->dim[2 + a] - 1) + op[a] + ek[a] - osh[a];
            int64_t half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2); /* floor */
            int64_t lo = lower ? tot - half : half, hi = tot - lo;
            if (!upper && !lower) lo = tot - half, hi = half;
            if (hi < 0) op[a] -= hi, hi = 0;
            if (lo < 0 || op[a] > s[a] - 1)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "output_shape %lld on axis %d is not reachable (full size "
                                  "%lld; at most stride - 1 more is supported)",
                                  (long long)osh[a], 2 + a, (long long)(tot + osh[a]));
            pads[a] = lo;
            pads[a + 2] = hi;
        }
    }
    int64_t full[2] = {s[0] * (X->dim[2] - 1) + ek[0] + op[0],
                       s[1] * (X->dim[3] - 1) + ek[1] + op[1]};
    for (int a = 0; a < 2; a++)
        if (X->dim[2 + a] < 0) full[a] = -1;
    /* TF filter [kh, kw, out_channels, in_channels]; no spatial flip. */
    int64_t fd[4] = {kh, kw, Cog, Ci};
    const char *filter;
    if (W->f) {
        float *f = rt__ox_alloc(cv, (size_t)(kh * kw * Cog * Ci) * sizeof(float));
        for (int64_t ci = 0; ci < Ci; ci++)
            for (int64_t co = 0; co < Cog; co++)
                for (int64_t y = 0; y < kh * kw; y++)
                    f[(y * Cog + co) * Ci + ci] = W->f[(ci * Cog + co) * kh * kw + y];
        filter = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/filter", h), 4, fd, f);
    } else {
        /* Weights computed at run time: the same transpose as a node. */
        static const int64_t to_hwoi[4] = {2, 3, 1, 0};
        const char *wt;
        if ((st = rt__ox_tf(cv, W, &wt)) != MS_OK) return st;
        filter = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/filter", h), wt, RT_DT_FLOAT, 4,
                                  to_hwoi);
    }
    const char *y;
    if (g == 1) {
        y = deconv_group(cv, h, x, X, filter, Co, k, s, d, op, pads, full);
    } else {
        int64_t lay[4];
        rt__ox_lay4(cv, lay, 0, 1, 2, 3);
        int cax = lay[0] == 1 ? 0 : lay[1] == 1 ? 1 : lay[2] == 1 ? 2 : 3; /* channel axis */
        int64_t Cig = Ci / g;
        Tensorflow__NodeDef *cat = rt__tf_node(cv, "ConcatV2", rt__ox_printf(cv, "%s/groups", h));
        for (int64_t gi = 0; gi < g; gi++) {
            const char *gh = rt__ox_printf(cv, "%s/g%lld", h, (long long)gi);
            const char *xg = slice_axis(cv, rt__ox_printf(cv, "%s/x", gh), x, cax, gi * Cig, Cig);
            const char *fg =
                slice_axis(cv, rt__ox_printf(cv, "%s/filter", gh), filter, 3, gi * Cig, Cig);
            rt__tf_input(cv, cat, deconv_group(cv, gh, xg, X, fg, Cog, k, s, d, op, pads, full));
        }
        rt__tf_input(cv, cat, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", cat->name), cax));
        rt__tf_attr_i(cv, cat, "N", g);
        rt__tf_attr_type(cv, cat, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, cat, "Tidx", RT_DT_INT32);
        y = cat->name;
    }
    int64_t oh = full[0] < 0 ? -1 : full[0] - pads[0] - pads[2];
    int64_t ow = full[1] < 0 ? -1 : full[1] - pads[1] - pads[3];
    if (B != NULL) {
        const char *bt = NULL;
        if (B->dt != RT_DT_FLOAT || B->rank != 1 || B->dim[0] != Co)
            return rt__ox_err(cv, MS_ENOTSUP, "bias must be %lld floats", (long long)Co);
        if (B->f)
            bt = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/bias", h), 1, &Co, B->f);
        else if ((st = rt__ox_tf(cv, B, &bt)) != MS_OK)
            return st;
        Tensorflow__NodeDef *ba = rt__tf_node(cv, "BiasAdd", rt__ox_printf(cv, "%s/bias_add", h));
        rt__tf_input(cv, ba, y);
        rt__tf_input(cv, ba, bt);
        rt__tf_attr_type(cv, ba, "T", RT_DT_FLOAT);
        rt__tf_attr_s(cv, ba, "data_format", rt__ox_data_format(cv));
        y = ba->name;
    }
    int64_t od[4] = {X->dim[0], Co, oh, ow};
    rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, od, y);
    return MS_OK;
}

/* ======================================================================
 * Normalisation
 * ====================================================================== */

/* Per-channel y = x * a + b for rank-r x with channels on axis 1. */
static const char *channel_affine(rt__ox_conv *cv, const char *h, const char *x, int r, int64_t C,
                                  const float *a, const float *b, int last) {
    int64_t d[OX_MAXR];
    d[0] = C;
    for (int i = 1; i < r - 1; i++)
        d[i] = 1;
    int cr = last ? 1 : r - 1; /* channels last: a [C] vector broadcasts */
    const char *y =
        rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/scale", h), x,
                      rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/a", h), cr, d, a), RT_DT_FLOAT);
    return rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/shift", h), y,
                         rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/b", h), cr, d, b), RT_DT_FLOAT);
}

/* BatchNormalization with training_mode = 1 (opset 14+): normalised by the
 * batch's own mean and (population) variance over every axis but 1, and
 * outputs 1 and 2 the running statistics ONNX defines: input_mean * momentum
 * + batch mean * (1 - momentum), the same for the variance. */
static ms_status batchnorm_train(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X) {
    const char *h = rt__ox_hint_of(n), *x, *t[4];
    ms_status st;
    int r = X->rank;
    if (X->dt != RT_DT_FLOAT || r < 2)
        return rt__ox_err(cv, MS_ENOTSUP, "training_mode needs a float input of rank >= 2");
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    for (int i = 0; i < 4; i++) {
        rt__ox_value *P;
        if ((st = rt__ox_need(cv, n, i + 1, &P, &t[i])) != MS_OK) return st;
        if (P->dt != RT_DT_FLOAT || P->rank != 1)
            return rt__ox_err(cv, MS_ENOTSUP, "parameters must be float vectors");
    }
    float eps = rt__ox_attr_f(n, "epsilon", 1e-5f), mom = rt__ox_attr_f(n, "momentum", 0.9f);
    int64_t ax[OX_MAXR], cs[OX_MAXR], flat = -1;
    int na = 0;
    for (int i = 0; i < r; i++) {
        if (i != 1) ax[na++] = i;
        cs[i] = i == 1 ? -1 : 1;
    }
    const char *mean = rt__ox_reduce(cv, "Mean", rt__ox_printf(cv, "%s/mean", h), x,
                                     RT_DT_FLOAT, ax, na, 1);
    const char *d = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/centred", h), x, mean,
                                  RT_DT_FLOAT);
    const char *sq = rt__tf_unary(cv, "Square", rt__ox_printf(cv, "%s/sq", h), d, RT_DT_FLOAT);
    const char *var = rt__ox_reduce(cv, "Mean", rt__ox_printf(cv, "%s/var", h), sq, RT_DT_FLOAT,
                                    ax, na, 1);
    const char *inv = rt__tf_unary(
        cv, "Rsqrt", rt__ox_printf(cv, "%s/inv_std", h),
        rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/var_eps", h), var,
                      rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/eps", h), eps), RT_DT_FLOAT),
        RT_DT_FLOAT);
    const char *sc = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/scale_c", h), t[0], RT_DT_FLOAT, r, cs);
    const char *bi = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/bias_c", h), t[1], RT_DT_FLOAT, r, cs);
    const char *y = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/norm", h), d, inv, RT_DT_FLOAT);
    y = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/scaled", h), y, sc, RT_DT_FLOAT);
    y = rt__tf_binary(cv, "AddV2", h, y, bi, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim, y);
    const char *stat[2] = {mean, var};
    for (int k = 0; k < 2; k++) {
        if (n->n_output <= (size_t)k + 1 || !n->output[k + 1] || !n->output[k + 1][0]) continue;
        const char *kh = rt__ox_printf(cv, "%s/running_%s", h, k ? "var" : "mean");
        const char *b = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/batch", kh), stat[k],
                                       RT_DT_FLOAT, 1, &flat);
        const char *old = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/old", kh), t[2 + k],
                                        rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/m", kh), mom),
                                        RT_DT_FLOAT);
        b = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/new", kh), b,
                          rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/m1", kh), 1.0f - mom),
                          RT_DT_FLOAT);
        int64_t C = X->dim[1];
        rt__ox_def_out(cv, n, k + 1, RT_DT_FLOAT, 1, &C,
                       rt__tf_binary(cv, "AddV2", kh, old, b, RT_DT_FLOAT));
    }
    return MS_OK;
}

static ms_status op_batchnorm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *p[4];
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (rt__ox_attr_i(n, "training_mode", 0) != 0) return batchnorm_train(cv, n, X);
    st = X->rank == 4 ? rt__ox_need4(cv, n, 0, &X, &x) : rt__ox_tf(cv, X, &x);
    if (st != MS_OK) return st;
    for (int i = 0; i < 4; i++) {
        if ((st = rt__ox_need(cv, n, i + 1, &p[i], NULL)) != MS_OK) return st;
        /* Run-time parameters: FusedBatchNormV3 takes them as tensors. */
        if (!p[i]->f && (X->rank != 4 || p[i]->dt != RT_DT_FLOAT || p[i]->rank != 1))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "parameters computed at run time need a 4-D input and float "
                              "vectors");
    }
    if (X->rank < 2) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be >= 2");
    int64_t C = rt__ox_nelem(p[0]);
    float eps = rt__ox_attr_f(n, "epsilon", 1e-5f);
    const char *y;
    if (X->rank == 4) {
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "FusedBatchNormV3", h);
        rt__tf_input(cv, nd, x);
        for (int i = 0; i < 4; i++) {
            const char *t;
            if ((st = rt__ox_tf(cv, p[i], &t)) != MS_OK) return st;
            rt__tf_input(cv, nd, t);
        }
        rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, nd, "U", RT_DT_FLOAT);
        rt__tf_attr_f(cv, nd, "epsilon", eps);
        rt__tf_attr_s(cv, nd, "data_format", rt__ox_data_format(cv));
        rt__tf_attr_b(cv, nd, "is_training", 0);
        rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, X->dim, nd->name);
        return MS_OK;
    } else {
        float *a = rt__ox_alloc(cv, (size_t)C * sizeof(float));
        float *b = rt__ox_alloc(cv, (size_t)C * sizeof(float));
        for (int64_t c = 0; c < C; c++) {
            a[c] = p[0]->f[c] / sqrtf(p[3]->f[c] + eps);
            b[c] = p[1]->f[c] - p[2]->f[c] * a[c];
        }
        y = channel_affine(cv, h, x, X->rank, C, a, b, 0);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim, y);
    return MS_OK;
}

static ms_status op_instancenorm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *S = NULL, *B = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &B, NULL)) != MS_OK)
        return st;
    if ((!S->f || !B->f) && (S->dt != RT_DT_FLOAT || B->dt != RT_DT_FLOAT || S->rank != 1 ||
                             B->rank != 1))
        return rt__ox_err(cv, MS_ENOTSUP, "scale and B must be float vectors");
    if (X->rank < 3) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be >= 3");
    int r = X->rank, last = r == 4 && cv->nhwc;
    /* A 3-D op's NDHWC result (rt_onnx_3d.c) is normalised channels-last. */
    int ndhwc = r == 5 && X->tf_alt != NULL && !X->nhwc && X->dt == RT_DT_FLOAT;
    if (ndhwc) {
        last = 1;
        x = X->tf_alt;
        st = MS_OK;
    } else {
        st = last ? rt__ox_need4(cv, n, 0, &X, &x) : rt__ox_tf(cv, X, &x);
    }
    if (st != MS_OK) return st;
    int64_t axes[OX_MAXR];
    for (int i = 2; i < r; i++)
        axes[i - 2] = last ? i - 1 : i;
    const char *ax = rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/axes", h), r - 2, axes);
    const char *nrm =
        rt__ox_normalize(cv, h, x, ax, rt__ox_attr_f(n, "epsilon", 1e-5f), NULL, NULL);
    const char *y;
    if (S->f && B->f) {
        y = channel_affine(cv, h, nrm, r, rt__ox_nelem(S), S->f, B->f, last);
    } else {
        /* Scale and B computed at run time: [C] (channels last) or [C, 1, ...]. */
        const char *sb[2];
        int64_t d[OX_MAXR];
        d[0] = -1;
        for (int i = 1; i < r - 1; i++)
            d[i] = 1;
        for (int i = 0; i < 2; i++) {
            if ((st = rt__ox_tf(cv, i ? B : S, &sb[i])) != MS_OK) return st;
            if (!last)
                sb[i] = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/%s", h, i ? "b" : "a"), sb[i],
                                       RT_DT_FLOAT, r - 1, d);
        }
        y = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/scale", h), nrm, sb[0], RT_DT_FLOAT);
        y = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/shift", h), y, sb[1], RT_DT_FLOAT);
    }
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim, ndhwc ? NULL : y);
    if (ndhwc)
        o->tf_alt = y; /* ONNX order made by rt__ox_tf when needed */
    else
        o->nhwc = last;
    return MS_OK;
}

/* ======================================================================
 * Pools and reductions
 * ====================================================================== */

static ms_status op_pool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    if (rt__ox_attr(n, "dilations") != NULL) return rt__ox_op_window_pool(cv, n);
    {
        rt__ox_value *X5 = rt__ox_in(cv, n, 0);
        if (X5 != NULL && X5->rank == 5) return rt__ox_op3_pool(cv, n);
        if (X5 != NULL && X5->rank == 3) return rt__ox_op1d(cv, n, op_pool);
    }
    int is_max = strcmp(n->op_type, "MaxPool") == 0;
    rt__ox_value *X = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    /* MaxPool's Indices output: OnnxPool computes it (rt_onnx_scatter.c). */
    if (is_max && n->n_output > 1 && n->output[1] && n->output[1][0])
        return rt__ox_op_window_pool(cv, n);
    if ((st = rt__ox_need4(cv, n, 0, &X, &x)) != MS_OK) return st;
    int64_t ks[8];
    if (rt__ox_attr_ints(n, "kernel_shape", ks, 8) != 2)
        return rt__ox_err(cv, MS_ENOTSUP, "kernel_shape must have 2 values");
    win2d w;
    if ((st = window(cv, n, X->dim + 2, ks, (int)rt__ox_attr_i(n, "ceil_mode", 0), &w)) != MS_OK)
        return st;
    if (w.d[0] != 1 || w.d[1] != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "dilated pooling is not supported");
    int explicit_pads = 0;
    const char *rescale = NULL; /* AveragePool excluding other pads: k / count */
    if (is_max) {
        if (rt__ox_attr_i(n, "storage_order", 0) != 0)
            return rt__ox_err(cv, MS_ENOTSUP, "storage_order 1 is not supported");
        /* Other pads become TF's padding EXPLICIT (the kernel clips its
         * windows, no padded copy) when every window overlaps the input, so
         * that no output depends on the padding value; otherwise a -FLT_MAX
         * Pad (ONNX Runtime's value of an all-padding window) + VALID. */
        explicit_pads = w.padding == NULL;
        for (int a = 0; a < 2 && explicit_pads; a++) {
            int64_t last = (w.out[a] - 1) * w.s[a] - w.pads[a];
            if (w.out[a] < 1 || w.pads[a] >= w.k[a] || last >= X->dim[2 + a] || last + w.k[a] <= 0)
                explicit_pads = 0;
        }
        if (explicit_pads)
            w.padding = "EXPLICIT";
        else
            x = pad_for_window(cv, h, x, &w, -FLT_MAX);
    } else if (w.padding == NULL ||
               (strcmp(w.padding, "SAME") == 0 && rt__ox_attr_i(n, "count_include_pad", 0))) {
        /* Zero padding counted in the average = explicit Pad + VALID; TF's SAME
         * excludes the padding from the count. Excluded from the count with
         * other pads: the same, times k / (input elements in the window), a
         * constant when the spatial dims are static. */
        if (!rt__ox_attr_i(n, "count_include_pad", 0)) {
            if (X->dim[2] < 0 || X->dim[3] < 0 || w.out[0] < 1 || w.out[1] < 1 ||
                w.out[0] * w.out[1] > ((int64_t)1 << 24))
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "pads that are neither SAME nor VALID with "
                                  "count_include_pad=0 need static spatial dims");
            float *f = rt__ox_alloc(cv, (size_t)(w.out[0] * w.out[1]) * sizeof(float));
            for (int64_t i = 0; i < w.out[0]; i++)
                for (int64_t j = 0; j < w.out[1]; j++) {
                    int64_t cnt = 1;
                    for (int a = 0; a < 2; a++) {
                        int64_t b = (a ? j : i) * w.s[a] - w.pads[a], e = b + w.k[a];
                        cnt *= (e < X->dim[2 + a] ? e : X->dim[2 + a]) - (b > 0 ? b : 0);
                    }
                    if (cnt <= 0)
                        return rt__ox_err(cv, MS_ENOTSUP, "a window lies wholly in the padding "
                                                          "(count_include_pad=0)");
                    f[i * w.out[1] + j] = (float)(w.k[0] * w.k[1]) / (float)cnt;
                }
            int64_t fd[4];
            rt__ox_lay4(cv, fd, 1, 1, w.out[0], w.out[1]);
            rescale = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/rescale", h), 4, fd, f);
        }
        w.padding = NULL;
        x = pad_for_window(cv, h, x, &w, 0.0f);
    }
    int64_t l[4];
    Tensorflow__NodeDef *nd = rt__tf_node(cv, is_max ? "MaxPool" : "AvgPool", h);
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__ox_lay4(cv, l, 1, 1, w.k[0], w.k[1]);
    rt__tf_attr_ilist(cv, nd, "ksize", l, 4);
    rt__ox_lay4(cv, l, 1, 1, w.s[0], w.s[1]);
    rt__tf_attr_ilist(cv, nd, "strides", l, 4);
    rt__tf_attr_s(cv, nd, "padding", w.padding);
    if (explicit_pads) {
        /* (before, after) per dimension in the data_format's order. */
        int64_t b[4], e[4], p[8];
        rt__ox_lay4(cv, b, 0, 0, w.pads[0], w.pads[1]);
        rt__ox_lay4(cv, e, 0, 0, w.pads[2], w.pads[3]);
        for (int i = 0; i < 4; i++)
            p[2 * i] = b[i], p[2 * i + 1] = e[i];
        rt__tf_attr_ilist(cv, nd, "explicit_paddings", p, 8);
    }
    rt__tf_attr_s(cv, nd, "data_format", rt__ox_data_format(cv));
    int64_t od[4] = {X->dim[0], X->dim[1], w.out[0], w.out[1]};
    const char *y = nd->name;
    if (rescale != NULL)
        y = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/exclude_pad", h), y, rescale,
                          RT_DT_FLOAT);
    rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, od, y);
    return MS_OK;
}

static const char *reduce_node(rt__ox_conv *cv, const char *op, const char *h, const char *x,
                               rt_dtype dt, const int64_t *axes, int na, int keep) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/axes", nd->name), na, axes));
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, nd, "keep_dims", keep);
    return nd->name;
}

static ms_status op_global_pool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (X->rank < 3) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be >= 3");
    int last = X->rank == 4 && cv->nhwc;
    st = last ? rt__ox_need4(cv, n, 0, &X, &x) : rt__ox_tf(cv, X, &x);
    if (st != MS_OK) return st;
    int64_t axes[OX_MAXR], od[OX_MAXR];
    for (int i = 2; i < X->rank; i++)
        axes[i - 2] = last ? i - 1 : i;
    memcpy(od, X->dim, sizeof(od));
    for (int i = 2; i < X->rank; i++)
        od[i] = 1;
    const char *op = strcmp(n->op_type, "GlobalMaxPool") == 0 ? "Max" : "Mean";
    const char *y = reduce_node(cv, op, rt__ox_hint_of(n), x, RT_DT_FLOAT, axes, X->rank - 2, 1);
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, od, y);
    o->nhwc = last;
    return MS_OK;
}

/* The reductions: TF op, elementwise op before it and after it (NULL: none).
 * ReduceLogSumExp is log(sum(exp(x))) as ONNX defines it. */
static const char *const reduce_map[][4] = {
    {"ReduceSum", "Sum", NULL, NULL},       {"ReduceMean", "Mean", NULL, NULL},
    {"ReduceMax", "Max", NULL, NULL},       {"ReduceMin", "Min", NULL, NULL},
    {"ReduceProd", "Prod", NULL, NULL},     {"ReduceSumSquare", "Sum", "Square", NULL},
    {"ReduceL1", "Sum", "Abs", NULL},       {"ReduceL2", "Sum", "Square", "Sqrt"},
    {"ReduceLogSum", "Sum", NULL, "Log"},   {"ReduceLogSumExp", "Sum", "Exp", "Log"},
};

static ms_status op_reduce(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *A = NULL;
    const char *x, *h = rt__ox_hint_of(n), *axes_tf = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (X->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    if (X->dt != RT_DT_FLOAT && X->dt != RT_DT_DOUBLE)
        return rt__ox_err(cv, MS_ENOTSUP, "element type %s is not supported (float, double)",
                          rt_dtype_name(X->dt));
    size_t k = 0;
    while (strcmp(reduce_map[k][0], n->op_type) != 0)
        k++;
    int64_t axes[OX_MAXR];
    int na = rt__ox_attr_ints(n, "axes", axes, OX_MAXR);
    if (na > OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "too many axes");
    int noop = (int)rt__ox_attr_i(n, "noop_with_empty_axes", 0);
    int keep = (int)rt__ox_attr_i(n, "keepdims", 1);
    if (na < 0 && (A = rt__ox_in(cv, n, 1)) != NULL && A->rank == 1 && A->dim[0] == 0) {
        na = 0; /* an empty run-time list is known empty here */
    } else if (na < 0 && (A = rt__ox_in(cv, n, 1)) != NULL && !rt__ox_is_const(A)) {
        /* Axes computed at run time: TF's reductions take them as a tensor.
         * An empty run-time list would mean "all axes" in ONNX and "none"
         * in TF, so the list length must be known and non-zero. */
        if (A->rank != 1 || A->dim[0] < 1 || A->dim[0] > X->rank ||
            (A->dt != RT_DT_INT64 && A->dt != RT_DT_INT32))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "run-time axes must be an integer vector of static, non-zero "
                              "length");
        if ((st = rt__ox_tf(cv, A, &axes_tf)) != MS_OK) return st;
    } else if (na < 0 && (st = rt__ox_const_ints(cv, n, 1, axes, OX_MAXR, &na)) != MS_OK) {
        return st;
    }
    int64_t od[OX_MAXR];
    int r = 0;
    if (axes_tf != NULL) {
        r = keep ? X->rank : X->rank - (int)A->dim[0];
        for (int i = 0; i < r; i++)
            od[i] = -1;
    } else {
        if (na < 0 || (na == 0 && noop == 0)) {
            na = X->rank;
            for (int i = 0; i < na; i++)
                axes[i] = i;
        }
        uint8_t red[OX_MAXR] = {0};
        for (int i = 0; i < na; i++) {
            axes[i] = rt__ox_norm_axis(axes[i], X->rank);
            if (axes[i] < 0 || axes[i] >= X->rank)
                return rt__ox_err(cv, MS_EINVAL, "axis out of range");
            red[axes[i]] = 1;
        }
        for (int i = 0; i < X->rank; i++) {
            if (!red[i])
                od[r++] = X->dim[i];
            else if (keep)
                od[r++] = 1;
        }
    }
    if (reduce_map[k][2])
        x = rt__tf_unary(cv, reduce_map[k][2], rt__ox_printf(cv, "%s/pre", h), x, X->dt);
    const char *y;
    if (axes_tf != NULL) {
        Tensorflow__NodeDef *nd = rt__tf_node(cv, reduce_map[k][1], h);
        rt__tf_input(cv, nd, x);
        rt__tf_input(cv, nd, axes_tf);
        rt__tf_attr_type(cv, nd, "T", X->dt);
        rt__tf_attr_type(cv, nd, "Tidx", A->dt);
        rt__tf_attr_b(cv, nd, "keep_dims", keep);
        y = nd->name;
    } else {
        y = reduce_node(cv, reduce_map[k][1], h, x, X->dt, axes, na, keep);
    }
    if (reduce_map[k][3])
        y = rt__tf_unary(cv, reduce_map[k][3], rt__ox_printf(cv, "%s/post", h), y, X->dt);
    rt__ox_def_out(cv, n, 0, X->dt, r, od, y);
    return MS_OK;
}

/* ======================================================================
 * Elementwise
 * ====================================================================== */

static ms_status op_unary(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    static const char *const map[][2] = {
        {"Relu", "Relu"}, {"Sigmoid", "Sigmoid"}, {"Tanh", "Tanh"}, {"Sqrt", "Sqrt"},
        {"Exp", "Exp"},   {"Abs", "Abs"},         {"Neg", "Neg"},   {"Floor", "Floor"},
    };
    rt__ox_value *X = NULL;
    const char *x;
    int last;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    const char *op = NULL;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i][0], n->op_type) == 0) op = map[i][1];
    int64_t ne = rt__ox_nelem(X);
    if (X->iv && ne >= 0 && ne <= OX_MAXR && (strcmp(op, "Neg") == 0 || strcmp(op, "Abs") == 0)) {
        /* Shape arithmetic (-axis, |d|) folds, keeping unknown entries unknown. */
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, NULL);
        o->iv = rt__ox_alloc(cv, (size_t)ne * 8 + 8);
        o->ik = rt__ox_alloc(cv, (size_t)ne + 1);
        for (int64_t i = 0; i < ne; i++) {
            int64_t v = X->iv[i] == INT64_MIN ? INT64_MAX : X->iv[i];
            o->iv[i] = op[0] == 'N' ? -v : v < 0 ? -v : v;
            o->ik[i] = X->ik[i];
        }
        return MS_OK;
    }
    if ((st = rt__ox_in_any(cv, X, &x, &last)) != MS_OK) return st;
    if (strcmp(op, "Relu") == 0 && rt__ox_op3_unary(cv, n, op)) return MS_OK;
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, nd->name)->nhwc = last;
    return MS_OK;
}

static ms_status op_leaky_relu(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x;
    ms_status st;
    int last;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_in_any(cv, X, &x, &last)) != MS_OK)
        return st;
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "LeakyRelu", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__tf_attr_f(cv, nd, "alpha", rt__ox_attr_f(n, "alpha", 0.01f));
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, nd->name)->nhwc = last;
    return MS_OK;
}

/* clamp(x, lo, hi) with either bound optional (NAN = absent). */
static const char *clamp(rt__ox_conv *cv, const char *h, const char *x, float lo, float hi) {
    if (lo == 0.0f && hi == 6.0f) return rt__tf_unary(cv, "Relu6", h, x, RT_DT_FLOAT);
    if (lo == 0.0f && isnan(hi)) return rt__tf_unary(cv, "Relu", h, x, RT_DT_FLOAT);
    if (!isnan(lo))
        x = rt__tf_binary(cv, "Maximum", isnan(hi) ? h : rt__ox_printf(cv, "%s/lo", h), x,
                          rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/min", h), lo), RT_DT_FLOAT);
    if (!isnan(hi))
        x = rt__tf_binary(cv, "Minimum", h, x,
                          rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/max", h), hi), RT_DT_FLOAT);
    return x;
}

static ms_status op_clip(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *v = NULL;
    const char *x;
    ms_status st;
    int last;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_in_any(cv, X, &x, &last)) != MS_OK)
        return st;
    float lo = NAN, hi = NAN;
    if (X->dt != RT_DT_FLOAT && rt__ox_dtype_num(X->dt) && cv->opset >= 11) {
        /* The other types (Clip-12 takes every integer type): max(x, min)
         * then min(., max) in x's type; an absent bound is no bound. */
        const char *h = rt__ox_hint_of(n), *b, *y = x;
        for (int k = 1; k < 3; k++) {
            rt__ox_value *B = rt__ox_in(cv, n, k);
            if (B == NULL) continue;
            if (B->dt != X->dt || rt__ox_nelem(B) != 1 || B->rank > 1)
                return rt__ox_err(cv, MS_ENOTSUP, "min and max must be scalars of the input's type");
            if ((st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
            y = rt__tf_binary(cv, k == 2 ? "Minimum" : "Maximum",
                              rt__ox_printf(cv, "%s/%s", h, k == 2 ? "max" : "min"), y, b, X->dt);
        }
        rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, y)->nhwc = last;
        return MS_OK;
    }
    if (X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "element type %s is not supported (float only)",
                          rt_dtype_name(X->dt));
    rt__ox_value *L = cv->opset >= 11 ? rt__ox_in(cv, n, 1) : NULL;
    rt__ox_value *H = cv->opset >= 11 ? rt__ox_in(cv, n, 2) : NULL;
    if ((L && !rt__ox_is_const(L)) || (H && !rt__ox_is_const(H))) {
        /* Bounds computed at run time: max(x, min) then min(., max). */
        const char *h = rt__ox_hint_of(n), *b, *y = x;
        for (int k = 0; k < 2; k++) {
            rt__ox_value *B = k ? H : L;
            if (B == NULL) continue;
            if (B->dt != RT_DT_FLOAT || rt__ox_nelem(B) > 1 || B->rank > 1)
                return rt__ox_err(cv, MS_ENOTSUP, "min and max must be float scalars");
            if ((st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
            y = rt__tf_binary(cv, k ? "Minimum" : "Maximum",
                              rt__ox_printf(cv, "%s/%s", h, k ? "max" : "min"), y, b, RT_DT_FLOAT);
        }
        rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, y)->nhwc = last;
        return MS_OK;
    }
    if (cv->opset < 11) {
        if (rt__ox_attr(n, "min")) lo = rt__ox_attr_f(n, "min", 0);
        if (rt__ox_attr(n, "max")) hi = rt__ox_attr_f(n, "max", 0);
    } else {
        if ((v = rt__ox_in(cv, n, 1)) && (st = rt__ox_const_float_scalar(cv, v, &lo)) != MS_OK)
            return st;
        if ((v = rt__ox_in(cv, n, 2)) && (st = rt__ox_const_float_scalar(cv, v, &hi)) != MS_OK)
            return st;
    }
    if (isnan(lo) && isnan(hi)) {
        rt__ox_alias(cv, n, X);
        return MS_OK;
    }
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, clamp(cv, rt__ox_hint_of(n), x, lo, hi))
        ->nhwc = last;
    return MS_OK;
}

/* y = clamp(alpha * x + beta, 0, 1) */
static const char *hard_sigmoid(rt__ox_conv *cv, const char *h, const char *x, float alpha,
                                float beta) {
    const char *t =
        rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/alpha_x", h), x,
                      rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/alpha", h), alpha), RT_DT_FLOAT);
    t = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/plus_beta", h), t,
                      rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/beta", h), beta), RT_DT_FLOAT);
    return clamp(cv, h, t, 0.0f, 1.0f);
}

static ms_status op_hard_sigmoid(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    int last;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_in_any(cv, X, &x, &last)) != MS_OK)
        return st;
    const char *y;
    if (strcmp(n->op_type, "HardSwish") == 0) {
        const char *hs =
            hard_sigmoid(cv, rt__ox_printf(cv, "%s/hard_sigmoid", h), x, 1.0f / 6.0f, 0.5f);
        y = rt__tf_binary(cv, "Mul", h, x, hs, RT_DT_FLOAT);
    } else {
        y = hard_sigmoid(cv, h, x, rt__ox_attr_f(n, "alpha", 0.2f), rt__ox_attr_f(n, "beta", 0.5f));
    }
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, y)->nhwc = last;
    return MS_OK;
}


/* Folds an integer binary op on known (possibly partially known) vectors:
 * same element count or one side a single element. */
static int fold_int_binary(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *a,
                           const rt__ox_value *b, int rank, const int64_t *od) {
    if (!a->iv || !b->iv) return 0;
    /* int64 arithmetic is int64's and int32's (shape values); narrower types
     * would need wrapping: their kernels compute them at run time. */
    if ((a->dt != RT_DT_INT64 && a->dt != RT_DT_INT32) || b->dt != a->dt) return 0;
    int64_t na = rt__ox_nelem(a), nb = rt__ox_nelem(b), no = na > nb ? na : nb;
    if (na < 0 || nb < 0 || (na != nb && na != 1 && nb != 1)) return 0;
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, a->dt, rank, od, NULL);
    if (rt__ox_nelem(o) != no) return 0;
    o->iv = rt__ox_alloc(cv, (size_t)no * 8 + 8);
    o->ik = rt__ox_alloc(cv, (size_t)no + 1);
    const char *op = n->op_type;
    for (int64_t i = 0; i < no; i++) {
        int64_t ia = na == 1 ? 0 : i, ib = nb == 1 ? 0 : i, x = a->iv[ia], y = b->iv[ib];
        o->ik[i] = a->ik[ia] && b->ik[ib];
        if (!o->ik[i]) continue;
        if (strcmp(op, "Add") == 0)
            o->iv[i] = x + y;
        else if (strcmp(op, "Sub") == 0)
            o->iv[i] = x - y;
        else if (strcmp(op, "Mul") == 0)
            o->iv[i] = x * y;
        else if (strcmp(op, "Div") == 0)
            o->iv[i] = y ? x / y : 0;
        else
            o->ik[i] = 0;
    }
    /* Partially known (a dynamic dim in shape arithmetic): also the TF op,
     * so that the value can feed a run-time Reshape, Fill, ... */
    const char *tfop = strcmp(op, "Add") == 0   ? "AddV2"
                       : strcmp(op, "Sub") == 0 ? "Sub"
                       : strcmp(op, "Mul") == 0 ? "Mul"
                       : strcmp(op, "Div") == 0 ? "TruncateDiv"
                                                : NULL;
    rt__ox_value *va = (rt__ox_value *)a, *vb = (rt__ox_value *)b;
    const char *ta, *tb;
    if (!rt__ox_is_const(o) && tfop && a->dt == b->dt && (a->tf || rt__ox_is_const(a)) &&
        (b->tf || rt__ox_is_const(b)) && rt__ox_tf(cv, va, &ta) == MS_OK &&
        rt__ox_tf(cv, vb, &tb) == MS_OK)
        o->tf = rt__tf_binary(cv, tfop, rt__ox_hint_of(n), ta, tb, a->dt);
    return 1;
}

static int fold_float_binary(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *a,
                             const rt__ox_value *b, int rank, const int64_t *od) {
    if (!a->f || !b->f) return 0;
    int64_t na = rt__ox_nelem(a), nb = rt__ox_nelem(b), no = na > nb ? na : nb;
    if (na != nb && na != 1 && nb != 1) return 0;
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, rank, od, NULL);
    if (rt__ox_nelem(o) != no) return 0;
    o->f = rt__ox_alloc(cv, (size_t)no * 4 + 4);
    for (int64_t i = 0; i < no; i++) {
        float x = a->f[na == 1 ? 0 : i], y = b->f[nb == 1 ? 0 : i];
        const char *op = n->op_type;
        o->f[i] = strcmp(op, "Add") == 0   ? x + y
                  : strcmp(op, "Sub") == 0 ? x - y
                  : strcmp(op, "Mul") == 0 ? x * y
                  : strcmp(op, "Div") == 0 ? x / y
                  : strcmp(op, "Pow") == 0 ? powf(x, y)
                  : strcmp(op, "Max") == 0 ? fmaxf(x, y)
                                           : fminf(x, y);
    }
    return 1;
}

/* Pow of a base that is not float: computed in the base's type when the
 * exponent has it too (double, float16, bfloat16), else in double, the
 * result cast back to the base's type (ONNX's output type); an integer
 * result is the double truncated toward zero, exact while it is below 2^53. */
static ms_status pow_typed(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *A,
                           rt__ox_value *B, int r, const int64_t *od) {
    const char *h = rt__ox_hint_of(n), *a, *b;
    ms_status st;
    if ((st = rt__ox_tf(cv, A, &a)) != MS_OK || (st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
    rt_dtype c = A->dt == B->dt && !rt__ox_dtype_int(A->dt) ? A->dt : RT_DT_DOUBLE;
    if (A->dt != c) a = rt__tf_cast(cv, rt__ox_printf(cv, "%s/base", h), a, A->dt, c);
    if (B->dt != c) b = rt__tf_cast(cv, rt__ox_printf(cv, "%s/exponent", h), b, B->dt, c);
    const char *y = rt__tf_binary(cv, "Pow", c == A->dt ? h : rt__ox_printf(cv, "%s/pow", h), a,
                                  b, c);
    if (c != A->dt) y = rt__tf_cast(cv, h, y, c, A->dt);
    rt__ox_def_out(cv, n, 0, A->dt, r, od, y);
    return MS_OK;
}

static ms_status op_binary(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    static const char *const map[][2] = {
        {"Add", "AddV2"}, {"Sub", "Sub"},     {"Mul", "Mul"},     {"Div", "RealDiv"},
        {"Pow", "Pow"},   {"Max", "Maximum"}, {"Min", "Minimum"},
    };
    rt__ox_value *A = NULL, *B = NULL;
    const char *a, *b, *h = rt__ox_hint_of(n);
    ms_status st;
    if (n->n_input != 2) {
        if (strcmp(n->op_type, "Max") == 0 || strcmp(n->op_type, "Min") == 0)
            return rt__ox_op_variadic(cv, n);
        return rt__ox_err(cv, MS_EINVAL, "needs exactly 2 inputs (got %zu)", n->n_input);
    }
    if ((st = rt__ox_need(cv, n, 0, &A, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &B, NULL)) != MS_OK)
        return st;
    int64_t od[OX_MAXR];
    int r = rt__ox_broadcast(A, B, od);
    if (r == -2)
        return rt__ox_err(cv, MS_EINVAL, "shapes of \"%s\" and \"%s\" do not broadcast", A->name,
                          B->name);
    if (r >= 0 && (fold_int_binary(cv, n, A, B, r, od) || fold_float_binary(cv, n, A, B, r, od)))
        return MS_OK;
    if (A->dt != RT_DT_FLOAT) {
        /* The other types (rt__ox_check_dtypes lets integers, double,
         * float16 and bfloat16 through) in their own type. */
        if (strcmp(n->op_type, "Pow") == 0) return pow_typed(cv, n, A, B, r, od);
        if (B->dt != A->dt)
            return rt__ox_err(cv, MS_ENOTSUP, "inputs of types %s and %s are not supported",
                              rt_dtype_name(A->dt), rt_dtype_name(B->dt));
        const char *op = NULL;
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
            if (strcmp(map[i][0], n->op_type) == 0) op = map[i][1];
        /* Integer Div rounds toward zero in ONNX: TF's Div on integers. */
        if (strcmp(op, "RealDiv") == 0 && rt__ox_dtype_int(A->dt)) op = "Div";
        if ((st = rt__ox_tf(cv, A, &a)) != MS_OK || (st = rt__ox_tf(cv, B, &b)) != MS_OK)
            return st;
        rt__ox_def_out(cv, n, 0, A->dt, r, od, rt__tf_binary(cv, op, h, a, b, A->dt));
        return MS_OK;
    }
    if (B->dt != A->dt) {
        /* Pow's exponent may be an integer tensor (opset 12+); every other
         * op here takes one type. float(int) is exact up to 2^24, beyond
         * which powf overflows anyway. */
        if (strcmp(n->op_type, "Pow") != 0 || !rt__ox_dtype_int(B->dt))
            return rt__ox_err(cv, MS_ENOTSUP, "inputs of types %s and %s are not supported",
                              rt_dtype_name(A->dt), rt_dtype_name(B->dt));
        if ((st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
        rt__ox_value *fb = rt__ox_define(cv, rt__ox_printf(cv, "%s/float", B->name), RT_DT_FLOAT,
                                         B->rank, B->dim);
        fb->tf = rt__tf_cast(cv, rt__ox_printf(cv, "%s/exponent", h), b, B->dt, RT_DT_FLOAT);
        B = fb;
    }
    if (strcmp(n->op_type, "Pow") == 0 && B->f && rt__ox_nelem(B) == 1 &&
        (B->f[0] == 2.0f || B->f[0] == 0.5f || B->f[0] == 1.0f)) {
        /* Common exponents as cheaper exact ops. */
        int last;
        if ((st = rt__ox_in_any(cv, A, &a, &last)) != MS_OK) return st;
        const char *y = B->f[0] == 1.0f ? a
                                        : rt__tf_unary(cv, B->f[0] == 2.0f ? "Square" : "Sqrt", h,
                                                       a, RT_DT_FLOAT);
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, y)->nhwc = last;
        return MS_OK;
    }
    /* Channels-last when a rank-4 operand already is and the other is either
     * rank 4 too or a constant (permuted here). */
    int last = 0;
    if (r == 4 && (A->nhwc || B->nhwc)) {
        last = 1;
        for (int k = 0; k < 2 && last; k++) {
            rt__ox_value *v = k ? B : A;
            if (v->rank == 4) continue;
            if (!v->f || v->rank < 0) {
                last = 0;
                continue;
            }
            /* Lift the constant to rank 4 (leading 1s) so it can be permuted. */
            rt__ox_value *l =
                rt__ox_define(cv, rt__ox_printf(cv, "%s/rank4", v->name), v->dt, 4, NULL);
            for (int i = 0; i < 4; i++)
                l->dim[i] = i < 4 - v->rank ? 1 : v->dim[i - (4 - v->rank)];
            l->f = v->f;
            if (k)
                B = l;
            else
                A = l;
        }
    }
    if (last) {
        if ((st = rt__ox_tf_nhwc(cv, A, &a)) != MS_OK || (st = rt__ox_tf_nhwc(cv, B, &b)) != MS_OK)
            return st;
        const char *op = NULL;
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
            if (strcmp(map[i][0], n->op_type) == 0) op = map[i][1];
        rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, od, rt__tf_binary(cv, op, h, a, b, RT_DT_FLOAT));
        return MS_OK;
    }
    if ((st = rt__ox_tf(cv, A, &a)) != MS_OK || (st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
    const char *op = NULL;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i][0], n->op_type) == 0) op = map[i][1];
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, rt__tf_binary(cv, op, h, a, b, RT_DT_FLOAT));
    return MS_OK;
}

/* ======================================================================
 * Dense layers
 * ====================================================================== */

static ms_status op_gemm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *A = NULL, *B = NULL, *C = rt__ox_in(cv, n, 2);
    const char *a, *b, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &A, &a)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &B, NULL)) != MS_OK)
        return st;
    if (!rt__ox_need_rank(cv, A, 2, &st) || !rt__ox_need_rank(cv, B, 2, &st)) return st;
    if (A->dt != RT_DT_FLOAT || B->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "A and B must be float");
    int ta = (int)rt__ox_attr_i(n, "transA", 0), tb = (int)rt__ox_attr_i(n, "transB", 0);
    float alpha = rt__ox_attr_f(n, "alpha", 1.0f), beta = rt__ox_attr_f(n, "beta", 1.0f);
    int64_t N = tb ? B->dim[0] : B->dim[1], M = ta ? A->dim[1] : A->dim[0];
    if (alpha != 1.0f) {
        if (!B->f) {
            /* B computed at run time: alpha * B before the product. */
            if ((st = rt__ox_tf(cv, B, &b)) != MS_OK) return st;
            b = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/alpha_b", h), b,
                              rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/alpha", h), alpha),
                              RT_DT_FLOAT);
            goto product;
        }
        int64_t ne = rt__ox_nelem(B);
        float *s = rt__ox_alloc(cv, (size_t)ne * 4);
        for (int64_t i = 0; i < ne; i++)
            s[i] = B->f[i] * alpha;
        b = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/B", h), 2, B->dim, s);
    } else if ((st = rt__ox_tf(cv, B, &b)) != MS_OK) {
        return st;
    }
product:;
    Tensorflow__NodeDef *mm = rt__tf_node(cv, "MatMul", h);
    rt__tf_input(cv, mm, a);
    rt__tf_input(cv, mm, b);
    rt__tf_attr_type(cv, mm, "T", RT_DT_FLOAT);
    rt__tf_attr_b(cv, mm, "transpose_a", ta);
    rt__tf_attr_b(cv, mm, "transpose_b", tb);
    const char *y = mm->name;
    int64_t od[2] = {M, N};
    if (C != NULL && beta != 0.0f) {
        if (!C->f) {
            /* C computed at run time: y + beta * C (numpy broadcasting). */
            const char *c;
            if (C->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_ENOTSUP, "C must be float");
            if ((st = rt__ox_tf(cv, C, &c)) != MS_OK) return st;
            if (beta != 1.0f)
                c = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/beta_c", h), c,
                                  rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/beta", h), beta),
                                  RT_DT_FLOAT);
            y = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/add_c", h), y, c, RT_DT_FLOAT);
            rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 2, od, y);
            return MS_OK;
        }
        int64_t ne = rt__ox_nelem(C);
        float *s = rt__ox_alloc(cv, (size_t)ne * 4);
        for (int64_t i = 0; i < ne; i++)
            s[i] = C->f[i] * beta;
        if (ne == N && N > 1 && (C->rank == 1 || (C->rank == 2 && C->dim[0] == 1))) {
            Tensorflow__NodeDef *ba =
                rt__tf_node(cv, "BiasAdd", rt__ox_printf(cv, "%s/bias_add", h));
            rt__tf_input(cv, ba, y);
            rt__tf_input(cv, ba, rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/bias", h), 1, &N, s));
            rt__tf_attr_type(cv, ba, "T", RT_DT_FLOAT);
            y = ba->name;
        } else {
            y = rt__tf_binary(
                cv, "AddV2", rt__ox_printf(cv, "%s/add_c", h), y,
                rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/C", h), C->rank, C->dim, s),
                RT_DT_FLOAT);
        }
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 2, od, y);
    return MS_OK;
}

static ms_status op_matmul(rt__ox_conv *cv, const Onnx__NodeProto *n);

/* MatMul with a 1-D operand, as numpy's matmul: a 1-D A is the row [1, K], a
 * 1-D B the column [K, 1], and the axis added is squeezed from the product. */
static ms_status matmul_1d(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *A,
                           const char *a, rt__ox_value *B, const char *b) {
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    Onnx__NodeProto *c = rt__ox_alloc(cv, sizeof(*c));
    *c = *n;
    c->input = rt__ox_alloc(cv, 3 * sizeof(char *));
    c->output = rt__ox_alloc(cv, 2 * sizeof(char *));
    c->n_input = 2;
    c->n_output = 1;
    rt__ox_value *V[2] = {A, B};
    const char *t[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        c->input[i] = n->input[i];
        if (V[i]->rank != 1) continue;
        int64_t d2[2] = {1, V[i]->dim[0]};
        if (i == 1) d2[0] = V[i]->dim[0], d2[1] = 1;
        int64_t rs[2] = {d2[0] < 0 ? -1 : d2[0], d2[1] < 0 ? -1 : d2[1]};
        const char *nm = rt__ox_printf(cv, "%s/%s_2d", h, i ? "b" : "a");
        rt__ox_value *v = rt__ox_define(cv, nm, RT_DT_FLOAT, 2, d2);
        v->tf = rt__tf_reshape(cv, nm, t[i], RT_DT_FLOAT, 2, rs);
        c->input[i] = (char *)nm;
    }
    c->output[0] = (char *)rt__ox_printf(cv, "%s/2d", h);
    if ((st = op_matmul(cv, c)) != MS_OK) return st;
    rt__ox_value *P = rt__ox_find(cv, c->output[0]);
    const char *p;
    if (P == NULL || (st = rt__ox_tf(cv, P, &p)) != MS_OK)
        return P == NULL ? rt__ox_err(cv, MS_EINTERNAL, "no 2-D product") : st;
    int64_t sq[2], od[OX_MAXR];
    int nsq = 0, r = 0;
    if (A->rank == 1) sq[nsq++] = P->rank - 2;
    if (B->rank == 1) sq[nsq++] = P->rank - 1;
    for (int i = 0; i < P->rank; i++)
        if (!((A->rank == 1 && i == P->rank - 2) || (B->rank == 1 && i == P->rank - 1)))
            od[r++] = P->dim[i];
    Tensorflow__NodeDef *s = rt__tf_node(cv, "Squeeze", h);
    rt__tf_input(cv, s, p);
    rt__tf_attr_ilist(cv, s, "squeeze_dims", sq, nsq);
    rt__tf_attr_type(cv, s, "T", RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, s->name);
    return MS_OK;
}

static ms_status op_matmul(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *A = NULL, *B = NULL;
    const char *a, *b, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &A, &a)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &B, &b)) != MS_OK)
        return st;
    if (A->dt != RT_DT_FLOAT || B->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "A and B must be float");
    if (A->rank == 1 || B->rank == 1) return matmul_1d(cv, n, A, a, B, b);
    if (A->rank >= 2 && B->rank > 2) {
        /* Batched on both sides: BatchMatMulV2 broadcasts the batch dims as
         * numpy's matmul does. */
        rt__ox_value ba = {.rank = A->rank - 2}, bb = {.rank = B->rank - 2};
        memcpy(ba.dim, A->dim, sizeof(int64_t) * (size_t)ba.rank);
        memcpy(bb.dim, B->dim, sizeof(int64_t) * (size_t)bb.rank);
        int64_t od[OX_MAXR];
        int r = rt__ox_broadcast(&ba, &bb, od);
        if (r < 0 || r + 2 > OX_MAXR)
            return rt__ox_err(cv, MS_EINVAL, "batch dimensions do not broadcast");
        od[r] = A->dim[A->rank - 2];
        od[r + 1] = B->dim[B->rank - 1];
        Tensorflow__NodeDef *mm = rt__tf_node(cv, "BatchMatMulV2", h);
        rt__tf_input(cv, mm, a);
        rt__tf_input(cv, mm, b);
        rt__tf_attr_type(cv, mm, "T", RT_DT_FLOAT);
        rt__tf_attr_b(cv, mm, "adj_x", 0);
        rt__tf_attr_b(cv, mm, "adj_y", 0);
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r + 2, od, mm->name);
        return MS_OK;
    }
    if (A->rank < 2 || B->rank != 2)
        return rt__ox_err(cv, MS_ENOTSUP, "only [..., M, K] x [..., K, N] products are supported");
    int64_t K = B->dim[0], N = B->dim[1], od[OX_MAXR];
    memcpy(od, A->dim, sizeof(od));
    od[A->rank - 1] = N;
    if (A->rank > 2) {
        if (rt__ox_count_unknown(A->rank - 1, A->dim) > 1)
            return rt__ox_err(cv, MS_ENOTSUP, "more than one dynamic leading dimension");
        int64_t flat[2] = {-1, K};
        a = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/flatten", h), a, RT_DT_FLOAT, 2, flat);
    }
    Tensorflow__NodeDef *mm = rt__tf_node(cv, "MatMul", h);
    rt__tf_input(cv, mm, a);
    rt__tf_input(cv, mm, b);
    rt__tf_attr_type(cv, mm, "T", RT_DT_FLOAT);
    rt__tf_attr_b(cv, mm, "transpose_a", 0);
    rt__tf_attr_b(cv, mm, "transpose_b", 0);
    const char *y = mm->name;
    if (A->rank > 2)
        y = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/unflatten", h), y, RT_DT_FLOAT, A->rank, od);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, A->rank, od, y);
    return MS_OK;
}

static ms_status op_softmax(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    const char *sm = strcmp(n->op_type, "LogSoftmax") == 0 ? "LogSoftmax" : "Softmax";
    if (X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "element type %s is not supported (float only)",
                          rt_dtype_name(X->dt));
    int r = X->rank;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known and >= 1");
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", cv->opset >= 13 ? -1 : 1), r);
    if (axis < 0 || axis >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    const char *y;
    if (X->nhwc && axis == 1 && cv->opset >= 13) {
        /* Channels are already the last axis. */
        rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, X->dim,
                        rt__tf_unary(cv, sm, h, X->tf, RT_DT_FLOAT));
        return MS_OK;
    }
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    if (axis == r - 1) {
        y = rt__tf_unary(cv, sm, h, x, RT_DT_FLOAT);
    } else if (cv->opset >= 13) {
        int64_t perm[OX_MAXR];
        for (int i = 0; i < r; i++)
            perm[i] = i;
        perm[axis] = r - 1;
        perm[r - 1] = axis;
        const char *t =
            rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_last", h), x, RT_DT_FLOAT, r, perm);
        t = rt__tf_unary(cv, sm, h, t, RT_DT_FLOAT);
        y = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/from_last", h), t, RT_DT_FLOAT, r, perm);
    } else {
        /* Before opset 13: softmax over the flattened dims from axis on. */
        int64_t inner = 1;
        for (int i = axis; i < r; i++) {
            if (X->dim[i] < 0)
                return rt__ox_err(cv, MS_ENOTSUP, "dims from axis on must be static");
            inner *= X->dim[i];
        }
        if (rt__ox_count_unknown(r, X->dim) > 1)
            return rt__ox_err(cv, MS_ENOTSUP, "more than one dynamic dimension");
        int64_t flat[2] = {-1, inner};
        const char *t =
            rt__tf_reshape(cv, rt__ox_printf(cv, "%s/flatten", h), x, RT_DT_FLOAT, 2, flat);
        t = rt__tf_unary(cv, sm, h, t, RT_DT_FLOAT);
        y = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/unflatten", h), t, RT_DT_FLOAT, r, X->dim);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim, y);
    return MS_OK;
}

/* ======================================================================
 * Table
 * ====================================================================== */

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } handlers[] = {
    {"Conv", op_conv},                 {"ConvTranspose", op_conv_transpose},
    {"BatchNormalization", op_batchnorm}, {"InstanceNormalization", op_instancenorm},
    {"MaxPool", op_pool},              {"AveragePool", op_pool},
    {"GlobalAveragePool", op_global_pool}, {"GlobalMaxPool", op_global_pool},
    {"ReduceMean", op_reduce},         {"ReduceSum", op_reduce},
    {"ReduceMax", op_reduce},          {"ReduceMin", op_reduce},
    {"ReduceProd", op_reduce},         {"ReduceSumSquare", op_reduce},
    {"ReduceL1", op_reduce},           {"ReduceL2", op_reduce},
    {"ReduceLogSum", op_reduce},       {"ReduceLogSumExp", op_reduce},
    {"Relu", op_unary},                {"Sigmoid", op_unary},
    {"Tanh", op_unary},                {"Sqrt", op_unary},
    {"Exp", op_unary},                 {"Abs", op_unary},
    {"Neg", op_unary},                 {"Floor", op_unary},
    {"LeakyRelu", op_leaky_relu},      {"Clip", op_clip},
    {"HardSigmoid", op_hard_sigmoid},  {"HardSwish", op_hard_sigmoid},
    {"Add", op_binary},                {"Sub", op_binary},
    {"Mul", op_binary},                {"Div", op_binary},
    {"Pow", op_binary},                {"Max", op_binary},
    {"Min", op_binary},
    {"Gemm", op_gemm},                 {"MatMul", op_matmul},
    {"Softmax", op_softmax},           {"LogSoftmax", op_softmax},
    {"Reshape", rt__ox_op_reshape},           {"Flatten", rt__ox_op_flatten},
    {"Squeeze", rt__ox_op_squeeze_unsqueeze}, {"Unsqueeze", rt__ox_op_squeeze_unsqueeze},
    {"Transpose", rt__ox_op_transpose},       {"Concat", rt__ox_op_concat},
    {"Split", rt__ox_op_split},               {"Slice", rt__ox_op_slice},
    {"Pad", rt__ox_op_pad},
    {"Resize", rt__ox_op_resize},             {"Upsample", rt__ox_op_resize},
    {"Constant", rt__ox_op_constant},         {"ConstantOfShape", rt__ox_op_constant_of_shape},
    {"Shape", rt__ox_op_shape},               {"Gather", rt__ox_op_gather},
    {"Cast", rt__ox_op_cast},
    {"BitwiseAnd", rt__ox_op_bitwise},        {"BitwiseOr", rt__ox_op_bitwise},
    {"BitwiseXor", rt__ox_op_bitwise},        {"BitwiseNot", rt__ox_op_bitwise},
    {"BitShift", rt__ox_op_bitshift},         {"BitCast", rt__ox_op_bitcast},
    {"Identity", rt__ox_op_identity},         {"Dropout", rt__ox_op_identity},
};
/* clang-format on */

rt__ox_handler rt__ox_handler_for(const char *op_type) {
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        if (strcmp(handlers[i].op, op_type) == 0) return handlers[i].fn;
    rt__ox_handler h = rt__ox_more_handler(op_type);
    return h ? h : rt__ox_ext_handler(op_type);
}
