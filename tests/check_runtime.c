/* check_runtime.c - tensors, TensorProto conversion, the graph executor
 * (pruning, feeds that cut the graph, control edges, cycles, missing kernels)
 * and the thread pool. Graphs use host ops only, so these tests do not depend
 * on the CPU kernels. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kn_threadpool.h"
#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_tensor_proto.h"

/* ---- tiny GraphDef builder (all memory in one list, freed at the end) ---- */
#define MAXN 32
typedef struct gb {
    Tensorflow__MetaGraphDef mg;
    Tensorflow__GraphDef gd;
    Tensorflow__NodeDef nodes[MAXN];
    Tensorflow__NodeDef *nodep[MAXN];
    char *inputs[MAXN][8];
    Tensorflow__NodeDef__AttrEntry attr_e[MAXN];
    Tensorflow__NodeDef__AttrEntry *attr_p[MAXN];
    Tensorflow__AttrValue attr_v[MAXN];
    Tensorflow__TensorProto tp[MAXN];
    Tensorflow__TensorShapeProto tsp[MAXN];
    float fval[MAXN];
    int n;
} gb;

static void gb_init(gb *b) {
    memset(b, 0, sizeof(*b));
    tensorflow__meta_graph_def__init(&b->mg);
    tensorflow__graph_def__init(&b->gd);
    b->mg.graph_def = &b->gd;
}

static Tensorflow__NodeDef *gb_node(gb *b, const char *name, const char *op, const char *in0,
                                    const char *in1) {
    int i = b->n++;
    Tensorflow__NodeDef *d = &b->nodes[i];
    tensorflow__node_def__init(d);
    d->name = (char *)name;
    d->op = (char *)op;
    if (in0) b->inputs[i][d->n_input++] = (char *)in0;
    if (in1) b->inputs[i][d->n_input++] = (char *)in1;
    d->input = b->inputs[i];
    b->nodep[i] = d;
    b->gd.node = b->nodep;
    b->gd.n_node = (size_t)b->n;
    return d;
}

/* A float scalar Const. */
static void gb_const(gb *b, const char *name, float v) {
    Tensorflow__NodeDef *d = gb_node(b, name, "Const", NULL, NULL);
    int i = b->n - 1;
    tensorflow__tensor_shape_proto__init(&b->tsp[i]);
    tensorflow__tensor_proto__init(&b->tp[i]);
    b->fval[i] = v;
    b->tp[i].dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    b->tp[i].tensor_shape = &b->tsp[i];
    b->tp[i].float_val = &b->fval[i];
    b->tp[i].n_float_val = 1;
    tensorflow__attr_value__init(&b->attr_v[i]);
    b->attr_v[i].value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    b->attr_v[i].tensor = &b->tp[i];
    tensorflow__node_def__attr_entry__init(&b->attr_e[i]);
    b->attr_e[i].key = "value";
    b->attr_e[i].value = &b->attr_v[i];
    b->attr_p[i] = &b->attr_e[i];
    d->attr = &b->attr_p[i];
    d->n_attr = 1;
}

static float scalar(const rt_tensor *t) {
    return ((const float *)t->data)[0];
}

/* ---- tests ---- */

