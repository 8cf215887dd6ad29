/* util_testdev.c - the CPU-run test device backend and the DICOM helpers of
 * the device tests (util_testdev.h). */
#include "util_testdev.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_ctx.h"
#include "kn_memplan.h"

ut_devcount ut_dev;

static kn_backend *g_cpu;
static int g_mem = 7;
static uint8_t g_key = 0xA5;

void ut_testdev_setup(kn_backend *cpu, int mem, uint8_t key) {
    g_cpu = cpu;
    g_mem = mem;
    g_key = key;
}

typedef struct testdev {
    kn_backend b;
    char name[32];
    const char *const *ops;
    int flags;
    kn_kernel table[256];
    int ntable;
} testdev;

/* t's values in the other memory kind: a new buffer, or the planned region
 * of the running step when there is one (arena devices, to the device). */
static ms_status recode(const rt_tensor *t, int to_dev, int arenas, rt_tensor **out) {
    if (t->dtype == RT_DT_STRING)
        return ms_errf(MS_ENOTSUP, "testdev: no strings");
    if ((t->buf->device == g_mem) == to_dev)
        return ms_errf(MS_EINTERNAL, "testdev: tensor already in %s memory",
                       to_dev ? "device" : "host");
    size_t nb = rt_tensor_nbytes(t);
    void *planned = to_dev && arenas ? kn_devout_take(nb) : NULL;
    rt_tensor *c = NULL;
    ms_status st = MS_OK;
    if (planned != NULL) {
        rt_buf *b = rt_buf_wrap(planned, nb, NULL, NULL);
        if (b == NULL)
            return ms_errf(MS_ENOMEM, "out of memory");
        st = rt_tensor_new_on(t->dtype, &t->shape, b, 0, &c);
        rt_buf_unref(b);
        if (st == MS_OK)
            memcpy(c->data, t->data, nb);
        ut_dev.regions++;
    } else {
        st = rt_tensor_clone(t, &c);
    }
    if (st != MS_OK)
        return st;
    uint8_t *p = c->data;
    for (size_t i = 0; i < nb; i++)
        p[i] ^= g_key;
    c->buf->device = to_dev ? g_mem : 0;
    *out = c;
    return MS_OK;
}

static ms_status dev_to_device(kn_backend *b, rt_tensor *host, rt_tensor **out) {
    if (ut_dev.fail_copies)
        return ms_errf(MS_EDEVICE, "testdev: copy refused");
    ut_dev.h2d++;
    if (ut_dev.copies_unplanned)
        (void)kn_devout_take(0); /* its region passes, as one of another size would */
    return recode(host, 1, !ut_dev.copies_unplanned && (((testdev *)b->ctx)->flags & UT_TESTDEV_ARENAS),
                  out);
}

static ms_status dev_to_host(kn_backend *b, rt_tensor *dev, rt_tensor **out) {
    (void)b;
    ut_dev.d2h++;
    return recode(dev, 0, 0, out);
}

typedef struct dev_state {
    const kn_kernel *k;
    void *st;
    int arenas;
} dev_state;

