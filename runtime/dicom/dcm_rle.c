/* dcm_rle.c - DICOM RLE Lossless (PS3.5 Annex G): a 64-byte header of
 * little-endian uint32 (segment count, then 15 segment offsets), then one
 * PackBits segment per byte plane: for each sample, the most significant byte
 * plane first. Output is interleaved little-endian samples. */
#include <string.h>

#include "dcm_codec_int.h"

static uint32_t rd32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Decodes one PackBits segment src[0..n) into every `step`-th byte of dst,
 * exactly `count` bytes. Extra output (some encoders pad odd rows) is dropped. */
static ms_status unpack_segment(const uint8_t *src, size_t n, uint8_t *dst, size_t step,
                                size_t count, int seg) {
    size_t i = 0, o = 0;
    while (o < count) {
        if (i >= n)
            return ms_errf(MS_EINVAL, "RLE: segment %d ends after %zu of %zu bytes", seg, o, count);
        int c = (int8_t)src[i++];
        if (c >= 0) {
            size_t run = (size_t)c + 1;
            if (run > n - i)
                return ms_errf(MS_EINVAL, "RLE: segment %d literal run of %zu runs past its end",
                               seg, run);
            if (run > count - o) run = count - o;
            for (size_t k = 0; k < run; k++) dst[(o + k) * step] = src[i + k];
            i += (size_t)c + 1;
            o += run;
        } else if (c != -128) {
            size_t run = (size_t)(1 - c);
            if (i >= n)
                return ms_errf(MS_EINVAL, "RLE: segment %d replicate run without a byte", seg);
            uint8_t v = src[i++];
            if (run > count - o) run = count - o;
            for (size_t k = 0; k < run; k++) dst[(o + k) * step] = v;
            o += run;
        }
    }
    return MS_OK;
}

ms_status dcm__rle_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                          size_t out_size) {
    const unsigned width = dcm__sample_bytes(g);
    const size_t npix = (size_t)g->rows * g->cols;
    const uint32_t want = (uint32_t)g->samples * width;
    if (len < 64) return ms_errf(MS_EINVAL, "RLE: %zu bytes, shorter than the 64-byte header", len);
    uint32_t nseg = rd32le(data);
    if (nseg != want)
        return ms_errf(MS_EINVAL,
                       "RLE: %u segments, header geometry (%u samples x %u bytes) needs %u", nseg,
                       g->samples, width, want);
    if (want > 15) return ms_errf(MS_ENOTSUP, "RLE: more than 15 segments");
    if (npix * want != out_size) return ms_errf(MS_EINTERNAL, "RLE: output size mismatch");
    uint32_t off[16];
    for (uint32_t s = 0; s < nseg; s++) {
        off[s] = rd32le(data + 4 + 4 * s);
        if (off[s] < 64 || off[s] > len || (s > 0 && off[s] < off[s - 1]))
            return ms_errf(MS_EINVAL, "RLE: segment %u offset %u outside 64..%zu or unordered", s,
                           off[s], len);
    }
    off[nseg] = (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len);
    for (uint32_t s = 0; s < nseg; s++) {
        const uint32_t sample = s / width, byte = width - 1 - s % width; /* MSB plane first */
        ms_status st = unpack_segment(data + off[s], off[s + 1] - off[s],
                                      out + (size_t)sample * width + byte, want, npix, (int)s);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}
