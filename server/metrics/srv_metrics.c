/* srv_metrics.c - counters kept in small fixed tables under one mutex (a
 * request touches them once, after it is answered) plus an atomic in-flight
 * gauge, and the request log. Series beyond a table's size are folded into
 * model "other" so that clients naming random models cannot grow memory. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <malloc.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "dcm_ops.h"
#include "ms_build.h"
#include "ms_log.h"
#include "srv_metrics.h"
#include "srv_stats.h"
#include "srv_status.h"

#define MAX_SERIES 256
#define MAX_BATCH  64
#define MAX_MODELS 64
#define NBUCKETS   22 /* the most buckets of any histogram below */
#define NBATCHB    12

/* Request latency, 10 us .. 60 s: an answer from memory takes tens of
 * microseconds, so sub-millisecond quantiles need buckets down there. */
static const double BUCKETS[NBUCKETS] = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,    0.1,      0.25,    0.5,    1,       2.5,    5,     10,     20,    30,   60};
#define NLOADB 14
static const double LOAD_BUCKETS[NLOADB] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                            2.5,  5,     10,   25,  60,   120, 300};
static const double BATCH_BUCKETS[NBATCHB] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
static const char *const PHASE[SRV_NPHASES] = {"queue", "decode", "compute", "serialize"};

typedef struct hist {
    uint64_t bucket[NBUCKETS]; /* per-bucket (not cumulative) counts; as many used as bounds */
    uint64_t count;
    double sum;
} hist;

typedef struct series {
    char model[128];
    int64_t version;
    char signature[64];
    char api[32];
    int code; /* ms_status */
    hist total;
    hist phase[SRV_NPHASES];
    uint64_t bytes_in, bytes_out;
} series;

typedef struct bseries {
    char model[128];
    int64_t version;
    char signature[64];
    uint64_t bucket[NBATCHB], count;
    double sum;
} bseries;

typedef struct mseries {
    char model[128];
    uint64_t loads_ok, loads_failed, unloads;
    hist load, warmup;
} mseries;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static series table[MAX_SERIES];
static int nseries;
static bseries btable[MAX_BATCH];
static int nbatch;
static mseries mtable[MAX_MODELS];
static int nmodels;
static atomic_int in_flight;
static atomic_int reqlog_mode = 1;

static const char *code_name(int st) {
    return srv_grpc_code_name(srv_status_to_grpc((ms_status)st));
}

double srv_req_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* gRPC inference calls by the thread that ran them (srv_grpc.c). */
static atomic_uint_fast64_t grpc_path[SRV_GRPC_NPATHS];
static const char *const grpc_path_name[SRV_GRPC_NPATHS] = {"inline", "handover", "worker"};

void srv_metrics_grpc_path(srv_grpc_path p) {
    if ((unsigned)p < SRV_GRPC_NPATHS) atomic_fetch_add(&grpc_path[p], 1);
}

/* Graph runs for requests (:tensorflow:core:graph_runs and _run_time_usecs). */
static atomic_uint_fast64_t graph_runs, graph_run_usecs;

void srv_metrics_graph_run(double seconds) {
    atomic_fetch_add(&graph_runs, 1);
    atomic_fetch_add(&graph_run_usecs, (uint_fast64_t)(seconds > 0 ? seconds * 1e6 : 0));
}

void srv_metrics_in_flight(int delta) {
    atomic_fetch_add(&in_flight, delta);
}

static void hist_add(hist *h, const double *bounds, int nb, double v) {
    h->count++;
    h->sum += v;
    for (int b = 0; b < nb; b++)
        if (v <= bounds[b]) {
            h->bucket[b]++;
            break;
        }
}

/* The series for these labels (mu held); the last slot collects overflow. */
static series *find_series(const char *model, int64_t version, const char *sig, const char *api,
                           int code) {
    for (int i = 0; i < nseries; i++)
        if (table[i].version == version && table[i].code == code &&
            strcmp(table[i].api, api) == 0 && strcmp(table[i].model, model) == 0 &&
            strcmp(table[i].signature, sig) == 0)
            return &table[i];
    if (nseries < MAX_SERIES - 1) {
        series *s = &table[nseries++];
        snprintf(s->model, sizeof s->model, "%s", model);
        s->version = version;
        snprintf(s->signature, sizeof s->signature, "%s", sig);
        snprintf(s->api, sizeof s->api, "%s", api);
        s->code = code;
        return s;
    }
    series *s = &table[MAX_SERIES - 1];
    if (nseries < MAX_SERIES) {
        nseries = MAX_SERIES;
        snprintf(s->model, sizeof s->model, "other");
        snprintf(s->api, sizeof s->api, "any");
        s->code = MS_EINTERNAL;
    }
    return s;
}

