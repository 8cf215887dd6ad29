/* check_kn_robust.c - every CPU kernel of the elementwise, shape, reduce, nn,
 * fast, conv3d, einsum, sparse, math, space, nms, resize, unique, string and regex
 * tables, fed random small inputs (shapes, dtypes, index values, attrs), must either
 * succeed with all outputs set or fail with a message naming the node: never crash,
 * never leak (run it under the ASan build). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "util_node.h"

static unsigned rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static rt_tensor *rand_tensor(unsigned *seed) {
    static const rt_dtype dts[] = {RT_DT_FLOAT, RT_DT_FLOAT, RT_DT_FLOAT,  RT_DT_INT32, RT_DT_INT32,
                                   RT_DT_INT64, RT_DT_BOOL,  RT_DT_DOUBLE, RT_DT_UINT8};
    rt_dtype dt = dts[rnd(seed) % (sizeof(dts) / sizeof(dts[0]))];
    if (rnd(seed) % 3 == 0) dt = RT_DT_FLOAT;
    rt_shape s = {.rank = (int)(rnd(seed) % 7)};
    if (s.rank == 6) s.rank = 4; /* convolutions and pools want rank 4 */
    for (int d = 0; d < s.rank; d++)
        s.dim[d] = rnd(seed) % 8 == 0 ? 0 : 1 + rnd(seed) % 3;
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) {
        int v = (int)(rnd(seed) % 9) - 3; /* small values, some negative, as indices */
        switch (dt) {
        case RT_DT_FLOAT:
            ((float *)t->data)[i] = (float)v * 0.5f;
            break;
        case RT_DT_DOUBLE:
            ((double *)t->data)[i] = v * 0.5;
            break;
        case RT_DT_INT32:
            ((int32_t *)t->data)[i] = v;
            break;
        case RT_DT_INT64:
            ((int64_t *)t->data)[i] = v;
            break;
        default:
            ((uint8_t *)t->data)[i] = (uint8_t)(v & 1);
            break;
        }
    }
    return t;
}

/* Window attrs mostly valid for an input of rank `xr`, the rest random. */
static void rand_attrs(Tensorflow__NodeDef *d, int nout, int xr, unsigned *seed) {
    static const char *const pads[] = {"SAME", "VALID", "EXPLICIT", "FULL"};
    static const char *const fmts[] = {"NHWC", "NCHW", "NDHWC", "NCDHW", "XY"};
    unsigned r = rnd(seed);
    int five = rnd(seed) % 5 == 0 ? xr != 5 : xr == 5;
    if (r & 1 || rnd(seed) % 4)
        tu_attr_s(d, "padding", pads[rnd(seed) % 5 < 4 ? rnd(seed) % 2 : 2 + rnd(seed) % 2]);
    if (r & 2 && rnd(seed) % 2) tu_attr_s(d, "data_format", fmts[rnd(seed) % 5]);
    if (r & 4 || rnd(seed) % 4) {
        int64_t s = 1 + rnd(seed) % 2;
        if (!five)
            tu_attr_ints(d, "strides", 1, s, s, 1);
        else
            tu_attr_ints(d, "strides", 1, s, s, s, 1);
    }
    if (r & 8 || rnd(seed) % 4) {
        int64_t k = 1 + rnd(seed) % 3;
        if (!five)
            tu_attr_ints(d, "ksize", 1, k, k, 1);
        else
            tu_attr_ints(d, "ksize", 1, k, k, k, 1);
    }
    if (r & 16 && !five) tu_attr_ints(d, "dilations", 1, 1 + rnd(seed) % 2, 1 + rnd(seed) % 2, 1);
    if (r & 32) tu_attr_ints(d, "explicit_paddings", 0, 0, 1, 0, 0, 1, 0, 0);
    if (r & 64) tu_attr_b(d, "keep_dims", (int)(rnd(seed) & 1));
    if (r & 128) tu_attr_i(d, "axis", (int64_t)(rnd(seed) % 5) - 2);
    if (r & 256) tu_attr_type(d, "DstT", (rnd(seed) & 1) ? RT_DT_INT32 : RT_DT_HALF);
    if (r & 512) tu_attr_s(d, "mode", (rnd(seed) & 1) ? "REFLECT" : "SYMMETRIC");
    if (r & 1024 || rnd(seed) % 2) tu_attr_b(d, "is_training", 0);
    if (r & 2048) tu_attr_b(d, "align_corners", (int)(rnd(seed) & 1));
    if (r & 4096) tu_attr_b(d, "half_pixel_centers", (int)(rnd(seed) & 1));
    if (r & 8192) tu_attr_i(d, "shrink_axis_mask", rnd(seed) % 4);
    if (r & 16384) tu_attr_i(d, "ellipsis_mask", rnd(seed) % 4);
    if (r & 32768) tu_attr_i(d, "new_axis_mask", rnd(seed) % 4);
    if (r & 65536) tu_attr_ints(d, "squeeze_dims", (int64_t)(rnd(seed) % 3) - 1);
    tu_attr_i(d, "num_split", nout);
    tu_attr_i(d, "num", nout);
}

