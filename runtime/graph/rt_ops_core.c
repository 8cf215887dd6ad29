/* rt_ops_core.c - host ops: graph plumbing (Placeholder, Const, Identity,
 * NoOp) and variables in both TensorFlow generations (VariableV2 refs with
 * Assign/AssignAdd; resource VarHandleOp with ReadVariableOp/AssignVariableOp).
 *
 * Variable storage belongs to the loaded model (rt_hostctx.vars) and lives across
 * requests; runs that contain stateful ops are serialised by the model. */
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "rt_ops.h"

/* The variables of the run, or NULL when the op runs outside a model. */
static rt_vars *vars_of(kn_ctx *ctx) {
    rt_hostctx *h = rt_hostctx_of(ctx);
    return h ? h->vars : NULL;
}

/* ---- plumbing ---- */

static ms_status placeholder_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                     rt_tensor **out) {
    (void)ctx, (void)st, (void)in, (void)out;
    return ms_errf(MS_EINVAL, "placeholder '%s' must be fed a value", n->name);
}

static ms_status forward_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)ctx, (void)st;
    for (int i = 0; i < n->nout && i < n->nin; i++) out[i] = rt_tensor_ref(in[i]);
    return MS_OK;
}

static ms_status noop_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)ctx, (void)n, (void)st, (void)in, (void)out;
    return MS_OK;
}

static ms_status const_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    rt_tensor *t;
    ms_status st = kn_attr_tensor(n, "value", &t);
    if (st != MS_OK) return st;
    *state = t;
    return MS_OK;
}

static ms_status const_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)ctx, (void)n, (void)in;
    out[0] = rt_tensor_ref(st);
    return MS_OK;
}

static void tensor_release(void *st) {
    rt_tensor_unref(st);
}

/* ---- variables ---- */

static const char *var_name(const kn_node *n, char *buf, size_t cap) {
    size_t len;
    const char *s = kn_attr_s(n, "shared_name", &len);
    if (s == NULL || len == 0) return n->name;
    if (len >= cap) len = cap - 1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

static ms_status need_vars(kn_ctx *ctx, const kn_node *n) {
    if (vars_of(ctx) == NULL)
        return ms_errf(MS_EINVAL, "variable op '%s' needs a loaded model", n->name);
    return MS_OK;
}

/* VariableV2: output 0 is the variable's tensor itself (a "ref"). Storage is
 * created zero-filled from the dtype/shape attrs on first use. */
static ms_status variable_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)st, (void)in;
    ms_status s = need_vars(ctx, n);
    if (s != MS_OK) return s;
    char buf[256];
    rt_dtype dt = kn_attr_type(n, "dtype", RT_DT_FLOAT);
    rt_var *v = rt_vars_get(vars_of(ctx), var_name(n, buf, sizeof buf), dt);
    if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (v->value == NULL) {
        rt_shape shape;
        if (kn_attr_shape(n, "shape", &shape) != MS_OK || shape.rank < 0)
            return ms_errf(MS_EINVAL, "variable '%s' has no fully defined shape", n->name);
        if ((s = rt_tensor_new(dt, &shape, &v->value)) != MS_OK) return s;
    }
    out[0] = rt_tensor_ref(v->value);
    return MS_OK;
}

/* Assign / AssignAdd / AssignSub write into the variable's tensor in place
 * (same dtype and shape), so every holder of the ref sees the new value. */
typedef enum { ASSIGN_SET, ASSIGN_ADD, ASSIGN_SUB } assign_kind;

