/* rt_exec.c - execution plans: prune to what the fetches need, order, count
 * uses so buffers go back to the pool as soon as their last consumer ran,
 * and run nodes through their kernels (host ops first, then the backend). */
#include "rt_exec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn_memplan.h"
#include "kn_place.h"
#include "ms_log.h"
#include "rt_ops.h"

/* ================= node binding ================= */

rt_tensor *rt_gnode_const_value(const rt_gnode *n) {
    if (!n->prepared || strcmp(n->kn.op, "Const") != 0) return NULL;
    return n->state;
}

/* The graph whose node this thread is preparing: ops that run functions as
 * sub-plans (rt_ops_control.c) build them from its library. */
static _Thread_local rt_graph *tl_prep_graph;

rt_graph *rt_preparing_graph(void) {
    return tl_prep_graph;
}

/* A prepare error with the node named once: kernels' messages (kn__errf)
 * already start "node '<name>' (<op>): ". */
static ms_status named_error(ms_status st, const rt_gnode *n) {
    const char *m = ms_errmsg();
    size_t len = strlen(n->name);
    if (strncmp(m, "node '", 6) == 0 && strncmp(m + 6, n->name, len) == 0 &&
        strncmp(m + 6 + len, "' (", 3) == 0)
        return st;
    return ms_errwrap(st, "node '%s' (%s)", n->name, n->kn.op);
}

