/* dcmserve_bench.c - dcmserve-bench, a load generator on the gRPC core API.
 *
 * Client mode: sends TF Serving Predict or KServe v2 ModelInfer calls, built
 * and serialized once before the run (one request per input file, used in
 * turn), either
 *   - at a fixed concurrency (closed loop: each finished call starts the
 *     next), or
 *   - at a fixed rate (open loop: call i is due at t0 + i / rate; its latency
 *     is measured from that intended send time, so a slow server cannot hide
 *     its queueing by slowing the client down: no coordinated omission).
 * A warm-up period runs first and is not counted. It prints calls/s,
 * p50/p90/p99/p99.9/max latency and the errors by gRPC status, as text or
 * JSON (--json).
 *
 * Echo mode (--echo_port): a bare gRPC core server, one completion-queue
 * thread, that answers every method with the bytes it received (or, with
 * --echo_reply_bytes, with that many zero bytes: a model's small answer); the
 * baseline for bench/serve_overhead.sh and bench/bench_dicom_model.sh (what
 * gRPC itself costs on this machine). It sets glibc's heap thresholds as
 * `dcmserve serve` does (common/ms_malloc.c).
 *
 * Inputs: --npy FILE (one tensor, any dtype rt_npy reads), --dicom_dir DIR
 * (each regular file becomes a DT_STRING [1] / BYTES [1] request), or
 * --values a,b,c (a float32 vector; quick checks without files).
 *
 * --target is HOST:PORT (localhost:8500, 127.0.0.1:8500, [::1]:8500) or any
 * gRPC target with a scheme (dns:///..., unix:...); plaintext unless --tls or
 * --ca_file asks for TLS. A wall of failures (--max_consecutive_errors calls
 * in a row, none OK) stops the run instead of hammering a server that
 * refuses everything.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dcmserve_bench_rest.h"
#include "ms_abseil.h"
#include "ms_malloc.h"
#include "ms_sched.h"
#include "kserve.pb-c.h"
#include "rt_npy.h"
#include "tf_serving.pb-c.h"

#define BENCH_MAX_INFLIGHT 4096
#define BENCH_NSTATUS 17

typedef struct bench_opts {
    const char *target;
    const char *api; /* "predict" or "infer" */
    const char *model;
    const char *signature;
    const char *input;
    const char *npy;
    const char *dicom_dir;
    const char *values;
    const char *shape; /* --values only: "3,1"; default [n] */
    long version;
    int concurrency;
    double rate;
    double duration_s;
    double warmup_s;
    int deadline_ms;
    int json;
    int echo_port;
    const char *label;
    const char *rest_path; /* --api=rest */
    const char *body;      /* --api=rest */
    int abseil_debug;      /* --abseil_debug: keep Abseil's lock graph on */
    int slice_us;          /* --slice_us: short CPU slice for this process's threads */
    long echo_reply_bytes; /* echo mode: reply with this many zero bytes; < 0: the request */
    int tls;               /* --tls: TLS with the system's roots (or --ca_file) */
    const char *ca_file;   /* --ca_file=PEM: TLS, trusting these roots */
    long max_consecutive_errors; /* stop after this many failed calls in a row; 0 = never */
} bench_opts;

/* The gRPC target for --target: HOST:PORT with a dotted IPv4 host goes to
 * gRPC's ipv4: resolver (no DNS look-up per connection), a target that
 * names its scheme is kept, and anything else (localhost:8500,
 * [::1]:8500, a DNS name) goes to gRPC's default DNS resolver as written. */
static void bench_target(const char *t, char *out, size_t n) {
    unsigned a, b, c, d, port;
    char end;
    if (sscanf(t, "%u.%u.%u.%u:%u%c", &a, &b, &c, &d, &port, &end) == 5)
        snprintf(out, n, "ipv4:%s", t);
    else
        snprintf(out, n, "%s", t);
}

/* Plaintext unless asked: --ca_file trusts that PEM, --tls the system roots. */
static grpc_channel_credentials *bench_creds(const bench_opts *o) {
    if (o->ca_file == NULL && !o->tls) return grpc_insecure_credentials_create();
    char *pem = NULL;
    if (o->ca_file != NULL) {
        FILE *f = fopen(o->ca_file, "rb");
        if (f == NULL) {
            fprintf(stderr, "dcmserve-bench: --ca_file=%s: %s\n", o->ca_file, strerror(errno));
            return NULL;
        }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        pem = len >= 0 ? calloc(1, (size_t)len + 1) : NULL;
        if (pem == NULL || fread(pem, 1, (size_t)len, f) != (size_t)len) {
            fprintf(stderr, "dcmserve-bench: --ca_file=%s: cannot read it\n", o->ca_file);
            free(pem);
            fclose(f);
            return NULL;
        }
        fclose(f);
    }
    grpc_channel_credentials *c = grpc_ssl_credentials_create(pem, NULL, NULL, NULL);
    free(pem);
    return c;
}

