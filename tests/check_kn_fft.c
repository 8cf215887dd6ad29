/* check_kn_fft.c - CPU kernels of the FFT family (FFT, IFFT, RFFT, IRFFT in
 * 1, 2 and 3 dims over KissFFT), the complex ops (ComplexAbs, Real, Imag,
 * Angle, Conj, Complex) and complex elementwise arithmetic and Cast.
 *
 * References: a few hand-worked transforms, and for the rest a naive DFT
 * computed here in double, X[k] = sum_j x[j] exp(-+2 pi i j k / n) (the
 * inverse scaled by 1/n), along each transformed dim in turn, with
 * TensorFlow's crop / zero-pad of fft_length and its c2r reading of a
 * half spectrum (Hermitian extension; the imaginary parts of the DC and
 * Nyquist bins ignored). Lengths cover powers of two, mixed radices,
 * odd lengths and primes above 128 (Bluestein's path). */
#include <check.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "util_node.h"

#define S TU_SHAPE
#define S1 TU_SCALAR

typedef double complex dc;

/* Deterministic values in [-1, 1). */
static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 52) - 1.0;
}

/* In place: the DFT along dim d of a dc array of shape dims[0..rank-1]. */
static void naive_dim(dc *a, const int64_t *dims, int rank, int d, int inverse) {
    int64_t n = dims[d], inner = 1, outer = 1;
    for (int i = d + 1; i < rank; i++) inner *= dims[i];
    for (int i = 0; i < d; i++) outer *= dims[i];
    dc *tmp = malloc((size_t)n * sizeof(dc));
    double sign = inverse ? 1 : -1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++) {
            dc *base = a + o * n * inner + q;
            for (int64_t k = 0; k < n; k++) {
                dc s = 0;
                for (int64_t j = 0; j < n; j++)
                    s += base[j * inner] * cexp(sign * 2 * M_PI * I * (double)((j * k) % n) / (double)n);
                tmp[k] = inverse ? s / (double)n : s;
            }
            for (int64_t k = 0; k < n; k++) base[k * inner] = tmp[k];
        }
    free(tmp);
}

static rt_tensor *c64_tensor(rt_shape s, const dc *v) {
    int64_t n = rt_shape_nelem(&s);
    float *f = malloc((size_t)(2 * n + 2) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        f[2 * i] = (float)creal(v[i]);
        f[2 * i + 1] = (float)cimag(v[i]);
    }
    rt_tensor *t = tu_t(RT_DT_COMPLEX64, s, f, (int)n);
    free(f);
    return t;
}

/* |got - want| <= tol * (1 + max |want|) for each element. */
static void check_c64(const rt_tensor *t, rt_shape s, const dc *want, double tol, const char *what) {
    tu_check_shape(t, RT_DT_COMPLEX64, s);
    int64_t n = rt_shape_nelem(&s);
    double mx = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, cabs(want[i]));
    const float *g = t->data;
    for (int64_t i = 0; i < n; i++) {
        double e = cabs(CMPLX(g[2 * i], g[2 * i + 1]) - want[i]);
        ck_assert_msg(e <= tol * (1 + mx), "%s: element %lld is %g%+gi, want %g%+gi", what,
                      (long long)i, g[2 * i], g[2 * i + 1], creal(want[i]), cimag(want[i]));
    }
}

static void check_real(const rt_tensor *t, rt_shape s, const double *want, double tol,
                       const char *what) {
    tu_check_shape(t, RT_DT_FLOAT, s);
    int64_t n = rt_shape_nelem(&s);
    double mx = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    const float *g = t->data;
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(g[i] - want[i]) <= tol * (1 + mx), "%s: element %lld is %g, want %g",
                      what, (long long)i, g[i], want[i]);
}

static rt_tensor *run1(const char *op, rt_tensor *x, rt_tensor *len) {
    Tensorflow__NodeDef *d = tu_node_new(op, "fft");
    rt_tensor *in[2] = {x, len};
    rt_tensor *o = tu_run1(d, in, len ? 2 : 1);
    return o;
}