ms_status rt_gnode_prepare(rt_graph *g, int idx) {
    rt_gnode *n = &g->nodes[idx];
    if (n->prepared) return MS_OK;
    if (n->broken) return ms_errf(MS_ENOTSUP, "%s", n->broken);
    if (n->kernel == NULL) {
        n->kernel = rt_graph_kernel(g, n->kn.op);
        if (n->kernel == NULL)
            return ms_errf(MS_ENOTSUP, "op %s (node '%s') is not supported by dcmserve", n->kn.op,
                           n->name);
    }
    if (n->kernel->prepare) {
        /* the constant inputs (NULL for the others), however many there are */
        rt_tensor *cin_s[64] = {0};
        rt_tensor **cin = n->nin <= 64 ? cin_s : calloc((size_t)n->nin, sizeof(*cin));
        if (cin == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        for (int i = 0; i < n->nin; i++) cin[i] = rt_gnode_const_value(&g->nodes[n->in[i].node]);
        void *state = NULL;
        rt_graph *outer = tl_prep_graph;
        tl_prep_graph = g;
        ms_status st = n->kernel->prepare(&n->kn, n->nin ? cin : NULL, &state);
        tl_prep_graph = outer;
        if (cin != cin_s) free(cin);
        n = &g->nodes[idx];
        if (st != MS_OK) return named_error(st, n);
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

/* A copy step of a placed plan: slot src copied to slot dst, to the device
 * or back to the host, made before the node at plan position `at` runs
 * (at == n: after the last node, for the fetches). */
typedef struct rt_plan_copy {
    int src, dst;
    int to_device;
    int at;
    int const_node;     /* a Const's value to the device: its node, copied once at
                         * build into `value`; else -1 */
    rt_tensor *value;   /* owned: that copy, handed to every run */
} rt_plan_copy;

/* ---- device memory of a placed plan (kn_memplan.h) ----
 * Steps: the copies due before node position k are step 2k, node k is step
 * 2k + 1, the fetch copies step 2n, the fetches read at step 2n + 1. */

enum { MEM_KEYS = RT_PLAN_MEM_KEYS };

/* What a replay of a captured segment (CUDA graphs) makes of one node
 * output: nothing (not kept), the tensor at an offset of the arena, or a
 * view of one of the node's inputs, with the capture's dtype and shape. */
typedef struct seg_out {
    signed char kind; /* SEG_NONE, SEG_REGION, SEG_VIEW */
    int view_in;      /* SEG_VIEW: the input it views (any of the node's inputs) */
    int dev;
    rt_dtype dt;
    rt_shape shape;
    uint64_t off, bytes;
} seg_out;
enum { SEG_NONE, SEG_REGION, SEG_VIEW };

/* An input of a captured segment made outside it (a copy to the device, a
 * constant, an earlier node): where the graph reads it. A replay needs the
 * run's tensor there, with the same dtype and shape. */
typedef struct seg_in {
    int slot;
    const void *data;
    rt_dtype dt;
    rt_shape shape;
} seg_in;

/* One arena (a block of the device backend) for one run at a time, and the
 * graphs captured on it, per segment (NULL until the first run with graphs
 * on; addresses of a graph are this arena's). */
typedef struct mem_inst {
    void *arena;
    struct mem_inst *next;
    void **graph;           /* per segment: its instantiated graph, or NULL */
    seg_out **desc;         /* per segment: its outputs, for a replay */
    seg_in **ins;           /* per segment: its outside inputs (nins of them) */
    int *nins;
    unsigned char *tried;   /* per segment: captured or refused once */
} mem_inst;

/* The layout for one set of feed shapes: the device tensors made by the
 * sizing run, in step order, then the temporaries its kernels asked for
 * (kn_devtmp_take), in step order, with their offsets. */
typedef struct mem_key {
    int nfeeds;
    rt_dtype *dt;
    rt_shape *shape;
    int nbufs;             /* tensors: bufs[0..nbufs-1] */
    int ntmps;             /* temporaries: bufs[nbufs..nbufs+ntmps-1] */
    kn_memplan_buf *bufs;
    int *step_first;       /* per step (2n + 2 of them): its first entry of bufs, + 1 end */
    int *tmp_first;        /* the same for the temporaries (from bufs + nbufs) */
    uint64_t total;
    mem_inst *idle;
    int ninst;
} mem_key;

/* A segment: plan positions [k0, k1) that are all device nodes with no copy
 * step between them (CUDA graphs); nout outputs in all. */
typedef struct mem_seg {
    int k0, k1, nout;
} mem_seg;

typedef struct plan_mem {
    pthread_mutex_t mu;
    int *last;             /* per slot: the last step that reads it (static) */
    int nseg;              /* segments to capture (0: graphs off) */
    mem_seg *seg;
    int *seg_at;           /* per plan position: the segment starting there, or -1 */
    int sizing;            /* a run is recording sizes */
    int nkeys;
    mem_key keys[MEM_KEYS];
    int full_logged;
} plan_mem;

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
    /* Set only when some node runs on the graph's device backend
     * (g->device); otherwise NULL / 0 and the plan is the host plan. */
    kn_backend *device;     /* borrowed */
    int *in_off;            /* per plan position: first entry of in_slot */
    int *in_slot;           /* the slot each input of each node reads */
    int ncopies;
    rt_plan_copy *copies;   /* in run order (by at) */
    unsigned char *on_dev;  /* per plan position: the node runs on the device */
    plan_mem *mem;          /* the device arenas; NULL: the backend has none */
    uint64_t *prof;         /* DCMSERVE_PROFILE: ns per step (2k copies, 2k+1 node), runs last */
    int maxio;              /* the most inputs or outputs of a node of the plan (>= 1): the
                               size of a run's scratch arrays of a node's tensors */
};

/* ================= DCMSERVE_PROFILE ================= */

/* DCMSERVE_PROFILE=1: each plan adds up the wall time of its steps (a
 * node, or the copies before it), waiting for the device backend after
 * each step so device work is charged to the node that queued it, and logs
 * the costliest at info level when it is freed (the end of `dcmserve
 * benchmark` / `run`, a model's unload). For finding where time goes; the
 * waits make runs slower, so never for figures. */
static int g_profile = -1;

static int profile_on(void) {
    int v = __atomic_load_n(&g_profile, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("DCMSERVE_PROFILE");
        v = e != NULL && e[0] != '\0' && strcmp(e, "0") != 0;
        __atomic_store_n(&g_profile, v, __ATOMIC_RELAXED);
    }
    return v;
}

static uint64_t prof_now(const rt_plan *p) {
    if (p->device) (void)kn_backend_sync(p->device);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void prof_add(const rt_plan *p, int step, uint64_t t0) {
    __atomic_fetch_add(&p->prof[step], prof_now(p) - t0, __ATOMIC_RELAXED);
}

static void prof_report(const rt_plan *p) {
    uint64_t runs = p->prof[2 * p->n + 2], total = 0, copies = 0;
    if (runs == 0) return;
    for (int s = 0; s <= 2 * p->n; s++) {
        total += p->prof[s];
        if (s % 2 == 0) copies += p->prof[s];
    }
    MS_INFO("profile: plan of %d nodes, %llu runs, %.1f us per run; copies between host and "
            "device %.1f us per run (%d copy steps)", p->n, (unsigned long long)runs,
            total / 1e3 / runs, copies / 1e3 / runs, p->ncopies);
    unsigned char *done = calloc((size_t)p->n + 1, 1);
    if (done == NULL) return;
    for (int shown = 0; shown < 12 && shown < p->n; shown++) {
        int best = -1;
        for (int k = 0; k < p->n; k++)
            if (!done[k] && (best < 0 || p->prof[2 * k + 1] > p->prof[2 * best + 1])) best = k;
        if (best < 0 || p->prof[2 * best + 1] == 0) break;
        done[best] = 1;
        const rt_gnode *n = &p->g->nodes[p->order[best]];
        MS_INFO("profile:   %8.1f us %5.1f %%  node '%s' (%s)%s", p->prof[2 * best + 1] / 1e3 / runs,
                100.0 * (double)p->prof[2 * best + 1] / (double)(total ? total : 1), n->name,
                n->kn.op, p->on_dev && p->on_dev[best] ? " on the device" : "");
    }
    free(done);
}

static void plan_mem_free(rt_plan *p) {
    plan_mem *m = p->mem;
    if (m == NULL) return;
    for (int k = 0; k < m->nkeys; k++) {
        mem_key *key = &m->keys[k];
        for (mem_inst *i = key->idle; i;) {
            mem_inst *nx = i->next;
            for (int sg = 0; i->graph && sg < m->nseg; sg++) {
                if (i->graph[sg]) p->device->iface.graph_free(p->device, i->graph[sg]);
                free(i->desc[sg]);
                free(i->ins[sg]);
            }
            free(i->graph);
            free(i->desc);
            free(i->ins);
            free(i->nins);
            free(i->tried);
            p->device->iface.arena_free(p->device, i->arena);
            free(i);
            i = nx;
        }
        free(key->dt);
        free(key->shape);
        free(key->bufs);
        free(key->step_first);
        free(key->tmp_first);
    }
    free(m->last);
    free(m->seg);
    free(m->seg_at);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int g_graphs = -1; /* rt_device_graphs_set; -1: DCMSERVE_CUDA_GRAPHS */

void rt_device_graphs_set(int on) {
    g_graphs = on != 0;
}

int rt_device_graphs(const kn_backend *device) {
    if (!kn_backend_has_graphs(device)) return 0;
    if (g_graphs >= 0) return g_graphs;
    const char *e = getenv("DCMSERVE_CUDA_GRAPHS");
    return e != NULL && strcmp(e, "1") == 0;
}

/* 1 when the node at plan position k is a Const on the host: it does no
 * device work, so it may sit inside a segment (it runs as usual there). */
static int plan_const_at(const rt_plan *p, int k) {
    return !p->on_dev[k] && strcmp(p->g->nodes[p->order[k]].kn.op, "Const") == 0;
}

/* The segments of device nodes a run may capture as one graph each: the
 * longest runs of consecutive device nodes (and host Consts between them)
 * with no copy step between them (a copy goes through the host), at least
 * two device nodes each. */
static ms_status plan_segments(rt_plan *p, plan_mem *m) {
    m->seg = calloc((size_t)p->n + 1, sizeof(*m->seg));
    m->seg_at = malloc(sizeof(int) * ((size_t)p->n + 1));
    unsigned char *copy_at = calloc((size_t)p->n + 2, 1);
    if (!m->seg || !m->seg_at || !copy_at) {
        free(copy_at);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    for (int c = 0; c < p->ncopies; c++)
        if (p->copies[c].value == NULL) copy_at[p->copies[c].at] = 1;
    for (int k = 0; k < p->n; k++) m->seg_at[k] = -1;
    for (int k = 0; k < p->n;) {
        if (!p->on_dev[k]) {
            k++;
            continue;
        }
        int k1 = k + 1, ndev = 1;
        for (int j = k + 1; j < p->n && !copy_at[j] && (p->on_dev[j] || plan_const_at(p, j)); j++)
            if (p->on_dev[j]) { /* ends at a device node */
                ndev++;
                k1 = j + 1;
            }
        if (ndev >= 2) {
            mem_seg *sg = &m->seg[m->nseg];
            *sg = (mem_seg){.k0 = k, .k1 = k1};
            for (int j = k; j < k1; j++)
                if (p->on_dev[j]) sg->nout += p->g->nodes[p->order[j]].nout;
            m->seg_at[k] = m->nseg++;
        }
        k = k1;
    }
    free(copy_at);
    return MS_OK;
}

/* The static part, at build: the last step that reads each slot. */
static ms_status plan_mem_init(rt_plan *p) {
    plan_mem *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->last = malloc(sizeof(int) * ((size_t)p->nslots + 1))) == NULL) {
        free(m);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&m->mu, NULL);
    for (int s = 0; s < p->nslots; s++) m->last[s] = -1;
#define READ_AT(s_, step_)                                                                         \
    do {                                                                                           \
        if (m->last[(s_)] < (step_)) m->last[(s_)] = (step_);                                      \
    } while (0)
    for (int k = 0; k < p->n; k++) {
        const rt_gnode *n = &p->g->nodes[p->order[k]];
        for (int i = 0; i < n->nin; i++) READ_AT(p->in_slot[p->in_off[k] + i], 2 * k + 1);
    }
    for (int c = 0; c < p->ncopies; c++) READ_AT(p->copies[c].src, 2 * p->copies[c].at);
    for (int f = 0; f < p->nfetches; f++) READ_AT(p->fetch_slot[f], 2 * p->n + 1);
#undef READ_AT
    p->mem = m;
    if (p->on_dev != NULL && rt_device_graphs(p->device)) return plan_segments(p, m);
    return MS_OK;
}

/* The key of these feeds, or -1. Called with m->mu held. */
static int mem_find_key(const plan_mem *m, rt_tensor *const *feeds, int nfeeds) {
    for (int k = 0; k < m->nkeys; k++) {
        const mem_key *key = &m->keys[k];
        int same = key->nfeeds == nfeeds;
        for (int i = 0; same && i < nfeeds; i++)
            same = key->dt[i] == feeds[i]->dtype && rt_shape_equal(&key->shape[i], &feeds[i]->shape);
        if (same) return k;
    }
    return -1;
}

/* What a sizing run records: each new device tensor with its slot and the
 * step that made it, and each device output that shares an input's buffer
 * (a view), so that the viewed tensor lives as long as the view. */
typedef struct mem_rec {
    int n, cap;
    struct {
        int slot, step;
        uint64_t bytes;
    } *t;
    int *root; /* per slot: the slot whose tensor owns its buffer, or -1 */
    int ntmp, tcap;
    struct {
        int step;
        uint64_t bytes;
    } *tmp;    /* the temporaries the steps' kernels asked for, in step order */
} mem_rec;

static void rec_add(mem_rec *r, int slot, int step, uint64_t bytes) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        void *t = realloc(r->t, sizeof(*r->t) * (size_t)cap);
        if (t == NULL) {
            r->cap = -1; /* out of memory: this run sizes nothing */
            return;
        }
        r->t = t;
        r->cap = cap;
    }
    if (r->cap < 0) return;
    r->t[r->n].slot = slot;
    r->t[r->n].step = step;
    r->t[r->n].bytes = bytes;
    r->n++;
    r->root[slot] = slot;
}

/* After a step of a sizing run: the temporaries its kernels asked for
 * (kn_devtmp_record_begin was called before the step). Always stops the
 * thread's recording. */
static void rec_tmps(mem_rec *r, int step) {
    uint64_t sz[KN_DEVTMP_MAX_PER_STEP];
    int n = kn_devtmp_record_end(sz, KN_DEVTMP_MAX_PER_STEP);
    if (r->cap < 0) return;
    for (int i = 0; i < n; i++) {
        if (r->ntmp == r->tcap) {
            int cap = r->tcap ? 2 * r->tcap : 32;
            void *t = realloc(r->tmp, sizeof(*r->tmp) * (size_t)cap);
            if (t == NULL) {
                r->cap = -1; /* out of memory: this run sizes nothing */
                return;
            }
            r->tmp = t;
            r->tcap = cap;
        }
        r->tmp[r->ntmp].step = step;
        r->tmp[r->ntmp].bytes = sz[i];
        r->ntmp++;
    }
}

static int is_device_tensor(const rt_tensor *t) {
    return t != NULL && t->buf != NULL && t->buf->device != 0;
}

/* After a node's step of a sizing run: its outputs in slots base.. */
static void rec_node(mem_rec *r, int step, int base, rt_tensor *const *out, int nout,
                     rt_tensor *const *in, const int *in_slot, int nin) {
    if (r == NULL || r->cap < 0) return;
    for (int i = 0; i < nout; i++) {
        if (!is_device_tensor(out[i])) continue;
        int view_of = -1;
        for (int j = 0; j < nin && view_of < 0; j++)
            if (in[j] != NULL && in[j]->buf == out[i]->buf) view_of = in_slot[j];
        if (view_of >= 0) r->root[base + i] = r->root[view_of];
        else rec_add(r, base + i, step, (uint64_t)rt_tensor_nbytes(out[i]));
    }
}

/* The end of a successful sizing run: lays the recorded tensors out and
 * makes the key's first arena (the error, e.g. the budget's, fails the run
 * and keeps no key, so the next run of these shapes sizes again). */
static ms_status mem_size(const rt_plan *p, mem_rec *r, rt_tensor *const *feeds) {
    plan_mem *m = p->mem;
    if (r->cap < 0) return MS_OK;
    int nsteps = 2 * p->n + 2;
    mem_key key = {.nfeeds = p->nfeeds};
    key.dt = calloc((size_t)p->nfeeds + 1, sizeof(*key.dt));
    key.shape = calloc((size_t)p->nfeeds + 1, sizeof(*key.shape));
    key.bufs = calloc((size_t)r->n + (size_t)r->ntmp + 1, sizeof(*key.bufs));
    key.step_first = calloc((size_t)nsteps + 1, sizeof(int));
    key.tmp_first = calloc((size_t)nsteps + 1, sizeof(int));
    int *last = malloc(sizeof(int) * ((size_t)p->nslots + 1));
    ms_status st = MS_OK;
    if (!key.dt || !key.shape || !key.bufs || !key.step_first || !key.tmp_first || !last) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < p->nfeeds; i++) {
        key.dt[i] = feeds[i]->dtype;
        key.shape[i] = feeds[i]->shape;
    }
    /* a buffer lives until the last read of it or of any view of it */
    for (int s = 0; s < p->nslots; s++) last[s] = -1;
    for (int s = 0; s < p->nslots; s++)
        if (r->root[s] >= 0 && last[r->root[s]] < p->mem->last[s]) last[r->root[s]] = m->last[s];
    key.nbufs = r->n;
    for (int i = 0; i < r->n; i++) {
        int l = last[r->t[i].slot];
        key.bufs[i] = (kn_memplan_buf){.bytes = r->t[i].bytes, .first = r->t[i].step,
                                       .last = l > r->t[i].step ? l : r->t[i].step};
        key.step_first[r->t[i].step + 1]++;
    }
    for (int s = 0; s < nsteps; s++) key.step_first[s + 1] += key.step_first[s];
    /* a temporary lives for its step only */
    key.ntmps = r->ntmp;
    for (int i = 0; i < r->ntmp; i++) {
        key.bufs[r->n + i] = (kn_memplan_buf){.bytes = r->tmp[i].bytes, .first = r->tmp[i].step,
                                              .last = r->tmp[i].step};
        key.tmp_first[r->tmp[i].step + 1]++;
    }
    for (int s = 0; s < nsteps; s++) key.tmp_first[s + 1] += key.tmp_first[s];
    if ((st = kn_memplan_layout(key.bufs, key.nbufs + key.ntmps, &key.total)) != MS_OK) goto fail;
    mem_inst *inst = calloc(1, sizeof(*inst));
    char what[400];
    snprintf(what, sizeof what,
             "the device arena of a plan of %d nodes (%d tensors, %d temporaries)", p->n,
             key.nbufs, key.ntmps);
    if (inst == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = p->device->iface.arena_new(p->device, what, key.total ? key.total : 1,
                                         &inst->arena)) != MS_OK) {
        free(inst);
        goto fail;
    }
    key.idle = inst;
    key.ninst = 1;
    pthread_mutex_lock(&m->mu);
    m->keys[m->nkeys++] = key;
    pthread_mutex_unlock(&m->mu);
    uint64_t sum = 0;
    for (int i = 0; i < key.nbufs + key.ntmps; i++) sum += key.bufs[i].bytes;
    MS_INFO("device memory: %s: one arena of %llu KiB for %d tensors and %d temporaries of a plan "
            "of %d nodes (peak live %llu KiB, %llu KiB without reuse)",
            kn_backend_name(p->device), (unsigned long long)(key.total >> 10), key.nbufs,
            key.ntmps, p->n,
            (unsigned long long)(kn_memplan_peak(key.bufs, key.nbufs + key.ntmps) >> 10),
            (unsigned long long)(sum >> 10));
    free(last);
    return MS_OK;