typedef struct bench_req {
    uint8_t *bytes;
    size_t n;
} bench_req;

typedef struct bench_slot {
    grpc_call *call;
    grpc_byte_buffer *send;
    grpc_byte_buffer *recv;
    grpc_metadata_array md_init, md_trail;
    grpc_status_code status;
    grpc_slice details;
    int64_t intended_ns; /* the time this call was due (open loop) or sent */
    int busy;
} bench_slot;

static int64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static gpr_timespec bench_abs(int64_t mono_ns) {
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    int64_t d = mono_ns - bench_now_ns();
    if (d < 0) d = 0;
    return gpr_time_add(now, gpr_time_from_nanos(d, GPR_TIMESPAN));
}

/* ---- inputs -> serialized requests ------------------------------------- */

/* One input tensor in a form both APIs can serialize. */
typedef struct bench_tensor {
    rt_dtype dtype;
    int rank;
    int64_t dim[RT_MAX_RANK];
    const uint8_t *data; /* POD: element bytes; string: the one string */
    size_t n;
} bench_tensor;

static const char *bench_kserve_type(rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT: return "FP32";
    case RT_DT_DOUBLE: return "FP64";
    case RT_DT_INT32: return "INT32";
    case RT_DT_INT64: return "INT64";
    case RT_DT_UINT8: return "UINT8";
    case RT_DT_INT8: return "INT8";
    case RT_DT_INT16: return "INT16";
    case RT_DT_UINT16: return "UINT16";
    case RT_DT_BOOL: return "BOOL";
    case RT_DT_STRING: return "BYTES";
    default: return NULL;
    }
}

static int bench_pack_predict(const bench_opts *o, const bench_tensor *t, bench_req *out) {
    Tensorflow__TensorShapeProto__Dim dims[RT_MAX_RANK], *dimp[RT_MAX_RANK];
    for (int i = 0; i < t->rank; i++) {
        Tensorflow__TensorShapeProto__Dim d = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
        dims[i] = d;
        dims[i].size = t->dim[i];
        dimp[i] = &dims[i];
    }
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = (size_t)t->rank;
    shape.dim = dimp;
    Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
    tp.dtype = (Tensorflow__DataType)t->dtype;
    tp.tensor_shape = &shape;
    ProtobufCBinaryData sv = {t->n, (uint8_t *)t->data};
    if (t->dtype == RT_DT_STRING) {
        tp.n_string_val = 1;
        tp.string_val = &sv;
    } else {
        tp.tensor_content = sv;
    }
    Tensorflow__Serving__PredictRequest__InputsEntry e =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
    e.key = (char *)o->input;
    e.value = &tp;
    Tensorflow__Serving__PredictRequest__InputsEntry *ep = &e;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    spec.name = (char *)o->model;
    if (o->signature) spec.signature_name = (char *)o->signature;
    if (o->version > 0) {
        ver.value = o->version;
        spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
        spec.version = &ver;
    }
    Tensorflow__Serving__PredictRequest rq = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    rq.model_spec = &spec;
    rq.n_inputs = 1;
    rq.inputs = &ep;
    out->n = tensorflow__serving__predict_request__get_packed_size(&rq);
    out->bytes = malloc(out->n ? out->n : 1);
    if (!out->bytes) return -1;
    tensorflow__serving__predict_request__pack(&rq, out->bytes);
    return 0;
}

static int bench_pack_infer(const bench_opts *o, const bench_tensor *t, bench_req *out) {
    const char *ty = bench_kserve_type(t->dtype);
    if (!ty) {
        fprintf(stderr, "dcmserve-bench: %s has no KServe datatype\n", rt_dtype_name(t->dtype));
        return -1;
    }
    uint8_t *raw = NULL;
    ProtobufCBinaryData rc = {t->n, (uint8_t *)t->data};
    if (t->dtype == RT_DT_STRING) {
        /* BYTES in raw_input_contents: each element is a 4-byte little-endian
         * length, then its bytes. */
        raw = malloc(t->n + 4);
        if (!raw) return -1;
        uint32_t len = (uint32_t)t->n;
        for (int i = 0; i < 4; i++) raw[i] = (uint8_t)(len >> (8 * i));
        memcpy(raw + 4, t->data, t->n);
        rc.len = t->n + 4;
        rc.data = raw;
    }
    Inference__ModelInferRequest__InferInputTensor in =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in.name = (char *)o->input;
    in.datatype = (char *)ty;
    in.n_shape = (size_t)t->rank;
    in.shape = (int64_t *)t->dim;
    Inference__ModelInferRequest__InferInputTensor *inp = &in;
    char vbuf[32] = "";
    if (o->version > 0) snprintf(vbuf, sizeof(vbuf), "%ld", o->version);
    Inference__ModelInferRequest rq = INFERENCE__MODEL_INFER_REQUEST__INIT;
    rq.model_name = (char *)o->model;
    rq.model_version = vbuf;
    rq.n_inputs = 1;
    rq.inputs = &inp;
    rq.n_raw_input_contents = 1;
    rq.raw_input_contents = &rc;
    out->n = inference__model_infer_request__get_packed_size(&rq);
    out->bytes = malloc(out->n ? out->n : 1);
    if (!out->bytes) {
        free(raw);
        return -1;
    }
    inference__model_infer_request__pack(&rq, out->bytes);
    free(raw);
    return 0;
}

