/* check_exec_device.c - the executor's device placement (runtime/graph/rt_exec.c
 * with kernels/kn_place): plans over a graph with a device backend bind each
 * node to the device's kernel when the device has its op, run the copies the
 * placement inserted through the backend's to_device / to_host, feed from and
 * fetch to the host.
 *
 * The device here is a test backend ("testdev", tests/util_testdev) over the
 * real CPU kernels with memory of its own kind: its tensors are marked device
 * 7 and hold every byte XOR 0xA5, so that a host kernel fed a device tensor (a
 * missing copy to the host) computes garbage and a device kernel fed a host
 * tensor (a missing copy to the device) fails. Results are compared bit for bit with the same graph
 * run on the CPU backend alone. */
#include <check.h>
#include <pthread.h>
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
#include "sig_signature.h"
#include "srv_config.h"
#include "srv_manager.h"
#include "srv_warmup.h"
#include "util_bundle.h"
#include "util_testdev.h"

static kn_backend *cpu, *testdev, *alldev, *nodev;
static rt_gb *gb;

/* The devices: testdev has MatMul, AddV2, Mul and Relu; alldev every op of
 * the CPU backend but the string parsers; nodev none of the graph's ops. */
static const char *const dev_ops[] = {"MatMul", "AddV2", "Mul", "Relu", NULL};

/* ---- graphs ---- */

static void setup(void) {
    cpu = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(cpu);
    ut_testdev_setup(cpu, 7, 0xA5);
    testdev = ut_testdev_new("testdev", dev_ops, 0);
    alldev = ut_testdev_new("testdev", NULL, 0);
    nodev = ut_testdev_new("testdev", NULL, UT_TESTDEV_NONE);
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    memset(&ut_dev, 0, sizeof ut_dev);
}

static void teardown(void) {
    rt_gb_free(gb);
    kn_backend_free(testdev);
    kn_backend_free(alldev);
    kn_backend_free(nodev);
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
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, testdev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    ck_assert_int_eq(ut_dev.h2d, 2); /* w and b, once */
    /* the device has MatMul, AddV2, Relu, Mul: those nodes are bound to it */
    const char *on_dev[] = {"mm", "add", "r", "m"}, *on_host[] = {"am", "s", "neg"};
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_eq(g1->nodes[rt_graph_find(g1, on_dev[i])].kernel,
                         kn_backend_kernel(testdev, g1->nodes[rt_graph_find(g1, on_dev[i])].kn.op));
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_eq(g1->nodes[rt_graph_find(g1, on_host[i])].kernel,
                         g0->nodes[rt_graph_find(g0, on_host[i])].kernel);
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, -1.0f + (float)rep, 0.375f);
        rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
        int before = ut_dev.h2d + ut_dev.d2h + ut_dev.runs;
        ck_assert_msg(run(p0, x, want) == MS_OK, "%s", ms_errmsg());
        ck_assert_int_eq(ut_dev.h2d + ut_dev.d2h + ut_dev.runs, before); /* the host plan copies nothing */
        ms_status st = run(p1, x, got);
        ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
        check_same(got, want);
        /* per request: x and neg to the device (the constants w and b went
         * once, when the plan was built: 2); r twice to the host (for
         * ArgMax and Sum: one shared copy) and r, m back as fetches (the
         * copy of r is shared): 2 to the host; 4 device nodes */
        ck_assert_int_eq(ut_dev.runs, 4 * (rep + 1));
        ck_assert_int_eq(ut_dev.h2d, 2 + 2 * (rep + 1));
        ck_assert_int_eq(ut_dev.d2h, 2 * (rep + 1));
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
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, nodev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, 0.5f, -0.25f);
    rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
    ck_assert_int_eq(run(p0, x, want), MS_OK);
    ck_assert_int_eq(run(p1, x, got), MS_OK);
    check_same(got, want);
    ck_assert_int_eq(ut_dev.h2d + ut_dev.d2h + ut_dev.runs, 0);
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
    rt_graph *g = load(mg, testdev);
    rt_plan *p = plan(g);
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, 0.0f, 1.0f);
    rt_tensor *got[NFETCH] = {0};
    ut_dev.fail_copies = 1;
    ms_status st = run(p, x, got);
    ck_assert_int_eq(st, MS_EDEVICE);
    ck_assert_msg(strstr(ms_errmsg(), "copy to the device (testdev)") != NULL, "%s", ms_errmsg());
    for (int i = 0; i < NFETCH; i++) ck_assert_ptr_null(got[i]);
    /* the plan stays usable */
    ut_dev.fail_copies = 0;
    ck_assert_msg(run(p, x, got) == MS_OK, "%s", ms_errmsg());
    for (int i = 0; i < NFETCH; i++) rt_tensor_unref(got[i]);
    rt_tensor_unref(x);
    rt_plan_free(p);
    rt_graph_free(g);
}
END_TEST

