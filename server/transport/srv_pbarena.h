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

/* Gives a buffer of at least `size` bytes (NULL: none), e.g. from a pool
 * that keeps it for the next request. */
typedef rt_buf *(*srv_pbregion_fn)(void *ctx, size_t size);

typedef struct srv_pbarena {
    ProtobufCAllocator alloc; /* pass &a->alloc to protobuf_c_message_unpack */
    unsigned char *buf;       /* the caller's buffer, then the current chunk */
    size_t used, cap;
    srv_pbchunk *chunks; /* heap chunks, freed by release */
    srv_pbregion_fn region_fn; /* srv_pbarena_set_region */
    void *region_ctx;
    size_t region_size;
    rt_buf *region; /* taken at the first large value; NULL: none yet */
    size_t region_used;
} srv_pbarena;

/* Starts an arena on the caller's buffer (`cap` bytes; may be 0). */
void srv_pbarena_init(srv_pbarena *a, void *buf, size_t cap);
/* Large values (16 KiB or more: a DICOM file's bytes) go, in order, into one
 * buffer of `size` bytes that fn(ctx, size) gives at the first of them,
 * instead of a heap chunk each; past its end, into chunks again. With a
 * pool behind fn, a whole series' files land in memory the previous
 * request's files used, not in heap pages faulted in anew (glibc hands a
 * freed heap top above its trim threshold back at once). `size`: the
 * message's length and a little more (the values of a message never exceed
 * it, plus 16 bytes of alignment each). */
void srv_pbarena_set_region(srv_pbarena *a, srv_pbregion_fn fn, void *ctx, size_t size);
/* Frees the heap chunks and drops the region; every message unpacked into
 * the arena dies. */
void srv_pbarena_release(srv_pbarena *a);
/* Takes the bytes of vals[0..n) out of the arena without copying them, when
 * each non-empty one has a heap chunk of its own (a bytes field of 16 KiB or
 * more, e.g. a DICOM file): the returned buffer owns those chunks and frees
 * them when its last reference drops; the arena no longer does. When every
 * non-empty one lies in the region, the buffer holds a reference to the
 * region instead (it outlives the arena's). NULL (the
 * arena unchanged) when any is not such a chunk, or out of memory. Fits
 * rt_strkeep (rt_tensor_proto.h) with the arena as its argument. */
rt_buf *srv_pbarena_keep(void *arena, const ProtobufCBinaryData *vals, size_t n);

#endif /* SRV_PBARENA_H */
