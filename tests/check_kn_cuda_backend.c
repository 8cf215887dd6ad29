/* check_kn_cuda_backend.c - the CUDA backend's table (kernels/cuda/kn_cuda_backend)
 * without a GPU: its op list (sorted, each op with a CPU kernel to fall back
 * on), the host-side arithmetic its kernels decide with (TensorFlow's SAME /
 * VALID / explicit output sizes and padding, the broadcasts the GPU kernel
 * takes, activation names), the refusal to make the backend on a machine
 * without a usable GPU, and the placement the executor makes with it: the
 * test network of util_convnet (unfused and after load-time fusion) runs on a
 * device backend that has exactly the CUDA table's ops (the CPU kernels over
 * memory of its own kind, as check_exec_device), binding every node whose op
 * is in the table to the device, and gives the CPU's bytes.
 * A DICOM graph (DcmDecodeHU -> DcmWindow) on that device is split at load
 * into the host's _DcmDecodeRaw and the device's _DcmPixelTransform
 * (kn_dicom_xform.h) and gives the bytes of the fused CPU pass, for native
 * files (stored words cross) and compressed ones (HU cross).
 * The same network on a real GPU: check_cuda_backend (label gpu). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_cuda_backend.h"
#include "kn_cuda_probe.h"
#include "ms_status.h"
#include "rt_exec.h"
#include "rt_fuse.h"
#include "rt_graph.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_convnet.h"
#include "util_node.h"

START_TEST(ops_sorted_and_on_cpu) {
    kn_backend *cpu = kn_cpu_backend_new(1);
    const char *const *ops = kn_cuda_backend_ops();
    int n = 0;
    for (; ops[n]; n++) {
        if (n > 0) ck_assert_msg(strcmp(ops[n - 1], ops[n]) < 0, "%s before %s", ops[n - 1], ops[n]);
        ck_assert_msg(kn_backend_kernel(cpu, ops[n]) != NULL, "%s has no CPU kernel", ops[n]);
        ck_assert(kn_cuda_backend_has_op(ops[n]));
    }
    ck_assert_int_eq(n, 40); /* 39 TensorFlow ops and _DcmPixelTransform */
    const char *absent[] = {"ArgMax",      "DcmWindow", "DcmDecodeWindow", "_DcmDecodeRaw",
                            "Placeholder", "Const",     "BatchMatMulV2",   "",
                            NULL};
    for (int i = 0; absent[i]; i++) ck_assert(!kn_cuda_backend_has_op(absent[i]));
    ck_assert(!kn_cuda_backend_has_op(NULL));
    kn_backend_free(cpu);
}
END_TEST

START_TEST(spatial_arithmetic) {
    int64_t o = 0, lo = 0, hi = 0;
    /* SAME, 224, k 3, s 2: out ceil(224/2) = 112, total (111*2 + 3) - 224 = 1: 0 before, 1 after */
    ck_assert_int_eq(kn_cuda__spatial(224, 3, 2, 1, 1, &o, &lo, &hi), MS_OK);
    ck_assert(o == 112 && lo == 0 && hi == 1);
    /* SAME, 9, k 3, s 2: out 5, total 8 + 3 - 9 = 2: 1 and 1 */
    ck_assert_int_eq(kn_cuda__spatial(9, 3, 2, 1, 1, &o, &lo, &hi), MS_OK);
    ck_assert(o == 5 && lo == 1 && hi == 1);
    /* SAME, 5, k 3, s 1, dilation 2: extent 5, total 4 + 5 - 5 = 4: 2 and 2 */
    ck_assert_int_eq(kn_cuda__spatial(5, 3, 1, 2, 1, &o, &lo, &hi), MS_OK);
    ck_assert(o == 5 && lo == 2 && hi == 2);
    /* SAME, 1, k 7, s 1: total 6: 3 and 3 */
    ck_assert_int_eq(kn_cuda__spatial(1, 7, 1, 1, 1, &o, &lo, &hi), MS_OK);
    ck_assert(o == 1 && lo == 3 && hi == 3);
    /* VALID, 7, k 3, s 2: (7 - 3) / 2 + 1 = 3; dilation 2: extent 5: (7 - 5) / 2 + 1 = 2 */
    ck_assert_int_eq(kn_cuda__spatial(7, 3, 2, 1, 0, &o, &lo, &hi), MS_OK);
    ck_assert(o == 3 && lo == 0 && hi == 0);
    ck_assert_int_eq(kn_cuda__spatial(7, 3, 2, 2, 0, &o, &lo, &hi), MS_OK);
    ck_assert_int_eq(o, 2);
    /* explicit 1 / 2 around 6, k 3, s 1: 6 + 3 - 3 + 1 = 7 */
    lo = 1, hi = 2;
    ck_assert_int_eq(kn_cuda__spatial(6, 3, 1, 1, -1, &o, &lo, &hi), MS_OK);
    ck_assert(o == 7 && lo == 1 && hi == 2);
    /* no output, bad arguments */
    ck_assert_int_eq(kn_cuda__spatial(2, 3, 1, 1, 0, &o, &lo, &hi), MS_EINVAL);
    ck_assert_int_eq(kn_cuda__spatial(8, 0, 1, 1, 1, &o, &lo, &hi), MS_EINVAL);
    ck_assert_int_eq(kn_cuda__spatial(8, 3, 0, 1, 1, &o, &lo, &hi), MS_EINVAL);
}
END_TEST

