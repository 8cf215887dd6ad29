/* util_paths.h - where tests find data: $DCM_SHARED (the shared/ folder beside
 * the repo), $DCM_SRC (the repo), $DCM_BIN (the build folder), all set by ctest. */
#ifndef UTIL_PATHS_H
#define UTIL_PATHS_H

#include <stddef.h>

/* Writes "$DCM_SHARED/testdata/savedmodels/<rel>" into buf; returns buf. */
char *tu_savedmodel_path(char *buf, size_t cap, const char *rel);
/* $DCM_SRC, $DCM_BIN, $DCM_SHARED with fallbacks relative to the build dir. */
const char *tu_src_dir(void);
const char *tu_bin_dir(void);
const char *tu_shared_dir(void);
/* A fresh empty temporary directory (mkdtemp under $TMPDIR or /tmp). */
char *tu_tmpdir(char *buf, size_t cap);

#endif /* UTIL_PATHS_H */
