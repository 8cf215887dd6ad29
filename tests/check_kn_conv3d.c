/* check_kn_conv3d.c - the 3-D kernels of kn_cpu_conv3d.c (Conv3D,
 * _FusedConv3D, MaxPool3D, AvgPool3D, Conv3DBackpropInputV2, NDHWC) against
 * naive double-precision loops written here from TensorFlow's definitions, on
 * random inputs: strides > 1, SAME padding (smaller half before), dilations,
 * 1x1x1 windows, channel counts that are no multiple of the vector width, an
 * empty batch; the filter both constant (packed at prepare) and a run-time
 * input (a constant filter on AVX-512 / AVX2 takes the slice-wise direct
 * path, a fed one the implicit GEMM); once per GEMM family the CPU supports.
 * Plus hand-computed values, NCDHW through the reference, and error paths.
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

static const kn_kernel *find(const char *op) {
    for (const kn_kernel *k = kn_cpu_conv3d_kernels; k->op; k++)
        if (strcmp(k->op, op) == 0) return k;
    ck_abort_msg("no kernel %s", op);
    return NULL;
}

/* Runs kernel k; inputs whose bit is set in const_mask are given to prepare. */
static ms_status run_k(const Tensorflow__NodeDef *d, rt_tensor *const *in, int nin,
                       unsigned const_mask, rt_tensor **out) {
    const kn_kernel *k = find(d->op);
    kn_node kn = {.name = d->name, .op = d->op, .def = d, .attrs = &rt_nodedef_attrs,
                  .nin = nin, .nout = 1};
    rt_tensor *cin[8] = {0};
    for (int i = 0; i < nin; i++)
        cin[i] = (const_mask >> i) & 1 ? in[i] : NULL;
    void *state = NULL;
    *out = NULL;
    ms_err_clear();
    ms_status st = k->prepare ? k->prepare(&kn, cin, &state) : MS_OK;
    if (st != MS_OK) return st;
    kn_ctx ctx = {.nthreads = 2};
    st = k->compute(&ctx, &kn, state, in, out);
    if (k->release) k->release(state);
    return st;
}

static rt_tensor *run_ok(const Tensorflow__NodeDef *d, rt_tensor *const *in, int nin,
                         unsigned const_mask) {
    rt_tensor *out = NULL;
    ms_status st = run_k(d, in, nin, const_mask, &out);
    ck_assert_msg(st == MS_OK, "%s: %s", d->op, ms_errmsg());
    ck_assert_ptr_nonnull(out);
    return out;
}

/* A string-list attr (fused_ops); freed by slist_free before tu_node_free. */
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
        for (size_t i = 0; i < v->list->n_s; i++)
            free(v->list->s[i].data);
        free(v->list->s);
        v->list->s = NULL;
        v->list->n_s = 0;
    }
}

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static rt_tensor *rnd_t(rt_shape s) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++)
        rt_tensor_f32(t)[i] = frand();
    return t;
}

static int isas(kn_gemm_isa *out) {
    int n = 0;
    for (int i = KN_GEMM_ISA_C; i <= KN_GEMM_ISA_AVX512; i++)
        if (kn__gemm_set_isa((kn_gemm_isa)i) == MS_OK) out[n++] = (kn_gemm_isa)i;
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
    return n;
}

/* TensorFlow's output size and leading pad. */
static void out_dim(int64_t in, int64_t k, int64_t dil, int64_t s, int same, int64_t *out,
                    int64_t *lead) {
    int64_t eff = (k - 1) * dil + 1;
    if (!same) {
        *out = (in - eff + s) / s;
        *lead = 0;
    } else {
        *out = (in + s - 1) / s;
        int64_t tot = (*out - 1) * s + eff - in;
        *lead = tot > 0 ? tot / 2 : 0;
    }
}

typedef struct c3case {
    int64_t N, D, H, W, C, KD, KH, KW, OC;
    int64_t s[3], dil[3];
    int same;
} c3case;

