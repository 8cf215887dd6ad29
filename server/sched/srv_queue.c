/* srv_queue.c - per-model request queues, round-robin across them. */
#include "srv_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Idle keys kept (with their cost) while no more than this many keys live;
 * beyond it an idle key is dropped, so random model names cannot grow the
 * table beyond the calls in flight plus this. */
#define KEEP_IDLE 16

struct srv_qkey {
    char key[SRV_QUEUE_KEY_MAX];
    void **ring; /* bound slots */
    int head, n;
    int running;
    double cost_s; /* moving average of one run, seconds; < 0 = none measured yet */
};

struct srv_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int bound, run_cap;
    srv_qkey **keys; /* live keys */
    int nkeys, capkeys;
    int cursor; /* round-robin position in keys[] */
    int stop;
};

srv_queue *srv_queue_new(int bound, int run_cap) {
    srv_queue *q = calloc(1, sizeof(*q));
    if (q == NULL) return NULL;
    q->bound = bound < 1 ? 1 : bound;
    q->run_cap = run_cap < 1 ? 1 : run_cap;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    return q;
}

static void key_free(srv_qkey *k) {
    if (k == NULL) return;
    free(k->ring);
    free(k);
}

void srv_queue_free(srv_queue *q) {
    if (q == NULL) return;
    for (int i = 0; i < q->nkeys; i++)
        key_free(q->keys[i]);
    free(q->keys);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

int srv_queue_bound(const srv_queue *q) {
    return q->bound;
}

/* Drops key i when it has nothing queued or running. Under mu. */
static void key_maybe_drop(srv_queue *q, int i) {
    srv_qkey *k = q->keys[i];
    if (k->n > 0 || k->running > 0 || (q->nkeys <= KEEP_IDLE && !q->stop)) return;
    key_free(k);
    q->keys[i] = q->keys[--q->nkeys];
    if (q->cursor > q->nkeys) q->cursor = 0;
}

/* A new key with its ring (cost unknown); NULL when out of memory. */
static srv_qkey *key_new(const srv_queue *q, const char *key) {
    srv_qkey *k = calloc(1, sizeof(*k));
    if (k == NULL) return NULL;
    k->ring = calloc((size_t)q->bound, sizeof(void *));
    if (k->ring == NULL) {
        free(k);
        return NULL;
    }
    size_t len = strnlen(key, sizeof(k->key) - 1);
    memcpy(k->key, key, len);
    k->key[len] = '\0';
    k->cost_s = -1;
    return k;
}

srv_qkey *srv_queue_try_run_cheap(srv_queue *q, const char *key, double max_cost_s) {
    srv_qkey *k = NULL;
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < q->nkeys; i++)
        if (strcmp(q->keys[i]->key, key) == 0) {
            k = q->keys[i];
            break;
        }
    if (k != NULL && (k->n > 0 || k->running >= q->run_cap || q->stop || k->cost_s < 0 ||
                      k->cost_s > max_cost_s))
        k = NULL;
    if (k != NULL) k->running++;
    pthread_mutex_unlock(&q->mu);
    return k;
}

srv_qkey *srv_queue_try_run(srv_queue *q, const char *key) {
    srv_qkey *k = NULL;
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < q->nkeys; i++)
        if (strcmp(q->keys[i]->key, key) == 0) {
            k = q->keys[i];
            break;
        }
    if (k == NULL && !q->stop && (q->nkeys < q->capkeys || q->nkeys == 0)) {
        /* A new key needs a slot in keys[]: only when there is room. */
        if (q->capkeys == 0) {
            q->keys = calloc(8, sizeof(*q->keys));
            q->capkeys = q->keys ? 8 : 0;
        }
        k = q->capkeys ? key_new(q, key) : NULL;
        if (k != NULL) q->keys[q->nkeys++] = k;
    } else if (k != NULL && (k->n > 0 || k->running >= q->run_cap || q->stop)) {
        k = NULL;
    }
    if (k != NULL) k->running++;
    pthread_mutex_unlock(&q->mu);
    return k;
}

