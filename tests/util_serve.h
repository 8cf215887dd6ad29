/* util_serve.h - helpers for the serve tests: start the real dcmserve on a
 * free 127.0.0.1 port, and unary calls on the gRPC core API. */
#ifndef UTIL_SERVE_H
#define UTIL_SERVE_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ut_daemon {
    pid_t pid;
    int port;
    char target[64]; /* "ipv4:127.0.0.1:<port>" */
    char log[4096];  /* path of its stderr log */
} ut_daemon;

/* How long a test waits for a daemon to say where it listens, and then to
 * become SERVING, before it fails (printing the tail of the daemon's log). A
 * limit for a stuck daemon, not an expectation: a loaded 2-core machine (ctest
 * -j2 beside busy loops, sanitizers) can take tens of seconds for a start of
 * 1 s, and the waits end as soon as the daemon is there. Below the test cases'
 * 120 s Check timeout, so that a failure still prints the log. */
#define UT_START_TIMEOUT_S 90
#define UT_LOG_TAIL_LINES 20

/* Starts $DCM_BIN/dcmserve serve --port=0 --bind_address=127.0.0.1 plus the
 * NULL-terminated extra args; reads the port from its stdout. 0 on success;
 * on failure (no "listening on" line within UT_START_TIMEOUT_S) the daemon is
 * killed, the tail of its log printed to stderr, and -1 returned. */
int ut_daemon_start(ut_daemon *d, const char *const *args);
/* Sends sig, waits up to timeout_s; returns the exit status (-1 on timeout,
 * after which the process is killed). */
int ut_daemon_stop(ut_daemon *d, int sig, double timeout_s);
/* Non-zero when the daemon has exited (reaped; *status, when not NULL, gets
 * its exit code, or 128 + signal). */
int ut_daemon_exited(ut_daemon *d, int *status);
/* Prints the last `lines` lines (at most 256) of the daemon's log (its
 * stderr) to stderr. */
void ut_daemon_log_tail(const ut_daemon *d, int lines);
/* Non-zero when the daemon's log contains `needle`. */
int ut_daemon_log_has(const ut_daemon *d, const char *needle);

typedef struct ut_reply {
    grpc_status_code status;
    char *details; /* malloc'ed */
    uint8_t *data; /* malloc'ed response bytes (NULL when none) */
    size_t len;
} ut_reply;

/* One unary call: method path, request bytes, deadline in ms. */
int ut_call(grpc_channel *ch, const char *method, const uint8_t *req, size_t len, int deadline_ms,
            ut_reply *out);
void ut_reply_free(ut_reply *r);

/* Channel to target with unlimited receive size. */
grpc_channel *ut_channel(const char *target);

/* "$DCM_SRC/tests/data/savedmodels/<rel>" into buf; returns buf. */
char *ut_savedmodel_path(char *buf, size_t cap, const char *rel);
/* A fresh empty directory under $TMPDIR or /tmp; returns buf (NULL on error). */
char *ut_tmpdir(char *buf, size_t cap);

#endif /* UTIL_SERVE_H */
