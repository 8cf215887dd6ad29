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
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_cuda_backend.h"
#include "kn_cuda_precision.h"
#include "kn_cuda_probe.h"
#include "kn_memplan.h"
#include "ms_status.h"
#include "rt_exec.h"
#include "rt_fuse.h"
#include "rt_graph.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_convnet.h"
#include "util_node.h"
#include "util_testdev.h"

START_TEST(ops_sorted_and_on_cpu) {
    kn_backend *cpu = kn_cpu_backend_new(1);
    const char *const *ops = kn_cuda_backend_ops();
    int n = 0;
    for (; ops[n]; n++) {
        if (n > 0) ck_assert_msg(strcmp(ops[n - 1], ops[n]) < 0, "%s before %s", ops[n - 1], ops[n]);
        ck_assert_msg(kn_backend_kernel(cpu, ops[n]) != NULL, "%s has no CPU kernel", ops[n]);
        ck_assert(kn_cuda_backend_has_op(ops[n]));
    }
    ck_assert_int_eq(n, 52); /* 51 TensorFlow ops and _DcmPixelTransform */
    const char *absent[] = {"ArgMax",      "DcmWindow", "DcmDecodeWindow", "_DcmDecodeRaw",
                            "Placeholder", "Const",     "Shape",           "ArgMin",
                            "",            NULL};
    for (int i = 0; absent[i]; i++) ck_assert(!kn_cuda_backend_has_op(absent[i]));
    const char *added[] = {"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gather", "GatherV2",
                           "Sum",         "Max",           "Min",           "Prod",   "Mean",
                           "ResizeNearestNeighbor",        "Slice",         "StridedSlice", NULL};
    for (int i = 0; added[i]; i++) ck_assert_msg(kn_cuda_backend_has_op(added[i]), "%s", added[i]);
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
    /* the general form: instance norm's [N, H, W, C] - [N, 1, 1, C], its
     * reverse, an outer product, incompatible and empty shapes */
    struct {
        rt_shape a, b;
        int ok, rank;
        int64_t out[4], dim[4], sa[4], sb[4];
    } g[] = {
        {{4, {2, 5, 6, 3}}, {4, {2, 1, 1, 3}}, 1, 3, {2, 5, 6, 3}, {2, 30, 3}, {90, 3, 1}, {3, 0, 1}},
        {{4, {2, 1, 1, 3}}, {4, {2, 5, 6, 3}}, 1, 3, {2, 5, 6, 3}, {2, 30, 3}, {3, 0, 1}, {90, 3, 1}},
        {{2, {4, 1}}, {1, {7}}, 1, 2, {4, 7}, {4, 7}, {1, 0}, {0, 1}},
        {{3, {2, 1, 4}}, {3, {2, 3, 4}}, 1, 3, {2, 3, 4}, {2, 3, 4}, {4, 0, 1}, {12, 4, 1}},
        {{2, {3, 4}}, {2, {3, 4}}, 1, 1, {3, 4}, {12}, {1}, {1}},
        {{2, {1, 1}}, {0, {0}}, 1, 1, {1, 1}, {1}, {0}, {0}},
        {{4, {3, 1, 5, 1}}, {4, {1, 4, 1, 2}}, 1, -1, {3, 4, 5, 2}, {0}, {0}, {0}}, /* walk only */
        {{3, {5, 1, 3}}, {2, {4, 3}}, 1, -1, {5, 4, 3}, {0}, {0}, {0}},
        {{2, {3, 4}}, {1, {3}}, 0, 0, {0}, {0}, {0}, {0}},
        {{2, {3, 0}}, {1, {1}}, 0, 0, {0}, {0}, {0}, {0}},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        rt_shape os;
        kn_cuda_bcast_shape bs;
        int ok = kn_cuda__bcast_general(&g[i].a, &g[i].b, &os, &bs);
        ck_assert_msg(ok == g[i].ok, "general case %zu: %d", i, ok);
        if (!ok) continue;
        ck_assert_int_eq(os.rank, g[i].a.rank > g[i].b.rank ? g[i].a.rank : g[i].b.rank);
        for (int d = 0; d < os.rank; d++) ck_assert_int_eq(os.dim[d], g[i].out[d]);
        ck_assert_msg(g[i].rank < 0 || bs.rank == g[i].rank, "general case %zu: rank %d", i, bs.rank);
        for (int d = 0; g[i].rank >= 0 && d < bs.rank; d++) {
            ck_assert_msg(bs.dim[d] == g[i].dim[d] && bs.sa[d] == g[i].sa[d] && bs.sb[d] == g[i].sb[d],
                          "general case %zu axis %d: %lld %lld %lld", i, d, (long long)bs.dim[d],
                          (long long)bs.sa[d], (long long)bs.sb[d]);
        }
        /* binary_bcast_kernel's index walk (kn_cuda_elementwise.cu), on the
         * host: each output reads the operands' elements that TensorFlow's
         * broadcasting names */
        int64_t n = 1;
        for (int d = 0; d < os.rank; d++) n *= os.dim[d];
        for (int64_t t = 0; t < n; t++) {
            int64_t r = t, ia = 0, ib = 0;
            for (int d = bs.rank - 1; d >= 0; d--) {
                int64_t c = r % bs.dim[d];
                r /= bs.dim[d];
                ia += c * bs.sa[d];
                ib += c * bs.sb[d];
            }
            int64_t q = t, wa = 0, wb = 0, ma = 1, mb = 1;
            for (int d = os.rank - 1; d >= 0; d--) {
                int64_t c = q % os.dim[d];
                q /= os.dim[d];
                int xa = d - (os.rank - g[i].a.rank), xb = d - (os.rank - g[i].b.rank);
                if (xa >= 0) {
                    wa += (g[i].a.dim[xa] == 1 ? 0 : c) * ma;
                    ma *= g[i].a.dim[xa];
                }
                if (xb >= 0) {
                    wb += (g[i].b.dim[xb] == 1 ? 0 : c) * mb;
                    mb *= g[i].b.dim[xb];
                }
            }
            ck_assert_msg(ia == wa && ib == wb, "general case %zu, output %lld: reads %lld / %lld, not %lld / %lld",
                          i, (long long)t, (long long)ia, (long long)ib, (long long)wa, (long long)wb);
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

/* ---- the geometry the data-movement, reduction and BatchMatMul kernels get
 * from the host, checked against the CPU kernels: each plan is walked on
 * the host the way its CUDA kernel walks it (kn_cuda_index.cu,
 * kn_cuda_reduce.cu), so a wrong base, stride, merge or offset gives other
 * values than the CPU's. The CUDA code itself runs only on a GPU
 * (check_cuda_ops). ---- */

/* The strided copy of kn_cuda_strided_copy, float elements. */
static rt_tensor *walk_strided(const kn_cuda_strided *p, const rt_tensor *x, const rt_shape *os) {
    rt_tensor *y = tu_iota_f32(*os, 0, 0);
    int64_t total = 1;
    for (int d = 0; d < p->rank; d++) total *= p->dim[d];
    ck_assert_int_eq(total, y->nelem);
    const float *xs = rt_tensor_f32((rt_tensor *)x);
    float *ys = rt_tensor_f32(y);
    for (int64_t t = 0; t < total; t++) {
        int64_t r = t, src = p->base;
        for (int d = p->rank - 1; d >= 0; d--) {
            src += (r % p->dim[d]) * p->stride[d];
            r /= p->dim[d];
        }
        ck_assert(src >= 0 && src < x->nelem);
        ys[t] = xs[src];
    }
    return y;
}

static rt_tensor *i64_vec(int n, const int64_t *v) {
    return tu_t(RT_DT_INT64, TU_SHAPE(n), v, n);
}

START_TEST(strided_slice_plans) {
    static const struct {
        int rank;
        int64_t dims[4];
        int n;
        int64_t b[4], e[4], s[4];
        int64_t masks[5]; /* begin, end, ellipsis, new_axis, shrink */
    } cases[] = {
        {3, {4, 5, 6}, 3, {0, 1, 2}, {4, 4, 6}, {1, 1, 2}, {0, 0, 0, 0, 0}},
        {3, {4, 5, 6}, 3, {-1, 0, 0}, {0, 5, 6}, {-1, 2, 3}, {0, 0, 0, 0, 0}},     /* reversed */
        {3, {4, 5, 6}, 2, {1, 0}, {3, 0}, {1, 1}, {0, 2, 0, 0, 0}},                  /* end mask */
        {3, {4, 5, 6}, 2, {2, 3}, {3, 4}, {1, 1}, {0, 0, 0, 0, 1}},                  /* shrink */
        {3, {4, 5, 6}, 3, {0, 0, 1}, {0, 0, 5}, {1, 1, 2}, {0, 0, 1, 0, 0}},         /* ... , 1:5:2 */
        {3, {4, 5, 6}, 3, {0, 1, 0}, {0, 3, 0}, {1, 1, 1}, {0, 0, 0, 1, 0}},         /* new axis */
        {3, {4, 5, 6}, 4, {0, 0, 0, 2}, {0, 0, 0, 3}, {1, 1, 1, 1}, {0, 0, 2, 1, 8}}, /* ... */
        {3, {4, 5, 6}, 1, {-2}, {-1}, {1}, {0, 0, 0, 0, 1}},
        {3, {4, 5, 6}, 3, {3, 4, 5}, {-10, -10, -10}, {-1, -2, -3}, {0, 0, 0, 0, 0}}, /* clamped */
        {3, {4, 5, 6}, 2, {5, 0}, {6, 0}, {1, 1}, {0, 0, 0, 0, 1}},  /* shrink out of range */
        {3, {4, 5, 6}, 1, {0}, {2}, {0}, {0, 0, 0, 0, 0}},           /* stride 0 */
        {2, {7, 3}, 2, {0, 0}, {7, 3}, {3, 1}, {1, 3, 0, 0, 0}},
        {2, {7, 3}, 2, {2, 0}, {2, 3}, {1, 1}, {0, 0, 0, 0, 0}},     /* empty */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_shape xs = {.rank = cases[c].rank};
        for (int d = 0; d < xs.rank; d++) xs.dim[d] = cases[c].dims[d];
        rt_tensor *x = tu_iota_f32(xs, 0, 1);
        rt_tensor *in[4] = {x, i64_vec(cases[c].n, cases[c].b), i64_vec(cases[c].n, cases[c].e),
                            i64_vec(cases[c].n, cases[c].s)};
        Tensorflow__NodeDef *def = tu_node_new("StridedSlice", "ss");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        static const char *const keys[5] = {"begin_mask", "end_mask", "ellipsis_mask",
                                            "new_axis_mask", "shrink_axis_mask"};
        for (int i = 0; i < 5; i++) tu_attr_i(def, keys[i], cases[c].masks[i]);
        rt_tensor *want = NULL;
        ms_status st = tu_run(def, in, 4, &want, 1);
        tu_node_free(def);
        kn_cuda_strided p;
        rt_shape os;
        int ok = kn_cuda__strided_slice(&xs, cases[c].b, cases[c].e, cases[c].s, cases[c].n,
                                        cases[c].masks, &p, &os);
        ck_assert_msg(ok == (st == MS_OK), "case %zu: plan %d, CPU %d", c, ok, (int)st);
        if (ok) {
            ck_assert_msg(rt_shape_equal(&os, &want->shape), "case %zu: shape", c);
            rt_tensor *got = walk_strided(&p, x, &os);
            ck_assert_msg(rt_tensor_equal(got, want), "case %zu: values", c);
            rt_tensor_unref(got);
        }
        rt_tensor_unref(want);
        tu_unref(in, 4);
    }
    /* Slice, and the merge of contiguous axes: [1:3, :, :] of (4, 5, 6) is one run */
    rt_shape xs = TU_SHAPE(4, 5, 6);
    kn_cuda_strided p;
    rt_shape os;
    ck_assert(kn_cuda__slice(&xs, (int64_t[]){1, 0, 0}, (int64_t[]){2, -1, -1}, 3, &p, &os));
    ck_assert(p.rank == 1 && p.dim[0] == 60 && p.stride[0] == 1 && p.base == 30);
    ck_assert(rt_shape_equal(&os, &TU_SHAPE(2, 5, 6)));
    ck_assert(kn_cuda__slice(&xs, (int64_t[]){1, 2, 3}, (int64_t[]){3, 2, 2}, 3, &p, &os));
    rt_tensor *x = tu_iota_f32(xs, 0, 1);
    rt_tensor *in[3] = {x, i64_vec(3, (int64_t[]){1, 2, 3}), i64_vec(3, (int64_t[]){3, 2, 2})};
    Tensorflow__NodeDef *def = tu_node_new("Slice", "sl");
    tu_attr_type(def, "T", RT_DT_FLOAT);
    rt_tensor *want = tu_run1(def, in, 3), *got = walk_strided(&p, x, &os);
    ck_assert(rt_tensor_equal(got, want));
    ck_assert(!kn_cuda__slice(&xs, (int64_t[]){1, 2, 3}, (int64_t[]){4, 2, 2}, 3, &p, &os));
    ck_assert(!kn_cuda__slice(&xs, (int64_t[]){1, 2}, (int64_t[]){1, 1}, 2, &p, &os));
    rt_tensor_unref(got);
    rt_tensor_unref(want);
    tu_unref(in, 3);
}
END_TEST

/* kn_cuda_reduce's one-thread-per-output walk (double, memory order). */
static rt_tensor *walk_reduce(kn_cuda_redop op, const kn_cuda_reduce_shape *p, const rt_tensor *x,
                              const rt_shape *os) {
    rt_tensor *y = tu_iota_f32(*os, 0, 0);
    ck_assert_int_eq(y->nelem, p->nout);
    int64_t kd[8], ks[8], rd[8], rs[8], stride = 1;
    int nk = 0, nr = 0;
    for (int d = p->rank - 1; d >= 0; d--) {
        if (p->red[d]) rd[nr] = p->dim[d], rs[nr++] = stride;
        else kd[nk] = p->dim[d], ks[nk++] = stride;
        stride *= p->dim[d];
    }
    ck_assert_int_eq(stride, x->nelem);
    const float *xs = rt_tensor_f32((rt_tensor *)x);
    for (int64_t o = 0; o < p->nout; o++) {
        int64_t base = 0, r = o;
        for (int i = 0; i < nk; i++) { /* kd[0] is the last kept axis */
            base += (r % kd[i]) * ks[i];
            r /= kd[i];
        }
        double acc = op == KN_CUDA_RED_PROD ? 1 : op == KN_CUDA_RED_MAX ? -INFINITY
                     : op == KN_CUDA_RED_MIN ? INFINITY : 0;
        for (int64_t q = 0; q < p->count; q++) {
            int64_t off = base, qq = q;
            for (int i = 0; i < nr; i++) {
                off += (qq % rd[i]) * rs[i];
                qq /= rd[i];
            }
            double v = xs[off];
            acc = op == KN_CUDA_RED_PROD ? acc * v : op == KN_CUDA_RED_MAX ? (v > acc ? v : acc)
                  : op == KN_CUDA_RED_MIN ? (v < acc ? v : acc) : acc + v;
        }
        if (op == KN_CUDA_RED_MEAN) acc /= (double)p->count;
        rt_tensor_f32(y)[o] = (float)acc;
    }
    return y;
}

START_TEST(reduce_plans) {
    static const char *const ops[5] = {"Sum", "Mean", "Max", "Min", "Prod"};
    static const struct {
        int rank;
        int64_t dims[5];
        int na;
        int64_t axes[5];
    } cases[] = {
        {4, {2, 5, 7, 3}, 2, {1, 2}},      /* spatial */
        {4, {2, 5, 7, 3}, 2, {0, 2}},      /* alternating: K R K R after merging? */
        {4, {2, 5, 7, 3}, 1, {-1}},
        {5, {3, 1, 4, 2, 6}, 3, {0, 2, 4}},
        {3, {4, 1, 6}, 2, {1, 2}},         /* a size-1 reduced axis */
        {3, {4, 5, 6}, 0, {0}},            /* nothing reduced */
        {3, {4, 5, 6}, 3, {0, 1, 2}},      /* everything */
        {2, {1, 1}, 1, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int o = 0; o < 5; o++)
            for (int keep = 0; keep < 2; keep++) {
                rt_shape xs = {.rank = cases[c].rank};
                for (int d = 0; d < xs.rank; d++) xs.dim[d] = cases[c].dims[d];
                rt_tensor *x = tu_iota_f32(xs, 0, 0);
                float *f = rt_tensor_f32(x);
                for (int64_t i = 0; i < x->nelem; i++)
                    f[i] = 0.25f + (float)((i * 7919) % 113) / 64.0f; /* Prod stays finite */
                rt_tensor *in[2] = {x, i64_vec(cases[c].na, cases[c].axes)};
                Tensorflow__NodeDef *def = tu_node_new(ops[o], "r");
                tu_attr_type(def, "T", RT_DT_FLOAT);
                tu_attr_b(def, "keep_dims", keep);
                rt_tensor *want = tu_run1(def, in, 2);
                int red[8] = {0};
                for (int i = 0; i < cases[c].na; i++)
                    red[cases[c].axes[i] < 0 ? cases[c].axes[i] + xs.rank : cases[c].axes[i]] = 1;
                kn_cuda_reduce_shape p;
                kn_cuda__reduce_plan(&xs, red, &p);
                rt_tensor *got = walk_reduce((kn_cuda_redop)o, &p, x, &want->shape);
                ck_assert_msg(rt_tensor_equal(got, want), "case %zu %s keep %d", c, ops[o], keep);
                rt_tensor_unref(got);
                rt_tensor_unref(want);
                tu_unref(in, 2);
            }
    /* the merge: (2, 5, 7, 3) over 1, 2 is K R K; over 0 and -1 of (3, 1, 4) is R K R */
    kn_cuda_reduce_shape p;
    kn_cuda__reduce_plan(&TU_SHAPE(2, 5, 7, 3), (int[]){0, 1, 1, 0}, &p);
    ck_assert(p.rank == 3 && p.dim[1] == 35 && p.red[1] && !p.red[0] && p.nout == 6 && p.count == 35);
    kn_cuda__reduce_plan(&TU_SHAPE(3, 1, 4), (int[]){1, 1, 0}, &p);
    ck_assert(p.rank == 2 && p.dim[0] == 3 && p.red[0] && p.nout == 4 && p.count == 3);
}
END_TEST

START_TEST(gather_plans) {
    static const struct {
        int pr;
        int64_t pd[4];
        int ir;
        int64_t id[3];
        int64_t axis, bd;
        int ok;
    } cases[] = {
        {2, {6, 4}, 1, {5}, 0, 0, 1},
        {3, {3, 6, 4}, 2, {2, 3}, 1, 0, 1},
        {3, {3, 6, 4}, 2, {3, 2}, -2, 1, 1},  /* batch_dims 1 */
        {3, {3, 6, 4}, 2, {3, 2}, 2, -1, 1},  /* batch_dims -1 = 1, the last axis */
        {3, {3, 6, 4}, 1, {0}, 1, 0, 1},      /* no indices */
        {3, {3, 6, 4}, 2, {2, 2}, 1, 1, 0},   /* batch dims differ */
        {3, {3, 6, 4}, 1, {2}, 3, 0, 0},      /* axis out of range */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_shape ps = {.rank = cases[c].pr}, is = {.rank = cases[c].ir};
        for (int d = 0; d < ps.rank; d++) ps.dim[d] = cases[c].pd[d];
        for (int d = 0; d < is.rank; d++) is.dim[d] = cases[c].id[d];
        kn_cuda_gather_shape g;
        rt_shape os;
        int ok = kn_cuda__gather_shape(&ps, &is, cases[c].axis, cases[c].bd, &g, &os);
        ck_assert_msg(ok == cases[c].ok, "case %zu", c);
        if (!ok) continue;
        rt_tensor *x = tu_iota_f32(ps, 0, 1);
        rt_tensor *ix = tu_iota_f32(is, 0, 0);
        rt_tensor *ii = NULL;
        int32_t iv[64];
        for (int64_t i = 0; i < ix->nelem; i++) iv[i] = (int32_t)((i * 5 + 3) % g.n);
        ii = tu_t(RT_DT_INT32, is, iv, (int)ix->nelem);
        rt_tensor *in[3] = {x, ii, tu_t(RT_DT_INT64, TU_SCALAR, &cases[c].axis, 1)};
        Tensorflow__NodeDef *def = tu_node_new("GatherV2", "g");
        tu_attr_type(def, "Tparams", RT_DT_FLOAT);
        tu_attr_i(def, "batch_dims", cases[c].bd);
        rt_tensor *want = tu_run1(def, in, 3);
        ck_assert_msg(rt_shape_equal(&os, &want->shape), "case %zu: shape", c);
        /* kn_cuda_gather's walk, one element per unit */
        rt_tensor *got = tu_iota_f32(os, 0, 0);
        int64_t total = g.nb * g.outer * g.per * g.inner;
        ck_assert_int_eq(total, got->nelem);
        for (int64_t t = 0; t < total; t++) {
            int64_t k = t % g.inner, row = t / g.inner, i = row % g.per, bo = row / g.per;
            int64_t b = bo / g.outer, v = iv[b * g.per + i];
            rt_tensor_f32(got)[t] = rt_tensor_f32(x)[(bo * g.n + v) * g.inner + k];
        }
        ck_assert_msg(rt_tensor_equal(got, want), "case %zu: values", c);
        rt_tensor_unref(got);
        rt_tensor_unref(want);
        rt_tensor_unref(ix);
        tu_unref(in, 3);
    }
}
END_TEST

START_TEST(bmm_plans) {
    static const struct {
        int rx;
        int64_t dx[5];
        int ry;
        int64_t dy[5];
        int adj_x, adj_y, v1, ok, mode;
    } cases[] = {
        {3, {4, 3, 5}, 3, {4, 5, 2}, 0, 0, 1, 1, KN_CUDA_BMM_STRIDED},
        {3, {4, 5, 3}, 3, {4, 2, 5}, 1, 1, 0, 1, KN_CUDA_BMM_STRIDED},
        {4, {2, 3, 3, 5}, 2, {5, 2}, 0, 0, 0, 1, KN_CUDA_BMM_FLAT},
        {4, {2, 3, 5, 3}, 3, {1, 5, 2}, 1, 0, 0, 1, KN_CUDA_BMM_LOOP}, /* adjoint x: no flat rows */
        {2, {3, 5}, 3, {4, 5, 2}, 0, 0, 0, 1, KN_CUDA_BMM_LOOP},       /* x broadcast */
        {4, {2, 1, 3, 5}, 4, {1, 3, 5, 2}, 0, 0, 0, 1, KN_CUDA_BMM_LOOP},
        {4, {1, 4, 3, 5}, 3, {4, 5, 2}, 0, 1 - 1, 0, 1, KN_CUDA_BMM_STRIDED},
        {3, {2, 3, 5}, 3, {4, 5, 2}, 0, 0, 0, 0, 0},                   /* 2 vs 4 */
        {3, {4, 3, 5}, 3, {4, 4, 2}, 0, 0, 0, 0, 0},                   /* inner sizes */
        {3, {4, 3, 5}, 2, {5, 2}, 0, 0, 1, 0, 0},                      /* V1: batches differ */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_shape xs = {.rank = cases[c].rx}, ys = {.rank = cases[c].ry};
        for (int d = 0; d < xs.rank; d++) xs.dim[d] = cases[c].dx[d];
        for (int d = 0; d < ys.rank; d++) ys.dim[d] = cases[c].dy[d];
        kn_cuda_bmm g;
        int ok = kn_cuda__bmm(&xs, &ys, cases[c].adj_x, cases[c].adj_y, cases[c].v1, &g);
        ck_assert_msg(ok == cases[c].ok, "case %zu", c);
        if (!ok) continue;
        ck_assert_msg(g.mode == cases[c].mode, "case %zu: mode %d", c, g.mode);
        rt_tensor *x = tu_iota_f32(xs, 0, 0), *y = tu_iota_f32(ys, 0, 0);
        for (int64_t i = 0; i < x->nelem; i++) rt_tensor_f32(x)[i] = (float)((i * 37) % 11) - 5;
        for (int64_t i = 0; i < y->nelem; i++) rt_tensor_f32(y)[i] = (float)((i * 13) % 7) - 3;
        rt_tensor *in[2] = {x, y};
        Tensorflow__NodeDef *def = tu_node_new(cases[c].v1 ? "BatchMatMul" : "BatchMatMulV2", "bmm");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_b(def, "adj_x", cases[c].adj_x);
        tu_attr_b(def, "adj_y", cases[c].adj_y);
        rt_tensor *want = tu_run1(def, in, 2);
        ck_assert_msg(rt_shape_equal(&g.out, &want->shape), "case %zu: shape", c);
        /* the GEMMs c_bmm launches: batch i's operands at their offsets */
        rt_tensor *got = tu_iota_f32(g.out, 0, 0);
        const int64_t M = g.m, N = g.n, K = g.k;
        for (int64_t i = 0; i < g.batch; i++) {
            int64_t ox = 0, ow = 0;
            if (g.mode == KN_CUDA_BMM_STRIDED) ox = i * g.stride_x, ow = i * g.stride_w;
            else if (g.mode == KN_CUDA_BMM_FLAT) ox = i * M * K, ow = 0;
            else kn_cuda__bmm_offsets(&g, i, &ox, &ow);
            const float *a = rt_tensor_f32(x) + ox, *b = rt_tensor_f32(y) + ow;
            for (int64_t r = 0; r < M; r++)
                for (int64_t q = 0; q < N; q++) {
                    float acc = 0;
                    for (int64_t j = 0; j < K; j++)
                        acc += (cases[c].adj_x ? a[j * M + r] : a[r * K + j]) *
                               (cases[c].adj_y ? b[q * K + j] : b[j * N + q]);
                    rt_tensor_f32(got)[(i * M + r) * N + q] = acc;
                }
        }
        ck_assert_msg(rt_tensor_equal(got, want), "case %zu: values", c); /* small integers: exact */
        rt_tensor_unref(got);
        rt_tensor_unref(want);
        tu_unref(in, 2);
    }
}
END_TEST

/* ---- a device backend with the CUDA table's ops, over the CPU kernels
 * (tests/util_testdev: memory kind 9, bytes XOR 0x5A) ---- */

static kn_backend *g_cpu, *capdev;

static void cap_setup(int flags) {
    g_cpu = kn_cpu_backend_new(1);
    ut_testdev_setup(g_cpu, 9, 0x5A);
    capdev = ut_testdev_new("captest", kn_cuda_backend_ops(), flags);
    memset(&ut_dev, 0, sizeof ut_dev);
}

static void cap_teardown(void) {
    kn_backend_free(capdev);
    kn_backend_free(g_cpu);
}

static rt_plan *convnet_plan(rt_graph *g) {
    rt_edge fe, fo[UT_CONVNET_NFETCH];
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    for (int i = 0; i < UT_CONVNET_NFETCH; i++)
        ck_assert_int_eq(rt_graph_tensor(g, ut_convnet_fetches[i], &fo[i]), MS_OK);
    rt_plan *p = NULL;
    ms_status st = rt_plan_build(g, &fe, 1, fo, UT_CONVNET_NFETCH, NULL, 0, &p);
    ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
    return p;
}

static void run_plan(rt_plan *p, rt_tensor *x, rt_tensor **outs) {
    kn_ctx ctx = {.nthreads = 1};
    ms_status st = rt_plan_run(p, &ctx, NULL, &x, outs);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
}

/* The plan of g from feed "x" to the one fetch `fetch`. */
static rt_plan *plan_x_to(rt_graph *g, const char *fetch) {
    rt_edge fe, fo;
    ck_assert_int_eq(rt_graph_tensor(g, "x", &fe), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, fetch, &fo), MS_OK);
    rt_plan *p = NULL;
    ck_assert_msg(rt_plan_build(g, &fe, 1, &fo, 1, NULL, 0, &p) == MS_OK, "%s", ms_errmsg());
    return p;
}

static void run_graph(rt_graph *g, rt_tensor *x, rt_tensor **outs) {
    rt_plan *p = convnet_plan(g);
    run_plan(p, x, outs);
    rt_plan_free(p);
}

/* The util_convnet network twice: *g0 on the CPU alone, *g1 on capdev;
 * both after load-time fusion when `fused`. */
static void convnet_graphs(rt_gb *gb, int fused, rt_graph **g0, rt_graph **g1) {
    ut_convnet_build(gb);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, g0), MS_OK);
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, g1), MS_OK);
    if (fused) {
        int n0 = 0, n1 = 0;
        ck_assert_int_eq(rt_fuse_graph(*g0, &n0), MS_OK);
        ck_assert_int_eq(rt_fuse_graph(*g1, &n1), MS_OK);
        ck_assert_int_ge(n1, 2);
        ck_assert_str_eq((*g1)->nodes[rt_graph_find(*g1, "r1")].kn.op, "_FusedConv2D");
        ck_assert_str_eq((*g1)->nodes[rt_graph_find(*g1, "ba")].kn.op, "_FusedMatMul");
    }
    (*g1)->device = capdev;
}