START_TEST(broadcasts) {
    rt_shape a = {.rank = 3, .dim = {2, 3, 4}};
    struct {
        rt_shape b;
        int comm, ok, swap;
        int64_t nb;
    } cases[] = {
        {{.rank = 3, .dim = {2, 3, 4}}, 0, 1, 0, 24}, /* same shape */
        {{.rank = 1, .dim = {4}}, 0, 1, 0, 4},        /* a bias over the last axis */
        {{.rank = 2, .dim = {1, 4}}, 0, 1, 0, 4},     /* leading 1s dropped */
        {{.rank = 2, .dim = {3, 4}}, 0, 1, 0, 12},
        {{.rank = 0}, 0, 1, 0, 1},                    /* a scalar */
        {{.rank = 3, .dim = {2, 1, 4}}, 1, 0, 0, 0},  /* a middle axis: not on the GPU */
        {{.rank = 1, .dim = {3}}, 1, 0, 0, 0},
        {{.rank = 4, .dim = {5, 2, 3, 4}}, 0, 0, 0, 0}, /* b larger, Sub / RealDiv */
        {{.rank = 4, .dim = {5, 2, 3, 4}}, 1, 1, 1, 24}, /* b larger, commutative: swapped */
        {{.rank = 1, .dim = {0}}, 0, 0, 0, 0},           /* empty */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t nb = -1;
        int swap = -1;
        int ok = kn_cuda__bcast(&a, &cases[i].b, cases[i].comm, &nb, &swap);
        ck_assert_msg(ok == cases[i].ok, "case %zu: %d", i, ok);
        if (ok) {
            ck_assert_int_eq(swap, cases[i].swap);
            ck_assert_int_eq(nb, cases[i].nb);
        }
    }
}
END_TEST

START_TEST(activation_names) {
    ck_assert_int_eq(kn_cuda__act("Relu", 4), 1);
    ck_assert_int_eq(kn_cuda__act("Relu6", 5), 2);
    ck_assert_int_eq(kn_cuda__act("Sigmoid", 7), 3);
    ck_assert_int_eq(kn_cuda__act("Tanh", 4), 4);
    ck_assert_int_eq(kn_cuda__act("Relu6", 4), 1); /* length-delimited: "Relu" */
    ck_assert_int_eq(kn_cuda__act("LeakyRelu", 9), -1);
    ck_assert_int_eq(kn_cuda__act("Elu", 3), -1);
}
END_TEST

START_TEST(no_backend_without_gpu) {
    kn_cuda_report r;
    kn_cuda_probe(NULL, &r);
    if (r.nusable > 0) {
        printf("kn_cuda_backend: a GPU is usable here; the refusal is not checked\n");
        return;
    }
    kn_backend *cpu = kn_cpu_backend_new(1), *dev = (kn_backend *)1;
    ms_status st = kn_cuda_backend_new(0, cpu, &dev);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_ptr_null(dev);
    ck_assert_msg(strlen(ms_errmsg()) > 10, "no reason given: '%s'", ms_errmsg());
    printf("kn_cuda_backend: without a GPU: %s\n", ms_errmsg());
    kn_backend_free(cpu);
}
END_TEST

