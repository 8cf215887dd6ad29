/* check_graphbuild.c - graph builder and SavedModel writer (a small model with
 * TF1 variables, decoded by protoc and loaded and run by our runtime). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "rt_bundle.h"
#include "rt_graphbuild.h"
#include "rt_model.h"
#include "util_bundle.h"

static const Tensorflow__NodeDef *find_node(const Tensorflow__GraphDef *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++)
        if (strcmp(g->node[i]->name, name) == 0)
            return g->node[i];
    ck_abort_msg("no node %s", name);
    return NULL;
}

static const Tensorflow__AttrValue *find_attr(const Tensorflow__NodeDef *n, const char *key) {
    for (size_t i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i]->key, key) == 0)
            return n->attr[i]->value;
    ck_abort_msg("node %s has no attr %s", n->name, key);
    return NULL;
}

static const Tensorflow__SignatureDef *find_sig(const Tensorflow__MetaGraphDef *mg,
                                                const char *key) {
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, key) == 0)
            return mg->signature_def[i]->value;
    ck_abort_msg("no signature %s", key);
    return NULL;
}

static Tensorflow__SavedModel *pack_unpack(rt_gb *g) {
    uint8_t *buf;
    size_t n;
    ms_status st = rt_gb_pack_saved_model(g, &buf, &n);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, buf);
    free(buf);
    ck_assert_ptr_nonnull(sm);
    return sm;
}

static rt_tensor *floats(int rank, const int64_t *dims, const float *v) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    memcpy(t->data, v, rt_tensor_nbytes(t));
    return t;
}

/* Writes y = Relu(x W + b), x (-1, 4), with TF1 variables (the graph of the
 * first, pre-DICOM demo model):
 *   W (4, 2) = [[0.5, -1], [0.25, 0.5], [-0.5, 1], [1, -0.25]],  b = [0.1, -0.2]. */
static void write_relu_model(const char *vdir) {
    rt_tensor *w = floats(2, (int64_t[]){4, 2},
                          (float[]){0.5f, -1.0f, 0.25f, 0.5f, -0.5f, 1.0f, 1.0f, -0.25f});
    rt_tensor *b = floats(1, (int64_t[]){2}, (float[]){0.1f, -0.2f});
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(2, (int64_t[]){-1, 4});
    rt_shape ys = rt_shape_make(2, (int64_t[]){-1, 2});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    Tensorflow__NodeDef *wr = rt_gb_variable(g, "W", w);
    Tensorflow__NodeDef *br = rt_gb_variable(g, "b", b);
    Tensorflow__NodeDef *mm = rt_gb_matmul(g, "MatMul", "x", wr->name, 0, 0, RT_DT_FLOAT);
    Tensorflow__NodeDef *add = rt_gb_binary(g, "Add", "add", mm->name, br->name, RT_DT_FLOAT);
    rt_gb_unary(g, "Relu", "y", add->name, RT_DT_FLOAT);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &ys);
    ck_assert_msg(rt_savedmodel_write(vdir, g) == MS_OK, "%s", ms_errmsg());
    rt_gb_free(g);
    rt_tensor_unref(w);
    rt_tensor_unref(b);
}

