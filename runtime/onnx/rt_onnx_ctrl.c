/* rt_onnx_ctrl.c - ONNX control flow: If, Loop and Scan become TensorFlow's
 * functional control flow (StatelessIf, StatelessWhile) whose branches and
 * bodies are functions of the graph's library; the executor prepares each
 * function as a sub-plan of its own and runs it per call or iteration
 * (runtime/graph/rt_ops_control.c).
 *
 * A subgraph is converted by the same handlers as the main graph, into a
 * node list of its own and with a value table of its own (rt__ox_scope):
 * names it reads from enclosing graphs (ONNX's outer scope) are copied in
 * when constant and otherwise captured, passed to the function as extra
 * arguments after the ones the op defines. Shapes inside a body are what
 * the body's own computation gives; loop-carried values enter with their
 * rank and unknown dims, since they may change from one iteration to the
 * next.
 *
 * If: a condition the converter knows (a constant, or one folded from
 * static shapes, as exporters often emit) inlines the taken branch. Else
 * StatelessIf(cond, captures of both branches) with each branch taking the
 * other's captures as unused arguments.
 *
 * Loop: StatelessWhile over [iteration, cond, M, loop-carried..., one
 * TensorList per scan output, captures...]; the cond function is
 * `cond && iteration < M` (an absent M or cond counts as no limit / true),
 * the body is the ONNX body plus iteration + 1 and a TensorListPushBack per
 * scan output; after the loop each list is stacked. Scan (opset 9+):
 * StatelessWhile over [i, length, states..., scan inputs..., lists...,
 * captures...], the body reading element i (or length - 1 - i) of each scan
 * input along its axis with GatherV2; stacked outputs are reversed and moved
 * to their axis as scan_output_directions / scan_output_axes say.
 *
 * Refused at import, naming node and op: subgraph inputs or outputs that
 * are not tensors (sequences, optionals), a loop-carried value whose type or
 * rank the body changes, scan outputs of strings, Scan-8 with a batch other
 * than a static 1 or with sequence_lens (op_scan8). Scan outputs of a loop that runs zero
 * times cannot be stacked (their element shape is unknown): that run fails
 * with the executor's message. */
#include <stdint.h>
#include <string.h>

#include "rt_onnx_ext.h"
#include "rt_onnx_int.h"

/* Ifs that take the rest of their graph into their branches, nested
 * (split_if): each doubles what follows them. */
#define MAX_SPLITS 8

/* A function being built from a subgraph (or from scratch: a loop's cond). */
typedef struct fnb {
    rt__ox_scope sc;
    Tensorflow__NodeDef **nodes; /* the enclosing graph's node list, waiting */
    size_t nnodes, capnodes;
    const Onnx__NodeProto *cur;
    int nargs, cap;
    const char **arg; /* the arguments the op defines, in order */
    rt_dtype *argdt;
    Tensorflow__FunctionDef *fd; /* fn_end's result */
    Tensorflow__NodeDef **body;  /* its node list */
    size_t nbody;
} fnb;

/* Every node of subgraph g. */
static ms_status convert_all(rt__ox_conv *cv, const Onnx__GraphProto *g,
                             Onnx__NodeProto *const *nodes, const uint8_t *skip) {
    int done;
    return cv->convert_from(cv, g, nodes, skip, 0, &done);
}

static void fn_begin(rt__ox_conv *cv, fnb *f) {
    memset(f, 0, sizeof(*f));
    f->sc.parent = cv->scope;
    f->sc.saved = cv->vals;
    memset(&cv->vals, 0, sizeof(cv->vals));
    cv->scope = &f->sc;
    f->nodes = cv->nodes;
    f->nnodes = cv->nnodes;
    f->capnodes = cv->capnodes;
    cv->nodes = NULL;
    cv->nnodes = cv->capnodes = 0;
    f->cur = cv->cur;
}

/* Back to the enclosing graph (also after a failure: the caller's messages
 * and node list stay right). */
static void fn_leave(rt__ox_conv *cv, fnb *f) {
    f->body = cv->nodes;
    f->nbody = cv->nnodes;
    cv->vals = f->sc.saved;
    cv->scope = f->sc.parent;
    cv->nodes = f->nodes;
    cv->nnodes = f->nnodes;
    cv->capnodes = f->capnodes;
    cv->cur = f->cur;
}

/* A new argument of type dt; its name is the tensor inside the function. */
static const char *fn_arg(rt__ox_conv *cv, fnb *f, const char *hint, rt_dtype dt) {
    if (f->nargs == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        const char **a = rt__ox_alloc(cv, (size_t)cap * sizeof(*a));
        rt_dtype *d = rt__ox_alloc(cv, (size_t)cap * sizeof(*d));
        if (f->nargs) {
            memcpy(a, f->arg, (size_t)f->nargs * sizeof(*a));
            memcpy(d, f->argdt, (size_t)f->nargs * sizeof(*d));
        }
        f->arg = a;
        f->argdt = d;
        f->cap = cap;
    }
    f->argdt[f->nargs] = dt;
    return f->arg[f->nargs++] = rt__ox_unique_name(cv, hint);
}

/* The subgraph input `name` as a new argument. */
static rt__ox_value *fn_bind(rt__ox_conv *cv, fnb *f, const char *name, rt_dtype dt, int rank,
                             const int64_t *dims) {
    const char *a = fn_arg(cv, f, rt__ox_printf(cv, "%s/arg", name), dt);
    rt__ox_value *v = rt__ox_define(cv, name, dt, rank, dims);
    v->tf = a;
    return v;
}

static Tensorflow__OpDef__ArgDef *argdef(rt__ox_conv *cv, const char *name, rt_dtype dt) {
    Tensorflow__OpDef__ArgDef *a = rt__ox_alloc(cv, sizeof(*a));
    tensorflow__op_def__arg_def__init(a);
    a->name = (char *)name;
    a->type = (Tensorflow__DataType)dt;
    return a;
}

/* Ends the function: returns rets[0..nret) (tensors inside it, of types
 * dts), drops the nodes none of them needs, adds it to the library and goes
 * back to the enclosing graph. Its arguments are set by fn_args. */
static void fn_end(rt__ox_conv *cv, fnb *f, const char *hint, const char *const *rets,
                   const rt_dtype *dts, int nret) {
    Tensorflow__FunctionDef *fd = rt__ox_alloc(cv, sizeof(*fd));
    tensorflow__function_def__init(fd);
    Tensorflow__OpDef *sig = rt__ox_alloc(cv, sizeof(*sig));
    tensorflow__op_def__init(sig);
    sig->name = (char *)rt__ox_unique_name(cv, hint);
    fd->signature = sig;
    sig->n_output_arg = (size_t)nret;
    sig->output_arg = rt__ox_alloc(cv, ((size_t)nret + 1) * sizeof(*sig->output_arg));
    fd->n_ret = (size_t)nret;
    fd->ret = rt__ox_alloc(cv, ((size_t)nret + 1) * sizeof(*fd->ret));
    for (int i = 0; i < nret; i++) {
        const char *on = rt__ox_unique_name(cv, rt__ox_printf(cv, "%s/ret%d", sig->name, i));
        sig->output_arg[i] = argdef(cv, on, dts[i]);
        fd->ret[i] = rt__ox_alloc(cv, sizeof(*fd->ret[i]));
        tensorflow__function_def__ret_entry__init(fd->ret[i]);
        fd->ret[i]->key = (char *)on;
        fd->ret[i]->value = (char *)rets[i];
    }
    fn_leave(cv, f);
    rt__ox_prune(cv, f->body, &f->nbody, rets, (size_t)nret);
    fd->n_node_def = f->nbody;
    fd->node_def = f->body;
    f->fd = fd;
    if (cv->nfuncs == cv->capfuncs) {
        size_t cap = cv->capfuncs ? 2 * cv->capfuncs : 8;
        Tensorflow__FunctionDef **fl = rt__ox_alloc(cv, cap * sizeof(*fl));
        if (cv->nfuncs) memcpy(fl, cv->funcs, cv->nfuncs * sizeof(*fl));
        cv->funcs = fl;
        cv->capfuncs = cap;
    }
    cv->funcs[cv->nfuncs++] = fd;
}

