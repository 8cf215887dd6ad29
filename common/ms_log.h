/* ms_log.h - one line per event on stderr: timestamp, level, message.
 *
 *   2026-11-30T05:40:01.123Z INFO  loaded model ct version 1 (12 ms)
 *   {"time":"2026-11-30T05:40:01.123Z","level":"info","msg":"loaded model ct version 1 (12 ms)"}
 *
 * (--log_format=text, the default, or json.) Thread-safe; the level and the
 * format are process-wide. Every line is sanitised: control bytes (newline,
 * ESC, ...) in the formatted message are written as \xNN, so a string a
 * client sent can never start a line of its own or drive a terminal. Callers
 * that print client strings still quote and cap them with ms_log_escape. */
#ifndef MS_LOG_H
#define MS_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ms_log_level {
    MS_LOG_DEBUG = 0,
    MS_LOG_INFO,
    MS_LOG_WARN,
    MS_LOG_ERROR,
    MS_LOG_OFF,
} ms_log_level;

typedef enum ms_log_format { MS_LOG_TEXT = 0, MS_LOG_JSON } ms_log_format;

void ms_log_set_level(ms_log_level lvl);
ms_log_level ms_log_get_level(void);
/* Parses "debug", "info", "warn"/"warning", "error", "off". Returns 0 on success. */
int ms_log_parse_level(const char *s, ms_log_level *out);
void ms_log_set_format(ms_log_format f);
ms_log_format ms_log_get_format(void);
/* Parses "text" or "json". Returns 0 on success. */
int ms_log_parse_format(const char *s, ms_log_format *out);
void ms_log(ms_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One field of a structured line (ms_log_kv): a string (s != NULL) or a number. */
typedef struct ms_log_field {
    const char *key;
    const char *s; /* string value (escaped here), or NULL for num */
    double num;
} ms_log_field;

/* Writes `msg` and the fields as one line: text `msg key=value key="str"`,
 * json `{"time":..,"level":..,"msg":..,"key":value,...}`. String values are
 * escaped and capped at MS_LOG_ESCAPE_MAX bytes. */
void ms_log_kv(ms_log_level lvl, const char *msg, const ms_log_field *f, int n);

#define MS_LOG_ESCAPE_MAX 256

/* Copies s into out (cap bytes, cap >= 8) for a log line: bytes below 0x20,
 * 0x7f, '"' and '\' become \xNN / \" / \\, bytes from 0x80 are kept only as
 * part of valid UTF-8 (else \xNN); a string that does not fit ends in "...".
 * NULL s reads as "". Returns out. */
char *ms_log_escape(char *out, size_t cap, const char *s);

/* Rate limit for a repeated warning: at most `per_sec` lines a second per
 * limiter; ms_log_limit_take returns 1 when this line may be written and
 * sets *dropped to the lines dropped since the last one written. Use
 * MS_WARN_LIMITED, which keeps one static limiter per call site. */
typedef struct ms_log_limit {
    _Atomic int64_t sec;
    atomic_int n;
    atomic_int dropped;
} ms_log_limit;
int ms_log_limit_take(ms_log_limit *l, int per_sec, int *dropped);

#define MS_DEBUG(...) ms_log(MS_LOG_DEBUG, __VA_ARGS__)
#define MS_INFO(...)  ms_log(MS_LOG_INFO, __VA_ARGS__)
#define MS_WARN(...)  ms_log(MS_LOG_WARN, __VA_ARGS__)
#define MS_ERROR(...) ms_log(MS_LOG_ERROR, __VA_ARGS__)

#define MS_WARN_LIMITED(...)                                                                       \
    do {                                                                                           \
        static ms_log_limit ms_lim_;                                                               \
        int ms_dropped_ = 0;                                                                       \
        if (ms_log_limit_take(&ms_lim_, 10, &ms_dropped_)) {                                       \
            if (ms_dropped_ > 0) MS_WARN("(%d similar lines dropped by the rate limit)", ms_dropped_); \
            MS_WARN(__VA_ARGS__);                                                                  \
        }                                                                                          \
    } while (0)

#endif /* MS_LOG_H */
