/* sig_signature.c - SignatureDef lookup, request validation, defaults and the
 * key <-> tensor-name mapping around rt_model_run.
 *
 * Messages: every validation failure names the signature first
 * (`signature "serving_default": ...`) and then says what was expected and
 * what came. Where TF Serving has a fixed text (input count, unknown output
 * alias, unknown signature key) that text follows unchanged, so clients that
 * match on it keep working.
 */
#include "sig_signature.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_tensor_proto.h"

#define SIG_MSG_MAX 1024

/* ---- lookups ---- */

ms_status sig_find(const Tensorflow__MetaGraphDef *mg, const char *key,
                   const Tensorflow__SignatureDef **out) {
    if (key == NULL || key[0] == '\0') key = SIG_DEFAULT_KEY;
    *out = NULL;
    for (size_t i = 0; mg != NULL && i < mg->n_signature_def; i++) {
        if (strcmp(mg->signature_def[i]->key, key) == 0 && mg->signature_def[i]->value != NULL) {
            *out = mg->signature_def[i]->value;
            return MS_OK;
        }
    }
    /* The keys there are (at most 20), so the caller can fix the request. */
    char keys[SIG_MSG_MAX];
    size_t len = 0;
    keys[0] = '\0';
    for (size_t i = 0; mg != NULL && i < mg->n_signature_def && i <= 20; i++) {
        int w = i == 20 ? snprintf(keys + len, sizeof(keys) - len, ", ...")
                        : snprintf(keys + len, sizeof(keys) - len, "%s\"%s\"", i ? ", " : "",
                                   mg->signature_def[i]->key);
        if (w < 0 || (size_t)w >= sizeof(keys) - len) {
            keys[len] = '\0';
            break;
        }
        len += (size_t)w;
    }
    return ms_errf(MS_EPRECOND, "Serving signature key \"%s\" not found. Signature keys: %s.", key,
                   len ? keys : "none");
}

const Tensorflow__TensorInfo *sig_input_info(const Tensorflow__SignatureDef *sd, const char *key) {
    for (size_t i = 0; i < sd->n_inputs; i++)
        if (strcmp(sd->inputs[i]->key, key) == 0) return sd->inputs[i]->value;
    return NULL;
}

const Tensorflow__TensorInfo *sig_output_info(const Tensorflow__SignatureDef *sd, const char *key) {
    for (size_t i = 0; i < sd->n_outputs; i++)
        if (strcmp(sd->outputs[i]->key, key) == 0) return sd->outputs[i]->value;
    return NULL;
}

int sig_unit_tail(const Tensorflow__TensorInfo *ti, int rank) {
    if (ti == NULL || ti->tensor_shape == NULL || ti->tensor_shape->unknown_rank) return 0;
    int r = (int)ti->tensor_shape->n_dim;
    if (r <= rank || r > RT_MAX_RANK) return 0;
    for (int d = rank; d < r; d++)
        if (ti->tensor_shape->dim[d]->size != 1) return 0;
    return r - rank;
}

static const Tensorflow__TensorProto *default_of(const Tensorflow__SignatureDef *sd,
                                                 const char *key) {
    for (size_t i = 0; i < sd->n_defaults; i++)
        if (strcmp(sd->defaults[i]->key, key) == 0) return sd->defaults[i]->value;
    return NULL;
}

/* ---- names and shapes for messages ---- */

/* clang-format off */
static const char *const dtype_names[] = {
    "DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8",
    "DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8", "DT_QUINT8", "DT_QINT32",
    "DT_BFLOAT16", "DT_QINT16", "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF",
    "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64", "DT_FLOAT8_E5M2",
    "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E4M3FNUZ", "DT_FLOAT8_E4M3B11FNUZ", "DT_FLOAT8_E5M2FNUZ",
    "DT_INT4", "DT_UINT4", "DT_INT2", "DT_UINT2", "DT_FLOAT4_E2M1FN",
};
static const char *const dtype_ref_names[] = {
    "DT_INVALID", "DT_FLOAT_REF", "DT_DOUBLE_REF", "DT_INT32_REF", "DT_UINT8_REF",
    "DT_INT16_REF", "DT_INT8_REF", "DT_STRING_REF", "DT_COMPLEX64_REF", "DT_INT64_REF",
    "DT_BOOL_REF", "DT_QINT8_REF", "DT_QUINT8_REF", "DT_QINT32_REF", "DT_BFLOAT16_REF",
    "DT_QINT16_REF", "DT_QUINT16_REF", "DT_UINT16_REF", "DT_COMPLEX128_REF", "DT_HALF_REF",
    "DT_RESOURCE_REF", "DT_VARIANT_REF", "DT_UINT32_REF", "DT_UINT64_REF",
    "DT_FLOAT8_E5M2_REF", "DT_FLOAT8_E4M3FN_REF", "DT_FLOAT8_E4M3FNUZ_REF",
    "DT_FLOAT8_E4M3B11FNUZ_REF", "DT_FLOAT8_E5M2FNUZ_REF", "DT_INT4_REF", "DT_UINT4_REF",
    "DT_INT2_REF", "DT_UINT2_REF", "DT_FLOAT4_E2M1FN_REF",
};
/* clang-format on */
#define NDTYPE_NAMES ((int)(sizeof(dtype_names) / sizeof(dtype_names[0])))

