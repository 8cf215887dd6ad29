/* fuzz_rest_predict.c - libFuzzer target: the REST prediction bodies, the
 * JSON a client sends to TF Serving's :predict (server/srv_rest.c,
 * predict_json: row "instances" and columnar "inputs", b64 strings, nested
 * lists to tensors, the signature check, the run, the answer back to JSON)
 * and to KServe v2's /infer (server/srv_rest_v2.c: JSON tensors, and the
 * binary tensor data extension after an Inference-Header-Content-Length),
 * against a real model: tests/data half_plus_two as "hpt" (or
 * $DCM_FUZZ_MODEL_BASE) loaded by a real model manager. srv_rest.c is
 * compiled into this target so that its static functions can be called
 * without a socket.
 *
 * Input: byte 0 bit 0 picks KServe v2 (else TF Serving), bit 1 asks for
 * version 123, bit 2 for an unknown model name, bit 3 (v2 only) sends byte 1
 * as the Inference-Header-Content-Length (the JSON part's length; the rest of
 * the body is binary tensor data); the rest is the body. A crash, leak or
 * sanitizer report is a finding; error answers are expected.
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_rest_predict CORPUS (from the repository root). */
#include "../../server/srv_rest.c"

#include <pthread.h>
#include <uv.h>

#include "kn_cpu_backend.h"
#include "srv_config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_app g_app;
static uv_loop_t g_loop;
static uv_async_t g_keep; /* keeps the loop running for the manager */

static void *loop_main(void *arg) {
    (void)arg;
    uv_run(&g_loop, UV_RUN_DEFAULT);
    return NULL;
}

static void on_keep(uv_async_t *h) {
    (void)h;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
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
    if (be == NULL || srv_manager_new(be, 0, &g_app.mgr) != MS_OK ||
        uv_loop_init(&g_loop) != 0 || uv_async_init(&g_loop, &g_keep, on_keep) != 0 ||
        srv_manager_start(g_app.mgr, &g_loop) != MS_OK ||
        pthread_create(&tid, NULL, loop_main, NULL) != 0 ||
        srv_config_single("hpt", dir, &cfg) != MS_OK) {
        fprintf(stderr, "fuzz_rest_predict: cannot set up the model manager: %s\n", ms_errmsg());
        exit(1);
    }
    srv_manager_apply(g_app.mgr, cfg, 60.0);
    if (!srv_manager_model_ready(g_app.mgr, "hpt")) {
        fprintf(stderr, "fuzz_rest_predict: cannot load %s (run from the repository root or "
                        "set DCM_FUZZ_MODEL_BASE)\n", dir);
        exit(1);
    }
    g_app.max_message_bytes = 1 << 20;
    g_app.max_request_memory_bytes = 64 << 20;
    return 0;
}

static void tf_serving(const uint8_t *data, size_t size) {
    target tg = {.version = (data[0] & 2) ? 123 : 0};
    snprintf(tg.name, sizeof tg.name, "%s", (data[0] & 4) ? "nope" : "hpt");
    /* a copy of exactly the body's bytes, as on_request collects it */
    char *copy = malloc(size);
    if (copy == NULL) return;
    memcpy(copy, data + 1, size - 1);
    body b = {.data = copy, .len = size - 1, .cap = size};
    int64_t version = 0;
    ms_status st = MS_OK;
    answer a = predict_json(&g_app, &tg, &b, &version, &st, NULL);
    char *text = cJSON_PrintUnformatted(a.json);
    free(text);
    cJSON_Delete(a.json);
    free(copy);
}

static void kserve(const uint8_t *data, size_t size) {
    const char *url = (data[0] & 4) ? ((data[0] & 2) ? "/v2/models/nope/versions/123/infer"
                                                     : "/v2/models/nope/infer")
                                    : ((data[0] & 2) ? "/v2/models/hpt/versions/123/infer"
                                                     : "/v2/models/hpt/infer");
    char hdr[8];
    const char *hlen = NULL;
    size_t skip = 1;
    if ((data[0] & 8) && size >= 2) {
        snprintf(hdr, sizeof hdr, "%u", (unsigned)data[1]);
        hlen = hdr;
        skip = 2;
    }
    char *copy = malloc(size);
    if (copy == NULL) return;
    memcpy(copy, data + skip, size - skip);
    srv_rest_reply o;
    srv_rest_v2(&g_app, "POST", url, hlen, copy, size - skip, NULL, &o);
    free(o.body);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1)
        kserve(data, size);
    else
        tf_serving(data, size);
    return 0;
}
