/* srv_grpc.h - the gRPC server on the core C API (libgrpc 1.51).
 *
 * Several completion-queue threads, each with its own CQ, accept calls for
 * registered method paths plus a generic fallback that answers UNIMPLEMENTED
 * at once. Handlers marked on_worker (inference) run on a worker pool; the
 * rest run on the CQ thread. Every accepted call listens for cancellation
 * (client cancel or deadline) from the start, so a running handler can stop.
 * Server-streaming methods (health Watch) get a call handle they write to.
 *
 * Drain: srv_server_drain_begin makes new calls of non-drain methods answer
 * UNAVAILABLE; srv_server_drain_wait waits for in-flight unary calls;
 * srv_server_stop shuts the core server down and joins the threads.
 */
#ifndef SRV_GRPC_H
#define SRV_GRPC_H

#include <grpc/grpc_security.h>
#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

typedef struct srv_server srv_server;
typedef struct srv_call srv_call;

/* A response message: malloc'ed bytes, owned by whoever holds the struct. */
typedef struct srv_bytes {
    uint8_t *data;
    size_t len;
} srv_bytes;

/* Packs any protobuf-c message into *out (malloc'ed), for a reply. */
ms_status srv_pack(const ProtobufCMessage *msg, srv_bytes *out);

/* Unary handler. Decodes req[0..len), fills *resp (malloc'ed, the server
 * frees it) and returns MS_OK, or returns an error with the message set by
 * ms_errf on the calling thread (sent as the gRPC status details). */
typedef ms_status (*srv_unary_fn)(void *app, srv_call *call, const uint8_t *req, size_t len,
                                  srv_bytes *resp);
/* Server-streaming start: the handler keeps `call` (e.g. in a list) and
 * writes with srv_call_stream_send. */
typedef void (*srv_stream_fn)(void *app, srv_call *call, const uint8_t *req, size_t len);
/* The stream ended (client cancel, deadline, or after srv_call_stream_finish).
 * The handler must forget `call`: it is released when this returns. Called
 * on a CQ thread; the handler serialises against its own senders. */
typedef void (*srv_stream_closed_fn)(void *app, srv_call *call);

typedef struct srv_method {
    const char *path;                   /* "/pkg.Service/Method" */
    srv_unary_fn unary;                 /* set for unary methods */
    srv_stream_fn stream_start;         /* set for server-streaming methods */
    srv_stream_closed_fn stream_closed; /* with stream_start */
    int on_worker;                      /* unary runs on the worker pool */
    int during_drain;                   /* still served while draining */
} srv_method;

/* The per-model queue key of an on_worker call (srv_queue.h), from the
 * method and the request's first bytes; "" = the shared queue. */
typedef void (*srv_queue_key_fn)(const srv_method *m, const uint8_t *req, size_t n, char *key,
                                 size_t cap);

typedef struct srv_server_opts {
    const char *bind_address; /* "0.0.0.0", "127.0.0.1" */
    int port;                 /* 0 = any free port (see srv_server_port) */
    int cq_threads;
    int workers;
    int64_t max_message_bytes; /* receive and send limit */
    /* TF Serving's --grpc_channel_arguments: "key=value,key=value" (values
     * that parse as integers go as integers) or NULL. SO_REUSEPORT is off
     * unless this sets grpc.so_reuseport=1. */
    const char *channel_arguments;
    /* Requests waiting per model/signature queue before UNAVAILABLE
     * (--max_queued_requests_per_model); 0 = SRV_QUEUE_DEFAULT_BOUND. */
    int queue_bound;
    srv_queue_key_fn queue_key; /* NULL: one shared queue */
    /* The most workers one queue key may occupy; 0 = all but one. */
    int queue_run_cap;
    /* Requests up to this size whose key has nothing queued run on the CQ
     * thread (at most cq_threads - 1 at once); 0 = never (handlers that may
     * wait, e.g. for a batch, must not hold a CQ thread). */
    int inline_max_bytes;
    int inline_max_micros; /* ... and only when its key's average run is at most this; 0 = never */
    /* Any other inference call whose key has nothing queued and whose runs
     * average at most this runs on the CQ thread that accepted it, which
     * hands its queue to an idle standby thread first; 0 = never. */
    int handover_max_micros;
    int standby_threads; /* standby pollers per CQ thread (at most 8); 0 = no hand-over */
    int worker_nice;       /* nice increment of the worker threads (0 = none) */
    int cq_slice_us;       /* CPU slice the CQ threads ask for (ms_sched.h); 0 = none */
    /* Hostile clients (docs/security.md); 0 = gRPC's own default unless said. */
    int max_connections;        /* plaintext port only; 0 = no limit */
    int idle_timeout_s;         /* GRPC_ARG_MAX_CONNECTION_IDLE_MS, handshake timeout */
    int max_concurrent_streams; /* GRPC_ARG_MAX_CONCURRENT_STREAMS */
    int keepalive_time_s, keepalive_timeout_s;
    int max_connection_age_s, max_connection_age_grace_s;
    int64_t memory_quota_bytes; /* grpc_resource_quota; 0 = unlimited */
    /* TLS credentials (borrowed; the server keeps its own reference), or NULL
     * for plaintext on our own listener (srv_listen.h). */
    grpc_server_credentials *creds;
} srv_server_opts;

