/* check_fuse.c - load-time graph fusion (runtime/graph/rt_fuse.c): small graphs
 * built with the graph builder are loaded with the pass on and off
 * (DCMSERVE_GRAPH_FUSION) and run; the fused graph must have the expected
 * fused node under the last node's name and compute the same values as the
 * unfused one. Chains that must not fuse are checked too. Sums over
 * elementwise expressions (pattern 4) must give the same bits as unfused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_status.h"
#include "rt_exec.h"
#include "rt_fuse.h"
#include "rt_graph.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_dicom.h"

static kn_backend *be;
static rt_gb *gb;
static uint32_t rng_state;

static void setup(void) {
    be = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(be);
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    rng_state = 12345;
}

static void teardown(void) {
    rt_gb_free(gb);
    kn_backend_free(be);
    unsetenv("DCMSERVE_GRAPH_FUSION");
}

/* ---- building ---- */

/* Uniform in [-1, 1) from a fixed LCG, so every run sees the same data. */
static float rnd1(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static rt_tensor *rnd(rt_shape s) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = rnd1();
    return t;
}

#define SHAPE(...)                                                                                 \
    ((rt_shape){.rank = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                 \
                .dim = {__VA_ARGS__}})

static void cst(const char *name, rt_shape s) {
    rt_tensor *t = rnd(s);
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

static void ph(const char *name, rt_shape s) {
    rt_gb_placeholder(gb, name, RT_DT_FLOAT, &s);
}

/* While set, new nodes go into this function's body instead of the graph. */
static Tensorflow__FunctionDef *body;

static Tensorflow__NodeDef *new_node(const char *op, const char *name) {
    if (body == NULL) return rt_gb_node(gb, op, name);
    Tensorflow__NodeDef *n = rt_gb_alloc(gb, sizeof(*n));
    ck_assert_ptr_nonnull(n);
    tensorflow__node_def__init(n);
    n->op = rt_gb_strdup(gb, op);
    n->name = rt_gb_strdup(gb, name);
    ck_assert_uint_lt(body->n_node_def, 16);
    body->node_def[body->n_node_def++] = n;
    return n;
}

static Tensorflow__OpDef__ArgDef *arg_def(const char *name) {
    Tensorflow__OpDef__ArgDef *a = rt_gb_alloc(gb, sizeof(*a));
    tensorflow__op_def__arg_def__init(a);
    a->name = rt_gb_strdup(gb, name);
    a->type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    return a;
}

/* Starts function `fname` with float args args[0..nargs-1] and one output
 * "y", in the graph's library. */
static void begin_function(const char *fname, const char *const *args, int nargs) {
    Tensorflow__GraphDef *gd = rt_gb_graph(gb);
    Tensorflow__FunctionDefLibrary *lib = rt_gb_alloc(gb, sizeof(*lib));
    tensorflow__function_def_library__init(lib);
    body = rt_gb_alloc(gb, sizeof(*body));
    tensorflow__function_def__init(body);
    body->signature = rt_gb_alloc(gb, sizeof(*body->signature));
    tensorflow__op_def__init(body->signature);
    body->signature->name = rt_gb_strdup(gb, fname);
    body->signature->input_arg = rt_gb_alloc(gb, sizeof(void *) * (size_t)nargs);
    for (int i = 0; i < nargs; i++)
        body->signature->input_arg[i] = arg_def(args[i]);
    body->signature->n_input_arg = (size_t)nargs;
    body->signature->output_arg = rt_gb_alloc(gb, sizeof(void *));
    body->signature->output_arg[0] = arg_def("y");
    body->signature->n_output_arg = 1;
    body->node_def = rt_gb_alloc(gb, sizeof(void *) * 16);
    lib->function = rt_gb_alloc(gb, sizeof(void *));
    lib->function[0] = body;
    lib->n_function = 1;
    gd->library = lib;
}

/* Ends the function; its output "y" is tensor `ret` ("node:0"). */
static void end_function(const char *ret) {
    Tensorflow__FunctionDef__RetEntry *r = rt_gb_alloc(gb, sizeof(*r));
    tensorflow__function_def__ret_entry__init(r);
    r->key = rt_gb_strdup(gb, "y");
    r->value = rt_gb_strdup(gb, ret);
    body->ret = rt_gb_alloc(gb, sizeof(void *));
    body->ret[0] = r;
    body->n_ret = 1;
    body = NULL;
}

static Tensorflow__NodeDef *op2(const char *op, const char *name, const char *a, const char *b) {
    Tensorflow__NodeDef *n = new_node(op, name);
    rt_gb_input(gb, n, a);
    if (b) rt_gb_input(gb, n, b);
    rt_gb_attr_type(gb, n, "T", RT_DT_FLOAT);
    return n;
}

/* data_format of the convs and BiasAdds made next. */
static const char *layout = "NHWC";

/* Conv2D / DepthwiseConv2dNative in `layout`, the given stride and padding. */
static Tensorflow__NodeDef *conv(const char *op, const char *name, const char *x, const char *w,
                                 int stride, const char *pad) {
    Tensorflow__NodeDef *n = op2(op, name, x, w);
    int nchw = strcmp(layout, "NCHW") == 0;
    int64_t st[4] = {1, nchw ? 1 : stride, stride, nchw ? stride : 1};
    rt_gb_attr_ilist(gb, n, "strides", st, 4);
    rt_gb_attr_str(gb, n, "padding", pad);
    rt_gb_attr_str(gb, n, "data_format", layout);
    return n;
}

static Tensorflow__NodeDef *bias_add(const char *name, const char *x, const char *b) {
    Tensorflow__NodeDef *n = op2("BiasAdd", name, x, b);
    rt_gb_attr_str(gb, n, "data_format", layout);
    return n;
}

static Tensorflow__MetaGraphDef *meta(void) {
    Tensorflow__MetaGraphDef *mg = NULL;
    ms_status st = rt_gb_meta_graph(gb, &mg);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    return mg;
}

/* ---- loading and running ---- */

static rt_graph *load(const Tensorflow__MetaGraphDef *mg, int fuse) {
    setenv("DCMSERVE_GRAPH_FUSION", fuse ? "1" : "0", 1);
    rt_graph *g = NULL;
    ms_status st = rt_graph_build(mg, be, rt_model_host_ops, &g);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    if (rt_fuse_enabled()) st = rt_fuse_graph(g, NULL);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    return g;
}

typedef struct feeds {
    int n;
    const char *name[4];
    rt_tensor *val[4];
} feeds;

static void add_feed(feeds *f, const char *name, rt_tensor *t) {
    f->name[f->n] = name;
    f->val[f->n++] = t;
}

static void free_feeds(feeds *f) {
    for (int i = 0; i < f->n; i++)
        rt_tensor_unref(f->val[i]);
}

static int g_threads = 1; /* intra-op threads of run() */

static rt_tensor *run(rt_graph *g, const feeds *f, const char *fetch) {
    rt_edge fe[4], fo;
    for (int i = 0; i < f->n; i++)
        ck_assert_int_eq(rt_graph_tensor(g, f->name[i], &fe[i]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, fetch, &fo), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, fe, f->n, &fo, 1, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan for %s: %s", fetch, ms_errmsg());
    kn_ctx ctx = {.nthreads = g_threads};
    rt_tensor *out = NULL;
    st = rt_plan_run(p, &ctx, NULL, f->val, &out);
    ck_assert_msg(st == MS_OK, "run of %s: %s", fetch, ms_errmsg());
    rt_plan_free(p);
    return out;
}

/* Same shape and values within 1e-5 relative to the magnitude. */
static void check_close(const rt_tensor *got, const rt_tensor *want) {
    ck_assert_int_eq(got->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(want->dtype, RT_DT_FLOAT);
    ck_assert_msg(rt_shape_equal(&got->shape, &want->shape), "shapes differ");
    const float *a = got->data, *b = want->data;
    double maxabs = 0, maxdiff = 0;
    for (int64_t i = 0; i < want->nelem; i++) {
        maxabs = fmax(maxabs, fabs(b[i]));
        maxdiff = fmax(maxdiff, fabs((double)a[i] - b[i]));
    }
    ck_assert_msg(maxdiff <= 1e-5 * fmax(1.0, maxabs), "max abs diff %g (magnitude %g)", maxdiff,
                  maxabs);
}

/* Runs fetch with fusion off and on and compares. */
static void same_both_ways(const Tensorflow__MetaGraphDef *mg, const feeds *f, const char *fetch) {
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    rt_tensor *want = run(g0, f, fetch), *got = run(g1, f, fetch);
    check_close(got, want);
    rt_tensor_unref(want);
    rt_tensor_unref(got);
    rt_graph_free(g0);
    rt_graph_free(g1);
}

static const rt_gnode *node(const rt_graph *g, const char *name) {
    int i = rt_graph_find(g, name);
    ck_assert_msg(i >= 0, "no node %s", name);
    return &g->nodes[i];
}

/* Node `name` is op with fused_ops ops[0..nops-1] (comma-joined in `ops`),
 * num_args and nin data inputs. */
static void check_fused(const rt_graph *g, const char *name, const char *op, const char *ops,
                        int num_args) {
    const rt_gnode *n = node(g, name);
    ck_assert_str_eq(n->kn.op, op);
    const char *v[4];
    size_t len[4];
    int cnt = kn_attr_slist(&n->kn, "fused_ops", v, len, 4);
    char joined[128] = "";
    for (int i = 0; i < cnt && i < 4; i++)
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%.*s", i ? "," : "",
                 (int)len[i], v[i]);
    ck_assert_str_eq(joined, ops);
    ck_assert_int_eq(kn_attr_i(&n->kn, "num_args", -1), num_args);
    ck_assert_int_eq(n->nin, 2 + num_args);
}

/* ---- pattern 1: conv / depthwise / matmul + BiasAdd + activation ---- */

START_TEST(conv2d_bias_relu) {
    ph("x", SHAPE(2, 7, 6, 3));
    cst("w", SHAPE(3, 3, 3, 5));
    cst("b", SHAPE(5));
    conv("Conv2D", "conv", "x", "w", 2, "SAME");
    bias_add("bias", "conv", "b");
    op2("Relu", "relu", "bias", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    ck_assert_str_eq(node(g0, "relu")->kn.op, "Relu");
    check_fused(g1, "relu", "_FusedConv2D", "BiasAdd,Relu", 1);
    /* The conv's attributes came along. */
    ck_assert(kn_attr_s_eq(&node(g1, "relu")->kn, "padding", "SAME", ""));
    int64_t st[4];
    ck_assert_int_eq(kn_attr_ilist(&node(g1, "relu")->kn, "strides", st, 4), 4);
    ck_assert_int_eq(st[1], 2);
    /* Earlier chain nodes stay, marked absorbed. */
    ck_assert_str_eq(node(g1, "conv")->kn.op, "Conv2D");
    ck_assert_int_eq(node(g1, "conv")->fused_into, rt_graph_find(g1, "relu"));
    rt_graph_free(g0);
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(2, 7, 6, 3)));
    same_both_ways(mg, &f, "relu:0");
    same_both_ways(mg, &f, "bias:0"); /* an absorbed node fetched keeps its value */
    free_feeds(&f);
}
END_TEST

START_TEST(depthwise_bias_relu6) {
    ph("x", SHAPE(1, 6, 6, 4));
    cst("w", SHAPE(3, 3, 4, 2));
    cst("b", SHAPE(8));
    conv("DepthwiseConv2dNative", "dw", "x", "w", 1, "VALID");
    bias_add("bias", "dw", "b");
    op2("Relu6", "act", "bias", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "act", "_FusedDepthwiseConv2dNative", "BiasAdd,Relu6", 1);
    rt_graph_free(g1);
    feeds f = {0};
    rt_tensor *x = rnd(SHAPE(1, 6, 6, 4));
    float *xv = x->data;
    for (int64_t i = 0; i < x->nelem; i++)
        xv[i] *= 4.0f; /* some outputs above 6 */
    add_feed(&f, "x", x);
    same_both_ways(mg, &f, "act");
    free_feeds(&f);
}
END_TEST

START_TEST(matmul_bias_relu) {
    ph("x", SHAPE(3, 5));
    cst("w", SHAPE(4, 5));
    cst("b", SHAPE(4));
    Tensorflow__NodeDef *mm = op2("MatMul", "mm", "x", "w");
    rt_gb_attr_b(gb, mm, "transpose_a", 0);
    rt_gb_attr_b(gb, mm, "transpose_b", 1);
    bias_add("bias", "mm", "b");
    op2("Relu", "relu", "bias", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "relu", "_FusedMatMul", "BiasAdd,Relu", 1);
    ck_assert(kn_attr_b(&node(g1, "relu")->kn, "transpose_b", 0));
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(3, 5)));
    same_both_ways(mg, &f, "relu");
    free_feeds(&f);
}
END_TEST

