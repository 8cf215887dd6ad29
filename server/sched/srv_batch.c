/* srv_batch.c - dynamic batching: merge along dim 0, run once, split back. */
#include "srv_batch.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ms_log.h"
#include "srv_metrics.h"
#include "srv_stats.h"

#define PARAMS_FILE "batching_params.pbtxt"
#define MAX_CACHE   64
#define MAX_FILE    (64 * 1024)

/* ------------------------------------------------------------------------ */
/* BatchingParameters text proto                                             */
/* ------------------------------------------------------------------------ */

void srv_batch_params_defaults(srv_batch_params *p) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    memset(p, 0, sizeof(*p));
    p->max_batch_size = 1000;
    p->batch_timeout_micros = 0;
    p->max_enqueued_batches = 10;
    p->num_batch_threads = ncpu > 0 ? ncpu : 1;
}

typedef struct lexer {
    const char *p, *end;
    char tok[128];
} lexer;

/* Next token into lx->tok: identifier/number, a quoted string (quotes
 * kept), or one of { } : . Returns 0 at the end. */
static int lex(lexer *lx) {
    for (;;) {
        while (lx->p < lx->end && isspace((unsigned char)*lx->p))
            lx->p++;
        if (lx->p < lx->end && *lx->p == '#') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
            continue;
        }
        break;
    }
    if (lx->p >= lx->end) return 0;
    size_t n = 0;
    char c = *lx->p;
    if (c == '{' || c == '}' || c == ':') {
        lx->tok[n++] = *lx->p++;
    } else if (c == '"' || c == '\'') {
        lx->tok[n++] = *lx->p++;
        while (lx->p < lx->end && *lx->p != c) {
            if (n < sizeof(lx->tok) - 2) lx->tok[n++] = *lx->p;
            lx->p++;
        }
        if (lx->p < lx->end) lx->p++;
        lx->tok[n++] = c;
    } else {
        while (lx->p < lx->end && (isalnum((unsigned char)*lx->p) || *lx->p == '_' ||
                                   *lx->p == '-' || *lx->p == '+' || *lx->p == '.')) {
            if (n < sizeof(lx->tok) - 1) lx->tok[n++] = *lx->p;
            lx->p++;
        }
        if (n == 0) { /* a stray character */
            lx->tok[n++] = *lx->p++;
        }
    }
    lx->tok[n] = '\0';
    return 1;
}

/* Reads `: v` or `{ value: v }` after a field name. */
static ms_status field_value(lexer *lx, const char *field, char *v, size_t cap) {
    if (!lex(lx)) return ms_errf(MS_EINVAL, "%s: value missing", field);
    int wrapped = 0;
    if (strcmp(lx->tok, "{") == 0) {
        wrapped = 1;
        if (!lex(lx) || strcmp(lx->tok, "value") != 0)
            return ms_errf(MS_EINVAL, "%s: expected { value: ... }", field);
        if (!lex(lx) || strcmp(lx->tok, ":") != 0)
            return ms_errf(MS_EINVAL, "%s: expected ':' after value", field);
    } else if (strcmp(lx->tok, ":") != 0) {
        return ms_errf(MS_EINVAL, "%s: expected ':' or '{'", field);
    }
    if (!lex(lx)) return ms_errf(MS_EINVAL, "%s: value missing", field);
    snprintf(v, cap, "%s", lx->tok);
    if (wrapped && (!lex(lx) || strcmp(lx->tok, "}") != 0))
        return ms_errf(MS_EINVAL, "%s: expected '}'", field);
    return MS_OK;
}

static ms_status to_i64(const char *field, const char *v, int64_t lo, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < lo)
        return ms_errf(MS_EINVAL, "%s: expected an integer >= %lld, got \"%s\"", field,
                       (long long)lo, v);
    *out = x;
    return MS_OK;
}

