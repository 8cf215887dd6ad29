/* ms_watch.h - a deadline and a client's hang-up turned into the
 * cancellation flag the executor reads (kn_ctx.cancelled, rt_run_opts).
 *
 * gRPC calls get theirs from the gRPC core; a REST call, a warm-up run and
 * anything else that runs a model without a gRPC call register an ms_watch
 * for the time of the run: one thread (started on first use) sets
 * `cancelled` once the deadline has passed or, when a socket is given, once
 * its peer has closed it (POLLRDHUP / POLLHUP / POLLERR), checking every
 * 20 ms. The run then stops at its next node or loop iteration with
 * MS_ECANCELED, and the caller reads ms_watch_reason() to answer
 * DEADLINE_EXCEEDED or nothing (the client is gone). */
#ifndef MS_WATCH_H
#define MS_WATCH_H

#include <stdatomic.h>

enum { MS_WATCH_NONE = 0, MS_WATCH_DEADLINE = 1, MS_WATCH_HANGUP = 2 };

typedef struct ms_watch {
    atomic_int cancelled;       /* what the run reads: non-zero = stop */
    atomic_int reason;          /* MS_WATCH_* */
    double deadline_ms;         /* CLOCK_MONOTONIC, 0 = none */
    int fd;                     /* the client's socket, -1 = none */
    struct ms_watch *prev, *next;
} ms_watch;

/* Registers w: cancelled at timeout_ms from now (<= 0: no deadline) or when
 * fd's peer hangs up (fd < 0: not watched). w must stay put until
 * ms_watch_stop. If the watcher thread cannot start, w is registered
 * anyway and only ms_watch_stop touches it (nothing is cancelled). */
void ms_watch_start(ms_watch *w, double timeout_ms, int fd);
/* Unregisters w; once it returns the watcher no longer touches it. */
void ms_watch_stop(ms_watch *w);
/* Why w was cancelled (MS_WATCH_*). */
int ms_watch_reason(const ms_watch *w);
/* Cancels every registered watch now, and every one registered later
 * (MS_WATCH_DEADLINE): the drain timeout at SIGTERM stops what is still
 * running, REST calls and warm-up runs included, and what would start. */
void ms_watch_cancel_all(void);

/* The watch of the call this thread runs for now (NULL: none), for handlers
 * that a REST call reaches without a gRPC call: srv_call_cancel_flag(NULL)
 * reads ms_watch_bound_flag(), so that :classify, :regress and KServe REST
 * infer stop at the REST deadline or hang-up as :predict does. */
void ms_watch_bind(ms_watch *w);
/* &w->cancelled of the bound watch, or NULL. */
const atomic_int *ms_watch_bound_flag(void);

#endif /* MS_WATCH_H */
