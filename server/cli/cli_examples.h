/* cli_examples.h - `dcmserve run --input_examples` (cli_examples.c). */
#ifndef CLI_EXAMPLES_H
#define CLI_EXAMPLES_H

#include "ms_status.h"
#include "rt_tensor.h"

/* A DT_STRING [n] tensor of serialized tf.Examples from a JSON list of n
 * objects (feature name -> list of numbers or strings). MS_EINVAL naming
 * `key` for malformed text. */
ms_status cli_examples_tensor(const char *key, const char *json, rt_tensor **out);

#endif /* CLI_EXAMPLES_H */
