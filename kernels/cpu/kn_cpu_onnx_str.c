/* kn_cpu_onnx_str.c - string ops of our own for the ONNX string operators no
 * TF op means exactly (emitted by runtime/onnx/rt_onnx_str.c, docs/onnx.md):
 *
 *   OnnxStringConcat   X, Y (strings, numpy broadcasting) -> X[i] + Y[i].
 *   OnnxStringSplit    X (strings) -> Y (X.shape + [m]) the substrings padded
 *                      with "", Z (int64, X.shape) their counts; m is the
 *                      largest count (0 for an empty X). attrs delimiter
 *                      (empty: split on runs of whitespace, Python's
 *                      str.split() without a separator) and maxsplit (< 0:
 *                      no limit), as ONNX StringSplit 20.
 *   OnnxStringNormalizer X ([C] or [1, C]) -> the strings not in the attr
 *                      stopwords (compared bytewise, or ASCII-case-blind when
 *                      is_case_sensitive is 0), then lowered / uppered by
 *                      case_change_action (0 none, 1 lower, 2 upper); a
 *                      single "" ([1] / [1, 1]) when every string was
 *                      dropped. Case is mapped for ASCII only: a string with
 *                      other bytes is refused when a case mapping is needed,
 *                      never passed through unmapped.
 *
 * Outputs are built in one scratch buffer sized from the inputs and copied
 * into the output tensor, so memory stays a small multiple of the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

/* New string tensor of `shape` holding copies of strs[0..nelem). */
static ms_status str_output(const kn_node *node, int idx, const rt_shape *shape, const rt_str *strs,
                            rt_tensor **out) {
    ms_status st = rt_tensor_new_strings(shape, strs, out);
    if (st != MS_OK)
        return kn__errf(st, node, "output %d %s: %s", idx, kn__shp(shape), ms_errmsg());
    return MS_OK;
}

static ms_status need_strings(const kn_node *node, rt_tensor *const *in, int n) {
    ms_status st = kn__need_inputs(node, in, n);
    for (int i = 0; st == MS_OK && i < n; i++)
        if (in[i]->dtype != RT_DT_STRING)
            st = KN_EINVAL(node, "input %d must be a string tensor, got %s", i,
                           rt_dtype_name(in[i]->dtype));
    return st;
}

/* ---- StringConcat ---- */

static ms_status concat_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)state;
    ms_status st = need_strings(node, in, 2);
    if (st != MS_OK) return st;
    const rt_shape *shp[2] = {&in[0]->shape, &in[1]->shape};
    kn_bcast b;
    if ((st = kn__bcast_init(&b, node, shp, 2)) != MS_OK) return st;
    int64_t n = 1;
    for (int d = 0; d < b.out.rank; d++) n *= b.out.dim[d];
    if (n == 0) return str_output(node, 0, &b.out, NULL, &out[0]);
    const rt_str *x = rt_tensor_strs(in[0]), *y = rt_tensor_strs(in[1]);
    int64_t inner = b.dim[b.rank - 1];
    /* two passes over the broadcast: the total length, then the bytes */
    uint8_t *buf = NULL;
    rt_str *s = calloc((size_t)n, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = 0;
        for (int64_t r = 0, k = 0; r < b.rows; r++) {
            int64_t o[KN_BCAST_MAX];
            kn__bcast_row(&b, r, o, 2);
            for (int64_t j = 0; j < inner; j++, k++) {
                const rt_str *a = &x[o[0] + j * b.stride[0][b.rank - 1]];
                const rt_str *c = &y[o[1] + j * b.stride[1][b.rank - 1]];
                if (pass == 0) {
                    total += (size_t)a->len + (size_t)c->len;
                    continue;
                }
                if (a->len) memcpy(buf + at, a->data, (size_t)a->len);
                if (c->len) memcpy(buf + at + a->len, c->data, (size_t)c->len);
                s[k].data = buf + at;
                s[k].len = a->len + c->len;
                at += (size_t)s[k].len;
            }
        }
        if (pass == 0 && (buf = malloc(total + 1)) == NULL) {
            free(s);
            return kn__errf(MS_ENOMEM, node, "out of memory for %zu bytes of strings", total);
        }
    }
    st = str_output(node, 0, &b.out, s, &out[0]);
    free(buf);
    free(s);
    return st;
}