static Tensorflow__NodeDef *c3_def(const char *op, const c3case *c) {
    Tensorflow__NodeDef *d = tu_node_new(op, "c3");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_ints(d, "strides", 1, c->s[0], c->s[1], c->s[2], 1);
    tu_attr_ints(d, "dilations", 1, c->dil[0], c->dil[1], c->dil[2], 1);
    tu_attr_s(d, "padding", c->same ? "SAME" : "VALID");
    tu_attr_s(d, "data_format", "NDHWC");
    return d;
}

/* Naive forward convolution; y [N, OD, OH, OW, OC]. */
static double *conv_ref(const c3case *c, const float *x, const float *f, int64_t o[3]) {
    int64_t p[3], in[3] = {c->D, c->H, c->W}, k[3] = {c->KD, c->KH, c->KW};
    for (int i = 0; i < 3; i++)
        out_dim(in[i], k[i], c->dil[i], c->s[i], c->same, &o[i], &p[i]);
    int64_t ny = c->N * o[0] * o[1] * o[2] * c->OC;
    double *y = calloc((size_t)(ny > 0 ? ny : 1), sizeof(double));
    ck_assert_ptr_nonnull(y);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t od = 0; od < o[0]; od++)
            for (int64_t oh = 0; oh < o[1]; oh++)
                for (int64_t ow = 0; ow < o[2]; ow++)
                    for (int64_t m = 0; m < c->OC; m++) {
                        double acc = 0;
                        for (int64_t a = 0; a < c->KD; a++)
                            for (int64_t b = 0; b < c->KH; b++)
                                for (int64_t e = 0; e < c->KW; e++) {
                                    int64_t id = od * c->s[0] - p[0] + a * c->dil[0];
                                    int64_t ih = oh * c->s[1] - p[1] + b * c->dil[1];
                                    int64_t iw = ow * c->s[2] - p[2] + e * c->dil[2];
                                    if (id < 0 || id >= c->D || ih < 0 || ih >= c->H || iw < 0 ||
                                        iw >= c->W)
                                        continue;
                                    for (int64_t ch = 0; ch < c->C; ch++)
                                        acc += (double)x[(((n * c->D + id) * c->H + ih) * c->W +
                                                          iw) * c->C + ch] *
                                               f[(((a * c->KH + b) * c->KW + e) * c->C + ch) *
                                                     c->OC + m];
                                }
                        y[(((n * o[0] + od) * o[1] + oh) * o[2] + ow) * c->OC + m] = acc;
                    }
    return y;
}

static void close_to(const rt_tensor *got, const double *want, int64_t n, const char *what) {
    ck_assert_int_eq(got->nelem, n);
    const float *g = got->data;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(g[i] - want[i]) <= 1e-4 * (1 + fabs(want[i])),
                      "%s: element %lld is %.7g, want %.7g", what, (long long)i, g[i], want[i]);
}

static const c3case cases[] = {
    {2, 5, 6, 7, 3, 3, 3, 3, 5, {1, 1, 1}, {1, 1, 1}, 1},
    {1, 7, 8, 9, 4, 3, 3, 3, 17, {2, 2, 2}, {1, 1, 1}, 1},   /* stride 2, SAME */
    {1, 6, 7, 5, 2, 2, 3, 2, 3, {1, 2, 3}, {1, 1, 1}, 0},    /* mixed strides, VALID */
    {1, 7, 7, 7, 3, 3, 3, 3, 4, {1, 1, 1}, {2, 1, 2}, 1},    /* dilations */
    {2, 3, 4, 5, 19, 1, 1, 1, 33, {1, 1, 1}, {1, 1, 1}, 0},  /* 1x1x1 */
    {1, 4, 6, 6, 5, 1, 1, 1, 7, {2, 2, 2}, {1, 1, 1}, 0},    /* 1x1x1 strided */
    {1, 8, 8, 8, 16, 3, 3, 3, 32, {1, 1, 1}, {1, 1, 1}, 1},  /* U-Net shaped */
    {0, 4, 4, 4, 3, 3, 3, 3, 2, {1, 1, 1}, {1, 1, 1}, 1},    /* empty batch */
};

