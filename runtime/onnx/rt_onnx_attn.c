/* rt_onnx_attn.c - ONNX Attention (opsets 23 and 24) and RotaryEmbedding
 * (23, at the end) as chains of TF ops; Attention
 * in the order of the op's function body so that the numbers match it:
 *
 *   3-D Q/K/V: (B, S, H*D) -> Reshape (B, S, H, D) -> Transpose (B, H, S, D)
 *   K, V after past_key / past_value along the sequence axis (present_*)
 *   GQA: the KV heads repeated q_num_heads / kv_num_heads times, head h of
 *        Q meeting KV head h / rep (GatherV2 on the head axis)
 *   qk   = (Q * sqrt(scale)) x (K^T * sqrt(scale))          mode 0
 *   qk1  = softcap * tanh(qk / softcap) when softcap != 0   mode 1
 *   qk2  = qk1 + bias                                       mode 2
 *   p    = softmax(qk2), 0 on rows whose bias is all -inf   mode 3
 *   Y    = p x V (3-D: back to (B, S, H*Dv))
 *
 * bias is the sum of the mask (bool: 0 where true, -inf elsewhere; opset 24
 * pads a shorter last axis with -inf), the causal mask (-inf where
 * row + offset < col, offset = past length, or at opset 24 with
 * nonpad_kv_seqlen that length minus S, per batch) and, with
 * nonpad_kv_seqlen, -inf on the columns at or beyond it.
 *
 * Float only (the graph's element type); softmax_precision only as float.
 * The causal and padding masks are built from constant row / column
 * numbers, so they need static sequence lengths.
 */
#include <math.h>
#include <string.h>

#include "rt_onnx_ext.h"

#define ATT_MASK_MAX ((int64_t)1 << 24) /* elements of a constant causal mask */

const char *rt__ox_reduce(rt__ox_conv *cv, const char *op, const char *h, const char *x,
                          rt_dtype dt, const int64_t *ax, int na, int keep) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/axes", h), na, ax));
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, nd, "keep_dims", keep);
    return nd->name;
}

