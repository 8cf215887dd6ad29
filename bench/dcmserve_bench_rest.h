/* dcmserve_bench_rest.h - the REST mode of dcmserve-bench (--api=rest). */
#ifndef DCMSERVE_BENCH_REST_H
#define DCMSERVE_BENCH_REST_H

typedef struct bench_rest_opts {
    const char *target;    /* "127.0.0.1:8501" */
    const char *model;     /* for the default path /v1/models/<model>:predict */
    const char *path;      /* --rest_path, or NULL */
    const char *body_file; /* --body: the JSON to POST, or NULL */
    const char *values;    /* --values: {"instances": [values]} when no --body */
    const char *label;
    int concurrency;
    double duration_s, warmup_s;
    int json;
} bench_rest_opts;

/* Runs the closed-loop REST benchmark and prints its figures; 0 when every
 * measured call answered 200, 1 otherwise, 2 on bad options. */
int bench_rest_main(const bench_rest_opts *o);

#endif /* DCMSERVE_BENCH_REST_H */
