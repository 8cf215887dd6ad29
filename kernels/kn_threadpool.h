/* kn_threadpool.h - the intra-op thread pool behind kn_ctx_parallel_for.
 *
 * One process-wide pool, created on first use with the largest thread count
 * asked for. A parallel_for splits [0, n) into chunks taken by the pool's
 * threads and the caller; when another request holds the pool, the caller runs
 * its range alone (no waiting, no deadlock). */
#ifndef KN_THREADPOOL_H
#define KN_THREADPOOL_H

#include <stdint.h>

/* The nice every pool thread started from now on takes (absolute, 0-19;
 * negative: inherit the starting thread's, the default). The server sets
 * its inference workers' nice here before any model loads, so the pool's
 * threads compute at the workers' priority whichever thread started them
 * (a model's warm-up runs on the loader). */
void kn_threadpool_set_nice(int nice);

void kn_parallel_for(int nthreads, int64_t n, int64_t min_chunk,
                     void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

#endif /* KN_THREADPOOL_H */
