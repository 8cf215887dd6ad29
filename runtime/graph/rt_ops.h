/* rt_ops.h - host ops: the ops the runtime itself implements because they
 * touch model state or files rather than compute (Placeholder, Const,
 * Identity, variables here; RestoreV2 in runtime/savedmodel, DICOM decoding in
 * runtime/dicom). They use the kn_kernel shape of kernels/kn_backend.h. A
 * graph carries the list of host tables it may use (rt_graph.host_ops, set by
 * whoever builds it: the SavedModel loader passes every table); the executor
 * looks an op up there first and then in the backend. Each table ends with an
 * entry whose op is NULL. */
#ifndef RT_OPS_H
#define RT_OPS_H

#include "kn_backend.h"

extern const kn_kernel rt_ops_core_kernels[];   /* graph plumbing and variables */
extern const kn_kernel rt_ops_table_kernels[];  /* lookup tables (rt_ops_table.c) */
extern const kn_kernel rt_ops_control_kernels[];    /* While, If, Case (rt_ops_control.c) */
extern const kn_kernel rt_ops_tensorlist_kernels[]; /* TensorList* (rt_ops_tensorlist.c) */
extern const kn_kernel rt_ops_example_kernels[];    /* ParseExample* (rt_example.c) */
extern const kn_kernel rt_ops_resource_kernels[];   /* ResourceGather(Nd) (rt_ops_resource.c) */
extern const kn_kernel rt_ops_sw_kernels[];         /* _SlidingWindow (rt_ops_sw.c) */

/* The sliding-window op: runs the model between its `patch` Placeholder and
 * its `pred` tensor (string attrs) over patches of its input volume. */
#define RT_SW_OP "_SlidingWindow"

/* Whether op is refused by name (TF1 Enter/Exit/Merge/Switch loops: their
 * kernels only fail with a clear message). rt_ops_control.c. */
int rt_ops_control_refused(const char *op);

/* The kernel for op in a NULL-terminated list of host tables, or NULL. */
const kn_kernel *rt_ops_host_kernel(const kn_kernel *const *tables, const char *op);

#endif /* RT_OPS_H */
