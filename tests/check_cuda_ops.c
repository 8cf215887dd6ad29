/* check_cuda_ops.c - the CUDA kernels against the CPU path (ctest label
 * `gpu`). Without a CUDA build or a usable GPU it prints one line and exits
 * 77 (skipped); bench/gpu/run.sh runs it on a GPU machine.
 *
 *   dicom_fused_bitexact  the fused DICOM kernel vs dcm_decode_hu ->
 *                         dcm_resize_bilinear -> dcm_window on the CPU, for
 *                         uint8 / uint16 / int16 stored pixels with bits above
 *                         BitsStored set, with and without resize, NHWC x3 and
 *                         NCHW x1: bit for bit (memcmp)
 *   binary / bias_act / softmax  vs the CPU backend's AddV2, Sub, Mul,
 *                         RealDiv, Maximum, Minimum, BiasAdd + Relu / Relu6 /
 *                         Sigmoid / Tanh, Softmax: exact where the CPU is one
 *                         IEEE operation, else 1e-5 relative
 *   matmul                cuBLASLt MatMul with the bias / bias+ReLU epilogue vs the CPU
 *                         backend's MatMul -> BiasAdd -> Relu: 1e-5 relative
 *   conv                  cuDNN Conv2D (SAME / VALID, stride 2, dilation 2) and
 *                         DepthwiseConv2dNative (multiplier 2) vs the CPU
 *                         backend: 1e-5 relative; asymmetric SAME refused
 *   pool_mean_concat      MaxPool (exact), AvgPool, Mean over H, W (1e-5) and
 *                         ConcatV2 on the last and a middle axis (exact)
 *   unary                 Square, Rsqrt, LeakyRelu (exact) and Elu (1e-5) vs the
 *                         CPU backend
 *   pool3d                MaxPool3D (exact) and AvgPool3D (1e-5), VALID and SAME
 *   convnd                cuDNN Nd: Conv3D (SAME / VALID, stride 2, dilation 2)
 *                         and Conv2DBackpropInput (stride 2, VALID / SAME) vs
 *                         the CPU backend: 1e-5 relative
 *   batch_norm_resize     FusedBatchNormV3 (inference; + ReLU) and ResizeBilinear
 *                         (legacy, align_corners, half_pixel_centers; up and
 *                         down) against the CPU backend: bit for bit
 *   transpose_pad         Transpose (rank 4 and 5) and Pad / PadV2 on H, W
 *                         against the CPU backend: bit for bit
 *   reduce                Sum / Mean / Max / Min / Prod over spatial, leading,
 *                         alternating, last and all axes (the table's merge,
 *                         kn_cuda__reduce_plan): bit for bit where each output
 *                         has its own thread (many outputs), 1e-5 relative
 *                         where a block reduces one output (few outputs)
 *   batch_matmul          kn_cuda_bgemm (strided batches, adjoints, a broadcast
 *                         y as one GEMM over x's rows, a broadcast over
 *                         batches as a GEMM per batch) vs BatchMatMulV2: 1e-5
 *   gather_slice_nearest  GatherV2 (axis 1, batch_dims 1; int32 and int64
 *                         indices; float, int64 and uint8 params),
 *                         StridedSlice (masks, negative strides), Slice and
 *                         ResizeNearestNeighbor (legacy, align_corners,
 *                         half_pixel_centers; up and down; float and uint8)
 *                         vs the CPU backend: bit for bit (memcmp)
 *   arena_memory          an arena's cudaMalloc shows in cudaMemGetInfo and
 *                         comes back when it is freed; the
 *                         --per_process_gpu_memory_fraction cap refuses an
 *                         arena over it
 * Check runs without fork here (CUDA is initialised in the parent). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cuda_backend.h"
#include "kn_cuda_probe.h"

#ifndef DCMSERVE_HAVE_CUDA
int main(void) {
    printf("cuda_ops: skipped: this build has no CUDA backend (DCMSERVE_CUDA=OFF or no nvcc)\n");
    return 77;
}
#else

#include "dcm_pixel.h"
#include "kn_cuda_dicom.cuh"
#include "kn_cuda_conv.cuh"
#include "kn_cuda_convnd.cuh"
#include "kn_cuda_elementwise.cuh"
#include "kn_cuda_gemm.cuh"
#include "kn_cuda_index.cuh"
#include "kn_cuda_nn.cuh"
#include "kn_cuda_reduce.cuh"
#include "kn_cuda_mem.h"
#include "kn_cuda_rt.cuh"
#include "util_dicom.h"
#include "util_node.h"

#define TS_EXPLICIT "1.2.840.10008.1.2.1"
#define MIB ((uint64_t)1 << 20)

static kn_cuda_arena *g_arena;
static uint64_t g_total;

static void *dev_put(const void *src, size_t bytes) {
    void *d = kn_cuda_arena_alloc(g_arena, bytes);
    ck_assert_ptr_nonnull(d);
    if (src) ck_assert_msg(kn_cuda_h2d(d, src, bytes, NULL, "h2d") == MS_OK, "%s", ms_errmsg());
    return d;
}

static void dev_get(void *dst, const void *d, size_t bytes) {
    ck_assert_msg(kn_cuda_d2h(dst, d, bytes, NULL, "d2h") == MS_OK, "%s", ms_errmsg());
    ck_assert_msg(kn_cuda_stream_sync(NULL, "sync") == MS_OK, "%s", ms_errmsg());
}

static uint32_t g_seed = 12345;
static uint32_t rnd(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return g_seed >> 8;
}

/* ---- the fused DICOM kernel ---- */
typedef struct dcase {
    uint16_t ba, bs, pr;
    const char *slope, *icpt;
} dcase;

START_TEST(test_dicom_fused_bitexact) {
    const dcase cases[] = {
        {16, 12, 0, "1", "-1024"},
        {16, 16, 1, "1.5", "-1024.25"},
        {16, 12, 1, "2", "0"},
        {8, 8, 0, "0.75", "3"},
    };
    const uint32_t rows = 37, cols = 29;
    const uint32_t outs[2][2] = {{37, 29}, {20, 48}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const dcase *k = &cases[c];
        const size_t elt = k->ba / 8, bytes = (size_t)rows * cols * elt;
        uint8_t *raw = malloc(bytes + 1);
        for (size_t i = 0; i < bytes; i++) raw[i] = (uint8_t)rnd(); /* high bits set too */
        ut_dbuf d;
        ut_dbuf_init(&d, 1, 0);
        ut_dbuf_meta(&d, TS_EXPLICIT);
        ut_dbuf_str(&d, 0x0008, 0x0060, "CS", "CT");
        ut_dbuf_image(&d, (uint16_t)rows, (uint16_t)cols, k->ba, k->bs, k->pr, "MONOCHROME2");
        ut_dbuf_str(&d, 0x0028, 0x1052, "DS", k->icpt);
        ut_dbuf_str(&d, 0x0028, 0x1053, "DS", k->slope);
        size_t padded = (bytes + 1) & ~(size_t)1;
        ut_dbuf_hdr(&d, 0x7FE0, 0x0010, k->ba == 8 ? "OB" : "OW", (uint32_t)padded);
        raw[bytes] = 0;
        ut_dbuf_bytes(&d, raw, padded);
        dcm_image *img = NULL;
        ck_assert_msg(dcm_decode_hu(d.p, d.n, NULL, &img) == MS_OK, "%s", ms_errmsg());
        ut_dbuf_free(&d);
        const double L = 40, W = 400;
        void *draw = dev_put(raw, bytes);
        for (int o = 0; o < 2; o++) {
            const uint32_t oh = outs[o][0], ow = outs[o][1];
            const size_t np = (size_t)oh * ow;
            float *want = malloc(np * sizeof(float));
            if (oh == rows && ow == cols)
                memcpy(want, img->data, np * sizeof(float));
            else
                dcm_resize_bilinear(img->data, rows, cols, 1, want, oh, ow);
            ck_assert_int_eq(dcm_window(want, want, np, L, W), MS_OK);
            for (int layout = 0; layout < 2; layout++) {
                kn_cuda_dicom_params p = {
                    .pix = k->ba == 8 ? KN_CUDA_PIX_U8 : (k->pr ? KN_CUDA_PIX_S16 : KN_CUDA_PIX_U16),
                    .bits_stored = k->bs,
                    .slope = (float)img->info.slope,
                    .intercept = (float)img->info.intercept,
                    .window = 1,
                    .lo = (float)(L - W / 2.0),
                    .hi = (float)(L + W / 2.0),
                    .ih = rows, .iw = cols, .oh = oh, .ow = ow,
                    .channels = layout ? 1 : 3,
                    .nchw = layout,
                };
                if (img->info.rescale_source == DCM_RESCALE_NONE) p.slope = 1, p.intercept = 0;
                float *dout = dev_put(NULL, np * p.channels * sizeof(float));
                ck_assert_msg(kn_cuda_dicom_fused(draw, 1, &p, dout, NULL) == MS_OK, "%s",
                              ms_errmsg());
                float *got = malloc(np * p.channels * sizeof(float));
                dev_get(got, dout, np * p.channels * sizeof(float));
                for (size_t i = 0; i < np; i++)
                    for (uint32_t ch = 0; ch < p.channels; ch++) {
                        float g = got[i * p.channels + ch];
                        ck_assert_msg(memcmp(&g, &want[i], 4) == 0,
                                      "case %zu out %ux%u layout %d pixel %zu ch %u: gpu %.9g cpu %.9g",
                                      c, oh, ow, layout, i, ch, (double)g, (double)want[i]);
                    }
                free(got);
            }
            free(want);
        }
        dcm_image_free(img);
        free(raw);
        kn_cuda_arena_reset(g_arena);
    }
}
END_TEST

