/* check_onnx.c - ONNX import (runtime/onnx/rt_onnx.h): the converted SavedModels
 * run on the CPU backend and match ONNX Runtime's outputs stored by
 * tests/tools/gen_onnx_models.py; signatures; clear errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "rt_model.h"
#include "onnx.pb-c.h"
#include "rt_onnx.h"
#include "util_onnx.h"

/* A fresh temporary export dir (BASE/1 is what import-onnx usually gets). */
static char *temp_export_dir(void) {
    const char *tmp = getenv("TMPDIR");
    char tmpl[1024];
    snprintf(tmpl, sizeof tmpl, "%s/check_onnx_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    char *out = malloc(strlen(tmpl) + 3);
    sprintf(out, "%s/1", tmpl);
    return out;
}

static const Tensorflow__SignatureDef *serving_sig(const Tensorflow__SavedModel *sm) {
    ck_assert_uint_eq(sm->n_meta_graphs, 1);
    const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[0];
    ck_assert_uint_eq(mg->meta_info_def->n_tags, 1);
    ck_assert_str_eq(mg->meta_info_def->tags[0], "serve");
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, "serving_default") == 0)
            return mg->signature_def[i]->value;
    ck_abort_msg("no serving_default signature");
    return NULL;
}

static void check_info(const Tensorflow__TensorInfo *ti, int rank, const int64_t *dims) {
    ck_assert_ptr_nonnull(ti);
    ck_assert_int_eq(ti->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_ptr_nonnull(ti->tensor_shape);
    ck_assert_int_eq((int)ti->tensor_shape->n_dim, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_int_eq(ti->tensor_shape->dim[i]->size, dims[i]);
}

/* Imports tests/data/onnx/<name>.onnx, runs it on the stored input and
 * compares every output with the stored ONNX Runtime output. */
static void run_model(const char *name, const char *input, const char *const *outputs, int nout,
                      int threads, int nchw) {
    rt_onnx_opts opts = {.tf_nchw = nchw};
    char file[256];
    snprintf(file, sizeof file, "%s.onnx", name);
    char *dir = temp_export_dir();
    ms_status st = rt_onnx_import(tox_path(file), dir, &opts);
    ck_assert_msg(st == MS_OK, "import %s: %s", name, ms_errmsg());

    kn_backend *be = kn_cpu_backend_new(threads);
    const char *tags[] = {"serve"};
    rt_model *m = NULL;
    st = rt_model_load(dir, tags, 1, be, &m);
    ck_assert_msg(st == MS_OK, "load %s: %s", name, ms_errmsg());
    const Tensorflow__SignatureDef *sd = tox_sig(rt_model_meta_graph(m), "serving_default");
    ck_assert_ptr_nonnull(sd);

    rt_tensor *x = NULL;
    snprintf(file, sizeof file, "%s.in.%s.npy", name, input);
    ck_assert_msg(tox_npy_read(tox_path(file), &x) == MS_OK, "%s", ms_errmsg());
    const Tensorflow__TensorInfo *ti = tox_sig_input(sd, input);
    ck_assert_ptr_nonnull(ti);
    rt_feed feed = {.name = ti->name, .tensor = x};
    const char *fetches[8];
    for (int i = 0; i < nout; i++) {
        const Tensorflow__TensorInfo *oi = tox_sig_output(sd, outputs[i]);
        ck_assert_msg(oi != NULL, "%s: no output %s", name, outputs[i]);
        fetches[i] = oi->name;
    }
    rt_tensor *outs[8] = {0};
    st = rt_model_run(m, &feed, 1, fetches, nout, NULL, 0, NULL, outs);
    ck_assert_msg(st == MS_OK, "run %s: %s", name, ms_errmsg());
    for (int i = 0; i < nout; i++) {
        rt_tensor *want = NULL;
        snprintf(file, sizeof file, "%s.out.%s.npy", name, outputs[i]);
        ck_assert_msg(tox_npy_read(tox_path(file), &want) == MS_OK, "%s", ms_errmsg());
        double d = tox_max_abs_diff(outs[i], want);
        char a[64], b[64];
        ck_assert_msg(d >= 0.0 && d <= 1e-4, "%s%s output %s: max abs diff %g (shape %s vs ORT %s)",
                      name, nchw ? " (NCHW graph)" : "", outputs[i], d,
                      rt_shape_str(&outs[i]->shape, a, sizeof a),
                      rt_shape_str(&want->shape, b, sizeof b));
        rt_tensor_unref(want);
        rt_tensor_unref(outs[i]);
    }
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    free(dir);
}

/* ---- numerics against ONNX Runtime ---- */

START_TEST(test_resnet_matches_ort) {
    const char *outs[] = {"probs"};
    run_model("resnet", "image", outs, 1, 1, 0);
}
END_TEST

START_TEST(test_unet_matches_ort) {
    const char *outs[] = {"mask", "foreground"};
    run_model("unet", "image", outs, 2, 1, 0);
}
END_TEST

START_TEST(test_mobile_matches_ort) {
    const char *outs[] = {"scores"};
    run_model("mobile", "image", outs, 1, 1, 0);
}
END_TEST

START_TEST(test_misc_ops_match_ort) {
    const char *outs[] = {"out"};
    run_model("misc", "image", outs, 1, 1, 0);
}
END_TEST

START_TEST(test_opset9_upsample_matches_ort) {
    const char *outs[] = {"y"};
    run_model("upsample9", "image", outs, 1, 1, 0);
}
END_TEST

/* The 3-D U-Net (rank-5 Conv, ConvTranspose, MaxPool, AveragePool, Resize,
 * InstanceNormalization, Concat, Add) at 1 and 2 threads; also with the
 * NCHW option, which leaves 3-D ops channels-last. */
START_TEST(test_unet3d_matches_ort) {
    const char *outs[] = {"logits"};
    run_model("unet3d", "volume", outs, 1, 1, 0);
    run_model("unet3d", "volume", outs, 1, 2, 0);
    run_model("unet3d", "volume", outs, 1, 1, 1);
}
END_TEST

START_TEST(test_two_threads_match_ort) {
    const char *outs[] = {"mask", "foreground"};
    run_model("unet", "image", outs, 2, 2, 0);
}
END_TEST

/* The same models converted with NCHW kept inside the TF graph. */
START_TEST(test_nchw_graphs_match_ort) {
    const char *r[] = {"probs"}, *u[] = {"mask", "foreground"}, *o[] = {"scores"}, *m[] = {"out"},
               *y[] = {"y"};
    run_model("resnet", "image", r, 1, 1, 1);
    run_model("unet", "image", u, 2, 1, 1);
    run_model("mobile", "image", o, 1, 1, 1);
    run_model("misc", "image", m, 1, 1, 1);
    run_model("upsample9", "image", y, 1, 1, 1);
}
END_TEST

/* --dicom_input: a synthetic CT file through DcmDecodeHU + DcmWindow gives
 * what pydicom preprocessing (modality LUT, window 40/400 to [0, 1]) fed to
 * ONNX Runtime gives. */
static void run_dicom(int nchw) {
    rt_onnx_opts o = {
        .dicom_input = "image", .window_center = 40, .window_width = 400, .tf_nchw = nchw};
    char *dir = temp_export_dir();
    ms_status st = rt_onnx_import(tox_path("dicom_seg.onnx"), dir, &o);
    ck_assert_msg(st == MS_OK, "import: %s", ms_errmsg());
    kn_backend *be = kn_cpu_backend_new(1);
    const char *tags[] = {"serve"};
    rt_model *m = NULL;
    st = rt_model_load(dir, tags, 1, be, &m);
    ck_assert_msg(st == MS_OK, "load: %s", ms_errmsg());
    const Tensorflow__SignatureDef *sd = tox_sig(rt_model_meta_graph(m), "serving_default");
    const Tensorflow__TensorInfo *ti = tox_sig_input(sd, "image");
    ck_assert_ptr_nonnull(ti);
    ck_assert_int_eq(ti->dtype, TENSORFLOW__DATA_TYPE__DT_STRING);
    ck_assert_int_eq((int)ti->tensor_shape->n_dim, 1);
    ck_assert_int_eq(ti->tensor_shape->dim[0]->size, -1);

    FILE *f = fopen(tox_path("ct64.dcm"), "rb");
    ck_assert_ptr_nonnull(f);
    static uint8_t bytes[1 << 16];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    ck_assert(n > 0 && n < sizeof bytes);
    rt_str s = {.data = bytes, .len = n};
    rt_shape one = {.rank = 1, .dim = {1}};
    rt_tensor *x = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&one, &s, &x), MS_OK);
    rt_feed feed = {.name = ti->name, .tensor = x};
    const char *fetch = tox_sig_output(sd, "seg")->name;
    rt_tensor *out = NULL, *want = NULL;
    st = rt_model_run(m, &feed, 1, &fetch, 1, NULL, 0, NULL, &out);
    ck_assert_msg(st == MS_OK, "run: %s", ms_errmsg());
    ck_assert_int_eq(tox_npy_read(tox_path("dicom_seg.out.seg.npy"), &want), MS_OK);
    double d = tox_max_abs_diff(out, want);
    ck_assert_msg(d >= 0.0 && d <= 1e-4, "DICOM in%s: max abs diff %g vs pydicom + ORT",
                  nchw ? " (NCHW graph)" : "", d);
    rt_tensor_unref(want);
    rt_tensor_unref(out);
    rt_tensor_unref(x);
    rt_model_unref(m);
    kn_backend_free(be);
    free(dir);
}