/* The function's arguments: the op's own, then npre unused ones of types
 * pre, then its captures, then npost unused ones. */
static void fn_args(rt__ox_conv *cv, fnb *f, const rt_dtype *pre, int npre, const rt_dtype *post,
                    int npost) {
    Tensorflow__OpDef *sig = f->fd->signature;
    size_t n = (size_t)(f->nargs + npre + f->sc.ncap + npost), k = 0;
    sig->input_arg = rt__ox_alloc(cv, (n + 1) * sizeof(*sig->input_arg));
    for (int i = 0; i < f->nargs; i++)
        sig->input_arg[k++] = argdef(cv, f->arg[i], f->argdt[i]);
    for (int i = 0; i < npre; i++)
        sig->input_arg[k++] = argdef(cv, rt__ox_unique_name(cv, "unused_arg"), pre[i]);
    for (int i = 0; i < f->sc.ncap; i++)
        sig->input_arg[k++] = argdef(cv, f->sc.cap_arg[i], f->sc.cap_outer[i]->dt);
    for (int i = 0; i < npost; i++)
        sig->input_arg[k++] = argdef(cv, rt__ox_unique_name(cv, "unused_arg"), post[i]);
    sig->n_input_arg = n;
}

/* The types of f's captures (for the other branch's unused arguments). */
static rt_dtype *cap_types(rt__ox_conv *cv, const fnb *f) {
    rt_dtype *t = rt__ox_alloc(cv, ((size_t)f->sc.ncap + 1) * sizeof(*t));
    for (int i = 0; i < f->sc.ncap; i++)
        t[i] = f->sc.cap_outer[i]->dt;
    return t;
}

/* Feeds f's captures (values of the graph now being converted) to node nd. */
static ms_status feed_caps(rt__ox_conv *cv, const fnb *f, Tensorflow__NodeDef *nd, rt_dtype *tin,
                           int *ntin) {
    for (int i = 0; i < f->sc.ncap; i++) {
        const char *t;
        ms_status st = rt__ox_tf(cv, f->sc.cap_outer[i], &t);
        if (st != MS_OK) return st;
        rt__tf_input(cv, nd, t);
        tin[(*ntin)++] = f->sc.cap_outer[i]->dt;
    }
    return MS_OK;
}

static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *n, const char *key) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    return a && a->g ? a->g : NULL;
}

/* Every input and output of subgraph g must be a tensor. */
static ms_status check_tensors(rt__ox_conv *cv, const char *what, const Onnx__GraphProto *g) {
    for (size_t i = 0; i < g->n_input + g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = i < g->n_input ? g->input[i] : g->output[i - g->n_input];
        /* Undeclared types (exporters often leave them out) are tensors:
         * every value the converter computes is one. */
        if (vi->type != NULL && vi->type->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET &&
            vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
            return rt__ox_err(cv, MS_ENOTSUP,
                              "%s %s \"%s\" is not a tensor (sequence and optional values in "
                              "control flow are not supported)",
                              what, i < g->n_input ? "input" : "output", vi->name ? vi->name : "");
    }
    return MS_OK;
}

/* Value `name` of the function being converted, as a tensor. */
static ms_status out_tf(rt__ox_conv *cv, const char *name, rt__ox_value **v, const char **tf) {
    *v = name ? rt__ox_find(cv, name) : NULL;
    if (*v == NULL)
        return rt__ox_err(cv, MS_EINVAL, "subgraph output \"%s\" is not produced by any node",
                          name ? name : "");
    return rt__ox_tf(cv, *v, tf);
}

/* x (one element of type dt) as a scalar. */
static const char *to_scalar(rt__ox_conv *cv, const char *h, const char *x, rt_dtype dt,
                             const rt__ox_value *v) {
    if (v != NULL && v->rank == 0) return x;
    return rt__tf_reshape(cv, h, x, dt, 0, NULL);
}

static const char *i64(rt__ox_conv *cv, const char *h, int64_t x) {
    return rt__tf_const_int(cv, h, RT_DT_INT64, 0, NULL, &x);
}

/* ---- If ---- */

/* Output i of n becomes the same value as v (an inlined branch's output). */
static void alias_out(rt__ox_conv *cv, const Onnx__NodeProto *n, size_t i, const rt__ox_value *v) {
    if (i >= n->n_output || n->output[i] == NULL || n->output[i][0] == '\0') return;
    rt__ox_value *o = rt__ox_define(cv, n->output[i], v->dt, v->rank, v->dim);
    const char *nm = o->name;
    *o = *v;
    o->name = nm;
}

/* StatelessIf over the finished branches f[0] (then) and f[1] (else),
 * giving values ov[b][i] of types dts[b][i]; defines names[0..no) (empty:
 * unused) as its results, with the shape both branches agree on. */
static ms_status emit_if(rt__ox_conv *cv, const Onnx__NodeProto *n, fnb *f, rt__ox_value *c,
                         const char *ctf, rt__ox_value **ov[2], rt_dtype *dts[2],
                         const char *const *names, size_t no) {
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    for (size_t i = 0; i < no; i++)
        if (dts[0][i] != dts[1][i])
            return rt__ox_err(cv, MS_EINVAL,
                              "result %zu (\"%s\") is %s in then_branch and %s in else_branch", i,
                              names[i] ? names[i] : "", rt_dtype_name(dts[0][i]),
                              rt_dtype_name(dts[1][i]));
    fn_args(cv, &f[0], NULL, 0, cap_types(cv, &f[1]), f[1].sc.ncap);
    fn_args(cv, &f[1], cap_types(cv, &f[0]), f[0].sc.ncap, NULL, 0);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "StatelessIf", h);
    rt__tf_input(cv, nd, to_scalar(cv, rt__ox_printf(cv, "%s/cond", h), ctf, c->dt, c));
    int ntin = 0;
    rt_dtype *tin = rt__ox_alloc(cv, (size_t)(f[0].sc.ncap + f[1].sc.ncap + 1) * sizeof(*tin));
    for (int b = 0; b < 2; b++)
        if ((st = feed_caps(cv, &f[b], nd, tin, &ntin)) != MS_OK) return st;
    rt__tf_attr_type(cv, nd, "Tcond", c->dt);
    rt__tf_attr_tlist(cv, nd, "Tin", tin, ntin);
    rt__tf_attr_tlist(cv, nd, "Tout", dts[0], (int)no);
    rt__tf_attr_func(cv, nd, "then_branch", f[0].fd->signature->name);
    rt__tf_attr_func(cv, nd, "else_branch", f[1].fd->signature->name);
    for (size_t i = 0; i < no; i++) {
        if (names[i] == NULL || names[i][0] == '\0') continue;
        const rt__ox_value *a = ov[0][i], *b = ov[1][i];
        int rank = a->rank == b->rank ? a->rank : -1;
        int64_t dims[OX_MAXR];
        for (int k = 0; k < rank; k++)
            dims[k] = a->dim[k] == b->dim[k] ? a->dim[k] : -1;
        rt__ox_define(cv, names[i], dts[0][i], rank, dims)->tf = rt__tf_out(cv, nd, (int)i);
    }
    return MS_OK;
}

