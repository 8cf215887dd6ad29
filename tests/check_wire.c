/* check_wire.c - the protobuf wire pre-scan against nesting bombs, truncation
 * and real messages packed by protobuf-c. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ms_wire.h"
#include "tf_serving.pb-c.h"
#include "util_node.h"

/* Builds `depth` nested field-1 length-delimited wrappers around nothing. */
static uint8_t *nest(int depth, size_t *n) {
    size_t cap = (size_t)depth * 12 + 16, len = 0;
    uint8_t *b = calloc(1, cap), *t = calloc(1, cap);
    for (int d = 0; d < depth; d++) {
        size_t k = 0;
        t[k++] = 0x0a; /* field 1, wire type 2 */
        size_t v = len;
        do { t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
        memcpy(t + k, b, len);
        len += k;
        memcpy(b, t, len);
    }
    free(t);
    *n = len;
    return b;
}

START_TEST(deep_refused_shallow_ok) {
    size_t n;
    uint8_t *b = nest(50, &n);
    ck_assert_int_eq(ms_wire_check(b, n, 100), MS_OK);
    free(b);
    b = nest(5000, &n);
    ck_assert_int_eq(ms_wire_check(b, n, 100), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "nesting deeper than 100"));
    free(b);
}
END_TEST

START_TEST(truncated_refused) {
    const uint8_t b[] = {0x0a, 0x05, 0x01};
    ck_assert_int_eq(ms_wire_check(b, sizeof(b), 100), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "byte 0 of 3"));
}
END_TEST

START_TEST(real_request_ok) {
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    spec.name = "demo";
    spec.signature_name = "serving_default";
    Tensorflow__Serving__PredictRequest rq = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    rq.model_spec = &spec;
    size_t n = tensorflow__serving__predict_request__get_packed_size(&rq);
    uint8_t *b = malloc(n);
    tensorflow__serving__predict_request__pack(&rq, b);
    ck_assert_int_eq(ms_wire_check(b, n, 100), MS_OK);
    free(b);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"deep_refused_shallow_ok", deep_refused_shallow_ok},
        {"truncated_refused", truncated_refused},
        {"real_request_ok", real_request_ok},
    };
    return tu_suite_main("wire", cases, sizeof(cases) / sizeof(cases[0]));
}