static int bench_pack(const bench_opts *o, const bench_tensor *t, bench_req *out) {
    return strcmp(o->api, "infer") == 0 ? bench_pack_infer(o, t, out)
                                        : bench_pack_predict(o, t, out);
}

static int bench_read_file(const char *path, uint8_t **data, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fclose(f);
        return -1;
    }
    *n = (size_t)st.st_size;
    *data = malloc(*n ? *n : 1);
    if (!*data || fread(*data, 1, *n, f) != *n) {
        free(*data);
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

static int bench_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Builds *reqs (malloc'ed, *nreq entries) from the options. */
static int bench_build_requests(const bench_opts *o, bench_req **reqs, size_t *nreq) {
    *reqs = NULL;
    *nreq = 0;
    if (o->dicom_dir) {
        DIR *d = opendir(o->dicom_dir);
        if (!d) {
            fprintf(stderr, "dcmserve-bench: cannot open %s: %s\n", o->dicom_dir, strerror(errno));
            return -1;
        }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            size_t len = strlen(o->dicom_dir) + strlen(de->d_name) + 2;
            char *p = malloc(len);
            char **nw = realloc(names, (nn + 1) * sizeof(*names));
            if (!p || !nw) {
                free(p);
                closedir(d);
                return -1;
            }
            names = nw;
            snprintf(p, len, "%s/%s", o->dicom_dir, de->d_name);
            struct stat st;
            if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
                free(p);
                continue;
            }
            names[nn++] = p;
        }
        closedir(d);
        if (nn > 1) qsort(names, nn, sizeof(*names), bench_cmp_str);
        *reqs = calloc(nn ? nn : 1, sizeof(**reqs));
        int rc = *reqs ? 0 : -1;
        for (size_t i = 0; i < nn; i++) {
            uint8_t *data = NULL;
            size_t n = 0;
            if (rc == 0 && bench_read_file(names[i], &data, &n) != 0) {
                fprintf(stderr, "dcmserve-bench: cannot read %s\n", names[i]);
                rc = -1;
            }
            if (rc == 0) {
                bench_tensor t = {.dtype = RT_DT_STRING, .rank = 1, .dim = {1}, .data = data, .n = n};
                rc = bench_pack(o, &t, &(*reqs)[*nreq]);
                if (rc == 0) (*nreq)++;
            }
            free(data);
            free(names[i]);
        }
        free(names);
        if (rc == 0 && *nreq == 0) {
            fprintf(stderr, "dcmserve-bench: %s holds no files\n", o->dicom_dir);
            rc = -1;
        }
        return rc;
    }
    *reqs = calloc(1, sizeof(**reqs));
    if (!*reqs) return -1;
    if (o->npy) {
        rt_tensor *t = NULL;
        if (rt_npy_read_file(o->npy, &t) != MS_OK) {
            fprintf(stderr, "dcmserve-bench: %s: %s\n", o->npy, ms_errmsg());
            return -1;
        }
        if (t->dtype == RT_DT_STRING) {
            fprintf(stderr, "dcmserve-bench: string .npy inputs are not supported; use --dicom_dir\n");
            rt_tensor_unref(t);
            return -1;
        }
        bench_tensor bt = {.dtype = t->dtype, .rank = t->shape.rank, .data = t->data,
                           .n = rt_tensor_nbytes(t)};
        memcpy(bt.dim, t->shape.dim, sizeof(bt.dim));
        int rc = bench_pack(o, &bt, &(*reqs)[0]);
        rt_tensor_unref(t);
        if (rc == 0) *nreq = 1;
        return rc;
    }
    const char *vals = o->values ? o->values : "1.0,2.0,5.0";
    size_t cap = 1;
    for (const char *p = vals; *p; p++) cap += *p == ',';
    float *f = malloc(cap * sizeof(float));
    if (!f) return -1;
    size_t k = 0;
    for (const char *p = vals; *p && k < cap;) {
        char *end;
        f[k++] = strtof(p, &end);
        if (end == p) {
            fprintf(stderr, "dcmserve-bench: --values expects numbers separated by commas, got '%s'\n", p);
            free(f);
            return -1;
        }
        p = *end == ',' ? end + 1 : end;
    }
    bench_tensor bt = {.dtype = RT_DT_FLOAT, .rank = 1, .dim = {(int64_t)k},
                       .data = (const uint8_t *)f, .n = k * sizeof(float)};
    if (o->shape) {
        int64_t prod = 1;
        bt.rank = 0;
        for (const char *p = o->shape; *p && bt.rank < RT_MAX_RANK;) {
            char *end;
            long long d = strtoll(p, &end, 10);
            if (end == p || d < 0) break;
            bt.dim[bt.rank++] = d;
            prod *= d;
            p = *end == ',' ? end + 1 : end;
        }
        if (prod != (int64_t)k) {
            fprintf(stderr, "dcmserve-bench: --shape %s holds %lld values, --values has %zu\n",
                    o->shape, (long long)prod, k);
            free(f);
            return -1;
        }
    }
    int rc = bench_pack(o, &bt, &(*reqs)[0]);
    free(f);
    if (rc == 0) *nreq = 1;
    return rc;
}

