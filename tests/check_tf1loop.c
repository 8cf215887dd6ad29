/* check_tf1loop: TF1 while loops (Enter / Merge / Switch / LoopCond /
 * NextIteration / Exit frames, as tf.while_loop and dynamic_rnn export them)
 * converted by the loader's pass (rt_tf1loop.c) and run by rt_ops_control.c.
 * The graphs are built by hand in TF1's shape; expected values are computed
 * by hand from the loops' definitions. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "rt_exec.h"
#include "rt_graphbuild.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_opscan.h"
#include "rt_ops.h"
#include "rt_tf1loop.h"
#include "util_fn.h"
#include "util_node.h"

/* ---- a GraphDef of up to 128 nodes ---- */
static Tensorflow__NodeDef *g_nodes[128];

static void gb_init(mgb *b) {
    mgb_init(b);
    b->gd.node = g_nodes;
}

static Tensorflow__NodeDef *add(mgb *b, const char *name, const char *op, const char *const *in) {
    ck_assert_int_lt(b->gd.n_node, 128);
    Tensorflow__NodeDef *d = node(name, op, in);
    g_nodes[b->gd.n_node++] = d;
    return d;
}

static void attr_str(Tensorflow__NodeDef *d, const char *key, const char *s) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)S(s);
    v->s.len = strlen(s);
}

static void attr_bool(Tensorflow__NodeDef *d, const char *key, int b) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    v->b = b;
}

static void attr_int(Tensorflow__NodeDef *d, const char *key, int64_t i) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    v->i = i;
}

