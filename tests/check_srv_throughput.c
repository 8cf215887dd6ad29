/* check_srv_throughput.c - the pieces of issue 13 that need no daemon: the
 * per-model queues (server/sched/srv_queue.c: bound, round-robin across models,
 * the per-model run cap, the key read from request bytes) and the
 * BatchingParameters text proto (server/sched/srv_batch.c). The daemon-level
 * behaviour is in it_serve_throughput.py. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "srv_batch.h"
#include "srv_queue.h"
#include "tf_serving.pb-c.h"
#include "util_node.h"

START_TEST(test_queue_bound) {
    srv_queue *q = srv_queue_new(3, 1);
    int items[8];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(srv_queue_push(q, "a\n", &items[i]), 0);
    ck_assert_int_eq(srv_queue_push(q, "a\n", &items[3]), -1); /* full */
    ck_assert_int_eq(srv_queue_push(q, "b\n", &items[4]), 0);  /* another model: its own bound */
    srv_qkey *t = NULL;
    ck_assert_ptr_eq(srv_queue_pop(q, &t), &items[0]);
    ck_assert_int_eq(srv_queue_push(q, "a\n", &items[5]), 0); /* room again */
    srv_queue_done(q, t);
    srv_queue_free(q);
}
END_TEST

/* A model with a deep queue and one with a single item: the light one is
 * served on the second pop, not after the heavy model's backlog. */
START_TEST(test_queue_round_robin) {
    srv_queue *q = srv_queue_new(64, 8);
    int heavy[20], light = 0;
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(srv_queue_push(q, "heavy\n", &heavy[i]), 0);
    ck_assert_int_eq(srv_queue_push(q, "light\n", &light), 0);
    srv_qkey *t1 = NULL, *t2 = NULL;
    void *a = srv_queue_pop(q, &t1), *b = srv_queue_pop(q, &t2);
    ck_assert_msg(a == &light || b == &light, "the light model waited behind the heavy one");
    /* Within one model: first in, first out. */
    ck_assert_ptr_eq(a == &light ? b : a, &heavy[0]);
    srv_queue_done(q, t1);
    srv_queue_done(q, t2);
    srv_queue_stop(q);
    int n = 0;
    srv_qkey *t = NULL;
    for (void *it; (it = srv_queue_pop(q, &t)) != NULL; n++)
        srv_queue_done(q, t);
    ck_assert_int_eq(n, 19); /* stop drains what is queued, then pops return NULL */
    srv_queue_free(q);
}
END_TEST

/* The run cap: a model at its cap is passed over for another model; when
 * nothing else waits, try_run refuses and pop would block. */
START_TEST(test_queue_run_cap) {
    srv_queue *q = srv_queue_new(8, 1);
    int h1, h2, l1;
    ck_assert_int_eq(srv_queue_push(q, "h\n", &h1), 0);
    ck_assert_int_eq(srv_queue_push(q, "h\n", &h2), 0);
    srv_qkey *th = NULL, *tl = NULL;
    ck_assert_ptr_eq(srv_queue_pop(q, &th), &h1);
    ck_assert_int_eq(srv_queue_push(q, "l\n", &l1), 0);
    ck_assert_ptr_eq(srv_queue_pop(q, &tl), &l1); /* h is at its cap of 1 */
    ck_assert_ptr_null(srv_queue_try_run(q, "h\n")); /* h has one waiting */
    srv_qkey *tn = srv_queue_try_run(q, "new\n");    /* nothing of "new" waits */
    ck_assert_ptr_nonnull(tn);
    ck_assert_ptr_null(srv_queue_try_run(q, "new\n")); /* at its cap */
    srv_queue_done(q, tn);
    srv_queue_done(q, tl);
    srv_queue_done(q, th);
    ck_assert_ptr_eq(srv_queue_pop(q, &th), &h2);
    srv_queue_done(q, th);
    srv_queue_free(q);
}
END_TEST

/* Inline runs (srv_queue_try_run_cheap): only for a key already timed whose
 * moving average is within the limit, with nothing of it waiting. */
