/* kn_cpu_conv3d.c - 3-D convolution kernels (NDHWC, float): Conv3D and
 * _FusedConv3D (BiasAdd + activation in the GEMM epilogue), MaxPool3D,
 * AvgPool3D and Conv3DBackpropInputV2 (transposed 3-D convolution).
 *
 * Conv3D is an implicit GEMM on the packed SGEMM of kn_cpu_gemm.c, the same
 * micro-kernels as Conv2D: C[voxels, OC] = im2col(x)[voxels, KD*KH*KW*C] *
 * f[KD*KH*KW*C, OC]; the A panels are packed straight from x (no im2col
 * buffer), the DHWIO filter is the B operand, pre-packed at load when it is
 * constant. Conv3DBackpropInputV2 computes, a block of out_backprop voxels at
 * a time, col[voxels, KD*KH*KW*IC] = dy[voxels, OC] * f^T[OC, KD*KH*KW*IC] on
 * the same GEMM and scatters the columns into dx (col2im).
 *
 * The table is searched right after kn_cpu_fast.c's, before the reference
 * Conv3D / MaxPool3D / AvgPool3D of kn_cpu_nn.c, which still run NCDHW and
 * non-float cases (delegated from here).
 *
 * Window arithmetic is TensorFlow's (kn__window_dim): VALID and SAME, the
 * smaller half of SAME padding before. AvgPool3D's SAME windows average over
 * the voxels inside the input only, as TensorFlow does.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_conv.h"
#include "kn_cpu_gemm.h"
#include "kn_cpu_util.h"

/* ====================================================================== */
/* attributes and geometry                                                */
/* ====================================================================== */

typedef struct c3_attrs {
    int padding;     /* KN_PAD_VALID / KN_PAD_SAME */
    int64_t s[3];    /* strides d, h, w */
    int64_t dil[3];  /* dilations */
    int64_t k[3];    /* pools: ksize */
    int bias;        /* _FusedConv3D: BiasAdd */
    kn_act act;      /* _FusedConv3D: activation */
    float alpha;
} c3_attrs;

typedef struct c3_geo {
    int64_t N, D, H, W, C;  /* input */
    int64_t KD, KH, KW, OC; /* window, output channels */
    int64_t OD, OH, OW;     /* output */
    int64_t pd, ph, pw;     /* leading pads */
} c3_geo;

/* A 5-list attr [1, d, h, w, 1] (NDHWC) into v; absent -> dflt. */
static ms_status attr5(const kn_node *n, const char *key, int64_t dflt, int64_t v[3]) {
    int64_t l[8];
    int cnt = kn_attr_ilist(n, key, l, 8);
    if (cnt <= 0) {
        v[0] = v[1] = v[2] = dflt;
        return MS_OK;
    }
    if (cnt != 5) return KN_EINVAL(n, "attr %s must have 5 entries, got %d", key, cnt);
    if (l[0] != 1 || l[4] != 1)
        return KN_EINVAL(n, "attr %s must be 1 in the batch and channel dimensions", key);
    for (int i = 0; i < 3; i++) {
        if (l[i + 1] < 1 || l[i + 1] > INT32_MAX)
            return KN_EINVAL(n, "attr %s entries must be in [1, 2^31)", key);
        v[i] = l[i + 1];
    }
    return MS_OK;
}

static int str_is(const char *s, size_t len, const char *want) {
    return strlen(want) == len && memcmp(s, want, len) == 0;
}

