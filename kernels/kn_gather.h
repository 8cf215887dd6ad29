/* kn_gather.h - the gathers shared by the CPU kernels (GatherV2, GatherNd)
 * and the host ops that gather from a resource variable (ResourceGather,
 * ResourceGatherNd in runtime/graph), so both give the same values and the
 * same messages. Host memory only.
 *
 * Errors name the node: "node 'n' (Op): ...". An index out of range is
 * MS_EINVAL naming it. The output comes from kn_ctx_output (slot 0) and is
 * the caller's on success.
 */
#ifndef KN_GATHER_H
#define KN_GATHER_H

#include <stdint.h>

#include "kn_backend.h"

/* TensorFlow's GatherV2: out = params[:axis] + indices[batch_dims:] +
 * params[axis + 1:], the first batch_dims axes of params and indices matched
 * (equal sizes), not gathered. Negative axis counts from params' rank,
 * negative batch_dims from indices' rank; batch_dims <= axis. Plain dtypes. */
ms_status kn_gather_axis(kn_ctx *ctx, const kn_node *node, const rt_tensor *params,
                         const rt_tensor *indices, int64_t axis, int64_t batch_dims,
                         rt_tensor **out);

/* TensorFlow's GatherNd: indices [..., D] address params' first D axes;
 * out = indices[:-1] + params[D:]. Plain dtypes. */
ms_status kn_gather_nd(kn_ctx *ctx, const kn_node *node, const rt_tensor *params,
                       const rt_tensor *indices, rt_tensor **out);

#endif /* KN_GATHER_H */