/* A shape attr of one dim, in the test's arena. */
static void attr_shape1(Tensorflow__NodeDef *d, const char *key, int64_t dim) {
    Tensorflow__AttrValue *v = attr(d, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = A(sizeof(*v->shape));
    tensorflow__tensor_shape_proto__init(v->shape);
    Tensorflow__TensorShapeProto__Dim **dims = A(sizeof(*dims));
    dims[0] = A(sizeof(**dims));
    tensorflow__tensor_shape_proto__dim__init(dims[0]);
    dims[0]->size = dim;
    v->shape->dim = dims;
    v->shape->n_dim = 1;
}

static void ph(mgb *b, const char *name, rt_dtype dt) {
    attr_type(add(b, name, "Placeholder", NULL), "dtype", dt);
}

static void cst(mgb *b, const char *name, rt_dtype dt, const void *v, const char *ctl) {
    Tensorflow__NodeDef *d = add(b, name, "Const", ctl ? IN(ctl) : NULL);
    attr_const(d, dt, -1, v);
}

static void op2(mgb *b, const char *name, const char *op, const char *x, const char *y,
                rt_dtype t) {
    attr_type(add(b, name, op, IN(x, y)), "T", t);
}

static void op1(mgb *b, const char *name, const char *op, const char *x, rt_dtype t) {
    attr_type(add(b, name, op, IN(x)), "T", t);
}

static void enter(mgb *b, const char *name, const char *x, const char *frame, int constant,
                  rt_dtype t) {
    Tensorflow__NodeDef *d = add(b, name, "Enter", IN(x));
    attr_type(d, "T", t);
    attr_str(d, "frame_name", frame);
    attr_bool(d, "is_constant", constant);
    attr_int(d, "parallel_iterations", 10);
}

/* The plumbing of loop variable `v` of loop `p` (prefix "p/"): Enter from
 * init, Merge, Switch on p/LoopCond, Identity (body side), NextIteration of
 * `next`, Exit. Nodes p/Enter_v, p/Merge_v, p/Switch_v, p/Identity_v,
 * p/NextIteration_v, p/Exit_v. */
static void loop_var(mgb *b, const char *p, const char *v, const char *init, const char *next,
                     rt_dtype t) {
    char e[96], m[96], s[96], id[96], ni[96], x[96], lc[96], s1[100], frame[96];
    snprintf(e, sizeof e, "%s/Enter_%s", p, v);
    snprintf(m, sizeof m, "%s/Merge_%s", p, v);
    snprintf(s, sizeof s, "%s/Switch_%s", p, v);
    snprintf(id, sizeof id, "%s/Identity_%s", p, v);
    snprintf(ni, sizeof ni, "%s/NextIteration_%s", p, v);
    snprintf(x, sizeof x, "%s/Exit_%s", p, v);
    snprintf(lc, sizeof lc, "%s/LoopCond", p);
    snprintf(s1, sizeof s1, "%s:1", s);
    snprintf(frame, sizeof frame, "%s/while_context", p);
    enter(b, e, init, frame, 0, t);
    Tensorflow__NodeDef *d = add(b, m, "Merge", IN(e, ni));
    attr_type(d, "T", t);
    attr_int(d, "N", 2);
    op2(b, s, "Switch", m, lc, t);
    op1(b, id, "Identity", s1, t);
    op1(b, ni, "NextIteration", next, t);
    op1(b, x, "Exit", s, t);
}

static ms_status run_graph(mgb *b, int nf, const char *const *feeds, rt_tensor *const *fv, int no,
                           const char *const *fetches, rt_tensor **outs) {
    kn_backend *be = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(be);
    rt_graph *g;
    ms_status st = rt_graph_build(&b->mg, be, rt_model_host_ops, &g);
    ck_assert_msg(st == MS_OK, "build: %s", ms_errmsg());
    ck_assert_int_eq(rt_tf1_loops_convert(g), MS_OK);
    rt_edge f[8], o[8];
    for (int i = 0; i < nf; i++) ck_assert_int_eq(rt_graph_tensor(g, feeds[i], &f[i]), MS_OK);
    for (int i = 0; i < no; i++) ck_assert_int_eq(rt_graph_tensor(g, fetches[i], &o[i]), MS_OK);
    rt_plan *p = NULL;
    st = rt_plan_build(g, f, nf, o, no, NULL, 0, &p);
    if (st == MS_OK) {
        rt_vars vars;
        rt_vars_init(&vars);
        kn_ctx ctx = {.nthreads = 1};
        st = rt_plan_run(p, &ctx, &vars, fv, outs);
        /* A second run of the same plan gives the same answer. */
        rt_tensor *again[8] = {0};
        if (st == MS_OK) {
            ck_assert_int_eq(rt_plan_run(p, &ctx, &vars, fv, again), MS_OK);
            for (int i = 0; i < no; i++) {
                ck_assert_int_eq(again[i]->nelem, outs[i]->nelem);
                ck_assert(memcmp(again[i]->data, outs[i]->data,
                                 (size_t)again[i]->nelem * rt_dtype_size(again[i]->dtype)) == 0);
            }
            tu_unref(again, no);
        }
        rt_vars_destroy(&vars);
    }
    rt_plan_free(p);
    rt_graph_free(g);
    kn_backend_free(be);
    return st;
}

/* while i < n: i += 1; acc *= 2 (n an invariant; the cond's constant 0
 * carries TF1's control input on the Merge). */
static void build_counter(mgb *b) {
    gb_init(b);
    ph(b, "n", RT_DT_INT32);
    ph(b, "acc", RT_DT_FLOAT);
    int32_t zero = 0, one = 1;
    float two = 2.0f;
    cst(b, "i0", RT_DT_INT32, &zero, NULL);
    enter(b, "w/Enter_n", "n", "w/while_context", 1, RT_DT_INT32);
    loop_var(b, "w", "i", "i0", "w/add", RT_DT_INT32);
    loop_var(b, "w", "acc", "acc", "w/mul", RT_DT_FLOAT);
    cst(b, "w/zero", RT_DT_INT32, &zero, "^w/Merge_i");
    op2(b, "w/sub", "Sub", "w/Enter_n", "w/zero", RT_DT_INT32);
    op2(b, "w/Less", "Less", "w/Merge_i", "w/sub", RT_DT_INT32);
    add(b, "w/LoopCond", "LoopCond", IN("w/Less"));
    cst(b, "w/one", RT_DT_INT32, &one, "^w/Identity_i");
    cst(b, "w/two", RT_DT_FLOAT, &two, "^w/Identity_i");
    op2(b, "w/add", "AddV2", "w/Identity_i", "w/one", RT_DT_INT32);
    op2(b, "w/mul", "Mul", "w/Identity_acc", "w/two", RT_DT_FLOAT);
    op1(b, "out", "Identity", "w/Exit_acc", RT_DT_FLOAT);
}

static void counter_case(int32_t n, float acc, int32_t want_i, float want_acc) {
    mgb b;
    build_counter(&b);
    rt_tensor *in[2] = {TU_I32(TU_SCALAR, n), TU_F32(TU_SCALAR, acc)};
    rt_tensor *out[2] = {0};
    ms_status st = run_graph(&b, 2, (const char *[]){"n", "acc"}, in, 2,
                             (const char *[]){"w/Exit_i", "out"}, out);
    ck_assert_msg(st == MS_OK, "n=%d: %s", n, ms_errmsg());
    TU_CHECK_INT(out[0], RT_DT_INT32, TU_SCALAR, want_i);
    TU_CHECK_F32(out[1], TU_SCALAR, 0, want_acc);
    tu_unref(in, 2);
    tu_unref(out, 2);
    arena_free();
}

START_TEST(test_counter) {
    counter_case(3, 1.5f, 3, 12.0f);    /* 1.5 * 2^3 */
    counter_case(5, -0.25f, 5, -8.0f);  /* -0.25 * 2^5 */
}
END_TEST

START_TEST(test_zero_trip) {
    counter_case(0, 7.5f, 0, 7.5f);     /* the cond is false at once: the inputs */
    counter_case(-4, -1.0f, 0, -1.0f);
}
END_TEST

/* outer: while i < n { inner: while j < 3 { j += 1; a += x } ; i += 1 }
 * with x an invariant of both loops: acc = acc0 + 3 n x, i = n. */
static void build_nested(mgb *b) {
    gb_init(b);
    ph(b, "n", RT_DT_INT32);
    ph(b, "x", RT_DT_FLOAT);
    ph(b, "acc", RT_DT_FLOAT);
    int32_t zero = 0, one = 1, three = 3;
    cst(b, "i0", RT_DT_INT32, &zero, NULL);
    enter(b, "o/Enter_n", "n", "o/while_context", 1, RT_DT_INT32);
    enter(b, "o/Enter_x", "x", "o/while_context", 1, RT_DT_FLOAT);
    loop_var(b, "o", "i", "i0", "o/add", RT_DT_INT32);
    loop_var(b, "o", "acc", "acc", "o/in/Exit_a", RT_DT_FLOAT);
    op2(b, "o/Less", "Less", "o/Merge_i", "o/Enter_n", RT_DT_INT32);
    add(b, "o/LoopCond", "LoopCond", IN("o/Less"));
    cst(b, "o/one", RT_DT_INT32, &one, "^o/Identity_i");
    op2(b, "o/add", "AddV2", "o/Identity_i", "o/one", RT_DT_INT32);
    /* the inner loop, in the outer body */
    cst(b, "o/j0", RT_DT_INT32, &zero, "^o/Identity_i");
    enter(b, "o/in/Enter_x", "o/Enter_x", "o/in/while_context", 1, RT_DT_FLOAT);
    loop_var(b, "o/in", "j", "o/j0", "o/in/add", RT_DT_INT32);
    loop_var(b, "o/in", "a", "o/Identity_acc", "o/in/sum", RT_DT_FLOAT);
    cst(b, "o/in/three", RT_DT_INT32, &three, "^o/in/Merge_j");
    op2(b, "o/in/Less", "Less", "o/in/Merge_j", "o/in/three", RT_DT_INT32);
    add(b, "o/in/LoopCond", "LoopCond", IN("o/in/Less"));
    cst(b, "o/in/one", RT_DT_INT32, &one, "^o/in/Identity_j");
    op2(b, "o/in/add", "AddV2", "o/in/Identity_j", "o/in/one", RT_DT_INT32);
    op2(b, "o/in/sum", "AddV2", "o/in/Identity_a", "o/in/Enter_x", RT_DT_FLOAT);
}

static void nested_case(int32_t n, float x, float acc, float want) {
    mgb b;
    build_nested(&b);
    rt_tensor *in[3] = {TU_I32(TU_SCALAR, n), TU_F32(TU_SCALAR, x), TU_F32(TU_SCALAR, acc)};
    rt_tensor *out[2] = {0};
    ms_status st = run_graph(&b, 3, (const char *[]){"n", "x", "acc"}, in, 2,
                             (const char *[]){"o/Exit_i", "o/Exit_acc"}, out);
    ck_assert_msg(st == MS_OK, "n=%d: %s", n, ms_errmsg());
    TU_CHECK_INT(out[0], RT_DT_INT32, TU_SCALAR, n > 0 ? n : 0);
    TU_CHECK_F32(out[1], TU_SCALAR, 0, want);
    tu_unref(in, 3);
    tu_unref(out, 2);
    arena_free();
}

START_TEST(test_nested) {
    nested_case(2, 0.5f, 1.0f, 4.0f);    /* 1 + 3 * 2 * 0.5 */
    nested_case(4, -1.25f, 0.0f, -15.0f); /* 0 + 3 * 4 * -1.25 */
    nested_case(0, 9.0f, 2.0f, 2.0f);    /* zero-trip outer loop */
}
END_TEST

/* dynamic_rnn's shape: x [t, 2] scattered into a TensorArray; the loop
 * reads element `time`, writes its square into another TensorArray (the
 * flow is the loop variable, the handles are invariants); the result is
 * gathered after the loop. */
START_TEST(test_tensor_array_loop) {
    for (int t = 0; t <= 3; t++) {
        mgb b;
        gb_init(&b);
        ph(&b, "x", RT_DT_FLOAT);
        ph(&b, "t", RT_DT_INT32);
        int32_t zero = 0, one = 1;
        cst(&b, "zero", RT_DT_INT32, &zero, NULL);
        cst(&b, "one", RT_DT_INT32, &one, NULL);
        Tensorflow__NodeDef *d = add(&b, "range", "Range", IN("zero", "t", "one"));
        attr_type(d, "Tidx", RT_DT_INT32);
        d = add(&b, "ta_in", "TensorArrayV3", IN("t"));
        attr_type(d, "dtype", RT_DT_FLOAT);
        d = add(&b, "ta_out", "TensorArrayV3", IN("t"));
        attr_type(d, "dtype", RT_DT_FLOAT);
        attr_shape1(d, "element_shape", 2);
        d = add(&b, "scatter", "TensorArrayScatterV3", IN("ta_in", "range", "x", "ta_in:1"));
        attr_type(d, "T", RT_DT_FLOAT);
        enter(&b, "r/Enter_in", "ta_in", "r/while_context", 1, RT_DT_RESOURCE);
        enter(&b, "r/Enter_inflow", "scatter", "r/while_context", 1, RT_DT_FLOAT);
        enter(&b, "r/Enter_out", "ta_out", "r/while_context", 1, RT_DT_RESOURCE);
        enter(&b, "r/Enter_t", "t", "r/while_context", 1, RT_DT_INT32);
        loop_var(&b, "r", "time", "zero", "r/inc", RT_DT_INT32);
        loop_var(&b, "r", "flow", "ta_out:1", "r/write", RT_DT_FLOAT);
        op2(&b, "r/Less", "Less", "r/Merge_time", "r/Enter_t", RT_DT_INT32);
        add(&b, "r/LoopCond", "LoopCond", IN("r/Less"));
        d = add(&b, "r/read", "TensorArrayReadV3", IN("r/Enter_in", "r/Identity_time", "r/Enter_inflow"));
        attr_type(d, "dtype", RT_DT_FLOAT);
        op2(&b, "r/sq", "Mul", "r/read", "r/read", RT_DT_FLOAT);
        d = add(&b, "r/write", "TensorArrayWriteV3", IN("r/Enter_out", "r/Identity_time", "r/sq",
                                                        "r/Identity_flow"));
        attr_type(d, "T", RT_DT_FLOAT);
        cst(&b, "r/one", RT_DT_INT32, &one, "^r/Identity_time");
        op2(&b, "r/inc", "AddV2", "r/Identity_time", "r/one", RT_DT_INT32);
        d = add(&b, "gather", "TensorArrayGatherV3", IN("ta_out", "range", "r/Exit_flow"));
        attr_type(d, "dtype", RT_DT_FLOAT);
        attr_shape1(d, "element_shape", 2);

        float xv[6] = {1, -2, 3, 0.5f, -4, 10}, want[6];
        for (int i = 0; i < 2 * t; i++) want[i] = xv[i] * xv[i];
        rt_tensor *in[2] = {tu_t(RT_DT_FLOAT, TU_SHAPE(t, 2), xv, t * 2), TU_I32(TU_SCALAR, t)};
        rt_tensor *out[2] = {0};
        ms_status st = run_graph(&b, 2, (const char *[]){"x", "t"}, in, 2,
                                 (const char *[]){"gather", "r/Exit_time"}, out);
        ck_assert_msg(st == MS_OK, "t=%d: %s", t, ms_errmsg());
        tu_check_f32(out[0], TU_SHAPE(t, 2), want, 2 * t, 0);
        TU_CHECK_INT(out[1], RT_DT_INT32, TU_SCALAR, t);
        tu_unref(in, 2);
        tu_unref(out, 2);
        arena_free();
    }
}
END_TEST

/* A frame of another shape (the Merge's second input is not a
 * NextIteration) fails the plan that reaches it with a message naming the
 * frame; the rest of the graph still runs. */
START_TEST(test_bad_frame) {
    mgb b;
    gb_init(&b);
    ph(&b, "x", RT_DT_FLOAT);
    float one = 1.0f;
    enter(&b, "bad/Enter", "x", "bad/while_context", 0, RT_DT_FLOAT);
    Tensorflow__NodeDef *d = add(&b, "bad/Merge", "Merge", IN("bad/Enter", "bad/Identity"));
    attr_type(d, "T", RT_DT_FLOAT);
    cst(&b, "bad/c", RT_DT_FLOAT, &one, NULL);
    op2(&b, "bad/Less", "Less", "bad/Merge", "bad/c", RT_DT_FLOAT);
    add(&b, "bad/LoopCond", "LoopCond", IN("bad/Less"));
    op2(&b, "bad/Switch", "Switch", "bad/Merge", "bad/LoopCond", RT_DT_FLOAT);
    op1(&b, "bad/Identity", "Identity", "bad/Switch:1", RT_DT_FLOAT);
    op1(&b, "bad/Exit", "Exit", "bad/Switch", RT_DT_FLOAT);
    op1(&b, "y", "Neg", "x", RT_DT_FLOAT);
    rt_tensor *in[1] = {TU_F32(TU_SCALAR, 2.0f)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"bad/Exit"}, out);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "TF1 while loop 'bad/while_context'") &&
                      strstr(ms_errmsg(), "NextIteration"),
                  "%s", ms_errmsg());
    st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"y"}, out);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(out[0], TU_SCALAR, 0, -2.0f);
    tu_unref(out, 1);
    tu_unref(in, 1);
    arena_free();
}
END_TEST

