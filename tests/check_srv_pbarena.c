/* check_srv_pbarena.c - the protobuf-c arena of server/transport/srv_pbarena.c and the
 * no-copy hand-over of a request's large bytes fields (a DICOM file) into a
 * DT_STRING tensor (srv_pbarena_keep with rt_tensor_from_request_proto), and
 * the region that large values land in (srv_pbarena_set_region), from a
 * buffer pool that hands the same memory to the next request.
 * Run under ASan, a chunk freed twice, read after its free or never freed
 * fails these tests. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_ctx.h"
#include "rt_tensor_proto.h"
#include "srv_pbarena.h"
#include "tf_framework.pb-c.h"
#include "util_node.h"

/* A packed TensorProto of DT_STRING, shape [n], one string_val per size. */
static uint8_t *pack_strings(const size_t *sizes, size_t n, size_t *len) {
    Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__TensorShapeProto sh = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dims[1] = {&dim};
    dim.size = (int64_t)n;
    sh.n_dim = 1;
    sh.dim = dims;
    p.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
    p.tensor_shape = &sh;
    ProtobufCBinaryData *v = calloc(n, sizeof(*v));
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++) {
        v[i].len = sizes[i];
        v[i].data = malloc(sizes[i] ? sizes[i] : 1);
        ck_assert_ptr_nonnull(v[i].data);
        for (size_t k = 0; k < sizes[i]; k++)
            v[i].data[k] = (uint8_t)(k * 7 + i * 13 + 1);
    }
    p.n_string_val = n;
    p.string_val = v;
    *len = tensorflow__tensor_proto__get_packed_size(&p);
    uint8_t *buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    tensorflow__tensor_proto__pack(&p, buf);
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
    free(v);
    return buf;
}

static int bytes_ok(const uint8_t *d, size_t len, size_t i) {
    for (size_t k = 0; k < len; k++)
        if (d[k] != (uint8_t)(k * 7 + i * 13 + 1)) return 0;
    return 1;
}

static Tensorflow__TensorProto *unpack(srv_pbarena *a, const uint8_t *buf, size_t len) {
    Tensorflow__TensorProto *p = tensorflow__tensor_proto__unpack(&a->alloc, len, buf);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A DICOM-sized value: the tensor points at the unpacked bytes themselves,
 * which outlive the arena and go with the tensor's last reference. */
START_TEST(test_keep_large_value) {
    size_t sizes[1] = {300000}, len;
    uint8_t *buf = pack_strings(sizes, 1, &len);
    max_align_t stack[256 / sizeof(max_align_t)];
    srv_pbarena a;
    srv_pbarena_init(&a, stack, sizeof stack);
    Tensorflow__TensorProto *p = unpack(&a, buf, len);
    const uint8_t *unpacked = p->string_val[0].data;
    rt_strkeep keep = {srv_pbarena_keep, &a};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_from_request_proto(p, NULL, &keep, &t), MS_OK);
    const rt_str *s = rt_tensor_strs(t);
    ck_assert_ptr_eq(s[0].data, unpacked); /* not copied */
    ck_assert_uint_eq(s[0].len, sizes[0]);
    srv_pbarena_release(&a); /* the request dies; the tensor keeps its bytes */
    ck_assert(bytes_ok(s[0].data, s[0].len, 0));
    rt_tensor_unref(t); /* frees the chunk (ASan: no leak, no double free) */
    free(buf);
}
END_TEST

/* Several large values of one tensor (a batch of files): one owner for all. */
START_TEST(test_keep_batch) {
    size_t sizes[3] = {20000, 70000, 16384}, len;
    uint8_t *buf = pack_strings(sizes, 3, &len);
    srv_pbarena a;
    srv_pbarena_init(&a, NULL, 0);
    Tensorflow__TensorProto *p = unpack(&a, buf, len);
    rt_strkeep keep = {srv_pbarena_keep, &a};
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_from_request_proto(p, NULL, &keep, &t), MS_OK);
    const rt_str *s = rt_tensor_strs(t);
    for (size_t i = 0; i < 3; i++)
        ck_assert_ptr_eq(s[i].data, p->string_val[i].data);
    srv_pbarena_release(&a);
    for (size_t i = 0; i < 3; i++)
        ck_assert(bytes_ok(s[i].data, s[i].len, i));
    rt_tensor_unref(t);
    free(buf);
}
END_TEST

/* A small value shares a chunk with the rest of the message: it is copied,
 * and so is a tensor mixing small and large values; the arena keeps and
 * frees everything. */
