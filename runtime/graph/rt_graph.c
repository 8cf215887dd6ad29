/* rt_graph.c - GraphDef -> rt_graph: node indices, edges, function inlining. */
#include "rt_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_opdefs.h"
#include "rt_ops.h"

/* ---- name -> index map (open addressing, power-of-two capacity) ---- */
typedef struct rt_name_map {
    size_t cap, len;
    const char **keys;  /* borrowed from the nodes */
    int *vals;
} rt_name_map;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

static int map_grow(rt_name_map *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const char **nk = calloc(ncap, sizeof(*nk));
    int *nv = calloc(ncap, sizeof(*nv));
    if (nk == NULL || nv == NULL) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL) continue;
        size_t j = hash_str(m->keys[i]) & (ncap - 1);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

static int map_get(const rt_name_map *m, const char *key) {
    if (m->cap == 0) return -1;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* Returns 1 if inserted, 0 if the key exists, -1 on OOM. */
static int map_put(rt_name_map *m, const char *key, int val) {
    if ((m->len + 1) * 2 > m->cap && map_grow(m) != 0) return -1;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return 0;
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->len++;
    return 1;
}

/* ---- building ---- */

/* Where a node's input strings are resolved: the top-level graph, or the body
 * of an inlined function call. */
typedef struct scope {
    struct scope *parent;
    const char *prefix;                    /* "call/" ("" at top level) */
    const Tensorflow__FunctionDef *fd;     /* NULL at top level */
    const rt_edge *args;                   /* resolved caller inputs, one per input_arg */
    int nargs;
    const int *caller_ctl;                 /* the call's control inputs */
    int ncaller_ctl;
    struct scope *next_alloc;              /* all scopes, for freeing */
} scope;

typedef struct pending {
    int node;
    const scope *sc;
} pending;

typedef struct builder {
    rt_graph *g;
    const Tensorflow__MetaGraphDef *mg;
    const Tensorflow__FunctionDefLibrary *lib;
    scope *scopes;
    int depth;
} builder;

static const Tensorflow__AttrValue *node_attr(const Tensorflow__NodeDef *d, const char *key) {
    for (size_t i = 0; i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

static const Tensorflow__FunctionDef *find_function(const builder *b, const char *name) {
    if (b->lib == NULL) return NULL;
    for (size_t i = 0; i < b->lib->n_function; i++) {
        const Tensorflow__FunctionDef *f = b->lib->function[i];
        if (f->signature && f->signature->name && strcmp(f->signature->name, name) == 0) return f;
    }
    return NULL;
}

static int is_call_op(const char *op) {
    return strcmp(op, "PartitionedCall") == 0 || strcmp(op, "StatefulPartitionedCall") == 0;
}

static ms_status add_node(rt_graph *g, const Tensorflow__MetaGraphDef *mg, char *name,
                          const Tensorflow__NodeDef *def, const char *op, int *idx_out) {
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 64;
        rt_gnode *nn = realloc(g->nodes, sizeof(*nn) * (size_t)ncap);
        if (nn == NULL) {
            free(name);
            return ms_errf(MS_ENOMEM, "out of memory building the graph");
        }
        g->nodes = nn;
        g->cap = ncap;
        /* Keys of the map point at names, not at nodes, so moving nodes is fine. */
    }
    rt_gnode *n = &g->nodes[g->n];
    memset(n, 0, sizeof(*n));
    n->name = name;
    n->def = def;
    n->kn.name = name;
    n->kn.op = op;
    n->kn.def = def;
    n->kn.attrs = &rt_nodedef_attrs;
    n->nout = rt_opdef_num_outputs(mg, op, def);
    n->kn.nout = n->nout;
    n->fused_into = -1;
    n->unfused = -1;
    int r = map_put(g->names, name, g->n);
    if (r < 0) {
        free(name);
        return ms_errf(MS_ENOMEM, "out of memory building the graph");
    }
    if (r == 0) {
        ms_status st = ms_errf(MS_EINVAL, "graph has two nodes named '%s'", name);
        free(name);
        return st;
    }
    *idx_out = g->n++;
    return MS_OK;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s == NULL) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

static ms_status add_function_body(builder *b, int call_idx, pending **pend, int *npend,
                                   int *pcap);

/* Appends a node to be resolved later. */
static ms_status push_pending(pending **pend, int *npend, int *pcap, int node, const scope *sc) {
    if (*npend == *pcap) {
        int ncap = *pcap ? *pcap * 2 : 128;
        pending *np = realloc(*pend, sizeof(*np) * (size_t)ncap);
        if (np == NULL) return ms_errf(MS_ENOMEM, "out of memory building the graph");
        *pend = np;
        *pcap = ncap;
    }
    (*pend)[(*npend)++] = (pending){node, sc};
    return MS_OK;
}

/* Resolves a data input string to an edge within scope sc. */
static ms_status resolve_data(builder *b, const scope *sc, const char *in, const char *who,
                              rt_edge *out) {
    rt_graph *g = b->g;
    if (sc->fd == NULL) {
        ms_status st = rt_graph_tensor(g, in, out);
        if (st != MS_OK) return ms_errwrap(st, "node '%s' input '%s'", who, in);
        return MS_OK;
    }
    /* Inside a function: "arg", "node:out_arg:idx" or "node:idx". */
    const char *c1 = strchr(in, ':');
    if (c1 == NULL) {
        const Tensorflow__OpDef *sig = sc->fd->signature;
        for (size_t i = 0; i < sig->n_input_arg; i++)
            if (strcmp(sig->input_arg[i]->name, in) == 0) {
                if ((int)i >= sc->nargs)
                    return ms_errf(MS_EINVAL, "function %s: argument '%s' not bound by the call",
                                   sig->name, in);
                *out = sc->args[i];
                return MS_OK;
            }
        char *full = join(sc->prefix, in);
        if (full == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        int idx = map_get(g->names, full);
        free(full);
        if (idx < 0) return ms_errf(MS_EINVAL, "function node '%s': unknown input '%s'", who, in);
        *out = (rt_edge){idx, 0};
        return MS_OK;
    }
    size_t nlen = (size_t)(c1 - in);
    char *nodename = malloc(strlen(sc->prefix) + nlen + 1);
    if (nodename == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    sprintf(nodename, "%s%.*s", sc->prefix, (int)nlen, in);
    int idx = map_get(g->names, nodename);
    free(nodename);
    if (idx < 0) return ms_errf(MS_EINVAL, "function node '%s': unknown input '%s'", who, in);
    const char *c2 = strchr(c1 + 1, ':');
    if (c2 == NULL) {
        *out = (rt_edge){idx, atoi(c1 + 1)};
        return MS_OK;
    }
    char argname[256];
    size_t alen = (size_t)(c2 - c1 - 1);
    if (alen >= sizeof(argname)) return ms_errf(MS_EINVAL, "input '%s' too long", in);
    memcpy(argname, c1 + 1, alen);
    argname[alen] = '\0';
    const rt_gnode *src = &g->nodes[idx];
    int base = rt_opdef_output_index(b->mg, src->kn.op, src->def, argname);
    if (base < 0)
        return ms_errf(MS_ENOTSUP,
                       "function node '%s': cannot resolve output '%s' of op %s (node '%s')", who,
                       argname, src->kn.op, src->name);
    *out = (rt_edge){idx, base + atoi(c2 + 1)};
    return MS_OK;
}

static ms_status resolve_ctl(builder *b, const scope *sc, const char *name, const char *who,
                             int *out) {
    char *full = join(sc->prefix, name);
    if (full == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    int idx = map_get(b->g->names, full);
    free(full);
    if (idx < 0)
        return ms_errf(MS_EINVAL, "node '%s': unknown control input '^%s'", who, name);
    *out = idx;
    return MS_OK;
}

/* Resolves the inputs of node p.node (in its scope); expands calls. */
static ms_status resolve_node(builder *b, pending p, pending **pend, int *npend, int *pcap) {
    rt_graph *g = b->g;
    const Tensorflow__NodeDef *d = g->nodes[p.node].def;
    const char *who = g->nodes[p.node].name;
    int ndata = 0;
    for (size_t i = 0; i < d->n_input; i++)
        if (d->input[i][0] != '^') ndata++;
    rt_edge *in = calloc((size_t)ndata + 1, sizeof(*in));
    int *ctl = calloc(d->n_input + (size_t)p.sc->ncaller_ctl + 1, sizeof(int));
    if (in == NULL || ctl == NULL) {
        free(in);
        free(ctl);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    int nin = 0, nctl = 0;
    ms_status st = MS_OK;
    for (size_t i = 0; i < d->n_input && st == MS_OK; i++) {
        if (d->input[i][0] == '^')
            st = resolve_ctl(b, p.sc, d->input[i] + 1, who, &ctl[nctl++]);
        else
            st = resolve_data(b, p.sc, d->input[i], who, &in[nin++]);
    }
    /* A body node with no inputs at all still waits for the call's control inputs. */
    if (st == MS_OK && d->n_input == 0)
        for (int i = 0; i < p.sc->ncaller_ctl; i++) ctl[nctl++] = p.sc->caller_ctl[i];
    if (st != MS_OK) {
        free(in);
        free(ctl);
        return st;
    }
    rt_gnode *n = &g->nodes[p.node];
    n->in = in;
    n->nin = nin;
    n->ctl = ctl;
    n->nctl = nctl;
    n->kn.nin = nin;
    if (is_call_op(d->op)) return add_function_body(b, p.node, pend, npend, pcap);
    return MS_OK;
}

static ms_status add_function_body(builder *b, int call_idx, pending **pend, int *npend,
                                   int *pcap) {
    rt_graph *g = b->g;
    const Tensorflow__NodeDef *d = g->nodes[call_idx].def;
    const Tensorflow__AttrValue *f = node_attr(d, "f");
    if (f == NULL || f->value_case != TENSORFLOW__ATTR_VALUE__VALUE_FUNC || f->func == NULL)
        return ms_errf(MS_EINVAL, "call node '%s' has no function attr 'f'", g->nodes[call_idx].name);
    const Tensorflow__FunctionDef *fd = find_function(b, f->func->name);
    if (fd == NULL || fd->signature == NULL)
        return ms_errf(MS_EINVAL, "call node '%s': function '%s' not in the library",
                       g->nodes[call_idx].name, f->func->name);
    if (++b->depth > 64)
        return ms_errf(MS_EINVAL, "function calls nested deeper than 64 at '%s'",
                       g->nodes[call_idx].name);

    scope *sc = calloc(1, sizeof(*sc));
    if (sc == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    sc->next_alloc = b->scopes;
    b->scopes = sc;
    sc->fd = fd;
    char *prefix = join(g->nodes[call_idx].name, "/");
    if (prefix == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    sc->prefix = prefix;
    /* The args are the call's resolved data inputs; copy them, since the node
     * array may move while the body is added. */
    rt_edge *args = calloc((size_t)g->nodes[call_idx].nin + 1, sizeof(*args));
    int *cctl = calloc((size_t)g->nodes[call_idx].nctl + 1, sizeof(int));
    if (args == NULL || cctl == NULL) {
        free(args);
        free(cctl);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    memcpy(args, g->nodes[call_idx].in, sizeof(*args) * (size_t)g->nodes[call_idx].nin);
    memcpy(cctl, g->nodes[call_idx].ctl, sizeof(int) * (size_t)g->nodes[call_idx].nctl);
    sc->args = args;
    sc->nargs = g->nodes[call_idx].nin;
    sc->caller_ctl = cctl;
    sc->ncaller_ctl = g->nodes[call_idx].nctl;

    int first = g->n;
    ms_status st;
    for (size_t i = 0; i < fd->n_node_def; i++) {
        const Tensorflow__NodeDef *bd = fd->node_def[i];
        char *name = join(prefix, bd->name);
        if (name == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        int idx;
        if ((st = add_node(g, b->mg, name, bd, bd->op, &idx)) != MS_OK) return st;
    }
    int last = g->n;
    for (int i = first; i < last; i++)
        if ((st = push_pending(pend, npend, pcap, i, sc)) != MS_OK) return st;

    /* The call becomes an IdentityN over the function's return values; they
     * are resolved once the body's nodes exist (now). The body's nodes are
     * resolved later from the pending list, but resolving a return value only
     * needs the body node's op and attrs, which are known. */
    const Tensorflow__OpDef *sig = fd->signature;
    rt_gnode *cn = &g->nodes[call_idx];
    rt_edge *rin = calloc(sig->n_output_arg + 1, sizeof(*rin));
    if (rin == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < sig->n_output_arg; i++) {
        const char *ref = NULL;
        for (size_t r = 0; r < fd->n_ret; r++)
            if (strcmp(fd->ret[r]->key, sig->output_arg[i]->name) == 0) ref = fd->ret[r]->value;
        if (ref == NULL) {
            free(rin);
            return ms_errf(MS_EINVAL, "function %s: output '%s' has no ret entry", sig->name,
                           sig->output_arg[i]->name);
        }
        if ((st = resolve_data(b, sc, ref, g->nodes[call_idx].name, &rin[i])) != MS_OK) {
            free(rin);
            b->depth--;
            return st;
        }
    }
    cn = &g->nodes[call_idx];
    free(cn->in);
    cn->in = rin;
    cn->nin = (int)sig->n_output_arg;
    cn->nout = cn->nin;
    cn->kn.op = "IdentityN";
    cn->kn.nin = cn->nin;
    cn->kn.nout = cn->nout;
    /* Running the call runs the whole body (side effects included). */
    free(cn->ctl);
    cn->ctl = calloc((size_t)(last - first) + 1, sizeof(int));
    if (cn->ctl == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    cn->nctl = 0;
    for (int i = first; i < last; i++) cn->ctl[cn->nctl++] = i;
    b->depth--;
    return MS_OK;
}

/* A function-body output name that does not resolve (an op neither the
 * model's op list nor the built-in table knows) must not fail the load when
 * nothing runs that node (e.g. the saver function): the node keeps the
 * message and only a plan that reaches it fails (rt_gnode_prepare). */
static ms_status mark_broken(rt_graph *g, int idx) {
    rt_gnode *n = &g->nodes[idx];
    free(n->broken);
    if ((n->broken = strdup(ms_errmsg())) == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_err_clear();
    return MS_OK;
}

ms_status rt_graph_build(const Tensorflow__MetaGraphDef *mg, kn_backend *be,
                         const kn_kernel *const *host_ops, rt_graph **out) {
    if (mg->graph_def == NULL) return ms_errf(MS_EINVAL, "MetaGraphDef has no graph_def");
    rt_graph *g = calloc(1, sizeof(*g));
    if (g == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    g->names = calloc(1, sizeof(*g->names));
    if (g->names == NULL) {
        free(g);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    g->backend = be;
    g->host_ops = host_ops;
    g->mg = mg;
    builder b = {.g = g, .mg = mg, .lib = mg->graph_def->library};
    scope top = {.prefix = ""};
    pending *pend = NULL;
    int npend = 0, pcap = 0;
    ms_status st = MS_OK;
    const Tensorflow__GraphDef *gd = mg->graph_def;
    for (size_t i = 0; i < gd->n_node && st == MS_OK; i++) {
        char *name = strdup(gd->node[i]->name);
        if (name == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            break;
        }
        int idx;
        st = add_node(g, mg, name, gd->node[i], gd->node[i]->op, &idx);
        if (st == MS_OK) st = push_pending(&pend, &npend, &pcap, idx, &top);
    }
    for (int i = 0; i < npend && st == MS_OK; i++) {
        st = resolve_node(&b, pend[i], &pend, &npend, &pcap);
        if (st == MS_ENOTSUP) st = mark_broken(g, pend[i].node);
    }
    free(pend);
    while (b.scopes) {
        scope *s = b.scopes;
        b.scopes = s->next_alloc;
        free((char *)s->prefix);
        free((rt_edge *)s->args);
        free((int *)s->caller_ctl);
        free(s);
    }
    if (st != MS_OK) {
        rt_graph_free(g);
        return st;
    }
    *out = g;
    return MS_OK;
}

/* ---- a library function as a graph of its own (rt_graph.h) ---- */

void rt_fn_graph_free(rt_fn_graph *f) {
    if (f == NULL) return;
    rt_graph_free(f->g);
    free(f->args);
    free(f->rets);
    free(f->ctl);
    free(f);
}

/* The node every function argument becomes: a Placeholder, always fed. */
static const Tensorflow__NodeDef fn_arg_def = {
    PROTOBUF_C_MESSAGE_INIT(&tensorflow__node_def__descriptor), .name = "_Arg", .op = "Placeholder"};

ms_status rt_graph_build_function(const Tensorflow__MetaGraphDef *mg, const char *fname,
                                  kn_backend *be, const kn_kernel *const *host_ops,
                                  rt_fn_graph **out) {
    rt_fn_graph *f = calloc(1, sizeof(*f));
    rt_graph *g = calloc(1, sizeof(*g));
    if (f == NULL || g == NULL || (g->names = calloc(1, sizeof(*g->names))) == NULL) {
        free(f);
        free(g);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    f->g = g;
    g->backend = be;
    g->host_ops = host_ops;
    g->mg = mg;
    builder b = {.g = g, .mg = mg, .lib = mg->graph_def ? mg->graph_def->library : NULL};
    const Tensorflow__FunctionDef *fd = find_function(&b, fname);
    if (fd == NULL || fd->signature == NULL) {
        rt_fn_graph_free(f);
        return ms_errf(MS_EINVAL, "function '%s' is not in the library", fname);
    }
    const Tensorflow__OpDef *sig = fd->signature;
    ms_status st = MS_OK;
    f->nargs = (int)sig->n_input_arg;
    f->nrets = (int)sig->n_output_arg;
    f->args = calloc((size_t)f->nargs + 1, sizeof(rt_edge));
    f->rets = calloc((size_t)f->nrets + 1, sizeof(rt_edge));
    f->ctl = calloc(fd->n_control_ret + 1, sizeof(int));
    if (f->args == NULL || f->rets == NULL || f->ctl == NULL) {
        rt_fn_graph_free(f);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    /* Argument nodes: "\x1farg:<name>" cannot clash with a body node. */
    for (int i = 0; i < f->nargs && st == MS_OK; i++) {
        char *name = join("\x1f" "arg:", sig->input_arg[i]->name);
        if (name == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            break;
        }
        int idx;
        if ((st = add_node(g, mg, name, &fn_arg_def, "Placeholder", &idx)) != MS_OK) break;
        g->nodes[idx].nout = g->nodes[idx].kn.nout = 1;
        f->args[i] = (rt_edge){idx, 0};
    }
    scope sc = {.prefix = "", .fd = fd, .args = f->args, .nargs = f->nargs};
    pending *pend = NULL;
    int npend = 0, pcap = 0;
    for (size_t i = 0; i < fd->n_node_def && st == MS_OK; i++) {
        const Tensorflow__NodeDef *bd = fd->node_def[i];
        char *name = strdup(bd->name);
        int idx;
        if (name == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
        else if ((st = add_node(g, mg, name, bd, bd->op, &idx)) == MS_OK)
            st = push_pending(&pend, &npend, &pcap, idx, &sc);
    }
    for (int i = 0; i < npend && st == MS_OK; i++) {
        st = resolve_node(&b, pend[i], &pend, &npend, &pcap);
        if (st == MS_ENOTSUP) st = mark_broken(g, pend[i].node);
    }
    free(pend);
    for (int i = 0; i < f->nrets && st == MS_OK; i++) {
        const char *ref = NULL;
        for (size_t r = 0; r < fd->n_ret; r++)
            if (strcmp(fd->ret[r]->key, sig->output_arg[i]->name) == 0) ref = fd->ret[r]->value;
        if (ref == NULL)
            st = ms_errf(MS_EINVAL, "function %s: output '%s' has no ret entry", sig->name,
                         sig->output_arg[i]->name);
        else
            st = resolve_data(&b, &sc, ref, sig->name, &f->rets[i]);
    }
    for (size_t i = 0; i < fd->n_control_ret && st == MS_OK; i++) {
        int idx = map_get(g->names, fd->control_ret[i]->value);
        if (idx < 0)
            st = ms_errf(MS_EINVAL, "function %s: control output '%s' is not a node", sig->name,
                         fd->control_ret[i]->value);
        else
            f->ctl[f->nctl++] = idx;
    }
    while (b.scopes) {
        scope *s = b.scopes;
        b.scopes = s->next_alloc;
        free((char *)s->prefix);
        free((rt_edge *)s->args);
        free((int *)s->caller_ctl);
        free(s);
    }
    if (st != MS_OK) {
        rt_fn_graph_free(f);
        return ms_errwrap(st, "function %s", fname);
    }
    *out = f;
    return MS_OK;
}

struct rt_graph_mem {
    struct rt_graph_mem *next;
    _Alignas(16) unsigned char data[];
};

void *rt_graph_alloc(rt_graph *g, size_t n) {
    struct rt_graph_mem *m = calloc(1, sizeof(*m) + n);
    if (m == NULL) return NULL;
    m->next = g->mem;
    g->mem = m;
    return m->data;
}

const kn_kernel *rt_ops_host_kernel(const kn_kernel *const *tables, const char *op) {
    for (; tables && *tables; tables++)
        for (const kn_kernel *k = *tables; k->op != NULL; k++)
            if (strcmp(k->op, op) == 0) return k;
    return NULL;
}

const kn_kernel *rt_graph_kernel(rt_graph *g, const char *op) {
    int i = g->kernel_ix ? map_get(g->kernel_ix, op) : -1;
    if (i >= 0) return g->kernels[i];
    const kn_kernel *k = rt_ops_host_kernel(g->host_ops, op);
    if (k == NULL && g->backend) k = kn_backend_kernel(g->backend, op);
    if (k == NULL) return NULL;
    /* keyed by the kernel's own op string, which outlives the graph */
    if (g->kernel_ix == NULL) g->kernel_ix = calloc(1, sizeof(*g->kernel_ix));
    const kn_kernel **ks = realloc(g->kernels, sizeof(*ks) * ((size_t)g->nkernels + 1));
    if (ks != NULL) g->kernels = ks;
    if (g->kernel_ix != NULL && ks != NULL && map_put(g->kernel_ix, k->op, g->nkernels) == 1)
        g->kernels[g->nkernels++] = k; /* out of memory: not remembered, still right */
    return k;
}

void rt_graph_free(rt_graph *g) {
    if (g == NULL) return;
    for (int i = 0; i < g->n; i++) {
        rt_gnode *n = &g->nodes[i];
        if (n->kernel && n->kernel->release && n->prepared) n->kernel->release(n->state);
        free(n->name);
        free(n->in);
        free(n->ctl);
        free(n->broken);
    }
    free(g->nodes);
    for (struct rt_graph_mem *m = g->mem, *nx; m; m = nx) {
        nx = m->next;
        free(m);
    }
    if (g->names) {
        free(g->names->keys);
        free(g->names->vals);
        free(g->names);
    }
    if (g->kernel_ix) {
        free(g->kernel_ix->keys);
        free(g->kernel_ix->vals);
        free(g->kernel_ix);
    }
    free(g->kernels);
    free(g);
}

int rt_graph_find(const rt_graph *g, const char *name) {
    return map_get(g->names, name);
}

ms_status rt_graph_tensor(const rt_graph *g, const char *tensor_name, rt_edge *out) {
    char buf[512];
    const char *colon = strrchr(tensor_name, ':');
    int index = 0;
    const char *name = tensor_name;
    if (colon != NULL) {
        size_t len = (size_t)(colon - tensor_name);
        if (len >= sizeof(buf)) return ms_errf(MS_EINVAL, "tensor name too long");
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end == '\0' && end != colon + 1 && v >= 0) {
            memcpy(buf, tensor_name, len);
            buf[len] = '\0';
            name = buf;
            index = (int)v;
        }
    }
    int idx = map_get(g->names, name);
    if (idx < 0) return ms_errf(MS_ENOTFOUND, "no node '%s' in the graph", name);
    const rt_gnode *n = &g->nodes[idx];
    if (index >= n->nout && !(index == 0 && n->nout == 0))
        return ms_errf(MS_ENOTFOUND, "node '%s' (%s) has %d outputs; '%s' asks for output %d",
                       name, n->kn.op, n->nout, tensor_name, index);
    *out = (rt_edge){idx, index};
    return MS_OK;
}
