/* srv_metrics.c - counters kept in a small fixed table under one mutex (a
 * request touches it once, after it is answered) plus an atomic in-flight
 * gauge. Series beyond SRV_METRICS_MAX_SERIES are folded into model "other"
 * so that clients naming random models cannot grow memory. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srv_metrics.h"
#include "srv_status.h"

#define SRV_METRICS_MAX_SERIES 256
#define NBUCKETS 14

static const double BUCKETS[NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,   5,     10};

typedef struct series {
    char model[128];
    int64_t version;
    char api[8];
    int code; /* ms_status */
    uint64_t count;
    uint64_t bucket[NBUCKETS]; /* per-bucket (not cumulative) counts */
    double sum;
} series;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static series table[SRV_METRICS_MAX_SERIES];
static int nseries;
static atomic_int in_flight;

static const char *code_name(int st) {
    return srv_grpc_code_name(srv_status_to_grpc((ms_status)st));
}

void srv_metrics_in_flight(int delta) {
    atomic_fetch_add(&in_flight, delta);
}

void srv_metrics_request(const char *model, int64_t version, const char *api, ms_status st,
                         double seconds) {
    if (model == NULL) model = "";
    pthread_mutex_lock(&mu);
    series *s = NULL;
    for (int i = 0; i < nseries && s == NULL; i++)
        if (table[i].version == version && table[i].code == (int)st &&
            strcmp(table[i].api, api) == 0 && strcmp(table[i].model, model) == 0)
            s = &table[i];
    if (s == NULL && nseries < SRV_METRICS_MAX_SERIES - 1) {
        s = &table[nseries++];
        snprintf(s->model, sizeof s->model, "%s", model);
        s->version = version;
        snprintf(s->api, sizeof s->api, "%s", api);
        s->code = (int)st;
    }
    if (s == NULL) { /* the last slot collects everything else */
        s = &table[SRV_METRICS_MAX_SERIES - 1];
        if (nseries < SRV_METRICS_MAX_SERIES) {
            nseries = SRV_METRICS_MAX_SERIES;
            snprintf(s->model, sizeof s->model, "other");
            snprintf(s->api, sizeof s->api, "any");
            s->code = MS_EINTERNAL;
        }
    }
    s->count++;
    s->sum += seconds;
    for (int b = 0; b < NBUCKETS; b++)
        if (seconds <= BUCKETS[b]) {
            s->bucket[b]++;
            break;
        }
    pthread_mutex_unlock(&mu);
}

/* Growing text buffer. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (np == NULL) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* Label values: model names are operator-given, but escape \ " and newline
 * as the format requires. */
static void put_label(sbuf *b, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') put(b, "\\%c", *v);
        else if (*v == '\n') put(b, "\\n");
        else put(b, "%c", *v);
    }
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f == NULL) return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
}

/* ---- dcmserve_batch_size: rows per batched run (issue 13) ---- */

