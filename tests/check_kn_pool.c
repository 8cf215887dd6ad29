/* check_kn_pool.c - the float32 fast paths of the non-convolution CPU
 * kernels (MaxPool/AvgPool NHWC and NCHW, binary and unary elementwise ops, BiasAdd,
 * FusedBatchNorm, ResizeBilinear/ResizeNearestNeighbor NHWC, ConcatV2,
 * Sigmoid/Tanh/Softmax) against
 * straightforward scalar computations written here, on random inputs with
 * odd shapes (channel counts that are no multiple of the vector width,
 * windows clipped at borders, EXPLICIT pads, AvgPool counts of valid
 * elements), run once per ISA clone the CPU supports (forced through
 * kn__gemm_set_isa, which the vectorised loops follow).
 *
 * Every operation here but the exponentials is exact relative to its
 * scalar definition (no reassociation, no FMA contraction in the clones), so
 * those comparisons are bit for bit (NaN matching NaN); Sigmoid, Tanh and
 * Softmax (vectorised exponential) are held to 1e-6 relative of the
 * double-precision functions.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_gemm.h"
#include "util_node.h"

#define S TU_SHAPE

/* ---- helpers ---- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [-8, 8) with 1/64 granularity mixed with arbitrary mantissas. */
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t r = (uint32_t)(g_rng >> 33);
    float v = (float)(r % 1024) / 64.0f - 8.0f;
    if (r & 1u << 30) v *= 1.0f + (float)(r >> 20 & 1023) / 4096.0f;
    return v;
}

static rt_tensor *rnd_t(rt_shape s) {
    int64_t n = rt_shape_nelem(&s);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = rnd();
    rt_tensor *t = tu_t(RT_DT_FLOAT, s, v, (int)n);
    free(v);
    return t;
}

/* Bit-for-bit float comparison (any NaN matches any NaN). */
static void check_bits(const rt_tensor *got, const float *want, int64_t n, const char *what) {
    ck_assert_int_eq(got->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(got->nelem, n);
    const float *g = got->data;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(g[i]) && isnan(want[i])) continue;
        ck_assert_msg(memcmp(&g[i], &want[i], sizeof(float)) == 0,
                      "%s: element %lld is %.9g, want %.9g", what, (long long)i, g[i], want[i]);
    }
}

/* The GEMM families (and so vectorised clones) this CPU runs. */
static int isas(kn_gemm_isa *out) {
    int n = 0;
    for (int i = KN_GEMM_ISA_C; i <= KN_GEMM_ISA_AVX512; i++)
        if (kn__gemm_set_isa((kn_gemm_isa)i) == MS_OK) out[n++] = (kn_gemm_isa)i;
    ck_assert_int_eq(kn__gemm_set_isa(KN_GEMM_ISA_AUTO), MS_OK);
    ck_assert_int_ge(n, 1);
    return n;
}

/* ====================================================================== */
/* pools                                                                  */
/* ====================================================================== */

typedef struct pool_case {
    int64_t N, H, W, C, kh, kw, sh, sw;
    const char *pad;
    int64_t ep[4]; /* EXPLICIT: top, bottom, left, right */
} pool_case;

/* TF's output size and leading pad (GetWindowedOutputSize). */
static void out_dim(int64_t in, int64_t k, int64_t s, const char *pad, int64_t pb, int64_t pe,
                    int64_t *out, int64_t *lead) {
    if (strcmp(pad, "VALID") == 0) {
        *out = (in - k + s) / s;
        *lead = 0;
    } else if (strcmp(pad, "SAME") == 0) {
        *out = (in + s - 1) / s;
        int64_t tot = (*out - 1) * s + k - in;
        if (tot < 0) tot = 0;
        *lead = tot / 2;
    } else {
        *out = (in + pb + pe - k + s) / s;
        *lead = pb;
    }
}

