/* kn_cpu_conv.c - Conv2D as implicit GEMM on the packed SGEMM (NCHW, and
 * NHWC where the AVX-512 direct kernel of kn_cpu_dconv.c does not apply) and
 * a direct vectorised depthwise convolution (see kn_cpu_conv.h).
 *
 * Window arithmetic follows TensorFlow's GetWindowedOutputSizeVerbose:
 * VALID out = (in - eff + s) / s; SAME out = ceil(in / s) with the smaller
 * half of the padding before; EXPLICIT uses the given pads.
 */
#include "kn_cpu_conv.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_util.h"

/* ====================================================================== */
/* attributes and geometry                                                */
/* ====================================================================== */

ms_status kn__conv_parse(const kn_node *n, kn_conv_attrs *a) {
    ms_status st;
    memset(a, 0, sizeof(*a));
    if (kn_attr_s_eq(n, "data_format", "NCHW", NULL))
        a->nchw = 1;
    else if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC"))
        return KN_EINVAL(n, "data_format must be NHWC or NCHW");
    if (!kn_attr_has(n, "strides")) return KN_EINVAL(n, "attr strides is missing");
    if ((st = kn__attr_hw(n, "strides", a->nchw, 1, &a->sh, &a->sw)) != MS_OK) return st;
    if ((st = kn__attr_hw(n, "dilations", a->nchw, 1, &a->dh, &a->dw)) != MS_OK) return st;
    if ((st = kn__parse_padding(n, a->nchw, &a->padding, a->ep)) != MS_OK) return st;
    return MS_OK;
}

/* The shared TensorFlow rule, plus: the (dilated) window must fit inside the
 * padded input, which the packing code relies on. */
static ms_status window_dim(const kn_node *n, const char *what, int64_t in, int64_t k, int64_t dil,
                            int64_t stride, int padding, int64_t ep0, int64_t ep1, int64_t *out,
                            int64_t *pad) {
    ms_status st = kn__window_dim(n, what, in, k, dil, stride, padding, ep0, ep1, out, pad);
    if (st != MS_OK) return st;
    int64_t eff = (k - 1) * dil + 1;
    if ((padding == KN_PAD_VALID && in - eff < 0) ||
        (padding == KN_PAD_EXPLICIT && in + ep0 + ep1 - eff < 0))
        return KN_EINVAL(n, "%s: window of %lld (dilated) does not fit input size %lld", what,
                         (long long)eff, (long long)in);
    return MS_OK;
}

ms_status kn__conv_geo(const kn_node *n, const kn_conv_attrs *a, const rt_tensor *x,
                       const rt_tensor *f, int depthwise, kn_conv_geo *g) {
    memset(g, 0, sizeof(*g));
    if (x->shape.rank != 4)
        return KN_EINVAL(n, "input must be 4-D, got shape %s", kn__shp(&x->shape));
    if (f->shape.rank != 4)
        return KN_EINVAL(n, "filter must be 4-D (HWIO), got %s", kn__shp(&f->shape));
    for (int i = 0; i < 4; i++)
        if (x->shape.dim[i] > INT32_MAX || f->shape.dim[i] > INT32_MAX)
            return KN_EINVAL(n, "dimensions must be below 2^31");
    const int64_t *d = x->shape.dim;
    g->N = d[0];
    g->H = a->nchw ? d[2] : d[1];
    g->W = a->nchw ? d[3] : d[2];
    g->C = a->nchw ? d[1] : d[3];
    g->KH = f->shape.dim[0];
    g->KW = f->shape.dim[1];
    if (f->shape.dim[2] != g->C)
        return KN_EINVAL(n, "filter %s input depth must equal input channels %lld",
                         kn__shp(&f->shape), (long long)g->C);
    g->OC = depthwise ? g->C * f->shape.dim[3] : f->shape.dim[3];
    ms_status st = window_dim(n, "height", g->H, g->KH, a->dh, a->sh, a->padding, a->ep[0],
                              a->ep[1], &g->OH, &g->pt);
    if (st != MS_OK) return st;
    return window_dim(n, "width", g->W, g->KW, a->dw, a->sw, a->padding, a->ep[2], a->ep[3], &g->OW,
                      &g->pl);
}

