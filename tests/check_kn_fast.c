/* check_kn_fast.c - the fast CPU kernels (kn_cpu_fast.c on the packed SGEMM)
 * against the reference kernels of kn_cpu_nn.c / kn_cpu_reduce.c on random
 * shapes, the fused ops against the unfused chain of reference kernels, and
 * every GEMM micro-kernel family the CPU supports (forced through
 * kn__gemm_set_isa), with filters both constant (packed in prepare) and fed
 * per request.
 *
 * Tolerance: max |fast - ref| <= 1e-4 * max(1, max |ref|).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_gemm.h"
#include "rt_exec.h"
#include "util_node.h"

#define S TU_SHAPE

static const kn_kernel *find(const kn_kernel *tab, const char *op) {
    for (; tab->op; tab++)
        if (strcmp(tab->op, op) == 0) return tab;
    ck_abort_msg("kernel %s not found", op);
    return NULL;
}

/* Runs kernel k on def; inputs whose bit is set in const_mask are also given
 * to prepare as constants. Returns the output (the inputs stay the caller's). */
static rt_tensor *run_k(const kn_kernel *k, const Tensorflow__NodeDef *d, rt_tensor *const *in,
                        int nin, unsigned const_mask) {
    kn_node kn = {.name = d->name, .op = d->op, .def = d, .attrs = &rt_nodedef_attrs, .nin = nin, .nout = 1};
    rt_tensor *cin[8] = {0};
    for (int i = 0; i < nin; i++) cin[i] = (const_mask >> i) & 1 ? in[i] : NULL;
    void *state = NULL;
    if (k->prepare) {
        ms_status st = k->prepare(&kn, cin, &state);
        ck_assert_msg(st == MS_OK, "%s prepare: %s", d->op, ms_errmsg());
    }
    kn_ctx ctx = {.nthreads = 2};
    rt_tensor *out = NULL;
    ms_status st = k->compute(&ctx, &kn, state, in, &out);
    if (k->release) k->release(state);
    ck_assert_msg(st == MS_OK, "%s compute: %s", d->op, ms_errmsg());
    ck_assert_ptr_nonnull(out);
    return out;
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static rt_tensor *rand_t(rt_shape s) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    float *p = t->data;
    for (int64_t i = 0; i < t->nelem; i++) p[i] = frand();
    return t;
}

static void check_close(const rt_tensor *got, const rt_tensor *want, const char *what) {
    char a[96], b[96];
    ck_assert_msg(rt_shape_equal(&got->shape, &want->shape), "%s: shape %s, expected %s", what,
                  rt_shape_str(&got->shape, a, sizeof a), rt_shape_str(&want->shape, b, sizeof b));
    const float *g = got->data, *w = want->data;
    float mag = 1, diff = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < want->nelem; i++) {
        if (fabsf(w[i]) > mag) mag = fabsf(w[i]);
        float d = fabsf(g[i] - w[i]);
        if (!(d <= diff)) {
            diff = d;
            at = i;
        }
    }
    ck_assert_msg(diff <= 1e-4f * mag,
                  "%s: max abs diff %g at %lld (got %g, want %g), magnitude %g", what, diff,
                  (long long)at, g[at], w[at], mag);
}

/* The ISAs this CPU can run; the test loops force each in turn. */
static int isas(kn_gemm_isa *out) {
    int n = 0;
    for (int i = KN_GEMM_ISA_C; i <= KN_GEMM_ISA_AVX512; i++)
        if (kn__gemm_set_isa((kn_gemm_isa)i) == MS_OK) out[n++] = (kn_gemm_isa)i;
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
    return n;
}

/* ====================================================================== */
/* conv cases                                                             */
/* ====================================================================== */

typedef struct conv_case {
    int64_t N, H, W, C, KH, KW, OC, sh, sw, dh, dw;
    const char *pad;
    int64_t ep[4]; /* EXPLICIT top, bottom, left, right */
} conv_case;

