/* srv_grpc.c - gRPC core server: CQ threads, registered methods, generic
 * UNIMPLEMENTED fallback, worker pool, cancellation, streams, drain.
 *
 * Every call is a srv_call with a reference count: one for whoever owns it
 * (the dispatcher, then the unary reply batch or the stream owner), one for
 * the RECV_CLOSE_ON_SERVER batch posted at accept time (it reports
 * cancellation), one for each send batch in progress. The tags handed to the
 * core point at small structs inside the call that say which batch ended. */
#include "srv_grpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ms_abseil.h"
#include "ms_log.h"
#include "ms_sched.h"
#include "ms_watch.h"
#include "ms_wire.h"
#include "srv_metrics.h"
#include "srv_queue.h"
#include "srv_listen.h"
#include "srv_inflate.h"
#include "srv_status.h"

#define SLOTS_WORKER  8 /* outstanding request_call per CQ for inference methods */
#define SLOTS_INLINE  2 /* ... for the others */
#define SLOTS_GENERIC 4 /* ... for unknown methods */
#define MAX_CQ        64
#define MAX_STANDBY   8 /* standby pollers per CQ (srv_server_opts.standby_threads) */

typedef enum { TAG_ACCEPT, TAG_CLOSE, TAG_SEND } tag_kind;

typedef struct srv_tag {
    tag_kind kind;
    srv_call *call;
} srv_tag;

/* One completion queue and the threads that take turns polling it: exactly
 * one polls at a time (two in grpc_completion_queue_next on one queue would
 * wake each other on every event). The poller that accepts an inference call
 * it may run itself hands the queue to an idle standby and runs the call
 * (cq_hand_over); when its answer is out, the standby hands the queue back at
 * its next event (the answer's own completion) and waits again, so that
 * calls keep running on one thread, and one CPU's caches, instead of
 * alternating between two. */
typedef struct cq_thread {
    grpc_completion_queue *cq;
    srv_server *s;
    pthread_t tids[1 + MAX_STANDBY];
    int nthreads; /* started: the first poller and its standbys */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int polling; /* under mu: a thread holds the queue */
    int idle;    /* under mu: standbys waiting for it */
    int stop;    /* under mu: the queue is shut down */
    atomic_int back; /* runners whose answer is out, waiting to poll again */
} cq_thread;

struct srv_call {
    srv_server *s;
    cq_thread *cqt;
    int method; /* index in s->methods; -1 = generic */
    int handover; /* runs on the CQ thread that handed its queue over */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_call_details details; /* generic path */
    grpc_metadata_array req_md;
    grpc_byte_buffer *req;
    atomic_int refs;
    atomic_int cancelled;
    int close_cancelled; /* written by the core for RECV_CLOSE_ON_SERVER */
    int close_posted;    /* RECV_CLOSE_ON_SERVER posted alone (else it rides on the reply) */
    srv_tag accept_tag, close_tag, send_tag;
    grpc_byte_buffer *resp_bb;
    grpc_slice status_slice;
    int has_status_slice;
    int counted; /* in s->inflight */
    /* streams, under mu */
    pthread_mutex_t mu;
    int is_stream;
    int sent_md;
    int send_busy;
    int has_pending;
    srv_bytes pending;
    int finish_pending;
    grpc_status_code finish_code;
    char *finish_msg;
    int finished;
    double t_accept; /* srv_req_now() when accepted (unary calls) */
    srv_req rec;     /* metrics and request log record (unary calls) */
    struct srv_job *job; /* set: not a gRPC call but srv_server_run_job's work */
};

typedef struct srv_job {
    void (*fn)(void *arg);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} srv_job;

struct srv_server {
    grpc_server *server;
    const srv_method *methods;
    void **handles; /* grpc registered-method handles */
    char (*api)[32]; /* api label of each method (api_name), made once */
    int nmethods;
    void *app;
    int port;
    int64_t max_msg;
    cq_thread cqs[MAX_CQ];
    int ncq;
    grpc_completion_queue *ctl_cq;
    pthread_mutex_t arm_mu;
    int shutting_down; /* under arm_mu */
    atomic_int draining;
    atomic_int inflight;
    _Atomic int64_t last_accept_ms; /* monotonic ms of the latest accepted call */
    _Atomic int64_t drain_start_ms; /* monotonic ms when draining began */
    int stopped;
    /* worker pool, fed by per-model queues (srv_queue.c) */
    pthread_t *workers;
    int nworkers;
    srv_queue *queue;
    srv_queue_key_fn queue_key;
    atomic_int inline_busy; /* calls running on CQ threads */
    int inline_max;         /* srv_server_opts.inline_max_bytes */
    int worker_nice;        /* srv_server_opts.worker_nice */
    int cq_slice_us;        /* srv_server_opts.cq_slice_us */
    double inline_cost_s;   /* srv_server_opts.inline_max_micros, in seconds */
    double handover_cost_s; /* srv_server_opts.handover_max_micros, in seconds; 0 = never */
    int nstandby;           /* srv_server_opts.standby_threads */
    /* our own listener, whose connections gRPC adopts (srv_listen.h) */
    srv_listener *listener;
    int external; /* through gRPC's external-connection handler */
    grpc_server_credentials *fd_creds;
    grpc_resource_quota *quota;
};

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */
/* ------------------------------------------------------------------------ */

