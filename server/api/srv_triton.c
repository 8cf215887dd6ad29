/* srv_triton.c - Triton's extensions of inference.GRPCInferenceService:
 * model configuration, statistics and the model repository (index, load,
 * unload), from what the manager, the signature and srv_stats know
 * (docs/kserve.md, "Triton extensions", says which fields are filled).
 *
 * Load and unload change what is served, so they pass the gate of
 * HandleReloadConfigRequest (srv_admin.h): --enable_reload_config_rpc, and a
 * loopback peer or an admin client certificate. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.pb-c.h"
#include "ms_log.h"
#include "sig_signature.h"
#include "srv_app.h"
#include "srv_kserve.h"
#include "srv_stats.h"

/* Triton's DataType of a dtype (model_config.proto); TYPE_INVALID when none. */
static Inference__DataType triton_type(rt_dtype dt) {
    /* clang-format off */
    static const struct { rt_dtype dt; Inference__DataType t; } map[] = {
        {RT_DT_BOOL, INFERENCE__DATA_TYPE__TYPE_BOOL},     {RT_DT_UINT8, INFERENCE__DATA_TYPE__TYPE_UINT8},
        {RT_DT_UINT16, INFERENCE__DATA_TYPE__TYPE_UINT16}, {RT_DT_UINT32, INFERENCE__DATA_TYPE__TYPE_UINT32},
        {RT_DT_UINT64, INFERENCE__DATA_TYPE__TYPE_UINT64}, {RT_DT_INT8, INFERENCE__DATA_TYPE__TYPE_INT8},
        {RT_DT_INT16, INFERENCE__DATA_TYPE__TYPE_INT16},   {RT_DT_INT32, INFERENCE__DATA_TYPE__TYPE_INT32},
        {RT_DT_INT64, INFERENCE__DATA_TYPE__TYPE_INT64},   {RT_DT_HALF, INFERENCE__DATA_TYPE__TYPE_FP16},
        {RT_DT_FLOAT, INFERENCE__DATA_TYPE__TYPE_FP32},    {RT_DT_DOUBLE, INFERENCE__DATA_TYPE__TYPE_FP64},
        {RT_DT_STRING, INFERENCE__DATA_TYPE__TYPE_STRING}, {RT_DT_BFLOAT16, INFERENCE__DATA_TYPE__TYPE_BF16},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].dt == dt) return map[i].t;
    return INFERENCE__DATA_TYPE__TYPE_INVALID;
}

/* ------------------------------------------------------------------------ */
/* ModelConfig                                                               */
/* ------------------------------------------------------------------------ */

/* The dims of a TensorInfo (-1 for an unknown size; none for an unknown
 * rank, which Triton's config cannot say) into dims[RT_MAX_RANK]. */
static size_t tensor_dims(const Tensorflow__TensorInfo *ti, int64_t *dims) {
    if (ti->tensor_shape == NULL || ti->tensor_shape->unknown_rank) return 0;
    size_t nd = ti->tensor_shape->n_dim;
    if (nd > RT_MAX_RANK) nd = RT_MAX_RANK;
    for (size_t d = 0; d < nd; d++)
        dims[d] = ti->tensor_shape->dim[d]->size < 0 ? -1 : ti->tensor_shape->dim[d]->size;
    return nd;
}

/* What one ModelConfig holds besides the signature (freed by config_free). */
typedef struct config_mem {
    Inference__ModelInput *in, **pin;
    Inference__ModelOutput *out, **pout;
    int64_t (*din)[RT_MAX_RANK], (*dout)[RT_MAX_RANK];
} config_mem;

static void config_free(config_mem *m) {
    free(m->in);
    free(m->pin);
    free(m->out);
    free(m->pout);
    free(m->din);
    free(m->dout);
}

static ms_status config_tensors(const Tensorflow__SignatureDef *sd, Inference__ModelConfig *mc,
                                config_mem *m) {
    size_t ni = sd->n_inputs, no = sd->n_outputs;
    m->in = calloc(ni + 1, sizeof(*m->in));
    m->pin = calloc(ni + 1, sizeof(*m->pin));
    m->out = calloc(no + 1, sizeof(*m->out));
    m->pout = calloc(no + 1, sizeof(*m->pout));
    m->din = calloc(ni + 1, sizeof(*m->din));
    m->dout = calloc(no + 1, sizeof(*m->dout));
    if (!m->in || !m->pin || !m->out || !m->pout || !m->din || !m->dout)
        return ms_errf(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < ni; i++) {
        const Tensorflow__TensorInfo *ti = sd->inputs[i]->value;
        Inference__ModelInput mi = INFERENCE__MODEL_INPUT__INIT;
        mi.name = sd->inputs[i]->key;
        mi.data_type = triton_type(rt_dtype_base((int)ti->dtype));
        mi.n_dims = tensor_dims(ti, m->din[i]);
        mi.dims = m->din[i];
        m->in[i] = mi;
        m->pin[i] = &m->in[i];
    }
    for (size_t i = 0; i < no; i++) {
        const Tensorflow__TensorInfo *ti = sd->outputs[i]->value;
        Inference__ModelOutput mo = INFERENCE__MODEL_OUTPUT__INIT;
        mo.name = sd->outputs[i]->key;
        mo.data_type = triton_type(rt_dtype_base((int)ti->dtype));
        mo.n_dims = tensor_dims(ti, m->dout[i]);
        mo.dims = m->dout[i];
        m->out[i] = mo;
        m->pout[i] = &m->out[i];
    }
    mc->n_input = ni;
    mc->input = m->pin;
    mc->n_output = no;
    mc->output = m->pout;
    return MS_OK;
}

