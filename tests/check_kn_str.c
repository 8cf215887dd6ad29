/* check_kn_str.c - OnnxStringConcat, OnnxStringSplit, OnnxStringNormalizer
 * (kernels/cpu/kn_cpu_onnx_str.c). Expected values worked out by hand from
 * the ONNX operator pages (StringConcat 20, StringSplit 20, StringNormalizer
 * 10) and Python's str.split rules the StringSplit page refers to. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "util_node.h"

/* t has shape s and holds the n strings want (bytes, NUL-terminated). */
static void check_strs(const rt_tensor *t, rt_shape s, const char *const *want, int n) {
    tu_check_shape(t, RT_DT_STRING, s);
    ck_assert_int_eq(t->nelem, n);
    const rt_str *v = rt_tensor_strs(t);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(v[i].len == strlen(want[i]) &&
                          (v[i].len == 0 || memcmp(v[i].data, want[i], v[i].len) == 0),
                      "element %d: \"%.*s\", expected \"%s\"", i, (int)v[i].len,
                      (const char *)v[i].data, want[i]);
    }
}
#define CHECK_STRS(t, shape, ...)                                                                  \
    check_strs((t), (shape), (const char *const[]){__VA_ARGS__},                                   \
               (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))
#define STRS(shape, ...)                                                                           \
    tu_strings((shape), (const char *const[]){__VA_ARGS__},                                        \
               (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

START_TEST(test_concat) {
    /* [2, 1] + [3] broadcast to [2, 3]; empty strings and UTF-8 bytes kept */
    rt_tensor *in[2] = {STRS(TU_SHAPE(2, 1), "a", "\xc3\xa9"), STRS(TU_SHAPE(3), "", "b", "\xe2\x82\xac")};
    rt_tensor *o = tu_run1(tu_node_new("OnnxStringConcat", "sc"), in, 2);
    CHECK_STRS(o, TU_SHAPE(2, 3), "a", "ab", "a\xe2\x82\xac", "\xc3\xa9", "\xc3\xa9" "b",
               "\xc3\xa9\xe2\x82\xac");
    rt_tensor_unref(o);
    tu_unref(in, 2);
    /* scalars, and an empty tensor against a scalar */
    rt_tensor *s[2] = {STRS(TU_SCALAR, "x"), STRS(TU_SCALAR, "")};
    o = tu_run1(tu_node_new("OnnxStringConcat", "sc0"), s, 2);
    CHECK_STRS(o, TU_SCALAR, "x");
    rt_tensor_unref(o);
    rt_tensor_unref(s[1]);
    s[1] = tu_strings(TU_SHAPE(0), NULL, 0);
    o = tu_run1(tu_node_new("OnnxStringConcat", "sc_empty"), s, 2);
    tu_check_shape(o, RT_DT_STRING, TU_SHAPE(0));
    rt_tensor_unref(o);
    rt_tensor_unref(s[1]);
    /* shapes that do not broadcast, a number */
    s[1] = STRS(TU_SHAPE(2), "a", "b");
    rt_tensor *t[2] = {STRS(TU_SHAPE(3), "a", "b", "c"), s[1]};
    tu_run_fail(tu_node_new("OnnxStringConcat", "sc_bad"), t, 2, 1, MS_EINVAL, NULL);
    rt_tensor_unref(t[0]);
    t[0] = TU_F32(TU_SHAPE(2), 1, 2);
    tu_run_fail(tu_node_new("OnnxStringConcat", "sc_num"), t, 2, 1, MS_EINVAL, "string");
    tu_unref(t, 2);
    rt_tensor_unref(s[0]);
}
END_TEST

static Tensorflow__NodeDef *split_node(const char *name, const char *delim, int64_t maxsplit) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxStringSplit", name);
    if (delim) tu_attr_s(d, "delimiter", delim);
    if (maxsplit >= 0) tu_attr_i(d, "maxsplit", maxsplit);
    return d;
}

START_TEST(test_split_delimiter) {
    /* "a,,b" -> a, "", b; "" -> one empty part; "c" -> c */
    rt_tensor *x = STRS(TU_SHAPE(3), "a,,b", "", "c");
    rt_tensor *o[2];
    Tensorflow__NodeDef *d = split_node("ss", ",", -1);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    CHECK_STRS(o[0], TU_SHAPE(3, 3), "a", "", "b", "", "", "", "c", "", "");
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(3), 3, 1, 1);
    tu_unref(o, 2);
    /* maxsplit 1 with a 2-byte delimiter: "x--y--z" -> x, y--z */
    rt_tensor_unref(x);
    x = STRS(TU_SHAPE(1, 1), "x--y--z");
    d = split_node("ss_max", "--", 1);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    CHECK_STRS(o[0], TU_SHAPE(1, 1, 2), "x", "y--z");
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(1, 1), 2);
    tu_unref(o, 2);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_split_whitespace) {
    /* runs of whitespace (\t, \n, UTF-8 no-break space U+00A0 and ideographic
     * space U+3000) separate; leading / trailing ones give no parts; "" and
     * "  " give none; UTF-8 letters stay whole */
    rt_tensor *x = STRS(TU_SHAPE(4), " a\t\nb ", "", "  ", "\xc3\xa9\xc2\xa0z\xe3\x80\x80w");
    rt_tensor *o[2];
    Tensorflow__NodeDef *d = split_node("ws", NULL, -1);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    CHECK_STRS(o[0], TU_SHAPE(4, 3), "a", "b", "", "", "", "", "", "", "", "\xc3\xa9", "z", "w");
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(4), 2, 0, 0, 3);
    tu_unref(o, 2);
    /* maxsplit 1: the rest keeps its inner and trailing spaces: "  p q  r " -> p, "q  r " */
    rt_tensor_unref(x);
    x = STRS(TU_SHAPE(1), "  p q  r ");
    d = split_node("ws_max", NULL, 1);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    CHECK_STRS(o[0], TU_SHAPE(1, 2), "p", "q  r ");
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(1), 2);
    tu_unref(o, 2);
    /* an empty tensor: [0] -> [0, 0] and [0] */
    rt_tensor_unref(x);
    x = tu_strings(TU_SHAPE(0), NULL, 0);
    d = split_node("ws_empty", NULL, -1);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    tu_check_shape(o[0], RT_DT_STRING, TU_SHAPE(0, 0));
    tu_check_shape(o[1], RT_DT_INT64, TU_SHAPE(0));
    tu_unref(o, 2);
    rt_tensor_unref(x);
}
END_TEST