int srv_queue_push(srv_queue *q, const char *key, void *item) {
    int rc = -1;
    pthread_mutex_lock(&q->mu);
    if (q->stop) goto out;
    srv_qkey *k = NULL;
    for (int i = 0; i < q->nkeys; i++)
        if (strcmp(q->keys[i]->key, key) == 0) {
            k = q->keys[i];
            break;
        }
    if (k == NULL) {
        if (q->nkeys == q->capkeys) {
            int nc = q->capkeys ? 2 * q->capkeys : 8;
            srv_qkey **nk = realloc(q->keys, (size_t)nc * sizeof(*nk));
            if (nk == NULL) goto out;
            q->keys = nk;
            q->capkeys = nc;
        }
        if ((k = key_new(q, key)) == NULL) goto out;
        q->keys[q->nkeys++] = k;
    }
    if (k->n >= q->bound) goto out;
    k->ring[(k->head + k->n) % q->bound] = item;
    k->n++;
    rc = 0;
    pthread_cond_signal(&q->cv);
out:
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void *srv_queue_pop(srv_queue *q, srv_qkey **token) {
    pthread_mutex_lock(&q->mu);
    for (;;) {
        int any = 0;
        for (int j = 0; j < q->nkeys; j++) {
            int i = (q->cursor + j) % q->nkeys;
            srv_qkey *k = q->keys[i];
            if (k->n == 0) continue;
            any = 1;
            if (k->running >= q->run_cap) continue;
            void *item = k->ring[k->head];
            k->head = (k->head + 1) % q->bound;
            k->n--;
            k->running++;
            q->cursor = (i + 1) % q->nkeys;
            *token = k;
            pthread_mutex_unlock(&q->mu);
            return item;
        }
        if (!any && q->stop) break;
        pthread_cond_wait(&q->cv, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    *token = NULL;
    return NULL;
}

void srv_queue_done(srv_queue *q, srv_qkey *token) {
    srv_queue_done_timed(q, token, -1);
}

void srv_queue_done_timed(srv_queue *q, srv_qkey *token, double seconds) {
    if (token == NULL) return;
    pthread_mutex_lock(&q->mu);
    token->running--;
    if (seconds >= 0) /* 1/8 weight to the newest run; the first run sets it */
        token->cost_s = token->cost_s < 0 ? seconds : token->cost_s + (seconds - token->cost_s) / 8;
    int waiting = token->n > 0;
    for (int i = 0; i < q->nkeys; i++)
        if (q->keys[i] == token) {
            key_maybe_drop(q, i);
            break;
        }
    /* A worker may be waiting only because this key was at its cap. */
    if (waiting) pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void srv_queue_stop(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* ---- the key, read from the wire ---- */

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Finds length-delimited field f in p..end; its bytes in fp, fn. */
static int find_len(const uint8_t *p, const uint8_t *end, int f, const uint8_t **fp, size_t *fn) {
    while (p < end) {
        uint64_t tag, v;
        if (varint(&p, end, &tag)) return -1;
        switch (tag & 7) {
        case 0:
            if (varint(&p, end, &v)) return -1;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2:
            if (varint(&p, end, &v) || v > (uint64_t)(end - p)) return -1;
            if ((int)(tag >> 3) == f) {
                *fp = p;
                *fn = (size_t)v;
                return 0;
            }
            p += v;
            break;
        default:
            return -1;
        }
    }
    return -1;
}

void srv_queue_key(const uint8_t *p, size_t n, int spec_field, int name_field, int sig_field,
                   char *out, size_t cap) {
    const uint8_t *sp = p, *np = NULL, *gp = NULL;
    size_t sn = n, nn = 0, gn = 0;
    out[0] = '\0';
    if (cap < 2 || p == NULL) return;
    if (spec_field > 0 && find_len(p, p + n, spec_field, &sp, &sn)) return;
    if (find_len(sp, sp + sn, name_field, &np, &nn)) return;
    if (sig_field > 0 && find_len(sp, sp + sn, sig_field, &gp, &gn)) gn = 0;
    if (nn + gn + 2 > cap) return; /* the handler rejects names this long */
    memcpy(out, np, nn);
    out[nn] = '\n';
    if (gn) memcpy(out + nn + 1, gp, gn);
    out[nn + 1 + gn] = '\0';
}
