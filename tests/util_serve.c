/* util_serve.c - start/stop the real daemon and make core-API unary calls. */
#include "util_serve.h"
#include "util_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *ut_savedmodel_path(char *buf, size_t cap, const char *rel) {
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "savedmodels/%s", rel);
    return ut_data_path(tmp, buf, cap);
}

char *ut_tmpdir(char *buf, size_t cap) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/dcm_ut_XXXXXX", t ? t : "/tmp");
    return mkdtemp(buf);
}

int ut_daemon_start(ut_daemon *d, const char *const *args) {
    const char *bin = getenv("DCM_BIN");
    char exe[4096];
    int pfd[2];
    const char *argv[64];
    int n = 0;

    memset(d, 0, sizeof(*d));
    snprintf(exe, sizeof(exe), "%s/dcmserve", bin ? bin : ".");
    snprintf(d->log, sizeof(d->log), "/tmp/ut_dcmserve_%d_%ld.log", (int)getpid(),
             (long)time(NULL) ^ (long)random());
    argv[n++] = exe;
    argv[n++] = "serve";
    argv[n++] = "--port=0";
    argv[n++] = "--bind_address=127.0.0.1";
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (pipe(pfd) != 0) return -1;
    d->pid = fork();
    if (d->pid < 0) return -1;
    if (d->pid == 0) {
        int lf = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(pfd[1], 1);
        if (lf >= 0) dup2(lf, 2);
        close(pfd[0]);
        execv(exe, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    /* The first stdout line says where it listens; it must come within
     * UT_START_TIMEOUT_S, else the daemon is killed. */
    char line[256];
    size_t len = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = UT_START_TIMEOUT_S - (double)(now.tv_sec - t0.tv_sec) -
                      (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        struct pollfd p = {pfd[0], POLLIN, 0};
        int r = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "dcmserve printed no \"listening on\" line within %d s\n",
                    UT_START_TIMEOUT_S);
            break;
        }
        ssize_t got = read(pfd[0], line + len, 1);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            fprintf(stderr, "dcmserve closed its stdout before saying where it listens\n");
            break;
        }
        if (line[len] == '\n' || ++len == sizeof(line) - 1) break;
    }
    line[len] = '\0';
    close(pfd[0]);
    char *colon = strrchr(line, ':');
    if (strstr(line, "listening on") && colon) {
        d->port = atoi(colon + 1);
        snprintf(d->target, sizeof(d->target), "ipv4:127.0.0.1:%d", d->port);
        return 0;
    }
    ut_daemon_stop(d, SIGKILL, 5);
    ut_daemon_log_tail(d, UT_LOG_TAIL_LINES);
    unlink(d->log);
    return -1;
}

int ut_daemon_stop(ut_daemon *d, int sig, double timeout_s) {
    int status = 0;
    if (d->pid <= 0) return -1;
    kill(d->pid, sig);
    for (double t = 0; t < timeout_s; t += 0.01) {
        pid_t r = waitpid(d->pid, &status, WNOHANG);
        if (r == d->pid) {
            d->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &status, 0);
    d->pid = 0;
    return -1;
}

int ut_daemon_exited(ut_daemon *d, int *status) {
    int st = 0;
    if (d->pid <= 0) return 1;
    if (waitpid(d->pid, &st, WNOHANG) != d->pid) return 0;
    d->pid = 0;
    if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return 1;
}

void ut_daemon_log_tail(const ut_daemon *d, int lines) {
    FILE *f = fopen(d->log, "r");
    if (f == NULL) {
        fprintf(stderr, "(no daemon log at %s)\n", d->log);
        return;
    }
    /* Offsets of the starts of the last `lines` lines, in a ring. */
    long starts[256];
    int cap = lines < 1 ? 1 : lines > 256 ? 256 : lines, n = 0, c, at_start = 1;
    long pos = 0;
    while ((c = fgetc(f)) != EOF) {
        if (at_start) starts[n++ % cap] = pos;
        at_start = c == '\n';
        pos++;
    }
    fprintf(stderr, "--- last %d lines of the daemon's log ---\n", n < cap ? n : cap);
    if (n > 0) {
        fseek(f, starts[n <= cap ? 0 : n % cap], SEEK_SET);
        while ((c = fgetc(f)) != EOF) fputc(c, stderr);
        if (!at_start) fputc('\n', stderr);
    }
    fprintf(stderr, "--- end of the daemon's log ---\n");
    fclose(f);
}

int ut_daemon_log_has(const ut_daemon *d, const char *needle) {
    FILE *f = fopen(d->log, "r");
    char line[4096];
    int found = 0;
    if (f == NULL) return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

grpc_channel *ut_channel(const char *target) {
    grpc_arg arg;
    memset(&arg, 0, sizeof(arg));
    arg.type = GRPC_ARG_INTEGER;
    arg.key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    arg.value.integer = -1;
    grpc_channel_args cargs = {1, &arg};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, &cargs);
    grpc_channel_credentials_release(creds);
    return ch;
}

int ut_call(grpc_channel *ch, const char *method, const uint8_t *req, size_t len, int deadline_ms,
            ut_reply *out) {
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice m = grpc_slice_from_copied_string(method);
    gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(deadline_ms, GPR_TIMESPAN));
    grpc_call *call =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, dl, NULL);
    grpc_slice payload = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&payload, 1);
    grpc_byte_buffer *resp = NULL;
    grpc_metadata_array imd, tmd;
    grpc_slice details;
    grpc_op ops[6];

    memset(out, 0, sizeof(*out));
    grpc_metadata_array_init(&imd);
    grpc_metadata_array_init(&tmd);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &imd;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &resp;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &tmd;
    ops[5].data.recv_status_on_client.status = &out->status;
    ops[5].data.recv_status_on_client.status_details = &details;
    int rc = grpc_call_start_batch(call, ops, 6, (void *)1, NULL) == GRPC_CALL_OK ? 0 : -1;
    if (rc == 0) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        rc = ev.type == GRPC_OP_COMPLETE ? 0 : -1;
        char *s = grpc_slice_to_c_string(details);
        out->details = strdup(s);
        gpr_free(s);
        grpc_slice_unref(details);
        if (resp) {
            grpc_byte_buffer_reader rd;
            grpc_byte_buffer_reader_init(&rd, resp);
            grpc_slice flat = grpc_byte_buffer_reader_readall(&rd);
            grpc_byte_buffer_reader_destroy(&rd);
            out->len = GRPC_SLICE_LENGTH(flat);
            out->data = malloc(out->len + 1);
            memcpy(out->data, GRPC_SLICE_START_PTR(flat), out->len);
            grpc_slice_unref(flat);
            grpc_byte_buffer_destroy(resp);
        }
    }
    grpc_byte_buffer_destroy(bb);
    grpc_slice_unref(payload);
    grpc_slice_unref(m);
    grpc_metadata_array_destroy(&imd);
    grpc_metadata_array_destroy(&tmd);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    return rc;
}

void ut_reply_free(ut_reply *r) {
    free(r->details);
    free(r->data);
    memset(r, 0, sizeof(*r));
}
