/* srv_tfs.c - tensorflow.serving PredictionService and ModelService.
 *
 * Predict: ModelSpec -> model version (manager), TensorProto inputs (every
 * encoding, via rt_tensor_proto) -> sig_run (validation, defaults, output
 * filter) -> TensorProto outputs in the typed *_val fields, as TF Serving
 * answers by default. GetModelMetadata: the SignatureDefMap packed in an Any
 * with TF Serving's type URL. GetModelStatus, HandleReloadConfigRequest. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn_ctx.h"
#include "ms_log.h"
#include "ms_wire.h"
#include "rt_tensor_proto.h"
#include "sig_signature.h"
#include "srv_app.h"
#include "srv_batch.h"
#include "srv_config.h"
#include "srv_metrics.h"
#include "srv_pbarena.h"
#include "srv_status.h"
#include "tf_serving.pb-c.h"

#define SIGNATURE_DEF_MAP_URL "type.googleapis.com/tensorflow.serving.SignatureDefMap"

/* Looks up the servable a ModelSpec names. */
static ms_status resolve_spec(srv_app *app, const Tensorflow__Serving__ModelSpec *spec,
                              srv_servable *out);

/* resolve_spec, and names the model (and version found) in the call's record. */
ms_status srv_tfs_resolve(srv_app *app, srv_call *call, const Tensorflow__Serving__ModelSpec *spec,
                          srv_servable *out) {
    srv_req *rec = srv_call_req(call);
    if (spec) srv_req_model(rec, spec->name, 0, spec->signature_name);
    ms_status st = resolve_spec(app, spec, out);
    if (st == MS_OK) srv_req_model(rec, NULL, out->version, NULL);
    return st;
}

static ms_status resolve_spec(srv_app *app, const Tensorflow__Serving__ModelSpec *spec,
                              srv_servable *out) {
    if (spec == NULL || spec->name == NULL || spec->name[0] == '\0')
        return ms_errf(MS_EINVAL, "Missing ModelSpec: model_spec.name must be set");
    int64_t version = 0;
    const char *label = NULL;
    if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
        spec->version != NULL)
        version = spec->version->value;
    if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL)
        label = spec->version_label;
    return srv_manager_get(app->mgr, spec->name, version, label, out);
}

/* Every request of these services carries model_spec as field 1; a client
 * may send it more than once (protobuf merges the copies). protobuf-c 1.4
 * cannot merge ModelSpec (its oneof), so the copies are merged on the wire
 * first. protobuf-c copies what it keeps: the merged buffer is freed at once.
 * NULL: does not parse (the merged message is pre-scanned again). */
void *srv_tfs_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *req, size_t n) {
    return srv_tfs_unpack_in(desc, req, n, NULL);
}

void *srv_tfs_unpack_in(const ProtobufCMessageDescriptor *desc, const uint8_t *req, size_t n,
                        ProtobufCAllocator *alloc) {
    uint8_t *m = NULL;
    size_t mn = 0;
    if (ms_wire_merge_field(req, n, 1, &m, &mn) != MS_OK) return NULL;
    /* Joined payloads may parse where the parts did not: pre-scan again. */
    if (m != NULL && ms_wire_check_request(m, mn) != MS_OK) {
        free(m);
        return NULL;
    }
    ProtobufCMessage *r = protobuf_c_message_unpack(desc, alloc, m ? mn : n, m ? m : req);
    free(m);
    return r;
}

/* Fills the ModelSpec of a response (strings borrowed from the request). */
static void fill_spec(Tensorflow__Serving__ModelSpec *spec, Tensorflow__Serving__Int64Value *ver,
                      const char *name, int64_t version, const char *sig) {
    spec->name = (char *)name;
    ver->value = version;
    spec->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    spec->version = ver;
    spec->signature_name = (char *)(sig ? sig : "");
}

/* ------------------------------------------------------------------------ */
/* Predict                                                                   */
/* ------------------------------------------------------------------------ */


