/* util_dicom.h - builders of DICOM byte buffers for the Check tests: a
 * growable buffer, element writers for implicit/explicit VR in either byte
 * order, and a Part 10 preamble + file meta writer. */
#ifndef UTIL_DICOM_H
#define UTIL_DICOM_H

#include <stddef.h>
#include <stdint.h>

typedef struct ut_dbuf {
    uint8_t *p;
    size_t n, cap;
    int be; /* numbers written big endian */
    int explicit_vr;
} ut_dbuf;

void ut_dbuf_init(ut_dbuf *d, int explicit_vr, int big_endian);
void ut_dbuf_free(ut_dbuf *d);
void ut_dbuf_bytes(ut_dbuf *d, const void *src, size_t n);
void ut_dbuf_u16(ut_dbuf *d, uint16_t v);
void ut_dbuf_u32(ut_dbuf *d, uint32_t v);
/* Element header: tag, then VR + length (explicit) or length (implicit). */
void ut_dbuf_hdr(ut_dbuf *d, uint16_t g, uint16_t e, const char *vr, uint32_t len);
/* Whole elements; string values are padded with a space to even length. */
void ut_dbuf_str(ut_dbuf *d, uint16_t g, uint16_t e, const char *vr, const char *s);
void ut_dbuf_us(ut_dbuf *d, uint16_t g, uint16_t e, uint16_t v);
/* Item / delimiter headers (tag + 32-bit length, no VR). */
void ut_dbuf_item(ut_dbuf *d, uint16_t e, uint32_t len);
/* 128 zero bytes, "DICM", (0002,0000) group length, (0002,0001) and
 * (0002,0010) = ts, always explicit VR LE. */
void ut_dbuf_meta(ut_dbuf *d, const char *ts);
/* Image Pixel module for a monochrome image (explicit/implicit as d). */
void ut_dbuf_image(ut_dbuf *d, uint16_t rows, uint16_t cols, uint16_t ba, uint16_t bs, uint16_t pr,
                   const char *photometric);

#endif /* UTIL_DICOM_H */