/* ---- echo server -------------------------------------------------------- */

typedef struct echo_call {
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv;
    grpc_byte_buffer *send;
    int cancelled;
    int state; /* 0 waiting for a call, 1 reading, 2 replying */
} echo_call;

static volatile sig_atomic_t bench_stop;

static void bench_on_signal(int sig) {
    (void)sig;
    bench_stop = 1;
}

static int echo_arm(grpc_server *srv, grpc_completion_queue *cq, echo_call *c) {
    memset(c, 0, sizeof(*c));
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    return grpc_server_request_call(srv, &c->call, &c->details, &c->md, cq, cq, c) == GRPC_CALL_OK
               ? 0
               : -1;
}

static int bench_echo_main(const bench_opts *o) {
    /* glibc's heap as in `dcmserve serve`: else every call's trim and
     * refault of the freed read slices, not gRPC, dominates this floor. */
    ms_malloc_keep_heap();
    grpc_init();
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                    .value.integer = -1};
    grpc_channel_args args = {1, &arg};
    grpc_server *srv = grpc_server_create(&args, NULL);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(srv, cq, NULL);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", o->echo_port);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(srv, addr, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        fprintf(stderr, "dcmserve-bench: cannot listen on %s\n", addr);
        return 1;
    }
    grpc_server_start(srv);
    /* The port line is what serve_overhead.sh waits for. */
    printf("echo listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    signal(SIGTERM, bench_on_signal);
    signal(SIGINT, bench_on_signal);
    enum { NCALLS = 64 };
    echo_call *calls = calloc(NCALLS, sizeof(*calls));
    if (!calls) return 1;
    for (int i = 0; i < NCALLS; i++) echo_arm(srv, cq, &calls[i]);
    while (!bench_stop) {
        grpc_event ev = grpc_completion_queue_next(
            cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)),
            NULL);
        if (ev.type != GRPC_OP_COMPLETE) continue;
        echo_call *c = ev.tag;
        grpc_op ops[4];
        memset(ops, 0, sizeof(ops));
        if (c->state == 0) {
            if (!ev.success) continue;
            c->state = 1;
            ops[0].op = GRPC_OP_RECV_MESSAGE;
            ops[0].data.recv_message.recv_message = &c->recv;
            grpc_call_start_batch(c->call, ops, 1, c, NULL);
        } else if (c->state == 1) {
            c->state = 2;
            grpc_slice empty = grpc_empty_slice();
            if (o->echo_reply_bytes >= 0) { /* a model's small answer: the transport floor */
                grpc_slice r = grpc_slice_malloc((size_t)o->echo_reply_bytes);
                memset(GRPC_SLICE_START_PTR(r), 0, (size_t)o->echo_reply_bytes);
                c->send = grpc_raw_byte_buffer_create(&r, 1);
                grpc_slice_unref(r);
            } else {
                c->send = c->recv ? grpc_byte_buffer_copy(c->recv) : grpc_raw_byte_buffer_create(&empty, 0);
            }
            ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
            ops[1].op = GRPC_OP_SEND_MESSAGE;
            ops[1].data.send_message.send_message = c->send;
            ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
            ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
            ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
            ops[3].data.recv_close_on_server.cancelled = &c->cancelled;
            grpc_call_start_batch(c->call, ops, 4, c, NULL);
        } else {
            if (c->recv) grpc_byte_buffer_destroy(c->recv);
            if (c->send) grpc_byte_buffer_destroy(c->send);
            grpc_call_details_destroy(&c->details);
            grpc_metadata_array_destroy(&c->md);
            grpc_call_unref(c->call);
            echo_arm(srv, cq, c);
        }
    }
    grpc_completion_queue *ctl = grpc_completion_queue_create_for_pluck(NULL);
    grpc_server_shutdown_and_notify(srv, ctl, ctl);
    grpc_server_cancel_all_calls(srv);
    grpc_completion_queue_pluck(ctl, ctl, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_completion_queue_shutdown(cq);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        echo_call *c = ev.tag;
        if (c->state > 0) {
            if (c->recv) grpc_byte_buffer_destroy(c->recv);
            if (c->send) grpc_byte_buffer_destroy(c->send);
            grpc_call_unref(c->call);
        }
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        c->state = 0;
    }
    grpc_server_destroy(srv);
    grpc_completion_queue_destroy(cq);
    grpc_completion_queue_destroy(ctl);
    free(calls);
    grpc_shutdown();
    return 0;
}

