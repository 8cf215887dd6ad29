/* ms_file.c - opening and reading files beneath a model folder (ms_file.h). */
#include "ms_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

static atomic_int g_force_walk;

void ms_file_force_walk(int on) {
    atomic_store(&g_force_walk, on);
}

ms_status ms_dir_open(const char *path, ms_dir *d) {
    d->fd = -1;
    d->path = NULL;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    d->path = strndup(path, len);
    if (d->path == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", path);
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->fd < 0) {
        int e = errno;
        ms_status st = ms_errf(e == ENOENT ? MS_ENOTFOUND : MS_EINVAL, "%s: %s", d->path,
                               e == ENOTDIR ? "not a folder" : strerror(e));
        ms_dir_close(d);
        return st;
    }
    return MS_OK;
}

void ms_dir_close(ms_dir *d) {
    if (d->fd >= 0) close(d->fd);
    free(d->path);
    d->fd = -1;
    d->path = NULL;
}

ms_status ms_dir_inside(const ms_dir *d, const char *path, const char **rel) {
    size_t n = strlen(d->path);
    /* "/" as the folder: every absolute path is below it. */
    if (n == 1 && d->path[0] == '/' && path[0] == '/' && path[1] != '\0') {
        *rel = path + 1;
        return MS_OK;
    }
    if (strncmp(path, d->path, n) == 0 && path[n] == '/' && path[n + 1] != '\0') {
        *rel = path + n + 1;
        return MS_OK;
    }
    return ms_errf(MS_EPERM, "'%s' is outside the model folder; not read", path);
}

static ms_status open_error(const char *rel, int e) {
    switch (e) {
    case ENOENT: return ms_errf(MS_ENOTFOUND, "%s: missing", rel);
    case EXDEV:
    case ELOOP:
        return ms_errf(MS_EPERM, "%s: resolves outside the model folder (an absolute name, '..' "
                                 "or a symbolic link leaving it); not read", rel);
    case ENXIO: /* a FIFO or socket refused by O_NONBLOCK semantics */
        return ms_errf(MS_EINVAL, "%s: not a regular file", rel);
    default: return ms_errf(MS_EINVAL, "%s: cannot open: %s", rel, strerror(e));
    }
}

/* The fallback walk: every component opened with O_NOFOLLOW below the one
 * before; "..", absolute names and every symbolic link refused (ELOOP/EXDEV). */
static int walk_open(int dirfd, const char *rel, int flags) {
    if (rel[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    char *copy = strdup(rel);
    if (copy == NULL) {
        errno = ENOMEM;
        return -1;
    }
    int cur = dirfd, fd = -1;
    char *save = NULL;
    char *part = strtok_r(copy, "/", &save);
    while (part != NULL) {
        char *next = strtok_r(NULL, "/", &save);
        if (strcmp(part, "..") == 0) {
            errno = EXDEV;
            fd = -1;
            break;
        }
        if (next == NULL) {
            fd = openat(cur, part, flags | O_NOFOLLOW);
            break;
        }
        int sub = openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == ENOTDIR) {
            /* a symbolic link opened as itself is not a folder: say ELOOP */
            struct stat sb;
            if (fstatat(cur, part, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
                errno = ELOOP;
        }
        if (cur != dirfd) close(cur);
        cur = sub;
        if (cur < 0) break;
        part = next;
    }
    int e = errno;
    if (cur >= 0 && cur != dirfd) close(cur);
    free(copy);
    errno = e;
    return fd;
}

/* openat2 beneath dirfd, or the walk where the kernel (or a seccomp filter)
 * does not offer it. */
static int open_beneath(int dirfd, const char *rel, int flags) {
#ifdef SYS_openat2
    if (!atomic_load(&g_force_walk)) {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = (uint64_t)flags;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return (int)fd;
    }
#endif
    return walk_open(dirfd, rel, flags);
}

ms_status ms_file_open(const ms_dir *d, const char *rel, int *fd) {
    *fd = -1;
    if (rel[0] == '\0') return ms_errf(MS_EINVAL, "empty file name");
    int f = open_beneath(d->fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) return open_error(rel, errno);
    struct stat sb;
    if (fstat(f, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(f);
        return ms_errf(MS_EINVAL, "%s: not a regular file", rel);
    }
    /* Regular files ignore O_NONBLOCK; cleared all the same. */
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return MS_OK;
}

ms_status ms_file_read_fd(int fd, const char *name, uint64_t max, uint8_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    size_t cap = 0, len = 0;
    uint8_t *buf = NULL;
    struct stat sb;
    /* stat refuses an oversized file without reading a byte (a 2 GB sparse
     * file costs nothing); below the cap it is only a first guess, the loop
     * reads to EOF and counts (a /proc-like file says 0 and holds more). */
    if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > max)
        return ms_errf(MS_EINVAL, "%s: %lld bytes, larger than the limit of %llu bytes; not read",
                       name, (long long)sb.st_size, (unsigned long long)max);
    if (fstat(fd, &sb) == 0 && sb.st_size > 0)
        cap = (size_t)sb.st_size + 1;
    if (cap < 4096) cap = 4096;
    for (;;) {
        if (len + 1 >= cap || buf == NULL) {
            size_t ncap = buf == NULL ? cap : cap * 2;
            if (max < (uint64_t)SIZE_MAX / 2 && (uint64_t)ncap > max + 2) ncap = (size_t)(max + 2);
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                free(buf);
                return ms_errf(MS_ENOMEM, "%s: out of memory", name);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return ms_errf(MS_EINVAL, "%s: read failed after %zu bytes: %s", name, len,
                           strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
        if ((uint64_t)len > max) {
            free(buf);
            return ms_errf(MS_EINVAL, "%s: larger than the limit of %llu bytes; not read", name,
                           (unsigned long long)max);
        }
    }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return MS_OK;
}

ms_status ms_file_read(const ms_dir *d, const char *rel, uint64_t max, uint8_t **out, size_t *n) {
    int fd;
    *out = NULL;
    *n = 0;
    ms_status st = ms_file_open(d, rel, &fd);
    if (st != MS_OK) return st;
    st = ms_file_read_fd(fd, rel, max, out, n);
    close(fd);
    return st;
}

ms_status ms_file_find(const ms_dir *d, const char *rel) {
    if (rel[0] == '\0') return ms_errf(MS_EINVAL, "empty file name");
    int f = open_beneath(d->fd, rel, O_PATH | O_CLOEXEC);
    if (f < 0) return open_error(rel, errno);
    close(f);
    return MS_OK;
}