START_TEST(test_dicom_input_matches_pydicom_ort) {
    run_dicom(0);
    run_dicom(1);
}
END_TEST

START_TEST(test_dicom_input_bad_name_or_size) {
    rt_onnx_opts o = {.dicom_input = "nope", .window_center = 40, .window_width = 400};
    uint8_t *pb = NULL;
    size_t n = 0;
    ck_assert_int_eq(rt_onnx_convert(tox_path("dicom_seg.onnx"), &o, &pb, &n), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "nope"));
    o.dicom_input = "image";
    o.size_h = 32;
    o.size_w = 32; /* the model wants 64x64 */
    ck_assert_int_eq(rt_onnx_convert(tox_path("dicom_seg.onnx"), &o, &pb, &n), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--size"));
}
END_TEST

/* ---- signatures ---- */

START_TEST(test_signature_keeps_names_and_dynamic_batch) {
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(tox_path("unet.onnx"), NULL, &pb, &n);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, pb);
    ck_assert_ptr_nonnull(sm);
    const Tensorflow__SignatureDef *sd = serving_sig(sm);
    ck_assert_str_eq(sd->method_name, "tensorflow/serving/predict");
    ck_assert_uint_eq(sd->n_inputs, 1);
    ck_assert_uint_eq(sd->n_outputs, 2);
    check_info(tox_sig_input(sd, "image"), 4, (const int64_t[]){-1, 1, 32, 32});
    check_info(tox_sig_output(sd, "mask"), 4, (const int64_t[]){-1, 2, 32, 32});
    check_info(tox_sig_output(sd, "foreground"), 4, (const int64_t[]){-1, 1, 32, 32});
    ck_assert_str_eq(tox_sig_input(sd, "image")->name, "image:0");
    ck_assert_str_eq(tox_sig_output(sd, "mask")->name, "mask:0");
    tensorflow__saved_model__free_unpacked(sm, NULL);
    free(pb);
}
END_TEST