/* tf.cond(p, true_fn, false_fn) as TF1 builds it under prefix c: pivot
 * Switch(p, p) with switch_t / switch_f Identities, data switched on
 * pred_id = Identity(p), constants on the pivots by control edges, Merge
 * inputs [false, true]. true: x * 2; false: x + 10. */
static void build_cond(mgb *b, const char *c, const char *p, const char *x) {
    char sw[96], st[96], sf[96], pid[96], ms[96], ms1[100], my[96], mul[96], as[96], ay[96],
        addn[96], merge[96], cst_t[100], cst_f[100], sw1[100], sw0[100];
    snprintf(sw, sizeof sw, "%s/Switch", c);
    snprintf(sw1, sizeof sw1, "%s:1", sw);
    snprintf(sw0, sizeof sw0, "%s:0", sw);
    snprintf(st, sizeof st, "%s/switch_t", c);
    snprintf(sf, sizeof sf, "%s/switch_f", c);
    snprintf(pid, sizeof pid, "%s/pred_id", c);
    snprintf(ms, sizeof ms, "%s/mul/Switch", c);
    snprintf(ms1, sizeof ms1, "%s:1", ms);
    snprintf(my, sizeof my, "%s/mul/y", c);
    snprintf(mul, sizeof mul, "%s/mul", c);
    snprintf(as, sizeof as, "%s/add/Switch", c);
    snprintf(ay, sizeof ay, "%s/add/y", c);
    snprintf(addn, sizeof addn, "%s/add", c);
    snprintf(merge, sizeof merge, "%s/Merge", c);
    snprintf(cst_t, sizeof cst_t, "^%s", st);
    snprintf(cst_f, sizeof cst_f, "^%s", sf);
    float two = 2.0f, ten = 10.0f;
    op2(b, sw, "Switch", p, p, RT_DT_BOOL);
    op1(b, st, "Identity", sw1, RT_DT_BOOL);
    op1(b, sf, "Identity", sw0, RT_DT_BOOL);
    op1(b, pid, "Identity", p, RT_DT_BOOL);
    op2(b, ms, "Switch", x, pid, RT_DT_FLOAT);
    cst(b, my, RT_DT_FLOAT, &two, cst_t);
    op2(b, mul, "Mul", ms1, my, RT_DT_FLOAT);
    op2(b, as, "Switch", x, pid, RT_DT_FLOAT);
    cst(b, ay, RT_DT_FLOAT, &ten, cst_f);
    op2(b, addn, "AddV2", as, ay, RT_DT_FLOAT);
    Tensorflow__NodeDef *d = add(b, merge, "Merge", IN(addn, mul));
    attr_type(d, "T", RT_DT_FLOAT);
    attr_int(d, "N", 2);
}

