/* check_exec_device.c - the executor's device placement (runtime/graph/rt_exec.c
 * with kernels/kn_place): plans over a graph with a device backend bind each
 * node to the device's kernel when the device has its op, run the copies the
 * placement inserted through the backend's to_device / to_host, feed from and
 * fetch to the host.
 *
 * The device here is a test backend ("testdev") over the real CPU kernels with
 * memory of its own kind: its tensors are marked device 7 and hold every byte
 * XOR 0xA5, so that a host kernel fed a device tensor (a missing copy to the
 * host) computes garbage and a device kernel fed a host tensor (a missing copy
 * to the device) fails. Results are compared bit for bit with the same graph
 * run on the CPU backend alone. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_status.h"
#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_bundle.h"

#define TESTDEV_MEM 7

static kn_backend *cpu;
static rt_gb *gb;
static int n_h2d, n_d2h, n_dev_runs, fail_copies;

/* ---- the test device ---- */

static void xor_bytes(rt_tensor *t) {
    uint8_t *b = t->data;
    for (size_t i = 0; i < rt_tensor_nbytes(t); i++)
        b[i] ^= 0xA5;
}

/* A copy of t in the other memory kind. */
static ms_status recode(const rt_tensor *t, int to_dev, rt_tensor **out) {
    if (t->dtype == RT_DT_STRING) return ms_errf(MS_ENOTSUP, "testdev: no strings");
    if ((t->buf->device == TESTDEV_MEM) == to_dev)
        return ms_errf(MS_EINTERNAL, "testdev: tensor already in %s memory",
                       to_dev ? "device" : "host");
    rt_tensor *c = NULL;
    ms_status st = rt_tensor_clone(t, &c);
    if (st != MS_OK) return st;
    xor_bytes(c);
    c->buf->device = to_dev ? TESTDEV_MEM : 0;
    *out = c;
    return MS_OK;
}

static ms_status dev_to_device(kn_backend *b, rt_tensor *host, rt_tensor **out) {
    (void)b;
    if (fail_copies) return ms_errf(MS_EDEVICE, "testdev: copy refused");
    n_h2d++;
    return recode(host, 1, out);
}

static ms_status dev_to_host(kn_backend *b, rt_tensor *dev, rt_tensor **out) {
    (void)b;
    n_d2h++;
    return recode(dev, 0, out);
}

typedef struct dev_state {
    const kn_kernel *k;
    void *st;
} dev_state;

static ms_status dev_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    dev_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    s->k = kn_backend_kernel(cpu, node->op);
    ms_status st = s->k->prepare ? s->k->prepare(node, const_in, &s->st) : MS_OK;
    if (st != MS_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static void dev_release(void *state) {
    dev_state *s = state;
    if (s && s->k->release) s->k->release(s->st);
    free(s);
}

static ms_status dev_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    dev_state *s = state;
    rt_tensor *hin[64] = {0}, *hout[64] = {0};
    ms_status st = MS_OK;
    ck_assert_int_le(node->nin, 64);
    ck_assert_int_le(node->nout, 64);
    n_dev_runs++;
    for (int i = 0; i < node->nin && st == MS_OK; i++) {
        if (in[i]->buf->device != TESTDEV_MEM)
            st = ms_errf(MS_EINTERNAL, "testdev: input %d of '%s' is in host memory", i, node->name);
        else
            st = recode(in[i], 0, &hin[i]);
    }
    if (st == MS_OK) st = s->k->compute(ctx, node, s->st, hin, hout);
    for (int i = 0; i < node->nout && st == MS_OK; i++) st = recode(hout[i], 1, &out[i]);
    for (int i = 0; i < 64; i++) {
        rt_tensor_unref(hin[i]);
        rt_tensor_unref(hout[i]);
    }
    return st;
}

static const char *dev_ops[] = {"MatMul", "AddV2", "Mul", "Relu", NULL};
static kn_kernel dev_table[8];

static const kn_kernel *dev_kernel(kn_backend *b, const char *op) {
    (void)b;
    for (int i = 0; dev_ops[i]; i++)
        if (strcmp(op, dev_ops[i]) == 0) {
            dev_table[i] = (kn_kernel){.op = dev_ops[i], .prepare = dev_prepare,
                                       .compute = dev_compute, .release = dev_release};
            return &dev_table[i];
        }
    return NULL;
}

static const char *dev_name(kn_backend *b) {
    (void)b;
    return "testdev";
}

