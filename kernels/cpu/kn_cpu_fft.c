/* kn_cpu_fft.c - TensorFlow's FFT ops over KissFFT (Debian's libkissfft,
 * BSD-3-Clause): FFT / IFFT / FFT2D / IFFT2D / FFT3D / IFFT3D (complex in,
 * complex out, over the innermost 1, 2 or 3 dims), RFFT / RFFT2D / RFFT3D
 * (real in, the innermost dim's fft_length / 2 + 1 non-negative bins out)
 * and IRFFT / IRFFT2D / IRFFT3D (that half spectrum in, real out), as
 * tf.signal exports them (tf.signal.stft ends in RFFT).
 *
 * Semantics (TensorFlow's fft_ops): inverses are scaled by 1 / (product of
 * the transformed lengths); RFFT / IRFFT take fft_length (int32 [rank]) and
 * crop each transformed dim of the input to it, or pad it with zeros (the
 * op's documented semantics; TensorFlow's own kernel refuses the padding
 * case, so graphs pad before the op); IRFFT reads fft_length[-1] / 2 + 1
 * bins of the innermost dim and, as a c2r transform, ignores the imaginary
 * part of the zero-frequency bin (and of the Nyquist bin for even lengths).
 *
 * OnnxDFT (ONNX DFT 17-20, emitted by runtime/onnx) runs over the same
 * plans: x (..., n, ..., 1 or 2), dft_length (int64, one value; < 0: none)
 * [, axis (int64, one value) overriding attr axis] -> the (inverse) DFT along
 * the axis, complex (..., K, ..., 2); or real (..., N, ..., 1) for the
 * inverse of a one-sided spectrum (the full spectrum rebuilt by Hermitian
 * symmetry). attrs axis (0..rank-2), inverse (scaled by 1 / N), onesided.
 * OnnxSTFT (ONNX STFT 17): windowed frames of a signal through the same
 * transform (stft_compute).
 *
 * Debian's KissFFT is single precision, so these run on complex64 / float32
 * only; a node whose Tcomplex / Treal is complex128 / float64 is refused at
 * load. Lengths with a prime factor above BLUESTEIN_PRIME go through
 * Bluestein's chirp-z transform on a 2-3-5-smooth KissFFT (KissFFT's generic
 * radix costs O(n p) for a prime factor p, hours for one long prime length).
 * Plans are made on first use and kept per node (a few lengths); they are
 * read-only once made, so concurrent runs share them.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <kiss_fft.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* Longest transform along one dim: far above any real model's frames or
 * images, low enough that a plan's tables and one line's scratch stay
 * bounded (a hostile request could otherwise ask for one giant line). */
#define FFT_MAX_LEN ((int64_t)1 << 27)
/* Above this prime factor Bluestein beats KissFFT's generic butterfly. */
#define BLUESTEIN_PRIME 128
/* Plans kept per node; a run needing others makes and frees its own. */
#define FFT_PLAN_CACHE 8

/* Scratch slot of a line's buffers (per thread). */
enum { SCR_LINE };

typedef kiss_fft_cpx cpx;

typedef struct fft_plan {
    int64_t n;
    int inverse;
    kiss_fft_cfg cfg; /* n points; NULL under Bluestein */
    /* Bluestein: m >= 2n - 1 points, 2-3-5-smooth. */
    int64_t m;
    kiss_fft_cfg fwd, inv;
    cpx *chirp; /* n: exp(sign i pi k^2 / n) */
    cpx *filt;  /* m: FFT of the conjugate chirp's circulant, over m */
} fft_plan;

static void plan_free(fft_plan *p) {
    if (p == NULL) return;
    kiss_fft_free(p->cfg);
    kiss_fft_free(p->fwd);
    kiss_fft_free(p->inv);
    free(p->chirp);
    free(p->filt);
    free(p);
}

static int64_t largest_prime_factor(int64_t n) {
    int64_t best = 1;
    for (int64_t f = 2; f * f <= n; f++)
        while (n % f == 0) {
            best = f;
            n /= f;
        }
    return n > 1 ? n : best;
}

