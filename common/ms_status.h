/* ms_status.h - the one error type of dcmserve, from kernels up to the server.
 *
 * Every fallible function returns an ms_status code. The human-readable reason
 * travels beside it in a thread-local message set by ms_errf(); the caller that
 * turns the code into a gRPC/HTTP status reads it with ms_errmsg() on the same
 * thread. The wire mapping lives in server/metrics/srv_status.c (runtime knows no gRPC).
 */
#ifndef MS_STATUS_H
#define MS_STATUS_H

#include <stdarg.h>

typedef enum ms_status {
    MS_OK = 0,
    MS_EINVAL,     /* malformed request or model: bad shape, dtype, size, bytes */
    MS_ENOTFOUND,  /* unknown model, version, file, tensor */
    MS_EPRECOND,   /* request valid but not applicable: unknown signature key */
    MS_ENOMEM,     /* host or device allocation failed, or a size limit hit */
    MS_EBUSY,      /* admission queue full; retry with backoff */
    MS_ETIMEDOUT,  /* deadline passed before or during inference */
    MS_ECANCELED,  /* client went away */
    MS_EDEVICE,    /* CUDA / cuDNN error */
    MS_ENOTSUP,    /* op, dtype or feature not implemented */
    MS_ESHUTDOWN,  /* daemon draining */
    MS_EDATALOSS,  /* stored data corrupt: checksum mismatch, truncated file */
    MS_EINTERNAL,  /* bug: invariant broken */
    MS_EPERM,      /* caller not allowed: admin RPC from a non-admin peer */
    MS_STATUS_COUNT
} ms_status;

/* Short lower-case name of a code ("einval"). Never NULL. */
const char *ms_status_name(ms_status s);

/* Sets this thread's error message (printf format) and returns `code`, so that
 * `return ms_errf(MS_EINVAL, "...");` reads naturally. */
ms_status ms_errf(ms_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ms_status ms_verrf(ms_status code, const char *fmt, va_list ap);

/* Prepends "prefix: " to this thread's message and returns `code`. For adding
 * context on the way up ("loading /m/1: " + "saved_model.pb: truncated"). */
ms_status ms_errwrap(ms_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* This thread's last message ("" when none). Borrowed; valid until the next
 * ms_errf/ms_errwrap/ms_err_clear on this thread. */
const char *ms_errmsg(void);
void ms_err_clear(void);

/* Records file:line of an error without a message of its own (debug aid). */
ms_status ms_err_at(ms_status code, const char *file, int line);
#define MS_ERR(s) ms_err_at((s), __FILE__, __LINE__)

#endif /* MS_STATUS_H */
