/* check_example.c - ParseExample / ParseExampleV2 (runtime/graph/rt_example.c)
 * on tf.Example bytes built here field by field from the proto definition
 * (packed and unpacked lists, negative int64 varints, repeated map keys,
 * defaults), their error messages, and every truncation of a valid example
 * (each must give a clean error or a result, never a crash: run under ASan). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ops.h"
#include "util_node.h"

typedef struct {
    uint8_t b[512];
    size_t n;
} buf;

static void put_varint(buf *o, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
}
static void put_ld(buf *o, int field, const buf *m) { /* length-delimited field */
    put_varint(o, (uint64_t)field << 3 | 2);
    put_varint(o, m->n);
    memcpy(o->b + o->n, m->b, m->n);
    o->n += m->n;
}
static void put_bytes(buf *o, int field, const char *s) {
    buf m = {.n = strlen(s)};
    memcpy(m.b, s, m.n);
    put_ld(o, field, &m);
}
/* Feature of kind 1 bytes / 2 float / 3 int64 from an already built list. */
static void put_entry(buf *features, const char *key, int kind, const buf *list) {
    buf feat = {.n = 0}, entry = {.n = 0};
    put_ld(&feat, kind, list);
    put_bytes(&entry, 1, key);
    put_ld(&entry, 2, &feat);
    put_ld(features, 1, &entry);
}
static void floats_packed(buf *l, int n, const float *v) {
    buf p = {.n = 4 * (size_t)n};
    memcpy(p.b, v, p.n);
    put_ld(l, 1, &p);
}
static void float_unpacked(buf *l, float v) {
    put_varint(l, 1 << 3 | 5);
    memcpy(l->b + l->n, &v, 4);
    l->n += 4;
}
static void ints_packed(buf *l, int n, const int64_t *v) {
    buf p = {.n = 0};
    for (int i = 0; i < n; i++) put_varint(&p, (uint64_t)v[i]);
    put_ld(l, 1, &p);
}
static void example(buf *ex, const buf *features) {
    ex->n = 0;
    put_ld(ex, 1, features);
}

static rt_tensor *strings(rt_shape s, const buf *const *b, int n) {
    rt_str v[4];
    for (int i = 0; i < n; i++) v[i] = (rt_str){b[i]->b, b[i]->n};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&s, v, &t), MS_OK);
    return t;
}
static rt_tensor *str1(const char *s) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_scalar_string(s, strlen(s), &t), MS_OK);
    return t;
}

/* ParseExample with dense features x float [2], id int64 [1], s string [1]. */
static Tensorflow__NodeDef *pe_node(const char *name) {
    Tensorflow__NodeDef *d = tu_node_new("ParseExample", name);
    tu_attr_i(d, "Nsparse", 0);
    tu_attr_i(d, "Ndense", 3);
    tu_attr_typelist(d, "Tdense", 3, (const rt_dtype[]){RT_DT_FLOAT, RT_DT_INT64, RT_DT_STRING});
    tu_attr_shapelist(d, "dense_shapes", 3, (const int[]){1, 1, 1}, (const int64_t[]){2, 1, 1});
    return d;
}

static void ex0(buf *ex) { /* x = [1.5, -2] packed, id = [-3], s = ["ab"] */
    buf f = {.n = 0}, l = {.n = 0};
    floats_packed(&l, 2, (const float[]){1.5f, -2.0f});
    put_entry(&f, "x", 2, &l);
    l.n = 0;
    ints_packed(&l, 1, (const int64_t[]){-3});
    put_entry(&f, "id", 3, &l);
    l.n = 0;
    put_bytes(&l, 1, "ab");
    put_entry(&f, "s", 1, &l);
    example(ex, &f);
}

