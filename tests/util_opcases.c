/* util_opcases.c - the both-backends op cases (util_opcases.h). */
#include "util_opcases.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "util_node.h"

const char *const ut_opcases_skipped[] = {
    "_DcmPixelTransform",
    "its inputs are _DcmDecodeRaw's outputs: check_kn_cuda_backend's dicom_split_placement and "
    "check_cuda_backend's dicom_split compare it on real files",
    NULL, NULL};

/* ---- building the table ---- */

static ut_opcase *g_cases;
static int g_n, g_cap;
static uint32_t g_seed;

static float frand(float lo, float hi) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_seed >> 8) / (float)(1u << 24);
}

/* Float tensor of shape s, values in [lo, hi). */
static rt_tensor *rnd(rt_shape s, float lo, float hi) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++)
        ((float *)t->data)[i] = frand(lo, hi);
    return t;
}

static rt_tensor *ivec(rt_dtype dt, int n, const int64_t *v) {
    rt_shape s = {.rank = 1, .dim = {n}};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    for (int i = 0; i < n; i++) {
        if (dt == RT_DT_INT32)
            ((int32_t *)t->data)[i] = (int32_t)v[i];
        else
            ((int64_t *)t->data)[i] = v[i];
    }
    return t;
}
#define I32V(...)                                                                                  \
    ivec(RT_DT_INT32, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                   \
         (const int64_t[]){__VA_ARGS__})
#define I64V(...)                                                                                  \
    ivec(RT_DT_INT64, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                   \
         (const int64_t[]){__VA_ARGS__})

static rt_tensor *iscalar(int64_t v) {
    rt_tensor *t = ivec(RT_DT_INT32, 1, &v);
    t->shape.rank = 0;
    return t;
}

/* A new case of op `op` (attribute T float unless the op takes none). */
static ut_opcase *add(const char *op, const char *name, int nout, float tol) {
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 64;
        g_cases = realloc(g_cases, (size_t)g_cap * sizeof(*g_cases));
        ck_assert_ptr_nonnull(g_cases);
    }
    ut_opcase *c = &g_cases[g_n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof c->name, "%s %s", op, name);
    char node[64];
    snprintf(node, sizeof node, "case%d", g_n - 1);
    c->def = tu_node_new(op, node);
    tu_attr_type(c->def, "T", RT_DT_FLOAT);
    c->nout = nout;
    c->ncmp = 1;
    c->tol = tol;
    g_seed = 0x9E3779B9u ^ (uint32_t)g_n;
    return c;
}

static void in(ut_opcase *c, rt_tensor *t, int is_const) {
    c->in = realloc(c->in, (size_t)(c->nin + 1) * sizeof(*c->in));
    c->is_const = realloc(c->is_const, (size_t)(c->nin + 1));
    ck_assert(c->in != NULL && c->is_const != NULL);
    c->in[c->nin] = t;
    c->is_const[c->nin] = (unsigned char)is_const;
    c->nin++;
}

/* Relative tolerances: 0 where the GPU does the CPU's one IEEE operation or
 * moves bytes; 1e-5 where it sums in another order or uses other
 * transcendental functions (cuBLASLt, cuDNN, reductions, exp / tanh). */
#define EXACT 0.0f
#define NEAR 1e-5f

static void binary_cases(void) {
    static const char *const ops[] = {"AddV2", "Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum"};
    static const struct {
        const char *name;
        rt_shape a, b;
    } sh[] = {
        {"[3,5,7] . [3,5,7]", {3, {3, 5, 7}}, {3, {3, 5, 7}}},
        {"[2,3,5] . [5]", {3, {2, 3, 5}}, {1, {5}}},
        {"[2,3,5] . [1,3,5]", {3, {2, 3, 5}}, {3, {1, 3, 5}}},
        {"[5] . [2,3,5]", {1, {5}}, {3, {2, 3, 5}}},
        {"[2,1,5] . [3,1]", {3, {2, 1, 5}}, {2, {3, 1}}},
        {"[2,9,8,3] . [2,1,1,3]", {4, {2, 9, 8, 3}}, {4, {2, 1, 1, 3}}},
        {"[] . [4,3]", {0, {0}}, {2, {4, 3}}},
        {"[4,3] . []", {2, {4, 3}}, {0, {0}}},
        {"[0,3] . [3]", {2, {0, 3}}, {1, {3}}},
        {"[1] . [1]", {1, {1}}, {1, {1}}},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
            ut_opcase *c = add(ops[o], sh[k].name, 1, EXACT);
            int div = strcmp(ops[o], "RealDiv") == 0;
            in(c, rnd(sh[k].a, -2, 2), 0);
            in(c, div ? rnd(sh[k].b, 0.5f, 2) : rnd(sh[k].b, -2, 2), 0);
        }
}

