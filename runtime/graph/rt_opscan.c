/* rt_opscan.c - the ops a signature needs and the unsupported ones
 * (rt_opscan.h). */
#include "rt_opscan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ops.h"
#include "rt_tf1loop.h"

typedef struct scanner {
    const rt_graph *g;
    rt_opscan *s;
    int cap;
    const char **seen_fn; /* functions already scanned */
    int nseen, seen_cap;
    ms_status st;
} scanner;

int rt_opscan_supported(const rt_graph *g, const char *op) {
    if (rt_ops_control_refused(op)) return 0;
    if (rt_ops_host_kernel(g->host_ops, op) != NULL) return 1;
    return g->backend && kn_backend_kernel(g->backend, op) != NULL;
}

static rt_opuse *use_of(scanner *sc, const char *op) {
    rt_opscan *s = sc->s;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ops[i].op, op) == 0) return &s->ops[i];
    if (s->n == sc->cap) {
        int ncap = sc->cap ? sc->cap * 2 : 32;
        rt_opuse *n = realloc(s->ops, sizeof(*n) * (size_t)ncap);
        if (n == NULL) return NULL;
        s->ops = n;
        sc->cap = ncap;
    }
    rt_opuse *u = &s->ops[s->n];
    memset(u, 0, sizeof(*u));
    if ((u->op = strdup(op)) == NULL) return NULL;
    u->supported = rt_opscan_supported(sc->g, op);
    if (!u->supported) s->nunsupported++;
    s->n++;
    return u;
}

static void record(scanner *sc, const char *op, const char *prefix, const char *name) {
    if (sc->st != MS_OK) return;
    rt_opuse *u = use_of(sc, op);
    char **nn = u ? realloc(u->nodes, sizeof(char *) * (size_t)(u->nnodes + 1)) : NULL;
    char *full = NULL;
    if (nn != NULL) {
        u->nodes = nn;
        size_t len = strlen(prefix) + strlen(name) + 1;
        if ((full = malloc(len)) != NULL) snprintf(full, len, "%s%s", prefix, name);
    }
    if (full == NULL) {
        sc->st = ms_errf(MS_ENOMEM, "out of memory");
        return;
    }
    u->nodes[u->nnodes++] = full;
}

static const Tensorflow__FunctionDef *find_fn(const rt_graph *g, const char *name) {
    const Tensorflow__FunctionDefLibrary *lib =
        g->mg && g->mg->graph_def ? g->mg->graph_def->library : NULL;
    for (size_t i = 0; lib && i < lib->n_function; i++)
        if (lib->function[i]->signature && strcmp(lib->function[i]->signature->name, name) == 0)
            return lib->function[i];
    return NULL;
}

static void scan_fn(scanner *sc, const char *owner, const char *fname, int depth);

/* The functions a node runs (calls and control flow), scanned into. */
static void scan_callees(scanner *sc, const Tensorflow__NodeDef *d, const char *owner, int depth) {
    static const char *const keys[] = {"f", "cond", "body", "then_branch", "else_branch"};
    for (size_t i = 0; i < d->n_attr; i++) {
        const Tensorflow__AttrValue *a = d->attr[i]->value;
        if (a == NULL) continue;
        int fn_key = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (strcmp(d->attr[i]->key, keys[k]) == 0) fn_key = 1;
        if (fn_key && a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC && a->func)
            scan_fn(sc, owner, a->func->name, depth + 1);
        if (strcmp(d->attr[i]->key, "branches") == 0 &&
            a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && a->list)
            for (size_t k = 0; k < a->list->n_func; k++)
                scan_fn(sc, owner, a->list->func[k]->name, depth + 1);
    }
}

static int is_call(const char *op) {
    return strcmp(op, "PartitionedCall") == 0 || strcmp(op, "StatefulPartitionedCall") == 0;
}

