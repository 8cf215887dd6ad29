/* rt_objgraph.c - variables restored through the SavedObjectGraph and the
 * checkpoint's TrackableObjectGraph; the check that every variable a
 * signature reads has a value (rt_objgraph.h). */
#include "rt_objgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_log.h"
#include "rt_bundle.h"

const char *rt_objgraph_var_name(const rt_gnode *n, char *buf, size_t cap) {
    const Tensorflow__NodeDef *d = n->def;
    for (size_t i = 0; d && i < d->n_attr; i++) {
        const Tensorflow__AttrValue *a = d->attr[i]->value;
        if (strcmp(d->attr[i]->key, "shared_name") != 0 || a == NULL ||
            a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S || a->s.len == 0)
            continue;
        size_t len = a->s.len < cap ? a->s.len : cap - 1;
        memcpy(buf, a->s.data, len);
        buf[len] = '\0';
        return buf;
    }
    return n->name;
}

static rt_dtype node_dtype(const rt_gnode *n) {
    const Tensorflow__NodeDef *d = n->def;
    for (size_t i = 0; d && i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, "dtype") == 0 && d->attr[i]->value &&
            d->attr[i]->value->value_case == TENSORFLOW__ATTR_VALUE__VALUE_TYPE)
            return rt_dtype_base(d->attr[i]->value->type);
    return RT_DT_INVALID;
}

static int is_var_op(const char *op) {
    return strcmp(op, "VarHandleOp") == 0 || strcmp(op, "VariableV2") == 0;
}

static const Tensorflow__SavedConcreteFunction *
concrete_fn(const Tensorflow__SavedObjectGraph *og, const char *name) {
    for (size_t i = 0; i < og->n_concrete_functions; i++)
        if (strcmp(og->concrete_functions[i]->key, name) == 0)
            return og->concrete_functions[i]->value;
    return NULL;
}

static const char *variable_key(const Tensorflow__TrackableObjectGraph *tog, int id) {
    if (id < 0 || (size_t)id >= tog->n_nodes) return NULL;
    const Tensorflow__TrackableObjectGraph__TrackableObject *o = tog->nodes[id];
    for (size_t i = 0; i < o->n_attributes; i++)
        if (strcmp(o->attributes[i]->name, "VARIABLE_VALUE") == 0)
            return o->attributes[i]->checkpoint_key;
    return NULL;
}

/* Restores the captured inputs of one call node. */
static ms_status restore_call(const Tensorflow__NodeDef *call, const Tensorflow__SavedObjectGraph *og,
                              const Tensorflow__TrackableObjectGraph *tog, const rt_graph *g,
                              rt_bundle *b, rt_vars *vars, int *restored) {
    const Tensorflow__AttrValue *f = NULL;
    for (size_t i = 0; i < call->n_attr; i++)
        if (strcmp(call->attr[i]->key, "f") == 0) f = call->attr[i]->value;
    if (f == NULL || f->value_case != TENSORFLOW__ATTR_VALUE__VALUE_FUNC || f->func == NULL)
        return MS_OK;
    const Tensorflow__SavedConcreteFunction *cf = concrete_fn(og, f->func->name);
    if (cf == NULL || cf->n_bound_inputs == 0) return MS_OK;
    size_t ndata = 0;
    for (size_t i = 0; i < call->n_input; i++)
        if (call->input[i][0] != '^') ndata++;
    if (ndata < cf->n_bound_inputs) return MS_OK;
    size_t first = ndata - cf->n_bound_inputs, k = 0;
    for (size_t i = 0; i < call->n_input; i++) {
        if (call->input[i][0] == '^') continue;
        size_t j = k++;
        if (j < first) continue;
        int id = cf->bound_inputs[j - first];
        if (id < 0 || (size_t)id >= og->n_nodes || og->nodes[id]->kind_case !=
                                                        TENSORFLOW__SAVED_OBJECT__KIND_VARIABLE)
            continue;
        rt_edge e;
        if (rt_graph_tensor(g, call->input[i], &e) != MS_OK) {
            ms_err_clear();
            continue;
        }
        const rt_gnode *vn = &g->nodes[e.node];
        if (strcmp(vn->kn.op, "VarHandleOp") != 0) continue;
        const char *key = variable_key(tog, id);
        if (key == NULL) continue;
        char buf[256];
        rt_var *v = rt_vars_get(vars, rt_objgraph_var_name(vn, buf, sizeof buf), node_dtype(vn));
        if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        if (v->value != NULL) continue;
        rt_tensor *t;
        ms_status st = rt_bundle_read(b, key, &t);
        if (st != MS_OK)
            return ms_errwrap(st, "variable '%s' (object %d, checkpoint key '%s')", vn->name, id, key);
        if (v->dtype != RT_DT_INVALID && t->dtype != v->dtype) {
            st = ms_errf(MS_EINVAL, "variable '%s': checkpoint key '%s' holds %s, the variable is %s",
                         vn->name, key, rt_dtype_name(t->dtype), rt_dtype_name(v->dtype));
            rt_tensor_unref(t);
            return st;
        }
        v->dtype = t->dtype;
        v->value = t;
        (*restored)++;
    }
    return MS_OK;
}

