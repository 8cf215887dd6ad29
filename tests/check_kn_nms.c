/* check_kn_nms.c - NonMaxSuppressionV2..V5 and CombinedNonMaxSuppression
 * (kernels/cpu/kn_cpu_nms.c) on hand-worked cases: TensorFlow's three
 * clusters of boxes (two near-copies of a unit box at x 0, two at x 10, one
 * at x 100), soft-NMS scores from exp(-0.5 * iou^2 / sigma), the padded
 * outputs, empty and degenerate inputs, and 10^6 boxes against a request's
 * memory budget. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "kn_ctx.h"
#include "ms_budget.h"
#include "rt_graph.h"
#include "util_node.h"

/* The three clusters: iou(0, 1) = iou(0, 2) = iou(3, 4) = 0.9 / 1.1; boxes of
 * different clusters do not overlap. */
#define CLUSTERS                                                                                   \
    TU_F32(TU_SHAPE(6, 4), 0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0,       \
           10.1f, 1, 11.1f, 0, 100, 1, 101)
#define SCORES TU_F32(TU_SHAPE(6), 0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f)

/* Runs op on (boxes, scores, max, iou[, score_thr[, sigma]]), taking the
 * references of every input; nout outputs into out. */
static void run_nms(const char *op, int pad, rt_tensor *boxes, rt_tensor *scores, int32_t max,
                    float iou, float sthr, float sigma, rt_tensor **out, int nout) {
    Tensorflow__NodeDef *d = tu_node_new(op, "nms");
    if (pad >= 0) tu_attr_b(d, "pad_to_max_output_size", pad);
    int nin = !strcmp(op, "NonMaxSuppressionV2") ? 4 : !strcmp(op, "NonMaxSuppressionV5") ? 6 : 5;
    rt_tensor *in[6] = {boxes,
                        scores,
                        TU_I32(TU_SCALAR, max),
                        TU_F32(TU_SCALAR, iou),
                        TU_F32(TU_SCALAR, sthr),
                        TU_F32(TU_SCALAR, sigma)};
    ms_status st = tu_run(d, in, nin, out, nout);
    ck_assert_msg(st == MS_OK, "%s: %s", op, ms_errmsg());
    tu_node_free(d);
    tu_unref(in, 6);
}

static void check_sel(const char *op, rt_tensor *boxes, rt_tensor *scores, int32_t max, float iou,
                      float sthr, const int64_t *want, int nwant) {
    rt_tensor *o = NULL;
    run_nms(op, -1, boxes, scores, max, iou, sthr, 0, &o, 1);
    tu_check_int(o, RT_DT_INT32, TU_SHAPE(nwant), want, nwant);
    rt_tensor_unref(o);
}

START_TEST(test_clusters) {
    /* scores by rank: 3 (.95), 0 (.9), 1, 2 (suppressed by 0), 4 (by 3), 5 */
    const int64_t w305[] = {3, 0, 5};
    check_sel("NonMaxSuppressionV2", CLUSTERS, SCORES, 3, 0.5f, 0, w305, 3);
    check_sel("NonMaxSuppressionV3", CLUSTERS, SCORES, 3, 0.5f, 0, w305, 3);
    check_sel("NonMaxSuppressionV2", CLUSTERS, SCORES, 2, 0.5f, 0, w305, 2);
    /* the same boxes with corners flipped: IoU takes the normalised corners */
    rt_tensor *flip = TU_F32(TU_SHAPE(6, 4), 1, 1, 0, 0, 0, 0.1f, 1, 1.1f, 0, 0.9f, 1, -0.1f, 0, 10,
                             1, 11, 1, 10.1f, 0, 11.1f, 1, 101, 0, 100);
    check_sel("NonMaxSuppressionV3", flip, SCORES, 3, 0.5f, 0, w305, 3);
    /* score_threshold 0.4 drops box 5 (.3): [3, 0] even with room for 6 */
    check_sel("NonMaxSuppressionV3", CLUSTERS, SCORES, 6, 0.5f, 0.4f, w305, 2);
    /* iou_threshold 0.9: 0.818 is not > 0.9, nothing is suppressed */
    const int64_t all[] = {3, 0, 1, 2, 4, 5};
    check_sel("NonMaxSuppressionV3", CLUSTERS, SCORES, 6, 0.9f, 0, all, 6);
    /* iou 0.818 > 0.8: suppressed (strict >, as TensorFlow) */
    check_sel("NonMaxSuppressionV3", CLUSTERS, SCORES, 6, 0.8f, 0, w305, 3);
    /* score_threshold is strict: 0.3 drops the box scoring exactly 0.3 */
    check_sel("NonMaxSuppressionV3", CLUSTERS, SCORES, 6, 0.5f, 0.3f, w305, 2);
}
END_TEST

