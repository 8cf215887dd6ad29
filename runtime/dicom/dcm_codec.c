/* dcm_codec.c - dcm_codec_decode: checks the frame geometry and the output
 * size, then hands the frame to one codec. JPEG streams are routed by their
 * own frame header rather than by the transfer syntax alone: 8-bit DCT goes to
 * libjpeg-turbo, 12-bit DCT to dcm_jpeg12.c, SOF3 to dcm_jpeg_lossless.c (some
 * archives label lossless streams as .4.51 or the other way round). Also
 * implements the two byte-copy syntaxes: Deflated Image Frame Compression
 * (raw DEFLATE per frame) and Encapsulated Uncompressed. */
#include "dcm_codec.h"

#include <string.h>

#include <zlib.h>

#include "dcm_codec_int.h"

/* Expected output bytes for g, or 0 when g is invalid (message set). */
static size_t frame_size(const dcm_frame_geom *g, dcm_codec_kind kind, ms_status *st) {
    *st = MS_OK;
    if (g->rows == 0 || g->cols == 0) {
        *st = ms_errf(MS_EINVAL, "codec: empty frame geometry %ux%u", g->rows, g->cols);
        return 0;
    }
    if (g->samples != 1 && g->samples != 3) {
        *st = ms_errf(MS_EINVAL, "codec: SamplesPerPixel %u (expected 1 or 3)", g->samples);
        return 0;
    }
    const unsigned ba = g->bits_allocated;
    if (ba != 8 && ba != 16 && ba != 32 && ba != 1) {
        *st = ms_errf(MS_EINVAL, "codec: BitsAllocated %u (expected 1, 8, 16 or 32)", ba);
        return 0;
    }
    if (g->bits_stored < 1 || g->bits_stored > ba) {
        *st = ms_errf(MS_EINVAL, "codec: BitsStored %u with BitsAllocated %u", g->bits_stored, ba);
        return 0;
    }
    if (ba == 1 && kind != DCM_CODEC_DEFLATE_FRAME && kind != DCM_CODEC_ENCAPS_NATIVE) {
        *st = ms_errf(MS_ENOTSUP, "codec: BitsAllocated 1 with a compressed transfer syntax");
        return 0;
    }
    const uint64_t n = (uint64_t)g->rows * g->cols * g->samples;
    const uint64_t bytes = ba == 1 ? (n + 7) / 8 : n * (ba / 8);
    if (bytes > SIZE_MAX / 2) {
        *st = ms_errf(MS_EINVAL, "codec: frame of %llu bytes is too large",
                      (unsigned long long)bytes);
        return 0;
    }
    return (size_t)bytes;
}

static ms_status inflate_frame(const uint8_t *data, size_t len, uint8_t *out, size_t out_size) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
        return ms_errf(MS_ENOMEM, "deflate: cannot initialise zlib");
    ms_status st = MS_OK;
    size_t done_in = 0, done_out = 0;
    int rc = Z_OK;
    /* zlib counts in uInt: feed in chunks so that > 4 GiB frames work too. */
    while (rc == Z_OK) {
        const size_t in_chunk = len - done_in > UINT32_MAX ? UINT32_MAX : len - done_in;
        const size_t out_chunk =
            out_size - done_out > UINT32_MAX ? UINT32_MAX : out_size - done_out;
        z.next_in = (Bytef *)(uintptr_t)(data + done_in);
        z.avail_in = (uInt)in_chunk;
        z.next_out = out + done_out;
        z.avail_out = (uInt)out_chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        done_in += in_chunk - z.avail_in;
        done_out += out_chunk - z.avail_out;
        if (rc == Z_OK && done_out == out_size) {
            /* Output full but stream not finished: is there more data? */
            uint8_t extra;
            z.next_out = &extra;
            z.avail_out = 1;
            z.next_in = (Bytef *)(uintptr_t)(data + done_in);
            z.avail_in = (uInt)(len - done_in > UINT32_MAX ? UINT32_MAX : len - done_in);
            rc = inflate(&z, Z_NO_FLUSH);
            if (z.avail_out == 0) {
                st = ms_errf(MS_EINVAL, "deflate: frame inflates to more than %zu bytes", out_size);
                goto out;
            }
            break;
        }
        if (rc == Z_BUF_ERROR && done_in == len) break;
    }
    if (rc != Z_STREAM_END) {
        if (rc == Z_DATA_ERROR)
            st = ms_errf(MS_EINVAL, "deflate: corrupt stream: %s", z.msg ? z.msg : "data error");
        else
            st = ms_errf(MS_EINVAL, "deflate: stream truncated after %zu of %zu bytes", done_out,
                         out_size);
        goto out;
    }
    if (done_out != out_size) {
        st = ms_errf(MS_EINVAL, "deflate: frame inflates to %zu bytes, header geometry needs %zu",
                     done_out, out_size);
        goto out;
    }
