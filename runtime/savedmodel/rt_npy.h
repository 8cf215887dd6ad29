/* rt_npy.h - NumPy .npy files (format 1.0; 2.0 and 3.0 are read too) and
 * .npz archives (read only), to and from rt_tensor.
 *
 * Supported element types (descr): f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1, mapped to
 * DT_FLOAT DT_DOUBLE DT_INT8 DT_INT16 DT_INT32 DT_INT64 DT_UINT8 DT_UINT16
 * DT_UINT32 DT_UINT64 DT_BOOL; and fixed-width bytes `|S<n>` <-> DT_STRING
 * (numpy drops trailing NUL bytes of each element, so do we). Data is C order;
 * big-endian files are byte-swapped on read; `fortran_order: True` is refused
 * with MS_EINVAL. Files are written little-endian, C order, version 1.0, with
 * the header padded so that the data starts on a 64-byte boundary, exactly as
 * numpy.save does.
 *
 * Errors: MS_ENOTFOUND (no such file), MS_EINVAL (not an .npy file, bad or
 * unsupported header, size mismatch), MS_ENOMEM; each with a message naming
 * the file (or "npy" for memory) and what was wrong.
 */
#ifndef RT_NPY_H
#define RT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "rt_tensor.h"

/* Parses an .npy image of n bytes. *out is a new tensor owned by the caller
 * (data copied; `data` may be freed right after). `what` names the source in
 * messages (NULL -> "npy"). */
ms_status rt_npy_read_mem(const void *data, size_t n, const char *what, rt_tensor **out);

/* Reads an .npy file. *out is a new tensor owned by the caller. */
ms_status rt_npy_read_file(const char *path, rt_tensor **out);

/* Reads member `name` ("x" or "x.npy") of an .npz archive (stored or
 * deflated zip members, as numpy.savez / savez_compressed write them). With
 * name NULL or "", the archive must hold exactly one array. */
ms_status rt_npz_read_file(const char *path, const char *name, rt_tensor **out);

/* True when the file starts with the zip signature (an .npz archive). */
int rt_npy_is_zip_file(const char *path);

/* Serialises t as an .npy v1.0 image: *out is malloc'ed (caller frees), *n
 * its size. MS_ENOTSUP for dtypes without an .npy descr. */
ms_status rt_npy_write_mem(const rt_tensor *t, uint8_t **out, size_t *n);

/* Writes t to path (created or truncated). */
ms_status rt_npy_write_file(const char *path, const rt_tensor *t);

/* The .npy descr for a dtype ("<f4", "|u1", ...), or NULL when it has none
 * of fixed width (DT_STRING's width depends on the data). */
const char *rt_npy_descr(rt_dtype dt);

#endif /* RT_NPY_H */
