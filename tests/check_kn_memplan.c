/* check_kn_memplan.c - the device-memory layout of a plan (kernels/kn_memplan):
 * offsets from sizes and lifetimes on hand-worked cases, the contract (no two
 * tensors alive at one step share bytes, 256-byte alignment, peak <= size <=
 * the sum) on random lifetimes, the refusals, and the positional hand-over of
 * the running step's regions (kn_devout_take). The layout of a real plan
 * (tests/util_convnet's network) is checked by check_kn_cuda_backend. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "kn_memplan.h"
#include "ms_status.h"
#include "util_node.h"

START_TEST(chain_reuses) {
    /* a chain a -> b -> c -> d, each read by the next step only: a and c
     * can share, b and d can share */
    kn_memplan_buf b[4] = {
        {.bytes = 1000, .first = 0, .last = 1},
        {.bytes = 1000, .first = 1, .last = 2},
        {.bytes = 1000, .first = 2, .last = 3},
        {.bytes = 1000, .first = 3, .last = 4},
    };
    uint64_t total = 0;
    ck_assert_int_eq(kn_memplan_layout(b, 4, &total), MS_OK);
    ck_assert_uint_eq(total, 2048); /* two aligned 1000-byte regions */
    ck_assert_uint_eq(b[0].offset, b[2].offset);
    ck_assert_uint_eq(b[1].offset, b[3].offset);
    ck_assert_uint_ne(b[0].offset, b[1].offset);
    ck_assert(kn_memplan_valid(b, 4));
    ck_assert_uint_eq(kn_memplan_peak(b, 4), 2048);
}
END_TEST

START_TEST(largest_first_and_gaps) {
    /* big lives 0..9 and goes first, at 0; the medium one (2..3) after it;
     * the small ones (0..1, 5..6), alive when the medium one is not, share
     * its place */
    kn_memplan_buf b[4] = {
        {.bytes = 4096, .first = 0, .last = 9},
        {.bytes = 256, .first = 0, .last = 1},
        {.bytes = 256, .first = 5, .last = 6},
        {.bytes = 512, .first = 2, .last = 3},
    };
    uint64_t total = 0;
    ck_assert_int_eq(kn_memplan_layout(b, 4, &total), MS_OK);
    ck_assert_uint_eq(b[0].offset, 0);
    ck_assert_uint_eq(b[3].offset, 4096);
    ck_assert_uint_eq(b[1].offset, 4096);
    ck_assert_uint_eq(b[2].offset, 4096);
    ck_assert_uint_eq(total, 4096 + 512);
    ck_assert(kn_memplan_valid(b, 4));
    /* a layout that puts the two overlapping ones together is refused by the check */
    b[1].offset = 0;
    ck_assert(!kn_memplan_valid(b, 4));
    b[1].offset = 4100; /* unaligned */
    ck_assert(!kn_memplan_valid(b, 4));
}
END_TEST

START_TEST(random_lifetimes) {
    srand(12345);
    for (int rep = 0; rep < 200; rep++) {
        int n = 1 + rand() % 60;
        kn_memplan_buf b[60];
        uint64_t sum = 0;
        for (int i = 0; i < n; i++) {
            int f = rand() % 40, len = rand() % 8;
            b[i] =
                (kn_memplan_buf){.bytes = (uint64_t)(rand() % 5000), .first = f, .last = f + len};
            sum += (b[i].bytes + 255) / 256 * 256;
        }
        uint64_t total = 0;
        ck_assert_int_eq(kn_memplan_layout(b, n, &total), MS_OK);
        ck_assert_msg(kn_memplan_valid(b, n), "rep %d: overlapping regions", rep);
        uint64_t peak = kn_memplan_peak(b, n);
        ck_assert_uint_ge(total, peak);
        ck_assert_uint_le(total, sum);
        for (int i = 0; i < n; i++)
            ck_assert_uint_le(b[i].offset + b[i].bytes, total);
    }
}
END_TEST

