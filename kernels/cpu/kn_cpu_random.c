/* kn_cpu_random.c - TensorFlow's stateless random ops on the Philox4x32-10
 * generator, with TensorFlow's numbers bit for bit (Keras 3 augmentation
 * layers, RandomFlip and RandomRotation, draw from them at serving time).
 *
 *   StatelessRandomGetKeyCounter(seed[2]) -> key uint64[1], counter uint64[2]
 *   StatelessRandomGetAlg() -> 1 (Philox, what TensorFlow picks on CPU)
 *   StatelessRandomUniformV2 / NormalV2 (shape, key, counter, alg)
 *   StatelessRandomUniformIntV2 (shape, key, counter, alg, minval, maxval)
 *   StatelessRandomUniform / Normal (shape, seed[2]): V1, the key and
 *     counter made from the seed as GetKeyCounter does
 *
 * The stream: element i of the output comes from Philox block
 * philox(counter + i / G, key), word i % G for float and int32 (G = 4), two
 * words per value for double and int64 (G = 2). Floats take 23 random
 * mantissa bits under exponent 0 minus 1 ([0, 1)); normals are Box-Muller
 * pairs of those (u1 floored at 1e-7; the last bit of log/sin/cos is the C
 * library's); integers are minval + word % (maxval - minval). Algorithm 2
 * (ThreeFry) is not supported. */
#include <math.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_philox.h"
#include "kn_cpu_util.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define KN_TWO_PI 6.283185307179586 /* the double nearest 2 pi, as 2.0 * M_PI */

void kn__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void kn__philox_skip(uint32_t ctr[4], uint64_t n) {
    uint64_t lo = ((uint64_t)ctr[1] << 32 | ctr[0]) + n;
    uint64_t hi = (uint64_t)ctr[3] << 32 | ctr[2];
    if (lo < n) hi++;
    ctr[0] = (uint32_t)lo, ctr[1] = (uint32_t)(lo >> 32);
    ctr[2] = (uint32_t)hi, ctr[3] = (uint32_t)(hi >> 32);
}

void kn__philox_key_counter(uint64_t seed0, uint64_t seed1, uint64_t *key, uint64_t counter[2]) {
    const uint32_t k[2] = {0x3ec8f720u, 0x02461e29u};
    const uint32_t c[4] = {(uint32_t)seed0, (uint32_t)(seed0 >> 32), (uint32_t)seed1,
                           (uint32_t)(seed1 >> 32)};
    uint32_t mix[4];
    kn__philox4x32_10(c, k, mix);
    *key = (uint64_t)mix[1] << 32 | mix[0];
    counter[0] = 0;
    counter[1] = (uint64_t)mix[3] << 32 | mix[2];
}

float kn__philox_u32_to_float(uint32_t x) {
    uint32_t bits = (127u << 23) | (x & 0x7fffffu);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f - 1.0f;
}

double kn__philox_u64_to_double(uint32_t hi, uint32_t lo) {
    uint64_t bits = (1023ull << 52) | ((uint64_t)(hi & 0xfffffu) << 32) | lo;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d - 1.0;
}

/* ---- inputs ---- */

static ms_status read_seed(const kn_node *n, const rt_tensor *s, uint64_t seed[2]) {
    if (s->nelem != 2 || s->shape.rank != 1)
        return KN_EINVAL(n, "seed must have shape [2], got %s", kn__shp(&s->shape));
    if (s->dtype == RT_DT_INT32) {
        /* int32 seeds widen with their sign, as TensorFlow does. */
        seed[0] = (uint64_t)(int64_t)((const int32_t *)s->data)[0];
        seed[1] = (uint64_t)(int64_t)((const int32_t *)s->data)[1];
    } else if (s->dtype == RT_DT_INT64) {
        seed[0] = (uint64_t)((const int64_t *)s->data)[0];
        seed[1] = (uint64_t)((const int64_t *)s->data)[1];
    } else {
        return KN_EINVAL(n, "seed must be int32 or int64, got %s", rt_dtype_name(s->dtype));
    }
    return MS_OK;
}