START_TEST(leaky_relu_alpha) {
    ph("x", SHAPE(1, 5, 5, 2));
    cst("w", SHAPE(1, 1, 2, 3));
    cst("b", SHAPE(3));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    Tensorflow__NodeDef *lr = op2("LeakyRelu", "lrelu", "bias", NULL);
    rt_gb_attr_f(gb, lr, "alpha", 0.37f);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "lrelu", "_FusedConv2D", "BiasAdd,LeakyRelu", 1);
    ck_assert_float_eq_tol(kn_attr_f(&node(g1, "lrelu")->kn, "leakyrelu_alpha", 0), 0.37f, 1e-7);
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 5, 5, 2)));
    same_both_ways(mg, &f, "lrelu"); /* the default 0.2 would differ on negatives */
    free_feeds(&f);
}
END_TEST

/* ---- pattern 2: + Add (+ activation) ---- */

/* conv + bias + AddV2(.., skip) + Relu, skip on side `side` of the Add. */
static const Tensorflow__MetaGraphDef *residual(int side, rt_shape skip_shape) {
    ph("x", SHAPE(2, 6, 6, 3));
    ph("skip", skip_shape);
    cst("w", SHAPE(3, 3, 3, 4));
    cst("b", SHAPE(4));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    if (side == 0)
        op2("AddV2", "add", "skip", "bias");
    else
        op2("AddV2", "add", "bias", "skip");
    op2("Relu", "relu", "add", NULL);
    return meta();
}

