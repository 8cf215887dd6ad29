/* kn_threadpool.h - the intra-op thread pool behind kn_ctx_parallel_for.
 *
 * One process-wide pool, created on first use with the largest thread count
 * asked for. A parallel_for splits [0, n) into chunks taken by the pool's
 * threads and the caller; when another request holds the pool, the caller runs
 * its range alone (no waiting, no deadlock). */
#ifndef KN_THREADPOOL_H
#define KN_THREADPOOL_H

#include <stdint.h>

void kn_parallel_for(int nthreads, int64_t n, int64_t min_chunk,
                     void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

#endif /* KN_THREADPOOL_H */
