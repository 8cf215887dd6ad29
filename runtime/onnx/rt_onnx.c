/* rt_onnx.c - ONNX -> SavedModel conversion: reading the model and its
 * initializers, the value table, emitting TF NodeDefs, and assembling the
 * SavedModel with its serving_default signature. The per-op translation is in
 * rt_onnx_ops.c. */
#include "rt_onnx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ms_log.h"
#include "rt_bundle.h"
#include "rt_onnx_int.h"
#include "tf_savedmodel.pb-c.h"

/* ======================================================================
 * Arena
 * ====================================================================== */

struct rt__ox_block {
    rt__ox_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *rt__ox_alloc(rt__ox_conv *cv, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    rt__ox_block *b = cv->arena;
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof(*b) + cap);
        if (b == NULL) longjmp(cv->oom, 1);
        b->next = cv->arena;
        b->used = 0;
        b->cap = cap;
        cv->arena = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *rt__ox_strdup(rt__ox_conv *cv, const char *s) {
    size_t n = strlen(s);
    char *p = rt__ox_alloc(cv, n + 1);
    memcpy(p, s, n + 1);
    return p;
}

char *rt__ox_printf(rt__ox_conv *cv, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = rt__ox_alloc(cv, (size_t)(n > 0 ? n : 0) + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

static void arena_free(rt__ox_conv *cv) {
    while (cv->arena) {
        rt__ox_block *n = cv->arena->next;
        free(cv->arena);
        cv->arena = n;
    }
}

/* Grows a pointer/struct array held in the arena (old copy is abandoned to
 * the arena; arrays are small). */
static void *grow(rt__ox_conv *cv, void *arr, size_t elem, size_t *cap, size_t need) {
    if (need <= *cap) return arr;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = rt__ox_alloc(cv, nc * elem);
    if (arr) memcpy(p, arr, *cap * elem);
    *cap = nc;
    return p;
}

ms_status rt__ox_err(rt__ox_conv *cv, ms_status c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = cv->cur;
    if (n == NULL) return ms_errf(c, "%s", msg);
    return ms_errf(c, "ONNX node \"%s\" (op %s): %s", n->name ? n->name : "",
                   n->op_type ? n->op_type : "?", msg);
}

/* ======================================================================
 * Values
 * ====================================================================== */

rt__ox_value *rt__ox_find(rt__ox_conv *cv, const char *name) {
    for (size_t i = cv->nvals; i-- > 0;)
        if (strcmp(cv->vals[i]->name, name) == 0) return cv->vals[i];
    return NULL;
}

rt__ox_value *rt__ox_define(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                            const int64_t *dims) {
    rt__ox_value *v = rt__ox_find(cv, name);
    if (v == NULL) {
        cv->vals = grow(cv, cv->vals, sizeof(*cv->vals), &cv->capvals, cv->nvals + 1);
        v = rt__ox_alloc(cv, sizeof(*v));
        cv->vals[cv->nvals++] = v;
        v->name = rt__ox_strdup(cv, name);
    }
    const char *nm = v->name;
    memset(v, 0, sizeof(*v));
    v->name = nm;
    v->dt = dt;
    v->rank = rank;
    for (int i = 0; i < rank && i < RT_MAX_RANK; i++)
        v->dim[i] = dims ? dims[i] : -1;
    return v;
}

int64_t rt__ox_nelem(const rt__ox_value *v) {
    if (v->rank < 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) {
        if (v->dim[i] < 0 || __builtin_mul_overflow(n, v->dim[i], &n)) return -1;
    }
    return n;
}

int rt__ox_is_const(const rt__ox_value *v) {
    if (v->f) return 1;
    if (!v->iv) return 0;
    int64_t n = rt__ox_nelem(v);
    for (int64_t i = 0; i < n; i++)
        if (!v->ik[i]) return 0;
    return 1;
}

/* x (a rank-4 tensor of logical dims d) in the other layout. When C == 1 or
 * H == W == 1 both layouts have the same memory order and a Reshape (a view)
 * does; otherwise a Transpose. */
static const char *relayout(rt__ox_conv *cv, const rt__ox_value *v, const char *x, int to_nhwc) {
    const int64_t *d = v->dim;
    int unknown = 0;
    for (int i = 0; i < 4; i++)
        unknown += d[i] < 0;
    const char *hint = rt__ox_printf(cv, "%s/%s", v->name, to_nhwc ? "to_nhwc" : "to_nchw");
    if ((d[1] == 1 || (d[2] == 1 && d[3] == 1)) && unknown <= 1) {
        int64_t t[4];
        if (to_nhwc)
            t[0] = d[0], t[1] = d[2], t[2] = d[3], t[3] = d[1];
        else
            memcpy(t, d, sizeof(t));
        return rt__tf_reshape(cv, hint, x, v->dt, 4, t);
    }
    static const int64_t p_nhwc[4] = {0, 2, 3, 1}, p_nchw[4] = {0, 3, 1, 2};
    return rt__tf_transpose(cv, hint, x, v->dt, 4, to_nhwc ? p_nhwc : p_nchw);
}

ms_status rt__ox_tf(rt__ox_conv *cv, rt__ox_value *v, const char **out) {
    if (v->nhwc) {
        if (v->tf_alt == NULL) v->tf_alt = relayout(cv, v, v->tf, 0);
        *out = v->tf_alt;
        return MS_OK;
    }
    if (v->tf == NULL) {
        if (v->f) {
            v->tf = rt__tf_const_f32(cv, v->name, v->rank, v->dim, v->f);
        } else if (v->iv && rt__ox_is_const(v)) {
            v->tf = rt__tf_const_int(cv, v->name, v->dt, v->rank, v->dim, v->iv);
        } else if (v->iv) {
            return rt__ox_err(cv, MS_ENOTSUP,
                              "value \"%s\" is computed from a dynamic shape and is needed as a "
                              "tensor; only static shape arithmetic is supported",
                              v->name);
        } else {
            return rt__ox_err(cv, MS_EINTERNAL, "value \"%s\" has no tensor", v->name);
        }
    }
    *out = v->tf;
    return MS_OK;
}

ms_status rt__ox_tf_nhwc(rt__ox_conv *cv, rt__ox_value *v, const char **out) {
    if (v->rank != 4) return rt__ox_err(cv, MS_EINTERNAL, "value \"%s\" is not 4-D", v->name);
    if (v->nhwc) {
        *out = v->tf;
        return MS_OK;
    }
    if (v->tf_alt == NULL) {
        if (v->f && rt__ox_nelem(v) >= 0) {
            const int64_t *d = v->dim;
            int64_t t[4] = {d[0], d[2], d[3], d[1]};
            float *f = rt__ox_alloc(cv, (size_t)rt__ox_nelem(v) * sizeof(float) + 4);
            for (int64_t a = 0; a < d[0]; a++)
                for (int64_t c = 0; c < d[1]; c++)
                    for (int64_t y = 0; y < d[2]; y++)
                        for (int64_t x = 0; x < d[3]; x++)
                            f[((a * d[2] + y) * d[3] + x) * d[1] + c] =
                                v->f[((a * d[1] + c) * d[2] + y) * d[3] + x];
            v->tf_alt = rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/nhwc", v->name), 4, t, f);
        } else {
            const char *x;
            ms_status st = rt__ox_tf(cv, v, &x);
            if (st != MS_OK) return st;
            v->tf_alt = relayout(cv, v, x, 1);
        }
    }
    *out = v->tf_alt;
    return MS_OK;
}

/* ======================================================================
 * ONNX attributes and tensors
 * ====================================================================== */

rt__ox_value *rt__ox_in(rt__ox_conv *cv, const Onnx__NodeProto *n, int i) {
    if (i < 0 || (size_t)i >= n->n_input || n->input[i] == NULL || n->input[i][0] == '\0')
        return NULL;
    return rt__ox_find(cv, n->input[i]);
}

const Onnx__AttributeProto *rt__ox_attr(const Onnx__NodeProto *n, const char *key) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, key) == 0)
            return n->attribute[i];
    return NULL;
}

