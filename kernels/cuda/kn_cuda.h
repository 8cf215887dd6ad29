/* kn_cuda.h - internals shared by the CUDA backend's files (kn_cuda_backend.h):
 * the backend (kn_cuda_backend.c: the table, prepare, dispatch), its workers
 * and device blocks (kn_cuda_workers.c, under the op files), a node's
 * state, and the group functions that run one op family each on the GPU,
 * one file per family as in kernels/cpu:
 *   kn_cuda_ops_elementwise.c  binary ops, activations, BiasAdd, unary ops
 *   kn_cuda_ops_gemm.c         MatMul / _FusedMatMul, BatchMatMul (cuBLASLt)
 *   kn_cuda_ops_conv.c         Conv2D / depthwise / fused, Conv3D, Conv2DBackpropInput (cuDNN)
 *   kn_cuda_ops_nn.c           Softmax, FusedBatchNorm, 2-D and 3-D pools
 *   kn_cuda_ops_reduce.c       Sum, Mean, Max, Min, Prod
 *   kn_cuda_ops_index.c        GatherV2, Slice, StridedSlice
 *   kn_cuda_ops_shape.c        ConcatV2, Transpose, Pad, Reshape
 *   kn_cuda_ops_image.c        ResizeBilinear / NearestNeighbor, _DcmPixelTransform
 * kn_cuda_attrs.c reads a node's attributes at load; kn_cuda_shapes.c holds
 * the host-side shape arithmetic (every configuration).
 *
 * Only with DCMSERVE_HAVE_CUDA (the files that include it compile to nothing
 * without). Not for use outside kernels/cuda. */
#ifndef KN_CUDA_H
#define KN_CUDA_H

#ifdef DCMSERVE_HAVE_CUDA

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cuda_conv.cuh"
#include "kn_cuda_convnd.cuh"
#include "kn_cuda_dicom.cuh"
#include "kn_cuda_elementwise.cuh"
#include "kn_cuda_gemm.cuh"
#include "kn_cuda_index.cuh"
#include "kn_cuda_mem.h"
#include "kn_cuda_nn.cuh"
#include "kn_cuda_reduce.cuh"
#include "kn_cuda_rt.cuh"
#include "kn_dicom_xform.h"
#include "kn_memplan.h"
#include "ms_log.h"

/* ================= workers: stream, staging, device blocks ================= */

typedef struct kn_cuda_worker kn_cuda_worker;

/* One cudaMalloc (a kn_cuda_arena of exactly its size), reused by any
 * worker: released, it records an event on the stream of the worker that
 * used it last; a worker that takes it from the cache makes its own stream
 * wait for that event first (nothing waits on the host). */
typedef struct kn_cuda_block {
    kn_cuda_arena *a;
    void *ptr;
    uint64_t size;
    void *ev;                   /* recorded when the block went back to the cache */
    kn_cuda_worker *w;          /* whose stream used it last */
    struct kn_cuda_block *next; /* in the cache */
} kn_cuda_block;

struct kn_cuda_worker {
    uint64_t gen;
    int capturing;   /* a CUDA graph capture is on (be_graph_begin) */
    int capture_bad; /* the captured work used memory or work that a replay cannot repeat */
    void *stream;
    void *pinned;
    size_t pinned_size;
    kn_cuda_worker *next;
};

typedef struct kn_cuda_be {
    kn_backend b;
    int gpu;
    kn_backend *cpu;
    char name[32];
    uint64_t gen;
    pthread_mutex_t mu; /* the worker list */
    kn_cuda_worker *workers;
    pthread_mutex_t cache_mu; /* blocks come back from any thread */
    kn_cuda_block *cache;
} kn_cuda_be;

/* ================= a node's state ================= */