static kn_backend testdev = {
    .api_version = KN_BACKEND_API_VERSION,
    .iface = {.name = dev_name, .kernel = dev_kernel, .to_device = dev_to_device,
              .to_host = dev_to_host},
    .intra_op_threads = 1,
};

/* A device backend with every op of the CPU backend but the string parsers. */
static kn_kernel all_table[256];
static int all_n;

static const kn_kernel *all_kernel(kn_backend *b, const char *op) {
    (void)b;
    const kn_kernel *k = kn_backend_kernel(cpu, op);
    if (k == NULL || strncmp(op, "Parse", 5) == 0) return NULL;
    for (int i = 0; i < all_n; i++)
        if (strcmp(all_table[i].op, op) == 0) return &all_table[i];
    ck_assert_int_lt(all_n, 256);
    all_table[all_n] = (kn_kernel){.op = k->op, .prepare = dev_prepare, .compute = dev_compute,
                                   .release = dev_release, .stateful = k->stateful};
    return &all_table[all_n++];
}

static kn_backend alldev = {
    .api_version = KN_BACKEND_API_VERSION,
    .iface = {.name = dev_name, .kernel = all_kernel, .to_device = dev_to_device,
              .to_host = dev_to_host},
};

/* A device backend that has none of the graph's ops. */
static const kn_kernel *none_kernel(kn_backend *b, const char *op) {
    (void)b;
    (void)op;
    return NULL;
}
static kn_backend nodev = {
    .api_version = KN_BACKEND_API_VERSION,
    .iface = {.name = dev_name, .kernel = none_kernel, .to_device = dev_to_device,
              .to_host = dev_to_host},
};

/* ---- graphs ---- */

static void setup(void) {
    cpu = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(cpu);
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    n_h2d = n_d2h = n_dev_runs = fail_copies = 0;
}

static void teardown(void) {
    rt_gb_free(gb);
    kn_backend_free(cpu);
}

static rt_tensor *iota(rt_shape s, float start, float step) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++)
        ((float *)t->data)[i] = start + step * (float)i;
    return t;
}

/* x[2,3] -> MatMul(w) -> AddV2(b) -> Relu = r (device)
 *        -> Neg (host) ----------------------.
 *   r -> ArgMax (host) = am                   Mul(neg_sum, r) = m (device)
 *   r -> Sum over axis 1 keep_dims (host) ---'
 * fetches r, am, m and also x itself. */
static Tensorflow__MetaGraphDef *graph(void) {
    rt_shape xs = {.rank = 2, .dim = {2, 3}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    rt_tensor *w = iota((rt_shape){.rank = 2, .dim = {3, 4}}, -1.0f, 0.25f);
    rt_tensor *b = iota((rt_shape){.rank = 1, .dim = {4}}, -0.5f, 0.5f);
    rt_tensor *axis = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT32, &(rt_shape){.rank = 0}, &axis), MS_OK);
    ((int32_t *)axis->data)[0] = 1;
    rt_gb_const(gb, "w", w);
    rt_gb_const(gb, "b", b);
    rt_gb_const(gb, "axis", axis);
    rt_tensor_unref(w);
    rt_tensor_unref(b);
    rt_tensor_unref(axis);
    rt_gb_matmul(gb, "mm", "x", "w", 0, 0, RT_DT_FLOAT);
    Tensorflow__NodeDef *add = rt_gb_binary(gb, "AddV2", "add", "mm", "b", RT_DT_FLOAT);
    rt_gb_device(gb, add, "/device:GPU:0");
    rt_gb_unary(gb, "Relu", "r", "add", RT_DT_FLOAT);
    Tensorflow__NodeDef *am = rt_gb_node(gb, "ArgMax", "am");
    rt_gb_input(gb, am, "r");
    rt_gb_input(gb, am, "axis");
    rt_gb_attr_type(gb, am, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, am, "Tidx", RT_DT_INT32);
    rt_gb_attr_type(gb, am, "output_type", RT_DT_INT64);
    Tensorflow__NodeDef *sum = rt_gb_node(gb, "Sum", "s");
    rt_gb_input(gb, sum, "r");
    rt_gb_input(gb, sum, "axis");
    rt_gb_attr_type(gb, sum, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, sum, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(gb, sum, "keep_dims", 1);
    rt_gb_unary(gb, "Neg", "neg", "s", RT_DT_FLOAT);
    rt_gb_binary(gb, "Mul", "m", "neg", "r", RT_DT_FLOAT);
    Tensorflow__MetaGraphDef *mg = NULL;
    ms_status st = rt_gb_meta_graph(gb, &mg);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    return mg;
}

