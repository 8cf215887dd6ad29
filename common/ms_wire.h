/* ms_wire.h - a schema-free pre-scan of protobuf wire format, run on bytes
 * from outside before protobuf-c unpacks them (protobuf-c recurses without a
 * depth limit, so deeply nested input can exhaust the stack).
 */
#ifndef MS_WIRE_H
#define MS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

#define MS_WIRE_MAX_DEPTH 100 /* protobuf's own default recursion limit */
/* Fields one request message may hold, counted at every level the pre-scan
 * descends into: protobuf-c turns each into a record (and each map entry or
 * sub-message into a struct of its own), 100 bytes and more per 2-byte field,
 * so a 256 MiB message of empty fields would become tens of GB. Packed
 * numbers count once; tensor_content once. */
#define MS_WIRE_MAX_FIELDS ((uint64_t)1 << 18)

/* Checks that `buf[0..n)` is well-formed wire format whose nesting (every
 * length-delimited field that itself parses as a message counts as one level,
 * so the bound is conservative) stays within `max_depth`. MS_OK, or MS_EINVAL
 * with a message naming the offset and what was expected. Iterative: uses no
 * stack proportional to the input. */
ms_status ms_wire_check(const uint8_t *buf, size_t n, int max_depth);

/* The check for a message from a client: nesting within MS_WIRE_MAX_DEPTH
 * and at most MS_WIRE_MAX_FIELDS fields (more: MS_ENOMEM, RESOURCE_EXHAUSTED
 * on the wire, naming the limit). */
ms_status ms_wire_check_request(const uint8_t *buf, size_t n);

/* Protobuf merges a non-repeated message field that appears more than once
 * (the payloads are concatenated); protobuf-c 1.4 fails to unpack when such a
 * message holds a oneof that neither copy sets (TF Serving's ModelSpec). When
 * top-level length-delimited `field` appears more than once in buf (already
 * pre-scanned), *out is a new buffer (free()) with one occurrence holding the
 * concatenated payloads, followed by the other fields; otherwise *out is NULL. */
ms_status ms_wire_merge_field(const uint8_t *buf, size_t n, uint32_t field, uint8_t **out,
                              size_t *out_len);

#endif