static void ex1(buf *ex) { /* x = [9, 9] then again x = [3, 4] unpacked; no id; s = ["c"] */
    buf f = {.n = 0}, l = {.n = 0};
    floats_packed(&l, 2, (const float[]){9, 9});
    put_entry(&f, "x", 2, &l);
    l.n = 0;
    float_unpacked(&l, 3);
    float_unpacked(&l, 4);
    put_entry(&f, "x", 2, &l);
    l.n = 0;
    put_bytes(&l, 1, "c");
    put_entry(&f, "s", 1, &l);
    example(ex, &f);
}

static void pe_inputs(rt_tensor **in, rt_tensor *ser, rt_tensor *id_default) {
    rt_shape e = {.rank = 1, .dim = {0}};
    rt_tensor *none = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &e, &none), MS_OK);
    rt_tensor *fe = NULL, *se = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &e, &fe), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &e, &se), MS_OK);
    in[0] = ser, in[1] = none;
    in[2] = str1("x"), in[3] = str1("id"), in[4] = str1("s");
    in[5] = fe, in[6] = id_default, in[7] = se;
}

START_TEST(test_parse_example) {
    tu_prefer_table(rt_ops_example_kernels);
    buf a, b;
    ex0(&a);
    ex1(&b);
    rt_tensor *in[8], *out[3] = {NULL};
    pe_inputs(in, strings(TU_SHAPE(2), (const buf *[]){&a, &b}, 2), TU_I64(TU_SHAPE(1), -1));
    Tensorflow__NodeDef *d = pe_node("pe");
    ck_assert_int_eq(tu_run(d, in, 8, out, 3), MS_OK);
    tu_node_free(d);
    TU_CHECK_F32(out[0], TU_SHAPE(2, 2), 0, 1.5f, -2.0f, 3.0f, 4.0f);
    TU_CHECK_INT(out[1], RT_DT_INT64, TU_SHAPE(2, 1), -3, -1);
    tu_check_shape(out[2], RT_DT_STRING, TU_SHAPE(2, 1));
    const rt_str *s = out[2]->data;
    ck_assert(s[0].len == 2 && memcmp(s[0].data, "ab", 2) == 0);
    ck_assert(s[1].len == 1 && memcmp(s[1].data, "c", 1) == 0);
    tu_unref(out, 3);
    /* id required (empty default): example 1 lacks it. */
    rt_tensor_unref(in[6]);
    rt_shape e = {.rank = 1, .dim = {0}};
    ck_assert_int_eq(rt_tensor_new(RT_DT_INT64, &e, &in[6]), MS_OK);
    tu_run_fail(pe_node("pe_req"), in, 8, 3, MS_EINVAL,
                "Feature: id (data type: int64) is required but could not be found");
    /* x given 2 values where the shape wants 3. */
    d = tu_node_new("ParseExample", "pe_count");
    tu_attr_i(d, "Nsparse", 0);
    tu_attr_i(d, "Ndense", 1);
    tu_attr_typelist(d, "Tdense", 1, (const rt_dtype[]){RT_DT_FLOAT});
    tu_attr_shapelist(d, "dense_shapes", 1, (const int[]){1}, (const int64_t[]){3});
    rt_tensor *in1[4] = {in[0], in[1], in[2], in[5]};
    tu_run_fail(d, in1, 4, 1, MS_EINVAL, "Number of float values != expected");
    /* id parsed as float: wrong kind. */
    d = tu_node_new("ParseExample", "pe_kind");
    tu_attr_i(d, "Nsparse", 0);
    tu_attr_i(d, "Ndense", 1);
    tu_attr_typelist(d, "Tdense", 1, (const rt_dtype[]){RT_DT_FLOAT});
    tu_attr_shapelist(d, "dense_shapes", 1, (const int[]){1}, (const int64_t[]){1});
    rt_tensor *in2[4] = {in[0], in[1], in[3], in[5]};
    tu_run_fail(d, in2, 4, 1, MS_EINVAL, "Data types don't match");
    tu_unref(in, 8);
    tu_prefer_table(NULL);
}
END_TEST

