/* check_serve_grpc.c - a C client on the gRPC core API against the real
 * daemon ($DCM_BIN/dcmserve on a free 127.0.0.1 port): Predict, KServe
 * ModelInfer, GetModelMetadata, health, unknown method, deadlines, and a
 * 1,000-request run across 3 hot reloads that must end with exit code 0 (under
 * the ASan build a leak makes the daemon exit non-zero).
 *
 * Expected outputs follow from half_plus_two's definition y = 0.5 * x + 2. */
#include <check.h>
#include <errno.h>
#include <grpc/grpc.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "health.pb-c.h"
#include "kserve.pb-c.h"
#include "tf_serving.pb-c.h"
#include "util_serve.h"

#define PREDICT  "/tensorflow.serving.PredictionService/Predict"
#define METADATA "/tensorflow.serving.PredictionService/GetModelMetadata"
#define INFER    "/inference.GRPCInferenceService/ModelInfer"
#define CHECK    "/grpc.health.v1.Health/Check"

static ut_daemon g_d;
static grpc_channel *g_ch;

static void start(const char *base, const char *poll) {
    char a1[1200], a2[64];
    snprintf(a1, sizeof(a1), "--model_base_path=%s", base);
    snprintf(a2, sizeof(a2), "--file_system_poll_wait_seconds=%s", poll);
    const char *args[] = {"--model_name=hpt", a1, a2, NULL};
    grpc_init();
    ck_assert_int_eq(ut_daemon_start(&g_d, args), 0);
    g_ch = ut_channel(g_d.target);
}

static int stop(void) {
    grpc_channel_destroy(g_ch);
    int rc = ut_daemon_stop(&g_d, SIGTERM, 30);
    grpc_shutdown();
    if (rc != 0) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "tail -30 %s >&2", g_d.log);
        (void)system(cmd);
    }
    unlink(g_d.log);
    return rc;
}

