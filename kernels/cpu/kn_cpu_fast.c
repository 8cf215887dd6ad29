/* kn_cpu_fast.c - optimised CPU kernels that take precedence over the
 * reference ones of the other groups: Conv2D, DepthwiseConv2dNative, MatMul
 * and TensorFlow's fused forms _FusedConv2D, _FusedDepthwiseConv2dNative and
 * _FusedMatMul, all on the packed SGEMM of kn_cpu_gemm.c (depthwise: a direct
 * vectorised loop).
 *
 * prepare() packs a constant filter / weight matrix once, and folds constant
 * fused arguments (bias, or batch-norm scale/offset/mean/variance) into a
 * per-channel scale and bias applied with the activation in the GEMM
 * epilogue. Cases outside the fast path (grouped convolution, depthwise
 * windows over KN_DW_MAX_TAPS taps, non-float dtypes) are handed to the
 * reference kernels of kn_cpu_nn.c / kn_cpu_reduce.c.
 */
#ifdef KN_CPU_FAST_DISABLE
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_conv.h"
#include "kn_cpu_gemm.h"
#include "kn_cpu_util.h"

/* ====================================================================== */
/* fused ops                                                              */
/* ====================================================================== */

enum { FUSE_NONE, FUSE_BIAS, FUSE_BN };

typedef struct fused {
    int kind;  /* FUSE_* */
    int nargs; /* extra inputs after x and filter */
    int nchan; /* of which per-channel (bias / batch norm); the addend is last */
    int add;   /* "Add": a residual addend of the output's shape */
    kn_act act;
    float alpha, eps;
} fused;

static int str_is(const char *s, size_t len, const char *want) {
    return strlen(want) == len && memcmp(s, want, len) == 0;
}

/* fused_ops: [BiasAdd | FusedBatchNorm] [Add] [activation]. "Add" is the
 * form TensorFlow's remapper gives a residual connection (and the one our
 * load-time fusion pass makes): act(conv + bias + addend), the addend being
 * the last argument. */
static ms_status parse_fused(const kn_node *n, int allow_bn, fused *f) {
    memset(f, 0, sizeof(*f));
    f->alpha = kn_attr_f(n, "leakyrelu_alpha", 0.2f);
    f->eps = kn_attr_f(n, "epsilon", 0.0001f);
    if (n->op[0] != '_') return MS_OK;
    const char *ops[4];
    size_t lens[4];
    int cnt = kn_attr_slist(n, "fused_ops", ops, lens, 4);
    if (cnt < 0) cnt = 0;
    if (cnt > 3) return KN_EINVAL(n, "fused_ops has %d entries, at most 3 are supported", cnt);
    int i = 0;
    if (i < cnt && str_is(ops[i], lens[i], "BiasAdd")) {
        f->kind = FUSE_BIAS;
        f->nargs = 1;
        i++;
    } else if (i < cnt && allow_bn && str_is(ops[i], lens[i], "FusedBatchNorm")) {
        f->kind = FUSE_BN;
        f->nargs = 4;
        i++;
    }
    f->nchan = f->nargs;
    if (f->kind != FUSE_NONE && i < cnt && str_is(ops[i], lens[i], "Add")) {
        f->add = 1;
        f->nargs++;
        i++;
    }
    if (i < cnt) {
        static const struct {
            const char *name;
            kn_act act;
        } acts[] = {{"Relu", KN_ACT_RELU},           {"Relu6", KN_ACT_RELU6},
                    {"LeakyRelu", KN_ACT_LEAKYRELU}, {"Elu", KN_ACT_ELU},
                    {"Sigmoid", KN_ACT_SIGMOID},     {"Tanh", KN_ACT_TANH}};
        size_t a = 0;
        while (a < sizeof(acts) / sizeof(acts[0]) && !str_is(ops[i], lens[i], acts[a].name)) a++;
        if (a == sizeof(acts) / sizeof(acts[0]))
            return kn__errf(MS_ENOTSUP, n, "fused op '%.*s' is not supported", (int)lens[i],
                            ops[i]);
        f->act = acts[a].act;
        i++;
    }
    if (i != cnt)
        return kn__errf(MS_ENOTSUP, n, "fused_ops sequence '%.*s', ... is not supported",
                        (int)lens[0], ops[0]);
    int64_t na = kn_attr_i(n, "num_args", f->nargs);
    if (na != f->nargs)
        return KN_EINVAL(n, "num_args is %lld, fused_ops need %d", (long long)na, f->nargs);
    return MS_OK;
}

