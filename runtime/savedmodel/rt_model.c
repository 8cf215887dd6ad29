/* rt_model.c - loading a SavedModel version and running its graph. */
#include "rt_model.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_file.h"
#include "ms_log.h"
#include "ms_wire.h"
#include "dcm_ops.h"
#include "rt_bundle.h"
#include "rt_exec.h"
#include "rt_fuse.h"
#include "rt_objgraph.h"
#include "rt_opscan.h"
#include "rt_graph.h"
#include "rt_ops.h"
#include "rt_tensor_proto.h"
#include "rt_tf1loop.h"

#define SAVED_MODEL_MAX_BYTES RT_SAVED_MODEL_MAX_BYTES

typedef struct plan_entry {
    char *key;
    rt_plan *plan;
    struct plan_entry *next;
} plan_entry;

struct rt_model {
    atomic_int refs;
    char *dir;
    ms_dir root;                        /* the version folder: every file is read beneath it */
    rt_model_format fmt;                /* saved_model.pb, or model.onnx converted at load */
    Tensorflow__SavedModel *sm;
    const Tensorflow__MetaGraphDef *mg; /* inside sm */
    rt_graph *g;
    kn_backend *be;                     /* borrowed */
    rt_vars vars;
    kn_pool *pool;
    pthread_mutex_t plan_mu;            /* plan cache and node preparation */
    plan_entry *plans;
    pthread_mutex_t state_mu;           /* serialises runs that touch variables */
};

const kn_kernel *const rt_model_host_ops[] = {rt_ops_core_kernels, rt_ops_restore_kernels,
                                              dcm_ops_kernels, rt_ops_table_kernels,
                                              rt_ops_control_kernels, rt_ops_tensorlist_kernels,
                                              rt_ops_example_kernels, rt_ops_resource_kernels,
                                              rt_ops_sw_kernels, NULL};

/* ---- reading saved_model.pb, or converting model.onnx ---- */

static _Atomic(rt_model_onnx_converter) g_onnx_converter;

void rt_model_set_onnx_converter(rt_model_onnx_converter fn) {
    atomic_store(&g_onnx_converter, fn);
}

/* 1 when `rel` names something beneath root, or something the read will
 * refuse with its reason (a link leaving the folder); 0 when absent. */
static int present(const ms_dir *root, const char *rel) {
    ms_status st = ms_file_find(root, rel);
    if (st != MS_OK) ms_err_clear();
    return st != MS_ENOTFOUND;
}

rt_model_format rt_model_dir_format(const ms_dir *root) {
    if (present(root, "saved_model.pb")) return RT_MODEL_FMT_SAVEDMODEL;
    if (present(root, RT_MODEL_ONNX_FILE)) return RT_MODEL_FMT_ONNX;
    return RT_MODEL_FMT_NONE;
}

/* model.onnx of root through the installed converter. */
static ms_status convert_onnx(const ms_dir *root, uint8_t **data, size_t *len) {
    rt_model_onnx_converter conv = atomic_load(&g_onnx_converter);
    if (conv == NULL)
        return ms_errf(MS_ENOTSUP, "%s: holds %s and no saved_model.pb, and this program has no "
                                   "ONNX importer (dcmserve serves model.onnx)",
                       root->path, RT_MODEL_ONNX_FILE);
    return conv(root, RT_MODEL_ONNX_FILE, data, len);
}

/* saved_model.pb of the folder root, read beneath it (ms_file.h), or
 * model.onnx converted (rt_model.h); *fmt says which. */
