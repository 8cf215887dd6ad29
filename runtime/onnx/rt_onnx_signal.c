/* rt_onnx_signal.c - ONNX's signal-processing ops besides DFT
 * (rt_onnx_scatter.c): STFT (17) -> OnnxSTFT (kernels/cpu/kn_cpu_fft.c),
 * MelWeightMatrix (17) -> OnnxMelWeightMatrix (kernels/cpu/kn_cpu_onnx_signal.c).
 */
#include <string.h>

#include "rt_onnx_ext.h"

/* Largest constant either op builds (frame indices, weight matrix): far
 * above a real model's (a minute of 16 kHz audio in 10 ms hops of 25 ms is
 * 2.4M frame indices), low enough that a hostile file cannot make the
 * importer allocate gigabytes. */
#define SIG_CONST_MAX ((int64_t)1 << 24)

/* STFT (17) -> OnnxSTFT (kernels/cpu/kn_cpu_fft.c): signal (B, L, 1 or
 * 2) float, frame_step, optional window (W) float and frame_length, all
 * read at run time -> (B, F, K, 2), F = (L - W) / step + 1 frames of W
 * samples times the window through a W-point DFT (K = W / 2 + 1 when
 * onesided). W is frame_length, else the window's length, else L (one
 * frame, as ONNX's reference runs it). */
ms_status rt__ox_op_stft(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *S, *Win = rt__ox_in(cv, n, 2), *Len = rt__ox_in(cv, n, 3);
    const char *x, *stp, *win = NULL, *len = NULL, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, &stp)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || X->rank != 3 || (X->dim[2] != 1 && X->dim[2] != 2))
        return rt__ox_err(cv, MS_ENOTSUP, "the signal must be float (batch, length, 1 or 2), got %s",
                          rt_dtype_name(X->dt));
    int one = rt__ox_attr_i(n, "onesided", 1) != 0;
    if (one && X->dim[2] == 2)
        return rt__ox_err(cv, MS_EINVAL, "onesided=1 needs a real signal (its last dim 1)");
    if (S->dt != RT_DT_INT32 && S->dt != RT_DT_INT64)
        return rt__ox_err(cv, MS_EINVAL, "frame_step must be int32 or int64");
    if (Win) {
        if ((st = rt__ox_need(cv, n, 2, &Win, &win)) != MS_OK) return st;
        if (Win->dt != RT_DT_FLOAT || Win->rank != 1)
            return rt__ox_err(cv, MS_ENOTSUP, "the window must be float and 1-D");
    }
    if (Len) {
        if ((st = rt__ox_need(cv, n, 3, &Len, &len)) != MS_OK) return st;
        if (Len->dt != RT_DT_INT32 && Len->dt != RT_DT_INT64)
            return rt__ox_err(cv, MS_EINVAL, "frame_length must be int32 or int64");
    }
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxSTFT", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, stp);
    if (win) rt__tf_input(cv, d, win);
    if (len) rt__tf_input(cv, d, len);
    rt__tf_attr_i(cv, d, "has_window", win != NULL);
    rt__tf_attr_i(cv, d, "has_length", len != NULL);
    rt__tf_attr_i(cv, d, "onesided", one);
    /* Known at import when the lengths are constants. */
    int64_t W = Len && Len->iv && rt__ox_is_const(Len) && rt__ox_nelem(Len) == 1 ? Len->iv[0]
                : Win && Win->dim[0] >= 0                                        ? Win->dim[0]
                : !Len && !Win                                                   ? X->dim[1]
                                                                                 : -1;
    int64_t step = S->iv && rt__ox_is_const(S) && rt__ox_nelem(S) == 1 ? S->iv[0] : -1, L = X->dim[1];
    int64_t F = W >= 1 && step >= 1 && L >= W ? (L - W) / step + 1 : -1;
    int64_t od[4] = {X->dim[0], F, W < 1 ? -1 : one ? W / 2 + 1 : W, 2};
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, od, d->name);
    return MS_OK;
}

/* MelWeightMatrix (17) -> OnnxMelWeightMatrix, its five scalars read at
 * run time (the edges as float), cast to output_datatype. */
ms_status rt__ox_op_mel(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const char *h = rt__ox_hint_of(n), *t[5];
    rt__ox_value *V[5];
    ms_status st;
    for (int i = 0; i < 5; i++) {
        if ((st = rt__ox_need(cv, n, i, &V[i], &t[i])) != MS_OK) return st;
        if (i < 3 && V[i]->dt != RT_DT_INT32 && V[i]->dt != RT_DT_INT64)
            return rt__ox_err(cv, MS_EINVAL, "input %d must be int32 or int64", i);
        if (i >= 3 && V[i]->dt != RT_DT_FLOAT) {
            if (!rt__ox_dtype_num(V[i]->dt) || rt__ox_dtype_int(V[i]->dt))
                return rt__ox_err(cv, MS_EINVAL, "input %d must be a floating-point scalar", i);
            t[i] = rt__tf_cast(cv, rt__ox_printf(cv, "%s/edge%d", h, i), t[i], V[i]->dt, RT_DT_FLOAT);
        }
    }
    rt_dtype dt = rt__ox_onnx_dtype((int32_t)rt__ox_attr_i(n, "output_datatype", 1));
    if (!rt__ox_dtype_num(dt) || dt == RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "output_datatype %s is not supported (numeric types are)",
                          rt_dtype_name(dt));
    Tensorflow__NodeDef *d =
        rt__tf_node(cv, "OnnxMelWeightMatrix", dt == RT_DT_FLOAT ? h : rt__ox_printf(cv, "%s/f32", h));
    for (int i = 0; i < 5; i++)
        rt__tf_input(cv, d, t[i]);
    const char *y = dt == RT_DT_FLOAT ? d->name : rt__tf_cast(cv, h, d->name, RT_DT_FLOAT, dt);
    /* Known at import when the counts are constants. */
    int64_t od[2] = {-1, -1};
    if (V[1]->iv && rt__ox_is_const(V[1]) && rt__ox_nelem(V[1]) == 1 && V[1]->iv[0] >= 1)
        od[0] = V[1]->iv[0] / 2 + 1;
    if (V[0]->iv && rt__ox_is_const(V[0]) && rt__ox_nelem(V[0]) == 1 && V[0]->iv[0] >= 1)
        od[1] = V[0]->iv[0];
    rt__ox_def_out(cv, n, 0, dt, 2, od, y);
    return MS_OK;
}