/* Which group function runs a node (kn_cuda__parse_attrs decides). */
typedef enum kn_cuda_kind {
    KN_CUDA_K_BINARY,
    KN_CUDA_K_ACT,
    KN_CUDA_K_BIAS,
    KN_CUDA_K_SOFTMAX,
    KN_CUDA_K_MATMUL,
    KN_CUDA_K_CONV,
    KN_CUDA_K_BN,
    KN_CUDA_K_MAXPOOL,
    KN_CUDA_K_AVGPOOL,
    KN_CUDA_K_REDUCE,
    KN_CUDA_K_CONCAT,
    KN_CUDA_K_RESIZE,
    KN_CUDA_K_TRANSPOSE,
    KN_CUDA_K_PAD,
    KN_CUDA_K_RESHAPE,
    KN_CUDA_K_DCMXFORM,
    KN_CUDA_K_UNARY,
    KN_CUDA_K_CONVND,
    KN_CUDA_K_POOL3D,
    KN_CUDA_K_BMM,
    KN_CUDA_K_GATHER,
    KN_CUDA_K_NEAREST,
    KN_CUDA_K_SLICE,
    KN_CUDA_K_SSLICE
} kn_cuda_kind;

#define KN_CUDA_MAX_PLANS 16
#define KN_CUDA_MAX_CONST 8

typedef struct kn_cuda_conv_entry {
    kn_cuda_conv_shape shape;
    kn_cuda_conv *plan;
} kn_cuda_conv_entry;

typedef struct kn_cuda_convnd_entry {
    kn_cuda_convnd_shape shape;
    kn_cuda_convnd *plan;
} kn_cuda_convnd_entry;

typedef struct kn_cuda_gemm_entry {
    int64_t m, n, k;
    kn_cuda_gemm *plan;
} kn_cuda_gemm_entry;

typedef struct kn_cuda_bgemm_entry {
    int64_t key[6]; /* batch, m, n, k, stride_x, stride_w */
    kn_cuda_bgemm *plan;
} kn_cuda_bgemm_entry;

typedef struct kn_cuda_op {
    kn_cuda_kind kind;
    const kn_kernel *cpu; /* the same op on the CPU: attribute checks and the fallback */
    void *cpu_state;
    int host;                          /* decided at load: this node always runs the CPU kernel */
    atomic_int warned;                 /* the request-time fallback was logged */
    rt_tensor *cin[KN_CUDA_MAX_CONST]; /* host values of constant inputs (NULL: not constant) */
    /* attributes */
    kn_cuda_binop binop;
    int commutative;
    kn_cuda_act act;
    int depthwise, fuse_bias, fuse_bn, fuse_add, nargs;
    int same, explicit_pad; /* padding SAME / EXPLICIT (else VALID) */
    int64_t pads[4];        /* EXPLICIT: top, bottom, left, right */
    int64_t sh, sw, dh, dw, kh, kw;
    float eps;
    int align_corners, half_pixel, keep_dims;
    kn_dcm_xform_attrs dcm; /* _DcmPixelTransform */
    /* converted constants on the GPU, uploaded at load */
    kn_cuda_arena *wmem, *bnmem;
    float *w_ohwi;          /* filter in cuDNN's order */
    float *bn_mul, *bn_add; /* batch-norm coefficients */
    /* plans, one per shape (made at the first request of a shape: warm-up) */
    pthread_mutex_t mu; /* the caches; a cuDNN plan's runs (its handle takes the stream) */
    kn_cuda_conv_entry conv[KN_CUDA_MAX_PLANS];
    int nconv;
    kn_cuda_gemm_entry gemm[KN_CUDA_MAX_PLANS];
    int ngemm;
    /* Conv3D / Conv2DBackpropInput (KN_CUDA_K_CONVND), MaxPool3D / AvgPool3D
     * (KN_CUDA_K_POOL3D) */
    kn_cuda_unop unop;
    float alpha;         /* LeakyRelu */
    int rank3, backward; /* 3-D; a transposed convolution */
    int64_t k3[3], s3[3], d3[3];
    kn_cuda_convnd_entry convnd[KN_CUDA_MAX_PLANS];
    int nconvnd;
    /* reductions, BatchMatMul, gather, StridedSlice */
    kn_cuda_redop redop;
    int adj_x, adj_y, same_batch, v2;
    int64_t batch_dims;
    int64_t masks[5]; /* begin, end, ellipsis, new_axis, shrink_axis */
    kn_cuda_bgemm_entry bgemm[KN_CUDA_MAX_PLANS];
    int nbgemm;
} kn_cuda_op;

