/* rt_npy.c - NumPy .npy reader/writer and .npz (zip) reader.
 *
 * The .npy layout: the magic "\x93NUMPY", a major and minor version byte, the
 * header length (2 bytes little-endian in 1.0, 4 bytes in 2.0/3.0), then the
 * header: the repr of a Python dict with the keys 'descr', 'fortran_order'
 * and 'shape', padded with spaces and ended by '\n' so that the data that
 * follows starts on a 64-byte boundary. The header is parsed by a small
 * recursive-descent reader that accepts exactly those literals and nothing
 * else, so a hostile file can only fail with a message.
 */
#include "rt_npy.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* numpy refuses headers above 10000 bytes unless told otherwise; we allow
 * more but not unbounded amounts. */
#define NPY_MAX_HEADER (1u << 20)

/* ---- element types ---- */

typedef struct npy_type {
    char kind; /* 'f', 'i', 'u', 'b' or 'S' */
    int size;  /* bytes per element */
    int swap;  /* big-endian data: swap on read */
    rt_dtype dtype;
} npy_type;

/* clang-format off */
static const struct { rt_dtype dt; const char *descr; } descr_table[] = {
    {RT_DT_FLOAT,  "<f4"}, {RT_DT_DOUBLE, "<f8"}, {RT_DT_HALF,   "<f2"},
    {RT_DT_INT8,   "|i1"}, {RT_DT_INT16,  "<i2"}, {RT_DT_INT32,  "<i4"}, {RT_DT_INT64,  "<i8"},
    {RT_DT_UINT8,  "|u1"}, {RT_DT_UINT16, "<u2"}, {RT_DT_UINT32, "<u4"}, {RT_DT_UINT64, "<u8"},
    {RT_DT_BOOL,   "|b1"},
};
/* clang-format on */

const char *rt_npy_descr(rt_dtype dt) {
    for (size_t i = 0; i < sizeof(descr_table) / sizeof(descr_table[0]); i++)
        if (descr_table[i].dt == dt) return descr_table[i].descr;
    return NULL;
}

static rt_dtype dtype_of(char kind, int size) {
    switch (kind) {
    case 'f':
        return size == 2 ? RT_DT_HALF : size == 4 ? RT_DT_FLOAT : size == 8 ? RT_DT_DOUBLE
                                                                          : RT_DT_INVALID;
    case 'i':
        return size == 1   ? RT_DT_INT8
               : size == 2 ? RT_DT_INT16
               : size == 4 ? RT_DT_INT32
               : size == 8 ? RT_DT_INT64
                           : RT_DT_INVALID;
    case 'u':
        return size == 1   ? RT_DT_UINT8
               : size == 2 ? RT_DT_UINT16
               : size == 4 ? RT_DT_UINT32
               : size == 8 ? RT_DT_UINT64
                           : RT_DT_INVALID;
    case 'b': return size == 1 ? RT_DT_BOOL : RT_DT_INVALID;
    case 'S': return RT_DT_STRING;
    default: return RT_DT_INVALID;
    }
}

static ms_status parse_descr(const char *what, const char *d, npy_type *t) {
    char order = d[0];
    if (order == '\0' || strchr("<>|=", order) == NULL)
        return ms_errf(MS_EINVAL, "%s: unsupported dtype descr '%s' (expected e.g. '<f4')", what,
                       d);
    t->kind = d[1];
    const char *p = d + 2;
    if (*p < '0' || *p > '9')
        return ms_errf(MS_EINVAL, "%s: unsupported dtype descr '%s' (expected e.g. '<f4')", what,
                       d);
    long sz = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        sz = sz * 10 + (*p - '0');
        if (sz > (1 << 24)) break;
    }
    if (*p != '\0' || sz < 1 || sz > (1 << 24))
        return ms_errf(MS_EINVAL, "%s: unsupported dtype descr '%s'", what, d);
    t->size = (int)sz;
    t->dtype = dtype_of(t->kind, t->size);
    if (t->dtype == RT_DT_INVALID)
        return ms_errf(MS_EINVAL,
                       "%s: unsupported dtype descr '%s' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 "
                       "u8 b1 S<n>)",
                       what, d);
    /* '|' means "byte order not applicable": only right for 1-byte items and
     * byte strings. */
    if (order == '|' && t->size != 1 && t->kind != 'S')
        return ms_errf(MS_EINVAL, "%s: dtype descr '%s' has no byte order", what, d);
    t->swap = order == '>' && t->size > 1 && t->kind != 'S';
    return MS_OK;
}

