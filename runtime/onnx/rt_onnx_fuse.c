/* rt_onnx_fuse.c - peephole pass over the TF graph the ONNX converter made:
 * Conv2D / DepthwiseConv2dNative / MatMul followed by BiasAdd (or, for
 * MatMul, AddV2 of a 1-D constant) and optionally Relu, Relu6 or LeakyRelu
 * become one TensorFlow fused node (_FusedConv2D,
 * _FusedDepthwiseConv2dNative, _FusedMatMul) with inputs (x, filter, bias),
 * num_args = 1 and fused_ops = ["BiasAdd"(, act)], as TensorFlow's grappler
 * remapper writes them. A convolution without bias followed by an activation
 * gets a zero bias. An intermediate tensor is only folded away when the next
 * node is its only consumer (graph outputs are Identity consumers, so they
 * are never fused away). The last node of a chain keeps its name, so its
 * consumers need no rewriting.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_onnx_int.h"

typedef struct fz {
    rt__ox_conv *cv;
    size_t n;
    char *dead;
    int *uses;       /* uses[i]: input references to node i from live nodes */
    rt__ox_map index; /* node name -> its index + 1 */
} fz;

/* Node name of tensor reference s ("node", "node:1", "^node"); the port in *port. */
static size_t ref_name(const char *s, int *port) {
    size_t len = strlen(s);
    const char *c = strrchr(s, ':');
    *port = 0;
    if (c != NULL) {
        *port = atoi(c + 1);
        len = (size_t)(c - s);
    }
    return len;
}

/* Index of the node that tensor reference ref names (any port, control
 * inputs too), or f->n. */
static size_t ref_index(fz *f, const char *ref) {
    int port;
    if (ref[0] == '^') ref++;
    size_t len = ref_name(ref, &port);
    intptr_t i = (intptr_t)rt__ox_map_get(&f->index, ref, len);
    return i > 0 ? (size_t)(i - 1) : f->n;
}

static Tensorflow__NodeDef *find_node(fz *f, const char *ref) {
    int port;
    if (ref[0] == '^') return NULL;
    ref_name(ref, &port);
    size_t i = ref_index(f, ref);
    return port == 0 && i < f->n && !f->dead[i] ? f->cv->nodes[i] : NULL;
}

static size_t index_of(fz *f, const Tensorflow__NodeDef *nd) {
    return ref_index(f, nd->name);
}

/* Number of input references to node `name` in live nodes. The counts are
 * kept right through the rewrites: a fused node takes over its source's
 * inputs, so only the new zero bias adds a reference. */
static int consumers(fz *f, const char *name) {
    size_t i = ref_index(f, name);
    return i < f->n ? f->uses[i] : 0;
}

/* Node i (appended to cv->nodes) joins the tables with `uses` consumers;
 * the tables have room (rt__ox_fuse). */
static void add_node(fz *f, size_t i, int uses) {
    rt__ox_conv *cv = f->cv;
    f->dead[i] = 0;
    f->uses[i] = uses;
    f->n = i + 1;
    rt__ox_map_put(cv, &f->index, cv->nodes[i]->name, (void *)(intptr_t)(i + 1));
}

static Tensorflow__AttrValue *get_attr(const Tensorflow__NodeDef *nd, const char *key) {
    for (size_t i = 0; i < nd->n_attr; i++)
        if (strcmp(nd->attr[i]->key, key) == 0) return nd->attr[i]->value;
    return NULL;
}

static int attr_str_is(const Tensorflow__NodeDef *nd, const char *key, const char *s,
                       const char *dflt) {
    const Tensorflow__AttrValue *v = get_attr(nd, key);
    if (v == NULL || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S) return strcmp(s, dflt) == 0;
    return v->s.len == strlen(s) && memcmp(v->s.data, s, v->s.len) == 0;
}

static int attr_is_float(const Tensorflow__NodeDef *nd) {
    const Tensorflow__AttrValue *v = get_attr(nd, "T");
    return v && v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_TYPE &&
           v->type == (Tensorflow__DataType)RT_DT_FLOAT;
}

/* Dims of a float Const node's value; returns the rank or -1. */
static int const_dims(const Tensorflow__NodeDef *nd, int64_t *dims) {
    if (nd == NULL || strcmp(nd->op, "Const") != 0) return -1;
    const Tensorflow__AttrValue *v = get_attr(nd, "value");
    if (v == NULL || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR || v->tensor == NULL ||
        v->tensor->dtype != (Tensorflow__DataType)RT_DT_FLOAT || v->tensor->tensor_shape == NULL)
        return -1;
    const Tensorflow__TensorShapeProto *s = v->tensor->tensor_shape;
    if (s->unknown_rank || s->n_dim > RT_MAX_RANK) return -1;
    for (size_t i = 0; i < s->n_dim; i++)
        dims[i] = s->dim[i]->size;
    return (int)s->n_dim;
}

