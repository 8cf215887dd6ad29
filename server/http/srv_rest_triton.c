/* srv_rest_triton.c - Triton's REST extensions, in the JSON of Triton's
 * protocol documents (model_configuration, statistics, model_repository):
 *
 * GET  /v2/models/stats                              every model's statistics
 * GET  /v2/models/{m}[/versions/{v}]/stats           one model's
 * GET  /v2/models/{m}[/versions/{v}]/config          its ModelConfig as JSON
 * POST /v2/repository/index        {"ready": bool}?  the repository index
 * POST /v2/repository/models/{m}/load | /unload      (admin gate, srv_admin.h)
 *
 * As for the rest of /v2 (srv_rest_v2.c), each request becomes the gRPC
 * message, the gRPC handler (srv_triton.c) answers, and its answer is
 * written back as JSON, so both APIs check and answer the same way. The
 * config JSON follows protobuf's JSON mapping with the proto field names and
 * int64 values as numbers, as Triton writes it. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.pb-c.h"
#include "srv_app.h"
#include "srv_metrics.h"
#include "srv_rest_v2.h"

/* A gRPC handler's answer to req, unpacked with desc (NULL on failure, the
 * status in *st). */
static ProtobufCMessage *ask(srv_app *app, ms_status (*fn)(void *, srv_call *, const uint8_t *,
                                                          size_t, srv_bytes *),
                             const ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
                             ms_status *st) {
    srv_bytes packed = {0}, resp = {0};
    ProtobufCMessage *m = NULL;
    ms_err_clear();
    *st = srv_pack(req, &packed);
    if (*st == MS_OK) *st = fn(app, NULL, packed.data, packed.len, &resp);
    if (*st == MS_OK) {
        m = protobuf_c_message_unpack(desc, NULL, resp.len, resp.data);
        if (m == NULL) *st = ms_errf(MS_EINTERNAL, "cannot read back the %s", desc->name);
    }
    free(packed.data);
    free(resp.data);
    return m;
}

static cJSON *dims_json(const int64_t *d, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d[i]));
    return a;
}

static const char *enum_name(const ProtobufCEnumDescriptor *d, int v) {
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    return ev ? ev->name : "";
}

static cJSON *config_json(const Inference__ModelConfig *mc) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", mc->name);
    cJSON_AddStringToObject(j, "platform", mc->platform);
    cJSON_AddStringToObject(j, "backend", mc->backend);
    const Inference__ModelVersionPolicy *vp = mc->version_policy;
    cJSON *pol = cJSON_AddObjectToObject(j, "version_policy");
    if (vp && vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL) {
        cJSON_AddObjectToObject(pol, "all");
    } else if (vp &&
               vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC) {
        cJSON *sp = cJSON_AddObjectToObject(pol, "specific");
        cJSON_AddItemToObject(sp, "versions", dims_json(vp->specific->versions,
                                                        vp->specific->n_versions));
    } else if (vp && vp->latest) {
        cJSON *l = cJSON_AddObjectToObject(pol, "latest");
        cJSON_AddNumberToObject(l, "num_versions", vp->latest->num_versions);
    }
    cJSON_AddNumberToObject(j, "max_batch_size", mc->max_batch_size);
    cJSON *in = cJSON_AddArrayToObject(j, "input");
    for (size_t i = 0; i < mc->n_input; i++) {
        const Inference__ModelInput *x = mc->input[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->name);
        cJSON_AddStringToObject(o, "data_type",
                                enum_name(&inference__data_type__descriptor, x->data_type));
        cJSON_AddStringToObject(o, "format",
                                enum_name(&inference__model_input__format__descriptor, x->format));
        cJSON_AddItemToObject(o, "dims", dims_json(x->dims, x->n_dims));
        cJSON_AddBoolToObject(o, "is_shape_tensor", x->is_shape_tensor);
        cJSON_AddBoolToObject(o, "allow_ragged_batch", x->allow_ragged_batch);
        cJSON_AddBoolToObject(o, "optional", x->optional);
        cJSON_AddItemToArray(in, o);
    }
    cJSON *out = cJSON_AddArrayToObject(j, "output");
    for (size_t i = 0; i < mc->n_output; i++) {
        const Inference__ModelOutput *x = mc->output[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->name);
        cJSON_AddStringToObject(o, "data_type",
                                enum_name(&inference__data_type__descriptor, x->data_type));
        cJSON_AddItemToObject(o, "dims", dims_json(x->dims, x->n_dims));
        cJSON_AddStringToObject(o, "label_filename", x->label_filename);
        cJSON_AddBoolToObject(o, "is_shape_tensor", x->is_shape_tensor);
        cJSON_AddItemToArray(out, o);
    }
    return j;
}

