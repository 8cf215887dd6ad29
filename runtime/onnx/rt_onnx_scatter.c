/* rt_onnx_scatter.c - ONNX ops converted to our own ops
 * (kernels/cpu/kn_cpu_onnx.c), where no TF op means what ONNX means:
 * GridSample (opsets 16-22) -> OnnxGridSample, ScatterND -> OnnxScatterND,
 * ScatterElements and its old name Scatter -> OnnxScatterElements (the
 * reductions of opsets 16 and 18 included), LpPool -> OnnxLpPool,
 * NonMaxSuppression -> OnnxNonMaxSuppression, DFT -> OnnxDFT,
 * CausalConvWithState -> OnnxCausalConvWithState, Unique -> OnnxUnique,
 * Det -> OnnxDet, ReverseSequence -> OnnxReverseSequence, TensorScatter ->
 * OnnxTensorScatter (kn_cpu_onnx_cache.c). A SavedModel written with
 * them runs in dcmserve only (docs/onnx.md).
 */
#include <string.h>

#include "rt_onnx_ext.h"

/* 1 when attribute key (default dflt) is one of the n names; *idx = its
 * position. */
static int pick(const Onnx__NodeProto *n, const char *key, const char *dflt,
                const char *const *names, int count, int *idx) {
    for (int i = 0; i < count; i++)
        if (names[i] && rt__ox_attr_is(n, key, names[i], dflt)) {
            *idx = i;
            return 1;
        }
    return 0;
}

static ms_status op_grid_sample(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *G;
    const char *x, *g, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &G, &g)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || G->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "X and grid must be float");
    int v20 = cv->opset >= 20, r = X->rank, nd = r - 2;
    /* Opset 16 names the modes bilinear / bicubic and is 4-D only; opset 20
     * renames them linear / cubic and allows any rank (we run 4-D, 5-D). */
    static const char *const m16[3] = {"nearest", "bilinear", "bicubic"};
    static const char *const m20[3] = {"nearest", "linear", "cubic"};
    static const char *const pads[3] = {"zeros", "border", "reflection"};
    int mode, pad;
    if (!pick(n, "mode", v20 ? "linear" : "bilinear", v20 ? m20 : m16, 3, &mode))
        return rt__ox_err(cv, MS_ENOTSUP, "opset %lld: mode must be one of %s, %s, %s",
                          (long long)cv->opset, (v20 ? m20 : m16)[0], (v20 ? m20 : m16)[1],
                          (v20 ? m20 : m16)[2]);
    if (!pick(n, "padding_mode", "zeros", pads, 3, &pad))
        return rt__ox_err(cv, MS_ENOTSUP, "padding_mode must be zeros, border or reflection");
    if (r != 4 && !(v20 && r == 5))
        return rt__ox_err(cv, MS_ENOTSUP, "opset %lld: X of rank %d is not supported (4%s)",
                          (long long)cv->opset, r, v20 ? " or 5" : "");
    if (mode == 2 && r != 4)
        return rt__ox_err(cv, MS_ENOTSUP, "cubic mode is supported for 4-D X only");
    if (G->rank != r || (G->dim[r - 1] >= 0 && G->dim[r - 1] != nd))
        return rt__ox_err(cv, MS_EINVAL, "grid must be (N, spatial..., %d)", nd);
    Tensorflow__NodeDef *nd_ = rt__tf_node(cv, "OnnxGridSample", h);
    rt__tf_input(cv, nd_, x);
    rt__tf_input(cv, nd_, g);
    rt__tf_attr_i(cv, nd_, "mode", mode);
    rt__tf_attr_i(cv, nd_, "padding", pad);
    rt__tf_attr_i(cv, nd_, "align_corners", rt__ox_attr_i(n, "align_corners", 0) != 0);
    int64_t od[OX_MAXR] = {X->dim[0], X->dim[1]};
    for (int k = 0; k < nd; k++)
        od[2 + k] = G->dim[1 + k];
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, nd_->name);
    return MS_OK;
}

/* ScatterND, ScatterElements, Scatter: the reduction in force at the
 * model's opset (none before 16, max / min from 18). */