static ms_status split_if(rt__ox_conv *cv, const Onnx__NodeProto *n,
                          const Onnx__GraphProto *const br[2], rt__ox_value *c, const char *ctf);

/* Branch br of If node n as function f: its nodes, then (with rest) the
 * rest of that node list, returning the values names[0..no) (rest: the
 * list's graph outputs; else the branch's outputs). */
static ms_status branch_fn(rt__ox_conv *cv, const Onnx__NodeProto *n, fnb *f,
                           const Onnx__GraphProto *br, const rt__ox_walk *rest,
                           const char *const *names, size_t no, rt__ox_value **ov, rt_dtype *dts,
                           const char *fname) {
    const char **rets = rt__ox_alloc(cv, (no + 1) * sizeof(*rets));
    fn_begin(cv, f);
    ms_status st = convert_all(cv, br, NULL, NULL);
    cv->cur = n;
    for (size_t i = 0; rest != NULL && i < n->n_output && st == MS_OK; i++) {
        rt__ox_value *v = NULL;
        const char *t;
        if ((st = out_tf(cv, br->output[i]->name, &v, &t)) == MS_OK) alias_out(cv, n, i, v);
    }
    int done;
    if (st == MS_OK && rest != NULL)
        st = cv->convert_from(cv, rest->g, rest->nodes, rest->skip, rest->next, &done);
    cv->cur = n;
    for (size_t i = 0; i < no && st == MS_OK; i++) {
        st = out_tf(cv, rest ? names[i] : br->output[i]->name, &ov[i], &rets[i]);
        if (st == MS_OK) dts[i] = ov[i]->dt;
    }
    if (st != MS_OK) {
        fn_leave(cv, f);
        return st;
    }
    fn_end(cv, f, fname, rets, dts, (int)no);
    return MS_OK;
}

/* A split's branch the converter cannot take (why: its refusal) as a
 * function that fails the run with that message when the branch is taken;
 * its results have the types dts of the other branch. MS_ENOTSUP when a
 * type has no placeholder value (strings). Exporters emit such branches
 * for inputs their model never gets (silero_vad's LSTM fed a rank-4 tensor
 * when its "squeeze if the dim is 1" did not squeeze), which ONNX Runtime
 * too would only fail on when taken. */
static ms_status failing_fn(rt__ox_conv *cv, fnb *f, const char *why, const rt_dtype *dts,
                            size_t no, const char *fname) {
    for (size_t i = 0; i < no; i++)
        if (!rt__ox_dtype_num(dts[i]) && dts[i] != RT_DT_BOOL) return MS_ENOTSUP;
    const char **rets = rt__ox_alloc(cv, (no + 1) * sizeof(*rets));
    fn_begin(cv, f);
    int64_t no_ = 0;
    Tensorflow__NodeDef *as = rt__tf_node(cv, "Assert", rt__ox_printf(cv, "%s/fail", fname));
    rt__tf_input(cv, as, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/false", fname), RT_DT_BOOL,
                                          0, NULL, &no_));
    rt__tf_input(cv, as, rt__tf_const_str(cv, rt__ox_printf(cv, "%s/why", fname), why));
    rt_dtype sdt = RT_DT_STRING;
    rt__tf_attr_tlist(cv, as, "T", &sdt, 1);
    rt__tf_attr_i(cv, as, "summarize", 1);
    const char *zero = rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/zero", fname), 0.0f);
    const char *ctl = rt__ox_printf(cv, "^%s", as->name);
    for (size_t i = 0; i < no; i++) {
        Tensorflow__NodeDef *c = rt__tf_node(cv, "Cast", rt__ox_printf(cv, "%s/ret", fname));
        rt__tf_input(cv, c, zero);
        rt__tf_input(cv, c, ctl);
        rt__tf_attr_type(cv, c, "SrcT", RT_DT_FLOAT);
        rt__tf_attr_type(cv, c, "DstT", dts[i]);
        rets[i] = c->name;
    }
    fn_end(cv, f, fname, rets, dts, (int)no);
    return MS_OK;
}

/* The two branches of If node n (rest: with the rest of that node list,
 * split_if), then the StatelessIf defining names[0..no). In a split, a
 * branch that cannot be converted fails the run when taken (failing_fn) as
 * long as the other one converts; results whose ranks differ split the
 * rest into the branches (split_if) while MAX_SPLITS allows. */
static ms_status two_branches(rt__ox_conv *cv, const Onnx__NodeProto *n,
                              const Onnx__GraphProto *const br[2], const rt__ox_walk *rest,
                              const char *const *names, size_t no, rt__ox_value *c,
                              const char *ctf) {
    const char *h = rt__ox_hint_of(n);
    size_t nfuncs0 = cv->nfuncs;
    fnb f[2];
    rt__ox_value **ov[2];
    rt_dtype *dts[2];
    ms_status st[2];
    const char *why[2] = {NULL, NULL}, *fname[2];
    for (int b = 0; b < 2; b++) {
        ov[b] = rt__ox_alloc(cv, (no + 1) * sizeof(*ov[b]));
        dts[b] = rt__ox_alloc(cv, (no + 1) * sizeof(*dts[b]));
        fname[b] = rt__ox_printf(cv, "%s/%s%s", h, b ? "else" : "then", rest ? "_and_rest" : "");
        st[b] = branch_fn(cv, n, &f[b], br[b], rest, names, no, ov[b], dts[b], fname[b]);
        if (st[b] == MS_ENOMEM || st[b] == MS_EINTERNAL) return st[b];
        if (st[b] != MS_OK) why[b] = rt__ox_strdup(cv, ms_errmsg());
    }
    /* Only a split's branch may fail at run time: the rest of its graph was
     * converted under that branch's ranks, which the run may never give. A
     * plain branch the converter cannot take is refused at import. */
    for (int b = 0; b < 2; b++)
        if (st[b] != MS_OK && (rest == NULL || st[1 - b] != MS_OK))
            return ms_errf(st[b], "%s", why[b]);
    for (int b = 0; b < 2; b++) {
        if (st[b] == MS_OK) continue;
        /* The other branch's results stand for this one's (a run that takes
         * this branch fails). */
        memcpy(ov[b], ov[1 - b], no * sizeof(*ov[b]));
        memcpy(dts[b], dts[1 - b], no * sizeof(*dts[b]));
        const char *msg = rt__ox_printf(cv, "ONNX node \"%s\" (op If): its %s cannot run: %s",
                                        n->name ? n->name : "",
                                        b ? "else_branch" : "then_branch", why[b]);
        if (failing_fn(cv, &f[b], msg, dts[b], no, fname[b]) != MS_OK)
            return ms_errf(st[b], "%s", why[b]);
    }
    int split = 0;
    for (size_t i = 0; i < no && rest == NULL; i++)
        split |= ov[0][i]->rank != ov[1][i]->rank;
    if (split && cv->walk != NULL && cv->splits < MAX_SPLITS) {
        cv->nfuncs = nfuncs0; /* these functions (and those nested in them) go unused */
        return split_if(cv, n, br, c, ctf);
    }
    return emit_if(cv, n, f, c, ctf, ov, dts, names, no);
}