/* ---- elementwise against the CPU backend ---- */
static rt_tensor *rand_t(rt_shape s, float lo, float hi) {
    rt_tensor *t = tu_iota_f32(s, 0, 0);
    float *f = rt_tensor_f32(t);
    for (int64_t i = 0; i < t->nelem; i++) f[i] = lo + (hi - lo) * (float)(rnd() % 65536) / 65536.f;
    return t;
}

static rt_tensor *gpu_out(rt_shape s, const float *dev) {
    rt_tensor *t = tu_iota_f32(s, 0, 0);
    dev_get(rt_tensor_f32(t), dev, (size_t)t->nelem * sizeof(float));
    return t;
}

/* Reads the device result of want's shape, compares it with want (tol as
 * tu_check_f32) and drops both. */
static void check_dev(rt_tensor *want, const float *dev, float tol) {
    rt_tensor *got = gpu_out(want->shape, dev);
    tu_check_f32(got, want->shape, rt_tensor_f32(want), (int)want->nelem, tol);
    tu_unref(&got, 1);
    tu_unref(&want, 1);
}

START_TEST(test_binary) {
    static const struct {
        const char *op;
        kn_cuda_binop k;
        float tol;
    } ops[] = {{"AddV2", KN_CUDA_ADD, 0}, {"Sub", KN_CUDA_SUB, 0}, {"Mul", KN_CUDA_MUL, 0},
               {"RealDiv", KN_CUDA_DIV, 1e-6f}, {"Maximum", KN_CUDA_MAX, 0},
               {"Minimum", KN_CUDA_MIN, 0}};
    rt_tensor *a = rand_t(TU_SHAPE(7, 333), -5, 5), *b = rand_t(TU_SHAPE(333), 0.5f, 3);
    float *da = dev_put(rt_tensor_f32(a), 7 * 333 * 4), *db = dev_put(rt_tensor_f32(b), 333 * 4);
    float *dout = dev_put(NULL, 7 * 333 * 4);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        Tensorflow__NodeDef *def = tu_node_new(ops[i].op, "n");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        rt_tensor *in[2] = {a, b};
        rt_tensor *want = tu_run1(def, in, 2);
        ck_assert_msg(kn_cuda_binary(ops[i].k, da, db, 333, dout, 7 * 333, NULL) == MS_OK, "%s",
                      ms_errmsg());
        check_dev(want, dout, ops[i].tol);
    }
    tu_unref(&a, 1);
    tu_unref(&b, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

START_TEST(test_bias_act) {
    static const struct {
        const char *op;
        kn_cuda_act act;
        float tol;
    } acts[] = {{"Relu", KN_CUDA_ACT_RELU, 0}, {"Relu6", KN_CUDA_ACT_RELU6, 0},
                {"Sigmoid", KN_CUDA_ACT_SIGMOID, 1e-5f}, {"Tanh", KN_CUDA_ACT_TANH, 1e-5f}};
    rt_tensor *x = rand_t(TU_SHAPE(9, 130), -8, 8), *bias = rand_t(TU_SHAPE(130), -2, 2);
    float *dx = dev_put(rt_tensor_f32(x), 9 * 130 * 4), *db = dev_put(rt_tensor_f32(bias), 130 * 4);
    float *dout = dev_put(NULL, 9 * 130 * 4);
    Tensorflow__NodeDef *def = tu_node_new("BiasAdd", "b");
    tu_attr_type(def, "T", RT_DT_FLOAT);
    rt_tensor *in[2] = {x, bias};
    rt_tensor *biased = tu_run1(def, in, 2);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        Tensorflow__NodeDef *ad = tu_node_new(acts[i].op, "a");
        tu_attr_type(ad, "T", RT_DT_FLOAT);
        rt_tensor *want = tu_run1(ad, &biased, 1);
        ck_assert_msg(kn_cuda_bias_act(dx, db, acts[i].act, dout, 9, 130, NULL) == MS_OK, "%s",
                      ms_errmsg());
        check_dev(want, dout, acts[i].tol);
    }
    tu_unref(&biased, 1);
    tu_unref(&x, 1);
    tu_unref(&bias, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

START_TEST(test_softmax) {
    const int64_t shapes[3][2] = {{5, 1000}, {64, 3}, {1, 70000}};
    for (int s = 0; s < 3; s++) {
        int64_t r = shapes[s][0], c = shapes[s][1];
        rt_shape sh = TU_SHAPE(r, c);
        rt_tensor *x = rand_t(sh, -20, 20);
        float *dx = dev_put(rt_tensor_f32(x), (size_t)(r * c) * 4);
        float *dout = dev_put(NULL, (size_t)(r * c) * 4);
        Tensorflow__NodeDef *def = tu_node_new("Softmax", "s");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        rt_tensor *want = tu_run1(def, &x, 1);
        ck_assert_msg(kn_cuda_softmax(dx, dout, r, c, NULL) == MS_OK, "%s", ms_errmsg());
        check_dev(want, dout, 1e-5f);
        tu_unref(&x, 1);
        kn_cuda_arena_reset(g_arena);
    }
}
END_TEST

START_TEST(test_matmul) {
    const int64_t shapes[3][3] = {{33, 65, 257}, {1, 1000, 512}, {128, 16, 3}};
    for (int s = 0; s < 3; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        rt_tensor *x = rand_t(TU_SHAPE(m, k), -1, 1), *w = rand_t(TU_SHAPE(k, n), -1, 1);
        rt_tensor *b = rand_t(TU_SHAPE(n), -1, 1);
        Tensorflow__NodeDef *mm = tu_node_new("MatMul", "mm");
        tu_attr_type(mm, "T", RT_DT_FLOAT);
        rt_tensor *in[2] = {x, w};
        rt_tensor *prod = tu_run1(mm, in, 2);
        Tensorflow__NodeDef *ba = tu_node_new("BiasAdd", "b");
        tu_attr_type(ba, "T", RT_DT_FLOAT);
        rt_tensor *bin[2] = {prod, b};
        rt_tensor *biased = tu_run1(ba, bin, 2);
        Tensorflow__NodeDef *re = tu_node_new("Relu", "r");
        tu_attr_type(re, "T", RT_DT_FLOAT);
        rt_tensor *relu = tu_run1(re, &biased, 1);
        float *dx = dev_put(rt_tensor_f32(x), (size_t)(m * k) * 4);
        float *dw = dev_put(rt_tensor_f32(w), (size_t)(k * n) * 4);
        float *db = dev_put(rt_tensor_f32(b), (size_t)n * 4);
        float *dy = dev_put(NULL, (size_t)(m * n) * 4);
        const struct {
            int bias;
            kn_cuda_act act;
            rt_tensor *want;
        } v[3] = {{0, KN_CUDA_ACT_NONE, prod}, {1, KN_CUDA_ACT_NONE, biased}, {1, KN_CUDA_ACT_RELU, relu}};
        for (int i = 0; i < 3; i++) {
            kn_cuda_gemm *g = NULL;
            ck_assert_msg(kn_cuda_gemm_plan(m, n, k, v[i].bias, v[i].act, &g) == MS_OK, "%s",
                          ms_errmsg());
            void *ws = kn_cuda_gemm_workspace(g) ? dev_put(NULL, kn_cuda_gemm_workspace(g)) : NULL;
            ck_assert_msg(kn_cuda_gemm_run(g, dx, dw, v[i].bias ? db : NULL, dy, ws, NULL) == MS_OK,
                          "%s", ms_errmsg());
            rt_tensor *got = gpu_out(TU_SHAPE(m, n), dy);
            tu_check_f32(got, TU_SHAPE(m, n), rt_tensor_f32(v[i].want), (int)(m * n), 1e-5f);
            tu_unref(&got, 1);
            kn_cuda_gemm_free(g);
        }
        tu_unref(&relu, 1);
        tu_unref(&biased, 1);
        tu_unref(&prod, 1);
        tu_unref(&x, 1);
        tu_unref(&w, 1);
        tu_unref(&b, 1);
        kn_cuda_arena_reset(g_arena);
    }
    kn_cuda_gemm *g = NULL;
    ck_assert_int_eq(kn_cuda_gemm_plan(4, 4, 4, 1, KN_CUDA_ACT_TANH, &g), MS_ENOTSUP);
    ck_assert_int_eq(kn_cuda_gemm_plan(0, 4, 4, 1, KN_CUDA_ACT_NONE, &g), MS_EINVAL);
}
END_TEST

typedef struct conv_case {
    const char *op;
    int h, w, c, k, oc, stride, dil;
    const char *pad;
} conv_case;

START_TEST(test_conv) {
    const conv_case cases[] = {
        {"Conv2D", 17, 15, 5, 3, 7, 1, 1, "SAME"},
        {"Conv2D", 17, 15, 5, 3, 7, 2, 1, "VALID"},
        {"Conv2D", 20, 20, 4, 3, 8, 1, 2, "VALID"},
        {"Conv2D", 9, 9, 16, 1, 32, 1, 1, "VALID"},
        {"DepthwiseConv2dNative", 16, 16, 6, 3, 12, 1, 1, "SAME"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const conv_case *k = &cases[ci];
        const int n = 2, dw = strcmp(k->op, "Conv2D") != 0, m = dw ? k->oc / k->c : k->oc;
        rt_tensor *x = rand_t(TU_SHAPE(n, k->h, k->w, k->c), -1, 1);
        rt_tensor *f = rand_t(TU_SHAPE(k->k, k->k, k->c, m), -1, 1);
        Tensorflow__NodeDef *def = tu_node_new(k->op, "conv");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_ints(def, "strides", 1, k->stride, k->stride, 1);
        tu_attr_ints(def, "dilations", 1, k->dil, k->dil, 1);
        tu_attr_s(def, "padding", k->pad);
        tu_attr_s(def, "data_format", "NHWC");
        rt_tensor *in[2] = {x, f};
        rt_tensor *want = tu_run1(def, in, 2);
        /* TensorFlow's SAME: out = ceil(in / stride), the extra pad at the bottom/right */
        int pt = 0, pb = 0, pl = 0, pr = 0;
        if (strcmp(k->pad, "SAME") == 0) {
            int ekh = (k->k - 1) * k->dil + 1;
            int oh = (k->h + k->stride - 1) / k->stride, ow = (k->w + k->stride - 1) / k->stride;
            int th = (oh - 1) * k->stride + ekh - k->h, tw = (ow - 1) * k->stride + ekh - k->w;
            th = th > 0 ? th : 0;
            tw = tw > 0 ? tw : 0;
            pt = th / 2, pb = th - pt, pl = tw / 2, pr = tw - pl;
        }
        kn_cuda_conv_shape sh = {.n = n, .h = k->h, .w = k->w, .c = k->c, .kh = k->k, .kw = k->k,
                                 .oc = k->oc, .groups = dw ? k->c : 1, .sh = k->stride,
                                 .sw = k->stride, .dh = k->dil, .dw = k->dil, .pad_top = pt,
                                 .pad_bottom = pb, .pad_left = pl, .pad_right = pr};
        kn_cuda_conv *p = NULL;
        ck_assert_msg(kn_cuda_conv_plan(&sh, &p) == MS_OK, "case %zu: %s", ci, ms_errmsg());
        int oh, ow;
        kn_cuda_conv_out_hw(p, &oh, &ow);
        ck_assert_int_eq(oh, (int)want->shape.dim[1]);
        ck_assert_int_eq(ow, (int)want->shape.dim[2]);
        size_t fn = (size_t)k->k * k->k * k->c * m;
        float *ohwi = malloc(fn * sizeof(float));
        kn_cuda_conv_filter_from_tf(rt_tensor_f32(f), k->k, k->k, k->c, m, dw, ohwi);
        float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
        float *dfw = dev_put(ohwi, fn * 4);
        float *dy = dev_put(NULL, (size_t)want->nelem * 4);
        void *ws = kn_cuda_conv_workspace(p) ? dev_put(NULL, kn_cuda_conv_workspace(p)) : NULL;
        ck_assert_msg(kn_cuda_conv_run(p, dx, dfw, dy, ws, NULL) == MS_OK, "%s", ms_errmsg());
        check_dev(want, dy, 1e-5f);
        tu_unref(&x, 1);
        tu_unref(&f, 1);
        free(ohwi);
        kn_cuda_conv_free(p);
        kn_cuda_arena_reset(g_arena);
    }
    kn_cuda_conv_shape asym = {.n = 1, .h = 8, .w = 8, .c = 1, .kh = 3, .kw = 3, .oc = 1,
                               .groups = 1, .sh = 2, .sw = 2, .dh = 1, .dw = 1, .pad_top = 0,
                               .pad_bottom = 1, .pad_left = 0, .pad_right = 1};
    kn_cuda_conv *p = NULL;
    ck_assert_int_eq(kn_cuda_conv_plan(&asym, &p), MS_ENOTSUP);
    ck_assert_msg(strstr(ms_errmsg(), "asymmetric") != NULL, "%s", ms_errmsg());
}
END_TEST

static void same_pad(int in, int k, int s, int *out, int *before) {
    *out = (in + s - 1) / s;
    int total = (*out - 1) * s + k - in;
    *before = total > 0 ? total / 2 : 0;
}

START_TEST(test_pool_mean_concat) {
    const int n = 2, h = 15, w = 12, c = 6;
    rt_tensor *x = rand_t(TU_SHAPE(n, h, w, c), -3, 3);
    float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
    for (int avg = 0; avg < 2; avg++)
        for (int same = 0; same < 2; same++) {
            Tensorflow__NodeDef *def = tu_node_new(avg ? "AvgPool" : "MaxPool", "p");
            tu_attr_type(def, "T", RT_DT_FLOAT);
            tu_attr_ints(def, "ksize", 1, 3, 3, 1);
            tu_attr_ints(def, "strides", 1, 2, 2, 1);
            tu_attr_s(def, "padding", same ? "SAME" : "VALID");
            rt_tensor *want = tu_run1(def, &x, 1);
            kn_cuda_pool_shape ps = {.n = n, .h = h, .w = w, .c = c, .kh = 3, .kw = 3, .sh = 2,
                                     .sw = 2};
            if (same) {
                same_pad(h, 3, 2, &ps.oh, &ps.pad_top);
                same_pad(w, 3, 2, &ps.ow, &ps.pad_left);
            } else {
                ps.oh = (h - 3) / 2 + 1;
                ps.ow = (w - 3) / 2 + 1;
            }
            ck_assert_int_eq(ps.oh, (int)want->shape.dim[1]);
            ck_assert_int_eq(ps.ow, (int)want->shape.dim[2]);
            float *dy = dev_put(NULL, (size_t)want->nelem * 4);
            ck_assert_int_eq(avg ? kn_cuda_avgpool(&ps, dx, dy, NULL) : kn_cuda_maxpool(&ps, dx, dy, NULL),
                             MS_OK);
            check_dev(want, dy, avg ? 1e-5f : 0);
        }
    /* Mean over H, W */
    {
        Tensorflow__NodeDef *def = tu_node_new("Mean", "m");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_type(def, "Tidx", RT_DT_INT32);
        rt_tensor *axes = TU_I32(TU_SHAPE(2), 1, 2);
        rt_tensor *in[2] = {x, axes};
        rt_tensor *want = tu_run1(def, in, 2);
        float *dy = dev_put(NULL, (size_t)(n * c) * 4);
        ck_assert_int_eq(kn_cuda_spatial_mean(dx, n, h * w, c, dy, NULL), MS_OK);
        check_dev(want, dy, 1e-5f);
        tu_unref(&axes, 1);
    }
    /* ConcatV2 of x (.., 6) and z (.., 4) on the last axis, and on axis 1 */
    for (int ax = 0; ax < 2; ax++) {
        rt_tensor *z = ax ? rand_t(TU_SHAPE(n, 4, w, c), -1, 1) : rand_t(TU_SHAPE(n, h, w, 4), -1, 1);
        float *dz = dev_put(rt_tensor_f32(z), (size_t)z->nelem * 4);
        Tensorflow__NodeDef *def = tu_node_new("ConcatV2", "cc");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_i(def, "N", 2);
        tu_attr_type(def, "Tidx", RT_DT_INT32);
        rt_tensor *axis = ax ? TU_I32(TU_SCALAR, 1) : TU_I32(TU_SCALAR, 3);
        rt_tensor *in[3] = {x, z, axis};
        rt_tensor *want = tu_run1(def, in, 3);
        const float *srcs[2] = {dx, dz};
        int64_t inner[2], outer;
        if (ax) {
            inner[0] = (int64_t)h * w * c, inner[1] = (int64_t)4 * w * c, outer = n;
        } else {
            inner[0] = c, inner[1] = 4, outer = (int64_t)n * h * w;
        }
        float *dy = dev_put(NULL, (size_t)want->nelem * 4);
        ck_assert_int_eq(kn_cuda_concat(srcs, inner, 2, outer, dy, NULL), MS_OK);
        check_dev(want, dy, 0);
        tu_unref(&axis, 1);
        tu_unref(&z, 1);
    }
    tu_unref(&x, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

/* ---- Square, Rsqrt, LeakyRelu (one IEEE operation each: exact), Elu ---- */
START_TEST(test_unary) {
    static const struct {
        const char *op;
        kn_cuda_unop k;
        float alpha, lo, hi, tol;
    } ops[] = {{"Square", KN_CUDA_SQUARE, 0, -40, 40, 0},
               {"Rsqrt", KN_CUDA_RSQRT, 0, 0.001f, 300, 0},
               {"LeakyRelu", KN_CUDA_LEAKY_RELU, 0.2f, -9, 9, 0},
               {"Elu", KN_CUDA_ELU, 0, -12, 6, 1e-5f}};
    const int64_t n = 70001; /* not a multiple of a block */
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        rt_tensor *x = rand_t(TU_SHAPE(n), ops[i].lo, ops[i].hi);
        float *dx = dev_put(rt_tensor_f32(x), (size_t)n * 4), *dy = dev_put(NULL, (size_t)n * 4);
        Tensorflow__NodeDef *def = tu_node_new(ops[i].op, "u");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        if (ops[i].k == KN_CUDA_LEAKY_RELU) tu_attr_f(def, "alpha", ops[i].alpha);
        rt_tensor *want = tu_run1(def, &x, 1);
        ck_assert_msg(kn_cuda_unary(ops[i].k, dx, ops[i].alpha, dy, n, NULL) == MS_OK, "%s: %s",
                      ops[i].op, ms_errmsg());
        check_dev(want, dy, ops[i].tol);
        tu_unref(&x, 1);
        kn_cuda_arena_reset(g_arena);
    }
}
END_TEST

/* ---- MaxPool3D (exact) and AvgPool3D (1e-5), VALID and SAME ---- */
START_TEST(test_pool3d) {
    const int n = 2, d = 7, h = 9, w = 8, c = 3;
    rt_tensor *x = rand_t(TU_SHAPE(n, d, h, w, c), -3, 3);
    float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
    for (int avg = 0; avg < 2; avg++)
        for (int same = 0; same < 2; same++) {
            Tensorflow__NodeDef *def = tu_node_new(avg ? "AvgPool3D" : "MaxPool3D", "p3");
            tu_attr_type(def, "T", RT_DT_FLOAT);
            tu_attr_ints(def, "ksize", 1, 2, 3, 3, 1);
            tu_attr_ints(def, "strides", 1, 2, 2, 2, 1);
            tu_attr_s(def, "padding", same ? "SAME" : "VALID");
            tu_attr_s(def, "data_format", "NDHWC");
            rt_tensor *want = tu_run1(def, &x, 1);
            kn_cuda_pool3_shape ps = {.n = n, .d = d, .h = h, .w = w, .c = c, .kd = 2, .kh = 3,
                                      .kw = 3, .sd = 2, .sh = 2, .sw = 2};
            if (same) {
                same_pad(d, 2, 2, &ps.od, &ps.pad_d);
                same_pad(h, 3, 2, &ps.oh, &ps.pad_h);
                same_pad(w, 3, 2, &ps.ow, &ps.pad_w);
            } else {
                ps.od = (d - 2) / 2 + 1;
                ps.oh = (h - 3) / 2 + 1;
                ps.ow = (w - 3) / 2 + 1;
            }
            ck_assert_int_eq(ps.od, (int)want->shape.dim[1]);
            ck_assert_int_eq(ps.oh, (int)want->shape.dim[2]);
            ck_assert_int_eq(ps.ow, (int)want->shape.dim[3]);
            float *dy = dev_put(NULL, (size_t)want->nelem * 4);
            ck_assert_msg(kn_cuda_pool3d(&ps, !avg, dx, dy, NULL) == MS_OK, "%s", ms_errmsg());
            check_dev(want, dy, avg ? 1e-5f : 0);
        }
    tu_unref(&x, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

/* ---- cuDNN Nd: Conv3D (forward) and Conv2DBackpropInput (backward data) ---- */
typedef struct convnd_case {
    int rank3;        /* 1: Conv3D, 0: Conv2DBackpropInput */
    int sp[3], k[3];  /* x's spatial sizes, the filter's */
    int c, oc, stride, dil;
    const char *pad;  /* SAME cases are chosen with an even total padding */
} convnd_case;

START_TEST(test_convnd) {
    const convnd_case cases[] = {
        {1, {6, 9, 8}, {3, 3, 3}, 3, 5, 1, 1, "SAME"},
        {1, {7, 9, 9}, {3, 3, 3}, 2, 4, 2, 1, "VALID"},
        {1, {8, 8, 8}, {2, 3, 3}, 2, 3, 1, 2, "VALID"},
        {0, {9, 9, 0}, {3, 3, 0}, 4, 6, 2, 1, "VALID"},
        {0, {9, 9, 0}, {3, 3, 0}, 4, 6, 2, 1, "SAME"},
        {0, {10, 12, 0}, {4, 4, 0}, 3, 2, 2, 1, "VALID"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const convnd_case *k = &cases[ci];
        const int r = k->rank3 ? 3 : 2, n = 2, same = strcmp(k->pad, "SAME") == 0;
        int osp[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
        int64_t sp = 1;
        for (int i = 0; i < r; i++) {
            const int ek = (k->k[i] - 1) * k->dil + 1;
            if (same) {
                osp[i] = (k->sp[i] + k->stride - 1) / k->stride;
                int tot = (osp[i] - 1) * k->stride + ek - k->sp[i];
                tot = tot > 0 ? tot : 0;
                ck_assert_msg(tot % 2 == 0, "case %zu: uneven SAME padding", ci);
                lo[i] = tot / 2;
            } else {
                osp[i] = (k->sp[i] - ek) / k->stride + 1;
            }
            sp *= k->k[i];
        }
        rt_tensor *f = k->rank3 ? rand_t(TU_SHAPE(k->k[0], k->k[1], k->k[2], k->c, k->oc), -1, 1)
                                : rand_t(TU_SHAPE(k->k[0], k->k[1], k->c, k->oc), -1, 1);
        rt_tensor *src, *want;
        if (k->rank3) {
            src = rand_t(TU_SHAPE(n, k->sp[0], k->sp[1], k->sp[2], k->c), -1, 1);
            Tensorflow__NodeDef *def = tu_node_new("Conv3D", "c3");
            tu_attr_type(def, "T", RT_DT_FLOAT);
            tu_attr_ints(def, "strides", 1, k->stride, k->stride, k->stride, 1);
            tu_attr_ints(def, "dilations", 1, k->dil, k->dil, k->dil, 1);
            tu_attr_s(def, "padding", k->pad);
            tu_attr_s(def, "data_format", "NDHWC");
            rt_tensor *in[2] = {src, f};
            want = tu_run1(def, in, 2);
        } else {
            src = rand_t(TU_SHAPE(n, osp[0], osp[1], k->oc), -1, 1); /* dy */
            rt_tensor *sizes = TU_I32(TU_SHAPE(4), n, k->sp[0], k->sp[1], k->c);
            Tensorflow__NodeDef *def = tu_node_new("Conv2DBackpropInput", "bd");
            tu_attr_type(def, "T", RT_DT_FLOAT);
            tu_attr_ints(def, "strides", 1, k->stride, k->stride, 1);
            tu_attr_ints(def, "dilations", 1, k->dil, k->dil, 1);
            tu_attr_s(def, "padding", k->pad);
            tu_attr_s(def, "data_format", "NHWC");
            rt_tensor *in[3] = {sizes, f, src};
            want = tu_run1(def, in, 3);
            tu_unref(&sizes, 1);
        }
        kn_cuda_convnd_shape cs;
        memset(&cs, 0, sizeof cs);
        cs.rank = r, cs.backward_data = !k->rank3, cs.n = n, cs.c = k->c, cs.oc = k->oc;
        for (int i = 0; i < r; i++) {
            cs.in[i] = k->sp[i], cs.k[i] = k->k[i], cs.stride[i] = k->stride, cs.dil[i] = k->dil;
            cs.pad_lo[i] = cs.pad_hi[i] = lo[i];
        }
        kn_cuda_convnd *p = NULL;
        ck_assert_msg(kn_cuda_convnd_plan(&cs, &p) == MS_OK, "case %zu: %s", ci, ms_errmsg());
        int po[3];
        kn_cuda_convnd_out(p, po);
        for (int i = 0; i < r; i++) ck_assert_int_eq(po[i], osp[i]);
        float *krsc = malloc((size_t)f->nelem * sizeof(float));
        kn_cuda_conv_filter_from_tf(rt_tensor_f32(f), (int)sp, 1, k->c, k->oc, 0, krsc);
        float *dsrc = dev_put(rt_tensor_f32(src), (size_t)src->nelem * 4);
        float *dw = dev_put(krsc, (size_t)f->nelem * 4);
        float *ddst = dev_put(NULL, (size_t)want->nelem * 4);
        void *ws = kn_cuda_convnd_workspace(p) ? dev_put(NULL, kn_cuda_convnd_workspace(p)) : NULL;
        ck_assert_msg(kn_cuda_convnd_run(p, dsrc, dw, ddst, ws, NULL) == MS_OK, "case %zu: %s", ci,
                      ms_errmsg());
        check_dev(want, ddst, 1e-5f);
        tu_unref(&src, 1);
        tu_unref(&f, 1);
        free(krsc);
        kn_cuda_convnd_free(p);
        kn_cuda_arena_reset(g_arena);
    }
}
END_TEST

START_TEST(test_batch_norm_resize) {
    const int n = 2, h = 13, w = 11, c = 5;
    rt_tensor *x = rand_t(TU_SHAPE(n, h, w, c), -4, 4);
    float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
    /* FusedBatchNormV3, then Relu */
    rt_tensor *scale = rand_t(TU_SHAPE(c), 0.5f, 2), *offset = rand_t(TU_SHAPE(c), -1, 1);
    rt_tensor *mean = rand_t(TU_SHAPE(c), -1, 1), *var = rand_t(TU_SHAPE(c), 0.1f, 3);
    Tensorflow__NodeDef *d = tu_node_new("FusedBatchNormV3", "bn");
    tu_attr_b(d, "is_training", 0);
    tu_attr_f(d, "epsilon", 0.001f);
    rt_tensor *in[5] = {x, scale, offset, mean, var}, *o[6] = {0};
    ck_assert_int_eq(tu_run(d, in, 5, o, 6), MS_OK);
    tu_node_free(d);
    Tensorflow__NodeDef *re = tu_node_new("Relu", "r");
    tu_attr_type(re, "T", RT_DT_FLOAT);
    rt_tensor *relu = tu_run1(re, &o[0], 1);
    /* the CPU kernel's coefficients, in its expression order */
    float mul[5], add[5];
    const float *sc = rt_tensor_f32(scale), *of = rt_tensor_f32(offset), *mu = rt_tensor_f32(mean),
                *va = rt_tensor_f32(var);
    for (int k = 0; k < c; k++) {
        float inv = 1.0f / sqrtf(va[k] + 0.001f);
        mul[k] = sc[k] * inv;
        add[k] = of[k] - mu[k] * sc[k] * inv;
    }
    float *dmul = dev_put(mul, sizeof mul), *dadd = dev_put(add, sizeof add);
    float *dy = dev_put(NULL, (size_t)x->nelem * 4);
    for (int act = 0; act < 2; act++) {
        ck_assert_int_eq(kn_cuda_channel_affine(dx, dmul, dadd, act ? KN_CUDA_ACT_RELU : KN_CUDA_ACT_NONE,
                                                dy, (int64_t)n * h * w, c, NULL),
                         MS_OK);
        rt_tensor *got = gpu_out(x->shape, dy);
        tu_check_f32(got, x->shape, rt_tensor_f32(act ? relu : o[0]), (int)x->nelem, 0);
        tu_unref(&got, 1);
    }
    tu_unref(o, 6);
    tu_unref(&relu, 1);
    tu_unref(&scale, 1);
    tu_unref(&offset, 1);
    tu_unref(&mean, 1);
    tu_unref(&var, 1);
    /* ResizeBilinear */
    const int sizes[2][2] = {{29, 17}, {6, 4}};
    const int modes[3][2] = {{0, 0}, {1, 0}, {0, 1}};
    for (int si = 0; si < 2; si++)
        for (int mi = 0; mi < 3; mi++) {
            int oh = sizes[si][0], ow = sizes[si][1];
            Tensorflow__NodeDef *rd = tu_node_new("ResizeBilinear", "rs");
            tu_attr_b(rd, "align_corners", modes[mi][0]);
            tu_attr_b(rd, "half_pixel_centers", modes[mi][1]);
            rt_tensor *sz = TU_I32(TU_SHAPE(2), oh, ow);
            rt_tensor *rin[2] = {x, sz};
            rt_tensor *want = tu_run1(rd, rin, 2);
            float *dr = dev_put(NULL, (size_t)want->nelem * 4);
            ck_assert_int_eq(kn_cuda_resize_bilinear(dx, n, h, w, c, oh, ow, modes[mi][0],
                                                     modes[mi][1], dr, NULL),
                             MS_OK);
            check_dev(want, dr, 0);
            tu_unref(&sz, 1);
        }
    tu_unref(&x, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

START_TEST(test_transpose_pad) {
    rt_tensor *x = rand_t(TU_SHAPE(2, 5, 7, 3), -2, 2);
    float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
    float *dy = dev_put(NULL, (size_t)x->nelem * 4 * 4);
    const int perms[3][4] = {{0, 3, 1, 2}, {0, 2, 3, 1}, {3, 2, 1, 0}};
    for (int p = 0; p < 3; p++) {
        Tensorflow__NodeDef *d = tu_node_new("Transpose", "t");
        tu_attr_type(d, "T", RT_DT_FLOAT);
        tu_attr_type(d, "Tperm", RT_DT_INT32);
        rt_tensor *perm = TU_I32(TU_SHAPE(4), perms[p][0], perms[p][1], perms[p][2], perms[p][3]);
        rt_tensor *in[2] = {x, perm};
        rt_tensor *want = tu_run1(d, in, 2);
        ck_assert_int_eq(kn_cuda_transpose(dx, 4, x->shape.dim, perms[p], dy, NULL), MS_OK);
        check_dev(want, dy, 0);
        tu_unref(&perm, 1);
    }
    const int bad[4] = {0, 1, 1, 2};
    ck_assert_int_eq(kn_cuda_transpose(dx, 4, x->shape.dim, bad, dy, NULL), MS_EINVAL);
    for (int v2 = 0; v2 < 2; v2++) {
        Tensorflow__NodeDef *d = tu_node_new(v2 ? "PadV2" : "Pad", "p");
        tu_attr_type(d, "T", RT_DT_FLOAT);
        tu_attr_type(d, "Tpaddings", RT_DT_INT32);
        rt_tensor *pads = TU_I32(TU_SHAPE(4, 2), 0, 0, 0, 1, 2, 3, 0, 0);
        rt_tensor *cv = TU_F32(TU_SCALAR, -7.5f);
        rt_tensor *in[3] = {x, pads, cv};
        rt_tensor *want = tu_run1(d, in, v2 ? 3 : 2);
        ck_assert_int_eq(kn_cuda_pad_nhwc(dx, 2, 5, 7, 3, 0, 1, 2, 3, v2 ? -7.5f : 0.f, dy, NULL),
                         MS_OK);
        check_dev(want, dy, 0);
        tu_unref(&pads, 1);
        tu_unref(&cv, 1);
    }
    tu_unref(&x, 1);
    kn_cuda_arena_reset(g_arena);
}
END_TEST

/* ---- reductions over any axes ---- */
START_TEST(test_reduce) {
    static const char *const ops[5] = {"Sum", "Mean", "Max", "Min", "Prod"};
    static const struct {
        int rank;
        int64_t dims[4];
        int na;
        int32_t axes[4];
    } cases[] = {
        {4, {4, 33, 35, 40}, 2, {1, 2}}, /* spatial, few outputs: a block per output */
        {4, {4, 33, 35, 40}, 2, {0, 2}}, /* alternating: R K R K */
        {3, {64, 70, 9}, 1, {-1}},       /* many outputs, short: a thread per output */
        {3, {300, 20, 16}, 1, {0}},      /* leading axis, many outputs */
        {2, {3, 70000}, 2, {0, 1}},      /* everything: one output */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_shape xs = {.rank = cases[c].rank};
        for (int d = 0; d < xs.rank; d++) xs.dim[d] = cases[c].dims[d];
        rt_tensor *x = rand_t(xs, 0.999f, 1.001f); /* Prod stays finite */
        float *f = rt_tensor_f32(x);
        for (int64_t i = 0; i < x->nelem; i += 7) f[i] = -f[i]; /* |Prod| stays near 1 */
        float *dx = dev_put(f, (size_t)x->nelem * 4);
        int red[8] = {0};
        for (int i = 0; i < cases[c].na; i++)
            red[cases[c].axes[i] < 0 ? cases[c].axes[i] + xs.rank : cases[c].axes[i]] = 1;
        kn_cuda_reduce_shape p;
        kn_cuda__reduce_plan(&xs, red, &p);
        int exact = p.nout >= 2048 || p.count < 256; /* kn_cuda_reduce.cuh */
        rt_tensor *axes = tu_t(RT_DT_INT32, TU_SHAPE(cases[c].na), cases[c].axes, cases[c].na);
        for (int o = 0; o < 5; o++) {
            Tensorflow__NodeDef *def = tu_node_new(ops[o], "r");
            tu_attr_type(def, "T", RT_DT_FLOAT);
            tu_attr_type(def, "Tidx", RT_DT_INT32);
            rt_tensor *in[2] = {x, axes};
            rt_tensor *want = tu_run1(def, in, 2);
            float *dy = dev_put(NULL, (size_t)want->nelem * 4);
            ck_assert_msg(kn_cuda_reduce((kn_cuda_redop)o, &p, dx, dy, NULL) == MS_OK, "%s",
                          ms_errmsg());
            check_dev(want, dy, exact || o == 2 || o == 3 ? 0 : 1e-5f);
        }
        tu_unref(&axes, 1);
        tu_unref(&x, 1);
        kn_cuda_arena_reset(g_arena);
    }
}
END_TEST

/* ---- BatchMatMul through kn_cuda_bgemm, as the table drives it ---- */
START_TEST(test_batch_matmul) {
    static const struct {
        int rx;
        int64_t dx[4];
        int ry;
        int64_t dy[4];
        int adj_x, adj_y;
    } cases[] = {
        {3, {6, 33, 65}, 3, {6, 65, 17}, 0, 0},       /* strided batches */
        {3, {6, 65, 33}, 3, {6, 17, 65}, 1, 1},       /* adjoints */
        {4, {2, 3, 40, 64}, 2, {64, 24}, 0, 0},       /* y broadcast: one GEMM of 240 rows */
        {4, {2, 1, 9, 31}, 4, {1, 3, 7, 31}, 0, 1},   /* broadcast both ways: a GEMM per batch */
        {2, {12, 20}, 3, {5, 20, 8}, 0, 0},           /* x broadcast */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_shape xs = {.rank = cases[c].rx}, ys = {.rank = cases[c].ry};
        for (int d = 0; d < xs.rank; d++) xs.dim[d] = cases[c].dx[d];
        for (int d = 0; d < ys.rank; d++) ys.dim[d] = cases[c].dy[d];
        rt_tensor *x = rand_t(xs, -1, 1), *y = rand_t(ys, -1, 1);
        Tensorflow__NodeDef *def = tu_node_new("BatchMatMulV2", "bmm");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        tu_attr_b(def, "adj_x", cases[c].adj_x);
        tu_attr_b(def, "adj_y", cases[c].adj_y);
        rt_tensor *in[2] = {x, y};
        rt_tensor *want = tu_run1(def, in, 2);
        kn_cuda_bmm g;
        ck_assert(kn_cuda__bmm(&xs, &ys, cases[c].adj_x, cases[c].adj_y, 0, &g));
        float *dx = dev_put(rt_tensor_f32(x), (size_t)x->nelem * 4);
        float *dw = dev_put(rt_tensor_f32(y), (size_t)y->nelem * 4);
        float *dy = dev_put(NULL, (size_t)want->nelem * 4);
        int64_t pb = g.mode == KN_CUDA_BMM_STRIDED ? g.batch : 1;
        int64_t pm = g.mode == KN_CUDA_BMM_FLAT ? g.batch * g.m : g.m;
        kn_cuda_bgemm *plan = NULL;
        ck_assert_msg(kn_cuda_bgemm_plan(pb, pm, g.n, g.k, cases[c].adj_x, cases[c].adj_y,
                                         g.mode == KN_CUDA_BMM_STRIDED ? g.stride_x
                                         : g.mode == KN_CUDA_BMM_LOOP  ? g.m * g.k : 0,
                                         g.mode == KN_CUDA_BMM_STRIDED ? g.stride_w
                                         : g.mode == KN_CUDA_BMM_LOOP  ? g.k * g.n : 0,
                                         &plan) == MS_OK,
                      "%s", ms_errmsg());
        uint64_t wsb = kn_cuda_bgemm_workspace(plan);
        void *ws = wsb ? dev_put(NULL, wsb) : NULL;
        if (g.mode != KN_CUDA_BMM_LOOP) {
            ck_assert_msg(kn_cuda_bgemm_run(plan, dx, dw, dy, ws, NULL) == MS_OK, "%s", ms_errmsg());
        } else {
            for (int64_t i = 0; i < g.batch; i++) {
                int64_t ox, ow;
                kn_cuda__bmm_offsets(&g, i, &ox, &ow);
                ck_assert_msg(kn_cuda_bgemm_run(plan, dx + ox, dw + ow, dy + i * g.m * g.n, ws,
                                                NULL) == MS_OK,
                              "%s", ms_errmsg());
            }
        }
        check_dev(want, dy, 1e-5f);
        kn_cuda_bgemm_free(plan);
        tu_unref(in, 2);
        kn_cuda_arena_reset(g_arena);
    }
    kn_cuda_bgemm *plan = NULL;
    ck_assert_int_eq(kn_cuda_bgemm_plan(0, 4, 4, 4, 0, 0, 16, 16, &plan), MS_EINVAL);
}
END_TEST

/* The device bytes of want's size against want's bytes; drops want. */
static void check_bytes(rt_tensor *want, const void *dev, const char *what) {
    size_t nb = rt_tensor_nbytes(want);
    void *got = malloc(nb ? nb : 1);
    ck_assert_ptr_nonnull(got);
    dev_get(got, dev, nb);
    ck_assert_msg(memcmp(got, want->data, nb) == 0, "%s differs from the CPU", what);
    free(got);
    tu_unref(&want, 1);
}

/* params of dtype dt, element i = i * 2654435761 truncated: distinct bytes */
static rt_tensor *pattern_t(rt_dtype dt, rt_shape s) {
    rt_tensor *t = tu_iota_f32(s, 0, 0);
    size_t es = rt_dtype_size(dt), n = (size_t)t->nelem;
    uint8_t *b = malloc(n * es + 1);
    for (size_t i = 0; i < n * es; i++) b[i] = (uint8_t)((i * 2654435761u) >> 13);
    rt_tensor *r = tu_t(dt, s, b, (int)n);
    free(b);
    tu_unref(&t, 1);
    return r;
}

START_TEST(test_gather_slice_nearest) {
    /* GatherV2: params (3, 10, 5), indices (3, 4); axis 1 with and without batch_dims */
    const rt_dtype dts[3] = {RT_DT_FLOAT, RT_DT_INT64, RT_DT_UINT8};
    for (int t = 0; t < 3; t++)
        for (int bd = 0; bd < 2; bd++)
            for (int i64 = 0; i64 < 2; i64++) {
                rt_tensor *p = pattern_t(dts[t], TU_SHAPE(3, 10, 5));
                int64_t iv[12];
                for (int i = 0; i < 12; i++) iv[i] = (i * 7 + 3) % 10;
                rt_tensor *ix;
                if (i64) {
                    ix = tu_t(RT_DT_INT64, TU_SHAPE(3, 4), iv, 12);
                } else {
                    int32_t v32[12];
                    for (int i = 0; i < 12; i++) v32[i] = (int32_t)iv[i];
                    ix = tu_t(RT_DT_INT32, TU_SHAPE(3, 4), v32, 12);
                }
                rt_tensor *axis = TU_I32(TU_SCALAR, 1);
                Tensorflow__NodeDef *def = tu_node_new("GatherV2", "g");
                tu_attr_type(def, "Tparams", dts[t]);
                tu_attr_i(def, "batch_dims", bd);
                rt_tensor *in[3] = {p, ix, axis};
                rt_tensor *want = tu_run1(def, in, 3);
                kn_cuda_gather_shape g;
                rt_shape os;
                ck_assert(kn_cuda__gather_shape(&p->shape, &ix->shape, 1, bd, &g, &os));
                void *dp = dev_put(p->data, rt_tensor_nbytes(p));
                void *di = dev_put(ix->data, rt_tensor_nbytes(ix));
                void *dy = dev_put(NULL, rt_tensor_nbytes(want));
                ck_assert_int_eq(kn_cuda_gather(&g, dp, rt_dtype_size(dts[t]), di, i64, dy, NULL),
                                 MS_OK);
                check_bytes(want, dy, "GatherV2");
                tu_unref(in, 3);
                kn_cuda_arena_reset(g_arena);
            }
    /* StridedSlice of (6, 7, 8): [1:5:2, ::-1, ..., 3] with a new axis; and [..., -1] */
    static const struct {
        int n;
        int64_t b[4], e[4], s[4];
        int64_t masks[5];
    } ss[] = {
        {4, {1, 0, 0, 3}, {5, 0, 0, 4}, {2, -1, 1, 1}, {0, 2, 4, 0, 8}},
        {2, {0, -1}, {0, 0}, {1, 1}, {0, 0, 1, 0, 2}},
        {3, {0, 2, 7}, {6, 6, 0}, {3, 1, -3}, {0, 0, 0, 2, 0}},
    };
    for (size_t c = 0; c < sizeof ss / sizeof ss[0]; c++)
        for (int t = 0; t < 3; t++) {
            rt_tensor *x = pattern_t(dts[t], TU_SHAPE(6, 7, 8));
            rt_tensor *in[4] = {x, tu_t(RT_DT_INT64, TU_SHAPE(ss[c].n), ss[c].b, ss[c].n),
                                tu_t(RT_DT_INT64, TU_SHAPE(ss[c].n), ss[c].e, ss[c].n),
                                tu_t(RT_DT_INT64, TU_SHAPE(ss[c].n), ss[c].s, ss[c].n)};
            Tensorflow__NodeDef *def = tu_node_new("StridedSlice", "ss");
            tu_attr_type(def, "T", dts[t]);
            static const char *const keys[5] = {"begin_mask", "end_mask", "ellipsis_mask",
                                                "new_axis_mask", "shrink_axis_mask"};
            for (int i = 0; i < 5; i++) tu_attr_i(def, keys[i], ss[c].masks[i]);
            rt_tensor *want = tu_run1(def, in, 4);
            kn_cuda_strided p;
            rt_shape os;
            ck_assert(kn_cuda__strided_slice(&x->shape, ss[c].b, ss[c].e, ss[c].s, ss[c].n,
                                             ss[c].masks, &p, &os));
            void *dx = dev_put(x->data, rt_tensor_nbytes(x));
            void *dy = dev_put(NULL, rt_tensor_nbytes(want) + 1);
            ck_assert_int_eq(kn_cuda_strided_copy(&p, dx, rt_dtype_size(dts[t]), dy, NULL), MS_OK);
            check_bytes(want, dy, "StridedSlice");
            tu_unref(in, 4);
            kn_cuda_arena_reset(g_arena);
        }
    /* Slice of (6, 7, 8): begin (1, 2, 0), size (4, -1, 5) */
    {
        rt_tensor *x = pattern_t(RT_DT_FLOAT, TU_SHAPE(6, 7, 8));
        int64_t b[3] = {1, 2, 0}, sz[3] = {4, -1, 5};
        rt_tensor *in[3] = {x, tu_t(RT_DT_INT64, TU_SHAPE(3), b, 3),
                            tu_t(RT_DT_INT64, TU_SHAPE(3), sz, 3)};
        Tensorflow__NodeDef *def = tu_node_new("Slice", "sl");
        tu_attr_type(def, "T", RT_DT_FLOAT);
        rt_tensor *want = tu_run1(def, in, 3);
        kn_cuda_strided p;
        rt_shape os;
        ck_assert(kn_cuda__slice(&x->shape, b, sz, 3, &p, &os));
        void *dx = dev_put(x->data, rt_tensor_nbytes(x));
        void *dy = dev_put(NULL, rt_tensor_nbytes(want));
        ck_assert_int_eq(kn_cuda_strided_copy(&p, dx, 4, dy, NULL), MS_OK);
        check_bytes(want, dy, "Slice");
        tu_unref(in, 3);
        kn_cuda_arena_reset(g_arena);
    }
    /* ResizeNearestNeighbor of (2, 7, 9, 3): legacy / align_corners / half_pixel_centers */
    const int sizes[3][2] = {{16, 20}, {4, 5}, {7, 1}};
    for (int mode = 0; mode < 3; mode++)
        for (int sz = 0; sz < 3; sz++)
            for (int t = 0; t < 3; t += 2) { /* float and uint8 */
                rt_tensor *x = pattern_t(dts[t], TU_SHAPE(2, 7, 9, 3));
                rt_tensor *size = TU_I32(TU_SHAPE(2), sizes[sz][0], sizes[sz][1]);
                Tensorflow__NodeDef *def = tu_node_new("ResizeNearestNeighbor", "rn");
                tu_attr_type(def, "T", dts[t]);
                tu_attr_b(def, "align_corners", mode == 1);
                tu_attr_b(def, "half_pixel_centers", mode == 2);
                rt_tensor *in[2] = {x, size};
                rt_tensor *want = tu_run1(def, in, 2);
                void *dx = dev_put(x->data, rt_tensor_nbytes(x));
                void *dy = dev_put(NULL, rt_tensor_nbytes(want));
                ck_assert_int_eq(kn_cuda_resize_nearest(dx, rt_dtype_size(dts[t]), 2, 7, 9, 3,
                                                        sizes[sz][0], sizes[sz][1], mode == 1,
                                                        mode == 2, dy, NULL),
                                 MS_OK);
                check_bytes(want, dy, "ResizeNearestNeighbor");
                tu_unref(in, 2);
                kn_cuda_arena_reset(g_arena);
            }
}
END_TEST

START_TEST(test_arena_memory) {
    uint64_t f0, f1, f2, t;
    ck_assert_int_eq(kn_cuda_mem_info(&f0, &t), MS_OK);
    kn_cuda_arena *a = NULL;
    ck_assert_msg(kn_cuda_arena_new("model t version 1", 1024 * MIB, &a) == MS_OK, "%s",
                  ms_errmsg());
    ck_assert_int_eq(kn_cuda_mem_info(&f1, &t), MS_OK);
    ck_assert_msg(f0 - f1 >= 1000 * MIB, "free %llu -> %llu MiB after a 1 GiB arena",
                  (unsigned long long)(f0 >> 20), (unsigned long long)(f1 >> 20));
    kn_cuda_arena_free(a);
    ck_assert_int_eq(kn_cuda_mem_info(&f2, &t), MS_OK);
    ck_assert_msg(f2 + 64 * MIB >= f0, "free %llu MiB before, %llu MiB after unload",
                  (unsigned long long)(f0 >> 20), (unsigned long long)(f2 >> 20));
    /* the cap: 10 % of the device, arena of 20 % refused, the daemon's message */
    kn_cuda_budget_set(0.1, g_total);
    uint64_t held = kn_cuda_budget_held();
    ck_assert_int_eq(kn_cuda_arena_new("model big version 1", g_total / 5, &a), MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "--per_process_gpu_memory_fraction=0.1") != NULL, "%s",
                  ms_errmsg());
    ck_assert_uint_eq(kn_cuda_budget_held(), held);
    kn_cuda_budget_set(0, g_total);
    ck_assert_int_eq(kn_cuda_sticky(), 0);
}
END_TEST

int main(void) {
    kn_cuda_report r;
    kn_cuda_probe(NULL, &r);
    kn_device_spec spec = {KN_DEVICE_AUTO, -1};
    int gpu = -1;
    char why[768];
    kn_device_select(&spec, &r, &gpu, why, sizeof why);
    if (gpu < 0) {
        printf("cuda_ops: skipped: no usable GPU: %s\n", r.reason);
        return 77;
    }
    printf("cuda_ops: %s\n", why);
    /* CUDA is initialised in this process: no fork per test. */
    setenv("CK_FORK", "no", 1);
    if (kn_cuda_set_device(gpu) != MS_OK) {
        printf("cuda_ops: %s\n", ms_errmsg());
        return 1;
    }
    g_total = r.gpu[gpu].total_bytes;
    kn_cuda_budget_set(0, g_total);
    if (kn_cuda_arena_new("cuda_ops", 256 * MIB, &g_arena) != MS_OK) {
        printf("cuda_ops: %s\n", ms_errmsg());
        return 1;
    }
    const tu_case cases[] = {
        {"dicom_fused_bitexact", test_dicom_fused_bitexact},
        {"binary", test_binary},
        {"bias_act", test_bias_act},
        {"softmax", test_softmax},
        {"matmul", test_matmul},
        {"conv", test_conv},
        {"pool_mean_concat", test_pool_mean_concat},
        {"unary", test_unary},
        {"pool3d", test_pool3d},
        {"convnd", test_convnd},
        {"batch_norm_resize", test_batch_norm_resize},
        {"transpose_pad", test_transpose_pad},
        {"reduce", test_reduce},
        {"batch_matmul", test_batch_matmul},
        {"gather_slice_nearest", test_gather_slice_nearest},
        {"arena_memory", test_arena_memory},
    };
    int rc = tu_suite_main("cuda_ops", cases, sizeof(cases) / sizeof(cases[0]));
    kn_cuda_arena_free(g_arena);
    return rc;
}
#endif
