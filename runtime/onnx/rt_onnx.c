/* rt_onnx.c - ONNX -> SavedModel conversion, the driver: reading the model,
 * converting its graph node by node, and assembling the SavedModel with its
 * serving_default signature. The per-op translation is in rt_onnx_ops.c and
 * rt_onnx_shape.c, the shared machinery (arena, value table, TF node
 * emitters) in rt_onnx_conv.c. */
#include "rt_onnx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ms_log.h"
#include "ms_wire.h"
#include "rt_bundle.h"
#include "rt_lowp.h"
#include "rt_model.h"
#include "rt_onnx_int.h"
#include "tf_savedmodel.pb-c.h"

/* ======================================================================
 * Graph conversion and SavedModel assembly
 * ====================================================================== */

static ms_status read_whole(const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        (uint64_t)sb.st_size > RT_SAVED_MODEL_MAX_BYTES) {
        fclose(f);
        return ms_errf(MS_EINVAL, "%s: %lld bytes is larger than the limit of %llu bytes; not read",
                       path, (long long)sb.st_size, (unsigned long long)RT_SAVED_MODEL_MAX_BYTES);
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 20;
            uint8_t *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return ms_errf(MS_ENOMEM, "reading %s: out of memory", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ms_errf(MS_EINVAL, "reading %s failed", path);
    }
    *data = buf;
    *len = n;
    return MS_OK;
}


static Tensorflow__TensorInfo *tensor_info(rt__ox_conv *cv, const char *tensor, rt_dtype dt,
                                           int rank, const int64_t *dims) {
    Tensorflow__TensorInfo *ti = rt__ox_alloc(cv, sizeof(*ti));
    tensorflow__tensor_info__init(ti);
    ti->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
    ti->name = strchr(tensor, ':') ? rt__ox_strdup(cv, tensor) : rt__ox_printf(cv, "%s:0", tensor);
    ti->dtype = (Tensorflow__DataType)dt;
    ti->tensor_shape = rt__ox_shape_proto(cv, rank, dims);
    return ti;
}

/* --dicom_input with dicom_volume: Placeholder(DT_STRING [-1]) ->
 * DcmDecodeVolume (1, D, H, W, 1) [-> Transpose to (1, 1, D, H, W)]. */
static ms_status dicom_volume_front(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                                    const int64_t *dims,
                                    Tensorflow__SignatureDef__InputsEntry *e) {
    const rt_onnx_opts *o = cv->opts;
    if (dt != RT_DT_FLOAT || rank != 5)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s with --dicom_volume: the model input must be a 5-D "
                       "float tensor (got rank %d, %s)",
                       name, rank, rt_dtype_name(dt));
    const int cx = o->dicom_nhwc ? 4 : 1, dx = o->dicom_nhwc ? 1 : 2;
    if (dims[cx] >= 0 && dims[cx] != 1)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s: the model wants %lld channels; a DICOM volume has 1",
                       name, (long long)dims[cx]);
    if (dims[0] > 1)
        return ms_errf(MS_EINVAL, "--dicom_input %s: the model wants a batch of %lld volumes; "
                                  "a series gives one",
                       name, (long long)dims[0]);
    int64_t d[5];
    memcpy(d, dims, sizeof(d));
    d[0] = 1;
    d[cx] = 1;
    const int sw = o->sw_roi[0] > 0;
    if (sw) {
        /* The model sees patches of roi voxels, in batches of sw_batch. */
        int64_t b = o->sw_batch > 0 ? o->sw_batch : 1;
        if (dims[0] >= 0 && !(dims[0] == 1 && b == 1))
            return ms_errf(MS_EINVAL,
                           "--dicom_input %s: the model takes a batch of %lld patches; "
                           "--sliding_window needs a dynamic batch (or 1 with --sw_batch 1)",
                           name, (long long)dims[0]);
        for (int a = 0; a < 3; a++) {
            if (dims[dx + a] >= 0 && dims[dx + a] != o->sw_roi[a])
                return ms_errf(MS_EINVAL,
                               "--sliding_window roi=%lld,%lld,%lld does not match the model "
                               "input %s (%s %lld)",
                               (long long)o->sw_roi[0], (long long)o->sw_roi[1],
                               (long long)o->sw_roi[2], name, a == 0 ? "depth" :
                               a == 1 ? "height" : "width", (long long)dims[dx + a]);
            d[dx + a] = o->sw_roi[a];
        }
        d[0] = dims[0];
    }
    Tensorflow__NodeDef *ph = rt__tf_node(cv, "Placeholder", name);
    rt__tf_attr_type(cv, ph, "dtype", RT_DT_STRING);
    int64_t one = -1;
    rt__tf_attr_shape(cv, ph, "shape", 1, &one);
    Tensorflow__NodeDef *dec =
        rt__tf_node(cv, "DcmDecodeVolume", rt__ox_printf(cv, "%s/volume", ph->name));
    rt__tf_input(cv, dec, ph->name);
    if (o->window_width > 0) { /* else HU */
        rt__tf_attr_f(cv, dec, "center", o->window_center);
        rt__tf_attr_f(cv, dec, "width", o->window_width);
    }
    if (o->dicom_modality != NULL && o->dicom_modality[0])
        rt__tf_attr_s(cv, dec, "modalities", o->dicom_modality);
    if (o->spacing[0] > 0) rt__tf_attr_flist(cv, dec, "spacing", o->spacing, 3);
    int64_t ex[3] = {d[dx], d[dx + 1], d[dx + 2]};
    if (!sw && (ex[0] > 0 || ex[1] > 0 || ex[2] > 0))
        rt__tf_attr_ilist(cv, dec, "expect_shape", ex, 3);
    const char *t = dec->name;
    if (sw) {
        /* The model's input becomes a Placeholder the _SlidingWindow node
         * feeds; the volume goes to that node (convert_graph's outputs). */
        Tensorflow__NodeDef *pp =
            rt__tf_node(cv, "Placeholder", rt__ox_printf(cv, "%s/patch", ph->name));
        rt__tf_attr_type(cv, pp, "dtype", RT_DT_FLOAT);
        rt__tf_attr_shape(cv, pp, "shape", 5, d);
        cv->sw_volume = dec->name;
        cv->sw_patch = pp->name;
        t = pp->name;
    } else if (!o->dicom_nhwc) {
        static const int64_t perm[5] = {0, 4, 1, 2, 3};
        t = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_ncdhw", ph->name), t, RT_DT_FLOAT, 5,
                             perm);
    }
    rt__ox_value *v = rt__ox_define(cv, name, RT_DT_FLOAT, 5, d);
    v->tf = t;
    v->nhwc = 0;
    cv->dicom_used = 1;
    tensorflow__signature_def__inputs_entry__init(e);
    e->key = rt__ox_strdup(cv, name);
    e->value = tensor_info(cv, ph->name, RT_DT_STRING, 1, &one);
    return MS_OK;
}

