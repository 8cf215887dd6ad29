/* rt_graphbuild.c - in-memory TF graph builder and SavedModel writer (see
 * rt_graphbuild.h). All protobuf-c structures live in one arena. */
#include "rt_graphbuild.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_bundle.h"

/* ===================== arena ===================== */

typedef struct gb_chunk {
    struct gb_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} gb_chunk;

#define GB_CHUNK (64 * 1024)

typedef struct gb_counter {
    char *base; /* malloc'ed; NULL = free slot */
    int next;
} gb_counter;

typedef struct gb_var {
    const char *name; /* arena */
    rt_tensor *value; /* owned reference */
} gb_var;

struct rt_gb {
    gb_chunk *chunks;
    ms_status err;
    char errmsg[512];
    Tensorflow__MetaGraphDef mg;
    Tensorflow__MetaGraphDef__MetaInfoDef info;
    Tensorflow__GraphDef graph;
    Tensorflow__VersionDef versions;
    /* node-name hash set (open addressing over arena strings) */
    Tensorflow__NodeDef **names; /* hash table by node name (malloc'ed) */
    size_t names_cap, names_n;
    gb_counter *counters; /* rt_gb_unique_name: next suffix per base (malloc'ed) */
    size_t counters_cap, counters_n;
    gb_var *vars;
    int nvars, vars_cap;
    int finished; /* saver added; no more variables */
};

static void *arena_alloc(rt_gb *g, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    gb_chunk *c = g->chunks;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > GB_CHUNK / 4 ? n : GB_CHUNK;
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->used = 0;
        c->cap = cap;
        if (n > GB_CHUNK / 4 && g->chunks != NULL) {
            /* A big one-off block goes behind the current chunk, which keeps
             * serving small allocations. */
            c->next = g->chunks->next;
            g->chunks->next = c;
        } else {
            c->next = g->chunks;
            g->chunks = c;
        }
    }
    void *p = c->mem + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

static ms_status gb_verr(rt_gb *g, ms_status code, const char *fmt, va_list ap) {
    if (g->err == MS_OK) {
        g->err = code;
        vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
    }
    return ms_errf(g->err, "%s", g->errmsg);
}

ms_status rt_gb_fail(rt_gb *g, ms_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gb_verr(g, code, fmt, ap);
    va_end(ap);
    return code;
}

static void gb_oom(rt_gb *g) {
    rt_gb_fail(g, MS_ENOMEM, "graph builder: out of memory");
}

void *rt_gb_alloc(rt_gb *g, size_t n) {
    if (g->err != MS_OK)
        return NULL;
    void *p = arena_alloc(g, n);
    if (p == NULL)
        gb_oom(g);
    return p;
}

