/* check_control.c - functional control flow (runtime/graph/rt_ops_control.c:
 * While, StatelessWhile, If, StatelessIf, Case) run through real graphs whose
 * functions are built here, and the TensorList ops (rt_ops_tensorlist.c)
 * alone and inside a loop. Expected values are computed by hand. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "ms_budget.h"
#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_ops.h"
#include "util_fn.h"
#include "util_node.h"

/* Builds the graph, plans feeds -> fetches, runs once. */
static ms_status run_graph(mgb *b, int nf, const char *const *feeds, rt_tensor *const *fv, int no,
                           const char *const *fetches, rt_tensor **outs, const atomic_int *cancel) {
    kn_backend *be = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(be);
    rt_graph *g;
    ms_status st = rt_graph_build(&b->mg, be, rt_model_host_ops, &g);
    ck_assert_msg(st == MS_OK, "build: %s", ms_errmsg());
    rt_edge f[8], o[8];
    for (int i = 0; i < nf; i++) ck_assert_int_eq(rt_graph_tensor(g, feeds[i], &f[i]), MS_OK);
    for (int i = 0; i < no; i++) ck_assert_int_eq(rt_graph_tensor(g, fetches[i], &o[i]), MS_OK);
    rt_plan *p = NULL;
    st = rt_plan_build(g, f, nf, o, no, NULL, 0, &p);
    if (st == MS_OK) {
        rt_vars vars;
        rt_vars_init(&vars);
        kn_ctx ctx = {.nthreads = 1, .cancelled = cancel};
        st = rt_plan_run(p, &ctx, &vars, fv, outs);
        rt_vars_destroy(&vars);
    }
    rt_plan_free(p);
    rt_graph_free(g);
    kn_backend_free(be);
    return st;
}

/* While over (i, n, acc): cond i < n; body (i + 1, n, acc * 2). */
static void build_doubling(mgb *b, const char *op) {
    mgb_init(b);
    placeholder(b, "n", RT_DT_INT32);
    placeholder(b, "acc", RT_DT_FLOAT);
    int32_t zero = 0;
    Tensorflow__NodeDef *c0 = top(b, node("i0", "Const", NULL));
    attr_const(c0, RT_DT_INT32, -1, &zero);
    Tensorflow__NodeDef *w = top(b, node("loop", op, IN("i0", "n", "acc")));
    rt_dtype T[3] = {RT_DT_INT32, RT_DT_INT32, RT_DT_FLOAT};
    attr_types(w, "T", 3, T);
    attr_func(w, "cond", "cond_f");
    attr_func(w, "body", "body_f");
    Tensorflow__FunctionDef *cf = fn(b, "cond_f", 3, (const char *[]){"i", "n", "acc"}, 1,
                                     (const char *[]){"r=less:z:0"});
    bin(cf, "less", "Less", "i", "n", RT_DT_INT32);
    Tensorflow__FunctionDef *bf =
        fn(b, "body_f", 3, (const char *[]){"i", "n", "acc"}, 3,
           (const char *[]){"i_out=inc:z:0", "n_out=n", "acc_out=dbl:0"});
    int32_t one = 1;
    float two = 2.0f;
    fconst(bf, "one", RT_DT_INT32, &one);
    fconst(bf, "two", RT_DT_FLOAT, &two);
    bin(bf, "inc", "AddV2", "i", "one:output:0", RT_DT_INT32);
    bin(bf, "dbl", "Mul", "acc", "two:output:0", RT_DT_FLOAT);
}

static void doubling_case(const char *op, int32_t n, float acc, int32_t want_i, float want_acc) {
    mgb b;
    build_doubling(&b, op);
    rt_tensor *in[2] = {TU_I32(TU_SCALAR, n), TU_F32(TU_SCALAR, acc)};
    rt_tensor *out[3] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"n", "acc"}, in, 3,
                             (const char *[]){"loop:0", "loop:1", "loop:2"}, out, NULL);
    ck_assert_msg(st == MS_OK, "%s: %s", op, ms_errmsg());
    TU_CHECK_INT(out[0], RT_DT_INT32, TU_SCALAR, want_i);
    TU_CHECK_INT(out[1], RT_DT_INT32, TU_SCALAR, n);
    TU_CHECK_F32(out[2], TU_SCALAR, 0, want_acc);
    tu_unref(in, 2);
    tu_unref(out, 3);
    arena_free();
}

START_TEST(test_while_loops) {
    doubling_case("StatelessWhile", 3, 1.5f, 3, 12.0f); /* 1.5 * 2^3 */
    doubling_case("While", 5, -0.25f, 5, -8.0f);        /* -0.25 * 2^5 */
    doubling_case("StatelessWhile", 1, 3.0f, 1, 6.0f);
}
END_TEST

START_TEST(test_while_zero_trip) {
    /* cond false at once: the outputs are the inputs. */
    doubling_case("StatelessWhile", 0, 1.5f, 0, 1.5f);
    doubling_case("While", -4, 7.0f, 0, 7.0f);
}
END_TEST

START_TEST(test_while_cancelled) {
    mgb b;
    build_doubling(&b, "StatelessWhile");
    rt_tensor *in[2] = {TU_I32(TU_SCALAR, 1000000), TU_F32(TU_SCALAR, 1.0f)};
    rt_tensor *out[3] = {0};
    atomic_int cancel = 1;
    ms_status st = run_graph(&b, 2, (const char *[]){"n", "acc"}, in, 3,
                             (const char *[]){"loop:0", "loop:1", "loop:2"}, out, &cancel);
    ck_assert_int_eq(st, MS_ECANCELED);
    for (int i = 0; i < 3; i++) ck_assert_ptr_null(out[i]);
    tu_unref(in, 2);
    arena_free();
}
END_TEST

