/* dcm_jpeg12.c - our sequential DCT JPEG decoder for 12-bit samples (ITU T.81
 * process 4, SOF1 with P=12; DICOM 1.2.840.10008.1.2.4.51), which Debian 12's
 * libjpeg-turbo cannot decode. Huffman coding, baseline/extended sequential
 * scans (interleaved or not), restart intervals, 1 or 3 components without
 * chroma subsampling. The inverse DCT is the separable textbook form in double
 * precision, rounded to nearest and clamped to 0..2^P-1. It handles P=8 too,
 * although dcm_codec.c sends 8-bit streams to libjpeg-turbo. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_codec_int.h"
#include "dcm_jpeg_common.h"

typedef struct j12_state {
    dcm__jpg j;
    int bw, bh; /* blocks per row / column (all components 1x1) */
    uint16_t *plane[DCM__JPG_MAX_COMP];
    int done[DCM__JPG_MAX_COMP];
    double cosk[8][8]; /* cosk[u][x] = C(u)/2 * cos((2x+1)u pi/16) */
} j12_state;

static void idct_block(const j12_state *s, const int32_t coef[64], uint16_t *dst, size_t stride,
                       int precision) {
    double t[8][8];
    const int center = 1 << (precision - 1), maxv = (1 << precision) - 1;
    for (int v = 0; v < 8; v++) {
        const int32_t *r = coef + 8 * v;
        int nz = 0;
        for (int u = 1; u < 8; u++) nz |= r[u];
        if (!nz) {
            const double d = r[0] * s->cosk[0][0];
            for (int x = 0; x < 8; x++) t[v][x] = d;
            continue;
        }
        for (int x = 0; x < 8; x++) {
            double acc = 0;
            for (int u = 0; u < 8; u++) acc += s->cosk[u][x] * r[u];
            t[v][x] = acc;
        }
    }
    for (int y = 0; y < 8; y++) {
        uint16_t *o = dst + (size_t)y * stride;
        for (int x = 0; x < 8; x++) {
            double acc = 0;
            for (int v = 0; v < 8; v++) acc += s->cosk[v][y] * t[v][x];
            long val = (long)floor(acc + 0.5) + center;
            o[x] = (uint16_t)(val < 0 ? 0 : (val > maxv ? maxv : val));
        }
    }
}