static srv_call *call_new(srv_server *s, cq_thread *cqt, int method) {
    srv_call *c = calloc(1, sizeof(*c));
    if (c == NULL) return NULL;
    c->s = s;
    c->cqt = cqt;
    c->method = method;
    atomic_init(&c->refs, 1);
    atomic_init(&c->cancelled, 0);
    c->accept_tag = (srv_tag){TAG_ACCEPT, c};
    c->close_tag = (srv_tag){TAG_CLOSE, c};
    c->send_tag = (srv_tag){TAG_SEND, c};
    grpc_metadata_array_init(&c->req_md);
    grpc_call_details_init(&c->details);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void call_unref(srv_call *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    if (c->req) grpc_byte_buffer_destroy(c->req);
    if (c->resp_bb) grpc_byte_buffer_destroy(c->resp_bb);
    if (c->has_status_slice) grpc_slice_unref(c->status_slice);
    if (c->has_pending) free(c->pending.data);
    free(c->finish_msg);
    grpc_metadata_array_destroy(&c->req_md);
    grpc_call_details_destroy(&c->details);
    if (c->call) grpc_call_unref(c->call);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

const atomic_int *srv_call_cancel_flag(srv_call *c) {
    /* no gRPC call: a REST call's watch, when the thread has one (ms_watch.h) */
    return c ? &c->cancelled : ms_watch_bound_flag();
}

int srv_call_cancelled(srv_call *c) {
    return atomic_load(&c->cancelled);
}

double srv_call_time_left(srv_call *c) {
    if (c->deadline.clock_type == GPR_CLOCK_REALTIME && c->deadline.tv_sec == 0 &&
        c->deadline.tv_nsec == 0)
        return 1e9; /* generic path: no deadline recorded */
    gpr_timespec inf = gpr_inf_future(c->deadline.clock_type);
    if (gpr_time_cmp(c->deadline, inf) == 0) return 1e9;
    gpr_timespec d = gpr_convert_clock_type(c->deadline, GPR_CLOCK_MONOTONIC);
    gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
    return (double)left.tv_sec + left.tv_nsec / 1e9;
}

void srv_call_peer(srv_call *c, char *buf, size_t cap) {
    char *p = grpc_call_get_peer(c->call);
    int fd = -1;
    if (p != NULL && sscanf(p, "fd:%d", &fd) == 1 && fd >= 0) {
        /* Our listener handed the socket over; while the call lives, so does it. */
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char host[NI_MAXHOST], serv[NI_MAXSERV];
        int got = getpeername(fd, (struct sockaddr *)&ss, &sl) == 0;
        if (got && ss.ss_family == AF_INET6 &&
            IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
            /* a dual-stack listener: name IPv4 clients as gRPC does */
            struct sockaddr_in6 a6 = *(struct sockaddr_in6 *)&ss;
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            memset(&ss, 0, sizeof(ss));
            a4->sin_family = AF_INET;
            a4->sin_port = a6.sin6_port;
            memcpy(&a4->sin_addr, &a6.sin6_addr.s6_addr[12], 4);
            sl = sizeof(*a4);
        }
        if (got &&
            getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
                        NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
            if (ss.ss_family == AF_INET6)
                snprintf(buf, cap, "ipv6:[%s]:%s", host, serv);
            else if (ss.ss_family == AF_INET)
                snprintf(buf, cap, "ipv4:%s:%s", host, serv);
            else
                snprintf(buf, cap, "unix:");
            gpr_free(p);
            return;
        }
    }
    snprintf(buf, cap, "%s", p ? p : "unknown");
    gpr_free(p);
}

int srv_peer_is_loopback(const char *peer) {
    return strncmp(peer, "ipv4:127.", 9) == 0 || strncmp(peer, "ipv6:[::1]:", 11) == 0 ||
           strncmp(peer, "ipv6:[::ffff:127.", 17) == 0 || strncmp(peer, "unix:", 5) == 0;
}

int srv_call_peer_is_loopback(srv_call *c) {
    char peer[300];
    srv_call_peer(c, peer, sizeof(peer));
    return srv_peer_is_loopback(peer);
}

int srv_call_peer_cn(srv_call *c, char *buf, size_t cap) {
    int ok = 0;
    buf[0] = '\0';
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (ctx == NULL) return 0;
    if (grpc_auth_context_peer_is_authenticated(ctx)) {
        grpc_auth_property_iterator it =
            grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_CN_PROPERTY_NAME);
        const grpc_auth_property *p = grpc_auth_property_iterator_next(&it);
        if (p != NULL && p->value_length < cap) {
            memcpy(buf, p->value, p->value_length);
            buf[p->value_length] = '\0';
            ok = 1;
        }
    }
    grpc_auth_context_release(ctx);
    return ok;
}

/* Ask for one more incoming call of `method` on cqt. Never after shutdown
 * started: a request landing on a shut-down CQ aborts the process. */
static void arm(srv_server *s, cq_thread *cqt, int method) {
    srv_call *c = call_new(s, cqt, method);
    grpc_call_error err = GRPC_CALL_ERROR;
    if (c == NULL) return;
    pthread_mutex_lock(&s->arm_mu);
    if (!s->shutting_down) {
        if (method >= 0)
            err = grpc_server_request_registered_call(s->server, s->handles[method], &c->call,
                                                      &c->deadline, &c->req_md, &c->req, cqt->cq,
                                                      cqt->cq, &c->accept_tag);
        else
            err = grpc_server_request_call(s->server, &c->call, &c->details, &c->req_md, cqt->cq,
                                           cqt->cq, &c->accept_tag);
    }
    pthread_mutex_unlock(&s->arm_mu);
    if (err != GRPC_CALL_OK) call_unref(c);
}

/* Sends the unary answer; consumes the owner reference (released when the
 * batch completes) and resp->data. */
static void reply(srv_call *c, grpc_status_code code, const char *msg, srv_bytes *resp) {
    grpc_op ops[4];
    size_t n = 0;

    if (resp != NULL && resp->data != NULL && code == GRPC_STATUS_OK) {
        if ((int64_t)resp->len > c->s->max_msg) {
            char buf[256];
            snprintf(buf, sizeof(buf),
                     "response of %zu bytes is larger than the limit of %lld bytes "
                     "(--max_message_bytes)",
                     resp->len, (long long)c->s->max_msg);
            free(resp->data);
            resp->data = NULL;
            reply(c, GRPC_STATUS_RESOURCE_EXHAUSTED, buf, NULL);
            return;
        }
        /* Zero copy: the slice frees the protobuf-c output when the core is done. */
        grpc_slice sl = grpc_slice_new(resp->data, resp->len, free);
        resp->data = NULL;
        c->resp_bb = grpc_raw_byte_buffer_create(&sl, 1);
        grpc_slice_unref(sl);
    } else if (resp != NULL) {
        free(resp->data);
        resp->data = NULL;
    }
    memset(ops, 0, sizeof(ops)); /* flags and reserved must be zero */
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (c->resp_bb != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->resp_bb;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    if (code != GRPC_STATUS_OK && msg != NULL) {
        c->status_slice = grpc_slice_from_copied_string(msg);
        c->has_status_slice = 1;
        ops[n].data.send_status_from_server.status_details = &c->status_slice;
    }
    n++;
    if (!c->close_posted) { /* a call nobody needed to watch for cancellation while it ran */
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->close_cancelled;
    }
    if (c->handover) { /* from now on the poller hands the queue back */
        c->handover = 0;
        atomic_fetch_add(&c->cqt->back, 1);
    }
    grpc_call_error err = grpc_call_start_batch(c->call, ops, n, &c->send_tag, NULL);
    if (err != GRPC_CALL_OK) {
        MS_WARN("grpc: start_batch for reply failed: %d", (int)err);
        if (c->counted) atomic_fetch_sub(&c->s->inflight, 1);
        call_unref(c);
    }
}

static void reply_error(srv_call *c, ms_status st) {
    const char *m = ms_errmsg();
    reply(c, srv_status_to_grpc(st), m[0] ? m : ms_status_name(st), NULL);
}

srv_req *srv_call_req(srv_call *c) {
    return c ? &c->rec : NULL;
}

/* The api label of a method path: "/tensorflow.serving.PredictionService/Predict"
 * -> "grpc_predict", KServe's "/inference.GRPCInferenceService/ModelInfer" ->
 * "grpc_kserve_infer"; other methods: "grpc_" + the method name in lower case. */
static void api_name(const char *path, char *out, size_t n) {
    static const struct { const char *method, *api; } t[] = {
        {"/Predict", "predict"}, {"/Classify", "classify"}, {"/Regress", "regress"},
        {"/MultiInference", "multi_inference"}, {"/GetModelMetadata", "metadata"},
        {"/GetModelStatus", "status"}, {"/HandleReloadConfigRequest", "reload_config"},
        {"/ModelInfer", "kserve_infer"}, {"/ModelMetadata", "kserve_metadata"},
        {"/ModelReady", "kserve_model_ready"}, {"/ServerReady", "kserve_server_ready"},
        {"/ServerLive", "kserve_server_live"}, {"/ServerMetadata", "kserve_server_metadata"},
        {"/Check", "health_check"},
    };
    const char *slash = strrchr(path, '/');
    for (size_t i = 0; slash && i < sizeof t / sizeof t[0]; i++)
        if (strcmp(slash, t[i].method) == 0) {
            snprintf(out, n, "grpc_%s", t[i].api);
            return;
        }
    size_t w = (size_t)snprintf(out, n, "grpc_");
    for (const char *p = slash ? slash + 1 : path; *p && w + 1 < n; p++)
        out[w++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    out[w] = 0;
}

static ms_status run_unary_body(srv_call *c);

/* The record's peer, looked up only when a request log line is written. */
static void rec_peer(void *arg, char *buf, size_t cap) {
    srv_call_peer(arg, buf, cap);
}

/* Times the call into c->req: the queue phase, then the handler, then one
 * record (metrics + request log line). */
static void run_unary(srv_call *c) {
    srv_req_begin_lazy(&c->rec, c->s->api[c->method], rec_peer, c);
    if (c->t_accept > 0) {
        c->rec.t0 = c->t_accept;
        c->rec.mark = c->t_accept;
        srv_req_phase(&c->rec, SRV_PHASE_QUEUE);
    }
    atomic_fetch_add(&c->refs, 1); /* c->rec outlives the reply */
    run_unary_body(c);
    call_unref(c);
}

/* Ends the call's record just before its answer goes out, so that a client
 * that has its answer also finds it counted on /metrics. */
static void reply_rec(srv_call *c, ms_status st, grpc_status_code code, const char *msg,
                      srv_bytes *resp) {
    if (resp != NULL && resp->data != NULL) c->rec.bytes_out = resp->len;
    srv_req_end(&c->rec, st);
    reply(c, code, msg, resp);
}

static void reply_error_rec(srv_call *c, ms_status st) {
    srv_req_end(&c->rec, st);
    reply_error(c, st);
}

/* A large uncompressed request arrives as many slices and is flattened
 * into one buffer for the parser. That buffer (a whole CT series is 70 MB)
 * is fresh memory on every call; it is advised for transparent huge pages
 * before the copy, so the copy faults it in as about 35 pages of 2 MiB, not
 * 17,000 of 4 KiB (the fault handling was a quarter of such a request's
 * CPU). Only advice: with THP off the copy is the same as gRPC's readall. */
#define FLAT_HUGE_MIN ((size_t)8 << 20)
static grpc_slice flatten_large(const grpc_slice_buffer *sb) {
    grpc_slice flat = grpc_slice_malloc_large(sb->length);
    uint8_t *dst = GRPC_SLICE_START_PTR(flat);
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)dst + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)dst + sb->length) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < sb->count; i++) {
        size_t n = GRPC_SLICE_LENGTH(sb->slices[i]);
        memcpy(dst, GRPC_SLICE_START_PTR(sb->slices[i]), n);
        dst += n;
    }
    return flat;
}
/* Flattens the request payload; an absent payload reads as an empty message. */
static ms_status run_unary_body(srv_call *c) {
    const srv_method *m = &c->s->methods[c->method];
    srv_bytes resp = {NULL, 0};
    grpc_slice flat = grpc_empty_slice();
    ms_status st;

    if (srv_call_time_left(c) <= 0) {
        MS_DEBUG("grpc: %s deadline passed while queued, before it ran; skipped", m->path);
        reply_rec(c, MS_ETIMEDOUT, GRPC_STATUS_DEADLINE_EXCEEDED,
                  "deadline passed while the call was queued", NULL);
        return MS_ETIMEDOUT;
    }
    if (atomic_load(&c->cancelled)) {
        MS_DEBUG("grpc: %s cancelled before it ran; skipped", m->path);
        reply_rec(c, MS_ECANCELED, GRPC_STATUS_CANCELLED, "call cancelled before it ran", NULL);
        return MS_ECANCELED;
    }
    if (c->req != NULL && c->req->type == GRPC_BB_RAW &&
        c->req->data.raw.compression == GRPC_COMPRESS_NONE &&
        c->req->data.raw.slice_buffer.count == 1) {
        /* One uncompressed slice: read in place, no copy. */
        flat = grpc_slice_ref(c->req->data.raw.slice_buffer.slices[0]);
    } else if (c->req != NULL && c->req->type == GRPC_BB_RAW &&
               c->req->data.raw.compression == GRPC_COMPRESS_NONE &&
               c->req->data.raw.slice_buffer.length >= FLAT_HUGE_MIN) {
        flat = flatten_large(&c->req->data.raw.slice_buffer);
    } else if (c->req != NULL) {
        grpc_byte_buffer_reader rd;
        if (!grpc_byte_buffer_reader_init(&rd, c->req)) {
            reply_rec(c, MS_EINTERNAL, GRPC_STATUS_INTERNAL, "cannot read the request message", NULL);
            return MS_EINTERNAL;
        }
        flat = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
    }
    ms_err_clear();
    if ((st = srv_inflate_message(c->req, &flat, c->s->max_msg)) != MS_OK) {
        grpc_slice_unref(flat);
        reply_error_rec(c, st);
        return st;
    }
    /* Every request is pre-scanned before any handler unpacks it: protobuf-c
     * recurses once per nesting level, so depth is bounded here, once. */
    st = ms_wire_check_request(GRPC_SLICE_START_PTR(flat), GRPC_SLICE_LENGTH(flat));
    if (st != MS_OK) {
        grpc_slice_unref(flat);
        reply_error_rec(c, ms_errwrap(st, "%s: request message", m->path));
        return st;
    }
    c->rec.bytes_in = GRPC_SLICE_LENGTH(flat);
    st = m->unary(c->s->app, c, GRPC_SLICE_START_PTR(flat), GRPC_SLICE_LENGTH(flat), &resp);
    grpc_slice_unref(flat);
    if (st != MS_OK) {
        free(resp.data);
        reply_error_rec(c, st);
        return st;
    }
    reply_rec(c, MS_OK, GRPC_STATUS_OK, NULL, &resp);
    return MS_OK;
}

