/* kn_cpu_gemm.c - packed, cache-blocked SGEMM (see kn_cpu_gemm.h).
 *
 * Blocking follows the GotoBLAS/BLIS scheme: the product is cut into tiles
 * of MC rows x NC columns (the unit of parallel work); within a tile the
 * depth is walked in KC-sized slices; for each slice the tile's A rows and B
 * columns are packed into panels (unless pre-packed) and an MR x NR register
 * micro-kernel runs over every panel pair, the B micro-panel staying in L1
 * while A panels stream from L2. The epilogue (scale, bias, activation) runs
 * on each output tile right after its last depth slice, while it is still
 * in L1.
 *
 * ISA-specific functions carry __attribute__((target(...))) so the build
 * needs no -march flag; they are only called after __builtin_cpu_supports.
 */
#include "kn_cpu_gemm.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KC_DEFAULT 256
#define MR_MAX 16
#define NR_MAX 32

typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       int accumulate);

typedef struct isa_desc {
    kn_gemm_isa isa;
    const char *name;
    int mr, nr;
    int mc_panels; /* A panels per tile when A is packed on the fly */
    ukr_fn ukr;
} isa_desc;

/* ====================================================================== */
/* micro-kernels                                                          */
/* ====================================================================== */

/* clang-format off */
/* Portable 4x8: plain C the compiler can keep in registers. */
#define C_MR 4
#define C_NR 8
static void ukr_c(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                  int accumulate) {
    float acc[C_MR][C_NR] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += C_MR, b += C_NR)
        for (int i = 0; i < C_MR; i++)
            for (int j = 0; j < C_NR; j++) acc[i][j] += a[i] * b[j];
    for (int i = 0; i < C_MR; i++)
        for (int j = 0; j < C_NR; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

/* AVX2 + FMA 6x16: 12 accumulators, 2 B vectors, 1 broadcast. */
#define AVX2_MR 6
#define AVX2_NR 16
__attribute__((target("avx2,fma"))) static void ukr_avx2(int64_t kc, const float *a,
                                                         const float *b, float *c, int64_t ldc,
                                                         int accumulate) {
#define A2_DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
    A2_DECL(0) A2_DECL(1) A2_DECL(2) A2_DECL(3) A2_DECL(4) A2_DECL(5)
#define A2_FMA(i)                                                                                \
    {                                                                                            \
        __m256 av = _mm256_broadcast_ss(a + i);                                                  \
        c##i##0 = _mm256_fmadd_ps(av, b0, c##i##0);                                              \
        c##i##1 = _mm256_fmadd_ps(av, b1, c##i##1);                                              \
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        A2_FMA(0) A2_FMA(1) A2_FMA(2) A2_FMA(3) A2_FMA(4) A2_FMA(5)
        a += AVX2_MR;
        b += AVX2_NR;
    }
#define A2_STORE(i)                                                                              \
    {                                                                                            \
        float *cr = c + i * ldc;                                                                 \
        if (accumulate) {                                                                        \
            c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(cr));                               \
            c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(cr + 8));                           \
        }                                                                                        \
        _mm256_storeu_ps(cr, c##i##0);                                                           \
        _mm256_storeu_ps(cr + 8, c##i##1);                                                       \
    }
    A2_STORE(0) A2_STORE(1) A2_STORE(2) A2_STORE(3) A2_STORE(4) A2_STORE(5)
}

/* AVX-512F 14x32: 28 accumulators, 2 B vectors, embedded broadcasts. */
#define A512_MR 14
#define A512_NR 32
__attribute__((target("avx512f"))) static void ukr_avx512(int64_t kc, const float *a,
                                                          const float *b, float *c,
                                                          int64_t ldc, int accumulate) {
#define Z_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
    Z_DECL(0) Z_DECL(1) Z_DECL(2) Z_DECL(3) Z_DECL(4) Z_DECL(5) Z_DECL(6)
    Z_DECL(7) Z_DECL(8) Z_DECL(9) Z_DECL(10) Z_DECL(11) Z_DECL(12) Z_DECL(13)
#define Z_FMA(i)                                                                                 \
    {                                                                                            \
        __m512 av = _mm512_set1_ps(a[i]);                                                        \
        c##i##0 = _mm512_fmadd_ps(av, b0, c##i##0);                                              \
        c##i##1 = _mm512_fmadd_ps(av, b1, c##i##1);                                              \
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        _mm_prefetch((const char *)(b + 8 * A512_NR), _MM_HINT_T0);
        Z_FMA(0) Z_FMA(1) Z_FMA(2) Z_FMA(3) Z_FMA(4) Z_FMA(5) Z_FMA(6)
        Z_FMA(7) Z_FMA(8) Z_FMA(9) Z_FMA(10) Z_FMA(11) Z_FMA(12) Z_FMA(13)
        a += A512_MR;
        b += A512_NR;
    }
#define Z_STORE(i)                                                                               \
    {                                                                                            \
        float *cr = c + i * ldc;                                                                 \
        if (accumulate) {                                                                        \
            c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(cr));                               \
            c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(cr + 16));                          \
        }                                                                                        \
        _mm512_storeu_ps(cr, c##i##0);                                                           \
        _mm512_storeu_ps(cr + 16, c##i##1);                                                      \
    }
    Z_STORE(0) Z_STORE(1) Z_STORE(2) Z_STORE(3) Z_STORE(4) Z_STORE(5) Z_STORE(6)
    Z_STORE(7) Z_STORE(8) Z_STORE(9) Z_STORE(10) Z_STORE(11) Z_STORE(12) Z_STORE(13)
}

static const isa_desc isa_tab[] = {
    [KN_GEMM_ISA_C]      = {KN_GEMM_ISA_C, "c", C_MR, C_NR, 32, ukr_c},
    [KN_GEMM_ISA_AVX2]   = {KN_GEMM_ISA_AVX2, "avx2", AVX2_MR, AVX2_NR, 24, ukr_avx2},
    [KN_GEMM_ISA_AVX512] = {KN_GEMM_ISA_AVX512, "avx512", A512_MR, A512_NR, 12, ukr_avx512},
};
/* clang-format on */

/* ====================================================================== */
/* ISA selection                                                          */
/* ====================================================================== */

static atomic_int g_forced; /* kn_gemm_isa; AUTO = detect */

static int isa_supported(kn_gemm_isa isa) {
    __builtin_cpu_init();
    switch (isa) {
    case KN_GEMM_ISA_C:
        return 1;
    case KN_GEMM_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KN_GEMM_ISA_AVX512:
        return __builtin_cpu_supports("avx512f");
    default:
        return 0;
    }
}

static kn_gemm_isa isa_best(void) {
    static atomic_int best; /* 0 until detected */
    int b = atomic_load(&best);
    if (b == 0) {
        b = isa_supported(KN_GEMM_ISA_AVX512) ? KN_GEMM_ISA_AVX512
            : isa_supported(KN_GEMM_ISA_AVX2) ? KN_GEMM_ISA_AVX2
                                              : KN_GEMM_ISA_C;
        atomic_store(&best, b);
    }
    return (kn_gemm_isa)b;
}

ms_status kn__gemm_set_isa(kn_gemm_isa isa) {
    if (isa != KN_GEMM_ISA_AUTO && !isa_supported(isa))
        return ms_errf(MS_ENOTSUP, "this CPU does not support the %s GEMM kernels",
                       kn__gemm_isa_name(isa));
    atomic_store(&g_forced, (int)isa);
    return MS_OK;
}

kn_gemm_isa kn__gemm_isa(void) {
    int f = atomic_load(&g_forced);
    return f != KN_GEMM_ISA_AUTO ? (kn_gemm_isa)f : isa_best();
}

const char *kn__gemm_isa_name(kn_gemm_isa isa) {
    switch (isa) {
    case KN_GEMM_ISA_C:
        return "c";
    case KN_GEMM_ISA_AVX2:
        return "avx2";
    case KN_GEMM_ISA_AVX512:
        return "avx512";
    default:
        return "auto";
    }
}

int kn__gemm_r(int which) {
    const isa_desc *d = &isa_tab[kn__gemm_isa()];
    return which ? d->nr : d->mr;
}

/* ====================================================================== */
/* packing                                                                */
/* ====================================================================== */

void kn__gemm_pack_mat(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                       float *dst) {
    const kn_gemm_mat *m = arg;
    if (m->sl == 1) {
        /* Lines are adjacent for a fixed depth: one copy per k. */
        for (int64_t k = 0; k < nk; k++) {
            float *d = dst + k * R;
            memcpy(d, m->p + (k0 + k) * m->sk + l0, (size_t)nl * sizeof(float));
            for (int r = nl; r < R; r++) d[r] = 0;
        }
        return;
    }
    for (int r = 0; r < nl; r++) {
        const float *s = m->p + (l0 + r) * m->sl + k0 * m->sk;
        for (int64_t k = 0; k < nk; k++) dst[k * R + r] = s[k * m->sk];
    }
    for (int r = nl; r < R; r++)
        for (int64_t k = 0; k < nk; k++) dst[k * R + r] = 0;
}

/* Repacks from a packed operand whose R differs from the one needed. */
static void pack_from_packed(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                             float *dst) {
    const kn_gemm_packed *p = arg;
    for (int r = 0; r < R; r++) {
        if (r >= nl) {
            for (int64_t k = 0; k < nk; k++) dst[k * R + r] = 0;
            continue;
        }
        int64_t l = l0 + r;
        const float *s = p->data + (l / p->R) * p->K * p->R + k0 * p->R + l % p->R;
        for (int64_t k = 0; k < nk; k++) dst[k * R + r] = s[k * p->R];
    }
}

static void *alloc_floats(size_t n) {
    size_t bytes = (n > 0 ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

ms_status kn__gemm_pack(int which, int64_t lines, int64_t K, kn_gemm_pack_fn fn, const void *arg,
                        kn_gemm_packed *out) {
    memset(out, 0, sizeof(*out));
    int R = kn__gemm_r(which);
    int64_t panels = (lines + R - 1) / R;
    if (lines < 0 || K < 0 || (K > 0 && panels > INT64_MAX / 4 / K / R))
        return ms_errf(MS_EINVAL, "operand of %lld x %lld is too large to pack", (long long)lines,
                       (long long)K);
    out->data = alloc_floats((size_t)(panels * K * R));
    if (out->data == NULL) return ms_errf(MS_ENOMEM, "out of memory packing a GEMM operand");
    out->R = R;
    out->lines = lines;
    out->K = K;
    for (int64_t p = 0; p < panels; p++) {
        int64_t l0 = p * R;
        int nl = (int)(lines - l0 < R ? lines - l0 : R);
        if (K > 0) fn(arg, l0, nl, 0, K, R, out->data + p * K * R);
    }
    return MS_OK;
}

void kn__gemm_packed_free(kn_gemm_packed *p) {
    if (p == NULL) return;
    free(p->data);
    p->data = NULL;
}

/* ====================================================================== */
/* epilogue                                                               */
/* ====================================================================== */

static inline float act1(kn_act act, float alpha, float v) {
    switch (act) {
    case KN_ACT_RELU:
        return v > 0 ? v : 0;
    case KN_ACT_RELU6:
        return v > 0 ? (v < 6 ? v : 6) : 0;
    case KN_ACT_LEAKYRELU:
        return v > 0 ? v : v * alpha;
    case KN_ACT_ELU:
        return v > 0 ? v : expm1f(v);
    case KN_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-v));
    case KN_ACT_TANH:
        return tanhf(v);
    default:
        return v;
    }
}

/* clang-format off */
/* One body, compiled for each ISA (the vectoriser does the bias / ReLU loops;
 * exp-based activations stay scalar). */
#define EPI_BODY                                                                                 \
    const float *sc = epi->scale, *bi = epi->bias;                                               \
    const kn_act act = epi->act;                                                                 \
    const float alpha = epi->alpha;                                                              \
    for (int64_t i = 0; i < rows; i++) {                                                         \
        float *c = C + (m0 + i) * ldc + n0;                                                      \
        if (epi->add) {                                                                          \
            const float *ad = epi->add + (c - epi->ybase);                                       \
            for (int64_t j = 0; j < cols; j++) {                                                 \
                const int64_t ch = epi->per_row ? m0 + i : n0 + j;                               \
                c[j] = act1(act, alpha,                                                          \
                            c[j] * (sc ? sc[ch] : 1.0f) + (bi ? bi[ch] : 0.0f) + ad[j]);         \
            }                                                                                    \
        } else if (epi->per_row) {                                                               \
            const float s = sc ? sc[m0 + i] : 1.0f, b = bi ? bi[m0 + i] : 0.0f;                  \
            if (act == KN_ACT_RELU) {                                                            \
                for (int64_t j = 0; j < cols; j++) {                                             \
                    float v = c[j] * s + b;                                                      \
                    c[j] = v > 0 ? v : 0;                                                        \
                }                                                                                \
            } else if (act == KN_ACT_NONE) {                                                     \
                for (int64_t j = 0; j < cols; j++) c[j] = c[j] * s + b;                          \
            } else {                                                                             \
                for (int64_t j = 0; j < cols; j++) c[j] = act1(act, alpha, c[j] * s + b);        \
            }                                                                                    \
        } else {                                                                                 \
            const float *s = sc ? sc + n0 : NULL, *b = bi ? bi + n0 : NULL;                      \
            if (s == NULL && b != NULL && act == KN_ACT_RELU) {                                  \
                for (int64_t j = 0; j < cols; j++) {                                             \
                    float v = c[j] + b[j];                                                       \
                    c[j] = v > 0 ? v : 0;                                                        \
                }                                                                                \
            } else if (s == NULL && b != NULL && act == KN_ACT_NONE) {                           \
                for (int64_t j = 0; j < cols; j++) c[j] += b[j];                                 \
            } else if (s != NULL && b != NULL && act == KN_ACT_RELU) {                           \
                for (int64_t j = 0; j < cols; j++) {                                             \
                    float v = c[j] * s[j] + b[j];                                                \
                    c[j] = v > 0 ? v : 0;                                                        \
                }                                                                                \
            } else {                                                                             \
                for (int64_t j = 0; j < cols; j++)                                               \
                    c[j] = act1(act, alpha, c[j] * (s ? s[j] : 1.0f) + (b ? b[j] : 0.0f));      \
            }                                                                                    \
        }                                                                                        \
    }

#define EPI_ARGS                                                                                 \
    const kn_gemm_epi *epi, float *C, int64_t ldc, int64_t m0, int64_t rows, int64_t n0,         \
        int64_t cols

/* clang-format on */

/* GCC does not vectorise at -O2 unless asked; clang does and rejects the
 * optimize attribute. */
#if defined(__clang__)
#define KN_VECTORIZE
#else
#define KN_VECTORIZE , optimize("tree-vectorize")
#endif

static void epi_c(EPI_ARGS) { EPI_BODY }
__attribute__((target("avx2,fma") KN_VECTORIZE)) static void epi_avx2(EPI_ARGS) {
    EPI_BODY
}
__attribute__((target("avx512f") KN_VECTORIZE)) static void epi_avx512(EPI_ARGS) {
    EPI_BODY
}

void kn__gemm_epilogue(const kn_gemm_epi *epi, float *C, int64_t ldc, int64_t m0, int64_t rows,
                       int64_t n0, int64_t cols) {
    if (epi == NULL) return;
    switch (kn__gemm_isa()) {
    case KN_GEMM_ISA_AVX512:
        epi_avx512(epi, C, ldc, m0, rows, n0, cols);
        break;
    case KN_GEMM_ISA_AVX2:
        epi_avx2(epi, C, ldc, m0, rows, n0, cols);
        break;
    default:
        epi_c(epi, C, ldc, m0, rows, n0, cols);
        break;
    }
}

/* ====================================================================== */
/* per-thread scratch                                                     */
/* ====================================================================== */

typedef struct scratch {
    float *a, *b;
    size_t na, nb;
    float tile[MR_MAX * NR_MAX] __attribute__((aligned(64)));
} scratch;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch *s = p;
    if (s == NULL) return;
    free(s->a);
    free(s->b);
    free(s);
}

