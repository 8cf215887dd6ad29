/* util_node.c - NodeDef builders, tensor makers, one-op runner and output
 * checks for the kernel tests (see util_node.h). */
#include "util_node.h"

#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_status.h"
#include "rt_exec.h"
#include "rt_model.h"

Tensorflow__NodeDef *tu_node_new(const char *op, const char *name) {
    Tensorflow__NodeDef *d = calloc(1, sizeof(*d));
    ck_assert_ptr_nonnull(d);
    tensorflow__node_def__init(d);
    d->op = strdup(op);
    d->name = strdup(name);
    ck_assert(d->op && d->name);
    return d;
}

static void attr_value_free(Tensorflow__AttrValue *v) {
    if (v == NULL) return;
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S) free(v->s.data);
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list) {
        free(v->list->i);
        free(v->list->f);
        free(v->list->type);
        free(v->list->shape); /* pointers and shapes in one block */
        free(v->list->s);     /* ProtobufCBinaryData and bytes in one block */
        free(v->list);
    }
    if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_SHAPE) free(v->shape); /* one block */
    free(v);
}

void tu_node_free(Tensorflow__NodeDef *d) {
    if (d == NULL) return;
    for (size_t i = 0; i < d->n_attr; i++) {
        free(d->attr[i]->key);
        attr_value_free(d->attr[i]->value);
        free(d->attr[i]);
    }
    free(d->attr);
    free(d->op);
    free(d->name);
    free(d);
}

/* Appends a new entry for key and returns its value (initialised). */
static Tensorflow__AttrValue *add_attr(Tensorflow__NodeDef *d, const char *key) {
    Tensorflow__NodeDef__AttrEntry **a = realloc(d->attr, (d->n_attr + 1) * sizeof(*a));
    ck_assert_ptr_nonnull(a);
    d->attr = a;
    Tensorflow__NodeDef__AttrEntry *e = calloc(1, sizeof(*e));
    Tensorflow__AttrValue *v = calloc(1, sizeof(*v));
    ck_assert(e && v);
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = strdup(key);
    ck_assert_ptr_nonnull(e->key);
    e->value = v;
    d->attr[d->n_attr++] = e;
    return v;
}

void tu_attr_i(Tensorflow__NodeDef *d, const char *key, int64_t val) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = val;
}

void tu_attr_f(Tensorflow__NodeDef *d, const char *key, float val) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    v->f = val;
}

void tu_attr_b(Tensorflow__NodeDef *d, const char *key, int val) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = val != 0;
}

void tu_attr_type(Tensorflow__NodeDef *d, const char *key, rt_dtype val) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)val;
}

void tu_attr_s(Tensorflow__NodeDef *d, const char *key, const char *val) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.len = strlen(val);
    v->s.data = malloc(v->s.len + 1);
    ck_assert_ptr_nonnull(v->s.data);
    memcpy(v->s.data, val, v->s.len + 1);
}

/* A new empty list attr. */
static Tensorflow__AttrValue__ListValue *add_list_attr(Tensorflow__NodeDef *d, const char *key) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = calloc(1, sizeof(*v->list));
    ck_assert_ptr_nonnull(v->list);
    tensorflow__attr_value__list_value__init(v->list);
    return v->list;
}

void tu_attr_ilist(Tensorflow__NodeDef *d, const char *key, int n, const int64_t *vals) {
    Tensorflow__AttrValue__ListValue *l = add_list_attr(d, key);
    l->n_i = (size_t)n;
    l->i = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    ck_assert_ptr_nonnull(l->i);
    if (n > 0) memcpy(l->i, vals, (size_t)n * sizeof(int64_t));
}

void tu_attr_slist(Tensorflow__NodeDef *d, const char *key, int n, const char *const *vals) {
    Tensorflow__AttrValue__ListValue *l = add_list_attr(d, key);
    size_t bytes = (size_t)n * sizeof(ProtobufCBinaryData) + 1;
    for (int i = 0; i < n; i++) bytes += strlen(vals[i]) + 1;
    char *blk = calloc(1, bytes);
    ck_assert_ptr_nonnull(blk);
    l->s = (ProtobufCBinaryData *)(void *)blk;
    l->n_s = (size_t)n;
    char *p = blk + (size_t)n * sizeof(ProtobufCBinaryData);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(vals[i]);
        memcpy(p, vals[i], len + 1);
        l->s[i].data = (uint8_t *)p;
        l->s[i].len = len;
        p += len + 1;
    }
}

