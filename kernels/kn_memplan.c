/* kn_memplan.c - device-memory layout of a plan and the running step's
 * planned regions (kn_memplan.h). */
#include "kn_memplan.h"

#include <stdlib.h>

static uint64_t align_up(uint64_t v) {
    return (v + KN_MEMPLAN_ALIGN - 1) / KN_MEMPLAN_ALIGN * KN_MEMPLAN_ALIGN;
}

static int meets(const kn_memplan_buf *a, const kn_memplan_buf *b) {
    return a->first <= b->last && b->first <= a->last;
}

typedef struct ord {
    uint64_t bytes;
    int first, i;
} ord;

/* Larger first; equal sizes by first step, then index, so the layout does
 * not depend on qsort's order among equals. */
static int by_size(const void *x, const void *y) {
    const ord *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->i - b->i;
}

static int by_offset(const void *x, const void *y) {
    const kn_memplan_buf *a = *(const kn_memplan_buf *const *)x,
                         *b = *(const kn_memplan_buf *const *)y;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

ms_status kn_memplan_layout(kn_memplan_buf *b, int n, uint64_t *total) {
    *total = 0;
    if (n <= 0)
        return MS_OK;
    for (int i = 0; i < n; i++) {
        if (b[i].last < b[i].first)
            return ms_errf(MS_EINVAL, "device tensor %d: lifetime %d..%d", i, b[i].first,
                           b[i].last);
        if (b[i].bytes > UINT64_MAX / 2)
            return ms_errf(MS_EINVAL, "device tensor %d: %llu bytes", i,
                           (unsigned long long)b[i].bytes);
        b[i].offset = 0;
    }
    ord *idx = malloc(sizeof(ord) * (size_t)n);
    const kn_memplan_buf **live = malloc(sizeof(*live) * (size_t)n);
    if (idx == NULL || live == NULL) {
        free(idx);
        free(live);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        idx[i] = (ord){b[i].bytes, b[i].first, i};
    qsort(idx, (size_t)n, sizeof(ord), by_size);
    uint64_t end = 0;
    for (int k = 0; k < n; k++) {
        kn_memplan_buf *t = &b[idx[k].i];
        if (t->bytes == 0)
            continue;
        uint64_t need = align_up(t->bytes);
        /* the placed tensors whose lifetimes meet t's, by offset */
        int nl = 0;
        for (int j = 0; j < k; j++)
            if (b[idx[j].i].bytes > 0 && meets(&b[idx[j].i], t))
                live[nl++] = &b[idx[j].i];
        qsort(live, (size_t)nl, sizeof(*live), by_offset);
        /* the smallest gap that holds it, else after the last one */
        uint64_t at = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
        for (int j = 0; j < nl; j++) {
            if (live[j]->offset >= at && live[j]->offset - at >= need &&
                live[j]->offset - at < best_gap) {
                best = at;
                best_gap = live[j]->offset - at;
            }
            uint64_t e = live[j]->offset + align_up(live[j]->bytes);
            if (e > at)
                at = e;
        }
        t->offset = best != UINT64_MAX ? best : at;
        if (t->offset + need > end)
            end = t->offset + need;
    }
    free(idx);
    free(live);
    *total = end;
    return MS_OK;
}

uint64_t kn_memplan_peak(const kn_memplan_buf *b, int n) {
    uint64_t peak = 0;
    for (int i = 0; i < n; i++) {
        /* the live sum is largest at some tensor's first step */
        uint64_t sum = 0;
        for (int j = 0; j < n; j++)
            if (b[j].first <= b[i].first && b[i].first <= b[j].last)
                sum += align_up(b[j].bytes);
        if (sum > peak)
            peak = sum;
    }
    return peak;
}

int kn_memplan_valid(const kn_memplan_buf *b, int n) {
    for (int i = 0; i < n; i++) {
        if (b[i].offset % KN_MEMPLAN_ALIGN != 0)
            return 0;
        for (int j = i + 1; j < n; j++) {
            if (b[i].bytes == 0 || b[j].bytes == 0 || !meets(&b[i], &b[j]))
                continue;
            if (b[i].offset < b[j].offset + b[j].bytes && b[j].offset < b[i].offset + b[i].bytes)
                return 0;
        }
    }
    return 1;
}

/* ---- the running step's planned regions ---- */

static _Thread_local struct {
    unsigned char *base;
    const kn_memplan_buf *r, *t;
    int n, next, given;
    int nt, tnext, tgiven;
    int recording, nrec;
    uint64_t rec[KN_DEVTMP_MAX_PER_STEP];
} tl_out;

void kn_devout_begin(void *base, const kn_memplan_buf *r, int n) {
    kn_devout_step(base, r, n, NULL, 0);
}

void kn_devout_step(void *base, const kn_memplan_buf *r, int n, const kn_memplan_buf *t, int nt) {
    tl_out.base = base;
    tl_out.r = r;
    tl_out.n = n;
    tl_out.next = 0;
    tl_out.t = t;
    tl_out.nt = nt;
    tl_out.tnext = 0;
}

void kn_devout_end(void) {
    tl_out.base = NULL;
    tl_out.n = 0;
    tl_out.nt = 0;
}

void *kn_devout_take(uint64_t bytes) {
    if (tl_out.base == NULL || tl_out.next >= tl_out.n)
        return NULL;
    const kn_memplan_buf *r = &tl_out.r[tl_out.next++];
    if (r->bytes != bytes || bytes == 0)
        return NULL;
    tl_out.given++;
    return tl_out.base + r->offset;
}

int kn_devout_taken(void) { return tl_out.given; }

void *kn_devtmp_take(uint64_t bytes) {
    if (tl_out.recording && tl_out.nrec < KN_DEVTMP_MAX_PER_STEP)
        tl_out.rec[tl_out.nrec++] = bytes;
    if (tl_out.base == NULL || tl_out.tnext >= tl_out.nt)
        return NULL;
    const kn_memplan_buf *t = &tl_out.t[tl_out.tnext++];
    if (t->bytes != bytes || bytes == 0)
        return NULL;
    tl_out.tgiven++;
    return tl_out.base + t->offset;
}

int kn_devtmp_taken(void) { return tl_out.tgiven; }

void kn_devtmp_record_begin(void) {
    tl_out.recording = 1;
    tl_out.nrec = 0;
}

int kn_devtmp_record_end(uint64_t *sizes, int max) {
    int n = tl_out.nrec < max ? tl_out.nrec : max;
    for (int i = 0; i < n; i++)
        sizes[i] = tl_out.rec[i];
    tl_out.recording = 0;
    tl_out.nrec = 0;
    return n;
}
