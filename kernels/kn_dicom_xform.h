/* kn_dicom_xform.h - the DICOM pixel transform shared by the host decode and
 * the transform kernels (CPU: kernels/cpu/kn_cpu_dcmxform.c, CUDA:
 * kernels/cuda/kn_cuda_dicom.cu), so that both sides read one layout.
 *
 * When a model is placed on a device backend that has _DcmPixelTransform,
 * load-time fusion (runtime/graph/rt_fuse.c) splits the fused
 * DcmDecodeWindow into two nodes:
 *   _DcmDecodeRaw (host op, runtime/dicom/dcm_fused.c)
 *     input   contents: DT_STRING (N files)
 *     attrs   those of DcmDecodeWindow
 *     outputs raw:    DT_UINT16 (N, H, W): each file's stored 16-bit words of
 *                     the frame as in the file (H, W the largest in the
 *                     batch; 0 outside a smaller file), when every file of
 *                     the request is native little-endian 16-bit grey data
 *                     rescaled by one slope / intercept; otherwise
 *                     DT_FLOAT (N, H, W, C): each file's HU as the general
 *                     decoder gives them (grey replicated to C = 3 in a
 *                     batch with colour). Decided per request.
 *             params: DT_UINT8 (N, sizeof(kn_dcm_xform_file)): one
 *                     kn_dcm_xform_file per file
 *   _DcmPixelTransform (CPU and device kernels)
 *     inputs  raw, params as above
 *     attrs   center, width, data_format, size (kn_window_attrs),
 *             pad_value, masked
 *     output  DT_FLOAT (N, oh, ow, C) or (N, C, oh, ow): what
 *             DcmDecodeWindow gives for the same files, bit for bit:
 *             HU = (float)sv * slope + intercept (two float32 roundings),
 *             windowed (x < lo: lo, x > hi: hi, (x - lo) / range), outside
 *             the file's rows x cols the windowed pad_value, then the
 *             bilinear resize with half-pixel centres of the windowed plane
 *             (over the file's own rows x cols when masked, else H x W):
 *             h = a + (b - a) * dx per row, out = top + (bot - top) * dy.
 */
#ifndef KN_DICOM_XFORM_H
#define KN_DICOM_XFORM_H

#include <stdint.h>

#define KN_DCM_RAW_OP   "_DcmDecodeRaw"
#define KN_DCM_XFORM_OP "_DcmPixelTransform"

/* Per file. Stored value sv = ((word & mask) ^ sign) - sign (sign 0 for
 * unsigned data); slope, intercept: the Modality LUT (rescale). With a
 * DT_FLOAT raw tensor only rows and cols are read. */
typedef struct kn_dcm_xform_file {
    uint32_t rows, cols;
    uint32_t mask, sign;
    float slope, intercept;
} kn_dcm_xform_file;

/* The geometry and window of one request, derived from the attrs and the
 * input shapes (kn_dcm_xform_geometry, kernels/cpu/kn_cpu_dcmxform.c). */
typedef struct kn_dcm_xform_geom {
    uint32_t n, H, W, C; /* raw: (n, H, W) words or (n, H, W, C) floats */
    uint32_t oh, ow;     /* output size (H, W without resize) */
    int resize, masked, nchw, raw_float;
    float lo, hi, range; /* the window, as kn_window_attrs */
    float wpad;          /* the windowed pad_value */
} kn_dcm_xform_geom;

#ifndef __CUDACC__ /* the structs above are all nvcc sees (kn_cuda_dicom.cu) */
#include "kn_backend.h"
#include "ms_status.h"

/* The attrs of a _DcmPixelTransform node, read once at load. */
typedef struct kn_dcm_xform_attrs {
    float lo, hi, range, wpad;
    int nchw, masked;
    int64_t size[2]; /* 0: no resize */
} kn_dcm_xform_attrs;

/* Reads the attrs (kn_window_attrs, pad_value, masked); MS_EINVAL naming the
 * node for a bad window. */
ms_status kn_dcm_xform_attrs_read(const kn_node *n, kn_dcm_xform_attrs *a);

/* Checks the inputs of one request against the layout above (dtypes, ranks,
 * one params row per file, rows / cols within H x W, masks of at most 16
 * bits) and fills *g. MS_EINVAL naming the node and what is wrong. */
ms_status kn_dcm_xform_geometry(const kn_node *n, const kn_dcm_xform_attrs *a, const rt_tensor *raw,
                                const rt_tensor *params, const kn_dcm_xform_file *files,
                                kn_dcm_xform_geom *g);

#endif /* !__CUDACC__ */

#endif /* KN_DICOM_XFORM_H */
