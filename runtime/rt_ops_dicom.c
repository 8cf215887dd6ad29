/* rt_ops_dicom.c - host ops that decode DICOM files (table filled as ops land). */
#include "rt_ops.h"

const kn_kernel rt_ops_dicom_kernels[] = {
    {.op = NULL},
};
