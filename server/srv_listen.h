/* srv_listen.h - our own TCP listener for the plaintext gRPC port.
 *
 * gRPC core 1.51's listener stops accepting for good after one accept4()
 * failure such as EMFILE, and it has no connection limit. This one accepts
 * on its own thread, waits and retries on transient errors (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM), enforces --max_connections by answering an HTTP/2
 * SETTINGS + GOAWAY (ENHANCE_YOUR_CALM, "too many connections") and closing,
 * and hands every other connection to a callback (the gRPC server adopts it
 * with grpc_server_add_channel_from_fd). Open connections are counted by
 * watching the handed-over descriptors (descriptor number and socket inode),
 * so no hook into gRPC is needed to learn that one closed. */
#ifndef SRV_LISTEN_H
#define SRV_LISTEN_H

#include "ms_status.h"

typedef struct srv_listener srv_listener;

typedef struct srv_listen_opts {
    const char *host;    /* "0.0.0.0" (all, IPv6 too where there is IPv6), "127.0.0.1", "::1" */
    int port;            /* 0 = any free port */
    int reuseport;       /* SO_REUSEPORT */
    int max_connections; /* 0 = no limit */
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

#endif /* SRV_LISTEN_H */
