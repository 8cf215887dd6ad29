/* fuzz_onnx.c - libFuzzer target: the ONNX -> SavedModel converter
 * (runtime/onnx/rt_onnx.h) on arbitrary bytes as a ModelProto. External data is
 * refused (no model folder). Build: CC=clang cmake -S . -B build-fuzz
 * -DMS_FUZZ=ON -DMS_SANITIZE=ON; run: build-fuzz/fuzz_onnx -max_total_time=600
 * CORPUS_DIR tests/data/onnx (the test models make a good seed corpus). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *pb = NULL;
    size_t n = 0;
    if (rt_onnx_convert_mem(data, size, NULL, "fuzz", NULL, &pb, &n) == MS_OK) free(pb);
    return 0;
}
