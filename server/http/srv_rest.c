/* srv_rest.c - TF Serving REST API over libmicrohttpd.
 *
 * GET  /v1/models/{m}[/versions/{v}|/labels/{l}]           model status
 * GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata  signature_def
 * POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict   row "instances"
 *      or columnar "inputs", {"b64": "..."} for DT_STRING, "signature_name"
 * POST /v1/models/{m}[/versions/{v}|/labels/{l}]:classify and :regress
 *      "examples" (+ "context") of {feature: value} -> the gRPC Classify /
 *      Regress handlers (srv_classify.c) -> {"results": [...]}
 * Errors are {"error": "..."} with TF Serving's codes: 400 bad input or
 * JSON, 404 unknown model/version, 413 body over max_message_bytes, 500
 * otherwise. Tensors are built with the signature's dtype and the shape of
 * the nested lists; sig_run validates everything else. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kn_cpu_util.h"
#include "kn_cuda_mem.h"
#include "ms_log.h"
#include "ms_malloc.h"
#include "ms_memlimit.h"
#include "ms_watch.h"
#include "rt_lowp.h"
#include "rt_model.h"
#include "sig_signature.h"
#include "srv_batch.h"
#include "srv_manager.h"
#include "srv_metrics.h"
#include "srv_b64.h"
#include "srv_jsonnum.h"
#include "srv_rest.h"
#include "srv_rest_v2.h"
#include "srv_status.h"
#include "tf_serving.pb-c.h"

/* One REST connection from accept to close, as the reaper sees it. States:
 * waiting for a request's headers, receiving its body, sending its answer
 * (the call has run), running it, or refused (over the connection limit:
 * answered 503 once its headers are in). The first three may be closed to
 * make room for a new connection, in that order. */
enum { C_WAIT, C_BODY, C_SEND, C_RUN, C_REFUSE };
/* A body must bring at least this much per --rest_read_timeout_seconds
 * (6.4 KiB/s at the default 10 s), else it is cut: a client that sends a
 * byte every few seconds holds what it has sent, of the bound on buffered
 * bodies, for one such period at most, not for as long as it trickles. */
#define REST_BODY_MIN_BYTES (64 << 10)
typedef struct rconn {
    int fd;
    int state;       /* C_* */
    int nreq;        /* requests answered on it */
    int counted;     /* in srv_rest.nlive */
    int cut;         /* shut down by us; libmicrohttpd closes it next */
    double since;    /* when the state began (CLOCK_MONOTONIC, s) */
    double progress; /* the last body bytes (C_BODY) */
    long long got;   /* body bytes of the current request (C_BODY) */
    double hup_at;   /* progress when the reaper saw the peer closed; 0 = not */
    double win_from; /* the current rate window began (C_BODY) */
    long long win_got; /* got when it began */
    struct rconn *prev, *next;
    /* in srv_rest.byst[state] while counted, not cut and state <= C_SEND,
     * in the order conn_victim takes them (oldest since / progress first) */
    struct rconn *sprev, *snext;
    int linked;
} rconn;

struct srv_rest {
    struct MHD_Daemon *d;
    srv_app *app;
    int cors;
    int tls_verify; /* client_verify: a verified client certificate is required */
    char metrics_path[256];
    int call_timeout_ms; /* srv_rest_opts.call_timeout_ms */
    /* connections (docs/security.md, "REST connections") */
    pthread_mutex_t mu;    /* conns, nlive, the rconn fields, stopping */
    pthread_cond_t cv;     /* the reaper's tick; signalled to stop it */
    rconn *conns;
    /* the candidates to close for a new connection, per state: a list each,
     * so that finding one is O(1) (a walk over thousands of connections per
     * new one was half the REST CPU of a 6,000-connection flood) */
    rconn *byst[C_SEND + 1], *byst_tail[C_SEND + 1];
    int nlive;             /* counted connections: not cut, not refused */
    int max_conns;
    double read_timeout_s; /* 0 = none */
    double idle_timeout_s; /* between requests; 0 = none */
    int stopping;
    int reaper_started;
    pthread_t reaper;
    /* request bodies held now, all connections (--max_rest_buffered_bytes) */
    atomic_llong buffered;
    long long max_buffered;
    /* POST calls run on these workers, their connections suspended, so that
     * a long call never holds up another connection libmicrohttpd's thread
     * serves (a keep-alive client, a new one, a 503 refusal, a probe). */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct body *qhead, *qtail; /* calls waiting for a worker */
    int qstop;                  /* srv_rest_stop: workers end once the queue is empty */
    pthread_t *workers;
    unsigned nworkers;
    int port; /* the bound port (--rest_api_port=0: the kernel's choice) */
};

/* Per-request body accumulated by the access handler. */
typedef struct body {
    char *data;
    size_t len, cap;
    int too_big;
    int refused;    /* past --max_rest_buffered_bytes: dropped, answered 503 */
    size_t charged; /* bytes of srv_rest.buffered this body holds (its cap) */
    /* a call on a worker (rest_async): what it runs, then its answer */
    struct MHD_Connection *conn;
    const char *url, *method; /* libmicrohttpd's, alive while the request is */
    struct body *qnext;
    int ran;              /* the worker has put the answer in `reply` */
    srv_rest_reply reply; /* sent when libmicrohttpd resumes the connection */
} body;

/* ---- JSON -> tensor --------------------------------------------------- */

static int is_leaf(const cJSON *j) {
    return !cJSON_IsArray(j);
}

/* Shape of nested lists, from the first element at each level. */
static ms_status json_shape(const char *key, const cJSON *j, rt_shape *s) {
    s->rank = 0;
    while (cJSON_IsArray(j)) {
        if (s->rank == RT_MAX_RANK)
            return ms_errf(MS_EINVAL, "input \"%s\": more than %d nested lists", key, RT_MAX_RANK);
        s->dim[s->rank++] = cJSON_GetArraySize(j);
        j = j->child;
        if (j == NULL) break;
    }
    return MS_OK;
}

typedef struct filler {
    const char *key;
    rt_tensor *t;
    int64_t i;
} filler;

static ms_status put_leaf(filler *f, const cJSON *j) {
    rt_tensor *t = f->t;
    if (f->i >= t->nelem)
        return ms_errf(MS_EINVAL, "input \"%s\": lists of uneven length", f->key);
    int64_t i = f->i++;
    if (t->dtype == RT_DT_STRING) {
        const char *s = NULL;
        uint8_t *bytes = NULL;
        size_t n = 0;
        if (cJSON_IsString(j)) {
            s = j->valuestring;
            n = strlen(s);
            bytes = malloc(n + 1);
            if (bytes) memcpy(bytes, s, n);
        } else if (cJSON_IsObject(j) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "b64"))) {
            bytes = srv_b64_decode(cJSON_GetObjectItemCaseSensitive(j, "b64")->valuestring, &n);
            if (bytes == NULL)
                return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64
                               ": \"b64\" is not valid base64", f->key, i);
        } else {
            return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64
                           ": expected a string or {\"b64\": \"...\"} for DT_STRING", f->key, i);
        }
        if (bytes == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        /* strbuf-less strings point at bytes this tensor now owns: the tensor
         * was built by rt_tensor_new, whose rt_str array we fill; the bytes
         * are freed in free_strings. */
        rt_tensor_strs(t)[i].data = bytes;
        rt_tensor_strs(t)[i].len = n;
        return MS_OK;
    }
    double v;
    if (cJSON_IsBool(j))
        v = cJSON_IsTrue(j) ? 1 : 0;
    else if (cJSON_IsNumber(j))
        v = j->valuedouble;
    else
        return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 ": expected a number for %s",
                       f->key, i, rt_dtype_name(t->dtype));
    if (t->dtype == RT_DT_BOOL) {
        ((uint8_t *)t->data)[i] = v != 0;
        return MS_OK;
    }
    size_t n;
    return srv_json_number(v, t->dtype, rt_dtype_name(t->dtype), f->key, i,
                           (uint8_t *)t->data + (size_t)i * rt_dtype_size(t->dtype), &n);
}

static ms_status fill(filler *f, const cJSON *j, const rt_shape *s, int depth) {
    if (depth == s->rank) {
        if (!is_leaf(j))
            return ms_errf(MS_EINVAL, "input \"%s\": lists nested unevenly", f->key);
        return put_leaf(f, j);
    }
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != s->dim[depth])
        return ms_errf(MS_EINVAL, "input \"%s\": expected a list of %" PRId64
                       " at depth %d, as the first one at that depth", f->key, s->dim[depth], depth);
    for (const cJSON *c = j->child; c; c = c->next) {
        ms_status st = fill(f, c, s, depth + 1);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

static void free_strings(rt_tensor *t) {
    if (t == NULL) return;
    if (t->dtype == RT_DT_STRING)
        for (int64_t i = 0; i < t->nelem; i++) {
            free((void *)rt_tensor_strs(t)[i].data);
            rt_tensor_strs(t)[i].data = NULL;
            rt_tensor_strs(t)[i].len = 0;
        }
    rt_tensor_unref(t);
}

/* Builds the tensor for input `key` of `sd` from nested lists. Lists that
 * stop short of trailing dimensions the SignatureDef fixes at 1 get them
 * (the same values, reshaped: [1.0, 2.0] for x of shape (-1, 1) is [[1.0],
 * [2.0]]); *added says how many (docs/serving.md, "Left-out unit
 * dimensions"). */
static ms_status json_tensor(const Tensorflow__SignatureDef *sd, const char *key, const cJSON *j,
                             rt_tensor **out, int *added) {
    const Tensorflow__TensorInfo *ti = sig_input_info(sd, key);
    if (ti == NULL) {
        char names[512] = "";
        size_t w = 0;
        for (size_t i = 0; i < sd->n_inputs && w < sizeof names - 1; i++)
            w += (size_t)snprintf(names + w, sizeof names - w, "%s%s", i ? ", " : "",
                                  sd->inputs[i]->key);
        return ms_errf(MS_EINVAL, "input \"%s\" is not in the signature; its inputs: %s", key,
                       names);
    }
    rt_shape s;
    ms_status st = json_shape(key, j, &s);
    if (st != MS_OK) return st;
    rt_tensor *t = NULL;
    if ((st = rt_tensor_new(rt_dtype_base(ti->dtype), &s, &t)) != MS_OK) return st;
    filler f = {key, t, 0};
    if ((st = fill(&f, j, &s, 0)) != MS_OK) {
        free_strings(t);
        return st;
    }
    *added = s.rank > 0 ? sig_unit_tail(ti, s.rank) : 0;
    for (int k = 0; k < *added; k++)
        t->shape.dim[t->shape.rank++] = 1;
    *out = t;
    return MS_OK;
}

/* ---- tensor -> JSON --------------------------------------------------- */

static cJSON *elem_json(const rt_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RT_DT_FLOAT: return cJSON_CreateNumber(((const float *)t->data)[i]);
    case RT_DT_DOUBLE: return cJSON_CreateNumber(((const double *)t->data)[i]);
    case RT_DT_INT32: return cJSON_CreateNumber(((const int32_t *)t->data)[i]);
    case RT_DT_INT64: return cJSON_CreateNumber((double)((const int64_t *)t->data)[i]);
    case RT_DT_INT16: return cJSON_CreateNumber(((const int16_t *)t->data)[i]);
    case RT_DT_INT8: return cJSON_CreateNumber(((const int8_t *)t->data)[i]);
    case RT_DT_UINT8: return cJSON_CreateNumber(((const uint8_t *)t->data)[i]);
    case RT_DT_UINT16: return cJSON_CreateNumber(((const uint16_t *)t->data)[i]);
    case RT_DT_UINT32: return cJSON_CreateNumber(((const uint32_t *)t->data)[i]);
    case RT_DT_UINT64: return cJSON_CreateNumber((double)((const uint64_t *)t->data)[i]);
    case RT_DT_BOOL: return cJSON_CreateBool(((const uint8_t *)t->data)[i]);
    case RT_DT_HALF: return cJSON_CreateNumber(kn__half_to_f32(((const uint16_t *)t->data)[i]));
    case RT_DT_BFLOAT16: return cJSON_CreateNumber(kn__bf16_to_f32(((const uint16_t *)t->data)[i]));
    case RT_DT_STRING: {
        const rt_str *s = &rt_tensor_strs(t)[i];
        int text = 1;
        for (uint64_t k = 0; k < s->len; k++)
            if (s->data[k] < 0x20 || s->data[k] >= 0x7f) text = 0;
        if (text) {
            char *c = malloc(s->len + 1);
            if (c == NULL) return NULL;
            if (s->len) memcpy(c, s->data, s->len);
            c[s->len] = 0;
            cJSON *r = cJSON_CreateString(c);
            free(c);
            return r;
        }
        char *e = srv_b64_encode(s->data, s->len);
        cJSON *r = cJSON_CreateObject();
        if (e && r) cJSON_AddStringToObject(r, "b64", e);
        free(e);
        return r;
    }
    default:
        /* float8 / float4 / e8m0 and int4 / int2 (rt_lowp.h): their exact
         * values, as float16 gives its values */
        if (rt_dtype_is_lowp(t->dtype))
            return cJSON_CreateNumber(rt_lowp_to_f64(t->dtype, ((const uint8_t *)t->data)[i]));
        return NULL;
    }
}