START_TEST(attrs_every_kind) {
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    Tensorflow__NodeDef *n = rt_gb_node(g, "Fancy", "fancy");
    rt_gb_input(g, n, "a:1");
    rt_gb_control_input(g, n, "b");
    rt_gb_device(g, n, "/device:CPU:0");
    rt_gb_attr_i(g, n, "i", -42);
    rt_gb_attr_f(g, n, "f", 1.5f);
    rt_gb_attr_b(g, n, "b", 1);
    rt_gb_attr_s(g, n, "s", "a\0b", 3);
    rt_gb_attr_str(g, n, "str", "NHWC");
    rt_gb_attr_type(g, n, "T", RT_DT_HALF);
    rt_shape sh = rt_shape_make(3, (int64_t[]){-1, 224, 3});
    rt_gb_attr_shape(g, n, "shape", &sh);
    rt_gb_attr_shape(g, n, "unknown", NULL);
    rt_gb_attr_ilist(g, n, "ilist", (int64_t[]){1, 2, 2, 1}, 4);
    rt_gb_attr_flist(g, n, "flist", (float[]){0.25f, -3.0f}, 2);
    rt_gb_attr_typelist(g, n, "tlist", (rt_dtype[]){RT_DT_FLOAT, RT_DT_STRING}, 2);
    rt_gb_attr_typelist(g, n, "empty_tlist", NULL, 0);
    rt_gb_attr_strlist(g, n, "slist", (const char *[]){"x", "yz"}, 2);
    rt_tensor *t = floats(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4});
    rt_gb_attr_tensor(g, n, "value", t);
    rt_tensor_unref(t);
    Tensorflow__NameAttrList *f = rt_gb_attr_func(g, n, "func", "__inference_fn_12");
    Tensorflow__AttrValue *fa = rt_gb_func_attr(g, f, "_noinline");
    fa->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    fa->b = 1;
    rt_gb_attr_i(g, n, "i", 7); /* set twice: last wins, one entry */
    ck_assert_int_eq(rt_gb_status(g), MS_OK);

    Tensorflow__SavedModel *sm = pack_unpack(g);
    rt_gb_free(g);
    ck_assert_int_eq(sm->saved_model_schema_version, 1);
    ck_assert_uint_eq(sm->n_meta_graphs, 1);
    const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[0];
    ck_assert_uint_eq(mg->meta_info_def->n_tags, 1);
    ck_assert_str_eq(mg->meta_info_def->tags[0], "serve");
    ck_assert_int_eq(mg->graph_def->versions->producer, RT_GB_PRODUCER);
    ck_assert_ptr_null(mg->saver_def); /* no variables, no saver */
    const Tensorflow__NodeDef *d = find_node(mg->graph_def, "fancy");
    ck_assert_str_eq(d->op, "Fancy");
    ck_assert_uint_eq(d->n_input, 2);
    ck_assert_str_eq(d->input[0], "a:1");
    ck_assert_str_eq(d->input[1], "^b");
    ck_assert_str_eq(d->device, "/device:CPU:0");
    ck_assert_uint_eq(d->n_attr, 15); /* "i" set twice counts once */
    const Tensorflow__AttrValue *a = find_attr(d, "i");
    ck_assert_int_eq(a->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
    ck_assert_int_eq(a->i, 7);
    a = find_attr(d, "f");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_F && a->f == 1.5f);
    a = find_attr(d, "b");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && a->b);
    a = find_attr(d, "s");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S && a->s.len == 3 &&
              memcmp(a->s.data, "a\0b", 3) == 0);
    a = find_attr(d, "T");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_TYPE &&
              a->type == TENSORFLOW__DATA_TYPE__DT_HALF);
    a = find_attr(d, "shape");
    ck_assert_int_eq(a->value_case, TENSORFLOW__ATTR_VALUE__VALUE_SHAPE);
    ck_assert_uint_eq(a->shape->n_dim, 3);
    ck_assert_int_eq(a->shape->dim[0]->size, -1);
    ck_assert_int_eq(a->shape->dim[1]->size, 224);
    ck_assert(!a->shape->unknown_rank);
    a = find_attr(d, "unknown");
    ck_assert(a->shape->unknown_rank && a->shape->n_dim == 0);
    a = find_attr(d, "ilist");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && a->list->n_i == 4 &&
              a->list->i[1] == 2 && a->list->i[3] == 1);
    a = find_attr(d, "flist");
    ck_assert(a->list->n_f == 2 && a->list->f[0] == 0.25f && a->list->f[1] == -3.0f);
    a = find_attr(d, "tlist");
    ck_assert(a->list->n_type == 2 && a->list->type[1] == TENSORFLOW__DATA_TYPE__DT_STRING);
    a = find_attr(d, "empty_tlist");
    ck_assert(a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && a->list->n_type == 0);
    a = find_attr(d, "slist");
    ck_assert(a->list->n_s == 2 && a->list->s[1].len == 2 &&
              memcmp(a->list->s[1].data, "yz", 2) == 0);
    a = find_attr(d, "value");
    ck_assert_int_eq(a->value_case, TENSORFLOW__ATTR_VALUE__VALUE_TENSOR);
    ck_assert_int_eq(a->tensor->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_uint_eq(a->tensor->tensor_shape->n_dim, 2);
    ck_assert_uint_eq(a->tensor->tensor_content.len, 16);
    /* 3.0f = 0x40400000, little-endian at bytes 8..11 */
    static const uint8_t three[4] = {0x00, 0x00, 0x40, 0x40};
    ck_assert(memcmp(a->tensor->tensor_content.data + 8, three, 4) == 0);
    a = find_attr(d, "func");
    ck_assert_int_eq(a->value_case, TENSORFLOW__ATTR_VALUE__VALUE_FUNC);
    ck_assert_str_eq(a->func->name, "__inference_fn_12");
    ck_assert_uint_eq(a->func->n_attr, 1);
    ck_assert_str_eq(a->func->attr[0]->key, "_noinline");
    ck_assert(a->func->attr[0]->value->b);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

START_TEST(names_and_errors) {
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    Tensorflow__NodeDef *a = rt_gb_node(g, "Add", NULL);
    Tensorflow__NodeDef *b = rt_gb_node(g, "Add", NULL);
    ck_assert_str_eq(a->name, "Add");
    ck_assert_str_eq(b->name, "Add_1");
    ck_assert_str_eq(rt_gb_unique_name(g, "Add"), "Add_2");
    ck_assert_str_eq(rt_gb_unique_name(g, "Mul"), "Mul");
    ck_assert_ptr_eq(rt_gb_find(g, "Add_1"), b);
    ck_assert_ptr_null(rt_gb_find(g, "Add_2"));
    /* Many nodes: names stay unique and findable (hash table growth). */
    for (int i = 0; i < 3000; i++)
        ck_assert_ptr_nonnull(rt_gb_node(g, "Const", NULL));
    ck_assert_ptr_nonnull(rt_gb_find(g, "Const_2999"));
    ck_assert_uint_eq(rt_gb_graph(g)->n_node, 3002);
    ck_assert_int_eq(rt_gb_status(g), MS_OK);

    /* A duplicate name is sticky: later calls do nothing, writing fails. */
    ck_assert_ptr_null(rt_gb_node(g, "Mul", "Add"));
    ck_assert_int_eq(rt_gb_status(g), MS_EINVAL);
    ck_assert_str_eq(ms_errmsg(), "graph builder: duplicate node name 'Add'");
    ck_assert_ptr_null(rt_gb_node(g, "Mul", "fine"));
    rt_gb_input(g, NULL, "x"); /* NULL node: ignored */
    ck_assert_ptr_null(rt_gb_signature(g, "serving_default", RT_GB_PREDICT));
    char dir[256], path[512];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir)), 0);
    ms_err_clear();
    ck_assert_int_eq(rt_savedmodel_write(dir, g), MS_EINVAL);
    ck_assert_str_eq(ms_errmsg(), "graph builder: duplicate node name 'Add'");
    struct stat sb;
    snprintf(path, sizeof(path), "%s/saved_model.pb", dir);
    ck_assert_int_ne(stat(path, &sb), 0);
    rt_gb_free(g);

    /* Other misuse. */
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    ck_assert_ptr_null(rt_gb_node(g, "Op", "bad:name"));
    rt_gb_free(g);
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    Tensorflow__SignatureDef *s = rt_gb_signature(g, "k", RT_GB_PREDICT);
    rt_gb_sig_input(g, s, "x", "x:0", RT_DT_FLOAT, NULL);
    rt_gb_sig_input(g, s, "x", "y:0", RT_DT_FLOAT, NULL);
    ck_assert_int_eq(rt_gb_status(g), MS_EINVAL);
    rt_gb_free(g);
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_tensor *t = floats(0, NULL, (float[]){1});
    rt_gb_variable(g, "v", t);
    Tensorflow__MetaGraphDef *mg;
    ck_assert_int_eq(rt_gb_meta_graph(g, &mg), MS_OK);
    ck_assert_ptr_null(rt_gb_variable(g, "late", t)); /* after completion */
    ck_assert_int_eq(rt_gb_status(g), MS_EINVAL);
    rt_gb_free(g);
    rt_tensor_unref(t);
    ut_rmtree(dir);
}
END_TEST

