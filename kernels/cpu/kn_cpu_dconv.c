/* kn_cpu_dconv.c - direct NHWC convolution on AVX-512 (see kn_cpu_conv.h).
 *
 * No im2col: a register tile of MR consecutive output pixels of one output
 * row x up to 32 output channels reads the input in place. For every filter
 * tap (kh, kw) the MR pixels' windows start sw * C floats apart, and the C
 * input channels of a tap are contiguous, so the depth loop broadcasts one
 * input value per pixel and multiplies it with one row of the packed filter
 * panel (the GEMM's B panels of 32 channels, packed once at model load).
 * The kh / kw loops run inside the micro-kernel, so the accumulators stay in
 * registers for the whole window, and the epilogue (scale, bias, residual
 * addend, activation) is applied to them before the only store.
 *
 * The window's depth (kh, kw, c in that order) is summed in slices of
 * DC_SLICE: each slice from zero, each added in turn to a running total, as
 * ONNX Runtime's MLAS sums a GEMM's depth (and so a 1x1 Conv's channels,
 * which then come out bit for bit the same). Against one long chain that
 * halves the rounding error of a deep window (a 1x1 conv over 384 channels:
 * rms 2.9e-7 of the output instead of 5.6e-7, docs/onnx.md) for one vector
 * add per accumulator and slice; the totals live on the stack, the inner
 * loop keeps its accumulators in registers.
 *
 * Borders: rows above / below the input are skipped (the kh range shrinks);
 * a group of pixels whose windows cross the left or right edge reads a small
 * zero-padded copy of just its window columns (the "slab"), so padding costs
 * a copy of a few columns per output row, not of the whole input.
 *
 * Output rows are split into groups of at most 14 pixels of balanced sizes;
 * micro-kernels exist for every group size 1..14 and for 16 or 32 channels
 * (the last panel of a channel count that is not a multiple of 16 is stored
 * through a mask).
 */
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_conv.h"

#define DC_NR 32 /* channels per packed filter panel (the AVX-512 GEMM's NR) */
#define DC_MR 14 /* most pixels per tile */
#define DC_SLICE 128 /* window depth summed from zero before it joins the total */
/* Outputs over this size are stored around the caches (dc_rows). */
#define DC_STREAM_BYTES ((uint64_t)32 << 20)

typedef struct dc_tile {
    const float *x;      /* pixel 0's window at its first kh row, kw = 0, c = 0 */
    int64_t xs, xr, xw;  /* strides: next pixel, next kh row, next kw */
    const float *b;      /* packed filter panel at the first kh row */
    int64_t br, bw;      /* filter strides: next kh row, next kw */
    int nkh, nkw;        /* taps */
    int64_t kc;          /* contiguous depth per tap (C, or KW * C when dw == 1) */
    float *y;            /* pixel 0, first channel of the panel */
    int64_t ys;          /* output pixel stride (OC) */
    const float *scale;  /* at the panel's first channel, or NULL */
    const float *bias;   /* same */
    const float *add;    /* addend of pixel 0 (stride ys), or NULL */
    kn_act act;
    float alpha;
    __mmask16 mlast; /* AVX-512: valid lanes of the last 16-channel vector */
    int rem;         /* AVX2: valid lanes (1-8) of the last 8-channel vector */
} dc_tile;

/* clang-format off */
#define DC_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
/* clang-format on */

__attribute__((target("avx512f"), always_inline)) static inline __m512 dc_act(__m512 v, kn_act act,
                                                                               __m512 alpha) {
    switch (act) {
    case KN_ACT_RELU:
        return _mm512_max_ps(v, _mm512_setzero_ps());
    case KN_ACT_RELU6:
        return _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(6.0f));
    case KN_ACT_LEAKYRELU: {
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_mul_ps(v, neg, v, alpha);
    }
    default: /* none here; exp-based ones run after the store */
        return v;
    }
}

/* The micro-kernel body for MR pixels x NV vectors of 16 channels; MR and NV
 * are compile-time constants in every instance, so the unused accumulators
 * and branches vanish. */