/* ---- StringSplit ---- */

/* Byte length of the whitespace character at p (before end) as Python's
 * str.isspace() counts it (ASCII \t-\r, \x1c-\x1f, space and the Unicode
 * spaces in UTF-8), or 0. */
static size_t ws_len(const uint8_t *p, const uint8_t *end) {
    if ((*p >= 0x09 && *p <= 0x0d) || (*p >= 0x1c && *p <= 0x20)) return 1;
    size_t left = (size_t)(end - p);
    if (*p == 0xc2 && left >= 2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (left < 3) return 0;
    uint32_t c = 0;
    if (*p == 0xe1 && p[1] == 0x9a && p[2] == 0x80) c = 0x1680;
    if (*p == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 ||
                                       p[2] == 0xa9 || p[2] == 0xaf))
        c = 0x2000;
    if (*p == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) c = 0x205f;
    if (*p == 0xe3 && p[1] == 0x80 && p[2] == 0x80) c = 0x3000;
    return c ? 3 : 0;
}

/* Splits s like Python's s.split(sep or None, maxsplit): calls emit for each
 * part when parts != NULL (at most cap of them); returns the count. */
static int64_t split_one(const rt_str *s, const uint8_t *sep, size_t seplen, int64_t maxsplit,
                         rt_str *parts) {
    const uint8_t *p = s->len ? s->data : (const uint8_t *)"", *end = p + s->len;
    int64_t n = 0;
    if (seplen > 0) {
        for (;;) {
            const uint8_t *hit = NULL;
            if (maxsplit < 0 || n < maxsplit)
                for (const uint8_t *q = p; (size_t)(end - q) >= seplen; q++)
                    if (memcmp(q, sep, seplen) == 0) {
                        hit = q;
                        break;
                    }
            const uint8_t *stop = hit ? hit : end;
            if (parts) parts[n] = (rt_str){p, (uint64_t)(stop - p)};
            n++;
            if (hit == NULL) return n;
            p = hit + seplen;
        }
    }
    for (;;) {
        size_t w;
        while (p < end && (w = ws_len(p, end)) > 0) p += w;
        if (p == end) return n;
        if (maxsplit >= 0 && n == maxsplit) { /* the rest, trailing spaces kept */
            if (parts) parts[n] = (rt_str){p, (uint64_t)(end - p)};
            return n + 1;
        }
        const uint8_t *q = p;
        while (q < end && ws_len(q, end) == 0) q++;
        if (parts) parts[n] = (rt_str){p, (uint64_t)(q - p)};
        n++;
        p = q;
    }
}

static ms_status split_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = need_strings(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->shape.rank >= RT_MAX_RANK)
        return KN_EINVAL(node, "input rank %d leaves no room for the output's extra axis",
                         x->shape.rank);
    size_t seplen = 0;
    const char *sep = kn_attr_s(node, "delimiter", &seplen);
    int64_t maxsplit = kn_attr_i(node, "maxsplit", -1);
    if ((st = kn__output(ctx, node, 1, RT_DT_INT64, &x->shape, &out[1])) != MS_OK) return st;
    int64_t *cnt = out[1]->data, m = 0;
    const rt_str *xs = rt_tensor_strs(x);
    for (int64_t i = 0; i < x->nelem; i++) {
        cnt[i] = split_one(&xs[i], (const uint8_t *)sep, seplen, maxsplit, NULL);
        if (cnt[i] > m) m = cnt[i];
    }
    rt_shape ys = x->shape;
    ys.dim[ys.rank++] = m;
    /* the parts point into the input: at most one per input byte + 1 each */
    rt_str *parts = calloc((size_t)(x->nelem * m) + 1, sizeof(*parts));
    if (parts == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    for (int64_t i = 0; i < x->nelem; i++)
        split_one(&xs[i], (const uint8_t *)sep, seplen, maxsplit, parts + i * m);
    st = str_output(node, 0, &ys, parts, &out[0]);
    free(parts);
    return st;
}