static ms_status c3_parse(const kn_node *n, int pool, c3_attrs *a) {
    memset(a, 0, sizeof(*a));
    if (!kn_attr_s_eq(n, "data_format", "NDHWC", "NDHWC"))
        return kn__errf(MS_ENOTSUP, n, "only data_format NDHWC is supported");
    if (kn_attr_s_eq(n, "padding", "SAME", NULL))
        a->padding = KN_PAD_SAME;
    else if (kn_attr_s_eq(n, "padding", "VALID", NULL))
        a->padding = KN_PAD_VALID;
    else
        return KN_EINVAL(n, "padding must be SAME or VALID");
    if (!kn_attr_has(n, "strides")) return KN_EINVAL(n, "attr strides is missing");
    ms_status st = attr5(n, "strides", 1, a->s);
    if (st == MS_OK) st = attr5(n, "dilations", 1, a->dil);
    if (st == MS_OK && pool) {
        if (!kn_attr_has(n, "ksize")) return KN_EINVAL(n, "attr ksize is missing");
        st = attr5(n, "ksize", 1, a->k);
    }
    if (st != MS_OK || n->op[0] != '_') return st;
    /* _FusedConv3D: fused_ops [BiasAdd] [activation]. */
    a->alpha = kn_attr_f(n, "leakyrelu_alpha", 0.2f);
    const char *ops[3];
    size_t lens[3];
    int cnt = kn_attr_slist(n, "fused_ops", ops, lens, 3), i = 0;
    if (cnt < 0) cnt = 0;
    if (i < cnt && str_is(ops[i], lens[i], "BiasAdd")) a->bias = 1, i++;
    if (i < cnt) {
        static const struct {
            const char *name;
            kn_act act;
        } acts[] = {{"Relu", KN_ACT_RELU},           {"Relu6", KN_ACT_RELU6},
                    {"LeakyRelu", KN_ACT_LEAKYRELU}, {"Elu", KN_ACT_ELU},
                    {"Sigmoid", KN_ACT_SIGMOID},     {"Tanh", KN_ACT_TANH}};
        for (size_t j = 0; j < sizeof(acts) / sizeof(acts[0]); j++)
            if (str_is(ops[i], lens[i], acts[j].name)) {
                a->act = acts[j].act;
                i++;
                break;
            }
    }
    if (i != cnt) return kn__errf(MS_ENOTSUP, n, "fused_ops sequence is not supported");
    if (kn_attr_i(n, "num_args", a->bias) != a->bias)
        return KN_EINVAL(n, "num_args must be %d for these fused_ops", a->bias);
    return MS_OK;
}

static ms_status c3_window(const kn_node *n, const char *what, int64_t in, int64_t k, int64_t dil,
                           int64_t s, int padding, int64_t *out, int64_t *pad) {
    ms_status st = kn__window_dim(n, what, in, k, dil, s, padding, 0, 0, out, pad);
    if (st != MS_OK) return st;
    if (padding == KN_PAD_VALID && in - ((k - 1) * dil + 1) < 0)
        return KN_EINVAL(n, "%s: window of %lld (dilated) does not fit input size %lld", what,
                         (long long)((k - 1) * dil + 1), (long long)in);
    if (k < 1) return KN_EINVAL(n, "%s: window size must be at least 1", what);
    return MS_OK;
}

/* x [N, D, H, W, C]; window k (KD, KH, KW); fills the output extents. */
static ms_status c3_geo_fill(const kn_node *n, const c3_attrs *a, const rt_tensor *x,
                             const int64_t k[3], c3_geo *g) {
    if (x->shape.rank != 5)
        return KN_EINVAL(n, "input must be 5-D (NDHWC), got shape %s", kn__shp(&x->shape));
    for (int i = 0; i < 5; i++)
        if (x->shape.dim[i] > INT32_MAX) return KN_EINVAL(n, "dimensions must be below 2^31");
    const int64_t *d = x->shape.dim;
    g->N = d[0], g->D = d[1], g->H = d[2], g->W = d[3], g->C = d[4];
    g->KD = k[0], g->KH = k[1], g->KW = k[2];
    ms_status st = c3_window(n, "depth", g->D, g->KD, a->dil[0], a->s[0], a->padding, &g->OD, &g->pd);
    if (st == MS_OK)
        st = c3_window(n, "height", g->H, g->KH, a->dil[1], a->s[1], a->padding, &g->OH, &g->ph);
    if (st == MS_OK)
        st = c3_window(n, "width", g->W, g->KW, a->dil[2], a->s[2], a->padding, &g->OW, &g->pw);
    return st;
}

/* ====================================================================== */
/* Conv3D / _FusedConv3D                                                  */
/* ====================================================================== */

typedef struct c3_state {
    c3_attrs a;
    kn_gemm_packed pk; /* constant filter packed as B, or data NULL */
    rt_shape pk_shape;
    int pk_isa;
    const kn_kernel *ref; /* kn_cpu_nn.c's kernel of the op (NCDHW, other dtypes), or NULL */
    void *ref_state;
    kn_gemm_packed *dpk; /* [KD]: each depth slice of a constant filter packed for the
                            direct 2-D kernel (kn__dconv_run), or NULL */
    int64_t nd;
} c3_state;

