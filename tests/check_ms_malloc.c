/* check_ms_malloc.c - ms_malloc_keep_heap (common/ms_malloc.c): after it, a
 * round of many small blocks (a gRPC message read into slices of a few KiB)
 * freed together leaves its pages with the process, so the next round takes
 * no page faults; glibc's default trims the heap top after each round and
 * the next one faults every page back in (issue 14). The settings the
 * environment gives win. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ms_malloc.h"

/* ASan's allocator stands in for glibc's and takes no mallopt settings: under
 * it (make test-asan) the tests only say so. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define SLICE 8192
#define NSLICES 96 /* 768 KiB per round, as a 531 KB request and its copies */
#define ROUNDS 40

static long minflt(void) {
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

/* Page faults per round of NSLICES blocks written and freed, after a first
 * round that may grow the heap. */
static double faults_per_round(void) {
    static char *p[NSLICES];
    long f0 = 0;
    for (int r = 0; r <= ROUNDS; r++) {
        if (r == 1) f0 = minflt();
        for (int i = 0; i < NSLICES; i++) {
            p[i] = malloc(SLICE);
            ck_assert_ptr_nonnull(p[i]);
            memset(p[i], r, SLICE);
        }
        for (int i = NSLICES - 1; i >= 0; i--) free(p[i]);
    }
    return (double)(minflt() - f0) / ROUNDS;
}

START_TEST(test_keep_heap) {
    if (UNDER_ASAN) {
        printf("keep_heap: not checked under ASan (its allocator takes no mallopt)\n");
        return;
    }
    unsetenv("MALLOC_TRIM_THRESHOLD_");
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
    ck_assert_int_eq(ms_malloc_keep_heap(), 2);
    double f = faults_per_round();
    printf("keep_heap: %.1f page faults per round of %d KiB\n", f, NSLICES * SLICE / 1024);
    /* trimmed, a round faults in its 192 pages again */
    ck_assert_msg(f < 8.0, "%.1f page faults per round: the heap was trimmed", f);
}
END_TEST

START_TEST(test_env_wins) {
    if (UNDER_ASAN) return;
    setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
    ck_assert_int_eq(ms_malloc_keep_heap(), 1);
    setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1);
    ck_assert_int_eq(ms_malloc_keep_heap(), 0);
    unsetenv("MALLOC_TRIM_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
}
END_TEST

/* The default, for the record (glibc's behaviour, not asserted). */
START_TEST(test_default_for_the_record) {
    printf("glibc default: %.1f page faults per round of %d KiB\n", faults_per_round(),
           NSLICES * SLICE / 1024);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ms_malloc");
    TCase *tc = tcase_create("core");
    /* each test in its own fresh process: mallopt is process-wide */
    tcase_add_test(tc, test_default_for_the_record);
    tcase_add_test(tc, test_keep_heap);
    tcase_add_test(tc, test_env_wins);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
