/* ms_log.h - one line per event on stderr: timestamp, level, message.
 *
 *   2026-11-30T05:40:01.123Z INFO  loaded model ct version 1 (12 ms)
 *
 * Thread-safe; the level is process-wide (--log_level). */
#ifndef MS_LOG_H
#define MS_LOG_H

typedef enum ms_log_level {
    MS_LOG_DEBUG = 0,
    MS_LOG_INFO,
    MS_LOG_WARN,
    MS_LOG_ERROR,
    MS_LOG_OFF,
} ms_log_level;

void ms_log_set_level(ms_log_level lvl);
ms_log_level ms_log_get_level(void);
/* Parses "debug", "info", "warn"/"warning", "error", "off". Returns 0 on success. */
int ms_log_parse_level(const char *s, ms_log_level *out);
void ms_log(ms_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define MS_DEBUG(...) ms_log(MS_LOG_DEBUG, __VA_ARGS__)
#define MS_INFO(...)  ms_log(MS_LOG_INFO, __VA_ARGS__)
#define MS_WARN(...)  ms_log(MS_LOG_WARN, __VA_ARGS__)
#define MS_ERROR(...) ms_log(MS_LOG_ERROR, __VA_ARGS__)

#endif /* MS_LOG_H */
