/* kn_backend.h - the interface between the graph executor and op kernels.
 *
 * A backend (CPU now, CUDA later) is a table of functions plus a context, as in
 * docs/style.md. The executor asks a backend for the kernel of an op by its
 * TensorFlow name at model load, calls kernel->prepare once per node (attrs
 * checked, constant inputs may be packed), then kernel->compute per request.
 * The executor never includes a kernel's internals; kernels never include the
 * executor's. Kernels read their node's attributes with the kn_attr_*
 * accessors below and allocate outputs through kn_ctx_output() so that the
 * executor's buffer pool is reused between requests.
 */
#ifndef KN_BACKEND_H
#define KN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "rt_tensor.h"

#define KN_BACKEND_API_VERSION 1

typedef struct kn_backend kn_backend;
typedef struct kn_ctx kn_ctx;   /* per-run context (kn_ctx.h), filled by whoever runs the kernel */
typedef struct kn_node kn_node;

/* How a node's attributes are read. The kernels' layer does not know the
 * format of kn_node.def; the layer that builds nodes hands in this table with
 * each node (runtime/graph: rt_nodedef_attrs, over TensorFlow's NodeDef).
 * Kernels call the kn_attr_* wrappers below, never the table. */
typedef struct kn_attr_ops {
    int (*has)(const kn_node *n, const char *key);
    int64_t (*i)(const kn_node *n, const char *key, int64_t dflt);
    float (*f)(const kn_node *n, const char *key, float dflt);
    int (*b)(const kn_node *n, const char *key, int dflt);
    rt_dtype (*type)(const kn_node *n, const char *key, rt_dtype dflt);
    const char *(*s)(const kn_node *n, const char *key, size_t *len);
    int (*ilist)(const kn_node *n, const char *key, int64_t *out, int max);
    int (*flist)(const kn_node *n, const char *key, float *out, int max);
    int (*slist)(const kn_node *n, const char *key, const char **out, size_t *lens, int max);
    int (*typelist)(const kn_node *n, const char *key, rt_dtype *out, int max);
    ms_status (*shape)(const kn_node *n, const char *key, rt_shape *out);
    ms_status (*tensor)(const kn_node *n, const char *key, rt_tensor **out);
} kn_attr_ops;

/* What a kernel sees of its graph node. Borrowed from the loaded model; valid
 * for the model's lifetime. */
struct kn_node {
    const char *name;   /* node name ("conv1/Conv2D") for messages */
    const char *op;     /* op name ("Conv2D") */
    const void *def;    /* the node's definition (a TensorFlow NodeDef); read it with kn_attr_* */
    const kn_attr_ops *attrs; /* reads def; NULL: the node has no attributes */
    int nin;            /* data inputs */
    int nout;           /* outputs */
};

typedef struct kn_kernel {
    const char *op;
    /* Optional. Runs once at model load. const_in[i] is the value of input i
     * when it is a constant of the graph (Const node), else NULL. Sets *state
     * (may stay NULL). An error fails the load with the message set. */
    ms_status (*prepare)(const kn_node *node, rt_tensor *const *const_in, void **state);
    /* Computes out[0..nout-1] (each initially NULL) from in[0..nin-1]. An
     * output is a new tensor from kn_ctx_output(), a new reference to an
     * input (rt_tensor_ref) or a view of one (rt_tensor_view). */
    ms_status (*compute)(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                         rt_tensor **out);
    /* Optional. Frees what prepare made. */
    void (*release)(void *state);
    /* Set for ops with side effects (variables, I/O): never pruned as
     * constant-foldable, serialised per model. */
    int stateful;
} kn_kernel;

struct kn_backend_i {
    const char *(*name)(kn_backend *b);
    /* The kernel for an op, or NULL when this backend lacks it. */
    const kn_kernel *(*kernel)(kn_backend *b, const char *op);
    /* Optional: wait for queued device work. */
    ms_status (*sync)(kn_backend *b);
    void (*free)(kn_backend *b);
    /* Optional, for a device backend (memory other than the host's): a new
     * tensor in the device's memory holding the host tensor's values, and
     * back. The executor calls them for the copies its placement inserted
     * (kn_place.h), never per node otherwise. */
    ms_status (*to_device)(kn_backend *b, rt_tensor *host, rt_tensor **out);
    ms_status (*to_host)(kn_backend *b, rt_tensor *dev, rt_tensor **out);
    /* Optional, for a device backend: one block of `bytes` of device memory
     * for a plan's tensors (kn_memplan.h), charged to the device's budget;
     * `what` names it in messages. Used by one run at a time: begin gives
     * its base to the calling thread's run (ordering it after the block's
     * previous run, which may have been on another thread), end marks that
     * run's work on it as queued, free gives it back (after every tensor in
     * it is released). */
    ms_status (*arena_new)(kn_backend *b, const char *what, uint64_t bytes, void **arena);
    ms_status (*arena_begin)(kn_backend *b, void *arena, void **base);
    void (*arena_end)(kn_backend *b, void *arena);
    void (*arena_free)(kn_backend *b, void *arena);
    /* Optional, for a device backend (CUDA graphs, docs/gpu.md): graph_begin
     * starts capturing the device work the calling thread's kernels queue
     * (none of it runs); graph_end stops it and sets *graph when that work
     * can be replayed as it is (no host synchronisation, no CPU fallback,
     * no device memory outside the plan's arena), else returns an error with
     * *graph NULL (the captured work did not run: the caller runs it again
     * without capture); graph_launch queues a graph's work on the calling
     * thread's stream; graph_free frees it. */
    ms_status (*graph_begin)(kn_backend *b);
    ms_status (*graph_end)(kn_backend *b, void **graph);
    ms_status (*graph_launch)(kn_backend *b, void *graph);
    void (*graph_free)(kn_backend *b, void *graph);
};

