/* fuzz_example.c - libFuzzer target: the tf.Example wire reader
 * (runtime/graph/rt_example.c) through its three ops, ParseExample,
 * ParseExampleV2 and ParseSingleExample, as a Classify / Regress / Predict
 * client's serialized strings reach them. Three dense features are asked
 * for: "x" float of shape [w] (w from the input), "id" int64 [1] and
 * "s" string [1], each with or without a default.
 *
 * Input: byte 0 picks the op (bits 0-1), whether the defaults are given
 * (bit 2) and w = bits 3-5; byte 1 is the batch size (1-4) for the batched
 * ops; the rest is cut into that many serialized examples at 0xff bytes
 * (ParseSingleExample takes it whole). A crash, leak or sanitizer report is
 * a finding; errors are expected.
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_example CORPUS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_ctx.h"
#include "rt_graph.h"
#include "rt_ops.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NDENSE 4 /* entries below; the ops use the first 3 */

static Tensorflow__TensorShapeProto__Dim g_dim[NDENSE];
static Tensorflow__TensorShapeProto__Dim *g_dimp[NDENSE];
static Tensorflow__TensorShapeProto g_shape[NDENSE];
static Tensorflow__TensorShapeProto *g_shapep[NDENSE];
static Tensorflow__DataType g_types[NDENSE] = {TENSORFLOW__DATA_TYPE__DT_FLOAT,
                                               TENSORFLOW__DATA_TYPE__DT_INT64,
                                               TENSORFLOW__DATA_TYPE__DT_STRING};
static ProtobufCBinaryData g_keys[NDENSE] = {{1, (uint8_t *)"x"}, {2, (uint8_t *)"id"},
                                             {1, (uint8_t *)"s"}};

/* NodeDef attributes of one op; `w` is x's only dimension. */
static void build_node(Tensorflow__NodeDef *d, Tensorflow__NodeDef__AttrEntry *ents,
                       Tensorflow__NodeDef__AttrEntry **entp, Tensorflow__AttrValue *vals,
                       Tensorflow__AttrValue__ListValue *lists, int op, int64_t w) {
    static const char *const ops[3] = {"ParseExample", "ParseExampleV2", "ParseSingleExample"};
    Tensorflow__NodeDef d0 = TENSORFLOW__NODE_DEF__INIT;
    *d = d0;
    d->name = "fuzz_parse";
    d->op = (char *)ops[op];
    for (int j = 0; j < 3; j++) {
        Tensorflow__TensorShapeProto__Dim dm = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
        Tensorflow__TensorShapeProto sp = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
        g_dim[j] = dm;
        g_dim[j].size = j == 0 ? w : 1;
        g_dimp[j] = &g_dim[j];
        g_shape[j] = sp;
        g_shape[j].n_dim = 1;
        g_shape[j].dim = &g_dimp[j];
        g_shapep[j] = &g_shape[j];
    }
    int n = 0;
    for (int k = 0; k < 5; k++) {
        Tensorflow__NodeDef__AttrEntry e0 = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT;
        Tensorflow__AttrValue v0 = TENSORFLOW__ATTR_VALUE__INIT;
        Tensorflow__AttrValue__ListValue l0 = TENSORFLOW__ATTR_VALUE__LIST_VALUE__INIT;
        ents[k] = e0;
        vals[k] = v0;
        lists[k] = l0;
        ents[k].value = &vals[k];
    }
    /* Tdense and dense_shapes: every op */
    ents[n].key = "Tdense";
    vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    vals[n].list = &lists[n];
    lists[n].n_type = 3;
    lists[n].type = g_types;
    n++;
    ents[n].key = "dense_shapes";
    vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    vals[n].list = &lists[n];
    lists[n].n_shape = 3;
    lists[n].shape = g_shapep;
    n++;
    if (op == 0) {
        ents[n].key = "Nsparse";
        vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        vals[n++].i = 0;
        ents[n].key = "Ndense";
        vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        vals[n++].i = 3;
    } else {
        ents[n].key = "num_sparse";
        vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        vals[n++].i = 0;
        if (op == 2) {
            ents[n].key = "dense_keys";
            vals[n].value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
            vals[n].list = &lists[n];
            lists[n].n_s = 3;
            lists[n].s = g_keys;
            n++;
        }
    }
    for (int k = 0; k < n; k++)
        entp[k] = &ents[k];
    d->n_attr = (size_t)n;
    d->attr = entp;
}