static mseries *find_model(const char *model) {
    for (int i = 0; i < nmodels; i++)
        if (strcmp(mtable[i].model, model) == 0) return &mtable[i];
    if (nmodels < MAX_MODELS - 1) {
        mseries *s = &mtable[nmodels++];
        snprintf(s->model, sizeof s->model, "%s", model);
        return s;
    }
    mseries *s = &mtable[MAX_MODELS - 1];
    if (nmodels < MAX_MODELS) {
        nmodels = MAX_MODELS;
        snprintf(s->model, sizeof s->model, "other");
    }
    return s;
}

void srv_metrics_request(const char *model, int64_t version, const char *api, ms_status st,
                         double seconds) {
    pthread_mutex_lock(&mu);
    series *s = find_series(model ? model : "", version, "", api, (int)st);
    hist_add(&s->total, BUCKETS, NBUCKETS, seconds);
    pthread_mutex_unlock(&mu);
}

void srv_metrics_batch_size(const char *model, int64_t version, const char *signature, int n) {
    if (model == NULL) model = "";
    if (signature == NULL) signature = "";
    pthread_mutex_lock(&mu);
    bseries *s = NULL;
    for (int i = 0; i < nbatch && s == NULL; i++)
        if (btable[i].version == version && strcmp(btable[i].model, model) == 0 &&
            strcmp(btable[i].signature, signature) == 0)
            s = &btable[i];
    if (s == NULL) {
        s = &btable[nbatch < MAX_BATCH ? nbatch++ : MAX_BATCH - 1];
        if (s->count == 0) {
            snprintf(s->model, sizeof s->model, "%s", nbatch < MAX_BATCH ? model : "other");
            s->version = version;
            snprintf(s->signature, sizeof s->signature, "%s", signature);
        }
    }
    s->count++;
    s->sum += n;
    for (int b = 0; b < NBATCHB; b++)
        if (n <= BATCH_BUCKETS[b]) {
            s->bucket[b]++;
            break;
        }
    pthread_mutex_unlock(&mu);
}

void srv_metrics_warmup(const char *model, int64_t version, double seconds) {
    (void)version;
    pthread_mutex_lock(&mu);
    hist_add(&find_model(model ? model : "")->warmup, LOAD_BUCKETS, NLOADB, seconds);
    pthread_mutex_unlock(&mu);
}

void srv_metrics_model_load(const char *model, int ok, double seconds) {
    pthread_mutex_lock(&mu);
    mseries *s = find_model(model ? model : "");
    if (ok) s->loads_ok++;
    else s->loads_failed++;
    hist_add(&s->load, LOAD_BUCKETS, NLOADB, seconds);
    pthread_mutex_unlock(&mu);
}

void srv_metrics_model_unload(const char *model) {
    pthread_mutex_lock(&mu);
    find_model(model ? model : "")->unloads++;
    pthread_mutex_unlock(&mu);
}

/* ---- per-request records and the request log ---- */

void srv_reqlog_set(int mode) {
    atomic_store(&reqlog_mode, mode);
}

int srv_reqlog_parse(const char *s, int *mode) {
    if (strcasecmp(s, "off") == 0) *mode = 0;
    else if (strcasecmp(s, "errors") == 0) *mode = 1;
    else if (strcasecmp(s, "all") == 0) *mode = 2;
    else return -1;
    return 0;
}

/* Copies src into dst[cap], cut to fit (snprintf "%s" without the formatter:
 * these run several times per request). */
static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void srv_req_begin(srv_req *r, const char *api, const char *peer) {
    memset(r, 0, sizeof *r);
    copy_str(r->api, sizeof r->api, api);
    copy_str(r->peer, sizeof r->peer, peer ? peer : "");
    r->t0 = r->mark = srv_req_now();
    for (int p = 0; p < SRV_NPHASES; p++)
        r->phase[p] = -1;
    srv_metrics_in_flight(1);
}

void srv_req_begin_lazy(srv_req *r, const char *api,
                        void (*fn)(void *arg, char *buf, size_t cap), void *arg) {
    srv_req_begin(r, api, NULL);
    r->peer_fn = fn;
    r->peer_arg = arg;
}

