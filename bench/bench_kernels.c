/* bench_kernels.c - GFLOP/s of the fast CPU kernels (kn_cpu_fast.c) against
 * the reference ones (im2col + OpenBLAS) on ResNet-like Conv2D shapes and
 * square SGEMMs, at 1 and 2 threads. Built and run by bench_kernels.sh.
 *
 * Each measurement: prepare once (the filter / B matrix is a constant, so the
 * fast kernels pack it there), 3 warm-up runs, then `iters` timed runs; the
 * median is reported. FLOPs = 2 * outputs * (KH * KW * C) for a convolution,
 * 2 * M * N * K for a GEMM. Outputs come from a buffer pool, as in the
 * executor, so no run pays for fresh pages.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn_cpu.h"
#include "kn_cpu_gemm.h"
#include "rt_exec.h"
#include "tf_framework.pb-c.h"

/* ---- minimal NodeDef building (the Check-based test helpers need a test
 * runner); everything is leaked on purpose, the process is short. ---- */
#define SHAPE(...)                                                                                 \
    ((rt_shape){.rank = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                 \
                .dim = {__VA_ARGS__}})

static Tensorflow__NodeDef *node_new(const char *op) {
    Tensorflow__NodeDef *d = calloc(1, sizeof(*d));
    tensorflow__node_def__init(d);
    d->op = (char *)op;
    d->name = "bench";
    return d;
}

static Tensorflow__AttrValue *attr_add(Tensorflow__NodeDef *d, const char *key) {
    d->attr = realloc(d->attr, (d->n_attr + 1) * sizeof(*d->attr));
    Tensorflow__NodeDef__AttrEntry *e = calloc(1, sizeof(*e));
    Tensorflow__AttrValue *v = calloc(1, sizeof(*v));
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = (char *)key;
    e->value = v;
    d->attr[d->n_attr++] = e;
    return v;
}