static ms_status op_scatter(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *D, *I, *U;
    const char *d, *ix, *u, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &D, &d)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &I, &ix)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &U, &u)) != MS_OK)
        return st;
    static const char *const reds[5] = {"none", "add", "mul", "max", "min"};
    int red, nred = cv->opset >= 18 ? 5 : cv->opset >= 16 ? 3 : 1;
    if (!pick(n, "reduction", "none", reds, nred, &red))
        return rt__ox_err(cv, MS_ENOTSUP, "opset %lld: reduction must be one of none%s%s",
                          (long long)cv->opset, nred > 1 ? ", add, mul" : "",
                          nred > 3 ? ", max, min" : "");
    if (D->dt != RT_DT_FLOAT && D->dt != RT_DT_INT32 && D->dt != RT_DT_INT64 &&
        !(D->dt == RT_DT_BOOL && red == 0))
        return rt__ox_err(cv, MS_ENOTSUP, "data is %s; supported: float, int32, int64%s",
                          rt_dtype_name(D->dt), red == 0 ? ", bool" : "");
    if (U->dt != D->dt) return rt__ox_err(cv, MS_EINVAL, "updates and data differ in type");
    if (I->dt != RT_DT_INT32 && I->dt != RT_DT_INT64)
        return rt__ox_err(cv, MS_EINVAL, "indices must be int32 or int64");
    if (I->dt != RT_DT_INT64)
        ix = rt__tf_cast(cv, rt__ox_printf(cv, "%s/ix64", h), ix, I->dt, RT_DT_INT64);
    int nd = strcmp(n->op_type, "ScatterND") == 0;
    if (!nd && (I->rank != D->rank || rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), D->rank) < 0))
        return rt__ox_err(cv, MS_EINVAL, "indices must have data's rank; axis in range");
    Tensorflow__NodeDef *s = rt__tf_node(cv, nd ? "OnnxScatterND" : "OnnxScatterElements", h);
    rt__tf_input(cv, s, d);
    rt__tf_input(cv, s, ix);
    rt__tf_input(cv, s, u);
    rt__tf_attr_type(cv, s, "T", D->dt);
    rt__tf_attr_i(cv, s, "reduction", red);
    if (!nd) rt__tf_attr_i(cv, s, "axis", rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), D->rank));
    rt__ox_def_out(cv, n, 0, D->dt, D->rank, D->dim, s->name);
    return MS_OK;
}

/* The output length of a window of extent ext and stride s over in with
 * pads lo / hi; ceil_mode rounds up but drops a last window that would start
 * in the end padding (ONNX, as PyTorch; kn_cpu_onnx.c's OnnxPool agrees). */
static int64_t pool_out(int64_t in, int64_t lo, int64_t hi, int64_t ext, int64_t s, int ceil_mode) {
    int64_t span = in + lo + hi - ext;
    if (span < 0) return 0;
    if (!ceil_mode) return span / s + 1;
    int64_t o = (span + s - 1) / s + 1;
    if ((o - 1) * s >= in + lo) o--;
    return o;
}

/* LpPool (opsets 2-22), and MaxPool / AveragePool given dilations (any
 * opset): explicit pads from pads or auto_pad (SAME_* need static spatial
 * dims). LpPool -> OnnxLpPool (ceil_mode 0), the others -> OnnxPool with
 * mode, ceil_mode and count_include_pad; MaxPool's Indices output (also without
 * dilations) is OnnxPool's second: the flat index of each maximum in X (the
 * spatial dims in column-major order with storage_order 1). */
