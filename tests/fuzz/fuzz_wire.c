/* fuzz_wire.c - libFuzzer target: the request pre-scan (common/ms_wire.c:
 * nesting and field counts) on raw bytes, then, for what it accepts, the
 * model_spec merge (ms_wire_merge_field) and protobuf-c's unpack of the two
 * largest request messages (TF Serving PredictRequest, KServe
 * ModelInferRequest), as the gRPC server does. A crash or a stack overflow in the unpack of something
 * the pre-scan let through is a finding. Build: CC=clang cmake -S . -B
 * build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON; run: build-fuzz/fuzz_wire CORPUS. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kserve.pb-c.h"
#include "ms_wire.h"
#include "tf_serving.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ms_wire_check_request(data, size) != MS_OK) return 0;
    uint8_t *m = NULL;
    size_t mn = 0;
    if (ms_wire_merge_field(data, size, 1, &m, &mn) != MS_OK) return 0;
    /* Joined payloads may parse where the parts did not: the server
     * pre-scans the merged message again (srv_tfs.c). */
    if (m != NULL && ms_wire_check_request(m, mn) != MS_OK) {
        free(m);
        return 0;
    }
    Tensorflow__Serving__PredictRequest *p =
        tensorflow__serving__predict_request__unpack(NULL, m ? mn : size, m ? m : data);
    free(m);
    if (p) tensorflow__serving__predict_request__free_unpacked(p, NULL);
    Inference__ModelInferRequest *k = inference__model_infer_request__unpack(NULL, size, data);
    if (k) inference__model_infer_request__free_unpacked(k, NULL);
    return 0;
}
