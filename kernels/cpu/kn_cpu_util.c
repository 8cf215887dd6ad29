/* kn_cpu_util.c - helpers shared by the CPU kernels: errors, index inputs,
 * broadcasting, the strided gather and half/bfloat16 conversion. */
#include "kn_cpu_util.h"

#include "kn_cpu_gemm.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ms_status kn__output(kn_ctx *ctx, const kn_node *n, int idx, rt_dtype dt, const rt_shape *shape,
                     rt_tensor **out) {
    ms_status st = kn_ctx_output(ctx, idx, dt, shape, out);
    if (st != MS_OK)
        return ms_errwrap(st, "node '%s' (%s): output %d of shape %s", n->name, n->op, idx,
                          kn__shp(shape));
    return MS_OK;
}

ms_status kn__need_inputs(const kn_node *n, rt_tensor *const *in, int count) {
    if (n->nin < count) return KN_EINVAL(n, "expected %d inputs, got %d", count, n->nin);
    for (int i = 0; i < count; i++)
        if (in[i] == NULL) return KN_EINVAL(n, "input %d is missing", i);
    return MS_OK;
}

ms_status kn__read_ints(const kn_node *n, const rt_tensor *t, const char *what, int64_t *out,
                        int max, int *count) {
    if (t->dtype != RT_DT_INT32 && t->dtype != RT_DT_INT64)
        return KN_EINVAL(n, "%s must be int32 or int64, got %s", what, rt_dtype_name(t->dtype));
    if (t->nelem > max)
        return KN_EINVAL(n, "%s has %lld values, at most %d allowed", what, (long long)t->nelem,
                         max);
    for (int64_t i = 0; i < t->nelem; i++)
        out[i] =
            t->dtype == RT_DT_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
    *count = (int)t->nelem;
    return MS_OK;
}

ms_status kn__read_int1(const kn_node *n, const rt_tensor *t, const char *what, int64_t *out) {
    int cnt = 0;
    int64_t v[1];
    if (t->nelem != 1 || t->shape.rank > 1)
        return KN_EINVAL(n, "%s must be a scalar, got shape %s", what, kn__shp(&t->shape));
    ms_status st = kn__read_ints(n, t, what, v, 1, &cnt);
    if (st != MS_OK) return st;
    *out = v[0];
    return MS_OK;
}