/* An If whose branches give results of different ranks (PyTorch's
 * "squeeze when the dim is 1" on a dynamic batch dim) leaves the ops after
 * it without a rank to convert them with. So the rest of the node list
 * being converted moves into both branches, each converted with its own
 * ranks, and the If gives that list's outputs instead: If(c){A}{B}; rest
 * -> If(c){A; rest}{B; rest}. Nested such Ifs split again, up to
 * MAX_SPLITS deep (each doubles the rest); past that the results keep an
 * unknown rank. */
static ms_status split_if(rt__ox_conv *cv, const Onnx__NodeProto *n,
                          const Onnx__GraphProto *const br[2], rt__ox_value *c, const char *ctf) {
    rt__ox_walk *w = cv->walk;
    const Onnx__GraphProto *g = w->g;
    size_t no = g->n_output;
    const char **names = rt__ox_alloc(cv, (no + 1) * sizeof(*names));
    for (size_t i = 0; i < no; i++)
        names[i] = g->output[i]->name ? g->output[i]->name : "";
    cv->splits++;
    ms_status st = two_branches(cv, n, br, w, names, no, c, ctf);
    cv->splits--;
    if (st == MS_OK) w->done = 1;
    return st;
}

static ms_status op_if(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const Onnx__GraphProto *br[2] = {graph_attr(n, "then_branch"), graph_attr(n, "else_branch")};
    rt__ox_value *c;
    const char *ctf;
    ms_status st = rt__ox_need(cv, n, 0, &c, NULL);
    if (st != MS_OK) return st;
    if (br[0] == NULL || br[1] == NULL)
        return rt__ox_err(cv, MS_EINVAL, "then_branch and else_branch must be graphs");
    for (int b = 0; b < 2; b++) {
        if (br[b]->n_output != n->n_output)
            return rt__ox_err(cv, MS_EINVAL, "%s has %zu outputs, the node %zu",
                              b ? "else_branch" : "then_branch", br[b]->n_output, n->n_output);
        if (br[b]->n_input != 0)
            return rt__ox_err(cv, MS_EINVAL, "%s has inputs", b ? "else_branch" : "then_branch");
        if ((st = check_tensors(cv, b ? "else_branch" : "then_branch", br[b])) != MS_OK)
            return st;
    }
    if (rt__ox_nelem(c) != 1 && c->rank >= 0 && rt__ox_nelem(c) >= 0)
        return rt__ox_err(cv, MS_EINVAL, "the condition has %lld elements, not one",
                          (long long)rt__ox_nelem(c));
    if (rt__ox_is_const(c) && rt__ox_nelem(c) == 1) {
        /* Known condition: the taken branch's nodes join this graph. */
        int take = c->f ? c->f[0] != 0.0f : c->iv[0] != 0;
        const Onnx__GraphProto *g = br[take ? 0 : 1];
        if ((st = convert_all(cv, g, NULL, NULL)) != MS_OK) return st;
        cv->cur = n;
        for (size_t i = 0; i < n->n_output; i++) {
            rt__ox_value *v = g->output[i]->name ? rt__ox_find(cv, g->output[i]->name) : NULL;
            if (v == NULL)
                return rt__ox_err(cv, MS_EINVAL, "branch output \"%s\" is not produced by any node",
                                  g->output[i]->name ? g->output[i]->name : "");
            alias_out(cv, n, i, v);
        }
        return MS_OK;
    }
    if ((st = rt__ox_tf(cv, c, &ctf)) != MS_OK) return st;
    size_t no = n->n_output;
    const char **names = rt__ox_alloc(cv, (no + 1) * sizeof(*names));
    for (size_t i = 0; i < no; i++)
        names[i] = n->output[i];
    return two_branches(cv, n, br, NULL, names, no, c, ctf);
}

/* ---- Loop and Scan: StatelessWhile ---- */

/* The rank a loop-carried value enters the body with: the body input's
 * declared rank, else the initial value's. */
static ms_status carried_rank(rt__ox_conv *cv, const Onnx__ValueInfoProto *vi,
                              const rt__ox_value *init, int *rank) {
    rt_dtype dt;
    int64_t dims[RT_MAX_RANK];
    *rank = init->rank;
    if (vi->type == NULL || vi->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
        return MS_OK;
    ms_status st = rt__ox_value_info(vi, &dt, rank, dims);
    if (st != MS_OK) return rt__ox_err(cv, st, "%s", ms_errmsg());
    if (*rank < 0) *rank = init->rank;
    if (init->rank >= 0 && *rank != init->rank)
        return rt__ox_err(cv, MS_EINVAL, "body input \"%s\" has rank %d, its initial value %d",
                          vi->name ? vi->name : "", *rank, init->rank);
    return MS_OK;
}

/* A loop-carried value's result must keep the type and rank it entered with. */
static ms_status check_carried(rt__ox_conv *cv, const rt__ox_value *out, rt_dtype dt, int rank) {
    if (out->dt != dt)
        return rt__ox_err(cv, MS_EINVAL, "loop-carried value \"%s\" changes type from %s to %s",
                          out->name, rt_dtype_name(dt), rt_dtype_name(out->dt));
    if (rank >= 0 && out->rank != rank)
        return rt__ox_err(cv, MS_ENOTSUP,
                          "loop-carried value \"%s\" enters the body with rank %d and leaves it "
                          "with %s%d; values whose rank changes are not supported",
                          out->name, rank, out->rank < 0 ? "an unknown rank " : "rank ",
                          out->rank);
    return MS_OK;
}

static const char *push_back(rt__ox_conv *cv, const char *h, const char *list, const char *x,
                             rt_dtype dt) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "TensorListPushBack", h);
    rt__tf_input(cv, nd, list);
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "element_dtype", dt);
    return nd->name;
}

static const char *empty_list(rt__ox_conv *cv, const char *h, rt_dtype dt) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "EmptyTensorList", h);
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/element_shape", h), -1));
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/max_num_elements", h), -1));
    rt__tf_attr_type(cv, nd, "element_dtype", dt);
    rt__tf_attr_type(cv, nd, "shape_type", RT_DT_INT32);
    return nd->name;
}

/* The stacked list; an element shape the converter knows (elem) lets an
 * empty list (a loop that ran zero times) stack to [0, dims...]. */