START_TEST(test_while_bad_body) {
    /* An unsupported op in the body fails the plan, naming the body's node. */
    mgb b;
    build_doubling(&b, "StatelessWhile");
    Tensorflow__FunctionDef *bf = b.fns[1];
    body(bf, node("mystery", "NoSuchOpAnywhere", IN("acc")));
    bf->ret[2]->value = S("mystery:0");
    rt_tensor *in[2] = {TU_I32(TU_SCALAR, 2), TU_F32(TU_SCALAR, 1.0f)};
    rt_tensor *out[3] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"n", "acc"}, in, 3,
                             (const char *[]){"loop:0", "loop:1", "loop:2"}, out, NULL);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "NoSuchOpAnywhere") && strstr(ms_errmsg(), "'mystery'") &&
                      strstr(ms_errmsg(), "body_f"),
                  "%s", ms_errmsg());
    tu_unref(in, 2);
    arena_free();
}
END_TEST

/* If / Case over x: branch 0 = x * 2, branch 1 = x + 10. */
static void build_branches(mgb *b, const char *op, rt_dtype pred_dt) {
    mgb_init(b);
    placeholder(b, "p", pred_dt);
    placeholder(b, "x", RT_DT_FLOAT);
    Tensorflow__NodeDef *d = top(b, node("sel", op, IN("p", "x")));
    rt_dtype tf = RT_DT_FLOAT;
    attr_types(d, "Tout", 1, &tf);
    attr_types(d, "Tin", 1, &tf);
    if (strstr(op, "Case")) {
        attr_funcs(d, "branches", 2, (const char *[]){"twice", "plus10"});
    } else {
        attr_func(d, "then_branch", "twice");
        attr_func(d, "else_branch", "plus10");
    }
    float two = 2, ten = 10;
    Tensorflow__FunctionDef *f = fn(b, "twice", 1, (const char *[]){"v"}, 1,
                                    (const char *[]){"out=m:z:0"});
    fconst(f, "c", RT_DT_FLOAT, &two);
    bin(f, "m", "Mul", "v", "c:output:0", RT_DT_FLOAT);
    f = fn(b, "plus10", 1, (const char *[]){"v"}, 1, (const char *[]){"out=a:z:0"});
    fconst(f, "c", RT_DT_FLOAT, &ten);
    bin(f, "a", "AddV2", "v", "c:output:0", RT_DT_FLOAT);
}

static void branch_case(const char *op, rt_tensor *pred, float want0, float want1) {
    mgb b;
    build_branches(&b, op, pred->dtype);
    rt_tensor *in[2] = {pred, TU_F32(TU_SHAPE(2), 1.5f, -3.0f)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"p", "x"}, in, 1, (const char *[]){"sel:0"},
                             out, NULL);
    ck_assert_msg(st == MS_OK, "%s: %s", op, ms_errmsg());
    TU_CHECK_F32(out[0], TU_SHAPE(2), 0, want0, want1);
    tu_unref(in, 2);
    tu_unref(out, 1);
    arena_free();
}

START_TEST(test_if) {
    branch_case("StatelessIf", TU_BOOL(TU_SCALAR, 1), 3.0f, -6.0f);
    branch_case("If", TU_BOOL(TU_SCALAR, 0), 11.5f, 7.0f);
    /* TensorFlow's ToBool: a non-zero number is true, an empty tensor false,
     * a non-empty non-scalar true. */
    branch_case("StatelessIf", TU_I32(TU_SCALAR, -7), 3.0f, -6.0f);
    branch_case("StatelessIf", TU_F32(TU_SCALAR, 0.0f), 11.5f, 7.0f);
    rt_tensor *empty;
    rt_shape s0 = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s0, &empty), MS_OK);
    branch_case("StatelessIf", empty, 11.5f, 7.0f);
    branch_case("StatelessIf", TU_BOOL(TU_SHAPE(2), 0, 0), 3.0f, -6.0f);
}
END_TEST

START_TEST(test_case) {
    branch_case("Case", TU_I32(TU_SCALAR, 0), 3.0f, -6.0f);
    branch_case("StatelessCase", TU_I32(TU_SCALAR, 1), 11.5f, 7.0f);
    /* Out of range: the last branch, as TensorFlow does. */
    branch_case("StatelessCase", TU_I32(TU_SCALAR, 5), 11.5f, 7.0f);
    branch_case("Case", TU_I32(TU_SCALAR, -1), 11.5f, 7.0f);
}
END_TEST

START_TEST(test_tf1_loop_refused) {
    mgb b;
    mgb_init(&b);
    placeholder(&b, "x", RT_DT_FLOAT);
    Tensorflow__NodeDef *d = top(&b, node("while/Enter", "Enter", IN("x")));
    attr_type(d, "T", RT_DT_FLOAT);
    rt_tensor *in[1] = {TU_F32(TU_SCALAR, 1.0f)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"while/Enter"},
                             out, NULL);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "TF1 control flow") && strstr(ms_errmsg(), "'while/Enter'"),
                  "%s", ms_errmsg());
    tu_unref(in, 1);
    arena_free();
}
END_TEST

/* The Keras RNN pattern: x (t, 2) unstacked into a list; a loop writes
 * item * item into a reserved list; the result is stacked. */