/* Writes a model with a float and a string variable; checks the files, the
 * saver graph, the signature and the bundle. */
START_TEST(savedmodel_write_read) {
    char dir[256], vdir[512], path[600];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(vdir, sizeof(vdir), "%s/7", dir);
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(2, (int64_t[]){-1, 3});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    rt_tensor *k = floats(1, (int64_t[]){3}, (float[]){1.0f, 2.0f, 4.0f});
    rt_tensor *lbl;
    rt_str labels[2] = {{(const uint8_t *)"benign", 6}, {(const uint8_t *)"malignant", 9}};
    rt_shape ls = rt_shape_make(1, (int64_t[]){2});
    ck_assert_int_eq(rt_tensor_new_strings(&ls, labels, &lbl), MS_OK);
    Tensorflow__NodeDef *kr = rt_gb_variable(g, "scale", k);
    Tensorflow__NodeDef *lr = rt_gb_variable(g, "labels", lbl);
    ck_assert_str_eq(kr->name, "scale/read");
    ck_assert_str_eq(lr->name, "labels/read");
    rt_gb_binary(g, "Mul", "y", "x", kr->name, RT_DT_FLOAT);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "labels", "labels/read:0", RT_DT_STRING, NULL);
    rt_gb_node(g, "NoOp", "init_all");
    rt_gb_collection_add(g, "saved_model_main_op", "init_all");
    ck_assert_int_eq(rt_gb_num_variables(g), 2);
    ms_status st = rt_savedmodel_write(vdir, g);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    rt_gb_free(g);

    size_t n;
    snprintf(path, sizeof(path), "%s/saved_model.pb", vdir);
    uint8_t *pb = ut_read_file(path, &n);
    ck_assert_ptr_nonnull(pb);
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, pb);
    free(pb);
    ck_assert_ptr_nonnull(sm);
    const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[0];
    const Tensorflow__SaverDef *sd = mg->saver_def;
    ck_assert_ptr_nonnull(sd);
    ck_assert_str_eq(sd->filename_tensor_name, "save/Const:0");
    ck_assert_str_eq(sd->save_tensor_name, "save/control_dependency:0");
    ck_assert_str_eq(sd->restore_op_name, "save/restore_all");
    ck_assert_int_eq(sd->version, TENSORFLOW__SAVER_DEF__CHECKPOINT_FORMAT_VERSION__V2);
    const Tensorflow__GraphDef *gd = mg->graph_def;
    const Tensorflow__NodeDef *v = find_node(gd, "scale");
    ck_assert_str_eq(v->op, "VariableV2");
    ck_assert_int_eq(find_attr(v, "dtype")->type, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_int_eq(find_attr(v, "shape")->shape->dim[0]->size, 3);
    ck_assert_str_eq(find_node(gd, "save/Const")->op, "Const");
    /* RestoreV2 names are sorted; Assign i takes output i. */
    const Tensorflow__NodeDef *names = find_node(gd, "save/RestoreV2/tensor_names");
    const Tensorflow__TensorProto *tp = find_attr(names, "value")->tensor;
    ck_assert_uint_eq(tp->n_string_val, 2);
    ck_assert(tp->string_val[0].len == 6 && memcmp(tp->string_val[0].data, "labels", 6) == 0);
    ck_assert(tp->string_val[1].len == 5 && memcmp(tp->string_val[1].data, "scale", 5) == 0);
    const Tensorflow__NodeDef *rv = find_node(gd, "save/RestoreV2");
    ck_assert_str_eq(rv->op, "RestoreV2");
    ck_assert_uint_eq(rv->n_input, 3);
    ck_assert_str_eq(rv->input[0], "save/Const");
    const Tensorflow__AttrValue *dts = find_attr(rv, "dtypes");
    ck_assert(dts->list->n_type == 2 && dts->list->type[0] == TENSORFLOW__DATA_TYPE__DT_STRING &&
              dts->list->type[1] == TENSORFLOW__DATA_TYPE__DT_FLOAT);
    const Tensorflow__NodeDef *a1 = find_node(gd, "save/Assign_1");
    ck_assert_str_eq(a1->op, "Assign");
    ck_assert_str_eq(a1->input[0], "scale");
    ck_assert_str_eq(a1->input[1], "save/RestoreV2:1");
    const Tensorflow__NodeDef *ra = find_node(gd, "save/restore_all");
    ck_assert_str_eq(ra->op, "NoOp");
    ck_assert_uint_eq(ra->n_input, 2);
    ck_assert_str_eq(ra->input[0], "^save/Assign");
    ck_assert_str_eq(ra->input[1], "^save/Assign_1");
    const Tensorflow__NodeDef *sv = find_node(gd, "save/SaveV2");
    ck_assert_uint_eq(sv->n_input, 5);
    ck_assert_str_eq(sv->input[3], "labels");
    const Tensorflow__SignatureDef *s = find_sig(mg, "serving_default");
    ck_assert_str_eq(s->method_name, "tensorflow/serving/predict");
    ck_assert_uint_eq(s->n_inputs, 1);
    ck_assert_str_eq(s->inputs[0]->key, "x");
    ck_assert_str_eq(s->inputs[0]->value->name, "x:0");
    ck_assert_int_eq(s->inputs[0]->value->tensor_shape->dim[0]->size, -1);
    ck_assert_uint_eq(s->n_outputs, 2);
    ck_assert_ptr_null(s->outputs[1]->value->tensor_shape);
    ck_assert_uint_eq(mg->n_collection_def, 1);
    ck_assert_str_eq(mg->collection_def[0]->key, "saved_model_main_op");
    ck_assert_str_eq(mg->collection_def[0]->value->node_list->value[0], "init_all");
    tensorflow__saved_model__free_unpacked(sm, NULL);

    /* The bundle holds both values. */
    snprintf(path, sizeof(path), "%s/variables/variables", vdir);
    ck_assert_int_eq(rt_bundle_verify(path), MS_OK);
    rt_bundle *b;
    ck_assert_int_eq(rt_bundle_open(path, &b), MS_OK);
    ck_assert_int_eq(rt_bundle_count(b), 2);
    rt_tensor *t;
    ck_assert_int_eq(rt_bundle_read(b, "scale", &t), MS_OK);
    ck_assert(rt_tensor_equal(t, k));
    rt_tensor_unref(t);
    ck_assert_int_eq(rt_bundle_read(b, "labels", &t), MS_OK);
    ck_assert(rt_tensor_equal(t, lbl));
    rt_tensor_unref(t);
    rt_bundle_close(b);

    /* Our runtime restores both through the saver graph: y = x * scale and
     * the labels come back as written. */
    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    static const char *const serve[] = {"serve"};
    rt_model *m = NULL;
    st = rt_model_load(vdir, serve, 1, be, &m);
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
    rt_tensor *x = floats(2, (int64_t[]){1, 3}, (float[]){2.0f, 3.0f, 0.5f});
    rt_feed f = {"x:0", x};
    const char *fetch[2] = {"y:0", "labels/read:0"};
    rt_tensor *outs[2] = {NULL, NULL};
    st = rt_model_run(m, &f, 1, fetch, 2, NULL, 0, NULL, outs);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert(rt_tensor_f32(outs[0])[0] == 2.0f && rt_tensor_f32(outs[0])[1] == 6.0f &&
              rt_tensor_f32(outs[0])[2] == 2.0f);
    ck_assert(rt_tensor_equal(outs[1], lbl));
    rt_tensor_unref(outs[0]);
    rt_tensor_unref(outs[1]);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    rt_tensor_unref(k);
    rt_tensor_unref(lbl);
    ut_rmtree(dir);
}
END_TEST