/* ---- header dict parser ---- */

typedef struct hdr_parser {
    const char *p, *end, *start;
    const char *what;
} hdr_parser;

static void skip_ws(hdr_parser *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static ms_status expect(hdr_parser *h, char c) {
    skip_ws(h);
    if (h->p >= h->end || *h->p != c)
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: expected '%c' at offset %ld", h->what,
                       c, (long)(h->p - h->start));
    h->p++;
    return MS_OK;
}

/* A quoted Python string without escapes, copied into buf. */
static ms_status parse_str(hdr_parser *h, char *buf, size_t n) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: expected a quoted string", h->what);
    char q = *h->p++;
    size_t len = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || len + 1 >= n)
            return ms_errf(MS_EINVAL, "%s: malformed .npy header: bad string", h->what);
        buf[len++] = *h->p++;
    }
    if (h->p >= h->end)
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: unterminated string", h->what);
    h->p++;
    buf[len] = '\0';
    return MS_OK;
}

static ms_status parse_bool(hdr_parser *h, int *out) {
    skip_ws(h);
    size_t left = (size_t)(h->end - h->p);
    if (left >= 4 && memcmp(h->p, "True", 4) == 0) {
        h->p += 4;
        *out = 1;
        return MS_OK;
    }
    if (left >= 5 && memcmp(h->p, "False", 5) == 0) {
        h->p += 5;
        *out = 0;
        return MS_OK;
    }
    return ms_errf(MS_EINVAL, "%s: malformed .npy header: fortran_order must be True or False",
                   h->what);
}

static ms_status parse_shape(hdr_parser *h, rt_shape *s) {
    ms_status st;
    if ((st = expect(h, '(')) != MS_OK) return st;
    s->rank = 0;
    for (;;) {
        skip_ws(h);
        if (h->p < h->end && *h->p == ')') {
            h->p++;
            return MS_OK;
        }
        if (h->p >= h->end || *h->p < '0' || *h->p > '9')
            return ms_errf(MS_EINVAL,
                           "%s: malformed .npy header: shape must be a tuple of non-negative "
                           "integers",
                           h->what);
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return ms_errf(MS_EINVAL, "%s: .npy shape dimension too large", h->what);
            v = v * 10 + (*h->p++ - '0');
        }
        /* Python 2 era files may write 3L. */
        if (h->p < h->end && *h->p == 'L') h->p++;
        if (s->rank >= RT_MAX_RANK)
            return ms_errf(MS_EINVAL, "%s: .npy array has more than %d dimensions", h->what,
                           RT_MAX_RANK);
        s->dim[s->rank++] = v;
        skip_ws(h);
        if (h->p < h->end && *h->p == ',') {
            h->p++;
            continue;
        }
        if (h->p < h->end && *h->p == ')') continue;
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: bad shape tuple", h->what);
    }
}

static ms_status parse_header(const char *what, const char *text, size_t n, npy_type *type,
                              rt_shape *shape) {
    hdr_parser h = {text, text + n, text, what};
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
    char key[32], descr[64];
    ms_status st;
    if ((st = expect(&h, '{')) != MS_OK) return st;
    for (;;) {
        skip_ws(&h);
        if (h.p < h.end && *h.p == '}') {
            h.p++;
            break;
        }
        if ((st = parse_str(&h, key, sizeof(key))) != MS_OK) return st;
        if ((st = expect(&h, ':')) != MS_OK) return st;
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if ((st = parse_str(&h, descr, sizeof(descr))) != MS_OK) return st;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if ((st = parse_bool(&h, &fortran)) != MS_OK) return st;
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((st = parse_shape(&h, shape)) != MS_OK) return st;
            have_shape = 1;
        } else {
            return ms_errf(MS_EINVAL, "%s: malformed .npy header: unexpected key '%s'", what, key);
        }
        skip_ws(&h);
        if (h.p < h.end && *h.p == ',') {
            h.p++;
            continue;
        }
        if (h.p < h.end && *h.p == '}') continue;
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: expected ',' or '}'", what);
    }
    skip_ws(&h);
    if (h.p != h.end)
        return ms_errf(MS_EINVAL, "%s: malformed .npy header: text after the dict", what);
    if (!have_descr || !have_order || !have_shape)
        return ms_errf(MS_EINVAL,
                       "%s: .npy header lacks %s (needs 'descr', 'fortran_order' and 'shape')",
                       what,
                       !have_descr   ? "'descr'"
                       : !have_order ? "'fortran_order'"
                                     : "'shape'");
    if (fortran)
        return ms_errf(MS_EINVAL,
                       "%s: .npy array is stored in Fortran order (fortran_order: True); only C "
                       "order is supported (save it with numpy.ascontiguousarray)",
                       what);
    return parse_descr(what, descr, type);
}