/* 1 when elem_json writes elements of dt (JSON has no complex numbers, and
 * neither has TF Serving's REST API). */
static int json_dtype_ok(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT: case RT_DT_DOUBLE: case RT_DT_INT32: case RT_DT_INT64: case RT_DT_INT16:
    case RT_DT_INT8: case RT_DT_UINT8: case RT_DT_UINT16: case RT_DT_UINT32: case RT_DT_UINT64:
    case RT_DT_BOOL: case RT_DT_HALF: case RT_DT_BFLOAT16: case RT_DT_STRING: return 1;
    default: return rt_dtype_is_lowp(dt); /* float8, int4 ...: their values as numbers */
    }
}

/* Nested lists for the elements [*i, ...) of shape dims[depth..rank). */
static cJSON *tensor_json_at(const rt_tensor *t, int rank, int depth, int64_t *i) {
    if (depth == rank) return elem_json(t, (*i)++);
    cJSON *a = cJSON_CreateArray();
    for (int64_t k = 0; a && k < t->shape.dim[depth]; k++) {
        cJSON *c = tensor_json_at(t, rank, depth + 1, i);
        if (c == NULL) {
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

/* tensor_json without the `drop` trailing dimensions the request left out,
 * when the output has them, each 1, and so does its SignatureDef entry. */
static cJSON *output_json(const Tensorflow__SignatureDef *sd, const sig_output *o, int drop) {
    const rt_tensor *t = o->tensor;
    int rank = t->shape.rank;
    if (drop > 0 && rank > drop && sig_unit_tail(sig_output_info(sd, o->key), rank - drop) == drop) {
        int ok = 1;
        for (int d = rank - drop; d < rank; d++)
            ok = ok && t->shape.dim[d] == 1;
        if (ok) rank -= drop;
    }
    int64_t i = 0;
    return tensor_json_at(t, rank, 0, &i);
}

/* ---- handlers --------------------------------------------------------- */

typedef struct answer {
    int code;
    cJSON *json; /* owned */
} answer;

static int http_code(ms_status st) {
    switch (st) {
    case MS_EINVAL:
    case MS_EPRECOND:
    case MS_ENOTSUP: return MHD_HTTP_BAD_REQUEST;
    case MS_ENOTFOUND: return MHD_HTTP_NOT_FOUND;
    case MS_ETIMEDOUT: return MHD_HTTP_GATEWAY_TIMEOUT;
    case MS_ESHUTDOWN:
    case MS_EBUSY: return MHD_HTTP_SERVICE_UNAVAILABLE;
    default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

static answer error_answer(int code, const char *msg) {
    answer a = {code, cJSON_CreateObject()};
    if (a.json) cJSON_AddStringToObject(a.json, "error", msg);
    return a;
}

static answer status_error(ms_status st) {
    return error_answer(http_code(st), ms_errmsg());
}

/* The model part of a URL: name, version, label. */
typedef struct target {
    char name[256];
    int64_t version;
    char label[256];
} target;

static const char *state_name(srv_vstate s) {
    switch (s) {
    case SRV_VSTATE_START: return "START";
    case SRV_VSTATE_LOADING: return "LOADING";
    case SRV_VSTATE_AVAILABLE: return "AVAILABLE";
    case SRV_VSTATE_UNLOADING: return "UNLOADING";
    case SRV_VSTATE_END: return "END";
    default: return "UNKNOWN";
    }
}

static const char *code_name(int st) {
    return srv_grpc_code_name(srv_status_to_grpc((ms_status)st));
}

static answer do_status(srv_app *app, const target *tg) {
    int64_t version = tg->version;
    if (tg->label[0]) {
        srv_servable sv = {0};
        ms_status st = srv_manager_get(app->mgr, tg->name, 0, tg->label, &sv);
        if (st != MS_OK) return status_error(st);
        version = sv.version;
        srv_servable_release(&sv);
    }
    srv_version_status *vs = NULL;
    int n = 0;
    ms_status st = srv_manager_status(app->mgr, tg->name, version, &vs, &n);
    if (st != MS_OK) return status_error(st);
    answer a = {MHD_HTTP_OK, cJSON_CreateObject()};
    cJSON *arr = cJSON_AddArrayToObject(a.json, "model_version_status");
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject(), *s = cJSON_CreateObject();
        char v[32];
        snprintf(v, sizeof v, "%" PRId64, vs[i].version);
        cJSON_AddStringToObject(o, "version", v);
        cJSON_AddStringToObject(o, "state", state_name(vs[i].state));
        cJSON_AddStringToObject(s, "error_code", code_name(vs[i].code));
        cJSON_AddStringToObject(s, "error_message", vs[i].code == MS_OK ? "" : vs[i].msg);
        cJSON_AddItemToObject(o, "status", s);
        cJSON_AddItemToArray(arr, o);
    }
    free(vs);
    return a;
}

static cJSON *tensor_info_json(const Tensorflow__TensorInfo *ti) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", sig_dtype_name(ti->dtype));
    cJSON *sh = cJSON_AddObjectToObject(o, "tensor_shape");
    if (ti->tensor_shape == NULL || ti->tensor_shape->unknown_rank) {
        cJSON_AddBoolToObject(sh, "unknown_rank", 1);
    } else {
        cJSON *dims = cJSON_AddArrayToObject(sh, "dim");
        for (size_t i = 0; i < ti->tensor_shape->n_dim; i++) {
            cJSON *d = cJSON_CreateObject();
            char v[32];
            snprintf(v, sizeof v, "%" PRId64, ti->tensor_shape->dim[i]->size);
            cJSON_AddStringToObject(d, "size", v);
            cJSON_AddStringToObject(d, "name", "");
            cJSON_AddItemToArray(dims, d);
        }
        cJSON_AddBoolToObject(sh, "unknown_rank", 0);
    }
    cJSON_AddStringToObject(o, "name",
                            ti->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME ? ti->name : "");
    return o;
}

static answer do_metadata(srv_app *app, const target *tg) {
    srv_servable sv = {0};
    ms_status st = srv_manager_get(app->mgr, tg->name, tg->version, tg->label[0] ? tg->label : NULL,
                                   &sv);
    if (st != MS_OK) return status_error(st);
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(sv.model);
    answer a = {MHD_HTTP_OK, cJSON_CreateObject()};
    cJSON *spec = cJSON_AddObjectToObject(a.json, "model_spec");
    char v[32];
    snprintf(v, sizeof v, "%" PRId64, sv.version);
    cJSON_AddStringToObject(spec, "name", tg->name);
    cJSON_AddStringToObject(spec, "signature_name", "");
    cJSON_AddStringToObject(spec, "version", v);
    cJSON *md = cJSON_AddObjectToObject(a.json, "metadata");
    cJSON *sdm = cJSON_AddObjectToObject(cJSON_AddObjectToObject(md, "signature_def"),
                                         "signature_def");
    for (size_t i = 0; mg && i < mg->n_signature_def; i++) {
        const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
        if (sd == NULL) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON *ins = cJSON_AddObjectToObject(o, "inputs");
        for (size_t k = 0; k < sd->n_inputs; k++)
            cJSON_AddItemToObject(ins, sd->inputs[k]->key, tensor_info_json(sd->inputs[k]->value));
        cJSON *outs = cJSON_AddObjectToObject(o, "outputs");
        for (size_t k = 0; k < sd->n_outputs; k++)
            cJSON_AddItemToObject(outs, sd->outputs[k]->key,
                                  tensor_info_json(sd->outputs[k]->value));
        cJSON_AddStringToObject(o, "method_name", sd->method_name ? sd->method_name : "");
        cJSON_AddItemToObject(sdm, mg->signature_def[i]->key, o);
    }
    srv_servable_release(&sv);
    return a;
}

/* {"b64": "..."}: one DT_STRING value, not a map of named inputs. */
static int is_b64(const cJSON *j) {
    return cJSON_IsObject(j) && cJSON_GetArraySize(j) == 1 && j->child->string &&
           strcmp(j->child->string, "b64") == 0;
}

/* Splits {"instances": [...]} into one nested list per input (rows of
 * objects: one per key; plain rows: the signature's only input). The lists
 * hold references to the request's items. */
static ms_status rows_to_columns(const Tensorflow__SignatureDef *sd, const cJSON *inst,
                                 cJSON **cols) {
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (cJSON_GetArraySize(inst) > 0 && cJSON_IsObject(inst->child) && !is_b64(inst->child)) {
        int r = 0;
        for (const cJSON *row = inst->child; row; row = row->next, r++) {
            if (!cJSON_IsObject(row)) {
                cJSON_Delete(o);
                return ms_errf(MS_EINVAL, "\"instances\": every row must be an object when the "
                                          "first is");
            }
            for (const cJSON *f = row->child; f; f = f->next) {
                cJSON *col = cJSON_GetObjectItemCaseSensitive(o, f->string);
                if (col == NULL) {
                    if (row != inst->child) {
                        ms_status st = ms_errf(MS_EINVAL, "\"instances\": key \"%s\" is not in "
                                                          "the first row", f->string);
                        cJSON_Delete(o);
                        return st;
                    }
                    col = cJSON_AddArrayToObject(o, f->string);
                    if (col == NULL) {
                        cJSON_Delete(o);
                        return ms_errf(MS_ENOMEM, "out of memory");
                    }
                }
                /* A column's valueint (unused by cJSON for arrays) holds the
                 * last row that gave it a value, plus one: a key twice in one
                 * row would shift every later row of that column. */
                if (col->valueint == r + 1) {
                    ms_status st = ms_errf(MS_EINVAL, "\"instances\": key \"%s\" appears twice "
                                                      "in row %d", f->string, r);
                    cJSON_Delete(o);
                    return st;
                }
                col->valueint = r + 1;
                cJSON_AddItemReferenceToArray(col, (cJSON *)f);
            }
        }
        int n = cJSON_GetArraySize(inst);
        for (const cJSON *c = o->child; c; c = c->next)
            if (cJSON_GetArraySize(c) != n) {
                /* the message first: it quotes the column's key, freed with o */
                ms_status st = ms_errf(MS_EINVAL, "\"instances\": key \"%s\" is in %d of %d rows",
                                       c->string, cJSON_GetArraySize(c), n);
                cJSON_Delete(o);
                return st;
            }
    } else {
        if (sd->n_inputs != 1) {
            cJSON_Delete(o);
            return ms_errf(MS_EINVAL, "\"instances\" without named inputs needs a signature with "
                                      "one input; this one has %zu", sd->n_inputs);
        }
        cJSON_AddItemReferenceToObject(o, sd->inputs[0]->key, (cJSON *)inst);
    }
    *cols = o;
    return MS_OK;
}

static answer predict_json(srv_app *app, const target *tg, const body *b, int64_t *version,
                           ms_status *status, srv_req *rec, ms_watch *watch);

typedef struct predict_job {
    srv_app *app;
    const target *tg;
    const body *b;
    int64_t *version;
    ms_status *st;
    srv_req *rec;
    ms_watch *watch;
    answer a;
} predict_job;

static void predict_job_run(void *arg) {
    predict_job *j = arg;
    j->a = predict_json(j->app, j->tg, j->b, j->version, j->st, j->rec, j->watch);
}

typedef struct watched_job {
    void (*fn)(void *arg);
    void *arg;
    ms_watch *watch;
} watched_job;

static void watched_job_run(void *arg) {
    watched_job *w = arg;
    ms_watch_bind(w->watch); /* for handlers reached with no gRPC call */
    w->fn(w->arg);
    ms_watch_bind(NULL);
}

/* Runs fn(arg), a REST call that runs a model, on this thread, watched
 * (ms_watch.h): past the call deadline (--rest_api_timeout_in_ms) the run is
 * cancelled, and when the client closes its connection too (nobody reads
 * the answer). The model run itself goes through in_model_queue. */
static void run_watched(srv_rest *r, struct MHD_Connection *c, void (*fn)(void *arg), void *arg,
                        ms_watch *watch) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ms_watch_start(watch, r->call_timeout_ms, ci ? ci->connect_fd : -1);
    watched_job w = {fn, arg, watch};
    watched_job_run(&w);
    ms_watch_stop(watch);
}

typedef struct queued_job {
    watched_job w;
    char err[1024]; /* the worker's ms_errmsg() after the run */
} queued_job;

static void queued_job_run(void *arg) {
    queued_job *q = arg;
    ms_err_clear();
    watched_job_run(&q->w);
    snprintf(q->err, sizeof q->err, "%s", ms_errmsg());
}

/* Runs fn(arg), the model run of a REST call, on a gRPC worker through the
 * queue of `model` (fair with gRPC calls; MS_EBUSY at once when the queue is
 * full), bound to the call's watch; on this thread (bound by run_watched)
 * without a gRPC server. Only the run: the body's parse before it and the
 * answer's JSON after it stay on the REST worker. A model runs on at most
 * one queue slot per core, and every call of that model, gRPC's included,
 * waits for a slot: a slot held while a large body is checked or parsed
 * (0.3 s of CPU for 255 MiB, seconds at the workers' nice 10 on a busy
 * machine) held them all up (docs/reliability.md, F2). */
static ms_status in_model_queue(srv_app *app, const char *model, ms_watch *watch,
                                void (*fn)(void *arg), void *arg) {
    if (app->server == NULL) {
        fn(arg);
        return MS_OK;
    }
    queued_job q = {{fn, arg, watch}, ""};
    ms_status st = srv_server_run_job(app->server, model, queued_job_run, &q);
    /* the run's message (ms_errf is per thread) where the answer is written */
    if (st == MS_OK && q.err[0] != '\0') ms_errf(MS_OK, "%s", q.err);
    return st;
}

/* What a run stopped by its watch answers: DEADLINE_EXCEEDED (504) past the
 * deadline; st otherwise. */
static ms_status watched_status(const ms_watch *watch, ms_status st) {
    if (st == MS_ECANCELED && watch && ms_watch_reason(watch) == MS_WATCH_DEADLINE)
        return ms_errf(MS_ETIMEDOUT, "the call ran past its deadline (--rest_api_timeout_in_ms); "
                                     "stopped");
    if (st == MS_ECANCELED && watch && ms_watch_reason(watch) == MS_WATCH_HANGUP)
        return ms_errf(MS_ECANCELED, "the client closed the connection; stopped");
    return st;
}

/* :predict, watched (run_watched: 504 past the deadline); its model run on
 * a gRPC worker through the model's queue (503 when the queue is full). */
static answer do_predict(srv_rest *r, struct MHD_Connection *c, const target *tg, const body *b,
                         int64_t *version, ms_status *st, srv_req *rec) {
    ms_watch watch;
    predict_job j = {r->app, tg, b, version, st, rec, &watch, {0, NULL}};
    run_watched(r, c, predict_job_run, &j, &watch);
    return j.a;
}

/* What cJSON's tree of a body will hold at most: one node per value, and a
 * value needs at least one byte of its own or a separator (',' ':' '[' '{'),
 * so nodes <= separators + 1 outside strings; plus the string bytes. Counted
 * before parsing (the tree is ~40 times the body for "0,0,0,..."). */
static uint64_t json_tree_bytes(const char *p, size_t n) {
    uint64_t nodes = 1;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == ',' || ch == ':' || ch == '[' || ch == '{') {
            nodes++;
        }
    }
    /* a node and its malloc header; keys and strings copied once */
    return nodes * (sizeof(cJSON) + 16) + n;
}

