/* srv_manager.c - model versions on a libuv loop: poll, policy, load, swap,
 * unload, status. See srv_manager.h for the rules. */
#include "srv_manager.h"
#include "srv_metrics.h"
#include "srv_stats.h"
#include "srv_warmup.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ms_file.h"
#include "ms_log.h"
#include "ms_wire.h"
#include "rt_bundle.h"
#include "rt_exec.h"

typedef struct mversion {
    int64_t version;
    srv_vstate state;
    ms_status code;
    char msg[512];
    rt_model *model; /* owned reference while AVAILABLE */
    char *dir;
    uint64_t sig; /* folder fingerprint at the last load attempt */
} mversion;

typedef struct mmodel {
    srv_model_config cfg;
    int removed; /* dropped from the config: unload everything, then forget */
    int unloaded; /* srv_manager_unload_model: nothing wanted until srv_manager_load_model */
    mversion *v;
    int nv;
    int warned_missing;
} mmodel;

struct srv_manager {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kn_backend *be; /* borrowed */
    kn_backend *device; /* borrowed; NULL: every node on be (srv_manager_set_device) */
    double poll_s;
    char tagbuf[256];           /* --saved_model_tags, split in place */
    const char *tags[SRV_MANAGER_MAX_TAGS];
    int ntags;                  /* 0 = g_tags */
    int warmup_iters;           /* srv_manager_set_warmup; 0 = no warm-up */
    srv_batch_params batching;  /* srv_manager_set_batching: what the device sizing sizes */
    int batching_on, batching_per_model;
    uv_loop_t *loop;
    uv_timer_t timer;
    uv_async_t async;
    int started;
    mmodel **models;
    int nmodels;
    srv_config *pending;
    uint64_t gen_requested, gen_applied;
    int rescan; /* srv_manager_load_model / _unload_model: scan on the loop thread */
    int loads_inflight;
    int stopping;
    void (*listener)(void *arg);
    void *listener_arg;
};

typedef struct load_job {
    uv_work_t req;
    srv_manager *m;
    char *name;
    int64_t version;
    char *dir;
    rt_model *model;
    ms_status st;
    char msg[512];
    double ms;
} load_job;

static const char *const g_tags[] = {"serve"};

/* ------------------------------------------------------------------------ */
/* Version folders                                                           */
/* ------------------------------------------------------------------------ */

int64_t srv_parse_version_dir(const char *name) {
    int64_t v = 0;
    if (name[0] == '\0') return -1;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

static uint64_t file_sig(uint64_t h, const char *name, const struct stat *st) {
    for (const char *p = name; *p; p++)
        h = mix(h, (unsigned char)*p);
    h = mix(h, (uint64_t)st->st_size);
    h = mix(h, (uint64_t)st->st_mtim.tv_sec);
    h = mix(h, (uint64_t)st->st_mtim.tv_nsec);
    return h;
}

#define SETTLE_MS 100

/* Non-zero when saved_model.pb names a restore op (so the version needs a
 * variables/ folder). Only read for versions without variables/. */
static int needs_variables(const char *dir) {
    ms_dir root;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ms_dir_open(dir, &root) != MS_OK) return 0;
    /* Beneath the folder, regular files only, capped (ms_file.h); anything
     * else is left for the load to refuse with the reason. */
    ms_status st = ms_file_read(&root, "saved_model.pb", RT_SAVED_MODEL_MAX_BYTES, &buf, &len);
    ms_dir_close(&root);
    if (st != MS_OK) {
        ms_err_clear();
        return 0;
    }
    if (buf == NULL) return 0;
    int needs = 0;
    if (ms_wire_check(buf, len, MS_WIRE_MAX_DEPTH) != MS_OK) {
        free(buf);
        return 0; /* the load refuses it with the reason */
    }
    Tensorflow__SavedModel *sm = tensorflow__saved_model__unpack(NULL, len, buf);
    free(buf);
    if (sm == NULL) return 0; /* unreadable: let the load report it */
    for (size_t i = 0; i < sm->n_meta_graphs; i++) {
        const Tensorflow__SaverDef *sd = sm->meta_graphs[i]->saver_def;
        if (sd != NULL && sd->restore_op_name != NULL && sd->restore_op_name[0] != '\0') needs = 1;
    }
    tensorflow__saved_model__free_unpacked(sm, NULL);
    return needs;
}

static double mtime_age_ms(const struct stat *st) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)(now.tv_sec - st->st_mtim.tv_sec) * 1e3 +
           (double)(now.tv_nsec - st->st_mtim.tv_nsec) / 1e6;
}

/* Age in ms of the most recently modified file in dir and dir/variables. */
static double newest_mtime_ms_ago(const char *dir) {
    double best = 1e18;
    const char *subs[] = {"", "/variables"};
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s%s", dir, subs[k]);
        DIR *d = opendir(path);
        if (d == NULL) continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char fp[4096 + 256];
            struct stat st;
            snprintf(fp, sizeof(fp), "%s/%s", path, e->d_name);
            if (stat(fp, &st) == 0 && S_ISREG(st.st_mode)) {
                double age = mtime_age_ms(&st);
                if (age < best) best = age;
            }
        }
        closedir(d);
    }
    return best;
}

/* A version folder of Triton's layout, model.onnx without saved_model.pb
 * (converted at load, rt_model.h): 1 when model.onnx is a non-empty regular
 * file. The fingerprint covers every regular file of the folder, so that a
 * changed external data file beside model.onnx reloads the version too;
 * summed, so the order readdir lists them in does not matter. */
static int onnx_version_sig(const char *dir, uint64_t *h) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, RT_MODEL_ONNX_FILE);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return 0;
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char fp[4096 + 256];
        snprintf(fp, sizeof(fp), "%s/%s", dir, e->d_name);
        if (stat(fp, &st) == 0 && S_ISREG(st.st_mode)) sum += file_sig(*h, e->d_name, &st);
    }
    closedir(d);
    *h = mix(*h, sum);
    return 1;
}