/* --dicom_seg_output NAME: DcmEncodeSeg(labels = graph output NAME's
 * Identity, contents = the series' Placeholder) as signature output
 * "dicom_seg" (outs has room for one more entry). */
static ms_status seg_output(rt__ox_conv *cv, const Onnx__GraphProto *g,
                            Tensorflow__SignatureDef__OutputsEntry **outs, size_t *nout) {
    (void)g; /* the outputs are outs[0 .. *nout): the graph's and --argmax's labels */
    const rt_onnx_opts *o = cv->opts;
    size_t i = 0;
    while (i < *nout && strcmp(outs[i]->key, o->dicom_seg_output) != 0) i++;
    if (i == *nout)
        return ms_errf(MS_EINVAL, "--dicom_seg_output %s: the graph has no output of that name",
                       o->dicom_seg_output);
    for (size_t k = 0; k < *nout; k++)
        if (strcmp(outs[k]->key, "dicom_seg") == 0)
            return ms_errf(MS_EINVAL, "--dicom_seg_output: the graph already has an output "
                                      "named dicom_seg");
    const rt_dtype dt = (rt_dtype)outs[i]->value->dtype;
    if (dt != RT_DT_UINT8 && dt != RT_DT_INT32 && dt != RT_DT_INT64)
        return ms_errf(MS_EINVAL,
                       "--dicom_seg_output %s: a SEG encodes labels (uint8, int32 or int64), the "
                       "output is %s (an ArgMax over the classes gives labels)",
                       o->dicom_seg_output, rt_dtype_name(dt));
    Tensorflow__NodeDef *seg =
        rt__tf_node(cv, "DcmEncodeSeg", rt__ox_printf(cv, "%s/dicom_seg", o->dicom_input));
    rt__tf_input(cv, seg, outs[i]->key); /* the output's Identity node */
    rt__tf_input(cv, seg, o->dicom_input);
    if (o->dicom_seg_labels) rt__tf_attr_s(cv, seg, "segments", o->dicom_seg_labels);
    if (o->dicom_seg_uid_root) rt__tf_attr_s(cv, seg, "uid_root", o->dicom_seg_uid_root);
    Tensorflow__SignatureDef__OutputsEntry *e = rt__ox_alloc(cv, sizeof(*e));
    tensorflow__signature_def__outputs_entry__init(e);
    e->key = rt__ox_strdup(cv, "dicom_seg");
    e->value = tensor_info(cv, seg->name, RT_DT_STRING, 0, NULL);
    outs[(*nout)++] = e;
    return MS_OK;
}

/* --dicom_input: Placeholder(DT_STRING [-1]) -> DcmDecodeHU -> DcmWindow,
 * defining the ONNX input value from the windowed images. Fills the
 * signature entry (DT_STRING, [-1]). */