/* Output channels of a conv / columns of a MatMul whose weights are a Const; -1 unknown. */
static int64_t out_channels(fz *f, const Tensorflow__NodeDef *op) {
    int64_t d[RT_MAX_RANK];
    if (op->n_input < 2) return -1;
    int r = const_dims(find_node(f, op->input[1]), d);
    if (strcmp(op->op, "Conv2D") == 0) return r == 4 ? d[3] : -1;
    if (strcmp(op->op, "Conv3D") == 0) return r == 5 ? d[4] : -1;
    if (strcmp(op->op, "DepthwiseConv2dNative") == 0) return r == 4 ? d[2] * d[3] : -1;
    if (r != 2) return -1;
    const Tensorflow__AttrValue *tb = get_attr(op, "transpose_b");
    return tb && tb->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && tb->b ? d[0] : d[1];
}

static const char *fused_name(const char *op) {
    if (strcmp(op, "Conv2D") == 0) return "_FusedConv2D";
    if (strcmp(op, "DepthwiseConv2dNative") == 0) return "_FusedDepthwiseConv2dNative";
    if (strcmp(op, "MatMul") == 0) return "_FusedMatMul";
    if (strcmp(op, "Conv3D") == 0) return "_FusedConv3D";
    return NULL;
}

static void set_slist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                      const char *const *s, int n) {
    Tensorflow__AttrValue *v = get_attr(nd, key);
    if (v == NULL) {
        rt__tf_attr_i(cv, nd, key, 0);
        v = get_attr(nd, key);
    }
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = rt__ox_alloc(cv, sizeof(*v->list));
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_s = (size_t)n;
    v->list->s = rt__ox_alloc(cv, (size_t)n * sizeof(*v->list->s) + 1);
    for (int i = 0; i < n; i++) {
        v->list->s[i].data = (uint8_t *)rt__ox_strdup(cv, s[i]);
        v->list->s[i].len = strlen(s[i]);
    }
}

/* Turns `dst` (the node that consumed src) into src fused with bias:
 * dst keeps its name, takes src's op, inputs and attributes. */
static void make_fused(fz *f, Tensorflow__NodeDef *dst, Tensorflow__NodeDef *src,
                       const char *bias) {
    rt__ox_conv *cv = f->cv;
    const char *in0 = src->input[0], *in1 = src->input[1];
    dst->op = rt__ox_strdup(cv, fused_name(src->op));
    dst->n_input = 0;
    dst->input = NULL;
    rt__tf_input(cv, dst, in0);
    rt__tf_input(cv, dst, in1);
    rt__tf_input(cv, dst, bias);
    dst->attr = src->attr;
    dst->n_attr = src->n_attr;
    rt__tf_attr_i(cv, dst, "num_args", 1);
    static const char *const ba[] = {"BiasAdd"};
    set_slist(cv, dst, "fused_ops", ba, 1);
    f->dead[index_of(f, src)] = 1;
}

static int fusable_src(fz *f, const Tensorflow__NodeDef *src, const char *name) {
    return src && fused_name(src->op) && src->n_input == 2 && attr_is_float(src) &&
           consumers(f, name) == 1;
}

/* BiasAdd(op, Const) and AddV2(MatMul, Const [N]) -> fused op + ["BiasAdd"]. */
static void fuse_bias(fz *f, size_t i) {
    Tensorflow__NodeDef *nd = f->cv->nodes[i];
    int bias_add = strcmp(nd->op, "BiasAdd") == 0;
    if ((!bias_add && strcmp(nd->op, "AddV2") != 0) || nd->n_input != 2 || !attr_is_float(nd))
        return;
    for (int side = 0; side < (bias_add ? 1 : 2); side++) {
        Tensorflow__NodeDef *src = find_node(f, nd->input[side]);
        Tensorflow__NodeDef *b = find_node(f, nd->input[1 - side]);
        if (!fusable_src(f, src, src ? src->name : "")) continue;
        if (!bias_add && strcmp(src->op, "MatMul") != 0) continue;
        int64_t d[RT_MAX_RANK], nch = out_channels(f, src);
        if (nch < 0 || const_dims(b, d) != 1 || d[0] != nch) continue;
        const char *fmt = get_attr(src, "data_format") ? "NHWC" : NULL;
        if (bias_add && fmt) {
            /* BiasAdd's data_format must match the convolution's. */
            int src_nchw = attr_str_is(src, "data_format", "NCHW", "NHWC");
            int ba_nchw = attr_str_is(nd, "data_format", "NCHW", "NHWC");
            if (src_nchw != ba_nchw) continue;
        }
        make_fused(f, nd, src, nd->input[1 - side]);
        return;
    }
}

