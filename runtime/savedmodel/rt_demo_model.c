/* rt_demo_model.c - builds the DICOM demo SavedModel (see rt_demo_model.h)
 * with the graph builder. Nodes carry exactly the attrs TensorFlow's op
 * registry defines for them, so TensorFlow can import the graph once
 * DcmDecodeHU is registered. */
#include "rt_demo_model.h"

#include <string.h>

#include "rt_graphbuild.h"

typedef Tensorflow__NodeDef node;

/* ---- node helpers (NULL in, NULL out: the builder's errors are sticky) ---- */

static node *const_f32(rt_gb *g, const char *name, float v) {
    rt_shape s = rt_shape_make(0, NULL);
    rt_tensor *t = NULL;
    if (rt_tensor_new(RT_DT_FLOAT, &s, &t) != MS_OK) {
        rt_gb_fail(g, MS_ENOMEM, "demo model: out of memory");
        return NULL;
    }
    rt_tensor_f32(t)[0] = v;
    node *n = rt_gb_const(g, name, t);
    rt_tensor_unref(t);
    return n;
}

static node *const_i32(rt_gb *g, const char *name, const int32_t *v, int64_t count) {
    rt_shape s = rt_shape_make(1, (int64_t[]){count});
    rt_tensor *t = NULL;
    if (rt_tensor_new(RT_DT_INT32, &s, &t) != MS_OK) {
        rt_gb_fail(g, MS_ENOMEM, "demo model: out of memory");
        return NULL;
    }
    memcpy(t->data, v, (size_t)count * sizeof(*v));
    node *n = rt_gb_const(g, name, t);
    rt_tensor_unref(t);
    return n;
}

/* Less / GreaterEqual of float x against a float node: DT_BOOL. */
static node *compare(rt_gb *g, const char *op, const char *name, const node *x, const node *c) {
    if (x == NULL || c == NULL) return NULL;
    return rt_gb_binary(g, op, name, x->name, c->name, RT_DT_FLOAT);
}

/* LogicalAnd has no T attr (TensorFlow rejects unknown attrs). */
static node *logical_and(rt_gb *g, const char *name, const node *a, const node *b) {
    if (a == NULL || b == NULL) return NULL;
    node *n = rt_gb_node(g, "LogicalAnd", name);
    rt_gb_input(g, n, a->name);
    rt_gb_input(g, n, b->name);
    return n;
}

static node *cast_bool_f32(rt_gb *g, const char *name, const node *x) {
    if (x == NULL) return NULL;
    node *n = rt_gb_node(g, "Cast", name);
    rt_gb_input(g, n, x->name);
    rt_gb_attr_type(g, n, "SrcT", RT_DT_BOOL);
    rt_gb_attr_type(g, n, "DstT", RT_DT_FLOAT);
    rt_gb_attr_b(g, n, "Truncate", 0);
    return n;
}

/* Sum(x, axes) over float x with int32 axes. x is a tensor name ("n:1"). */
static node *sum(rt_gb *g, const char *name, const char *x, const node *axes, int keep_dims) {
    if (x == NULL || axes == NULL) return NULL;
    node *n = rt_gb_node(g, "Sum", name);
    rt_gb_input(g, n, x);
    rt_gb_input(g, n, axes->name);
    rt_gb_attr_type(g, n, "T", RT_DT_FLOAT);
    rt_gb_attr_type(g, n, "Tidx", RT_DT_INT32);
    rt_gb_attr_b(g, n, "keep_dims", keep_dims);
    return n;
}

/* ---- the OpDef of DcmDecodeHU for stripped_op_list ---- */

static Tensorflow__OpDef__ArgDef *argdef(rt_gb *g, const char *name, rt_dtype t) {
    Tensorflow__OpDef__ArgDef *a = rt_gb_alloc(g, sizeof(*a));
    if (a == NULL) return NULL;
    tensorflow__op_def__arg_def__init(a);
    a->name = rt_gb_strdup(g, name);
    a->type = (Tensorflow__DataType)t;
    return a;
}

/* An AttrDef of `type` ("int", "float", "list(int)"); the default value is
 * returned through *dflt for the caller to fill. */
