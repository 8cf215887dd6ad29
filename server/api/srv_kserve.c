/* srv_kserve.c - KServe / Open Inference Protocol v2 (inference.GRPCInferenceService).
 *
 * ModelInfer takes typed contents or raw_input_contents (BYTES raw = 4-byte
 * little-endian length + bytes per element, e.g. whole DICOM files), runs the
 * signature named by the request parameter "signature_name" (default
 * serving_default) and answers in raw_output_contents when the request used
 * raw inputs or an output has no typed field (FP16, BF16), typed contents
 * otherwise. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cuda_mem.h"
#include "kserve.pb-c.h"
#include "ms_build.h"
#include "ms_log.h"
#include "sig_signature.h"
#include "srv_app.h"
#include "srv_batch.h"
#include "srv_metrics.h"
#include "srv_kserve.h"

#define SERVER_NAME    "dcmserve"

/* clang-format off */
static const struct { const char *name; rt_dtype dt; } g_types[] = {
    {"BOOL", RT_DT_BOOL},     {"UINT8", RT_DT_UINT8},   {"UINT16", RT_DT_UINT16},
    {"UINT32", RT_DT_UINT32}, {"UINT64", RT_DT_UINT64}, {"INT8", RT_DT_INT8},
    {"INT16", RT_DT_INT16},   {"INT32", RT_DT_INT32},   {"INT64", RT_DT_INT64},
    {"FP16", RT_DT_HALF},     {"FP32", RT_DT_FLOAT},    {"FP64", RT_DT_DOUBLE},
    {"BYTES", RT_DT_STRING},  {"BF16", RT_DT_BFLOAT16},
};
/* clang-format on */

static rt_dtype dtype_of(const char *s) {
    for (size_t i = 0; i < sizeof(g_types) / sizeof(g_types[0]); i++)
        if (strcmp(g_types[i].name, s) == 0) return g_types[i].dt;
    return RT_DT_INVALID;
}

static const char *name_of(rt_dtype dt) {
    for (size_t i = 0; i < sizeof(g_types) / sizeof(g_types[0]); i++)
        if (g_types[i].dt == dt) return g_types[i].name;
    return "";
}

rt_dtype srv_kserve_dtype(const char *name) {
    return dtype_of(name);
}

const char *srv_kserve_dtype_name(rt_dtype dt) {
    return name_of(dt);
}

/* KServe clients know FP32, not DT_FLOAT: rewrites the message of a failed
 * signature run in KServe's words ("dtype DT_FLOAT" -> "datatype FP32"). */
