/* rt_tf1loop.c - TF1 while frames as one node each (rt_tf1loop.h).
 *
 * A TF1 loop is a frame: Enter nodes (attr frame_name) bring its inputs in;
 * per loop variable, Merge(Enter, NextIteration) is the value at the start
 * of an iteration, Switch(Merge, LoopCond) sends it into the body (output 1)
 * or out of the loop (output 0, to Exit), and the body's result goes back
 * through NextIteration. Enter nodes with is_constant are loop invariants.
 * The graph therefore has a cycle per frame, which no plan can order; the
 * pass here (run by the loader after rt_graph_build) replaces the frame, as seen from outside, by one node whose
 * kernel (rt_ops_control.c) runs the frame's cond and body as two plans over
 * the same graph, fed at the Merges, Switches and invariant Enters. That is
 * TensorFlow's "functionalize control flow" in effect, without writing the
 * functions out. A nested frame's node lies inside its outer frame's body. */
#include "rt_tf1loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* op is `base` or its Ref form. */
static int is_op(const rt_gnode *n, const char *base) {
    const char *op = n->kn.op;
    if (strncmp(op, "Ref", 3) == 0 && strcmp(op + 3, base) == 0) return 1;
    return strcmp(op, base) == 0;
}

static const Tensorflow__AttrValue *nattr(const rt_gnode *n, const char *key) {
    const Tensorflow__NodeDef *d = n->def;
    for (size_t i = 0; d && i < d->n_attr; i++)
        if (strcmp(d->attr[i]->key, key) == 0) return d->attr[i]->value;
    return NULL;
}

/* An Enter's frame_name ("" when it has none); *len its length. */
static const char *frame_of(const rt_gnode *n, size_t *len) {
    const Tensorflow__AttrValue *a = nattr(n, "frame_name");
    if (a == NULL || a->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S || a->s.data == NULL) {
        *len = 0;
        return "";
    }
    *len = a->s.len;
    return (const char *)a->s.data;
}

static int in_frame(const rt_gnode *n, const char *name) {
    size_t len;
    const char *f = frame_of(n, &len);
    return is_op(n, "Enter") && len == strlen(name) && memcmp(f, name, len) == 0;
}

static int is_constant(const rt_gnode *n) {
    const Tensorflow__AttrValue *a = nattr(n, "is_constant");
    return a != NULL && a->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && a->b;
}

/* The data consumers of (v, out): up to max node indices into c; returns
 * how many there are. */
static int consumers(const rt_graph *g, int v, int out, int *c, int max) {
    int k = 0;
    for (int u = 0; u < g->n; u++)
        for (int i = 0; i < g->nodes[u].nin; i++)
            if (g->nodes[u].in[i].node == v && g->nodes[u].in[i].out == out) {
                if (k < max) c[k] = u;
                k++;
                break;
            }
    return k;
}

void rt__tf1_frame_free(rt_tf1_frame *f) {
    free(f->name);
    free(f->enter);
    free(f->merge);
    free(f->sw);
    free(f->next_in);
    free(f->inv);
    free(f->exits);
    free(f->exit_var);
    memset(f, 0, sizeof(*f));
}

#define BAD(...) (st = ms_errf(MS_ENOTSUP, __VA_ARGS__))

