/* ms_memlimit.c - how much memory this process may use. */
#include "ms_memlimit.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

long long ms_memory_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    long long lim = pages > 0 && psz > 0 ? (long long)pages * psz : (long long)1 << 40;
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        char *ctl = strchr(line, ':'), *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (path == NULL) continue;
        *path++ = 0;
        path[strcspn(path, "\n")] = 0;
        const char *mounts[2], *file;
        int nm;
        if (strcmp(ctl + 1, "") == 0) {
            mounts[0] = "/sys/fs/cgroup";
            mounts[1] = "/sys/fs/cgroup/unified";
            nm = 2;
            file = "memory.max";
        } else if (strstr(ctl + 1, "memory") != NULL) {
            mounts[0] = "/sys/fs/cgroup/memory";
            nm = 1;
            file = "memory.limit_in_bytes";
        } else {
            continue;
        }
        for (int m = 0; m < nm; m++)
            for (const char *tail = path; tail; tail = strchr(tail + 1, '/')) {
                char dir[1400];
                snprintf(dir, sizeof dir, "%s%s", mounts[m], tail);
                for (;;) { /* this folder and those above it */
                    char fn[1500];
                    snprintf(fn, sizeof fn, "%s/%s", dir, file);
                    FILE *g = fopen(fn, "r");
                    long long v = 0;
                    if (g && fscanf(g, "%lld", &v) == 1 && v > 0 && v < lim) lim = v;
                    if (g) fclose(g);
                    char *slash = strrchr(dir, '/');
                    if (slash == NULL || (size_t)(slash - dir) < strlen(mounts[m])) break;
                    *slash = 0;
                }
            }
    }
    if (f) fclose(f);
    return lim;
}