static void squares_case(int t) {
    mgb b;
    mgb_init(&b);
    placeholder(&b, "x", RT_DT_FLOAT);
    placeholder(&b, "t", RT_DT_INT32);
    int32_t es[1] = {2}, zero = 0;
    Tensorflow__NodeDef *d = top(&b, node("es", "Const", NULL));
    attr_const(d, RT_DT_INT32, 1, es);
    d = top(&b, node("i0", "Const", NULL));
    attr_const(d, RT_DT_INT32, -1, &zero);
    d = top(&b, node("src", "TensorListFromTensor", IN("x", "es")));
    attr_type(d, "element_dtype", RT_DT_FLOAT);
    d = top(&b, node("dst", "TensorListReserve", IN("es", "t")));
    attr_type(d, "element_dtype", RT_DT_FLOAT);
    d = top(&b, node("loop", "StatelessWhile", IN("i0", "t", "src", "dst")));
    rt_dtype T[4] = {RT_DT_INT32, RT_DT_INT32, RT_DT_VARIANT, RT_DT_VARIANT};
    attr_types(d, "T", 4, T);
    attr_func(d, "cond", "c");
    attr_func(d, "body", "bd");
    d = top(&b, node("out", "TensorListStack", IN("loop:3", "es")));
    attr_type(d, "element_dtype", RT_DT_FLOAT);
    d = top(&b, node("len", "TensorListLength", IN("loop:3")));
    Tensorflow__FunctionDef *cf =
        fn(&b, "c", 4, (const char *[]){"i", "n", "s", "o"}, 1, (const char *[]){"r=lt:z:0"});
    bin(cf, "lt", "Less", "i", "n", RT_DT_INT32);
    Tensorflow__FunctionDef *bf = fn(&b, "bd", 4, (const char *[]){"i", "n", "s", "o"}, 4,
                                     (const char *[]){"i1=inc:z:0", "n1=n", "s1=s",
                                                      "o1=set:output_handle:0"});
    int32_t one = 1, unk = -1;
    fconst(bf, "one", RT_DT_INT32, &one);
    fconst(bf, "any", RT_DT_INT32, &unk);
    d = body(bf, node("get", "TensorListGetItem", IN("s", "i", "any:output:0")));
    attr_type(d, "element_dtype", RT_DT_FLOAT);
    bin(bf, "sq", "Mul", "get:item:0", "get:item:0", RT_DT_FLOAT);
    d = body(bf, node("set", "TensorListSetItem", IN("o", "i", "sq:z:0")));
    attr_type(d, "element_dtype", RT_DT_FLOAT);
    bin(bf, "inc", "AddV2", "i", "one:output:0", RT_DT_INT32);

    float xv[6] = {1, -2, 3, 0.5f, -4, 10};
    rt_tensor *in[2] = {tu_t(RT_DT_FLOAT, TU_SHAPE(t, 2), xv, t * 2), TU_I32(TU_SCALAR, t)};
    rt_tensor *out[2] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"x", "t"}, in, 2,
                             (const char *[]){"out:0", "len:0"}, out, NULL);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    float want[6];
    for (int i = 0; i < 2 * t; i++) want[i] = xv[i] * xv[i];
    tu_check_f32(out[0], TU_SHAPE(t, 2), want, 2 * t, 0);
    TU_CHECK_INT(out[1], RT_DT_INT32, TU_SCALAR, t);
    tu_unref(in, 2);
    tu_unref(out, 2);
    arena_free();
}

START_TEST(test_tensorlist_loop) {
    squares_case(3);
    squares_case(1);
    /* Zero steps: an empty (0, 2) result, no loop iteration. */
    squares_case(0);
}
END_TEST

/* ---- the TensorList ops one at a time ---- */

static Tensorflow__NodeDef *lnode(const char *op) {
    Tensorflow__NodeDef *d = tu_node_new(op, op);
    tu_attr_type(d, "element_dtype", RT_DT_FLOAT);
    return d;
}

