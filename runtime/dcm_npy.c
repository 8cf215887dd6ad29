/* dcm_npy.c - NumPy .npy 1.0 writer (float32, little endian, C order).
 * Header: magic "\x93NUMPY", version 1.0, uint16 LE header length, then a
 * Python dict literal padded with spaces and ended by '\n' so that the data
 * starts at a multiple of 64 bytes. */
#include "dcm_npy.h"

#include <errno.h>
#include <string.h>

ms_status dcm_npy_write_f32(FILE *f, const float *data, int rank, const uint64_t *dims) {
    if (rank < 1 || rank > 8) return ms_errf(MS_EINVAL, "npy: rank %d not in 1..8", rank);
    char shape[256];
    size_t n = 0;
    uint64_t count = 1;
    n += (size_t)snprintf(shape + n, sizeof(shape) - n, "(");
    for (int i = 0; i < rank; i++) {
        n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%llu,%s",
                              (unsigned long long)dims[i], i + 1 < rank ? " " : "");
        count *= dims[i];
    }
    if (rank > 1) n--; /* "(2, 3)" not "(2, 3,)"; a 1-d shape keeps its comma */
    snprintf(shape + n, sizeof(shape) - n, ")");

    char hdr[512];
    int len = snprintf(hdr + 10, sizeof(hdr) - 10,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + 10 + len, ' ', padded - total);
    hdr[padded - 1] = '\n';
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((padded - 10) & 0xFF);
    hdr[9] = (char)((padded - 10) >> 8);
    if (fwrite(hdr, 1, padded, f) != padded) return ms_errf(MS_EINTERNAL, "npy: write failed");
    /* The host is little endian (x86-64, aarch64): floats go out as they are. */
    if (count > 0 && fwrite(data, sizeof(float), (size_t)count, f) != (size_t)count)
        return ms_errf(MS_EINTERNAL, "npy: write failed: %s", strerror(errno));
    return MS_OK;
}

ms_status dcm_npy_save_f32(const char *path, const float *data, int rank, const uint64_t *dims) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) return ms_errf(MS_EINVAL, "cannot create %s: %s", path, strerror(errno));
    ms_status st = dcm_npy_write_f32(f, data, rank, dims);
    if (fclose(f) != 0 && st == MS_OK) st = ms_errf(MS_EINTERNAL, "closing %s failed", path);
    return st;
}