static void residual_case(int side, rt_shape skip_shape) {
    const Tensorflow__MetaGraphDef *mg = residual(side, skip_shape);
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "relu", "_FusedConv2D", "BiasAdd,Add,Relu", 2);
    const rt_gnode *r = node(g1, "relu");
    ck_assert_int_eq(r->in[3].node, rt_graph_find(g1, "skip")); /* the addend is last */
    ck_assert_int_eq(r->in[2].node, rt_graph_find(g1, "b"));
    ck_assert_int_eq(node(g1, "add")->fused_into, rt_graph_find(g1, "relu"));
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(2, 6, 6, 3)));
    add_feed(&f, "skip", rnd(skip_shape));
    same_both_ways(mg, &f, "relu:0");
    same_both_ways(mg, &f, "add:0"); /* the intermediate Add output */
    free_feeds(&f);
}

START_TEST(add_first) {
    residual_case(0, SHAPE(2, 6, 6, 4));
}
END_TEST

START_TEST(add_second) {
    residual_case(1, SHAPE(2, 6, 6, 4));
}
END_TEST

START_TEST(add_broadcast_vector) {
    residual_case(1, SHAPE(4)); /* a [C] addend, broadcast after the GEMM */
}
END_TEST

/* NCHW: the addend of the output's shape, then a [C,1,1] one. */
static void residual_nchw(rt_shape skip_shape) {
    layout = "NCHW";
    ph("x", SHAPE(2, 3, 6, 5));
    ph("skip", skip_shape);
    cst("w", SHAPE(3, 3, 3, 4));
    cst("b", SHAPE(4));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    op2("Add", "add", "bias", "skip");
    op2("Relu", "relu", "add", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "relu", "_FusedConv2D", "BiasAdd,Add,Relu", 2);
    ck_assert(kn_attr_s_eq(&node(g1, "relu")->kn, "data_format", "NCHW", ""));
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(2, 3, 6, 5)));
    add_feed(&f, "skip", rnd(skip_shape));
    same_both_ways(mg, &f, "relu");
    free_feeds(&f);
    layout = "NHWC";
}

START_TEST(add_nchw) {
    residual_nchw(SHAPE(2, 4, 6, 5));
}
END_TEST

START_TEST(add_nchw_broadcast) {
    residual_nchw(SHAPE(4, 1, 1));
}
END_TEST

/* A ResNet block with a dynamic batch: the addend is the block input, whose
 * shape equals the conv output's only through the shared batch symbol. Also
 * the importer's form: a prefused _FusedConv2D [BiasAdd] + AddV2 + Relu. */
START_TEST(resnet_block_dynamic_batch) {
    ph("x", SHAPE(-1, 8, 8, 4));
    cst("w0", SHAPE(3, 3, 4, 4));
    cst("b0", SHAPE(4));
    cst("w1", SHAPE(3, 3, 4, 4));
    cst("b1", SHAPE(4));
    conv("Conv2D", "c0", "x", "w0", 1, "SAME");
    bias_add("ba0", "c0", "b0");
    op2("Relu", "y0", "ba0", NULL);
    Tensorflow__NodeDef *c1 = conv("_FusedConv2D", "c1", "y0", "w1", 1, "SAME");
    rt_gb_input(gb, c1, "b1");
    const char *fo[] = {"BiasAdd"};
    rt_gb_attr_strlist(gb, c1, "fused_ops", fo, 1);
    rt_gb_attr_i(gb, c1, "num_args", 1);
    op2("AddV2", "add", "c1", "y0");
    op2("Relu", "y1", "add", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "y0", "_FusedConv2D", "BiasAdd,Relu", 1);
    check_fused(g1, "y1", "_FusedConv2D", "BiasAdd,Add,Relu", 2);
    ck_assert_int_eq(node(g1, "y1")->in[3].node, rt_graph_find(g1, "y0"));
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(3, 8, 8, 4)));
    same_both_ways(mg, &f, "y1");
    free_feeds(&f);
}
END_TEST