static ms_status kserve_words(ms_status st) {
    char out[1024];
    size_t w = 0;
    const char *m = ms_errmsg();
    for (const char *p = m; *p && w < sizeof(out) - 16;) {
        if (strncmp(p, "DT_", 3) == 0) {
            size_t n = 3 + strspn(p + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
            const char *kn = NULL;
            for (int dt = 1; dt < RT_DT_COUNT && kn == NULL; dt++) {
                const char *tf = rt_dtype_name((rt_dtype)dt);
                if (strlen(tf) == n && strncmp(tf, p, n) == 0 && name_of((rt_dtype)dt)[0])
                    kn = name_of((rt_dtype)dt);
            }
            if (kn != NULL) {
                w += (size_t)snprintf(out + w, sizeof(out) - w, "%s", kn);
                p += n;
                continue;
            }
        }
        if (strncmp(p, "dtype", 5) == 0 && (p == m || p[-1] == ' ')) {
            w += (size_t)snprintf(out + w, sizeof(out) - w, "datatype");
            p += 5;
            continue;
        }
        out[w++] = *p++;
    }
    out[w] = '\0';
    return ms_errf(st, "%s", out);
}

ms_status srv_kserve_parse_version(const char *s, int64_t *out) {
    *out = 0;
    if (s == NULL || s[0] == '\0') return MS_OK;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
            return ms_errf(MS_EINVAL, "model version must be a number, got \"%s\"", s);
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return MS_OK;
}

static ms_status pack_bool(int v, int ready, srv_bytes *out) {
    /* ServerLive/ServerReady/ModelReady responses all hold one bool in field 1. */
    if (ready) {
        Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
        r.ready = v;
        return srv_pack(&r.base, out);
    }
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = v;
    return srv_pack(&r.base, out);
}

ms_status srv_kserve_server_live(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                 srv_bytes *out) {
    (void)appv;
    (void)c;
    (void)req;
    (void)n;
    return pack_bool(1, 0, out);
}

ms_status srv_kserve_server_ready(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                  srv_bytes *out) {
    srv_app *app = appv;
    (void)c;
    (void)req;
    (void)n;
    /* A sticky CUDA error counts as draining (as for grpc.health). */
    return pack_bool(!atomic_load(&app->draining) && !kn_cuda_sticky() && srv_manager_ready(app->mgr),
                     1, out);
}

ms_status srv_kserve_model_ready(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                 srv_bytes *out) {
    srv_app *app = appv;
    int64_t version;
    (void)c;
    Inference__ModelReadyRequest *rq = inference__model_ready_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ModelReadyRequest (%zu bytes)", n);
    ms_status st = srv_kserve_parse_version(rq->version, &version);
    if (st == MS_OK) {
        srv_servable sv = {0};
        int ready = !atomic_load(&app->draining) &&
                    srv_manager_get(app->mgr, rq->name, version, NULL, &sv) == MS_OK;
        srv_servable_release(&sv);
        Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
        r.ready = ready;
        st = srv_pack(&r.base, out);
    }
    inference__model_ready_request__free_unpacked(rq, NULL);
    return st;
}

ms_status srv_kserve_server_metadata(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                     srv_bytes *out) {
    (void)appv;
    (void)c;
    (void)req;
    (void)n;
    static const char *const ext[] = SRV_KSERVE_EXTENSIONS;
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    r.name = (char *)SERVER_NAME;
    r.version = (char *)ms_build_version();
    r.n_extensions = sizeof ext / sizeof ext[0];
    r.extensions = (char **)ext;
    return srv_pack(&r.base, out);
}

/* ------------------------------------------------------------------------ */
/* ModelMetadata                                                             */
/* ------------------------------------------------------------------------ */

static void fill_meta(Inference__ModelMetadataResponse__TensorMetadata *tm, int64_t *dims,
                      const char *key, const Tensorflow__TensorInfo *ti) {
    Inference__ModelMetadataResponse__TensorMetadata init =
        INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
    *tm = init;
    tm->name = (char *)key;
    tm->datatype = (char *)name_of(rt_dtype_base((int)ti->dtype));
    if (ti->tensor_shape != NULL && !ti->tensor_shape->unknown_rank) {
        size_t nd = ti->tensor_shape->n_dim;
        if (nd > RT_MAX_RANK) nd = RT_MAX_RANK;
        for (size_t d = 0; d < nd; d++)
            dims[d] = ti->tensor_shape->dim[d]->size;
        tm->n_shape = nd;
        tm->shape = dims;
    }
}

const char *srv_kserve_platform(const rt_model *m) {
    return rt_model_format_of(m) == RT_MODEL_FMT_ONNX ? "onnxruntime_onnx" : "tensorflow_savedmodel";
}

ms_status srv_kserve_model_metadata(void *appv, srv_call *c, const uint8_t *req, size_t n,
                                    srv_bytes *out) {
    srv_app *app = appv;
    srv_servable sv = {0};
    int64_t version, *avail = NULL;
    int navail = 0;
    char **vstr = NULL;
    Inference__ModelMetadataResponse__TensorMetadata *tin = NULL, *tout = NULL, **pin = NULL,
                                                     **pout = NULL;
    int64_t(*din)[RT_MAX_RANK] = NULL, (*dout)[RT_MAX_RANK] = NULL;
    (void)c;

    Inference__ModelMetadataRequest *rq = inference__model_metadata_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ModelMetadataRequest (%zu bytes)", n);
    ms_status st = srv_kserve_parse_version(rq->version, &version);
    if (st != MS_OK) goto done;
    srv_req_model(srv_call_req(c), rq->name, version, NULL);
    if ((st = srv_manager_get(app->mgr, rq->name, version, NULL, &sv)) != MS_OK) goto done;
    srv_req_model(srv_call_req(c), NULL, sv.version, NULL);
    if ((st = srv_manager_available(app->mgr, rq->name, &avail, &navail)) != MS_OK) goto done;
    const Tensorflow__SignatureDef *sd = NULL;
    if ((st = sig_find(rt_model_meta_graph(sv.model), NULL, &sd)) != MS_OK) goto done;

    vstr = calloc((size_t)(navail > 0 ? navail : 1), sizeof(char *));
    size_t ni = sd->n_inputs, no = sd->n_outputs;
    tin = calloc(ni + 1, sizeof(*tin));
    tout = calloc(no + 1, sizeof(*tout));
    pin = calloc(ni + 1, sizeof(*pin));
    pout = calloc(no + 1, sizeof(*pout));
    din = calloc(ni + 1, sizeof(*din));
    dout = calloc(no + 1, sizeof(*dout));
    if (!vstr || !tin || !tout || !pin || !pout || !din || !dout) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < navail; i++) {
        vstr[i] = malloc(24);
        if (vstr[i] == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            goto done;
        }
        snprintf(vstr[i], 24, "%" PRId64, avail[i]);
    }
    for (size_t i = 0; i < ni; i++) {
        fill_meta(&tin[i], din[i], sd->inputs[i]->key, sd->inputs[i]->value);
        pin[i] = &tin[i];
    }
    for (size_t i = 0; i < no; i++) {
        fill_meta(&tout[i], dout[i], sd->outputs[i]->key, sd->outputs[i]->value);
        pout[i] = &tout[i];
    }
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    r.name = rq->name;
    r.n_versions = (size_t)navail;
    r.versions = vstr;
    r.platform = (char *)srv_kserve_platform(sv.model);
    r.n_inputs = ni;
    r.inputs = pin;
    r.n_outputs = no;
    r.outputs = pout;
    st = srv_pack(&r.base, out);
done:
    for (int i = 0; vstr && i < navail; i++)
        free(vstr[i]);
    free(vstr);
    free(avail);
    free(tin);
    free(tout);
    free(pin);
    free(pout);
    free(din);
    free(dout);
    srv_servable_release(&sv);
    inference__model_metadata_request__free_unpacked(rq, NULL);
    return st;
}

