/* srv_listen.c - accept loop with backoff on descriptor exhaustion and a
 * connection limit (see srv_listen.h). */
#include "srv_listen.h"

#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "ms_log.h"

#define LINGER_MAX 64 /* refused sockets kept half-closed so the GOAWAY arrives */
#define TRIM_EVERY_MS 10000 /* malloc_trim after connections came and went */

typedef struct tracked {
    int fd;
    ino_t ino;
} tracked;

typedef struct lingering {
    int fd;
    int64_t until_ms;
} lingering;

struct srv_listener {
    int fd;
    int port;
    int max_conn;
    int tls;
    pthread_t tid;
    int started;
    atomic_int stop;
    void (*adopt)(void *arg, int fd);
    void *arg;
    pthread_mutex_t mu; /* guards conns */
    tracked *conns;
    int nconns, cap;
    lingering linger[LINGER_MAX];
    int nlinger;
    int64_t last_warn_ms, last_refuse_ms, last_trim_ms;
    long refused, exhausted, since_trim;
    /* gRPC's external-connection handler (srv_listener_grpc_attach), or NULL */
    void *grpc_handler;
    char grpc_key[48];
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_any(const char *h) {
    return strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0 || strcmp(h, "[::]") == 0 ||
           h[0] == '\0';
}

static int bind_one(int family, const struct sockaddr *sa, socklen_t sl, int reuseport,
                    int dual, int *err) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (dual) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, sa, sl) != 0 || listen(fd, 1024) != 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

ms_status srv_listener_open(const srv_listen_opts *o, srv_listener **out) {
    const char *host = o->host ? o->host : "0.0.0.0";
    int err = 0, fd = -1;
    if (is_any(host)) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)o->port);
        fd = bind_one(AF_INET6, (struct sockaddr *)&a6, sizeof(a6), o->reuseport, 1, &err);
        if (fd < 0 && err != EADDRINUSE) { /* no IPv6 here */
            struct sockaddr_in a4;
            memset(&a4, 0, sizeof(a4));
            a4.sin_family = AF_INET;
            a4.sin_addr.s_addr = htonl(INADDR_ANY);
            a4.sin_port = htons((uint16_t)o->port);
            fd = bind_one(AF_INET, (struct sockaddr *)&a4, sizeof(a4), o->reuseport, 0, &err);
        }
    } else {
        char h[256], ps[16];
        size_t hl = strlen(host);
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']' && hl - 2 < sizeof(h)) {
            memcpy(h, host + 1, hl - 2);
            h[hl - 2] = '\0';
        } else {
            snprintf(h, sizeof(h), "%s", host);
        }
        snprintf(ps, sizeof(ps), "%d", o->port);
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        int gai = getaddrinfo(h, ps, &hints, &res);
        if (gai != 0)
            return ms_errf(MS_EINVAL, "cannot bind gRPC port %s:%d: %s", host, o->port,
                           gai_strerror(gai));
        fd = bind_one(res->ai_family, res->ai_addr, res->ai_addrlen, o->reuseport, 0, &err);
        freeaddrinfo(res);
    }
    if (fd < 0) {
        if (err == EADDRINUSE)
            return ms_errf(MS_EINVAL, "port %d is already in use (gRPC, %s:%d)", o->port, host,
                           o->port);
        return ms_errf(MS_EINVAL, "cannot bind gRPC port %s:%d: %s", host, o->port,
                       strerror(err));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    srv_listener *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        close(fd);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    l->fd = fd;
    l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    l->max_conn = o->max_connections > 0 ? o->max_connections : 0;
    l->tls = o->tls;
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return MS_OK;
}

int srv_listener_port(const srv_listener *l) {
    return l->port;
}

