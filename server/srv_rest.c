/* srv_rest.c - TF Serving REST API over libmicrohttpd.
 *
 * GET  /v1/models/{m}[/versions/{v}|/labels/{l}]           model status
 * GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata  signature_def
 * POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict   row "instances"
 *      or columnar "inputs", {"b64": "..."} for DT_STRING, "signature_name"
 * Errors are {"error": "..."} with TF Serving's codes: 400 bad input or
 * JSON, 404 unknown model/version, 413 body over max_message_bytes, 500
 * otherwise. Tensors are built with the signature's dtype and the shape of
 * the nested lists; sig_run validates everything else. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn_cuda_mem.h"
#include "ms_log.h"
#include "rt_model.h"
#include "sig_signature.h"
#include "srv_batch.h"
#include "srv_manager.h"
#include "srv_metrics.h"
#include "srv_b64.h"
#include "srv_rest.h"
#include "srv_status.h"

struct srv_rest {
    struct MHD_Daemon *d;
    srv_app *app;
    int cors;
    int tls_verify; /* client_verify: a verified client certificate is required */
    char metrics_path[256];
};

/* Per-request body accumulated by the access handler. */
typedef struct body {
    char *data;
    size_t len, cap;
    int too_big;
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
    switch (t->dtype) {
    case RT_DT_FLOAT: ((float *)t->data)[i] = (float)v; break;
    case RT_DT_DOUBLE: ((double *)t->data)[i] = v; break;
    case RT_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case RT_DT_INT64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    case RT_DT_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case RT_DT_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case RT_DT_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case RT_DT_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case RT_DT_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case RT_DT_UINT64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case RT_DT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default:
        return ms_errf(MS_EINVAL, "input \"%s\": %s cannot be given in JSON", f->key,
                       rt_dtype_name(t->dtype));
    }
    return MS_OK;
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

/* Trailing dimensions the SignatureDef gives for `ti` beyond rank `rank`,
 * when every one of them is statically 1 (0 otherwise). */
static int unit_tail(const Tensorflow__TensorInfo *ti, int rank) {
    if (ti == NULL || ti->tensor_shape == NULL || ti->tensor_shape->unknown_rank) return 0;
    int r = (int)ti->tensor_shape->n_dim;
    if (r <= rank || r > RT_MAX_RANK) return 0;
    for (int d = rank; d < r; d++)
        if (ti->tensor_shape->dim[d]->size != 1) return 0;
    return r - rank;
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
    *added = s.rank > 0 ? unit_tail(ti, s.rank) : 0;
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
    case RT_DT_STRING: {
        const rt_str *s = &rt_tensor_strs(t)[i];
        int text = 1;
        for (uint64_t k = 0; k < s->len; k++)
            if (s->data[k] < 0x20 || s->data[k] >= 0x7f) text = 0;
        if (text) {
            char *c = malloc(s->len + 1);
            if (c == NULL) return NULL;
            memcpy(c, s->data, s->len);
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
    default: return NULL;
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
    if (drop > 0 && rank > drop && unit_tail(sig_output_info(sd, o->key), rank - drop) == drop) {
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
        for (const cJSON *row = inst->child; row; row = row->next) {
            if (!cJSON_IsObject(row)) {
                cJSON_Delete(o);
                return ms_errf(MS_EINVAL, "\"instances\": every row must be an object when the "
                                          "first is");
            }
            for (const cJSON *f = row->child; f; f = f->next) {
                cJSON *col = cJSON_GetObjectItemCaseSensitive(o, f->string);
                if (col == NULL) {
                    if (row != inst->child) {
                        cJSON_Delete(o);
                        return ms_errf(MS_EINVAL, "\"instances\": key \"%s\" is not in the first "
                                                  "row", f->string);
                    }
                    col = cJSON_AddArrayToObject(o, f->string);
                }
                cJSON_AddItemReferenceToArray(col, (cJSON *)f);
            }
        }
        int n = cJSON_GetArraySize(inst);
        for (const cJSON *c = o->child; c; c = c->next)
            if (cJSON_GetArraySize(c) != n) {
                cJSON_Delete(o);
                return ms_errf(MS_EINVAL, "\"instances\": key \"%s\" is in %d of %d rows",
                               c->string, cJSON_GetArraySize(c), n);
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
                           ms_status *status, srv_req *rec);

typedef struct predict_job {
    srv_app *app;
    const target *tg;
    const body *b;
    int64_t *version;
    ms_status *st;
    srv_req *rec;
    answer a;
} predict_job;

static void predict_job_run(void *arg) {
    predict_job *j = arg;
    j->a = predict_json(j->app, j->tg, j->b, j->version, j->st, j->rec);
}

/* :predict on a gRPC worker through the model's queue (fair with gRPC calls;
 * 503 at once when the queue is full). */
static answer do_predict(srv_app *app, const target *tg, const body *b, int64_t *version,
                         ms_status *st, srv_req *rec) {
    predict_job j = {app, tg, b, version, st, rec, {0, NULL}};
    ms_status qst = app->server ? srv_server_run_job(app->server, tg->name, predict_job_run, &j)
                                : (predict_job_run(&j), MS_OK);
    if (qst != MS_OK) {
        *st = qst;
        return status_error(qst);
    }
    return j.a;
}

static answer predict_json(srv_app *app, const target *tg, const body *b, int64_t *version,
                           ms_status *status, srv_req *rec) {
    answer a = {0};
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
    ms_budget budget; /* --max_request_memory_bytes, as for gRPC */
    ms_budget_init(&budget, (uint64_t)(app->max_request_memory_bytes > 0
                                           ? app->max_request_memory_bytes
                                           : 0));
    rt_run_opts opts = {.budget = &budget};
    st = srv_batch_run(app->batcher, sv.model, tg->name, sv.version, sig_key, in, nin, NULL, 0,
                       &opts, &outs, &nouts);
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    if (st != MS_OK) goto done;
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

/* :classify / :regress: the model is resolved (404 lists what exists), then
 * 501 until tf.Example parsing lands, as the gRPC Classify / Regress. */
static answer do_example_api(srv_app *app, const target *tg, const char *what) {
    srv_servable sv = {0};
    ms_status st = srv_manager_get(app->mgr, tg->name, tg->version,
                                   tg->label[0] ? tg->label : NULL, &sv);
    if (st != MS_OK) return status_error(st);
    srv_servable_release(&sv);
    char msg[200];
    snprintf(msg, sizeof msg, "%s is not implemented yet (it needs tf.Example parsing); use "
                              ":predict with the signature's inputs instead", what);
    return error_answer(501, msg);
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
    const char *hl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (srv_rest_v2(r->app, method, url, hl, b->data, b->len, rec, &v2) == 0) return v2;
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
    if (kind == K_PREDICT) {
        int64_t version = 0;
        ms_status st = MS_OK;
        answer a = do_predict(r->app, tg, b, &version, &st, rec);
        srv_req_model(rec, NULL, version, NULL);
        return to_reply(a, st);
    }
    answer a = kind == K_STATUS     ? do_status(r->app, tg)
               : kind == K_METADATA ? do_metadata(r->app, tg)
               : kind == K_CLASSIFY ? do_example_api(r->app, tg, "Classify")
                                    : do_example_api(r->app, tg, "Regress");
    return to_reply(a, status_of(a.code));
}

/* One request: route it, send the reply, one record (metrics + log line). */
static enum MHD_Result dispatch(srv_rest *r, struct MHD_Connection *c, const char *url,
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
    return send_reply(r, c, &o);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    (void)version;
    srv_rest *r = cls;
    body *b = *con_cls;
    if (b == NULL) {
        b = calloc(1, sizeof *b);
        if (b == NULL) return MHD_NO;
        *con_cls = b;
        if (r->tls_verify && !srv_tls_rest_client_ok(c)) { /* mTLS (docs/security.md) */
            char *t = strdup("{\"error\": \"a client certificate signed by the server's "
                             "custom_ca is required\"}");
            if (t == NULL) return MHD_NO;
            srv_rest_reply o = {MHD_HTTP_FORBIDDEN, MS_EPERM, t, strlen(t), 0, "application/json"};
            return send_reply(r, c, &o);
        }
        return MHD_YES;
    }
    if (*data_size > 0) {
        if (!b->too_big && b->len + *data_size > (size_t)r->app->max_message_bytes) {
            b->too_big = 1;
            free(b->data);
            b->data = NULL;
            b->len = b->cap = 0;
        }
        if (!b->too_big) {
            if (b->len + *data_size + 1 > b->cap) {
                size_t cap = (b->len + *data_size + 1) * 2;
                char *nd = realloc(b->data, cap);
                if (nd == NULL) return MHD_NO;
                b->data = nd;
                b->cap = cap;
            }
            memcpy(b->data + b->len, data, *data_size);
            b->len += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    return dispatch(r, c, url, method, b);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    body *b = *con_cls;
    if (b) free(b->data);
    free(b);
    *con_cls = NULL;
}

ms_status srv_rest_start(srv_app *app, const srv_rest_opts *o, srv_rest **out) {
    srv_rest *r = calloc(1, sizeof *r);
    if (r == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    r->app = app;
    r->cors = o->cors;
    if (o->metrics_path) snprintf(r->metrics_path, sizeof r->metrics_path, "%s", o->metrics_path);
    unsigned threads = o->threads > 0 ? (unsigned)o->threads : 4;
    unsigned timeout_s = o->timeout_ms > 0 ? (unsigned)((o->timeout_ms + 999) / 1000) : 0;
    /* TLS and the connection limit (docs/security.md) */
    struct MHD_OptionItem extra[6];
    int ne = 0;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (o->tls != NULL) {
        flags |= MHD_USE_TLS;
        extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
                                              (void *)srv_tls_key_pem(o->tls)};
        extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                              (void *)srv_tls_cert_pem(o->tls)};
        if (srv_tls_client_verify(o->tls)) {
            extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                  (void *)srv_tls_ca_pem(o->tls)};
            r->tls_verify = 1;
        }
    }
    if (o->max_connections > 0)
        extra[ne++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                              (intptr_t)o->max_connections, NULL};
    extra[ne] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    r->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, r,
                            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT,
                            timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                            MHD_OPTION_ARRAY, extra, MHD_OPTION_END);
    if (r->d == NULL) {
        free(r);
        return ms_errf(MS_EINVAL, "cannot serve REST on port %d (in use?)", o->port);
    }
    *out = r;
    return MS_OK;
}

int srv_rest_port(const srv_rest *r) {
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void srv_rest_stop(srv_rest *r) {
    if (r == NULL) return;
    MHD_stop_daemon(r->d);
    free(r);
}
