/* rt_exec.c - execution plans: prune to what the fetches need, order, count
 * uses so buffers go back to the pool as soon as their last consumer ran,
 * and run nodes through their kernels. Also the kn_ctx services kernels use. */
#include "rt_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_log.h"
#include "rt_kctx.h"
#include "rt_ops.h"
#include "rt_threadpool.h"

/* ================= buffer pool ================= */

#define POOL_KEEP 64   /* most free buffers kept */

struct rt_pool {
    pthread_mutex_t mu;
    atomic_int refs;   /* creator + every live pooled buffer */
    int nfree;
    rt_buf *free_list[POOL_KEEP];
};

rt_pool *rt_pool_new(void) {
    rt_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->refs, 1);
    return p;
}

static void pool_unref(rt_pool *p) {
    if (atomic_fetch_sub(&p->refs, 1) != 1) return;
    for (int i = 0; i < p->nfree; i++) {
        free(p->free_list[i]->data);
        free(p->free_list[i]);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void rt_pool_release(rt_pool *p) {
    if (p == NULL) return;
    /* Free what is idle now; buffers in use come back through pooled_release. */
    pthread_mutex_lock(&p->mu);
    int n = p->nfree;
    rt_buf *idle[POOL_KEEP];
    memcpy(idle, p->free_list, sizeof(rt_buf *) * (size_t)n);
    p->nfree = 0;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++) {
        free(idle[i]->data);
        free(idle[i]);
        pool_unref(p);
    }
    pool_unref(p);
}

/* A pooled buffer's last reference dropped: keep it for reuse. The generic
 * rt_buf_unref frees the rt_buf struct after release() returns, so we hand
 * the memory to a fresh struct. */
static void pooled_release(rt_buf *b) {
    rt_pool *p = b->owner;
    rt_buf *keep = calloc(1, sizeof(*keep));
    pthread_mutex_lock(&p->mu);
    if (keep != NULL && p->nfree < POOL_KEEP && atomic_load(&p->refs) > 1) {
        *keep = (rt_buf){.data = b->data, .size = b->size, .release = pooled_release, .owner = p};
        p->free_list[p->nfree++] = keep;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    pthread_mutex_unlock(&p->mu);
    free(keep);
    free(b->data);
    pool_unref(p);
}

rt_buf *rt_pool_get(rt_pool *p, size_t size) {
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int i = 0; i < p->nfree; i++) {
        size_t s = p->free_list[i]->size;
        if (s >= size && s <= size * 2 + 256 && (best < 0 || s < p->free_list[best]->size))
            best = i;
    }
    if (best >= 0) {
        rt_buf *b = p->free_list[best];
        p->free_list[best] = p->free_list[--p->nfree];
        pthread_mutex_unlock(&p->mu);
        atomic_init(&b->refs, 1);
        return b;
    }
    pthread_mutex_unlock(&p->mu);
    rt_buf *b = rt_buf_alloc(size);
    if (b == NULL) return NULL;
    b->release = pooled_release;
    b->owner = p;
    atomic_fetch_add(&p->refs, 1);
    return b;
}

/* ================= variables ================= */

void rt_vars_init(rt_vars *v) {
    pthread_mutex_init(&v->mu, NULL);
    v->head = NULL;
}

void rt_vars_destroy(rt_vars *v) {
    rt_var *x = v->head;
    while (x) {
        rt_var *nx = x->next;
        rt_tensor_unref(x->value);
        free(x->name);
        free(x);
        x = nx;
    }
    v->head = NULL;
    pthread_mutex_destroy(&v->mu);
}

rt_var *rt_vars_get(rt_vars *v, const char *name, rt_dtype dtype) {
    pthread_mutex_lock(&v->mu);
    rt_var *x;
    for (x = v->head; x; x = x->next)
        if (strcmp(x->name, name) == 0) break;
    if (x == NULL && (x = calloc(1, sizeof(*x))) != NULL) {
        x->name = strdup(name);
        if (x->name == NULL) {
            free(x);
            x = NULL;
        } else {
            x->dtype = dtype;
            x->next = v->head;
            v->head = x;
        }
    }
    pthread_mutex_unlock(&v->mu);
    return x;
}

/* ================= kernel context services ================= */

ms_status kn_ctx_output(kn_ctx *ctx, int idx, rt_dtype dt, const rt_shape *shape, rt_tensor **out) {
    (void)idx;
    if (ctx == NULL || ctx->pool == NULL || dt == RT_DT_STRING || !rt_dtype_is_pod(dt))
        return rt_tensor_new(dt, shape, out);
    int64_t n = rt_shape_nelem(shape);
    if (n < 0) {
        char sb[128];
        return ms_errf(MS_EINVAL, "invalid output shape %s", rt_shape_str(shape, sb, sizeof sb));
    }
    size_t es = rt_dtype_size(dt);
    if ((uint64_t)n > SIZE_MAX / es) return ms_errf(MS_ENOMEM, "output too large");
    rt_buf *b = rt_pool_get(ctx->pool, (size_t)n * es);
    if (b == NULL) return ms_errf(MS_ENOMEM, "out of memory for a %lld-element output", (long long)n);
    ms_status st = rt_tensor_new_on(dt, shape, b, 0, out);
    rt_buf_unref(b);
    return st;
}

void kn_ctx_parallel_for(kn_ctx *ctx, int64_t n, int64_t min_chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    rt_parallel_for(ctx ? ctx->nthreads : 1, n, min_chunk, fn, arg);
}

int kn_ctx_cancelled(kn_ctx *ctx) {
    return ctx && ctx->cancelled && atomic_load(ctx->cancelled);
}

/* ================= node binding ================= */

rt_tensor *rt_gnode_const_value(const rt_gnode *n) {
    if (!n->prepared || strcmp(n->kn.op, "Const") != 0) return NULL;
    return n->state;
}

ms_status rt_gnode_prepare(rt_graph *g, int idx) {
    rt_gnode *n = &g->nodes[idx];
    if (n->prepared) return MS_OK;
    if (n->kernel == NULL) {
        n->kernel = rt_ops_host_kernel(n->kn.op);
        if (n->kernel == NULL && g->backend) n->kernel = kn_backend_kernel(g->backend, n->kn.op);
        if (n->kernel == NULL)
            return ms_errf(MS_ENOTSUP, "op %s (node '%s') is not supported by dcmserve", n->kn.op,
                           n->name);
    }
    if (n->kernel->prepare) {
        rt_tensor *cin[64] = {0};
        for (int i = 0; i < n->nin && i < 64; i++)
            cin[i] = rt_gnode_const_value(&g->nodes[n->in[i].node]);
        void *state = NULL;
        ms_status st = n->kernel->prepare(&n->kn, n->nin ? cin : NULL, &state);
        if (st != MS_OK) return ms_errwrap(st, "node '%s' (%s)", n->name, n->kn.op);
        n->state = state;
    }
    n->prepared = 1;
    return MS_OK;
}

/* ================= plans ================= */

/* The node a plan runs in place of v: itself, or for a fused node whose
 * chain holds a fed tensor, its original (unfused) form. */
static inline int run_as(const int *remap, int v) {
    return remap ? remap[v] : v;
}

struct rt_plan {
    rt_graph *g;            /* borrowed */
    int n;
    int *order;             /* node indices in run order */
    int *slot_base;         /* per graph node: first output slot */
    int nslots;
    int *uses;              /* per slot: consumers in the plan + fetches */
    int nfeeds;
    int *feed_slot;
    int nfetches;
    int *fetch_slot;
    unsigned char *fed;     /* per slot: supplied by a feed */
    int stateful;
};

int rt_plan_stateful(const rt_plan *p) {
    return p->stateful;
}

void rt_plan_free(rt_plan *p) {
    if (p == NULL) return;
    free(p->order);
    free(p->slot_base);
    free(p->uses);
    free(p->feed_slot);
    free(p->fetch_slot);
    free(p->fed);
    free(p);
}

ms_status rt_plan_build(rt_graph *g, const rt_edge *feeds, int nfeeds, const rt_edge *fetches,
                        int nfetches, const int *targets, int ntargets, rt_plan **out) {
    ms_status st = MS_OK;
    rt_plan *p = calloc(1, sizeof(*p));
    int *stack = NULL, *indeg = NULL, *remap = NULL;
    unsigned char *need = NULL;
    if (p == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    p->g = g;
    p->slot_base = calloc((size_t)g->n + 1, sizeof(int));
    if (p->slot_base == NULL) goto oom;
    for (int i = 0; i < g->n; i++) {
        p->slot_base[i] = p->nslots;
        p->nslots += g->nodes[i].nout > 0 ? g->nodes[i].nout : 1;
    }
    p->uses = calloc((size_t)p->nslots + 1, sizeof(int));
    p->fed = calloc((size_t)p->nslots + 1, 1);
    p->feed_slot = calloc((size_t)nfeeds + 1, sizeof(int));
    p->fetch_slot = calloc((size_t)nfetches + 1, sizeof(int));
    need = calloc((size_t)g->n + 1, 1);
    stack = malloc(sizeof(int) * ((size_t)g->n + 1));
    indeg = calloc((size_t)g->n + 1, sizeof(int));
    if (!p->uses || !p->fed || !p->feed_slot || !p->fetch_slot || !need || !stack || !indeg)
        goto oom;
    p->nfeeds = nfeeds;
    p->nfetches = nfetches;
    /* A feed that replaces a tensor absorbed into a fused node (rt_fuse.h)
     * must reach the consumers of that tensor: this plan runs such fused
     * nodes in their original form (the unfused twin; the absorbed nodes stay
     * in the graph) by giving the twin's output slots to the fused node's
     * index too, so that every edge to the fused node reads the twin. */
    for (int i = 0; i < nfeeds; i++) {
        int a = g->nodes[feeds[i].node].fused_into;
        if (a < 0) continue;
        if (remap == NULL) {
            if ((remap = malloc(sizeof(int) * ((size_t)g->n + 1))) == NULL) goto oom;
            for (int v = 0; v < g->n; v++) remap[v] = v;
        }
        remap[a] = g->nodes[a].unfused;
        p->slot_base[a] = p->slot_base[remap[a]];
    }
    for (int i = 0; i < nfeeds; i++) {
        p->feed_slot[i] = p->slot_base[feeds[i].node] + feeds[i].out;
        p->fed[p->feed_slot[i]] = 1;
    }

    /* Backward reachability from fetches and targets, not through fed slots. */
    int sp = 0;
    for (int i = 0; i < nfetches; i++) {
        int s = p->slot_base[fetches[i].node] + fetches[i].out;
        p->fetch_slot[i] = s;
        p->uses[s]++;
        int v = run_as(remap, fetches[i].node);
        if (!p->fed[s] && !need[v]) {
            need[v] = 1;
            stack[sp++] = v;
        }
    }
    for (int i = 0; i < ntargets; i++) {
        int v = run_as(remap, targets[i]);
        if (!need[v]) {
            need[v] = 1;
            stack[sp++] = v;
        }
    }
    while (sp > 0) {
        const rt_gnode *n = &g->nodes[stack[--sp]];
        for (int i = 0; i < n->nin; i++) {
            int s = p->slot_base[n->in[i].node] + n->in[i].out;
            int v = run_as(remap, n->in[i].node);
            if (p->fed[s] || need[v]) continue;
            need[v] = 1;
            stack[sp++] = v;
        }
        for (int i = 0; i < n->nctl; i++) {
            int v = run_as(remap, n->ctl[i]);
            if (!need[v]) {
                need[v] = 1;
                stack[sp++] = v;
            }
        }
    }

    /* Kahn's algorithm over the needed nodes; edges from fed slots do not count. */
    int total = 0;
    for (int v = 0; v < g->n; v++) {
        if (!need[v]) continue;
        total++;
        const rt_gnode *n = &g->nodes[v];
        for (int i = 0; i < n->nin; i++) {
            int s = p->slot_base[n->in[i].node] + n->in[i].out;
            p->uses[s]++;
            if (!p->fed[s]) indeg[v]++;
        }
        for (int i = 0; i < n->nctl; i++)
            if (need[run_as(remap, n->ctl[i])]) indeg[v]++;
    }
    p->order = malloc(sizeof(int) * ((size_t)total + 1));
    if (p->order == NULL) goto oom;
    /* A reverse index (consumers of each node) keeps the ordering linear. */
    int *cons_start = calloc((size_t)g->n + 1, sizeof(int));
    int *cons = NULL;
    if (cons_start == NULL) goto oom;
    int ncons = 0;
    for (int v = 0; v < g->n; v++) {
        if (!need[v]) continue;
        const rt_gnode *n = &g->nodes[v];
        for (int i = 0; i < n->nin; i++)
            if (!p->fed[p->slot_base[n->in[i].node] + n->in[i].out])
                cons_start[run_as(remap, n->in[i].node)]++, ncons++;
        for (int i = 0; i < n->nctl; i++)
            if (need[run_as(remap, n->ctl[i])]) cons_start[run_as(remap, n->ctl[i])]++, ncons++;
    }
    cons = malloc(sizeof(int) * ((size_t)ncons + 1));
    int *fillpos = calloc((size_t)g->n + 1, sizeof(int));
    if (cons == NULL || fillpos == NULL) {
        free(cons_start);
        free(cons);
        free(fillpos);
        goto oom;
    }
    for (int v = 0, acc = 0; v <= g->n; v++) {
        int c = v < g->n ? cons_start[v] : 0;
        cons_start[v] = acc;
        fillpos[v] = acc;
        acc += c;
    }
    for (int v = 0; v < g->n; v++) {
        if (!need[v]) continue;
        const rt_gnode *n = &g->nodes[v];
        for (int i = 0; i < n->nin; i++)
            if (!p->fed[p->slot_base[n->in[i].node] + n->in[i].out])
                cons[fillpos[run_as(remap, n->in[i].node)]++] = v;
        for (int i = 0; i < n->nctl; i++)
            if (need[run_as(remap, n->ctl[i])]) cons[fillpos[run_as(remap, n->ctl[i])]++] = v;
    }
    sp = 0;
    for (int v = g->n - 1; v >= 0; v--)
        if (need[v] && indeg[v] == 0) stack[sp++] = v;
    while (sp > 0) {
        int v = stack[--sp];
        p->order[p->n++] = v;
        for (int k = cons_start[v]; k < fillpos[v]; k++)
            if (--indeg[cons[k]] == 0) stack[sp++] = cons[k];
    }
    free(cons_start);
    free(cons);
    free(fillpos);
    if (p->n != total) {
        st = ms_errf(MS_EINVAL, "graph has a cycle among the %d nodes needed", total - p->n);
        goto fail;
    }
    for (int i = 0; i < p->n; i++) {
        if ((st = rt_gnode_prepare(g, p->order[i])) != MS_OK) goto fail;
        if (g->nodes[p->order[i]].kernel->stateful) p->stateful = 1;
    }
    free(need);
    free(stack);
    free(indeg);
    free(remap);
    *out = p;
    return MS_OK;
oom:
    st = ms_errf(MS_ENOMEM, "out of memory building an execution plan");
fail:
    free(need);
    free(stack);
    free(indeg);
    free(remap);
    rt_plan_free(p);
    return st;
}

static void release_slot(rt_tensor **slots, int *uses, int s) {
    if (--uses[s] <= 0 && slots[s]) {
        rt_tensor_unref(slots[s]);
        slots[s] = NULL;
    }
}

ms_status rt_plan_run(const rt_plan *p, kn_ctx *ctx, rt_tensor *const *feeds, rt_tensor **outs) {
    rt_graph *g = p->g;
    ms_status st = MS_OK;
    rt_tensor **slots = calloc((size_t)p->nslots + 1, sizeof(*slots));
    int *uses = malloc(sizeof(int) * ((size_t)p->nslots + 1));
    if (slots == NULL || uses == NULL) {
        free(slots);
        free(uses);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    memcpy(uses, p->uses, sizeof(int) * (size_t)p->nslots);
    for (int i = 0; i < p->nfeeds; i++) {
        int s = p->feed_slot[i];
        if (slots[s] == NULL) slots[s] = rt_tensor_ref(feeds[i]);
    }
    rt_tensor *in[256];
    rt_tensor *out[256];
    for (int k = 0; k < p->n && st == MS_OK; k++) {
        int v = p->order[k];
        rt_gnode *n = &g->nodes[v];
        if (ctx->cancelled && atomic_load(ctx->cancelled)) {
            st = ms_errf(MS_ECANCELED, "request cancelled");
            break;
        }
        if (n->nin > 256 || n->nout > 256) {
            st = ms_errf(MS_ENOTSUP, "node '%s' has more than 256 inputs or outputs", n->name);
            break;
        }
        for (int i = 0; i < n->nin; i++) {
            in[i] = slots[p->slot_base[n->in[i].node] + n->in[i].out];
            if (in[i] == NULL) {
                st = ms_errf(MS_EINTERNAL, "node '%s': input %d (from '%s:%d') was not computed",
                             n->name, i, g->nodes[n->in[i].node].name, n->in[i].out);
                break;
            }
        }
        if (st != MS_OK) break;
        memset(out, 0, sizeof(rt_tensor *) * (size_t)(n->nout > 0 ? n->nout : 1));
        ctx->gnode = n;
        st = n->kernel->compute(ctx, &n->kn, n->state, in, out);
        ctx->gnode = NULL;
        if (st != MS_OK) {
            for (int i = 0; i < n->nout; i++) rt_tensor_unref(out[i]);
            /* Kernels usually name their node already; say it once. */
            char who[600];
            snprintf(who, sizeof who, "node '%s'", n->name);
            if (strncmp(ms_errmsg(), who, strlen(who)) != 0)
                st = ms_errwrap(st, "node '%s' (%s)", n->name, n->kn.op);
            break;
        }
        int base = p->slot_base[v];
        for (int i = 0; i < n->nout; i++) {
            int s = base + i;
            if (p->fed[s] || uses[s] <= 0) {
                rt_tensor_unref(out[i]); /* a feed wins; unused outputs go back now */
                continue;
            }
            if (out[i] == NULL) {
                st = ms_errf(MS_EINTERNAL, "node '%s' (%s) produced no output %d", n->name,
                             n->kn.op, i);
                break;
            }
            slots[s] = out[i];
        }
        for (int i = 0; i < n->nin; i++) release_slot(slots, uses, p->slot_base[n->in[i].node] + n->in[i].out);
    }
    if (st == MS_OK) {
        for (int i = 0; i < p->nfetches; i++) {
            rt_tensor *t = slots[p->fetch_slot[i]];
            if (t == NULL) {
                for (int j = 0; j < i; j++) {
                    rt_tensor_unref(outs[j]);
                    outs[j] = NULL;
                }
                st = ms_errf(MS_EINVAL, "fetched tensor %d has no value (node without outputs?)", i);
                break;
            }
            outs[i] = rt_tensor_ref(t);
        }
    }
    for (int s = 0; s < p->nslots; s++) rt_tensor_unref(slots[s]);
    free(slots);
    free(uses);
    return st;
}

/* ================= one op alone (tests, tools) ================= */

ms_status rt_op_run1(kn_backend *be, const Tensorflow__NodeDef *def, rt_tensor *const *in, int nin,
                     rt_tensor **outs, int nout) {
    kn_node kn = {.name = def->name, .op = def->op, .def = def, .nin = nin, .nout = nout};
    const kn_kernel *k = rt_ops_host_kernel(def->op);
    if (k == NULL && be) k = kn_backend_kernel(be, def->op);
    if (k == NULL) return ms_errf(MS_ENOTSUP, "op %s (node '%s') is not supported", def->op, def->name);
    void *state = NULL;
    ms_status st = MS_OK;
    if (k->prepare && (st = k->prepare(&kn, NULL, &state)) != MS_OK) return st;
    kn_ctx ctx = {.nthreads = be ? be->intra_op_threads : 1};
    for (int i = 0; i < nout; i++) outs[i] = NULL;
    st = k->compute(&ctx, &kn, state, in, outs);
    if (k->release) k->release(state);
    if (st != MS_OK)
        for (int i = 0; i < nout; i++) {
            rt_tensor_unref(outs[i]);
            outs[i] = NULL;
        }
    return st;
}