START_TEST(test_ties_nan_empty) {
    /* ten copies of one box, equal scores: the lowest index wins */
    float b[40], s[10];
    for (int i = 0; i < 10; i++) {
        b[4 * i] = 0, b[4 * i + 1] = 0, b[4 * i + 2] = 1, b[4 * i + 3] = 1;
        s[i] = 0.9f;
    }
    const int64_t w0[] = {0};
    check_sel("NonMaxSuppressionV2", tu_t(RT_DT_FLOAT, TU_SHAPE(10, 4), b, 40),
              tu_t(RT_DT_FLOAT, TU_SHAPE(10), s, 10), 3, 0.5f, 0, w0, 1);
    /* a NaN score is never > the threshold: box 3 drops out, so box 4 is kept */
    const int64_t w045[] = {0, 4, 5};
    check_sel("NonMaxSuppressionV2", CLUSTERS,
              TU_F32(TU_SHAPE(6), 0.9f, 0.75f, 0.6f, NAN, 0.5f, 0.3f), 3, 0.5f, 0, w045, 3);
    /* boxes without area overlap nothing (IoU 0): both kept */
    const int64_t w01[] = {0, 1};
    check_sel("NonMaxSuppressionV3", TU_F32(TU_SHAPE(2, 4), 0, 0, 0, 1, 0, 0, 0, 1),
              TU_F32(TU_SHAPE(2), 0.9f, 0.8f), 5, 0.5f, 0, w01, 2);
    /* no boxes; max_output_size 0 */
    rt_tensor *o = NULL;
    run_nms("NonMaxSuppressionV3", -1, tu_t(RT_DT_FLOAT, TU_SHAPE(0, 4), NULL, 0),
            tu_t(RT_DT_FLOAT, TU_SHAPE(0), NULL, 0), 4, 0.5f, 0, 0, &o, 1);
    tu_check_shape(o, RT_DT_INT32, TU_SHAPE(0));
    rt_tensor_unref(o);
    check_sel("NonMaxSuppressionV2", CLUSTERS, SCORES, 0, 0.5f, 0, w0, 0);
}
END_TEST

START_TEST(test_v4_pad) {
    rt_tensor *o[2] = {0};
    run_nms("NonMaxSuppressionV4", 1, CLUSTERS, SCORES, 6, 0.5f, 0.4f, 0, o, 2);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(6), 3, 0, 0, 0, 0, 0);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SCALAR, 2);
    tu_unref(o, 2);
    run_nms("NonMaxSuppressionV4", 0, CLUSTERS, SCORES, 6, 0.5f, 0.4f, 0, o, 2);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(2), 3, 0);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SCALAR, 2);
    tu_unref(o, 2);
    /* padded with no boxes at all: max_output_size zeros, 0 valid */
    run_nms("NonMaxSuppressionV4", 1, tu_t(RT_DT_FLOAT, TU_SHAPE(0, 4), NULL, 0),
            tu_t(RT_DT_FLOAT, TU_SHAPE(0), NULL, 0), 3, 0.5f, 0, 0, o, 2);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(3), 0, 0, 0);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SCALAR, 0);
    tu_unref(o, 2);
}
END_TEST

