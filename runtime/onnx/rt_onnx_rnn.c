/* rt_onnx_rnn.c - ONNX RNN, GRU and LSTM (opsets 7, 14, 22) -> our own op
 * OnnxRNN (kernels/cpu/kn_cpu_rnn.c), one node per layer with all three
 * outputs. Float only; activations among Sigmoid, Tanh, Relu, Softsign,
 * Softplus (those without alpha / beta; activation_alpha and
 * activation_beta are refused by the opset table), input_forget 0 only.
 */
#include <string.h>

#include "rt_onnx_ext.h"

#define RN_MAXACT 6

/* Activation names in the kernel's code order. */
static const char *const rn_names[] = {"Sigmoid", "Tanh", "Relu", "Softsign", "Softplus"};

static ms_status op_rnn(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int cell = strcmp(n->op_type, "LSTM") == 0 ? 2 : strcmp(n->op_type, "GRU") == 0 ? 1 : 0;
    int nact = cell == 2 ? 3 : cell == 1 ? 2 : 1, nopt = cell == 2 ? 5 : 3;
    rt__ox_value *X, *W, *R;
    const char *x, *w, *r, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &W, &w)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &R, &r)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || W->dt != RT_DT_FLOAT || R->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "X is %s; supported: float", rt_dtype_name(X->dt));
    if (X->rank != 3 || W->rank != 3 || R->rank != 3)
        return rt__ox_err(cv, MS_EINVAL, "X, W and R must be rank 3");
    int dir;
    if (rt__ox_attr_is(n, "direction", "forward", "forward"))
        dir = 0;
    else if (rt__ox_attr_is(n, "direction", "reverse", "forward"))
        dir = 1;
    else if (rt__ox_attr_is(n, "direction", "bidirectional", "forward"))
        dir = 2;
    else
        return rt__ox_err(cv, MS_EINVAL, "direction must be forward, reverse or bidirectional");
    int64_t D = dir == 2 ? 2 : 1, layout = rt__ox_attr_i(n, "layout", 0);
    int64_t H = rt__ox_attr_i(n, "hidden_size", R->dim[2]);
    if (layout != 0 && layout != 1) return rt__ox_err(cv, MS_EINVAL, "layout must be 0 or 1");
    if (H <= 0) return rt__ox_err(cv, MS_EINVAL, "hidden_size is required (or R's shape)");
    int64_t G = cell == 2 ? 4 : cell == 1 ? 3 : 1;
    if ((W->dim[0] >= 0 && W->dim[0] != D) || (W->dim[1] >= 0 && W->dim[1] != G * H) ||
        (R->dim[2] >= 0 && R->dim[2] != H))
        return rt__ox_err(cv, MS_EINVAL, "W and R do not fit hidden_size %lld, %lld direction(s)",
                          (long long)H, (long long)D);
    if (rt__ox_attr_i(n, "input_forget", 0) != 0)
        return rt__ox_err(cv, MS_ENOTSUP, "attribute input_forget=1 is not implemented");
    int64_t acts[RN_MAXACT];
    static const int64_t dflt[3][3] = {{1}, {0, 1}, {0, 1, 1}};
    for (int i = 0; i < nact * D; i++)
        acts[i] = dflt[cell][i % nact];
    const Onnx__AttributeProto *a = rt__ox_attr(n, "activations");
    if (a) {
        if ((int64_t)a->n_strings != nact * D)
            return rt__ox_err(cv, MS_EINVAL, "attribute activations needs %lld names",
                              (long long)(nact * D));
        for (size_t i = 0; i < a->n_strings; i++) {
            int k = -1;
            for (int j = 0; j < 5; j++)
                if (a->strings[i].len == strlen(rn_names[j]) &&
                    memcmp(a->strings[i].data, rn_names[j], a->strings[i].len) == 0)
                    k = j;
            if (k < 0)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "attribute activations: %.*s is not implemented (supported: "
                                  "Sigmoid, Tanh, Relu, Softsign, Softplus)",
                                  (int)a->strings[i].len, (const char *)a->strings[i].data);
            acts[i] = k;
        }
    }
    float clip = rt__ox_attr(n, "clip") ? rt__ox_attr_f(n, "clip", 0) : 0;
    if (rt__ox_attr(n, "clip") && !(clip > 0))
        return rt__ox_err(cv, MS_EINVAL, "attribute clip must be positive");
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxRNN", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, w);
    rt__tf_input(cv, d, r);
    int present = 0;
    for (int i = 0; i < nopt; i++) {
        rt__ox_value *v = rt__ox_in(cv, n, 3 + i);
        if (v == NULL) continue;
        const char *t;
        if ((st = rt__ox_tf(cv, v, &t)) != MS_OK) return st;
        int want = i == 1 ? (v->dt == RT_DT_INT32 || v->dt == RT_DT_INT64) : v->dt == RT_DT_FLOAT;
        if (!want)
            return rt__ox_err(cv, MS_ENOTSUP, "input %d is %s; want %s", 3 + i,
                              rt_dtype_name(v->dt), i == 1 ? "int32" : "float");
        rt__tf_input(cv, d, t);
        present |= 1 << i;
    }
    rt__tf_attr_i(cv, d, "present", present);
    rt__tf_attr_i(cv, d, "cell", cell);
    rt__tf_attr_i(cv, d, "direction", dir);
    rt__tf_attr_i(cv, d, "layout", layout);
    rt__tf_attr_i(cv, d, "hidden_size", H);
    rt__tf_attr_i(cv, d, "linear_before_reset", rt__ox_attr_i(n, "linear_before_reset", 0) != 0);
    rt__tf_attr_f(cv, d, "clip", clip);
    rt__tf_attr_ilist(cv, d, "acts", acts, nact * (int)D);
    int64_t T = X->dim[layout ? 1 : 0], B = X->dim[layout ? 0 : 1];
    int64_t yd[4] = {T, D, B, H}, hd[3] = {D, B, H};
    if (layout) yd[0] = B, yd[1] = T, yd[2] = D, hd[0] = B, hd[1] = D;
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, yd, rt__tf_out(cv, d, 0));
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, 3, hd, rt__tf_out(cv, d, 1));
    if (cell == 2) rt__ox_def_out(cv, n, 2, RT_DT_FLOAT, 3, hd, rt__tf_out(cv, d, 2));
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } tab[] = {
    {"RNN", op_rnn}, {"GRU", op_rnn}, {"LSTM", op_rnn},
};
/* clang-format on */

rt__ox_handler rt__ox_rnn_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(tab[i].op, op_type) == 0) return tab[i].fn;
    return NULL;
}