static void scan_fn(scanner *sc, const char *owner, const char *fname, int depth) {
    if (sc->st != MS_OK || depth > 32) return;
    for (int i = 0; i < sc->nseen; i++)
        if (strcmp(sc->seen_fn[i], fname) == 0) return;
    if (sc->nseen == sc->seen_cap) {
        int ncap = sc->seen_cap ? sc->seen_cap * 2 : 16;
        const char **n = realloc(sc->seen_fn, sizeof(char *) * (size_t)ncap);
        if (n == NULL) {
            sc->st = ms_errf(MS_ENOMEM, "out of memory");
            return;
        }
        sc->seen_fn = n;
        sc->seen_cap = ncap;
    }
    sc->seen_fn[sc->nseen++] = fname;
    const Tensorflow__FunctionDef *fd = find_fn(sc->g, fname);
    if (fd == NULL) {
        record(sc, "<missing function>", owner, fname);
        return;
    }
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s > %s/", owner, fname);
    for (size_t i = 0; i < fd->n_node_def && sc->st == MS_OK; i++) {
        const Tensorflow__NodeDef *d = fd->node_def[i];
        if (!is_call(d->op)) record(sc, d->op, prefix, d->name);
        scan_callees(sc, d, owner, depth);
    }
}

/* A converted TF1 while loop (rt_tf1loop.h): its Enter nodes are listed and
 * the scan goes on into its condition and body from the LoopCond and the
 * NextIterations; its Merge / Switch machinery is not listed (never run).
 * The loop's own inputs are the Enters' inputs. */
static void enter_frame(scanner *sc, const rt_graph *g, const rt_gnode *n, unsigned char *seen,
                        int *stack, int *sp) {
    const Tensorflow__AttrValue *a = NULL;
    const Tensorflow__NodeDef *d = n->def;
    for (size_t i = 0; d && i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, "frame_name") == 0) a = d->attr[i]->value;
    char name[512];
    size_t len = a && a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S ? a->s.len : 0;
    if (len >= sizeof name) len = sizeof name - 1;
    if (len) memcpy(name, a->s.data, len);
    name[len] = '\0';
    rt_tf1_frame f;
    if (rt__tf1_frame_find(g, name, &f) != MS_OK) {
        ms_err_clear();
        record(sc, n->kn.op, "", n->name);
        return;
    }
#define PUSH(v_)                                                                                   \
    do {                                                                                           \
        int v__ = (v_);                                                                            \
        if (!seen[v__]) seen[v__] = 1, stack[(*sp)++] = v__;                                       \
    } while (0)
    for (int i = 0; i < f.nvars; i++) {
        seen[f.merge[i]] = seen[f.sw[i]] = 1;
        if (!seen[f.enter[i]]) record(sc, g->nodes[f.enter[i]].kn.op, "", g->nodes[f.enter[i]].name);
        seen[f.enter[i]] = 1;
    }
    for (int j = 0; j < f.ninv; j++) {
        if (!seen[f.inv[j]]) record(sc, g->nodes[f.inv[j]].kn.op, "", g->nodes[f.inv[j]].name);
        seen[f.inv[j]] = 1;
    }
    for (int i = 0; i < f.nvars; i++) {
        for (int k = 0; k < g->nodes[f.merge[i]].nin; k++) PUSH(g->nodes[f.merge[i]].in[k].node);
        PUSH(g->nodes[f.sw[i]].in[1].node); /* the LoopCond */
    }
    for (int i = 0; i < n->nin; i++) PUSH(n->in[i].node);
    for (int i = 0; i < n->nctl; i++) PUSH(n->ctl[i]);
#undef PUSH
    rt__tf1_frame_free(&f);
}

/* A converted TF1 cond: the scan goes on into both branches from their
 * results; its Switches are not listed (never run). */