START_TEST(test_v5_soft) {
    /* A = [0,0,1,1] .9, B = [0,.5,1,1.5] .8 (iou(A, B) = 0.5 / 1.5 = 1/3),
     * C = [0,3,1,4] .75 apart. sigma 0.5: B's score becomes
     * 0.8 * exp(-0.5 / 0.5 * (1/3)^2) = 0.8 * exp(-1/9) = 0.7158712 < C's,
     * so C is kept before B. */
    const float wb = 0.8f * expf(-1.0f / 9.0f);
#define ABC   TU_F32(TU_SHAPE(3, 4), 0, 0, 1, 1, 0, 0.5f, 1, 1.5f, 0, 3, 1, 4)
#define ABC_S TU_F32(TU_SHAPE(3), 0.9f, 0.8f, 0.75f)
    rt_tensor *o[3] = {0};
    run_nms("NonMaxSuppressionV5", 0, ABC, ABC_S, 5, 0.5f, 0, 0.5f, o, 3);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(3), 0, 2, 1);
    ck_assert(fabsf(wb - 0.7158712f) < 1e-6f);
    TU_CHECK_F32(o[1], TU_SHAPE(3), 1e-6f, 0.9f, 0.75f, wb);
    TU_CHECK_INT(o[2], RT_DT_INT32, TU_SCALAR, 3);
    tu_unref(o, 3);
    /* score_threshold 0.72: B's decayed score is not > it, B is dropped */
    run_nms("NonMaxSuppressionV5", 1, ABC, ABC_S, 4, 0.5f, 0.72f, 0.5f, o, 3);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(4), 0, 2, 0, 0);
    TU_CHECK_F32(o[1], TU_SHAPE(4), 0, 0.9f, 0.75f, 0, 0);
    TU_CHECK_INT(o[2], RT_DT_INT32, TU_SCALAR, 2);
    tu_unref(o, 3);
    /* sigma 0 is hard NMS; iou 1/3 > 0.3 suppresses B */
    run_nms("NonMaxSuppressionV5", 0, ABC, ABC_S, 5, 0.3f, 0, 0, o, 3);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(2), 0, 2);
    TU_CHECK_F32(o[1], TU_SHAPE(2), 0, 0.9f, 0.75f);
    tu_unref(o, 3);
    /* the three clusters, sigma 0.5: 1 and 2 decay by exp(-(0.9/1.1)^2) =
     * 0.5122 after box 0, 4 the same after box 3 */
    const float k = expf(-(0.9f / 1.1f) * (0.9f / 1.1f));
    run_nms("NonMaxSuppressionV5", 0, CLUSTERS, SCORES, 6, 0.5f, 0, 0.5f, o, 3);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(6), 3, 0, 1, 5, 4, 2);
    TU_CHECK_F32(o[1], TU_SHAPE(6), 1e-4f, 0.95f, 0.9f, 0.75f * k, 0.3f, 0.5f * k,
                 0.6f * k * expf(-powf(0.8f / 1.2f, 2)));
    tu_unref(o, 3);
}
END_TEST

START_TEST(test_errors) {
    rt_tensor *in[5] = {CLUSTERS, SCORES, TU_I32(TU_SCALAR, -1), TU_F32(TU_SCALAR, 0.5f),
                        TU_F32(TU_SCALAR, 0)};
    tu_run_fail(tu_node_new("NonMaxSuppressionV3", "neg"), in, 5, 1, MS_EINVAL, "max_output_size");
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(TU_SHAPE(1), 3);
    tu_run_fail(tu_node_new("NonMaxSuppressionV3", "rank"), in, 5, 1, MS_EINVAL, "0-D");
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(TU_SCALAR, 3);
    rt_tensor_unref(in[3]);
    in[3] = TU_F32(TU_SCALAR, 1.5f);
    tu_run_fail(tu_node_new("NonMaxSuppressionV3", "iou"), in, 5, 1, MS_EINVAL, "[0, 1]");
    rt_tensor_unref(in[3]);
    in[3] = TU_F32(TU_SCALAR, 0.5f);
    rt_tensor_unref(in[1]);
    in[1] = TU_F32(TU_SHAPE(5), 1, 2, 3, 4, 5);
    tu_run_fail(tu_node_new("NonMaxSuppressionV3", "shape"), in, 5, 1, MS_EINVAL, "incompatible");
    /* half boxes / scores (attr T) are refused by name before running */
    Tensorflow__NodeDef *d = tu_node_new("NonMaxSuppressionV3", "half");
    tu_attr_type(d, "T", RT_DT_HALF);
    tu_run_fail(d, in, 5, 1, MS_ENOTSUP, "float32");
    tu_unref(in, 5);
}
END_TEST