Tensorflow__NodeDef *rt__ox_gather_node(rt__ox_conv *cv, const char *h, const char *x, rt_dtype dt,
                                        const char *ix, rt_dtype idt, int axis) {
    Tensorflow__NodeDef *g = rt__tf_node(cv, "GatherV2", h);
    rt__tf_input(cv, g, x);
    rt__tf_input(cv, g, ix);
    rt__tf_input(cv, g, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", g->name), axis));
    rt__tf_attr_type(cv, g, "Tparams", dt);
    rt__tf_attr_type(cv, g, "Tindices", idt);
    rt__tf_attr_type(cv, g, "Taxis", RT_DT_INT32);
    rt__tf_attr_i(cv, g, "batch_dims", 0);
    return g;
}

static const char *sc(rt__ox_conv *cv, const char *h, const char *what, float x) {
    return rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/%s", h, what), x);
}

/* One of Q, K, V as (B, heads, seq, head size) with the head size in *hs:
 * 4-D as is, 3-D split into `heads` heads. */
static ms_status to_heads(rt__ox_conv *cv, const char *h, const char *what, rt__ox_value *X,
                          const char *x, int64_t heads, const char **out, int64_t *d4,
                          int64_t *hs) {
    if (X->rank == 4) {
        memcpy(d4, X->dim, 4 * sizeof(int64_t));
        if (heads > 0 && X->dim[1] >= 0 && X->dim[1] != heads)
            return rt__ox_err(cv, MS_EINVAL, "%s has %lld heads, expected %lld", what,
                              (long long)X->dim[1], (long long)heads);
        *hs = X->dim[3];
        *out = x;
        return MS_OK;
    }
    int64_t hid = X->dim[2];
    if (heads <= 0 || heads > OX_DIM_MAX)
        return rt__ox_err(cv, MS_EINVAL, "3-D inputs need q_num_heads and kv_num_heads > 0");
    if (hid < 0) return rt__ox_err(cv, MS_ENOTSUP, "%s's hidden size must be static", what);
    if (hid % heads != 0)
        return rt__ox_err(cv, MS_EINVAL, "%s's hidden size %lld is not a multiple of %lld heads",
                          what, (long long)hid, (long long)heads);
    *hs = hid / heads;
    int64_t sd[4] = {X->dim[0], X->dim[1], heads, *hs};
    if (rt__ox_count_unknown(2, sd) > 1)
        return rt__ox_err(cv, MS_ENOTSUP, "3-D %s with both batch and sequence dynamic", what);
    const char *t =
        rt__tf_reshape(cv, rt__ox_printf(cv, "%s/%s_heads", h, what), x, RT_DT_FLOAT, 4, sd);
    static const int64_t perm[4] = {0, 2, 1, 3};
    *out = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/%s_bhsd", h, what), t, RT_DT_FLOAT, 4, perm);
    d4[0] = X->dim[0], d4[1] = heads, d4[2] = X->dim[1], d4[3] = *hs;
    return MS_OK;
}

/* x (B, kvH, T, D) with each head repeated rep times in place. */
static const char *repeat_heads(rt__ox_conv *cv, const char *h, const char *x, int64_t kvh,
                                int64_t rep) {
    if (rep == 1) return x;
    int64_t n = kvh * rep, *ix = rt__ox_alloc(cv, (size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        ix[i] = i / rep;
    Tensorflow__NodeDef *g = rt__ox_gather_node(
        cv, h, x, RT_DT_FLOAT,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/ix", h), RT_DT_INT64, 1, &n, ix), RT_DT_INT64,
        1);
    return g->name;
}

static const char *bmm(rt__ox_conv *cv, const char *h, const char *a, const char *b) {
    Tensorflow__NodeDef *mm = rt__tf_node(cv, "BatchMatMulV2", h);
    rt__tf_input(cv, mm, a);
    rt__tf_input(cv, mm, b);
    rt__tf_attr_type(cv, mm, "T", RT_DT_FLOAT);
    rt__tf_attr_b(cv, mm, "adj_x", 0);
    rt__tf_attr_b(cv, mm, "adj_y", 0);
    return mm->name;
}

static const char *add_bias(rt__ox_conv *cv, const char *h, const char *acc, const char *b) {
    return acc ? rt__tf_binary(cv, "AddV2", h, acc, b, RT_DT_FLOAT) : b;
}

/* An int64 constant 0..n-1 shaped (n, 1) when col == 0, else (1, n). */
static const char *iota(rt__ox_conv *cv, const char *h, int64_t n, int col) {
    int64_t *v = rt__ox_alloc(cv, (size_t)(n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        v[i] = i;
    int64_t d[2] = {col ? 1 : n, col ? n : 1};
    return rt__tf_const_int(cv, h, RT_DT_INT64, 2, d, v);
}

/* nonpad_kv_seqlen (B) as int64 of shape (B, 1, 1, 1) (cols == 0) or its
 * value minus s. */
static const char *per_batch(rt__ox_conv *cv, const char *h, const char *np, int64_t minus) {
    int64_t d4[4] = {-1, 1, 1, 1};
    const char *t = rt__tf_reshape(cv, h, np, RT_DT_INT64, 4, d4);
    if (minus == 0) return t;
    return rt__tf_binary(
        cv, "Sub", rt__ox_printf(cv, "%s/minus", h), t,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/s", h), RT_DT_INT64, 0, NULL, &minus),
        RT_DT_INT64);
}

/* The bias added to qk (NULL when none): mask, causal and padding parts. */
static ms_status attn_bias(rt__ox_conv *cv, const Onnx__NodeProto *n, const char *h, int64_t S,
                           int64_t T, int64_t past, const char **out) {
    rt__ox_value *M = rt__ox_in(cv, n, 3), *NP = rt__ox_in(cv, n, 6);
    int causal = rt__ox_attr_i(n, "is_causal", 0) != 0;
    const char *bias = NULL, *m, *np = NULL;
    const char *ninf = sc(cv, h, "neg_inf", -INFINITY), *zero = sc(cv, h, "zero", 0.0f);
    ms_status st;
    if (NP) {
        if ((st = rt__ox_need(cv, n, 6, &NP, &np)) != MS_OK) return st;
        if (NP->dt != RT_DT_INT64 || NP->rank != 1)
            return rt__ox_err(cv, MS_EINVAL, "nonpad_kv_seqlen must be an int64 vector");
        if (past != 0 || rt__ox_in(cv, n, 4) != NULL)
            return rt__ox_err(cv, MS_ENOTSUP, "nonpad_kv_seqlen with past_key is not supported");
    }
    if ((causal || NP) && (S < 0 || T < 0 || S * T > ATT_MASK_MAX))
        return rt__ox_err(cv, MS_ENOTSUP,
                          "is_causal and nonpad_kv_seqlen need static sequence lengths");
    if (M) {
        if ((st = rt__ox_need(cv, n, 3, &M, &m)) != MS_OK) return st;
        if (M->rank < 1 || M->rank > 4)
            return rt__ox_err(cv, MS_EINVAL, "attn_mask must have rank 1 to 4");
        if (M->dt == RT_DT_BOOL)
            m = rt__tf_select(cv, rt__ox_printf(cv, "%s/mask_bias", h), m, zero, ninf, RT_DT_FLOAT);
        else if (M->dt != RT_DT_FLOAT)
            return rt__ox_err(cv, MS_ENOTSUP, "attn_mask is %s; supported: bool, float",
                              rt_dtype_name(M->dt));
        int64_t ml = M->dim[M->rank - 1];
        if (cv->opset >= 24 && ml != T) {
            /* Opset 24: a shorter mask is padded to T with -inf. */
            if (ml < 0 || T < 0)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "opset %lld: attn_mask's last dim and the total sequence length "
                                  "must be static when they may differ",
                                  (long long)cv->opset);
            if (ml > T) return rt__ox_err(cv, MS_EINVAL, "attn_mask is longer than the sequence");
            int64_t pads[2 * OX_MAXR] = {0};
            pads[2 * M->rank - 1] = T - ml;
            m = rt__ox_emit_pad(cv, rt__ox_printf(cv, "%s/mask_pad", h), m, RT_DT_FLOAT, M->rank,
                                pads, "constant", -INFINITY);
        }
        bias = m;
    }
    if (causal) {
        const char *c;
        if (NP) {
            /* Row i of batch b sees columns j <= i + nonpad[b] - S. */
            const char *row = iota(cv, rt__ox_printf(cv, "%s/row", h), S, 0);
            const char *off = per_batch(cv, rt__ox_printf(cv, "%s/offset", h), np, S);
            row = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/row_off", h), row, off,
                                RT_DT_INT64);
            c = rt__tf_binary(cv, "Less", rt__ox_printf(cv, "%s/after", h), row,
                              iota(cv, rt__ox_printf(cv, "%s/col", h), T, 1), RT_DT_INT64);
            c = rt__tf_select(cv, rt__ox_printf(cv, "%s/causal", h), c, ninf, zero, RT_DT_FLOAT);
        } else {
            float *v = rt__ox_alloc(cv, (size_t)(S * T + 1) * sizeof(float));
            for (int64_t i = 0; i < S; i++)
                for (int64_t j = 0; j < T; j++)
                    v[i * T + j] = i + past < j ? -INFINITY : 0.0f;
            int64_t d[2] = {S, T};
            c = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/causal", h), 2, d, v);
        }
        bias = add_bias(cv, rt__ox_printf(cv, "%s/bias_causal", h), bias, c);
    }
    if (NP) {
        /* Columns at or beyond nonpad[b] are padding. */
        const char *col = iota(cv, rt__ox_printf(cv, "%s/pad_col", h), T, 1);
        int64_t d4[4] = {1, 1, 1, T};
        col = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/pad_col4", h), col, RT_DT_INT64, 4, d4);
        const char *in =
            rt__tf_binary(cv, "Less", rt__ox_printf(cv, "%s/in_seq", h), col,
                          per_batch(cv, rt__ox_printf(cv, "%s/len", h), np, 0), RT_DT_INT64);
        const char *p =
            rt__tf_select(cv, rt__ox_printf(cv, "%s/padding", h), in, zero, ninf, RT_DT_FLOAT);
        bias = add_bias(cv, rt__ox_printf(cv, "%s/bias_pad", h), bias, p);
    }
    *out = bias;
    return MS_OK;
}

ms_status rt__ox_op_attention(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *Q, *K, *V, *PK = rt__ox_in(cv, n, 4), *PV = rt__ox_in(cv, n, 5);
    const char *q, *k, *v, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &Q, &q)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &K, &k)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &V, &v)) != MS_OK)
        return st;
    if (Q->dt != RT_DT_FLOAT || K->dt != RT_DT_FLOAT || V->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "Q, K and V must be float (is %s)", rt_dtype_name(Q->dt));
    if ((Q->rank != 3 && Q->rank != 4) || K->rank != Q->rank || V->rank != Q->rank)
        return rt__ox_err(cv, MS_EINVAL, "Q, K and V must all be 3-D or all 4-D");
    int64_t mode = rt__ox_attr_i(n, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        return rt__ox_err(cv, MS_ENOTSUP, "qk_matmul_output_mode %lld is not supported",
                          (long long)mode);
    float softcap = rt__ox_attr_f(n, "softcap", 0.0f);
    if (softcap < 0 || isnan(softcap))
        return rt__ox_err(cv, MS_ENOTSUP, "a negative softcap is not supported");
    if (!PK != !PV) return rt__ox_err(cv, MS_EINVAL, "past_key and past_value go together");

    int64_t qh = Q->rank == 3 ? rt__ox_attr_i(n, "q_num_heads", 0) : Q->dim[1];
    int64_t kvh = Q->rank == 3 ? rt__ox_attr_i(n, "kv_num_heads", 0) : K->dim[1];
    if (Q->rank == 4 && (qh < 0 || kvh < 0))
        return rt__ox_err(cv, MS_ENOTSUP, "the head counts must be static");
    int64_t qd[4], kd[4], vd[4], D, Dk, Dv;
    if ((st = to_heads(cv, h, "q", Q, q, qh, &q, qd, &D)) != MS_OK ||
        (st = to_heads(cv, h, "k", K, k, kvh, &k, kd, &Dk)) != MS_OK ||
        (st = to_heads(cv, h, "v", V, v, kvh, &v, vd, &Dv)) != MS_OK)
        return st;
    if (kvh <= 0 || qh <= 0 || qh % kvh != 0)
        return rt__ox_err(cv, MS_EINVAL, "q heads (%lld) must be a multiple of kv heads (%lld)",
                          (long long)qh, (long long)kvh);
    if (D >= 0 && Dk >= 0 && D != Dk) return rt__ox_err(cv, MS_EINVAL, "Q and K head sizes differ");

    /* present_* = past_* then the new K / V along the sequence axis. */
    int64_t past = 0;
    if (PK) {
        const char *pk, *pv;
        if ((st = rt__ox_need(cv, n, 4, &PK, &pk)) != MS_OK ||
            (st = rt__ox_need(cv, n, 5, &PV, &pv)) != MS_OK)
            return st;
        if (PK->rank != 4 || PV->rank != 4 || PK->dt != RT_DT_FLOAT || PV->dt != RT_DT_FLOAT)
            return rt__ox_err(cv, MS_EINVAL, "past_key and past_value must be 4-D float");
        past = PK->dim[2];
        const char *pair[2][2] = {{pk, k}, {pv, v}};
        const char **dst[2] = {&k, &v};
        for (int i = 0; i < 2; i++) {
            Tensorflow__NodeDef *c =
                rt__tf_node(cv, "ConcatV2", rt__ox_printf(cv, "%s/present_%c", h, "kv"[i]));
            rt__tf_input(cv, c, pair[i][0]);
            rt__tf_input(cv, c, pair[i][1]);
            rt__tf_input(cv, c, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", c->name), 2));
            rt__tf_attr_i(cv, c, "N", 2);
            rt__tf_attr_type(cv, c, "T", RT_DT_FLOAT);
            rt__tf_attr_type(cv, c, "Tidx", RT_DT_INT32);
            *dst[i] = c->name;
        }
        int64_t t2 = past >= 0 && kd[2] >= 0 ? past + kd[2] : -1;
        kd[2] = vd[2] = t2;
        if (PV->dim[2] != past) return rt__ox_err(cv, MS_EINVAL, "past lengths differ");
    }
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, 4, kd, k);
    rt__ox_def_out(cv, n, 2, RT_DT_FLOAT, 4, vd, v);
    int64_t S = qd[2], T = kd[2];
    if (rt__ox_attr_i(n, "is_causal", 0) != 0 && past < 0)
        return rt__ox_err(cv, MS_ENOTSUP, "is_causal with a dynamic past length");

    float scale;
    const Onnx__AttributeProto *sa = rt__ox_attr(n, "scale");
    if (sa) {
        scale = rt__ox_attr_f(n, "scale", 1.0f);
        if (!(scale > 0)) return rt__ox_err(cv, MS_ENOTSUP, "scale must be > 0");
    } else {
        if (D <= 0) return rt__ox_err(cv, MS_ENOTSUP, "the head size must be static");
        scale = 1.0f / sqrtf((float)D);
    }
    const char *ss = sc(cv, h, "sqrt_scale", sqrtf(scale));
    int64_t rep = qh / kvh;
    k = repeat_heads(cv, rt__ox_printf(cv, "%s/k_rep", h), k, kvh, rep);
    v = repeat_heads(cv, rt__ox_printf(cv, "%s/v_rep", h), v, kvh, rep);
    static const int64_t kt_perm[4] = {0, 1, 3, 2};
    k = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/k_t", h), k, RT_DT_FLOAT, 4, kt_perm);
    q = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/q_scaled", h), q, ss, RT_DT_FLOAT);
    k = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/k_scaled", h), k, ss, RT_DT_FLOAT);
    const char *qk[4];
    qk[0] = bmm(cv, rt__ox_printf(cv, "%s/qk", h), q, k);
    qk[1] = qk[0];
    if (softcap != 0) {
        const char *c = sc(cv, h, "softcap", softcap);
        const char *t =
            rt__tf_binary(cv, "RealDiv", rt__ox_printf(cv, "%s/cap_div", h), qk[0], c, RT_DT_FLOAT);
        t = rt__tf_unary(cv, "Tanh", rt__ox_printf(cv, "%s/cap_tanh", h), t, RT_DT_FLOAT);
        qk[1] = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/capped", h), t, c, RT_DT_FLOAT);
    }
    const char *bias = NULL;
    if ((st = attn_bias(cv, n, h, S, T, past, &bias)) != MS_OK) return st;
    qk[2] = bias ? rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/biased", h), qk[1], bias,
                                 RT_DT_FLOAT)
                 : qk[1];
    const char *p =
        rt__tf_unary(cv, "Softmax", rt__ox_printf(cv, "%s/softmax", h), qk[2], RT_DT_FLOAT);
    if (bias) {
        /* A row with every column masked gives 0s, not softmax's NaNs. */
        int64_t last = -1;
        const char *mx = rt__ox_reduce(cv, "Max", rt__ox_printf(cv, "%s/bias_max", h), bias,
                                       RT_DT_FLOAT, &last, 1, 1);
        const char *all = rt__tf_binary(cv, "Equal", rt__ox_printf(cv, "%s/all_masked", h), mx,
                                        sc(cv, h, "ninf_rows", -INFINITY), RT_DT_FLOAT);
        p = rt__tf_select(cv, rt__ox_printf(cv, "%s/probs", h), all, sc(cv, h, "zero_prob", 0.0f),
                          p, RT_DT_FLOAT);
    }
    qk[3] = p;
    const char *y = bmm(cv, rt__ox_printf(cv, "%s/pv", h), p, v);
    int64_t od[4] = {qd[0], qh, S, vd[3]}, sd[4] = {qd[0], qh, S, T};
    if (Q->rank == 3) {
        static const int64_t perm[4] = {0, 2, 1, 3};
        y = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/y_bshd", h), y, RT_DT_FLOAT, 4, perm);
        int64_t d3[3] = {qd[0], S, vd[3] >= 0 ? qh * vd[3] : -1};
        if (rt__ox_count_unknown(3, d3) > 1)
            return rt__ox_err(cv, MS_ENOTSUP, "3-D output with more than one dynamic dimension");
        y = rt__tf_reshape(cv, h, y, RT_DT_FLOAT, 3, d3);
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 3, d3, y);
    } else {
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, od,
                       rt__tf_unary(cv, "Identity", h, y, RT_DT_FLOAT));
    }
    rt__ox_def_out(
        cv, n, 3, RT_DT_FLOAT, 4, sd,
        rt__tf_unary(cv, "Identity", rt__ox_printf(cv, "%s/qk_out", h), qk[mode], RT_DT_FLOAT));
    return MS_OK;
}