static void unary_cases(void) {
    static const struct {
        const char *op;
        float lo, hi, tol;
    } ops[] = {
        {"Relu", -2, 2, EXACT},     {"Relu6", -3, 9, EXACT},   {"Sigmoid", -6, 6, NEAR},
        {"Tanh", -3, 3, NEAR},      {"Elu", -3, 3, NEAR},      {"LeakyRelu", -2, 2, EXACT},
        {"Square", -3, 3, EXACT},   {"Rsqrt", 0.1f, 9, NEAR},
    };
    static const struct {
        const char *name;
        rt_shape s;
    } sh[] = {{"[3,7,5]", {3, {3, 7, 5}}}, {"[1]", {1, {1}}}, {"[]", {0, {0}}}, {"[0,4]", {2, {0, 4}}}};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
            ut_opcase *c = add(ops[o].op, sh[k].name, 1, ops[o].tol);
            if (strcmp(ops[o].op, "LeakyRelu") == 0)
                tu_attr_f(c->def, "alpha", 0.3f);
            in(c, rnd(sh[k].s, ops[o].lo, ops[o].hi), 0);
        }
}

static void nn_cases(void) {
    ut_opcase *c = add("BiasAdd", "[2,3,5] + [5]", 1, EXACT);
    in(c, rnd(TU_SHAPE(2, 3, 5), -2, 2), 0);
    in(c, rnd(TU_SHAPE(5), -2, 2), 0);
    c = add("BiasAdd", "[0,4] + [4]", 1, EXACT);
    in(c, rnd(TU_SHAPE(0, 4), -2, 2), 0);
    in(c, rnd(TU_SHAPE(4), -2, 2), 0);
    static const rt_shape sm[] = {{2, {3, 7}}, {3, {2, 3, 33}}, {2, {1, 1}}, {2, {0, 5}}};
    for (size_t k = 0; k < sizeof sm / sizeof sm[0]; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "rank %d, %lld columns", sm[k].rank, (long long)sm[k].dim[sm[k].rank - 1]);
        c = add("Softmax", nm, 1, NEAR);
        in(c, rnd(sm[k], -4, 4), 0);
    }
    /* batch norm at inference: constant arguments (uploaded at load) and
     * computed ones */
    static const char *const bns[] = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"};
    for (int v = 0; v < 3; v++)
        for (int cst = 0; cst < 2; cst++) {
            c = add(bns[v], cst ? "[2,5,3,4], constant arguments" : "[2,5,3,4], computed arguments",
                    v == 2 ? 6 : 5, NEAR);
            tu_attr_b(c->def, "is_training", 0);
            tu_attr_f(c->def, "epsilon", 0.001f);
            in(c, rnd(TU_SHAPE(2, 5, 3, 4), -2, 2), 0);
            in(c, rnd(TU_SHAPE(4), 0.5f, 2), cst);
            in(c, rnd(TU_SHAPE(4), -1, 1), cst);
            in(c, rnd(TU_SHAPE(4), -1, 1), cst);
            in(c, rnd(TU_SHAPE(4), 0.5f, 2), cst);
        }
    /* 2-D pools: SAME / VALID, odd sizes, stride 2, EXPLICIT (MaxPool) */
    static const char *const pools[] = {"MaxPool", "AvgPool"};
    for (int p = 0; p < 2; p++)
        for (int pad = 0; pad < 2; pad++) {
            c = add(pools[p], pad ? "[2,7,9,3] 3x3 /2 SAME" : "[2,7,9,3] 3x2 /2 VALID", 1,
                    p ? NEAR : EXACT);
            tu_attr_ints(c->def, "ksize", 1, 3, pad ? 3 : 2, 1);
            tu_attr_ints(c->def, "strides", 1, 2, 2, 1);
            tu_attr_s(c->def, "padding", pad ? "SAME" : "VALID");
            in(c, rnd(TU_SHAPE(2, 7, 9, 3), -2, 2), 0);
        }
    c = add("MaxPool", "[1,6,5,2] 3x3 /1 EXPLICIT 1,1,0,2", 1, EXACT);
    tu_attr_ints(c->def, "ksize", 1, 3, 3, 1);
    tu_attr_ints(c->def, "strides", 1, 1, 1, 1);
    tu_attr_s(c->def, "padding", "EXPLICIT");
    tu_attr_ints(c->def, "explicit_paddings", 0, 0, 1, 1, 0, 2, 0, 0);
    in(c, rnd(TU_SHAPE(1, 6, 5, 2), -2, 2), 0);
    static const char *const p3[] = {"MaxPool3D", "AvgPool3D"};
    for (int p = 0; p < 2; p++)
        for (int pad = 0; pad < 2; pad++) {
            c = add(p3[p], pad ? "[1,4,5,6,2] 2x2x3 /2 SAME" : "[1,4,5,6,2] 2x2x3 /2 VALID", 1,
                    p ? NEAR : EXACT);
            tu_attr_ints(c->def, "ksize", 1, 2, 2, 3, 1);
            tu_attr_ints(c->def, "strides", 1, 2, 2, 2, 1);
            tu_attr_s(c->def, "padding", pad ? "SAME" : "VALID");
            in(c, rnd(TU_SHAPE(1, 4, 5, 6, 2), -2, 2), 0);
        }
}