/* ------------------------------------------------------------------------ */
/* ModelInfer                                                                */
/* ------------------------------------------------------------------------ */

/* Splits raw BYTES contents (uint32 LE length + bytes, per element). */
static ms_status parse_raw_bytes(const char *name, const ProtobufCBinaryData *raw, int64_t nelem,
                                 rt_str *strs) {
    size_t off = 0;
    for (int64_t i = 0; i < nelem; i++) {
        if (raw->len - off < 4)
            return ms_errf(MS_EINVAL,
                           "input \"%s\": raw BYTES contents hold %" PRId64
                           " elements, the shape needs %" PRId64,
                           name, i, nelem);
        uint32_t len = (uint32_t)raw->data[off] | (uint32_t)raw->data[off + 1] << 8 |
                       (uint32_t)raw->data[off + 2] << 16 | (uint32_t)raw->data[off + 3] << 24;
        off += 4;
        if (raw->len - off < len)
            return ms_errf(MS_EINVAL,
                           "input \"%s\": element %" PRId64 " says %u bytes, only %zu remain", name,
                           i, len, raw->len - off);
        strs[i].data = raw->data + off;
        strs[i].len = len;
        off += len;
    }
    if (off != raw->len)
        return ms_errf(MS_EINVAL,
                       "input \"%s\": %zu bytes left over after %" PRId64 " BYTES elements", name,
                       raw->len - off, nelem);
    return MS_OK;
}

static ms_status count_check(const char *name, const char *field, size_t got, int64_t want) {
    if ((int64_t)got != want)
        return ms_errf(MS_EINVAL,
                       "input \"%s\": expected %" PRId64
                       " values in contents.%s for its shape, got %zu",
                       name, want, field, got);
    return MS_OK;
}

