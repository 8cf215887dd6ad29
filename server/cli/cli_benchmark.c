/* cli_benchmark.c - `dcmserve benchmark --dir DIR`: loads a SavedModel once,
 * feeds synthetic inputs that satisfy a signature and times the graph
 * in-process after warm-up. Prints median / p99 / mean latency, images/s and
 * the process's peak RSS; --json prints the same as one JSON line. glibc's
 * heap is kept as `serve` keeps it (common/ms_malloc.h). */
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "ms_malloc.h"
#include "rt_model.h"
#include "cli.h"
#include "cli_dirs.h"
#include "cli_device.h"

#define BENCH_MAX_IO 32

static void usage(FILE *f) {
    fprintf(f, "usage: dcmserve benchmark --dir DIR [--signature_def KEY] [--batch N]\n"
               "           [--intra_op_threads T] [--iterations N] [--warmup N]\n"
               "           [--input_files KEY=FILE[,KEY=FILE...]] [--json]\n"
               "\n"
               "Loads the SavedModel (or model.onnx) in DIR (an export dir, or a base dir\n"
               "whose highest numeric version is used) once, feeds synthetic inputs that\n"
               "satisfy the signature (dynamic batch -> N; floats uniform in [-1, 1)) and\n"
               "times the graph in-process after warm-up.\n"
               "\n"
               "  --signature_def KEY  signature to run (default serving_default)\n"
               "  --batch N            batch size for dynamic batch dims (default 1)\n"
               "  --intra_op_threads T threads per op (default: one per core)\n"
               "  --iterations N       timed runs (default 50)\n"
               "  --warmup N           untimed runs first (default 5)\n"
               "  --input_files K=F    feed input K from file F: raw bytes for DT_STRING\n"
               "                       inputs (e.g. a DICOM file, repeated N times)\n"
               "  --json               one JSON line: median_ms, p99_ms, mean_ms,\n"
               "                       images_per_s, peak_rss_mb, ...\n"
               "  --device DEV         auto (default), cpu, cuda or cuda:N (docs/gpu.md)\n"
               "  --precision P        fp32 (default) or tf32: the GPU's matrix products and\n"
               "                       convolutions (docs/gpu.md); fp16 is refused\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static ms_status read_file(const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, r;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return ms_errf(MS_ENOMEM, "reading %s: out of memory", path);
            }
            buf = nb;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *data = buf;
    *len = n;
    return MS_OK;
}

/* Value of KEY in "K1=F1,K2=F2", copied into out; NULL when absent. */
static const char *input_file_for(const char *spec, const char *key, char *out, size_t cap) {
    if (spec == NULL) return NULL;
    size_t kl = strlen(key);
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = len - kl - 1;
            if (vl >= cap) vl = cap - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = '\0';
            return out;
        }
        p += len + (comma ? 1 : 0);
    }
    return NULL;
}