int srv_version_dir_complete(const char *dir, uint64_t *sig) {
    char path[4096];
    struct stat st;
    uint64_t h = 1469598103934665603ULL;

    snprintf(path, sizeof(path), "%s/saved_model.pb", dir);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        if (onnx_version_sig(dir, &h)) goto settled;
        ms_errf(MS_ENOTFOUND, "%s: no saved_model.pb (nor %s) yet", dir, RT_MODEL_ONNX_FILE);
        return 0;
    }
    h = file_sig(h, "saved_model.pb", &st);

    snprintf(path, sizeof(path), "%s/variables", dir);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* The index is an SSTable whose 48-byte footer is written last and
         * ends with a fixed magic: a valid footer means the index is whole. */
        static const unsigned char magic[8] = {0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb};
        unsigned char tail[8];
        /* Opened beneath the folder and only when a regular file, so a FIFO
         * or a link leaving the folder never blocks or is read (ms_file.h). */
        ms_dir root;
        int fd = -1;
        if (ms_dir_open(dir, &root) == MS_OK) {
            (void)ms_file_open(&root, "variables/variables.index", &fd);
            ms_dir_close(&root);
        }
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 48 ||
            pread(fd, tail, 8, st.st_size - 8) != 8 || memcmp(tail, magic, 8) != 0) {
            if (fd >= 0) close(fd);
            ms_errf(MS_ENOTFOUND, "%s: variables/variables.index missing or not complete", dir);
            return 0;
        }
        close(fd);
        h = file_sig(h, "variables.index", &st);

        /* Every data shard variables.data-NNNNN-of-MMMMM for N < M. */
        snprintf(path, sizeof(path), "%s/variables", dir);
        DIR *d = opendir(path);
        int total = -1, seen = 0;
        unsigned char have[1024] = {0};
        if (d != NULL) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                int i, n;
                char tailc;
                if (sscanf(e->d_name, "variables.data-%5d-of-%5d%c", &i, &n, &tailc) != 2) continue;
                if (n <= 0 || n > 1024 || i < 0 || i >= n || (total >= 0 && n != total)) {
                    closedir(d);
                    ms_errf(MS_EINVAL, "%s: inconsistent data shard %s", dir, e->d_name);
                    return 0;
                }
                total = n;
                char fp[4096];
                snprintf(fp, sizeof(fp), "%s/variables/%s", dir, e->d_name);
                if (stat(fp, &st) != 0) continue;
                if (!have[i]) seen++;
                have[i] = 1;
                h = file_sig(h, e->d_name, &st);
            }
            closedir(d);
        }
        if (total < 0 || seen != total) {
            ms_errf(MS_ENOTFOUND, "%s: variables data shards incomplete (%d of %d)", dir, seen,
                    total < 0 ? 0 : total);
            return 0;
        }
    } else if (needs_variables(dir)) {
        ms_errf(MS_ENOTFOUND, "%s: the graph restores variables but variables/ is missing", dir);
        return 0;
    }
settled:
    /* A file written in the last moments may still be growing (a copy in
     * progress): wait for the next poll. */
    if (newest_mtime_ms_ago(dir) < SETTLE_MS) {
        ms_errf(MS_ENOTFOUND, "%s: files changed in the last %d ms", dir, SETTLE_MS);
        return 0;
    }
    *sig = h;
    return 1;
}

typedef struct disk_version {
    int64_t version;
    char *dir;
    uint64_t sig;
    int complete;
} disk_version;

static int cmp_disk(const void *a, const void *b) {
    int64_t x = ((const disk_version *)a)->version, y = ((const disk_version *)b)->version;
    return (x > y) - (x < y);
}

static void free_disk(disk_version *dv, int n);

/* Lists the numeric version folders of base (ascending). -1 with errno set
 * when base cannot be listed, or listing it failed part way. */
static int scan_base(const char *base, disk_version **out, int *n) {
    DIR *d = opendir(base);
    *out = NULL;
    *n = 0;
    if (d == NULL) return -1;
    int cap = 0;
    struct dirent *e;
    for (;;) {
        errno = 0;
        if ((e = readdir(d)) == NULL) break;
        int64_t v = srv_parse_version_dir(e->d_name);
        if (v < 0) continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            disk_version *nv = realloc(*out, sizeof(disk_version) * (size_t)cap);
            if (nv == NULL) break;
            *out = nv;
        }
        disk_version *dv = &(*out)[(*n)++];
        dv->version = v;
        dv->dir = strdup(path);
        dv->sig = 0;
        dv->complete = dv->dir ? srv_version_dir_complete(dv->dir, &dv->sig) : 0;
        if (!dv->complete) MS_DEBUG("model folder %s not ready: %s", path, ms_errmsg());
    }
    int rerr = errno; /* readdir's error: the listing may be partial */
    closedir(d);
    if (rerr != 0) {
        free_disk(*out, *n);
        *out = NULL;
        *n = 0;
        errno = rerr;
        return -1;
    }
    if (*n > 1) qsort(*out, (size_t)*n, sizeof(disk_version), cmp_disk);
    return 0;
}

static void free_disk(disk_version *dv, int n) {
    for (int i = 0; i < n; i++)
        free(dv[i].dir);
    free(dv);
}

/* ------------------------------------------------------------------------ */
/* Model table helpers (callers hold m->mu)                                  */
/* ------------------------------------------------------------------------ */

static mmodel *find_model(srv_manager *m, const char *name) {
    for (int i = 0; i < m->nmodels; i++)
        if (strcmp(m->models[i]->cfg.name, name) == 0) return m->models[i];
    return NULL;
}

/* "; NOUN: a, b, c" into buf (at most MAX_LISTED entries, then ", ...");
 * "; NOUN: none" for an empty list. Names come from the config, not the
 * client. */
#define MAX_LISTED 20

static void list_append(char *buf, size_t cap, size_t *len, int i, const char *item) {
    if (*len >= cap) return;
    int w;
    if (i == MAX_LISTED)
        w = snprintf(buf + *len, cap - *len, ", ...");
    else
        w = snprintf(buf + *len, cap - *len, "%s%s", i ? ", " : "", item);
    if (w > 0) *len += (size_t)w < cap - *len ? (size_t)w : cap - *len - 1;
}

