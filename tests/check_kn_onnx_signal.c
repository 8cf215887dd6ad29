/* check_kn_onnx_signal.c - our own ops for ONNX's STFT and MelWeightMatrix:
 * OnnxSTFT (kernels/cpu/kn_cpu_fft.c) and OnnxMelWeightMatrix
 * (kernels/cpu/kn_cpu_onnx_signal.c), against values worked out by hand
 * from the operator definitions (comments give the arithmetic), with empty
 * tensors, hostile sizes and cancellation. */
#include <check.h>

#include "util_node.h"

static Tensorflow__NodeDef *stft_node(int has_w, int has_l, int one) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxSTFT", "stft");
    tu_attr_i(d, "has_window", has_w);
    tu_attr_i(d, "has_length", has_l);
    tu_attr_i(d, "onesided", one);
    return d;
}

/* signal, step, then the window and / or frame_length when given (NULL: absent). */
static rt_tensor *stft(rt_tensor *x, int64_t step, rt_tensor *win, int64_t len, int one) {
    rt_tensor *in[4] = {x, TU_I64(TU_SCALAR, step)};
    int nin = 2;
    if (win) in[nin++] = win;
    if (len >= 0) in[nin++] = TU_I64(TU_SCALAR, len);
    rt_tensor *o = tu_run1(stft_node(win != NULL, len >= 0, one), in, nin);
    tu_unref(in + 1, nin - 1);
    return o;
}

START_TEST(test_stft) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4);
    /* Frames of 2 every 2: (1, 2), (3, 4); 2-point DFTs 3, -1 and 7, -1;
     * one-sided keeps 2 / 2 + 1 = 2 bins. */
    rt_tensor *o = stft(x, 2, NULL, 2, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 2), 1e-6f, 3, 0, -1, 0, 7, 0, -1, 0);
    rt_tensor_unref(o);
    /* Window (0.5, 1) gives the length: frames (0.5, 2), (1.5, 4) ->
     * 2.5, -1.5 and 5.5, -2.5. */
    o = stft(x, 2, TU_F32(TU_SHAPE(2), 0.5f, 1), -1, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 2), 1e-6f, 2.5f, 0, -1.5f, 0, 5.5f, 0, -2.5f, 0);
    rt_tensor_unref(o);
    /* Frames of 3 every 1: (4 - 3) / 1 + 1 = 2 of them, 3 / 2 + 1 = 2 bins;
     * (1, 2, 3): 6 and 1 + 2w + 3w^2 with w = exp(-2 pi i / 3) =
     * -0.5 - 0.866i: -1.5 + 0.866i; (2, 3, 4): 9 and -1.5 + 0.866i. */
    o = stft(x, 1, NULL, 3, 1);
    TU_CHECK_F32(o, TU_SHAPE(1, 2, 2, 2), 1e-5f, 6, 0, -1.5f, 0.8660254f, 9, 0, -1.5f,
                 0.8660254f);
    rt_tensor_unref(o);
    /* Neither window nor length: one frame of the whole signal, all 4 bins
     * two-sided: 10, -2 + 2i, -2, -2 - 2i. */
    o = stft(x, 1, NULL, -1, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 4, 2), 1e-5f, 10, 0, -2, 2, -2, 0, -2, -2);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* A complex signal (1 + i, 2), two-sided: 3 + i, -1 + i. */
    x = TU_F32(TU_SHAPE(1, 2, 2), 1, 1, 2, 0);
    o = stft(x, 1, NULL, 2, 0);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 2, 2), 1e-6f, 3, 1, -1, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* An empty batch: an empty output of the frames' shape. */
    rt_tensor *e = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &TU_SHAPE(0, 4, 1), &e), MS_OK);
    o = stft(e, 2, NULL, 2, 1);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 2, 2, 2));
    tu_unref((rt_tensor *[]){o, e}, 2);
}
END_TEST

START_TEST(test_stft_refused) {
    rt_tensor *x = TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4), *c = TU_F32(TU_SHAPE(1, 2, 2), 1, 1, 2, 0);
    rt_tensor *in[4] = {x, TU_I64(TU_SCALAR, 1), TU_I64(TU_SCALAR, 5)};
    /* A frame longer than the signal, a hostile length, a zero step. */
    tu_run_fail(stft_node(0, 1, 1), in, 3, 1, MS_EINVAL, "1..4");
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SCALAR, (int64_t)1 << 40);
    tu_run_fail(stft_node(0, 1, 1), in, 3, 1, MS_EINVAL, "1..4");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SCALAR, 0);
    tu_run_fail(stft_node(0, 1, 1), in, 3, 1, MS_EINVAL, ">= 1");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SCALAR, 1);
    /* The window and frame_length disagree. */
    rt_tensor_unref(in[2]);
    in[2] = TU_F32(TU_SHAPE(3), 1, 1, 1);
    in[3] = TU_I64(TU_SCALAR, 2);
    tu_run_fail(stft_node(1, 1, 1), in, 4, 1, MS_EINVAL, "differs");
    /* One-sided output of a complex signal. */
    in[0] = c;
    tu_run_fail(stft_node(0, 0, 1), in, 2, 1, MS_EINVAL, "onesided");
    tu_unref(in + 1, 3);
    tu_unref((rt_tensor *[]){x, c}, 2);
}
END_TEST