static Tensorflow__OpDef__AttrDef *attrdef(rt_gb *g, const char *name, const char *type,
                                           Tensorflow__AttrValue **dflt) {
    Tensorflow__OpDef__AttrDef *a = rt_gb_alloc(g, sizeof(*a));
    Tensorflow__AttrValue *v = rt_gb_alloc(g, sizeof(*v));
    if (a == NULL || v == NULL) return NULL;
    tensorflow__op_def__attr_def__init(a);
    tensorflow__attr_value__init(v);
    a->name = rt_gb_strdup(g, name);
    a->type = rt_gb_strdup(g, type);
    a->default_value = v;
    *dflt = v;
    return a;
}

/* OpList { DcmDecodeHU } as documented in runtime/dicom/dcm_ops.c. */
static Tensorflow__OpList *decode_hu_oplist(rt_gb *g) {
    Tensorflow__OpList *l = rt_gb_alloc(g, sizeof(*l));
    Tensorflow__OpDef *od = rt_gb_alloc(g, sizeof(*od));
    Tensorflow__OpDef **ops = rt_gb_alloc(g, sizeof(*ops));
    Tensorflow__OpDef__ArgDef **in = rt_gb_alloc(g, sizeof(*in));
    Tensorflow__OpDef__ArgDef **out = rt_gb_alloc(g, 2 * sizeof(*out));
    Tensorflow__OpDef__AttrDef **attrs = rt_gb_alloc(g, 3 * sizeof(*attrs));
    Tensorflow__AttrValue *frame = NULL, *size = NULL, *pad = NULL;
    if (l == NULL || od == NULL || ops == NULL || in == NULL || out == NULL || attrs == NULL)
        return NULL;
    tensorflow__op_list__init(l);
    tensorflow__op_def__init(od);
    od->name = "DcmDecodeHU";
    od->summary = "Decodes a batch of DICOM files to Hounsfield units.";
    od->description = "hu: (N, H, W, C) float32 padded to the largest file (or resized to "
                      "`size`); mask: (N, H, W, 1), 1 where the file has a pixel.";
    in[0] = argdef(g, "contents", RT_DT_STRING);
    out[0] = argdef(g, "hu", RT_DT_FLOAT);
    out[1] = argdef(g, "mask", RT_DT_FLOAT);
    attrs[0] = attrdef(g, "frame", "int", &frame);
    attrs[1] = attrdef(g, "size", "list(int)", &size);
    attrs[2] = attrdef(g, "pad_value", "float", &pad);
    Tensorflow__AttrValue__ListValue *empty = rt_gb_alloc(g, sizeof(*empty));
    if (in[0] == NULL || out[0] == NULL || out[1] == NULL || attrs[0] == NULL || attrs[1] == NULL ||
        attrs[2] == NULL || empty == NULL)
        return NULL;
    frame->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    frame->i = 0;
    tensorflow__attr_value__list_value__init(empty);
    size->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    size->list = empty;
    pad->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    pad->f = 0.f;
    od->n_input_arg = 1;
    od->input_arg = in;
    od->n_output_arg = 2;
    od->output_arg = out;
    od->n_attr = 3;
    od->attr = attrs;
    ops[0] = od;
    l->n_op = 1;
    l->op = ops;
    return l;
}

/* ---- the graph ---- */

