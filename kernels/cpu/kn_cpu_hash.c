/* kn_cpu_hash.c - CPU kernels that hash strings into buckets:
 * StringToHashBucketFast, StringToHashBucketStrong and the legacy
 * StringToHashBucket.
 *
 * StringToHashBucketFast is TensorFlow's Fingerprint64 of each string modulo
 * num_buckets. Fingerprint64 is FarmHash's 64-bit fingerprint, whose bytes
 * TensorFlow promises never to change; it is the "na" variant of FarmHash's
 * Hash64 (seed 81, the CityHash-style mixers HashLen16 / ShiftMix over 0-16,
 * 17-32, 33-64 byte inputs and a 64-byte block loop for longer ones), written
 * here from the algorithm's description: little-endian 64- and 32-bit loads,
 * rotations to the right.
 *
 * StringToHashBucketStrong is SipHash-2-4 keyed by the attr key = [k0, k1]
 * (two 64-bit words, the 128-bit SipHash key k0 || k1 in little-endian),
 * modulo num_buckets.
 *
 * StringToHashBucket is TensorFlow's own Hash64 (tensorflow/core/lib/hash):
 * MurmurHash2's 64-bit MurmurHash64A with the seed 0xDECAFCAFFE, 8-byte
 * little-endian blocks, the tail bytes taken unsigned.
 *
 * All take the hash as unsigned before the modulo.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* ---- FarmHash Fingerprint64 (farmhashna Hash64) ---- */

static const uint64_t FH_K0 = 0xc3a5c85c97cb3127ull;
static const uint64_t FH_K1 = 0xb492b66fbe98f273ull;
static const uint64_t FH_K2 = 0x9ae16a3b2f90404full;

static uint64_t ld64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rotr(uint64_t v, int s) {
    return s == 0 ? v : (v >> s) | (v << (64 - s));
}

static uint64_t shift_mix(uint64_t v) {
    return v ^ (v >> 47);
}

static uint64_t hash_len16(uint64_t u, uint64_t v, uint64_t mul) {
    uint64_t a = (u ^ v) * mul;
    a ^= a >> 47;
    uint64_t b = (v ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

static uint64_t hash_0to16(const uint8_t *s, size_t len) {
    if (len >= 8) {
        uint64_t mul = FH_K2 + len * 2;
        uint64_t a = ld64(s) + FH_K2, b = ld64(s + len - 8);
        uint64_t c = rotr(b, 37) * mul + a, d = (rotr(a, 25) + b) * mul;
        return hash_len16(c, d, mul);
    }
    if (len >= 4) {
        uint64_t mul = FH_K2 + len * 2;
        uint64_t a = ld32(s);
        return hash_len16(len + (a << 3), ld32(s + len - 4), mul);
    }
    if (len > 0) {
        uint8_t a = s[0], b = s[len >> 1], c = s[len - 1];
        uint32_t y = (uint32_t)a + ((uint32_t)b << 8);
        uint32_t z = (uint32_t)len + ((uint32_t)c << 2);
        return shift_mix(y * FH_K2 ^ z * FH_K0) * FH_K2;
    }
    return FH_K2;
}

static uint64_t hash_17to32(const uint8_t *s, size_t len) {
    uint64_t mul = FH_K2 + len * 2;
    uint64_t a = ld64(s) * FH_K1, b = ld64(s + 8);
    uint64_t c = ld64(s + len - 8) * mul, d = ld64(s + len - 16) * FH_K2;
    return hash_len16(rotr(a + b, 43) + rotr(c, 30) + d, a + rotr(b + FH_K2, 18) + c, mul);
}

static uint64_t hash_33to64(const uint8_t *s, size_t len) {
    uint64_t mul = FH_K2 + len * 2;
    uint64_t a = ld64(s) * FH_K2, b = ld64(s + 8);
    uint64_t c = ld64(s + len - 8) * mul, d = ld64(s + len - 16) * FH_K2;
    uint64_t y = rotr(a + b, 43) + rotr(c, 30) + d;
    uint64_t z = hash_len16(y, a + rotr(b + FH_K2, 18) + c, mul);
    uint64_t e = ld64(s + 16) * mul, f = ld64(s + 24);
    uint64_t g = (y + ld64(s + len - 32)) * mul, h = (z + ld64(s + len - 24)) * mul;
    return hash_len16(rotr(e + f, 43) + rotr(g, 30) + h, e + rotr(f + a, 18) + g, mul);
}

typedef struct {
    uint64_t first, second;
} u64pair;

/* The 32-byte weak hash of w, x, y, z with seeds a, b. */
static u64pair weak32(const uint8_t *s, uint64_t a, uint64_t b) {
    uint64_t w = ld64(s), x = ld64(s + 8), y = ld64(s + 16), z = ld64(s + 24);
    a += w;
    b = rotr(b + a + z, 21);
    uint64_t c = a;
    a += x;
    a += y;
    b += rotr(a, 44);
    return (u64pair){a + z, b + c};
}

/* Fingerprint64 of len bytes at s. */
static uint64_t fingerprint64(const uint8_t *s, size_t len) {
    const uint64_t seed = 81;
    if (len <= 16) return hash_0to16(s, len);
    if (len <= 32) return hash_17to32(s, len);
    if (len <= 64) return hash_33to64(s, len);
    uint64_t x = seed, y = seed * FH_K1 + 113, z = shift_mix(y * FH_K2 + 113) * FH_K2;
    u64pair v = {0, 0}, w = {0, 0};
    x = x * FH_K2 + ld64(s);
    const uint8_t *end = s + ((len - 1) / 64) * 64;
    const uint8_t *last64 = end + ((len - 1) & 63) - 63;
    do {
        x = rotr(x + y + v.first + ld64(s + 8), 37) * FH_K1;
        y = rotr(y + v.second + ld64(s + 48), 42) * FH_K1;
        x ^= w.second;
        y += v.first + ld64(s + 40);
        z = rotr(z + w.first, 33) * FH_K1;
        v = weak32(s, v.second * FH_K1, x + w.first);
        w = weak32(s + 32, z + w.second, y + ld64(s + 16));
        uint64_t t = z;
        z = x;
        x = t;
        s += 64;
    } while (s != end);
    uint64_t mul = FH_K1 + ((z & 0xff) << 1);
    s = last64;
    w.first += (len - 1) & 63;
    v.first += w.first;
    w.first += v.first;
    x = rotr(x + y + v.first + ld64(s + 8), 37) * mul;
    y = rotr(y + v.second + ld64(s + 48), 42) * mul;
    x ^= w.second * 9;
    y += v.first * 9 + ld64(s + 40);
    z = rotr(z + w.first, 33) * mul;
    v = weak32(s, v.second * mul, x + w.first);
    w = weak32(s + 32, z + w.second, y + ld64(s + 16));
    uint64_t t = z;
    z = x;
    x = t;
    return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * FH_K0 + z,
                      hash_len16(v.second, w.second, mul) + x, mul);
}

/* ---- SipHash-2-4 ---- */

static uint64_t rotl(uint64_t v, int s) {
    return (v << s) | (v >> (64 - s));
}

#define SIP_ROUND(v0, v1, v2, v3)                                                                  \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

static uint64_t siphash24(uint64_t k0, uint64_t k1, const uint8_t *s, size_t len) {
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = ld64(s + i);
        v3 ^= m;
        SIP_ROUND(v0, v1, v2, v3);
        SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    /* last block: the remaining bytes, the length's low byte on top */
    uint64_t b = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < (len & 7); i++) b |= (uint64_t)s[full + i] << (8 * i);
    v3 ^= b;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < 4; r++) SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- MurmurHash64A, TensorFlow's Hash64 ---- */