ms_status rt__tf1_frame_find(const rt_graph *g, const char *name, rt_tf1_frame *f) {
    memset(f, 0, sizeof(*f));
    ms_status st = MS_OK;
    int nenter = 0;
    for (int v = 0; v < g->n; v++) nenter += in_frame(&g->nodes[v], name);
    f->name = strdup(name);
    f->enter = calloc((size_t)nenter + 1, sizeof(int));
    f->merge = calloc((size_t)nenter + 1, sizeof(int));
    f->sw = calloc((size_t)nenter + 1, sizeof(int));
    f->next_in = calloc((size_t)nenter + 1, sizeof(rt_edge));
    f->inv = calloc((size_t)nenter + 1, sizeof(int));
    int *c = calloc((size_t)g->n + 1, sizeof(int));
    if (!f->name || !f->enter || !f->merge || !f->sw || !f->next_in || !f->inv || !c) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    int loopcond = -1;
    for (int v = 0; v < g->n && st == MS_OK; v++) {
        const rt_gnode *e = &g->nodes[v];
        if (!in_frame(e, name)) continue;
        if (e->nin != 1) {
            BAD("TF1 while loop '%s': Enter '%s' has %d data inputs", name, e->name, e->nin);
            break;
        }
        if (is_constant(e)) {
            f->inv[f->ninv++] = v;
            continue;
        }
        int nc = consumers(g, v, 0, c, g->n);
        const rt_gnode *m = nc == 1 ? &g->nodes[c[0]] : NULL;
        if (m == NULL || !is_op(m, "Merge") || m->nin != 2) {
            BAD("TF1 while loop '%s': the loop variable Enter '%s' does not feed exactly one "
                "Merge of two inputs", name, e->name);
            break;
        }
        int mi = c[0], other = m->in[0].node == v ? m->in[1].node : m->in[0].node;
        const rt_gnode *ni = &g->nodes[other];
        if (!is_op(ni, "NextIteration") || ni->nin != 1) {
            BAD("TF1 while loop '%s': Merge '%s' does not merge its Enter with a NextIteration",
                name, m->name);
            break;
        }
        /* The Switch of this variable: the consumer of the Merge's value that is a Switch. */
        nc = consumers(g, mi, 0, c, g->n);
        int sw = -1, nsw = 0;
        for (int k = 0; k < nc && k < g->n; k++)
            if (is_op(&g->nodes[c[k]], "Switch") && g->nodes[c[k]].nin == 2 &&
                g->nodes[c[k]].in[0].node == mi && g->nodes[c[k]].in[0].out == 0)
                sw = c[k], nsw++;
        if (nsw != 1) {
            BAD("TF1 while loop '%s': Merge '%s' feeds %d Switch nodes, not one", name, m->name,
                nsw);
            break;
        }
        int lc = g->nodes[sw].in[1].node;
        if (!is_op(&g->nodes[lc], "LoopCond") || g->nodes[lc].nin != 1) {
            BAD("TF1 while loop '%s': Switch '%s' is not switched by a LoopCond", name,
                g->nodes[sw].name);
            break;
        }
        if (loopcond >= 0 && lc != loopcond) {
            BAD("TF1 while loop '%s': its Switch nodes use two LoopCond nodes ('%s', '%s')", name,
                g->nodes[loopcond].name, g->nodes[lc].name);
            break;
        }
        loopcond = lc;
        f->enter[f->nvars] = v;
        f->merge[f->nvars] = mi;
        f->sw[f->nvars] = sw;
        f->next_in[f->nvars] = ni->in[0];
        f->nvars++;
    }
    if (st != MS_OK) goto done;
    if (f->nvars == 0) {
        BAD("TF1 while loop '%s': no loop variable (an Enter without is_constant feeding a "
            "Merge)", name);
        goto done;
    }
    f->pred = g->nodes[loopcond].in[0];
    /* Exits: consumers of a Switch's output 0. */
    int nexit = 0;
    for (int i = 0; i < f->nvars; i++) nexit += consumers(g, f->sw[i], 0, c, g->n);
    f->exits = calloc((size_t)nexit + 1, sizeof(int));
    f->exit_var = calloc((size_t)nexit + 1, sizeof(int));
    if (!f->exits || !f->exit_var) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < f->nvars && st == MS_OK; i++) {
        int nc = consumers(g, f->sw[i], 0, c, g->n);
        for (int k = 0; k < nc; k++) {
            if (!is_op(&g->nodes[c[k]], "Exit") || g->nodes[c[k]].nin != 1) {
                BAD("TF1 while loop '%s': the loop-exit output of Switch '%s' feeds %s '%s', "
                    "not an Exit", name, g->nodes[f->sw[i]].name, g->nodes[c[k]].kn.op,
                    g->nodes[c[k]].name);
                break;
            }
            f->exits[f->nexits] = c[k];
            f->exit_var[f->nexits] = i;
            f->nexits++;
        }
    }
done:
    free(c);
    if (st != MS_OK) rt__tf1_frame_free(f);
    return st;
}

static ms_status convert_conds(rt_graph *g);

/* ---- the pass ---- */