int64_t rt__ox_attr_i(const Onnx__NodeProto *n, const char *key, int64_t dflt) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    return a && a->has_i ? a->i : dflt;
}

float rt__ox_attr_f(const Onnx__NodeProto *n, const char *key, float dflt) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    return a && a->has_f ? a->f : dflt;
}

int rt__ox_attr_is(const Onnx__NodeProto *n, const char *key, const char *s, const char *dflt) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    if (a == NULL || !a->has_s) return dflt != NULL && strcmp(dflt, s) == 0;
    return a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

int rt__ox_attr_ints(const Onnx__NodeProto *n, const char *key, int64_t *out, int max) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    if (a == NULL) return -1;
    for (size_t i = 0; i < a->n_ints && (int)i < max; i++)
        out[i] = a->ints[i];
    return (int)a->n_ints;
}

static rt_dtype onnx_dtype(int32_t t) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return RT_DT_FLOAT;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        return RT_DT_UINT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        return RT_DT_INT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        return RT_DT_UINT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        return RT_DT_INT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return RT_DT_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return RT_DT_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__STRING:
        return RT_DT_STRING;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return RT_DT_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        return RT_DT_HALF;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return RT_DT_DOUBLE;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return RT_DT_UINT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        return RT_DT_UINT64;
    default:
        return RT_DT_INVALID;
    }
}

/* Reads `len` bytes at `off` of an external data file into the arena. */
static ms_status read_external(rt__ox_conv *cv, const Onnx__TensorProto *t, size_t want,
                               uint8_t **out) {
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (e->key == NULL || e->value == NULL) continue;
        if (strcmp(e->key, "location") == 0)
            loc = e->value;
        else if (strcmp(e->key, "offset") == 0)
            off = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0)
            len = strtoll(e->value, NULL, 10);
    }
    const char *tn = t->name ? t->name : "";
    if (cv->model_dir == NULL)
        return ms_errf(MS_EINVAL, "initializer \"%s\": external data needs the model's folder", tn);
    if (loc == NULL || loc[0] == '\0')
        return ms_errf(MS_EINVAL, "initializer \"%s\": external data without a location", tn);
    /* The spec puts the file beside the model; refuse paths that leave it. */
    if (loc[0] == '/' || strstr(loc, "..") != NULL)
        return ms_errf(MS_EINVAL,
                       "initializer \"%s\": external data location \"%s\" must be a relative "
                       "path inside the model's folder",
                       tn, loc);
    if (len >= 0 && (size_t)len != want)
        return ms_errf(MS_EINVAL, "initializer \"%s\": external length %lld, expected %zu bytes",
                       tn, (long long)len, want);
    char *path = rt__ox_printf(cv, "%s/%s", cv->model_dir, loc);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_errf(MS_ENOTFOUND, "initializer \"%s\": cannot open external data %s: %s", tn,
                       path, strerror(errno));
    uint8_t *buf = rt__ox_alloc(cv, want ? want : 1);
    int ok = off >= 0 && fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, want, f) == want;
    fclose(f);
    if (!ok)
        return ms_errf(MS_EINVAL,
                       "initializer \"%s\": external data %s too short (%zu bytes at "
                       "offset %lld)",
                       tn, path, want, (long long)off);
    *out = buf;
    return MS_OK;
}

