/* rt_onnx_img.c - ONNX image ops converted to our own ops
 * (kernels/cpu/kn_cpu_onnx_img.c), where no TF op means what ONNX means:
 * RoiAlign (10-22) -> OnnxRoiAlign, MaxUnpool (9-22) -> OnnxMaxUnpool,
 * Col2Im (18) -> OnnxCol2Im, DeformConv (19, 22) -> OnnxDeformConv. A SavedModel written with them runs in
 * dcmserve only (docs/onnx.md).
 */
#include <math.h>
#include <string.h>

#include "rt_onnx_ext.h"

/* v as an int64 tensor name (int32 cast); MS_EINVAL for other types. */
static ms_status as_i64(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, const char *what,
                        rt__ox_value **V, const char **v) {
    ms_status st = rt__ox_need(cv, n, i, V, v);
    if (st != MS_OK) return st;
    if ((*V)->dt == RT_DT_INT32)
        *v = rt__tf_cast(cv, rt__ox_printf(cv, "%s/%s64", rt__ox_hint_of(n), what), *v,
                         RT_DT_INT32, RT_DT_INT64);
    else if ((*V)->dt != RT_DT_INT64)
        return rt__ox_err(cv, MS_EINVAL, "%s must be int64", what);
    return MS_OK;
}

/* RoiAlign: opset 10 has no coordinate_transformation_mode (its rule is
 * output_half_pixel); 16 adds it with the default half_pixel. */
static ms_status op_roi_align(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *R, *B;
    const char *x, *r, *b, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &R, &r)) != MS_OK ||
        (st = as_i64(cv, n, 2, "batch_indices", &B, &b)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || R->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "X and rois of %s are not supported (float only)",
                          rt_dtype_name(X->dt != RT_DT_FLOAT ? X->dt : R->dt));
    if (X->rank != 4 || R->rank != 2 || B->rank != 1)
        return rt__ox_err(cv, MS_EINVAL, "want X (N, C, H, W), rois (R, 4), batch_indices (R)");
    int half;
    if (cv->opset < 16) {
        if (rt__ox_attr(n, "coordinate_transformation_mode"))
            return rt__ox_err(cv, MS_EINVAL,
                              "opset %lld: coordinate_transformation_mode comes with opset 16",
                              (long long)cv->opset);
        half = 0;
    } else if (rt__ox_attr_is(n, "coordinate_transformation_mode", "half_pixel", "half_pixel")) {
        half = 1;
    } else if (rt__ox_attr_is(n, "coordinate_transformation_mode", "output_half_pixel",
                              "half_pixel")) {
        half = 0;
    } else {
        return rt__ox_err(cv, MS_ENOTSUP,
                          "coordinate_transformation_mode must be half_pixel or output_half_pixel");
    }
    int max = rt__ox_attr_is(n, "mode", "max", "avg");
    if (!max && !rt__ox_attr_is(n, "mode", "avg", "avg"))
        return rt__ox_err(cv, MS_ENOTSUP, "mode must be avg or max");
    int64_t oh = rt__ox_attr_i(n, "output_height", 1), ow = rt__ox_attr_i(n, "output_width", 1);
    int64_t ratio = rt__ox_attr_i(n, "sampling_ratio", 0);
    float scale = rt__ox_attr_f(n, "spatial_scale", 1.0f);
    if (oh < 1 || oh > OX_WIN_MAX || ow < 1 || ow > OX_WIN_MAX || ratio < 0 ||
        ratio > OX_WIN_MAX || !isfinite(scale))
        return rt__ox_err(cv, MS_EINVAL,
                          "output_height %lld, output_width %lld, sampling_ratio %lld, "
                          "spatial_scale %g out of range",
                          (long long)oh, (long long)ow, (long long)ratio, (double)scale);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxRoiAlign", h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, r);
    rt__tf_input(cv, nd, b);
    rt__tf_attr_i(cv, nd, "output_height", oh);
    rt__tf_attr_i(cv, nd, "output_width", ow);
    rt__tf_attr_i(cv, nd, "sampling_ratio", ratio);
    rt__tf_attr_f(cv, nd, "spatial_scale", scale);
    rt__tf_attr_i(cv, nd, "mode", max);
    rt__tf_attr_i(cv, nd, "half_pixel", half);
    int64_t od[4] = {R->dim[0], X->dim[1], oh, ow};
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, od, nd->name);
    return MS_OK;
}

/* MaxUnpool: the output shape from the output_shape input, else ONNX's
 * default (in - 1) * stride + kernel - pads; the kernel places each element
 * by its index in the default shape. */