/* ---- reading ---- */

static void swap_bytes(uint8_t *p, int64_t nelem, int size) {
    for (int64_t i = 0; i < nelem; i++, p += size)
        for (int a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

ms_status rt_npy_read_mem(const void *data, size_t n, const char *what, rt_tensor **out) {
    const uint8_t *b = data;
    if (what == NULL) what = "npy";
    *out = NULL;
    if (n < NPY_MAGIC_LEN + 4 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return ms_errf(MS_EINVAL, "%s: not a NumPy .npy file (bad magic)", what);
    int major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (n < 12) return ms_errf(MS_EINVAL, "%s: truncated .npy header", what);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return ms_errf(MS_EINVAL, "%s: unsupported .npy format version %d.%d", what, major, b[7]);
    }
    if (hlen > NPY_MAX_HEADER || hlen > n - hstart)
        return ms_errf(MS_EINVAL, "%s: truncated .npy header (%zu header bytes, %zu in file)", what,
                       hlen, n - hstart);
    npy_type type = {0};
    rt_shape shape;
    ms_status st = parse_header(what, (const char *)b + hstart, hlen, &type, &shape);
    if (st != MS_OK) return st;

    int64_t nelem = 1;
    for (int i = 0; i < shape.rank; i++) {
        if (shape.dim[i] != 0 && nelem > INT64_MAX / shape.dim[i])
            return ms_errf(MS_EINVAL, "%s: .npy shape too large", what);
        nelem *= shape.dim[i];
    }
    const uint8_t *body = b + hstart + hlen;
    size_t have = n - hstart - hlen;
    if ((uint64_t)nelem > (uint64_t)SIZE_MAX / (uint64_t)type.size)
        return ms_errf(MS_EINVAL, "%s: .npy shape too large", what);
    size_t need = (size_t)nelem * (size_t)type.size;
    if (have != need)
        return ms_errf(MS_EINVAL, "%s: .npy data is %zu bytes, shape and dtype need %zu (%s)", what,
                       have, need, have < need ? "truncated" : "trailing bytes");

    if (type.dtype == RT_DT_STRING) {
        rt_str *strs = calloc(nelem > 0 ? (size_t)nelem : 1, sizeof(*strs));
        if (strs == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", what);
        for (int64_t i = 0; i < nelem; i++) {
            const uint8_t *e = body + (size_t)i * (size_t)type.size;
            size_t len = (size_t)type.size;
            while (len > 0 && e[len - 1] == 0) len--;
            strs[i].data = e;
            strs[i].len = len;
        }
        st = rt_tensor_new_strings(&shape, strs, out);
        free(strs);
        if (st != MS_OK) return ms_errwrap(st, "%s", what);
        return MS_OK;
    }
    st = rt_tensor_new(type.dtype, &shape, out);
    if (st != MS_OK) return ms_errwrap(st, "%s", what);
    if (need > 0) memcpy((*out)->data, body, need);
    if (type.swap) swap_bytes((*out)->data, nelem, type.size);
    if (type.dtype == RT_DT_BOOL) {
        /* numpy treats any non-zero byte as True; keep our bools canonical. */
        uint8_t *p = (*out)->data;
        for (int64_t i = 0; i < nelem; i++) p[i] = p[i] != 0;
    }
    return MS_OK;
}

/* Reads a whole file into a malloc'ed buffer. */
static ms_status slurp(const char *path, uint8_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_errf(errno == ENOENT ? MS_ENOTFOUND : MS_EINVAL, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ms_errf(MS_EINVAL, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = malloc(size > 0 ? size : 1);
    if (buf == NULL) {
        fclose(f);
        return ms_errf(MS_ENOMEM, "%s: out of memory reading %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return ms_errf(MS_EINVAL, "%s: read error", path);
    }
    *out = buf;
    *n = size;
    return MS_OK;
}

ms_status rt_npy_read_file(const char *path, rt_tensor **out) {
    uint8_t *buf;
    size_t n;
    *out = NULL;
    ms_status st = slurp(path, &buf, &n);
    if (st != MS_OK) return st;
    st = rt_npy_read_mem(buf, n, path, out);
    free(buf);
    return st;
}

/* ---- writing ---- */

/* Appends printf output to buf at *len, failing when it does not fit. */
static int append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= cap - *len) return -1;
    *len += (size_t)w;
    return 0;
}

ms_status rt_npy_write_mem(const rt_tensor *t, uint8_t **out, size_t *n) {
    char descr[32];
    size_t item;
    *out = NULL;
    *n = 0;
    if (t->dtype == RT_DT_STRING) {
        const rt_str *s = rt_tensor_strs(t);
        uint64_t w = 1;
        for (int64_t i = 0; i < t->nelem; i++)
            if (s[i].len > w) w = s[i].len;
        if (w > (1u << 30))
            return ms_errf(MS_ENOTSUP, "npy: string element of %llu bytes is too long",
                           (unsigned long long)w);
        snprintf(descr, sizeof(descr), "|S%llu", (unsigned long long)w);
        item = (size_t)w;
    } else {
        const char *d = rt_npy_descr(t->dtype);
        if (d == NULL)
            return ms_errf(MS_ENOTSUP, "npy: dtype %s has no .npy equivalent here",
                           rt_dtype_name(t->dtype));
        snprintf(descr, sizeof(descr), "%s", d);
        item = rt_dtype_size(t->dtype);
    }
    if (t->shape.rank < 0 || t->nelem < 0)
        return ms_errf(MS_EINVAL, "npy: tensor shape is not fully known");

    char hdr[512];
    size_t hl = 0;
    int bad =
        append(hdr, sizeof(hdr), &hl, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->shape.rank && !bad; i++)
        bad = append(hdr, sizeof(hdr), &hl, i == 0 ? "%lld" : ", %lld", (long long)t->shape.dim[i]);
    if (!bad && t->shape.rank == 1) bad = append(hdr, sizeof(hdr), &hl, ",");
    if (!bad) bad = append(hdr, sizeof(hdr), &hl, "), }");
    if (bad) return ms_errf(MS_EINTERNAL, "npy: header too long");
    /* Same padding rule as numpy: magic+version+length+header+'\n' rounded up
     * to a multiple of 64 with spaces (a full 64 when already aligned). */
    size_t pre = NPY_MAGIC_LEN + 2 + 2;
    size_t pad = NPY_ALIGN - ((pre + hl + 1) % NPY_ALIGN);
    size_t total_hdr = hl + pad + 1;
    if ((uint64_t)t->nelem > (SIZE_MAX - pre - total_hdr) / (item > 0 ? item : 1))
        return ms_errf(MS_ENOMEM, "npy: tensor too large");
    size_t body = (size_t)t->nelem * item;
    size_t size = pre + total_hdr + body;
    uint8_t *b = malloc(size > 0 ? size : 1);
    if (b == NULL) return ms_errf(MS_ENOMEM, "npy: out of memory (%zu bytes)", size);
    memcpy(b, NPY_MAGIC, NPY_MAGIC_LEN);
    b[6] = 1;
    b[7] = 0;
    b[8] = (uint8_t)(total_hdr & 0xff);
    b[9] = (uint8_t)(total_hdr >> 8);
    memcpy(b + pre, hdr, hl);
    memset(b + pre + hl, ' ', pad);
    b[pre + hl + pad] = '\n';
    uint8_t *d = b + pre + total_hdr;
    if (t->dtype == RT_DT_STRING) {
        const rt_str *s = rt_tensor_strs(t);
        memset(d, 0, body);
        for (int64_t i = 0; i < t->nelem; i++)
            if (s[i].len > 0) memcpy(d + (size_t)i * item, s[i].data, (size_t)s[i].len);
    } else if (body > 0) {
        memcpy(d, t->data, body);
    }
    *out = b;
    *n = size;
    return MS_OK;
}

ms_status rt_npy_write_file(const char *path, const rt_tensor *t) {
    uint8_t *b;
    size_t n;
    ms_status st = rt_npy_write_mem(t, &b, &n);
    if (st != MS_OK) return st;
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        int e = errno;
        free(b);
        return ms_errf(MS_EINVAL, "%s: %s", path, strerror(e));
    }
    size_t w = fwrite(b, 1, n, f);
    int err = fclose(f);
    free(b);
    if (w != n || err != 0) return ms_errf(MS_EINVAL, "%s: write failed", path);
    return MS_OK;
}

/* ---- .npz: a zip archive of .npy members ---- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

typedef struct zip_entry {
    const char *name; /* not NUL-terminated */
    size_t name_len;
    int method;
    uint32_t crc;
    uint64_t csize, usize, local_off;
} zip_entry;

/* Reads the central-directory record at p (within [p, end)); returns the
 * record length or 0 when malformed. Applies the zip64 extra field. */
static size_t zip_cd_record(const uint8_t *p, const uint8_t *end, zip_entry *e) {
    if (end - p < 46 || rd32(p) != 0x02014b50u) return 0;
    size_t nl = rd16(p + 28), xl = rd16(p + 30), cl = rd16(p + 32);
    if ((size_t)(end - p) < 46 + nl + xl + cl) return 0;
    e->method = rd16(p + 10);
    e->crc = rd32(p + 16);
    e->csize = rd32(p + 20);
    e->usize = rd32(p + 24);
    e->local_off = rd32(p + 42);
    e->name = (const char *)p + 46;
    e->name_len = nl;
    const uint8_t *x = p + 46 + nl, *xe = x + xl;
    while (xe - x >= 4) {
        uint16_t id = rd16(x), sz = rd16(x + 2);
        if ((size_t)(xe - x - 4) < sz) return 0;
        if (id == 0x0001) {
            const uint8_t *z = x + 4, *ze = z + sz;
            if (e->usize == 0xffffffffu) {
                if (ze - z < 8) return 0;
                e->usize = rd64(z);
                z += 8;
            }
            if (e->csize == 0xffffffffu) {
                if (ze - z < 8) return 0;
                e->csize = rd64(z);
                z += 8;
            }
            if (e->local_off == 0xffffffffu) {
                if (ze - z < 8) return 0;
                e->local_off = rd64(z);
            }
        }
        x += 4 + sz;
    }
    return 46 + nl + xl + cl;
}

static int entry_is(const zip_entry *e, const char *name) {
    size_t n = strlen(name);
    if (e->name_len == n + 4 && memcmp(e->name, name, n) == 0 &&
        memcmp(e->name + n, ".npy", 4) == 0)
        return 1;
    return e->name_len == n && memcmp(e->name, name, n) == 0;
}

static ms_status zip_extract(const char *path, const uint8_t *b, size_t n, const zip_entry *e,
                             uint8_t **out) {
    *out = NULL;
    if (e->local_off > n || n - e->local_off < 30 || rd32(b + e->local_off) != 0x04034b50u)
        return ms_errf(MS_EINVAL, "%s: corrupt zip (bad local header)", path);
    const uint8_t *lh = b + e->local_off;
    uint64_t data_off = e->local_off + 30 + (uint64_t)rd16(lh + 26) + rd16(lh + 28);
    if (data_off > n || e->csize > n - data_off)
        return ms_errf(MS_EINVAL, "%s: corrupt zip (member data out of range)", path);
    if (e->usize > (1ull << 40)) return ms_errf(MS_EINVAL, "%s: zip member too large", path);
    uint8_t *u = malloc(e->usize > 0 ? (size_t)e->usize : 1);
    if (u == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", path);
    if (e->method == 0) {
        if (e->csize != e->usize) {
            free(u);
            return ms_errf(MS_EINVAL, "%s: corrupt zip (stored member sizes differ)", path);
        }
        memcpy(u, b + data_off, (size_t)e->usize);
    } else if (e->method == 8) {
        z_stream zs;
        memset(&zs, 0, sizeof(zs));
        if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
            free(u);
            return ms_errf(MS_ENOMEM, "%s: inflateInit failed", path);
        }
        /* uInt counts: members above 4 GiB are refused by the size cap
         * below anyway. */
        if (e->csize > UINT_MAX || e->usize > UINT_MAX) {
            inflateEnd(&zs);
            free(u);
            return ms_errf(MS_ENOTSUP, "%s: compressed zip member above 4 GiB", path);
        }
        zs.next_in = (Bytef *)(b + data_off);
        zs.avail_in = (uInt)e->csize;
        zs.next_out = u;
        zs.avail_out = (uInt)e->usize;
        int zr = inflate(&zs, Z_FINISH);
        uint64_t produced = zs.total_out;
        inflateEnd(&zs);
        if (zr != Z_STREAM_END || produced != e->usize) {
            free(u);
            return ms_errf(MS_EINVAL, "%s: corrupt zip (deflate stream)", path);
        }
    } else {
        free(u);
        return ms_errf(MS_ENOTSUP, "%s: zip compression method %d not supported", path, e->method);
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < e->usize;) {
        uint64_t chunk = e->usize - off > (1u << 30) ? (1u << 30) : e->usize - off;
        crc = crc32(crc, u + off, (uInt)chunk);
        off += chunk;
    }
    if ((uint32_t)crc != e->crc) {
        free(u);
        return ms_errf(MS_EINVAL, "%s: corrupt zip (crc mismatch in %.*s)", path, (int)e->name_len,
                       e->name);
    }
    *out = u;
    return MS_OK;
}

ms_status rt_npz_read_file(const char *path, const char *name, rt_tensor **out) {
    uint8_t *b;
    size_t n;
    *out = NULL;
    ms_status st = slurp(path, &b, &n);
    if (st != MS_OK) return st;
    /* End of central directory: 22 bytes plus a comment of up to 64 KiB. */
    size_t eocd = SIZE_MAX;
    for (size_t i = n >= 22 ? n - 22 + 1 : 0; i-- > 0;) {
        if (rd32(b + i) == 0x06054b50u) {
            eocd = i;
            break;
        }
        if (n - i > 22 + 65535) break;
    }
    if (eocd == SIZE_MAX) {
        free(b);
        return ms_errf(MS_EINVAL, "%s: not an .npz (zip) archive", path);
    }
    uint64_t count = rd16(b + eocd + 10);
    uint64_t cd_off = rd32(b + eocd + 16);
    /* A zip64 end record sits before the locator when the counts overflow. */
    if ((count == 0xffff || cd_off == 0xffffffffu) && eocd >= 20 &&
        rd32(b + eocd - 20) == 0x07064b50u) {
        uint64_t z64 = rd64(b + eocd - 20 + 8);
        if (z64 <= n - 56 && rd32(b + z64) == 0x06064b50u) {
            count = rd64(b + z64 + 32);
            cd_off = rd64(b + z64 + 48);
        }
    }
    if (cd_off > n) {
        free(b);
        return ms_errf(MS_EINVAL, "%s: corrupt zip (central directory out of range)", path);
    }
    const uint8_t *p = b + cd_off, *end = b + n;
    zip_entry found = {0}, e;
    int nfound = 0;
    uint64_t nentries = 0;
    char names[256] = "";
    size_t nl = 0;
    for (uint64_t i = 0; i < count; i++) {
        size_t len = zip_cd_record(p, end, &e);
        if (len == 0) {
            free(b);
            return ms_errf(MS_EINVAL, "%s: corrupt zip (central directory)", path);
        }
        p += len;
        nentries++;
        if (nl + e.name_len + 3 < sizeof(names)) {
            nl += (size_t)snprintf(names + nl, sizeof(names) - nl, "%s%.*s", nl ? ", " : "",
                                   (int)(e.name_len > 4 ? e.name_len - 4 : e.name_len), e.name);
        }
        if (name == NULL || name[0] == '\0' ? 1 : entry_is(&e, name)) {
            if (nfound == 0) found = e;
            nfound++;
        }
    }
    if (name == NULL || name[0] == '\0') {
        if (nentries != 1) {
            free(b);
            return ms_errf(MS_EINVAL,
                           "%s contains %llu arrays (%s); name the one to use as file.npz[name]",
                           path, (unsigned long long)nentries, names);
        }
    } else if (nfound == 0) {
        free(b);
        return ms_errf(MS_ENOTFOUND, "%s does not contain an array named \"%s\" (has: %s)", path,
                       name, names);
    }
    uint8_t *u;
    st = zip_extract(path, b, n, &found, &u);
    if (st == MS_OK) {
        char what[600];
        snprintf(what, sizeof(what), "%s[%.*s]", path, (int)found.name_len, found.name);
        st = rt_npy_read_mem(u, (size_t)found.usize, what, out);
        free(u);
    }
    free(b);
    return st;
}

int rt_npy_is_zip_file(const char *path) {
    uint8_t sig[4];
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    size_t got = fread(sig, 1, 4, f);
    fclose(f);
    return got == 4 && rd32(sig) == 0x04034b50u;
}