static void c3_release(void *state) {
    c3_state *s = state;
    if (s == NULL) return;
    kn__gemm_packed_free(&s->pk);
    for (int64_t i = 0; i < s->nd && s->dpk; i++)
        kn__gemm_packed_free(&s->dpk[i]);
    free(s->dpk);
    if (s->ref && s->ref->release) s->ref->release(s->ref_state);
    free(s);
}

/* Conv3D, MaxPool3D and AvgPool3D have reference kernels in kn_cpu_nn.c
 * (vol2col + BLAS, NCDHW through transposes, any float dtype): they run
 * what these kernels do not (NCDHW, non-float). */
static ms_status ref_prepare(const kn_node *node, rt_tensor *const *const_in, c3_state *s) {
    for (const kn_kernel *k = kn_cpu_nn_kernels; k->op; k++)
        if (strcmp(k->op, node->op) == 0) s->ref = k;
    if (s->ref == NULL) return MS_OK;
    return s->ref->prepare ? s->ref->prepare(node, const_in, &s->ref_state) : MS_OK;
}

static int use_ref(const c3_state *s, const kn_node *node) {
    return s->ref != NULL && kn_attr_s_eq(node, "data_format", "NCDHW", NULL);
}

static ms_status pack_filter(const rt_tensor *f, kn_gemm_packed *out) {
    const int64_t *d = f->shape.dim;
    int64_t OC = d[4], K = d[0] * d[1] * d[2] * d[3];
    kn_gemm_mat m = {.p = f->data, .sl = 1, .sk = OC};
    return kn__gemm_pack(1, OC, K, kn__gemm_pack_mat, &m, out);
}

static ms_status conv3d_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    c3_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = ref_prepare(node, const_in, s);
    if (st == MS_OK && use_ref(s, node)) {
        *state = s;
        return MS_OK;
    }
    if (st == MS_OK) st = c3_parse(node, 0, &s->a);
    const rt_tensor *f = const_in && node->nin > 1 ? const_in[1] : NULL;
    if (st == MS_OK && f && f->dtype == RT_DT_FLOAT && f->shape.rank == 5 && f->nelem > 0) {
        s->pk_shape = f->shape;
        s->pk_isa = kn__gemm_isa();
        st = pack_filter(f, &s->pk);
        /* Each depth slice [KH, KW, C, OC] of the DHWIO filter is an HWIO
         * 2-D filter: packed for the direct kernel when the CPU has one. */
        const int64_t *d = f->shape.dim;
        if (st == MS_OK && getenv("DCMSERVE_NO_DCONV3D") == NULL &&
            (s->pk_isa == KN_GEMM_ISA_AVX512 || s->pk_isa == KN_GEMM_ISA_AVX2)) {
            s->dpk = calloc((size_t)d[0], sizeof(*s->dpk));
            if (s->dpk == NULL) st = ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
            s->nd = d[0];
            for (int64_t kd = 0; kd < d[0] && st == MS_OK; kd++) {
                rt_tensor sl = {.dtype = RT_DT_FLOAT,
                                .shape = {.rank = 4, .dim = {d[1], d[2], d[3], d[4]}},
                                .nelem = d[1] * d[2] * d[3] * d[4]};
                sl.data = (float *)f->data + kd * sl.nelem;
                st = kn__conv_pack_filter(0, &sl, &s->dpk[kd]);
            }
        }
    }
    if (st != MS_OK) {
        c3_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

typedef struct im3_src {
    const c3_attrs *a;
    const c3_geo *g;
    const float *x;
} im3_src;

/* A operand: line = output voxel (n, od, oh, ow), depth k = (kd, kh, kw, c). */
static void pack_im3(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                     float *dst) {
    const im3_src *s = arg;
    const c3_geo *g = s->g;
    const c3_attrs *a = s->a;
    const int64_t C = g->C, KWC = g->KW * C, KHWC = g->KH * KWC;
    for (int r = 0; r < nl; r++) {
        int64_t p = l0 + r;
        int64_t ow = p % g->OW, q = p / g->OW, oh = q % g->OH;
        q /= g->OH;
        int64_t od = q % g->OD, n = q / g->OD;
        int64_t id0 = od * a->s[0] - g->pd, ih0 = oh * a->s[1] - g->ph, iw0 = ow * a->s[2] - g->pw;
        const float *xn = s->x + n * g->D * g->H * g->W * C;
        int64_t kd = k0 / KHWC, kh = (k0 % KHWC) / KWC, kw = (k0 % KWC) / C, c = k0 % C;
        for (int64_t kk = 0; kk < nk;) {
            int64_t id = id0 + kd * a->dil[0], ih = ih0 + kh * a->dil[1], iw = iw0 + kw * a->dil[2];
            int64_t left = nk - kk, run;
            float *d = dst + kk * R + r;
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) {
                run = C - c < left ? C - c : left;
                for (int64_t t = 0; t < run; t++)
                    d[t * R] = 0;
            } else {
                int64_t taps = 1;
                if (a->dil[2] == 1) {
                    int64_t last = iw + (g->KW - 1 - kw);
                    taps = last < g->W ? g->KW - kw : g->W - iw;
                }
                run = taps * C - c < left ? taps * C - c : left;
                const float *src = xn + ((id * g->H + ih) * g->W + iw) * C + c;
                for (int64_t t = 0; t < run; t++)
                    d[t * R] = src[t];
            }
            kk += run;
            int64_t pos = kw * C + c + run;
            kw = pos / C;
            c = pos % C;
            if (kw >= g->KW) {
                kw = 0;
                c = 0;
                if (++kh >= g->KH) kh = 0, kd++;
            }
        }
    }
    for (int r = nl; r < R; r++)
        for (int64_t k = 0; k < nk; k++)
            dst[k * R + r] = 0;
}