static void enter_cond(scanner *sc, const rt_graph *g, const rt_gnode *n, unsigned char *seen,
                       int *stack, int *sp) {
    rt_tf1_cond c;
    if (rt__tf1_cond_find(g, n, &c) != MS_OK) {
        ms_err_clear();
        record(sc, n->kn.op, "", n->name);
        return;
    }
    for (int j = 0; j < c.nsw; j++) seen[c.sw[j]] = 1;
    int roots[2] = {c.then_out.node, c.else_out.node};
    for (int i = 0; i < 2; i++)
        if (!seen[roots[i]]) seen[roots[i]] = 1, stack[(*sp)++] = roots[i];
    for (int i = 0; i < n->nin; i++)
        if (!seen[n->in[i].node]) seen[n->in[i].node] = 1, stack[(*sp)++] = n->in[i].node;
    free(c.sw);
}

/* A sliding window (rt_ops.h): the model it runs is reached through its
 * `pred` attr, not an edge; the scan goes on from there (down to the patch
 * Placeholder). */
static void enter_model(const rt_graph *g, const rt_gnode *n, unsigned char *seen, int *stack,
                        int *sp) {
    const Tensorflow__NodeDef *d = n->def;
    for (size_t i = 0; d && i < d->n_attr; i++) {
        const Tensorflow__AttrValue *a = d->attr[i]->value;
        if (strcmp(d->attr[i]->key, "pred") != 0 || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S)
            continue;
        char *name = malloc(a->s.len + 1);
        rt_edge e;
        if (name == NULL) return; /* the op's prepare fails the load anyway */
        memcpy(name, a->s.data, a->s.len);
        name[a->s.len] = '\0';
        ms_status st = rt_graph_tensor(g, name, &e);
        free(name);
        if (st != MS_OK) {
            ms_err_clear(); /* the op's prepare names it */
            return;
        }
        if (!seen[e.node]) seen[e.node] = 1, stack[(*sp)++] = e.node;
    }
}

/* A node reached that cannot run though its op has a kernel (a function
 * body's input that did not resolve): its message, kept once. */
static void note_broken(scanner *sc, const char *why) {
    rt_opscan *s = sc->s;
    for (int i = 0; i < s->nbroken; i++)
        if (strcmp(s->broken[i], why) == 0) return;
    char **nb = realloc(s->broken, sizeof(char *) * (size_t)(s->nbroken + 1));
    char *w = strdup(why);
    if (nb == NULL || w == NULL) {
        if (nb) s->broken = nb;
        free(w);
        sc->st = ms_errf(MS_ENOMEM, "out of memory");
        return;
    }
    s->broken = nb;
    s->broken[s->nbroken++] = w;
}

static int cmp_use(const void *a, const void *b) {
    return strcmp(((const rt_opuse *)a)->op, ((const rt_opuse *)b)->op);
}

