/* fuzz_rest_examples.c - libFuzzer target: the REST :classify / :regress
 * body (server/http/srv_rest.c, example_json): JSON parse, the number scan that
 * tells 1 from 1.0, the {feature: value} -> tf.Example conversion, the
 * packed Classification/RegressionRequest through the gRPC handler
 * (srv_tfs_classify / srv_tfs_regress, srv_classify.c) against a real
 * model (tests/data half_plus_two as "hpt", or $DCM_FUZZ_MODEL_BASE), and
 * the reply back to JSON. srv_rest.c is compiled into this target so that
 * its static functions can be called without a socket.
 *
 * Input: byte 0 bit 0 picks :regress (else :classify), bit 1 asks for
 * version 123, bit 2 for an unknown model name; the rest is the body. A crash,
 * leak or sanitizer report is a finding; error answers are expected.
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_rest_examples CORPUS (from the repository root). */
#include "../../server/http/srv_rest.c"

#include "fuzz_app.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_app g_app;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_app_start(&g_app, "fuzz_rest_examples");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    target tg = {.version = (data[0] & 2) ? 123 : 0};
    snprintf(tg.name, sizeof tg.name, "%s", (data[0] & 4) ? "nope" : "hpt");
    /* a copy of exactly the body's bytes, as on_request collects it */
    char *copy = malloc(size);
    if (copy == NULL) return 0;
    memcpy(copy, data + 1, size - 1);
    body b = {.data = copy, .len = size - 1, .cap = size};
    int64_t version = 0;
    ms_status st = MS_OK;
    answer a = example_json(&g_app, &tg, &b, data[0] & 1, &version, &st, NULL);
    char *text = cJSON_PrintUnformatted(a.json);
    free(text);
    cJSON_Delete(a.json);
    free(copy);
    return 0;
}