static fft_plan *plan_new(int64_t n, int inverse) {
    fft_plan *p = calloc(1, sizeof(*p));
    if (p == NULL) return NULL;
    p->n = n;
    p->inverse = inverse;
    if (largest_prime_factor(n) <= BLUESTEIN_PRIME) {
        p->cfg = kiss_fft_alloc((int)n, inverse, NULL, NULL);
        if (p->cfg == NULL) goto fail;
        return p;
    }
    /* m: the smallest 2-3-5-smooth length >= 2n - 1 (KissFFT's fast radices). */
    int64_t m = kiss_fft_next_fast_size((int)(2 * n - 1));
    p->m = m;
    p->fwd = kiss_fft_alloc((int)m, 0, NULL, NULL);
    p->inv = kiss_fft_alloc((int)m, 1, NULL, NULL);
    p->chirp = malloc((size_t)n * sizeof(cpx));
    p->filt = calloc((size_t)m, sizeof(cpx));
    cpx *b = calloc((size_t)m, sizeof(cpx));
    if (p->fwd == NULL || p->inv == NULL || p->chirp == NULL || p->filt == NULL || b == NULL) {
        free(b);
        goto fail;
    }
    /* jk = (j^2 + k^2 - (k - j)^2) / 2, so X_k = w_k sum_j (x_j w_j) conj(w_{k-j})
     * with w_k = exp(sign i pi k^2 / n); k^2 reduced mod 2n in integers so
     * the angle keeps its precision for long transforms. */
    double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; k++) {
        uint64_t q = ((uint64_t)k * (uint64_t)k) % (uint64_t)(2 * n);
        double a = sign * M_PI * (double)q / (double)n;
        p->chirp[k].r = (float)cos(a);
        p->chirp[k].i = (float)sin(a);
    }
    for (int64_t k = 0; k < n; k++) {
        cpx c = {p->chirp[k].r / (float)m, -p->chirp[k].i / (float)m};
        b[k] = c;
        if (k > 0) b[m - k] = c;
    }
    kiss_fft(p->fwd, b, p->filt);
    free(b);
    return p;
fail:
    plan_free(p);
    return NULL;
}

/* Scratch (complex values) one line of plan p needs besides its input and output. */
static int64_t plan_work(const fft_plan *p) { return p->cfg != NULL ? 0 : 2 * p->m; }

/* out = the (inverse, unscaled) DFT of in, both n contiguous points;
 * work holds plan_work(p) points. */
static void plan_run(const fft_plan *p, const cpx *in, cpx *out, cpx *work) {
    if (p->cfg != NULL) {
        kiss_fft(p->cfg, in, out);
        return;
    }
    int64_t n = p->n, m = p->m;
    cpx *a = work, *A = work + m;
    for (int64_t k = 0; k < n; k++) {
        cpx x = in[k], w = p->chirp[k];
        a[k].r = x.r * w.r - x.i * w.i;
        a[k].i = x.r * w.i + x.i * w.r;
    }
    memset(a + n, 0, (size_t)(m - n) * sizeof(cpx));
    kiss_fft(p->fwd, a, A);
    for (int64_t k = 0; k < m; k++) {
        cpx x = A[k], f = p->filt[k];
        A[k].r = x.r * f.r - x.i * f.i;
        A[k].i = x.r * f.i + x.i * f.r;
    }
    kiss_fft(p->inv, A, a);
    for (int64_t k = 0; k < n; k++) {
        cpx x = a[k], w = p->chirp[k];
        out[k].r = x.r * w.r - x.i * w.i;
        out[k].i = x.r * w.i + x.i * w.r;
    }
}

/* ---- the ops ---- */

enum { K_C2C, K_R2C, K_C2R, K_ONNX };

typedef struct fft_op {
    const char *op;
    int rank;    /* transformed innermost dims */
    int kind;    /* K_C2C, K_R2C (RFFT), K_C2R (IRFFT) */
    int inverse; /* C2C: IFFT */
} fft_op;

static const fft_op fft_ops[] = {
    {"FFT", 1, K_C2C, 0},    {"IFFT", 1, K_C2C, 1},    {"FFT2D", 2, K_C2C, 0},
    {"IFFT2D", 2, K_C2C, 1}, {"FFT3D", 3, K_C2C, 0},   {"IFFT3D", 3, K_C2C, 1},
    {"RFFT", 1, K_R2C, 0},   {"RFFT2D", 2, K_R2C, 0},  {"RFFT3D", 3, K_R2C, 0},
    {"IRFFT", 1, K_C2R, 1},  {"IRFFT2D", 2, K_C2R, 1}, {"IRFFT3D", 3, K_C2R, 1},
    {"OnnxDFT", 1, K_ONNX, 0},  {"OnnxSTFT", 1, K_ONNX, 0},
};

typedef struct fft_state {
    const fft_op *op;
    pthread_mutex_t mu;
    fft_plan *plans[FFT_PLAN_CACHE];
    int nplans;
} fft_state;

