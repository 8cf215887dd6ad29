/* rt_tensor.h - dtypes, shapes, reference-counted buffers and tensors.
 *
 * Ownership: rt_buf and rt_tensor are reference-counted; the _new and _alloc functions return
 * one reference owned by the caller, released with *_unref. A tensor holds one
 * reference on its buffer; several tensors may share a buffer (Identity,
 * Reshape views). DT_STRING tensors store an array of rt_str in `data`; the
 * bytes they point to live in `strbuf` (or, for request-borrowed tensors, in
 * memory the caller keeps alive longer than the tensor; strbuf is then NULL).
 */
#ifndef RT_TENSOR_H
#define RT_TENSOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

/* Values equal TensorFlow's DataType enum, so a proto value casts directly.
 * The low-precision types (24..33, 48) hold ONE element per byte in memory
 * (int4 / int2 / float4 unpacked, as ml_dtypes holds them; ONNX packs them
 * only in files, which the importer unpacks): float8 / float4 / e8m0 as their
 * bits in the byte's low bits, int4 / int2 as the value in an int8_t or
 * uint8_t. Readers take only the type's own low bits (rt_lowp.h).
 * RT_DT_FLOAT8_E8M0 is private: TensorFlow has no such type; 48 stays clear
 * of the values TensorFlow has assigned (up to 33). */
typedef enum rt_dtype {
    RT_DT_INVALID = 0,
    RT_DT_FLOAT = 1,
    RT_DT_DOUBLE = 2,
    RT_DT_INT32 = 3,
    RT_DT_UINT8 = 4,
    RT_DT_INT16 = 5,
    RT_DT_INT8 = 6,
    RT_DT_STRING = 7,
    RT_DT_COMPLEX64 = 8,
    RT_DT_INT64 = 9,
    RT_DT_BOOL = 10,
    RT_DT_QINT8 = 11,
    RT_DT_QUINT8 = 12,
    RT_DT_QINT32 = 13,
    RT_DT_BFLOAT16 = 14,
    RT_DT_QINT16 = 15,
    RT_DT_QUINT16 = 16,
    RT_DT_UINT16 = 17,
    RT_DT_COMPLEX128 = 18,
    RT_DT_HALF = 19,
    RT_DT_RESOURCE = 20,
    RT_DT_VARIANT = 21,
    RT_DT_UINT32 = 22,
    RT_DT_UINT64 = 23,
    RT_DT_FLOAT8_E5M2 = 24,
    RT_DT_FLOAT8_E4M3FN = 25,
    RT_DT_FLOAT8_E4M3FNUZ = 26,
    /* 27 is TensorFlow's DT_FLOAT8_E4M3B11FNUZ, which ONNX lacks: not held */
    RT_DT_FLOAT8_E5M2FNUZ = 28,
    RT_DT_INT4 = 29,
    RT_DT_UINT4 = 30,
    RT_DT_INT2 = 31,
    RT_DT_UINT2 = 32,
    RT_DT_FLOAT4_E2M1FN = 33,
    RT_DT_FLOAT8_E8M0 = 48, /* private (see above) */
    RT_DT_COUNT
} rt_dtype;

/* Bytes per element; 0 for DT_STRING, DT_RESOURCE, DT_VARIANT, DT_INVALID and
 * values this build does not know. */
size_t rt_dtype_size(rt_dtype dt);
/* "DT_FLOAT"; "DT_INVALID" for unknown values. */
const char *rt_dtype_name(rt_dtype dt);
/* Strips the _REF offset (v > 100 -> v - 100); other values unchanged. */
rt_dtype rt_dtype_base(int v);
/* True for dtypes whose elements are plain bytes (everything but string,
 * resource, variant, invalid). */
int rt_dtype_is_pod(rt_dtype dt);

#define RT_MAX_RANK 8

typedef struct rt_shape {
    int rank;
    int64_t dim[RT_MAX_RANK];
} rt_shape;