static int count_op(const Tensorflow__GraphDef *g, const char *op) {
    int c = 0;
    for (size_t i = 0; i < g->n_node; i++)
        c += strcmp(g->node[i]->op, op) == 0;
    return c;
}

static const Tensorflow__AttrValue *node_attr(const Tensorflow__NodeDef *nd, const char *key) {
    for (size_t i = 0; i < nd->n_attr; i++)
        if (strcmp(nd->attr[i]->key, key) == 0) return nd->attr[i]->value;
    return NULL;
}

/* The ResNet model (tests/tools/gen_onnx_models.py; counted with the onnx
 * package): 6 Conv, each with a bias or a BatchNormalization, 3 of them
 * followed by their Relu, 2 more Relus after the residual Adds; the 7x7/2 stem
 * has pads 3 on a 32x32 input (TF's SAME would be 2/3) and conv_28 (3x3/2)
 * pads 1 on 8x8 (SAME: 0/1), so both need EXPLICIT padding. */
static void check_resnet_fused(int nchw) {
    rt_onnx_opts o = {.tf_nchw = nchw};
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(tox_path("resnet.onnx"), &o, &pb, &n);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, n, pb);
    ck_assert_ptr_nonnull(sm);
    const Tensorflow__GraphDef *g = sm->meta_graphs[0]->graph_def;
    ck_assert_int_eq(count_op(g, "_FusedConv2D"), 6);
    ck_assert_int_eq(count_op(g, "Conv2D"), 0);
    ck_assert_int_eq(count_op(g, "BiasAdd"), 0);
    ck_assert_int_eq(count_op(g, "Pad"), 0);
    ck_assert_int_eq(count_op(g, "Relu"), 2);
    ck_assert_int_eq(count_op(g, "_FusedMatMul"), 1);
    ck_assert_int_eq(count_op(g, "MatMul"), 0);
    int relu = 0, expl = 0, stem = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Tensorflow__NodeDef *nd = g->node[i];
        if (strcmp(nd->op, "_FusedConv2D") != 0) continue;
        ck_assert_uint_eq(nd->n_input, 3);
        ck_assert_int_eq(node_attr(nd, "num_args")->i, 1);
        const Tensorflow__AttrValue__ListValue *fo = node_attr(nd, "fused_ops")->list;
        ck_assert_uint_ge(fo->n_s, 1);
        ck_assert_int_eq(memcmp(fo->s[0].data, "BiasAdd", 7), 0);
        if (fo->n_s == 2 && fo->s[1].len == 4 && memcmp(fo->s[1].data, "Relu", 4) == 0) relu++;
        const Tensorflow__AttrValue *pad = node_attr(nd, "padding");
        if (pad->s.len == 8 && memcmp(pad->s.data, "EXPLICIT", 8) == 0) {
            expl++;
            const Tensorflow__AttrValue__ListValue *ep = node_attr(nd, "explicit_paddings")->list;
            ck_assert_uint_eq(ep->n_i, 8);
            int64_t want[8] = {0, 0, 3, 3, 3, 3, 0, 0};
            if (nchw) memcpy(want, (int64_t[]){0, 0, 0, 0, 3, 3, 3, 3}, sizeof(want));
            stem += memcmp(ep->i, want, sizeof(want)) == 0;
        }
    }
    ck_assert_int_eq(relu, 3);
    ck_assert_int_eq(expl, 2);
    ck_assert_int_eq(stem, 1);
    tensorflow__saved_model__free_unpacked(sm, NULL);
    free(pb);
}