START_TEST(test_cond) {
    for (int p = 0; p < 2; p++) {
        mgb b;
        gb_init(&b);
        ph(&b, "x", RT_DT_FLOAT);
        ph(&b, "p", RT_DT_BOOL);
        build_cond(&b, "cond", "p", "x");
        rt_tensor *in[2] = {TU_F32(TU_SCALAR, 3.0f), TU_BOOL(TU_SCALAR, (uint8_t)p)};
        rt_tensor *out[2] = {0};
        ms_status st = run_graph(&b, 2, (const char *[]){"x", "p"}, in, 2,
                                 (const char *[]){"cond/Merge:0", "cond/Merge:1"}, out);
        ck_assert_msg(st == MS_OK, "p=%d: %s", p, ms_errmsg());
        TU_CHECK_F32(out[0], TU_SCALAR, 0, p ? 6.0f : 13.0f); /* 3 * 2 or 3 + 10 */
        TU_CHECK_INT(out[1], RT_DT_INT32, TU_SCALAR, p);    /* the Merge input taken */
        tu_unref(in, 2);
        tu_unref(out, 2);
        arena_free();
    }
}
END_TEST

/* A cond in a while body: while i < n { acc = i < k ? acc * 2 : acc + 10 }.
 * n = 4, k = 2, acc = 1: 2, 4, 14, 24. */