/* protoc, the reference protobuf implementation, decodes what we wrote. */
START_TEST(protoc_decodes) {
    if (system("protoc --version >/dev/null 2>&1") != 0)
        return; /* protoc absent */
    const char *src = getenv("DCM_SRC");
    ck_assert_msg(src != NULL, "DCM_SRC not set");
    char dir[256], vdir[512], cmd[2048], out[600];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(vdir, sizeof(vdir), "%s/1", dir);
    write_relu_model(vdir);
    snprintf(out, sizeof(out), "%s/decoded.txt", dir);
    snprintf(cmd, sizeof(cmd),
             "protoc --decode=tensorflow.SavedModel -I '%s/proto' '%s/proto/tf_savedmodel.proto' "
             "< '%s/saved_model.pb' > '%s' 2>&1",
             src, src, vdir, out);
    int rc = system(cmd);
    size_t n;
    char *text = (char *)ut_read_file(out, &n);
    ck_assert_ptr_nonnull(text);
    text = realloc(text, n + 1);
    text[n] = '\0';
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "protoc failed: %s", text);
    ck_assert(strstr(text, "saved_model_schema_version: 1") != NULL);
    ck_assert(strstr(text, "tags: \"serve\"") != NULL);
    ck_assert(strstr(text, "restore_op_name: \"save/restore_all\"") != NULL);
    ck_assert(strstr(text, "method_name: \"tensorflow/serving/predict\"") != NULL);
    ck_assert(strstr(text, "op: \"VariableV2\"") != NULL);
    ck_assert(strstr(text, "op: \"Relu\"") != NULL);
    free(text);
    ut_rmtree(dir);
}
END_TEST