static ms_status read_savedmodel(const ms_dir *root, Tensorflow__SavedModel **out,
                                 rt_model_format *fmt) {
    const char *export_dir = root->path;
    const char *file = "saved_model.pb";
    uint8_t *data = NULL;
    size_t len = 0;
    ms_status st = ms_file_read(root, "saved_model.pb", SAVED_MODEL_MAX_BYTES, &data, &len);
    *fmt = RT_MODEL_FMT_SAVEDMODEL;
    if (st == MS_OK && present(root, RT_MODEL_ONNX_FILE))
        MS_WARN("%s: holds both saved_model.pb and %s; reading saved_model.pb, %s is ignored",
                export_dir, RT_MODEL_ONNX_FILE, RT_MODEL_ONNX_FILE);
    if (st == MS_ENOTFOUND && present(root, RT_MODEL_ONNX_FILE)) {
        ms_err_clear();
        *fmt = RT_MODEL_FMT_ONNX;
        file = RT_MODEL_ONNX_FILE " (converted)";
        /* the converter's messages name the file and the node */
        if ((st = convert_onnx(root, &data, &len)) != MS_OK) return st;
    }
    if (st == MS_ENOTFOUND) {
        if (ms_file_find(root, "saved_model.pbtxt") == MS_OK)
            return ms_errf(MS_ENOTSUP, "%s: text-format SavedModels (saved_model.pbtxt) are not "
                                       "supported; export saved_model.pb", export_dir);
        return ms_errf(MS_ENOTFOUND, "%s: no saved_model.pb (nor %s)", export_dir,
                       RT_MODEL_ONNX_FILE);
    }
    if (st != MS_OK) return ms_errwrap(st, "%s", export_dir);
    /* protobuf-c recurses once per nesting level: bound it before unpacking. */
    if ((st = ms_wire_check(data, len, MS_WIRE_MAX_DEPTH)) != MS_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", ms_errmsg());
        free(data);
        return ms_errf(st, "%s/%s: cannot parse SavedModel protobuf (%zu bytes): %s", export_dir,
                       file, len, why);
    }
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, len, data);
    free(data);
    if (sm == NULL)
        return ms_errf(MS_EINVAL, "%s/%s: cannot parse SavedModel protobuf (%zu "
                                  "bytes; truncated or corrupt)", export_dir, file, len);
    if (sm->n_meta_graphs == 0) {
        tensorflow__saved_model__free_unpacked(sm, NULL);
        return ms_errf(MS_EINVAL, "%s/%s: SavedModel has no MetaGraphDef", export_dir, file);
    }
    *out = sm;
    return MS_OK;
}

ms_status rt_savedmodel_read(const char *export_dir, Tensorflow__SavedModel **out) {
    ms_dir root;
    rt_model_format fmt;
    ms_status st = ms_dir_open(export_dir, &root);
    if (st == MS_ENOTFOUND) return ms_errf(MS_ENOTFOUND, "%s: no saved_model.pb", export_dir);
    if (st != MS_OK) return st;
    st = read_savedmodel(&root, out, &fmt);
    ms_dir_close(&root);
    return st;
}

/* ---- the load budget of Const broadcasts ---- */

static _Atomic uint64_t g_max_model_memory = RT_MODEL_MEMORY_DEFAULT;

void rt_model_set_max_memory(uint64_t bytes) {
    atomic_store(&g_max_model_memory, bytes);
}

/* Bytes a Const's value takes in memory beyond those its proto holds: all of
 * it when fewer values than elements are stored (a broadcast), else 0.
 * Saturates instead of overflowing (shapes come from the file). */
static uint64_t const_extra_bytes(const Tensorflow__TensorProto *p) {
    rt_shape sh;
    if (p == NULL || rt_shape_from_proto(p->tensor_shape, &sh) != MS_OK || sh.rank < 0) return 0;
    uint64_t n = 1;
    for (int i = 0; i < sh.rank; i++) {
        if (sh.dim[i] < 0) return 0;
        if (sh.dim[i] > 0 && n > UINT64_MAX / 64 / (uint64_t)sh.dim[i]) return UINT64_MAX / 2;
        n *= (uint64_t)sh.dim[i];
    }
    rt_dtype dt = (rt_dtype)p->dtype;
    uint64_t es = dt == RT_DT_STRING ? sizeof(rt_str) : rt_dtype_size(dt);
    if (es == 0) es = 1;
    uint64_t bytes = n * es;
    if (dt != RT_DT_STRING && p->tensor_content.len >= bytes) return 0;
    if (n <= 1) return 0;
    return bytes;
}