static void fft_release(void *state) {
    fft_state *s = state;
    if (s == NULL) return;
    for (int i = 0; i < s->nplans; i++)
        plan_free(s->plans[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static ms_status fft_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    const fft_op *op = NULL;
    for (size_t i = 0; i < sizeof(fft_ops) / sizeof(fft_ops[0]); i++)
        if (strcmp(fft_ops[i].op, node->op) == 0) op = &fft_ops[i];
    if (op == NULL) return kn__errf(MS_EINTERNAL, node, "no FFT table row for this op");
    int want = op->kind == K_C2C ? 1 : 2;
    if (node->nin != want && !(op->kind == K_ONNX && node->nin >= 2 && node->nin <= 4))
        return KN_EINVAL(node, "expected %d inputs, got %d", want, node->nin);
    rt_dtype c = kn_attr_type(node, "Tcomplex", RT_DT_COMPLEX64);
    if (c != RT_DT_COMPLEX64)
        return kn__errf(MS_ENOTSUP, node,
                        "Tcomplex %s is not implemented: only DT_COMPLEX64 (the FFT library, "
                        "Debian's KissFFT, is single precision)",
                        rt_dtype_name(c));
    if (op->kind != K_C2C && op->kind != K_ONNX) {
        rt_dtype r = kn_attr_type(node, "Treal", RT_DT_FLOAT);
        if (r != RT_DT_FLOAT)
            return kn__errf(MS_ENOTSUP, node,
                            "Treal %s is not implemented: only DT_FLOAT (the FFT library, "
                            "Debian's KissFFT, is single precision)",
                            rt_dtype_name(r));
    }
    fft_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    s->op = op;
    pthread_mutex_init(&s->mu, NULL);
    *state = s;
    return MS_OK;
}

/* The plan of (n, inverse): from the node's cache, or made now (kept when
 * the cache has room; else *own is set and the caller frees it). */
static ms_status get_plan(fft_state *s, const kn_node *node, int64_t n, int inverse,
                          fft_plan **out, int *own) {
    *own = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nplans; i++)
        if (s->plans[i]->n == n && s->plans[i]->inverse == inverse) {
            *out = s->plans[i];
            pthread_mutex_unlock(&s->mu);
            return MS_OK;
        }
    pthread_mutex_unlock(&s->mu);
    fft_plan *p = plan_new(n, inverse);
    if (p == NULL)
        return kn__errf(MS_ENOMEM, node, "out of memory for a %lld-point FFT plan", (long long)n);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nplans; i++)
        if (s->plans[i]->n == n && s->plans[i]->inverse == inverse) {
            /* Another run made it meanwhile. */
            pthread_mutex_unlock(&s->mu);
            plan_free(p);
            return get_plan(s, node, n, inverse, out, own);
        }
    if (s->nplans < FFT_PLAN_CACHE)
        s->plans[s->nplans++] = p;
    else
        *own = 1;
    pthread_mutex_unlock(&s->mu);
    *out = p;
    return MS_OK;
}

/* One pass over the lines of a tensor along one dim.
 *   C2C: data[outer, n, inner] transformed in place along n.
 *   R2C: real src rows (crop / pad to n) -> the first n/2+1 bins of dst rows.
 *   C2R: half-spectrum rows of dst_bins bins -> real rows of n, scaled.
 * Rows of R2C / C2R are the innermost dim; `srow` maps an output row to its
 * source row (-1: a row of zeros). */
typedef struct line_job {
    const fft_plan *plan; /* set by run_lines */
    int kind, inverse;
    int failed; /* set (atomically) by a chunk that had no scratch */
    int64_t n, inner;
    cpx *data; /* C2C */
    /* R2C / C2R */
    const void *src;
    void *dst;
    int64_t src_len;  /* values in a source row */
    int64_t bins;     /* C2R: half-spectrum bins per row (n / 2 + 1) */
    float scale;      /* C2R */
    const int64_t *srow; /* R2C: source row of each output row, or -1 */
} line_job;

/* A chunk's buffers: input line, result line (n each) and the plan's work;
 * NULL (the job marked failed) when out of memory. */
static cpx *line_scratch(void *arg) {
    line_job *j = arg;
    cpx *buf = kn__scratch(SCR_LINE, (size_t)(2 * j->n + plan_work(j->plan)) * sizeof(cpx));
    if (buf == NULL) __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return buf;
}

static void c2c_lines(void *arg, int64_t begin, int64_t end) {
    const line_job *j = arg;
    int64_t n = j->n, inner = j->inner;
    cpx *buf = line_scratch(arg);
    if (buf == NULL) return;
    cpx *line = buf, *res = buf + n, *work = buf + 2 * n;
    for (int64_t l = begin; l < end; l++) {
        cpx *base = j->data + (l / inner) * n * inner + l % inner;
        for (int64_t k = 0; k < n; k++)
            line[k] = base[k * inner];
        plan_run(j->plan, line, res, work);
        for (int64_t k = 0; k < n; k++)
            base[k * inner] = res[k];
    }
    kn__scratch_done(SCR_LINE, buf);
}

/* Two real rows a, b go through one complex transform: z = a + i b,
 * Z = DFT(z), A[k] = (Z[k] + conj(Z[n-k])) / 2, B[k] = (Z[k] - conj(Z[n-k])) / 2i
 * (half the work of one transform per row, any n). Rows without a source
 * (padding) are zeros. */
