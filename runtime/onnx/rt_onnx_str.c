/* rt_onnx_str.c - the ONNX string ops, converted to our own ops of
 * kernels/cpu/kn_cpu_onnx_str.c (no TF op means them exactly: TF's
 * StringJoin broadcasts scalars only, StringSplit returns a sparse result and
 * splits on single spaces, and TF has no stopword filter):
 * StringConcat -> OnnxStringConcat, StringSplit -> OnnxStringSplit,
 * StringNormalizer -> OnnxStringNormalizer; and RegexFullMatch, which is
 * TF's StaticRegexFullMatch exactly (RE2 syntax, the whole string must
 * match; the kernel refuses at load what it does not serve).
 */
#include <string.h>

#include "rt_onnx_ext.h"

static int is_str(const rt__ox_value *v) {
    return v->dt == RT_DT_STRING;
}

/* StringConcat (20): X, Y broadcast. */
static ms_status op_concat(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *Y;
    const char *x, *y, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st == MS_OK) st = rt__ox_need(cv, n, 1, &Y, &y);
    if (st != MS_OK) return st;
    if (!is_str(X) || !is_str(Y)) return rt__ox_err(cv, MS_EINVAL, "X and Y must be strings");
    int64_t od[RT_MAX_RANK];
    int r = rt__ox_broadcast(X, Y, od);
    if (r == -2) return rt__ox_err(cv, MS_EINVAL, "X and Y do not broadcast");
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxStringConcat", h);
    rt__tf_input(cv, d, x);
    rt__tf_input(cv, d, y);
    rt__ox_def_out(cv, n, 0, RT_DT_STRING, r, od, d->name);
    return MS_OK;
}

/* StringSplit (20): delimiter, maxsplit -> Y (padded parts), Z (counts). */
static ms_status op_split(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (!is_str(X)) return rt__ox_err(cv, MS_EINVAL, "X must be strings");
    if (X->rank >= RT_MAX_RANK)
        return rt__ox_err(cv, MS_ENOTSUP, "X of rank %d: the output needs one more axis",
                          X->rank);
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxStringSplit", h);
    rt__tf_input(cv, d, x);
    const Onnx__AttributeProto *a = rt__ox_attr(n, "delimiter");
    if (a != NULL && a->has_s && a->s.len > 0) {
        char *s = rt__ox_alloc(cv, a->s.len + 1);
        memcpy(s, a->s.data, a->s.len);
        if (memchr(s, 0, a->s.len) != NULL)
            return rt__ox_err(cv, MS_ENOTSUP, "a delimiter holding a NUL byte");
        rt__tf_attr_s(cv, d, "delimiter", s);
    }
    if (rt__ox_attr(n, "maxsplit") != NULL) {
        int64_t m = rt__ox_attr_i(n, "maxsplit", -1);
        if (m < 0) return rt__ox_err(cv, MS_EINVAL, "maxsplit %lld < 0", (long long)m);
        rt__tf_attr_i(cv, d, "maxsplit", m);
    }
    int64_t yd[RT_MAX_RANK];
    for (int i = 0; i < X->rank; i++) yd[i] = X->dim[i];
    if (X->rank >= 0) yd[X->rank] = -1;
    rt__ox_def_out(cv, n, 0, RT_DT_STRING, X->rank < 0 ? -1 : X->rank + 1, yd, d->name);
    rt__ox_def_out(cv, n, 1, RT_DT_INT64, X->rank, X->dim, rt__tf_out(cv, d, 1));
    return MS_OK;
}

/* StringNormalizer (10): stopwords, is_case_sensitive, case_change_action,
 * locale (ASCII case mapping: only locales whose ASCII mapping is the C one). */
static ms_status op_normalizer(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    static const char *const locales[] = {"", "C", "POSIX", "C.UTF-8", "en", "en_US",
                                          "en_US.UTF-8", "en_GB", "en_GB.UTF-8"};
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (!is_str(X)) return rt__ox_err(cv, MS_EINVAL, "X must be strings");
    if (!(X->rank == 1 || (X->rank == 2 && X->dim[0] == 1)))
        return rt__ox_err(cv, MS_EINVAL, "X must be [C] or [1, C]");
    int64_t act = rt__ox_attr_is(n, "case_change_action", "NONE", "NONE")    ? 0
                  : rt__ox_attr_is(n, "case_change_action", "LOWER", "NONE") ? 1
                  : rt__ox_attr_is(n, "case_change_action", "UPPER", "NONE") ? 2
                                                                             : -1;
    if (act < 0)
        return rt__ox_err(cv, MS_EINVAL, "case_change_action must be NONE, LOWER or UPPER");
    const Onnx__AttributeProto *loc = rt__ox_attr(n, "locale");
    if (loc != NULL && loc->has_s) {
        size_t i = 0;
        for (; i < sizeof(locales) / sizeof(locales[0]); i++)
            if (loc->s.len == strlen(locales[i]) && memcmp(loc->s.data, locales[i], loc->s.len) == 0)
                break;
        if (i == sizeof(locales) / sizeof(locales[0]))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "locale \"%.*s\": only C and English locales (ASCII case "
                              "mapping) are implemented",
                              (int)loc->s.len, (const char *)loc->s.data);
    }
    Tensorflow__NodeDef *d = rt__tf_node(cv, "OnnxStringNormalizer", h);
    rt__tf_input(cv, d, x);
    rt__tf_attr_i(cv, d, "case_change_action", act);
    rt__tf_attr_i(cv, d, "is_case_sensitive", rt__ox_attr_i(n, "is_case_sensitive", 0) != 0);
    const Onnx__AttributeProto *sw = rt__ox_attr(n, "stopwords");
    if (sw != NULL && sw->n_strings > 0)
        rt__tf_attr_slist(cv, d, "stopwords", sw->strings, (int)sw->n_strings);
    int64_t od[2] = {X->dim[0], -1};
    if (X->rank == 1) od[0] = -1;
    rt__ox_def_out(cv, n, 0, RT_DT_STRING, X->rank, od, d->name);
    return MS_OK;
}

/* RegexFullMatch (20): pattern (RE2) -> StaticRegexFullMatch. */
static ms_status op_regex_full_match(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (!is_str(X)) return rt__ox_err(cv, MS_EINVAL, "X must be strings");
    const Onnx__AttributeProto *a = rt__ox_attr(n, "pattern");
    if (a == NULL || !a->has_s) return rt__ox_err(cv, MS_EINVAL, "attribute pattern is missing");
    if (memchr(a->s.data, 0, a->s.len) != NULL)
        return rt__ox_err(cv, MS_ENOTSUP, "a pattern holding a NUL byte");
    char *p = rt__ox_alloc(cv, a->s.len + 1);
    memcpy(p, a->s.data, a->s.len);
    Tensorflow__NodeDef *d = rt__tf_node(cv, "StaticRegexFullMatch", h);
    rt__tf_input(cv, d, x);
    rt__tf_attr_s(cv, d, "pattern", p);
    rt__ox_def_out(cv, n, 0, RT_DT_BOOL, X->rank, X->dim, d->name);
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } tab[] = {
    {"StringConcat", op_concat}, {"StringSplit", op_split},
    {"StringNormalizer", op_normalizer}, {"RegexFullMatch", op_regex_full_match},
};
/* clang-format on */

rt__ox_handler rt__ox_str_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(tab[i].op, op_type) == 0) return tab[i].fn;
    return NULL;
}
