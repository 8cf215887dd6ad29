/* rt_onnx_conv.c - the ONNX converter's shared machinery, used by the driver
 * (rt_onnx.c), the op handlers (rt_onnx_ops.c, rt_onnx_shape.c) and the
 * fusion pass (rt_onnx_fuse.c): the conversion's arena, the value table,
 * reading ONNX attributes and tensors, emitting TF NodeDefs, and the helpers
 * op handlers share. It calls none of those files, so they form no cycle. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_file.h"
#include "rt_lowp.h"
#include "rt_onnx_int.h"

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

void rt__ox_arena_free(rt__ox_conv *cv) {
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
 * Maps
 * ====================================================================== */

static uint64_t map_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The slot of key[0..len): where it is, or the empty slot where it goes. */
static size_t map_slot(const rt__ox_map *m, const char *key, size_t len) {
    size_t i = map_hash(key, len) & (m->cap - 1);
    while (m->key[i] != NULL && (m->klen[i] != len || memcmp(m->key[i], key, len) != 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *rt__ox_map_get(const rt__ox_map *m, const char *key, size_t len) {
    if (m->cap == 0) return NULL;
    size_t i = map_slot(m, key, len);
    return m->key[i] ? m->val[i] : NULL;
}

void rt__ox_map_put(rt__ox_conv *cv, rt__ox_map *m, const char *key, void *val) {
    if ((m->n + 1) * 2 > m->cap) { /* at most half full; old tables stay in the arena */
        rt__ox_map old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->key = rt__ox_alloc(cv, m->cap * sizeof(*m->key));
        m->klen = rt__ox_alloc(cv, m->cap * sizeof(*m->klen));
        m->val = rt__ox_alloc(cv, m->cap * sizeof(*m->val));
        for (size_t i = 0; i < old.cap; i++) {
            if (old.key[i] == NULL) continue;
            size_t j = map_slot(m, old.key[i], old.klen[i]);
            m->key[j] = old.key[i];
            m->klen[j] = old.klen[i];
            m->val[j] = old.val[i];
        }
    }
    size_t len = strlen(key), i = map_slot(m, key, len);
    if (m->key[i] == NULL) {
        m->key[i] = key;
        m->klen[i] = len;
        m->n++;
    }
    m->val[i] = val;
}

/* ======================================================================
 * Values
 * ====================================================================== */

ms_status rt__ox_value_info(const Onnx__ValueInfoProto *vi, rt_dtype *dt, int *rank,
                            int64_t *dims) {
    const char *nm = vi->name ? vi->name : "";
    if (vi->type == NULL || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return ms_errf(MS_ENOTSUP, "graph input/output \"%s\" is not a tensor", nm);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    *dt = rt__ox_onnx_dtype(tt->has_elem_type ? tt->elem_type : 0);
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

/* Node index by name, for rt__ox_prune. */
typedef struct ox_named {
    const char *name;
    size_t idx;
} ox_named;

static int named_cmp(const void *a, const void *b) {
    return strcmp(((const ox_named *)a)->name, ((const ox_named *)b)->name);
}

/* Index of the node a tensor reference ("node", "node:1", "^node") names,
 * or n when none. */
static size_t named_find(rt__ox_conv *cv, const ox_named *tab, size_t n, const char *ref) {
    if (ref[0] == '^') ref++;
    const char *c = strrchr(ref, ':');
    ox_named key = {c ? rt__ox_printf(cv, "%.*s", (int)(c - ref), ref) : ref, 0};
    const ox_named *hit = bsearch(&key, tab, n, sizeof(*tab), named_cmp);
    return hit ? hit->idx : n;
}

/* Drops the nodes that no signature output (no function return value)
 * needs: a shape vector with dynamic entries gets a run-time twin
 * (rt_onnx_shape.c) that only some consumers read. */
void rt__ox_prune(rt__ox_conv *cv, Tensorflow__NodeDef **list, size_t *count,
                  const char *const *roots, size_t nroots) {
    size_t n = *count, top = 0;
    ox_named *tab = rt__ox_alloc(cv, (n + 1) * sizeof(*tab));
    size_t *stack = rt__ox_alloc(cv, (n + 1) * sizeof(*stack));
    uint8_t *live = rt__ox_alloc(cv, n + 1);
    for (size_t i = 0; i < n; i++)
        tab[i] = (ox_named){list[i]->name, i};
    qsort(tab, n, sizeof(*tab), named_cmp);
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i]->op, "Placeholder") == 0) live[i] = 1, stack[top++] = i;
    for (size_t i = 0; i < nroots; i++) {
        size_t k = named_find(cv, tab, n, roots[i]);
        if (k < n && !live[k]) live[k] = 1, stack[top++] = k;
    }
    while (top > 0) {
        const Tensorflow__NodeDef *nd = list[stack[--top]];
        for (size_t j = 0; j < nd->n_input; j++) {
            size_t k = named_find(cv, tab, n, nd->input[j]);
            if (k < n && !live[k]) live[k] = 1, stack[top++] = k;
        }
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (live[i]) list[j++] = list[i];
    *count = j;
}


/* `name` at the level whose table is m and whose scope is sc (NULL: the
 * main graph): its own value, else the enclosing level's, copied into m. */
static rt__ox_value *find_at(rt__ox_conv *cv, rt__ox_scope *sc, rt__ox_map *m, const char *name) {
    rt__ox_value *v = rt__ox_map_get(m, name, strlen(name));
    if (v != NULL || sc == NULL) return v;
    rt__ox_value *ov = find_at(cv, sc->parent, &sc->saved, name);
    if (ov == NULL) return NULL;
    v = rt__ox_alloc(cv, sizeof(*v));
    *v = *ov;
    /* The copy owns no TF tensor of the enclosing graph: a constant is
     * emitted again inside the function, anything else arrives as an
     * argument, in ONNX order. Known contents and dims stay. */
    v->tf = NULL;
    v->tf_alt = NULL;
    v->nhwc = 0;
    if (!rt__ox_is_const(ov)) {
        if (sc->ncap == sc->capcap) {
            int cap = sc->capcap ? 2 * sc->capcap : 8;
            rt__ox_value **o = rt__ox_alloc(cv, (size_t)cap * sizeof(*o));
            const char **a = rt__ox_alloc(cv, (size_t)cap * sizeof(*a));
            if (sc->ncap) {
                memcpy(o, sc->cap_outer, (size_t)sc->ncap * sizeof(*o));
                memcpy(a, sc->cap_arg, (size_t)sc->ncap * sizeof(*a));
            }
            sc->cap_outer = o;
            sc->cap_arg = a;
            sc->capcap = cap;
        }
        v->tf = rt__ox_unique_name(cv, rt__ox_printf(cv, "%s/captured", name));
        sc->cap_outer[sc->ncap] = ov;
        sc->cap_arg[sc->ncap++] = v->tf;
    }
    rt__ox_map_put(cv, m, v->name, v);
    return v;
}

rt__ox_value *rt__ox_find(rt__ox_conv *cv, const char *name) {
    return find_at(cv, cv->scope, &cv->vals, name);
}

rt__ox_value *rt__ox_define(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                            const int64_t *dims) {
    /* The current graph's own table only: a subgraph's value of the same name
     * as an enclosing graph's shadows it. */
    rt__ox_value *v = rt__ox_map_get(&cv->vals, name, strlen(name));
    if (v == NULL) {
        v = rt__ox_alloc(cv, sizeof(*v));
        v->name = rt__ox_strdup(cv, name);
        rt__ox_map_put(cv, &cv->vals, v->name, v);
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
    if (v->tf == NULL && v->rank == 5 && v->tf_alt != NULL) {
        /* A 3-D op's NDHWC result (rt_onnx_3d.c), needed in ONNX order. */
        static const int64_t to_ncdhw[5] = {0, 4, 1, 2, 3};
        v->tf = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_ncdhw", v->name), v->tf_alt, v->dt,
                                 5, to_ncdhw);
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

rt_dtype rt__ox_onnx_dtype(int32_t t) {
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
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        return RT_DT_BFLOAT16;
    /* ONNX 17-26, which the generated enum of proto/onnx.proto does not name */
    case 17:
        return RT_DT_FLOAT8_E4M3FN;
    case 18:
        return RT_DT_FLOAT8_E4M3FNUZ;
    case 19:
        return RT_DT_FLOAT8_E5M2;
    case 20:
        return RT_DT_FLOAT8_E5M2FNUZ;
    case 21:
        return RT_DT_UINT4;
    case 22:
        return RT_DT_INT4;
    case 23:
        return RT_DT_FLOAT4_E2M1FN;
    case 24:
        return RT_DT_FLOAT8_E8M0;
    case 25:
        return RT_DT_UINT2;
    case 26:
        return RT_DT_INT2;
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
    /* Opened beneath the model's folder, a regular file only (ms_file.h): a
     * link to a file or folder outside, a FIFO or a device is refused. */
    ms_dir root;
    int fd = -1;
    ms_status st = ms_dir_open(cv->model_dir, &root);
    if (st == MS_OK) {
        st = ms_file_open(&root, loc, &fd);
        ms_dir_close(&root);
    }
    if (st != MS_OK) return ms_errwrap(st, "initializer \"%s\": external data", tn);
    /* The size comes from the initializer's dims: check the file holds it
     * before allocating; the read then has to deliver every byte. */
    struct stat sb;
    int ok = fstat(fd, &sb) == 0 && off >= 0 && (uint64_t)sb.st_size >= (uint64_t)off &&
             (uint64_t)sb.st_size - (uint64_t)off >= want;
    uint8_t *buf = ok ? rt__ox_alloc(cv, want ? want : 1) : NULL;
    for (size_t got = 0; ok && got < want;) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        ok = r > 0;
        got += ok ? (size_t)r : 0;
    }
    close(fd);
    if (!ok)
        return ms_errf(MS_EINVAL,
                       "initializer \"%s\": external data %s too short (%zu bytes at "
                       "offset %lld)",
                       tn, loc, want, (long long)off);
    *out = buf;
    return MS_OK;
}

static ms_status load_lowp(rt__ox_conv *cv, const Onnx__TensorProto *t, rt__ox_value *v,
                           int64_t n);

/* t's bytes when it keeps them as bytes (external data, raw_data), which
 * must be `want` of them; *raw = NULL when it keeps typed values. */
static ms_status tensor_bytes(rt__ox_conv *cv, const Onnx__TensorProto *t, size_t want,
                              const uint8_t **raw) {
    *raw = NULL;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        uint8_t *buf = NULL;
        ms_status st = read_external(cv, t, want, &buf);
        if (st != MS_OK) return st;
        *raw = buf;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != want)
            return ms_errf(MS_EINVAL, "tensor \"%s\": raw_data has %zu bytes, dims need %zu",
                           t->name ? t->name : "", t->raw_data.len, want);
        *raw = t->raw_data.data;
    }
    return MS_OK;
}

ms_status rt__ox_load_tensor(rt__ox_conv *cv, const Onnx__TensorProto *t, rt__ox_value *v) {
    const char *tn = t->name ? t->name : "";
    rt_dtype dt = rt__ox_onnx_dtype(t->data_type);
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
    if (rt_dtype_is_lowp(dt)) return load_lowp(cv, t, v, n);
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
    ms_status rst = tensor_bytes(cv, t, want, &raw);
    if (rst != MS_OK) return rst;
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
    return rt__ox_map_get(&cv->node_names, s, strlen(s)) != NULL;
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

const char *rt__ox_unique_name(rt__ox_conv *cv, const char *hint) {
    char *base = sanitize(cv, hint);
    char *name = base;
    if (name_taken(cv, name)) {
        /* Many nodes of one hint: each search starts where the last ended. */
        intptr_t k = (intptr_t)rt__ox_map_get(&cv->suffixes, base, strlen(base));
        if (k == 0) k = 1;
        do
            name = rt__ox_printf(cv, "%s_%lld", base, (long long)k++);
        while (name_taken(cv, name));
        rt__ox_map_put(cv, &cv->suffixes, base, (void *)k);
    }
    /* Taken from now on (a function argument's name is no node). */
    rt__ox_map_put(cv, &cv->node_names, name, name);
    return name;
}

Tensorflow__NodeDef *rt__tf_node(rt__ox_conv *cv, const char *op, const char *hint) {
    const char *name = rt__ox_unique_name(cv, hint);
    Tensorflow__NodeDef *nd = rt__ox_alloc(cv, sizeof(*nd));
    tensorflow__node_def__init(nd);
    nd->name = (char *)name;
    nd->op = rt__ox_strdup(cv, op);
    cv->nodes = grow(cv, cv->nodes, sizeof(*cv->nodes), &cv->capnodes, cv->nnodes + 1);
    cv->nodes[cv->nnodes++] = nd;
    rt__ox_map_put(cv, &cv->node_names, name, nd);
    return nd;
}

void rt__tf_input(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *tensor) {
    /* Every TF input array is grown here, to powers of two: its room is the
     * power of two >= n_input, so it is full when n_input is 0 or a power of
     * two, and a node of n inputs (a Concat of 10^5) costs O(n), not O(n^2). */
    size_t n = nd->n_input;
    char **in = nd->input;
    if ((n & (n - 1)) == 0) {
        in = rt__ox_alloc(cv, (n ? 2 * n : 1) * sizeof(char *));
        if (n) memcpy(in, nd->input, n * sizeof(char *));
    }
    in[n] = rt__ox_strdup(cv, tensor);
    nd->input = in;
    nd->n_input = n + 1;
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

void rt__tf_attr_tlist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                       const rt_dtype *x, int n) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = rt__ox_alloc(cv, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_type = (size_t)n;
    v->list->type = rt__ox_alloc(cv, (size_t)n * sizeof(*v->list->type) + 1);
    for (int i = 0; i < n; i++)
        v->list->type[i] = (Tensorflow__DataType)x[i];
}

void rt__tf_attr_func(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                      const char *fname) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
    v->func = rt__ox_alloc(cv, sizeof(*v->func));
    tensorflow__name_attr_list__init(v->func);
    v->func->name = rt__ox_strdup(cv, fname);
}

void rt__tf_attr_flist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const float *x,
                       int n) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = rt__ox_alloc(cv, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_f = (size_t)n;
    v->list->f = rt__ox_alloc(cv, (size_t)n * sizeof(float) + 1);
    if (n) memcpy(v->list->f, x, (size_t)n * sizeof(float));
}

Tensorflow__TensorShapeProto *rt__ox_shape_proto(rt__ox_conv *cv, int rank, const int64_t *dims) {
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

void rt__tf_attr_slist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                       const ProtobufCBinaryData *x, int n) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = rt__ox_alloc(cv, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_s = (size_t)n;
    v->list->s = rt__ox_alloc(cv, (size_t)n * sizeof(*v->list->s) + 1);
    for (int i = 0; i < n; i++) {
        v->list->s[i].len = x[i].len;
        v->list->s[i].data = rt__ox_alloc(cv, x[i].len + 1);
        if (x[i].len) memcpy(v->list->s[i].data, x[i].data, x[i].len);
    }
}

void rt__tf_attr_shape(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int rank,
                       const int64_t *dims) {
    Tensorflow__AttrValue *v = new_attr(cv, nd, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = rt__ox_shape_proto(cv, rank, dims);
}

const char *rt__tf_out(rt__ox_conv *cv, const Tensorflow__NodeDef *nd, int i) {
    if (i == 0) return nd->name;
    return rt__ox_printf(cv, "%s:%d", nd->name, i);
}

/* A Const node of type dt and shape (rank, dims) whose value the caller
 * fills in (*t); returns its name. */
static const char *const_empty(rt__ox_conv *cv, const char *hint, rt_dtype dt, int rank,
                               const int64_t *dims, Tensorflow__TensorProto **t) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Const", hint);
    rt__tf_attr_type(cv, nd, "dtype", dt);
    Tensorflow__AttrValue *v = new_attr(cv, nd, "value");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v->tensor = rt__ox_alloc(cv, sizeof(*v->tensor));
    tensorflow__tensor_proto__init(v->tensor);
    v->tensor->dtype = (Tensorflow__DataType)dt;
    v->tensor->tensor_shape = rt__ox_shape_proto(cv, rank, dims);
    *t = v->tensor;
    return nd->name;
}

static const char *const_node(rt__ox_conv *cv, const char *hint, rt_dtype dt, int rank,
                              const int64_t *dims, const void *bytes, size_t nbytes) {
    Tensorflow__TensorProto *t;
    const char *name = const_empty(cv, hint, dt, rank, dims, &t);
    uint8_t *copy = rt__ox_alloc(cv, nbytes ? nbytes : 1);
    if (nbytes) memcpy(copy, bytes, nbytes);
    t->tensor_content.data = copy;
    t->tensor_content.len = nbytes;
    return name;
}

const char *rt__tf_const_str(rt__ox_conv *cv, const char *hint, const char *str) {
    Tensorflow__TensorProto *t;
    const char *name = const_empty(cv, hint, RT_DT_STRING, 0, NULL, &t);
    t->n_string_val = 1;
    t->string_val = rt__ox_alloc(cv, sizeof(*t->string_val));
    t->string_val[0].data = (uint8_t *)rt__ox_strdup(cv, str);
    t->string_val[0].len = strlen(str);
    return name;
}

/* A float8 / float4 / e8m0 / int4 / int2 tensor of n elements (v's dt and
 * dims set): ONNX packs the 4- and 2-bit ones (two or four per byte, element
 * 0 in the low bits) in raw_data, external data and int32_data (one packed
 * byte per value; 8-bit types one element per value); unpacked here to one
 * byte per element (rt_lowp.h) and emitted as a Const. */
static ms_status load_lowp(rt__ox_conv *cv, const Onnx__TensorProto *t, rt__ox_value *v,
                           int64_t n) {
    const char *tn = t->name ? t->name : "";
    size_t want = (size_t)rt_lowp_packed_size(v->dt, n);
    const uint8_t *raw = NULL;
    ms_status st = tensor_bytes(cv, t, want, &raw); /* want: the packed size */
    if (st != MS_OK) return st;
    if (raw == NULL) {
        if (t->n_int32_data != want)
            return ms_errf(MS_EINVAL, "tensor \"%s\": %zu int32_data values, dims need %zu (%s "
                                      "packed)", tn, t->n_int32_data, want, rt_dtype_name(v->dt));
        uint8_t *b = rt__ox_alloc(cv, want + 1);
        for (size_t i = 0; i < want; i++)
            b[i] = (uint8_t)t->int32_data[i];
        raw = b;
    }
    uint8_t *el = rt__ox_alloc(cv, (size_t)n + 1);
    rt_lowp_unpack(v->dt, raw, n, el);
    v->tf = const_node(cv, tn, v->dt, v->rank, v->dim, el, (size_t)n);
    return MS_OK;
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
    if (dt == RT_DT_INT16 || dt == RT_DT_UINT16) {
        uint16_t *h = rt__ox_alloc(cv, (size_t)n * 2 + 2);
        for (int64_t i = 0; i < n; i++)
            h[i] = (uint16_t)v[i];
        return const_node(cv, hint, dt, rank, dims, h, (size_t)n * 2);
    }
    if (dt == RT_DT_UINT32) {
        uint32_t *w = rt__ox_alloc(cv, (size_t)n * 4 + 4);
        for (int64_t i = 0; i < n; i++)
            w[i] = (uint32_t)v[i];
        return const_node(cv, hint, dt, rank, dims, w, (size_t)n * 4);
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
 * Helpers
 * ====================================================================== */

const char *rt__ox_hint_of(const Onnx__NodeProto *n) {
    if (n->name && n->name[0]) return n->name;
    if (n->n_output && n->output[0]) return n->output[0];
    return n->op_type;
}

/* Required input i (value and TF tensor). */
ms_status rt__ox_need(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **v,
                      const char **tf) {
    rt__ox_value *x = rt__ox_in(cv, n, i);
    if (x == NULL) return rt__ox_err(cv, MS_EINVAL, "input %d is missing", i);
    *v = x;
    if (tf) return rt__ox_tf(cv, x, tf);
    return MS_OK;
}

rt__ox_value *rt__ox_def_out(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt_dtype dt,
                             int rank, const int64_t *dims, const char *tf) {
    if ((size_t)i >= n->n_output || n->output[i] == NULL || n->output[i][0] == '\0') {
        return rt__ox_alloc(cv, sizeof(rt__ox_value)); /* unused optional output */
    }
    rt__ox_value *v = rt__ox_define(cv, n->output[i], dt, rank, dims);
    v->tf = tf;
    return v;
}

/* ---- layout: cv->nhwc keeps rank-4 activations channels-last ---- */

const char *rt__ox_data_format(const rt__ox_conv *cv) {
    return cv->nhwc ? "NHWC" : "NCHW";
}

/* A 4-list (strides, ksize, sizes) from ONNX-order n, c, h, w in the graph layout. */
void rt__ox_lay4(const rt__ox_conv *cv, int64_t *o, int64_t n, int64_t c, int64_t h, int64_t w) {
    if (cv->nhwc)
        o[0] = n, o[1] = h, o[2] = w, o[3] = c;
    else
        o[0] = n, o[1] = c, o[2] = h, o[3] = w;
}

/* The channel axis of rank-4 tensors in the graph layout. */
int rt__ox_chan_axis(const rt__ox_conv *cv) {
    return cv->nhwc ? 3 : 1;
}

/* Rank-4 input i in the graph layout. */
ms_status rt__ox_need4(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **v,
                       const char **tf) {
    ms_status st = rt__ox_need(cv, n, i, v, NULL);
    if (st != MS_OK) return st;
    if ((*v)->rank != 4)
        return rt__ox_err(cv, MS_ENOTSUP, "input \"%s\" must have rank 4 (got %d)", (*v)->name,
                          (*v)->rank);
    return cv->nhwc ? rt__ox_tf_nhwc(cv, *v, tf) : rt__ox_tf(cv, *v, tf);
}

/* Defines rank-4 output i held in the graph layout. */
rt__ox_value *rt__ox_def_out4(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt_dtype dt,
                              const int64_t *dims, const char *tf) {
    rt__ox_value *v = rt__ox_def_out(cv, n, i, dt, 4, dims, tf);
    v->nhwc = cv->nhwc;
    return v;
}

/* The tensor of x as stored (either layout), for layout-neutral ops. */
ms_status rt__ox_in_any(rt__ox_conv *cv, rt__ox_value *x, const char **tf, int *nhwc) {
    *nhwc = x->nhwc;
    if (x->nhwc) {
        *tf = x->tf;
        return MS_OK;
    }
    return rt__ox_tf(cv, x, tf);
}

/* Output 0 aliases value x (Identity, Dropout, no-op casts). */
void rt__ox_alias(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *x) {
    rt__ox_value copy = *x;
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, x->dt, x->rank, x->dim, x->tf);
    const char *nm = o->name;
    *o = copy;
    o->name = nm;
}

int rt__ox_out_of(int64_t v, int64_t lo, int64_t hi) {
    return v < lo || v > hi;
}

/* Axis a of a rank-`rank` tensor (negative counts from the end); -1 when
 * out of range. */
int rt__ox_norm_axis(int64_t a, int rank) {
    if (a < -(int64_t)rank || a >= rank) return -1;
    return (int)(a < 0 ? a + rank : a);
}

int rt__ox_need_rank(rt__ox_conv *cv, const rt__ox_value *x, int r, ms_status *st) {
    if (x->rank != r) {
        *st = rt__ox_err(cv, MS_ENOTSUP, "input \"%s\" must have rank %d (got %d)", x->name, r,
                         x->rank);
        return 0;
    }
    return 1;
}

/* Reads a const int input (or returns count -1 when absent). */
ms_status rt__ox_const_ints(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, int64_t *out, int max,
                            int *count) {
    rt__ox_value *v = rt__ox_in(cv, n, i);
    *count = -1;
    if (v == NULL) return MS_OK;
    if (!v->iv || !rt__ox_is_const(v))
        return rt__ox_err(cv, MS_ENOTSUP, "input %d (\"%s\") must be a constant", i, v->name);
    int64_t ne = rt__ox_nelem(v);
    if (ne > max) return rt__ox_err(cv, MS_ENOTSUP, "input %d has too many values", i);
    for (int64_t k = 0; k < ne; k++)
        out[k] = v->iv[k];
    *count = (int)ne;
    return MS_OK;
}

ms_status rt__ox_const_float_scalar(rt__ox_conv *cv, const rt__ox_value *v, float *out) {
    if (v->f && rt__ox_nelem(v) == 1) {
        *out = v->f[0];
        return MS_OK;
    }
    if (v->iv && rt__ox_is_const(v) && rt__ox_nelem(v) == 1) {
        *out = (float)v->iv[0];
        return MS_OK;
    }
    return rt__ox_err(cv, MS_ENOTSUP, "\"%s\" must be a constant scalar", v->name);
}

const char *rt__ox_scalar_f32(rt__ox_conv *cv, const char *hint, float x) {
    return rt__tf_const_f32(cv, hint, 0, NULL, &x);
}

/* Emits Pad/PadV2/MirrorPad of rank-r x; pads in ONNX order (begins then ends). */
const char *rt__ox_emit_pad(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int r,
                            const int64_t *pads, const char *mode, float value) {
    int64_t p[2 * OX_MAXR], d[2] = {r, 2};
    for (int i = 0; i < r; i++) {
        p[2 * i] = pads[i];
        p[2 * i + 1] = pads[i + r];
    }
    const char *op = strcmp(mode, "reflect") == 0 ? "MirrorPad" : value != 0.0f ? "PadV2" : "Pad";
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, hint);
    rt__tf_input(cv, nd, x);
    rt__tf_input(
        cv, nd,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/paddings", nd->name), RT_DT_INT32, 2, d, p));
    if (strcmp(op, "PadV2") == 0)
        rt__tf_input(cv, nd, rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/value", nd->name), value));
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "Tpaddings", RT_DT_INT32);
    if (strcmp(op, "MirrorPad") == 0) rt__tf_attr_s(cv, nd, "mode", "REFLECT");
    return nd->name;
}

/* ---- spatial windows (Conv, pools) ---- */

int rt__ox_count_unknown(int r, const int64_t *d) {
    int u = 0;
    for (int i = 0; i < r; i++)
        u += d[i] < 0;
    return u;
}

int rt__ox_broadcast(const rt__ox_value *a, const rt__ox_value *b, int64_t *od) {
    if (a->rank < 0 || b->rank < 0) return -1;
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        od[i] = da == db ? da : da == 1 ? db : db == 1 ? da : da < 0 ? db : db < 0 ? da : -2;
        if (od[i] == -2) return -2;
    }
    return r;
}

const char *rt__tf_select(rt__ox_conv *cv, const char *h, const char *c, const char *a,
                          const char *b, rt_dtype dt) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "SelectV2", h);
    rt__tf_input(cv, nd, c);
    rt__tf_input(cv, nd, a);
    rt__tf_input(cv, nd, b);
    rt__tf_attr_type(cv, nd, "T", dt);
    return nd->name;
}