__attribute__((target("avx512f"), always_inline)) static inline void dc_body(const int MR,
                                                                              const int NV,
                                                                              const int STREAM,
                                                                              const dc_tile *t) {
#define DC_DECL(i)                                                                                 \
    __m512 a##i##0 = _mm512_setzero_ps(), a##i##1 = _mm512_setzero_ps();                         \
    __m512 t##i##0 = _mm512_setzero_ps(), t##i##1 = _mm512_setzero_ps();
    DC_ROWS(DC_DECL)
#undef DC_DECL
    const int64_t xs = t->xs, kc = t->kc;
    int64_t left = DC_SLICE; /* depth still to go in the current slice */
    for (int kh = 0; kh < t->nkh; kh++) {
        for (int kw = 0; kw < t->nkw; kw++) {
            const float *xa = t->x + kh * t->xr + kw * t->xw;
            const float *xb = MR > 7 ? xa + 7 * xs : xa;
            const float *bb = t->b + kh * t->br + kw * t->bw;
            for (int64_t c = 0; c < kc; c++, bb += DC_NR) {
                if (left-- == 0) {
#define DC_FOLD(i)                                                                                 \
    if (MR > (i)) {                                                                                \
        t##i##0 = _mm512_add_ps(t##i##0, a##i##0);                                                 \
        a##i##0 = _mm512_setzero_ps();                                                             \
        if (NV > 1) {                                                                              \
            t##i##1 = _mm512_add_ps(t##i##1, a##i##1);                                             \
            a##i##1 = _mm512_setzero_ps();                                                         \
        }                                                                                          \
    }
                    DC_ROWS(DC_FOLD)
#undef DC_FOLD
                    left = DC_SLICE - 1;
                }
                const __m512 b0 = _mm512_loadu_ps(bb);
                const __m512 b1 = NV > 1 ? _mm512_loadu_ps(bb + 16) : b0;
#define DC_FMA(i)                                                                                  \
    if (MR > (i)) {                                                                                \
        const __m512 v = _mm512_set1_ps((i) < 7 ? xa[(i) * xs + c] : xb[((i) - 7) * xs + c]);    \
        a##i##0 = _mm512_fmadd_ps(v, b0, a##i##0);                                                 \
        if (NV > 1) a##i##1 = _mm512_fmadd_ps(v, b1, a##i##1);                                     \
    }
                DC_ROWS(DC_FMA)
#undef DC_FMA
            }
        }
    }
    /* the last slice joins the total (exact when the window was one slice) */
#define DC_LAST(i)                                                                                 \
    if (MR > (i)) {                                                                                \
        a##i##0 = _mm512_add_ps(t##i##0, a##i##0);                                                 \
        if (NV > 1) a##i##1 = _mm512_add_ps(t##i##1, a##i##1);                                     \
    }
    DC_ROWS(DC_LAST)
#undef DC_LAST
    const __mmask16 m0 = NV > 1 ? (__mmask16)0xffff : t->mlast, m1 = t->mlast;
    const __m512 one = _mm512_set1_ps(1.0f), alpha = _mm512_set1_ps(t->alpha);
    __m512 s0 = one, s1 = one, z0 = _mm512_setzero_ps(), z1 = _mm512_setzero_ps();
    if (t->scale) {
        s0 = _mm512_maskz_loadu_ps(m0, t->scale);
        if (NV > 1) s1 = _mm512_maskz_loadu_ps(m1, t->scale + 16);
    }
    if (t->bias) {
        z0 = _mm512_maskz_loadu_ps(m0, t->bias);
        if (NV > 1) z1 = _mm512_maskz_loadu_ps(m1, t->bias + 16);
    }
    const kn_act act = t->act;
    const float *ad = t->add;
    float *y = t->y;
    const int64_t ys = t->ys;
#define DC_OUT(i)                                                                                  \
    if (MR > (i)) {                                                                                \
        __m512 v0 = _mm512_fmadd_ps(a##i##0, s0, z0);                                              \
        if (ad) v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, ad + (i) * ys));                  \
        v0 = dc_act(v0, act, alpha);                                                               \
        if (STREAM)                                                                                \
            _mm512_stream_ps(y + (i) * ys, v0);                                                    \
        else                                                                                       \
            _mm512_mask_storeu_ps(y + (i) * ys, m0, v0);                                           \
        if (NV > 1) {                                                                              \
            __m512 v1 = _mm512_fmadd_ps(a##i##1, s1, z1);                                          \
            if (ad) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, ad + (i) * ys + 16));         \
            v1 = dc_act(v1, act, alpha);                                                           \
            if (STREAM)                                                                            \
                _mm512_stream_ps(y + (i) * ys + 16, v1);                                           \
            else                                                                                   \
                _mm512_mask_storeu_ps(y + (i) * ys + 16, m1, v1);                                  \
        }                                                                                          \
    }
    DC_ROWS(DC_OUT)
#undef DC_OUT
}

typedef void (*dc_fn)(const dc_tile *t);

/* dc_*: ordinary stores; dcs_*: streaming stores (full, 64-byte aligned
 * vectors only), a separate instance so that the others carry no branch. */
#define DC_INST(mr, nv)                                                                            \
    __attribute__((target("avx512f"))) static void dc_##mr##_##nv(const dc_tile *t) {             \
        dc_body(mr, nv, 0, t);                                                                     \
    }                                                                                              \
    __attribute__((target("avx512f"))) static void dcs_##mr##_##nv(const dc_tile *t) {            \
        dc_body(mr, nv, 1, t);                                                                     \
    }
#define DC_INST2(mr) DC_INST(mr, 1) DC_INST(mr, 2)
/* clang-format off */
DC_INST2(1) DC_INST2(2) DC_INST2(3) DC_INST2(4) DC_INST2(5) DC_INST2(6) DC_INST2(7)
DC_INST2(8) DC_INST2(9) DC_INST2(10) DC_INST2(11) DC_INST2(12) DC_INST2(13) DC_INST2(14)

static const dc_fn dc_tab[2][DC_MR] = {
    {dc_1_1, dc_2_1, dc_3_1, dc_4_1, dc_5_1, dc_6_1, dc_7_1,
     dc_8_1, dc_9_1, dc_10_1, dc_11_1, dc_12_1, dc_13_1, dc_14_1},
    {dc_1_2, dc_2_2, dc_3_2, dc_4_2, dc_5_2, dc_6_2, dc_7_2,
     dc_8_2, dc_9_2, dc_10_2, dc_11_2, dc_12_2, dc_13_2, dc_14_2},
};
static const dc_fn dcs_tab[2][DC_MR] = {
    {dcs_1_1, dcs_2_1, dcs_3_1, dcs_4_1, dcs_5_1, dcs_6_1, dcs_7_1,
     dcs_8_1, dcs_9_1, dcs_10_1, dcs_11_1, dcs_12_1, dcs_13_1, dcs_14_1},
    {dcs_1_2, dcs_2_2, dcs_3_2, dcs_4_2, dcs_5_2, dcs_6_2, dcs_7_2,
     dcs_8_2, dcs_9_2, dcs_10_2, dcs_11_2, dcs_12_2, dcs_13_2, dcs_14_2},
};
/* clang-format on */

