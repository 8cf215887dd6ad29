/* util_onnx.h - helpers for the ONNX import tests: the test-model folder and
 * a minimal reader for the float32 .npy files the generator stores.
 *
 * Ownership: tox_npy_read returns one tensor reference owned by the caller
 * (rt_tensor_unref). Paths returned by tox_path are static buffers, valid
 * until the next call.
 */
#ifndef UTIL_ONNX_H
#define UTIL_ONNX_H

#include "ms_status.h"
#include "rt_tensor.h"
#include "tf_savedmodel.pb-c.h"

/* $DCM_SRC/tests/data/onnx/<file> (DCM_SRC defaults to "."). */
const char *tox_path(const char *file);
/* Reads a little-endian float32, C-order .npy file (format 1.0 / 2.0). */
ms_status tox_npy_read(const char *path, rt_tensor **out);
/* Largest |a - b| over all elements; -1 when dtype or shape differ. */
double tox_max_abs_diff(const rt_tensor *a, const rt_tensor *b);

/* Map lookups in a SignatureDef (NULL when absent). */
const Tensorflow__TensorInfo *tox_sig_input(const Tensorflow__SignatureDef *sd, const char *key);
const Tensorflow__TensorInfo *tox_sig_output(const Tensorflow__SignatureDef *sd, const char *key);
/* The signature `key` of a MetaGraphDef, or NULL. */
const Tensorflow__SignatureDef *tox_sig(const Tensorflow__MetaGraphDef *mg, const char *key);

#endif /* UTIL_ONNX_H */
