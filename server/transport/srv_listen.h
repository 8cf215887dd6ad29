/* srv_listen.h - our own TCP listener for the gRPC port (plaintext and TLS).
 *
 * gRPC core 1.51's listener stops accepting for good after one accept4()
 * failure such as EMFILE, and it has no connection limit. This one accepts
 * on its own thread, waits and retries on transient errors (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM), enforces --max_connections by answering an HTTP/2
 * SETTINGS + GOAWAY (ENHANCE_YOUR_CALM, "too many connections") and closing,
 * and hands every other connection to a callback: srv_listener_grpc_adopt,
 * which feeds gRPC's own chttp2 listener through its external-connection
 * handler (TLS handshake included), or, where that is not available,
 * grpc_server_add_channel_from_fd (plaintext only). Open connections are
 * counted by watching the handed-over descriptors (descriptor number and
 * socket inode), so no hook into gRPC is needed to learn that one closed. */
#ifndef SRV_LISTEN_H
#define SRV_LISTEN_H

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "ms_status.h"

typedef struct srv_listener srv_listener;

typedef struct srv_listen_opts {
    const char *host;    /* "0.0.0.0" (all, IPv6 too where there is IPv6), "127.0.0.1", "::1" */
    int port;            /* 0 = any free port */
    int reuseport;       /* SO_REUSEPORT */
    int max_connections; /* 0 = no limit */
    int tls;             /* the port speaks TLS: refused connections are closed without
                            the plaintext HTTP/2 GOAWAY */
} srv_listen_opts;

/* Binds and listens. MS_EINVAL with "port N is already in use" or why the
 * address cannot be bound. */
ms_status srv_listener_open(const srv_listen_opts *o, srv_listener **out);
int srv_listener_port(const srv_listener *l);
/* Starts the accept thread; `adopt` owns each fd it is given. */
ms_status srv_listener_start(srv_listener *l, void (*adopt)(void *arg, int fd), void *arg);
/* Stops accepting and closes the listening socket (joins the thread). */
void srv_listener_stop(srv_listener *l);
void srv_listener_free(srv_listener *l);
/* Connections handed over and still open (counted only with a limit). */
int srv_listener_open_count(srv_listener *l);

/* gRPC's external-connection handler (see srv_listen.c for how and why).
 * supported: non-zero for the gRPC core this was checked against (29.x =
 * gRPC 1.51). grpc_arg: the pointer channel argument to pass to
 * grpc_server_create. attach: after grpc_server_register_*, adds the port
 * "external:..." with creds (insecure or TLS); non-zero when gRPC handed
 * over its handler. adopt: the srv_listener_start callback (arg = l) once
 * attached and the server started. gRPC frees the handler at shutdown. */
int srv_listener_grpc_supported(void);
void srv_listener_grpc_arg(srv_listener *l, grpc_arg *arg);
int srv_listener_grpc_attach(srv_listener *l, grpc_server *server, grpc_server_credentials *creds);
void srv_listener_grpc_adopt(void *l, int fd);

#endif /* SRV_LISTEN_H */