/* Per-channel scale (NULL = 1) and bias from the fused arguments args[0..nargs-1]. */
static ms_status fused_channels(const kn_node *n, const fused *f, rt_tensor *const *args,
                                int64_t nch, float *scale, float *bias, int *has_scale) {
    *has_scale = 0;
    for (int i = 0; i < f->nchan; i++) {
        if (args[i] == NULL) return KN_EINVAL(n, "fused argument %d is missing", i);
        if (args[i]->dtype != RT_DT_FLOAT || args[i]->nelem != nch)
            return KN_EINVAL(n, "fused argument %d must be %lld floats, got %s %s", i,
                             (long long)nch, rt_dtype_name(args[i]->dtype),
                             kn__shp(&args[i]->shape));
    }
    if (f->kind == FUSE_BIAS) {
        memcpy(bias, args[0]->data, (size_t)nch * sizeof(float));
    } else if (f->kind == FUSE_BN) {
        const float *sc = args[0]->data, *of = args[1]->data, *mu = args[2]->data,
                    *var = args[3]->data;
        for (int64_t c = 0; c < nch; c++) {
            float s = sc[c] / sqrtf(var[c] + f->eps);
            scale[c] = s;
            bias[c] = of[c] - mu[c] * s;
        }
        *has_scale = 1;
    } else {
        memset(bias, 0, (size_t)nch * sizeof(float));
    }
    return MS_OK;
}

/* ====================================================================== */
/* shared state                                                           */
/* ====================================================================== */

typedef struct fast_state {
    fused fu;
    kn_conv_attrs a;   /* convolutions */
    int ta, tb;        /* MatMul */
    kn_gemm_packed pk; /* packed constant filter / B, or data NULL */
    kn_wino wino;      /* Winograd-transformed constant 3x3 filter, or u NULL */
    kn_deconv dk;      /* Conv2DBackpropInput: repacked constant filter, or u NULL */
    rt_shape pk_shape; /* shape it was packed from */
    float *chan;       /* constant folded [2 * nch]: scale, bias; or NULL */
    int64_t nch;
    int chan_scale;
    const kn_kernel *ref; /* reference kernel for the cases left to it */
    void *ref_state;
} fast_state;

static void fast_release(void *p) {
    fast_state *s = p;
    if (s == NULL) return;
    kn__gemm_packed_free(&s->pk);
    kn__wino_free(&s->wino);
    kn__deconv_free(&s->dk);
    free(s->chan);
    if (s->ref && s->ref->release) s->ref->release(s->ref_state);
    free(s);
}

static const kn_kernel *ref_find(const kn_kernel *tab, const char *op) {
    for (; tab->op != NULL; tab++)
        if (strcmp(tab->op, op) == 0) return tab;
    return NULL;
}

