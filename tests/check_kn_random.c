/* check_kn_random.c - the stateless Philox random ops (kernels/cpu/
 * kn_cpu_random.c) and ImageProjectiveTransformV2/V3 (kn_cpu_imgproj.c).
 *
 * Philox4x32-10 is held to the published known-answer vectors of its authors
 * (Random123's kat_vectors); the ops' streams to TensorFlow's definition
 * (element i from block philox(counter + i / 4, key), word i % 4, through the
 * 23-bit mantissa float), computed here from the KAT-checked block function;
 * the projective transform to cases worked out by hand. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "kn_cpu_philox.h"
#include "util_node.h"

START_TEST(test_philox_kat) {
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++) {
        uint32_t out[4];
        kn__philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int w = 0; w < 4; w++)
            ck_assert_msg(out[w] == kat[i].want[w], "kat %zu word %d: %08x, want %08x", i, w,
                          out[w], kat[i].want[w]);
    }
    uint32_t c[4] = {0xffffffff, 0xffffffff, 0, 0};
    kn__philox_skip(c, 1);
    ck_assert(c[0] == 0 && c[1] == 0 && c[2] == 1 && c[3] == 0);
    uint32_t d[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
    kn__philox_skip(d, 1);
    ck_assert(d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 0);
    ck_assert(kn__philox_u32_to_float(0) == 0.0f);
    ck_assert(kn__philox_u32_to_float(0x00400000u) == 0.5f);
    ck_assert(kn__philox_u32_to_float(0xff400000u) == 0.5f); /* only 23 low bits count */
    ck_assert(kn__philox_u32_to_float(0xffffffffu) == 1.0f - ldexpf(1.0f, -23));
    ck_assert(kn__philox_u64_to_double(0xfffff, 0xffffffffu) == 1.0 - ldexp(1.0, -52));
    ck_assert(kn__philox_u64_to_double(0x80000, 0) == 0.5);
}
END_TEST

static rt_tensor *u64t(rt_shape s, const uint64_t *v, int n) { return tu_t(RT_DT_UINT64, s, v, n); }

/* The block for counter + g. */
static void block(const uint32_t key[2], const uint64_t counter[2], uint64_t g, uint32_t w[4]) {
    uint32_t c[4] = {(uint32_t)counter[0], (uint32_t)(counter[0] >> 32), (uint32_t)counter[1],
                     (uint32_t)(counter[1] >> 32)};
    kn__philox_skip(c, g);
    kn__philox4x32_10(c, key, w);
}

START_TEST(test_get_key_counter) {
    /* An int32 seed widens with its sign: (-1, 2) -> seed0 = 2^64 - 1. */
    rt_tensor *seed = TU_I32(TU_SHAPE(2), -1, 2);
    rt_tensor *out[2] = {NULL, NULL};
    Tensorflow__NodeDef *def = tu_node_new("StatelessRandomGetKeyCounter", "kc");
    ck_assert_int_eq(tu_run(def, &seed, 1, out, 2), MS_OK);
    tu_node_free(def);
    const uint32_t scramble[2] = {0x3ec8f720u, 0x02461e29u};
    const uint32_t c[4] = {0xffffffffu, 0xffffffffu, 2, 0};
    uint32_t mix[4];
    kn__philox4x32_10(c, scramble, mix);
    tu_check_shape(out[0], RT_DT_UINT64, TU_SHAPE(1));
    tu_check_shape(out[1], RT_DT_UINT64, TU_SHAPE(2));
    const uint64_t *k = out[0]->data, *ctr = out[1]->data;
    ck_assert(k[0] == ((uint64_t)mix[1] << 32 | mix[0]));
    ck_assert(ctr[0] == 0 && ctr[1] == ((uint64_t)mix[3] << 32 | mix[2]));
    /* The same seed as int64 gives the same key and counter. */
    rt_tensor *seed64 = TU_I64(TU_SHAPE(2), -1, 2);
    rt_tensor *o2[2] = {NULL, NULL};
    def = tu_node_new("StatelessRandomGetKeyCounter", "kc64");
    ck_assert_int_eq(tu_run(def, &seed64, 1, o2, 2), MS_OK);
    tu_node_free(def);
    ck_assert(memcmp(o2[0]->data, k, 8) == 0 && memcmp(o2[1]->data, ctr, 16) == 0);
    tu_unref(out, 2);
    tu_unref(o2, 2);
    rt_tensor_unref(seed64);
    rt_tensor_unref(seed);
    rt_tensor *bad = TU_I32(TU_SHAPE(3), 1, 2, 3);
    tu_run_fail(tu_node_new("StatelessRandomGetKeyCounter", "kc_bad"), &bad, 1, 2, MS_EINVAL,
                "shape [2]");
    rt_tensor_unref(bad);
}
END_TEST