static void run_comb(int pad, int clip, int32_t per_class, int32_t total, rt_tensor **o) {
    /* boxes [1, 3, 1, 4]: b0 unit box, b1 overlapping it (iou .818), b2 apart */
    rt_tensor *in[6] = {TU_F32(TU_SHAPE(1, 3, 1, 4), 0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3),
                        TU_F32(TU_SHAPE(1, 3, 2), 0.9f, 0.2f, 0.8f, 0.7f, 0.3f, 0.6f),
                        TU_I32(TU_SCALAR, per_class),
                        TU_I32(TU_SCALAR, total),
                        TU_F32(TU_SCALAR, 0.5f),
                        TU_F32(TU_SCALAR, 0.25f)};
    Tensorflow__NodeDef *d = tu_node_new("CombinedNonMaxSuppression", "comb");
    tu_attr_b(d, "pad_per_class", pad);
    tu_attr_b(d, "clip_boxes", clip);
    ms_status st = tu_run(d, in, 6, o, 4);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    tu_node_free(d);
    tu_unref(in, 6);
}

START_TEST(test_combined) {
    /* class 0 scores (.9, .8, .3): keeps b0 (.9), b1 suppressed, b2 (.3);
     * class 1 (.2, .7, .6): .2 is not > .25; keeps b1 (.7) and b2 (.6).
     * Across classes: .9 c0 b0, .7 c1 b1, .6 c1 b2, .3 c0 b2. */
    rt_tensor *o[4] = {0};
    run_comb(0, 0, 2, 3, o);
    TU_CHECK_F32(o[0], TU_SHAPE(1, 3, 4), 0, 0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 3), 0, 0.9f, 0.7f, 0.6f);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 3), 0, 0, 1, 1);
    TU_CHECK_INT(o[3], RT_DT_INT32, TU_SHAPE(1), 3);
    tu_unref(o, 4);
    /* clip_boxes, room for 6: all four, then zeros */
    run_comb(0, 1, 2, 6, o);
    TU_CHECK_F32(o[0], TU_SHAPE(1, 6, 4), 0, 0, 0, 1, 1, 0, 0.1f, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0,
                 0, 0, 0, 0, 0, 0, 0);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 6), 0, 0.9f, 0.7f, 0.6f, 0.3f, 0, 0);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 6), 0, 0, 1, 1, 0, 0, 0);
    TU_CHECK_INT(o[3], RT_DT_INT32, TU_SHAPE(1), 4);
    tu_unref(o, 4);
    /* pad_per_class: min(6, 2 per class * 2 classes) = 4 rows; per class 1 */
    run_comb(1, 1, 2, 6, o);
    tu_check_shape(o[0], RT_DT_FLOAT, TU_SHAPE(1, 4, 4));
    TU_CHECK_INT(o[3], RT_DT_INT32, TU_SHAPE(1), 4);
    tu_unref(o, 4);
    run_comb(1, 1, 1, 6, o);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 2), 0, 0.9f, 0.7f);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 2), 0, 0, 1);
    TU_CHECK_INT(o[3], RT_DT_INT32, TU_SHAPE(1), 2);
    tu_unref(o, 4);
    /* boxes per class (q = 2): box 1 is box 0 for class 0 (suppressed) and
     * apart for class 1 (kept) */
    rt_tensor *in[6] = {
        TU_F32(TU_SHAPE(1, 2, 2, 4), 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 5, 1, 6),
        TU_F32(TU_SHAPE(1, 2, 2), 0.9f, 0.8f, 0.7f, 0.6f),
        TU_I32(TU_SCALAR, 2),
        TU_I32(TU_SCALAR, 4),
        TU_F32(TU_SCALAR, 0.5f),
        TU_F32(TU_SCALAR, 0)};
    Tensorflow__NodeDef *d = tu_node_new("CombinedNonMaxSuppression", "comb_q");
    tu_attr_b(d, "clip_boxes", 0);
    ck_assert_msg(tu_run(d, in, 6, o, 4) == MS_OK, "%s", ms_errmsg());
    TU_CHECK_F32(o[0], TU_SHAPE(1, 4, 4), 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 5, 1, 6, 0, 0, 0, 0);
    TU_CHECK_F32(o[1], TU_SHAPE(1, 4), 0, 0.9f, 0.8f, 0.6f, 0);
    TU_CHECK_F32(o[2], TU_SHAPE(1, 4), 0, 0, 1, 1, 0);
    TU_CHECK_INT(o[3], RT_DT_INT32, TU_SHAPE(1), 3);
    tu_unref(o, 4);
    tu_node_free(d);
    tu_unref(in, 6);
}
END_TEST

