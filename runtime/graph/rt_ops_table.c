/* rt_ops_table.c - host ops: TensorFlow lookup tables (HashTableV2,
 * MutableHashTableV2, InitializeTableV2, LookupTableImportV2,
 * LookupTableInsertV2, LookupTableFindV2, LookupTableSizeV2).
 *
 * A table is model state like a variable: it lives in the model's rt_vars
 * under a name no TensorFlow node can have ("\x1ftable:" + shared_name or node
 * name) whose value is the keys tensor (1-D), with a second entry (name +
 * "\x1fv") holding the values tensor (1-D, same length). The table op outputs
 * a DT_RESOURCE scalar holding the keys entry. Lookups scan the keys
 * linearly: fine for the vocabularies seen in serving models, not for huge
 * tables. Keys are int64 or string; values int64, int32, float, double or
 * string. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_exec.h"
#include "rt_ops.h"

#define RT_ASSET_MAX_BYTES ((uint64_t)256 << 20) /* an asset (vocabulary) file read by a table op */

typedef struct table {
    rt_var *keys; /* value: 1-D keys or NULL before initialisation */
    rt_var *vals; /* value: 1-D values */
} table;

static ms_status table_of(kn_ctx *ctx, const kn_node *n, const rt_tensor *h, table *t) {
    rt_hostctx *hc = rt_hostctx_of(ctx);
    if (hc == NULL || hc->vars == NULL)
        return ms_errf(MS_EINVAL, "table op '%s' needs a loaded model", n->name);
    if (h->dtype != RT_DT_RESOURCE || h->nelem != 1 || *(rt_var **)h->data == NULL ||
        strncmp((*(rt_var **)h->data)->name, "\x1ftable:", 7) != 0)
        return ms_errf(MS_EINVAL, "'%s': input 0 is not a lookup table handle", n->name);
    t->keys = *(rt_var **)h->data;
    char buf[320];
    snprintf(buf, sizeof buf, "%s\x1fv", t->keys->name);
    t->vals = rt_vars_get(hc->vars, buf, RT_DT_INVALID);
    if (t->vals == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    return MS_OK;
}

static ms_status hash_table_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)st, (void)in;
    rt_hostctx *hc = rt_hostctx_of(ctx);
    if (hc == NULL || hc->vars == NULL)
        return ms_errf(MS_EINVAL, "table op '%s' needs a loaded model", n->name);
    rt_dtype kt = kn_attr_type(n, "key_dtype", RT_DT_INVALID);
    rt_dtype vt = kn_attr_type(n, "value_dtype", RT_DT_INVALID);
    if (kt != RT_DT_INT64 && kt != RT_DT_STRING)
        return ms_errf(MS_ENOTSUP, "'%s': key_dtype %s is not supported (int64 or string)",
                       n->name, rt_dtype_name(kt));
    if (vt != RT_DT_INT64 && vt != RT_DT_INT32 && vt != RT_DT_FLOAT && vt != RT_DT_DOUBLE &&
        vt != RT_DT_STRING)
        return ms_errf(MS_ENOTSUP,
                       "'%s': value_dtype %s is not supported (int64, int32, float, double, "
                       "string)",
                       n->name, rt_dtype_name(vt));
    size_t len;
    const char *s = kn_attr_s(n, "shared_name", &len);
    if (s == NULL || len == 0) s = n->name, len = strlen(n->name);
    char name[300];
    snprintf(name, sizeof name, "\x1ftable:%.*s", (int)(len > 250 ? 250 : len), s);
    rt_var *k = rt_vars_get(hc->vars, name, kt);
    if (k == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (k->dtype != kt)
        return ms_errf(MS_EINVAL, "'%s': table '%s' already exists with key_dtype %s, not %s",
                       n->name, name + 7, rt_dtype_name(k->dtype), rt_dtype_name(kt));
    char vname[320];
    snprintf(vname, sizeof vname, "%s\x1fv", name);
    rt_var *v = rt_vars_get(hc->vars, vname, vt);
    if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    rt_shape scalar = {0};
    ms_status r = rt_tensor_new(RT_DT_RESOURCE, &scalar, &out[0]);
    if (r != MS_OK) return r;
    *(rt_var **)out[0]->data = k;
    return MS_OK;
}

/* ---- elements ---- */

static int key_eq(const rt_tensor *a, int64_t i, const rt_tensor *b, int64_t j) {
    if (a->dtype == RT_DT_STRING) {
        const rt_str *x = (const rt_str *)a->data + i, *y = (const rt_str *)b->data + j;
        return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
    }
    return ((const int64_t *)a->data)[i] == ((const int64_t *)b->data)[j];
}