/* A :predict's model run, for in_model_queue. */
typedef struct batch_job {
    srv_app *app;
    rt_model *model;
    const char *name;
    int64_t version;
    const char *sig_key;
    const sig_input *in;
    int nin;
    const rt_run_opts *opts;
    sig_output **outs;
    int *nouts;
    srv_req *rec;
    ms_status st;
} batch_job;

static void batch_job_run(void *arg) {
    batch_job *j = arg;
    srv_req_phase(j->rec, SRV_PHASE_QUEUE); /* since the body was decoded */
    j->st = srv_batch_run(j->app->batcher, j->model, j->name, j->version, j->sig_key, j->in,
                          j->nin, NULL, 0, j->opts, j->outs, j->nouts);
}

static answer predict_json(srv_app *app, const target *tg, const body *b, int64_t *version,
                           ms_status *status, srv_req *rec, ms_watch *watch) {
    answer a = {0};
    /* The model first: a call for a model we do not serve costs no parse. */
    srv_servable sv0 = {0};
    ms_status lst = srv_manager_get(app->mgr, tg->name, tg->version,
                                    tg->label[0] ? tg->label : NULL, &sv0);
    if (lst != MS_OK) {
        srv_req_model(rec, NULL, 0, SIG_DEFAULT_KEY); /* the body is not read */
        *status = lst;
        return status_error(lst);
    }
    srv_servable_release(&sv0);
    /* The parse tree is the request's memory too (--max_request_memory_bytes). */
    ms_budget budget;
    ms_budget_init(&budget, (uint64_t)(app->max_request_memory_bytes > 0
                                           ? app->max_request_memory_bytes
                                           : 0));
    uint64_t tree = json_tree_bytes(b->data ? b->data : "", b->len);
    ms_status bst = ms_budget_take(&budget, tree, "the JSON body's parse tree");
    if (bst != MS_OK) {
        *status = bst;
        return error_answer(413, ms_errmsg());
    }
    cJSON *req = cJSON_ParseWithLength(b->data ? b->data : "", b->len);
    if (req == NULL || !cJSON_IsObject(req)) {
        cJSON_Delete(req);
        *status = MS_EINVAL;
        return error_answer(MHD_HTTP_BAD_REQUEST,
                            "JSON Parse error: the body must be a JSON object with \"instances\" "
                            "or \"inputs\"");
    }
    cJSON *inst = cJSON_GetObjectItemCaseSensitive(req, "instances");
    cJSON *inputs = cJSON_GetObjectItemCaseSensitive(req, "inputs");
    cJSON *sig = cJSON_GetObjectItemCaseSensitive(req, "signature_name");
    if ((inst == NULL) == (inputs == NULL)) {
        cJSON_Delete(req);
        *status = MS_EINVAL;
        return error_answer(MHD_HTTP_BAD_REQUEST,
                            "Missing 'inputs' or 'instances' key (exactly one of them)");
    }
    if (inst && !cJSON_IsArray(inst)) {
        cJSON_Delete(req);
        *status = MS_EINVAL;
        return error_answer(MHD_HTTP_BAD_REQUEST, "\"instances\" must be a list");
    }
    const char *sig_key = cJSON_IsString(sig) && sig->valuestring[0] ? sig->valuestring
                                                                     : SIG_DEFAULT_KEY;
    srv_servable sv = {0};
    cJSON *cols = NULL;
    sig_input *in = NULL;
    int nin = 0;
    sig_output *outs = NULL;
    int nouts = 0;
    const Tensorflow__SignatureDef *sd = NULL;
    srv_req_model(rec, NULL, 0, sig_key);
    ms_status st = srv_manager_get(app->mgr, tg->name, tg->version,
                                   tg->label[0] ? tg->label : NULL, &sv);
    if (st != MS_OK) goto done;
    srv_req_model(rec, NULL, sv.version, NULL);
    if ((st = sig_find(rt_model_meta_graph(sv.model), sig_key, &sd)) != MS_OK) goto done;
    if (inst) {
        if ((st = rows_to_columns(sd, inst, &cols)) != MS_OK) goto done;
    } else if (cJSON_IsObject(inputs) && !is_b64(inputs)) {
        cols = cJSON_CreateObject();
        for (cJSON *c = inputs->child; cols && c; c = c->next)
            cJSON_AddItemReferenceToObject(cols, c->string, c);
    } else {
        if (sd->n_inputs != 1) {
            st = ms_errf(MS_EINVAL, "\"inputs\" without names needs a signature with one input; "
                                    "this one has %zu", sd->n_inputs);
            goto done;
        }
        cols = cJSON_CreateObject();
        if (cols) cJSON_AddItemReferenceToObject(cols, sd->inputs[0]->key, inputs);
    }
    if (cols == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int ncols = cJSON_GetArraySize(cols);
    in = calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(*in));
    if (in == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int drop = -1; /* unit dimensions added to every input that got some */
    for (cJSON *c = cols->child; c; c = c->next) {
        rt_tensor *t = NULL;
        int added = 0;
        if ((st = json_tensor(sd, c->string, c, &t, &added)) != MS_OK) goto done;
        in[nin].key = c->string;
        in[nin++].tensor = t;
        if (added > 0) drop = drop < 0 || drop == added ? added : 0;
    }
    if (drop < 0) drop = 0;
    if (nin > 0 && in[0].tensor->shape.rank > 0) srv_req_batch(rec, (int)in[0].tensor->shape.dim[0]);
    srv_req_phase(rec, SRV_PHASE_DECODE);
    rt_run_opts opts = {.budget = &budget, .cancelled = watch ? &watch->cancelled : NULL};
    batch_job bj = {app, sv.model, tg->name, sv.version, sig_key, in, nin, &opts, &outs, &nouts,
                    rec, MS_OK};
    st = in_model_queue(app, tg->name, watch, batch_job_run, &bj);
    if (st == MS_OK) st = bj.st;
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    st = watched_status(watch, st);
    if (st != MS_OK) goto done;
    for (int i = 0; i < nouts; i++)
        if (!json_dtype_ok(outs[i].tensor->dtype)) {
            st = ms_errf(MS_ENOTSUP, "output \"%s\": %s cannot be written in JSON; ask for it "
                                     "over gRPC",
                         outs[i].key, rt_dtype_name(outs[i].tensor->dtype));
            goto done;
        }
    a.code = MHD_HTTP_OK;
    a.json = cJSON_CreateObject();
    if (inputs) {
        cJSON *o = nouts == 1 ? output_json(sd, &outs[0], drop) : cJSON_CreateObject();
        for (int i = 0; nouts != 1 && i < nouts; i++)
            cJSON_AddItemToObject(o, outs[i].key, output_json(sd, &outs[i], drop));
        cJSON_AddItemToObject(a.json, "outputs", o);
    } else {
        cJSON *p = cJSON_AddArrayToObject(a.json, "predictions");
        cJSON **per = calloc((size_t)(nouts > 0 ? nouts : 1), sizeof(*per));
        int64_t rows = -1;
        for (int i = 0; per && i < nouts; i++) {
            per[i] = output_json(sd, &outs[i], drop);
            int64_t r = outs[i].tensor->shape.rank ? outs[i].tensor->shape.dim[0] : -1;
            if (per[i] == NULL || r < 0 || (rows >= 0 && r != rows)) {
                st = ms_errf(MS_EINVAL, "output \"%s\": row format needs every output to have "
                                        "the same first dimension; use \"inputs\"", outs[i].key);
            }
            rows = r;
        }
        for (int64_t r = 0; st == MS_OK && per && r < rows; r++) {
            if (nouts == 1) {
                cJSON_AddItemToArray(p, cJSON_DetachItemFromArray(per[0], 0));
                continue;
            }
            cJSON *row = cJSON_CreateObject();
            for (int i = 0; i < nouts; i++)
                cJSON_AddItemToObject(row, outs[i].key, cJSON_DetachItemFromArray(per[i], 0));
            cJSON_AddItemToArray(p, row);
        }
        for (int i = 0; per && i < nouts; i++)
            cJSON_Delete(per[i]);
        free(per);
        if (st != MS_OK) {
            cJSON_Delete(a.json);
            a.json = NULL;
        }
    }
    srv_req_phase(rec, SRV_PHASE_SERIALIZE);
done:
    if (st != MS_OK) a = status_error(st);
    *status = st;
    *version = sv.version;
    if (outs) sig_outputs_free(outs, nouts);
    for (int i = 0; i < nin; i++)
        free_strings(in[i].tensor);
    free(in);
    cJSON_Delete(cols);
    srv_servable_release(&sv);
    cJSON_Delete(req);
    return a;
}

/* KServe v2 health: /v2/health/live, /v2/health/ready,
 * /v2/models/{m}[/versions/{v}]/ready. 200 = true, 400 = false (the
 * protocol's 4xx), with {"live"|"ready": bool}; -1 for other paths. */
static int kserve_health(srv_app *app, const char *url, answer *a) {
    const char *key = "ready";
    int ok;
    if (strcmp(url, "/v2/health/live") == 0) {
        key = "live";
        ok = 1;
    } else if (strcmp(url, "/v2/health/ready") == 0) {
        ok = !atomic_load(&app->draining) && !kn_cuda_sticky() && srv_manager_ready(app->mgr);
    } else if (strncmp(url, "/v2/models/", 11) == 0) {
        size_t len = strlen(url);
        if (len < 17 || strcmp(url + len - 6, "/ready") != 0) return -1;
        char name[256];
        const char *p = url + 11, *end = url + len - 6;
        const char *vs = strstr(p, "/versions/");
        size_t n = (size_t)((vs && vs < end ? vs : end) - p);
        if (n == 0 || n >= sizeof name) return -1;
        memcpy(name, p, n);
        name[n] = 0;
        int64_t version = 0;
        if (vs && vs < end) {
            char *e;
            version = strtoll(vs + 10, &e, 10);
            if (e != end || version <= 0) return -1;
        }
        srv_servable sv = {0};
        ok = !atomic_load(&app->draining) &&
             srv_manager_get(app->mgr, name, version, NULL, &sv) == MS_OK;
        srv_servable_release(&sv);
    } else {
        return -1;
    }
    a->code = ok ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST;
    a->json = cJSON_CreateObject();
    if (a->json) cJSON_AddBoolToObject(a->json, key, ok);
    return 0;
}

/* Parses /v1/models/{m}[/versions/{v}|/labels/{l}] followed by `rest`
 * ("", "/metadata" or ":predict"); returns the kind or -1. */
enum { K_STATUS, K_METADATA, K_PREDICT, K_CLASSIFY, K_REGRESS };
static int parse_url(const char *url, target *tg) {
    memset(tg, 0, sizeof *tg);
    const char *p = url + strlen("/v1/models/");
    size_t n = strcspn(p, "/:");
    if (n == 0 || n >= sizeof tg->name) return -1;
    memcpy(tg->name, p, n);
    p += n;
    if (strncmp(p, "/versions/", 10) == 0) {
        p += 10;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v <= 0) return -1;
        tg->version = v;
        p = end;
    } else if (strncmp(p, "/labels/", 8) == 0) {
        p += 8;
        n = strcspn(p, "/:");
        if (n == 0 || n >= sizeof tg->label) return -1;
        memcpy(tg->label, p, n);
        p += n;
    }
    if (*p == 0) return K_STATUS;
    if (strcmp(p, "/metadata") == 0) return K_METADATA;
    if (strcmp(p, ":predict") == 0) return K_PREDICT;
    if (strcmp(p, ":classify") == 0) return K_CLASSIFY;
    if (strcmp(p, ":regress") == 0) return K_REGRESS;
    return -1;
}

