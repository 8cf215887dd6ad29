/* rt_onnx_int.h - internals shared by the ONNX converter's files:
 * rt_onnx.c (the driver: model reading, graph conversion, SavedModel
 * assembly), rt_onnx_conv.c (the arena, the value table, TF node emission and
 * the helpers handlers share; it calls no other converter file),
 * rt_onnx_ops.c (handlers for compute ops, the op table), rt_onnx_shape.c
 * (shape, data-movement and constant ops) and rt_onnx_fuse.c.
 *
 * Memory: everything the conversion allocates (TF NodeDefs, attribute values,
 * constant data, names) comes from one arena owned by the rt__ox_conv and freed
 * in one go when the conversion ends. Allocation failure long-jumps back to
 * rt_onnx_convert, which returns MS_ENOMEM; handlers therefore never check the
 * allocators' results.
 */
#ifndef RT_ONNX_INT_H
#define RT_ONNX_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "onnx.pb-c.h"
#include "rt_onnx.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"

typedef struct rt__ox_block rt__ox_block;

/* One ONNX tensor name and what the converter knows about it. */
typedef struct rt__ox_value {
    const char *name;   /* ONNX name */
    const char *tf;     /* TF tensor name ("node", "node:1"); NULL until emitted */
    int nhwc;           /* rank 4 stored channels-last: tf holds NHWC; dims stay in
                           ONNX (NCHW) order */
    const char *tf_alt; /* memo: the same tensor in the other layout */
    rt_dtype dt;
    int rank;                 /* -1 = unknown */
    int64_t dim[RT_MAX_RANK]; /* -1 = unknown (dynamic) */
    float *f;                 /* known float contents, or NULL */
    int64_t *iv;              /* known integer/bool contents, or NULL */
    uint8_t *ik;              /* with iv: ik[i] = 1 when iv[i] is known (shape vectors
                                 whose batch entry is dynamic) */
} rt__ox_value;

/* String-keyed hash map (open addressing) whose tables live in the arena:
 * the value table, TF node names and the passes' indexes, so that lookups
 * stay O(1) and a conversion stays linear in the graph's size. Keys are
 * borrowed (arena or model strings that outlive the map). */
typedef struct rt__ox_map {
    const char **key;
    size_t *klen;
    void **val;
    size_t cap, n;
} rt__ox_map;

/* A subgraph (If branch, Loop / Scan body) being converted into a TF
 * function of the graph's library (rt_onnx_ctrl.c). While it is converted,
 * cv->vals is its own value table and the enclosing graph's table waits in
 * `saved`. A name the subgraph reads from an enclosing graph (ONNX's outer
 * scope) is looked up there: a constant is copied in (and emitted as a Const
 * inside the function), any other value becomes a capture, an extra
 * argument of the function that the calling node feeds. */
typedef struct rt__ox_scope {
    struct rt__ox_scope *parent; /* the enclosing subgraph's scope; NULL: the main graph */
    rt__ox_map saved;            /* the enclosing graph's value table */
    int ncap, capcap;
    rt__ox_value **cap_outer; /* captured values, as the enclosing graph holds them */
    const char **cap_arg;     /* the argument each one arrives in */
} rt__ox_scope;

/* The node list being converted (rt__ox_convert_nodes), so that an If
 * whose branches give results of different ranks can take the rest of the
 * list into its branches (rt_onnx_ctrl.c). */
typedef struct rt__ox_walk {
    const Onnx__GraphProto *g;
    Onnx__NodeProto *const *nodes; /* NULL: g->node */
    const uint8_t *skip;           /* NULL: none skipped */
    size_t next;                   /* the node after the one being converted */
    int done;                      /* a handler converted the rest and g's outputs */
} rt__ox_walk;

