/* dcm_pixel.h - the Image Pixel module: frames out of a parsed data set,
 * stored values masked and sign-extended, colour to RGB, then the Modality
 * LUT (rescale or LUT sequence) to float32 HU; and the window/normalise step.
 *
 * Arithmetic contract (what the pydicom tests check bit for bit):
 *   HU  = (float)sv * (float)slope + (float)intercept   two float32 roundings, no FMA
 *   lo  = (float)(L - W/2), hi = (float)(L + W/2)       computed in double, rounded once
 *   out = (min(max(HU, lo), hi) - lo) / (hi - lo)       float32
 * where sv is the stored value after masking to BitsStored and sign extension.
 * MONOCHROME1 is not inverted. YBR_FULL / YBR_FULL_422 native data become RGB
 * with pydicom's formula (float32 matrix, floor(x + 0.5), clip to 0..255).
 *
 * Ownership: dcm_decode_hu*() return a dcm_image the caller frees with
 * dcm_image_free(); its data array belongs to it.
 */
#ifndef DCM_PIXEL_H
#define DCM_PIXEL_H

#include <stddef.h>
#include <stdint.h>

#include "dcm_parse.h"
#include "ms_status.h"

/* The header summary (what `dcmserve dicom` prints). */
typedef struct dcm_info {
    char ts_uid[68];
    const char *ts_name; /* NULL for unknown syntaxes */
    char sop_class[68];
    char modality[20];
    char photometric[20];
    char rescale_type[68];
    char voi_function[20];
    uint32_t rows, cols, frames, samples;
    uint16_t bits_allocated, bits_stored, high_bit, pixel_rep, planar;
    int float_pixels; /* 32 / 64 for Float / Double Float Pixel Data, else 0 */
    int has_pixels;
    int encapsulated;
    uint32_t fragments;
    double slope, intercept; /* of frame 0 */
    int rescale_source;      /* DCM_RESCALE_* */
    int has_window;
    double window_center, window_width; /* first pair */
} dcm_info;

enum {
    DCM_RESCALE_NONE = 0,   /* identity: slope 1, intercept 0 */
    DCM_RESCALE_ATTRS,      /* RescaleSlope/Intercept at the top level */
    DCM_RESCALE_FUNCTIONAL, /* Pixel Value Transformation in functional groups */
    DCM_RESCALE_LUT,        /* Modality LUT Sequence */
};

typedef struct dcm_image {
    dcm_info info;
    uint32_t frames, rows, cols, samples; /* samples 1, or 3 (RGB) */
    float *data;                          /* frames*rows*cols*samples values, C order */
} dcm_image;

/* Reads the summary from a parsed data set. Fails only for values present
 * but unreadable (a non-numeric RescaleSlope); missing ones stay 0 / "". */
ms_status dcm_read_info(const dcm_dataset *ds, dcm_info *out);

/* Whether the declared size is possible for the bytes present, before any
 * budget is charged for it: native pixel data must hold NumberOfFrames x Rows
 * x Columns pixels at BitsAllocated (a lower bound: one sample each), and
 * encapsulated data at least one fragment per frame (PS3.5 A.4: a fragment
 * never holds two frames; how many pixels a codec packs in a few bytes is not
 * bounded: JPEG 2000 codes a flat image in a few dozen). MS_EINVAL naming
 * both numbers: the file is wrong, and no budget says RESOURCE_EXHAUSTED
 * (which clients retry) for it. */
ms_status dcm_check_pixel_bytes(const dcm_dataset *ds, const dcm_info *in);

/* Parses `bytes` and decodes every frame to float32 HU. MS_EINVAL with a
 * reason for malformed input; MS_ENOTSUP for unsupported syntaxes or pixel
 * formats (message names them); MS_ENOMEM when lim->max_pixel_bytes or
 * malloc fails. lim may be NULL (defaults). */
ms_status dcm_decode_hu(const uint8_t *bytes, size_t len, const dcm_limits *lim, dcm_image **out);
/* The same from an already parsed data set. */
ms_status dcm_decode_hu_ds(const dcm_dataset *ds, const dcm_limits *lim, dcm_image **out);
/* Stored values (masked, sign-extended, colour converted) without the
 * Modality LUT, as float32 (what tfio's DecodeDICOMImage returns). */
ms_status dcm_decode_stored_ds(const dcm_dataset *ds, const dcm_limits *lim, dcm_image **out);
void dcm_image_free(dcm_image *img);

/* A frame whose HU the caller can compute straight from the file's bytes:
 * native (not encapsulated) little-endian 16-bit grey samples rescaled by
 * one slope/intercept, HU = (float)sv * slope + intercept with
 * sv = ((word & mask) ^ sign) - sign (sign 0 for unsigned data). */
typedef struct dcm_native_view {
    const uint8_t *raw; /* the frame's first sample (2 bytes each, LE) */
    uint32_t rows, cols;
    uint32_t mask, sign;
    float slope, intercept;
} dcm_native_view;

/* Fills *v and returns 1 when frame `frame` of ds (whose summary is info)
 * has that simple form and is well-formed; 0 when it needs the general
 * decoder (dcm_decode_hu_ds), which also reports any error. */
int dcm_native_view_of(const dcm_dataset *ds, const dcm_info *info, const dcm_limits *lim,
                       uint32_t frame, dcm_native_view *v);

/* Writes the HU of rows [r0, r1) of v's frame ((r1 - r0) * cols floats)
 * into out: the values dcm_decode_hu_ds gives for them, bit for bit. */
void dcm_native_view_hu(const dcm_native_view *v, uint32_t r0, uint32_t r1, float *out);

/* Pixels (samples) decoded from files so far in this process: every frame
 * the pixel module converts, every row range of dcm_native_view_hu and the
 * rows the fused op reads straight from a file. Monotonic; what /metrics
 * shows as dcmserve_dicom_pixels_total and what tests read to see that a
 * refusal decoded nothing. dcm_pixels_count adds n (for decoders outside
 * this file). */
void dcm_pixels_count(uint64_t n);
uint64_t dcm_pixels_decoded(void);

/* Bilinear resize of one (ih, iw, c) float image to (oh, ow, c) as
 * TensorFlow's ResizeBilinear with half_pixel_centers=True. */
void dcm_resize_bilinear(const float *in, uint32_t ih, uint32_t iw, uint32_t c, float *out,
                         uint32_t oh, uint32_t ow);

/* Windows and normalises n values: out may equal hu. MS_EINVAL when width
 * is not > 0 or the values are not finite. */
ms_status dcm_window(const float *hu, float *out, size_t n, double center, double width);

#endif /* DCM_PIXEL_H */
