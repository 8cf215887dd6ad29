/* rt_onnx_loss.c - NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (opsets 12-22) as chains of TF ops.
 *
 * For input X (N, C, d1..dk) and target t (N, d1..dk):
 *   loss[n, d] = -X[n, t[n, d], d] * w[t[n, d]]
 * with w = 1 without weights and w = 0 where t equals ignore_index. The
 * picked element comes from a Select over the class axis against a constant
 * 0..C-1 row (no arithmetic with the unpicked classes, so infinite
 * log-probabilities elsewhere cannot turn into NaN), and so does the weight.
 * reduction: "none" keeps loss, "sum" adds it up, "mean" divides the sum by
 * the sum of the applied weights (the count of targets not ignored without
 * weights), as the operator's definition says.
 * SoftmaxCrossEntropyLoss is the same on LogSoftmax(X) over axis 1, which is
 * also its optional second output.
 */
#include <math.h>
#include <string.h>

#include "rt_onnx_ext.h"

/* The loss of log-probabilities x (ONNX value X) against input 1 and the
 * optional weights of input 2, defined as output 0. */
static ms_status nll(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *X,
                     const char *x) {
    rt__ox_value *T, *W = rt__ox_in(cv, n, 2);
    const char *t, *w = NULL, *h = rt__ox_hint_of(n);
    ms_status st;
    int red;
    if (rt__ox_attr_is(n, "reduction", "none", "mean"))
        red = 0;
    else if (rt__ox_attr_is(n, "reduction", "sum", "mean"))
        red = 1;
    else if (rt__ox_attr_is(n, "reduction", "mean", "mean"))
        red = 2;
    else
        return rt__ox_err(cv, MS_ENOTSUP, "reduction must be \"none\", \"sum\" or \"mean\"");
    if ((st = rt__ox_need(cv, n, 1, &T, &t)) != MS_OK) return st;
    if (X->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_ENOTSUP, "the input must be float");
    if (T->dt != RT_DT_INT32 && T->dt != RT_DT_INT64)
        return rt__ox_err(cv, MS_EINVAL, "the target must be int32 or int64");
    int r = X->rank;
    if (r < 2 || T->rank != r - 1)
        return rt__ox_err(cv, MS_EINVAL, "the input must be (N, C, ...) and the target (N, ...)");
    int64_t C = X->dim[1];
    if (C < 0 || C > OX_DIM_MAX)
        return rt__ox_err(cv, MS_ENOTSUP, "the class count (dim 1) must be static");
    if (W) {
        if ((st = rt__ox_need(cv, n, 2, &W, &w)) != MS_OK) return st;
        if (W->dt != RT_DT_FLOAT || W->rank != 1 || (W->dim[0] >= 0 && W->dim[0] != C))
            return rt__ox_err(cv, MS_EINVAL, "the weights must be float of shape (C)");
    }
    if (T->dt != RT_DT_INT64)
        t = rt__tf_cast(cv, rt__ox_printf(cv, "%s/target64", h), t, T->dt, RT_DT_INT64);

    /* hit[n, c, d] = (t[n, d] == c) */
    int64_t bd[OX_MAXR], *cls = rt__ox_alloc(cv, (size_t)(C + 1) * sizeof(int64_t));
    for (int i = 0; i < r; i++)
        bd[i] = i == 1 ? C : 1;
    for (int64_t c = 0; c < C; c++)
        cls[c] = c;
    const char *row =
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/classes", h), RT_DT_INT64, r, bd, cls);
    Tensorflow__NodeDef *ed = rt__tf_node(cv, "ExpandDims", rt__ox_printf(cv, "%s/t_c", h));
    rt__tf_input(cv, ed, t);
    rt__tf_input(cv, ed, rt__tf_i32(cv, rt__ox_printf(cv, "%s/one", h), 1));
    rt__tf_attr_type(cv, ed, "T", RT_DT_INT64);
    rt__tf_attr_type(cv, ed, "Tdim", RT_DT_INT32);
    const char *hit =
        rt__tf_binary(cv, "Equal", rt__ox_printf(cv, "%s/hit", h), ed->name, row, RT_DT_INT64);
    const char *zero = rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/zero", h), 0.0f);
    int64_t one = 1;
    const char *pick =
        rt__tf_select(cv, rt__ox_printf(cv, "%s/pick_sel", h), hit, x, zero, RT_DT_FLOAT);
    pick =
        rt__ox_reduce(cv, "Sum", rt__ox_printf(cv, "%s/picked", h), pick, RT_DT_FLOAT, &one, 1, 0);
    const char *wt = NULL;
    if (w) {
        w = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/w_c", h), w, RT_DT_FLOAT, r, bd);
        wt = rt__tf_select(cv, rt__ox_printf(cv, "%s/w_sel", h), hit, w, zero, RT_DT_FLOAT);
        wt = rt__ox_reduce(cv, "Sum", rt__ox_printf(cv, "%s/w_t", h), wt, RT_DT_FLOAT, &one, 1, 0);
    }
    if (rt__ox_attr(n, "ignore_index")) {
        int64_t ii = rt__ox_attr_i(n, "ignore_index", 0);
        const char *keep = rt__tf_binary(
            cv, "NotEqual", rt__ox_printf(cv, "%s/kept", h), t,
            rt__tf_const_int(cv, rt__ox_printf(cv, "%s/ii", h), RT_DT_INT64, 0, NULL, &ii),
            RT_DT_INT64);
        wt = wt ? rt__tf_select(cv, rt__ox_printf(cv, "%s/w_kept", h), keep, wt, zero, RT_DT_FLOAT)
                : rt__tf_cast(cv, rt__ox_printf(cv, "%s/w_kept", h), keep, RT_DT_BOOL, RT_DT_FLOAT);
    }
    const char *loss = rt__tf_unary(cv, "Neg", rt__ox_printf(cv, "%s/neg", h), pick, RT_DT_FLOAT);
    if (wt)
        loss = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/weighted", h), loss, wt, RT_DT_FLOAT);
    if (red == 0) {
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r - 1, T->dim,
                       rt__tf_unary(cv, "Identity", h, loss, RT_DT_FLOAT));
        return MS_OK;
    }
    int64_t ax[OX_MAXR];
    for (int i = 0; i < r - 1; i++)
        ax[i] = i;
    const char *y;
    if (red == 1 || wt) {
        y = rt__ox_reduce(cv, "Sum", red == 1 ? h : rt__ox_printf(cv, "%s/sum", h), loss,
                          RT_DT_FLOAT, ax, r - 1, 0);
        if (red == 2)
            y = rt__tf_binary(cv, "RealDiv", h, y,
                              rt__ox_reduce(cv, "Sum", rt__ox_printf(cv, "%s/w_sum", h), wt,
                                            RT_DT_FLOAT, ax, r - 1, 0),
                              RT_DT_FLOAT);
    } else {
        y = rt__ox_reduce(cv, "Mean", h, loss, RT_DT_FLOAT, ax, r - 1, 0);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 0, NULL, y);
    return MS_OK;
}

ms_status rt__ox_op_nll_loss(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x;
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    return nll(cv, n, X, x);
}

ms_status rt__ox_op_sce_loss(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int r = X->rank;
    if (X->dt != RT_DT_FLOAT) return rt__ox_err(cv, MS_ENOTSUP, "the scores must be float");
    if (r < 2) return rt__ox_err(cv, MS_EINVAL, "the scores must be (N, C, ...)");
    /* TF's LogSoftmax works on the last axis: move C there and back. */
    int64_t to[OX_MAXR], back[OX_MAXR];
    for (int i = 0; i < r; i++) {
        to[i] = i == r - 1 ? 1 : i == 0 ? 0 : i + 1;
        back[i] = i == 0 ? 0 : i == 1 ? r - 1 : i - 1;
    }
    const char *lp = x;
    if (r > 2) lp = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/c_last", h), lp, RT_DT_FLOAT, r, to);
    lp = rt__tf_unary(cv, "LogSoftmax", rt__ox_printf(cv, "%s/log_softmax", h), lp, RT_DT_FLOAT);
    if (r > 2)
        lp = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/log_prob", h), lp, RT_DT_FLOAT, r, back);
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, r, X->dim, lp);
    return nll(cv, n, X, lp); /* X for its type and shape only */
}