static ms_status read_shape(const kn_node *n, const rt_tensor *t, rt_shape *s) {
    int64_t d[RT_MAX_RANK];
    int cnt = 0;
    if (t->shape.rank > 1) return KN_EINVAL(n, "shape must be a vector, got %s", kn__shp(&t->shape));
    ms_status st = kn__read_ints(n, t, "shape", d, RT_MAX_RANK, &cnt);
    if (st != MS_OK) return st;
    s->rank = cnt;
    for (int i = 0; i < cnt; i++) {
        if (d[i] < 0) return KN_EINVAL(n, "shape has a negative dimension %lld", (long long)d[i]);
        s->dim[i] = d[i];
    }
    return MS_OK;
}

/* key (uint64 [1]), counter (uint64, >= 2 values), alg (int32 scalar). */
static ms_status read_key_counter(const kn_node *n, rt_tensor *const *in, uint32_t key[2],
                                  uint32_t ctr[4]) {
    const rt_tensor *k = in[1], *c = in[2], *a = in[3];
    if (k->dtype != RT_DT_UINT64 || k->nelem != 1 || k->shape.rank != 1)
        return KN_EINVAL(n, "key must be uint64 of shape [1], got %s %s", rt_dtype_name(k->dtype),
                         kn__shp(&k->shape));
    if (c->dtype != RT_DT_UINT64 || c->nelem < 2 || c->shape.rank != 1)
        return KN_EINVAL(n, "counter must be a uint64 vector of at least 2 values, got %s %s",
                         rt_dtype_name(c->dtype), kn__shp(&c->shape));
    int64_t alg = 0;
    ms_status st = kn__read_int1(n, a, "alg", &alg);
    if (st != MS_OK) return st;
    if (alg != 1 && alg != 3)
        return KN_EINVAL(n, "RNG algorithm %lld is not supported (1 Philox, 3 auto-select)",
                         (long long)alg);
    uint64_t kv = ((const uint64_t *)k->data)[0];
    const uint64_t *cv = c->data;
    key[0] = (uint32_t)kv, key[1] = (uint32_t)(kv >> 32);
    ctr[0] = (uint32_t)cv[0], ctr[1] = (uint32_t)(cv[0] >> 32);
    ctr[2] = (uint32_t)cv[1], ctr[3] = (uint32_t)(cv[1] >> 32);
    return MS_OK;
}

/* ---- the fill ---- */

typedef enum { DIST_UNIFORM, DIST_NORMAL, DIST_INT } dist_kind;

typedef struct {
    dist_kind kind;
    int64_t lo;      /* DIST_INT */
    uint64_t range;  /* DIST_INT: maxval - minval, > 0 */
} dist;

static void box_muller_f(uint32_t x0, uint32_t x1, float *f0, float *f1) {
    float u1 = kn__philox_u32_to_float(x0);
    if (u1 < 1.0e-7f) u1 = 1.0e-7f;
    const float v1 = (float)(KN_TWO_PI * (double)kn__philox_u32_to_float(x1));
    const float u2 = sqrtf(-2.0f * logf(u1));
    *f0 = sinf(v1) * u2;
    *f1 = cosf(v1) * u2;
}

static void box_muller_d(const uint32_t w[4], double *d0, double *d1) {
    double u1 = kn__philox_u64_to_double(w[0], w[1]);
    if (u1 < 1.0e-7) u1 = 1.0e-7;
    const double v1 = KN_TWO_PI * kn__philox_u64_to_double(w[2], w[3]);
    const double u2 = sqrt(-2.0 * log(u1));
    *d0 = sin(v1) * u2;
    *d1 = cos(v1) * u2;
}