/* ---- streams ---- */

/* Starts the next stream batch if none is running. Called with c->mu held. */
static void stream_pump(srv_call *c) {
    grpc_op ops[2];
    size_t n = 0;
    if (c->send_busy || c->finished || (!c->has_pending && !c->finish_pending)) return;
    memset(ops, 0, sizeof(ops));
    if (!c->sent_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->sent_md = 1;
    }
    if (c->has_pending) { /* otherwise finish_pending */
        grpc_slice sl = grpc_slice_new(c->pending.data, c->pending.len, free);
        c->has_pending = 0;
        c->pending.data = NULL;
        if (c->resp_bb) grpc_byte_buffer_destroy(c->resp_bb);
        c->resp_bb = grpc_raw_byte_buffer_create(&sl, 1);
        grpc_slice_unref(sl);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->resp_bb;
    } else {
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = c->finish_code;
        if (c->finish_msg) {
            if (c->has_status_slice) grpc_slice_unref(c->status_slice);
            c->status_slice = grpc_slice_from_copied_string(c->finish_msg);
            c->has_status_slice = 1;
            ops[n].data.send_status_from_server.status_details = &c->status_slice;
        }
        n++;
        c->finished = 1;
    }
    atomic_fetch_add(&c->refs, 1);
    c->send_busy = 1;
    if (grpc_call_start_batch(c->call, ops, n, &c->send_tag, NULL) != GRPC_CALL_OK) {
        c->send_busy = 0;
        c->finished = 1;
        atomic_fetch_sub(&c->refs, 1); /* cannot reach zero: the owner holds one */
    }
}