/* Typed contents count of dt's field (0 when none). */
static size_t typed_count(const Inference__InferTensorContents *ct, rt_dtype dt) {
    if (ct == NULL) return 0;
    switch (dt) {
    case RT_DT_BOOL: return ct->n_bool_contents;
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32: return ct->n_int_contents;
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32: return ct->n_uint_contents;
    case RT_DT_INT64: return ct->n_int64_contents;
    case RT_DT_UINT64: return ct->n_uint64_contents;
    case RT_DT_FLOAT: return ct->n_fp32_contents;
    case RT_DT_DOUBLE: return ct->n_fp64_contents;
    case RT_DT_STRING: return ct->n_bytes_contents;
    default: return 0;
    }
}

/* The error for a datatype KServe does not name, listing those it does. */
static ms_status unknown_datatype(const Inference__ModelInferRequest__InferInputTensor *in) {
    char names[256];
    size_t len = 0;
    names[0] = '\0';
    for (size_t i = 0; i < sizeof(g_types) / sizeof(g_types[0]); i++) {
        int w = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", g_types[i].name);
        if (w < 0 || (size_t)w >= sizeof(names) - len) break;
        len += (size_t)w;
    }
    return ms_errf(MS_EINVAL, "input \"%s\": unknown datatype \"%s\"; expected one of %s",
                   in->name, in->datatype, names);
}

/* The input's shape, checked: rank, no negative dimension, a product that
 * fits. */
static ms_status input_shape(const Inference__ModelInferRequest__InferInputTensor *in,
                             rt_shape *shape, int64_t *nelem) {
    if (in->n_shape > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "input \"%s\": rank %zu exceeds %d", in->name, in->n_shape,
                       RT_MAX_RANK);
    for (size_t d = 0; d < in->n_shape; d++)
        if (in->shape[d] < 0)
            return ms_errf(MS_EINVAL, "input \"%s\": dimension %zu is %" PRId64 ", must be >= 0",
                           in->name, d, in->shape[d]);
    *shape = rt_shape_make((int)in->n_shape, in->shape);
    *nelem = rt_shape_nelem(shape);
    if (*nelem < 0) return ms_errf(MS_EINVAL, "input \"%s\": shape too large", in->name);
    return MS_OK;
}

/* Checks every count and byte length of the contents against dt and nelem,
 * before anything is allocated, and says how many bytes the tensor will
 * take (*need). */
static ms_status input_need(const Inference__ModelInferRequest__InferInputTensor *in, rt_dtype dt,
                            const ProtobufCBinaryData *raw, int64_t nelem, uint64_t *need) {
    const Inference__InferTensorContents *ct = in->contents;
    size_t esz = dt == RT_DT_STRING ? sizeof(rt_str) : rt_dtype_size(dt);
    if ((uint64_t)nelem > (uint64_t)INT64_MAX / esz)
        return ms_errf(MS_EINVAL, "input \"%s\": shape too large", in->name);
    *need = (uint64_t)nelem * esz;
    if (dt == RT_DT_STRING) {
        /* raw: 4 length bytes per element; typed: one bytes_contents each. */
        if (raw != NULL && (uint64_t)nelem > raw->len / 4)
            return ms_errf(MS_EINVAL,
                           "input \"%s\": raw BYTES contents of %zu bytes cannot hold %" PRId64
                           " elements (4 length bytes each)",
                           in->name, raw->len, nelem);
        if (raw == NULL) {
            ms_status cst = count_check(in->name, "bytes_contents", typed_count(ct, dt), nelem);
            if (cst != MS_OK) return cst;
        }
        *need = 2 * *need + (raw ? raw->len : 0);
        if (raw == NULL)
            for (int64_t i = 0; i < nelem; i++) *need += ct->bytes_contents[i].len;
        return MS_OK;
    }
    if (raw != NULL) {
        if (raw->len != *need)
            return ms_errf(MS_EINVAL,
                           "input \"%s\": raw contents hold %zu bytes, shape and %s need %llu",
                           in->name, raw->len, in->datatype, (unsigned long long)*need);
        return MS_OK;
    }
    if (dt == RT_DT_HALF || dt == RT_DT_BFLOAT16)
        return ms_errf(MS_EINVAL, "input \"%s\": %s tensors must be sent in raw_input_contents",
                       in->name, in->datatype);
    static const char *const fields[] = {
        [RT_DT_BOOL] = "bool_contents",     [RT_DT_INT8] = "int_contents",
        [RT_DT_INT16] = "int_contents",     [RT_DT_INT32] = "int_contents",
        [RT_DT_UINT8] = "uint_contents",    [RT_DT_UINT16] = "uint_contents",
        [RT_DT_UINT32] = "uint_contents",   [RT_DT_INT64] = "int64_contents",
        [RT_DT_UINT64] = "uint64_contents", [RT_DT_FLOAT] = "fp32_contents",
        [RT_DT_DOUBLE] = "fp64_contents",
    };
    const char *f =
        (size_t)dt < sizeof(fields) / sizeof(fields[0]) && fields[dt] ? fields[dt] : "contents";
    return count_check(in->name, f, typed_count(ct, dt), nelem);
}

