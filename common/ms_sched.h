/* ms_sched.h - per-thread CPU scheduling hints for latency-critical and
 * compute threads (nice is set where the threads start). */
#ifndef MS_SCHED_H
#define MS_SCHED_H

/* Asks the kernel for a short time slice (in microseconds, clamped by the
 * kernel to 100 us - 100 ms) for the calling thread, keeping its policy and
 * nice. On Linux 6.12 and later (EEVDF with custom slices) a waking thread
 * whose slice is shorter than the running one's preempts it at once instead
 * of waiting for that slice to end (0.75 ms x (1 + log2 cores) by default):
 * this is what keeps a protocol thread prompt while compute threads keep
 * every core busy. Older kernels ignore the request. Returns 0 when the
 * kernel took it, -1 (errno set) when not. */
int ms_sched_short_slice(unsigned micros);

#endif /* MS_SCHED_H */