/* The op scan of a converted cond lists both branches' ops, not its
 * Switch / Merge machinery. */
START_TEST(test_cond_opscan) {
    mgb b;
    gb_init(&b);
    ph(&b, "x", RT_DT_FLOAT);
    ph(&b, "p", RT_DT_BOOL);
    build_cond(&b, "cond", "p", "x");
    kn_backend *be = kn_cpu_backend_new(1);
    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b.mg, be, rt_model_host_ops, &g), MS_OK);
    ck_assert_int_eq(rt_tf1_loops_convert(g), MS_OK);
    rt_opscan *s = NULL;
    ck_assert_int_eq(rt_opscan_named(g, (const char *[]){"x", "p"}, 2,
                                     (const char *[]){"cond/Merge"}, 1, &s),
                     MS_OK);
    int mul = 0, addv2 = 0, machinery = 0;
    for (int i = 0; i < s->n; i++) {
        mul |= strcmp(s->ops[i].op, "Mul") == 0;
        addv2 |= strcmp(s->ops[i].op, "AddV2") == 0;
        machinery |= strcmp(s->ops[i].op, "Switch") == 0 || strcmp(s->ops[i].op, "Merge") == 0;
    }
    ck_assert_msg(mul && addv2 && !machinery && s->nunsupported == 0, "mul %d add %d switch %d "
                  "unsupported %d", mul, addv2, machinery, s->nunsupported);
    rt_opscan_free(s);
    rt_graph_free(g);
    kn_backend_free(be);
    arena_free();
}
END_TEST