static ms_status op_max_unpool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *I, *S = rt__ox_in(cv, n, 2);
    const char *x, *ix, *s, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = as_i64(cv, n, 1, "indices", &I, &ix)) != MS_OK)
        return st;
    int r = X->rank, nd = r - 2;
    if (r < 3 || r > OX_MAXR || I->rank != r)
        return rt__ox_err(cv, MS_EINVAL, "want X (N, C, spatial...) and indices of its rank");
    int64_t k[OX_MAXR], str[OX_MAXR], pads[2 * OX_MAXR] = {0}, od[OX_MAXR];
    for (int i = 0; i < nd; i++)
        str[i] = 1;
    if (rt__ox_attr_ints(n, "kernel_shape", k, OX_MAXR) != nd ||
        (rt__ox_attr(n, "strides") && rt__ox_attr_ints(n, "strides", str, OX_MAXR) != nd) ||
        (rt__ox_attr(n, "pads") && rt__ox_attr_ints(n, "pads", pads, 2 * OX_MAXR) != 2 * nd))
        return rt__ox_err(cv, MS_EINVAL, "kernel_shape and strides need %d values, pads %d", nd,
                          2 * nd);
    for (int i = 0; i < nd; i++)
        if (k[i] < 1 || k[i] > OX_WIN_MAX || str[i] < 1 || str[i] > OX_WIN_MAX || pads[i] < 0 ||
            pads[i] > OX_WIN_MAX || pads[nd + i] < 0 || pads[nd + i] > OX_WIN_MAX)
            return rt__ox_err(cv, MS_EINVAL, "kernel_shape, strides, pads out of range");
    s = NULL;
    if (S != NULL) {
        if ((st = as_i64(cv, n, 2, "output_shape", &S, &s)) != MS_OK) return st;
        if (S->rank != 1 || (S->dim[0] >= 0 && S->dim[0] != r))
            return rt__ox_err(cv, MS_EINVAL, "output_shape must hold %d dims", r);
        for (int i = 0; i < r; i++)
            od[i] = S->iv && rt__ox_is_const(S) ? S->iv[i] : -1;
    } else {
        od[0] = X->dim[0], od[1] = X->dim[1];
        for (int i = 0; i < nd; i++) {
            int64_t in = X->dim[2 + i];
            od[2 + i] = in < 0 ? -1 : (in - 1) * str[i] + k[i] - pads[i] - pads[nd + i];
            if (in >= 0 && od[2 + i] < 0)
                return rt__ox_err(cv, MS_EINVAL, "the pads exceed spatial dim %d", i);
        }
    }
    Tensorflow__NodeDef *nd_ = rt__tf_node(cv, "OnnxMaxUnpool", h);
    rt__tf_input(cv, nd_, x);
    rt__tf_input(cv, nd_, ix);
    if (s) rt__tf_input(cv, nd_, s);
    rt__tf_attr_ilist(cv, nd_, "ksize", k, nd);
    rt__tf_attr_ilist(cv, nd_, "strides", str, nd);
    rt__tf_attr_ilist(cv, nd_, "pads", pads, 2 * nd);
    rt__ox_def_out(cv, n, 0, X->dt, r, od, nd_->name);
    return MS_OK;
}

/* Col2Im: image_shape and block_shape may come at run time (the kernel
 * checks them against the input); their length must be known here. */