static void conv_cases(void) {
    static const struct {
        const char *name;
        int64_t s, d;
        const char *pad;
        int cst;
    } cv[] = {
        {"[2,7,9,3] 3x3x3x4 SAME", 1, 1, "SAME", 1},
        {"[2,7,9,3] 3x3x3x4 /2 SAME (uneven)", 2, 1, "SAME", 1},
        {"[2,7,9,3] 3x3x3x4 VALID dilation 2", 1, 2, "VALID", 1},
        {"[2,7,9,3] 3x3x3x4 /2 VALID, computed filter", 2, 1, "VALID", 0},
    };
    for (size_t k = 0; k < sizeof cv / sizeof cv[0]; k++)
        for (int dw = 0; dw < 2; dw++) {
            ut_opcase *c = add(dw ? "DepthwiseConv2dNative" : "Conv2D", cv[k].name, 1, NEAR);
            tu_attr_ints(c->def, "strides", 1, cv[k].s, cv[k].s, 1);
            tu_attr_ints(c->def, "dilations", 1, cv[k].d, cv[k].d, 1);
            tu_attr_s(c->def, "padding", cv[k].pad);
            in(c, rnd(TU_SHAPE(2, 7, 9, 3), -1, 1), 0);
            in(c, rnd(dw ? TU_SHAPE(3, 3, 3, 2) : TU_SHAPE(3, 3, 3, 4), -1, 1), cv[k].cst);
        }
    /* fused forms: bias + activation, and the batch-norm form */
    static const char *const acts[] = {"Relu", "Relu6", "Sigmoid", "Tanh"};
    for (int a = 0; a < 4; a++) {
        ut_opcase *c = add("_FusedConv2D", acts[a], 1, NEAR);
        tu_attr_ints(c->def, "strides", 1, 1, 1, 1);
        tu_attr_s(c->def, "padding", "SAME");
        const char *fo[2] = {"BiasAdd", acts[a]};
        tu_attr_slist(c->def, "fused_ops", 2, fo);
        tu_attr_i(c->def, "num_args", 1);
        in(c, rnd(TU_SHAPE(1, 6, 5, 3), -1, 1), 0);
        in(c, rnd(TU_SHAPE(3, 3, 3, 4), -1, 1), 1);
        in(c, rnd(TU_SHAPE(4), -1, 1), 1);
    }
    ut_opcase *c = add("_FusedConv2D", "FusedBatchNorm + Relu", 1, NEAR);
    tu_attr_ints(c->def, "strides", 1, 2, 2, 1);
    tu_attr_s(c->def, "padding", "VALID");
    const char *fb[2] = {"FusedBatchNorm", "Relu"};
    tu_attr_slist(c->def, "fused_ops", 2, fb);
    tu_attr_i(c->def, "num_args", 4);
    tu_attr_f(c->def, "epsilon", 0.001f);
    in(c, rnd(TU_SHAPE(1, 7, 6, 3), -1, 1), 0);
    in(c, rnd(TU_SHAPE(3, 3, 3, 4), -1, 1), 1);
    in(c, rnd(TU_SHAPE(4), 0.5f, 2), 1);
    in(c, rnd(TU_SHAPE(4), -1, 1), 1);
    in(c, rnd(TU_SHAPE(4), -1, 1), 1);
    in(c, rnd(TU_SHAPE(4), 0.5f, 2), 1);
    c = add("_FusedDepthwiseConv2dNative", "BiasAdd + Relu6", 1, NEAR);
    tu_attr_ints(c->def, "strides", 1, 1, 1, 1);
    tu_attr_s(c->def, "padding", "SAME");
    const char *fd[2] = {"BiasAdd", "Relu6"};
    tu_attr_slist(c->def, "fused_ops", 2, fd);
    tu_attr_i(c->def, "num_args", 1);
    in(c, rnd(TU_SHAPE(1, 6, 5, 3), -2, 2), 0);
    in(c, rnd(TU_SHAPE(3, 3, 3, 2), -1, 1), 1);
    in(c, rnd(TU_SHAPE(6), -1, 1), 1);
    /* 3-D and transposed */
    for (int pad = 0; pad < 2; pad++) {
        c = add("Conv3D", pad ? "[1,4,5,6,2] 2x3x2 SAME" : "[1,4,5,6,2] 2x3x2 /2 VALID", 1, NEAR);
        tu_attr_ints(c->def, "strides", 1, pad ? 1 : 2, pad ? 1 : 2, pad ? 1 : 2, 1);
        tu_attr_s(c->def, "padding", pad ? "SAME" : "VALID");
        in(c, rnd(TU_SHAPE(1, 4, 5, 6, 2), -1, 1), 0);
        in(c, rnd(TU_SHAPE(2, 3, 2, 2, 3), -1, 1), 1);
    }
    for (int pad = 0; pad < 2; pad++) {
        c = add("Conv2DBackpropInput", pad ? "[1,8,8,2] /2 SAME" : "[1,9,9,2] /2 VALID", 1, NEAR);
        tu_attr_ints(c->def, "strides", 1, 2, 2, 1);
        tu_attr_s(c->def, "padding", pad ? "SAME" : "VALID");
        in(c, pad ? I32V(1, 8, 8, 2) : I32V(1, 9, 9, 2), 1);
        in(c, rnd(TU_SHAPE(3, 3, 2, 4), -1, 1), 1);
        in(c, rnd(TU_SHAPE(1, 4, 4, 4), -1, 1), 0);
    }
}