static ms_status op_lp_pool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int is_lp = strcmp(n->op_type, "LpPool") == 0, is_max = strcmp(n->op_type, "MaxPool") == 0;
    int r = X->rank, nd = r - 2;
    if (X->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_ENOTSUP, "X must be float");
    if (nd < 1 || nd > 3) return rt__ox_err(cv, MS_ENOTSUP, "1 to 3 spatial dims are supported");
    int indices = is_max && n->n_output > 1 && n->output[1] && n->output[1][0];
    int64_t order = rt__ox_attr_i(n, "storage_order", 0);
    if (order != 0 && order != 1) return rt__ox_err(cv, MS_EINVAL, "storage_order must be 0 or 1");
    int64_t k[3], s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pads[6] = {0}, od[OX_MAXR];
    if (rt__ox_attr_ints(n, "kernel_shape", k, 3) != nd)
        return rt__ox_err(cv, MS_EINVAL, "kernel_shape must have %d values", nd);
    if ((rt__ox_attr(n, "strides") && rt__ox_attr_ints(n, "strides", s, 3) != nd) ||
        (rt__ox_attr(n, "dilations") && rt__ox_attr_ints(n, "dilations", d, 3) != nd) ||
        (rt__ox_attr(n, "pads") && rt__ox_attr_ints(n, "pads", pads, 6) != 2 * nd))
        return rt__ox_err(cv, MS_EINVAL, "strides, dilations and pads must match kernel_shape");
    int64_t p = rt__ox_attr_i(n, "p", 2), ceil_mode = is_lp ? 0 : rt__ox_attr_i(n, "ceil_mode", 0);
    if (is_lp && (p < 1 || p > 64)) return rt__ox_err(cv, MS_ENOTSUP, "p must be 1 to 64");
    int same = rt__ox_attr_is(n, "auto_pad", "SAME_UPPER", "NOTSET") ||
               rt__ox_attr_is(n, "auto_pad", "SAME_LOWER", "NOTSET");
    int valid = rt__ox_attr_is(n, "auto_pad", "VALID", "NOTSET");
    if (!same && !valid && !rt__ox_attr_is(n, "auto_pad", "NOTSET", "NOTSET"))
        return rt__ox_err(cv, MS_ENOTSUP,
                          "auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    if (same && ceil_mode)
        return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME_* with ceil_mode 1 is not supported");
    od[0] = X->dim[0], od[1] = X->dim[1];
    for (int i = 0; i < nd; i++) {
        int64_t in = X->dim[2 + i], ext = (k[i] - 1) * d[i] + 1;
        if (k[i] < 1 || k[i] > OX_WIN_MAX || s[i] < 1 || s[i] > OX_WIN_MAX || d[i] < 1 ||
            d[i] > OX_WIN_MAX || pads[i] < 0 || pads[i] > OX_WIN_MAX || pads[nd + i] < 0 ||
            pads[nd + i] > OX_WIN_MAX)
            return rt__ox_err(cv, MS_EINVAL, "kernel_shape, strides, dilations, pads out of range");
        if (valid) pads[i] = pads[nd + i] = 0;
        if (same) {
            if (in < 0)
                return rt__ox_err(cv, MS_ENOTSUP, "auto_pad SAME_* needs static spatial dims");
            int64_t o = (in + s[i] - 1) / s[i], tot = (o - 1) * s[i] + ext - in;
            if (tot < 0) tot = 0;
            int upper = rt__ox_attr_is(n, "auto_pad", "SAME_UPPER", "NOTSET");
            pads[i] = upper ? tot / 2 : tot - tot / 2;
            pads[nd + i] = tot - pads[i];
        }
        od[2 + i] = in < 0 ? -1 : pool_out(in, pads[i], pads[nd + i], ext, s[i], (int)ceil_mode);
        if (in >= 0 && od[2 + i] < 1)
            return rt__ox_err(cv, MS_EINVAL, "the window does not fit spatial dim %d", i);
    }
    Tensorflow__NodeDef *lp = rt__tf_node(cv, is_lp ? "OnnxLpPool" : "OnnxPool", h);
    rt__tf_input(cv, lp, x);
    rt__tf_attr_ilist(cv, lp, "ksize", k, nd);
    rt__tf_attr_ilist(cv, lp, "strides", s, nd);
    rt__tf_attr_ilist(cv, lp, "dilations", d, nd);
    rt__tf_attr_ilist(cv, lp, "pads", pads, 2 * nd);
    if (is_lp) {
        rt__tf_attr_i(cv, lp, "p", p);
    } else {
        rt__tf_attr_i(cv, lp, "mode", is_max ? 1 : 2);
        rt__tf_attr_i(cv, lp, "ceil_mode", ceil_mode != 0);
        rt__tf_attr_i(cv, lp, "count_include_pad", rt__ox_attr_i(n, "count_include_pad", 0) != 0);
        if (indices) rt__tf_attr_i(cv, lp, "storage_order", order);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, lp->name);
    if (indices) rt__ox_def_out(cv, n, 1, RT_DT_INT64, r, od, rt__tf_out(cv, lp, 1));
    return MS_OK;
}

ms_status rt__ox_op_window_pool(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    return op_lp_pool(cv, n);
}

/* NonMaxSuppression (10, 11): the optional scalars as constants when
 * absent (no boxes, IoU 0, no score threshold). */