START_TEST(test_tensorlist_ops) {
    tu_prefer_table(rt_ops_tensorlist_kernels);
    rt_tensor *x = TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
    rt_tensor *es = TU_I32(TU_SHAPE(1), 2);
    rt_tensor *unk = TU_I32(TU_SCALAR, -1);
    rt_tensor *l = tu_run1(lnode("TensorListFromTensor"), (rt_tensor *[]){x, es}, 2);
    rt_tensor *i1 = TU_I32(TU_SCALAR, 1), *i3 = TU_I32(TU_SCALAR, 3), *im = TU_I32(TU_SCALAR, -1);
    rt_tensor *it = tu_run1(lnode("TensorListGetItem"), (rt_tensor *[]){l, i1, unk}, 3);
    TU_CHECK_F32(it, TU_SHAPE(2), 0, 3, 4);
    tu_run_fail(lnode("TensorListGetItem"), (rt_tensor *[]){l, i3, unk}, 3, 1, MS_EINVAL,
                "out of range");
    tu_run_fail(lnode("TensorListGetItem"), (rt_tensor *[]){l, im, unk}, 3, 1, MS_EINVAL,
                "out of range");
    rt_tensor *len = tu_run1(tu_node_new("TensorListLength", "len"), (rt_tensor *[]){l}, 1);
    TU_CHECK_INT(len, RT_DT_INT32, TU_SCALAR, 3);
    rt_tensor *shp = tu_run1(tu_node_new("TensorListElementShape", "shp"), (rt_tensor *[]){l}, 1);
    TU_CHECK_INT(shp, RT_DT_INT32, TU_SHAPE(1), 2);

    /* SetItem makes a new list: the old one is unchanged. */
    rt_tensor *v = TU_F32(TU_SHAPE(2), -1, -2);
    rt_tensor *l2 = tu_run1(lnode("TensorListSetItem"), (rt_tensor *[]){l, i1, v}, 3);
    rt_tensor *s1 = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){l, es}, 2);
    TU_CHECK_F32(s1, TU_SHAPE(3, 2), 0, 1, 2, 3, 4, 5, 6);
    rt_tensor *s2 = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){l2, es}, 2);
    TU_CHECK_F32(s2, TU_SHAPE(3, 2), 0, 1, 2, -1, -2, 5, 6);
    rt_tensor *bad = TU_F32(TU_SHAPE(3), 1, 2, 3);
    tu_run_fail(lnode("TensorListSetItem"), (rt_tensor *[]){l, i1, bad}, 3, 1, MS_EINVAL, "shape");

    /* Reserve: unset elements read as zeros when the shape is known. */
    rt_tensor *n2 = TU_I32(TU_SCALAR, 2);
    rt_tensor *r = tu_run1(lnode("TensorListReserve"), (rt_tensor *[]){es, n2}, 2);
    rt_tensor *z = tu_run1(lnode("TensorListGetItem"), (rt_tensor *[]){r, i1, unk}, 3);
    TU_CHECK_F32(z, TU_SHAPE(2), 0, 0, 0);
    rt_tensor *ru = tu_run1(lnode("TensorListReserve"), (rt_tensor *[]){unk, n2}, 2);
    tu_run_fail(lnode("TensorListGetItem"), (rt_tensor *[]){ru, i1, unk}, 3, 1, MS_EINVAL,
                "never set");
    rt_tensor *ushp = tu_run1(tu_node_new("TensorListElementShape", "us"), (rt_tensor *[]){ru}, 1);
    TU_CHECK_INT(ushp, RT_DT_INT32, TU_SCALAR, -1);

    /* Empty list: Stack gives (0, 2); PushBack / PopBack. */
    rt_tensor *e = tu_run1(lnode("EmptyTensorList"), (rt_tensor *[]){es, unk}, 2);
    rt_tensor *se = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){e, es}, 2);
    tu_check_shape(se, RT_DT_FLOAT, TU_SHAPE(0, 2));
    tu_run_fail(lnode("TensorListPopBack"), (rt_tensor *[]){e, es}, 2, 2, MS_EINVAL, "empty");
    rt_tensor *p1 = tu_run1(lnode("TensorListPushBack"), (rt_tensor *[]){e, v}, 2);
    rt_tensor *p2 = tu_run1(lnode("TensorListPushBack"), (rt_tensor *[]){p1, it}, 2);
    rt_tensor *po[2] = {0};
    Tensorflow__NodeDef *pd = lnode("TensorListPopBack");
    ck_assert_int_eq(tu_run(pd, (rt_tensor *[]){p2, es}, 2, po, 2), MS_OK);
    tu_node_free(pd);
    TU_CHECK_F32(po[1], TU_SHAPE(2), 0, 3, 4);
    rt_tensor *pl = tu_run1(tu_node_new("TensorListLength", "pl"), (rt_tensor *[]){po[0]}, 1);
    TU_CHECK_INT(pl, RT_DT_INT32, TU_SCALAR, 1);
    rt_tensor *p2l = tu_run1(tu_node_new("TensorListLength", "p2l"), (rt_tensor *[]){p2}, 1);
    TU_CHECK_INT(p2l, RT_DT_INT32, TU_SCALAR, 2);

    /* ConcatV2 joins along the first dim and reports the lengths. */
    rt_tensor *co[2] = {0};
    Tensorflow__NodeDef *cd = lnode("TensorListConcatV2");
    rt_tensor *lead;
    rt_shape s0 = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT64, &s0, &lead), MS_OK);
    ck_assert_int_eq(tu_run(cd, (rt_tensor *[]){p2, unk, lead}, 3, co, 2), MS_OK);
    tu_node_free(cd);
    TU_CHECK_F32(co[0], TU_SHAPE(4), 0, -1, -2, 3, 4);
    TU_CHECK_INT(co[1], RT_DT_INT64, TU_SHAPE(2), 2, 2);

    /* Not a list. */
    tu_run_fail(tu_node_new("TensorListLength", "nl"), (rt_tensor *[]){x}, 1, 1, MS_EINVAL,
                "not a tensor list");
    rt_tensor *all[] = {x,  es, unk, l,  i1,   i3,  im, it, len, shp, v,  l2, s1, s2,   bad, n2, r,
                        z,  ru, ushp, e, se,   p1,  p2, po[0], po[1], pl, p2l, co[0], co[1], lead};
    tu_unref(all, (int)(sizeof all / sizeof all[0]));
    tu_prefer_table(NULL);
}
END_TEST

/* TensorListGather / ScatterIntoExistingList / Resize (tf.TensorArray in TF2). */
START_TEST(test_tensorlist_gather_scatter_resize) {
    tu_prefer_table(rt_ops_tensorlist_kernels);
    rt_tensor *x = TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
    rt_tensor *es = TU_I32(TU_SHAPE(1), 2);
    rt_tensor *l = tu_run1(lnode("TensorListFromTensor"), (rt_tensor *[]){x, es}, 2);
    rt_tensor *ix = TU_I32(TU_SHAPE(3), 2, 0, 2);
    rt_tensor *g = tu_run1(lnode("TensorListGather"), (rt_tensor *[]){l, ix, es}, 3);
    TU_CHECK_F32(g, TU_SHAPE(3, 2), 0, 5, 6, 1, 2, 5, 6);
    rt_tensor *bad = TU_I32(TU_SHAPE(1), 3);
    tu_run_fail(lnode("TensorListGather"), (rt_tensor *[]){l, bad, es}, 3, 1, MS_EINVAL,
                "out of range");
    /* Scatter rows into elements 4 and 0 of the 3-element list: it grows to 5. */
    rt_tensor *rows = TU_F32(TU_SHAPE(2, 2), -1, -2, -3, -4);
    rt_tensor *six = TU_I32(TU_SHAPE(2), 4, 0);
    rt_tensor *l2 = tu_run1(lnode("TensorListScatterIntoExistingList"), (rt_tensor *[]){l, rows, six}, 3);
    rt_tensor *s2 = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){l2, es}, 2);
    TU_CHECK_F32(s2, TU_SHAPE(5, 2), 0, -3, -4, 3, 4, 5, 6, 0, 0, -1, -2);
    rt_tensor *s1 = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){l, es}, 2);
    TU_CHECK_F32(s1, TU_SHAPE(3, 2), 0, 1, 2, 3, 4, 5, 6); /* the input list is unchanged */
    /* Resize: truncate to 1, grow to 2 (the new element is unset: zeros). */
    rt_tensor *one = TU_I32(TU_SCALAR, 1), *two = TU_I32(TU_SCALAR, 2);
    rt_tensor *r1 = tu_run1(lnode("TensorListResize"), (rt_tensor *[]){l, one}, 2);
    rt_tensor *r2 = tu_run1(lnode("TensorListResize"), (rt_tensor *[]){r1, two}, 2);
    rt_tensor *s3 = tu_run1(lnode("TensorListStack"), (rt_tensor *[]){r2, es}, 2);
    TU_CHECK_F32(s3, TU_SHAPE(2, 2), 0, 1, 2, 0, 0);
    rt_tensor *all[] = {x, es, l, ix, g, bad, rows, six, l2, s2, s1, one, two, r1, r2, s3};
    tu_unref(all, (int)(sizeof all / sizeof all[0]));
    tu_prefer_table(NULL);
}
END_TEST

