/* util_cli.h - helpers shared by the signature / .npy / CLI Check tests:
 * small tensor builders and a way to run Debian's Python (numpy) as an
 * independent reference. */
#ifndef UTIL_CLI_H
#define UTIL_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "rt_tensor.h"

/* New tensor of dtype dt and the given shape, its bytes copied from vals
 * (NULL: zero-filled). ck_asserts on failure. The caller owns the reference. */
rt_tensor *util_cli_tensor(rt_dtype dt, int rank, const int64_t *dims, const void *vals);

/* Writes `script` to <dir>/script.py and runs `/usr/bin/python3 script.py`
 * with <dir> as working directory. Returns the exit status (-1 when it could
 * not be run). */
int util_cli_python(const char *dir, const char *script);

/* Reads a whole file into a malloc'ed, NUL-terminated buffer (*n = size
 * without the NUL). NULL when it cannot be read. */
char *util_cli_read_file(const char *path, size_t *n);

#endif /* UTIL_CLI_H */