START_TEST(convnet_placement) {
    int fused = _i;
    cap_setup(0);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    rt_graph *g0 = NULL, *g1 = NULL;
    convnet_graphs(gb, fused, &g0, &g1);
    rt_tensor *x = ut_convnet_input(7);
    rt_tensor *want[UT_CONVNET_NFETCH] = {0}, *got[UT_CONVNET_NFETCH] = {0};
    run_graph(g0, x, want);
    ut_dev.runs = 0;
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
        int dev = ut_testdev_is_kernel(n->kernel);
        int host_only = strcmp(n->kn.op, "Const") == 0 || strcmp(n->kn.op, "Placeholder") == 0;
        if (dev) expect++;
        if (kn_cuda_backend_has_op(n->kn.op) && !host_only)
            ck_assert_msg(dev, "node %s (%s) is not on the device", n->name, n->kn.op);
        else
            ck_assert_msg(!dev, "node %s (%s) is on the device", n->name, n->kn.op);
    }
    for (int i = 0; ut_convnet_host_nodes[i]; i++)
        ck_assert(!ut_testdev_is_kernel(g1->nodes[rt_graph_find(g1, ut_convnet_host_nodes[i])].kernel));
    ck_assert_int_eq(ut_dev.runs, expect);
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
    cap_teardown();
}
END_TEST