static const char *stack_list(rt__ox_conv *cv, const char *h, const char *list, rt_dtype dt,
                              const rt__ox_value *elem) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "TensorListStack", h);
    rt__tf_input(cv, nd, list);
    const char *es = rt__ox_printf(cv, "%s/element_shape", h);
    if (elem->rank >= 0 && rt__ox_nelem(elem) >= 0)
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, es, elem->rank, elem->dim));
    else
        rt__tf_input(cv, nd, rt__tf_i32(cv, es, -1));
    rt__tf_attr_type(cv, nd, "element_dtype", dt);
    rt__tf_attr_i(cv, nd, "num_elements", -1);
    return nd->name;
}

static ms_status check_scan_dtype(rt__ox_conv *cv, const rt__ox_value *v) {
    if (!rt_dtype_is_pod(v->dt))
        return rt__ox_err(cv, MS_ENOTSUP, "scan output \"%s\" is %s; scan outputs of that type "
                          "are not supported", v->name, rt_dtype_name(v->dt));
    return MS_OK;
}

/* The cond function of a while loop over vars of types dt[0..nv): ret is
 * made by mk from the arguments. */
typedef const char *(*cond_fn)(rt__ox_conv *cv, const char *h, const char *const *args);

static const char *loop_cond(rt__ox_conv *cv, const char *h, const char *const *a) {
    /* a: iteration, cond, M */
    const char *lt = rt__tf_binary(cv, "Less", rt__ox_printf(cv, "%s/in_range", h), a[0], a[2],
                                   RT_DT_INT64);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "LogicalAnd", rt__ox_printf(cv, "%s/go_on", h));
    rt__tf_input(cv, nd, a[1]);
    rt__tf_input(cv, nd, lt);
    return nd->name;
}

static const char *scan_cond(rt__ox_conv *cv, const char *h, const char *const *a) {
    /* a: i, length */
    return rt__tf_binary(cv, "Less", rt__ox_printf(cv, "%s/in_range", h), a[0], a[1], RT_DT_INT64);
}

static const char *make_cond(rt__ox_conv *cv, const char *h, const rt_dtype *dt, int nv,
                             cond_fn mk) {
    fnb f;
    fn_begin(cv, &f);
    const char **a = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*a));
    for (int i = 0; i < nv; i++)
        a[i] = fn_arg(cv, &f, rt__ox_printf(cv, "%s/cond_arg", h), dt[i]);
    const char *r = mk(cv, h, a);
    rt_dtype b = RT_DT_BOOL;
    fn_end(cv, &f, rt__ox_printf(cv, "%s/cond", h), &r, &b, 1);
    fn_args(cv, &f, NULL, 0, NULL, 0);
    return f.fd->signature->name;
}

/* StatelessWhile over in[0..nv) (types dt) with the body f (its captures
 * appended to in and dt) and a cond made by mk. */
static Tensorflow__NodeDef *emit_while(rt__ox_conv *cv, const char *h, fnb *f, const char **in,
                                       rt_dtype *dt, int nv, cond_fn mk, ms_status *st) {
    int n = nv;
    for (int i = 0; i < f->sc.ncap; i++) {
        if ((*st = rt__ox_tf(cv, f->sc.cap_outer[i], &in[n])) != MS_OK) return NULL;
        dt[n++] = f->sc.cap_outer[i]->dt;
    }
    fn_args(cv, f, NULL, 0, NULL, 0);
    const char *cond = make_cond(cv, h, dt, n, mk);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "StatelessWhile", h);
    for (int i = 0; i < n; i++)
        rt__tf_input(cv, nd, in[i]);
    rt__tf_attr_tlist(cv, nd, "T", dt, n);
    rt__tf_attr_func(cv, nd, "cond", cond);
    rt__tf_attr_func(cv, nd, "body", f->fd->signature->name);
    *st = MS_OK;
    return nd;
}

/* The end of a Loop's or Scan's conversion (*st: the body's so far): the
 * body's scan outputs outs[0..no) pushed onto the lists acc (their rets and
 * dt entries from `at` on), the body function ended with its captures
 * passing through, the lists' initial values (in from `at` on) and the
 * StatelessWhile over in[0..nv) and the captures; NULL with *st on failure. */
static Tensorflow__NodeDef *while_tail(rt__ox_conv *cv, const Onnx__NodeProto *n, fnb *f,
                                       Onnx__ValueInfoProto *const *outs, int no,
                                       const char **acc, rt__ox_value **sv, const char **rets,
                                       const char **in, rt_dtype *dt, int at, int nv, cond_fn mk,
                                       ms_status *st) {
    const char *h = rt__ox_hint_of(n);
    for (int k = 0; k < no && *st == MS_OK; k++) {
        const char *t;
        *st = out_tf(cv, outs[k]->name, &sv[k], &t);
        if (*st == MS_OK) *st = check_scan_dtype(cv, sv[k]);
        if (*st == MS_OK)
            rets[at + k] = push_back(cv, rt__ox_printf(cv, "%s/push%d", h, k), acc[k], t,
                                     sv[k]->dt);
        dt[at + k] = RT_DT_VARIANT;
    }
    if (*st != MS_OK) {
        fn_leave(cv, f);
        return NULL;
    }
    int nall = nv + f->sc.ncap;
    const char **r2 = rt__ox_alloc(cv, ((size_t)nall + 1) * sizeof(*r2));
    rt_dtype *d2 = rt__ox_alloc(cv, ((size_t)nall + 1) * sizeof(*d2));
    memcpy(r2, rets, (size_t)nv * sizeof(*r2));
    memcpy(d2, dt, (size_t)nv * sizeof(*d2));
    for (int i = 0; i < f->sc.ncap; i++) {
        r2[nv + i] = f->sc.cap_arg[i]; /* captures pass through unchanged */
        d2[nv + i] = f->sc.cap_outer[i]->dt;
    }
    fn_end(cv, f, rt__ox_printf(cv, "%s/body", h), r2, d2, nall);
    for (int k = 0; k < no; k++)
        in[at + k] = empty_list(cv, rt__ox_printf(cv, "%s/scan%d_init", h, k), sv[k]->dt);
    const char **win = rt__ox_alloc(cv, ((size_t)nall + 1) * sizeof(*win));
    rt_dtype *wdt = rt__ox_alloc(cv, ((size_t)nall + 1) * sizeof(*wdt));
    memcpy(win, in, (size_t)nv * sizeof(*win));
    memcpy(wdt, dt, (size_t)nv * sizeof(*wdt));
    return emit_while(cv, h, f, win, wdt, nv, mk, st);
}

