/* dcm_ops.h - the DICOM graph ops (DcmDecodeHU, TensorFlow I/O's
 * IO>DecodeDICOMImage) as a table of host kernels in the kn_kernel shape of
 * kernels/kn_backend.h, ended by an entry whose op is NULL. The SavedModel
 * loader lists it among its host op tables (rt_model_host_ops). */
#ifndef DCM_OPS_H
#define DCM_OPS_H

#include <stdint.h>

#include "kn_backend.h"

extern const kn_kernel dcm_ops_kernels[];

/* Process-wide counters of the DICOM decoding these ops did (for the
 * server's /metrics): files and bytes handed to the decoder, frames decoded,
 * files refused by reason. Monotonic; read with dcm_ops_stats_read. */
typedef enum dcm_err_reason {
    DCM_ERR_INVALID = 0, /* not DICOM, malformed, truncated, frame out of range */
    DCM_ERR_UNSUPPORTED, /* a transfer syntax or pixel format this build does not decode */
    DCM_ERR_TOO_LARGE,   /* over the decoder's size limits, or out of memory */
    DCM_ERR_CORRUPT,     /* compressed data that does not decode */
    DCM_ERR_OTHER,
    DCM_ERR_NREASONS
} dcm_err_reason;

typedef struct dcm_ops_stats {
    uint64_t files, bytes, frames;
    uint64_t pixels; /* samples decoded by the pixel module (dcm_pixels_decoded) */
    uint64_t errors[DCM_ERR_NREASONS];
} dcm_ops_stats;

void dcm_ops_stats_read(dcm_ops_stats *out);
/* "invalid", "unsupported", "too_large", "corrupt", "other". */
const char *dcm_ops_err_reason_name(int reason);

#endif /* DCM_OPS_H */
