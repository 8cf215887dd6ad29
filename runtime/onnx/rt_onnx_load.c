/* rt_onnx_load.c - serving model.onnx: read beneath the version folder,
 * converted in memory, refusals listed whole (rt_onnx_load.h). */
#include "rt_onnx_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_model.h"
#include "rt_onnx.h"
#include "rt_onnx_int.h"

/* Nodes named per op in the message; the rest are counted. */
#define NAMES_PER_OP 4
/* Nesting of If / Loop / Scan bodies followed (ms_wire bounds the file's). */
#define MAX_SUBGRAPH_DEPTH 64

typedef struct bad_op {
    char op[128];      /* "Op" or "domain.Op" */
    char names[256];   /* the first NAMES_PER_OP nodes, quoted */
    size_t nnodes;
} bad_op;

typedef struct scan {
    rt__ox_conv cv; /* only opset and cur: what rt__ox_check_version reads */
    bad_op *ops;
    size_t nops, cap;
    int oom;
} scan;

static void add_bad(scan *s, const char *op, const Onnx__NodeProto *n, size_t idx) {
    bad_op *b = NULL;
    for (size_t i = 0; i < s->nops && b == NULL; i++)
        if (strcmp(s->ops[i].op, op) == 0) b = &s->ops[i];
    if (b == NULL) {
        if (s->nops == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 8;
            bad_op *nb = realloc(s->ops, cap * sizeof(*nb));
            if (nb == NULL) {
                s->oom = 1;
                return;
            }
            s->ops = nb;
            s->cap = cap;
        }
        b = &s->ops[s->nops++];
        memset(b, 0, sizeof(*b));
        snprintf(b->op, sizeof b->op, "%s", op);
    }
    if (b->nnodes++ >= NAMES_PER_OP) return;
    size_t o = strlen(b->names);
    /* Exporters may leave node names empty: then the node's index. */
    if (n->name && n->name[0])
        snprintf(b->names + o, sizeof b->names - o, "%s'%.60s'", o ? ", " : "", n->name);
    else
        snprintf(b->names + o, sizeof b->names - o, "%s#%zu", o ? ", " : "", idx);
}

/* Every node of g (and of the bodies of control-flow nodes the converter
 * takes) that the converter refuses by its op alone. */
static void scan_graph(scan *s, const Onnx__GraphProto *g, int depth) {
    if (g == NULL || depth > MAX_SUBGRAPH_DEPTH) return;
    for (size_t i = 0; i < g->n_node && !s->oom; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *op = n->op_type ? n->op_type : "";
        char key[128];
        int bad;
        if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) {
            snprintf(key, sizeof key, "%s.%s", n->domain, op);
            bad = 1;
        } else {
            snprintf(key, sizeof key, "%s", op);
            s->cv.cur = n;
            bad = rt__ox_handler_for(op) == NULL || rt__ox_check_version(&s->cv, n) != MS_OK;
            ms_err_clear();
        }
        if (bad) {
            add_bad(s, key, n, i);
            continue;
        }
        for (size_t a = 0; a < n->n_attribute; a++) {
            scan_graph(s, n->attribute[a]->g, depth + 1);
            for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
                scan_graph(s, n->attribute[a]->graphs[k], depth + 1);
        }
    }
}

/* Replaces the converter's refusal (this thread's message) with the list of
 * every node it cannot take, followed by that refusal; keeps the message
 * when the model cannot be read again or no node is on the list (the
 * refusal is then about the graph, not an op). */
static ms_status list_refusals(const uint8_t *data, size_t len, const char *what) {
    char first[1024];
    snprintf(first, sizeof first, "%s", ms_errmsg());
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (m == NULL) return ms_errf(MS_ENOTSUP, "%s", first);
    scan *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        onnx__model_proto__free_unpacked(m, NULL);
        return ms_errf(MS_ENOTSUP, "%s", first);
    }
    s->cv.opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o->domain == NULL || o->domain[0] == '\0' || strcmp(o->domain, "ai.onnx") == 0)
            s->cv.opset = o->has_version ? o->version : -1;
    }
    if (s->cv.opset >= 1 && s->cv.opset <= RT_ONNX_MAX_OPSET) scan_graph(s, m->graph, 0);
    ms_status st = MS_ENOTSUP;
    if (s->nops == 0 || s->oom) {
        ms_errf(st, "%s", first);
    } else {
        char msg[1024];
        size_t o = 0, nnodes = 0;
        for (size_t i = 0; i < s->nops; i++)
            nnodes += s->ops[i].nnodes;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (o < sizeof msg) o += (size_t)snprintf(msg + o, sizeof msg - o, __VA_ARGS__);           \
    } while (0)
        PUT("%s: %zu node%s the importer cannot take at opset %lld (%zu op%s):", what, nnodes,
            nnodes == 1 ? "" : "s", (long long)s->cv.opset, s->nops, s->nops == 1 ? "" : "s");
        for (size_t i = 0; i < s->nops; i++) {
            PUT("%s %s %s", i ? ";" : "", s->ops[i].op, s->ops[i].names);
            if (s->ops[i].nnodes > NAMES_PER_OP)
                PUT(" and %zu more", s->ops[i].nnodes - NAMES_PER_OP);
        }
        /* the first refusal says why in full (opsets accepted, attribute) */
        const char *why = strncmp(first, what, strlen(what)) == 0 ? first + strlen(what) : first;
        if (strncmp(why, ": ", 2) == 0) why += 2;
        PUT(". First refusal: %s", why);
#undef PUT
        if (o >= sizeof msg) memcpy(msg + sizeof msg - 4, "...", 4);
        ms_errf(st, "%s", msg);
    }
    free(s->ops);
    free(s);
    onnx__model_proto__free_unpacked(m, NULL);
    return st;
}

ms_status rt_onnx_load_convert(const ms_dir *root, const char *name, uint8_t **pb,
                               size_t *pb_len) {
    uint8_t *data = NULL;
    size_t len = 0;
    char what[4096];
    snprintf(what, sizeof what, "%s/%s", root->path, name);
    *pb = NULL;
    *pb_len = 0;
    ms_status st = ms_file_read(root, name, RT_SAVED_MODEL_MAX_BYTES, &data, &len);
    if (st != MS_OK) return ms_errwrap(st, "%s", root->path);
    /* External data resolves against root->path, beneath it (rt_onnx.h). */
    st = rt_onnx_convert_mem(data, len, root->path, what, NULL, pb, pb_len);
    if (st == MS_ENOTSUP) st = list_refusals(data, len, what);
    free(data);
    return st;
}

void rt_onnx_serve_enable(void) {
    rt_model_set_onnx_converter(rt_onnx_load_convert);
}