/* 10^6 boxes through the kernel with a request budget: the candidate queue
 * (12 bytes a box) is refused by a 4 MiB budget naming the limit, and fits a
 * 64 MiB one, which holds every byte again afterwards. All boxes are one unit
 * box, so the first kept suppresses the rest. */
START_TEST(test_million) {
    enum { NB = 1000000 };
    float *b = malloc(sizeof(float) * 4 * NB), *s = malloc(sizeof(float) * NB);
    ck_assert(b && s);
    for (int i = 0; i < NB; i++) {
        b[4 * i] = 0, b[4 * i + 1] = 0, b[4 * i + 2] = 1, b[4 * i + 3] = 1;
        s[i] = (float)(((int64_t)i * 7919) % NB) / NB;
    }
    rt_tensor *in[5] = {tu_t(RT_DT_FLOAT, TU_SHAPE(NB, 4), b, 4 * NB),
                        tu_t(RT_DT_FLOAT, TU_SHAPE(NB), s, NB), TU_I32(TU_SCALAR, 100),
                        TU_F32(TU_SCALAR, 0.5f), TU_F32(TU_SCALAR, -1)};
    free(b);
    free(s);
    kn_backend *be = kn_cpu_backend_new(1);
    const kn_kernel *k = kn_backend_kernel(be, "NonMaxSuppressionV3");
    ck_assert_ptr_nonnull(k);
    Tensorflow__NodeDef *d = tu_node_new("NonMaxSuppressionV3", "big");
    kn_node node = {.name = "big",
                    .op = "NonMaxSuppressionV3",
                    .def = d,
                    .attrs = &rt_nodedef_attrs,
                    .nin = 5,
                    .nout = 1};
    ms_budget bud;
    ms_budget_init(&bud, (uint64_t)4 << 20);
    kn_ctx ctx = {.nthreads = 1, .budget = &bud};
    rt_tensor *o = NULL;
    ms_status st = k->compute(&ctx, &node, NULL, in, &o);
    ck_assert_int_eq(st, MS_ENOMEM);
    ck_assert_ptr_null(o);
    ck_assert_msg(strstr(ms_errmsg(), "big") && strstr(ms_errmsg(), "max_request_memory_bytes"),
                  "%s", ms_errmsg());
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    ms_budget_init(&bud, (uint64_t)64 << 20);
    st = k->compute(&ctx, &node, NULL, in, &o);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    /* the best score is (NB - 1) / NB, at the i with i * 7919 = NB - 1 mod NB */
    int64_t best = 0;
    for (int64_t i = 0; i < NB; i++)
        if ((i * 7919) % NB == NB - 1) best = i;
    tu_check_int(o, RT_DT_INT32, TU_SHAPE(1), &best, 1);
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    rt_tensor_unref(o);
    o = NULL;
    /* a cancelled request stops inside the loop (2 IoUs a candidate here:
     * the first look comes after 2^19 of the 10^6) and gives its bytes back */
    atomic_int cancelled = 1;
    ctx.cancelled = &cancelled;
    st = k->compute(&ctx, &node, NULL, in, &o);
    ck_assert_int_eq(st, MS_ECANCELED);
    ck_assert_ptr_null(o);
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    tu_node_free(d);
    tu_unref(in, 5);
    kn_backend_free(be);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"clusters", test_clusters}, {"ties_nan_empty", test_ties_nan_empty},
        {"v4_pad", test_v4_pad},     {"v5_soft", test_v5_soft},
        {"errors", test_errors},     {"combined", test_combined},
        {"million", test_million},
    };
    return tu_suite_main("kn_nms", cases, sizeof(cases) / sizeof(cases[0]));
}