void tu_attr_typelist(Tensorflow__NodeDef *d, const char *key, int n, const rt_dtype *vals) {
    Tensorflow__AttrValue__ListValue *l = add_list_attr(d, key);
    l->n_type = (size_t)n;
    l->type = malloc((size_t)(n > 0 ? n : 1) * sizeof(*l->type));
    ck_assert_ptr_nonnull(l->type);
    for (int i = 0; i < n; i++) l->type[i] = (Tensorflow__DataType)vals[i];
}

void tu_attr_shapelist(Tensorflow__NodeDef *d, const char *key, int n, const int *ranks,
                       const int64_t *dims) {
    Tensorflow__AttrValue__ListValue *l = add_list_attr(d, key);
    int total = 0;
    for (int i = 0; i < n; i++) total += ranks[i];
    size_t bytes = (size_t)n * (sizeof(Tensorflow__TensorShapeProto *) +
                                sizeof(Tensorflow__TensorShapeProto)) +
                   (size_t)total * (sizeof(Tensorflow__TensorShapeProto__Dim *) +
                                    sizeof(Tensorflow__TensorShapeProto__Dim)) + 1;
    char *blk = calloc(1, bytes);
    ck_assert_ptr_nonnull(blk);
    Tensorflow__TensorShapeProto **sp = (Tensorflow__TensorShapeProto **)blk;
    Tensorflow__TensorShapeProto *shp = (Tensorflow__TensorShapeProto *)(sp + n);
    Tensorflow__TensorShapeProto__Dim **dp = (Tensorflow__TensorShapeProto__Dim **)(shp + n);
    Tensorflow__TensorShapeProto__Dim *dm = (Tensorflow__TensorShapeProto__Dim *)(dp + total);
    for (int i = 0, k = 0; i < n; i++) {
        tensorflow__tensor_shape_proto__init(&shp[i]);
        shp[i].n_dim = (size_t)ranks[i];
        shp[i].dim = dp + k;
        for (int j = 0; j < ranks[i]; j++, k++) {
            tensorflow__tensor_shape_proto__dim__init(&dm[k]);
            dm[k].size = dims[k];
            dp[k] = &dm[k];
        }
        sp[i] = &shp[i];
    }
    l->n_shape = (size_t)n;
    l->shape = sp;
}

void tu_attr_flist(Tensorflow__NodeDef *d, const char *key, int n, const float *vals) {
    Tensorflow__AttrValue__ListValue *l = add_list_attr(d, key);
    l->n_f = (size_t)n;
    l->f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(l->f);
    if (n > 0) memcpy(l->f, vals, (size_t)n * sizeof(float));
}

void tu_attr_shape(Tensorflow__NodeDef *d, const char *key, int rank, const int64_t *dims) {
    Tensorflow__AttrValue *v = add_attr(d, key);
    int n = rank > 0 ? rank : 0;
    /* the proto, its dim pointers and the dims in one block (freed at once) */
    size_t bytes = sizeof(Tensorflow__TensorShapeProto) +
                   (size_t)n * (sizeof(Tensorflow__TensorShapeProto__Dim *) +
                                sizeof(Tensorflow__TensorShapeProto__Dim));
    Tensorflow__TensorShapeProto *sp = calloc(1, bytes);
    ck_assert_ptr_nonnull(sp);
    tensorflow__tensor_shape_proto__init(sp);
    Tensorflow__TensorShapeProto__Dim **ptrs = (Tensorflow__TensorShapeProto__Dim **)(sp + 1);
    Tensorflow__TensorShapeProto__Dim *dm = (Tensorflow__TensorShapeProto__Dim *)(ptrs + n);
    for (int i = 0; i < n; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dm[i]);
        dm[i].size = dims[i];
        ptrs[i] = &dm[i];
    }
    sp->n_dim = (size_t)n;
    sp->dim = n > 0 ? ptrs : NULL;
    sp->unknown_rank = rank < 0;
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = sp;
}