ms_status rt_objgraph_restore(const Tensorflow__MetaGraphDef *mg, const rt_graph *g,
                              const char *prefix, rt_vars *vars, int *restored) {
    *restored = 0;
    const Tensorflow__SavedObjectGraph *og = mg->object_graph_def;
    if (og == NULL || og->n_concrete_functions == 0 || mg->graph_def == NULL) return MS_OK;
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.index", prefix);
    if (vars->files == NULL) return MS_OK;
    ms_status fst = ms_file_find(vars->files, idx);
    if (fst == MS_ENOTFOUND) {
        ms_err_clear();
        return MS_OK;
    }
    if (fst != MS_OK) return fst;
    rt_bundle *b;
    ms_status st = rt_bundle_open_in(vars->files, prefix, &b);
    if (st != MS_OK) return st;
    rt_tensor *ogt = NULL;
    if (rt_bundle_read(b, "_CHECKPOINTABLE_OBJECT_GRAPH", &ogt) != MS_OK) {
        ms_err_clear();
        rt_bundle_close(b);
        return MS_OK;
    }
    Tensorflow__TrackableObjectGraph *tog = NULL;
    if (ogt->dtype == RT_DT_STRING && ogt->nelem == 1)
        tog = tensorflow__trackable_object_graph__unpack(NULL, rt_tensor_strs(ogt)[0].len,
                                                          rt_tensor_strs(ogt)[0].data);
    rt_tensor_unref(ogt);
    if (tog == NULL) {
        rt_bundle_close(b);
        return ms_errf(MS_EINVAL, "%s: the checkpoint's object graph does not parse", prefix);
    }
    const Tensorflow__GraphDef *gd = mg->graph_def;
    for (size_t i = 0; i < gd->n_node && st == MS_OK; i++) {
        const Tensorflow__NodeDef *d = gd->node[i];
        if (strcmp(d->op, "StatefulPartitionedCall") == 0 || strcmp(d->op, "PartitionedCall") == 0)
            st = restore_call(d, og, tog, g, b, vars, restored);
    }
    tensorflow__trackable_object_graph__free_unpacked(tog, NULL);
    rt_bundle_close(b);
    if (st == MS_OK && *restored > 0)
        MS_DEBUG("%s: %d variables restored through the object graph", prefix, *restored);
    return st;
}

ms_status rt_objgraph_walk_vars(const rt_graph *g, rt_vars *vars, const char *const *feeds,
                                int nfeeds, const char *const *fetches, int nfetches,
                                void (*fn)(void *arg, const rt_gnode *node, const rt_var *v),
                                void *arg) {
    unsigned char *seen = calloc((size_t)g->n + 1, 2);
    int *stack = malloc(sizeof(int) * ((size_t)g->n + 1));
    if (seen == NULL || stack == NULL) {
        free(seen);
        free(stack);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    unsigned char *fed = seen + g->n + 1;
    rt_edge e;
    for (int i = 0; i < nfeeds; i++) {
        if (rt_graph_tensor(g, feeds[i], &e) == MS_OK) fed[e.node] = 1;
        ms_err_clear();
    }
    int sp = 0;
    for (int i = 0; i < nfetches; i++) {
        if (rt_graph_tensor(g, fetches[i], &e) == MS_OK && !seen[e.node])
            seen[e.node] = 1, stack[sp++] = e.node;
        ms_err_clear();
    }
    ms_status st = MS_OK;
    while (sp > 0) {
        const rt_gnode *n = &g->nodes[stack[--sp]];
        if (is_var_op(n->kn.op)) {
            char buf[256];
            rt_var *v = rt_vars_get(vars, rt_objgraph_var_name(n, buf, sizeof buf), node_dtype(n));
            if (v == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory");
                break;
            }
            fn(arg, n, v);
        }
        if (fed[n - g->nodes]) continue;
        for (int i = 0; i < n->nin; i++)
            if (!seen[n->in[i].node]) seen[n->in[i].node] = 1, stack[sp++] = n->in[i].node;
        for (int i = 0; i < n->nctl; i++)
            if (!seen[n->ctl[i]]) seen[n->ctl[i]] = 1, stack[sp++] = n->ctl[i];
    }
    free(seen);
    free(stack);
    return st;
}

typedef struct missing_acc {
    char msg[2048];
    size_t o;
    int missing;
} missing_acc;

static void note_missing(void *arg, const rt_gnode *node, const rt_var *v) {
    missing_acc *a = arg;
    /* TF2 resource variables only: a TF1 VariableV2 starts zero-filled in
     * dcmserve (rt_ops_core.c) and graphs rely on Assign before the first read. */
    if (v->value != NULL || strcmp(node->kn.op, "VarHandleOp") != 0) return;
    if (a->missing++ < 20 && a->o < sizeof a->msg)
        a->o += (size_t)snprintf(a->msg + a->o, sizeof a->msg - a->o, "%s'%s'",
                                 a->missing > 1 ? ", " : "", v->name);
}

ms_status rt_objgraph_check_vars(const rt_graph *g, rt_vars *vars, const char *const *feeds,
                                 int nfeeds, const char *const *fetches, int nfetches) {
    missing_acc a = {.o = 0};
    ms_status st = rt_objgraph_walk_vars(g, vars, feeds, nfeeds, fetches, nfetches, note_missing, &a);
    if (st != MS_OK || a.missing == 0) return st;
    int missing = a.missing;
    return ms_errf(MS_EINVAL, "%d variable%s read by the signature %s no value after restore and "
                   "the init op: %s%s",
                   missing, missing > 1 ? "s" : "", missing > 1 ? "have" : "has", a.msg,
                   missing > 20 ? ", ..." : "");
}