static ms_status op_loop(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const Onnx__GraphProto *g = graph_attr(n, "body");
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    if (g == NULL) return rt__ox_err(cv, MS_EINVAL, "attribute body must be a graph");
    if ((st = check_tensors(cv, "body", g)) != MS_OK) return st;
    int nc = n->n_input >= 2 ? (int)n->n_input - 2 : 0; /* loop-carried */
    if (g->n_input != (size_t)nc + 2 || g->n_output < (size_t)nc + 1)
        return rt__ox_err(cv, MS_EINVAL,
                          "body has %zu inputs and %zu outputs for %d loop-carried values",
                          g->n_input, g->n_output, nc);
    int ns = (int)g->n_output - 1 - nc; /* scan outputs */
    if (n->n_output > (size_t)(nc + ns))
        return rt__ox_err(cv, MS_EINVAL, "%zu outputs, the body gives %d", n->n_output, nc + ns);
    rt__ox_value *M = rt__ox_in(cv, n, 0), *C = rt__ox_in(cv, n, 1);
    rt__ox_value **init = rt__ox_alloc(cv, ((size_t)nc + 1) * sizeof(*init));
    int *rank = rt__ox_alloc(cv, ((size_t)nc + 1) * sizeof(*rank));
    int nv = 3 + nc + ns;
    const char **in = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*in));
    rt_dtype *dt = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*dt));
    /* Initial values: iteration 0, cond, M (int64 max when absent). */
    in[0] = i64(cv, rt__ox_printf(cv, "%s/iter0", h), 0);
    if (C != NULL) {
        if (C->dt != RT_DT_BOOL) return rt__ox_err(cv, MS_EINVAL, "cond must be bool");
        if ((st = rt__ox_tf(cv, C, &in[1])) != MS_OK) return st;
        in[1] = to_scalar(cv, rt__ox_printf(cv, "%s/cond0", h), in[1], RT_DT_BOOL, C);
    } else {
        int64_t one = 1;
        in[1] = rt__tf_const_int(cv, rt__ox_printf(cv, "%s/cond0", h), RT_DT_BOOL, 0, NULL, &one);
    }
    if (M != NULL) {
        if (M->dt != RT_DT_INT64) return rt__ox_err(cv, MS_EINVAL, "M must be int64");
        if ((st = rt__ox_tf(cv, M, &in[2])) != MS_OK) return st;
        in[2] = to_scalar(cv, rt__ox_printf(cv, "%s/M", h), in[2], RT_DT_INT64, M);
    } else {
        in[2] = i64(cv, rt__ox_printf(cv, "%s/M", h), INT64_MAX);
    }
    dt[0] = RT_DT_INT64, dt[1] = RT_DT_BOOL, dt[2] = RT_DT_INT64;
    for (int j = 0; j < nc; j++) {
        if ((st = rt__ox_need(cv, n, 2 + j, &init[j], &in[3 + j])) != MS_OK) return st;
        dt[3 + j] = init[j]->dt;
        if ((st = carried_rank(cv, g->input[2 + j], init[j], &rank[j])) != MS_OK) return st;
    }

    fnb f;
    fn_begin(cv, &f);
    const char *a_iter = fn_arg(cv, &f, rt__ox_printf(cv, "%s/iter", h), RT_DT_INT64);
    const char *a_cond = fn_arg(cv, &f, rt__ox_printf(cv, "%s/cond_in", h), RT_DT_BOOL);
    const char *a_M = fn_arg(cv, &f, rt__ox_printf(cv, "%s/M_in", h), RT_DT_INT64);
    rt__ox_value *vi = rt__ox_define(cv, g->input[0]->name ? g->input[0]->name : "", RT_DT_INT64,
                                     0, NULL);
    vi->tf = a_iter;
    rt__ox_value *vc = rt__ox_define(cv, g->input[1]->name ? g->input[1]->name : "", RT_DT_BOOL, 0,
                                     NULL);
    vc->tf = a_cond;
    for (int j = 0; j < nc; j++)
        fn_bind(cv, &f, g->input[2 + j]->name ? g->input[2 + j]->name : "", dt[3 + j], rank[j],
                NULL);
    const char **acc = rt__ox_alloc(cv, ((size_t)ns + 1) * sizeof(*acc));
    for (int k = 0; k < ns; k++)
        acc[k] = fn_arg(cv, &f, rt__ox_printf(cv, "%s/scan%d", h, k), RT_DT_VARIANT);
    st = convert_all(cv, g, NULL, NULL);
    cv->cur = n;
    const char **rets = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*rets));
    rt__ox_value **sv = rt__ox_alloc(cv, ((size_t)ns + 1) * sizeof(*sv));
    rt__ox_value *v = NULL;
    if (st == MS_OK) {
        rets[0] = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/next_iter", h), a_iter,
                                i64(cv, rt__ox_printf(cv, "%s/one", h), 1), RT_DT_INT64);
        st = out_tf(cv, g->output[0]->name, &v, &rets[1]);
    }
    if (st == MS_OK && v->dt != RT_DT_BOOL)
        st = rt__ox_err(cv, MS_EINVAL, "the body's cond output is %s, not bool",
                        rt_dtype_name(v->dt));
    if (st == MS_OK) {
        rets[1] = to_scalar(cv, rt__ox_printf(cv, "%s/cond_out", h), rets[1], RT_DT_BOOL, v);
        rets[2] = a_M;
    }
    for (int j = 0; j < nc && st == MS_OK; j++) {
        st = out_tf(cv, g->output[1 + j]->name, &v, &rets[3 + j]);
        if (st == MS_OK) st = check_carried(cv, v, dt[3 + j], rank[j]);
    }
    Tensorflow__NodeDef *w =
        while_tail(cv, n, &f, g->output + 1 + nc, ns, acc, sv, rets, in, dt, 3 + nc, nv,
                   loop_cond, &st);
    if (w == NULL) return st;
    for (int j = 0; j < nc; j++)
        rt__ox_def_out(cv, n, j, dt[3 + j], rank[j], NULL, rt__tf_out(cv, w, 3 + j));
    for (int k = 0; k < ns; k++) {
        const char *s = stack_list(cv, rt__ox_printf(cv, "%s/scan%d_out", h, k),
                                   rt__tf_out(cv, w, 3 + nc + k), sv[k]->dt, sv[k]);
        int64_t dims[OX_MAXR];
        int r = sv[k]->rank >= 0 && sv[k]->rank < OX_MAXR ? sv[k]->rank + 1 : -1;
        dims[0] = -1;
        for (int i = 1; i < r; i++)
            dims[i] = sv[k]->dim[i - 1];
        rt__ox_def_out(cv, n, nc + k, sv[k]->dt, r, dims, s);
    }
    return MS_OK;
}