ms_status rt__ox_load_tensor(rt__ox_conv *cv, const Onnx__TensorProto *t, rt__ox_value *v) {
    const char *tn = t->name ? t->name : "";
    rt_dtype dt = onnx_dtype(t->data_type);
    if (t->n_dims > RT_MAX_RANK)
        return ms_errf(MS_ENOTSUP, "tensor \"%s\": rank %zu > %d", tn, t->n_dims, RT_MAX_RANK);
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > INT32_MAX ||
            (t->dims[i] > 0 && n > INT64_MAX / 16 / t->dims[i]))
            return ms_errf(MS_EINVAL, "tensor \"%s\": bad dims", tn);
        n *= t->dims[i];
    }
    v->dt = dt;
    v->rank = (int)t->n_dims;
    for (size_t i = 0; i < t->n_dims; i++)
        v->dim[i] = t->dims[i];
    size_t esz;
    switch (dt) {
    case RT_DT_FLOAT:
    case RT_DT_INT32:
        esz = 4;
        break;
    case RT_DT_INT64:
        esz = 8;
        break;
    case RT_DT_BOOL:
    case RT_DT_UINT8:
    case RT_DT_INT8:
        esz = 1;
        break;
    case RT_DT_INT16:
    case RT_DT_UINT16:
        esz = 2;
        break;
    default:
        return ms_errf(MS_ENOTSUP, "tensor \"%s\": data type %d (%s) is not supported", tn,
                       (int)t->data_type, rt_dtype_name(dt));
    }
    const uint8_t *raw = NULL;
    size_t want = (size_t)n * esz;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        uint8_t *buf = NULL;
        ms_status st = read_external(cv, t, want, &buf);
        if (st != MS_OK) return st;
        raw = buf;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != want)
            return ms_errf(MS_EINVAL, "tensor \"%s\": raw_data has %zu bytes, dims need %zu", tn,
                           t->raw_data.len, want);
        raw = t->raw_data.data;
    }
    /* Check the value count before allocating for it (dims come from the file). */
    if (raw == NULL) {
        size_t have = dt == RT_DT_FLOAT   ? t->n_float_data
                      : dt == RT_DT_INT64 ? t->n_int64_data
                                          : t->n_int32_data;
        if ((int64_t)have != n)
            return ms_errf(MS_EINVAL, "tensor \"%s\": %zu values, dims need %lld", tn, have,
                           (long long)n);
    }
    if (dt == RT_DT_FLOAT) {
        v->f = rt__ox_alloc(cv, (size_t)n * sizeof(float));
        if (want == 0) {
            /* empty tensor (e.g. Resize's unused roi): nothing to copy */
        } else if (raw) {
            memcpy(v->f, raw, want); /* ONNX raw data is little-endian, like this host */
        } else if ((int64_t)t->n_float_data == n) {
            memcpy(v->f, t->float_data, want);
        } else {
            return ms_errf(MS_EINVAL, "tensor \"%s\": %zu float values, dims need %lld", tn,
                           t->n_float_data, (long long)n);
        }
        return MS_OK;
    }
    v->iv = rt__ox_alloc(cv, (size_t)n * sizeof(int64_t));
    v->ik = rt__ox_alloc(cv, (size_t)n);
    memset(v->ik, 1, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t x;
        if (raw) {
            const uint8_t *p = raw + i * (int64_t)esz;
            switch (dt) {
            case RT_DT_INT64: {
                int64_t q;
                memcpy(&q, p, 8);
                x = q;
                break;
            }
            case RT_DT_INT32: {
                int32_t q;
                memcpy(&q, p, 4);
                x = q;
                break;
            }
            case RT_DT_INT16: {
                int16_t q;
                memcpy(&q, p, 2);
                x = q;
                break;
            }
            case RT_DT_UINT16: {
                uint16_t q;
                memcpy(&q, p, 2);
                x = q;
                break;
            }
            case RT_DT_INT8:
                x = (int8_t)p[0];
                break;
            default:
                x = p[0];
                break;
            }
        } else if (dt == RT_DT_INT64) {
            if ((int64_t)t->n_int64_data != n) goto count;
            x = t->int64_data[i];
        } else {
            if ((int64_t)t->n_int32_data != n) goto count;
            x = t->int32_data[i];
        }
        v->iv[i] = x;
    }
    return MS_OK;
count:
    return ms_errf(MS_EINVAL, "tensor \"%s\": value count does not match dims", tn);
}

/* ======================================================================
 * TF emission
 * ====================================================================== */

static int name_taken(rt__ox_conv *cv, const char *s) {
    for (size_t i = 0; i < cv->nnodes; i++)
        if (strcmp(cv->nodes[i]->name, s) == 0) return 1;
    return 0;
}

/* TF node names: [A-Za-z0-9.][A-Za-z0-9_./-]*; ':' would clash with ports. */
static char *sanitize(rt__ox_conv *cv, const char *hint) {
    if (hint == NULL || hint[0] == '\0') hint = "node";
    size_t n = strlen(hint);
    char *s = rt__ox_alloc(cv, n + 2);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        char c = hint[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-' || c == '/';
        if (j == 0 && (c == '/' || c == '_' || c == '-')) continue;
        s[j++] = ok ? c : '_';
    }
    while (j > 0 && s[j - 1] == '/')
        j--;
    if (j == 0) s[j++] = 'n';
    s[j] = '\0';
    return s;
}

Tensorflow__NodeDef *rt__tf_node(rt__ox_conv *cv, const char *op, const char *hint) {
    char *base = sanitize(cv, hint);
    char *name = base;
    for (int k = 1; name_taken(cv, name); k++)
        name = rt__ox_printf(cv, "%s_%d", base, k);
    Tensorflow__NodeDef *nd = rt__ox_alloc(cv, sizeof(*nd));
    tensorflow__node_def__init(nd);
    nd->name = name;
    nd->op = rt__ox_strdup(cv, op);
    cv->nodes = grow(cv, cv->nodes, sizeof(*cv->nodes), &cv->capnodes, cv->nnodes + 1);
    cv->nodes[cv->nnodes++] = nd;
    return nd;
}

void rt__tf_input(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *tensor) {
    char **in = rt__ox_alloc(cv, (nd->n_input + 1) * sizeof(char *));
    if (nd->n_input) memcpy(in, nd->input, nd->n_input * sizeof(char *));
    in[nd->n_input++] = rt__ox_strdup(cv, tensor);
    nd->input = in;
}

static Tensorflow__AttrValue *new_attr(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key) {
    Tensorflow__NodeDef__AttrEntry **a =
        rt__ox_alloc(cv, (nd->n_attr + 1) * sizeof(Tensorflow__NodeDef__AttrEntry *));
    if (nd->n_attr) memcpy(a, nd->attr, nd->n_attr * sizeof(*a));
    Tensorflow__NodeDef__AttrEntry *e = rt__ox_alloc(cv, sizeof(*e));
    tensorflow__node_def__attr_entry__init(e);
    e->key = rt__ox_strdup(cv, key);
    e->value = rt__ox_alloc(cv, sizeof(*e->value));
    tensorflow__attr_value__init(e->value);
    a[nd->n_attr++] = e;
    nd->attr = a;
    return e->value;
}

