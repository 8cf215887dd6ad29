/* srv_rest.h - TF Serving's REST API (/v1/models/...) on --rest_api_port,
 * served by libmicrohttpd. Requests go through the same manager lookup and
 * sig_run as the gRPC handlers; JSON <-> tensors is the only thing added.
 *
 * Ownership: srv_rest_start returns a server owned by the caller, stopped and
 * freed with srv_rest_stop; `app` is borrowed and must outlive it. */
#ifndef SRV_REST_H
#define SRV_REST_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "srv_app.h"
#include "srv_tls.h"

typedef struct srv_rest srv_rest;

typedef struct srv_rest_opts {
    int port;         /* 0 picks a free port (the caller decides whether to start at all) */
    int threads;      /* worker threads; <= 0 = 4 */
    int timeout_ms;   /* idle connection timeout; <= 0 = none */
    int cors;         /* Access-Control-Allow-Origin: * on every answer */
    const char *metrics_path; /* also serve /metrics here (NULL/"" = only /metrics) */
    srv_tls *tls;             /* HTTPS (and client certificates) when set; borrowed */
    int max_connections;      /* REST connections at most: past it a new one closes the one
                               * idle or waiting longest for its request, else answers 503;
                               * <= 0 = a quarter of RLIMIT_NOFILE (at least 64) */
    const char *bind_address; /* --bind_address (IP literal or host name); NULL = 0.0.0.0 */
    int call_timeout_ms;      /* deadline of a :predict run (--rest_api_timeout_in_ms): past
                               * it the run is cancelled and answers 504; <= 0 = none; also
                               * :classify, :regress and KServe /infer */
    int read_timeout_s;       /* a new connection's headers within this, a body's pauses no
                               * longer; slower senders are cut. <= 0 = none */
    int64_t max_buffered_bytes; /* request bodies held at once, all connections; past it
                                 * 503. <= 0 = min(max_request_memory_bytes, memory limit / 4) */
} srv_rest_opts;

ms_status srv_rest_start(srv_app *app, const srv_rest_opts *o, srv_rest **out);
int srv_rest_port(const srv_rest *r);
void srv_rest_stop(srv_rest *r);

#endif /* SRV_REST_H */