typedef struct rt__ox_conv rt__ox_conv;
struct rt__ox_conv {
    jmp_buf oom; /* longjmp target on allocation failure */
    rt__ox_block *arena;
    const rt_onnx_opts *opts;
    const char *model_dir; /* for external data */
    int nhwc;              /* emit channels-last convolutions, pools, ... */
    int dicom_used;        /* the DICOM ops are in the graph (add their OpDefs) */
    /* sliding window: the volume it cuts, the Placeholder its patches are
     * fed at (the model's input); NULL without one */
    const char *sw_volume, *sw_patch;
    const char *sw_pred;   /* the model output it fetches (kept by prune_dead) */
    int64_t opset;
    rt__ox_map vals;     /* ONNX name -> rt__ox_value* (pointers stay valid) */
    Tensorflow__NodeDef **nodes;
    size_t nnodes, capnodes;
    rt__ox_map node_names; /* TF node name -> its NodeDef */
    rt__ox_map suffixes;   /* rt__tf_node: name base -> next "_k" to try */
    const Onnx__NodeProto *cur; /* node being converted (messages) */
    rt__ox_scope *scope;        /* subgraph being converted, or NULL (the main graph) */
    Tensorflow__FunctionDef **funcs; /* the library: one function per converted subgraph */
    size_t nfuncs, capfuncs;
    rt__ox_walk *walk; /* the innermost node list being converted */
    /* rt__ox_convert_from (rt_onnx.c), for the handlers that convert
     * subgraphs (rt_onnx_ctrl.c): called through here, since the driver
     * reaches them through the op table. */
    ms_status (*convert_from)(rt__ox_conv *cv, const Onnx__GraphProto *g,
                              Onnx__NodeProto *const *nodes, const uint8_t *skip, size_t from,
                              int *done);
    int splits;        /* Ifs that took the rest of their graph, nested (bounded) */
};

/* ---- arena ---- */
void *rt__ox_alloc(rt__ox_conv *cv, size_t n); /* zeroed */
void rt__ox_arena_free(rt__ox_conv *cv);        /* everything rt__ox_alloc gave */
/* ONNX TensorProto.DataType -> ours (RT_DT_INVALID when unknown). */
rt_dtype rt__ox_onnx_dtype(int32_t t);
/* A TensorShapeProto of rank dims (-1: unknown size), from the arena. */
Tensorflow__TensorShapeProto *rt__ox_shape_proto(rt__ox_conv *cv, int rank, const int64_t *dims);
char *rt__ox_strdup(rt__ox_conv *cv, const char *s);
char *rt__ox_printf(rt__ox_conv *cv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- maps ---- */
/* The value stored under key[0..len), or NULL. */
void *rt__ox_map_get(const rt__ox_map *m, const char *key, size_t len);
/* Stores val under key (NUL-terminated, borrowed), replacing an old value. */
void rt__ox_map_put(rt__ox_conv *cv, rt__ox_map *m, const char *key, void *val);

/* ---- values ---- */
/* The value `name` as the graph being converted sees it: its own, else (in a
 * subgraph) an enclosing graph's, copied in or captured (rt__ox_scope). */
rt__ox_value *rt__ox_find(rt__ox_conv *cv, const char *name);
/* Adds (or replaces) the value `name`; dims may be NULL when rank <= 0. */
rt__ox_value *rt__ox_define(rt__ox_conv *cv, const char *name, rt_dtype dt, int rank,
                            const int64_t *dims);
int64_t rt__ox_nelem(const rt__ox_value *v); /* -1 when not static */
int rt__ox_is_const(const rt__ox_value *v);  /* every element known */
/* TF tensor holding v in ONNX order, emitting a Const for known values (and
 * a layout change for channels-last values). MS_ENOTSUP when v is only
 * partially known. */
ms_status rt__ox_tf(rt__ox_conv *cv, rt__ox_value *v, const char **out);
/* TF tensor holding rank-4 v channels-last (NHWC). */
ms_status rt__ox_tf_nhwc(rt__ox_conv *cv, rt__ox_value *v, const char **out);

/* ---- ONNX node access ---- */
/* Input i of the current node, or NULL when absent or the empty name. */
rt__ox_value *rt__ox_in(rt__ox_conv *cv, const Onnx__NodeProto *n, int i);
const Onnx__AttributeProto *rt__ox_attr(const Onnx__NodeProto *n, const char *key);
int64_t rt__ox_attr_i(const Onnx__NodeProto *n, const char *key, int64_t dflt);
float rt__ox_attr_f(const Onnx__NodeProto *n, const char *key, float dflt);
/* String attr compared with s (absent attr compares as dflt). */
int rt__ox_attr_is(const Onnx__NodeProto *n, const char *key, const char *s, const char *dflt);
/* Int list attr: copies up to max values, returns the count or -1 when absent. */
int rt__ox_attr_ints(const Onnx__NodeProto *n, const char *key, int64_t *out, int max);
/* Decodes an ONNX TensorProto (initializer or Constant value) into value v. */
ms_status rt__ox_load_tensor(rt__ox_conv *cv, const Onnx__TensorProto *t, rt__ox_value *v);

/* Type and shape of an ONNX graph input / output; unknown dims become -1.
 * MS_ENOTSUP for a value that is not a tensor. */
ms_status rt__ox_value_info(const Onnx__ValueInfoProto *vi, rt_dtype *dt, int *rank,
                            int64_t *dims);
/* Converts the nodes of graph g in order (nodes[i] stands for g->node[i];
 * skip[i] = 1 leaves it out; both may be NULL for g's own list), refusing
 * the first node that cannot be converted (rt_onnx.c). */
ms_status rt__ox_convert_nodes(rt__ox_conv *cv, const Onnx__GraphProto *g,
                               Onnx__NodeProto *const *nodes, const uint8_t *skip);
/* The same from node `from` on; *done = 1 when a handler converted the
 * rest of the list and defined g's outputs itself. Handlers call it as
 * cv->convert_from. */
ms_status rt__ox_convert_from(rt__ox_conv *cv, const Onnx__GraphProto *g,
                              Onnx__NodeProto *const *nodes, const uint8_t *skip, size_t from,
                              int *done);
/* Drops the nodes of list[0..*n) that none of the tensors roots[0..nroots)
 * needs; Placeholders stay. */
void rt__ox_prune(rt__ox_conv *cv, Tensorflow__NodeDef **list, size_t *n, const char *const *roots,
                  size_t nroots);

/* ---- TF graph emission ---- */
/* A TF node name derived from hint, unique in the graph and its functions. */
const char *rt__ox_unique_name(rt__ox_conv *cv, const char *hint);
/* New node with a unique name derived from hint (sanitised for TF). */
Tensorflow__NodeDef *rt__tf_node(rt__ox_conv *cv, const char *op, const char *hint);
void rt__tf_input(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *tensor);
void rt__tf_attr_type(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, rt_dtype dt);
void rt__tf_attr_i(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int64_t v);
void rt__tf_attr_f(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, float v);
void rt__tf_attr_b(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int v);
void rt__tf_attr_s(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const char *v);
/* List-of-strings attr (bytes, copied). */
void rt__tf_attr_slist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                       const ProtobufCBinaryData *v, int n);
void rt__tf_attr_ilist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const int64_t *v,
                       int n);
