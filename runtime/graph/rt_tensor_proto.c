/* rt_tensor_proto.c - tensorflow.TensorProto <-> rt_tensor conversions. */
#include "rt_tensor_proto.h"

#include <stdlib.h>
#include <string.h>

#include "rt_lowp.h"

ms_status rt_shape_from_proto(const Tensorflow__TensorShapeProto *p, rt_shape *out) {
    memset(out, 0, sizeof(*out));
    if (p == NULL) return MS_OK;
    if (p->unknown_rank) {
        out->rank = -1;
        return MS_OK;
    }
    if (p->n_dim > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "shape has %zu dims; at most %d are supported", p->n_dim,
                       RT_MAX_RANK);
    out->rank = (int)p->n_dim;
    for (size_t i = 0; i < p->n_dim; i++) out->dim[i] = p->dim[i]->size;
    return MS_OK;
}

/* Copies `count` source values into n elements, repeating the last value when
 * count < n (TensorFlow's compact constant encoding). */
#define FILL_FROM(TYPE, SRC, COUNT, CONV)                                                   \
    do {                                                                                    \
        TYPE *d_ = (TYPE *)t->data;                                                         \
        for (int64_t i_ = 0; i_ < t->nelem; i_++) {                                         \
            size_t k_ = (size_t)i_ < (COUNT) ? (size_t)i_ : (COUNT) - 1;                    \
            d_[i_] = (TYPE)CONV((SRC)[k_]);                                                 \
        }                                                                                   \
    } while (0)
#define AS_IS(x) (x)

static size_t typed_count(const Tensorflow__TensorProto *p, rt_dtype dt) {
    switch (dt) {
    case RT_DT_FLOAT: return p->n_float_val;
    case RT_DT_DOUBLE: return p->n_double_val;
    case RT_DT_INT32:
    case RT_DT_INT16:
    case RT_DT_INT8:
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_QINT8:
    case RT_DT_QUINT8:
    case RT_DT_QINT16:
    case RT_DT_QUINT16:
    case RT_DT_QINT32: return p->n_int_val;
    case RT_DT_INT64: return p->n_int64_val;
    case RT_DT_BOOL: return p->n_bool_val;
    case RT_DT_STRING: return p->n_string_val;
    case RT_DT_HALF:
    case RT_DT_BFLOAT16: return p->n_half_val;
    case RT_DT_UINT32: return p->n_uint32_val;
    case RT_DT_UINT64: return p->n_uint64_val;
    case RT_DT_COMPLEX64: return p->n_scomplex_val / 2;
    case RT_DT_COMPLEX128: return p->n_dcomplex_val / 2;
    default: return 0;
    }
}

