/* ms_malloc.h - process-wide settings of glibc's malloc for the servers. */
#ifndef MS_MALLOC_H
#define MS_MALLOC_H

#include <stddef.h>

/* What ms_malloc_keep_heap sets (docs/serving.md, "glibc's heap"). */
#define MS_MALLOC_MMAP_THRESHOLD ((size_t)8 << 20)
#define MS_MALLOC_TRIM_THRESHOLD ((size_t)32 << 20)

/* Keeps glibc from handing the top of its heap back to the kernel after
 * every large request. By default glibc trims the heap whenever more than
 * its trim threshold (128 KiB, raised only after a large mmap'd block was
 * freed: from one start of a process to the next it may or may not be) is
 * free at the top; gRPC reads a 531 KB message into slices of a few KiB,
 * frees them together, and the heap shrinks (brk, with a TLB shootdown on
 * the other CPUs) and grows again (a page fault per 4 KiB) on every call.
 * Blocks under MS_MALLOC_MMAP_THRESHOLD come from the heap, and up to
 * MS_MALLOC_TRIM_THRESHOLD of free memory stays at the top of each arena;
 * explicit malloc_trim calls return what is free in every arena and the top
 * of the main arena only (so `serve` keeps glibc to one arena). Does nothing
 * for a setting the environment gives (MALLOC_TRIM_THRESHOLD_,
 * MALLOC_MMAP_THRESHOLD_, or glibc.malloc.* in GLIBC_TUNABLES). Returns
 * how many of the two it set. */
int ms_malloc_keep_heap(void);

#endif /* MS_MALLOC_H */