/* TF1 TensorArrayV3: mutable through its handle; flows carry nothing. */
START_TEST(test_tensor_array) {
    tu_prefer_table(rt_ops_tensorlist_kernels);
    Tensorflow__NodeDef *d = tu_node_new("TensorArrayV3", "ta");
    tu_attr_type(d, "dtype", RT_DT_FLOAT);
    tu_attr_shape(d, "element_shape", 1, (const int64_t[]){2});
    rt_tensor *two = TU_I32(TU_SCALAR, 2), *ta[2] = {0};
    ck_assert_int_eq(tu_run(d, (rt_tensor *[]){two}, 1, ta, 2), MS_OK);
    tu_node_free(d);
    rt_tensor *h = ta[0], *flow = ta[1];
    rt_tensor *i0 = TU_I32(TU_SCALAR, 0), *i1 = TU_I32(TU_SCALAR, 1), *i2 = TU_I32(TU_SCALAR, 2);
    rt_tensor *v = TU_F32(TU_SHAPE(2), 5, 6);
    rt_tensor *f1 = tu_run1(tu_node_new("TensorArrayWriteV3", "w"), (rt_tensor *[]){h, i1, v, flow}, 4);
    rt_tensor *r1 = tu_run1(tu_node_new("TensorArrayReadV3", "r1"), (rt_tensor *[]){h, i1, f1}, 3);
    TU_CHECK_F32(r1, TU_SHAPE(2), 0, 5, 6);
    rt_tensor *r0 = tu_run1(tu_node_new("TensorArrayReadV3", "r0"), (rt_tensor *[]){h, i0, f1}, 3);
    TU_CHECK_F32(r0, TU_SHAPE(2), 0, 0, 0); /* never written, shape known: zeros */
    tu_run_fail(tu_node_new("TensorArrayWriteV3", "w2"), (rt_tensor *[]){h, i2, v, f1}, 4, 1,
                MS_EINVAL, "dynamic_size is false");
    tu_run_fail(tu_node_new("TensorArrayReadV3", "r2"), (rt_tensor *[]){h, i2, f1}, 3, 1,
                MS_EINVAL, "out of range");
    rt_tensor *sz = tu_run1(tu_node_new("TensorArraySizeV3", "sz"), (rt_tensor *[]){h, f1}, 2);
    TU_CHECK_INT(sz, RT_DT_INT32, TU_SCALAR, 2);
    rt_tensor *ix = TU_I32(TU_SHAPE(2), 1, 0);
    rt_tensor *g = tu_run1(tu_node_new("TensorArrayGatherV3", "g"), (rt_tensor *[]){h, ix, f1}, 3);
    TU_CHECK_F32(g, TU_SHAPE(2, 2), 0, 5, 6, 0, 0);
    rt_tensor *vals = TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    rt_tensor *f2 = tu_run1(tu_node_new("TensorArrayScatterV3", "s"), (rt_tensor *[]){h, ix, vals, f1}, 4);
    rt_tensor *g2 = tu_run1(tu_node_new("TensorArrayGatherV3", "g2"), (rt_tensor *[]){h, ix, f2}, 3);
    TU_CHECK_F32(g2, TU_SHAPE(2, 2), 0, 1, 2, 3, 4); /* element 1 = [1, 2], element 0 = [3, 4] */
    rt_tensor *c = NULL;
    Tensorflow__NodeDef *cd = tu_node_new("TensorArrayCloseV3", "close");
    ck_assert_int_eq(tu_run(cd, (rt_tensor *[]){h}, 1, &c, 0), MS_OK);
    tu_node_free(cd);

    /* Dynamic size, unknown element shape: writes grow it; an unwritten element cannot be read. */
    d = tu_node_new("TensorArrayV3", "dyn");
    tu_attr_type(d, "dtype", RT_DT_FLOAT);
    tu_attr_b(d, "dynamic_size", 1);
    rt_tensor *zero = TU_I32(TU_SCALAR, 0), *dyn[2] = {0};
    ck_assert_int_eq(tu_run(d, (rt_tensor *[]){zero}, 1, dyn, 2), MS_OK);
    tu_node_free(d);
    rt_tensor *f3 = tu_run1(tu_node_new("TensorArrayWriteV3", "dw"), (rt_tensor *[]){dyn[0], i2, v, dyn[1]}, 4);
    rt_tensor *dsz = tu_run1(tu_node_new("TensorArraySizeV3", "dsz"), (rt_tensor *[]){dyn[0], f3}, 2);
    TU_CHECK_INT(dsz, RT_DT_INT32, TU_SCALAR, 3);
    tu_run_fail(tu_node_new("TensorArrayReadV3", "dr"), (rt_tensor *[]){dyn[0], i0, f3}, 3, 1,
                MS_EINVAL, "never set");
    /* A TensorList is not a TensorArray handle. */
    rt_tensor *es = TU_I32(TU_SHAPE(1), 2);
    Tensorflow__NodeDef *rd = tu_node_new("TensorListReserve", "lr");
    tu_attr_type(rd, "element_dtype", RT_DT_FLOAT);
    rt_tensor *lst = tu_run1(rd, (rt_tensor *[]){es, two}, 2);
    tu_run_fail(tu_node_new("TensorArrayReadV3", "bad_h"), (rt_tensor *[]){lst, i0, f3}, 3, 1,
                MS_EINVAL, "not a TensorArray handle");
    rt_tensor *all[] = {two, h, flow, i0, i1, i2, v, f1, r1, r0, sz, ix, g, vals, f2, g2,
                        zero, dyn[0], dyn[1], f3, dsz, es, lst};
    tu_unref(all, (int)(sizeof all / sizeof all[0]));
    tu_prefer_table(NULL);
}
END_TEST