void rt__tf_attr_type(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, rt_dtype dt) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)dt;
}

void rt__tf_attr_i(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int64_t x) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = x;
}

void rt__tf_attr_f(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, float x) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    v->f = x;
}

void rt__tf_attr_b(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int x) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = x != 0;
}

void rt__tf_attr_s(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const char *s) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)rt__ox_strdup(cv, s);
    v->s.len = strlen(s);
}

void rt__tf_attr_ilist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const int64_t *x,
                       int n) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = rt__ox_alloc(cv, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_i = (size_t)n;
    v->list->i = rt__ox_alloc(cv, (size_t)n * sizeof(int64_t) + 1);
    if (n) memcpy(v->list->i, x, (size_t)n * sizeof(int64_t));
}

static Tensorflow__TensorShapeProto *shape_proto(rt__ox_conv *cv, int rank, const int64_t *dims) {
    Tensorflow__TensorShapeProto *s = rt__ox_alloc(cv, sizeof(*s));
    tensorflow__tensor_shape_proto__init(s);
    if (rank < 0) {
        s->unknown_rank = 1;
        return s;
    }
    s->n_dim = (size_t)rank;
    s->dim = rt__ox_alloc(cv, (size_t)rank * sizeof(*s->dim) + 1);
    for (int i = 0; i < rank; i++) {
        s->dim[i] = rt__ox_alloc(cv, sizeof(*s->dim[i]));
        tensorflow__tensor_shape_proto__dim__init(s->dim[i]);
        s->dim[i]->size = dims[i] < 0 ? -1 : dims[i];
    }
    return s;
}

void rt__tf_attr_shape(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int rank,
                       const int64_t *dims) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = shape_proto(cv, rank, dims);
}

const char *rt__tf_out(rt__ox_conv *cv, const Tensorflow__NodeDef *nd, int i) {
    if (i == 0) return nd->name;
    return rt__ox_printf(cv, "%s:%d", nd->name, i);
}

static const char *const_node(rt__ox_conv *cv, const char *hint, rt_dtype dt, int rank,
                              const int64_t *dims, const void *bytes, size_t nbytes) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Const", hint);
    rt__tf_attr_type(cv, nd, "dtype", dt);
    Tensorflow__AttrValue *v = new_attr(cv, nd, "value");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v->tensor = rt__ox_alloc(cv, sizeof(*v->tensor));
    tensorflow__tensor_proto__init(v->tensor);
    v->tensor->dtype = (Tensorflow__DataType)dt;
    v->tensor->tensor_shape = shape_proto(cv, rank, dims);
    uint8_t *copy = rt__ox_alloc(cv, nbytes ? nbytes : 1);
    if (nbytes) memcpy(copy, bytes, nbytes);
    v->tensor->tensor_content.data = copy;
    v->tensor->tensor_content.len = nbytes;
    return nd->name;
}

static int64_t dims_nelem(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

const char *rt__tf_const_f32(rt__ox_conv *cv, const char *hint, int rank, const int64_t *dims,
                             const float *v) {
    return const_node(cv, hint, RT_DT_FLOAT, rank, dims, v,
                      (size_t)dims_nelem(rank, dims) * sizeof(float));
}

const char *rt__tf_const_int(rt__ox_conv *cv, const char *hint, rt_dtype dt, int rank,
                             const int64_t *dims, const int64_t *v) {
    int64_t n = dims_nelem(rank, dims);
    if (dt == RT_DT_INT64) return const_node(cv, hint, dt, rank, dims, v, (size_t)n * 8);
    if (dt == RT_DT_BOOL || dt == RT_DT_UINT8 || dt == RT_DT_INT8) {
        uint8_t *b = rt__ox_alloc(cv, (size_t)n + 1);
        for (int64_t i = 0; i < n; i++)
            b[i] = (uint8_t)v[i];
        return const_node(cv, hint, dt, rank, dims, b, (size_t)n);
    }
    /* Everything else narrows to int32 (TF shape and index inputs). */
    int32_t *q = rt__ox_alloc(cv, (size_t)n * 4 + 4);
    for (int64_t i = 0; i < n; i++)
        q[i] = (int32_t)v[i];
    return const_node(cv, hint, RT_DT_INT32, rank, dims, q, (size_t)n * 4);
}

const char *rt__tf_i32vec(rt__ox_conv *cv, const char *hint, int n, const int64_t *v) {
    int64_t d = n;
    return rt__tf_const_int(cv, hint, RT_DT_INT32, 1, &d, v);
}

const char *rt__tf_i32(rt__ox_conv *cv, const char *hint, int64_t v) {
    return rt__tf_const_int(cv, hint, RT_DT_INT32, 0, NULL, &v);
}

const char *rt__tf_unary(rt__ox_conv *cv, const char *op, const char *hint, const char *x,
                         rt_dtype dt) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, hint);
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", dt);
    return nd->name;
}

const char *rt__tf_binary(rt__ox_conv *cv, const char *op, const char *hint, const char *a,
                          const char *b, rt_dtype dt) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, hint);
    rt__tf_input(cv, nd, a);
    rt__tf_input(cv, nd, b);
    rt__tf_attr_type(cv, nd, "T", dt);
    return nd->name;
}

const char *rt__tf_transpose(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int n,
                             const int64_t *perm) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Transpose", hint);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/perm", nd->name), n, perm));
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "Tperm", RT_DT_INT32);
    return nd->name;
}

const char *rt__tf_reshape(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int n,
                           const int64_t *dims) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Reshape", hint);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/shape", nd->name), n, dims));
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "Tshape", RT_DT_INT32);
    return nd->name;
}

/* ======================================================================
 * Graph conversion and SavedModel assembly
 * ====================================================================== */

static ms_status read_whole(const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 20;
            uint8_t *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return ms_errf(MS_ENOMEM, "reading %s: out of memory", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ms_errf(MS_EINVAL, "reading %s failed", path);
    }
    *data = buf;
    *len = n;
    return MS_OK;
}