static void gemm_cases(void) {
    static const struct {
        int64_t m, k, n;
        int ta, tb;
    } mm[] = {{3, 5, 7, 0, 0}, {3, 5, 7, 1, 0}, {3, 5, 7, 0, 1}, {3, 5, 7, 1, 1},
              {1, 1, 1, 0, 0}, {33, 17, 9, 0, 0}, {3, 0, 4, 0, 0}};
    for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%lldx%lld . %lldx%lld%s%s", (long long)mm[k].m, (long long)mm[k].k,
                 (long long)mm[k].k, (long long)mm[k].n, mm[k].ta ? " transpose_a" : "",
                 mm[k].tb ? " transpose_b" : "");
        ut_opcase *c = add("MatMul", nm, 1, NEAR);
        tu_attr_b(c->def, "transpose_a", mm[k].ta);
        tu_attr_b(c->def, "transpose_b", mm[k].tb);
        in(c, rnd(mm[k].ta ? TU_SHAPE(mm[k].k, mm[k].m) : TU_SHAPE(mm[k].m, mm[k].k), -1, 1), 0);
        in(c, rnd(mm[k].tb ? TU_SHAPE(mm[k].n, mm[k].k) : TU_SHAPE(mm[k].k, mm[k].n), -1, 1), 0);
    }
    static const char *const acts[] = {"Relu", "Tanh"};
    for (int a = 0; a < 2; a++) {
        ut_opcase *c = add("_FusedMatMul", acts[a], 1, NEAR);
        const char *fo[2] = {"BiasAdd", acts[a]};
        tu_attr_slist(c->def, "fused_ops", 2, fo);
        tu_attr_i(c->def, "num_args", 1);
        in(c, rnd(TU_SHAPE(4, 6), -1, 1), 0);
        in(c, rnd(TU_SHAPE(6, 5), -1, 1), 1);
        in(c, rnd(TU_SHAPE(5), -1, 1), 1);
    }
    static const struct {
        const char *op, *name;
        rt_shape x, y;
        int ax, ay;
    } bm[] = {
        {"BatchMatMul", "[2,3,4] . [2,4,5]", {3, {2, 3, 4}}, {3, {2, 4, 5}}, 0, 0},
        {"BatchMatMulV2", "[2,3,4] . [4,5] (y broadcast)", {3, {2, 3, 4}}, {2, {4, 5}}, 0, 0},
        {"BatchMatMulV2", "[2,1,3,4] . [3,5,4] adj_y", {4, {2, 1, 3, 4}}, {3, {3, 5, 4}}, 0, 1},
        {"BatchMatMulV3", "[2,4,3] . [2,4,5] adj_x", {3, {2, 4, 3}}, {3, {2, 4, 5}}, 1, 0},
        {"BatchMatMulV2", "[0,3,4] . [4,5] (empty)", {3, {0, 3, 4}}, {2, {4, 5}}, 0, 0},
    };
    for (size_t k = 0; k < sizeof bm / sizeof bm[0]; k++) {
        ut_opcase *c = add(bm[k].op, bm[k].name, 1, NEAR);
        tu_attr_b(c->def, "adj_x", bm[k].ax);
        tu_attr_b(c->def, "adj_y", bm[k].ay);
        if (strcmp(bm[k].op, "BatchMatMulV3") == 0) {
            tu_attr_type(c->def, "Ta", RT_DT_FLOAT);
            tu_attr_type(c->def, "Tb", RT_DT_FLOAT);
            tu_attr_type(c->def, "Tout", RT_DT_FLOAT);
        }
        in(c, rnd(bm[k].x, -1, 1), 0);
        in(c, rnd(bm[k].y, -1, 1), 0);
    }
}

