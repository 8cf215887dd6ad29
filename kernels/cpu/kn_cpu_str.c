/* kn_cpu_str.c - TensorFlow's string ops for text preprocessing, as its
 * kernels define them (string_join_op, string_length_op, string_lower_op /
 * string_upper_op, substr_op, string_split_op, string_strip_op,
 * as_string_op):
 *
 *   StringJoin    N strings (each a scalar or all of one shape) joined with
 *                 attr separator, element by element.
 *   StringLength  int32 length in bytes (unit BYTE) or in UTF-8 characters
 *                 (UTF8_CHAR: the bytes that are not continuation bytes
 *                 10xxxxxx, as TensorFlow counts them, valid UTF-8 or not).
 *   StringLower / StringUpper  encoding "" maps ASCII letters and leaves
 *                 every other byte as it is (absl's ASCII mapping, what
 *                 TensorFlow does); encoding "utf-8" asks for ICU's Unicode
 *                 mapping, done here for ASCII strings only: a string with a
 *                 byte >= 0x80 fails the run instead of being left unmapped.
 *   Substr        input, pos, len (int32 / int64, pos and len of one shape)
 *                 broadcast against each other; unit BYTE or UTF8_CHAR;
 *                 negative pos counts from the end; a pos outside
 *                 [-size, size] fails as TensorFlow's does; len past the end
 *                 takes what is there, a negative len with unit BYTE the
 *                 rest of the string.
 *   StringSplitV2 input [N], sep (scalar) -> the sparse indices [M, 2],
 *                 values [M] and dense shape [N, max parts]: Python's
 *                 str.split(sep) with maxsplit, or (sep "") runs of ASCII
 *                 whitespace as one separator, as TensorFlow's SplitV2.
 *   StringSplit   the legacy op (tf.compat.v1.string_split): the same outputs;
 *                 any byte of `delimiter` separates ("" splits into bytes),
 *                 empty parts dropped when skip_empty (default), "" gives none.
 *   StringStrip   leading and trailing ASCII whitespace removed.
 *   AsString      numbers and bools as text through the printf format
 *                 TensorFlow builds from the attrs (fill flag, width,
 *                 precision; f / e / g for floats, "true" / "false").
 *
 * Every string output gets its bytes through kn__str_own, so an output that
 * would pass the request's budget is refused before it is allocated.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_str.h"
#include "kn_cpu_util.h"

/* absl::ascii_isspace: space, \t, \n, \v, \f, \r. */
static int is_ws(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* A 10xxxxxx byte: not the start of a UTF-8 character. */
static int is_trail(uint8_t c) {
    return (c & 0xc0) == 0x80;
}

/* ---- StringJoin ---- */

static ms_status join_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    if (node->nin < 1) return KN_EINVAL(node, "needs at least one input");
    const rt_shape *shape = NULL;
    for (int i = 0; i < node->nin; i++) {
        ms_status st = kn__need_str(node, in[i], "every input");
        if (st != MS_OK) return st;
        if (in[i]->shape.rank == 0) continue;
        if (shape == NULL)
            shape = &in[i]->shape;
        else if (!rt_shape_equal(shape, &in[i]->shape))
            return KN_EINVAL(node, "Input shapes do not match: %s vs. %s", kn__shp(shape),
                             kn__shp(&in[i]->shape));
    }
    rt_shape scalar = {0};
    if (shape == NULL) shape = &scalar;
    size_t seplen = 0;
    const char *sep = kn_attr_s(node, "separator", &seplen);
    if (sep == NULL) seplen = 0;
    ms_status st = kn__str_output(ctx, node, 0, shape, &out[0]);
    if (st != MS_OK) return st;
    rt_str *o = rt_tensor_strs(out[0]);
    for (int64_t k = 0; k < out[0]->nelem; k++) {
        uint64_t len = (uint64_t)seplen * (uint64_t)(node->nin - 1);
        for (int i = 0; i < node->nin; i++) {
            const rt_str *s = &rt_tensor_strs(in[i])[in[i]->shape.rank ? k : 0];
            if (s->len > UINT64_MAX - len) return KN_EINVAL(node, "joined string too long");
            len += s->len;
        }
        o[k] = (rt_str){NULL, len};
    }
    if ((st = kn__str_own(ctx, node, out[0])) != MS_OK) return st;
    for (int64_t k = 0; k < out[0]->nelem; k++) {
        uint8_t *p = (uint8_t *)o[k].data;
        for (int i = 0; i < node->nin; i++) {
            const rt_str *s = &rt_tensor_strs(in[i])[in[i]->shape.rank ? k : 0];
            if (i > 0 && seplen) {
                memcpy(p, sep, seplen);
                p += seplen;
            }
            if (s->len) memcpy(p, s->data, (size_t)s->len);
            p += s->len;
        }
    }
    return MS_OK;
}