/* ---- a device backend with the CUDA table's ops, over the CPU kernels ---- */

#define CAP_MEM 9
static kn_backend *g_cpu;
static int g_dev_runs;

static ms_status recode(const rt_tensor *t, int to_dev, rt_tensor **out) {
    if ((t->buf->device == CAP_MEM) == to_dev)
        return ms_errf(MS_EINTERNAL, "captest: tensor already in %s memory", to_dev ? "device" : "host");
    rt_tensor *c = NULL;
    ms_status st = rt_tensor_clone(t, &c);
    if (st != MS_OK) return st;
    uint8_t *b = c->data;
    for (size_t i = 0; i < rt_tensor_nbytes(c); i++) b[i] ^= 0x5A;
    c->buf->device = to_dev ? CAP_MEM : 0;
    *out = c;
    return MS_OK;
}

static ms_status cap_to_device(kn_backend *b, rt_tensor *h, rt_tensor **out) {
    (void)b;
    return recode(h, 1, out);
}

static ms_status cap_to_host(kn_backend *b, rt_tensor *d, rt_tensor **out) {
    (void)b;
    return recode(d, 0, out);
}

typedef struct cap_state {
    const kn_kernel *k;
    void *st;
} cap_state;

static ms_status cap_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    cap_state *s = calloc(1, sizeof(*s));
    s->k = kn_backend_kernel(g_cpu, node->op);
    ms_status st = s->k->prepare ? s->k->prepare(node, const_in, &s->st) : MS_OK;
    if (st != MS_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static void cap_release(void *state) {
    cap_state *s = state;
    if (s && s->k->release) s->k->release(s->st);
    free(s);
}

static ms_status cap_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    cap_state *s = state;
    rt_tensor *hin[16] = {0}, *hout[16] = {0};
    ck_assert_int_le(node->nin, 16);
    ck_assert_int_le(node->nout, 16);
    ms_status st = MS_OK;
    g_dev_runs++;
    for (int i = 0; i < node->nin && st == MS_OK; i++) st = recode(in[i], 0, &hin[i]);
    if (st == MS_OK) st = s->k->compute(ctx, node, s->st, hin, hout);
    for (int i = 0; i < node->nout && st == MS_OK; i++)
        if (hout[i]) st = recode(hout[i], 1, &out[i]);
    for (int i = 0; i < 16; i++) {
        rt_tensor_unref(hin[i]);
        rt_tensor_unref(hout[i]);
    }
    return st;
}

static kn_kernel cap_table[64];

static const kn_kernel *cap_kernel(kn_backend *b, const char *op) {
    (void)b;
    const char *const *ops = kn_cuda_backend_ops();
    for (int i = 0; ops[i] && i < 64; i++)
        if (strcmp(ops[i], op) == 0) {
            cap_table[i] = (kn_kernel){.op = ops[i], .prepare = cap_prepare,
                                       .compute = cap_compute, .release = cap_release};
            return &cap_table[i];
        }
    return NULL;
}

static const char *cap_name(kn_backend *b) {
    (void)b;
    return "captest";
}

static kn_backend capdev = {
    .api_version = KN_BACKEND_API_VERSION,
    .iface = {.name = cap_name, .kernel = cap_kernel, .to_device = cap_to_device,
              .to_host = cap_to_host},
    .intra_op_threads = 1,
};