START_TEST(conv3d_random) {
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (int ii = 0; ii < ni; ii++) {
        ck_assert_int_eq(kn__gemm_set_isa(isa[ii]), MS_OK);
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
            const c3case *c = &cases[ci];
            rt_tensor *x = rnd_t(S(c->N, c->D, c->H, c->W, c->C));
            rt_tensor *f = rnd_t(S(c->KD, c->KH, c->KW, c->C, c->OC));
            rt_tensor *b = rnd_t(S(c->OC));
            int64_t o[3];
            double *want = conv_ref(c, x->data, f->data, o);
            int64_t ny = c->N * o[0] * o[1] * o[2] * c->OC;
            char what[96];
            for (unsigned cm = 0; cm < 2; cm++) {
                Tensorflow__NodeDef *d = c3_def("Conv3D", c);
                rt_tensor *in[2] = {x, f};
                rt_tensor *y = run_ok(d, in, 2, cm ? 2u : 0u);
                tu_check_shape(y, RT_DT_FLOAT, S(c->N, o[0], o[1], o[2], c->OC));
                snprintf(what, sizeof what, "%s case %zu const %u", kn__gemm_isa_name(isa[ii]),
                         ci, cm);
                close_to(y, want, ny, what);
                rt_tensor_unref(y);
                tu_node_free(d);
            }
            /* _FusedConv3D: relu(conv + bias). */
            double *wf = malloc((size_t)(ny > 0 ? ny : 1) * sizeof(double));
            ck_assert_ptr_nonnull(wf);
            for (int64_t i = 0; i < ny; i++) {
                double v = want[i] + rt_tensor_f32(b)[i % c->OC];
                wf[i] = v > 0 ? v : 0;
            }
            Tensorflow__NodeDef *d = c3_def("_FusedConv3D", c);
            tu_attr_i(d, "num_args", 1);
            static const char *const ops[2] = {"BiasAdd", "Relu"};
            attr_slist(d, "fused_ops", 2, ops);
            rt_tensor *in3[3] = {x, f, b};
            rt_tensor *y = run_ok(d, in3, 3, 6u);
            snprintf(what, sizeof what, "fused %s case %zu", kn__gemm_isa_name(isa[ii]), ci);
            close_to(y, wf, ny, what);
            rt_tensor_unref(y);
            slist_free(d);
            tu_node_free(d);
            free(wf);
            free(want);
            tu_unref((rt_tensor *[]){x, f, b}, 3);
        }
    }
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
}
END_TEST

/* Hand-computed: x = 1..8 in a 2x2x2 cube, one channel; a 2x2x2 filter of
 * ones, VALID -> the sum 36; SAME stride 1 -> each output sums the voxels at
 * and after it. */
START_TEST(conv3d_hand) {
    rt_tensor *x = tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1);
    rt_tensor *f = TU_F32(S(2, 2, 2, 1, 1), 1, 1, 1, 1, 1, 1, 1, 1);
    c3case c = {1, 2, 2, 2, 1, 2, 2, 2, 1, {1, 1, 1}, {1, 1, 1}, 0};
    rt_tensor *in[2] = {x, f};
    Tensorflow__NodeDef *d = c3_def("Conv3D", &c);
    rt_tensor *y = run_ok(d, in, 2, 0);
    TU_CHECK_F32(y, S(1, 1, 1, 1, 1), 0, 36);
    rt_tensor_unref(y);
    tu_node_free(d);
    c.same = 1;
    d = c3_def("Conv3D", &c);
    y = run_ok(d, in, 2, 2);
    /* voxel (d,h,w) value 1 + 4d + 2h + w; SAME with pad 0 before, 1 after. */
    TU_CHECK_F32(y, S(1, 2, 2, 2, 1), 0, 36, 20, 22, 12, 26, 14, 15, 8);
    rt_tensor_unref(y);
    tu_node_free(d);
    /* NCDHW goes to kn_cpu_nn.c's reference kernel (one channel: same memory). */
    rt_tensor_unref(x);
    x = tu_iota_f32(S(1, 1, 2, 2, 2), 1, 1);
    in[0] = x;
    d = tu_node_new("Conv3D", "c3");
    tu_attr_ints(d, "strides", 1, 1, 1, 1, 1);
    tu_attr_s(d, "padding", "SAME");
    tu_attr_s(d, "data_format", "NCDHW");
    y = run_ok(d, in, 2, 2);
    TU_CHECK_F32(y, S(1, 1, 2, 2, 2), 0, 36, 20, 22, 12, 26, 14, 15, 8);
    rt_tensor_unref(y);
    tu_node_free(d);
    tu_unref(in, 2);
}
END_TEST

