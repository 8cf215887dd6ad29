/* dcm_ops_int.h - what the DICOM graph ops share inside runtime/dicom: the
 * modality guard and fixed-size check (attrs `modalities`, `expect_size`)
 * the fused DcmDecodeWindow kernel (dcm_fused.c) and DcmDecodeVolume
 * (dcm_volume.c). */
#ifndef DCM_OPS_INT_H
#define DCM_OPS_INT_H

#include "dcm_pixel.h"
#include "kn_backend.h"

typedef struct dcm_guard {
    int64_t expect[2];    /* 0 = any size */
    char modalities[128]; /* "" = any; else comma-separated */
} dcm_guard;

/* Reads attrs modalities and expect_size of node n. */
ms_status dcm_guard_prepare(const kn_node *n, dcm_guard *g);
/* MS_EINVAL "dicom[i]: ..." when file i (summary info, rows x cols) is of a
 * modality not listed or of another size than expected. */
ms_status dcm_guard_check(const dcm_guard *g, int64_t i, const dcm_info *info, uint32_t rows,
                          uint32_t cols);

/* Adds to the counters /metrics shows (dcm_ops.h) what an op counting for
 * itself did: files and their bytes handed to the decoder, frames decoded;
 * one file refused with status st (by reason). */
void dcm_ops_count(uint64_t files, uint64_t bytes, uint64_t frames);
void dcm_ops_count_refused(ms_status st);

ms_status dcm_fused_prepare(const kn_node *n, rt_tensor *const *cin, void **state);
ms_status dcm_fused_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                            rt_tensor **out);

/* _DcmDecodeRaw (kn_dicom_xform.h): the files' stored words (or HU) and
 * per-file parameters for _DcmPixelTransform; prepared by dcm_fused_prepare. */
ms_status dcm_raw_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                          rt_tensor **out);

/* DcmDecodeVolume (dcm_volume.c): a series of files, or one multi-frame
 * file, to one (1, D, H, W, 1) volume. */
ms_status dcm_volume_prepare(const kn_node *n, rt_tensor *const *cin, void **state);
ms_status dcm_volume_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                             rt_tensor **out);
/* _DcmResampleBack (dcm_volume.c): a prediction on DcmDecodeVolume's
 * resampled grid back to the series' own (its geometry output). */
ms_status dcm_resample_back_prepare(const kn_node *n, rt_tensor *const *cin, void **state);
ms_status dcm_resample_back_compute(kn_ctx *ctx, const kn_node *n, void *state,
                                    rt_tensor *const *in, rt_tensor **out);

/* DcmEncodeSeg (dcm_seg.c): a label volume and its source series to a
 * DICOM Segmentation file (DT_STRING scalar). */
ms_status dcm_seg_prepare(const kn_node *n, rt_tensor *const *cin, void **state);
ms_status dcm_seg_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                          rt_tensor **out);
void dcm_seg_release(void *state);

#endif /* DCM_OPS_INT_H */