static void list_models(const srv_manager *m, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "; models served: ");
    int k = 0;
    for (int i = 0; i < m->nmodels && k <= MAX_LISTED; i++)
        if (!m->models[i]->removed) list_append(buf, cap, &len, k++, m->models[i]->cfg.name);
    if (k == 0) list_append(buf, cap, &len, 0, "none");
}

static void list_versions(const mmodel *mm, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "; available versions of %s: ", mm->cfg.name);
    int k = 0;
    char num[32];
    for (int i = 0; i < mm->nv && k <= MAX_LISTED; i++)
        if (mm->v[i].state == SRV_VSTATE_AVAILABLE) {
            snprintf(num, sizeof(num), "%" PRId64, mm->v[i].version);
            list_append(buf, cap, &len, k++, num);
        }
    if (k == 0) list_append(buf, cap, &len, 0, "none");
}

static void list_labels(const mmodel *mm, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "; version labels of %s: ", mm->cfg.name);
    int k = 0;
    for (int i = 0; i < mm->cfg.nlabels && k <= MAX_LISTED; i++)
        list_append(buf, cap, &len, k++, mm->cfg.labels[i].name);
    if (k == 0) list_append(buf, cap, &len, 0, "none");
}

static mversion *find_version(mmodel *mm, int64_t v) {
    for (int i = 0; i < mm->nv; i++)
        if (mm->v[i].version == v) return &mm->v[i];
    return NULL;
}

static mversion *add_version(mmodel *mm, int64_t v) {
    mversion *nv = realloc(mm->v, sizeof(mversion) * (size_t)(mm->nv + 1));
    if (nv == NULL) return NULL;
    mm->v = nv;
    /* Keep ascending order. */
    int at = mm->nv;
    while (at > 0 && mm->v[at - 1].version > v)
        at--;
    memmove(&mm->v[at + 1], &mm->v[at], sizeof(mversion) * (size_t)(mm->nv - at));
    mm->nv++;
    memset(&mm->v[at], 0, sizeof(mversion));
    mm->v[at].version = v;
    mm->v[at].state = SRV_VSTATE_START;
    return &mm->v[at];
}

static void free_model(mmodel *mm) {
    for (int i = 0; i < mm->nv; i++) {
        if (mm->v[i].model) rt_model_unref(mm->v[i].model);
        free(mm->v[i].dir);
    }
    free(mm->v);
    srv_model_config_clear(&mm->cfg);
    free(mm);
}

/* ------------------------------------------------------------------------ */
/* Loading and unloading (loop thread)                                       */
/* ------------------------------------------------------------------------ */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The device arenas of a version loaded on a device, sized before it is
 * AVAILABLE (srv_warmup_device_size) for the batch sizes the batcher can
 * form: the version's own batching_params.pbtxt with per-model parameters,
 * else the global ones. */
static void device_size(load_job *j) {
    int64_t batches[RT_PLAN_MEM_KEYS];
    int nb = 1;
    batches[0] = 1;
    if (j->m->batching_on) {
        srv_batch_params bp = j->m->batching, own;
        char path[4096];
        srv_batch_params_defaults(&own);
        snprintf(path, sizeof path, "%s/batching_params.pbtxt", j->dir);
        if (j->m->batching_per_model && access(path, R_OK) == 0 &&
            srv_batch_params_read(path, &own) == MS_OK)
            bp = own;
        nb = srv_warmup_device_batches(&bp, batches, RT_PLAN_MEM_KEYS);
    }
    ms_err_clear();
    srv_warmup_device_size(j->model, j->name, j->version, batches, nb);
    ms_err_clear();
}

static void load_work(uv_work_t *req) {
    load_job *j = req->data;
    double t0 = now_ms();
    ms_dir root;
    ms_err_clear();
    /* Before loading: every variable's bytes present and matching their
     * crc32c, read beneath the version folder as the load reads them. */
    if (ms_dir_open(j->dir, &root) == MS_OK) {
        /* absent: nothing to verify; there but outside: the verify says so */
        j->st = ms_file_find(&root, "variables") != MS_ENOTFOUND
                    ? rt_bundle_verify_in(&root, "variables/variables") : MS_OK;
        if (j->st == MS_OK) ms_err_clear();
        ms_dir_close(&root);
        if (j->st != MS_OK) {
            snprintf(j->msg, sizeof(j->msg), "variables incomplete or corrupt: %s", ms_errmsg());
            j->model = NULL;
            j->ms = now_ms() - t0;
            return;
        }
    }
    if (j->m->ntags > 0)
        j->st = rt_model_load_on(j->dir, j->m->tags, j->m->ntags, j->m->be, j->m->device,
                                 &j->model);
    else
        j->st = rt_model_load_on(j->dir, g_tags, 1, j->m->be, j->m->device, &j->model);
    if (j->st == MS_OK && j->m->device != NULL) /* before AVAILABLE, warm-up or not */
        device_size(j);
    if (j->st != MS_OK) {
        snprintf(j->msg, sizeof(j->msg), "%s",
                 ms_errmsg()[0] ? ms_errmsg() : ms_status_name(j->st));
        j->model = NULL;
    } else if (j->m->warmup_iters > 0 && /* before AVAILABLE: health waits for it */
               (j->st = srv_warmup_run(j->model, j->dir, j->name, j->version,
                                       j->m->warmup_iters)) != MS_OK) {
        snprintf(j->msg, sizeof(j->msg), "%s", ms_errmsg());
        rt_model_unref(j->model);
        j->model = NULL;
    }
    j->ms = now_ms() - t0;
}

static void reconcile(srv_manager *m, mmodel *mm, disk_version *dv, int ndv, int have_disk);
static void notify(srv_manager *m);
static void scan_model(srv_manager *m, mmodel *mm);