START_TEST(test_uniform_v2) {
    /* counter[0] = 2^64 - 2: the second block carries into counter[1]. */
    const uint64_t keyv = 0x0123456789abcdefull, ctrv[2] = {0xfffffffffffffffeull, 7};
    const uint32_t key[2] = {(uint32_t)keyv, (uint32_t)(keyv >> 32)};
    rt_tensor *in[4] = {TU_I32(TU_SHAPE(2), 2, 5), u64t(TU_SHAPE(1), &keyv, 1),
                        u64t(TU_SHAPE(2), ctrv, 2), TU_I32(TU_SCALAR, 1)};
    rt_tensor *o = tu_run1(tu_node_new("StatelessRandomUniformV2", "u"), in, 4);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(2, 5));
    for (int i = 0; i < 10; i++) {
        uint32_t w[4];
        block(key, ctrv, (uint64_t)i / 4, w);
        float want = kn__philox_u32_to_float(w[i % 4]);
        ck_assert_msg(((float *)o->data)[i] == want, "element %d", i);
        ck_assert(want >= 0.0f && want < 1.0f);
    }
    rt_tensor_unref(o);
    /* double: two words per value, two values per block. */
    Tensorflow__NodeDef *def = tu_node_new("StatelessRandomUniformV2", "ud");
    tu_attr_type(def, "dtype", RT_DT_DOUBLE);
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(TU_SCALAR, 3); /* auto-select is Philox */
    o = tu_run1(def, in, 4);
    for (int i = 0; i < 10; i++) {
        uint32_t w[4];
        block(key, ctrv, (uint64_t)i / 2, w);
        ck_assert(((double *)o->data)[i] ==
                  kn__philox_u64_to_double(w[2 * (i % 2)], w[2 * (i % 2) + 1]));
    }
    rt_tensor_unref(o);
    /* normal: Box-Muller pairs. */
    o = tu_run1(tu_node_new("StatelessRandomNormalV2", "n"), in, 4);
    for (int i = 0; i < 10; i += 2) {
        uint32_t w[4];
        block(key, ctrv, (uint64_t)i / 4, w);
        double u1 = kn__philox_u32_to_float(w[i % 4]);
        double u2 = kn__philox_u32_to_float(w[i % 4 + 1]);
        if (u1 < 1e-7) u1 = 1e-7;
        double r = sqrt(-2.0 * log(u1));
        ck_assert(fabs(((float *)o->data)[i] - r * sin(2 * 3.14159265358979 * u2)) < 1e-5);
        ck_assert(fabs(((float *)o->data)[i + 1] - r * cos(2 * 3.14159265358979 * u2)) < 1e-5);
    }
    rt_tensor_unref(o);
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(TU_SCALAR, 2);
    tu_run_fail(tu_node_new("StatelessRandomUniformV2", "u_tf"), in, 4, 1, MS_EINVAL,
                "not supported");
    rt_tensor_unref(in[3]);
    in[3] = TU_I32(TU_SCALAR, 1);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(1), 5);
    tu_run_fail(tu_node_new("StatelessRandomUniformV2", "u_key"), in, 4, 1, MS_EINVAL, "key");
    tu_unref(in, 4);
}
END_TEST

START_TEST(test_uniform_int_v2) {
    const uint64_t keyv = 42, ctrv[2] = {1, 2};
    const uint32_t key[2] = {42, 0};
    rt_tensor *in[6] = {TU_I32(TU_SHAPE(1), 7), u64t(TU_SHAPE(1), &keyv, 1),
                        u64t(TU_SHAPE(2), ctrv, 2), TU_I32(TU_SCALAR, 1),
                        TU_I32(TU_SCALAR, -5), TU_I32(TU_SCALAR, 5)};
    rt_tensor *o = tu_run1(tu_node_new("StatelessRandomUniformIntV2", "ui"), in, 6);
    tu_check_shape(o, RT_DT_INT32, TU_SHAPE(7));
    for (int i = 0; i < 7; i++) {
        uint32_t w[4];
        block(key, ctrv, (uint64_t)i / 4, w);
        ck_assert_int_eq(((int32_t *)o->data)[i], -5 + (int32_t)(w[i % 4] % 10));
    }
    rt_tensor_unref(o);
    rt_tensor_unref(in[5]);
    in[5] = TU_I32(TU_SCALAR, -5);
    tu_run_fail(tu_node_new("StatelessRandomUniformIntV2", "ui_bad"), in, 6, 1, MS_EINVAL,
                "minval < maxval");
    tu_unref(in, 6);
}
END_TEST

