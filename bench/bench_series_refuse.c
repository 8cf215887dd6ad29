/* bench_series_refuse.c - what refusing an awkward series costs against
 * decoding a good one, in process, one thread: dcm_volume_decode (the code
 * of DcmDecodeVolume) on series whose files are already in memory, median
 * CPU time over RUNS runs each, and the pixels the pixel module decoded
 * meanwhile (dcm_pixels_decoded: 0 for a refusal). Built and run by
 * bench/bench_series_refuse.sh.
 *
 *   bench_series_refuse RUNS GOOD_DIR [NAME=DIR]...
 * prints one line per series: name, median ms, % of the good one, pixels
 * decoded per run, and the refusal's message (the good one: "ok"). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcm_pixel.h"
#include "dcm_volume.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_s(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of dir, in name order, into memory. */
static int load_dir(const char *dir, rt_str **out, int64_t *n) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    char **names = NULL;
    int64_t k = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, sizeof(*names) * (size_t)(k + 1));
        names[k++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof(*names), cmp_s);
    rt_str *f = calloc((size_t)(k ? k : 1), sizeof(*f));
    for (int64_t i = 0; i < k; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        FILE *fp = fopen(path, "rb");
        if (fp == NULL) return -1;
        fseek(fp, 0, SEEK_END);
        long len = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *b = malloc((size_t)len);
        if (fread(b, 1, (size_t)len, fp) != (size_t)len) return -1;
        fclose(fp);
        f[i].data = b;
        f[i].len = (uint64_t)len;
        free(names[i]);
    }
    free(names);
    *out = f;
    *n = k;
    return 0;
}

/* Median ms of RUNS decodes; *pixels per run; msg: the refusal or "ok". */
static double time_series(const rt_str *f, int64_t n, int runs, uint64_t *pixels, char *msg,
                          size_t cap) {
    dcm_volume_opts o;
    memset(&o, 0, sizeof(o));
    double *t = malloc(sizeof(double) * (size_t)runs);
    uint64_t p0 = dcm_pixels_decoded();
    for (int r = 0; r < runs; r++) {
        rt_tensor *out = NULL;
        double t0 = now_ms();
        ms_status st = dcm_volume_decode(NULL, &o, f, n, &out, NULL);
        t[r] = now_ms() - t0;
        snprintf(msg, cap, "%s", st == MS_OK ? "ok" : ms_errmsg());
        rt_tensor_unref(out);
    }
    *pixels = (dcm_pixels_decoded() - p0) / (uint64_t)runs;
    qsort(t, (size_t)runs, sizeof(double), cmp_d);
    double m = t[runs / 2];
    free(t);
    return m;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_series_refuse RUNS GOOD_DIR [NAME=DIR]...\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    if (runs < 1) runs = 1;
    rt_str *f;
    int64_t n;
    char msg[512];
    uint64_t px;
    if (load_dir(argv[2], &f, &n) != 0) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    double good = time_series(f, n, runs, &px, msg, sizeof(msg));
    printf("| good (%lld slices) | %.3f | 100 %% | %llu | %s |\n", (long long)n, good,
           (unsigned long long)px, msg);
    for (int a = 3; a < argc; a++) {
        char *eq = strchr(argv[a], '=');
        if (eq == NULL) continue;
        *eq = '\0';
        rt_str *g;
        int64_t m;
        if (load_dir(eq + 1, &g, &m) != 0) {
            fprintf(stderr, "cannot read %s\n", eq + 1);
            return 1;
        }
        double t = time_series(g, m, runs, &px, msg, sizeof(msg));
        printf("| %s (%lld files) | %.3f | %.2f %% | %llu | %s |\n", argv[a], (long long)m, t,
               100.0 * t / good, (unsigned long long)px, msg);
    }
    return 0;
}