fail:
    free(last);
    free(key.dt);
    free(key.shape);
    free(key.bufs);
    free(key.step_first);
    free(key.tmp_first);
    return st;
}

ms_status rt_plan_memory(const rt_plan *p, int key, rt_plan_meminfo *out) {
    *out = (rt_plan_meminfo){0};
    plan_mem *m = p->mem;
    if (m == NULL) return ms_errf(MS_ENOTFOUND, "the plan has no device arenas");
    pthread_mutex_lock(&m->mu);
    out->nkeys = m->nkeys;
    ms_status st = MS_OK;
    if (key < 0 || key >= m->nkeys) {
        st = ms_errf(MS_ENOTFOUND, "the plan has %d sized feed shapes", m->nkeys);
    } else {
        const mem_key *k = &m->keys[key];
        out->ntensors = k->nbufs;
        out->ntemps = k->ntmps;
        out->bytes = k->total;
        out->arenas = k->ninst;
        out->bufs = k->bufs;
    }
    pthread_mutex_unlock(&m->mu);
    return st;
}

int rt_device_arenas(const kn_backend *device) {
    const char *ar = getenv("DCMSERVE_DEVICE_ARENA");
    return device != NULL && kn_backend_has_arenas(device) && !(ar && strcmp(ar, "0") == 0);
}

int rt_plan_stateful(const rt_plan *p) {
    return p->stateful;
}