void rt__tf_attr_flist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, const float *v,
                       int n);
void rt__tf_attr_shape(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key, int rank,
                       const int64_t *dims);
/* List-of-types attr (Tin, Tout, T of control-flow nodes). */
void rt__tf_attr_tlist(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                       const rt_dtype *v, int n);
/* Function attr (then_branch, body, ...): the library function fname. */
void rt__tf_attr_func(rt__ox_conv *cv, Tensorflow__NodeDef *nd, const char *key,
                      const char *fname);
/* "name" for output 0, "name:i" otherwise. */
const char *rt__tf_out(rt__ox_conv *cv, const Tensorflow__NodeDef *nd, int i);
/* Const nodes; return the tensor name. rank 0 = scalar (n must be 1). */
const char *rt__tf_const_f32(rt__ox_conv *cv, const char *hint, int rank, const int64_t *dims,
                             const float *v);
const char *rt__tf_const_int(rt__ox_conv *cv, const char *hint, rt_dtype dt, int rank,
                             const int64_t *dims, const int64_t *v);
/* A string scalar Const. */
const char *rt__tf_const_str(rt__ox_conv *cv, const char *hint, const char *s);
/* int32 vector / scalar shortcuts. */
const char *rt__tf_i32vec(rt__ox_conv *cv, const char *hint, int n, const int64_t *v);
const char *rt__tf_i32(rt__ox_conv *cv, const char *hint, int64_t v);
/* One-input-one-output op with attr T = dt. */
const char *rt__tf_unary(rt__ox_conv *cv, const char *op, const char *hint, const char *x,
                         rt_dtype dt);
/* Two-input op with attr T = dt. */
const char *rt__tf_binary(rt__ox_conv *cv, const char *op, const char *hint, const char *a,
                          const char *b, rt_dtype dt);
const char *rt__tf_transpose(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int n,
                             const int64_t *perm);
/* Reshape to dims (at most one -1). */
const char *rt__tf_reshape(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int n,
                           const int64_t *dims);

