/* srv_pbarena.h - a bump allocator for protobuf-c unpacking.
 *
 * protobuf-c allocates every sub-message, string, repeated array and bytes
 * field of an unpacked request separately (a small Predict is about a dozen
 * malloc/free pairs). Unpacked into an arena, a request takes its memory
 * from a caller's buffer (usually on the stack) and from heap chunks past
 * it, and is freed at once with srv_pbarena_release: free_unpacked is never
 * called on such a message. The arena holds at most what the request needs
 * (bounded by the message size the wire pre-scan allowed). */
#ifndef SRV_PBARENA_H
#define SRV_PBARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "rt_tensor.h"

typedef struct srv_pbchunk srv_pbchunk;

typedef struct srv_pbarena {
    ProtobufCAllocator alloc; /* pass &a->alloc to protobuf_c_message_unpack */
    unsigned char *buf;       /* the caller's buffer, then the current chunk */
    size_t used, cap;
    srv_pbchunk *chunks; /* heap chunks, freed by release */
} srv_pbarena;

/* Starts an arena on the caller's buffer (`cap` bytes; may be 0). */
void srv_pbarena_init(srv_pbarena *a, void *buf, size_t cap);
/* Frees the heap chunks; every message unpacked into the arena dies. */
void srv_pbarena_release(srv_pbarena *a);
/* Takes the bytes of vals[0..n) out of the arena without copying them, when
 * each non-empty one has a heap chunk of its own (a bytes field of 16 KiB or
 * more, e.g. a DICOM file): the returned buffer owns those chunks and frees
 * them when its last reference drops; the arena no longer does. NULL (the
 * arena unchanged) when any is not such a chunk, or out of memory. Fits
 * rt_strkeep (rt_tensor_proto.h) with the arena as its argument. */
rt_buf *srv_pbarena_keep(void *arena, const ProtobufCBinaryData *vals, size_t n);

#endif /* SRV_PBARENA_H */
