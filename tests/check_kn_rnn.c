/* check_kn_rnn.c - OnnxRNN (kernels/cpu/kn_cpu_rnn.c), ONNX's RNN, GRU and
 * LSTM, against values worked out by hand from the ONNX operator
 * definitions (comments give the arithmetic), with empty sequences and
 * batches and malformed inputs. */
#include <check.h>
#include <math.h>

#include "util_node.h"

enum { RNN, GRU, LSTM };
enum { B_ = 1, LENS = 2, H0 = 4, C0 = 8, P_ = 16 };

/* Runs OnnxRNN on in[0..nin) (X, W, R, then those of `present`), checking it
 * succeeds; o[0..3) = Y, Y_h, Y_c. Frees the inputs. */
static void run(int cell, int dir, int layout, int64_t hidden, int lbr, int present,
                const int64_t *acts, int nacts, rt_tensor **in, int nin, rt_tensor **o) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxRNN", "rnn");
    tu_attr_i(d, "cell", cell);
    tu_attr_i(d, "direction", dir);
    tu_attr_i(d, "layout", layout);
    tu_attr_i(d, "hidden_size", hidden);
    tu_attr_i(d, "linear_before_reset", lbr);
    tu_attr_i(d, "present", present);
    tu_attr_ilist(d, "acts", nacts, acts);
    ck_assert_int_eq(tu_run(d, in, nin, o, 3), MS_OK);
    tu_node_free(d);
    tu_unref(in, nin);
}

START_TEST(test_lstm_one_step) {
    /* I = H = 1, x = 1, W (i, o, f, c) = (0, 0, 0, 1), R = 0, c0 = 2,
     * h0 = 0: i = o = f = sigmoid(0) = 0.5, c~ = tanh(1) = 0.761594,
     * c = 0.5 * 2 + 0.5 * 0.761594 = 1.380797, h = 0.5 * tanh(c) = 0.440565. */
    const int64_t acts[3] = {0, 1, 1};
    rt_tensor *o[3];
    rt_tensor *in[5] = {TU_F32(TU_SHAPE(1, 1, 1), 1), TU_F32(TU_SHAPE(1, 4, 1), 0, 0, 0, 1),
                        TU_F32(TU_SHAPE(1, 4, 1), 0, 0, 0, 0), TU_F32(TU_SHAPE(1, 1, 1), 0),
                        TU_F32(TU_SHAPE(1, 1, 1), 2)};
    run(LSTM, 0, 0, 1, 0, H0 | C0, acts, 3, in, 5, o);
    TU_CHECK_F32(o[0], TU_SHAPE(1, 1, 1, 1), 1e-5f, 0.440565f);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 1e-5f, 0.440565f);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 1, 1), 1e-5f, 1.380797f);
    tu_unref(o, 3);
    /* Peephole P (i, o, f) = (0, 1, 0): o = sigmoid(1 * c) = 0.799119, so
     * h = 0.799119 * tanh(1.380797) = 0.704127. */
    rt_tensor *in2[6] = {
        TU_F32(TU_SHAPE(1, 1, 1), 1),          TU_F32(TU_SHAPE(1, 4, 1), 0, 0, 0, 1),
        TU_F32(TU_SHAPE(1, 4, 1), 0, 0, 0, 0), TU_F32(TU_SHAPE(1, 1, 1), 0),
        TU_F32(TU_SHAPE(1, 1, 1), 2),          TU_F32(TU_SHAPE(1, 3), 0, 1, 0)};
    run(LSTM, 0, 0, 1, 0, H0 | C0 | P_, acts, 3, in2, 6, o);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 1e-5f, 0.704127f);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 1, 1), 1e-5f, 1.380797f);
    tu_unref(o, 3);
}
END_TEST

START_TEST(test_gru_one_step) {
    /* x = 1, W (z, r, h) = (0, 0, 1), R = (0, 0, 2), h0 = 1: z = r = 0.5.
     * linear_before_reset 0: h~ = tanh(1 + (0.5 * 1) * 2) = tanh(2),
     * h = 0.5 * tanh(2) + 0.5 * 1 = 0.982014. With Rb_h = 1 and
     * linear_before_reset 1: h~ = tanh(1 + 0.5 * (1 * 2 + 1)) = tanh(2.5),
     * h = 0.993307 (linear_before_reset 0 would give tanh(3)). */
    const int64_t acts[2] = {0, 1};
    rt_tensor *o[3];
    rt_tensor *in[4] = {TU_F32(TU_SHAPE(1, 1, 1), 1), TU_F32(TU_SHAPE(1, 3, 1), 0, 0, 1),
                        TU_F32(TU_SHAPE(1, 3, 1), 0, 0, 2), TU_F32(TU_SHAPE(1, 1, 1), 1)};
    run(GRU, 0, 0, 1, 0, H0, acts, 2, in, 4, o);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 1e-5f, 0.982014f);
    tu_unref(o, 3);
    for (int lbr = 0; lbr < 2; lbr++) {
        rt_tensor *in2[5] = {TU_F32(TU_SHAPE(1, 1, 1), 1), TU_F32(TU_SHAPE(1, 3, 1), 0, 0, 1),
                             TU_F32(TU_SHAPE(1, 3, 1), 0, 0, 2),
                             TU_F32(TU_SHAPE(1, 6), 0, 0, 0, 0, 0, 1),
                             TU_F32(TU_SHAPE(1, 1, 1), 1)};
        run(GRU, 0, 0, 1, lbr, B_ | H0, acts, 2, in2, 5, o);
        TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 1e-5f, lbr ? 0.993307f : 0.5f * tanhf(3) + 0.5f);
        tu_unref(o, 3);
    }
}
END_TEST

