/* srv_health.c - grpc.health.v1.Health Check and Watch.
 *
 * SERVING once every configured model has an available version and the
 * server is not draining. Service names: "" (the whole server), the
 * fully qualified service names (tensorflow.serving.PredictionService,
 * inference.GRPCInferenceService, ...), TF Serving's short ones
 * (PredictionService, ModelService), and any configured model name (that
 * model has an available version). ModelService and grpc.health.v1.Health
 * are SERVING whenever the server is not draining. "readiness" is the
 * same as "" and "liveness" says only that the process works: SERVING
 * until a sticky CUDA error, whatever the models and while draining, so
 * that a Kubernetes liveness probe restarts a broken process and never a
 * pod whose one model folder is empty or bad (deploy/base/deployment.yaml). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "health.pb-c.h"
#include "kn_cuda_mem.h"
#include "ms_log.h"
#include "srv_app.h"

typedef struct watcher {
    srv_call *call;
    char *service;
    int last; /* last status sent, -1 none */
    struct watcher *next;
} watcher;

struct srv_health {
    srv_app *app;
    pthread_mutex_t mu;
    watcher *watchers;
    int closing;
};

srv_health *srv_health_new(srv_app *app) {
    srv_health *h = calloc(1, sizeof(*h));
    if (h == NULL) return NULL;
    h->app = app;
    pthread_mutex_init(&h->mu, NULL);
    return h;
}

void srv_health_free(srv_health *h) {
    if (h == NULL) return;
    /* Watchers are gone by now: the server closes every call before it stops. */
    while (h->watchers) {
        watcher *w = h->watchers;
        h->watchers = w->next;
        free(w->service);
        free(w);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int srv_health_status(srv_app *app, const char *service) {
    static const char *const ready_services[] = {
        "tensorflow.serving.PredictionService",
        "PredictionService",
        "inference.GRPCInferenceService",
    };
    static const char *const always_services[] = {
        "tensorflow.serving.ModelService",
        "ModelService",
        "grpc.health.v1.Health",
    };
    /* A sticky CUDA error counts as draining: the process must restart. */
    int draining = atomic_load(&app->draining) || kn_cuda_sticky();
    const int ns = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    const int sv = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;

    if (service != NULL && strcmp(service, "liveness") == 0) return kn_cuda_sticky() ? ns : sv;
    if (service == NULL || service[0] == '\0' || strcmp(service, "readiness") == 0)
        return !draining && srv_manager_ready(app->mgr) ? sv : ns;
    for (size_t i = 0; i < sizeof(ready_services) / sizeof(ready_services[0]); i++)
        if (strcmp(service, ready_services[i]) == 0)
            return !draining && srv_manager_ready(app->mgr) ? sv : ns;
    for (size_t i = 0; i < sizeof(always_services) / sizeof(always_services[0]); i++)
        if (strcmp(service, always_services[i]) == 0) return draining ? ns : sv;
    int64_t *v = NULL;
    int nv = 0;
    if (srv_manager_available(app->mgr, service, &v, &nv) == MS_OK) {
        free(v);
        return !draining && nv > 0 ? sv : ns;
    }
    return -1;
}

static ms_status pack_status(int status, srv_bytes *out) {
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    return srv_pack(&r.base, out);
}

ms_status srv_health_check(void *appv, srv_call *c, const uint8_t *req, size_t n, srv_bytes *out) {
    srv_app *app = appv;
    (void)c;
    Grpc__Health__V1__HealthCheckRequest *rq =
        grpc__health__v1__health_check_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse HealthCheckRequest (%zu bytes)", n);
    int st = srv_health_status(app, rq->service);
    ms_status rc;
    if (st < 0)
        rc = ms_errf(MS_ENOTFOUND, "unknown service \"%s\"", rq->service);
    else
        rc = pack_status(st, out);
    grpc__health__v1__health_check_request__free_unpacked(rq, NULL);
    return rc;
}

/* Sends w's status if it changed. Called with h->mu held. */
static void push(srv_health *h, watcher *w) {
    int st = srv_health_status(h->app, w->service);
    if (st < 0) st = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
    if (st == w->last) return;
    srv_bytes b;
    if (pack_status(st, &b) != MS_OK) return;
    w->last = st;
    srv_call_stream_send(w->call, &b);
}

void srv_health_watch(void *appv, srv_call *c, const uint8_t *req, size_t n) {
    srv_app *app = appv;
    srv_health *h = app->health;
    Grpc__Health__V1__HealthCheckRequest *rq =
        grpc__health__v1__health_check_request__unpack(NULL, n, req);
    if (rq == NULL) {
        srv_call_stream_finish(c, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse HealthCheckRequest");
        return;
    }
    watcher *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->service = strdup(rq->service ? rq->service : "")) == NULL) {
        free(w);
        grpc__health__v1__health_check_request__free_unpacked(rq, NULL);
        srv_call_stream_finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    grpc__health__v1__health_check_request__free_unpacked(rq, NULL);
    w->call = c;
    w->last = -1;
    pthread_mutex_lock(&h->mu);
    if (h->closing) {
        pthread_mutex_unlock(&h->mu);
        srv_bytes b;
        if (pack_status(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING, &b) ==
            MS_OK)
            srv_call_stream_send(c, &b);
        srv_call_stream_finish(c, GRPC_STATUS_OK, NULL);
        free(w->service);
        free(w);
        return;
    }
    w->next = h->watchers;
    h->watchers = w;
    push(h, w);
    pthread_mutex_unlock(&h->mu);
}

void srv_health_watch_closed(void *appv, srv_call *c) {
    srv_app *app = appv;
    srv_health *h = app->health;
    pthread_mutex_lock(&h->mu);
    for (watcher **pp = &h->watchers; *pp; pp = &(*pp)->next) {
        if ((*pp)->call == c) {
            watcher *w = *pp;
            *pp = w->next;
            free(w->service);
            free(w);
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
}

void srv_health_update(srv_health *h) {
    if (h == NULL) return;
    pthread_mutex_lock(&h->mu);
    for (watcher *w = h->watchers; w; w = w->next)
        push(h, w);
    pthread_mutex_unlock(&h->mu);
}

void srv_health_close_watchers(srv_health *h) {
    if (h == NULL) return;
    pthread_mutex_lock(&h->mu);
    h->closing = 1;
    for (watcher *w = h->watchers; w; w = w->next) {
        push(h, w);
        srv_call_stream_finish(w->call, GRPC_STATUS_OK, NULL);
    }
    pthread_mutex_unlock(&h->mu);
}
