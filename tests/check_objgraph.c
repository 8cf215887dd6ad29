/* check_objgraph.c - TF2 variables restored through the SavedObjectGraph
 * and the checkpoint's TrackableObjectGraph (runtime/savedmodel/rt_objgraph.c),
 * as Keras 3 exports need: a SavedModel written here whose signature calls a
 * function capturing a variable (bound_inputs -> object 1), with no restore
 * op, and a bundle holding the value under the object graph's key. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kn_cpu_backend.h"
#include "rt_bundle.h"
#include "rt_model.h"
#include "util_bundle.h"
#include "util_fn.h"
#include "util_node.h"

#define KEY "_layers/0/_kernel/.ATTRIBUTES/VARIABLE_VALUE"

/* Writes the model into dir: y = x + v, v captured by the called function.
 * ckpt_key: the key the checkpoint's object graph gives object 1 (NULL: no
 * VARIABLE_VALUE attribute); bound: the object id the call's capture names. */
static void write_model(const char *dir, const char *ckpt_key, int bound, float value) {
    mgb b;
    mgb_init(&b);
    placeholder(&b, "x", RT_DT_FLOAT);
    Tensorflow__NodeDef *v = top(&b, node("layer/kernel", "VarHandleOp", NULL));
    attr_type(v, "dtype", RT_DT_FLOAT);
    Tensorflow__NodeDef *c = top(&b, node("call", "StatefulPartitionedCall", IN("x", "layer/kernel")));
    rt_dtype tf = RT_DT_FLOAT;
    attr_types(c, "Tout", 1, &tf);
    attr_func(c, "f", "serve_fn");
    Tensorflow__FunctionDef *f =
        fn(&b, "serve_fn", 2, (const char *[]){"in", "h"}, 1, (const char *[]){"out=add:z:0"});
    Tensorflow__NodeDef *r = body(f, node("read", "ReadVariableOp", IN("h")));
    attr_type(r, "dtype", RT_DT_FLOAT);
    bin(f, "add", "AddV2", "in", "read:value:0", RT_DT_FLOAT);

    /* Signature x -> call:0. */
    Tensorflow__TensorInfo *ti[2];
    for (int i = 0; i < 2; i++) {
        ti[i] = A(sizeof(*ti[i]));
        tensorflow__tensor_info__init(ti[i]);
        ti[i]->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
        ti[i]->name = S(i == 0 ? "x:0" : "call:0");
        ti[i]->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    }
    Tensorflow__SignatureDef *sd = A(sizeof(*sd));
    tensorflow__signature_def__init(sd);
    sd->method_name = S("tensorflow/serving/predict");
    Tensorflow__SignatureDef__InputsEntry *ie = A(sizeof(*ie));
    tensorflow__signature_def__inputs_entry__init(ie);
    ie->key = S("x");
    ie->value = ti[0];
    Tensorflow__SignatureDef__OutputsEntry *oe = A(sizeof(*oe));
    tensorflow__signature_def__outputs_entry__init(oe);
    oe->key = S("y");
    oe->value = ti[1];
    sd->inputs = A(sizeof(void *));
    sd->inputs[0] = ie;
    sd->n_inputs = 1;
    sd->outputs = A(sizeof(void *));
    sd->outputs[0] = oe;
    sd->n_outputs = 1;
    Tensorflow__MetaGraphDef__SignatureDefEntry *se = A(sizeof(*se));
    tensorflow__meta_graph_def__signature_def_entry__init(se);
    se->key = S("serving_default");
    se->value = sd;
    b.mg.signature_def = A(sizeof(void *));
    b.mg.signature_def[0] = se;
    b.mg.n_signature_def = 1;
    Tensorflow__MetaGraphDef__MetaInfoDef *mi = A(sizeof(*mi));
    tensorflow__meta_graph_def__meta_info_def__init(mi);
    mi->tags = A(sizeof(char *));
    mi->tags[0] = S("serve");
    mi->n_tags = 1;
    b.mg.meta_info_def = mi;

    /* Object graph: 0 the root, 1 the variable; serve_fn captures object `bound`. */
    Tensorflow__SavedObjectGraph *og = A(sizeof(*og));
    tensorflow__saved_object_graph__init(og);
    og->nodes = A(2 * sizeof(void *));
    for (int i = 0; i < 2; i++) {
        og->nodes[i] = A(sizeof(*og->nodes[i]));
        tensorflow__saved_object__init(og->nodes[i]);
    }
    og->nodes[1]->kind_case = TENSORFLOW__SAVED_OBJECT__KIND_VARIABLE;
    og->nodes[1]->variable = A(sizeof(*og->nodes[1]->variable));
    tensorflow__saved_variable__init(og->nodes[1]->variable);
    og->nodes[1]->variable->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    og->n_nodes = 2;
    Tensorflow__SavedObjectGraph__ConcreteFunctionsEntry *ce = A(sizeof(*ce));
    tensorflow__saved_object_graph__concrete_functions_entry__init(ce);
    ce->key = S("serve_fn");
    ce->value = A(sizeof(*ce->value));
    tensorflow__saved_concrete_function__init(ce->value);
    ce->value->bound_inputs = A(sizeof(int32_t));
    ce->value->bound_inputs[0] = bound;
    ce->value->n_bound_inputs = 1;
    og->concrete_functions = A(sizeof(void *));
    og->concrete_functions[0] = ce;
    og->n_concrete_functions = 1;
    b.mg.object_graph_def = og;

    Tensorflow__SavedModel sm = TENSORFLOW__SAVED_MODEL__INIT;
    Tensorflow__MetaGraphDef *mgs[1] = {&b.mg};
    sm.meta_graphs = mgs;
    sm.n_meta_graphs = 1;
    size_t len = tensorflow__saved_model__get_packed_size(&sm);
    uint8_t *buf = A(len + 1);
    tensorflow__saved_model__pack(&sm, buf);
    char path[4096];
    snprintf(path, sizeof path, "%s/saved_model.pb", dir);
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
    fclose(fp);

    /* The checkpoint: the value and the trackable object graph. */
    Tensorflow__TrackableObjectGraph tog = TENSORFLOW__TRACKABLE_OBJECT_GRAPH__INIT;
    Tensorflow__TrackableObjectGraph__TrackableObject o[2], *op[2] = {&o[0], &o[1]};
    Tensorflow__TrackableObjectGraph__TrackableObject__SerializedTensor at, *atp = &at;
    for (int i = 0; i < 2; i++) tensorflow__trackable_object_graph__trackable_object__init(&o[i]);
    tensorflow__trackable_object_graph__trackable_object__serialized_tensor__init(&at);
    at.name = "VARIABLE_VALUE";
    at.checkpoint_key = (char *)(ckpt_key ? ckpt_key : "");
    if (ckpt_key) {
        o[1].attributes = &atp;
        o[1].n_attributes = 1;
    }
    tog.nodes = op;
    tog.n_nodes = 2;
    size_t tl = tensorflow__trackable_object_graph__get_packed_size(&tog);
    uint8_t *tb = A(tl + 1);
    tensorflow__trackable_object_graph__pack(&tog, tb);
    snprintf(path, sizeof path, "%s/variables", dir);
    ck_assert_int_eq(mkdir(path, 0777), 0);
    snprintf(path, sizeof path, "%s/variables/variables", dir);
    rt_bundle_writer *w;
    ck_assert_int_eq(rt_bundle_writer_new(path, &w), MS_OK);
    rt_tensor *val = TU_F32(TU_SCALAR, value), *ogt;
    rt_str str = {tb, tl};
    rt_shape sc = {0};
    ck_assert_int_eq(rt_tensor_new_strings(&sc, &str, &ogt), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_add(w, KEY, val), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_add(w, "_CHECKPOINTABLE_OBJECT_GRAPH", ogt), MS_OK);
    ck_assert_int_eq(rt_bundle_writer_finish(w), MS_OK);
    rt_tensor_unref(val);
    rt_tensor_unref(ogt);
    arena_free();
}