/* ---- AVX2 + FMA: up to 6 pixels x 16 channels (filter panels of 16) ---- */

#define DC2_NR 16
#define DC2_MR 6
/* clang-format off */
#define DC2_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
/* clang-format on */

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 dc2_act(__m256 v, kn_act act,
                                                                                 __m256 alpha) {
    switch (act) {
    case KN_ACT_RELU:
        return _mm256_max_ps(v, _mm256_setzero_ps());
    case KN_ACT_RELU6:
        return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0f));
    case KN_ACT_LEAKYRELU:
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha),
                                _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    default:
        return v;
    }
}

__attribute__((target("avx2,fma"), always_inline)) static inline void dc2_body(const int MR,
                                                                                const int NV,
                                                                                const dc_tile *t) {
#define DC2_DECL(i)                                                                                \
    __m256 a##i##0 = _mm256_setzero_ps(), a##i##1 = _mm256_setzero_ps();                         \
    __m256 t##i##0 = _mm256_setzero_ps(), t##i##1 = _mm256_setzero_ps();
    DC2_ROWS(DC2_DECL)
#undef DC2_DECL
    const int64_t xs = t->xs, kc = t->kc;
    int64_t left = DC_SLICE; /* as in dc_body */
    for (int kh = 0; kh < t->nkh; kh++) {
        for (int kw = 0; kw < t->nkw; kw++) {
            const float *xa = t->x + kh * t->xr + kw * t->xw;
            const float *bb = t->b + kh * t->br + kw * t->bw;
            for (int64_t c = 0; c < kc; c++, bb += DC2_NR) {
                if (left-- == 0) {
#define DC2_FOLD(i)                                                                                \
    if (MR > (i)) {                                                                                \
        t##i##0 = _mm256_add_ps(t##i##0, a##i##0);                                                 \
        a##i##0 = _mm256_setzero_ps();                                                             \
        if (NV > 1) {                                                                              \
            t##i##1 = _mm256_add_ps(t##i##1, a##i##1);                                             \
            a##i##1 = _mm256_setzero_ps();                                                         \
        }                                                                                          \
    }
                    DC2_ROWS(DC2_FOLD)
#undef DC2_FOLD
                    left = DC_SLICE - 1;
                }
                const __m256 b0 = _mm256_loadu_ps(bb);
                const __m256 b1 = NV > 1 ? _mm256_loadu_ps(bb + 8) : b0;
#define DC2_FMA(i)                                                                                 \
    if (MR > (i)) {                                                                                \
        const __m256 v = _mm256_broadcast_ss(xa + (i) * xs + c);                                   \
        a##i##0 = _mm256_fmadd_ps(v, b0, a##i##0);                                                 \
        if (NV > 1) a##i##1 = _mm256_fmadd_ps(v, b1, a##i##1);                                     \
    }
                DC2_ROWS(DC2_FMA)
#undef DC2_FMA
            }
        }
    }
#define DC2_LAST(i)                                                                                \
    if (MR > (i)) {                                                                                \
        a##i##0 = _mm256_add_ps(t##i##0, a##i##0);                                                 \
        if (NV > 1) a##i##1 = _mm256_add_ps(t##i##1, a##i##1);                                     \
    }
    DC2_ROWS(DC2_LAST)
#undef DC2_LAST
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i kl = _mm256_cmpgt_epi32(_mm256_set1_epi32(t->rem), lane);
    const __m256i k0 = NV > 1 ? _mm256_set1_epi32(-1) : kl, k1 = kl;
    const __m256 one = _mm256_set1_ps(1.0f), alpha = _mm256_set1_ps(t->alpha);
    __m256 s0 = one, s1 = one, z0 = _mm256_setzero_ps(), z1 = _mm256_setzero_ps();
    if (t->scale) {
        s0 = _mm256_maskload_ps(t->scale, k0);
        if (NV > 1) s1 = _mm256_maskload_ps(t->scale + 8, k1);
    }
    if (t->bias) {
        z0 = _mm256_maskload_ps(t->bias, k0);
        if (NV > 1) z1 = _mm256_maskload_ps(t->bias + 8, k1);
    }
    const kn_act act = t->act;
    const float *ad = t->add;
    float *y = t->y;
    const int64_t ys = t->ys;
#define DC2_OUT(i)                                                                                 \
    if (MR > (i)) {                                                                                \
        __m256 v0 = _mm256_fmadd_ps(a##i##0, s0, z0);                                              \
        if (ad) v0 = _mm256_add_ps(v0, _mm256_maskload_ps(ad + (i) * ys, k0));                     \
        _mm256_maskstore_ps(y + (i) * ys, k0, dc2_act(v0, act, alpha));                            \
        if (NV > 1) {                                                                              \
            __m256 v1 = _mm256_fmadd_ps(a##i##1, s1, z1);                                          \
            if (ad) v1 = _mm256_add_ps(v1, _mm256_maskload_ps(ad + (i) * ys + 8, k1));             \
            _mm256_maskstore_ps(y + (i) * ys + 8, k1, dc2_act(v1, act, alpha));                    \
        }                                                                                          \
    }
    DC2_ROWS(DC2_OUT)
#undef DC2_OUT
}

#define DC2_INST(mr, nv)                                                                           \
    __attribute__((target("avx2,fma"))) static void dc2_##mr##_##nv(const dc_tile *t) {           \
        dc2_body(mr, nv, t);                                                                       \
    }
#define DC2_INST2(mr) DC2_INST(mr, 1) DC2_INST(mr, 2)
/* clang-format off */
DC2_INST2(1) DC2_INST2(2) DC2_INST2(3) DC2_INST2(4) DC2_INST2(5) DC2_INST2(6)

static const dc_fn dc2_tab[2][DC2_MR] = {
    {dc2_1_1, dc2_2_1, dc2_3_1, dc2_4_1, dc2_5_1, dc2_6_1},
    {dc2_1_2, dc2_2_2, dc2_3_2, dc2_4_2, dc2_5_2, dc2_6_2},
};
/* clang-format on */

int kn__dconv_ok(const kn_conv_attrs *a, const kn_conv_geo *g, const kn_gemm_packed *pk) {
    if (a->nchw || pk == NULL || pk->K != g->KH * g->KW * g->C || pk->lines != g->OC) return 0;
    const kn_gemm_isa isa = kn__gemm_isa();
    return (isa == KN_GEMM_ISA_AVX512 && pk->R == DC_NR) ||
           (isa == KN_GEMM_ISA_AVX2 && pk->R == DC2_NR);
}

/* The activation applied in registers (Relu, Relu6, LeakyRelu, none) and,
 * in *late, the exp-based one (Elu, Sigmoid, Tanh) applied after the store. */
static kn_act split_act(const kn_gemm_epi *epi, kn_gemm_epi *late) {
    *late = (kn_gemm_epi){.act = KN_ACT_NONE, .alpha = epi ? epi->alpha : 0};
    if (epi == NULL) return KN_ACT_NONE;
    if (epi->act == KN_ACT_ELU || epi->act == KN_ACT_SIGMOID || epi->act == KN_ACT_TANH) {
        late->act = epi->act;
        return KN_ACT_NONE;
    }
    return epi->act;
}

/* n items in groups of at most mrmax, of balanced sizes: *ng groups, the
 * first *extra of them *base + 1 items long, the rest *base. */
static void balanced_groups(int64_t n, int mrmax, int64_t *ng, int64_t *base, int64_t *extra) {
    *ng = (n + mrmax - 1) / mrmax;
    *base = n / *ng;
    *extra = n % *ng;
}

typedef struct dc_job {
    const kn_conv_attrs *a;
    const kn_conv_geo *g;
    const float *x;
    const kn_gemm_packed *pk;
    float *y;
    const kn_gemm_epi *epi;
    atomic_int failed;
} dc_job;

static void dc_rows(void *arg, int64_t rb, int64_t re) {
    dc_job *j = arg;
    const kn_conv_geo *g = j->g;
    const kn_conv_attrs *a = j->a;
    const int64_t C = g->C, W = g->W, OC = g->OC, OW = g->OW, KW = g->KW;
    const int64_t K = g->KH * KW * C;
    /* AVX-512: tiles of 14 pixels x 32 channels; AVX2: 6 x 16. */
    const int avx2 = j->pk->R == DC2_NR;
    const int PW = avx2 ? DC2_NR : DC_NR, VL = PW / 2, MRX = avx2 ? DC2_MR : DC_MR;
    const int64_t slab_w = (MRX - 1) * a->sw + (KW - 1) * a->dw + 1;
    float *slab = kn__gemm_scratch((size_t)(g->KH * slab_w * C));
    if (slab == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    const kn_gemm_epi *epi = j->epi;
    kn_gemm_epi late;
    const kn_act act = split_act(epi, &late);
    int64_t ng, base, extra;
    balanced_groups(OW, MRX, &ng, &base, &extra);
    /* An output far larger than the last-level cache (a stem convolution's
     * at a batch of 8: 64 MiB) is evicted before the next layer reads it,
     * so it is written with streaming stores: no read of each line before
     * its write, no eviction of the input and filter. Only whole aligned
     * vectors, all in registers: OC a multiple of 16, an aligned y. */
    const int stream = !avx2 && late.act == KN_ACT_NONE && OC % 16 == 0 &&
                       ((uintptr_t)j->y & 63) == 0 &&
                       (uint64_t)(g->N * g->OH * OW * OC) * sizeof(float) > DC_STREAM_BYTES;
    for (int64_t r = rb; r < re; r++) {
        const int64_t n = r / g->OH, oh = r % g->OH;
        const int64_t ih0 = oh * a->sh - g->pt;
        int64_t kh0 = 0, kh1 = g->KH;
        while (kh0 < kh1 && ih0 + kh0 * a->dh < 0) kh0++;
        while (kh1 > kh0 && ih0 + (kh1 - 1) * a->dh >= g->H) kh1--;
        const int nkh = (int)(kh1 - kh0);
        const float *xrow = nkh > 0 ? j->x + ((n * g->H + ih0 + kh0 * a->dh) * W) * C : j->x;
        int64_t ow0 = 0;
        for (int64_t gi = 0; gi < ng; gi++) {
            const int mr = (int)(base + (gi < extra));
            const int64_t iw0 = ow0 * a->sw - g->pl;
            const int64_t iw_last = (ow0 + mr - 1) * a->sw - g->pl + (KW - 1) * a->dw;
            const float *xg = xrow;
            int64_t xr = a->dh * W * C;
            if (nkh > 0 && iw0 >= 0 && iw_last < W) {
                xg = xrow + iw0 * C;
            } else if (nkh > 0) {
                /* Zero-padded copy of the group's window columns. */
                const int64_t sw_cols = (mr - 1) * a->sw + (KW - 1) * a->dw + 1;
                const int64_t v0 = iw0 < 0 ? -iw0 : 0; /* first column inside */
                int64_t v1 = W - iw0;                    /* one past the last inside */
                if (v1 > sw_cols) v1 = sw_cols;
                for (int kh = 0; kh < nkh; kh++) {
                    const float *src = xrow + kh * a->dh * W * C;
                    float *dst = slab + kh * sw_cols * C;
                    if (v1 <= v0) {
                        memset(dst, 0, (size_t)(sw_cols * C) * sizeof(float));
                        continue;
                    }
                    memset(dst, 0, (size_t)(v0 * C) * sizeof(float));
                    memcpy(dst + v0 * C, src + (iw0 + v0) * C, (size_t)((v1 - v0) * C) * sizeof(float));
                    memset(dst + v1 * C, 0, (size_t)((sw_cols - v1) * C) * sizeof(float));
                }
                xg = slab;
                xr = sw_cols * C;
            }
            float *yg = j->y + (r * OW + ow0) * OC;
            for (int64_t jr = 0; jr < OC; jr += PW) {
                const int nr = (int)(OC - jr < PW ? OC - jr : PW);
                const int nv = nr > VL ? 2 : 1;
                const int rem = nr - (nv - 1) * VL;
                dc_tile t = {
                    .x = xg,
                    .xs = a->sw * C,
                    .xr = xr,
                    .xw = a->dw * C,
                    .b = j->pk->data + (jr / PW) * K * PW + kh0 * KW * C * PW,
                    .br = KW * C * PW,
                    .bw = C * PW,
                    .nkh = nkh,
                    .nkw = a->dw == 1 ? 1 : (int)KW,
                    .kc = a->dw == 1 ? KW * C : C,
                    .y = yg + jr,
                    .ys = OC,
                    .mlast = (__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1),
                    .rem = rem,
                };
                if (epi) {
                    t.scale = epi->scale ? epi->scale + jr : NULL;
                    t.bias = epi->bias ? epi->bias + jr : NULL;
                    t.add = epi->add ? epi->add + (t.y - epi->ybase) : NULL;
                    t.act = act;
                    t.alpha = epi->alpha;
                }
                (avx2     ? dc2_tab[nv - 1][mr - 1]
                 : stream ? dcs_tab[nv - 1][mr - 1]
                          : dc_tab[nv - 1][mr - 1])(&t);
                if (late.act != KN_ACT_NONE) kn__gemm_epilogue(&late, yg, OC, 0, mr, jr, nr);
            }
            ow0 += mr;
        }
    }
    if (stream) _mm_sfence(); /* the streamed lines are in memory before the join */
}

ms_status kn__dconv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                        const kn_gemm_packed *pk, float *y, const kn_gemm_epi *epi) {
    if (g->N == 0 || g->OH == 0 || g->OW == 0 || g->OC == 0) return MS_OK;
    dc_job j = {.a = a, .g = g, .x = x, .pk = pk, .y = y, .epi = epi};
    atomic_init(&j.failed, 0);
    kn_ctx_parallel_for(ctx, g->N * g->OH, 1, dc_rows, &j);
    if (atomic_load(&j.failed)) return ms_errf(MS_ENOMEM, "out of memory for conv scratch");
    return MS_OK;
}

/* ====================================================================== */
/* Winograd F(2x2, 3x3)                                                   */
/* ====================================================================== */

/* 3x3, stride 1, undilated NHWC convolutions compute each 2x2 output tile
 * from a 4x4 input tile as Y = A' [ (G g G') . (B' d B) ] A (Lavin & Gray):
 * 16 multiplications per tile and channel pair instead of 36. The filter
 * transform U = G g G' is done once at load (in double, rounded once); a run
 * transforms a block of input tiles to V[16][tiles][C], does 16 GEMMs
 * M[xi] = V[xi] * U[xi] on the direct micro-kernels above (tiles are the
 * pixels, C the depth), and transforms M back with the epilogue fused. The
 * transforms only add and subtract (and halve, in G), so the result stays
 * within a few float roundings of the direct convolution's. */

#define WG_T 16 /* transformed values per tile */
/* Planes of V and M are this many floats longer than their data: 16 planes
 * a power of two apart would all map to the same L1 sets. */
#define WG_SKEW 16

void kn__wino_free(kn_wino *w) {
    if (w == NULL) return;
    free(w->u);
    w->u = NULL;
}

ms_status kn__wino_pack(const rt_tensor *f, kn_wino *out) {
    memset(out, 0, sizeof(*out));
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != 4 || f->shape.dim[0] != 3 ||
        f->shape.dim[1] != 3)
        return ms_errf(MS_EINVAL, "Winograd needs a 3x3 float filter");
    const int64_t C = f->shape.dim[2], OC = f->shape.dim[3];
    const int64_t P = (OC + DC_NR - 1) / DC_NR;
    if (C <= 0 || OC <= 0 || C > (1 << 20) || OC > (1 << 20))
        return ms_errf(MS_EINVAL, "Winograd filter of %lld x %lld channels", (long long)C,
                       (long long)OC);
    size_t n = (size_t)(WG_T * P * C * DC_NR);
    out->u = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (out->u == NULL) return ms_errf(MS_ENOMEM, "out of memory for the Winograd filter");
    memset(out->u, 0, n * sizeof(float));
    out->C = C;
    out->OC = OC;
    const float *g = f->data; /* [kh][kw][c][oc] */
    for (int64_t c = 0; c < C; c++)
        for (int64_t oc = 0; oc < OC; oc++) {
            double k[3][3], t[4][3], u[4][4];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) k[i][j] = g[((i * 3 + j) * C + c) * OC + oc];
            for (int j = 0; j < 3; j++) { /* t = G k */
                t[0][j] = k[0][j];
                t[1][j] = 0.5 * (k[0][j] + k[1][j] + k[2][j]);
                t[2][j] = 0.5 * (k[0][j] - k[1][j] + k[2][j]);
                t[3][j] = k[2][j];
            }
            for (int i = 0; i < 4; i++) { /* u = t G' */
                u[i][0] = t[i][0];
                u[i][1] = 0.5 * (t[i][0] + t[i][1] + t[i][2]);
                u[i][2] = 0.5 * (t[i][0] - t[i][1] + t[i][2]);
                u[i][3] = t[i][2];
            }
            for (int xi = 0; xi < WG_T; xi++)
                out->u[((xi * P + oc / DC_NR) * C + c) * DC_NR + oc % DC_NR] =
                    (float)u[xi / 4][xi % 4];
        }
    return MS_OK;
}