static void load_done(uv_work_t *req, int status) {
    load_job *j = req->data;
    srv_manager *m = j->m;
    rt_model *drop = NULL;
    (void)status;

    pthread_mutex_lock(&m->mu);
    m->loads_inflight--;
    mmodel *mm = find_model(m, j->name);
    mversion *v = mm ? find_version(mm, j->version) : NULL;
    if (v == NULL || v->state != SRV_VSTATE_LOADING || m->stopping || mm->removed ||
        mm->unloaded) {
        drop = j->model;
        if (v != NULL && v->state == SRV_VSTATE_LOADING) {
            v->state = SRV_VSTATE_END; /* the model left the config meanwhile */
            v->code = MS_OK;
        }
    } else if (j->st == MS_OK) {
        v->state = SRV_VSTATE_AVAILABLE;
        v->code = MS_OK;
        v->msg[0] = '\0';
        v->model = j->model;
        MS_INFO("loaded model %s version %" PRId64 " from %s (%.0f ms)", j->name, j->version,
                j->dir, j->ms);
        srv_metrics_model_load(j->name, 1, j->ms / 1000.0);
        srv_stats_track(j->name, j->version);
    } else {
        v->state = SRV_VSTATE_END;
        v->code = j->st;
        snprintf(v->msg, sizeof(v->msg), "%s", j->msg);
        MS_ERROR("failed to load model %s version %" PRId64 " from %s: %s", j->name, j->version,
                 j->dir, j->msg);
        srv_metrics_model_load(j->name, 0, j->ms / 1000.0);
    }
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (drop) rt_model_unref(drop);
    /* A new version may now replace an old one. */
    if (!m->stopping) {
        pthread_mutex_lock(&m->mu);
        mm = find_model(m, j->name);
        pthread_mutex_unlock(&m->mu);
        if (mm) scan_model(m, mm);
    }
    notify(m);
    free(j->name);
    free(j->dir);
    free(j);
}

/* Starts loading v (state -> LOADING). Called with m->mu held. */
static void start_load(srv_manager *m, mmodel *mm, mversion *v, const disk_version *d) {
    load_job *j = calloc(1, sizeof(*j));
    if (j == NULL) return;
    j->m = m;
    j->name = strdup(mm->cfg.name);
    j->version = v->version;
    j->dir = strdup(d->dir);
    j->req.data = j;
    if (j->name == NULL || j->dir == NULL) {
        free(j->name);
        free(j->dir);
        free(j);
        return;
    }
    free(v->dir);
    v->dir = strdup(d->dir);
    v->sig = d->sig;
    v->state = SRV_VSTATE_LOADING;
    v->code = MS_OK;
    v->msg[0] = '\0';
    MS_INFO("loading model %s version %" PRId64 " from %s", mm->cfg.name, v->version, d->dir);
    if (uv_queue_work(m->loop, &j->req, load_work, load_done) != 0) {
        v->state = SRV_VSTATE_END;
        v->code = MS_EINTERNAL;
        snprintf(v->msg, sizeof(v->msg), "cannot queue the load");
        free(j->name);
        free(j->dir);
        free(j);
        return;
    }
    m->loads_inflight++;
}

/* Unloads v; its rt_model goes to *drop to be released outside the lock. */
static void unload(mmodel *mm, mversion *v, rt_model **drop) {
    v->state = SRV_VSTATE_UNLOADING;
    *drop = v->model;
    v->model = NULL;
    v->state = SRV_VSTATE_END;
    v->code = MS_OK;
    v->msg[0] = '\0';
    MS_INFO("unloaded model %s version %" PRId64, mm->cfg.name, v->version);
    srv_metrics_model_unload(mm->cfg.name);
    srv_stats_forget(mm->cfg.name, v->version);
}

static int is_wanted(const int64_t *w, int nw, int64_t v) {
    for (int i = 0; i < nw; i++)
        if (w[i] == v) return 1;
    return 0;
}

/* Brings one model in line with its config and the folders on disk. Called
 * with m->mu held. */
static void reconcile(srv_manager *m, mmodel *mm, disk_version *dv, int ndv, int have_disk) {
    int64_t *want = calloc((size_t)(ndv > 0 ? ndv : 1), sizeof(int64_t));
    int nw = 0;
    rt_model **drops = calloc((size_t)(mm->nv > 0 ? mm->nv : 1), sizeof(rt_model *));
    int ndrop = 0;
    if (want == NULL || drops == NULL) goto out;

    /* A version already loaded (or loading) stays a candidate even when its
     * folder looks busy right now. */
    for (int i = 0; i < ndv; i++) {
        mversion *v = find_version(mm, dv[i].version);
        if (v != NULL && (v->state == SRV_VSTATE_AVAILABLE || v->state == SRV_VSTATE_LOADING) &&
            !dv[i].complete) {
            dv[i].complete = 1;
            dv[i].sig = v->sig;
        }
    }
    if (!mm->removed && !mm->unloaded && have_disk) {
        const srv_model_config *c = &mm->cfg;
        if (c->policy == SRV_POLICY_LATEST) {
            int k = 0;
            for (int i = ndv - 1; i >= 0 && k < (int)c->num_versions; i--)
                if (dv[i].complete) {
                    want[nw++] = dv[i].version;
                    k++;
                }
        } else {
            for (int i = 0; i < ndv; i++) {
                if (!dv[i].complete) continue;
                if (c->policy == SRV_POLICY_ALL ||
                    is_wanted(c->versions, c->nversions, dv[i].version))
                    want[nw++] = dv[i].version;
            }
        }
    }
    /* Load what is wanted and not loaded; retry a failed version only when its
     * folder changed since the failed attempt. */
    for (int i = 0; i < ndv; i++) {
        if (!is_wanted(want, nw, dv[i].version)) continue;
        mversion *v = find_version(mm, dv[i].version);
        if (v == NULL) v = add_version(mm, dv[i].version);
        if (v == NULL) continue;
        if (v->state == SRV_VSTATE_START ||
            (v->state == SRV_VSTATE_END && (v->code == MS_OK || v->sig != dv[i].sig)))
            start_load(m, mm, v, &dv[i]);
    }
    /* Unload unwanted versions only once every wanted one is available, so
     * that requests always find a version during a swap, and a broken new
     * version leaves the old one serving. */
    int all_ready = 1;
    for (int i = 0; i < nw; i++) {
        mversion *v = find_version(mm, want[i]);
        if (v == NULL || v->state != SRV_VSTATE_AVAILABLE) all_ready = 0;
    }
    if (all_ready) {
        for (int i = 0; i < mm->nv; i++) {
            mversion *v = &mm->v[i];
            if (v->state == SRV_VSTATE_AVAILABLE && !is_wanted(want, nw, v->version))
                unload(mm, v, &drops[ndrop++]);
        }
    }
out:
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < ndrop; i++)
        if (drops[i]) rt_model_unref(drops[i]);
    pthread_mutex_lock(&m->mu);
    free(want);
    free(drops);
}