START_TEST(batchnorm_add) {
    ph("x", SHAPE(1, 5, 5, 3));
    ph("skip", SHAPE(1, 5, 5, 2));
    cst("w", SHAPE(3, 3, 3, 2));
    cst("scale", SHAPE(2));
    cst("offset", SHAPE(2));
    cst("mean", SHAPE(2));
    rt_tensor *var = rnd(SHAPE(2));
    for (int i = 0; i < 2; i++)
        ((float *)var->data)[i] = 0.5f + fabsf(((float *)var->data)[i]);
    rt_gb_const(gb, "var", var);
    rt_tensor_unref(var);
    Tensorflow__NodeDef *c = conv("_FusedConv2D", "conv", "x", "w", 1, "SAME");
    const char *args[] = {"scale", "offset", "mean", "var"};
    for (int i = 0; i < 4; i++)
        rt_gb_input(gb, c, args[i]);
    const char *fo[] = {"FusedBatchNorm"};
    rt_gb_attr_strlist(gb, c, "fused_ops", fo, 1);
    rt_gb_attr_i(gb, c, "num_args", 4);
    rt_gb_attr_f(gb, c, "epsilon", 0.01f);
    op2("Add", "add", "conv", "skip");
    op2("Elu", "elu", "add", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "elu", "_FusedConv2D", "FusedBatchNorm,Add,Elu", 5);
    ck_assert_float_eq_tol(kn_attr_f(&node(g1, "elu")->kn, "epsilon", 0), 0.01f, 1e-7);
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 5, 5, 3)));
    add_feed(&f, "skip", rnd(SHAPE(1, 5, 5, 2)));
    same_both_ways(mg, &f, "elu");
    free_feeds(&f);
}
END_TEST

/* ---- what must not fuse ---- */

START_TEST(second_consumer) {
    ph("x", SHAPE(1, 5, 5, 2));
    cst("w", SHAPE(3, 3, 2, 3));
    cst("b", SHAPE(3));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    op2("Relu", "relu", "bias", NULL);
    op2("Identity", "side", "conv", NULL); /* the conv output read twice */
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    ck_assert_int_eq(g1->n, g0->n);
    ck_assert_str_eq(node(g1, "relu")->kn.op, "Relu");
    ck_assert_str_eq(node(g1, "bias")->kn.op, "BiasAdd");
    rt_graph_free(g0);
    rt_graph_free(g1);
}
END_TEST

START_TEST(second_consumer_of_bias) {
    /* conv + bias fuse, but the Relu stays: the BiasAdd output has two. */
    ph("x", SHAPE(1, 5, 5, 2));
    cst("w", SHAPE(3, 3, 2, 3));
    cst("b", SHAPE(3));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    op2("Relu", "relu", "bias", NULL);
    op2("Identity", "side", "bias", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "bias", "_FusedConv2D", "BiasAdd", 1);
    ck_assert_str_eq(node(g1, "relu")->kn.op, "Relu");
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 5, 5, 2)));
    same_both_ways(mg, &f, "relu");
    same_both_ways(mg, &f, "side");
    free_feeds(&f);
}
END_TEST

START_TEST(addend_larger_than_conv) {
    /* The conv gives [1,1,1,4], the Add broadcasts it to the skip's
     * [1,5,5,4]: the fused kernel could not, so no Add fusion. */
    ph("x", SHAPE(1, 1, 1, 3));
    ph("skip", SHAPE(1, 5, 5, 4));
    cst("w", SHAPE(1, 1, 3, 4));
    cst("b", SHAPE(4));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    op2("AddV2", "add", "skip", "bias");
    op2("Relu", "relu", "add", NULL);
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    ck_assert_str_eq(node(g1, "relu")->kn.op, "Relu");
    ck_assert_str_eq(node(g1, "add")->kn.op, "AddV2");
    check_fused(g1, "bias", "_FusedConv2D", "BiasAdd", 1);
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 1, 1, 3)));
    add_feed(&f, "skip", rnd(SHAPE(1, 5, 5, 4)));
    same_both_ways(mg, &f, "relu");
    free_feeds(&f);
}
END_TEST

START_TEST(addend_unknown_batch) {
    /* Two placeholders with unknown batch: their batches may differ (one
     * may be 1), so the Add is not provably shape-preserving. */
    ph("x", SHAPE(-1, 4, 4, 3));
    ph("skip", SHAPE(-1, 4, 4, 4));
    cst("w", SHAPE(1, 1, 3, 4));
    cst("b", SHAPE(4));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv", "b");
    op2("AddV2", "add", "bias", "skip");
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    ck_assert_str_eq(node(g1, "add")->kn.op, "AddV2");
    check_fused(g1, "bias", "_FusedConv2D", "BiasAdd", 1);
    rt_graph_free(g1);
}
END_TEST

START_TEST(non_float) {
    ph("x", SHAPE(1, 3, 3, 1));
    cst("w", SHAPE(1, 1, 1, 1));
    cst("b", SHAPE(1));
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    Tensorflow__NodeDef *b = bias_add("bias", "conv", "b");
    rt_gb_attr_type(gb, b, "T", RT_DT_DOUBLE); /* (would not run; only matched) */
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    ck_assert_str_eq(node(g1, "bias")->kn.op, "BiasAdd");
    rt_graph_free(g1);
}
END_TEST

START_TEST(control_edges) {
    /* "gate" waits on the conv and on nothing later: the conv stays alone.
     * "after" waits on the BiasAdd and on the Relu, as an inlined call's
     * IdentityN does: that chain fuses and the edge to BiasAdd is dropped.
     * A control input of a chain node moves to the fused node. */
    ph("x", SHAPE(1, 4, 4, 2));
    cst("w", SHAPE(1, 1, 2, 2));
    cst("b", SHAPE(2));
    conv("Conv2D", "c0", "x", "w", 1, "SAME");
    bias_add("ba0", "c0", "b");
    op2("Relu", "r0", "ba0", NULL);
    Tensorflow__NodeDef *gate = rt_gb_node(gb, "NoOp", "gate");
    rt_gb_control_input(gb, gate, "c0");
    conv("Conv2D", "c1", "x", "w", 1, "SAME");
    Tensorflow__NodeDef *ba1 = bias_add("ba1", "c1", "b");
    rt_gb_control_input(gb, ba1, "gate");
    op2("Relu", "r1", "ba1", NULL);
    Tensorflow__NodeDef *after = rt_gb_node(gb, "NoOp", "after");
    rt_gb_control_input(gb, after, "ba1");
    rt_gb_control_input(gb, after, "r1");
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g1 = load(mg, 1);
    ck_assert_str_eq(node(g1, "r0")->kn.op, "Relu");
    ck_assert_str_eq(node(g1, "ba0")->kn.op, "BiasAdd");
    check_fused(g1, "r1", "_FusedConv2D", "BiasAdd,Relu", 1);
    const rt_gnode *r1 = node(g1, "r1"), *af = node(g1, "after");
    ck_assert_int_eq(r1->nctl, 1);
    ck_assert_int_eq(r1->ctl[0], rt_graph_find(g1, "gate"));
    ck_assert_int_eq(af->nctl, 1);
    ck_assert_int_eq(af->ctl[0], rt_graph_find(g1, "r1"));
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 4, 4, 2)));
    same_both_ways(mg, &f, "r0");
    same_both_ways(mg, &f, "r1");
    free_feeds(&f);
}
END_TEST

