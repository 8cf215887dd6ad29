/* srv_stats.c - Triton-style per model version statistics: a small table
 * of tracked versions under one mutex (touched once per request, after it
 * is answered, and once per graph run). */
#include "srv_stats.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static srv_model_stats *table;
static int ntable, cap;

/* The entry of (model, version) or NULL (mu held). */
static srv_model_stats *find(const char *model, int64_t version) {
    if (model == NULL) return NULL;
    for (int i = 0; i < ntable; i++)
        if (table[i].version == version && strcmp(table[i].model, model) == 0) return &table[i];
    return NULL;
}

void srv_stats_track(const char *model, int64_t version) {
    if (model == NULL || strlen(model) >= sizeof table[0].model) return;
    pthread_mutex_lock(&mu);
    if (find(model, version) == NULL) {
        if (ntable == cap) {
            int nc = cap ? cap * 2 : 16;
            srv_model_stats *nt = realloc(table, sizeof *nt * (size_t)nc);
            if (nt == NULL) goto out; /* untracked: its requests go uncounted */
            table = nt;
            cap = nc;
        }
        srv_model_stats *s = &table[ntable++];
        memset(s, 0, sizeof *s);
        snprintf(s->model, sizeof s->model, "%s", model);
        s->version = version;
    }
out:
    pthread_mutex_unlock(&mu);
}

void srv_stats_forget(const char *model, int64_t version) {
    pthread_mutex_lock(&mu);
    srv_model_stats *s = find(model, version);
    if (s != NULL) *s = table[--ntable];
    pthread_mutex_unlock(&mu);
}

/* The APIs whose calls are inferences: gRPC and REST api labels ending so
 * (srv_grpc.c api_name, srv_rest.c rest_api_name). */
static int is_inference(const char *api) {
    static const char *const ends[] = {"_predict", "_classify", "_regress", "_multi_inference",
                                       "_kserve_infer"};
    size_t n = strlen(api);
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t e = strlen(ends[i]);
        if (n >= e && strcmp(api + n - e, ends[i]) == 0) return 1;
    }
    return 0;
}

static void add(srv_stat_dur *d, double seconds) {
    d->count++;
    d->ns += (uint64_t)(seconds > 0 ? seconds * 1e9 : 0);
}

void srv_stats_request(const char *api, const char *model, int64_t version, int batch,
                       const double phase[4], ms_status st, double seconds) {
    if (version <= 0 || !is_inference(api)) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&mu);
    srv_model_stats *s = find(model, version);
    if (s != NULL) {
        s->last_inference_ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
        if (st != MS_OK) {
            add(&s->fail, seconds);
        } else {
            add(&s->success, seconds);
            s->inference_count += (uint64_t)(batch > 0 ? batch : 1);
            srv_stat_dur *ph[4] = {&s->queue, &s->compute_input, &s->compute_infer,
                                   &s->compute_output};
            for (int p = 0; p < 4; p++)
                if (phase[p] >= 0) add(ph[p], phase[p]);
        }
    }
    pthread_mutex_unlock(&mu);
}

void srv_stats_execution(const char *model, int64_t version) {
    pthread_mutex_lock(&mu);
    srv_model_stats *s = find(model, version);
    if (s != NULL) s->execution_count++;
    pthread_mutex_unlock(&mu);
}

static int cmp_stats(const void *a, const void *b) {
    const srv_model_stats *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    if (c != 0) return c;
    return (x->version > y->version) - (x->version < y->version);
}

ms_status srv_stats_list(const char *model, int64_t version, srv_model_stats **out, int *n) {
    int all = model == NULL || model[0] == '\0';
    ms_status st = MS_OK;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&mu);
    srv_model_stats *o = ntable > 0 ? malloc(sizeof *o * (size_t)ntable) : NULL;
    if (ntable > 0 && o == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < ntable; i++)
        if ((all || strcmp(table[i].model, model) == 0) &&
            (version <= 0 || table[i].version == version))
            o[(*n)++] = table[i];
out:
    pthread_mutex_unlock(&mu);
    if (*n == 0) {
        free(o);
        return st;
    }
    qsort(o, (size_t)*n, sizeof *o, cmp_stats);
    *out = o;
    return st;
}
