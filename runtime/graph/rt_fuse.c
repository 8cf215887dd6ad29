/* rt_fuse.c - load-time fusion of conv/matmul chains into TensorFlow's fused
 * ops (see rt_fuse.h for the patterns and the contract).
 *
 * The pass works on the resolved rt_graph (indices, not names): it counts
 * every node's consumers once, orders the nodes topologically, propagates
 * static shapes (with symbols for unknown sizes, so that a dynamic batch
 * dimension still compares equal to itself), then walks from every conv /
 * matmul forward along sole consumers. Decisions are taken on the graph as it
 * was before the pass, so one fusion cannot change what another sees. The
 * DICOM rule pairs DcmWindow with its DcmDecodeHU; the map-reduce rule walks
 * back from every float Sum / Mean through elementwise ops used only inside
 * its expression (all reductions are matched before any is rewritten).
 */
#include "rt_fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_dicom_xform.h"
#include "ms_log.h"
#include "rt_tensor.h"

/* ================= memory the pass owns ================= */


static char *gstrdup(rt_graph *g, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = rt_graph_alloc(g, n);
    if (d) memcpy(d, s, n);
    return d;
}

int rt_fuse_enabled(void) {
    const char *v = getenv("DCMSERVE_GRAPH_FUSION");
    if (v == NULL) return 1;
    return !(strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0);
}

/* ================= pass state ================= */

/* A static shape: rank -1 = unknown; d[i] >= 0 a known size, d[i] < 0 a
 * symbol: an unknown size equal to every other dim with the same symbol. */
typedef struct fz_shape {
    int rank;
    int64_t d[RT_MAX_RANK];
} fz_shape;

typedef struct fz_use {
    int node; /* the consumer */
    int ctl;  /* 1: a control edge, 0: a data edge */
} fz_use;

typedef struct fz {
    rt_graph *g;
    int n0;      /* nodes before the pass; decisions look only at these */
    int *ustart; /* per node: its consumers are use[ustart[v] .. ustart[v+1]) */
    fz_use *use;
    int *topo;     /* per node: 1 when topologically ordered, 0 in or behind a cycle */
    int *order;    /* the topological order */
    fz_shape *shp; /* per node: static shape of output 0 */
    int64_t next_sym;
} fz;

static kn_node kn_of(const rt_gnode *n) {
    return n->kn;
}

static int op_is(const rt_gnode *n, const char *op) {
    return strcmp(n->kn.op, op) == 0;
}

static int is_float(const rt_gnode *n) {
    kn_node k = kn_of(n);
    return kn_attr_type(&k, "T", RT_DT_INVALID) == RT_DT_FLOAT;
}

/* ---- consumers and order ---- */

static ms_status count_uses(fz *f) {
    rt_graph *g = f->g;
    int n = f->n0;
    f->ustart = calloc((size_t)n + 2, sizeof(int));
    f->topo = calloc((size_t)n + 1, sizeof(int));
    f->order = calloc((size_t)n + 1, sizeof(int));
    int *indeg = calloc((size_t)n + 1, sizeof(int));
    int *fill = calloc((size_t)n + 1, sizeof(int));
    if (!f->ustart || !f->topo || !f->order || !indeg || !fill) goto oom;
    size_t total = 0;
    for (int v = 0; v < n; v++) {
        const rt_gnode *x = &g->nodes[v];
        for (int i = 0; i < x->nin; i++)
            f->ustart[x->in[i].node + 1]++;
        for (int i = 0; i < x->nctl; i++)
            f->ustart[x->ctl[i] + 1]++;
        total += (size_t)x->nin + (size_t)x->nctl;
        indeg[v] = x->nin + x->nctl;
    }
    for (int v = 0; v < n; v++)
        f->ustart[v + 1] += f->ustart[v];
    f->use = calloc(total + 1, sizeof(*f->use));
    if (f->use == NULL) goto oom;
    for (int v = 0; v < n; v++)
        fill[v] = f->ustart[v];
    for (int v = 0; v < n; v++) {
        const rt_gnode *x = &g->nodes[v];
        for (int i = 0; i < x->nin; i++)
            f->use[fill[x->in[i].node]++] = (fz_use){v, 0};
        for (int i = 0; i < x->nctl; i++)
            f->use[fill[x->ctl[i]]++] = (fz_use){v, 1};
    }
    /* Kahn's algorithm; nodes in or behind a cycle stay unordered (topo 0)
     * and are never fused. */
    int head = 0, tail = 0;
    for (int v = 0; v < n; v++)
        if (indeg[v] == 0) f->order[tail++] = v;
    while (head < tail) {
        int v = f->order[head++];
        f->topo[v] = 1;
        for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++)
            if (--indeg[f->use[k].node] == 0) f->order[tail++] = f->use[k].node;
    }
    free(indeg);
    free(fill);
    return MS_OK;
oom:
    free(indeg);
    free(fill);
    return ms_errf(MS_ENOMEM, "out of memory fusing the graph");
}

/* ---- static shapes ---- */

static int64_t fresh(fz *f) {
    return f->next_sym--;
}

static void set_unknown(fz_shape *s) {
    s->rank = -1;
}

/* Shape of input i of node x (only output 0 of a producer is tracked). */
static const fz_shape *in_shape(fz *f, const rt_gnode *x, int i) {
    static const fz_shape unknown = {.rank = -1};
    if (i >= x->nin || x->in[i].out != 0) return &unknown;
    return &f->shp[x->in[i].node];
}

/* The value of a Const producing input i (int32 / int64 only), or NULL. The
 * caller unrefs it. */
static rt_tensor *const_int_input(fz *f, const rt_gnode *x, int i) {
    if (i >= x->nin) return NULL;
    const rt_gnode *c = &f->g->nodes[x->in[i].node];
    if (!op_is(c, "Const") || x->in[i].out != 0) return NULL;
    kn_node k = kn_of(c);
    rt_tensor *t = NULL;
    if (kn_attr_tensor(&k, "value", &t) != MS_OK) {
        ms_err_clear();
        return NULL;
    }
    if (t->dtype != RT_DT_INT32 && t->dtype != RT_DT_INT64) {
        rt_tensor_unref(t);
        return NULL;
    }
    return t;
}

