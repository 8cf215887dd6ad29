/* rt_tensor.c - dtypes, shapes, reference-counted buffers and tensors. */
#include "rt_tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---- */

/* clang-format off */
static const struct { const char *name; size_t size; } dtypes[RT_DT_COUNT] = {
    [RT_DT_INVALID]    = {"DT_INVALID", 0},
    [RT_DT_FLOAT]      = {"DT_FLOAT", 4},
    [RT_DT_DOUBLE]     = {"DT_DOUBLE", 8},
    [RT_DT_INT32]      = {"DT_INT32", 4},
    [RT_DT_UINT8]      = {"DT_UINT8", 1},
    [RT_DT_INT16]      = {"DT_INT16", 2},
    [RT_DT_INT8]       = {"DT_INT8", 1},
    [RT_DT_STRING]     = {"DT_STRING", 0},
    [RT_DT_COMPLEX64]  = {"DT_COMPLEX64", 8},
    [RT_DT_INT64]      = {"DT_INT64", 8},
    [RT_DT_BOOL]       = {"DT_BOOL", 1},
    [RT_DT_QINT8]      = {"DT_QINT8", 1},
    [RT_DT_QUINT8]     = {"DT_QUINT8", 1},
    [RT_DT_QINT32]     = {"DT_QINT32", 4},
    [RT_DT_BFLOAT16]   = {"DT_BFLOAT16", 2},
    [RT_DT_QINT16]     = {"DT_QINT16", 2},
    [RT_DT_QUINT16]    = {"DT_QUINT16", 2},
    [RT_DT_UINT16]     = {"DT_UINT16", 2},
    [RT_DT_COMPLEX128] = {"DT_COMPLEX128", 16},
    [RT_DT_HALF]       = {"DT_HALF", 2},
    [RT_DT_RESOURCE]   = {"DT_RESOURCE", 0},
    [RT_DT_VARIANT]    = {"DT_VARIANT", 0},
    [RT_DT_UINT32]     = {"DT_UINT32", 4},
    [RT_DT_UINT64]     = {"DT_UINT64", 8},
    [RT_DT_FLOAT8_E5M2]     = {"DT_FLOAT8_E5M2", 1},
    [RT_DT_FLOAT8_E4M3FN]   = {"DT_FLOAT8_E4M3FN", 1},
    [RT_DT_FLOAT8_E4M3FNUZ] = {"DT_FLOAT8_E4M3FNUZ", 1},
    [RT_DT_FLOAT8_E5M2FNUZ] = {"DT_FLOAT8_E5M2FNUZ", 1},
    [RT_DT_INT4]            = {"DT_INT4", 1},
    [RT_DT_UINT4]           = {"DT_UINT4", 1},
    [RT_DT_INT2]            = {"DT_INT2", 1},
    [RT_DT_UINT2]           = {"DT_UINT2", 1},
    [RT_DT_FLOAT4_E2M1FN]   = {"DT_FLOAT4_E2M1FN", 1},
    [RT_DT_FLOAT8_E8M0]     = {"DT_FLOAT8_E8M0", 1},
};
/* clang-format on */

size_t rt_dtype_size(rt_dtype dt) {
    if ((unsigned)dt >= RT_DT_COUNT) return 0;
    return dtypes[dt].size;
}

const char *rt_dtype_name(rt_dtype dt) {
    if ((unsigned)dt >= RT_DT_COUNT || dtypes[dt].name == NULL) return "DT_INVALID";
    return dtypes[dt].name;
}

rt_dtype rt_dtype_base(int v) {
    return (rt_dtype)(v > 100 ? v - 100 : v);
}

int rt_dtype_is_pod(rt_dtype dt) {
    return rt_dtype_size(dt) != 0;
}

/* ---- shapes ---- */

int64_t rt_shape_nelem(const rt_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] < 0) return -1;
        if (s->dim[i] != 0 && n > INT64_MAX / s->dim[i]) return -1;
        n *= s->dim[i];
    }
    return n;
}

int rt_shape_equal(const rt_shape *a, const rt_shape *b) {
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}

