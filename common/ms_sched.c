/* ms_sched.c - per-thread scheduling hints (ms_sched.h). */
#include "ms_sched.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr as the kernel defines it (SCHED_ATTR_SIZE_VER0: 48
 * bytes); glibc 2.36 has no wrapper for sched_getattr / sched_setattr. */
typedef struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime; /* fair tasks, Linux >= 6.12: the requested slice in ns */
    uint64_t sched_deadline;
    uint64_t sched_period;
} sched_attr0;

#define SCHED_POLICY_OTHER 0
#define SCHED_POLICY_BATCH 3

int ms_sched_short_slice(unsigned micros) {
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    sched_attr0 a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0) != 0) return -1;
    if (a.sched_policy != SCHED_POLICY_OTHER && a.sched_policy != SCHED_POLICY_BATCH) {
        errno = EPERM; /* real-time or deadline: not ours to change */
        return -1;
    }
    a.size = (uint32_t)sizeof a;
    a.sched_flags = 0;
    a.sched_runtime = (uint64_t)micros * 1000u;
    return syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : -1;
#else
    (void)micros;
    errno = ENOSYS;
    return -1;
#endif
}
