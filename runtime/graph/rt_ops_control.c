/* rt_ops_control.c - host ops: functional control flow (While,
 * StatelessWhile, If, StatelessIf, Case, StatelessCase).
 *
 * Their functions (cond / body, then_branch / else_branch, branches) are not
 * inlined: at prepare each becomes a graph of its own (rt_graph_build_function)
 * with one plan fed by its arguments and fetching its return values, built
 * from the library of the graph being prepared (rt_preparing_graph). Nested
 * control flow in a body is prepared the same way, up to a depth of 32. A
 * body's unsupported op therefore fails the load, naming the body's node.
 *
 * While runs cond on the loop variables, and while its result is true (TF's
 * ToBool: a scalar's value or non-zero-ness, a string's non-emptiness, a
 * non-scalar's non-emptiness) runs body on them; the outputs are the last
 * loop variables (the inputs for a zero-trip loop). Each iteration checks
 * the request's cancellation. Case runs branch i for 0 <= i < N and the last
 * branch otherwise, as TensorFlow does.
 *
 * TF1 while loops: the loader's pass turns each frame into one
 * _TF1WhileLoop node (rt_tf1loop.c); here it builds two plans over its own
 * graph, cond (fed at the Merges and the invariant Enters, fetching the
 * LoopCond's input) and body (fed at the Merges, the Switches' body outputs
 * and the invariant Enters, fetching the NextIterations' inputs), and runs
 * them as While runs its functions. Exit forwards the loop's output. A TF1
 * cond's Merge becomes a _TF1Cond node (rt_tf1loop.c) that runs the live
 * branch as a plan fed at its Switches. Switch / Merge that were not
 * converted are refused at prepare with one clear message, as are Enter /
 * NextIteration / LoopCond reached outside a converted frame. */
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "rt_ops.h"
#include "rt_tf1loop.h"

#define MAX_DEPTH 32

typedef struct fn_plan {
    rt_fn_graph *fg;
    rt_plan *plan;
} fn_plan;

typedef struct ctl_state {
    int nfn, cap;
    fn_plan *fn; /* as many as the node has functions (Case: its branches) */
} ctl_state;

static _Thread_local int tl_depth;

