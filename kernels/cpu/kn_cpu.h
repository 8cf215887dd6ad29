/* kn_cpu.h - internals shared by the CPU backend's kernel files.
 *
 * Each kernels/cpu/kn_cpu_<group>.c exports one table of kernels, terminated
 * by an entry whose op is NULL; kn_cpu_backend.c searches the tables in order.
 */
#ifndef KN_CPU_H
#define KN_CPU_H

#include "kn_backend.h"

extern const kn_kernel kn_cpu_fast_kernels[];        /* optimised conv/GEMM; searched first */
extern const kn_kernel kn_cpu_elementwise_kernels[]; /* Add, Mul, Relu, Cast, ... */
extern const kn_kernel kn_cpu_shape_kernels[];       /* Reshape, Concat, Transpose, Pad, ... */
extern const kn_kernel kn_cpu_reduce_kernels[];      /* Mean, Sum, Max, Softmax, MatMul */
extern const kn_kernel kn_cpu_nn_kernels[];          /* Conv2D, pools, BatchNorm, Resize */
extern const kn_kernel kn_cpu_index_kernels[];       /* TopKV2, OneHot, Bucketize, GatherNd, ... */
extern const kn_kernel kn_cpu_reverse_kernels[];     /* ReverseV2, Reverse */
extern const kn_kernel kn_cpu_image_kernels[];       /* DICOM window/normalise/layout/resize */
extern const kn_kernel kn_cpu_conv3d_kernels[];      /* Conv3D, 3-D pools, Conv3DBackpropInputV2 */
extern const kn_kernel kn_cpu_random_kernels[];      /* stateless Philox random ops */
extern const kn_kernel kn_cpu_imgproj_kernels[];     /* ImageProjectiveTransformV2/V3 */
extern const kn_kernel kn_cpu_segment_kernels[];     /* SparseSegment*, TensorScatterUpdate */
extern const kn_kernel kn_cpu_hash_kernels[];        /* StringToHashBucket, ...Fast, ...Strong */
extern const kn_kernel kn_cpu_str_kernels[];         /* StringJoin, Substr, StringSplitV2, ... */
extern const kn_kernel kn_cpu_regex_kernels[];       /* RegexReplace, StaticRegexFullMatch, ... */
extern const kn_kernel kn_cpu_unique_kernels[];      /* Unique, UniqueV2, UniqueWithCounts(V2) */
extern const kn_kernel kn_cpu_sparse_kernels[];      /* SparseReshape, SparseFillEmptyRows, ... */
extern const kn_kernel kn_cpu_einsum_kernels[];      /* Einsum */
extern const kn_kernel kn_cpu_math_kernels[];        /* Erfc, Log1p, Cumsum, ClipByValue, ... */
extern const kn_kernel kn_cpu_space_kernels[];       /* SpaceToBatchND, BatchToSpaceND, ExtractImagePatches */
extern const kn_kernel kn_cpu_onnx_kernels[];        /* OnnxGridSample, OnnxScatterND, ... */
extern const kn_kernel kn_cpu_onnx_signal_kernels[]; /* OnnxMelWeightMatrix */
extern const kn_kernel kn_cpu_onnx_cache_kernels[];  /* OnnxTensorScatter */
extern const kn_kernel kn_cpu_onnx_img_kernels[];    /* OnnxRoiAlign, OnnxMaxUnpool, OnnxCol2Im, OnnxDeformConv */
extern const kn_kernel kn_cpu_onnx_str_kernels[];    /* OnnxStringConcat, OnnxStringSplit, ... */
extern const kn_kernel kn_cpu_rnn_kernels[];         /* OnnxRNN (RNN, GRU, LSTM) */
extern const kn_kernel kn_cpu_nms_kernels[];         /* NonMaxSuppressionV2..V5, CombinedNonMaxSuppression */
extern const kn_kernel kn_cpu_resize_kernels[];      /* ResizeBicubic, ResizeArea, CropAndResize */
extern const kn_kernel kn_cpu_fft_kernels[];         /* FFT, IFFT, RFFT, IRFFT (1-3 D), KissFFT */
extern const kn_kernel kn_cpu_complex_kernels[];     /* ComplexAbs, Real, Imag, Complex, Angle, Conj */
extern const kn_kernel kn_cpu_quant_kernels[];       /* OnnxQuantizeLinear, OnnxQLinearMatMul, ... */
extern const kn_kernel kn_cpu_dcmxform_kernels[];     /* _DcmPixelTransform (kn_dicom_xform.h) */

#endif /* KN_CPU_H */
