/* kn_cpu_rnn.c - OnnxRNN: the recurrent layers of ONNX (RNN, GRU, LSTM,
 * opsets 7-22), one kernel whose step computes each cell type as ONNX's definition:
 *
 *   inputs   X, W, R, then those of B, sequence_lens, initial_h, initial_c,
 *            P that attr present (bits 0-4, in that order) says are given.
 *   outputs  Y, Y_h, Y_c (Y_c zeros for RNN and GRU).
 *   attrs    cell (0 RNN, 1 GRU, 2 LSTM), direction (0 forward, 1 reverse,
 *            2 bidirectional), layout (0: X (T, B, I), Y (T, D, B, H),
 *            Y_h (D, B, H); 1: X (B, T, I), Y (B, T, D, H), Y_h (B, D, H)),
 *            hidden_size, linear_before_reset (GRU), clip (> 0: gate inputs
 *            clamped to [-clip, clip]), acts (activation codes, per direction
 *            f[, g[, h]]: 0 Sigmoid, 1 Tanh, 2 Relu, 3 Softsign, 4 Softplus).
 *
 * Gate order: LSTM i, o, f, c; GRU z, r, h. W (D, G*H, I), R (D, G*H, H),
 * B (D, 2*G*H) = Wb then Rb, P (D, 3*H) = i, o, f. A batch entry with
 * sequence length L runs L steps (the reverse direction from step L-1 down);
 * Y is zero past L and Y_h / Y_c hold the state after the last step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

enum { RN_RNN, RN_GRU, RN_LSTM };
enum { RN_SIGMOID, RN_TANH, RN_RELU, RN_SOFTSIGN, RN_SOFTPLUS, RN_NACT };
#define RN_MAXACT 6

static float rn_act(int code, float x) {
    switch (code) {
    case RN_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case RN_TANH:
        return tanhf(x);
    case RN_RELU:
        return x > 0 ? x : 0;
    case RN_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    default:
        return log1pf(expf(x));
    }
}

typedef struct {
    int cell, G, lbr;
    int64_t T, B, I, H, D;
    float clip; /* 0: none */
    int act[RN_MAXACT];
} rn_cfg;

static float rn_clip(const rn_cfg *c, float x) {
    if (c->clip > 0) return x < -c->clip ? -c->clip : x > c->clip ? c->clip : x;
    return x;
}

/* a[j] = sum_k m[j, k] * v[k] for j < rows (m row-major, cols wide). */
static void rn_matvec(const float *m, const float *v, int64_t rows, int64_t cols, float *a) {
    for (int64_t j = 0; j < rows; j++) {
        double s = 0;
        const float *r = m + j * cols;
        for (int64_t k = 0; k < cols; k++)
            s += (double)r[k] * v[k];
        a[j] = (float)s;
    }
}

/* One step of direction d's cell for one batch entry: x (I), h and c (H)
 * updated in place; gx, gh scratch of G*H, t of 2*H. */
static void rn_step(const rn_cfg *c, const float *W, const float *R, const float *Bi,
                    const float *P, const int *act, const float *x, float *h, float *cs, float *gx,
                    float *gh, float *t) {
    int64_t H = c->H, GH = c->G * H;
    rn_matvec(W, x, GH, c->I, gx);
    rn_matvec(R, h, GH, H, gh);
    const float *wb = Bi, *rb = Bi ? Bi + GH : NULL;
    for (int64_t j = 0; j < GH; j++) {
        gx[j] += wb ? wb[j] : 0;
        gh[j] += rb ? rb[j] : 0;
    }
    if (c->cell == RN_RNN) {
        for (int64_t j = 0; j < H; j++)
            h[j] = rn_act(act[0], rn_clip(c, gx[j] + gh[j]));
        return;
    }
    if (c->cell == RN_LSTM) {
        for (int64_t j = 0; j < H; j++) {
            float pi = P ? P[j] : 0, po = P ? P[H + j] : 0, pf = P ? P[2 * H + j] : 0;
            float gi = rn_act(act[0], rn_clip(c, gx[j] + gh[j] + pi * cs[j]));
            float gf = rn_act(act[0], rn_clip(c, gx[2 * H + j] + gh[2 * H + j] + pf * cs[j]));
            float gc = rn_act(act[1], rn_clip(c, gx[3 * H + j] + gh[3 * H + j]));
            float cn = gf * cs[j] + gi * gc;
            float go = rn_act(act[0], rn_clip(c, gx[H + j] + gh[H + j] + po * cn));
            cs[j] = cn;
            h[j] = go * rn_act(act[2], cn);
        }
        return;
    }
    /* GRU: z, r, then h~ from r * h (or r * (h R + Rb), linear_before_reset). */
    for (int64_t j = 0; j < 2 * H; j++)
        gx[j] = rn_act(act[0], rn_clip(c, gx[j] + gh[j])); /* z then r */
    if (c->lbr) {
        for (int64_t j = 0; j < H; j++)
            gx[2 * H + j] += gx[H + j] * gh[2 * H + j];
    } else {
        /* gh's h part (h R + Rb) is replaced by (r * h) R + Rb. */
        for (int64_t j = 0; j < H; j++)
            t[j] = gx[H + j] * h[j];
        rn_matvec(R + 2 * H * H, t, H, H, t + H);
        for (int64_t j = 0; j < H; j++)
            gx[2 * H + j] += t[H + j] + (rb ? rb[2 * H + j] : 0);
    }
    for (int64_t j = 0; j < H; j++) {
        float hn = rn_act(act[1], rn_clip(c, gx[2 * H + j]));
        h[j] = (1 - gx[j]) * hn + gx[j] * h[j];
    }
}