const char *sig_dtype_name(int v) {
    if (v >= 0 && v < NDTYPE_NAMES) return dtype_names[v];
    if (v > 100 && v < 100 + NDTYPE_NAMES) return dtype_ref_names[v - 100];
    return "DT_INVALID";
}

/* "(-1, 1)" / "(3)" / "()" from a shape with known rank. */
static char *dims_str(const int64_t *dim, int rank, char *buf, size_t n) {
    size_t len = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ", %lld" : "%lld", (long long)dim[i]);
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

char *sig_shape_str(const Tensorflow__TensorShapeProto *p, char *buf, size_t n) {
    if (p != NULL && p->unknown_rank) {
        snprintf(buf, n, "unknown_rank");
        return buf;
    }
    size_t len = 0;
    if (n == 0) return buf;
    len += (size_t)snprintf(buf, n, "(");
    for (size_t i = 0; p != NULL && i < p->n_dim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ", %lld" : "%lld",
                                (long long)(p->dim[i] ? p->dim[i]->size : 0));
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends the keys, sorted and joined with ",", to buf (as absl::StrJoin over
 * a std::set in TF Serving). */
static void join_sorted(const char **keys, size_t n, char *buf, size_t cap) {
    qsort(keys, n, sizeof(*keys), cmp_str);
    size_t len = strlen(buf);
    for (size_t i = 0; i < n && len + 1 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "," : "", keys[i]);
}

/* ---- validation ---- */

/* Checks one tensor against its TensorInfo: dtype, rank, dims. `what` is
 * "input" or "default for input" for the message. */
static ms_status check_tensor(const char *sig, const char *what, const char *key,
                              const Tensorflow__TensorInfo *info, const rt_tensor *t) {
    if (info->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
        return ms_errf(MS_ENOTSUP,
                       "signature \"%s\": %s \"%s\" is a sparse or composite tensor, which is "
                       "not supported",
                       sig, what, key);
    if (t == NULL)
        return ms_errf(MS_EINVAL, "signature \"%s\": %s \"%s\" has no tensor", sig, what, key);
    rt_dtype want = rt_dtype_base((int)info->dtype);
    if (want != RT_DT_INVALID && t->dtype != want)
        return ms_errf(MS_EINVAL, "signature \"%s\": %s \"%s\": expected dtype %s, got %s", sig,
                       what, key, sig_dtype_name((int)want), sig_dtype_name((int)t->dtype));
    const Tensorflow__TensorShapeProto *sp = info->tensor_shape;
    /* No shape, or unknown rank: anything goes. */
    if (sp == NULL || sp->unknown_rank) return MS_OK;
    /* The shapes are written out only for a refusal (none per accepted call). */
    char want_s[160], got_s[160];
    int ok = (size_t)t->shape.rank == sp->n_dim;
    for (size_t i = 0; ok && i < sp->n_dim; i++) {
        int64_t w = sp->dim[i] ? sp->dim[i]->size : 0;
        ok = w < 0 || t->shape.dim[i] == w;
    }
    if (ok) return MS_OK;
    sig_shape_str(sp, want_s, sizeof(want_s));
    dims_str(t->shape.dim, t->shape.rank, got_s, sizeof(got_s));
    if ((size_t)t->shape.rank != sp->n_dim)
        return ms_errf(MS_EINVAL,
                       "signature \"%s\": %s \"%s\": expected rank %zu with shape %s, got rank %d "
                       "with shape %s",
                       sig, what, key, sp->n_dim, want_s, t->shape.rank, got_s);
    for (size_t i = 0; i < sp->n_dim; i++) {
        int64_t w = sp->dim[i] ? sp->dim[i]->size : 0;
        if (w >= 0 && t->shape.dim[i] != w)
            return ms_errf(MS_EINVAL,
                           "signature \"%s\": %s \"%s\": dimension %zu must be %lld (signature "
                           "shape %s), got %lld in shape %s",
                           sig, what, key, i, (long long)w, want_s, (long long)t->shape.dim[i],
                           got_s);
    }
    return MS_OK;
}

/* One batch size across inputs whose signature dim 0 is -1. */
static ms_status check_batch(const char *sig, const Tensorflow__SignatureDef *sd,
                             const sig_input *in, int nin) {
    const char *first = NULL;
    int64_t batch = 0;
    for (int i = 0; i < nin; i++) {
        const Tensorflow__TensorInfo *info = sig_input_info(sd, in[i].key);
        if (info == NULL || in[i].tensor == NULL) continue;
        const Tensorflow__TensorShapeProto *sp = info->tensor_shape;
        if (sp == NULL || sp->unknown_rank || sp->n_dim == 0 || sp->dim[0] == NULL ||
            sp->dim[0]->size != -1 || in[i].tensor->shape.rank < 1)
            continue;
        int64_t b = in[i].tensor->shape.dim[0];
        if (first == NULL) {
            first = in[i].key;
            batch = b;
        } else if (b != batch) {
            return ms_errf(MS_EINVAL,
                           "signature \"%s\": inconsistent batch size (dimension 0) across "
                           "inputs: \"%s\" has %lld, \"%s\" has %lld",
                           sig, first, (long long)batch, in[i].key, (long long)b);
        }
    }
    return MS_OK;
}

/* Counts the request's keys the signature lacks (extra) and the signature's
 * keys without a default the request lacks (missing); lists them when the
 * arrays are given. */
static void find_extra_missing(const Tensorflow__SignatureDef *sd, const sig_input *in, int nin,
                      const char **extra, const char **missing, size_t *nextra, size_t *nmissing) {
    *nextra = *nmissing = 0;
    for (int i = 0; i < nin; i++)
        if (sig_input_info(sd, in[i].key) == NULL) {
            if (extra) extra[*nextra] = in[i].key;
            (*nextra)++;
        }
    for (size_t i = 0; i < sd->n_inputs; i++) {
        const char *key = sd->inputs[i]->key;
        int found = 0;
        for (int j = 0; j < nin && !found; j++) found = strcmp(in[j].key, key) == 0;
        if (!found && default_of(sd, key) == NULL) {
            if (missing) missing[*nmissing] = key;
            (*nmissing)++;
        }
    }
}

/* Keys: duplicates, unknown ones, and missing ones without a default. Only
 * a refusal allocates (for its message). */
static ms_status check_keys(const char *sig, const Tensorflow__SignatureDef *sd,
                            const sig_input *in, int nin) {
    for (int i = 0; i < nin; i++) {
        if (in[i].key == NULL)
            return ms_errf(MS_EINVAL, "signature \"%s\": input %d has no key", sig, i);
        for (int j = 0; j < i; j++)
            if (strcmp(in[i].key, in[j].key) == 0)
                return ms_errf(MS_EINVAL, "signature \"%s\": input \"%s\" given more than once",
                               sig, in[i].key);
    }
    size_t nsig = sd->n_inputs, nextra = 0, nmissing = 0;
    find_extra_missing(sd, in, nin, NULL, NULL, &nextra, &nmissing);
    if (nextra == 0 && nmissing == 0) return MS_OK;
    const char **sent = calloc((size_t)nin + 1, sizeof(*sent));
    const char **sigk = calloc(nsig + 1, sizeof(*sigk));
    const char **extra = calloc((size_t)nin + 1, sizeof(*extra));
    const char **missing = calloc(nsig + 1, sizeof(*missing));
    ms_status st = MS_OK;
    if (!sent || !sigk || !extra || !missing) {
        st = ms_errf(MS_ENOMEM, "signature \"%s\": out of memory", sig);
        goto done;
    }
    for (int i = 0; i < nin; i++) sent[i] = in[i].key;
    for (size_t i = 0; i < nsig; i++) sigk[i] = sd->inputs[i]->key;
    find_extra_missing(sd, in, nin, extra, missing, &nextra, &nmissing);

    char msg[SIG_MSG_MAX];
    if ((size_t)nin == nsig && nextra > 0) {
        /* Same count, other names: TF Serving's alias text. */
        snprintf(msg, sizeof(msg),
                 "input tensor alias not found in signature: %s. Inputs expected to be in the "
                 "set {",
                 extra[0]);
        join_sorted(sigk, nsig, msg, sizeof(msg));
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "}.");
    } else {
        snprintf(msg, sizeof(msg), "input size does not match signature: %d!=%zu len({", nin, nsig);
        join_sorted(sent, (size_t)nin, msg, sizeof(msg));
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "}) != len({");
        join_sorted(sigk, nsig, msg, sizeof(msg));
        l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "}). Sent extra: {");
        join_sorted(extra, nextra, msg, sizeof(msg));
        l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "}. Missing but required: {");
        join_sorted(missing, nmissing, msg, sizeof(msg));
        l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "}.");
    }
    st = ms_errf(MS_EINVAL, "signature \"%s\": %s", sig, msg);
