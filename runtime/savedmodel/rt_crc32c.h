/* rt_crc32c.h - CRC-32C (Castagnoli) and LevelDB/TensorFlow checksum masking.
 *
 * CRC-32C uses the reflected polynomial 0x82F63B78 with init and final xor
 * 0xFFFFFFFF, the checksum of SSTable block trailers, tensor-bundle entries and
 * TFRecord files. The implementation uses the SSE4.2 crc32 instruction when
 * the CPU has it (checked once, at the first call) and a slicing-by-8 table
 * otherwise; both give identical results.
 */
#ifndef RT_CRC32C_H
#define RT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Returns the crc32c of the concatenation A||data[0..n), where crc is the
 * crc32c of A (0 for the empty string). rt_crc32c_extend(0, d, n) is the crc
 * of d alone. data may be NULL when n == 0. */
uint32_t rt_crc32c_extend(uint32_t crc, const void *data, size_t n);

/* crc32c of data[0..n). */
static inline uint32_t rt_crc32c(const void *data, size_t n) {
    return rt_crc32c_extend(0, data, n);
}

/* The masked form stored on disk: a CRC of a string that itself contains
 * CRCs is weak, so stored checksums are rotated right by 15 bits and offset
 * by the constant 0xa282ead8. rt_crc32c_unmask inverts rt_crc32c_mask. */
static inline uint32_t rt_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
static inline uint32_t rt_crc32c_unmask(uint32_t masked) {
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

/* Name of the implementation in use: "sse4.2" or "slice8" (for logs/tests). */
const char *rt_crc32c_impl(void);

/* The portable implementation, always available (tests compare both). */
uint32_t rt__crc32c_extend_portable(uint32_t crc, const void *data, size_t n);

#endif /* RT_CRC32C_H */
