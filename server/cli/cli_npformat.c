/* cli_npformat.c - numpy-style text for tensors (see cli_npformat.h).
 *
 * Two passes, as numpy's array2string: first a format is chosen from the
 * elements that will be shown (widths, positional or scientific), then the
 * nested brackets are laid out with a hanging indent, wrapping the innermost
 * rows at 75 columns.
 */
#include "cli_npformat.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPF_LINE_WIDTH 75
#define NPF_THRESHOLD  1000
#define NPF_EDGE       3
#define NPF_PRECISION  8

/* ---- growable string ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) {
    sb_putn(b, s, strlen(s));
}

static void sb_spaces(sbuf *b, int n) {
    for (int i = 0; i < n; i++)
        sb_putn(b, " ", 1);
}

/* ---- float digits ---- */

/* Shortest decimal digits that read back to v (v finite, > 0): digits into
 * dig (no dot), decimal exponent of the first digit into *e10. */
static void shortest_digits(double v, int f32, char *dig, size_t n, int *e10) {
    char buf[64];
    int maxp = f32 ? 9 : 17;
    for (int p = 1; p <= maxp; p++) {
        snprintf(buf, sizeof(buf), "%.*e", p - 1, v);
        double r = strtod(buf, NULL);
        if (f32 ? (float)r == (float)v : r == v) break;
    }
    size_t k = 0;
    const char *s = buf;
    for (; *s && *s != 'e' && k + 1 < n; s++)
        if (*s >= '0' && *s <= '9') dig[k++] = *s;
    dig[k] = '\0';
    *e10 = (*s == 'e') ? atoi(s + 1) : 0;
}

typedef enum trim_mode { TRIM_K, TRIM_DOT, TRIM_ZERO, TRIM_DASH } trim_mode;

/* Applies numpy's trim modes to the fraction digits in frac (modified in
 * place): returns whether the '.' is kept. min_digits pads with zeros. */
static int apply_trim(char *frac, trim_mode trim, int min_digits) {
    size_t n = strlen(frac);
    if (trim != TRIM_K)
        while (n > 0 && frac[n - 1] == '0')
            n--;
    while ((int)n < min_digits)
        frac[n++] = '0';
    frac[n] = '\0';
    if (n == 0 && trim == TRIM_ZERO) {
        frac[0] = '0';
        frac[1] = '\0';
        return 1;
    }
    if (n == 0 && trim == TRIM_DASH) return 0;
    return 1;
}

/* Positional text of |v| split into integer and fraction digits. precision <
 * 0 means no cap on fraction digits. */
static void positional_parts(double av, int f32, int precision, char *ip, char *fp, size_t n) {
    char dig[40];
    int e10;
    if (av == 0) {
        snprintf(ip, n, "0");
        fp[0] = '\0';
        return;
    }
    shortest_digits(av, f32, dig, sizeof(dig), &e10);
    int nd = (int)strlen(dig);
    int nfrac = nd - 1 - e10;
    if (precision >= 0 && nfrac > precision) {
        /* More digits than allowed: round the exact value instead. */
        char buf[400];
        snprintf(buf, sizeof(buf), "%.*f", precision, av);
        char *dot = strchr(buf, '.');
        if (dot) {
            *dot = '\0';
            snprintf(fp, n, "%s", dot + 1);
        } else {
            fp[0] = '\0';
        }
        snprintf(ip, n, "%s", buf);
        return;
    }
    size_t k = 0;
    if (e10 < 0) {
        ip[k++] = '0';
    } else {
        for (int i = 0; i <= e10 && k + 1 < n; i++)
            ip[k++] = i < nd ? dig[i] : '0';
    }
    ip[k] = '\0';
    k = 0;
    if (e10 < 0)
        for (int i = 0; i < -e10 - 1 && k + 1 < n; i++)
            fp[k++] = '0';
    for (int i = e10 < 0 ? 0 : e10 + 1; i < nd && k + 1 < n; i++)
        fp[k++] = dig[i];
    fp[k] = '\0';
}

