/* rt_snappy.h - Snappy raw-format decompressor and a simple compressor.
 *
 * The raw format (no framing): a varint32 uncompressed length, then elements
 * whose tag byte's low two bits select a literal (00), a copy with an 11-bit
 * offset (01), a 16-bit offset (10) or a 32-bit offset (11). LevelDB tables
 * (and so TensorFlow bundle indexes) store Snappy-compressed blocks this way.
 *
 * The decompressor treats its input as hostile: every length, offset and the
 * declared size are checked; bad input gives MS_EDATALOSS, never an overrun.
 * The compressor is a greedy hash matcher over 64 KiB fragments; its output
 * is valid Snappy that any decompressor accepts.
 */
#ifndef RT_SNAPPY_H
#define RT_SNAPPY_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

/* Reads the declared uncompressed length from the preamble of src[0..n). */
ms_status rt_snappy_uncompressed_length(const uint8_t *src, size_t n, size_t *out);

/* Decompresses src[0..n) into dst, which has room for dst_cap bytes.
 * MS_EDATALOSS if the input is malformed (truncated element, copy offset 0
 * or before the start of the output, output longer or shorter than the
 * declared length), or if the declared length exceeds dst_cap. On success
 * *out_len (may be NULL) is the declared length. */
ms_status rt_snappy_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap,
                               size_t *out_len);

/* Same, allocating the output: *out is malloc'ed (caller frees), *out_len its
 * length. Refuses declared lengths above max_len (MS_EDATALOSS) so that a
 * hostile preamble cannot make it allocate gigabytes. */
ms_status rt_snappy_decompress_alloc(const uint8_t *src, size_t n, size_t max_len, uint8_t **out,
                                     size_t *out_len);

/* Upper bound of the compressed size of n input bytes. */
size_t rt_snappy_max_compressed_length(size_t n);

/* Compresses src[0..n) into dst (room for rt_snappy_max_compressed_length(n)
 * bytes); returns the compressed length. n must be below 2^32. */
size_t rt_snappy_compress(const uint8_t *src, size_t n, uint8_t *dst);

#endif /* RT_SNAPPY_H */
