/* srv_jsonnum.c - one JSON number as one tensor element (srv_jsonnum.h). */
#include "srv_jsonnum.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kn_cpu_util.h"

ms_status srv_json_number(double v, rt_dtype dt, const char *dtname, const char *name,
                          int64_t index, void *dst, size_t *n) {
    double lo = 0, hi = 0; /* hi is exclusive for the 64-bit types (2^63, 2^64) */
    int integral = 1, hi_open = 0;
    switch (dt) {
    case RT_DT_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case RT_DT_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case RT_DT_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case RT_DT_INT64: lo = -9223372036854775808.0, hi = 9223372036854775808.0, hi_open = 1; break;
    case RT_DT_UINT8: hi = UINT8_MAX; break;
    case RT_DT_UINT16: hi = UINT16_MAX; break;
    case RT_DT_UINT32: hi = UINT32_MAX; break;
    case RT_DT_UINT64: hi = 18446744073709551616.0, hi_open = 1; break;
    case RT_DT_FLOAT:
    case RT_DT_HALF:
    case RT_DT_BFLOAT16: lo = -FLT_MAX, hi = FLT_MAX, integral = 0; break;
    case RT_DT_DOUBLE: lo = -DBL_MAX, hi = DBL_MAX, integral = 0; break;
    default:
        return ms_errf(MS_EINVAL, "input \"%s\": %s cannot be given in JSON", name, dtname);
    }
    if (integral && v != floor(v))
        return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " (%g) is not an integer; %s "
                                  "holds integers", name, index, v, dtname);
    if (!(v >= lo) || v > hi || (hi_open && v >= hi))
        return ms_errf(MS_EINVAL, "input \"%s\": element %" PRId64 " (%g) is out of the range of "
                                  "%s", name, index, v, dtname);
    switch (dt) {
    case RT_DT_INT8: *(int8_t *)dst = (int8_t)v, *n = 1; break;
    case RT_DT_INT16: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); *n = 2; break; }
    case RT_DT_INT32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); *n = 4; break; }
    case RT_DT_INT64: { int64_t x = (int64_t)v; memcpy(dst, &x, 8); *n = 8; break; }
    case RT_DT_UINT8: *(uint8_t *)dst = (uint8_t)v, *n = 1; break;
    case RT_DT_UINT16: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); *n = 2; break; }
    case RT_DT_UINT32: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); *n = 4; break; }
    case RT_DT_UINT64: { uint64_t x = (uint64_t)v; memcpy(dst, &x, 8); *n = 8; break; }
    case RT_DT_FLOAT: { float x = (float)v; memcpy(dst, &x, 4); *n = 4; break; }
    /* One rounding from the double (through float would round twice). */
    case RT_DT_HALF: { uint16_t x = kn__f64_to_half(v); memcpy(dst, &x, 2); *n = 2; break; }
    case RT_DT_BFLOAT16: { uint16_t x = kn__f64_to_bf16(v); memcpy(dst, &x, 2); *n = 2; break; }
    default: memcpy(dst, &v, 8), *n = 8; break;
    }
    return MS_OK;
}