/* An instance norm's statistics between device ops: x -> Relu r; m = Mean(r,
 * [1, 2], keep); v = Mean(Square(Sub(r, m)), [1, 2]). On the CPU the load-time
 * fusion turns v into a _FusedMapReduce (CPU only); with a device that has
 * Sub, Square and Mean (the CUDA table's ops) it leaves them alone, so they
 * run on the device instead of copying r and m to the host; with a device
 * that has _FusedMapReduce itself (the test device with every op) it fuses.
 * Both give the CPU's numbers (1e-6 relative: the fused pass sums in its own
 * order). */
static void mr_build(rt_gb *gb) {
    rt_shape xs = {.rank = 4, .dim = {2, 6, 5, 3}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    rt_gb_unary(gb, "Relu", "r", "x", RT_DT_FLOAT);
    ut_gb_consti(gb, "axes", 1, (int64_t[]){2}, (int32_t[]){1, 2});
    ut_gb_reduce(gb, "Mean", "m", "r", "axes", 1);
    rt_gb_binary(gb, "Sub", "c", "r", "m", RT_DT_FLOAT);
    rt_gb_unary(gb, "Square", "sq", "c", RT_DT_FLOAT);
    ut_gb_reduce(gb, "Mean", "v", "sq", "axes", 1);
}

static int has_op(const rt_graph *g, const char *op) {
    for (int v = 0; v < g->n; v++)
        if (g->nodes[v].kn.op && strcmp(g->nodes[v].kn.op, op) == 0) return 1;
    return 0;
}

START_TEST(map_reduce_stays_on_device) {
    cap_setup(0);
    kn_backend *every = ut_testdev_new("every", NULL, 0);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    mr_build(gb);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    kn_backend *dev[3] = {NULL, capdev, every};
    const int fused_want[3] = {1, 0, 1};
    rt_tensor *x = NULL;
    rt_shape xs = {.rank = 4, .dim = {2, 6, 5, 3}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &xs, &x), MS_OK);
    for (int64_t i = 0; i < x->nelem; i++) ((float *)x->data)[i] = (float)((i * 37) % 23) / 7.0f - 1.0f;
    rt_tensor *want = NULL;
    for (int k = 0; k < 3; k++) {
        rt_graph *g = NULL;
        ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g), MS_OK);
        g->device = dev[k];
        ck_assert_int_eq(rt_fuse_graph(g, NULL), MS_OK);
        ck_assert_msg(has_op(g, "_FusedMapReduce") == fused_want[k], "device %d: fused %d", k,
                      has_op(g, "_FusedMapReduce"));
        rt_plan *p = plan_x_to(g, "v");
        ut_dev.runs = 0;
        rt_tensor *got = NULL;
        run_plan(p, x, &got);
        if (k == 1) ck_assert_int_ge(ut_dev.runs, 4); /* Relu, Mean, Sub, Square, Mean */
        ck_assert_int_eq(got->buf->device, 0);
        ck_assert_int_eq(got->nelem, 6);
        if (k == 0) {
            want = got;
        } else {
            for (int64_t i = 0; i < got->nelem; i++) {
                float a = ((float *)got->data)[i], b = ((float *)want->data)[i];
                ck_assert_msg(fabsf(a - b) <= 1e-6f * fabsf(b) + 1e-7f, "device %d [%lld]: %g vs %g", k,
                              (long long)i, a, b);
            }
            rt_tensor_unref(got);
        }
        rt_plan_free(p);
        rt_graph_free(g);
    }
    rt_tensor_unref(want);
    rt_tensor_unref(x);
    rt_gb_free(gb);
    kn_backend_free(every);
    cap_teardown();
}
END_TEST

