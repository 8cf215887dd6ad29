/* fuzz_rest_predict.c - libFuzzer target: the REST prediction bodies, the
 * JSON a client sends to TF Serving's :predict (server/http/srv_rest.c,
 * predict_json: row "instances" and columnar "inputs", b64 strings, nested
 * lists to tensors, the signature check, the run, the answer back to JSON)
 * and to KServe v2's /infer (server/http/srv_rest_v2.c: JSON tensors, and the
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
#include "../../server/http/srv_rest.c"

#include "fuzz_app.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_app g_app;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_app_start(&g_app, "fuzz_rest_predict");
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
    answer a = predict_json(&g_app, &tg, &b, &version, &st, NULL, NULL);
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