static ms_status dicom_front(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                             const int64_t *dims, Tensorflow__SignatureDef__InputsEntry *e) {
    const rt_onnx_opts *o = cv->opts;
    if (o->dicom_volume) return dicom_volume_front(cv, name, dt, rank, dims, e);
    if (dt != RT_DT_FLOAT || rank != 4)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s: the model input must be a 4-D float "
                       "tensor (got rank %d, %s)",
                       name, rank, rt_dtype_name(dt));
    int hx = o->dicom_nhwc ? 1 : 2, cx = o->dicom_nhwc ? 3 : 1;
    int64_t d[4];
    memcpy(d, dims, sizeof(d));
    d[0] = -1;
    if (o->size_h > 0) {
        for (int a = 0; a < 2; a++) {
            int64_t want = a ? o->size_w : o->size_h;
            if (d[hx + a] >= 0 && d[hx + a] != want)
                return ms_errf(MS_EINVAL,
                               "--size %lldx%lld does not match the model input %s "
                               "(%s %lld)",
                               (long long)o->size_h, (long long)o->size_w, name,
                               a ? "width" : "height", (long long)d[hx + a]);
            d[hx + a] = want;
        }
    }
    if (d[cx] >= 0 && d[cx] != 1 && d[cx] != 3)
        return ms_errf(MS_EINVAL,
                       "--dicom_input %s: the model wants %lld channels; DICOM "
                       "images give 1 (grey) or 3 (colour)",
                       name, (long long)d[cx]);
    Tensorflow__NodeDef *ph = rt__tf_node(cv, "Placeholder", name);
    rt__tf_attr_type(cv, ph, "dtype", RT_DT_STRING);
    int64_t one = -1;
    rt__tf_attr_shape(cv, ph, "shape", 1, &one);
    Tensorflow__NodeDef *dec =
        rt__tf_node(cv, "DcmDecodeHU", rt__ox_printf(cv, "%s/decode", ph->name));
    rt__tf_input(cv, dec, ph->name);
    rt__tf_attr_i(cv, dec, "frame", 0);
    if (o->dicom_modality != NULL && o->dicom_modality[0])
        rt__tf_attr_s(cv, dec, "modalities", o->dicom_modality);
    if (o->size_h <= 0 && d[hx] > 0 && d[hx + 1] > 0) {
        /* No --size: a file of another size than the model's is refused. */
        int64_t ex[2] = {d[hx], d[hx + 1]};
        rt__tf_attr_ilist(cv, dec, "expect_size", ex, 2);
    }
    Tensorflow__NodeDef *win =
        rt__tf_node(cv, "DcmWindow", rt__ox_printf(cv, "%s/window", ph->name));
    rt__tf_input(cv, win, dec->name);
    rt__tf_input(cv, win, rt__tf_out(cv, dec, 1));
    rt__tf_attr_f(cv, win, "center", o->window_center);
    rt__tf_attr_f(cv, win, "width", o->window_width);
    /* The windowed batch is NHWC unless the graph keeps ONNX's NCHW. */
    int chw_last = o->dicom_nhwc || cv->nhwc;
    rt__tf_attr_s(cv, win, "data_format", chw_last ? "NHWC" : "NCHW");
    if (o->size_h > 0) {
        int64_t sz[2] = {o->size_h, o->size_w};
        rt__tf_attr_ilist(cv, win, "size", sz, 2);
    }
    rt__ox_value *v = rt__ox_define(cv, name, RT_DT_FLOAT, 4, d);
    v->tf = win->name;
    v->nhwc = !o->dicom_nhwc && cv->nhwc;
    cv->dicom_used = 1;
    tensorflow__signature_def__inputs_entry__init(e);
    e->key = rt__ox_strdup(cv, name);
    e->value = tensor_info(cv, ph->name, RT_DT_STRING, 1, &one);
    return MS_OK;
}

/* OpDef of DcmDecodeHU for the MetaGraph's stripped_op_list, so that a
 * loader knows its two outputs. */
static Tensorflow__OpList *dicom_oplist(rt__ox_conv *cv) {
    Tensorflow__OpList *l = rt__ox_alloc(cv, sizeof(*l));
    tensorflow__op_list__init(l);
    Tensorflow__OpDef *od = rt__ox_alloc(cv, sizeof(*od));
    tensorflow__op_def__init(od);
    od->name = rt__ox_strdup(cv, "DcmDecodeHU");
    static const char *const outs[2] = {"hu", "mask"};
    od->n_input_arg = 1;
    od->input_arg = rt__ox_alloc(cv, sizeof(*od->input_arg));
    od->n_output_arg = 2;
    od->output_arg = rt__ox_alloc(cv, 2 * sizeof(*od->output_arg));
    for (int i = 0; i < 3; i++) {
        Tensorflow__OpDef__ArgDef *a = rt__ox_alloc(cv, sizeof(*a));
        tensorflow__op_def__arg_def__init(a);
        a->name = rt__ox_strdup(cv, i == 0 ? "contents" : outs[i - 1]);
        a->type = i == 0 ? TENSORFLOW__DATA_TYPE__DT_STRING : TENSORFLOW__DATA_TYPE__DT_FLOAT;
        if (i == 0)
            od->input_arg[0] = a;
        else
            od->output_arg[i - 1] = a;
    }
    od->is_stateful = 0;
    l->n_op = 1;
    l->op = rt__ox_alloc(cv, sizeof(*l->op));
    l->op[0] = od;
    return l;
}

/* How many node inputs and graph outputs name each tensor (the map holds
 * count + 0: counts as pointers, read with (intptr_t)). */
static void count_consumers(rt__ox_conv *cv, const Onnx__GraphProto *g, rt__ox_map *uses) {
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++) {
            const char *nm = g->node[i]->input[k];
            if (nm == NULL) continue;
            intptr_t c = (intptr_t)rt__ox_map_get(uses, nm, strlen(nm));
            rt__ox_map_put(cv, uses, nm, (void *)(c + 1));
        }
    for (size_t i = 0; i < g->n_output; i++) {
        const char *nm = g->output[i]->name;
        if (nm == NULL) continue;
        intptr_t c = (intptr_t)rt__ox_map_get(uses, nm, strlen(nm));
        rt__ox_map_put(cv, uses, nm, (void *)(c + 1));
    }
}

/* Input i of n when its float contents are known before conversion: an
 * initializer, or the output of a Constant node among those before it
 * (producer: output 0 -> index + 1), as Paddle2ONNX writes weights; that
 * tensor is read here into the arena (the node converts as usual). */
