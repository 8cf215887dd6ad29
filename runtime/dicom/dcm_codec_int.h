/* dcm_codec_int.h - internals shared by the pixel codecs behind dcm_codec.h.
 *
 * dcm_codec.c validates the geometry and the output size once, then calls one
 * of the per-codec entry points below. Each entry point may assume:
 *   - geom->rows, cols >= 1, samples is 1 or 3, bits_allocated is 8, 16 or 32
 *     (1 only for the deflate / encapsulated-native copies),
 *     1 <= bits_stored <= bits_allocated;
 *   - out_size == dcm__frame_size(geom) and *out_rgb_converted == 0 on entry.
 * Each must bound-check the stream itself and never touch anything outside
 * data[0..len) or out[0..out_size). None keeps state between calls.
 */
#ifndef DCM_CODEC_INT_H
#define DCM_CODEC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dcm_codec.h"

/* Bytes per output sample for geom (1, 2 or 4; 0 for bits_allocated 1). */
static inline unsigned dcm__sample_bytes(const dcm_frame_geom *g) {
    return g->bits_allocated <= 1 ? 0 : (g->bits_allocated <= 8 ? 1u : g->bits_allocated / 8u);
}

/* 1 when the DICOM header says the JPEG stream carries YCbCr. */
int dcm__photometric_is_ybr(const char *photometric);

/* Stores one sample value v at index i of out, width bytes (1, 2 or 4), LE. */
static inline void dcm__put_sample(uint8_t *out, size_t i, unsigned width, uint32_t v) {
    if (width == 1) {
        out[i] = (uint8_t)v;
    } else if (width == 2) {
        out[2 * i] = (uint8_t)v;
        out[2 * i + 1] = (uint8_t)(v >> 8);
    } else {
        out[4 * i] = (uint8_t)v;
        out[4 * i + 1] = (uint8_t)(v >> 8);
        out[4 * i + 2] = (uint8_t)(v >> 16);
        out[4 * i + 3] = (uint8_t)(v >> 24);
    }
}

/* Per-codec entry points: same contract as dcm_codec_decode. */
ms_status dcm__rle_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                          size_t out_size);
ms_status dcm__jpeg_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                           size_t out_size, int *out_rgb_converted);
ms_status dcm__jpeg_lossless_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g,
                                    uint8_t *out, size_t out_size);
ms_status dcm__jpeg12_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                             size_t out_size, int *out_rgb_converted);
ms_status dcm__jpegls_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                             size_t out_size);
ms_status dcm__j2k_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                          size_t out_size, int *out_rgb_converted);

/* What the first SOFn marker of a JPEG stream says (dcm_jpeg_common.c). */
typedef struct dcm__jpeg_sof {
    int marker;    /* 0xC0..0xCF (not C4/C8/CC), 0 when none was found */
    int precision; /* P of the frame header */
} dcm__jpeg_sof;

/* Scans markers from SOI up to the first SOFn. MS_EINVAL when the stream does
 * not start with SOI or a marker segment runs past len. */
ms_status dcm__jpeg_find_sof(const uint8_t *data, size_t len, dcm__jpeg_sof *out);

#endif /* DCM_CODEC_INT_H */