static Tensorflow__NodeDef *pool_def_fmt(const char *op, const pool_case *pc, int nchw) {
    Tensorflow__NodeDef *d = tu_node_new(op, "pool");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    if (nchw) {
        tu_attr_ints(d, "ksize", 1, 1, pc->kh, pc->kw);
        tu_attr_ints(d, "strides", 1, 1, pc->sh, pc->sw);
    } else {
        tu_attr_ints(d, "ksize", 1, pc->kh, pc->kw, 1);
        tu_attr_ints(d, "strides", 1, pc->sh, pc->sw, 1);
    }
    tu_attr_s(d, "padding", pc->pad);
    if (strcmp(pc->pad, "EXPLICIT") == 0) {
        if (nchw)
            tu_attr_ints(d, "explicit_paddings", 0, 0, 0, 0, pc->ep[0], pc->ep[1], pc->ep[2],
                         pc->ep[3]);
        else
            tu_attr_ints(d, "explicit_paddings", 0, 0, pc->ep[0], pc->ep[1], pc->ep[2], pc->ep[3],
                         0, 0);
    }
    tu_attr_s(d, "data_format", nchw ? "NCHW" : "NHWC");
    return d;
}

static Tensorflow__NodeDef *pool_def(const char *op, const pool_case *pc) {
    return pool_def_fmt(op, pc, 0);
}

/* Layout copies of a float tensor: [N, H, W, C] <-> [N, C, H, W]. */
static rt_tensor *relayout(const rt_tensor *t, int to_nchw) {
    const int64_t *d = t->shape.dim;
    int64_t N = d[0], H = to_nchw ? d[1] : d[2], W = to_nchw ? d[2] : d[3],
            C = to_nchw ? d[3] : d[1];
    rt_shape s = to_nchw ? S(N, C, H, W) : S(N, H, W, C);
    float *v = malloc((size_t)(t->nelem > 0 ? t->nelem : 1) * sizeof(float));
    ck_assert_ptr_nonnull(v);
    const float *src = t->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t hwc = ((n * H + h) * W + w) * C + c,
                            chw = ((n * C + c) * H + h) * W + w;
                    v[to_nchw ? chw : hwc] = src[to_nchw ? hwc : chw];
                }
    rt_tensor *o = tu_t(RT_DT_FLOAT, s, v, (int)t->nelem);
    free(v);
    return o;
}
static rt_tensor *nhwc_to_nchw(const rt_tensor *t) {
    return relayout(t, 1);
}
static rt_tensor *nchw_to_nhwc(const rt_tensor *t) {
    return relayout(t, 0);
}

/* Scalar pooling: max from -inf with `v > m` in window order; average as
 * the double sum of the valid elements divided by their count. */
static float *pool_scalar(const pool_case *pc, int is_max, const float *x, int64_t *OH,
                          int64_t *OW) {
    int64_t pt, pl;
    out_dim(pc->H, pc->kh, pc->sh, pc->pad, pc->ep[0], pc->ep[1], OH, &pt);
    out_dim(pc->W, pc->kw, pc->sw, pc->pad, pc->ep[2], pc->ep[3], OW, &pl);
    float *y = malloc((size_t)(pc->N * *OH * *OW * pc->C) * sizeof(float) + 1);
    ck_assert_ptr_nonnull(y);
    for (int64_t n = 0; n < pc->N; n++)
        for (int64_t oh = 0; oh < *OH; oh++)
            for (int64_t ow = 0; ow < *OW; ow++)
                for (int64_t c = 0; c < pc->C; c++) {
                    float m = -INFINITY;
                    double sum = 0;
                    int64_t cnt = 0;
                    for (int64_t i = 0; i < pc->kh; i++)
                        for (int64_t k = 0; k < pc->kw; k++) {
                            int64_t ih = oh * pc->sh - pt + i, iw = ow * pc->sw - pl + k;
                            if (ih < 0 || ih >= pc->H || iw < 0 || iw >= pc->W) continue;
                            float v = x[((n * pc->H + ih) * pc->W + iw) * pc->C + c];
                            if (v > m) m = v;
                            sum += v;
                            cnt++;
                        }
                    y[((n * *OH + oh) * *OW + ow) * pc->C + c] =
                        is_max ? m : (float)(cnt ? sum / (double)cnt : 0);
                }
    return y;
}