static rt_graph *load(const Tensorflow__MetaGraphDef *mg, kn_backend *device) {
    rt_graph *g = NULL;
    ms_status st = rt_graph_build(mg, cpu, rt_model_host_ops, &g);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    g->device = device;
    return g;
}

static const char *fetch_names[] = {"r", "am", "m", "x"};
#define NFETCH 4

static rt_plan *plan(rt_graph *g) {
    rt_edge fe, fo[NFETCH];
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    for (int i = 0; i < NFETCH; i++)
        ck_assert_int_eq(rt_graph_tensor(g, fetch_names[i], &fo[i]), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, &fe, 1, fo, NFETCH, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    return p;
}

static ms_status run(rt_plan *p, rt_tensor *x, rt_tensor **outs) {
    kn_ctx ctx = {.nthreads = 1};
    return rt_plan_run(p, &ctx, NULL, &x, outs);
}

static void check_same(rt_tensor *const *got, rt_tensor *const *want) {
    for (int i = 0; i < NFETCH; i++) {
        ck_assert_msg(got[i]->buf->device == 0, "fetch %s is not in host memory", fetch_names[i]);
        ck_assert_msg(rt_tensor_equal(got[i], want[i]), "fetch %s differs from the CPU run",
                      fetch_names[i]);
    }
}

/* ---- tests ---- */

START_TEST(mixed_plan_matches_cpu) {
    const Tensorflow__MetaGraphDef *mg = graph();
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, &testdev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    ck_assert_int_eq(n_h2d, 2); /* w and b, once */
    /* the device has MatMul, AddV2, Relu, Mul: those nodes are bound to it */
    const char *on_dev[] = {"mm", "add", "r", "m"}, *on_host[] = {"am", "s", "neg"};
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_eq(g1->nodes[rt_graph_find(g1, on_dev[i])].kernel,
                         kn_backend_kernel(&testdev, g1->nodes[rt_graph_find(g1, on_dev[i])].kn.op));
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_eq(g1->nodes[rt_graph_find(g1, on_host[i])].kernel,
                         g0->nodes[rt_graph_find(g0, on_host[i])].kernel);
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, -1.0f + (float)rep, 0.375f);
        rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
        int before = n_h2d + n_d2h + n_dev_runs;
        ck_assert_msg(run(p0, x, want) == MS_OK, "%s", ms_errmsg());
        ck_assert_int_eq(n_h2d + n_d2h + n_dev_runs, before); /* the host plan copies nothing */
        ms_status st = run(p1, x, got);
        ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
        check_same(got, want);
        /* per request: x and neg to the device (the constants w and b went
         * once, when the plan was built: 2); r twice to the host (for
         * ArgMax and Sum: one shared copy) and r, m back as fetches (the
         * copy of r is shared): 2 to the host; 4 device nodes */
        ck_assert_int_eq(n_dev_runs, 4 * (rep + 1));
        ck_assert_int_eq(n_h2d, 2 + 2 * (rep + 1));
        ck_assert_int_eq(n_d2h, 2 * (rep + 1));
        for (int i = 0; i < NFETCH; i++) {
            rt_tensor_unref(want[i]);
            rt_tensor_unref(got[i]);
        }
        rt_tensor_unref(x);
    }
    /* a second plan over the same graph (another signature) binds the same way */
    rt_plan *p2 = plan(g1);
    rt_plan_free(p2);
    rt_plan_free(p0);
    rt_plan_free(p1);
    rt_graph_free(g0);
    rt_graph_free(g1);
}
END_TEST

START_TEST(no_device_op_is_the_host_plan) {
    const Tensorflow__MetaGraphDef *mg = graph();
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, &nodev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, 0.5f, -0.25f);
    rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
    ck_assert_int_eq(run(p0, x, want), MS_OK);
    ck_assert_int_eq(run(p1, x, got), MS_OK);
    check_same(got, want);
    ck_assert_int_eq(n_h2d + n_d2h + n_dev_runs, 0);
    for (int i = 0; i < NFETCH; i++) {
        rt_tensor_unref(want[i]);
        rt_tensor_unref(got[i]);
    }
    rt_tensor_unref(x);
    rt_plan_free(p0);
    rt_plan_free(p1);
    rt_graph_free(g0);
    rt_graph_free(g1);
}
END_TEST