static void r2c_lines(void *arg, int64_t begin, int64_t end) {
    const line_job *j = arg;
    int64_t n = j->n, bins = n / 2 + 1, copy = j->src_len < n ? j->src_len : n;
    cpx *buf = line_scratch(arg);
    if (buf == NULL) return;
    cpx *line = buf, *res = buf + n, *work = buf + 2 * n;
    const float *src = j->src;
    cpx *dst = j->dst;
    int64_t r = begin;
    while (r < end) {
        if (j->srow[r] < 0) {
            memset(dst + r * bins, 0, (size_t)bins * sizeof(cpx));
            r++;
            continue;
        }
        int64_t r2 = r + 1;
        while (r2 < end && j->srow[r2] < 0) {
            memset(dst + r2 * bins, 0, (size_t)bins * sizeof(cpx));
            r2++;
        }
        int pair = r2 < end;
        const float *xa = src + j->srow[r] * j->src_len;
        const float *xb = pair ? src + j->srow[r2] * j->src_len : NULL;
        for (int64_t k = 0; k < copy; k++)
            line[k] = (cpx){xa[k], pair ? xb[k] : 0};
        memset(line + copy, 0, (size_t)(n - copy) * sizeof(cpx));
        plan_run(j->plan, line, res, work);
        cpx *oa = dst + r * bins;
        if (!pair) {
            memcpy(oa, res, (size_t)bins * sizeof(cpx));
            break;
        }
        cpx *ob = dst + r2 * bins;
        for (int64_t k = 0; k < bins; k++) {
            cpx z = res[k], w = res[k ? n - k : 0];
            oa[k] = (cpx){(z.r + w.r) * 0.5f, (z.i - w.i) * 0.5f};
            ob[k] = (cpx){(z.i + w.i) * 0.5f, (w.r - z.r) * 0.5f};
        }
        r = r2 + 1;
    }
    kn__scratch_done(SCR_LINE, buf);
}

/* Bin k of the full spectrum of half spectrum x (Hermitian symmetry,
 * X[n - k] = conj(X[k])), with the imaginary parts a c2r transform ignores
 * (zero frequency; Nyquist for even n) dropped. */
static inline cpx full_bin(const cpx *x, int64_t n, int64_t bins, int64_t k) {
    cpx v = k < bins ? x[k] : (cpx){x[n - k].r, -x[n - k].i};
    if (k == 0 || 2 * k == n) v.i = 0;
    return v;
}

/* Two half spectra A, B through one inverse transform: IDFT(A + i B) =
 * a + i b for real a, b. */
static void c2r_lines(void *arg, int64_t begin, int64_t end) {
    const line_job *j = arg;
    int64_t n = j->n, bins = j->bins;
    cpx *buf = line_scratch(arg);
    if (buf == NULL) return;
    cpx *line = buf, *res = buf + n, *work = buf + 2 * n;
    const cpx *src = j->src;
    float *dst = j->dst;
    for (int64_t r = begin; r < end; r += 2) {
        int pair = r + 1 < end;
        const cpx *xa = src + r * bins, *xb = xa + bins;
        for (int64_t k = 0; k < n; k++) {
            cpx a = full_bin(xa, n, bins, k), b = pair ? full_bin(xb, n, bins, k) : (cpx){0, 0};
            line[k] = (cpx){a.r - b.i, a.i + b.r};
        }
        plan_run(j->plan, line, res, work);
        float *oa = dst + r * n, *ob = oa + n;
        for (int64_t k = 0; k < n; k++)
            oa[k] = res[k].r * j->scale;
        for (int64_t k = 0; pair && k < n; k++)
            ob[k] = res[k].i * j->scale;
    }
    kn__scratch_done(SCR_LINE, buf);
}

/* Lines per chunk of the intra-op pool: about 16k points each. */
static int64_t line_chunk(int64_t n) { return n >= 16384 ? 1 : 16384 / n; }

/* Runs fn over `lines` lines of job j with the plan of (j->n, j->inverse). */
static ms_status run_lines(kn_ctx *ctx, fft_state *s, const kn_node *node, line_job *j,
                           int64_t lines, void (*fn)(void *, int64_t, int64_t)) {
    int own = 0;
    fft_plan *p = NULL;
    ms_status st = get_plan(s, node, j->n, j->inverse, &p, &own);
    if (st != MS_OK) return st;
    j->plan = p;
    j->failed = 0;
    if (lines > 0) kn_ctx_parallel_for(ctx, lines, line_chunk(j->n), fn, j);
    if (own) plan_free(p);
    if (j->failed)
        return kn__errf(MS_ENOMEM, node, "out of memory for a %lld-point line", (long long)j->n);
    return kn_ctx_cancelled(ctx) ? kn__errf(MS_ECANCELED, node, "cancelled") : MS_OK;
}

/* C2C along dim d of shape (all in place on data). */
static ms_status c2c_dim(kn_ctx *ctx, fft_state *s, const kn_node *node, cpx *data,
                         const rt_shape *shape, int d, int inverse) {
    int64_t n = shape->dim[d], inner = 1, total = rt_shape_nelem(shape);
    for (int i = d + 1; i < shape->rank; i++)
        inner *= shape->dim[i];
    if (n <= 1 || total == 0) return MS_OK;
    line_job j = {.kind = K_C2C, .inverse = inverse, .n = n, .inner = inner, .data = data};
    return run_lines(ctx, s, node, &j, total / n, c2c_lines);
}

static ms_status check_len(const kn_node *node, int64_t n, const char *what) {
    if (n > FFT_MAX_LEN)
        return KN_EINVAL(node, "%s of %lld points is above the %lld this kernel transforms along one "
                               "dim",
                         what, (long long)n, (long long)FFT_MAX_LEN);
    return MS_OK;
}