ms_status rt_opscan_run(const rt_graph *g, const rt_edge *feeds, int nfeeds, const rt_edge *fetches,
                        int nfetches, const int *targets, int ntargets, rt_opscan **out) {
    scanner sc = {.g = g};
    sc.s = calloc(1, sizeof(*sc.s));
    unsigned char *seen = calloc((size_t)g->n + 1, 2);
    int *stack = malloc(sizeof(int) * ((size_t)g->n + 1));
    if (sc.s == NULL || seen == NULL || stack == NULL) {
        free(sc.s);
        free(seen);
        free(stack);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    unsigned char *fed = seen + g->n + 1;
    for (int i = 0; i < nfeeds; i++) fed[feeds[i].node] = 1;
    int sp = 0;
    for (int i = 0; i < nfetches; i++)
        if (!seen[fetches[i].node]) seen[fetches[i].node] = 1, stack[sp++] = fetches[i].node;
    for (int i = 0; i < ntargets; i++)
        if (!seen[targets[i]]) seen[targets[i]] = 1, stack[sp++] = targets[i];
    while (sp > 0 && sc.st == MS_OK) {
        int v = stack[--sp];
        const rt_gnode *n = &g->nodes[v];
        if (fed[v]) {
            record(&sc, "Placeholder", "", n->name); /* a fed tensor: nothing upstream runs */
            continue;
        }
        if (strcmp(n->kn.op, RT_TF1_LOOP_OP) == 0) {
            enter_frame(&sc, g, n, seen, stack, &sp);
            continue;
        }
        if (strcmp(n->kn.op, RT_TF1_COND_OP) == 0) {
            enter_cond(&sc, g, n, seen, stack, &sp);
            continue;
        }
        record(&sc, n->kn.op, "", n->name);
        if (n->broken) note_broken(&sc, n->broken);
        if (n->def && strcmp(n->kn.op, "IdentityN") != 0) scan_callees(&sc, n->def, n->name, 0);
        if (strcmp(n->kn.op, RT_SW_OP) == 0) enter_model(g, n, seen, stack, &sp);
        for (int i = 0; i < n->nin; i++)
            if (!seen[n->in[i].node]) seen[n->in[i].node] = 1, stack[sp++] = n->in[i].node;
        for (int i = 0; i < n->nctl; i++)
            if (!seen[n->ctl[i]]) seen[n->ctl[i]] = 1, stack[sp++] = n->ctl[i];
    }
    free(seen);
    free(stack);
    free(sc.seen_fn);
    if (sc.st != MS_OK) {
        rt_opscan_free(sc.s);
        return sc.st;
    }
    if (sc.s->n > 1) qsort(sc.s->ops, (size_t)sc.s->n, sizeof(rt_opuse), cmp_use);
    *out = sc.s;
    return MS_OK;
}

ms_status rt_opscan_named(const rt_graph *g, const char *const *feeds, int nfeeds,
                          const char *const *fetches, int nfetches, rt_opscan **out) {
    rt_edge *e = calloc((size_t)nfeeds + (size_t)nfetches + 1, sizeof(*e));
    if (e == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    int nf = 0, no = 0;
    for (int i = 0; i < nfeeds; i++)
        if (rt_graph_tensor(g, feeds[i], &e[nf]) == MS_OK) nf++;
    for (int i = 0; i < nfetches; i++)
        if (rt_graph_tensor(g, fetches[i], &e[nf + no]) == MS_OK) no++;
    ms_err_clear();
    ms_status st = rt_opscan_run(g, e, nf, e + nf, no, NULL, 0, out);
    free(e);
    return st;
}

void rt_opscan_free(rt_opscan *s) {
    if (s == NULL) return;
    for (int i = 0; i < s->n; i++) {
        for (int k = 0; k < s->ops[i].nnodes; k++) free(s->ops[i].nodes[k]);
        free(s->ops[i].nodes);
        free(s->ops[i].op);
    }
    free(s->ops);
    for (int i = 0; i < s->nbroken; i++) free(s->broken[i]);
    free(s->broken);
    free(s);
}

void rt_opscan_message(const rt_opscan *s, char *buf, size_t n) {
    size_t o = 0;
    if (n == 0) return;
    buf[0] = '\0';
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (o < n) o += (size_t)snprintf(buf + o, n - o, __VA_ARGS__);                            \
    } while (0)
    PUT("%d unsupported op%s:", s->nunsupported, s->nunsupported == 1 ? "" : "s");
    int k = 0;
    for (int i = 0; i < s->n; i++)
        if (!s->ops[i].supported) PUT("%s %s", k++ ? "," : "", s->ops[i].op);
    PUT("; nodes:");
    k = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->ops[i].supported) continue;
        PUT("%s %s", k++ ? ";" : "", s->ops[i].op);
        for (int j = 0; j < s->ops[i].nnodes; j++)
            PUT("%s '%s'", j ? "," : "", s->ops[i].nodes[j]);
    }
#undef PUT
    if (o >= n && n > 4) memcpy(buf + n - 4, "...", 4);
}