/* ---- StringNormalizer ---- */

static int ascii_only(const rt_str *s) {
    for (uint64_t i = 0; i < s->len; i++)
        if (s->data[i] >= 0x80) return 0;
    return 1;
}

static uint8_t lower(uint8_t c) {
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

static int same(const rt_str *a, const char *b, size_t blen, int sensitive) {
    if (a->len != blen) return 0;
    if (sensitive) return blen == 0 || memcmp(a->data, b, blen) == 0;
    for (size_t i = 0; i < blen; i++)
        if (lower(a->data[i]) != lower((uint8_t)b[i])) return 0;
    return 1;
}

static ms_status norm_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)ctx, (void)state;
    ms_status st = need_strings(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!(x->shape.rank == 1 || (x->shape.rank == 2 && x->shape.dim[0] == 1)))
        return KN_EINVAL(node, "input must be [C] or [1, C], got %s", kn__shp(&x->shape));
    int64_t action = kn_attr_i(node, "case_change_action", 0);
    int sensitive = (int)kn_attr_i(node, "is_case_sensitive", 0);
    int nstop = kn_attr_slist(node, "stopwords", NULL, NULL, 0);
    if (nstop < 0) nstop = 0;
    const char **sw = calloc((size_t)nstop + 1, sizeof(*sw));
    size_t *swl = calloc((size_t)nstop + 1, sizeof(*swl));
    rt_str *keep = calloc((size_t)x->nelem + 1, sizeof(*keep));
    uint8_t *buf = NULL;
    size_t total = 0;
    int64_t nk = 0;
    if (sw == NULL || swl == NULL || keep == NULL) {
        st = kn__errf(MS_ENOMEM, node, "out of memory");
        goto done;
    }
    if (nstop) kn_attr_slist(node, "stopwords", sw, swl, nstop);
    const rt_str *xs = rt_tensor_strs(x);
    for (int64_t i = 0; i < x->nelem; i++) {
        int drop = 0;
        for (int k = 0; k < nstop && !drop; k++) {
            if (!sensitive && !ascii_only(&xs[i])) {
                st = KN_EINVAL(node, "string %lld is not ASCII: case-blind comparison is "
                               "implemented for ASCII only", (long long)i);
                goto done;
            }
            drop = same(&xs[i], sw[k], swl[k], sensitive);
        }
        if (drop) continue;
        if (action != 0 && !ascii_only(&xs[i])) {
            st = KN_EINVAL(node, "string %lld is not ASCII: case change is implemented for "
                           "ASCII only", (long long)i);
            goto done;
        }
        keep[nk++] = xs[i];
        total += (size_t)xs[i].len;
    }
    if ((buf = malloc(total + 1)) == NULL) {
        st = kn__errf(MS_ENOMEM, node, "out of memory for %zu bytes of strings", total);
        goto done;
    }
    size_t at = 0;
    for (int64_t i = 0; i < nk; i++) {
        for (uint64_t j = 0; j < keep[i].len; j++) {
            uint8_t c = keep[i].data[j];
            if (action == 1) c = lower(c);
            if (action == 2 && c >= 'a' && c <= 'z') c = (uint8_t)(c - 32);
            buf[at + j] = c;
        }
        keep[i].data = buf + at;
        at += (size_t)keep[i].len;
    }
    rt_shape os = x->shape;
    if (nk == 0) keep[nk++] = (rt_str){NULL, 0};
    os.dim[os.rank - 1] = nk;
    st = str_output(node, 0, &os, keep, &out[0]);
done:
    free(buf);
    free(keep);
    free(swl);
    free(sw);
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_onnx_str_kernels[] = {
    {.op = "OnnxStringConcat", .compute = concat_compute},
    {.op = "OnnxStringSplit", .compute = split_compute},
    {.op = "OnnxStringNormalizer", .compute = norm_compute},
    {.op = NULL},
};
/* clang-format on */