static ms_status op_nms(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *B, *S, *V[3];
    const char *b, *s, *v[3], *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &B, &b)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, &s)) != MS_OK)
        return st;
    if (B->dt != RT_DT_FLOAT || S->dt != RT_DT_FLOAT || B->rank != 3 || S->rank != 3)
        return rt__ox_err(cv, MS_EINVAL, "boxes and scores must be float (B, N, 4), (B, C, N)");
    int64_t c = rt__ox_attr_i(n, "center_point_box", 0);
    if (c != 0 && c != 1) return rt__ox_err(cv, MS_EINVAL, "center_point_box must be 0 or 1");
    static const char *const what[3] = {"max_output_boxes_per_class", "iou_threshold",
                                        "score_threshold"};
    for (int i = 0; i < 3; i++) {
        V[i] = rt__ox_in(cv, n, 2 + i);
        rt_dtype want = i == 0 ? RT_DT_INT64 : RT_DT_FLOAT;
        if (V[i] == NULL) {
            int64_t zero = 0;
            v[i] = i == 0 ? rt__tf_const_int(cv, rt__ox_printf(cv, "%s/%s", h, what[i]),
                                             RT_DT_INT64, 0, NULL, &zero)
                          : rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/%s", h, what[i]), 0);
            continue;
        }
        if ((st = rt__ox_need(cv, n, 2 + i, &V[i], &v[i])) != MS_OK) return st;
        if (V[i]->dt != want || (V[i]->rank >= 0 && rt__ox_nelem(V[i]) > 1))
            return rt__ox_err(cv, MS_EINVAL, "%s must be one %s", what[i], rt_dtype_name(want));
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxNonMaxSuppression", h);
    rt__tf_input(cv, nd, b);
    rt__tf_input(cv, nd, s);
    for (int i = 0; i < 3; i++)
        rt__tf_input(cv, nd, v[i]);
    rt__tf_attr_i(cv, nd, "center_point_box", c);
    rt__tf_attr_i(cv, nd, "use_score_threshold", V[2] != NULL);
    int64_t od[2] = {-1, 3};
    rt__ox_def_out(cv, n, 0, RT_DT_INT64, 2, od, nd->name);
    return MS_OK;
}

/* DFT (17: axis attribute; 20: axis input, a constant). */
static ms_status op_dft(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *L = rt__ox_in(cv, n, 1), *A = rt__ox_in(cv, n, 2);
    const char *x, *l, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int r = X->rank;
    if (X->dt != RT_DT_FLOAT || r < 2 || (X->dim[r - 1] != 1 && X->dim[r - 1] != 2))
        return rt__ox_err(cv, MS_EINVAL, "the signal must be float (..., 1 or 2)");
    int64_t axis;
    const char *a = NULL; /* a run-time axis (opset 20) */
    if (cv->opset >= 20) {
        if (rt__ox_attr(n, "axis"))
            return rt__ox_err(cv, MS_EINVAL, "opset %lld: axis is an input", (long long)cv->opset);
        axis = -2;
        if (A && A->iv && rt__ox_is_const(A) && rt__ox_nelem(A) == 1) {
            axis = A->iv[0];
        } else if (A) {
            if ((st = rt__ox_need(cv, n, 2, &A, &a)) != MS_OK) return st;
            if ((A->dt != RT_DT_INT64 && A->dt != RT_DT_INT32) || rt__ox_nelem(A) != 1)
                return rt__ox_err(cv, MS_EINVAL, "axis must be one integer");
            if (A->dt != RT_DT_INT64)
                a = rt__tf_cast(cv, rt__ox_printf(cv, "%s/axis64", h), a, A->dt, RT_DT_INT64);
        }
    } else {
        axis = rt__ox_attr_i(n, "axis", 1);
    }
    if (axis < 0) axis += r;
    if (!a && (axis < 0 || axis > r - 2)) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    if (rt__ox_attr_i(n, "inverse", 0) != 0 && rt__ox_attr_i(n, "onesided", 0) == 0)
        /* The conformance suite's reference values carry float32 FFT rounding
         * (1e-7 where 0 is exact) that an exact inverse cannot reproduce
         * within ONNX's tolerance; refused until judged otherwise. */
        return rt__ox_err(cv, MS_ENOTSUP, "inverse=1 with onesided=0 is not supported");
    int64_t len = -1;
    if (L) {
        if ((st = rt__ox_need(cv, n, 1, &L, &l)) != MS_OK) return st;
        if ((L->dt != RT_DT_INT64 && L->dt != RT_DT_INT32) || rt__ox_nelem(L) != 1)
            return rt__ox_err(cv, MS_EINVAL, "dft_length must be one integer");
        if (L->dt != RT_DT_INT64)
            l = rt__tf_cast(cv, rt__ox_printf(cv, "%s/len64", h), l, L->dt, RT_DT_INT64);
        if (L->rank > 0)
            l = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/len_s", h), l, RT_DT_INT64, 0, NULL);
        if (L->iv && rt__ox_is_const(L)) len = L->iv[0];
    } else {
        l = rt__tf_const_int(cv, rt__ox_printf(cv, "%s/no_len", h), RT_DT_INT64, 0, NULL, &len);
    }
    int inv = rt__ox_attr_i(n, "inverse", 0) != 0, one = rt__ox_attr_i(n, "onesided", 0) != 0;
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxDFT", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, l);
    if (a) rt__tf_input(cv, d, a);
    rt__tf_attr_i(cv, d, "axis", a ? 0 : axis);
    rt__tf_attr_i(cv, d, "inverse", inv);
    rt__tf_attr_i(cv, d, "onesided", one);
    int64_t od[OX_MAXR], m = a ? -1 : X->dim[axis];
    memcpy(od, X->dim, sizeof od);
    if (a)
        for (int i = 0; i < r - 1; i++)
            od[i] = -1; /* which dim changes is known at run time only */
    int64_t N = L ? len : inv && one ? (m < 0 ? -1 : 2 * (m - 1)) : m;
    if (!a) od[axis] = N < 0 ? -1 : inv && one ? N : one ? N / 2 + 1 : N;
    od[r - 1] = inv && one ? 1 : 2;
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, d->name);
    return MS_OK;
}