/* ---- client ------------------------------------------------------------- */

typedef struct bench_stats {
    uint32_t *lat_us; /* measured calls, microseconds */
    size_t n, cap;
    uint64_t by_status[BENCH_NSTATUS];
    uint64_t warm_calls;
} bench_stats;

static void bench_record(bench_stats *s, int64_t lat_ns, grpc_status_code st) {
    if (st >= 0 && st < BENCH_NSTATUS) s->by_status[st]++;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1 << 16;
        uint32_t *nl = realloc(s->lat_us, nc * sizeof(*nl));
        if (!nl) return;
        s->lat_us = nl;
        s->cap = nc;
    }
    int64_t us = lat_ns / 1000;
    s->lat_us[s->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int bench_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double bench_pct(const bench_stats *s, double p) {
    if (s->n == 0) return 0;
    size_t i = (size_t)(p / 100.0 * (double)(s->n - 1) + 0.5);
    if (i >= s->n) i = s->n - 1;
    return s->lat_us[i];
}

static void bench_slot_start(grpc_channel *ch, grpc_completion_queue *cq, grpc_slice method,
                             const bench_opts *o, const bench_req *rq, bench_slot *sl,
                             int64_t intended_ns) {
    grpc_slice s = grpc_slice_from_static_buffer(rq->bytes, rq->n);
    sl->send = grpc_raw_byte_buffer_create(&s, 1);
    sl->recv = NULL;
    grpc_metadata_array_init(&sl->md_init);
    grpc_metadata_array_init(&sl->md_trail);
    sl->details = grpc_empty_slice();
    sl->intended_ns = intended_ns;
    sl->busy = 1;
    gpr_timespec dl = o->deadline_ms > 0
                          ? bench_abs(bench_now_ns() + (int64_t)o->deadline_ms * 1000000)
                          : gpr_inf_future(GPR_CLOCK_MONOTONIC);
    sl->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, dl, NULL);
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = sl->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &sl->md_init;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &sl->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &sl->md_trail;
    ops[5].data.recv_status_on_client.status = &sl->status;
    ops[5].data.recv_status_on_client.status_details = &sl->details;
    if (grpc_call_start_batch(sl->call, ops, 6, sl, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "dcmserve-bench: grpc_call_start_batch failed\n");
        exit(1);
    }
}

static void bench_slot_finish(bench_slot *sl) {
    if (sl->recv) grpc_byte_buffer_destroy(sl->recv);
    grpc_byte_buffer_destroy(sl->send);
    grpc_metadata_array_destroy(&sl->md_init);
    grpc_metadata_array_destroy(&sl->md_trail);
    grpc_slice_unref(sl->details);
    grpc_call_unref(sl->call);
    sl->busy = 0;
}

static const char *const bench_status_names[BENCH_NSTATUS] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