static void build(rt_gb *g) {
    rt_shape in_shape = rt_shape_make(1, (int64_t[]){-1});
    rt_shape mean_shape = rt_shape_make(1, (int64_t[]){-1});
    rt_shape frac_shape = rt_shape_make(2, (int64_t[]){-1, 4});

    node *dicom = rt_gb_placeholder(g, "dicom", RT_DT_STRING, &in_shape);
    node *dec = rt_gb_node(g, "DcmDecodeHU", "DcmDecodeHU");
    if (dicom == NULL || dec == NULL) return;
    rt_gb_input(g, dec, dicom->name);
    rt_gb_attr_i(g, dec, "frame", 0);
    rt_gb_attr_ilist(g, dec, "size", NULL, 0);
    rt_gb_attr_f(g, dec, "pad_value", 0.f);
    /* Named nodes for the two outputs keep the rest of the graph readable. */
    node *hu = rt_gb_unary(g, "Identity", "hu", "DcmDecodeHU:0", RT_DT_FLOAT);
    node *mask = rt_gb_unary(g, "Identity", "mask", "DcmDecodeHU:1", RT_DT_FLOAT);

    node *hwc = const_i32(g, "hwc_axes", (const int32_t[]){1, 2, 3}, 3);
    node *bins_axis = const_i32(g, "bins_axis", (const int32_t[]){1}, 1);
    node *t_air = const_f32(g, "hu_air", RT_DEMO_HU_AIR);
    node *t_water = const_f32(g, "hu_water", RT_DEMO_HU_WATER);
    node *t_bone = const_f32(g, "hu_bone", RT_DEMO_HU_BONE);

    node *lt_air = compare(g, "Less", "lt_air", hu, t_air);
    node *ge_air = compare(g, "GreaterEqual", "ge_air", hu, t_air);
    node *lt_water = compare(g, "Less", "lt_water", hu, t_water);
    node *ge_water = compare(g, "GreaterEqual", "ge_water", hu, t_water);
    node *lt_bone = compare(g, "Less", "lt_bone", hu, t_bone);
    node *ge_bone = compare(g, "GreaterEqual", "ge_bone", hu, t_bone);
    const node *bins[4] = {
        lt_air,
        logical_and(g, "in_fat_water", ge_air, lt_water),
        logical_and(g, "in_soft_tissue", ge_water, lt_bone),
        ge_bone,
    };
    static const char *const bin_names[4] = {"air", "fat_water", "soft_tissue", "bone"};
    const char *counts_in[4] = {NULL};
    for (int k = 0; k < 4; k++) {
        node *f = cast_bool_f32(g, rt_gb_strf(g, "%s/float", bin_names[k]), bins[k]);
        node *m = f && mask ? rt_gb_binary(g, "Mul", rt_gb_strf(g, "%s/masked", bin_names[k]),
                                           f->name, mask->name, RT_DT_FLOAT)
                            : NULL;
        node *c = m ? sum(g, rt_gb_strf(g, "%s/count", bin_names[k]), m->name, hwc, 0) : NULL;
        counts_in[k] = c ? c->name : NULL;
    }
    node *counts = rt_gb_node(g, "Pack", "counts");
    for (int k = 0; k < 4; k++)
        if (counts_in[k]) rt_gb_input(g, counts, counts_in[k]);
    rt_gb_attr_i(g, counts, "N", 4);
    rt_gb_attr_type(g, counts, "T", RT_DT_FLOAT);
    rt_gb_attr_i(g, counts, "axis", 1);

    node *total = counts ? sum(g, "total", counts->name, bins_axis, 0) : NULL;
    node *total_k = counts ? sum(g, "total_keep", counts->name, bins_axis, 1) : NULL;
    node *masked =
        hu && mask ? rt_gb_binary(g, "Mul", "hu_masked", hu->name, mask->name, RT_DT_FLOAT) : NULL;
    node *hu_sum = masked ? sum(g, "hu_sum", masked->name, hwc, 0) : NULL;
    if (hu_sum && total)
        rt_gb_binary(g, "RealDiv", "mean_hu", hu_sum->name, total->name, RT_DT_FLOAT);
    if (counts && total_k)
        rt_gb_binary(g, "RealDiv", "tissue_fraction", counts->name, total_k->name, RT_DT_FLOAT);

    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "dicom", "dicom:0", RT_DT_STRING, &in_shape);
    rt_gb_sig_output(g, sig, "mean_hu", "mean_hu:0", RT_DT_FLOAT, &mean_shape);
    rt_gb_sig_output(g, sig, "tissue_fraction", "tissue_fraction:0", RT_DT_FLOAT, &frac_shape);
}

ms_status rt_demo_model_write(const char *version_dir) {
    rt_gb *g = NULL;
    Tensorflow__MetaGraphDef *mg = NULL;
    ms_status st = rt_gb_new(&g);
    if (st != MS_OK) return st;
    build(g);
    Tensorflow__OpList *ops = decode_hu_oplist(g);
    /* The MetaGraphDef is the builder's (borrowed); completing it here lets
     * us add the op list that rt_savedmodel_write then serializes. */
    if ((st = rt_gb_meta_graph(g, &mg)) == MS_OK) {
        mg->meta_info_def->stripped_op_list = ops;
        st = rt_savedmodel_write(version_dir, g);
    }
    if (st != MS_OK) st = ms_errwrap(st, "writing the demo model to %s", version_dir);
    rt_gb_free(g);
    return st;
}