void srv_req_model(srv_req *r, const char *model, int64_t version, const char *signature) {
    if (r == NULL) return;
    if (model) copy_str(r->model, sizeof r->model, model);
    if (version) r->version = version;
    if (signature) copy_str(r->signature, sizeof r->signature, signature);
}

void srv_req_batch(srv_req *r, int batch) {
    if (r) r->batch = batch;
}

void srv_req_phase(srv_req *r, srv_phase p) {
    if (r == NULL) return;
    double now = srv_req_now();
    r->phase[p] = (r->phase[p] > 0 ? r->phase[p] : 0) + (now - r->mark);
    r->mark = now;
}

void srv_req_end(srv_req *r, ms_status st) {
    double secs = srv_req_now() - r->t0;
    srv_metrics_in_flight(-1);
    pthread_mutex_lock(&mu);
    series *s = find_series(r->model, r->version, r->signature, r->api, (int)st);
    hist_add(&s->total, BUCKETS, NBUCKETS, secs);
    for (int p = 0; p < SRV_NPHASES; p++)
        if (r->phase[p] >= 0) hist_add(&s->phase[p], BUCKETS, NBUCKETS, r->phase[p]);
    s->bytes_in += r->bytes_in;
    s->bytes_out += r->bytes_out;
    pthread_mutex_unlock(&mu);
    _Static_assert(SRV_NPHASES == 4, "srv_stats_request takes the four phases");
    srv_stats_request(r->api, r->model, r->version, r->batch, r->phase, st, secs); /* Triton's */
    int mode = atomic_load(&reqlog_mode);
    if (mode == 0 || (mode == 1 && st == MS_OK)) return;
    if (r->peer[0] == '\0' && r->peer_fn != NULL) r->peer_fn(r->peer_arg, r->peer, sizeof r->peer);
    ms_log_field f[] = {
        {"peer", r->peer, 0},
        {"api", r->api, 0},
        {"model", r->model, 0},
        {"version", NULL, (double)r->version},
        {"signature", r->signature, 0},
        {"code", code_name((int)st), 0},
        {"latency_ms", NULL, secs * 1e3},
        {"bytes_in", NULL, (double)r->bytes_in},
        {"bytes_out", NULL, (double)r->bytes_out},
        {"batch", NULL, (double)r->batch},
    };
    ms_log_kv(st == MS_OK ? MS_LOG_INFO : MS_LOG_WARN, "request", f, (int)(sizeof f / sizeof f[0]));
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

/* What Prometheus' client libraries export as process_*: from
 * /proc/self/stat (fields after the command name, which may hold spaces and
 * parentheses: hence the last ')'), /proc/stat's boot time, /proc/self/fd. */
typedef struct proc_stats {
    double cpu_seconds, start_time;
    long rss_bytes, vsize_bytes, open_fds, max_fds;
} proc_stats;

static void proc_read(proc_stats *ps) {
    memset(ps, 0, sizeof *ps);
    ps->open_fds = ps->max_fds = -1;
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')');
        unsigned long utime = 0, stime = 0, vsize = 0;
        unsigned long long start = 0;
        long rss = 0;
        /* fields 3..24: state ppid pgrp session tty tpgid flags minflt cminflt
         * majflt cmajflt utime stime cutime cstime priority nice threads
         * itrealvalue starttime vsize rss */
        if (p != NULL && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d "
                                       "%*d %*d %*d %*d %*d %llu %lu %ld",
                                &utime, &stime, &start, &vsize, &rss) == 5 && tick > 0) {
            ps->cpu_seconds = (double)(utime + stime) / (double)tick;
            ps->vsize_bytes = (long)vsize;
            ps->rss_bytes = rss * page;
            f = fopen("/proc/stat", "r");
            long long btime = -1;
            while (f != NULL && fgets(buf, sizeof buf, f) != NULL)
                if (sscanf(buf, "btime %lld", &btime) == 1) break;
            if (f != NULL) fclose(f);
            if (btime >= 0) ps->start_time = (double)btime + (double)start / (double)tick;
        }
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        long n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (e->d_name[0] != '.') n++;
        closedir(d);
        ps->open_fds = n - 1; /* not the one opendir held */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        ps->max_fds = (long)rl.rlim_cur;
}