static void run_graph(rt_graph *g, rt_tensor *x, rt_tensor **outs) {
    rt_edge fe, fo[UT_CONVNET_NFETCH];
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    for (int i = 0; i < UT_CONVNET_NFETCH; i++)
        ck_assert_int_eq(rt_graph_tensor(g, ut_convnet_fetches[i], &fo[i]), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, &fe, 1, fo, UT_CONVNET_NFETCH, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    kn_ctx ctx = {.nthreads = 1};
    st = rt_plan_run(p, &ctx, NULL, &x, outs);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    rt_plan_free(p);
}

START_TEST(convnet_placement) {
    int fused = _i;
    g_cpu = kn_cpu_backend_new(1);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_convnet_build(gb);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_graph *g0 = NULL, *g1 = NULL;
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g0), MS_OK);
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g1), MS_OK);
    if (fused) {
        int n0 = 0, n1 = 0;
        ck_assert_int_eq(rt_fuse_graph(g0, &n0), MS_OK);
        ck_assert_int_eq(rt_fuse_graph(g1, &n1), MS_OK);
        ck_assert_int_ge(n1, 2);
        ck_assert_str_eq(g1->nodes[rt_graph_find(g1, "r1")].kn.op, "_FusedConv2D");
        ck_assert_str_eq(g1->nodes[rt_graph_find(g1, "ba")].kn.op, "_FusedMatMul");
    }
    g1->device = &capdev;
    rt_tensor *x = ut_convnet_input(7);
    rt_tensor *want[UT_CONVNET_NFETCH] = {0}, *got[UT_CONVNET_NFETCH] = {0};
    run_graph(g0, x, want);
    g_dev_runs = 0;
    run_graph(g1, x, got);
    /* every node of the table's ops ran on the device, the others did not */
    int expect = 0, twin[1024] = {0};
    ck_assert_int_le(g1->n, 1024);
    for (int v = 0; v < g1->n; v++)
        if (g1->nodes[v].unfused >= 0) twin[g1->nodes[v].unfused] = 1;
    for (int v = 0; v < g1->n; v++) {
        const rt_gnode *n = &g1->nodes[v];
        /* absorbed nodes and fused nodes' twins are not in the plan */
        if (n->kernel == NULL || n->kn.op == NULL || n->fused_into >= 0 || twin[v]) continue;
        int dev = n->kernel->compute == cap_compute;
        int host_only = strcmp(n->kn.op, "Const") == 0 || strcmp(n->kn.op, "Placeholder") == 0;
        if (dev) expect++;
        if (kn_cuda_backend_has_op(n->kn.op) && !host_only)
            ck_assert_msg(dev, "node %s (%s) is not on the device", n->name, n->kn.op);
        else
            ck_assert_msg(!dev, "node %s (%s) is on the device", n->name, n->kn.op);
    }
    for (int i = 0; ut_convnet_host_nodes[i]; i++)
        ck_assert(g1->nodes[rt_graph_find(g1, ut_convnet_host_nodes[i])].kernel->compute != cap_compute);
    ck_assert_int_eq(g_dev_runs, expect);
    ck_assert_int_ge(expect, fused ? 20 : 24);
    for (int i = 0; i < UT_CONVNET_NFETCH; i++) {
        ck_assert_int_eq(got[i]->buf->device, 0);
        ck_assert_msg(rt_tensor_equal(got[i], want[i]), "fetch %s differs", ut_convnet_fetches[i]);
        rt_tensor_unref(got[i]);
        rt_tensor_unref(want[i]);
    }
    rt_tensor_unref(x);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    kn_backend_free(g_cpu);
}
END_TEST

/* ---- the DICOM split: DcmDecodeHU -> DcmWindow on the device ---- */

static rt_tensor *read_files(const char *const *paths, int n) {
    rt_str s[8];
    uint8_t *buf[8] = {0};
    int k = 0;
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (f == NULL) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf[k] = malloc((size_t)len);
        ck_assert(buf[k] != NULL && fread(buf[k], 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        s[k] = (rt_str){.data = buf[k], .len = len};
        k++;
    }
    if (k == 0) return NULL;
    rt_shape sh = rt_shape_make(1, (int64_t[]){k});
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &t), MS_OK);
    for (int i = 0; i < k; i++) free(buf[i]);
    return t;
}

static rt_tensor *run_dicom(rt_graph *g, rt_tensor *x) {
    rt_edge fe, fo;
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "win", &fo), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, &fe, 1, &fo, 1, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    kn_ctx ctx = {.nthreads = 1};
    rt_tensor *out = NULL;
    st = rt_plan_run(p, &ctx, NULL, &x, &out);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    rt_plan_free(p);
    return out;
}

