/* dcm_codec.h - decoders for encapsulated (compressed) DICOM pixel data.
 *
 * The DICOM parser (dcm_parse / dcm_pixel) splits encapsulated Pixel Data into
 * frames and calls dcm_codec_decode once per frame with the frame's bytes
 * (fragments already concatenated). The codec writes the frame in native
 * layout: row-major, samples interleaved (R G B R G B ... for colour),
 * little-endian, 1 byte per sample when bits_allocated <= 8, else 2 bytes
 * (bits_allocated 16; 32 where a codec supports it). Values are the stored bit
 * patterns as the codec returns them (unsigned); masking to BitsStored and
 * sign extension happen later in the pixel module, so codecs do not apply them.
 * Colour: JPEG codecs convert YCbCr to RGB when the stream is YCbCr
 * (photometric YBR_FULL / YBR_FULL_422 in the header); J2K applies its own
 * inverse RCT/ICT. *out_rgb_converted tells the caller what happened.
 */
#ifndef DCM_CODEC_H
#define DCM_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

typedef enum dcm_codec_kind {
    DCM_CODEC_NONE = 0,        /* native (not encapsulated) */
    DCM_CODEC_JPEG_BASELINE,   /* 1.2.840.10008.1.2.4.50 */
    DCM_CODEC_JPEG_EXTENDED,   /* .4.51 (8 or 12 bit) */
    DCM_CODEC_JPEG_LOSSLESS,   /* .4.57 and .4.70 (process 14) */
    DCM_CODEC_JPEGLS,          /* .4.80 and .4.81 */
    DCM_CODEC_J2K,             /* .4.90, .4.91, HTJ2K .4.201-.203 */
    DCM_CODEC_RLE,             /* .5 */
    DCM_CODEC_DEFLATE_FRAME,   /* .8.1 Deflated Image Frame Compression */
    DCM_CODEC_ENCAPS_NATIVE,   /* .1.98 encapsulated uncompressed */
} dcm_codec_kind;

typedef struct dcm_frame_geom {
    uint32_t rows, cols;
    uint16_t samples;          /* 1 or 3 */
    uint16_t bits_allocated;   /* 8 or 16 (1, 32 where supported) */
    uint16_t bits_stored;
    uint16_t pixel_rep;        /* 0 unsigned, 1 signed */
    uint16_t planar;           /* PlanarConfiguration of the header */
    const char *photometric;   /* "MONOCHROME2", "YBR_FULL_422", ... */
    uint32_t threads;          /* > 1: the codec may use that many threads of its own
                                * for this frame (OpenJPEG); 0 or 1: the caller's */
} dcm_frame_geom;

/* Decodes one frame into out (out_size must be rows*cols*samples*bytes per
 * sample). MS_EINVAL with a reason for corrupt streams or when the stream's
 * own geometry (size, components, precision) disagrees with geom;
 * MS_ENOTSUP for unsupported variants. Never reads outside data[0..len) or
 * writes outside out. Thread-safe. */
ms_status dcm_codec_decode(dcm_codec_kind kind, const uint8_t *data, size_t len,
                           const dcm_frame_geom *geom, void *out, size_t out_size,
                           int *out_rgb_converted);

#endif /* DCM_CODEC_H */
