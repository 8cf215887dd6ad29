/* kn_ctx.h - the context a kernel runs in, and the buffer pool its outputs
 * come from. Filled by whoever runs kernels (the graph executor, tests);
 * kernels use it only through the kn_ctx_* services of kn_backend.h. */
#ifndef KN_CTX_H
#define KN_CTX_H

#include <pthread.h>
#include <stdatomic.h>

#include "kn_backend.h"
#include "ms_budget.h"

/* ---- buffer pool: outputs come from here and go back when released ---- */
typedef struct kn_pool kn_pool;
kn_pool *kn_pool_new(void);
/* Drops the creator's reference; buffers still in use keep the pool alive. */
void kn_pool_release(kn_pool *p);
rt_buf *kn_pool_get(kn_pool *p, size_t size);
/* Free buffers kept for reuse: at most max_free_bytes in all (a buffer that
 * does not fit is freed on release) and each for a reuse window after it
 * came back: idle_ms, or twice the longest pause between two gets of the pool
 * in the last idle_max_ms if longer (the request rate), but never more than
 * idle_max_ms (-1 idle_ms: no idle trim), or twice a slow client's come-back
 * time once learned from a miss (up to 6 x idle_max_ms; kn_ctx.c's top);
 * a process-wide thread trims every
 * 250 ms and then calls malloc_trim. Defaults: kn_pool_default_max_free's
 * bytes, 2000 ms and 20000 ms, or the environment's
 * DCMSERVE_POOL_MAX_FREE_BYTES / DCMSERVE_POOL_IDLE_MS /
 * DCMSERVE_POOL_IDLE_MAX_MS. */
void kn_pool_set_limits(kn_pool *p, size_t max_free_bytes, int64_t idle_ms);
/* The default byte cap of free buffers: what one request may use
 * (request_budget, the --max_request_memory_bytes of the server; <= 0: no
 * limit), but at most a quarter of the memory the process may use
 * (memory_limit, ms_memory_limit), and never under KN_POOL_MAX_FREE_MIN. A
 * request's buffers, up to its budget, are then found again by the next
 * one: a 600-slice CT volume (630 MiB) is not faulted in anew each time. */
#define KN_POOL_MAX_FREE_MIN ((size_t)512 << 20)
size_t kn_pool_default_max_free(int64_t request_budget, long long memory_limit);
/* Sets the byte cap of the pools made from now on where the environment
 * does not give one (the server, from its request budget); until called,
 * kn_pool_default_max_free(MS_BUDGET_DEFAULT, ms_memory_limit()). */
void kn_pool_set_default_max_free(size_t max_free_bytes);
/* The longest reuse window (see kn_pool_set_limits); idle_ms or less: a
 * fixed window of idle_ms. */
void kn_pool_set_idle_max(kn_pool *p, int64_t idle_max_ms);
/* Bytes held in free buffers now. */
size_t kn_pool_free_bytes(kn_pool *p);

struct kn_ctx {
    kn_pool *pool;               /* NULL: plain allocations */
    int nthreads;                /* for kn_ctx_parallel_for */
    const atomic_int *cancelled; /* NULL: never cancelled */
    ms_budget *budget;           /* NULL: unlimited; kn_ctx_output refuses an output that
                                    would not fit (the executor takes what stays live) */
    void *host;                  /* the runner's own per-run state; kernels never look
                                    at it (the executor's host ops read rt_hostctx) */
};

#endif /* KN_CTX_H */