/* A request of this size or more unpacks its large values (a series' DICOM
 * files) into one buffer of the app's request pool (srv_pbarena_set_region):
 * the next such request finds that memory instead of faulting in heap pages
 * again (a 140-slice series: 73 MB, 16,000 faults per request). */
#define PREDICT_REGION_MIN ((size_t)1 << 20)

static rt_buf *req_region(void *pool, size_t size) {
    return kn_pool_get(pool, size);
}

ms_status srv_tfs_predict(void *appv, srv_call *call, const uint8_t *req, size_t n,
                          srv_bytes *out) {
    srv_app *app = appv;
    srv_req *rec = srv_call_req(call);
    ms_status st = MS_OK;
    srv_servable sv = {0};
    /* The common request has a few inputs and outputs: their arrays, and the
     * unpacked request itself (PREDICT_ARENA bytes), live on the stack. */
    enum { PREDICT_SMALL = 8, PREDICT_ARENA = 2048 };
    sig_input in_s[PREDICT_SMALL];
    Tensorflow__Serving__PredictResponse__OutputsEntry entries_s[PREDICT_SMALL],
        *eptrs_s[PREDICT_SMALL];
    Tensorflow__TensorProto protos_s[PREDICT_SMALL];
    max_align_t arena_buf[PREDICT_ARENA / sizeof(max_align_t)];
    srv_pbarena arena;
    sig_input *in = NULL;
    int nin = 0;
    sig_output *outs = NULL;
    int nouts = 0;
    Tensorflow__Serving__PredictResponse__OutputsEntry *entries = NULL, **eptrs = NULL;
    Tensorflow__TensorProto *protos = NULL;
    ms_budget budget;
    ms_budget_init(&budget, (uint64_t)(app->max_request_memory_bytes > 0
                                           ? app->max_request_memory_bytes
                                           : 0));

    srv_pbarena_init(&arena, arena_buf, sizeof arena_buf);
    if (app->req_pool != NULL && n >= PREDICT_REGION_MIN && n <= SIZE_MAX / 2)
        srv_pbarena_set_region(&arena, req_region, app->req_pool, n + n / 512 + 64);
    Tensorflow__Serving__PredictRequest *rq = srv_tfs_unpack_in(
        &tensorflow__serving__predict_request__descriptor, req, n, &arena.alloc);
    if (rq == NULL) {
        srv_pbarena_release(&arena);
        return ms_errf(MS_EINVAL, "cannot parse PredictRequest (%zu bytes)", n);
    }
    if ((st = srv_tfs_resolve(app, call, rq->model_spec, &sv)) != MS_OK) goto done;
    const char *sig_key = rq->model_spec->signature_name && rq->model_spec->signature_name[0]
                              ? rq->model_spec->signature_name
                              : SIG_DEFAULT_KEY;
    srv_req_model(rec, rq->model_spec->name, sv.version, sig_key);

    in = rq->n_inputs <= PREDICT_SMALL ? in_s
                                       : calloc(rq->n_inputs, sizeof(sig_input));
    if (in == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < rq->n_inputs; i++) {
        rt_tensor *t = NULL;
        if (rq->inputs[i]->value == NULL) {
            st = ms_errf(MS_EINVAL, "input \"%s\": missing TensorProto", rq->inputs[i]->key);
            goto done;
        }
        /* A DICOM file's bytes go from the unpacked request into the tensor
         * as they are: the arena hands their chunk over, no copy. */
        const rt_strkeep keep = {srv_pbarena_keep, &arena};
        if ((st = rt_tensor_from_request_proto(rq->inputs[i]->value, &budget, &keep, &t)) != MS_OK) {
            ms_errwrap(st, "input \"%s\"", rq->inputs[i]->key);
            goto done;
        }
        in[nin].key = rq->inputs[i]->key;
        in[nin++].tensor = t;
    }
    if (nin > 0 && in[0].tensor->shape.rank > 0) srv_req_batch(rec, (int)in[0].tensor->shape.dim[0]);
    srv_req_phase(rec, SRV_PHASE_DECODE);
    rt_run_opts opts = {.cancelled = srv_call_cancel_flag(call), .budget = &budget};
    st = srv_batch_run(app->batcher, sv.model, rq->model_spec->name, sv.version, sig_key, in, nin,
                       (const char *const *)rq->output_filter, (int)rq->n_output_filter, &opts,
                       &outs, &nouts);
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    if (st != MS_OK) goto done;

    if (nouts <= PREDICT_SMALL) {
        entries = entries_s;
        eptrs = eptrs_s;
        protos = protos_s;
    } else {
        entries = calloc((size_t)nouts, sizeof(*entries));
        eptrs = calloc((size_t)nouts, sizeof(*eptrs));
        protos = calloc((size_t)nouts, sizeof(*protos));
    }
    if (entries == NULL || eptrs == NULL || protos == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int nprotos = 0;
    for (int i = 0; i < nouts; i++) {
        Tensorflow__TensorProto init = TENSORFLOW__TENSOR_PROTO__INIT;
        protos[i] = init;
        if ((st = rt_tensor_to_proto(outs[i].tensor, 0, &protos[i])) != MS_OK) {
            ms_errwrap(st, "output \"%s\"", outs[i].key);
            nprotos = i + 1;
            goto clear;
        }
        nprotos = i + 1;
        Tensorflow__Serving__PredictResponse__OutputsEntry e =
            TENSORFLOW__SERVING__PREDICT_RESPONSE__OUTPUTS_ENTRY__INIT;
        entries[i] = e;
        entries[i].key = outs[i].key;
        entries[i].value = &protos[i];
        eptrs[i] = &entries[i];
    }
    {
        Tensorflow__Serving__PredictResponse resp = TENSORFLOW__SERVING__PREDICT_RESPONSE__INIT;
        Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
        Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
        fill_spec(&spec, &ver, rq->model_spec->name, sv.version, sig_key);
        resp.model_spec = &spec;
        resp.n_outputs = (size_t)nouts;
        resp.outputs = eptrs;
        st = srv_pack(&resp.base, out);
        srv_req_phase(rec, SRV_PHASE_SERIALIZE);
    }
clear:
    for (int i = 0; i < nprotos; i++)
        rt_tensor_proto_clear(&protos[i]);
done:
    if (entries != entries_s) {
        free(entries);
        free(eptrs);
        free(protos);
    }
    if (outs) sig_outputs_free(outs, nouts);
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i].tensor);
    if (in != in_s) free(in);
    srv_servable_release(&sv);
    if (st == MS_ECANCELED)
        MS_DEBUG("Predict %s: stopped, the call was cancelled or its deadline passed",
                 rq->model_spec && rq->model_spec->name ? rq->model_spec->name : "");
    else if (st != MS_OK && st != MS_EINVAL && st != MS_ENOTFOUND && st != MS_EPRECOND) {
        char name[64];
        MS_WARN_LIMITED("Predict \"%s\": %s",
                        ms_log_escape(name, sizeof name, rq->model_spec ? rq->model_spec->name : ""),
                        ms_errmsg());
    }
    srv_pbarena_release(&arena); /* frees rq */
    return st;
}