static ms_status assign_into(rt_tensor *dst, const rt_tensor *src, assign_kind k, const char *who) {
    char a[128], b[128];
    if (dst->dtype != src->dtype || !rt_shape_equal(&dst->shape, &src->shape))
        return ms_errf(MS_EINVAL, "'%s': cannot assign %s %s to variable of %s %s", who,
                       rt_dtype_name(src->dtype), rt_shape_str(&src->shape, a, sizeof a),
                       rt_dtype_name(dst->dtype), rt_shape_str(&dst->shape, b, sizeof b));
    if (k == ASSIGN_SET) {
        if (dst->dtype == RT_DT_STRING)
            return ms_errf(MS_ENOTSUP, "'%s': string variables are not supported", who);
        memcpy(dst->data, src->data, rt_tensor_nbytes(dst));
        return MS_OK;
    }
    double sign = k == ASSIGN_ADD ? 1.0 : -1.0;
    switch (dst->dtype) {
    case RT_DT_FLOAT:
        for (int64_t i = 0; i < dst->nelem; i++)
            ((float *)dst->data)[i] += (float)sign * ((const float *)src->data)[i];
        break;
    case RT_DT_DOUBLE:
        for (int64_t i = 0; i < dst->nelem; i++)
            ((double *)dst->data)[i] += sign * ((const double *)src->data)[i];
        break;
    case RT_DT_INT32:
        for (int64_t i = 0; i < dst->nelem; i++)
            ((int32_t *)dst->data)[i] += (int32_t)sign * ((const int32_t *)src->data)[i];
        break;
    case RT_DT_INT64:
        for (int64_t i = 0; i < dst->nelem; i++)
            ((int64_t *)dst->data)[i] += (int64_t)sign * ((const int64_t *)src->data)[i];
        break;
    default:
        return ms_errf(MS_ENOTSUP, "'%s': AssignAdd/Sub on %s is not supported", who,
                       rt_dtype_name(dst->dtype));
    }
    return MS_OK;
}

static ms_status assign_common(const kn_node *n, rt_tensor *const *in, rt_tensor **out,
                               assign_kind k) {
    ms_status s = assign_into(in[0], in[1], k, n->name);
    if (s != MS_OK) return s;
    if (n->nout > 0) out[0] = rt_tensor_ref(in[0]);
    return MS_OK;
}

/* The variable behind a ref input: the VariableV2 node that feeds input 0. */
static rt_var *ref_var(kn_ctx *ctx) {
    rt_hostctx *h = rt_hostctx_of(ctx);
    if (h == NULL || h->graph == NULL || h->gnode == NULL || h->vars == NULL || h->gnode->nin < 1)
        return NULL;
    const rt_gnode *src = &h->graph->nodes[h->gnode->in[0].node];
    if (strcmp(src->kn.op, "VariableV2") != 0 && strcmp(src->kn.op, "Variable") != 0) return NULL;
    char buf[256];
    return rt_vars_get(vars_of(ctx), var_name(&src->kn, buf, sizeof buf), RT_DT_INVALID);
}

static ms_status assign_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st;
    /* Strings (and shape changes with validate_shape=false) cannot be written
     * in place: replace the variable's tensor instead. */
    int same = in[0]->dtype == in[1]->dtype && rt_shape_equal(&in[0]->shape, &in[1]->shape);
    if (in[1]->dtype == RT_DT_STRING || (!same && !kn_attr_b(n, "validate_shape", 1))) {
        rt_var *v = ref_var(ctx);
        if (v == NULL)
            return ms_errf(MS_ENOTSUP, "'%s': input 0 is not a variable this op can replace",
                           n->name);
        rt_tensor *copy;
        ms_status s = rt_tensor_clone(in[1], &copy);
        if (s != MS_OK) return s;
        rt_tensor_unref(v->value);
        v->value = copy;
        if (n->nout > 0) out[0] = rt_tensor_ref(copy);
        return MS_OK;
    }
    return assign_common(n, in, out, ASSIGN_SET);
}

static ms_status assign_add_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)ctx, (void)st;
    return assign_common(n, in, out, ASSIGN_ADD);
}

static ms_status assign_sub_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)ctx, (void)st;
    return assign_common(n, in, out, ASSIGN_SUB);
}

/* Resource variables: the handle is a DT_RESOURCE scalar holding the rt_var
 * pointer. Reads return the current value tensor; writes replace it with a
 * private copy, so a tensor handed to a reader never changes under it. */
static ms_status var_handle_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)st, (void)in;
    ms_status s = need_vars(ctx, n);
    if (s != MS_OK) return s;
    char buf[256];
    rt_var *v = rt_vars_get(vars_of(ctx), var_name(n, buf, sizeof buf),
                            kn_attr_type(n, "dtype", RT_DT_FLOAT));
    if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    rt_shape scalar = {0};
    if ((s = rt_tensor_new(RT_DT_RESOURCE, &scalar, &out[0])) != MS_OK) return s;
    *(rt_var **)out[0]->data = v;
    return MS_OK;
}