int kn__wino_ok(const kn_conv_attrs *a, const kn_conv_geo *g, const kn_wino *w) {
    return w != NULL && w->u != NULL && !a->nchw && kn__gemm_isa() == KN_GEMM_ISA_AVX512 &&
           g->KH == 3 && g->KW == 3 && a->sh == 1 && a->sw == 1 && a->dh == 1 && a->dw == 1 &&
           w->C == g->C && w->OC == g->OC;
}

typedef struct wg_job {
    const kn_conv_geo *g;
    const float *x;
    const kn_wino *w;
    float *y;
    const kn_gemm_epi *epi;
    int64_t TH, TW, NT, T, OCp;
    atomic_int failed;
} wg_job;

/* V[xi][t][c] for the tiles [t0, t0 + nt) of the block. Taps outside the
 * input read `zeros` (C zero floats), so the loop has no branches and the
 * 4x4 tile stays in registers. */
__attribute__((target("avx512f"))) static void wg_input(const wg_job *j, int64_t t0, int64_t nt,
                                                        float *V, const float *zeros) {
    const kn_conv_geo *g = j->g;
    const int64_t C = g->C, H = g->H, W = g->W;
    const int64_t xs = nt * C + WG_SKEW; /* between xi planes */
    int64_t n = t0 / (j->TH * j->TW), th = (t0 / j->TW) % j->TH, tw = t0 % j->TW;
    for (int64_t t = 0; t < nt; t++) {
        const int64_t ih0 = 2 * th - g->pt, iw0 = 2 * tw - g->pl;
        const float *src[16];
        if (ih0 >= 0 && ih0 + 3 < H && iw0 >= 0 && iw0 + 3 < W) {
            const float *p0 = j->x + ((n * H + ih0) * W + iw0) * C;
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++) src[r * 4 + q] = p0 + (r * W + q) * C;
        } else {
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++) {
                    const int64_t ih = ih0 + r, iw = iw0 + q;
                    src[r * 4 + q] = ih >= 0 && ih < H && iw >= 0 && iw < W
                                         ? j->x + ((n * H + ih) * W + iw) * C
                                         : zeros;
                }
        }
        if (++tw == j->TW) { /* next tile */
            tw = 0;
            if (++th == j->TH) {
                th = 0;
                n++;
            }
        }
        float *v = V + t * C;
        for (int64_t c = 0; c < C; c += 16) {
            const __mmask16 m =
                C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
            __m512 d[16], tq[16];
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++) d[k] = _mm512_maskz_loadu_ps(m, src[k] + c);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) { /* B' d */
                tq[0 + q] = _mm512_sub_ps(d[0 + q], d[8 + q]);
                tq[4 + q] = _mm512_add_ps(d[4 + q], d[8 + q]);
                tq[8 + q] = _mm512_sub_ps(d[8 + q], d[4 + q]);
                tq[12 + q] = _mm512_sub_ps(d[4 + q], d[12 + q]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) { /* (B' d) B */
                float *o = v + c + r * 4 * xs;
                _mm512_mask_storeu_ps(o, m, _mm512_sub_ps(tq[r * 4 + 0], tq[r * 4 + 2]));
                _mm512_mask_storeu_ps(o + xs, m, _mm512_add_ps(tq[r * 4 + 1], tq[r * 4 + 2]));
                _mm512_mask_storeu_ps(o + 2 * xs, m, _mm512_sub_ps(tq[r * 4 + 2], tq[r * 4 + 1]));
                _mm512_mask_storeu_ps(o + 3 * xs, m, _mm512_sub_ps(tq[r * 4 + 1], tq[r * 4 + 3]));
            }
        }
    }
}