/* clang-format off */
static const conv_case conv_cases[] = {
    {1, 7, 9, 5, 3, 3, 17, 1, 1, 1, 1, "SAME", {0}},
    {3, 8, 8, 3, 1, 1, 33, 1, 1, 1, 1, "VALID", {0}},     /* 1x1: plain GEMM, batch 3 */
    {1, 15, 15, 3, 7, 7, 64, 2, 2, 1, 1, "SAME", {0}},    /* 7x7/2 stem */
    {1, 10, 11, 19, 3, 3, 31, 1, 1, 2, 2, "VALID", {0}},  /* dilation */
    {3, 9, 7, 16, 3, 3, 40, 2, 1, 1, 1, "SAME", {0}},
    {1, 12, 12, 37, 5, 5, 9, 1, 1, 1, 3, "EXPLICIT", {1, 2, 0, 3}},
    {2, 6, 6, 300, 3, 3, 70, 1, 1, 1, 1, "SAME", {0}},    /* K = 2700: several depth slices */
    {1, 5, 6, 8, 1, 1, 8, 2, 2, 1, 1, "VALID", {0}},      /* 1x1 stride 2 */
    {1, 14, 14, 64, 3, 3, 64, 1, 1, 1, 1, "SAME", {0}},
    {1, 30, 31, 13, 2, 3, 100, 3, 2, 1, 1, "VALID", {0}}, /* many tiles, odd everything */
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "SAME", {0}},
    /* wide rows: several pixel groups per row, zero-padded slabs at the borders */
    {2, 9, 40, 16, 3, 3, 48, 1, 1, 2, 1, "SAME", {0}},
    {1, 20, 64, 3, 7, 7, 32, 2, 2, 1, 1, "SAME", {0}},
    {1, 6, 45, 8, 3, 2, 20, 1, 3, 1, 1, "EXPLICIT", {1, 1, 4, 0}},
    /* 3x3 stride 1 (Winograd with a constant filter on AVX-512): odd sizes,
     * asymmetric explicit pads, VALID, channels not multiples of 16; then
     * the direct kernel with 16 channels */
    {1, 9, 10, 33, 3, 3, 35, 1, 1, 1, 1, "EXPLICIT", {2, 0, 1, 2}},
    {2, 11, 8, 32, 3, 3, 48, 1, 1, 1, 1, "VALID", {0}},
    {1, 12, 12, 16, 3, 3, 16, 1, 1, 1, 1, "SAME", {0}},
    {1, 3, 2, 40, 3, 3, 66, 1, 1, 1, 1, "SAME", {0}},
    {1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, "SAME", {0}},
    /* pads larger than the window: output rows / tiles that see only padding */
    {1, 1, 2, 32, 3, 3, 32, 1, 1, 1, 1, "SAME", {0}},
    {1, 3, 3, 32, 3, 3, 35, 1, 1, 1, 1, "EXPLICIT", {3, 3, 4, 2}},
    {1, 3, 4, 5, 3, 3, 17, 2, 1, 1, 1, "EXPLICIT", {3, 4, 4, 2}},
};
/* clang-format on */

static Tensorflow__NodeDef *conv_def(const char *op, const conv_case *c, int nchw) {
    Tensorflow__NodeDef *d = tu_node_new(op, "fastconv");
    tu_attr_s(d, "padding", c->pad);
    if (nchw) {
        tu_attr_s(d, "data_format", "NCHW");
        tu_attr_ints(d, "strides", 1, 1, c->sh, c->sw);
        tu_attr_ints(d, "dilations", 1, 1, c->dh, c->dw);
        if (strcmp(c->pad, "EXPLICIT") == 0)
            tu_attr_ints(d, "explicit_paddings", 0, 0, 0, 0, c->ep[0], c->ep[1], c->ep[2],
                         c->ep[3]);
    } else {
        tu_attr_ints(d, "strides", 1, c->sh, c->sw, 1);
        tu_attr_ints(d, "dilations", 1, c->dh, c->dw, 1);
        if (strcmp(c->pad, "EXPLICIT") == 0)
            tu_attr_ints(d, "explicit_paddings", 0, 0, c->ep[0], c->ep[1], c->ep[2], c->ep[3], 0,
                         0);
    }
    return d;
}

static rt_shape xshape(const conv_case *c, int nchw) {
    return nchw ? S(c->N, c->C, c->H, c->W) : S(c->N, c->H, c->W, c->C);
}

/* Conv2D: every case, both layouts, constant and fed filters, every ISA. */
START_TEST(conv_vs_reference) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "Conv2D");
    const kn_kernel *ref = find(kn_cpu_nn_kernels, "Conv2D");
    for (size_t ci = 0; ci < sizeof(conv_cases) / sizeof(conv_cases[0]); ci++) {
        const conv_case *c = &conv_cases[ci];
        for (int nchw = 0; nchw < 2; nchw++) {
            rt_tensor *in[2] = {rand_t(xshape(c, nchw)), rand_t(S(c->KH, c->KW, c->C, c->OC))};
            Tensorflow__NodeDef *d = conv_def("Conv2D", c, nchw);
            rt_tensor *want = run_k(ref, d, in, 2, 0);
            for (int i = 0; i < nisa; i++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                for (unsigned cm = 0; cm <= 2; cm += 2) {
                    rt_tensor *got = run_k(fast, d, in, 2, cm);
                    char what[96];
                    snprintf(what, sizeof what, "case %zu %s %s filter %s", ci,
                             nchw ? "NCHW" : "NHWC", cm ? "const" : "fed",
                             kn__gemm_isa_name(isa[i]));
                    check_close(got, want, what);
                    rt_tensor_unref(got);
                }
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
            rt_tensor_unref(want);
            tu_node_free(d);
            tu_unref(in, 2);
        }
    }
}
END_TEST

/* A filter packed for one ISA still gives the right result when another
 * ISA runs the request (repacked on the fly). */