static void reduce_cases(void) {
    static const char *const ops[] = {"Sum", "Mean", "Max", "Min", "Prod"};
    static const struct {
        const char *name;
        rt_shape x;
        int n;
        int64_t ax[3];
        int keep;
    } rc[] = {
        {"[3,4,5] over 1", {3, {3, 4, 5}}, 1, {1}, 0},
        {"[3,4,5] over 0,2 keep_dims", {3, {3, 4, 5}}, 2, {0, 2}, 1},
        {"[3,4,5] over -1", {3, {3, 4, 5}}, 1, {-1}, 0},
        {"[3,4,5] over all", {3, {3, 4, 5}}, 3, {0, 1, 2}, 0},
        {"[2,1,7,3] over 1,2", {4, {2, 1, 7, 3}}, 2, {1, 2}, 0},
        {"[1000] over 0", {1, {1000}}, 1, {0}, 0},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < sizeof rc / sizeof rc[0]; k++) {
            int prod = strcmp(ops[o], "Prod") == 0;
            ut_opcase *c = add(ops[o], rc[k].name, 1, NEAR);
            tu_attr_b(c->def, "keep_dims", rc[k].keep);
            tu_attr_type(c->def, "Tidx", RT_DT_INT32);
            in(c, prod ? rnd(rc[k].x, 0.97f, 1.03f) : rnd(rc[k].x, -2, 2), 0);
            in(c, ivec(RT_DT_INT32, rc[k].n, rc[k].ax), 1);
        }
    ut_opcase *c = add("Sum", "[0,4] over 0 (empty)", 1, EXACT);
    tu_attr_type(c->def, "Tidx", RT_DT_INT32);
    in(c, rnd(TU_SHAPE(0, 4), -2, 2), 0);
    in(c, I32V(0), 1);
}

