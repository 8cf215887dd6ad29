/* kn_cuda_backend.h - the CUDA backend's kernel table (kn_cuda_backend.c; one file per op
 * family beside it, listed in kn_cuda.h), the device backend the executor places graph
 * nodes on (kn_place.h, docs/gpu.md). Plain C: no CUDA header.
 *
 * The table wraps the launchers of the kernels/cuda .cu files in kn_kernel
 * form. Each device kernel's prepare also prepares the CPU kernel of the same
 * op (the same attribute checks, so a load fails or passes as on the CPU):
 * a node whose attributes the GPU path does not handle (NCHW, a fused op list
 * without a GPU form, ...) is marked at load to run that CPU kernel inside the
 * backend (one log line at load), and a request whose shapes or dtypes the GPU
 * path does not handle (a broadcast other than trailing, int32 ...) runs it
 * too (one log line per node, the first time). Those runs copy the node's
 * inputs to the host and its outputs back.
 *
 * Memory: device tensors are rt_bufs with device = KN_CUDA_MEM whose data is
 * a device pointer. Each inference worker (thread) gets its own stream and
 * pinned staging buffer; a sized plan's device tensors come from its arena
 * (the arena_* slots, kn_memplan.h), other device blocks from one cache of
 * the backend. A
 * block is one cudaMalloc charged to the process budget (kn_cuda_mem.h, the
 * --per_process_gpu_memory_fraction cap); released, it records an event on
 * the stream that used it, and the next worker to take it waits for that
 * event on its own stream, so after the first request of a shape (warm-up,
 * on any thread) no cudaMalloc runs on the request path. Constant weights a kernel converts at
 * load (convolution filters in cuDNN's order, batch-norm coefficients) are
 * uploaded once at load and freed when the model unloads.
 *
 * One CUDA backend per process (the GPU chosen by --device). */
#ifndef KN_CUDA_BACKEND_H
#define KN_CUDA_BACKEND_H

#include "kn_backend.h"
#include "kn_cuda_elementwise.cuh"
#include "kn_cuda_index.cuh"
#include "kn_cuda_reduce.cuh"
#include "ms_status.h"

/* rt_buf.device of CUDA device memory. */
#define KN_CUDA_MEM 0x4355

/* The backend for GPU `gpu`, falling back per node to `cpu` (borrowed, must
 * outlive it). MS_ENOTSUP in a build without CUDA; MS_EDEVICE when the GPU
 * cannot be used; MS_EBUSY when a CUDA backend exists already. Its name is
 * "cuda:<gpu>". */
ms_status kn_cuda_backend_new(int gpu, kn_backend *cpu, kn_backend **out);

/* The ops the table has kernels for, NULL-terminated, sorted by name.
 * Host-side: answers in any build, with or without a GPU. */
const char *const *kn_cuda_backend_ops(void);
/* 1 when the table has a kernel for `op`. */
int kn_cuda_backend_has_op(const char *op);

/* ---- host-side decisions of the table, exposed so they are tested without
 * a GPU (check_kn_cuda_backend) ---- */

/* TensorFlow's output size and padding of one spatial dimension: input
 * `in`, kernel `k`, stride `s`, dilation `d`, padding "SAME" / "VALID"
 * (explicit: pad_lo / pad_hi given, same = -1). MS_EINVAL for sizes that give
 * no output. */
ms_status kn_cuda__spatial(int64_t in, int64_t k, int64_t s, int64_t d, int same, int64_t *out,
                           int64_t *pad_lo, int64_t *pad_hi);

/* How an elementwise binary op's operands broadcast on the GPU: b's shape
 * (leading 1s dropped) is a suffix of a's. Sets *nb (b's element count) and
 * *swap (1 when a and b were exchanged: a commutative op whose first operand
 * is the small one). 0 when the GPU kernel cannot take these shapes. */
int kn_cuda__bcast(const rt_shape *a, const rt_shape *b, int commutative, int64_t *nb, int *swap);

