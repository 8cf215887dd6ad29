/* srv_rest_v2.c - KServe v2 / Open Inference Protocol over HTTP.
 *
 * GET  /v2                                  server metadata
 * GET  /v2/models/{m}[/versions/{v}]        model metadata
 * POST /v2/models/{m}[/versions/{v}]/infer  inference
 *
 * Nothing is validated or run here: each request is translated into the
 * gRPC message (ModelInferRequest, ...), handed to the gRPC KServe handler
 * (srv_kserve.c) and its answer translated back, so both APIs check and run
 * requests the same way. JSON tensor data becomes raw_input_contents
 * (little-endian, BYTES as 4-byte length + bytes), which is also what the
 * binary tensor data extension carries: with Inference-Header-Content-Length
 * the body is the JSON header followed by each input that has
 * "parameters": {"binary_data_size": n}, in input order. Outputs come back as
 * JSON "data" or, when asked for ("binary_data": true per output,
 * "binary_data_output": true for all), as binary after the JSON header. */
#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_util.h"
#include "kserve.pb-c.h"
#include "sig_signature.h"
#include "srv_b64.h"
#include "srv_jsonnum.h"
#include "srv_app.h"
#include "srv_metrics.h"
#include "srv_rest_v2.h"
#include "srv_status.h"

#define MAX_ELEMS ((int64_t)1 << 40)

static int http_of(ms_status st) {
    switch (st) {
    case MS_OK: return 200;
    case MS_EINVAL:
    case MS_EPRECOND:
    case MS_ENOTSUP: return 400;
    case MS_ENOTFOUND: return 404;
    case MS_EPERM: return 403;
    case MS_ENOMEM: return 413;
    case MS_ETIMEDOUT: return 504;
    case MS_ESHUTDOWN:
    case MS_EBUSY: return 503;
    default: return 500;
    }
}

static void set_json(srv_rest_reply *o, int code, ms_status st, cJSON *j) {
    o->code = code;
    o->st = st;
    o->type = "application/json";
    o->body = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (o->body == NULL) {
        o->body = strdup("{\"error\":\"out of memory\"}");
        o->code = 500;
        o->st = MS_ENOMEM;
    }
    o->len = o->body ? strlen(o->body) : 0;
}

static void set_error(srv_rest_reply *o, ms_status st, const char *msg) {
    cJSON *j = cJSON_CreateObject();
    if (j) cJSON_AddStringToObject(j, "error", msg);
    set_json(o, http_of(st), st, j);
}

static void set_status_error(srv_rest_reply *o, ms_status st) {
    const char *m = ms_errmsg();
    set_error(o, st, m[0] ? m : ms_status_name(st));
}

void srv_rest_v2_json(srv_rest_reply *o, int code, ms_status st, struct cJSON *j) {
    set_json(o, code, st, j);
}

void srv_rest_v2_status_error(srv_rest_reply *o, ms_status st) {
    set_status_error(o, st);
}

/* ---- JSON -> raw_input_contents ---------------------------------------- */

typedef struct rawbuf {
    uint8_t *p;
    size_t len, cap;
} rawbuf;

static int raw_put(rawbuf *b, const void *v, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2 + 64;
        uint8_t *np = realloc(b->p, cap);
        if (np == NULL) return -1;
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, v, n);
    b->len += n;
    return 0;
}

typedef struct conv {
    const char *name;
    const char *dtname;
    rt_dtype dt;
    int b64; /* BYTES elements are base64 (parameters.content_type "base64") */
    int64_t count;
    rawbuf out;
} conv;

/* One JSON element -> little-endian bytes of the datatype; no rounding or
 * wrapping: a value the datatype cannot hold is an error. */