static void consts_sum(const Tensorflow__NodeDef *const *nodes, size_t n, uint64_t *sum,
                       uint64_t *largest, const char **which) {
    for (size_t i = 0; i < n; i++) {
        const Tensorflow__NodeDef *d = nodes[i];
        if (d->op == NULL || (strcmp(d->op, "Const") != 0 && strcmp(d->op, "HostConst") != 0))
            continue;
        for (size_t a = 0; a < d->n_attr; a++) {
            const Tensorflow__AttrValue *v = d->attr[a]->value;
            if (strcmp(d->attr[a]->key, "value") != 0 || v == NULL ||
                v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR)
                continue;
            uint64_t b = const_extra_bytes(v->tensor);
            *sum = *sum > UINT64_MAX - b ? UINT64_MAX : *sum + b;
            if (b > *largest) *largest = b, *which = d->name;
        }
    }
}

/* Charges every Const broadcast of mg to the load budget before anything is
 * built (rt_model.h). */
static ms_status consts_check(const Tensorflow__MetaGraphDef *mg) {
    uint64_t limit = atomic_load(&g_max_model_memory), sum = 0, largest = 0;
    const char *which = "";
    if (limit == 0 || mg->graph_def == NULL) return MS_OK;
    const Tensorflow__GraphDef *g = mg->graph_def;
    consts_sum((const Tensorflow__NodeDef *const *)g->node, g->n_node, &sum, &largest, &which);
    for (size_t f = 0; g->library && f < g->library->n_function; f++)
        consts_sum((const Tensorflow__NodeDef *const *)g->library->function[f]->node_def,
                   g->library->function[f]->n_node_def, &sum, &largest, &which);
    if (sum <= limit) return MS_OK;
    return ms_errf(MS_ENOMEM,
                   "the graph's broadcast Consts (a few values stored for a large shape) would "
                   "take %llu bytes in memory, past the load budget of %llu bytes "
                   "(--max_model_memory_bytes); the largest is node '%s' (%llu bytes); not loaded",
                   (unsigned long long)sum, (unsigned long long)limit, which ? which : "",
                   (unsigned long long)largest);
}

int rt_savedmodel_find_meta_graph(const Tensorflow__SavedModel *sm, const char *const *tags,
                                  int ntags) {
    for (size_t i = 0; i < sm->n_meta_graphs; i++) {
        const Tensorflow__MetaGraphDef__MetaInfoDef *mi = sm->meta_graphs[i]->meta_info_def;
        size_t nt = mi ? mi->n_tags : 0;
        int ok = 1;
        /* Equal as sets: every requested tag present, every present tag requested. */
        for (int a = 0; a < ntags && ok; a++) {
            int found = 0;
            for (size_t b = 0; b < nt && !found; b++) found = strcmp(tags[a], mi->tags[b]) == 0;
            ok = found;
        }
        for (size_t b = 0; b < nt && ok; b++) {
            int found = 0;
            for (int a = 0; a < ntags && !found; a++) found = strcmp(tags[a], mi->tags[b]) == 0;
            ok = found;
        }
        if (ok) return (int)i;
    }
    return -1;
}

static void tagsets_str(const Tensorflow__SavedModel *sm, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sm->n_meta_graphs && o + 2 < cap; i++) {
        const Tensorflow__MetaGraphDef__MetaInfoDef *mi = sm->meta_graphs[i]->meta_info_def;
        o += (size_t)snprintf(buf + o, cap - o, "%s{", i ? ", " : "");
        for (size_t t = 0; mi && t < mi->n_tags && o < cap; t++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", t ? ", " : "", mi->tags[t]);
        if (o < cap) o += (size_t)snprintf(buf + o, cap - o, "}");
    }
}

/* ---- plans ---- */

static void strip_port(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", name[0] == '^' ? name + 1 : name);
    size_t n = strlen(buf);
    if (n > 2 && strcmp(buf + n - 2, ":0") == 0) buf[n - 2] = '\0';
}