/* Type and shape of an ONNX graph input/output; unknown dims become -1. */
static ms_status value_info(const Onnx__ValueInfoProto *vi, rt_dtype *dt, int *rank,
                            int64_t *dims) {
    const char *nm = vi->name ? vi->name : "";
    if (vi->type == NULL || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return ms_errf(MS_ENOTSUP, "graph input/output \"%s\" is not a tensor", nm);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    *dt = onnx_dtype(tt->has_elem_type ? tt->elem_type : 0);
    if (tt->shape == NULL) {
        *rank = -1;
        return MS_OK;
    }
    if (tt->shape->n_dim > RT_MAX_RANK)
        return ms_errf(MS_ENOTSUP, "graph input/output \"%s\": rank > %d", nm, RT_MAX_RANK);
    *rank = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        dims[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                      ? d->dim_value
                      : -1;
        if (dims[i] > INT32_MAX || dims[i] < -1)
            return ms_errf(MS_EINVAL, "graph input/output \"%s\": dim %zu = %lld out of range", nm,
                           i, (long long)dims[i]);
    }
    return MS_OK;
}

static Tensorflow__TensorInfo *tensor_info(rt__ox_conv *cv, const char *tensor, rt_dtype dt,
                                           int rank, const int64_t *dims) {
    Tensorflow__TensorInfo *ti = rt__ox_alloc(cv, sizeof(*ti));
    tensorflow__tensor_info__init(ti);
    ti->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
    ti->name = strchr(tensor, ':') ? rt__ox_strdup(cv, tensor) : rt__ox_printf(cv, "%s:0", tensor);
    ti->dtype = (Tensorflow__DataType)dt;
    ti->tensor_shape = shape_proto(cv, rank, dims);
    return ti;
}

/* --dicom_input: Placeholder(DT_STRING [-1]) -> DcmDecodeHU -> DcmWindow,
 * defining the ONNX input value from the windowed images. Fills the
 * signature entry (DT_STRING, [-1]). */
static ms_status dicom_front(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                             const int64_t *dims, Tensorflow__SignatureDef__InputsEntry *e) {
    const rt_onnx_opts *o = cv->opts;
    if (dt != RT_DT_FLOAT || rank != 4)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s: the model input must be a 4-D float "
                       "tensor (got rank %d, %s)",
                       name, rank, rt_dtype_name(dt));
    int hx = o->dicom_nhwc ? 1 : 2, cx = o->dicom_nhwc ? 3 : 1;
    int64_t d[4];
    memcpy(d, dims, sizeof(d));
    d[0] = -1;
    if (o->size_h > 0) {
        for (int a = 0; a < 2; a++) {
            int64_t want = a ? o->size_w : o->size_h;
            if (d[hx + a] >= 0 && d[hx + a] != want)
                return ms_errf(MS_EINVAL,
                               "--size %lldx%lld does not match the model input %s "
                               "(%s %lld)",
                               (long long)o->size_h, (long long)o->size_w, name,
                               a ? "width" : "height", (long long)d[hx + a]);
            d[hx + a] = want;
        }
    }
    if (d[cx] >= 0 && d[cx] != 1 && d[cx] != 3)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s: the model wants %lld channels; DICOM "
                       "images give 1 (grey) or 3 (colour)",
                       name, (long long)d[cx]);
    Tensorflow__NodeDef *ph = rt__tf_node(cv, "Placeholder", name);
    rt__tf_attr_type(cv, ph, "dtype", RT_DT_STRING);
    int64_t one = -1;
    rt__tf_attr_shape(cv, ph, "shape", 1, &one);
    Tensorflow__NodeDef *dec =
        rt__tf_node(cv, "DcmDecodeHU", rt__ox_printf(cv, "%s/decode", ph->name));
    rt__tf_input(cv, dec, ph->name);
    rt__tf_attr_i(cv, dec, "frame", 0);
    Tensorflow__NodeDef *win =
        rt__tf_node(cv, "DcmWindow", rt__ox_printf(cv, "%s/window", ph->name));
    rt__tf_input(cv, win, dec->name);
    rt__tf_input(cv, win, rt__tf_out(cv, dec, 1));
    rt__tf_attr_f(cv, win, "center", o->window_center);
    rt__tf_attr_f(cv, win, "width", o->window_width);
    /* The windowed batch is NHWC unless the graph keeps ONNX's NCHW. */
    int chw_last = o->dicom_nhwc || cv->nhwc;
    rt__tf_attr_s(cv, win, "data_format", chw_last ? "NHWC" : "NCHW");
    if (o->size_h > 0) {
        int64_t sz[2] = {o->size_h, o->size_w};
        rt__tf_attr_ilist(cv, win, "size", sz, 2);
    }
    rt__ox_value *v = rt__ox_define(cv, name, RT_DT_FLOAT, 4, d);
    v->tf = win->name;
    v->nhwc = !o->dicom_nhwc && cv->nhwc;
    cv->dicom_used = 1;
    tensorflow__signature_def__inputs_entry__init(e);
    e->key = rt__ox_strdup(cv, name);
    e->value = tensor_info(cv, ph->name, RT_DT_STRING, 1, &one);
    return MS_OK;
}

/* OpDef of DcmDecodeHU for the MetaGraph's stripped_op_list, so that a
 * loader knows its two outputs. */
