/* kn_cuda_dicom.cuh - the fused DICOM kernel: stored pixels to the model's
 * input in one pass on the device (kn_cuda_dicom.cu).
 *
 * Input: n frames of ih x iw stored values (uint8, uint16 or int16, as the
 * host-side codec leaves them, little-endian), copied once to the device
 * from pinned staging. Per output pixel, one thread:
 *   sv  = stored value masked to BitsStored, sign-extended when signed
 *   HU  = (float)sv * slope + intercept           two float32 roundings, no FMA
 *   resize (when oh, ow differ from ih, iw): TensorFlow's bilinear with
 *         half-pixel centers over the four neighbours' HU, the expression
 *         order of dcm_resize_bilinear (runtime/dicom/dcm_pixel.c)
 *   window (when set): (min(max(HU, lo), hi) - lo) / (hi - lo), float32
 *   written as NHWC with `channels` copies, or NCHW.
 * Every step is the CPU path's float32 expression with round-to-nearest and
 * no contraction (__fmul_rn / __fadd_rn ...), so the output is bit-identical
 * to HU -> dcm_resize_bilinear -> dcm_window on the CPU (docs/gpu.md). */
#ifndef KN_CUDA_DICOM_CUH
#define KN_CUDA_DICOM_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kn_dicom_xform.h"
#include "ms_status.h"

typedef enum kn_cuda_pix { KN_CUDA_PIX_U8 = 0, KN_CUDA_PIX_U16 = 1, KN_CUDA_PIX_S16 = 2 } kn_cuda_pix;

typedef struct kn_cuda_dicom_params {
    kn_cuda_pix pix;
    uint32_t bits_stored;   /* 1..16 (8 for uint8) */
    float slope, intercept; /* Modality LUT (rescale); slope 1, intercept 0 = none */
    int window;             /* 1: apply [lo, hi] -> [0, 1]; 0: output HU */
    float lo, hi;           /* as dcm_window: (float)(L - W/2), (float)(L + W/2) */
    uint32_t ih, iw;        /* stored frame size */
    uint32_t oh, ow;        /* output size; equal to ih, iw: no resize */
    uint32_t channels;      /* output channels (grey replicated): 1 or 3 */
    int nchw;               /* 1: NCHW output, 0: NHWC */
} kn_cuda_dicom_params;

/* Checks the parameters (MS_EINVAL naming the bad one). */
ms_status kn_cuda_dicom_check(const kn_cuda_dicom_params *p);

/* Launches the kernel on `stream` over n frames: d_raw holds n * ih * iw
 * stored values, d_out receives n * oh * ow * channels floats. Asynchronous;
 * launch errors are returned (MS_EDEVICE naming "DcmDecodeHU (cuda)"). */
ms_status kn_cuda_dicom_fused(const void *d_raw, uint32_t n, const kn_cuda_dicom_params *p,
                              float *d_out, void *stream);

/* _DcmPixelTransform on the device (kn_dicom_xform.h): d_raw holds the
 * request's raw tensor (uint16 words, or float HU when g->raw_float), d_files
 * its g->n kn_dcm_xform_file rows, both in device memory; d_out receives
 * g->n * oh * ow * C floats in the layout of g. One thread per output value,
 * the CPU kernel's expressions (window, then the two blends) with
 * round-to-nearest and no contraction. Asynchronous; launch errors are
 * returned (MS_EDEVICE naming "_DcmPixelTransform (cuda)"). */
ms_status kn_cuda_dicom_xform(const void *d_raw, const kn_dcm_xform_file *d_files,
                              const kn_dcm_xform_geom *g, float *d_out, void *stream);

/* Bytes the kernel reads and writes for n frames (for achieved bandwidth). */
uint64_t kn_cuda_dicom_bytes(uint32_t n, const kn_cuda_dicom_params *p);

#ifdef __cplusplus
}
#endif

#endif /* KN_CUDA_DICOM_CUH */
