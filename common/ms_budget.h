/* ms_budget.h - the memory budget of one request (--max_request_memory_bytes).
 *
 * Whoever allocates on behalf of a request (tensor conversion, DICOM inflate
 * and decode, the graph executor's live outputs) takes the bytes from the
 * request's budget *before* allocating and gives them back when freed, so a
 * request that would need more than the limit is refused with MS_ENOMEM
 * (gRPC RESOURCE_EXHAUSTED) naming the limit, before the memory is touched.
 * Thread-safe (DICOM files decode in parallel). A NULL budget is unlimited. */
#ifndef MS_BUDGET_H
#define MS_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>

#include "ms_status.h"

#define MS_BUDGET_DEFAULT ((uint64_t)1 << 30) /* --max_request_memory_bytes default: 1 GiB */

typedef struct ms_budget {
    uint64_t limit;            /* 0 = unlimited */
    _Atomic uint64_t used;     /* bytes taken and not given back */
} ms_budget;

void ms_budget_init(ms_budget *b, uint64_t limit);

/* Takes `bytes` (MS_OK) or, when used + bytes would pass the limit, takes
 * nothing and returns MS_ENOMEM: "<what> needs N bytes; the request already
 * holds M of its limit of L bytes (--max_request_memory_bytes)". */
ms_status ms_budget_take(ms_budget *b, uint64_t bytes, const char *what);
void ms_budget_give(ms_budget *b, uint64_t bytes);

/* Would `bytes` more fit? The same refusal as ms_budget_take, taking nothing. */
ms_status ms_budget_check(const ms_budget *b, uint64_t bytes, const char *what);

/* Bytes left (UINT64_MAX when b is NULL or unlimited). */
uint64_t ms_budget_left(const ms_budget *b);

#endif /* MS_BUDGET_H */
