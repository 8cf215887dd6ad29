/* dcm_j2k.c - JPEG 2000 (DICOM .4.90/.4.91) and HTJ2K (.4.201-.203) through
 * OpenJPEG 2.5 from a memory stream. Fragments hold a raw J2K codestream; a
 * (non-conformant) JP2 wrapper is detected and decoded too. OpenJPEG applies
 * the inverse RCT/ICT itself; components are interleaved on output and each
 * value is written as its raw two's-complement bit pattern in the output
 * width, so that the pixel module's BitsStored masking and sign extension
 * (which follow the DICOM header, not the stream) give the right value. */
#include <stdio.h>
#include <string.h>

#include <openjpeg.h>

#include "dcm_codec_int.h"

typedef struct mem_stream {
    const uint8_t *data; /* borrowed */
    size_t len, pos;
} mem_stream;

typedef struct opj_msgs {
    char err[256];
} opj_msgs;

static OPJ_SIZE_T ms_read(void *buf, OPJ_SIZE_T n, void *user) {
    mem_stream *m = user;
    if (m->pos >= m->len) return (OPJ_SIZE_T)-1;
    size_t k = m->len - m->pos;
    if (k > n) k = n;
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return k;
}

static OPJ_OFF_T ms_skip(OPJ_OFF_T n, void *user) {
    mem_stream *m = user;
    if (n < 0) {
        if ((size_t)(-n) > m->pos) return -1;
        m->pos -= (size_t)(-n);
        return n;
    }
    size_t k = m->len - m->pos;
    if ((uint64_t)n < k) k = (size_t)n;
    m->pos += k;
    return (OPJ_OFF_T)k;
}

static OPJ_BOOL ms_seek(OPJ_OFF_T pos, void *user) {
    mem_stream *m = user;
    if (pos < 0 || (uint64_t)pos > m->len) return OPJ_FALSE;
    m->pos = (size_t)pos;
    return OPJ_TRUE;
}

static void on_error(const char *msg, void *user) {
    opj_msgs *e = user;
    if (e->err[0] == '\0') {
        snprintf(e->err, sizeof(e->err), "%s", msg);
        size_t n = strlen(e->err);
        while (n > 0 && (e->err[n - 1] == '\n' || e->err[n - 1] == ' ')) e->err[--n] = '\0';
    }
}

static void on_quiet(const char *msg, void *user) {
    (void)msg;
    (void)user;
}

static int is_jp2(const uint8_t *d, size_t len) {
    return len >= 12 && memcmp(d + 4, "jP  ", 4) == 0;
}

