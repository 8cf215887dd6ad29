/* srv_status.c - ms_status -> gRPC status mapping (docs/architecture.md, Errors). */
#include "srv_status.h"

static const grpc_status_code table[MS_STATUS_COUNT] = {
    /* clang-format off */
    [MS_OK]        = GRPC_STATUS_OK,
    [MS_EINVAL]    = GRPC_STATUS_INVALID_ARGUMENT,
    [MS_ENOTFOUND] = GRPC_STATUS_NOT_FOUND,
    [MS_EPRECOND]  = GRPC_STATUS_FAILED_PRECONDITION,
    [MS_ENOMEM]    = GRPC_STATUS_RESOURCE_EXHAUSTED,
    [MS_EBUSY]     = GRPC_STATUS_UNAVAILABLE,
    [MS_ETIMEDOUT] = GRPC_STATUS_DEADLINE_EXCEEDED,
    [MS_ECANCELED] = GRPC_STATUS_CANCELLED,
    [MS_EDEVICE]   = GRPC_STATUS_INTERNAL,
    [MS_ENOTSUP]   = GRPC_STATUS_UNIMPLEMENTED,
    [MS_ESHUTDOWN] = GRPC_STATUS_UNAVAILABLE,
    [MS_EDATALOSS] = GRPC_STATUS_DATA_LOSS,
    [MS_EINTERNAL] = GRPC_STATUS_INTERNAL,
    [MS_EPERM]     = GRPC_STATUS_PERMISSION_DENIED,
    /* clang-format on */
};

grpc_status_code srv_status_to_grpc(ms_status s) {
    if ((unsigned)s >= MS_STATUS_COUNT) return GRPC_STATUS_UNKNOWN;
    return table[s];
}

const char *srv_grpc_code_name(grpc_status_code c) {
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if ((unsigned)c >= sizeof(names) / sizeof(names[0])) return "UNKNOWN";
    return names[c];
}
