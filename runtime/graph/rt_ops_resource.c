/* rt_ops_resource.c - host ops that read a resource variable through a
 * gather instead of a ReadVariableOp: ResourceGather (with batch_dims: the
 * gather axis is batch_dims, as TensorFlow's kernel has it) and
 * ResourceGatherNd, as Keras Embedding layers and tf.gather / tf.gather_nd on
 * a variable export them. The gather itself is the CPU kernels' own
 * (kernels/kn_gather.c), so values and messages match GatherV2 / GatherNd;
 * an out-of-range index is INVALID_ARGUMENT naming the node and the index. */
#include "kn_gather.h"
#include "rt_exec.h"
#include "rt_ops.h"

static ms_status gather_var(const kn_node *n, rt_tensor *const *in, rt_tensor **value) {
    if (n->nin < 2 || in[0] == NULL || in[1] == NULL)
        return ms_errf(MS_EINVAL, "node '%s' (%s): expected 2 inputs", n->name, n->op);
    const rt_tensor *h = in[0];
    if (h->dtype != RT_DT_RESOURCE || h->nelem != 1 || *(rt_var **)h->data == NULL)
        return ms_errf(MS_EINVAL, "node '%s' (%s): input 0 is not a variable handle", n->name,
                       n->op);
    rt_var *v = *(rt_var **)h->data;
    if (v->value == NULL)
        return ms_errf(MS_EINVAL, "node '%s' (%s): variable '%s' is not initialised", n->name,
                       n->op, v->name);
    rt_dtype want = kn_attr_type(n, "dtype", v->value->dtype);
    if (want != v->value->dtype)
        return ms_errf(MS_EINVAL, "node '%s' (%s): variable '%s' holds %s, the node reads %s",
                       n->name, n->op, v->name, rt_dtype_name(v->value->dtype),
                       rt_dtype_name(want));
    *value = v->value;
    return MS_OK;
}

static ms_status resource_gather_compute(kn_ctx *ctx, const kn_node *n, void *st,
                                         rt_tensor *const *in, rt_tensor **out) {
    (void)st;
    rt_tensor *value;
    ms_status s = gather_var(n, in, &value);
    if (s != MS_OK) return s;
    int64_t bd = kn_attr_i(n, "batch_dims", 0);
    int64_t axis = bd < 0 ? bd + in[1]->shape.rank : bd;
    return kn_gather_axis(ctx, n, value, in[1], axis, bd, &out[0]);
}

static ms_status resource_gather_nd_compute(kn_ctx *ctx, const kn_node *n, void *st,
                                            rt_tensor *const *in, rt_tensor **out) {
    (void)st;
    rt_tensor *value;
    ms_status s = gather_var(n, in, &value);
    if (s != MS_OK) return s;
    return kn_gather_nd(ctx, n, value, in[1], &out[0]);
}

/* clang-format off */
const kn_kernel rt_ops_resource_kernels[] = {
    {.op = "ResourceGather", .compute = resource_gather_compute, .stateful = 1},
    {.op = "ResourceGatherNd", .compute = resource_gather_nd_compute, .stateful = 1},
    {.op = NULL},
};
/* clang-format on */