static void *gb_memdup(rt_gb *g, const void *src, size_t n) {
    void *p = rt_gb_alloc(g, n);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

char *rt_gb_strdup(rt_gb *g, const char *s) {
    return gb_memdup(g, s, strlen(s) + 1);
}

char *rt_gb_strf(rt_gb *g, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n >= 0 ? rt_gb_alloc(g, (size_t)n + 1) : NULL;
    if (p)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

/* Appends one slot to an arena array whose capacity is implied by its
 * length (4, 8, 16, ...): a full array is copied into one twice as big.
 * Returns the new slot (zeroed) or NULL. */
static void *gb_push(rt_gb *g, void *arrp, size_t *n, size_t elem) {
    void **arr = arrp;
    size_t cnt = *n;
    if (g->err != MS_OK)
        return NULL;
    if (cnt == 0 || (cnt >= 4 && (cnt & (cnt - 1)) == 0)) {
        size_t cap = cnt < 4 ? 4 : cnt * 2;
        void *na = rt_gb_alloc(g, cap * elem);
        if (na == NULL)
            return NULL;
        if (cnt)
            memcpy(na, *arr, cnt * elem);
        *arr = na;
    }
    void *slot = (char *)*arr + cnt * elem;
    memset(slot, 0, elem);
    *n = cnt + 1;
    return slot;
}

/* Pushes a pointer onto an arena pointer array. */
static int gb_push_ptr(rt_gb *g, void *arrp, size_t *n, void *ptr) {
    void **slot = gb_push(g, arrp, n, sizeof(void *));
    if (slot == NULL)
        return -1;
    *slot = ptr;
    return 0;
}

/* ===================== builder ===================== */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* The node named s, or NULL. */
static Tensorflow__NodeDef *names_get(const rt_gb *g, const char *s) {
    if (g->names_cap == 0)
        return NULL;
    for (size_t i = name_hash(s) & (g->names_cap - 1);; i = (i + 1) & (g->names_cap - 1)) {
        if (g->names[i] == NULL)
            return NULL;
        if (strcmp(g->names[i]->name, s) == 0)
            return g->names[i];
    }
}

static void names_put_raw(Tensorflow__NodeDef **tab, size_t cap, Tensorflow__NodeDef *n) {
    size_t i = name_hash(n->name) & (cap - 1);
    while (tab[i] != NULL)
        i = (i + 1) & (cap - 1);
    tab[i] = n;
}

static int names_add(rt_gb *g, Tensorflow__NodeDef *n) {
    if ((g->names_n + 1) * 2 > g->names_cap) {
        size_t cap = g->names_cap ? g->names_cap * 2 : 64;
        Tensorflow__NodeDef **tab = calloc(cap, sizeof(*tab));
        if (tab == NULL)
            return -1;
        for (size_t i = 0; i < g->names_cap; i++)
            if (g->names[i])
                names_put_raw(tab, cap, g->names[i]);
        free(g->names);
        g->names = tab;
        g->names_cap = cap;
    }
    names_put_raw(g->names, g->names_cap, n);
    g->names_n++;
    return 0;
}

static const char *const serve_tag[] = {"serve"};

ms_status rt_gb_new(rt_gb **out) {
    rt_gb *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return ms_errf(MS_ENOMEM, "graph builder: out of memory");
    tensorflow__meta_graph_def__init(&g->mg);
    tensorflow__meta_graph_def__meta_info_def__init(&g->info);
    tensorflow__graph_def__init(&g->graph);
    tensorflow__version_def__init(&g->versions);
    g->versions.producer = RT_GB_PRODUCER;
    g->graph.versions = &g->versions;
    g->info.n_tags = 1;
    g->info.tags = (char **)serve_tag;
    g->mg.meta_info_def = &g->info;
    g->mg.graph_def = &g->graph;
    *out = g;
    return MS_OK;
}

void rt_gb_free(rt_gb *g) {
    if (g == NULL)
        return;
    for (gb_chunk *c = g->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    for (int i = 0; i < g->nvars; i++)
        rt_tensor_unref(g->vars[i].value);
    free(g->vars);
    free(g->names);
    for (size_t i = 0; i < g->counters_cap; i++)
        free(g->counters[i].base);
    free(g->counters);
    free(g);
}

ms_status rt_gb_status(const rt_gb *g) {
    if (g->err != MS_OK)
        return ms_errf(g->err, "%s", g->errmsg);
    return MS_OK;
}

/* The suffix counter of base, created at 1; NULL on OOM. */
static gb_counter *counter_get(rt_gb *g, const char *base) {
    if ((g->counters_n + 1) * 2 > g->counters_cap) {
        size_t cap = g->counters_cap ? g->counters_cap * 2 : 64;
        gb_counter *tab = calloc(cap, sizeof(*tab));
        if (tab == NULL)
            return NULL;
        for (size_t i = 0; i < g->counters_cap; i++) {
            if (g->counters[i].base == NULL)
                continue;
            size_t k = name_hash(g->counters[i].base) & (cap - 1);
            while (tab[k].base != NULL)
                k = (k + 1) & (cap - 1);
            tab[k] = g->counters[i];
        }
        free(g->counters);
        g->counters = tab;
        g->counters_cap = cap;
    }
    size_t k = name_hash(base) & (g->counters_cap - 1);
    while (g->counters[k].base != NULL) {
        if (strcmp(g->counters[k].base, base) == 0)
            return &g->counters[k];
        k = (k + 1) & (g->counters_cap - 1);
    }
    g->counters[k].base = strdup(base);
    if (g->counters[k].base == NULL)
        return NULL;
    g->counters[k].next = 1;
    g->counters_n++;
    return &g->counters[k];
}

const char *rt_gb_unique_name(rt_gb *g, const char *base) {
    if (g->err != MS_OK)
        return NULL;
    if (names_get(g, base) == NULL)
        return rt_gb_strdup(g, base);
    gb_counter *c = counter_get(g, base);
    if (c == NULL) {
        gb_oom(g);
        return NULL;
    }
    char buf[512];
    for (;; c->next++) {
        if (snprintf(buf, sizeof(buf), "%s_%d", base, c->next) >= (int)sizeof(buf)) {
            rt_gb_fail(g, MS_EINVAL, "graph builder: node name too long: %.64s...", base);
            return NULL;
        }
        if (names_get(g, buf) == NULL) {
            c->next++;
            return rt_gb_strdup(g, buf);
        }
    }
}

Tensorflow__NodeDef *rt_gb_node(rt_gb *g, const char *op, const char *name) {
    if (g->err != MS_OK)
        return NULL;
    if (op == NULL || op[0] == '\0') {
        rt_gb_fail(g, MS_EINVAL, "graph builder: node without an op");
        return NULL;
    }
    const char *nm = name ? rt_gb_strdup(g, name) : rt_gb_unique_name(g, op);
    if (nm == NULL)
        return NULL;
    if (nm[0] == '\0' || strchr(nm, ':') || nm[0] == '^') {
        rt_gb_fail(g, MS_EINVAL, "graph builder: bad node name '%s'", nm);
        return NULL;
    }
    if (names_get(g, nm) != NULL) {
        rt_gb_fail(g, MS_EINVAL, "graph builder: duplicate node name '%s'", nm);
        return NULL;
    }
    Tensorflow__NodeDef *n = rt_gb_alloc(g, sizeof(*n));
    if (n == NULL)
        return NULL;
    tensorflow__node_def__init(n);
    n->name = (char *)nm;
    n->op = rt_gb_strdup(g, op);
    if (n->op == NULL || gb_push_ptr(g, &g->graph.node, &g->graph.n_node, n) != 0)
        return NULL;
    if (names_add(g, n) != 0) {
        gb_oom(g);
        return NULL;
    }
    return n;
}

Tensorflow__NodeDef *rt_gb_find(const rt_gb *g, const char *name) {
    return names_get(g, name);
}

void rt_gb_input(rt_gb *g, Tensorflow__NodeDef *n, const char *input) {
    if (n == NULL || g->err != MS_OK)
        return;
    if (input == NULL || input[0] == '\0') {
        rt_gb_fail(g, MS_EINVAL, "graph builder: empty input name for node '%s'", n->name);
        return;
    }
    char *s = rt_gb_strdup(g, input);
    if (s)
        gb_push_ptr(g, &n->input, &n->n_input, s);
}

void rt_gb_control_input(rt_gb *g, Tensorflow__NodeDef *n, const char *node_name) {
    if (n == NULL || g->err != MS_OK)
        return;
    char *s = rt_gb_strf(g, "^%s", node_name);
    if (s)
        gb_push_ptr(g, &n->input, &n->n_input, s);
}

void rt_gb_device(rt_gb *g, Tensorflow__NodeDef *n, const char *device) {
    if (n == NULL || g->err != MS_OK)
        return;
    char *s = rt_gb_strdup(g, device);
    if (s)
        n->device = s;
}

/* ===================== attributes ===================== */

/* NodeDef and NameAttrList attr maps share one entry layout (base, key,
 * value); this sets key in such a map, replacing an existing value. */
typedef struct gb_attr_entry {
    ProtobufCMessage base;
    char *key;
    Tensorflow__AttrValue *value;
} gb_attr_entry;

static Tensorflow__AttrValue *attr_in_map(rt_gb *g, void *mapp, size_t *n,
                                          const ProtobufCMessageDescriptor *entry_desc,
                                          const char *key) {
    gb_attr_entry ***map = mapp;
    if (g->err != MS_OK)
        return NULL;
    Tensorflow__AttrValue *v = rt_gb_alloc(g, sizeof(*v));
    if (v == NULL)
        return NULL;
    tensorflow__attr_value__init(v);
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*map)[i]->key, key) == 0) {
            (*map)[i]->value = v;
            return v;
        }
    gb_attr_entry *e = rt_gb_alloc(g, sizeof(*e));
    if (e == NULL)
        return NULL;
    protobuf_c_message_init(entry_desc, e);
    e->key = rt_gb_strdup(g, key);
    e->value = v;
    if (e->key == NULL || gb_push_ptr(g, map, n, e) != 0)
        return NULL;
    return v;
}

