/* kn_cpu_regex.c - TensorFlow's regex ops on PCRE2: RegexReplace,
 * StaticRegexReplace, RegexFullMatch, StaticRegexFullMatch (ONNX
 * RegexFullMatch converts to StaticRegexFullMatch).
 *
 * TensorFlow's patterns are RE2 syntax. PCRE2 reads most of it the same
 * way; a pattern is checked and translated here before PCRE2 compiles it
 * (docs/kernels_cpu.md "Regular expressions" lists the subset):
 *   - refused: what RE2 rejects or what PCRE2 reads differently:
 *     backreferences (\1..\9, \g, \k, (?P=name)), lookaround, atomic groups,
 *     possessive quantifiers, recursion, conditionals, callouts, comments,
 *     verbs "(*...)", flags other than i m s U, escapes RE2 lacks (\Z, \G,
 *     \h, \R, \X, \K, \N, \e, \c, \o, \C, ...), repetition counts above
 *     1000 (RE2's limit), "{,n}" and POSIX collating elements "[. .]" "[= =]";
 *   - translated: \s is [\t\n\f\r ] in RE2 (PCRE2 adds \v), \v is the one
 *     character \x0B in RE2 (PCRE2: any vertical space);
 *   - compiled with UTF-8 (RE2's default), $ at the very end only (RE2; PCRE2
 *     also matches before a final \n), ^ under (?m) also after a final \n
 *     (RE2's begin-of-line), newline = \n; \d \w \b stay ASCII as in RE2.
 * Subjects that are not valid UTF-8 fail the run (RE2 would read their bytes
 * as U+FFFD, PCRE2 cannot). PCRE2 backtracks where RE2 does not: its match
 * and depth limits bound the work per string and a string that reaches them
 * fails the run with a message, never a wrong answer.
 *
 * RegexReplace follows RE2::GlobalReplace (replace_global true: an empty
 * match right where the previous match ended is skipped by one character,
 * so "a*" on "baaa" gives "-b-", not Perl's "-b--") and RE2::Replace (the
 * first match only). The rewrite is RE2's: \0..\9 name groups, \\ is a
 * backslash; anything else after a backslash, or a group the pattern lacks,
 * is refused.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_str.h"
#include "kn_cpu_util.h"

#define RX_MATCH_LIMIT 10000000u /* PCRE2's default: backtracking steps per string */
#define RX_DEPTH_LIMIT 100000u
#define RX_MAX_REPEAT  1000 /* RE2's largest {n,m} */

/* ---- RE2 syntax -> PCRE2 pattern ---- */

typedef struct rx_buf {
    char *p;
    size_t n, cap;
} rx_buf;

static int rx_put(rx_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 64) + n;
        char *p = realloc(b->p, cap);
        if (p == NULL) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* A decimal count at p (before end) for {n,m}: its value (capped) and
 * digits. */
static size_t rx_count(const char *p, const char *end, long *v) {
    size_t k = 0;
    *v = 0;
    while (p + k < end && p[k] >= '0' && p[k] <= '9') {
        if (*v < 100000) *v = *v * 10 + (p[k] - '0');
        k++;
    }
    return k;
}

/* Translates RE2 pattern pat into PCRE2 syntax (*out, malloc'd, NUL-ended)
 * or sets *why to what is refused; esc holds the text of a refused escape. */
