/* dcm_demo_model.c - builds the DICOM demo SavedModel (see dcm_demo_model.h)
 * with the graph builder (rt_graphbuild.h). */
#include "dcm_demo_model.h"

#include <stdio.h>
#include <string.h>

#include "rt_graphbuild.h"

static Tensorflow__NodeDef *const_f32(rt_gb *g, const char *name, float v) {
    rt_tensor *t = NULL;
    if (rt_tensor_scalar_f32(v, &t) != MS_OK) {
        rt_gb_fail(g, MS_ENOMEM, "out of memory");
        return NULL;
    }
    Tensorflow__NodeDef *n = rt_gb_const(g, name, t);
    rt_tensor_unref(t);
    return n;
}

static Tensorflow__NodeDef *const_axes(rt_gb *g, const char *name) {
    rt_shape s = rt_shape_make(1, (int64_t[]){3});
    rt_tensor *t = NULL;
    if (rt_tensor_new(RT_DT_INT32, &s, &t) != MS_OK) {
        rt_gb_fail(g, MS_ENOMEM, "out of memory");
        return NULL;
    }
    int32_t *v = t->data;
    v[0] = 1;
    v[1] = 2;
    v[2] = 3;
    Tensorflow__NodeDef *n = rt_gb_const(g, name, t);
    rt_tensor_unref(t);
    return n;
}