static int bench_client_main(const bench_opts *o) {
    bench_req *reqs = NULL;
    size_t nreq = 0;
    if (bench_build_requests(o, &reqs, &nreq) != 0) {
        for (size_t i = 0; i < nreq; i++) free(reqs[i].bytes);
        free(reqs);
        return 2;
    }
    grpc_init();
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                    .value.integer = -1};
    grpc_channel_args cargs = {1, &arg};
    grpc_channel_credentials *creds = bench_creds(o);
    if (creds == NULL) {
        for (size_t i = 0; i < nreq; i++) free(reqs[i].bytes);
        free(reqs);
        grpc_shutdown();
        return 2;
    }
    char target[512];
    bench_target(o->target, target, sizeof target);
    grpc_channel *ch = grpc_channel_create(target, creds, &cargs);
    grpc_channel_credentials_release(creds);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    const char *mpath = strcmp(o->api, "infer") == 0 ? "/inference.GRPCInferenceService/ModelInfer"
                        : strcmp(o->api, "echo") == 0 ? "/bench.Echo/Echo"
                                                      : "/tensorflow.serving.PredictionService/Predict";
    grpc_slice method = grpc_slice_from_static_string(mpath);

    int nslots = o->concurrency;
    bench_slot *slots = calloc((size_t)nslots, sizeof(*slots));
    int *freelist = calloc((size_t)nslots, sizeof(int));
    if (!slots || !freelist) return 2;
    int nfree = nslots;
    for (int i = 0; i < nslots; i++) freelist[i] = nslots - 1 - i;

    bench_stats st = {0};
    const int64_t t0 = bench_now_ns();
    const int64_t t_measure = t0 + (int64_t)(o->warmup_s * 1e9);
    const int64_t t_end = t_measure + (int64_t)(o->duration_s * 1e9);
    const int open_loop = o->rate > 0;
    const double gap_ns = open_loop ? 1e9 / o->rate : 0;
    uint64_t next_i = 0; /* open loop: index of the next due call */
    uint64_t sent = 0, late = 0;
    int inflight = 0;
    char seen_err[BENCH_NSTATUS] = {0};
    long consecutive_errors = 0;
    int wall = 0; /* stopped on a wall of errors */

    for (;;) {
        int64_t now = bench_now_ns();
        int stopping = now >= t_end || wall;
        /* Start what is due. */
        while (!stopping && nfree > 0) {
            int64_t due;
            if (open_loop) {
                due = t0 + (int64_t)((double)next_i * gap_ns);
                if (due > now) break;
                if (due >= t_end) break;
                next_i++;
            } else {
                due = now;
            }
            int k = freelist[--nfree];
            bench_slot_start(ch, cq, method, o, &reqs[sent % nreq], &slots[k], due);
            sent++;
            inflight++;
        }
        if (open_loop && !stopping && nfree == 0) {
            /* Every slot is busy: the due calls wait, and their wait counts in
             * their latency (measured from the due time). */
            late++;
        }
        if (stopping && inflight == 0) break;
        int64_t wake = stopping ? now + 1000000000 : t_end;
        if (open_loop && !stopping) {
            int64_t due = t0 + (int64_t)((double)next_i * gap_ns);
            if (nfree > 0 && due < wake) wake = due;
        }
        /* The completion queue's timed wait oversleeps by up to about a
         * millisecond, which would count as server latency in open loop: the
         * last millisecond before a due send is polled instead. */
        gpr_timespec until = bench_abs(wake);
        if (open_loop && !stopping && wake - bench_now_ns() < 1000000)
            until = gpr_inf_past(GPR_CLOCK_MONOTONIC);
        else if (open_loop && !stopping)
            until = bench_abs(wake - 1000000);
        grpc_event ev = grpc_completion_queue_next(cq, until, NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            if (stopping && ev.type == GRPC_QUEUE_TIMEOUT && bench_now_ns() > t_end + 30000000000LL)
                break; /* a server that never answers: give up 30 s after the end */
            continue;
        }
        bench_slot *sl = ev.tag;
        int64_t done = bench_now_ns();
        grpc_status_code code = ev.success ? sl->status : GRPC_STATUS_UNKNOWN;
        if (code != GRPC_STATUS_OK && code < BENCH_NSTATUS && !seen_err[code]) {
            /* The first message of each error status, once (the server's
             * words, so a wrong input shape is visible at once). */
            seen_err[code] = 1;
            char *msg = grpc_slice_to_c_string(sl->details);
            fprintf(stderr, "dcmserve-bench: first %s: %s\n", bench_status_names[code], msg);
            gpr_free(msg);
        }
        consecutive_errors = code == GRPC_STATUS_OK ? 0 : consecutive_errors + 1;
        if (!wall && o->max_consecutive_errors > 0 &&
            consecutive_errors >= o->max_consecutive_errors) {
            wall = 1;
            fprintf(stderr, "dcmserve-bench: %ld calls in a row failed (last: %s); stopping "
                            "(--max_consecutive_errors=%ld)%s%s%s\n",
                    consecutive_errors, bench_status_names[code < BENCH_NSTATUS ? code : 2],
                    o->max_consecutive_errors,
                    code == GRPC_STATUS_UNAVAILABLE ? ". Is --target=" : "",
                    code == GRPC_STATUS_UNAVAILABLE ? o->target : "",
                    code == GRPC_STATUS_UNAVAILABLE
                        ? " right, and plaintext (the default) or TLS (--tls, --ca_file) what "
                          "the server speaks?"
                        : "");
        }
        if (sl->intended_ns >= t_measure && sl->intended_ns < t_end)
            bench_record(&st, done - sl->intended_ns, code);
        else
            st.warm_calls++;
        bench_slot_finish(sl);
        inflight--;
        freelist[nfree++] = (int)(sl - slots);
    }
    /* Open loop: calls that were due before the end but never started count
     * as not sent; report them rather than hide them. */
    uint64_t unsent = 0;
    if (open_loop) {
        uint64_t due_total = (uint64_t)((double)(t_end - t0) / gap_ns);
        unsent = due_total > next_i ? due_total - next_i : 0;
    }
    if (st.n > 0) qsort(st.lat_us, st.n, sizeof(*st.lat_us), bench_cmp_u32);
    double secs = o->duration_s;
    uint64_t ok = st.by_status[0];
    if (o->json) {
        printf("{\"label\": \"%s\", \"api\": \"%s\", \"model\": \"%s\", \"mode\": \"%s\", "
               "\"concurrency\": %d, \"rate\": %.1f, \"duration_s\": %.2f, \"request_bytes\": %zu, "
               "\"calls\": %zu, \"ok\": %" PRIu64 ", \"calls_per_s\": %.1f, "
               "\"p50_us\": %.0f, \"p90_us\": %.0f, \"p99_us\": %.0f, \"p999_us\": %.0f, "
               "\"max_us\": %.0f, \"unsent\": %" PRIu64 ", \"stopped_on_errors\": %s, \"errors\": {",
               o->label ? o->label : "", o->api, o->model, open_loop ? "rate" : "concurrency",
               o->concurrency, o->rate, secs, reqs[0].n, st.n, ok, (double)st.n / secs,
               bench_pct(&st, 50), bench_pct(&st, 90), bench_pct(&st, 99), bench_pct(&st, 99.9),
               st.n ? (double)st.lat_us[st.n - 1] : 0.0, unsent, wall ? "true" : "false");
        int first = 1;
        for (int i = 1; i < BENCH_NSTATUS; i++) {
            if (!st.by_status[i]) continue;
            printf("%s\"%s\": %" PRIu64, first ? "" : ", ", bench_status_names[i], st.by_status[i]);
            first = 0;
        }
        printf("}}\n");
    } else {
        printf("%s %s %s, %zu-byte requests: %zu calls in %.1f s = %.1f calls/s (%" PRIu64 " OK)\n",
               open_loop ? "rate" : "concurrency", o->api, o->model, reqs[0].n, st.n, secs,
               (double)st.n / secs, ok);
        printf("latency us: p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f\n", bench_pct(&st, 50),
               bench_pct(&st, 90), bench_pct(&st, 99), bench_pct(&st, 99.9),
               st.n ? (double)st.lat_us[st.n - 1] : 0.0);
        for (int i = 1; i < BENCH_NSTATUS; i++)
            if (st.by_status[i]) printf("errors %s: %" PRIu64 "\n", bench_status_names[i], st.by_status[i]);
        if (unsent) printf("not sent (client could not keep the rate): %" PRIu64 "\n", unsent);
        if (wall) printf("stopped early: %ld calls in a row failed\n", consecutive_errors);
    }
    (void)late;
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    for (size_t i = 0; i < nreq; i++) free(reqs[i].bytes);
    free(reqs);
    free(slots);
    free(freelist);
    free(st.lat_us);
    grpc_shutdown();
    return st.n > 0 && ok == st.n && !wall ? 0 : 1;
}

