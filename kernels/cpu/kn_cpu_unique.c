/* kn_cpu_unique.c - TensorFlow's Unique, UniqueV2, UniqueWithCounts and
 * UniqueWithCountsV2 (unique_op.cc), numbers and strings.
 *
 * y holds the distinct values (V2 with an axis: the distinct slices along
 * it) in the order of their first occurrence, idx (attr out_idx, int32 or
 * int64) the position in y of each input value (slice), count how often
 * each occurs. Values are equal as TensorFlow's hash map compares them:
 * floats by value (-0.0 equals 0.0, a NaN equals nothing, so every NaN is
 * its own entry), strings by bytes, other numbers by value. Without an
 * axis (Unique, UniqueWithCounts, or V2 with an empty axis) the input must
 * be a vector, as TensorFlow requires.
 *
 * One open-addressing hash table of slice positions, charged to the
 * request's budget with the other temporaries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_str.h"
#include "kn_cpu_util.h"

typedef struct uq_view {
    const rt_tensor *x;
    int64_t outer, n, inner; /* x as [outer, n, inner]; slices along n */
    size_t es;
} uq_view;

/* Element e of x as a float when x is a float type (half, bfloat16 widened). */
static double uq_float(const rt_tensor *x, int64_t e) {
    switch (x->dtype) {
    case RT_DT_FLOAT: return ((const float *)x->data)[e];
    case RT_DT_DOUBLE: return ((const double *)x->data)[e];
    case RT_DT_HALF: return kn__half_to_f32(((const uint16_t *)x->data)[e]);
    default: return kn__bf16_to_f32(((const uint16_t *)x->data)[e]);
    }
}

static int uq_is_float(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE || dt == RT_DT_HALF || dt == RT_DT_BFLOAT16;
}

static uint64_t uq_mix(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Flat offset of element (o, k, i). */
static int64_t uq_at(const uq_view *v, int64_t o, int64_t k, int64_t i) {
    return (o * v->n + k) * v->inner + i;
}

static uint64_t uq_hash(const uq_view *v, int64_t k) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t i = 0; i < v->inner; i++) {
            int64_t e = uq_at(v, o, k, i);
            if (v->x->dtype == RT_DT_STRING) {
                const rt_str *s = &rt_tensor_strs(v->x)[e];
                h = uq_mix(h, &s->len, sizeof s->len);
                if (s->len) h = uq_mix(h, s->data, (size_t)s->len);
            } else if (uq_is_float(v->x->dtype)) {
                double d = uq_float(v->x, e);
                if (d == 0) d = 0; /* -0.0 hashes as 0.0 */
                h = uq_mix(h, &d, sizeof d);
            } else {
                h = uq_mix(h, (const uint8_t *)v->x->data + (size_t)e * v->es, v->es);
            }
        }
    return h;
}

static int uq_equal(const uq_view *v, int64_t a, int64_t b) {
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t i = 0; i < v->inner; i++) {
            int64_t ea = uq_at(v, o, a, i), eb = uq_at(v, o, b, i);
            if (v->x->dtype == RT_DT_STRING) {
                const rt_str *s = rt_tensor_strs(v->x);
                if (s[ea].len != s[eb].len ||
                    (s[ea].len && memcmp(s[ea].data, s[eb].data, (size_t)s[ea].len) != 0))
                    return 0;
            } else if (uq_is_float(v->x->dtype)) {
                if (!(uq_float(v->x, ea) == uq_float(v->x, eb))) return 0;
            } else if (memcmp((const uint8_t *)v->x->data + (size_t)ea * v->es,
                              (const uint8_t *)v->x->data + (size_t)eb * v->es, v->es) != 0) {
                return 0;
            }
        }
    return 1;
}

/* The axis of a V2 op from in[1] (-1: none, x must be a vector). */
static ms_status uq_axis(const kn_node *node, rt_tensor *const *in, int v2, int *axis) {
    const rt_tensor *x = in[0];
    *axis = -1;
    if (v2) {
        const rt_tensor *a = in[1];
        if (a->dtype != RT_DT_INT32 && a->dtype != RT_DT_INT64)
            return KN_EINVAL(node, "axis must be int32 or int64, got %s", rt_dtype_name(a->dtype));
        if (a->shape.rank != 1)
            return KN_EINVAL(node, "axis expects a 1D vector, got shape %s", kn__shp(&a->shape));
        if (a->nelem > 1)
            return KN_EINVAL(node, "axis does not support input tensors larger than 1 elements");
        if (a->nelem == 1) {
            int64_t v = a->dtype == RT_DT_INT32 ? ((const int32_t *)a->data)[0]
                                                : ((const int64_t *)a->data)[0];
            int r = x->shape.rank;
            if (v < -r || v >= r || r == 0)
                return KN_EINVAL(node, "axis has to be between [%d, %d), got %lld", -r, r,
                                 (long long)v);
            *axis = (int)(v < 0 ? v + r : v);
            return MS_OK;
        }
    }
    if (x->shape.rank != 1)
        return KN_EINVAL(node, "unique expects a 1D vector, got shape %s", kn__shp(&x->shape));
    *axis = 0;
    return MS_OK;
}