/* Sends a finished reply (body ownership passes to libmicrohttpd). */
static enum MHD_Result send_reply(srv_rest *r, struct MHD_Connection *c, srv_rest_reply *o) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(o->len, o->body, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(o->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", o->type ? o->type : "application/json");
    if (o->header_len > 0) {
        char h[32];
        snprintf(h, sizeof h, "%zu", o->header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", h);
    }
    if (r->cors) MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)o->code, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* An answer (JSON) as a reply. */
static srv_rest_reply to_reply(answer a, ms_status st) {
    srv_rest_reply o = {a.code, st, NULL, 0, 0, "application/json"};
    o.body = a.json ? cJSON_PrintUnformatted(a.json) : NULL;
    cJSON_Delete(a.json);
    if (o.body == NULL) {
        o.body = strdup("{\"error\": \"out of memory\"}");
        o.code = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    o.len = o.body ? strlen(o.body) : 0;
    return o;
}

/* The status a plain HTTP answer stands for (metrics, request log). */
static ms_status status_of(int code) {
    switch (code) {
    case 200: return MS_OK;
    case 404: return MS_ENOTFOUND;
    case 413: return MS_ENOMEM;
    case 501: return MS_ENOTSUP;
    case 503: return MS_ESHUTDOWN;
    case 504: return MS_ETIMEDOUT;
    default: return code < 500 ? MS_EINVAL : MS_EINTERNAL;
    }
}

/* ---- :classify / :regress (tf.Example from JSON) ------------------------ */

/* All of one request's protobuf-c pieces; freed together. */
typedef struct ex_arena {
    void **p;
    size_t n, cap;
} ex_arena;

static void *ex_alloc(ex_arena *a, size_t size) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **p = realloc(a->p, cap * sizeof(void *));
        if (p == NULL) return NULL;
        a->p = p;
        a->cap = cap;
    }
    void *m = calloc(1, size ? size : 1);
    if (m) a->p[a->n++] = m;
    return m;
}

static void ex_arena_free(ex_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
}

/* cJSON keeps no trace of how a number was written, but TF Serving tells
 * 1 (int64_list) from 1.0 (float_list). The body's number tokens are read in
 * text order (which is cJSON's document order) and each number node's
 * valueint becomes its token's index (valueint is not used otherwise). */
typedef struct num_tok {
    int is_int;
    int range_ok;
    int64_t v;
} num_tok;

static size_t scan_numbers(const char *s, size_t n, num_tok *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        char ch = s[i];
        if (ch == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            i++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t j = i;
            int is_int = 1;
            while (j < n && strchr("+-0123456789.eE", s[j]) && s[j]) {
                if (s[j] == '.' || s[j] == 'e' || s[j] == 'E') is_int = 0;
                j++;
            }
            if (out) {
                char buf[32];
                size_t len = j - i;
                out[k] = (num_tok){is_int, 0, 0};
                if (is_int && len < sizeof buf) {
                    memcpy(buf, s + i, len);
                    buf[len] = 0;
                    errno = 0;
                    char *end;
                    long long v = strtoll(buf, &end, 10);
                    out[k].range_ok = errno == 0 && *end == 0;
                    out[k].v = v;
                }
            }
            k++;
            i = j;
        } else {
            i++;
        }
    }
    return k;
}

static int number_index(cJSON *j, int idx) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) j->valueint = idx++;
        if (j->child) idx = number_index(j->child, idx);
    }
    return idx;
}

typedef struct ex_ctx {
    ex_arena ar;
    const num_tok *toks;
    size_t ntoks;
    char err[256];
} ex_ctx;

