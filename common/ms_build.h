/* ms_build.h - what this binary is: version, the git commit it was built
 * from and the build options, as CMake saw them at configure time (one
 * place for `dcmserve --version`, `dcmserve info`, KServe's ServerMetadata
 * and /metrics' dcmserve_build_info). */
#ifndef MS_BUILD_H
#define MS_BUILD_H

/* The project version, e.g. "0.1.0". */
const char *ms_build_version(void);

/* The git commit (12 hex digits, "-dirty" when the tree had changes) at
 * configure time; "unknown" when the source was not a git checkout. */
const char *ms_build_commit(void);

/* CMAKE_BUILD_TYPE, e.g. "RelWithDebInfo"; "none" when unset. */
const char *ms_build_type(void);

/* 1 when built with the CUDA backend. */
int ms_build_cuda(void);

/* 1 when built with ASan+UBSan (MS_SANITIZE). */
int ms_build_sanitize(void);

#endif /* MS_BUILD_H */