static rt_tensor *new_t(rt_dtype dt, rt_shape s, unsigned *seed) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) {
        int v = (int)(rnd(seed) % 6) - 1;
        /* With KN_FUZZ_EXTREME set, now and then an extreme index or size (it
         * may ask for huge outputs: run with ASAN_OPTIONS=allocator_may_return_null=1). */
        static const int64_t extreme[] = {INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, 100000};
        int64_t big = v;
        if (getenv("KN_FUZZ_EXTREME") && rnd(seed) % 40 == 0) big = extreme[rnd(seed) % 5];
        switch (dt) {
        case RT_DT_FLOAT:
            ((float *)t->data)[i] = (float)v * 0.5f;
            break;
        case RT_DT_DOUBLE:
            ((double *)t->data)[i] = v * 0.5;
            break;
        case RT_DT_INT32:
            ((int32_t *)t->data)[i] = (int32_t)big;
            break;
        case RT_DT_INT64:
            ((int64_t *)t->data)[i] = big;
            break;
        default:
            ((uint8_t *)t->data)[i] = (uint8_t)(v & 1);
            break;
        }
    }
    return t;
}

/* Input i given input 0: often shaped to fit (same shape, a broadcastable
 * suffix, an index vector over its dims, or the pieces a convolution, batch
 * norm or resize wants), sometimes anything. */