static int val_eq(const rt_tensor *a, int64_t i, const rt_tensor *b, int64_t j) {
    if (a->dtype == RT_DT_STRING) return key_eq(a, i, b, j);
    size_t es = rt_dtype_size(a->dtype);
    return memcmp((const char *)a->data + i * es, (const char *)b->data + j * es, es) == 0;
}

/* Index of key j of `q` in the table's keys, or -1. */
static int64_t find_key(const rt_tensor *keys, const rt_tensor *q, int64_t j) {
    if (keys == NULL) return -1;
    for (int64_t i = 0; i < keys->nelem; i++)
        if (key_eq(keys, i, q, j)) return i;
    return -1;
}

static ms_status check_kv(const kn_node *n, const table *t, const rt_tensor *k, const rt_tensor *v) {
    char a[128], b[128];
    if (k->dtype != t->keys->dtype)
        return ms_errf(MS_EINVAL, "'%s': keys must be %s, got %s", n->name,
                       rt_dtype_name(t->keys->dtype), rt_dtype_name(k->dtype));
    if (v->dtype != t->vals->dtype)
        return ms_errf(MS_EINVAL, "'%s': values must be %s, got %s", n->name,
                       rt_dtype_name(t->vals->dtype), rt_dtype_name(v->dtype));
    if (!rt_shape_equal(&k->shape, &v->shape))
        return ms_errf(MS_EINVAL, "'%s': keys %s and values %s must have the same shape", n->name,
                       rt_shape_str(&k->shape, a, sizeof a), rt_shape_str(&v->shape, b, sizeof b));
    return MS_OK;
}

/* New 1-D tensor: elements [0, n) of src then `extra` (may be NULL) at
 * positions where take[j] is set. Used to build the merged keys/values. */