static Tensorflow__OpList *dicom_oplist(rt__ox_conv *cv) {
    Tensorflow__OpList *l = rt__ox_alloc(cv, sizeof(*l));
    tensorflow__op_list__init(l);
    Tensorflow__OpDef *od = rt__ox_alloc(cv, sizeof(*od));
    tensorflow__op_def__init(od);
    od->name = rt__ox_strdup(cv, "DcmDecodeHU");
    static const char *const outs[2] = {"hu", "mask"};
    od->n_input_arg = 1;
    od->input_arg = rt__ox_alloc(cv, sizeof(*od->input_arg));
    od->n_output_arg = 2;
    od->output_arg = rt__ox_alloc(cv, 2 * sizeof(*od->output_arg));
    for (int i = 0; i < 3; i++) {
        Tensorflow__OpDef__ArgDef *a = rt__ox_alloc(cv, sizeof(*a));
        tensorflow__op_def__arg_def__init(a);
        a->name = rt__ox_strdup(cv, i == 0 ? "contents" : outs[i - 1]);
        a->type = i == 0 ? TENSORFLOW__DATA_TYPE__DT_STRING : TENSORFLOW__DATA_TYPE__DT_FLOAT;
        if (i == 0)
            od->input_arg[0] = a;
        else
            od->output_arg[i - 1] = a;
    }
    od->is_stateful = 0;
    l->n_op = 1;
    l->op = rt__ox_alloc(cv, sizeof(*l->op));
    l->op[0] = od;
    return l;
}

static int is_initializer(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0) return 1;
    return 0;
}

static int consumers(const Onnx__GraphProto *g, const char *name) {
    int c = 0;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++)
            if (g->node[i]->input[k] && strcmp(g->node[i]->input[k], name) == 0) c++;
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && strcmp(g->output[i]->name, name) == 0) c++;
    return c;
}

static const rt__ox_value *const_float_input(rt__ox_conv *cv, const Onnx__NodeProto *n, size_t i) {
    if (i >= n->n_input || n->input[i] == NULL || n->input[i][0] == '\0') return NULL;
    const rt__ox_value *v = rt__ox_find(cv, n->input[i]);
    return v && v->f ? v : NULL;
}

/* Inference-time BatchNormalization right after a Conv (whose output feeds
 * nothing else) folds into the Conv's weights and bias, as ONNX Runtime's
 * graph optimiser does: W'[m] = W[m] * a[m], b' = (b - mean) * a + beta with
 * a = gamma / sqrt(var + eps). The Conv then writes the BN's output and the
 * BN node is skipped (skip[i] = 1). nodes[] starts as the graph's node
 * list; a rewritten Conv is replaced there by an arena copy, so the unpacked
 * model itself is never modified. */
static void fold_batchnorm(rt__ox_conv *cv, const Onnx__GraphProto *g, Onnx__NodeProto **nodes,
                           uint8_t *skip) {
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *bn = g->node[i];
        if (strcmp(bn->op_type ? bn->op_type : "", "BatchNormalization") != 0 || bn->n_input != 5 ||
            bn->n_output < 1 || rt__ox_attr_i(bn, "training_mode", 0) != 0)
            continue;
        if (bn->n_output > 1) continue; /* running stats requested: leave alone */
        const Onnx__NodeProto *conv = NULL;
        size_t ci = 0;
        for (size_t k = 0; k < i; k++)
            if (g->node[k]->n_output >= 1 && g->node[k]->output[0] &&
                strcmp(g->node[k]->output[0], bn->input[0]) == 0)
                conv = g->node[k], ci = k;
        if (conv == NULL || strcmp(conv->op_type ? conv->op_type : "", "Conv") != 0 ||
            conv->n_output != 1 || consumers(g, bn->input[0]) != 1)
            continue;
        const rt__ox_value *W = const_float_input(cv, conv, 1), *B = const_float_input(cv, conv, 2);
        const rt__ox_value *p[4];
        int ok = W != NULL && W->rank == 4 &&
                 (conv->n_input < 3 || B != NULL || conv->input[2][0] == '\0');
        for (int k = 0; k < 4 && ok; k++)
            ok = (p[k] = const_float_input(cv, bn, (size_t)k + 1)) != NULL;
        int64_t M = ok ? W->dim[0] : 0;
        for (int k = 0; k < 4 && ok; k++)
            ok = rt__ox_nelem(p[k]) == M;
        if (!ok || (B != NULL && rt__ox_nelem(B) != M)) continue;
        float eps = rt__ox_attr_f(bn, "epsilon", 1e-5f);
        int64_t per = rt__ox_nelem(W) / M;
        const char *wn = rt__ox_printf(cv, "%s/bn_folded_W", bn->output[0]);
        const char *bname = rt__ox_printf(cv, "%s/bn_folded_B", bn->output[0]);
        rt__ox_value *nw = rt__ox_define(cv, wn, RT_DT_FLOAT, 4, W->dim);
        rt__ox_value *nb = rt__ox_define(cv, bname, RT_DT_FLOAT, 1, &M);
        nw->f = rt__ox_alloc(cv, (size_t)(M * per) * sizeof(float));
        nb->f = rt__ox_alloc(cv, (size_t)M * sizeof(float));
        for (int64_t m = 0; m < M; m++) {
            /* Same float32 arithmetic order as a separate BN would use. */
            float a = p[0]->f[m] / sqrtf(p[3]->f[m] + eps);
            for (int64_t k = 0; k < per; k++)
                nw->f[m * per + k] = W->f[m * per + k] * a;
            nb->f[m] = ((B ? B->f[m] : 0.0f) - p[2]->f[m]) * a + p[1]->f[m];
        }
        Onnx__NodeProto *nc = rt__ox_alloc(cv, sizeof(*nc));
        *nc = *conv;
        char **in = rt__ox_alloc(cv, 3 * sizeof(char *));
        in[0] = conv->input[0];
        in[1] = (char *)wn;
        in[2] = (char *)bname;
        nc->input = in;
        nc->n_input = 3;
        char **out = rt__ox_alloc(cv, sizeof(char *));
        out[0] = bn->output[0];
        nc->output = out;
        nodes[ci] = nc;
        skip[i] = 1;
    }
}

