/* dcm_npy.h - a minimal NumPy .npy (format 1.0) writer for float32 arrays,
 * used by `dcmserve dicom --out`. Little-endian '<f4', C order. */
#ifndef DCM_NPY_H
#define DCM_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ms_status.h"

/* Writes a float32 array of `rank` dims (1..8) to the open stream f.
 * MS_EINVAL for a bad shape, MS_EINTERNAL when writing fails. */
ms_status dcm_npy_write_f32(FILE *f, const float *data, int rank, const uint64_t *dims);
/* The same to a file path (created or truncated). */
ms_status dcm_npy_save_f32(const char *path, const float *data, int rank, const uint64_t *dims);

#endif /* DCM_NPY_H */