/* CausalConvWithState (27): depthwise causal 1-D convolution carrying its
 * last K - 1 input steps; absent bias and past state become zeros. */
static ms_status op_causal_conv(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *W, *B = rt__ox_in(cv, n, 2), *P = rt__ox_in(cv, n, 3);
    const char *x, *w, *b, *p, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &W, &w)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || W->dt != RT_DT_FLOAT || X->rank != 3 || W->rank != 3)
        return rt__ox_err(cv, MS_ENOTSUP, "input and weight must be float (B, C, L), (C, 1, K)");
    int64_t C = X->dim[1], K = W->dim[2];
    if (C < 0 || K < 1 || K > OX_WIN_MAX || W->dim[0] != C || W->dim[1] != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "static channels, weight (C, 1, K) (depthwise)");
    int act;
    if (rt__ox_attr_is(n, "activation", "none", "none"))
        act = 0;
    else if (rt__ox_attr_is(n, "activation", "silu", "none") ||
             rt__ox_attr_is(n, "activation", "swish", "none"))
        act = 1;
    else
        return rt__ox_err(cv, MS_ENOTSUP, "activation must be none, silu or swish");
    if (B) {
        if ((st = rt__ox_need(cv, n, 2, &B, &b)) != MS_OK) return st;
        if (B->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_EINVAL, "bias must be float");
    } else {
        float *z = rt__ox_alloc(cv, (size_t)(C + 1) * sizeof(float));
        b = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/bias", h), 1, &C, z);
    }
    if (P) {
        if ((st = rt__ox_need(cv, n, 3, &P, &p)) != MS_OK) return st;
        if (P->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_EINVAL, "past_state must be float");
    } else {
        /* zeros (B, C, K - 1) of the run-time batch */
        Tensorflow__NodeDef *sh = rt__tf_node(cv, "Shape", rt__ox_printf(cv, "%s/in_shape", h));
        rt__tf_input(cv, sh, x);
        rt__tf_attr_type(cv, sh, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, sh, "out_type", RT_DT_INT64);
        int64_t one = 1, zero = 0, km1[2] = {C, K - 1}, two = 2;
        Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/batch", h));
        rt__tf_input(cv, sl, sh->name);
        rt__tf_input(
            cv, sl,
            rt__tf_const_int(cv, rt__ox_printf(cv, "%s/b0", h), RT_DT_INT64, 1, &one, &zero));
        rt__tf_input(
            cv, sl,
            rt__tf_const_int(cv, rt__ox_printf(cv, "%s/b1", h), RT_DT_INT64, 1, &one, &one));
        rt__tf_attr_type(cv, sl, "T", RT_DT_INT64);
        rt__tf_attr_type(cv, sl, "Index", RT_DT_INT64);
        Tensorflow__NodeDef *cc =
            rt__tf_node(cv, "ConcatV2", rt__ox_printf(cv, "%s/past_shape", h));
        rt__tf_input(cv, cc, sl->name);
        rt__tf_input(
            cv, cc, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/ck", h), RT_DT_INT64, 1, &two, km1));
        rt__tf_input(cv, cc, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", cc->name), 0));
        rt__tf_attr_i(cv, cc, "N", 2);
        rt__tf_attr_type(cv, cc, "T", RT_DT_INT64);
        rt__tf_attr_type(cv, cc, "Tidx", RT_DT_INT32);
        p = rt__ox_fill(cv, rt__ox_printf(cv, "%s/past", h), cc->name, RT_DT_INT64, RT_DT_FLOAT, 0);
    }
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxCausalConvWithState", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, w);
    rt__tf_input(cv, d, b);
    rt__tf_input(cv, d, p);
    rt__tf_attr_i(cv, d, "activation", act);
    int64_t ps[3] = {X->dim[0], C, K - 1};
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 3, X->dim, rt__tf_out(cv, d, 0));
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, 3, ps, rt__tf_out(cv, d, 1));
    return MS_OK;
}

