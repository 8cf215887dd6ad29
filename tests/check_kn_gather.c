/* check_kn_gather.c - GatherV2 with batch_dims (kernels/cpu/kn_cpu_shape.c
 * over kernels/kn_gather.c) and the resource-variable gathers ResourceGather
 * / ResourceGatherNd (runtime/graph/rt_ops_resource.c), against values worked
 * out by hand from tf.gather / tf.gather_nd's documentation. The variables
 * are real rt_vars entries, handed to the ops as the DT_RESOURCE handle that
 * VarHandleOp makes. */
#include <check.h>

#include "kn_cpu_backend.h"
#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_vars.h"
#include "util_fn.h"
#include "util_node.h"

START_TEST(test_gather_batch_dims) {
    /* params [2, 3], indices [[2, 0], [1, 1]], batch_dims 1, axis 1:
     * out[b] = params[b][indices[b]] -> [[3, 1], [5, 5]] */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                        TU_I32(TU_SHAPE(2, 2), 2, 0, 1, 1), TU_I32(TU_SCALAR, 1)};
    Tensorflow__NodeDef *d = tu_node_new("GatherV2", "gb");
    tu_attr_i(d, "batch_dims", 1);
    rt_tensor *o = tu_run1(d, in, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 3, 1, 5, 5);
    rt_tensor_unref(o);
    /* batch_dims -1 means 1 here (indices of rank 2) */
    d = tu_node_new("GatherV2", "gb_neg");
    tu_attr_i(d, "batch_dims", -1);
    o = tu_run1(d, in, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 3, 1, 5, 5);
    rt_tensor_unref(o);
    /* axis before batch_dims, and batch sizes that differ */
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(TU_SCALAR, 0);
    d = tu_node_new("GatherV2", "gb_axis");
    tu_attr_i(d, "batch_dims", 1);
    tu_run_fail(d, in, 3, 1, MS_EINVAL, "axis 0 is out of range");
    tu_unref(in, 3);
    rt_tensor *p3[3] = {TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6), TU_I32(TU_SHAPE(2, 1), 0, 1),
                        TU_I32(TU_SCALAR, 1)};
    d = tu_node_new("GatherV2", "gb_batch");
    tu_attr_i(d, "batch_dims", 1);
    tu_run_fail(d, p3, 3, 1, MS_EINVAL, "batch dimension 0");
    tu_unref(p3, 3);
    /* params [2, 2, 3], batch_dims 1, axis 2, indices [[0], [2]]:
     * out[b, i, j] = params[b, i, indices[b, j]] -> [[[1], [4]], [[9], [12]]] */
    rt_tensor *q[3] = {TU_F32(TU_SHAPE(2, 2, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
                       TU_I64(TU_SHAPE(2, 1), 0, 2), TU_I64(TU_SCALAR, 2)};
    d = tu_node_new("GatherV2", "gb_inner");
    tu_attr_i(d, "batch_dims", 1);
    o = tu_run1(d, q, 3);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 1), 0, 1, 4, 9, 12);
    rt_tensor_unref(o);
    tu_unref(q, 3);
}
END_TEST

/* A resource handle to a variable holding `value` (the variable takes the
 * reference). */
static rt_tensor *handle_to(rt_vars *vars, const char *name, rt_tensor *value) {
    rt_var *v = rt_vars_get(vars, name, value ? value->dtype : RT_DT_FLOAT);
    ck_assert_ptr_nonnull(v);
    rt_tensor_unref(v->value);
    v->value = value;
    rt_tensor *h = NULL;
    rt_shape scalar = {0};
    ck_assert_int_eq(rt_tensor_new(RT_DT_RESOURCE, &scalar, &h), MS_OK);
    *(rt_var **)h->data = v;
    return h;
}

static Tensorflow__NodeDef *rg_node(const char *op, const char *name, int64_t batch_dims) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    tu_attr_type(d, "dtype", RT_DT_FLOAT);
    if (batch_dims) tu_attr_i(d, "batch_dims", batch_dims);
    return d;
}

