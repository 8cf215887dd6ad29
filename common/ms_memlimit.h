/* ms_memlimit.h - how much memory this process may use, for the defaults
 * that scale with it (the REST server's buffered bytes, the output buffer
 * pools' cap). */
#ifndef MS_MEMLIMIT_H
#define MS_MEMLIMIT_H

/* The memory this process may use, in bytes: the smallest limit of its
 * memory cgroup (v2 memory.max, v1 memory.limit_in_bytes, of its folder and
 * those above it; the folder is looked for under each mount, as a container
 * may show it) and physical memory. Reads the files on every call. */
long long ms_memory_limit(void);

#endif /* MS_MEMLIMIT_H */