START_TEST(test_resnet_graph_is_fused) {
    check_resnet_fused(0);
    check_resnet_fused(1);
}
END_TEST

START_TEST(test_import_writes_savedmodel_dir) {
    char *dir = temp_export_dir();
    ck_assert_int_eq(rt_onnx_import(tox_path("mobile.onnx"), dir, NULL), MS_OK);
    Tensorflow__SavedModel *sm = NULL;
    ck_assert_int_eq(rt_savedmodel_read(dir, &sm), MS_OK);
    const Tensorflow__SignatureDef *sd = serving_sig(sm);
    check_info(tox_sig_input(sd, "image"), 4, (const int64_t[]){-1, 3, 24, 24});
    check_info(tox_sig_output(sd, "scores"), 2, (const int64_t[]){-1, 3});
    tensorflow__saved_model__free_unpacked(sm, NULL);
    char path[1100];
    snprintf(path, sizeof path, "%s/variables", dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    free(dir);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_unsupported_op_names_op_and_node) {
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(tox_path("unsupported.onnx"), NULL, &pb, &n);
    ck_assert_int_eq(st, MS_ENOTSUP);
    ck_assert_ptr_null(pb);
    ck_assert_msg(strstr(ms_errmsg(), "TfIdfVectorizer") && strstr(ms_errmsg(), "my_tfidf"),
                  "message: %s", ms_errmsg());
}
END_TEST

START_TEST(test_missing_file) {
    uint8_t *pb = NULL;
    size_t n = 0;
    ck_assert_int_eq(rt_onnx_convert(tox_path("no_such_model.onnx"), NULL, &pb, &n), MS_ENOTFOUND);
}
END_TEST

START_TEST(test_not_onnx) {
    uint8_t *pb = NULL;
    size_t n = 0;
    /* A .npy file is not a protobuf ModelProto. */
    ms_status st = rt_onnx_convert(tox_path("resnet.in.image.npy"), NULL, &pb, &n);
    ck_assert_int_eq(st, MS_EINVAL);
}
END_TEST

/* A graph without nodes (found by fuzz_onnx: the node list was copied from a
 * NULL array) is refused with a message, not run into undefined behaviour. */
/* g as a model of IR 8, opset 13, packed; malloc'ed, the caller frees. */
static uint8_t *pack_model(Onnx__GraphProto *g, size_t *len) {
    Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    ops.has_version = 1;
    ops.version = 13;
    Onnx__OperatorSetIdProto *opsp[1] = {&ops};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.graph = g;
    m.n_opset_import = 1;
    m.opset_import = opsp;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

/* Converts the graph g (its initializers set by the caller) made of node nd
 * with graph input x and output y, with the model's folder dir. */
static ms_status convert_node_graph(Onnx__GraphProto *g, Onnx__NodeProto *nd,
                                    Onnx__ValueInfoProto *x, Onnx__ValueInfoProto *y,
                                    const char *dir) {
    Onnx__NodeProto *nodes[1] = {nd};
    Onnx__ValueInfoProto *ins[1] = {x}, *outs[1] = {y};
    g->n_node = 1;
    g->node = nodes;
    g->n_input = 1;
    g->input = ins;
    g->n_output = 1;
    g->output = outs;
    size_t len = 0, n = 0;
    uint8_t *buf = pack_model(g, &len), *pb = NULL;
    ms_status st = rt_onnx_convert_mem(buf, len, dir, g->name, NULL, &pb, &n);
    free(buf);
    free(pb);
    return st;
}

START_TEST(test_graph_without_nodes) {
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1; /* FLOAT */
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT;
    x.name = "x";
    x.type = &ty;
    y.name = "y";
    y.type = &ty;
    Onnx__ValueInfoProto *ins[1] = {&x}, *outs[1] = {&y};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "empty";
    g.n_input = 1;
    g.input = ins;
    g.n_output = 1;
    g.output = outs;
    size_t len = 0;
    uint8_t *buf = pack_model(&g, &len);
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert_mem(buf, len, NULL, "empty", NULL, &pb, &n);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_msg(strstr(ms_errmsg(), "y") != NULL, "message should name the output: %s",
                  ms_errmsg());
    free(buf);
}
END_TEST

/* Converts the one-node graph x (ONNX element type in_type) -> op (node
 * "n1", optional int attribute) -> y; returns the status (message in
 * ms_errmsg). */
static ms_status convert_one_node(int32_t in_type, const char *op, const char *attr,
                                  int64_t attr_v) {
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = in_type;
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT;
    Onnx__TypeProto yty = ONNX__TYPE_PROTO__INIT; /* y: no type, the converter's */
    x.name = "x";
    x.type = &ty;
    y.name = "y";
    y.type = &yty;
    yty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    Onnx__TypeProto__Tensor ytt = ONNX__TYPE_PROTO__TENSOR__INIT;
    yty.tensor_type = &ytt;
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT;
    a.name = (char *)attr;
    a.has_type = 1;
    a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a.has_i = 1;
    a.i = attr_v;
    Onnx__AttributeProto *as[1] = {&a};
    char *nin[1] = {"x"}, *nout[1] = {"y"};
    Onnx__NodeProto nd = ONNX__NODE_PROTO__INIT;
    nd.name = "n1";
    nd.op_type = (char *)op;
    nd.n_input = 1;
    nd.input = nin;
    nd.n_output = 1;
    nd.output = nout;
    nd.n_attribute = attr ? 1 : 0;
    nd.attribute = attr ? as : NULL;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "one";
    return convert_node_graph(&g, &nd, &x, &y, NULL);
}

/* Element types: every integer and floating type passes a Cast; float16 /
 * bfloat16 pass float-only ops (run in float); a type this build cannot
 * hold, a cast to one, and an op not written for a type are refused naming
 * the input or node, the op and the type. */
START_TEST(test_dtypes_accepted_and_refused) {
    /* uint16 -> float16, double -> bfloat16 (16), float16 -> uint64 (13) */
    ck_assert_int_eq(convert_one_node(4, "Cast", "to", 10), MS_OK);
    ck_assert_int_eq(convert_one_node(11, "Cast", "to", 16), MS_OK);
    ck_assert_int_eq(convert_one_node(10, "Cast", "to", 13), MS_OK);
    ck_assert_int_eq(convert_one_node(3, "Identity", NULL, 0), MS_OK); /* int8 */
    /* a FLOAT8E4M3FN (17) graph input passes Identity and Cast (to INT4, 22)
     * but not an op without float8 support */
    ck_assert_msg(convert_one_node(17, "Identity", NULL, 0) == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(convert_one_node(17, "Cast", "to", 22) == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(convert_one_node(17, "Sigmoid", NULL, 0), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "n1") && strstr(ms_errmsg(), "Sigmoid") &&
                      strstr(ms_errmsg(), "\"x\"") && strstr(ms_errmsg(), "DT_FLOAT8_E4M3FN"),
                  "message: %s", ms_errmsg());
    /* a COMPLEX64 (14) graph input; a cast to COMPLEX64 */
    ck_assert_int_eq(convert_one_node(14, "Identity", NULL, 0), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "\"x\"") && strstr(ms_errmsg(), "COMPLEX64"),
                  "message: %s", ms_errmsg());
    ck_assert_int_eq(convert_one_node(1, "Cast", "to", 14), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "n1") && strstr(ms_errmsg(), "Cast") &&
                      strstr(ms_errmsg(), "COMPLEX64"),
                  "message: %s", ms_errmsg());
    /* float16 and bfloat16 inputs of a float-only op run it in float between Casts */
    ck_assert_msg(convert_one_node(10, "Sigmoid", NULL, 0) == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(convert_one_node(16, "Relu", NULL, 0) == MS_OK, "%s", ms_errmsg());
    /* Softmax of a double input: its handler takes float only */
    ck_assert_int_eq(convert_one_node(11, "Softmax", NULL, 0), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "n1") && strstr(ms_errmsg(), "Softmax") &&
                      strstr(ms_errmsg(), "DT_DOUBLE"),
                  "message: %s", ms_errmsg());
}
END_TEST

START_TEST(test_missing_external_data) {
    /* mobile.onnx keeps its weights in mobile.weights beside it; a copy of
     * the model alone must fail naming the missing file. */
    char *dir = temp_export_dir();
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    char dst[1200];
    snprintf(dst, sizeof dst, "%s/mobile.onnx", dir);
    FILE *in = fopen(tox_path("mobile.onnx"), "rb"), *out = fopen(dst, "wb");
    ck_assert(in && out);
    char buf[4096];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, r, out), r);
    fclose(in);
    fclose(out);
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(dst, NULL, &pb, &n);
    ck_assert_int_eq(st, MS_ENOTFOUND);
    ck_assert_msg(strstr(ms_errmsg(), "mobile.weights") != NULL, "message: %s", ms_errmsg());
    remove(dst);
    free(dir);
}
END_TEST