/* fft_length: int32 [rank], each >= 0. */
static ms_status read_lengths(const kn_node *node, const rt_tensor *t, int rank, int64_t *len) {
    int count = 0;
    int64_t v[4];
    if (t->dtype != RT_DT_INT32 || t->shape.rank != 1)
        return KN_EINVAL(node, "fft_length must be an int32 vector of %d, got %s %s", rank,
                         rt_dtype_name(t->dtype), kn__shp(&t->shape));
    ms_status st = kn__read_ints(node, t, "fft_length", v, 4, &count);
    if (st != MS_OK) return st;
    if (count != rank)
        return KN_EINVAL(node, "fft_length has %d values; this op transforms %d dims", count, rank);
    for (int i = 0; i < rank; i++) {
        if (v[i] < 0) return KN_EINVAL(node, "fft_length[%d] is %lld, must be >= 0", i, (long long)v[i]);
        if ((st = check_len(node, v[i], "fft_length")) != MS_OK) return st;
        len[i] = v[i];
    }
    return MS_OK;
}

/* The transformed input: dtype `want`, rank at least the op's. */
static ms_status check_input(const kn_node *node, const fft_op *op, const rt_tensor *x,
                             rt_dtype want) {
    if (x->dtype != want)
        return kn__errf(MS_ENOTSUP, node, "input dtype %s is not supported (%s only)",
                        rt_dtype_name(x->dtype), rt_dtype_name(want));
    if (x->shape.rank < op->rank)
        return KN_EINVAL(node, "input %s has rank %d; this op transforms its %d innermost dims",
                         kn__shp(&x->shape), x->shape.rank, op->rank);
    return MS_OK;
}

static ms_status c2c_compute(kn_ctx *ctx, const kn_node *node, fft_state *s, const rt_tensor *x,
                             rt_tensor **out) {
    const fft_op *op = s->op;
    int r = x->shape.rank;
    ms_status st = check_input(node, op, x, RT_DT_COMPLEX64);
    if (st != MS_OK) return st;
    for (int d = r - op->rank; d < r; d++)
        if ((st = check_len(node, x->shape.dim[d], "a dim")) != MS_OK) return st;
    if ((st = kn__output(ctx, node, 0, RT_DT_COMPLEX64, &x->shape, out)) != MS_OK) return st;
    if (x->nelem == 0) return MS_OK;
    cpx *data = (*out)->data;
    memcpy(data, x->data, rt_tensor_nbytes(x));
    double count = 1;
    for (int d = r - 1; d >= r - op->rank; d--) {
        if ((st = c2c_dim(ctx, s, node, data, &x->shape, d, op->inverse)) != MS_OK) return st;
        count *= (double)x->shape.dim[d];
    }
    if (op->inverse && count > 1) {
        float sc = (float)(1.0 / count);
        float *f = (float *)data;
        for (int64_t i = 0; i < 2 * x->nelem; i++)
            f[i] *= sc;
    }
    return MS_OK;
}

/* Source row (innermost-dim row index of src dims sd) of each row of the
 * dims od (the transformed dims are the last `rank`, and only their outer
 * rank - 1 are cropped / padded here), or -1 where a padded coordinate
 * has no source. od and sd differ only in those outer transformed dims. */
static int64_t *row_map(const rt_shape *od, const rt_shape *sd, int rank, int64_t *rows) {
    int r = od->rank;
    int64_t nrows = 1;
    for (int d = 0; d < r - 1; d++)
        nrows *= od->dim[d];
    *rows = nrows;
    int64_t *map = malloc((size_t)(nrows ? nrows : 1) * sizeof(*map));
    if (map == NULL) return NULL;
    int64_t idx[RT_MAX_RANK] = {0};
    for (int64_t row = 0; row < nrows; row++) {
        int64_t src = 0;
        for (int d = 0; d < r - 1 && src >= 0; d++) {
            if (d >= r - rank && idx[d] >= sd->dim[d]) src = -1;
            else src = src * sd->dim[d] + idx[d];
        }
        map[row] = src;
        for (int d = r - 2; d >= 0; d--) {
            if (++idx[d] < od->dim[d]) break;
            idx[d] = 0;
        }
    }
    return map;
}

/* RFFT / IRFFT: checks in[0] (dtype `want`) and fft_length in[1] (into
 * len); *shape: in[0]'s with the transformed dims set to fft_length. */
static ms_status real_prologue(const kn_node *node, const fft_op *op, rt_tensor *const *in,
                               rt_dtype want, int64_t *len, rt_shape *shape) {
    const rt_tensor *x = in[0];
    int r = x->shape.rank, k = op->rank;
    ms_status st = check_input(node, op, x, want);
    if (st != MS_OK || (st = read_lengths(node, in[1], k, len)) != MS_OK) return st;
    *shape = x->shape;
    for (int i = 0; i < k; i++)
        shape->dim[r - k + i] = len[i];
    return MS_OK;
}