static uint64_t murmur64a(const uint8_t *s, size_t len, uint64_t seed) {
    const uint64_t m = 0xc6a4a7935bd1e995ull;
    uint64_t h = seed ^ (len * m);
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t k = ld64(s + i) * m;
        k ^= k >> 47;
        h = (h ^ (k * m)) * m;
    }
    size_t rest = len & 7;
    if (rest) {
        for (size_t i = rest; i-- > 0;) h ^= (uint64_t)s[full + i] << (8 * i);
        h *= m;
    }
    h ^= h >> 47;
    h *= m;
    return h ^ (h >> 47);
}

/* ---- the kernels ---- */

typedef struct {
    uint64_t buckets;
    int kind; /* 0 fast, 1 strong, 2 legacy */
    uint64_t key[2];
} hash_state;

static ms_status hash_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    int64_t nb = kn_attr_i(node, "num_buckets", 0);
    if (nb < 1) return KN_EINVAL(node, "num_buckets must be >= 1, got %lld", (long long)nb);
    hash_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    s->buckets = (uint64_t)nb;
    s->kind = strcmp(node->op, "StringToHashBucketStrong") == 0 ? 1
              : strcmp(node->op, "StringToHashBucket") == 0     ? 2
                                                                : 0;
    if (s->kind == 1) {
        int64_t key[2];
        int n = kn_attr_ilist(node, "key", key, 2);
        if (n != 2) {
            free(s);
            return KN_EINVAL(node, "Key must have 2 elements, got %d", n < 0 ? 0 : n);
        }
        s->key[0] = (uint64_t)key[0];
        s->key[1] = (uint64_t)key[1];
    }
    *state = s;
    return MS_OK;
}

static void hash_release(void *state) {
    free(state);
}

static ms_status hash_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    void *own = NULL;
    if (state == NULL) { /* run without prepare (a lone kernel call) */
        if ((st = hash_prepare(node, NULL, &own)) != MS_OK) return st;
        state = own;
    }
    const hash_state *hs = state;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_STRING) {
        free(own);
        return KN_EINVAL(node, "input must be a string tensor, got %s", rt_dtype_name(x->dtype));
    }
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &x->shape, &out[0])) != MS_OK) {
        free(own);
        return st;
    }
    const rt_str *sv = rt_tensor_strs(x);
    int64_t *o = out[0]->data;
    for (int64_t i = 0; i < x->nelem; i++) {
        const uint8_t *p = sv[i].len ? sv[i].data : (const uint8_t *)"";
        size_t n = (size_t)sv[i].len;
        uint64_t h = hs->kind == 1   ? siphash24(hs->key[0], hs->key[1], p, n)
                     : hs->kind == 2 ? murmur64a(p, n, 0xDECAFCAFFEull)
                                     : fingerprint64(p, n);
        o[i] = (int64_t)(h % hs->buckets);
    }
    free(own);
    return MS_OK;
}

/* clang-format off */
const kn_kernel kn_cpu_hash_kernels[] = {
    {.op = "StringToHashBucketFast", .prepare = hash_prepare, .compute = hash_compute,
     .release = hash_release},
    {.op = "StringToHashBucketStrong", .prepare = hash_prepare, .compute = hash_compute,
     .release = hash_release},
    {.op = "StringToHashBucket", .prepare = hash_prepare, .compute = hash_compute,
     .release = hash_release},
    {.op = NULL},
};
/* clang-format on */
