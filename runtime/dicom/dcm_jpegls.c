/* dcm_jpegls.c - JPEG-LS lossless and near-lossless (DICOM .4.80 / .4.81)
 * through the CharLS 2.4 C API. CharLS returns unsigned samples, 1 byte each
 * up to 8 bits and 2 bytes above; interleave mode NONE comes out planar and is
 * interleaved here. HP colour transforms are undone by CharLS itself. */
#include <stdlib.h>
#include <string.h>

#include <charls/charls.h>

#include "dcm_codec_int.h"

static ms_status ls_err(const char *what, charls_jpegls_errc ec) {
    return ms_errf(MS_EINVAL, "JPEG-LS: %s: %s", what, charls_get_error_message(ec));
}

ms_status dcm__jpegls_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                             size_t out_size) {
    const unsigned width = dcm__sample_bytes(g);
    charls_jpegls_decoder *dec = charls_jpegls_decoder_create();
    uint8_t *tmp = NULL;
    ms_status st = MS_OK;
    charls_jpegls_errc ec;
    charls_frame_info fi;
    charls_interleave_mode ilv;
    size_t need;
    /* CharLS 2.4 spends seconds on some truncated streams before failing, so
     * reject a stream without its EOI up front. PS3.5 A.4 fragments are even
     * length, so an encoder may leave a pad byte (00H, or FFH from some
     * encoders) after EOI; up to 8 such bytes are skipped. FF D9 cannot occur
     * inside JPEG-LS scan data (a byte after FF has its top bit clear). */
    size_t end = len;
    while (end >= 2 && len - end <= 8 && !(data[end - 2] == 0xFF && data[end - 1] == 0xD9)) end--;
    if (end < 4 || data[end - 2] != 0xFF || data[end - 1] != 0xD9) {
        charls_jpegls_decoder_destroy(dec);
        return ms_errf(MS_EINVAL, "JPEG-LS: stream truncated (no EOI marker at the end)");
    }
    if (dec == NULL) return ms_errf(MS_ENOMEM, "JPEG-LS: cannot create decoder");
    if ((ec = charls_jpegls_decoder_set_source_buffer(dec, data, end)) !=
            CHARLS_JPEGLS_ERRC_SUCCESS ||
        (ec = charls_jpegls_decoder_read_header(dec)) != CHARLS_JPEGLS_ERRC_SUCCESS ||
        (ec = charls_jpegls_decoder_get_frame_info(dec, &fi)) != CHARLS_JPEGLS_ERRC_SUCCESS ||
        (ec = charls_jpegls_decoder_get_interleave_mode(dec, &ilv)) != CHARLS_JPEGLS_ERRC_SUCCESS) {
        st = ls_err("reading the header", ec);
        goto out;
    }
    if (fi.width != g->cols || fi.height != g->rows || fi.component_count != (int32_t)g->samples) {
        st = ms_errf(MS_EINVAL,
                     "JPEG-LS: stream is %ux%u with %d components, header says %ux%u with %u "
                     "samples",
                     fi.width, fi.height, fi.component_count, g->cols, g->rows, g->samples);
        goto out;
    }
    if (fi.bits_per_sample < 2 || fi.bits_per_sample > 16 ||
        (unsigned)fi.bits_per_sample > 8 * width) {
        st = ms_errf(MS_EINVAL, "JPEG-LS: %d-bit samples do not fit BitsAllocated %u",
                     fi.bits_per_sample, (unsigned)g->bits_allocated);
        goto out;
    }
    if ((ec = charls_jpegls_decoder_get_destination_size(dec, 0, &need)) !=
        CHARLS_JPEGLS_ERRC_SUCCESS) {
        st = ls_err("sizing the output", ec);
        goto out;
    }
    const unsigned lsw = fi.bits_per_sample <= 8 ? 1 : 2;
    const size_t nsamp = (size_t)fi.width * fi.height * (size_t)fi.component_count;
    if (need != nsamp * lsw) {
        st = ms_errf(MS_EINTERNAL, "JPEG-LS: unexpected decoded size %zu", need);
        goto out;
    }
    const int direct = lsw == width && (g->samples == 1 || ilv != CHARLS_INTERLEAVE_MODE_NONE);
    if (direct && need != out_size) {
        st = ms_errf(MS_EINTERNAL, "JPEG-LS: output size mismatch");
        goto out;
    }
    if (!direct && (tmp = malloc(need)) == NULL) {
        st = ms_errf(MS_ENOMEM, "JPEG-LS: out of memory");
        goto out;
    }
    if ((ec = charls_jpegls_decoder_decode_to_buffer(dec, direct ? out : tmp, need, 0)) !=
        CHARLS_JPEGLS_ERRC_SUCCESS) {
        st = ls_err("decoding", ec);
        goto out;
    }
    if (!direct) {
        const size_t npix = (size_t)fi.width * fi.height;
        const unsigned nc = g->samples;
        const int planar = nc > 1 && ilv == CHARLS_INTERLEAVE_MODE_NONE;
        for (size_t i = 0; i < nsamp; i++) {
            /* i is the output index (interleaved); src the CharLS index. */
            const size_t src = planar ? (i % nc) * npix + i / nc : i;
            uint32_t v =
                lsw == 1 ? tmp[src] : (uint32_t)tmp[2 * src] | ((uint32_t)tmp[2 * src + 1] << 8);
            dcm__put_sample(out, i, width, v);
        }
    }
out:
    free(tmp);
    charls_jpegls_decoder_destroy(dec);
    return st;
}