done:
    free(sent);
    free(sigk);
    free(extra);
    free(missing);
    return st;
}

ms_status sig_validate(const char *sig_key, const Tensorflow__SignatureDef *sd, const sig_input *in,
                       int nin) {
    const char *sig = (sig_key == NULL || sig_key[0] == '\0') ? SIG_DEFAULT_KEY : sig_key;
    if (nin < 0 || (nin > 0 && in == NULL))
        return ms_errf(MS_EINVAL, "signature \"%s\": bad input list", sig);
    ms_status st = check_keys(sig, sd, in, nin);
    if (st != MS_OK) return st;
    for (int i = 0; i < nin; i++) {
        st = check_tensor(sig, "input", in[i].key, sig_input_info(sd, in[i].key), in[i].tensor);
        if (st != MS_OK) return st;
    }
    return check_batch(sig, sd, in, nin);
}

/* ---- running ---- */

void sig_outputs_free(sig_output *outs, int n) {
    if (outs == NULL) return;
    for (int i = 0; i < n; i++) {
        free(outs[i].key);
        if (outs[i].tensor) rt_tensor_unref(outs[i].tensor);
    }
    free(outs);
}

/* Output aliases to fetch: the filter's (checked) or all, sorted. *keys is
 * `small` (of `nsmall` entries) when they fit, else malloc'ed; the strings
 * are borrowed from sd or the filter. */