static ms_status put_elem(conv *c, const cJSON *j) {
    int64_t i = c->count++;
    if (c->dt == RT_DT_STRING) {
        if (!cJSON_IsString(j))
            return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " of BYTES must be a string",
                           c->name, i);
        const char *s = j->valuestring;
        uint8_t *dec = NULL;
        size_t n = strlen(s);
        if (c->b64) {
            dec = srv_b64_decode(s, &n);
            if (dec == NULL)
                return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " is not valid base64",
                               c->name, i);
        }
        if (n > UINT32_MAX) {
            free(dec);
            return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " too long", c->name, i);
        }
        uint8_t len[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        int bad = raw_put(&c->out, len, 4) || raw_put(&c->out, dec ? (const char *)dec : s, n);
        free(dec);
        return bad ? ms_errf(MS_ENOMEM, "out of memory") : MS_OK;
    }
    if (c->dt == RT_DT_BOOL) {
        if (!cJSON_IsBool(j))
            return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " of BOOL must be true or "
                                      "false", c->name, i);
        uint8_t v = cJSON_IsTrue(j) ? 1 : 0;
        return raw_put(&c->out, &v, 1) ? ms_errf(MS_ENOMEM, "out of memory") : MS_OK;
    }
    if (!cJSON_IsNumber(j))
        return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " of %s must be a number",
                       c->name, i, c->dtname);
    uint64_t u; /* 8 bytes, aligned */
    size_t n;
    ms_status st = srv_json_number(j->valuedouble, c->dt, c->dtname, c->name, i, &u, &n);
    if (st != MS_OK) return st;
    return raw_put(&c->out, &u, n) ? ms_errf(MS_ENOMEM, "out of memory") : MS_OK;
}