rt_tensor *tu_t(rt_dtype dt, rt_shape s, const void *vals, int nvals) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    ck_assert_msg(t->nelem == nvals, "tensor of %lld elements given %d values", (long long)t->nelem,
                  nvals);
    if (nvals > 0) memcpy(t->data, vals, rt_tensor_nbytes(t));
    return t;
}

rt_tensor *tu_iota_f32(rt_shape s, float start, float step) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++)
        rt_tensor_f32(t)[i] = start + (float)i * step;
    return t;
}

rt_tensor *tu_strings(rt_shape s, const char *const *strs, int n) {
    ck_assert_int_eq(rt_shape_nelem(&s), n);
    rt_str v[64];
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) v[i] = (rt_str){(const uint8_t *)strs[i], strlen(strs[i])};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&s, v, &t), MS_OK);
    return t;
}

void tu_unref(rt_tensor **t, int n) {
    for (int i = 0; i < n; i++) {
        rt_tensor_unref(t[i]);
        t[i] = NULL;
    }
}

static kn_backend *cpu(void) {
    static kn_backend *be;
    if (be == NULL) be = kn_cpu_backend_new(2);
    ck_assert_ptr_nonnull(be);
    return be;
}

static const kn_kernel *prefer;

void tu_prefer_table(const kn_kernel *table) {
    prefer = table;
}

/* rt_op_run1's steps with a given kernel. */
static ms_status run_kernel(const kn_kernel *k, const Tensorflow__NodeDef *def,
                            rt_tensor *const *in, int nin, rt_tensor **outs, int nout) {
    kn_node kn = {.name = def->name, .op = def->op, .def = def, .attrs = &rt_nodedef_attrs, .nin = nin, .nout = nout};
    void *state = NULL;
    ms_status st = MS_OK;
    for (int i = 0; i < nout; i++)
        outs[i] = NULL;
    if (k->prepare && (st = k->prepare(&kn, NULL, &state)) != MS_OK) return st;
    kn_ctx ctx = {.nthreads = 2};
    st = k->compute(&ctx, &kn, state, in, outs);
    if (k->release) k->release(state);
    if (st != MS_OK)
        for (int i = 0; i < nout; i++) {
            rt_tensor_unref(outs[i]);
            outs[i] = NULL;
        }
    return st;
}

ms_status tu_run(const Tensorflow__NodeDef *def, rt_tensor *const *in, int nin, rt_tensor **outs,
                 int nout) {
    ms_err_clear();
    for (const kn_kernel *k = prefer; k && k->op; k++)
        if (strcmp(k->op, def->op) == 0) return run_kernel(k, def, in, nin, outs, nout);
    return rt_op_run1(cpu(), rt_model_host_ops, def, in, nin, outs, nout);
}

rt_tensor *tu_check_cancel(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin) {
    const kn_kernel *k = kn_backend_kernel(cpu(), def->op);
    ck_assert_ptr_nonnull(k);
    kn_node kn = {.name = def->name, .op = def->op, .def = def, .attrs = &rt_nodedef_attrs,
                  .nin = nin, .nout = 1};
    void *state = NULL;
    if (k->prepare) ck_assert_int_eq(k->prepare(&kn, NULL, &state), MS_OK);
    atomic_int cancel = 1;
    kn_ctx ctx = {.nthreads = 1, .cancelled = &cancel};
    rt_tensor *o = NULL;
    ms_err_clear();
    ck_assert_int_eq(k->compute(&ctx, &kn, state, in, &o), MS_ECANCELED);
    ck_assert_msg(strstr(ms_errmsg(), "cancelled") != NULL, "%s", ms_errmsg());
    rt_tensor_unref(o); /* as the executor drops a failed node's outputs */
    o = NULL;
    atomic_store(&cancel, 0);
    ck_assert_int_eq(k->compute(&ctx, &kn, state, in, &o), MS_OK);
    ck_assert_ptr_nonnull(o);
    if (k->release) k->release(state);
    tu_node_free(def);
    return o;
}

