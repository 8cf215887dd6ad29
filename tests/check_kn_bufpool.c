/* check_kn_bufpool.c - the kernels' output buffer pool (kernels/kn_ctx.c):
 * reuse of a returned buffer, the byte cap on free buffers, the idle trim by
 * the pool's trimmer thread, a reuse window that follows the pause between
 * requests and learns a slow client's come-back time, that the process's resident memory comes
 * back near its pre-burst figure after a burst of large buffers, and the
 * default byte cap: one request's budget, bounded by the memory limit. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kn_ctx.h"
#include "ms_memlimit.h"
#include "util_node.h"

#define MIB ((size_t)1 << 20)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Resident set size of this process in bytes, from /proc/self/statm. */
static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size = 0, res = 0;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &res), 2);
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

START_TEST(test_reuse) {
    kn_pool *p = kn_pool_new();
    kn_pool_set_limits(p, 64 * MIB, -1);
    rt_buf *a = kn_pool_get(p, 4096);
    void *data = a->data;
    rt_buf_unref(a);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 4096);
    rt_buf *b = kn_pool_get(p, 4000);
    ck_assert_ptr_eq(b->data, data);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
    rt_buf_unref(b);
    kn_pool_release(p);
}
END_TEST

START_TEST(test_byte_cap) {
    kn_pool *p = kn_pool_new();
    kn_pool_set_limits(p, 10 * MIB, -1);
    rt_buf *held[8];
    for (int i = 0; i < 8; i++) held[i] = kn_pool_get(p, 3 * MIB);
    for (int i = 0; i < 8; i++) rt_buf_unref(held[i]);
    /* Three 3 MiB buffers fit under 10 MiB, the other five are freed. */
    ck_assert_uint_eq(kn_pool_free_bytes(p), 9 * MIB);
    /* A buffer larger than the whole cap is never kept. */
    rt_buf *big = kn_pool_get(p, 11 * MIB);
    rt_buf_unref(big);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 9 * MIB);
    kn_pool_release(p);
}
END_TEST

START_TEST(test_idle_trim) {
    kn_pool *p = kn_pool_new();
    kn_pool_set_limits(p, 64 * MIB, 100);
    rt_buf *a = kn_pool_get(p, MIB), *b = kn_pool_get(p, 2 * MIB);
    rt_buf_unref(a);
    rt_buf_unref(b);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 3 * MIB);
    /* The trimmer runs every 250 ms; allow for a loaded machine. */
    for (int i = 0; i < 100 && kn_pool_free_bytes(p) > 0; i++) sleep_ms(50);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
    /* A buffer in use is never trimmed: still valid and reusable after. */
    rt_buf *c = kn_pool_get(p, MIB);
    memset(c->data, 1, MIB);
    sleep_ms(400);
    ck_assert_int_eq(((unsigned char *)c->data)[MIB - 1], 1);
    rt_buf_unref(c);
    kn_pool_release(p);
}
END_TEST

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The reuse window follows the pause between gets: a buffer freed after a
 * 1 s pause is kept past the 100 ms floor (when checked well within twice
 * that pause), and still goes back once the window ends (as it does in a
 * pool whose longest window is its floor). */
START_TEST(test_window_follows_rate) {
    for (int fixed = 0; fixed < 2; fixed++) {
        kn_pool *p = kn_pool_new();
        kn_pool_set_limits(p, 64 * MIB, 100);
        kn_pool_set_idle_max(p, fixed ? 100 : 10000);
        rt_buf *a = kn_pool_get(p, MIB);
        sleep_ms(1000);
        rt_buf *b = kn_pool_get(p, MIB);
        rt_buf_unref(a);
        rt_buf_unref(b);
        long t0 = now_ms();
        sleep_ms(600);
        size_t kept = kn_pool_free_bytes(p);
        long waited = now_ms() - t0;
        if (!fixed && waited < 1500)
            ck_assert_msg(kept == 2 * MIB, "freed %ld ms after a 1 s pause: %zu bytes kept",
                          waited, kept);
        for (int i = 0; i < 400 && kn_pool_free_bytes(p) > 0; i++) sleep_ms(50);
        ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
        kn_pool_release(p);
    }
}
END_TEST