static ms_status dev_prepare_in(const kn_node *node, rt_tensor *const *const_in, void **state,
                                int arenas) {
    dev_state *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ms_errf(MS_ENOMEM, "out of memory");
    s->k = kn_backend_kernel(g_cpu, node->op);
    s->arenas = arenas;
    ms_status st = s->k->prepare ? s->k->prepare(node, const_in, &s->st) : MS_OK;
    if (st != MS_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static ms_status dev_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    return dev_prepare_in(node, const_in, state, 0);
}

static ms_status dev_prepare_arenas(const kn_node *node, rt_tensor *const *const_in, void **state) {
    return dev_prepare_in(node, const_in, state, 1);
}

static void dev_release(void *state) {
    dev_state *s = state;
    if (s && s->k->release)
        s->k->release(s->st);
    free(s);
}

static int cap_on(void);
static ms_status cap_compute(kn_ctx *ctx, const kn_node *node, dev_state *s, rt_tensor *const *in,
                             rt_tensor **out);

static ms_status dev_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    dev_state *s = state;
    /* slots sized to the node, as the CUDA table's CPU fallback sizes them */
    const int nslots = node->nin + node->nout;
    rt_tensor **hin = calloc(nslots > 0 ? (size_t)nslots : 1, sizeof(*hin));
    ck_assert_ptr_nonnull(hin);
    rt_tensor **hout = hin + node->nin;
    ms_status st = MS_OK;
    ut_dev.runs++;
    for (int i = 0; i < node->nin && st == MS_OK; i++)
        if (in[i]->buf->device != g_mem)
            st =
                ms_errf(MS_EINTERNAL, "testdev: input %d of '%s' is in host memory", i, node->name);
    /* a temporary as the CUDA table takes a workspace: the plan's, else its own */
    if (st == MS_OK && s->arenas && cap_on()) {
        free(hin);
        return cap_compute(ctx, node, s, in, out);
    }
    uint64_t tbytes = 0;
    for (int i = 0; i < node->nin && st == MS_OK && s->arenas; i++)
        tbytes += rt_tensor_nbytes(in[i]);
    unsigned char *tmp = NULL, *own = NULL;
    if (st == MS_OK && s->arenas) {
        if (tbytes == 0)
            tbytes = 1;
        tmp = kn_devtmp_take(tbytes);
        if (tmp != NULL) {
            ut_dev.tmps++;
        } else {
            tmp = own = malloc(tbytes);
            ck_assert_ptr_nonnull(own);
            ut_dev.tmp_cache++;
        }
        memset(tmp, 0xEE, tbytes);
    }
    size_t at = 0;
    for (int i = 0; i < node->nin && st == MS_OK; i++) {
        if (tmp == NULL) {
            st = recode(in[i], 0, 0, &hin[i]);
            continue;
        }
        /* through the temporary: the input's device bytes, copied there */
        size_t nb = rt_tensor_nbytes(in[i]);
        memcpy(tmp + at, in[i]->data, nb);
        rt_buf *b = rt_buf_wrap(tmp + at, nb, NULL, NULL);
        ck_assert_ptr_nonnull(b);
        b->device = g_mem;
        rt_tensor *view = NULL;
        st = rt_tensor_new_on(in[i]->dtype, &in[i]->shape, b, 0, &view);
        rt_buf_unref(b);
        if (st == MS_OK)
            st = recode(view, 0, 0, &hin[i]);
        rt_tensor_unref(view);
        at += nb;
    }
    free(own);
    if (st == MS_OK)
        st = s->k->compute(ctx, node, s->st, hin, hout);
    for (int i = 0; i < node->nout && st == MS_OK; i++) {
        if (hout[i] == NULL)
            continue;
        int view = -1; /* a view of an input on the CPU is one on the device too */
        for (int j = 0; j < node->nin && view < 0; j++)
            if (hin[j] != NULL && hout[i]->buf == hin[j]->buf && hout[i]->data == hin[j]->data)
                view = j;
        st = view >= 0 ? rt_tensor_view(in[view], &hout[i]->shape, &out[i])
                       : recode(hout[i], 1, s->arenas, &out[i]);
    }
    for (int i = 0; i < nslots; i++)
        rt_tensor_unref(hin[i]);
    free(hin);
    return st;
}

static const kn_kernel *dev_kernel(kn_backend *b, const char *op) {
    testdev *d = b->ctx;
    if (d->flags & UT_TESTDEV_NONE)
        return NULL;
    const kn_kernel *k = kn_backend_kernel(g_cpu, op);
    if (k == NULL)
        return NULL;
    if (d->ops == NULL) {
        if (strncmp(op, "Parse", 5) == 0)
            return NULL;
    } else {
        int found = 0;
        for (int i = 0; d->ops[i] && !found; i++)
            found = strcmp(d->ops[i], op) == 0;
        if (!found)
            return NULL;
    }
    for (int i = 0; i < d->ntable; i++)
        if (strcmp(d->table[i].op, op) == 0)
            return &d->table[i];
    ck_assert_int_lt(d->ntable, 256);
    int ar = (d->flags & UT_TESTDEV_ARENAS) != 0;
    d->table[d->ntable] = (kn_kernel){.op = k->op,
                                      .prepare = ar ? dev_prepare_arenas : dev_prepare,
                                      .compute = dev_compute,
                                      .release = dev_release,
                                      .stateful = k->stateful};
    return &d->table[d->ntable++];
}

