/* check_ms_log.c - log-line safety: ms_log_escape, the control-byte escaping
 * of every line (text and JSON), the warning rate limit, --log_format
 * parsing. Lines are captured by pointing stderr at a temporary file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ms_log.h"
#include "util_node.h"

START_TEST(escape_controls_quotes_and_cap) {
    char out[64];
    ck_assert_str_eq(ms_log_escape(out, sizeof out, "a\nb\rc\x1b[31m\"q\"\\"),
                     "a\\x0ab\\x0dc\\x1b[31m\\\"q\\\"\\\\");
    ck_assert_str_eq(ms_log_escape(out, sizeof out, NULL), "");
    /* Valid UTF-8 stays, a lone continuation byte and 0x7f do not. */
    ck_assert_str_eq(ms_log_escape(out, sizeof out, "h\xc3\xa9\x80\x7f"), "h\xc3\xa9\\x80\\x7f");
    char big[200];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ms_log_escape(out, 16, big);
    ck_assert_uint_eq(strlen(out), 15);
    ck_assert_str_eq(out + 12, "...");
    /* An escape is never cut in half by the cap. */
    ms_log_escape(out, 12, "abcdef\n\n\n\n");
    ck_assert_str_eq(out, "abcdef...");
}
END_TEST

/* Runs fn with stderr captured; returns what it wrote (malloc'ed). */
static char *capture(void (*fn)(void)) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(tmp);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return buf;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void log_evil(void) {
    MS_WARN("Predict %s: failed", "evil\n2026-01-01T00:00:00.000Z INFO  forged\x1b[2J");
    ms_log_field f[] = {{"model", "m\n\"x\"", 0}, {"latency_ms", NULL, 1.5}};
    ms_log_kv(MS_LOG_WARN, "request", f, 2);
}

START_TEST(lines_cannot_be_forged) {
    ms_log_set_format(MS_LOG_TEXT);
    char *t = capture(log_evil);
    ck_assert_int_eq(count_lines(t), 2);
    ck_assert_ptr_null(strchr(t, '\x1b'));
    ck_assert_ptr_nonnull(strstr(t, "Predict evil\\x0a2026-01-01T00:00:00.000Z INFO  forged\\x1b[2J: failed"));
    ck_assert_ptr_nonnull(strstr(t, "WARN  request model=\"m\\x0a\\\"x\\\"\" latency_ms=1.5\n"));
    free(t);
    ms_log_set_format(MS_LOG_JSON);
    char *j = capture(log_evil);
    ms_log_set_format(MS_LOG_TEXT);
    ck_assert_int_eq(count_lines(j), 2);
    ck_assert_ptr_null(strchr(j, '\x1b'));
    ck_assert_ptr_nonnull(strstr(j, "\"level\":\"warn\",\"msg\":\"Predict evil\\\\x0a2026"));
    ck_assert_ptr_nonnull(strstr(j, "\"msg\":\"request\",\"model\":\"m\\\\x0a\\\"x\\\"\",\"latency_ms\":1.5}\n"));
    free(j);
}
END_TEST

static void log_burst(void) {
    for (int i = 0; i < 50; i++)
        MS_WARN_LIMITED("same warning %d", i);
}

START_TEST(warnings_rate_limited) {
    char *t = capture(log_burst);
    /* 50 in well under a second: 10 written (the next second's first line
     * would say how many were dropped). */
    int n = count_lines(t);
    ck_assert_int_ge(n, 10);
    ck_assert_int_le(n, 21); /* a second boundary may fall inside the burst */
    ck_assert_ptr_nonnull(strstr(t, "same warning 0"));
    free(t);
    ms_log_limit l = {0};
    int dropped = 0, ok = 0;
    for (int i = 0; i < 15; i++)
        ok += ms_log_limit_take(&l, 10, &dropped);
    ck_assert_int_le(ok, 15);
    ck_assert_int_ge(ok, 10);
}
END_TEST

START_TEST(format_parse) {
    ms_log_format f = MS_LOG_TEXT;
    ck_assert_int_eq(ms_log_parse_format("json", &f), 0);
    ck_assert_int_eq(f, MS_LOG_JSON);
    ck_assert_int_eq(ms_log_parse_format("text", &f), 0);
    ck_assert_int_eq(f, MS_LOG_TEXT);
    ck_assert_int_eq(ms_log_parse_format("xml", &f), -1);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"escape_controls_quotes_and_cap", escape_controls_quotes_and_cap},
        {"lines_cannot_be_forged", lines_cannot_be_forged},
        {"warnings_rate_limited", warnings_rate_limited},
        {"format_parse", format_parse},
    };
    return tu_suite_main("ms_log", cases, sizeof(cases) / sizeof(cases[0]));
}