static rt_tensor *lengths(int rank, const int64_t *l) {
    int32_t v[3];
    for (int i = 0; i < rank; i++) v[i] = (int32_t)l[i];
    return tu_t(RT_DT_INT32, S(rank), v, rank);
}

START_TEST(hand_worked) {
    /* FFT [1, 2, 3, 4] = [10, -2 + 2i, -2, -2 - 2i]. */
    rt_tensor *x = c64_tensor(S(4), (const dc[]){1, 2, 3, 4});
    rt_tensor *o = run1("FFT", x, NULL);
    check_c64(o, S(4), (const dc[]){10, -2 + 2 * I, -2, -2 - 2 * I}, 1e-6, "FFT [1,2,3,4]");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* IFFT is scaled by 1/n: IFFT [4, 0, 0, 0] = [1, 1, 1, 1]. */
    x = c64_tensor(S(4), (const dc[]){4, 0, 0, 0});
    o = run1("IFFT", x, NULL);
    check_c64(o, S(4), (const dc[]){1, 1, 1, 1}, 1e-6, "IFFT [4,0,0,0]");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* RFFT of an impulse: every one of the n/2 + 1 = 3 bins is 1. */
    x = TU_F32(S(4), 1, 0, 0, 0);
    rt_tensor *len = TU_I32(S(1), 4);
    o = run1("RFFT", x, len);
    check_c64(o, S(3), (const dc[]){1, 1, 1}, 1e-6, "RFFT impulse");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* IRFFT [4, 0, 0] at length 4 = [1, 1, 1, 1]; the imaginary parts of
     * the DC and Nyquist bins are ignored. */
    x = c64_tensor(S(3), (const dc[]){4 + 5 * I, 0, 0 + 7 * I});
    o = run1("IRFFT", x, len);
    check_real(o, S(4), (const double[]){1, 1, 1, 1}, 1e-6, "IRFFT [4,0,0]");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor_unref(len);
    /* 2-D: FFT2D [[1, 2], [3, 4]] = [[10, -2], [-4, 0]]. */
    x = c64_tensor(S(2, 2), (const dc[]){1, 2, 3, 4});
    o = run1("FFT2D", x, NULL);
    check_c64(o, S(2, 2), (const dc[]){10, -2, -4, 0}, 1e-6, "FFT2D");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

/* C2C ops of `rank` dims on random input of the given shape against the naive DFT. */
static void c2c_case(const char *op, int rank, int inverse, rt_shape s) {
    int64_t n = rt_shape_nelem(&s);
    dc *v = malloc((size_t)(n ? n : 1) * sizeof(dc));
    for (int64_t i = 0; i < n; i++) v[i] = urand() + I * urand();
    rt_tensor *x = c64_tensor(s, v);
    rt_tensor *o = run1(op, x, NULL);
    for (int d = s.rank - 1; d >= s.rank - rank; d--) naive_dim(v, s.dim, s.rank, d, inverse);
    char what[96];
    snprintf(what, sizeof what, "%s on (%lld..., %lld)", op, (long long)s.dim[0],
             (long long)s.dim[s.rank - 1]);
    check_c64(o, s, v, 2e-5, what);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    free(v);
}

START_TEST(c2c_lengths) {
    /* 1, radix 2/3/4/5, mixed, odd, and primes above 128 (Bluestein). */
    const int64_t lens[] = {1, 2, 3, 5, 7, 8, 12, 17, 64, 100, 127, 131, 257, 1000, 1031, 4096};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        c2c_case("FFT", 1, 0, S(3, lens[i]));
        c2c_case("IFFT", 1, 1, S(2, lens[i]));
    }
}
END_TEST

START_TEST(c2c_multi_dim) {
    c2c_case("FFT2D", 2, 0, S(2, 3, 5));
    c2c_case("IFFT2D", 2, 1, S(4, 6));
    c2c_case("FFT2D", 2, 0, S(1, 131, 3));
    c2c_case("FFT3D", 3, 0, S(2, 3, 4, 5));
    c2c_case("IFFT3D", 3, 1, S(3, 2, 7));
    c2c_case("FFT3D", 3, 0, S(2, 1, 1, 1));
}
END_TEST