static void bench_usage(void) {
    fprintf(stderr,
            "usage: dcmserve-bench [--target=HOST:PORT] [--tls | --ca_file=PEM] [--api=predict|infer|echo]\n"
            "         [--model=NAME] [--max_consecutive_errors=N (default 1000; 0 = never stop)]\n"
            "         [--version=N] [--signature=S] [--input=KEY] (--npy=FILE | --dicom_dir=DIR |\n"
            "         --values=a,b,... [--shape=d0,d1,...]) [--concurrency=N | --rate=CALLS_PER_S [--concurrency=MAX]]\n"
            "         [--duration=S] [--warmup=S] [--deadline_ms=MS] [--json] [--label=TEXT]\n"
            "       dcmserve-bench --api=rest [--target=HOST:PORT] [--model=NAME] [--rest_path=/v1/...]\n"
            "         (--body=JSON_FILE | --values=a,b,...) [--concurrency=N] [--duration=S] [--warmup=S] [--json]\n"
            "       dcmserve-bench --echo_port=PORT [--echo_reply_bytes=N]   (bare gRPC echo server;\n"
            "         0 = any port; it answers the request's bytes, or N zero bytes)\n"
            "       --slice_us=N: ask the kernel for an N us CPU slice for this tool's threads\n"
            "         (Linux 6.12+: the client then preempts busy threads when a reply wakes it, as\n"
            "         if it had a core of its own; default: the kernel's slice)\n"
            "       --abseil_debug: keep Abseil's debug lock graph on (as Debian ships it; the\n"
            "         daemon and, by default, this tool turn it off)\n");
}