/* ---- StringLength ---- */

/* 1 for unit UTF8_CHAR, 0 for BYTE (the default); -1 for other values. */
static int unit_of(const kn_node *node) {
    if (kn_attr_s_eq(node, "unit", "BYTE", "BYTE")) return 0;
    if (kn_attr_s_eq(node, "unit", "UTF8_CHAR", "BYTE")) return 1;
    return -1;
}

static ms_status unit_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in, (void)state;
    if (unit_of(node) < 0) {
        size_t len = 0;
        const char *u = kn_attr_s(node, "unit", &len);
        return KN_EINVAL(node, "unit '%.*s' is not one of BYTE, UTF8_CHAR", (int)len, u);
    }
    return MS_OK;
}

static ms_status length_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st == MS_OK) st = kn__need_str(node, in[0], "input");
    if (st == MS_OK) st = unit_prepare(node, NULL, NULL);
    if (st != MS_OK) return st;
    int utf8 = unit_of(node);
    if ((st = kn__output(ctx, node, 0, RT_DT_INT32, &in[0]->shape, &out[0])) != MS_OK) return st;
    const rt_str *s = rt_tensor_strs(in[0]);
    int32_t *o = out[0]->data;
    for (int64_t i = 0; i < in[0]->nelem; i++) {
        uint64_t n = s[i].len;
        if (utf8)
            for (uint64_t j = 0; j < s[i].len; j++) n -= is_trail(s[i].data[j]);
        if (n > INT32_MAX)
            return KN_EINVAL(node, "string %lld is %llu units long, more than int32 holds",
                             (long long)i, (unsigned long long)n);
        o[i] = (int32_t)n;
    }
    return MS_OK;
}

/* ---- StringLower / StringUpper ---- */

static ms_status case_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in, (void)state;
    size_t len = 0;
    const char *e = kn_attr_s(node, "encoding", &len);
    if (e == NULL || len == 0 || (len == 5 && memcmp(e, "utf-8", 5) == 0)) return MS_OK;
    return KN_EINVAL(node, "encoding '%.*s' is not supported (\"\" for ASCII or \"utf-8\")",
                     (int)len, e);
}

static ms_status case_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st == MS_OK) st = kn__need_str(node, in[0], "input");
    if (st == MS_OK) st = case_prepare(node, NULL, NULL);
    if (st != MS_OK) return st;
    size_t elen = 0;
    int utf8 = kn_attr_s(node, "encoding", &elen) != NULL && elen > 0;
    int upper = strcmp(node->op, "StringUpper") == 0;
    const rt_str *s = rt_tensor_strs(in[0]);
    if (utf8)
        for (int64_t i = 0; i < in[0]->nelem; i++)
            for (uint64_t j = 0; j < s[i].len; j++)
                if (s[i].data[j] >= 0x80)
                    return KN_EINVAL(node, "string %lld is not ASCII: the utf-8 case mapping is "
                                     "implemented for ASCII strings only", (long long)i);
    if ((st = kn__str_output(ctx, node, 0, &in[0]->shape, &out[0])) != MS_OK) return st;
    rt_str *o = rt_tensor_strs(out[0]);
    memcpy(o, s, (size_t)in[0]->nelem * sizeof(*o));
    if ((st = kn__str_own(ctx, node, out[0])) != MS_OK) return st;
    for (int64_t i = 0; i < out[0]->nelem; i++) {
        uint8_t *p = (uint8_t *)o[i].data;
        for (uint64_t j = 0; j < o[i].len; j++) {
            if (upper && p[j] >= 'a' && p[j] <= 'z') p[j] = (uint8_t)(p[j] - 32);
            if (!upper && p[j] >= 'A' && p[j] <= 'Z') p[j] = (uint8_t)(p[j] + 32);
        }
    }
    return MS_OK;
}

/* ---- Substr ---- */