static ms_status decode_scan(j12_state *s) {
    dcm__jpg *j = &s->j;
    /* Ss/Se/Ah/Al carry no meaning in sequential mode; like libjpeg, ignore
     * them (pydicom's JPEG-lossy.dcm has Se = 0). */
    const int ns = j->ns;
    const dcm__huff *dc[DCM__JPG_MAX_COMP], *ac[DCM__JPG_MAX_COMP];
    const uint16_t *qt[DCM__JPG_MAX_COMP];
    for (int i = 0; i < ns; i++) {
        const dcm__jpg_comp *c = &j->comp[j->scomp[i]];
        if (!j->dc[c->td].present || !j->ac[c->ta].present)
            return ms_errf(MS_EINVAL, "JPEG: scan uses an undefined Huffman table");
        if (!j->qt_present[c->tq])
            return ms_errf(MS_EINVAL, "JPEG: component uses undefined quantisation table %d",
                           c->tq);
        if (s->done[j->scomp[i]]) return ms_errf(MS_EINVAL, "JPEG: component decoded twice");
        dc[i] = &j->dc[c->td];
        ac[i] = &j->ac[c->ta];
        qt[i] = j->qt[c->tq];
    }
    const unsigned ri = j->restart_interval;
    const size_t stride = (size_t)s->bw * 8;
    int32_t pred[DCM__JPG_MAX_COMP] = {0};
    unsigned mcu = 0, nrst = 0;
    dcm__bits b;
    dcm__bits_init(&b, j);
    for (int by = 0; by < s->bh; by++) {
        for (int bx = 0; bx < s->bw; bx++, mcu++) {
            if (ri != 0 && mcu != 0 && mcu % ri == 0) {
                if (dcm__bits_overran(&b))
                    return ms_errf(MS_EINVAL, "JPEG: entropy data truncated");
                ms_status st = dcm__bits_restart(&b, nrst++);
                if (st != MS_OK) return st;
                memset(pred, 0, sizeof(pred));
            }
            for (int i = 0; i < ns; i++) {
                int32_t coef[64] = {0};
                int t = dcm__huff_decode(&b, dc[i]);
                if (t < 0 || t > 16)
                    return ms_errf(MS_EINVAL, "JPEG: invalid DC Huffman code in block %d,%d", bx,
                                   by);
                pred[i] += dcm__jpg_extend(dcm__bits_get(&b, t), t);
                if (pred[i] > 65535 || pred[i] < -65535)
                    return ms_errf(MS_EINVAL, "JPEG: DC value %d out of range in block %d,%d",
                                   (int)pred[i], bx, by);
                coef[0] = pred[i] * qt[i][0];
                for (int k = 1; k < 64;) {
                    int rs = dcm__huff_decode(&b, ac[i]);
                    if (rs < 0)
                        return ms_errf(MS_EINVAL, "JPEG: invalid AC Huffman code in block %d,%d",
                                       bx, by);
                    int r = rs >> 4, sz = rs & 15;
                    if (sz == 0) {
                        if (r != 15) break;
                        k += 16;
                        continue;
                    }
                    k += r;
                    if (k > 63)
                        return ms_errf(MS_EINVAL, "JPEG: AC run past coefficient 63 in block %d,%d",
                                       bx, by);
                    coef[dcm__jpg_zigzag[k]] =
                        dcm__jpg_extend(dcm__bits_get(&b, sz), sz) * qt[i][k];
                    k++;
                }
                uint16_t *dst = s->plane[j->scomp[i]] + (size_t)by * 8 * stride + (size_t)bx * 8;
                idct_block(s, coef, dst, stride, j->precision);
            }
        }
        if (dcm__bits_overran(&b))
            return ms_errf(MS_EINVAL, "JPEG: entropy data truncated at block row %d of %d", by,
                           s->bh);
    }
    for (int i = 0; i < ns; i++) s->done[j->scomp[i]] = 1;
    dcm__jpg_resume(j, &b);
    return MS_OK;
}

static ms_status on_sof(j12_state *s, const dcm_frame_geom *g) {
    dcm__jpg *j = &s->j;
    const unsigned width = dcm__sample_bytes(g);
    if (j->sof != 0xC0 && j->sof != 0xC1) {
        if (j->sof == 0xC2 || j->sof == 0xC6 || j->sof == 0xCA || j->sof == 0xCE)
            return ms_errf(MS_ENOTSUP, "JPEG: progressive %d-bit JPEG (SOF%d) is not supported",
                           j->precision, j->sof - 0xC0);
        return ms_errf(MS_ENOTSUP, "JPEG: SOF%d is not a Huffman sequential DCT frame",
                       j->sof - 0xC0);
    }
    if (j->precision != 8 && j->precision != 12)
        return ms_errf(MS_EINVAL, "JPEG: DCT data precision %d (expected 8 or 12)", j->precision);
    if ((unsigned)j->precision > 8 * width)
        return ms_errf(MS_EINVAL, "JPEG: %d-bit samples do not fit BitsAllocated %u", j->precision,
                       (unsigned)g->bits_allocated);
    if ((uint32_t)j->width != g->cols || (uint32_t)j->height != g->rows || j->ncomp != g->samples)
        return ms_errf(MS_EINVAL,
                       "JPEG: stream is %dx%d with %d components, header says %ux%u with %u "
                       "samples",
                       j->width, j->height, j->ncomp, g->cols, g->rows, g->samples);
    if (j->ncomp > 1) {
        for (int i = 0; i < j->ncomp; i++)
            if (j->comp[i].h != 1 || j->comp[i].v != 1)
                return ms_errf(MS_ENOTSUP,
                               "JPEG: %d-bit colour with chroma subsampling is not supported",
                               j->precision);
    }
    s->bw = (j->width + 7) / 8;
    s->bh = (j->height + 7) / 8;
    for (int i = 0; i < j->ncomp; i++) {
        s->plane[i] = calloc((size_t)s->bw * s->bh * 64, sizeof(uint16_t));
        if (s->plane[i] == NULL) return ms_errf(MS_ENOMEM, "JPEG: out of memory");
    }
    return MS_OK;
}