rt_shape kn__conv_oshape(const kn_conv_attrs *a, const kn_conv_geo *g) {
    rt_shape s = {.rank = 4};
    s.dim[0] = g->N;
    s.dim[1] = a->nchw ? g->OC : g->OH;
    s.dim[2] = a->nchw ? g->OH : g->OW;
    s.dim[3] = a->nchw ? g->OW : g->OC;
    return s;
}

/* ====================================================================== */
/* packing callbacks                                                      */
/* ====================================================================== */

/* NCHW A operand: line oc, depth k = (c, kh, kw); the HWIO row is (kh*KW + kw)*C + c. */
typedef struct filt_src2 {
    const float *f; /* HWIO */
    int64_t KHKW, C, OC;
} filt_src2;

static void pack_filter_nchw(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                             float *dst) {
    const filt_src2 *s = arg;
    for (int64_t k = 0; k < nk; k++) {
        int64_t kk = k0 + k, c = kk / s->KHKW, khw = kk % s->KHKW;
        const float *src = s->f + (khw * s->C + c) * s->OC + l0;
        float *d = dst + k * R;
        int r = 0;
        for (; r < nl; r++)
            d[r] = src[r];
        for (; r < R; r++)
            d[r] = 0;
    }
}

ms_status kn__conv_pack_filter(int nchw, const rt_tensor *f, kn_gemm_packed *out) {
    const int64_t KH = f->shape.dim[0], KW = f->shape.dim[1], C = f->shape.dim[2],
                  OC = f->shape.dim[3];
    if (!nchw) {
        kn_gemm_mat m = {.p = f->data, .sl = 1, .sk = OC};
        return kn__gemm_pack(1, OC, KH * KW * C, kn__gemm_pack_mat, &m, out);
    }
    filt_src2 s = {.f = f->data, .KHKW = KH * KW, .C = C, .OC = OC};
    return kn__gemm_pack(0, OC, KH * KW * C, pack_filter_nchw, &s, out);
}

typedef struct im_src {
    const kn_conv_attrs *a;
    const kn_conv_geo *g;
    const float *x; /* NHWC: whole batch; NCHW: one image */
} im_src;

/* NHWC A operand: line = output pixel (n, oh, ow), depth k = (kh, kw, c). */
static void pack_im_nhwc(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                         float *dst) {
    const im_src *s = arg;
    const kn_conv_geo *g = s->g;
    const int64_t C = g->C, KWC = g->KW * C;
    for (int r = 0; r < nl; r++) {
        int64_t p = l0 + r;
        int64_t ow = p % g->OW, oh = (p / g->OW) % g->OH, n = p / (g->OW * g->OH);
        int64_t ih0 = oh * s->a->sh - g->pt, iw0 = ow * s->a->sw - g->pl;
        const float *xn = s->x + n * g->H * g->W * C;
        int64_t kh = k0 / KWC, kw = (k0 % KWC) / C, c = k0 % C;
        for (int64_t kk = 0; kk < nk;) {
            int64_t ih = ih0 + kh * s->a->dh, iw = iw0 + kw * s->a->dw;
            int64_t left = nk - kk, run, taps = 1;
            float *d = dst + kk * R + r;
            if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) {
                run = C - c < left ? C - c : left;
                for (int64_t t = 0; t < run; t++)
                    d[t * R] = 0;
            } else {
                /* Undilated taps kw..KW-1 of this row that are all inside
                 * the input are one contiguous run of x. */
                if (s->a->dw == 1) {
                    int64_t last = iw + (g->KW - 1 - kw);
                    taps = last < g->W ? g->KW - kw : g->W - iw;
                }
                run = taps * C - c < left ? taps * C - c : left;
                const float *src = xn + (ih * g->W + iw) * C + c;
                for (int64_t t = 0; t < run; t++)
                    d[t * R] = src[t];
            }
            kk += run;
            /* Advance (kw, c) by run elements. */
            int64_t pos = kw * C + c + run;
            kw = pos / C;
            c = pos % C;
            if (kw >= g->KW) {
                kw = 0;
                c = 0;
                kh++;
            }
        }
    }
    for (int r = nl; r < R; r++)
        for (int64_t k = 0; k < nk; k++)
            dst[k * R + r] = 0;
}