START_TEST(pool_random) {
    static const pool_case cases[] = {
        {2, 9, 11, 17, 3, 3, 2, 2, "SAME", {0}},
        {1, 8, 8, 64, 3, 3, 2, 2, "EXPLICIT", {1, 1, 1, 1}},
        {1, 7, 10, 37, 2, 3, 1, 2, "EXPLICIT", {1, 0, 2, 1}},
        {2, 8, 6, 3, 2, 2, 2, 2, "VALID", {0}},
        {1, 13, 5, 300, 3, 2, 3, 1, "SAME", {0}},
        {1, 5, 5, 1, 5, 5, 1, 1, "SAME", {0}},
        {3, 6, 7, 31, 1, 1, 1, 1, "VALID", {0}},
        {1, 12, 12, 16, 3, 3, 1, 1, "SAME", {0}},
        {1, 6, 600, 2, 3, 3, 1, 1, "SAME", {0}}, /* rows longer than a block of sums */
        {1, 6, 40, 3, 3, 4, 2, 3, "SAME", {0}},
    };
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const pool_case *pc = &cases[ci];
        rt_tensor *x = rnd_t(S(pc->N, pc->H, pc->W, pc->C));
        /* Ties and signed zeros: the first of equal values wins. */
        float *xv = x->data;
        for (int64_t i = 0; i < x->nelem; i += 7)
            xv[i] = (i / 7) % 2 ? 0.0f : -0.0f;
        /* NaN inputs: skipped by MaxPool, propagated by AvgPool. */
        for (int64_t i = 5; i < x->nelem; i += 97)
            xv[i] = NAN;
        for (int op = 0; op < 2; op++) {
            int is_max = op == 0;
            if (!is_max && strcmp(pc->pad, "EXPLICIT") == 0) continue; /* MaxPool only */
            int64_t OH, OW;
            float *want = pool_scalar(pc, is_max, x->data, &OH, &OW);
            for (int i = 0; i < ni; i++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[i]), MS_OK);
                rt_tensor *o = tu_run1(pool_def(is_max ? "MaxPool" : "AvgPool", pc), &x, 1);
                tu_check_shape(o, RT_DT_FLOAT, S(pc->N, OH, OW, pc->C));
                char what[96];
                snprintf(what, sizeof(what), "case %zu %s isa %s", ci,
                         is_max ? "MaxPool" : "AvgPool", kn__gemm_isa_name(isa[i]));
                check_bits(o, want, pc->N * OH * OW * pc->C, what);
                rt_tensor_unref(o);
                /* NCHW: the same values, transposed. */
                rt_tensor *xt = nhwc_to_nchw(x);
                o = tu_run1(pool_def_fmt(is_max ? "MaxPool" : "AvgPool", pc, 1), &xt, 1);
                tu_check_shape(o, RT_DT_FLOAT, S(pc->N, pc->C, OH, OW));
                rt_tensor *ot = nchw_to_nhwc(o);
                snprintf(what, sizeof(what), "case %zu %s NCHW isa %s", ci,
                         is_max ? "MaxPool" : "AvgPool", kn__gemm_isa_name(isa[i]));
                check_bits(ot, want, pc->N * OH * OW * pc->C, what);
                rt_tensor_unref(ot);
                rt_tensor_unref(o);
                rt_tensor_unref(xt);
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
            free(want);
        }
        rt_tensor_unref(x);
    }
}
END_TEST

/* MaxPool skips NaN inputs (v > m is false for them) in the fast path as in
 * the reference: [NaN, 1; 2, NaN] -> 2; an all-NaN window stays -inf. */