int srv_manager_base_is_savedmodel(const char *base) {
    static const char *const names[] = {"saved_model.pb", "saved_model.pbtxt",
                                        RT_MODEL_ONNX_FILE};
    char path[4096];
    struct stat st;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", base, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return i < 2 ? 1 : 2;
    }
    return 0;
}

/* Scans one model's base path and reconciles. Takes m->mu itself. */
static void scan_model(srv_manager *m, mmodel *mm) {
    disk_version *dv = NULL;
    int ndv = 0, have = 1;
    pthread_mutex_lock(&m->mu);
    char *base = strdup(mm->cfg.base_path);
    int removed = mm->removed;
    pthread_mutex_unlock(&m->mu);
    if (base == NULL) return;
    if (!removed && scan_base(base, &dv, &ndv) != 0) {
        int e = errno;
        /* Only a base path that is gone unloads its model. Anything else
         * (EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR, EIO, EACCES...) may pass:
         * keep what is loaded and look again at the next poll. */
        if (e != ENOENT && e != ENOTDIR) {
            if (!mm->warned_missing)
                MS_WARN("model %s: base path %s cannot be read now (%s); keeping the loaded "
                        "versions", mm->cfg.name, base, strerror(e));
            mm->warned_missing = 1;
            free(base);
            return;
        }
        have = 0;
        if (!mm->warned_missing)
            MS_WARN("model %s: base path %s cannot be read: %s", mm->cfg.name, base, strerror(e));
        mm->warned_missing = 1;
    } else if (!removed && ndv == 0) {
        if (!mm->warned_missing && srv_manager_base_is_savedmodel(base))
            MS_WARN("model %s: no versions found under base path %s: it is itself %s; "
                    "put it in a numbered version folder, e.g. %s/1/ (the base path holds "
                    "versions 1/, 2/, ... as in TF Serving and Triton)", mm->cfg.name, base,
                    srv_manager_base_is_savedmodel(base) == 2 ? "an ONNX model (model.onnx)"
                                                              : "a SavedModel", base);
        else if (!mm->warned_missing)
            MS_WARN("model %s: no versions found under base path %s (expected numbered version "
                    "folders, e.g. %s/1/saved_model.pb or %s/1/model.onnx)", mm->cfg.name, base,
                    base, base);
        mm->warned_missing = 1;
    } else {
        mm->warned_missing = 0;
    }
    free(base);
    pthread_mutex_lock(&m->mu);
    reconcile(m, mm, dv, ndv, have);
    pthread_mutex_unlock(&m->mu);
    free_disk(dv, ndv);
}

