/* bench_onnx_dynamic.c - times one model with dynamic input dims at several
 * input shapes in one process, without reloading: for each shape in the list
 * (in order; a shape may come again) the first call at that shape is timed on
 * its own (what a new shape costs: shape inference, planning, buffers), then
 * WARMUP untimed calls, then ITERATIONS timed calls. The counterpart of
 * bench/ort_bench_dynamic.js (same input values, same order of shapes), run
 * by bench/bench_onnx_dynamic.sh. Prints one JSON line per shape.
 *
 * usage: bench_onnx_dynamic DIR THREADS ITERATIONS WARMUP SHAPE[,SHAPE...]
 *   DIR: an export dir holding saved_model.pb or model.onnx (converted at
 *        load, as `dcmserve serve` does); the serving_default signature's
 *        single float input is fed.
 *   SHAPE: dims of that input joined by 'x', e.g. 1x3x320x320.
 * glibc's heap and OpenBLAS's thread count are set as `dcmserve benchmark`
 * sets them. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_malloc.h"
#include "rt_model.h"
#include "rt_onnx_load.h"

#define MAX_SHAPES 16

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Parses "AxBxC" into s; 0 on success. */
static int parse_shape(const char *txt, rt_shape *s) {
    memset(s, 0, sizeof *s);
    const char *p = txt;
    while (*p) {
        char *end = NULL;
        long d = strtol(p, &end, 10);
        if (end == p || d < 1 || s->rank == RT_MAX_RANK) return -1;
        s->dim[s->rank++] = d;
        if (*end == 'x') end++;
        else if (*end != '\0') return -1;
        p = end;
    }
    return s->rank > 0 ? 0 : -1;
}

/* One shape: first call, warm-up, timed calls; prints a JSON line. */
static int run_shape(rt_model *m, const char *in_name, const char *const *fetches, int nout,
                     const char *shape_txt, long iters, long warmup, double *lat) {
    rt_shape s;
    if (parse_shape(shape_txt, &s) != 0) {
        fprintf(stderr, "bench_onnx_dynamic: bad shape \"%s\" (want e.g. 1x3x320x320)\n",
                shape_txt);
        return -1;
    }
    rt_tensor *in = NULL, *outs[8] = {0};
    if (rt_tensor_new(RT_DT_FLOAT, &s, &in) != MS_OK) {
        fprintf(stderr, "bench_onnx_dynamic: %s\n", ms_errmsg());
        return -1;
    }
    /* The same values as ort_bench*.js and `dcmserve benchmark`. */
    uint64_t seed = 42;
    float *f = rt_tensor_f32(in);
    for (int64_t i = 0; i < in->nelem; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        f[i] = (float)((double)(seed >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
    }
    rt_feed feed = {.name = in_name, .tensor = in};
    int rc = -1;
    double first = 0, total = 0;
    for (long k = -1; k < warmup + iters; k++) {
        if (k == warmup) total = now_ms();
        double t0 = now_ms();
        ms_status st = rt_model_run(m, &feed, 1, fetches, nout, NULL, 0, NULL, outs);
        double dt = now_ms() - t0;
        if (st != MS_OK) {
            fprintf(stderr, "bench_onnx_dynamic: run at %s: %s\n", shape_txt, ms_errmsg());
            goto out;
        }
        for (int o = 0; o < nout; o++)
            rt_tensor_unref(outs[o]);
        if (k < 0) first = dt;
        else if (k >= warmup) lat[k - warmup] = dt;
    }
    total = now_ms() - total;
    qsort(lat, (size_t)iters, sizeof(double), cmp_double);
    double median = iters % 2 ? lat[iters / 2] : (lat[iters / 2 - 1] + lat[iters / 2]) / 2;
    long r99 = (long)((99 * iters + 99) / 100) - 1;
    double p99 = lat[r99 < 0 ? 0 : r99 >= iters ? iters - 1 : r99];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"shape\": \"%s\", \"first_ms\": %.3f, \"median_ms\": %.3f, \"p99_ms\": %.3f, "
           "\"min_ms\": %.3f, \"mean_ms\": %.3f, \"iterations\": %ld, \"warmup\": %ld, "
           "\"peak_rss_mb\": %.1f}\n",
           shape_txt, first, median, p99, lat[0], total / (double)iters, iters, warmup,
           (double)ru.ru_maxrss / 1024.0);
    fflush(stdout);
    rc = 0;
out:
    rt_tensor_unref(in);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: bench_onnx_dynamic DIR THREADS ITERATIONS WARMUP "
                        "SHAPE[,SHAPE...]\n");
        return 2;
    }
    const char *dir = argv[1];
    long threads = strtol(argv[2], NULL, 10), iters = strtol(argv[3], NULL, 10),
         warmup = strtol(argv[4], NULL, 10);
    if (threads < 0 || iters < 1 || warmup < 0) {
        fprintf(stderr, "bench_onnx_dynamic: THREADS >= 0, ITERATIONS >= 1, WARMUP >= 0\n");
        return 2;
    }
    ms_malloc_keep_heap();
    rt_onnx_serve_enable();
    kn_backend *be = kn_cpu_backend_new((int)threads);
    if (be == NULL) return 1;
    openblas_set_num_threads(be->intra_op_threads);
    int rc = 1;
    rt_model *m = NULL;
    double *lat = malloc((size_t)iters * sizeof(double));
    char *shapes = strdup(argv[5]);
    const char *tags[] = {"serve"};
    if (lat == NULL || shapes == NULL) goto out;
    double t0 = now_ms();
    if (rt_model_load(dir, tags, 1, be, &m) != MS_OK) {
        fprintf(stderr, "bench_onnx_dynamic: loading %s: %s\n", dir, ms_errmsg());
        goto out;
    }
    double load_ms = now_ms() - t0;
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    const Tensorflow__SignatureDef *sd = NULL;
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, "serving_default") == 0)
            sd = mg->signature_def[i]->value;
    if (sd == NULL || sd->n_inputs != 1 || sd->n_outputs < 1 || sd->n_outputs > 8) {
        fprintf(stderr, "bench_onnx_dynamic: want a serving_default signature with one input "
                        "and 1..8 outputs\n");
        goto out;
    }
    const char *fetches[8];
    for (size_t i = 0; i < sd->n_outputs; i++)
        fetches[i] = sd->outputs[i]->value->name;
    printf("{\"load_ms\": %.3f, \"intra_op_threads\": %d}\n", load_ms, be->intra_op_threads);
    int n = 0;
    for (char *tok = strtok(shapes, ","); tok != NULL; tok = strtok(NULL, ","), n++) {
        if (n == MAX_SHAPES) {
            fprintf(stderr, "bench_onnx_dynamic: at most %d shapes\n", MAX_SHAPES);
            goto out;
        }
        if (run_shape(m, sd->inputs[0]->value->name, fetches, (int)sd->n_outputs, tok, iters,
                      warmup, lat) != 0)
            goto out;
    }
    rc = 0;
out:
    free(shapes);
    free(lat);
    if (m) rt_model_unref(m);
    kn_backend_free(be);
    return rc;
}
