/* kn_memplan.h - one block of device memory for a plan's tensors: the layout
 * (offsets from the tensors' sizes and lifetimes, host arithmetic only) and
 * the per-thread hand-over of the planned regions from the executor to a
 * device backend's output allocator (kn_memplan.c).
 *
 * The executor (runtime/graph/rt_exec.c) knows when each device tensor of a
 * plan is made and last read; a device backend knows how to allocate device
 * memory. The layout gives every tensor an offset in one block so that two
 * tensors alive at the same step never share bytes; the backend allocates the
 * block once (kn_backend_i.arena_new) and, while a step runs, takes the
 * region of each new device tensor from here instead of its allocator. */
#ifndef KN_MEMPLAN_H
#define KN_MEMPLAN_H

#include <stdint.h>

#include "ms_status.h"

/* Alignment of every region: 256 bytes, as cudaMalloc's. */
#define KN_MEMPLAN_ALIGN 256

/* One tensor: `bytes` live from step `first` to step `last` (inclusive,
 * first <= last). kn_memplan_layout sets `offset`. */
typedef struct kn_memplan_buf {
    uint64_t bytes;
    int first, last;
    uint64_t offset;
} kn_memplan_buf;

/* Offsets for b[0..n-1] (greedy by size: the largest tensor first, each at
 * the lowest aligned offset where it overlaps no placed tensor whose lifetime
 * meets its own) and the block's size in *total (aligned). A tensor of 0
 * bytes gets offset 0 and takes no room. MS_EINVAL for a lifetime with
 * last < first or a size that overflows. */
ms_status kn_memplan_layout(kn_memplan_buf *b, int n, uint64_t *total);

/* The largest sum of the (aligned) bytes of tensors alive at one step: a
 * lower bound of any layout's size, for tests and the load-time log. */
uint64_t kn_memplan_peak(const kn_memplan_buf *b, int n);

/* 1 when no two tensors alive at a common step overlap in [offset, offset +
 * bytes) and every offset is aligned: the layout's contract, checked by the
 * tests. */
int kn_memplan_valid(const kn_memplan_buf *b, int n);

/* ---- the running step's planned regions (thread-local) ---- */

/* The executor, before a step of a sized plan runs on this thread: the new
 * device tensors the step makes get, in the order it makes them, the regions
 * base + r[i].offset (i < n; borrowed until kn_devout_end). */
void kn_devout_begin(void *base, const kn_memplan_buf *r, int n);
void kn_devout_end(void);
/* A device backend making a new tensor of `bytes` on this thread: the
 * running step's next planned region when its size is exactly `bytes`, else
 * NULL (no step is planned, the step made more tensors than planned, or this
 * one differs from the sizing run's: allocate as usual). Positional, so a
 * tensor only gets the region of the tensor made at the same place of the
 * sizing run, whose lifetime the layout used. No release: the region belongs
 * to the plan's block. */
void *kn_devout_take(uint64_t bytes);
/* Regions kn_devout_take has given out on this thread so far (tests). */
int kn_devout_taken(void);

#endif /* KN_MEMPLAN_H */
