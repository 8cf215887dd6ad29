/* check_kn_place.c - per-node placement and copies (kernels/kn_place.c),
 * decided on the host: a device backend is whatever answers kernel(op), so
 * these run on any machine. The "device" here is a capability set (a table
 * of op names, as the CUDA backend's is) or the real CPU backend standing in
 * for a device that has every CPU op. */
#include <check.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "kn_place.h"
#include "util_node.h"

/* ---- a backend that has exactly the ops listed ---- */
static const kn_kernel g_caps[] = {
    {.op = "Conv2D"}, {.op = "BiasAdd"}, {.op = "Relu"}, {.op = "MatMul"}, {.op = NULL},
};
static const char *caps_name(kn_backend *b) {
    (void)b;
    return "caps";
}
static const kn_kernel *caps_kernel(kn_backend *b, const char *op) {
    (void)b;
    for (const kn_kernel *k = g_caps; k->op; k++)
        if (strcmp(k->op, op) == 0) return k;
    return NULL;
}
static kn_backend g_dev = {.api_version = KN_BACKEND_API_VERSION,
                           .iface = {.name = caps_name, .kernel = caps_kernel}};

#define IN(...) ((const kn_place_in[]){__VA_ARGS__})

/* x -> Conv2D -> BiasAdd -> Relu -> ArgMax, fetch ArgMax */
static const kn_place_node chain[] = {
    {"Placeholder", "", 1, 0, NULL},
    {"Conv2D", "", 0, 2, IN({0, 0}, {-1, 1})},
    {"BiasAdd", "", 0, 2, IN({1, 0}, {-1, 2})},
    {"Relu", "", 0, 1, IN({2, 0})},
    {"ArgMax", "", 0, 1, IN({3, 0})},
};

START_TEST(test_chain) {
    kn_placement p;
    ck_assert_int_eq(kn_place(chain, 5, IN({4, 0}), 1, &g_dev, &p), MS_OK);
    const kn_side want[5] = {KN_SIDE_HOST, KN_SIDE_DEVICE, KN_SIDE_DEVICE, KN_SIDE_DEVICE,
                             KN_SIDE_HOST};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(p.side[i], want[i]);
    ck_assert_int_eq(p.ndevice, 3);
    /* x to the device, feeds 1 and 2 (filter, bias) to the device, Relu back */
    ck_assert_int_eq(p.ncopies, 4);
    ck_assert_int_eq(p.copies[0].node, 0);
    ck_assert_int_eq(p.copies[0].to, KN_SIDE_DEVICE);
    ck_assert_int_eq(p.copies[0].first_consumer, 1);
    ck_assert_int_eq(p.copies[1].node, -1);
    ck_assert_int_eq(p.copies[1].out, 1);
    ck_assert_int_eq(p.copies[2].node, -1);
    ck_assert_int_eq(p.copies[2].out, 2);
    ck_assert_int_eq(p.copies[2].first_consumer, 2);
    ck_assert_int_eq(p.copies[3].node, 3);
    ck_assert_int_eq(p.copies[3].to, KN_SIDE_HOST);
    ck_assert_int_eq(p.copies[3].first_consumer, 4);
    char line[256];
    kn_placement_summary(&p, chain, "cuda:0", line, sizeof line);
    ck_assert_str_eq(line, "3 of 5 nodes on cuda:0, 4 copies; CPU fallback for ArgMax x1; "
                           "graph pins (hints): 0 GPU, 0 CPU");
    kn_placement_free(&p);
}
END_TEST

/* One device tensor read by three host nodes and fetched: one copy back. */
START_TEST(test_shared_copy_and_fetch) {
    const kn_place_node g[] = {
        {"MatMul", "", 0, 2, IN({-1, 0}, {-1, 1})},
        {"ArgMax", "", 0, 1, IN({0, 0})},
        {"TopKV2", "", 0, 1, IN({0, 0})},
        {"ArgMax", "", 0, 1, IN({0, 0})},
    };
    kn_placement p;
    ck_assert_int_eq(kn_place(g, 4, IN({0, 0}, {1, 0}), 2, &g_dev, &p), MS_OK);
    ck_assert_int_eq(p.ndevice, 1);
    ck_assert_int_eq(p.ncopies, 3); /* feeds 0 and 1 up, MatMul's output down once */
    ck_assert_int_eq(p.copies[2].node, 0);
    ck_assert_int_eq(p.copies[2].to, KN_SIDE_HOST);
    ck_assert_int_eq(p.copies[2].first_consumer, 1);
    char line[256];
    kn_placement_summary(&p, g, "cuda:1", line, sizeof line);
    ck_assert_str_eq(line, "1 of 4 nodes on cuda:1, 3 copies; CPU fallback for ArgMax x2, "
                           "TopKV2 x1; graph pins (hints): 0 GPU, 0 CPU");
    kn_placement_free(&p);
}
END_TEST