/* Unique (11): all four outputs from one OnnxUnique node. */
static ms_status op_unique(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (X->dt != RT_DT_FLOAT && X->dt != RT_DT_INT32 && X->dt != RT_DT_INT64 && X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "X is %s; supported: float, int32, int64, bool",
                          rt_dtype_name(X->dt));
    int has_axis = rt__ox_attr(n, "axis") != NULL, axis = 0;
    if (has_axis) {
        axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), X->rank);
        if (axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    }
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxUnique", h);
    rt__tf_input(cv, d, x);
    rt__tf_attr_i(cv, d, "has_axis", has_axis);
    rt__tf_attr_i(cv, d, "axis", axis);
    rt__tf_attr_i(cv, d, "sorted", rt__ox_attr_i(n, "sorted", 1) != 0);
    int64_t yd[OX_MAXR], u = -1, all = has_axis ? X->dim[axis] : rt__ox_nelem(X);
    memcpy(yd, X->dim, sizeof yd);
    yd[axis] = -1;
    rt__ox_def_out(cv, n, 0, X->dt, has_axis ? X->rank : 1, has_axis ? yd : &u,
                   rt__tf_out(cv, d, 0));
    rt__ox_def_out(cv, n, 1, RT_DT_INT64, 1, &u, rt__tf_out(cv, d, 1));
    rt__ox_def_out(cv, n, 2, RT_DT_INT64, 1, &all, rt__tf_out(cv, d, 2));
    rt__ox_def_out(cv, n, 3, RT_DT_INT64, 1, &u, rt__tf_out(cv, d, 3));
    return MS_OK;
}

/* Det (11-22) -> OnnxDet; ReverseSequence (10) -> OnnxReverseSequence. */
static ms_status op_det_revseq(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (strcmp(n->op_type, "Det") == 0) {
        if (X->dt != RT_DT_FLOAT || X->rank < 2)
            return rt__ox_err(cv, MS_ENOTSUP, "X must be float (..., M, M)");
        Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxDet", h);
        rt__tf_input(cv, d, x);
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank - 2, X->dim, d->name);
        return MS_OK;
    }
    rt__ox_value *L;
    const char *l;
    if ((st = rt__ox_need(cv, n, 1, &L, &l)) != MS_OK) return st;
    int64_t ba = rt__ox_attr_i(n, "batch_axis", 1), ta = rt__ox_attr_i(n, "time_axis", 0);
    if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)) || X->rank < 2)
        return rt__ox_err(cv, MS_EINVAL, "batch_axis and time_axis must be 0 and 1, rank >= 2");
    if (X->dt != RT_DT_FLOAT && X->dt != RT_DT_INT32 && X->dt != RT_DT_INT64 && X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "input is %s; supported: float, int32, int64, bool",
                          rt_dtype_name(X->dt));
    if (L->dt != RT_DT_INT64 && L->dt != RT_DT_INT32)
        return rt__ox_err(cv, MS_EINVAL, "sequence_lens must be int32 or int64");
    if (L->dt != RT_DT_INT64)
        l = rt__tf_cast(cv, rt__ox_printf(cv, "%s/lens64", h), l, L->dt, RT_DT_INT64);
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxReverseSequence", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, l);
    rt__tf_attr_i(cv, d, "batch_axis", ba);
    rt__tf_attr_i(cv, d, "time_axis", ta);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, d->name);
    return MS_OK;
}

