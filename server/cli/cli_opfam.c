/* cli_opfam.c - the op-family table of docs/ops.md (see cli_opfam.h).
 *
 * Where the families come from: the op lists of the SavedModels we test
 * against (`dcmserve show --list_ops` on ../shared/testdata/zoo and wild:
 * Keras MobileNet V1 and a Teachable Machine MobileNetV2, a Keras U-Net, a
 * Keras LSTM, an Estimator's tf.Example classifier, Keras augmentation
 * layers), the architectures issue 29 served, and how Keras / TF export
 * each layer (MultiHeadAttention is Einsum, exact GELU is Erf, UpSampling2D
 * is ResizeNearestNeighbor, Conv2DTranspose is Conv2DBackpropInput,
 * SeparableConv2D is DepthwiseConv2dNative then Conv2D, Keras RNN layers
 * are a While over TensorLists in TF2 and TensorArrays in TF1 frames).
 * Generic arithmetic (Add, Mul, Reshape ...) is in every model and in no
 * family. */
#include "cli_opfam.h"

#include <stddef.h>

#define OPS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* clang-format off */
const cli_opfam cli_opfams[] = {
    {"SavedModel plumbing", "every SavedModel (TF1 and TF2 exports)",
     OPS("Const", "Identity", "IdentityN", "NoOp", "Placeholder", "PlaceholderWithDefault",
         "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "VariableV2", "VarIsInitializedOp",
         "DisableCopyOnRead", "RestoreV2", "StaticRegexFullMatch")},
    {"convolution", "ResNet50, VGG16, InceptionV3, Xception, MobileNet V1/V2/V3, EfficientNet-B0, "
     "U-Net, YOLOv3 / v4-tiny",
     OPS("Conv2D", "BiasAdd", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "MaxPool",
         "AvgPool", "Relu", "Mean", "MatMul", "Softmax", "Pad")},
    {"depthwise convolution", "MobileNet V1/V2/V3, EfficientNet-B0, Xception (SeparableConv2D)",
     OPS("DepthwiseConv2dNative")},
    {"clipped activation", "MobileNet V1/V2 (ReLU6), MobileNet V3 (hard-swish)", OPS("Relu6")},
    {"gates and swish", "EfficientNet-B0 (swish, squeeze-and-excitation), U-Net (sigmoid output), "
     "Keras LSTM / GRU gates", OPS("Sigmoid", "Tanh")},
    {"upsampling", "U-Net (UpSampling2D), YOLOv3 / v4-tiny (upsample), Keras Resizing and "
     "augmentation layers", OPS("ResizeNearestNeighbor", "ResizeBilinear")},
    {"transposed convolution", "U-Net variants and autoencoder decoders (Conv2DTranspose)",
     OPS("Conv2DBackpropInput")},
    {"leaky activation", "YOLOv3 / v4-tiny (Darknet's leaky ReLU)", OPS("LeakyRelu")},
    {"detection post-processing", "YOLOv3 / v4 with NMS in the graph (CombinedNonMaxSuppression), "
     "TF Object Detection API SSD / Faster R-CNN (NonMaxSuppression, CropAndResize)",
     OPS("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
         "NonMaxSuppressionV5", "CombinedNonMaxSuppression", "CropAndResize")},
    {"attention", "ViT, BERT / ALBERT, Keras transformer encoders (MultiHeadAttention, GELU, "
     "LayerNormalization)",
     OPS("Einsum", "BatchMatMulV2", "BatchMatMulV3", "Erf", "Rsqrt", "SquaredDifference")},
    {"embeddings", "BERT / ALBERT token embeddings, Keras Embedding layers (text models, LSTMs)",
     OPS("GatherV2", "ResourceGather")},
    {"assertions", "ALBERT (its position-embedding check)", OPS("Assert")},
    {"signal", "YAMNet (waveform to log-mel in the graph: tf.signal.stft), tf.signal front ends",
     OPS("RFFT", "IRFFT", "FFT", "IFFT", "RFFT2D", "IRFFT2D", "FFT2D", "IFFT2D", "ComplexAbs",
         "Real", "Imag", "Complex", "Angle")},
    {"TF2 loops", "Keras LSTM / GRU / SimpleRNN (TF2 exports), tf.map_fn, tf.while_loop",
     OPS("While", "StatelessWhile", "TensorListReserve", "TensorListFromTensor",
         "TensorListGetItem", "TensorListSetItem", "TensorListStack")},
    {"TF1 loops", "TF1 dynamic_rnn / LSTM exports, tf.map_fn and tf.while_loop in TF1 graphs "
     "(TensorArray)",
     OPS("Enter", "Exit", "NextIteration", "LoopCond", "TensorArrayV3", "TensorArrayReadV3",
         "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
         "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
         "TensorArrayCloseV3")},
    {"text", "Keras TextVectorization / StringLookup, feature-column vocabularies",
     OPS("StringLower", "StringSplitV2", "StaticRegexReplace", "RegexReplace",
         "StringToHashBucketFast", "RaggedTensorToTensor", "HashTableV2", "InitializeTableV2",
         "LookupTableFindV2")},
    {"tf.Example input", "Estimator exports with classify / regress signatures",
     OPS("ParseExample", "ParseExampleV2")},
    {"augmentation layers", "Keras RandomFlip / RandomRotation / RandomZoom left in an export",
     OPS("StatelessRandomUniformV2", "StatelessRandomGetKeyCounter",
         "ImageProjectiveTransformV3")},
    {"DICOM", "dcmserve's DICOM-in-graph models (medical imaging)",
     OPS("DcmDecodeHU", "DcmDecodeWindow", "DcmDecodeVolume", "DcmEncodeSeg", "DcmWindow")},
    {NULL, NULL, NULL},
};
/* clang-format on */