int main(int argc, char **argv) {
    bench_opts o = {.target = "127.0.0.1:8500", .api = "predict", .model = "default",
                    .input = "x", .concurrency = 1, .duration_s = 5, .warmup_s = 1,
                    .echo_port = -1, .echo_reply_bytes = -1, .max_consecutive_errors = 1000};
    static const struct option lo[] = {
        {"target", 1, 0, 't'},      {"api", 1, 0, 'a'},       {"model", 1, 0, 'm'},
        {"version", 1, 0, 'V'},     {"signature", 1, 0, 's'}, {"input", 1, 0, 'i'},
        {"npy", 1, 0, 'n'},         {"dicom_dir", 1, 0, 'D'}, {"values", 1, 0, 'v'},
        {"concurrency", 1, 0, 'c'}, {"rate", 1, 0, 'r'},      {"duration", 1, 0, 'd'},
        {"warmup", 1, 0, 'w'},      {"deadline_ms", 1, 0, 'T'}, {"json", 0, 0, 'j'},
        {"echo_port", 1, 0, 'E'},   {"label", 1, 0, 'L'},     {"shape", 1, 0, 'S'},     {"help", 0, 0, 'h'},
        {"rest_path", 1, 0, 'P'},   {"body", 1, 0, 'B'},     {"abseil_debug", 0, 0, 'A'},
        {"slice_us", 1, 0, 'U'},    {"echo_reply_bytes", 1, 0, 'R'}, {"tls", 0, 0, 'X'},
        {"ca_file", 1, 0, 'C'},     {"max_consecutive_errors", 1, 0, 'M'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 't': o.target = optarg; break;
        case 'a': o.api = optarg; break;
        case 'm': o.model = optarg; break;
        case 'V': o.version = atol(optarg); break;
        case 's': o.signature = optarg; break;
        case 'i': o.input = optarg; break;
        case 'n': o.npy = optarg; break;
        case 'D': o.dicom_dir = optarg; break;
        case 'v': o.values = optarg; break;
        case 'c': o.concurrency = atoi(optarg); break;
        case 'r': o.rate = atof(optarg); break;
        case 'd': o.duration_s = atof(optarg); break;
        case 'w': o.warmup_s = atof(optarg); break;
        case 'T': o.deadline_ms = atoi(optarg); break;
        case 'j': o.json = 1; break;
        case 'E': o.echo_port = atoi(optarg); break;
        case 'L': o.label = optarg; break;
        case 'S': o.shape = optarg; break;
        case 'P': o.rest_path = optarg; break;
        case 'B': o.body = optarg; break;
        case 'A': o.abseil_debug = 1; break;
        case 'U': o.slice_us = atoi(optarg); break;
        case 'R': o.echo_reply_bytes = atol(optarg); break;
        case 'X': o.tls = 1; break;
        case 'C': o.ca_file = optarg; break;
        case 'M': o.max_consecutive_errors = atol(optarg); break;
        default: bench_usage(); return c == 'h' ? 0 : 2;
        }
    }
    /* The same gRPC as the daemon's (server/transport/srv_grpc.c): Abseil's debug-build
     * lock graph off, unless --abseil_debug keeps it as Debian ships it. */
    if (!o.abseil_debug) ms_abseil_deadlock_detection_off();
    /* Before gRPC starts its threads: they inherit the slice. */
    if (o.slice_us > 0 && ms_sched_short_slice((unsigned)o.slice_us) != 0)
        fprintf(stderr, "dcmserve-bench: --slice_us=%d not taken: %s\n", o.slice_us, strerror(errno));
    if (o.echo_port >= 0) return bench_echo_main(&o);
    if (strcmp(o.api, "rest") == 0) {
        bench_rest_opts ro = {o.target, o.model, o.rest_path, o.body, o.values, o.label,
                              o.concurrency, o.duration_s, o.warmup_s, o.json};
        if (o.concurrency < 1 || o.concurrency > BENCH_MAX_INFLIGHT || o.duration_s <= 0) return 2;
        return bench_rest_main(&ro);
    }
    if (strcmp(o.api, "predict") && strcmp(o.api, "infer") && strcmp(o.api, "echo")) {
        fprintf(stderr, "dcmserve-bench: --api must be predict, infer, echo or rest, got '%s'\n", o.api);
        return 2;
    }
    if (o.rate > 0 && o.concurrency == 1) o.concurrency = 1024; /* open loop: the cap on in flight */
    if (o.concurrency < 1 || o.concurrency > BENCH_MAX_INFLIGHT) {
        fprintf(stderr, "dcmserve-bench: --concurrency must be 1..%d, got %d\n", BENCH_MAX_INFLIGHT,
                o.concurrency);
        return 2;
    }
    if (o.duration_s <= 0 || o.warmup_s < 0) {
        fprintf(stderr, "dcmserve-bench: --duration must be > 0 and --warmup >= 0\n");
        return 2;
    }
    return bench_client_main(&o);
}
