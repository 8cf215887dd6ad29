/* fuzz_app.h - for the REST fuzz targets (fuzz_rest_examples.c,
 * fuzz_rest_predict.c): an srv_app whose model manager, on its own libuv
 * loop thread, has loaded half_plus_two as "hpt" from tests/data (or the base
 * path in $DCM_FUZZ_MODEL_BASE), with a 1 MiB message limit and a 64 MiB
 * request budget. Included once per target (static functions). */
#ifndef FUZZ_APP_H
#define FUZZ_APP_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "kn_cpu_backend.h"
#include "srv_app.h"
#include "srv_config.h"

static uv_loop_t fuzz_app_loop;
static uv_async_t fuzz_app_keep; /* keeps the loop running for the manager */

static void *fuzz_app_loop_main(void *arg) {
    (void)arg;
    uv_run(&fuzz_app_loop, UV_RUN_DEFAULT);
    return NULL;
}

static void fuzz_app_on_keep(uv_async_t *h) {
    (void)h;
}

/* Sets up *app or exits with a message naming `who` (the target). */
static void fuzz_app_start(srv_app *app, const char *who) {
    char dir[4096];
    const char *env = getenv("DCM_FUZZ_MODEL_BASE");
    if (env)
        snprintf(dir, sizeof dir, "%s", env);
    else
        snprintf(dir, sizeof dir, "%s/tests/data/savedmodels/saved_model_half_plus_two_cpu",
                 getenv("DCM_SRC") ? getenv("DCM_SRC") : ".");
    kn_backend *be = kn_cpu_backend_new(1);
    srv_config *cfg = NULL;
    pthread_t tid;
    if (be == NULL || srv_manager_new(be, 0, &app->mgr) != MS_OK ||
        uv_loop_init(&fuzz_app_loop) != 0 ||
        uv_async_init(&fuzz_app_loop, &fuzz_app_keep, fuzz_app_on_keep) != 0 ||
        srv_manager_start(app->mgr, &fuzz_app_loop) != MS_OK ||
        pthread_create(&tid, NULL, fuzz_app_loop_main, NULL) != 0 ||
        srv_config_single("hpt", dir, &cfg) != MS_OK) {
        fprintf(stderr, "%s: cannot set up the model manager: %s\n", who, ms_errmsg());
        exit(1);
    }
    srv_manager_apply(app->mgr, cfg, 60.0);
    if (!srv_manager_model_ready(app->mgr, "hpt")) {
        fprintf(stderr, "%s: cannot load %s (run from the repository root or set "
                        "DCM_FUZZ_MODEL_BASE)\n", who, dir);
        exit(1);
    }
    app->max_message_bytes = 1 << 20;
    app->max_request_memory_bytes = 64 << 20;
}

#endif /* FUZZ_APP_H */