/* "data" flat or nested (row-major), as the protocol allows. */
static ms_status put_data(conv *c, const cJSON *j, int depth) {
    if (!cJSON_IsArray(j)) return put_elem(c, j);
    if (depth > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "input \"%s\": \"data\" nested deeper than %d", c->name,
                       RT_MAX_RANK);
    for (const cJSON *e = j->child; e; e = e->next) {
        ms_status st = put_data(c, e, depth + 1);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

static const char *param_str(const cJSON *params, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int param_true(const cJSON *params, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, key));
}

/* Everything the translated request points at. */
typedef struct infer_req {
    Inference__ModelInferRequest rq;
    Inference__ModelInferRequest__InferInputTensor *in, **inp;
    Inference__ModelInferRequest__InferRequestedOutputTensor *out, **outp;
    Inference__ModelInferRequest__ParametersEntry pe;
    Inference__ModelInferRequest__ParametersEntry *pep;
    Inference__InferParameter pv;
    ProtobufCBinaryData *raw;
    uint8_t **owned;
    int64_t (*shapes)[RT_MAX_RANK];
    size_t n;
} infer_req;

static void infer_req_free(infer_req *r) {
    for (size_t i = 0; r->owned && i < r->n; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->in);
    free(r->inp);
    free(r->out);
    free(r->outp);
    free(r->raw);
    free(r->shapes);
}

static ms_status build_request(const cJSON *j, const char *model, const char *version,
                               const uint8_t *bin, size_t binlen, infer_req *r) {
    Inference__ModelInferRequest init = INFERENCE__MODEL_INFER_REQUEST__INIT;
    r->rq = init;
    r->rq.model_name = (char *)model;
    r->rq.model_version = (char *)version;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (cJSON_IsString(id)) r->rq.id = id->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "parameters");
    const char *sig = param_str(params, "signature_name");
    if (sig) {
        Inference__ModelInferRequest__ParametersEntry pe =
            INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
        Inference__InferParameter pv = INFERENCE__INFER_PARAMETER__INIT;
        r->pe = pe;
        r->pv = pv;
        r->pv.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        r->pv.string_param = (char *)sig;
        r->pe.key = (char *)"signature_name";
        r->pe.value = &r->pv;
        r->pep = &r->pe;
        r->rq.n_parameters = 1;
        r->rq.parameters = &r->pep;
    }
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(j, "inputs");
    if (!cJSON_IsArray(inputs) || cJSON_GetArraySize(inputs) == 0)
        return ms_errf(MS_EINVAL, "the request needs \"inputs\": a non-empty list of tensors");
    size_t n = (size_t)cJSON_GetArraySize(inputs);
    r->n = n;
    r->in = calloc(n, sizeof *r->in);
    r->inp = calloc(n, sizeof *r->inp);
    r->raw = calloc(n, sizeof *r->raw);
    r->owned = calloc(n, sizeof *r->owned);
    r->shapes = calloc(n, sizeof *r->shapes);
    if (!r->in || !r->inp || !r->raw || !r->owned || !r->shapes)
        return ms_errf(MS_ENOMEM, "out of memory");
    size_t off = 0, k = 0;
    for (const cJSON *t = inputs->child; t; t = t->next, k++) {
        Inference__ModelInferRequest__InferInputTensor ii =
            INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
        r->in[k] = ii;
        r->inp[k] = &r->in[k];
        const char *name = param_str(t, "name");
        const char *dtn = param_str(t, "datatype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        if (name == NULL) return ms_errf(MS_EINVAL, "inputs[%zu]: \"name\" (a string) is missing", k);
        if (dtn == NULL)
            return ms_errf(MS_EINVAL, "input \"%s\": \"datatype\" (a string) is missing", name);
        if (!cJSON_IsArray(shape))
            return ms_errf(MS_EINVAL, "input \"%s\": \"shape\" (a list of integers) is missing",
                           name);
        if (cJSON_GetArraySize(shape) > RT_MAX_RANK)
            return ms_errf(MS_EINVAL, "input \"%s\": rank %d exceeds %d", name,
                           cJSON_GetArraySize(shape), RT_MAX_RANK);
        int64_t nelem = 1;
        size_t rank = 0;
        for (const cJSON *d = shape->child; d; d = d->next) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble) ||
                d->valuedouble > (double)MAX_ELEMS)
                return ms_errf(MS_EINVAL, "input \"%s\": \"shape\" must hold integers >= 0", name);
            int64_t dim = (int64_t)d->valuedouble;
            r->shapes[k][rank++] = dim;
            /* both factors are at most MAX_ELEMS (2^40): divide, never multiply past int64 */
            if (dim != 0 && nelem > MAX_ELEMS / dim)
                return ms_errf(MS_EINVAL, "input \"%s\": shape too large", name);
            nelem *= dim;
        }
        r->in[k].name = (char *)name;
        r->in[k].datatype = (char *)dtn;
        r->in[k].n_shape = rank;
        r->in[k].shape = r->shapes[k];
        const cJSON *tp = cJSON_GetObjectItemCaseSensitive(t, "parameters");
        const cJSON *bsz = cJSON_GetObjectItemCaseSensitive(tp, "binary_data_size");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(t, "data");
        if (bsz != NULL) {
            if (bin == NULL)
                return ms_errf(MS_EINVAL, "input \"%s\": binary_data_size needs the "
                                          "Inference-Header-Content-Length header", name);
            if (!cJSON_IsNumber(bsz) || bsz->valuedouble < 0 ||
                bsz->valuedouble != floor(bsz->valuedouble) ||
                bsz->valuedouble > (double)(binlen - off))
                return ms_errf(MS_EINVAL, "input \"%s\": binary_data_size must be an integer "
                                          "between 0 and the %zu binary bytes left", name,
                               binlen - off);
            if (data != NULL)
                return ms_errf(MS_EINVAL, "input \"%s\": give \"data\" or binary_data_size, not "
                                          "both", name);
            r->raw[k].data = (uint8_t *)bin + off;
            r->raw[k].len = (size_t)bsz->valuedouble;
            off += r->raw[k].len;
            continue;
        }
        if (data == NULL)
            return ms_errf(MS_EINVAL, "input \"%s\": \"data\" is missing", name);
        rt_dtype dt = srv_kserve_dtype(dtn);
        if (dt == RT_DT_INVALID) continue; /* empty raw: srv_kserve names the valid datatypes */
        const char *ct = param_str(tp, "content_type");
        conv c = {name, dtn, dt, dt == RT_DT_STRING && ct && strcmp(ct, "base64") == 0, 0, {0}};
        ms_status st = put_data(&c, data, 0);
        r->owned[k] = c.out.p;
        if (st != MS_OK) return st;
        if (c.count != nelem)
            return ms_errf(MS_EINVAL, "input \"%s\": shape needs %" PRId64 " values, \"data\" "
                                      "has %" PRId64, name, nelem, c.count);
        r->raw[k].data = c.out.p;
        r->raw[k].len = c.out.len;
    }
    if (bin != NULL && off != binlen)
        return ms_errf(MS_EINVAL, "%zu bytes of binary data after the JSON header are not claimed "
                                  "by any input's binary_data_size", binlen - off);
    r->rq.n_inputs = n;
    r->rq.inputs = r->inp;
    r->rq.n_raw_input_contents = n;
    r->rq.raw_input_contents = r->raw;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(j, "outputs");
    if (outs != NULL && !cJSON_IsArray(outs))
        return ms_errf(MS_EINVAL, "\"outputs\" must be a list of {\"name\": ...}");
    size_t no = (size_t)cJSON_GetArraySize(outs);
    if (no > 0) {
        r->out = calloc(no, sizeof *r->out);
        r->outp = calloc(no, sizeof *r->outp);
        if (!r->out || !r->outp) return ms_errf(MS_ENOMEM, "out of memory");
        k = 0;
        for (const cJSON *o = outs->child; o; o = o->next, k++) {
            Inference__ModelInferRequest__InferRequestedOutputTensor oi =
                INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
            r->out[k] = oi;
            r->out[k].name = (char *)param_str(o, "name");
            if (r->out[k].name == NULL)
                return ms_errf(MS_EINVAL, "outputs[%zu]: \"name\" (a string) is missing", k);
            r->outp[k] = &r->out[k];
        }
        r->rq.n_outputs = no;
        r->rq.outputs = r->outp;
    }
    return MS_OK;
}