START_TEST(function_body) {
    /* A TF2-style model: the chain sits in a StatefulPartitionedCall's
     * function. The call's IdentityN waits on every body node; after fusion
     * it no longer waits on the absorbed ones. */
    ph("x", SHAPE(1, 5, 5, 2));
    cst("w", SHAPE(3, 3, 2, 3));
    cst("b", SHAPE(3));
    Tensorflow__NodeDef *call = rt_gb_node(gb, "StatefulPartitionedCall", "call");
    rt_gb_input(gb, call, "x");
    rt_gb_input(gb, call, "w");
    rt_gb_input(gb, call, "b");
    rt_gb_attr_func(gb, call, "f", "body");
    const char *args[] = {"x", "w", "b"};
    begin_function("body", args, 3);
    conv("Conv2D", "conv", "x", "w", 1, "SAME");
    bias_add("bias", "conv:0", "b");
    op2("Relu", "relu", "bias:0", NULL);
    end_function("relu:0");
    const Tensorflow__MetaGraphDef *mg = meta();
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    check_fused(g1, "call/relu", "_FusedConv2D", "BiasAdd,Relu", 1);
    const rt_gnode *c0 = node(g0, "call"), *c1 = node(g1, "call");
    ck_assert_str_eq(c1->kn.op, "IdentityN");
    ck_assert_int_eq(c0->nctl, 3);
    ck_assert_int_eq(c1->nctl, 1);
    ck_assert_int_eq(c1->ctl[0], rt_graph_find(g1, "call/relu"));
    rt_graph_free(g0);
    rt_graph_free(g1);
    feeds f = {0};
    add_feed(&f, "x", rnd(SHAPE(1, 5, 5, 2)));
    same_both_ways(mg, &f, "call:0");
    free_feeds(&f);
}
END_TEST

/* ---- feeds inside a fused chain ---- */

START_TEST(feed_absorbed) {
    const Tensorflow__MetaGraphDef *mg = residual(1, SHAPE(2, 6, 6, 4));
    rt_graph *g1 = load(mg, 1);
    check_fused(g1, "relu", "_FusedConv2D", "BiasAdd,Add,Relu", 2);
    /* Feeding the Add output: relu must be computed from the fed value. */
    rt_tensor *a = rnd(SHAPE(2, 6, 6, 4));
    feeds f = {0};
    add_feed(&f, "add:0", a);
    rt_tensor *y = run(g1, &f, "relu");
    ck_assert(rt_shape_equal(&y->shape, &a->shape));
    const float *av = a->data, *yv = y->data;
    for (int64_t i = 0; i < a->nelem; i++)
        ck_assert_float_eq(yv[i], av[i] > 0 ? av[i] : 0.0f);
    rt_tensor_unref(y);
    /* Feeding the conv output: relu(fed + b + skip), same as unfused. */
    feeds f2 = {0};
    add_feed(&f2, "conv", rnd(SHAPE(2, 6, 6, 4)));
    add_feed(&f2, "skip", rnd(SHAPE(2, 6, 6, 4)));
    rt_graph_free(g1);
    same_both_ways(mg, &f2, "relu");
    /* The usual plan still runs the fused node. */
    feeds f3 = {0};
    add_feed(&f3, "x", rnd(SHAPE(2, 6, 6, 3)));
    add_feed(&f3, "skip", rnd(SHAPE(2, 6, 6, 4)));
    same_both_ways(mg, &f3, "relu");
    free_feeds(&f);
    free_feeds(&f2);
    free_feeds(&f3);
}
END_TEST

START_TEST(env_switch) {
    unsetenv("DCMSERVE_GRAPH_FUSION");
    ck_assert_int_eq(rt_fuse_enabled(), 1);
    setenv("DCMSERVE_GRAPH_FUSION", "0", 1);
    ck_assert_int_eq(rt_fuse_enabled(), 0);
    setenv("DCMSERVE_GRAPH_FUSION", "1", 1);
    ck_assert_int_eq(rt_fuse_enabled(), 1);
}
END_TEST

/* ---- pattern 3: DcmDecodeHU -> DcmWindow ==> DcmDecodeWindow ---- */

/* A 20x24 CT (signed 16-bit, slope 1, intercept -1024) in a DT_STRING [1]. */
static rt_tensor *ct_file(ut_dbuf *d) {
    ut_dbuf_init(d, 1, 0);
    ut_dbuf_meta(d, "1.2.840.10008.1.2.1");
    ut_dbuf_str(d, 0x0008, 0x0060, "CS", "CT");
    ut_dbuf_image(d, 20, 24, 16, 16, 1, "MONOCHROME2");
    ut_dbuf_str(d, 0x0028, 0x1052, "DS", "-1024");
    ut_dbuf_str(d, 0x0028, 0x1053, "DS", "1");
    ut_dbuf_hdr(d, 0x7FE0, 0x0010, "OW", 20 * 24 * 2);
    for (int i = 0; i < 20 * 24; i++)
        ut_dbuf_u16(d, (uint16_t)(int16_t)((i * 37) % 1600 - 200));
    rt_str s = {.data = d->p, .len = (int64_t)d->n};
    rt_shape sh = SHAPE(1);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, &s, &t), MS_OK);
    return t;
}

/* files -> DcmDecodeHU "dec" -> DcmWindow "win" (with the mask, resize to
 * 16x16, NCHW); with `extra`, an Identity also reads dec:0. */
