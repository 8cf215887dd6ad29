/* check_kn_str.c - the string kernels: OnnxStringConcat, OnnxStringSplit,
 * OnnxStringNormalizer (kernels/cpu/kn_cpu_onnx_str.c); TensorFlow's
 * StringJoin, StringLength, StringLower / Upper, Substr, StringSplitV2,
 * StringStrip, AsString (kn_cpu_str.c), the regex ops (kn_cpu_regex.c),
 * Unique* (kn_cpu_unique.c) and the legacy StringToHashBucket
 * (kn_cpu_hash.c).
 *
 * Expected values are the examples of the ONNX operator pages (StringConcat
 * 20, StringSplit 20, StringNormalizer 10) and of TensorFlow's API pages
 * (tf.strings.join / length / lower / upper / substr / split / strip /
 * as_string / regex_full_match / regex_replace / to_hash_bucket, tf.unique,
 * tf.unique_with_counts, tf.raw_ops.UniqueV2), or worked out by hand from
 * their rules and from RE2's documented syntax and GlobalReplace rule (an
 * empty match right after the previous match is not replaced). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "kn_ctx.h"
#include "ms_budget.h"
#include "rt_graph.h"
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


/* ---- TensorFlow string ops ---- */

/* A node of op with one string attr (key NULL: none). */
static Tensorflow__NodeDef *snode(const char *op, const char *name, const char *key,
                                  const char *val) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    if (key) tu_attr_s(d, key, val);
    return d;
}

START_TEST(test_join) {
    /* tf.strings.join([['abc','123'], ['def','456'], ['ghi','789']], separator='.') */
    rt_tensor *in[3] = {STRS(TU_SHAPE(2), "abc", "123"), STRS(TU_SHAPE(2), "def", "456"),
                        STRS(TU_SHAPE(2), "ghi", "789")};
    rt_tensor *o = tu_run1(snode("StringJoin", "j", "separator", "."), in, 3);
    CHECK_STRS(o, TU_SHAPE(2), "abc.def.ghi", "123.456.789");
    rt_tensor_unref(o);
    /* a scalar joins every element; no separator */
    rt_tensor *sc = STRS(TU_SCALAR, "x");
    rt_tensor *mix[2] = {in[0], sc};
    o = tu_run1(snode("StringJoin", "j2", NULL, NULL), mix, 2);
    CHECK_STRS(o, TU_SHAPE(2), "abcx", "123x");
    rt_tensor_unref(o);
    /* shapes [2] and [3] do not match */
    rt_tensor *three = STRS(TU_SHAPE(3), "a", "b", "c");
    rt_tensor *bad[2] = {in[0], three};
    tu_run_fail(snode("StringJoin", "j_bad", NULL, NULL), bad, 2, 1, MS_EINVAL, "do not match");
    rt_tensor_unref(three);
    rt_tensor_unref(sc);
    tu_unref(in, 3);
}
END_TEST

START_TEST(test_length_case_strip) {
    /* tf.strings.length(['Hello', 'TensorFlow', U+1F642]): bytes 5 10 4, chars 5 10 1 */
    rt_tensor *x = STRS(TU_SHAPE(3), "Hello", "TensorFlow", "\xf0\x9f\x99\x82");
    rt_tensor *o = tu_run1(snode("StringLength", "len", NULL, NULL), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(3), 5, 10, 4);
    rt_tensor_unref(o);
    o = tu_run1(snode("StringLength", "len8", "unit", "UTF8_CHAR"), &x, 1);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(3), 5, 10, 1);
    rt_tensor_unref(o);
    tu_run_fail(snode("StringLength", "len_bad", "unit", "UTF16_CHAR"), &x, 1, 1, MS_EINVAL,
                "UTF16_CHAR");
    rt_tensor_unref(x);
    /* tf.strings.lower / upper("CamelCase string and ALL CAPS"); encoding "" leaves the
     * bytes of U+00C9 as they are, "utf-8" refuses them */
    x = STRS(TU_SHAPE(2), "CamelCase string and ALL CAPS", "\xc3\x89t\xc3\xa9");
    o = tu_run1(snode("StringLower", "lo", NULL, NULL), &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "camelcase string and all caps", "\xc3\x89t\xc3\xa9");
    rt_tensor_unref(o);
    o = tu_run1(snode("StringUpper", "up", "encoding", ""), &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "CAMELCASE STRING AND ALL CAPS", "\xc3\x89T\xc3\xa9");
    rt_tensor_unref(o);
    tu_run_fail(snode("StringUpper", "up8", "encoding", "utf-8"), &x, 1, 1, MS_EINVAL, "ASCII");
    tu_run_fail(snode("StringLower", "lo_l1", "encoding", "latin1"), &x, 1, 1, MS_EINVAL,
                "latin1");
    rt_tensor_unref(x);
    x = STRS(TU_SHAPE(1), "MiXed");
    o = tu_run1(snode("StringLower", "lo8", "encoding", "utf-8"), &x, 1);
    CHECK_STRS(o, TU_SHAPE(1), "mixed");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    /* tf.strings.strip(['\nTensorFlow', '     The python library    ']) */
    x = STRS(TU_SHAPE(3), "\nTensorFlow", "     The python library    ", " \t\v\f\r ");
    o = tu_run1(snode("StringStrip", "strip", NULL, NULL), &x, 1);
    CHECK_STRS(o, TU_SHAPE(3), "TensorFlow", "The python library", "");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