static ms_status pick_outputs(const char *sig, const Tensorflow__SignatureDef *sd,
                              const char *const *filter, int nfilter, const char **small,
                              int nsmall, const char ***keys, int *nkeys) {
    *keys = NULL;
    *nkeys = 0;
    int n = nfilter > 0 ? nfilter : (int)sd->n_outputs;
    const char **k = n <= nsmall ? small : calloc((size_t)n + 1, sizeof(*k));
    if (k == NULL) return ms_errf(MS_ENOMEM, "signature \"%s\": out of memory", sig);
    if (nfilter > 0) {
        for (int i = 0; i < nfilter; i++) {
            if (filter[i] == NULL || sig_output_info(sd, filter[i]) == NULL) {
                char set[SIG_MSG_MAX / 2] = "";
                const char **all = calloc(sd->n_outputs + 1, sizeof(*all));
                if (all != NULL) {
                    for (size_t j = 0; j < sd->n_outputs; j++) all[j] = sd->outputs[j]->key;
                    join_sorted(all, sd->n_outputs, set, sizeof(set));
                    free(all);
                }
                if (k != small) free(k);
                return ms_errf(MS_EINVAL,
                               "signature \"%s\": output tensor alias not found in signature: "
                               "%s. Outputs expected to be in the set {%s}.",
                               sig, filter[i] ? filter[i] : "(null)", set);
            }
            for (int j = 0; j < i; j++)
                if (strcmp(filter[i], filter[j]) == 0) {
                    if (k != small) free(k);
                    return ms_errf(MS_EINVAL, "signature \"%s\": duplicate output tensor alias: %s",
                                   sig, filter[i]);
                }
            k[i] = filter[i];
        }
    } else {
        for (int i = 0; i < n; i++) k[i] = sd->outputs[i]->key;
        qsort(k, (size_t)n, sizeof(*k), cmp_str);
    }
    *keys = k;
    *nkeys = n;
    return MS_OK;
}

