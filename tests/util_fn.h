/* util_fn.h - building MetaGraphDefs with a function library in tests
 * (While / If / Case bodies, calls, object graphs): NodeDefs, attrs, Consts
 * and FunctionDefs allocated in a per-test-file arena freed by arena_free().
 * Header-only (static inline) so each test file has its own arena. */
#ifndef UTIL_FN_H
#define UTIL_FN_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_tensor.h"
#include "tf_savedmodel.pb-c.h"

/* ---- a small arena: every proto piece of one test, freed at its end ---- */
static void *g_mem[4096];
static int g_nmem;

static inline void *A(size_t n) {
    ck_assert_int_lt(g_nmem, 4096);
    void *p = calloc(1, n);
    ck_assert_ptr_nonnull(p);
    return g_mem[g_nmem++] = p;
}

static inline char *S(const char *s) {
    char *p = A(strlen(s) + 1);
    strcpy(p, s);
    return p;
}

static inline void arena_free(void) {
    while (g_nmem > 0) free(g_mem[--g_nmem]);
}

static inline Tensorflow__AttrValue *attr(Tensorflow__NodeDef *d, const char *key) {
    Tensorflow__NodeDef__AttrEntry **na = A(sizeof(*na) * (d->n_attr + 1));
    if (d->n_attr) memcpy(na, d->attr, sizeof(*na) * d->n_attr);
    Tensorflow__NodeDef__AttrEntry *e = A(sizeof(*e));
    tensorflow__node_def__attr_entry__init(e);
    e->key = S(key);
    e->value = A(sizeof(*e->value));
    tensorflow__attr_value__init(e->value);
    na[d->n_attr++] = e;
    d->attr = na;
    return e->value;
}

static inline void attr_type(Tensorflow__NodeDef *d, const char *key, rt_dtype t) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)t;
}

static inline void attr_types(Tensorflow__NodeDef *d, const char *key, int n, const rt_dtype *t) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = A(sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->type = A(sizeof(Tensorflow__DataType) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) v->list->type[i] = (Tensorflow__DataType)t[i];
    v->list->n_type = (size_t)n;
}

static inline void attr_func(Tensorflow__NodeDef *d, const char *key, const char *fn) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
    v->func = A(sizeof(*v->func));
    tensorflow__name_attr_list__init(v->func);
    v->func->name = S(fn);
}

static inline void attr_funcs(Tensorflow__NodeDef *d, const char *key, int n, const char *const *fn) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = A(sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->func = A(sizeof(*v->list->func) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        v->list->func[i] = A(sizeof(**v->list->func));
        tensorflow__name_attr_list__init(v->list->func[i]);
        v->list->func[i]->name = S(fn[i]);
    }
    v->list->n_func = (size_t)n;
}

/* A Const holding n values of dt (4-byte types), rank 0 when n < 0 (one value). */
static inline void attr_const(Tensorflow__NodeDef *d, rt_dtype dt, int n, const void *vals) {
    attr_type(d, "dtype", dt);
    Tensorflow__AttrValue *v = attr(d, "value");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v->tensor = A(sizeof(*v->tensor));
    tensorflow__tensor_proto__init(v->tensor);
    v->tensor->dtype = (Tensorflow__DataType)dt;
    v->tensor->tensor_shape = A(sizeof(*v->tensor->tensor_shape));
    tensorflow__tensor_shape_proto__init(v->tensor->tensor_shape);
    int count = n < 0 ? 1 : n;
    if (n >= 0) {
        Tensorflow__TensorShapeProto__Dim **dims = A(sizeof(*dims));
        dims[0] = A(sizeof(**dims));
        tensorflow__tensor_shape_proto__dim__init(dims[0]);
        dims[0]->size = n;
        v->tensor->tensor_shape->dim = dims;
        v->tensor->tensor_shape->n_dim = 1;
    }
    v->tensor->tensor_content.len = (size_t)count * 4;
    v->tensor->tensor_content.data = A((size_t)count * 4 + 1);
    memcpy(v->tensor->tensor_content.data, vals, (size_t)count * 4);
}