/* Y = A' M A for the block's tiles, epilogue fused, stored into y. */
__attribute__((target("avx512f"))) static void wg_output(const wg_job *j, int64_t t0, int64_t nt,
                                                         const float *M) {
    const kn_conv_geo *g = j->g;
    const int64_t OC = g->OC, OH = g->OH, OW = g->OW, OCp = j->OCp;
    const kn_gemm_epi *epi = j->epi;
    kn_gemm_epi late;
    const kn_act act = split_act(epi, &late);
    const __m512 alpha = _mm512_set1_ps(epi ? epi->alpha : 0);
    int64_t n = t0 / (j->TH * j->TW), th = (t0 / j->TW) % j->TH, tw = t0 % j->TW;
    for (int64_t t = 0; t < nt; t++) {
        const int64_t oh0 = 2 * th, ow0 = 2 * tw, tn = n;
        if (++tw == j->TW) { /* next tile (oh0, ow0, tn are this one's) */
            tw = 0;
            if (++th == j->TH) {
                th = 0;
                n++;
            }
        }
        const int rows = oh0 + 1 < OH ? 2 : 1, cols = ow0 + 1 < OW ? 2 : 1;
        float *yp[2][2];
        for (int r = 0; r < 2; r++)
            for (int q = 0; q < 2; q++)
                yp[r][q] = j->y + ((tn * OH + oh0 + (r < rows ? r : 0)) * OW + ow0 +
                                   (q < cols ? q : 0)) * OC;
        for (int64_t c = 0; c < OC; c += 16) {
            const __mmask16 m =
                OC - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (OC - c)) - 1);
            __m512 v[4][4], s[2][4];
            const float *mp = M + t * OCp + c;
            const int64_t xs = nt * OCp + WG_SKEW;
#pragma GCC unroll 16
            for (int xi = 0; xi < WG_T; xi++) v[xi / 4][xi % 4] = _mm512_loadu_ps(mp + xi * xs);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) { /* A' M */
                s[0][q] = _mm512_add_ps(_mm512_add_ps(v[0][q], v[1][q]), v[2][q]);
                s[1][q] = _mm512_sub_ps(_mm512_sub_ps(v[1][q], v[2][q]), v[3][q]);
            }
            __m512 sc = _mm512_set1_ps(1.0f), bi = _mm512_setzero_ps();
            if (epi && epi->scale) sc = _mm512_maskz_loadu_ps(m, epi->scale + c);
            if (epi && epi->bias) bi = _mm512_maskz_loadu_ps(m, epi->bias + c);