int ut_testdev_is_kernel(const kn_kernel *k) { return k != NULL && k->compute == dev_compute; }

static const char *dev_name(kn_backend *b) { return ((testdev *)b->ctx)->name; }

static void dev_free(kn_backend *b) { free(b->ctx); }

/* ---- arenas: host memory of the device's kind ---- */

static ms_status dev_arena_new(kn_backend *b, const char *what, uint64_t bytes, void **arena) {
    (void)b;
    (void)what;
    void *p = malloc(bytes + sizeof(uint64_t) + KN_MEMPLAN_ALIGN);
    if (p == NULL)
        return ms_errf(MS_ENOMEM, "testdev: no memory for %s", what);
    *(uint64_t *)p = bytes;
    ut_dev.arenas++;
    ut_dev.arena_bytes += bytes;
    *arena = p;
    return MS_OK;
}

static ms_status dev_arena_begin(kn_backend *b, void *arena, void **base) {
    (void)b;
    uintptr_t a = (uintptr_t)arena + sizeof(uint64_t);
    a = (a + KN_MEMPLAN_ALIGN - 1) / KN_MEMPLAN_ALIGN * KN_MEMPLAN_ALIGN;
    memset((void *)a, 0xCD, *(uint64_t *)arena); /* what a run left is not read by the next */
    *base = (void *)a;
    return MS_OK;
}

static void dev_arena_end(kn_backend *b, void *arena) {
    (void)b;
    (void)arena;
}

static void dev_arena_free(kn_backend *b, void *arena) {
    (void)b;
    ut_dev.arenas--;
    ut_dev.arena_bytes -= *(uint64_t *)arena;
    free(arena);
}

/* ---- graphs: capture and replay, emulated ---- */

enum { CAP_MAX_IO = 8 };
typedef struct cap_io {
    void *data;
    rt_dtype dt;
    rt_shape shape;
} cap_io;
typedef struct cap_op {
    const kn_node *node;
    dev_state *s;
    int nin, nout;
    cap_io in[CAP_MAX_IO], out[CAP_MAX_IO]; /* out[i].data NULL: a view, nothing to write */
    void *tmp;
    uint64_t tbytes;
} cap_op;
typedef struct cap_graph {
    int n, cap;
    cap_op *op;
} cap_graph;

static _Thread_local struct {
    cap_graph *g;
    int bad;
} tl_cap;

static int cap_on(void) { return tl_cap.g != NULL; }

/* The kernel run into host tensors hout from device-kind tensors at `in`;
 * view[o]: the input output o is a view of on the CPU (a view of the device
 * input on the device too), else -1. */
static ms_status cap_run(kn_ctx *ctx, const kn_node *node, dev_state *s, rt_tensor *const *in,
                         rt_tensor **hout, int *view) {
    rt_tensor *hin[CAP_MAX_IO] = {0};
    ms_status st = MS_OK;
    for (int i = 0; i < node->nin && st == MS_OK; i++)
        st = recode(in[i], 0, 0, &hin[i]);
    if (st == MS_OK)
        st = s->k->compute(ctx, node, s->st, hin, hout);
    for (int o = 0; o < node->nout; o++) {
        view[o] = -1;
        for (int i = 0; i < node->nin && view[o] < 0; i++)
            if (hout[o] != NULL && hin[i] != NULL && hout[o]->buf == hin[i]->buf &&
                hout[o]->data == hin[i]->data)
                view[o] = i;
    }
    for (int i = 0; i < node->nin; i++)
        rt_tensor_unref(hin[i]);
    return st;
}

/* Under capture: the outputs made as a run would (planned regions, views)
 * but not written, and the kernel recorded for the launch. */