static rt_tensor *related(const char *op, int i, const rt_tensor *x, unsigned *seed) {
    unsigned r = rnd(seed) % 10;
    rt_shape s = x->shape;
    int r4 = x->shape.rank >= 4;
    if (r4 && i == 1 && (strstr(op, "Conv") || strstr(op, "Depthwise")) && r < 7) {
        /* filter [k.., C, M] with C the last input dim (NHWC) */
        rt_shape f = {.rank = x->shape.rank};
        for (int d = 0; d < f.rank - 2; d++)
            f.dim[d] = 1 + rnd(seed) % 3;
        f.dim[f.rank - 2] = x->shape.dim[x->shape.rank - 1];
        f.dim[f.rank - 1] = 1 + rnd(seed) % 3;
        return new_t(RT_DT_FLOAT, f, seed);
    }
    if (strncmp(op, "FusedBatchNorm", 14) == 0 && x->shape.rank > 0 && r < 8) {
        rt_shape v = {.rank = 1, .dim = {x->shape.dim[x->shape.rank - 1]}};
        rt_tensor *t = new_t(RT_DT_FLOAT, v, seed);
        for (int64_t j = 0; j < t->nelem; j++)
            rt_tensor_f32(t)[j] = 0.5f + (float)j;
        return t;
    }
    if (strncmp(op, "Resize", 6) == 0 && i == 1 && r < 8) {
        rt_shape v = {.rank = 1, .dim = {2}};
        rt_tensor *t = new_t(RT_DT_INT32, v, seed);
        for (int j = 0; j < 2; j++)
            ((int32_t *)t->data)[j] = 1 + (int32_t)(rnd(seed) % 5);
        return t;
    }
    if (strcmp(op, "CropAndResize") == 0 && r < 8) {
        /* boxes [n, 4] (values -1.5 .. 2.5: flipped and outside boxes),
         * box_ind [n] mostly inside the batch, crop_size int32 [2] */
        /* n from x: the same for boxes and box_ind */
        int64_t n = x->nelem % 4, batch = x->shape.rank > 0 ? x->shape.dim[0] : 1;
        rt_shape v = i == 1 ? (rt_shape){.rank = 2, .dim = {n, 4}}
                            : (rt_shape){.rank = 1, .dim = {i == 2 ? n : 2}};
        rt_tensor *t = new_t(i == 1 ? RT_DT_FLOAT : RT_DT_INT32, v, seed);
        for (int64_t j = 0; i > 1 && j < t->nelem; j++)
            ((int32_t *)t->data)[j] =
                i == 3 ? 1 + (int32_t)(rnd(seed) % 4)
                       : (int32_t)(rnd(seed) % (uint64_t)(batch > 0 ? batch + 1 : 1));
        return t;
    }
    if (strstr(op, "RFFT") && i == 1 && r < 8) {
        /* fft_length: int32 [rank of the transform], 0 .. 8 (crop, pad, empty) */
        rt_shape v = {.rank = 1, .dim = {strstr(op, "2D") ? 2 : strstr(op, "3D") ? 3 : 1}};
        rt_tensor *t = new_t(RT_DT_INT32, v, seed);
        for (int64_t j = 0; j < t->nelem; j++)
            ((int32_t *)t->data)[j] = (int32_t)(rnd(seed) % 9);
        return t;
    }
    if ((strcmp(op, "OnnxDFT") == 0 || strcmp(op, "OnnxSTFT") == 0) && i >= 1 && r < 8) {
        /* dft_length (-1: none, 0 .. 8: crop, pad, refused 0) or the
         * run-time axis (-3 .. 3): one int64 */
        rt_tensor *t = new_t(RT_DT_INT64, (rt_shape){.rank = 0}, seed);
        *(int64_t *)t->data = i == 1 ? (int64_t)(rnd(seed) % 10) - 1 : (int64_t)(rnd(seed) % 7) - 3;
        return t;
    }
    if (strcmp(op, "Complex") == 0 && i == 1 && r < 8) return new_t(x->dtype, s, seed);
    if (r < 4) return new_t(x->dtype, s, seed);
    if (r < 5 && s.rank > 0) {
        int drop = 1 + (int)(rnd(seed) % (unsigned)s.rank);
        rt_shape t = {.rank = s.rank - drop};
        for (int d = 0; d < t.rank; d++)
            t.dim[d] = s.dim[d + drop];
        return new_t(x->dtype, t, seed);
    }
    if (r < 8) {
        rt_shape v = {.rank = (int)(rnd(seed) % 2)};
        if (v.rank) v.dim[0] = rnd(seed) % 2 ? s.rank : (rnd(seed) % 2 ? 2 * s.rank : 1);
        if (v.rank == 1 && rnd(seed) % 3 == 0) {
            v.rank = 2;
            v.dim[0] = s.rank;
            v.dim[1] = 2;
        }
        return new_t((rnd(seed) & 1) ? RT_DT_INT32 : RT_DT_INT64, v, seed);
    }
    return rand_tensor(seed);
}