/* Drops models that were removed from the config and have nothing loaded. */
static void sweep_removed(srv_manager *m) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->nmodels;) {
        mmodel *mm = m->models[i];
        int busy = 0;
        for (int k = 0; k < mm->nv; k++)
            if (mm->v[k].state == SRV_VSTATE_LOADING || mm->v[k].state == SRV_VSTATE_AVAILABLE)
                busy = 1;
        if (mm->removed && !busy) {
            MS_INFO("model %s removed from the config", mm->cfg.name);
            free_model(mm);
            m->models[i] = m->models[--m->nmodels];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static void scan_all(srv_manager *m) {
    pthread_mutex_lock(&m->mu);
    int n = m->nmodels;
    mmodel **snap = malloc(sizeof(mmodel *) * (size_t)(n > 0 ? n : 1));
    if (snap && n > 0) memcpy(snap, m->models, sizeof(mmodel *) * (size_t)n);
    pthread_mutex_unlock(&m->mu);
    if (snap == NULL) return;
    /* Only the loop thread adds or frees models, so the snapshot stays valid. */
    for (int i = 0; i < n; i++)
        scan_model(m, snap[i]);
    free(snap);
    sweep_removed(m);
    notify(m);
}

static void notify(srv_manager *m) {
    if (m->listener) m->listener(m->listener_arg);
}

/* ------------------------------------------------------------------------ */
/* Loop callbacks and public API                                             */
/* ------------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t) {
    srv_manager *m = t->data;
    if (!m->stopping) scan_all(m);
}

static void apply_pending(srv_manager *m) {
    pthread_mutex_lock(&m->mu);
    srv_config *cfg = m->pending;
    uint64_t gen = m->gen_requested;
    int rescan = m->rescan;
    m->pending = NULL;
    m->rescan = 0;
    if (cfg == NULL && !rescan) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    for (int i = 0; cfg != NULL && i < m->nmodels; i++) {
        int keep = 0;
        for (int k = 0; k < cfg->nmodels; k++)
            if (strcmp(cfg->models[k].name, m->models[i]->cfg.name) == 0) keep = 1;
        m->models[i]->removed = !keep;
    }
    for (int k = 0; cfg != NULL && k < cfg->nmodels; k++) {
        mmodel *mm = find_model(m, cfg->models[k].name);
        if (mm != NULL) {
            if (!srv_model_config_equal(&mm->cfg, &cfg->models[k])) {
                srv_model_config tmp;
                if (srv_model_config_copy(&cfg->models[k], &tmp) == MS_OK) {
                    srv_model_config_clear(&mm->cfg);
                    mm->cfg = tmp;
                    MS_INFO("model %s: config changed", mm->cfg.name);
                }
            }
            mm->removed = 0;
            continue;
        }
        mm = calloc(1, sizeof(*mm));
        mmodel **nm = realloc(m->models, sizeof(mmodel *) * (size_t)(m->nmodels + 1));
        if (mm == NULL || nm == NULL) {
            free(mm);
            if (nm) m->models = nm;
            continue;
        }
        m->models = nm;
        if (srv_model_config_copy(&cfg->models[k], &mm->cfg) != MS_OK) {
            free(mm);
            continue;
        }
        m->models[m->nmodels++] = mm;
        MS_INFO("model %s: serving from base path %s", mm->cfg.name, mm->cfg.base_path);
    }
    pthread_mutex_unlock(&m->mu);
    srv_config_free(cfg);
    scan_all(m);
    pthread_mutex_lock(&m->mu);
    if (gen > m->gen_applied) m->gen_applied = gen;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

static void on_async(uv_async_t *a) {
    srv_manager *m = a->data;
    if (!m->stopping) apply_pending(m);
}

ms_status srv_manager_set_tags(srv_manager *m, const char *tags) {
    size_t n = strlen(tags);
    if (n >= sizeof(m->tagbuf))
        return ms_errf(MS_EINVAL, "--saved_model_tags: longer than %zu bytes", sizeof(m->tagbuf) - 1);
    memcpy(m->tagbuf, tags, n + 1);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(m->tagbuf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (k == SRV_MANAGER_MAX_TAGS)
            return ms_errf(MS_EINVAL, "--saved_model_tags: more than %d tags",
                           SRV_MANAGER_MAX_TAGS);
        m->tags[k++] = t;
    }
    if (k == 0) return ms_errf(MS_EINVAL, "--saved_model_tags: expected tag[,tag...], got \"%s\"", tags);
    m->ntags = k;
    return MS_OK;
}

void srv_manager_set_batching(srv_manager *m, const srv_batch_params *bp, int per_model) {
    m->batching_on = bp != NULL;
    if (bp != NULL) m->batching = *bp;
    m->batching_per_model = per_model;
}

void srv_manager_set_warmup(srv_manager *m, int iterations) {
    m->warmup_iters = iterations;
}

void srv_manager_set_device(srv_manager *m, kn_backend *device) {
    m->device = device;
}

ms_status srv_manager_new(kn_backend *be, double poll_s, srv_manager **out) {
    srv_manager *m = calloc(1, sizeof(*m));
    if (m == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->be = be;
    m->poll_s = poll_s;
    *out = m;
    return MS_OK;
}

void srv_manager_set_listener(srv_manager *m, void (*fn)(void *arg), void *arg) {
    m->listener = fn;
    m->listener_arg = arg;
}

ms_status srv_manager_start(srv_manager *m, uv_loop_t *loop) {
    m->loop = loop;
    uv_async_init(loop, &m->async, on_async);
    m->async.data = m;
    uv_timer_init(loop, &m->timer);
    m->timer.data = m;
    if (m->poll_s > 0) {
        uint64_t ms = (uint64_t)(m->poll_s * 1000.0);
        if (ms == 0) ms = 1;
        uv_timer_start(&m->timer, on_timer, ms, ms);
    }
    m->started = 1;
    /* A config applied before start is waiting: take it now. */
    uv_async_send(&m->async);
    return MS_OK;
}

/* Waits (wait_s > 0) until generation gen is applied and no load is in
 * flight, or wait_s passed. Called without m->mu. */
static void wait_applied(srv_manager *m, uint64_t gen, double wait_s) {
    if (wait_s <= 0) return;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)wait_s;
    dl.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    while ((m->gen_applied < gen || m->loads_inflight > 0) && !m->stopping)
        if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) == ETIMEDOUT) break;
    pthread_mutex_unlock(&m->mu);
}

uint64_t srv_manager_apply(srv_manager *m, srv_config *cfg, double wait_s) {
    pthread_mutex_lock(&m->mu);
    if (m->pending) srv_config_free(m->pending);
    m->pending = cfg;
    uint64_t gen = ++m->gen_requested;
    pthread_mutex_unlock(&m->mu);
    if (m->started) uv_async_send(&m->async);
    wait_applied(m, gen, wait_s);
    return gen;
}

void srv_manager_stop(srv_manager *m) {
    rt_model **drops = NULL;
    int nd = 0;
    pthread_mutex_lock(&m->mu);
    m->stopping = 1;
    pthread_cond_broadcast(&m->cv);
    int total = 0;
    for (int i = 0; i < m->nmodels; i++)
        total += m->models[i]->nv;
    drops = calloc((size_t)(total > 0 ? total : 1), sizeof(rt_model *));
    for (int i = 0; i < m->nmodels && drops; i++) {
        mmodel *mm = m->models[i];
        for (int k = 0; k < mm->nv; k++)
            if (mm->v[k].state == SRV_VSTATE_AVAILABLE) unload(mm, &mm->v[k], &drops[nd++]);
    }
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < nd; i++)
        if (drops[i]) rt_model_unref(drops[i]);
    free(drops);
    if (m->started) {
        uv_timer_stop(&m->timer);
        uv_close((uv_handle_t *)&m->timer, NULL);
        uv_close((uv_handle_t *)&m->async, NULL);
        m->started = 0;
    }
}