/* The variable model loads with our runtime and computes Relu(xW + b); the
 * expected values are computed by hand from the constants of
 * write_relu_model:
 *   x=[1,2,3,4]:  xW = [0.5+0.5-1.5+4, -1+1+3-1] = [3.5, 2]    +b -> [3.6, 1.8]
 *   x=[-1,0,0,0]: xW = [-0.5, 1]                  +b -> [-0.4, 0.8] -> [0, 0.8]
 *   x=[0,0,0,0]:  b = [0.1, -0.2]                           -> [0.1, 0]    */
START_TEST(variable_model_runs) {
    char dir[256], vdir[512];
    ck_assert_int_eq(ut_mkdtemp(dir, sizeof(dir)), 0);
    snprintf(vdir, sizeof(vdir), "%s/1", dir);
    write_relu_model(vdir);
    char prefix[600];
    snprintf(prefix, sizeof(prefix), "%s/variables/variables", vdir);
    ck_assert_int_eq(rt_bundle_verify(prefix), MS_OK);

    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(be);
    static const char *const serve[] = {"serve"};
    rt_model *m = NULL;
    ms_status st = rt_model_load(vdir, serve, 1, be, &m);
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
    rt_tensor *x = floats(2, (int64_t[]){3, 4}, (float[]){1, 2, 3, 4, -1, 0, 0, 0, 0, 0, 0, 0});
    rt_feed f = {"x:0", x};
    const char *fetch = "y:0";
    rt_tensor *y = NULL;
    st = rt_model_run(m, &f, 1, &fetch, 1, NULL, 0, NULL, &y);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert_int_eq(y->dtype, RT_DT_FLOAT);
    ck_assert_int_eq(y->shape.rank, 2);
    ck_assert_int_eq(y->shape.dim[0], 3);
    ck_assert_int_eq(y->shape.dim[1], 2);
    static const float want[6] = {3.6f, 1.8f, 0.0f, 0.8f, 0.1f, 0.0f};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(rt_tensor_f32(y)[i] > want[i] - 1e-6f &&
                          rt_tensor_f32(y)[i] < want[i] + 1e-6f,
                      "y[%d] = %g, want %g", i, rt_tensor_f32(y)[i], want[i]);
    rt_tensor_unref(y);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

/* A model holding op `op` (x -> op -> y), at the top level of its graph or,
 * when in_fn, only inside a library function; its load fails with the one
 * line naming the node and saying what to do. */
static void python_refused(const char *op, int in_fn) {
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(1, (int64_t[]){2});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    if (in_fn) {
        rt_gb_unary(g, "Neg", "y", "x", RT_DT_FLOAT);
        /* function f(x) = op(x), never called by the signature */
        Tensorflow__GraphDef *gd = rt_gb_graph(g);
        Tensorflow__FunctionDefLibrary *lib = rt_gb_alloc(g, sizeof(*lib));
        Tensorflow__FunctionDef *fd = rt_gb_alloc(g, sizeof(*fd));
        Tensorflow__OpDef *sig = rt_gb_alloc(g, sizeof(*sig));
        Tensorflow__NodeDef *nd = rt_gb_alloc(g, sizeof(*nd));
        Tensorflow__FunctionDef **fns = rt_gb_alloc(g, sizeof(*fns));
        Tensorflow__NodeDef **nds = rt_gb_alloc(g, sizeof(*nds));
        ck_assert(lib && fd && sig && nd && fns && nds);
        tensorflow__function_def_library__init(lib);
        tensorflow__function_def__init(fd);
        tensorflow__op_def__init(sig);
        tensorflow__node_def__init(nd);
        sig->name = rt_gb_strdup(g, "__inference_py_7");
        nd->name = rt_gb_strdup(g, "call");
        nd->op = rt_gb_strdup(g, op);
        nds[0] = nd;
        fd->signature = sig;
        fd->n_node_def = 1;
        fd->node_def = nds;
        fns[0] = fd;
        lib->n_function = 1;
        lib->function = fns;
        gd->library = lib;
    } else {
        Tensorflow__NodeDef *n = rt_gb_node(g, op, "y");
        rt_gb_input(g, n, "x");
        rt_gb_attr_str(g, n, "token", "pyfunc_0");
    }
    Tensorflow__SignatureDef *sd = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sd, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sd, "y", "y:0", RT_DT_FLOAT, &xs);
    char dir[256], vdir[512];
    ut_gb_write(g, dir, sizeof dir, vdir, sizeof vdir);
    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    rt_model *m;
    ms_status st = ut_load_serve(vdir, be, &m);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_ptr_null(m);
    const char *msg = ms_errmsg();
    char want[128];
    snprintf(want, sizeof want, "node '%s' (%s) calls Python code",
             in_fn ? "__inference_py_7/call" : "y", op);
    ck_assert_msg(strstr(msg, want) != NULL, "%s: %s", want, msg);
    ck_assert_msg(strstr(msg, "only in the process that exported the model") != NULL &&
                      strstr(msg, "rewrite that function in TensorFlow ops before export") != NULL,
                  "%s", msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "one line: %s", msg);
    kn_backend_free(be);
    ut_rmtree(dir);
}