static ms_status get_plan(rt_model *m, const rt_feed *feeds, int nfeeds, const char *const *fetches,
                          int nfetches, const char *const *targets, int ntargets, rt_plan **out) {
    size_t klen = 16;
    for (int i = 0; i < nfeeds; i++) klen += strlen(feeds[i].name) + 1;
    for (int i = 0; i < nfetches; i++) klen += strlen(fetches[i]) + 1;
    for (int i = 0; i < ntargets; i++) klen += strlen(targets[i]) + 1;
    /* The lookup key lives on the stack; a new plan keeps a heap copy. */
    char kbuf[512];
    char *key = klen <= sizeof kbuf ? kbuf : malloc(klen);
    if (key == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    size_t o = 0;
    /* Looked up on every run: the key is built without the formatter. */
#define PUT_NAME(str)                  \
    do {                               \
        size_t l_ = strlen(str);       \
        memcpy(key + o, (str), l_);    \
        o += l_;                       \
        key[o++] = ',';                \
    } while (0)
    for (int i = 0; i < nfeeds; i++) PUT_NAME(feeds[i].name);
    key[o++] = '|';
    for (int i = 0; i < nfetches; i++) PUT_NAME(fetches[i]);
    key[o++] = '|';
    for (int i = 0; i < ntargets; i++) PUT_NAME(targets[i]);
#undef PUT_NAME
    key[o] = '\0';

    pthread_mutex_lock(&m->plan_mu);
    for (plan_entry *e = m->plans; e; e = e->next)
        if (strcmp(e->key, key) == 0) {
            *out = e->plan;
            pthread_mutex_unlock(&m->plan_mu);
            if (key != kbuf) free(key);
            return MS_OK;
        }
    ms_status st = MS_OK;
    rt_edge *fe = calloc((size_t)nfeeds + 1, sizeof(*fe));
    rt_edge *fo = calloc((size_t)nfetches + 1, sizeof(*fo));
    int *tg = calloc((size_t)ntargets + 1, sizeof(int));
    plan_entry *e = calloc(1, sizeof(*e));
    if (fe == NULL || fo == NULL || tg == NULL || e == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nfeeds && st == MS_OK; i++) {
        st = rt_graph_tensor(m->g, feeds[i].name, &fe[i]);
        if (st != MS_OK) st = ms_errwrap(st, "feed '%s'", feeds[i].name);
    }
    for (int i = 0; i < nfetches && st == MS_OK; i++) {
        st = rt_graph_tensor(m->g, fetches[i], &fo[i]);
        if (st != MS_OK) st = ms_errwrap(st, "fetch '%s'", fetches[i]);
    }
    for (int i = 0; i < ntargets && st == MS_OK; i++) {
        char nb[512];
        strip_port(targets[i], nb, sizeof nb);
        tg[i] = rt_graph_find(m->g, nb);
        if (tg[i] < 0) st = ms_errf(MS_ENOTFOUND, "target node '%s' not in the graph", nb);
    }
    char *kept = NULL; /* the plan's own key */
    if (st == MS_OK && (kept = key == kbuf ? strdup(kbuf) : key) == NULL)
        st = ms_errf(MS_ENOMEM, "out of memory");
    if (st == MS_OK) st = rt_plan_build(m->g, fe, nfeeds, fo, nfetches, tg, ntargets, &e->plan);
    if (st != MS_OK && kept != key) free(kept);
    if (st == MS_OK) {
        e->key = kept;
        key = NULL;
        e->next = m->plans;
        m->plans = e;
        *out = e->plan;
        e = NULL;
    }
done:
    pthread_mutex_unlock(&m->plan_mu);
    free(e);
    free(fe);
    free(fo);
    free(tg);
    if (key != kbuf) free(key);
    return st;
}

ms_status rt_model_run(rt_model *m, const rt_feed *feeds, int nfeeds, const char *const *fetches,
                       int nfetches, const char *const *targets, int ntargets,
                       const rt_run_opts *opts, rt_tensor **outs) {
    rt_plan *plan;
    ms_status st = get_plan(m, feeds, nfeeds, fetches, nfetches, targets, ntargets, &plan);
    if (st != MS_OK) return st;
    /* the feeds' tensors, on the stack for the usual few */
    rt_tensor *ftensors_s[64];
    rt_tensor **ftensors = nfeeds <= 64 ? ftensors_s : malloc(sizeof(*ftensors) * (size_t)nfeeds);
    if (ftensors == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (int i = 0; i < nfeeds; i++) ftensors[i] = feeds[i].tensor;
    kn_ctx ctx = {
        .pool = m->pool,
        .nthreads = m->be ? m->be->intra_op_threads : 1,
        .cancelled = opts ? opts->cancelled : NULL,
        .budget = opts ? opts->budget : NULL,
    };
    int stateful = rt_plan_stateful(plan);
    if (stateful) pthread_mutex_lock(&m->state_mu);
    st = rt_plan_run(plan, &ctx, &m->vars, ftensors, outs);
    if (st == MS_OK && stateful) {
        /* A fetched variable ref must not change when a later run assigns. */
        for (int i = 0; i < nfetches && st == MS_OK; i++) {
            rt_tensor *c;
            st = rt_tensor_clone(outs[i], &c);
            if (st == MS_OK) {
                rt_tensor_unref(outs[i]);
                outs[i] = c;
            }
        }
        if (st != MS_OK)
            for (int i = 0; i < nfetches; i++) {
                rt_tensor_unref(outs[i]);
                outs[i] = NULL;
            }
    }
    if (stateful) pthread_mutex_unlock(&m->state_mu);
    if (ftensors != ftensors_s) free(ftensors);
    return st;
}

/* ---- loading ---- */

static ms_status run_restore(rt_model *m) {
    const Tensorflow__SaverDef *sd = m->mg->saver_def;
    char prefix[4096];
    ms_status st = ms_file_find(&m->root, "variables");
    if (st == MS_ENOTFOUND) {
        ms_err_clear();
        MS_DEBUG("%s: no variables/ directory; nothing to restore", m->dir);
        return MS_OK;
    }
    if (st != MS_OK) return st; /* there, but outside the folder */
    if (sd == NULL || sd->restore_op_name == NULL || sd->restore_op_name[0] == '\0') {
        MS_DEBUG("%s: no saver_def; variables/ left unused", m->dir);
        return MS_OK;
    }
    if ((st = ms_file_find(&m->root, "variables/variables.index")) != MS_OK) return st;
    /* The saver's filename tensor gets the full path, as TensorFlow feeds it;
     * RestoreV2 maps it back inside the folder (rt_ops_restore.c). */
    snprintf(prefix, sizeof prefix, "%s/variables/variables", m->root.path);
    rt_tensor *fname;
    st = rt_tensor_scalar_string(prefix, strlen(prefix), &fname);
    if (st != MS_OK) return st;
    rt_feed feed = {sd->filename_tensor_name, fname};
    const char *target = sd->restore_op_name;
    st = rt_model_run(m, &feed, 1, NULL, 0, &target, 1, NULL, NULL);
    rt_tensor_unref(fname);
    if (st != MS_OK) return ms_errwrap(st, "restoring variables (%s)", target);
    return MS_OK;
}

/* TF2 variables the saver function does not restore (Keras 3 exports):
 * through the object graph (rt_objgraph.h). */
static ms_status restore_objgraph(rt_model *m) {
    int n = 0;
    ms_status st = rt_objgraph_restore(m->mg, m->g, "variables/variables", &m->vars, &n);
    if (st != MS_OK) return ms_errwrap(st, "restoring variables through the object graph");
    return MS_OK;
}

/* Runs the init op with each asset tensor fed "<dir>/assets/<filename>", as
 * TensorFlow's loader does (table initialisers read their files that way). */
static ms_status run_init(rt_model *m, const char *init) {
    const Tensorflow__MetaGraphDef *mg = m->mg;
    size_t na = mg->n_asset_file_def;
    rt_feed *feeds = calloc(na + 1, sizeof(*feeds));
    if (feeds == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    int nf = 0;
    ms_status st = MS_OK;
    for (size_t i = 0; i < na && st == MS_OK; i++) {
        const Tensorflow__AssetFileDef *a = mg->asset_file_def[i];
        if (a->tensor_info == NULL ||
            a->tensor_info->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME ||
            a->filename == NULL || strchr(a->filename, '/') != NULL)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/assets/%s", m->root.path, a->filename);
        st = rt_tensor_scalar_string(path, strlen(path), &feeds[nf].tensor);
        if (st == MS_OK) feeds[nf++].name = a->tensor_info->name;
    }
    if (st == MS_OK) st = rt_model_run(m, feeds, nf, NULL, 0, &init, 1, NULL, NULL);
    for (int i = 0; i < nf; i++) rt_tensor_unref(feeds[i].tensor);
    free(feeds);
    return st;
}

static const char *init_op_name(const Tensorflow__MetaGraphDef *mg) {
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, "__saved_model_init_op") == 0) {
            const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
            if (sd && sd->n_outputs > 0 && sd->outputs[0]->value &&
                sd->outputs[0]->value->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
                return sd->outputs[0]->value->name;
        }
    static const char *const keys[] = {"saved_model_main_op", "legacy_init_op"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < mg->n_collection_def; i++) {
            const Tensorflow__CollectionDef *c = mg->collection_def[i]->value;
            if (strcmp(mg->collection_def[i]->key, keys[k]) == 0 && c &&
                c->kind_case == TENSORFLOW__COLLECTION_DEF__KIND_NODE_LIST &&
                c->node_list->n_value > 0)
                return c->node_list->value[0];
        }
    return NULL;
}

/* Replaces the first unsupported op's message with one that lists every
 * unsupported op the signature needs, with its nodes (rt_opscan.h). */
static ms_status unsupported_list(rt_model *m, const char *const *fnames, int nf,
                                  const char *const *fetches, int no) {
    rt_opscan *s;
    char first[1024];
    snprintf(first, sizeof first, "%s", ms_errmsg());
    if (rt_opscan_named(m->g, fnames, nf, fetches, no, &s) != MS_OK)
        return ms_errf(MS_ENOTSUP, "%s", first);
    ms_status st = MS_ENOTSUP;
    if (s->nunsupported > 0) {
        char msg[1024];
        rt_opscan_message(s, msg, sizeof msg);
        st = ms_errf(MS_ENOTSUP, "%s", msg);
    } else {
        st = ms_errf(MS_ENOTSUP, "%s", first);
    }
    rt_opscan_free(s);
    return st;
}

/* Plans one signature and checks that every variable it reads has a value. */
static ms_status plan_one(rt_model *m, const Tensorflow__SignatureDef *sd) {
    /* every named input and output, however many the signature has */
    rt_feed *feeds = calloc(sd->n_inputs + 1, sizeof(*feeds));
    const char **fnames = calloc(sd->n_inputs + 1, sizeof(*fnames));
    const char **fetches = calloc(sd->n_outputs + 1, sizeof(*fetches));
    ms_status st = MS_OK;
    if (feeds == NULL || fnames == NULL || fetches == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int nf = 0, no = 0;
    for (size_t k = 0; k < sd->n_inputs; k++)
        if (sd->inputs[k]->value &&
            sd->inputs[k]->value->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME) {
            fnames[nf] = sd->inputs[k]->value->name;
            feeds[nf++] = (rt_feed){sd->inputs[k]->value->name, NULL};
        }
    for (size_t k = 0; k < sd->n_outputs; k++)
        if (sd->outputs[k]->value &&
            sd->outputs[k]->value->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
            fetches[no++] = sd->outputs[k]->value->name;
    rt_plan *p;
    st = get_plan(m, feeds, nf, fetches, no, NULL, 0, &p);
    if (st == MS_ENOTSUP)
        st = unsupported_list(m, fnames, nf, fetches, no);
    else if (st == MS_OK) /* every variable it reads must have a value now (rt_objgraph.h) */
        st = rt_objgraph_check_vars(m->g, &m->vars, fnames, nf, fetches, no);
done:
    free(feeds);
    free(fnames);
    free(fetches);
    return st;
}

ms_status rt_model_plan_signature(rt_model *m, const char *key) {
    for (size_t i = 0; i < m->mg->n_signature_def; i++)
        if (strcmp(m->mg->signature_def[i]->key, key) == 0 && m->mg->signature_def[i]->value)
            return plan_one(m, m->mg->signature_def[i]->value);
    return ms_errf(MS_ENOTFOUND, "no signature '%s'", key);
}

rt_graph *rt_model_graph(rt_model *m) {
    return m->g;
}

rt_vars *rt_model_vars(rt_model *m) {
    return &m->vars;
}

/* Builds the plan of every signature now, so that a missing kernel or an
 * unrestored variable shows at load. serving_default must work; another
 * signature that cannot plan is logged and answers its error when called;
 * one that reads a variable without a value fails the load. */
static ms_status plan_signatures(rt_model *m) {
    const Tensorflow__MetaGraphDef *mg = m->mg;
    for (size_t i = 0; i < mg->n_signature_def; i++) {
        const char *key = mg->signature_def[i]->key;
        const Tensorflow__SignatureDef *sd = mg->signature_def[i]->value;
        if (sd == NULL || strcmp(key, "__saved_model_init_op") == 0) continue;
        ms_status st = plan_one(m, sd);
        if (st == MS_OK) continue;
        if (strcmp(key, "serving_default") == 0 || strstr(ms_errmsg(), "no value after restore"))
            return ms_errwrap(st, "signature '%s'", key);
        MS_WARN("%s: signature '%s' cannot run: %s", m->dir, key, ms_errmsg());
        ms_err_clear();
    }
    return MS_OK;
}

static ms_status load(const char *export_dir, const char *const *tags, int ntags, kn_backend *be,
                      kn_backend *device, int plan, rt_model **out);

/* tf.py_function / tf.numpy_function export as these ops: a token naming a
 * Python function of the exporting process, which no server has. */
static int is_python_op(const char *op) {
    return op && (strcmp(op, "EagerPyFunc") == 0 || strcmp(op, "PyFunc") == 0 ||
                  strcmp(op, "PyFuncStateless") == 0);
}

/* MS_ENOTSUP naming the first node (of the graph, then of its functions)
 * that calls Python code: such a model can never serve. */
static ms_status refuse_python(const Tensorflow__MetaGraphDef *mg) {
    const Tensorflow__GraphDef *gd = mg->graph_def;
    const char *node = NULL, *op = NULL, *fn = NULL;
    for (size_t i = 0; gd && node == NULL && i < gd->n_node; i++)
        if (is_python_op(gd->node[i]->op)) node = gd->node[i]->name, op = gd->node[i]->op;
    const Tensorflow__FunctionDefLibrary *lib = gd ? gd->library : NULL;
    for (size_t f = 0; lib && node == NULL && f < lib->n_function; f++) {
        const Tensorflow__FunctionDef *fd = lib->function[f];
        for (size_t i = 0; node == NULL && i < fd->n_node_def; i++)
            if (is_python_op(fd->node_def[i]->op)) {
                node = fd->node_def[i]->name, op = fd->node_def[i]->op;
                fn = fd->signature ? fd->signature->name : "?";
            }
    }
    if (node == NULL) return MS_OK;
    return ms_errf(MS_ENOTSUP,
                   "node '%s%s%s' (%s) calls Python code (tf.py_function / tf.numpy_function) "
                   "that exists only in the process that exported the model, so no server can "
                   "run it; rewrite that function in TensorFlow ops before export",
                   fn ? fn : "", fn ? "/" : "", node, op);
}

ms_status rt_model_load(const char *export_dir, const char *const *tags, int ntags,
                        kn_backend *be, rt_model **out) {
    return load(export_dir, tags, ntags, be, NULL, 1, out);
}

ms_status rt_model_load_unplanned(const char *export_dir, const char *const *tags, int ntags,
                                  kn_backend *be, rt_model **out) {
    return load(export_dir, tags, ntags, be, NULL, 0, out);
}

ms_status rt_model_load_on(const char *export_dir, const char *const *tags, int ntags,
                           kn_backend *be, kn_backend *device, rt_model **out) {
    return load(export_dir, tags, ntags, be, device, 1, out);
}

static ms_status load(const char *export_dir, const char *const *tags, int ntags, kn_backend *be,
                      kn_backend *device, int plan, rt_model **out) {
    rt_model *m = calloc(1, sizeof(*m));
    if (m == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    atomic_init(&m->refs, 1);
    m->be = be;
    rt_vars_init(&m->vars);
    pthread_mutex_init(&m->plan_mu, NULL);
    pthread_mutex_init(&m->state_mu, NULL);
    ms_status st = MS_OK;
    m->root.fd = -1;
    m->dir = strdup(export_dir);
    m->pool = kn_pool_new();
    if (m->dir == NULL || m->pool == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = ms_dir_open(export_dir, &m->root)) != MS_OK) {
        if (st == MS_ENOTFOUND) st = ms_errf(MS_ENOTFOUND, "%s: no saved_model.pb", export_dir);
        goto fail;
    }
    m->vars.files = &m->root;
    if ((st = read_savedmodel(&m->root, &m->sm, &m->fmt)) != MS_OK) goto fail;
    int mgi = rt_savedmodel_find_meta_graph(m->sm, tags, ntags);
    if (mgi < 0) {
        char want[512], have[1024];
        size_t o = 0;
        want[0] = '\0';
        for (int i = 0; i < ntags && o < sizeof want; i++)
            o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", i ? ", " : "", tags[i]);
        tagsets_str(m->sm, have, sizeof have);
        st = ms_errf(MS_ENOTFOUND, "%s: no MetaGraphDef with tag-set {%s}; the SavedModel has %s",
                     export_dir, want, have);
        goto fail;
    }
    m->mg = m->sm->meta_graphs[mgi];
    if ((st = refuse_python(m->mg)) != MS_OK) goto fail;
    if ((st = consts_check(m->mg)) != MS_OK) goto fail;
    if ((st = rt_graph_build(m->mg, be, rt_model_host_ops, &m->g)) != MS_OK) goto fail;
    if ((st = rt_tf1_loops_convert(m->g)) != MS_OK) goto fail;
    m->g->device = device;
    if (rt_fuse_enabled() && (st = rt_fuse_graph(m->g, NULL)) != MS_OK) goto fail;
    if ((st = run_restore(m)) != MS_OK) goto fail;
    if ((st = restore_objgraph(m)) != MS_OK) goto fail;
    const char *init = init_op_name(m->mg);
    if (init != NULL) {
        st = run_init(m, init);
        if (st != MS_OK) {
            st = ms_errwrap(st, "running the init op '%s'", init);
            goto fail;
        }
    }
    if (plan && (st = plan_signatures(m)) != MS_OK) goto fail;
    *out = m;
    return MS_OK;
fail:
    ms_errwrap(st, "loading %s", export_dir);
    rt_model_unref(m);
    return st;
}

rt_model *rt_model_ref(rt_model *m) {
    if (m) atomic_fetch_add(&m->refs, 1);
    return m;
}

void rt_model_unref(rt_model *m) {
    if (m == NULL || atomic_fetch_sub(&m->refs, 1) != 1) return;
    while (m->plans) {
        plan_entry *e = m->plans;
        m->plans = e->next;
        rt_plan_free(e->plan);
        free(e->key);
        free(e);
    }
    rt_graph_free(m->g);
    rt_vars_destroy(&m->vars);
    kn_pool_release(m->pool);
    if (m->sm) tensorflow__saved_model__free_unpacked(m->sm, NULL);
    pthread_mutex_destroy(&m->plan_mu);
    pthread_mutex_destroy(&m->state_mu);
    ms_dir_close(&m->root);
    free(m->dir);
    free(m);
}

size_t rt_model_pool_free_bytes(const rt_model *m) {
    return m && m->pool ? kn_pool_free_bytes(m->pool) : 0;
}

const Tensorflow__MetaGraphDef *rt_model_meta_graph(const rt_model *m) {
    return m->mg;
}

const char *rt_model_dir(const rt_model *m) {
    return m->dir;
}

rt_model_format rt_model_format_of(const rt_model *m) {
    return m->fmt;
}