void srv_manager_free(srv_manager *m) {
    if (m == NULL) return;
    for (int i = 0; i < m->nmodels; i++)
        free_model(m->models[i]);
    free(m->models);
    srv_config_free(m->pending);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

ms_status srv_manager_get(srv_manager *m, const char *name, int64_t version, const char *label,
                          srv_servable *out) {
    ms_status st = MS_OK;
    out->model = NULL;
    out->version = 0;
    pthread_mutex_lock(&m->mu);
    char list[1024];
    mmodel *mm = find_model(m, name ? name : "");
    if (mm == NULL || mm->removed) {
        list_models(m, list, sizeof(list));
        if (version > 0)
            st = ms_errf(MS_ENOTFOUND, "Servable not found for request: Specific(%s, %" PRId64 ")%s",
                         name ? name : "", version, list);
        else
            st = ms_errf(MS_ENOTFOUND, "Servable not found for request: Latest(%s)%s",
                         name ? name : "", list);
        goto out;
    }
    if (label != NULL && label[0] != '\0') {
        int found = 0;
        for (int i = 0; i < mm->cfg.nlabels; i++)
            if (strcmp(mm->cfg.labels[i].name, label) == 0) {
                version = mm->cfg.labels[i].version;
                found = 1;
            }
        if (!found) {
            list_labels(mm, list, sizeof(list));
            st = ms_errf(MS_EINVAL, "Unrecognized servable version label: %s%s", label, list);
            goto out;
        }
    }
    if (version > 0) {
        mversion *v = find_version(mm, version);
        if (v == NULL || v->state != SRV_VSTATE_AVAILABLE) {
            list_versions(mm, list, sizeof(list));
            st = ms_errf(MS_ENOTFOUND, "Servable not found for request: Specific(%s, %" PRId64 ")%s",
                         name, version, list);
            goto out;
        }
        out->model = rt_model_ref(v->model);
        out->version = v->version;
        goto out;
    }
    for (int i = mm->nv - 1; i >= 0; i--)
        if (mm->v[i].state == SRV_VSTATE_AVAILABLE) {
            out->model = rt_model_ref(mm->v[i].model);
            out->version = mm->v[i].version;
            goto out;
        }
    list_versions(mm, list, sizeof(list));
    st = ms_errf(MS_ENOTFOUND, "Servable not found for request: Latest(%s)%s%s", name, list,
                 mm->unloaded ? "; the model was unloaded through the repository API (load it "
                                "again with RepositoryModelLoad or POST /v2/repository/models/"
                                "<name>/load)"
                              : "");
out:
    pthread_mutex_unlock(&m->mu);
    return st;
}

void srv_servable_release(srv_servable *s) {
    if (s->model) rt_model_unref(s->model);
    s->model = NULL;
}

ms_status srv_manager_status(srv_manager *m, const char *name, int64_t version,
                             srv_version_status **out, int *n) {
    ms_status st = MS_OK;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&m->mu);
    mmodel *mm = find_model(m, name ? name : "");
    if (mm == NULL || mm->removed || mm->nv == 0) {
        char list[1024];
        list_models(m, list, sizeof(list));
        st = ms_errf(MS_ENOTFOUND, "Could not find any versions of model %s%s", name ? name : "",
                     list);
        goto out;
    }
    *out = calloc((size_t)mm->nv, sizeof(srv_version_status));
    if (*out == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < mm->nv; i++) {
        if (version > 0 && mm->v[i].version != version) continue;
        srv_version_status *s = &(*out)[(*n)++];
        s->version = mm->v[i].version;
        s->state = mm->v[i].state;
        s->code = mm->v[i].code;
        snprintf(s->msg, sizeof(s->msg), "%s", mm->v[i].msg);
    }
    if (*n == 0) {
        free(*out);
        *out = NULL;
        st = ms_errf(MS_ENOTFOUND, "Could not find version %" PRId64 " of model %s", version, name);
    }
out:
    pthread_mutex_unlock(&m->mu);
    return st;
}

ms_status srv_manager_available(srv_manager *m, const char *name, int64_t **out, int *n) {
    ms_status st = MS_OK;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&m->mu);
    mmodel *mm = find_model(m, name ? name : "");
    if (mm == NULL || mm->removed) {
        st = ms_errf(MS_ENOTFOUND, "Could not find model %s", name ? name : "");
        goto out;
    }
    *out = calloc((size_t)(mm->nv > 0 ? mm->nv : 1), sizeof(int64_t));
    if (*out == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < mm->nv; i++)
        if (mm->v[i].state == SRV_VSTATE_AVAILABLE) (*out)[(*n)++] = mm->v[i].version;
out:
    pthread_mutex_unlock(&m->mu);
    return st;
}

static int model_ready_locked(const mmodel *mm) {
    if (mm->removed) return 0;
    for (int k = 0; k < mm->nv; k++)
        if (mm->v[k].state == SRV_VSTATE_AVAILABLE) return 1;
    return 0;
}

int srv_manager_ready(srv_manager *m) {
    int ready = 0, configured = 0;
    pthread_mutex_lock(&m->mu);
    ready = 1;
    for (int i = 0; i < m->nmodels; i++) {
        /* A model unloaded on purpose (repository API) is not waited for. */
        if (m->models[i]->removed || m->models[i]->unloaded) continue;
        configured++;
        if (!model_ready_locked(m->models[i])) ready = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return ready && configured > 0;
}

int srv_manager_model_ready(srv_manager *m, const char *name) {
    pthread_mutex_lock(&m->mu);
    mmodel *mm = find_model(m, name ? name : "");
    int r = mm != NULL && model_ready_locked(mm);
    pthread_mutex_unlock(&m->mu);
    return r;
}

int srv_manager_pool_bytes(srv_manager *m, srv_metrics_pool *out, int max) {
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->nmodels; i++)
        for (int k = 0; !m->models[i]->removed && k < m->models[i]->nv && n < max; k++) {
            const mversion *v = &m->models[i]->v[k];
            if (v->state != SRV_VSTATE_AVAILABLE || v->model == NULL) continue;
            snprintf(out[n].model, sizeof out[n].model, "%s", m->models[i]->cfg.name);
            out[n].version = v->version;
            out[n++].pool_free_bytes = rt_model_pool_free_bytes(v->model);
        }
    pthread_mutex_unlock(&m->mu);
    return n;
}