static int rx_translate(const char *pat, size_t len, char **out, const char **why,
                        char esc[64]) {
    rx_buf b = {0};
    const char *p = pat, *end = pat + len;
    int in_class = 0, err = 0;
    *why = NULL;
    while (p < end && !err) {
        char c = *p;
        if (c == '\\') {
            if (p + 1 >= end) {
                *why = "a trailing backslash";
                break;
            }
            char e = p[1];
            if (e == 'Q') { /* literal up to \E: copied as it is */
                const char *q = p + 2;
                while (q + 1 < end && !(q[0] == '\\' && q[1] == 'E')) q++;
                q = q + 1 < end ? q + 2 : end;
                err = rx_put(&b, p, (size_t)(q - p));
                p = q;
                continue;
            }
            if (e == 's' || e == 'S') {
                if (in_class && e == 'S') {
                    *why = "\\S inside a character class";
                    break;
                }
                const char *t = in_class ? "\\t\\n\\f\\r " : e == 's' ? "[\\t\\n\\f\\r ]"
                                                                       : "[^\\t\\n\\f\\r ]";
                err = rx_put(&b, t, strlen(t));
                p += 2;
                continue;
            }
            if ((e == 'x' || e == 'p' || e == 'P') && p + 2 < end && p[2] == '{') {
                /* \x{10FFFF}, \p{Greek}: copied whole (the braces are no count) */
                const char *q = memchr(p + 3, '}', (size_t)(end - p - 3));
                if (q == NULL) {
                    *why = "an unterminated \\x{ or \\p{";
                    break;
                }
                err = rx_put(&b, p, (size_t)(q + 1 - p));
                p = q + 1;
                continue;
            }
            if (e == 'v') {
                err = rx_put(&b, "\\x0B", 4);
                p += 2;
                continue;
            }
            if (e >= '1' && e <= '9') {
                *why = "a backreference (\\1 to \\9): RE2 has none";
                break;
            }
            if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
                if (strchr("dDwWbBAzpPxaftnrE", e) == NULL) {
                    snprintf(esc, 64, "the escape \\%c, which RE2 lacks or reads differently",
                             e);
                    *why = esc;
                    break;
                }
                if ((e == 'b' || e == 'B' || e == 'A' || e == 'z') && in_class) {
                    *why = "an assertion escape inside a character class";
                    break;
                }
            }
            err = rx_put(&b, p, 2);
            p += 2;
            continue;
        }
        if (in_class) {
            if (c == '[' && p + 1 < end && (p[1] == '.' || p[1] == '=')) {
                *why = "a POSIX collating element ([. .] or [= =])";
                break;
            }
            if (c == '[' && p + 1 < end && p[1] == ':') { /* [:alpha:] copied whole */
                const char *q = p + 2;
                while (q + 1 < end && !(q[0] == ':' && q[1] == ']')) q++;
                if (q + 1 >= end) {
                    *why = "an unterminated [: :] class";
                    break;
                }
                err = rx_put(&b, p, (size_t)(q + 2 - p));
                p = q + 2;
                continue;
            }
            if (c == ']') in_class = 0;
            err = rx_put(&b, p, 1);
            p++;
            continue;
        }
        if (c == '[') { /* a leading ] (after ^) is a literal */
            const char *q = p + 1;
            if (q < end && *q == '^') q++;
            if (q < end && *q == ']') q++;
            err = rx_put(&b, p, (size_t)(q - p));
            p = q;
            in_class = 1;
            continue;
        }
        if (c == '(' && p + 1 < end && p[1] == '*') {
            *why = "a PCRE verb or \"(*\"";
            break;
        }
        if (c == '(' && p + 1 < end && p[1] == '?') {
            const char *q = p + 2;
            if (q < end && *q == ':') {
                err = rx_put(&b, p, 3);
                p += 3;
                continue;
            }
            if (q < end && (*q == 'P' || *q == '<')) { /* (?P<name> or (?<name> */
                const char *r = *q == 'P' ? q + 1 : q;
                if (r < end && *r == '<' && r + 1 < end && r[1] != '=' && r[1] != '!') {
                    err = rx_put(&b, p, (size_t)(r + 1 - p));
                    p = r + 1;
                    continue;
                }
                *why = *q == '<' ? "lookbehind: RE2 has none"
                                 : "(?P=name) or (?P>name): RE2 has no backreference or recursion";
                break;
            }
            if (q < end && (*q == '=' || *q == '!')) {
                *why = "lookahead: RE2 has none";
                break;
            }
            /* flags: (?imsU-imsU) or (?imsU-imsU:re) */
            const char *r = q;
            int neg = 0, nflags = 0;
            while (r < end && *r && (strchr("imsU", *r) != NULL || (*r == '-' && !neg))) {
                if (*r == '-') neg = 1;
                else nflags++;
                r++;
            }
            if (r < end && (*r == ')' || *r == ':') && nflags > 0) {
                err = rx_put(&b, p, (size_t)(r + 1 - p));
                p = r + 1;
                continue;
            }
            *why = "a (? group RE2 lacks (atomic, conditional, comment, recursion, callout or a "
                   "flag other than i m s U)";
            break;
        }
        if (c == '{') { /* {n}, {n,}, {n,m}: RE2's limit; anything else is a literal */
            long lo = 0, hi = 0;
            const char *q = p + 1;
            size_t k = rx_count(q, end, &lo);
            if (k == 0 && q < end && *q == ',') {
                *why = "\"{,n}\" (a literal in RE2, a repetition in newer PCRE2)";
                break;
            }
            if (k > 0) {
                q += k;
                int ok = q < end && *q == '}';
                if (!ok && q < end && *q == ',') {
                    q++;
                    k = rx_count(q, end, &hi);
                    q += k;
                    ok = q < end && *q == '}';
                }
                if (ok && (lo > RX_MAX_REPEAT || hi > RX_MAX_REPEAT)) {
                    *why = "a repetition count above 1000 (RE2's limit)";
                    break;
                }
                if (ok && q + 1 < end && q[1] == '+') {
                    *why = "a possessive quantifier: RE2 has none";
                    break;
                }
            }
        }
        if ((c == '*' || c == '+' || c == '?') && p + 1 < end && p[1] == '+') {
            *why = "a possessive quantifier: RE2 has none";
            break;
        }
        err = rx_put(&b, p, 1);
        p++;
    }
    if (*why == NULL && in_class) *why = "an unterminated character class";
    if (*why == NULL && (err || rx_put(&b, "", 0) != 0)) *why = "out of memory";
    if (*why != NULL) {
        free(b.p);
        *out = NULL;
        return -1;
    }
    *out = b.p;
    return 0;
}