char *rt_shape_str(const rt_shape *s, char *buf, size_t n) {
    size_t o = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    if (s->rank < 0) {
        snprintf(buf, n, "<unknown rank>");
        return buf;
    }
    o += (size_t)snprintf(buf + o, n - o, "(");
    for (int i = 0; i < s->rank && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)s->dim[i]);
    if (o < n) snprintf(buf + o, n - o, ")");
    return buf;
}

rt_shape rt_shape_make(int rank, const int64_t *dims) {
    rt_shape s;
    memset(&s, 0, sizeof(s));
    if (rank > RT_MAX_RANK) rank = RT_MAX_RANK;
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dim[i] = dims[i];
    return s;
}

/* ---- buffers ---- */

static void buf_free_data(rt_buf *b) {
    free(b->data);
}

rt_buf *rt_buf_alloc(size_t size) {
    rt_buf *b = calloc(1, sizeof(*b));
    if (b == NULL) return NULL;
    /* Round up so aligned_alloc's size rule holds; never allocate 0 bytes. */
    size_t asz = (size + 63) & ~(size_t)63;
    if (asz == 0) asz = 64;
    if (asz < size) {
        free(b);
        return NULL;
    }
    b->data = aligned_alloc(64, asz);
    if (b->data == NULL) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->size = size;
    b->release = buf_free_data;
    return b;
}

rt_buf *rt_buf_wrap(void *data, size_t size, void (*release)(rt_buf *b), void *owner) {
    rt_buf *b = calloc(1, sizeof(*b));
    if (b == NULL) return NULL;
    atomic_init(&b->refs, 1);
    b->data = data;
    b->size = size;
    b->owner = owner;
    b->release = release;
    return b;
}

rt_buf *rt_buf_ref(rt_buf *b) {
    if (b) atomic_fetch_add(&b->refs, 1);
    return b;
}

void rt_buf_unref(rt_buf *b) {
    if (b == NULL) return;
    if (atomic_fetch_sub(&b->refs, 1) != 1) return;
    int owned = b->release_frees; /* read first: release may hand b on */
    if (b->release) b->release(b);
    if (!owned) free(b);
}

/* ---- tensors ---- */

static ms_status tensor_alloc_struct(rt_dtype dt, const rt_shape *shape, rt_tensor **out) {
    if (shape->rank < 0 || shape->rank > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "tensor rank %d out of range 0..%d", shape->rank, RT_MAX_RANK);
    int64_t n = rt_shape_nelem(shape);
    if (n < 0) {
        char sb[128];
        return ms_errf(MS_EINVAL, "invalid tensor shape %s", rt_shape_str(shape, sb, sizeof sb));
    }
    rt_tensor *t = calloc(1, sizeof(*t));
    if (t == NULL) return ms_errf(MS_ENOMEM, "out of memory allocating a tensor");
    atomic_init(&t->refs, 1);
    t->dtype = dt;
    t->shape = *shape;
    t->nelem = n;
    *out = t;
    return MS_OK;
}

static size_t elem_size_for_storage(rt_dtype dt) {
    if (dt == RT_DT_STRING) return sizeof(rt_str);
    if (dt == RT_DT_RESOURCE || dt == RT_DT_VARIANT) return sizeof(void *);
    return rt_dtype_size(dt);
}