/* A BYTES input: raw (length-prefixed) or one bytes_contents per element. */
static ms_status input_strings(const Inference__ModelInferRequest__InferInputTensor *in,
                               const ProtobufCBinaryData *raw, const rt_shape *shape,
                               int64_t nelem, rt_tensor **out) {
    const Inference__InferTensorContents *ct = in->contents;
    rt_str *strs = calloc((size_t)(nelem > 0 ? nelem : 1), sizeof(rt_str));
    if (strs == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = MS_OK;
    if (raw != NULL) {
        st = parse_raw_bytes(in->name, raw, nelem, strs);
    } else {
        size_t got = ct ? ct->n_bytes_contents : 0;
        st = count_check(in->name, "bytes_contents", got, nelem);
        for (int64_t i = 0; st == MS_OK && i < nelem; i++) {
            strs[i].data = ct->bytes_contents[i].data;
            strs[i].len = ct->bytes_contents[i].len;
        }
    }
    if (st == MS_OK) st = rt_tensor_new_strings(shape, strs, out);
    free(strs);
    return st;
}

/* Fills t (dt, nelem values) from the typed contents of in. */
static ms_status input_typed_fill(const Inference__ModelInferRequest__InferInputTensor *in,
                                  rt_dtype dt, int64_t nelem, rt_tensor *t) {
    const Inference__InferTensorContents *ct = in->contents;
    ms_status st = MS_OK;
    size_t i, n = (size_t)nelem;
    void *p = t->data;
    switch (dt) {
    case RT_DT_BOOL:
        if ((st = count_check(in->name, "bool_contents", ct ? ct->n_bool_contents : 0, nelem)))
            break;
        for (i = 0; i < n; i++)
            ((uint8_t *)p)[i] = ct->bool_contents[i] ? 1 : 0;
        break;
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32:
        if ((st = count_check(in->name, "int_contents", ct ? ct->n_int_contents : 0, nelem))) break;
        for (i = 0; i < n; i++) {
            int32_t v = ct->int_contents[i];
            if (dt == RT_DT_INT8)
                ((int8_t *)p)[i] = (int8_t)v;
            else if (dt == RT_DT_INT16)
                ((int16_t *)p)[i] = (int16_t)v;
            else
                ((int32_t *)p)[i] = v;
        }
        break;
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32:
        if ((st = count_check(in->name, "uint_contents", ct ? ct->n_uint_contents : 0, nelem)))
            break;
        for (i = 0; i < n; i++) {
            uint32_t v = ct->uint_contents[i];
            if (dt == RT_DT_UINT8)
                ((uint8_t *)p)[i] = (uint8_t)v;
            else if (dt == RT_DT_UINT16)
                ((uint16_t *)p)[i] = (uint16_t)v;
            else
                ((uint32_t *)p)[i] = v;
        }
        break;
    case RT_DT_INT64:
        if ((st = count_check(in->name, "int64_contents", ct ? ct->n_int64_contents : 0, nelem)))
            break;
        if (n) memcpy(p, ct->int64_contents, n * 8);
        break;
    case RT_DT_UINT64:
        if ((st = count_check(in->name, "uint64_contents", ct ? ct->n_uint64_contents : 0, nelem)))
            break;
        if (n) memcpy(p, ct->uint64_contents, n * 8);
        break;
    case RT_DT_FLOAT:
        if ((st = count_check(in->name, "fp32_contents", ct ? ct->n_fp32_contents : 0, nelem)))
            break;
        if (n) memcpy(p, ct->fp32_contents, n * 4);
        break;
    case RT_DT_DOUBLE:
        if ((st = count_check(in->name, "fp64_contents", ct ? ct->n_fp64_contents : 0, nelem)))
            break;
        if (n) memcpy(p, ct->fp64_contents, n * 8);
        break;
    default:
        st = ms_errf(MS_EINVAL, "input \"%s\": %s tensors must be sent in raw_input_contents",
                     in->name, in->datatype);
        break;
    }
    return st;
}

ms_status srv_kserve_input(const Inference__ModelInferRequest__InferInputTensor *in,
                           const ProtobufCBinaryData *raw, ms_budget *budget, rt_tensor **out) {
    rt_dtype dt = dtype_of(in->datatype);
    if (dt == RT_DT_INVALID) return unknown_datatype(in);
    rt_shape shape;
    int64_t nelem = 0;
    uint64_t need = 0;
    ms_status st = input_shape(in, &shape, &nelem);
    if (st == MS_OK) st = input_need(in, dt, raw, nelem, &need);
    if (st != MS_OK) return st;
    if (nelem > 0) {
        char what[300];
        snprintf(what, sizeof what, "input \"%s\"", in->name);
        if ((st = ms_budget_take(budget, need, what)) != MS_OK) return st;
    }
    if (dt == RT_DT_STRING) return input_strings(in, raw, &shape, nelem, out);
    rt_tensor *t = NULL;
    if ((st = rt_tensor_new(dt, &shape, &t)) != MS_OK) return st;
    if (raw != NULL) {
        if (raw->len) memcpy(t->data, raw->data, raw->len);
    } else if ((st = input_typed_fill(in, dt, nelem, t)) != MS_OK) {
        rt_tensor_unref(t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* Memory hanging off one output in the response. */
typedef struct out_mem {
    void *typed;                /* converted typed array */
    uint8_t *raw;               /* BYTES raw buffer */
    ProtobufCBinaryData *bytes; /* BYTES typed */
} out_mem;

static ms_status output_tensor(const rt_tensor *t, int use_raw,
                               Inference__ModelInferResponse__InferOutputTensor *o,
                               Inference__InferTensorContents *ct, ProtobufCBinaryData *raw,
                               out_mem *mem) {
    size_t n = (size_t)t->nelem;
    o->datatype = (char *)name_of(t->dtype);
    if (o->datatype[0] == '\0')
        return ms_errf(MS_ENOTSUP, "output \"%s\": %s has no KServe datatype", o->name,
                       rt_dtype_name(t->dtype));
    o->n_shape = (size_t)t->shape.rank;
    o->shape = (int64_t *)t->shape.dim;
    if (use_raw) {
        if (t->dtype == RT_DT_STRING) {
            const rt_str *s = rt_tensor_strs(t);
            size_t total = 0;
            for (size_t i = 0; i < n; i++)
                total += 4 + s[i].len;
            mem->raw = malloc(total > 0 ? total : 1);
            if (mem->raw == NULL) return ms_errf(MS_ENOMEM, "out of memory");
            size_t off = 0;
            for (size_t i = 0; i < n; i++) {
                uint32_t len = (uint32_t)s[i].len;
                mem->raw[off++] = (uint8_t)len;
                mem->raw[off++] = (uint8_t)(len >> 8);
                mem->raw[off++] = (uint8_t)(len >> 16);
                mem->raw[off++] = (uint8_t)(len >> 24);
                if (len) memcpy(mem->raw + off, s[i].data, len);
                off += len;
            }
            raw->data = mem->raw;
            raw->len = total;
        } else {
            raw->data = t->data;
            raw->len = rt_tensor_nbytes(t);
        }
        return MS_OK;
    }
    o->contents = ct;
    const void *p = t->data;
    switch (t->dtype) {
    case RT_DT_BOOL: {
        protobuf_c_boolean *b = calloc(n + 1, sizeof(*b));
        if (b == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            b[i] = ((const uint8_t *)p)[i] != 0;
        mem->typed = b;
        ct->n_bool_contents = n;
        ct->bool_contents = b;
        return MS_OK;
    }
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32: {
        int32_t *v = calloc(n + 1, sizeof(*v));
        if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            v[i] = t->dtype == RT_DT_INT8    ? ((const int8_t *)p)[i]
                   : t->dtype == RT_DT_INT16 ? ((const int16_t *)p)[i]
                                             : ((const int32_t *)p)[i];
        mem->typed = v;
        ct->n_int_contents = n;
        ct->int_contents = v;
        return MS_OK;
    }
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32: {
        uint32_t *v = calloc(n + 1, sizeof(*v));
        if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            v[i] = t->dtype == RT_DT_UINT8    ? ((const uint8_t *)p)[i]
                   : t->dtype == RT_DT_UINT16 ? ((const uint16_t *)p)[i]
                                              : ((const uint32_t *)p)[i];
        mem->typed = v;
        ct->n_uint_contents = n;
        ct->uint_contents = v;
        return MS_OK;
    }
    case RT_DT_INT64:
        ct->n_int64_contents = n;
        ct->int64_contents = (int64_t *)p;
        return MS_OK;
    case RT_DT_UINT64:
        ct->n_uint64_contents = n;
        ct->uint64_contents = (uint64_t *)p;
        return MS_OK;
    case RT_DT_FLOAT:
        ct->n_fp32_contents = n;
        ct->fp32_contents = (float *)p;
        return MS_OK;
    case RT_DT_DOUBLE:
        ct->n_fp64_contents = n;
        ct->fp64_contents = (double *)p;
        return MS_OK;
    case RT_DT_STRING: {
        const rt_str *s = rt_tensor_strs(t);
        mem->bytes = calloc(n + 1, sizeof(ProtobufCBinaryData));
        if (mem->bytes == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            mem->bytes[i].data = (uint8_t *)s[i].data;
            mem->bytes[i].len = s[i].len;
        }
        ct->n_bytes_contents = n;
        ct->bytes_contents = mem->bytes;
        return MS_OK;
    }
    default:
        return ms_errf(MS_EINTERNAL, "output \"%s\": no typed contents for %s", o->name,
                       o->datatype);
    }
}

ms_status srv_kserve_model_infer(void *appv, srv_call *call, const uint8_t *req, size_t n,
                                 srv_bytes *out) {
    srv_app *app = appv;
    srv_servable sv = {0};
    sig_input *in = NULL;
    int nin = 0;
    const char **filter = NULL;
    sig_output *outs = NULL;
    int nouts = 0;
    Inference__ModelInferResponse__InferOutputTensor *ot = NULL, **otp = NULL;
    Inference__InferTensorContents *cts = NULL;
    ProtobufCBinaryData *raws = NULL;
    out_mem *mem = NULL;
    int64_t version;
    ms_budget budget;
    ms_budget_init(&budget, (uint64_t)(app->max_request_memory_bytes > 0
                                           ? app->max_request_memory_bytes
                                           : 0));

    Inference__ModelInferRequest *rq = inference__model_infer_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ModelInferRequest (%zu bytes)", n);
    ms_status st = srv_kserve_parse_version(rq->model_version, &version);
    if (st != MS_OK) goto done;
    if (rq->model_name == NULL || rq->model_name[0] == '\0') {
        st = ms_errf(MS_EINVAL, "ModelInferRequest.model_name must be set");
        goto done;
    }
    srv_req *rec = srv_call_req(call);
    srv_req_model(rec, rq->model_name, version, NULL);
    if ((st = srv_manager_get(app->mgr, rq->model_name, version, NULL, &sv)) != MS_OK) goto done;

    const char *sig_key = SIG_DEFAULT_KEY;
    for (size_t i = 0; i < rq->n_parameters; i++)
        if (strcmp(rq->parameters[i]->key, "signature_name") == 0 && rq->parameters[i]->value &&
            rq->parameters[i]->value->parameter_choice_case ==
                INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
            sig_key = rq->parameters[i]->value->string_param;

    srv_req_model(rec, NULL, sv.version, sig_key);
    int use_raw = rq->n_raw_input_contents > 0;
    if (use_raw && rq->n_raw_input_contents != rq->n_inputs) {
        st = ms_errf(MS_EINVAL, "raw_input_contents has %zu entries, expected one per input (%zu)",
                     rq->n_raw_input_contents, rq->n_inputs);
        goto done;
    }
    in = calloc(rq->n_inputs + 1, sizeof(*in));
    if (in == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < rq->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *it = rq->inputs[i];
        if (use_raw && it->contents != NULL) {
            st = ms_errf(MS_EINVAL,
                         "input \"%s\": contents must be empty when raw_input_contents is used",
                         it->name);
            goto done;
        }
        rt_tensor *t = NULL;
        st = srv_kserve_input(it, use_raw ? &rq->raw_input_contents[i] : NULL, &budget, &t);
        if (st != MS_OK) goto done;
        in[nin].key = it->name;
        in[nin++].tensor = t;
    }
    filter = calloc(rq->n_outputs + 1, sizeof(*filter));
    if (filter == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < rq->n_outputs; i++)
        filter[i] = rq->outputs[i]->name;
    if (nin > 0 && in[0].tensor->shape.rank > 0) srv_req_batch(rec, (int)in[0].tensor->shape.dim[0]);
    srv_req_phase(rec, SRV_PHASE_DECODE);
    rt_run_opts opts = {.cancelled = srv_call_cancel_flag(call), .budget = &budget};
    st = srv_batch_run(app->batcher, sv.model, rq->model_name, sv.version, sig_key, in, nin, filter,
                       (int)rq->n_outputs, &opts, &outs, &nouts);
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    if (st != MS_OK) {
        st = kserve_words(st);
        goto done;
    }

    for (int i = 0; i < nouts; i++)
        if (outs[i].tensor->dtype == RT_DT_HALF || outs[i].tensor->dtype == RT_DT_BFLOAT16)
            use_raw = 1;
    size_t no = (size_t)nouts;
    ot = calloc(no + 1, sizeof(*ot));
    otp = calloc(no + 1, sizeof(*otp));
    cts = calloc(no + 1, sizeof(*cts));
    raws = calloc(no + 1, sizeof(*raws));
    mem = calloc(no + 1, sizeof(*mem));
    if (!ot || !otp || !cts || !raws || !mem) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < no; i++) {
        Inference__ModelInferResponse__InferOutputTensor o0 =
            INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
        Inference__InferTensorContents c0 = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
        ot[i] = o0;
        cts[i] = c0;
        ot[i].name = outs[i].key;
        if ((st = output_tensor(outs[i].tensor, use_raw, &ot[i], &cts[i], &raws[i], &mem[i])) !=
            MS_OK)
            goto done;
        otp[i] = &ot[i];
    }
    char vbuf[24];
    snprintf(vbuf, sizeof(vbuf), "%" PRId64, sv.version);
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    r.model_name = rq->model_name;
    r.model_version = vbuf;
    r.id = rq->id;
    r.n_outputs = no;
    r.outputs = otp;
    if (use_raw) {
        r.n_raw_output_contents = no;
        r.raw_output_contents = raws;
    }
    st = srv_pack(&r.base, out);
    srv_req_phase(rec, SRV_PHASE_SERIALIZE);
done:
    for (int i = 0; mem && i < nouts; i++) {
        free(mem[i].typed);
        free(mem[i].raw);
        free(mem[i].bytes);
    }
    free(mem);
    free(ot);
    free(otp);
    free(cts);
    free(raws);
    free(filter);
    if (outs) sig_outputs_free(outs, nouts);
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i].tensor);
    free(in);
    srv_servable_release(&sv);
    inference__model_infer_request__free_unpacked(rq, NULL);
    return st;
}