Tensorflow__AttrValue *rt_gb_attr(rt_gb *g, Tensorflow__NodeDef *n, const char *key) {
    if (n == NULL)
        return NULL;
    _Static_assert(sizeof(Tensorflow__NodeDef__AttrEntry) == sizeof(gb_attr_entry),
                   "attr entry layout");
    return attr_in_map(g, &n->attr, &n->n_attr, &tensorflow__node_def__attr_entry__descriptor, key);
}

Tensorflow__AttrValue *rt_gb_func_attr(rt_gb *g, Tensorflow__NameAttrList *f, const char *key) {
    if (f == NULL)
        return NULL;
    _Static_assert(sizeof(Tensorflow__NameAttrList__AttrEntry) == sizeof(gb_attr_entry),
                   "attr entry layout");
    return attr_in_map(g, &f->attr, &f->n_attr, &tensorflow__name_attr_list__attr_entry__descriptor,
                       key);
}

void rt_gb_attr_i(rt_gb *g, Tensorflow__NodeDef *n, const char *key, int64_t v) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        a->i = v;
    }
}

void rt_gb_attr_f(rt_gb *g, Tensorflow__NodeDef *n, const char *key, float v) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
        a->f = v;
    }
}

void rt_gb_attr_b(rt_gb *g, Tensorflow__NodeDef *n, const char *key, int v) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
        a->b = v != 0;
    }
}

void rt_gb_attr_s(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const void *p, size_t len) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
        a->s.data = gb_memdup(g, p, len);
        a->s.len = len;
    }
}

void rt_gb_attr_str(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const char *s) {
    rt_gb_attr_s(g, n, key, s, strlen(s));
}

void rt_gb_attr_type(rt_gb *g, Tensorflow__NodeDef *n, const char *key, rt_dtype t) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
        a->type = (Tensorflow__DataType)t;
    }
}

void rt_gb_attr_shape(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_shape *shape) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
        a->shape = rt_gb_shape_proto(g, shape);
    }
}

static Tensorflow__AttrValue__ListValue *attr_list(rt_gb *g, Tensorflow__NodeDef *n,
                                                   const char *key) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a == NULL)
        return NULL;
    Tensorflow__AttrValue__ListValue *l = rt_gb_alloc(g, sizeof(*l));
    if (l == NULL)
        return NULL;
    tensorflow__attr_value__list_value__init(l);
    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    a->list = l;
    return l;
}