/* Pins are hints: counted, never obeyed against the backends. */
START_TEST(test_pins_are_hints) {
    const kn_place_node g[] = {
        {"Relu", "/job:localhost/replica:0/task:0/device:CPU:0", 0, 1, IN({-1, 0})},
        {"ArgMax", "/device:GPU:0", 0, 1, IN({0, 0})},
        {"Relu", "/gpu:1", 0, 1, IN({1, 0})},
        {"Relu", "/device:XLA_GPU:0", 0, 1, IN({2, 0})},
    };
    kn_placement p;
    ck_assert_int_eq(kn_place(g, 4, IN({3, 0}), 1, &g_dev, &p), MS_OK);
    ck_assert_int_eq(p.side[0], KN_SIDE_DEVICE);
    ck_assert_int_eq(p.side[1], KN_SIDE_HOST);
    ck_assert_int_eq(p.side[2], KN_SIDE_DEVICE);
    ck_assert_int_eq(p.pins_gpu, 2);
    ck_assert_int_eq(p.pins_cpu, 1);
    kn_placement_free(&p);
    /* no device backend: all on the host, no copies */
    ck_assert_int_eq(kn_place(g, 4, IN({3, 0}), 1, NULL, &p), MS_OK);
    ck_assert_int_eq(p.ndevice, 0);
    ck_assert_int_eq(p.ncopies, 0);
    kn_placement_free(&p);
}
END_TEST

/* The real CPU backend as the device: every CPU op is found there. */
START_TEST(test_backend_lookup) {
    kn_backend *cpu = kn_cpu_backend_new(1);
    ck_assert_ptr_nonnull(cpu);
    kn_placement p;
    ck_assert_int_eq(kn_place(chain, 5, IN({4, 0}), 1, cpu, &p), MS_OK);
    ck_assert_int_eq(p.side[0], KN_SIDE_HOST); /* host op stays */
    for (int i = 1; i < 5; i++) ck_assert_int_eq(p.side[i], KN_SIDE_DEVICE);
    ck_assert_int_eq(p.ncopies, 4); /* x, filter, bias up; ArgMax's output down */
    kn_placement_free(&p);
    kn_backend_free(cpu);
}
END_TEST

START_TEST(test_bad_edges) {
    const kn_place_node later[] = {
        {"Relu", "", 0, 1, IN({1, 0})},
        {"Relu", "", 0, 1, IN({-1, 0})},
    };
    kn_placement p;
    ck_assert_int_eq(kn_place(later, 2, NULL, 0, &g_dev, &p), MS_EINVAL);
    ck_assert_ptr_null(p.side);
    ck_assert_int_eq(kn_place(chain, 5, IN({9, 0}), 1, &g_dev, &p), MS_EINVAL);
    ck_assert_ptr_null(p.side);
}
END_TEST

START_TEST(test_summary_truncates) {
    kn_placement p;
    ck_assert_int_eq(kn_place(chain, 5, IN({4, 0}), 1, &g_dev, &p), MS_OK);
    char line[20];
    kn_placement_summary(&p, chain, "cuda:0", line, sizeof line);
    ck_assert_uint_eq(strlen(line), sizeof line - 1);
    ck_assert_str_eq(line + sizeof line - 4, "...");
    kn_placement_free(&p);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"chain", test_chain},
        {"shared_copy_and_fetch", test_shared_copy_and_fetch},
        {"pins_are_hints", test_pins_are_hints},
        {"backend_lookup", test_backend_lookup},
        {"bad_edges", test_bad_edges},
        {"summary_truncates", test_summary_truncates},
    };
    return tu_suite_main("kn_place", cases, sizeof(cases) / sizeof(cases[0]));
}