START_TEST(test_truncations) {
    tu_prefer_table(rt_ops_example_kernels);
    buf a;
    ex0(&a);
    int errors = 0;
    for (size_t cut = 0; cut < a.n; cut++) {
        buf t = a;
        t.n = cut;
        rt_tensor *in[8], *out[3] = {NULL};
        pe_inputs(in, strings(TU_SHAPE(1), (const buf *[]){&t}, 1), TU_I64(TU_SHAPE(1), 0));
        Tensorflow__NodeDef *d = pe_node("pe_cut");
        /* x has no default: every cut either fails cleanly or lacks x. */
        ms_status st = tu_run(d, in, 8, out, 3);
        tu_node_free(d);
        ck_assert_int_eq(st, MS_EINVAL);
        errors++;
        tu_unref(out, 3);
        tu_unref(in, 8);
    }
    ck_assert_int_eq(errors, (int)a.n);
    /* Garbage: a length running past the end, a group wire type. */
    const buf bad[2] = {{.b = {0x0a, 0x7f, 0x0a}, .n = 3}, {.b = {0x0b, 0x0c}, .n = 2}};
    for (int i = 0; i < 2; i++) {
        rt_tensor *in[8];
        pe_inputs(in, strings(TU_SHAPE(1), (const buf *[]){&bad[i]}, 1), TU_I64(TU_SHAPE(1), 0));
        tu_run_fail(pe_node("pe_bad"), in, 8, 3, MS_EINVAL, "could not parse example input");
        tu_unref(in, 8);
    }
    tu_prefer_table(NULL);
}
END_TEST

START_TEST(test_parse_example_v2_scalar) {
    tu_prefer_table(rt_ops_example_kernels);
    buf a;
    ex0(&a);
    rt_shape e = {.rank = 1, .dim = {0}};
    rt_tensor *in[6];
    in[0] = strings(TU_SCALAR, (const buf *[]){&a}, 1);
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &e, &in[1]), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &e, &in[2]), MS_OK);
    buf kx = {.b = "x", .n = 1};
    in[3] = strings(TU_SHAPE(1), (const buf *[]){&kx}, 1);
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &e, &in[4]), MS_OK);
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &e, &in[5]), MS_OK);
    Tensorflow__NodeDef *d = tu_node_new("ParseExampleV2", "pe2");
    tu_attr_i(d, "num_sparse", 0);
    tu_attr_typelist(d, "Tdense", 1, (const rt_dtype[]){RT_DT_FLOAT});
    tu_attr_shapelist(d, "dense_shapes", 1, (const int[]){1}, (const int64_t[]){2});
    rt_tensor *o = tu_run1(d, in, 6);
    TU_CHECK_F32(o, TU_SHAPE(2), 0, 1.5f, -2.0f);
    rt_tensor_unref(o);
    tu_unref(in, 6);
    tu_prefer_table(NULL);
}
END_TEST

/* An empty serialized Example whose bytes are NULL (rt_tensor_new's empty
 * strings, as a run on zeros feeds them): no pointer arithmetic on NULL
 * (UBSan stopped fuzz_model_folder there in `make test-asan`'s build), the
 * required feature x is reported missing. */
START_TEST(test_empty_example_null_bytes) {
    tu_prefer_table(rt_ops_example_kernels);
    rt_shape one = {.rank = 1, .dim = {1}};
    rt_tensor *ser = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_STRING, &one, &ser), MS_OK);
    ck_assert_ptr_null(((const rt_str *)ser->data)[0].data);
    rt_tensor *in[8];
    pe_inputs(in, ser, TU_I64(TU_SHAPE(1), 0));
    tu_run_fail(pe_node("pe_empty"), in, 8, 3, MS_EINVAL,
                "Feature: x (data type: float) is required but could not be found");
    tu_unref(in, 8);
    tu_prefer_table(NULL);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"empty_example_null_bytes", test_empty_example_null_bytes},
        {"parse_example", test_parse_example},
        {"truncations", test_truncations},
        {"parse_example_v2_scalar", test_parse_example_v2_scalar},
    };
    return tu_suite_main("example", cases, sizeof(cases) / sizeof(cases[0]));
}