/* Conv3D as a sum of 2-D convolutions on the direct kernel of
 * kn_cpu_dconv.c: output depth slice od = sum over the taps kd that land
 * inside the input of Conv2D(input slice id, filter slice kd). The first
 * valid tap stores, the next ones add the slice so far through the
 * epilogue's residual addend (read, then written, element by element), the
 * last one also applies bias and activation. */
static ms_status conv3d_direct(kn_ctx *ctx, const c3_state *s, const c3_geo *g, const float *x,
                               float *y, const float *bias) {
    const c3_attrs *a = &s->a;
    kn_conv_attrs a2 = {.nchw = 0, .padding = KN_PAD_EXPLICIT, .sh = a->s[1], .sw = a->s[2],
                        .dh = a->dil[1], .dw = a->dil[2]};
    kn_conv_geo g2 = {.N = 1, .H = g->H, .W = g->W, .C = g->C, .KH = g->KH, .KW = g->KW,
                      .OH = g->OH, .OW = g->OW, .OC = g->OC, .pt = g->ph, .pl = g->pw};
    for (int64_t kd = 0; kd < g->KD; kd++)
        if (!kn__dconv_ok(&a2, &g2, &s->dpk[kd])) return MS_ENOTSUP; /* the GEMM path */
    const int64_t xs = g->H * g->W * g->C, ys = g->OH * g->OW * g->OC;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t od = 0; od < g->OD; od++) {
            float *yo = y + (n * g->OD + od) * ys;
            int64_t first = -1, last = -1;
            for (int64_t kd = 0; kd < g->KD; kd++) {
                int64_t id = od * a->s[0] - g->pd + kd * a->dil[0];
                if (id < 0 || id >= g->D) continue;
                if (first < 0) first = kd;
                last = kd;
            }
            if (first < 0) { /* every tap in the padding: act(bias) */
                kn_gemm_epi e = {.bias = bias, .act = a->act, .alpha = a->alpha};
                memset(yo, 0, (size_t)ys * sizeof(float));
                kn__gemm_epilogue(&e, yo, g->OC, 0, g->OH * g->OW, 0, g->OC);
                continue;
            }
            for (int64_t kd = first; kd <= last; kd++) {
                int64_t id = od * a->s[0] - g->pd + kd * a->dil[0];
                if (id < 0 || id >= g->D) continue;
                kn_gemm_epi e = {0};
                if (kd > first) e.add = yo, e.ybase = yo;
                if (kd == last) e.bias = bias, e.act = a->act, e.alpha = a->alpha;
                const kn_gemm_epi *ep = e.add || e.bias || e.act != KN_ACT_NONE ? &e : NULL;
                ms_status st = kn__dconv_run(ctx, &a2, &g2, x + (n * g->D + id) * xs, &s->dpk[kd],
                                             yo, ep);
                if (st != MS_OK) return st;
            }
        }
    return MS_OK;
}