static ms_status rn_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    int present = (int)kn_attr_i(node, "present", 0), k = 3;
    const rt_tensor *opt[5] = {NULL};
    for (int i = 0; i < 5; i++)
        if (present & (1 << i)) {
            if (k >= node->nin || in[k] == NULL) return KN_EINVAL(node, "missing input %d", k);
            opt[i] = in[k++];
        }
    rn_cfg c = {.cell = (int)kn_attr_i(node, "cell", RN_LSTM),
                .lbr = kn_attr_i(node, "linear_before_reset", 0) != 0,
                .clip = kn_attr_f(node, "clip", 0),
                .H = kn_attr_i(node, "hidden_size", 0)};
    int dir = (int)kn_attr_i(node, "direction", 0), layout = (int)kn_attr_i(node, "layout", 0);
    c.G = c.cell == RN_LSTM ? 4 : c.cell == RN_GRU ? 3 : 1;
    c.D = dir == 2 ? 2 : 1;
    int nact = c.cell == RN_LSTM ? 3 : c.cell == RN_GRU ? 2 : 1;
    int64_t acts[RN_MAXACT];
    if (c.cell < RN_RNN || c.cell > RN_LSTM || dir < 0 || dir > 2 || layout < 0 || layout > 1 ||
        kn_attr_ilist(node, "acts", acts, RN_MAXACT) != nact * c.D)
        return KN_EINVAL(node, "bad cell, direction, layout or acts attributes");
    for (int i = 0; i < nact * c.D; i++) {
        if (acts[i] < 0 || acts[i] >= RN_NACT) return KN_EINVAL(node, "bad activation code");
        c.act[i] = (int)acts[i];
    }
    const rt_tensor *X = in[0], *W = in[1], *R = in[2];
    if (X->dtype != RT_DT_FLOAT || W->dtype != RT_DT_FLOAT || R->dtype != RT_DT_FLOAT ||
        X->shape.rank != 3 || W->shape.rank != 3 || R->shape.rank != 3)
        return KN_EINVAL(node, "X, W, R must be float rank 3, got %s %s %s", kn__shp(&X->shape),
                         kn__shp(&W->shape), kn__shp(&R->shape));
    c.T = X->shape.dim[layout ? 1 : 0], c.B = X->shape.dim[layout ? 0 : 1], c.I = X->shape.dim[2];
    int64_t H = c.H, GH = c.G * H, D = c.D;
    if (H <= 0 || W->shape.dim[0] != D || W->shape.dim[1] != GH || W->shape.dim[2] != c.I ||
        R->shape.dim[0] != D || R->shape.dim[1] != GH || R->shape.dim[2] != H)
        return KN_EINVAL(node, "W %s, R %s do not fit X %s, hidden_size %lld", kn__shp(&W->shape),
                         kn__shp(&R->shape), kn__shp(&X->shape), (long long)H);
    const rt_tensor *Bt = opt[0], *L = opt[1], *H0 = opt[2], *C0 = opt[3], *Pt = opt[4];
    if (Bt && (Bt->dtype != RT_DT_FLOAT || Bt->nelem != D * 2 * GH))
        return KN_EINVAL(node, "B %s must be float (%lld, %lld)", kn__shp(&Bt->shape), (long long)D,
                         (long long)(2 * GH));
    if (Pt && (Pt->dtype != RT_DT_FLOAT || Pt->nelem != D * 3 * H))
        return KN_EINVAL(node, "P %s must be float (%lld, %lld)", kn__shp(&Pt->shape), (long long)D,
                         (long long)(3 * H));
    const rt_tensor *S0[2] = {H0, C0};
    for (int i = 0; i < 2; i++)
        if (S0[i] && (S0[i]->dtype != RT_DT_FLOAT || S0[i]->nelem != D * c.B * H))
            return KN_EINVAL(node, "initial state %s must be float of %lld values",
                             kn__shp(&S0[i]->shape), (long long)(D * c.B * H));
    if (L && ((L->dtype != RT_DT_INT32 && L->dtype != RT_DT_INT64) || L->nelem != c.B))
        return KN_EINVAL(node, "sequence_lens %s must be int32/int64 of batch size %lld",
                         kn__shp(&L->shape), (long long)c.B);
    rt_shape ys = {.rank = 4}, hs = {.rank = 3};
    if (layout == 0) {
        ys.dim[0] = c.T, ys.dim[1] = D, ys.dim[2] = c.B, ys.dim[3] = H;
        hs.dim[0] = D, hs.dim[1] = c.B, hs.dim[2] = H;
    } else {
        ys.dim[0] = c.B, ys.dim[1] = c.T, ys.dim[2] = D, ys.dim[3] = H;
        hs.dim[0] = c.B, hs.dim[1] = D, hs.dim[2] = H;
    }
    for (int i = 0; i < 3; i++)
        if ((st = kn__output(ctx, node, i, RT_DT_FLOAT, i ? &hs : &ys, &out[i])) != MS_OK)
            return st;
    float *Y = out[0]->data, *Yh = out[1]->data, *Yc = out[2]->data;
    memset(Y, 0, sizeof(float) * (size_t)out[0]->nelem);
    memset(Yc, 0, sizeof(float) * (size_t)out[2]->nelem);
    if (out[1]->nelem == 0) return MS_OK;
    float *scr = malloc(sizeof(float) * (size_t)(2 * GH + 3 * H));
    if (scr == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    float *gx = scr, *gh = gx + GH, *t = gh + GH, *cs = t + 2 * H;
    for (int64_t d = 0; d < D; d++) {
        int rev = dir == 1 || d == 1;
        const float *Wd = (const float *)W->data + d * GH * c.I;
        const float *Rd = (const float *)R->data + d * GH * H;
        const float *Bd = Bt ? (const float *)Bt->data + d * 2 * GH : NULL;
        const float *Pd = Pt ? (const float *)Pt->data + d * 3 * H : NULL;
        for (int64_t b = 0; b < c.B; b++) {
            if (kn_ctx_cancelled(ctx)) { /* a long sequence: stop at the deadline */
                free(scr);
                return kn__errf(MS_ECANCELED, node, "cancelled");
            }
            /* state offset in Y_h / initial_h for (d, b) */
            int64_t so = layout ? (b * D + d) * H : (d * c.B + b) * H;
            float *h = Yh + so;
            if (H0)
                memcpy(h, (const float *)H0->data + so, sizeof(float) * (size_t)H);
            else
                memset(h, 0, sizeof(float) * (size_t)H);
            if (C0)
                memcpy(cs, (const float *)C0->data + so, sizeof(float) * (size_t)H);
            else
                memset(cs, 0, sizeof(float) * (size_t)H);
            int64_t len = c.T;
            if (L)
                len = L->dtype == RT_DT_INT64 ? ((const int64_t *)L->data)[b]
                                              : ((const int32_t *)L->data)[b];
            if (len < 0 || len > c.T) {
                free(scr);
                return KN_EINVAL(node, "sequence length %lld is outside 0..%lld", (long long)len,
                                 (long long)c.T);
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t tt = rev ? len - 1 - s : s;
                const float *x =
                    (const float *)X->data + (layout ? b * c.T + tt : tt * c.B + b) * c.I;
                rn_step(&c, Wd, Rd, Bd, Pd, c.act + d * nact, x, h, cs, gx, gh, t);
                float *y = Y + (layout ? (b * c.T + tt) * D + d : (tt * D + d) * c.B + b) * H;
                memcpy(y, h, sizeof(float) * (size_t)H);
            }
            if (c.cell == RN_LSTM) memcpy(Yc + so, cs, sizeof(float) * (size_t)H);
        }
    }
    free(scr);
    return MS_OK;
}

const kn_kernel kn_cpu_rnn_kernels[] = {
    {.op = "OnnxRNN", .compute = rn_compute},
    {.op = NULL},
};