/* NCHW B operand of one image: line = output pixel (oh, ow), depth k = (c, kh, kw). */
static void pack_im_nchw(const void *arg, int64_t l0, int nl, int64_t k0, int64_t nk, int R,
                         float *dst) {
    const im_src *s = arg;
    const kn_conv_geo *g = s->g;
    const int64_t KHW = g->KH * g->KW, sw = s->a->sw;
    const int64_t oh0 = l0 / g->OW, ow0 = l0 % g->OW;
    for (int64_t k = 0; k < nk; k++) {
        int64_t kk = k0 + k, c = kk / KHW, kh = (kk % KHW) / g->KW, kw = kk % g->KW;
        const float *xc = s->x + c * g->H * g->W;
        float *d = dst + k * R;
        int64_t oh = oh0, ow = ow0;
        int r = 0;
        while (r < nl) {
            int64_t ih = oh * s->a->sh - g->pt + kh * s->a->dh;
            int64_t cnt = g->OW - ow < nl - r ? g->OW - ow : nl - r;
            if (ih < 0 || ih >= g->H) {
                for (int64_t t = 0; t < cnt; t++)
                    d[r + t] = 0;
            } else {
                const float *row = xc + ih * g->W;
                int64_t iw = ow * sw - g->pl + kw * s->a->dw;
                for (int64_t t = 0; t < cnt; t++, iw += sw)
                    d[r + t] = (iw >= 0 && iw < g->W) ? row[iw] : 0;
            }
            r += (int)cnt;
            ow = 0;
            oh++;
        }
        for (; r < R; r++)
            d[r] = 0;
    }
}

ms_status kn__conv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                       const float *f, const kn_gemm_packed *pk, float *y, const kn_gemm_epi *epi) {
    const int64_t K = g->KH * g->KW * g->C, OHW = g->OH * g->OW;
    if (g->N == 0 || OHW == 0 || g->OC == 0) return MS_OK;
    if (kn__dconv_ok(a, g, pk)) {
        kn_gemm_epi e = epi ? *epi : (kn_gemm_epi){0};
        e.per_row = 0;
        return kn__dconv_run(ctx, a, g, x, pk, y, epi ? &e : NULL);
    }
    if (!a->nchw) {
        im_src s = {.a = a, .g = g, .x = x};
        kn_gemm_mat fm = {.p = f, .sl = 1, .sk = g->OC};
        kn_gemm_opnd A = {.pack = pack_im_nhwc, .arg = &s};
        kn_gemm_opnd B = pk ? (kn_gemm_opnd){.packed = pk}
                            : (kn_gemm_opnd){.pack = kn__gemm_pack_mat, .arg = &fm};
        /* A 1x1 stride-1 unpadded convolution reads x as a plain matrix. */
        kn_gemm_mat xm = {.p = x, .sl = g->C, .sk = 1};
        if (g->KH == 1 && g->KW == 1 && a->sh == 1 && a->sw == 1 && g->pt == 0 && g->pl == 0 &&
            g->OH == g->H && g->OW == g->W)
            A = (kn_gemm_opnd){.pack = kn__gemm_pack_mat, .arg = &xm};
        kn_gemm_epi e = epi ? *epi : (kn_gemm_epi){0};
        e.per_row = 0;
        return kn__sgemm(ctx, g->N * OHW, g->OC, K, &A, &B, y, g->OC, epi ? &e : NULL);
    }
    filt_src2 fs = {.f = f, .KHKW = g->KH * g->KW, .C = g->C, .OC = g->OC};
    kn_gemm_opnd A =
        pk ? (kn_gemm_opnd){.packed = pk} : (kn_gemm_opnd){.pack = pack_filter_nchw, .arg = &fs};
    kn_gemm_epi e = epi ? *epi : (kn_gemm_epi){0};
    e.per_row = 1;
    for (int64_t n = 0; n < g->N; n++) {
        const float *xn = x + n * g->C * g->H * g->W;
        im_src s = {.a = a, .g = g, .x = xn};
        kn_gemm_mat xm = {.p = xn, .sl = 1, .sk = g->H * g->W};
        kn_gemm_opnd B = {.pack = pack_im_nchw, .arg = &s};
        if (g->KH == 1 && g->KW == 1 && a->sh == 1 && a->sw == 1 && g->pt == 0 && g->pl == 0 &&
            g->OH == g->H && g->OW == g->W)
            B = (kn_gemm_opnd){.pack = kn__gemm_pack_mat, .arg = &xm};
        ms_status st =
            kn__sgemm(ctx, g->OC, OHW, K, &A, &B, y + n * g->OC * OHW, OHW, epi ? &e : NULL);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

/* ====================================================================== */
/* depthwise                                                              */
/* ====================================================================== */

#define DW_MAX_TAPS KN_DW_MAX_TAPS

/* y[c] = sum_t x[xo[t] + c] * f[fo[t] + c] for c < C. */
static void dw_pixel_c(const float *x, const float *f, const int64_t *xo, const int64_t *fo, int nt,
                       int64_t C, float *y) {
    for (int64_t c = 0; c < C; c++)
        y[c] = 0;
    for (int t = 0; t < nt; t++) {
        const float *xs = x + xo[t], *fs = f + fo[t];
        for (int64_t c = 0; c < C; c++)
            y[c] += xs[c] * fs[c];
    }
}

__attribute__((target("avx2,fma"))) static void dw_pixel_avx2(const float *x, const float *f,
                                                              const int64_t *xo, const int64_t *fo,
                                                              int nt, int64_t C, float *y) {
    int64_t c = 0;
    for (; c + 16 <= C; c += 16) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int t = 0; t < nt; t++) {
            const float *xs = x + xo[t] + c, *fs = f + fo[t] + c;
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xs), _mm256_loadu_ps(fs), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 8), _mm256_loadu_ps(fs + 8), a1);
        }
        _mm256_storeu_ps(y + c, a0);
        _mm256_storeu_ps(y + c + 8, a1);
    }
    for (; c + 8 <= C; c += 8) {
        __m256 a0 = _mm256_setzero_ps();
        for (int t = 0; t < nt; t++)
            a0 =
                _mm256_fmadd_ps(_mm256_loadu_ps(x + xo[t] + c), _mm256_loadu_ps(f + fo[t] + c), a0);
        _mm256_storeu_ps(y + c, a0);
    }
    for (; c < C; c++) {
        float s = 0;
        for (int t = 0; t < nt; t++)
            s += x[xo[t] + c] * f[fo[t] + c];
        y[c] = s;
    }
}

