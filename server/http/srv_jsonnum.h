/* srv_jsonnum.h - one JSON number as one tensor element, for the REST APIs
 * (srv_rest.c :predict, srv_rest_v2.c KServe infer). No silent rounding or
 * wrapping: an integer dtype takes only integers within its range, a float
 * dtype only values within its finite range; anything else is an
 * INVALID_ARGUMENT naming the input, the element and the dtype (a C cast of
 * such a value would be undefined behaviour, or a wrong value). */
#ifndef SRV_JSONNUM_H
#define SRV_JSONNUM_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "rt_tensor.h"

/* Writes v as element `index` of input `name` with dtype dt (named `dtname`
 * in messages) into dst, its byte size into *n (at most 8). MS_EINVAL for a
 * value dt cannot hold, or a dt that JSON numbers cannot give. */
ms_status srv_json_number(double v, rt_dtype dt, const char *dtname, const char *name,
                          int64_t index, void *dst, size_t *n);

#endif /* SRV_JSONNUM_H */
