/* rt_onnx_3d.c - the rank-5 (3-D, NCDHW) forms of Conv, ConvTranspose,
 * MaxPool, AveragePool and Resize, mapped to TensorFlow's channels-last 3-D
 * ops Conv3D (+ BiasAdd, fused later by rt_onnx_fuse.c), Conv3DBackpropInputV2,
 * MaxPool3D, AvgPool3D and, for nearest-neighbour Resize by integer factors,
 * Reshape + Tile + Reshape.
 *
 * The TF ops run NDHWC. A rank-5 value made by one of these handlers keeps
 * its ONNX-order (NCDHW) tensor in tf (a Transpose, only run when some
 * consumer needs it) and its NDHWC tensor in tf_alt, so chains of 3-D ops
 * (and Relu, handled by rt__ox_op3_unary) pass NDHWC tensors along without
 * transposes. The batch and spatial dimensions may be dynamic (known only at
 * run time; ConvTranspose then sizes its output from the input's shape at
 * run time); channels must be static.
 */
#include <float.h>
#include <string.h>

#include "rt_onnx_int.h"

static const int64_t to_last[5] = {0, 2, 3, 4, 1};

/* Rank-5 input i as an NDHWC TF tensor. */
static ms_status need5(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **v,
                       const char **tf) {
    ms_status st = rt__ox_need(cv, n, i, v, NULL);
    if (st != MS_OK) return st;
    rt__ox_value *x = *v;
    if (x->rank != 5)
        return rt__ox_err(cv, MS_ENOTSUP, "input \"%s\" must have rank 5 (got %d)", x->name,
                          x->rank);
    if (x->dim[1] < 0) return rt__ox_err(cv, MS_ENOTSUP, "3-D ops need a static channel count");
    if (x->tf_alt == NULL) {
        const char *t;
        if ((st = rt__ox_tf(cv, x, &t)) != MS_OK) return st;
        x->tf_alt = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_ndhwc", x->name), t, x->dt, 5,
                                     to_last);
    }
    *tf = x->tf_alt;
    return MS_OK;
}

/* Output i (ONNX dims od) from the NDHWC tensor y; its ONNX-order form is
 * made by rt__ox_tf only when something needs it. */
static void def_out5(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, const int64_t od[5],
                     const char *y) {
    rt__ox_value *v = rt__ox_def_out(cv, n, i, RT_DT_FLOAT, 5, od, NULL);
    v->tf_alt = y;
}

/* A 5-list [1, d, h, w, 1]. */
static void list5(int64_t *o, const int64_t v[3]) {
    o[0] = 1, o[1] = v[0], o[2] = v[1], o[3] = v[2], o[4] = 1;
}

typedef struct win3 {
    int64_t k[3], s[3], d[3], pads[6]; /* pads: begins d, h, w then ends */
    const char *padding;               /* "SAME" / "VALID" / NULL (explicit pads) */
    int64_t out[3];
} win3;