void srv_call_stream_send(srv_call *c, srv_bytes *msg) {
    pthread_mutex_lock(&c->mu);
    if (c->finished || c->finish_pending) {
        free(msg->data);
    } else {
        if (c->has_pending) free(c->pending.data);
        c->pending = *msg;
        c->has_pending = 1;
        stream_pump(c);
    }
    msg->data = NULL;
    pthread_mutex_unlock(&c->mu);
}

void srv_call_stream_finish(srv_call *c, grpc_status_code code, const char *msg) {
    pthread_mutex_lock(&c->mu);
    if (!c->finish_pending && !c->finished) {
        c->finish_pending = 1;
        c->finish_code = code;
        c->finish_msg = msg ? strdup(msg) : NULL;
        stream_pump(c);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* Worker pool                                                               */
/* ------------------------------------------------------------------------ */

static void *worker_main(void *arg) {
    srv_server *s = arg;
    /* Workers compute; the CQ thread answers. Under a saturating model the
     * CQ thread (protocol work and the cheap calls it runs inline) goes
     * first, so a light model is not queued behind the heavy one's kernels
     * for the CPU (--grpc_worker_nice; nice is per thread on Linux, and the
     * threads a worker starts inherit it). */
    if (s->worker_nice > 0 && setpriority(PRIO_PROCESS, (id_t)gettid(), s->worker_nice) != 0)
        MS_DEBUG("grpc: worker nice %d: %s", s->worker_nice, strerror(errno));
    for (;;) {
        srv_qkey *tok = NULL;
        srv_call *c = srv_queue_pop(s->queue, &tok);
        if (c == NULL) return NULL; /* stopped and nothing queued */
        if (c->job != NULL) {
            srv_job *j = c->job; /* c and j live on the waiter's stack */
            j->fn(j->arg);
            pthread_mutex_lock(&j->mu);
            j->done = 1;
            pthread_cond_signal(&j->cv);
            pthread_mutex_unlock(&j->mu);
            srv_queue_done(s->queue, tok);
            continue;
        }
        double t0 = srv_req_now();
        run_unary(c);
        srv_queue_done_timed(s->queue, tok, srv_req_now() - t0);
    }
}

/* Listens for cancellation from now on (client cancel, deadline, shutdown):
 * sets c->cancelled, which a running handler polls. */
static void post_close(srv_call *c) {
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->close_cancelled;
    c->close_posted = 1;
    atomic_fetch_add(&c->refs, 1);
    if (grpc_call_start_batch(c->call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK) {
        atomic_fetch_sub(&c->refs, 1);
        c->close_posted = 0;
    }
}

/* The request's queue key (model and signature) from its first bytes. */
static void call_key(srv_call *c, const srv_method *m, char *key, size_t cap) {
    key[0] = '\0';
    if (c->s->queue_key == NULL || c->req == NULL || c->req->type != GRPC_BB_RAW ||
        c->req->data.raw.compression != GRPC_COMPRESS_NONE ||
        c->req->data.raw.slice_buffer.count == 0)
        return;
    grpc_slice sl = c->req->data.raw.slice_buffer.slices[0];
    c->s->queue_key(m, GRPC_SLICE_START_PTR(sl), GRPC_SLICE_LENGTH(sl), key, cap);
}

ms_status srv_server_run_job(srv_server *s, const char *model, void (*fn)(void *arg), void *arg) {
    char key[SRV_QUEUE_KEY_MAX];
    srv_job j = {.fn = fn, .arg = arg};
    srv_call holder;
    memset(&holder, 0, sizeof(holder));
    holder.job = &j;
    if (atomic_load(&s->draining)) return ms_errf(MS_ESHUTDOWN, "server is shutting down");
    snprintf(key, sizeof key, "%s\n", model);
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    ms_status st = MS_OK;
    if (srv_queue_push(s->queue, key, &holder) != 0) {
        st = ms_errf(MS_EBUSY,
                     "the queue of model \"%s\" is full (%d requests waiting, "
                     "--max_queued_requests_per_model); retry later",
                     model, srv_queue_bound(s->queue));
    } else {
        pthread_mutex_lock(&j.mu);
        while (!j.done)
            pthread_cond_wait(&j.cv, &j.mu);
        pthread_mutex_unlock(&j.mu);
    }
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    return st;
}

static size_t req_bytes(const srv_call *c) {
    return c->req != NULL && c->req->type == GRPC_BB_RAW
               ? c->req->data.raw.slice_buffer.length : 0;
}

/* Set on a thread that gave its queue away while handling an event: back in
 * cq_main it becomes a standby instead of polling again. */
static _Thread_local int tl_handed_over;

static int cq_has_standby(cq_thread *t) {
    pthread_mutex_lock(&t->mu);
    int idle = t->idle > 0 && !t->stop;
    pthread_mutex_unlock(&t->mu);
    return idle;
}

/* Called by the polling thread: an idle standby takes the queue over.
 * 0: none is idle (the caller keeps polling). */
static int cq_hand_over(cq_thread *t) {
    int done = 0;
    pthread_mutex_lock(&t->mu);
    if (t->idle > 0 && !t->stop) {
        t->polling = 0;
        pthread_cond_signal(&t->cv);
        done = 1;
    }
    pthread_mutex_unlock(&t->mu);
    tl_handed_over = done;
    return done;
}

static void enqueue(srv_server *s, srv_call *c, const srv_method *m) {
    char key[SRV_QUEUE_KEY_MAX], msg[SRV_QUEUE_KEY_MAX + 160];
    call_key(c, m, key, sizeof key);
    /* A small call to a model/signature whose runs are cheap (measured: its
     * average run is at most --grpc_inline_max_micros) and that has nothing waiting
     * runs here on the CQ thread, without a hop to a worker and its wake-up.
     * With several CQ threads one stays free for the protocol (at most
     * ncq - 1 calls run inline at once); with one, the protocol waits at
     * most about one cheap run. A model never timed yet goes to a worker,
     * which times it. */
    if (key[0] != '\0' && s->inline_max >= 0 && req_bytes(c) <= (size_t)s->inline_max) {
        srv_qkey *tok = NULL;
        int most = s->ncq > 1 ? s->ncq - 1 : 1;
        if (atomic_fetch_add(&s->inline_busy, 1) < most &&
            (tok = srv_queue_try_run_cheap(s->queue, key, s->inline_cost_s)) != NULL) {
            double t0 = c->t_accept; /* taken just before; one clock read fewer */
            srv_metrics_grpc_path(SRV_GRPC_INLINE);
            run_unary(c);
            srv_queue_done_timed(s->queue, tok, srv_req_now() - t0);
        }
        atomic_fetch_sub(&s->inline_busy, 1);
        if (tok != NULL) return;
    }
    /* Any other call whose model/signature has nothing waiting and whose runs
     * average at most --grpc_handover_max_micros runs on this thread too, when
     * a standby is idle to take over the queue: no hop to a worker and its
     * wake-up, the request still warm in this CPU's cache, while the standby
     * serves everyone else. Heavier models stay on the workers (nice). */
    if (key[0] != '\0' && s->handover_cost_s > 0 && s->nstandby > 0 && cq_has_standby(c->cqt)) {
        srv_qkey *tok = srv_queue_try_run_cheap(s->queue, key, s->handover_cost_s);
        if (tok != NULL && cq_hand_over(c->cqt)) {
            c->handover = 1;
            /* As for the cheap calls above, cancellation is not watched while
             * the run lasts (at most about --grpc_handover_max_micros): its
             * RECV_CLOSE_ON_SERVER goes with the reply, one batch and one
             * completion fewer. */
            double t0 = c->t_accept;
            srv_metrics_grpc_path(SRV_GRPC_HANDOVER);
            run_unary(c);
            srv_queue_done_timed(s->queue, tok, srv_req_now() - t0);
            return;
        }
        srv_queue_done(s->queue, tok); /* NULL: nothing to undo */
    }
    /* Queued: from now on a cancelled call is noticed (before and while it runs). */
    post_close(c);
    if (srv_queue_push(s->queue, key, c) == 0) {
        srv_metrics_grpc_path(SRV_GRPC_WORKER);
        return;
    }
    char *nl = strchr(key, '\n');
    if (nl) *nl = '\0';
    snprintf(msg, sizeof msg,
             "the queue of model \"%s\" is full (%d requests waiting, "
             "--max_queued_requests_per_model); retry later",
             key, srv_queue_bound(s->queue));
    MS_DEBUG("grpc: %s", msg);
    srv_req_begin_lazy(&c->rec, s->api[c->method], rec_peer, c);
    reply_rec(c, MS_EBUSY, GRPC_STATUS_UNAVAILABLE, msg, NULL);
}

/* ------------------------------------------------------------------------ */
/* Completion-queue threads                                                  */
/* ------------------------------------------------------------------------ */

/* Milliseconds for the accept and drain clocks: the coarse clock (a few ms
 * of resolution) is a plain read, and on_accept runs once per call. */
static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_accept(srv_call *c) {
    srv_server *s = c->s;

    atomic_store(&s->last_accept_ms, mono_ms());

    arm(s, c->cqt, c->method); /* keep the number of open slots constant */

    /* Inference calls are watched for cancellation once they are queued
     * (enqueue); one that runs inline, cheap by measure, never looks, and its
     * RECV_CLOSE_ON_SERVER goes with the reply: one batch and one completion
     * fewer. Every other call is watched from now on. */
    int worker_unary = c->method >= 0 && s->methods[c->method].on_worker &&
                       s->methods[c->method].stream_start == NULL;
    if (!worker_unary) post_close(c);

    if (c->method < 0) {
        char *path = grpc_slice_to_c_string(c->details.method);
        char msg[512], esc[128];
        snprintf(msg, sizeof(msg), "unknown method %s", path);
        MS_DEBUG("grpc: unknown method \"%s\" -> UNIMPLEMENTED", ms_log_escape(esc, sizeof esc, path));
        gpr_free(path);
        reply(c, GRPC_STATUS_UNIMPLEMENTED, msg, NULL);
        return;
    }
    const srv_method *m = &s->methods[c->method];
    if (atomic_load(&s->draining) && !m->during_drain) {
        reply(c, GRPC_STATUS_UNAVAILABLE, "server is shutting down", NULL);
        return;
    }
    if (m->stream_start != NULL) {
        grpc_slice flat = grpc_empty_slice();
        if (c->req != NULL) {
            grpc_byte_buffer_reader rd;
            if (grpc_byte_buffer_reader_init(&rd, c->req)) {
                flat = grpc_byte_buffer_reader_readall(&rd);
                grpc_byte_buffer_reader_destroy(&rd);
            }
        }
        ms_status wst = srv_inflate_message(c->req, &flat, s->max_msg);
        if (wst == MS_OK)
            wst = ms_wire_check_request(GRPC_SLICE_START_PTR(flat), GRPC_SLICE_LENGTH(flat));
        if (wst != MS_OK) {
            grpc_slice_unref(flat);
            reply_error(c, ms_errwrap(wst, "%s: request message", m->path));
            return;
        }
        c->is_stream = 1;
        m->stream_start(s->app, c, GRPC_SLICE_START_PTR(flat), GRPC_SLICE_LENGTH(flat));
        grpc_slice_unref(flat);
        return;
    }
    c->counted = 1;
    c->t_accept = srv_req_now();
    atomic_fetch_add(&s->inflight, 1);
    if (m->on_worker)
        enqueue(s, c, m);
    else
        run_unary(c);
}

static void on_event(srv_tag *t, int success) {
    srv_call *c = t->call;
    switch (t->kind) {
    case TAG_ACCEPT:
        if (!success) { /* server shutting down: the slot is returned */
            call_unref(c);
            return;
        }
        on_accept(c);
        return;
    case TAG_CLOSE:
        if (c->close_cancelled || !success) atomic_store(&c->cancelled, 1);
        if (c->is_stream) {
            const srv_method *m = &c->s->methods[c->method];
            pthread_mutex_lock(&c->mu);
            c->finished = 1; /* nothing more can be sent */
            pthread_mutex_unlock(&c->mu);
            if (m->stream_closed) m->stream_closed(c->s->app, c);
            call_unref(c); /* the stream owner's reference */
        }
        call_unref(c);
        return;
    case TAG_SEND:
        if (c->is_stream) {
            pthread_mutex_lock(&c->mu);
            c->send_busy = 0;
            if (!success) c->finished = 1;
            stream_pump(c);
            pthread_mutex_unlock(&c->mu);
        } else if (c->counted) {
            atomic_fetch_sub(&c->s->inflight, 1);
        }
        call_unref(c);
        return;
    }
}

static void *cq_main(void *arg) {
    cq_thread *t = arg;
    /* The CQ thread sleeps in epoll and works in short bursts; a short slice
     * lets it preempt a worker (which runs at nice 10 for whole inferences)
     * as soon as a packet wakes it, instead of after the worker's slice. */
    if (t->s->cq_slice_us > 0 && ms_sched_short_slice((unsigned)t->s->cq_slice_us) != 0)
        MS_DEBUG("grpc: CQ thread slice %d us: %s", t->s->cq_slice_us, strerror(errno));
    int runner = 0;  /* this thread handed its queue over and ran a call */
    int counted = 0; /* this thread gave the queue back and counts as idle already */
    for (;;) {
        /* Wait for the queue: a runner until the poller gives it back, a
         * standby until nobody holds it and no runner waits for it. */
        pthread_mutex_lock(&t->mu);
        if (!runner && !counted) t->idle++;
        counted = 0;
        while (!t->stop && (t->polling || (!runner && atomic_load(&t->back) > 0)))
            pthread_cond_wait(&t->cv, &t->mu);
        if (runner)
            atomic_fetch_sub(&t->back, 1);
        else
            t->idle--;
        runner = 0;
        int stop = t->stop;
        if (!stop) t->polling = 1;
        pthread_mutex_unlock(&t->mu);
        if (stop) return NULL;
        for (;;) {
            grpc_event ev =
                grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type == GRPC_QUEUE_SHUTDOWN) {
                pthread_mutex_lock(&t->mu);
                t->stop = 1;
                t->polling = 0;
                pthread_cond_broadcast(&t->cv);
                pthread_mutex_unlock(&t->mu);
                return NULL;
            }
            if (ev.type == GRPC_OP_COMPLETE) on_event(ev.tag, ev.success);
            if (tl_handed_over) { /* a standby polls now: wait for the queue */
                tl_handed_over = 0;
                runner = 1;
                break;
            }
            if (atomic_load(&t->back) > 0) { /* a runner's answer is out: its queue again */
                /* Idle from the same moment, so that the runner, polling
                 * again, finds a standby for its next call. */
                pthread_mutex_lock(&t->mu);
                t->polling = 0;
                t->idle++;
                counted = 1;
                pthread_cond_broadcast(&t->cv);
                pthread_mutex_unlock(&t->mu);
                break;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Server lifecycle                                                          */
/* ------------------------------------------------------------------------ */

#define MAX_CHANNEL_ARGS 16
#define OWN_ARGS         12

static void adopt_fd(void *arg, int fd) {
    srv_server *s = arg;
    grpc_server_add_channel_from_fd(s->server, fd, s->fd_creds);
}

static int arg_given(const grpc_arg *args, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(args[i].key, key) == 0) return 1;
    return 0;
}

/* Appends an integer argument unless the operator gave the key. */
static void add_int_arg(grpc_arg *args, int *n, int nuser, const char *key, int64_t v) {
    if (arg_given(args, nuser, key)) return;
    if (v > INT_MAX) v = INT_MAX;
    args[*n].type = GRPC_ARG_INTEGER;
    args[*n].key = (char *)key;
    args[(*n)++].value.integer = (int)v;
}

/* gRPC's own log lines go to ours at debug level (every failure they tell
 * of also comes back as a status that we report in our words). */
static void grpc_log_to_ms(gpr_log_func_args *a) {
    MS_DEBUG("grpc: %s:%d: %s", a->file ? a->file : "?", a->line, a->message ? a->message : "");
}

/* Splits "k=v,k=v" (copied into buf) into args[*n...]; integer values go as
 * integers, as TF Serving passes them. */
static ms_status parse_channel_args(const char *spec, char *buf, size_t cap, grpc_arg *args,
                                    int *n) {
    if (spec == NULL || spec[0] == '\0') return MS_OK;
    size_t len = strlen(spec);
    if (len >= cap)
        return ms_errf(MS_EINVAL, "--grpc_channel_arguments: longer than %zu bytes", cap - 1);
    memcpy(buf, spec, len + 1);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq == NULL || eq == t)
            return ms_errf(MS_EINVAL, "--grpc_channel_arguments: expected key=value, got \"%s\"",
                           t);
        if (k == MAX_CHANNEL_ARGS)
            return ms_errf(MS_EINVAL, "--grpc_channel_arguments: more than %d arguments",
                           MAX_CHANNEL_ARGS);
        *eq = '\0';
        grpc_arg *a = &args[(*n)++];
        k++;
        a->key = t;
        char *end = NULL;
        errno = 0;
        long v = strtol(eq + 1, &end, 10);
        if (errno == 0 && end != eq + 1 && *end == '\0' && v >= INT_MIN && v <= INT_MAX) {
            a->type = GRPC_ARG_INTEGER;
            a->value.integer = (int)v;
        } else {
            a->type = GRPC_ARG_STRING;
            a->value.string = eq + 1;
        }
    }
    return MS_OK;
}

/* Why binding addr failed: EADDRINUSE is told apart by a plain bind. */
static int port_in_use(const char *host, int port) {
    if (port == 0) return 0;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0) return 0;
    int in_use = 0;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 && errno == EADDRINUSE) in_use = 1;
        close(fd);
    }
    freeaddrinfo(res);
    return in_use;
}