static int health(int deadline_ms) {
    Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    uint8_t buf[64];
    size_t n = grpc__health__v1__health_check_request__pack(&rq, buf);
    ut_reply r;
    int st = -1;
    if (ut_call(g_ch, CHECK, buf, n, deadline_ms, &r) == 0 && r.status == GRPC_STATUS_OK) {
        Grpc__Health__V1__HealthCheckResponse *h =
            grpc__health__v1__health_check_response__unpack(NULL, r.len, r.data);
        if (h) st = h->status;
        grpc__health__v1__health_check_response__free_unpacked(h, NULL);
    }
    ut_reply_free(&r);
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Polls health until SERVING for at most timeout_s in all: 1 when SERVING, 0
 * when the time ran out (*st: the last health status, -1 for no answer), -1
 * when the daemon exited (*rc: its status). */
static int serving_within(double timeout_s, int *st, int *rc) {
    double end = now_s() + timeout_s;
    *st = -1;
    for (;;) {
        if (ut_daemon_exited(&g_d, rc)) return -1;
        double left = end - now_s();
        if (left <= 0) return 0;
        *st = health(left < 2.0 ? (int)(left * 1000) + 1 : 2000);
        if (*st == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING) return 1;
        usleep(20000);
    }
}

/* A daemon that exits or is not SERVING within UT_START_TIMEOUT_S fails the
 * test with the tail of its log (it is killed first, so none outlives the
 * test). */
static void wait_serving(void) {
    int st, rc = 0;
    int r = serving_within(UT_START_TIMEOUT_S, &st, &rc);
    if (r == 1) return;
    if (r == 0) ut_daemon_stop(&g_d, SIGKILL, 5);
    ut_daemon_log_tail(&g_d, UT_LOG_TAIL_LINES);
    unlink(g_d.log);
    if (r < 0) ck_abort_msg("daemon exited with status %d before it became SERVING", rc);
    ck_abort_msg("daemon never became SERVING within %d s (last health status %d)",
                 UT_START_TIMEOUT_S, st);
}

/* Predict x (n values, shape [n,1]); checks y = 0.5x + 2; returns the
 * version that answered, or -status on a gRPC error. */
static int64_t predict(const float *x, int n, int deadline_ms) {
    Tensorflow__TensorShapeProto__Dim d0 = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT,
                                      d1 = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    d0.size = n;
    d1.size = 1;
    Tensorflow__TensorShapeProto__Dim *dims[] = {&d0, &d1};
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 2;
    shape.dim = dims;
    Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
    tp.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tp.tensor_shape = &shape;
    tp.n_float_val = (size_t)n;
    tp.float_val = (float *)x;
    Tensorflow__Serving__PredictRequest__InputsEntry e =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
    e.key = "x";
    e.value = &tp;
    Tensorflow__Serving__PredictRequest__InputsEntry *ep = &e;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    spec.name = "hpt";
    Tensorflow__Serving__PredictRequest rq = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    rq.model_spec = &spec;
    rq.n_inputs = 1;
    rq.inputs = &ep;
    size_t len = tensorflow__serving__predict_request__get_packed_size(&rq);
    uint8_t *buf = malloc(len);
    tensorflow__serving__predict_request__pack(&rq, buf);
    ut_reply r;
    ck_assert_int_eq(ut_call(g_ch, PREDICT, buf, len, deadline_ms, &r), 0);
    free(buf);
    if (r.status != GRPC_STATUS_OK) {
        int64_t st = -(int64_t)r.status;
        ut_reply_free(&r);
        return st;
    }
    Tensorflow__Serving__PredictResponse *resp =
        tensorflow__serving__predict_response__unpack(NULL, r.len, r.data);
    ck_assert_ptr_nonnull(resp);
    ck_assert_uint_eq(resp->n_outputs, 1);
    ck_assert_str_eq(resp->outputs[0]->key, "y");
    const Tensorflow__TensorProto *y = resp->outputs[0]->value;
    ck_assert_int_eq(y->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
    ck_assert_uint_eq(y->n_float_val, (size_t)n);
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (fabsf(y->float_val[i] - (0.5f * x[i] + 2.0f)) > 1e-6f) bad = i;
    ck_assert_msg(bad < 0, "y[%d] = %g, want %g", bad, bad < 0 ? 0.0 : (double)y->float_val[bad],
                  bad < 0 ? 0.0 : 0.5 * x[bad] + 2.0);
    int64_t v = resp->model_spec->version->value;
    tensorflow__serving__predict_response__free_unpacked(resp, NULL);
    ut_reply_free(&r);
    return v;
}

static const char *hpt_base(char *buf, size_t cap) {
    return ut_savedmodel_path(buf, cap, "saved_model_half_plus_two_cpu");
}

START_TEST(test_predict_c_client) {
    char base[1024];
    start(hpt_base(base, sizeof(base)), "1");
    wait_serving();
    const float x[] = {1.0f, 2.0f, 5.0f}; /* y = 2.5, 3.0, 4.5 */
    ck_assert_int_eq(predict(x, 3, 10000), 123);
    ck_assert_int_eq(stop(), 0);
}
END_TEST

START_TEST(test_model_infer_raw_c_client) {
    char base[1024];
    start(hpt_base(base, sizeof(base)), "1");
    wait_serving();
    const float x[] = {1.0f, 2.0f, 5.0f};
    int64_t shape[] = {3, 1};
    Inference__ModelInferRequest__InferInputTensor in =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in.name = "x";
    in.datatype = "FP32";
    in.n_shape = 2;
    in.shape = shape;
    Inference__ModelInferRequest__InferInputTensor *inp = &in;
    ProtobufCBinaryData raw = {sizeof(x), (uint8_t *)x};
    Inference__ModelInferRequest rq = INFERENCE__MODEL_INFER_REQUEST__INIT;
    rq.model_name = "hpt";
    rq.id = "c-1";
    rq.n_inputs = 1;
    rq.inputs = &inp;
    rq.n_raw_input_contents = 1;
    rq.raw_input_contents = &raw;
    uint8_t buf[256];
    size_t n = inference__model_infer_request__pack(&rq, buf);
    ut_reply r;
    ck_assert_int_eq(ut_call(g_ch, INFER, buf, n, 10000, &r), 0);
    ck_assert_msg(r.status == GRPC_STATUS_OK, "ModelInfer: %d %s", r.status, r.details);
    Inference__ModelInferResponse *resp =
        inference__model_infer_response__unpack(NULL, r.len, r.data);
    ck_assert_ptr_nonnull(resp);
    ck_assert_str_eq(resp->id, "c-1");
    ck_assert_str_eq(resp->model_version, "123");
    ck_assert_uint_eq(resp->n_outputs, 1);
    ck_assert_str_eq(resp->outputs[0]->datatype, "FP32");
    ck_assert_uint_eq(resp->n_raw_output_contents, 1);
    ck_assert_uint_eq(resp->raw_output_contents[0].len, 12);
    float y[3];
    memcpy(y, resp->raw_output_contents[0].data, 12);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq_tol(y[i], 0.5f * x[i] + 2.0f, 1e-6f);
    inference__model_infer_response__free_unpacked(resp, NULL);
    ut_reply_free(&r);
    ck_assert_int_eq(stop(), 0);
}
END_TEST

START_TEST(test_metadata_c_client) {
    char base[1024];
    start(hpt_base(base, sizeof(base)), "1");
    wait_serving();
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    spec.name = "hpt";
    char *field = "signature_def";
    Tensorflow__Serving__GetModelMetadataRequest rq =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_REQUEST__INIT;
    rq.model_spec = &spec;
    rq.n_metadata_field = 1;
    rq.metadata_field = &field;
    uint8_t buf[128];
    size_t n = tensorflow__serving__get_model_metadata_request__pack(&rq, buf);
    ut_reply r;
    ck_assert_int_eq(ut_call(g_ch, METADATA, buf, n, 10000, &r), 0);
    ck_assert_msg(r.status == GRPC_STATUS_OK, "GetModelMetadata: %d %s", r.status, r.details);
    Tensorflow__Serving__GetModelMetadataResponse *resp =
        tensorflow__serving__get_model_metadata_response__unpack(NULL, r.len, r.data);
    ck_assert_ptr_nonnull(resp);
    ck_assert_uint_eq(resp->n_metadata, 1);
    ck_assert_str_eq(resp->metadata[0]->key, "signature_def");
    const Tensorflow__Any *any = resp->metadata[0]->value;
    ck_assert_str_eq(any->type_url, "type.googleapis.com/tensorflow.serving.SignatureDefMap");
    Tensorflow__Serving__SignatureDefMap *map =
        tensorflow__serving__signature_def_map__unpack(NULL, any->value.len, any->value.data);
    ck_assert_ptr_nonnull(map);
    int found = 0;
    for (size_t i = 0; i < map->n_signature_def; i++) {
        if (strcmp(map->signature_def[i]->key, "serving_default") != 0) continue;
        const Tensorflow__SignatureDef *sd = map->signature_def[i]->value;
        ck_assert_uint_eq(sd->n_inputs, 1);
        ck_assert_str_eq(sd->inputs[0]->key, "x");
        ck_assert_str_eq(sd->inputs[0]->value->name, "x:0");
        ck_assert_str_eq(sd->outputs[0]->value->name, "y:0");
        found = 1;
    }
    ck_assert_msg(found, "serving_default missing");
    ck_assert_uint_ge(map->n_signature_def, 5);
    tensorflow__serving__signature_def_map__free_unpacked(map, NULL);
    tensorflow__serving__get_model_metadata_response__free_unpacked(resp, NULL);
    ut_reply_free(&r);
    ck_assert_int_eq(stop(), 0);
}
END_TEST

START_TEST(test_unknown_method_and_bad_bytes) {
    char base[1024];
    start(hpt_base(base, sizeof(base)), "1");
    wait_serving();
    ut_reply r;
    /* UNIMPLEMENTED, not left to the deadline (that would be
     * DEADLINE_EXCEEDED): the status tells the two apart, with no bound on
     * the time that a loaded machine could exceed. */
    ck_assert_int_eq(ut_call(g_ch, "/tensorflow.serving.PredictionService/Nope",
                             (const uint8_t *)"", 0, 60000, &r),
                     0);
    ck_assert_int_eq(r.status, GRPC_STATUS_UNIMPLEMENTED);
    ck_assert_ptr_nonnull(strstr(r.details, "Nope"));
    ut_reply_free(&r);
    /* Bytes that are not a PredictRequest. */
    const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    ck_assert_int_eq(ut_call(g_ch, PREDICT, junk, sizeof(junk), 5000, &r), 0);
    ck_assert_int_eq(r.status, GRPC_STATUS_INVALID_ARGUMENT);
    ut_reply_free(&r);
    /* An expired deadline: DEADLINE_EXCEEDED, and the daemon carries on. */
    float *big = calloc(2000000, sizeof(float));
    int64_t v = predict(big, 2000000, 1);
    free(big);
    ck_assert_int_eq(v, -(int64_t)GRPC_STATUS_DEADLINE_EXCEEDED);
    const float x[] = {4.0f};
    ck_assert_int_eq(predict(x, 1, 10000), 123);
    ck_assert_int_eq(stop(), 0);
}
END_TEST

static void *big_call(void *arg) {
    int n = *(int *)arg;
    float *x = calloc((size_t)n, sizeof(float));
    int64_t v = predict(x, n, 60000);
    free(x);
    return (void *)(intptr_t)(v > 0);
}

/* With one worker busy on a large call, small calls whose 20 ms deadline
 * passes while they wait are skipped (never run), and the daemon says so. */
START_TEST(test_expired_calls_are_skipped) {
    char base[1024], a1[1200];
    hpt_base(base, sizeof(base));
    snprintf(a1, sizeof(a1), "--model_base_path=%s", base);
    const char *args[] = {"--model_name=hpt", a1, "--grpc_max_threads=1", "--log_level=debug", NULL};
    grpc_init();
    ck_assert_int_eq(ut_daemon_start(&g_d, args), 0);
    g_ch = ut_channel(g_d.target);
    wait_serving();
    int n = 1000000, skipped = 0;
    for (int round = 0; round < 8 && !skipped; round++) {
        pthread_t t;
        void *ok = NULL;
        pthread_create(&t, NULL, big_call, &n);
        const float x[] = {1.0f};
        for (int k = 0; k < 40; k++) {
            int64_t v = predict(x, 1, 20);
            ck_assert_msg(v > 0 || v == -(int64_t)GRPC_STATUS_DEADLINE_EXCEEDED,
                          "small call: %lld", (long long)v);
            usleep(5000);
        }
        pthread_join(t, &ok);
        ck_assert_msg(ok != NULL, "the large call failed");
        usleep(100000);
        skipped = ut_daemon_log_has(&g_d, "before it ran; skipped") ||
                  ut_daemon_log_has(&g_d, "stopped, the call was cancelled");
    }
    ck_assert_msg(skipped, "no expired call was skipped");
    const float x[] = {3.0f};
    ck_assert_int_eq(predict(x, 1, 10000), 123);
    ck_assert_int_eq(stop(), 0);
}
END_TEST

/* 1,000 requests while 3 new versions are copied in; every request answers,
 * each new version takes over, and the daemon exits 0 (leak-free under ASan). */
START_TEST(test_thousand_requests_three_reloads) {
    char src[1024], dir[512], cmd[3000];
    ut_savedmodel_path(src, sizeof(src), "saved_model_half_plus_two_cpu/00000123");
    ck_assert_ptr_nonnull(ut_tmpdir(dir, sizeof(dir)));
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s/1'", src, dir);
    ck_assert_int_eq(system(cmd), 0);
    start(dir, "0.2");
    wait_serving();
    const float x[] = {1.0f, 2.0f, 5.0f};
    int64_t want = 1;
    for (int i = 0; i < 1000; i++) {
        if (i > 0 && i % 250 == 0) {
            want++;
            snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s/%lld'", src, dir, (long long)want);
            ck_assert_int_eq(system(cmd), 0);
        }
        int64_t v = predict(x, 3, 10000);
        ck_assert_msg(v > 0, "request %d failed with status %lld", i, (long long)-v);
        ck_assert_int_le(v, want);
        if (i % 250 == 249 && want > 1) {
            /* Before the next copy, the current one must have taken over
             * (waited for up to UT_START_TIMEOUT_S: a load on a loaded
             * machine can take seconds). */
            double end = now_s() + UT_START_TIMEOUT_S;
            while (predict(x, 3, 10000) != want && now_s() < end)
                usleep(20000);
            ck_assert_int_eq(predict(x, 3, 10000), want);
        }
    }
    ck_assert_int_eq(predict(x, 3, 10000), 4);
    ck_assert_int_eq(stop(), 0);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *serve_grpc_suite(void) {
    Suite *s = suite_create("serve_grpc");
    TCase *tc = tcase_create("tf_serving");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_predict_c_client);
    tcase_add_test(tc, test_metadata_c_client);
    suite_add_tcase(s, tc);
    tc = tcase_create("kserve");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_infer_raw_c_client);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unknown_method_and_bad_bytes);
    tcase_add_test(tc, test_expired_calls_are_skipped);
    suite_add_tcase(s, tc);
    tc = tcase_create("reload");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_thousand_requests_three_reloads);
    suite_add_tcase(s, tc);
    return s;
}

