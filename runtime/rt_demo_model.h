/* rt_demo_model.h - the small demo SavedModel bundled with dcmserve.
 *
 * Signature "serving_default" (method tensorflow/serving/predict):
 *   input  x = "x:0" DT_FLOAT (-1, 4)   (Placeholder)
 *   output y = "y:0" DT_FLOAT (-1, 2)   y = Relu(MatMul(x, W) + b)
 * with TF1 variables (VariableV2, restored by save/restore_all):
 *   W (4, 2) = [[ 0.5, -1.0 ],      b (2) = [ 0.1, -0.2 ]
 *               [ 0.25, 0.5 ],
 *               [-0.5,  1.0 ],
 *               [ 1.0, -0.25]]
 * e.g. x = [1, 2, 3, 4] -> y = [3.6, 1.8]; x = [-1, 0, 0, 0] -> y = [0, 0.8].
 * A later DICOM task replaces the graph with a DICOM one.
 */
#ifndef RT_DEMO_MODEL_H
#define RT_DEMO_MODEL_H

#include "ms_status.h"

/* Writes the demo model into version_dir (e.g. "models/demo/1"): creates the
 * folder if needed (not its parents), writes variables/ and saved_model.pb. */
ms_status rt_demo_model_write(const char *version_dir);

#endif /* RT_DEMO_MODEL_H */