/* General broadcasting for the cases kn_cuda__bcast does not take: fills
 * *out (the broadcast shape) and *s (kn_cuda_elementwise.cuh). 0 when the
 * shapes do not broadcast, either is empty, or the rank is over 8 (the CPU
 * kernel then runs, and fails with its error). */
int kn_cuda__bcast_general(const rt_shape *a, const rt_shape *b, rt_shape *out,
                           kn_cuda_bcast_shape *s);

/* The activation named by a fused_ops entry or an op name ("Relu", "Relu6",
 * "Sigmoid", "Tanh"); -1 when the GPU kernels have no such activation. */
int kn_cuda__act(const char *name, size_t len);

/* A reduction of a tensor of shape x over the axes where red[d] (Sum, Mean,
 * Max, Min, Prod): the merged shape the GPU kernel walks, merged as the CPU
 * kernel merges it (size-1 axes dropped, neighbours of the same kind
 * joined; a rank-0 result is one kept axis of size 1). */
void kn_cuda__reduce_plan(const rt_shape *x, const int *red, kn_cuda_reduce_shape *p);

/* Slice of x by begin / size (n values; size -1: to the end) as a strided
 * copy, *os the output shape. 0 when the values do not fit x (the CPU kernel
 * gives the error). */
int kn_cuda__slice(const rt_shape *x, const int64_t *begin, const int64_t *size, int n,
                   kn_cuda_strided *p, rt_shape *os);

/* StridedSlice of x by begin / end / strides (n values each) and the five
 * masks (begin, end, ellipsis, new_axis, shrink_axis), canonicalised as the
 * CPU kernel does (TensorFlow's ValidateStridedSliceOp), as a strided copy,
 * *os the output shape. 0 when the spec is invalid for x (the CPU kernel
 * gives the error). */
int kn_cuda__strided_slice(const rt_shape *x, const int64_t *begin, const int64_t *end,
                           const int64_t *strides, int n, const int64_t masks[5],
                           kn_cuda_strided *p, rt_shape *os);

/* GatherV2's geometry: params shape p, indices shape ix, axis, batch_dims
 * (negative: counted from the end, as TensorFlow), *os the output shape.
 * 0 when invalid (the CPU kernel gives the error). */
int kn_cuda__gather_shape(const rt_shape *p, const rt_shape *ix, int64_t axis, int64_t batch_dims,
                          kn_cuda_gather_shape *g, rt_shape *os);

/* BatchMatMul's geometry: x, y shapes (rank >= 2), adj_x / adj_y,
 * same_batch (BatchMatMul: the batch dimensions must be equal; V2 / V3
 * broadcast them as numpy). */
enum { KN_CUDA_BMM_STRIDED, KN_CUDA_BMM_FLAT, KN_CUDA_BMM_LOOP };
typedef struct kn_cuda_bmm {
    int64_t m, n, k;
    int64_t batch;              /* the output's batches */
    int mode;                   /* STRIDED: one strided-batched GEMM; FLAT: one GEMM of
                                   batch * m rows (y's batches all broadcast); LOOP: one
                                   GEMM per batch at kn_cuda__bmm_offsets */
    int64_t stride_x, stride_w; /* STRIDED: elements between batches */
    int brank;                  /* LOOP: the output's batch dims, each operand's strides */
    int64_t bdim[RT_MAX_RANK], bsx[RT_MAX_RANK], bsw[RT_MAX_RANK];
    rt_shape out;
} kn_cuda_bmm;

/* 0 when the shapes do not multiply (the CPU kernel gives the error) or the
 * product is empty (the CPU kernel runs it). */
int kn_cuda__bmm(const rt_shape *x, const rt_shape *y, int adj_x, int adj_y, int same_batch,
                 kn_cuda_bmm *p);
/* LOOP: element offsets of batch i's operands. */
void kn_cuda__bmm_offsets(const kn_cuda_bmm *p, int64_t i, int64_t *ox, int64_t *ow);

#endif /* KN_CUDA_BACKEND_H */