START_TEST(conv_packed_isa_switch) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    const conv_case *c = &conv_cases[0];
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "Conv2D");
    for (int nchw = 0; nchw < 2; nchw++) {
        rt_tensor *in[2] = {rand_t(xshape(c, nchw)), rand_t(S(c->KH, c->KW, c->C, c->OC))};
        Tensorflow__NodeDef *d = conv_def("Conv2D", c, nchw);
        rt_tensor *want = run_k(find(kn_cpu_nn_kernels, "Conv2D"), d, in, 2, 0);
        kn_node kn = {.name = d->name, .op = d->op, .def = d, .attrs = &rt_nodedef_attrs, .nin = 2, .nout = 1};
        for (int p = 0; p < nisa; p++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[p]), MS_OK);
            void *state = NULL;
            rt_tensor *cin[2] = {NULL, in[1]};
            ck_assert_int_eq(fast->prepare(&kn, cin, &state), MS_OK);
            for (int r = 0; r < nisa; r++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[r]), MS_OK);
                kn_ctx ctx = {.nthreads = 2};
                rt_tensor *got = NULL;
                ck_assert_int_eq(fast->compute(&ctx, &kn, state, in, &got), MS_OK);
                check_close(got, want, "isa switch");
                rt_tensor_unref(got);
            }
            fast->release(state);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        rt_tensor_unref(want);
        tu_node_free(d);
        tu_unref(in, 2);
    }
}
END_TEST

/* An output over 32 MiB (DC_STREAM_BYTES) is written by the AVX-512 direct
 * kernel with streaming stores, from both threads: 1000x1000x1, 3x3 stride 2,
 * 48 channels (a 32-channel panel and a 16-channel one), bias and Relu fused:
 * 500x500x48 floats = 48 MB. Also a 16-channel output under the size, which
 * stays on the ordinary stores. */
START_TEST(conv_streamed_output) {
    static const conv_case cases[] = {
        {1, 1000, 1000, 1, 3, 3, 48, 2, 2, 1, 1, "SAME", {0}},
        {1, 200, 200, 1, 3, 3, 16, 2, 2, 1, 1, "SAME", {0}},
    };
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "_FusedConv2D");
    const kn_kernel *ref = find(kn_cpu_nn_kernels, "Conv2D");
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const conv_case *c = &cases[ci];
        rt_tensor *in[3] = {rand_t(xshape(c, 0)), rand_t(S(c->KH, c->KW, c->C, c->OC)),
                            rand_t(S(c->OC))};
        Tensorflow__NodeDef *d = conv_def("Conv2D", c, 0);
        Tensorflow__NodeDef *f = conv_def("_FusedConv2D", c, 0);
        static const char *const ops[] = {"BiasAdd", "Relu"};
        tu_attr_slist(f, "fused_ops", 2, ops);
        tu_attr_i(f, "num_args", 1);
        rt_tensor *want = run_k(ref, d, in, 2, 0);
        float *w = want->data;
        const float *b = in[2]->data;
        for (int64_t i = 0; i < want->nelem; i++) {
            float v = w[i] + b[i % c->OC];
            w[i] = v > 0 ? v : 0;
        }
        rt_tensor *got = run_k(fast, f, in, 3, 6);
        check_close(got, want, ci == 0 ? "streamed output" : "small output");
        rt_tensor_unref(got);
        rt_tensor_unref(want);
        tu_node_free(d);
        tu_node_free(f);
        tu_unref(in, 3);
    }
}
END_TEST

/* The direct NHWC kernel (constant filter, AVX2 / AVX-512) sums a window's
 * depth in slices of 128, each from zero, the slices added in turn (as ONNX
 * Runtime's MLAS does): a 1x1 conv over 384 channels must equal that sum bit
 * for bit, and the data are such that one long chain gives another result. */
START_TEST(conv_depth_slices) {
    enum { W = 5, C = 384, OC = 32, SL = 128 };
    const conv_case c = {1, 1, W, C, 1, 1, OC, 1, 1, 1, 1, "VALID", {0}};
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "Conv2D");
    rt_tensor *in[2] = {rand_t(xshape(&c, 0)), rand_t(S(1, 1, C, OC))};
    const float *x = in[0]->data, *f = in[1]->data;
    float want[W * OC];
    int chain_differs = 0;
    for (int p = 0; p < W; p++)
        for (int o = 0; o < OC; o++) {
            float total = 0, part = 0, chain = 0;
            for (int k = 0; k < C; k++) {
                part = fmaf(x[p * C + k], f[k * OC + o], part);
                chain = fmaf(x[p * C + k], f[k * OC + o], chain);
                if ((k + 1) % SL == 0 || k + 1 == C) {
                    total += part;
                    part = 0;
                }
            }
            want[p * OC + o] = total;
            chain_differs += chain != total;
        }
    ck_assert_msg(chain_differs > 0, "the data do not tell the orders apart");
    Tensorflow__NodeDef *d = conv_def("Conv2D", &c, 0);
    int ran = 0;
    for (int i = KN_GEMM_ISA_AVX2; i <= KN_GEMM_ISA_AVX512; i++) {
        if (kn__gemm_set_isa((kn_gemm_isa)i) != MS_OK) continue;
        rt_tensor *got = run_k(fast, d, in, 2, 2);
        const float *g = got->data;
        for (int e = 0; e < W * OC; e++)
            ck_assert_msg(g[e] == want[e], "%s: element %d is %.9g, the 128-slice sum %.9g",
                          kn__gemm_isa_name((kn_gemm_isa)i), e, g[e], want[e]);
        rt_tensor_unref(got);
        ran++;
    }
    kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
    if (ran == 0) printf("conv_depth_slices: no AVX2 on this CPU, the direct kernel is not used\n");
    tu_node_free(d);
    tu_unref(in, 2);
}
END_TEST

