/* cli_health.c - `dcmserve health [--port N] [--host H] [--service S]
 * [--timeout_ms T]`: one grpc.health.v1.Health/Check call through the gRPC
 * core client API. Prints the status and exits 0 when it is SERVING, 1 for
 * any other status or a failed call, 2 for bad flags. The container image's
 * HEALTHCHECK uses it (Debian ships no grpc_health_probe). */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_flags.h"
#include "health.pb-c.h"
#include "srv_status.h"

/* Parses a whole decimal number in [lo, hi]; returns 0 or -1. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static const char *status_name(int s) {
    switch (s) {
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING: return "SERVING";
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING:
        return "NOT_SERVING";
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN:
        return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
    }
}

/* One unary call; on success *reply (malloc'd) holds the response bytes.
 * Returns the gRPC status code, or -1 when the call could not be made;
 * details (malloc'd) gets the status message. */
static int unary(const char *target, const char *method, const uint8_t *req, size_t len,
                 long timeout_ms, uint8_t **reply, size_t *reply_len, char **details_out) {
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice m = grpc_slice_from_copied_string(method);
    gpr_timespec dl =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_call *call =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, dl, NULL);
    grpc_slice payload = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&payload, 1);
    grpc_byte_buffer *resp = NULL;
    grpc_metadata_array imd, tmd;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    int rc = -1;

    *reply = NULL;
    *reply_len = 0;
    *details_out = NULL;
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
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) == GRPC_CALL_OK) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            rc = (int)status;
            char *s = grpc_slice_to_c_string(details);
            *details_out = strdup(s);
            gpr_free(s);
            if (resp) {
                grpc_byte_buffer_reader rd;
                grpc_byte_buffer_reader_init(&rd, resp);
                grpc_slice flat = grpc_byte_buffer_reader_readall(&rd);
                grpc_byte_buffer_reader_destroy(&rd);
                *reply_len = GRPC_SLICE_LENGTH(flat);
                *reply = malloc(*reply_len ? *reply_len : 1);
                if (*reply) memcpy(*reply, GRPC_SLICE_START_PTR(flat), *reply_len);
                grpc_slice_unref(flat);
            }
        }
    }
    if (resp) grpc_byte_buffer_destroy(resp);
    grpc_slice_unref(details);
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
    grpc_channel_destroy(ch);
    return rc;
}

int cli_health(int argc, char **argv) {
    const char *port_s = "8500", *host = "127.0.0.1", *service = "", *timeout_s = "5000";
    int help = 0;
    cli_flag flags[] = {
        {"port", CLI_FLAG_STR, &port_s, NULL},
        {"host", CLI_FLAG_STR, &host, NULL},
        {"service", CLI_FLAG_STR, &service, NULL},
        {"timeout_ms", CLI_FLAG_STR, &timeout_s, NULL},
        {"help", CLI_FLAG_BOOL, NULL, &help},
        {NULL, CLI_FLAG_STR, NULL, NULL},
    };
    long port = 0, timeout_ms = 0;
    if (cli_flags_parse("health", argc, argv, flags) != 0) return 2;
    if (help) {
        printf("usage: dcmserve health [--port=8500] [--host=127.0.0.1] [--service=NAME] "
               "[--timeout_ms=5000]\n"
               "  calls grpc.health.v1.Health/Check; exit 0 when SERVING, 1 otherwise.\n"
               "  --service: \"\" or readiness (every model AVAILABLE, not draining), liveness\n"
               "  (the process works), a model name, or a gRPC service name (docs/serving.md)\n");
        return 0;
    }
    if (parse_int(port_s, 1, 65535, &port) != 0) {
        fprintf(stderr, "dcmserve health: --port must be 1..65535, got '%s'\n", port_s);
        return 2;
    }
    if (parse_int(timeout_s, 1, 600000, &timeout_ms) != 0) {
        fprintf(stderr, "dcmserve health: --timeout_ms must be 1..600000, got '%s'\n", timeout_s);
        return 2;
    }

    char target[512];
    if (strchr(host, ':') && host[0] != '[')
        snprintf(target, sizeof(target), "[%s]:%ld", host, port); /* IPv6 literal */
    else
        snprintf(target, sizeof(target), "%s:%ld", host, port);

    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = (char *)service;
    size_t len = grpc__health__v1__health_check_request__get_packed_size(&req);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL) return 1;
    grpc__health__v1__health_check_request__pack(&req, buf);

    grpc_init();
    uint8_t *reply = NULL;
    size_t reply_len = 0;
    char *details = NULL;
    int code = unary(target, "/grpc.health.v1.Health/Check", buf, len, timeout_ms, &reply,
                     &reply_len, &details);
    grpc_shutdown();
    free(buf);

    int rc = 1;
    if (code < 0) {
        fprintf(stderr, "dcmserve health: %s: the call could not be made\n", target);
    } else if (code != GRPC_STATUS_OK) {
        fprintf(stderr, "dcmserve health: %s: %s (gRPC status %d): %s\n", target,
                srv_grpc_code_name((grpc_status_code)code), code, details ? details : "");
    } else {
        Grpc__Health__V1__HealthCheckResponse *r =
            grpc__health__v1__health_check_response__unpack(NULL, reply_len, reply);
        if (r == NULL) {
            fprintf(stderr, "dcmserve health: %s: the reply is not a HealthCheckResponse\n",
                    target);
        } else {
            printf("%s\n", status_name(r->status));
            rc = r->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                     ? 0
                     : 1;
            grpc__health__v1__health_check_response__free_unpacked(r, NULL);
        }
    }
    free(reply);
    free(details);
    return rc;
}