/* x of shape s cropped / zero-padded to shape t (same rank): a new array. */
static dc *crop_pad(const dc *x, rt_shape s, rt_shape t) {
    int64_t tn = rt_shape_nelem(&t);
    dc *y = calloc((size_t)(tn ? tn : 1), sizeof(dc));
    int64_t idx[RT_MAX_RANK] = {0};
    for (int64_t i = 0; i < tn; i++) {
        int64_t src = 0, in_range = 1;
        for (int d = 0; d < s.rank; d++) {
            if (idx[d] >= s.dim[d]) in_range = 0;
            src = src * s.dim[d] + idx[d];
        }
        if (in_range) y[i] = x[src];
        for (int d = s.rank - 1; d >= 0; d--) {
            if (++idx[d] < t.dim[d]) break;
            idx[d] = 0;
        }
    }
    return y;
}

/* RFFT of `rank` dims: x random real of shape s, fft_length l: the naive
 * DFT of x cropped / zero-padded to l, its innermost dim cut to l/2 + 1. */
static void r2c_case(const char *op, int rank, rt_shape s, const int64_t *l) {
    int64_t n = rt_shape_nelem(&s);
    float *xv = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) xv[i] = (float)urand();
    rt_tensor *x = tu_t(RT_DT_FLOAT, s, xv, (int)n);
    rt_tensor *len = lengths(rank, l);
    rt_tensor *o = run1(op, x, len);
    rt_shape fs = s; /* the full transform's shape */
    for (int i = 0; i < rank; i++) fs.dim[s.rank - rank + i] = l[i];
    dc *xd = malloc((size_t)(n ? n : 1) * sizeof(dc));
    for (int64_t i = 0; i < n; i++) xd[i] = xv[i];
    dc *f = crop_pad(xd, s, fs);
    free(xd);
    for (int d = s.rank - 1; d >= s.rank - rank; d--) naive_dim(f, fs.dim, fs.rank, d, 0);
    rt_shape os = fs;
    int64_t L = l[rank - 1], H = L ? L / 2 + 1 : 0;
    os.dim[os.rank - 1] = H;
    int64_t on = rt_shape_nelem(&os);
    dc *want = malloc((size_t)(on ? on : 1) * sizeof(dc));
    for (int64_t i = 0; i < on; i++) want[i] = f[(i / H) * L + i % H];
    char what[96];
    snprintf(what, sizeof what, "%s length %lld of (..., %lld)", op, (long long)L,
             (long long)s.dim[s.rank - 1]);
    check_c64(o, os, want, 2e-5, what);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor_unref(len);
    free(xv);
    free(f);
    free(want);
}

START_TEST(r2c) {
    /* Exact length, crop, zero-pad, odd, and a Bluestein prime. */
    const int64_t l8[] = {8}, l6[] = {6}, l12[] = {12}, l7[] = {7}, l131[] = {131}, l1[] = {1};
    r2c_case("RFFT", 1, S(3, 8), l8);
    r2c_case("RFFT", 1, S(3, 10), l6);
    r2c_case("RFFT", 1, S(2, 5), l12);
    r2c_case("RFFT", 1, S(2, 9), l7);
    r2c_case("RFFT", 1, S(2, 100), l131);
    r2c_case("RFFT", 1, S(4), l1);
    const int64_t l46[] = {4, 6}, l25[] = {2, 5}, l33[] = {3, 3};
    r2c_case("RFFT2D", 2, S(2, 3, 6), l46); /* outer dim padded 3 -> 4 */
    r2c_case("RFFT2D", 2, S(4, 7), l25);    /* both cropped */
    r2c_case("RFFT2D", 2, S(3, 3), l33);
    const int64_t l345[] = {3, 4, 5}, l222[] = {2, 2, 2};
    r2c_case("RFFT3D", 3, S(2, 3, 4, 5), l345);
    r2c_case("RFFT3D", 3, S(3, 1, 4), l222);
}
END_TEST