/* A device with arenas: the first run of a feed shape sizes the plan's
 * device tensors (one arena, laid out from their lifetimes); later runs of
 * that shape put every device tensor in it (the arena is overwritten with
 * 0xCD before each run, and regions are reused within a run, so a wrong
 * layout or a tensor outliving its region gives wrong numbers); another
 * shape gets its own layout; freeing the plan frees the arenas. */
START_TEST(arena_plan_matches_cpu) {
    kn_backend *ardev = ut_testdev_new("testdev", dev_ops, UT_TESTDEV_ARENAS);
    const Tensorflow__MetaGraphDef *mg = graph();
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, ardev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    rt_plan_meminfo mi;
    ck_assert_int_eq(rt_plan_memory(p1, 0, &mi), MS_ENOTFOUND);
    ck_assert_int_eq(mi.nkeys, 0);
    ck_assert_int_eq(rt_plan_memory(p0, 0, &mi), MS_ENOTFOUND); /* the host plan has none */
    for (int rep = 0; rep < 5; rep++) {
        int rows = rep < 3 ? 2 : 4; /* a second feed shape from the fourth run */
        rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {rows, 3}}, -1.5f + (float)rep, 0.375f);
        rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
        ck_assert_msg(run(p0, x, want) == MS_OK, "%s", ms_errmsg());
        int regions = ut_dev.regions, tmps = ut_dev.tmps, tmp_cache = ut_dev.tmp_cache;
        ms_status st = run(p1, x, got);
        ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
        check_same(got, want);
        int key = rows == 2 ? 0 : 1;
        ck_assert_int_eq(rt_plan_memory(p1, key, &mi), MS_OK);
        ck_assert_int_eq(mi.nkeys, rows == 2 ? 1 : 2);
        /* device tensors per run: x and neg copied in, mm, add, r, m made */
        ck_assert_int_eq(mi.ntensors, 6);
        /* and one temporary per device node (MatMul, AddV2, Relu, Mul), each
         * live for its step only, laid out with the tensors */
        ck_assert_int_eq(mi.ntemps, 4);
        ck_assert(kn_memplan_valid(mi.bufs, mi.ntensors + mi.ntemps));
        ck_assert_uint_ge(mi.bytes, kn_memplan_peak(mi.bufs, mi.ntensors + mi.ntemps));
        for (int i = 0; i < mi.ntemps; i++)
            ck_assert_int_eq(mi.bufs[mi.ntensors + i].first, mi.bufs[mi.ntensors + i].last);
        if (rep == 0 || rep == 3) { /* the sizing run */
            ck_assert_int_eq(ut_dev.regions, regions);
            ck_assert_int_eq(ut_dev.tmps, tmps);
            ck_assert_int_eq(ut_dev.tmp_cache, tmp_cache + 4);
        } else {
            ck_assert_int_eq(ut_dev.regions, regions + 6);
            ck_assert_int_eq(ut_dev.tmps, tmps + 4);
            ck_assert_int_eq(ut_dev.tmp_cache, tmp_cache);
        }
        ck_assert_int_eq(mi.arenas, 1);
        for (int i = 0; i < NFETCH; i++) {
            rt_tensor_unref(want[i]);
            rt_tensor_unref(got[i]);
        }
        rt_tensor_unref(x);
    }
    ck_assert_int_eq(ut_dev.arenas, 2);
    /* reuse: [2, 4] floats are 32 bytes and the temporaries under 100, so
     * 10 regions of 256 without reuse */
    ck_assert_int_eq(rt_plan_memory(p1, 0, &mi), MS_OK);
    ck_assert_uint_lt(mi.bytes, 10 * 256);
    rt_plan_free(p1);
    ck_assert_int_eq(ut_dev.arenas, 0);
    ck_assert_uint_eq(ut_dev.arena_bytes, 0);
    rt_plan_free(p0);
    rt_graph_free(g0);
    rt_graph_free(g1);
    kn_backend_free(ardev);
}
END_TEST

/* CUDA graphs on a test device that emulates them (UT_TESTDEV_GRAPHS: a
 * captured kernel's outputs are spoiled, a launch recomputes them at the
 * recorded addresses): after the sizing run, the next run of the shape
 * captures the segment MatMul -> AddV2 -> Relu and launches it, later runs
 * replay it without running those kernels; every run gives the CPU's bytes.
 * A refused capture runs the segment as usual and is not tried again on
 * that arena. Graphs off (the default): no capture at all. */