START_TEST(test_tensor_basics) {
    rt_shape s = {2, {2, 3}};
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    ck_assert_int_eq(t->nelem, 6);
    ck_assert_uint_eq(rt_tensor_nbytes(t), 24);
    for (int i = 0; i < 6; i++) ck_assert(rt_tensor_f32(t)[i] == 0.0f);
    rt_shape s2 = {1, {6}};
    rt_tensor *v;
    ck_assert_int_eq(rt_tensor_view(t, &s2, &v), MS_OK);
    rt_tensor_f32(t)[5] = 7.0f;
    ck_assert(rt_tensor_f32(v)[5] == 7.0f); /* shares the buffer */
    rt_shape bad = {1, {5}};
    rt_tensor *w = NULL;
    ck_assert_int_eq(rt_tensor_view(t, &bad, &w), MS_EINVAL);
    ck_assert_ptr_null(w);
    rt_tensor *c;
    ck_assert_int_eq(rt_tensor_clone(t, &c), MS_OK);
    ck_assert(rt_tensor_equal(c, t));
    rt_tensor_f32(c)[0] = 1.0f;
    ck_assert(!rt_tensor_equal(c, t));
    char buf[64];
    ck_assert_str_eq(rt_shape_str(&s, buf, sizeof buf), "(2, 3)");
    rt_shape neg = {2, {-1, 3}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &neg, &w), MS_EINVAL);
    ck_assert_int_eq(rt_dtype_base(101), RT_DT_FLOAT);
    ck_assert_str_eq(rt_dtype_name(RT_DT_STRING), "DT_STRING");
    rt_tensor_unref(c);
    rt_tensor_unref(v);
    rt_tensor_unref(t);
}
END_TEST

START_TEST(test_strings) {
    rt_str in[2] = {{(const uint8_t *)"abc", 3}, {(const uint8_t *)"", 0}};
    rt_shape s = {1, {2}};
    rt_tensor *t, *c;
    ck_assert_int_eq(rt_tensor_new_strings(&s, in, &t), MS_OK);
    ck_assert_uint_eq(rt_tensor_strs(t)[0].len, 3);
    ck_assert(memcmp(rt_tensor_strs(t)[0].data, "abc", 3) == 0);
    ck_assert(rt_tensor_strs(t)[0].data != in[0].data); /* copied */
    ck_assert_int_eq(rt_tensor_clone(t, &c), MS_OK);
    ck_assert(rt_tensor_equal(t, c));
    rt_tensor_unref(c);
    rt_tensor_unref(t);
}
END_TEST

START_TEST(test_tensor_proto_roundtrip) {
    /* Typed field and tensor_content give the same tensor. */
    rt_shape s = {2, {2, 2}};
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT16, &s, &t), MS_OK);
    int16_t *d = t->data;
    d[0] = -3, d[1] = 0, d[2] = 300, d[3] = -32768;
    for (int content = 0; content < 2; content++) {
        Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
        ck_assert_int_eq(rt_tensor_to_proto(t, content, &p), MS_OK);
        ck_assert_uint_eq(p.n_int_val, content ? 0 : 4);
        size_t len = tensorflow__tensor_proto__get_packed_size(&p);
        uint8_t *buf = malloc(len);
        tensorflow__tensor_proto__pack(&p, buf);
        rt_tensor_proto_clear(&p);
        Tensorflow__TensorProto *q = tensorflow__tensor_proto__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(q);
        rt_tensor *r;
        ck_assert_int_eq(rt_tensor_from_proto(q, &r), MS_OK);
        ck_assert(rt_tensor_equal(r, t));
        rt_tensor_unref(r);
        tensorflow__tensor_proto__free_unpacked(q, NULL);
        free(buf);
    }
    rt_tensor_unref(t);
}
END_TEST

START_TEST(test_tensor_proto_broadcast_and_errors) {
    /* A single float_val fills the shape (TensorFlow's compact constants). */
    Tensorflow__TensorShapeProto__Dim dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dims[1] = {&dim};
    Tensorflow__TensorShapeProto sh = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    sh.dim = dims;
    sh.n_dim = 1;
    dim.size = 3;
    float vals[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
    p.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    p.tensor_shape = &sh;
    p.float_val = vals;
    p.n_float_val = 1;
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_from_proto(&p, &t), MS_OK);
    ck_assert(rt_tensor_f32(t)[2] == 1.5f);
    rt_tensor_unref(t);
    /* Too many values: an error, not a silent truncation. */
    p.n_float_val = 4;
    t = NULL;
    ck_assert_int_eq(rt_tensor_from_proto(&p, &t), MS_EINVAL);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "carries 4 values"));
    /* No values for a non-empty shape: never zero-filled. */
    p.n_float_val = 0;
    ck_assert_int_eq(rt_tensor_from_proto(&p, &t), MS_EINVAL);
    /* tensor_content of the wrong size. */
    uint8_t raw[8] = {0};
    p.tensor_content.data = raw;
    p.tensor_content.len = 8;
    ck_assert_int_eq(rt_tensor_from_proto(&p, &t), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "tensor_content has 8 bytes"));
    /* A -1 dim cannot carry data. */
    p.tensor_content.len = 0;
    dim.size = -1;
    p.n_float_val = 1;
    ck_assert_int_eq(rt_tensor_from_proto(&p, &t), MS_EINVAL);
}
END_TEST