static ms_status parse_params(const char *text, size_t len, srv_batch_params *p) {
    lexer lx = {text, text + len, {0}};
    char v[128];
    ms_status st;
    while (lex(&lx)) {
        char field[128];
        snprintf(field, sizeof field, "%s", lx.tok);
        if ((st = field_value(&lx, field, v, sizeof v)) != MS_OK) return st;
        if (strcmp(field, "max_batch_size") == 0)
            st = to_i64(field, v, 1, &p->max_batch_size);
        else if (strcmp(field, "batch_timeout_micros") == 0)
            st = to_i64(field, v, 0, &p->batch_timeout_micros);
        else if (strcmp(field, "max_enqueued_batches") == 0)
            st = to_i64(field, v, 1, &p->max_enqueued_batches);
        else if (strcmp(field, "num_batch_threads") == 0)
            st = to_i64(field, v, 1, &p->num_batch_threads);
        else if (strcmp(field, "allowed_batch_sizes") == 0) {
            if (p->n_allowed == SRV_BATCH_MAX_ALLOWED)
                return ms_errf(MS_EINVAL, "allowed_batch_sizes: more than %d entries",
                               SRV_BATCH_MAX_ALLOWED);
            st = to_i64(field, v, 1, &p->allowed_batch_sizes[p->n_allowed++]);
        } else if (strcmp(field, "pad_variable_length_inputs") == 0 ||
                   strcmp(field, "enable_large_batch_splitting") == 0) {
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
                return ms_errf(MS_EINVAL, "%s: expected true or false, got \"%s\"", field, v);
            if (field[0] == 'p') p->pad_variable_length_inputs = v[0] == 't';
        } else if (strcmp(field, "thread_pool_name") == 0 ||
                   strcmp(field, "max_execution_batch_size") == 0) {
            /* accepted; no effect here */
        } else {
            return ms_errf(MS_EINVAL, "unknown BatchingParameters field \"%s\"", field);
        }
        if (st != MS_OK) return st;
    }
    for (int i = 0; i < p->n_allowed; i++) {
        if (i > 0 && p->allowed_batch_sizes[i] <= p->allowed_batch_sizes[i - 1])
            return ms_errf(MS_EINVAL, "allowed_batch_sizes must be strictly increasing");
    }
    if (p->n_allowed > 0 && p->allowed_batch_sizes[p->n_allowed - 1] != p->max_batch_size)
        return ms_errf(MS_EINVAL,
                       "the last entry of allowed_batch_sizes (%lld) must equal max_batch_size "
                       "(%lld)",
                       (long long)p->allowed_batch_sizes[p->n_allowed - 1],
                       (long long)p->max_batch_size);
    return MS_OK;
}