void rt_gb_attr_ilist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const int64_t *v,
                      size_t count) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, n, key);
    if (l) {
        l->i = gb_memdup(g, v, count * sizeof(*v));
        l->n_i = l->i ? count : 0;
    }
}

void rt_gb_attr_flist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const float *v,
                      size_t count) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, n, key);
    if (l) {
        l->f = gb_memdup(g, v, count * sizeof(*v));
        l->n_f = l->f ? count : 0;
    }
}

void rt_gb_attr_typelist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_dtype *v,
                         size_t count) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, n, key);
    if (l == NULL)
        return;
    l->type = rt_gb_alloc(g, count * sizeof(*l->type));
    if (l->type == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        l->type[i] = (Tensorflow__DataType)v[i];
    l->n_type = count;
}

void rt_gb_attr_strlist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const char *const *v,
                        size_t count) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, n, key);
    if (l == NULL)
        return;
    l->s = rt_gb_alloc(g, count * sizeof(*l->s));
    if (l->s == NULL)
        return;
    for (size_t i = 0; i < count; i++) {
        l->s[i].len = strlen(v[i]);
        l->s[i].data = gb_memdup(g, v[i], l->s[i].len);
    }
    l->n_s = count;
}

void rt_gb_attr_shapelist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_shape *v,
                          size_t count) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, n, key);
    if (l == NULL)
        return;
    l->shape = rt_gb_alloc(g, count * sizeof(*l->shape));
    if (l->shape == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        l->shape[i] = rt_gb_shape_proto(g, &v[i]);
    l->n_shape = g->err == MS_OK ? count : 0;
}

void rt_gb_attr_tensor(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_tensor *t) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a) {
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
        a->tensor = rt_gb_tensor_proto(g, t);
    }
}

Tensorflow__NameAttrList *rt_gb_attr_func(rt_gb *g, Tensorflow__NodeDef *n, const char *key,
                                          const char *fname) {
    Tensorflow__AttrValue *a = rt_gb_attr(g, n, key);
    if (a == NULL)
        return NULL;
    Tensorflow__NameAttrList *f = rt_gb_alloc(g, sizeof(*f));
    if (f == NULL)
        return NULL;
    tensorflow__name_attr_list__init(f);
    f->name = rt_gb_strdup(g, fname);
    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
    a->func = f;
    return f->name ? f : NULL;
}

/* ===================== proto values ===================== */

Tensorflow__TensorShapeProto *rt_gb_shape_proto(rt_gb *g, const rt_shape *shape) {
    Tensorflow__TensorShapeProto *p = rt_gb_alloc(g, sizeof(*p));
    if (p == NULL)
        return NULL;
    tensorflow__tensor_shape_proto__init(p);
    if (shape == NULL || shape->rank < 0) {
        p->unknown_rank = 1;
        return p;
    }
    if (shape->rank > RT_MAX_RANK) {
        rt_gb_fail(g, MS_EINVAL, "graph builder: rank %d above %d", shape->rank, RT_MAX_RANK);
        return NULL;
    }
    if (shape->rank == 0)
        return p;
    p->dim = rt_gb_alloc(g, (size_t)shape->rank * sizeof(*p->dim));
    if (p->dim == NULL)
        return NULL;
    for (int i = 0; i < shape->rank; i++) {
        Tensorflow__TensorShapeProto__Dim *d = rt_gb_alloc(g, sizeof(*d));
        if (d == NULL)
            return NULL;
        tensorflow__tensor_shape_proto__dim__init(d);
        d->size = shape->dim[i];
        p->dim[i] = d;
    }
    p->n_dim = (size_t)shape->rank;
    return p;
}

Tensorflow__TensorProto *rt_gb_tensor_proto(rt_gb *g, const rt_tensor *t) {
    if (g->err != MS_OK)
        return NULL;
    if (t == NULL || (t->dtype != RT_DT_STRING && !rt_dtype_is_pod(t->dtype))) {
        rt_gb_fail(g, MS_ENOTSUP, "graph builder: cannot store a %s tensor in a graph",
                   t ? rt_dtype_name(t->dtype) : "NULL");
        return NULL;
    }
    Tensorflow__TensorProto *p = rt_gb_alloc(g, sizeof(*p));
    if (p == NULL)
        return NULL;
    tensorflow__tensor_proto__init(p);
    p->dtype = (Tensorflow__DataType)t->dtype;
    p->tensor_shape = rt_gb_shape_proto(g, &t->shape);
    if (t->dtype == RT_DT_STRING) {
        const rt_str *s = rt_tensor_strs(t);
        p->string_val = rt_gb_alloc(g, (size_t)t->nelem * sizeof(*p->string_val));
        if (p->string_val == NULL && t->nelem > 0)
            return NULL;
        for (int64_t i = 0; i < t->nelem; i++) {
            p->string_val[i].len = (size_t)s[i].len;
            p->string_val[i].data = gb_memdup(g, s[i].data, (size_t)s[i].len);
        }
        p->n_string_val = (size_t)t->nelem;
    } else {
        size_t nb = rt_tensor_nbytes(t);
        p->tensor_content.data = gb_memdup(g, t->data, nb);
        p->tensor_content.len = nb;
    }
    return g->err == MS_OK ? p : NULL;
}