static int64_t int_at(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* Byte offset after moving n UTF-8 characters forward from *at (at most to
 * the end); returns the characters moved. */
static int64_t utf8_forward(const rt_str *s, int64_t n, uint64_t *at) {
    int64_t moved = 0;
    while (moved < n && *at < s->len) {
        do (*at)++;
        while (*at < s->len && is_trail(s->data[*at]));
        moved++;
    }
    return moved;
}

/* Sets *sub to input s from pos for len in `utf8` units; 0 when pos is out
 * of range. */
static int substr_one(const rt_str *s, int64_t pos, int64_t len, int utf8, rt_str *sub) {
    uint64_t start, stop;
    if (!utf8) {
        int64_t size = (int64_t)s->len;
        if (pos < 0) pos += size;
        if (pos < 0 || pos > size) return 0;
        start = (uint64_t)pos;
        stop = len < 0 || (uint64_t)len > s->len - start ? s->len : start + (uint64_t)len;
    } else {
        if (pos >= 0) {
            start = 0;
            if (utf8_forward(s, pos, &start) != pos) return 0;
        } else { /* -pos characters back from the end */
            start = s->len;
            int64_t back = 0;
            while (back < -pos && start > 0) {
                do start--;
                while (start > 0 && is_trail(s->data[start]));
                back++;
            }
            if (back != -pos) return 0;
        }
        stop = start;
        utf8_forward(s, len, &stop);
    }
    *sub = (rt_str){s->data + start, stop - start};
    return 1;
}

static ms_status substr_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st == MS_OK) st = kn__need_str(node, in[0], "input");
    if (st == MS_OK) st = unit_prepare(node, NULL, NULL);
    if (st != MS_OK) return st;
    const rt_tensor *pos = in[1], *len = in[2];
    if ((pos->dtype != RT_DT_INT32 && pos->dtype != RT_DT_INT64) || len->dtype != pos->dtype)
        return KN_EINVAL(node, "pos and len must both be int32 or both int64, got %s and %s",
                         rt_dtype_name(pos->dtype), rt_dtype_name(len->dtype));
    if (!rt_shape_equal(&pos->shape, &len->shape))
        return KN_EINVAL(node, "pos and len should have the same shape, got %s vs. %s",
                         kn__shp(&pos->shape), kn__shp(&len->shape));
    int utf8 = unit_of(node);
    const rt_shape *shp[3] = {&in[0]->shape, &pos->shape, &len->shape};
    kn_bcast b;
    if ((st = kn__bcast_init(&b, node, shp, 3)) != MS_OK) return st;
    if ((st = kn__str_output(ctx, node, 0, &b.out, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    const rt_str *x = rt_tensor_strs(in[0]);
    rt_str *o = rt_tensor_strs(out[0]);
    int64_t inner = b.dim[b.rank - 1];
    for (int64_t r = 0, k = 0; r < b.rows; r++) {
        int64_t off[KN_BCAST_MAX];
        kn__bcast_row(&b, r, off, 3);
        for (int64_t j = 0; j < inner; j++, k++) {
            int64_t xi = off[0] + j * b.stride[0][b.rank - 1];
            int64_t p = int_at(pos, off[1] + j * b.stride[1][b.rank - 1]);
            int64_t l = int_at(len, off[2] + j * b.stride[2][b.rank - 1]);
            if (utf8 && l < 0)
                return KN_EINVAL(node, "a negative len (%lld at index %lld) with unit UTF8_CHAR "
                                 "is not implemented", (long long)l, (long long)k);
            if (!substr_one(&x[xi], p, l, utf8, &o[k]))
                return KN_EINVAL(node, "pos %lld out of range for string at index %lld",
                                 (long long)p, (long long)k);
        }
    }
    return kn__str_own(ctx, node, out[0]);
}

/* ---- StringSplitV2 ---- */

/* TensorFlow's SplitV2 of s: with sep, Python's s.split(sep, maxsplit);
 * without, runs of whitespace separate and leading ones are skipped. Once
 * maxsplit splits are made the rest (after the whitespace) is the last part,
 * empty or not; maxsplit 0 gives s whole. Fills parts when non-NULL;
 * returns the count. */
static int64_t split_v2(const rt_str *s, const uint8_t *sep, size_t seplen, int64_t maxsplit,
                        rt_str *parts) {
    const uint8_t *p = s->len ? s->data : (const uint8_t *)"", *end = p + s->len;
    int64_t n = 0;
    if (maxsplit == 0) {
        if (parts) parts[0] = *s;
        return 1;
    }
    if (seplen == 0) {
        while (p < end && is_ws(*p)) p++;
        while (p < end) {
            const uint8_t *q = p;
            while (q < end && !is_ws(*q)) q++;
            if (parts) parts[n] = (rt_str){p, (uint64_t)(q - p)};
            n++;
            p = q;
            while (p < end && is_ws(*p)) p++;
            if (maxsplit > 0 && n == maxsplit) {
                if (parts) parts[n] = (rt_str){p, (uint64_t)(end - p)};
                return n + 1;
            }
        }
        return n;
    }
    for (;;) {
        const uint8_t *hit = NULL;
        for (const uint8_t *q = p; (size_t)(end - q) >= seplen; q++)
            if (memcmp(q, sep, seplen) == 0) {
                hit = q;
                break;
            }
        if (hit == NULL) break;
        if (parts) parts[n] = (rt_str){p, (uint64_t)(hit - p)};
        n++;
        p = hit + seplen;
        if (maxsplit > 0 && n == maxsplit) break;
    }
    if (parts) parts[n] = (rt_str){p, (uint64_t)(end - p)};
    return n + 1;
}

/* TensorFlow's legacy StringSplit of s: "" gives no part; an empty delimiter
 * gives each byte; else any byte of delim separates, and empty parts are
 * dropped when skip_empty. Fills parts when non-NULL; returns the count. */
static int64_t split_v1(const rt_str *s, const uint8_t *delim, size_t dlen, int skip_empty,
                        rt_str *parts) {
    int64_t n = 0;
    if (s->len == 0) return 0;
    if (dlen == 0) {
        for (uint64_t i = 0; i < s->len; i++, n++)
            if (parts) parts[n] = (rt_str){s->data + i, 1};
        return n;
    }
    uint64_t start = 0;
    for (uint64_t i = 0; i <= s->len; i++) {
        if (i < s->len && memchr(delim, s->data[i], dlen) == NULL) continue;
        if (!skip_empty || i > start) {
            if (parts) parts[n] = (rt_str){s->data + start, i - start};
            n++;
        }
        start = i + 1;
    }
    return n;
}

/* The parts of s for StringSplit (v1) or StringSplitV2 (v2). */
static int64_t split_any(int v2, const rt_str *s, const rt_str *sep, int64_t opt, rt_str *parts) {
    return v2 ? split_v2(s, sep->data, (size_t)sep->len, opt, parts)
              : split_v1(s, sep->data, (size_t)sep->len, (int)opt, parts);
}

static ms_status split_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st == MS_OK) st = kn__need_str(node, in[0], "input");
    if (st == MS_OK) st = kn__need_str(node, in[1], "sep");
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->shape.rank != 1) return KN_EINVAL(node, "input must be a vector, got shape %s",
                                             kn__shp(&x->shape));
    if (in[1]->shape.rank != 0)
        return KN_EINVAL(node, "sep must be a scalar, got shape %s", kn__shp(&in[1]->shape));
    const rt_str *sep = rt_tensor_strs(in[1]);
    int v2 = strcmp(node->op, "StringSplitV2") == 0;
    int64_t opt = v2 ? kn_attr_i(node, "maxsplit", -1) : kn_attr_b(node, "skip_empty", 1);
    const rt_str *xs = rt_tensor_strs(x);
    int64_t total = 0, widest = 0;
    for (int64_t i = 0; i < x->nelem; i++) {
        int64_t c = split_any(v2, &xs[i], sep, opt, NULL);
        total += c;
        if (c > widest) widest = c;
    }
    rt_shape is = {.rank = 2, .dim = {total, 2}}, vs = {.rank = 1, .dim = {total}};
    rt_shape ss = {.rank = 1, .dim = {2}};
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &is, &out[0])) != MS_OK ||
        (st = kn__str_output(ctx, node, 1, &vs, &out[1])) != MS_OK ||
        (st = kn__output(ctx, node, 2, RT_DT_INT64, &ss, &out[2])) != MS_OK)
        return st;
    int64_t *idx = out[0]->data, *dense = out[2]->data;
    rt_str *v = rt_tensor_strs(out[1]);
    for (int64_t i = 0, at = 0; i < x->nelem; i++) {
        int64_t c = split_any(v2, &xs[i], sep, opt, v + at);
        for (int64_t j = 0; j < c; j++, at++) {
            idx[2 * at] = i;
            idx[2 * at + 1] = j;
        }
    }
    dense[0] = x->nelem;
    dense[1] = widest;
    return kn__str_own(ctx, node, out[1]);
}

