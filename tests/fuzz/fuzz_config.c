/* fuzz_config.c - libFuzzer target: the model server's configuration
 * parsers, which read what operators write and, through the admin RPC, what
 * an admin client sends: ModelServerConfig as JSON and as protobuf text
 * format (server/models/srv_config.c, what --model_config_file holds), the SSLConfig
 * text of --ssl_config_file (server/transport/srv_tls.c), and a ReloadConfigRequest's
 * bytes as the RPC handler takes them (the request pre-scan, protobuf-c's
 * unpack, srv_config_from_proto). Byte 0 picks the parser (mod 4); the rest
 * is the text or the message. A crash, leak or sanitizer report is a
 * finding; refusals are expected.
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_config CORPUS. */
#include <stdlib.h>
#include <string.h>

#include "ms_wire.h"
#include "srv_config.h"
#include "srv_tls.h"
#include "tf_serving.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void reload_request(const uint8_t *p, size_t n) {
    if (ms_wire_check_request(p, n) != MS_OK) return;
    Tensorflow__Serving__ReloadConfigRequest *rq =
        tensorflow__serving__reload_config_request__unpack(NULL, n, p);
    if (rq == NULL) return;
    srv_config *cfg = NULL;
    if (rq->config != NULL &&
        rq->config->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG__NOT_SET &&
        srv_config_from_proto(rq->config, &cfg) == MS_OK)
        srv_config_free(cfg);
    tensorflow__serving__reload_config_request__free_unpacked(rq, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % 4;
    if (which == 3) {
        reload_request(data + 1, size - 1);
        return 0;
    }
    /* the text parsers take a NUL-terminated string, as read from a file */
    char *text = malloc(size);
    if (text == NULL) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    if (which == 2) {
        srv_tls *t = NULL;
        if (srv_tls_parse(text, &t) == MS_OK) srv_tls_free(t);
    } else {
        srv_config *cfg = NULL;
        ms_status st = which == 0 ? srv_config_parse_json(text, &cfg)
                                  : srv_config_parse_text(text, &cfg);
        if (st == MS_OK) srv_config_free(cfg);
    }
    free(text);
    return 0;
}
