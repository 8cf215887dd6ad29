/* ms_status.c - names of status codes and the thread-local error message. */
#include "ms_status.h"

#include <stdio.h>
#include <string.h>

#define MS_MSG_MAX 1024

static _Thread_local char tl_msg[MS_MSG_MAX];

static const char *const names[MS_STATUS_COUNT] = {
    /* clang-format off */
    [MS_OK]        = "ok",
    [MS_EINVAL]    = "einval",
    [MS_ENOTFOUND] = "enotfound",
    [MS_EPRECOND]  = "eprecond",
    [MS_ENOMEM]    = "enomem",
    [MS_EBUSY]     = "ebusy",
    [MS_ETIMEDOUT] = "etimedout",
    [MS_ECANCELED] = "ecanceled",
    [MS_EDEVICE]   = "edevice",
    [MS_ENOTSUP]   = "enotsup",
    [MS_ESHUTDOWN] = "eshutdown",
    [MS_EDATALOSS] = "edataloss",
    [MS_EINTERNAL] = "einternal",
    [MS_EPERM]     = "eperm",
    /* clang-format on */
};

const char *ms_status_name(ms_status s) {
    if ((unsigned)s >= MS_STATUS_COUNT) return "unknown";
    return names[s];
}

ms_status ms_verrf(ms_status code, const char *fmt, va_list ap) {
    vsnprintf(tl_msg, sizeof(tl_msg), fmt, ap);
    return code;
}

ms_status ms_errf(ms_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ms_verrf(code, fmt, ap);
    va_end(ap);
    return code;
}

ms_status ms_errwrap(ms_status code, const char *fmt, ...) {
    char joined[2 * MS_MSG_MAX + 4];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(joined, MS_MSG_MAX, fmt, ap);
    va_end(ap);
    size_t o = n < 0 ? 0 : (size_t)n >= MS_MSG_MAX ? MS_MSG_MAX - 1 : (size_t)n;
    if (tl_msg[0] != '\0') {
        memcpy(joined + o, ": ", 2);
        o += 2;
        size_t l = strlen(tl_msg);
        memcpy(joined + o, tl_msg, l);
        o += l;
    }
    joined[o] = '\0';
    memcpy(tl_msg, joined, MS_MSG_MAX - 1);
    tl_msg[MS_MSG_MAX - 1] = '\0';
    return code;
}

const char *ms_errmsg(void) {
    return tl_msg;
}

void ms_err_clear(void) {
    tl_msg[0] = '\0';
}

ms_status ms_err_at(ms_status code, const char *file, int line) {
    if (tl_msg[0] == '\0')
        snprintf(tl_msg, sizeof(tl_msg), "%s at %s:%d", ms_status_name(code), file, line);
    return code;
}