/* Drops descriptors gRPC has closed (or reused for another file). */
static int live_count_locked(srv_listener *l) {
    for (int i = 0; i < l->nconns;) {
        struct stat st;
        if (fstat(l->conns[i].fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            st.st_ino != l->conns[i].ino)
            l->conns[i] = l->conns[--l->nconns];
        else
            i++;
    }
    return l->nconns;
}

int srv_listener_open_count(srv_listener *l) {
    pthread_mutex_lock(&l->mu);
    int n = live_count_locked(l);
    pthread_mutex_unlock(&l->mu);
    return n;
}

static void track(srv_listener *l, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    pthread_mutex_lock(&l->mu);
    if (l->nconns == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        tracked *n = realloc(l->conns, sizeof(tracked) * (size_t)cap);
        if (n != NULL) {
            l->conns = n;
            l->cap = cap;
        }
    }
    if (l->nconns < l->cap) l->conns[l->nconns++] = (tracked){fd, st.st_ino};
    pthread_mutex_unlock(&l->mu);
}

/* HTTP/2 server preface (an empty SETTINGS frame), then GOAWAY with last
 * stream 0, ENHANCE_YOUR_CALM and a reason; then half-close. On a TLS port
 * only the half-close (a TLS client cannot read plaintext frames). */
static void refuse(srv_listener *l, int fd) {
    static const char why[] = "too many connections (--max_connections)";
    unsigned char buf[9 + 9 + 8 + sizeof(why)];
    size_t n = 0, plen = 8 + sizeof(why) - 1;
    const unsigned char settings[9] = {0, 0, 0, 0x4, 0, 0, 0, 0, 0};
    memcpy(buf, settings, 9);
    n = 9;
    buf[n++] = (unsigned char)(plen >> 16);
    buf[n++] = (unsigned char)(plen >> 8);
    buf[n++] = (unsigned char)plen;
    buf[n++] = 0x7; /* GOAWAY */
    buf[n++] = 0;
    memset(buf + n, 0, 4); /* stream 0 */
    n += 4;
    memset(buf + n, 0, 4); /* last stream id 0 */
    n += 4;
    const unsigned char code[4] = {0, 0, 0, 0xb}; /* ENHANCE_YOUR_CALM */
    memcpy(buf + n, code, 4);
    n += 4;
    memcpy(buf + n, why, sizeof(why) - 1);
    n += sizeof(why) - 1;
    if (!l->tls) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
    }
    shutdown(fd, SHUT_WR);
    l->refused++;
    if (l->nlinger == LINGER_MAX) {
        close(l->linger[0].fd);
        memmove(l->linger, l->linger + 1, sizeof(lingering) * (LINGER_MAX - 1));
        l->nlinger--;
    }
    l->linger[l->nlinger++] = (lingering){fd, now_ms() + 1000};
    int64_t t = now_ms();
    if (t - l->last_refuse_ms >= 10000) {
        l->last_refuse_ms = t;
        MS_WARN("gRPC: %d connections open, the limit (--max_connections); refusing new ones with "
                "GOAWAY (%ld so far)", l->max_conn, l->refused);
    }
}

static void reap_lingering(srv_listener *l, int all) {
    int64_t t = now_ms();
    int k = 0;
    for (int i = 0; i < l->nlinger; i++) {
        if (all || l->linger[i].until_ms <= t)
            close(l->linger[i].fd);
        else
            l->linger[k++] = l->linger[i];
    }
    l->nlinger = k;
}

/* Connection churn leaves glibc's arenas holding free memory that is never
 * given back: after 30,000 preface-only connections malloc_stats() counted
 * 7.9 MB in the arenas and 0.96 MB of it in use (docs/reliability.md).
 * malloc_trim returns the free pages; it runs on this thread at most every
 * TRIM_EVERY_MS, and only after connections were accepted. */
static void trim_if_due(srv_listener *l) {
    int64_t t = now_ms();
    if (l->since_trim == 0 || t - l->last_trim_ms < TRIM_EVERY_MS) return;
    l->last_trim_ms = t;
    l->since_trim = 0;
    malloc_trim(0);
}

static void *accept_main(void *arg) {
    srv_listener *l = arg;
    l->last_trim_ms = now_ms();
    while (!atomic_load(&l->stop)) {
        struct pollfd p = {l->fd, POLLIN, 0};
        int pr = poll(&p, 1, l->nlinger > 0 ? 100 : 250);
        reap_lingering(l, 0);
        trim_if_due(l);
        if (pr <= 0) continue;
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ECONNABORTED) continue;
            /* Out of descriptors or memory: transient. The connection stays in
             * the backlog until one is free; never give up listening. */
            l->exhausted++;
            int64_t t = now_ms();
            if (t - l->last_warn_ms >= 10000) {
                l->last_warn_ms = t;
                MS_WARN("gRPC: accept failed: %s; retrying (raise the file-descriptor limit or "
                        "set --max_connections)", strerror(e));
            }
            struct timespec nap = {0, 50 * 1000 * 1000};
            nanosleep(&nap, NULL);
            continue;
        }
        int one = 1;
        l->since_trim++;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (l->max_conn > 0) {
            pthread_mutex_lock(&l->mu);
            int n = live_count_locked(l);
            pthread_mutex_unlock(&l->mu);
            if (n >= l->max_conn) {
                refuse(l, fd);
                continue;
            }
            track(l, fd);
        }
        l->adopt(l->arg, fd);
    }
    reap_lingering(l, 1);
    return NULL;
}

