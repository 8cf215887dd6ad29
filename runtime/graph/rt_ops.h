/* rt_ops.h - host ops: the ops the runtime itself implements because they
 * touch model state or files rather than compute (Placeholder, Const,
 * Identity, variables, RestoreV2, DICOM decoding). They use the kn_kernel
 * shape of kernels/kn_backend.h; the executor looks an op up here first and
 * then in the backend. Each runtime/rt_ops_<group>.c exports one table,
 * terminated by an entry whose op is NULL. */
#ifndef RT_OPS_H
#define RT_OPS_H

#include "kn_backend.h"

extern const kn_kernel rt_ops_core_kernels[];   /* graph plumbing and variables */
extern const kn_kernel rt_ops_restore_kernels[]; /* RestoreV2 from a tensor bundle */
extern const kn_kernel rt_ops_dicom_kernels[];  /* DICOM bytes -> HU tensors */

/* The host kernel for op, or NULL. */
const kn_kernel *rt_ops_host_kernel(const char *op);

#endif /* RT_OPS_H */
