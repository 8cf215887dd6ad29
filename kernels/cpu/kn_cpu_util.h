/* kn_cpu_util.h - helpers shared by the CPU kernel files: node-named errors,
 * index inputs (int32/int64 tensors read as int64), numpy broadcasting and a
 * table-driven strided gather used by the shape ops.
 *
 * Internal to kernels/cpu (double-underscore names); nothing here allocates
 * tensors except kn__gather_run, which writes into a caller's buffer.
 */
#ifndef KN_CPU_UTIL_H
#define KN_CPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kn_backend.h"

/* kn__errf (node-named errors) is declared in kn_backend.h. */
#define KN_EINVAL(node, ...) kn__errf(MS_EINVAL, (node), __VA_ARGS__)

/* kn_ctx_output, with the node named in the message when it fails (too
 * large, out of memory). */
ms_status kn__output(kn_ctx *ctx, const kn_node *n, int idx, rt_dtype dt, const rt_shape *shape,
                     rt_tensor **out);

/* Checks that in[0..count-1] are present (non-NULL) and that node->nin >= count. */
ms_status kn__need_inputs(const kn_node *n, rt_tensor *const *in, int count);

/* Reads an int32 or int64 tensor (any shape) as int64 values. Copies up to
 * `max` values into out and sets *count to the element count. MS_EINVAL
 * naming `what` for other dtypes or more than `max` values. */
ms_status kn__read_ints(const kn_node *n, const rt_tensor *t, const char *what, int64_t *out,
                        int max, int *count);
/* Same for a tensor that must hold exactly one value (scalar or [1]). */
ms_status kn__read_int1(const kn_node *n, const rt_tensor *t, const char *what, int64_t *out);

/* Maps a possibly negative axis into [0, rank); -1 when out of range. */
int kn__axis(int64_t axis, int rank);

/* Short "(2, 3)" string of a shape in a static per-thread buffer (one of
 * four rotating buffers, so up to four may appear in one message). */
const char *kn__shp(const rt_shape *s);

/* ---- broadcasting ---- */
#define KN_BCAST_MAX 3
typedef struct kn_bcast {
    rt_shape out;                              /* broadcast result shape */
    int rank;                                  /* collapsed rank (>= 1) */
    int64_t dim[RT_MAX_RANK];                  /* collapsed dims */
    int64_t stride[KN_BCAST_MAX][RT_MAX_RANK]; /* element strides, 0 = broadcast */
    int64_t rows;                              /* product of dim[0..rank-2] */
} kn_bcast;

/* numpy broadcasting of `count` shapes (count <= KN_BCAST_MAX). MS_EINVAL
 * naming the node when they are incompatible. */
ms_status kn__bcast_init(kn_bcast *b, const kn_node *n, const rt_shape *const *shapes, int count);
/* Element offsets of input k for the first element of collapsed row `row`. */
void kn__bcast_row(const kn_bcast *b, int64_t row, int64_t *offs, int count);

/* ---- table-driven gather: out[coords] = src[sum_d tab[d][coord_d]] ---- */
#define KN_GATHER_PAD INT64_MIN /* table entry of a padding position */
typedef struct kn_gather {
    int rank;                  /* >= 1 */
    int64_t dim[RT_MAX_RANK];  /* output dims */
    int64_t *tab[RT_MAX_RANK]; /* per dim: source element offset of each coordinate */
    int64_t *mem;              /* owns the tables */
    size_t esize;              /* element size in bytes (1, 2, 4, 8 or 16) */
    const uint8_t *src;
    uint8_t *dst;
    const uint8_t *pad; /* one element written at padding positions */
} kn_gather;

/* Allocates the tables for output dims out->dim (rank 0 treated as [1]).
 * Fill g->tab[d][i] afterwards. MS_ENOMEM on failure. */
ms_status kn__gather_init(kn_gather *g, const rt_shape *out, size_t esize);
void kn__gather_destroy(kn_gather *g);
/* Runs the gather over all output rows, in parallel through ctx. */
void kn__gather_run(kn_ctx *ctx, kn_gather *g);

/* Copies n elements of `esize` bytes from src to dst (thin memcpy wrapper). */
static inline void kn__copy(void *dst, const void *src, int64_t n, size_t esize) {
    if (n > 0) __builtin_memcpy(dst, src, (size_t)n * esize);
}

/* ---- per-thread scratch memory ----
 * Kernels that need temporary buffers (im2col columns, layout transposes)
 * borrow them here: each thread keeps up to KN_SCRATCH_SLOTS grow-only
 * buffers of at most KN_SCRATCH_CACHE_MAX bytes, so that steady-state
 * requests neither allocate nor fault in fresh pages. Larger requests are
 * plain allocations. Use distinct slots for buffers alive at the same time;
 * hand every buffer back with kn__scratch_done (frees it unless cached). */
#define KN_SCRATCH_SLOTS     4
#define KN_SCRATCH_CACHE_MAX ((size_t)32 << 20)
/* A buffer of at least `bytes` (64-byte aligned), or NULL when out of memory. */
void *kn__scratch(int slot, size_t bytes);
void kn__scratch_done(int slot, void *p);