START_TEST(conv3d_errors) {
    c3case c = {1, 2, 2, 2, 1, 3, 3, 3, 1, {1, 1, 1}, {1, 1, 1}, 0};
    rt_tensor *x = tu_iota_f32(S(1, 2, 2, 2, 1), 1, 1);
    rt_tensor *f = tu_iota_f32(S(3, 3, 3, 1, 1), 0, 1);
    rt_tensor *f4 = tu_iota_f32(S(3, 3, 1, 1), 0, 1);
    rt_tensor *in[2] = {x, f}, *out = NULL;
    Tensorflow__NodeDef *d = c3_def("Conv3D", &c);
    ck_assert_int_eq(run_k(d, in, 2, 0, &out), MS_EINVAL); /* window larger than VALID input */
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "c3"));
    in[1] = f4;
    ck_assert_int_eq(run_k(d, in, 2, 0, &out), MS_EINVAL); /* 4-D filter */
    tu_node_free(d);
    d = tu_node_new("Conv3D", "c3");
    tu_attr_ints(d, "strides", 1, 2, 2, 2, 1);
    tu_attr_s(d, "padding", "SAME");
    tu_attr_s(d, "data_format", "NCHW");
    in[1] = f;
    ck_assert_int_eq(run_k(d, in, 2, 0, &out), MS_EINVAL);
    tu_node_free(d);
    d = tu_node_new("Conv3D", "c3");
    tu_attr_ints(d, "strides", 2, 1, 1, 1, 1);
    tu_attr_s(d, "padding", "SAME");
    ck_assert_int_eq(run_k(d, in, 2, 0, &out), MS_EINVAL);
    tu_node_free(d);
    tu_unref((rt_tensor *[]){x, f, f4}, 3);
}
END_TEST

/* ---- pools ---- */

