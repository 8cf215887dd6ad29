/* ms_malloc.c - process-wide settings of glibc's malloc for the servers. */
#include "ms_malloc.h"

#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

static int env_sets(const char *var, const char *tunable) {
    if (getenv(var) != NULL) return 1;
    const char *t = getenv("GLIBC_TUNABLES");
    return t != NULL && strstr(t, tunable) != NULL;
}

int ms_malloc_keep_heap(void) {
    int n = 0;
#ifdef __GLIBC__
    /* Both settings are given: setting either one by hand turns off glibc's
     * own adjustment of the other. */
    if (!env_sets("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold") &&
        mallopt(M_MMAP_THRESHOLD, (int)MS_MALLOC_MMAP_THRESHOLD) == 1)
        n++;
    if (!env_sets("MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold") &&
        mallopt(M_TRIM_THRESHOLD, (int)MS_MALLOC_TRIM_THRESHOLD) == 1)
        n++;
#endif
    return n;
}