static void server_free_state(srv_server *s);

/* The server's own state from the options: no gRPC object yet. NULL when
 * out of memory. */
static srv_server *server_new(const srv_server_opts *o, const srv_method *methods, int nmethods,
                              void *app) {
    srv_server *s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    s->methods = methods;
    s->nmethods = nmethods;
    s->app = app;
    s->max_msg = o->max_message_bytes > 0 ? o->max_message_bytes : INT32_MAX;
    s->ncq = o->cq_threads < 1 ? 1 : (o->cq_threads > MAX_CQ ? MAX_CQ : o->cq_threads);
    s->nworkers = o->workers < 1 ? 1 : o->workers;
    pthread_mutex_init(&s->arm_mu, NULL);
    /* One model never takes every worker: the others always find one. */
    int cap = s->nworkers > 1 ? s->nworkers - 1 : 1;
    if (o->queue_run_cap > 0 && o->queue_run_cap < cap) cap = o->queue_run_cap;
    s->queue =
        srv_queue_new(o->queue_bound > 0 ? o->queue_bound : SRV_QUEUE_DEFAULT_BOUND, cap);
    s->inline_max = o->inline_max_micros > 0 ? o->inline_max_bytes : -1;
    s->inline_cost_s = o->inline_max_micros / 1e6;
    s->handover_cost_s = o->handover_max_micros > 0 ? o->handover_max_micros / 1e6 : 0;
    s->nstandby = o->standby_threads < 0 || s->handover_cost_s <= 0 ? 0
                  : o->standby_threads > MAX_STANDBY ? MAX_STANDBY : o->standby_threads;
    s->worker_nice = o->worker_nice;
    s->cq_slice_us = o->cq_slice_us;
    s->queue_key = o->queue_key;
    s->handles = calloc((size_t)(nmethods > 0 ? nmethods : 1), sizeof(void *));
    s->api = calloc((size_t)(nmethods > 0 ? nmethods : 1), sizeof(*s->api));
    for (int i = 0; s->api != NULL && i < nmethods; i++)
        api_name(methods[i].path, s->api[i], sizeof s->api[i]);
    s->workers = calloc((size_t)s->nworkers, sizeof(pthread_t));
    if (s->handles == NULL || s->workers == NULL || s->queue == NULL || s->api == NULL) {
        server_free_state(s);
        return NULL;
    }
    return s;
}

