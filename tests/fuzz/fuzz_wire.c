/* fuzz_wire.c - libFuzzer target: the request pre-scan (common/ms_wire.c) on
 * raw bytes, then, for what it accepts, protobuf-c's unpack of the two largest
 * request messages (TF Serving PredictRequest, KServe ModelInferRequest), as
 * the gRPC server does. A crash or a stack overflow in the unpack of something
 * the pre-scan let through is a finding. Build: CC=clang cmake -S . -B
 * build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON; run: build-fuzz/fuzz_wire CORPUS. */
#include <stddef.h>
#include <stdint.h>

#include "kserve.pb-c.h"
#include "ms_wire.h"
#include "tf_serving.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ms_wire_check(data, size, MS_WIRE_MAX_DEPTH) != MS_OK) return 0;
    Tensorflow__Serving__PredictRequest *p =
        tensorflow__serving__predict_request__unpack(NULL, size, data);
    if (p) tensorflow__serving__predict_request__free_unpacked(p, NULL);
    Inference__ModelInferRequest *k = inference__model_infer_request__unpack(NULL, size, data);
    if (k) inference__model_infer_request__free_unpacked(k, NULL);
    return 0;
}
