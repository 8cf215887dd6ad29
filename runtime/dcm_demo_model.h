/* dcm_demo_model.h - the DICOM demo SavedModel (issue 4, acceptance 3),
 * built from graph ops only, no variables:
 *
 *   signature "serving_default" (tensorflow/serving/predict)
 *   input  dicom           "dicom:0"           DT_STRING (-1)    one DICOM file per element
 *   output mean_hu         "mean_hu:0"         DT_FLOAT  (-1)    mean HU of each file's pixels
 *   output tissue_fraction "tissue_fraction:0" DT_FLOAT  (-1, 4) fractions of pixels with
 *          HU < -400, -400 <= HU < 0, 0 <= HU < 300, HU >= 300
 *
 *   dec  = DcmDecodeHU(dicom)            hu (N,H,W,C) padded, mask (N,H,W,1)
 *   n    = Sum(mask, [1,2,3])
 *   mean_hu = Sum(hu * mask, [1,2,3]) / n
 *   frac_k  = Sum(Cast(band_k(hu)) * mask, [1,2,3]) / n,  bands by Less/GreaterEqual/LogicalAnd
 *   tissue_fraction = Pack(frac_0..3, axis 1)
 *
 * Files of different sizes in one batch work through the mask. The graph
 * carries DcmDecodeHU's OpDef (two outputs) in its stripped_op_list. Colour
 * files would count each sample; the model is meant for CT. */
#ifndef DCM_DEMO_MODEL_H
#define DCM_DEMO_MODEL_H

#include "ms_status.h"

/* Writes the model into version_dir (created if needed, not its parents). */
ms_status dcm_demo_model_write(const char *version_dir);

#endif /* DCM_DEMO_MODEL_H */