START_TEST(test_cond_in_loop) {
    mgb b;
    gb_init(&b);
    ph(&b, "n", RT_DT_INT32);
    ph(&b, "k", RT_DT_INT32);
    ph(&b, "acc", RT_DT_FLOAT);
    int32_t zero = 0, one = 1;
    cst(&b, "i0", RT_DT_INT32, &zero, NULL);
    enter(&b, "w/Enter_n", "n", "w/while_context", 1, RT_DT_INT32);
    enter(&b, "w/Enter_k", "k", "w/while_context", 1, RT_DT_INT32);
    loop_var(&b, "w", "i", "i0", "w/add", RT_DT_INT32);
    loop_var(&b, "w", "acc", "acc", "w/cond/Merge", RT_DT_FLOAT);
    op2(&b, "w/Less", "Less", "w/Merge_i", "w/Enter_n", RT_DT_INT32);
    add(&b, "w/LoopCond", "LoopCond", IN("w/Less"));
    cst(&b, "w/one", RT_DT_INT32, &one, "^w/Identity_i");
    op2(&b, "w/add", "AddV2", "w/Identity_i", "w/one", RT_DT_INT32);
    op2(&b, "w/small", "Less", "w/Identity_i", "w/Enter_k", RT_DT_INT32);
    build_cond(&b, "w/cond", "w/small", "w/Identity_acc");
    rt_tensor *in[3] = {TU_I32(TU_SCALAR, 4), TU_I32(TU_SCALAR, 2), TU_F32(TU_SCALAR, 1.0f)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 3, (const char *[]){"n", "k", "acc"}, in, 1,
                             (const char *[]){"w/Exit_acc"}, out);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(out[0], TU_SCALAR, 0, 24.0f);
    tu_unref(in, 3);
    tu_unref(out, 1);
    arena_free();
}
END_TEST

/* A lone Enter (no loop) and a Merge that is no tf.cond (one input comes
 * from no Switch): clear refusals naming the node. */
START_TEST(test_refused) {
    mgb b;
    gb_init(&b);
    ph(&b, "x", RT_DT_FLOAT);
    ph(&b, "p", RT_DT_BOOL);
    enter(&b, "lone/Enter", "x", "lone/while_context", 0, RT_DT_FLOAT);
    op2(&b, "cond/Switch", "Switch", "x", "p", RT_DT_FLOAT);
    Tensorflow__NodeDef *d = add(&b, "cond/Merge", "Merge", IN("x", "cond/Switch:1"));
    attr_type(d, "T", RT_DT_FLOAT);
    rt_tensor *in[2] = {TU_F32(TU_SCALAR, 1.0f), TU_BOOL(TU_SCALAR, 1)};
    rt_tensor *out[1] = {0};
    ms_status st = run_graph(&b, 1, (const char *[]){"x"}, in, 1, (const char *[]){"lone/Enter"}, out);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "TF1 while loop 'lone/while_context'") &&
                      strstr(ms_errmsg(), "'lone/Enter'"),
                  "%s", ms_errmsg());
    st = run_graph(&b, 2, (const char *[]){"x", "p"}, in, 1, (const char *[]){"cond/Merge"}, out);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "TF1 cond dcmserve could not convert") &&
                      strstr(ms_errmsg(), "'cond/"),
                  "%s", ms_errmsg());
    tu_unref(in, 2);
    arena_free();
}
END_TEST

/* The op scan of a converted loop lists the frame's ops (not its Merge /
 * Switch machinery) and finds an unsupported op inside the body. */
