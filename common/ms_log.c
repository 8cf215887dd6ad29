/* ms_log.c - timestamped, levelled, line-at-a-time logging to stderr, text or
 * JSON, with every control byte of a message escaped. */
#include "ms_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static atomic_int g_level = MS_LOG_INFO;
static atomic_int g_format = MS_LOG_TEXT;

#define LINE_MAX_BYTES 2048

void ms_log_set_level(ms_log_level lvl) {
    atomic_store(&g_level, (int)lvl);
}

ms_log_level ms_log_get_level(void) {
    return (ms_log_level)atomic_load(&g_level);
}

void ms_log_set_format(ms_log_format f) {
    atomic_store(&g_format, (int)f);
}

ms_log_format ms_log_get_format(void) {
    return (ms_log_format)atomic_load(&g_format);
}

int ms_log_parse_format(const char *s, ms_log_format *out) {
    if (strcasecmp(s, "text") == 0) *out = MS_LOG_TEXT;
    else if (strcasecmp(s, "json") == 0) *out = MS_LOG_JSON;
    else return -1;
    return 0;
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

/* Length of the valid UTF-8 sequence starting at p (1..4), 0 if none. */
static int utf8_len(const unsigned char *p) {
    int n;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef) n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4) n = 4;
    else return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && p[0] == 0xe0 && p[1] < 0xa0) return 0; /* overlong */
    if (n == 3 && p[0] == 0xed && p[1] >= 0xa0) return 0; /* surrogate */
    if (n == 4 && p[0] == 0xf0 && p[1] < 0x90) return 0;
    if (n == 4 && p[0] == 0xf4 && p[1] >= 0x90) return 0;
    return n;
}

/* Appends s to out[*w..cap-1] escaped. mode 0: message text (only control
 * bytes and invalid UTF-8 escaped, as \xNN); 1: quoted value (also " and \);
 * 2: JSON string body whose decoded value reads as mode 1's (\\xNN, \", \\). Stops (returns 1) when the next
 * piece would not fit in cap - 1 - reserve bytes. */
static int esc_append(char *out, size_t cap, size_t *w, const char *s, int mode, size_t reserve) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char piece[8];
        size_t pl;
        int u = utf8_len(p);
        if (*p < 0x20 || *p == 0x7f || u == 0) {
            pl = (size_t)snprintf(piece, sizeof piece, mode == 2 ? "\\\\x%02x" : "\\x%02x", *p);
            u = 1;
        } else if (mode != 0 && (*p == '"' || *p == '\\')) {
            piece[0] = '\\';
            piece[1] = (char)*p;
            pl = 2;
        } else {
            memcpy(piece, p, (size_t)u);
            pl = (size_t)u;
        }
        if (*w + pl + reserve + 1 > cap) return 1;
        memcpy(out + *w, piece, pl);
        *w += pl;
        p += u;
    }
    return 0;
}

char *ms_log_escape(char *out, size_t cap, const char *s) {
    size_t w = 0;
    if (cap == 0) return out;
    if (esc_append(out, cap, &w, s, 1, 3)) {
        memcpy(out + w, "...", 3);
        w += 3;
    }
    out[w] = 0;
    return out;
}

int ms_log_limit_take(ms_log_limit *l, int per_sec, int *dropped) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = ts.tv_sec;
    int64_t sec = atomic_load(&l->sec);
    *dropped = 0;
    if (sec != now && atomic_compare_exchange_strong(&l->sec, &sec, now)) {
        atomic_store(&l->n, 0);
        *dropped = atomic_exchange(&l->dropped, 0);
    }
    if (atomic_fetch_add(&l->n, 1) < per_sec) return 1;
    atomic_fetch_add(&l->dropped, 1);
    return 0;
}

static const char *const TAG[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
static const char *const JTAG[] = {"debug", "info", "warn", "error"};

/* Writes the time stamp and level; returns the bytes written. */
static size_t head(char *line, size_t cap, ms_log_level lvl, int json) {
    struct timespec ts;
    struct tm tm;
    char t[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(t + n, sizeof t - n, ".%03ldZ", ts.tv_nsec / 1000000L);
    int m = json ? snprintf(line, cap, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"", t, JTAG[lvl])
                 : snprintf(line, cap, "%s %s ", t, TAG[lvl]);
    return m < 0 ? 0 : (size_t)m;
}

static void emit(char *line, size_t len) {
    line[len++] = '\n';
    /* One fwrite per line keeps lines whole across threads. */
    fwrite(line, 1, len, stderr);
}

void ms_log(ms_log_level lvl, const char *fmt, ...) {
    if ((int)lvl < atomic_load(&g_level) || lvl >= MS_LOG_OFF) return;
    int json = atomic_load(&g_format) == MS_LOG_JSON;
    char msg[LINE_MAX_BYTES], line[LINE_MAX_BYTES + 16];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m < 0) msg[0] = 0;
    size_t w = head(line, sizeof line, lvl, json);
    esc_append(line, sizeof line - 1, &w, msg, json ? 2 : 0, json ? 2 : 0);
    if (json) {
        memcpy(line + w, "\"}", 2);
        w += 2;
    }
    emit(line, w);
}

void ms_log_kv(ms_log_level lvl, const char *msg, const ms_log_field *f, int n) {
    if ((int)lvl < atomic_load(&g_level) || lvl >= MS_LOG_OFF) return;
    int json = atomic_load(&g_format) == MS_LOG_JSON;
    char line[LINE_MAX_BYTES + 16];
    size_t cap = sizeof line - 1, w = head(line, cap, lvl, json);
    esc_append(line, cap, &w, msg, json ? 2 : 0, 2);
    if (json) line[w++] = '"';
    for (int i = 0; i < n; i++) {
        char val[MS_LOG_ESCAPE_MAX + 8], num[40];
        if (f[i].s) {
            size_t vw = 0;
            if (esc_append(val, sizeof val, &vw, f[i].s, json ? 2 : 1, 3)) {
                memcpy(val + vw, "...", 3);
                vw += 3;
            }
            val[vw] = 0;
        } else {
            snprintf(num, sizeof num, "%.6g", f[i].num);
        }
        int k = json ? snprintf(line + w, cap - w, f[i].s ? ",\"%s\":\"%s\"" : ",\"%s\":%s",
                                f[i].key, f[i].s ? val : num)
                     : snprintf(line + w, cap - w, f[i].s ? " %s=\"%s\"" : " %s=%s", f[i].key,
                                f[i].s ? val : num);
        if (k < 0 || (size_t)k >= cap - w - 2) break;
        w += (size_t)k;
    }
    if (json) line[w++] = '}';
    emit(line, w);
}