/* Frees what server_new made, and the listener and credentials if any. */
static void server_free_state(srv_server *s) {
    srv_queue_free(s->queue);
    free(s->handles);
    free(s->api);
    free(s->workers);
    srv_listener_free(s->listener);
    if (s->fd_creds) grpc_server_credentials_release(s->fd_creds);
    free(s);
}

/* The channel arguments: ours, the operator's --grpc_channel_arguments
 * (kept in buf), per-message decompression off and SO_REUSEPORT off unless
 * the operator set them, then the limits against hostile clients
 * (docs/security.md), where the operator's win. *reuseport: what the
 * listener should do. */
static ms_status channel_args_build(const srv_server *s, const srv_server_opts *o, char *buf,
                                    size_t cap, grpc_arg *args, int *nargs, int *reuseport) {
    int n = 0;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[n++].value.integer = (int)s->max_msg;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[n++].value.integer = (int)s->max_msg;
    ms_status st = parse_channel_args(o->channel_arguments, buf, cap, args, &n);
    if (st != MS_OK) return st;
    int reuse_given = 0, decomp_given = 0;
    *reuseport = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(args[i].key, GRPC_ARG_ALLOW_REUSEPORT) == 0) {
            reuse_given = 1;
            *reuseport = args[i].type == GRPC_ARG_INTEGER && args[i].value.integer != 0;
        }
        if (strcmp(args[i].key, GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION) == 0) decomp_given = 1;
    }
    if (!decomp_given) { /* gRPC inflates unbounded: srv_inflate_message bounds it */
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
        args[n++].value.integer = 0;
    }
    if (!reuse_given) { /* gRPC's default on Linux is on: a busy port must fail */
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
        args[n++].value.integer = 0;
    }
    int nuser = n;
    if (o->max_concurrent_streams > 0)
        add_int_arg(args, &n, nuser, GRPC_ARG_MAX_CONCURRENT_STREAMS, o->max_concurrent_streams);
    if (o->idle_timeout_s > 0) {
        add_int_arg(args, &n, nuser, GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                    (int64_t)o->idle_timeout_s * 1000);
        add_int_arg(args, &n, nuser, GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                    (int64_t)o->idle_timeout_s * 1000);
    }
    if (o->keepalive_time_s > 0)
        add_int_arg(args, &n, nuser, GRPC_ARG_KEEPALIVE_TIME_MS,
                    (int64_t)o->keepalive_time_s * 1000);
    if (o->keepalive_timeout_s > 0)
        add_int_arg(args, &n, nuser, GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                    (int64_t)o->keepalive_timeout_s * 1000);
    if (o->max_connection_age_s > 0)
        add_int_arg(args, &n, nuser, GRPC_ARG_MAX_CONNECTION_AGE_MS,
                    (int64_t)o->max_connection_age_s * 1000);
    if (o->max_connection_age_grace_s > 0)
        add_int_arg(args, &n, nuser, GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                    (int64_t)o->max_connection_age_grace_s * 1000);
    *nargs = n;
    return MS_OK;
}