#define BS_MAX_SERIES 64
#define BS_NBUCKETS 10
static const int BS_BUCKETS[BS_NBUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
typedef struct bs_series {
    char model[96];
    char sig[64];
    int64_t version;
    uint64_t bucket[BS_NBUCKETS + 1]; /* per bucket, last = +Inf */
    uint64_t count, sum;
} bs_series;
static pthread_mutex_t bs_mu = PTHREAD_MUTEX_INITIALIZER;
static bs_series bs_table[BS_MAX_SERIES];
static int bs_n;

void srv_metrics_batch_size(const char *model, int64_t version, const char *signature, int n) {
    if (model == NULL) model = "";
    if (signature == NULL) signature = "";
    pthread_mutex_lock(&bs_mu);
    bs_series *s = NULL;
    for (int i = 0; i < bs_n && s == NULL; i++)
        if (bs_table[i].version == version && strncmp(bs_table[i].model, model, 95) == 0 &&
            strncmp(bs_table[i].sig, signature, 63) == 0)
            s = &bs_table[i];
    if (s == NULL && bs_n < BS_MAX_SERIES) {
        s = &bs_table[bs_n++];
        snprintf(s->model, sizeof s->model, "%s", model);
        snprintf(s->sig, sizeof s->sig, "%s", signature);
        s->version = version;
    }
    if (s != NULL) {
        int b = 0;
        while (b < BS_NBUCKETS && n > BS_BUCKETS[b])
            b++;
        s->bucket[b]++;
        s->count++;
        s->sum += (uint64_t)(n > 0 ? n : 0);
    }
    pthread_mutex_unlock(&bs_mu);
}

static void put_batch_sizes(sbuf *b) {
    pthread_mutex_lock(&bs_mu);
    put(b, "# HELP dcmserve_batch_size Rows per batched run (--enable_batching).\n"
           "# TYPE dcmserve_batch_size histogram\n");
    for (int i = 0; i < bs_n; i++) {
        bs_series *s = &bs_table[i];
        uint64_t cum = 0;
        for (int k = 0; k <= BS_NBUCKETS; k++) {
            cum += s->bucket[k];
            put(b, "dcmserve_batch_size_bucket{model=\"");
            put_label(b, s->model);
            put(b, "\",version=\"%" PRId64 "\",signature=\"", s->version);
            put_label(b, s->sig);
            if (k < BS_NBUCKETS)
                put(b, "\",le=\"%d\"} %" PRIu64 "\n", BS_BUCKETS[k], cum);
            else
                put(b, "\",le=\"+Inf\"} %" PRIu64 "\n", cum);
        }
        for (int k = 0; k < 2; k++) {
            put(b, "dcmserve_batch_size_%s{model=\"", k ? "count" : "sum");
            put_label(b, s->model);
            put(b, "\",version=\"%" PRId64 "\",signature=\"", s->version);
            put_label(b, s->sig);
            put(b, "\"} %" PRIu64 "\n", k ? s->count : s->sum);
        }
    }
    pthread_mutex_unlock(&bs_mu);
}

char *srv_metrics_render(srv_manager *mgr) {
    sbuf b = {0};
    pthread_mutex_lock(&mu);
    /* TF Serving's names: per model and status (all APIs, versions summed). */
    put(&b, "# HELP :tensorflow:serving:request_count The number of requests.\n"
            "# TYPE :tensorflow:serving:request_count counter\n");
    for (int i = 0; i < nseries; i++) {
        uint64_t n = 0;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            if (strcmp(table[j].model, table[i].model) == 0 && table[j].code == table[i].code)
                first = 0;
        if (!first) continue;
        for (int j = i; j < nseries; j++)
            if (strcmp(table[j].model, table[i].model) == 0 && table[j].code == table[i].code)
                n += table[j].count;
        put(&b, ":tensorflow:serving:request_count{model_name=\"");
        put_label(&b, table[i].model);
        put(&b, "\",status=\"%s\"} %" PRIu64 "\n", code_name(table[i].code), n);
    }
    put(&b, "# HELP :tensorflow:serving:request_latency Request latency in seconds.\n"
            "# TYPE :tensorflow:serving:request_latency histogram\n");
    for (int i = 0; i < nseries; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            if (strcmp(table[j].model, table[i].model) == 0 && strcmp(table[j].api, table[i].api) == 0)
                first = 0;
        if (!first) continue;
        uint64_t bk[NBUCKETS] = {0}, cnt = 0;
        double sum = 0;
        for (int j = i; j < nseries; j++)
            if (strcmp(table[j].model, table[i].model) == 0 && strcmp(table[j].api, table[i].api) == 0) {
                for (int k = 0; k < NBUCKETS; k++)
                    bk[k] += table[j].bucket[k];
                cnt += table[j].count;
                sum += table[j].sum;
            }
        uint64_t cum = 0;
        for (int k = 0; k <= NBUCKETS; k++) {
            if (k < NBUCKETS) cum += bk[k];
            put(&b, ":tensorflow:serving:request_latency_bucket{model_name=\"");
            put_label(&b, table[i].model);
            if (k < NBUCKETS)
                put(&b, "\",API=\"%s\",le=\"%g\"} %" PRIu64 "\n", table[i].api, BUCKETS[k], cum);
            else
                put(&b, "\",API=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", table[i].api, cnt);
        }
        put(&b, ":tensorflow:serving:request_latency_sum{model_name=\"");
        put_label(&b, table[i].model);
        put(&b, "\",API=\"%s\"} %.9g\n", table[i].api, sum);
        put(&b, ":tensorflow:serving:request_latency_count{model_name=\"");
        put_label(&b, table[i].model);
        put(&b, "\",API=\"%s\"} %" PRIu64 "\n", table[i].api, cnt);
    }
    put(&b, "# HELP dcmserve_requests_total Requests answered.\n"
            "# TYPE dcmserve_requests_total counter\n");
    for (int i = 0; i < nseries; i++) {
        put(&b, "dcmserve_requests_total{model=\"");
        put_label(&b, table[i].model);
        put(&b, "\",version=\"%" PRId64 "\",api=\"%s\",code=\"%s\"} %" PRIu64 "\n",
            table[i].version, table[i].api, code_name(table[i].code), table[i].count);
    }
    pthread_mutex_unlock(&mu);
    put(&b, "# HELP dcmserve_loaded_versions Model versions available.\n"
            "# TYPE dcmserve_loaded_versions gauge\ndcmserve_loaded_versions %d\n",
        mgr ? srv_manager_loaded_versions(mgr) : 0);
    put(&b, "# HELP dcmserve_requests_in_flight Requests being answered.\n"
            "# TYPE dcmserve_requests_in_flight gauge\ndcmserve_requests_in_flight %d\n",
        atomic_load(&in_flight));
    put_batch_sizes(&b);
    put(&b, "# HELP dcmserve_process_resident_memory_bytes Resident memory.\n"
            "# TYPE dcmserve_process_resident_memory_bytes gauge\n"
            "dcmserve_process_resident_memory_bytes %ld\n", rss_bytes());
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

ms_status srv_metrics_config_path(const char *file, char *path, size_t n) {
    path[0] = 0;
    FILE *f = fopen(file, "r");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "--monitoring_config_file: cannot read %s", file);
    char text[4096];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    const char *pc = strstr(text, "prometheus_config");
    if (pc == NULL) return MS_OK;
    const char *en = strstr(pc, "enable");
    if (en == NULL) return MS_OK;
    en += strlen("enable");
    while (*en == ' ' || *en == ':' || *en == '\t') en++;
    if (strncmp(en, "true", 4) != 0) return MS_OK;
    const char *p = strstr(pc, "path");
    if (p == NULL) {
        snprintf(path, n, "/monitoring/prometheus/metrics");
        return MS_OK;
    }
    p = strchr(p, '"');
    const char *e = p ? strchr(p + 1, '"') : NULL;
    if (p == NULL || e == NULL || p[1] != '/' || (size_t)(e - p - 1) >= n)
        return ms_errf(MS_EINVAL, "--monitoring_config_file: prometheus_config path must be a "
                                  "quoted path starting with '/' (at most %zu bytes)", n - 1);
    memcpy(path, p + 1, (size_t)(e - p - 1));
    path[e - p - 1] = 0;
    return MS_OK;
}