static ms_status op_col2im(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *IS, *BS;
    const char *x, *is, *bs, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = as_i64(cv, n, 1, "image_shape", &IS, &is)) != MS_OK ||
        (st = as_i64(cv, n, 2, "block_shape", &BS, &bs)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "input of %s is not supported (float only)",
                          rt_dtype_name(X->dt));
    if (X->rank != 3 || IS->rank != 1 || BS->rank != 1)
        return rt__ox_err(cv, MS_EINVAL, "want input (N, C*K, L), image_shape and block_shape "
                                         "vectors");
    int nd = (int)IS->dim[0];
    if (IS->dim[0] < 1 || IS->dim[0] > OX_MAXR - 2 || (BS->dim[0] >= 0 && BS->dim[0] != nd))
        return rt__ox_err(cv, MS_ENOTSUP,
                          "image_shape needs a known length of 1 to %d, block_shape the same",
                          OX_MAXR - 2);
    int64_t v[2 * OX_MAXR];
    static const char *const lists[3] = {"dilations", "strides", "pads"};
    Tensorflow__NodeDef *nd_ = rt__tf_node(cv, "OnnxCol2Im", h);
    rt__tf_input(cv, nd_, x);
    rt__tf_input(cv, nd_, is);
    rt__tf_input(cv, nd_, bs);
    for (int i = 0; i < 3; i++) {
        if (!rt__ox_attr(n, lists[i])) continue;
        int want = i == 2 ? 2 * nd : nd;
        if (rt__ox_attr_ints(n, lists[i], v, 2 * OX_MAXR) != want)
            return rt__ox_err(cv, MS_EINVAL, "%s needs %d values", lists[i], want);
        rt__tf_attr_ilist(cv, nd_, lists[i], v, want);
    }
    int64_t od[OX_MAXR] = {X->dim[0], -1}, kprod = 1;
    int bconst = BS->iv && rt__ox_is_const(BS);
    for (int i = 0; bconst && i < nd; i++)
        kprod = BS->iv[i] >= 1 && kprod <= OX_WIN_MAX ? kprod * BS->iv[i] : -1;
    if (bconst && kprod > 0 && X->dim[1] >= 0 && X->dim[1] % kprod == 0)
        od[1] = X->dim[1] / kprod;
    for (int i = 0; i < nd; i++)
        od[2 + i] = IS->iv && rt__ox_is_const(IS) ? IS->iv[i] : -1;
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 2 + nd, od, nd_->name);
    return MS_OK;
}

/* DeformConv (19, 22): 2-D; B and mask absent become empty constants. */
static ms_status op_deform_conv(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *V[5];
    const char *v[5], *h = rt__ox_hint_of(n);
    ms_status st;
    for (int i = 0; i < 5; i++) {
        V[i] = rt__ox_in(cv, n, i);
        if (V[i] == NULL && i >= 3) {
            static const float unused = 0;
            int64_t zero = 0;
            v[i] = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/none%d", h, i), 1, &zero, &unused);
            continue;
        }
        if ((st = rt__ox_need(cv, n, i, &V[i], &v[i])) != MS_OK) return st;
        if (V[i]->dt != RT_DT_FLOAT)
            return rt__ox_err(cv, MS_ENOTSUP, "input %d of %s is not supported (float only)", i,
                              rt_dtype_name(V[i]->dt));
    }
    if (V[0]->rank != 4 || V[1]->rank != 4 || V[2]->rank != 4)
        return rt__ox_err(cv, MS_ENOTSUP, "2-D only: X, W and offset must be 4-D");
    int64_t k[2] = {V[1]->dim[2], V[1]->dim[3]}, s[2] = {1, 1}, d[2] = {1, 1}, p[4] = {0};
    if ((rt__ox_attr(n, "kernel_shape") && (rt__ox_attr_ints(n, "kernel_shape", k, 2) != 2 ||
                                            (V[1]->dim[2] >= 0 && k[0] != V[1]->dim[2]) ||
                                            (V[1]->dim[3] >= 0 && k[1] != V[1]->dim[3]))) ||
        (rt__ox_attr(n, "strides") && rt__ox_attr_ints(n, "strides", s, 2) != 2) ||
        (rt__ox_attr(n, "dilations") && rt__ox_attr_ints(n, "dilations", d, 2) != 2) ||
        (rt__ox_attr(n, "pads") && rt__ox_attr_ints(n, "pads", p, 4) != 4))
        return rt__ox_err(cv, MS_EINVAL,
                          "kernel_shape (W's), strides, dilations need 2 values, pads 4");
    int64_t grp = rt__ox_attr_i(n, "group", 1), og = rt__ox_attr_i(n, "offset_group", 1);
    if (grp < 1 || og < 1) return rt__ox_err(cv, MS_EINVAL, "group and offset_group must be >= 1");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxDeformConv", h);
    for (int i = 0; i < 5; i++)
        rt__tf_input(cv, nd, v[i]);
    rt__tf_attr_ilist(cv, nd, "strides", s, 2);
    rt__tf_attr_ilist(cv, nd, "pads", p, 4);
    rt__tf_attr_ilist(cv, nd, "dilations", d, 2);
    rt__tf_attr_i(cv, nd, "group", grp);
    rt__tf_attr_i(cv, nd, "offset_group", og);
    int64_t od[4] = {V[0]->dim[0], V[1]->dim[0], V[2]->dim[2], V[2]->dim[3]};
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, od, nd->name);
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } tab[] = {
    {"RoiAlign", op_roi_align}, {"MaxUnpool", op_max_unpool}, {"Col2Im", op_col2im},
    {"DeformConv", op_deform_conv},
};
/* clang-format on */

rt__ox_handler rt__ox_img_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(tab[i].op, op_type) == 0) return tab[i].fn;
    return NULL;
}
