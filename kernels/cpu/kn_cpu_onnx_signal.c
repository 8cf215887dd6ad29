/* kn_cpu_onnx_signal.c - our own op for ONNX's MelWeightMatrix (emitted by
 * runtime/onnx; a SavedModel holding it runs in dcmserve only, docs/onnx.md):
 *
 *   OnnxMelWeightMatrix num_mel_bins, dft_length, sample_rate (int32 /
 *                      int64, one value each), lower_edge_hertz,
 *                      upper_edge_hertz (float, one value each) -> float
 *                      (dft_length / 2 + 1, num_mel_bins): triangles of peak
 *                      1 (ONNX MelWeightMatrix 17).
 *
 * The arithmetic is that of ONNX's reference implementation, in double:
 * num_mel_bins + 2 points evenly spaced on the mel scale
 * mel(f) = 2595 log10(1 + f / 700) between the two edges (the step divides
 * the range by num_mel_bins + 2), each mapped to spectrogram bin
 * floor((dft_length + 1) f / sample_rate); band i rises linearly from point
 * i to point i + 1 and falls to point i + 2 (a band whose first two points
 * share a bin is 1 there). A point outside 0..dft_length / 2 (the last one:
 * outside 0..dft_length / 2 + 1, as it only ends the last band) fails the
 * run with INVALID_ARGUMENT (an upper edge above the Nyquist frequency).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* Largest matrix built: far above a real model's (128 bands of a 4096-point
 * DFT are 2^18), low enough that a hostile request is refused by name
 * before the budget is asked. */
#define MEL_MAX_VALUES ((int64_t)1 << 30)

static ms_status one_int(const kn_node *node, const rt_tensor *t, const char *what, int64_t *v) {
    int count = 0;
    ms_status st = kn__read_ints(node, t, what, v, 1, &count);
    if (st == MS_OK && count != 1) return KN_EINVAL(node, "%s must be one integer", what);
    return st;
}

static ms_status one_float(const kn_node *node, const rt_tensor *t, const char *what, double *v) {
    if (t->dtype != RT_DT_FLOAT || t->nelem != 1)
        return KN_EINVAL(node, "%s must be one float, got %s %s", what, rt_dtype_name(t->dtype),
                         kn__shp(&t->shape));
    *v = *(const float *)t->data;
    return MS_OK;
}

static ms_status mel_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 5);
    if (st != MS_OK) return st;
    int64_t M = 0, D = 0, rate = 0;
    double lo = 0, hi = 0;
    if ((st = one_int(node, in[0], "num_mel_bins", &M)) != MS_OK ||
        (st = one_int(node, in[1], "dft_length", &D)) != MS_OK ||
        (st = one_int(node, in[2], "sample_rate", &rate)) != MS_OK ||
        (st = one_float(node, in[3], "lower_edge_hertz", &lo)) != MS_OK ||
        (st = one_float(node, in[4], "upper_edge_hertz", &hi)) != MS_OK)
        return st;
    if (M < 1 || D < 1 || rate < 1 || !(lo >= 0) || !(hi >= lo) || isinf(hi))
        return KN_EINVAL(node,
                         "num_mel_bins %lld, dft_length %lld, sample_rate %lld, edges %g..%g: want "
                         "the counts >= 1 and 0 <= lower_edge_hertz <= upper_edge_hertz",
                         (long long)M, (long long)D, (long long)rate, lo, hi);
    int64_t bins = D / 2 + 1;
    if (M > MEL_MAX_VALUES || (double)M * (double)bins > (double)MEL_MAX_VALUES)
        return KN_EINVAL(node, "a %lld x %lld mel matrix is above the %lld values this kernel builds",
                         (long long)bins, (long long)M, (long long)MEL_MAX_VALUES);
    int64_t *pt = malloc((size_t)(M + 2) * sizeof(int64_t));
    if (pt == NULL) return kn__errf(MS_ENOMEM, node, "out of memory for %lld bands", (long long)M);
    double lmel = 2595.0 * log10(1.0 + lo / 700.0), hmel = 2595.0 * log10(1.0 + hi / 700.0);
    double step = (hmel - lmel) / (double)(M + 2);
    for (int64_t i = 0; i < M + 2 && st == MS_OK; i++) {
        double f = 700.0 * (pow(10.0, ((double)i * step + lmel) / 2595.0) - 1.0);
        double b = floor((double)(D + 1) * f / (double)rate);
        /* The last point only bounds the last band (exclusive): it may be bins. */
        if (!(b >= 0) || b > (double)(i == M + 1 ? bins : bins - 1))
            st = KN_EINVAL(node,
                           "mel point %lld (%g Hz) falls in spectrogram bin %g, outside 0..%lld "
                           "(upper_edge_hertz above sample_rate / 2?)",
                           (long long)i, f, b, (long long)(bins - 1));
        else
            pt[i] = (int64_t)b;
    }
    rt_shape os = {.rank = 2, .dim = {bins, M}};
    if (st == MS_OK) st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0]);
    if (st == MS_OK) {
        float *w = out[0]->data;
        memset(w, 0, (size_t)(bins * M) * sizeof(float));
        for (int64_t i = 0; i < M && st == MS_OK; i++) {
            if (i % 256 == 0 && kn_ctx_cancelled(ctx)) {
                st = kn__errf(MS_ECANCELED, node, "cancelled");
                break;
            }
            int64_t l = pt[i], c = pt[i + 1], r = pt[i + 2];
            if (c == l) w[c * M + i] = 1;
            for (int64_t j = l; c > l && j <= c; j++)
                w[j * M + i] = (float)((double)(j - l) / (double)(c - l));
            for (int64_t j = c; r > c && j < r; j++)
                w[j * M + i] = (float)((double)(r - j) / (double)(r - c));
        }
    }
    free(pt);
    return st;
}

const kn_kernel kn_cpu_onnx_signal_kernels[] = {
    {.op = "OnnxMelWeightMatrix", .compute = mel_compute},
    {.op = NULL},
};
