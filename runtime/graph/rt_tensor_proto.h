/* rt_tensor_proto.h - tensorflow.TensorProto / TensorShapeProto <-> rt_tensor.
 *
 * Accepts every encoding TensorFlow writes: tensor_content, the typed *_val
 * fields (half_val for DT_HALF/DT_BFLOAT16, int_val for 8/16-bit ints), and
 * version-0 broadcast of a single value to the whole shape. */
#ifndef RT_TENSOR_PROTO_H
#define RT_TENSOR_PROTO_H

#include "ms_budget.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"

/* Converts a shape proto. unknown_rank gives rank -1; -1 dims stay -1.
 * MS_EINVAL for more than RT_MAX_RANK dims. A NULL proto is rank 0. */
ms_status rt_shape_from_proto(const Tensorflow__TensorShapeProto *p, rt_shape *out);

/* Decodes a TensorProto into a new tensor (data copied). MS_EINVAL with a
 * message when the shape is partial, the dtype unsupported or the number of
 * values does not fit the shape. */
ms_status rt_tensor_from_proto(const Tensorflow__TensorProto *p, rt_tensor **out);
/* The same for a tensor from a client: every count and byte length is
 * checked against the shape before anything is allocated, the bytes are
 * taken from `budget` first (MS_ENOMEM naming --max_request_memory_bytes;
 * NULL = unlimited), _REF dtypes and dtypes we do not hold are MS_EINVAL.
 * Broadcast string_val elements share their bytes. With `keep` non-NULL,
 * string_val bytes are not copied when keep->fn hands over a buffer that
 * owns them (it returns a new reference owning every non-empty vals[k].data,
 * or NULL: copy). */
typedef struct rt_strkeep {
    rt_buf *(*fn)(void *arg, const ProtobufCBinaryData *vals, size_t n);
    void *arg;
} rt_strkeep;
ms_status rt_tensor_from_request_proto(const Tensorflow__TensorProto *p, ms_budget *budget,
                                       const rt_strkeep *keep, rt_tensor **out);

/* Fills *p (already initialised with TENSORFLOW__TENSOR_PROTO__INIT) from t.
 * use_content != 0 writes tensor_content for POD dtypes; otherwise the typed
 * *_val field TensorFlow Serving uses. Memory hanging off *p is malloc'ed and
 * released with rt_tensor_proto_clear(p). tensor_content and string bytes are
 * borrowed from t: keep t alive until *p is packed or cleared. */
ms_status rt_tensor_to_proto(const rt_tensor *t, int use_content, Tensorflow__TensorProto *p);
void rt_tensor_proto_clear(Tensorflow__TensorProto *p);

/* Same for a shape; release with rt_shape_proto_clear. rank -1 -> unknown_rank. */
ms_status rt_shape_to_proto(const rt_shape *s, Tensorflow__TensorShapeProto *p);
void rt_shape_proto_clear(Tensorflow__TensorShapeProto *p);

#endif /* RT_TENSOR_PROTO_H */