static ms_status conv3d_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    c3_state *s = state;
    ms_status st = kn__need_inputs(node, in, 2 + s->a.bias);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *f = in[1];
    if (s->ref && (use_ref(s, node) || x->dtype != RT_DT_FLOAT))
        return s->ref->compute(ctx, node, s->ref_state, in, out);
    if (x->dtype != RT_DT_FLOAT || f->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                        rt_dtype_name(x->dtype), rt_dtype_name(f->dtype));
    if (f->shape.rank != 5)
        return KN_EINVAL(node, "filter must be 5-D (DHWIO), got %s", kn__shp(&f->shape));
    for (int i = 0; i < 5; i++)
        if (f->shape.dim[i] > INT32_MAX) return KN_EINVAL(node, "dimensions must be below 2^31");
    c3_geo g;
    memset(&g, 0, sizeof(g));
    if ((st = c3_geo_fill(node, &s->a, x, f->shape.dim, &g)) != MS_OK) return st;
    if (f->shape.dim[3] != g.C)
        return KN_EINVAL(node, "filter %s input depth must equal input channels %lld",
                         kn__shp(&f->shape), (long long)g.C);
    g.OC = f->shape.dim[4];
    const float *bias = NULL;
    if (s->a.bias) {
        const rt_tensor *b = in[2];
        if (b->dtype != RT_DT_FLOAT || b->nelem != g.OC)
            return KN_EINVAL(node, "bias must be %lld floats, got %s %s", (long long)g.OC,
                             rt_dtype_name(b->dtype), kn__shp(&b->shape));
        bias = b->data;
    }
    rt_shape os = {.rank = 5, .dim = {g.N, g.OD, g.OH, g.OW, g.OC}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    int64_t M = g.N * g.OD * g.OH * g.OW, K = g.KD * g.KH * g.KW * g.C;
    if (M == 0 || g.OC == 0) return MS_OK;
    kn_gemm_epi epi = {.bias = bias, .act = s->a.act, .alpha = s->a.alpha};
    const kn_gemm_epi *ep = bias || s->a.act != KN_ACT_NONE ? &epi : NULL;
    if (s->dpk && rt_shape_equal(&s->pk_shape, &f->shape) && s->pk_isa == (int)kn__gemm_isa()) {
        st = conv3d_direct(ctx, s, &g, x->data, out[0]->data, bias);
        if (st == MS_OK) return MS_OK;
        if (st != MS_ENOTSUP) return kn__errf(st, node, "out of memory");
    }
    im3_src src = {.a = &s->a, .g = &g, .x = x->data};
    kn_gemm_opnd A = {.pack = pack_im3, .arg = &src};
    kn_gemm_mat xm = {.p = x->data, .sl = g.C, .sk = 1};
    if (g.KD * g.KH * g.KW == 1 && s->a.s[0] == 1 && s->a.s[1] == 1 && s->a.s[2] == 1)
        A = (kn_gemm_opnd){.pack = kn__gemm_pack_mat, .arg = &xm}; /* 1x1x1: x is the matrix */
    kn_gemm_mat fm = {.p = f->data, .sl = 1, .sk = g.OC};
    kn_gemm_opnd B = {.pack = kn__gemm_pack_mat, .arg = &fm};
    if (s->pk.data && rt_shape_equal(&s->pk_shape, &f->shape) && s->pk_isa == (int)kn__gemm_isa())
        B = (kn_gemm_opnd){.packed = &s->pk};
    st = kn__sgemm(ctx, M, g.OC, K, &A, &B, out[0]->data, g.OC, ep);
    if (st != MS_OK) return kn__errf(st, node, "out of memory");
    return MS_OK;
}

/* ====================================================================== */
/* MaxPool3D / AvgPool3D                                                  */
/* ====================================================================== */