START_TEST(depthwise_vs_reference) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "DepthwiseConv2dNative");
    const kn_kernel *ref = find(kn_cpu_nn_kernels, "DepthwiseConv2dNative");
    /* OC here is the channel multiplier. */
    static const conv_case dcases[] = {
        {1, 9, 8, 37, 3, 3, 1, 1, 1, 1, 1, "SAME", {0}},
        {3, 12, 11, 32, 3, 3, 1, 2, 2, 1, 1, "SAME", {0}},
        {1, 10, 10, 19, 5, 5, 1, 1, 1, 2, 2, "VALID", {0}},
        {1, 7, 7, 5, 3, 3, 3, 1, 2, 1, 1, "SAME", {0}}, /* multiplier 3 */
        {2, 8, 9, 8, 3, 2, 1, 1, 1, 1, 1, "EXPLICIT", {2, 0, 1, 1}},
        {1, 6, 6, 48, 1, 1, 1, 1, 1, 1, 1, "VALID", {0}},
        {1, 18, 17, 3, 17, 16, 1, 1, 1, 1, 1, "SAME", {0}}, /* 272 taps: reference fallback */
    };
    for (size_t ci = 0; ci < sizeof(dcases) / sizeof(dcases[0]); ci++) {
        const conv_case *c = &dcases[ci];
        for (int nchw = 0; nchw < 2; nchw++) {
            rt_tensor *in[2] = {rand_t(xshape(c, nchw)), rand_t(S(c->KH, c->KW, c->C, c->OC))};
            Tensorflow__NodeDef *d = conv_def("DepthwiseConv2dNative", c, nchw);
            rt_tensor *want = run_k(ref, d, in, 2, 0);
            for (int i = 0; i < nisa; i++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                rt_tensor *got = run_k(fast, d, in, 2, 2);
                char what[96];
                snprintf(what, sizeof what, "depthwise case %zu %s %s", ci, nchw ? "NCHW" : "NHWC",
                         kn__gemm_isa_name(isa[i]));
                check_close(got, want, what);
                rt_tensor_unref(got);
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
            rt_tensor_unref(want);
            tu_node_free(d);
            tu_unref(in, 2);
        }
    }
}
END_TEST

/* ====================================================================== */
/* MatMul                                                                 */
/* ====================================================================== */

START_TEST(matmul_vs_reference) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "MatMul");
    const kn_kernel *ref = find(kn_cpu_reduce_kernels, "MatMul");
    static const int64_t mnk[][3] = {{1, 1, 1},     {5, 7, 3},   {33, 65, 17}, {100, 10, 300},
                                     {3, 1000, 64}, {200, 3, 1}, {64, 64, 600}};
    for (size_t ci = 0; ci < sizeof(mnk) / sizeof(mnk[0]); ci++) {
        int64_t M = mnk[ci][0], N = mnk[ci][1], K = mnk[ci][2];
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            rt_tensor *in[2] = {rand_t(ta ? S(K, M) : S(M, K)), rand_t(tb ? S(N, K) : S(K, N))};
            Tensorflow__NodeDef *d = tu_node_new("MatMul", "mm");
            tu_attr_b(d, "transpose_a", ta);
            tu_attr_b(d, "transpose_b", tb);
            rt_tensor *want = run_k(ref, d, in, 2, 0);
            for (int i = 0; i < nisa; i++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                for (unsigned cm = 0; cm <= 2; cm += 2) {
                    rt_tensor *got = run_k(fast, d, in, 2, cm);
                    char what[96];
                    snprintf(what, sizeof what, "matmul %lldx%lldx%lld ta %d tb %d %s %s",
                             (long long)M, (long long)N, (long long)K, ta, tb, cm ? "const" : "fed",
                             kn__gemm_isa_name(isa[i]));
                    check_close(got, want, what);
                    rt_tensor_unref(got);
                }
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
            rt_tensor_unref(want);
            tu_node_free(d);
            tu_unref(in, 2);
        }
    }
}
END_TEST

/* Double MatMul is left to the reference kernel: checked by hand.
 * [[1,2],[3,4]] x [[5],[6]] = [[17],[39]]. */
START_TEST(matmul_double_fallback) {
    rt_tensor *in[2] = {TU_F64(S(2, 2), 1, 2, 3, 4), TU_F64(S(2, 1), 5, 6)};
    Tensorflow__NodeDef *d = tu_node_new("MatMul", "mm");
    rt_tensor *o = run_k(find(kn_cpu_fast_kernels, "MatMul"), d, in, 2, 0);
    TU_CHECK_F64(o, S(2, 1), 0, 17, 39);
    rt_tensor_unref(o);
    tu_node_free(d);
    tu_unref(in, 2);
}
END_TEST