/* The ops added with the data movement, reductions and BatchMatMul
 * (util_convnet's movenet) on the device with the table's ops: each such
 * node bound to the device, Shape on the host (its int32 value copied to the
 * device for StridedSlice and GatherV2), the CPU's bytes. */
START_TEST(movenet_placement) {
    cap_setup(0);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_movenet_build(gb);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_graph *g[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g[k]), MS_OK);
    g[1]->device = capdev;
    rt_tensor *x = ut_movenet_input(5);
    rt_tensor *res[2][UT_MOVENET_NFETCH] = {{0}};
    for (int k = 0; k < 2; k++) {
        rt_edge fe, fo[UT_MOVENET_NFETCH];
        ck_assert_int_eq(rt_graph_tensor(g[k], "x", &fe), MS_OK);
        for (int i = 0; i < UT_MOVENET_NFETCH; i++)
            ck_assert_int_eq(rt_graph_tensor(g[k], ut_movenet_fetches[i], &fo[i]), MS_OK);
        rt_plan *p = NULL;
        ms_status st = rt_plan_build(g[k], &fe, 1, fo, UT_MOVENET_NFETCH, NULL, 0, &p);
        ck_assert_msg(st == MS_OK, "plan: %s", ms_errmsg());
        ut_dev.runs = 0;
        run_plan(p, x, res[k]);
        rt_plan_free(p);
    }
    int expect = 0;
    for (int v = 0; v < g[1]->n; v++) {
        const rt_gnode *n = &g[1]->nodes[v];
        if (n->kernel == NULL || n->kn.op == NULL) continue;
        int dev = ut_testdev_is_kernel(n->kernel);
        int host_only = strcmp(n->kn.op, "Const") == 0 || strcmp(n->kn.op, "Placeholder") == 0;
        if (kn_cuda_backend_has_op(n->kn.op) && !host_only) {
            ck_assert_msg(dev, "node %s (%s) is not on the device", n->name, n->kn.op);
            expect++;
        } else {
            ck_assert_msg(!dev, "node %s (%s) is on the device", n->name, n->kn.op);
        }
    }
    for (int i = 0; ut_movenet_host_nodes[i]; i++)
        ck_assert(!ut_testdev_is_kernel(g[1]->nodes[rt_graph_find(g[1], ut_movenet_host_nodes[i])].kernel));
    ck_assert_int_eq(expect, 12); /* every node but Shape, the constants and x */
    ck_assert_int_eq(ut_dev.runs, expect);
    for (int i = 0; i < UT_MOVENET_NFETCH; i++) {
        ck_assert_int_eq(res[1][i]->buf->device, 0);
        ck_assert_msg(rt_tensor_equal(res[1][i], res[0][i]), "fetch %s differs", ut_movenet_fetches[i]);
        rt_tensor_unref(res[0][i]);
        rt_tensor_unref(res[1][i]);
    }
    rt_tensor_unref(x);
    rt_graph_free(g[0]);
    rt_graph_free(g[1]);
    rt_gb_free(gb);
    cap_teardown();
}
END_TEST