/* Folds constant fused arguments (all present) into s->chan. */
static ms_status fold_const_args(const kn_node *n, fast_state *s, rt_tensor *const *const_in,
                                 int first) {
    if (const_in == NULL || s->fu.nchan == 0 || n->nin < first + s->fu.nchan) return MS_OK;
    for (int i = 0; i < s->fu.nchan; i++)
        if (const_in[first + i] == NULL) return MS_OK;
    int64_t nch = const_in[first]->nelem;
    if (nch <= 0) return MS_OK;
    s->chan = malloc((size_t)nch * 2 * sizeof(float));
    if (s->chan == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", n->name);
    s->nch = nch;
    ms_status st =
        fused_channels(n, &s->fu, const_in + first, nch, s->chan, s->chan + nch, &s->chan_scale);
    if (st != MS_OK) {
        free(s->chan);
        s->chan = NULL;
    }
    return st;
}

/* Sets up epi for nch channels: the folded constants, or buf (2 * nch
 * floats, filled from the inputs). */
static ms_status epi_setup(const kn_node *n, const fast_state *s, rt_tensor *const *args,
                           int64_t nch, float *buf, kn_gemm_epi *epi) {
    memset(epi, 0, sizeof(*epi));
    epi->act = s->fu.act;
    epi->alpha = s->fu.alpha;
    if (s->fu.kind == FUSE_NONE) return MS_OK;
    if (s->chan && s->nch == nch) {
        epi->scale = s->chan_scale ? s->chan : NULL;
        epi->bias = s->chan + nch;
        return MS_OK;
    }
    int hs;
    ms_status st = fused_channels(n, &s->fu, args, nch, buf, buf + nch, &hs);
    if (st != MS_OK) return st;
    epi->scale = hs ? buf : NULL;
    epi->bias = buf + nch;
    return MS_OK;
}

static int epi_is_noop(const kn_gemm_epi *e) {
    return e->scale == NULL && e->bias == NULL && e->act == KN_ACT_NONE && e->add == NULL;
}

/* The fused addend of a node with "Add" in fused_ops: when it has exactly the
 * output's shape, epi reads it in place (set add and ybase); otherwise
 * *bcast is set and the caller adds it afterwards with broadcasting. */
static ms_status epi_addend(const kn_node *n, const fast_state *s, rt_tensor *const *in,
                            const rt_tensor *y, kn_gemm_epi *epi, int *bcast) {
    *bcast = 0;
    if (!s->fu.add) return MS_OK;
    const rt_tensor *ad = in[2 + s->fu.nargs - 1];
    if (ad->dtype != RT_DT_FLOAT)
        return KN_EINVAL(n, "the fused addend must be float, got %s", rt_dtype_name(ad->dtype));
    if (rt_shape_equal(&ad->shape, &y->shape)) {
        epi->add = ad->data;
        epi->ybase = y->data;
        return MS_OK;
    }
    *bcast = 1;
    return MS_OK;
}

/* y = act(y + addend) with NumPy broadcasting of the addend to y's shape
 * (the rare fused residual whose shape differs from the output's). */
static ms_status add_bcast_act(const kn_node *n, const rt_tensor *ad, rt_tensor *y, kn_act act,
                               float alpha) {
    kn_bcast bc;
    const rt_shape *shapes[2] = {&y->shape, &ad->shape};
    ms_status st = kn__bcast_init(&bc, n, shapes, 2);
    if (st != MS_OK) return st;
    if (!rt_shape_equal(&bc.out, &y->shape)) /* the addend may not enlarge the output */
        return KN_EINVAL(n, "fused addend of shape %s does not broadcast to the output %s",
                         kn__shp(&ad->shape), kn__shp(&y->shape));
    float *yv = y->data;
    const float *av = ad->data;
    const int64_t inner = bc.dim[bc.rank - 1], as = bc.stride[1][bc.rank - 1];
    for (int64_t r = 0; r < bc.rows; r++) {
        int64_t offs[2];
        kn__bcast_row(&bc, r, offs, 2);
        float *yr = yv + offs[0];
        const float *ar = av + offs[1];
        for (int64_t k = 0; k < inner; k++) yr[k] += ar[k * as];
    }
    kn_gemm_epi e = {.act = act, .alpha = alpha};
    if (act != KN_ACT_NONE && y->nelem > 0) kn__gemm_epilogue(&e, yv, y->nelem, 0, 1, 0, y->nelem);
    return MS_OK;
}

/* ====================================================================== */
/* Conv2D, _FusedConv2D, DepthwiseConv2dNative, _FusedDepthwiseConv2dNative */
/* ====================================================================== */

static int is_depthwise(const kn_node *n) { return strstr(n->op, "Depthwise") != NULL; }

static ms_status conv_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    fast_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    int dw = is_depthwise(node);
    ms_status st = parse_fused(node, !dw, &s->fu);
    if (st == MS_OK) st = kn__conv_parse(node, &s->a);
    if (st == MS_OK) {
        s->ref = ref_find(kn_cpu_nn_kernels, dw ? "DepthwiseConv2dNative" : "Conv2D");
        if (s->ref && s->ref->prepare) st = s->ref->prepare(node, const_in, &s->ref_state);
    }
    if (st == MS_OK) st = fold_const_args(node, s, const_in, 2);
    const rt_tensor *f = const_in && node->nin > 1 ? const_in[1] : NULL;
    if (st == MS_OK && !dw && f && f->dtype == RT_DT_FLOAT && f->shape.rank == 4) {
        s->pk_shape = f->shape;
        /* 3x3 stride 1 with 32 or more input and output channels: the
         * Winograd form (fewer channels make its GEMMs too short to win;
         * docs/kernels_cpu.md), which then always runs; else the filter
         * packed for the direct / implicit-GEMM kernels. */
        if (!s->a.nchw && f->shape.dim[0] == 3 && f->shape.dim[1] == 3 &&
            f->shape.dim[2] >= 32 && f->shape.dim[3] >= 32 && s->a.sh == 1 && s->a.sw == 1 &&
            s->a.dh == 1 && s->a.dw == 1 && kn__gemm_isa() == KN_GEMM_ISA_AVX512 &&
            getenv("DCMSERVE_NO_WINOGRAD") == NULL)
            st = kn__wino_pack(f, &s->wino);
        /* Not Winograd, or a filter beyond its limits: the packed form. */
        if (s->wino.u == NULL && (st == MS_OK || st == MS_EINVAL))
            st = kn__conv_pack_filter(s->a.nchw, f, &s->pk);
    }
    if (st != MS_OK) {
        fast_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

/* Applies epi to a finished NHWC/NCHW output (reference fallback). */
static void epi_apply_tensor(const kn_gemm_epi *epi, int nchw, rt_tensor *y) {
    if (epi_is_noop(epi) || y->nelem == 0) return;
    const int64_t *d = y->shape.dim;
    kn_gemm_epi e = *epi;
    if (!nchw) {
        e.per_row = 0;
        kn__gemm_epilogue(&e, y->data, d[3], 0, d[0] * d[1] * d[2], 0, d[3]);
        return;
    }
    e.per_row = 1;
    for (int64_t n = 0; n < d[0]; n++)
        kn__gemm_epilogue(&e, (float *)y->data + n * d[1] * d[2] * d[3], d[2] * d[3], 0, d[1], 0,
                          d[2] * d[3]);
}

#define CHAN_STACK 1024

/* Re-sets the current error message with the node named. */
static ms_status rename_err(const kn_node *node, ms_status st) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", ms_errmsg());
    return kn__errf(st, node, "%s", msg);
}

static ms_status conv_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    fast_state *s = state;
    const int dw = is_depthwise(node);
    ms_status st = kn__need_inputs(node, in, 2 + s->fu.nargs);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *f = in[1];
    const int grouped = !dw && x->shape.rank == 4 && f->shape.rank == 4 &&
                        f->shape.dim[2] != x->shape.dim[s->a.nchw ? 1 : 3];
    const int wide = dw && f->shape.rank == 4 && f->shape.dim[0] * f->shape.dim[1] > KN_DW_MAX_TAPS;
    if (x->dtype != RT_DT_FLOAT || f->dtype != RT_DT_FLOAT || grouped || wide) {
        if (s->ref == NULL)
            return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                            rt_dtype_name(x->dtype), rt_dtype_name(f->dtype));
        /* The reference kernels do grouped convolution, very wide depthwise
         * windows and other dtypes. */
        if ((st = s->ref->compute(ctx, node, s->ref_state, in, out)) != MS_OK) return st;
        if (s->fu.kind == FUSE_NONE && s->fu.act == KN_ACT_NONE) return MS_OK;
        if (out[0]->dtype != RT_DT_FLOAT)
            return kn__errf(MS_ENOTSUP, node, "fused ops need float, got %s",
                            rt_dtype_name(out[0]->dtype));
        int64_t nch = out[0]->shape.dim[s->a.nchw ? 1 : 3];
        float stackbuf[2 * CHAN_STACK], *buf = nch <= CHAN_STACK ? stackbuf : NULL;
        if (buf == NULL && (buf = malloc((size_t)nch * 2 * sizeof(float))) == NULL)
            return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
        kn_gemm_epi epi;
        st = epi_setup(node, s, in + 2, nch, buf, &epi);
        if (st == MS_OK && s->fu.add) epi.act = KN_ACT_NONE; /* after the addend */
        if (st == MS_OK) epi_apply_tensor(&epi, s->a.nchw, out[0]);
        if (st == MS_OK && s->fu.add)
            st = add_bcast_act(node, in[2 + s->fu.nargs - 1], out[0], s->fu.act, s->fu.alpha);
        if (buf != stackbuf) free(buf);
        return st;
    }
    kn_conv_geo g;
    if ((st = kn__conv_geo(node, &s->a, x, f, dw, &g)) != MS_OK) return st;
    rt_shape os = kn__conv_oshape(&s->a, &g);
    float stackbuf[2 * CHAN_STACK], *buf = g.OC <= CHAN_STACK ? stackbuf : NULL;
    if (buf == NULL && (buf = malloc((size_t)g.OC * 2 * sizeof(float))) == NULL)
        return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    kn_gemm_epi epi;
    if ((st = epi_setup(node, s, in + 2, g.OC, buf, &epi)) != MS_OK) goto done;
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) goto done;
    int bcast;
    if ((st = epi_addend(node, s, in, out[0], &epi, &bcast)) != MS_OK) goto done;
    if (bcast) epi.act = KN_ACT_NONE; /* applied after the broadcast addend */
    const kn_gemm_epi *ep = epi_is_noop(&epi) ? NULL : &epi;
    if (dw) {
        st = kn__dwconv_run(ctx, &s->a, &g, x->data, f->data, out[0]->data, ep);
    } else {
        const kn_gemm_packed *pk =
            s->pk.data && rt_shape_equal(&s->pk_shape, &f->shape) ? &s->pk : NULL;
        if (kn__wino_ok(&s->a, &g, &s->wino)) {
            kn_gemm_epi e = ep ? *ep : (kn_gemm_epi){0};
            st = kn__wino_run(ctx, &g, x->data, &s->wino, out[0]->data, ep ? &e : NULL);
        } else {
            st = kn__conv_run(ctx, &s->a, &g, x->data, f->data, pk, out[0]->data, ep);
        }
    }
    if (st != MS_OK) st = rename_err(node, st);
    if (st == MS_OK && bcast)
        st = add_bcast_act(node, in[2 + s->fu.nargs - 1], out[0], s->fu.act, s->fu.alpha);