static int64_t int_at(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* One broadcast dimension of a and b. A symbol against a known size s can
 * only be 1 or s in a valid graph, so the result is s. */
static int64_t bcast_dim(fz *f, int64_t a, int64_t b) {
    if (a == b || b == 1) return a;
    if (a == 1) return b;
    if (a >= 0 && b < 0) return a;
    if (a < 0 && b >= 0) return b;
    if (a >= 0 && b >= 0) return fresh(f); /* an invalid graph; fails at run time */
    return fresh(f);
}

/* Output size of a window along one axis; k, stride, dil >= 1. */
static int64_t window_dim(fz *f, int64_t in, int64_t k, int64_t stride, int64_t dil, int same,
                          int64_t pads) {
    int64_t eff = (k - 1) * dil + 1;
    if (in >= 0) {
        if (same) return (in + stride - 1) / stride;
        int64_t span = in + pads - eff;
        return span < 0 ? fresh(f) : span / stride + 1;
    }
    if (stride == 1 && (same || pads == eff - 1)) return in; /* same symbol */
    return fresh(f);
}

/* Conv2D / DepthwiseConv2dNative (+ fused) and MaxPool / AvgPool. */
static void infer_window(fz *f, const rt_gnode *x, int pool, int depthwise, fz_shape *out) {
    const fz_shape *xs = in_shape(f, x, 0);
    kn_node k = kn_of(x);
    if (xs->rank != 4) return set_unknown(out);
    int nchw = kn_attr_s_eq(&k, "data_format", "NCHW", "NHWC");
    int hc = nchw ? 2 : 1, cc = nchw ? 1 : 3;
    int64_t strides[4] = {1, 1, 1, 1}, dil[4] = {1, 1, 1, 1}, ks[4] = {1, 1, 1, 1}, ep[8] = {0};
    if (kn_attr_ilist(&k, "strides", strides, 4) != 4) return set_unknown(out);
    int nd = kn_attr_ilist(&k, "dilations", dil, 4);
    if (nd != -1 && nd != 4) return set_unknown(out);
    size_t plen = 0;
    const char *pad = kn_attr_s(&k, "padding", &plen);
    if (pad == NULL) return set_unknown(out);
    int same = plen == 4 && memcmp(pad, "SAME", 4) == 0;
    int expl = plen == 8 && memcmp(pad, "EXPLICIT", 8) == 0;
    int valid = plen == 5 && memcmp(pad, "VALID", 5) == 0;
    if (!same && !expl && !valid) return set_unknown(out);
    if (expl && kn_attr_ilist(&k, "explicit_paddings", ep, 8) != 8) return set_unknown(out);
    int64_t oc;
    if (pool) {
        if (kn_attr_ilist(&k, "ksize", ks, 4) != 4) return set_unknown(out);
        oc = xs->d[cc];
    } else {
        const fz_shape *fs = in_shape(f, x, 1);
        if (fs->rank != 4) return set_unknown(out);
        ks[hc] = fs->d[0];
        ks[hc + 1] = fs->d[1];
        if (depthwise)
            oc = fs->d[2] >= 0 && fs->d[3] >= 0 ? fs->d[2] * fs->d[3] : fresh(f);
        else
            oc = fs->d[3];
    }
    out->rank = 4;
    out->d[0] = xs->d[0];
    out->d[cc] = oc;
    for (int a = hc; a < hc + 2; a++) {
        if (ks[a] < 1 || strides[a] < 1 || dil[a] < 1) {
            out->d[a] = fresh(f);
            continue;
        }
        out->d[a] =
            window_dim(f, xs->d[a], ks[a], strides[a], dil[a], same, ep[2 * a] + ep[2 * a + 1]);
    }
}

static void infer_reshape(fz *f, const rt_gnode *x, fz_shape *out) {
    rt_tensor *t = const_int_input(f, x, 1);
    if (t == NULL || t->shape.rank != 1 || t->nelem > RT_MAX_RANK) {
        rt_tensor_unref(t);
        return set_unknown(out);
    }
    out->rank = (int)t->nelem;
    int minus = -1;
    int64_t known = 1;
    for (int i = 0; i < out->rank; i++) {
        out->d[i] = int_at(t, i);
        if (out->d[i] == -1 && minus < 0) {
            minus = i;
        } else if (out->d[i] < 0) {
            rt_tensor_unref(t);
            return set_unknown(out);
        } else {
            known *= out->d[i];
        }
    }
    rt_tensor_unref(t);
    if (minus < 0) return;
    /* -1: the input's element count over the known part; with one symbol in
     * the input and equal known parts, it is that symbol. */
    const fz_shape *xs = in_shape(f, x, 0);
    int64_t in_known = 1, sym = 0;
    int nsym = 0;
    for (int i = 0; xs->rank >= 0 && i < xs->rank; i++) {
        if (xs->d[i] >= 0)
            in_known *= xs->d[i];
        else
            sym = xs->d[i], nsym++;
    }
    if (xs->rank < 0 || nsym > 1 || known == 0)
        out->d[minus] = fresh(f);
    else if (nsym == 0)
        out->d[minus] = in_known % known == 0 ? in_known / known : fresh(f);
    else
        out->d[minus] = in_known == known ? sym : fresh(f);
}

static void infer_pad(fz *f, const rt_gnode *x, fz_shape *out) {
    const fz_shape *xs = in_shape(f, x, 0);
    if (xs->rank < 0) return set_unknown(out);
    *out = *xs;
    rt_tensor *t = const_int_input(f, x, 1);
    int ok = t && t->shape.rank == 2 && t->shape.dim[0] == xs->rank && t->shape.dim[1] == 2;
    for (int i = 0; i < out->rank; i++) {
        int64_t p = ok ? int_at(t, 2 * i) + int_at(t, 2 * i + 1) : -1;
        if (p == 0) continue;
        out->d[i] = p > 0 && xs->d[i] >= 0 ? xs->d[i] + p : fresh(f);
    }
    rt_tensor_unref(t);
}

static void infer_transpose(fz *f, const rt_gnode *x, fz_shape *out) {
    const fz_shape *xs = in_shape(f, x, 0);
    rt_tensor *t = const_int_input(f, x, 1);
    if (xs->rank < 0 || t == NULL || t->nelem != xs->rank) {
        rt_tensor_unref(t);
        return set_unknown(out);
    }
    out->rank = xs->rank;
    for (int i = 0; i < out->rank; i++) {
        int64_t p = int_at(t, i);
        out->d[i] = p >= 0 && p < xs->rank ? xs->d[p] : fresh(f);
    }
    rt_tensor_unref(t);
}

/* From a TensorShapeProto-like rt_shape: -1 dims get fresh symbols. */
static void from_rt_shape(fz *f, const rt_shape *s, fz_shape *out) {
    if (s->rank < 0 || s->rank > RT_MAX_RANK) return set_unknown(out);
    out->rank = s->rank;
    for (int i = 0; i < s->rank; i++)
        out->d[i] = s->dim[i] >= 0 ? s->dim[i] : fresh(f);
}

static int in_list(const char *op, const char *const *list) {
    for (; *list; list++)
        if (strcmp(op, *list) == 0) return 1;
    return 0;
}

static const char *const same_shape_ops[] = {"Identity",
                                             "Snapshot",
                                             "StopGradient",
                                             "Relu",
                                             "Relu6",
                                             "LeakyRelu",
                                             "Elu",
                                             "Selu",
                                             "Sigmoid",
                                             "Tanh",
                                             "Softplus",
                                             "BiasAdd",
                                             "Neg",
                                             "Abs",
                                             "Sqrt",
                                             "Rsqrt",
                                             "Exp",
                                             "Log",
                                             "Square",
                                             "Softmax",
                                             "Cast",
                                             "CheckNumerics",
                                             "FusedBatchNorm",
                                             "FusedBatchNormV2",
                                             "FusedBatchNormV3",
                                             "ClipByValue",
                                             NULL};
static const char *const binary_ops[] = {
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "SquaredDifference",
    NULL};

static void infer(fz *f, int v, fz_shape *out) {
    const rt_gnode *x = &f->g->nodes[v];
    const char *op = x->kn.op;
    kn_node k = kn_of(x);
    set_unknown(out);
    if (strcmp(op, "Placeholder") == 0 || strcmp(op, "PlaceholderWithDefault") == 0) {
        rt_shape s;
        if (kn_attr_shape(&k, "shape", &s) != MS_OK) {
            ms_err_clear();
            return;
        }
        from_rt_shape(f, &s, out);
    } else if (strcmp(op, "Const") == 0) {
        const Tensorflow__NodeDef *d = x->def;
        for (size_t i = 0; i < d->n_attr; i++) {
            const Tensorflow__AttrValue *a = d->attr[i]->value;
            if (strcmp(d->attr[i]->key, "value") != 0 || a == NULL ||
                a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR || a->tensor == NULL)
                continue;
            const Tensorflow__TensorShapeProto *sp = a->tensor->tensor_shape;
            if (sp == NULL) { /* no shape: a scalar */
                out->rank = 0;
            } else if (!sp->unknown_rank && sp->n_dim <= RT_MAX_RANK) {
                out->rank = (int)sp->n_dim;
                for (size_t j = 0; j < sp->n_dim; j++)
                    out->d[j] = sp->dim[j]->size >= 0 ? sp->dim[j]->size : fresh(f);
            }
        }
    } else if (in_list(op, same_shape_ops)) {
        *out = *in_shape(f, x, 0);
    } else if (in_list(op, binary_ops) && x->nin == 2) {
        const fz_shape *a = in_shape(f, x, 0), *b = in_shape(f, x, 1);
        if (a->rank < 0 || b->rank < 0) return;
        out->rank = a->rank > b->rank ? a->rank : b->rank;
        for (int i = 0; i < out->rank; i++) {
            int ia = i - (out->rank - a->rank), ib = i - (out->rank - b->rank);
            int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
            out->d[i] = bcast_dim(f, da, db);
        }
    } else if (strcmp(op, "Conv2D") == 0 || strcmp(op, "_FusedConv2D") == 0) {
        infer_window(f, x, 0, 0, out);
    } else if (strcmp(op, "DepthwiseConv2dNative") == 0 ||
               strcmp(op, "_FusedDepthwiseConv2dNative") == 0) {
        infer_window(f, x, 0, 1, out);
    } else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AvgPool") == 0) {
        infer_window(f, x, 1, 0, out);
    } else if (strcmp(op, "MatMul") == 0 || strcmp(op, "_FusedMatMul") == 0) {
        const fz_shape *a = in_shape(f, x, 0), *b = in_shape(f, x, 1);
        if (a->rank != 2 || b->rank != 2) return;
        out->rank = 2;
        out->d[0] = a->d[kn_attr_b(&k, "transpose_a", 0) ? 1 : 0];
        out->d[1] = b->d[kn_attr_b(&k, "transpose_b", 0) ? 0 : 1];
    } else if (strcmp(op, "Reshape") == 0) {
        infer_reshape(f, x, out);
    } else if (strcmp(op, "Pad") == 0 || strcmp(op, "PadV2") == 0 || strcmp(op, "MirrorPad") == 0) {
        infer_pad(f, x, out);
    } else if (strcmp(op, "Transpose") == 0) {
        infer_transpose(f, x, out);
    }
}

