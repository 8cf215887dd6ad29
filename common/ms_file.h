/* ms_file.h - reading a model's files without leaving its folder.
 *
 * A model folder may sit on a volume other people write to, and every name
 * inside it (the graph's Const file names, asset names, the saver's prefix)
 * comes from the model. So every file a model load opens is opened relative to
 * a directory descriptor of the version folder (ms_dir) with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: absolute names, "..", and symbolic
 * links that point outside the folder are refused by the kernel; relative
 * links that stay inside are followed. Where openat2 is missing (ENOSYS, or a
 * seccomp filter answering EPERM) the same rule is kept by a component walk
 * with O_NOFOLLOW, which refuses every symbolic link.
 *
 * Only regular files are read: a file is opened with O_NONBLOCK (a FIFO never
 * blocks the open) and refused unless fstat says S_ISREG, so FIFOs, devices
 * and sockets are refused without a read. Sizes come from what is read, never
 * from stat alone (a /proc-like file says 0 and holds more).
 *
 * Error messages name the file by its name relative to the folder and never
 * quote its bytes. Hard links are not refused: a hard link can only be made on
 * the same filesystem, and with fs.protected_hardlinks (the kernel default)
 * only by someone who owns the target or may read and write it; a hard link in
 * a model folder is then the doing of someone who could already read the file
 * (docs/security.md). */
#ifndef MS_FILE_H
#define MS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

/* An open folder: fd (O_DIRECTORY) and the path it was opened by, without
 * trailing slashes ("/m/1"). */
typedef struct ms_dir {
    int fd;
    char *path;
} ms_dir;

/* Opens the folder `path` (the operator's own path: followed as given).
 * MS_ENOTFOUND when absent, MS_EINVAL when not a folder. */
ms_status ms_dir_open(const char *path, ms_dir *d);
/* Closes d (fd -1 and path NULL are fine); d is zeroed to fd -1. */
void ms_dir_close(ms_dir *d);

/* The part of `path` inside d: path must be d->path + "/" + rest with rest
 * non-empty, and rest is returned in *rel (pointing into path). Anything else
 * (another absolute path, a relative name) is MS_EPERM "'<path>' is outside
 * the model folder; not read". What rest names is checked when it is opened. */
ms_status ms_dir_inside(const ms_dir *d, const char *path, const char **rel);

/* Opens the regular file `rel` beneath d for reading (O_CLOEXEC, blocking
 * reads). MS_ENOTFOUND "<rel>: missing"; MS_EPERM "<rel>: resolves outside the
 * model folder ..." for an absolute name, "..", or a link leaving the folder;
 * MS_EINVAL "<rel>: not a regular file" for FIFOs, devices, sockets, folders. */
ms_status ms_file_open(const ms_dir *d, const char *rel, int *fd);

/* Reads the whole regular file `rel` beneath d: at most `max` bytes, more is
 * MS_EINVAL "<rel>: larger than the limit of <max> bytes; not read" (no more
 * than max + 1 bytes are read to know). *out is malloc'd (caller frees), with
 * a NUL after the *n bytes read. Errors as ms_file_open. */
ms_status ms_file_read(const ms_dir *d, const char *rel, uint64_t max, uint8_t **out, size_t *n);

/* Reads the rest of an open file the same way (name for messages). */
ms_status ms_file_read_fd(int fd, const char *name, uint64_t max, uint8_t **out, size_t *n);

/* Whether `rel` names something beneath d (any type, by the same rule):
 * MS_OK; MS_ENOTFOUND when absent (message set); MS_EPERM when it resolves
 * outside the folder, and the other errors of ms_file_open. So that "absent"
 * (a model without variables/) is never mistaken for "present elsewhere". */
ms_status ms_file_find(const ms_dir *d, const char *rel);

/* Tests only: 1 forces the O_NOFOLLOW walk as if openat2 were missing. */
void ms_file_force_walk(int on);

#endif /* MS_FILE_H */