static ms_status concat_1d(const rt_tensor *src, const rt_tensor *extra, const uint8_t *take,
                           int64_t nextra, rt_dtype dt, rt_tensor **out) {
    int64_t n0 = src ? src->nelem : 0;
    rt_shape s = {.rank = 1, .dim = {n0 + nextra}};
    if (dt == RT_DT_STRING) {
        rt_str *tmp = calloc((size_t)(n0 + nextra) + 1, sizeof(rt_str));
        if (tmp == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        int64_t o = 0;
        for (int64_t i = 0; i < n0; i++) tmp[o++] = ((const rt_str *)src->data)[i];
        for (int64_t j = 0; extra && j < extra->nelem; j++)
            if (take[j]) tmp[o++] = ((const rt_str *)extra->data)[j];
        ms_status r = rt_tensor_new_strings(&s, tmp, out);
        free(tmp);
        return r;
    }
    ms_status r = rt_tensor_new(dt, &s, out);
    if (r != MS_OK) return r;
    size_t es = rt_dtype_size(dt);
    char *d = (*out)->data;
    if (n0) memcpy(d, src->data, (size_t)n0 * es);
    d += (size_t)n0 * es;
    for (int64_t j = 0; extra && j < extra->nelem; j++)
        if (take[j]) memcpy(d, (const char *)extra->data + j * es, es), d += es;
    return MS_OK;
}

typedef enum { PUT_INIT, PUT_IMPORT, PUT_INSERT } put_kind;

/* Writes keys in[1] -> values in[2] into the table. INIT: TensorFlow's
 * InitializeTableV2 - a second initialisation with the same entries is a
 * no-op, with other entries an error; INSERT adds or overwrites; IMPORT
 * replaces the whole contents. Duplicate keys inside one call: the first
 * wins for INIT/IMPORT (an INIT with conflicting values for one key fails),
 * the last wins for INSERT. */
static ms_status put(kn_ctx *ctx, const kn_node *n, rt_tensor *const *in, put_kind kind) {
    table t;
    ms_status r = table_of(ctx, n, in[0], &t);
    if (r != MS_OK) return r;
    const rt_tensor *k = in[1], *v = in[2];
    if ((r = check_kv(n, &t, k, v)) != MS_OK) return r;
    if (kind == PUT_INIT && t.keys->value != NULL) {
        int same = t.keys->value->nelem == k->nelem;
        for (int64_t j = 0; j < k->nelem && same; j++) {
            int64_t i = find_key(t.keys->value, k, j);
            same = i >= 0 && val_eq(t.vals->value, i, v, j);
        }
        if (same) return MS_OK;
        return ms_errf(MS_EPRECOND, "'%s': table was already initialised with different data",
                       n->name);
    }
    const rt_tensor *base_k = kind == PUT_IMPORT ? NULL : t.keys->value;
    const rt_tensor *base_v = kind == PUT_IMPORT ? NULL : t.vals->value;
    rt_tensor *bk = NULL, *bv = NULL;
    /* INSERT overwrites existing keys in private copies first. */
    if (kind == PUT_INSERT && base_k != NULL) {
        if ((r = concat_1d(base_k, NULL, NULL, 0, base_k->dtype, &bk)) != MS_OK) return r;
        if ((r = concat_1d(base_v, NULL, NULL, 0, base_v->dtype, &bv)) != MS_OK) goto done;
    }
    uint8_t *take = calloc((size_t)k->nelem + 1, 1);
    if (take == NULL) {
        r = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int64_t nnew = 0;
    for (int64_t j = 0; j < k->nelem; j++) {
        int64_t i = find_key(bk ? bk : base_k, k, j);
        if (i >= 0) {
            if (kind == PUT_INSERT) {
                if (v->dtype == RT_DT_STRING) {
                    /* string values: rebuild below by taking the new one */
                    ((rt_str *)bv->data)[i] = ((const rt_str *)v->data)[j];
                } else {
                    size_t es = rt_dtype_size(v->dtype);
                    memcpy((char *)bv->data + i * es, (const char *)v->data + j * es, es);
                }
            } else if (!val_eq(bk ? bv : base_v, i, v, j) && kind == PUT_INIT) {
                free(take);
                r = ms_errf(MS_EINVAL, "'%s': key %lld has two different values", n->name,
                            (long long)j);
                goto done;
            }
            continue;
        }
        int64_t prev = -1;
        for (int64_t p = 0; p < j && prev < 0; p++)
            if (take[p] && key_eq(k, p, k, j)) prev = p;
        if (prev >= 0) {
            if (kind == PUT_INSERT) take[prev] = 0, take[j] = 1;
            else if (kind == PUT_INIT && !val_eq(v, prev, v, j)) {
                free(take);
                r = ms_errf(MS_EINVAL, "'%s': key %lld has two different values", n->name,
                            (long long)j);
                goto done;
            }
            continue;
        }
        take[j] = 1, nnew++;
    }
    rt_tensor *nk = NULL, *nv = NULL;
    const rt_tensor *ck = bk ? bk : base_k, *cv = bv ? bv : base_v;
    r = concat_1d(ck, k, take, nnew, k->dtype, &nk);
    /* string values patched in bv point at the caller's bytes: concat copies them */
    if (r == MS_OK) r = concat_1d(cv, v, take, nnew, v->dtype, &nv);
    free(take);
    if (r != MS_OK) {
        rt_tensor_unref(nk);
        goto done;
    }
    rt_tensor_unref(t.keys->value);
    rt_tensor_unref(t.vals->value);
    t.keys->value = nk;
    t.vals->value = nv;
done:
    rt_tensor_unref(bk);
    rt_tensor_unref(bv);
    return r;
}

static ms_status init_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)st, (void)out;
    return put(ctx, n, in, PUT_INIT);
}

static ms_status import_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st, (void)out;
    return put(ctx, n, in, PUT_IMPORT);
}

static ms_status insert_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st, (void)out;
    return put(ctx, n, in, PUT_INSERT);
}

/* LookupTableFindV2(table, keys, default_value): values shaped like keys;
 * a missing key takes default_value, a scalar or one value per key. */