/* ------------------------------------------------------------------------ */
/* GetModelMetadata                                                          */
/* ------------------------------------------------------------------------ */

ms_status srv_tfs_get_model_metadata(void *appv, srv_call *call, const uint8_t *req, size_t n,
                                     srv_bytes *out) {
    srv_app *app = appv;
    ms_status st = MS_OK;
    srv_servable sv = {0};
    Tensorflow__Serving__SignatureDefMap__SignatureDefEntry *entries = NULL, **eptrs = NULL;
    uint8_t *mapbuf = NULL;
    (void)call;

    Tensorflow__Serving__GetModelMetadataRequest *rq =
        srv_tfs_unpack(&tensorflow__serving__get_model_metadata_request__descriptor, req, n);
    if (rq == NULL)
        return ms_errf(MS_EINVAL, "cannot parse GetModelMetadataRequest (%zu bytes)", n);
    if (rq->n_metadata_field == 0) {
        st = ms_errf(MS_EINVAL, "GetModelMetadataRequest must specify at least one metadata_field");
        goto done;
    }
    for (size_t i = 0; i < rq->n_metadata_field; i++)
        if (strcmp(rq->metadata_field[i], "signature_def") != 0) {
            st = ms_errf(MS_EINVAL, "Metadata field %s is not supported", rq->metadata_field[i]);
            goto done;
        }
    if ((st = srv_tfs_resolve(app, call, rq->model_spec, &sv)) != MS_OK) goto done;

    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(sv.model);
    size_t ns = mg ? mg->n_signature_def : 0;
    entries = calloc(ns > 0 ? ns : 1, sizeof(*entries));
    eptrs = calloc(ns > 0 ? ns : 1, sizeof(*eptrs));
    if (entries == NULL || eptrs == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        Tensorflow__Serving__SignatureDefMap__SignatureDefEntry e =
            TENSORFLOW__SERVING__SIGNATURE_DEF_MAP__SIGNATURE_DEF_ENTRY__INIT;
        entries[i] = e;
        entries[i].key = mg->signature_def[i]->key;
        entries[i].value = mg->signature_def[i]->value; /* borrowed from the model */
        eptrs[i] = &entries[i];
    }
    Tensorflow__Serving__SignatureDefMap map = TENSORFLOW__SERVING__SIGNATURE_DEF_MAP__INIT;
    map.n_signature_def = ns;
    map.signature_def = eptrs;
    srv_bytes mb;
    if ((st = srv_pack(&map.base, &mb)) != MS_OK) goto done;
    mapbuf = mb.data;

    Tensorflow__Any any = TENSORFLOW__ANY__INIT;
    any.type_url = (char *)SIGNATURE_DEF_MAP_URL;
    any.value.data = mb.data;
    any.value.len = mb.len;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry me =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__METADATA_ENTRY__INIT;
    me.key = (char *)"signature_def";
    me.value = &any;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry *mep = &me;
    Tensorflow__Serving__GetModelMetadataResponse resp =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__INIT;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    fill_spec(&spec, &ver, rq->model_spec->name, sv.version, NULL);
    resp.model_spec = &spec;
    resp.n_metadata = 1;
    resp.metadata = &mep;
    st = srv_pack(&resp.base, out);
done:
    free(mapbuf);
    free(entries);
    free(eptrs);
    srv_servable_release(&sv);
    tensorflow__serving__get_model_metadata_request__free_unpacked(rq, NULL);
    return st;
}