/* After grpc_init: the memory quota as a channel argument, unless the
 * operator gave one of their own. */
static void quota_arg_add(srv_server *s, const srv_server_opts *o, grpc_arg *args, int *nargs) {
    if (o->memory_quota_bytes <= 0 || arg_given(args, *nargs, GRPC_ARG_RESOURCE_QUOTA)) return;
    s->quota = grpc_resource_quota_create("dcmserve");
    grpc_resource_quota_resize(s->quota, (size_t)o->memory_quota_bytes);
    args[*nargs].type = GRPC_ARG_POINTER;
    args[*nargs].key = (char *)GRPC_ARG_RESOURCE_QUOTA;
    args[*nargs].value.pointer.p = s->quota;
    args[(*nargs)++].value.pointer.vtable = grpc_resource_quota_arg_vtable();
}

/* Our own listener (backoff, connection limit), for plaintext, and for TLS
 * only where gRPC hands over its external-connection handler. */
static ms_status listener_open(srv_server *s, const srv_server_opts *o, const char *host,
                               int reuseport, grpc_arg *args, int *nargs) {
    if (o->creds != NULL && !srv_listener_grpc_supported()) return MS_OK;
    srv_listen_opts lo = {host, o->port, reuseport, o->max_connections, o->creds != NULL};
    ms_status st = srv_listener_open(&lo, &s->listener);
    if (st != MS_OK) return st;
    if (o->creds == NULL) s->fd_creds = grpc_insecure_server_credentials_create();
    if (srv_listener_grpc_supported()) srv_listener_grpc_arg(s->listener, &args[(*nargs)++]);
    return MS_OK;
}

/* Registers every method and creates the completion queues (before
 * grpc_server_start). */