static ms_status infer_shapes(fz *f) {
    f->shp = calloc((size_t)f->n0 + 1, sizeof(*f->shp));
    if (f->shp == NULL) return ms_errf(MS_ENOMEM, "out of memory fusing the graph");
    for (int v = 0; v < f->n0; v++)
        set_unknown(&f->shp[v]);
    for (int i = 0; i < f->n0; i++) {
        int v = f->order[i];
        if (!f->topo[v]) break;
        infer(f, v, &f->shp[v]);
    }
    return MS_OK;
}

/* 1 when a value of shape a provably broadcasts into shape o (so adding it to
 * o leaves o's shape): same rank or lower, every dim 1 or equal to o's. */
static int fits_into(const fz_shape *a, const fz_shape *o) {
    if (a->rank < 0 || o->rank < 0 || a->rank > o->rank) return 0;
    for (int i = 0; i < a->rank; i++) {
        int64_t da = a->d[i], dout = o->d[i + o->rank - a->rank];
        if (da != 1 && da != dout) return 0;
    }
    return 1;
}

/* ================= matching ================= */

enum { ROLE_CONV, ROLE_BIAS, ROLE_ADD, ROLE_ACT };

typedef struct fz_chain {
    int node[4];
    int role[4];
    int nn;
    int bn;          /* the conv's fused_ops is [FusedBatchNorm] */
    rt_edge args[4]; /* bias, or the four batch-norm args */
    int nargs;
    rt_edge addend;
    const char *op; /* the fused op */
} fz_chain;

/* The node's only data consumer (through any output), or -1. Control
 * consumers are checked once the chain is known (ctl_ok). */
static int sole_data_consumer(const fz *f, int v) {
    int who = -1, n = 0;
    for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++)
        if (!f->use[k].ctl) who = f->use[k].node, n++;
    return n == 1 ? who : -1;
}

static int has_ctl_to(const rt_gnode *x, int target) {
    for (int i = 0; i < x->nctl; i++)
        if (x->ctl[i] == target) return 1;
    return 0;
}

static int in_chain(const fz_chain *c, int v) {
    for (int i = 0; i < c->nn; i++)
        if (c->node[i] == v) return 1;
    return 0;
}

/* Every control consumer of an intermediate node must also wait on the
 * chain's last node (as an inlined call's IdentityN waits on every body
 * node): dropping its edge to the intermediate then changes nothing, since
 * the intermediate ops are pure and the fused last node computes them. Any
 * other control consumer keeps the chain from fusing. */
static int ctl_ok(const fz *f, const fz_chain *c) {
    int last = c->node[c->nn - 1];
    for (int i = 0; i < c->nn - 1; i++) {
        int v = c->node[i];
        for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++) {
            if (!f->use[k].ctl) continue;
            int u = f->use[k].node;
            if (in_chain(c, u) || !has_ctl_to(&f->g->nodes[u], last)) return 0;
        }
    }
    return 1;
}

static const char *act_ops[] = {"Relu", "Relu6", "LeakyRelu", "Elu", "Sigmoid", "Tanh", NULL};

/* A fusable unfused node (not a product or part of a fusion, ordered). */
static int usable(const fz *f, int v) {
    const rt_gnode *x = &f->g->nodes[v];
    return v < f->n0 && f->topo[v] && x->fused_into < 0 && x->unfused < 0;
}

static int fused_ops_are(const rt_gnode *x, const char *want) {
    kn_node k = kn_of(x);
    const char *ops[2];
    size_t lens[2];
    int n = kn_attr_slist(&k, "fused_ops", ops, lens, 2);
    return n == 1 && lens[0] == strlen(want) && memcmp(ops[0], want, lens[0]) == 0;
}

/* Finds the longest chain starting at conv node v; 1 when one (of at least
 * two nodes) was found. */
static int match(const fz *f, int v, fz_chain *c) {
    const rt_graph *g = f->g;
    const rt_gnode *x = &g->nodes[v];
    memset(c, 0, sizeof(*c));
    if (!usable(f, v) || !is_float(x)) return 0;
    kn_node kx = kn_of(x);
    int can_add;
    c->node[0] = v;
    c->role[0] = ROLE_CONV;
    c->nn = 1;
    int end = v;
    if (op_is(x, "Conv2D") || op_is(x, "DepthwiseConv2dNative") || op_is(x, "MatMul")) {
        int dw = op_is(x, "DepthwiseConv2dNative"), mm = op_is(x, "MatMul");
        if (x->nin != 2) return 0;
        int b = sole_data_consumer(f, v);
        if (b < 0 || !usable(f, b)) return 0;
        const rt_gnode *bx = &g->nodes[b];
        if (!op_is(bx, "BiasAdd") || !is_float(bx) || bx->nin != 2 || bx->in[0].node != v ||
            bx->in[0].out != 0 || bx->in[1].node == v)
            return 0;
        kn_node kb = kn_of(bx);
        const char *conv_fmt = kn_attr_s_eq(&kx, "data_format", "NCHW", "NHWC") ? "NCHW" : "NHWC";
        if (mm) conv_fmt = "NHWC";
        if (!kn_attr_s_eq(&kb, "data_format", conv_fmt, "NHWC")) return 0;
        c->node[c->nn] = b;
        c->role[c->nn++] = ROLE_BIAS;
        c->args[c->nargs++] = bx->in[1];
        c->op = dw ? "_FusedDepthwiseConv2dNative" : mm ? "_FusedMatMul" : "_FusedConv2D";
        can_add = !dw;
        end = b;
    } else if (op_is(x, "_FusedConv2D") || op_is(x, "_FusedMatMul")) {
        int bn = op_is(x, "_FusedConv2D") && fused_ops_are(x, "FusedBatchNorm");
        if (!bn && !fused_ops_are(x, "BiasAdd")) return 0;
        int nargs = bn ? 4 : 1;
        if (kn_attr_i(&kx, "num_args", nargs) != nargs || x->nin != 2 + nargs) return 0;
        for (int i = 0; i < nargs; i++)
            c->args[c->nargs++] = x->in[2 + i];
        c->bn = bn;
        c->op = x->kn.op;
        can_add = 1;
    } else {
        return 0;
    }

    if (can_add) {
        int a = sole_data_consumer(f, end);
        const rt_gnode *ax = a >= 0 ? &g->nodes[a] : NULL;
        if (ax && usable(f, a) && (op_is(ax, "Add") || op_is(ax, "AddV2")) && is_float(ax) &&
            ax->nin == 2) {
            int side = ax->in[0].node == end ? 0 : 1;
            rt_edge addend = ax->in[1 - side];
            if (ax->in[side].node == end && ax->in[side].out == 0 && !in_chain(c, addend.node) &&
                addend.node != a && f->topo[addend.node] && addend.out == 0 &&
                fits_into(&f->shp[addend.node], &f->shp[end])) {
                c->node[c->nn] = a;
                c->role[c->nn++] = ROLE_ADD;
                c->addend = addend;
                end = a;
            }
        }
    }
    int r = sole_data_consumer(f, end);
    if (r >= 0 && usable(f, r)) {
        const rt_gnode *rx = &g->nodes[r];
        if (in_list(rx->kn.op, act_ops) && is_float(rx) && rx->nin == 1 && rx->in[0].node == end &&
            rx->in[0].out == 0) {
            c->node[c->nn] = r;
            c->role[c->nn++] = ROLE_ACT;
        }
    }
    /* Drop trailing nodes until the control edges allow the chain. */
    while (c->nn >= 2 && !ctl_ok(f, c))
        c->nn--;
    return c->nn >= 2; /* a prefused conv alone is nothing new */
}