/* Classify / Regress: srv_classify.c. */

/* ------------------------------------------------------------------------ */
/* ModelService                                                              */
/* ------------------------------------------------------------------------ */

ms_status srv_tfs_get_model_status(void *appv, srv_call *call, const uint8_t *req, size_t n,
                                   srv_bytes *out) {
    srv_app *app = appv;
    srv_version_status *vs = NULL;
    int nvs = 0;
    (void)call;
    Tensorflow__Serving__GetModelStatusRequest *rq =
        srv_tfs_unpack(&tensorflow__serving__get_model_status_request__descriptor, req, n);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse GetModelStatusRequest (%zu bytes)", n);
    ms_status st = MS_OK;
    const Tensorflow__Serving__ModelSpec *spec = rq->model_spec;
    if (spec == NULL || spec->name == NULL || spec->name[0] == '\0') {
        st = ms_errf(MS_EINVAL, "Missing ModelSpec: model_spec.name must be set");
        goto done;
    }
    int64_t version = 0;
    if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
        spec->version)
        version = spec->version->value;
    if (spec->version_choice_case ==
        TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
        srv_servable sv = {0};
        if ((st = srv_manager_get(app->mgr, spec->name, 0, spec->version_label, &sv)) != MS_OK)
            goto done;
        version = sv.version;
        srv_servable_release(&sv);
    }
    if ((st = srv_manager_status(app->mgr, spec->name, version, &vs, &nvs)) != MS_OK) goto done;

    Tensorflow__Serving__ModelVersionStatus *mv = calloc((size_t)nvs, sizeof(*mv));
    Tensorflow__Serving__ModelVersionStatus **mvp = calloc((size_t)nvs, sizeof(*mvp));
    Tensorflow__Serving__StatusProto *sp = calloc((size_t)nvs, sizeof(*sp));
    if (mv == NULL || mvp == NULL || sp == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
    } else {
        for (int i = 0; i < nvs; i++) {
            Tensorflow__Serving__ModelVersionStatus m0 =
                TENSORFLOW__SERVING__MODEL_VERSION_STATUS__INIT;
            Tensorflow__Serving__StatusProto s0 = TENSORFLOW__SERVING__STATUS_PROTO__INIT;
            mv[i] = m0;
            sp[i] = s0;
            sp[i].error_code = (int32_t)srv_status_to_grpc(vs[i].code);
            sp[i].error_message = vs[i].msg;
            mv[i].version = vs[i].version;
            mv[i].state = (Tensorflow__Serving__ModelVersionStatus__State)vs[i].state;
            mv[i].status = &sp[i];
            mvp[i] = &mv[i];
        }
        Tensorflow__Serving__GetModelStatusResponse resp =
            TENSORFLOW__SERVING__GET_MODEL_STATUS_RESPONSE__INIT;
        resp.n_model_version_status = (size_t)nvs;
        resp.model_version_status = mvp;
        st = srv_pack(&resp.base, out);
    }
    free(mv);
    free(mvp);
    free(sp);