static Tensorflow__NodeDef *substr_node(const char *name, const char *unit) {
    return snode("Substr", name, unit ? "unit" : NULL, unit);
}

START_TEST(test_substr) {
    /* tf.strings.substr's examples: one pos / len for all */
    rt_tensor *in[3] = {STRS(TU_SHAPE(2), "Hello", "World"), TU_I32(TU_SCALAR, 1),
                        TU_I32(TU_SCALAR, 3)};
    rt_tensor *o = tu_run1(substr_node("s0", NULL), in, 3);
    CHECK_STRS(o, TU_SHAPE(2), "ell", "orl");
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* elementwise */
    in[0] = STRS(TU_SHAPE(3, 3), "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                 "sixteen", "seventeen", "eighteen");
    in[1] = TU_I64(TU_SHAPE(3, 3), 1, 2, 3, 1, 2, 3, 1, 2, 3);
    in[2] = TU_I64(TU_SHAPE(3, 3), 2, 3, 4, 4, 3, 2, 5, 5, 5);
    o = tu_run1(substr_node("s1", "BYTE"), in, 3);
    CHECK_STRS(o, TU_SHAPE(3, 3), "en", "eve", "lve", "hirt", "urt", "te", "ixtee", "vente",
               "hteen");
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* pos / len [3] broadcast over a [4, 3] input */
    in[0] = STRS(TU_SHAPE(4, 3), "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                 "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "twentyone");
    in[1] = TU_I32(TU_SHAPE(3), 1, 2, 3);
    in[2] = TU_I32(TU_SHAPE(3), 1, 2, 3);
    o = tu_run1(substr_node("s2", NULL), in, 3);
    CHECK_STRS(o, TU_SHAPE(4, 3), "e", "ev", "lve", "h", "ur", "tee", "i", "ve", "hte", "i",
               "en", "nty");
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* a scalar input broadcast over pos / len [3] */
    in[0] = STRS(TU_SCALAR, "thirteen");
    in[1] = TU_I32(TU_SHAPE(3), 1, 5, 7);
    in[2] = TU_I32(TU_SHAPE(3), 3, 2, 1);
    o = tu_run1(substr_node("s3", NULL), in, 3);
    CHECK_STRS(o, TU_SHAPE(3), "hir", "ee", "n");
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* negative pos counts from the end; len past the end or negative takes the rest;
     * pos == size gives ""; pos 6 and -6 of "Hello" are out of range */
    in[0] = STRS(TU_SHAPE(4), "Hello", "Hello", "Hello", "Hello");
    in[1] = TU_I32(TU_SHAPE(4), -3, 1, 5, -5);
    in[2] = TU_I32(TU_SHAPE(4), 2, 99, 1, -1);
    o = tu_run1(substr_node("s4", NULL), in, 3);
    CHECK_STRS(o, TU_SHAPE(4), "ll", "ello", "", "Hello");
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(4), 0, 0, 6, 0);
    tu_run_fail(substr_node("s_far", NULL), in, 3, 1, MS_EINVAL, "pos 6 out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(4), 0, -6, 0, 0);
    tu_run_fail(substr_node("s_back", NULL), in, 3, 1, MS_EINVAL, "pos -6 out of range");
    /* pos and len of different shapes */
    rt_tensor_unref(in[2]);
    in[2] = TU_I32(TU_SCALAR, 1);
    tu_run_fail(substr_node("s_shapes", NULL), in, 3, 1, MS_EINVAL, "same shape");
    tu_unref(in, 3);
    /* UTF8_CHAR: "h\u00e9llo" (6 bytes, 5 characters) */
    in[0] = STRS(TU_SHAPE(4), "h\xc3\xa9llo", "h\xc3\xa9llo", "h\xc3\xa9llo", "h\xc3\xa9llo");
    in[1] = TU_I64(TU_SHAPE(4), 1, -4, 5, 0);
    in[2] = TU_I64(TU_SHAPE(4), 2, 1, 3, 9);
    o = tu_run1(substr_node("s8", "UTF8_CHAR"), in, 3);
    CHECK_STRS(o, TU_SHAPE(4), "\xc3\xa9l", "\xc3\xa9", "", "h\xc3\xa9llo");
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(4), 1, 6, 0, 0);
    tu_run_fail(substr_node("s8_far", "UTF8_CHAR"), in, 3, 1, MS_EINVAL, "pos 6 out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(4), 1, -6, 0, 0);
    tu_run_fail(substr_node("s8_back", "UTF8_CHAR"), in, 3, 1, MS_EINVAL, "pos -6 out of range");
    tu_unref(in, 3);
}
END_TEST

/* Runs StringSplitV2 on x with sep and maxsplit (< -1: attr absent). */
static void split_v2(const char *name, rt_tensor *x, const char *sep, int64_t maxsplit,
                     rt_tensor **o) {
    Tensorflow__NodeDef *d = tu_node_new("StringSplitV2", name);
    if (maxsplit >= -1) tu_attr_i(d, "maxsplit", maxsplit);
    rt_tensor *in[2] = {x, STRS(TU_SCALAR, sep)};
    ms_status st = tu_run(d, in, 2, o, 3);
    ck_assert_msg(st == MS_OK, "%s: %s", name, ms_errmsg());
    rt_tensor_unref(in[1]);
    tu_node_free(d);
}

START_TEST(test_split_v2) {
    Tensorflow__NodeDef *d1;
    /* the op's example: 'hello world', 'a b c' split on whitespace */
    rt_tensor *x = STRS(TU_SHAPE(2), "hello world", "a b c"), *o[3];
    split_v2("sv", x, "", -2, o);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(5, 2), 0, 0, 0, 1, 1, 0, 1, 1, 1, 2);
    CHECK_STRS(o[1], TU_SHAPE(5), "hello", "world", "a", "b", "c");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 2, 3);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    /* '1<>2<><>3' on '<>' -> 1, 2, "", 3; "" -> one ""; maxsplit 1: '1,2,3' -> 1, '2,3' */
    x = STRS(TU_SHAPE(2), "1<>2<><>3", "");
    split_v2("sv_sep", x, "<>", -1, o);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(5, 2), 0, 0, 0, 1, 0, 2, 0, 3, 1, 0);
    CHECK_STRS(o[1], TU_SHAPE(5), "1", "2", "", "3", "");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 2, 4);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    x = STRS(TU_SHAPE(1), "1,2,3");
    split_v2("sv_max", x, ",", 1, o);
    CHECK_STRS(o[1], TU_SHAPE(2), "1", "2,3");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 1, 2);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    /* whitespace runs, leading / trailing ones give nothing; "  " gives no part */
    x = STRS(TU_SHAPE(2), "  a\t\n b  ", "  ");
    split_v2("sv_ws", x, "", -1, o);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(2, 2), 0, 0, 0, 1);
    CHECK_STRS(o[1], TU_SHAPE(2), "a", "b");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 2, 2);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    /* an empty batch: [0, 2], [0], [0, 0] */
    x = tu_strings(TU_SHAPE(0), NULL, 0);
    split_v2("sv_empty", x, ",", -1, o);
    tu_check_shape(o[0], RT_DT_INT64, TU_SHAPE(0, 2));
    tu_check_shape(o[1], RT_DT_STRING, TU_SHAPE(0));
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 0, 0);
    tu_unref(o, 3);
    rt_tensor_unref(x);
    /* the legacy StringSplit: tf.compat.v1.string_split(['hello world', 'a b c']) gives
     * the same; any byte of the delimiter separates, empty parts dropped unless
     * skip_empty is false, "" splits into bytes */
    x = STRS(TU_SHAPE(2), "hello world", "a b c");
    rt_tensor *v1[2] = {x, STRS(TU_SCALAR, " ")};
    ck_assert_int_eq(tu_run(d1 = tu_node_new("StringSplit", "s1"), v1, 2, o, 3), MS_OK);
    tu_node_free(d1);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(5, 2), 0, 0, 0, 1, 1, 0, 1, 1, 1, 2);
    CHECK_STRS(o[1], TU_SHAPE(5), "hello", "world", "a", "b", "c");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 2, 3);
    tu_unref(o, 3);
    tu_unref(v1, 2);
    v1[0] = STRS(TU_SHAPE(3), "a,,b;c", "", "xy");
    v1[1] = STRS(TU_SCALAR, ",;");
    ck_assert_int_eq(tu_run(d1 = tu_node_new("StringSplit", "s1_set"), v1, 2, o, 3), MS_OK);
    tu_node_free(d1);
    CHECK_STRS(o[1], TU_SHAPE(4), "a", "b", "c", "xy");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 3, 3);
    tu_unref(o, 3);
    d1 = tu_node_new("StringSplit", "s1_keep");
    tu_attr_b(d1, "skip_empty", 0);
    ck_assert_int_eq(tu_run(d1, v1, 2, o, 3), MS_OK);
    tu_node_free(d1);
    CHECK_STRS(o[1], TU_SHAPE(5), "a", "", "b", "c", "xy");
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(5, 2), 0, 0, 0, 1, 0, 2, 0, 3, 2, 0);
    tu_unref(o, 3);
    rt_tensor_unref(v1[1]);
    v1[1] = STRS(TU_SCALAR, "");
    ck_assert_int_eq(tu_run(d1 = tu_node_new("StringSplit", "s1_bytes"), v1, 2, o, 3), MS_OK);
    tu_node_free(d1);
    CHECK_STRS(o[1], TU_SHAPE(8), "a", ",", ",", "b", ";", "c", "x", "y");
    TU_CHECK_INT(o[2], RT_DT_INT64, TU_SHAPE(2), 3, 6);
    tu_unref(o, 3);
    tu_unref(v1, 2);
    /* the input must be a vector */
    x = STRS(TU_SHAPE(1, 1), "a");
    rt_tensor *in[2] = {x, STRS(TU_SCALAR, ",")};
    tu_run_fail(tu_node_new("StringSplitV2", "sv_rank"), in, 2, 3, MS_EINVAL, "vector");
    tu_unref(in, 2);
}
END_TEST