static const Tensorflow__MetaGraphDef *dicom_graph(int extra) {
    rt_shape sh = SHAPE(-1);
    rt_gb_placeholder(gb, "files", RT_DT_STRING, &sh);
    Tensorflow__NodeDef *dec = rt_gb_node(gb, "DcmDecodeHU", "dec");
    rt_gb_input(gb, dec, "files");
    Tensorflow__NodeDef *win = rt_gb_node(gb, "DcmWindow", "win");
    rt_gb_input(gb, win, "dec");
    rt_gb_input(gb, win, "dec:1");
    rt_gb_attr_f(gb, win, "center", 40.f);
    rt_gb_attr_f(gb, win, "width", 400.f);
    rt_gb_attr_s(gb, win, "data_format", "NCHW", 4);
    rt_gb_attr_ilist(gb, win, "size", (const int64_t[]){16, 16}, 2);
    if (extra) rt_gb_unary(gb, "Identity", "hu_copy", "dec", RT_DT_FLOAT);
    return meta();
}

START_TEST(dicom_decode_window) {
    const Tensorflow__MetaGraphDef *mg = dicom_graph(0);
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    ck_assert_str_eq(node(g0, "win")->kn.op, "DcmWindow");
    const rt_gnode *w = node(g1, "win");
    ck_assert_str_eq(w->kn.op, "DcmDecodeWindow");
    ck_assert_int_eq(w->nin, 1);
    ck_assert_int_eq(kn_attr_b(&w->kn, "masked", 0), 1);
    ut_dbuf d;
    feeds f = {0};
    add_feed(&f, "files", ct_file(&d));
    rt_tensor *want = run(g0, &f, "win"), *got = run(g1, &f, "win");
    ck_assert_msg(rt_shape_equal(&got->shape, &want->shape), "shapes differ");
    ck_assert_int_eq(got->shape.dim[1], 1);
    ck_assert_int_eq(got->shape.dim[2], 16);
    ck_assert_msg(memcmp(got->data, want->data, (size_t)want->nelem * sizeof(float)) == 0,
                  "fused output differs from DcmDecodeHU + DcmWindow");
    /* The decode's own output can still be fetched (the node stays). */
    rt_tensor *hu = run(g1, &f, "dec");
    ck_assert_int_eq(hu->shape.dim[1], 20);
    rt_tensor_unref(hu);
    rt_tensor_unref(want);
    rt_tensor_unref(got);
    free_feeds(&f);
    ut_dbuf_free(&d);
    rt_graph_free(g0);
    rt_graph_free(g1);
}
END_TEST

START_TEST(dicom_hu_used_elsewhere) {
    /* dec:0 has a second consumer: the pair stays unfused. */
    rt_graph *g = load(dicom_graph(1), 1);
    ck_assert_str_eq(node(g, "win")->kn.op, "DcmWindow");
    rt_graph_free(g);
}
END_TEST

/* ---- pattern 4: elementwise -> Sum / Mean ==> _FusedMapReduce ---- */

static void cst_f(const char *name, float v) {
    rt_shape s = {.rank = 0};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    rt_tensor_f32(t)[0] = v;
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

static void cst_axes(const char *name, const int32_t *v, int n) {
    rt_shape s = SHAPE(n);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT32, &s, &t), MS_OK);
    memcpy(t->data, v, sizeof(int32_t) * (size_t)n);
    rt_gb_const(gb, name, t);
    rt_tensor_unref(t);
}

static void reduce_node(const char *op, const char *name, const char *x, const char *axes,
                        int keep) {
    Tensorflow__NodeDef *n = rt_gb_node(gb, op, name);
    rt_gb_input(gb, n, x);
    rt_gb_input(gb, n, axes);
    rt_gb_attr_type(gb, n, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, n, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(gb, n, "keep_dims", keep);
}

static void cast_bool(const char *name, const char *x) {
    Tensorflow__NodeDef *n = rt_gb_node(gb, "Cast", name);
    rt_gb_input(gb, n, x);
    rt_gb_attr_type(gb, n, "SrcT", RT_DT_BOOL);
    rt_gb_attr_type(gb, n, "DstT", RT_DT_FLOAT);
    rt_gb_attr_b(gb, n, "Truncate", 0);
}

static void logical(const char *op, const char *name, const char *a, const char *b) {
    Tensorflow__NodeDef *n = rt_gb_node(gb, op, name);
    rt_gb_input(gb, n, a);
    rt_gb_input(gb, n, b);
}

/* The demo model's statistics over x and mask m (both placeholders of
 * unknown shape): counts of two bins, a masked sum, a Mean with keep_dims
 * over `axes`, and a SquaredDifference sum; with `extra`, an Identity also
 * reads "in_bin" (so that count stays unfused). */
static const Tensorflow__MetaGraphDef *stats_graph(const int32_t *axes, int naxes, int extra) {
    rt_shape any = {.rank = -1};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &any);
    rt_gb_placeholder(gb, "m", RT_DT_FLOAT, &any);
    cst_axes("axes", axes, naxes);
    cst_f("lo", -0.25f);
    cst_f("hi", 0.5f);
    rt_gb_binary(gb, "Less", "lt_lo", "x", "lo", RT_DT_FLOAT);
    rt_gb_binary(gb, "GreaterEqual", "ge_lo", "x", "lo", RT_DT_FLOAT);
    rt_gb_binary(gb, "Less", "lt_hi", "x", "hi", RT_DT_FLOAT);
    logical("LogicalAnd", "in_bin", "ge_lo", "lt_hi");
    cast_bool("lt_lo/f", "lt_lo");
    cast_bool("in_bin/f", "in_bin");
    rt_gb_binary(gb, "Mul", "lt_lo/m", "lt_lo/f", "m", RT_DT_FLOAT);
    rt_gb_binary(gb, "Mul", "in_bin/m", "in_bin/f", "m", RT_DT_FLOAT);
    reduce_node("Sum", "count_lo", "lt_lo/m", "axes", 0);
    reduce_node("Sum", "count_bin", "in_bin/m", "axes", 0);
    rt_gb_binary(gb, "Mul", "xm", "m", "x", RT_DT_FLOAT); /* the mask first, the counts' last */
    reduce_node("Sum", "sum_x", "xm", "axes", 0);
    rt_gb_binary(gb, "SquaredDifference", "sq", "x", "hi", RT_DT_FLOAT);
    reduce_node("Sum", "sum_sq", "sq", "axes", 0);
    rt_gb_unary(gb, "Neg", "negx", "x", RT_DT_FLOAT);
    reduce_node("Mean", "mean_neg", "negx", "axes", 1);
    if (extra) cast_bool("in_bin_copy", "in_bin");
    return meta();
}