static ms_status load(const char *dir, rt_model **m, kn_backend *be) {
    const char *tags[] = {"serve"};
    return rt_model_load(dir, tags, 1, be, m);
}

START_TEST(test_restore_through_object_graph) {
    char dir[256];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof dir), 0);
    write_model(dir, KEY, 1, 2.5f);
    kn_backend *be = kn_cpu_backend_new(1);
    rt_model *m = NULL;
    ck_assert_msg(load(dir, &m, be) == MS_OK, "%s", ms_errmsg());
    rt_tensor *x = TU_F32(TU_SHAPE(2), 1.0f, -4.0f), *y = NULL;
    rt_feed feed = {"x:0", x};
    const char *fetch = "call:0";
    ck_assert_int_eq(rt_model_run(m, &feed, 1, &fetch, 1, NULL, 0, NULL, &y), MS_OK);
    TU_CHECK_F32(y, TU_SHAPE(2), 0, 3.5f, -1.5f); /* x + 2.5 */
    rt_tensor_unref(x);
    rt_tensor_unref(y);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

START_TEST(test_unrestored_fails_load) {
    /* The capture names an object the checkpoint gives no value: the load
     * fails naming the variable, not the first request. */
    const struct {
        const char *key;
        int bound;
    } cases[] = {{NULL, 1}, {KEY, 0}};
    for (int i = 0; i < 2; i++) {
        char dir[256];
        ck_assert_int_eq(ut_mkdtemp(dir, sizeof dir), 0);
        write_model(dir, cases[i].key, cases[i].bound, 1.0f);
        kn_backend *be = kn_cpu_backend_new(1);
        rt_model *m = NULL;
        ck_assert_int_eq(load(dir, &m, be), MS_EINVAL);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(ms_errmsg(), "1 variable read by the signature has no value") &&
                          strstr(ms_errmsg(), "'layer/kernel'"),
                      "%s", ms_errmsg());
        kn_backend_free(be);
        ut_rmtree(dir);
    }
    /* A key the bundle lacks: the restore fails naming it. */
    char dir[256];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof dir), 0);
    write_model(dir, "no/such/key", 1, 1.0f);
    kn_backend *be = kn_cpu_backend_new(1);
    rt_model *m = NULL;
    ck_assert_int_ne(load(dir, &m, be), MS_OK);
    ck_assert_msg(strstr(ms_errmsg(), "no/such/key") && strstr(ms_errmsg(), "layer/kernel"), "%s",
                  ms_errmsg());
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"restore_through_object_graph", test_restore_through_object_graph},
        {"unrestored_fails_load", test_unrestored_fails_load},
    };
    return tu_suite_main("objgraph", cases, sizeof(cases) / sizeof(cases[0]));
}