/* ================= kn_cuda_workers.c: memory, copies, the CPU fallback ================= */

/* The process's CUDA backend (NULL: none; a node's prepare and compute have
 * no backend argument). register: MS_EBUSY when one exists already; it sets
 * be->gen. unregister: from then on a released block is freed, not cached. */
kn_cuda_be *kn_cuda__be_get(void);
ms_status kn_cuda__be_register(kn_cuda_be *be);
void kn_cuda__be_unregister(kn_cuda_be *be);
/* The calling thread's worker (a stream per inference worker), made on its
 * first use. */
ms_status kn_cuda__get_worker(kn_cuda_be *be, kn_cuda_worker **out);
/* Frees every cached (idle) block (cudaFree waits for the device). */
void kn_cuda__trim_caches(kn_cuda_be *be);
/* One cudaMalloc charged to the budget; when the cap or the device is full,
 * the idle blocks go back first and it is tried once more. */
ms_status kn_cuda__arena_new_trim(kn_cuda_be *be, const char *what, uint64_t bytes,
                                  kn_cuda_arena **out);
/* Host -> device through the worker's pinned staging (waited for), and
 * device -> host (waits for the stream, so errors of earlier asynchronous
 * kernels of this worker surface there). */
ms_status kn_cuda__copy_in(kn_cuda_be *be, kn_cuda_worker *w, const kn_node *node,
                           const rt_tensor *host, rt_tensor **out);
ms_status kn_cuda__copy_out(kn_cuda_worker *w, const rt_tensor *dev, rt_tensor **out);

/* A device block of at least `bytes` for worker w: the best cached fit (up
 * to twice the size), else one new cudaMalloc charged to the budget. */
ms_status kn_cuda__block_get(kn_cuda_be *be, kn_cuda_worker *w, uint64_t bytes, const char *what,
                             kn_cuda_block **out);
/* A temporary of the running step: the step's planned region of the plan's
 * arena (kn_devtmp_take), else a block of the cache. */
ms_status kn_cuda__tmp_get(kn_cuda_be *be, kn_cuda_worker *w, uint64_t bytes, const char *what,
                           kn_cuda_block **out);
/* Back to the cache (or freed), from any thread; NULL is a no-op. */
void kn_cuda__block_put(kn_cuda_block *d);
/* A new device tensor of dt / shape for worker w (node names the error). */
ms_status kn_cuda__dev_tensor(kn_cuda_be *be, kn_cuda_worker *w, const kn_node *node, rt_dtype dt,
                              const rt_shape *shape, rt_tensor **out);
/* Runs the node's CPU kernel: inputs copied to the host, outputs back; why
 * (NULL: decided at load) is logged once per node. */
ms_status kn_cuda__host_run(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                            kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out, const char *why);
/* The host value of input i: its constant, or a copy from the GPU. */
ms_status kn_cuda__host_input(kn_cuda_worker *w, kn_cuda_op *s, rt_tensor *const *in, int i,
                              rt_tensor **out);
/* Integer vector values of a host tensor (int32 / int64), at most max; -1
 * when more or another dtype. */
int kn_cuda__int_values(const rt_tensor *t, int64_t *v, int max);
/* Host floats in `nparts` pieces to one new arena (*arena, charged to the
 * budget, freed with the node), waited for; dst[i] the pieces on the GPU. */
ms_status kn_cuda__upload_floats(kn_cuda_worker *w, const char *what, const float *const *parts,
                                 const size_t *counts, int nparts, kn_cuda_arena **arena,
                                 float **dst);

/* ================= kn_cuda_attrs.c ================= */

/* Reads the attributes the GPU path needs; sets *why when the node must run
 * the CPU kernel (decided at load). */