static const char *const stats_outputs[] = {"count_lo", "count_bin", "sum_x", "sum_sq",
                                            "mean_neg"};

/* Fetches every stats output with fusion off and on: same shapes, same bits. */
static void stats_same_bits(const Tensorflow__MetaGraphDef *mg, const feeds *f) {
    rt_graph *g0 = load(mg, 0), *g1 = load(mg, 1);
    for (size_t i = 0; i < sizeof(stats_outputs) / sizeof(stats_outputs[0]); i++) {
        rt_tensor *want = run(g0, f, stats_outputs[i]), *got = run(g1, f, stats_outputs[i]);
        ck_assert_msg(rt_shape_equal(&got->shape, &want->shape), "%s: shapes differ",
                      stats_outputs[i]);
        ck_assert_msg(memcmp(got->data, want->data, (size_t)want->nelem * sizeof(float)) == 0,
                      "%s: fused sum differs from the unfused graph (first %.9g vs %.9g)",
                      stats_outputs[i], rt_tensor_f32(got)[0], rt_tensor_f32(want)[0]);
        rt_tensor_unref(want);
        rt_tensor_unref(got);
    }
    rt_graph_free(g0);
    rt_graph_free(g1);
}

/* x: integers (HU-like) when `integers`, else values whose double sum
 * depends on the order; m: 0 / 1. */
static rt_tensor *stats_x(rt_shape s, int integers) {
    rt_tensor *t = rnd(s);
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = integers ? (float)(int)(v[i] * 1500.f) / 1000.f * 1000.f
                        : v[i] * (i % 7 == 0 ? 3.0e6f : 1.0f) + 1e-3f;
    return t;
}

static rt_tensor *stats_m(rt_shape s) {
    rt_tensor *t = rnd(s);
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = v[i] > -0.8f ? 1.f : 0.f;
    return t;
}

START_TEST(map_reduce_grouped) {
    const int32_t ax[] = {1, 2, 3};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 3, 0);
    rt_graph *g = load(mg, 1);
    /* Every reduction became Identity of a _FusedMapReduce output; the
     * three over x and m share one node (one pass), sum_sq (over x only)
     * and mean_neg (keep_dims) have their own. */
    int group[5], seen = 0;
    for (int i = 0; i < 5; i++) {
        const rt_gnode *n = node(g, stats_outputs[i]);
        ck_assert_str_eq(n->kn.op, "Identity");
        ck_assert_int_eq(n->nin, 1);
        ck_assert_str_eq(g->nodes[n->in[0].node].kn.op, "_FusedMapReduce");
        group[i] = n->in[0].node;
        if (i < 3) {
            ck_assert(n->in[0].out >= 0 && n->in[0].out < 3 && !(seen & (1 << n->in[0].out)));
            seen |= 1 << n->in[0].out;
        }
    }
    ck_assert(group[1] == group[0] && group[2] == group[0]);
    ck_assert(group[3] != group[0] && group[4] != group[0] && group[3] != group[4]);
    ck_assert_int_eq(g->nodes[group[0]].nout, 3);
    ck_assert_int_eq(g->nodes[group[0]].nin, 2); /* x and m */
    ck_assert_int_eq(g->nodes[group[3]].nin, 1);
    ck_assert_int_eq(node(g, "in_bin")->fused_into, rt_graph_find(g, "count_bin"));
    rt_graph_free(g);
    /* Integer values (the exact lane sums) over several chunks per output
     * element, and order-sensitive values (the sequential sums). */
    for (int integers = 1; integers >= 0; integers--) {
        feeds f = {0};
        add_feed(&f, "x", stats_x(SHAPE(2, 190, 200, 1), integers));
        add_feed(&f, "m", stats_m(SHAPE(2, 190, 200, 1)));
        stats_same_bits(mg, &f);
        free_feeds(&f);
    }
}
END_TEST

/* A mask of ones but for a stretch of zeros and one 0.5 (a padded image):
 * most of the fused pass's blocks see an all-ones mask, whose Mul it skips
 * (the product is the other operand); a few do not. */
static rt_tensor *stats_m_ones(rt_shape s) {
    rt_tensor *t = rnd(s);
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = i >= t->nelem / 2 && i < t->nelem / 2 + 700 ? 0.f : 1.f;
    v[t->nelem / 3] = 0.5f;
    return t;
}

/* The stats graph at 1..maxt threads, integer and order-sensitive x, mask
 * from mk: every output bit for bit the unfused graph's. */
static void stats_threads(rt_shape sh, rt_tensor *(*mk)(rt_shape), int maxt) {
    const int32_t ax[] = {1, 2, 3};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 3, 0);
    for (int integers = 1; integers >= 0; integers--)
        for (g_threads = 1; g_threads <= maxt; g_threads++) {
            feeds f = {0};
            add_feed(&f, "x", stats_x(sh, integers));
            add_feed(&f, "m", mk(sh));
            stats_same_bits(mg, &f);
            free_feeds(&f);
        }
    g_threads = 1;
}

START_TEST(map_reduce_ones_mask) {
    stats_threads(SHAPE(2, 190, 200, 1), stats_m_ones, 2);
}
END_TEST

START_TEST(map_reduce_threads) {
    /* Inputs past KN_PAR_MIN_VALUES: the fused pass splits its slices over
     * the pool at 2 and 3 threads; the sums must stay the unfused ones,
     * bit for bit (integers and order-sensitive values alike). */
    ck_assert_int_ge(2 * 300 * 300, KN_PAR_MIN_VALUES);
    stats_threads(SHAPE(2, 300, 300, 1), stats_m, 3);
}
END_TEST