static ms_status cap_compute(kn_ctx *ctx, const kn_node *node, dev_state *s, rt_tensor *const *in,
                             rt_tensor **out) {
    ck_assert_int_le(node->nin, CAP_MAX_IO);
    ck_assert_int_le(node->nout, CAP_MAX_IO);
    cap_graph *g = tl_cap.g;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->op = realloc(g->op, sizeof(*g->op) * (size_t)g->cap);
        ck_assert_ptr_nonnull(g->op);
    }
    cap_op *o = &g->op[g->n++];
    *o = (cap_op){.node = node, .s = s, .nin = node->nin, .nout = node->nout};
    uint64_t tbytes = 0;
    for (int i = 0; i < node->nin; i++) {
        o->in[i] = (cap_io){in[i]->data, in[i]->dtype, in[i]->shape};
        tbytes += rt_tensor_nbytes(in[i]);
    }
    o->tbytes = tbytes ? tbytes : 1;
    o->tmp = kn_devtmp_take(o->tbytes);
    if (o->tmp == NULL)
        tl_cap.bad = 1; /* the CUDA table's block cache under capture */
    rt_tensor *hout[CAP_MAX_IO] = {0};
    int view[CAP_MAX_IO];
    ms_status st = cap_run(ctx, node, s, in, hout, view);
    for (int i = 0; i < node->nout && st == MS_OK; i++) {
        if (hout[i] == NULL)
            continue;
        if (view[i] >= 0) { /* nothing to write at a launch */
            st = rt_tensor_view(in[view[i]], &hout[i]->shape, &out[i]);
            o->out[i].data = NULL;
            continue;
        }
        /* the planned region, not written: a capture runs nothing */
        size_t nb = rt_tensor_nbytes(hout[i]);
        void *planned = kn_devout_take(nb);
        if (planned == NULL) {
            tl_cap.bad = 1; /* outside the arena */
            st = recode(hout[i], 1, 0, &out[i]);
        } else {
            rt_buf *bf = rt_buf_wrap(planned, nb, NULL, NULL);
            ck_assert_ptr_nonnull(bf);
            bf->device = g_mem;
            st = rt_tensor_new_on(hout[i]->dtype, &hout[i]->shape, bf, 0, &out[i]);
            rt_buf_unref(bf);
            ut_dev.regions++;
        }
        if (st != MS_OK)
            break;
        o->out[i] = (cap_io){out[i]->data, out[i]->dtype, out[i]->shape};
    }
    for (int i = 0; i < CAP_MAX_IO; i++)
        rt_tensor_unref(hout[i]);
    return st;
}

static ms_status dev_graph_begin(kn_backend *b) {
    (void)b;
    ck_assert_ptr_null(tl_cap.g);
    tl_cap.g = calloc(1, sizeof(cap_graph));
    tl_cap.bad = 0;
    return MS_OK;
}

static void dev_graph_free(kn_backend *b, void *graph) {
    (void)b;
    cap_graph *g = graph;
    if (g != NULL)
        free(g->op);
    free(g);
}

static ms_status dev_graph_end(kn_backend *b, void **graph) {
    cap_graph *g = tl_cap.g;
    tl_cap.g = NULL;
    *graph = NULL;
    if (tl_cap.bad || ut_dev.refuse_graphs || g->n == 0) {
        dev_graph_free(b, g);
        ut_dev.refused++;
        return ms_errf(MS_ENOTSUP, "testdev: capture refused");
    }
    ut_dev.captures++;
    *graph = g;
    return MS_OK;
}