typedef struct pool3_job {
    const c3_attrs *a;
    const c3_geo *g;
    const float *x;
    float *y;
    int is_max;
} pool3_job;

/* One output row (n, od, oh) of OW voxels. */
static void pool3_rows(void *arg, int64_t b, int64_t e) {
    const pool3_job *j = arg;
    const c3_geo *g = j->g;
    const c3_attrs *a = j->a;
    const int64_t C = g->C;
    for (int64_t row = b; row < e; row++) {
        int64_t oh = row % g->OH, q = row / g->OH, od = q % g->OD, n = q / g->OD;
        int64_t d0 = od * a->s[0] - g->pd, h0 = oh * a->s[1] - g->ph;
        int64_t d1 = d0 + g->KD, h1 = h0 + g->KH;
        if (d0 < 0) d0 = 0;
        if (h0 < 0) h0 = 0;
        if (d1 > g->D) d1 = g->D;
        if (h1 > g->H) h1 = g->H;
        const float *xn = j->x + n * g->D * g->H * g->W * C;
        float *y = j->y + row * g->OW * C;
        for (int64_t ow = 0; ow < g->OW; ow++, y += C) {
            int64_t w0 = ow * a->s[2] - g->pw, w1 = w0 + g->KW;
            if (w0 < 0) w0 = 0;
            if (w1 > g->W) w1 = g->W;
            for (int64_t c = 0; c < C; c++)
                y[c] = j->is_max ? -FLT_MAX : 0.0f;
            int64_t cnt = 0;
            for (int64_t id = d0; id < d1; id++)
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++, cnt++) {
                        const float *xs = xn + ((id * g->H + ih) * g->W + iw) * C;
                        if (j->is_max) {
                            for (int64_t c = 0; c < C; c++)
                                y[c] = xs[c] > y[c] ? xs[c] : y[c];
                        } else {
                            for (int64_t c = 0; c < C; c++)
                                y[c] += xs[c];
                        }
                    }
            if (!j->is_max && cnt > 0) {
                float inv = 1.0f / (float)cnt;
                for (int64_t c = 0; c < C; c++)
                    y[c] *= inv;
            }
        }
    }
}

