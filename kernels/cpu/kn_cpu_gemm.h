/* kn_cpu_gemm.h - packed, cache-blocked single-precision GEMM with a fused
 * per-channel epilogue, used by the fast Conv2D / MatMul kernels.
 *
 * C[M, N] = epilogue(A[M, K] * B[K, N]), C row-major with leading dimension
 * ldc. An operand is seen as a set of "lines" of K values: the rows of A and
 * the columns of B. The GEMM packs R lines at a time into panels (R = MR for
 * A, NR for B of the chosen micro-kernel), dst[k * R + r], zero-padded past
 * the last line. An operand either is pre-packed once (kn__gemm_pack, e.g. a
 * constant filter at model load) or supplies a callback that packs a panel
 * on demand (a strided matrix, an implicit im2col of a convolution input).
 *
 * Micro-kernels: AVX-512F 14x32, AVX2+FMA 6x16, portable C 4x8; the best one
 * the CPU supports is chosen at run time (__builtin_cpu_supports), or forced
 * through kn__gemm_set_isa (tests, benchmarks).
 *
 * Internal to kernels/cpu (double-underscore names). Scratch memory is kept
 * per thread and reused, so steady-state calls do not allocate.
 */
#ifndef KN_CPU_GEMM_H
#define KN_CPU_GEMM_H

#include <stdint.h>

#include "kn_backend.h"

typedef enum kn_gemm_isa {
    KN_GEMM_ISA_AUTO = 0, /* best supported */
    KN_GEMM_ISA_C = 1,
    KN_GEMM_ISA_AVX2 = 2,
    KN_GEMM_ISA_AVX512 = 3,
} kn_gemm_isa;

/* Forces the micro-kernel family for later calls (process-wide; AUTO
 * restores the default). MS_ENOTSUP when the CPU lacks the ISA. */
ms_status kn__gemm_set_isa(kn_gemm_isa isa);
/* The family in use now (never AUTO). */
kn_gemm_isa kn__gemm_isa(void);
const char *kn__gemm_isa_name(kn_gemm_isa isa);

/* Activation applied after scale/bias. */
typedef enum kn_act {
    KN_ACT_NONE = 0,
    KN_ACT_RELU,
    KN_ACT_RELU6,
    KN_ACT_LEAKYRELU, /* alpha */
    KN_ACT_ELU,
    KN_ACT_SIGMOID,
    KN_ACT_TANH,
} kn_act;

/* y = act(acc * scale[ch] + bias[ch] + add); ch is the column n, or the row m
 * when per_row is set. NULL scale = 1, NULL bias = 0. add, when not NULL, is
 * a tensor laid out exactly as the whole output whose first element is at
 * ybase: the output element at address p gets add[p - ybase] (a residual
 * connection, TensorFlow's fused "Add"). Borrowed arrays. */
typedef struct kn_gemm_epi {
    const float *scale;
    const float *bias;
    int per_row;
    kn_act act;
    float alpha;
    const float *add;
    const float *ybase;
} kn_gemm_epi;

/* Packs lines [l0, l0 + nl) (nl <= R) for k in [k0, k0 + nk) into one
 * panel dst[k * R + r] (k relative to k0), zeroing lines nl..R-1. */
typedef void (*kn_gemm_pack_fn)(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                                float *dst);

/* An operand pre-packed in panels of R lines: data[(l / R) * K * R + k * R + l % R]. */
typedef struct kn_gemm_packed {
    int R;
    int64_t lines, K;
    float *data; /* owned; free with kn__gemm_packed_free */
} kn_gemm_packed;

typedef struct kn_gemm_opnd {
    const kn_gemm_packed *packed; /* borrowed; or NULL to use pack/arg */
    kn_gemm_pack_fn pack;
    const void *arg;
} kn_gemm_opnd;

/* A strided matrix operand: line l, depth k at p[l * sl + k * sk]. */
typedef struct kn_gemm_mat {
    const float *p;
    int64_t sl, sk;
} kn_gemm_mat;
void kn__gemm_pack_mat(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                       float *dst);

/* Line widths of the current ISA: MR for A (which = 0), NR for B (which = 1). */
int kn__gemm_r(int which);

/* Packs lines [0, lines) x [0, K) of src for the current ISA's A (which = 0)
 * or B (which = 1) panels. MS_ENOMEM. */
ms_status kn__gemm_pack(int which, int64_t lines, int64_t K, kn_gemm_pack_fn fn, const void *arg,
                        kn_gemm_packed *out);
void kn__gemm_packed_free(kn_gemm_packed *p);

/* C = epi(A * B), parallel over tiles through ctx (NULL ctx: serial). K = 0
 * gives epi(0). MS_ENOMEM when scratch cannot be allocated. */
ms_status kn__sgemm(kn_ctx *ctx, int64_t M, int64_t N, int64_t K, const kn_gemm_opnd *a,
                    const kn_gemm_opnd *b, float *C, int64_t ldc, const kn_gemm_epi *epi);

/* ---- for kernels with their own loops (direct / Winograd convolution) ---- */

/* This thread's reusable scratch of at least n floats (shared with the GEMM's
 * A packing; do not hold it across kn__sgemm calls), or NULL. */
float *kn__gemm_scratch(size_t n);

/* Applies the epilogue to rows [m0, m0+rows) x cols [n0, n0+cols) of C in place. */
void kn__gemm_epilogue(const kn_gemm_epi *epi, float *C, int64_t ldc, int64_t m0, int64_t rows,
                       int64_t n0, int64_t cols);

#endif /* KN_CPU_GEMM_H */