int kn__axis(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

const char *kn__shp(const rt_shape *s) {
    static _Thread_local char bufs[4][16 * RT_MAX_RANK + 8];
    static _Thread_local int next;
    char *b = bufs[next];
    next = (next + 1) % 4;
    size_t len = 0;
    len += (size_t)snprintf(b + len, sizeof(bufs[0]) - len, "(");
    for (int i = 0; i < s->rank && i < RT_MAX_RANK; i++)
        len += (size_t)snprintf(b + len, sizeof(bufs[0]) - len, i ? ", %lld" : "%lld",
                                (long long)s->dim[i]);
    snprintf(b + len, sizeof(bufs[0]) - len, ")");
    return b;
}

/* ---- broadcasting ---- */

ms_status kn__bcast_init(kn_bcast *b, const kn_node *n, const rt_shape *const *shapes, int count) {
    int R = 0;
    memset(b, 0, sizeof(*b));
    for (int k = 0; k < count; k++)
        if (shapes[k]->rank > R) R = shapes[k]->rank;
    b->out.rank = R;
    int64_t full[KN_BCAST_MAX][RT_MAX_RANK];
    for (int d = 0; d < R; d++) {
        int64_t od = 1;
        for (int k = 0; k < count; k++) {
            int off = R - shapes[k]->rank;
            int64_t kd = d >= off ? shapes[k]->dim[d - off] : 1;
            full[k][d] = kd;
            if (kd == od || kd == 1) continue;
            if (od == 1) {
                od = kd;
                continue;
            }
            if (count == 2)
                return KN_EINVAL(n, "incompatible shapes for broadcasting: %s and %s",
                                 kn__shp(shapes[0]), kn__shp(shapes[1]));
            return KN_EINVAL(n, "incompatible shapes for broadcasting: %s, %s and %s",
                             kn__shp(shapes[0]), kn__shp(shapes[1]), kn__shp(shapes[2]));
        }
        b->out.dim[d] = od;
    }
    /* Per input contiguous strides, 0 where the input is broadcast. */
    int64_t st[KN_BCAST_MAX][RT_MAX_RANK];
    for (int k = 0; k < count; k++) {
        int64_t s = 1;
        for (int d = R - 1; d >= 0; d--) {
            st[k][d] = full[k][d] == 1 ? 0 : s;
            s *= full[k][d];
        }
    }
    /* Collapse from the inside out: merge dim d into the group to its right
     * when every input is laid out contiguously across both. */
    int64_t cdim[RT_MAX_RANK], cst[KN_BCAST_MAX][RT_MAX_RANK];
    int cr = 0;
    for (int d = R - 1; d >= 0; d--) {
        if (b->out.dim[d] == 1) continue;
        if (cr > 0) {
            int ok = 1;
            for (int k = 0; k < count; k++)
                if (st[k][d] != cst[k][cr - 1] * cdim[cr - 1]) ok = 0;
            if (ok) {
                cdim[cr - 1] *= b->out.dim[d];
                continue;
            }
        }
        cdim[cr] = b->out.dim[d];
        for (int k = 0; k < count; k++)
            cst[k][cr] = st[k][d];
        cr++;
    }
    if (cr == 0) {
        cdim[0] = 1;
        for (int k = 0; k < count; k++)
            cst[k][0] = 0;
        cr = 1;
    }
    b->rank = cr;
    for (int i = 0; i < cr; i++) {
        b->dim[i] = cdim[cr - 1 - i];
        for (int k = 0; k < count; k++)
            b->stride[k][i] = cst[k][cr - 1 - i];
    }
    /* Products are only formed for non-empty results, whose sizes fit. */
    if (rt_shape_nelem(&b->out) < 0)
        return KN_EINVAL(n, "broadcast shape %s is too large", kn__shp(&b->out));
    b->rows = rt_shape_nelem(&b->out) == 0 ? 0 : 1;
    for (int i = 0; b->rows > 0 && i < cr - 1; i++)
        b->rows *= b->dim[i];
    return MS_OK;
}

void kn__bcast_row(const kn_bcast *b, int64_t row, int64_t *offs, int count) {
    for (int k = 0; k < count; k++)
        offs[k] = 0;
    for (int d = b->rank - 2; d >= 0; d--) {
        int64_t c = row % b->dim[d];
        row /= b->dim[d];
        for (int k = 0; k < count; k++)
            offs[k] += c * b->stride[k][d];
    }
}

/* ---- gather ---- */

ms_status kn__gather_init(kn_gather *g, const rt_shape *out, size_t esize) {
    memset(g, 0, sizeof(*g));
    g->esize = esize;
    g->rank = out->rank > 0 ? out->rank : 1;
    int64_t total = 0;
    for (int d = 0; d < g->rank; d++) {
        g->dim[d] = out->rank > 0 ? out->dim[d] : 1;
        total += g->dim[d];
    }
    g->mem = malloc((size_t)(total > 0 ? total : 1) * sizeof(int64_t));
    if (g->mem == NULL) return ms_errf(MS_ENOMEM, "gather tables: out of memory");
    int64_t pos = 0;
    for (int d = 0; d < g->rank; d++) {
        g->tab[d] = g->mem + pos;
        pos += g->dim[d];
    }
    return MS_OK;
}

void kn__gather_destroy(kn_gather *g) {
    free(g->mem);
    g->mem = NULL;
}

typedef struct gather_job {
    const kn_gather *g;
    int contiguous; /* last-dim table is tab[0] + j with no padding */
} gather_job;

static inline void copy_elem(uint8_t *d, const uint8_t *s, size_t es) {
    switch (es) {
    case 1:
        *d = *s;
        break;
    case 2:
        memcpy(d, s, 2);
        break;
    case 4:
        memcpy(d, s, 4);
        break;
    case 8:
        memcpy(d, s, 8);
        break;
    default:
        memcpy(d, s, es);
        break;
    }
}

static void gather_rows(void *arg, int64_t begin, int64_t end) {
    const gather_job *job = arg;
    const kn_gather *g = job->g;
    const int last = g->rank - 1;
    const int64_t inner = g->dim[last];
    const size_t es = g->esize;
    for (int64_t row = begin; row < end; row++) {
        int64_t base = 0, r = row;
        int pad = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t c = r % g->dim[d];
            r /= g->dim[d];
            int64_t t = g->tab[d][c];
            if (t == KN_GATHER_PAD)
                pad = 1;
            else
                base += t;
        }
        uint8_t *o = g->dst + (size_t)(row * inner) * es;
        if (pad) {
            for (int64_t j = 0; j < inner; j++)
                copy_elem(o + (size_t)j * es, g->pad, es);
            continue;
        }
        const int64_t *tl = g->tab[last];
        if (job->contiguous) {
            kn__copy(o, g->src + (size_t)(base + tl[0]) * es, inner, es);
            continue;
        }
        switch (es) {
        case 4: {
            const uint32_t *s = (const uint32_t *)(const void *)g->src + base;
            uint32_t *oo = (uint32_t *)(void *)o;
            uint32_t pv;
            memcpy(&pv, g->pad ? g->pad : (const uint8_t *)"\0\0\0\0", 4);
            for (int64_t j = 0; j < inner; j++)
                oo[j] = tl[j] == KN_GATHER_PAD ? pv : s[tl[j]];
            break;
        }
        default:
            for (int64_t j = 0; j < inner; j++) {
                if (tl[j] == KN_GATHER_PAD)
                    copy_elem(o + (size_t)j * es, g->pad, es);
                else
                    copy_elem(o + (size_t)j * es, g->src + (size_t)(base + tl[j]) * es, es);
            }
        }
    }
}

