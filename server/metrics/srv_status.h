/* srv_status.h - the one table from ms_status to gRPC status codes. */
#ifndef SRV_STATUS_H
#define SRV_STATUS_H

#include <grpc/status.h>

#include "ms_status.h"

/* gRPC code for an ms_status (GRPC_STATUS_UNKNOWN for values out of range). */
grpc_status_code srv_status_to_grpc(ms_status s);

/* Short upper-case gRPC name ("INVALID_ARGUMENT") of a gRPC code. Never NULL. */
const char *srv_grpc_code_name(grpc_status_code c);

#endif /* SRV_STATUS_H */