ms_status srv_triton_model_config(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                  srv_bytes *out) {
    srv_app *app = appv;
    srv_servable sv = {0};
    srv_model_config cfg = {0};
    config_mem mem = {0};
    int64_t version;
    Inference__ModelConfigRequest *rq = inference__model_config_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ModelConfigRequest (%zu bytes)", n);
    ms_status st = srv_kserve_parse_version(rq->version, &version);
    if (st != MS_OK) goto done;
    srv_req_model(srv_call_req(c), rq->name, version, NULL);
    if ((st = srv_manager_get(app->mgr, rq->name, version, NULL, &sv)) != MS_OK) goto done;
    srv_req_model(srv_call_req(c), NULL, sv.version, NULL);
    if ((st = srv_manager_model_config(app->mgr, rq->name, &cfg)) != MS_OK) goto done;
    const Tensorflow__SignatureDef *sd = NULL;
    if ((st = sig_find(rt_model_meta_graph(sv.model), NULL, &sd)) != MS_OK) goto done;

    Inference__ModelConfig mc = INFERENCE__MODEL_CONFIG__INIT;
    Inference__ModelVersionPolicy vp = INFERENCE__MODEL_VERSION_POLICY__INIT;
    Inference__ModelVersionPolicy__Latest latest = INFERENCE__MODEL_VERSION_POLICY__LATEST__INIT;
    Inference__ModelVersionPolicy__All all = INFERENCE__MODEL_VERSION_POLICY__ALL__INIT;
    Inference__ModelVersionPolicy__Specific spec = INFERENCE__MODEL_VERSION_POLICY__SPECIFIC__INIT;
    if (cfg.policy == SRV_POLICY_ALL) {
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL;
        vp.all = &all;
    } else if (cfg.policy == SRV_POLICY_SPECIFIC) {
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC;
        spec.n_versions = (size_t)cfg.nversions;
        spec.versions = cfg.versions;
        vp.specific = &spec;
    } else {
        vp.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
        latest.num_versions = cfg.num_versions > 0 ? cfg.num_versions : 1;
        vp.latest = &latest;
    }
    mc.name = rq->name;
    mc.platform = (char *)srv_kserve_platform(sv.model);
    mc.version_policy = &vp;
    mc.max_batch_size = 0; /* dims are the signature's whole shapes, batch dimension included */
    if ((st = config_tensors(sd, &mc, &mem)) != MS_OK) goto done;
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = &mc;
    st = srv_pack(&r.base, out);
done:
    config_free(&mem);
    srv_model_config_clear(&cfg);
    srv_servable_release(&sv);
    inference__model_config_request__free_unpacked(rq, NULL);
    return st;
}

/* ------------------------------------------------------------------------ */
/* ModelStatistics                                                           */
/* ------------------------------------------------------------------------ */