static ms_status convert_graph(rt__ox_conv *cv, const Onnx__ModelProto *m,
                               Tensorflow__SignatureDef *sig) {
    const Onnx__GraphProto *g = m->graph;
    ms_status st;
    if (g == NULL) return ms_errf(MS_EINVAL, "ONNX model has no graph");
    const char *dicom = cv->opts->dicom_input;
    int dicom_found = 0;

    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (t->name == NULL || t->name[0] == '\0')
            return ms_errf(MS_EINVAL, "initializer %zu has no name", i);
        rt__ox_value *v = rt__ox_define(cv, t->name, RT_DT_INVALID, 0, NULL);
        if ((st = rt__ox_load_tensor(cv, t, v)) != MS_OK) return st;
    }

    /* Graph inputs (those that are not initializers) become Placeholders. */
    size_t nin = 0;
    Tensorflow__SignatureDef__InputsEntry **ins = rt__ox_alloc(cv, (g->n_input + 1) * sizeof(*ins));
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (vi->name == NULL || is_initializer(g, vi->name)) continue;
        rt_dtype dt;
        int rank;
        int64_t dims[RT_MAX_RANK];
        if ((st = value_info(vi, &dt, &rank, dims)) != MS_OK) return st;
        if (dicom && strcmp(dicom, vi->name) == 0) {
            ins[nin] = rt__ox_alloc(cv, sizeof(*ins[nin]));
            if ((st = dicom_front(cv, vi->name, dt, rank, dims, ins[nin])) != MS_OK) return st;
            nin++;
            dicom_found = 1;
            continue;
        }
        if (dt != RT_DT_FLOAT && dt != RT_DT_INT64 && dt != RT_DT_INT32)
            return ms_errf(MS_ENOTSUP, "graph input \"%s\": element type %s is not supported",
                           vi->name, rt_dtype_name(dt));
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "Placeholder", vi->name);
        rt__tf_attr_type(cv, nd, "dtype", dt);
        rt__tf_attr_shape(cv, nd, "shape", rank, dims);
        rt__ox_value *v = rt__ox_define(cv, vi->name, dt, rank, dims);
        v->tf = nd->name;
        Tensorflow__SignatureDef__InputsEntry *e = rt__ox_alloc(cv, sizeof(*e));
        tensorflow__signature_def__inputs_entry__init(e);
        e->key = rt__ox_strdup(cv, vi->name);
        e->value = tensor_info(cv, nd->name, dt, rank, dims);
        ins[nin++] = e;
    }
    if (nin == 0) return ms_errf(MS_EINVAL, "ONNX graph has no inputs");
    if (dicom && !dicom_found)
        return ms_errf(MS_EINVAL, "--dicom_input %s: the graph has no input of that name", dicom);

    Onnx__NodeProto **nodes = rt__ox_alloc(cv, (g->n_node + 1) * sizeof(*nodes));
    uint8_t *skip = rt__ox_alloc(cv, g->n_node + 1);
    if (g->n_node > 0) memcpy(nodes, g->node, g->n_node * sizeof(*nodes));
    fold_batchnorm(cv, g, nodes, skip);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = nodes[i];
        if (skip[i]) continue;
        cv->cur = n;
        const char *op = n->op_type ? n->op_type : "";
        if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
            return rt__ox_err(cv, MS_ENOTSUP, "operator domain \"%s\" is not supported", n->domain);
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && n->input[k][0] && rt__ox_find(cv, n->input[k]) == NULL)
                return rt__ox_err(cv, MS_EINVAL,
                                  "input \"%s\" is not produced by an earlier node (the graph "
                                  "must be topologically sorted)",
                                  n->input[k]);
        rt__ox_handler h = rt__ox_handler_for(op);
        if (h == NULL) return rt__ox_err(cv, MS_ENOTSUP, "unsupported ONNX op \"%s\"", op);
        if ((st = h(cv, n)) != MS_OK) return st;
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k] && n->output[k][0] && rt__ox_find(cv, n->output[k]) == NULL)
                return rt__ox_err(cv, MS_EINTERNAL, "output \"%s\" was not produced", n->output[k]);
    }
    cv->cur = NULL;

    /* Graph outputs: an Identity named after each, so the graph tensor
     * carries the ONNX name. */
    Tensorflow__SignatureDef__OutputsEntry **outs =
        rt__ox_alloc(cv, (g->n_output + 1) * sizeof(*outs));
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = g->output[i];
        rt__ox_value *v = vi->name ? rt__ox_find(cv, vi->name) : NULL;
        if (v == NULL)
            return ms_errf(MS_EINVAL, "graph output \"%s\" is not produced by any node",
                           vi->name ? vi->name : "");
        const char *src;
        if ((st = rt__ox_tf(cv, v, &src)) != MS_OK) return st;
        rt_dtype dt;
        int rank;
        int64_t dims[RT_MAX_RANK];
        if ((st = value_info(vi, &dt, &rank, dims)) != MS_OK) return st;
        if (dt == RT_DT_INVALID) dt = v->dt;
        if (rank < 0 && v->rank >= 0) {
            rank = v->rank;
            memcpy(dims, v->dim, sizeof(dims));
        }
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "Identity", vi->name);
        rt__tf_input(cv, nd, src);
        rt__tf_attr_type(cv, nd, "T", v->dt);
        outs[i] = rt__ox_alloc(cv, sizeof(*outs[i]));
        tensorflow__signature_def__outputs_entry__init(outs[i]);
        outs[i]->key = rt__ox_strdup(cv, vi->name);
        outs[i]->value = tensor_info(cv, nd->name, dt, rank, dims);
    }
    sig->n_inputs = nin;
    sig->inputs = ins;
    sig->n_outputs = g->n_output;
    sig->outputs = outs;
    sig->method_name = rt__ox_strdup(cv, "tensorflow/serving/predict");
    return MS_OK;
}