/* IRFFT of `rank` dims: random half spectrum x of shape s at fft_length l;
 * the naive reference crops / pads x to (l..., l[-1]/2 + 1), runs the
 * inverse DFT over the outer transformed dims, then per innermost row
 * extends by X[n - k] = conj(X[k]) with the DC (and even n's Nyquist)
 * imaginary part dropped, inverse DFT, real part. */
static void c2r_case(const char *op, int rank, rt_shape s, const int64_t *l) {
    int64_t n = rt_shape_nelem(&s);
    dc *xv = malloc((size_t)(n ? n : 1) * sizeof(dc));
    for (int64_t i = 0; i < n; i++) xv[i] = urand() + I * urand();
    rt_tensor *x = c64_tensor(s, xv);
    rt_tensor *len = lengths(rank, l);
    rt_tensor *o = run1(op, x, len);
    int64_t L = l[rank - 1], H = L / 2 + 1;
    rt_shape ws = s;
    for (int i = 0; i < rank; i++) ws.dim[s.rank - rank + i] = l[i];
    ws.dim[ws.rank - 1] = H;
    int64_t wn = rt_shape_nelem(&ws);
    dc *w = crop_pad(xv, s, ws);
    for (int d = s.rank - 2; d >= s.rank - rank; d--) naive_dim(w, ws.dim, ws.rank, d, 1);
    int64_t rows = H ? wn / H : 0;
    double *want = malloc((size_t)(rows * L + 1) * sizeof(double));
    dc *line = malloc((size_t)(L + 1) * sizeof(dc));
    for (int64_t r = 0; r < rows; r++) {
        const dc *x0 = w + r * H;
        for (int64_t k = 0; k < L; k++) line[k] = k < H ? x0[k] : conj(x0[L - k]);
        line[0] = creal(line[0]);
        if (L % 2 == 0) line[L / 2] = creal(line[L / 2]);
        const int64_t one[1] = {L};
        naive_dim(line, one, 1, 0, 1);
        for (int64_t k = 0; k < L; k++) want[r * L + k] = creal(line[k]);
    }
    rt_shape os = s;
    for (int i = 0; i < rank; i++) os.dim[s.rank - rank + i] = l[i];
    char what[96];
    snprintf(what, sizeof what, "%s length %lld of (..., %lld)", op, (long long)L,
             (long long)s.dim[s.rank - 1]);
    check_real(o, os, want, 2e-5, what);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    rt_tensor_unref(len);
    free(xv);
    free(w);
    free(want);
    free(line);
}

START_TEST(c2r) {
    const int64_t l8[] = {8}, l7[] = {7}, l6[] = {6}, l16[] = {16}, l262[] = {262}, l263[] = {263};
    c2r_case("IRFFT", 1, S(3, 5), l8);   /* exact */
    c2r_case("IRFFT", 1, S(2, 4), l7);   /* odd: no Nyquist bin */
    c2r_case("IRFFT", 1, S(2, 9), l6);   /* cropped to 4 bins */
    c2r_case("IRFFT", 1, S(2, 5), l16);  /* padded to 9 bins */
    c2r_case("IRFFT", 1, S(1, 132), l262); /* 131 * 2: Bluestein */
    c2r_case("IRFFT", 1, S(1, 132), l263);
    const int64_t l46[] = {4, 6}, l35[] = {3, 5};
    c2r_case("IRFFT2D", 2, S(2, 3, 4), l46); /* outer padded */
    c2r_case("IRFFT2D", 2, S(5, 4), l35);    /* outer cropped */
    const int64_t l234[] = {2, 3, 4};
    c2r_case("IRFFT3D", 3, S(2, 2, 3, 3), l234);
}
END_TEST