struct kn_backend {
    int api_version;
    struct kn_backend_i iface;
    void *ctx;
    int intra_op_threads;   /* threads a kernel may use through kn_ctx_parallel_for */
};

/* Public wrappers (NULL-safe for optional slots). */
const char *kn_backend_name(kn_backend *b);
const kn_kernel *kn_backend_kernel(kn_backend *b, const char *op);
ms_status kn_backend_sync(kn_backend *b);
void kn_backend_free(kn_backend *b);
/* MS_ENOTSUP when the backend has no such slot. */
ms_status kn_backend_to_device(kn_backend *b, rt_tensor *host, rt_tensor **out);
ms_status kn_backend_to_host(kn_backend *b, rt_tensor *dev, rt_tensor **out);
/* 1 when the backend has all four arena slots. */
int kn_backend_has_arenas(const kn_backend *b);
/* 1 when the backend has all four graph slots. */
int kn_backend_has_graphs(const kn_backend *b);

/* ---- services a kernel's context gives it (kn_ctx.c) ---- */

/* New output tensor `idx` of dtype/shape, from the executor's buffer pool.
 * Contents are undefined (zeroed for DT_STRING). */
ms_status kn_ctx_output(kn_ctx *ctx, int idx, rt_dtype dt, const rt_shape *shape,
                        rt_tensor **out);
/* The fewest values of a streaming pass (a few float operations per value,
 * e.g. one 512x512 image through the fused DICOM pass or a fused map-reduce)
 * worth splitting over the intra-op pool: below it the hand-off to a second
 * thread costs about what it saves, and such a pass runs inline, without
 * touching the pool. */
#define KN_PAR_MIN_VALUES ((int64_t)1 << 17)

/* Runs fn(arg, begin, end) over [0, n) split into chunks on the intra-op pool;
 * returns when all chunks are done. Serial when the pool has one thread. */
void kn_ctx_parallel_for(kn_ctx *ctx, int64_t n, int64_t min_chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);
/* Non-zero once the request was cancelled or its deadline passed; long
 * kernels may poll it and return MS_ECANCELED. */
int kn_ctx_cancelled(kn_ctx *ctx);

/* ---- node attributes, through the node's kn_attr_ops (kn_backend.c) ---- */
int kn_attr_has(const kn_node *n, const char *key);
/* Scalar getters return `dflt` when the attr is absent. */
int64_t kn_attr_i(const kn_node *n, const char *key, int64_t dflt);
float kn_attr_f(const kn_node *n, const char *key, float dflt);
int kn_attr_b(const kn_node *n, const char *key, int dflt);
rt_dtype kn_attr_type(const kn_node *n, const char *key, rt_dtype dflt);
/* String attr (bytes, not NUL-terminated in general): returns a borrowed
 * pointer and sets *len, or NULL when absent. */
const char *kn_attr_s(const kn_node *n, const char *key, size_t *len);
/* Compares a string attr with `s`; absent attr compares as `dflt`. */
int kn_attr_s_eq(const kn_node *n, const char *key, const char *s, const char *dflt);
/* List attrs: copies up to `max` values, returns the list length (may exceed
 * max), or -1 when absent. */
int kn_attr_ilist(const kn_node *n, const char *key, int64_t *out, int max);
int kn_attr_flist(const kn_node *n, const char *key, float *out, int max);
/* List of strings (bytes): out[i] borrowed pointers, lens[i] their lengths
 * (not NUL-terminated in general). */
int kn_attr_slist(const kn_node *n, const char *key, const char **out, size_t *lens, int max);
int kn_attr_typelist(const kn_node *n, const char *key, rt_dtype *out, int max);

/* The window of DcmWindow and of the fused DcmDecodeWindow, from the attrs
 * center, width (> 0), data_format (NHWC | NCHW) and size ([h, w] or absent =
 * {0, 0}): lo = center - width / 2, hi = center + width / 2 in double, then
 * float. One parser so the fused pass keeps the unfused op's exact numbers. */
typedef struct kn_window {
    float lo, hi, range;
    int nchw;
    int64_t size[2];
} kn_window;
ms_status kn_window_attrs(const kn_node *n, kn_window *w);
/* Shape attr; MS_ENOTFOUND when absent. rank -1 = unknown rank. */
ms_status kn_attr_shape(const kn_node *n, const char *key, rt_shape *out);
/* Tensor attr (Const's "value"), decoded into a new tensor. */
ms_status kn_attr_tensor(const kn_node *n, const char *key, rt_tensor **out);

/* Sets the message "node '<name>' (<op>): <fmt...>" and returns `code`: the
 * node-named error of every kernel (CPU, CUDA and the shared gathers). */
ms_status kn__errf(ms_status code, const kn_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* KN_BACKEND_H */