/* ---- raw_output_contents -> JSON -------------------------------------- */

static uint64_t le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int is_utf8_text(const uint8_t *p, size_t n) {
    char *c = malloc(n + 1);
    if (c == NULL) return 0;
    if (n) memcpy(c, p, n);
    c[n] = 0;
    int ok = strlen(c) == n;
    for (size_t i = 0; ok && i < n;) { /* valid UTF-8, no control bytes */
        uint8_t b = (uint8_t)c[i];
        size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + len > n || (len == 1 && b < 0x20)) ok = 0;
        for (size_t k = 1; ok && k < len; k++)
            if (((uint8_t)c[i + k] >> 6) != 2) ok = 0;
        i += len ? len : 1;
    }
    free(c);
    return ok;
}

/* "data" for one raw output; sets *b64 when BYTES went out as base64. */
static cJSON *raw_json(rt_dtype dt, const ProtobufCBinaryData *raw, int *b64) {
    cJSON *a = cJSON_CreateArray();
    if (a == NULL) return NULL;
    if (dt == RT_DT_STRING) {
        int text = 1;
        for (size_t off = 0; off + 4 <= raw->len && text;) {
            size_t n = (size_t)le(raw->data + off, 4);
            if (n > raw->len - off - 4) break;
            text = is_utf8_text(raw->data + off + 4, n);
            off += 4 + n;
        }
        *b64 = !text;
        for (size_t off = 0; off + 4 <= raw->len;) {
            size_t n = (size_t)le(raw->data + off, 4);
            if (n > raw->len - off - 4) break;
            char *s = text ? malloc(n + 1) : srv_b64_encode(raw->data + off + 4, n);
            if (s == NULL) break;
            if (text) {
                memcpy(s, raw->data + off + 4, n);
                s[n] = 0;
            }
            cJSON_AddItemToArray(a, cJSON_CreateString(s));
            free(s);
            off += 4 + n;
        }
        return a;
    }
    size_t esz = rt_dtype_size(dt);
    for (size_t off = 0; esz && off + esz <= raw->len; off += esz) {
        const uint8_t *p = raw->data + off;
        uint64_t v = le(p, esz);
        cJSON *e;
        switch (dt) {
        case RT_DT_BOOL: e = cJSON_CreateBool(v != 0); break;
        case RT_DT_INT8: e = cJSON_CreateNumber((int8_t)v); break;
        case RT_DT_INT16: e = cJSON_CreateNumber((int16_t)v); break;
        case RT_DT_INT32: e = cJSON_CreateNumber((int32_t)v); break;
        case RT_DT_INT64: e = cJSON_CreateNumber((double)(int64_t)v); break;
        case RT_DT_UINT8:
        case RT_DT_UINT16:
        case RT_DT_UINT32:
        case RT_DT_UINT64: e = cJSON_CreateNumber((double)v); break;
        case RT_DT_HALF: e = cJSON_CreateNumber(kn__half_to_f32((uint16_t)v)); break;
        case RT_DT_BFLOAT16: e = cJSON_CreateNumber(kn__bf16_to_f32((uint16_t)v)); break;
        case RT_DT_FLOAT: {
            float f;
            memcpy(&f, p, 4);
            e = cJSON_CreateNumber(f);
            break;
        }
        default: {
            double d;
            memcpy(&d, p, 8);
            e = cJSON_CreateNumber(d);
            break;
        }
        }
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

/* Does the request want output `name` as binary? */
static int wants_binary(const cJSON *req, const char *name) {
    if (param_true(cJSON_GetObjectItemCaseSensitive(req, "parameters"), "binary_data_output"))
        return 1;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(req, "outputs");
    for (const cJSON *o = outs ? outs->child : NULL; o; o = o->next) {
        const char *n = param_str(o, "name");
        if (n && strcmp(n, name) == 0)
            return param_true(cJSON_GetObjectItemCaseSensitive(o, "parameters"), "binary_data");
    }
    return 0;
}

static void infer(srv_app *app, const char *model, const char *version, const char *hdr,
                  const char *data, size_t len, srv_req *rec, srv_rest_reply *o) {
    size_t jlen = len;
    const uint8_t *bin = NULL;
    size_t binlen = 0;
    if (hdr != NULL) {
        char *end;
        unsigned long long h = strtoull(hdr, &end, 10);
        if (end == hdr || *end != 0 || h > len) {
            set_error(o, MS_EINVAL, "Inference-Header-Content-Length must be a byte count no "
                                    "larger than the body");
            return;
        }
        jlen = (size_t)h;
        bin = (const uint8_t *)data + jlen;
        binlen = len - jlen;
    }
    cJSON *req = cJSON_ParseWithLength(data ? data : "", jlen);
    if (!cJSON_IsObject(req)) {
        cJSON_Delete(req);
        set_error(o, MS_EINVAL, "the request's JSON cannot be parsed (or is not an object with "
                                "\"inputs\")");
        return;
    }
    infer_req r = {0};
    srv_bytes packed = {0}, resp = {0};
    Inference__ModelInferResponse *rs = NULL;
    ms_err_clear();
    ms_status st = build_request(req, model, version, bin, binlen, &r);
    if (st == MS_OK) {
        const char *sig = r.rq.n_parameters ? r.pv.string_param : SIG_DEFAULT_KEY;
        srv_req_model(rec, NULL, 0, sig);
        if (r.n && r.in[0].n_shape) srv_req_batch(rec, (int)r.in[0].shape[0]);
        st = srv_pack(&r.rq.base, &packed);
    }
    if (st == MS_OK) {
        srv_req_phase(rec, SRV_PHASE_DECODE);
        st = srv_kserve_model_infer(app, NULL, packed.data, packed.len, &resp);
        srv_req_phase(rec, SRV_PHASE_COMPUTE);
    }
    if (st == MS_OK) {
        rs = inference__model_infer_response__unpack(NULL, resp.len, resp.data);
        if (rs == NULL) st = ms_errf(MS_EINTERNAL, "cannot read back the ModelInferResponse");
    }
    if (st != MS_OK) {
        set_status_error(o, st);
        goto out;
    }
    srv_req_model(rec, NULL, strtoll(rs->model_version, NULL, 10), NULL);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model_name", rs->model_name);
    cJSON_AddStringToObject(j, "model_version", rs->model_version);
    if (rs->id && rs->id[0]) cJSON_AddStringToObject(j, "id", rs->id);
    cJSON *oa = cJSON_AddArrayToObject(j, "outputs");
    size_t nbin = 0;
    int any_bin = 0;
    for (size_t i = 0; i < rs->n_outputs; i++) {
        const Inference__ModelInferResponse__InferOutputTensor *ot = rs->outputs[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", ot->name);
        cJSON_AddStringToObject(t, "datatype", ot->datatype);
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (size_t d = 0; d < ot->n_shape; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)ot->shape[d]));
        const ProtobufCBinaryData *raw = i < rs->n_raw_output_contents ? &rs->raw_output_contents[i]
                                                                       : NULL;
        if (raw == NULL) { /* srv_kserve answers raw requests in raw: never here */
            cJSON_Delete(t);
            cJSON_Delete(j);
            set_error(o, MS_EINTERNAL, "output without raw contents");
            goto out;
        }
        if (wants_binary(req, ot->name)) {
            cJSON *p = cJSON_AddObjectToObject(t, "parameters");
            cJSON_AddNumberToObject(p, "binary_data_size", (double)raw->len);
            nbin += raw->len;
            any_bin = 1;
        } else {
            int b64 = 0;
            cJSON_AddItemToObject(t, "data", raw_json(srv_kserve_dtype(ot->datatype), raw, &b64));
            if (b64)
                cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "parameters"), "content_type",
                                        "base64");
        }
        cJSON_AddItemToArray(oa, t);
    }
    set_json(o, 200, MS_OK, j);
    if (any_bin && o->code == 200) {
        char *nb = realloc(o->body, o->len + nbin + 1);
        if (nb == NULL) {
            set_error(o, MS_ENOMEM, "out of memory");
            goto out;
        }
        o->body = nb;
        o->header_len = o->len;
        for (size_t i = 0; i < rs->n_outputs; i++)
            if (wants_binary(req, rs->outputs[i]->name)) {
                /* an empty output's raw contents may have no data pointer */
                if (rs->raw_output_contents[i].len)
                    memcpy(o->body + o->len, rs->raw_output_contents[i].data,
                           rs->raw_output_contents[i].len);
                o->len += rs->raw_output_contents[i].len;
            }
        o->type = "application/octet-stream";
    }
    srv_req_phase(rec, SRV_PHASE_SERIALIZE);