static void graph_runs(const Tensorflow__MetaGraphDef *mg, kn_backend *dev, int reps,
                       int *captures, int *launches) {
    rt_graph *g0 = load(mg, NULL), *g1 = load(mg, dev);
    rt_plan *p0 = plan(g0), *p1 = plan(g1);
    int c0 = ut_dev.captures, l0 = ut_dev.launches;
    for (int rep = 0; rep < reps; rep++) {
        rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, -1.5f + (float)rep, 0.375f);
        rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
        ck_assert_msg(run(p0, x, want) == MS_OK, "%s", ms_errmsg());
        ck_assert_msg(run(p1, x, got) == MS_OK, "%s", ms_errmsg());
        check_same(got, want);
        for (int i = 0; i < NFETCH; i++) {
            rt_tensor_unref(want[i]);
            rt_tensor_unref(got[i]);
        }
        rt_tensor_unref(x);
    }
    *captures = ut_dev.captures - c0;
    *launches = ut_dev.launches - l0;
    rt_plan_free(p1);
    rt_plan_free(p0);
    rt_graph_free(g0);
    rt_graph_free(g1);
}

START_TEST(graphs_replay_matches_cpu) {
    kn_backend *gdev = ut_testdev_new("testdev", dev_ops, UT_TESTDEV_ARENAS | UT_TESTDEV_GRAPHS);
    const Tensorflow__MetaGraphDef *mg = graph();
    int captures = 0, launches = 0;
    graph_runs(mg, gdev, 3, &captures, &launches); /* off by default */
    ck_assert_int_eq(captures + launches + ut_dev.refused, 0);
    rt_device_graphs_set(1);
    int runs = ut_dev.runs;
    graph_runs(mg, gdev, 5, &captures, &launches);
    ck_assert_int_eq(captures, 1);  /* the second run */
    ck_assert_int_eq(launches, 4);  /* runs 2 to 5 */
    ck_assert_int_eq(ut_dev.refused, 0);
    /* device kernel runs: 4 by the sizing run; the capturing run 3 captured
     * (MatMul, AddV2, Relu, with the Const b between them), 3 launched and
     * Mul (after host nodes); each later run 3 launched and Mul */
    ck_assert_int_eq(ut_dev.runs - runs, 4 + (3 + 3 + 1) + 3 * (3 + 1));
    /* a replay whose outside input is not where the capture read it (the
     * copy of x out of the arena, as a copy of another size would be) runs
     * the segment without its graph, and replays again once it is back */
    {
        rt_graph *g0 = load(mg, NULL), *g1 = load(mg, gdev);
        rt_plan *p0 = plan(g0), *p1 = plan(g1);
        int l0 = ut_dev.launches;
        for (int rep = 0; rep < 4; rep++) {
            ut_dev.copies_unplanned = rep == 2;
            rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {2, 3}}, 0.5f - (float)rep, 0.25f);
            rt_tensor *want[NFETCH] = {0}, *got[NFETCH] = {0};
            ck_assert_msg(run(p0, x, want) == MS_OK, "%s", ms_errmsg());
            ck_assert_msg(run(p1, x, got) == MS_OK, "%s", ms_errmsg());
            check_same(got, want);
            for (int i = 0; i < NFETCH; i++) {
                rt_tensor_unref(want[i]);
                rt_tensor_unref(got[i]);
            }
            rt_tensor_unref(x);
        }
        ut_dev.copies_unplanned = 0;
        ck_assert_int_eq(ut_dev.launches - l0, 2); /* runs 2 and 4, not 3 */
        rt_plan_free(p1);
        rt_plan_free(p0);
        rt_graph_free(g0);
        rt_graph_free(g1);
    }
    ut_dev.refuse_graphs = 1;
    graph_runs(mg, gdev, 4, &captures, &launches);
    ck_assert_int_eq(captures + launches, 0);
    ck_assert_int_eq(ut_dev.refused, 1); /* tried once on the arena */
    ut_dev.refuse_graphs = 0;
    rt_device_graphs_set(0);
    ck_assert_int_eq(ut_dev.arenas, 0);
    kn_backend_free(gdev);
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
    st = rt_model_load_on(dir, serve, 1, cpu, alldev, &m1);
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
    int runs = ut_dev.runs;
    st = rt_model_run(m1, &f, 1, &out, 1, NULL, 0, NULL, &got);
    ck_assert_msg(st == MS_OK, "%s on testdev: %s", models[_i], ms_errmsg());
    ck_assert_msg(ut_dev.runs > runs, "no node ran on the device");
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