rt_tensor *tu_run1(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin) {
    rt_tensor *out = NULL;
    ms_status st = tu_run(def, in, nin, &out, 1);
    ck_assert_msg(st == MS_OK, "%s failed: %s: %s", def->op, ms_status_name(st), ms_errmsg());
    ck_assert_ptr_nonnull(out);
    tu_node_free(def);
    return out;
}

void tu_run_fail(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin, int nout, ms_status code,
                 const char *needle) {
    rt_tensor *outs[8] = {0};
    ck_assert_int_le(nout, 8);
    ms_status st = tu_run(def, in, nin, outs, nout);
    for (int i = 0; i < nout; i++)
        ck_assert_ptr_null(outs[i]);
    ck_assert_msg(st == code, "%s: expected %s, got %s (%s)", def->op, ms_status_name(code),
                  ms_status_name(st), ms_errmsg());
    ck_assert_msg(strstr(ms_errmsg(), def->name) != NULL, "message lacks node name '%s': %s",
                  def->name, ms_errmsg());
    if (needle)
        ck_assert_msg(strstr(ms_errmsg(), needle) != NULL, "message lacks '%s': %s", needle,
                      ms_errmsg());
    tu_node_free(def);
}

void tu_check_shape(const rt_tensor *t, rt_dtype dt, rt_shape s) {
    char a[128], b[128];
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(t->dtype == dt, "dtype %s, expected %s", rt_dtype_name(t->dtype),
                  rt_dtype_name(dt));
    ck_assert_msg(rt_shape_equal(&t->shape, &s), "shape %s, expected %s",
                  rt_shape_str(&t->shape, a, sizeof a), rt_shape_str(&s, b, sizeof b));
}

void tu_check_f32(const rt_tensor *t, rt_shape s, const float *want, int n, float tol) {
    tu_check_shape(t, RT_DT_FLOAT, s);
    ck_assert_int_eq(t->nelem, n);
    const float *got = t->data;
    for (int i = 0; i < n; i++) {
        if (isnan(want[i])) {
            ck_assert_msg(isnan(got[i]), "element %d: got %.9g, expected nan", i, got[i]);
            continue;
        }
        float lim = tol * (fabsf(want[i]) > 1 ? fabsf(want[i]) : 1);
        ck_assert_msg(got[i] == want[i] || fabsf(got[i] - want[i]) <= lim,
                      "element %d: got %.9g, expected %.9g", i, got[i], want[i]);
    }
}

void tu_check_f64(const rt_tensor *t, rt_shape s, const double *want, int n, double tol) {
    tu_check_shape(t, RT_DT_DOUBLE, s);
    ck_assert_int_eq(t->nelem, n);
    const double *got = t->data;
    for (int i = 0; i < n; i++) {
        double lim = tol * (fabs(want[i]) > 1 ? fabs(want[i]) : 1);
        ck_assert_msg(fabs(got[i] - want[i]) <= lim, "element %d: got %.17g, expected %.17g", i,
                      got[i], want[i]);
    }
}

void tu_check_int(const rt_tensor *t, rt_dtype dt, rt_shape s, const int64_t *want, int n) {
    tu_check_shape(t, dt, s);
    ck_assert_int_eq(t->nelem, n);
    for (int i = 0; i < n; i++) {
        int64_t got;
        switch (dt) {
        case RT_DT_INT32:
            got = ((const int32_t *)t->data)[i];
            break;
        case RT_DT_INT64:
            got = ((const int64_t *)t->data)[i];
            break;
        case RT_DT_INT8:
            got = ((const int8_t *)t->data)[i];
            break;
        case RT_DT_INT16:
            got = ((const int16_t *)t->data)[i];
            break;
        case RT_DT_UINT16:
            got = ((const uint16_t *)t->data)[i];
            break;
        case RT_DT_UINT32:
            got = ((const uint32_t *)t->data)[i];
            break;
        default:
            got = ((const uint8_t *)t->data)[i];
            break;
        }
        ck_assert_msg(got == want[i], "element %d: got %lld, expected %lld", i, (long long)got,
                      (long long)want[i]);
    }
}

int tu_suite_main(const char *suite, const tu_case *cases, size_t n) {
    Suite *s = suite_create(suite);
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return tu_suite_run(s);
}

int tu_suite_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