/* ---- StringStrip ---- */

static ms_status strip_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st == MS_OK) st = kn__need_str(node, in[0], "input");
    if (st == MS_OK) st = kn__str_output(ctx, node, 0, &in[0]->shape, &out[0]);
    if (st != MS_OK) return st;
    const rt_str *s = rt_tensor_strs(in[0]);
    rt_str *o = rt_tensor_strs(out[0]);
    for (int64_t i = 0; i < in[0]->nelem; i++) {
        uint64_t a = 0, z = s[i].len;
        while (a < z && is_ws(s[i].data[a])) a++;
        while (z > a && is_ws(s[i].data[z - 1])) z--;
        o[i] = (rt_str){s[i].data + a, z - a};
    }
    return kn__str_own(ctx, node, out[0]);
}

/* ---- AsString ---- */

/* The printf format TensorFlow's AsStringOp builds: "%" [fill flag]
 * [width] [.precision] conversion. */
typedef struct as_state {
    char fmt[64];
} as_state;

static ms_status as_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    rt_dtype dt = kn_attr_type(node, "T", RT_DT_FLOAT);
    int64_t precision = kn_attr_i(node, "precision", -1), width = kn_attr_i(node, "width", -1);
    int sci = kn_attr_b(node, "scientific", 0), shortest = kn_attr_b(node, "shortest", 0);
    size_t flen = 0;
    const char *fill = kn_attr_s(node, "fill", &flen);
    if (fill == NULL) flen = 0;
    if (sci && shortest)
        return KN_EINVAL(node, "Cannot select both scientific and shortest notation");
    if (flen > 1) return KN_EINVAL(node, "Fill string must be one or fewer characters");
    if (flen == 1 && strchr(" +-0#", fill[0]) == NULL)
        return KN_EINVAL(node, "Fill argument not supported: \"%c\"", fill[0]);
    if (precision > 1000 || width > 1000)
        return KN_EINVAL(node, "precision %lld / width %lld above 1000 are not supported",
                         (long long)precision, (long long)width);
    const char *conv;
    int isfloat = 0;
    switch (dt) {
    case RT_DT_INT8: case RT_DT_INT16: case RT_DT_INT32: case RT_DT_INT64:
        conv = PRId64;
        break;
    case RT_DT_UINT8: case RT_DT_UINT16: case RT_DT_UINT32: case RT_DT_UINT64:
        conv = PRIu64;
        if (flen == 1 && (fill[0] == '+' || fill[0] == ' '))
            return KN_EINVAL(node, "fill '%c' with unsigned %s is not implemented", fill[0],
                             rt_dtype_name(dt));
        break;
    case RT_DT_FLOAT: case RT_DT_DOUBLE: case RT_DT_HALF: case RT_DT_BFLOAT16:
        conv = shortest ? "g" : sci ? "e" : "f";
        isfloat = 1;
        break;
    case RT_DT_BOOL: case RT_DT_STRING:
        conv = "";
        break;
    default:
        return KN_EINVAL(node, "T %s is not supported", rt_dtype_name(dt));
    }
    if (precision > -1 && !isfloat && dt != RT_DT_BOOL && dt != RT_DT_STRING)
        return KN_EINVAL(node, "precision is only supported for floats (T %s)", rt_dtype_name(dt));
    as_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    int n = snprintf(s->fmt, sizeof s->fmt, "%%%.*s", (int)flen, flen ? fill : "");
    if (width > -1) n += snprintf(s->fmt + n, sizeof s->fmt - (size_t)n, "%lld", (long long)width);
    if (precision > -1)
        n += snprintf(s->fmt + n, sizeof s->fmt - (size_t)n, ".%lld", (long long)precision);
    snprintf(s->fmt + n, sizeof s->fmt - (size_t)n, "%s", conv);
    *state = s;
    return MS_OK;
}