/* x (Placeholder) -> a = Identity(x); c (Const 2); out = IdentityN(a, c). */
static void build_small(gb *b) {
    gb_init(b);
    gb_node(b, "x", "Placeholder", NULL, NULL);
    gb_node(b, "a", "Identity", "x", NULL);
    gb_const(b, "c", 2.0f);
    gb_node(b, "out", "IdentityN", "a", "c");
}

START_TEST(test_plan_feed_fetch) {
    gb b;
    build_small(&b);
    /* IdentityN's output count comes from attr T; give the node 2 outputs by
     * declaring the type list. */
    Tensorflow__AttrValue__ListValue lv = TENSORFLOW__ATTR_VALUE__LIST_VALUE__INIT;
    Tensorflow__DataType types[2] = {TENSORFLOW__DATA_TYPE__DT_FLOAT, TENSORFLOW__DATA_TYPE__DT_FLOAT};
    lv.type = types;
    lv.n_type = 2;
    Tensorflow__AttrValue av = TENSORFLOW__ATTR_VALUE__INIT;
    av.value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    av.list = &lv;
    Tensorflow__NodeDef__AttrEntry ae = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT;
    ae.key = "T";
    ae.value = &av;
    Tensorflow__NodeDef__AttrEntry *aep[1] = {&ae};
    b.nodes[3].attr = aep;
    b.nodes[3].n_attr = 1;

    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b.mg, NULL, rt_model_host_ops, &g), MS_OK);
    rt_edge fx, f0, f1;
    ck_assert_int_eq(rt_graph_tensor(g, "x:0", &fx), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "out:0", &f0), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "out:1", &f1), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "out:2", &f1), MS_ENOTFOUND);
    ck_assert_int_eq(rt_graph_tensor(g, "nope", &f1), MS_ENOTFOUND);
    ck_assert_int_eq(rt_graph_tensor(g, "out:1", &f1), MS_OK);
    rt_edge fetches[2] = {f0, f1};
    rt_plan *p;
    ck_assert_int_eq(rt_plan_build(g, &fx, 1, fetches, 2, NULL, 0, &p), MS_OK);
    rt_tensor *x, *outs[2];
    ck_assert_int_eq(rt_tensor_scalar_f32(5.0f, &x), MS_OK);
    kn_ctx ctx = {.nthreads = 1};
    ck_assert_int_eq(rt_plan_run(p, &ctx, NULL, &x, outs), MS_OK);
    ck_assert(scalar(outs[0]) == 5.0f);
    ck_assert(scalar(outs[1]) == 2.0f);
    rt_tensor_unref(outs[0]);
    rt_tensor_unref(outs[1]);
    rt_plan_free(p);

    /* Feeding "a" cuts x away: no feed for the placeholder is needed. */
    rt_edge fa;
    ck_assert_int_eq(rt_graph_tensor(g, "a", &fa), MS_OK);
    ck_assert_int_eq(rt_plan_build(g, &fa, 1, fetches, 1, NULL, 0, &p), MS_OK);
    ck_assert_int_eq(rt_plan_run(p, &ctx, NULL, &x, outs), MS_OK);
    ck_assert(scalar(outs[0]) == 5.0f);
    rt_tensor_unref(outs[0]);
    rt_plan_free(p);

    /* Without any feed the placeholder runs and says it needs a value. */
    ck_assert_int_eq(rt_plan_build(g, NULL, 0, fetches, 1, NULL, 0, &p), MS_OK);
    ck_assert_int_eq(rt_plan_run(p, &ctx, NULL, NULL, outs), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "placeholder 'x' must be fed"));
    rt_plan_free(p);
    rt_tensor_unref(x);
    rt_graph_free(g);
}
END_TEST