START_TEST(test_queue_try_run_cheap) {
    srv_queue *q = srv_queue_new(8, 2);
    int item = 0;
    ck_assert_ptr_null(srv_queue_try_run_cheap(q, "m\n", 0.001)); /* never seen */
    ck_assert_int_eq(srv_queue_push(q, "m\n", &item), 0);
    srv_qkey *t = NULL;
    ck_assert_ptr_eq(srv_queue_pop(q, &t), &item);
    ck_assert_ptr_null(srv_queue_try_run_cheap(q, "m\n", 0.001)); /* running, never timed */
    srv_queue_done_timed(q, t, 0.0001);                             /* first run: 100 us */
    srv_qkey *c = srv_queue_try_run_cheap(q, "m\n", 0.001);        /* idle key kept, cheap */
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_null(srv_queue_try_run_cheap(q, "m\n", 0.00005)); /* over a lower limit */
    /* One 8.1 ms run: the average becomes 100 us + (8.1 ms - 100 us) / 8 = 1.1 ms. */
    srv_queue_done_timed(q, c, 0.0081);
    ck_assert_ptr_null(srv_queue_try_run_cheap(q, "m\n", 0.001));
    srv_qkey *c2 = srv_queue_try_run_cheap(q, "m\n", 0.0012);
    ck_assert_ptr_nonnull(c2);
    srv_queue_done(q, c2); /* untimed: the average stays */
    ck_assert_int_eq(srv_queue_push(q, "m\n", &item), 0);
    ck_assert_ptr_null(srv_queue_try_run_cheap(q, "m\n", 1.0)); /* one waiting: no overtaking */
    ck_assert_ptr_eq(srv_queue_pop(q, &t), &item);
    srv_queue_done(q, t);
    srv_queue_free(q);
}
END_TEST

START_TEST(test_queue_key) {
    Tensorflow__Serving__PredictRequest rq = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    ver.value = 7;
    spec.name = "ct";
    spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    spec.version = &ver;
    spec.signature_name = "seg";
    rq.model_spec = &spec;
    uint8_t buf[256];
    size_t n = protobuf_c_message_pack(&rq.base, buf);
    char key[SRV_QUEUE_KEY_MAX];
    srv_queue_key(buf, n, 1, 1, 3, key, sizeof key);
    ck_assert_str_eq(key, "ct\nseg");
    spec.signature_name = "";
    n = protobuf_c_message_pack(&rq.base, buf);
    srv_queue_key(buf, n, 1, 1, 3, key, sizeof key);
    ck_assert_str_eq(key, "ct\n");
    srv_queue_key(buf, 3, 1, 1, 3, key, sizeof key); /* cut inside the spec */
    ck_assert_str_eq(key, "");
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    srv_queue_key(junk, sizeof junk, 1, 1, 3, key, sizeof key);
    ck_assert_str_eq(key, "");
}
END_TEST

static ms_status params_from(const char *text, srv_batch_params *p) {
    char path[] = "/tmp/check_batch_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    srv_batch_params_defaults(p);
    ms_status st = srv_batch_params_read(path, p);
    unlink(path);
    return st;
}

START_TEST(test_batching_params) {
    srv_batch_params p;
    ck_assert_int_eq(params_from("max_batch_size { value: 16 }\n"
                                 "batch_timeout_micros { value: 1000 } # a comment\n"
                                 "max_enqueued_batches: 3 num_batch_threads { value: 2 }\n"
                                 "thread_pool_name: \"x\"\nallowed_batch_sizes: 4\n"
                                 "allowed_batch_sizes: 16\npad_variable_length_inputs: true\n",
                                 &p),
                     MS_OK);
    ck_assert_int_eq(p.max_batch_size, 16);
    ck_assert_int_eq(p.batch_timeout_micros, 1000);
    ck_assert_int_eq(p.max_enqueued_batches, 3);
    ck_assert_int_eq(p.num_batch_threads, 2);
    ck_assert_int_eq(p.n_allowed, 2);
    ck_assert_int_eq(p.allowed_batch_sizes[1], 16);
    ck_assert_int_eq(p.pad_variable_length_inputs, 1);
    /* TF Serving's defaults where the file is silent. */
    ck_assert_int_eq(params_from("\n", &p), MS_OK);
    ck_assert_int_eq(p.max_batch_size, 1000);
    ck_assert_int_eq(p.max_enqueued_batches, 10);
    ck_assert_int_eq(params_from("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n", &p),
                     MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "must equal max_batch_size"));
    ck_assert_int_eq(params_from("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\n"
                                 "allowed_batch_sizes: 2\nallowed_batch_sizes: 8\n",
                                 &p),
                     MS_EINVAL);
    ck_assert_int_eq(params_from("max_batch_sise: 8\n", &p), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "max_batch_sise"));
    ck_assert_int_eq(params_from("max_batch_size { value: -1 }\n", &p), MS_EINVAL);
    ck_assert_int_eq(params_from("max_batch_size { value: 8 \n", &p), MS_EINVAL);
    srv_batch_params_defaults(&p);
    ck_assert_int_eq(srv_batch_params_read("/nonexistent/batching.pbtxt", &p), MS_ENOTFOUND);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"queue_bound", test_queue_bound},         {"queue_round_robin", test_queue_round_robin},
        {"queue_run_cap", test_queue_run_cap},     {"queue_key", test_queue_key},
        {"queue_try_run_cheap", test_queue_try_run_cheap},
        {"batching_params", test_batching_params},
    };
    return tu_suite_main("srv_throughput", cases, sizeof(cases) / sizeof(cases[0]));
}