/* A new TensorArrayV3 of `size` floats; dynamic_size as given, element_shape
 * of `rank` dims (rank -1: no attr). out[0] the handle, out[1] the flow. */
static void new_ta(const char *name, int32_t size, int dynamic, int rank, const int64_t *dims,
                   rt_tensor **out) {
    Tensorflow__NodeDef *d = tu_node_new("TensorArrayV3", name);
    tu_attr_type(d, "dtype", RT_DT_FLOAT);
    if (dynamic) tu_attr_b(d, "dynamic_size", 1);
    if (rank >= 0) tu_attr_shape(d, "element_shape", rank, dims);
    rt_tensor *sz = TU_I32(TU_SCALAR, size);
    ck_assert_int_eq(tu_run(d, (rt_tensor *[]){sz}, 1, out, 2), MS_OK);
    rt_tensor_unref(sz);
    tu_node_free(d);
}

/* TF1 TensorArraySplitV3 / ConcatV3 (tf.TensorArray.split / .concat), values
 * worked by hand. */
START_TEST(test_tensor_array_split_concat) {
    tu_prefer_table(rt_ops_tensorlist_kernels);
    rt_tensor *ta[2] = {0}, *c[2] = {0};
    new_ta("ta", 3, 0, -1, NULL, ta);
    rt_tensor *h = ta[0], *flow = ta[1];
    /* value 5x2 split as 2, 0, 3 rows: element 1 is empty */
    rt_tensor *v = TU_F32(TU_SHAPE(5, 2), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    rt_tensor *lens = TU_I64(TU_SHAPE(3), 2, 0, 3);
    rt_tensor *f1 = tu_run1(tu_node_new("TensorArraySplitV3", "split"),
                            (rt_tensor *[]){h, v, lens, flow}, 4);
    rt_tensor *i1 = TU_I32(TU_SCALAR, 1), *i2 = TU_I32(TU_SCALAR, 2);
    rt_tensor *r2 = tu_run1(tu_node_new("TensorArrayReadV3", "r2"), (rt_tensor *[]){h, i2, f1}, 3);
    TU_CHECK_F32(r2, TU_SHAPE(3, 2), 0, 5, 6, 7, 8, 9, 10);
    rt_tensor *r1 = tu_run1(tu_node_new("TensorArrayReadV3", "r1"), (rt_tensor *[]){h, i1, f1}, 3);
    ck_assert_int_eq(r1->shape.rank, 2);
    ck_assert_int_eq(r1->shape.dim[0], 0);
    ck_assert_int_eq(r1->shape.dim[1], 2);
    Tensorflow__NodeDef *cd = tu_node_new("TensorArrayConcatV3", "concat");
    tu_attr_type(cd, "dtype", RT_DT_FLOAT);
    ck_assert_msg(tu_run(cd, (rt_tensor *[]){h, f1}, 2, c, 2) == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(c[0], TU_SHAPE(5, 2), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    TU_CHECK_INT(c[1], RT_DT_INT64, TU_SHAPE(3), 2, 0, 3);
    tu_unref(c, 2);
    /* element 1 rewritten with one row: the concat has 6 rows */
    rt_tensor *row = TU_F32(TU_SHAPE(1, 2), 11, 12);
    rt_tensor *f2 = tu_run1(tu_node_new("TensorArrayWriteV3", "w"), (rt_tensor *[]){h, i1, row, f1}, 4);
    ck_assert_int_eq(tu_run(cd, (rt_tensor *[]){h, f2}, 2, c, 2), MS_OK);
    TU_CHECK_F32(c[0], TU_SHAPE(6, 2), 0, 1, 2, 3, 4, 11, 12, 5, 6, 7, 8, 9, 10);
    TU_CHECK_INT(c[1], RT_DT_INT64, TU_SHAPE(3), 2, 1, 3);
    tu_unref(c, 2);
    /* refused splits: lengths not summing to the rows, a negative length,
     * too few lengths for a fixed-size array, a scalar value */
    rt_tensor *bad_sum = TU_I64(TU_SHAPE(3), 2, 0, 2), *neg = TU_I64(TU_SHAPE(3), 2, -1, 4);
    rt_tensor *huge = TU_I64(TU_SHAPE(3), 2, INT64_MAX, 3), *two = TU_I64(TU_SHAPE(2), 2, 3);
    rt_tensor *scalar = TU_F32(TU_SCALAR, 1), *none = TU_I64(TU_SHAPE(1), 0);
    tu_run_fail(tu_node_new("TensorArraySplitV3", "s_sum"), (rt_tensor *[]){h, v, bad_sum, f2}, 4, 1,
                MS_EINVAL, "sum to 4");
    tu_run_fail(tu_node_new("TensorArraySplitV3", "s_neg"), (rt_tensor *[]){h, v, neg, f2}, 4, 1,
                MS_EINVAL, "lengths[1] = -1");
    tu_run_fail(tu_node_new("TensorArraySplitV3", "s_huge"), (rt_tensor *[]){h, v, huge, f2}, 4, 1,
                MS_EINVAL, "lengths[1]");
    tu_run_fail(tu_node_new("TensorArraySplitV3", "s_two"), (rt_tensor *[]){h, v, two, f2}, 4, 1,
                MS_EINVAL, "dynamic_size is false");
    tu_run_fail(tu_node_new("TensorArraySplitV3", "s_scalar"), (rt_tensor *[]){h, scalar, none, f2},
                4, 1, MS_EINVAL, "at least a vector");
    tu_node_free(cd);

    /* Known element shape [2, 2]: an element never written concatenates as zeros. */
    rt_tensor *kn[2] = {0};
    new_ta("known", 2, 0, 2, (const int64_t[]){2, 2}, kn);
    rt_tensor *sq = TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    rt_tensor *f3 = tu_run1(tu_node_new("TensorArrayWriteV3", "kw"), (rt_tensor *[]){kn[0], i1, sq, kn[1]}, 4);
    cd = tu_node_new("TensorArrayConcatV3", "kconcat");
    ck_assert_int_eq(tu_run(cd, (rt_tensor *[]){kn[0], f3}, 2, c, 2), MS_OK);
    tu_node_free(cd);
    TU_CHECK_F32(c[0], TU_SHAPE(4, 2), 0, 0, 0, 0, 0, 1, 2, 3, 4);
    TU_CHECK_INT(c[1], RT_DT_INT64, TU_SHAPE(2), 2, 2);
    tu_unref(c, 2);

    /* An empty array concatenates to [0, element_shape_except0...] when that
     * is known, else it is refused. */
    rt_tensor *em[2] = {0};
    new_ta("empty", 0, 1, -1, NULL, em);
    cd = tu_node_new("TensorArrayConcatV3", "econcat");
    tu_attr_shape(cd, "element_shape_except0", 1, (const int64_t[]){3});
    ck_assert_int_eq(tu_run(cd, (rt_tensor *[]){em[0], em[1]}, 2, c, 2), MS_OK);
    tu_node_free(cd);
    ck_assert_int_eq(c[0]->shape.rank, 2);
    ck_assert_int_eq(c[0]->shape.dim[0], 0);
    ck_assert_int_eq(c[0]->shape.dim[1], 3);
    ck_assert_int_eq(c[1]->shape.rank, 1);
    ck_assert_int_eq(c[1]->nelem, 0);
    tu_unref(c, 2);
    tu_run_fail(tu_node_new("TensorArrayConcatV3", "econcat2"), (rt_tensor *[]){em[0], em[1]}, 2, 2,
                MS_EINVAL, "not fully known");
    /* A dynamic array split into more elements than it has grows; elements
     * that differ past the first dim cannot be concatenated; an unwritten
     * element of unknown shape cannot either. */
    rt_tensor *lens2 = TU_I64(TU_SHAPE(2), 1, 0), *one = TU_F32(TU_SHAPE(1, 2), 7, 8);
    rt_tensor *f4 = tu_run1(tu_node_new("TensorArraySplitV3", "esplit"),
                            (rt_tensor *[]){em[0], one, lens2, em[1]}, 4);
    rt_tensor *esz = tu_run1(tu_node_new("TensorArraySizeV3", "esz"), (rt_tensor *[]){em[0], f4}, 2);
    TU_CHECK_INT(esz, RT_DT_INT32, TU_SCALAR, 2);
    rt_tensor *wide = TU_F32(TU_SHAPE(1, 3), 1, 2, 3);
    rt_tensor *f5 = tu_run1(tu_node_new("TensorArrayWriteV3", "ew"), (rt_tensor *[]){em[0], i2, wide, f4}, 4);
    tu_run_fail(tu_node_new("TensorArrayConcatV3", "differ"), (rt_tensor *[]){em[0], f5}, 2, 2,
                MS_EINVAL, "differs from the others");
    rt_tensor *gap[2] = {0};
    new_ta("gap", 2, 0, -1, NULL, gap);
    rt_tensor *f6 = tu_run1(tu_node_new("TensorArrayWriteV3", "gw"), (rt_tensor *[]){gap[0], i1, row, gap[1]}, 4);
    tu_run_fail(tu_node_new("TensorArrayConcatV3", "unwritten"), (rt_tensor *[]){gap[0], f6}, 2, 2,
                MS_EINVAL, "element 0 was never written");

    /* Hostile element shape: two unwritten elements of [2^20, 2^20] floats
     * (8 TiB) are refused by the request's memory budget, not allocated. */
    rt_tensor *big[2] = {0};
    new_ta("big", 2, 0, 2, (const int64_t[]){1 << 20, 1 << 20}, big);
    const kn_kernel *k = NULL;
    for (const kn_kernel *t = rt_ops_tensorlist_kernels; t->op; t++)
        if (strcmp(t->op, "TensorArrayConcatV3") == 0) k = t;
    ck_assert_ptr_nonnull(k);
    cd = tu_node_new("TensorArrayConcatV3", "bigconcat");
    kn_node node = {.name = "bigconcat", .op = "TensorArrayConcatV3", .def = cd,
                    .attrs = &rt_nodedef_attrs, .nin = 2, .nout = 2};
    ms_budget bud;
    ms_budget_init(&bud, (uint64_t)1 << 20);
    kn_ctx ctx = {.nthreads = 1, .budget = &bud};
    ck_assert_int_eq(k->compute(&ctx, &node, NULL, (rt_tensor *[]){big[0], big[1]}, c), MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "max_request_memory_bytes"), "%s", ms_errmsg());
    ck_assert_ptr_null(c[0]);
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    tu_node_free(cd);

    rt_tensor *all[] = {h, flow, v, lens, f1, i1, i2, r2, r1, row, f2, bad_sum, neg, huge, two,
                        scalar, none, kn[0], kn[1], sq, f3, em[0], em[1], lens2, one, f4, esz,
                        wide, f5, gap[0], gap[1], f6, big[0], big[1]};
    tu_unref(all, (int)(sizeof all / sizeof all[0]));
    tu_prefer_table(NULL);
}
END_TEST

/* Split then Concat of a TensorArray inside a function body, as a TF1-style
 * graph holds them: the body names their outputs by argument name
 * (ta:handle, ta:flow, sp:flow_out, cc:value, cc:lengths), so the OpDef
 * table's entries are needed; the concat gives back the split value. */
START_TEST(test_tensor_array_graph) {
    mgb b;
    mgb_init(&b);
    placeholder(&b, "x", RT_DT_FLOAT);
    placeholder(&b, "lens", RT_DT_INT64);
    Tensorflow__NodeDef *d = top(&b, node("call", "StatefulPartitionedCall", IN("x", "lens")));
    rt_dtype tout[2] = {RT_DT_FLOAT, RT_DT_INT64};
    attr_types(d, "Tout", 2, tout);
    attr_func(d, "f", "ta_fn");
    Tensorflow__FunctionDef *f = fn(&b, "ta_fn", 2, (const char *[]){"v", "l"}, 2,
                                    (const char *[]){"value=cc:value:0", "lengths=cc:lengths:0"});
    int32_t three = 3;
    fconst(f, "size", RT_DT_INT32, &three);
    d = body(f, node("ta", "TensorArrayV3", IN("size:output:0")));
    attr_type(d, "dtype", RT_DT_FLOAT);
    d = body(f, node("sp", "TensorArraySplitV3", IN("ta:handle:0", "v", "l", "ta:flow:0")));
    attr_type(d, "T", RT_DT_FLOAT);
    d = body(f, node("cc", "TensorArrayConcatV3", IN("ta:handle:0", "sp:flow_out:0")));
    attr_type(d, "dtype", RT_DT_FLOAT);
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6), TU_I64(TU_SHAPE(3), 1, 2, 0)};
    rt_tensor *out[2] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"x", "lens"}, in, 2,
                             (const char *[]){"call:0", "call:1"}, out, NULL);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(out[0], TU_SHAPE(3, 2), 0, 1, 2, 3, 4, 5, 6);
    TU_CHECK_INT(out[1], RT_DT_INT64, TU_SHAPE(3), 1, 2, 0);
    tu_unref(out, 2);
    tu_unref(in, 2);
    /* lengths that do not sum to the rows fail the run, naming the node */
    in[0] = TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    in[1] = TU_I64(TU_SHAPE(3), 1, 2, 0);
    st = run_graph(&b, 2, (const char *[]){"x", "lens"}, in, 2,
                   (const char *[]){"call:0", "call:1"}, out, NULL);
    ck_assert_int_eq(st, MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "call/sp") && strstr(ms_errmsg(), "lengths[1] = 2"), "%s", ms_errmsg());
    /* named once: the executor does not wrap a message that names the node */
    ck_assert_msg(strstr(strstr(ms_errmsg(), "call/sp") + 1, "call/sp") == NULL, "%s",
                  ms_errmsg());
    tu_unref(in, 2);
    arena_free();
}
END_TEST