START_TEST(test_opscan) {
    mgb b;
    build_counter(&b);
    op1(&b, "w/mystery", "NoSuchOp9", "w/Identity_acc", RT_DT_FLOAT);
    /* the body's mul now reads the unknown op */
    for (size_t i = 0; i < b.gd.n_node; i++)
        if (strcmp(g_nodes[i]->name, "w/mul") == 0) g_nodes[i]->input[0] = S("w/mystery");
    kn_backend *be = kn_cpu_backend_new(1);
    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b.mg, be, rt_model_host_ops, &g), MS_OK);
    ck_assert_int_eq(rt_tf1_loops_convert(g), MS_OK);
    rt_opscan *s = NULL;
    ck_assert_int_eq(rt_opscan_named(g, (const char *[]){"n", "acc"}, 2, (const char *[]){"out"}, 1,
                                     &s),
                     MS_OK);
    int saw_mul = 0, saw_mystery = 0, saw_switch = 0, saw_enter = 0;
    for (int i = 0; i < s->n; i++) {
        saw_mul |= strcmp(s->ops[i].op, "Mul") == 0;
        saw_enter |= strcmp(s->ops[i].op, "Enter") == 0 && s->ops[i].supported;
        saw_switch |= strcmp(s->ops[i].op, "Switch") == 0 || strcmp(s->ops[i].op, "Merge") == 0;
        if (strcmp(s->ops[i].op, "NoSuchOp9") == 0)
            saw_mystery = !s->ops[i].supported && s->ops[i].nnodes == 1 &&
                          strcmp(s->ops[i].nodes[0], "w/mystery") == 0;
    }
    ck_assert_msg(saw_mul && saw_mystery && saw_enter && !saw_switch, "mul %d mystery %d enter %d "
                  "switch %d", saw_mul, saw_mystery, saw_enter, saw_switch);
    ck_assert_int_eq(s->nunsupported, 1);
    rt_opscan_free(s);
    rt_edge f[2], o;
    ck_assert_int_eq(rt_graph_tensor(g, "n", &f[0]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "acc", &f[1]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "out", &o), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, f, 2, &o, 1, NULL, 0, &p);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "NoSuchOp9") && strstr(ms_errmsg(), "w/while_context"), "%s",
                  ms_errmsg());
    rt_graph_free(g);
    kn_backend_free(be);
    arena_free();
}
END_TEST

/* ---- a TF1 RNN-style SavedModel, loaded as the daemon loads it ---- */

static Tensorflow__NodeDef *gb_op(rt_gb *g, const char *op, const char *name,
                                  const char *const *in, rt_dtype t) {
    Tensorflow__NodeDef *d = rt_gb_node(g, op, name);
    for (int i = 0; in && in[i]; i++) rt_gb_input(g, d, in[i]);
    if (t != RT_DT_INVALID) rt_gb_attr_type(g, d, "T", t);
    return d;
}

static void gb_enter(rt_gb *g, const char *name, const char *x, int constant, rt_dtype t) {
    Tensorflow__NodeDef *d = gb_op(g, "Enter", name, IN(x), t);
    rt_gb_attr_str(g, d, "frame_name", "rnn/while/while_context");
    rt_gb_attr_b(g, d, "is_constant", constant);
    rt_gb_attr_i(g, d, "parallel_iterations", 32);
}

static void gb_loop_var(rt_gb *g, const char *v, const char *init, const char *next, rt_dtype t) {
    char e[64], m[64], s[64], s1[80], id[64], ni[64], x[64];
    snprintf(e, sizeof e, "rnn/while/Enter_%s", v);
    snprintf(m, sizeof m, "rnn/while/Merge_%s", v);
    snprintf(s, sizeof s, "rnn/while/Switch_%s", v);
    snprintf(s1, sizeof s1, "%s:1", s);
    snprintf(id, sizeof id, "rnn/while/Identity_%s", v);
    snprintf(ni, sizeof ni, "rnn/while/NextIteration_%s", v);
    snprintf(x, sizeof x, "rnn/while/Exit_%s", v);
    gb_enter(g, e, init, 0, t);
    rt_gb_attr_i(g, gb_op(g, "Merge", m, IN(e, ni), t), "N", 2);
    gb_op(g, "Switch", s, IN(m, "rnn/while/LoopCond"), t);
    gb_op(g, "Identity", id, IN(s1), t);
    gb_op(g, "NextIteration", ni, IN(next), t);
    gb_op(g, "Exit", x, IN(s), t);
}

/* h <- relu(h W + b), `steps` times, W and b TF1 variables read inside the
 * loop through invariant Enters, restored by the saver graph; the loader's
 * fusion pass runs over the converted graph (its MatMul / BiasAdd / Relu
 * chain is what it fuses). */