enum { FV_NONE, FV_INT, FV_FLOAT, FV_BYTES };

static int value_kind(const ex_ctx *x, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        size_t i = (size_t)v->valueint;
        return i < x->ntoks && x->toks[i].is_int ? FV_INT : FV_FLOAT;
    }
    if (cJSON_IsString(v) || (is_b64(v) && cJSON_IsString(v->child))) return FV_BYTES;
    return FV_NONE;
}

/* One feature value (a value, or a list of values of one kind). */
static Tensorflow__Serving__Feature *json_feature(ex_ctx *x, const char *name, const cJSON *v) {
    const cJSON *first = cJSON_IsArray(v) ? v->child : v;
    size_t n = cJSON_IsArray(v) ? (size_t)cJSON_GetArraySize(v) : 1;
    Tensorflow__Serving__Feature *f = ex_alloc(&x->ar, sizeof *f);
    if (f == NULL) return NULL;
    Tensorflow__Serving__Feature f0 = TENSORFLOW__SERVING__FEATURE__INIT;
    *f = f0;
    int kind = first ? value_kind(x, first) : FV_FLOAT;
    if (kind == FV_NONE) {
        snprintf(x->err, sizeof x->err, "Feature '%.100s': expected a number, a string, "
                 "{\"b64\": ...} or a list of them", name);
        return NULL;
    }
    size_t i = 0;
    if (kind == FV_INT) {
        Tensorflow__Serving__Feature__Int64List l0 = TENSORFLOW__SERVING__FEATURE__INT64_LIST__INIT;
        Tensorflow__Serving__Feature__Int64List *l = ex_alloc(&x->ar, sizeof *l);
        int64_t *vals = ex_alloc(&x->ar, n * sizeof(int64_t));
        if (l == NULL || vals == NULL) return NULL;
        *l = l0;
        l->value = vals;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_INT64_LIST;
        f->int64_list = l;
    } else if (kind == FV_FLOAT) {
        Tensorflow__Serving__Feature__FloatList l0 = TENSORFLOW__SERVING__FEATURE__FLOAT_LIST__INIT;
        Tensorflow__Serving__Feature__FloatList *l = ex_alloc(&x->ar, sizeof *l);
        float *vals = ex_alloc(&x->ar, n * sizeof(float));
        if (l == NULL || vals == NULL) return NULL;
        *l = l0;
        l->value = vals;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_FLOAT_LIST;
        f->float_list = l;
    } else {
        Tensorflow__Serving__Feature__BytesList l0 = TENSORFLOW__SERVING__FEATURE__BYTES_LIST__INIT;
        Tensorflow__Serving__Feature__BytesList *l = ex_alloc(&x->ar, sizeof *l);
        ProtobufCBinaryData *vals = ex_alloc(&x->ar, n * sizeof(ProtobufCBinaryData));
        if (l == NULL || vals == NULL) return NULL;
        *l = l0;
        l->value = vals;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_BYTES_LIST;
        f->bytes_list = l;
    }
    for (const cJSON *e = first; e && i < n; e = cJSON_IsArray(v) ? e->next : NULL, i++) {
        if (value_kind(x, e) != kind) {
            snprintf(x->err, sizeof x->err, "Feature '%.100s' has mixed types (a list holds "
                     "one of: integers, floats, strings)", name);
            return NULL;
        }
        if (kind == FV_INT) {
            const num_tok *t = &x->toks[e->valueint];
            if (!t->range_ok) {
                snprintf(x->err, sizeof x->err, "Feature '%.100s': integer out of int64 range",
                         name);
                return NULL;
            }
            f->int64_list->value[i] = t->v;
        } else if (kind == FV_FLOAT) {
            f->float_list->value[i] = (float)e->valuedouble;
        } else if (cJSON_IsString(e)) {
            f->bytes_list->value[i] =
                (ProtobufCBinaryData){strlen(e->valuestring), (uint8_t *)e->valuestring};
        } else {
            size_t len = 0;
            uint8_t *raw = srv_b64_decode(e->child->valuestring, &len);
            if (raw == NULL) {
                snprintf(x->err, sizeof x->err, "Feature '%.100s': \"b64\" is not base64", name);
                return NULL;
            }
            uint8_t *copy = ex_alloc(&x->ar, len);
            if (copy == NULL) {
                free(raw);
                return NULL;
            }
            if (len) memcpy(copy, raw, len);
            free(raw);
            f->bytes_list->value[i] = (ProtobufCBinaryData){len, copy};
        }
    }
    if (kind == FV_INT) f->int64_list->n_value = n;
    else if (kind == FV_FLOAT) f->float_list->n_value = n;
    else f->bytes_list->n_value = n;
    return f;
}

/* {feature: value, ...} -> Example. */
static Tensorflow__Serving__Example *json_example(ex_ctx *x, const cJSON *o) {
    if (!cJSON_IsObject(o)) {
        snprintf(x->err, sizeof x->err, "an example must be a JSON object {feature: value, ...}");
        return NULL;
    }
    size_t n = (size_t)cJSON_GetArraySize(o);
    Tensorflow__Serving__Example *e = ex_alloc(&x->ar, sizeof *e);
    Tensorflow__Serving__Features *fs = ex_alloc(&x->ar, sizeof *fs);
    Tensorflow__Serving__Features__FeatureEntry **ents = ex_alloc(&x->ar, n * sizeof(void *));
    if (e == NULL || fs == NULL || ents == NULL) return NULL;
    Tensorflow__Serving__Example e0 = TENSORFLOW__SERVING__EXAMPLE__INIT;
    Tensorflow__Serving__Features fs0 = TENSORFLOW__SERVING__FEATURES__INIT;
    *e = e0;
    *fs = fs0;
    e->features = fs;
    fs->feature = ents;
    for (const cJSON *c = o->child; c; c = c->next) {
        Tensorflow__Serving__Features__FeatureEntry *en = ex_alloc(&x->ar, sizeof *en);
        if (en == NULL) return NULL;
        Tensorflow__Serving__Features__FeatureEntry en0 =
            TENSORFLOW__SERVING__FEATURES__FEATURE_ENTRY__INIT;
        *en = en0;
        en->key = c->string;
        if ((en->value = json_feature(x, c->string, c)) == NULL) return NULL;
        ents[fs->n_feature++] = en;
    }
    return e;
}

typedef struct example_job {
    srv_app *app;
    const target *tg;
    const body *b;
    int regress;
    int64_t *version;
    ms_status *st;
    ms_watch *watch;
    answer a;
} example_job;

/* A :classify's or :regress's run (the request packed), for in_model_queue. */
typedef struct tfs_job {
    srv_app *app;
    int regress;
    const srv_bytes *wire;
    srv_bytes *out;
    ms_status st;
} tfs_job;

static void tfs_job_run(void *arg) {
    tfs_job *j = arg;
    j->st = j->regress ? srv_tfs_regress(j->app, NULL, j->wire->data, j->wire->len, j->out)
                       : srv_tfs_classify(j->app, NULL, j->wire->data, j->wire->len, j->out);
}

static answer example_bad(ms_status *st, const char *msg) {
    *st = MS_EINVAL;
    return error_answer(MHD_HTTP_BAD_REQUEST, msg);
}

/* The JSON body as a Classification/RegressionRequest, the gRPC handler, its
 * answer as TF Serving's JSON. */
static answer example_json(srv_app *app, const target *tg, const body *b, int regress,
                           int64_t *version, ms_status *status, ms_watch *watch) {
    const char *data = b->data ? b->data : "";
    cJSON *req = cJSON_ParseWithLength(data, b->len);
    ex_ctx x = {0};
    answer a = {0};
    srv_bytes out = {0};
    if (req == NULL || !cJSON_IsObject(req)) {
        a = example_bad(status, "JSON Parse error: the body must be a JSON object with "
                                "\"examples\"");
        goto done;
    }
    x.ntoks = scan_numbers(data, b->len, NULL);
    num_tok *toks = x.ntoks ? calloc(x.ntoks, sizeof(num_tok)) : NULL;
    if (x.ntoks && toks == NULL) {
        *status = MS_ENOMEM;
        a = error_answer(500, "out of memory");
        goto done;
    }
    scan_numbers(data, b->len, toks);
    x.toks = toks;
    if ((size_t)number_index(req, 0) > x.ntoks) {
        a = example_bad(status, "JSON Parse error: cannot read the numbers of the body");
        goto done;
    }
    const cJSON *exs = cJSON_GetObjectItemCaseSensitive(req, "examples");
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(req, "context");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(req, "signature_name");
    if (!cJSON_IsArray(exs)) {
        a = example_bad(status, "Missing 'examples' key (a list of {feature: value} objects)");
        goto done;
    }
    if (sig && !cJSON_IsString(sig)) {
        a = example_bad(status, "'signature_name' must be a string");
        goto done;
    }
    size_t n = (size_t)cJSON_GetArraySize(exs);
    Tensorflow__Serving__Example **list = ex_alloc(&x.ar, n * sizeof(void *));
    Tensorflow__Serving__Example *cex = NULL;
    if (list == NULL) goto oom;
    size_t i = 0;
    for (const cJSON *e = exs->child; e; e = e->next) {
        if ((list[i++] = json_example(&x, e)) == NULL) goto bad;
    }
    if (ctx && (cex = json_example(&x, ctx)) == NULL) goto bad;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    spec.name = (char *)tg->name;
    if (tg->version > 0) {
        ver.value = tg->version;
        spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
        spec.version = &ver;
    } else if (tg->label[0]) {
        spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL;
        spec.version_label = (char *)tg->label;
    }
    if (sig) spec.signature_name = sig->valuestring;
    Tensorflow__Serving__ExampleList el = TENSORFLOW__SERVING__EXAMPLE_LIST__INIT;
    Tensorflow__Serving__ExampleListWithContext elc =
        TENSORFLOW__SERVING__EXAMPLE_LIST_WITH_CONTEXT__INIT;
    Tensorflow__Serving__Input in = TENSORFLOW__SERVING__INPUT__INIT;
    if (cex) {
        elc.n_examples = n;
        elc.examples = list;
        elc.context = cex;
        in.kind_case = TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST_WITH_CONTEXT;
        in.example_list_with_context = &elc;
    } else {
        el.n_examples = n;
        el.examples = list;
        in.kind_case = TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST;
        in.example_list = &el;
    }
    Tensorflow__Serving__ClassificationRequest crq =
        TENSORFLOW__SERVING__CLASSIFICATION_REQUEST__INIT;
    Tensorflow__Serving__RegressionRequest rrq = TENSORFLOW__SERVING__REGRESSION_REQUEST__INIT;
    crq.model_spec = rrq.model_spec = &spec;
    crq.input = rrq.input = &in;
    srv_bytes wire = {0};
    ms_status st = srv_pack(regress ? &rrq.base : &crq.base, &wire);
    if (st == MS_OK) {
        tfs_job tj = {app, regress, &wire, &out, MS_OK};
        st = in_model_queue(app, tg->name, watch, tfs_job_run, &tj);
        if (st == MS_OK) st = tj.st;
    }
    free(wire.data);
    if (st != MS_OK) {
        *status = st;
        a = status_error(st);
        goto done;
    }
    cJSON *res = cJSON_CreateArray();
    a = (answer){MHD_HTTP_OK, cJSON_CreateObject()};
    if (res == NULL || a.json == NULL) {
        cJSON_Delete(res);
        goto oom;
    }
    cJSON_AddItemToObject(a.json, "results", res);
    if (regress) {
        Tensorflow__Serving__RegressionResponse *rr =
            tensorflow__serving__regression_response__unpack(NULL, out.len, out.data);
        if (rr == NULL) goto oom;
        if (rr->model_spec && rr->model_spec->version) *version = rr->model_spec->version->value;
        for (size_t k = 0; rr->result && k < rr->result->n_regressions; k++)
            cJSON_AddItemToArray(res, cJSON_CreateNumber(rr->result->regressions[k]->value));
        tensorflow__serving__regression_response__free_unpacked(rr, NULL);
    } else {
        Tensorflow__Serving__ClassificationResponse *cr =
            tensorflow__serving__classification_response__unpack(NULL, out.len, out.data);
        if (cr == NULL) goto oom;
        if (cr->model_spec && cr->model_spec->version) *version = cr->model_spec->version->value;
        for (size_t k = 0; cr->result && k < cr->result->n_classifications; k++) {
            const Tensorflow__Serving__Classifications *c = cr->result->classifications[k];
            cJSON *row = cJSON_CreateArray();
            for (size_t j = 0; row && j < c->n_classes; j++) {
                cJSON *pair = cJSON_CreateArray();
                cJSON_AddItemToArray(pair, cJSON_CreateString(c->classes[j]->label));
                cJSON_AddItemToArray(pair, cJSON_CreateNumber(c->classes[j]->score));
                cJSON_AddItemToArray(row, pair);
            }
            cJSON_AddItemToArray(res, row);
        }
        tensorflow__serving__classification_response__free_unpacked(cr, NULL);
    }
    *status = MS_OK;
    goto done;
bad:
    if (x.err[0]) {
        a = example_bad(status, x.err);
        goto done;
    }
oom:
    cJSON_Delete(a.json);
    *status = MS_ENOMEM;
    a = error_answer(500, "out of memory");
done:
    free(out.data);
    free((void *)x.toks);
    ex_arena_free(&x.ar);
    cJSON_Delete(req);
    return a;
}