#pragma GCC unroll 2
            for (int r = 0; r < rows; r++) {
                __m512 o[2];
                o[0] = _mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), s[r][2]);
                o[1] = _mm512_sub_ps(_mm512_sub_ps(s[r][1], s[r][2]), s[r][3]);
#pragma GCC unroll 2
                for (int q = 0; q < cols; q++) {
                    float *dst = yp[r][q] + c;
                    __m512 val = _mm512_fmadd_ps(o[q], sc, bi);
                    if (epi && epi->add)
                        val = _mm512_add_ps(val,
                                            _mm512_maskz_loadu_ps(m, epi->add + (dst - epi->ybase)));
                    _mm512_mask_storeu_ps(dst, m, dc_act(val, act, alpha));
                }
            }
        }
        if (late.act != KN_ACT_NONE)
            for (int r = 0; r < rows; r++)
                for (int q = 0; q < cols; q++) kn__gemm_epilogue(&late, yp[r][q], OC, 0, 1, 0, OC);
    }
}

static void wg_blocks(void *arg, int64_t b0, int64_t b1) {
    wg_job *j = arg;
    const int64_t C = j->g->C, OCp = j->OCp, T = j->T, P = OCp / DC_NR;
    float *V = kn__gemm_scratch((size_t)(WG_T * (T * (C + OCp) + 2 * WG_SKEW) + C));
    if (V == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *M = V + WG_T * (T * C + WG_SKEW), *zeros = M + WG_T * (T * OCp + WG_SKEW);
    memset(zeros, 0, (size_t)C * sizeof(float));
    for (int64_t blk = b0; blk < b1; blk++) {
        const int64_t t0 = blk * T, nt = j->NT - t0 < T ? j->NT - t0 : T;
        wg_input(j, t0, nt, V, zeros);
        for (int xi = 0; xi < WG_T; xi++)
            for (int64_t p = 0; p < P; p++) {
                const float *u = j->w->u + (xi * P + p) * C * DC_NR;
                int64_t ng, base, extra;
                balanced_groups(nt, DC_MR, &ng, &base, &extra);
                for (int64_t gi = 0, t = 0; gi < ng; gi++) {
                    const int mr = (int)(base + (gi < extra));
                    dc_tile tl = {.x = V + xi * (nt * C + WG_SKEW) + t * C,
                                  .xs = C,
                                  .b = u,
                                  .nkh = 1,
                                  .nkw = 1,
                                  .kc = C,
                                  .y = M + xi * (nt * OCp + WG_SKEW) + t * OCp + p * DC_NR,
                                  .ys = OCp,
                                  .mlast = (__mmask16)0xffff};
                    dc_tab[1][mr - 1](&tl);
                    t += mr;
                }
            }
        wg_output(j, t0, nt, M);
    }
}

ms_status kn__wino_run(kn_ctx *ctx, const kn_conv_geo *g, const float *x, const kn_wino *w,
                       float *y, const kn_gemm_epi *epi) {
    if (g->N == 0 || g->OH == 0 || g->OW == 0 || g->OC == 0) return MS_OK;
    wg_job j = {.g = g, .x = x, .w = w, .y = y, .epi = epi};
    j.TH = (g->OH + 1) / 2;
    j.TW = (g->OW + 1) / 2;
    j.NT = g->N * j.TH * j.TW;
    j.OCp = (g->OC + DC_NR - 1) / DC_NR * DC_NR;
    /* V and M of a block within about 512 KiB (L2); at least 8 blocks of 8
     * or more tiles when there are enough, so that 2-8 threads share the work
     * evenly; blocks of equal size. */
    int64_t tmax = (128 * 1024) / (WG_T * (g->C + j.OCp));
    if (tmax < DC_MR) tmax = DC_MR;
    int64_t nb = (j.NT + tmax - 1) / tmax, want = (j.NT + 7) / 8;
    if (want > 8) want = 8;
    if (nb < want) nb = want;
    j.T = (j.NT + nb - 1) / nb;
    atomic_init(&j.failed, 0);
    kn_ctx_parallel_for(ctx, (j.NT + j.T - 1) / j.T, 1, wg_blocks, &j);
    if (atomic_load(&j.failed)) return ms_errf(MS_ENOMEM, "out of memory for Winograd scratch");
    return MS_OK;
}

/* ====================================================================== */
/* Conv2DBackpropInput with stride = window (transposed convolution)      */
/* ====================================================================== */

/* When the forward convolution's stride equals its window and nothing is
 * padded, every output pixel receives exactly one tap: dx[n, oh*sh + kh,
 * ow*sw + kw, c] = sum_o dy[n, oh, ow, o] * f[kh, kw, c, o]. That is one
 * GEMM per tap with dy read in place (pixels x OC) and the products stored
 * straight into their strided output pixels: no col2im, no zeroing. */

void kn__deconv_free(kn_deconv *d) {
    if (d == NULL) return;
    free(d->u);
    d->u = NULL;
}

ms_status kn__deconv_pack(const rt_tensor *f, kn_deconv *out) {
    memset(out, 0, sizeof(*out));
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != 4)
        return ms_errf(MS_EINVAL, "transposed convolution needs a 4-D float filter");
    const int64_t KH = f->shape.dim[0], KW = f->shape.dim[1], C = f->shape.dim[2],
                  OC = f->shape.dim[3];
    const int64_t P = (C + DC_NR - 1) / DC_NR;
    if (KH <= 0 || KW <= 0 || C <= 0 || OC <= 0 || KH * KW > 4096 || C > (1 << 20) ||
        OC > (1 << 20))
        return ms_errf(MS_EINVAL, "transposed convolution filter %lldx%lldx%lldx%lld",
                       (long long)KH, (long long)KW, (long long)C, (long long)OC);
    size_t n = (size_t)(KH * KW * P * OC * DC_NR);
    out->u = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (out->u == NULL) return ms_errf(MS_ENOMEM, "out of memory for a transposed filter");
    memset(out->u, 0, n * sizeof(float));
    const float *g = f->data;
    for (int64_t t = 0; t < KH * KW; t++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t o = 0; o < OC; o++)
                out->u[((t * P + c / DC_NR) * OC + o) * DC_NR + c % DC_NR] = g[(t * C + c) * OC + o];
    out->KH = KH;
    out->KW = KW;
    out->C = C;
    out->OC = OC;
    return MS_OK;
}