/* The device sizing at load (srv_warmup_device_size, what the model manager
 * runs before a version on a device is AVAILABLE): half_plus_two on a test
 * device with arenas gets its arena for the synthetic shape ([1, 1]) and the
 * batch sizes given; the first request of such a shape then runs in the
 * arena (its tensors and temporaries take planned regions, no arena is
 * made), while a shape not sized is sized by its first request. A model
 * on the CPU, or on a device without arenas, is not run at all. */
static ms_status predict(rt_model *m, int64_t rows, rt_tensor **y) {
    rt_tensor *x = iota((rt_shape){.rank = 2, .dim = {rows, 1}}, 1.0f, 2.0f);
    sig_input in = {.key = "x", .tensor = x};
    sig_output *outs = NULL;
    int nouts = 0;
    rt_run_opts opts = {0};
    ms_status st = sig_run(m, "serving_default", &in, 1, NULL, 0, &opts, &outs, &nouts);
    if (st == MS_OK) {
        ck_assert_int_eq(nouts, 1);
        *y = rt_tensor_ref(outs[0].tensor);
    }
    sig_outputs_free(outs, nouts);
    rt_tensor_unref(x);
    return st;
}

START_TEST(sized_at_load) {
    char dir[1024];
    if (ut_data_path("savedmodels/saved_model_half_plus_two_cpu/00000123", dir, sizeof dir) ==
        NULL) {
        printf("exec_device: skipped sized_at_load: half_plus_two not found\n");
        return;
    }
    kn_backend *ardev = ut_testdev_new("testdev", NULL, UT_TESTDEV_ARENAS);
    const char *serve[] = {"serve"};
    rt_model *m0 = NULL, *m1 = NULL, *m2 = NULL;
    ck_assert_int_eq(rt_model_load(dir, serve, 1, cpu, &m0), MS_OK);
    ck_assert_int_eq(rt_model_load_on(dir, serve, 1, cpu, ardev, &m1), MS_OK);
    ck_assert_int_eq(rt_model_load_on(dir, serve, 1, cpu, alldev, &m2), MS_OK);
    /* the CPU path and a device without arenas: nothing runs */
    int runs = ut_dev.runs;
    ck_assert_int_eq(srv_warmup_device_size(m0, "m", 1, NULL, 0), 0);
    ck_assert_int_eq(srv_warmup_device_size(m2, "m", 1, NULL, 0), 0);
    ck_assert_int_eq(ut_dev.runs, runs);
    ck_assert_int_eq(ut_dev.arenas, 0);
    /* at load: batch 1 (the -1 dim) and the batcher's sizes 2 and 4, for
     * each of its two numeric signatures (the three taking tf.Examples, a
     * DT_STRING input, are left to their first request) */
    const int64_t batches[] = {1, 2, 4};
    ck_assert_int_eq(srv_warmup_device_size(m1, "m", 1, batches, 3), 6);
    ck_assert_int_gt(ut_dev.runs, runs);
    int arenas = ut_dev.arenas;
    ck_assert_int_eq(arenas, 6);
    ck_assert_int_eq(ut_dev.regions, 0); /* sizing runs take no region */
    for (int64_t rows = 1; rows <= 4; rows *= 2) {
        int regions = ut_dev.regions, tmps = ut_dev.tmps;
        rt_tensor *want = NULL, *got = NULL;
        ck_assert_int_eq(predict(m0, rows, &want), MS_OK);
        ck_assert_msg(predict(m1, rows, &got) == MS_OK, "%s", ms_errmsg());
        ck_assert_msg(rt_tensor_equal(got, want), "batch %lld differs", (long long)rows);
        /* the first request of a sized shape: in the arena made at load */
        ck_assert_int_gt(ut_dev.regions, regions);
        ck_assert_int_gt(ut_dev.tmps, tmps);
        ck_assert_int_eq(ut_dev.arenas, arenas);
        rt_tensor_unref(want);
        rt_tensor_unref(got);
    }
    /* a shape not sized at load: its first request sizes it */
    int regions = ut_dev.regions;
    rt_tensor *y = NULL;
    ck_assert_int_eq(predict(m1, 3, &y), MS_OK);
    rt_tensor_unref(y);
    ck_assert_int_eq(ut_dev.regions, regions);
    ck_assert_int_eq(ut_dev.arenas, arenas + 1);
    rt_model_unref(m0);
    rt_model_unref(m1);
    rt_model_unref(m2);
    ck_assert_int_eq(ut_dev.arenas, 0);
    kn_backend_free(ardev);
}
END_TEST