/* KN_FUZZ_SEED / KN_FUZZ_SCALE (env) vary the run for longer local searches. */
static void fuzz_table(const kn_kernel *table, unsigned seed, int rounds) {
    if (getenv("KN_FUZZ_SEED")) seed += (unsigned)strtoul(getenv("KN_FUZZ_SEED"), NULL, 10) * 977u;
    if (getenv("KN_FUZZ_SCALE")) rounds *= atoi(getenv("KN_FUZZ_SCALE"));
    tu_prefer_table(table); /* this group's kernels, not optimised ones found first */
    for (const kn_kernel *k = table; k->op != NULL; k++) {
        int ok = 0;
        for (int it = 0; it < rounds; it++) {
            /* Outputs as the graph would give them: lists for Split*, Unpack. */
            int nin = 1 + (int)(rnd(&seed) % 5), nout = 1;
            if (strncmp(k->op, "Split", 5) == 0 || strcmp(k->op, "Unpack") == 0)
                nout = 1 + (int)(rnd(&seed) % 3);
            if (strncmp(k->op, "FusedBatchNorm", 14) == 0)
                nout = strcmp(k->op, "FusedBatchNorm") == 0 ? 5 : 6;
            if (strcmp(k->op, "Assert") == 0) nout = 0; /* it has no outputs */
            if (strcmp(k->op, "NonMaxSuppressionV4") == 0) nout = 2;
            if (strcmp(k->op, "NonMaxSuppressionV5") == 0) nout = 3;
            if (strcmp(k->op, "CombinedNonMaxSuppression") == 0) nout = 4;
            if (strncmp(k->op, "Unique", 6) == 0) nout = strstr(k->op, "Counts") ? 3 : 2;
            if (strcmp(k->op, "CropAndResize") == 0 && it % 4) nin = 4;
            if ((table == kn_cpu_fft_kernels || table == kn_cpu_complex_kernels) && it % 8)
                nin = strncmp(k->op, "Onnx", 4) == 0 ? 2 + (int)(rnd(&seed) % 3)
                      : strstr(k->op, "RFFT") || strcmp(k->op, "Complex") == 0 ? 2
                                                                                 : 1;
            rt_tensor *in[5] = {0}, *outs[6] = {0};
            in[0] = rand_tensor(&seed);
            /* nn ops: mostly float images or volumes */
            while ((table == kn_cpu_nn_kernels || table == kn_cpu_fast_kernels ||
                    table == kn_cpu_conv3d_kernels || table == kn_cpu_resize_kernels) &&
                   rnd(&seed) % 10 < 8 &&
                   (in[0]->dtype != RT_DT_FLOAT || in[0]->shape.rank < 4)) {
                rt_tensor_unref(in[0]);
                in[0] = rand_tensor(&seed);
            }
            /* FFT and complex ops: often a complex64 input (pairs of the floats). */
            if ((table == kn_cpu_fft_kernels || table == kn_cpu_complex_kernels) &&
                rnd(&seed) % 2 && in[0]->dtype == RT_DT_FLOAT) {
                rt_tensor *c = NULL;
                ck_assert_int_eq(rt_tensor_new(RT_DT_COMPLEX64, &in[0]->shape, &c), MS_OK);
                for (int64_t j = 0; j < c->nelem; j++) {
                    ((float *)c->data)[2 * j] = rt_tensor_f32(in[0])[j];
                    ((float *)c->data)[2 * j + 1] = (float)(j % 3) - 1.0f;
                }
                rt_tensor_unref(in[0]);
                in[0] = c;
            }
            for (int i = 1; i < nin; i++)
                in[i] = related(k->op, i, in[0], &seed);
            Tensorflow__NodeDef *d = tu_node_new(k->op, "fuzz_node");
            rand_attrs(d, nout, in[0]->shape.rank, &seed);
            if (strncmp(k->op, "Onnx", 4) == 0) { /* OnnxDFT, OnnxSTFT */
                tu_attr_i(d, "inverse", (int64_t)(rnd(&seed) % 2));
                tu_attr_i(d, "onesided", (int64_t)(rnd(&seed) % 2));
                tu_attr_i(d, "has_window", (int64_t)(rnd(&seed) % 2));
                tu_attr_i(d, "has_length", (int64_t)(rnd(&seed) % 2));
            }
            if (table == kn_cpu_resize_kernels) {
                static const char *const methods[] = {"bilinear", "nearest", "bicubic"};
                tu_attr_b(d, "align_corners", (int)(rnd(&seed) % 3 == 0));
                tu_attr_b(d, "half_pixel_centers", (int)(rnd(&seed) % 3 == 0));
                tu_attr_s(d, "method", methods[rnd(&seed) % 3]);
                tu_attr_f(d, "extrapolation_value", -1.0f);
            }
            if (strcmp(k->op, "Einsum") == 0) {
                static const char *const eqs[] = {"ij,jk->ik", "...ij,...jk", "ii->i", "ij->",
                                                  "bij,bkj->bik", "a,a->", "ab...,b->...a",
                                                  "ijk", "i,j->ij", "aa,ab->b", "x"};
                tu_attr_s(d, "equation", eqs[rnd(&seed) % (sizeof(eqs) / sizeof(eqs[0]))]);
            }
            if (strcmp(k->op, "RaggedTensorToTensor") == 0) {
                static const char *const rp[][3] = {{"ROW_SPLITS", "ROW_SPLITS", "ROW_SPLITS"},
                                                    {"FIRST_DIM_SIZE", "VALUE_ROWIDS",
                                                     "VALUE_ROWIDS"}};
                int which = (int)(rnd(&seed) % 2), n = 1 + which + (int)(rnd(&seed) % 2);
                tu_attr_slist(d, "row_partition_types", n, rp[which]);
            }
            ms_status st = tu_run(d, in, nin, outs, nout);
            if (st == MS_OK) {
                ok++;
                for (int i = 0; i < nout; i++)
                    ck_assert_msg(outs[i] != NULL, "%s: output %d not set", k->op, i);
            } else {
                ck_assert_msg(strstr(ms_errmsg(), "fuzz_node") != NULL,
                              "%s: message lacks the node name: %s", k->op, ms_errmsg());
            }
            tu_unref(outs, nout);
            tu_unref(in, nin);
            tu_node_free(d);
        }
        if (getenv("KN_FUZZ_STATS")) fprintf(stderr, "%s: %d/%d ok\n", k->op, ok, rounds);
    }
}

