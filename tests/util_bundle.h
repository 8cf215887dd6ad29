/* util_bundle.h - helpers for the bundle / SSTable / graph-builder tests:
 * paths of test data, temporary folders, whole-file I/O. */
#ifndef UTIL_BUNDLE_H
#define UTIL_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "kn_backend.h"
#include "rt_graphbuild.h"
#include "rt_model.h"

/* Exit status of a test that skips (ctest's SKIP_RETURN_CODE in
 * CMakeLists.txt). */
#define UT_SKIP_RC 77

/* The source root: $DCM_SRC (set by CMake for every test), else "..", right
 * for a build folder inside the repo. */
const char *ut_src(void);
/* "$DCM_SRC/tests/data/<rel>" into buf: test data committed to the repo, such
 * as the TensorFlow SavedModels under savedmodels/. Returns buf. */
char *ut_data_path(const char *rel, char *buf, size_t n);
/* "$DCM_SHARED/<rel>" into buf ($DCM_SHARED defaults to "$DCM_SRC/../shared"):
 * only for third-party data that is not in the repo. Returns buf. */
char *ut_shared_path(const char *rel, char *buf, size_t n);
/* Non-zero when $DCM_SHARED/<rel> does not exist; then it has printed the one
 * line "SKIP: ../shared/<rel> not found" to stdout. A test binary that needs
 * it returns UT_SKIP_RC from main; a test case that needs it returns early. */
int ut_shared_missing(const char *rel);
/* Creates a fresh temporary folder; its path goes into buf (>= 64 bytes).
 * Returns 0 on success. */
int ut_mkdtemp(char *buf, size_t n);
/* Removes a folder tree (nftw); returns 0 on success. */
int ut_rmtree(const char *path);
/* Reads a whole file into a malloc'ed buffer; NULL on failure. */
uint8_t *ut_read_file(const char *path, size_t *n);
/* Writes buf[0..n) to path (truncating); returns 0 on success. */
int ut_write_file(const char *path, const void *buf, size_t n);

/* Writes g as version 1 of a fresh temporary folder (the folder's path into
 * dir, n >= 64, for ut_rmtree; the version's into vdir), failing the test
 * unless that succeeds; frees g. */
void ut_gb_write(rt_gb *g, char *dir, size_t n, char *vdir, size_t vn);
/* Loads the SavedModel in vdir (tags {serve}) with be into *m (NULL on
 * failure); returns the load's status. */
ms_status ut_load_serve(const char *vdir, kn_backend *be, rt_model **m);

#endif /* UTIL_BUNDLE_H */