/* The same network on a device with arenas (as the CUDA table's): the first
 * request sizes the plan's device tensors from their lifetimes and its
 * sizes, the next ones take every device tensor from that one arena (the
 * arena is overwritten before each run, so a region shared by two tensors
 * alive at once gives other bytes than the CPU's), and freeing the plan frees
 * it. Prints the layout's figures. */
START_TEST(convnet_arena) {
    int fused = _i;
    cap_setup(UT_TESTDEV_ARENAS);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    rt_graph *g0 = NULL, *g1 = NULL;
    convnet_graphs(gb, fused, &g0, &g1);
    rt_plan *p = convnet_plan(g1);
    rt_plan_meminfo mi;
    for (int rep = 0; rep < 3; rep++) {
        rt_tensor *x = ut_convnet_input(20 + (unsigned)rep);
        rt_tensor *want[UT_CONVNET_NFETCH] = {0}, *got[UT_CONVNET_NFETCH] = {0};
        run_graph(g0, x, want);
        int regions = ut_dev.regions, tmps = ut_dev.tmps;
        run_plan(p, x, got);
        ck_assert_int_eq(rt_plan_memory(p, 0, &mi), MS_OK);
        ck_assert_int_eq(mi.nkeys, 1);
        ck_assert_int_eq(ut_dev.regions - regions, rep == 0 ? 0 : mi.ntensors);
        /* every device kernel's temporary, from the arena after the sizing run */
        ck_assert_int_gt(mi.ntemps, 0);
        ck_assert_int_eq(ut_dev.tmps - tmps, rep == 0 ? 0 : mi.ntemps);
        for (int i = 0; i < UT_CONVNET_NFETCH; i++) {
            ck_assert_msg(rt_tensor_equal(got[i], want[i]), "fetch %s differs (run %d)",
                          ut_convnet_fetches[i], rep);
            rt_tensor_unref(got[i]);
            rt_tensor_unref(want[i]);
        }
        rt_tensor_unref(x);
    }
    int nall = mi.ntensors + mi.ntemps;
    ck_assert(kn_memplan_valid(mi.bufs, nall));
    uint64_t sum = 0, peak = kn_memplan_peak(mi.bufs, nall);
    for (int i = 0; i < nall; i++) sum += (mi.bufs[i].bytes + 255) / 256 * 256;
    printf("kn_cuda_backend: convnet%s: %d device tensors, %d temporaries, arena %llu bytes, peak "
           "live %llu, %llu without reuse\n",
           fused ? " (fused)" : "", mi.ntensors, mi.ntemps, (unsigned long long)mi.bytes,
           (unsigned long long)peak, (unsigned long long)sum);
    ck_assert_int_ge(mi.ntensors, fused ? 20 : 24);
    ck_assert_uint_ge(mi.bytes, peak);
    ck_assert_uint_lt(mi.bytes, sum / 2); /* a chain of layers reuses most of it */
    ck_assert_int_eq(ut_dev.arenas, 1);
    rt_plan_free(p);
    ck_assert_int_eq(ut_dev.arenas, 0);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    cap_teardown();
}
END_TEST