/* Before the suite: a daemon on the test model must become SERVING within
 * UT_START_TIMEOUT_S, else each test case would wait that long in turn. It
 * runs in a child process, so that the runner itself never initialises gRPC
 * before Check forks the test cases. Returns 0 when it served. */
static int preflight(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0; /* cannot tell; the test cases will */
    if (pid == 0) {
        char base[1024], a1[1200];
        snprintf(a1, sizeof(a1), "--model_base_path=%s", hpt_base(base, sizeof(base)));
        const char *args[] = {"--model_name=hpt", a1, NULL};
        int st, rc = 0, r;
        grpc_init();
        if (ut_daemon_start(&g_d, args) != 0) {
            fprintf(stderr, "serve_grpc: dcmserve did not start\n");
            _exit(1);
        }
        g_ch = ut_channel(g_d.target);
        r = serving_within(UT_START_TIMEOUT_S, &st, &rc);
        if (r == 1) _exit(stop() == 0 ? 0 : 1);
        if (r == 0) ut_daemon_stop(&g_d, SIGKILL, 5);
        ut_daemon_log_tail(&g_d, UT_LOG_TAIL_LINES);
        unlink(g_d.log);
        if (r < 0)
            fprintf(stderr, "serve_grpc: dcmserve exited with status %d before it became SERVING\n",
                    rc);
        else
            fprintf(stderr, "serve_grpc: dcmserve never became SERVING within %d s "
                    "(last health status %d)\n", UT_START_TIMEOUT_S, st);
        _exit(1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(void) {
    if (preflight() != 0) return EXIT_FAILURE;
    SRunner *sr = srunner_create(serve_grpc_suite());
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