/* ====================================================================== */
/* fused ops vs the unfused chain                                         */
/* ====================================================================== */

/* Adds a list-of-strings attr; freed by slist_free before tu_node_free. */
static void attr_slist(Tensorflow__NodeDef *d, const char *key, int n, const char *const *v) {
    tu_attr_ilist(d, key, 0, NULL);
    Tensorflow__AttrValue__ListValue *l = d->attr[d->n_attr - 1]->value->list;
    l->s = calloc((size_t)n, sizeof(*l->s));
    ck_assert_ptr_nonnull(l->s);
    l->n_s = (size_t)n;
    for (int i = 0; i < n; i++) {
        l->s[i].data = (uint8_t *)strdup(v[i]);
        l->s[i].len = strlen(v[i]);
    }
}

static void slist_free(Tensorflow__NodeDef *d) {
    for (size_t a = 0; a < d->n_attr; a++) {
        Tensorflow__AttrValue *v = d->attr[a]->value;
        if (v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || v->list->n_s == 0) continue;
        for (size_t i = 0; i < v->list->n_s; i++) free(v->list->s[i].data);
        free(v->list->s);
        v->list->s = NULL;
        v->list->n_s = 0;
    }
}

/* Applies the activation `act` (a TensorFlow op name, NULL = none) through
 * the reference elementwise kernel; consumes x. */
static rt_tensor *chain_act(rt_tensor *x, const char *act, float alpha) {
    if (act == NULL) return x;
    Tensorflow__NodeDef *d = tu_node_new(act, "act");
    if (strcmp(act, "LeakyRelu") == 0) tu_attr_f(d, "alpha", alpha);
    rt_tensor *o = tu_run1(d, &x, 1);
    rt_tensor_unref(x);
    return o;
}

static const char *const acts[] = {NULL, "Relu", "Relu6", "LeakyRelu", "Elu", "Sigmoid", "Tanh"};

START_TEST(fused_conv_vs_chain) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    /* the last one takes the direct (unpacked) NHWC path with a constant filter */
    const conv_case *cases[] = {&conv_cases[0], &conv_cases[2], &conv_cases[4], &conv_cases[11]};
    for (size_t ci = 0; ci < 4; ci++) {
        const conv_case *c = cases[ci];
        for (int nchw = 0; nchw < 2; nchw++)
            for (int bn = 0; bn < 2; bn++)
                for (size_t ai = 0; ai < sizeof(acts) / sizeof(acts[0]); ai++) {
                    rt_tensor *in[6] = {
                        rand_t(xshape(c, nchw)), rand_t(S(c->KH, c->KW, c->C, c->OC)),
                        rand_t(S(c->OC)),        rand_t(S(c->OC)),
                        rand_t(S(c->OC)),        rand_t(S(c->OC))};
                    float *var = in[5]->data;
                    for (int64_t k = 0; k < c->OC; k++) var[k] = fabsf(var[k]) + 0.1f;
                    int nargs = bn ? 4 : 1;
                    /* unfused: reference Conv2D, then BiasAdd or FusedBatchNormV3, then act */
                    Tensorflow__NodeDef *d = conv_def("Conv2D", c, nchw);
                    rt_tensor *y = run_k(find(kn_cpu_nn_kernels, "Conv2D"), d, in, 2, 0);
                    tu_node_free(d);
                    Tensorflow__NodeDef *e = tu_node_new(bn ? "FusedBatchNormV3" : "BiasAdd", "e");
                    if (nchw) tu_attr_s(e, "data_format", "NCHW");
                    if (bn) {
                        tu_attr_f(e, "epsilon", 0.001f);
                        tu_attr_b(e, "is_training", 0);
                    }
                    rt_tensor *ein[5] = {y, in[2], in[3], in[4], in[5]};
                    rt_tensor *z = tu_run1(e, ein, 1 + nargs);
                    rt_tensor_unref(y);
                    rt_tensor *want = chain_act(z, acts[ai], 0.3f);
                    /* fused */
                    d = conv_def("_FusedConv2D", c, nchw);
                    const char *ops[2] = {bn ? "FusedBatchNorm" : "BiasAdd", acts[ai]};
                    attr_slist(d, "fused_ops", acts[ai] ? 2 : 1, ops);
                    tu_attr_i(d, "num_args", nargs);
                    tu_attr_f(d, "epsilon", 0.001f);
                    tu_attr_f(d, "leakyrelu_alpha", 0.3f);
                    for (int i = 0; i < nisa; i++) {
                        ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                        /* constant filter and args (folded), then everything fed */
                        unsigned masks[2] = {0x3eu, 0};
                        for (int m = 0; m < 2; m++) {
                            rt_tensor *got = run_k(find(kn_cpu_fast_kernels, "_FusedConv2D"), d, in,
                                                   2 + nargs, masks[m]);
                            char what[128];
                            snprintf(what, sizeof what, "fused conv case %zu %s %s %s %s %s", ci,
                                     nchw ? "NCHW" : "NHWC", ops[0], acts[ai] ? acts[ai] : "-",
                                     kn__gemm_isa_name(isa[i]), m ? "fed" : "const");
                            check_close(got, want, what);
                            rt_tensor_unref(got);
                        }
                    }
                    kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
                    slist_free(d);
                    tu_node_free(d);
                    rt_tensor_unref(want);
                    tu_unref(in, 6);
                }
    }
}
END_TEST

