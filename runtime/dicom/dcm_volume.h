/* dcm_volume.h - a whole series (N files, or one multi-frame file) to one
 * float32 volume, outside a graph: what DcmDecodeVolume computes (the
 * contract is at the top of dcm_volume.c and in docs/dicom.md), for callers
 * such as `dcmserve dicom --volume` that also want the series' geometry. */
#ifndef DCM_VOLUME_H
#define DCM_VOLUME_H

#include <stdint.h>

#include "kn_backend.h"

typedef struct dcm_volume_opts {
    int window;            /* 1: window center/width to [0, 1]; 0: HU */
    double center, width;  /* width > 0 */
    double spacing[3];     /* [z, y, x] mm to resample to; all 0 = keep */
    const char *modalities; /* "CT,MR": refuse others; NULL or "" = any */
} dcm_volume_opts;

/* The series as found (filled as far as the checks got). */
typedef struct dcm_volume_geom {
    int64_t dim[3];      /* the series' slices, rows, columns */
    int64_t out[3];      /* the output's (after resampling) */
    double spacing[3];   /* slice gap (0 for one slice), PixelSpacing rows, columns (0 absent) */
    double ori[6];       /* ImageOrientationPatient of the first slice */
    double first[3], last[3]; /* ImagePositionPatient of the first and last slice, in order */
    char series[68], modality[20];
    uint64_t frames_decoded;
} dcm_volume_geom;

/* Decodes files[0..n) (the bytes of each file) to *out, float32
 * (1, D, H, W, 1), allocated through ctx (NULL: plain, one thread). Refusals
 * as DcmDecodeVolume's, MS_EINVAL naming the problem. geom may be NULL. */
ms_status dcm_volume_decode(kn_ctx *ctx, const dcm_volume_opts *o, const rt_str *files, int64_t n,
                            rt_tensor **out, dcm_volume_geom *geom);

/* The checks of dcm_volume_decode on files[0..n), single-frame files of one
 * series, on their headers alone (no pixel decoded): order[k] (n entries,
 * caller's) is the file of slice k in the volume's order, geom the series'
 * geometry. The same refusals; a multi-frame file is refused. */
ms_status dcm_volume_order(kn_ctx *ctx, const rt_str *files, int64_t n, int64_t *order,
                           dcm_volume_geom *geom);

#endif /* DCM_VOLUME_H */
