/* srv_rest_v2.h - KServe v2 / Open Inference Protocol over HTTP: the routes
 * under /v2 that the REST server (srv_rest.c) hands over, and the reply they
 * fill. */
#ifndef SRV_REST_V2_H
#define SRV_REST_V2_H

#include <stddef.h>

#include "ms_status.h"
#include "srv_app.h"

typedef struct srv_rest_reply {
    int code;            /* HTTP status */
    ms_status st;        /* for metrics and the request log */
    char *body;          /* malloc'ed */
    size_t len;
    size_t header_len;   /* > 0: Inference-Header-Content-Length (binary extension) */
    const char *type;    /* Content-Type */
} srv_rest_reply;

struct srv_req;
/* Answers GET /v2, GET /v2/models/{m}[/versions/{v}] and POST
 * .../infer (JSON, or JSON + binary tensor data when header_len, the
 * request's Inference-Header-Content-Length, is not NULL). Returns 0 with
 * *out filled, -1 when the path is none of these. rec (may be NULL) gets
 * the model, version and signature. */
int srv_rest_v2(srv_app *app, const char *method, const char *url, const char *header_len,
                const char *data, size_t len, struct srv_req *rec, srv_rest_reply *out);

/* Triton's REST extensions (srv_rest_triton.c): GET /v2/models[/{m}[/versions/{v}]]/stats,
 * GET /v2/models/{m}[/versions/{v}]/config, POST /v2/repository/index, POST
 * /v2/repository/models/{m}/load|unload. Returns 0 with *out filled, -1 when
 * the path is none of these. */
int srv_rest_triton(srv_app *app, const char *method, const char *url, const char *data,
                    size_t len, struct srv_req *rec, srv_rest_reply *out);

/* The "{m}[/versions/{v}]" at p (a URL past "/v2/models/"): the model name
 * into model[mcap], the version's digits into version[vcap] (version NULL:
 * no "/versions/" part is read). Returns what follows, or NULL when the
 * name is empty or too long or the version is not digits. */
const char *srv_rest_v2_model_path(const char *p, char *model, size_t mcap, char *version,
                                   size_t vcap);

/* *o = JSON j (consumed) with HTTP code and status st, or the error of a
 * failed status (ms_errmsg) with its HTTP code: shared by the /v2 routes. */
struct cJSON;
void srv_rest_v2_json(srv_rest_reply *o, int code, ms_status st, struct cJSON *j);
void srv_rest_v2_status_error(srv_rest_reply *o, ms_status st);

#endif /* SRV_REST_V2_H */