/* Values of one Philox block: 4 for 32-bit outputs, 2 for 64-bit ones. */
static int block_values(const dist *d, rt_dtype dt, const uint32_t w[4], void *vals) {
    if (dt == RT_DT_FLOAT) {
        float *f = vals;
        if (d->kind == DIST_NORMAL) {
            box_muller_f(w[0], w[1], &f[0], &f[1]);
            box_muller_f(w[2], w[3], &f[2], &f[3]);
        } else {
            for (int i = 0; i < 4; i++) f[i] = kn__philox_u32_to_float(w[i]);
        }
        return 4;
    }
    if (dt == RT_DT_DOUBLE) {
        double *f = vals;
        if (d->kind == DIST_NORMAL) {
            box_muller_d(w, &f[0], &f[1]);
        } else {
            f[0] = kn__philox_u64_to_double(w[0], w[1]);
            f[1] = kn__philox_u64_to_double(w[2], w[3]);
        }
        return 2;
    }
    if (dt == RT_DT_INT32 || dt == RT_DT_UINT32) {
        uint32_t *o = vals;
        for (int i = 0; i < 4; i++) o[i] = (uint32_t)d->lo + w[i] % (uint32_t)d->range;
        return 4;
    }
    uint64_t *o = vals; /* int64, uint64 */
    for (int i = 0; i < 2; i++) {
        uint64_t bits = (uint64_t)w[2 * i + 1] << 32 | w[2 * i];
        o[i] = (uint64_t)d->lo + bits % d->range;
    }
    return 2;
}

static ms_status fill(kn_ctx *ctx, const kn_node *n, const rt_shape *shape, rt_dtype dt,
                      const dist *d, const uint32_t key[2], const uint32_t ctr0[4],
                      rt_tensor **out) {
    ms_status st = kn__output(ctx, n, 0, dt, shape, out);
    if (st != MS_OK) return st;
    size_t es = rt_dtype_size(dt);
    char *dst = (*out)->data;
    uint32_t ctr[4] = {ctr0[0], ctr0[1], ctr0[2], ctr0[3]}, w[4];
    uint64_t vals[4];
    for (int64_t i = 0; i < (*out)->nelem;) {
        kn__philox4x32_10(ctr, key, w);
        kn__philox_skip(ctr, 1);
        int g = block_values(d, dt, w, vals);
        int64_t take = (*out)->nelem - i < g ? (*out)->nelem - i : g;
        memcpy(dst + (size_t)i * es, vals, (size_t)take * es);
        i += take;
    }
    return MS_OK;
}

static ms_status float_dtype(const kn_node *n, rt_dtype *dt) {
    *dt = kn_attr_type(n, "dtype", RT_DT_FLOAT);
    if (*dt != RT_DT_FLOAT && *dt != RT_DT_DOUBLE)
        return KN_EINVAL(n, "dtype %s is not supported (float, double)", rt_dtype_name(*dt));
    return MS_OK;
}

/* ---- ops ---- */

static ms_status get_key_counter_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                         rt_tensor *const *in, rt_tensor **out) {
    (void)st_;
    ms_status st = kn__need_inputs(n, in, 1);
    uint64_t seed[2], key, counter[2];
    if (st == MS_OK) st = read_seed(n, in[0], seed);
    if (st != MS_OK) return st;
    kn__philox_key_counter(seed[0], seed[1], &key, counter);
    rt_shape s1 = {.rank = 1, .dim = {1}}, s2 = {.rank = 1, .dim = {2}};
    if ((st = kn__output(ctx, n, 0, RT_DT_UINT64, &s1, &out[0])) != MS_OK) return st;
    ((uint64_t *)out[0]->data)[0] = key;
    if (n->nout > 1) {
        if ((st = kn__output(ctx, n, 1, RT_DT_UINT64, &s2, &out[1])) != MS_OK) return st;
        memcpy(out[1]->data, counter, sizeof counter);
    }
    return MS_OK;
}

static ms_status get_alg_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)st_, (void)in;
    rt_shape s0 = {.rank = 0};
    ms_status st = kn__output(ctx, n, 0, RT_DT_INT32, &s0, &out[0]);
    if (st == MS_OK) ((int32_t *)out[0]->data)[0] = 1;
    return st;
}