/* GatherV2 of x's last axis (rank r) at the n constant positions ix. */
static const char *take_last(rt__ox_conv *cv, const char *h, const char *x, int r, int64_t n,
                             const int64_t *ix) {
    Tensorflow__NodeDef *g = rt__ox_gather_node(
        cv, h, x, RT_DT_FLOAT,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/ix", h), RT_DT_INT64, 1, &n, ix), RT_DT_INT64,
        r - 1);
    return g->name;
}

/* positions from..from+n-1, or with step 2 (interleaved halves), or the
 * interleaving permutation of two halves of n (0, n, 1, n + 1, ...). */
static int64_t *positions(rt__ox_conv *cv, int64_t n, int64_t from, int64_t step) {
    int64_t *v = rt__ox_alloc(cv, (size_t)(n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        v[i] = from + i * step;
    return v;
}

static const char *concat_last(rt__ox_conv *cv, const char *h, const char *a, const char *b,
                               int r) {
    Tensorflow__NodeDef *c = rt__tf_node(cv, "ConcatV2", h);
    rt__tf_input(cv, c, a);
    rt__tf_input(cv, c, b);
    rt__tf_input(cv, c, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", h), r - 1));
    rt__tf_attr_i(cv, c, "N", 2);
    rt__tf_attr_type(cv, c, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, c, "Tidx", RT_DT_INT32);
    return c->name;
}

/* RotaryEmbedding (opset 23): the first rotary_embedding_dim features of
 * each head rotated by the (cos, sin) of its position: halves (x1, x2), or
 * even / odd features when interleaved, become (cos x1 - sin x2,
 * sin x1 + cos x2). 4-D input is (B, H, S, D); 3-D (B, S, H*D) is split
 * into num_heads heads. The caches are (max position, rd / 2) indexed by
 * position_ids (B, S), or (B, S, rd / 2) without them. */
ms_status rt__ox_op_rotary(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *CC, *SC, *P = rt__ox_in(cv, n, 3);
    const char *x, *cc, *scs, *p = NULL, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &CC, &cc)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &SC, &scs)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT || CC->dt != RT_DT_FLOAT || SC->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "input and caches must be float");
    if (P && (st = rt__ox_need(cv, n, 3, &P, &p)) != MS_OK) return st;
    if (P && ((P->dt != RT_DT_INT64 && P->dt != RT_DT_INT32) || P->rank != 2))
        return rt__ox_err(cv, MS_EINVAL, "position_ids must be (batch, sequence) integers");
    if (CC->rank != (P ? 2 : 3) || SC->rank != CC->rank)
        return rt__ox_err(cv, MS_EINVAL, "the caches must be %s",
                          P ? "(max position, rd / 2)" : "(batch, sequence, rd / 2)");
    int r = X->rank;
    int64_t D, heads = rt__ox_attr_i(n, "num_heads", 0);
    if (r == 4) {
        D = X->dim[3];
    } else if (r == 3) {
        if (heads <= 0 || X->dim[2] < 0 || X->dim[2] % heads != 0)
            return rt__ox_err(cv, MS_EINVAL,
                              "3-D input needs num_heads dividing a static hidden size");
        D = X->dim[2] / heads;
        int64_t d4[4] = {X->dim[0], X->dim[1], heads, D};
        if (rt__ox_count_unknown(2, d4) > 1)
            return rt__ox_err(cv, MS_ENOTSUP, "3-D input with dynamic batch and sequence");
        x = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/heads", h), x, RT_DT_FLOAT, 4, d4);
    } else {
        return rt__ox_err(cv, MS_EINVAL, "the input must be 3-D or 4-D");
    }
    if (D < 0) return rt__ox_err(cv, MS_ENOTSUP, "the head size must be static");
    int64_t rd = rt__ox_attr_i(n, "rotary_embedding_dim", 0);
    if (rd == 0) rd = D;
    if (rd < 2 || rd > D || rd % 2)
        return rt__ox_err(cv, MS_EINVAL, "rotary_embedding_dim out of range");
    int64_t half = rd / 2, cl = CC->dim[CC->rank - 1];
    if (cl >= 0 && cl < half) return rt__ox_err(cv, MS_EINVAL, "the caches are too narrow");
    int inter = rt__ox_attr_i(n, "interleaved", 0) != 0;
    /* cos / sin as (B, S, half), then with a heads axis of 1 where x has its
     * heads: (B, 1, S, half) for 4-D, (B, S, 1, half) for 3-D. */
    const char *cs[2] = {cc, scs};
    for (int i = 0; i < 2; i++) {
        const char *t = cs[i], *w = i ? "sin" : "cos";
        if (P) {
            Tensorflow__NodeDef *g = rt__ox_gather_node(cv, rt__ox_printf(cv, "%s/%s_pos", h, w), t,
                                                        RT_DT_FLOAT, p, P->dt, 0);
            t = g->name;
        }
        if (cl != half)
            t = take_last(cv, rt__ox_printf(cv, "%s/%s_half", h, w), t, 3, half,
                          positions(cv, half, 0, 1));
        Tensorflow__NodeDef *e = rt__tf_node(cv, "ExpandDims", rt__ox_printf(cv, "%s/%s_4d", h, w));
        rt__tf_input(cv, e, t);
        rt__tf_input(cv, e, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", e->name), r == 4 ? 1 : 2));
        rt__tf_attr_type(cv, e, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, e, "Tdim", RT_DT_INT32);
        cs[i] = e->name;
    }
    const char *x1 = take_last(cv, rt__ox_printf(cv, "%s/x1", h), x, 4, half,
                               positions(cv, half, 0, inter ? 2 : 1));
    const char *x2 = take_last(cv, rt__ox_printf(cv, "%s/x2", h), x, 4, half,
                               positions(cv, half, inter ? 1 : half, inter ? 2 : 1));
    const char *a = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/c1", h), cs[0], x1, RT_DT_FLOAT);
    const char *b = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/s2", h), cs[1], x2, RT_DT_FLOAT);
    const char *re = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/real", h), a, b, RT_DT_FLOAT);
    a = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/s1", h), cs[1], x1, RT_DT_FLOAT);
    b = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/c2", h), cs[0], x2, RT_DT_FLOAT);
    const char *im = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/imag", h), a, b, RT_DT_FLOAT);
    const char *y = concat_last(cv, rt__ox_printf(cv, "%s/rotated", h), re, im, 4);
    if (inter) {
        int64_t *perm = rt__ox_alloc(cv, (size_t)rd * sizeof(int64_t));
        for (int64_t i = 0; i < rd; i++)
            perm[i] = i % 2 ? half + i / 2 : i / 2;
        y = take_last(cv, rt__ox_printf(cv, "%s/interleave", h), y, 4, rd, perm);
    }
    if (rd < D)
        y = concat_last(cv, rt__ox_printf(cv, "%s/with_rest", h), y,
                        take_last(cv, rt__ox_printf(cv, "%s/rest", h), x, 4, D - rd,
                                  positions(cv, D - rd, rd, 1)),
                        4);
    if (r == 3)
        y = rt__tf_reshape(cv, h, y, RT_DT_FLOAT, 3, X->dim);
    else
        y = rt__tf_unary(cv, "Identity", h, y, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim, y);
    return MS_OK;
}