static const Tensorflow__AttrValue *def_attr(const kn_node *n, const char *key) {
    const Tensorflow__NodeDef *d = n->def;
    if (d == NULL) return NULL;
    for (size_t i = 0; i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

static void ctl_release(void *p) {
    ctl_state *s = p;
    if (s == NULL) return;
    for (int i = 0; i < s->nfn; i++) {
        rt_plan_free(s->fn[i].plan);
        rt_fn_graph_free(s->fn[i].fg);
    }
    free(s->fn);
    free(s);
}

/* Builds the graph and plan of function fname; nargs / nrets (when >= 0)
 * must match its signature. */
static ms_status add_fn(const kn_node *n, ctl_state *s, const char *fname, int nargs, int nrets) {
    rt_graph *g = rt_preparing_graph();
    if (g == NULL || g->mg == NULL)
        return ms_errf(MS_EINVAL, "'%s' (%s) runs only inside a loaded graph", n->name, n->op);
    if (s->nfn == s->cap) {
        int cap = s->cap ? 2 * s->cap : 2;
        fn_plan *fn = realloc(s->fn, sizeof(*fn) * (size_t)cap);
        if (fn == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        memset(fn + s->cap, 0, sizeof(*fn) * (size_t)(cap - s->cap));
        s->fn = fn;
        s->cap = cap;
    }
    if (tl_depth >= MAX_DEPTH)
        return ms_errf(MS_EINVAL, "'%s' (%s): control flow nested deeper than %d", n->name, n->op,
                       MAX_DEPTH);
    fn_plan *f = &s->fn[s->nfn];
    ms_status st = rt_graph_build_function(g->mg, fname, g->backend, g->host_ops, &f->fg);
    if (st != MS_OK) return ms_errwrap(st, "node '%s' (%s)", n->name, n->op);
    s->nfn++;
    if ((nargs >= 0 && f->fg->nargs != nargs) || (nrets >= 0 && f->fg->nrets != nrets))
        return ms_errf(MS_EINVAL,
                       "node '%s' (%s): function %s takes %d arguments and returns %d values; the "
                       "node needs %d and %d",
                       n->name, n->op, fname, f->fg->nargs, f->fg->nrets, nargs, nrets);
    tl_depth++;
    st = rt_plan_build(f->fg->g, f->fg->args, f->fg->nargs, f->fg->rets, f->fg->nrets, f->fg->ctl,
                       f->fg->nctl, &f->plan);
    tl_depth--;
    if (st != MS_OK) return ms_errwrap(st, "node '%s' (%s), function %s", n->name, n->op, fname);
    return MS_OK;
}

static ms_status func_name(const kn_node *n, const char *key, const char **out) {
    const Tensorflow__AttrValue *a = def_attr(n, key);
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_FUNC || a->func == NULL ||
        a->func->name == NULL)
        return ms_errf(MS_EINVAL, "'%s' (%s) has no function attr '%s'", n->name, n->op, key);
    *out = a->func->name;
    return MS_OK;
}

static ms_status while_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    ctl_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    const char *cond, *body;
    ms_status st = func_name(n, "cond", &cond);
    if (st == MS_OK) st = func_name(n, "body", &body);
    if (st == MS_OK) st = add_fn(n, s, cond, n->nin, 1);
    if (st == MS_OK) st = add_fn(n, s, body, n->nin, n->nin);
    if (st == MS_OK && n->nout != n->nin)
        st = ms_errf(MS_EINVAL, "'%s' (%s): %d inputs but %d outputs", n->name, n->op, n->nin,
                     n->nout);
    if (st != MS_OK) {
        ctl_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status if_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    ctl_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    const char *t, *e;
    ms_status st = n->nin >= 1 ? MS_OK : ms_errf(MS_EINVAL, "'%s' (%s) has no condition input",
                                                   n->name, n->op);
    if (st == MS_OK) st = func_name(n, "then_branch", &t);
    if (st == MS_OK) st = func_name(n, "else_branch", &e);
    if (st == MS_OK) st = add_fn(n, s, t, n->nin - 1, n->nout);
    if (st == MS_OK) st = add_fn(n, s, e, n->nin - 1, n->nout);
    if (st != MS_OK) {
        ctl_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status case_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    const Tensorflow__AttrValue *a = def_attr(n, "branches");
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || a->list == NULL ||
        a->list->n_func == 0)
        return ms_errf(MS_EINVAL, "'%s' (%s) has no 'branches'", n->name, n->op);
    if (n->nin < 1)
        return ms_errf(MS_EINVAL, "'%s' (%s) has no branch_index input", n->name, n->op);
    ctl_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = MS_OK;
    for (size_t i = 0; i < a->list->n_func && st == MS_OK; i++)
        st = add_fn(n, s, a->list->func[i]->name, n->nin - 1, n->nout);
    if (st != MS_OK) {
        ctl_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

/* TensorFlow's ToBool of a predicate tensor. */
static int to_bool(const rt_tensor *t) {
    if (t->shape.rank != 0) return t->nelem > 0;
    switch (t->dtype) {
    case RT_DT_BOOL:
    case RT_DT_UINT8:
    case RT_DT_INT8: return *(const uint8_t *)t->data != 0;
    case RT_DT_INT16:
    case RT_DT_UINT16: return *(const uint16_t *)t->data != 0;
    case RT_DT_INT32:
    case RT_DT_UINT32: return *(const uint32_t *)t->data != 0;
    case RT_DT_INT64:
    case RT_DT_UINT64: return *(const uint64_t *)t->data != 0;
    case RT_DT_FLOAT: return *(const float *)t->data != 0.0f;
    case RT_DT_DOUBLE: return *(const double *)t->data != 0.0;
    case RT_DT_STRING: return rt_tensor_strs(t)[0].len > 0;
    default: return 1;
    }
}

static rt_vars *vars_of(kn_ctx *ctx) {
    rt_hostctx *hc = rt_hostctx_of(ctx);
    return hc ? hc->vars : NULL;
}

static void unref_all(rt_tensor **t, int n) {
    for (int i = 0; i < n; i++) {
        rt_tensor_unref(t[i]);
        t[i] = NULL;
    }
}

static ms_status while_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                               rt_tensor **out) {
    const ctl_state *s = st_;
    const fn_plan *cond = &s->fn[0], *body = &s->fn[1];
    int nv = n->nin;
    rt_tensor **cur = calloc((size_t)nv + 1, sizeof(*cur));
    rt_tensor **next = calloc((size_t)nv + 1, sizeof(*next));
    if (cur == NULL || next == NULL) {
        free(cur);
        free(next);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < nv; i++) cur[i] = rt_tensor_ref(in[i]);
    ms_status st = MS_OK;
    for (int64_t iter = 0;; iter++) {
        if (kn_ctx_cancelled(ctx)) {
            st = ms_errf(MS_ECANCELED, "request cancelled");
            break;
        }
        rt_tensor *c = NULL;
        st = rt_plan_run(cond->plan, ctx, vars_of(ctx), cur, &c);
        if (st != MS_OK) {
            st = ms_errwrap(st, "node '%s' (%s), iteration %lld, cond", n->name, n->op,
                            (long long)iter);
            break;
        }
        int go = to_bool(c);
        rt_tensor_unref(c);
        if (!go) break;
        st = rt_plan_run(body->plan, ctx, vars_of(ctx), cur, next);
        if (st != MS_OK) {
            st = ms_errwrap(st, "node '%s' (%s), iteration %lld, body", n->name, n->op,
                            (long long)iter);
            break;
        }
        unref_all(cur, nv);
        rt_tensor **t = cur;
        cur = next;
        next = t;
    }
    if (st == MS_OK)
        for (int i = 0; i < nv; i++) out[i] = cur[i], cur[i] = NULL;
    unref_all(cur, nv);
    free(cur);
    free(next);
    return st;
}

static ms_status run_branch(kn_ctx *ctx, const kn_node *n, const fn_plan *f, rt_tensor *const *in,
                            rt_tensor **out) {
    ms_status st = rt_plan_run(f->plan, ctx, vars_of(ctx), in + 1, out);
    if (st != MS_OK) return ms_errwrap(st, "node '%s' (%s)", n->name, n->op);
    return MS_OK;
}

static ms_status if_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                            rt_tensor **out) {
    const ctl_state *s = st_;
    return run_branch(ctx, n, &s->fn[to_bool(in[0]) ? 0 : 1], in, out);
}

static ms_status case_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                              rt_tensor **out) {
    const ctl_state *s = st_;
    const rt_tensor *b = in[0];
    if (b->dtype != RT_DT_INT32 || b->nelem != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): branch_index must be an int32 scalar, got %s of %lld "
                       "elements", n->name, n->op, rt_dtype_name(b->dtype), (long long)b->nelem);
    int32_t i = *(const int32_t *)b->data;
    if (i < 0 || i >= s->nfn) i = s->nfn - 1;
    return run_branch(ctx, n, &s->fn[i], in, out);
}

