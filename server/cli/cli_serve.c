/* cli_serve.c - `dcmserve serve`: the daemon.
 *
 * Threads: the main thread runs a libuv loop (signals, model polling, config
 * re-reads); the model manager loads on libuv's thread pool; the gRPC server
 * has its own CQ threads and worker pool (srv_grpc.c). SIGTERM/SIGINT: health
 * goes NOT_SERVING, new calls get UNAVAILABLE, in-flight calls finish (up to
 * --drain_timeout_seconds), then the process exits 0. SIGHUP re-reads
 * --model_config_file. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_ctx.h"
#include "kn_threadpool.h"
#include "ms_log.h"
#include "ms_watch.h"
#include "srv_warmup.h"
#include "ms_malloc.h"
#include "ms_memlimit.h"
#include "rt_exec.h"
#include "srv_app.h"
#include "srv_batch.h"
#include "srv_metrics.h"
#include "srv_rest.h"
#include "srv_listen.h"
#include "srv_tls.h"
#include "cli.h"
#include "cli_device.h"
#include "srv_config.h"
#include "srv_flags.h"
#include "srv_grpc.h"
#include "srv_manager.h"

typedef struct daemon {
    srv_flags flags;
    srv_app app;
    srv_server *server;
    srv_tls *tls; /* --ssl_config_file, or NULL */
    kn_backend *be;
    kn_backend *dev; /* the GPU backend of --device, or NULL */
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t cfg_timer;
    uv_async_t stop_async;
    pthread_t shutdown_tid, loop_tid;
    pthread_mutex_t mu;       /* guards server and pending_signal across threads */
    srv_server *server_ready; /* set once the gRPC server runs */
    int pending_signal;       /* SIGTERM/SIGINT seen before the server ran */
    int shutdown_started;
    int serving_logged;
    uint64_t cfg_hash;
    struct timespec t0;
} daemon_t;

static double ms_since(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Manager listener (loop thread): push health changes, log the first SERVING. */
static void on_models_changed(void *arg) {
    daemon_t *d = arg;
    srv_health_update(d->app.health);
    if (!d->serving_logged && srv_manager_ready(d->app.mgr)) {
        d->serving_logged = 1;
        MS_INFO("health SERVING: every model has an available version (%.1f ms after start)",
                ms_since(&d->t0));
    }
}

static uint64_t hash_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint64_t h = 1469598103934665603ULL;
    int ch;
    if (f == NULL) return 0;
    while ((ch = fgetc(f)) != EOF)
        h = (h ^ (uint64_t)ch) * 1099511628211ULL;
    fclose(f);
    return h;
}

/* Re-reads --model_config_file; keeps the old model list when it is bad. */
static void reload_config_file(daemon_t *d, int only_if_changed) {
    const char *path = d->flags.model_config_file;
    if (path == NULL) {
        MS_INFO("SIGHUP: no --model_config_file to re-read");
        return;
    }
    uint64_t h = hash_file(path);
    if (only_if_changed && h == d->cfg_hash) return;
    srv_config *cfg = NULL;
    if (srv_config_read_file(path, &cfg) != MS_OK) {
        MS_ERROR("model config not reloaded, keeping the current one: %s", ms_errmsg());
        d->cfg_hash = h;
        return;
    }
    d->cfg_hash = h;
    /* An empty or half-written file must not take every model down. */
    if (srv_admin_check_config(&d->app.admin, cfg) != MS_OK) {
        MS_ERROR("model config not reloaded, keeping the current one: %s", ms_errmsg());
        srv_config_free(cfg);
        return;
    }
    if (cfg->nmodels == 0 && !d->flags.allow_empty_model_config) {
        MS_ERROR("model config %s lists no model; keeping the current one (a file being written? "
                 "--allow_empty_model_config allows it)", path);
        srv_config_free(cfg);
        return;
    }
    MS_INFO("model config re-read from %s: %d model(s)", path, cfg->nmodels);
    srv_manager_apply(d->app.mgr, cfg, 0);
}

static void on_cfg_timer(uv_timer_t *t) {
    reload_config_file(t->data, 1);
}