START_TEST(zero_and_bad) {
    kn_memplan_buf b[2] = {{.bytes = 0, .first = 0, .last = 5},
                           {.bytes = 10, .first = 2, .last = 2}};
    uint64_t total = 1;
    ck_assert_int_eq(kn_memplan_layout(b, 2, &total), MS_OK);
    ck_assert_uint_eq(total, 256);
    ck_assert_int_eq(kn_memplan_layout(b, 0, &total), MS_OK);
    ck_assert_uint_eq(total, 0);
    b[1].last = 1; /* ends before it starts */
    ck_assert_int_eq(kn_memplan_layout(b, 2, &total), MS_EINVAL);
}
END_TEST

START_TEST(devout_positional) {
    unsigned char arena[4096];
    kn_memplan_buf r[3] = {
        {.bytes = 100, .offset = 0}, {.bytes = 200, .offset = 256}, {.bytes = 100, .offset = 512}};
    ck_assert_ptr_null(kn_devout_take(100)); /* no planned step */
    int given = kn_devout_taken();
    kn_devout_begin(arena, r, 3);
    ck_assert_ptr_eq(kn_devout_take(100), arena);
    /* the second tensor differs from the sizing run's: no region, and the
     * third still gets only its own */
    ck_assert_ptr_null(kn_devout_take(100));
    ck_assert_ptr_eq(kn_devout_take(100), arena + 512);
    ck_assert_ptr_null(kn_devout_take(100)); /* more tensors than planned */
    kn_devout_end();
    ck_assert_ptr_null(kn_devout_take(100));
    ck_assert_int_eq(kn_devout_taken(), given + 2);
}
END_TEST

/* Temporaries: recorded while the executor records (planned or not), then
 * handed out positionally per step like the outputs, each only when its size
 * is the recorded one; kn_devout_end ends both. */
START_TEST(devtmp_positional) {
    unsigned char arena[4096];
    uint64_t rec[KN_DEVTMP_MAX_PER_STEP];
    ck_assert_ptr_null(kn_devtmp_take(64)); /* no step, not recording */
    kn_devtmp_record_begin();
    ck_assert_ptr_null(kn_devtmp_take(64));
    ck_assert_ptr_null(kn_devtmp_take(1000));
    ck_assert_int_eq(kn_devtmp_record_end(rec, KN_DEVTMP_MAX_PER_STEP), 2);
    ck_assert_uint_eq(rec[0], 64);
    ck_assert_uint_eq(rec[1], 1000);
    ck_assert_ptr_null(kn_devtmp_take(64));
    ck_assert_int_eq(kn_devtmp_record_end(rec, KN_DEVTMP_MAX_PER_STEP), 0); /* stopped */
    kn_memplan_buf out[1] = {{.bytes = 100, .offset = 0}};
    kn_memplan_buf tmp[2] = {{.bytes = 64, .offset = 256}, {.bytes = 1000, .offset = 512}};
    int given = kn_devtmp_taken(), outs = kn_devout_taken();
    kn_devout_step(arena, out, 1, tmp, 2);
    ck_assert_ptr_eq(kn_devtmp_take(64), arena + 256);
    ck_assert_ptr_eq(kn_devout_take(100), arena);
    ck_assert_ptr_null(kn_devtmp_take(999)); /* not the recorded size */
    ck_assert_ptr_null(kn_devtmp_take(64));  /* more than planned */
    kn_devout_end();
    ck_assert_ptr_null(kn_devtmp_take(64));
    /* a step with temporaries only */
    kn_devout_step(arena, NULL, 0, tmp + 1, 1);
    ck_assert_ptr_null(kn_devout_take(100));
    ck_assert_ptr_eq(kn_devtmp_take(1000), arena + 512);
    kn_devout_end();
    ck_assert_int_eq(kn_devtmp_taken(), given + 2);
    ck_assert_int_eq(kn_devout_taken(), outs + 1);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"chain_reuses", chain_reuses},
        {"largest_first_and_gaps", largest_first_and_gaps},
        {"random_lifetimes", random_lifetimes},
        {"zero_and_bad", zero_and_bad},
        {"devout_positional", devout_positional},
        {"devtmp_positional", devtmp_positional},
    };
    return tu_suite_main("kn_memplan", cases, sizeof(cases) / sizeof(cases[0]));
}