START_TEST(pool_nan) {
    const float nan = NAN;
    rt_tensor *x = TU_F32(S(1, 2, 4, 1), nan, 1, nan, nan, 2, nan, nan, nan);
    pool_case pc = {1, 2, 4, 1, 2, 2, 2, 2, "VALID", {0}};
    rt_tensor *o = tu_run1(pool_def("MaxPool", &pc), &x, 1);
    const float want[2] = {2, -INFINITY};
    check_bits(o, want, 2, "nan");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

/* MaxPoolV2: ksize and strides as int32 inputs; same values as the scalar
 * pooling; a window on the channel dimension is refused. */
START_TEST(pool_v2) {
    pool_case pc = {2, 9, 8, 19, 3, 2, 2, 1, "SAME", {0}};
    rt_tensor *in[3] = {rnd_t(S(pc.N, pc.H, pc.W, pc.C)), TU_I32(S(4), 1, 3, 2, 1),
                        TU_I32(S(4), 1, 2, 1, 1)};
    int64_t OH, OW;
    float *want = pool_scalar(&pc, 1, in[0]->data, &OH, &OW);
    Tensorflow__NodeDef *d = tu_node_new("MaxPoolV2", "pool_v2");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_s(d, "padding", "SAME");
    tu_attr_s(d, "data_format", "NHWC");
    rt_tensor *o = tu_run1(d, in, 3);
    tu_check_shape(o, RT_DT_FLOAT, S(pc.N, OH, OW, pc.C));
    check_bits(o, want, pc.N * OH * OW * pc.C, "MaxPoolV2");
    rt_tensor_unref(o);
    free(want);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(S(4), 1, 3, 2, 2);
    d = tu_node_new("MaxPoolV2", "bad_pool_v2");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_s(d, "padding", "VALID");
    tu_run_fail(d, in, 3, 1, MS_EINVAL, "channel");
    tu_unref(in, 3);
}
END_TEST

/* ====================================================================== */
/* elementwise                                                            */
/* ====================================================================== */

static float bin_scalar(const char *op, float x, float y) {
    if (strcmp(op, "AddV2") == 0 || strcmp(op, "Add") == 0) return x + y;
    if (strcmp(op, "Sub") == 0) return x - y;
    if (strcmp(op, "Mul") == 0) return x * y;
    if (strcmp(op, "RealDiv") == 0) return x / y;
    if (strcmp(op, "SquaredDifference") == 0) return (x - y) * (x - y);
    if (strcmp(op, "Maximum") == 0) return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
    if (strcmp(op, "Minimum") == 0) return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
    ck_abort_msg("no scalar op %s", op);
    return 0;
}

/* Flat index into a tensor of shape s broadcast to out at out index i. */
static int64_t bidx(const rt_shape *s, const rt_shape *out, int64_t i) {
    int64_t off = 0, mul = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t c = i % out->dim[d];
        i /= out->dim[d];
        int sd = d - (out->rank - s->rank);
        if (sd < 0) continue;
        if (s->dim[sd] != 1) off += c * mul;
        mul *= s->dim[sd];
    }
    return off;
}

START_TEST(binary_random) {
    static const char *const ops[] = {"AddV2",   "Add",     "Sub",     "Mul",
                                      "RealDiv", "Maximum", "Minimum", "SquaredDifference"};
    struct {
        rt_shape a, b;
    } shapes[] = {
        {S(3, 5, 7, 19), S(3, 5, 7, 19)}, /* same shape */
        {S(3, 5, 7, 19), S(19)},          /* row vector (BiasAdd-like) */
        {S(37), S(2, 9, 37)},             /* row vector first */
        {S(2, 5, 1), S(1, 33)},           /* outer product */
        {S(4, 6, 3), S(1)},               /* scalar-like */
        {S(1), S(1)},
        {S(2, 3, 4, 5), S(3, 1, 5)}, /* rank-3 collapsed broadcast */
        {S(5000), S(5000)},          /* several parallel chunks */
    };
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        rt_tensor *in[2] = {rnd_t(shapes[si].a), rnd_t(shapes[si].b)};
        ((float *)in[0]->data)[0] = NAN;
        if (in[1]->nelem > 3) ((float *)in[1]->data)[3] = -0.0f;
        rt_shape os = shapes[si].a.rank >= shapes[si].b.rank ? shapes[si].a : shapes[si].b;
        for (int d = 0; d < os.rank; d++) {
            const rt_shape *sa = &shapes[si].a, *sb = &shapes[si].b;
            int da = d - (os.rank - sa->rank), db = d - (os.rank - sb->rank);
            int64_t va = da >= 0 ? sa->dim[da] : 1, vb = db >= 0 ? sb->dim[db] : 1;
            os.dim[d] = va > vb ? va : vb;
        }
        int64_t n = rt_shape_nelem(&os);
        float *want = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(want);
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
            for (int64_t i = 0; i < n; i++)
                want[i] = bin_scalar(ops[oi], ((float *)in[0]->data)[bidx(&in[0]->shape, &os, i)],
                                     ((float *)in[1]->data)[bidx(&in[1]->shape, &os, i)]);
            for (int k = 0; k < ni; k++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
                Tensorflow__NodeDef *d = tu_node_new(ops[oi], "bin");
                tu_attr_type(d, "T", RT_DT_FLOAT);
                rt_tensor *o = tu_run1(d, in, 2);
                tu_check_shape(o, RT_DT_FLOAT, os);
                char what[96];
                snprintf(what, sizeof(what), "%s shapes %zu isa %s", ops[oi], si,
                         kn__gemm_isa_name(isa[k]));
                check_bits(o, want, n, what);
                rt_tensor_unref(o);
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        }
        free(want);
        tu_unref(in, 2);
    }
}
END_TEST