/* A buffer the trimmer freed and that is asked for again later teaches the
 * pool the client's come-back time: the next one of that size is kept for
 * twice it (here 1.5 s after a 100 ms floor and a 1 s longest rate window),
 * and still goes back once that window ends, also when many smaller buffers
 * were freed in between. Not learned where a fixed
 * window is asked for (longest window <= floor). */
START_TEST(test_window_learns_come_back) {
    for (int fixed = 0; fixed < 2; fixed++) {
        kn_pool *p = kn_pool_new();
        kn_pool_set_limits(p, 64 * MIB, 100);
        kn_pool_set_idle_max(p, fixed ? 100 : 1000);
        rt_buf_unref(kn_pool_get(p, MIB));
        long t_back = now_ms();
        for (int i = 0; i < 400 && kn_pool_free_bytes(p) > 0; i++) sleep_ms(50);
        ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
        /* Many small buffers freed after it must not make the pool forget it. */
        rt_buf *small[12];
        for (int i = 0; i < 12; i++) small[i] = kn_pool_get(p, 1024 * (size_t)(i + 1));
        for (int i = 0; i < 12; i++) rt_buf_unref(small[i]);
        for (int i = 0; i < 400 && kn_pool_free_bytes(p) > 0; i++) sleep_ms(50);
        ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
        long dt = now_ms() - t_back;
        if (dt < 1500) sleep_ms(1500 - dt);
        rt_buf *b = kn_pool_get(p, MIB); /* a miss: the freed one is remembered */
        long back = now_ms() - t_back;
        rt_buf_unref(b);
        long t0 = now_ms();
        sleep_ms(1000);
        size_t kept = kn_pool_free_bytes(p);
        long waited = now_ms() - t0;
        if (!fixed && waited < 2 * back - 200)
            ck_assert_msg(kept == MIB, "come-back %ld ms: freed %ld ms after its return", back, waited);
        for (int i = 0; i < 400 && kn_pool_free_bytes(p) > 0; i++) sleep_ms(50);
        ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
        kn_pool_release(p);
    }
}
END_TEST

START_TEST(test_rss_returns_after_burst) {
#ifdef MS_SANITIZE
    /* ASan's allocator keeps freed memory in its quarantine and ignores
     * malloc_trim, so RSS says nothing about the pool there. */
    return;
#endif
    kn_pool *p = kn_pool_new();
    /* The daemon's defaults: 512 MiB kept free, 2 s idle. */
    kn_pool_set_limits(p, 512 * MIB, 2000);
    /* Warm the allocator so the baseline is not the bare process. */
    rt_buf *w = kn_pool_get(p, MIB);
    rt_buf_unref(w);
    sleep_ms(100);
    size_t before = rss_bytes();
    enum { N = 12 };
    rt_buf *held[N];
    for (int round = 0; round < 3; round++) {
        /* Sizes vary, as large DICOM batches do: 8 .. 30 MiB each. */
        for (int i = 0; i < N; i++) {
            held[i] = kn_pool_get(p, (size_t)(8 + (i * 7 + round * 3) % 23) * MIB);
            ck_assert_ptr_nonnull(held[i]);
            memset(held[i]->data, i + 1, held[i]->size);
        }
        for (int i = 0; i < N; i++) rt_buf_unref(held[i]);
    }
    size_t peak = rss_bytes();
    ck_assert_msg(peak > before + 100 * MIB, "the burst was not resident (%zu -> %zu)", before, peak);
    ck_assert_uint_le(kn_pool_free_bytes(p), 512 * MIB);
    /* Within 10 s the RSS must be back within 10 % (+ 2 MiB of allocator
     * slack) of the figure before the burst. */
    size_t now = peak;
    for (int i = 0; i < 100; i++) {
        now = rss_bytes();
        if (now <= before + before / 10 + 2 * MIB) break;
        sleep_ms(100);
    }
    ck_assert_msg(now <= before + before / 10 + 2 * MIB,
                  "RSS %zu MiB before the burst, %zu at its end, %zu 10 s later", before / MIB,
                  peak / MIB, now / MIB);
    ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
    kn_pool_release(p);
}
END_TEST

