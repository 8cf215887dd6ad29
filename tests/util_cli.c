/* util_cli.c - helpers for the signature / .npy / CLI Check tests. */
#include "util_cli.h"
#include "util_bundle.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *util_cli_model_dir(const char *rel, char *buf, size_t n) {
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "savedmodels/%s", rel);
    return ut_data_path(tmp, buf, n);
}

char *util_cli_tmpdir(char *buf, size_t n) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, n, "%s/dcmcli.XXXXXX", t && t[0] ? t : "/tmp");
    ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp %s failed", buf);
    return buf;
}

void util_cli_rmtree(const char *dir) {
    char cmd[4200];
    if (dir == NULL || dir[0] == '\0') return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

rt_tensor *util_cli_tensor(rt_dtype dt, int rank, const int64_t *dims, const void *vals) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    if (vals != NULL && rt_tensor_nbytes(t) > 0) memcpy(t->data, vals, rt_tensor_nbytes(t));
    return t;
}

int util_cli_python(const char *dir, const char *script) {
    char path[4096], cmd[8400];
    snprintf(path, sizeof(path), "%s/script.py", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cd '%s' && /usr/bin/python3 script.py", dir);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

char *util_cli_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap + 1);
    while (b != NULL) {
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *nb = realloc(b, cap * 2 + 1);
        if (nb == NULL) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b == NULL) return NULL;
    b[len] = '\0';
    if (n) *n = len;
    return b;
}

/* ---- hand-made SavedModels ---- */

#define SM_CAP 64

struct util_sm {
    void **ptrs;
    size_t n, cap;
    Tensorflow__SavedModel sm;
    Tensorflow__MetaGraphDef *mg;
};

static void *sm_alloc(util_sm *sm, size_t size) {
    if (sm->n == sm->cap) {
        sm->cap = sm->cap ? sm->cap * 2 : 256;
        sm->ptrs = realloc(sm->ptrs, sm->cap * sizeof(*sm->ptrs));
        ck_assert_ptr_nonnull(sm->ptrs);
    }
    void *p = calloc(1, size);
    ck_assert_ptr_nonnull(p);
    sm->ptrs[sm->n++] = p;
    return p;
}