/* A one-node model y = x + w whose initializer w (float[2]) lives in
 * external data at `loc`; converted with the model's folder `dir`. */
static ms_status convert_external(const char *dir, const char *loc) {
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1; /* FLOAT */
    Onnx__TensorShapeProto__Dimension d2 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    d2.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d2.dim_value = 2;
    Onnx__TensorShapeProto__Dimension *dims[1] = {&d2};
    Onnx__TensorShapeProto shp = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shp.n_dim = 1;
    shp.dim = dims;
    tt.shape = &shp;
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT;
    x.name = "x";
    x.type = &ty;
    y.name = "y";
    y.type = &ty;
    Onnx__StringStringEntryProto el = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    el.key = "location";
    el.value = (char *)loc;
    Onnx__StringStringEntryProto *ext[1] = {&el};
    Onnx__TensorProto w = ONNX__TENSOR_PROTO__INIT;
    int64_t wd[1] = {2};
    w.name = "w";
    w.has_data_type = 1;
    w.data_type = 1;
    w.n_dims = 1;
    w.dims = wd;
    w.has_data_location = 1;
    w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    w.n_external_data = 1;
    w.external_data = ext;
    Onnx__TensorProto *inits[1] = {&w};
    Onnx__NodeProto add = ONNX__NODE_PROTO__INIT;
    char *ain[2] = {"x", "w"}, *aout[1] = {"y"};
    add.op_type = "Add";
    add.name = "add";
    add.n_input = 2;
    add.input = ain;
    add.n_output = 1;
    add.output = aout;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "ext";
    g.n_initializer = 1;
    g.initializer = inits;
    return convert_node_graph(&g, &add, &x, &y, dir);
}