/* One Einsum term: its labels (letters, '.' for the ellipsis), at most
 * OX_MAXR of them. Returns the count, or -1 if malformed. */
static int einsum_term(const char *t, size_t len, char *lab) {
    int n = 0, ell = 0;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c == '.') {
            if (ell || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.') return -1;
            ell = 1, i += 2, c = '.';
        } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            return -1;
        }
        if (n >= OX_MAXR) return -1;
        lab[n++] = c;
    }
    return n;
}

/* Einsum (12): TF's Einsum (float, double; one or two inputs), the equation
 * without spaces; the output shape as numpy's einsum gives it (labels of
 * equal size, ellipsis axes broadcast). */
static ms_status op_einsum(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, "equation");
    if (a == NULL) return rt__ox_err(cv, MS_EINVAL, "attribute \"equation\" is missing");
    if (a->s.len > 4096) return rt__ox_err(cv, MS_EINVAL, "the equation is too long");
    char eq[4097];
    size_t len = 0;
    for (size_t i = 0; i < a->s.len; i++)
        if (a->s.data[i] != ' ') eq[len++] = (char)a->s.data[i];
    eq[len] = 0;
    size_t nin = n->n_input;
    if (nin < 1 || nin > 2)
        return rt__ox_err(cv, MS_ENOTSUP, "Einsum of %zu inputs is not supported (1 or 2)", nin);
    const char *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
    size_t lhs = arrow ? (size_t)(arrow - eq) : len;
    if ((comma != NULL && (size_t)(comma - eq) < lhs) != (nin == 2) ||
        (comma != NULL && strchr(comma + 1, ',') != NULL))
        return rt__ox_err(cv, MS_EINVAL, "the equation does not name %zu inputs", nin);
    rt__ox_value *X[2];
    const char *x[2];
    char lab[3][OX_MAXR];
    int nl[3];
    int64_t ldim[128], ell[OX_MAXR];
    int lcount[128] = {0}, nell = 0;
    for (int c = 0; c < 128; c++)
        ldim[c] = -2;
    for (int k = 0; k < OX_MAXR; k++)
        ell[k] = 1;
    for (size_t i = 0; i < nin; i++) {
        ms_status st = rt__ox_need(cv, n, (int)i, &X[i], &x[i]);
        if (st != MS_OK) return st;
        if ((X[i]->dt != RT_DT_FLOAT && X[i]->dt != RT_DT_DOUBLE) || X[i]->dt != X[0]->dt)
            return rt__ox_err(cv, MS_ENOTSUP, "inputs must be both float or both double");
        if (X[i]->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input ranks must be known");
        size_t b = i == 0 ? 0 : (size_t)(comma - eq) + 1, e = i == 0 && nin == 2 ? (size_t)(comma - eq) : lhs;
        nl[i] = einsum_term(eq + b, e - b, lab[i]);
        if (nl[i] < 0) return rt__ox_err(cv, MS_EINVAL, "input term %zu is malformed", i);
        int has_ell = memchr(lab[i], '.', (size_t)nl[i]) != NULL, ne = X[i]->rank - (nl[i] - has_ell);
        if (ne < 0 || (!has_ell && ne != 0))
            return rt__ox_err(cv, MS_EINVAL, "input %zu has rank %d, its term %d labels", i,
                              X[i]->rank, nl[i]);
        for (int j = 0, ax = 0; j < nl[i]; j++) {
            if (lab[i][j] == '.') {
                /* right-aligned broadcast of the ellipsis axes (ell counts
                 * from the last axis) */
                for (int k = 0; k < ne; k++) {
                    int64_t dv = X[i]->dim[ax + k], *ev = &ell[ne - 1 - k];
                    if (*ev == 1 || *ev == -1) {
                        if (!(*ev == -1 && dv == 1)) *ev = dv;
                    } else if (dv != 1 && dv != -1 && dv != *ev) {
                        return rt__ox_err(cv, MS_EINVAL, "the ellipsis axes do not broadcast");
                    }
                }
                if (ne > nell) nell = ne;
                ax += ne;
                continue;
            }
            int c = (unsigned char)lab[i][j];
            int64_t dv = X[i]->dim[ax++];
            lcount[c]++;
            if (ldim[c] == -2 || ldim[c] == -1) ldim[c] = dv;
            else if (dv != -1 && dv != ldim[c])
                return rt__ox_err(cv, MS_EINVAL, "label '%c' has sizes %lld and %lld", c,
                                  (long long)ldim[c], (long long)dv);
        }
    }
    int64_t od[OX_MAXR];
    int r = 0;
    if (arrow) {
        nl[2] = einsum_term(arrow + 2, len - lhs - 2, lab[2]);
        if (nl[2] < 0) return rt__ox_err(cv, MS_EINVAL, "the output term is malformed");
        for (int j = 0; j < nl[2]; j++) {
            int c = (unsigned char)lab[2][j];
            if (c == '.') {
                if (r + nell > OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "output rank too large");
                for (int k = nell - 1; k >= 0; k--)
                    od[r++] = ell[k];
            } else {
                if (ldim[c] == -2 || memchr(lab[2], c, (size_t)j) != NULL)
                    return rt__ox_err(cv, MS_EINVAL, "output label '%c' is not an input's or repeats", c);
                if (r >= OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "output rank too large");
                od[r++] = ldim[c];
            }
        }
    } else {
        for (int k = nell - 1; k >= 0; k--)
            od[r++] = ell[k];
        for (int c = 0; c < 128; c++)
            if (lcount[c] == 1) {
                if (r >= OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "output rank too large");
                od[r++] = ldim[c];
            }
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Einsum", rt__ox_hint_of(n));
    for (size_t i = 0; i < nin; i++)
        rt__tf_input(cv, nd, x[i]);
    rt__tf_attr_s(cv, nd, "equation", eq);
    rt__tf_attr_i(cv, nd, "N", (int64_t)nin);
    rt__tf_attr_type(cv, nd, "T", X[0]->dt);
    rt__ox_def_out(cv, n, 0, X[0]->dt, r, od, nd->name);
    return MS_OK;
}

/* TensorScatter (24) -> OnnxTensorScatter (kernels/cpu/kn_cpu_onnx_cache.c):
 * a KV cache's write of update at write_indices (absent: 0) along axis,
 * linear or circular. */
static ms_status op_tensor_scatter(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *P, *U, *W = rt__ox_in(cv, n, 2);
    const char *p, *u, *w = NULL, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &P, &p)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &U, &u)) != MS_OK)
        return st;
    if (W && (st = rt__ox_need(cv, n, 2, &W, &w)) != MS_OK) return st;
    int r = P->rank;
    int64_t axis = rt__ox_attr_i(n, "axis", -2);
    if (axis < 0) axis += r;
    if (r < 2 || axis < 1 || axis >= r || U->rank != r || U->dt != P->dt)
        return rt__ox_err(cv, MS_EINVAL,
                          "past_cache and update must have one type and rank >= 2, axis in "
                          "1..rank-1 (dim 0 is the batch)");
    if (W && W->dt != RT_DT_INT64) return rt__ox_err(cv, MS_EINVAL, "write_indices must be int64");
    int mode = 0;
    static const char *const modes[] = {"linear", "circular"};
    if (!pick(n, "mode", "linear", modes, 2, &mode))
        return rt__ox_err(cv, MS_ENOTSUP, "mode must be linear or circular");
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxTensorScatter", h);
    rt__tf_input(cv, d, p);
    rt__tf_input(cv, d, u);
    if (w) rt__tf_input(cv, d, w);
    rt__tf_attr_i(cv, d, "has_indices", w != NULL);
    rt__tf_attr_i(cv, d, "axis", axis);
    rt__tf_attr_i(cv, d, "mode", mode);
    rt__ox_def_out(cv, n, 0, P->dt, r, P->dim, d->name);
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } tab[] = {
    {"TensorScatter", op_tensor_scatter},
    {"GridSample", op_grid_sample}, {"ScatterND", op_scatter},
    {"ScatterElements", op_scatter}, {"Scatter", op_scatter}, {"LpPool", op_lp_pool},
    {"NonMaxSuppression", op_nms}, {"DFT", op_dft},
    {"CausalConvWithState", op_causal_conv}, {"Unique", op_unique},
    {"Det", op_det_revseq}, {"ReverseSequence", op_det_revseq}, {"Einsum", op_einsum},
};
/* clang-format on */

rt__ox_handler rt__ox_scatter_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(tab[i].op, op_type) == 0) return tab[i].fn;
    return NULL;
}
