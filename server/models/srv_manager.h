/* srv_manager.h - the model manager: which versions of which models are
 * loaded, kept in step with the config and the base paths on disk.
 *
 * Runs on a libuv loop: a timer polls every base path, a version folder is
 * considered only when complete (saved_model.pb, variables.index with a
 * valid footer and every data shard present, or else a non-empty model.onnx
 * (rt_model.h), nothing written in the last 100 ms), the version policy
 * (latest N, all, specific) picks the wanted versions, and loads run on the
 * libuv thread pool, each after reading the whole tensor bundle once against
 * its checksums (rt_bundle_verify). A new
 * version is loaded before an old one is unloaded, and old versions stay
 * while a wanted version failed to load (the failure is kept in the status
 * and logged). A version that failed is retried only when its folder changes.
 *
 * Requests look models up from any thread (srv_manager_get) and hold a
 * reference on the rt_model until srv_servable_release, so unloading never
 * frees memory a running request uses. */
#ifndef SRV_MANAGER_H
#define SRV_MANAGER_H

#include <stdint.h>
#include <uv.h>

#include "kn_backend.h"
#include "ms_status.h"
#include "srv_batch.h"
#include "rt_model.h"
#include "srv_config.h"
#include "srv_metrics.h"

typedef struct srv_manager srv_manager;

/* States as in tensorflow.serving.ModelVersionStatus.State. */
typedef enum srv_vstate {
    SRV_VSTATE_UNKNOWN = 0,
    SRV_VSTATE_START = 10,
    SRV_VSTATE_LOADING = 20,
    SRV_VSTATE_AVAILABLE = 30,
    SRV_VSTATE_UNLOADING = 40,
    SRV_VSTATE_END = 50,
} srv_vstate;

typedef struct srv_version_status {
    int64_t version;
    srv_vstate state;
    ms_status code; /* MS_OK, or why the load failed */
    char msg[512];
} srv_version_status;

/* A loaded version handed to a request. */
typedef struct srv_servable {
    rt_model *model; /* owned reference */
    int64_t version;
} srv_servable;

/* `be` is borrowed and must outlive the manager. poll_s <= 0: scan once at
 * start (and on apply) only. */
ms_status srv_manager_new(kn_backend *be, double poll_s, srv_manager **out);

/* Non-zero when `base` is itself a model rather than a folder of numbered
 * versions: 1 for a SavedModel (holds saved_model.pb or saved_model.pbtxt), 2
 * for an ONNX model (holds model.onnx only). The usual first mistake, which
 * the "no versions" messages then name. */
int srv_manager_base_is_savedmodel(const char *base);
/* Places every model loaded from now on between `device` (a GPU backend,
 * borrowed, outliving the manager; NULL = none) and `be` (rt_model_load_on,
 * docs/gpu.md). Call before the first apply. */
void srv_manager_set_device(srv_manager *m, kn_backend *device);

#define SRV_MANAGER_MAX_TAGS 8
/* Loads the MetaGraph with exactly these comma-separated tags (TF Serving's
 * --saved_model_tags) instead of {"serve"}; call before the first apply.
 * MS_EINVAL for an empty list or more than SRV_MANAGER_MAX_TAGS tags. */
ms_status srv_manager_set_tags(srv_manager *m, const char *tags);

/* Warm-up (srv_warmup.h) of every version before it becomes AVAILABLE,
 * `iterations` times; 0 = off. Call before the first apply. */
void srv_manager_set_warmup(srv_manager *m, int iterations);

/* The batching the server runs requests with (bp copied; NULL: batching
 * off), per_model: versions' own batching_params.pbtxt first. With a device
 * (srv_manager_set_device) every version's device arenas are sized at load
 * for the batch sizes it can form (srv_warmup_device_size,
 * srv_warmup_device_batches). Call before the first apply. */
void srv_manager_set_batching(srv_manager *m, const srv_batch_params *bp, int per_model);

/* Called on the loop thread after availability may have changed. */
void srv_manager_set_listener(srv_manager *m, void (*fn)(void *arg), void *arg);

/* Starts polling on `loop` (call on the loop thread, before uv_run). */
ms_status srv_manager_start(srv_manager *m, uv_loop_t *loop);

/* Replaces the model list (takes ownership of cfg). Thread-safe; the change
 * is applied on the loop thread. With wait_s > 0, waits until it is applied
 * and the loads it started have finished (or wait_s passed). Returns the
 * config generation number. */