ms_status srv_batch_params_read(const char *file, srv_batch_params *p) {
    FILE *f = fopen(file, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot read batching parameters %s", file);
    char *buf = malloc(MAX_FILE + 1);
    if (buf == NULL) {
        fclose(f);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, MAX_FILE + 1, f);
    fclose(f);
    if (n > MAX_FILE) {
        free(buf);
        return ms_errf(MS_EINVAL, "batching parameters %s: larger than %d bytes", file, MAX_FILE);
    }
    ms_status st = parse_params(buf, n, p);
    free(buf);
    if (st != MS_OK) ms_errwrap(st, "batching parameters %s", file);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The batcher                                                               */
/* ------------------------------------------------------------------------ */

enum { M_WAIT, M_DONE, M_SOLO };

typedef struct member {
    const sig_input *in;
    int nin;
    int64_t rows;
    sig_output *outs;
    int nouts;
    int state; /* published under the batcher's lock */
    int res;   /* written by the batch's runner */
    struct member *next;
} member;

typedef struct batch {
    rt_model *m;
    const char *model_name; /* the leader's: it outlives the run */
    int64_t version;
    const char *sig_key;
    const sig_input *in0; /* the leader's inputs: the group's shapes */
    int nin;
    const char *const *filter;
    int nfilter;
    int64_t max_rows;
    member *head, *tail;
    int nmembers, left; /* members, members not yet gone */
    int64_t rows;
    int closed;
    pthread_cond_t cv;
    struct batch *next;
} batch;

typedef struct cache_entry {
    char *dir;
    srv_batch_params p;
} cache_entry;

#define MAX_NOBATCH 64

struct srv_batcher {
    /* (model, signature) whose outputs lack the batch dimension: run alone
     * from then on (a freed model's address reused only loses batching). */
    struct {
        const rt_model *m;
        char sig[128];
    } nobatch[MAX_NOBATCH];
    int nnobatch;
    pthread_mutex_t mu;
    pthread_cond_t run_cv;
    int running;
    srv_batch_params p;
    int per_model;
    batch *open;
    cache_entry cache[MAX_CACHE];
    int ncache;
};

srv_batcher *srv_batcher_new(const srv_batch_params *p, int per_model) {
    srv_batcher *b = calloc(1, sizeof(*b));
    if (b == NULL) return NULL;
    b->p = *p;
    b->per_model = per_model;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->run_cv, NULL);
    return b;
}

void srv_batcher_free(srv_batcher *b) {
    if (b == NULL) return;
    for (int i = 0; i < b->ncache; i++)
        free(b->cache[i].dir);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->run_cv);
    free(b);
}

/* The parameters for model m (under b->mu). */
static srv_batch_params params_for(srv_batcher *b, rt_model *m) {
    if (!b->per_model) return b->p;
    const char *dir = rt_model_dir(m);
    if (dir == NULL) return b->p;
    for (int i = 0; i < b->ncache; i++)
        if (strcmp(b->cache[i].dir, dir) == 0) return b->cache[i].p;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, PARAMS_FILE);
    srv_batch_params p;
    srv_batch_params_defaults(&p);
    if (access(path, F_OK) != 0) {
        p = b->p;
    } else if (srv_batch_params_read(path, &p) != MS_OK) {
        MS_WARN("%s; the global batching parameters apply", ms_errmsg());
        p = b->p;
    } else {
        MS_INFO("batching parameters of %s: max_batch_size %lld, batch_timeout_micros %lld", dir,
                (long long)p.max_batch_size, (long long)p.batch_timeout_micros);
    }
    if (b->ncache < MAX_CACHE) {
        char *d = strdup(dir);
        if (d != NULL) {
            b->cache[b->ncache].dir = d;
            b->cache[b->ncache++].p = p;
        }
    }
    return p;
}

/* Rows of a call (the common dim 0), or -1 when it cannot batch. */
static int64_t call_rows(const sig_input *in, int nin) {
    if (nin < 1) return -1;
    int64_t rows = -1;
    for (int i = 0; i < nin; i++) {
        const rt_tensor *t = in[i].tensor;
        if (t == NULL || t->shape.rank < 1 || t->shape.dim[0] < 1) return -1;
        if (rows >= 0 && t->shape.dim[0] != rows) return -1;
        rows = t->shape.dim[0];
    }
    return rows;
}

static int find_key(const sig_input *in, int nin, const char *key) {
    for (int i = 0; i < nin; i++)
        if (strcmp(in[i].key, key) == 0) return i;
    return -1;
}

static int same_group(const batch *bt, rt_model *m, const char *sig_key, const sig_input *in,
                      int nin, const char *const *filter, int nfilter) {
    if (bt->m != m || bt->nin != nin || bt->nfilter != nfilter || strcmp(bt->sig_key, sig_key))
        return 0;
    for (int i = 0; i < nfilter; i++)
        if (strcmp(bt->filter[i], filter[i]) != 0) return 0;
    for (int i = 0; i < nin; i++) {
        int j = find_key(in, nin, bt->in0[i].key);
        if (j < 0) return 0;
        const rt_tensor *a = bt->in0[i].tensor, *c = in[j].tensor;
        if (a->dtype != c->dtype || a->shape.rank != c->shape.rank) return 0;
        for (int d = 1; d < a->shape.rank; d++)
            if (a->shape.dim[d] != c->shape.dim[d]) return 0;
    }
    return 1;
}