START_TEST(fuzz_elementwise) {
    fuzz_table(kn_cpu_elementwise_kernels, 1u, 60);
}
END_TEST

START_TEST(fuzz_shape) {
    fuzz_table(kn_cpu_shape_kernels, 2u, 150);
}
END_TEST

START_TEST(fuzz_reduce) {
    fuzz_table(kn_cpu_reduce_kernels, 3u, 150);
}
END_TEST

START_TEST(fuzz_nn) {
    fuzz_table(kn_cpu_nn_kernels, 4u, 300);
}
END_TEST

/* The optimised table (fed filters: the kernels' on-the-fly paths). */
START_TEST(fuzz_fast) {
    fuzz_table(kn_cpu_fast_kernels, 5u, 300);
}
END_TEST

/* The 3-D kernels (kn_cpu_conv3d.c). */
START_TEST(fuzz_conv3d) {
    fuzz_table(kn_cpu_conv3d_kernels, 6u, 300);
}
END_TEST

/* The kernels of issue 10's ops (Einsum, sparse / ragged, math). */
START_TEST(fuzz_issue10) {
    fuzz_table(kn_cpu_einsum_kernels, 7u, 300);
    fuzz_table(kn_cpu_sparse_kernels, 8u, 300);
    fuzz_table(kn_cpu_math_kernels, 9u, 100);
    fuzz_table(kn_cpu_space_kernels, 10u, 300);
    fuzz_table(kn_cpu_nms_kernels, 11u, 300);
}
END_TEST

/* ResizeBicubic, ResizeArea, CropAndResize (kn_cpu_resize.c). */
START_TEST(fuzz_resize) {
    fuzz_table(kn_cpu_resize_kernels, 11u, 300);
}
END_TEST

/* Unique*, the string and regex kernels (numeric inputs: refused by name). */
START_TEST(fuzz_text) {
    fuzz_table(kn_cpu_unique_kernels, 12u, 300);
    fuzz_table(kn_cpu_str_kernels, 13u, 100);
    fuzz_table(kn_cpu_regex_kernels, 14u, 100);
}
END_TEST

/* The FFT family and the complex ops (kn_cpu_fft.c, kn_cpu_complex.c). */
START_TEST(fuzz_fft) {
    fuzz_table(kn_cpu_fft_kernels, 15u, 200);
    fuzz_table(kn_cpu_complex_kernels, 16u, 200);
}
END_TEST

/* Our own ops for ONNX's image operators (kn_cpu_onnx_img.c) and
 * MelWeightMatrix, TensorScatter (kn_cpu_onnx_signal.c, kn_cpu_onnx_cache.c). */
START_TEST(fuzz_onnx_img) {
    fuzz_table(kn_cpu_onnx_img_kernels, 17u, 300);
    fuzz_table(kn_cpu_onnx_signal_kernels, 18u, 300);
    fuzz_table(kn_cpu_onnx_cache_kernels, 19u, 300);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kn_robust");
    TCase *tc = tcase_create("fuzz");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, fuzz_elementwise);
    tcase_add_test(tc, fuzz_shape);
    tcase_add_test(tc, fuzz_reduce);
    tcase_add_test(tc, fuzz_nn);
    tcase_add_test(tc, fuzz_fast);
    tcase_add_test(tc, fuzz_conv3d);
    tcase_add_test(tc, fuzz_issue10);
    tcase_add_test(tc, fuzz_resize);
    tcase_add_test(tc, fuzz_text);
    tcase_add_test(tc, fuzz_fft);
    tcase_add_test(tc, fuzz_onnx_img);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