static void shape_cases(void) {
    /* ConcatV2 on the last and a middle axis, with an empty part, and of
     * 2,000 inputs (more than any fixed table of slots) */
    static const struct {
        const char *name;
        int axis;
        rt_shape a, b;
    } cc[] = {
        {"[2,3,4] ++ [2,3,5] axis -1", -1, {3, {2, 3, 4}}, {3, {2, 3, 5}}},
        {"[2,3,4] ++ [2,1,4] axis 1", 1, {3, {2, 3, 4}}, {3, {2, 1, 4}}},
        {"[2,0,4] ++ [2,3,4] axis 1", 1, {3, {2, 0, 4}}, {3, {2, 3, 4}}},
    };
    for (size_t k = 0; k < sizeof cc / sizeof cc[0]; k++) {
        ut_opcase *c = add("ConcatV2", cc[k].name, 1, EXACT);
        tu_attr_i(c->def, "N", 2);
        tu_attr_type(c->def, "Tidx", RT_DT_INT32);
        in(c, rnd(cc[k].a, -2, 2), 0);
        in(c, rnd(cc[k].b, -2, 2), 0);
        in(c, iscalar(cc[k].axis), 1);
    }
    ut_opcase *c = add("ConcatV2", "2,000 x [1,3] axis 0", 1, EXACT);
    tu_attr_i(c->def, "N", 2000);
    tu_attr_type(c->def, "Tidx", RT_DT_INT32);
    for (int i = 0; i < 2000; i++)
        in(c, rnd(TU_SHAPE(1, 3), -2, 2), 0);
    in(c, iscalar(0), 1);
    /* Transpose rank 3, 4, 5 and an empty one */
    static const struct {
        const char *name;
        rt_shape x;
        int64_t perm[5];
    } tp[] = {
        {"[2,3,4] perm 2,0,1", {3, {2, 3, 4}}, {2, 0, 1}},
        {"[2,3,4,5] perm 0,3,1,2", {4, {2, 3, 4, 5}}, {0, 3, 1, 2}},
        {"[2,1,3,2,3] perm 4,2,0,3,1", {5, {2, 1, 3, 2, 3}}, {4, 2, 0, 3, 1}},
        {"[0,3,2] perm 1,2,0", {3, {0, 3, 2}}, {1, 2, 0}},
    };
    for (size_t k = 0; k < sizeof tp / sizeof tp[0]; k++) {
        c = add("Transpose", tp[k].name, 1, EXACT);
        tu_attr_type(c->def, "Tperm", RT_DT_INT32);
        in(c, rnd(tp[k].x, -2, 2), 0);
        in(c, ivec(RT_DT_INT32, tp[k].x.rank, tp[k].perm), 1);
    }
    /* Pad / PadV2 on H, W and on every axis */
    c = add("Pad", "[2,3,4,2] H 1,2 W 0,1", 1, EXACT);
    in(c, rnd(TU_SHAPE(2, 3, 4, 2), -2, 2), 0);
    rt_tensor *pd = tu_t(RT_DT_INT32, TU_SHAPE(4, 2), TU_NV(int32_t, 0, 0, 1, 2, 0, 1, 0, 0));
    in(c, pd, 1);
    c = add("PadV2", "[3,4] all axes, value 1.5", 1, EXACT);
    in(c, rnd(TU_SHAPE(3, 4), -2, 2), 0);
    in(c, tu_t(RT_DT_INT32, TU_SHAPE(2, 2), TU_NV(int32_t, 2, 1, 0, 3)), 1);
    in(c, TU_F32(TU_SCALAR, 1.5f), 1);
    /* Reshape, with -1 and to an empty shape */
    c = add("Reshape", "[2,3,4] to [4,-1]", 1, EXACT);
    in(c, rnd(TU_SHAPE(2, 3, 4), -2, 2), 0);
    in(c, I32V(4, -1), 1);
    c = add("Reshape", "[0,3] to [3,0]", 1, EXACT);
    in(c, rnd(TU_SHAPE(0, 3), -2, 2), 0);
    in(c, I32V(3, 0), 1);
}

