/* rt_coding.h - byte-level helpers shared by the on-disk formats (SSTable,
 * tensor bundle, TFRecord): a growable byte buffer, LevelDB-style varints and
 * little-endian fixed-width integers.
 *
 * Ownership: an rt_bytes owns its `data` (malloc'ed), released with
 * rt_bytes_free or handed over with rt_bytes_take. The buffer is sticky on
 * failure: after an allocation fails every further append is a no-op and
 * rt_bytes_ok() returns 0, so writers check once at the end.
 */
#ifndef RT_CODING_H
#define RT_CODING_H

#include <stddef.h>
#include <stdint.h>

typedef struct rt_bytes {
    uint8_t *data;
    size_t len;
    size_t cap;
    int failed; /* an allocation failed */
} rt_bytes;

#define RT_BYTES_INIT                                                                              \
    { NULL, 0, 0, 0 }

/* Makes room for `extra` more bytes; returns 0 on success, -1 on OOM. */
int rt_bytes_reserve(rt_bytes *b, size_t extra);
void rt_bytes_append(rt_bytes *b, const void *p, size_t n);
void rt_bytes_put_u8(rt_bytes *b, uint8_t v);
void rt_bytes_put_fixed32(rt_bytes *b, uint32_t v);
void rt_bytes_put_fixed64(rt_bytes *b, uint64_t v);
void rt_bytes_put_varint32(rt_bytes *b, uint32_t v);
void rt_bytes_put_varint64(rt_bytes *b, uint64_t v);
static inline int rt_bytes_ok(const rt_bytes *b) {
    return !b->failed;
}
/* Hands the data to the caller (who frees it) and resets b. */
uint8_t *rt_bytes_take(rt_bytes *b, size_t *len);
void rt_bytes_free(rt_bytes *b);

/* Encodes v as a varint into p (room for 10 bytes); returns bytes written. */
size_t rt_varint64_encode(uint8_t *p, uint64_t v);
/* Decodes a varint from p[0..n): returns the bytes consumed, or 0 when it is
 * truncated, longer than 10 bytes (5 for varint32) or overflows. */
size_t rt_varint64_decode(const uint8_t *p, size_t n, uint64_t *v);
size_t rt_varint32_decode(const uint8_t *p, size_t n, uint32_t *v);

static inline uint32_t rt_load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rt_load_le64(const uint8_t *p) {
    return (uint64_t)rt_load_le32(p) | (uint64_t)rt_load_le32(p + 4) << 32;
}
static inline void rt_store_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

#endif /* RT_CODING_H */
