/* rt_attr.c - rt_nodedef_attrs: how kernels read a node's attributes when the
 * node is a TensorFlow NodeDef (its AttrValue map). Kernels call kn_attr_*,
 * which go through the table a kn_node carries. */
#include <string.h>

#include "rt_graph.h"
#include "rt_tensor_proto.h"
#include "tf_framework.pb-c.h"

static const Tensorflow__AttrValue *attr_find(const kn_node *n, const char *key) {
    const Tensorflow__NodeDef *d = n->def;
    if (d == NULL) return NULL;
    for (size_t i = 0; i < d->n_attr; i++)
        if (d->attr[i]->key && strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

static int nd_has(const kn_node *n, const char *key) {
    return attr_find(n, key) != NULL;
}

static int64_t nd_i(const kn_node *n, const char *key, int64_t dflt) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_I) return dflt;
    return a->i;
}

static float nd_f(const kn_node *n, const char *key, float dflt) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_F) return dflt;
    return a->f;
}

static int nd_b(const kn_node *n, const char *key, int dflt) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_B) return dflt;
    return a->b ? 1 : 0;
}

static rt_dtype nd_type(const kn_node *n, const char *key, rt_dtype dflt) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TYPE) return dflt;
    return rt_dtype_base((int)a->type);
}

static const char *nd_s(const kn_node *n, const char *key, size_t *len) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S) return NULL;
    if (len) *len = a->s.len;
    return a->s.data ? (const char *)a->s.data : "";
}

static const Tensorflow__AttrValue__ListValue *attr_list(const kn_node *n, const char *key) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST) return NULL;
    return a->list;
}

static int nd_ilist(const kn_node *n, const char *key, int64_t *out, int max) {
    const Tensorflow__AttrValue__ListValue *l = attr_list(n, key);
    if (l == NULL) return -1;
    for (size_t i = 0; i < l->n_i && (int)i < max; i++) out[i] = l->i[i];
    return (int)l->n_i;
}

static int nd_flist(const kn_node *n, const char *key, float *out, int max) {
    const Tensorflow__AttrValue__ListValue *l = attr_list(n, key);
    if (l == NULL) return -1;
    for (size_t i = 0; i < l->n_f && (int)i < max; i++) out[i] = l->f[i];
    return (int)l->n_f;
}

static int nd_slist(const kn_node *n, const char *key, const char **out, size_t *lens, int max) {
    const Tensorflow__AttrValue__ListValue *l = attr_list(n, key);
    if (l == NULL) return -1;
    for (size_t i = 0; i < l->n_s && (int)i < max; i++) {
        out[i] = l->s[i].data ? (const char *)l->s[i].data : "";
        lens[i] = l->s[i].len;
    }
    return (int)l->n_s;
}

static int nd_typelist(const kn_node *n, const char *key, rt_dtype *out, int max) {
    const Tensorflow__AttrValue__ListValue *l = attr_list(n, key);
    if (l == NULL) return -1;
    for (size_t i = 0; i < l->n_type && (int)i < max; i++) out[i] = rt_dtype_base((int)l->type[i]);
    return (int)l->n_type;
}

static ms_status nd_shape(const kn_node *n, const char *key, rt_shape *out) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_SHAPE)
        return ms_errf(MS_ENOTFOUND, "node '%s': no shape attr '%s'", n->name, key);
    return rt_shape_from_proto(a->shape, out);
}

static ms_status nd_tensor(const kn_node *n, const char *key, rt_tensor **out) {
    const Tensorflow__AttrValue *a = attr_find(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR || a->tensor == NULL)
        return ms_errf(MS_EINVAL, "node '%s': no tensor attr '%s'", n->name, key);
    ms_status st = rt_tensor_from_proto(a->tensor, out);
    if (st != MS_OK) return ms_errwrap(st, "node '%s' attr '%s'", n->name, key);
    return MS_OK;
}

const kn_attr_ops rt_nodedef_attrs = {
    .has = nd_has,
    .i = nd_i,
    .f = nd_f,
    .b = nd_b,
    .type = nd_type,
    .s = nd_s,
    .ilist = nd_ilist,
    .flist = nd_flist,
    .slist = nd_slist,
    .typelist = nd_typelist,
    .shape = nd_shape,
    .tensor = nd_tensor,
};
