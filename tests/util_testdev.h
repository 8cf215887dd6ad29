/* util_testdev.h - a device backend for the tests that runs on the CPU: the
 * real CPU kernels over memory of its own kind (tensors marked with their
 * own rt_buf.device, every byte stored XOR a key), so that a host kernel fed
 * a device tensor (a missing copy to the host) computes garbage and a device
 * kernel fed a host tensor (a missing copy to the device) fails. Used by
 * check_exec_device (the executor's placement), check_kn_cuda_backend (the
 * CUDA table's ops without a GPU) and its GPU twin check_cuda_backend (the
 * DICOM helpers).
 *
 * With UT_TESTDEV_ARENAS it has the arena slots of kn_backend.h (host memory
 * of its kind): the outputs of its kernels and its copies to the device take
 * the plan's regions (kn_devout_take) as the CUDA backend does, so a wrong
 * layout gives wrong numbers. A kernel output that is a view of an input on
 * the CPU (Reshape) is a view of the device input here too, as on the GPU.
 * Its kernels also take one temporary per run as the CUDA table takes its
 * workspaces (kn_devtmp_take, else malloc): the bytes of all the inputs,
 * overwritten with 0xEE, then the inputs copied into it and read from there,
 * so a temporary placed over a live tensor gives wrong numbers. */
#ifndef UTIL_TESTDEV_H
#define UTIL_TESTDEV_H

#include <stdint.h>

#include "kn_backend.h"
#include "rt_graphbuild.h"
#include "rt_tensor.h"

/* What the test devices did, process-wide; tests reset it. */
typedef struct ut_devcount {
    int h2d, d2h;         /* copies */
    int runs;             /* device kernel runs */
    int fail_copies;      /* set: copies to the device fail with MS_EDEVICE */
    int regions;          /* tensors placed in a plan's arena */
    int tmps;             /* kernel temporaries placed in a plan's arena */
    int tmp_cache;        /* kernel temporaries from the device's own allocator */
    int captures;         /* graphs captured (graph_end gave one) */
    int refused;          /* captures graph_end refused */
    int launches;         /* graph launches */
    int refuse_graphs;    /* set: graph_end refuses every capture */
    int copies_unplanned; /* set: copies to the device take no planned region */
    int arenas;           /* arenas alive */
    uint64_t arena_bytes; /* their bytes */
} ut_devcount;
extern ut_devcount ut_dev;

/* Every test device of the process runs its kernels on `cpu` (borrowed) and
 * stores its memory as kind `mem` XOR `key`. Call before ut_testdev_new. */
void ut_testdev_setup(kn_backend *cpu, int mem, uint8_t key);

#define UT_TESTDEV_NONE 1   /* no op at all */
#define UT_TESTDEV_ARENAS 2 /* has the arena slots */
/* With UT_TESTDEV_ARENAS: has the graph slots too, emulating CUDA graphs on
 * the CPU: under capture a kernel writes no device memory (it runs on the
 * host copies only to learn its outputs' shapes; its outputs are its planned
 * regions, unwritten) and is recorded (kernel, input and output addresses,
 * dtypes, shapes, its temporary's address); a launch runs the recorded
 * kernels in order from and to those addresses, through the temporaries.
 * So outputs a launch does not recompute (the arena holds 0xCD or the last
 * run's values), or recomputes at other addresses than the run reads, give
 * wrong numbers. A capture whose kernel took memory outside the plan's arena
 * is refused, as the CUDA table's. */
#define UT_TESTDEV_GRAPHS 4
/* A device named `name` with the ops in `ops` (NULL-terminated; NULL: every
 * CPU op but the string parsers). Free with kn_backend_free. */
kn_backend *ut_testdev_new(const char *name, const char *const *ops, int flags);
/* 1 when node kernel k is a test device's. */
int ut_testdev_is_kernel(const kn_kernel *k);

/* The DICOM files at paths[0..n-1] (at most 8; missing ones skipped) as one
 * string tensor, NULL when none is there. New reference. */
rt_tensor *ut_dicom_strings(const char *const *paths, int n);
/* x (string Placeholder) -> DcmDecodeHU (pad_value 100) -> DcmWindow "win"
 * (center 40, width 400): variant 0 without resize NHWC, 1 resized to h x w
 * with the decode's mask NHWC, 2 resized NCHW. */
void ut_dicom_window_graph(rt_gb *gb, int variant, int64_t h, int64_t w);

#endif /* UTIL_TESTDEV_H */