done:
    free(vs);
    tensorflow__serving__get_model_status_request__free_unpacked(rq, NULL);
    return st;
}

ms_status srv_tfs_reload_config(void *appv, srv_call *call, const uint8_t *req, size_t n,
                                srv_bytes *out) {
    srv_app *app = appv;
    srv_config *cfg = NULL;
    char who[400];
    ms_status st = srv_admin_authorize(&app->admin, call, who, sizeof(who));
    if (st != MS_OK) {
        MS_WARN("ReloadConfig from %s refused: %s", who, ms_errmsg());
        return st;
    }
    Tensorflow__Serving__ReloadConfigRequest *rq =
        tensorflow__serving__reload_config_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ReloadConfigRequest (%zu bytes)", n);
    /* No config set (an empty request, or bytes that parse to one): nothing
     * to do, as TF Serving's ServerCore takes no action for an unset config. */
    int unset = rq->config == NULL ||
                rq->config->config_case == TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG__NOT_SET;
    if (!unset) st = srv_config_from_proto(rq->config, &cfg);
    tensorflow__serving__reload_config_request__free_unpacked(rq, NULL);
    if (st == MS_OK && !unset) st = srv_admin_check_config(&app->admin, cfg);
    if (st == MS_OK && !unset && cfg->nmodels == 0 && !app->allow_empty_config)
        st = ms_errf(MS_EINVAL, "the new model list is empty; refused so that serving goes on "
                                "(start with --allow_empty_model_config to allow it)");
    if (st != MS_OK) {
        MS_WARN("ReloadConfig from %s refused: %s", who, ms_errmsg());
        srv_config_free(cfg);
        return st;
    }
    if (unset) {
        MS_INFO("ReloadConfig from %s: no config set; nothing changed", who);
    } else {
        int nmodels = cfg->nmodels;
        double wait = app->reload_wait_s;
        double left = srv_call_time_left(call);
        if (left < wait) wait = left > 0.05 ? left - 0.05 : 0.01;
        MS_INFO("ReloadConfig from %s: %d model(s):", who, nmodels);
        for (int i = 0; i < nmodels && i < 50; i++)
            MS_INFO("ReloadConfig:   model %s base_path %s", cfg->models[i].name,
                    cfg->models[i].base_path);
        srv_manager_apply(app->mgr, cfg, wait);
    }

    Tensorflow__Serving__StatusProto sp = TENSORFLOW__SERVING__STATUS_PROTO__INIT;
    Tensorflow__Serving__ReloadConfigResponse resp =
        TENSORFLOW__SERVING__RELOAD_CONFIG_RESPONSE__INIT;
    resp.status = &sp;
    return srv_pack(&resp.base, out);
}