done:
    if (buf != stackbuf) free(buf);
    return st;
}

/* ====================================================================== */
/* Conv2DBackpropInput (transposed convolution)                           */
/* ====================================================================== */

/* Only the common stride = window, unpadded, NHWC float case with a constant
 * filter has a fast kernel (kn__deconv_run); the rest is the reference. */
static ms_status deconv_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    fast_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = kn__conv_parse(node, &s->a);
    if (st == MS_OK) {
        s->ref = ref_find(kn_cpu_nn_kernels, "Conv2DBackpropInput");
        if (s->ref && s->ref->prepare) st = s->ref->prepare(node, const_in, &s->ref_state);
    }
    const rt_tensor *f = const_in && node->nin > 1 ? const_in[1] : NULL;
    const kn_conv_attrs *a = &s->a;
    int zero_pads = a->padding != KN_PAD_EXPLICIT ||
                    (a->ep[0] == 0 && a->ep[1] == 0 && a->ep[2] == 0 && a->ep[3] == 0);
    if (st == MS_OK && f && f->dtype == RT_DT_FLOAT && f->shape.rank == 4 && !a->nchw &&
        zero_pads && a->dh == 1 && a->dw == 1 && a->sh == f->shape.dim[0] &&
        a->sw == f->shape.dim[1] && kn__gemm_isa() == KN_GEMM_ISA_AVX512) {
        st = kn__deconv_pack(f, &s->dk);
        s->pk_shape = f->shape;
        /* A filter outside the fast kernel's limits runs on the reference. */
        if (st == MS_EINVAL) st = MS_OK;
    }
    if (st != MS_OK) {
        fast_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status deconv_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    fast_state *s = state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *sz = in[0], *f = in[1], *dy = in[2];
    int64_t v[4];
    int cnt = 0;
    /* The fast case: dx [N, OH*KH, OW*KW, C] for dy [N, OH, OW, OC] (then
     * SAME and VALID both mean no padding). */
    int fast = s->dk.u != NULL && f->dtype == RT_DT_FLOAT && dy->dtype == RT_DT_FLOAT &&
               rt_shape_equal(&f->shape, &s->pk_shape) && dy->shape.rank == 4 &&
               dy->shape.dim[3] == s->dk.OC &&
               kn__read_ints(node, sz, "input_sizes", v, 4, &cnt) == MS_OK && cnt == 4 &&
               v[0] == dy->shape.dim[0] && v[1] == dy->shape.dim[1] * s->dk.KH &&
               v[2] == dy->shape.dim[2] * s->dk.KW && v[3] == s->dk.C;
    if (!fast) return s->ref->compute(ctx, node, s->ref_state, in, out);
    rt_shape os = {.rank = 4, .dim = {v[0], v[1], v[2], v[3]}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    kn__deconv_run(ctx, &s->dk, dy->shape.dim[0], dy->shape.dim[1], dy->shape.dim[2], dy->data,
                   out[0]->data);
    return MS_OK;
}

/* ====================================================================== */
/* MatMul, _FusedMatMul                                                   */
/* ====================================================================== */

static ms_status matmul_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    fast_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    s->ta = kn_attr_b(node, "transpose_a", 0);
    s->tb = kn_attr_b(node, "transpose_b", 0);
    ms_status st = parse_fused(node, 0, &s->fu);
    if (st == MS_OK) {
        s->ref = ref_find(kn_cpu_reduce_kernels, "MatMul");
        if (s->ref && s->ref->prepare) st = s->ref->prepare(node, const_in, &s->ref_state);
    }
    if (st == MS_OK) st = fold_const_args(node, s, const_in, 2);
    const rt_tensor *b = const_in && node->nin > 1 ? const_in[1] : NULL;
    if (st == MS_OK && b && b->dtype == RT_DT_FLOAT && b->shape.rank == 2) {
        int64_t K = s->tb ? b->shape.dim[1] : b->shape.dim[0];
        int64_t N = s->tb ? b->shape.dim[0] : b->shape.dim[1];
        kn_gemm_mat m = {.p = b->data, .sl = s->tb ? K : 1, .sk = s->tb ? 1 : N};
        st = kn__gemm_pack(1, N, K, kn__gemm_pack_mat, &m, &s->pk);
        s->pk_shape = b->shape;
    }
    if (st != MS_OK) {
        fast_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status matmul_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    fast_state *s = state;
    ms_status st = kn__need_inputs(node, in, 2 + s->fu.nargs);
    if (st != MS_OK) return st;
    const rt_tensor *a = in[0], *b = in[1];
    if (a->dtype != RT_DT_FLOAT || b->dtype != RT_DT_FLOAT) {
        if (s->fu.kind != FUSE_NONE || s->fu.act != KN_ACT_NONE || s->ref == NULL)
            return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                            rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
        return s->ref->compute(ctx, node, s->ref_state, in, out);
    }
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return KN_EINVAL(node, "a and b must be matrices, got %s and %s", kn__shp(&a->shape),
                         kn__shp(&b->shape));
    int64_t M = s->ta ? a->shape.dim[1] : a->shape.dim[0];
    int64_t K = s->ta ? a->shape.dim[0] : a->shape.dim[1];
    int64_t K2 = s->tb ? b->shape.dim[1] : b->shape.dim[0];
    int64_t N = s->tb ? b->shape.dim[0] : b->shape.dim[1];
    if (K != K2)
        return KN_EINVAL(node, "inner dimensions differ: a %s%s, b %s%s", kn__shp(&a->shape),
                         s->ta ? " transposed" : "", kn__shp(&b->shape),
                         s->tb ? " transposed" : "");
    float stackbuf[2 * CHAN_STACK], *buf = N <= CHAN_STACK ? stackbuf : NULL;
    if (buf == NULL && (buf = malloc((size_t)N * 2 * sizeof(float))) == NULL)
        return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    kn_gemm_epi epi;
    rt_shape os = {.rank = 2, .dim = {M, N}};
    if ((st = epi_setup(node, s, in + 2, N, buf, &epi)) != MS_OK) goto done;
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) goto done;
    int bcast;
    if ((st = epi_addend(node, s, in, out[0], &epi, &bcast)) != MS_OK) goto done;
    if (bcast) epi.act = KN_ACT_NONE;
    kn_gemm_mat am = {.p = a->data, .sl = s->ta ? 1 : K, .sk = s->ta ? M : 1};
    kn_gemm_mat bm = {.p = b->data, .sl = s->tb ? K : 1, .sk = s->tb ? 1 : N};
    kn_gemm_opnd A = {.pack = kn__gemm_pack_mat, .arg = &am};
    kn_gemm_opnd B = {.pack = kn__gemm_pack_mat, .arg = &bm};
    if (s->pk.data && rt_shape_equal(&s->pk_shape, &b->shape)) B = (kn_gemm_opnd){.packed = &s->pk};
    st = kn__sgemm(ctx, M, N, K, &A, &B, out[0]->data, N, epi_is_noop(&epi) ? NULL : &epi);
    if (st != MS_OK) st = rename_err(node, st);
    if (st == MS_OK && bcast)
        st = add_bcast_act(node, in[2 + s->fu.nargs - 1], out[0], s->fu.act, s->fu.alpha);
done:
    if (buf != stackbuf) free(buf);
    return st;
}

/* Building with -DKN_CPU_FAST_DISABLE leaves the table empty, so the
 * reference kernels run everything (model-level before/after measurements). */
/* clang-format off */
const kn_kernel kn_cpu_fast_kernels[] = {
#ifndef KN_CPU_FAST_DISABLE
    {.op = "Conv2D", .prepare = conv_prepare, .compute = conv_compute, .release = fast_release},
    {.op = "_FusedConv2D", .prepare = conv_prepare, .compute = conv_compute,
     .release = fast_release},
    {.op = "DepthwiseConv2dNative", .prepare = conv_prepare, .compute = conv_compute,
     .release = fast_release},
    {.op = "_FusedDepthwiseConv2dNative", .prepare = conv_prepare, .compute = conv_compute,
     .release = fast_release},
    {.op = "Conv2DBackpropInput", .prepare = deconv_prepare, .compute = deconv_compute,
     .release = fast_release},
    {.op = "MatMul", .prepare = matmul_prepare, .compute = matmul_compute,
     .release = fast_release},
    {.op = "_FusedMatMul", .prepare = matmul_prepare, .compute = matmul_compute,
     .release = fast_release},
#endif
    {.op = NULL},
};
/* clang-format on */