static ms_status op_scan(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const Onnx__GraphProto *g = graph_attr(n, "body");
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    if (g == NULL) return rt__ox_err(cv, MS_EINVAL, "attribute body must be a graph");
    if ((st = check_tensors(cv, "body", g)) != MS_OK) return st;
    int64_t m64 = rt__ox_attr_i(n, "num_scan_inputs", -1);
    if (m64 < 1 || m64 > (int64_t)n->n_input)
        return rt__ox_err(cv, MS_EINVAL, "num_scan_inputs %lld for %zu inputs", (long long)m64,
                          n->n_input);
    int m = (int)m64, ns = (int)n->n_input - m; /* scan inputs, states */
    if (g->n_input != n->n_input || g->n_output < (size_t)ns)
        return rt__ox_err(cv, MS_EINVAL, "body has %zu inputs and %zu outputs; the node %zu inputs",
                          g->n_input, g->n_output, n->n_input);
    int no = (int)g->n_output - ns; /* scan outputs */
    if (n->n_output > g->n_output)
        return rt__ox_err(cv, MS_EINVAL, "%zu outputs, the body gives %zu", n->n_output,
                          g->n_output);
    int64_t *iax = rt__ox_alloc(cv, ((size_t)m + 1) * sizeof(int64_t));
    int64_t *idir = rt__ox_alloc(cv, ((size_t)m + 1) * sizeof(int64_t));
    int64_t *oax = rt__ox_alloc(cv, ((size_t)no + 1) * sizeof(int64_t));
    int64_t *odir = rt__ox_alloc(cv, ((size_t)no + 1) * sizeof(int64_t));
    static const struct {
        const char *key;
        int out;
    } lists[4] = {{"scan_input_axes", 0},
                  {"scan_input_directions", 0},
                  {"scan_output_axes", 1},
                  {"scan_output_directions", 1}};
    int64_t *lv[4] = {iax, idir, oax, odir};
    for (int l = 0; l < 4; l++) {
        int want = lists[l].out ? no : m;
        int got = rt__ox_attr_ints(n, lists[l].key, lv[l], want);
        if (got >= 0 && got != want)
            return rt__ox_err(cv, MS_EINVAL, "%s has %d entries, not %d", lists[l].key, got, want);
        if (got < 0) memset(lv[l], 0, (size_t)want * sizeof(int64_t));
        if (l % 2 == 1)
            for (int i = 0; i < want; i++)
                if (lv[l][i] != 0 && lv[l][i] != 1)
                    return rt__ox_err(cv, MS_EINVAL, "%s[%d] = %lld (0 or 1)", lists[l].key, i,
                                      (long long)lv[l][i]);
    }
    int nv = 2 + ns + m + no;
    const char **in = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*in));
    rt_dtype *dt = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*dt));
    rt__ox_value **x = rt__ox_alloc(cv, ((size_t)(ns + m) + 1) * sizeof(*x));
    int *rank = rt__ox_alloc(cv, ((size_t)ns + 1) * sizeof(*rank));
    for (int j = 0; j < ns + m; j++) {
        if ((st = rt__ox_need(cv, n, j, &x[j], &in[2 + j])) != MS_OK) return st;
        dt[2 + j] = x[j]->dt;
    }
    for (int j = 0; j < ns; j++)
        if ((st = carried_rank(cv, g->input[j], x[j], &rank[j])) != MS_OK) return st;
    int *axis = rt__ox_alloc(cv, ((size_t)m + 1) * sizeof(int));
    for (int j = 0; j < m; j++) {
        const rt__ox_value *s = x[ns + j];
        axis[j] = s->rank >= 1 ? rt__ox_norm_axis(iax[j], s->rank) : -1;
        if (axis[j] < 0)
            return rt__ox_err(cv, MS_ENOTSUP,
                              "scan input \"%s\": axis %lld of a tensor of %s rank %d", s->name,
                              (long long)iax[j], s->rank < 0 ? "unknown" : "", s->rank);
    }
    /* Length: the first scan input's size along its axis. */
    Tensorflow__NodeDef *shp = rt__tf_node(cv, "Shape", rt__ox_printf(cv, "%s/shape", h));
    rt__tf_input(cv, shp, in[2 + ns]);
    rt__tf_attr_type(cv, shp, "T", x[ns]->dt);
    rt__tf_attr_type(cv, shp, "out_type", RT_DT_INT64);
    in[0] = i64(cv, rt__ox_printf(cv, "%s/i0", h), 0);
    in[1] = rt__ox_gather_node(cv, rt__ox_printf(cv, "%s/length", h), shp->name, RT_DT_INT64,
                               rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis0", h), axis[0]),
                               RT_DT_INT32, 0)
                ->name;
    dt[0] = dt[1] = RT_DT_INT64;

    fnb f;
    fn_begin(cv, &f);
    const char *a_i = fn_arg(cv, &f, rt__ox_printf(cv, "%s/i", h), RT_DT_INT64);
    const char *a_len = fn_arg(cv, &f, rt__ox_printf(cv, "%s/len", h), RT_DT_INT64);
    for (int j = 0; j < ns; j++)
        fn_bind(cv, &f, g->input[j]->name ? g->input[j]->name : "", dt[2 + j], rank[j], NULL);
    const char **a_x = rt__ox_alloc(cv, ((size_t)m + 1) * sizeof(*a_x));
    for (int j = 0; j < m; j++)
        a_x[j] = fn_arg(cv, &f, rt__ox_printf(cv, "%s/seq%d", h, j), dt[2 + ns + j]);
    const char **acc = rt__ox_alloc(cv, ((size_t)no + 1) * sizeof(*acc));
    for (int k = 0; k < no; k++)
        acc[k] = fn_arg(cv, &f, rt__ox_printf(cv, "%s/scan%d", h, k), RT_DT_VARIANT);
    const char *rev = NULL;
    for (int j = 0; j < m; j++) {
        const rt__ox_value *s = x[ns + j];
        const char *ix = a_i;
        if (idir[j]) {
            if (rev == NULL) {
                const char *last = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/last", h), a_len,
                                                 i64(cv, rt__ox_printf(cv, "%s/one", h), 1),
                                                 RT_DT_INT64);
                rev = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/rev_i", h), last, a_i,
                                    RT_DT_INT64);
            }
            ix = rev;
        }
        const char *e = rt__ox_gather_node(cv, rt__ox_printf(cv, "%s/elem%d", h, j), a_x[j], s->dt,
                                           ix, RT_DT_INT64, axis[j])
                            ->name;
        int64_t dims[OX_MAXR];
        for (int k = 0, o = 0; k < s->rank; k++)
            if (k != axis[j]) dims[o++] = s->dim[k];
        const char *nm = g->input[ns + j]->name ? g->input[ns + j]->name : "";
        rt__ox_value *ev = rt__ox_define(cv, nm, s->dt, s->rank - 1, dims);
        ev->tf = e;
    }
    st = convert_all(cv, g, NULL, NULL);
    cv->cur = n;
    const char **rets = rt__ox_alloc(cv, ((size_t)nv + 1) * sizeof(*rets));
    rt__ox_value **sv = rt__ox_alloc(cv, ((size_t)no + 1) * sizeof(*sv));
    rt__ox_value *v = NULL;
    if (st == MS_OK) {
        rets[0] = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/next_i", h), a_i,
                                i64(cv, rt__ox_printf(cv, "%s/step", h), 1), RT_DT_INT64);
        rets[1] = a_len;
    }
    for (int j = 0; j < ns && st == MS_OK; j++) {
        st = out_tf(cv, g->output[j]->name, &v, &rets[2 + j]);
        if (st == MS_OK) st = check_carried(cv, v, dt[2 + j], rank[j]);
    }
    for (int j = 0; j < m; j++)
        rets[2 + ns + j] = a_x[j];
    Tensorflow__NodeDef *w =
        while_tail(cv, n, &f, g->output + ns, no, acc, sv, rets, in, dt, 2 + ns + m, nv,
                   scan_cond, &st);
    if (w == NULL) return st;
    for (int j = 0; j < ns; j++)
        rt__ox_def_out(cv, n, j, dt[2 + j], rank[j], NULL, rt__tf_out(cv, w, 2 + j));
    for (int k = 0; k < no; k++) {
        const char *hk = rt__ox_printf(cv, "%s/scan%d_out", h, k);
        const char *s = stack_list(cv, hk, rt__tf_out(cv, w, 2 + ns + m + k), sv[k]->dt, sv[k]);
        int r = sv[k]->rank >= 0 && sv[k]->rank < OX_MAXR ? sv[k]->rank + 1 : -1;
        int64_t dims[OX_MAXR], od[OX_MAXR];
        dims[0] = -1;
        for (int i = 1; i < r; i++)
            dims[i] = sv[k]->dim[i - 1];
        if (odir[k]) {
            Tensorflow__NodeDef *rv = rt__tf_node(cv, "ReverseV2", rt__ox_printf(cv, "%s/rev", hk));
            rt__tf_input(cv, rv, s);
            int64_t zero = 0;
            rt__tf_input(cv, rv, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/rev_axis", hk), 1, &zero));
            rt__tf_attr_type(cv, rv, "T", sv[k]->dt);
            rt__tf_attr_type(cv, rv, "Tidx", RT_DT_INT32);
            s = rv->name;
        }
        int a = r >= 1 ? rt__ox_norm_axis(oax[k], r) : (oax[k] == 0 ? 0 : -1);
        if (a < 0)
            return rt__ox_err(cv, MS_ENOTSUP, "scan output %d: axis %lld of a tensor of %s rank %d",
                              k, (long long)oax[k], r < 0 ? "unknown" : "", r);
        if (a != 0) {
            /* Stacked [T, e...] -> T at position a. */
            int64_t perm[OX_MAXR];
            for (int p = 0; p < r; p++) {
                perm[p] = p < a ? p + 1 : (p == a ? 0 : p);
                od[p] = dims[perm[p]];
            }
            s = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_axis", hk), s, sv[k]->dt, r, perm);
            memcpy(dims, od, sizeof(dims));
        }
        rt__ox_def_out(cv, n, ns + k, sv[k]->dt, r, dims, s);
    }
    return MS_OK;
}