static ms_status r2c_compute(kn_ctx *ctx, const kn_node *node, fft_state *s, rt_tensor *const *in,
                             rt_tensor **out) {
    const fft_op *op = s->op;
    const rt_tensor *x = in[0];
    int r = x->shape.rank, k = op->rank;
    int64_t len[3];
    rt_shape os; /* the output: crop / pad, innermost n / 2 + 1 */
    ms_status st = real_prologue(node, op, in, RT_DT_FLOAT, len, &os);
    if (st != MS_OK) return st;
    int64_t n = len[k - 1];
    os.dim[r - 1] = n > 0 ? n / 2 + 1 : 0;
    if ((st = kn__output(ctx, node, 0, RT_DT_COMPLEX64, &os, out)) != MS_OK) return st;
    if ((*out)->nelem == 0) return MS_OK;
    int64_t rows;
    int64_t *map = row_map(&os, &x->shape, k, &rows);
    if (map == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    if (x->nelem == 0) /* every row padding */
        for (int64_t i = 0; i < rows; i++) map[i] = -1;
    line_job j = {.kind = K_R2C, .n = n, .src = x->data, .dst = (*out)->data,
                  .src_len = x->shape.dim[r - 1], .srow = map};
    st = run_lines(ctx, s, node, &j, rows, r2c_lines);
    free(map);
    for (int d = r - 2; d >= r - k && st == MS_OK; d--)
        st = c2c_dim(ctx, s, node, (*out)->data, &os, d, 0);
    return st;
}

static ms_status c2r_compute(kn_ctx *ctx, const kn_node *node, fft_state *s, rt_tensor *const *in,
                             rt_tensor **out) {
    const fft_op *op = s->op;
    const rt_tensor *x = in[0];
    int r = x->shape.rank, k = op->rank;
    int64_t len[3];
    rt_shape os; /* real output */
    ms_status st = real_prologue(node, op, in, RT_DT_COMPLEX64, len, &os);
    if (st != MS_OK) return st;
    rt_shape ws = os; /* the cropped / padded spectrum */
    int64_t n = len[k - 1], bins = n / 2 + 1;
    ws.dim[r - 1] = bins;
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, out)) != MS_OK) return st;
    if ((*out)->nelem == 0) return MS_OK;
    /* The spectrum, cropped / padded to ws: a temporary from the output
     * pool, charged to the request's budget as an output would be. */
    rt_tensor *w = NULL;
    if ((st = kn__output(ctx, node, 0, RT_DT_COMPLEX64, &ws, &w)) != MS_OK) return st;
    int64_t rows, src_len = x->shape.dim[r - 1], copy = src_len < bins ? src_len : bins;
    int64_t *map = row_map(&ws, &x->shape, k, &rows);
    if (map == NULL) {
        rt_tensor_unref(w);
        return kn__errf(MS_ENOMEM, node, "out of memory");
    }
    cpx *wd = w->data;
    const cpx *xd = x->data;
    for (int64_t i = 0; i < rows; i++) {
        cpx *o = wd + i * bins;
        int64_t c = map[i] < 0 || x->nelem == 0 ? 0 : copy;
        if (c > 0) memcpy(o, xd + map[i] * src_len, (size_t)c * sizeof(cpx));
        memset(o + c, 0, (size_t)(bins - c) * sizeof(cpx));
    }
    free(map);
    st = MS_OK;
    for (int d = r - 2; d >= r - k && st == MS_OK; d--)
        st = c2c_dim(ctx, s, node, wd, &ws, d, 1);
    double count = 1;
    for (int i = 0; i < k; i++)
        count *= (double)len[i];
    line_job j = {.kind = K_C2R, .inverse = 1, .n = n, .src = wd, .dst = (*out)->data,
                  .bins = bins, .scale = (float)(1.0 / count)};
    if (st == MS_OK) st = run_lines(ctx, s, node, &j, rows, c2r_lines);
    rt_tensor_unref(w);
    return st;
}

/* ---- OnnxDFT ---- */

/* The complex line buffer w (outer, N, inner) of OnnxDFT from x (outer, m,
 * inner, ci): x's first min(m, N) points then zeros; or, for the inverse
 * of a one-sided spectrum (herm), bin j of the full spectrum: x[j] for
 * j < m, else conj(x[N - j]) (zeros where neither is stored). */
static ms_status dft_fill(kn_ctx *ctx, const kn_node *node, const float *x, cpx *w, int64_t outer,
                          int64_t m, int64_t inner, int64_t ci, int64_t N, int herm) {
    for (int64_t o = 0; o < outer; o++) {
        if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
        for (int64_t j = 0; j < N; j++) {
            int64_t src = j < m ? j : herm ? N - j : -1;
            int conj = herm && j >= m;
            cpx *row = w + (o * N + j) * inner;
            if (src < 0 || src >= m) {
                memset(row, 0, (size_t)inner * sizeof(cpx));
                continue;
            }
            const float *e = x + (o * m + src) * inner * ci;
            for (int64_t q = 0; q < inner; q++) {
                float im = ci == 2 ? e[q * 2 + 1] : 0.0f;
                row[q] = (cpx){e[q * ci], conj ? -im : im};
            }
        }
    }
    return MS_OK;
}