START_TEST(test_resource_gather) {
    rt_vars vars;
    rt_vars_init(&vars);
    /* an embedding table of 4 rows of 2: rows 3, 0, 3 */
    rt_tensor *in[2] = {
        handle_to(&vars, "emb", TU_F32(TU_SHAPE(4, 2), 0, 1, 10, 11, 20, 21, 30, 31)),
        TU_I32(TU_SHAPE(3), 3, 0, 3)};
    rt_tensor *o = tu_run1(rg_node("ResourceGather", "rg", 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(3, 2), 0, 30, 31, 0, 1, 30, 31);
    rt_tensor_unref(o);
    /* [2, 2] ids keep their shape: [2, 2, 2] */
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(2, 2), 1, 2, 2, 1);
    o = tu_run1(rg_node("ResourceGather", "rg2", 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2), 0, 10, 11, 20, 21, 20, 21, 10, 11);
    rt_tensor_unref(o);
    /* out of range, named with its position */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(2), 1, 4);
    tu_run_fail(rg_node("ResourceGather", "rg_oob", 0), in, 2, 1, MS_EINVAL,
                "indices[1] = 4 is not in [0, 4)");
    /* batch_dims 1 gathers along axis 1: out[b] = var[b][ids[b]] */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(4, 1), 1, 0, 0, 1);
    o = tu_run1(rg_node("ResourceGather", "rg_b", 1), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(4, 1), 0, 1, 10, 20, 31);
    rt_tensor_unref(o);
    /* ResourceGatherNd: [[1, 1], [3, 0]] -> [11, 30]; [[2]] -> row 2 */
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(2, 2), 1, 1, 3, 0);
    o = tu_run1(rg_node("ResourceGatherNd", "rgn", 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(2), 0, 11, 30);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(1, 1), 2);
    o = tu_run1(rg_node("ResourceGatherNd", "rgn_row", 0), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 2), 0, 20, 21);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(1, 2), 0, 2);
    tu_run_fail(rg_node("ResourceGatherNd", "rgn_oob", 0), in, 2, 1, MS_EINVAL,
                "indices[0] = [0,2] does not index into param shape [4,2]");
    /* empty ids give an empty result */
    rt_tensor_unref(in[1]);
    in[1] = tu_t(RT_DT_INT32, TU_SHAPE(0), NULL, 0);
    o = tu_run1(rg_node("ResourceGather", "rg_empty", 0), in, 2);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 2));
    rt_tensor_unref(o);
    /* a variable without a value, a dtype the variable does not hold */
    rt_tensor *un[2] = {handle_to(&vars, "unset", NULL), TU_I32(TU_SHAPE(1), 0)};
    tu_run_fail(rg_node("ResourceGather", "rg_unset", 0), un, 2, 1, MS_EINVAL,
                "variable 'unset' is not initialised");
    Tensorflow__NodeDef *d = tu_node_new("ResourceGather", "rg_dtype");
    tu_attr_type(d, "dtype", RT_DT_INT64);
    tu_run_fail(d, in, 2, 1, MS_EINVAL, "holds");
    rt_tensor *nh[2] = {TU_F32(TU_SHAPE(1), 0), TU_I32(TU_SHAPE(1), 0)};
    tu_run_fail(rg_node("ResourceGather", "rg_nohandle", 0), nh, 2, 1, MS_EINVAL,
                "not a variable handle");
    tu_unref(nh, 2);
    tu_unref(un, 2);
    tu_unref(in, 2);
    rt_vars_destroy(&vars);
}
END_TEST

/* A Keras-embedding-like graph through the real graph builder, planner and
 * executor with the loader's host ops: VarHandleOp "emb", an init target
 * AssignVariableOp(emb, reshape(table, [3, 2])), then
 * Einsum("bd,d->b", ResourceGather(emb, ids), w): rows [0, 1], [10, 11],
 * [20, 21] dotted with w = [1, 2] give 2, 32, 62. */
