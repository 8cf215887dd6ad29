/* dcmserve_bench_rest.c - dcmserve-bench --api=rest: HTTP/1.1 keep-alive POSTs
 * of one pre-built JSON body (TF Serving :predict by default, any path with
 * --rest_path, e.g. a KServe v2 /infer), closed loop: --concurrency
 * connections, each on its own thread, each sending the next request when
 * the answer is in. Reports calls/s and p50/p90/p99/p99.9/max like the gRPC
 * modes (--json for one line); a call counts as OK on HTTP 200.
 *
 * The client is a plain socket loop, no HTTP library: it writes one fixed
 * request and reads status line, headers and a Content-Length body. */
#include "dcmserve_bench_rest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct worker {
    const bench_rest_opts *o;
    const char *req;
    size_t req_len;
    struct sockaddr_in addr;
    int64_t t_measure, t_end;
    uint32_t *lat_us;
    size_t n, cap;
    uint64_t ok, bad, io_errors, warm;
    int first_code;
    pthread_t tid;
} worker;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int connect_to(const struct sockaddr_in *a) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request/answer on fd; the HTTP status, or -1 on an I/O error. */
static int round_trip(int fd, const char *req, size_t len, char *buf, size_t cap) {
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    size_t have = 0;
    char *end = NULL;
    while (end == NULL) {
        if (have + 1 >= cap) return -1;
        ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
        if (r <= 0) return -1;
        have += (size_t)r;
        buf[have] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    int code = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) return -1;
    size_t body = 0;
    for (char *h = buf; h && h < end; h = strstr(h, "\r\n")) {
        h += 2;
        if (strncasecmp(h, "Content-Length:", 15) == 0) body = strtoull(h + 15, NULL, 10);
    }
    size_t got = have - (size_t)(end + 4 - buf);
    while (got < body) {
        ssize_t r = recv(fd, buf, cap, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return code;
}

static void *work(void *arg) {
    worker *w = arg;
    char *buf = malloc(1 << 20);
    int fd = -1;
    if (buf == NULL) return NULL;
    for (;;) {
        int64_t t0 = now_ns();
        if (t0 >= w->t_end) break;
        if (fd < 0 && (fd = connect_to(&w->addr)) < 0) {
            w->io_errors++;
            usleep(1000);
            continue;
        }
        int code = round_trip(fd, w->req, w->req_len, buf, 1 << 20);
        int64_t t1 = now_ns();
        if (code < 0) {
            close(fd);
            fd = -1;
            w->io_errors++;
            continue;
        }
        if (t0 < w->t_measure) {
            w->warm++;
            continue;
        }
        if (code == 200) {
            w->ok++;
        } else {
            w->bad++;
            if (!w->first_code) w->first_code = code;
        }
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 1 << 14;
            uint32_t *nl = realloc(w->lat_us, nc * sizeof *nl);
            if (nl == NULL) break;
            w->lat_us = nl;
            w->cap = nc;
        }
        int64_t us = (t1 - t0) / 1000;
        w->lat_us[w->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double p) {
    if (n == 0) return 0;
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* The JSON body: the file, or {"instances": [v0, v1, ...]} from --values. */
static char *build_body(const bench_rest_opts *o, size_t *n) {
    if (o->body_file) {
        FILE *f = fopen(o->body_file, "rb");
        if (f == NULL) return NULL;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
            free(b);
            b = NULL;
        }
        fclose(f);
        if (b) b[len] = 0;
        *n = b ? (size_t)len : 0;
        return b;
    }
    if (o->values == NULL) return NULL;
    size_t cap = strlen(o->values) + 32;
    char *b = malloc(cap);
    if (b == NULL) return NULL;
    *n = (size_t)snprintf(b, cap, "{\"instances\": [%s]}", o->values);
    return b;
}

int bench_rest_main(const bench_rest_opts *o) {
    size_t blen = 0;
    char *body = build_body(o, &blen);
    if (body == NULL) {
        fprintf(stderr, "dcmserve-bench: --api=rest needs --body=FILE or --values=a,b,...\n");
        return 2;
    }
    char host[64];
    int port = 0;
    if (sscanf(o->target, "%63[^:]:%d", host, &port) != 2) {
        fprintf(stderr, "dcmserve-bench: --target must be IPV4:PORT, got '%s'\n", o->target);
        free(body);
        return 2;
    }
    char path[512];
    if (o->path)
        snprintf(path, sizeof path, "%s", o->path);
    else
        snprintf(path, sizeof path, "/v1/models/%s:predict", o->model);
    size_t rcap = blen + 1024;
    char *req = malloc(rcap);
    if (req == NULL) {
        free(body);
        return 2;
    }
    int hl = snprintf(req, rcap,
                      "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, host, port, blen);
    memcpy(req + hl, body, blen);
    size_t req_len = (size_t)hl + blen;

    int nw = o->concurrency;
    worker *ws = calloc((size_t)nw, sizeof *ws);
    if (ws == NULL) return 2;
    int64_t t0 = now_ns();
    int64_t t_measure = t0 + (int64_t)(o->warmup_s * 1e9), t_end = t_measure + (int64_t)(o->duration_s * 1e9);
    for (int i = 0; i < nw; i++) {
        ws[i].o = o;
        ws[i].req = req;
        ws[i].req_len = req_len;
        ws[i].addr.sin_family = AF_INET;
        ws[i].addr.sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, host, &ws[i].addr.sin_addr);
        ws[i].t_measure = t_measure;
        ws[i].t_end = t_end;
        pthread_create(&ws[i].tid, NULL, work, &ws[i]);
    }
    size_t n = 0;
    uint64_t ok = 0, bad = 0, io = 0;
    int first_code = 0;
    for (int i = 0; i < nw; i++) {
        pthread_join(ws[i].tid, NULL);
        n += ws[i].n;
        ok += ws[i].ok;
        bad += ws[i].bad;
        io += ws[i].io_errors;
        if (!first_code) first_code = ws[i].first_code;
    }
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; all && i < nw; i++) {
        memcpy(all + k, ws[i].lat_us, ws[i].n * sizeof *all);
        k += ws[i].n;
        free(ws[i].lat_us);
    }
    if (all) qsort(all, n, sizeof *all, cmp_u32);
    double secs = o->duration_s;
    if (all == NULL) n = 0;
    if (o->json)
        printf("{\"label\": \"%s\", \"api\": \"rest\", \"model\": \"%s\", \"path\": \"%s\", "
               "\"mode\": \"concurrency\", \"concurrency\": %d, \"duration_s\": %.2f, "
               "\"request_bytes\": %zu, \"calls\": %zu, \"ok\": %" PRIu64 ", \"calls_per_s\": %.1f, "
               "\"p50_us\": %.0f, \"p90_us\": %.0f, \"p99_us\": %.0f, \"p999_us\": %.0f, "
               "\"max_us\": %.0f, \"http_errors\": %" PRIu64 ", \"io_errors\": %" PRIu64 "}\n",
               o->label ? o->label : "", o->model, path, nw, secs, blen, n, ok, (double)n / secs,
               pct(all, n, 50), pct(all, n, 90), pct(all, n, 99), pct(all, n, 99.9),
               n ? (double)all[n - 1] : 0.0, bad, io);
    else {
        printf("concurrency rest %s %s, %zu-byte bodies: %zu calls in %.1f s = %.1f calls/s (%" PRIu64
               " OK)\n", o->model, path, blen, n, secs, (double)n / secs, ok);
        printf("latency us: p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f\n", pct(all, n, 50),
               pct(all, n, 90), pct(all, n, 99), pct(all, n, 99.9), n ? (double)all[n - 1] : 0.0);
        if (bad) printf("errors HTTP (first: %d): %" PRIu64 "\n", first_code, bad);
        if (io) printf("errors I/O: %" PRIu64 "\n", io);
    }
    free(all);
    free(ws);
    free(req);
    free(body);
    return n > 0 && ok == n ? 0 : 1;
}
