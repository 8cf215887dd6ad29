/* bench_dicom.c - median time of DICOM bytes -> windowed float32 [0,1] for
 * one file, one thread, in process: dcm_decode_hu + dcm_window, N runs.
 * Built and run by bench/bench_dicom.sh against build/libdcm_core.a. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcm_pixel.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_dicom FILE RUNS\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    int runs = atoi(argv[2]);
    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        dcm_image *img = NULL;
        if (dcm_decode_hu(b, (size_t)n, NULL, &img) != MS_OK) {
            fprintf(stderr, "%s: %s\n", argv[1], ms_errmsg());
            return 1;
        }
        size_t cnt = (size_t)img->frames * img->rows * img->cols * img->samples;
        dcm_window(img->data, img->data, cnt, 40, 400);
        dcm_image_free(img);
        t[r] = now_ms() - t0;
    }
    qsort(t, (size_t)runs, sizeof(double), cmp);
    printf("%.4f\n", t[runs / 2]);
    free(t);
    free(b);
    return 0;
}