static const rt__ox_value *const_float_input(rt__ox_conv *cv, const Onnx__GraphProto *g,
                                             const rt__ox_map *producer,
                                             const Onnx__NodeProto *n, size_t i) {
    if (i >= n->n_input || n->input[i] == NULL || n->input[i][0] == '\0') return NULL;
    const rt__ox_value *v = rt__ox_find(cv, n->input[i]);
    if (v == NULL) {
        intptr_t pi = (intptr_t)rt__ox_map_get(producer, n->input[i], strlen(n->input[i]));
        const Onnx__NodeProto *c = pi > 0 ? g->node[pi - 1] : NULL;
        const Onnx__AttributeProto *a = c ? rt__ox_attr(c, "value") : NULL;
        if (a == NULL || a->t == NULL || strcmp(c->op_type ? c->op_type : "", "Constant") != 0 ||
            (c->domain && c->domain[0] && strcmp(c->domain, "ai.onnx") != 0))
            return NULL;
        rt__ox_value *t = rt__ox_alloc(cv, sizeof(*t));
        memset(t, 0, sizeof(*t));
        if (rt__ox_load_tensor(cv, a->t, t) != MS_OK) {
            ms_err_clear(); /* the Constant's own conversion reports it */
            return NULL;
        }
        v = t;
    }
    return v && v->f ? v : NULL;
}

/* Inference-time BatchNormalization right after a Conv (whose output feeds
 * nothing else) folds into the Conv's weights and bias, as ONNX Runtime's
 * graph optimiser does: W'[m] = W[m] * a[m], b' = (b - mean) * a + beta with
 * a = gamma / sqrt(var + eps). The Conv then writes the BN's output and the
 * BN node is skipped (skip[i] = 1). nodes[] starts as the graph's node
 * list; a rewritten Conv is replaced there by an arena copy, so the unpacked
 * model itself is never modified. */
static void fold_batchnorm(rt__ox_conv *cv, const Onnx__GraphProto *g, Onnx__NodeProto **nodes,
                           uint8_t *skip) {
    rt__ox_map producer = {0}; /* output 0 of the nodes before i -> index + 1 */
    rt__ox_map uses = {0};     /* filled at the first BatchNormalization */
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *bn = g->node[i];
        if (i > 0 && g->node[i - 1]->n_output >= 1 && g->node[i - 1]->output[0])
            rt__ox_map_put(cv, &producer, g->node[i - 1]->output[0], (void *)(intptr_t)i);
        if (strcmp(bn->op_type ? bn->op_type : "", "BatchNormalization") != 0 || bn->n_input != 5 ||
            bn->n_output < 1 || rt__ox_attr_i(bn, "training_mode", 0) != 0)
            continue;
        if (bn->n_output > 1) continue; /* running stats requested: leave alone */
        if (uses.cap == 0) count_consumers(cv, g, &uses);
        const char *x = bn->input[0] ? bn->input[0] : "";
        intptr_t pi = (intptr_t)rt__ox_map_get(&producer, x, strlen(x));
        const Onnx__NodeProto *conv = pi > 0 ? g->node[pi - 1] : NULL;
        size_t ci = pi > 0 ? (size_t)(pi - 1) : 0;
        if (conv == NULL || strcmp(conv->op_type ? conv->op_type : "", "Conv") != 0 ||
            conv->n_output != 1 || (intptr_t)rt__ox_map_get(&uses, x, strlen(x)) != 1)
            continue;
        const rt__ox_value *W = const_float_input(cv, g, &producer, conv, 1),
                           *B = const_float_input(cv, g, &producer, conv, 2);
        const rt__ox_value *p[4];
        int ok = W != NULL && W->rank == 4 &&
                 (conv->n_input < 3 || B != NULL || conv->input[2][0] == '\0');
        for (int k = 0; k < 4 && ok; k++)
            ok = (p[k] = const_float_input(cv, g, &producer, bn, (size_t)k + 1)) != NULL;
        int64_t M = ok ? W->dim[0] : 0;
        for (int k = 0; k < 4 && ok; k++)
            ok = rt__ox_nelem(p[k]) == M;
        if (!ok || (B != NULL && rt__ox_nelem(B) != M)) continue;
        float eps = rt__ox_attr_f(bn, "epsilon", 1e-5f);
        int64_t per = rt__ox_nelem(W) / M;
        const char *wn = rt__ox_printf(cv, "%s/bn_folded_W", bn->output[0]);
        const char *bname = rt__ox_printf(cv, "%s/bn_folded_B", bn->output[0]);
        rt__ox_value *nw = rt__ox_define(cv, wn, RT_DT_FLOAT, 4, W->dim);
        rt__ox_value *nb = rt__ox_define(cv, bname, RT_DT_FLOAT, 1, &M);
        nw->f = rt__ox_alloc(cv, (size_t)(M * per) * sizeof(float));
        nb->f = rt__ox_alloc(cv, (size_t)M * sizeof(float));
        for (int64_t m = 0; m < M; m++) {
            /* Same float32 arithmetic order as a separate BN would use. */
            float a = p[0]->f[m] / sqrtf(p[3]->f[m] + eps);
            for (int64_t k = 0; k < per; k++)
                nw->f[m * per + k] = W->f[m * per + k] * a;
            nb->f[m] = ((B ? B->f[m] : 0.0f) - p[2]->f[m]) * a + p[1]->f[m];
        }
        Onnx__NodeProto *nc = rt__ox_alloc(cv, sizeof(*nc));
        *nc = *conv;
        char **in = rt__ox_alloc(cv, 3 * sizeof(char *));
        in[0] = conv->input[0];
        in[1] = (char *)wn;
        in[2] = (char *)bname;
        nc->input = in;
        nc->n_input = 3;
        char **out = rt__ox_alloc(cv, sizeof(char *));
        out[0] = bn->output[0];
        nc->output = out;
        nodes[ci] = nc;
        skip[i] = 1;
    }
}

