/* util_paths.c - test data locations (see util_paths.h). */
#include "util_paths.h"

#include <stdio.h>
#include <stdlib.h>

const char *tu_src_dir(void) {
    const char *s = getenv("DCM_SRC");
    return s ? s : "..";
}

const char *tu_bin_dir(void) {
    const char *s = getenv("DCM_BIN");
    return s ? s : ".";
}

const char *tu_shared_dir(void) {
    const char *s = getenv("DCM_SHARED");
    return s ? s : "../../shared";
}

char *tu_savedmodel_path(char *buf, size_t cap, const char *rel) {
    snprintf(buf, cap, "%s/testdata/savedmodels/%s", tu_shared_dir(), rel);
    return buf;
}

char *tu_tmpdir(char *buf, size_t cap) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/dcmtest.XXXXXX", t ? t : "/tmp");
    if (mkdtemp(buf) == NULL) buf[0] = '\0';
    return buf;
}