void rt_plan_free(rt_plan *p) {
    if (p == NULL) return;
    if (p->prof) prof_report(p);
    free(p->prof);
    free(p->order);
    free(p->slot_base);
    free(p->uses);
    free(p->feed_slot);
    free(p->fetch_slot);
    free(p->fed);
    free(p->in_off);
    free(p->in_slot);
    free(p->on_dev);
    for (int c = 0; c < p->ncopies; c++) rt_tensor_unref(p->copies[c].value);
    free(p->copies);
    plan_mem_free(p);
    free(p);
}

/* The feed whose slot is s (s is fed). */
static int feed_of(const rt_plan *p, int s) {
    for (int f = 0; f < p->nfeeds; f++)
        if (p->feed_slot[f] == s) return f;
    return -1;
}

/* Places the plan's nodes between g->device and the host (kn_place.h),
 * binds the device's nodes to its kernels, and turns the placement's
 * copies into copy steps with slots of their own: every input then reads
 * a tensor on its node's side, every fetch a tensor on the host. Runs
 * after ordering, before the nodes are prepared. */
static ms_status plan_place(rt_plan *p, rt_graph *g, const int *remap) {
    ms_status st = MS_OK;
    int total_in = 0;
    for (int k = 0; k < p->n; k++) total_in += g->nodes[p->order[k]].nin;
    int *pos = malloc(sizeof(int) * ((size_t)g->n + 1));
    kn_place_node *pn = calloc((size_t)p->n + 1, sizeof(*pn));
    kn_place_in *pin = calloc((size_t)total_in + 1, sizeof(*pin));
    kn_place_in *pf = calloc((size_t)p->nfetches + 1, sizeof(*pf));
    kn_placement pl = {0};
    if (!pos || !pn || !pin || !pf) goto oom;
    for (int v = 0; v < g->n; v++) pos[v] = -1;
    for (int k = 0; k < p->n; k++) pos[p->order[k]] = k;
    /* where the tensor in slot s is made: (plan position, output) or (-1, feed) */
#define PLACE_IN(s_, v_, o_)                                                                       \
    (p->fed[s_] ? (kn_place_in){-1, feed_of(p, (s_))}                                              \
                : (kn_place_in){pos[run_as(remap, (v_))], (o_)})
    for (int k = 0, at = 0; k < p->n; k++) {
        const rt_gnode *n = &g->nodes[p->order[k]];
        pn[k].op = n->kn.op;
        pn[k].device = n->def ? n->def->device : NULL;
        /* Const stays on the host: its value is what the consumers' prepare
         * reads (rt_gnode_const_value), device kernels included. */
        pn[k].host_only = rt_ops_host_kernel(g->host_ops, n->kn.op) != NULL ||
                          strcmp(n->kn.op, "Const") == 0;
        pn[k].nin = n->nin;
        pn[k].in = pin + at;
        for (int i = 0; i < n->nin; i++, at++) {
            int s = p->slot_base[n->in[i].node] + n->in[i].out;
            pin[at] = PLACE_IN(s, n->in[i].node, n->in[i].out);
        }
    }
    for (int f = 0; f < p->nfetches; f++) {
        int s = p->fetch_slot[f];
        /* the fetched node: the one whose slots hold s */
        int v = -1;
        for (int k = 0; k < p->n && v < 0; k++) {
            int b = p->slot_base[p->order[k]], no = g->nodes[p->order[k]].nout;
            if (s >= b && s < b + (no > 0 ? no : 1)) v = p->order[k];
        }
        if (p->fed[s] || v < 0)
            pf[f] = (kn_place_in){-1, p->fed[s] ? feed_of(p, s) : 0};
        else
            pf[f] = (kn_place_in){pos[v], s - p->slot_base[v]};
    }
#undef PLACE_IN
    if ((st = kn_place(pn, p->n, pf, p->nfetches, g->device, &pl)) != MS_OK) goto done;
    char line[1024];
    kn_placement_summary(&pl, pn, kn_backend_name(g->device), line, sizeof line);
    MS_INFO("placement: %s", line);
    if (pl.ndevice == 0) goto done; /* the host plan, unchanged */

    p->on_dev = calloc((size_t)p->n + 1, 1);
    if (p->on_dev == NULL) goto oom;
    for (int k = 0; k < p->n; k++) {
        rt_gnode *n = &g->nodes[p->order[k]];
        if (pl.side[k] != KN_SIDE_DEVICE) continue;
        p->on_dev[k] = 1;
        const kn_kernel *dk = kn_backend_kernel(g->device, n->kn.op);
        if (n->kernel == NULL) n->kernel = dk;
        if (n->kernel != dk) {
            st = ms_errf(MS_EINTERNAL, "node '%s' (%s) is bound to another backend than %s",
                         n->name, n->kn.op, kn_backend_name(g->device));
            goto done;
        }
    }
    int nslots = p->nslots + pl.ncopies;
    p->copies = calloc((size_t)pl.ncopies + 1, sizeof(*p->copies));
    p->in_off = calloc((size_t)p->n + 1, sizeof(int));
    p->in_slot = calloc((size_t)total_in + 1, sizeof(int));
    int *uses = calloc((size_t)nslots + 1, sizeof(int));
    unsigned char *fed = realloc(p->fed, (size_t)nslots + 1);
    if (fed) p->fed = fed;
    if (!p->copies || !p->in_off || !p->in_slot || !uses || !fed) {
        free(uses);
        goto oom;
    }
    memset(p->fed + p->nslots, 0, (size_t)pl.ncopies + 1);
    /* the slot of (plan position or -1, output or feed) */
#define SLOT_OF(e_) ((e_).node < 0 ? p->feed_slot[(e_).out] : p->slot_base[p->order[(e_).node]] + (e_).out)
    for (int c = 0; c < pl.ncopies; c++) {
        const kn_place_copy *cp = &pl.copies[c];
        int from_const = cp->node >= 0 && cp->to == KN_SIDE_DEVICE &&
                         strcmp(pn[cp->node].op, "Const") == 0;
        p->copies[c] = (rt_plan_copy){.src = SLOT_OF(((kn_place_in){cp->node, cp->out})),
                                      .dst = p->nslots + c,
                                      .to_device = cp->to == KN_SIDE_DEVICE,
                                      .at = cp->first_consumer,
                                      .const_node = from_const ? p->order[cp->node] : -1};
        if (!from_const) uses[p->copies[c].src]++; /* a Const's copy is made once, at build */
    }
    for (int k = 0, at = 0; k < p->n; k++) {
        p->in_off[k] = at;
        for (int i = 0; i < pn[k].nin; i++, at++) {
            kn_place_in e = pin[at];
            kn_side from = e.node < 0 ? KN_SIDE_HOST : pl.side[e.node];
            int s = SLOT_OF(e);
            if (from != pl.side[k])
                for (int c = 0; c < pl.ncopies; c++)
                    if (pl.copies[c].node == e.node && pl.copies[c].out == e.out &&
                        pl.copies[c].to == pl.side[k]) {
                        s = p->copies[c].dst;
                        break;
                    }
            p->in_slot[at] = s;
            uses[s]++;
        }
    }
    for (int f = 0; f < p->nfetches; f++) {
        kn_place_in e = pf[f];
        if (e.node >= 0 && pl.side[e.node] == KN_SIDE_DEVICE)
            for (int c = 0; c < pl.ncopies; c++)
                if (pl.copies[c].node == e.node && pl.copies[c].out == e.out &&
                    pl.copies[c].to == KN_SIDE_HOST) {
                    p->fetch_slot[f] = p->copies[c].dst;
                    break;
                }
        uses[p->fetch_slot[f]]++;
    }
#undef SLOT_OF
    free(p->uses);
    p->uses = uses;
    p->nslots = nslots;
    p->ncopies = pl.ncopies;
    p->device = g->device;
    goto done;
oom:
    st = ms_errf(MS_ENOMEM, "out of memory placing an execution plan");
done:
    kn_placement_free(&pl);
    free(pos);
    free(pn);
    free(pin);
    free(pf);
    return st;
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
    if (g->device != NULL && (st = plan_place(p, g, remap)) != MS_OK) goto fail;
    p->maxio = 1;
    for (int i = 0; i < p->n; i++) {
        const rt_gnode *n = &g->nodes[p->order[i]];
        if (n->nin > p->maxio) p->maxio = n->nin;
        if (n->nout > p->maxio) p->maxio = n->nout;
    }
    for (int i = 0; i < p->n; i++) {
        if ((st = rt_gnode_prepare(g, p->order[i])) != MS_OK) goto fail;
        if (g->nodes[p->order[i]].kernel->stateful) p->stateful = 1;
    }
    /* constants go to the device once, here, not per request */
    for (int c = 0; c < p->ncopies; c++) {
        rt_plan_copy *cp = &p->copies[c];
        if (cp->const_node < 0) continue;
        rt_tensor *v = rt_gnode_const_value(&g->nodes[cp->const_node]);
        if (v == NULL) {
            st = ms_errf(MS_EINTERNAL, "Const '%s' has no value", g->nodes[cp->const_node].name);
            goto fail;
        }
        if ((st = kn_backend_to_device(p->device, v, &cp->value)) != MS_OK) {
            st = ms_errwrap(st, "copy of Const '%s' to the device (%s)",
                            g->nodes[cp->const_node].name, kn_backend_name(p->device));
            goto fail;
        }
    }
    /* device tensors from one arena per feed shapes, sized by the first run
     * of those shapes (DCMSERVE_DEVICE_ARENA=0: the backend's own allocator) */
    if (p->device && rt_device_arenas(p->device) && (st = plan_mem_init(p)) != MS_OK)
        goto fail;
    if (profile_on() && (p->prof = calloc(2 * (size_t)p->n + 3, sizeof(uint64_t))) == NULL) goto oom;
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

/* Bytes a slot holds against the request's budget (0: a view of another
 * buffer, a feed, or no budget). */
static void release_slot(rt_tensor **slots, int *uses, uint64_t *held, ms_budget *b, int s) {
    if (--uses[s] <= 0 && slots[s]) {
        rt_tensor_unref(slots[s]);
        slots[s] = NULL;
        ms_budget_give(b, held[s]);
        held[s] = 0;
    }
}

/* An output counts against the budget unless it shares a buffer with one of
 * the node's inputs (Identity, Reshape and other views). */
static uint64_t output_bytes(const rt_tensor *t, rt_tensor *const *in, int nin) {
    if (t == NULL || t->dtype == RT_DT_STRING || !rt_dtype_is_pod(t->dtype)) return 0;
    for (int i = 0; i < nin; i++)
        if (in[i] != NULL && in[i]->buf == t->buf) return 0;
    return (uint64_t)rt_tensor_nbytes(t);
}

/* The copy steps of a placed plan due at position k, through the device
 * backend's table. */
static ms_status run_copies(const rt_plan *p, int *next, int k, rt_tensor **slots, int *uses,
                             uint64_t *held, ms_budget *b, mem_rec *rec) {
    for (; *next < p->ncopies && p->copies[*next].at == k; (*next)++) {
        const rt_plan_copy *c = &p->copies[*next];
        if (c->value != NULL) { /* a constant, on the device since the build */
            slots[c->dst] = rt_tensor_ref(c->value);
            continue;
        }
        if (slots[c->src] == NULL)
            return ms_errf(MS_EINTERNAL, "copy to the %s: its source was not computed",
                           c->to_device ? "device" : "host");
        ms_status st = c->to_device ? kn_backend_to_device(p->device, slots[c->src], &slots[c->dst])
                                    : kn_backend_to_host(p->device, slots[c->src], &slots[c->dst]);
        if (st != MS_OK)
            return ms_errwrap(st, "copy to the %s (%s)", c->to_device ? "device" : "host",
                              kn_backend_name(p->device));
        if (rec != NULL && rec->cap >= 0 && is_device_tensor(slots[c->dst]))
            rec_add(rec, c->dst, 2 * k, (uint64_t)rt_tensor_nbytes(slots[c->dst]));
        release_slot(slots, uses, held, b, c->src);
    }
    return MS_OK;
}

/* The start of a run of a plan with device arenas: the arena of these feed
 * shapes (an idle one, else a new one), or, for shapes not seen yet, the
 * sizing of them by this run (one run at a time). Shapes beyond MEM_KEYS,
 * and runs while another sizes, use the backend's own allocator. */
static ms_status mem_begin(const rt_plan *p, rt_tensor *const *feeds, mem_key **key,
                           mem_inst **inst, void **base, mem_rec *rec, mem_rec **rp) {
    plan_mem *m = p->mem;
    pthread_mutex_lock(&m->mu);
    int k = mem_find_key(m, feeds, p->nfeeds);
    if (k >= 0) {
        *key = &m->keys[k];
        if ((*inst = (*key)->idle) != NULL) (*key)->idle = (*inst)->next;
    } else if (!m->sizing && m->nkeys < MEM_KEYS) {
        m->sizing = 1;
        *rp = rec;
    }
    pthread_mutex_unlock(&m->mu);
    if (*key != NULL && *inst == NULL) { /* runs in parallel: one more arena */
        mem_inst *ni = calloc(1, sizeof(*ni));
        char what[300];
        snprintf(what, sizeof what, "a device arena of a plan of %d nodes (run in parallel)", p->n);
        ms_status st = ni ? p->device->iface.arena_new(p->device, what, (*key)->total ? (*key)->total : 1,
                                                       &ni->arena)
                          : ms_errf(MS_ENOMEM, "out of memory");
        if (st != MS_OK) {
            free(ni);
            return st;
        }
        *inst = ni;
        pthread_mutex_lock(&m->mu);
        (*key)->ninst++;
        pthread_mutex_unlock(&m->mu);
    }
    if (*inst != NULL) {
        ms_status st = p->device->iface.arena_begin(p->device, (*inst)->arena, base);
        if (st != MS_OK) {
            pthread_mutex_lock(&m->mu);
            (*inst)->next = (*key)->idle;
            (*key)->idle = *inst;
            pthread_mutex_unlock(&m->mu);
            *inst = NULL;
            return st;
        }
    }
    if (*rp != NULL) {
        rec->root = malloc(sizeof(int) * ((size_t)p->nslots + 1));
        if (rec->root == NULL) {
            rec->cap = -1; /* records nothing */
        } else {
            for (int s = 0; s < p->nslots; s++) rec->root[s] = -1;
        }
    }
    return MS_OK;
}

/* The planned regions of step `step` for this thread's kernels: its new
 * tensors and its temporaries. */
static void mem_step(const mem_key *key, void *base, int step) {
    int a = key->step_first[step], b = key->step_first[step + 1];
    int ta = key->tmp_first[step], tb = key->tmp_first[step + 1];
    if (b > a || tb > ta)
        kn_devout_step(base, key->bufs + a, b - a, key->bufs + key->nbufs + ta, tb - ta);
}

/* The end of the run, after every tensor of it is released: the arena is
 * idle again (its work queued on this thread's stream is ordered before the
 * next run's by arena_begin). */
static void mem_end(const rt_plan *p, mem_key *key, mem_inst *inst, mem_rec *rec, mem_rec *rp) {
    plan_mem *m = p->mem;
    if (inst != NULL) {
        p->device->iface.arena_end(p->device, inst->arena);
        pthread_mutex_lock(&m->mu);
        inst->next = key->idle;
        key->idle = inst;
        pthread_mutex_unlock(&m->mu);
    }
    if (rp != NULL) {
        pthread_mutex_lock(&m->mu);
        m->sizing = 0;
        pthread_mutex_unlock(&m->mu);
        free(rec->t);
        free(rec->root);
        free(rec->tmp);
    }
}

/* What a run's steps share. */
typedef struct run_state {
    const rt_plan *p;
    kn_ctx *ctx;
    rt_hostctx *host;
    void *caller_host;
    rt_tensor **slots;
    int *uses;
    uint64_t *held;
    mem_key *key;
    void *base;   /* the arena's base, or NULL (no arena) */
    mem_rec *rp;  /* a sizing run's record, or NULL */
    int *next_copy;
    rt_tensor **in, **out; /* scratch of p->maxio each: the tensors of the node running */
} run_state;

/* The inputs of the node at plan position k, from their slots. */
static ms_status node_inputs(run_state *r, int k, rt_tensor **in) {
    const rt_plan *p = r->p;
    rt_gnode *n = &p->g->nodes[p->order[k]];
    const int *in_slot = p->in_slot ? p->in_slot + p->in_off[k] : NULL;
    for (int i = 0; i < n->nin; i++) {
        in[i] = r->slots[in_slot ? in_slot[i] : p->slot_base[n->in[i].node] + n->in[i].out];
        if (in[i] == NULL)
            return ms_errf(MS_EINTERNAL, "node '%s': input %d (from '%s:%d') was not computed",
                           n->name, i, p->g->nodes[n->in[i].node].name, n->in[i].out);
    }
    return MS_OK;
}

static void node_release_inputs(run_state *r, int k) {
    const rt_plan *p = r->p;
    rt_gnode *n = &p->g->nodes[p->order[k]];
    const int *in_slot = p->in_slot ? p->in_slot + p->in_off[k] : NULL;
    for (int i = 0; i < n->nin; i++)
        release_slot(r->slots, r->uses, r->held, r->ctx->budget,
                     in_slot ? in_slot[i] : p->slot_base[n->in[i].node] + n->in[i].out);
}

/* The node's outputs into their slots (the request's budget taken), then,
 * unless keep_inputs, its inputs released. Takes the references in out. */
static ms_status node_store(run_state *r, int k, rt_tensor *const *in, rt_tensor **out,
                            int keep_inputs) {
    const rt_plan *p = r->p;
    int v = p->order[k];
    rt_gnode *n = &p->g->nodes[v];
    ms_status st = MS_OK;
    int base = p->slot_base[v];
    const int *in_slot = p->in_slot ? p->in_slot + p->in_off[k] : NULL;
    if (r->rp) rec_node(r->rp, 2 * k + 1, base, out, n->nout, in, in_slot, n->nin);
    for (int i = 0; i < n->nout; i++) {
        int s = base + i;
        if (st != MS_OK || p->fed[s] || r->uses[s] <= 0) {
            rt_tensor_unref(out[i]); /* a feed wins; unused outputs go back now */
            continue;
        }
        if (out[i] == NULL) {
            st = ms_errf(MS_EINTERNAL, "node '%s' (%s) produced no output %d", n->name,
                         n->kn.op, i);
            continue;
        }
        r->slots[s] = out[i];
        uint64_t nb = r->ctx->budget ? output_bytes(out[i], in, n->nin) : 0;
        /* The node is named only when the budget refuses (no formatting per run). */
        if (nb > 0 && ms_budget_take(r->ctx->budget, nb, NULL) != MS_OK) {
            char what[300];
            snprintf(what, sizeof what, "node '%s' (%s) output %d", n->name, n->kn.op, i);
            st = ms_budget_take(r->ctx->budget, nb, what);
        }
        if (nb > 0 && st == MS_OK) r->held[s] = nb;
    }
    if (!keep_inputs) node_release_inputs(r, k);
    return st;
}

/* Runs the node at plan position k: its kernel, then node_store. */
static ms_status run_node(run_state *r, int k, int keep_inputs) {
    const rt_plan *p = r->p;
    rt_gnode *n = &p->g->nodes[p->order[k]];
    rt_tensor **in = r->in, **out = r->out;
    ms_status st = node_inputs(r, k, in);
    if (st != MS_OK) return st;
    memset(out, 0, sizeof(rt_tensor *) * (size_t)(n->nout > 0 ? n->nout : 1));
    r->host->gnode = n;
    r->ctx->host = r->host;
    if (r->base) mem_step(r->key, r->base, 2 * k + 1);
    if (r->rp) kn_devtmp_record_begin();
    st = n->kernel->compute(r->ctx, &n->kn, n->state, in, out);
    if (r->rp) rec_tmps(r->rp, 2 * k + 1);
    if (r->base) kn_devout_end();
    r->ctx->host = r->caller_host;
    if (st != MS_OK) {
        for (int i = 0; i < n->nout; i++) rt_tensor_unref(out[i]);
        /* Kernels usually name their node already ("node 'x'" or, as the
         * host ops do, "'x' (op)"); say it once. */
        char who[600], who2[600];
        snprintf(who, sizeof who, "node '%s'", n->name);
        snprintf(who2, sizeof who2, "'%s' (", n->name);
        if (strncmp(ms_errmsg(), who, strlen(who)) != 0 &&
            strncmp(ms_errmsg(), who2, strlen(who2)) != 0)
            st = ms_errwrap(st, "node '%s' (%s)", n->name, n->kn.op);
        return st;
    }
    return node_store(r, k, in, out, keep_inputs);
}

/* Drops the outputs a segment's nodes stored (a capture that failed). */
static void seg_drop_outputs(run_state *r, const mem_seg *sg) {
    const rt_plan *p = r->p;
    for (int k = sg->k0; k < sg->k1; k++) {
        int v = p->order[k];
        for (int i = 0; i < p->g->nodes[v].nout; i++) {
            int s = p->slot_base[v] + i;
            if (p->fed[s] || r->slots[s] == NULL) continue;
            rt_tensor_unref(r->slots[s]);
            r->slots[s] = NULL;
            ms_budget_give(r->ctx->budget, r->held[s]);
            r->held[s] = 0;
        }
    }
}

/* 1 when slot s is an output of a node of the segment. */
static int seg_makes(const rt_plan *p, const mem_seg *sg, int s) {
    for (int k = sg->k0; k < sg->k1; k++) {
        int v = p->order[k];
        if (s >= p->slot_base[v] && s < p->slot_base[v] + p->g->nodes[v].nout) return 1;
    }
    return 0;
}

/* 1 when a graph may read t's bytes in later runs: a region of this arena
 * or (a view of) a constant the plan copied to the device at build. */
static int seg_stable(run_state *r, const rt_tensor *t) {
    const unsigned char *lo = r->base, *hi = lo + r->key->total, *q = t->data;
    if (q >= lo && q + rt_tensor_nbytes(t) <= hi) return 1;
    for (int c = 0; c < r->p->ncopies; c++)
        if (r->p->copies[c].value != NULL && r->p->copies[c].value->buf == t->buf) return 1;
    return 0;
}

/* What a replay must make of the outputs the segment's nodes stored, and
 * the inputs it reads from outside: 1 when each output is a region of the
 * arena or a view of one of its node's inputs and each outside input is
 * stable (seg_stable); else the segment is not replayable. */
static int seg_describe(run_state *r, const mem_seg *sg, seg_out *d, seg_in *ins, int *nins) {
    const rt_plan *p = r->p;
    const unsigned char *lo = r->base, *hi = lo + r->key->total;
    int at = 0;
    *nins = 0;
    for (int k = sg->k0; k < sg->k1; k++) {
        if (!p->on_dev[k]) continue; /* a host Const: run again by a replay */
        int v = p->order[k];
        rt_gnode *n = &p->g->nodes[v];
        rt_tensor **in = r->in;
        if (node_inputs(r, k, in) != MS_OK) return 0;
        const int *in_slot = p->in_slot + p->in_off[k];
        for (int j = 0; j < n->nin; j++) {
            if (seg_makes(p, sg, in_slot[j])) continue;
            if (in[j]->buf == NULL || !seg_stable(r, in[j])) return 0;
            ins[(*nins)++] = (seg_in){.slot = in_slot[j], .data = in[j]->data,
                                      .dt = in[j]->dtype, .shape = in[j]->shape};
        }
        for (int i = 0; i < n->nout; i++, at++) {
            int s = p->slot_base[v] + i;
            rt_tensor *t = p->fed[s] ? NULL : r->slots[s];
            d[at] = (seg_out){.kind = SEG_NONE};
            if (t == NULL) continue;
            if (t->buf == NULL || t->buf->device == 0) return 0;
            d[at] = (seg_out){.dt = t->dtype, .shape = t->shape, .dev = t->buf->device,
                              .bytes = (uint64_t)rt_tensor_nbytes(t)};
            for (int j = 0; j < n->nin && d[at].kind == SEG_NONE; j++)
                if (in[j]->buf == t->buf && in[j]->data == t->data) {
                    d[at].kind = SEG_VIEW;
                    d[at].view_in = j;
                }
            if (d[at].kind == SEG_VIEW) continue;
            const unsigned char *q = t->data;
            if (q < lo || q + d[at].bytes > hi) return 0;
            d[at].kind = SEG_REGION;
            d[at].off = (uint64_t)(q - lo);
        }
    }
    return 1;
}

/* The copy steps inside a segment, at its start: by construction only the
 * plan's constants, made at build (slot references, no device work). */
static ms_status seg_copies(run_state *r, const mem_seg *sg) {
    ms_status st = MS_OK;
    for (int k = sg->k0 + 1; k < sg->k1 && st == MS_OK && r->p->ncopies; k++)
        st = run_copies(r->p, r->next_copy, k, r->slots, r->uses, r->held, r->ctx->budget, NULL);
    return st;
}

/* A replay: the segment's graph queued, then its nodes' outputs made as
 * the capture left them (no kernel runs). */
static ms_status seg_replay(run_state *r, mem_inst *inst, int sgi) {
    const rt_plan *p = r->p;
    const mem_seg *sg = &p->mem->seg[sgi];
    ms_status cst = seg_copies(r, sg);
    if (cst != MS_OK) return cst;
    /* the graph reads its outside inputs where the capture found them */
    for (int i = 0; i < inst->nins[sgi]; i++) {
        const seg_in *e = &inst->ins[sgi][i];
        const rt_tensor *t = r->slots[e->slot];
        if (t == NULL || t->data != e->data || t->dtype != e->dt ||
            !rt_shape_equal(&t->shape, &e->shape)) { /* e.g. a copy of another size: no arena */
            ms_status st = MS_OK;
            for (int k = sg->k0; k < sg->k1 && st == MS_OK; k++) st = run_node(r, k, 0);
            return st;
        }
    }
    ms_status st = p->device->iface.graph_launch(p->device, inst->graph[sgi]);
    if (st != MS_OK) return ms_errwrap(st, "a CUDA graph of %d nodes", sg->k1 - sg->k0);
    const seg_out *d = inst->desc[sgi];
    for (int k = sg->k0; k < sg->k1 && st == MS_OK; k++) {
        if (!p->on_dev[k]) { /* a host Const */
            st = run_node(r, k, 0);
            continue;
        }
        rt_gnode *n = &p->g->nodes[p->order[k]];
        rt_tensor **in = r->in, **out = r->out;
        memset(out, 0, sizeof(rt_tensor *) * (size_t)(n->nout > 0 ? n->nout : 1));
        if ((st = node_inputs(r, k, in)) != MS_OK) break;
        for (int i = 0; i < n->nout; i++, d++) {
            if (st != MS_OK || d->kind == SEG_NONE) continue;
            if (d->kind == SEG_VIEW) {
                st = rt_tensor_view(in[d->view_in], &d->shape, &out[i]);
                continue;
            }
            rt_buf *b = rt_buf_wrap((unsigned char *)r->base + d->off, (size_t)d->bytes, NULL,
                                    NULL);
            if (b == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory");
                continue;
            }
            b->device = d->dev;
            st = rt_tensor_new_on(d->dt, &d->shape, b, 0, &out[i]);
            rt_buf_unref(b);
        }
        if (st != MS_OK) {
            for (int i = 0; i < n->nout; i++) rt_tensor_unref(out[i]);
            break;
        }
        st = node_store(r, k, in, out, 0);
    }
    return st;
}

/* The first run of a segment on this arena: its kernels' device work is
 * captured into a graph (none of it runs), which is then launched and kept
 * for later runs when it is replayable; else (a kernel that synchronises,
 * falls back to the CPU, fails under capture, or uses memory outside the
 * arena) the segment runs again without capture, and never tries again on
 * this arena. */
static ms_status seg_capture(run_state *r, mem_inst *inst, int sgi) {
    const rt_plan *p = r->p;
    const mem_seg *sg = &p->mem->seg[sgi];
    kn_backend *dev = p->device;
    const char *why = NULL;
    char why_buf[400];
    inst->tried[sgi] = 1;
    ms_status st = seg_copies(r, sg);
    if (st != MS_OK) return st;
    st = dev->iface.graph_begin(dev);
    if (st != MS_OK) {
        snprintf(why_buf, sizeof why_buf, "%s", ms_errmsg());
        why = why_buf;
    }
    int k = sg->k0;
    for (; why == NULL && k < sg->k1; k++)
        if ((st = run_node(r, k, 1)) != MS_OK) break;
    void *graph = NULL;
    if (why == NULL) {
        if (st != MS_OK) {
            snprintf(why_buf, sizeof why_buf, "under capture: %s", ms_errmsg());
            why = why_buf;
            (void)dev->iface.graph_end(dev, &graph);
        } else if (dev->iface.graph_end(dev, &graph) != MS_OK || graph == NULL) {
            snprintf(why_buf, sizeof why_buf, "%s", ms_errmsg());
            why = why_buf;
        }
    }
    seg_out *d = NULL;
    seg_in *ins = NULL;
    int nins = 0;
    if (why == NULL && graph != NULL) {
        int nin = 0;
        for (int j = sg->k0; j < sg->k1; j++) nin += p->g->nodes[p->order[j]].nin;
        d = calloc((size_t)sg->nout + 1, sizeof(*d));
        ins = calloc((size_t)nin + 1, sizeof(*ins));
        if (d == NULL || ins == NULL) why = "out of memory";
        else if (!seg_describe(r, sg, d, ins, &nins))
            why = "a tensor outside the plan's arena and constants";
    }
    if (why == NULL && graph != NULL &&
        (st = dev->iface.graph_launch(dev, graph)) != MS_OK) { /* a real device error */
        dev->iface.graph_free(dev, graph);
        free(d);
        free(ins);
        seg_drop_outputs(r, sg);
        return ms_errwrap(st, "a CUDA graph of %d nodes", sg->k1 - sg->k0);
    }
    if (why == NULL && graph != NULL) {
        inst->graph[sgi] = graph;
        inst->desc[sgi] = d;
        inst->ins[sgi] = ins;
        inst->nins[sgi] = nins;
        MS_INFO("CUDA graph: %d nodes from '%s' captured on %s, replayed by later runs of "
                "these feed shapes on this arena",
                sg->k1 - sg->k0, p->g->nodes[p->order[sg->k0]].name, kn_backend_name(dev));
        for (int j = sg->k0; j < sg->k1; j++) node_release_inputs(r, j);
        return MS_OK;
    }
    /* not replayable: nothing captured ran; run the segment as usual */
    MS_INFO("CUDA graph: %d nodes from '%s' not captured (%s): they run without a graph "
            "on this arena",
            sg->k1 - sg->k0, p->g->nodes[p->order[sg->k0]].name, why);
    if (graph != NULL) dev->iface.graph_free(dev, graph);
    free(d);
    free(ins);
    seg_drop_outputs(r, sg);
    ms_err_clear();
    for (k = sg->k0; k < sg->k1; k++)
        if ((st = run_node(r, k, 0)) != MS_OK) return st;
    return MS_OK;
}

/* The per-arena graph tables, on first use; 0 when out of memory (no graphs). */
static int inst_graphs(const plan_mem *m, mem_inst *inst) {
    if (inst->graph != NULL) return 1;
    inst->graph = calloc((size_t)m->nseg, sizeof(*inst->graph));
    inst->desc = calloc((size_t)m->nseg, sizeof(*inst->desc));
    inst->tried = calloc((size_t)m->nseg, 1);
    inst->ins = calloc((size_t)m->nseg, sizeof(*inst->ins));
    inst->nins = calloc((size_t)m->nseg, sizeof(*inst->nins));
    if (inst->graph && inst->desc && inst->tried && inst->ins && inst->nins) return 1;
    free(inst->graph);
    free(inst->desc);
    free(inst->tried);
    free(inst->ins);
    free(inst->nins);
    inst->graph = NULL;
    inst->desc = NULL;
    inst->tried = NULL;
    inst->ins = NULL;
    inst->nins = NULL;
    return 0;
}

ms_status rt_plan_run(const rt_plan *p, kn_ctx *ctx, rt_vars *vars, rt_tensor *const *feeds,
                      rt_tensor **outs) {
    rt_graph *g = p->g;
    ms_status st = MS_OK;
    rt_hostctx host = {.graph = g, .vars = vars};
    void *caller_host = ctx->host;
    /* Small plans keep their per-run state on the stack (no allocation per call). */
    enum { SMALL_SLOTS = 256 };
    rt_tensor *slots_s[SMALL_SLOTS];
    int uses_s[SMALL_SLOTS];
    uint64_t held_s[SMALL_SLOTS];
    int small = p->nslots + 1 <= SMALL_SLOTS;
    rt_tensor **slots = small ? slots_s : calloc((size_t)p->nslots + 1, sizeof(*slots));
    int *uses = small ? uses_s : malloc(sizeof(int) * ((size_t)p->nslots + 1));
    uint64_t *held = small ? held_s : calloc((size_t)p->nslots + 1, sizeof(*held));
    /* a node's input and output tensors: any count (RestoreV2 of thousands) */
    enum { SMALL_IO = 64 };
    rt_tensor *io_s[2 * SMALL_IO];
    int nio = p->maxio > SMALL_IO ? p->maxio : SMALL_IO;
    rt_tensor **io = nio == SMALL_IO ? io_s : malloc(sizeof(*io) * 2 * (size_t)nio);
    if (slots == NULL || uses == NULL || held == NULL || io == NULL) {
        if (!small) {
            free(slots);
            free(uses);
            free(held);
        }
        if (io != io_s) free(io);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    if (small) {
        memset(slots_s, 0, sizeof(slots_s[0]) * ((size_t)p->nslots + 1));
        memset(held_s, 0, sizeof(held_s[0]) * ((size_t)p->nslots + 1));
    }
    memcpy(uses, p->uses, sizeof(int) * (size_t)p->nslots);
    mem_key *key = NULL;
    mem_inst *inst = NULL;
    void *arena_base = NULL;
    mem_rec rec = {0}, *rp = NULL;
    if (p->mem != NULL && (st = mem_begin(p, feeds, &key, &inst, &arena_base, &rec, &rp)) != MS_OK) {
        if (!small) {
            free(slots);
            free(uses);
            free(held);
        }
        if (io != io_s) free(io);
        return st;
    }
    for (int i = 0; i < p->nfeeds; i++) {
        int s = p->feed_slot[i];
        if (slots[s] == NULL) slots[s] = rt_tensor_ref(feeds[i]);
    }
    int next_copy = 0;
    run_state r = {.p = p, .ctx = ctx, .host = &host, .caller_host = caller_host, .slots = slots,
                   .uses = uses, .held = held, .key = key, .base = arena_base, .rp = rp,
                   .next_copy = &next_copy, .in = io, .out = io + nio};
    /* CUDA graphs: on an arena of sized shapes (not in a sizing run) */
    int graphs =
        inst != NULL && arena_base != NULL && p->mem->nseg > 0 && inst_graphs(p->mem, inst);
    for (int k = 0; k < p->n && st == MS_OK; k++) {
        if (ctx->cancelled && atomic_load(ctx->cancelled)) {
            st = ms_errf(MS_ECANCELED, "request cancelled");
            break;
        }
        uint64_t t0 = p->prof ? prof_now(p) : 0;
        if (p->ncopies) {
            if (arena_base) mem_step(key, arena_base, 2 * k);
            if (rp) kn_devtmp_record_begin();
            st = run_copies(p, &next_copy, k, slots, uses, held, ctx->budget, rp);
            if (rp) rec_tmps(rp, 2 * k);
            if (arena_base) kn_devout_end();
            if (st != MS_OK) break;
            if (p->prof) {
                prof_add(p, 2 * k, t0);
                t0 = prof_now(p);
            }
        }
        int sgi = graphs ? p->mem->seg_at[k] : -1;
        if (sgi >= 0 && (inst->graph[sgi] != NULL || !inst->tried[sgi])) {
            st = inst->graph[sgi] != NULL ? seg_replay(&r, inst, sgi) : seg_capture(&r, inst, sgi);
            if (p->prof) prof_add(p, 2 * k + 1, t0); /* a segment: charged to its first node */
            k = p->mem->seg[sgi].k1 - 1;
            continue;
        }
        st = run_node(&r, k, 0);
        if (p->prof) prof_add(p, 2 * k + 1, t0);
    }
    if (st == MS_OK && p->ncopies) {
        uint64_t t0 = p->prof ? prof_now(p) : 0;
        if (arena_base) mem_step(key, arena_base, 2 * p->n);
        if (rp) kn_devtmp_record_begin();
        st = run_copies(p, &next_copy, p->n, slots, uses, held, ctx->budget, rp);
        if (rp) rec_tmps(rp, 2 * p->n);
        if (arena_base) kn_devout_end();
        if (p->prof) prof_add(p, 2 * p->n, t0);
    }
    if (st == MS_OK && p->prof) __atomic_fetch_add(&p->prof[2 * p->n + 2], 1, __ATOMIC_RELAXED);
    if (st == MS_OK && rp) st = mem_size(p, rp, feeds);
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
    for (int s = 0; s < p->nslots; s++) {
        rt_tensor_unref(slots[s]);
        ms_budget_give(ctx->budget, held[s]);
    }
    if (p->mem != NULL) mem_end(p, key, inst, &rec, rp);
    if (!small) {
        free(slots);
        free(uses);
        free(held);
    }
    if (io != io_s) free(io);
    return st;
}

/* ================= one op alone (tests, tools) ================= */

ms_status rt_op_run1(kn_backend *be, const kn_kernel *const *host_ops, const Tensorflow__NodeDef *def,
                     rt_tensor *const *in, int nin, rt_tensor **outs, int nout) {
    kn_node kn = {.name = def->name, .op = def->op, .def = def, .attrs = &rt_nodedef_attrs,
                  .nin = nin, .nout = nout};
    const kn_kernel *k = rt_ops_host_kernel(host_ops, def->op);
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