static ms_status handle_var(const kn_node *n, const rt_tensor *h, rt_var **v) {
    if (h->dtype != RT_DT_RESOURCE || h->nelem != 1 || *(rt_var **)h->data == NULL)
        return ms_errf(MS_EINVAL, "'%s': input 0 is not a variable handle", n->name);
    *v = *(rt_var **)h->data;
    return MS_OK;
}

static ms_status read_var_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)ctx, (void)st;
    rt_var *v = NULL;
    ms_status s = handle_var(n, in[0], &v);
    if (s != MS_OK) return s;
    if (v->value == NULL)
        return ms_errf(MS_EINVAL, "'%s': variable '%s' is not initialised", n->name, v->name);
    out[0] = rt_tensor_ref(v->value);
    return MS_OK;
}

static ms_status assign_var_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)ctx, (void)st, (void)out;
    rt_var *v = NULL;
    ms_status s = handle_var(n, in[0], &v);
    if (s != MS_OK) return s;
    rt_tensor *copy;
    if ((s = rt_tensor_clone(in[1], &copy)) != MS_OK) return s;
    rt_tensor_unref(v->value);
    v->value = copy;
    return MS_OK;
}

static ms_status assign_var_addsub(const kn_node *n, rt_tensor *const *in, assign_kind k) {
    rt_var *v = NULL;
    ms_status s = handle_var(n, in[0], &v);
    if (s != MS_OK) return s;
    if (v->value == NULL)
        return ms_errf(MS_EINVAL, "'%s': variable '%s' is not initialised", n->name, v->name);
    rt_tensor *copy;
    if ((s = rt_tensor_clone(v->value, &copy)) != MS_OK) return s;
    if ((s = assign_into(copy, in[1], k, n->name)) != MS_OK) {
        rt_tensor_unref(copy);
        return s;
    }
    rt_tensor_unref(v->value);
    v->value = copy;
    return MS_OK;
}

static ms_status assign_add_var_compute(kn_ctx *ctx, const kn_node *n, void *st,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st, (void)out;
    return assign_var_addsub(n, in, ASSIGN_ADD);
}

static ms_status assign_sub_var_compute(kn_ctx *ctx, const kn_node *n, void *st,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st, (void)out;
    return assign_var_addsub(n, in, ASSIGN_SUB);
}

static ms_status var_is_init_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                     rt_tensor **out) {
    (void)ctx, (void)st;
    rt_var *v = NULL;
    ms_status s = handle_var(n, in[0], &v);
    if (s != MS_OK) return s;
    rt_shape scalar = {0};
    if ((s = rt_tensor_new(RT_DT_BOOL, &scalar, &out[0])) != MS_OK) return s;
    *(uint8_t *)out[0]->data = v->value != NULL;
    return MS_OK;
}

/* clang-format off */
const kn_kernel rt_ops_core_kernels[] = {
    {.op = "Placeholder", .compute = placeholder_compute},
    {.op = "PlaceholderV2", .compute = placeholder_compute},
    {.op = "PlaceholderWithDefault", .compute = forward_compute},
    {.op = "Const", .prepare = const_prepare, .compute = const_compute, .release = tensor_release},
    {.op = "Identity", .compute = forward_compute},
    {.op = "IdentityN", .compute = forward_compute},
    {.op = "StopGradient", .compute = forward_compute},
    {.op = "Snapshot", .compute = forward_compute},
    {.op = "NoOp", .compute = noop_compute},
    {.op = "DisableCopyOnRead", .compute = noop_compute, .stateful = 1},
    {.op = "VariableV2", .compute = variable_compute, .stateful = 1},
    {.op = "Variable", .compute = variable_compute, .stateful = 1},
    {.op = "Assign", .compute = assign_compute, .stateful = 1},
    {.op = "AssignAdd", .compute = assign_add_compute, .stateful = 1},
    {.op = "AssignSub", .compute = assign_sub_compute, .stateful = 1},
    {.op = "VarHandleOp", .compute = var_handle_compute, .stateful = 1},
    {.op = "ReadVariableOp", .compute = read_var_compute, .stateful = 1},
    {.op = "AssignVariableOp", .compute = assign_var_compute, .stateful = 1},
    {.op = "AssignAddVariableOp", .compute = assign_add_var_compute, .stateful = 1},
    {.op = "AssignSubVariableOp", .compute = assign_sub_var_compute, .stateful = 1},
    {.op = "VarIsInitializedOp", .compute = var_is_init_compute, .stateful = 1},
    {.op = NULL},
};
/* clang-format on */