ms_status kn_cuda__parse_attrs(const kn_node *n, kn_cuda_op *s, const char **why);

/* ================= load-time uploads of constants ================= */

/* kn_cuda_ops_conv.c: a constant filter (HWIO / depthwise HWCM) to cuDNN's
 * OHWI, and a Conv3D / Conv2DBackpropInput filter to K[D]RSC, uploaded once. */
ms_status kn_cuda__upload_conv_filter(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s,
                                      const rt_tensor *f);
ms_status kn_cuda__upload_convnd_filter(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s,
                                        const rt_tensor *f);
/* kn_cuda_ops_nn.c: the batch-norm coefficients of in[first..first+3] when
 * all four are constants (else they are computed per request). */
ms_status kn_cuda__upload_bn(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s, int first,
                             int fused_form);
/* Batch-norm coefficients of C channels as the CPU kernels compute them:
 * the op's form (fused_form 0) or the fused convolution's (1). */
void kn_cuda__bn_coefs(int fused_form, const float *sc, const float *of, const float *mu,
                       const float *var, float eps, int64_t C, float *mul, float *add);

/* ================= helpers of the group functions ================= */

/* In a group function (the kn_cuda__op_* signature): the request runs the
 * node's CPU kernel instead, for `reason` (logged once per node). */
#define KN_CUDA_FALLBACK(reason) return kn_cuda__host_run(be, w, ctx, node, s, in, out, (reason))

static inline int kn_cuda__is_f32(const rt_tensor *t) {
    return t != NULL && t->dtype == RT_DT_FLOAT;
}

static inline const float *kn_cuda__fp(const rt_tensor *t) {
    return (const float *)t->data;
}

/* kn_cuda_ops_elementwise.c: the activation in place on y (n values). */
ms_status kn_cuda__run_act(kn_cuda_op *s, float *y, int64_t n, kn_cuda_act act, kn_cuda_worker *w);
/* Bias (+ addend) (+ activation) after a GEMM or convolution, in place on
 * y (rows x cols): the CPU's order, act(y + bias + addend). */
ms_status kn_cuda__epilogue(kn_cuda_op *s, kn_cuda_worker *w, float *y, int64_t rows, int64_t cols,
                            const float *bias, const float *addend, int act_done);
/* kn_cuda_ops_index.c: element size of a dtype the index kernels move (1,
 * 2, 4 or 8 bytes of plain data); 0 for others. */
size_t kn_cuda__move_size(rt_dtype dt);

/* ================= the group functions =================
 * One per kn_cuda_kind: the node's outputs on the GPU from its inputs (all
 * in GPU memory), or KN_CUDA_FALLBACK for shapes / dtypes the GPU path does
 * not take. */
#define KN_CUDA_OP(name)                                                                           \
    ms_status kn_cuda__op_##name(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx,                   \
                                 const kn_node *node, kn_cuda_op *s, rt_tensor *const *in,         \
                                 rt_tensor **out)
KN_CUDA_OP(binary); /* elementwise */
KN_CUDA_OP(act);
KN_CUDA_OP(bias);
KN_CUDA_OP(unary);
KN_CUDA_OP(matmul); /* gemm */
KN_CUDA_OP(bmm);
KN_CUDA_OP(conv); /* conv */
KN_CUDA_OP(convnd);
KN_CUDA_OP(softmax); /* nn */
KN_CUDA_OP(bn);
KN_CUDA_OP(pool);
KN_CUDA_OP(pool3d);
KN_CUDA_OP(reduce); /* reduce */
KN_CUDA_OP(gather); /* index */
KN_CUDA_OP(slice);
KN_CUDA_OP(concat); /* shape */
KN_CUDA_OP(transpose);
KN_CUDA_OP(pad);
KN_CUDA_OP(reshape);
KN_CUDA_OP(resize); /* image */
KN_CUDA_OP(nearest);
KN_CUDA_OP(dcmxform);
#undef KN_CUDA_OP

#endif /* DCMSERVE_HAVE_CUDA */
#endif /* KN_CUDA_H */