static float un_scalar(const char *op, float x, float alpha) {
    if (strcmp(op, "Relu") == 0) return x > 0 ? x : 0;
    if (strcmp(op, "Relu6") == 0) return x > 6 ? 6 : x > 0 ? x : 0;
    if (strcmp(op, "LeakyRelu") == 0) return x > 0 ? x : x * alpha;
    if (strcmp(op, "Neg") == 0) return -x;
    if (strcmp(op, "Abs") == 0) return fabsf(x);
    if (strcmp(op, "Square") == 0) return x * x;
    ck_abort_msg("no scalar op %s", op);
    return 0;
}

START_TEST(unary_random) {
    static const char *const ops[] = {"Relu", "Relu6", "LeakyRelu", "Neg", "Abs", "Square"};
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    /* 3 * 7 * 1601 elements: several parallel chunks and a ragged tail. */
    rt_tensor *x = rnd_t(S(3, 7, 1601));
    float *xv = x->data;
    const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 6.0f, 6.5f, 1e-40f, -1e-40f};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        xv[i * 101] = special[i];
    float *want = malloc((size_t)x->nelem * sizeof(float));
    ck_assert_ptr_nonnull(want);
    for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
        float alpha = 0.15f;
        for (int64_t i = 0; i < x->nelem; i++)
            want[i] = un_scalar(ops[oi], xv[i], alpha);
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new(ops[oi], "un");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            if (strcmp(ops[oi], "LeakyRelu") == 0) tu_attr_f(d, "alpha", alpha);
            rt_tensor *o = tu_run1(d, &x, 1);
            char what[64];
            snprintf(what, sizeof(what), "%s isa %s", ops[oi], kn__gemm_isa_name(isa[k]));
            check_bits(o, want, x->nelem, what);
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
    }
    free(want);
    rt_tensor_unref(x);
}
END_TEST

/* |got - want| <= rel * |want| + abs_floor per element (NaN matches NaN). */
static void check_close(const rt_tensor *got, const double *want, int64_t n, double rel,
                        const char *what) {
    const float *g = got->data;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            ck_assert_msg(isnan(g[i]), "%s: element %lld is %.9g, want NaN", what, (long long)i,
                          g[i]);
            continue;
        }
        if (isinf(want[i])) {
            ck_assert_msg(g[i] == want[i], "%s: element %lld is %.9g, want %g", what, (long long)i,
                          g[i], want[i]);
            continue;
        }
        double err = fabs((double)g[i] - want[i]);
        ck_assert_msg(err <= rel * fabs(want[i]) + 1e-37, "%s: element %lld is %.9g, want %.12g",
                      what, (long long)i, g[i], want[i]);
    }
}

/* Sigmoid and Tanh (vectorised exponential) within 1e-6 relative of the
 * double-precision functions on a dense sweep of [-30, 30), the
 * polynomial/exponential switch of Tanh at 0.625, tiny, huge and special
 * inputs. */
START_TEST(sigmoid_tanh) {
    const int64_t n = 60000 + 16;
    float *v = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < 60000; i++)
        v[i] = -30.0f + (float)i * 0.001f;
    const float special[16] = {NAN,     INFINITY, -INFINITY, 0.0f,    -0.0f, 1e-6f,
                               -3e-5f,  0.624f,   0.626f,    -0.625f, 88.9f, -88.9f,
                               -100.0f, -103.0f,  120.0f,    1e-40f};
    memcpy(v + 60000, special, sizeof(special));
    rt_tensor *x = tu_t(RT_DT_FLOAT, S(n), v, (int)n);
    double *want = malloc((size_t)n * sizeof(double));
    ck_assert_ptr_nonnull(want);
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (int op = 0; op < 2; op++) {
        for (int64_t i = 0; i < n; i++) {
            double d = v[i];
            want[i] = op == 0 ? 1.0 / (1.0 + exp(-d)) : tanh(d);
        }
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new(op == 0 ? "Sigmoid" : "Tanh", "act");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            rt_tensor *o = tu_run1(d, &x, 1);
            char what[64];
            snprintf(what, sizeof(what), "%s isa %s", op == 0 ? "Sigmoid" : "Tanh",
                     kn__gemm_isa_name(isa[k]));
            check_close(o, want, n, 1e-6, what);
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
    }
    free(want);
    free(v);
    rt_tensor_unref(x);
}
END_TEST

/* Softmax over the last axis against the double-precision formula, rows
 * from 1 to 1000 elements (1e-6 relative). */