static void key_init(void) { (void)pthread_key_create(&g_key, scratch_free); }

static int grow(float **p, size_t *have, size_t need) {
    if (*have >= need) return 0;
    float *n = alloc_floats(need);
    if (n == NULL) return -1;
    free(*p);
    *p = n;
    *have = need;
    return 0;
}

/* This thread's scratch with at least na / nb floats, or NULL. */
static scratch *scratch_get(size_t na, size_t nb) {
    pthread_once(&g_key_once, key_init);
    scratch *s = pthread_getspecific(g_key);
    if (s == NULL) {
        s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
        if (s == NULL) return NULL;
        memset(s, 0, sizeof(*s));
        if (pthread_setspecific(g_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (grow(&s->a, &s->na, na) || grow(&s->b, &s->nb, nb)) return NULL;
    return s;
}

/* ====================================================================== */
/* scratch for other kernels                                              */
/* ====================================================================== */

float *kn__gemm_scratch(size_t n) {
    scratch *s = scratch_get(n, 0);
    return s ? s->a : NULL;
}

/* ====================================================================== */
/* driver                                                                 */
/* ====================================================================== */

typedef struct gemm_job {
    const isa_desc *d;
    int64_t M, N, K, MC, NC, KC, mt, nt;
    kn_gemm_opnd a, b; /* packed only when its R matches */
    float *C;
    int64_t ldc;
    const kn_gemm_epi *epi;
    atomic_int failed;
} gemm_job;

/* Pointer to panel p (of R lines) of a packed operand, at depth pc. */
static const float *packed_panel(const kn_gemm_packed *pk, int64_t line0, int64_t pc) {
    return pk->data + (line0 / pk->R) * pk->K * pk->R + pc * pk->R;
}

static void gemm_tile(const gemm_job *j, scratch *s, int64_t im, int64_t in) {
    const isa_desc *d = j->d;
    const int MR = d->mr, NR = d->nr;
    const int64_t m0 = im * j->MC, n0 = in * j->NC;
    const int64_t mc = j->M - m0 < j->MC ? j->M - m0 : j->MC;
    const int64_t nc = j->N - n0 < j->NC ? j->N - n0 : j->NC;
    for (int64_t pc = 0; pc < j->K; pc += j->KC) {
        const int64_t kc = j->K - pc < j->KC ? j->K - pc : j->KC;
        const int last = pc + kc >= j->K;
        if (!j->a.packed)
            for (int64_t l = 0; l < mc; l += MR)
                j->a.pack(j->a.arg, m0 + l, (int)(mc - l < MR ? mc - l : MR), pc, kc, MR,
                          s->a + (l / MR) * kc * MR);
        if (!j->b.packed)
            for (int64_t l = 0; l < nc; l += NR)
                j->b.pack(j->b.arg, n0 + l, (int)(nc - l < NR ? nc - l : NR), pc, kc, NR,
                          s->b + (l / NR) * kc * NR);
        for (int64_t jr = 0; jr < nc; jr += NR) {
            const float *bp =
                j->b.packed ? packed_panel(j->b.packed, n0 + jr, pc) : s->b + (jr / NR) * kc * NR;
            const int nr = (int)(nc - jr < NR ? nc - jr : NR);
            for (int64_t ir = 0; ir < mc; ir += MR) {
                const float *ap = j->a.packed ? packed_panel(j->a.packed, m0 + ir, pc)
                                              : s->a + (ir / MR) * kc * MR;
                const int mr = (int)(mc - ir < MR ? mc - ir : MR);
                float *c = j->C + (m0 + ir) * j->ldc + n0 + jr;
                if (mr == MR && nr == NR) {
                    d->ukr(kc, ap, bp, c, j->ldc, pc > 0);
                } else {
                    d->ukr(kc, ap, bp, s->tile, NR, 0);
                    for (int r = 0; r < mr; r++)
                        for (int q = 0; q < nr; q++)
                            c[r * j->ldc + q] = pc > 0 ? c[r * j->ldc + q] + s->tile[r * NR + q]
                                                       : s->tile[r * NR + q];
                }
                if (last && j->epi)
                    kn__gemm_epilogue(j->epi, j->C, j->ldc, m0 + ir, mr, n0 + jr, nr);
            }
        }
    }
}

static void gemm_tiles(void *arg, int64_t t0, int64_t t1) {
    gemm_job *j = arg;
    size_t na = j->a.packed ? 0 : (size_t)(j->MC * j->KC);
    size_t nb = j->b.packed ? 0 : (size_t)(j->NC * j->KC);
    scratch *s = scratch_get(na, nb);
    if (s == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t t = t0; t < t1; t++) gemm_tile(j, s, t % j->mt, t / j->mt);
}

static int64_t round_up(int64_t v, int64_t r) { return (v + r - 1) / r * r; }

ms_status kn__sgemm(kn_ctx *ctx, int64_t M, int64_t N, int64_t K, const kn_gemm_opnd *a,
                    const kn_gemm_opnd *b, float *C, int64_t ldc, const kn_gemm_epi *epi) {
    if (M <= 0 || N <= 0) return MS_OK;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        kn__gemm_epilogue(epi, C, ldc, 0, M, 0, N);
        return MS_OK;
    }
    gemm_job j = {
        .d = &isa_tab[kn__gemm_isa()], .M = M, .N = N, .K = K, .C = C, .ldc = ldc, .epi = epi};
    const int MR = j.d->mr, NR = j.d->nr;
    j.a = *a;
    j.b = *b;
    if (j.a.packed && j.a.packed->R != MR) {
        j.a = (kn_gemm_opnd){.pack = pack_from_packed, .arg = a->packed};
    }
    if (j.b.packed && j.b.packed->R != NR) {
        j.b = (kn_gemm_opnd){.pack = pack_from_packed, .arg = b->packed};
    }
    j.KC = K < KC_DEFAULT ? K : KC_DEFAULT;
    /* Split K evenly so that the last slice is not a sliver. */
    if (K > KC_DEFAULT) {
        int64_t slices = (K + KC_DEFAULT - 1) / KC_DEFAULT;
        j.KC = (K + slices - 1) / slices;
    }
    j.MC = j.a.packed ? 1024 : (int64_t)MR * j.d->mc_panels;
    j.NC = j.b.packed ? 4096 : (int64_t)NR * 8;
    if (j.MC > round_up(M, MR)) j.MC = round_up(M, MR);
    if (j.NC > round_up(N, NR)) j.NC = round_up(N, NR);
    /* Enough tiles to keep the threads busy (the pool hands out chunks). */
    for (;;) {
        j.mt = (M + j.MC - 1) / j.MC;
        j.nt = (N + j.NC - 1) / j.NC;
        if (j.mt * j.nt >= 8) break;
        int64_t mc2 = round_up((j.MC + 1) / 2, MR), nc2 = round_up((j.NC + 1) / 2, NR);
        int can_m = mc2 < j.MC, can_n = nc2 < j.NC;
        /* Splitting M repacks B panels once more per extra tile (when B is
         * packed on the fly) and splitting N repacks A: split the side
         * whose other operand is pre-packed, else the longer one. */
        int prefer_m = j.a.packed && !j.b.packed   ? 0
                       : !j.a.packed && j.b.packed ? 1
                                                   : j.MC / MR >= j.NC / NR;
        if (can_m && (!can_n || prefer_m)) j.MC = mc2;
        else if (can_n) j.NC = nc2;
        else break;
    }
    atomic_init(&j.failed, 0);
    kn_ctx_parallel_for(ctx, j.mt * j.nt, 1, gemm_tiles, &j);
    if (atomic_load(&j.failed)) return ms_errf(MS_ENOMEM, "out of memory for GEMM scratch");
    return MS_OK;
}