static ms_status window3(rt__ox_conv *cv, const Onnx__NodeProto *n, const int64_t in[3],
                         const int64_t k[3], win3 *w) {
    int64_t tmp[8];
    memset(w, 0, sizeof(*w));
    for (int a = 0; a < 3; a++)
        w->k[a] = k[a], w->s[a] = 1, w->d[a] = 1;
    int c;
    if ((c = rt__ox_attr_ints(n, "strides", tmp, 8)) >= 0) {
        if (c != 3) return rt__ox_err(cv, MS_EINVAL, "strides must have 3 values");
        memcpy(w->s, tmp, sizeof(w->s));
    }
    if ((c = rt__ox_attr_ints(n, "dilations", tmp, 8)) >= 0) {
        if (c != 3) return rt__ox_err(cv, MS_EINVAL, "dilations must have 3 values");
        memcpy(w->d, tmp, sizeof(w->d));
    }
    if ((c = rt__ox_attr_ints(n, "pads", tmp, 8)) >= 0) {
        if (c != 6) return rt__ox_err(cv, MS_EINVAL, "pads must have 6 values");
        memcpy(w->pads, tmp, sizeof(w->pads));
    }
    for (int a = 0; a < 3; a++)
        if (rt__ox_out_of(w->k[a], 1, OX_WIN_MAX) || rt__ox_out_of(w->s[a], 1, OX_WIN_MAX) ||
            rt__ox_out_of(w->d[a], 1, OX_WIN_MAX) || rt__ox_out_of(w->pads[a], 0, OX_WIN_MAX) ||
            rt__ox_out_of(w->pads[a + 3], 0, OX_WIN_MAX))
            return rt__ox_err(cv, MS_EINVAL,
                              "kernel, strides, dilations and pads must be in 1..2^20 (pads "
                              "0..2^20)");
    int upper = rt__ox_attr_is(n, "auto_pad", "SAME_UPPER", "NOTSET"),
        lower = rt__ox_attr_is(n, "auto_pad", "SAME_LOWER", "NOTSET");
    if (rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET")) memset(w->pads, 0, sizeof(w->pads));
    int zero = 1, same = 1;
    for (int a = 0; a < 3; a++) {
        int64_t keff = (w->k[a] - 1) * w->d[a] + 1;
        if (in[a] < 0) {
            /* Dynamic: SAME_UPPER is TF's SAME, computed by the op at run
             * time; explicit pads stay explicit. */
            if (lower)
                return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME_LOWER needs static spatial dims");
            if (!upper && (w->pads[a] || w->pads[a + 3])) zero = 0, same = 0;
            if (upper) zero = 0;
            w->out[a] = -1;
            continue;
        }
        int64_t o = (in[a] + w->s[a] - 1) / w->s[a];
        int64_t tot = (o - 1) * w->s[a] + keff - in[a];
        if (tot < 0) tot = 0;
        if (upper || lower) {
            w->pads[a] = upper ? tot / 2 : tot - tot / 2;
            w->pads[a + 3] = tot - w->pads[a];
        }
        if (w->pads[a] || w->pads[a + 3]) zero = 0;
        if (w->pads[a] != tot / 2 || w->pads[a + 3] != tot - tot / 2) same = 0;
        w->out[a] = (in[a] + w->pads[a] + w->pads[a + 3] - keff) / w->s[a] + 1;
        if (w->out[a] < 1)
            return rt__ox_err(cv, MS_EINVAL, "window does not fit the input");
    }
    w->padding = zero ? "VALID" : same ? "SAME" : NULL;
    return MS_OK;
}

/* NDHWC x padded explicitly (w->padding NULL) with value; w->padding becomes VALID. */
static const char *pad3(rt__ox_conv *cv, const char *h, const char *x, win3 *w, float value) {
    if (w->padding != NULL) return x;
    int64_t p[10] = {0, w->pads[0], w->pads[1], w->pads[2], 0,
                     0, w->pads[3], w->pads[4], w->pads[5], 0};
    w->padding = "VALID";
    return rt__ox_emit_pad(cv, rt__ox_printf(cv, "%s/pad", h), x, RT_DT_FLOAT, 5, p, "constant",
                           value);
}

static void win_attrs(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const win3 *w, int dil) {
    int64_t l[5];
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    list5(l, w->s);
    rt__tf_attr_ilist(cv, nd, "strides", l, 5);
    if (dil) {
        list5(l, w->d);
        rt__tf_attr_ilist(cv, nd, "dilations", l, 5);
    }
    rt__tf_attr_s(cv, nd, "padding", w->padding);
    rt__tf_attr_s(cv, nd, "data_format", "NDHWC");
}

static const char *bias_add(rt__ox_conv *cv, const char *h, const char *y, int64_t M,
                            const float *b) {
    Tensorflow__NodeDef *ba = rt__tf_node(cv, "BiasAdd", rt__ox_printf(cv, "%s/bias_add", h));
    rt__tf_input(cv, ba, y);
    rt__tf_input(cv, ba, rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/bias", h), 1, &M, b));
    rt__tf_attr_type(cv, ba, "T", RT_DT_FLOAT);
    rt__tf_attr_s(cv, ba, "data_format", "NHWC");
    return ba->name;
}

/* TF's 3-D filter [kd, kh, kw, C, M] from ONNX weights [M, C, kd, kh, kw]
 * (Conv) or [Ci, Co, kd, kh, kw] (ConvTranspose, giving [.., Co, Ci]): a
 * Const when the weights are known, else a Transpose run with the model. */
static ms_status filter5(rt__ox_conv *cv, const char *h, rt__ox_value *W, const char **out) {
    static const int64_t perm[5] = {2, 3, 4, 1, 0};
    if (W->rank != 5 || W->dt != RT_DT_FLOAT || rt__ox_count_unknown(5, W->dim) != 0)
        return rt__ox_err(cv, MS_ENOTSUP, "weights must be a 5-D float tensor of static shape");
    int64_t A = W->dim[0], B = W->dim[1], taps = W->dim[2] * W->dim[3] * W->dim[4];
    int64_t fd[5] = {W->dim[2], W->dim[3], W->dim[4], B, A};
    if (!W->f) {
        const char *wt;
        ms_status st = rt__ox_tf(cv, W, &wt);
        if (st != MS_OK) return st;
        *out = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/filter", h), wt, RT_DT_FLOAT, 5, perm);
        return MS_OK;
    }
    float *f = rt__ox_alloc(cv, (size_t)(taps * A * B) * sizeof(float) + 4);
    for (int64_t i = 0; i < A; i++)
        for (int64_t j = 0; j < B; j++)
            for (int64_t t = 0; t < taps; t++)
                f[(t * B + j) * A + i] = W->f[(i * B + j) * taps + t];
    *out = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/filter", h), 5, fd, f);
    return MS_OK;
}

ms_status rt__ox_op3_conv(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *W = NULL, *B = rt__ox_in(cv, n, 2);
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need5(cv, n, 0, &X, &x)) != MS_OK || (st = rt__ox_need(cv, n, 1, &W, NULL)) != MS_OK)
        return st;
    const char *filter;
    if ((st = filter5(cv, h, W, &filter)) != MS_OK) return st;
    if (rt__ox_attr_i(n, "group", 1) != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "grouped 3-D Conv is not supported");
    int64_t M = W->dim[0], C = W->dim[1];
    if (C != X->dim[1])
        return rt__ox_err(cv, MS_EINVAL, "weights expect %lld input channels, input has %lld",
                          (long long)C, (long long)X->dim[1]);
    win3 w;
    if ((st = window3(cv, n, X->dim + 2, W->dim + 2, &w)) != MS_OK) return st;
    x = pad3(cv, h, x, &w, 0.0f);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Conv3D", h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, filter);
    win_attrs(cv, nd, &w, 1);
    const char *y = nd->name;
    if (B != NULL) {
        if (!B->f || rt__ox_nelem(B) != M)
            return rt__ox_err(cv, MS_ENOTSUP, "bias must be a constant of %lld floats",
                              (long long)M);
        y = bias_add(cv, h, y, M, B->f);
    }
    int64_t od[5] = {X->dim[0], M, w.out[0], w.out[1], w.out[2]};
    def_out5(cv, n, 0, od, y);
    return MS_OK;
}