START_TEST(round_trip) {
    /* IRFFT(RFFT(x)) = x for even and odd lengths (as numpy's irfft(rfft)). */
    const int32_t lens[] = {2, 9, 64, 101, 139, 400};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        int32_t L = lens[t];
        float *xv = malloc((size_t)(3 * L) * sizeof(float));
        double *dv = malloc((size_t)(3 * L) * sizeof(double));
        for (int i = 0; i < 3 * L; i++) dv[i] = xv[i] = (float)urand();
        rt_tensor *x = tu_t(RT_DT_FLOAT, S(3, L), xv, 3 * L);
        rt_tensor *len = tu_t(RT_DT_INT32, S(1), &L, 1);
        rt_tensor *spec = run1("RFFT", x, len);
        rt_tensor *back = run1("IRFFT", spec, len);
        check_real(back, S(3, L), dv, 1e-5, "IRFFT(RFFT(x))");
        tu_unref((rt_tensor *[]){x, len, spec, back}, 4);
        free(xv);
        free(dv);
    }
}
END_TEST

START_TEST(empty) {
    /* Empty batch: shapes follow; nothing to transform. */
    rt_tensor *x = tu_t(RT_DT_COMPLEX64, S(0, 4), NULL, 0);
    rt_tensor *o = run1("FFT", x, NULL);
    tu_check_shape(o, RT_DT_COMPLEX64, S(0, 4));
    rt_tensor_unref(o);
    rt_tensor *len = TU_I32(S(1), 8);
    o = run1("IRFFT", x, len);
    tu_check_shape(o, RT_DT_FLOAT, S(0, 8));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = tu_t(RT_DT_FLOAT, S(0, 8), NULL, 0);
    o = run1("RFFT", x, len);
    tu_check_shape(o, RT_DT_COMPLEX64, S(0, 5));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* fft_length 0: an innermost dim of 0 bins (TensorFlow's shape). */
    x = TU_F32(S(2, 3), 1, 2, 3, 4, 5, 6);
    rt_tensor *zero = TU_I32(S(1), 0);
    o = run1("RFFT", x, zero);
    tu_check_shape(o, RT_DT_COMPLEX64, S(2, 0));
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* An empty innermost dim padded to 8: zeros in, zeros out. */
    x = tu_t(RT_DT_COMPLEX64, S(2, 0), NULL, 0);
    o = run1("IRFFT", x, len);
    check_real(o, S(2, 8), (const double[16]){0}, 0, "IRFFT of nothing");
    tu_unref((rt_tensor *[]){o, x, len, zero}, 4);
}
END_TEST

START_TEST(errors) {
    /* Double precision is refused at load, naming the attr. */
    Tensorflow__NodeDef *d = tu_node_new("FFT", "c128");
    tu_attr_type(d, "Tcomplex", RT_DT_COMPLEX128);
    rt_tensor *c = c64_tensor(S(4), (const dc[]){1, 2, 3, 4});
    tu_run_fail(d, &c, 1, 1, MS_ENOTSUP, "Tcomplex DT_COMPLEX128");
    d = tu_node_new("RFFT", "f64");
    tu_attr_type(d, "Treal", RT_DT_DOUBLE);
    rt_tensor *r = TU_F32(S(4), 1, 2, 3, 4);
    rt_tensor *len = TU_I32(S(1), 4);
    tu_run_fail(d, (rt_tensor *[]){r, len}, 2, 1, MS_ENOTSUP, "Treal DT_DOUBLE");
    /* A real tensor into FFT; rank below the transform's. */
    tu_run_fail(tu_node_new("FFT", "real_in"), &r, 1, 1, MS_ENOTSUP, "DT_FLOAT");
    tu_run_fail(tu_node_new("FFT2D", "rank1"), &c, 1, 1, MS_EINVAL, "rank 1");
    /* fft_length: wrong count, negative, int64, hostile size. */
    rt_tensor *two = TU_I32(S(2), 4, 4), *neg = TU_I32(S(1), -2), *i64 = TU_I64(S(1), 4);
    rt_tensor *huge = TU_I32(S(1), 1 << 30);
    tu_run_fail(tu_node_new("RFFT", "count"), (rt_tensor *[]){r, two}, 2, 1, MS_EINVAL, "2 values");
    tu_run_fail(tu_node_new("RFFT", "neg"), (rt_tensor *[]){r, neg}, 2, 1, MS_EINVAL, ">= 0");
    tu_run_fail(tu_node_new("RFFT", "i64"), (rt_tensor *[]){r, i64}, 2, 1, MS_EINVAL, "int32");
    tu_run_fail(tu_node_new("RFFT", "huge"), (rt_tensor *[]){r, huge}, 2, 1, MS_EINVAL, "above");
    tu_run_fail(tu_node_new("IRFFT", "huge"), (rt_tensor *[]){c, huge}, 2, 1, MS_EINVAL, "above");
    tu_unref((rt_tensor *[]){c, r, len, two, neg, i64, huge}, 7);
}
END_TEST

START_TEST(complex_ops) {
    rt_tensor *z = c64_tensor(S(3), (const dc[]){3 + 4 * I, -1, -2 * I});
    rt_tensor *o = run1("ComplexAbs", z, NULL);
    TU_CHECK_F32(o, S(3), 1e-7f, 5, 1, 2);
    rt_tensor_unref(o);
    o = run1("Real", z, NULL);
    TU_CHECK_F32(o, S(3), 0, 3, -1, 0);
    rt_tensor_unref(o);
    o = run1("Imag", z, NULL);
    TU_CHECK_F32(o, S(3), 0, 4, 0, -2);
    rt_tensor_unref(o);
    o = run1("Angle", z, NULL);
    TU_CHECK_F32(o, S(3), 1e-7f, atan2f(4, 3), (float)M_PI, (float)-M_PI_2);
    rt_tensor_unref(o);
    o = run1("Conj", z, NULL);
    check_c64(o, S(3), (const dc[]){3 - 4 * I, -1, 2 * I}, 0, "Conj");
    rt_tensor_unref(o);
    rt_tensor_unref(z);
    /* complex128 keeps double precision. */
    const double zd[4] = {1e-300, 3e-300, 0.1, -0.7};
    Tensorflow__NodeDef *d = tu_node_new("ComplexAbs", "abs128");
    tu_attr_type(d, "T", RT_DT_COMPLEX128);
    tu_attr_type(d, "Tout", RT_DT_DOUBLE);
    z = tu_t(RT_DT_COMPLEX128, S(2), zd, 2);
    o = tu_run1(d, &z, 1);
    TU_CHECK_F64(o, S(2), 1e-15, hypot(1e-300, 3e-300), hypot(0.1, -0.7));
    rt_tensor_unref(o);
    rt_tensor_unref(z);
    /* Complex broadcasts: real [2, 1], imag [3]. */
    rt_tensor *re = TU_F32(S(2, 1), 1, 2), *im = TU_F32(S(3), 10, 20, 30);
    d = tu_node_new("Complex", "mk");
    o = tu_run1(d, (rt_tensor *[]){re, im}, 2);
    check_c64(o, S(2, 3),
              (const dc[]){1 + 10 * I, 1 + 20 * I, 1 + 30 * I, 2 + 10 * I, 2 + 20 * I, 2 + 30 * I},
              0, "Complex");
    rt_tensor_unref(o);
    /* Mismatched attrs are refused at load. */
    d = tu_node_new("Complex", "mixed");
    tu_attr_type(d, "T", RT_DT_DOUBLE);
    tu_attr_type(d, "Tout", RT_DT_COMPLEX64);
    tu_run_fail(d, (rt_tensor *[]){re, im}, 2, 1, MS_ENOTSUP, "Tout DT_COMPLEX64");
    d = tu_node_new("Real", "realreal");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_run_fail(d, &re, 1, 1, MS_ENOTSUP, "T DT_FLOAT");
    tu_unref((rt_tensor *[]){re, im}, 2);
}
END_TEST

START_TEST(complex_arith) {
    /* (1 + 2i)(3 - i) = 5 + 5i; (1 + 2i) / (3 - i) = 0.1 + 0.7i. */
    rt_tensor *a = c64_tensor(S(2), (const dc[]){1 + 2 * I, 2});
    rt_tensor *b = c64_tensor(S(1), (const dc[]){3 - I});
    rt_tensor *in[2] = {a, b};
    struct {
        const char *op;
        dc want[2];
    } cases[] = {
        {"Mul", {5 + 5 * I, 6 - 2 * I}},      {"AddV2", {4 + I, 5 - I}},
        {"Sub", {-2 + 3 * I, -1 + I}},        {"RealDiv", {0.1 + 0.7 * I, 0.6 + 0.2 * I}},
        {"Div", {0.1 + 0.7 * I, 0.6 + 0.2 * I}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rt_tensor *o = tu_run1(tu_node_new(cases[i].op, "ar"), in, 2);
        check_c64(o, S(2), cases[i].want, 1e-6, cases[i].op);
        rt_tensor_unref(o);
    }
    rt_tensor *o = tu_run1(tu_node_new("Neg", "neg"), &a, 1);
    check_c64(o, S(2), (const dc[]){-1 - 2 * I, -2}, 0, "Neg");
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("Square", "sq"), &a, 1);
    check_c64(o, S(2), (const dc[]){-3 + 4 * I, 4}, 1e-6, "Square");
    rt_tensor_unref(o);
    rt_tensor *c = c64_tensor(S(2), (const dc[]){1 + 2 * I, 2 + I});
    o = tu_run1(tu_node_new("Equal", "eq"), (rt_tensor *[]){a, c}, 2);
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 1, 0);
    rt_tensor_unref(o);
    /* Cast: complex64 <-> complex128 keeps both parts; to float takes the
     * real part; from float the imaginary part is 0; to bool either part. */
    Tensorflow__NodeDef *d = tu_node_new("Cast", "c128");
    tu_attr_type(d, "DstT", RT_DT_COMPLEX128);
    o = tu_run1(d, &a, 1);
    tu_check_shape(o, RT_DT_COMPLEX128, S(2));
    const double *pd = o->data;
    ck_assert(pd[0] == 1 && pd[1] == 2 && pd[2] == 2 && pd[3] == 0);
    rt_tensor *back;
    d = tu_node_new("Cast", "c64");
    tu_attr_type(d, "DstT", RT_DT_COMPLEX64);
    back = tu_run1(d, &o, 1);
    check_c64(back, S(2), (const dc[]){1 + 2 * I, 2}, 0, "Cast c128 -> c64");
    tu_unref((rt_tensor *[]){o, back}, 2);
    d = tu_node_new("Cast", "re");
    tu_attr_type(d, "DstT", RT_DT_FLOAT);
    o = tu_run1(d, &a, 1);
    TU_CHECK_F32(o, S(2), 0, 1, 2);
    rt_tensor_unref(o);
    rt_tensor *iz = c64_tensor(S(2), (const dc[]){I, 0});
    d = tu_node_new("Cast", "b");
    tu_attr_type(d, "DstT", RT_DT_BOOL);
    o = tu_run1(d, &iz, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, S(2), 1, 0);
    tu_unref((rt_tensor *[]){o, iz, a, b, c}, 5);
}
END_TEST