typedef struct dk_job {
    const kn_deconv *d;
    int64_t N, OH, OW;
    const float *dy;
    float *dx;
} dk_job;

static void dk_rows(void *arg, int64_t rb, int64_t re) {
    const dk_job *j = arg;
    const kn_deconv *d = j->d;
    const int64_t KH = d->KH, KW = d->KW, C = d->C, OC = d->OC, OW = j->OW;
    const int64_t W = OW * KW, H = j->OH * KH, P = (C + DC_NR - 1) / DC_NR;
    int64_t ng, base, extra;
    balanced_groups(OW, DC_MR, &ng, &base, &extra);
    for (int64_t r = rb; r < re; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        int64_t ow0 = 0;
        for (int64_t gi = 0; gi < ng; gi++) {
            const int mr = (int)(base + (gi < extra));
            const float *x = j->dy + (r * OW + ow0) * OC;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    for (int64_t p = 0; p < P; p++) {
                        const int nr = (int)(C - p * DC_NR < DC_NR ? C - p * DC_NR : DC_NR);
                        const int nv = nr > 16 ? 2 : 1, rem = nr - (nv - 1) * 16;
                        dc_tile t = {
                            .x = x,
                            .xs = OC,
                            .b = d->u + ((kh * KW + kw) * P + p) * OC * DC_NR,
                            .nkh = 1,
                            .nkw = 1,
                            .kc = OC,
                            .y = j->dx + ((n * H + oh * KH + kh) * W + ow0 * KW + kw) * C +
                                 p * DC_NR,
                            .ys = KW * C,
                            .mlast = (__mmask16)(rem >= 16 ? 0xffff : (1u << rem) - 1),
                        };
                        dc_tab[nv - 1][mr - 1](&t);
                    }
            ow0 += mr;
        }
    }
}

void kn__deconv_run(kn_ctx *ctx, const kn_deconv *d, int64_t N, int64_t OH, int64_t OW,
                    const float *dy, float *dx) {
    if (N == 0 || OH == 0 || OW == 0) return;
    dk_job j = {.d = d, .N = N, .OH = OH, .OW = OW, .dy = dy, .dx = dx};
    kn_ctx_parallel_for(ctx, N * OH, 1, dk_rows, &j);
}