ms_status rt_tensor_new(rt_dtype dt, const rt_shape *shape, rt_tensor **out) {
    size_t es = elem_size_for_storage(dt);
    if (es == 0) return ms_errf(MS_ENOTSUP, "unsupported dtype %s (%d)", rt_dtype_name(dt), dt);
    rt_tensor *t;
    ms_status st = tensor_alloc_struct(dt, shape, &t);
    if (st != MS_OK) return st;
    if ((uint64_t)t->nelem > SIZE_MAX / es) {
        long long n = (long long)t->nelem;
        free(t);
        return ms_errf(MS_ENOMEM, "tensor of %lld elements is too large", n);
    }
    size_t nbytes = (size_t)t->nelem * es;
    t->buf = rt_buf_alloc(nbytes);
    if (t->buf == NULL) {
        free(t);
        return ms_errf(MS_ENOMEM, "out of memory allocating %zu bytes", nbytes);
    }
    memset(t->buf->data, 0, nbytes);
    t->data = t->buf->data;
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_new_on(rt_dtype dt, const rt_shape *shape, rt_buf *buf, size_t offset,
                           rt_tensor **out) {
    rt_tensor *t;
    ms_status st = tensor_alloc_struct(dt, shape, &t);
    if (st != MS_OK) return st;
    size_t need = (size_t)t->nelem * elem_size_for_storage(dt);
    if (offset > buf->size || buf->size - offset < need) {
        free(t);
        return ms_errf(MS_EINTERNAL, "buffer of %zu bytes too small for tensor at offset %zu",
                       buf->size, offset);
    }
    t->buf = rt_buf_ref(buf);
    t->data = (char *)buf->data + offset;
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_view(const rt_tensor *src, const rt_shape *shape, rt_tensor **out) {
    rt_tensor *t;
    ms_status st = tensor_alloc_struct(src->dtype, shape, &t);
    if (st != MS_OK) return st;
    if (t->nelem != src->nelem) {
        char a[128], b[128];
        free(t);
        return ms_errf(MS_EINVAL, "cannot view %lld elements of shape %s as shape %s",
                       (long long)src->nelem, rt_shape_str(&src->shape, a, sizeof a),
                       rt_shape_str(shape, b, sizeof b));
    }
    t->buf = rt_buf_ref(src->buf);
    t->strbuf = rt_buf_ref(src->strbuf);
    t->data = src->data;
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_new_strings(const rt_shape *shape, const rt_str *strs, rt_tensor **out) {
    rt_tensor *t;
    ms_status st = rt_tensor_new(RT_DT_STRING, shape, &t);
    if (st != MS_OK) return st;
    size_t total = 0;
    for (int64_t i = 0; i < t->nelem; i++) total += (size_t)strs[i].len;
    t->strbuf = rt_buf_alloc(total);
    if (t->strbuf == NULL) {
        rt_tensor_unref(t);
        return ms_errf(MS_ENOMEM, "out of memory for %zu string bytes", total);
    }
    uint8_t *p = t->strbuf->data;
    rt_str *dst = rt_tensor_strs(t);
    for (int64_t i = 0; i < t->nelem; i++) {
        if (strs[i].len) memcpy(p, strs[i].data, (size_t)strs[i].len);
        dst[i].data = p;
        dst[i].len = strs[i].len;
        p += strs[i].len;
    }
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_clone(const rt_tensor *src, rt_tensor **out) {
    if (src->dtype == RT_DT_STRING) return rt_tensor_new_strings(&src->shape, rt_tensor_strs(src), out);
    rt_tensor *t;
    ms_status st = rt_tensor_new(src->dtype, &src->shape, &t);
    if (st != MS_OK) return st;
    size_t es = elem_size_for_storage(src->dtype);
    if (t->nelem) memcpy(t->data, src->data, (size_t)t->nelem * es);
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_scalar_f32(float v, rt_tensor **out) {
    rt_shape s = {0};
    ms_status st = rt_tensor_new(RT_DT_FLOAT, &s, out);
    if (st == MS_OK) rt_tensor_f32(*out)[0] = v;
    return st;
}

ms_status rt_tensor_scalar_string(const char *s, size_t len, rt_tensor **out) {
    rt_shape sh = {0};
    rt_str str = {(const uint8_t *)s, len};
    return rt_tensor_new_strings(&sh, &str, out);
}

rt_tensor *rt_tensor_ref(rt_tensor *t) {
    if (t) atomic_fetch_add(&t->refs, 1);
    return t;
}

void rt_tensor_unref(rt_tensor *t) {
    if (t == NULL) return;
    if (atomic_fetch_sub(&t->refs, 1) != 1) return;
    rt_buf_unref(t->buf);
    rt_buf_unref(t->strbuf);
    free(t);
}

int rt_tensor_equal(const rt_tensor *a, const rt_tensor *b) {
    if (a->dtype != b->dtype || !rt_shape_equal(&a->shape, &b->shape)) return 0;
    if (a->dtype == RT_DT_STRING) {
        const rt_str *x = rt_tensor_strs(a), *y = rt_tensor_strs(b);
        for (int64_t i = 0; i < a->nelem; i++)
            if (x[i].len != y[i].len || (x[i].len && memcmp(x[i].data, y[i].data, x[i].len)))
                return 0;
        return 1;
    }
    size_t n = (size_t)a->nelem * elem_size_for_storage(a->dtype);
    return n == 0 || memcmp(a->data, b->data, n) == 0;
}