/* Runs op on a complex input x (plus int32 operands) and checks the
 * output's elements are the given elements of x, in order. */
static void moved(rt_dtype dt, const char *op, rt_tensor *x, rt_tensor *const *extra, int nextra,
                  rt_shape s, const int *from, int nfrom, void (*attrs)(Tensorflow__NodeDef *)) {
    Tensorflow__NodeDef *d = tu_node_new(op, "mv");
    if (attrs) attrs(d);
    rt_tensor *in[4] = {x};
    for (int i = 0; i < nextra; i++) in[1 + i] = extra[i];
    rt_tensor *o = tu_run1(d, in, 1 + nextra);
    tu_check_shape(o, dt, s);
    size_t es = rt_dtype_size(dt);
    ck_assert_int_eq(o->nelem, nfrom);
    for (int i = 0; i < nfrom; i++)
        ck_assert_msg(memcmp((const char *)o->data + i * es, (const char *)x->data + from[i] * es,
                             es) == 0,
                      "%s on %s: element %d is not element %d of the input", op, rt_dtype_name(dt),
                      i, from[i]);
    rt_tensor_unref(o);
}

static void attrs_concat(Tensorflow__NodeDef *d) { tu_attr_i(d, "N", 2); }
static void attrs_pack(Tensorflow__NodeDef *d) {
    tu_attr_i(d, "N", 2);
    tu_attr_i(d, "axis", 1);
}