/* Conv2DBackpropInput: the fast stride = window kernel (constant filter on
 * AVX-512) and the cases it hands to the reference, against the reference. */
START_TEST(deconv_vs_reference) {
    /* N, OH, OW (of dy), KH, KW, sh, sw, C (of dx), OC (of dy), padding */
    static const struct {
        int64_t N, OH, OW, KH, KW, sh, sw, C, OC;
        const char *pad;
    } cs[] = {
        {1, 8, 9, 2, 2, 2, 2, 16, 32, "VALID"}, /* U-Net's 2x2/2 */
        {2, 5, 17, 3, 3, 3, 3, 40, 7, "SAME"},  /* odd channels, 15 pixels a row */
        {1, 4, 4, 2, 1, 2, 1, 33, 20, "VALID"},
        {1, 6, 6, 3, 3, 2, 2, 8, 16, "SAME"}, /* overlapping windows: reference */
        {1, 1, 2, 65, 65, 65, 65, 1, 2, "VALID"}, /* over the fast kernel's tap limit */
    };
    const kn_kernel *fast = find(kn_cpu_fast_kernels, "Conv2DBackpropInput");
    const kn_kernel *ref = find(kn_cpu_nn_kernels, "Conv2DBackpropInput");
    ck_assert_ptr_nonnull(fast);
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        int64_t H = cs[i].OH * cs[i].sh, W = cs[i].OW * cs[i].sw;
        if (strcmp(cs[i].pad, "VALID") == 0) {
            H = (cs[i].OH - 1) * cs[i].sh + cs[i].KH;
            W = (cs[i].OW - 1) * cs[i].sw + cs[i].KW;
        }
        rt_tensor *in[3] = {TU_I32(S(4), (int32_t)cs[i].N, (int32_t)H, (int32_t)W,
                                   (int32_t)cs[i].C),
                            rand_t(S(cs[i].KH, cs[i].KW, cs[i].C, cs[i].OC)),
                            rand_t(S(cs[i].N, cs[i].OH, cs[i].OW, cs[i].OC))};
        Tensorflow__NodeDef *d = tu_node_new("Conv2DBackpropInput", "deconv");
        tu_attr_s(d, "padding", cs[i].pad);
        tu_attr_ints(d, "strides", 1, cs[i].sh, cs[i].sw, 1);
        rt_tensor *want = run_k(ref, d, in, 3, 0x3u);
        for (int m = 0; m < 2; m++) {
            rt_tensor *got = run_k(fast, d, in, 3, m ? 0 : 0x3u);
            char what[64];
            snprintf(what, sizeof what, "deconv case %zu %s", i, m ? "fed" : "const");
            check_close(got, want, what);
            rt_tensor_unref(got);
        }
        rt_tensor_unref(want);
        tu_node_free(d);
        tu_unref(in, 3);
    }
}
END_TEST

/* The residual form [BiasAdd, Add, act]: act(conv + bias + addend), against
 * reference Conv2D, BiasAdd, AddV2 and the activation; the addend of the
 * output's shape (read in the epilogue) and a broadcast [OC] one. */
