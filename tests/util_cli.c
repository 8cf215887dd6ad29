/* util_cli.c - helpers for the signature / .npy / CLI Check tests. */
#include "util_cli.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *util_cli_model_dir(const char *rel, char *buf, size_t n) {
    const char *shared = getenv("DCM_SHARED");
    if (shared == NULL || shared[0] == '\0') shared = "../shared";
    snprintf(buf, n, "%s/testdata/savedmodels/%s", shared, rel);
    return buf;
}

static rt_tensor *make(rt_dtype dt, int rank, const int64_t *dims, const void *vals) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    if (vals != NULL) memcpy(t->data, vals, rt_tensor_nbytes(t));
    return t;
}

rt_tensor *util_cli_f32(int rank, const int64_t *dims, const float *vals) {
    return make(RT_DT_FLOAT, rank, dims, vals);
}

rt_tensor *util_cli_i32(int rank, const int64_t *dims, const int32_t *vals) {
    return make(RT_DT_INT32, rank, dims, vals);
}