int srv_manager_loaded_versions(srv_manager *m) {
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->nmodels; i++)
        for (int k = 0; !m->models[i]->removed && k < m->models[i]->nv; k++)
            n += m->models[i]->v[k].state == SRV_VSTATE_AVAILABLE;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Repository API (Triton's model_repository extension)                      */
/* ------------------------------------------------------------------------ */

/* The configured model `name` (m->mu held), or NULL with MS_ENOTFOUND set. */
static mmodel *configured(srv_manager *m, const char *name) {
    mmodel *mm = find_model(m, name ? name : "");
    if (mm != NULL && !mm->removed) return mm;
    char list[1024];
    list_models(m, list, sizeof(list));
    ms_errf(MS_ENOTFOUND, "model %s is not in the model config%s", name ? name : "", list);
    return NULL;
}

ms_status srv_manager_model_config(srv_manager *m, const char *name, srv_model_config *out) {
    pthread_mutex_lock(&m->mu);
    mmodel *mm = configured(m, name);
    ms_status st = mm ? srv_model_config_copy(&mm->cfg, out) : MS_ENOTFOUND;
    pthread_mutex_unlock(&m->mu);
    return st;
}

static int cmp_index(const void *a, const void *b) {
    const srv_index_entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0) return c;
    return (x->version > y->version) - (x->version < y->version);
}

ms_status srv_manager_index(srv_manager *m, srv_index_entry **out, int *n) {
    ms_status st = MS_OK;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&m->mu);
    int total = 0;
    for (int i = 0; i < m->nmodels; i++)
        total += m->models[i]->nv > 0 ? m->models[i]->nv : 1;
    srv_index_entry *e = calloc((size_t)(total > 0 ? total : 1), sizeof(*e));
    if (e == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < m->nmodels; i++) {
        const mmodel *mm = m->models[i];
        if (mm->removed) continue;
        for (int k = 0; k < (mm->nv > 0 ? mm->nv : 1); k++) {
            srv_index_entry *x = &e[*n];
            if ((x->name = strdup(mm->cfg.name)) == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory");
                goto out;
            }
            (*n)++;
            x->unloaded = mm->unloaded;
            if (mm->nv == 0) { /* nothing found under the base path yet */
                x->state = SRV_VSTATE_UNKNOWN;
                continue;
            }
            x->version = mm->v[k].version;
            x->state = mm->v[k].state;
            x->code = mm->v[k].code;
            snprintf(x->msg, sizeof(x->msg), "%s", mm->v[k].msg);
        }
    }
out:
    pthread_mutex_unlock(&m->mu);
    if (st != MS_OK) {
        srv_manager_index_free(e, *n);
        *n = 0;
        return st;
    }
    if (*n > 1) qsort(e, (size_t)*n, sizeof(*e), cmp_index);
    *out = e;
    return MS_OK;
}

void srv_manager_index_free(srv_index_entry *e, int n) {
    for (int i = 0; e != NULL && i < n; i++)
        free(e[i].name);
    free(e);
}

/* Asks the loop thread to scan every model now; returns the generation to
 * wait for (m->mu held). */
static uint64_t request_rescan(srv_manager *m) {
    m->rescan = 1;
    return ++m->gen_requested;
}

ms_status srv_manager_unload_model(srv_manager *m, const char *name, double wait_s) {
    pthread_mutex_lock(&m->mu);
    mmodel *mm = configured(m, name);
    if (mm == NULL) {
        pthread_mutex_unlock(&m->mu);
        return MS_ENOTFOUND;
    }
    mm->unloaded = 1;
    uint64_t gen = request_rescan(m);
    pthread_mutex_unlock(&m->mu);
    MS_INFO("model %s: unload requested", name);
    if (m->started) uv_async_send(&m->async);
    wait_applied(m, gen, wait_s);
    ms_status st = MS_OK;
    pthread_mutex_lock(&m->mu);
    if ((mm = find_model(m, name)) != NULL && model_ready_locked(mm))
        st = ms_errf(MS_ETIMEDOUT, "model %s: still unloading after %.1f s", name, wait_s);
    pthread_mutex_unlock(&m->mu);
    return st;
}

ms_status srv_manager_load_model(srv_manager *m, const char *name, double wait_s) {
    pthread_mutex_lock(&m->mu);
    mmodel *mm = configured(m, name);
    if (mm == NULL) {
        pthread_mutex_unlock(&m->mu);
        return MS_ENOTFOUND;
    }
    mm->unloaded = 0;
    mm->warned_missing = 0;
    /* An explicit load retries the versions that failed, changed or not. */
    for (int k = 0; k < mm->nv; k++)
        if (mm->v[k].state == SRV_VSTATE_END && mm->v[k].code != MS_OK) mm->v[k].code = MS_OK;
    uint64_t gen = request_rescan(m);
    char *base = strdup(mm->cfg.base_path);
    pthread_mutex_unlock(&m->mu);
    MS_INFO("model %s: load requested", name);
    if (m->started) uv_async_send(&m->async);
    wait_applied(m, gen, wait_s);
    ms_status st = MS_OK;
    pthread_mutex_lock(&m->mu);
    mm = find_model(m, name);
    if (mm == NULL || mm->removed) {
        st = ms_errf(MS_ENOTFOUND, "model %s left the model config while loading", name);
    } else if (!model_ready_locked(mm)) {
        const mversion *failed = NULL;
        int loading = 0;
        for (int k = 0; k < mm->nv; k++) {
            if (mm->v[k].state == SRV_VSTATE_END && mm->v[k].code != MS_OK) failed = &mm->v[k];
            if (mm->v[k].state == SRV_VSTATE_LOADING || mm->v[k].state == SRV_VSTATE_START)
                loading = 1;
        }
        if (failed != NULL)
            st = ms_errf(failed->code, "failed to load model %s version %" PRId64 ": %s", name,
                         failed->version, failed->msg);
        else if (loading)
            st = ms_errf(MS_ETIMEDOUT, "model %s: still loading after %.1f s", name, wait_s);
        else
            st = ms_errf(MS_EPRECOND, "model %s: no complete version folder under base path %s "
                                      "(expected numbered folders, e.g. %s/1/saved_model.pb)",
                         name, base ? base : "", base ? base : "");
    }
    pthread_mutex_unlock(&m->mu);
    free(base);
    return st;
}
