/* fuzz_rest_http.c - libFuzzer target: the REST server as a client sees it,
 * bytes on a TCP connection: request line, headers, chunked transfer
 * encoding, bodies, pipelined requests. The real REST listener
 * (server/http/srv_rest.c on libmicrohttpd, started once through
 * srv_rest_start on 127.0.0.1 and a free port) serves tests/data
 * half_plus_two as "hpt" (or $DCM_FUZZ_MODEL_BASE, fuzz_app.h), so bodies
 * reach :predict, :classify, KServe v2 /infer and the rest of the routes.
 *
 * Each input is one connection: its bytes are written, the write side is
 * shut (the server sees the end of the stream), the answer is read to the
 * server's close, and the socket is reset (no TIME_WAIT, so the ports do not
 * run out at thousands of connections a second). Only the public srv_rest
 * functions are used. A crash, leak or sanitizer report is a finding, and so
 * is an answer that does not end within 30 s (the process aborts); error
 * answers are expected. FUZZ_REST_HTTP_SHOW=1 prints each answer's status
 * line (to check that seeds reach the handlers).
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_rest_http CORPUS (from the repository root). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_app.h"
#include "srv_rest.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static srv_app g_app;
static int g_port;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN); /* the server may close before all is written */
    fuzz_app_start(&g_app, "fuzz_rest_http");
    srv_rest_opts o = {.port = 0,
                       .threads = 2,
                       .timeout_ms = 5000,
                       .bind_address = "127.0.0.1",
                       .call_timeout_ms = 5000};
    srv_rest *r = NULL;
    if (srv_rest_start(&g_app, &o, &r) != MS_OK) {
        fprintf(stderr, "fuzz_rest_http: cannot start the REST listener: %s\n", ms_errmsg());
        exit(1);
    }
    g_port = srv_rest_port(r);
    return 0; /* r lives for the whole run */
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes what the server takes and reads its answer until it closes, all
 * within 30 s (well past the server's 5 s call deadline and 5 s idle
 * timeout together); aborts past that (a stuck connection is a finding). The
 * write side is shut once the answer starts or 20 ms after the last byte
 * went out: a FIN that arrives with the request's last bytes is not seen by
 * the server until its idle timeout (libmicrohttpd's edge-triggered epoll),
 * which would make every input cost that timeout. */
static void exchange(int fd, const uint8_t *data, size_t size) {
    double end = now_s() + 30.0, sent_at = 0;
    size_t off = 0;
    int wr_open = 1, answered = 0;
    char buf[65536];
    for (;;) {
        double t = now_s(), left = end - t;
        if (left <= 0) {
            fprintf(stderr, "fuzz_rest_http: no end of the answer within 30 s\n");
            abort();
        }
        if (wr_open && off == size) {
            if (sent_at == 0) sent_at = t;
            if (answered || t - sent_at >= 0.02) {
                shutdown(fd, SHUT_WR);
                wr_open = 0;
            }
        }
        int wait_ms = (int)(left * 1000) + 1;
        if (wr_open && off == size) wait_ms = 5; /* until the 20 ms are up */
        struct pollfd p = {.fd = fd, .events = POLLIN | (wr_open && off < size ? POLLOUT : 0)};
        int n = poll(&p, 1, wait_ms);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        if (p.revents & POLLIN) {
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return; /* closed */
            if (r > 0 && !answered && getenv("FUZZ_REST_HTTP_SHOW"))
                fprintf(stderr, "answer: %.*s\n", (int)(memchr(buf, '\r', (size_t)r)
                                                         ? (char *)memchr(buf, '\r', (size_t)r) - buf
                                                         : r), buf);
            if (r > 0) answered = 1;
        } else if (p.revents & (POLLERR | POLLHUP)) {
            return;
        }
        if (wr_open && off < size && (p.revents & POLLOUT)) {
            ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                wr_open = 0; /* reset by the server: read what is left */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "fuzz_rest_http: connect: %s\n", strerror(errno));
        abort();
    }
    exchange(fd, data, size);
    struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* reset: no TIME_WAIT */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    return 0;
}