static ms_status find_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)st;
    table t;
    ms_status r = table_of(ctx, n, in[0], &t);
    if (r != MS_OK) return r;
    const rt_tensor *q = in[1], *def = in[2];
    char a[128], b[128];
    if (q->dtype != t.keys->dtype)
        return ms_errf(MS_EINVAL, "'%s': keys must be %s, got %s", n->name,
                       rt_dtype_name(t.keys->dtype), rt_dtype_name(q->dtype));
    if (def->dtype != t.vals->dtype)
        return ms_errf(MS_EINVAL, "'%s': default_value must be %s, got %s", n->name,
                       rt_dtype_name(t.vals->dtype), rt_dtype_name(def->dtype));
    int per_key = def->nelem != 1 || def->shape.rank != 0;
    if (per_key && !rt_shape_equal(&def->shape, &q->shape))
        return ms_errf(MS_EINVAL, "'%s': default_value must be a scalar or shaped like keys %s, got %s",
                       n->name, rt_shape_str(&q->shape, a, sizeof a),
                       rt_shape_str(&def->shape, b, sizeof b));
    const rt_tensor *tv = t.vals->value;
    if (t.vals->dtype == RT_DT_STRING) {
        rt_str *tmp = calloc((size_t)q->nelem + 1, sizeof(rt_str));
        if (tmp == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (int64_t j = 0; j < q->nelem; j++) {
            int64_t i = find_key(t.keys->value, q, j);
            tmp[j] = i >= 0 ? ((const rt_str *)tv->data)[i]
                            : ((const rt_str *)def->data)[per_key ? j : 0];
        }
        r = rt_tensor_new_strings(&q->shape, tmp, &out[0]);
        free(tmp);
        return r;
    }
    if ((r = rt_tensor_new(t.vals->dtype, &q->shape, &out[0])) != MS_OK) return r;
    size_t es = rt_dtype_size(t.vals->dtype);
    for (int64_t j = 0; j < q->nelem; j++) {
        int64_t i = find_key(t.keys->value, q, j);
        const char *src = i >= 0 ? (const char *)tv->data + i * es
                                 : (const char *)def->data + (per_key ? j : 0) * es;
        memcpy((char *)out[0]->data + j * es, src, es);
    }
    return MS_OK;
}

static ms_status size_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)st;
    table t;
    ms_status r = table_of(ctx, n, in[0], &t);
    if (r != MS_OK) return r;
    rt_shape scalar = {0};
    if ((r = rt_tensor_new(RT_DT_INT64, &scalar, &out[0])) != MS_OK) return r;
    *(int64_t *)out[0]->data = t.keys->value ? t.keys->value->nelem : 0;
    return MS_OK;
}


/* One field of a vocabulary line as a 1-element tensor of dtype dt:
 * idx -2 = the line number, -1 = the whole line, >= 0 = that column. */
static ms_status text_field(const kn_node *n, const char *line, size_t len, int64_t lineno,
                            int64_t idx, const char *delim, rt_dtype dt, rt_tensor **out) {
    const char *f = line;
    size_t flen = len;
    char num[32];
    if (idx == -2) {
        flen = (size_t)snprintf(num, sizeof num, "%lld", (long long)lineno);
        f = num;
    } else if (idx >= 0) {
        size_t dl = strlen(delim);
        for (int64_t c = 0; c < idx; c++) {
            const char *e = dl ? strstr(f, delim) : NULL;
            if (e == NULL || e >= line + len)
                return ms_errf(MS_EINVAL, "'%s': line %lld has no column %lld", n->name,
                               (long long)lineno + 1, (long long)idx);
            f = e + dl;
        }
        const char *e = dl ? strstr(f, delim) : NULL;
        flen = e && e < line + len ? (size_t)(e - f) : (size_t)(line + len - f);
    }
    rt_shape one = {.rank = 1, .dim = {1}};
    if (dt == RT_DT_STRING) {
        rt_str sv = {(const uint8_t *)f, flen};
        return rt_tensor_new_strings(&one, &sv, out);
    }
    char buf[64];
    if (flen == 0 || flen >= sizeof buf)
        return ms_errf(MS_EINVAL, "'%s': line %lld: field is not a number", n->name,
                       (long long)lineno + 1);
    memcpy(buf, f, flen);
    buf[flen] = '\0';
    char *end;
    ms_status r = rt_tensor_new(dt, &one, out);
    if (r != MS_OK) return r;
    if (dt == RT_DT_INT64 || dt == RT_DT_INT32) {
        long long v = strtoll(buf, &end, 10);
        if (dt == RT_DT_INT64) *(int64_t *)(*out)->data = v;
        else *(int32_t *)(*out)->data = (int32_t)v;
    } else {
        double v = strtod(buf, &end);
        if (dt == RT_DT_FLOAT) *(float *)(*out)->data = (float)v;
        else *(double *)(*out)->data = v;
    }
    if (*end != '\0') {
        rt_tensor_unref(*out);
        *out = NULL;
        return ms_errf(MS_EINVAL, "'%s': line %lld: field is not a valid %s", n->name,
                       (long long)lineno + 1, rt_dtype_name(dt));
    }
    return MS_OK;
}

/* InitializeTableFromTextFileV2(table, filename): one entry per line of the
 * (asset) file, up to vocab_size lines (-1 = all); line numbers start at offset. */