const char *rt__ox_wrap_index(rt__ox_conv *cv, const char *h, const char *ix, rt_dtype dt,
                              int64_t d) {
    int64_t zero = 0;
    const char *neg = rt__tf_binary(
        cv, "Less", rt__ox_printf(cv, "%s/neg", h), ix,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/zero", h), dt, 0, NULL, &zero), dt);
    const char *up = rt__tf_binary(
        cv, "AddV2", rt__ox_printf(cv, "%s/wrapped", h), ix,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/size", h), dt, 0, NULL, &d), dt);
    return rt__tf_select(cv, rt__ox_printf(cv, "%s/index", h), neg, up, ix, dt);
}

/* Mean over ax, keep_dims (Mean with int32 axes). */
static const char *mean_keep(rt__ox_conv *cv, const char *h, const char *x, const char *ax) {
    Tensorflow__NodeDef *m = rt__tf_node(cv, "Mean", h);
    rt__tf_input(cv, m, x);
    rt__tf_input(cv, m, ax);
    rt__tf_attr_type(cv, m, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, m, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, m, "keep_dims", 1);
    return m->name;
}

const char *rt__ox_normalize(rt__ox_conv *cv, const char *h, const char *x, const char *ax,
                             float eps, const char **mean, const char **inv_std) {
    const char *m = mean_keep(cv, rt__ox_printf(cv, "%s/mean", h), x, ax);
    const char *d =
        rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/centered", h), x, m, RT_DT_FLOAT);
    const char *sq = rt__tf_unary(cv, "Square", rt__ox_printf(cv, "%s/square", h), d, RT_DT_FLOAT);
    const char *v = mean_keep(cv, rt__ox_printf(cv, "%s/variance", h), sq, ax);
    const char *ve = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/var_eps", h), v,
                                   rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/epsilon", h), eps),
                                   RT_DT_FLOAT);
    const char *rs = rt__tf_unary(cv, "Rsqrt", rt__ox_printf(cv, "%s/rsqrt", h), ve, RT_DT_FLOAT);
    if (mean) *mean = m;
    if (inv_std) *inv_std = rs;
    return rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/normalized", h), d, rs, RT_DT_FLOAT);
}

const char *rt__tf_cast(rt__ox_conv *cv, const char *h, const char *x, rt_dtype from,
                        rt_dtype to) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Cast", h);
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "SrcT", from);
    rt__tf_attr_type(cv, nd, "DstT", to);
    return nd->name;
}