START_TEST(pool3d_random) {
    static const struct {
        int64_t N, D, H, W, C, k[3], s[3];
        int same;
    } pc[] = {
        {2, 5, 6, 7, 3, {2, 2, 2}, {2, 2, 2}, 0}, {1, 5, 6, 7, 17, {3, 3, 3}, {2, 2, 2}, 1},
        {1, 4, 4, 4, 2, {1, 1, 1}, {1, 1, 1}, 0}, {1, 6, 5, 4, 5, {3, 2, 1}, {1, 2, 3}, 1},
        {0, 4, 4, 4, 2, {2, 2, 2}, {2, 2, 2}, 0},
    };
    for (size_t i = 0; i < sizeof(pc) / sizeof(pc[0]); i++)
        for (int is_max = 0; is_max < 2; is_max++) {
            rt_tensor *x = rnd_t(S(pc[i].N, pc[i].D, pc[i].H, pc[i].W, pc[i].C));
            Tensorflow__NodeDef *d = tu_node_new(is_max ? "MaxPool3D" : "AvgPool3D", "p3");
            tu_attr_ints(d, "ksize", 1, pc[i].k[0], pc[i].k[1], pc[i].k[2], 1);
            tu_attr_ints(d, "strides", 1, pc[i].s[0], pc[i].s[1], pc[i].s[2], 1);
            tu_attr_s(d, "padding", pc[i].same ? "SAME" : "VALID");
            rt_tensor *y = run_ok(d, &x, 1, 0);
            int64_t in[3] = {pc[i].D, pc[i].H, pc[i].W}, o[3], p[3];
            for (int a = 0; a < 3; a++)
                out_dim(in[a], pc[i].k[a], 1, pc[i].s[a], pc[i].same, &o[a], &p[a]);
            tu_check_shape(y, RT_DT_FLOAT, S(pc[i].N, o[0], o[1], o[2], pc[i].C));
            const float *xv = x->data, *yv = y->data;
            int64_t C = pc[i].C, idx = 0;
            for (int64_t n = 0; n < pc[i].N; n++)
                for (int64_t od = 0; od < o[0]; od++)
                    for (int64_t oh = 0; oh < o[1]; oh++)
                        for (int64_t ow = 0; ow < o[2]; ow++)
                            for (int64_t c = 0; c < C; c++, idx++) {
                                double m = -INFINITY, sum = 0;
                                int cnt = 0;
                                for (int64_t a = 0; a < pc[i].k[0]; a++)
                                    for (int64_t b = 0; b < pc[i].k[1]; b++)
                                        for (int64_t e = 0; e < pc[i].k[2]; e++) {
                                            int64_t id = od * pc[i].s[0] - p[0] + a,
                                                    ih = oh * pc[i].s[1] - p[1] + b,
                                                    iw = ow * pc[i].s[2] - p[2] + e;
                                            if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] ||
                                                iw < 0 || iw >= in[2])
                                                continue;
                                            double v = xv[(((n * in[0] + id) * in[1] + ih) *
                                                               in[2] + iw) * C + c];
                                            m = v > m ? v : m;
                                            sum += v;
                                            cnt++;
                                        }
                                double want = is_max ? m : sum / cnt;
                                ck_assert_msg(fabs(yv[idx] - want) <= 1e-6,
                                              "pool case %zu max %d element %lld: %g vs %g", i,
                                              is_max, (long long)idx, yv[idx], want);
                            }
            ck_assert_int_eq(idx, y->nelem);
            rt_tensor_unref(y);
            rt_tensor_unref(x);
            tu_node_free(d);
        }
}
END_TEST

/* ---- Conv3DBackpropInputV2 ---- */

/* dx = the adjoint of the forward convolution: <conv(x), dy> = <x, dx> for
 * every x, so dx[i] = sum over (o, tap) with input position i of f . dy[o]. */