ms_status sig_run(rt_model *m, const char *sig_key, const sig_input *in, int nin,
                  const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                  sig_output **outs, int *nouts) {
    *outs = NULL;
    *nouts = 0;
    const char *sig = (sig_key == NULL || sig_key[0] == '\0') ? SIG_DEFAULT_KEY : sig_key;
    if (strcmp(sig, SIG_INIT_OP_KEY) == 0)
        return ms_errf(MS_EPRECOND,
                       "signature \"%s\" is the model's init op, not a serving signature", sig);
    const Tensorflow__SignatureDef *sd;
    ms_status st = sig_find(rt_model_meta_graph(m), sig, &sd);
    if (st != MS_OK) return st;
    if ((st = sig_validate(sig, sd, in, nin)) != MS_OK) return st;

    /* Requests name a few inputs and outputs: their lists live on the stack. */
    enum { SMALL = 16 };
    const char *keys_s[SMALL];
    const char **keys = NULL;
    int nkeys = 0;
    if ((st = pick_outputs(sig, sd, output_filter, nfilter, keys_s, SMALL, &keys, &nkeys)) !=
        MS_OK)
        return st;

    size_t cap = (size_t)nin + sd->n_defaults + 1;
    sig_input all_s[SMALL];
    rt_tensor *defaults_s[SMALL];
    rt_feed feeds_s[SMALL];
    const char *fetches_s[SMALL];
    rt_tensor *res_s[SMALL] = {0};
    int in_small = cap <= SMALL, out_small = (size_t)nkeys + 1 <= SMALL;
    sig_input *all = in_small ? all_s : calloc(cap, sizeof(*all));
    rt_tensor **defaults = in_small ? defaults_s : calloc(cap, sizeof(*defaults));
    rt_feed *feeds = in_small ? feeds_s : calloc(cap, sizeof(*feeds));
    const char **fetches = out_small ? fetches_s : calloc((size_t)nkeys + 1, sizeof(*fetches));
    rt_tensor **res = out_small ? res_s : calloc((size_t)nkeys + 1, sizeof(*res));
    sig_output *o = calloc((size_t)nkeys + 1, sizeof(*o));
    int nall = 0, ndef = 0;
    if (!all || !defaults || !feeds || !fetches || !res || !o) {
        st = ms_errf(MS_ENOMEM, "signature \"%s\": out of memory", sig);
        goto done;
    }
    for (int i = 0; i < nin; i++) all[nall++] = in[i];
    /* Defaults for the inputs the request left out. */
    for (size_t i = 0; i < sd->n_inputs; i++) {
        const char *key = sd->inputs[i]->key;
        int given = 0;
        for (int j = 0; j < nin && !given; j++) given = strcmp(in[j].key, key) == 0;
        if (given) continue;
        const Tensorflow__TensorProto *tp = default_of(sd, key);
        if (tp == NULL) continue; /* sig_validate let it through, so it has one */
        rt_tensor *t = NULL;
        if ((st = rt_tensor_from_proto(tp, &t)) != MS_OK) {
            st = ms_errwrap(st, "signature \"%s\": default for input \"%s\"", sig, key);
            goto done;
        }
        defaults[ndef++] = t;
        if ((st = check_tensor(sig, "default for input", key, sd->inputs[i]->value, t)) != MS_OK)
            goto done;
        all[nall].key = key;
        all[nall].tensor = t;
        nall++;
    }
    if (ndef > 0 && (st = check_batch(sig, sd, all, nall)) != MS_OK) goto done;

    for (int i = 0; i < nall; i++) {
        feeds[i].name = sig_input_info(sd, all[i].key)->name;
        feeds[i].tensor = all[i].tensor;
    }
    for (int i = 0; i < nkeys; i++) {
        const Tensorflow__TensorInfo *info = sig_output_info(sd, keys[i]);
        if (info->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME) {
            st = ms_errf(MS_ENOTSUP,
                         "signature \"%s\": output \"%s\" is a sparse or composite tensor, which "
                         "is not supported",
                         sig, keys[i]);
            goto done;
        }
        fetches[i] = info->name;
    }
    st = rt_model_run(m, feeds, nall, fetches, nkeys, NULL, 0, opts, res);
    if (st != MS_OK) {
        st = ms_errwrap(st, "signature \"%s\"", sig);
        goto done;
    }
    for (int i = 0; i < nkeys; i++) {
        o[i].key = strdup(keys[i]);
        o[i].tensor = res[i];
        res[i] = NULL;
        if (o[i].key == NULL) {
            st = ms_errf(MS_ENOMEM, "signature \"%s\": out of memory", sig);
            sig_outputs_free(o, nkeys);
            o = NULL;
            goto done;
        }
    }
    *outs = o;
    *nouts = nkeys;
    o = NULL;
done:
    for (int i = 0; i < ndef; i++) rt_tensor_unref(defaults[i]);
    for (int i = 0; res != NULL && i < nkeys; i++)
        if (res[i]) rt_tensor_unref(res[i]);
    free(o);
    if (!out_small) {
        free(res);
        free(fetches);
    }
    if (!in_small) {
        free(feeds);
        free(defaults);
        free(all);
    }
    if (keys != keys_s) free(keys);
    return st;
}