START_TEST(softmax_rows_random) {
    static const int64_t lens[] = {1, 3, 4, 17, 1000};
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        const int64_t rows = 37, len = lens[li];
        rt_tensor *x = rnd_t(S(rows, len));
        float *xv = x->data;
        for (int64_t i = 0; i < x->nelem; i++)
            xv[i] *= 4.0f; /* [-32, 32): some terms far below the maximum */
        double *want = malloc((size_t)x->nelem * sizeof(double));
        ck_assert_ptr_nonnull(want);
        for (int64_t r = 0; r < rows; r++) {
            double m = xv[r * len], s = 0;
            for (int64_t i = 0; i < len; i++)
                m = xv[r * len + i] > m ? xv[r * len + i] : m;
            for (int64_t i = 0; i < len; i++)
                s += exp((double)xv[r * len + i] - m);
            for (int64_t i = 0; i < len; i++)
                want[r * len + i] = exp((double)xv[r * len + i] - m) / s;
        }
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new("Softmax", "sm");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            rt_tensor *o = tu_run1(d, &x, 1);
            char what[64];
            snprintf(what, sizeof(what), "softmax len %lld isa %s", (long long)len,
                     kn__gemm_isa_name(isa[k]));
            check_close(o, want, x->nelem, 1e-6, what);
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        free(want);
        rt_tensor_unref(x);
    }
}
END_TEST

/* ====================================================================== */
/* BiasAdd                                                                */
/* ====================================================================== */

START_TEST(bias_random) {
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (int nchw = 0; nchw < 2; nchw++) {
        const int64_t N = 2, H = 5, W = 9, C = 37;
        rt_shape xs = nchw ? S(N, C, H, W) : S(N, H, W, C);
        rt_tensor *in[2] = {rnd_t(xs), rnd_t(S(C))};
        const float *x = in[0]->data, *b = in[1]->data;
        float *want = malloc((size_t)in[0]->nelem * sizeof(float));
        ck_assert_ptr_nonnull(want);
        for (int64_t i = 0; i < in[0]->nelem; i++) {
            int64_t c = nchw ? (i / (H * W)) % C : i % C;
            want[i] = x[i] + b[c];
        }
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new("BiasAdd", "bias");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            tu_attr_s(d, "data_format", nchw ? "NCHW" : "NHWC");
            rt_tensor *o = tu_run1(d, in, 2);
            tu_check_shape(o, RT_DT_FLOAT, xs);
            check_bits(o, want, in[0]->nelem, nchw ? "BiasAdd NCHW" : "BiasAdd NHWC");
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        free(want);
        tu_unref(in, 2);
    }
}
END_TEST

/* FusedBatchNormV3 (inference) by rows/planes: y = x * m + a with TF's
 * per-channel m = scale / sqrt(var + eps), a = offset - mean * m, both in
 * float, computed here as the kernel's documented formula. */
START_TEST(batch_norm_random) {
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    const float eps = 0.001f;
    for (int nchw = 0; nchw < 2; nchw++) {
        const int64_t N = 2, H = 3, W = 11, C = 21;
        rt_shape xs = nchw ? S(N, C, H, W) : S(N, H, W, C);
        rt_tensor *in[5] = {rnd_t(xs), rnd_t(S(C)), rnd_t(S(C)), rnd_t(S(C)), rnd_t(S(C))};
        float *var = in[4]->data;
        for (int64_t c = 0; c < C; c++)
            var[c] = fabsf(var[c]) + 0.1f;
        const float *x = in[0]->data, *sc = in[1]->data, *of = in[2]->data, *mu = in[3]->data;
        float *want = malloc((size_t)in[0]->nelem * sizeof(float));
        ck_assert_ptr_nonnull(want);
        for (int64_t i = 0; i < in[0]->nelem; i++) {
            int64_t c = nchw ? (i / (H * W)) % C : i % C;
            float inv = 1.0f / sqrtf(var[c] + eps);
            float m = sc[c] * inv, a = of[c] - mu[c] * sc[c] * inv;
            want[i] = x[i] * m + a;
        }
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new("FusedBatchNormV3", "bn");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            tu_attr_f(d, "epsilon", eps);
            tu_attr_b(d, "is_training", 0);
            tu_attr_s(d, "data_format", nchw ? "NCHW" : "NHWC");
            rt_tensor *o = tu_run1(d, in, 5);
            tu_check_shape(o, RT_DT_FLOAT, xs);
            check_bits(o, want, in[0]->nelem, nchw ? "BatchNorm NCHW" : "BatchNorm NHWC");
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        free(want);
        tu_unref(in, 5);
    }
}
END_TEST