/* "grpc_predict" -> entrypoint "GRPC", API "predict". */
static void split_api(const char *api, char *entry, size_t ne, const char **method) {
    const char *us = strchr(api, '_');
    size_t n = us ? (size_t)(us - api) : strlen(api);
    if (n >= ne) n = ne - 1;
    for (size_t i = 0; i < n; i++)
        entry[i] = (char)(api[i] >= 'a' && api[i] <= 'z' ? api[i] - 32 : api[i]);
    entry[n] = 0;
    *method = us ? us + 1 : api;
}

/* Writes the _bucket/_sum/_count lines of one histogram; `labels` is the
 * label text without braces (already escaped), scale multiplies values. */
static void put_hist(sbuf *b, const char *name, const char *labels, const hist *h,
                     const double *bounds, int nb, double scale) {
    uint64_t cum = 0;
    for (int k = 0; k < nb; k++) {
        cum += h->bucket[k];
        put(b, "%s_bucket{%s,le=\"%g\"} %" PRIu64 "\n", name, labels, bounds[k] * scale, cum);
    }
    put(b, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, h->count);
    put(b, "%s_sum{%s} %.9g\n", name, labels, h->sum * scale);
    put(b, "%s_count{%s} %" PRIu64 "\n", name, labels, h->count);
}

/* Escaped label value into a fixed buffer. */
static const char *lv(char *out, size_t cap, const char *v) {
    sbuf t = {0};
    put_label(&t, v);
    snprintf(out, cap, "%s", t.p ? t.p : "");
    free(t.p);
    return out;
}

/* TF Serving's request count: per model and status (all APIs, versions summed). Under mu. */
static void render_tfs_request_count(sbuf *b) {
    char m[300];
    /* TF Serving's names: per model and status (all APIs, versions summed). */
    put(b, "# HELP :tensorflow:serving:request_count The number of requests.\n"
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
                n += table[j].total.count;
        put(b, ":tensorflow:serving:request_count{model_name=\"%s\",status=\"%s\"} %" PRIu64 "\n",
            lv(m, sizeof m, table[i].model), code_name(table[i].code), n);
    }
}

/* The sum over every series of one model and API of a histogram (the whole
 * request, phase < 0, or one phase), into h; 0 when (i) is not the first
 * series of its model and API (it was summed with that one). Under mu. */
static int sum_model_api(int i, int phase, hist *h) {
    for (int j = 0; j < i; j++)
        if (strcmp(table[j].model, table[i].model) == 0 && strcmp(table[j].api, table[i].api) == 0)
            return 0;
    memset(h, 0, sizeof *h);
    for (int j = i; j < nseries; j++) {
        if (strcmp(table[j].model, table[i].model) != 0 || strcmp(table[j].api, table[i].api) != 0)
            continue;
        const hist *x = phase < 0 ? &table[j].total : &table[j].phase[phase];
        for (int k = 0; k < NBUCKETS; k++)
            h->bucket[k] += x->bucket[k];
        h->count += x->count;
        h->sum += x->sum;
    }
    return 1;
}

/* One of TF Serving's latency histograms, in microseconds as TF Serving, by
 * model_name and API: request_latency (the whole request, phase < 0; third
 * label entrypoint GRPC / REST) or runtime_latency (the signature run of
 * each request, our compute phase; third label runtime, which TF Serving
 * sets to "TF1" or "TFRT" and we to "dcmserve"). Under mu. */
static void render_tfs_latency(sbuf *b, const char *name, const char *help, int phase) {
    char m[300], lab[700], entry[16];
    const char *method;
    hist h;
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < nseries; i++) {
        if (!sum_model_api(i, phase, &h) || (phase >= 0 && h.count == 0)) continue;
        split_api(table[i].api, entry, sizeof entry, &method);
        snprintf(lab, sizeof lab, "model_name=\"%s\",API=\"%s\",%s=\"%s\"",
                 lv(m, sizeof m, table[i].model), method, phase < 0 ? "entrypoint" : "runtime",
                 phase < 0 ? entry : "dcmserve");
        put_hist(b, name, lab, &h, BUCKETS, NBUCKETS, 1e6);
    }
}