static char *sm_str(util_sm *sm, const char *s) {
    char *p = sm_alloc(sm, strlen(s) + 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

util_sm *util_sm_new(void) {
    util_sm *sm = calloc(1, sizeof(*sm));
    ck_assert_ptr_nonnull(sm);
    tensorflow__saved_model__init(&sm->sm);
    sm->sm.saved_model_schema_version = 1;
    sm->mg = sm_alloc(sm, sizeof(*sm->mg));
    tensorflow__meta_graph_def__init(sm->mg);
    sm->sm.n_meta_graphs = 1;
    sm->sm.meta_graphs = sm_alloc(sm, sizeof(*sm->sm.meta_graphs));
    sm->sm.meta_graphs[0] = sm->mg;
    Tensorflow__MetaGraphDef__MetaInfoDef *mi = sm_alloc(sm, sizeof(*mi));
    tensorflow__meta_graph_def__meta_info_def__init(mi);
    mi->n_tags = 1;
    mi->tags = sm_alloc(sm, sizeof(char *));
    mi->tags[0] = sm_str(sm, "serve");
    sm->mg->meta_info_def = mi;
    Tensorflow__GraphDef *g = sm_alloc(sm, sizeof(*g));
    tensorflow__graph_def__init(g);
    g->node = sm_alloc(sm, SM_CAP * sizeof(*g->node));
    sm->mg->graph_def = g;
    sm->mg->signature_def = sm_alloc(sm, SM_CAP * sizeof(*sm->mg->signature_def));
    return sm;
}

void util_sm_free(util_sm *sm) {
    for (size_t i = 0; i < sm->n; i++) free(sm->ptrs[i]);
    free(sm->ptrs);
    free(sm);
}

Tensorflow__MetaGraphDef *util_sm_meta_graph(util_sm *sm) { return sm->mg; }

Tensorflow__NodeDef *util_sm_node(util_sm *sm, const char *name, const char *op,
                                  const char *const *inputs) {
    Tensorflow__GraphDef *g = sm->mg->graph_def;
    ck_assert_uint_lt(g->n_node, SM_CAP);
    Tensorflow__NodeDef *n = sm_alloc(sm, sizeof(*n));
    tensorflow__node_def__init(n);
    n->name = sm_str(sm, name);
    n->op = sm_str(sm, op);
    size_t ni = 0;
    while (inputs && inputs[ni]) ni++;
    n->n_input = ni;
    n->input = sm_alloc(sm, (ni + 1) * sizeof(char *));
    for (size_t i = 0; i < ni; i++) n->input[i] = sm_str(sm, inputs[i]);
    n->attr = sm_alloc(sm, 16 * sizeof(*n->attr));
    g->node[g->n_node++] = n;
    return n;
}

static Tensorflow__AttrValue *add_attr(util_sm *sm, Tensorflow__NodeDef *n, const char *key) {
    ck_assert_uint_lt(n->n_attr, 16);
    Tensorflow__NodeDef__AttrEntry *e = sm_alloc(sm, sizeof(*e));
    tensorflow__node_def__attr_entry__init(e);
    e->key = sm_str(sm, key);
    e->value = sm_alloc(sm, sizeof(*e->value));
    tensorflow__attr_value__init(e->value);
    n->attr[n->n_attr++] = e;
    return e->value;
}

void util_sm_attr_type(util_sm *sm, Tensorflow__NodeDef *n, const char *key, rt_dtype dt) {
    Tensorflow__AttrValue *v = add_attr(sm, n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = (Tensorflow__DataType)dt;
}

static Tensorflow__TensorShapeProto *make_shape(util_sm *sm, int rank, const int64_t *dims) {
    Tensorflow__TensorShapeProto *s = sm_alloc(sm, sizeof(*s));
    tensorflow__tensor_shape_proto__init(s);
    if (rank < 0) {
        s->unknown_rank = 1;
        return s;
    }
    s->n_dim = (size_t)rank;
    s->dim = sm_alloc(sm, ((size_t)rank + 1) * sizeof(*s->dim));
    for (int i = 0; i < rank; i++) {
        s->dim[i] = sm_alloc(sm, sizeof(*s->dim[i]));
        tensorflow__tensor_shape_proto__dim__init(s->dim[i]);
        s->dim[i]->size = dims[i];
    }
    return s;
}

void util_sm_attr_shape(util_sm *sm, Tensorflow__NodeDef *n, const char *key, int rank,
                        const int64_t *dims) {
    Tensorflow__AttrValue *v = add_attr(sm, n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    v->shape = make_shape(sm, rank, dims);
}

static Tensorflow__TensorProto *make_f32(util_sm *sm, int rank, const int64_t *dims,
                                         const float *vals, int content) {
    Tensorflow__TensorProto *t = sm_alloc(sm, sizeof(*t));
    tensorflow__tensor_proto__init(t);
    t->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    t->tensor_shape = make_shape(sm, rank, dims);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    if (content) {
        t->tensor_content.len = n * sizeof(float);
        t->tensor_content.data = sm_alloc(sm, n * sizeof(float) + 1);
        memcpy(t->tensor_content.data, vals, n * sizeof(float));
    } else {
        t->n_float_val = n;
        t->float_val = sm_alloc(sm, (n + 1) * sizeof(float));
        memcpy(t->float_val, vals, n * sizeof(float));
    }
    return t;
}

void util_sm_attr_f32(util_sm *sm, Tensorflow__NodeDef *n, const char *key, int rank,
                      const int64_t *dims, const float *vals) {
    Tensorflow__AttrValue *v = add_attr(sm, n, key);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v->tensor = make_f32(sm, rank, dims, vals, 1);
}

Tensorflow__SignatureDef *util_sm_sig(util_sm *sm, const char *key, const char *method) {
    Tensorflow__MetaGraphDef *mg = sm->mg;
    ck_assert_uint_lt(mg->n_signature_def, SM_CAP);
    Tensorflow__MetaGraphDef__SignatureDefEntry *e = sm_alloc(sm, sizeof(*e));
    tensorflow__meta_graph_def__signature_def_entry__init(e);
    e->key = sm_str(sm, key);
    Tensorflow__SignatureDef *sd = sm_alloc(sm, sizeof(*sd));
    tensorflow__signature_def__init(sd);
    sd->method_name = sm_str(sm, method);
    sd->inputs = sm_alloc(sm, 16 * sizeof(*sd->inputs));
    sd->outputs = sm_alloc(sm, 16 * sizeof(*sd->outputs));
    sd->defaults = sm_alloc(sm, 16 * sizeof(*sd->defaults));
    e->value = sd;
    mg->signature_def[mg->n_signature_def++] = e;
    return sd;
}

static Tensorflow__TensorInfo *make_info(util_sm *sm, const char *tensor, int dtype, int rank,
                                         const int64_t *dims) {
    Tensorflow__TensorInfo *ti = sm_alloc(sm, sizeof(*ti));
    tensorflow__tensor_info__init(ti);
    ti->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
    ti->name = sm_str(sm, tensor);
    ti->dtype = (Tensorflow__DataType)dtype;
    if (rank >= -1) ti->tensor_shape = make_shape(sm, rank, dims);
    return ti;
}

void util_sm_sig_input(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key,
                       const char *tensor, int dtype, int rank, const int64_t *dims) {
    ck_assert_uint_lt(sd->n_inputs, 16);
    Tensorflow__SignatureDef__InputsEntry *e = sm_alloc(sm, sizeof(*e));
    tensorflow__signature_def__inputs_entry__init(e);
    e->key = sm_str(sm, key);
    e->value = make_info(sm, tensor, dtype, rank, dims);
    sd->inputs[sd->n_inputs++] = e;
}

void util_sm_sig_output(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key,
                        const char *tensor, int dtype, int rank, const int64_t *dims) {
    ck_assert_uint_lt(sd->n_outputs, 16);
    Tensorflow__SignatureDef__OutputsEntry *e = sm_alloc(sm, sizeof(*e));
    tensorflow__signature_def__outputs_entry__init(e);
    e->key = sm_str(sm, key);
    e->value = make_info(sm, tensor, dtype, rank, dims);
    sd->outputs[sd->n_outputs++] = e;
}

void util_sm_sig_default_f32(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key, int rank,
                             const int64_t *dims, const float *vals) {
    ck_assert_uint_lt(sd->n_defaults, 16);
    Tensorflow__SignatureDef__DefaultsEntry *e = sm_alloc(sm, sizeof(*e));
    tensorflow__signature_def__defaults_entry__init(e);
    e->key = sm_str(sm, key);
    e->value = make_f32(sm, rank, dims, vals, 0);
    sd->defaults[sd->n_defaults++] = e;
}

void util_sm_write(util_sm *sm, const char *dir) {
    size_t n = tensorflow__saved_model__get_packed_size(&sm->sm);
    uint8_t *b = malloc(n + 1);
    ck_assert_ptr_nonnull(b);
    tensorflow__saved_model__pack(&sm->sm, b);
    char path[4096];
    snprintf(path, sizeof(path), "%s/saved_model.pb", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}
