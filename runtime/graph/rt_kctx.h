/* rt_kctx.h - running a single op outside a graph (kernel tests, tools). */
#ifndef RT_KCTX_H
#define RT_KCTX_H

#include "kn_backend.h"
#include "tf_framework.pb-c.h"

/* Looks the kernel up (host ops, then the backend), builds a kn_node from
 * def, calls prepare (no constant inputs) and compute. outs[0..nout-1] get
 * new references; on error none are set. be may be NULL for host ops. */
ms_status rt_op_run1(kn_backend *be, const Tensorflow__NodeDef *def, rt_tensor *const *in, int nin,
                     rt_tensor **outs, int nout);

#endif /* RT_KCTX_H */