static ms_status sliding_window(rt__ox_conv *cv, const char *name, const rt__ox_value *v,
                                const char **src, int *rank, int64_t *dims,
                                Tensorflow__SignatureDef__OutputsEntry **labels);
/* Converts node n (unless skipped). */
static ms_status convert_node(rt__ox_conv *cv, const Onnx__NodeProto *n, int skipped) {
    ms_status st;
    if (skipped) return MS_OK;
    cv->cur = n;
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return rt__ox_err(cv, MS_ENOTSUP, "operator domain \"%s\" is not supported", n->domain);
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k] && n->input[k][0] && rt__ox_find(cv, n->input[k]) == NULL)
            return rt__ox_err(cv, MS_EINVAL,
                              "input \"%s\" is not produced by an earlier node (the graph "
                              "must be topologically sorted)",
                              n->input[k]);
    rt__ox_handler h = rt__ox_handler_for(op);
    if (h == NULL) return rt__ox_err(cv, MS_ENOTSUP, "unsupported ONNX op \"%s\"", op);
    if ((st = rt__ox_check_version(cv, n)) != MS_OK ||
        (st = rt__ox_run_handler(cv, n, h)) != MS_OK)
        return st;
    if (cv->walk->done) return MS_OK; /* its outputs live inside its branches */
    for (size_t k = 0; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0] && rt__ox_find(cv, n->output[k]) == NULL)
            return rt__ox_err(cv, MS_EINTERNAL, "output \"%s\" was not produced", n->output[k]);
    return MS_OK;
}

ms_status rt__ox_convert_nodes(rt__ox_conv *cv, const Onnx__GraphProto *g,
                               Onnx__NodeProto *const *nodes, const uint8_t *skip) {
    int done;
    return rt__ox_convert_from(cv, g, nodes, skip, 0, &done);
}

ms_status rt__ox_convert_from(rt__ox_conv *cv, const Onnx__GraphProto *g,
                              Onnx__NodeProto *const *nodes, const uint8_t *skip, size_t from,
                              int *done) {
    rt__ox_walk w = {.g = g, .nodes = nodes, .skip = skip}, *outer = cv->walk;
    ms_status st = MS_OK;
    cv->walk = &w;
    for (size_t i = from; i < g->n_node && st == MS_OK && !w.done; i++) {
        w.next = i + 1;
        st = convert_node(cv, nodes ? nodes[i] : g->node[i], skip && skip[i]);
    }
    cv->walk = outer;
    *done = w.done;
    if (st == MS_OK) cv->cur = NULL;
    return st;
}

