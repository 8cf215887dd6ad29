/* ms_build.c - build facts passed in by CMake as definitions of this one
 * file (CMakeLists.txt), so that a new commit recompiles nothing else. */
#include "ms_build.h"

#ifndef MS_BUILD_VERSION
#define MS_BUILD_VERSION "unknown"
#endif
#ifndef MS_BUILD_COMMIT
#define MS_BUILD_COMMIT "unknown"
#endif
#ifndef MS_BUILD_TYPE
#define MS_BUILD_TYPE "none"
#endif
#ifndef MS_BUILD_CUDA
#define MS_BUILD_CUDA 0
#endif

const char *ms_build_version(void) {
    return MS_BUILD_VERSION;
}

const char *ms_build_commit(void) {
    return MS_BUILD_COMMIT;
}

const char *ms_build_type(void) {
    return MS_BUILD_TYPE[0] ? MS_BUILD_TYPE : "none";
}

int ms_build_cuda(void) {
    return MS_BUILD_CUDA;
}

int ms_build_sanitize(void) {
#ifdef MS_SANITIZE
    return 1;
#else
    return 0;
#endif
}