/* Transforms the lines w (outer, N, inner) along N in place and writes
 * the first K bins of each to y (outer, K, inner, co): complex pairs (co
 * 2) or real parts (co 1), scaled by 1 / N when inverse. */
static ms_status dft_lines(kn_ctx *ctx, fft_state *s, const kn_node *node, cpx *w, int64_t outer,
                           int64_t N, int64_t inner, int inv, int64_t K, int64_t co, float *y) {
    if (N > 1) {
        line_job j = {.kind = K_C2C, .inverse = inv, .n = N, .inner = inner, .data = w};
        ms_status st = run_lines(ctx, s, node, &j, outer * inner, c2c_lines);
        if (st != MS_OK) return st;
    }
    float scale = inv ? (float)(1.0 / (double)N) : 1.0f;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < K; k++) {
            const cpx *src = w + (o * N + k) * inner;
            float *dst = y + (o * K + k) * inner * co;
            for (int64_t q = 0; q < inner; q++) {
                dst[q * co] = src[q].r * scale;
                if (co == 2) dst[q * 2 + 1] = src[q].i * scale;
            }
        }
    return MS_OK;
}

static ms_status dft_compute(kn_ctx *ctx, const kn_node *node, fft_state *s, rt_tensor *const *in,
                             rt_tensor **out) {
    const rt_tensor *X = in[0];
    int r = X->shape.rank;
    int64_t axis = kn_attr_i(node, "axis", 1);
    if (node->nin > 2) {
        /* Opset 20's run-time axis: negative counts from the end. */
        if (in[2] == NULL || in[2]->dtype != RT_DT_INT64 || in[2]->nelem != 1)
            return KN_EINVAL(node, "axis must be one int64");
        axis = *(const int64_t *)in[2]->data;
        if (axis < 0) axis += r;
    }
    int inv = kn_attr_i(node, "inverse", 0) != 0, one = kn_attr_i(node, "onesided", 0) != 0;
    if (X->dtype != RT_DT_FLOAT || r < 2 || axis < 0 || axis > r - 2 ||
        (X->shape.dim[r - 1] != 1 && X->shape.dim[r - 1] != 2))
        return KN_EINVAL(node, "x %s: want float (..., 1 or 2) and an axis before the last",
                         kn__shp(&X->shape));
    if (in[1]->dtype != RT_DT_INT64 || in[1]->nelem != 1)
        return KN_EINVAL(node, "dft_length must be one int64");
    int herm = inv && one;
    int64_t m = X->shape.dim[axis], len = *(const int64_t *)in[1]->data;
    int64_t N = len >= 0 ? len : herm ? 2 * (m - 1) : m;
    if (N < 1) return KN_EINVAL(node, "transform length %lld out of range (>= 1)", (long long)N);
    ms_status st = check_len(node, N, "a DFT");
    if (st != MS_OK) return st;
    int64_t K = herm ? N : one ? N / 2 + 1 : N; /* outputs along axis */
    rt_shape os = X->shape;
    os.dim[axis] = K;
    os.dim[r - 1] = herm ? 1 : 2;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= X->shape.dim[i];
    for (int i = axis + 1; i < r - 1; i++)
        inner *= X->shape.dim[i];
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    /* The lines (outer, N, inner): a temporary from the output pool,
     * charged to the request's budget as an output would be. */
    rt_shape ws = {.rank = 3, .dim = {outer, N, inner}};
    rt_tensor *w = NULL;
    if ((st = kn__output(ctx, node, 0, RT_DT_COMPLEX64, &ws, &w)) != MS_OK) return st;
    st = dft_fill(ctx, node, X->data, w->data, outer, m, inner, X->shape.dim[r - 1], N, herm);
    if (st == MS_OK) st = dft_lines(ctx, s, node, w->data, outer, N, inner, inv, K, os.dim[r - 1],
                                    out[0]->data);
    rt_tensor_unref(w);
    return st;
}

/* ---- OnnxSTFT ---- */

static ms_status read_one(const kn_node *node, const rt_tensor *t, const char *what, int64_t *v) {
    int count = 0;
    ms_status st = kn__read_ints(node, t, what, v, 1, &count);
    if (st == MS_OK && count != 1) return KN_EINVAL(node, "%s must be one integer", what);
    return st;
}

/* signal (B, L, 1 or 2) float, frame_step (int32 / int64, one value)
 * [, window (W) float when attr has_window][, frame_length (one integer)
 * when attr has_length] -> (B, F, K, 2): frame f holds samples f * step ..
 * f * step + W - 1 times the window, F = (L - W) / step + 1, K = W / 2 + 1
 * when attr onesided (a real signal only), else W. W is frame_length, else
 * the window's length, else L; frame_length and the window must agree. */