static int add_node(rt_graph *g) {
    if (g->n == g->cap) {
        int ncap = g->cap ? g->cap * 2 : 64;
        rt_gnode *nn = realloc(g->nodes, sizeof(*nn) * (size_t)ncap);
        if (nn == NULL) return -1;
        g->nodes = nn;
        g->cap = ncap;
    }
    rt_gnode *n = &g->nodes[g->n];
    memset(n, 0, sizeof(*n));
    n->fused_into = -1;
    n->unfused = -1;
    return g->n++;
}

/* The frame's NodeDef: op RT_TF1_LOOP_OP, attr frame_name. */
static Tensorflow__NodeDef *loop_def(rt_graph *g, const char *name, const char *frame) {
    Tensorflow__NodeDef *d = rt_graph_alloc(g, sizeof(*d));
    Tensorflow__NodeDef__AttrEntry **ap = rt_graph_alloc(g, sizeof(*ap));
    Tensorflow__NodeDef__AttrEntry *e = rt_graph_alloc(g, sizeof(*e));
    Tensorflow__AttrValue *v = rt_graph_alloc(g, sizeof(*v));
    size_t fl = strlen(frame);
    char *fs = rt_graph_alloc(g, fl + 1);
    if (!d || !ap || !e || !v || !fs) return NULL;
    tensorflow__node_def__init(d);
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    memcpy(fs, frame, fl + 1);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)fs;
    v->s.len = fl;
    e->key = (char *)"frame_name";
    e->value = v;
    ap[0] = e;
    d->name = (char *)name;
    d->op = (char *)RT_TF1_LOOP_OP;
    d->attr = ap;
    d->n_attr = 1;
    return d;
}

/* Whether node v is a structural node (Enter, Merge, Switch) of frame f. */
static int structural(const rt_tf1_frame *f, int v) {
    for (int i = 0; i < f->nvars; i++)
        if (f->enter[i] == v || f->merge[i] == v || f->sw[i] == v) return 1;
    for (int j = 0; j < f->ninv; j++)
        if (f->inv[j] == v) return 1;
    return 0;
}

static ms_status convert(rt_graph *g, const rt_tf1_frame *f) {
    int nin = f->nvars + f->ninv, nctl = 0;
    for (int i = 0; i < f->nvars; i++) nctl += g->nodes[f->enter[i]].nctl;
    for (int j = 0; j < f->ninv; j++) nctl += g->nodes[f->inv[j]].nctl;
    rt_edge *in = malloc(sizeof(*in) * ((size_t)nin + 1));
    int *ctl = malloc(sizeof(int) * ((size_t)nctl + 1));
    char *name = malloc(strlen(f->name) + 16);
    if (!in || !ctl || !name) goto oom;
    /* Named after the frame; a node of that name already: a suffix. */
    strcpy(name, f->name);
    if (rt_graph_find(g, name) >= 0) strcat(name, "/tf1_loop");
    nctl = 0;
    for (int i = 0; i < nin; i++) {
        const rt_gnode *e = &g->nodes[i < f->nvars ? f->enter[i] : f->inv[i - f->nvars]];
        in[i] = e->in[0];
        for (int k = 0; k < e->nctl; k++) ctl[nctl++] = e->ctl[k];
    }
    Tensorflow__NodeDef *def = loop_def(g, name, f->name);
    int L = def ? add_node(g) : -1;
    if (L < 0) goto oom;
    rt_gnode *n = &g->nodes[L];
    n->name = name;
    n->def = def;
    n->in = in;
    n->nin = nin;
    n->ctl = ctl;
    n->nctl = nctl;
    n->nout = f->nvars;
    n->kn = (kn_node){.name = name, .op = RT_TF1_LOOP_OP, .def = def, .attrs = &rt_nodedef_attrs,
                      .nin = nin, .nout = f->nvars};
    for (int k = 0; k < f->nexits; k++) {
        rt_gnode *x = &g->nodes[f->exits[k]];
        x->in[0] = (rt_edge){L, f->exit_var[k]};
    }
    /* Control inputs on the frame's Enter / Merge / Switch nodes (TF1 puts
     * one on the cond's constants) hold whenever an iteration runs. */
    for (int u = 0; u < g->n; u++) {
        rt_gnode *x = &g->nodes[u];
        int w = 0;
        for (int k = 0; k < x->nctl; k++)
            if (!structural(f, x->ctl[k])) x->ctl[w++] = x->ctl[k];
        x->nctl = w;
    }
    return MS_OK;
oom:
    free(in);
    free(ctl);
    free(name);
    return ms_errf(MS_ENOMEM, "out of memory converting TF1 while loop '%s'", f->name);
}