/* Scientific text of |v|: first digit, fraction digits and exponent. */
static void scientific_parts(double av, int f32, int precision, char *ip, char *fp, int *e10,
                             size_t n) {
    char dig[40];
    if (av == 0) {
        snprintf(ip, n, "0");
        fp[0] = '\0';
        *e10 = 0;
        return;
    }
    shortest_digits(av, f32, dig, sizeof(dig), e10);
    int nd = (int)strlen(dig);
    if (precision >= 0 && nd - 1 > precision) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.*e", precision, av);
        ip[0] = buf[0];
        ip[1] = '\0';
        const char *s = buf + 1;
        size_t k = 0;
        if (*s == '.')
            for (s++; *s >= '0' && *s <= '9' && k + 1 < n; s++)
                fp[k++] = *s;
        fp[k] = '\0';
        *e10 = atoi(strchr(buf, 'e') + 1);
        return;
    }
    ip[0] = dig[0];
    ip[1] = '\0';
    snprintf(fp, n, "%s", dig + 1);
}

/* ---- element formats ---- */

enum { K_FLOAT, K_INT, K_UINT, K_BOOL, K_STR, K_OTHER };

typedef struct npf {
    const rt_tensor *t;
    int kind;
    int f32;
    int summarize;
    /* floats */
    int exp_format, precision, min_digits, pad_left, pad_right, exp_size;
    trim_mode trim;
    /* ints */
    int width;
    /* pass-1 scan state for floats */
    double max, min;
    int any_nonzero, any_finite, neginf, any_nonfinite, pl, pr, es;
} npf;

static double get_f(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_FLOAT ? (double)((const float *)t->data)[i]
                                   : ((const double *)t->data)[i];
}

static long long get_i(const rt_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RT_DT_INT8:
        return ((const int8_t *)t->data)[i];
    case RT_DT_INT16:
        return ((const int16_t *)t->data)[i];
    case RT_DT_INT32:
        return ((const int32_t *)t->data)[i];
    default:
        return ((const int64_t *)t->data)[i];
    }
}

static unsigned long long get_u(const rt_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RT_DT_UINT8:
        return ((const uint8_t *)t->data)[i];
    case RT_DT_UINT16:
        return ((const uint16_t *)t->data)[i];
    case RT_DT_UINT32:
        return ((const uint32_t *)t->data)[i];
    default:
        return ((const uint64_t *)t->data)[i];
    }
}

/* Calls fn for each flat index that will be shown. */
static void visit_shown(const npf *f, int axis, int64_t off, void (*fn)(npf *, int64_t), npf *st) {
    const rt_shape *s = &f->t->shape;
    if (axis == s->rank) {
        fn(st, off);
        return;
    }
    int64_t stride = 1;
    for (int a = axis + 1; a < s->rank; a++)
        stride *= s->dim[a];
    int64_t n = s->dim[axis];
    int summary = f->summarize && n > 2 * NPF_EDGE;
    for (int64_t i = 0; i < n; i++) {
        if (summary && i == NPF_EDGE) i = n - NPF_EDGE;
        visit_shown(f, axis + 1, off + i * stride, fn, st);
    }
}

static void scan_range(npf *f, int64_t i) {
    double v = get_f(f->t, i);
    if (!isfinite(v)) {
        f->any_nonfinite = 1;
        if (isinf(v) && v < 0) f->neginf = 1;
        return;
    }
    f->any_finite = 1;
    double a = fabs(v);
    if (a == 0) return;
    if (!f->any_nonzero || a > f->max) f->max = a;
    if (!f->any_nonzero || a < f->min) f->min = a;
    f->any_nonzero = 1;
}

static void scan_widths(npf *f, int64_t i) {
    double v = get_f(f->t, i);
    if (!isfinite(v)) return;
    char ip[400], fp[400];
    int neg = signbit(v) ? 1 : 0;
    if (f->exp_format) {
        int e10;
        scientific_parts(fabs(v), f->f32, NPF_PRECISION, ip, fp, &e10, sizeof(ip));
        apply_trim(fp, TRIM_DOT, 0);
        char es[16];
        snprintf(es, sizeof(es), "%02d", e10 < 0 ? -e10 : e10);
        if ((int)strlen(es) > f->es) f->es = (int)strlen(es);
    } else {
        positional_parts(fabs(v), f->f32, NPF_PRECISION, ip, fp, sizeof(ip));
        apply_trim(fp, TRIM_DOT, 0);
    }
    if ((int)strlen(ip) + neg > f->pl) f->pl = (int)strlen(ip) + neg;
    if ((int)strlen(fp) > f->pr) f->pr = (int)strlen(fp);
}