static int read_varint32(const uint8_t **p, const uint8_t *end, uint32_t *v) {
    uint32_t r = 0;
    for (int shift = 0; shift <= 28 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* TensorFlow's tensor_content for strings: varint32 length of every element,
 * then all the bytes. Every element needs at least its length byte, so n is
 * checked against the content's size before anything is allocated. */
static ms_status strings_from_content(const Tensorflow__TensorProto *p, const rt_shape *shape,
                                      ms_budget *budget, rt_tensor **out) {
    int64_t n = rt_shape_nelem(shape);
    const uint8_t *c = p->tensor_content.data, *end = c + p->tensor_content.len;
    if ((uint64_t)n > p->tensor_content.len)
        return ms_errf(MS_EINVAL,
                       "DT_STRING tensor_content of %zu bytes cannot hold %lld elements",
                       p->tensor_content.len, (long long)n);
    ms_status st = ms_budget_take(budget, (uint64_t)n * 2 * sizeof(rt_str) + p->tensor_content.len,
                                  "a DT_STRING input");
    if (st != MS_OK) return st;
    rt_str *strs = calloc((size_t)n + 1, sizeof(*strs));
    if (strs == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        uint32_t len;
        if (read_varint32(&c, end, &len) != 0) {
            free(strs);
            return ms_errf(MS_EINVAL, "DT_STRING tensor_content: bad length of element %lld",
                           (long long)i);
        }
        strs[i].len = len;
    }
    for (int64_t i = 0; i < n; i++) {
        if ((uint64_t)(end - c) < strs[i].len) {
            free(strs);
            return ms_errf(MS_EINVAL, "DT_STRING tensor_content is truncated");
        }
        strs[i].data = c;
        c += strs[i].len;
    }
    st = rt_tensor_new_strings(shape, strs, out);
    free(strs);
    return st;
}

/* string_val: count values for n elements (count < n repeats the last one).
 * The bytes of the count values are copied once, or not at all when `keep`
 * takes them over; repeated elements point at the same bytes, so a
 * broadcast costs 16 bytes per element. */
static ms_status strings_from_vals(const Tensorflow__TensorProto *p, size_t count,
                                   const rt_shape *shape, ms_budget *budget,
                                   const rt_strkeep *keep, rt_tensor **out) {
    int64_t n = rt_shape_nelem(shape);
    uint64_t total = 0;
    for (size_t k = 0; k < count; k++) total += p->string_val[k].len;
    ms_status st = ms_budget_take(budget, (uint64_t)n * sizeof(rt_str) + total, "a DT_STRING input");
    if (st != MS_OK) return st;
    rt_tensor *t;
    if ((st = rt_tensor_new(RT_DT_STRING, shape, &t)) != MS_OK) return st;
    rt_str *d = rt_tensor_strs(t);
    if (keep != NULL && total > 0 && (t->strbuf = keep->fn(keep->arg, p->string_val, count)) != NULL) {
        for (size_t k = 0; k < count; k++) {
            d[k].data = p->string_val[k].data;
            d[k].len = p->string_val[k].len;
        }
        for (int64_t i = (int64_t)count; i < t->nelem; i++) d[i] = d[count - 1];
        *out = t;
        return MS_OK;
    }
    t->strbuf = rt_buf_alloc((size_t)total);
    if (t->strbuf == NULL) {
        rt_tensor_unref(t);
        return ms_errf(MS_ENOMEM, "out of memory for %llu string bytes", (unsigned long long)total);
    }
    uint8_t *b = t->strbuf->data;
    for (size_t k = 0; k < count; k++) {
        if (p->string_val[k].len) memcpy(b, p->string_val[k].data, p->string_val[k].len);
        d[k].data = b;
        d[k].len = p->string_val[k].len;
        b += p->string_val[k].len;
    }
    for (int64_t i = (int64_t)count; i < t->nelem; i++) d[i] = d[count - 1];
    *out = t;
    return MS_OK;
}

/* The checks every request tensor passes before any allocation: defined
 * shape, a dtype we hold (no _REF), and a number of values or bytes that fits
 * the shape; then the bytes are taken from the request's budget. */
static ms_status precheck(const Tensorflow__TensorProto *p, int request, rt_dtype *dt_out,
                          rt_shape *shape, size_t *count_out) {
    char sb[160];
    int code = (int)p->dtype;
    rt_dtype dt = rt_dtype_base(code);
    ms_status st = rt_shape_from_proto(p->tensor_shape, shape);
    if (st != MS_OK) return st;
    if (shape->rank < 0) return ms_errf(MS_EINVAL, "tensor has unknown rank");
    for (int i = 0; i < shape->rank; i++)
        if (shape->dim[i] < 0)
            return ms_errf(MS_EINVAL, "tensor shape %s is not fully defined",
                           rt_shape_str(shape, sb, sizeof sb));
    if (request && code > 100)
        return ms_errf(MS_EINVAL,
                       "tensor dtype %s_REF (%d) is a reference type; send the value type %s (%d)",
                       rt_dtype_name(dt), code, rt_dtype_name(dt), (int)dt);
    if (dt != RT_DT_STRING && !rt_dtype_is_pod(dt))
        return ms_errf(request ? MS_EINVAL : MS_ENOTSUP, "tensor dtype %s (%d) is not supported",
                       rt_dtype_name(dt), code);
    int64_t nelem = rt_shape_nelem(shape);
    size_t esz = dt == RT_DT_STRING ? sizeof(rt_str) : rt_dtype_size(dt);
    if (nelem < 0 || (esz && (uint64_t)nelem > (uint64_t)INT64_MAX / esz))
        return ms_errf(MS_EINVAL, "tensor shape %s is too large",
                       rt_shape_str(shape, sb, sizeof sb));
    *dt_out = dt;
    *count_out = 0;
    if (nelem == 0 || p->tensor_content.len > 0) {
        if (nelem > 0 && dt != RT_DT_STRING) {
            uint64_t need = (uint64_t)nelem * esz;
            if (p->tensor_content.len != need)
                return ms_errf(MS_EINVAL,
                               "tensor_content has %zu bytes but dtype %s and shape %s need %llu",
                               p->tensor_content.len, rt_dtype_name(dt),
                               rt_shape_str(shape, sb, sizeof sb), (unsigned long long)need);
        }
        return MS_OK;
    }
    size_t count = typed_count(p, dt);
    if (count == 0 || count > (size_t)nelem)
        return ms_errf(MS_EINVAL,
                       "tensor of dtype %s and shape %s (%lld elements) carries %zu values",
                       rt_dtype_name(dt), rt_shape_str(shape, sb, sizeof sb), (long long)nelem,
                       count);
    *count_out = count;
    return MS_OK;
}

static ms_status from_proto(const Tensorflow__TensorProto *p, int request, ms_budget *budget,
                            const rt_strkeep *keep, rt_tensor **out) {
    rt_dtype dt = RT_DT_INVALID;
    rt_shape shape;
    size_t count = 0;
    ms_status st = precheck(p, request, &dt, &shape, &count);
    if (st != MS_OK) return st;
    int64_t nelem = rt_shape_nelem(&shape);
    if (nelem > 0 && dt == RT_DT_STRING && p->tensor_content.len > 0)
        return strings_from_content(p, &shape, budget, out);
    if (nelem > 0 && dt == RT_DT_STRING)
        return strings_from_vals(p, count, &shape, budget, keep, out);
    if (nelem > 0 &&
        (st = ms_budget_take(budget, (uint64_t)nelem * rt_dtype_size(dt), "an input tensor")) !=
            MS_OK)
        return st;
    rt_tensor *t;
    if ((st = rt_tensor_new(dt, &shape, &t)) != MS_OK) return st;
    if (t->nelem == 0) {
        *out = t;
        return MS_OK;
    }
    if (p->tensor_content.len > 0) {
        memcpy(t->data, p->tensor_content.data, rt_tensor_nbytes(t));
        /* int4 / int2 / float4 come one element per byte (as TensorFlow
         * holds them); a byte with bits beyond the element's is refused, not
         * read as some other value. */
        int64_t bad = rt_lowp_first_invalid(dt, t->data, t->nelem);
        if (bad >= 0) {
            uint8_t b = ((const uint8_t *)t->data)[bad];
            rt_tensor_unref(t);
            return ms_errf(MS_EINVAL,
                           "tensor_content of a %s tensor: byte %lld (0x%02x) is not an element "
                           "(one element per byte, %d value bits%s)",
                           rt_dtype_name(dt), (long long)bad, b, rt_lowp_bits(dt),
                           dt == RT_DT_INT4 || dt == RT_DT_INT2 ? ", sign-extended" : "");
        }
        *out = t;
        return MS_OK;
    }
    switch (dt) {
    case RT_DT_FLOAT: FILL_FROM(float, p->float_val, count, AS_IS); break;
    case RT_DT_DOUBLE: FILL_FROM(double, p->double_val, count, AS_IS); break;
    case RT_DT_INT32:
    case RT_DT_QINT32: FILL_FROM(int32_t, p->int_val, count, AS_IS); break;
    case RT_DT_INT16:
    case RT_DT_QINT16: FILL_FROM(int16_t, p->int_val, count, AS_IS); break;
    case RT_DT_INT8:
    case RT_DT_QINT8: FILL_FROM(int8_t, p->int_val, count, AS_IS); break;
    case RT_DT_UINT8:
    case RT_DT_QUINT8: FILL_FROM(uint8_t, p->int_val, count, AS_IS); break;
    case RT_DT_UINT16:
    case RT_DT_QUINT16: FILL_FROM(uint16_t, p->int_val, count, AS_IS); break;
    case RT_DT_INT64: FILL_FROM(int64_t, p->int64_val, count, AS_IS); break;
    case RT_DT_BOOL: FILL_FROM(uint8_t, p->bool_val, count, !!); break;
    case RT_DT_HALF:
    case RT_DT_BFLOAT16: FILL_FROM(uint16_t, p->half_val, count, AS_IS); break;
    case RT_DT_UINT32: FILL_FROM(uint32_t, p->uint32_val, count, AS_IS); break;
    case RT_DT_UINT64: FILL_FROM(uint64_t, p->uint64_val, count, AS_IS); break;
    case RT_DT_COMPLEX64: {
        float *d = t->data;
        for (int64_t i = 0; i < t->nelem; i++) {
            size_t k = (size_t)i < count ? (size_t)i : count - 1;
            d[2 * i] = p->scomplex_val[2 * k];
            d[2 * i + 1] = p->scomplex_val[2 * k + 1];
        }
        break;
    }
    case RT_DT_COMPLEX128: {
        double *d = t->data;
        for (int64_t i = 0; i < t->nelem; i++) {
            size_t k = (size_t)i < count ? (size_t)i : count - 1;
            d[2 * i] = p->dcomplex_val[2 * k];
            d[2 * i + 1] = p->dcomplex_val[2 * k + 1];
        }
        break;
    }
    default:
        rt_tensor_unref(t);
        return ms_errf(request ? MS_EINVAL : MS_ENOTSUP, "tensor dtype %s is not supported",
                       rt_dtype_name(dt));
    }
    *out = t;
    return MS_OK;
}

ms_status rt_tensor_from_proto(const Tensorflow__TensorProto *p, rt_tensor **out) {
    return from_proto(p, 0, NULL, NULL, out);
}

ms_status rt_tensor_from_request_proto(const Tensorflow__TensorProto *p, ms_budget *budget,
                                       const rt_strkeep *keep, rt_tensor **out) {
    return from_proto(p, 1, budget, keep, out);
}

ms_status rt_shape_to_proto(const rt_shape *s, Tensorflow__TensorShapeProto *p) {
    tensorflow__tensor_shape_proto__init(p);
    if (s->rank < 0) {
        p->unknown_rank = 1;
        return MS_OK;
    }
    if (s->rank == 0) return MS_OK;
    /* One allocation: the pointer array followed by the Dim messages. */
    size_t n = (size_t)s->rank;
    void *mem = calloc(1, n * (sizeof(void *) + sizeof(Tensorflow__TensorShapeProto__Dim)));
    if (mem == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    Tensorflow__TensorShapeProto__Dim **ptrs = mem;
    Tensorflow__TensorShapeProto__Dim *dims = (void *)((char *)mem + n * sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dims[i]);
        dims[i].size = s->dim[i];
        ptrs[i] = &dims[i];
    }
    p->dim = ptrs;
    p->n_dim = n;
    return MS_OK;
}

void rt_shape_proto_clear(Tensorflow__TensorShapeProto *p) {
    free(p->dim);
    p->dim = NULL;
    p->n_dim = 0;
}

#define COPY_TO(FIELD, NFIELD, TYPE, SRCTYPE)                                               \
    do {                                                                                    \
        TYPE *a_ = malloc(sizeof(TYPE) * (size_t)(t->nelem ? t->nelem : 1));                \
        if (a_ == NULL) goto oom;                                                           \
        const SRCTYPE *s_ = (const SRCTYPE *)t->data;                                       \
        for (int64_t i_ = 0; i_ < t->nelem; i_++) a_[i_] = (TYPE)s_[i_];                    \
        p->FIELD = a_;                                                                      \
        p->NFIELD = (size_t)t->nelem;                                                       \
    } while (0)

ms_status rt_tensor_to_proto(const rt_tensor *t, int use_content, Tensorflow__TensorProto *p) {
    p->dtype = (Tensorflow__DataType)t->dtype;
    p->tensor_shape = malloc(sizeof(*p->tensor_shape));
    if (p->tensor_shape == NULL) goto oom;
    if (rt_shape_to_proto(&t->shape, p->tensor_shape) != MS_OK) {
        free(p->tensor_shape);
        p->tensor_shape = NULL;
        goto oom;
    }
    if (t->dtype == RT_DT_STRING) {
        ProtobufCBinaryData *v = malloc(sizeof(*v) * (size_t)(t->nelem ? t->nelem : 1));
        if (v == NULL) goto oom;
        const rt_str *s = rt_tensor_strs(t);
        for (int64_t i = 0; i < t->nelem; i++) {
            v[i].data = (uint8_t *)s[i].data; /* borrowed from t */
            v[i].len = (size_t)s[i].len;
        }
        p->string_val = v;
        p->n_string_val = (size_t)t->nelem;
        return MS_OK;
    }
    if (!rt_dtype_is_pod(t->dtype))
        return ms_errf(MS_ENOTSUP, "cannot serialise a %s tensor", rt_dtype_name(t->dtype));
    if (use_content) {
        p->tensor_content.data = t->data; /* borrowed from t */
        p->tensor_content.len = rt_tensor_nbytes(t);
        return MS_OK;
    }
    switch (t->dtype) {
    case RT_DT_FLOAT: COPY_TO(float_val, n_float_val, float, float); break;
    case RT_DT_DOUBLE: COPY_TO(double_val, n_double_val, double, double); break;
    case RT_DT_INT32:
    case RT_DT_QINT32: COPY_TO(int_val, n_int_val, int32_t, int32_t); break;
    case RT_DT_INT16:
    case RT_DT_QINT16: COPY_TO(int_val, n_int_val, int32_t, int16_t); break;
    case RT_DT_INT8:
    case RT_DT_QINT8: COPY_TO(int_val, n_int_val, int32_t, int8_t); break;
    case RT_DT_UINT8:
    case RT_DT_QUINT8: COPY_TO(int_val, n_int_val, int32_t, uint8_t); break;
    case RT_DT_UINT16:
    case RT_DT_QUINT16: COPY_TO(int_val, n_int_val, int32_t, uint16_t); break;
    case RT_DT_INT64: COPY_TO(int64_val, n_int64_val, int64_t, int64_t); break;
    case RT_DT_BOOL: COPY_TO(bool_val, n_bool_val, protobuf_c_boolean, uint8_t); break;
    case RT_DT_HALF:
    case RT_DT_BFLOAT16: COPY_TO(half_val, n_half_val, int32_t, uint16_t); break;
    case RT_DT_UINT32: COPY_TO(uint32_val, n_uint32_val, uint32_t, uint32_t); break;
    case RT_DT_UINT64: COPY_TO(uint64_val, n_uint64_val, uint64_t, uint64_t); break;
    default:
        /* Complex types: raw bytes are the unambiguous encoding. */
        p->tensor_content.data = t->data;
        p->tensor_content.len = rt_tensor_nbytes(t);
        break;
    }
    return MS_OK;
oom:
    rt_tensor_proto_clear(p);
    return ms_errf(MS_ENOMEM, "out of memory serialising a tensor");
}

void rt_tensor_proto_clear(Tensorflow__TensorProto *p) {
    if (p->tensor_shape) {
        rt_shape_proto_clear(p->tensor_shape);
        free(p->tensor_shape);
        p->tensor_shape = NULL;
    }
    free(p->float_val);
    free(p->double_val);
    free(p->int_val);
    free(p->int64_val);
    free(p->bool_val);
    free(p->half_val);
    free(p->uint32_val);
    free(p->uint64_val);
    free(p->string_val);
    p->float_val = NULL;
    p->double_val = NULL;
    p->int_val = NULL;
    p->int64_val = NULL;
    p->bool_val = NULL;
    p->half_val = NULL;
    p->uint32_val = NULL;
    p->uint64_val = NULL;
    p->string_val = NULL;
    p->n_float_val = p->n_double_val = p->n_int_val = p->n_int64_val = 0;
    p->n_bool_val = p->n_half_val = p->n_uint32_val = p->n_uint64_val = p->n_string_val = 0;
    p->tensor_content.data = NULL;
    p->tensor_content.len = 0;
}