/* ---- TF1 while loops (rt_tf1loop.h) ---- */

typedef struct tf1_state {
    rt_plan *cond, *body;
    int nvars, ninv;
} tf1_state;

static void tf1_release(void *p) {
    tf1_state *s = p;
    if (s == NULL) return;
    rt_plan_free(s->cond);
    rt_plan_free(s->body);
    free(s);
}

static ms_status tf1_loop_plans(const kn_node *n, rt_graph *g, const rt_tf1_frame *f,
                                tf1_state *s) {
    int nv = f->nvars, ni = f->ninv;
    rt_edge *feeds = calloc((size_t)(2 * nv + ni) + 1, sizeof(*feeds));
    if (feeds == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    /* cond: [Merge_i:0..., invariant Enter_j:0...] -> LoopCond's input */
    for (int i = 0; i < nv; i++) feeds[i] = (rt_edge){f->merge[i], 0};
    for (int j = 0; j < ni; j++) feeds[nv + j] = (rt_edge){f->inv[j], 0};
    tl_depth++;
    ms_status st = rt_plan_build(g, feeds, nv + ni, &f->pred, 1, NULL, 0, &s->cond);
    if (st != MS_OK) {
        tl_depth--;
        free(feeds);
        return ms_errwrap(st, "node '%s' (TF1 while loop '%s'), its condition", n->name, f->name);
    }
    /* body: [Merge_i:0..., Switch_i:1..., invariant Enter_j:0...] -> NextIteration inputs */
    for (int i = 0; i < nv; i++) feeds[nv + i] = (rt_edge){f->sw[i], 1};
    for (int j = 0; j < ni; j++) feeds[2 * nv + j] = (rt_edge){f->inv[j], 0};
    st = rt_plan_build(g, feeds, 2 * nv + ni, f->next_in, nv, NULL, 0, &s->body);
    tl_depth--;
    free(feeds);
    if (st != MS_OK)
        return ms_errwrap(st, "node '%s' (TF1 while loop '%s'), its body", n->name, f->name);
    return MS_OK;
}

static ms_status tf1_loop_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    rt_graph *g = rt_preparing_graph();
    size_t len = 0;
    const Tensorflow__AttrValue *a = def_attr(n, "frame_name");
    if (g == NULL || a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S)
        return ms_errf(MS_EINVAL, "'%s' (%s) runs only as a converted TF1 loop of a graph",
                       n->name, n->op);
    if (tl_depth >= MAX_DEPTH)
        return ms_errf(MS_EINVAL, "'%s' (%s): control flow nested deeper than %d", n->name, n->op,
                       MAX_DEPTH);
    len = a->s.len;
    char *name = malloc(len + 1);
    tf1_state *s = calloc(1, sizeof(*s));
    if (name == NULL || s == NULL) {
        free(name);
        free(s);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    memcpy(name, a->s.data, len);
    name[len] = '\0';
    rt_tf1_frame f;
    ms_status st = rt__tf1_frame_find(g, name, &f);
    free(name);
    if (st != MS_OK) {
        free(s);
        return st;
    }
    s->nvars = f.nvars;
    s->ninv = f.ninv;
    if (n->nin != f.nvars + f.ninv || n->nout != f.nvars)
        st = ms_errf(MS_EINTERNAL, "'%s' (%s): %d inputs and %d outputs for %d loop variables and "
                     "%d invariants", n->name, n->op, n->nin, n->nout, f.nvars, f.ninv);
    if (st == MS_OK) st = tf1_loop_plans(n, g, &f, s);
    rt__tf1_frame_free(&f);
    if (st != MS_OK) {
        tf1_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status tf1_loop_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    const tf1_state *s = st_;
    int nv = s->nvars, ni = s->ninv;
    /* cond feeds [cur, inv]; body feeds [cur, cur, inv] */
    rt_tensor **cf = calloc((size_t)(nv + ni) + 1, sizeof(*cf));
    rt_tensor **bf = calloc((size_t)(2 * nv + ni) + 1, sizeof(*bf));
    rt_tensor **next = calloc((size_t)nv + 1, sizeof(*next));
    rt_tensor **cur = calloc((size_t)nv + 1, sizeof(*cur));
    ms_status st = MS_OK;
    if (!cf || !bf || !next || !cur) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nv; i++) cur[i] = rt_tensor_ref(in[i]);
    for (int j = 0; j < ni; j++) cf[nv + j] = bf[2 * nv + j] = in[nv + j];
    for (int64_t iter = 0;; iter++) {
        if (kn_ctx_cancelled(ctx)) {
            st = ms_errf(MS_ECANCELED, "request cancelled");
            break;
        }
        for (int i = 0; i < nv; i++) cf[i] = bf[i] = bf[nv + i] = cur[i];
        rt_tensor *c = NULL;
        st = rt_plan_run(s->cond, ctx, vars_of(ctx), cf, &c);
        if (st != MS_OK) {
            st = ms_errwrap(st, "node '%s' (TF1 while loop), iteration %lld, condition", n->name,
                            (long long)iter);
            break;
        }
        int go = to_bool(c);
        rt_tensor_unref(c);
        if (!go) break;
        st = rt_plan_run(s->body, ctx, vars_of(ctx), bf, next);
        if (st != MS_OK) {
            st = ms_errwrap(st, "node '%s' (TF1 while loop), iteration %lld, body", n->name,
                            (long long)iter);
            break;
        }
        unref_all(cur, nv);
        rt_tensor **t = cur;
        cur = next;
        next = t;
    }
    if (st == MS_OK)
        for (int i = 0; i < nv; i++) out[i] = cur[i], cur[i] = NULL;
done:
    if (cur) unref_all(cur, nv);
    free(cf);
    free(bf);
    free(next);
    free(cur);
    return st;
}

/* A converted TF1 cond (rt_tf1loop.h): two plans over the graph, fed at
 * the Switches' output 1 (true) or 0 (false), each fetching its branch's
 * result; outputs the result and Merge's value_index. */
typedef struct cond_state {
    rt_plan *plan[2]; /* [0] false, [1] true */
    int index[2];     /* value_index of each */
} cond_state;

static void cond_release(void *p) {
    cond_state *s = p;
    if (s == NULL) return;
    rt_plan_free(s->plan[0]);
    rt_plan_free(s->plan[1]);
    free(s);
}

static ms_status tf1_cond_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    rt_graph *g = rt_preparing_graph();
    if (g == NULL) return ms_errf(MS_EINVAL, "'%s' (%s) runs only inside a graph", n->name, n->op);
    int idx = rt_graph_find(g, n->name);
    if (idx < 0) return ms_errf(MS_EINTERNAL, "'%s' (%s) is not in its graph", n->name, n->op);
    if (tl_depth >= MAX_DEPTH)
        return ms_errf(MS_EINVAL, "'%s' (%s): control flow nested deeper than %d", n->name, n->op,
                       MAX_DEPTH);
    rt_tf1_cond c;
    ms_status st = rt__tf1_cond_find(g, &g->nodes[idx], &c);
    if (st != MS_OK) return st;
    cond_state *s = calloc(1, sizeof(*s));
    rt_edge *feeds = calloc((size_t)c.nsw + 1, sizeof(*feeds));
    if (s == NULL || feeds == NULL || n->nin != c.nsw + 1 || n->nout != 2) {
        st = s && feeds ? ms_errf(MS_EINTERNAL, "'%s' (%s): %d inputs for %d Switches", n->name,
                                  n->op, n->nin, c.nsw)
                        : ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    s->index[1] = c.then_index;
    s->index[0] = 1 - c.then_index;
    for (int b = 0; b < 2 && st == MS_OK; b++) {
        for (int j = 0; j < c.nsw; j++) feeds[j] = (rt_edge){c.sw[j], b};
        tl_depth++;
        st = rt_plan_build(g, feeds, c.nsw, b ? &c.then_out : &c.else_out, 1, NULL, 0,
                           &s->plan[b]);
        tl_depth--;
        if (st != MS_OK)
            st = ms_errwrap(st, "node '%s' (TF1 cond), its %s branch", n->name,
                            b ? "true" : "false");
    }
done:
    free(feeds);
    free(c.sw);
    if (st != MS_OK) {
        cond_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status tf1_cond_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    const cond_state *s = st_;
    int b = to_bool(in[0]);
    rt_tensor *r = NULL, *vi = NULL;
    ms_status st = rt_plan_run(s->plan[b], ctx, vars_of(ctx), in + 1, &r);
    if (st != MS_OK)
        return ms_errwrap(st, "node '%s' (TF1 cond), its %s branch", n->name, b ? "true" : "false");
    rt_shape sc = {.rank = 0};
    if ((st = rt_tensor_new(RT_DT_INT32, &sc, &vi)) != MS_OK) {
        rt_tensor_unref(r);
        return st;
    }
    *(int32_t *)vi->data = s->index[b];
    out[0] = r;
    out[1] = vi;
    return MS_OK;
}

static ms_status tf1_exit_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)ctx, (void)st;
    if (n->nin != 1) return ms_errf(MS_EINVAL, "'%s' (%s) has no input", n->name, n->op);
    out[0] = rt_tensor_ref(in[0]);
    return MS_OK;
}

