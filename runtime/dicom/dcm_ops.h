/* dcm_ops.h - the DICOM graph ops (DcmDecodeHU, TensorFlow I/O's
 * IO>DecodeDICOMImage) as a table of host kernels in the kn_kernel shape of
 * kernels/kn_backend.h, ended by an entry whose op is NULL. The SavedModel
 * loader lists it among its host op tables (rt_model_host_ops). */
#ifndef DCM_OPS_H
#define DCM_OPS_H

#include "kn_backend.h"

extern const kn_kernel dcm_ops_kernels[];

#endif /* DCM_OPS_H */