ms_status srv_triton_model_statistics(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                      srv_bytes *out) {
    srv_app *app = appv;
    srv_model_stats *s = NULL;
    int ns = 0;
    int64_t version;
    Inference__ModelStatistics *ms = NULL, **pms = NULL;
    Inference__InferStatistics *is = NULL;
    Inference__StatisticDuration(*d)[8] = NULL;
    char(*vstr)[24] = NULL;
    Inference__ModelStatisticsRequest *rq =
        inference__model_statistics_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ModelStatisticsRequest (%zu bytes)", n);
    ms_status st = srv_kserve_parse_version(rq->version, &version);
    if (st != MS_OK) goto done;
    int one = rq->name != NULL && rq->name[0] != '\0';
    if (one && strlen(rq->name) >= sizeof s->model) {
        /* the request record (srv_req) keeps as much of a name, and counts by it */
        st = ms_errf(MS_ENOTSUP, "statistics are kept for model names of up to %zu bytes",
                     sizeof s->model - 1);
        goto done;
    }
    if (one) {
        srv_req_model(srv_call_req(c), rq->name, version, NULL);
        srv_model_config cfg = {0}; /* an unknown model: NOT_FOUND naming those served */
        if ((st = srv_manager_model_config(app->mgr, rq->name, &cfg)) != MS_OK) goto done;
        srv_model_config_clear(&cfg);
    }
    if ((st = srv_stats_list(one ? rq->name : NULL, version, &s, &ns)) != MS_OK) goto done;
    if (one && ns == 0) {
        if (version > 0)
            st = ms_errf(MS_ENOTFOUND, "model %s has no loaded version %" PRId64, rq->name,
                         version);
        else
            st = ms_errf(MS_ENOTFOUND, "model %s has no loaded version", rq->name);
        goto done;
    }
    size_t k = (size_t)ns;
    ms = calloc(k + 1, sizeof(*ms));
    pms = calloc(k + 1, sizeof(*pms));
    is = calloc(k + 1, sizeof(*is));
    d = calloc(k + 1, sizeof(*d));
    vstr = calloc(k + 1, sizeof(*vstr));
    if (!ms || !pms || !is || !d || !vstr) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < k; i++) {
        const srv_stat_dur *src[8] = {&s[i].success,       &s[i].fail,          &s[i].queue,
                                      &s[i].compute_input, &s[i].compute_infer, &s[i].compute_output,
                                      NULL,                NULL}; /* no response cache */
        for (int j = 0; j < 8; j++) {
            Inference__StatisticDuration sd0 = INFERENCE__STATISTIC_DURATION__INIT;
            d[i][j] = sd0;
            if (src[j] != NULL) {
                d[i][j].count = src[j]->count;
                d[i][j].ns = src[j]->ns;
            }
        }
        Inference__InferStatistics is0 = INFERENCE__INFER_STATISTICS__INIT;
        is[i] = is0;
        is[i].success = &d[i][0];
        is[i].fail = &d[i][1];
        is[i].queue = &d[i][2];
        is[i].compute_input = &d[i][3];
        is[i].compute_infer = &d[i][4];
        is[i].compute_output = &d[i][5];
        is[i].cache_hit = &d[i][6];
        is[i].cache_miss = &d[i][7];
        Inference__ModelStatistics ms0 = INFERENCE__MODEL_STATISTICS__INIT;
        ms[i] = ms0;
        snprintf(vstr[i], sizeof vstr[i], "%" PRId64, s[i].version);
        ms[i].name = s[i].model;
        ms[i].version = vstr[i];
        ms[i].last_inference = s[i].last_inference_ms;
        ms[i].inference_count = s[i].inference_count;
        ms[i].execution_count = s[i].execution_count;
        ms[i].inference_stats = &is[i];
        pms[i] = &ms[i];
    }
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    r.n_model_stats = k;
    r.model_stats = pms;
    st = srv_pack(&r.base, out);
done:
    free(ms);
    free(pms);
    free(is);
    free(d);
    free(vstr);
    free(s);
    inference__model_statistics_request__free_unpacked(rq, NULL);
    return st;
}

/* ------------------------------------------------------------------------ */
/* RepositoryIndex                                                           */
/* ------------------------------------------------------------------------ */

/* Triton's state words for a version's state, and the reason it is not READY. */
static const char *index_state(const srv_index_entry *e, const char **reason) {
    *reason = "";
    switch (e->state) {
    case SRV_VSTATE_AVAILABLE: return "READY";
    case SRV_VSTATE_START:
    case SRV_VSTATE_LOADING: return "LOADING";
    case SRV_VSTATE_UNLOADING: return "UNLOADING";
    case SRV_VSTATE_UNKNOWN:
        *reason = e->unloaded ? "unloaded" : "no version found under the base path yet";
        return "UNAVAILABLE";
    default:
        *reason = e->code != MS_OK ? e->msg : "unloaded";
        return "UNAVAILABLE";
    }
}

ms_status srv_triton_repository_index(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                      srv_bytes *out) {
    srv_app *app = appv;
    srv_index_entry *e = NULL;
    int ne = 0;
    Inference__RepositoryIndexResponse__ModelIndex *mi = NULL, **pmi = NULL;
    char(*vstr)[24] = NULL;
    (void)c;
    Inference__RepositoryIndexRequest *rq =
        inference__repository_index_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse RepositoryIndexRequest (%zu bytes)", n);
    ms_status st = srv_manager_index(app->mgr, &e, &ne);
    if (st != MS_OK) goto done;
    mi = calloc((size_t)ne + 1, sizeof(*mi));
    pmi = calloc((size_t)ne + 1, sizeof(*pmi));
    vstr = calloc((size_t)ne + 1, sizeof(*vstr));
    if (!mi || !pmi || !vstr) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    size_t k = 0;
    for (int i = 0; i < ne; i++) {
        const char *reason;
        const char *state = index_state(&e[i], &reason);
        if (rq->ready && e[i].state != SRV_VSTATE_AVAILABLE) continue;
        Inference__RepositoryIndexResponse__ModelIndex m0 =
            INFERENCE__REPOSITORY_INDEX_RESPONSE__MODEL_INDEX__INIT;
        mi[k] = m0;
        if (e[i].version > 0) snprintf(vstr[k], sizeof vstr[k], "%" PRId64, e[i].version);
        mi[k].name = e[i].name;
        mi[k].version = vstr[k];
        mi[k].state = (char *)state;
        mi[k].reason = (char *)reason;
        pmi[k] = &mi[k];
        k++;
    }
    Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
    r.n_models = k;
    r.models = pmi;
    st = srv_pack(&r.base, out);
done:
    free(mi);
    free(pmi);
    free(vstr);
    srv_manager_index_free(e, ne);
    inference__repository_index_request__free_unpacked(rq, NULL);
    return st;
}