void kn__gather_run(kn_ctx *ctx, kn_gather *g) {
    int64_t rows = 1;
    for (int d = 0; d < g->rank - 1; d++)
        rows *= g->dim[d];
    int64_t inner = g->dim[g->rank - 1];
    if (rows == 0 || inner == 0) return;
    gather_job job = {.g = g, .contiguous = 1};
    for (int64_t j = 0; j < inner; j++)
        if (g->tab[g->rank - 1][j] == KN_GATHER_PAD ||
            g->tab[g->rank - 1][j] != g->tab[g->rank - 1][0] + j)
            job.contiguous = 0;
    int64_t chunk = 16384 / (inner > 0 ? inner : 1);
    kn_ctx_parallel_for(ctx, rows, chunk > 0 ? chunk : 1, gather_rows, &job);
}

/* ---- scratch ---- */

typedef struct scratch_set {
    void *buf[KN_SCRATCH_SLOTS];
    size_t cap[KN_SCRATCH_SLOTS];
} scratch_set;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < KN_SCRATCH_SLOTS; i++)
        free(s->buf[i]);
    free(s);
}

static void scratch_init(void) {
    pthread_key_create(&scratch_key, scratch_free);
}

static void *alloc64(size_t bytes) {
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) return NULL;
    return aligned_alloc(64, n ? n : 64);
}

void *kn__scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= KN_SCRATCH_SLOTS || bytes > KN_SCRATCH_CACHE_MAX) return alloc64(bytes);
    pthread_once(&scratch_once, scratch_init);
    scratch_set *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL) return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return alloc64(bytes);
        }
    }
    if (s->cap[slot] < bytes) {
        free(s->buf[slot]);
        s->cap[slot] = 0;
        if ((s->buf[slot] = alloc64(bytes)) == NULL) return NULL;
        s->cap[slot] = bytes;
    }
    return s->buf[slot];
}

void kn__scratch_done(int slot, void *p) {
    if (p == NULL) return;
    if (slot >= 0 && slot < KN_SCRATCH_SLOTS) {
        pthread_once(&scratch_once, scratch_init);
        scratch_set *s = pthread_getspecific(scratch_key);
        if (s != NULL && s->buf[slot] == p) return;
    }
    free(p);
}

/* ---- half / bfloat16 ---- */