/* TF Serving's warm-up latency per model, in microseconds. Under mu. */
static void render_tfs_warmup_latency(sbuf *b) {
    char m[300], lab[700];
    put(b, "# HELP :tensorflow:serving:model_warmup_latency Distribution of wall time (in "
           "microseconds) for warming up the model.\n"
            "# TYPE :tensorflow:serving:model_warmup_latency histogram\n");
    for (int i = 0; i < nmodels; i++) {
        if (mtable[i].warmup.count == 0) continue;
        snprintf(lab, sizeof lab, "model_name=\"%s\"", lv(m, sizeof m, mtable[i].model));
        put_hist(b, ":tensorflow:serving:model_warmup_latency", lab, &mtable[i].warmup,
                 LOAD_BUCKETS, NLOADB, 1e6);
    }
}

/* Our per-series counts, bytes and latency by phase. Under mu. */
static void render_requests(sbuf *b) {
    char m[300], sg[160], lab[700];
    put(b, "# HELP dcmserve_requests_total Requests answered.\n"
           "# TYPE dcmserve_requests_total counter\n");
    for (int i = 0; i < nseries; i++)
        put(b, "dcmserve_requests_total{model=\"%s\",version=\"%" PRId64 "\",signature=\"%s\","
                "api=\"%s\",code=\"%s\"} %" PRIu64 "\n",
            lv(m, sizeof m, table[i].model), table[i].version,
            lv(sg, sizeof sg, table[i].signature), table[i].api, code_name(table[i].code),
            table[i].total.count);
    put(b, "# HELP dcmserve_request_bytes_total Request and response bytes (message or body).\n"
           "# TYPE dcmserve_request_bytes_total counter\n");
    for (int i = 0; i < nseries; i++)
        for (int dir = 0; dir < 2; dir++)
            put(b, "dcmserve_request_bytes_total{model=\"%s\",version=\"%" PRId64
                    "\",signature=\"%s\",api=\"%s\",code=\"%s\",direction=\"%s\"} %" PRIu64 "\n",
                lv(m, sizeof m, table[i].model), table[i].version,
                lv(sg, sizeof sg, table[i].signature), table[i].api, code_name(table[i].code),
                dir ? "out" : "in", dir ? table[i].bytes_out : table[i].bytes_in);
    put(b, "# HELP dcmserve_request_latency_seconds Request latency, whole and by phase "
           "(queue, decode, compute, serialize).\n"
            "# TYPE dcmserve_request_latency_seconds histogram\n");
    for (int i = 0; i < nseries; i++)
        for (int p = -1; p < SRV_NPHASES; p++) {
            const hist *h = p < 0 ? &table[i].total : &table[i].phase[p];
            if (p >= 0 && h->count == 0) continue;
            snprintf(lab, sizeof lab, "model=\"%s\",version=\"%" PRId64 "\",signature=\"%s\","
                     "api=\"%s\",code=\"%s\",phase=\"%s\"",
                     lv(m, sizeof m, table[i].model), table[i].version,
                     lv(sg, sizeof sg, table[i].signature), table[i].api,
                     code_name(table[i].code), p < 0 ? "total" : PHASE[p]);
            put_hist(b, "dcmserve_request_latency_seconds", lab, h, BUCKETS, NBUCKETS, 1);
        }
}

/* Batch sizes run, per model, version and signature. Under mu. */
static void render_batches(sbuf *b) {
    char m[300], sg[160], lab[700];
    put(b, "# HELP dcmserve_batch_size Batch sizes run.\n# TYPE dcmserve_batch_size histogram\n");
    for (int i = 0; i < nbatch; i++) {
        uint64_t cum = 0;
        snprintf(lab, sizeof lab, "model=\"%s\",version=\"%" PRId64 "\",signature=\"%s\"",
                 lv(m, sizeof m, btable[i].model), btable[i].version,
                 lv(sg, sizeof sg, btable[i].signature));
        for (int k = 0; k < NBATCHB; k++) {
            cum += btable[i].bucket[k];
            put(b, "dcmserve_batch_size_bucket{%s,le=\"%g\"} %" PRIu64 "\n", lab,
                BATCH_BUCKETS[k], cum);
        }
        put(b, "dcmserve_batch_size_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", lab, btable[i].count);
        put(b, "dcmserve_batch_size_sum{%s} %.9g\n", lab, btable[i].sum);
        put(b, "dcmserve_batch_size_count{%s} %" PRIu64 "\n", lab, btable[i].count);
    }
}

