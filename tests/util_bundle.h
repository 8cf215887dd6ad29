/* util_bundle.h - helpers for the bundle / SSTable / graph-builder tests:
 * whole-file I/O and removing temporary folders (paths: util_paths.h). */
#ifndef UTIL_BUNDLE_H
#define UTIL_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

/* Removes a folder tree (nftw); returns 0 on success. */
int ut_rmtree(const char *path);
/* Reads a whole file into a malloc'ed buffer; NULL on failure. */
uint8_t *ut_read_file(const char *path, size_t *n);
/* Writes buf[0..n) to path (truncating); returns 0 on success. */
int ut_write_file(const char *path, const void *buf, size_t n);

#endif /* UTIL_BUNDLE_H */