static void *shutdown_main(void *arg) {
    daemon_t *d = arg;
    int left = srv_server_drain_wait(d->server, d->flags.drain_timeout_seconds, 1.0);
    if (left > 0)
        MS_WARN("drain timeout (%.1f s): %d call(s) still running will be cancelled",
                d->flags.drain_timeout_seconds, left);
    /* REST runs and warm-ups have no gRPC call to cancel: their watches */
    ms_watch_cancel_all();
    srv_health_close_watchers(d->app.health);
    srv_server_stop(d->server, 1.0);
    uv_async_send(&d->stop_async);
    return NULL;
}

/* Begins the drain; any thread, once the server runs. */
static void begin_shutdown(daemon_t *d, int signum) {
    if (d->shutdown_started) return;
    d->shutdown_started = 1;
    MS_INFO("%s: draining (%d call(s) in flight), health NOT_SERVING",
            signum == SIGTERM ? "SIGTERM" : "SIGINT", srv_server_inflight(d->server));
    atomic_store(&d->app.draining, 1);
    srv_server_drain_begin(d->server);
    srv_health_update(d->app.health);
    pthread_create(&d->shutdown_tid, NULL, shutdown_main, d);
}

static void on_signal(uv_signal_t *h, int signum) {
    daemon_t *d = h->data;
    if (signum == SIGHUP) {
        MS_INFO("SIGHUP: re-reading the model config");
        reload_config_file(d, 0);
        if (d->tls != NULL) {
            if (srv_tls_reload(d->tls) != MS_OK)
                MS_ERROR("TLS certificates not reloaded, keeping the current ones: %s", ms_errmsg());
            else
                MS_INFO("SIGHUP: TLS certificates re-read; new gRPC connections use them");
        }
        return;
    }
    pthread_mutex_lock(&d->mu);
    if (d->server_ready == NULL)
        d->pending_signal = signum; /* acted on as soon as the server runs */
    else
        begin_shutdown(d, signum);
    pthread_mutex_unlock(&d->mu);
}

/* Every connection and model file takes a descriptor: use the hard limit. */
static void raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        MS_DEBUG("RLIMIT_NOFILE raised from %llu to %llu", (unsigned long long)was,
                 (unsigned long long)rl.rlim_max);
}

/* glibc's arenas for a long-running daemon (docs/reliability.md, "RSS
 * drift"; docs/serving.md, "glibc's heap"). By default every thread that
 * meets a locked arena may make another, up to 8 per core. malloc_trim gives
 * back the free top of the main arena only: the top of another arena's heap
 * stays resident up to the trim threshold (32 MiB with ms_malloc_keep_heap),
 * and after a burst of large requests 20-30 MB stayed so in one of two runs
 * with two arenas. One arena, unless MALLOC_ARENA_MAX is set: small blocks
 * go through each thread's tcache without the arena's lock. */
static void limit_malloc_arenas(void) {
    if (getenv("MALLOC_ARENA_MAX") == NULL) mallopt(M_ARENA_MAX, 1);
}

/* --check_config: every base path is a readable directory holding at least
 * one numeric version directory. Prints the first problem; 0 when all fit. */
static int check_config(const srv_config *cfg) {
    for (int i = 0; i < cfg->nmodels; i++) {
        const srv_model_config *m = &cfg->models[i];
        DIR *dir = opendir(m->base_path);
        if (dir == NULL) {
            fprintf(stderr, "dcmserve serve: model '%s': base_path '%s' is not a readable directory\n",
                    m->name, m->base_path);
            return 1;
        }
        int nver = 0;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            const char *c = e->d_name;
            while (*c != '\0' && isdigit((unsigned char)*c)) c++;
            if (*c == '\0' && c != e->d_name) nver++;
        }
        closedir(dir);
        int itself = nver == 0 ? srv_manager_base_is_savedmodel(m->base_path) : 0;
        if (itself) {
            fprintf(stderr, "dcmserve serve: model '%s': base_path '%s' is itself %s; "
                            "put it in a numbered version folder, e.g. %s/1/\n",
                    m->name, m->base_path,
                    itself == 2 ? "an ONNX model (model.onnx)" : "a SavedModel", m->base_path);
            return 1;
        }
        if (nver == 0) {
            fprintf(stderr, "dcmserve serve: model '%s': base_path '%s' has no numeric version "
                            "directory (expected e.g. %s/1)\n", m->name, m->base_path, m->base_path);
            return 1;
        }
    }
    printf("dcmserve: config OK: %d model(s)\n", cfg->nmodels);
    return 0;
}