START_TEST(test_unreached_function) {
    /* A call whose function body names an output no op list knows (as TF
     * 2.2 saver functions do) does not fail the build; only a plan that
     * reaches it fails, with the resolution message. */
    mgb b;
    mgb_init(&b);
    placeholder(&b, "x", RT_DT_FLOAT);
    Tensorflow__NodeDef *d = top(&b, node("y", "Identity", IN("x")));
    attr_type(d, "T", RT_DT_FLOAT);
    d = top(&b, node("saver", "StatefulPartitionedCall", IN("x")));
    rt_dtype tf = RT_DT_FLOAT;
    attr_types(d, "Tout", 1, &tf);
    attr_func(d, "f", "save_fn");
    Tensorflow__FunctionDef *f =
        fn(&b, "save_fn", 1, (const char *[]){"v"}, 1, (const char *[]){"out=id:output:0"});
    body(f, node("mystery", "UnknownOp7", IN("v")));
    d = body(f, node("id", "Identity", IN("mystery:nosuch:0")));
    attr_type(d, "T", RT_DT_FLOAT);
    rt_tensor *in[1] = {TU_F32(TU_SCALAR, 4.0f)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"y:0"}, out, NULL);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(out[0], TU_SCALAR, 0, 4.0f);
    tu_unref(out, 1);
    st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"saver:0"}, out, NULL);
    ck_assert_int_eq(st, MS_ENOTSUP);
    /* Either of the body's two problems, named in the function's scope. */
    ck_assert_msg(strstr(ms_errmsg(), "'saver/") &&
                      (strstr(ms_errmsg(), "cannot resolve output 'nosuch'") ||
                       strstr(ms_errmsg(), "UnknownOp7")),
                  "%s", ms_errmsg());
    tu_unref(in, 1);
    arena_free();
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"while_loops", test_while_loops},       {"while_zero_trip", test_while_zero_trip},
        {"while_cancelled", test_while_cancelled}, {"while_bad_body", test_while_bad_body},
        {"if", test_if},                         {"case", test_case},
        {"tf1_loop_refused", test_tf1_loop_refused}, {"tensorlist_loop", test_tensorlist_loop},
        {"tensorlist_ops", test_tensorlist_ops}, {"unreached_function", test_unreached_function},
        {"tensor_array", test_tensor_array},
        {"tensor_array_split_concat", test_tensor_array_split_concat},
        {"tensor_array_graph", test_tensor_array_graph},
        {"tensorlist_gather_scatter_resize", test_tensorlist_gather_scatter_resize},
    };
    return tu_suite_main("control", cases, sizeof cases / sizeof cases[0]);
}