/* ================= rewriting ================= */

/* Attr entries of the new NodeDef: the conv's own ones are borrowed. */
static Tensorflow__NodeDef__AttrEntry *new_attr(rt_graph *g, const char *key) {
    Tensorflow__NodeDef__AttrEntry *e = rt_graph_alloc(g, sizeof(*e));
    Tensorflow__AttrValue *v = rt_graph_alloc(g, sizeof(*v));
    if (e == NULL || v == NULL) return NULL;
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = gstrdup(g, key);
    e->value = v;
    return e->key ? e : NULL;
}

static char *edge_str(rt_graph *g, rt_edge e) {
    const char *nm = g->nodes[e.node].name;
    size_t n = strlen(nm) + 16;
    char *s = rt_graph_alloc(g, n);
    if (s) snprintf(s, n, "%s:%d", nm, e.out);
    return s;
}

static int has_role(const fz_chain *c, int role) {
    for (int i = 0; i < c->nn; i++)
        if (c->role[i] == role) return c->node[i];
    return -1;
}

/* Removes target from the control inputs of node u (and of its unfused
 * twin, which holds u's original inputs when u is itself a fused node). */
static void drop_ctl(rt_graph *g, int u, int target) {
    for (int pass = 0; pass < 2 && u >= 0; pass++) {
        rt_gnode *x = &g->nodes[u];
        int k = 0;
        for (int i = 0; i < x->nctl; i++)
            if (x->ctl[i] != target) x->ctl[k++] = x->ctl[i];
        x->nctl = k;
        u = x->unfused;
    }
}

/* Node v's original form moves to a new twin node of the same name (kept
 * for the unfused path, L->unfused); v becomes the fused node `def` with
 * one output, taking ownership of in / ctl. MS_ENOMEM leaves v unchanged. */
static ms_status install_fused(rt_graph *g, int v, Tensorflow__NodeDef *def, rt_edge *in, int nin,
                               int *ctl, int nctl) {
    char *twin_name = strdup(g->nodes[v].name);
    if (twin_name == NULL) return MS_ENOMEM;
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 64;
        rt_gnode *nn = realloc(g->nodes, sizeof(*nn) * (size_t)ncap);
        if (nn == NULL) {
            free(twin_name);
            return MS_ENOMEM;
        }
        g->nodes = nn;
        g->cap = ncap;
    }
    int u = g->n++;
    rt_gnode *L = &g->nodes[v], *U = &g->nodes[u];
    *U = *L;
    U->name = twin_name;
    U->kn.name = twin_name;
    U->fused_into = -1;
    U->unfused = -1;
    L->def = def;
    L->kn.def = def;
    L->kn.op = def->op;
    L->in = in;
    L->nin = nin;
    L->kn.nin = nin;
    L->ctl = ctl;
    L->nctl = nctl;
    L->nout = 1;
    L->kn.nout = 1;
    L->unfused = u;
    return MS_OK;
}

static ms_status rewrite(fz *f, const fz_chain *c) {
    rt_graph *g = f->g;
    const int conv = c->node[0], last = c->node[c->nn - 1];
    const int add = has_role(c, ROLE_ADD), act = has_role(c, ROLE_ACT);
    const rt_gnode *cx = &g->nodes[conv];
    const Tensorflow__NodeDef *cd = cx->def;

    /* Data inputs: x, filter, fused args, addend. */
    int nin = 2 + c->nargs + (add >= 0);
    rt_edge *in = calloc((size_t)nin, sizeof(*in));
    /* Control inputs: the union over the chain, without the chain itself. */
    int maxctl = 0;
    for (int i = 0; i < c->nn; i++)
        maxctl += g->nodes[c->node[i]].nctl;
    int *ctl = calloc((size_t)maxctl + 1, sizeof(int));
    if (in == NULL || ctl == NULL) goto oom;
    in[0] = cx->in[0];
    in[1] = cx->in[1];
    for (int i = 0; i < c->nargs; i++)
        in[2 + i] = c->args[i];
    if (add >= 0) in[nin - 1] = c->addend;
    int nctl = 0;
    for (int i = 0; i < c->nn; i++) {
        const rt_gnode *x = &g->nodes[c->node[i]];
        for (int j = 0; j < x->nctl; j++) {
            int t = x->ctl[j], dup = in_chain(c, t);
            for (int q = 0; q < nctl && !dup; q++)
                dup = ctl[q] == t;
            if (!dup) ctl[nctl++] = t;
        }
    }

    /* The fused NodeDef: the conv's attrs (borrowed) except the ones that
     * describe the fusion, which are new. */
    Tensorflow__NodeDef *d = rt_graph_alloc(g, sizeof(*d));
    if (d == NULL) goto oom;
    tensorflow__node_def__init(d);
    d->name = g->nodes[last].name;
    d->op = gstrdup(g, c->op);
    d->device = cd->device;
    d->input = rt_graph_alloc(g, sizeof(char *) * ((size_t)nin + (size_t)nctl + 1));
    d->attr = rt_graph_alloc(g, sizeof(*d->attr) * (cd->n_attr + 4));
    if (d->op == NULL || d->input == NULL || d->attr == NULL) goto oom;
    for (int i = 0; i < nin; i++)
        if ((d->input[d->n_input++] = edge_str(g, in[i])) == NULL) goto oom;
    for (int i = 0; i < nctl; i++) {
        const char *nm = g->nodes[ctl[i]].name;
        char *s = rt_graph_alloc(g, strlen(nm) + 2);
        if (s == NULL) goto oom;
        s[0] = '^';
        strcpy(s + 1, nm);
        d->input[d->n_input++] = s;
    }
    for (size_t i = 0; i < cd->n_attr; i++) {
        const char *key = cd->attr[i]->key;
        if (strcmp(key, "fused_ops") == 0 || strcmp(key, "num_args") == 0 ||
            strcmp(key, "leakyrelu_alpha") == 0)
            continue;
        d->attr[d->n_attr++] = cd->attr[i];
    }
    const char *ops[3];
    int nops = 0;
    ops[nops++] = c->bn ? "FusedBatchNorm" : "BiasAdd";
    if (add >= 0) ops[nops++] = "Add";
    if (act >= 0) ops[nops++] = g->nodes[act].kn.op;
    Tensorflow__NodeDef__AttrEntry *e = new_attr(g, "fused_ops");
    if (e == NULL) goto oom;
    e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    e->value->list = rt_graph_alloc(g, sizeof(*e->value->list));
    if (e->value->list == NULL) goto oom;
    tensorflow__attr_value__list_value__init(e->value->list);
    e->value->list->s = rt_graph_alloc(g, sizeof(ProtobufCBinaryData) * 3);
    if (e->value->list->s == NULL) goto oom;
    for (int i = 0; i < nops; i++) {
        char *s = gstrdup(g, ops[i]);
        if (s == NULL) goto oom;
        e->value->list->s[i] = (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
    }
    e->value->list->n_s = (size_t)nops;
    d->attr[d->n_attr++] = e;
    if ((e = new_attr(g, "num_args")) == NULL) goto oom;
    e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    e->value->i = c->nargs + (add >= 0);
    d->attr[d->n_attr++] = e;
    if (act >= 0 && op_is(&g->nodes[act], "LeakyRelu")) {
        kn_node ka = kn_of(&g->nodes[act]);
        if ((e = new_attr(g, "leakyrelu_alpha")) == NULL) goto oom;
        e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
        e->value->f = kn_attr_f(&ka, "alpha", 0.2f);
        d->attr[d->n_attr++] = e;
    }

    /* The last node's original form moves to a new, unnamed twin; the last
     * node becomes the fused one. */
    if (install_fused(g, last, d, in, nin, ctl, nctl) != MS_OK) goto oom;
    for (int i = 0; i < c->nn - 1; i++) {
        int v = c->node[i];
        g->nodes[v].fused_into = last;
        for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++)
            if (f->use[k].ctl) drop_ctl(g, f->use[k].node, v);
    }
    return MS_OK;
oom:
    free(in);
    free(ctl);
    return ms_errf(MS_ENOMEM, "out of memory fusing the graph");
}

/* ================= DICOM: DcmDecodeHU -> DcmWindow ================= */