static void index_cases(void) {
    ut_opcase *c = add("Slice", "[4,5,6] begin 1,0,2 size 2,-1,3", 1, EXACT);
    tu_attr_type(c->def, "Index", RT_DT_INT32);
    in(c, rnd(TU_SHAPE(4, 5, 6), -2, 2), 0);
    in(c, I32V(1, 0, 2), 1);
    in(c, I32V(2, -1, 3), 1);
    c = add("Slice", "[4,5] size 0 on axis 1", 1, EXACT);
    in(c, rnd(TU_SHAPE(4, 5), -2, 2), 0);
    in(c, I32V(1, 2), 1);
    in(c, I32V(2, 0), 1);
    static const struct {
        const char *name;
        int n;
        int64_t b[3], e[3], s[3];
        int64_t masks[5];
    } ss[] = {
        {"[5,6,7] 1:4, ::-2, 2:", 3, {1, 0, 2}, {4, 0, 0}, {1, -2, 1}, {2, 6, 0, 0, 0}},
        {"[5,6,7] shrink 2, new axis", 3, {2, 0, 0}, {3, 0, 0}, {1, 1, 1}, {0, 6, 0, 2, 1}},
        {"[5,6,7] ellipsis, -1", 2, {0, -1}, {0, 0}, {1, 1}, {0, 0, 1, 0, 2}},
    };
    for (size_t k = 0; k < sizeof ss / sizeof ss[0]; k++) {
        c = add("StridedSlice", ss[k].name, 1, EXACT);
        tu_attr_type(c->def, "Index", RT_DT_INT32);
        static const char *const keys[5] = {"begin_mask", "end_mask", "ellipsis_mask",
                                            "new_axis_mask", "shrink_axis_mask"};
        for (int i = 0; i < 5; i++)
            tu_attr_i(c->def, keys[i], ss[k].masks[i]);
        in(c, rnd(TU_SHAPE(5, 6, 7), -2, 2), 0);
        in(c, ivec(RT_DT_INT32, ss[k].n, ss[k].b), 1);
        in(c, ivec(RT_DT_INT32, ss[k].n, ss[k].e), 1);
        in(c, ivec(RT_DT_INT32, ss[k].n, ss[k].s), 1);
    }
    c = add("GatherV2", "[5,4] axis 0, int32 indices", 1, EXACT);
    tu_attr_type(c->def, "Tparams", RT_DT_FLOAT);
    in(c, rnd(TU_SHAPE(5, 4), -2, 2), 0);
    in(c, tu_t(RT_DT_INT32, TU_SHAPE(3), TU_NV(int32_t, 4, 0, 4)), 0);
    in(c, iscalar(0), 1);
    c = add("GatherV2", "[3,5,2] axis 1, int64 [2,2] indices", 1, EXACT);
    tu_attr_type(c->def, "Tparams", RT_DT_FLOAT);
    in(c, rnd(TU_SHAPE(3, 5, 2), -2, 2), 0);
    in(c, tu_t(RT_DT_INT64, TU_SHAPE(2, 2), TU_NV(int64_t, 1, 3, 4, 0)), 1);
    in(c, iscalar(1), 1);
    c = add("GatherV2", "[3,4] batch_dims 1", 1, EXACT);
    tu_attr_type(c->def, "Tparams", RT_DT_FLOAT);
    tu_attr_i(c->def, "batch_dims", 1);
    in(c, rnd(TU_SHAPE(3, 4), -2, 2), 0);
    in(c, tu_t(RT_DT_INT32, TU_SHAPE(3, 2), TU_NV(int32_t, 0, 3, 1, 1, 2, 0)), 0);
    in(c, iscalar(1), 1);
    c = add("GatherV2", "[5,4] empty indices", 1, EXACT);
    tu_attr_type(c->def, "Tparams", RT_DT_FLOAT);
    in(c, rnd(TU_SHAPE(5, 4), -2, 2), 0);
    in(c, tu_t(RT_DT_INT32, TU_SHAPE(0), NULL, 0), 0);
    in(c, iscalar(0), 1);
    c = add("Gather", "[6,2] [4] indices", 1, EXACT);
    tu_attr_type(c->def, "Tparams", RT_DT_FLOAT);
    in(c, rnd(TU_SHAPE(6, 2), -2, 2), 0);
    in(c, tu_t(RT_DT_INT32, TU_SHAPE(4), TU_NV(int32_t, 5, 0, 2, 2)), 0);
}

static void image_cases(void) {
    static const struct {
        const char *name;
        int64_t h, w;
        int ac, hp;
    } rz[] = {
        {"[2,4,5,3] to 7x3 legacy", 7, 3, 0, 0},
        {"[2,4,5,3] to 7x3 align_corners", 7, 3, 1, 0},
        {"[2,4,5,3] to 7x3 half_pixel_centers", 7, 3, 0, 1},
        {"[2,4,5,3] to 2x9 half_pixel_centers", 2, 9, 0, 1},
    };
    for (int nn = 0; nn < 2; nn++)
        for (size_t k = 0; k < sizeof rz / sizeof rz[0]; k++) {
            ut_opcase *c = add(nn ? "ResizeNearestNeighbor" : "ResizeBilinear", rz[k].name, 1,
                               nn ? EXACT : NEAR);
            tu_attr_b(c->def, "align_corners", rz[k].ac);
            tu_attr_b(c->def, "half_pixel_centers", rz[k].hp);
            in(c, rnd(TU_SHAPE(2, 4, 5, 3), -2, 2), 0);
            in(c, I32V(rz[k].h, rz[k].w), 1);
        }
}

int ut_opcases(ut_opcase **out) {
    g_cases = NULL;
    g_n = g_cap = 0;
    binary_cases();
    unary_cases();
    nn_cases();
    conv_cases();
    gemm_cases();
    reduce_cases();
    shape_cases();
    index_cases();
    image_cases();
    *out = g_cases;
    return g_n;
}

void ut_opcases_free(ut_opcase *c, int n) {
    for (int i = 0; i < n; i++) {
        tu_unref(c[i].in, c[i].nin);
        free(c[i].in);
        free(c[i].is_const);
        tu_node_free(c[i].def);
    }
    free(c);
}

/* ---- running ---- */

/* One node on dev: inputs copied to it, prepare given the constants,
 * compute, outputs copied back (the first c->ncmp). */