/* ---- op handlers (rt_onnx_ops.c) ---- */
typedef ms_status (*rt__ox_handler)(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* The handler of an ONNX op type (default domain), or NULL. */
rt__ox_handler rt__ox_handler_for(const char *op_type);
/* MS_OK when node n's op is implemented at the model's opset (the op's
 * definition in force there) and every attribute it carries is one its
 * handler reads; else MS_ENOTSUP naming the opset, version or attribute
 * (rt_onnx_opset.c). Ops without a row pass (the handler lookup fails). */
ms_status rt__ox_check_version(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* MS_OK when every input of node n has an element type n's handler takes
 * (rt_onnx_dtype.c: most handlers take float, int32, int64 and bool; Cast,
 * arithmetic and comparisons take more); else MS_ENOTSUP naming the input
 * and its type. Runs before the handler. */
ms_status rt__ox_check_dtypes(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* Runs handler h on node n after rt__ox_check_dtypes; an op that takes
 * float but not the float16 / bfloat16 its inputs have runs in float
 * between Casts (rt_onnx_dtype.c). */
ms_status rt__ox_run_handler(rt__ox_conv *cv, const Onnx__NodeProto *n,
                             ms_status (*h)(rt__ox_conv *cv, const Onnx__NodeProto *n));
/* ONNX TensorProto.DataType t's name ("FLOAT8E4M3FN"), for messages. */
const char *rt__ox_onnx_type_name(int32_t t);
/* 1 for the integer and floating-point types the executor computes with
 * (int8-64, uint8-64, float, double, float16, bfloat16); _int: integers. */
int rt__ox_dtype_num(rt_dtype dt);
int rt__ox_dtype_int(rt_dtype dt);
/* A printf-style error naming the current node and op, with code c. */
ms_status rt__ox_err(rt__ox_conv *cv, ms_status c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- helpers shared by the handler files (rt_onnx_ops.c) ---- */
#define OX_MAXR RT_MAX_RANK
/* Bounds for attribute and constant values that size things: keeps every
 * shape computation far from int64 overflow on hostile models. */
#define OX_DIM_MAX ((int64_t)1 << 31)
#define OX_WIN_MAX ((int64_t)1 << 20)

/* A name for TF nodes made from node n (its name, else its first output). */
const char *rt__ox_hint_of(const Onnx__NodeProto *n);
/* Required input i; with tf != NULL also its TF tensor in ONNX order. */
ms_status rt__ox_need(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **v,
                      const char **tf);
/* Required rank-4 input i and its TF tensor in the graph layout. */
ms_status rt__ox_need4(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **v,
                       const char **tf);
/* Defines output i (a dummy value when the output is unused). */
rt__ox_value *rt__ox_def_out(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt_dtype dt,
                             int rank, const int64_t *dims, const char *tf);
/* Defines rank-4 output i held in the graph layout. */
rt__ox_value *rt__ox_def_out4(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt_dtype dt,
                              const int64_t *dims, const char *tf);
/* Output 0 becomes the same value as x. */
void rt__ox_alias(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *x);
/* x's tensor as stored (either layout) and whether it is channels-last. */
ms_status rt__ox_in_any(rt__ox_conv *cv, rt__ox_value *x, const char **tf, int *nhwc);
/* "NHWC" or "NCHW" for the graph layout; its channel axis; a 4-list
 * (strides, ksize, sizes) from ONNX-order n, c, h, w in the graph layout. */
const char *rt__ox_data_format(const rt__ox_conv *cv);
int rt__ox_chan_axis(const rt__ox_conv *cv);
void rt__ox_lay4(const rt__ox_conv *cv, int64_t *o, int64_t n, int64_t c, int64_t h, int64_t w);
int rt__ox_out_of(int64_t v, int64_t lo, int64_t hi);
/* Axis a of a rank-`rank` tensor (negative from the end); -1 out of range. */
int rt__ox_norm_axis(int64_t a, int rank);
/* 1 when x has rank r, else 0 with *st set. */
int rt__ox_need_rank(rt__ox_conv *cv, const rt__ox_value *x, int r, ms_status *st);
/* Constant int input i into out[0..max); *count = -1 when absent. */
ms_status rt__ox_const_ints(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, int64_t *out, int max,
                            int *count);
ms_status rt__ox_const_float_scalar(rt__ox_conv *cv, const rt__ox_value *v, float *out);
const char *rt__ox_scalar_f32(rt__ox_conv *cv, const char *hint, float x);
/* Pad / PadV2 / MirrorPad of rank-r x; pads begins then ends, in x's order. */
const char *rt__ox_emit_pad(rt__ox_conv *cv, const char *hint, const char *x, rt_dtype dt, int r,
                            const int64_t *pads, const char *mode, float value);
/* Cast of x from type `from` to `to`. */
const char *rt__tf_cast(rt__ox_conv *cv, const char *h, const char *x, rt_dtype from,
                        rt_dtype to);
/* SelectV2(c, a, b) of element type dt. */
const char *rt__tf_select(rt__ox_conv *cv, const char *h, const char *c, const char *a,
                          const char *b, rt_dtype dt);
/* Integer indices ix (of type dt) with the negative ones moved up by the
 * axis size d, as ONNX counts them (TF refuses them). */
const char *rt__ox_wrap_index(rt__ox_conv *cv, const char *h, const char *ix, rt_dtype dt,
                              int64_t d);
/* (x - mean) * rsqrt(var + eps), mean and variance of float x over the
 * int32 axes tensor ax (kept as 1s); *mean and *inv_std (may be NULL) get
 * the statistics' tensors. */
const char *rt__ox_normalize(rt__ox_conv *cv, const char *h, const char *x, const char *ax,
                             float eps, const char **mean, const char **inv_std);
/* numpy broadcast of a's and b's dims into od: the rank, -1 when a rank is
 * unknown, -2 when the shapes do not broadcast (unknown dims pass). */
int rt__ox_broadcast(const rt__ox_value *a, const rt__ox_value *b, int64_t *od);
/* Handler of the ops in rt_onnx_more.c (comparisons, logic, Where,
 * variadic Sum/Mean, more unary ops, Size, CastLike, Range, Tile, Expand,
 * ArgMax/ArgMin, CumSum, Gelu, LayerNormalization, ...); NULL when op_type
 * is not one of them. */
rt__ox_handler rt__ox_more_handler(const char *op_type);
/* TF Fill: a tensor of run-time shape `shape` (an int32/int64 vector of type
 * sdt) holding value, of type dt (float, int32, int64, bool). */
const char *rt__ox_fill(rt__ox_conv *cv, const char *h, const char *shape, rt_dtype sdt,
                        rt_dtype dt, double value);
/* Sum, Mean, Max, Min over any number of float inputs (rt_onnx_more.c). */
ms_status rt__ox_op_variadic(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* Number of unknown (-1) entries in d[0..r). */
int rt__ox_count_unknown(int r, const int64_t *d);

/* Folds bias and activation nodes into TF's fused convolution / MatMul ops
 * (rt_onnx_fuse.c); run once on the finished graph. */
void rt__ox_fuse(rt__ox_conv *cv);

/* Handlers in rt_onnx_shape.c (listed in rt_onnx_ops.c's table). */
ms_status rt__ox_op_reshape(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_flatten(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_squeeze_unsqueeze(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_transpose(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_concat(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_split(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_slice(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_pad(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_resize(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_constant(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_constant_of_shape(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_shape(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_gather(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op_cast(rt__ox_conv *cv, const Onnx__NodeProto *n); /* rt_onnx_dtype.c */
ms_status rt__ox_op_cast_like(rt__ox_conv *cv, const Onnx__NodeProto *n); /* rt_onnx_dtype.c */
ms_status rt__ox_op_bitshift(rt__ox_conv *cv, const Onnx__NodeProto *n);  /* rt_onnx_dtype.c */
ms_status rt__ox_op_bitwise(rt__ox_conv *cv, const Onnx__NodeProto *n);   /* rt_onnx_dtype.c */
ms_status rt__ox_op_bitcast(rt__ox_conv *cv, const Onnx__NodeProto *n);   /* rt_onnx_dtype.c */
ms_status rt__ox_op_identity(rt__ox_conv *cv, const Onnx__NodeProto *n);

/* Rank-5 (3-D) handlers in rt_onnx_3d.c, called by the rank-4 handlers of
 * the same ONNX ops when input 0 has rank 5. The int ones return 0 when they
 * do not apply (nothing emitted). */
ms_status rt__ox_op3_conv(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op3_conv_transpose(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op3_pool(rt__ox_conv *cv, const Onnx__NodeProto *n);
ms_status rt__ox_op3_resize(rt__ox_conv *cv, const Onnx__NodeProto *n);
int rt__ox_op3_unary(rt__ox_conv *cv, const Onnx__NodeProto *n, const char *tf_op);
/* Rank-3 (1-D) Conv, ConvTranspose, MaxPool, AveragePool in rt_onnx_1d.c:
 * node n lifted to rank 4 (height 1) and converted by h4, the rank-4
 * handler of the same op; the result squeezed back to rank 3. */
ms_status rt__ox_op1d(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_handler h4);
int rt__ox_op3_concat(rt__ox_conv *cv, const Onnx__NodeProto *n);
/* A transposed convolution's input_sizes from float x's rank-r shape at run
 * time, shape * mul + add (graph layout), and in *crop_size that minus cut
 * (the pads), for inputs with dynamic dims (rt_onnx_3d.c). */
const char *rt__ox_deconv_sizes(rt__ox_conv *cv, const char *h, const char *x, int r,
                                const int64_t *mul, const int64_t *add, const int64_t *cut,
                                const char **crop_size);

#endif /* RT_ONNX_INT_H */