/* ===================== common ops ===================== */

Tensorflow__NodeDef *rt_gb_placeholder(rt_gb *g, const char *name, rt_dtype dt,
                                       const rt_shape *shape) {
    Tensorflow__NodeDef *n = rt_gb_node(g, "Placeholder", name);
    rt_gb_attr_type(g, n, "dtype", dt);
    rt_gb_attr_shape(g, n, "shape", shape);
    return g->err == MS_OK ? n : NULL;
}

Tensorflow__NodeDef *rt_gb_const(rt_gb *g, const char *name, const rt_tensor *value) {
    if (value == NULL) {
        rt_gb_fail(g, MS_EINVAL, "graph builder: Const '%s' without a value", name ? name : "");
        return NULL;
    }
    Tensorflow__NodeDef *n = rt_gb_node(g, "Const", name);
    if (n == NULL)
        return NULL;
    rt_gb_attr_type(g, n, "dtype", value->dtype);
    rt_gb_attr_tensor(g, n, "value", value);
    return g->err == MS_OK ? n : NULL;
}

Tensorflow__NodeDef *rt_gb_unary(rt_gb *g, const char *op, const char *name, const char *x,
                                 rt_dtype T) {
    Tensorflow__NodeDef *n = rt_gb_node(g, op, name);
    rt_gb_input(g, n, x);
    rt_gb_attr_type(g, n, "T", T);
    return g->err == MS_OK ? n : NULL;
}

Tensorflow__NodeDef *rt_gb_binary(rt_gb *g, const char *op, const char *name, const char *a,
                                  const char *b, rt_dtype T) {
    Tensorflow__NodeDef *n = rt_gb_node(g, op, name);
    rt_gb_input(g, n, a);
    rt_gb_input(g, n, b);
    rt_gb_attr_type(g, n, "T", T);
    return g->err == MS_OK ? n : NULL;
}

Tensorflow__NodeDef *rt_gb_matmul(rt_gb *g, const char *name, const char *a, const char *b,
                                  int transpose_a, int transpose_b, rt_dtype T) {
    Tensorflow__NodeDef *n = rt_gb_binary(g, "MatMul", name, a, b, T);
    rt_gb_attr_b(g, n, "transpose_a", transpose_a);
    rt_gb_attr_b(g, n, "transpose_b", transpose_b);
    return g->err == MS_OK ? n : NULL;
}

Tensorflow__NodeDef *rt_gb_variable(rt_gb *g, const char *name, const rt_tensor *value) {
    if (g->err != MS_OK)
        return NULL;
    if (g->finished) {
        rt_gb_fail(g, MS_EINVAL,
                   "graph builder: variable '%s' added after the meta graph was "
                   "completed",
                   name);
        return NULL;
    }
    if (value == NULL || (value->dtype != RT_DT_STRING && !rt_dtype_is_pod(value->dtype))) {
        rt_gb_fail(g, MS_ENOTSUP, "graph builder: variable '%s' needs a POD or string value", name);
        return NULL;
    }
    Tensorflow__NodeDef *v = rt_gb_node(g, "VariableV2", name);
    rt_gb_attr_shape(g, v, "shape", &value->shape);
    rt_gb_attr_type(g, v, "dtype", value->dtype);
    rt_gb_attr_str(g, v, "container", "");
    rt_gb_attr_str(g, v, "shared_name", "");
    char *rname = rt_gb_strf(g, "%s/read", name);
    Tensorflow__NodeDef *r = rname ? rt_gb_unary(g, "Identity", rname, name, value->dtype) : NULL;
    if (r == NULL)
        return NULL;
    /* TF1 colocates the read with its variable. */
    const char *loc = rt_gb_strf(g, "loc:@%s", name);
    if (loc)
        rt_gb_attr_strlist(g, r, "_class", &loc, 1);
    if (g->nvars == g->vars_cap) {
        int cap = g->vars_cap ? g->vars_cap * 2 : 8;
        gb_var *nv = realloc(g->vars, (size_t)cap * sizeof(*nv));
        if (nv == NULL) {
            gb_oom(g);
            return NULL;
        }
        g->vars = nv;
        g->vars_cap = cap;
    }
    g->vars[g->nvars].name = v->name;
    g->vars[g->nvars].value = rt_tensor_ref((rt_tensor *)value);
    g->nvars++;
    return g->err == MS_OK ? r : NULL;
}

int rt_gb_num_variables(const rt_gb *g) {
    return g->nvars;
}

/* ===================== signatures, collections ===================== */