static ms_status run_on(kn_backend *dev, const ut_opcase *c, rt_tensor **outs) {
    kn_node kn = {.name = c->def->name, .op = c->def->op, .def = c->def,
                  .attrs = &rt_nodedef_attrs, .nin = c->nin, .nout = c->nout};
    const kn_kernel *k = kn_backend_kernel(dev, c->def->op);
    if (k == NULL)
        return ms_errf(MS_ENOTSUP, "%s has no kernel for %s", kn_backend_name(dev), c->def->op);
    rt_tensor **cin = calloc((size_t)c->nin, sizeof(*cin)), **din = calloc((size_t)c->nin, sizeof(*din));
    rt_tensor **dout = calloc((size_t)c->nout, sizeof(*dout));
    ck_assert(cin != NULL && din != NULL && dout != NULL);
    ms_status st = MS_OK;
    void *state = NULL;
    for (int i = 0; i < c->nin && st == MS_OK; i++) {
        cin[i] = c->is_const[i] ? c->in[i] : NULL;
        st = kn_backend_to_device(dev, c->in[i], &din[i]);
    }
    int prepared = 0;
    if (st == MS_OK && k->prepare)
        st = k->prepare(&kn, cin, &state);
    prepared = st == MS_OK;
    kn_ctx ctx = {.nthreads = 1};
    if (st == MS_OK)
        st = k->compute(&ctx, &kn, state, din, dout);
    if (st == MS_OK)
        st = kn_backend_sync(dev);
    for (int j = 0; j < c->ncmp && st == MS_OK; j++) {
        if (dout[j] == NULL)
            st = ms_errf(MS_EINTERNAL, "output %d not set", j);
        else
            st = kn_backend_to_host(dev, dout[j], &outs[j]);
    }
    if (prepared && k->release)
        k->release(state);
    tu_unref(din, c->nin);
    tu_unref(dout, c->nout);
    free(cin);
    free(din);
    free(dout);
    return st;
}

static void compare(const ut_opcase *c, float tol, int j, const rt_tensor *want,
                    const rt_tensor *got, double *max_abs) {
    char a[128], b[128];
    ck_assert_msg(got->buf == NULL || got->buf->device == 0, "%s: output %d not on the host", c->name, j);
    ck_assert_msg(want->dtype == got->dtype && rt_shape_equal(&want->shape, &got->shape),
                  "%s: output %d is %s %s, the CPU's %s %s", c->name, j, rt_dtype_name(got->dtype),
                  rt_shape_str(&got->shape, a, sizeof a), rt_dtype_name(want->dtype),
                  rt_shape_str(&want->shape, b, sizeof b));
    if (tol == 0 || want->dtype != RT_DT_FLOAT) {
        ck_assert_msg(memcmp(want->data, got->data, rt_tensor_nbytes(want)) == 0,
                      "%s: output %d differs from the CPU's bytes", c->name, j);
        return;
    }
    const float *w = want->data, *g = got->data;
    for (int64_t i = 0; i < want->nelem; i++) {
        float lim = tol * fmaxf(1.0f, fabsf(w[i]));
        if (fabs((double)g[i] - w[i]) > *max_abs)
            *max_abs = fabs((double)g[i] - w[i]);
        ck_assert_msg(fabsf(g[i] - w[i]) <= lim || (isnan(g[i]) && isnan(w[i])),
                      "%s: output %d [%lld]: %.9g, the CPU's %.9g (tolerance %g relative)", c->name,
                      j, (long long)i, g[i], w[i], tol);
    }
}

void ut_opcase_check(kn_backend *cpu, kn_backend *dev, const ut_opcase *c) {
    double max_abs = 0;
    ut_opcase_check_tol(cpu, dev, c, c->tol, &max_abs);
}

void ut_opcase_check_tol(kn_backend *cpu, kn_backend *dev, const ut_opcase *c, float tol,
                         double *max_abs) {
    rt_tensor **want = calloc((size_t)c->nout, sizeof(*want));
    rt_tensor **got = calloc((size_t)c->nout, sizeof(*got));
    ck_assert(want != NULL && got != NULL);
    ms_status st = rt_op_run1(cpu, rt_model_host_ops, c->def, c->in, c->nin, want, c->nout);
    ck_assert_msg(st == MS_OK, "%s on the CPU: %s", c->name, ms_errmsg());
    st = run_on(dev, c, got);
    ck_assert_msg(st == MS_OK, "%s on %s: %s", c->name, kn_backend_name(dev), ms_errmsg());
    for (int j = 0; j < c->ncmp; j++)
        compare(c, tol, j, want[j], got[j], max_abs);
    tu_unref(want, c->nout);
    tu_unref(got, c->nout);
    free(want);
    free(got);
}