START_TEST(test_unknown_op_and_cycle) {
    gb b;
    gb_init(&b);
    gb_node(&b, "x", "Placeholder", NULL, NULL);
    gb_node(&b, "weird", "FrobnicateV9", "x", NULL);
    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b.mg, NULL, rt_model_host_ops, &g), MS_OK);
    rt_edge f;
    ck_assert_int_eq(rt_graph_tensor(g, "weird", &f), MS_OK);
    rt_plan *p = NULL;
    ck_assert_int_eq(rt_plan_build(g, NULL, 0, &f, 1, NULL, 0, &p), MS_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "FrobnicateV9"));
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "'weird'"));
    rt_graph_free(g);

    gb_init(&b);
    gb_node(&b, "a", "Identity", "b", NULL);
    gb_node(&b, "b", "Identity", "a", NULL);
    ck_assert_int_eq(rt_graph_build(&b.mg, NULL, rt_model_host_ops, &g), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "a", &f), MS_OK);
    ck_assert_int_eq(rt_plan_build(g, NULL, 0, &f, 1, NULL, 0, &p), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "cycle"));
    rt_graph_free(g);

    /* A dangling input name fails the build with the node named. */
    gb_init(&b);
    gb_node(&b, "a", "Identity", "missing", NULL);
    ck_assert_int_ne(rt_graph_build(&b.mg, NULL, rt_model_host_ops, &g), MS_OK);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "'a'"));
}
END_TEST

START_TEST(test_control_edges_and_variables) {
    /* v = VariableV2 (scalar float); init = Assign(v, c7); fetch v after ^init. */
    gb b;
    gb_init(&b);
    gb_const(&b, "c7", 7.0f);
    Tensorflow__NodeDef *v = gb_node(&b, "v", "VariableV2", NULL, NULL);
    Tensorflow__TensorShapeProto shp = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__AttrValue sav = TENSORFLOW__ATTR_VALUE__INIT;
    sav.value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    sav.shape = &shp;
    Tensorflow__NodeDef__AttrEntry se = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT;
    se.key = "shape";
    se.value = &sav;
    Tensorflow__NodeDef__AttrEntry *sep[1] = {&se};
    v->attr = sep;
    v->n_attr = 1;
    gb_node(&b, "init", "Assign", "v", "c7");
    gb_node(&b, "read", "Identity", "v", "^init");
    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b.mg, NULL, rt_model_host_ops, &g), MS_OK);
    rt_vars vars;
    rt_vars_init(&vars);
    kn_ctx ctx = {.nthreads = 1};
    rt_edge f;
    ck_assert_int_eq(rt_graph_tensor(g, "read", &f), MS_OK);
    rt_plan *p;
    ck_assert_int_eq(rt_plan_build(g, NULL, 0, &f, 1, NULL, 0, &p), MS_OK);
    ck_assert(rt_plan_stateful(p));
    rt_tensor *out;
    ck_assert_int_eq(rt_plan_run(p, &ctx, &vars, NULL, &out), MS_OK);
    ck_assert(scalar(out) == 7.0f); /* the control edge ran the Assign first */
    rt_tensor_unref(out);
    rt_plan_free(p);
    rt_vars_destroy(&vars);
    rt_graph_free(g);
}
END_TEST

static void count_fn(void *arg, int64_t b, int64_t e) {
    atomic_llong *sum = arg;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(sum, i);
}

