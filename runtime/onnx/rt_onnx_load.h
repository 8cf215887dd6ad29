/* rt_onnx_load.h - serving model.onnx: the in-memory conversion the model
 * loader (rt_model.h) runs for a version folder that holds model.onnx.
 *
 * runtime/savedmodel sits below this layer, so it cannot call the converter
 * itself: a program that serves or inspects models installs it once at start
 * with rt_onnx_serve_enable. */
#ifndef RT_ONNX_LOAD_H
#define RT_ONNX_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ms_file.h"
#include "ms_status.h"

/* Reads `name` beneath root (ms_file.h: no name leaves the folder; external
 * data files are opened beneath it the same way) and converts it with
 * default options (rt_onnx_convert_mem): *pb is the malloc'ed serialized
 * SavedModel. When the conversion is refused (MS_ENOTSUP), the message lists
 * every node the converter cannot take (unknown op, other domain, op version
 * or attribute not implemented at the model's opset), grouped by op, and then
 * the converter's own first refusal, which names node, op and what is
 * missing. */
ms_status rt_onnx_load_convert(const ms_dir *root, const char *name, uint8_t **pb,
                               size_t *pb_len);

/* Installs rt_onnx_load_convert as the loader's converter
 * (rt_model_set_onnx_converter). Call once, before models load. */
void rt_onnx_serve_enable(void);

#endif /* RT_ONNX_LOAD_H */