Tensorflow__SignatureDef *rt_gb_signature(rt_gb *g, const char *key, const char *method_name) {
    if (g->err != MS_OK)
        return NULL;
    for (size_t i = 0; i < g->mg.n_signature_def; i++)
        if (strcmp(g->mg.signature_def[i]->key, key) == 0) {
            rt_gb_fail(g, MS_EINVAL, "graph builder: duplicate signature '%s'", key);
            return NULL;
        }
    Tensorflow__SignatureDef *s = rt_gb_alloc(g, sizeof(*s));
    Tensorflow__MetaGraphDef__SignatureDefEntry *e = rt_gb_alloc(g, sizeof(*e));
    if (s == NULL || e == NULL)
        return NULL;
    tensorflow__signature_def__init(s);
    tensorflow__meta_graph_def__signature_def_entry__init(e);
    s->method_name = rt_gb_strdup(g, method_name ? method_name : "");
    e->key = rt_gb_strdup(g, key);
    e->value = s;
    if (s->method_name == NULL || e->key == NULL ||
        gb_push_ptr(g, &g->mg.signature_def, &g->mg.n_signature_def, e) != 0)
        return NULL;
    return s;
}

static Tensorflow__TensorInfo *tensor_info(rt_gb *g, const char *tensor, rt_dtype dt,
                                           const rt_shape *shape) {
    Tensorflow__TensorInfo *ti = rt_gb_alloc(g, sizeof(*ti));
    if (ti == NULL)
        return NULL;
    tensorflow__tensor_info__init(ti);
    ti->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
    ti->name = rt_gb_strdup(g, tensor);
    ti->dtype = (Tensorflow__DataType)dt;
    if (shape)
        ti->tensor_shape = rt_gb_shape_proto(g, shape);
    return g->err == MS_OK ? ti : NULL;
}

/* SignatureDef inputs and outputs maps share the (base, key, value) layout. */
typedef struct gb_ti_entry {
    ProtobufCMessage base;
    char *key;
    Tensorflow__TensorInfo *value;
} gb_ti_entry;

static void sig_add(rt_gb *g, void *mapp, size_t *n, const ProtobufCMessageDescriptor *desc,
                    const char *what, const char *alias, const char *tensor, rt_dtype dt,
                    const rt_shape *shape) {
    gb_ti_entry ***map = mapp;
    if (g->err != MS_OK)
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*map)[i]->key, alias) == 0) {
            rt_gb_fail(g, MS_EINVAL, "graph builder: duplicate signature %s '%s'", what, alias);
            return;
        }
    gb_ti_entry *e = rt_gb_alloc(g, sizeof(*e));
    if (e == NULL)
        return;
    protobuf_c_message_init(desc, e);
    e->key = rt_gb_strdup(g, alias);
    e->value = tensor_info(g, tensor, dt, shape);
    if (e->key && e->value)
        gb_push_ptr(g, map, n, e);
}

void rt_gb_sig_input(rt_gb *g, Tensorflow__SignatureDef *sig, const char *alias, const char *tensor,
                     rt_dtype dt, const rt_shape *shape) {
    if (sig == NULL)
        return;
    _Static_assert(sizeof(Tensorflow__SignatureDef__InputsEntry) == sizeof(gb_ti_entry),
                   "tensor info entry layout");
    sig_add(g, &sig->inputs, &sig->n_inputs, &tensorflow__signature_def__inputs_entry__descriptor,
            "input", alias, tensor, dt, shape);
}

void rt_gb_sig_output(rt_gb *g, Tensorflow__SignatureDef *sig, const char *alias,
                      const char *tensor, rt_dtype dt, const rt_shape *shape) {
    if (sig == NULL)
        return;
    _Static_assert(sizeof(Tensorflow__SignatureDef__OutputsEntry) == sizeof(gb_ti_entry),
                   "tensor info entry layout");
    sig_add(g, &sig->outputs, &sig->n_outputs,
            &tensorflow__signature_def__outputs_entry__descriptor, "output", alias, tensor, dt,
            shape);
}

void rt_gb_collection_add(rt_gb *g, const char *key, const char *node_name) {
    if (g->err != MS_OK)
        return;
    Tensorflow__CollectionDef *c = NULL;
    for (size_t i = 0; i < g->mg.n_collection_def; i++)
        if (strcmp(g->mg.collection_def[i]->key, key) == 0)
            c = g->mg.collection_def[i]->value;
    if (c == NULL) {
        Tensorflow__MetaGraphDef__CollectionDefEntry *e = rt_gb_alloc(g, sizeof(*e));
        c = rt_gb_alloc(g, sizeof(*c));
        Tensorflow__CollectionDef__NodeList *nl = rt_gb_alloc(g, sizeof(*nl));
        if (e == NULL || c == NULL || nl == NULL)
            return;
        tensorflow__meta_graph_def__collection_def_entry__init(e);
        tensorflow__collection_def__init(c);
        tensorflow__collection_def__node_list__init(nl);
        c->kind_case = TENSORFLOW__COLLECTION_DEF__KIND_NODE_LIST;
        c->node_list = nl;
        e->key = rt_gb_strdup(g, key);
        e->value = c;
        if (e->key == NULL ||
            gb_push_ptr(g, &g->mg.collection_def, &g->mg.n_collection_def, e) != 0)
            return;
    }
    if (c->kind_case != TENSORFLOW__COLLECTION_DEF__KIND_NODE_LIST) {
        rt_gb_fail(g, MS_EINVAL, "graph builder: collection '%s' is not a node list", key);
        return;
    }
    char *s = rt_gb_strdup(g, node_name);
    if (s)
        gb_push_ptr(g, &c->node_list->value, &c->node_list->n_value, s);
}