static void model_config(srv_app *app, const char *model, const char *version,
                         srv_rest_reply *o) {
    Inference__ModelConfigRequest rq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    rq.name = (char *)model;
    rq.version = (char *)version;
    ms_status st;
    Inference__ModelConfigResponse *rs = (Inference__ModelConfigResponse *)ask(
        app, srv_triton_model_config, &rq.base, &inference__model_config_response__descriptor, &st);
    if (rs == NULL || rs->config == NULL) {
        srv_rest_v2_status_error(o, st != MS_OK ? st : ms_errf(MS_EINTERNAL, "no config"));
    } else {
        srv_rest_v2_json(o, 200, MS_OK, config_json(rs->config));
    }
    if (rs) inference__model_config_response__free_unpacked(rs, NULL);
}

/* {"count": n, "ns": t}; a missing duration reads as zero. */
static void add_duration(cJSON *to, const char *key, const Inference__StatisticDuration *d) {
    cJSON *o = cJSON_AddObjectToObject(to, key);
    cJSON_AddNumberToObject(o, "count", d ? (double)d->count : 0);
    cJSON_AddNumberToObject(o, "ns", d ? (double)d->ns : 0);
}

static void model_stats(srv_app *app, const char *model, const char *version, srv_rest_reply *o) {
    Inference__ModelStatisticsRequest rq = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    rq.name = (char *)model;
    rq.version = (char *)version;
    ms_status st;
    Inference__ModelStatisticsResponse *rs = (Inference__ModelStatisticsResponse *)ask(
        app, srv_triton_model_statistics, &rq.base,
        &inference__model_statistics_response__descriptor, &st);
    if (rs == NULL) {
        srv_rest_v2_status_error(o, st);
        return;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON *a = cJSON_AddArrayToObject(j, "model_stats");
    for (size_t i = 0; i < rs->n_model_stats; i++) {
        const Inference__ModelStatistics *m = rs->model_stats[i];
        const Inference__InferStatistics *is = m->inference_stats;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", m->name);
        cJSON_AddStringToObject(e, "version", m->version);
        cJSON_AddNumberToObject(e, "last_inference", (double)m->last_inference);
        cJSON_AddNumberToObject(e, "inference_count", (double)m->inference_count);
        cJSON_AddNumberToObject(e, "execution_count", (double)m->execution_count);
        cJSON *s = cJSON_AddObjectToObject(e, "inference_stats");
        add_duration(s, "success", is ? is->success : NULL);
        add_duration(s, "fail", is ? is->fail : NULL);
        add_duration(s, "queue", is ? is->queue : NULL);
        add_duration(s, "compute_input", is ? is->compute_input : NULL);
        add_duration(s, "compute_infer", is ? is->compute_infer : NULL);
        add_duration(s, "compute_output", is ? is->compute_output : NULL);
        add_duration(s, "cache_hit", is ? is->cache_hit : NULL);
        add_duration(s, "cache_miss", is ? is->cache_miss : NULL);
        cJSON_AddArrayToObject(e, "batch_stats");
        cJSON_AddItemToArray(a, e);
    }
    inference__model_statistics_response__free_unpacked(rs, NULL);
    srv_rest_v2_json(o, 200, MS_OK, j);
}

/* The optional JSON body of the repository calls: NULL body or an object;
 * *bad when it is something else. */
static cJSON *body_object(const char *data, size_t len, int *bad) {
    *bad = 0;
    size_t sp = 0;
    while (data != NULL && sp < len && strchr(" \t\r\n", data[sp]) != NULL)
        sp++;
    if (data == NULL || sp == len) return NULL;
    cJSON *j = cJSON_ParseWithLength(data, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *bad = 1;
        return NULL;
    }
    return j;
}

static void repository_index(srv_app *app, const char *data, size_t len, srv_rest_reply *o) {
    int bad;
    cJSON *b = body_object(data, len, &bad);
    const cJSON *ready = b ? cJSON_GetObjectItemCaseSensitive(b, "ready") : NULL;
    if (bad || (ready != NULL && !cJSON_IsBool(ready))) {
        cJSON_Delete(b);
        srv_rest_v2_status_error(o, ms_errf(MS_EINVAL, "the body must be empty or a JSON "
                                                       "object such as {\"ready\": true}"));
        return;
    }
    Inference__RepositoryIndexRequest rq = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
    rq.ready = cJSON_IsTrue(ready);
    cJSON_Delete(b);
    ms_status st;
    Inference__RepositoryIndexResponse *rs = (Inference__RepositoryIndexResponse *)ask(
        app, srv_triton_repository_index, &rq.base,
        &inference__repository_index_response__descriptor, &st);
    if (rs == NULL) {
        srv_rest_v2_status_error(o, st);
        return;
    }
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < rs->n_models; i++) {
        const Inference__RepositoryIndexResponse__ModelIndex *m = rs->models[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", m->name);
        if (m->version[0]) cJSON_AddStringToObject(e, "version", m->version);
        cJSON_AddStringToObject(e, "state", m->state);
        if (m->reason[0]) cJSON_AddStringToObject(e, "reason", m->reason);
        cJSON_AddItemToArray(a, e);
    }
    inference__repository_index_response__free_unpacked(rs, NULL);
    srv_rest_v2_json(o, 200, MS_OK, a);
}

/* POST /v2/repository/models/{m}/load|unload, body {"parameters": {...}}?:
 * the parameters go into the gRPC request, which refuses what it cannot
 * honour. */
static void repository_change(srv_app *app, int load, const char *model, const char *data,
                              size_t len, const srv_req *rec, srv_rest_reply *o) {
    int bad;
    cJSON *b = body_object(data, len, &bad);
    const cJSON *params = b ? cJSON_GetObjectItemCaseSensitive(b, "parameters") : NULL;
    if (bad || (params != NULL && !cJSON_IsObject(params))) {
        cJSON_Delete(b);
        srv_rest_v2_status_error(o, ms_errf(MS_EINVAL, "the body must be empty or a JSON object "
                                                       "with \"parameters\": {...}"));
        return;
    }
    int np = params ? cJSON_GetArraySize(params) : 0;
    Inference__RepositoryModelLoadRequest__ParametersEntry *pe = calloc((size_t)np + 1, sizeof *pe);
    Inference__RepositoryModelLoadRequest__ParametersEntry **pp = calloc((size_t)np + 1, sizeof *pp);
    Inference__ModelRepositoryParameter *pv = calloc((size_t)np + 1, sizeof *pv);
    ms_status st = pe && pp && pv ? MS_OK : ms_errf(MS_ENOMEM, "out of memory");
    int k = 0;
    for (const cJSON *p = params ? params->child : NULL; st == MS_OK && p; p = p->next, k++) {
        Inference__RepositoryModelLoadRequest__ParametersEntry e0 =
            INFERENCE__REPOSITORY_MODEL_LOAD_REQUEST__PARAMETERS_ENTRY__INIT;
        Inference__ModelRepositoryParameter v0 = INFERENCE__MODEL_REPOSITORY_PARAMETER__INIT;
        pe[k] = e0;
        pv[k] = v0;
        if (cJSON_IsBool(p)) {
            pv[k].parameter_choice_case =
                INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
            pv[k].bool_param = cJSON_IsTrue(p);
        } else if (cJSON_IsString(p)) {
            pv[k].parameter_choice_case =
                INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
            pv[k].string_param = p->valuestring;
        } else if (cJSON_IsNumber(p)) {
            pv[k].parameter_choice_case =
                INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
            pv[k].int64_param = (int64_t)p->valuedouble;
        } else {
            st = ms_errf(MS_EINVAL, "parameter \"%s\" must be a bool, number or string", p->string);
            break;
        }
        pe[k].key = p->string;
        pe[k].value = &pv[k];
        pp[k] = &pe[k];
    }
    Inference__RepositoryModelLoadRequest rq = INFERENCE__REPOSITORY_MODEL_LOAD_REQUEST__INIT;
    rq.model_name = (char *)model;
    rq.n_parameters = (size_t)k;
    rq.parameters = pp;
    srv_bytes packed = {0};
    if (st == MS_OK) st = srv_pack(&rq.base, &packed);
    if (st == MS_OK)
        st = srv_triton_rest_repository(app, load, rec ? rec->peer : NULL, packed.data,
                                        packed.len);
    free(packed.data);
    free(pe);
    free(pp);
    free(pv);
    cJSON_Delete(b);
    if (st != MS_OK) {
        srv_rest_v2_status_error(o, st);
        return;
    }
    o->code = 200; /* Triton answers both with an empty body */
    o->st = MS_OK;
    o->type = "application/json";
    o->body = strdup("");
    o->len = 0;
    if (o->body == NULL) srv_rest_v2_status_error(o, ms_errf(MS_ENOMEM, "out of memory"));
}

/* Sets a 405 naming the method to use; returns 0. */
static int wrong_method(srv_rest_reply *o, const char *msg) {
    srv_rest_v2_status_error(o, ms_errf(MS_EINVAL, "%s", msg));
    o->code = 405;
    return 0;
}

int srv_rest_triton(srv_app *app, const char *method, const char *url, const char *data,
                    size_t len, srv_req *rec, srv_rest_reply *out) {
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/v2/models/stats") == 0) {
        if (!get) return wrong_method(out, "use GET for statistics");
        model_stats(app, "", "", out);
        return 0;
    }
    if (strcmp(url, "/v2/repository/index") == 0) {
        if (!post) return wrong_method(out, "use POST for /v2/repository/index");
        repository_index(app, data, len, out);
        return 0;
    }
    char model[256], version[24] = "";
    const char *p;
    if (strncmp(url, "/v2/repository/models/", 22) == 0) {
        if ((p = srv_rest_v2_model_path(url + 22, model, sizeof model, NULL, 0)) == NULL) return -1;
        int load = strcmp(p, "/load") == 0;
        if (!load && strcmp(p, "/unload") != 0) return -1;
        if (!post) return wrong_method(out, "use POST to load or unload a model");
        srv_req_model(rec, model, 0, NULL);
        repository_change(app, load, model, data, len, rec, out);
        return 0;
    }
    if (strncmp(url, "/v2/models/", 11) != 0) return -1;
    p = srv_rest_v2_model_path(url + 11, model, sizeof model, version, sizeof version);
    if (p == NULL) return -1;
    int config = strcmp(p, "/config") == 0;
    if (!config && strcmp(p, "/stats") != 0) return -1;
    if (!get) return wrong_method(out, config ? "use GET for config" : "use GET for statistics");
    srv_req_model(rec, model, strtoll(version, NULL, 10), NULL);
    if (config)
        model_config(app, model, version, out);
    else
        model_stats(app, model, version, out);
    return 0;
}
