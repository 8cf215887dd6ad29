/* srv_kserve.h - the KServe v2 input conversion, shared by the handler and
 * its fuzz target (tests/fuzz/fuzz_handlers.c). */
#ifndef SRV_KSERVE_H
#define SRV_KSERVE_H

#include "kserve.pb-c.h"
#include "ms_budget.h"
#include "rt_model.h"
#include "rt_tensor.h"

/* The platform ModelMetadata and ModelConfig name for a model, as Triton
 * names it: "onnxruntime_onnx" for a version folder holding model.onnx
 * (converted at load), "tensorflow_savedmodel" otherwise. */
const char *srv_kserve_platform(const rt_model *m);

/* The extensions ServerMetadata lists: Triton's that dcmserve serves
 * (srv_triton.c), over gRPC and REST. */
#define SRV_KSERVE_EXTENSIONS {"model_repository", "model_configuration", "statistics"}

/* A KServe version string: "" -> 0 (server policy), "3" -> 3; MS_EINVAL
 * otherwise. */
ms_status srv_kserve_parse_version(const char *s, int64_t *out);

/* One ModelInferRequest input to a tensor: typed contents, or raw (BYTES:
 * 4-byte little-endian length + bytes per element) when raw is not NULL.
 * Every count and byte length is checked against datatype and shape before
 * anything is allocated; the bytes are then taken from budget (NULL: none). */
ms_status srv_kserve_input(const Inference__ModelInferRequest__InferInputTensor *in,
                           const ProtobufCBinaryData *raw, ms_budget *budget, rt_tensor **out);

#endif /* SRV_KSERVE_H */