ms_status srv_listener_start(srv_listener *l, void (*adopt)(void *arg, int fd), void *arg) {
    l->adopt = adopt;
    l->arg = arg;
    if (pthread_create(&l->tid, NULL, accept_main, l) != 0)
        return ms_errf(MS_EINTERNAL, "cannot start the accept thread");
    l->started = 1;
    return MS_OK;
}

void srv_listener_stop(srv_listener *l) {
    if (l == NULL) return;
    atomic_store(&l->stop, 1);
    if (l->started) pthread_join(l->tid, NULL);
    l->started = 0;
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}

void srv_listener_free(srv_listener *l) {
    if (l == NULL) return;
    srv_listener_stop(l);
    pthread_mutex_destroy(&l->mu);
    free(l->conns);
    free(l);
}

/* ---- handing connections to gRPC's own chttp2 listener ------------------
 *
 * gRPC core routes a port named "external:<key>" to a chttp2 listener
 * without a socket of its own (what gRPC C++'s ExternalConnectionAcceptor
 * uses): at grpc_server_add_http2_port it writes a handler object into the
 * pointer channel argument of the same name, and each fd given to that
 * handler goes through the same path as a connection gRPC accepted itself:
 * the peer address, the handshakers (TLS with TLS credentials), the
 * handshake timeout, then the transport. Unlike grpc_server_add_channel_from_fd
 * it takes any credentials. The handler is the C++ class
 * grpc_core::TcpServerFdHandler (src/core/lib/iomgr/tcp_server.h):
 *
 *   virtual ~TcpServerFdHandler();   // vtable slots 0, 1 (Itanium C++ ABI)
 *   virtual void Handle(int listener_fd, int fd, grpc_byte_buffer *pending);  // slot 2
 *
 * which C calls through its vtable. gRPC owns the object (its TCP server
 * deletes it at shutdown). That layout is checked against gRPC core
 * 29 (gRPC 1.51, Debian 12) only; with any other gRPC, attach declines and
 * the caller falls back (grpc_server_add_channel_from_fd for plaintext, gRPC's
 * own listener for TLS). */

typedef void (*fd_handle_fn)(void *self, int listener_fd, int fd, void *pending);

static void *arg_copy(void *p) {
    return p;
}
static void arg_destroy(void *p) {
    (void)p;
}
static int arg_cmp(void *a, void *b) {
    return (a > b) - (a < b);
}
static const grpc_arg_pointer_vtable g_slot_vtable = {arg_copy, arg_destroy, arg_cmp};

int srv_listener_grpc_supported(void) {
    const char *v = grpc_version_string();
    return v != NULL && strncmp(v, "29.", 3) == 0;
}

void srv_listener_grpc_arg(srv_listener *l, grpc_arg *arg) {
    snprintf(l->grpc_key, sizeof(l->grpc_key), "external:dcmserve-%d", l->port);
    l->grpc_handler = NULL;
    arg->type = GRPC_ARG_POINTER;
    arg->key = l->grpc_key;
    arg->value.pointer.p = &l->grpc_handler;
    arg->value.pointer.vtable = &g_slot_vtable;
}

int srv_listener_grpc_attach(srv_listener *l, grpc_server *server,
                             grpc_server_credentials *creds) {
    if (!srv_listener_grpc_supported() || l->grpc_key[0] == '\0') return 0;
    (void)grpc_server_add_http2_port(server, l->grpc_key, creds); /* port 0 for external */
    return l->grpc_handler != NULL;
}

void srv_listener_grpc_adopt(void *arg, int fd) {
    srv_listener *l = arg;
    void **vtbl = *(void ***)l->grpc_handler;
    fd_handle_fn handle = (fd_handle_fn)vtbl[2];
    handle(l->grpc_handler, l->fd, fd, NULL);
}