START_TEST(python_ops_refused) {
    python_refused("EagerPyFunc", 0);
    python_refused("PyFunc", 0);
    python_refused("PyFuncStateless", 0);
    python_refused("EagerPyFunc", 1);
}
END_TEST

/* y = Identity(x) after Assert(All(x > 0), ["x must be positive", x]) (a
 * control input, as tf.debugging.assert_positive wires it): a run with
 * positive x answers y; one with a negative x fails INVALID_ARGUMENT with the
 * assert's message. */
START_TEST(assert_fails_the_run) {
    rt_gb *g;
    ck_assert_int_eq(rt_gb_new(&g), MS_OK);
    rt_shape xs = rt_shape_make(1, (int64_t[]){-1});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    rt_tensor *zero = floats(0, NULL, (float[]){0});
    rt_gb_const(g, "zero", zero);
    rt_tensor_unref(zero);
    rt_shape s1 = rt_shape_make(1, (int64_t[]){1});
    rt_tensor *axis;
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT32, &s1, &axis), MS_OK);
    ((int32_t *)axis->data)[0] = 0;
    rt_gb_const(g, "axis", axis);
    rt_tensor_unref(axis);
    rt_tensor *msg;
    ck_assert_int_eq(rt_tensor_scalar_string("x must be positive", 18, &msg), MS_OK);
    rt_gb_const(g, "msg", msg);
    rt_tensor_unref(msg);
    rt_gb_binary(g, "Greater", "pos", "x", "zero", RT_DT_FLOAT);
    Tensorflow__NodeDef *all = rt_gb_node(g, "All", "all");
    rt_gb_input(g, all, "pos");
    rt_gb_input(g, all, "axis");
    rt_gb_attr_type(g, all, "Tidx", RT_DT_INT32);
    Tensorflow__NodeDef *as = rt_gb_node(g, "Assert", "assert_positive");
    rt_gb_input(g, as, "all");
    rt_gb_input(g, as, "msg");
    rt_gb_input(g, as, "x");
    rt_gb_attr_typelist(g, as, "T", (rt_dtype[]){RT_DT_STRING, RT_DT_FLOAT}, 2);
    rt_gb_attr_i(g, as, "summarize", 3);
    Tensorflow__NodeDef *y = rt_gb_unary(g, "Identity", "y", "x", RT_DT_FLOAT);
    rt_gb_control_input(g, y, "assert_positive");
    Tensorflow__SignatureDef *sd = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sd, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sd, "y", "y:0", RT_DT_FLOAT, &xs);
    char dir[256], vdir[512];
    ut_gb_write(g, dir, sizeof dir, vdir, sizeof vdir);
    ms_log_set_level(MS_LOG_ERROR);
    kn_backend *be = kn_cpu_backend_new(1);
    rt_model *m;
    ms_status st = ut_load_serve(vdir, be, &m);
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
    const char *fetch[1] = {"y:0"};
    rt_tensor *x = floats(1, (int64_t[]){2}, (float[]){1, 2}), *out = NULL;
    rt_feed f = {"x:0", x};
    st = rt_model_run(m, &f, 1, fetch, 1, NULL, 0, NULL, &out);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert(rt_tensor_f32(out)[0] == 1.0f && rt_tensor_f32(out)[1] == 2.0f);
    rt_tensor_unref(out);
    rt_tensor_unref(x);
    x = floats(1, (int64_t[]){4}, (float[]){1, -2, 3, 4});
    f.tensor = x;
    out = NULL;
    st = rt_model_run(m, &f, 1, fetch, 1, NULL, 0, NULL, &out);
    ck_assert_int_eq(st, MS_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(ms_errmsg(),
                         "node 'assert_positive' (Assert): assertion failed: [x must be positive] "
                         "[1 -2 3...]") != NULL,
                  "%s", ms_errmsg());
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    ut_rmtree(dir);
}
END_TEST

static Suite *graphbuild_suite(void) {
    Suite *s = suite_create("graphbuild");
    TCase *tc = tcase_create("builder");
    tcase_add_test(tc, attrs_every_kind);
    tcase_add_test(tc, names_and_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("savedmodel");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, savedmodel_write_read);
    tcase_add_test(tc, protoc_decodes);
    tcase_add_test(tc, variable_model_runs);
    tcase_add_test(tc, python_ops_refused);
    tcase_add_test(tc, assert_fails_the_run);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(graphbuild_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