/* Builds the synthetic (or file-fed) tensor for one signature input. */
static ms_status make_input(const char *key, const Tensorflow__TensorInfo *ti, int64_t batch,
                            const char *files, uint64_t *seed, rt_tensor **out) {
    rt_dtype dt = (rt_dtype)ti->dtype;
    const Tensorflow__TensorShapeProto *sp = ti->tensor_shape;
    rt_shape s = {0};
    if (sp == NULL || sp->unknown_rank)
        return ms_errf(MS_EINVAL, "input %s has an unknown rank; cannot make a synthetic tensor",
                       key);
    if (sp->n_dim > RT_MAX_RANK) return ms_errf(MS_ENOTSUP, "input %s: rank too large", key);
    s.rank = (int)sp->n_dim;
    for (int i = 0; i < s.rank; i++) {
        int64_t d = sp->dim[i]->size;
        if (d < 0 && i == 0) d = batch;
        if (d < 0)
            return ms_errf(MS_EINVAL, "input %s: dim %d is dynamic; only the batch dim may be", key,
                           i);
        s.dim[i] = d;
    }
    char path[4096];
    const char *file = input_file_for(files, key, path, sizeof path);
    if (dt == RT_DT_STRING) {
        if (file == NULL)
            return ms_errf(MS_EINVAL,
                           "input %s is DT_STRING; give its bytes with "
                           "--input_files %s=FILE",
                           key, key);
        uint8_t *data = NULL;
        size_t len = 0;
        ms_status st = read_file(file, &data, &len);
        if (st != MS_OK) return st;
        int64_t n = rt_shape_nelem(&s);
        rt_str *strs = calloc((size_t)(n > 0 ? n : 1), sizeof(rt_str));
        if (strs == NULL) {
            free(data);
            return ms_errf(MS_ENOMEM, "out of memory");
        }
        for (int64_t i = 0; i < n; i++)
            strs[i] = (rt_str){.data = data, .len = len};
        st = rt_tensor_new_strings(&s, strs, out);
        free(strs);
        free(data);
        return st;
    }
    if (file != NULL)
        return ms_errf(MS_ENOTSUP, "--input_files is for DT_STRING inputs; %s is %s", key,
                       rt_dtype_name(dt));
    ms_status st = rt_tensor_new(dt, &s, out); /* zero-filled */
    if (st != MS_OK) return st;
    if (dt == RT_DT_FLOAT) {
        float *f = rt_tensor_f32(*out);
        for (int64_t i = 0; i < (*out)->nelem; i++) {
            *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
            f[i] = (float)((double)(*seed >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
        }
    }
    return MS_OK;
}

int cli_benchmark(int argc, char **argv) {
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"signature_def", required_argument, NULL, 's'},
        {"batch", required_argument, NULL, 'b'},
        {"intra_op_threads", required_argument, NULL, 't'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},
        {"input_files", required_argument, NULL, 'f'},
        {"json", no_argument, NULL, 'j'},
        {"log_level", required_argument, NULL, 'L'},
        {"device", required_argument, NULL, 'D'},
        {"precision", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *sig_key = "serving_default", *files = NULL;
    long batch = 1, threads = 0, iters = 50, warmup = 5;
    int json = 0;
    const char *device = NULL, *precision = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 's':
            sig_key = optarg;
            break;
        case 'f':
            files = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'D':
            device = optarg;
            break;
        case 'P':
            precision = optarg;
            break;
        case 'b':
            batch = strtol(optarg, &end, 10);
            break;
        case 't':
            threads = strtol(optarg, &end, 10);
            break;
        case 'i':
            iters = strtol(optarg, &end, 10);
            break;
        case 'w':
            warmup = strtol(optarg, &end, 10);
            break;
        case 'L': {
            ms_log_level lvl;
            if (ms_log_parse_level(optarg, &lvl) != 0) {
                fprintf(stderr, "benchmark: unknown --log_level \"%s\"\n", optarg);
                return 2;
            }
            ms_log_set_level(lvl);
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "benchmark: unknown or incomplete option \"%s\"\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        if (end != NULL && (*end != '\0' || end == optarg)) {
            fprintf(stderr, "benchmark: %s wants an integer, got \"%s\"\n", argv[optind - 1],
                    optarg);
            return 2;
        }
    }
    if (dir == NULL || optind != argc) {
        fprintf(stderr, "benchmark: --dir is required (and takes no positional arguments)\n");
        usage(stderr);
        return 2;
    }
    if (batch < 1 || iters < 1 || warmup < 0 || threads < 0) {
        fprintf(stderr, "benchmark: --batch and --iterations must be >= 1, --warmup and "
                        "--intra_op_threads >= 0\n");
        return 2;
    }
    /* glibc's heap as `serve` keeps it: without it a batch's megabytes are
     * mapped and faulted in afresh on every run, which the daemon never does
     * (a 2-file batch of the demo model took 6.3 ms instead of 0.55). */
    ms_malloc_keep_heap();
    char export_dir[4096];
    if (cli_export_dir(dir, export_dir, sizeof export_dir) != 0) {
        fprintf(stderr, "benchmark: %s has no saved_model.pb or model.onnx and no numeric "
                        "version folder holding one\n", dir);
        return 1;
    }

    int gpu = -1, drc = cli_device_choose("benchmark", device, 0, precision, &gpu);
    if (drc != 0) return drc;
    kn_backend *be = kn_cpu_backend_new((int)threads);
    if (be == NULL) {
        fprintf(stderr, "benchmark: out of memory\n");
        return 1;
    }
    /* The reference CPU kernels call OpenBLAS; a threaded build of it (the
     * serial one has no threads) is held to the same count so that
     * --intra_op_threads means what it says. */
    openblas_set_num_threads(be->intra_op_threads);

    int rc = 1;
    rt_model *m = NULL;
    kn_backend *dev = NULL;
    rt_tensor *inputs[BENCH_MAX_IO] = {0}, *outs[BENCH_MAX_IO] = {0};
    rt_feed feeds[BENCH_MAX_IO];
    const char *fetches[BENCH_MAX_IO];
    double *lat = NULL;
    int nin = 0, nout = 0;
    const char *tags[] = {"serve"};
    if (cli_device_open("benchmark", device, gpu, be, &dev) != 0) goto out;
    double t0 = now_ms();
    ms_status st = rt_model_load_on(export_dir, tags, 1, be, dev, &m);
    if (st != MS_OK) {
        fprintf(stderr, "benchmark: loading %s: %s\n", export_dir, ms_errmsg());
        goto out;
    }
    double load_ms = now_ms() - t0;
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    const Tensorflow__SignatureDef *sd = NULL;
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, sig_key) == 0) sd = mg->signature_def[i]->value;
    if (sd == NULL) {
        fprintf(stderr, "benchmark: Serving signature key \"%s\" not found.\n", sig_key);
        goto out;
    }
    if (sd->n_inputs > BENCH_MAX_IO || sd->n_outputs > BENCH_MAX_IO || sd->n_outputs == 0) {
        fprintf(stderr,
                "benchmark: signature %s has %zu inputs and %zu outputs (1..%d "
                "outputs, up to %d inputs supported)\n",
                sig_key, sd->n_inputs, sd->n_outputs, BENCH_MAX_IO, BENCH_MAX_IO);
        goto out;
    }
    uint64_t seed = 42;
    for (size_t i = 0; i < sd->n_inputs; i++, nin++) {
        const Tensorflow__TensorInfo *ti = sd->inputs[i]->value;
        st = make_input(sd->inputs[i]->key, ti, batch, files, &seed, &inputs[i]);
        if (st != MS_OK) {
            fprintf(stderr, "benchmark: %s\n", ms_errmsg());
            goto out;
        }
        feeds[i] = (rt_feed){.name = ti->name, .tensor = inputs[i]};
    }
    for (size_t i = 0; i < sd->n_outputs; i++)
        fetches[nout++] = sd->outputs[i]->value->name;

    for (long k = 0; k < warmup; k++) {
        st = rt_model_run(m, feeds, nin, fetches, nout, NULL, 0, NULL, outs);
        if (st != MS_OK) {
            fprintf(stderr, "benchmark: run: %s\n", ms_errmsg());
            goto out;
        }
        for (int o = 0; o < nout; o++)
            rt_tensor_unref(outs[o]);
    }
    lat = malloc((size_t)iters * sizeof(double));
    if (lat == NULL) goto out;
    double total0 = now_ms();
    for (long k = 0; k < iters; k++) {
        double s0 = now_ms();
        st = rt_model_run(m, feeds, nin, fetches, nout, NULL, 0, NULL, outs);
        lat[k] = now_ms() - s0;
        if (st != MS_OK) {
            fprintf(stderr, "benchmark: run: %s\n", ms_errmsg());
            goto out;
        }
        for (int o = 0; o < nout; o++)
            rt_tensor_unref(outs[o]);
    }
    double total = now_ms() - total0;
    qsort(lat, (size_t)iters, sizeof(double), cmp_double);
    double median = iters % 2 ? lat[iters / 2] : (lat[iters / 2 - 1] + lat[iters / 2]) / 2;
    /* Nearest-rank p99. */
    long r99 = (long)((99 * iters + 99) / 100) - 1;
    double p99 = lat[r99 < 0 ? 0 : r99 >= iters ? iters - 1 : r99];
    double mean = total / (double)iters;
    double ips = (double)batch * (double)iters / (total / 1e3);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    if (json) {
        printf("{\"dir\": \"%s\", \"signature_def\": \"%s\", \"batch\": %ld, "
               "\"intra_op_threads\": %d, \"iterations\": %ld, \"warmup\": %ld, "
               "\"load_ms\": %.3f, \"median_ms\": %.3f, \"p99_ms\": %.3f, \"mean_ms\": %.3f, "
               "\"min_ms\": %.3f, \"images_per_s\": %.2f, \"peak_rss_mb\": %.1f}\n",
               export_dir, sig_key, batch, be->intra_op_threads, iters, warmup, load_ms, median,
               p99, mean, lat[0], ips, rss_mb);
    } else {
        printf("model        %s (signature %s)\n", export_dir, sig_key);
        printf("batch        %ld, intra_op_threads %d, %ld iterations after %ld warm-up\n", batch,
               be->intra_op_threads, iters, warmup);
        printf("load         %.1f ms\n", load_ms);
        printf("latency      median %.3f ms, p99 %.3f ms, mean %.3f ms, min %.3f ms\n", median, p99,
               mean, lat[0]);
        printf("throughput   %.2f images/s\n", ips);
        printf("peak RSS     %.1f MiB\n", rss_mb);
    }
    rc = 0;
out:
    free(lat);
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(inputs[i]);
    if (m) rt_model_unref(m);
    kn_backend_free(dev);
    kn_backend_free(be);
    return rc;
}