static void attr_s(Tensorflow__NodeDef *d, const char *key, const char *s) {
    Tensorflow__AttrValue *v = attr_add(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s;
    v->s.len = strlen(s);
}

static void attr_i(Tensorflow__NodeDef *d, const char *key, int64_t i) {
    Tensorflow__AttrValue *v = attr_add(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = i;
}

static void attr_slist2(Tensorflow__NodeDef *d, const char *key, const char *a, const char *b) {
    Tensorflow__AttrValue *v = attr_add(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = calloc(1, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_s = 2;
    v->list->s = calloc(2, sizeof(*v->list->s));
    v->list->s[0] = (ProtobufCBinaryData){.len = strlen(a), .data = (uint8_t *)a};
    v->list->s[1] = (ProtobufCBinaryData){.len = strlen(b), .data = (uint8_t *)b};
}

static void attr_4(Tensorflow__NodeDef *d, const char *key, int64_t a, int64_t b, int64_t c,
                   int64_t e) {
    Tensorflow__AttrValue *v = attr_add(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = calloc(1, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_i = 4;
    v->list->i = malloc(4 * sizeof(int64_t));
    v->list->i[0] = a;
    v->list->i[1] = b;
    v->list->i[2] = c;
    v->list->i[3] = e;
}

/* BENCH_CPUTIME=1: process CPU time instead of wall time (tuning on a busy
 * machine: time spent preempted does not count; only meaningful at 1 thread). */
static clockid_t g_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const kn_kernel *find(const kn_kernel *tab, const char *op) {
    for (; tab->op; tab++)
        if (strcmp(tab->op, op) == 0) return tab;
    return NULL;
}

static rt_tensor *rand_t(rt_shape s) {
    rt_tensor *t = NULL;
    if (rt_tensor_new(RT_DT_FLOAT, &s, &t) != MS_OK) exit(1);
    float *p = t->data;
    for (int64_t i = 0; i < t->nelem; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return t;
}

/* Median seconds of one run of kernel k on def with input 1 constant; *best
 * gets the fastest run. */
static double time_kn(const kn_kernel *k, const Tensorflow__NodeDef *d, rt_tensor **in, int nin,
                      int threads, int iters, double *best) {
    kn_node kn = {.name = d->name, .op = d->op, .def = d, .attrs = &rt_nodedef_attrs, .nin = nin, .nout = 1};
    rt_tensor *cin[8] = {NULL};
    for (int i = 1; i < nin && i < 8; i++) cin[i] = in[i];
    void *state = NULL;
    if (k->prepare && k->prepare(&kn, cin, &state) != MS_OK) {
        fprintf(stderr, "prepare: %s\n", ms_errmsg());
        exit(1);
    }
    /* outputs from a buffer pool, as the executor's: no page faults per run */
    static kn_pool *pool;
    if (pool == NULL) pool = kn_pool_new();
    kn_ctx ctx = {.nthreads = threads, .pool = pool};
    openblas_set_num_threads(threads);
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = -3; i < iters; i++) {
        rt_tensor *out = NULL;
        double t0 = now();
        if (k->compute(&ctx, &kn, state, in, &out) != MS_OK) {
            fprintf(stderr, "compute: %s\n", ms_errmsg());
            exit(1);
        }
        if (i >= 0) t[i] = now() - t0;
        rt_tensor_unref(out);
    }
    if (k->release) k->release(state);
    qsort(t, (size_t)iters, sizeof(double), cmp);
    double med = t[iters / 2];
    *best = t[0];
    free(t);
    return med;
}

static double time_k(const kn_kernel *k, const Tensorflow__NodeDef *d, rt_tensor **in, int threads,
                     int iters, double *best) {
    return time_kn(k, d, in, 2, threads, iters, best);
}

typedef struct conv_shape {
    const char *name;
    int64_t H, W, C, K, OC, s;
} conv_shape;

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    int max_thr = getenv("BENCH_THREADS") ? atoi(getenv("BENCH_THREADS")) : 2;
    if (getenv("BENCH_CPUTIME") && atoi(getenv("BENCH_CPUTIME")))
        g_clock = CLOCK_PROCESS_CPUTIME_ID;
    const char *only_isa = getenv("BENCH_ISA"); /* c, avx2, avx512 */
    if (only_isa) {
        kn_gemm_isa isa = strcmp(only_isa, "c") == 0      ? KN_GEMM_ISA_C
                          : strcmp(only_isa, "avx2") == 0 ? KN_GEMM_ISA_AVX2
                                                          : KN_GEMM_ISA_AVX512;
        if (kn__gemm_set_isa(isa) != MS_OK) {
            fprintf(stderr, "%s\n", ms_errmsg());
            return 1;
        }
    }
    printf("micro-kernel: %s, %d timed runs per line (median)\n", kn__gemm_isa_name(kn__gemm_isa()),
           iters);
    printf("%-28s %3s %9s %9s %9s %9s %9s %9s %6s\n", "shape", "thr", "fast ms", "fast GF/s",
           "best GF/s", "ref ms", "ref GF/s", "best GF/s", "x");
    const char *only = getenv("BENCH_ONLY"); /* substring of the shape names to run */
    static const conv_shape cs[] = {
        {"conv 1x224x224x3 7x7/2 64", 224, 224, 3, 7, 64, 2},
        {"conv 1x56x56x64 3x3 64", 56, 56, 64, 3, 64, 1},
        {"conv 1x56x56x64 1x1 256", 56, 56, 64, 1, 256, 1},
        {"conv 1x28x28x128 3x3 128", 28, 28, 128, 3, 128, 1},
        {"conv 1x14x14x256 3x3 256", 14, 14, 256, 3, 256, 1},
        {"conv 1x7x7x512 3x3 512", 7, 7, 512, 3, 512, 1},
        /* the benchmark CNNs of bench_onnx.sh (ResNet-style, U-Net-style) */
        {"conv 1x256x256x1 7x7/2 32", 256, 256, 1, 7, 32, 2},
        {"conv 1x64x64x32 3x3 32", 64, 64, 32, 3, 32, 1},
        {"conv 1x32x32x64 3x3 64", 32, 32, 64, 3, 64, 1},
        {"conv 1x16x16x128 3x3 128", 16, 16, 128, 3, 128, 1},
        {"conv 1x256x256x16 3x3 16", 256, 256, 16, 3, 16, 1},
        {"conv 1x128x128x32 3x3 32", 128, 128, 32, 3, 32, 1},
        {"conv 1x64x64x64 3x3 64", 64, 64, 64, 3, 64, 1},
        /* resnet512's other shapes (stem, stride-2 convs, stage 3) */
        {"conv 1x512x512x1 7x7/2 32", 512, 512, 1, 7, 32, 2},
        {"conv 1x128x128x32 3x3/2 64", 128, 128, 32, 3, 64, 2},
        {"conv 1x64x64x64 3x3/2 128", 64, 64, 64, 3, 128, 2},
        {"conv 1x32x32x128 3x3 128", 32, 32, 128, 3, 128, 1},
    };
    /* BENCH_BATCH=N: every conv shape with N images (the name keeps "1x");
     * BENCH_REF=0: no reference kernel (slow at large batches). */
    const int64_t nb = getenv("BENCH_BATCH") ? atoll(getenv("BENCH_BATCH")) : 1;
    const int with_ref = !getenv("BENCH_REF") || atoi(getenv("BENCH_REF"));
    if (nb < 1) {
        fprintf(stderr, "BENCH_BATCH must be >= 1\n");
        return 1;
    }
    if (nb > 1) printf("batch %lld (conv shapes)\n", (long long)nb);
    const int nhwc_only = getenv("BENCH_NHWC") && atoi(getenv("BENCH_NHWC"));
    for (int nchw = 0; nchw < (nhwc_only ? 1 : 2); nchw++)
        for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
            const conv_shape *c = &cs[i];
            if (only && !strstr(c->name, only)) continue;
            rt_tensor *in[2] = {
                rand_t(nchw ? SHAPE(nb, c->C, c->H, c->W) : SHAPE(nb, c->H, c->W, c->C)),
                rand_t(SHAPE(c->K, c->K, c->C, c->OC))};
            Tensorflow__NodeDef *d = node_new("Conv2D");
            attr_s(d, "padding", "SAME");
            if (nchw) {
                attr_s(d, "data_format", "NCHW");
                attr_4(d, "strides", 1, 1, c->s, c->s);
            } else {
                attr_4(d, "strides", 1, c->s, c->s, 1);
            }
            int64_t OH = (c->H + c->s - 1) / c->s, OW = (c->W + c->s - 1) / c->s;
            double flops = 2.0 * nb * OH * OW * c->OC * c->K * c->K * c->C;
            for (int thr = 1; thr <= max_thr; thr++) {
                double bf, br;
                double tf = time_k(find(kn_cpu_fast_kernels, "Conv2D"), d, in, thr, iters, &bf);
                if (!with_ref) {
                    printf("%-28s %3d %9.3f %9.1f %9.1f %9s %9s %9s %6s  %s\n", c->name, thr,
                           tf * 1e3, flops / tf * 1e-9, flops / bf * 1e-9, "-", "-", "-", "-",
                           nchw ? "NCHW" : "NHWC");
                    fflush(stdout);
                    continue;
                }
                double tr = time_k(find(kn_cpu_nn_kernels, "Conv2D"), d, in, thr, iters, &br);
                printf("%-28s %3d %9.3f %9.1f %9.1f %9.3f %9.1f %9.1f %6.2f  %s\n", c->name, thr,
                       tf * 1e3, flops / tf * 1e-9, flops / bf * 1e-9, tr * 1e3, flops / tr * 1e-9,
                       flops / br * 1e-9, tr / tf, nchw ? "NCHW" : "NHWC");
                fflush(stdout);
            }
            rt_tensor_unref(in[0]);
            rt_tensor_unref(in[1]);
        }
    /* Fusion: Conv2D alone vs _FusedConv2D BiasAdd + Relu (both fast, NHWC). */
    for (size_t i = 1; i < sizeof(cs) / sizeof(cs[0]); i += 2) {
        const conv_shape *c = &cs[i];
        if (only && !strstr(c->name, only)) continue;
        rt_tensor *in[3] = {rand_t(SHAPE(nb, c->H, c->W, c->C)),
                            rand_t(SHAPE(c->K, c->K, c->C, c->OC)), rand_t(SHAPE(c->OC))};
        Tensorflow__NodeDef *d = node_new("Conv2D"), *f = node_new("_FusedConv2D");
        attr_s(d, "padding", "SAME");
        attr_4(d, "strides", 1, c->s, c->s, 1);
        attr_s(f, "padding", "SAME");
        attr_4(f, "strides", 1, c->s, c->s, 1);
        attr_slist2(f, "fused_ops", "BiasAdd", "Relu");
        attr_i(f, "num_args", 1);
        int64_t OH = (c->H + c->s - 1) / c->s, OW = (c->W + c->s - 1) / c->s;
        double flops = 2.0 * nb * OH * OW * c->OC * c->K * c->K * c->C;
        for (int thr = 1; thr <= max_thr; thr++) {
            double bc, bf;
            double tc = time_kn(find(kn_cpu_fast_kernels, "Conv2D"), d, in, 2, thr, iters, &bc);
            double tf =
                time_kn(find(kn_cpu_fast_kernels, "_FusedConv2D"), f, in, 3, thr, iters, &bf);
            printf("%-28s %3d conv %.3f ms (%.1f GF/s), conv+bias+relu %.3f ms (%.1f GF/s)\n",
                   c->name, thr, tc * 1e3, flops / tc * 1e-9, tf * 1e3, flops / tf * 1e-9);
            fflush(stdout);
        }
        rt_tensor_unref(in[0]);
        rt_tensor_unref(in[1]);
        rt_tensor_unref(in[2]);
    }
    static const int64_t gs[] = {256, 512, 1024};
    for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
        int64_t n = gs[i];
        if (only && !strstr("sgemm", only)) continue;
        rt_tensor *in[2] = {rand_t(SHAPE(n, n)), rand_t(SHAPE(n, n))};
        Tensorflow__NodeDef *d = node_new("MatMul");
        double flops = 2.0 * n * n * n;
        char name[64];
        snprintf(name, sizeof name, "sgemm %lldx%lldx%lld", (long long)n, (long long)n,
                 (long long)n);
        for (int thr = 1; thr <= max_thr; thr++) {
            double bf, br;
            double tf = time_k(find(kn_cpu_fast_kernels, "MatMul"), d, in, thr, iters, &bf);
            double tr = time_k(find(kn_cpu_reduce_kernels, "MatMul"), d, in, thr, iters, &br);
            printf("%-28s %3d %9.3f %9.1f %9.1f %9.3f %9.1f %9.1f %6.2f\n", name, thr, tf * 1e3,
                   flops / tf * 1e-9, flops / bf * 1e-9, tr * 1e3, flops / tr * 1e-9,
                   flops / br * 1e-9, tr / tf);
            fflush(stdout);
        }
        rt_tensor_unref(in[0]);
        rt_tensor_unref(in[1]);
    }
    return 0;
}