static uint32_t rd32be(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Checks the SIZ marker against geom before OpenJPEG sees the stream: a
 * corrupt size would make opj_read_header allocate (and clear) tile
 * structures for a gigapixel image, which takes seconds. */
static ms_status check_siz(const uint8_t *d, size_t len, int jp2, const dcm_frame_geom *g) {
    size_t pos = 0;
    if (jp2) {
        /* Walk the top-level boxes to the contiguous codestream box. */
        for (;;) {
            if (pos + 8 > len) return ms_errf(MS_EINVAL, "J2K: JP2 file without a codestream box");
            uint64_t blen = rd32be(d + pos), hdr = 8;
            if (blen == 1) {
                if (pos + 16 > len) return ms_errf(MS_EINVAL, "J2K: JP2 box header truncated");
                blen = ((uint64_t)rd32be(d + pos + 8) << 32) | rd32be(d + pos + 12);
                hdr = 16;
            } else if (blen == 0) {
                blen = len - pos;
            }
            if (memcmp(d + pos + 4, "jp2c", 4) == 0) {
                pos += hdr;
                break;
            }
            if (blen < hdr || blen > len - pos)
                return ms_errf(MS_EINVAL, "J2K: JP2 box length %llu runs past the data",
                               (unsigned long long)blen);
            pos += blen;
        }
    }
    const uint8_t *p = d + pos;
    if (len - pos < 4 + 38 || p[0] != 0xFF || p[1] != 0x4F || p[2] != 0xFF || p[3] != 0x51)
        return ms_errf(MS_EINVAL, "J2K: codestream does not start with SOC+SIZ");
    const uint32_t xs = rd32be(p + 8), ys = rd32be(p + 12), xo = rd32be(p + 16),
                   yo = rd32be(p + 20), xt = rd32be(p + 24), yt = rd32be(p + 28),
                   xto = rd32be(p + 32), yto = rd32be(p + 36);
    const unsigned nc = ((unsigned)p[40] << 8) | p[41];
    if (xs <= xo || ys <= yo || xs - xo != g->cols || ys - yo != g->rows)
        return ms_errf(MS_EINVAL, "J2K: stream is %ux%u, header says %ux%u", xs - xo, ys - yo,
                       g->cols, g->rows);
    if (nc != g->samples)
        return ms_errf(MS_EINVAL, "J2K: stream has %u components, header says %u samples", nc,
                       g->samples);
    if (xt == 0 || yt == 0 || xto > xo || yto > yo)
        return ms_errf(MS_EINVAL, "J2K: bad tile grid in SIZ");
    const uint64_t ntiles =
        (uint64_t)((xs - xto + (uint64_t)xt - 1) / xt) * ((ys - yto + (uint64_t)yt - 1) / yt);
    if (ntiles > 65535)
        return ms_errf(MS_EINVAL, "J2K: %llu tiles (at most 65535)", (unsigned long long)ntiles);
    return MS_OK;
}

ms_status dcm__j2k_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                          size_t out_size, int *out_rgb_converted) {
    const unsigned width = dcm__sample_bytes(g);
    mem_stream m = {data, len, 0};
    opj_msgs msgs = {{0}};
    opj_dparameters_t par;
    opj_image_t *img = NULL;
    opj_codec_t *codec = NULL;
    opj_stream_t *stream = NULL;
    ms_status st = MS_OK;
    int mct = 0;

    if (len < 12) return ms_errf(MS_EINVAL, "J2K: %zu bytes is too short for a codestream", len);
    const int jp2 = is_jp2(data, len);
    if (!jp2 && !(data[0] == 0xFF && data[1] == 0x4F && data[2] == 0xFF && data[3] == 0x51))
        return ms_errf(MS_EINVAL,
                       "J2K: stream starts with %02X %02X %02X %02X, not SOC+SIZ "
                       "(FF 4F FF 51) nor a JP2 box",
                       data[0], data[1], data[2], data[3]);
    if ((st = check_siz(data, len, jp2, g)) != MS_OK) return st;
    codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
    stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
    if (codec == NULL || stream == NULL) {
        st = ms_errf(MS_ENOMEM, "J2K: cannot create decoder");
        goto out;
    }
    opj_stream_set_user_data(stream, &m, NULL);
    opj_stream_set_user_data_length(stream, len);
    opj_stream_set_read_function(stream, ms_read);
    opj_stream_set_skip_function(stream, ms_skip);
    opj_stream_set_seek_function(stream, ms_seek);
    opj_set_error_handler(codec, on_error, &msgs);
    opj_set_warning_handler(codec, on_quiet, NULL);
    opj_set_info_handler(codec, on_quiet, NULL);
    opj_set_default_decoder_parameters(&par);
    if (!opj_setup_decoder(codec, &par)) {
        st = ms_errf(MS_EINVAL, "J2K: cannot set up the decoder: %s",
                     msgs.err[0] ? msgs.err : "unknown error");
        goto out;
    }
    /* A single frame: OpenJPEG decodes its code-blocks on its own threads
     * (no effect where it was built without thread support). */
    if (g->threads > 1) (void)opj_codec_set_threads(codec, (int)g->threads);
    if (!opj_read_header(stream, codec, &img) || img == NULL) {
        st = ms_errf(MS_EINVAL, "J2K: bad header: %s", msgs.err[0] ? msgs.err : "unknown error");
        goto out;
    }
    if (img->numcomps != g->samples) {
        st = ms_errf(MS_EINVAL, "J2K: stream has %u components, header says %u samples",
                     img->numcomps, g->samples);
        goto out;
    }
    for (unsigned c = 0; c < img->numcomps; c++) {
        const opj_image_comp_t *cp = &img->comps[c];
        if (cp->dx != 1 || cp->dy != 1) {
            st = ms_errf(MS_ENOTSUP, "J2K: component %u is subsampled (%ux%u)", c, cp->dx, cp->dy);
            goto out;
        }
        if (cp->prec < 1 || cp->prec > 8 * width || cp->prec > 31) {
            st = ms_errf(MS_EINVAL, "J2K: component %u precision %u does not fit BitsAllocated %u",
                         c, cp->prec, (unsigned)g->bits_allocated);
            goto out;
        }
    }
    if (img->x1 <= img->x0 || img->y1 <= img->y0 || img->x1 - img->x0 != g->cols ||
        img->y1 - img->y0 != g->rows) {
        st = ms_errf(MS_EINVAL, "J2K: stream is %ux%u, header says %ux%u", img->x1 - img->x0,
                     img->y1 - img->y0, g->cols, g->rows);
        goto out;
    }
    {
        opj_codestream_info_v2_t *ci = opj_get_cstr_info(codec);
        if (ci != NULL) {
            mct = ci->m_default_tile_info.mct != 0 && img->numcomps >= 3;
            opj_destroy_cstr_info(&ci);
        }
    }
    if (!opj_decode(codec, stream, img) || !opj_end_decompress(codec, stream)) {
        st = ms_errf(MS_EINVAL, "J2K: decoding failed: %s",
                     msgs.err[0] ? msgs.err : "unknown error");
        goto out;
    }
    {
        const size_t npix = (size_t)g->rows * g->cols;
        const unsigned nc = img->numcomps;
        if (npix * nc * width != out_size) {
            st = ms_errf(MS_EINTERNAL, "J2K: output size mismatch");
            goto out;
        }
        for (unsigned c = 0; c < nc; c++) {
            const opj_image_comp_t *cp = &img->comps[c];
            if (cp->data == NULL || cp->w != g->cols || cp->h != g->rows) {
                st = ms_errf(MS_EINVAL, "J2K: component %u decoded as %ux%u, expected %ux%u", c,
                             cp->w, cp->h, g->cols, g->rows);
                goto out;
            }
        }
        for (unsigned c = 0; c < nc; c++) {
            const OPJ_INT32 *src = img->comps[c].data;
            for (size_t i = 0; i < npix; i++)
                dcm__put_sample(out, i * nc + c, width, (uint32_t)src[i]);
        }
    }
    *out_rgb_converted = mct;
out:
    if (img) opj_image_destroy(img);
    if (stream) opj_stream_destroy(stream);
    if (codec) opj_destroy_codec(codec);
    return st;
}
