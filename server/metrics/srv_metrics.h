/* srv_metrics.h - Prometheus metrics for /metrics and the per-request log
 * (--request_log), both fed from one record per request (srv_req).
 *
 * A handler's life: the transport (srv_grpc.c run_unary, srv_rest.c) calls
 * srv_req_begin, the handler names what it served with srv_req_model and
 * marks its phases with srv_req_phase, the transport fills bytes and calls
 * srv_req_end, which updates the counters/histograms and writes the request
 * log line.
 *
 * Ownership: process-wide state, no allocation visible to callers; the text
 * srv_metrics_render returns is malloc'ed and owned by the caller. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

/* Request phases with their own latency histogram. */
typedef enum srv_phase {
    SRV_PHASE_QUEUE = 0, /* accepted -> a worker starts it */
    SRV_PHASE_DECODE,    /* request message / JSON -> input tensors */
    SRV_PHASE_COMPUTE,   /* the signature run (DICOM decoding in the graph included) */
    SRV_PHASE_SERIALIZE, /* output tensors -> response message / JSON */
    SRV_NPHASES
} srv_phase;

typedef struct srv_req {
    char api[32];       /* "grpc_predict", "rest_kserve_infer", ... */
    char peer[64];      /* "ipv4:127.0.0.1:5555" */
    char model[128];    /* "" unknown */
    int64_t version;    /* 0 unknown */
    char signature[64]; /* "" none */
    int batch;          /* first dimension of the first input; 0 unknown */
    double t0;          /* srv_req_now() at accept */
    double mark;        /* end of the last phase marked */
    double phase[SRV_NPHASES]; /* seconds; < 0 = not measured */
    size_t bytes_in, bytes_out;
    /* When set and peer is empty: writes the peer into buf, called only
     * when a log line is written (the lookup costs a system call). */
    void (*peer_fn)(void *arg, char *buf, size_t cap);
    void *peer_arg;
} srv_req;

double srv_req_now(void); /* monotonic seconds */
/* Starts a record: api, peer (may be NULL), t0 = now. In-flight +1. */
void srv_req_begin(srv_req *r, const char *api, const char *peer);
/* srv_req_begin with the peer looked up by fn(arg, ...) only if srv_req_end
 * writes a log line (arg must stay valid until then). */
void srv_req_begin_lazy(srv_req *r, const char *api,
                        void (*fn)(void *arg, char *buf, size_t cap), void *arg);
/* What was served (any may be NULL/0; NULL r is ignored). */
void srv_req_model(srv_req *r, const char *model, int64_t version, const char *signature);
void srv_req_batch(srv_req *r, int batch);
/* The phase `p` ended now: it lasted since the last mark (or t0). */
void srv_req_phase(srv_req *r, srv_phase p);
/* Finishes the record: counters, histograms, in-flight -1, request log. */
void srv_req_end(srv_req *r, ms_status st);

/* --request_log: 0 off, 1 errors (default), 2 all. */
void srv_reqlog_set(int mode);
/* Parses "off", "errors", "all"; 0 on success. */
int srv_reqlog_parse(const char *s, int *mode);

/* One finished request without a srv_req (kept for callers that time
 * themselves): counted as api `api`, no signature, no log line. */
void srv_metrics_request(const char *model, int64_t version, const char *api, ms_status st,
                         double seconds);
/* Where a gRPC inference call ran (dcmserve_grpc_calls_total{path}). */
typedef enum srv_grpc_path {
    SRV_GRPC_INLINE = 0, /* on the CQ thread: small, cheap */
    SRV_GRPC_HANDOVER,   /* on the CQ thread, its queue handed to a standby */
    SRV_GRPC_WORKER,     /* queued for a worker */
    SRV_GRPC_NPATHS
} srv_grpc_path;
void srv_metrics_grpc_path(srv_grpc_path p);
/* One graph (signature) run for requests, batched or alone, that took
 * `seconds` (:tensorflow:core:graph_runs, :tensorflow:core:graph_run_time_usecs). */
void srv_metrics_graph_run(double seconds);
/* In-flight gauge: +1 when a request starts, -1 when it ends. */
void srv_metrics_in_flight(int delta);
/* The batch sizes a model actually ran (dcmserve_batch_size histogram). */
void srv_metrics_batch_size(const char *model, int64_t version, const char *signature, int n);
/* Model warm-up time (:tensorflow:serving:model_warmup_latency). */
void srv_metrics_warmup(const char *model, int64_t version, double seconds);
/* A load finished (ok or failed) after `seconds`, or a version was unloaded. */
void srv_metrics_model_load(const char *model, int ok, double seconds);
void srv_metrics_model_unload(const char *model);
/* Memory one loaded version holds (srv_manager_pool_bytes fills these). */
typedef struct srv_metrics_pool {
    char model[128];
    int64_t version;
    uint64_t pool_free_bytes;
} srv_metrics_pool;

/* Prometheus text exposition of everything, with the number of model
 * versions loaded and their pools (the caller asks the manager: srv_manager
 * calls in here, so this module does not call it). NULL on OOM. */
char *srv_metrics_render(int loaded_versions, const srv_metrics_pool *pools, int npools);

/* Reads a MonitoringConfig text proto (--monitoring_config_file): with
 * `prometheus_config { enable: true path: "/p" }` copies "/p" into path
 * (TF Serving's default /monitoring/prometheus/metrics when no path is given),
 * otherwise path = "". MS_ENOTFOUND for an unreadable file, MS_EINVAL for a
 * path that does not start with '/' or is longer than n - 1. */
ms_status srv_metrics_config_path(const char *file, char *path, size_t n);

#endif /* SRV_METRICS_H */