static void queues_register(srv_server *s) {
    for (int i = 0; i < s->nmethods; i++)
        s->handles[i] = grpc_server_register_method(s->server, s->methods[i].path, NULL,
                                                    GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    for (int i = 0; i < s->ncq; i++) {
        s->cqs[i].s = s;
        pthread_mutex_init(&s->cqs[i].mu, NULL);
        pthread_cond_init(&s->cqs[i].cv, NULL);
        atomic_init(&s->cqs[i].back, 0);
        s->cqs[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(s->server, s->cqs[i].cq, NULL);
    }
    s->ctl_cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->ctl_cq, NULL);
}

static void cq_drain_destroy(grpc_completion_queue *cq) {
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
}

/* Binds the port (through the listener, or gRPC's own); the port, 0 when
 * it could not be bound. */
static int port_bind(srv_server *s, const srv_server_opts *o, const char *addr) {
    if (s->listener == NULL) return grpc_server_add_http2_port(s->server, addr, o->creds);
    s->external =
        srv_listener_grpc_attach(s->listener, s->server, o->creds ? o->creds : s->fd_creds);
    /* without the handler: adopted with channel_from_fd (plaintext only) */
    return s->external || o->creds == NULL ? srv_listener_port(s->listener) : 0;
}

/* A server whose port did not bind was never started: destroys it
 * directly and says why. */
static ms_status server_abandon(srv_server *s, const srv_server_opts *o, const char *host,
                                const char *addr) {
    grpc_server_destroy(s->server);
    for (int i = 0; i < s->ncq; i++) {
        cq_drain_destroy(s->cqs[i].cq);
        pthread_mutex_destroy(&s->cqs[i].mu);
        pthread_cond_destroy(&s->cqs[i].cv);
    }
    cq_drain_destroy(s->ctl_cq);
    if (s->quota) grpc_resource_quota_unref(s->quota);
    grpc_shutdown();
    int ours = s->listener != NULL;
    server_free_state(s);
    if (ours) /* bound, but gRPC did not take the TLS connections */
        return ms_errf(MS_EINTERNAL, "gRPC %s did not hand over its external-connection "
                       "handler for the TLS port %s", grpc_version_string(), addr);
    if (port_in_use(host, o->port))
        return ms_errf(MS_EINVAL, "port %d is already in use (gRPC, %s)", o->port, addr);
    return ms_errf(MS_EINVAL, "cannot bind gRPC port %s (bad address or not permitted)", addr);
}

/* Starts the listener's accept loop, the workers, and per completion queue
 * its armed calls and its thread (plus standbys). */
static void threads_start(srv_server *s) {
    if (s->listener != NULL) {
        if (s->external)
            srv_listener_start(s->listener, srv_listener_grpc_adopt, s->listener);
        else
            srv_listener_start(s->listener, adopt_fd, s);
    }
    for (int i = 0; i < s->nworkers; i++)
        pthread_create(&s->workers[i], NULL, worker_main, s);
    for (int i = 0; i < s->ncq; i++) { /* request calls only after start */
        for (int m = 0; m < s->nmethods; m++) {
            int slots = s->methods[m].on_worker ? SLOTS_WORKER : SLOTS_INLINE;
            for (int k = 0; k < slots; k++)
                arm(s, &s->cqs[i], m);
        }
        for (int k = 0; k < SLOTS_GENERIC; k++)
            arm(s, &s->cqs[i], -1);
        /* The first thread takes the queue; the standbys wait for it. */
        for (int k = 0; k < 1 + s->nstandby; k++)
            if (pthread_create(&s->cqs[i].tids[k], NULL, cq_main, &s->cqs[i]) == 0)
                s->cqs[i].nthreads++;
    }
}

ms_status srv_server_start(const srv_server_opts *o, const srv_method *methods, int nmethods,
                           void *app, srv_server **out) {
    srv_server *s = server_new(o, methods, nmethods, app);
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    char cabuf[1024];
    grpc_arg args[4 + OWN_ARGS + MAX_CHANNEL_ARGS];
    int nargs = 0, reuseport = 0;
    memset(args, 0, sizeof(args));
    ms_status st = channel_args_build(s, o, cabuf, sizeof(cabuf), args, &nargs, &reuseport);
    if (st != MS_OK) {
        server_free_state(s);
        return st;
    }
    gpr_set_log_function(grpc_log_to_ms);
    ms_abseil_deadlock_detection_off(); /* as in release builds of Abseil */
    grpc_init();
    quota_arg_add(s, o, args, &nargs);
    const char *host = o->bind_address ? o->bind_address : "0.0.0.0";
    if ((st = listener_open(s, o, host, reuseport, args, &nargs)) != MS_OK) {
        if (s->quota) grpc_resource_quota_unref(s->quota);
        grpc_shutdown();
        server_free_state(s);
        return st;
    }
    grpc_channel_args cargs = {(size_t)nargs, args};
    s->server = grpc_server_create(&cargs, NULL);
    queues_register(s);
    char addr[300];
    if (strchr(host, ':') != NULL && host[0] != '[')
        snprintf(addr, sizeof(addr), "[%s]:%d", host, o->port);
    else
        snprintf(addr, sizeof(addr), "%s:%d", host, o->port);
    s->port = port_bind(s, o, addr);
    if (s->port == 0) return server_abandon(s, o, host, addr);
    grpc_server_start(s->server);
    threads_start(s);
    *out = s;
    return MS_OK;
}

int srv_server_port(const srv_server *s) {
    return s->port;
}

int srv_server_inflight(srv_server *s) {
    return atomic_load(&s->inflight);
}

void srv_server_drain_begin(srv_server *s) {
    atomic_store(&s->drain_start_ms, mono_ms());
    atomic_store(&s->draining, 1);
}

int srv_server_drain_wait(srv_server *s, double timeout_s, double quiet_s) {
    struct timespec nap = {0, 5 * 1000 * 1000};
    int64_t t0 = mono_ms();
    int64_t limit = t0 + (int64_t)(timeout_s * 1000);
    for (;;) {
        int n = atomic_load(&s->inflight);
        int64_t now = mono_ms();
        if (n <= 0) break;
        if (now >= limit) return n;
        nanosleep(&nap, NULL);
    }
    /* Calls the transport has started but not yet handed to us (a large
     * message still arriving) would be cut by the shutdown: wait until no
     * call has been accepted for quiet_s, for at most 3 s more. */
    int64_t quiet = (int64_t)(quiet_s * 1000), stop = mono_ms() + 3000;
    for (;;) {
        int n = atomic_load(&s->inflight);
        int64_t now = mono_ms();
        /* Quiet counts from the start of the drain too: a call sent just
         * before SIGTERM may not have been accepted yet. */
        int64_t since = atomic_load(&s->last_accept_ms);
        int64_t began = atomic_load(&s->drain_start_ms);
        if (began > since) since = began;
        if (n <= 0 && now - since >= quiet) return 0;
        if (now >= stop || now >= limit + 3000) return n;
        nanosleep(&nap, NULL);
    }
}

void srv_server_stop(srv_server *s, double grace_s) {
    int tag;
    if (s->stopped) return;
    s->stopped = 1;
    atomic_store(&s->draining, 1);
    srv_listener_stop(s->listener); /* no connection is adopted after shutdown began */
    pthread_mutex_lock(&s->arm_mu);
    s->shutting_down = 1;
    pthread_mutex_unlock(&s->arm_mu);

    grpc_server_shutdown_and_notify(s->server, s->ctl_cq, &tag);
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_millis((int64_t)(grace_s * 1000), GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(s->ctl_cq, dl, NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
        /* Connected clients keep their channels open; this closes them too. */
        MS_DEBUG("grpc: connections still open after %.2f s; closing them", grace_s);
        grpc_server_cancel_all_calls(s->server);
        ev = grpc_completion_queue_next(s->ctl_cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    }
    /* All calls are done; workers have nothing left but must be joined. */
    srv_queue_stop(s->queue);
    for (int i = 0; i < s->nworkers; i++)
        pthread_join(s->workers[i], NULL);
    for (int i = 0; i < s->ncq; i++)
        grpc_completion_queue_shutdown(s->cqs[i].cq);
    for (int i = 0; i < s->ncq; i++)
        for (int k = 0; k < s->cqs[i].nthreads; k++)
            pthread_join(s->cqs[i].tids[k], NULL);
    grpc_completion_queue_shutdown(s->ctl_cq);
    while (grpc_completion_queue_next(s->ctl_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
}

void srv_server_free(srv_server *s) {
    if (s == NULL) return;
    srv_server_stop(s, 1.0);
    grpc_server_destroy(s->server);
    grpc_completion_queue_destroy(s->ctl_cq);
    for (int i = 0; i < s->ncq; i++) {
        grpc_completion_queue_destroy(s->cqs[i].cq);
        pthread_mutex_destroy(&s->cqs[i].mu);
        pthread_cond_destroy(&s->cqs[i].cv);
    }
    srv_listener_free(s->listener);
    if (s->fd_creds) grpc_server_credentials_release(s->fd_creds);
    if (s->quota) grpc_resource_quota_unref(s->quota);
    grpc_shutdown();
    pthread_mutex_destroy(&s->arm_mu);
    srv_queue_free(s->queue);
    free(s->handles);
    free(s->api);
    free(s->workers);
    free(s);
}

ms_status srv_pack(const ProtobufCMessage *msg, srv_bytes *out) {
    size_t len = protobuf_c_message_get_packed_size(msg);
    out->data = malloc(len > 0 ? len : 1);
    if (out->data == NULL) return ms_errf(MS_ENOMEM, "out of memory packing a %zu-byte reply", len);
    out->len = protobuf_c_message_pack(msg, out->data);
    return MS_OK;
}