/* ------------------------------------------------------------------------ */
/* RepositoryModelLoad / RepositoryModelUnload                               */
/* ------------------------------------------------------------------------ */

/* Refuses what dcmserve cannot honour instead of ignoring it: another
 * repository, a load with an inline config or files. Unload's
 * "unload_dependents" has nothing to act on (no ensembles) and is accepted. */
static ms_status check_request(const char *what, const char *repo, const char *model,
                               Inference__RepositoryModelLoadRequest__ParametersEntry **p,
                               size_t np, int load) {
    if (repo != NULL && repo[0] != '\0')
        return ms_errf(MS_ENOTSUP, "%s: dcmserve has one model repository (its model config); "
                                   "repository_name must be empty, got \"%s\"", what, repo);
    if (model == NULL || model[0] == '\0')
        return ms_errf(MS_EINVAL, "%s: model_name must be set", what);
    for (size_t i = 0; i < np; i++)
        if (load || strcmp(p[i]->key, "unload_dependents") != 0)
            return ms_errf(MS_ENOTSUP, "%s: parameter \"%s\" is not supported (a model loads "
                                       "from its base path in the model config, as configured)",
                           what, p[i]->key);
    return MS_OK;
}

/* Both RPCs: the gate (gRPC call c, or REST from peer), the checks, then the
 * manager, waiting as long as the reload RPC does (reload_wait_s) and within
 * the call's deadline. */
static ms_status repository_change(srv_app *app, int load, srv_call *c, const char *peer,
                                   const uint8_t *req, size_t n, srv_bytes *out) {
    const char *what = load ? "RepositoryModelLoad" : "RepositoryModelUnload";
    char who[400];
    ms_status st;
    if (c != NULL) {
        st = srv_admin_authorize_as(&app->admin, what, c, who, sizeof who);
    } else {
        snprintf(who, sizeof who, "REST %s", peer ? peer : "");
        st = srv_admin_authorize_peer(&app->admin, what, peer);
    }
    if (st != MS_OK) {
        MS_WARN("%s from %s refused: %s", what, who, ms_errmsg());
        return st;
    }
    /* Load and unload requests have the same fields and numbers. */
    Inference__RepositoryModelLoadRequest *rq =
        inference__repository_model_load_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse %sRequest (%zu bytes)", what, n);
    st = check_request(what, rq->repository_name, rq->model_name, rq->parameters,
                       rq->n_parameters, load);
    if (st == MS_OK) {
        double wait = app->reload_wait_s;
        double left = c != NULL ? srv_call_time_left(c) : wait;
        if (left < wait) wait = left > 0.05 ? left - 0.05 : 0.01;
        srv_req_model(srv_call_req(c), rq->model_name, 0, NULL);
        MS_INFO("%s from %s: model %s", what, who, rq->model_name);
        st = load ? srv_manager_load_model(app->mgr, rq->model_name, wait)
                  : srv_manager_unload_model(app->mgr, rq->model_name, wait);
        if (st != MS_OK) MS_WARN("%s of model %s: %s", what, rq->model_name, ms_errmsg());
    }
    inference__repository_model_load_request__free_unpacked(rq, NULL);
    if (st != MS_OK) return st;
    Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    return srv_pack(&r.base, out); /* both responses are empty */
}

ms_status srv_triton_repository_load(void *app, srv_call *c, const uint8_t *req, size_t n,
                                     srv_bytes *out) {
    return repository_change(app, 1, c, NULL, req, n, out);
}

ms_status srv_triton_repository_unload(void *app, srv_call *c, const uint8_t *req, size_t n,
                                       srv_bytes *out) {
    return repository_change(app, 0, c, NULL, req, n, out);
}

ms_status srv_triton_rest_repository(srv_app *app, int load, const char *peer, const uint8_t *req,
                                     size_t n) {
    srv_bytes out = {0};
    ms_status st = repository_change(app, load, NULL, peer, req, n, &out);
    free(out.data);
    return st;
}