START_TEST(test_as_string) {
    /* tf.strings.as_string([3, 2]) and (3.1415926, precision=3); %f's default six
     * decimals; width 3 with fill "0"; bools */
    rt_tensor *x = TU_I32(TU_SHAPE(2), 3, 2);
    Tensorflow__NodeDef *d = tu_node_new("AsString", "as_i");
    tu_attr_type(d, "T", RT_DT_INT32);
    rt_tensor *o = tu_run1(d, &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "3", "2");
    rt_tensor_unref(o);
    d = tu_node_new("AsString", "as_w");
    tu_attr_type(d, "T", RT_DT_INT32);
    tu_attr_i(d, "width", 3);
    tu_attr_s(d, "fill", "0");
    o = tu_run1(d, &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "003", "002");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(2), 3.1415926f, -0.5f);
    d = tu_node_new("AsString", "as_p");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_i(d, "precision", 3);
    o = tu_run1(d, &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "3.142", "-0.500");
    rt_tensor_unref(o);
    d = tu_node_new("AsString", "as_f");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    o = tu_run1(d, &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "3.141593", "-0.500000");
    rt_tensor_unref(o);
    d = tu_node_new("AsString", "as_bad");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_b(d, "scientific", 1);
    tu_attr_b(d, "shortest", 1);
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "both");
    d = tu_node_new("AsString", "as_fill");
    tu_attr_type(d, "T", RT_DT_FLOAT);
    tu_attr_s(d, "fill", "x");
    tu_run_fail(d, &x, 1, 1, MS_EINVAL, "Fill");
    rt_tensor_unref(x);
    x = TU_BOOL(TU_SHAPE(2), 1, 0);
    d = tu_node_new("AsString", "as_b");
    tu_attr_type(d, "T", RT_DT_BOOL);
    o = tu_run1(d, &x, 1);
    CHECK_STRS(o, TU_SHAPE(2), "true", "false");
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_hash_legacy) {
    /* tf.strings.to_hash_bucket(["Hello", "TensorFlow", "2.x"], 3) -> [2, 0, 1] */
    rt_tensor *x = STRS(TU_SHAPE(3), "Hello", "TensorFlow", "2.x");
    Tensorflow__NodeDef *d = tu_node_new("StringToHashBucket", "hb");
    tu_attr_i(d, "num_buckets", 3);
    rt_tensor *o = tu_run1(d, &x, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(3), 2, 0, 1);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

/* ---- regex ---- */

static Tensorflow__NodeDef *rx_node(const char *op, const char *name, const char *pattern,
                                    const char *rewrite, int global) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    tu_attr_s(d, "pattern", pattern);
    if (rewrite) tu_attr_s(d, "rewrite", rewrite);
    if (global >= 0) tu_attr_b(d, "replace_global", global);
    return d;
}