static void choose_float_format(npf *f) {
    f->max = f->min = 0;
    f->any_nonzero = f->any_finite = f->neginf = f->any_nonfinite = 0;
    f->pl = f->pr = f->es = 0;
    visit_shown(f, 0, 0, scan_range, f);
    f->exp_format = f->any_nonzero && (f->max >= 1e8 || f->min < 1e-4 || f->max / f->min > 1000.0);
    if (!f->any_finite) {
        f->pad_left = f->pad_right = 0;
        f->trim = TRIM_DOT;
        f->precision = NPF_PRECISION;
        f->min_digits = 0;
        f->exp_size = -1;
    } else {
        visit_shown(f, 0, 0, scan_widths, f);
        if (f->exp_format) {
            f->exp_size = f->es;
            f->trim = TRIM_K;
            f->precision = f->pr;
            f->min_digits = f->pr;
            f->pad_left = f->pl;
            f->pad_right = f->es + 2 + f->pr;
        } else {
            f->exp_size = -1;
            f->trim = TRIM_DOT;
            f->precision = NPF_PRECISION;
            f->min_digits = 0;
            f->pad_left = f->pl;
            f->pad_right = f->pr;
        }
    }
    if (f->any_nonfinite) {
        int offset = f->pad_right + 1;
        int inflen = 3 + f->neginf;
        if (3 - offset > f->pad_left) f->pad_left = 3 - offset;
        if (inflen - offset > f->pad_left) f->pad_left = inflen - offset;
    }
}

static void scan_int_width(npf *f, int64_t i) {
    char buf[32];
    int n = f->kind == K_INT ? snprintf(buf, sizeof(buf), "%lld", get_i(f->t, i))
                             : snprintf(buf, sizeof(buf), "%llu", get_u(f->t, i));
    if (n > f->width) f->width = n;
}

/* One float as an array element, with the chosen format. */
static void put_float(const npf *f, sbuf *b, double v) {
    char ip[400], fp[400], tmp[840];
    if (!isfinite(v)) {
        const char *r = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
        sb_spaces(b, f->pad_left + f->pad_right + 1 - (int)strlen(r));
        sb_puts(b, r);
        return;
    }
    const char *sign = signbit(v) ? "-" : "";
    if (f->exp_format) {
        int e10;
        scientific_parts(fabs(v), f->f32, f->precision, ip, fp, &e10, sizeof(ip));
        if ((int)strlen(fp) < f->min_digits) {
            /* numpy fills up to min_digits with the exact value's further
             * digits, not with zeros. */
            char buf[64];
            snprintf(buf, sizeof(buf), "%.*e", f->min_digits, fabs(v));
            ip[0] = buf[0];
            ip[1] = '\0';
            size_t k = 0;
            for (const char *q = buf + 2; *q >= '0' && *q <= '9'; q++)
                fp[k++] = *q;
            fp[k] = '\0';
            e10 = atoi(strchr(buf, 'e') + 1);
        }
        int dot = apply_trim(fp, f->trim, f->min_digits);
        snprintf(tmp, sizeof(tmp), "%s%s", sign, ip);
        sb_spaces(b, f->pad_left - (int)strlen(tmp));
        sb_puts(b, tmp);
        if (dot) sb_puts(b, ".");
        sb_puts(b, fp);
        int ew = f->exp_size > 2 ? (f->exp_size < 8 ? f->exp_size : 8) : 2;
        snprintf(tmp, sizeof(tmp), "e%c%0*d", e10 < 0 ? '-' : '+', ew, e10 < 0 ? -e10 : e10);
        sb_puts(b, tmp);
        return;
    }
    positional_parts(fabs(v), f->f32, f->precision, ip, fp, sizeof(ip));
    apply_trim(fp, f->trim, f->min_digits);
    snprintf(tmp, sizeof(tmp), "%s%s", sign, ip);
    sb_spaces(b, f->pad_left - (int)strlen(tmp));
    sb_puts(b, tmp);
    sb_puts(b, ".");
    sb_puts(b, fp);
    sb_spaces(b, f->pad_right - (int)strlen(fp));
}

/* A 0-d float, as numpy's scalar str: shortest digits, positional between
 * 1e-4 and 1e16 ("4.0"), else scientific ("1e-05"). */