/* The same network with CUDA graphs on, on a test device that emulates them
 * (UT_TESTDEV_GRAPHS): every run after the sizing run gives the CPU's bytes
 * while its segments of device nodes are captured once and then replayed
 * (their kernels not run again, their outputs only what the launches
 * wrote). */
START_TEST(convnet_cuda_graphs) {
    int fused = _i;
    cap_setup(UT_TESTDEV_ARENAS | UT_TESTDEV_GRAPHS);
    rt_device_graphs_set(1);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    rt_graph *g0 = NULL, *g1 = NULL;
    convnet_graphs(gb, fused, &g0, &g1);
    rt_plan *p = convnet_plan(g1);
    for (int rep = 0; rep < 4; rep++) {
        rt_tensor *x = ut_convnet_input(40 + (unsigned)rep);
        rt_tensor *want[UT_CONVNET_NFETCH] = {0}, *got[UT_CONVNET_NFETCH] = {0};
        run_graph(g0, x, want);
        run_plan(p, x, got);
        for (int i = 0; i < UT_CONVNET_NFETCH; i++) {
            ck_assert_msg(rt_tensor_equal(got[i], want[i]), "fetch %s differs (run %d)",
                          ut_convnet_fetches[i], rep);
            rt_tensor_unref(got[i]);
            rt_tensor_unref(want[i]);
        }
        rt_tensor_unref(x);
    }
    printf("kn_cuda_backend: convnet%s with graphs: %d captured, %d refused, %d launches\n",
           fused ? " (fused)" : "", ut_dev.captures, ut_dev.refused, ut_dev.launches);
    ck_assert_int_ge(ut_dev.captures, 1);
    ck_assert_int_eq(ut_dev.launches, 3 * ut_dev.captures);
    rt_plan_free(p);
    rt_device_graphs_set(0);
    ck_assert_int_eq(ut_dev.arenas, 0);
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    cap_teardown();
}
END_TEST

