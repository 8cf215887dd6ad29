/* ms_log.c - timestamped, levelled, line-at-a-time logging to stderr. */
#include "ms_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static atomic_int g_level = MS_LOG_INFO;

void ms_log_set_level(ms_log_level lvl) {
    atomic_store(&g_level, (int)lvl);
}

ms_log_level ms_log_get_level(void) {
    return (ms_log_level)atomic_load(&g_level);
}

int ms_log_parse_level(const char *s, ms_log_level *out) {
    static const struct {
        const char *name;
        ms_log_level lvl;
    } t[] = {{"debug", MS_LOG_DEBUG}, {"info", MS_LOG_INFO},   {"warn", MS_LOG_WARN},
             {"warning", MS_LOG_WARN}, {"error", MS_LOG_ERROR}, {"off", MS_LOG_OFF}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (strcasecmp(s, t[i].name) == 0) {
            *out = t[i].lvl;
            return 0;
        }
    }
    return -1;
}

void ms_log(ms_log_level lvl, const char *fmt, ...) {
    static const char *const tag[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
    if ((int)lvl < atomic_load(&g_level) || lvl >= MS_LOG_OFF) return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ %s ", ts.tv_nsec / 1000000L,
                  tag[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2) len = sizeof(line) - 2;
    line[len++] = '\n';
    /* One fwrite per line keeps lines whole across threads. */
    fwrite(line, 1, len, stderr);
}