static int64_t padded_rows(const srv_batch_params *p, int64_t rows) {
    for (int i = 0; i < p->n_allowed; i++)
        if (p->allowed_batch_sizes[i] >= rows) return p->allowed_batch_sizes[i];
    return rows;
}

/* Input i of the group, merged over every member and padded to prows. */
static ms_status merge_input(const batch *bt, int i, int64_t prows, rt_tensor **out) {
    const rt_tensor *t0 = bt->in0[i].tensor;
    rt_shape sh = t0->shape;
    sh.dim[0] = prows;
    int64_t row_elems = t0->shape.dim[0] > 0 ? t0->nelem / t0->shape.dim[0] : 0;
    rt_tensor *t = NULL;
    ms_status st;
    if (t0->dtype == RT_DT_STRING) {
        if ((st = rt_tensor_new(RT_DT_STRING, &sh, &t)) != MS_OK) return st;
    } else {
        int64_t ne = rt_shape_nelem(&sh);
        size_t bytes = ne > 0 ? (size_t)ne * rt_dtype_size(t0->dtype) : 0;
        rt_buf *buf = rt_buf_alloc(bytes > 0 ? bytes : 1);
        if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory merging a batch");
        st = rt_tensor_new_on(t0->dtype, &sh, buf, 0, &t);
        rt_buf_unref(buf);
        if (st != MS_OK) return st;
    }
    size_t esz = t0->dtype == RT_DT_STRING ? sizeof(rt_str) : rt_dtype_size(t0->dtype);
    size_t row_bytes = (size_t)row_elems * esz;
    uint8_t *dst = t->data;
    int64_t at = 0;
    for (const member *mb = bt->head; mb != NULL; mb = mb->next) {
        int j = find_key(mb->in, mb->nin, bt->in0[i].key);
        const rt_tensor *src = mb->in[j].tensor;
        /* Strings: the rt_str entries point into the callers' tensors, which
         * live until the batch is done; no byte is copied. */
        if (row_bytes) memcpy(dst + (size_t)at * row_bytes, src->data, (size_t)mb->rows * row_bytes);
        at += mb->rows;
    }
    for (; at < prows && at > 0; at++) /* padding: copies of the last row */
        memcpy(dst + (size_t)at * row_bytes, dst + (size_t)(at - 1) * row_bytes, row_bytes);
    *out = t;
    return MS_OK;
}

/* Rows [off, off + rows) of output t. */
static ms_status slice_rows(const rt_tensor *t, int64_t off, int64_t rows, rt_tensor **out) {
    rt_shape sh = t->shape;
    int64_t row_elems = t->nelem / t->shape.dim[0];
    sh.dim[0] = rows;
    if (t->dtype == RT_DT_STRING)
        return rt_tensor_new_strings(&sh, rt_tensor_strs(t) + off * row_elems, out);
    size_t esz = rt_dtype_size(t->dtype);
    size_t base = (size_t)((const uint8_t *)t->data - (const uint8_t *)t->buf->data);
    return rt_tensor_new_on(t->dtype, &sh, t->buf, base + (size_t)(off * row_elems) * esz, out);
}

/* sig_run, counted and timed for /metrics (:tensorflow:core:graph_runs):
 * every graph run for requests passes here, a batched one once. */
static ms_status graph_run(const char *model_name, int64_t version, rt_model *m,
                           const char *sig_key, const sig_input *in, int nin,
                           const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                           sig_output **outs, int *nouts) {
    double t0 = srv_req_now();
    ms_status st = sig_run(m, sig_key, in, nin, output_filter, nfilter, opts, outs, nouts);
    srv_metrics_graph_run(srv_req_now() - t0);
    if (st == MS_OK) srv_stats_execution(model_name, version); /* Triton's execution_count */
    return st;
}