/* ====================================================================== */
/* resize                                                                 */
/* ====================================================================== */

/* TensorFlow's resize_bilinear_op in float: source coordinate, floor/ceil
 * neighbours clamped to the image, then three lerps. */
static float *bilinear_scalar(const float *x, int64_t N, int64_t H, int64_t W, int64_t C,
                              int64_t OH, int64_t OW, int align, int half) {
    float *y = malloc((size_t)(N * OH * OW * C) * sizeof(float));
    ck_assert_ptr_nonnull(y);
    float hs = align && OH > 1 ? (float)(H - 1) / (float)(OH - 1) : (float)H / (float)OH;
    float ws = align && OW > 1 ? (float)(W - 1) / (float)(OW - 1) : (float)W / (float)OW;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < OH; i++) {
            float fy = half ? ((float)i + 0.5f) * hs - 0.5f : (float)i * hs;
            int64_t y0 = (int64_t)floorf(fy), y1 = (int64_t)ceilf(fy);
            float ly = fy - floorf(fy);
            y0 = y0 < 0 ? 0 : y0 > H - 1 ? H - 1 : y0;
            y1 = y1 > H - 1 ? H - 1 : y1 < 0 ? 0 : y1;
            for (int64_t j = 0; j < OW; j++) {
                float fx = half ? ((float)j + 0.5f) * ws - 0.5f : (float)j * ws;
                int64_t x0 = (int64_t)floorf(fx), x1 = (int64_t)ceilf(fx);
                float lx = fx - floorf(fx);
                x0 = x0 < 0 ? 0 : x0 > W - 1 ? W - 1 : x0;
                x1 = x1 > W - 1 ? W - 1 : x1 < 0 ? 0 : x1;
                for (int64_t c = 0; c < C; c++) {
                    float tl = x[((n * H + y0) * W + x0) * C + c];
                    float tr = x[((n * H + y0) * W + x1) * C + c];
                    float bl = x[((n * H + y1) * W + x0) * C + c];
                    float br = x[((n * H + y1) * W + x1) * C + c];
                    float t = tl + (tr - tl) * lx;
                    float b = bl + (br - bl) * lx;
                    y[((n * OH + i) * OW + j) * C + c] = t + (b - t) * ly;
                }
            }
        }
    return y;
}

/* resize_nearest_neighbor_op: floor (legacy, half-pixel) or round
 * (align_corners) of the scaled coordinate, clamped. */
static int64_t nearest_src(int64_t i, int64_t in, int64_t out, int align, int half) {
    float sc = align && out > 1 ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
    float v = half ? ((float)i + 0.5f) * sc : (float)i * sc;
    int64_t s = align ? (int64_t)roundf(v) : (int64_t)floorf(v);
    return s < 0 ? 0 : s > in - 1 ? in - 1 : s;
}

static rt_tensor *resize_run(const char *op, rt_tensor *x, int32_t h, int32_t w, int align,
                             int half) {
    Tensorflow__NodeDef *d = tu_node_new(op, "resize");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_b(d, "align_corners", align);
    tu_attr_b(d, "half_pixel_centers", half);
    rt_tensor *in[2] = {x, TU_I32(S(2), h, w)};
    rt_tensor *o = tu_run1(d, in, 2);
    rt_tensor_unref(in[1]);
    return o;
}