static void as_release(void *state) {
    free(state);
}

/* The text of element i of x in fmt, into buf (size cap); its length. */
static int as_one(const rt_tensor *x, int64_t i, const char *fmt, char *buf, size_t cap) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    switch (x->dtype) {
    case RT_DT_INT8: return snprintf(buf, cap, fmt, (int64_t)((const int8_t *)x->data)[i]);
    case RT_DT_INT16: return snprintf(buf, cap, fmt, (int64_t)((const int16_t *)x->data)[i]);
    case RT_DT_INT32: return snprintf(buf, cap, fmt, (int64_t)((const int32_t *)x->data)[i]);
    case RT_DT_INT64: return snprintf(buf, cap, fmt, ((const int64_t *)x->data)[i]);
    case RT_DT_UINT8: return snprintf(buf, cap, fmt, (uint64_t)((const uint8_t *)x->data)[i]);
    case RT_DT_UINT16: return snprintf(buf, cap, fmt, (uint64_t)((const uint16_t *)x->data)[i]);
    case RT_DT_UINT32: return snprintf(buf, cap, fmt, (uint64_t)((const uint32_t *)x->data)[i]);
    case RT_DT_UINT64: return snprintf(buf, cap, fmt, ((const uint64_t *)x->data)[i]);
    case RT_DT_FLOAT: return snprintf(buf, cap, fmt, (double)((const float *)x->data)[i]);
    case RT_DT_DOUBLE: return snprintf(buf, cap, fmt, ((const double *)x->data)[i]);
    case RT_DT_HALF:
        return snprintf(buf, cap, fmt, (double)kn__half_to_f32(((const uint16_t *)x->data)[i]));
    case RT_DT_BFLOAT16:
        return snprintf(buf, cap, fmt, (double)kn__bf16_to_f32(((const uint16_t *)x->data)[i]));
    case RT_DT_BOOL:
        return snprintf(buf, cap, "%s", ((const uint8_t *)x->data)[i] ? "true" : "false");
    default: return -1;
    }