static ms_status tf1_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin, (void)state;
    if (strstr(n->op, "Switch") || strstr(n->op, "Merge"))
        return ms_errf(MS_ENOTSUP,
                       "op %s (node '%s') is part of a TF1 cond dcmserve could not convert (each "
                       "branch must read the tensors it takes from outside through Switch nodes of "
                       "one predicate, as tf.cond builds them); export the model with TF2 control "
                       "flow (If functions, tf.compat.v1.enable_control_flow_v2())",
                       n->op, n->name);
    return ms_errf(MS_ENOTSUP,
                   "op %s (node '%s') is TF1 control flow outside a while loop dcmserve could "
                   "convert (a frame of Enter / Merge / Switch / LoopCond / NextIteration / Exit "
                   "nodes)", n->op, n->name);
}

static ms_status tf1_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)ctx, (void)st, (void)in, (void)out;
    return ms_errf(MS_ENOTSUP, "op %s (node '%s') is not supported", n->op, n->name);
}

int rt_ops_control_refused(const char *op) {
    /* Enter / Exit / NextIteration / LoopCond run as parts of a converted
     * loop; Switch / Merge never run themselves: those of a converted loop or
     * cond are parts of its node (rt_opscan does not list them), the others
     * are refused. */
    return strcmp(op, "Switch") == 0 || strcmp(op, "RefSwitch") == 0 ||
           strcmp(op, "Merge") == 0 || strcmp(op, "RefMerge") == 0;
}