static ms_status v2_compute(kn_ctx *ctx, const kn_node *n, rt_tensor *const *in, rt_tensor **out,
                            dist_kind kind) {
    ms_status st = kn__need_inputs(n, in, kind == DIST_INT ? 6 : 4);
    if (st != MS_OK) return st;
    rt_shape shape;
    uint32_t key[2], ctr[4];
    if ((st = read_shape(n, in[0], &shape)) != MS_OK) return st;
    if ((st = read_key_counter(n, in, key, ctr)) != MS_OK) return st;
    dist d = {.kind = kind};
    rt_dtype dt;
    if (kind == DIST_INT) {
        dt = kn_attr_type(n, "dtype", RT_DT_INT32);
        if (dt != RT_DT_INT32 && dt != RT_DT_INT64 && dt != RT_DT_UINT32 && dt != RT_DT_UINT64)
            return KN_EINVAL(n, "dtype %s is not supported", rt_dtype_name(dt));
        if (in[4]->dtype != dt || in[5]->dtype != dt || in[4]->nelem != 1 || in[5]->nelem != 1 ||
            in[4]->shape.rank != 0 || in[5]->shape.rank != 0)
            return KN_EINVAL(n, "minval and maxval must be %s scalars", rt_dtype_name(dt));
        int64_t lo, hi;
        int wide = rt_dtype_size(dt) == 8;
        if (wide) {
            lo = ((const int64_t *)in[4]->data)[0], hi = ((const int64_t *)in[5]->data)[0];
        } else if (dt == RT_DT_INT32) {
            lo = ((const int32_t *)in[4]->data)[0], hi = ((const int32_t *)in[5]->data)[0];
        } else {
            lo = ((const uint32_t *)in[4]->data)[0], hi = ((const uint32_t *)in[5]->data)[0];
        }
        int ok = dt == RT_DT_UINT64 ? (uint64_t)lo < (uint64_t)hi : lo < hi;
        if (!ok) return KN_EINVAL(n, "Need minval < maxval");
        d.lo = lo;
        d.range = wide ? (uint64_t)hi - (uint64_t)lo : (uint64_t)(uint32_t)((uint32_t)hi - (uint32_t)lo);
    } else if ((st = float_dtype(n, &dt)) != MS_OK) {
        return st;
    }
    return fill(ctx, n, &shape, dt, &d, key, ctr, &out[0]);
}

static ms_status uniform_v2_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)st_;
    return v2_compute(ctx, n, in, out, DIST_UNIFORM);
}

static ms_status normal_v2_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)st_;
    return v2_compute(ctx, n, in, out, DIST_NORMAL);
}

static ms_status uniform_int_v2_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)st_;
    return v2_compute(ctx, n, in, out, DIST_INT);
}

static ms_status v1_compute(kn_ctx *ctx, const kn_node *n, rt_tensor *const *in, rt_tensor **out,
                            dist_kind kind) {
    ms_status st = kn__need_inputs(n, in, 2);
    rt_shape shape;
    uint64_t seed[2], key, counter[2];
    rt_dtype dt;
    if (st == MS_OK) st = read_shape(n, in[0], &shape);
    if (st == MS_OK) st = read_seed(n, in[1], seed);
    if (st == MS_OK) st = float_dtype(n, &dt);
    if (st != MS_OK) return st;
    kn__philox_key_counter(seed[0], seed[1], &key, counter);
    const uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    const uint32_t c[4] = {(uint32_t)counter[0], (uint32_t)(counter[0] >> 32),
                           (uint32_t)counter[1], (uint32_t)(counter[1] >> 32)};
    dist d = {.kind = kind};
    return fill(ctx, n, &shape, dt, &d, k, c, &out[0]);
}

static ms_status uniform_v1_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                    rt_tensor *const *in, rt_tensor **out) {
    (void)st_;
    return v1_compute(ctx, n, in, out, DIST_UNIFORM);
}

static ms_status normal_v1_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)st_;
    return v1_compute(ctx, n, in, out, DIST_NORMAL);
}

const kn_kernel kn_cpu_random_kernels[] = {
    {.op = "StatelessRandomGetKeyCounter", .compute = get_key_counter_compute},
    {.op = "StatelessRandomGetAlg", .compute = get_alg_compute},
    {.op = "StatelessRandomUniformV2", .compute = uniform_v2_compute},
    {.op = "StatelessRandomNormalV2", .compute = normal_v2_compute},
    {.op = "StatelessRandomUniformIntV2", .compute = uniform_int_v2_compute},
    {.op = "StatelessRandomUniform", .compute = uniform_v1_compute},
    {.op = "StatelessRandomNormal", .compute = normal_v1_compute},
    {.op = NULL},
};
