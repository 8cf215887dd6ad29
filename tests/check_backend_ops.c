/* check_backend_ops.c - the both-backends op test's CPU half: every case of
 * the op table (util_opcases: each op of the CUDA backend's table on odd,
 * broadcast, scalar and empty shapes, SAME / VALID / strided / dilated
 * windows, constant and computed arguments, a ConcatV2 of 2,000 inputs) run
 * on the CPU kernels and on the test device with exactly the CUDA table's
 * ops (util_testdev: the CPU kernels over memory of its own kind, so a
 * missing copy gives garbage), compared with the op's tolerance; and the
 * table covers every op of the CUDA table but the ones it names as left out.
 * The GPU half, the same table against the CUDA backend:
 * check_cuda_backend_ops (label gpu). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_cuda_backend.h"
#include "util_node.h"
#include "util_opcases.h"
#include "util_testdev.h"

static kn_backend *g_cpu, *g_dev;
static ut_opcase *g_cases;
static int g_ncases;

static void setup(void) {
    g_cpu = kn_cpu_backend_new(1);
    ut_testdev_setup(g_cpu, 11, 0xC3);
    g_dev = ut_testdev_new("testdev", kn_cuda_backend_ops(), 0);
    g_ncases = ut_opcases(&g_cases);
}

static void teardown(void) {
    ut_opcases_free(g_cases, g_ncases);
    kn_backend_free(g_dev);
    kn_backend_free(g_cpu);
}

/* Every case on the CPU and on the test device: the same answers. */
START_TEST(cases_match_cpu) {
    memset(&ut_dev, 0, sizeof ut_dev);
    for (int i = 0; i < g_ncases; i++)
        ut_opcase_check(g_cpu, g_dev, &g_cases[i]);
    ck_assert_int_eq(ut_dev.runs, g_ncases); /* each ran the device's kernel */
    ck_assert_int_ge(ut_dev.h2d, g_ncases);
    printf("backend_ops: %d cases on the test device\n", g_ncases);
}
END_TEST

/* Each op of the CUDA table has a case (so a new op cannot skip the test)
 * unless the table names why it is left out; each case's op is in the
 * CUDA table; the table has empty, broadcast and 2,000-input cases. */
START_TEST(table_covers_cuda_ops) {
    const char *const *ops = kn_cuda_backend_ops();
    for (int i = 0; ops[i]; i++) {
        int n = 0, skipped = 0;
        for (int c = 0; c < g_ncases; c++)
            n += strcmp(g_cases[c].def->op, ops[i]) == 0;
        for (int s = 0; ut_opcases_skipped[s]; s += 2)
            skipped |= strcmp(ut_opcases_skipped[s], ops[i]) == 0;
        ck_assert_msg(n > 0 || skipped, "op %s of the CUDA table has no case", ops[i]);
        ck_assert_msg(!(n > 0 && skipped), "op %s both has cases and is left out", ops[i]);
    }
    int empty = 0, big = 0;
    for (int c = 0; c < g_ncases; c++) {
        ck_assert_msg(kn_cuda_backend_has_op(g_cases[c].def->op), "case %s: not a CUDA table op",
                      g_cases[c].name);
        for (int i = 0; i < g_cases[c].nin; i++)
            empty += g_cases[c].in[i]->nelem == 0;
        big |= g_cases[c].nin > 2000;
    }
    ck_assert_int_ge(empty, 10);
    ck_assert(big);
}
END_TEST

int main(void) {
    Suite *s = suite_create("backend_ops");
    TCase *tc = tcase_create("cases");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, cases_match_cpu);
    tcase_add_test(tc, table_covers_cuda_ops);
    suite_add_tcase(s, tc);
    return tu_suite_run(s);
}
