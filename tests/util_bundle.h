/* util_bundle.h - helpers for the bundle / SSTable / graph-builder tests:
 * paths of shared test data, temporary folders, whole-file I/O. */
#ifndef UTIL_BUNDLE_H
#define UTIL_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

/* "$DCM_SHARED/<rel>" into buf (falls back to "../shared" when unset).
 * Returns buf. */
char *ut_shared_path(const char *rel, char *buf, size_t n);
/* Creates a fresh temporary folder; its path goes into buf (>= 64 bytes).
 * Returns 0 on success. */
int ut_mkdtemp(char *buf, size_t n);
/* Removes a folder tree (nftw); returns 0 on success. */
int ut_rmtree(const char *path);
/* Reads a whole file into a malloc'ed buffer; NULL on failure. */
uint8_t *ut_read_file(const char *path, size_t *n);
/* Writes buf[0..n) to path (truncating); returns 0 on success. */
int ut_write_file(const char *path, const void *buf, size_t n);

#endif /* UTIL_BUNDLE_H */
