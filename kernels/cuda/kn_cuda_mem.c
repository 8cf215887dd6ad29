/* kn_cuda_mem.c - the device-memory budget (kn_cuda_mem.h). */
#include "kn_cuda_mem.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_cap;   /* 0 = none */
static uint64_t g_total; /* the device's memory; 0 = unknown */
static double g_fraction;
static uint64_t g_held;

void kn_cuda_budget_set(double fraction, uint64_t device_total) {
    pthread_mutex_lock(&g_mu);
    g_fraction = fraction > 0 && fraction <= 1 ? fraction : 0;
    g_total = device_total;
    g_cap = g_fraction > 0 ? (uint64_t)(g_fraction * (double)device_total) : device_total;
    pthread_mutex_unlock(&g_mu);
}

ms_status kn_cuda_budget_take(const char *what, uint64_t bytes) {
    ms_status st = MS_OK;
    pthread_mutex_lock(&g_mu);
    if (g_cap > 0 && (bytes > g_cap || g_held > g_cap - bytes)) {
        if (g_fraction > 0)
            st = ms_errf(MS_ENOMEM,
                         "%s needs %llu MiB of GPU memory; --per_process_gpu_memory_fraction=%g "
                         "allows %llu MiB of the device's %llu MiB and %llu MiB are held by the "
                         "models already loaded",
                         what, (unsigned long long)(bytes >> 20), g_fraction,
                         (unsigned long long)(g_cap >> 20), (unsigned long long)(g_total >> 20),
                         (unsigned long long)(g_held >> 20));
        else
            st = ms_errf(MS_ENOMEM,
                         "%s needs %llu MiB of GPU memory; the device has %llu MiB and %llu MiB "
                         "are held by the models already loaded",
                         what, (unsigned long long)(bytes >> 20), (unsigned long long)(g_cap >> 20),
                         (unsigned long long)(g_held >> 20));
    } else {
        g_held += bytes;
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

void kn_cuda_budget_give(uint64_t bytes) {
    pthread_mutex_lock(&g_mu);
    g_held = bytes > g_held ? 0 : g_held - bytes;
    pthread_mutex_unlock(&g_mu);
}

uint64_t kn_cuda_budget_held(void) {
    pthread_mutex_lock(&g_mu);
    uint64_t h = g_held;
    pthread_mutex_unlock(&g_mu);
    return h;
}

static atomic_int g_sticky;

int kn_cuda_sticky(void) { return atomic_load(&g_sticky); }

void kn_cuda_set_sticky(void) { atomic_store(&g_sticky, 1); }