/* ---- the DICOM split: DcmDecodeHU -> DcmWindow on the device ---- */

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
    cap_setup(0);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    ut_dicom_window_graph(gb, (int)_i, 48, 40);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_graph *g0 = NULL, *g1 = NULL;
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g0), MS_OK);
    ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g1), MS_OK);
    g1->device = capdev; /* set before fusion, as rt_model_load_on does */
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
        rt_tensor *in = b == 0 ? ut_dicom_strings(batch_a, 3) : ut_dicom_strings(batch_b, 4);
        ck_assert(in != NULL);
        rt_tensor *want = run_dicom(g0, in);
        ut_dev.runs = 0;
        rt_tensor *got = run_dicom(g1, in);
        ck_assert_int_eq(ut_dev.runs, 1); /* the transform, on the device */
        ck_assert_int_eq(got->buf->device, 0);
        ck_assert(rt_shape_equal(&got->shape, &want->shape));
        ck_assert_int_ge(want->shape.dim[0], 2);
        ck_assert_msg(memcmp(got->data, want->data, rt_tensor_nbytes(want)) == 0,
                      "split DICOM bytes differ (batch %d, case %d)", b, (int)_i);
        rt_tensor_unref(in);
        rt_tensor_unref(want);
        rt_tensor_unref(got);
    }
    ck_assert(ut_testdev_is_kernel(w1->kernel));
    ck_assert(!ut_testdev_is_kernel(g1->nodes[w1->in[0].node].kernel));
    rt_graph_free(g0);
    rt_graph_free(g1);
    rt_gb_free(gb);
    cap_teardown();
}
END_TEST