__attribute__((target("avx512f"))) static void dw_pixel_avx512(const float *x, const float *f,
                                                               const int64_t *xo, const int64_t *fo,
                                                               int nt, int64_t C, float *y) {
    int64_t c = 0;
    for (; c + 32 <= C; c += 32) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int t = 0; t < nt; t++) {
            const float *xs = x + xo[t] + c, *fs = f + fo[t] + c;
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(xs), _mm512_loadu_ps(fs), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(xs + 16), _mm512_loadu_ps(fs + 16), a1);
        }
        _mm512_storeu_ps(y + c, a0);
        _mm512_storeu_ps(y + c + 16, a1);
    }
    for (; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c)) - 1);
        __m512 a0 = _mm512_setzero_ps();
        for (int t = 0; t < nt; t++)
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + xo[t] + c),
                                 _mm512_maskz_loadu_ps(m, f + fo[t] + c), a0);
        _mm512_mask_storeu_ps(y + c, m, a0);
    }
}

typedef void (*dw_pixel_fn)(const float *x, const float *f, const int64_t *xo, const int64_t *fo,
                            int nt, int64_t C, float *y);

typedef struct dw_job {
    const kn_conv_attrs *a;
    const kn_conv_geo *g;
    int64_t mult;
    const float *x, *f; /* NHWC, HWIM */
    float *y;           /* NHWC */
    const kn_gemm_epi *epi;
    dw_pixel_fn pixel;
} dw_job;