/* Product of dims (1 for rank 0); -1 if a dim is negative or it overflows. */
int64_t rt_shape_nelem(const rt_shape *s);
int rt_shape_equal(const rt_shape *a, const rt_shape *b);
/* Writes "(2, 3)" / "()" into buf (always NUL-terminated); returns buf. */
char *rt_shape_str(const rt_shape *s, char *buf, size_t n);
/* Builds a shape from up to RT_MAX_RANK dims. */
rt_shape rt_shape_make(int rank, const int64_t *dims);

/* ---- buffers ---- */
typedef struct rt_buf rt_buf;
struct rt_buf {
    atomic_int refs;
    void *data;
    size_t size;
    int device;                     /* 0 = host memory; backends use others */
    void (*release)(rt_buf *b);     /* frees data when the last ref drops; NULL = nothing */
    void *owner;                    /* for release() */
    int release_frees;              /* release() frees this struct too (a pool may keep it) */
};

/* 64-byte-aligned host buffer of `size` bytes (uninitialised). NULL on OOM. */
rt_buf *rt_buf_alloc(size_t size);
/* Wraps memory owned elsewhere; release(b) runs when the last ref drops
 * (NULL release = nothing to free). NULL on OOM. */
rt_buf *rt_buf_wrap(void *data, size_t size, void (*release)(rt_buf *b), void *owner);
rt_buf *rt_buf_ref(rt_buf *b);
void rt_buf_unref(rt_buf *b);

/* ---- tensors ---- */
typedef struct rt_str {
    const uint8_t *data;
    uint64_t len;
} rt_str;

typedef struct rt_tensor {
    atomic_int refs;
    rt_dtype dtype;
    rt_shape shape;
    int64_t nelem;
    void *data;     /* element 0; inside buf */
    rt_buf *buf;    /* owned reference */
    rt_buf *strbuf; /* DT_STRING: owner of string bytes, or NULL */
} rt_tensor;

/* New tensor with a fresh zero-filled host buffer. For DT_STRING all elements
 * are empty strings. Returns MS_ENOMEM / MS_EINVAL (negative dim, too big). */
ms_status rt_tensor_new(rt_dtype dt, const rt_shape *shape, rt_tensor **out);
/* New tensor over an existing buffer (takes a new reference on buf); data =
 * buf->data + offset. The buffer must hold nelem * dtype size bytes from there. */
ms_status rt_tensor_new_on(rt_dtype dt, const rt_shape *shape, rt_buf *buf, size_t offset,
                           rt_tensor **out);
/* Same data, other shape (element counts must match): a view sharing buffers. */
ms_status rt_tensor_view(const rt_tensor *t, const rt_shape *shape, rt_tensor **out);
/* Deep copy (string bytes too). */
ms_status rt_tensor_clone(const rt_tensor *t, rt_tensor **out);
/* DT_STRING tensor whose strings are copies of strs[0..nelem-1]. */
ms_status rt_tensor_new_strings(const rt_shape *shape, const rt_str *strs, rt_tensor **out);
/* Scalar helpers. */
ms_status rt_tensor_scalar_f32(float v, rt_tensor **out);
ms_status rt_tensor_scalar_string(const char *s, size_t len, rt_tensor **out);

rt_tensor *rt_tensor_ref(rt_tensor *t);
void rt_tensor_unref(rt_tensor *t);

static inline size_t rt_tensor_nbytes(const rt_tensor *t) {
    return (size_t)t->nelem * rt_dtype_size(t->dtype);
}
static inline float *rt_tensor_f32(const rt_tensor *t) {
    return (float *)t->data;
}
static inline rt_str *rt_tensor_strs(const rt_tensor *t) {
    return (rt_str *)t->data;
}

/* Bitwise comparison of dtype, shape and contents (strings by bytes). */
int rt_tensor_equal(const rt_tensor *a, const rt_tensor *b);

#endif /* RT_TENSOR_H */