static void example_job_run(void *arg) {
    example_job *j = arg;
    j->a = example_json(j->app, j->tg, j->b, j->regress, j->version, j->st, j->watch);
}

/* :classify / :regress, watched as :predict; the run through the model's
 * queue as :predict's. */
static answer do_example_api(srv_rest *r, struct MHD_Connection *c, const target *tg,
                             const body *b, int regress, int64_t *version, ms_status *st) {
    ms_watch watch;
    example_job j = {r->app, tg, b, regress, version, st, &watch, {0, NULL}};
    run_watched(r, c, example_job_run, &j, &watch);
    ms_status wst = watched_status(&watch, *st);
    if (wst != *st) {
        cJSON_Delete(j.a.json);
        *st = wst;
        return status_error(wst);
    }
    return j.a;
}

typedef struct v2_job {
    srv_app *app;
    const char *method, *url, *hl;
    const body *b;
    srv_req *rec;
    srv_rest_reply *out;
    int ret;
} v2_job;

static void v2_job_run(void *arg) {
    v2_job *j = arg;
    j->ret = srv_rest_v2(j->app, j->method, j->url, j->hl, j->b->data, j->b->len, j->rec, j->out);
}

/* The /v2 routes (srv_rest_v2.c); an infer is watched as :predict. */
static int do_v2(srv_rest *r, struct MHD_Connection *c, const char *method, const char *url,
                 const body *b, srv_req *rec, srv_rest_reply *out) {
    const char *hl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 "Inference-Header-Content-Length");
    v2_job j = {r->app, method, url, hl, b, rec, out, -1};
    size_t n = strlen(url);
    if (strcmp(method, "POST") != 0 || n < 6 || strcmp(url + n - 6, "/infer") != 0) {
        v2_job_run(&j);
        return j.ret;
    }
    ms_watch watch;
    run_watched(r, c, v2_job_run, &j, &watch);
    ms_status wst = watched_status(&watch, out->st);
    if (j.ret == 0 && wst != out->st) {
        free(out->body);
        *out = to_reply(status_error(wst), wst);
    }
    return j.ret;
}

/* The answer to a body past --max_rest_buffered_bytes (static storage). */
static const char *buffered_msg(const srv_rest *r) {
    static _Thread_local char msg[200];
    snprintf(msg, sizeof msg, "the server holds %lld bytes of REST request bodies at most "
             "(--max_rest_buffered_bytes) and this one does not fit now; try again later",
             r->max_buffered);
    return msg;
}

static const char *rest_api_name(const char *url, const char *method, int kind) {
    if (strcmp(url, "/metrics") == 0 || strcmp(method, "OPTIONS") == 0) return "rest_other";
    if (strncmp(url, "/v2", 3) == 0) {
        if (strstr(url, "/ready") || strstr(url, "/health/")) return "rest_kserve_health";
        if (strcmp(url, "/v2") == 0 || strcmp(url, "/v2/") == 0) return "rest_kserve_server_metadata";
        size_t n = strlen(url);
        return n > 6 && strcmp(url + n - 6, "/infer") == 0 ? "rest_kserve_infer"
                                                             : "rest_kserve_metadata";
    }
    switch (kind) {
    case K_STATUS: return "rest_status";
    case K_METADATA: return "rest_metadata";
    case K_PREDICT: return "rest_predict";
    case K_CLASSIFY: return "rest_classify";
    case K_REGRESS: return "rest_regress";
    default: return "rest_other";
    }
}

static srv_rest_reply route(srv_rest *r, struct MHD_Connection *c, const char *url,
                            const char *method, body *b, int kind, target *tg, srv_req *rec) {
    if (b->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %lld bytes "
                                  "(--max_message_bytes)", (long long)r->app->max_message_bytes);
        return to_reply(error_answer(413, msg), MS_ENOMEM);
    }
    if (b->refused) return to_reply(error_answer(503, buffered_msg(r)), MS_EBUSY);
    if (strcmp(method, "OPTIONS") == 0 && r->cors)
        return to_reply((answer){MHD_HTTP_OK, cJSON_CreateObject()}, MS_OK);
    if ((strcmp(url, "/metrics") == 0 || (r->metrics_path[0] && strcmp(url, r->metrics_path) == 0)) &&
        strcmp(method, "GET") == 0) {
        srv_metrics_pool pools[64];
        int np = srv_manager_pool_bytes(r->app->mgr, pools, 64);
        srv_rest_reply o = {MHD_HTTP_OK, MS_OK,
                            srv_metrics_render(srv_manager_loaded_versions(r->app->mgr), pools, np),
                            0, 0, "text/plain; version=0.0.4"};
        if (o.body == NULL) return to_reply(error_answer(500, "out of memory"), MS_ENOMEM);
        o.len = strlen(o.body);
        return o;
    }
    answer ka;
    if (strcmp(method, "GET") == 0 && kserve_health(r->app, url, &ka) == 0)
        return to_reply(ka, MS_OK);
    srv_rest_reply v2;
    if (srv_rest_triton(r->app, method, url, b->data, b->len, rec, &v2) == 0) return v2;
    if (do_v2(r, c, method, url, b, rec, &v2) == 0) return v2;
    if (kind < 0) {
        char msg[480];
        snprintf(msg, sizeof msg, "Malformed request: %.16s %.200s (expected /v1/models/<name>"
                                  "[/versions/<v>|/labels/<l>][/metadata|:predict|:classify|"
                                  ":regress] or /v2/...)", method, url);
        return to_reply(error_answer(MHD_HTTP_NOT_FOUND, msg), MS_ENOTFOUND);
    }
    srv_req_model(rec, tg->name, tg->version, NULL);
    int is_post = strcmp(method, "POST") == 0, is_get = strcmp(method, "GET") == 0;
    int wants_post = kind == K_PREDICT || kind == K_CLASSIFY || kind == K_REGRESS;
    if ((wants_post && !is_post) || (!wants_post && !is_get))
        return to_reply(error_answer(MHD_HTTP_METHOD_NOT_ALLOWED,
                                     wants_post ? "use POST for :predict, :classify and :regress"
                                                : "use GET for status and metadata"),
                        MS_EINVAL);
    if (kind == K_PREDICT || kind == K_CLASSIFY || kind == K_REGRESS) {
        int64_t version = 0;
        ms_status st = MS_OK;
        answer a = kind == K_PREDICT ? do_predict(r, c, tg, b, &version, &st, rec)
                                     : do_example_api(r, c, tg, b, kind == K_REGRESS, &version,
                                                      &st);
        srv_req_model(rec, NULL, version, NULL);
        return to_reply(a, st);
    }
    answer a = kind == K_STATUS ? do_status(r->app, tg) : do_metadata(r->app, tg);
    return to_reply(a, status_of(a.code));
}

/* One request: route it, one record (metrics + log line); the reply. */
static srv_rest_reply dispatch(srv_rest *r, struct MHD_Connection *c, const char *url,
                                const char *method, body *b) {
    target tg;
    int kind = strncmp(url, "/v1/models/", 11) == 0 ? parse_url(url, &tg) : -1;
    char peer[64] = "";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        char host[48] = "";
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
            inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
            snprintf(peer, sizeof peer, "ipv4:%s:%u", host, ntohs(a4->sin_port));
        } else if (sa->sa_family == AF_INET6) {
            const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
            inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
            snprintf(peer, sizeof peer, "ipv6:[%s]:%u", host, ntohs(a6->sin6_port));
        }
    }
    srv_req rec;
    srv_req_begin(&rec, rest_api_name(url, method, kind), peer);
    rec.bytes_in = b->too_big ? 0 : b->len;
    ms_err_clear();
    srv_rest_reply o = route(r, c, url, method, b, kind, &tg, &rec);
    rec.bytes_out = o.len;
    ms_status st = o.code == 200 ? MS_OK : o.st != MS_OK ? o.st : status_of(o.code);
    srv_req_end(&rec, st); /* before the answer: a client that has it finds it counted */
    return o;
}

/* A worker: runs the queued calls, puts each answer in its body and resumes
 * its connection (libmicrohttpd then calls on_request again, which sends
 * it). Ends when srv_rest_stop asks and the queue is empty. */
static void *rest_worker_main(void *arg) {
    srv_rest *r = arg;
    pthread_mutex_lock(&r->qmu);
    for (;;) {
        while (r->qhead == NULL && !r->qstop) pthread_cond_wait(&r->qcv, &r->qmu);
        body *b = r->qhead;
        if (b == NULL) break;
        r->qhead = b->qnext;
        if (r->qhead == NULL) r->qtail = NULL;
        pthread_mutex_unlock(&r->qmu);
        b->reply = dispatch(r, b->conn, b->url, b->method, b);
        b->ran = 1;
        MHD_resume_connection(b->conn); /* orders the stores above before the resume */
        pthread_mutex_lock(&r->qmu);
    }
    pthread_mutex_unlock(&r->qmu);
    return NULL;
}

