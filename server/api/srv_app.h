/* srv_app.h - what the gRPC handlers share: the model manager, the server,
 * health, and the method table of every service dcmserve answers. */
#ifndef SRV_APP_H
#define SRV_APP_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>

#include "srv_admin.h"
#include "srv_grpc.h"
#include "srv_manager.h"

typedef struct srv_health srv_health;

typedef struct srv_app {
    srv_manager *mgr;    /* borrowed */
    srv_health *health;  /* owned by the creator (srv_health_new/free) */
    atomic_int draining; /* SIGTERM seen: health NOT_SERVING */
    int64_t max_message_bytes;
    int64_t max_request_memory_bytes; /* budget of one request; 0 = no limit */
    double reload_wait_s; /* how long HandleReloadConfigRequest waits for loads */
    struct srv_batcher *batcher; /* --enable_batching (srv_batch.h); NULL = off */
    srv_server *server;          /* set once gRPC runs: REST predictions use its queues */
    srv_admin_policy admin; /* who may call HandleReloadConfigRequest, and limits */
    int allow_empty_config; /* --allow_empty_model_config: a reload may drop every model */
    struct kn_pool *req_pool; /* large request values (a series' files) land here, reused
                                 across requests (srv_tfs_predict); NULL: heap chunks */
} srv_app;

/* The method table: TF Serving PredictionService + ModelService, KServe v2,
 * grpc.health.v1. Static storage. */
const srv_method *srv_app_methods(int *n);
/* The per-model queue key of Predict and ModelInfer (srv_queue_key_fn). */
void srv_app_queue_key(const srv_method *m, const uint8_t *req, size_t n, char *key, size_t cap);

/* ---- health (srv_health.c) ---- */
srv_health *srv_health_new(srv_app *app);
void srv_health_free(srv_health *h);
/* Recomputes every status and pushes changes to Watch streams. Any thread. */
void srv_health_update(srv_health *h);
/* Ends every Watch stream (after a final NOT_SERVING), for shutdown. */
void srv_health_close_watchers(srv_health *h);

/* Health status of a service name: 1 SERVING, 2 NOT_SERVING, -1 unknown
 * service. "" is the whole server. */
int srv_health_status(srv_app *app, const char *service);

/* ---- handlers (srv_tfs.c, srv_kserve.c, srv_health.c) ---- */
/* Unpacks a TF Serving request whose field 1 is model_spec, merging repeated
 * model_spec copies on the wire first as protobuf does (srv_tfs.c); NULL when
 * it does not parse. */
void *srv_tfs_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *req, size_t n);
/* The same with protobuf-c's allocator `alloc` (NULL: malloc), e.g. a
 * srv_pbarena's. */
void *srv_tfs_unpack_in(const ProtobufCMessageDescriptor *desc, const uint8_t *req, size_t n,
                        ProtobufCAllocator *alloc);
/* Finds the servable a ModelSpec names (version or label) and names the model
 * and version in the call's request record (srv_tfs.c). */
ms_status srv_tfs_resolve(srv_app *app, srv_call *call, const struct Tensorflow__Serving__ModelSpec *spec,
                          srv_servable *out);
ms_status srv_tfs_predict(void *app, srv_call *c, const uint8_t *req, size_t n, srv_bytes *out);
ms_status srv_tfs_get_model_metadata(void *app, srv_call *c, const uint8_t *req, size_t n,
                                     srv_bytes *out);
ms_status srv_tfs_classify(void *app, srv_call *c, const uint8_t *req, size_t n, srv_bytes *out);
ms_status srv_tfs_regress(void *app, srv_call *c, const uint8_t *req, size_t n, srv_bytes *out);
/* MultiInference: classify / regress tasks over one model and one Input (srv_classify.c). */
ms_status srv_tfs_multi_inference(void *app, srv_call *c, const uint8_t *req, size_t n,
                                  srv_bytes *out);
ms_status srv_tfs_get_model_status(void *app, srv_call *c, const uint8_t *req, size_t n,
                                   srv_bytes *out);
ms_status srv_tfs_reload_config(void *app, srv_call *c, const uint8_t *req, size_t n,
                                srv_bytes *out);

ms_status srv_kserve_server_live(void *app, srv_call *c, const uint8_t *req, size_t n,
                                 srv_bytes *out);
ms_status srv_kserve_server_ready(void *app, srv_call *c, const uint8_t *req, size_t n,
                                  srv_bytes *out);
ms_status srv_kserve_model_ready(void *app, srv_call *c, const uint8_t *req, size_t n,
                                 srv_bytes *out);
ms_status srv_kserve_server_metadata(void *app, srv_call *c, const uint8_t *req, size_t n,
                                     srv_bytes *out);
ms_status srv_kserve_model_metadata(void *app, srv_call *c, const uint8_t *req, size_t n,
                                    srv_bytes *out);
ms_status srv_kserve_model_infer(void *app, srv_call *c, const uint8_t *req, size_t n,
                                 srv_bytes *out);

/* Triton's extensions of GRPCInferenceService (srv_triton.c): ModelConfig,
 * ModelStatistics, RepositoryIndex, RepositoryModelLoad / Unload. Load and
 * unload pass the admin gate (srv_admin_authorize_as). */
ms_status srv_triton_model_config(void *app, srv_call *c, const uint8_t *req, size_t n,
                                  srv_bytes *out);
ms_status srv_triton_model_statistics(void *app, srv_call *c, const uint8_t *req, size_t n,
                                      srv_bytes *out);
ms_status srv_triton_repository_index(void *app, srv_call *c, const uint8_t *req, size_t n,
                                      srv_bytes *out);
ms_status srv_triton_repository_load(void *app, srv_call *c, const uint8_t *req, size_t n,
                                     srv_bytes *out);
ms_status srv_triton_repository_unload(void *app, srv_call *c, const uint8_t *req, size_t n,
                                       srv_bytes *out);
/* RepositoryModelLoad (load != 0) or Unload from REST: req is the packed
 * request message, peer the client (srv_admin_authorize_peer's gate). */
ms_status srv_triton_rest_repository(srv_app *app, int load, const char *peer, const uint8_t *req,
                                     size_t n);

/* KServe datatype names ("FP32", "BYTES", ...) <-> dtypes; RT_DT_INVALID /
 * "" when there is none. For the KServe REST API (srv_rest_v2.c). */
rt_dtype srv_kserve_dtype(const char *name);
const char *srv_kserve_dtype_name(rt_dtype dt);

ms_status srv_health_check(void *app, srv_call *c, const uint8_t *req, size_t n, srv_bytes *out);
void srv_health_watch(void *app, srv_call *c, const uint8_t *req, size_t n);
void srv_health_watch_closed(void *app, srv_call *c);

#endif /* SRV_APP_H */