/* DcmWindow v whose x (and mask) are the hu (and mask) outputs of a
 * DcmDecodeHU without `size` that nothing else uses: returns that decode
 * node, else -1. */
static int match_dicom(const fz *f, int v) {
    const rt_gnode *w = &f->g->nodes[v];
    if (!usable(f, v) || !op_is(w, "DcmWindow") || w->nin < 1 || w->nin > 2) return -1;
    const int d = w->in[0].node;
    if (w->in[0].out != 0 || !usable(f, d) || !op_is(&f->g->nodes[d], "DcmDecodeHU")) return -1;
    if (w->nin == 2 && (w->in[1].node != d || w->in[1].out != 1)) return -1;
    const rt_gnode *x = &f->g->nodes[d];
    if (x->nin != 1) return -1;
    kn_node kd = kn_of(x);
    int64_t sz[2];
    if (kn_attr_ilist(&kd, "size", sz, 2) > 0) return -1;
    for (int k = f->ustart[d]; k < f->ustart[d + 1]; k++)
        if (f->use[k].ctl || f->use[k].node != v) return -1;
    return d;
}

static ms_status rewrite_dicom(fz *f, int d, int v) {
    rt_graph *g = f->g;
    const rt_gnode *x = &g->nodes[d], *w = &g->nodes[v];
    const Tensorflow__NodeDef *xd = x->def, *wd = w->def;
    rt_edge *in = calloc(1, sizeof(*in));
    int *ctl = calloc((size_t)x->nctl + (size_t)w->nctl + 1, sizeof(int));
    if (in == NULL || ctl == NULL) goto oom;
    in[0] = x->in[0];
    int nctl = 0;
    for (int pass = 0; pass < 2; pass++) {
        const rt_gnode *y = pass ? w : x;
        for (int j = 0; j < y->nctl; j++) {
            int t = y->ctl[j], dup = t == d;
            for (int q = 0; q < nctl && !dup; q++)
                dup = ctl[q] == t;
            if (!dup) ctl[nctl++] = t;
        }
    }
    Tensorflow__NodeDef *nd = rt_graph_alloc(g, sizeof(*nd));
    if (nd == NULL) goto oom;
    tensorflow__node_def__init(nd);
    nd->name = w->name;
    nd->op = gstrdup(g, "DcmDecodeWindow");
    nd->device = wd->device;
    nd->input = rt_graph_alloc(g, sizeof(char *) * ((size_t)nctl + 2));
    nd->attr = rt_graph_alloc(g, sizeof(*nd->attr) * (xd->n_attr + wd->n_attr + 1));
    if (nd->op == NULL || nd->input == NULL || nd->attr == NULL) goto oom;
    if ((nd->input[nd->n_input++] = edge_str(g, in[0])) == NULL) goto oom;
    for (int i = 0; i < nctl; i++) {
        const char *nm = g->nodes[ctl[i]].name;
        char *str = rt_graph_alloc(g, strlen(nm) + 2);
        if (str == NULL) goto oom;
        str[0] = '^';
        strcpy(str + 1, nm);
        nd->input[nd->n_input++] = str;
    }
    /* The decode's attrs but its (empty) size, then the window's. */
    for (size_t i = 0; i < xd->n_attr; i++)
        if (strcmp(xd->attr[i]->key, "size") != 0) nd->attr[nd->n_attr++] = xd->attr[i];
    for (size_t i = 0; i < wd->n_attr; i++)
        nd->attr[nd->n_attr++] = wd->attr[i];
    Tensorflow__NodeDef__AttrEntry *e = new_attr(g, "masked");
    if (e == NULL) goto oom;
    e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    e->value->b = w->nin == 2;
    nd->attr[nd->n_attr++] = e;

    if (install_fused(g, v, nd, in, 1, ctl, nctl) != MS_OK) goto oom;
    g->nodes[d].fused_into = v;
    return MS_OK;
oom:
    free(in);
    free(ctl);
    return ms_errf(MS_ENOMEM, "out of memory fusing the graph");
}

/* ================= elementwise -> Sum / Mean: _FusedMapReduce ================= */

/* The ops a map-reduce program may hold (float32 values; bool as 0 / 1). */
typedef struct mr_opinfo {
    const char *op;
    int nargs;
    int out_bool, in_bool; /* output / inputs are DT_BOOL */
    int typed;             /* has a T attr that must be DT_FLOAT */
} mr_opinfo;

static const mr_opinfo mr_ops[] = {
    {"Add", 2, 0, 0, 1},          {"AddV2", 2, 0, 0, 1},     {"Sub", 2, 0, 0, 1},
    {"Mul", 2, 0, 0, 1},          {"RealDiv", 2, 0, 0, 1},   {"Maximum", 2, 0, 0, 1},
    {"Minimum", 2, 0, 0, 1},      {"SquaredDifference", 2, 0, 0, 1},
    {"Less", 2, 1, 0, 1},         {"LessEqual", 2, 1, 0, 1}, {"Greater", 2, 1, 0, 1},
    {"GreaterEqual", 2, 1, 0, 1}, {"LogicalAnd", 2, 1, 1, 0}, {"LogicalOr", 2, 1, 1, 0},
    {"LogicalNot", 1, 1, 1, 0},   {"Neg", 1, 0, 0, 1},       {"Abs", 1, 0, 0, 1},
    {"Square", 1, 0, 0, 1},       {"Cast", 1, 0, 1, 0},
};

enum { MR_MAXV = 64, MR_MAXIN = 8, MR_MAXOUT = 16, MR_MAXAX = 8 };

/* Node u as a program op producing a value of kind `want_bool`: its row, or
 * NULL. Pure, unfused, without control inputs, output 0 only. */
static const mr_opinfo *mr_op_of(const fz *f, int u, int want_bool) {
    const rt_gnode *x = &f->g->nodes[u];
    if (!usable(f, u) || x->nctl != 0 || x->nout != 1) return NULL;
    for (size_t i = 0; i < sizeof(mr_ops) / sizeof(mr_ops[0]); i++) {
        const mr_opinfo *o = &mr_ops[i];
        if (!op_is(x, o->op)) continue;
        if (x->nin != o->nargs || o->out_bool != want_bool) return NULL;
        kn_node k = kn_of(x);
        if (o->typed && kn_attr_type(&k, "T", RT_DT_INVALID) != RT_DT_FLOAT) return NULL;
        if (op_is(x, "Cast") && (kn_attr_type(&k, "SrcT", RT_DT_INVALID) != RT_DT_BOOL ||
                                 kn_attr_type(&k, "DstT", RT_DT_INVALID) != RT_DT_FLOAT))
            return NULL;
        return o;
    }
    return NULL;
}

/* A scalar (rank 0) float Const feeding edge e: 1 and its value. */
static int mr_const(const fz *f, rt_edge e, float *v) {
    const rt_gnode *c = &f->g->nodes[e.node];
    if (!op_is(c, "Const") || e.out != 0 || c->nctl != 0) return 0;
    kn_node k = kn_of(c);
    rt_tensor *t = NULL;
    if (kn_attr_tensor(&k, "value", &t) != MS_OK) {
        ms_err_clear();
        return 0;
    }
    int ok = t->dtype == RT_DT_FLOAT && t->shape.rank == 0 && t->nelem == 1;
    if (ok) *v = rt_tensor_f32(t)[0];
    rt_tensor_unref(t);
    return ok;
}

/* One Sum / Mean and the part of the graph it absorbs. */
typedef struct mr_sum {
    int node;
    int nleaf;
    rt_edge leaf[MR_MAXIN];
    int leaf_bool[MR_MAXIN];
    int64_t axes[MR_MAXAX];
    int naxes, keep, mean;
    int group; /* index of its group, -1: none */
} mr_sum;

/* The program being built for one group. */
typedef struct mr_prog {
    int nleaf;
    rt_edge leaf[MR_MAXIN];
    int leaf_bool[MR_MAXIN];
    int nconst;
    float cval[MR_MAXV];
    int nops;
    const char *op[MR_MAXV];
    int64_t args[2 * MR_MAXV];
    int node_of_op[MR_MAXV];
    int nout;
    int64_t out[MR_MAXOUT];
    int sum[MR_MAXOUT];
} mr_prog;