/* A node of many inputs on the device with the CUDA table's ops, through the
 * executor: x [1, 3] -> a_i = AddV2(x, i) (i = 0..K-1, each on the device)
 * -> ConcatV2(a_0 .. a_K-1, axis 0) on the device: row i is x + i, as on the
 * CPU. K = 2,000 is far over the test device's former 64 slots, the CUDA
 * table's 64 (a ConcatV2 of more runs the CPU kernel inside the backend, with
 * slots sized to the node) and the executor's former 256 per node (issue 29).
 * The node-level case of 2,000 inputs is util_opcases' (check_backend_ops). */
START_TEST(concat_of_many_on_device) {
    enum { K = 2000 };
    cap_setup(0);
    rt_gb *gb = NULL;
    ck_assert_int_eq(rt_gb_new(&gb), MS_OK);
    rt_shape xs = {.rank = 2, .dim = {1, 3}};
    rt_gb_placeholder(gb, "x", RT_DT_FLOAT, &xs);
    char name[32], cname[32];
    for (int i = 0; i < K; i++) {
        snprintf(cname, sizeof cname, "k%d", i);
        rt_tensor *kv = TU_F32(TU_SCALAR, (float)i);
        rt_gb_const(gb, cname, kv);
        rt_tensor_unref(kv);
        snprintf(name, sizeof name, "a%d", i);
        rt_gb_binary(gb, "AddV2", name, "x", cname, RT_DT_FLOAT);
    }
    ut_gb_consti(gb, "axis", 0, NULL, (int32_t[]){0});
    Tensorflow__NodeDef *cat = rt_gb_node(gb, "ConcatV2", "cat");
    for (int i = 0; i < K; i++) {
        snprintf(name, sizeof name, "a%d", i);
        rt_gb_input(gb, cat, name);
    }
    rt_gb_input(gb, cat, "axis");
    rt_gb_attr_i(gb, cat, "N", K);
    rt_gb_attr_type(gb, cat, "T", RT_DT_FLOAT);
    rt_gb_attr_type(gb, cat, "Tidx", RT_DT_INT32);
    Tensorflow__MetaGraphDef *mg = NULL;
    ck_assert_msg(rt_gb_meta_graph(gb, &mg) == MS_OK, "%s", ms_errmsg());
    rt_tensor *x = TU_F32(xs, 0.5f, -1.25f, 3.0f);
    rt_tensor *got[2] = {NULL, NULL};
    for (int dev = 0; dev < 2; dev++) {
        rt_graph *g = NULL;
        ck_assert_int_eq(rt_graph_build(mg, g_cpu, rt_model_host_ops, &g), MS_OK);
        if (dev) g->device = capdev;
        rt_plan *p = plan_x_to(g, "cat");
        ut_dev.runs = 0;
        run_plan(p, x, &got[dev]);
        if (dev) {
            ck_assert(ut_testdev_is_kernel(g->nodes[rt_graph_find(g, "cat")].kernel));
            ck_assert_int_eq(ut_dev.runs, K + 1); /* the adds and the concat */
        }
        rt_plan_free(p);
        rt_graph_free(g);
    }
    ck_assert_int_eq(got[1]->buf->device, 0);
    ck_assert(rt_shape_equal(&got[1]->shape, &TU_SHAPE(K, 3)));
    ck_assert(rt_tensor_equal(got[0], got[1]));
    const float *y = got[1]->data;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < 3; j++)
            ck_assert_float_eq(y[i * 3 + j], ((const float *)x->data)[j] + (float)i);
    tu_unref(got, 2);
    rt_tensor_unref(x);
    rt_gb_free(gb);
    cap_teardown();
}
END_TEST

/* --precision's values: fp32 (also the default and ""), tf32; fp16 refused
 * as not implemented, others as invalid; the setting read back. */
START_TEST(precision_values) {
    kn_cuda_precision p = KN_CUDA_TF32;
    ck_assert_int_eq(kn_cuda_precision_parse(NULL, &p), MS_OK);
    ck_assert_int_eq(p, KN_CUDA_FP32);
    ck_assert_int_eq(kn_cuda_precision_parse("", &p), MS_OK);
    ck_assert_int_eq(p, KN_CUDA_FP32);
    ck_assert_int_eq(kn_cuda_precision_parse("tf32", &p), MS_OK);
    ck_assert_int_eq(p, KN_CUDA_TF32);
    ck_assert_int_eq(kn_cuda_precision_parse("fp32", &p), MS_OK);
    ck_assert_int_eq(p, KN_CUDA_FP32);
    ck_assert_int_eq(kn_cuda_precision_parse("fp16", &p), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "--precision=fp16 is not implemented") != NULL, "%s",
                  ms_errmsg());
    ck_assert_int_eq(kn_cuda_precision_parse("TF32", &p), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "expected fp32, tf32 or fp16, got \"TF32\"") != NULL, "%s",
                  ms_errmsg());
    ck_assert_int_eq(kn_cuda_precision_get(), KN_CUDA_FP32);
    kn_cuda_precision_set(KN_CUDA_TF32);
    ck_assert_int_eq(kn_cuda_precision_get(), KN_CUDA_TF32);
    ck_assert_str_eq(kn_cuda_precision_name(kn_cuda_precision_get()), "tf32");
    kn_cuda_precision_set(KN_CUDA_FP32);
    ck_assert_str_eq(kn_cuda_precision_name(kn_cuda_precision_get()), "fp32");
}
END_TEST

int main(void) {
    Suite *s = suite_create("kn_cuda_backend");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, ops_sorted_and_on_cpu);
    tcase_add_test(tc, spatial_arithmetic);
    tcase_add_test(tc, broadcasts);
    tcase_add_test(tc, activation_names);
    tcase_add_test(tc, precision_values);
    tcase_add_test(tc, no_backend_without_gpu);
    tcase_add_test(tc, strided_slice_plans);
    tcase_add_test(tc, reduce_plans);
    tcase_add_test(tc, gather_plans);
    tcase_add_test(tc, bmm_plans);
    tcase_add_loop_test(tc, convnet_placement, 0, 2);
    tcase_add_loop_test(tc, convnet_arena, 0, 2);
    tcase_add_test(tc, movenet_placement);
    tcase_add_test(tc, map_reduce_stays_on_device);
    tcase_add_test(tc, concat_of_many_on_device);
    tcase_add_loop_test(tc, convnet_cuda_graphs, 0, 2);
    tcase_add_loop_test(tc, dicom_split_placement, 0, 3);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
