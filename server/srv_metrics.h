/* srv_metrics.h - request counters and latency histograms for /metrics
 * (Prometheus text format), updated by the gRPC and REST handlers.
 *
 * Ownership: process-wide state, no allocation visible to callers; the text
 * srv_metrics_render returns is malloc'ed and owned by the caller. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdint.h>

#include "ms_status.h"
#include "srv_manager.h"

/* One finished request: model (NULL/"" = unknown), version (0 = unknown),
 * api ("grpc" or "rest"), its status and how long it took. */
void srv_metrics_request(const char *model, int64_t version, const char *api, ms_status st,
                         double seconds);
/* In-flight gauge: +1 when a request starts, -1 when it ends. */
void srv_metrics_in_flight(int delta);
/* One batched run of n rows (n includes padding) for model/version/signature:
 * the dcmserve_batch_size histogram. */
void srv_metrics_batch_size(const char *model, int64_t version, const char *signature, int n);
/* Prometheus text exposition of everything; mgr (may be NULL) gives the
 * loaded-version count. NULL on OOM. */
char *srv_metrics_render(srv_manager *mgr);

/* Reads a MonitoringConfig text proto (--monitoring_config_file): with
 * `prometheus_config { enable: true path: "/p" }` copies "/p" into path
 * (TF Serving's default /monitoring/prometheus/metrics when no path is given),
 * otherwise path = "". MS_ENOTFOUND for an unreadable file, MS_EINVAL for a
 * path that does not start with '/' or is longer than n - 1. */
ms_status srv_metrics_config_path(const char *file, char *path, size_t n);

#endif /* SRV_METRICS_H */