/* Marks in cand[] the nodes reachable from edge e through program ops. */
static void mr_mark(const fz *f, rt_edge e, int want_bool, unsigned char *cand, int depth) {
    const mr_opinfo *o;
    if (depth > MR_MAXV || e.out != 0 || cand[e.node] || !(o = mr_op_of(f, e.node, want_bool)))
        return;
    cand[e.node] = 1;
    const rt_gnode *x = &f->g->nodes[e.node];
    for (int i = 0; i < x->nin; i++)
        mr_mark(f, x->in[i], o->in_bool, cand, depth + 1);
}

/* Drops from cand[] every node with a consumer outside cand[] and sum (or a
 * control consumer), until none is left: what remains is used only inside
 * the expression of sum. */
static void mr_prune(const fz *f, int sum, unsigned char *cand, const int *list, int n) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            int u = list[i];
            if (!cand[u]) continue;
            for (int k = f->ustart[u]; k < f->ustart[u + 1]; k++) {
                const fz_use *w = &f->use[k];
                if (w->ctl || (w->node != sum && !cand[w->node])) {
                    cand[u] = 0;
                    changed = 1;
                    break;
                }
            }
        }
    }
}

/* Value index of edge e in program p (emitting ops for cand nodes, leaves
 * and consts otherwise), or -1 when the program is full. val[] memoises the
 * value of each node's output 0. */
static int mr_emit(const fz *f, mr_prog *p, rt_edge e, int want_bool, const unsigned char *cand,
                   int *val, int base_const, int base_op) {
    if (e.out == 0 && cand[e.node]) {
        if (val[e.node] >= 0) return val[e.node];
        const rt_gnode *x = &f->g->nodes[e.node];
        const mr_opinfo *o = mr_op_of(f, e.node, want_bool);
        int a[2] = {-1, -1};
        for (int i = 0; i < x->nin; i++)
            if ((a[i] = mr_emit(f, p, x->in[i], o->in_bool, cand, val, base_const, base_op)) < 0)
                return -1;
        if (p->nops >= MR_MAXV) return -1;
        int k = p->nops++;
        p->op[k] = o->op;
        p->args[2 * k] = a[0];
        p->args[2 * k + 1] = a[1];
        p->node_of_op[k] = e.node;
        return val[e.node] = base_op + k;
    }
    float c;
    if (!want_bool && mr_const(f, e, &c)) {
        for (int i = 0; i < p->nconst; i++)
            if (memcmp(&p->cval[i], &c, sizeof c) == 0) return base_const + i;
        if (p->nconst >= MR_MAXV) return -1;
        p->cval[p->nconst] = c;
        return base_const + p->nconst++;
    }
    for (int i = 0; i < p->nleaf; i++)
        if (p->leaf[i].node == e.node && p->leaf[i].out == e.out && p->leaf_bool[i] == want_bool)
            return i;
    if (p->nleaf >= MR_MAXIN) return -1;
    p->leaf[p->nleaf] = e;
    p->leaf_bool[p->nleaf] = want_bool;
    return p->nleaf++;
}

/* Sum / Mean node v with an absorbable expression: fills s (leaves in
 * first-use order, axes) and marks the absorbed nodes in cand[]; 0 when v
 * does not qualify (cand[] then left as it was). */
static int mr_match_sum(const fz *f, int v, mr_sum *s, unsigned char *cand, int *list,
                        int *val) {
    const rt_gnode *x = &f->g->nodes[v];
    memset(s, 0, sizeof(*s));
    s->group = -1;
    if (!usable(f, v) || !(op_is(x, "Sum") || op_is(x, "Mean")) || x->nin != 2 || !is_float(x) ||
        x->in[0].out != 0)
        return 0;
    kn_node k = kn_of(x);
    rt_tensor *ax = const_int_input((fz *)f, x, 1);
    if (ax == NULL) return 0;
    int ok = ax->shape.rank <= 1 && ax->nelem <= MR_MAXAX;
    for (int64_t i = 0; ok && i < ax->nelem; i++)
        s->axes[s->naxes++] = int_at(ax, i);
    rt_tensor_unref(ax);
    if (!ok) return 0;
    s->node = v;
    s->keep = kn_attr_b(&k, "keep_dims", 0);
    s->mean = op_is(x, "Mean");
    mr_mark(f, x->in[0], 0, cand, 0);
    int n = 0;
    for (int u = 0; u < f->n0; u++)
        if (cand[u]) list[n++] = u;
    mr_prune(f, v, cand, list, n);
    if (!cand[x->in[0].node]) {
        for (int i = 0; i < n; i++)
            cand[list[i]] = 0;
        return 0;
    }
    /* The leaves, from a trial emission. */
    mr_prog *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        for (int i = 0; i < n; i++)
            cand[list[i]] = 0;
        return 0;
    }
    int r = mr_emit(f, p, x->in[0], 0, cand, val, MR_MAXIN, 2 * MR_MAXV);
    for (int i = 0; i < n; i++)
        val[list[i]] = -1;
    if (r >= 0 && p->nleaf > 0) {
        s->nleaf = p->nleaf;
        memcpy(s->leaf, p->leaf, sizeof(s->leaf));
        memcpy(s->leaf_bool, p->leaf_bool, sizeof(s->leaf_bool));
    }
    free(p);
    if (r < 0 || s->nleaf == 0) {
        for (int i = 0; i < n; i++)
            cand[list[i]] = 0;
        return 0;
    }
    return 1;
}

/* Same leaves (as a set), axes and keep_dims: one pass can compute both. */
static int mr_same_group(const mr_sum *a, const mr_sum *b) {
    if (a->nleaf != b->nleaf || a->naxes != b->naxes || a->keep != b->keep) return 0;
    for (int i = 0; i < a->naxes; i++)
        if (a->axes[i] != b->axes[i]) return 0;
    for (int i = 0; i < a->nleaf; i++) {
        int found = 0;
        for (int j = 0; j < b->nleaf && !found; j++)
            found = a->leaf[i].node == b->leaf[j].node && a->leaf[i].out == b->leaf[j].out &&
                    a->leaf_bool[i] == b->leaf_bool[j];
        if (!found) return 0;
    }
    return 1;
}

static Tensorflow__AttrValue__ListValue *attr_list(rt_graph *g, Tensorflow__NodeDef *d,
                                                   const char *key) {
    Tensorflow__NodeDef__AttrEntry *e = new_attr(g, key);
    if (e == NULL) return NULL;
    e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    e->value->list = rt_graph_alloc(g, sizeof(*e->value->list));
    if (e->value->list == NULL) return NULL;
    tensorflow__attr_value__list_value__init(e->value->list);
    d->attr[d->n_attr++] = e;
    return e->value->list;
}

static int attr_ilist(rt_graph *g, Tensorflow__NodeDef *d, const char *key, const int64_t *v,
                      int n) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, d, key);
    if (l == NULL || (l->i = rt_graph_alloc(g, sizeof(int64_t) * ((size_t)n + 1))) == NULL)
        return 0;
    memcpy(l->i, v, sizeof(int64_t) * (size_t)n);
    l->n_i = (size_t)n;
    return 1;
}