static void *loop_main(void *arg) {
    daemon_t *d = arg;
    uv_run(&d->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_stop(uv_async_t *a) {
    daemon_t *d = a->data;
    srv_manager_stop(d->app.mgr);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sighup, NULL);
    uv_close((uv_handle_t *)&d->cfg_timer, NULL);
    uv_close((uv_handle_t *)&d->stop_async, NULL);
}

int cli_serve(int argc, char **argv) {
    daemon_t d;
    srv_config *cfg = NULL;
    int rc = 1;

    memset(&d, 0, sizeof(d));
    clock_gettime(CLOCK_MONOTONIC, &d.t0);
    if (srv_flags_parse(argc, argv, 1, &d.flags) != MS_OK) {
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        return 2;
    }
    if (d.flags.help) {
        srv_flags_usage(stdout);
        return 0;
    }
    if (d.flags.version) {
        cli_print_version();
        return 0;
    }
    ms_log_set_level(d.flags.log_level);
    if (d.flags.log_format && strcmp(d.flags.log_format, "json") == 0) ms_log_set_format(MS_LOG_JSON);
    if (d.flags.request_log) {
        int rl = 1;
        srv_reqlog_parse(d.flags.request_log, &rl);
        srv_reqlog_set(rl);
    }
    signal(SIGPIPE, SIG_IGN);
    raise_nofile_limit();
    limit_malloc_arenas();
    ms_malloc_keep_heap(); /* no heap trim and refault per large request */
    /* The intra-op pool computes for the workers: same priority, also when
     * a model's warm-up (on the loader thread) starts its threads. */
    if (d.flags.grpc_worker_nice > 0) kn_threadpool_set_nice(d.flags.grpc_worker_nice);

    if (d.flags.model_config_file != NULL) {
        if (srv_config_read_file(d.flags.model_config_file, &cfg) != MS_OK) {
            fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
            return 2;
        }
        d.cfg_hash = hash_file(d.flags.model_config_file);
    } else if (d.flags.model_base_path != NULL) { /* --model_config_file wins, as TF Serving */
        const char *name = d.flags.model_name ? d.flags.model_name : "default";
        if (srv_config_single(name, d.flags.model_base_path, &cfg) != MS_OK) {
            fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
            return 2;
        }
    } else {
        fprintf(stderr, "dcmserve serve: give --model_base_path (with --model_name) or "
                        "--model_config_file (see --help)\n");
        return 2;
    }
    if (d.flags.check_config) {
        rc = check_config(cfg);
        srv_config_free(cfg);
        return rc;
    }
    srv_flags_log_notes(&d.flags);
    int gpu = -1;
    if ((rc = cli_device_choose("serve", d.flags.device, d.flags.gpu_memory_fraction,
                                d.flags.precision, &gpu)) != 0) {
        srv_config_free(cfg);
        return rc;
    }
    rc = 1;
    srv_batch_params bp;
    srv_batch_params_defaults(&bp);
    if (d.flags.enable_batching) { /* issue 13: dynamic batching (srv_batch.c) */
        if (d.flags.batching_parameters_file &&
            srv_batch_params_read(d.flags.batching_parameters_file, &bp) != MS_OK) {
            fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
            srv_config_free(cfg);
            return 2;
        }
        d.app.batcher = srv_batcher_new(&bp, d.flags.enable_per_model_batching_parameters);
        MS_INFO("batching on: max_batch_size %lld, batch_timeout_micros %lld, "
                "max_enqueued_batches %lld, num_batch_threads %lld%s",
                (long long)bp.max_batch_size, (long long)bp.batch_timeout_micros,
                (long long)bp.max_enqueued_batches, (long long)bp.num_batch_threads,
                d.flags.enable_per_model_batching_parameters ? " (per-model files first)" : "");
    }
    if (d.flags.ssl_config_file != NULL && srv_tls_load(d.flags.ssl_config_file, &d.tls) != MS_OK) {
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        srv_config_free(cfg);
        return 2;
    }

    d.be = kn_cpu_backend_new(d.flags.intra_op_threads);
    if (d.be == NULL) {
        fprintf(stderr, "dcmserve serve: cannot create the CPU backend\n");
        srv_config_free(cfg);
        srv_tls_free(d.tls);
        return 1;
    }
    if ((rc = cli_device_open("serve", d.flags.device, gpu, d.be, &d.dev)) != 0) goto out_be;
    rc = 1;
    if (srv_manager_new(d.be, d.flags.file_system_poll_wait_seconds, &d.app.mgr) != MS_OK) {
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        goto out_be;
    }
    srv_manager_set_device(d.app.mgr, d.dev);
    if (d.flags.cuda_graphs) rt_device_graphs_set(1); /* plans built from now on */
    srv_manager_set_batching(d.app.mgr, d.flags.enable_batching ? &bp : NULL,
                             d.flags.enable_per_model_batching_parameters);
    if (strcmp(d.flags.saved_model_tags, "serve") != 0 &&
        srv_manager_set_tags(d.app.mgr, d.flags.saved_model_tags) != MS_OK) {
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        srv_manager_free(d.app.mgr);
        rc = 2;
        goto out_be;
    }
    d.app.max_message_bytes = d.flags.max_message_bytes;
    d.app.max_request_memory_bytes = d.flags.max_request_memory_bytes;
    /* Before any model loads: each version's output buffer pool keeps up to
     * one request's budget free for the next request (docs/serving.md). */
    {
        long long mem = ms_memory_limit();
        size_t cap = kn_pool_default_max_free(d.flags.max_request_memory_bytes, mem);
        kn_pool_set_default_max_free(cap);
        const char *env = getenv("DCMSERVE_POOL_MAX_FREE_BYTES");
        if (env != NULL && *env != '\0')
            MS_INFO("buffer pools keep up to DCMSERVE_POOL_MAX_FREE_BYTES=%s bytes free per "
                    "model version", env);
        else
            MS_INFO("buffer pools keep up to %zu MiB free per model version "
                    "(--max_request_memory_bytes, at most a quarter of the memory limit of "
                    "%lld MiB, at least %zu)",
                    cap >> 20, mem >> 20, KN_POOL_MAX_FREE_MIN >> 20);
    }
    /* A series' files in a large Predict land in this pool's buffers, kept
     * for the next request like a model's outputs (srv_tfs.c). */
    d.app.req_pool = kn_pool_new();
    rt_model_set_max_memory((uint64_t)d.flags.max_model_memory_bytes);
    srv_warmup_set_run_timeout(d.flags.model_warmup_run_timeout_seconds);
    d.app.reload_wait_s = 60.0;
    srv_manager_set_warmup(d.app.mgr, d.flags.enable_model_warmup
                                          ? d.flags.num_request_iterations_for_warmup
                                          : 0);
    d.app.admin = (srv_admin_policy){.enabled = d.flags.enable_reload_config_rpc,
                                     .client_cns = d.flags.admin_client_cn,
                                     .base_path_prefix = d.flags.model_base_path_prefix,
                                     .max_models = d.flags.max_num_models};
    d.app.allow_empty_config = d.flags.allow_empty_model_config;
    if (srv_admin_check_config(&d.app.admin, cfg) != MS_OK) {
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        srv_manager_free(d.app.mgr);
        rc = 2;
        goto out_be;
    }
    d.app.health = srv_health_new(&d.app);
    srv_manager_set_listener(d.app.mgr, on_models_changed, &d);

    /* The libuv loop (signals, polling, loads) runs on its own thread from
     * here on, so that models load while gRPC starts up. Every handle is set
     * up before that thread starts: libuv handles are not thread-safe. */
    pthread_mutex_init(&d.mu, NULL);
    uv_loop_init(&d.loop);
    srv_manager_start(d.app.mgr, &d.loop);
    srv_manager_apply(d.app.mgr, cfg, 0); /* applied once the loop runs */
    cfg = NULL;
    uv_signal_init(&d.loop, &d.sigterm);
    uv_signal_init(&d.loop, &d.sigint);
    uv_signal_init(&d.loop, &d.sighup);
    d.sigterm.data = d.sigint.data = d.sighup.data = &d;
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sighup, on_signal, SIGHUP);
    uv_timer_init(&d.loop, &d.cfg_timer);
    d.cfg_timer.data = &d;
    if (d.flags.model_config_file && d.flags.model_config_file_poll_wait_seconds > 0) {
        uint64_t ms = (uint64_t)d.flags.model_config_file_poll_wait_seconds * 1000;
        uv_timer_start(&d.cfg_timer, on_cfg_timer, ms, ms);
    }
    uv_async_init(&d.loop, &d.stop_async, on_stop);
    d.stop_async.data = &d;
    pthread_create(&d.loop_tid, NULL, loop_main, &d);

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nmeth;
    const srv_method *meth = srv_app_methods(&nmeth);
    srv_server_opts so = {
        .bind_address = d.flags.bind_address,
        .port = d.flags.port,
        .cq_threads = d.flags.grpc_cq_threads,
        .workers = d.flags.grpc_max_threads > 0 ? d.flags.grpc_max_threads
                                                : 4 * (int)(ncpu > 0 ? ncpu : 1),
        .max_message_bytes = d.flags.max_message_bytes,
        .channel_arguments = d.flags.grpc_channel_arguments,
        .queue_bound = d.flags.max_queued_requests_per_model,
        .queue_key = srv_app_queue_key,
        /* Without batching a model runs on at most one worker per core (the
         * others stay free for other models) and small calls run inline. */
        .queue_run_cap = d.app.batcher ? 0 : (int)(ncpu > 0 ? ncpu : 1),
        .inline_max_bytes = d.app.batcher ? 0 : 4096,
        .inline_max_micros = d.flags.grpc_inline_max_micros,
        .handover_max_micros = d.app.batcher ? 0 : d.flags.grpc_handover_max_micros,
        .standby_threads = d.flags.grpc_standby_threads,
        .worker_nice = d.flags.grpc_worker_nice,
        .cq_slice_us = d.flags.grpc_cq_slice_micros,
        .max_connections = d.flags.max_connections,
        .idle_timeout_s = d.flags.idle_timeout_seconds,
        .max_concurrent_streams = d.flags.grpc_max_concurrent_streams,
        .keepalive_time_s = d.flags.grpc_keepalive_time_seconds,
        .keepalive_timeout_s = d.flags.grpc_keepalive_timeout_seconds,
        .max_connection_age_s = d.flags.max_connection_age_seconds,
        .max_connection_age_grace_s = d.flags.max_connection_age_grace_seconds,
        .memory_quota_bytes = d.flags.grpc_memory_quota_bytes,
    };
    if (d.app.batcher != NULL) { /* issue 13: room for a full batch of waiting callers */
        int64_t need = bp.max_batch_size + 2, qb = bp.max_enqueued_batches * bp.max_batch_size;
        if (d.flags.grpc_max_threads == 0 && so.workers < need) so.workers = (int)(need < 1024 ? need : 1024);
        if (so.queue_bound == 0) so.queue_bound = (int)(qb < 1000000 ? qb : 1000000);
    }
    if (d.tls != NULL) so.creds = srv_tls_grpc_credentials(d.tls);
    if (d.tls != NULL && d.flags.max_connections > 0 && !srv_listener_grpc_supported())
        MS_WARN("--max_connections: with --ssl_config_file and gRPC %s the gRPC port is gRPC's "
                "own TLS listener, which has no connection limit; the limit applies to REST only "
                "(docs/security.md)", grpc_version_string());
    ms_status sst = srv_server_start(&so, meth, nmeth, &d.app, &d.server);
    if (so.creds != NULL) grpc_server_credentials_release(so.creds);
    if (sst != MS_OK) {
        MS_ERROR("%s", ms_errmsg());
        fprintf(stderr, "dcmserve serve: %s\n", ms_errmsg());
        uv_async_send(&d.stop_async);
        pthread_join(d.loop_tid, NULL);
        pthread_mutex_destroy(&d.mu);
        rc = 2;
        goto out_mgr;
    }
    MS_INFO("gRPC listening on %s:%d (TF Serving, KServe v2, grpc.health.v1; %d CQ threads "
            "with %d standby each, %d workers, max message %lld bytes; %s)",
            d.flags.bind_address, srv_server_port(d.server), so.cq_threads,
            so.handover_max_micros > 0 ? so.standby_threads : 0, so.workers,
            (long long)so.max_message_bytes,
            d.tls == NULL ? "plaintext" : srv_tls_client_verify(d.tls) ? "mutual TLS" : "TLS");
    /* One machine-readable line on stdout for scripts (the port when --port=0). */
    printf("dcmserve: listening on %s:%d\n", d.flags.bind_address, srv_server_port(d.server));
    fflush(stdout);
    srv_rest *rest = NULL;
    d.app.server = d.server; /* REST :predict goes through the per-model queues */
    char mpath[256] = "";
    if (d.flags.monitoring_config_file &&
        srv_metrics_config_path(d.flags.monitoring_config_file, mpath, sizeof mpath) != MS_OK)
        MS_ERROR("%s", ms_errmsg());
    if (d.flags.rest_api_port > 0) {
        srv_rest_opts ro = {.port = d.flags.rest_api_port,
                            .threads = d.flags.rest_api_num_threads,
                            /* REST idles out like gRPC unless the TF Serving flag says */
                            .timeout_ms = d.flags.rest_api_timeout_in_ms > 0
                                              ? d.flags.rest_api_timeout_in_ms
                                              : d.flags.idle_timeout_seconds * 1000,
                            /* TF Serving's REST call deadline: 30 s unless given */
                            .call_timeout_ms = d.flags.rest_api_timeout_in_ms > 0
                                                   ? d.flags.rest_api_timeout_in_ms
                                                   : 30000,
                            .cors = d.flags.rest_api_enable_cors_support,
                            .metrics_path = mpath,
                            .tls = d.tls,
                            .max_connections = d.flags.max_connections,
                            .read_timeout_s = d.flags.rest_read_timeout_seconds,
                            .max_buffered_bytes = d.flags.max_rest_buffered_bytes,
                            .bind_address = d.flags.bind_address};
        if (srv_rest_start(&d.app, &ro, &rest) != MS_OK)
            MS_ERROR("REST: %s", ms_errmsg());
        else
            MS_INFO("REST listening on %s:%d (TF Serving /v1/models, KServe /v2, /metrics)",
                    d.flags.bind_address, srv_rest_port(rest));
    }
    pthread_mutex_lock(&d.mu);
    d.server_ready = d.server;
    if (d.pending_signal) begin_shutdown(&d, d.pending_signal);
    pthread_mutex_unlock(&d.mu);

    pthread_join(d.loop_tid, NULL);
    pthread_join(d.shutdown_tid, NULL);
    pthread_mutex_destroy(&d.mu);
    srv_rest_stop(rest);
    srv_server_free(d.server);
    MS_INFO("shutdown complete");
    rc = 0;
out_mgr:
    srv_batcher_free(d.app.batcher);
    srv_health_free(d.app.health);
    srv_manager_free(d.app.mgr);
    kn_pool_release(d.app.req_pool);
    uv_loop_close(&d.loop);
out_be:
    kn_backend_free(d.dev); /* after the manager: its models hold GPU memory */
    kn_backend_free(d.be);
    srv_config_free(cfg);
    srv_tls_free(d.tls);
    return rc;
}
