/* srv_inflate.h - bounded inflation of compressed gRPC messages.
 *
 * gRPC core 1.51 inflates a compressed message (grpc-encoding gzip or
 * deflate) in full before it compares the inflated size with
 * GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH: a 1 MB gzip of zeros costs 1 GiB before
 * it is refused. The server turns gRPC's decompression off
 * (grpc.per_message_decompression = 0) and inflates here, stopping at the
 * --max_message_bytes limit. */
#ifndef SRV_INFLATE_H
#define SRV_INFLATE_H

#include <grpc/byte_buffer.h>
#include <grpc/slice.h>
#include <stdint.h>

#include "ms_status.h"

/* When `bb` arrived compressed, replaces *flat (its bytes, as read) with the
 * inflated message; otherwise leaves it. MS_ENOMEM (RESOURCE_EXHAUSTED)
 * "Received message larger than max" when the message inflates past `max`
 * bytes (nothing beyond max + 64 KiB is allocated), MS_EINVAL when it does not
 * inflate, MS_ENOTSUP for an algorithm other than gzip / deflate. */
ms_status srv_inflate_message(const grpc_byte_buffer *bb, grpc_slice *flat, int64_t max);

#endif /* SRV_INFLATE_H */