START_TEST(test_rnn_directions) {
    /* RNN with Relu, W = R = 1, x = 1, 2, 3: forward 1, 3, 6; reverse
     * 6, 5, 3 (from the end). Bidirectional, layout 0: Y (T, 2, B, H). */
    const int64_t relu[2] = {2, 2};
    rt_tensor *o[3];
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(3, 1, 1), 1, 2, 3), TU_F32(TU_SHAPE(2, 1, 1), 1, 1),
                        TU_F32(TU_SHAPE(2, 1, 1), 1, 1)};
    run(RNN, 2, 0, 1, 0, 0, relu, 2, in, 3, o);
    TU_CHECK_F32(o[0], TU_SHAPE(3, 2, 1, 1), 0, 1, 6, 3, 5, 6, 3);
    TU_CHECK_F32(o[1], TU_SHAPE(2, 1, 1), 0, 6, 6);
    tu_unref(o, 3);
    /* Sequence length 2, layout 1 (batch first): forward 1, 3 then a zero
     * step, Y_h 3; reverse starts at step 1: 2, then 1 + 2 = 3. */
    rt_tensor *in2[4] = {TU_F32(TU_SHAPE(1, 3, 1), 1, 2, 3), TU_F32(TU_SHAPE(2, 1, 1), 1, 1),
                         TU_F32(TU_SHAPE(2, 1, 1), 1, 1), TU_I32(TU_SHAPE(1), 2)};
    run(RNN, 2, 1, 1, 0, LENS, relu, 2, in2, 4, o);
    TU_CHECK_F32(o[0], TU_SHAPE(1, 3, 2, 1), 0, 1, 3, 3, 2, 0, 0);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 2, 1), 0, 3, 3);
    tu_unref(o, 3);
    /* tanh(1 * 0.5 + 1 * 0.25) with h0 = 1. */
    const int64_t th[1] = {1};
    rt_tensor *in3[4] = {TU_F32(TU_SHAPE(1, 1, 1), 1), TU_F32(TU_SHAPE(1, 1, 1), 0.5f),
                         TU_F32(TU_SHAPE(1, 1, 1), 0.25f), TU_F32(TU_SHAPE(1, 1, 1), 1)};
    run(RNN, 0, 0, 1, 0, H0, th, 1, in3, 4, o);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 1e-5f, 0.635149f);
    tu_unref(o, 3);
}
END_TEST

START_TEST(test_empty_and_bad) {
    /* No steps: Y is (0, 1, B, H) and Y_h the initial state; no batch: all
     * empty. */
    const int64_t acts[3] = {0, 1, 1};
    rt_tensor *o[3];
    rt_tensor *in[4] = {tu_t(RT_DT_FLOAT, TU_SHAPE(0, 1, 1), NULL, 0),
                        TU_F32(TU_SHAPE(1, 4, 1), 1, 1, 1, 1),
                        TU_F32(TU_SHAPE(1, 4, 1), 1, 1, 1, 1), TU_F32(TU_SHAPE(1, 1, 1), 7)};
    run(LSTM, 0, 0, 1, 0, H0, acts, 3, in, 4, o);
    tu_check_shape(o[0], RT_DT_FLOAT, TU_SHAPE(0, 1, 1, 1));
    TU_CHECK_F32(o[1], TU_SHAPE(1, 1, 1), 0, 7);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 1, 1), 0, 0);
    tu_unref(o, 3);
    rt_tensor *in2[3] = {tu_t(RT_DT_FLOAT, TU_SHAPE(2, 0, 1), NULL, 0),
                         TU_F32(TU_SHAPE(1, 4, 1), 1, 1, 1, 1),
                         TU_F32(TU_SHAPE(1, 4, 1), 1, 1, 1, 1)};
    run(LSTM, 0, 0, 1, 0, 0, acts, 3, in2, 3, o);
    tu_check_shape(o[0], RT_DT_FLOAT, TU_SHAPE(2, 1, 0, 1));
    tu_check_shape(o[1], RT_DT_FLOAT, TU_SHAPE(1, 0, 1));
    tu_unref(o, 3);
    /* W of the wrong gate count; a sequence length past T. */
    rt_tensor *bad[4] = {TU_F32(TU_SHAPE(1, 1, 1), 1), TU_F32(TU_SHAPE(1, 3, 1), 1, 1, 1),
                         TU_F32(TU_SHAPE(1, 3, 1), 1, 1, 1), TU_I64(TU_SHAPE(1), 2)};
    Tensorflow__NodeDef *d = tu_node_new("OnnxRNN", "rnn_bad");
    tu_attr_i(d, "cell", LSTM);
    tu_attr_i(d, "hidden_size", 1);
    tu_attr_ilist(d, "acts", 3, acts);
    tu_run_fail(d, bad, 3, 3, MS_EINVAL, "do not fit");
    d = tu_node_new("OnnxRNN", "rnn_len");
    tu_attr_i(d, "cell", GRU);
    tu_attr_i(d, "hidden_size", 1);
    tu_attr_i(d, "present", LENS);
    tu_attr_ilist(d, "acts", 2, acts);
    tu_run_fail(d, bad, 4, 3, MS_EINVAL, "outside");
    tu_unref(bad, 4);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"lstm_one_step", test_lstm_one_step},
        {"gru_one_step", test_gru_one_step},
        {"rnn_directions", test_rnn_directions},
        {"empty_and_bad", test_empty_and_bad},
    };
    return tu_suite_main("kn_rnn", cases, sizeof(cases) / sizeof(cases[0]));
}