/* Sum(x, axes) over H, W, C. */
static void sum_hwc(rt_gb *g, const char *name, const char *x) {
    Tensorflow__NodeDef *n = rt_gb_node(g, "Sum", name);
    rt_gb_input(g, n, x);
    rt_gb_input(g, n, "axes");
    rt_gb_attr_type(g, n, "T", RT_DT_FLOAT);
    rt_gb_attr_type(g, n, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(g, n, "keep_dims", 0);
}

/* frac_<k> = Sum(Cast(band) * mask) / n. */
static void fraction(rt_gb *g, int k, const char *band) {
    char cast[32], masked[32], sum[32], frac[32];
    snprintf(cast, sizeof(cast), "band%d/cast", k);
    snprintf(masked, sizeof(masked), "band%d/masked", k);
    snprintf(sum, sizeof(sum), "band%d/sum", k);
    snprintf(frac, sizeof(frac), "frac%d", k);
    Tensorflow__NodeDef *c = rt_gb_node(g, "Cast", cast);
    rt_gb_input(g, c, band);
    rt_gb_attr_type(g, c, "SrcT", RT_DT_BOOL);
    rt_gb_attr_type(g, c, "DstT", RT_DT_FLOAT);
    rt_gb_attr_b(g, c, "Truncate", 0);
    rt_gb_binary(g, "Mul", masked, cast, "decode:1", RT_DT_FLOAT);
    sum_hwc(g, sum, masked);
    rt_gb_binary(g, "RealDiv", frac, sum, "count", RT_DT_FLOAT);
}

/* OpDef of DcmDecodeHU for the meta graph's stripped_op_list, so that loaders
 * (ours, and TensorFlow's tooling) know it has two outputs. */
typedef struct opdef_store {
    Tensorflow__OpList list;
    Tensorflow__OpDef def, *defs[1];
    Tensorflow__OpDef__ArgDef in, out_hu, out_mask, *ins[1], *outs[2];
    Tensorflow__OpDef__AttrDef a_frame, a_size, a_pad, *attrs[3];
} opdef_store;

static void opdef_init(opdef_store *s) {
    tensorflow__op_list__init(&s->list);
    tensorflow__op_def__init(&s->def);
    tensorflow__op_def__arg_def__init(&s->in);
    tensorflow__op_def__arg_def__init(&s->out_hu);
    tensorflow__op_def__arg_def__init(&s->out_mask);
    tensorflow__op_def__attr_def__init(&s->a_frame);
    tensorflow__op_def__attr_def__init(&s->a_size);
    tensorflow__op_def__attr_def__init(&s->a_pad);
    s->in.name = (char *)"contents";
    s->in.type = TENSORFLOW__DATA_TYPE__DT_STRING;
    s->out_hu.name = (char *)"hu";
    s->out_hu.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    s->out_mask.name = (char *)"mask";
    s->out_mask.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    s->a_frame.name = (char *)"frame";
    s->a_frame.type = (char *)"int";
    s->a_size.name = (char *)"size";
    s->a_size.type = (char *)"list(int)";
    s->a_pad.name = (char *)"pad_value";
    s->a_pad.type = (char *)"float";
    s->ins[0] = &s->in;
    s->outs[0] = &s->out_hu;
    s->outs[1] = &s->out_mask;
    s->attrs[0] = &s->a_frame;
    s->attrs[1] = &s->a_size;
    s->attrs[2] = &s->a_pad;
    s->def.name = (char *)"DcmDecodeHU";
    s->def.n_input_arg = 1;
    s->def.input_arg = s->ins;
    s->def.n_output_arg = 2;
    s->def.output_arg = s->outs;
    s->def.n_attr = 3;
    s->def.attr = s->attrs;
    s->defs[0] = &s->def;
    s->list.n_op = 1;
    s->list.op = s->defs;
}

ms_status dcm_demo_model_write(const char *version_dir) {
    rt_gb *g = NULL;
    ms_status st = rt_gb_new(&g);
    if (st != MS_OK) return st;
    rt_shape in_shape = rt_shape_make(1, (int64_t[]){-1});
    rt_shape frac_shape = rt_shape_make(2, (int64_t[]){-1, 4});

    rt_gb_placeholder(g, "dicom", RT_DT_STRING, &in_shape);
    Tensorflow__NodeDef *dec = rt_gb_node(g, "DcmDecodeHU", "decode");
    rt_gb_input(g, dec, "dicom");
    rt_gb_attr_i(g, dec, "frame", 0);
    rt_gb_attr_f(g, dec, "pad_value", 0.f);
    const_axes(g, "axes");

    sum_hwc(g, "count", "decode:1");
    rt_gb_binary(g, "Mul", "hu_masked", "decode:0", "decode:1", RT_DT_FLOAT);
    sum_hwc(g, "hu_sum", "hu_masked");
    rt_gb_binary(g, "RealDiv", "mean_hu", "hu_sum", "count", RT_DT_FLOAT);

    const_f32(g, "t_m400", -400.f);
    const_f32(g, "t_0", 0.f);
    const_f32(g, "t_300", 300.f);
    rt_gb_binary(g, "Less", "lt_m400", "decode:0", "t_m400", RT_DT_FLOAT);
    rt_gb_binary(g, "GreaterEqual", "ge_m400", "decode:0", "t_m400", RT_DT_FLOAT);
    rt_gb_binary(g, "Less", "lt_0", "decode:0", "t_0", RT_DT_FLOAT);
    rt_gb_binary(g, "GreaterEqual", "ge_0", "decode:0", "t_0", RT_DT_FLOAT);
    rt_gb_binary(g, "Less", "lt_300", "decode:0", "t_300", RT_DT_FLOAT);
    rt_gb_binary(g, "GreaterEqual", "ge_300", "decode:0", "t_300", RT_DT_FLOAT);
    Tensorflow__NodeDef *a1 = rt_gb_node(g, "LogicalAnd", "band1/in");
    rt_gb_input(g, a1, "ge_m400");
    rt_gb_input(g, a1, "lt_0");
    Tensorflow__NodeDef *a2 = rt_gb_node(g, "LogicalAnd", "band2/in");
    rt_gb_input(g, a2, "ge_0");
    rt_gb_input(g, a2, "lt_300");
    fraction(g, 0, "lt_m400");
    fraction(g, 1, "band1/in");
    fraction(g, 2, "band2/in");
    fraction(g, 3, "ge_300");
    Tensorflow__NodeDef *pack = rt_gb_node(g, "Pack", "tissue_fraction");
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof(name), "frac%d", k);
        rt_gb_input(g, pack, name);
    }
    rt_gb_attr_i(g, pack, "N", 4);
    rt_gb_attr_type(g, pack, "T", RT_DT_FLOAT);
    rt_gb_attr_i(g, pack, "axis", 1);

    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "dicom", "dicom:0", RT_DT_STRING, &in_shape);
    rt_gb_sig_output(g, sig, "mean_hu", "mean_hu:0", RT_DT_FLOAT, &in_shape);
    rt_gb_sig_output(g, sig, "tissue_fraction", "tissue_fraction:0", RT_DT_FLOAT, &frac_shape);

    opdef_store ops;
    opdef_init(&ops);
    Tensorflow__MetaGraphDef *mg = NULL;
    st = rt_gb_meta_graph(g, &mg);
    if (st == MS_OK && mg->meta_info_def) mg->meta_info_def->stripped_op_list = &ops.list;
    if (st == MS_OK) st = rt_savedmodel_write(version_dir, g);
    if (st == MS_OK && mg->meta_info_def) mg->meta_info_def->stripped_op_list = NULL;
    if (st != MS_OK) st = ms_errwrap(st, "writing the DICOM demo model to %s", version_dir);
    rt_gb_free(g);
    return st;
}