#pragma GCC diagnostic pop
}

static ms_status as_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    void *own = NULL;
    if (state == NULL) { /* run without prepare (a lone kernel call) */
        if ((st = as_prepare(node, NULL, &own)) != MS_OK) return st;
        state = own;
    }
    const as_state *as = state;
    const rt_tensor *x = in[0];
    rt_dtype t = kn_attr_type(node, "T", RT_DT_FLOAT);
    if (x->dtype != t) { /* the format was made for T */
        st = KN_EINVAL(node, "input is %s, attr T is %s", rt_dtype_name(x->dtype),
                       rt_dtype_name(t));
        goto done;
    }
    char buf[1400]; /* width and precision <= 1000, a double's 309 integer digits */
    if (x->dtype == RT_DT_STRING) {
        out[0] = rt_tensor_ref(in[0]);
        goto done;
    }
    if ((st = kn__str_output(ctx, node, 0, &x->shape, &out[0])) != MS_OK) goto done;
    rt_str *o = rt_tensor_strs(out[0]);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < x->nelem; i++) {
            int n = as_one(x, i, as->fmt, buf, sizeof buf);
            if (n < 0 || (size_t)n >= sizeof buf) {
                st = KN_EINVAL(node, "cannot format a %s value", rt_dtype_name(x->dtype));
                goto done;
            }
            if (pass == 0) o[i] = (rt_str){NULL, (uint64_t)n};
            else memcpy((uint8_t *)o[i].data, buf, (size_t)n);
        }
        if (pass == 0 && (st = kn__str_own(ctx, node, out[0])) != MS_OK) goto done;
    }
done:
    if (st != MS_OK && out[0] != NULL) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    free(own);
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_str_kernels[] = {
    {.op = "StringJoin", .compute = join_compute},
    {.op = "StringLength", .prepare = unit_prepare, .compute = length_compute},
    {.op = "StringLower", .prepare = case_prepare, .compute = case_compute},
    {.op = "StringUpper", .prepare = case_prepare, .compute = case_compute},
    {.op = "Substr", .prepare = unit_prepare, .compute = substr_compute},
    {.op = "StringSplitV2", .compute = split_compute},
    {.op = "StringSplit", .compute = split_compute},
    {.op = "StringStrip", .compute = strip_compute},
    {.op = "AsString", .prepare = as_prepare, .compute = as_compute, .release = as_release},
    {.op = NULL},
};
/* clang-format on */