out:
    if (rs) inference__model_infer_response__free_unpacked(rs, NULL);
    free(resp.data);
    free(packed.data);
    infer_req_free(&r);
    cJSON_Delete(req);
}

static cJSON *meta_tensors(Inference__ModelMetadataResponse__TensorMetadata **t, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t[i]->name);
        cJSON_AddStringToObject(o, "datatype", t[i]->datatype);
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (size_t d = 0; d < t[i]->n_shape; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i]->shape[d]));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static void model_metadata(srv_app *app, const char *model, const char *version,
                           srv_rest_reply *o) {
    Inference__ModelMetadataRequest rq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    rq.name = (char *)model;
    rq.version = (char *)version;
    srv_bytes packed = {0}, resp = {0};
    ms_err_clear();
    ms_status st = srv_pack(&rq.base, &packed);
    if (st == MS_OK) st = srv_kserve_model_metadata(app, NULL, packed.data, packed.len, &resp);
    free(packed.data);
    Inference__ModelMetadataResponse *rs =
        st == MS_OK ? inference__model_metadata_response__unpack(NULL, resp.len, resp.data) : NULL;
    free(resp.data);
    if (st == MS_OK && rs == NULL) st = ms_errf(MS_EINTERNAL, "cannot read back the metadata");
    if (st != MS_OK) {
        set_status_error(o, st);
        return;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", rs->name);
    cJSON *vs = cJSON_AddArrayToObject(j, "versions");
    for (size_t i = 0; i < rs->n_versions; i++)
        cJSON_AddItemToArray(vs, cJSON_CreateString(rs->versions[i]));
    cJSON_AddStringToObject(j, "platform", rs->platform);
    cJSON_AddItemToObject(j, "inputs", meta_tensors(rs->inputs, rs->n_inputs));
    cJSON_AddItemToObject(j, "outputs", meta_tensors(rs->outputs, rs->n_outputs));
    inference__model_metadata_response__free_unpacked(rs, NULL);
    set_json(o, 200, MS_OK, j);
}

static void server_metadata(srv_app *app, srv_rest_reply *o) {
    srv_bytes resp = {0};
    ms_status st = srv_kserve_server_metadata(app, NULL, NULL, 0, &resp);
    Inference__ServerMetadataResponse *rs =
        st == MS_OK ? inference__server_metadata_response__unpack(NULL, resp.len, resp.data) : NULL;
    free(resp.data);
    if (rs == NULL) {
        set_error(o, MS_EINTERNAL, "cannot build the server metadata");
        return;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", rs->name);
    cJSON_AddStringToObject(j, "version", rs->version);
    cJSON *ex = cJSON_AddArrayToObject(j, "extensions");
    cJSON_AddItemToArray(ex, cJSON_CreateString("binary_tensor_data"));
    for (size_t i = 0; i < rs->n_extensions; i++) /* Triton's (srv_triton.c, srv_rest_triton.c) */
        cJSON_AddItemToArray(ex, cJSON_CreateString(rs->extensions[i]));
    inference__server_metadata_response__free_unpacked(rs, NULL);
    set_json(o, 200, MS_OK, j);
}

const char *srv_rest_v2_model_path(const char *p, char *model, size_t mcap, char *version,
                                   size_t vcap) {
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= mcap) return NULL;
    memcpy(model, p, n);
    model[n] = 0;
    p += n;
    if (version != NULL && strncmp(p, "/versions/", 10) == 0) {
        p += 10;
        n = strcspn(p, "/");
        if (n == 0 || n >= vcap || strspn(p, "0123456789") != n) return NULL;
        memcpy(version, p, n);
        version[n] = 0;
        p += n;
    }
    return p;
}

int srv_rest_v2(srv_app *app, const char *method, const char *url, const char *header_len,
                const char *data, size_t len, srv_req *rec, srv_rest_reply *out) {
    memset(out, 0, sizeof *out);
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/v2") == 0 || strcmp(url, "/v2/") == 0) {
        if (!get) {
            set_error(out, MS_EINVAL, "use GET for /v2");
            out->code = 405;
            return 0;
        }
        server_metadata(app, out);
        return 0;
    }
    if (strncmp(url, "/v2/models/", 11) != 0) return -1;
    char model[256], version[24] = "";
    const char *p = srv_rest_v2_model_path(url + 11, model, sizeof model, version, sizeof version);
    if (p == NULL) return -1;
    srv_req_model(rec, model, strtoll(version, NULL, 10), NULL);
    if (*p == 0) {
        if (!get) {
            set_error(out, MS_EINVAL, "use GET for model metadata");
            out->code = 405;
            return 0;
        }
        model_metadata(app, model, version, out);
        return 0;
    }
    if (strcmp(p, "/infer") == 0) {
        if (!post) {
            set_error(out, MS_EINVAL, "use POST for /infer");
            out->code = 405;
            return 0;
        }
        infer(app, model, version, header_len, data, len, rec, out);
        return 0;
    }
    return -1;
}