/* A frame that cannot be converted: its Exits (found through Switch and
 * Merge) lose their inputs, so that no plan meets the cycle, and they and
 * its Enters keep msg. */
static ms_status refuse(rt_graph *g, const char *frame, const char *msg) {
    for (int v = 0; v < g->n; v++) {
        rt_gnode *x = &g->nodes[v];
        int mine = in_frame(x, frame);
        if (!mine && is_op(x, "Exit") && x->nin == 1) {
            const rt_gnode *s = &g->nodes[x->in[0].node];
            const rt_gnode *m = is_op(s, "Switch") && s->nin >= 1 ? &g->nodes[s->in[0].node] : NULL;
            for (int i = 0; m && is_op(m, "Merge") && i < m->nin; i++)
                mine |= in_frame(&g->nodes[m->in[i].node], frame);
            if (mine) x->nin = 0;
        }
        if (!mine || x->broken) continue;
        if ((x->broken = strdup(msg)) == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    }
    return MS_OK;
}

ms_status rt_tf1_loops_convert(rt_graph *g) {
    ms_status st = MS_OK;
    int n0 = g->n;
    for (int v = 0; v < n0 && st == MS_OK; v++) {
        const rt_gnode *e = &g->nodes[v];
        if (!is_op(e, "Enter")) continue;
        size_t len;
        const char *fr = frame_of(e, &len);
        /* Each frame once: at its first Enter. */
        int first = 1;
        for (int u = 0; u < v && first; u++) {
            size_t l2;
            const char *f2 = is_op(&g->nodes[u], "Enter") ? frame_of(&g->nodes[u], &l2) : NULL;
            first = !(f2 && l2 == len && memcmp(f2, fr, len) == 0);
        }
        if (!first) continue;
        char *name = malloc(len + 1);
        if (name == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        memcpy(name, fr, len);
        name[len] = '\0';
        rt_tf1_frame f;
        st = rt__tf1_frame_find(g, name, &f);
        if (st == MS_OK) {
            st = convert(g, &f);
            rt__tf1_frame_free(&f);
        } else if (st == MS_ENOTSUP) {
            char *msg = strdup(ms_errmsg());
            ms_err_clear();
            st = msg ? refuse(g, name, msg) : ms_errf(MS_ENOMEM, "out of memory");
            free(msg);
        }
        free(name);
    }
    if (st == MS_OK) st = convert_conds(g);
    return st;
}

/* ================= TF1 cond (Switch / Merge outside loops) =================
 *
 * tf.cond in TF1: every tensor a branch reads from outside comes through a
 * Switch(x, pred) (output 1 into the true branch, output 0 into the false
 * one; constants hang on a pivot Identity of Switch(pred, pred) by a control
 * edge), and a Merge takes the value of the branch that ran. Each such Merge
 * becomes a RT_TF1_COND_OP node in place (same name, same two outputs) whose
 * inputs are pred and the data inputs of the branches' Switches; its kernel
 * runs the live branch as a plan over the same graph fed at those Switches.
 * Branches are found by walking back from each Merge input to Switch nodes;
 * an inner cond's Merge is converted before the outer one (its walk would
 * otherwise meet a Merge). */

typedef struct cwalk {
    int *sw, *out;      /* Switch nodes met and the output each was read at */
    int nsw, cap;       /* cap: room in sw / out (grown as a walk meets more) */
    int nswitch;        /* Switch nodes in the graph: the most one cond can have */
    unsigned char *seen;
    int *stack;
} cwalk;

static int is_loop_merge(const rt_graph *g, const rt_gnode *m) {
    for (int i = 0; i < m->nin; i++) {
        const rt_gnode *x = &g->nodes[m->in[i].node];
        if (is_op(x, "Enter") || is_op(x, "NextIteration")) return 1;
    }
    return 0;
}

/* Doubles the room for Switches met; 0 when out of memory. */
static int cwalk_grow(cwalk *w) {
    int cap = w->cap ? 2 * w->cap : 64;
    int *sw = realloc(w->sw, sizeof(int) * (size_t)cap);
    if (sw != NULL) w->sw = sw;
    int *out = sw ? realloc(w->out, sizeof(int) * (size_t)cap) : NULL;
    if (out == NULL) return 0;
    w->out = out;
    w->cap = cap;
    return 1;
}

/* Walks back from edge e to Switch nodes. Returns 1 when done, 0 when it
 * met an unconverted Merge (convert that first), -1 on a shape it cannot
 * convert (a loop node), -2 out of memory. */
static int walk_branch(const rt_graph *g, rt_edge e, cwalk *w) {
    memset(w->seen, 0, (size_t)g->n);
    w->nsw = 0;
    int sp = 0;
#define MEET_SWITCH(node_, out_)                                                                   \
    do {                                                                                           \
        if (w->nsw == w->cap && !cwalk_grow(w)) return -2;                                         \
        w->sw[w->nsw] = (node_), w->out[w->nsw] = (out_), w->nsw++;                                \
    } while (0)
    if (is_op(&g->nodes[e.node], "Switch")) {
        MEET_SWITCH(e.node, e.out);
        return 1;
    }
    w->seen[e.node] = 1;
    w->stack[sp++] = e.node;
    while (sp > 0) {
        const rt_gnode *n = &g->nodes[w->stack[--sp]];
        if (is_op(n, "Merge")) return 0;
        /* a graph input inside a branch: the walk left the cond (no Switch on that path) */
        if (is_op(n, "Enter") || is_op(n, "NextIteration") || is_op(n, "LoopCond") ||
            strncmp(n->kn.op, "Placeholder", 11) == 0)
            return -1;
        for (int i = 0; i < n->nin + n->nctl; i++) {
            int v = i < n->nin ? n->in[i].node : n->ctl[i - n->nin];
            if (is_op(&g->nodes[v], "Switch")) {
                if (i < n->nin) MEET_SWITCH(v, n->in[i].out);
                continue;
            }
            if (!w->seen[v]) w->seen[v] = 1, w->stack[sp++] = v;
        }
    }
#undef MEET_SWITCH
    return 1;
}

/* The tensor under a chain of Identity nodes (tf.cond switches its data on
 * Identity(pred), its pivot on pred itself). */
static rt_edge canonical(const rt_graph *g, rt_edge e) {
    for (int k = 0; k < 64 && strcmp(g->nodes[e.node].kn.op, "Identity") == 0 &&
                    g->nodes[e.node].nin == 1;
         k++)
        e = g->nodes[e.node].in[0];
    return e;
}

/* "node:out" in graph memory. */
static char *tensor_name(rt_graph *g, rt_edge e) {
    const char *nm = g->nodes[e.node].name;
    size_t len = strlen(nm) + 16;
    char *s = rt_graph_alloc(g, len);
    if (s != NULL) snprintf(s, len, "%s:%d", nm, e.out);
    return s;
}

static Tensorflow__AttrValue *def_add_attr(rt_graph *g, Tensorflow__NodeDef *d, int cap,
                                           const char *key) {
    if ((int)d->n_attr >= cap) return NULL;
    Tensorflow__NodeDef__AttrEntry *e = rt_graph_alloc(g, sizeof(*e));
    Tensorflow__AttrValue *v = rt_graph_alloc(g, sizeof(*v));
    if (e == NULL || v == NULL) return NULL;
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = (char *)key;
    e->value = v;
    d->attr[d->n_attr++] = e;
    return v;
}

static void set_s(Tensorflow__AttrValue *v, char *s) {
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
    v->s.data = (uint8_t *)s;
    v->s.len = strlen(s);
}

/* Converts Merge m whose branch k read Switch outputs side[k] (0 / 1). */
static ms_status convert_cond(rt_graph *g, int mi, const rt_edge br[2], int then_k,
                              const int *sw, int nsw, rt_edge pred) {
    rt_gnode *m = &g->nodes[mi];
    Tensorflow__NodeDef *d = rt_graph_alloc(g, sizeof(*d));
    Tensorflow__NodeDef__AttrEntry **ap = rt_graph_alloc(g, sizeof(*ap) * 4);
    rt_edge *in = malloc(sizeof(*in) * ((size_t)nsw + 2));
    if (!d || !ap || !in) goto oom;
    tensorflow__node_def__init(d);
    d->name = m->name;
    d->op = (char *)RT_TF1_COND_OP;
    d->attr = ap;
    Tensorflow__AttrValue *a_then = def_add_attr(g, d, 4, "then_tensor");
    Tensorflow__AttrValue *a_else = def_add_attr(g, d, 4, "else_tensor");
    Tensorflow__AttrValue *a_idx = def_add_attr(g, d, 4, "then_index");
    Tensorflow__AttrValue *a_sw = def_add_attr(g, d, 4, "switches");
    Tensorflow__AttrValue__ListValue *lv = rt_graph_alloc(g, sizeof(*lv));
    char *t_then = tensor_name(g, br[then_k]), *t_else = tensor_name(g, br[1 - then_k]);
    if (!a_then || !a_else || !a_idx || !a_sw || !lv || !t_then || !t_else) goto oom;
    set_s(a_then, t_then);
    set_s(a_else, t_else);
    a_idx->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
    a_idx->i = then_k;
    tensorflow__attr_value__list_value__init(lv);
    ProtobufCBinaryData *bs = rt_graph_alloc(g, sizeof(*bs) * ((size_t)nsw + 1));
    if (bs == NULL) goto oom;
    in[0] = pred;
    for (int j = 0; j < nsw; j++) {
        bs[j].data = (uint8_t *)g->nodes[sw[j]].name;
        bs[j].len = strlen(g->nodes[sw[j]].name);
        in[1 + j] = g->nodes[sw[j]].in[0];
    }
    lv->s = bs;
    lv->n_s = (size_t)nsw;
    a_sw->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    a_sw->list = lv;
    free(m->in);
    m->in = in;
    m->nin = 1 + nsw;
    m->nctl = 0; /* a Merge's control inputs lie in its branches */
    m->def = d;
    m->kn.def = d;
    m->kn.op = RT_TF1_COND_OP;
    m->kn.nin = m->nin;
    /* Control inputs on the Switches hold whenever the branch runs. */
    for (int u = 0; u < g->n; u++) {
        rt_gnode *x = &g->nodes[u];
        int w = 0;
        for (int k = 0; k < x->nctl; k++) {
            int drop = 0;
            for (int j = 0; j < nsw && !drop; j++) drop = x->ctl[k] == sw[j];
            if (!drop) x->ctl[w++] = x->ctl[k];
        }
        x->nctl = w;
    }
    return MS_OK;
oom:
    free(in);
    return ms_errf(MS_ENOMEM, "out of memory converting TF1 cond '%s'", m->name);
}

/* Tries Merge mi: 1 converted, 0 not yet (an inner Merge first), -1 not a
 * convertible cond (left as it is: its kernel refuses it). */
static int try_cond(rt_graph *g, int mi, cwalk *w, ms_status *st) {
    const rt_gnode *m = &g->nodes[mi];
    int side[2], nsw = 0;
    int *sw = malloc(sizeof(int) * ((size_t)w->nswitch + 1)); /* each Switch once */
    rt_edge pred = {-1, 0}, cpred = {-1, 0};
    if (sw == NULL) {
        *st = ms_errf(MS_ENOMEM, "out of memory");
        return -1;
    }
    int r = 1;
    for (int k = 0; k < 2 && r == 1; k++) {
        r = walk_branch(g, m->in[k], w);
        if (r == -2) {
            *st = ms_errf(MS_ENOMEM, "out of memory");
            r = -1;
        }
        if (r != 1) break;
        side[k] = -1;
        for (int j = 0; j < w->nsw && r == 1; j++) {
            const rt_gnode *s = &g->nodes[w->sw[j]];
            if (s->nin != 2 || is_op(&g->nodes[s->in[1].node], "LoopCond")) r = -1;
            else if (pred.node < 0) pred = s->in[1], cpred = canonical(g, pred);
            else {
                rt_edge c = canonical(g, s->in[1]);
                if (c.node != cpred.node || c.out != cpred.out) r = -1;
            }
            if (side[k] < 0) side[k] = w->out[j];
            else if (side[k] != w->out[j]) r = -1;
            int have = 0;
            for (int q = 0; q < nsw && !have; q++) have = sw[q] == w->sw[j];
            if (!have && r == 1) sw[nsw++] = w->sw[j];
        }
        if (r == 1 && (side[k] < 0 || side[k] > 1)) r = -1;
    }
    if (r == 1 && side[0] == side[1]) r = -1;
    if (r == 1) {
        rt_edge br[2] = {m->in[0], m->in[1]};
        *st = convert_cond(g, mi, br, side[0] == 1 ? 0 : 1, sw, nsw, pred);
        if (*st != MS_OK) r = -1;
    }
    free(sw);
    return r;
}

static ms_status convert_conds(rt_graph *g) {
    cwalk w = {0};
    for (int v = 0; v < g->n; v++) w.nswitch += is_op(&g->nodes[v], "Switch");
    if (!cwalk_grow(&w)) return ms_errf(MS_ENOMEM, "out of memory");
    w.seen = malloc((size_t)g->n + 1);
    w.stack = malloc(sizeof(int) * ((size_t)g->n + 1));
    unsigned char *done = calloc((size_t)g->n + 1, 1);
    ms_status st = MS_OK;
    if (!w.sw || !w.out || !w.seen || !w.stack || !done) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto out;
    }
    /* Inner conds first: repeat while a pass converts something. */
    for (int progress = 1; progress && st == MS_OK;) {
        progress = 0;
        for (int v = 0; v < g->n && st == MS_OK; v++) {
            const rt_gnode *m = &g->nodes[v];
            if (done[v] || !is_op(m, "Merge") || m->nin != 2 || is_loop_merge(g, m)) continue;
            int r = try_cond(g, v, &w, &st);
            if (r != 0) done[v] = 1;
            if (r == 1) progress = 1;
        }
    }
out:
    free(w.sw);
    free(w.out);
    free(w.seen);
    free(w.stack);
    free(done);
    return st;
}

ms_status rt__tf1_cond_find(const rt_graph *g, const rt_gnode *n, rt_tf1_cond *c) {
    memset(c, 0, sizeof(*c));
    const Tensorflow__AttrValue *t = nattr(n, "then_tensor"), *e = nattr(n, "else_tensor");
    const Tensorflow__AttrValue *k = nattr(n, "then_index"), *s = nattr(n, "switches");
    if (!t || !e || !k || !s || t->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S ||
        e->value_case != TENSORFLOW__ATTR_VALUE__VALUE_S ||
        s->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || s->list == NULL)
        return ms_errf(MS_EINVAL, "'%s' (%s) is not a converted TF1 cond", n->name, n->kn.op);
    char buf[512];
    ms_status st = MS_OK;
    for (int b = 0; b < 2 && st == MS_OK; b++) {
        const ProtobufCBinaryData *v = b == 0 ? &t->s : &e->s;
        if (v->len >= sizeof buf) return ms_errf(MS_EINVAL, "'%s': tensor name too long", n->name);
        memcpy(buf, v->data, v->len);
        buf[v->len] = '\0';
        st = rt_graph_tensor(g, buf, b == 0 ? &c->then_out : &c->else_out);
    }
    if (st != MS_OK) return st;
    c->then_index = (int)k->i;
    c->nsw = (int)s->list->n_s;
    c->sw = calloc((size_t)c->nsw + 1, sizeof(int));
    if (c->sw == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (int j = 0; j < c->nsw; j++) {
        const ProtobufCBinaryData *v = &s->list->s[j];
        if (v->len >= sizeof buf) {
            free(c->sw);
            return ms_errf(MS_EINVAL, "'%s': node name too long", n->name);
        }
        memcpy(buf, v->data, v->len);
        buf[v->len] = '\0';
        if ((c->sw[j] = rt_graph_find(g, buf)) < 0) {
            free(c->sw);
            return ms_errf(MS_EINVAL, "'%s': no Switch '%s'", n->name, buf);
        }
    }
    return MS_OK;
}