/* ---- ImageProjectiveTransformV3 ---- */

static rt_tensor *proj(rt_tensor *img, const float *t8, int rows, int oh, int ow, float fill,
                       const char *mode, const char *interp) {
    rt_tensor *in[4] = {img, tu_t(RT_DT_FLOAT, TU_SHAPE(rows, 8), t8, rows * 8),
                        TU_I32(TU_SHAPE(2), oh, ow), TU_F32(TU_SCALAR, fill)};
    Tensorflow__NodeDef *def = tu_node_new("ImageProjectiveTransformV3", "pt");
    tu_attr_s(def, "fill_mode", mode);
    tu_attr_s(def, "interpolation", interp);
    tu_attr_type(def, "dtype", RT_DT_FLOAT);
    rt_tensor *o = tu_run1(def, in, 4);
    tu_unref(in + 1, 3);
    return o;
}

#define ROW(a2) ((const float[]){1, 0, (a2), 0, 1, 0, 0, 0})

START_TEST(test_projective) {
    rt_tensor *img = TU_F32(TU_SHAPE(1, 1, 3, 1), 1, 2, 3);
    rt_tensor *o = proj(img, ROW(0), 1, 1, 3, 9, "CONSTANT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 1, 2, 3);
    rt_tensor_unref(o);
    /* input x = output x + 1: shifts left, the right edge reads fill 9. */
    o = proj(img, ROW(1), 1, 1, 3, 9, "CONSTANT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 2, 3, 9);
    rt_tensor_unref(o);
    /* x - 2: -2 -> b, -1 -> a (d c b a | a b c d). */
    o = proj(img, ROW(-2), 1, 1, 3, 9, "REFLECT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 2, 1, 1);
    rt_tensor_unref(o);
    /* x - 1 wraps: -1 -> c. */
    o = proj(img, ROW(-1), 1, 1, 3, 9, "WRAP", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 3, 1, 2);
    rt_tensor_unref(o);
    o = proj(img, ROW(2), 1, 1, 3, 9, "NEAREST", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 3, 3, 3);
    rt_tensor_unref(o);
    /* x + 0.5, bilinear: halfway between neighbours, the last one half fill 0. */
    o = proj(img, ROW(0.5f), 1, 1, 3, 0, "CONSTANT", "BILINEAR");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 1e-6f, 1.5f, 2.5f, 1.5f);
    rt_tensor_unref(o);
    /* nearest rounds halves away from zero: 0.5 -> 1, 1.5 -> 2, 2.5 -> 3 (outside). */
    o = proj(img, ROW(0.5f), 1, 1, 3, 0, "CONSTANT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 2, 3, 0);
    rt_tensor_unref(o);
    /* c0 = -1: k = 1 - x; k == 0 at x = 1 reads fill; x = 2 maps to -2 (outside). */
    o = proj(img, (const float[]){1, 0, 0, 0, 1, 0, -1, 0}, 1, 1, 3, 7, "CONSTANT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(1, 1, 3, 1), 0, 1, 7, 7);
    rt_tensor_unref(o);
    rt_tensor_unref(img);
    /* Two images, one transform each; output 2 x 2 crops; y from x (a transpose). */
    img = TU_F32(TU_SHAPE(2, 2, 3, 1), 1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60);
    const float two[16] = {1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0};
    o = proj(img, two, 2, 2, 2, 0, "CONSTANT", "NEAREST");
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2, 1), 0, 1, 2, 4, 5, 10, 40, 20, 50);
    rt_tensor_unref(o);
    rt_tensor *in[4] = {img, tu_t(RT_DT_FLOAT, TU_SHAPE(3, 8), (const float[24]){0}, 24),
                        TU_I32(TU_SHAPE(2), 2, 3), TU_F32(TU_SCALAR, 0)};
    Tensorflow__NodeDef *def = tu_node_new("ImageProjectiveTransformV3", "pt_bad");
    tu_attr_s(def, "interpolation", "NEAREST");
    tu_run_fail(def, in, 4, 1, MS_EINVAL, "num_images x 8");
    tu_unref(in, 4);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"philox_kat", test_philox_kat},
        {"get_key_counter", test_get_key_counter},
        {"uniform_v2", test_uniform_v2},
        {"uniform_int_v2", test_uniform_int_v2},
        {"projective", test_projective},
    };
    return tu_suite_main("kn_random", cases, sizeof(cases) / sizeof(cases[0]));
}