/* A node: inputs NULL-terminated. */
static inline Tensorflow__NodeDef *node(const char *name, const char *op, const char *const *in) {
    Tensorflow__NodeDef *d = A(sizeof(*d));
    tensorflow__node_def__init(d);
    d->name = S(name);
    d->op = S(op);
    int n = 0;
    while (in && in[n]) n++;
    d->input = A(sizeof(char *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) d->input[i] = S(in[i]);
    d->n_input = (size_t)n;
    return d;
}
#define IN(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- a MetaGraphDef with a function library ---- */
typedef struct mgb {
    Tensorflow__MetaGraphDef mg;
    Tensorflow__GraphDef gd;
    Tensorflow__FunctionDefLibrary lib;
    Tensorflow__NodeDef *nodes[32];
    Tensorflow__FunctionDef *fns[16];
} mgb;

static inline void mgb_init(mgb *b) {
    memset(b, 0, sizeof(*b));
    tensorflow__meta_graph_def__init(&b->mg);
    tensorflow__graph_def__init(&b->gd);
    tensorflow__function_def_library__init(&b->lib);
    b->mg.graph_def = &b->gd;
    b->gd.library = &b->lib;
    b->gd.node = b->nodes;
    b->lib.function = b->fns;
}

static inline Tensorflow__NodeDef *top(mgb *b, Tensorflow__NodeDef *d) {
    b->nodes[b->gd.n_node++] = d;
    return d;
}

static inline Tensorflow__NodeDef *placeholder(mgb *b, const char *name, rt_dtype dt) {
    Tensorflow__NodeDef *d = top(b, node(name, "Placeholder", NULL));
    attr_type(d, "dtype", dt);
    return d;
}

/* A function: args "name" with dtypes; rets "name=tensor" strings; body nodes. */
static inline Tensorflow__FunctionDef *fn(mgb *b, const char *name, int nargs, const char *const *args,
                                   int nrets, const char *const *rets) {
    Tensorflow__FunctionDef *f = A(sizeof(*f));
    tensorflow__function_def__init(f);
    f->signature = A(sizeof(*f->signature));
    tensorflow__op_def__init(f->signature);
    f->signature->name = S(name);
    f->signature->input_arg = A(sizeof(void *) * (size_t)(nargs + 1));
    for (int i = 0; i < nargs; i++) {
        Tensorflow__OpDef__ArgDef *a = A(sizeof(*a));
        tensorflow__op_def__arg_def__init(a);
        a->name = S(args[i]);
        f->signature->input_arg[i] = a;
    }
    f->signature->n_input_arg = (size_t)nargs;
    f->signature->output_arg = A(sizeof(void *) * (size_t)(nrets + 1));
    f->ret = A(sizeof(void *) * (size_t)(nrets + 1));
    for (int i = 0; i < nrets; i++) {
        const char *eq = strchr(rets[i], '=');
        Tensorflow__OpDef__ArgDef *a = A(sizeof(*a));
        tensorflow__op_def__arg_def__init(a);
        a->name = A((size_t)(eq - rets[i]) + 1);
        memcpy(a->name, rets[i], (size_t)(eq - rets[i]));
        f->signature->output_arg[i] = a;
        Tensorflow__FunctionDef__RetEntry *r = A(sizeof(*r));
        tensorflow__function_def__ret_entry__init(r);
        r->key = a->name;
        r->value = S(eq + 1);
        f->ret[i] = r;
    }
    f->signature->n_output_arg = (size_t)nrets;
    f->n_ret = (size_t)nrets;
    f->node_def = A(sizeof(void *) * 32);
    b->fns[b->lib.n_function++] = f;
    return f;
}

static inline Tensorflow__NodeDef *body(Tensorflow__FunctionDef *f, Tensorflow__NodeDef *d) {
    ck_assert_int_lt(f->n_node_def, 32);
    f->node_def[f->n_node_def++] = d;
    return d;
}

static inline Tensorflow__NodeDef *bin(Tensorflow__FunctionDef *f, const char *name, const char *op,
                                const char *a, const char *b_, rt_dtype t) {
    Tensorflow__NodeDef *d = body(f, node(name, op, IN(a, b_)));
    attr_type(d, "T", t);
    return d;
}

static inline Tensorflow__NodeDef *fconst(Tensorflow__FunctionDef *f, const char *name, rt_dtype dt,
                                   const void *v) {
    Tensorflow__NodeDef *d = body(f, node(name, "Const", NULL));
    attr_const(d, dt, -1, v);
    return d;
}

#endif /* UTIL_FN_H */