/* OnnxMelWeightMatrix of (num_mel_bins, dft_length, sample_rate, lower, upper). */
static rt_tensor *mel_in[5];
static void mel_set(int64_t m, int64_t d, int64_t rate, float lo, float hi) {
    mel_in[0] = TU_I64(TU_SCALAR, m);
    mel_in[1] = TU_I32(TU_SCALAR, (int32_t)d);
    mel_in[2] = TU_I64(TU_SCALAR, rate);
    mel_in[3] = TU_F32(TU_SCALAR, lo);
    mel_in[4] = TU_F32(TU_SCALAR, hi);
}

START_TEST(test_mel) {
    /* 2 bands of a 16-point DFT (9 bins) at 16 Hz, 0..8 Hz: far below
     * 700 Hz the mel scale is nearly linear, so the 4 points are about
     * 0, 2, 4, 6 Hz (1.99, 3.99, 5.99 exactly), bins floor(17 f / 16) =
     * 0, 2, 4, 6: band 0 rises 0, .5, 1 over bins 0-2 and falls to .5 at
     * 3; band 1 rises from bin 2 to 1 at bin 4 and falls to .5 at 5. */
    mel_set(2, 16, 16, 0, 8);
    rt_tensor *o = tu_run1(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5);
    TU_CHECK_F32(o, TU_SHAPE(9, 2), 1e-6f, 0, 0, 0.5f, 0, 1, 0, 0.5f, 0.5f, 0, 1, 0, 0.5f, 0, 0, 0, 0,
                 0, 0);
    rt_tensor_unref(o);
    tu_unref(mel_in, 5);
    /* At 16 kHz, 0..8 kHz: the points are 0, 614, 1768, 3934 Hz (mel
     * 0, 707, 1414, 2121 up to 2828 over 4 steps), bins floor(17 f / 16000)
     * = 0, 0, 1, 4. Band 0's first two points share bin 0: 1 there (its
     * fall ends at bin 1). Band 1 rises to 1 at bin 1 and falls over 2, 3
     * to 2/3, 1/3. */
    mel_set(2, 16, 16000, 0, 8000);
    o = tu_run1(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5);
    TU_CHECK_F32(o, TU_SHAPE(9, 2), 1e-6f, 1, 0, 0, 1, 0, 2.0f / 3, 0, 1.0f / 3, 0, 0, 0, 0, 0, 0, 0,
                 0, 0, 0);
    rt_tensor_unref(o);
    tu_unref(mel_in, 5);
}
END_TEST

START_TEST(test_mel_refused) {
    /* 0..16 Hz at 16 Hz: the points reach bin 12 of 9 (above Nyquist). */
    mel_set(2, 16, 16, 0, 16);
    tu_run_fail(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5, 1, MS_EINVAL, "outside");
    tu_unref(mel_in, 5);
    /* Hostile sizes and counts, reversed edges. */
    mel_set((int64_t)1 << 40, 16, 16, 0, 8);
    tu_run_fail(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5, 1, MS_EINVAL, "above");
    tu_unref(mel_in, 5);
    mel_set(0, 16, 16, 0, 8);
    tu_run_fail(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5, 1, MS_EINVAL, ">= 1");
    tu_unref(mel_in, 5);
    mel_set(2, 16, 16, 8, 0);
    tu_run_fail(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5, 1, MS_EINVAL, "<=");
    tu_unref(mel_in, 5);
}
END_TEST

START_TEST(test_cancel) {
    /* Cancelled, each stops with CANCELLED; not cancelled, it runs. */
    rt_tensor *in[2] = {TU_F32(TU_SHAPE(1, 4, 1), 1, 2, 3, 4), TU_I64(TU_SCALAR, 4)};
    rt_tensor *o = tu_check_cancel(stft_node(0, 0, 1), in, 2);
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 2), 1e-5f, 10, 0, -2, 2, -2, 0);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    mel_set(2, 16, 16, 0, 8);
    o = tu_check_cancel(tu_node_new("OnnxMelWeightMatrix", "mel"), mel_in, 5);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(9, 2));
    rt_tensor_unref(o);
    tu_unref(mel_in, 5);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"stft", test_stft},       {"stft_refused", test_stft_refused},
        {"mel", test_mel},         {"mel_refused", test_mel_refused},
        {"cancel", test_cancel},
    };
    return tu_suite_main("kn_onnx_signal", cases, sizeof(cases) / sizeof(cases[0]));
}