/* Model loads, unloads and load time per model. Under mu. */
static void render_models(sbuf *b) {
    char m[300], lab[700];
    put(b, "# HELP dcmserve_model_loads_total Model version loads by result.\n"
           "# TYPE dcmserve_model_loads_total counter\n");
    for (int i = 0; i < nmodels; i++) {
        put(b, "dcmserve_model_loads_total{model=\"%s\",result=\"ok\"} %" PRIu64 "\n",
            lv(m, sizeof m, mtable[i].model), mtable[i].loads_ok);
        put(b, "dcmserve_model_loads_total{model=\"%s\",result=\"failed\"} %" PRIu64 "\n", m,
            mtable[i].loads_failed);
    }
    put(b, "# HELP dcmserve_model_unloads_total Model versions unloaded.\n"
           "# TYPE dcmserve_model_unloads_total counter\n");
    for (int i = 0; i < nmodels; i++)
        put(b, "dcmserve_model_unloads_total{model=\"%s\"} %" PRIu64 "\n",
            lv(m, sizeof m, mtable[i].model), mtable[i].unloads);
    put(b, "# HELP dcmserve_model_load_seconds Time to load a model version.\n"
           "# TYPE dcmserve_model_load_seconds histogram\n");
    for (int i = 0; i < nmodels; i++) {
        if (mtable[i].load.count == 0) continue;
        snprintf(lab, sizeof lab, "model=\"%s\"", lv(m, sizeof m, mtable[i].model));
        put_hist(b, "dcmserve_model_load_seconds", lab, &mtable[i].load, LOAD_BUCKETS, NLOADB, 1);
    }
}

/* The DICOM decoder's counters. */
static void render_dicom(sbuf *b) {
    dcm_ops_stats ds;
    dcm_ops_stats_read(&ds);
    put(b, "# HELP dcmserve_dicom_files_total DICOM files handed to the in-graph decoder.\n"
           "# TYPE dcmserve_dicom_files_total counter\ndcmserve_dicom_files_total %" PRIu64 "\n"
            "# HELP dcmserve_dicom_bytes_total Bytes of those DICOM files.\n"
            "# TYPE dcmserve_dicom_bytes_total counter\ndcmserve_dicom_bytes_total %" PRIu64 "\n"
            "# HELP dcmserve_dicom_frames_total Frames decoded.\n"
            "# TYPE dcmserve_dicom_frames_total counter\ndcmserve_dicom_frames_total %" PRIu64 "\n"
            "# HELP dcmserve_dicom_pixels_total Pixels (samples) decoded from DICOM files.\n"
            "# TYPE dcmserve_dicom_pixels_total counter\ndcmserve_dicom_pixels_total %" PRIu64 "\n"
            "# HELP dcmserve_dicom_decode_errors_total DICOM files refused, by reason.\n"
            "# TYPE dcmserve_dicom_decode_errors_total counter\n",
        ds.files, ds.bytes, ds.frames, ds.pixels);
    for (int r = 0; r < DCM_ERR_NREASONS; r++)
        put(b, "dcmserve_dicom_decode_errors_total{reason=\"%s\"} %" PRIu64 "\n",
            dcm_ops_err_reason_name(r), ds.errors[r]);
}

/* Versions, pools, gRPC paths, in-flight requests and memory: read now, not
 * counted. */
static void render_gauges(sbuf *b, int loaded_versions, const srv_metrics_pool *pools,
                          int npools) {
    char m[300];
    put(b, "# HELP dcmserve_loaded_versions Model versions available.\n"
           "# TYPE dcmserve_loaded_versions gauge\ndcmserve_loaded_versions %d\n",
        loaded_versions);
    put(b, "# HELP dcmserve_model_pool_free_bytes Bytes a loaded version's buffer pool keeps "
           "free for reuse (host).\n# TYPE dcmserve_model_pool_free_bytes gauge\n");
    for (int i = 0; i < npools; i++)
        put(b, "dcmserve_model_pool_free_bytes{model=\"%s\",version=\"%" PRId64 "\",device=\"host\"} %"
                PRIu64 "\n", lv(m, sizeof m, pools[i].model), pools[i].version, pools[i].pool_free_bytes);
    put(b, "# HELP dcmserve_grpc_calls_total gRPC inference calls by where they ran: inline "
           "(on the CQ thread, small and cheap), handover (on the CQ thread, which handed its "
            "queue to a standby), worker (queued for a worker thread).\n"
            "# TYPE dcmserve_grpc_calls_total counter\n");
    for (int i = 0; i < SRV_GRPC_NPATHS; i++)
        put(b, "dcmserve_grpc_calls_total{path=\"%s\"} %llu\n", grpc_path_name[i],
            (unsigned long long)atomic_load(&grpc_path[i]));
    put(b, "# HELP dcmserve_requests_in_flight Requests being answered.\n"
           "# TYPE dcmserve_requests_in_flight gauge\ndcmserve_requests_in_flight %d\n",
        atomic_load(&in_flight));
    put(b, "# HELP :tensorflow:core:graph_runs The number of graph executions (a batched run "
           "counts once).\n# TYPE :tensorflow:core:graph_runs counter\n"
           ":tensorflow:core:graph_runs %llu\n"
           "# HELP :tensorflow:core:graph_run_time_usecs The total time spent on executing "
           "graphs in microseconds.\n# TYPE :tensorflow:core:graph_run_time_usecs counter\n"
           ":tensorflow:core:graph_run_time_usecs %llu\n",
        (unsigned long long)atomic_load(&graph_runs),
        (unsigned long long)atomic_load(&graph_run_usecs));
}