static int attr_slist(rt_graph *g, Tensorflow__NodeDef *d, const char *key,
                      const char *const *v, int n) {
    Tensorflow__AttrValue__ListValue *l = attr_list(g, d, key);
    if (l == NULL || (l->s = rt_graph_alloc(g, sizeof(ProtobufCBinaryData) * ((size_t)n + 1))) ==
                         NULL)
        return 0;
    for (int i = 0; i < n; i++) {
        char *s = gstrdup(g, v[i]);
        if (s == NULL) return 0;
        l->s[i] = (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
    }
    l->n_s = (size_t)n;
    return 1;
}

/* Emits the group's program from its sums (rt_fuse.h rule 4) and rewrites
 * the graph: a new unnamed _FusedMapReduce node with one output per sum;
 * each sum becomes Identity(that output), its original form kept as its
 * unfused twin, and the absorbed nodes point at it (fused_into). */
static ms_status mr_rewrite(fz *f, const mr_sum *sums, const int *members, int nm,
                            unsigned char *cand, int *list, int *val) {
    rt_graph *g = f->g;
    mr_prog *p = calloc(1, sizeof(*p));
    if (p == NULL) return ms_errf(MS_ENOMEM, "out of memory fusing the graph");
    ms_status st = MS_OK;
    /* Leaves first (value numbers: leaves, consts, ops), in the first sum's
     * order; consts and ops are numbered once all are known, so emit with
     * provisional bases and renumber. */
    p->nleaf = sums[members[0]].nleaf;
    memcpy(p->leaf, sums[members[0]].leaf, sizeof(p->leaf));
    memcpy(p->leaf_bool, sums[members[0]].leaf_bool, sizeof(p->leaf_bool));
    const int CB = MR_MAXIN, OB = MR_MAXIN + MR_MAXV;
    int ok = 1;
    for (int m = 0; m < nm && ok; m++) {
        const mr_sum *s = &sums[members[m]];
        const rt_gnode *x = &g->nodes[s->node];
        mr_mark(f, x->in[0], 0, cand, 0);
        int n = 0;
        for (int u = 0; u < f->n0; u++)
            if (cand[u]) list[n++] = u;
        mr_prune(f, s->node, cand, list, n);
        int r = mr_emit(f, p, x->in[0], 0, cand, val, CB, OB);
        ok = r >= 0 && p->nleaf == s->nleaf && p->nout < MR_MAXOUT &&
             p->nleaf + p->nconst + p->nops <= MR_MAXV;
        if (ok) {
            p->out[p->nout] = r;
            p->sum[p->nout++] = s->node;
        }
        for (int i = 0; i < n; i++)
            cand[list[i]] = 0;
    }
    if (!ok) { /* a program limit: leave the group unfused */
        for (int u = 0; u < f->n0; u++)
            val[u] = -1;
        free(p);
        return MS_OK;
    }
    /* Final numbering: leaves [0, nleaf), consts, then ops. */
    const int cb = p->nleaf, ob = p->nleaf + p->nconst;
#define MR_RENUM(v) ((v) < 0 ? (v) : (v) >= OB ? (v)-OB + ob : (v) >= CB ? (v)-CB + cb : (v))
    for (int i = 0; i < 2 * p->nops; i++)
        p->args[i] = MR_RENUM(p->args[i]);
    for (int i = 0; i < p->nout; i++)
        p->out[i] = MR_RENUM(p->out[i]);
#undef MR_RENUM

    /* The group node's NodeDef. */
    const rt_gnode *s0 = &g->nodes[p->sum[0]];
    Tensorflow__NodeDef *d = rt_graph_alloc(g, sizeof(*d));
    size_t nlen = strlen(s0->name) + 16;
    char *gname = malloc(nlen);
    rt_edge *gin = calloc((size_t)p->nleaf, sizeof(*gin));
    if (d == NULL || gname == NULL || gin == NULL) goto oom;
    snprintf(gname, nlen, "%s/_map_reduce", s0->name);
    tensorflow__node_def__init(d);
    d->name = gstrdup(g, gname);
    d->op = gstrdup(g, "_FusedMapReduce");
    d->device = s0->def->device;
    d->input = rt_graph_alloc(g, sizeof(char *) * ((size_t)p->nleaf + 1));
    d->attr = rt_graph_alloc(g, sizeof(*d->attr) * 12);
    if (d->name == NULL || d->op == NULL || d->input == NULL || d->attr == NULL) goto oom;
    for (int i = 0; i < p->nleaf; i++) {
        gin[i] = p->leaf[i];
        if ((d->input[d->n_input++] = edge_str(g, p->leaf[i])) == NULL) goto oom;
    }
    Tensorflow__AttrValue__ListValue *l = attr_list(g, d, "Tleaves");
    if (l == NULL || (l->type = rt_graph_alloc(g, sizeof(*l->type) * (size_t)p->nleaf)) == NULL)
        goto oom;
    for (int i = 0; i < p->nleaf; i++)
        l->type[i] = (Tensorflow__DataType)(p->leaf_bool[i] ? RT_DT_BOOL : RT_DT_FLOAT);
    l->n_type = (size_t)p->nleaf;
    if ((l = attr_list(g, d, "consts")) == NULL ||
        (l->f = rt_graph_alloc(g, sizeof(float) * ((size_t)p->nconst + 1))) == NULL)
        goto oom;
    memcpy(l->f, p->cval, sizeof(float) * (size_t)p->nconst);
    l->n_f = (size_t)p->nconst;
    const char *reds[MR_MAXOUT];
    for (int i = 0; i < p->nout; i++)
        reds[i] = op_is(&g->nodes[p->sum[i]], "Mean") ? "Mean" : "Sum";
    const mr_sum *sm = &sums[members[0]];
    if (!attr_slist(g, d, "ops", p->op, p->nops) ||
        !attr_ilist(g, d, "args", p->args, 2 * p->nops) ||
        !attr_ilist(g, d, "outputs", p->out, p->nout) ||
        !attr_slist(g, d, "reductions", reds, p->nout) ||
        !attr_ilist(g, d, "axes", sm->axes, sm->naxes))
        goto oom;
    Tensorflow__NodeDef__AttrEntry *e = new_attr(g, "keep_dims");
    if (e == NULL) goto oom;
    e->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B;
    e->value->b = sm->keep;
    d->attr[d->n_attr++] = e;

    /* The group node, appended (unnamed in the name map). */
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 64;
        rt_gnode *nn = realloc(g->nodes, sizeof(*nn) * (size_t)ncap);
        if (nn == NULL) goto oom;
        g->nodes = nn;
        g->cap = ncap;
    }
    const int gv = g->n++;
    rt_gnode *G = &g->nodes[gv];
    memset(G, 0, sizeof(*G));
    G->name = gname;
    G->def = d;
    G->kn.name = gname;
    G->kn.op = d->op;
    G->kn.def = d;
    G->kn.attrs = &rt_nodedef_attrs;
    G->in = gin;
    G->nin = p->nleaf;
    G->kn.nin = p->nleaf;
    G->nout = p->nout;
    G->kn.nout = p->nout;
    G->fused_into = -1;
    G->unfused = -1;
    gname = NULL;
    gin = NULL;

    /* Each sum: Identity of its output of the group node. */
    for (int q = 0; q < p->nout; q++) {
        const int v = p->sum[q];
        const rt_gnode *x = &g->nodes[v];
        Tensorflow__NodeDef *id = rt_graph_alloc(g, sizeof(*id));
        rt_edge *in = calloc(1, sizeof(*in));
        int *ctl = calloc((size_t)x->nctl + 1, sizeof(int));
        if (id == NULL || in == NULL || ctl == NULL) {
            free(in);
            free(ctl);
            goto oom_late;
        }
        in[0] = (rt_edge){gv, q};
        memcpy(ctl, x->ctl, sizeof(int) * (size_t)x->nctl);
        tensorflow__node_def__init(id);
        id->name = x->name;
        id->op = gstrdup(g, "Identity");
        id->device = x->def->device;
        id->input = rt_graph_alloc(g, sizeof(char *) * ((size_t)x->nctl + 2));
        id->attr = rt_graph_alloc(g, sizeof(*id->attr) * 2);
        char *src = rt_graph_alloc(g, strlen(g->nodes[gv].name) + 16);
        if (id->op == NULL || id->input == NULL || id->attr == NULL || src == NULL) {
            free(in);
            free(ctl);
            goto oom_late;
        }
        sprintf(src, "%s:%d", g->nodes[gv].name, q);
        id->input[id->n_input++] = src;
        for (int i = 0; i < x->nctl; i++) {
            const char *nm = g->nodes[x->ctl[i]].name;
            char *cs = rt_graph_alloc(g, strlen(nm) + 2);
            if (cs == NULL) {
                free(in);
                free(ctl);
                goto oom_late;
            }
            cs[0] = '^';
            strcpy(cs + 1, nm);
            id->input[id->n_input++] = cs;
        }
        for (size_t i = 0; i < x->def->n_attr; i++)
            if (strcmp(x->def->attr[i]->key, "T") == 0) id->attr[id->n_attr++] = x->def->attr[i];
        int nctl = x->nctl;
        if (install_fused(g, v, id, in, 1, ctl, nctl) != MS_OK) {
            free(in);
            free(ctl);
            goto oom_late;
        }
    }
    for (int k = 0; k < p->nops; k++) {
        int owner = -1;
        /* The sum whose expression holds op k: its output is computed from
         * it, so the first output at or after k's emission owns it. */
        for (int q = 0; q < p->nout && owner < 0; q++)
            if (p->out[q] >= ob + k) owner = p->sum[q];
        g->nodes[p->node_of_op[k]].fused_into = owner >= 0 ? owner : p->sum[p->nout - 1];
    }
    for (int u = 0; u < f->n0; u++)
        val[u] = -1;
    free(p);
    return MS_OK;
oom:
    free(gname);
    free(gin);
oom_late:
    free(p);
    st = ms_errf(MS_ENOMEM, "out of memory fusing the graph");
    return st;
}