/* Scan-8: a batch dim 0 on every input and output, scans along dim 1 and
 * sequence_lens (input 0) optional. Converted for a batch of (static) 1
 * without sequence_lens: the batch dim squeezed off, Scan-9 over the rest
 * (directions as scan_input_directions), the outputs' batch dim put back;
 * other batches and sequence_lens are refused. */
static ms_status op_scan8(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    if (n->n_input < 2) return rt__ox_err(cv, MS_EINVAL, "Scan-8 needs inputs after sequence_lens");
    if (n->input[0] != NULL && n->input[0][0] != '\0')
        return rt__ox_err(cv, MS_ENOTSUP, "Scan-8's sequence_lens is not supported (leave it out: "
                                          "every sequence its full length)");
    static const char *const later[] = {"scan_input_axes", "scan_input_directions",
                                        "scan_output_axes", "scan_output_directions"};
    for (int i = 0; i < 4; i++)
        if (rt__ox_attr(n, later[i]))
            return rt__ox_err(cv, MS_EINVAL, "%s is not an attribute of Scan-8 (opset %lld)",
                              later[i], (long long)cv->opset);
    Onnx__NodeProto *m = rt__ox_alloc(cv, sizeof(*m));
    *m = *n;
    m->n_input = n->n_input - 1;
    m->input = rt__ox_alloc(cv, (m->n_input + 1) * sizeof(char *));
    for (size_t j = 0; j < m->n_input; j++) {
        rt__ox_value *v;
        const char *t;
        if ((st = rt__ox_need(cv, n, (int)j + 1, &v, &t)) != MS_OK) return st;
        if (v->rank < 1 || v->dim[0] != 1)
            return rt__ox_err(cv, MS_ENOTSUP, "Scan-8 input \"%s\": only a static batch of 1 is "
                                              "supported",
                              v->name);
        Tensorflow__NodeDef *sq = rt__tf_node(cv, "Squeeze", rt__ox_printf(cv, "%s/in%zu", h, j));
        rt__tf_input(cv, sq, t);
        int64_t ax = 0;
        rt__tf_attr_ilist(cv, sq, "squeeze_dims", &ax, 1);
        rt__tf_attr_type(cv, sq, "T", v->dt);
        m->input[j] = rt__ox_printf(cv, "%s/unbatched%zu", h, j);
        rt__ox_define(cv, m->input[j], v->dt, v->rank - 1, v->dim + 1)->tf = sq->name;
    }
    m->attribute = rt__ox_alloc(cv, (n->n_attribute + 1) * sizeof(*m->attribute));
    for (size_t i = 0; i < n->n_attribute; i++) {
        m->attribute[i] = n->attribute[i];
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, "directions") == 0) {
            Onnx__AttributeProto *a = rt__ox_alloc(cv, sizeof(*a));
            *a = *n->attribute[i];
            a->name = "scan_input_directions";
            m->attribute[i] = a;
        }
    }
    m->output = rt__ox_alloc(cv, (n->n_output + 1) * sizeof(char *));
    for (size_t i = 0; i < n->n_output; i++)
        m->output[i] = n->output[i] && n->output[i][0] ? rt__ox_printf(cv, "%s/out%zu", h, i) : "";
    if ((st = op_scan(cv, m)) != MS_OK) return st;
    for (size_t i = 0; i < n->n_output; i++) {
        if (!m->output[i][0]) continue;
        rt__ox_value *o = rt__ox_find(cv, m->output[i]);
        const char *t;
        if (o == NULL) return rt__ox_err(cv, MS_EINTERNAL, "Scan-8: output %zu not defined", i);
        if ((st = rt__ox_tf(cv, o, &t)) != MS_OK) return st;
        if (o->rank < 0 || o->rank + 1 > OX_MAXR)
            return rt__ox_err(cv, MS_ENOTSUP, "Scan-8 output %zu: rank unknown or too large", i);
        Tensorflow__NodeDef *e = rt__tf_node(cv, "ExpandDims", rt__ox_printf(cv, "%s/batch%zu", h, i));
        rt__tf_input(cv, e, t);
        rt__tf_input(cv, e, rt__tf_i32(cv, rt__ox_printf(cv, "%s/batch_axis%zu", h, i), 0));
        rt__tf_attr_type(cv, e, "T", o->dt);
        rt__tf_attr_type(cv, e, "Tdim", RT_DT_INT32);
        int64_t od[OX_MAXR];
        od[0] = 1;
        memcpy(od + 1, o->dim, (size_t)o->rank * sizeof(int64_t));
        rt__ox_def_out(cv, n, (int)i, o->dt, o->rank + 1, od, e->name);
    }
    return MS_OK;
}

static ms_status op_scan_any(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    if (cv->opset < 9) return op_scan8(cv, n);
    if (rt__ox_attr(n, "directions"))
        return rt__ox_err(cv, MS_EINVAL, "directions is Scan-8's attribute (opset %lld: "
                                         "scan_input_directions)",
                          (long long)cv->opset);
    return op_scan(cv, n);
}

rt__ox_handler rt__ox_ctrl_handler(const char *op_type) {
    if (strcmp(op_type, "If") == 0) return op_if;
    if (strcmp(op_type, "Loop") == 0) return op_loop;
    if (strcmp(op_type, "Scan") == 0) return op_scan_any;
    return NULL;
}