START_TEST(test_release_with_buffers_in_use) {
    kn_pool *p = kn_pool_new();
    rt_buf *a = kn_pool_get(p, 4096);
    kn_pool_release(p); /* a keeps the pool alive */
    memset(a->data, 0, 4096);
    rt_buf_unref(a);    /* frees the pool (ASan checks nothing leaks) */
}
END_TEST

/* The default cap: the request budget, at most a quarter of the memory the
 * process may use, never under the floor. */
START_TEST(test_default_cap_rule) {
    const long long GIB = 1LL << 30;
    /* the budget when a quarter of memory is larger (the 1 GiB default on 64 GiB) */
    ck_assert_uint_eq(kn_pool_default_max_free(GIB, 64 * GIB), (size_t)GIB);
    /* a quarter of memory when the budget is larger (a 4 GiB container) */
    ck_assert_uint_eq(kn_pool_default_max_free(4 * GIB, 4 * GIB), (size_t)GIB);
    /* no budget (0): a quarter of memory */
    ck_assert_uint_eq(kn_pool_default_max_free(0, 16 * GIB), (size_t)(4 * GIB));
    /* never under the floor: a small budget, a small container, no limit known */
    ck_assert_uint_eq(kn_pool_default_max_free(64 << 20, 64 * GIB), KN_POOL_MAX_FREE_MIN);
    ck_assert_uint_eq(kn_pool_default_max_free(GIB, GIB), KN_POOL_MAX_FREE_MIN);
    ck_assert_uint_eq(kn_pool_default_max_free(GIB, 0), KN_POOL_MAX_FREE_MIN);
    /* the memory limit this test sees is physical memory or a cgroup's, never more */
    long long mem = ms_memory_limit();
    ck_assert(mem > 0);
    ck_assert(mem <= (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE));
}
END_TEST

/* A new pool takes the process default unless the environment gives a cap,
 * and keeps a returned buffer that fits it. */
START_TEST(test_default_cap_applies) {
    unsetenv("DCMSERVE_POOL_MAX_FREE_BYTES");
    kn_pool_set_default_max_free(3 * MIB);
    kn_pool *p = kn_pool_new();
    rt_buf *a = kn_pool_get(p, 2 * MIB), *b = kn_pool_get(p, 2 * MIB);
    rt_buf_unref(a);
    rt_buf_unref(b); /* over 3 MiB with a: freed */
    ck_assert_uint_eq(kn_pool_free_bytes(p), 2 * MIB);
    kn_pool_release(p);
    setenv("DCMSERVE_POOL_MAX_FREE_BYTES", "1048576", 1);
    p = kn_pool_new();
    a = kn_pool_get(p, 2 * MIB);
    rt_buf_unref(a); /* over the environment's 1 MiB */
    ck_assert_uint_eq(kn_pool_free_bytes(p), 0);
    kn_pool_release(p);
    unsetenv("DCMSERVE_POOL_MAX_FREE_BYTES");
}
END_TEST

/* Check's per-test limit comes from CK_DEFAULT_TIMEOUT (120 s, set by CMake
 * for every suite), above the idle-trim tests' 10 s waits. */
int main(void) {
    const tu_case cases[] = {
        {"reuse", test_reuse},
        {"byte_cap", test_byte_cap},
        {"idle_trim", test_idle_trim},
        {"window_follows_rate", test_window_follows_rate},
        {"window_learns_come_back", test_window_learns_come_back},
        {"rss_returns_after_burst", test_rss_returns_after_burst},
        {"release_with_buffers_in_use", test_release_with_buffers_in_use},
        {"default_cap_rule", test_default_cap_rule},
        {"default_cap_applies", test_default_cap_applies},
    };
    return tu_suite_main("kn_bufpool", cases, sizeof(cases) / sizeof(cases[0]));
}