static ms_status pool3_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    c3_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = ref_prepare(node, const_in, s);
    if (st == MS_OK && use_ref(s, node)) {
        *state = s;
        return MS_OK;
    }
    if (st == MS_OK) st = c3_parse(node, 1, &s->a);
    if (st == MS_OK && (s->a.dil[0] != 1 || s->a.dil[1] != 1 || s->a.dil[2] != 1))
        st = KN_EINVAL(node, "pools have no dilations");
    if (st != MS_OK) {
        c3_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status pool3_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    c3_state *s = state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (s->ref && (use_ref(s, node) || x->dtype != RT_DT_FLOAT))
        return s->ref->compute(ctx, node, s->ref_state, in, out);
    if (x->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s",
                        rt_dtype_name(x->dtype));
    c3_geo g;
    memset(&g, 0, sizeof(g));
    if ((st = c3_geo_fill(node, &s->a, x, s->a.k, &g)) != MS_OK) return st;
    rt_shape os = {.rank = 5, .dim = {g.N, g.OD, g.OH, g.OW, g.C}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    pool3_job j = {.a = &s->a, .g = &g, .x = x->data, .y = out[0]->data,
                   .is_max = strcmp(node->op, "MaxPool3D") == 0};
    int64_t per_row = g.OW * g.C * g.KD * g.KH * g.KW;
    int64_t chunk = per_row > 0 ? 1 + 16384 / per_row : 1;
    kn_ctx_parallel_for(ctx, g.N * g.OD * g.OH, chunk, pool3_rows, &j);
    return MS_OK;
}

/* ====================================================================== */
/* Conv3DBackpropInputV2                                                  */
/* ====================================================================== */

/* Voxels of out_backprop per GEMM block (bounds the column scratch). */
#define DC3_BLOCK 2048

typedef struct dc3_state {
    c3_attrs a;
    kn_gemm_packed pk; /* constant filter packed as B [OC, KD*KH*KW*IC], or data NULL */
    rt_shape pk_shape;
    int pk_isa;
} dc3_state;

/* B operand: line l = (tap, ic) of the filter [taps, IC, OC], depth k = oc. */
static void pack_filt_t(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                        float *dst) {
    const kn_gemm_mat *m = arg; /* p = filter, sl = OC (line stride), sk = 1 */
    for (int64_t k = 0; k < nk; k++) {
        float *d = dst + k * R;
        int r = 0;
        for (; r < nl; r++)
            d[r] = m->p[(l0 + r) * m->sl + k0 + k];
        for (; r < R; r++)
            d[r] = 0;
    }
}

static ms_status dc3_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    dc3_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = c3_parse(node, 0, &s->a);
    const rt_tensor *f = const_in && node->nin > 1 ? const_in[1] : NULL;
    if (st == MS_OK && f && f->dtype == RT_DT_FLOAT && f->shape.rank == 5 && f->nelem > 0) {
        const int64_t *d = f->shape.dim;
        kn_gemm_mat m = {.p = f->data, .sl = d[4], .sk = 1};
        s->pk_shape = f->shape;
        s->pk_isa = kn__gemm_isa();
        st = kn__gemm_pack(1, d[0] * d[1] * d[2] * d[3], d[4], pack_filt_t, &m, &s->pk);
    }
    if (st != MS_OK) {
        kn__gemm_packed_free(&s->pk);
        free(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static void dc3_release(void *state) {
    dc3_state *s = state;
    if (s == NULL) return;
    kn__gemm_packed_free(&s->pk);
    free(s);
}

typedef struct dc3_job {
    const c3_geo *g;
    const c3_attrs *a;
    const float *col;
    float *dx;
    int64_t m0, L, IC;
} dc3_job;

/* col2im of rows [b, e) of a block: voxel p, tap (kd, kh, kw) adds IC values
 * at its input position. */
static void dc3_scatter(void *arg, int64_t b, int64_t e) {
    const dc3_job *j = arg;
    const c3_geo *g = j->g;
    const c3_attrs *a = j->a;
    const int64_t IC = j->IC;
    for (int64_t r = b; r < e; r++) {
        int64_t p = j->m0 + r;
        int64_t ow = p % g->OW, q = p / g->OW, oh = q % g->OH;
        q /= g->OH;
        int64_t od = q % g->OD, n = q / g->OD;
        float *dxn = j->dx + n * g->D * g->H * g->W * IC;
        const float *cr = j->col + r * j->L;
        for (int64_t kd = 0; kd < g->KD; kd++) {
            int64_t id = od * a->s[0] - g->pd + kd * a->dil[0];
            if (id < 0 || id >= g->D) continue;
            for (int64_t kh = 0; kh < g->KH; kh++) {
                int64_t ih = oh * a->s[1] - g->ph + kh * a->dil[1];
                if (ih < 0 || ih >= g->H) continue;
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t iw = ow * a->s[2] - g->pw + kw * a->dil[2];
                    if (iw < 0 || iw >= g->W) continue;
                    float *d = dxn + ((id * g->H + ih) * g->W + iw) * IC;
                    const float *c = cr + ((kd * g->KH + kh) * g->KW + kw) * IC;
                    for (int64_t i = 0; i < IC; i++)
                        d[i] += c[i];
                }
            }
        }
    }
}

static ms_status dc3_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    dc3_state *s = state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *f = in[1], *dy = in[2];
    int64_t sz[5];
    int cnt = 0;
    if ((st = kn__read_ints(node, in[0], "input_sizes", sz, 5, &cnt)) != MS_OK) return st;
    if (cnt != 5) return KN_EINVAL(node, "input_sizes must have 5 values, got %d", cnt);
    if (f->dtype != RT_DT_FLOAT || dy->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported");
    if (f->shape.rank != 5 || dy->shape.rank != 5)
        return KN_EINVAL(node, "filter and out_backprop must be 5-D, got %s and %s",
                         kn__shp(&f->shape), kn__shp(&dy->shape));
    for (int i = 0; i < 5; i++)
        if (sz[i] < 0 || sz[i] > INT32_MAX || f->shape.dim[i] > INT32_MAX)
            return KN_EINVAL(node, "sizes must be in [0, 2^31)");
    /* The forward convolution: x = dx [sz], filter [KD, KH, KW, IC, OC], y = dy. */
    rt_tensor xs = {.dtype = RT_DT_FLOAT, .shape = {.rank = 5}};
    memcpy(xs.shape.dim, sz, sizeof(sz));
    c3_geo g;
    memset(&g, 0, sizeof(g));
    if ((st = c3_geo_fill(node, &s->a, &xs, f->shape.dim, &g)) != MS_OK) return st;
    const int64_t IC = f->shape.dim[3], OC = f->shape.dim[4];
    const int64_t *dd = dy->shape.dim;
    if (IC != g.C || dd[0] != g.N || dd[1] != g.OD || dd[2] != g.OH || dd[3] != g.OW || dd[4] != OC)
        return KN_EINVAL(node,
                         "out_backprop %s does not match input_sizes and filter %s (expected "
                         "[%lld, %lld, %lld, %lld, %lld])",
                         kn__shp(&dy->shape), kn__shp(&f->shape), (long long)g.N,
                         (long long)g.OD, (long long)g.OH, (long long)g.OW, (long long)OC);
    rt_shape os = {.rank = 5};
    memcpy(os.dim, sz, sizeof(sz));
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    float *dx = out[0]->data;
    if (out[0]->nelem == 0) return MS_OK;
    memset(dx, 0, (size_t)out[0]->nelem * sizeof(float));
    const int64_t taps = g.KD * g.KH * g.KW, L = taps * IC, M = g.N * g.OD * g.OH * g.OW;
    if (M == 0 || L == 0) return MS_OK;
    kn_gemm_mat fm = {.p = f->data, .sl = OC, .sk = 1};
    kn_gemm_opnd B = {.pack = pack_filt_t, .arg = &fm};
    if (s->pk.data && rt_shape_equal(&s->pk_shape, &f->shape) && s->pk_isa == (int)kn__gemm_isa())
        B = (kn_gemm_opnd){.packed = &s->pk};
    float *col = malloc((size_t)DC3_BLOCK * (size_t)L * sizeof(float));
    if (col == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    const float *dyp = dy->data;
    for (int64_t m0 = 0; m0 < M && st == MS_OK; m0 += DC3_BLOCK) {
        int64_t mb = M - m0 < DC3_BLOCK ? M - m0 : DC3_BLOCK;
        kn_gemm_mat am = {.p = dyp + m0 * OC, .sl = OC, .sk = 1};
        kn_gemm_opnd A = {.pack = kn__gemm_pack_mat, .arg = &am};
        if ((st = kn__sgemm(ctx, mb, L, OC, &A, &B, col, L, NULL)) != MS_OK) break;
        dc3_job j = {.g = &g, .a = &s->a, .col = col, .dx = dx, .m0 = m0, .L = L, .IC = IC};
        /* Windows that do not overlap (stride >= dilated window on every
         * axis) write disjoint voxels: the rows scatter in parallel. */
        int disjoint = 1;
        for (int a = 0; a < 3; a++) {
            int64_t k = a == 0 ? g.KD : a == 1 ? g.KH : g.KW;
            if (s->a.s[a] < (k - 1) * s->a.dil[a] + 1) disjoint = 0;
        }
        if (disjoint)
            kn_ctx_parallel_for(ctx, mb, 64, dc3_scatter, &j);
        else
            dc3_scatter(&j, 0, mb);
    }
    free(col);
    if (st != MS_OK) return kn__errf(st, node, "out of memory");
    return MS_OK;
}

/* clang-format off */
const kn_kernel kn_cpu_conv3d_kernels[] = {
    {.op = "Conv3D", .prepare = conv3d_prepare, .compute = conv3d_compute, .release = c3_release},
    {.op = "_FusedConv3D", .prepare = conv3d_prepare, .compute = conv3d_compute,
     .release = c3_release},
    {.op = "MaxPool3D", .prepare = pool3_prepare, .compute = pool3_compute, .release = c3_release},
    {.op = "AvgPool3D", .prepare = pool3_prepare, .compute = pool3_compute, .release = c3_release},
    {.op = "Conv3DBackpropInputV2", .prepare = dc3_prepare, .compute = dc3_compute,
     .release = dc3_release},
    {.op = NULL},
};
/* clang-format on */
