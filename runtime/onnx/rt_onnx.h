/* rt_onnx.h - ONNX model -> TensorFlow SavedModel converter.
 *
 * Reads an ONNX ModelProto (proto/onnx.proto; initializers from raw_data,
 * typed fields or external data files next to the model), translates the
 * graph node by node into TensorFlow ops the dcmserve kernels implement and
 * writes <export_dir>/saved_model.pb with one MetaGraphDef tagged "serve" and
 * a "serving_default" signature whose keys are the ONNX graph input and output
 * names. Weights become Const nodes. Layout: by default 4-D activations flow
 * channels-last (NHWC) between layout-aware ops (Conv, pools, batch norm,
 * resize, elementwise, channel concat/split/softmax), with one Transpose where
 * the graph enters or leaves that region (graph inputs/outputs, Reshape, ...);
 * with opts->tf_nchw the graph keeps NCHW (data_format "NCHW") and wraps the
 * ops TF only defines channels-last (resize, softmax on a middle axis) in
 * Transposes. Shape arithmetic (Shape, Gather, Concat, ... on shapes) is
 * folded at conversion time as far as the shapes are static; the batch
 * dimension may stay dynamic. docs/onnx.md lists the supported ops and limits.
 */
#ifndef RT_ONNX_H
#define RT_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

typedef struct rt_onnx_opts {
    /* 0 (default): 4-D activations are kept channels-last (NHWC) inside the TF
     * graph, the native layout of the CPU kernels; inputs and outputs keep
     * ONNX's order. 1: keep NCHW and use data_format "NCHW". */
    int tf_nchw;
    /* Optional: a graph input name to feed with DICOM bytes (DT_STRING, one
     * file per batch element) through DcmDecodeHU and DcmWindow (window
     * L,W to [0, 1], optional bilinear resize to size_h x size_w). NULL =
     * plain float inputs. */
    const char *dicom_input;
    float window_center, window_width; /* used with dicom_input; with dicom_volume,
                                          width 0 = no window (HU) */
    int64_t size_h, size_w;            /* resize target with dicom_input; 0 = none */
    /* with dicom_input: "CT,MR" refuses files of other modalities; NULL = any */
    const char *dicom_modality;
    int dicom_nhwc;                    /* 1: that model input is [N, H, W, C], not NCHW */
    /* 1: dicom_input takes a whole series (N files of one series, or one
     * multi-frame file) through DcmDecodeVolume; the model input is 5-D,
     * [1, 1, D, H, W] (or [1, D, H, W, 1] with dicom_nhwc) */
    int dicom_volume;
    float spacing[3]; /* with dicom_volume: resample to [z, y, x] mm; 0 = keep */
    /* with dicom_volume: the graph output of this name (a label volume) is
     * also encoded by DcmEncodeSeg as a DICOM Segmentation of the input
     * series, signature output "dicom_seg" (DT_STRING scalar); NULL = none.
     * Labels (comma-separated; NULL = "Segment k") and UID root (NULL =
     * 2.25) are its attrs. */
    const char *dicom_seg_output, *dicom_seg_labels, *dicom_seg_uid_root;
    /* Sliding-window inference (with dicom_volume; sw_roi[0] > 0 turns it
     * on): the model runs on patches of sw_roi [z, y, x] voxels cut from the
     * whole volume by a _SlidingWindow node (runtime/graph/rt_ops_sw.c), its
     * predictions blended into one full-volume output. sw_interval: the step
     * between windows per axis, max(int(roi * (1 - overlap)), 1) in double
     * (MONAI's scan interval); sw_overlap is kept for the record. */
    int64_t sw_roi[3], sw_interval[3];
    float sw_overlap;
    int sw_gaussian;       /* blend: 0 constant, 1 gaussian */
    float sw_sigma_scale;  /* gaussian sigma = sigma_scale * roi; 0 = 0.125 */
    int64_t sw_batch;      /* patches per model run; 0 = 1 */
    int sw_argmax;         /* add output "<output>_labels": arg-max over channels, uint8 */
} rt_onnx_opts;

/* Converts the ONNX file at onnx_path. On success *pb is a malloc'ed
 * serialized SavedModel (free() it) of *pb_len bytes. External data files are
 * looked up relative to the model's folder. Errors: MS_ENOTFOUND (file),
 * MS_EINVAL (malformed model, bad attribute), MS_ENOTSUP (an op, attribute
 * value or dynamic shape the converter does not handle; the message names the
 * ONNX op and node). opts may be NULL. */
ms_status rt_onnx_convert(const char *onnx_path, const rt_onnx_opts *opts, uint8_t **pb,
                          size_t *pb_len);

/* The same on a serialized ModelProto in memory. model_dir: where external
 * data files live (NULL: external data is refused); what: a name for
 * messages (may be NULL). */
ms_status rt_onnx_convert_mem(const uint8_t *data, size_t len, const char *model_dir,
                              const char *what, const rt_onnx_opts *opts, uint8_t **pb,
                              size_t *pb_len);

/* rt_onnx_convert, then writes an empty variables bundle
 * (export_dir/variables/variables.{index,data-00000-of-00001}) and last
 * export_dir/saved_model.pb (by rename), creating export_dir and its parents. */
ms_status rt_onnx_import(const char *onnx_path, const char *export_dir, const rt_onnx_opts *opts);

/* Newest ONNX opset (default domain) whose operator changelog the converter
 * knows; models declaring a newer one are refused. */
#define RT_ONNX_MAX_OPSET 28

/* 1 when the converter implements op `op` (default domain) as defined at
 * model opset `opset` (per op, after ONNX's operator changelog), else 0. */
int rt_onnx_op_accepts(const char *op, int64_t opset);
/* The i-th op the converter knows (i = 0, 1, ...), NULL past the end. */
const char *rt_onnx_op_name(size_t i);

#endif /* RT_ONNX_H */