#define SRV_QUEUE_DEFAULT_BOUND 128

/* Creates, binds and starts the server; methods[] and app are borrowed and
 * must outlive it. MS_EINVAL when the address cannot be bound. */
ms_status srv_server_start(const srv_server_opts *o, const srv_method *methods, int nmethods,
                           void *app, srv_server **out);
/* The bound port. */
int srv_server_port(const srv_server *s);
/* Unary calls accepted and not yet answered. */
int srv_server_inflight(srv_server *s);
/* From now on, new calls of methods without during_drain get UNAVAILABLE. */
void srv_server_drain_begin(srv_server *s);
/* Waits until no unary call is in flight (at most timeout_s), then until no
 * call has arrived for quiet_s (at most 2 s more), so that calls still being
 * received are answered rather than cut. Returns the number in flight. */
int srv_server_drain_wait(srv_server *s, double timeout_s, double quiet_s);
/* Shuts down: stops accepting, cancels what is left (after grace_s), drains
 * and shuts the CQs, joins CQ and worker threads. Idempotent. */
void srv_server_stop(srv_server *s, double grace_s);
/* Frees a stopped server. */
void srv_server_free(srv_server *s);

/* Runs fn(arg) on a worker through the queue of `model` (its default
 * signature's queue), as a gRPC call of that model would run, and returns
 * once it has run: for the REST API. MS_EBUSY at once when that queue is
 * full, MS_ESHUTDOWN while draining. */
ms_status srv_server_run_job(srv_server *s, const char *model, void (*fn)(void *arg), void *arg);

/* ---- call accessors (valid while the handler runs / the stream is open) ---- */

/* Non-zero once the client cancelled or the deadline passed. The pointer is
 * for rt_run_opts.cancelled. For a NULL call (a REST call in a gRPC
 * handler): the flag of the watch bound to this thread (ms_watch_bind), or
 * NULL. */
const atomic_int *srv_call_cancel_flag(srv_call *c);
struct srv_req;
/* The call's metrics / request-log record (handlers name the model served
 * with srv_req_model); NULL for a NULL call. */
struct srv_req *srv_call_req(srv_call *c);
int srv_call_cancelled(srv_call *c);
/* Seconds until the call's deadline (large when none). */
double srv_call_time_left(srv_call *c);

/* The client's address into buf ("ipv4:127.0.0.1:40000", "ipv6:[::1]:40000"),
 * also for connections our own listener accepted (gRPC names those "fd:N"). */
void srv_call_peer(srv_call *c, char *buf, size_t cap);
/* Non-zero when the client's address is a loopback one (127/8, ::1, unix). */
int srv_call_peer_is_loopback(srv_call *c);
/* The same for an address written as srv_call_peer writes it (REST's too). */
int srv_peer_is_loopback(const char *peer);
/* When the client presented a certificate that TLS verified (mTLS), copies
 * its subject CN into buf and returns 1; otherwise buf = "" and returns 0. */
int srv_call_peer_cn(srv_call *c, char *buf, size_t cap);

/* Queues one message on a stream (takes msg->data). When a send is still in
 * progress the newest queued message replaces an older queued one (latest
 * state wins, which is what health Watch wants). */
void srv_call_stream_send(srv_call *c, srv_bytes *msg);
/* Ends the stream with a status once queued messages are sent. */
void srv_call_stream_finish(srv_call *c, grpc_status_code code, const char *msg);

#endif /* SRV_GRPC_H */