static void put_float_scalar(const npf *f, sbuf *b, double v) {
    char ip[400], fp[400], tmp[64];
    if (!isfinite(v)) {
        sb_puts(b, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
        return;
    }
    if (signbit(v)) sb_puts(b, "-");
    double a = fabs(v);
    if (a == 0 || (a >= 1e-4 && a < 1e16)) {
        positional_parts(a, f->f32, -1, ip, fp, sizeof(ip));
        apply_trim(fp, TRIM_ZERO, 0);
        sb_puts(b, ip);
        sb_puts(b, ".");
        sb_puts(b, fp);
        return;
    }
    int e10;
    scientific_parts(a, f->f32, -1, ip, fp, &e10, sizeof(ip));
    int dot = apply_trim(fp, TRIM_DASH, 0);
    sb_puts(b, ip);
    if (dot) {
        sb_puts(b, ".");
        sb_puts(b, fp);
    }
    snprintf(tmp, sizeof(tmp), "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
    sb_puts(b, tmp);
}

/* Python's repr of a bytes object. */
static void put_bytes(sbuf *b, const rt_str *s) {
    int has_sq = 0, has_dq = 0;
    for (uint64_t i = 0; i < s->len; i++) {
        if (s->data[i] == '\'') has_sq = 1;
        if (s->data[i] == '"') has_dq = 1;
    }
    char q = (has_sq && !has_dq) ? '"' : '\'';
    char tmp[8];
    sb_putn(b, "b", 1);
    sb_putn(b, &q, 1);
    for (uint64_t i = 0; i < s->len; i++) {
        unsigned char c = s->data[i];
        if (c == (unsigned char)q || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            sb_putn(b, tmp, 2);
        } else if (c == '\t') {
            sb_puts(b, "\\t");
        } else if (c == '\n') {
            sb_puts(b, "\\n");
        } else if (c == '\r') {
            sb_puts(b, "\\r");
        } else if (c < 32 || c >= 127) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", c);
            sb_puts(b, tmp);
        } else {
            sb_putn(b, (const char *)&c, 1);
        }
    }
    sb_putn(b, &q, 1);
}

static void put_elem(const npf *f, sbuf *b, int64_t i) {
    char tmp[48];
    switch (f->kind) {
    case K_FLOAT:
        if (f->t->shape.rank == 0)
            put_float_scalar(f, b, get_f(f->t, i));
        else
            put_float(f, b, get_f(f->t, i));
        break;
    case K_INT:
        snprintf(tmp, sizeof(tmp), "%*lld", f->width, get_i(f->t, i));
        sb_puts(b, tmp);
        break;
    case K_UINT:
        snprintf(tmp, sizeof(tmp), "%*llu", f->width, get_u(f->t, i));
        sb_puts(b, tmp);
        break;
    case K_BOOL: {
        int v = ((const uint8_t *)f->t->data)[i] != 0;
        sb_puts(b, v ? (f->t->shape.rank == 0 ? "True" : " True") : "False");
        break;
    }
    case K_STR:
        put_bytes(b, &rt_tensor_strs(f->t)[i]);
        break;
    default:
        break;
    }
}

/* ---- layout (numpy's _formatArray) ---- */

static void extend_line(sbuf *s, sbuf *line, const char *word, int width, int indent) {
    int needs_wrap = (int)(line->len + strlen(word)) > width;
    if ((int)line->len <= indent) needs_wrap = 0;
    if (needs_wrap) {
        size_t n = line->len;
        while (n > 0 && line->p[n - 1] == ' ')
            n--;
        sb_putn(s, line->p, n);
        sb_puts(s, "\n");
        line->len = 0;
        sb_spaces(line, indent);
    }
    sb_puts(line, word);
}

/* Appends the sub-array at flat offset `off`, starting at `axis`, to out.
 * indent = length of the hanging indent (spaces), width = columns left. */
static void layout(const npf *f, int axis, int64_t off, int indent, int width, sbuf *out) {
    const rt_shape *sh = &f->t->shape;
    int axes_left = sh->rank - axis;
    int64_t n = sh->dim[axis];
    int64_t stride = 1;
    for (int a = axis + 1; a < sh->rank; a++)
        stride *= sh->dim[a];
    int summary = f->summarize && n > 2 * NPF_EDGE;
    int64_t lead = summary ? NPF_EDGE : 0;
    int64_t trail = summary ? NPF_EDGE : n;
    sbuf s = {0};
    if (axes_left == 1) {
        int elem_width = width - 1;
        sbuf line = {0}, word = {0};
        sb_spaces(&line, indent);
        for (int64_t k = 0; k < lead + (summary ? 1 : 0) + trail; k++) {
            const char *w = "...";
            if (!(summary && k == lead)) {
                int64_t i = k < lead ? k : n - (lead + (summary ? 1 : 0) + trail - k);
                word.len = 0;
                sb_puts(&word, "");
                put_elem(f, &word, off + i * stride);
                w = word.p;
            }
            extend_line(&s, &line, w, elem_width, indent);
            if (k + 1 < lead + (summary ? 1 : 0) + trail) sb_puts(&line, " ");
        }
        sb_putn(&s, line.p ? line.p : "", line.len);
        s.oom |= line.oom | word.oom;
        free(line.p);
        free(word.p);
    } else {
        char seps[RT_MAX_RANK + 1];
        int nsep = axes_left - 1;
        memset(seps, '\n', (size_t)nsep);
        seps[nsep] = '\0';
        int64_t total = lead + (summary ? 1 : 0) + trail;
        for (int64_t k = 0; k < total; k++) {
            sb_spaces(&s, indent);
            if (summary && k == lead) {
                sb_puts(&s, "...");
            } else {
                int64_t i = k < lead ? k : n - (total - k);
                layout(f, axis + 1, off + i * stride, indent + 1, width - 1, &s);
            }
            if (k + 1 < total) sb_puts(&s, seps);
        }
    }
    /* Drop the hanging indent of the first line and wrap in brackets. */
    sb_puts(out, "[");
    if (s.len > (size_t)indent) sb_putn(out, s.p + indent, s.len - (size_t)indent);
    sb_puts(out, "]");
    out->oom |= s.oom;
    free(s.p);
}

char *cli_npformat(const rt_tensor *t) {
    npf f;
    memset(&f, 0, sizeof(f));
    f.t = t;
    sbuf out = {0};
    switch (t->dtype) {
    case RT_DT_FLOAT:
        f.kind = K_FLOAT;
        f.f32 = 1;
        break;
    case RT_DT_DOUBLE:
        f.kind = K_FLOAT;
        break;
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32:
    case RT_DT_INT64:
        f.kind = K_INT;
        break;
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32:
    case RT_DT_UINT64:
        f.kind = K_UINT;
        break;
    case RT_DT_BOOL:
        f.kind = K_BOOL;
        break;
    case RT_DT_STRING:
        f.kind = K_STR;
        break;
    default:
        f.kind = K_OTHER;
        break;
    }
    if (f.kind == K_OTHER || t->shape.rank < 0) {
        char shp[200];
        size_t l = (size_t)snprintf(shp, sizeof(shp), "(");
        for (int i = 0; i < t->shape.rank && l < sizeof(shp); i++)
            l += (size_t)snprintf(shp + l, sizeof(shp) - l, i ? ", %lld" : "%lld",
                                  (long long)t->shape.dim[i]);
        if (l < sizeof(shp)) snprintf(shp + l, sizeof(shp) - l, ")");
        char line[300];
        snprintf(line, sizeof(line), "<%s tensor of shape %s>", rt_dtype_name(t->dtype), shp);
        sb_puts(&out, line);
        return out.oom ? (free(out.p), NULL) : out.p;
    }
    if (t->nelem == 0) {
        sb_puts(&out, "[]");
        return out.oom ? (free(out.p), NULL) : out.p;
    }
    f.summarize = t->nelem > NPF_THRESHOLD;
    if (f.kind == K_FLOAT) choose_float_format(&f);
    if (f.kind == K_INT || f.kind == K_UINT) visit_shown(&f, 0, 0, scan_int_width, &f);
    if (t->shape.rank == 0) {
        f.width = 0;
        put_elem(&f, &out, 0);
    } else {
        layout(&f, 0, 0, 1, NPF_LINE_WIDTH, &out);
    }
    if (out.oom) {
        free(out.p);
        return NULL;
    }
    return out.p;
}