/* StaticRegexReplace of one string; checks the result. */
static void replace1(const char *pattern, const char *rewrite, int global, const char *s,
                     const char *want) {
    rt_tensor *x = STRS(TU_SHAPE(1), s);
    rt_tensor *o = tu_run1(rx_node("StaticRegexReplace", "rr", pattern, rewrite, global), &x, 1);
    CHECK_STRS(o, TU_SHAPE(1), want);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}

START_TEST(test_regex_full_match) {
    /* tf.strings.regex_full_match(["TF lib", "lib TF"], ".*lib$") -> True, False */
    rt_tensor *x = STRS(TU_SHAPE(2), "TF lib", "lib TF");
    rt_tensor *o = tu_run1(rx_node("StaticRegexFullMatch", "fm", ".*lib$", NULL, -1), &x, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(2), 1, 0);
    rt_tensor_unref(o);
    /* the dynamic op: the whole string must match ("a|ab" takes "ab" whole) */
    rt_tensor *in[2] = {STRS(TU_SHAPE(3), "ab", "a", "abc"), STRS(TU_SCALAR, "a|ab")};
    o = tu_run1(tu_node_new("RegexFullMatch", "fmd"), in, 2);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(3), 1, 1, 0);
    rt_tensor_unref(o);
    tu_unref(in, 2);
    rt_tensor_unref(x);
    /* RE2's \s is [\t\n\f\r ] (no \v); \v is the character 0x0B; \d is ASCII; (?i) */
    x = STRS(TU_SHAPE(4), "\t", "\v", "\xd9\xa3", "AbC");
    o = tu_run1(rx_node("StaticRegexFullMatch", "fm_s", "\\s", NULL, -1), &x, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 1, 0, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(rx_node("StaticRegexFullMatch", "fm_v", "[\\v]|\\v", NULL, -1), &x, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 0, 1, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(rx_node("StaticRegexFullMatch", "fm_d", "\\d|(?i)abc", NULL, -1), &x, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(4), 0, 0, 0, 1);
    rt_tensor_unref(o);
    /* a string that is not UTF-8 fails the run */
    rt_tensor_unref(x);
    x = STRS(TU_SHAPE(1), "\xff");
    tu_run_fail(rx_node("StaticRegexFullMatch", "fm_utf", ".", NULL, -1), &x, 1, 1, MS_EINVAL,
                "UTF-8");
    rt_tensor_unref(x);
}
END_TEST

START_TEST(test_regex_replace) {
    /* tf.strings.regex_replace's example: tags to spaces */
    replace1("<[^>]+>", " ", -1, "Text with tags.<br /><b>contains html</b>",
             "Text with tags.  contains html ");
    /* groups; the first match only; RE2's "yabba dabba doo" and "banana" examples */
    replace1("(\\d+)-(\\d+)-(\\d+)", "\\3/\\2/\\1 \\\\", 1, "2024-01-15", "15/01/2024 \\");
    replace1("a", "b", 0, "aaa", "baa");
    replace1("b+", "d", 1, "yabba dabba doo", "yada dada doo");
    replace1("ana", "X", 1, "banana", "bXna");
    /* empty matches: none right after a match ("a*" on "baaa": -b-, not Perl's -b--) */
    replace1("a*", "-", 1, "baaa", "-b-");
    replace1("b*", "bb", 1, "ababababab", "bbabbabbabbabbabb");
    replace1("", "(\\0)", 1, "abc", "()a()b()c()");
    replace1("", "-", 1, "\xc3\xa9", "-\xc3\xa9-");
    /* $ only at the very end; (?m)^ also after a final newline */
    replace1("a$", "X", 1, "a\n", "a\n");
    replace1("(?m)^", "X", 1, "a\n", "Xa\nX");
    replace1("[[:punct:]]", "", 1, "Hello, World!", "Hello World");
    /* exponential backtracking stops at PCRE2's match limit and fails the run */
    rt_tensor *x = STRS(TU_SHAPE(1), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab");
    tu_run_fail(rx_node("StaticRegexFullMatch", "fm_cost", "(a+a+)+$", NULL, -1), &x, 1, 1,
                MS_EINVAL, "too costly");
    rt_tensor_unref(x);
    /* the dynamic op with pattern and rewrite inputs */
    rt_tensor *in[3] = {STRS(TU_SHAPE(2), "one two", ""), STRS(TU_SCALAR, "(\\w+) (\\w+)"),
                        STRS(TU_SCALAR, "\\2 \\1")};
    rt_tensor *o = tu_run1(tu_node_new("RegexReplace", "rrd"), in, 3);
    CHECK_STRS(o, TU_SHAPE(2), "two one", "");
    rt_tensor_unref(o);
    /* a rewrite naming a group the pattern lacks */
    rt_tensor_unref(in[2]);
    in[2] = STRS(TU_SCALAR, "\\3");
    tu_run_fail(tu_node_new("RegexReplace", "rrd_group"), in, 3, 1, MS_EINVAL, "group");
    tu_unref(in, 3);
}
END_TEST

START_TEST(test_regex_refused) {
    /* what RE2 rejects or PCRE2 reads differently is refused at load, naming it */
    static const struct {
        const char *pattern, *needle;
    } bad[] = {
        {"(a)\\1", "backreference"}, {"(?=a)", "lookahead"},  {"(?<!a)b", "lookbehind"},
        {"a++", "possessive"},       {"(?>a)", "(?"},         {"a{1001}", "1000"},
        {"a\\Z", "\\Z"},             {"(?x) a", "(?"},        {"(*UTF)a", "(*"},
        {"a{,2}", "{,n}"},           {"\\h", "\\h"},          {"(?P=n)", "(?P=name)"},
        {"[[.a.]]", "collating"},    {"(a", "invalid regex"}, {"[\\S]", "\\S inside"},
    };
    rt_tensor *x = STRS(TU_SHAPE(1), "a");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        tu_run_fail(rx_node("StaticRegexFullMatch", "fm_bad", bad[i].pattern, NULL, -1), &x, 1,
                    1, MS_EINVAL, bad[i].needle);
    tu_run_fail(rx_node("StaticRegexReplace", "rr_bad", "a", "\\n", 1), &x, 1, 1, MS_EINVAL,
                "rewrite");
    /* accepted RE2 forms: named groups both ways, flags groups, \pL, \Q..\E, {2,1000} */
    static const char *const good[] = {"(?P<x>a)", "(?<x>a)", "(?i:A)", "(?s).", "\\pL",
                                       "\\Qa\\E", "a{1,1000}", "[]a]", "(?U)a+",
                                       "\\x{61}", "\\x{0061}", "\\p{Latin}"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        rt_tensor *o = tu_run1(rx_node("StaticRegexFullMatch", "fm_good", good[i], NULL, -1),
                               &x, 1);
        TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(1), 1);
        rt_tensor_unref(o);
    }
    /* \x{1001} is a character (U+1001), not a count above 1000 */
    rt_tensor *o =
        tu_run1(rx_node("StaticRegexFullMatch", "fm_x", "\\x{1001}", NULL, -1), &x, 1);
    TU_CHECK_INT(o, RT_DT_BOOL, TU_SHAPE(1), 0);
    rt_tensor_unref(o);
    rt_tensor_unref(x);
}
END_TEST

/* ---- Unique ---- */

START_TEST(test_unique) {
    /* tf.unique / tf.unique_with_counts: [1, 1, 2, 4, 4, 4, 7, 8, 8] */
    rt_tensor *x = TU_I32(TU_SHAPE(9), 1, 1, 2, 4, 4, 4, 7, 8, 8), *o[3];
    Tensorflow__NodeDef *d = tu_node_new("UniqueWithCounts", "uc");
    ck_assert_int_eq(tu_run(d, &x, 1, o, 3), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[0], RT_DT_INT32, TU_SHAPE(5), 1, 2, 4, 7, 8);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SHAPE(9), 0, 0, 1, 2, 2, 2, 3, 4, 4);
    TU_CHECK_INT(o[2], RT_DT_INT32, TU_SHAPE(5), 2, 1, 3, 1, 2);
    tu_unref(o, 3);
    /* out_idx int64 */
    d = tu_node_new("Unique", "u64");
    tu_attr_type(d, "out_idx", RT_DT_INT64);
    ck_assert_int_eq(tu_run(d, &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[1], RT_DT_INT64, TU_SHAPE(9), 0, 0, 1, 2, 2, 2, 3, 4, 4);
    tu_unref(o, 2);
    rt_tensor_unref(x);
    /* UniqueV2's examples: [[1, 0, 0], [1, 0, 0], [2, 0, 0]] along axis 0 and 1 */
    rt_tensor *in[2] = {TU_I64(TU_SHAPE(3, 3), 1, 0, 0, 1, 0, 0, 2, 0, 0),
                        TU_I32(TU_SHAPE(1), 0)};
    ck_assert_int_eq(tu_run(d = tu_node_new("UniqueV2", "u2"), in, 2, o, 2), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(2, 3), 1, 0, 0, 2, 0, 0);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SHAPE(3), 0, 0, 1);
    tu_unref(o, 2);
    rt_tensor_unref(in[1]);
    in[1] = TU_I64(TU_SHAPE(1), -1);
    ck_assert_int_eq(tu_run(d = tu_node_new("UniqueWithCountsV2", "u2c"), in, 2, o, 3), MS_OK);
    tu_node_free(d);
    TU_CHECK_INT(o[0], RT_DT_INT64, TU_SHAPE(3, 2), 1, 0, 1, 0, 2, 0);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SHAPE(3), 0, 1, 1);
    TU_CHECK_INT(o[2], RT_DT_INT32, TU_SHAPE(2), 1, 2);
    tu_unref(o, 3);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(1), 2);
    tu_run_fail(tu_node_new("UniqueV2", "u2_axis"), in, 2, 2, MS_EINVAL, "axis");
    tu_run_fail(tu_node_new("Unique", "u_rank"), in, 1, 2, MS_EINVAL, "1D");
    tu_unref(in, 2);
    /* strings by bytes; floats by value: -0 is 0, every NaN its own */
    x = STRS(TU_SHAPE(4), "a", "b", "a", "");
    ck_assert_int_eq(tu_run(d = tu_node_new("Unique", "us"), &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    CHECK_STRS(o[0], TU_SHAPE(3), "a", "b", "");
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SHAPE(4), 0, 1, 0, 2);
    tu_unref(o, 2);
    rt_tensor_unref(x);
    x = TU_F32(TU_SHAPE(5), 0.0f, -0.0f, NAN, NAN, 1.5f);
    ck_assert_int_eq(tu_run(d = tu_node_new("Unique", "uf"), &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    TU_CHECK_F32(o[0], TU_SHAPE(4), 0, 0.0f, NAN, NAN, 1.5f);
    TU_CHECK_INT(o[1], RT_DT_INT32, TU_SHAPE(5), 0, 0, 1, 2, 3);
    tu_unref(o, 2);
    rt_tensor_unref(x);
    /* empty */
    x = tu_t(RT_DT_INT32, TU_SHAPE(0), NULL, 0);
    ck_assert_int_eq(tu_run(d = tu_node_new("Unique", "ue"), &x, 1, o, 2), MS_OK);
    tu_node_free(d);
    tu_check_shape(o[0], RT_DT_INT32, TU_SHAPE(0));
    tu_check_shape(o[1], RT_DT_INT32, TU_SHAPE(0));
    tu_unref(o, 2);
    rt_tensor_unref(x);
}
END_TEST

/* ---- hostile sizes: string outputs and temporaries against a request budget ---- */

/* Runs op's kernel directly with a budget of `limit` bytes (outputs released
 * on failure, as the executor does). */
static ms_status run_budget(const char *op, Tensorflow__NodeDef *d, rt_tensor *const *in, int nin,
                            rt_tensor **out, int nout, uint64_t limit, ms_budget *bud) {
    kn_backend *be = kn_cpu_backend_new(1);
    const kn_kernel *k = kn_backend_kernel(be, op);
    ck_assert_ptr_nonnull(k);
    kn_node node = {.name = d->name, .op = op, .def = d, .attrs = &rt_nodedef_attrs,
                    .nin = nin, .nout = nout};
    ms_budget_init(bud, limit);
    kn_ctx ctx = {.nthreads = 1, .budget = bud};
    void *state = NULL;
    ms_status st = k->prepare ? k->prepare(&node, NULL, &state) : MS_OK;
    for (int i = 0; i < nout; i++) out[i] = NULL;
    if (st == MS_OK) st = k->compute(&ctx, &node, state, in, out);
    if (k->release) k->release(state);
    kn_backend_free(be);
    for (int i = 0; st != MS_OK && i < nout; i++) { /* as the executor does */
        rt_tensor_unref(out[i]);
        out[i] = NULL;
    }
    return st;
}

START_TEST(test_hostile_sizes) {
    /* a 1 MiB scalar joined onto 4096 strings would be 4 GiB: refused by a 64 MiB budget */
    enum { BIG = 1 << 20, N = 4096 };
    char *big = malloc(BIG + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', BIG);
    big[BIG] = 0;
    rt_str *many = malloc(sizeof(*many) * N);
    ck_assert_ptr_nonnull(many);
    for (int i = 0; i < N; i++) many[i] = (rt_str){(const uint8_t *)"s", 1};
    rt_tensor *in[2] = {NULL, tu_strings(TU_SCALAR, (const char *const[]){big}, 1)};
    ck_assert_int_eq(rt_tensor_new_strings(&TU_SHAPE(N), many, &in[0]), MS_OK);
    free(many);
    free(big);
    ms_budget bud;
    rt_tensor *o[3];
    Tensorflow__NodeDef *d = tu_node_new("StringJoin", "huge_join");
    ms_status st = run_budget("StringJoin", d, in, 2, o, 1, (uint64_t)64 << 20, &bud);
    ck_assert_int_eq(st, MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "huge_join") &&
                      strstr(ms_errmsg(), "max_request_memory_bytes"),
                  "%s", ms_errmsg());
    /* one string joined: fits */
    rt_tensor_unref(in[0]);
    in[0] = tu_strings(TU_SHAPE(1), (const char *const[]){"abc"}, 1);
    st = run_budget("StringJoin", d, in, 2, o, 1, (uint64_t)64 << 20, &bud);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    ck_assert_uint_eq(rt_tensor_strs(o[0])[0].len, 3 + BIG);
    rt_tensor_unref(o[0]);
    tu_node_free(d);
    tu_unref(in, 2);
    /* Unique's hash table is taken from the budget and given back */
    enum { NU = 1000000 };
    int32_t *v = malloc(sizeof(*v) * NU);
    for (int i = 0; i < NU; i++) v[i] = i % 1000;
    rt_tensor *x = tu_t(RT_DT_INT32, TU_SHAPE(NU), v, NU);
    free(v);
    d = tu_node_new("Unique", "huge_unique");
    st = run_budget("Unique", d, &x, 1, o, 2, (uint64_t)16 << 20, &bud);
    ck_assert_int_eq(st, MS_ENOMEM);
    ck_assert_msg(strstr(ms_errmsg(), "huge_unique"), "%s", ms_errmsg());
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    st = run_budget("Unique", d, &x, 1, o, 2, (uint64_t)256 << 20, &bud);
    ck_assert_msg(st == MS_OK, "%s", ms_errmsg());
    ck_assert_int_eq(o[0]->nelem, 1000);
    ck_assert_uint_eq(atomic_load(&bud.used), 0);
    tu_unref(o, 2);
    tu_node_free(d);
    rt_tensor_unref(x);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"concat", test_concat},
        {"split_delimiter", test_split_delimiter},
        {"split_whitespace", test_split_whitespace},
        {"normalizer", test_normalizer},
        {"join", test_join},
        {"length_case_strip", test_length_case_strip},
        {"substr", test_substr},
        {"split_v2", test_split_v2},
        {"as_string", test_as_string},
        {"hash_legacy", test_hash_legacy},
        {"regex_full_match", test_regex_full_match},
        {"regex_replace", test_regex_replace},
        {"regex_refused", test_regex_refused},
        {"unique", test_unique},
        {"hostile_sizes", test_hostile_sizes},
    };
    return tu_suite_main("kn_str", cases, sizeof(cases) / sizeof(cases[0]));
}
