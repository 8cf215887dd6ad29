/* util_cli.h - helpers shared by the signature / .npy / CLI Check tests:
 * paths of the shared test models and small tensor builders. */
#ifndef UTIL_CLI_H
#define UTIL_CLI_H

#include <stddef.h>

#include "rt_tensor.h"

/* Writes "$DCM_SHARED/testdata/savedmodels/<rel>" into buf (NUL-terminated)
 * and returns buf. DCM_SHARED defaults to "../shared" when unset. */
char *util_cli_model_dir(const char *rel, char *buf, size_t n);

/* New float tensor of the given shape holding vals[0..nelem-1]; aborts the
 * test (ck_assert) on failure. The caller owns the reference. */
rt_tensor *util_cli_f32(int rank, const int64_t *dims, const float *vals);

/* New int32 tensor, as util_cli_f32. */
rt_tensor *util_cli_i32(int rank, const int64_t *dims, const int32_t *vals);

#endif /* UTIL_CLI_H */