static ms_status dev_graph_launch(kn_backend *b, void *graph) {
    (void)b;
    cap_graph *g = graph;
    ut_dev.launches++;
    kn_ctx ctx = {.nthreads = 1};
    for (int k = 0; k < g->n; k++) {
        cap_op *o = &g->op[k];
        rt_tensor *in[CAP_MAX_IO] = {0}, *hout[CAP_MAX_IO] = {0};
        ms_status st = MS_OK;
        /* the inputs through the temporary, as a run reads them */
        memset(o->tmp, 0xEE, o->tbytes);
        size_t at = 0;
        for (int i = 0; i < o->nin && st == MS_OK; i++) {
            size_t nb = (size_t)rt_shape_nelem(&o->in[i].shape) * rt_dtype_size(o->in[i].dt);
            memcpy((unsigned char *)o->tmp + at, o->in[i].data, nb);
            rt_buf *bf = rt_buf_wrap((unsigned char *)o->tmp + at, nb, NULL, NULL);
            ck_assert_ptr_nonnull(bf);
            bf->device = g_mem;
            st = rt_tensor_new_on(o->in[i].dt, &o->in[i].shape, bf, 0, &in[i]);
            rt_buf_unref(bf);
            at += nb;
        }
        ut_dev.runs++;
        int view[CAP_MAX_IO];
        if (st == MS_OK)
            st = cap_run(&ctx, o->node, o->s, in, hout, view);
        for (int i = 0; i < o->nout && st == MS_OK; i++) {
            if (o->out[i].data == NULL || hout[i] == NULL || view[i] >= 0)
                continue;
            size_t nb = rt_tensor_nbytes(hout[i]);
            ck_assert_uint_eq(nb, (size_t)rt_shape_nelem(&o->out[i].shape) *
                                      rt_dtype_size(o->out[i].dt));
            unsigned char *d = o->out[i].data;
            memcpy(d, hout[i]->data, nb);
            for (size_t j = 0; j < nb; j++)
                d[j] ^= g_key;
        }
        for (int i = 0; i < CAP_MAX_IO; i++) {
            rt_tensor_unref(in[i]);
            rt_tensor_unref(hout[i]);
        }
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

kn_backend *ut_testdev_new(const char *name, const char *const *ops, int flags) {
    testdev *d = calloc(1, sizeof(*d));
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(g_cpu);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->ops = ops;
    d->flags = flags;
    d->b = (kn_backend){.api_version = KN_BACKEND_API_VERSION,
                        .iface = {.name = dev_name,
                                  .kernel = dev_kernel,
                                  .free = dev_free,
                                  .to_device = dev_to_device,
                                  .to_host = dev_to_host},
                        .ctx = d,
                        .intra_op_threads = 1};
    if (flags & UT_TESTDEV_ARENAS) {
        d->b.iface.arena_new = dev_arena_new;
        d->b.iface.arena_begin = dev_arena_begin;
        d->b.iface.arena_end = dev_arena_end;
        d->b.iface.arena_free = dev_arena_free;
        if (flags & UT_TESTDEV_GRAPHS) {
            d->b.iface.graph_begin = dev_graph_begin;
            d->b.iface.graph_end = dev_graph_end;
            d->b.iface.graph_launch = dev_graph_launch;
            d->b.iface.graph_free = dev_graph_free;
        }
    }
    return &d->b;
}

/* ---- DICOM helpers ---- */

rt_tensor *ut_dicom_strings(const char *const *paths, int n) {
    rt_str s[8];
    uint8_t *buf[8] = {0};
    int k = 0;
    for (int i = 0; i < n && k < 8; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (f == NULL)
            continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf[k] = malloc(len > 0 ? (size_t)len : 1);
        ck_assert(buf[k] != NULL && fread(buf[k], 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        s[k] = (rt_str){.data = buf[k], .len = len};
        k++;
    }
    if (k == 0)
        return NULL;
    rt_shape sh = rt_shape_make(1, (int64_t[]){k});
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &t), MS_OK);
    for (int i = 0; i < k; i++)
        free(buf[i]);
    return t;
}

void ut_dicom_window_graph(rt_gb *gb, int variant, int64_t h, int64_t w) {
    Tensorflow__NodeDef *x = rt_gb_node(gb, "Placeholder", "x");
    rt_gb_attr_type(gb, x, "dtype", RT_DT_STRING);
    Tensorflow__NodeDef *dec = rt_gb_node(gb, "DcmDecodeHU", "dec");
    rt_gb_input(gb, dec, "x");
    rt_gb_attr_f(gb, dec, "pad_value", 100.f); /* windowed 0.65: padding shows */
    Tensorflow__NodeDef *win = rt_gb_node(gb, "DcmWindow", "win");
    rt_gb_input(gb, win, "dec:0");
    if (variant == 1)
        rt_gb_input(gb, win, "dec:1");
    rt_gb_attr_f(gb, win, "center", 40.f);
    rt_gb_attr_f(gb, win, "width", 400.f);
    rt_gb_attr_str(gb, win, "data_format", variant == 2 ? "NCHW" : "NHWC");
    if (variant > 0)
        rt_gb_attr_ilist(gb, win, "size", (int64_t[]){h, w}, 2);
}