ms_status rt_onnx_convert(const char *onnx_path, const rt_onnx_opts *opts, uint8_t **pb,
                          size_t *pb_len) {
    uint8_t *data = NULL;
    size_t len = 0;
    ms_status st = read_whole(onnx_path, &data, &len);
    if (st != MS_OK) return st;
    char *dir = strdup(onnx_path);
    if (dir == NULL) {
        free(data);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    st = rt_onnx_convert_mem(data, len, slash ? dir : ".", onnx_path, opts, pb, pb_len);
    free(dir);
    free(data);
    return st;
}

ms_status rt_onnx_convert_mem(const uint8_t *data, size_t len, const char *model_dir,
                              const char *what, const rt_onnx_opts *opts, uint8_t **pb,
                              size_t *pb_len) {
    static const rt_onnx_opts no_opts;
    const char *volatile onnx_path = what ? what : "ONNX model";
    ms_status st;
    *pb = NULL;
    *pb_len = 0;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (m == NULL)
        return ms_errf(MS_EINVAL, "%s: not a valid ONNX model (protobuf parse failed)", onnx_path);

    /* volatile: read after a longjmp back here. */
    rt__ox_conv *volatile cv = calloc(1, sizeof(rt__ox_conv));
    if (cv == NULL) {
        onnx__model_proto__free_unpacked(m, NULL);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    if (setjmp(cv->oom) != 0) {
        st = ms_errf(MS_ENOMEM, "%s: out of memory while converting", onnx_path);
        goto done;
    }
    cv->opts = opts ? opts : &no_opts;
    cv->nhwc = !cv->opts->tf_nchw;
    cv->model_dir = model_dir ? rt__ox_strdup(cv, model_dir) : NULL;
    cv->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o->domain == NULL || o->domain[0] == '\0' || strcmp(o->domain, "ai.onnx") == 0)
            cv->opset = o->has_version ? o->version : -1;
    }
    if (cv->opset < 0) {
        st = ms_errf(MS_EINVAL, "%s: no opset_import for the default ONNX domain", onnx_path);
        goto done;
    }
    if (cv->opset < 7 || cv->opset > 18) {
        st = ms_errf(MS_ENOTSUP,
                     "%s: opset %lld is not supported (supported: 11-17; 7-10 and "
                     "18 where op semantics are unchanged)",
                     onnx_path, (long long)cv->opset);
        goto done;
    }

    Tensorflow__SignatureDef *sig = rt__ox_alloc(cv, sizeof(*sig));
    tensorflow__signature_def__init(sig);
    if ((st = convert_graph(cv, m, sig)) != MS_OK) {
        ms_errwrap(st, "%s", onnx_path);
        goto done;
    }
    rt__ox_fuse(cv);

    Tensorflow__GraphDef *gd = rt__ox_alloc(cv, sizeof(*gd));
    tensorflow__graph_def__init(gd);
    gd->n_node = cv->nnodes;
    gd->node = cv->nodes;
    gd->versions = rt__ox_alloc(cv, sizeof(*gd->versions));
    tensorflow__version_def__init(gd->versions);
    gd->versions->producer = 1087;

    Tensorflow__MetaGraphDef__MetaInfoDef *mi = rt__ox_alloc(cv, sizeof(*mi));
    tensorflow__meta_graph_def__meta_info_def__init(mi);
    mi->n_tags = 1;
    mi->tags = rt__ox_alloc(cv, sizeof(char *));
    mi->tags[0] = rt__ox_strdup(cv, "serve");
    mi->tensorflow_version = rt__ox_strdup(cv, "dcmserve-import-onnx");
    if (cv->dicom_used) mi->stripped_op_list = dicom_oplist(cv);

    Tensorflow__MetaGraphDef__SignatureDefEntry *se = rt__ox_alloc(cv, sizeof(*se));
    tensorflow__meta_graph_def__signature_def_entry__init(se);
    se->key = rt__ox_strdup(cv, "serving_default");
    se->value = sig;

    Tensorflow__MetaGraphDef *mg = rt__ox_alloc(cv, sizeof(*mg));
    tensorflow__meta_graph_def__init(mg);
    mg->meta_info_def = mi;
    mg->graph_def = gd;
    mg->n_signature_def = 1;
    mg->signature_def = rt__ox_alloc(cv, sizeof(*mg->signature_def));
    mg->signature_def[0] = se;

    Tensorflow__SavedModel sm = TENSORFLOW__SAVED_MODEL__INIT;
    sm.saved_model_schema_version = 1;
    sm.n_meta_graphs = 1;
    sm.meta_graphs = rt__ox_alloc(cv, sizeof(*sm.meta_graphs));
    sm.meta_graphs[0] = mg;

    size_t n = tensorflow__saved_model__get_packed_size(&sm);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory (%zu-byte SavedModel)", n);
        goto done;
    }
    tensorflow__saved_model__pack(&sm, buf);
    MS_DEBUG("import-onnx: %s: opset %lld, %zu ONNX nodes -> %zu TF nodes, %zu bytes", onnx_path,
             (long long)cv->opset, m->graph->n_node, cv->nnodes, n);
    *pb = buf;
    *pb_len = n;
    st = MS_OK;
done:
    arena_free(cv);
    free(cv);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

/* mkdir -p */
static ms_status make_dirs(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return ms_errf(MS_EINVAL, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ms_errf(MS_EINVAL, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return ms_errf(MS_EINVAL, "cannot create %s: %s", buf, strerror(errno));
    return MS_OK;
}

ms_status rt_onnx_import(const char *onnx_path, const char *export_dir, const rt_onnx_opts *opts) {
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(onnx_path, opts, &pb, &n);
    if (st != MS_OK) return st;
    char path[4096];
    if ((st = make_dirs(export_dir)) != MS_OK) goto out;
    snprintf(path, sizeof path, "%s/variables", export_dir);
    if ((st = make_dirs(path)) != MS_OK) goto out;
    /* An empty variables bundle (weights are Consts), as TensorFlow writes for
     * a model without variables: loaders that wait for variables.index to be
     * complete (the model manager) then accept the folder. */
    snprintf(path, sizeof path, "%s/variables/variables", export_dir);
    rt_bundle_writer *bw = NULL;
    if ((st = rt_bundle_writer_new(path, &bw)) != MS_OK ||
        (st = rt_bundle_writer_finish(bw)) != MS_OK) {
        ms_errwrap(st, "writing %s", path);
        goto out;
    }
    /* Write to a temporary name and rename, so a server polling the folder
     * never sees half a file. */
    snprintf(path, sizeof path, "%s/saved_model.pb.tmp", export_dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        st = ms_errf(MS_EINVAL, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    int ok = fwrite(pb, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    char final[4096];
    snprintf(final, sizeof final, "%s/saved_model.pb", export_dir);
    if (!ok || rename(path, final) != 0) {
        st = ms_errf(MS_EINVAL, "cannot write %s: %s", final, strerror(errno));
        remove(path);
    }
out:
    free(pb);
    return st;
}
