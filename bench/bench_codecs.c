/* bench_codecs.c - median milliseconds per frame of dcm_codec_decode, wall
 * clock and thread CPU time (the latter is what counts on a shared machine).
 * Usage: bench_codecs MANIFEST_DIR [repeats]; prints "name wall_ms cpu_ms". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcm_codec.h"
#include "util_codecs.h"

static double now_ms(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int reps = argc > 2 ? atoi(argv[2]) : 21;
    ucodec_frame *v;
    size_t n = ucodec_load_manifest(argv[1], &v);
    double *t = malloc(sizeof(double) * (size_t)reps), *c = malloc(sizeof(double) * (size_t)reps);
    for (size_t i = 0; i < n; i++) {
        v[i].geom.photometric = v[i].photometric;
        size_t len, os = ucodec_frame_size(&v[i].geom);
        uint8_t *d = ucodec_read_file(v[i].frame_path, &len), *o = malloc(os);
        int rgb;
        for (int r = 0; r < reps; r++) {
            double a = now_ms(CLOCK_MONOTONIC), ac = now_ms(CLOCK_THREAD_CPUTIME_ID);
            if (dcm_codec_decode(v[i].kind, d, len, &v[i].geom, o, os, &rgb) != MS_OK) {
                fprintf(stderr, "%s: %s\n", v[i].name, ms_errmsg());
                return 1;
            }
            t[r] = now_ms(CLOCK_MONOTONIC) - a;
            c[r] = now_ms(CLOCK_THREAD_CPUTIME_ID) - ac;
        }
        qsort(t, (size_t)reps, sizeof(double), cmp);
        qsort(c, (size_t)reps, sizeof(double), cmp);
        printf("%s %.3f %.3f\n", v[i].name, t[reps / 2], c[reps / 2]);
        free(d);
        free(o);
    }
    free(t);
    free(c);
    free(v);
    return 0;
}