out:
    inflateEnd(&z);
    return st;
}

static ms_status decode_jpeg_family(dcm_codec_kind kind, const uint8_t *data, size_t len,
                                    const dcm_frame_geom *g, uint8_t *out, size_t out_size,
                                    int *rgb) {
    dcm__jpeg_sof sof;
    ms_status st = dcm__jpeg_find_sof(data, len, &sof);
    if (st != MS_OK) return st;
    switch (sof.marker) {
    case 0xC3: return dcm__jpeg_lossless_decode(data, len, g, out, out_size);
    case 0xC0:
    case 0xC1:
    case 0xC2:
        if (sof.precision == 8) return dcm__jpeg_decode(data, len, g, out, out_size, rgb);
        if (sof.precision == 12) return dcm__jpeg12_decode(data, len, g, out, out_size, rgb);
        return ms_errf(MS_EINVAL, "JPEG: DCT frame with data precision %d (expected 8 or 12)",
                       sof.precision);
    default:
        (void)kind;
        return ms_errf(MS_ENOTSUP, "JPEG: SOF%d frames (%s) are not supported", sof.marker - 0xC0,
                       sof.marker >= 0xC9 ? "arithmetic coding" : "hierarchical");
    }
}

ms_status dcm_codec_decode(dcm_codec_kind kind, const uint8_t *data, size_t len,
                           const dcm_frame_geom *geom, void *out, size_t out_size,
                           int *out_rgb_converted) {
    int rgb_dummy;
    int *rgb = out_rgb_converted ? out_rgb_converted : &rgb_dummy;
    *rgb = 0;
    if (geom == NULL || out == NULL || (data == NULL && len != 0))
        return ms_errf(MS_EINVAL, "codec: NULL argument");
    ms_status st;
    const size_t want = frame_size(geom, kind, &st);
    if (st != MS_OK) return st;
    if (out_size != want)
        return ms_errf(MS_EINVAL, "codec: output buffer is %zu bytes, the frame needs %zu",
                       out_size, want);
    if (len == 0) return ms_errf(MS_EINVAL, "codec: empty frame (0 bytes)");
    switch (kind) {
    case DCM_CODEC_JPEG_BASELINE:
    case DCM_CODEC_JPEG_EXTENDED:
    case DCM_CODEC_JPEG_LOSSLESS:
        return decode_jpeg_family(kind, data, len, geom, out, out_size, rgb);
    case DCM_CODEC_JPEGLS: return dcm__jpegls_decode(data, len, geom, out, out_size);
    case DCM_CODEC_J2K: return dcm__j2k_decode(data, len, geom, out, out_size, rgb);
    case DCM_CODEC_RLE: return dcm__rle_decode(data, len, geom, out, out_size);
    case DCM_CODEC_DEFLATE_FRAME: return inflate_frame(data, len, out, out_size);
    case DCM_CODEC_ENCAPS_NATIVE:
        /* Fragments have even length: one trailing pad byte is allowed. */
        if (len != want && len != want + 1)
            return ms_errf(MS_EINVAL, "encapsulated native: frame is %zu bytes, expected %zu", len,
                           want);
        memcpy(out, data, want);
        return MS_OK;
    case DCM_CODEC_NONE:
        return ms_errf(MS_EINVAL, "codec: native pixel data is not decoded by a codec");
    }
    return ms_errf(MS_ENOTSUP, "codec: unknown codec kind %d", (int)kind);
}