START_TEST(test_savedmodel) {
    char tmpl[] = "/tmp/check_tf1loop_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    char dir[600];
    snprintf(dir, sizeof dir, "%s/1", tmpl);
    rt_gb *g = NULL;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape hs = TU_SHAPE(1, 2), sc = TU_SCALAR;
    rt_gb_placeholder(g, "h0", RT_DT_FLOAT, &hs);
    rt_gb_placeholder(g, "steps", RT_DT_INT32, &sc);
    rt_tensor *w = TU_F32(TU_SHAPE(2, 2), 0.5f, -1.0f, 0.25f, 2.0f);
    rt_tensor *bias = TU_F32(TU_SHAPE(2), 0.1f, -0.3f);
    rt_tensor *zero = TU_I32(TU_SCALAR, 0), *one = TU_I32(TU_SCALAR, 1);
    rt_gb_variable(g, "W", w);
    rt_gb_variable(g, "b", bias);
    rt_gb_const(g, "rnn/i0", zero);
    gb_enter(g, "rnn/while/Enter_W", "W/read", 1, RT_DT_FLOAT);
    gb_enter(g, "rnn/while/Enter_bias", "b/read", 1, RT_DT_FLOAT);
    gb_enter(g, "rnn/while/Enter_steps", "steps", 1, RT_DT_INT32);
    gb_loop_var(g, "i", "rnn/i0", "rnn/while/add", RT_DT_INT32);
    gb_loop_var(g, "h", "h0", "rnn/while/relu", RT_DT_FLOAT);
    gb_op(g, "Less", "rnn/while/Less", IN("rnn/while/Merge_i", "rnn/while/Enter_steps"),
          RT_DT_INT32);
    gb_op(g, "LoopCond", "rnn/while/LoopCond", IN("rnn/while/Less"), RT_DT_INVALID);
    Tensorflow__NodeDef *c1 = rt_gb_const(g, "rnn/while/one", one);
    rt_gb_control_input(g, c1, "rnn/while/Identity_i");
    gb_op(g, "AddV2", "rnn/while/add", IN("rnn/while/Identity_i", "rnn/while/one"), RT_DT_INT32);
    rt_gb_matmul(g, "rnn/while/mm", "rnn/while/Identity_h", "rnn/while/Enter_W", 0, 0,
                 RT_DT_FLOAT);
    gb_op(g, "BiasAdd", "rnn/while/ba", IN("rnn/while/mm", "rnn/while/Enter_bias"), RT_DT_FLOAT);
    gb_op(g, "Relu", "rnn/while/relu", IN("rnn/while/ba"), RT_DT_FLOAT);
    gb_op(g, "Identity", "y", IN("rnn/while/Exit_h"), RT_DT_FLOAT);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "h0", "h0:0", RT_DT_FLOAT, &hs);
    rt_gb_sig_input(g, sig, "steps", "steps:0", RT_DT_INT32, &sc);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &hs);
    ck_assert_msg(rt_savedmodel_write(dir, g) == MS_OK, "%s", ms_errmsg());
    rt_gb_free(g);

    kn_backend *be = kn_cpu_backend_new(1);
    rt_model *m = NULL;
    const char *tags[] = {"serve"};
    ck_assert_msg(rt_model_load(dir, tags, 1, be, &m) == MS_OK, "load: %s", ms_errmsg());
    /* By hand: h0 = [1, -2]; h W = [0, -5], + b = [0.1, -5.3], relu [0.1, 0];
     * then [0.05, -0.1] + b -> [0.15, 0]; then [0.075, -0.15] + b -> [0.175, 0]. */
    const struct { int steps; float y0, y1; } want[] = {
        {0, 1.0f, -2.0f}, {1, 0.1f, 0.0f}, {3, 0.175f, 0.0f}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        rt_tensor *h0 = TU_F32(TU_SHAPE(1, 2), 1.0f, -2.0f), *st = TU_I32(TU_SCALAR, want[k].steps);
        rt_feed f[2] = {{"h0:0", h0}, {"steps:0", st}};
        const char *fetch = "y:0";
        rt_tensor *y = NULL;
        ck_assert_msg(rt_model_run(m, f, 2, &fetch, 1, NULL, 0, NULL, &y) == MS_OK, "run: %s",
                      ms_errmsg());
        TU_CHECK_F32(y, TU_SHAPE(1, 2), 1e-6, want[k].y0, want[k].y1);
        rt_tensor_unref(y);
        rt_tensor_unref(h0);
        rt_tensor_unref(st);
    }
    rt_model_unref(m);
    kn_backend_free(be);
    rt_tensor_unref(w);
    rt_tensor_unref(bias);
    rt_tensor_unref(zero);
    rt_tensor_unref(one);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"counter", test_counter},   {"zero_trip", test_zero_trip},
        {"nested", test_nested},     {"tensor_array_loop", test_tensor_array_loop},
        {"bad_frame", test_bad_frame}, {"refused", test_refused},
        {"opscan", test_opscan},     {"savedmodel", test_savedmodel},
        {"cond", test_cond},         {"cond_in_loop", test_cond_in_loop},
        {"cond_opscan", test_cond_opscan},
    };
    return tu_suite_main("tf1loop", cases, sizeof cases / sizeof cases[0]);
}