uint64_t srv_manager_apply(srv_manager *m, srv_config *cfg, double wait_s);

/* Stops polling and unloads everything (loop thread). Loads in progress
 * finish and are dropped. */
void srv_manager_stop(srv_manager *m);
void srv_manager_free(srv_manager *m);

/* Resolves a request's model spec. version > 0 picks that version, label
 * (non-empty) a labelled one, neither the highest available. Errors:
 * MS_ENOTFOUND `Servable not found for request: Latest(<name>)` (TF Serving's
 * text) / `...Specific(<name>, <v>)`, MS_EINVAL for an unknown label. */
ms_status srv_manager_get(srv_manager *m, const char *name, int64_t version, const char *label,
                          srv_servable *out);
void srv_servable_release(srv_servable *s);

/* Status of one version (version > 0) or of all versions known for a model,
 * sorted by version. *out is malloc'ed. MS_ENOTFOUND `Could not find any
 * versions of model <name>` when the model is unknown or has none. */
ms_status srv_manager_status(srv_manager *m, const char *name, int64_t version,
                             srv_version_status **out, int *n);

/* Available versions of a model, ascending (malloc'ed; *n may be 0).
 * MS_ENOTFOUND when the model is not configured. */
ms_status srv_manager_available(srv_manager *m, const char *name, int64_t **out, int *n);

/* Non-zero when every configured model has at least one available version
 * (and at least one model is configured). */
int srv_manager_ready(srv_manager *m);
/* Non-zero when `name` is configured and has an available version. */
int srv_manager_model_ready(srv_manager *m, const char *name);
/* Number of AVAILABLE versions over all configured models (for /metrics). */
int srv_manager_loaded_versions(srv_manager *m);
/* Fills out[0..max) with the pool memory of each AVAILABLE version (model,
 * version, free pool bytes); returns how many. */
int srv_manager_pool_bytes(srv_manager *m, srv_metrics_pool *out, int max);

/* ---- Repository API (Triton's model_repository extension, docs/kserve.md) ---- */

/* A copy of the configured model's config (srv_model_config_clear it).
 * MS_ENOTFOUND naming the models served when `name` is not configured. */
ms_status srv_manager_model_config(srv_manager *m, const char *name, srv_model_config *out);

/* One row of the repository index: a configured model's version, or the
 * model alone (version 0, state UNKNOWN) while no version folder is known. */
typedef struct srv_index_entry {
    char *name; /* owned */
    int64_t version;
    srv_vstate state;
    int unloaded; /* unloaded through srv_manager_unload_model */
    ms_status code; /* why the version's load failed (state END), else MS_OK */
    char msg[512];
} srv_index_entry;

/* Every configured model's versions, sorted by name and version (*out
 * malloc'ed; free with srv_manager_index_free). */
ms_status srv_manager_index(srv_manager *m, srv_index_entry **out, int *n);
void srv_manager_index_free(srv_index_entry *e, int n);

/* Unloads every version of a configured model and keeps it unloaded (its
 * base path is no longer polled for it, and readiness no longer waits for
 * it) until srv_manager_load_model; it stays in the config and the index.
 * Waits up to wait_s for the unload. MS_ENOTFOUND when not configured,
 * MS_ETIMEDOUT when a version is still available after wait_s. Any thread. */
ms_status srv_manager_unload_model(srv_manager *m, const char *name, double wait_s);

/* Loads a configured model again from its base path, with its version
 * policy: ends an unload, scans the base path now and retries versions
 * whose load failed even if their folder did not change. Waits up to wait_s
 * for the loads. MS_OK when a version is available; otherwise the failed
 * load's code and message, MS_ETIMEDOUT while still loading, MS_EPRECOND when
 * no complete version folder exists, MS_ENOTFOUND when not configured. */
ms_status srv_manager_load_model(srv_manager *m, const char *name, double wait_s);

/* Checks whether a version folder is complete enough to load. Returns 1 and
 * a fingerprint of its files (names, sizes, mtimes) in *sig when it is,
 * 0 (with the reason in ms_errmsg) when not. */
int srv_version_dir_complete(const char *dir, uint64_t *sig);

/* Parses a version folder name ("00000123" -> 123). -1 when not a version. */
int64_t srv_parse_version_dir(const char *name);

#endif /* SRV_MANAGER_H */