const char *rt__ox_deconv_sizes(rt__ox_conv *cv, const char *h, const char *x, int r,
                                const int64_t *mul, const int64_t *add, const int64_t *cut,
                                const char **crop_size) {
    Tensorflow__NodeDef *sh = rt__tf_node(cv, "Shape", rt__ox_printf(cv, "%s/in_shape", h));
    rt__tf_input(cv, sh, x);
    rt__tf_attr_type(cv, sh, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, sh, "out_type", RT_DT_INT32);
    const char *m = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/scaled", h), sh->name,
                                  rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/mul", h), r, mul),
                                  RT_DT_INT32);
    const char *sizes =
        rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/input_sizes", h), m,
                      rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/add", h), r, add), RT_DT_INT32);
    *crop_size = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/crop_size", h), sizes,
                               rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/cut", h), r, cut),
                               RT_DT_INT32);
    return sizes;
}

ms_status rt__ox_op3_conv_transpose(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *W = NULL, *B = rt__ox_in(cv, n, 2);
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need5(cv, n, 0, &X, &x)) != MS_OK || (st = rt__ox_need(cv, n, 1, &W, NULL)) != MS_OK)
        return st;
    const char *filter;
    if ((st = filter5(cv, h, W, &filter)) != MS_OK) return st;
    if (rt__ox_attr_i(n, "group", 1) != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "grouped ConvTranspose is not supported");
    if (rt__ox_attr(n, "output_shape"))
        return rt__ox_err(cv, MS_ENOTSUP, "the output_shape attribute is not supported; use pads");
    if (!rt__ox_attr_is(n, "auto_pad", "NOTSET", "NOTSET") &&
        !rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET"))
        return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME is not supported");
    int64_t Ci = W->dim[0], Co = W->dim[1];
    if (Ci != X->dim[1])
        return rt__ox_err(cv, MS_EINVAL, "weights expect %lld input channels, input has %lld",
                          (long long)Ci, (long long)X->dim[1]);
    int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pads[6] = {0}, op[3] = {0}, tmp[8];
    if (rt__ox_attr_ints(n, "strides", tmp, 8) == 3) memcpy(s, tmp, sizeof(s));
    if (rt__ox_attr_ints(n, "dilations", tmp, 8) == 3) memcpy(d, tmp, sizeof(d));
    if (rt__ox_attr_ints(n, "pads", tmp, 8) == 6) memcpy(pads, tmp, sizeof(pads));
    if (rt__ox_attr_ints(n, "output_padding", tmp, 8) == 3) memcpy(op, tmp, sizeof(op));
    if (rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET")) memset(pads, 0, sizeof(pads));
    int64_t full[3], od[5] = {X->dim[0], Co};
    for (int a = 0; a < 3; a++) {
        if (rt__ox_out_of(s[a], 1, OX_WIN_MAX) || rt__ox_out_of(d[a], 1, OX_WIN_MAX) ||
            rt__ox_out_of(op[a], 0, s[a] - 1) || rt__ox_out_of(pads[a], 0, OX_WIN_MAX) ||
            rt__ox_out_of(pads[a + 3], 0, OX_WIN_MAX))
            return rt__ox_err(cv, MS_EINVAL,
                              "strides and dilations must be in 1..2^20, output_padding below "
                              "the stride, pads in 0..2^20");
        full[a] = s[a] * (X->dim[2 + a] - 1) + (W->dim[2 + a] - 1) * d[a] + 1 + op[a];
        od[2 + a] = full[a] - pads[a] - pads[a + 3];
        if (X->dim[2 + a] < 0) {
            full[a] = od[2 + a] = -1;
        } else if (od[2 + a] < 1) {
            return rt__ox_err(cv, MS_EINVAL, "pads leave an empty output");
        }
    }
    int dyn = X->dim[0] < 0 || full[0] < 0 || full[1] < 0 || full[2] < 0;
    int64_t sz[5] = {X->dim[0], full[0], full[1], full[2], Co};
    const char *sizes, *crop_size = NULL;
    if (!dyn) {
        sizes = rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/input_sizes", h), 5, sz);
    } else {
        /* From x's NDHWC shape at run time: [N, s*in + keff + op - s, ..., Co]
         * = shape * [1, s, s, s, 0] + [0, keff + op - s, ..., Co]; the crop
         * keeps that minus the pads. */
        int64_t mul[5] = {1, s[0], s[1], s[2], 0}, add[5] = {0, 0, 0, 0, Co}, cut[5] = {0};
        for (int a = 0; a < 3; a++) {
            add[1 + a] = (W->dim[2 + a] - 1) * d[a] + 1 + op[a] - s[a];
            cut[1 + a] = pads[a] + pads[a + 3];
        }
        sizes = rt__ox_deconv_sizes(cv, h, x, 5, mul, add, cut, &crop_size);
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Conv3DBackpropInputV2", h);
    rt__tf_input(cv, nd, sizes);
    rt__tf_input(cv, nd, filter);
    rt__tf_input(cv, nd, x);
    win3 w = {.padding = "VALID"};
    memcpy(w.s, s, sizeof(s));
    memcpy(w.d, d, sizeof(d));
    win_attrs(cv, nd, &w, 1);
    rt__tf_attr_type(cv, nd, "Tshape", RT_DT_INT32);
    const char *y = nd->name;
    int cropped = 0;
    for (int a = 0; a < 6; a++)
        cropped |= pads[a] != 0;
    if (cropped) {
        Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/crop", h));
        int64_t b[5] = {0, pads[0], pads[1], pads[2], 0}, z[5] = {-1, od[2], od[3], od[4], Co};
        rt__tf_input(cv, sl, y);
        rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", sl->name), 5, b));
        rt__tf_input(cv, sl, crop_size ? crop_size
                                       : rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", sl->name),
                                                       5, z));
        rt__tf_attr_type(cv, sl, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
        y = sl->name;
    }
    if (B != NULL) {
        if (!B->f || rt__ox_nelem(B) != Co)
            return rt__ox_err(cv, MS_ENOTSUP, "bias must be a constant of %lld floats",
                              (long long)Co);
        y = bias_add(cv, h, y, Co, B->f);
    }
    def_out5(cv, n, 0, od, y);
    return MS_OK;
}

ms_status rt__ox_op3_pool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int is_max = strcmp(n->op_type, "MaxPool") == 0;
    rt__ox_value *X = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need5(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (n->n_output > 1 && n->output[1] && n->output[1][0])
        return rt__ox_err(cv, MS_ENOTSUP, "the Indices output is not supported");
    if (rt__ox_attr_i(n, "ceil_mode", 0) != 0)
        return rt__ox_err(cv, MS_ENOTSUP, "3-D pools with ceil_mode are not supported");
    int64_t ks[8];
    if (rt__ox_attr_ints(n, "kernel_shape", ks, 8) != 3)
        return rt__ox_err(cv, MS_ENOTSUP, "kernel_shape must have 3 values");
    win3 w;
    if ((st = window3(cv, n, X->dim + 2, ks, &w)) != MS_OK) return st;
    if (w.d[0] != 1 || w.d[1] != 1 || w.d[2] != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "dilated pooling is not supported");
    if (is_max) {
        if (rt__ox_attr_i(n, "storage_order", 0) != 0)
            return rt__ox_err(cv, MS_ENOTSUP, "storage_order 1 is not supported");
        x = pad3(cv, h, x, &w, -FLT_MAX);
    } else if (w.padding == NULL ||
               (strcmp(w.padding, "SAME") == 0 && rt__ox_attr_i(n, "count_include_pad", 0))) {
        if (!rt__ox_attr_i(n, "count_include_pad", 0))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "pads that are neither SAME nor VALID need count_include_pad=1");
        w.padding = NULL;
        x = pad3(cv, h, x, &w, 0.0f);
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, is_max ? "MaxPool3D" : "AvgPool3D", h);
    rt__tf_input(cv, nd, x);
    int64_t l[5];
    list5(l, w.k);
    rt__tf_attr_ilist(cv, nd, "ksize", l, 5);
    win_attrs(cv, nd, &w, 0);
    int64_t od[5] = {X->dim[0], X->dim[1], w.out[0], w.out[1], w.out[2]};
    def_out5(cv, n, 0, od, nd->name);
    return MS_OK;
}

/* Nearest-neighbour Resize by integer factors (mode nearest, any rounding:
 * with an integer factor f every output index o reads o / f exactly, for
 * asymmetric and half_pixel alike): Reshape to [N, D, 1, H, 1, W, 1, C], Tile
 * by the factors, Reshape to [N, D*fd, H*fh, W*fw, C]. */
ms_status rt__ox_op3_resize(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need5(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (!rt__ox_attr_is(n, "mode", "nearest", "nearest"))
        return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize supports mode nearest only");
    if (X->dim[2] < 0 || X->dim[3] < 0 || X->dim[4] < 0)
        return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize needs static spatial dims");
    if (rt__ox_attr_is(n, "coordinate_transformation_mode", "tf_crop_and_resize", "half_pixel"))
        return rt__ox_err(cv, MS_ENOTSUP, "tf_crop_and_resize is not supported");
    /* Output size from scales (input 2) or sizes (input 3). */
    int64_t f[3], od[5] = {X->dim[0], X->dim[1]};
    rt__ox_value *Sc = n->n_input > 2 ? rt__ox_in(cv, n, 2) : NULL;
    rt__ox_value *Sz = n->n_input > 3 ? rt__ox_in(cv, n, 3) : NULL;
    if (Sz != NULL && rt__ox_nelem(Sz) == 5 && Sz->iv && rt__ox_is_const(Sz)) {
        for (int a = 0; a < 3; a++) {
            int64_t in = X->dim[2 + a], out = Sz->iv[2 + a];
            if (in < 1 || out < in || out % in != 0)
                return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize needs integer up-scaling factors");
            f[a] = out / in;
        }
        if (Sz->iv[0] != X->dim[0] && X->dim[0] >= 0)
            return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize cannot change the batch");
        if (Sz->iv[1] != X->dim[1])
            return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize cannot change the channels");
    } else if (Sc != NULL && Sc->f && rt__ox_nelem(Sc) == 5) {
        if (Sc->f[0] != 1.0f || Sc->f[1] != 1.0f)
            return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize scales batch and channels by 1 only");
        for (int a = 0; a < 3; a++) {
            float s = Sc->f[2 + a];
            if (!(s >= 1.0f && s <= 64.0f) || s != (float)(int64_t)s)
                return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize needs integer up-scaling factors");
            f[a] = (int64_t)s;
        }
    } else {
        return rt__ox_err(cv, MS_ENOTSUP, "3-D Resize needs constant scales or sizes");
    }
    int64_t N = X->dim[0], C = X->dim[1], D = X->dim[2], H = X->dim[3], W = X->dim[4];
    for (int a = 0; a < 3; a++)
        od[2 + a] = X->dim[2 + a] * f[a];
    int64_t r8[8] = {N < 0 ? -1 : N, D, 1, H, 1, W, 1, C};
    int64_t mult[8] = {1, 1, f[0], 1, f[1], 1, f[2], 1};
    int64_t r5[5] = {N < 0 ? -1 : N, od[2], od[3], od[4], C};
    const char *y = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/expand", h), x, RT_DT_FLOAT, 8, r8);
    Tensorflow__NodeDef *tile = rt__tf_node(cv, "Tile", rt__ox_printf(cv, "%s/tile", h));
    rt__tf_input(cv, tile, y);
    rt__tf_input(cv, tile, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/multiples", h), 8, mult));
    rt__tf_attr_type(cv, tile, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, tile, "Tmultiples", RT_DT_INT32);
    y = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/merge", h), tile->name, RT_DT_FLOAT, 5, r5);
    def_out5(cv, n, 0, od, y);
    return MS_OK;
}

/* Relu of a rank-5 value that has an NDHWC tensor: computed on that tensor,
 * so that it stays channels-last (and the fusion pass folds it into the
 * convolution). Returns 0 (nothing emitted) when x has none. */
int rt__ox_op3_unary(rt__ox_conv *cv, const Onnx__NodeProto *n, const char *tf_op) {
    rt__ox_value *X = rt__ox_in(cv, n, 0);
    if (X == NULL || X->rank != 5 || X->tf_alt == NULL || X->dt != RT_DT_FLOAT) return 0;
    const char *y = rt__tf_unary(cv, tf_op, rt__ox_hint_of(n), X->tf_alt, RT_DT_FLOAT);
    def_out5(cv, n, 0, X->dim, y);
    return 1;
}

/* Concat along the channels (axis 1) of rank-5 values that all have an
 * NDHWC tensor: ConcatV2 on their last axis. Returns 0 (nothing emitted)
 * otherwise. */
int rt__ox_op3_concat(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int ni = (int)n->n_input;
    int64_t axis = rt__ox_attr_i(n, "axis", 0);
    if (ni < 1 || ni > 64 || (axis != 1 && axis != -4)) return 0;
    rt__ox_value *v[64];
    int64_t od[5];
    for (int i = 0; i < ni; i++) {
        v[i] = rt__ox_in(cv, n, i);
        if (v[i] == NULL || v[i]->rank != 5 || v[i]->tf_alt == NULL || v[i]->dt != RT_DT_FLOAT)
            return 0;
        if (i == 0) {
            memcpy(od, v[0]->dim, sizeof(od));
            continue;
        }
        for (int a = 0; a < 5; a++)
            if (a != 1 && v[i]->dim[a] != od[a]) return 0;
        od[1] += v[i]->dim[1];
    }
    Tensorflow__NodeDef *cat = rt__tf_node(cv, "ConcatV2", rt__ox_hint_of(n));
    for (int i = 0; i < ni; i++)
        rt__tf_input(cv, cat, v[i]->tf_alt);
    rt__tf_input(cv, cat, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", cat->name), 4));
    rt__tf_attr_i(cv, cat, "N", ni);
    rt__tf_attr_type(cv, cat, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, cat, "Tidx", RT_DT_INT32);
    def_out5(cv, n, 0, od, cat->name);
    return 1;
}