START_TEST(copy_failure_fails_the_request) {
    const Tensorflow__MetaGraphDef *mg = graph();
    rt_graph *g = load(mg, &testdev);
    rt_plan *p = plan(g);
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, 0.0f, 1.0f);
    rt_tensor *got[NFETCH] = {0};
    fail_copies = 1;
    ms_status st = run(p, x, got);
    ck_assert_int_eq(st, MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), "copy to the device (testdev)") != NULL, "%s", ms_errmsg());
    for (int i = 0; i < NFETCH; i++) ck_assert_ptr_null(got[i]);
    /* the plan stays usable */
    fail_copies = 0;
    ck_assert_msg(run(p, x, got) == MS_OK, "%s", ms_errmsg());
    for (int i = 0; i < NFETCH; i++) rt_tensor_unref(got[i]);
    rt_tensor_unref(x);
    rt_plan_free(p);
    rt_graph_free(g);
}
END_TEST

/* Real SavedModels loaded with the device: Predict gives the same bytes as
 * the CPU load (the _gpu model pins its nodes to /device:GPU:0: hints). */
static const char *const models[] = {"saved_model_half_plus_two_cpu/00000123",
                                     "saved_model_half_plus_two_gpu/00000123",
                                     "saved_model_half_plus_two_tf2_cpu/00000123",
                                     "matrix_half_plus_two/1"};

static const char *sig_tensor(const rt_model *m, const char *key, int output) {
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    for (size_t i = 0; i < mg->n_signature_def; i++) {
        if (strcmp(mg->signature_def[i]->key, "serving_default") != 0) continue;
        const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
        size_t n = output ? sd->n_outputs : sd->n_inputs;
        Tensorflow__SignatureDef__InputsEntry **e =
            output ? (Tensorflow__SignatureDef__InputsEntry **)sd->outputs : sd->inputs;
        for (size_t k = 0; k < n; k++)
            if (key == NULL || strcmp(e[k]->key, key) == 0) return e[k]->value->name;
    }
    return NULL;
}

START_TEST(real_models_match_cpu) {
    char rel[256], dir[1024];
    snprintf(rel, sizeof rel, "savedmodels/%s", models[_i]);
    if (ut_data_path(rel, dir, sizeof dir) == NULL) {
        printf("exec_device: skipped %s: not found\n", rel);
        return;
    }
    const char *serve[] = {"serve"};
    rt_model *m0 = NULL, *m1 = NULL;
    ms_status st = rt_model_load(dir, serve, 1, cpu, &m0);
    ck_assert_msg(st == MS_OK, "%s: %s", models[_i], ms_errmsg());
    st = rt_model_load_on(dir, serve, 1, cpu, &alldev, &m1);
    ck_assert_msg(st == MS_OK, "%s on testdev: %s", models[_i], ms_errmsg());
    const char *in = sig_tensor(m0, NULL, 0), *out = sig_tensor(m0, NULL, 1);
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {3, 1}}, 1.0f, 2.0f);
    if (strstr(models[_i], "matrix")) {
        rt_tensor_unref(x);
        x = iota((rt_shape){.rank = 2, .dim = {2, 2}}, 1.0f, 2.0f);
    }
    rt_feed f = {in, x};
    rt_tensor *want = NULL, *got = NULL;
    st = rt_model_run(m0, &f, 1, &out, 1, NULL, 0, NULL, &want);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    int runs = n_dev_runs;
    st = rt_model_run(m1, &f, 1, &out, 1, NULL, 0, NULL, &got);
    ck_assert_msg(st == MS_OK, "%s on testdev: %s", models[_i], ms_errmsg());
    ck_assert_msg(n_dev_runs > runs, "no node ran on the device");
    ck_assert_int_eq(got->buf->device, 0);
    ck_assert_msg(rt_tensor_equal(got, want), "%s: device run differs from the CPU run",
                  models[_i]);
    rt_tensor_unref(want);
    rt_tensor_unref(got);
    rt_tensor_unref(x);
    rt_model_unref(m0);
    rt_model_unref(m1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec_device");
    TCase *tc = tcase_create("placement");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, mixed_plan_matches_cpu);
    tcase_add_test(tc, no_device_op_is_the_host_plan);
    tcase_add_test(tc, copy_failure_fails_the_request);
    tcase_add_loop_test(tc, real_models_match_cpu, 0, (int)(sizeof models / sizeof models[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