static ms_status init_text_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)st, (void)out;
    table t;
    ms_status r = table_of(ctx, n, in[0], &t);
    if (r != MS_OK) return r;
    if (in[1]->dtype != RT_DT_STRING || in[1]->nelem != 1)
        return ms_errf(MS_EINVAL, "'%s': filename must be a string scalar", n->name);
    const rt_str *fn = in[1]->data;
    char path[4096];
    if (fn->len >= sizeof path) return ms_errf(MS_EINVAL, "'%s': filename too long", n->name);
    memcpy(path, fn->data, fn->len);
    path[fn->len] = '\0';
    int64_t ki = kn_attr_i(n, "key_index", -2), vi = kn_attr_i(n, "value_index", -1);
    int64_t vocab = kn_attr_i(n, "vocab_size", -1), offset = kn_attr_i(n, "offset", 0);
    size_t dlen;
    const char *ds = kn_attr_s(n, "delimiter", &dlen);
    char delim[16] = "\t";
    if (ds && dlen > 0 && dlen < sizeof delim) memcpy(delim, ds, dlen), delim[dlen] = '\0';
    /* The name comes from the graph (a Const, or the asset path the loader
     * feeds): only a regular file inside the model folder is read, beneath
     * it (ms_file.h), whatever links or names point elsewhere. */
    rt_hostctx *hc = rt_hostctx_of(ctx);
    const ms_dir *root = hc && hc->vars ? hc->vars->files : NULL;
    if (root == NULL)
        return ms_errf(MS_EINVAL, "'%s': vocabulary file '%s': no model folder to read it from",
                       n->name, path);
    const char *rel;
    int fd = -1;
    r = ms_dir_inside(root, path, &rel);
    if (r == MS_OK) r = ms_file_open(root, rel, &fd);
    if (r != MS_OK) return ms_errwrap(r, "'%s': vocabulary file", n->name);
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return ms_errf(MS_ENOMEM, "'%s': out of memory", n->name);
    }
    /* An asset is read line by line; one line can be the whole file: cap it,
     * by stat first (nothing read) and by the bytes read (stat is not the
     * last word: a file can grow while it is read). */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size > RT_ASSET_MAX_BYTES) {
        fclose(f);
        return ms_errf(MS_EINVAL, "'%s': vocabulary file '%s' is larger than the limit of %llu "
                                  "bytes; not read",
                       n->name, rel, (unsigned long long)RT_ASSET_MAX_BYTES);
    }
    uint64_t total = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int64_t ln = 0;
    r = MS_OK;
    while (r == MS_OK && (vocab < 0 || ln < vocab) && (got = getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        total += len;
        if (total > RT_ASSET_MAX_BYTES) {
            r = ms_errf(MS_EINVAL, "'%s': vocabulary file '%s' is larger than the limit of %llu "
                                   "bytes; not read",
                        n->name, rel, (unsigned long long)RT_ASSET_MAX_BYTES);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        rt_tensor *kv[3] = {in[0], NULL, NULL};
        r = text_field(n, line, len, ln + offset, ki, delim, t.keys->dtype, &kv[1]);
        if (r == MS_OK)
            r = text_field(n, line, len, ln + offset, vi, delim, t.vals->dtype, &kv[2]);
        if (r == MS_OK) r = put(ctx, n, kv, PUT_INSERT);
        rt_tensor_unref(kv[1]);
        rt_tensor_unref(kv[2]);
        ln++;
    }
    free(line);
    fclose(f);
    if (r == MS_OK && vocab >= 0 && ln < vocab)
        r = ms_errf(MS_EINVAL, "'%s': vocabulary file has %lld lines, vocab_size is %lld", n->name,
                    (long long)ln, (long long)vocab);
    return r;
}

/* clang-format off */
const kn_kernel rt_ops_table_kernels[] = {
    {.op = "HashTableV2", .compute = hash_table_compute, .stateful = 1},
    {.op = "MutableHashTableV2", .compute = hash_table_compute, .stateful = 1},
    {.op = "InitializeTableV2", .compute = init_compute, .stateful = 1},
    {.op = "InitializeTableFromTextFileV2", .compute = init_text_compute, .stateful = 1},
    {.op = "LookupTableImportV2", .compute = import_compute, .stateful = 1},
    {.op = "LookupTableInsertV2", .compute = insert_compute, .stateful = 1},
    {.op = "LookupTableFindV2", .compute = find_compute, .stateful = 1},
    {.op = "LookupTableSizeV2", .compute = size_compute, .stateful = 1},
    {.op = NULL},
};
/* clang-format on */