START_TEST(test_small_values_copied) {
    size_t small[1] = {100}, mixed[2] = {50000, 10}, len1, len2;
    uint8_t *b1 = pack_strings(small, 1, &len1), *b2 = pack_strings(mixed, 2, &len2);
    srv_pbarena a;
    srv_pbarena_init(&a, NULL, 0);
    Tensorflow__TensorProto *p1 = unpack(&a, b1, len1), *p2 = unpack(&a, b2, len2);
    ck_assert_ptr_null(srv_pbarena_keep(&a, p1->string_val, 1));
    ck_assert_ptr_null(srv_pbarena_keep(&a, p2->string_val, 2));
    rt_strkeep keep = {srv_pbarena_keep, &a};
    rt_tensor *t1 = NULL, *t2 = NULL;
    ck_assert_int_eq(rt_tensor_from_request_proto(p1, NULL, &keep, &t1), MS_OK);
    ck_assert_int_eq(rt_tensor_from_request_proto(p2, NULL, &keep, &t2), MS_OK);
    ck_assert_ptr_ne(rt_tensor_strs(t1)[0].data, p1->string_val[0].data);
    ck_assert_ptr_ne(rt_tensor_strs(t2)[0].data, p2->string_val[0].data);
    /* The large value, alone now, can still be taken after a refusal. */
    rt_buf *b = srv_pbarena_keep(&a, p2->string_val, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(srv_pbarena_keep(&a, p2->string_val, 1)); /* taken once only */
    srv_pbarena_release(&a);
    ck_assert(bytes_ok(rt_tensor_strs(t1)[0].data, 100, 0));
    ck_assert(bytes_ok(rt_tensor_strs(t2)[0].data, 50000, 0));
    ck_assert(bytes_ok(rt_tensor_strs(t2)[1].data, 10, 1));
    rt_buf_unref(b);
    rt_tensor_unref(t1);
    rt_tensor_unref(t2);
    free(b1);
    free(b2);
}
END_TEST

/* Without keep (NULL) large values are copied as before. */
START_TEST(test_no_keep_copies) {
    size_t sizes[1] = {40000}, len;
    uint8_t *buf = pack_strings(sizes, 1, &len);
    srv_pbarena a;
    srv_pbarena_init(&a, NULL, 0);
    Tensorflow__TensorProto *p = unpack(&a, buf, len);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_from_request_proto(p, NULL, NULL, &t), MS_OK);
    ck_assert_ptr_ne(rt_tensor_strs(t)[0].data, p->string_val[0].data);
    srv_pbarena_release(&a);
    ck_assert(bytes_ok(rt_tensor_strs(t)[0].data, 40000, 0));
    rt_tensor_unref(t);
    free(buf);
}
END_TEST

static rt_buf *pool_region(void *pool, size_t size) {
    return kn_pool_get(pool, size);
}

static rt_buf *no_region(void *ctx, size_t size) {
    (void)ctx;
    (void)size;
    return NULL;
}

/* Large values go into the region, in order, and the tensor takes them
 * without a copy; the region outlives the arena while the tensor lives,
 * then goes back to the pool, and the next request's values land in the
 * same memory. */
START_TEST(test_region_reused) {
    size_t sizes[3] = {20000, 70000, 16384}, len;
    uint8_t *buf = pack_strings(sizes, 3, &len);
    kn_pool *pool = kn_pool_new();
    kn_pool_set_limits(pool, 64 << 20, -1);
    const void *first = NULL;
    for (int round = 0; round < 2; round++) {
        srv_pbarena a;
        srv_pbarena_init(&a, NULL, 0);
        srv_pbarena_set_region(&a, pool_region, pool, len + len / 512 + 64);
        Tensorflow__TensorProto *p = unpack(&a, buf, len);
        ck_assert_ptr_nonnull(a.region);
        const uint8_t *lo = a.region->data, *hi = lo + a.region->size;
        if (round == 0) first = lo;
        else ck_assert_ptr_eq(lo, first); /* the pool's buffer again */
        rt_strkeep keep = {srv_pbarena_keep, &a};
        rt_tensor *t = NULL;
        ck_assert_int_eq(rt_tensor_from_request_proto(p, NULL, &keep, &t), MS_OK);
        const rt_str *s = rt_tensor_strs(t);
        for (size_t i = 0; i < 3; i++) {
            ck_assert_ptr_eq(s[i].data, p->string_val[i].data); /* not copied */
            ck_assert(s[i].data >= lo && s[i].data + s[i].len <= hi);
        }
        srv_pbarena_release(&a);
        ck_assert_uint_eq(kn_pool_free_bytes(pool), 0); /* the tensor holds it */
        for (size_t i = 0; i < 3; i++)
            ck_assert(bytes_ok(s[i].data, s[i].len, i));
        rt_tensor_unref(t);
        ck_assert_uint_gt(kn_pool_free_bytes(pool), 0); /* back in the pool */
    }
    kn_pool_release(pool);
    free(buf);
}
END_TEST

/* A region too small for every value: the rest go to heap chunks, a tensor
 * mixing both is copied; without a region (fn gives none) chunks as before. */
START_TEST(test_region_full_or_absent) {
    size_t sizes[2] = {20000, 20000}, len;
    uint8_t *buf = pack_strings(sizes, 2, &len);
    kn_pool *pool = kn_pool_new();
    for (int absent = 0; absent < 2; absent++) {
        srv_pbarena a;
        srv_pbarena_init(&a, NULL, 0);
        srv_pbarena_set_region(&a, absent ? no_region : pool_region, pool, 30000);
        Tensorflow__TensorProto *p = unpack(&a, buf, len);
        rt_strkeep keep = {srv_pbarena_keep, &a};
        rt_tensor *t = NULL;
        ck_assert_int_eq(rt_tensor_from_request_proto(p, NULL, &keep, &t), MS_OK);
        const rt_str *s = rt_tensor_strs(t);
        if (absent) {
            ck_assert_ptr_null(a.region);
            ck_assert_ptr_eq(s[0].data, p->string_val[0].data); /* chunks, taken */
        } else {
            ck_assert_ptr_nonnull(a.region);
            ck_assert_ptr_ne(s[0].data, p->string_val[0].data); /* mixed: copied */
        }
        srv_pbarena_release(&a);
        for (size_t i = 0; i < 2; i++)
            ck_assert(bytes_ok(s[i].data, s[i].len, i));
        rt_tensor_unref(t);
    }
    kn_pool_release(pool);
    free(buf);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"keep_large_value", test_keep_large_value},
        {"keep_batch", test_keep_batch},
        {"small_values_copied", test_small_values_copied},
        {"no_keep_copies", test_no_keep_copies},
        {"region_reused", test_region_reused},
        {"region_full_or_absent", test_region_full_or_absent},
    };
    return tu_suite_main("srv_pbarena", cases, sizeof(cases) / sizeof(cases[0]));
}