static Tensorflow__NodeDef *norm_node(const char *name, int64_t action, int sensitive,
                                      int nstop, const char *const *stop) {
    Tensorflow__NodeDef *d = tu_node_new("OnnxStringNormalizer", name);
    tu_attr_i(d, "case_change_action", action);
    tu_attr_i(d, "is_case_sensitive", sensitive);
    if (nstop) tu_attr_slist(d, "stopwords", nstop, stop);
    return d;
}

START_TEST(test_normalizer) {
    const char *stop[] = {"the", ""};
    /* case-blind: "The" and "THE" dropped, "" is a stopword too; UPPER */
    rt_tensor *x = STRS(TU_SHAPE(5), "The", "cat", "", "THE", "Sat");
    rt_tensor *o = tu_run1(norm_node("sn", 2, 0, 2, stop), &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "CAT", "SAT");
    rt_tensor_unref(o);
    /* case-sensitive: only "" matches; LOWER */
    o = tu_run1(norm_node("sn_cs", 1, 1, 2, stop), &x, 1);
    CHECK_STRS(o, TU_SHAPE(4), "the", "cat", "the", "sat");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* [1, C], everything dropped -> [1, 1] holding "" */
    x = STRS(TU_SHAPE(1, 2), "the", "THE");
    o = tu_run1(norm_node("sn_all", 0, 0, 1, stop), &x, 1);
    CHECK_STRS(o, TU_SHAPE(1, 1), "");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* NONE and no stopwords passes UTF-8 through; a case change on it is refused */
    x = STRS(TU_SHAPE(2), "\xc3\x89t\xc3\xa9", "b");
    o = tu_run1(norm_node("sn_utf8", 0, 1, 0, NULL), &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "\xc3\x89t\xc3\xa9", "b");
    rt_tensor_unref(o);
    tu_run_fail(norm_node("sn_utf8_up", 2, 1, 0, NULL), &x, 1, 1, MS_EINVAL, "ASCII");
    tu_run_fail(norm_node("sn_utf8_blind", 0, 0, 1, stop), &x, 1, 1, MS_EINVAL, "ASCII");
    rt_tensor_unref(x);
    /* [2, C] is not an accepted shape */
    x = STRS(TU_SHAPE(2, 1), "a", "b");
    tu_run_fail(norm_node("sn_rank", 0, 0, 0, NULL), &x, 1, 1, MS_EINVAL, "[1, C]");
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"concat", test_concat},
        {"split_delimiter", test_split_delimiter},
        {"split_whitespace", test_split_whitespace},
        {"normalizer", test_normalizer},
    };
    return tu_suite_main("kn_str", cases, sizeof(cases) / sizeof(cases[0]));
}