/* float <-> IEEE half / bfloat16 bits, round to nearest even. */
float kn__half_to_f32(uint16_t h);
uint16_t kn__f32_to_half(float f);
float kn__bf16_to_f32(uint16_t h);
uint16_t kn__f32_to_bf16(float f);
/* double -> half / bfloat16 bits in one rounding to nearest even. */
uint16_t kn__f64_to_half(double d);
uint16_t kn__f64_to_bf16(double d);

/* ---- window attributes shared by convolutions and pools ---- */
enum { KN_PAD_VALID, KN_PAD_SAME, KN_PAD_EXPLICIT };

/* Reads a 4-list attr in data-format order into (h, w), checking that the
 * batch and channel entries are 1. Absent -> dflt. */
ms_status kn__attr_hw(const kn_node *n, const char *key, int nchw, int64_t dflt, int64_t *h,
                      int64_t *w);
/* padding (SAME/VALID/EXPLICIT) and explicit_paddings; ep = top, bottom,
 * left, right. */
ms_status kn__parse_padding(const kn_node *n, int nchw, int *padding, int64_t ep[4]);
/* Output size and leading pad of one spatial dimension (TensorFlow's
 * GetWindowedOutputSizeVerbose). */
ms_status kn__window_dim(const kn_node *n, const char *what, int64_t in, int64_t k, int64_t dil,
                         int64_t stride, int padding, int64_t ep_before, int64_t ep_after,
                         int64_t *out, int64_t *pad_before);

/* ---- run-time ISA clones of simple loops ----
 * The build has no -march flag and GCC vectorises little at -O2, so loops
 * on hot paths (pools, elementwise, BiasAdd, resize) are compiled three
 * times: baseline x86-64 (SSE2), AVX2 and AVX-512F, each with the
 * vectoriser on (dynamic cost model) and floating-point contraction off, so
 * that every clone computes exactly what the plain C expression says (no FMA
 * fusing: results are bit-identical across clones and to the scalar code).
 * The clone runs after kn__vec_isa(), which follows kn__gemm_isa() (so a
 * test or benchmark that forces a GEMM family forces these too).
 *
 * KN_VEC_DEFINE(name, (params), (args), { body }) defines static
 * name_c/name_avx2/name_avx512 with that body and a static dispatcher
 * `name` with the same parameters returning void. Helpers called from a
 * body must be macros or always_inline (GCC does not inline across
 * different optimize/target attributes). */
enum { KN_VEC_C, KN_VEC_AVX2, KN_VEC_AVX512 };
/* KN_VEC_C, KN_VEC_AVX2 or KN_VEC_AVX512. */
int kn__vec_isa(void);

#if defined(__clang__)
#define KN_VEC_ATTR_C
#define KN_VEC_ATTR_AVX2   __attribute__((target("avx2")))
#define KN_VEC_ATTR_AVX512 __attribute__((target("avx512f")))
#else
/* no-tree-loop-distribute-patterns: short copy/fill loops stay inline
 * vector code instead of becoming memcpy/memset calls. */
#define KN__VEC_OPT                                                                                \
    optimize("tree-vectorize", "vect-cost-model=dynamic", "fp-contract=off",                       \
             "no-tree-loop-distribute-patterns")
#define KN_VEC_ATTR_C      __attribute__((KN__VEC_OPT))
#define KN_VEC_ATTR_AVX2   __attribute__((target("avx2"), KN__VEC_OPT))
#define KN_VEC_ATTR_AVX512 __attribute__((target("avx512f"), KN__VEC_OPT))
#endif

/* clang-format off */
#define KN_VEC_DEFINE(name, params, args, ...)                                                     \
    KN_VEC_ATTR_C static void name##_c params __VA_ARGS__                                          \
    KN_VEC_ATTR_AVX2 static void name##_avx2 params __VA_ARGS__                                    \
    KN_VEC_ATTR_AVX512 static void name##_avx512 params __VA_ARGS__                                \
    static void name params {                                                                      \
        switch (kn__vec_isa()) {                                                                   \
        case KN_VEC_AVX512:                                                                        \
            name##_avx512 args;                                                                    \
            break;                                                                                 \
        case KN_VEC_AVX2:                                                                          \
            name##_avx2 args;                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            name##_c args;                                                                         \
            break;                                                                                 \
        }                                                                                          \
    }
/* clang-format on */

/* expf for vectorised loops (branch-free, no libm call, so GCC vectorises
 * the loop that calls it): Cody-Waite reduction x = n ln2 + r, Cephes'
 * degree-6 polynomial for e^r, and 2^n applied in two halves so that
 * results in the subnormal range round once. Within about 2 ulp of expf for
 * normal results; overflows to inf above ~88.72, 0 below ~-103.97, NaN
 * stays NaN. always_inline: callable from the KN_VEC_DEFINE clones. */
static inline __attribute__((always_inline)) float kn__vexpf(float x) {
    x = x > 89.0f ? 89.0f : x;
    x = x < -104.0f ? -104.0f : x;
    /* n = round(x / ln2) through the 1.5 * 2^23 trick (|x / ln2| < 2^22). */
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    int32_t k = (int32_t)n, k1 = k / 2, k2 = k - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float s1, s2;
    __builtin_memcpy(&s1, &b1, sizeof(s1));
    __builtin_memcpy(&s2, &b2, sizeof(s2));
    return p * s1 * s2;
}

#endif /* KN_CPU_UTIL_H */
