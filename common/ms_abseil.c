/* ms_abseil.c - see ms_abseil.h. */
#include "ms_abseil.h"

#include <dlfcn.h>
#include <string.h>

int ms_abseil_deadlock_detection_off(void) {
    typedef void (*set_mode_fn)(int);
    /* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle): Debian's
     * inline namespace first, then Abseil's default one. The enum's
     * kIgnore is 0 and it is passed as an int. */
    static const char *const names[] = {
        "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
        "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *p = dlsym(RTLD_DEFAULT, names[i]);
        if (p != NULL) {
            set_mode_fn fn;
            memcpy(&fn, &p, sizeof fn);
            fn(0);
            return 1;
        }
    }
    return 0;
}