float kn__half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t kn__f32_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {                                  /* below 2^-14: subnormal */
        if (ax < 0x33000000u) return sign;                   /* below half the smallest */
        uint32_t man = (ax & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(ax >> 23); /* 14..24 */
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - ((127 - 15) << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

float kn__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t kn__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* double -> a binary format of eb exponent and mb mantissa bits (IEEE
 * layout with subnormals, inf and nan) in one rounding to nearest even:
 * going through float would round twice and can miss the nearest value. */
static uint16_t f64_to_narrow(double d, int eb, int mb) {
    uint64_t x;
    memcpy(&x, &d, 8);
    const uint16_t sign = (uint16_t)((x >> 63) << (eb + mb));
    const uint64_t ax = x & 0x7fffffffffffffffull;
    const uint64_t inf = (((uint64_t)1 << eb) - 1) << mb;
    if (ax >= 0x7ff0000000000000ull) /* inf or nan (quiet) */
        return (uint16_t)(sign | inf | (ax > 0x7ff0000000000000ull ? (uint64_t)1 << (mb - 1) : 0));
    const int bias = (1 << (eb - 1)) - 1;
    const int e = (int)(ax >> 52) - 1023;
    if (e < -1022) return sign; /* zero or a double subnormal: far below both formats */
    const uint64_t m = (ax & ((1ull << 52) - 1)) | (1ull << 52);
    const int sub = e < 1 - bias;
    /* m * 2^(e-52) in units of the result's spacing 2^q. */
    const int q = sub ? 1 - bias - mb : e - mb;
    const int shift = q - (e - 52);
    if (shift > 54) return sign; /* below half the smallest subnormal */
    uint64_t r = m >> shift, rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    /* A carry out of the mantissa moves into the exponent field by itself. */
    uint64_t bits = sub ? r : ((uint64_t)(e + bias - 1) << mb) + r;
    if (bits >= inf) bits = inf;
    return (uint16_t)(sign | bits);
}

uint16_t kn__f64_to_half(double d) {
    return f64_to_narrow(d, 5, 10);
}

uint16_t kn__f64_to_bf16(double d) {
    return f64_to_narrow(d, 8, 7);
}

/* ---- window attributes ---- */

ms_status kn__attr_hw(const kn_node *n, const char *key, int nchw, int64_t dflt, int64_t *h,
                      int64_t *w) {
    int64_t v[4];
    int cnt = kn_attr_ilist(n, key, v, 4);
    if (cnt < 0) {
        *h = *w = dflt;
        return MS_OK;
    }
    if (cnt != 4) return KN_EINVAL(n, "%s must have 4 values, got %d", key, cnt);
    int hi = nchw ? 2 : 1, wi = nchw ? 3 : 2, ci = nchw ? 1 : 3;
    if (v[0] != 1 || v[ci] != 1)
        return KN_EINVAL(n,
                         "%s on the batch and channel dimensions must be 1, got [%lld, %lld, "
                         "%lld, %lld]",
                         key, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
    if (v[hi] < 1 || v[wi] < 1 || v[hi] > INT32_MAX || v[wi] > INT32_MAX)
        return KN_EINVAL(n, "%s must be in [1, 2^31), got [%lld, %lld, %lld, %lld]", key,
                         (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
    *h = v[hi];
    *w = v[wi];
    return MS_OK;
}

ms_status kn__parse_padding(const kn_node *n, int nchw, int *padding, int64_t ep[4]) {
    if (kn_attr_s_eq(n, "padding", "SAME", NULL))
        *padding = KN_PAD_SAME;
    else if (kn_attr_s_eq(n, "padding", "VALID", NULL))
        *padding = KN_PAD_VALID;
    else if (kn_attr_s_eq(n, "padding", "EXPLICIT", NULL))
        *padding = KN_PAD_EXPLICIT;
    else
        return KN_EINVAL(n, "padding must be SAME, VALID or EXPLICIT");
    if (*padding == KN_PAD_EXPLICIT) {
        int64_t p[8];
        int cnt = kn_attr_ilist(n, "explicit_paddings", p, 8);
        if (cnt != 8)
            return KN_EINVAL(n, "EXPLICIT padding needs 8 explicit_paddings, got %d",
                             cnt < 0 ? 0 : cnt);
        int hi = nchw ? 2 : 1, wi = nchw ? 3 : 2, ci = nchw ? 1 : 3;
        for (int i = 0; i < 8; i++)
            if (p[i] < 0 || p[i] > INT32_MAX)
                return KN_EINVAL(n, "explicit_paddings must be in [0, 2^31)");
        if (p[0] || p[1] || p[2 * ci] || p[2 * ci + 1])
            return KN_EINVAL(n, "explicit_paddings on the batch and channel dimensions must be 0");
        ep[0] = p[2 * hi];
        ep[1] = p[2 * hi + 1];
        ep[2] = p[2 * wi];
        ep[3] = p[2 * wi + 1];
    } else if (kn_attr_ilist(n, "explicit_paddings", NULL, 0) > 0) {
        return KN_EINVAL(n, "explicit_paddings given without EXPLICIT padding");
    }
    return MS_OK;
}

ms_status kn__window_dim(const kn_node *n, const char *what, int64_t in, int64_t k, int64_t dil,
                         int64_t stride, int padding, int64_t ep_before, int64_t ep_after,
                         int64_t *out, int64_t *pad_before) {
    if (k < 0 || k > INT32_MAX)
        return KN_EINVAL(n, "%s: window size %lld must be in [0, 2^31)", what, (long long)k);
    int64_t eff = (k - 1) * dil + 1;
    switch (padding) {
    case KN_PAD_VALID:
        *out = (in - eff + stride) / stride;
        *pad_before = 0;
        break;
    case KN_PAD_SAME: {
        *out = (in + stride - 1) / stride;
        int64_t need = (*out - 1) * stride + eff - in;
        if (need < 0) need = 0;
        *pad_before = need / 2;
        break;
    }
    default:
        *out = (in + ep_before + ep_after - eff + stride) / stride;
        *pad_before = ep_before;
        break;
    }
    if (*out < 0)
        return KN_EINVAL(n, "%s: window of %lld (dilated) does not fit input size %lld", what,
                         (long long)eff, (long long)in);
    return MS_OK;
}

/* ---- ISA of the vectorised loops ---- */

int kn__vec_isa(void) {
    switch (kn__gemm_isa()) {
    case KN_GEMM_ISA_AVX512:
        return KN_VEC_AVX512;
    case KN_GEMM_ISA_AVX2:
        return KN_VEC_AVX2;
    default:
        return KN_VEC_C;
    }
}