const kn_kernel rt_ops_control_kernels[] = {
    {.op = "While", .prepare = while_prepare, .compute = while_compute, .release = ctl_release,
     .stateful = 1},
    {.op = "StatelessWhile", .prepare = while_prepare, .compute = while_compute,
     .release = ctl_release},
    {.op = "If", .prepare = if_prepare, .compute = if_compute, .release = ctl_release,
     .stateful = 1},
    {.op = "StatelessIf", .prepare = if_prepare, .compute = if_compute, .release = ctl_release},
    {.op = "Case", .prepare = case_prepare, .compute = case_compute, .release = ctl_release,
     .stateful = 1},
    {.op = "StatelessCase", .prepare = case_prepare, .compute = case_compute,
     .release = ctl_release},
    {.op = RT_TF1_LOOP_OP, .prepare = tf1_loop_prepare, .compute = tf1_loop_compute,
     .release = tf1_release, .stateful = 1},
    {.op = RT_TF1_COND_OP, .prepare = tf1_cond_prepare, .compute = tf1_cond_compute,
     .release = cond_release, .stateful = 1},
    {.op = "Enter", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "RefEnter", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "Exit", .compute = tf1_exit_compute},
    {.op = "RefExit", .compute = tf1_exit_compute},
    {.op = "Merge", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "RefMerge", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "Switch", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "RefSwitch", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "NextIteration", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "RefNextIteration", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = "LoopCond", .prepare = tf1_prepare, .compute = tf1_compute},
    {.op = NULL},
};