/* _i: 0 no resize NHWC, 1 resize masked NHWC, 2 resize unmasked NCHW */
START_TEST(dicom_split_placement) {
    g_cpu = kn_cpu_backend_new(1);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    Tensorflow__NodeDef *x = rt_gb_node(gb, "Placeholder", "x");
    rt_gb_attr_type(gb, x, "dtype", RT_DT_STRING);
    Tensorflow__NodeDef *dec = rt_gb_node(gb, "DcmDecodeHU", "dec");
    rt_gb_input(gb, dec, "x");
    rt_gb_attr_f(gb, dec, "pad_value", 100.f); /* windowed 0.65: padding shows */
    Tensorflow__NodeDef *win = rt_gb_node(gb, "DcmWindow", "win");
    rt_gb_input(gb, win, "dec:0");
    if (_i == 1) rt_gb_input(gb, win, "dec:1");
    rt_gb_attr_f(gb, win, "center", 40.f);
    rt_gb_attr_f(gb, win, "width", 400.f);
    rt_gb_attr_str(gb, win, "data_format", _i == 2 ? "NCHW" : "NHWC");
    if (_i > 0) rt_gb_attr_ilist(gb, win, "size", (int64_t[]){48, 40}, 2);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_graph *g0 = NULL, *g1 = NULL;
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g0), MS_OK);
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g1), MS_OK);
    g1->device = &capdev; /* set before fusion, as rt_model_load_on does */
    int n0 = 0, n1 = 0;
    ck_assert_int_eq(rt_fuse_graph(g0, &n0), MS_OK);
    ck_assert_int_eq(rt_fuse_graph(g1, &n1), MS_OK);
    ck_assert_int_eq(n0, 1);
    ck_assert_int_eq(n1, 1);
    /* the host plan keeps the fused pass; the device graph is split */
    ck_assert_str_eq(g0->nodes[rt_graph_find(g0, "win")].kn.op, "DcmDecodeWindow");
    const rt_gnode *w1 = &g1->nodes[rt_graph_find(g1, "win")];
    ck_assert_str_eq(w1->kn.op, "_DcmPixelTransform");
    ck_assert_int_eq(w1->nin, 2);
    ck_assert_str_eq(g1->nodes[w1->in[0].node].kn.op, "_DcmDecodeRaw");

    const char *src = getenv("DCM_SRC");
    const char *pd = "/usr/lib/python3/dist-packages/pydicom/data/test_files";
    char p0[1024], p1[1024], p2[1024], p3[1024], p4[1024];
    snprintf(p0, sizeof p0, "%s/tests/data/onnx/ct64.dcm", src ? src : ".");
    snprintf(p1, sizeof p1, "%s/CT_small.dcm", pd);
    snprintf(p2, sizeof p2, "%s/MR_small.dcm", pd);
    snprintf(p3, sizeof p3, "%s/JPEG2000.dcm", pd);
    snprintf(p4, sizeof p4, "%s/MR_small_RLE.dcm", pd);
    /* native 16-bit files only (stored words to the device), then a batch
     * with compressed files (HU to the device) */
    const char *batch_a[] = {p0, p1, p2}, *batch_b[] = {p0, p3, p4, p2};
    for (int b = 0; b < 2; b++) {
        rt_tensor *in = b == 0 ? read_files(batch_a, 3) : read_files(batch_b, 4);
        ck_assert(in != NULL);
        rt_tensor *want = run_dicom(g0, in);
        g_dev_runs = 0;
        rt_tensor *got = run_dicom(g1, in);
        ck_assert_int_eq(g_dev_runs, 1); /* the transform, on the device */
        ck_assert_int_eq(got->buf->device, 0);
        ck_assert(rt_shape_equal(&got->shape, &want->shape));
        ck_assert_int_ge(want->shape.dim[0], 2);
        ck_assert_msg(memcmp(got->data, want->data, rt_tensor_nbytes(want)) == 0,
                      "split DICOM bytes differ (batch %d, case %d)", b, (int)_i);
        rt_tensor_unref(in);
        rt_tensor_unref(want);
        rt_tensor_unref(got);
    }
    ck_assert(w1->kernel->compute == cap_compute);
    ck_assert(g1->nodes[w1->in[0].node].kernel->compute != cap_compute);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    kn_backend_free(g_cpu);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kn_cuda_backend");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, ops_sorted_and_on_cpu);
    tcase_add_test(tc, spatial_arithmetic);
    tcase_add_test(tc, broadcasts);
    tcase_add_test(tc, activation_names);
    tcase_add_test(tc, no_backend_without_gpu);
    tcase_add_loop_test(tc, convnet_placement, 0, 2);
    tcase_add_loop_test(tc, dicom_split_placement, 0, 3);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