/* ===================== output ===================== */

Tensorflow__GraphDef *rt_gb_graph(rt_gb *g) {
    return &g->graph;
}

static int var_cmp(const void *a, const void *b) {
    return strcmp(((const gb_var *)a)->name, ((const gb_var *)b)->name);
}

/* DT_STRING vector Const of the given C strings. */
static Tensorflow__NodeDef *string_const(rt_gb *g, const char *name, const char *const *strs,
                                         int n) {
    rt_str *v = calloc((size_t)(n ? n : 1), sizeof(*v));
    rt_tensor *t = NULL;
    if (v == NULL) {
        gb_oom(g);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        v[i].data = (const uint8_t *)strs[i];
        v[i].len = strlen(strs[i]);
    }
    rt_shape s = rt_shape_make(1, (int64_t[]){n});
    ms_status st = rt_tensor_new_strings(&s, v, &t);
    free(v);
    if (st != MS_OK) {
        rt_gb_fail(g, st, "graph builder: %s", ms_errmsg());
        return NULL;
    }
    Tensorflow__NodeDef *c = rt_gb_const(g, name, t);
    rt_tensor_unref(t);
    return c;
}

/* The TF1 saver graph (not sharded):
 *   save/Const                      Const "model" (fed with the bundle prefix)
 *   save/SaveV2/tensor_names        Const [names]
 *   save/SaveV2/shape_and_slices    Const ["" ...]
 *   save/SaveV2                     SaveV2(save/Const, names, slices, vars...)
 *   save/control_dependency         Identity(save/Const, ^save/SaveV2)
 *   save/RestoreV2/tensor_names, save/RestoreV2/shape_and_slices, save/RestoreV2
 *   save/Assign, save/Assign_1 ...  Assign(var, save/RestoreV2:i)
 *   save/restore_all                NoOp(^save/Assign ...)                       */
static void add_saver(rt_gb *g) {
    int nv = g->nvars;
    const char **names = calloc((size_t)nv, sizeof(*names));
    const char **empty = calloc((size_t)nv, sizeof(*empty));
    rt_dtype *types = calloc((size_t)nv, sizeof(*types));
    if (names == NULL || empty == NULL || types == NULL) {
        gb_oom(g);
        goto out;
    }
    qsort(g->vars, (size_t)nv, sizeof(*g->vars), var_cmp);
    for (int i = 0; i < nv; i++) {
        names[i] = g->vars[i].name;
        empty[i] = "";
        types[i] = g->vars[i].value->dtype;
    }
    Tensorflow__NodeDef *fname = NULL;
    {
        rt_tensor *t;
        ms_status st = rt_tensor_scalar_string("model", 5, &t);
        if (st != MS_OK) {
            rt_gb_fail(g, st, "graph builder: %s", ms_errmsg());
            goto out;
        }
        fname = rt_gb_const(g, "save/Const", t);
        rt_tensor_unref(t);
    }
    string_const(g, "save/SaveV2/tensor_names", names, nv);
    string_const(g, "save/SaveV2/shape_and_slices", empty, nv);
    Tensorflow__NodeDef *save = rt_gb_node(g, "SaveV2", "save/SaveV2");
    rt_gb_input(g, save, "save/Const");
    rt_gb_input(g, save, "save/SaveV2/tensor_names");
    rt_gb_input(g, save, "save/SaveV2/shape_and_slices");
    for (int i = 0; i < nv; i++)
        rt_gb_input(g, save, names[i]);
    rt_gb_attr_typelist(g, save, "dtypes", types, (size_t)nv);
    Tensorflow__NodeDef *dep =
        rt_gb_unary(g, "Identity", "save/control_dependency", "save/Const", RT_DT_STRING);
    rt_gb_control_input(g, dep, "save/SaveV2");
    const char *loc = "loc:@save/Const";
    rt_gb_attr_strlist(g, dep, "_class", &loc, 1);

    string_const(g, "save/RestoreV2/tensor_names", names, nv);
    string_const(g, "save/RestoreV2/shape_and_slices", empty, nv);
    Tensorflow__NodeDef *rest = rt_gb_node(g, "RestoreV2", "save/RestoreV2");
    rt_gb_input(g, rest, "save/Const");
    rt_gb_input(g, rest, "save/RestoreV2/tensor_names");
    rt_gb_input(g, rest, "save/RestoreV2/shape_and_slices");
    rt_gb_attr_typelist(g, rest, "dtypes", types, (size_t)nv);
    Tensorflow__NodeDef *all = rt_gb_node(g, "NoOp", "save/restore_all");
    for (int i = 0; i < nv && g->err == MS_OK; i++) {
        const char *an = i == 0 ? "save/Assign" : rt_gb_strf(g, "save/Assign_%d", i);
        Tensorflow__NodeDef *as = an ? rt_gb_node(g, "Assign", an) : NULL;
        rt_gb_input(g, as, names[i]);
        rt_gb_input(g, as, i == 0 ? "save/RestoreV2" : rt_gb_strf(g, "save/RestoreV2:%d", i));
        rt_gb_attr_type(g, as, "T", types[i]);
        const char *vloc = rt_gb_strf(g, "loc:@%s", names[i]);
        if (vloc)
            rt_gb_attr_strlist(g, as, "_class", &vloc, 1);
        rt_gb_attr_b(g, as, "use_locking", 1);
        rt_gb_attr_b(g, as, "validate_shape", 1);
        rt_gb_control_input(g, all, an);
    }
    if (g->err != MS_OK || fname == NULL)
        goto out;
    Tensorflow__SaverDef *sd = rt_gb_alloc(g, sizeof(*sd));
    if (sd == NULL)
        goto out;
    tensorflow__saver_def__init(sd);
    sd->filename_tensor_name = "save/Const:0";
    sd->save_tensor_name = "save/control_dependency:0";
    sd->restore_op_name = "save/restore_all";
    sd->max_to_keep = 5;
    sd->sharded = 0;
    sd->keep_checkpoint_every_n_hours = 10000.0f;
    sd->version = TENSORFLOW__SAVER_DEF__CHECKPOINT_FORMAT_VERSION__V2;
    g->mg.saver_def = sd;
out:
    free(names);
    free(empty);
    free(types);
}