START_TEST(fused_conv_add_vs_chain) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    /* Winograd 3x3/1, the direct 7x7/2 stem, 1x1/2, an EXPLICIT 3x3/1 */
    const conv_case *cases[] = {&conv_cases[0], &conv_cases[12], &conv_cases[7], &conv_cases[14],
                                &conv_cases[8]};
    const char *const add_acts[] = {NULL, "Relu", "LeakyRelu", "Sigmoid"};
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const conv_case *c = cases[ci];
        for (int nchw = 0; nchw < 2; nchw++)
            for (int bc = 0; bc < 2; bc++)
                for (size_t ai = 0; ai < sizeof(add_acts) / sizeof(add_acts[0]); ai++) {
                    rt_tensor *in[4] = {rand_t(xshape(c, nchw)), rand_t(S(c->KH, c->KW, c->C, c->OC)),
                                        rand_t(S(c->OC)), NULL};
                    Tensorflow__NodeDef *d = conv_def("Conv2D", c, nchw);
                    rt_tensor *y = run_k(find(kn_cpu_nn_kernels, "Conv2D"), d, in, 2, 0);
                    tu_node_free(d);
                    in[3] = bc ? rand_t(S(c->OC)) : rand_t(y->shape);
                    if (bc && nchw) { /* [OC, 1, 1] broadcasts over NCHW */
                        in[3]->shape = S(c->OC, 1, 1);
                    }
                    Tensorflow__NodeDef *e = tu_node_new("BiasAdd", "e");
                    if (nchw) tu_attr_s(e, "data_format", "NCHW");
                    rt_tensor *ein[2] = {y, in[2]};
                    rt_tensor *z = tu_run1(e, ein, 2);
                    rt_tensor_unref(y);
                    Tensorflow__NodeDef *ad = tu_node_new("AddV2", "add");
                    rt_tensor *ain[2] = {z, in[3]};
                    rt_tensor *za = tu_run1(ad, ain, 2);
                    rt_tensor_unref(z);
                    rt_tensor *want = chain_act(za, add_acts[ai], 0.3f);
                    d = conv_def("_FusedConv2D", c, nchw);
                    const char *ops[3] = {"BiasAdd", "Add", add_acts[ai]};
                    attr_slist(d, "fused_ops", add_acts[ai] ? 3 : 2, ops);
                    tu_attr_i(d, "num_args", 2);
                    tu_attr_f(d, "leakyrelu_alpha", 0.3f);
                    for (int i = 0; i < nisa; i++) {
                        ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                        unsigned masks[2] = {0x6u, 0};
                        for (int m = 0; m < 2; m++) {
                            rt_tensor *got = run_k(find(kn_cpu_fast_kernels, "_FusedConv2D"), d,
                                                   in, 4, masks[m]);
                            char what[160];
                            snprintf(what, sizeof what, "fused conv+add case %zu %s %s %s %s %s",
                                     ci, nchw ? "NCHW" : "NHWC", bc ? "broadcast" : "same-shape",
                                     add_acts[ai] ? add_acts[ai] : "-", kn__gemm_isa_name(isa[i]),
                                     m ? "fed" : "const");
                            check_close(got, want, what);
                            rt_tensor_unref(got);
                        }
                    }
                    kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
                    slist_free(d);
                    tu_node_free(d);
                    rt_tensor_unref(want);
                    tu_unref(in, 4);
                }
    }
}
END_TEST

START_TEST(fused_matmul_vs_chain) {
    kn_gemm_isa isa[3];
    int nisa = isas(isa);
    for (size_t ai = 0; ai < sizeof(acts) / sizeof(acts[0]); ai++) {
        int64_t M = 13, K = 70, N = 45;
        rt_tensor *in[3] = {rand_t(S(M, K)), rand_t(S(N, K)), rand_t(S(N))};
        Tensorflow__NodeDef *d = tu_node_new("MatMul", "mm");
        tu_attr_b(d, "transpose_b", 1);
        rt_tensor *y = run_k(find(kn_cpu_reduce_kernels, "MatMul"), d, in, 2, 0);
        tu_node_free(d);
        rt_tensor *bin[2] = {y, in[2]};
        rt_tensor *z = tu_run1(tu_node_new("BiasAdd", "b"), bin, 2);
        rt_tensor_unref(y);
        rt_tensor *want = chain_act(z, acts[ai], 0.2f);
        d = tu_node_new("_FusedMatMul", "fmm");
        tu_attr_b(d, "transpose_b", 1);
        const char *ops[2] = {"BiasAdd", acts[ai]};
        attr_slist(d, "fused_ops", acts[ai] ? 2 : 1, ops);
        tu_attr_i(d, "num_args", 1);
        for (int i = 0; i < nisa; i++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
            for (unsigned cm = 0; cm <= 6; cm += 6) {
                rt_tensor *got = run_k(find(kn_cpu_fast_kernels, "_FusedMatMul"), d, in, 3, cm);
                check_close(got, want, acts[ai] ? acts[ai] : "BiasAdd");
                rt_tensor_unref(got);
            }
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        slist_free(d);
        tu_node_free(d);
        rt_tensor_unref(want);
        tu_unref(in, 3);
    }
}
END_TEST

START_TEST(fused_depthwise_vs_chain) {
    const conv_case c = {2, 9, 10, 21, 3, 3, 1, 2, 2, 1, 1, "SAME", {0}};
    for (int nchw = 0; nchw < 2; nchw++) {
        rt_tensor *in[3] = {rand_t(xshape(&c, nchw)), rand_t(S(3, 3, c.C, 1)), rand_t(S(c.C))};
        Tensorflow__NodeDef *d = conv_def("DepthwiseConv2dNative", &c, nchw);
        rt_tensor *y = run_k(find(kn_cpu_nn_kernels, "DepthwiseConv2dNative"), d, in, 2, 0);
        tu_node_free(d);
        Tensorflow__NodeDef *e = tu_node_new("BiasAdd", "b");
        if (nchw) tu_attr_s(e, "data_format", "NCHW");
        rt_tensor *bin[2] = {y, in[2]};
        rt_tensor *z = tu_run1(e, bin, 2);
        rt_tensor_unref(y);
        rt_tensor *want = chain_act(z, "Relu6", 0);
        d = conv_def("_FusedDepthwiseConv2dNative", &c, nchw);
        const char *ops[2] = {"BiasAdd", "Relu6"};
        attr_slist(d, "fused_ops", 2, ops);
        tu_attr_i(d, "num_args", 1);
        rt_tensor *got =
            run_k(find(kn_cpu_fast_kernels, "_FusedDepthwiseConv2dNative"), d, in, 3, 0);
        check_close(got, want, nchw ? "fused depthwise NCHW" : "fused depthwise NHWC");
        rt_tensor_unref(got);
        slist_free(d);
        tu_node_free(d);
        rt_tensor_unref(want);
        tu_unref(in, 3);
    }
}
END_TEST

/* ====================================================================== */
/* errors and fallbacks                                                   */
/* ====================================================================== */

START_TEST(fused_errors) {
    rt_tensor *in[3] = {rand_t(S(1, 4, 4, 2)), rand_t(S(3, 3, 2, 5)), rand_t(S(4))};
    /* bias of the wrong length */
    Tensorflow__NodeDef *d = conv_def("_FusedConv2D", &conv_cases[0], 0);
    const char *ops[2] = {"BiasAdd", "Relu"};
    attr_slist(d, "fused_ops", 2, ops);
    tu_attr_i(d, "num_args", 1);
    rt_tensor *out = NULL;
    ck_assert_int_eq(tu_run(d, in, 3, &out, 1), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "fastconv"));
    slist_free(d);
    tu_node_free(d);
    /* an unsupported fused op is named */
    d = conv_def("_FusedConv2D", &conv_cases[0], 0);
    const char *bad[2] = {"BiasAdd", "Swish"};
    attr_slist(d, "fused_ops", 2, bad);
    tu_attr_i(d, "num_args", 1);
    ck_assert_int_eq(tu_run(d, in, 3, &out, 1), MS_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "Swish"));
    slist_free(d);
    tu_node_free(d);
    /* num_args disagreeing with fused_ops */
    d = conv_def("_FusedConv2D", &conv_cases[0], 0);
    attr_slist(d, "fused_ops", 1, ops);
    tu_attr_i(d, "num_args", 2);
    ck_assert_int_eq(tu_run(d, in, 3, &out, 1), MS_EINVAL);
    slist_free(d);
    tu_node_free(d);
    tu_unref(in, 3);
}
END_TEST