static ms_status convert_graph(rt__ox_conv *cv, const Onnx__ModelProto *m,
                               Tensorflow__SignatureDef *sig) {
    const Onnx__GraphProto *g = m->graph;
    ms_status st;
    if (g == NULL) return ms_errf(MS_EINVAL, "ONNX model has no graph");
    const char *dicom = cv->opts->dicom_input;
    int dicom_found = 0;

    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (t->name == NULL || t->name[0] == '\0')
            return ms_errf(MS_EINVAL, "initializer %zu has no name", i);
        rt__ox_value *v = rt__ox_define(cv, t->name, RT_DT_INVALID, 0, NULL);
        if ((st = rt__ox_load_tensor(cv, t, v)) != MS_OK) return st;
    }

    /* Graph inputs (those that are not initializers) become Placeholders. */
    rt__ox_map inits = {0};
    for (size_t i = 0; i < g->n_initializer; i++)
        rt__ox_map_put(cv, &inits, g->initializer[i]->name, (void *)g->initializer[i]);
    size_t nin = 0;
    Tensorflow__SignatureDef__InputsEntry **ins = rt__ox_alloc(cv, (g->n_input + 1) * sizeof(*ins));
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (vi->name == NULL || rt__ox_map_get(&inits, vi->name, strlen(vi->name))) continue;
        rt_dtype dt;
        int rank;
        int64_t dims[RT_MAX_RANK];
        if ((st = rt__ox_value_info(vi, &dt, &rank, dims)) != MS_OK) return st;
        if (dicom && strcmp(dicom, vi->name) == 0) {
            ins[nin] = rt__ox_alloc(cv, sizeof(*ins[nin]));
            if ((st = dicom_front(cv, vi->name, dt, rank, dims, ins[nin])) != MS_OK) return st;
            nin++;
            dicom_found = 1;
            continue;
        }
        if (!rt__ox_dtype_num(dt) && dt != RT_DT_BOOL && dt != RT_DT_STRING &&
            !rt_dtype_is_lowp(dt)) {
            int32_t et = vi->type->tensor_type->has_elem_type ? vi->type->tensor_type->elem_type : 0;
            return ms_errf(MS_ENOTSUP,
                           "graph input \"%s\": element type %s is not supported (docs/onnx.md "
                           "lists the types accepted)",
                           vi->name, rt__ox_onnx_type_name(et));
        }
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "Placeholder", vi->name);
        rt__tf_attr_type(cv, nd, "dtype", dt);
        rt__tf_attr_shape(cv, nd, "shape", rank, dims);
        rt__ox_value *v = rt__ox_define(cv, vi->name, dt, rank, dims);
        v->tf = nd->name;
        Tensorflow__SignatureDef__InputsEntry *e = rt__ox_alloc(cv, sizeof(*e));
        tensorflow__signature_def__inputs_entry__init(e);
        e->key = rt__ox_strdup(cv, vi->name);
        e->value = tensor_info(cv, nd->name, dt, rank, dims);
        ins[nin++] = e;
    }
    if (dicom && !dicom_found)
        return ms_errf(MS_EINVAL, "--dicom_input %s: the graph has no input of that name", dicom);

    Onnx__NodeProto **nodes = rt__ox_alloc(cv, (g->n_node + 1) * sizeof(*nodes));
    uint8_t *skip = rt__ox_alloc(cv, g->n_node + 1);
    if (g->n_node > 0) memcpy(nodes, g->node, g->n_node * sizeof(*nodes));
    fold_batchnorm(cv, g, nodes, skip);
    if ((st = rt__ox_convert_nodes(cv, g, nodes, skip)) != MS_OK) return st;

    if (cv->sw_patch != NULL && g->n_output != 1)
        return ms_errf(MS_ENOTSUP, "--sliding_window: the model has %zu outputs; it blends one",
                       g->n_output);
    /* Graph outputs: an Identity named after each, so the graph tensor
     * carries the ONNX name. */
    Tensorflow__SignatureDef__OutputsEntry **outs =
        rt__ox_alloc(cv, (g->n_output + 2) * sizeof(*outs));
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = g->output[i];
        rt__ox_value *v = vi->name ? rt__ox_find(cv, vi->name) : NULL;
        if (v == NULL)
            return ms_errf(MS_EINVAL, "graph output \"%s\" is not produced by any node",
                           vi->name ? vi->name : "");
        const char *src;
        if ((st = rt__ox_tf(cv, v, &src)) != MS_OK) return st;
        rt_dtype dt;
        int rank;
        int64_t dims[RT_MAX_RANK];
        if ((st = rt__ox_value_info(vi, &dt, &rank, dims)) != MS_OK) return st;
        if (dt == RT_DT_INVALID) dt = v->dt;
        if (rank < 0 && v->rank >= 0) {
            rank = v->rank;
            memcpy(dims, v->dim, sizeof(dims));
        }
        if (cv->sw_patch != NULL &&
            (st = sliding_window(cv, vi->name, v, &src, &rank, dims, outs + g->n_output)) != MS_OK)
            return st;
        Tensorflow__NodeDef *nd = rt__tf_node(cv, "Identity", vi->name);
        rt__tf_input(cv, nd, src);
        rt__tf_attr_type(cv, nd, "T", v->dt);
        outs[i] = rt__ox_alloc(cv, sizeof(*outs[i]));
        tensorflow__signature_def__outputs_entry__init(outs[i]);
        outs[i]->key = rt__ox_strdup(cv, vi->name);
        outs[i]->value = tensor_info(cv, nd->name, dt, rank, dims);
    }
    size_t nout = g->n_output + (outs[g->n_output] != NULL); /* + --argmax's labels */
    if (cv->opts->dicom_seg_output != NULL && (st = seg_output(cv, g, outs, &nout)) != MS_OK)
        return st;
    sig->n_inputs = nin;
    sig->inputs = ins;
    sig->n_outputs = nout;
    sig->outputs = outs;
    sig->method_name = rt__ox_strdup(cv, "tensorflow/serving/predict");
    return MS_OK;
}

/* --sliding_window, for the model output `name` (value v, its TF tensor
 * *src): an Identity "<name>/sw_pred" the _SlidingWindow node fetches, the
 * node itself over the decoded volume; *src becomes its blended output
 * (rank 5: batch 1, the model's channels, the volume's size) and, with
 * sw_argmax, *labels the signature entry of "<name>_labels" (uint8). */