START_TEST(complex_shape_ops) {
    /* The dtype-agnostic layout ops move complex64 / complex128 elements
     * whole (both parts) as any other element. */
    const rt_dtype dts[2] = {RT_DT_COMPLEX64, RT_DT_COMPLEX128};
    for (int t = 0; t < 2; t++) {
        rt_dtype dt = dts[t];
        double v[12];
        float f[12];
        for (int i = 0; i < 12; i++) v[i] = f[i] = (float)(i + 1) * (i % 2 ? -0.5f : 1.0f);
        rt_tensor *x = tu_t(dt, S(2, 3), dt == RT_DT_COMPLEX64 ? (const void *)f : (const void *)v, 6);
        rt_tensor *shp = TU_I32(S(2), 3, 2), *perm = TU_I32(S(2), 1, 0);
        moved(dt, "Reshape", x, &shp, 1, S(3, 2), (const int[]){0, 1, 2, 3, 4, 5}, 6, NULL);
        moved(dt, "Transpose", x, &perm, 1, S(3, 2), (const int[]){0, 3, 1, 4, 2, 5}, 6, NULL);
        rt_tensor *b = TU_I32(S(2), 1, 1), *sz = TU_I32(S(2), 1, 2);
        moved(dt, "Slice", x, (rt_tensor *[]){b, sz}, 2, S(1, 2), (const int[]){4, 5}, 2, NULL);
        rt_tensor *e = TU_I32(S(2), 2, 3), *st1 = TU_I32(S(2), 1, 2);
        moved(dt, "StridedSlice", x, (rt_tensor *[]){b, e, st1}, 3, S(1, 1), (const int[]){4}, 1,
              NULL);
        rt_tensor *ax = TU_I32(S1, 0);
        moved(dt, "ConcatV2", x, (rt_tensor *[]){x, ax}, 2, S(4, 3),
              (const int[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 12, attrs_concat);
        moved(dt, "Pack", x, &x, 1, S(2, 2, 3), (const int[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5},
              12, attrs_pack);
        rt_tensor *idx = TU_I32(S(2), 2, 0), *ax1 = TU_I32(S1, 1);
        moved(dt, "GatherV2", x, (rt_tensor *[]){idx, ax1}, 2, S(2, 2), (const int[]){2, 0, 5, 3}, 4,
              NULL);
        rt_tensor *mult = TU_I32(S(2), 1, 2);
        moved(dt, "Tile", x, &mult, 1, S(2, 6), (const int[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5},
              12, NULL);
        moved(dt, "ReverseV2", x, &ax1, 1, S(2, 3), (const int[]){2, 1, 0, 5, 4, 3}, 6, NULL);
        /* Pad: the padding is complex zero. */
        rt_tensor *pads = TU_I32(S(2, 2), 0, 0, 1, 0);
        Tensorflow__NodeDef *d = tu_node_new("Pad", "pad");
        rt_tensor *o = tu_run1(d, (rt_tensor *[]){x, pads}, 2);
        tu_check_shape(o, dt, S(2, 4));
        size_t es = rt_dtype_size(dt);
        const char zero[16] = {0};
        for (int r = 0; r < 2; r++) {
            ck_assert(memcmp((const char *)o->data + (size_t)(4 * r) * es, zero, es) == 0);
            ck_assert(memcmp((const char *)o->data + (size_t)(4 * r + 1) * es,
                             (const char *)x->data + (size_t)(3 * r) * es, 3 * es) == 0);
        }
        tu_unref((rt_tensor *[]){o, x, shp, perm, b, sz, e, st1, ax, idx, ax1, mult, pads}, 13);
    }
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"hand", hand_worked},     {"c2c", c2c_lengths},        {"c2c", c2c_multi_dim},
        {"r2c", r2c},              {"c2r", c2r},                {"round_trip", round_trip},
        {"empty", empty},          {"errors", errors},          {"complex", complex_ops},
        {"complex", complex_arith}, {"complex", complex_shape_ops},
    };
    return tu_suite_main("kn_fft", cases, sizeof cases / sizeof cases[0]);
}