/* 1 when the graph has a device backend on which the sum v, every node of
 * its expression (cand) and the producer of every leaf have kernels: left
 * unfused, that work and its data stay on the device, where the CPU-only
 * _FusedMapReduce would copy the leaves to the host and its sums back (an
 * instance norm between two GPU convolutions). */
static int mr_device_keeps(const fz *f, const mr_sum *s, const unsigned char *cand) {
    kn_backend *d = f->g->device;
    if (d == NULL || kn_backend_kernel(d, "_FusedMapReduce") != NULL ||
        kn_backend_kernel(d, f->g->nodes[s->node].kn.op) == NULL)
        return 0;
    for (int u = 0; u < f->n0; u++)
        if (cand[u] && kn_backend_kernel(d, f->g->nodes[u].kn.op) == NULL) return 0;
    for (int i = 0; i < s->nleaf; i++) {
        const rt_gnode *p = &f->g->nodes[s->leaf[i].node];
        if (!op_is(p, "Const") && kn_backend_kernel(d, p->kn.op) == NULL) return 0;
    }
    return 1;
}

/* Rule 4: finds the Sum / Mean nodes over absorbable expressions, groups
 * them and rewrites each group; *count += groups fused. */
static ms_status fuse_map_reduce(fz *f, int *count) {
    const int n = f->n0;
    unsigned char *cand = calloc((size_t)n + 1, 1);
    int *list = calloc((size_t)n + 1, sizeof(int));
    int *val = malloc(sizeof(int) * ((size_t)n + 1));
    mr_sum *sums = calloc((size_t)n + 1, sizeof(*sums));
    int *members = calloc((size_t)n + 1, sizeof(int));
    ms_status st = MS_OK;
    if (!cand || !list || !val || !sums || !members) {
        st = ms_errf(MS_ENOMEM, "out of memory fusing the graph");
        goto done;
    }
    for (int u = 0; u < n; u++)
        val[u] = -1;
    int ns = 0;
    for (int i = 0; i < n; i++) {
        int v = f->order[i];
        if (!f->topo[v]) break;
        /* cand[] is marked only on a match (mr_match_sum clears it otherwise):
         * clearing it after every node would cost n per node */
        if (!mr_match_sum(f, v, &sums[ns], cand, list, val)) continue;
        if (!mr_device_keeps(f, &sums[ns], cand)) ns++;
        memset(cand, 0, (size_t)n);
    }
    int ngroups = 0;
    for (int a = 0; a < ns; a++) {
        if (sums[a].group >= 0) continue;
        int nm = 0;
        sums[a].group = ngroups++;
        members[nm++] = a;
        for (int b = a + 1; b < ns && nm < MR_MAXOUT; b++)
            if (sums[b].group < 0 && mr_same_group(&sums[a], &sums[b])) {
                sums[b].group = sums[a].group;
                members[nm++] = b;
            }
        int before = f->g->n;
        if ((st = mr_rewrite(f, sums, members, nm, cand, list, val)) != MS_OK) break;
        if (f->g->n > before) (*count)++;
    }
done:
    free(cand);
    free(list);
    free(val);
    free(sums);
    free(members);
    return st;
}

/* ============ DICOM: the split of DcmDecodeWindow for a device ============ */

/* With a device backend that has _DcmPixelTransform (kn_dicom_xform.h), the
 * fused node v becomes that transform over a new host node _DcmDecodeRaw
 * (same attrs, inputs and control inputs as v), so that only the raw pixels
 * cross to the device and the pixel arithmetic runs there. v keeps its name
 * and its unfused twin (a plan feeding the decode's outputs runs the twin). */
static ms_status split_dicom(rt_graph *g, int v) {
    const rt_gnode *x = &g->nodes[v];
    const Tensorflow__NodeDef *fd = x->def;
    size_t nl = strlen(x->name);
    char *rname = malloc(nl + sizeof("/_dcm_raw"));
    rt_edge *rin = malloc(sizeof(*rin));
    rt_edge *vin = malloc(sizeof(*vin) * 2);
    Tensorflow__NodeDef *rd = rt_graph_alloc(g, sizeof(*rd)), *td = rt_graph_alloc(g, sizeof(*td));
    char **tin = rt_graph_alloc(g, sizeof(char *) * 2);
    if (!rname || !rin || !vin || !rd || !td || !tin) goto oom;
    memcpy(rname, x->name, nl);
    memcpy(rname + nl, "/_dcm_raw", sizeof("/_dcm_raw"));
    *rd = *fd;
    rd->name = rname;
    rd->op = gstrdup(g, KN_DCM_RAW_OP);
    *td = *fd;
    td->op = gstrdup(g, KN_DCM_XFORM_OP);
    if (rd->op == NULL || td->op == NULL) goto oom;
    for (int k = 0; k < 2; k++) {
        if ((tin[k] = rt_graph_alloc(g, nl + sizeof("/_dcm_raw:0"))) == NULL) goto oom;
        snprintf(tin[k], nl + sizeof("/_dcm_raw:0"), "%s:%d", rname, k);
    }
    td->input = tin;
    td->n_input = 2;
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 64;
        rt_gnode *nn = realloc(g->nodes, sizeof(*nn) * (size_t)ncap);
        if (nn == NULL) goto oom;
        g->nodes = nn;
        g->cap = ncap;
    }
    const int r = g->n++;
    rt_gnode *V = &g->nodes[v], *R = &g->nodes[r];
    memset(R, 0, sizeof(*R));
    rin[0] = V->in[0];
    R->name = rname;
    R->def = rd;
    R->nin = 1;
    R->in = rin;
    R->nctl = V->nctl;
    R->ctl = V->ctl; /* the control inputs move to the decode */
    R->nout = 2;
    R->kn = (kn_node){.name = rname, .op = rd->op, .def = rd, .attrs = V->kn.attrs, .nin = 1,
                      .nout = 2};
    R->fused_into = -1;
    R->unfused = -1;
    free(V->in);
    vin[0] = (rt_edge){r, 0};
    vin[1] = (rt_edge){r, 1};
    V->in = vin;
    V->nin = 2;
    V->ctl = NULL;
    V->nctl = 0;
    V->def = td;
    V->kn.def = td;
    V->kn.op = td->op;
    V->kn.nin = 2;
    return MS_OK;
oom:
    free(rname);
    free(rin);
    free(vin);
    return ms_errf(MS_ENOMEM, "out of memory splitting the DICOM node");
}

ms_status rt_fuse_graph(rt_graph *g, int *nfused) {
    fz f = {.g = g, .n0 = g->n, .next_sym = -2};
    int count = 0;
    ms_status st = count_uses(&f);
    if (st == MS_OK) st = infer_shapes(&f);
    for (int v = 0; v < f.n0 && st == MS_OK; v++) {
        fz_chain c;
        if (!match(&f, v, &c)) continue;
        if ((st = rewrite(&f, &c)) == MS_OK) count++;
    }
    for (int v = 0; v < f.n0 && st == MS_OK; v++) {
        int d = match_dicom(&f, v);
        if (d >= 0 && (st = rewrite_dicom(&f, d, v)) == MS_OK) count++;
    }
    if (st == MS_OK) st = fuse_map_reduce(&f, &count);
    /* Last, as it appends nodes the passes above have no use counts for: with
     * a device backend that has the DICOM pixel transform, each fused DICOM
     * node is split into the host decode and the device transform. */
    if (g->device != NULL && kn_backend_kernel(g->device, KN_DCM_XFORM_OP) != NULL)
        for (int v = 0; v < f.n0 && st == MS_OK; v++)
            if (g->nodes[v].kn.op != NULL && strcmp(g->nodes[v].kn.op, "DcmDecodeWindow") == 0)
                st = split_dicom(g, v);
    free(f.ustart);
    free(f.use);
    free(f.topo);
    free(f.order);
    free(f.shp);
    if (count > 0) MS_DEBUG("graph fusion: %d chains fused", count);
    if (nfused) *nfused = count;
    return st;
}
