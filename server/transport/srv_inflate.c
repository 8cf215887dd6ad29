/* srv_inflate.c - bounded inflation of compressed gRPC messages (see srv_inflate.h). */
#include "srv_inflate.h"

#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

ms_status srv_inflate_message(const grpc_byte_buffer *bb, grpc_slice *flat, int64_t max) {
    if (bb == NULL || bb->type != GRPC_BB_RAW || bb->data.raw.compression == GRPC_COMPRESS_NONE)
        return MS_OK;
    grpc_compression_algorithm alg = bb->data.raw.compression;
    if (alg != GRPC_COMPRESS_GZIP && alg != GRPC_COMPRESS_DEFLATE)
        return ms_errf(MS_ENOTSUP, "message compressed with algorithm %d, which is not supported",
                       (int)alg);
    const uint8_t *src = GRPC_SLICE_START_PTR(*flat);
    size_t n = GRPC_SLICE_LENGTH(*flat);
    z_stream z;
    memset(&z, 0, sizeof z);
    /* gzip: gzip wrapper; gRPC's "deflate" is the zlib format. 32 + 15 reads both. */
    if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) return ms_errf(MS_ENOMEM, "zlib init failed");
    uint64_t lim = max > 0 ? (uint64_t)max : (uint64_t)INT32_MAX;
    size_t cap = n * 4 + 4096, used = 0;
    if (cap > lim + 1) cap = (size_t)lim + 1;
    uint8_t *out = malloc(cap);
    ms_status st = MS_OK;
    if (out == NULL) {
        inflateEnd(&z);
        return ms_errf(MS_ENOMEM, "out of memory inflating a message");
    }
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
    for (;;) {
        if (used == cap) {
            if (used > lim) break;
            size_t ncap = cap * 2 > lim + 1 ? (size_t)lim + 1 : cap * 2;
            uint8_t *o = realloc(out, ncap);
            if (o == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory inflating a message");
                goto done;
            }
            out = o;
            cap = ncap;
        }
        z.next_out = out + used;
        z.avail_out = (uInt)(cap - used > UINT32_MAX ? UINT32_MAX : cap - used);
        uInt before = z.avail_out;
        int rc = inflate(&z, Z_NO_FLUSH);
        used += before - z.avail_out;
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR && z.avail_in == 0) {
            st = ms_errf(MS_EINVAL, "compressed message is truncated");
            goto done;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = ms_errf(MS_EINVAL, "compressed message does not inflate: %s",
                         z.msg ? z.msg : "zlib error");
            goto done;
        }
    }
    if (used > lim) {
        st = ms_errf(MS_ENOMEM,
                     "Received message larger than max (a %zu-byte compressed message inflates "
                     "past %llu bytes; --max_message_bytes)",
                     n, (unsigned long long)lim);
        goto done;
    }
    grpc_slice_unref(*flat);
    *flat = grpc_slice_new(out, used ? used : 1, free);
    if (used == 0) {
        grpc_slice_unref(*flat);
        *flat = grpc_empty_slice();
    }
    out = NULL;
done:
    free(out);
    inflateEnd(&z);
    return st;
}
