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

/* Checks that `buf[0..n)` is well-formed wire format whose nesting (every
 * length-delimited field that itself parses as a message counts as one level,
 * so the bound is conservative) stays within `max_depth`. MS_OK, or MS_EINVAL
 * with a message naming the offset and what was expected. Iterative: uses no
 * stack proportional to the input. */
ms_status ms_wire_check(const uint8_t *buf, size_t n, int max_depth);

#endif