/* Writes the decoded planes to out, converting YCbCr to RGB when asked. */
static void emit(const j12_state *s, const dcm_frame_geom *g, uint8_t *out, int ybr) {
    const dcm__jpg *j = &s->j;
    const unsigned width = dcm__sample_bytes(g);
    const size_t stride = (size_t)s->bw * 8;
    const int nc = j->ncomp;
    const double center = (double)(1 << (j->precision - 1));
    const long maxv = (1L << j->precision) - 1;
    size_t i = 0;
    for (int y = 0; y < j->height; y++) {
        for (int x = 0; x < j->width; x++) {
            const size_t o = (size_t)y * stride + x;
            if (nc == 3 && ybr) {
                const double yy = s->plane[0][o], cb = s->plane[1][o] - center,
                             cr = s->plane[2][o] - center;
                const double rgb[3] = {yy + 1.402 * cr, yy - 0.344136286 * cb - 0.714136286 * cr,
                                       yy + 1.772 * cb};
                for (int c = 0; c < 3; c++) {
                    long v = (long)floor(rgb[c] + 0.5);
                    dcm__put_sample(out, i++, width, (uint32_t)(v < 0 ? 0 : (v > maxv ? maxv : v)));
                }
            } else {
                for (int c = 0; c < nc; c++) dcm__put_sample(out, i++, width, s->plane[c][o]);
            }
        }
    }
}

ms_status dcm__jpeg12_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                             size_t out_size, int *out_rgb_converted) {
    j12_state *s = calloc(1, sizeof(*s));
    ms_status st;
    if (s == NULL) return ms_errf(MS_ENOMEM, "JPEG: out of memory");
    for (int u = 0; u < 8; u++)
        for (int x = 0; x < 8; x++)
            s->cosk[u][x] = (u == 0 ? sqrt(0.5) : 1.0) * 0.5 * cos((2 * x + 1) * u * M_PI / 16.0);
    if ((st = dcm__jpg_init(&s->j, data, len)) != MS_OK) goto out;
    for (;;) {
        int ev;
        if ((st = dcm__jpg_next(&s->j, &ev)) != MS_OK) goto out;
        if (ev == DCM__JPG_EV_EOI) break;
        if (ev == DCM__JPG_EV_SOF) {
            if ((st = on_sof(s, g)) != MS_OK) goto out;
        } else if (ev == DCM__JPG_EV_SOS) {
            if ((st = decode_scan(s)) != MS_OK) goto out;
        }
    }
    if (!s->j.sof) {
        st = ms_errf(MS_EINVAL, "JPEG: no frame header (SOF) in the stream");
        goto out;
    }
    for (int k = 0; k < s->j.ncomp; k++) {
        if (!s->done[k]) {
            st = ms_errf(MS_EINVAL, "JPEG: no scan for component %d (stream truncated?)", k);
            goto out;
        }
    }
    if ((size_t)s->j.width * s->j.height * s->j.ncomp * dcm__sample_bytes(g) != out_size) {
        st = ms_errf(MS_EINTERNAL, "JPEG: output size mismatch");
        goto out;
    }
    {
        const int ybr = s->j.ncomp == 3 && dcm__photometric_is_ybr(g->photometric);
        emit(s, g, out, ybr);
        *out_rgb_converted = ybr;
    }
    st = MS_OK;
out:
    for (int i = 0; i < DCM__JPG_MAX_COMP; i++) free(s->plane[i]);
    free(s);
    return st;
}