/* Runs the closed batch; every member ends M_DONE (own rows, or its error
 * handled alone: M_SOLO). Called without b->mu. */
static void run_batch(srv_batcher *b, batch *bt, int64_t prows) {
    rt_tensor *merged[64];
    sig_input in[64];
    sig_output *outs = NULL;
    int nouts = 0, nmerged = 0;
    ms_status st = MS_OK;
    if (bt->nin > 64) st = MS_EINVAL;
    for (int i = 0; i < bt->nin && st == MS_OK; i++) {
        st = merge_input(bt, i, prows, &merged[i]);
        if (st == MS_OK) {
            in[i].key = bt->in0[i].key;
            in[i].tensor = merged[i];
            nmerged = i + 1;
        }
    }
    rt_run_opts opts = {.cancelled = NULL}; /* the batch runs for all of its callers */
    if (st == MS_OK)
        st = graph_run(bt->model_name, bt->version, bt->m, bt->sig_key, in, bt->nin, bt->filter,
                       bt->nfilter, &opts, &outs, &nouts);
    for (int i = 0; i < nouts && st == MS_OK; i++)
        if (outs[i].tensor->shape.rank < 1 || outs[i].tensor->shape.dim[0] != prows) {
            st = MS_EINVAL;
            pthread_mutex_lock(&b->mu);
            if (b->nnobatch < MAX_NOBATCH && strlen(bt->sig_key) < sizeof(b->nobatch[0].sig)) {
                b->nobatch[b->nnobatch].m = bt->m;
                snprintf(b->nobatch[b->nnobatch++].sig, sizeof(b->nobatch[0].sig), "%s",
                         bt->sig_key);
            }
            pthread_mutex_unlock(&b->mu);
            MS_INFO("batching: output \"%s\" of signature %s has no batch dimension; its calls "
                    "run alone",
                    outs[i].key, bt->sig_key);
        }
    int64_t off = 0;
    for (member *mb = bt->head; mb != NULL; mb = mb->next) {
        mb->res = M_SOLO;
        if (st == MS_OK) {
            mb->outs = calloc((size_t)(nouts > 0 ? nouts : 1), sizeof(sig_output));
            int ok = mb->outs != NULL;
            for (int i = 0; i < nouts && ok; i++) {
                mb->outs[i].key = strdup(outs[i].key);
                ok = mb->outs[i].key != NULL &&
                     slice_rows(outs[i].tensor, off, mb->rows, &mb->outs[i].tensor) == MS_OK;
                mb->nouts = i + 1;
            }
            if (ok) {
                mb->res = M_DONE;
            } else {
                sig_outputs_free(mb->outs, mb->nouts);
                mb->outs = NULL;
                mb->nouts = 0;
            }
        }
        off += mb->rows;
    }
    if (outs) sig_outputs_free(outs, nouts);
    for (int i = 0; i < nmerged; i++)
        rt_tensor_unref(merged[i]);
}

static void batch_free(batch *bt) { /* the members are on their callers' stacks */
    pthread_cond_destroy(&bt->cv);
    free(bt);
}

static void unlink_open(srv_batcher *b, batch *bt) {
    for (batch **pp = &b->open; *pp != NULL; pp = &(*pp)->next)
        if (*pp == bt) {
            *pp = bt->next;
            return;
        }
}