static rt_tensor *strings_1d(const rt_str *v, int n) {
    rt_shape s = {.rank = 1, .dim = {n}};
    rt_tensor *t = NULL;
    return rt_tensor_new_strings(&s, v, &t) == MS_OK ? t : NULL;
}

static rt_tensor *key1(int j) {
    rt_str v = {g_keys[j].data, g_keys[j].len};
    return strings_1d(&v, 1);
}

/* The defaults: empty (each feature required) or x = w floats, id = [7],
 * s = ["d"]. */
static rt_tensor *dflt(int j, int given, int64_t w) {
    rt_shape s = {.rank = 1, .dim = {given ? (j == 0 ? w : 1) : 0}};
    rt_tensor *t = NULL;
    if (j == 2) {
        rt_str v = {(const uint8_t *)"d", 1};
        return strings_1d(&v, given ? 1 : 0);
    }
    if (rt_tensor_new(j == 0 ? RT_DT_FLOAT : RT_DT_INT64, &s, &t) != MS_OK) return NULL;
    if (given && j == 0)
        for (int64_t i = 0; i < w; i++)
            ((float *)t->data)[i] = (float)i;
    if (given && j == 1) ((int64_t *)t->data)[0] = 7;
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int op = data[0] & 3;
    if (op == 3) op = 0;
    int given = (data[0] >> 2) & 1;
    int64_t w = (data[0] >> 3) & 7;
    int batch = op == 2 ? 1 : 1 + data[1] % 4;
    const uint8_t *p = data + 2, *end = data + size;
    rt_str ex[4];
    for (int b = 0; b < batch; b++) { /* cut at 0xff; the last takes the rest */
        const uint8_t *q = p;
        while (b + 1 < batch && q < end && *q != 0xff)
            q++;
        if (b + 1 == batch) q = end;
        ex[b] = (rt_str){p, (size_t)(q - p)};
        p = q < end ? q + 1 : end;
    }
    Tensorflow__NodeDef def;
    Tensorflow__NodeDef__AttrEntry ents[5], *entp[5];
    Tensorflow__AttrValue vals[5];
    Tensorflow__AttrValue__ListValue lists[5];
    build_node(&def, ents, entp, vals, lists, op, w);

    rt_tensor *in[12] = {NULL};
    int nin = 0, ok = 1;
    rt_shape scalar = {.rank = 0};
    if (op == 2) {
        rt_tensor *t = NULL;
        ok = rt_tensor_new_strings(&scalar, ex, &t) == MS_OK;
        in[nin++] = t;
    } else {
        in[nin++] = strings_1d(ex, batch);
        in[nin++] = strings_1d(NULL, 0); /* names */
    }
    if (op == 0) {
        for (int j = 0; j < 3; j++)
            in[nin++] = key1(j);
    } else if (op == 1) {
        rt_str k[3];
        for (int j = 0; j < 3; j++)
            k[j] = (rt_str){g_keys[j].data, g_keys[j].len};
        in[nin++] = strings_1d(NULL, 0); /* sparse_keys */
        in[nin++] = strings_1d(k, 3);    /* dense_keys */
        in[nin++] = strings_1d(NULL, 0); /* ragged_keys */
    }
    for (int j = 0; j < 3; j++)
        in[nin++] = dflt(j, given, w);
    for (int i = 0; i < nin; i++)
        if (in[i] == NULL) ok = 0;

    if (ok) {
        const kn_kernel *k = NULL;
        for (const kn_kernel *e = rt_ops_example_kernels; e->op; e++)
            if (strcmp(e->op, def.op) == 0) k = e;
        rt_tensor *out[3] = {NULL};
        kn_node kn = {.name = def.name, .op = def.op, .def = &def, .attrs = &rt_nodedef_attrs,
                      .nin = nin, .nout = 3};
        kn_ctx ctx = {.nthreads = 1};
        if (k != NULL && k->compute(&ctx, &kn, NULL, in, out) == MS_OK) {
            for (int j = 0; j < 3; j++) /* every output must be whole */
                if (out[j] == NULL) abort();
        }
        for (int j = 0; j < 3; j++)
            rt_tensor_unref(out[j]);
    }
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i]);
    return 0;
}