START_TEST(test_threadpool) {
    for (int threads = 1; threads <= 4; threads++) {
        atomic_llong sum;
        atomic_init(&sum, 0);
        kn_parallel_for(threads, 100000, 16, count_fn, &sum);
        ck_assert_int_eq(atomic_load(&sum), (long long)100000 * 99999 / 2);
    }
}
END_TEST

/* The nice of thread `tid` of this process from /proc (field 19 of stat). */
static int thread_nice(const char *tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 1000;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    int field = 2, nice = 1000;
    for (; p != NULL && *p != '\0'; p++) {
        if (*p != ' ') continue;
        if (++field == 19) {
            nice = atoi(p + 1);
            break;
        }
    }
    return nice;
}

/* Pool threads take the nice set with kn_threadpool_set_nice, not that of
 * the thread that happened to start them (the server's warm-up runs on the
 * loader thread at the daemon's priority). Each test runs in its own process,
 * so this one's pool starts here (without fork, test_threadpool's 3 helpers
 * came first and at least 4 more start here). */
START_TEST(test_threadpool_nice) {
    int cur = getpriority(PRIO_PROCESS, 0);
    int want = cur + (19 - cur + 1) / 2; /* above ours: no privilege needed */
    kn_threadpool_set_nice(want);
    atomic_llong sum;
    atomic_init(&sum, 0);
    kn_parallel_for(8, 100000, 16, count_fn, &sum); /* more helpers than test_threadpool's */
    ck_assert_int_eq(atomic_load(&sum), (long long)100000 * 99999 / 2);
    char self[32];
    snprintf(self, sizeof self, "%d", (int)gettid());
    /* A helper takes the nice as it first runs: on a loaded machine one just
     * created may not have run yet (nor computed anything), so look again for
     * up to 5 s. */
    int others = 0, at_want = 0;
    for (int tries = 0; tries < 500 && at_want < 4; tries++) {
        if (tries > 0) usleep(10000);
        DIR *d = opendir("/proc/self/task");
        ck_assert_ptr_nonnull(d);
        others = at_want = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, self) == 0) continue;
            others++;
            if (thread_nice(e->d_name) == want) at_want++;
        }
        closedir(d);
    }
    ck_assert_int_eq(thread_nice(self), cur); /* the caller keeps its own */
    ck_assert_int_ge(at_want, 4); /* helpers it started (all 7 when this process is new) */
    ck_assert_int_ge(others, at_want);
    kn_threadpool_set_nice(-1);
}
END_TEST

START_TEST(test_pool_reuse) {
    kn_pool *pool = kn_pool_new();
    kn_ctx ctx = {.pool = pool, .nthreads = 1};
    rt_shape s = {1, {1000}};
    rt_tensor *a;
    ck_assert_int_eq(kn_ctx_output(&ctx, 0, RT_DT_FLOAT, &s, &a), MS_OK);
    void *first = a->data;
    rt_tensor_unref(a); /* back to the pool */
    ck_assert_int_eq(kn_ctx_output(&ctx, 0, RT_DT_FLOAT, &s, &a), MS_OK);
    ck_assert_ptr_eq(a->data, first); /* same memory again */
    kn_pool_release(pool);            /* a still alive: the pool waits for it */
    rt_tensor_unref(a);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, test_tensor_basics);
    tcase_add_test(tc, test_strings);
    tcase_add_test(tc, test_tensor_proto_roundtrip);
    tcase_add_test(tc, test_tensor_proto_broadcast_and_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("executor");
    tcase_add_test(tc, test_plan_feed_fetch);
    tcase_add_test(tc, test_unknown_op_and_cycle);
    tcase_add_test(tc, test_control_edges_and_variables);
    tcase_add_test(tc, test_pool_reuse);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_test(tc, test_threadpool);
    tcase_add_test(tc, test_threadpool_nice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