/* Grouped convolution goes to the reference kernel; the fused epilogue is
 * still applied. x (1,1,1,4) = [1,2,3,4]; 1x1 filter of depth 2 (so 2
 * groups) and 2 outputs, HWIO f[ci][co] = [[1, 0], [1, -2]]. Output 0 is
 * group 0 (channels 0, 1, column co 0): 1*1 + 2*1 = 3; output 1 is group 1
 * (channels 2, 3, column co 1): 3*0 + 4*(-2) = -8. Bias [1, 1] and Relu:
 * [4, 0]. */
START_TEST(fused_grouped_fallback) {
    rt_tensor *in[3] = {TU_F32(S(1, 1, 1, 4), 1, 2, 3, 4), TU_F32(S(1, 1, 2, 2), 1, 0, 1, -2),
                        TU_F32(S(2), 1, 1)};
    conv_case c = {1, 1, 1, 4, 1, 1, 2, 1, 1, 1, 1, "VALID", {0}};
    Tensorflow__NodeDef *d = conv_def("_FusedConv2D", &c, 0);
    const char *ops[2] = {"BiasAdd", "Relu"};
    attr_slist(d, "fused_ops", 2, ops);
    tu_attr_i(d, "num_args", 1);
    rt_tensor *o = run_k(find(kn_cpu_fast_kernels, "_FusedConv2D"), d, in, 3, 0);
    TU_CHECK_F32(o, S(1, 1, 1, 2), 0, 4, 0);
    rt_tensor_unref(o);
    slist_free(d);
    tu_node_free(d);
    tu_unref(in, 3);
}
END_TEST

START_TEST(isa_forcing) {
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_C), MS_OK);
    ck_assert_int_eq(kn__gemm_isa(), KN_GEMM_ISA_C);
    ck_assert_int_eq(kn__gemm_r(0), 4);
    ck_assert_int_eq(kn__gemm_r(1), 8);
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
    ck_assert_int_ne(kn__gemm_isa(), KN_GEMM_ISA_AUTO);
    if (__builtin_cpu_supports("avx512f")) ck_assert_int_eq(kn__gemm_isa(), KN_GEMM_ISA_AVX512);
    else ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AVX512), MS_ENOTSUP);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_fast");
    TCase *t = tcase_create("conv");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, conv_vs_reference);
    tcase_add_test(t, conv_packed_isa_switch);
    tcase_add_test(t, conv_depth_slices);
    tcase_add_test(t, conv_streamed_output);
    tcase_add_test(t, depthwise_vs_reference);
    tcase_add_test(t, deconv_vs_reference);
    suite_add_tcase(s, t);
    t = tcase_create("matmul");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, matmul_vs_reference);
    tcase_add_test(t, matmul_double_fallback);
    suite_add_tcase(s, t);
    t = tcase_create("fused");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, fused_conv_vs_chain);
    tcase_add_test(t, fused_conv_add_vs_chain);
    tcase_add_test(t, fused_matmul_vs_chain);
    tcase_add_test(t, fused_depthwise_vs_chain);
    tcase_add_test(t, fused_errors);
    tcase_add_test(t, fused_grouped_fallback);
    suite_add_tcase(s, t);
    t = tcase_create("isa");
    tcase_add_test(t, isa_forcing);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