/* Queues the call on the workers, its connection suspended; 0 when the
 * workers are stopping (or none started): the caller runs it itself. */
static int rest_async(srv_rest *r, struct MHD_Connection *c, const char *url, const char *method,
                      body *b) {
    pthread_mutex_lock(&r->qmu);
    if (r->qstop || r->nworkers == 0) {
        pthread_mutex_unlock(&r->qmu);
        return 0;
    }
    b->conn = c;
    b->url = url;
    b->method = method;
    b->qnext = NULL;
    b->ran = 0;
    MHD_suspend_connection(c); /* before a worker can resume it */
    if (r->qtail) r->qtail->qnext = b;
    else r->qhead = b;
    r->qtail = b;
    pthread_cond_signal(&r->qcv);
    pthread_mutex_unlock(&r->qmu);
    return 1;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The connection's rconn (on_connection set it as its socket context). */
static rconn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    /* the answer is the address of the connection's socket context */
    return ci ? *(rconn *const *)(const void *)ci : NULL;
}

/* Takes k out of its byst list; under r->mu. */
static void st_unlink(srv_rest *r, rconn *k) {
    if (!k->linked) return;
    if (k->sprev) k->sprev->snext = k->snext;
    else r->byst[k->state] = k->snext;
    if (k->snext) k->snext->sprev = k->sprev;
    else r->byst_tail[k->state] = k->sprev;
    k->sprev = k->snext = NULL;
    k->linked = 0;
}

/* Puts k at the end of its state's list (it is the newest, or its body has
 * just moved) when it may be closed for a new connection; under r->mu. */
static void st_link(srv_rest *r, rconn *k) {
    st_unlink(r, k);
    if (!k->counted || k->cut || k->state > C_SEND) return;
    k->sprev = r->byst_tail[k->state];
    k->snext = NULL;
    if (k->sprev) k->sprev->snext = k;
    else r->byst[k->state] = k;
    r->byst_tail[k->state] = k;
    k->linked = 1;
}

/* Moves k to `state` (C_WAIT: a request was answered); a refused
 * connection stays refused. */
static void conn_set(srv_rest *r, rconn *k, int state) {
    if (k == NULL) return;
    pthread_mutex_lock(&r->mu);
    if (k->state != C_REFUSE) {
        double now = mono_s();
        if (state == C_WAIT && k->state != C_WAIT) k->nreq++;
        int moved = state != k->state || state == C_BODY; /* C_BODY: by progress */
        if (moved) st_unlink(r, k);
        if (state != k->state) {
            k->since = k->win_from = now;
            k->got = k->win_got = 0;
        }
        k->state = state;
        k->progress = now;
        if (moved) st_link(r, k);
    }
    pthread_mutex_unlock(&r->mu);
}

/* n more body bytes arrived on k (C_BODY). */
static void conn_body(srv_rest *r, rconn *k, size_t n) {
    if (k == NULL) return;
    pthread_mutex_lock(&r->mu);
    if (k->state == C_BODY) {
        k->got += (long long)n;
        k->progress = mono_s();
        if (k->linked && k->snext != NULL) st_link(r, k); /* the newest progress */
    }
    pthread_mutex_unlock(&r->mu);
}

/* Shuts k's socket down; under r->mu. libmicrohttpd sees the end at its next
 * poll and closes the connection; the descriptor is still k's, because
 * on_connection's CLOSED (which takes r->mu) comes before the close. */
static void conn_cut(srv_rest *r, rconn *k) {
    if (k->cut) return;
    st_unlink(r, k);
    k->cut = 1;
    if (k->counted) {
        k->counted = 0;
        r->nlive--;
    }
    shutdown(k->fd, SHUT_RDWR);
}

/* The connection to close for a new one when REST is full; never one whose
 * call runs. NULL when every one runs. One waiting for its request, then
 * one sending a body, then one whose answer is being sent (a client that
 * does not read it); among those, the one waiting longest (or whose body
 * moved least recently): the head of its byst list. Under r->mu. */
static rconn *conn_victim(srv_rest *r) {
    for (int st = C_WAIT; st <= C_SEND; st++)
        if (r->byst[st] != NULL) return r->byst[st];
    return NULL;
}

/* Tracks every connection (the reaper, the limit). Past the limit a new
 * connection closes the one conn_victim names, or, when every one is
 * running a call, is itself answered 503 once its headers are in. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    srv_rest *r = cls;
    rconn *k = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (k == NULL) return;
        pthread_mutex_lock(&r->mu);
        st_unlink(r, k);
        if (k->prev) k->prev->next = k->next;
        else r->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        if (k->counted) r->nlive--;
        pthread_mutex_unlock(&r->mu);
        free(k);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    k = calloc(1, sizeof *k);
    if (k == NULL || ci == NULL) { /* untracked would escape the limit: closed */
        if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
        free(k);
        *socket_context = NULL;
        return;
    }
    k->fd = ci->connect_fd;
    k->since = k->progress = mono_s();
    pthread_mutex_lock(&r->mu);
    if (r->nlive >= r->max_conns) {
        rconn *v = conn_victim(r);
        if (v != NULL) {
            MS_DEBUG("REST: %d connections (--max_connections): closing one %s for a new one",
                     r->nlive, v->state == C_WAIT   ? "waiting for a request"
                               : v->state == C_BODY ? "sending a body"
                                                    : "not reading its answer");
            conn_cut(r, v);
        }
    }
    if (r->nlive < r->max_conns) {
        k->counted = 1;
        r->nlive++;
        k->state = C_WAIT;
    } else {
        k->state = C_REFUSE;
    }
    k->next = r->conns;
    if (r->conns) r->conns->prev = k;
    r->conns = k;
    st_link(r, k);
    pthread_mutex_unlock(&r->mu);
    *socket_context = k;
}

/* Cuts the connections whose peer has closed its side with nothing left
 * unread: libmicrohttpd's edge-triggered epoll does not see a FIN that came
 * with the last bytes it read, so such a socket would sit in CLOSE-WAIT until
 * the idle timeout (one byte then close: F4; a request then shutdown(SHUT_WR)
 * after its answer). Only connections waiting for a request, sending a body
 * or refused: their request can no longer come in whole. One poll over them,
 * then a peek at those with POLLRDHUP (unread bytes are libmicrohttpd's to
 * read first). Cut at the second tick that finds the peer closed with no
 * progress between: the last bytes may be a whole request libmicrohttpd has
 * read but not yet handed to on_request (a request, then SHUT_WR), which
 * moves progress. Under r->mu, which keeps every k->fd open. */