/* Over output rows (n, oh). */
static void dw_rows(void *arg, int64_t b, int64_t e) {
    const dw_job *j = arg;
    const kn_conv_geo *g = j->g;
    const int64_t C = g->C, M = j->mult, OC = C * M;
    int64_t xo[DW_MAX_TAPS], fo[DW_MAX_TAPS];
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->OH, oh = r % g->OH;
        const float *xn = j->x + n * g->H * g->W * C;
        float *yrow = j->y + r * g->OW * OC;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            float *y = yrow + ow * OC;
            int nt = 0;
            for (int64_t kh = 0; kh < g->KH; kh++) {
                int64_t ih = oh * j->a->sh - g->pt + kh * j->a->dh;
                if (ih < 0 || ih >= g->H) continue;
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t iw = ow * j->a->sw - g->pl + kw * j->a->dw;
                    if (iw < 0 || iw >= g->W) continue;
                    xo[nt] = (ih * g->W + iw) * C;
                    fo[nt] = (kh * g->KW + kw) * OC;
                    nt++;
                }
            }
            if (M == 1) {
                j->pixel(xn, j->f, xo, fo, nt, C, y);
                continue;
            }
            for (int64_t k = 0; k < OC; k++)
                y[k] = 0;
            for (int t = 0; t < nt; t++) {
                const float *xs = xn + xo[t], *fs = j->f + fo[t];
                for (int64_t c = 0; c < C; c++)
                    for (int64_t m = 0; m < M; m++)
                        y[c * M + m] += xs[c] * fs[c * M + m];
            }
        }
        if (j->epi) kn__gemm_epilogue(j->epi, yrow, OC, 0, g->OW, 0, OC);
    }
}

static void to_nhwc(const float *src, float *dst, int64_t N, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++)
                dst[(n * HW + p) * C + c] = src[(n * C + c) * HW + p];
}

static void to_nchw(const float *src, float *dst, int64_t N, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < HW; p++)
            for (int64_t c = 0; c < C; c++)
                dst[(n * C + c) * HW + p] = src[(n * HW + p) * C + c];
}

ms_status kn__dwconv_run(kn_ctx *ctx, const kn_conv_attrs *a, const kn_conv_geo *g, const float *x,
                         const float *f, float *y, const kn_gemm_epi *epi) {
    if (g->N == 0 || g->OH == 0 || g->OW == 0 || g->OC == 0) return MS_OK;
    if (g->KH * g->KW > DW_MAX_TAPS)
        return ms_errf(MS_ENOTSUP, "depthwise window of %lld taps is over %d",
                       (long long)(g->KH * g->KW), DW_MAX_TAPS);
    kn_gemm_epi e = epi ? *epi : (kn_gemm_epi){0};
    e.per_row = 0;
    /* NCHW runs on NHWC scratch: the addend (NCHW, like y) and the
     * activation after it are applied to y at the end. */
    kn_gemm_epi late = {0};
    if (a->nchw && e.add) {
        late = (kn_gemm_epi){.act = e.act, .alpha = e.alpha, .add = e.add, .ybase = y};
        e.add = NULL;
        e.act = KN_ACT_NONE;
    }
    dw_job j = {.a = a,
                .g = g,
                .mult = g->C ? g->OC / g->C : 1,
                .x = x,
                .f = f,
                .y = y,
                .epi = epi ? &e : NULL};
    switch (kn__gemm_isa()) {
    case KN_GEMM_ISA_AVX512:
        j.pixel = dw_pixel_avx512;
        break;
    case KN_GEMM_ISA_AVX2:
        j.pixel = dw_pixel_avx2;
        break;
    default:
        j.pixel = dw_pixel_c;
        break;
    }
    float *xt = NULL, *yt = NULL;
    if (a->nchw) {
        size_t nx = (size_t)(g->N * g->C * g->H * g->W),
               ny = (size_t)(g->N * g->OC * g->OH * g->OW);
        xt = malloc((nx ? nx : 1) * sizeof(float));
        yt = malloc(ny * sizeof(float));
        if (xt == NULL || yt == NULL) {
            free(xt);
            free(yt);
            return ms_errf(MS_ENOMEM, "out of memory for depthwise layout scratch");
        }
        to_nhwc(x, xt, g->N, g->C, g->H * g->W);
        j.x = xt;
        j.y = yt;
    }
    kn_ctx_parallel_for(ctx, g->N * g->OH, 1, dw_rows, &j);
    if (a->nchw) {
        to_nchw(yt, y, g->N, g->OC, g->OH * g->OW);
        free(xt);
        free(yt);
        if (late.add) kn__gemm_epilogue(&late, y, 1, 0, 1, 0, g->N * g->OC * g->OH * g->OW);
    }
    return MS_OK;
}