ms_status srv_batch_run(srv_batcher *b, rt_model *m, const char *model_name, int64_t version,
                        const char *sig_key, const sig_input *in, int nin,
                        const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                        sig_output **outs, int *nouts) {
    if (b == NULL)
        return graph_run(model_name, version, m, sig_key, in, nin, output_filter, nfilter, opts,
                         outs, nouts);
    pthread_mutex_lock(&b->mu);
    srv_batch_params p = params_for(b, m);
    int64_t rows = call_rows(in, nin);
    int alone = rows < 1 || rows > p.max_batch_size || nin > 64;
    for (int i = 0; i < b->nnobatch && !alone; i++)
        alone = b->nobatch[i].m == m && strcmp(b->nobatch[i].sig, sig_key) == 0;
    if (alone) {
        pthread_mutex_unlock(&b->mu);
        srv_metrics_batch_size(model_name, version, sig_key, (int)(rows > 0 ? rows : 1));
        return graph_run(model_name, version, m, sig_key, in, nin, output_filter, nfilter, opts,
                         outs, nouts);
    }
    member me = {in, nin, rows, NULL, 0, M_WAIT, M_WAIT, NULL};
    batch *bt = NULL;
    for (batch *x = b->open; x != NULL && bt == NULL; x = x->next)
        if (!x->closed && x->rows + rows <= x->max_rows &&
            same_group(x, m, sig_key, in, nin, output_filter, nfilter))
            bt = x;
    if (bt != NULL) { /* join */
        bt->tail->next = &me;
        bt->tail = &me;
        bt->nmembers++;
        bt->left++;
        bt->rows += rows;
        if (bt->rows >= bt->max_rows) pthread_cond_broadcast(&bt->cv);
        while (me.state == M_WAIT)
            pthread_cond_wait(&bt->cv, &b->mu);
    } else { /* lead a new batch */
        bt = calloc(1, sizeof(*bt));
        if (bt == NULL) {
            pthread_mutex_unlock(&b->mu);
            return graph_run(model_name, version, m, sig_key, in, nin, output_filter, nfilter,
                             opts, outs, nouts);
        }
        *bt = (batch){.m = m, .model_name = model_name, .version = version,
                      .sig_key = sig_key, .in0 = in, .nin = nin,
                      .filter = output_filter, .nfilter = nfilter, .max_rows = p.max_batch_size,
                      .head = &me, .tail = &me, .nmembers = 1, .left = 1, .rows = rows};
        pthread_cond_init(&bt->cv, NULL);
        bt->next = b->open;
        b->open = bt;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        int64_t ns = dl.tv_nsec + p.batch_timeout_micros * 1000;
        dl.tv_sec += (time_t)(ns / 1000000000);
        dl.tv_nsec = (long)(ns % 1000000000);
        while (bt->rows < bt->max_rows && p.batch_timeout_micros > 0)
            if (pthread_cond_timedwait(&bt->cv, &b->mu, &dl) != 0) break;
        /* The batch keeps filling while the batch threads are busy. */
        while (b->running >= p.num_batch_threads)
            pthread_cond_wait(&b->run_cv, &b->mu);
        bt->closed = 1;
        unlink_open(b, bt);
        b->running++;
        int64_t prows = padded_rows(&p, bt->rows);
        pthread_mutex_unlock(&b->mu);
        srv_metrics_batch_size(model_name, version, sig_key, (int)prows);
        if (bt->nmembers == 1 && prows == rows)
            me.res = M_SOLO; /* nobody joined: run the call as it is */
        else
            run_batch(b, bt, prows);
        pthread_mutex_lock(&b->mu);
        for (member *mb = bt->head; mb != NULL; mb = mb->next)
            mb->state = mb->res;
        b->running--;
        pthread_cond_broadcast(&b->run_cv);
        pthread_cond_broadcast(&bt->cv);
    }
    int solo = me.state == M_SOLO;
    if (--bt->left == 0) batch_free(bt);
    pthread_mutex_unlock(&b->mu);
    if (solo)
        return graph_run(model_name, version, m, sig_key, in, nin, output_filter, nfilter, opts,
                         outs, nouts);
    *outs = me.outs;
    *nouts = me.nouts;
    return MS_OK;
}