START_TEST(test_gather_graph) {
    mgb b;
    mgb_init(&b);
    float table[6] = {0, 1, 10, 11, 20, 21}, w[2] = {1, 2};
    int32_t shp[2] = {3, 2};
    attr_const(top(&b, node("table", "Const", NULL)), RT_DT_FLOAT, 6, table);
    attr_const(top(&b, node("shp", "Const", NULL)), RT_DT_INT32, 2, shp);
    attr_const(top(&b, node("w", "Const", NULL)), RT_DT_FLOAT, 2, w);
    attr_type(top(&b, node("tab2", "Reshape", IN("table", "shp"))), "T", RT_DT_FLOAT);
    Tensorflow__NodeDef *v = top(&b, node("emb", "VarHandleOp", NULL));
    attr_type(v, "dtype", RT_DT_FLOAT);
    attr_type(top(&b, node("init", "AssignVariableOp", IN("emb", "tab2"))), "dtype", RT_DT_FLOAT);
    placeholder(&b, "ids", RT_DT_INT32);
    attr_type(top(&b, node("rg", "ResourceGather", IN("emb", "ids"))), "dtype", RT_DT_FLOAT);
    Tensorflow__NodeDef *e = top(&b, node("es", "Einsum", IN("rg", "w")));
    Tensorflow__AttrValue *eq = attr(e, "equation");
    eq->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    eq->s.data = (uint8_t *)S("bd,d->b");
    eq->s.len = 7;
    attr_type(e, "T", RT_DT_FLOAT);
    kn_backend *be = kn_cpu_backend_new(1);
    rt_graph *g;
    ck_assert_msg(rt_graph_build(&b.mg, be, rt_model_host_ops, &g) == MS_OK, "%s", ms_errmsg());
    rt_vars vars;
    rt_vars_init(&vars);
    kn_ctx ctx = {.nthreads = 1};
    int init = rt_graph_find(g, "init");
    ck_assert_int_ge(init, 0);
    rt_plan *pi = NULL, *pr = NULL;
    ck_assert_msg(rt_plan_build(g, NULL, 0, NULL, 0, &init, 1, &pi) == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(rt_plan_run(pi, &ctx, &vars, NULL, NULL) == MS_OK, "%s", ms_errmsg());
    rt_edge f, o;
    ck_assert_int_eq(rt_graph_tensor(g, "ids", &f), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "es:0", &o), MS_OK);
    ck_assert_msg(rt_plan_build(g, &f, 1, &o, 1, NULL, 0, &pr) == MS_OK, "%s", ms_errmsg());
    rt_tensor *ids = TU_I32(TU_SHAPE(4), 2, 0, 1, 2), *out = NULL;
    ck_assert_msg(rt_plan_run(pr, &ctx, &vars, &ids, &out) == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(out, TU_SHAPE(4), 0, 62, 2, 32, 62);
    rt_tensor_unref(out);
    out = NULL;
    ((int32_t *)ids->data)[3] = 3;
    ck_assert_int_eq(rt_plan_run(pr, &ctx, &vars, &ids, &out), MS_EINVAL);
    ck_assert_msg(strstr(ms_errmsg(), "indices[3] = 3 is not in [0, 3)") != NULL, "%s", ms_errmsg());
    rt_tensor_unref(ids);
    rt_plan_free(pr);
    rt_plan_free(pi);
    rt_vars_destroy(&vars);
    rt_graph_free(g);
    kn_backend_free(be);
    arena_free();
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"gather_batch_dims", test_gather_batch_dims},
        {"resource_gather", test_resource_gather},
        {"gather_graph", test_gather_graph},
    };
    return tu_suite_main("kn_gather", cases, sizeof(cases) / sizeof(cases[0]));
}
