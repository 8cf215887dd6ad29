/* ms_budget.c - the memory budget of one request (see ms_budget.h). */
#include "ms_budget.h"

#include <stddef.h>

void ms_budget_init(ms_budget *b, uint64_t limit) {
    b->limit = limit;
    atomic_init(&b->used, 0);
}

static ms_status refuse(const ms_budget *b, uint64_t used, uint64_t bytes, const char *what) {
    return ms_errf(MS_ENOMEM,
                   "%s needs %llu bytes; the request already holds %llu of its limit of %llu "
                   "bytes (--max_request_memory_bytes)",
                   what ? what : "the request", (unsigned long long)bytes,
                   (unsigned long long)used, (unsigned long long)b->limit);
}

ms_status ms_budget_take(ms_budget *b, uint64_t bytes, const char *what) {
    if (b == NULL || b->limit == 0) return MS_OK;
    uint64_t used = atomic_load(&b->used);
    for (;;) {
        if (bytes > b->limit || used > b->limit - bytes) return refuse(b, used, bytes, what);
        if (atomic_compare_exchange_weak(&b->used, &used, used + bytes)) return MS_OK;
    }
}

void ms_budget_give(ms_budget *b, uint64_t bytes) {
    if (b == NULL || b->limit == 0 || bytes == 0) return;
    uint64_t used = atomic_load(&b->used);
    for (;;) {
        uint64_t nu = used > bytes ? used - bytes : 0;
        if (atomic_compare_exchange_weak(&b->used, &used, nu)) return;
    }
}

ms_status ms_budget_check(const ms_budget *b, uint64_t bytes, const char *what) {
    if (b == NULL || b->limit == 0) return MS_OK;
    uint64_t used = atomic_load(&((ms_budget *)b)->used);
    if (bytes > b->limit || used > b->limit - bytes) return refuse(b, used, bytes, what);
    return MS_OK;
}

uint64_t ms_budget_left(const ms_budget *b) {
    if (b == NULL || b->limit == 0) return UINT64_MAX;
    uint64_t used = atomic_load(&((ms_budget *)b)->used);
    return used >= b->limit ? 0 : b->limit - used;
}
