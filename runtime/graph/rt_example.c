/* rt_example.c - host ops parsing serialized tf.Example protos: ParseExample,
 * ParseExampleV2, ParseSingleExample (dense features: float, int64, bytes,
 * each with an optional default). Sparse and ragged features are refused
 * with a clear message.
 *
 * The bytes are outside input (a Classify/Predict client's strings), so the
 * decoder reads the protobuf wire directly with every length checked against
 * what is left: no allocation before a feature's value count is known and
 * matches the signature's dense shape.
 *
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }   entry: key = 1, value = 2
 *   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
 *                           Int64List int64_list = 3; } }
 *   *List    { repeated value = 1; }   (floats/ints packed or not)
 *
 * As protobuf merges, a repeated message field or map key keeps the last
 * occurrence. Error texts follow TensorFlow's ("Feature: x (data type: float)
 * is required but could not be found.", "Key: x, Index: 0. Number of float
 * values != expected. ..."); they name keys and indices, never values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ops.h"
#include "tf_framework.pb-c.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} span;

static int rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Next field of a message: its number, wire type and, for length-delimited
 * ones, the payload; other payloads are skipped. -1 on malformed input,
 * 1 at the end. */
static int next_field(const uint8_t **p, const uint8_t *end, uint32_t *field, int *wt, span *val,
                      uint64_t *scalar) {
    if (*p >= end) return 1;
    uint64_t tag, len;
    if (rd_varint(p, end, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return -1;
    *field = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    switch (*wt) {
    case 0:
        return rd_varint(p, end, scalar);
    case 1:
        if ((size_t)(end - *p) < 8) return -1;
        val->p = *p, val->n = 8;
        *p += 8;
        return 0;
    case 5:
        if ((size_t)(end - *p) < 4) return -1;
        val->p = *p, val->n = 4;
        *p += 4;
        return 0;
    case 2:
        if (rd_varint(p, end, &len) != 0 || len > (uint64_t)(end - *p)) return -1;
        val->p = *p, val->n = (size_t)len;
        *p += len;
        return 0;
    default:
        return -1; /* groups are not used by tf.Example */
    }
}

/* The Feature message of `key` in an Example: *found 0 when absent. */
static int find_feature(span ex, const char *key, size_t klen, span *feat, int *found) {
    if (ex.n == 0) { /* an empty Example (its bytes may be NULL: no pointer arithmetic) */
        *found = 0;
        return 0;
    }
    const uint8_t *p = ex.p, *end = ex.p + ex.n;
    uint32_t f;
    int wt, r;
    span v;
    uint64_t sc;
    *found = 0;
    while ((r = next_field(&p, end, &f, &wt, &v, &sc)) == 0) {
        if (f != 1 || wt != 2) continue; /* Example.features */
        const uint8_t *q = v.p, *qe = v.p + v.n;
        span e;
        while ((r = next_field(&q, qe, &f, &wt, &e, &sc)) == 0) {
            if (f != 1 || wt != 2) continue; /* Features.feature map entry */
            const uint8_t *s = e.p, *se = e.p + e.n;
            span k = {NULL, 0}, val = {(const uint8_t *)"", 0}, x;
            int has_key = 0;
            while ((r = next_field(&s, se, &f, &wt, &x, &sc)) == 0) {
                if (f == 1 && wt == 2) k = x, has_key = 1;
                else if (f == 2 && wt == 2) val = x;
            }
            if (r < 0) return -1;
            if ((has_key ? k.n : 0) == klen && (klen == 0 || memcmp(k.p, key, klen) == 0))
                *feat = val, *found = 1;
        }
        if (r < 0) return -1;
    }
    return r < 0 ? -1 : 0;
}

enum { KIND_NONE = 0, KIND_BYTES = 1, KIND_FLOAT = 2, KIND_INT64 = 3 };

/* The kind and the list message of a Feature (last oneof member wins). */
static int feature_list(span feat, int *kind, span *list) {
    const uint8_t *p = feat.p, *end = feat.p + feat.n;
    uint32_t f;
    int wt, r;
    span v;
    uint64_t sc;
    *kind = KIND_NONE;
    while ((r = next_field(&p, end, &f, &wt, &v, &sc)) == 0)
        if (f >= 1 && f <= 3 && wt == 2) *kind = (int)f, *list = v;
    return r < 0 ? -1 : 0;
}

/* Walks the values of a list: counts them (out == NULL) or stores them. */
static int list_values(span list, int kind, int64_t *count, void *out, int64_t cap) {
    const uint8_t *p = list.p, *end = list.p + list.n;
    uint32_t f;
    int wt, r;
    span v;
    uint64_t sc;
    int64_t c = 0;
    while ((r = next_field(&p, end, &f, &wt, &v, &sc)) == 0) {
        if (f != 1) continue;
        if (kind == KIND_BYTES) {
            if (wt != 2) return -1;
            if (out && c < cap) ((rt_str *)out)[c] = (rt_str){v.p, v.n};
            c++;
        } else if (kind == KIND_FLOAT) {
            if (wt == 5) {
                if (out && c < cap) memcpy((float *)out + c, v.p, 4);
                c++;
            } else if (wt == 2) {
                if (v.n % 4) return -1;
                for (size_t i = 0; i < v.n; i += 4, c++)
                    if (out && c < cap) memcpy((float *)out + c, v.p + i, 4);
            } else {
                return -1;
            }
        } else {
            if (wt == 0) {
                if (out && c < cap) ((int64_t *)out)[c] = (int64_t)sc;
                c++;
            } else if (wt == 2) {
                const uint8_t *q = v.p, *qe = v.p + v.n;
                uint64_t x;
                while (q < qe) {
                    if (rd_varint(&q, qe, &x) != 0) return -1;
                    if (out && c < cap) ((int64_t *)out)[c] = (int64_t)x;
                    c++;
                }
            } else {
                return -1;
            }
        }
    }
    if (r < 0) return -1;
    *count = c;
    return 0;
}

/* ---- the ops ---- */

/* "[2, 3]" in a per-thread buffer (one shape per message). */
static const char *shape_str(const rt_shape *s) {
    static _Thread_local char b[24 * RT_MAX_RANK + 4];
    size_t len = 0;
    b[len++] = '[';
    for (int i = 0; i < s->rank && i < RT_MAX_RANK; i++)
        len += (size_t)snprintf(b + len, sizeof b - len, i ? ", %lld" : "%lld",
                                (long long)s->dim[i]);
    snprintf(b + len, sizeof b - len, "]");
    return b;
}

typedef struct {
    const char *key;
    size_t klen;
    rt_dtype dt;
    rt_shape shape;        /* per example */
    int64_t per;           /* values per example */
    const rt_tensor *dflt; /* NULL or empty: required */
} dense_spec;

static const Tensorflow__AttrValue *attr_find(const kn_node *n, const char *key) {
    const Tensorflow__NodeDef *d = n->def;
    if (d == NULL) return NULL;
    for (size_t i = 0; i < d->n_attr; i++)
        if (d->attr[i]->key && strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

static const char *kind_name(rt_dtype dt) {
    return dt == RT_DT_FLOAT ? "float" : dt == RT_DT_INT64 ? "int64" : "string";
}

static ms_status parse_dense(const kn_node *n, const rt_tensor *ser, int batched,
                             dense_spec *spec, rt_tensor **out) {
    int64_t nex = ser->nelem;
    rt_shape os = {.rank = 0};
    if (batched) os.dim[os.rank++] = nex;
    if (spec->shape.rank + os.rank > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "'%s': dense shape of '%.*s' has too many dimensions", n->name,
                       (int)spec->klen, spec->key);
    for (int d = 0; d < spec->shape.rank; d++) os.dim[os.rank++] = spec->shape.dim[d];
    int want_kind = spec->dt == RT_DT_FLOAT ? KIND_FLOAT
                    : spec->dt == RT_DT_INT64 ? KIND_INT64 : KIND_BYTES;
    rt_str *strs = NULL;
    rt_tensor *t = NULL;
    ms_status st = MS_OK;
    if (spec->dt == RT_DT_STRING) {
        if (nex * spec->per > (int64_t)(SIZE_MAX / 2 / sizeof(rt_str)) ||
            (strs = calloc((size_t)(nex * spec->per) + 1, sizeof(rt_str))) == NULL)
            return ms_errf(MS_ENOMEM, "'%s': out of memory", n->name);
    } else if ((st = rt_tensor_new(spec->dt, &os, &t)) != MS_OK) {
        return st;
    }
    size_t es = spec->dt == RT_DT_STRING ? sizeof(rt_str) : rt_dtype_size(spec->dt);
    const rt_str *in = ser->data;
    for (int64_t e = 0; e < nex && st == MS_OK; e++) {
        char *dst = (spec->dt == RT_DT_STRING ? (char *)strs : (char *)t->data) +
                    (size_t)(e * spec->per) * es;
        span feat, list = {NULL, 0};
        int found = 0, kind = KIND_NONE;
        int64_t count = 0;
        if (find_feature((span){in[e].data, (size_t)in[e].len}, spec->key, spec->klen, &feat,
                         &found) != 0 ||
            (found && feature_list(feat, &kind, &list) != 0)) {
            st = ms_errf(MS_EINVAL, "'%s': could not parse example input, index %lld", n->name,
                         (long long)e);
            break;
        }
        if (!found || kind == KIND_NONE) {
            if (spec->dflt == NULL || spec->dflt->nelem == 0) {
                st = ms_errf(MS_EINVAL,
                             "'%s': Feature: %.*s (data type: %s) is required but could not be "
                             "found (example %lld).",
                             n->name, (int)spec->klen, spec->key, kind_name(spec->dt),
                             (long long)e);
                break;
            }
            memcpy(dst, spec->dflt->data, (size_t)spec->per * es);
            continue;
        }
        if (kind != want_kind) {
            st = ms_errf(MS_EINVAL, "'%s': Name: <unknown>, Key: %.*s, Index: %lld.  Data types "
                         "don't match. Expected type: %s",
                         n->name, (int)spec->klen, spec->key, (long long)e, kind_name(spec->dt));
            break;
        }
        if (list_values(list, kind, &count, NULL, 0) != 0) {
            st = ms_errf(MS_EINVAL, "'%s': could not parse example input, index %lld", n->name,
                         (long long)e);
            break;
        }
        if (count != spec->per) {
            st = ms_errf(MS_EINVAL, "'%s': Name: <unknown>, Key: %.*s, Index: %lld.  Number of %s "
                         "values != expected.  Values size: %lld but output shape: %s",
                         n->name, (int)spec->klen, spec->key, (long long)e,
                         kind_name(spec->dt), (long long)count, shape_str(&spec->shape));
            break;
        }
        (void)list_values(list, kind, &count, dst, spec->per); /* walked once already */
    }
    if (st == MS_OK && spec->dt == RT_DT_STRING) st = rt_tensor_new_strings(&os, strs, &t);
    free(strs);
    if (st != MS_OK) {
        rt_tensor_unref(t);
        return st;
    }
    *out = t;
    return MS_OK;
}

/* Reads dense_shapes / Tdense and the keys and defaults into specs. */
static ms_status dense_specs(const kn_node *n, int nd, const rt_str *keys,
                             rt_tensor *const *defaults, dense_spec *spec) {
    const Tensorflow__AttrValue *shapes = attr_find(n, "dense_shapes");
    const Tensorflow__AttrValue *types = attr_find(n, "Tdense");
    if (nd > 0 && (shapes == NULL || shapes->list == NULL || types == NULL ||
                   types->list == NULL || (int)shapes->list->n_shape != nd ||
                   (int)types->list->n_type != nd))
        return ms_errf(MS_EINVAL, "'%s': dense_shapes / Tdense do not list %d dense features",
                       n->name, nd);
    for (int j = 0; j < nd; j++) {
        dense_spec *s = &spec[j];
        s->key = (const char *)keys[j].data;
        s->klen = (size_t)keys[j].len;
        s->dt = (rt_dtype)types->list->type[j];
        if (s->dt != RT_DT_FLOAT && s->dt != RT_DT_INT64 && s->dt != RT_DT_STRING)
            return ms_errf(MS_EINVAL, "'%s': dense feature %d has dtype %s (float, int64, string)",
                           n->name, j, rt_dtype_name(s->dt));
        const Tensorflow__TensorShapeProto *sp = shapes->list->shape[j];
        if (sp->unknown_rank || sp->n_dim > RT_MAX_RANK - 1)
            return ms_errf(MS_EINVAL, "'%s': dense feature %d has no fixed shape", n->name, j);
        s->shape.rank = (int)sp->n_dim;
        s->per = 1;
        for (size_t d = 0; d < sp->n_dim; d++) {
            if (sp->dim[d]->size < 0)
                return ms_errf(MS_EINVAL,
                               "'%s': dense feature %d has an unknown dimension "
                               "(variable-length dense features are not supported)",
                               n->name, j);
            s->shape.dim[d] = sp->dim[d]->size;
            if (s->per > ((int64_t)1 << 31) / (sp->dim[d]->size + 1))
                return ms_errf(MS_EINVAL, "'%s': dense feature %d is too large", n->name, j);
            s->per *= sp->dim[d]->size;
        }
        s->dflt = defaults[j];
        if (s->dflt != NULL && s->dflt->nelem != 0 &&
            (s->dflt->dtype != s->dt || s->dflt->nelem != s->per))
            return ms_errf(MS_EINVAL, "'%s': dense_defaults[%d] must be empty or %s of %lld values",
                           n->name, j, rt_dtype_name(s->dt), (long long)s->per);
    }
    return MS_OK;
}

static ms_status run_parse(const kn_node *n, const rt_tensor *ser, int batched, int ns, int nd,
                           const rt_str *keys, rt_tensor *const *defaults, rt_tensor **out) {
    if (ns > 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): sparse features are not supported yet", n->name,
                       n->op);
    if (ser->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "'%s': serialized must be a string tensor", n->name);
    if (n->nout < nd)
        return ms_errf(MS_EINVAL, "'%s': %d outputs for %d dense features", n->name, n->nout, nd);
    dense_spec *spec = calloc((size_t)nd + 1, sizeof(*spec)); /* any number of features */
    if (spec == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = dense_specs(n, nd, keys, defaults, spec);
    for (int j = 0; j < nd && st == MS_OK; j++)
        st = parse_dense(n, ser, batched, &spec[j], &out[j]);
    free(spec);
    return st;
}

static ms_status string_keys(const kn_node *n, const rt_tensor *t, int want, const char *what) {
    if (t->dtype != RT_DT_STRING || t->nelem != want)
        return ms_errf(MS_EINVAL, "'%s': %s must be %d strings", n->name, what, want);
    return MS_OK;
}

/* ParseExample(serialized [B], names, sparse_keys x Ns, dense_keys x Nd,
 * dense_defaults x Nd). */
static ms_status parse_example_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                       rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st_;
    int ns = (int)kn_attr_i(n, "Nsparse", 0), nd = (int)kn_attr_i(n, "Ndense", 0);
    if (ns < 0 || nd < 0 || n->nin < 2 + ns + 2 * nd)
        return ms_errf(MS_EINVAL, "'%s': inputs do not match Nsparse %d / Ndense %d", n->name, ns,
                       nd);
    if (in[0]->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s': serialized must be a vector, got %s", n->name,
                       shape_str(&in[0]->shape));
    rt_str *keys = calloc((size_t)nd + 1, sizeof(*keys));
    if (keys == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = MS_OK;
    for (int j = 0; j < nd && st == MS_OK; j++) {
        st = string_keys(n, in[2 + ns + j], 1, "each dense key");
        if (st == MS_OK) keys[j] = ((const rt_str *)in[2 + ns + j]->data)[0];
    }
    if (st == MS_OK) st = run_parse(n, in[0], 1, ns, nd, keys, in + 2 + ns + nd, out + 3 * ns);
    free(keys);
    return st;
}

/* ParseExampleV2(serialized, names, sparse_keys [Ns], dense_keys [Nd],
 * ragged_keys [Nr], dense_defaults x Nd). */
static ms_status parse_example_v2_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                          rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st_;
    int ns = (int)kn_attr_i(n, "num_sparse", 0);
    int nd = kn_attr_typelist(n, "Tdense", NULL, 0); /* the count only */
    if (nd < 0) nd = 0;
    if (n->nin < 5 + nd)
        return ms_errf(MS_EINVAL, "'%s': inputs do not match %d dense features", n->name, nd);
    if (in[4]->nelem != 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): ragged features are not supported yet", n->name,
                       n->op);
    if (in[0]->shape.rank > 1)
        return ms_errf(MS_EINVAL, "'%s': serialized must be a scalar or a vector, got %s",
                       n->name, shape_str(&in[0]->shape));
    ms_status st = string_keys(n, in[3], nd, "dense_keys");
    if (st != MS_OK) return st;
    return run_parse(n, in[0], in[0]->shape.rank == 1, ns, nd, in[3]->data, in + 5, out + 3 * ns);
}

/* ParseSingleExample(serialized scalar, dense_defaults x Nd); keys in attrs. */
static ms_status parse_single_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                      rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st_;
    int ns = (int)kn_attr_i(n, "num_sparse", 0);
    int nd = kn_attr_slist(n, "dense_keys", NULL, NULL, 0); /* the count only */
    if (nd < 0) nd = 0;
    if (n->nin < 1 + nd)
        return ms_errf(MS_EINVAL, "'%s': inputs do not match %d dense features", n->name, nd);
    if (in[0]->shape.rank != 0)
        return ms_errf(MS_EINVAL, "'%s': serialized must be a scalar, got %s", n->name,
                       shape_str(&in[0]->shape));
    const char **k = calloc((size_t)nd + 1, sizeof(*k));
    size_t *kl = calloc((size_t)nd + 1, sizeof(*kl));
    rt_str *keys = calloc((size_t)nd + 1, sizeof(*keys));
    ms_status st = MS_OK;
    if (k == NULL || kl == NULL || keys == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
    } else {
        kn_attr_slist(n, "dense_keys", k, kl, nd);
        for (int j = 0; j < nd; j++) keys[j] = (rt_str){(const uint8_t *)k[j], kl[j]};
        st = run_parse(n, in[0], 0, ns, nd, keys, in + 1, out + 3 * ns);
    }
    free(k);
    free(kl);
    free(keys);
    return st;
}

const kn_kernel rt_ops_example_kernels[] = {
    {.op = "ParseExample", .compute = parse_example_compute},
    {.op = "ParseExampleV2", .compute = parse_example_v2_compute},
    {.op = "ParseSingleExample", .compute = parse_single_compute},
    {.op = NULL},
};