/* Relu / Relu6 / LeakyRelu after a fused op with ["BiasAdd"] or after a bare
 * conv / MatMul (zero bias added). */
static void fuse_act(fz *f, size_t i) {
    rt__ox_conv *cv = f->cv;
    Tensorflow__NodeDef *nd = cv->nodes[i];
    const char *act = nd->op;
    if ((strcmp(act, "Relu") != 0 && strcmp(act, "Relu6") != 0 && strcmp(act, "LeakyRelu") != 0) ||
        nd->n_input != 1 || !attr_is_float(nd))
        return;
    Tensorflow__NodeDef *src = find_node(f, nd->input[0]);
    if (src == NULL || !attr_is_float(src) || consumers(f, src->name) != 1) return;
    float alpha = 0.2f;
    const Tensorflow__AttrValue *al = get_attr(nd, "alpha");
    if (al && al->value_case == TENSORFLOW__ATTR_VALUE__VALUE_F) alpha = al->f;
    if (fused_name(src->op) != NULL) {
        if (src->n_input != 2) return;
        int64_t nch = out_channels(f, src);
        if (nch < 0 || nch > OX_DIM_MAX) return;
        float *z = rt__ox_alloc(cv, (size_t)nch * sizeof(float) + 1);
        const char *bias =
            rt__tf_const_f32(cv, rt__ox_printf(cv, "%s/zero_bias", src->name), 1, &nch, z);
        /* rt__tf_const_f32 appended one node (and may have moved the table). */
        add_node(f, cv->nnodes - 1, 1);
        nd = cv->nodes[i];
        make_fused(f, nd, src, bias);
        src = nd;
    } else if (strncmp(src->op, "_Fused", 6) == 0) {
        const Tensorflow__AttrValue *fo = get_attr(src, "fused_ops");
        if (fo == NULL || fo->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST ||
            fo->list->n_s != 1 || fo->list->s[0].len != 7 ||
            memcmp(fo->list->s[0].data, "BiasAdd", 7) != 0)
            return;
        /* nd takes over src. */
        nd->op = src->op;
        nd->input = src->input;
        nd->n_input = src->n_input;
        nd->attr = src->attr;
        nd->n_attr = src->n_attr;
        f->dead[index_of(f, src)] = 1;
        src = nd;
    } else {
        return;
    }
    const char *ops[2] = {"BiasAdd", act};
    set_slist(cv, src, "fused_ops", ops, 2);
    if (strcmp(act, "LeakyRelu") == 0) rt__tf_attr_f(cv, src, "leakyrelu_alpha", alpha);
}

void rt__ox_fuse(rt__ox_conv *cv) {
    fz f = {.cv = cv, .n = cv->nnodes};
    /* Room for one zero bias per node besides the nodes themselves. */
    f.dead = rt__ox_alloc(cv, 2 * f.n + 1);
    f.uses = rt__ox_alloc(cv, (2 * f.n + 1) * sizeof(*f.uses));
    for (size_t i = 0; i < f.n; i++)
        rt__ox_map_put(cv, &f.index, cv->nodes[i]->name, (void *)(intptr_t)(i + 1));
    for (size_t i = 0; i < f.n; i++)
        for (size_t k = 0; k < cv->nodes[i]->n_input; k++) {
            size_t j = ref_index(&f, cv->nodes[i]->input[k]);
            if (j < f.n) f.uses[j]++;
        }
    /* Nodes are in topological order, so a producer is seen before its consumer. */
    for (size_t i = 0; i < f.n; i++)
        if (!f.dead[i]) fuse_bias(&f, i);
    for (size_t i = 0; i < f.n; i++)
        if (!f.dead[i]) fuse_act(&f, i);
    size_t j = 0;
    for (size_t i = 0; i < f.n; i++)
        if (!f.dead[i]) cv->nodes[j++] = cv->nodes[i];
    cv->nnodes = j;
}