static ms_status sliding_window(rt__ox_conv *cv, const char *name, const rt__ox_value *v,
                                const char **src, int *rank, int64_t *dims,
                                Tensorflow__SignatureDef__OutputsEntry **labels) {
    const rt_onnx_opts *o = cv->opts;
    const int ndhwc = o->dicom_nhwc, cx = ndhwc ? 4 : 1;
    if (v->dt != RT_DT_FLOAT || (v->rank >= 0 && v->rank != 5))
        return ms_errf(MS_EINVAL,
                       "--sliding_window: the model output %s must be a 5-D float tensor of the "
                       "patch's size (got rank %d, %s)",
                       name, v->rank, rt_dtype_name(v->dt));
    int64_t c = v->rank == 5 ? v->dim[cx] : -1;
    Tensorflow__NodeDef *pred =
        rt__tf_node(cv, "Identity", rt__ox_printf(cv, "%s/sw_pred", name));
    rt__tf_input(cv, pred, *src);
    rt__tf_attr_type(cv, pred, "T", RT_DT_FLOAT);
    cv->sw_pred = pred->name;
    Tensorflow__NodeDef *sw =
        rt__tf_node(cv, "_SlidingWindow", rt__ox_printf(cv, "%s/sliding_window", name));
    rt__tf_input(cv, sw, cv->sw_volume);
    rt__tf_attr_s(cv, sw, "patch", cv->sw_patch);
    rt__tf_attr_s(cv, sw, "pred", pred->name);
    rt__tf_attr_ilist(cv, sw, "roi", o->sw_roi, 3);
    rt__tf_attr_ilist(cv, sw, "scan_interval", o->sw_interval, 3);
    rt__tf_attr_f(cv, sw, "overlap", o->sw_overlap);
    rt__tf_attr_s(cv, sw, "blend", o->sw_gaussian ? "gaussian" : "constant");
    rt__tf_attr_f(cv, sw, "sigma_scale", o->sw_sigma_scale > 0 ? o->sw_sigma_scale : 0.125f);
    rt__tf_attr_i(cv, sw, "sw_batch", o->sw_batch > 0 ? o->sw_batch : 1);
    rt__tf_attr_s(cv, sw, "data_format", ndhwc ? "NDHWC" : "NCDHW");
    if (c > 0) rt__tf_attr_i(cv, sw, "channels", c);
    *src = sw->name;
    if (o->spacing[0] > 0) {
        /* Back to the series' own grid (DcmDecodeVolume's geometry output). */
        Tensorflow__NodeDef *bk =
            rt__tf_node(cv, "_DcmResampleBack", rt__ox_printf(cv, "%s/resample_back", name));
        rt__tf_input(cv, bk, sw->name);
        rt__tf_input(cv, bk, rt__ox_printf(cv, "%s:1", cv->sw_volume));
        rt__tf_attr_flist(cv, bk, "spacing", o->spacing, 3);
        rt__tf_attr_s(cv, bk, "data_format", ndhwc ? "NDHWC" : "NCDHW");
        *src = bk->name;
    }
    *rank = 5;
    for (int a = 0; a < 5; a++) dims[a] = -1;
    dims[0] = 1;
    dims[cx] = c;
    if (!o->sw_argmax) return MS_OK;
    /* Labels: ArgMax over the channels (the first maximum, as numpy), uint8. */
    const char *ln = rt__ox_printf(cv, "%s_labels", name);
    Tensorflow__NodeDef *am = rt__tf_node(cv, "ArgMax", rt__ox_printf(cv, "%s/argmax", ln));
    rt__tf_input(cv, am, *src);
    rt__tf_input(cv, am, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", ln), cx));
    rt__tf_attr_type(cv, am, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, am, "Tidx", RT_DT_INT32);
    rt__tf_attr_type(cv, am, "output_type", RT_DT_INT32);
    Tensorflow__NodeDef *cast = rt__tf_node(cv, "Cast", ln);
    rt__tf_input(cv, cast, am->name);
    rt__tf_attr_type(cv, cast, "SrcT", RT_DT_INT32);
    rt__tf_attr_type(cv, cast, "DstT", RT_DT_UINT8);
    int64_t ld[4] = {1, -1, -1, -1};
    *labels = rt__ox_alloc(cv, sizeof(**labels));
    tensorflow__signature_def__outputs_entry__init(*labels);
    (*labels)->key = rt__ox_strdup(cv, ln);
    (*labels)->value = tensor_info(cv, cast->name, RT_DT_UINT8, 4, ld);
    return MS_OK;
}

/* Drops the main graph's nodes that no signature output needs;
 * Placeholders stay (the signature's inputs). */
static void prune_dead(rt__ox_conv *cv, const Tensorflow__SignatureDef *sig) {
    const char **roots = rt__ox_alloc(cv, (sig->n_outputs + 2) * sizeof(*roots));
    size_t nroots = 0;
    for (size_t i = 0; i < sig->n_outputs; i++)
        roots[nroots++] = sig->outputs[i]->value->name;
    /* fetched by the _SlidingWindow node, not by an edge */
    if (cv->sw_pred != NULL) roots[nroots++] = cv->sw_pred;
    rt__ox_prune(cv, cv->nodes, &cv->nnodes, roots, nroots);
}

ms_status rt_onnx_convert(const char *onnx_path, const rt_onnx_opts *opts, uint8_t **pb,
                          size_t *pb_len) {
    uint8_t *data = NULL;
    size_t len = 0;
    ms_status st = read_whole(onnx_path, &data, &len);
    if (st != MS_OK) return st;
    char *dir = strdup(onnx_path);
    if (dir == NULL) {
        free(data);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    st = rt_onnx_convert_mem(data, len, slash ? dir : ".", onnx_path, opts, pb, pb_len);
    free(dir);
    free(data);
    return st;
}

ms_status rt_onnx_convert_mem(const uint8_t *data, size_t len, const char *model_dir,
                              const char *what, const rt_onnx_opts *opts, uint8_t **pb,
                              size_t *pb_len) {
    static const rt_onnx_opts no_opts;
    const char *volatile onnx_path = what ? what : "ONNX model";
    ms_status st;
    *pb = NULL;
    *pb_len = 0;
    if ((st = ms_wire_check(data, len, MS_WIRE_MAX_DEPTH)) != MS_OK)
        return ms_errwrap(st, "%s", onnx_path);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (m == NULL)
        return ms_errf(MS_EINVAL, "%s: not a valid ONNX model (protobuf parse failed)", onnx_path);

    /* volatile: read after a longjmp back here. */
    rt__ox_conv *volatile cv = calloc(1, sizeof(rt__ox_conv));
    if (cv == NULL) {
        onnx__model_proto__free_unpacked(m, NULL);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    if (setjmp(cv->oom) != 0) {
        st = ms_errf(MS_ENOMEM, "%s: out of memory while converting", onnx_path);
        goto done;
    }
    cv->opts = opts ? opts : &no_opts;
    cv->convert_from = rt__ox_convert_from;
    cv->nhwc = !cv->opts->tf_nchw;
    cv->model_dir = model_dir ? rt__ox_strdup(cv, model_dir) : NULL;
    cv->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o->domain == NULL || o->domain[0] == '\0' || strcmp(o->domain, "ai.onnx") == 0)
            cv->opset = o->has_version ? o->version : -1;
    }
    if (cv->opset < 0) {
        st = ms_errf(MS_EINVAL, "%s: no opset_import for the default ONNX domain", onnx_path);
        goto done;
    }
    /* Each op is checked at this opset by rt__ox_check_version. */
    if (cv->opset < 1 || cv->opset > RT_ONNX_MAX_OPSET) {
        st = ms_errf(MS_ENOTSUP, "%s: opset %lld is not supported (1-%d, per op: docs/onnx.md)",
                     onnx_path, (long long)cv->opset, RT_ONNX_MAX_OPSET);
        goto done;
    }

    Tensorflow__SignatureDef *sig = rt__ox_alloc(cv, sizeof(*sig));
    tensorflow__signature_def__init(sig);
    if ((st = convert_graph(cv, m, sig)) != MS_OK) {
        ms_errwrap(st, "%s", onnx_path);
        goto done;
    }
    rt__ox_fuse(cv);
    prune_dead(cv, sig);

    Tensorflow__GraphDef *gd = rt__ox_alloc(cv, sizeof(*gd));
    tensorflow__graph_def__init(gd);
    gd->n_node = cv->nnodes;
    gd->node = cv->nodes;
    gd->versions = rt__ox_alloc(cv, sizeof(*gd->versions));
    tensorflow__version_def__init(gd->versions);
    gd->versions->producer = 1087;
    if (cv->nfuncs > 0) {
        gd->library = rt__ox_alloc(cv, sizeof(*gd->library));
        tensorflow__function_def_library__init(gd->library);
        gd->library->n_function = cv->nfuncs;
        gd->library->function = cv->funcs;
    }

    Tensorflow__MetaGraphDef__MetaInfoDef *mi = rt__ox_alloc(cv, sizeof(*mi));
    tensorflow__meta_graph_def__meta_info_def__init(mi);
    mi->n_tags = 1;
    mi->tags = rt__ox_alloc(cv, sizeof(char *));
    mi->tags[0] = rt__ox_strdup(cv, "serve");
    mi->tensorflow_version = rt__ox_strdup(cv, "dcmserve-import-onnx");
    if (cv->dicom_used) mi->stripped_op_list = dicom_oplist(cv);

    Tensorflow__MetaGraphDef__SignatureDefEntry *se = rt__ox_alloc(cv, sizeof(*se));
    tensorflow__meta_graph_def__signature_def_entry__init(se);
    se->key = rt__ox_strdup(cv, "serving_default");
    se->value = sig;

    Tensorflow__MetaGraphDef *mg = rt__ox_alloc(cv, sizeof(*mg));
    tensorflow__meta_graph_def__init(mg);
    mg->meta_info_def = mi;
    mg->graph_def = gd;
    mg->n_signature_def = 1;
    mg->signature_def = rt__ox_alloc(cv, sizeof(*mg->signature_def));
    mg->signature_def[0] = se;

    Tensorflow__SavedModel sm = TENSORFLOW__SAVED_MODEL__INIT;
    sm.saved_model_schema_version = 1;
    sm.n_meta_graphs = 1;
    sm.meta_graphs = rt__ox_alloc(cv, sizeof(*sm.meta_graphs));
    sm.meta_graphs[0] = mg;

    size_t n = tensorflow__saved_model__get_packed_size(&sm);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory (%zu-byte SavedModel)", n);
        goto done;
    }
    tensorflow__saved_model__pack(&sm, buf);
    MS_DEBUG("import-onnx: %s: opset %lld, %zu ONNX nodes -> %zu TF nodes, %zu bytes", onnx_path,
             (long long)cv->opset, m->graph->n_node, cv->nnodes, n);
    *pb = buf;
    *pb_len = n;
    st = MS_OK;
done:
    rt__ox_arena_free(cv);
    free(cv);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

/* mkdir -p */
static ms_status make_dirs(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return ms_errf(MS_EINVAL, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ms_errf(MS_EINVAL, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return ms_errf(MS_EINVAL, "cannot create %s: %s", buf, strerror(errno));
    return MS_OK;
}

ms_status rt_onnx_import(const char *onnx_path, const char *export_dir, const rt_onnx_opts *opts) {
    uint8_t *pb = NULL;
    size_t n = 0;
    ms_status st = rt_onnx_convert(onnx_path, opts, &pb, &n);
    if (st != MS_OK) return st;
    char path[4096];
    if ((st = make_dirs(export_dir)) != MS_OK) goto out;
    snprintf(path, sizeof path, "%s/variables", export_dir);
    if ((st = make_dirs(path)) != MS_OK) goto out;
    /* An empty variables bundle (weights are Consts), as TensorFlow writes for
     * a model without variables: loaders that wait for variables.index to be
     * complete (the model manager) then accept the folder. */
    snprintf(path, sizeof path, "%s/variables/variables", export_dir);
    rt_bundle_writer *bw = NULL;
    if ((st = rt_bundle_writer_new(path, &bw)) != MS_OK ||
        (st = rt_bundle_writer_finish(bw)) != MS_OK) {
        ms_errwrap(st, "writing %s", path);
        goto out;
    }
    /* Write to a temporary name and rename, so a server polling the folder
     * never sees half a file. */
    snprintf(path, sizeof path, "%s/saved_model.pb.tmp", export_dir);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        st = ms_errf(MS_EINVAL, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    int ok = fwrite(pb, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    char final[4096];
    snprintf(final, sizeof final, "%s/saved_model.pb", export_dir);
    if (!ok || rename(path, final) != 0) {
        st = ms_errf(MS_EINVAL, "cannot write %s: %s", final, strerror(errno));
        remove(path);
    }
out:
    free(pb);
    return st;
}