/* A compiled pattern and the groups it has. */
typedef struct rx {
    pcre2_code *code;
    uint32_t groups;
} rx;

/* Compiles RE2 pattern pat for node; MS_EINVAL naming the node and the
 * refused feature or PCRE2's message. */
static ms_status rx_compile(const kn_node *node, const char *pat, size_t len, rx *r) {
    char *tr = NULL, esc[64];
    const char *why;
    r->code = NULL;
    if (rx_translate(pat, len, &tr, &why, esc) != 0)
        return KN_EINVAL(node, "regex \"%.*s\" uses %s (TensorFlow's patterns are RE2 syntax; "
                         "docs/kernels_cpu.md lists the subset served)",
                         (int)(len > 200 ? 200 : len), pat, why);
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (cc == NULL) {
        free(tr);
        return kn__errf(MS_ENOMEM, node, "out of memory");
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int ec = 0;
    PCRE2_SIZE eo = 0;
    r->code = pcre2_compile((PCRE2_SPTR)tr, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_CIRCUMFLEX |
                                PCRE2_NEVER_BACKSLASH_C,
                            &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    free(tr);
    if (r->code == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return KN_EINVAL(node, "invalid regex \"%.*s\": %s", (int)(len > 200 ? 200 : len), pat,
                         (const char *)msg);
    }
    pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &r->groups);
    return MS_OK;
}

/* Checks an RE2 rewrite string against a pattern of `groups` groups. */
static ms_status rx_check_rewrite(const kn_node *node, const char *rw, size_t len,
                                  uint32_t groups) {
    for (size_t i = 0; i < len; i++) {
        if (rw[i] != '\\') continue;
        if (i + 1 >= len) return KN_EINVAL(node, "rewrite ends in a backslash");
        char e = rw[++i];
        if (e == '\\') continue;
        if (e < '0' || e > '9')
            return KN_EINVAL(node, "rewrite has '\\%c': only \\0 to \\9 and \\\\ may follow a "
                             "backslash", e);
        if ((uint32_t)(e - '0') > groups)
            return KN_EINVAL(node, "rewrite refers to group \\%c; the pattern has %u", e,
                             (unsigned)groups);
    }
    return MS_OK;
}

/* ---- per-node state ---- */

typedef struct rx_state {
    rx re;           /* static ops: compiled at load */
    int replace;     /* a Replace op */
    int is_static;
    int global;      /* replace_global */
    const char *rewrite;
    size_t rewrite_len;
} rx_state;

static void rx_release(void *state) {
    rx_state *s = state;
    if (s == NULL) return;
    pcre2_code_free(s->re.code);
    free(s);
}

static ms_status rx_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    rx_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    s->replace = strstr(node->op, "Replace") != NULL;
    s->is_static = strncmp(node->op, "Static", 6) == 0;
    s->global = kn_attr_b(node, "replace_global", 1);
    ms_status st = MS_OK;
    if (s->is_static) {
        size_t len = 0, rwlen = 0;
        const char *pat = kn_attr_s(node, "pattern", &len);
        if (pat == NULL) {
            st = KN_EINVAL(node, "attr pattern is missing");
            goto done;
        }
        if ((st = rx_compile(node, pat, len, &s->re)) != MS_OK) goto done;
        if (s->replace) {
            s->rewrite = kn_attr_s(node, "rewrite", &rwlen);
            if (s->rewrite == NULL) s->rewrite = "";
            s->rewrite_len = rwlen;
            st = rx_check_rewrite(node, s->rewrite, rwlen, s->re.groups);
        }
    }
done:
    if (st != MS_OK) {
        rx_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

/* One match of re in s from byte `from` (flags: PCRE2_ANCHORED...): 1 with
 * the groups' offsets in md, 0 for none, or an error naming string i. */
static ms_status rx_match(const kn_node *node, const rx *re, const rt_str *s, uint64_t from,
                          uint32_t flags, pcre2_match_data *md, pcre2_match_context *mc,
                          int64_t i, int *hit) {
    const uint8_t *subj = s->len ? s->data : (const uint8_t *)"";
    int rc = pcre2_match(re->code, subj, (PCRE2_SIZE)s->len, (PCRE2_SIZE)from, flags, md, mc);
    *hit = rc > 0;
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return MS_OK;
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
        return KN_EINVAL(node, "string %lld is not valid UTF-8 (RE2 semantics for invalid "
                         "UTF-8 are not implemented)", (long long)i);
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return KN_EINVAL(node, "matching string %lld: %s (PCRE2 backtracks where RE2 would not; "
                     "the pattern is too costly on this string)", (long long)i,
                     (const char *)msg);
}

/* Appends the rewrite with groups of ov to b (pass 0: only counts *n). */
static void rx_rewrite(const char *rw, size_t rwlen, const uint8_t *subj, const PCRE2_SIZE *ov,
                       uint8_t *dst, uint64_t *n) {
    for (size_t i = 0; i < rwlen; i++) {
        if (rw[i] != '\\') {
            if (dst) dst[*n] = (uint8_t)rw[i];
            (*n)++;
            continue;
        }
        char e = rw[++i];
        if (e == '\\') {
            if (dst) dst[*n] = '\\';
            (*n)++;
            continue;
        }
        int g = e - '0';
        PCRE2_SIZE a = ov[2 * g], z = ov[2 * g + 1];
        if (a == PCRE2_UNSET) continue; /* a group that did not take part: empty */
        if (dst) memcpy(dst + *n, subj + a, z - a);
        *n += z - a;
    }
}

/* Length of the UTF-8 character at s[at] (1 for a stray byte). */
static uint64_t char_len(const rt_str *s, uint64_t at) {
    uint64_t k = 1;
    while (at + k < s->len && (s->data[at + k] & 0xc0) == 0x80) k++;
    return k;
}

/* RE2::GlobalReplace / Replace of string i into dst (NULL: only the length
 * *n). *count = replacements made. */
static ms_status rx_replace_one(const kn_node *node, const rx *re, const char *rw, size_t rwlen,
                                int global, const rt_str *s, int64_t i, pcre2_match_data *md,
                                pcre2_match_context *mc, uint8_t *dst, uint64_t *n) {
    const uint8_t *subj = s->len ? s->data : (const uint8_t *)"";
    uint64_t p = 0, lastend = UINT64_MAX;
    uint32_t flags = 0;
    *n = 0;
    while (p <= s->len) {
        int hit;
        ms_status st = rx_match(node, re, s, p, flags, md, mc, i, &hit);
        flags = PCRE2_NO_UTF_CHECK; /* checked whole by the first call; p stays on a boundary */
        if (st != MS_OK) return st;
        if (!hit) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (dst && ov[0] > p) memcpy(dst + *n, subj + p, ov[0] - p);
        *n += ov[0] - p;
        if (ov[0] == lastend && ov[1] == ov[0]) { /* no empty match right after a match */
            if (p < s->len) {
                uint64_t k = char_len(s, p);
                if (dst) memcpy(dst + *n, subj + p, k);
                *n += k;
                p += k;
            } else {
                p++;
            }
            continue;
        }
        rx_rewrite(rw, rwlen, subj, ov, dst, n);
        p = ov[1];
        lastend = p;
        if (!global) break;
    }
    if (p < s->len) {
        if (dst) memcpy(dst + *n, subj + p, s->len - p);
        *n += s->len - p;
    }
    return MS_OK;
}

static ms_status rx_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    void *own = NULL;
    ms_status st = MS_OK;
    if (state == NULL) { /* run without prepare (a lone kernel call) */
        if ((st = rx_prepare(node, NULL, &own)) != MS_OK) return st;
        state = own;
    }
    rx_state *s = state;
    rx dyn = {0};
    const rx *re = &s->re;
    const char *rw = s->rewrite;
    size_t rwlen = s->rewrite_len;
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    int nin = s->is_static ? 1 : s->replace ? 3 : 2;
    if ((st = kn__need_inputs(node, in, nin)) != MS_OK) goto done;
    for (int k = 0; k < nin; k++)
        if ((st = kn__need_str(node, in[k], k == 0 ? "input" : k == 1 ? "pattern" : "rewrite")) !=
            MS_OK)
            goto done;
    if (!s->is_static) {
        for (int k = 1; k < nin; k++)
            if (in[k]->nelem != 1) {
                st = KN_EINVAL(node, "%s must be a scalar, got shape %s",
                               k == 1 ? "pattern" : "rewrite", kn__shp(&in[k]->shape));
                goto done;
            }
        const rt_str *pat = rt_tensor_strs(in[1]);
        if ((st = rx_compile(node, (const char *)pat->data, (size_t)pat->len, &dyn)) != MS_OK)
            goto done;
        re = &dyn;
        if (s->replace) {
            const rt_str *r = rt_tensor_strs(in[2]);
            rw = (const char *)r->data;
            rwlen = (size_t)r->len;
            if ((st = rx_check_rewrite(node, rw, rwlen, re->groups)) != MS_OK) goto done;
        }
    }
    md = pcre2_match_data_create_from_pattern(re->code, NULL);
    mc = pcre2_match_context_create(NULL);
    if (md == NULL || mc == NULL) {
        st = kn__errf(MS_ENOMEM, node, "out of memory");
        goto done;
    }
    pcre2_set_match_limit(mc, RX_MATCH_LIMIT);
    pcre2_set_depth_limit(mc, RX_DEPTH_LIMIT);
    const rt_tensor *x = in[0];
    const rt_str *xs = rt_tensor_strs(x);
    if (!s->replace) {
        if ((st = kn__output(ctx, node, 0, RT_DT_BOOL, &x->shape, &out[0])) != MS_OK) goto done;
        uint8_t *o = out[0]->data;
        for (int64_t i = 0; i < x->nelem; i++) {
            int hit;
            st = rx_match(node, re, &xs[i], 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, mc, i,
                          &hit);
            if (st != MS_OK) goto done;
            o[i] = (uint8_t)hit;
        }
        goto done;
    }
    if ((st = kn__str_output(ctx, node, 0, &x->shape, &out[0])) != MS_OK) goto done;
    rt_str *o = rt_tensor_strs(out[0]);
    for (int64_t i = 0; i < x->nelem; i++) {
        uint64_t n;
        st = rx_replace_one(node, re, rw, rwlen, s->global, &xs[i], i, md, mc, NULL, &n);
        if (st != MS_OK) goto done;
        o[i] = (rt_str){NULL, n};
    }
    if ((st = kn__str_own(ctx, node, out[0])) != MS_OK) goto done;
    for (int64_t i = 0; i < x->nelem; i++) {
        uint64_t n;
        st = rx_replace_one(node, re, rw, rwlen, s->global, &xs[i], i, md, mc,
                            (uint8_t *)o[i].data, &n);
        if (st != MS_OK) goto done;
    }
done:
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    pcre2_code_free(dyn.code);
    rx_release(own);
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_regex_kernels[] = {
    {.op = "RegexReplace", .prepare = rx_prepare, .compute = rx_compute, .release = rx_release},
    {.op = "StaticRegexReplace", .prepare = rx_prepare, .compute = rx_compute,
     .release = rx_release},
    {.op = "RegexFullMatch", .prepare = rx_prepare, .compute = rx_compute, .release = rx_release},
    {.op = "StaticRegexFullMatch", .prepare = rx_prepare, .compute = rx_compute,
     .release = rx_release},
    {.op = NULL},
};
/* clang-format on */