START_TEST(map_reduce_broadcast_mask) {
    /* Colour x (N, H, W, 3) against a grey mask (N, H, W, 1), as DcmDecodeHU
     * gives for a batch with a colour file; and a scalar mask. */
    const int32_t ax[] = {1, 2, 3};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 3, 0);
    feeds f = {0};
    add_feed(&f, "x", stats_x(SHAPE(3, 7, 9, 3), 1));
    add_feed(&f, "m", stats_m(SHAPE(3, 7, 9, 1)));
    stats_same_bits(mg, &f);
    free_feeds(&f);
    feeds f2 = {0};
    add_feed(&f2, "x", stats_x(SHAPE(3, 7, 9, 3), 0));
    rt_shape s0 = {.rank = 0};
    add_feed(&f2, "m", stats_m(s0));
    stats_same_bits(mg, &f2);
    free_feeds(&f2);
}
END_TEST

START_TEST(map_reduce_other_axes) {
    /* Axis 0 and a negative axis: not a suffix of the shape. */
    const int32_t ax[] = {0, -2};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 2, 0);
    rt_graph *g = load(mg, 1);
    ck_assert_str_eq(node(g, "sum_x")->kn.op, "Identity");
    rt_graph_free(g);
    for (int integers = 1; integers >= 0; integers--) {
        feeds f = {0};
        add_feed(&f, "x", stats_x(SHAPE(4, 5, 6, 2), integers));
        add_feed(&f, "m", stats_m(SHAPE(4, 5, 6, 2)));
        stats_same_bits(mg, &f);
        free_feeds(&f);
    }
    /* An axis out of range fails the run, fused as unfused. */
    feeds f = {0};
    add_feed(&f, "x", stats_x(SHAPE(5), 1));
    add_feed(&f, "m", stats_m(SHAPE(5)));
    rt_graph *g1 = load(mg, 1);
    rt_edge fe[2], fo;
    ck_assert_int_eq(rt_graph_tensor(g1, "x", &fe[0]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g1, "m", &fe[1]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g1, "sum_x", &fo), MS_OK);
    rt_plan *p = NULL;
    ck_assert_int_eq(rt_plan_build(g1, fe, 2, &fo, 1, NULL, 0, &p), MS_OK);
    kn_ctx ctx = {.nthreads = 1};
    rt_tensor *out = NULL;
    ck_assert_int_eq(rt_plan_run(p, &ctx, NULL, f.val, &out), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "out of range") != NULL, "%s", ms_errmsg());
    rt_plan_free(p);
    rt_graph_free(g1);
    free_feeds(&f);
}
END_TEST

START_TEST(map_reduce_shared_intermediate) {
    /* in_bin has a consumer outside count_bin's expression: count_bin's
     * expression is then only Mul(Cast(in_bin), m) with in_bin an input. */
    const int32_t ax[] = {1, 2, 3};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 3, 1);
    rt_graph *g = load(mg, 1);
    ck_assert_int_eq(node(g, "in_bin")->fused_into, -1);
    ck_assert_int_eq(node(g, "ge_lo")->fused_into, -1);
    const rt_gnode *n = node(g, "count_bin");
    ck_assert_str_eq(n->kn.op, "Identity");
    ck_assert_int_eq(g->nodes[n->in[0].node].nin, 2); /* in_bin and m */
    rt_graph_free(g);
    feeds f = {0};
    add_feed(&f, "x", stats_x(SHAPE(2, 10, 11, 1), 1));
    add_feed(&f, "m", stats_m(SHAPE(2, 10, 11, 1)));
    stats_same_bits(mg, &f);
    free_feeds(&f);
}
END_TEST

START_TEST(map_reduce_feed_absorbed) {
    /* Feeding an absorbed tensor: the sum over it uses the fed value. */
    const int32_t ax[] = {1, 2, 3};
    const Tensorflow__MetaGraphDef *mg = stats_graph(ax, 3, 0);
    feeds f = {0};
    add_feed(&f, "x", stats_x(SHAPE(2, 4, 5, 1), 1));
    add_feed(&f, "m", stats_m(SHAPE(2, 4, 5, 1)));
    add_feed(&f, "xm", stats_x(SHAPE(2, 4, 5, 1), 0));
    stats_same_bits(mg, &f);
    rt_graph *g = load(mg, 1);
    rt_tensor *s = run(g, &f, "sum_x");
    const float *xm = f.val[2]->data;
    for (int b = 0; b < 2; b++) {
        double want = 0;
        for (int i = 0; i < 20; i++)
            want += xm[b * 20 + i];
        ck_assert_float_eq(rt_tensor_f32(s)[b], (float)want);
    }
    rt_tensor_unref(s);
    rt_graph_free(g);
    free_feeds(&f);
}
END_TEST

static Suite *fuse_suite(void) {
    Suite *s = suite_create("fuse");
    struct {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"conv2d_bias_relu", conv2d_bias_relu},
        {"depthwise_bias_relu6", depthwise_bias_relu6},
        {"matmul_bias_relu", matmul_bias_relu},
        {"leaky_relu_alpha", leaky_relu_alpha},
        {"add_first", add_first},
        {"add_second", add_second},
        {"add_broadcast_vector", add_broadcast_vector},
        {"add_nchw", add_nchw},
        {"add_nchw_broadcast", add_nchw_broadcast},
        {"resnet_block_dynamic_batch", resnet_block_dynamic_batch},
        {"batchnorm_add", batchnorm_add},
        {"second_consumer", second_consumer},
        {"second_consumer_of_bias", second_consumer_of_bias},
        {"addend_larger_than_conv", addend_larger_than_conv},
        {"addend_unknown_batch", addend_unknown_batch},
        {"non_float", non_float},
        {"control_edges", control_edges},
        {"function_body", function_body},
        {"feed_absorbed", feed_absorbed},
        {"env_switch", env_switch},
        {"dicom_decode_window", dicom_decode_window},
        {"dicom_hu_used_elsewhere", dicom_hu_used_elsewhere},
        {"map_reduce_grouped", map_reduce_grouped},
        {"map_reduce_threads", map_reduce_threads},
        {"map_reduce_ones_mask", map_reduce_ones_mask},
        {"map_reduce_broadcast_mask", map_reduce_broadcast_mask},
        {"map_reduce_other_axes", map_reduce_other_axes},
        {"map_reduce_shared_intermediate", map_reduce_shared_intermediate},
        {"map_reduce_feed_absorbed", map_reduce_feed_absorbed},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(fuse_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