static ms_status stft_compute(kn_ctx *ctx, const kn_node *node, fft_state *s, rt_tensor *const *in,
                              rt_tensor **out) {
    int has_w = kn_attr_i(node, "has_window", 0) != 0, has_l = kn_attr_i(node, "has_length", 0) != 0;
    int one = kn_attr_i(node, "onesided", 1) != 0;
    ms_status st = kn__need_inputs(node, in, 2 + has_w + has_l);
    if (st != MS_OK) return st;
    const rt_tensor *X = in[0], *win = has_w ? in[2] : NULL;
    if (X->dtype != RT_DT_FLOAT || X->shape.rank != 3 ||
        (X->shape.dim[2] != 1 && X->shape.dim[2] != 2))
        return KN_EINVAL(node, "signal %s %s: want float (batch, length, 1 or 2)",
                         rt_dtype_name(X->dtype), kn__shp(&X->shape));
    int64_t B = X->shape.dim[0], L = X->shape.dim[1], ci = X->shape.dim[2], step = 0, W = -1;
    if ((st = read_one(node, in[1], "frame_step", &step)) != MS_OK) return st;
    if (step < 1) return KN_EINVAL(node, "frame_step %lld must be >= 1", (long long)step);
    if (has_l && (st = read_one(node, in[2 + has_w], "frame_length", &W)) != MS_OK) return st;
    if (win != NULL) {
        if (win->dtype != RT_DT_FLOAT || win->shape.rank != 1)
            return KN_EINVAL(node, "window %s %s: want float, 1-D", rt_dtype_name(win->dtype),
                             kn__shp(&win->shape));
        if (W >= 0 && W != win->shape.dim[0])
            return KN_EINVAL(node, "frame_length %lld differs from the window's length %lld",
                             (long long)W, (long long)win->shape.dim[0]);
        W = win->shape.dim[0];
    }
    if (W < 0) W = L;
    if (W < 1 || W > L)
        return KN_EINVAL(node, "frame length %lld must be in 1..%lld (the signal's length)",
                         (long long)W, (long long)L);
    if ((st = check_len(node, W, "a frame")) != MS_OK) return st;
    if (one && ci == 2) return KN_EINVAL(node, "onesided needs a real signal (last dim 1)");
    int64_t F = (L - W) / step + 1, K = one ? W / 2 + 1 : W;
    rt_shape os = {.rank = 4, .dim = {B, F, K, 2}};
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    /* The frames (B * F, W), windowed: a budget-charged temporary. */
    rt_shape ws = {.rank = 2, .dim = {B * F, W}};
    rt_tensor *w = NULL;
    if ((st = kn__output(ctx, node, 0, RT_DT_COMPLEX64, &ws, &w)) != MS_OK) return st;
    cpx *wd = w->data;
    const float *x = X->data, *wv = win != NULL ? win->data : NULL;
    for (int64_t l = 0; l < B * F && st == MS_OK; l++) {
        if (kn_ctx_cancelled(ctx)) st = kn__errf(MS_ECANCELED, node, "cancelled");
        const float *e = x + ((l / F) * L + (l % F) * step) * ci;
        for (int64_t j = 0; j < W; j++) {
            float g = wv != NULL ? wv[j] : 1.0f;
            wd[l * W + j] = (cpx){e[j * ci] * g, ci == 2 ? e[j * ci + 1] * g : 0.0f};
        }
    }
    if (st == MS_OK) st = dft_lines(ctx, s, node, wd, B * F, W, 1, 0, K, 2, out[0]->data);
    rt_tensor_unref(w);
    return st;
}

static ms_status fft_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    fft_state *s = state;
    ms_status st = kn__need_inputs(node, in, s->op->kind == K_C2C ? 1 : 2);
    if (st != MS_OK) return st;
    switch (s->op->kind) {
    case K_C2C:
        return c2c_compute(ctx, node, s, in[0], &out[0]);
    case K_ONNX:
        return strcmp(node->op, "OnnxSTFT") == 0 ? stft_compute(ctx, node, s, in, out)
                                                 : dft_compute(ctx, node, s, in, out);
    case K_R2C:
        return r2c_compute(ctx, node, s, in, out);
    default:
        return c2r_compute(ctx, node, s, in, out);
    }
}

#define FFT_KERNEL(name)                                                                           \
    { .op = name, .prepare = fft_prepare, .compute = fft_compute, .release = fft_release }

const kn_kernel kn_cpu_fft_kernels[] = {
    FFT_KERNEL("FFT"),   FFT_KERNEL("IFFT"),   FFT_KERNEL("FFT2D"),   FFT_KERNEL("IFFT2D"),
    FFT_KERNEL("FFT3D"), FFT_KERNEL("IFFT3D"), FFT_KERNEL("RFFT"),    FFT_KERNEL("RFFT2D"),
    FFT_KERNEL("RFFT3D"), FFT_KERNEL("IRFFT"), FFT_KERNEL("IRFFT2D"), FFT_KERNEL("IRFFT3D"),
    FFT_KERNEL("OnnxDFT"), FFT_KERNEL("OnnxSTFT"), {.op = NULL},
};