static void put_bytes(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* External data is read only from a regular file inside the model's folder:
 * a link to a file outside, a folder link, an absolute name, "..", a FIFO (no
 * hang) and a device are refused naming the location, never quoting bytes.
 * A hard link is read (docs/security.md). */
START_TEST(test_external_data_outside) {
    char *dir = temp_export_dir();
    char *slash = strrchr(dir, '/');
    *slash = '\0'; /* <tmp>: holds secret.bin and odir/ */
    char m[1100], p[1200], q[1200];
    snprintf(m, sizeof m, "%s/m", dir);
    ck_assert_int_eq(mkdir(m, 0755), 0);
    snprintf(q, sizeof q, "%s/secret.bin", dir);
    put_bytes(q, "SECRETSECRET");
    snprintf(p, sizeof p, "%s/w.bin", m);
    put_bytes(p, "12345678");
    snprintf(p, sizeof p, "%s/lnk", m);
    ck_assert_int_eq(symlink(q, p), 0);
    snprintf(p, sizeof p, "%s/hard", m);
    ck_assert_int_eq(link(q, p), 0);
    snprintf(p, sizeof p, "%s/odir", dir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(q, sizeof q, "%s/odir/w.bin", dir);
    put_bytes(q, "SECRETSECRET");
    snprintf(q, sizeof q, "%s/d", m);
    ck_assert_int_eq(symlink(p, q), 0);
    snprintf(p, sizeof p, "%s/fifo", m);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/zero", m);
    ck_assert_int_eq(symlink("/dev/zero", p), 0);
    ck_assert_msg(convert_external(m, "w.bin") == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(convert_external(m, "hard") == MS_OK, "%s", ms_errmsg());
    snprintf(q, sizeof q, "%s/secret.bin", dir);
    const struct {
        const char *loc;
        ms_status st;
    } bad[] = {{"lnk", MS_EPERM},   {"d/w.bin", MS_EPERM}, {q, MS_EINVAL},
               {"../secret.bin", MS_EINVAL}, {"fifo", MS_EINVAL}, {"zero", MS_EPERM}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms_status st = convert_external(m, bad[i].loc);
        ck_assert_msg(st == bad[i].st, "%s: %s (%s)", bad[i].loc, ms_status_name(st), ms_errmsg());
        ck_assert_msg(strstr(ms_errmsg(), bad[i].loc) != NULL, "%s", ms_errmsg());
        ck_assert_msg(strstr(ms_errmsg(), "SECRET") == NULL, "%s", ms_errmsg());
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(dir);
}
END_TEST

static Suite *onnx_suite(void) {
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("numerics");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_resnet_matches_ort);
    tcase_add_test(tc, test_unet_matches_ort);
    tcase_add_test(tc, test_mobile_matches_ort);
    tcase_add_test(tc, test_misc_ops_match_ort);
    tcase_add_test(tc, test_opset9_upsample_matches_ort);
    tcase_add_test(tc, test_two_threads_match_ort);
    tcase_add_test(tc, test_unet3d_matches_ort);
    tcase_add_test(tc, test_nchw_graphs_match_ort);
    tcase_add_test(tc, test_dicom_input_matches_pydicom_ort);
    suite_add_tcase(s, tc);
    tc = tcase_create("signature");
    tcase_add_test(tc, test_signature_keeps_names_and_dynamic_batch);
    tcase_add_test(tc, test_import_writes_savedmodel_dir);
    suite_add_tcase(s, tc);
    tc = tcase_create("fusion");
    tcase_add_test(tc, test_resnet_graph_is_fused);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_unsupported_op_names_op_and_node);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_not_onnx);
    tcase_add_test(tc, test_graph_without_nodes);
    tcase_add_test(tc, test_dtypes_accepted_and_refused);
    tcase_add_test(tc, test_missing_external_data);
    tcase_add_test(tc, test_external_data_outside);
    tcase_add_test(tc, test_dicom_input_bad_name_or_size);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(onnx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