static void reap_closed_peers(srv_rest *r) {
    size_t n = 0, cap = 0;
    for (rconn *k = r->conns; k; k = k->next) cap++;
    if (cap == 0) return;
    struct pollfd *p = malloc(cap * sizeof *p);
    rconn **ks = malloc(cap * sizeof *ks);
    if (p == NULL || ks == NULL) goto out;
    for (rconn *k = r->conns; k; k = k->next) {
        if (k->cut || (k->state != C_WAIT && k->state != C_BODY && k->state != C_REFUSE))
            continue;
        p[n] = (struct pollfd){.fd = k->fd, .events = POLLRDHUP};
        ks[n++] = k;
    }
    if (n == 0 || poll(p, (nfds_t)n, 0) <= 0) goto out;
    for (size_t i = 0; i < n; i++) {
        if (!(p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
        char c;
        if (recv(ks[i]->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0) continue;
        if (ks[i]->hup_at == ks[i]->progress) conn_cut(r, ks[i]);
        else ks[i]->hup_at = ks[i]->progress;
    }
out:
    free(p);
    free(ks);
}

/* Cuts slow senders: a connection whose first request's headers are not in
 * after read_timeout_s, a later request's not after idle_timeout_s, a body
 * that has not moved for read_timeout_s, a refused connection that sends no
 * headers for read_timeout_s. Calls that run are the call deadline's. */
static void *reaper_main(void *arg) {
    srv_rest *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (r->stopping) break;
        reap_closed_peers(r);
        double now = mono_s();
        for (rconn *k = r->conns; k; k = k->next) {
            double limit, from = k->since;
            if (k->cut) continue;
            if (k->state == C_WAIT) {
                limit = k->nreq == 0 ? r->read_timeout_s : r->idle_timeout_s;
            } else if (k->state == C_BODY) {
                limit = r->read_timeout_s;
                from = k->progress;
                /* a trickle (a byte now and then) would hold its part of
                 * --max_rest_buffered_bytes for as long as it lasts */
                if (limit > 0 && now - k->win_from >= limit) {
                    if (k->got - k->win_got < REST_BODY_MIN_BYTES) {
                        conn_cut(r, k);
                        continue;
                    }
                    k->win_from = now;
                    k->win_got = k->got;
                }
            } else if (k->state == C_REFUSE) {
                limit = r->read_timeout_s > 0 ? r->read_timeout_s : r->idle_timeout_s;
            } else {
                continue;
            }
            if (limit > 0 && now - from > limit) conn_cut(r, k);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Takes n bytes of the bound on buffered bodies; 0 when they do not fit. */
static int buffered_take(srv_rest *r, size_t n) {
    long long cur = atomic_load(&r->buffered);
    do {
        if (cur + (long long)n > r->max_buffered) return 0;
    } while (!atomic_compare_exchange_weak(&r->buffered, &cur, cur + (long long)n));
    return 1;
}

static void body_drop(srv_rest *r, body *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    atomic_fetch_sub(&r->buffered, (long long)b->charged);
    b->charged = 0;
}

/* An answer before the request is read (a refusal): counted as a request,
 * and the connection is closed after it. */
static enum MHD_Result refuse(srv_rest *r, struct MHD_Connection *c, const char *url,
                              const char *method, int code, ms_status st, const char *msg) {
    srv_req rec;
    srv_req_begin(&rec, rest_api_name(url, method, -1), "");
    ms_err_clear();
    srv_rest_reply o = to_reply(error_answer(code, msg), st);
    rec.bytes_out = o.len;
    srv_req_end(&rec, st);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(o.len, o.body, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(o.body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "Connection", "close");
    if (r->cors) MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    (void)version;
    srv_rest *r = cls;
    body *b = *con_cls;
    if (b == NULL) { /* the headers are in */
        b = calloc(1, sizeof *b);
        if (b == NULL) return MHD_NO;
        *con_cls = b;
        rconn *k = conn_of(c);
        if (k != NULL && k->state == C_REFUSE) {
            char msg[200];
            snprintf(msg, sizeof msg, "the server has %d REST connections open, its limit "
                     "(--max_connections), all running calls; try again later", r->max_conns);
            return refuse(r, c, url, method, 503, MS_EBUSY, msg);
        }
        conn_set(r, k, C_BODY);
        if (r->tls_verify && !srv_tls_rest_client_ok(c)) { /* mTLS (docs/security.md) */
            char *t = strdup("{\"error\": \"a client certificate signed by the server's "
                             "custom_ca is required\"}");
            if (t == NULL) return MHD_NO;
            srv_rest_reply o = {MHD_HTTP_FORBIDDEN, MS_EPERM, t, strlen(t), 0, "application/json"};
            return send_reply(r, c, &o);
        }
        /* A declared body that cannot fit now is refused before it is sent;
         * one that never can, for good. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        long long n = cl ? strtoll(cl, NULL, 10) : 0;
        if (n > r->max_buffered && n <= r->app->max_message_bytes) {
            char msg[200];
            snprintf(msg, sizeof msg, "the request body (%lld bytes) is larger than all the REST "
                     "bodies the server holds at once (--max_rest_buffered_bytes=%lld)", n,
                     r->max_buffered);
            return refuse(r, c, url, method, 413, MS_ENOMEM, msg);
        }
        if (n > 0 && n <= r->app->max_message_bytes &&
            n + atomic_load(&r->buffered) > r->max_buffered)
            return refuse(r, c, url, method, 503, MS_EBUSY, buffered_msg(r));
        return MHD_YES;
    }
    if (*data_size > 0) {
        conn_body(r, conn_of(c), *data_size);
        if (!b->too_big && b->len + *data_size > (size_t)r->app->max_message_bytes) {
            b->too_big = 1;
            body_drop(r, b);
        }
        if (!b->too_big && !b->refused && b->len + *data_size + 1 > b->cap) {
            /* Doubling below the mmap threshold; above it realloc moves
             * pages (mremap), not bytes, so a quarter more is as cheap and
             * a body holds little more of the bound than it has sent. */
            size_t need = b->len + *data_size + 1;
            size_t cap = need < MS_MALLOC_MMAP_THRESHOLD ? need * 2 : need + need / 4;
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
            long long declared = cl ? strtoll(cl, NULL, 10) : 0;
            if (declared > 0 && (size_t)declared + 1 >= need && (size_t)declared + 1 < cap)
                cap = (size_t)declared + 1; /* the body fits exactly */
            char *nd = NULL;
            if (buffered_take(r, cap - b->cap)) {
                nd = realloc(b->data, cap);
                if (nd == NULL) atomic_fetch_sub(&r->buffered, (long long)(cap - b->cap));
            }
            if (nd == NULL) { /* past the bound (or out of memory): dropped, 503 */
                b->refused = 1;
                body_drop(r, b);
            } else {
                b->data = nd;
                b->charged += cap - b->cap;
                b->cap = cap;
            }
        }
        if (!b->too_big && !b->refused) {
            memcpy(b->data + b->len, data, *data_size);
            b->len += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    rconn *k = conn_of(c);
    if (b->ran) { /* resumed: the worker's answer */
        b->ran = 0;
        conn_set(r, k, C_SEND);
        return send_reply(r, c, &b->reply);
    }
    conn_set(r, k, C_RUN);
    /* A call that runs a model (POST) on a worker; status, metadata and
     * metrics here, so that probes answer while every worker runs a call. */
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0 && rest_async(r, c, url, method, b))
        return MHD_YES;
    srv_rest_reply o = dispatch(r, c, url, method, b);
    conn_set(r, k, C_SEND);
    return send_reply(r, c, &o);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    srv_rest *r = cls;
    body *b = *con_cls;
    size_t held = b ? b->charged : 0;
    if (b) body_drop(r, b);
    if (b && b->ran) free(b->reply.body); /* resumed, then closed before it was sent */
    free(b);
    /* A large body grew through heap blocks below the mmap threshold before
     * it reached it; their free space at the top of the heap stays resident
     * up to the trim threshold (ms_malloc.h) unless trimmed. A body of a
     * MiB or more costs far more than the trim. */
    if (held >= (size_t)1 << 20) malloc_trim(0);
    *con_cls = NULL;
    conn_set(r, conn_of(c), C_WAIT);
}

static void rest_free(srv_rest *r) {
    pthread_cond_destroy(&r->qcv);
    pthread_mutex_destroy(&r->qmu);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->workers);
    free(r);
}

/* Ends the workers once every queued call has run and its connection is
 * resumed: libmicrohttpd must not be stopped with one suspended. */
static void workers_stop(srv_rest *r) {
    pthread_mutex_lock(&r->qmu);
    r->qstop = 1;
    pthread_cond_broadcast(&r->qcv);
    pthread_mutex_unlock(&r->qmu);
    for (unsigned i = 0; i < r->nworkers; i++) pthread_join(r->workers[i], NULL);
    r->nworkers = 0;
}

ms_status srv_rest_start(srv_app *app, const srv_rest_opts *o, srv_rest **out) {
    srv_rest *r = calloc(1, sizeof *r);
    if (r == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    r->app = app;
    r->cors = o->cors;
    r->call_timeout_ms = o->call_timeout_ms;
    if (o->metrics_path) snprintf(r->metrics_path, sizeof r->metrics_path, "%s", o->metrics_path);
    unsigned threads = o->threads > 0 ? (unsigned)o->threads : 4;
    unsigned timeout_s = o->timeout_ms > 0 ? (unsigned)((o->timeout_ms + 999) / 1000) : 0;
    r->read_timeout_s = o->read_timeout_s > 0 ? o->read_timeout_s : 0;
    r->idle_timeout_s = timeout_s;
    /* The connection limit: --max_connections, else a quarter of the
     * descriptors (the rest for gRPC and model files). */
    r->max_conns = o->max_connections;
    if (r->max_conns <= 0) {
        struct rlimit rl;
        rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
        if (n == RLIM_INFINITY || n > 1 << 20) n = 1 << 20;
        r->max_conns = (int)(n / 4 < 64 ? 64 : n / 4);
    }
    r->max_buffered = o->max_buffered_bytes;
    if (r->max_buffered <= 0) {
        long long mem = ms_memory_limit() / 4;
        long long req = app->max_request_memory_bytes > 0 ? app->max_request_memory_bytes : mem;
        r->max_buffered = req < mem ? req : mem;
        if (r->max_buffered < 16 << 20) r->max_buffered = 16 << 20;
    }
    atomic_init(&r->buffered, 0);
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->qmu, NULL);
    pthread_cond_init(&r->qcv, NULL);
    /* TLS and the connection limit (docs/security.md) */
    struct MHD_OptionItem extra[8];
    int ne = 0;
    /* epoll, not poll: with poll libmicrohttpd 0.9.75 accepts one connection
     * per round of a thread and each round walks all of its descriptors, so
     * a flood of thousands of new connections kept a valid client in the
     * listen queue for seconds; its epoll loop accepts up to ten per round and
     * a round costs what is ready. Its epoll is edge-triggered and misses a
     * FIN that came with the last bytes (a short read counts as drained):
     * the reaper finds those peers (reap_closed_peers). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    if (o->tls != NULL) {
        /* The key and chain come from a callback on every handshake, so that
         * SIGHUP (srv_tls_reload) applies to new connections. */
        gnutls_certificate_retrieve_function2 *cb = NULL;
        ms_status tst = srv_tls_rest_callback(o->tls, &cb);
        if (tst != MS_OK) {
            rest_free(r);
            return tst;
        }
        flags |= MHD_USE_TLS;
        extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)cb};
        if (srv_tls_client_verify(o->tls)) { /* asks for a client certificate */
            extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                  (void *)srv_tls_ca_pem(o->tls)};
            r->tls_verify = 1;
        }
    }
    /* Past lim new clients wait in the listen queue: above ours, with room
     * for the refused and the closing. */
    long long lim = (long long)r->max_conns + r->max_conns / 4 + 16 + threads;
    extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)lim, NULL};
    /* The listen queue as long as the kernel allows (net.core.somaxconn caps
     * it): a burst of new connections waits there to be accepted instead of
     * having its SYNs dropped. */
    extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE, 65535, NULL};
    /* --bind_address, as for gRPC: an IPv4 or IPv6 literal ([::1] too) or a
     * host name; libmicrohttpd binds all of IPv4 without it. */
    struct addrinfo *ai = NULL;
    const char *host = o->bind_address;
    if (host != NULL && host[0] != '\0' && strcmp(host, "0.0.0.0") != 0) {
        char h[256], port[16];
        size_t hl = strlen(host);
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']')
            snprintf(h, sizeof h, "%.*s", (int)(hl - 2), host + 1);
        else
            snprintf(h, sizeof h, "%s", host);
        snprintf(port, sizeof port, "%d", o->port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        int e = getaddrinfo(h, port, &hints, &ai);
        if (e != 0) {
            rest_free(r);
            return ms_errf(MS_EINVAL, "REST: --bind_address=%s: %s", host, gai_strerror(e));
        }
        if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
        extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr};
    }
    extra[ne] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    r->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, r,
                            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT,
                            timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, r,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, r, MHD_OPTION_ARRAY,
                            extra, MHD_OPTION_END);
    if (ai != NULL) freeaddrinfo(ai); /* bound (or failed) by now */
    if (r->d == NULL) {
        rest_free(r);
        return ms_errf(MS_EINVAL, "cannot serve REST on %s:%d (in use?)",
                       host != NULL && host[0] != '\0' ? host : "0.0.0.0", o->port);
    }
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_BIND_PORT);
    r->port = pi ? pi->port : 0;
    /* as many workers as libmicrohttpd threads: the calls that run at once
     * (--rest_api_num_threads), as before they left its threads */
    r->workers = calloc(threads, sizeof *r->workers);
    for (unsigned i = 0; r->workers && i < threads; i++) {
        if (pthread_create(&r->workers[i], NULL, rest_worker_main, r) != 0) break;
        r->nworkers++;
    }
    if (r->nworkers == 0) MS_WARN("REST: no worker threads: calls run on the connection threads");
    r->reaper_started = pthread_create(&r->reaper, NULL, reaper_main, r) == 0;
    if (!r->reaper_started) MS_WARN("REST: no reaper thread: slow senders are not cut");
    char cut[48] = "never cut";
    if (r->read_timeout_s > 0) snprintf(cut, sizeof cut, "cut after %g s", r->read_timeout_s);
    MS_INFO("REST: at most %d connections (--max_connections), %lld bytes of request bodies "
            "held at once (--max_rest_buffered_bytes), slow senders %s "
            "(--rest_read_timeout_seconds)", r->max_conns, r->max_buffered, cut);
    *out = r;
    return MS_OK;
}

int srv_rest_port(const srv_rest *r) {
    return r->port;
}

void srv_rest_stop(srv_rest *r) {
    if (r == NULL) return;
    workers_stop(r); /* later calls run on libmicrohttpd's threads */
    MHD_stop_daemon(r->d); /* closes every connection (on_connection frees them) */
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->reaper_started) pthread_join(r->reaper, NULL);
    rest_free(r);
}