/* Prometheus' standard process metrics (the names its client libraries use). */
static void render_process(sbuf *b) {
    proc_stats ps;
    proc_read(&ps);
    put(b, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
           "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
           "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
           "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n"
           "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
           "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %ld\n"
           "# HELP process_start_time_seconds Start time of the process since unix epoch in "
           "seconds.\n# TYPE process_start_time_seconds gauge\n"
           "process_start_time_seconds %.2f\n",
        ps.cpu_seconds, ps.rss_bytes, ps.vsize_bytes, ps.start_time);
    if (ps.open_fds >= 0)
        put(b, "# HELP process_open_fds Number of open file descriptors.\n"
               "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n", ps.open_fds);
    if (ps.max_fds >= 0)
        put(b, "# HELP process_max_fds Maximum number of open file descriptors.\n"
               "# TYPE process_max_fds gauge\nprocess_max_fds %ld\n", ps.max_fds);
    /* glibc's own count: what is allocated and not freed, whatever the
     * arenas keep (RSS moves with fragmentation and with how many
     * connections were open at once; a leak moves this). */
    struct mallinfo2 mi = mallinfo2();
    put(b, "# HELP dcmserve_heap_in_use_bytes Bytes malloc has handed out and not taken back "
           "(glibc mallinfo2: uordblks + hblkhd).\n# TYPE dcmserve_heap_in_use_bytes gauge\n"
           "dcmserve_heap_in_use_bytes %zu\n"
           "# HELP dcmserve_heap_free_bytes Free bytes malloc's arenas keep (glibc mallinfo2: "
           "fordblks).\n# TYPE dcmserve_heap_free_bytes gauge\ndcmserve_heap_free_bytes %zu\n",
        mi.uordblks + mi.hblkhd, mi.fordblks);
}

/* One series, value 1, whose labels say what is running (the usual
 * <name>_build_info pattern: join it to any other series by instance). */
static void render_build_info(sbuf *b) {
    char c[300];
    put(b, "# HELP dcmserve_build_info The dcmserve build: version, git commit, build type, "
           "CUDA.\n# TYPE dcmserve_build_info gauge\n"
           "dcmserve_build_info{version=\"%s\",commit=\"%s\",build_type=\"%s\",cuda=\"%s\"} 1\n",
        ms_build_version(), lv(c, sizeof c, ms_build_commit()), ms_build_type(),
        ms_build_cuda() ? "on" : "off");
}

char *srv_metrics_render(int loaded_versions, const srv_metrics_pool *pools, int npools) {
    sbuf b = {0};
    pthread_mutex_lock(&mu);
    render_tfs_request_count(&b);
    render_tfs_latency(&b, ":tensorflow:serving:request_latency",
                       "Distribution of wall time (in microseconds) for requests.", -1);
    render_tfs_latency(&b, ":tensorflow:serving:runtime_latency",
                       "Distribution of wall time (in microseconds) for the runtime (the "
                       "signature run).", SRV_PHASE_COMPUTE);
    render_tfs_warmup_latency(&b);
    render_requests(&b);
    render_batches(&b);
    render_models(&b);
    pthread_mutex_unlock(&mu);
    render_dicom(&b);
    render_gauges(&b, loaded_versions, pools, npools);
    render_process(&b);
    render_build_info(&b);
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