START_TEST(deconv3d_random) {
    static const c3case dc[] = {
        {1, 8, 8, 8, 16, 2, 2, 2, 32, {2, 2, 2}, {1, 1, 1}, 0}, /* U-Net up-sampling */
        {2, 5, 6, 7, 3, 3, 3, 3, 4, {2, 2, 2}, {1, 1, 1}, 1},
        {1, 6, 5, 7, 2, 3, 2, 3, 5, {1, 2, 3}, {1, 1, 1}, 0},
        {1, 7, 7, 7, 3, 3, 3, 3, 2, {1, 1, 1}, {2, 1, 1}, 1},
        {1, 3, 4, 5, 7, 1, 1, 1, 9, {1, 1, 1}, {1, 1, 1}, 0},
        {0, 4, 4, 4, 2, 2, 2, 2, 3, {2, 2, 2}, {1, 1, 1}, 0},
    };
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (int ii = 0; ii < ni; ii++) {
        ck_assert_int_eq(kn__gemm_set_isa(isa[ii]), MS_OK);
        for (size_t ci = 0; ci < sizeof(dc) / sizeof(dc[0]); ci++) {
            const c3case *c = &dc[ci];
            int64_t o[3], p[3], in[3] = {c->D, c->H, c->W}, k[3] = {c->KD, c->KH, c->KW};
            for (int a = 0; a < 3; a++)
                out_dim(in[a], k[a], c->dil[a], c->s[a], c->same, &o[a], &p[a]);
            rt_tensor *f = rnd_t(S(c->KD, c->KH, c->KW, c->C, c->OC));
            rt_tensor *dy = rnd_t(S(c->N, o[0], o[1], o[2], c->OC));
            rt_tensor *sz = TU_I32(S(5), (int32_t)c->N, (int32_t)c->D, (int32_t)c->H,
                                   (int32_t)c->W, (int32_t)c->C);
            int64_t nx = c->N * c->D * c->H * c->W * c->C;
            double *want = calloc((size_t)(nx > 0 ? nx : 1), sizeof(double));
            ck_assert_ptr_nonnull(want);
            const float *fv = f->data, *dv = dy->data;
            for (int64_t n = 0; n < c->N; n++)
                for (int64_t od = 0; od < o[0]; od++)
                    for (int64_t oh = 0; oh < o[1]; oh++)
                        for (int64_t ow = 0; ow < o[2]; ow++)
                            for (int64_t a = 0; a < c->KD; a++)
                                for (int64_t b = 0; b < c->KH; b++)
                                    for (int64_t e = 0; e < c->KW; e++) {
                                        int64_t id = od * c->s[0] - p[0] + a * c->dil[0];
                                        int64_t ih = oh * c->s[1] - p[1] + b * c->dil[1];
                                        int64_t iw = ow * c->s[2] - p[2] + e * c->dil[2];
                                        if (id < 0 || id >= c->D || ih < 0 || ih >= c->H ||
                                            iw < 0 || iw >= c->W)
                                            continue;
                                        for (int64_t ch = 0; ch < c->C; ch++)
                                            for (int64_t m = 0; m < c->OC; m++)
                                                want[(((n * c->D + id) * c->H + ih) * c->W + iw) *
                                                         c->C + ch] +=
                                                    (double)fv[(((a * c->KH + b) * c->KW + e) *
                                                                    c->C + ch) * c->OC + m] *
                                                    dv[(((n * o[0] + od) * o[1] + oh) * o[2] +
                                                        ow) * c->OC + m];
                                    }
            for (unsigned cm = 0; cm < 2; cm++) {
                Tensorflow__NodeDef *d = c3_def("Conv3DBackpropInputV2", c);
                rt_tensor *ins[3] = {sz, f, dy};
                rt_tensor *y = run_ok(d, ins, 3, cm ? 3u : 0u);
                tu_check_shape(y, RT_DT_FLOAT, S(c->N, c->D, c->H, c->W, c->C));
                char what[96];
                snprintf(what, sizeof what, "deconv %s case %zu const %u",
                         kn__gemm_isa_name(isa[ii]), ci, cm);
                close_to(y, want, nx, what);
                rt_tensor_unref(y);
                tu_node_free(d);
            }
            free(want);
            tu_unref((rt_tensor *[]){f, dy, sz}, 3);
        }
    }
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
}
END_TEST

START_TEST(deconv3d_mismatch) {
    c3case c = {1, 4, 4, 4, 2, 2, 2, 2, 3, {2, 2, 2}, {1, 1, 1}, 0};
    rt_tensor *f = rnd_t(S(2, 2, 2, 2, 3)), *dy = rnd_t(S(1, 3, 2, 2, 3));
    rt_tensor *sz = TU_I32(S(5), 1, 4, 4, 4, 2), *out = NULL;
    Tensorflow__NodeDef *d = c3_def("Conv3DBackpropInputV2", &c);
    rt_tensor *ins[3] = {sz, f, dy};
    ck_assert_int_eq(run_k(d, ins, 3, 0, &out), MS_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "out_backprop"));
    tu_node_free(d);
    tu_unref(ins, 3);
}
END_TEST

int main(void) {
    const tu_case tc[] = {
        {"conv3d_random", conv3d_random},   {"conv3d_hand", conv3d_hand},
        {"conv3d_errors", conv3d_errors},   {"pool3d_random", pool3d_random},
        {"deconv3d_random", deconv3d_random}, {"deconv3d_mismatch", deconv3d_mismatch},
    };
    return tu_suite_main("kn_conv3d", tc, sizeof(tc) / sizeof(tc[0]));
}
