/* ms_watch.c - deadlines and hang-ups to cancellation flags (ms_watch.h). */
#include "ms_watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#define WATCH_TICK_MS 20

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ms_watch *g_head;
static int g_started;
static int g_all_cancelled; /* ms_watch_cancel_all: every later watch starts cancelled */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void fire(ms_watch *w, int why) {
    int none = MS_WATCH_NONE;
    atomic_compare_exchange_strong(&w->reason, &none, why);
    atomic_store(&w->cancelled, 1);
}

/* One pass over the registered watches; under g_mu (poll with a zero
 * timeout never blocks). */
static void check_all(void) {
    double now = now_ms();
    for (ms_watch *w = g_head; w; w = w->next) {
        if (atomic_load(&w->cancelled)) continue;
        if (w->deadline_ms > 0 && now >= w->deadline_ms) {
            fire(w, MS_WATCH_DEADLINE);
            continue;
        }
        if (w->fd >= 0) {
            struct pollfd p = {.fd = w->fd, .events = POLLRDHUP};
            if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                fire(w, MS_WATCH_HANGUP);
        }
    }
}

static void *watch_main(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec ts = {0, WATCH_TICK_MS * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&g_mu);
        check_all();
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

void ms_watch_start(ms_watch *w, double timeout_ms, int fd) {
    atomic_init(&w->cancelled, 0);
    atomic_init(&w->reason, MS_WATCH_NONE);
    w->deadline_ms = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    w->fd = fd;
    w->prev = NULL;
    pthread_mutex_lock(&g_mu);
    if (!g_started) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 64 * 1024);
        g_started = pthread_create(&t, &at, watch_main, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    w->next = g_head;
    if (g_head) g_head->prev = w;
    g_head = w;
    if (g_all_cancelled) fire(w, MS_WATCH_DEADLINE);
    pthread_mutex_unlock(&g_mu);
}

void ms_watch_stop(ms_watch *w) {
    pthread_mutex_lock(&g_mu);
    if (w->prev) w->prev->next = w->next;
    else if (g_head == w) g_head = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    pthread_mutex_unlock(&g_mu);
}

int ms_watch_reason(const ms_watch *w) {
    return atomic_load(&w->reason);
}

static _Thread_local ms_watch *t_bound;

void ms_watch_bind(ms_watch *w) {
    t_bound = w;
}

const atomic_int *ms_watch_bound_flag(void) {
    return t_bound ? &t_bound->cancelled : NULL;
}

void ms_watch_cancel_all(void) {
    pthread_mutex_lock(&g_mu);
    g_all_cancelled = 1;
    for (ms_watch *w = g_head; w; w = w->next) fire(w, MS_WATCH_DEADLINE);
    pthread_mutex_unlock(&g_mu);
}
