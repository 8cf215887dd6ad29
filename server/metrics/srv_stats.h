/* srv_stats.h - per model version inference statistics, in the shape of
 * Triton's statistics extension (ModelStatistics: success / fail / queue /
 * compute_input / compute_infer / compute_output durations, inference and
 * execution counts, last inference time).
 *
 * A version is tracked from the moment it becomes AVAILABLE
 * (srv_stats_track, called by the model manager) until it is unloaded
 * (srv_stats_forget): requests naming anything else are not counted, so that
 * clients naming random models cannot grow memory, and a version loaded
 * again starts from zero, as in Triton. Fed by srv_req_end for the inference
 * APIs (Predict, Classify, Regress, MultiInference, ModelInfer, over gRPC and
 * REST) and by the batcher for every graph run. Process-wide, thread-safe. */
#ifndef SRV_STATS_H
#define SRV_STATS_H

#include <stdint.h>

#include "ms_status.h"

typedef struct srv_stat_dur {
    uint64_t count, ns;
} srv_stat_dur;

typedef struct srv_model_stats {
    char model[128];
    int64_t version;
    uint64_t last_inference_ms; /* ms since the epoch; 0 = none yet */
    uint64_t inference_count;   /* successful requests, each counted by its batch size */
    uint64_t execution_count;   /* graph runs (a batch of requests runs once) */
    srv_stat_dur success, fail; /* whole requests, accept to answer */
    srv_stat_dur queue, compute_input, compute_infer, compute_output; /* successful ones */
} srv_model_stats;

/* Starts counting (model, version) from zero; nothing when it is tracked. */
void srv_stats_track(const char *model, int64_t version);
/* Stops counting it and drops its numbers. */
void srv_stats_forget(const char *model, int64_t version);

/* One finished request of api ("grpc_predict", ...) for (model, version),
 * batch rows (0: unknown, counted as 1), ended with st after `seconds`;
 * phase[0..3]: its queue, decode, compute and serialize seconds (< 0: not
 * measured), srv_metrics.h's srv_phase order. Ignored unless the api is an
 * inference API and (model, version) is tracked. */
void srv_stats_request(const char *api, const char *model, int64_t version, int batch,
                       const double phase[4], ms_status st, double seconds);
/* One graph run for requests of (model, version). */
void srv_stats_execution(const char *model, int64_t version);

/* Copies the tracked versions of `model` (NULL or "": of every model) whose
 * version is `version` (0: any) into *out (malloc'ed, sorted by model and
 * version; NULL when none), their number into *n. MS_ENOMEM only. */
ms_status srv_stats_list(const char *model, int64_t version, srv_model_stats **out, int *n);

#endif /* SRV_STATS_H */