/* The same through the model manager, with warm-up off: the version is
 * sized on the loader thread before it is AVAILABLE, and the first request
 * of the synthetic shape runs in the arena made then. */
typedef struct mgr_loop {
    uv_loop_t loop;
    uv_async_t stop;
    srv_manager *m;
} mgr_loop;

static void mgr_on_stop(uv_async_t *a) {
    mgr_loop *c = a->data;
    srv_manager_stop(c->m);
    uv_close((uv_handle_t *)&c->stop, NULL);
}

static void *mgr_main(void *arg) {
    uv_run(&((mgr_loop *)arg)->loop, UV_RUN_DEFAULT);
    return NULL;
}

START_TEST(manager_sizes_at_load) {
    char base[1024];
    if (ut_data_path("savedmodels/saved_model_half_plus_two_cpu", base, sizeof base) == NULL) {
        printf("exec_device: skipped manager_sizes_at_load: half_plus_two not found\n");
        return;
    }
    kn_backend *ardev = ut_testdev_new("testdev", NULL, UT_TESTDEV_ARENAS);
    mgr_loop c = {0};
    ck_assert_int_eq(srv_manager_new(cpu, 0, &c.m), MS_OK);
    srv_manager_set_device(c.m, ardev);
    srv_manager_set_warmup(c.m, 0);
    ck_assert_int_eq(uv_loop_init(&c.loop), 0);
    ck_assert_int_eq(srv_manager_start(c.m, &c.loop), MS_OK);
    uv_async_init(&c.loop, &c.stop, mgr_on_stop);
    c.stop.data = &c;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, mgr_main, &c), 0);
    srv_config *cfg = NULL;
    ck_assert_int_eq(srv_config_single("m", base, &cfg), MS_OK);
    srv_manager_apply(c.m, cfg, 60);
    srv_servable sv = {0};
    ck_assert_msg(srv_manager_get(c.m, "m", 0, NULL, &sv) == MS_OK, "%s", ms_errmsg());
    int arenas = ut_dev.arenas, regions = ut_dev.regions;
    ck_assert_int_eq(arenas, 2); /* its two numeric signatures, batch 1 */
    rt_tensor *y = NULL;
    ck_assert_msg(predict(sv.model, 1, &y) == MS_OK, "%s", ms_errmsg());
    ck_assert(((float *)y->data)[0] == 2.5f); /* 1 / 2 + 2 */
    rt_tensor_unref(y);
    ck_assert_int_gt(ut_dev.regions, regions);
    ck_assert_int_eq(ut_dev.arenas, arenas);
    srv_servable_release(&sv);
    uv_async_send(&c.stop);
    pthread_join(th, NULL);
    uv_loop_close(&c.loop);
    srv_manager_free(c.m);
    ck_assert_int_eq(ut_dev.arenas, 0);
    kn_backend_free(ardev);
}
END_TEST

/* What the model manager sizes when batching is on: the allowed batch
 * sizes (batches are padded to one), at most the plan's keys; else 1. */
START_TEST(device_batches) {
    int64_t b[RT_PLAN_MEM_KEYS];
    ck_assert_int_eq(srv_warmup_device_batches(NULL, b, RT_PLAN_MEM_KEYS), 1);
    ck_assert_int_eq(b[0], 1);
    srv_batch_params bp;
    srv_batch_params_defaults(&bp);
    ck_assert_int_eq(srv_warmup_device_batches(&bp, b, RT_PLAN_MEM_KEYS), 1);
    ck_assert_int_eq(b[0], 1);
    bp.n_allowed = 5;
    for (int i = 0; i < 5; i++) bp.allowed_batch_sizes[i] = 2 << i;
    ck_assert_int_eq(srv_warmup_device_batches(&bp, b, RT_PLAN_MEM_KEYS), RT_PLAN_MEM_KEYS);
    ck_assert_int_eq(b[0], 2);
    ck_assert_int_eq(b[3], 16);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec_device");
    TCase *tc = tcase_create("placement");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, mixed_plan_matches_cpu);
    tcase_add_test(tc, no_device_op_is_the_host_plan);
    tcase_add_test(tc, copy_failure_fails_the_request);
    tcase_add_test(tc, arena_plan_matches_cpu);
    tcase_add_test(tc, sized_at_load);
    tcase_add_test(tc, graphs_replay_matches_cpu);
    tcase_add_test(tc, manager_sizes_at_load);
    tcase_add_test(tc, device_batches);
    tcase_add_loop_test(tc, real_models_match_cpu, 0, (int)(sizeof models / sizeof models[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
