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

/* ---- the running step's temporaries (thread-local) ----
 * A temporary is device memory a kernel needs only while its step runs (a
 * cuDNN / cuBLASLt workspace, a padded input, a reordered computed filter,
 * per-request coefficients): it lives from the step to the same step, so the
 * layout may give its bytes to tensors made or read at other steps. The
 * executor records the temporaries of a sizing run and places them in the
 * plan's block with the tensors; a later run of those shapes hands each step
 * its planned temporaries here, positionally, as the outputs above. */

/* The executor, before a step of a sized plan: its outputs (as
 * kn_devout_begin) and its temporaries t[0..nt-1], both at base + offset
 * (borrowed until kn_devout_end, which ends both). */
void kn_devout_step(void *base, const kn_memplan_buf *r, int n, const kn_memplan_buf *t, int nt);
/* A device backend's kernel asking for a temporary of `bytes` for the
 * running step: the step's next planned temporary when its size is exactly
 * `bytes`, else NULL (allocate as usual, e.g. from a block cache, and give
 * it back after the step's work). A planned region needs no release and must
 * not be used after the step (work queued on the step's stream is fine: the
 * next user of the bytes is ordered after it). While the executor records
 * (kn_devtmp_record_begin) every request is noted, planned or not. */
void *kn_devtmp_take(uint64_t bytes);
/* Temporaries kn_devtmp_take has given out on this thread so far (tests). */
int kn_devtmp_taken(void);

/* The most temporaries one step records; later ones of the step are not
 * planned (they keep the backend's allocator). */
#define KN_DEVTMP_MAX_PER_STEP 64

/* The executor around a step of a sizing run on this thread: begin starts
 * noting the sizes the step's kernels ask kn_devtmp_take for; end stops and
 * copies them, in order, to sizes[0..max-1], returning how many were noted
 * (at most KN_DEVTMP_MAX_PER_STEP). */
void kn_devtmp_record_begin(void);
int kn_devtmp_record_end(uint64_t *sizes, int max);

#endif /* KN_MEMPLAN_H */