ms_status rt_gb_meta_graph(rt_gb *g, Tensorflow__MetaGraphDef **out) {
    if (g->err == MS_OK && !g->finished) {
        g->finished = 1;
        if (g->nvars > 0)
            add_saver(g);
    }
    if (g->err != MS_OK)
        return rt_gb_status(g);
    *out = &g->mg;
    return MS_OK;
}

ms_status rt_gb_pack_saved_model(rt_gb *g, uint8_t **out, size_t *n) {
    Tensorflow__MetaGraphDef *mg = NULL;
    ms_status st = rt_gb_meta_graph(g, &mg);
    if (st != MS_OK)
        return st;
    Tensorflow__SavedModel sm = TENSORFLOW__SAVED_MODEL__INIT;
    Tensorflow__MetaGraphDef *mgs[1] = {mg};
    sm.saved_model_schema_version = 1;
    sm.n_meta_graphs = 1;
    sm.meta_graphs = mgs;
    size_t len = tensorflow__saved_model__get_packed_size(&sm);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return ms_errf(MS_ENOMEM, "graph builder: cannot allocate %zu bytes", len);
    *n = tensorflow__saved_model__pack(&sm, buf);
    *out = buf;
    return MS_OK;
}

static ms_status write_atomic(const char *path, const uint8_t *p, size_t n) {
    char tmp[4200];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return ms_errf(MS_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return ms_errf(MS_EINVAL, "%s: cannot create: %s", path, strerror(errno));
    int bad = n > 0 && fwrite(p, 1, n, f) != n;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        ms_status st = ms_errf(MS_EINVAL, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        return st;
    }
    return MS_OK;
}

ms_status rt_savedmodel_write(const char *dir, rt_gb *g) {
    char path[4096];
    uint8_t *pb = NULL;
    size_t pbn = 0;
    ms_status st = rt_gb_pack_saved_model(g, &pb, &pbn);
    if (st != MS_OK)
        return st;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        st = ms_errf(MS_EINVAL, "%s: cannot create: %s", dir, strerror(errno));
        goto done;
    }
    if (g->nvars > 0) {
        rt_bundle_writer *w;
        snprintf(path, sizeof(path), "%s/variables", dir);
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            st = ms_errf(MS_EINVAL, "%s: cannot create: %s", path, strerror(errno));
            goto done;
        }
        if (snprintf(path, sizeof(path), "%s/variables/variables", dir) >= (int)sizeof(path)) {
            st = ms_errf(MS_EINVAL, "%s: path too long", dir);
            goto done;
        }
        if ((st = rt_bundle_writer_new(path, &w)) != MS_OK)
            goto done;
        for (int i = 0; i < g->nvars; i++) {
            if ((st = rt_bundle_writer_add(w, g->vars[i].name, g->vars[i].value)) != MS_OK) {
                rt_bundle_writer_abort(w);
                goto done;
            }
        }
        if ((st = rt_bundle_writer_finish(w)) != MS_OK)
            goto done;
    }
    if (snprintf(path, sizeof(path), "%s/saved_model.pb", dir) >= (int)sizeof(path)) {
        st = ms_errf(MS_EINVAL, "%s: path too long", dir);
        goto done;
    }
    st = write_atomic(path, pb, pbn);
done:
    free(pb);
    return st;
}