static ms_status uq_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    (void)state;
    int v2 = node->op[strlen(node->op) - 1] == '2';
    int counts = strstr(node->op, "Counts") != NULL;
    ms_status st = kn__need_inputs(node, in, v2 ? 2 : 1);
    if (st != MS_OK) return st;
    if (node->nout < (counts ? 3 : 2))
        return KN_EINVAL(node, "has %d outputs, wants %d", node->nout, counts ? 3 : 2);
    const rt_tensor *x = in[0];
    rt_dtype it = kn_attr_type(node, "out_idx", RT_DT_INT32);
    if (it != RT_DT_INT32 && it != RT_DT_INT64)
        return KN_EINVAL(node, "out_idx must be int32 or int64, got %s", rt_dtype_name(it));
    if (x->dtype != RT_DT_STRING && (!rt_dtype_is_pod(x->dtype) || x->dtype == RT_DT_COMPLEX64 ||
                                     x->dtype == RT_DT_COMPLEX128))
        return KN_EINVAL(node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    int axis;
    if ((st = uq_axis(node, in, v2, &axis)) != MS_OK) return st;
    uq_view v = {.x = x, .outer = 1, .inner = 1, .es = rt_dtype_size(x->dtype)};
    for (int d = 0; d < x->shape.rank; d++) {
        if (d < axis) v.outer *= x->shape.dim[d];
        if (d > axis) v.inner *= x->shape.dim[d];
    }
    v.n = x->shape.dim[axis];
    if (it == RT_DT_INT32 && v.n > INT32_MAX)
        return KN_EINVAL(node, "%lld values do not fit out_idx int32", (long long)v.n);
    /* the table: a power of two >= 2n slots of slice positions (-1 empty);
     * uniq[u] = the first slice of entry u, cnt[u] its count */
    uint64_t slots = 2;
    while (slots < 2 * (uint64_t)v.n) slots <<= 1;
    uint64_t bytes = (slots + 2 * (uint64_t)v.n) * sizeof(int64_t);
    int64_t *tab = NULL;
    if ((st = kn__tmp_take(ctx, node, bytes, "the unique op's hash table", (void **)&tab)) !=
        MS_OK)
        return st;
    int64_t *uniq = tab + slots, *cnt = uniq + v.n, nu = 0;
    for (uint64_t s = 0; s < slots; s++) tab[s] = -1;
    rt_shape ids = {.rank = 1, .dim = {v.n}};
    if ((st = kn__output(ctx, node, 1, it, &ids, &out[1])) != MS_OK) goto done;
    for (int64_t k = 0; k < v.n; k++) {
        uint64_t s = uq_hash(&v, k) & (slots - 1);
        int64_t u = -1;
        for (; tab[s] >= 0; s = (s + 1) & (slots - 1))
            if (uq_equal(&v, uniq[tab[s]], k)) {
                u = tab[s];
                break;
            }
        if (u < 0) {
            u = nu++;
            tab[s] = u;
            uniq[u] = k;
            cnt[u] = 0;
        }
        cnt[u]++;
        if (it == RT_DT_INT32) ((int32_t *)out[1]->data)[k] = (int32_t)u;
        else ((int64_t *)out[1]->data)[k] = u;
    }
    rt_shape ys = x->shape;
    ys.dim[axis] = nu;
    st = x->dtype == RT_DT_STRING ? kn__str_output(ctx, node, 0, &ys, &out[0])
                                  : kn__output(ctx, node, 0, x->dtype, &ys, &out[0]);
    if (st != MS_OK) goto done;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t u = 0; u < nu; u++) {
            int64_t dst = (o * nu + u) * v.inner, src = uq_at(&v, o, uniq[u], 0);
            if (x->dtype == RT_DT_STRING)
                memcpy(rt_tensor_strs(out[0]) + dst, rt_tensor_strs(x) + src,
                       (size_t)v.inner * sizeof(rt_str));
            else
                kn__copy((uint8_t *)out[0]->data + (size_t)dst * v.es,
                         (const uint8_t *)x->data + (size_t)src * v.es, v.inner, v.es);
        }
    if (x->dtype == RT_DT_STRING && (st = kn__str_own(ctx, node, out[0])) != MS_OK) goto done;
    if (counts) {
        rt_shape cs = {.rank = 1, .dim = {nu}};
        if ((st = kn__output(ctx, node, 2, it, &cs, &out[2])) != MS_OK) goto done;
        for (int64_t u = 0; u < nu; u++) {
            if (it == RT_DT_INT32) ((int32_t *)out[2]->data)[u] = (int32_t)cnt[u];
            else ((int64_t *)out[2]->data)[u] = cnt[u];
        }
    }
done:
    kn__tmp_give(ctx, bytes, tab);
    if (st != MS_OK) /* a kernel that fails leaves no outputs */
        for (int k = 0; k < (counts ? 3 : 2); k++) {
            rt_tensor_unref(out[k]);
            out[k] = NULL;
        }
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_unique_kernels[] = {
    {.op = "Unique", .compute = uq_compute},
    {.op = "UniqueV2", .compute = uq_compute},
    {.op = "UniqueWithCounts", .compute = uq_compute},
    {.op = "UniqueWithCountsV2", .compute = uq_compute},
    {.op = NULL},
};
/* clang-format on */