START_TEST(resize_random) {
    static const struct {
        int64_t N, H, W, C, OH, OW;
    } cases[] = {
        {1, 8, 8, 16, 16, 16}, {2, 5, 7, 3, 10, 14}, {1, 9, 6, 37, 4, 5},
        {1, 4, 4, 1, 13, 7},   {1, 3, 5, 19, 3, 5},
    };
    static const int modes[3][2] = {{0, 1}, {1, 0}, {0, 0}}; /* align, half */
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int64_t N = cases[ci].N, H = cases[ci].H, W = cases[ci].W, C = cases[ci].C;
        int64_t OH = cases[ci].OH, OW = cases[ci].OW;
        rt_tensor *x = rnd_t(S(N, H, W, C));
        const float *xv = x->data;
        for (int m = 0; m < 3; m++) {
            int align = modes[m][0], half = modes[m][1];
            float *wb = bilinear_scalar(xv, N, H, W, C, OH, OW, align, half);
            float *wn = malloc((size_t)(N * OH * OW * C) * sizeof(float));
            ck_assert_ptr_nonnull(wn);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < OH; i++)
                    for (int64_t j = 0; j < OW; j++)
                        for (int64_t c = 0; c < C; c++)
                            wn[((n * OH + i) * OW + j) * C + c] =
                                xv[((n * H + nearest_src(i, H, OH, align, half)) * W +
                                    nearest_src(j, W, OW, align, half)) *
                                       C +
                                   c];
            for (int k = 0; k < ni; k++) {
                ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
                char what[96];
                rt_tensor *o =
                    resize_run("ResizeBilinear", x, (int32_t)OH, (int32_t)OW, align, half);
                tu_check_shape(o, RT_DT_FLOAT, S(N, OH, OW, C));
                snprintf(what, sizeof(what), "bilinear case %zu mode %d isa %s", ci, m,
                         kn__gemm_isa_name(isa[k]));
                check_bits(o, wb, N * OH * OW * C, what);
                rt_tensor_unref(o);
                o = resize_run("ResizeNearestNeighbor", x, (int32_t)OH, (int32_t)OW, align, half);
                tu_check_shape(o, RT_DT_FLOAT, S(N, OH, OW, C));
                snprintf(what, sizeof(what), "nearest case %zu mode %d isa %s", ci, m,
                         kn__gemm_isa_name(isa[k]));
                check_bits(o, wn, N * OH * OW * C, what);
                rt_tensor_unref(o);
            }
            kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
            free(wb);
            free(wn);
        }
        rt_tensor_unref(x);
    }
}
END_TEST

/* ====================================================================== */
/* ConcatV2                                                               */
/* ====================================================================== */

START_TEST(concat_random) {
    kn_gemm_isa isa[3];
    int ni = isas(isa);
    static const int64_t cs[3] = {3, 17, 1};
    for (int axis = 0; axis < 4; axis++) {
        rt_tensor *in[4];
        rt_shape os = S(2, 5, 7, 4);
        os.dim[axis] = 0;
        for (int k = 0; k < 3; k++) {
            rt_shape s = S(2, 5, 7, 4);
            s.dim[axis] = cs[k];
            os.dim[axis] += cs[k];
            in[k] = rnd_t(s);
        }
        in[3] = TU_I32(S(1), axis == 3 ? -1 : axis);
        int64_t n = rt_shape_nelem(&os);
        float *want = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(want);
        /* Output element at coordinates (d0..d3): input k where the axis
         * coordinate falls, at the coordinate minus the earlier inputs'. */
        for (int64_t i = 0; i < n; i++) {
            int64_t co[4], r = i;
            for (int d = 3; d >= 0; d--) {
                co[d] = r % os.dim[d];
                r /= os.dim[d];
            }
            int k = 0;
            while (co[axis] >= cs[k])
                co[axis] -= cs[k++];
            const rt_shape *s = &in[k]->shape;
            int64_t off = ((co[0] * s->dim[1] + co[1]) * s->dim[2] + co[2]) * s->dim[3] + co[3];
            want[i] = ((const float *)in[k]->data)[off];
        }
        for (int k = 0; k < ni; k++) {
            ck_assert_int_eq(kn__gemm_set_isa(isa[k]), MS_OK);
            Tensorflow__NodeDef *d = tu_node_new("ConcatV2", "concat");
            tu_attr_type(d, "T", RT_DT_FLOAT);
            tu_attr_i(d, "N", 3);
            rt_tensor *o = tu_run1(d, in, 4);
            tu_check_shape(o, RT_DT_FLOAT, os);
            char what[64];
            snprintf(what, sizeof(what), "concat axis %d isa %s", axis, kn__gemm_isa_name(isa[k]));
            check_bits(o, want, n, what);
            rt_tensor_unref(o);
        }
        kn__gemm_set_isa(KN_GEMM_ISA_AUTO);
        free(want);
        tu_unref(in, 4);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kn_pool");
    struct {
        const char *name;
        const TTest *t;
    } tests[] = {
        {"pool", pool_random},
        {"pool", pool_nan},
        {"pool", pool_v2},
        {"binary", binary_random},
        {"unary", unary_random},
        {"bias", bias_random},
        {"resize", resize_random},
        {"concat", concat_random},
        {"sigmoid_tanh", sigmoid_tanh},
        {"softmax", softmax_rows_random},
        {"batch_norm", batch_norm_random},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, tests[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
