/* dcm_jpeg_lossless.c - our JPEG Lossless decoder (ITU T.81 Annex H, process
 * 14; DICOM 1.2.840.10008.1.2.4.57 and .70): Huffman-coded differences,
 * predictors 1-7, point transform, restart intervals, 2-16 bit samples, 1..4
 * components in interleaved or separate scans (sampling factors 1x1).
 * libjpeg-turbo 2.1 in Debian 12 has no lossless support, hence this file. */
#include <stdlib.h>
#include <string.h>

#include "dcm_codec_int.h"
#include "dcm_jpeg_common.h"

/* Decodes one scan into buf (rows * cols * ncomp 16-bit values, interleaved),
 * marking the scan's components in done[]. */
static ms_status decode_scan(dcm__jpg *j, uint16_t *buf, int done[]) {
    const int ns = j->ns, nc = j->ncomp, cols = j->width, rows = j->height;
    const int psv = j->ss, pt = j->al;
    if (psv < 1 || psv > 7)
        return ms_errf(MS_EINVAL, "JPEG lossless: predictor selection %d (expected 1..7)", psv);
    if (pt >= j->precision)
        return ms_errf(MS_EINVAL, "JPEG lossless: point transform %d >= precision %d", pt,
                       j->precision);
    const dcm__huff *tab[DCM__JPG_MAX_COMP];
    int off[DCM__JPG_MAX_COMP];
    for (int i = 0; i < ns; i++) {
        const dcm__jpg_comp *c = &j->comp[j->scomp[i]];
        if (!j->dc[c->td].present)
            return ms_errf(MS_EINVAL, "JPEG lossless: scan uses undefined Huffman table %d", c->td);
        tab[i] = &j->dc[c->td];
        off[i] = j->scomp[i];
        if (done[off[i]]) return ms_errf(MS_EINVAL, "JPEG lossless: component decoded twice");
    }
    const unsigned ri = j->restart_interval;
    if (ri != 0 && ri % (unsigned)cols != 0)
        return ms_errf(MS_ENOTSUP,
                       "JPEG lossless: restart interval %u is not a multiple of the row (%d)", ri,
                       cols);
    const int32_t init = 1 << (j->precision - pt - 1);
    dcm__bits b;
    dcm__bits_init(&b, j);
    unsigned mcu = 0, nrst = 0;
    int first_row = 0; /* row that restarts prediction (first of the scan or interval) */
    for (int y = 0; y < rows; y++) {
        uint16_t *row = buf + (size_t)y * cols * nc;
        const uint16_t *up = y > 0 ? row - (size_t)cols * nc : row; /* used when y > first_row */
        for (int x = 0; x < cols; x++, mcu++) {
            if (ri != 0 && mcu != 0 && mcu % ri == 0) {
                if (dcm__bits_overran(&b))
                    return ms_errf(MS_EINVAL, "JPEG lossless: entropy data truncated");
                ms_status st = dcm__bits_restart(&b, nrst++);
                if (st != MS_OK) return st;
                first_row = y;
            }
            for (int i = 0; i < ns; i++) {
                const int k = off[i];
                int32_t pred;
                if (y == first_row) {
                    pred = x == 0 ? init : row[(size_t)(x - 1) * nc + k];
                } else if (x == 0) {
                    pred = up[k];
                } else {
                    const int32_t ra = row[(size_t)(x - 1) * nc + k];
                    const int32_t rb = up[(size_t)x * nc + k];
                    const int32_t rc = up[(size_t)(x - 1) * nc + k];
                    switch (psv) {
                    case 1: pred = ra; break;
                    case 2: pred = rb; break;
                    case 3: pred = rc; break;
                    case 4: pred = ra + rb - rc; break;
                    case 5: pred = ra + ((rb - rc) >> 1); break;
                    case 6: pred = rb + ((ra - rc) >> 1); break;
                    default: pred = (ra + rb) >> 1; break;
                    }
                }
                int s = dcm__huff_decode(&b, tab[i]);
                if (s < 0 || s > 16)
                    return ms_errf(MS_EINVAL,
                                   "JPEG lossless: invalid Huffman code at row %d column %d", y, x);
                int32_t diff;
                if (s == 16)
                    diff = 32768;
                else
                    diff = dcm__jpg_extend(dcm__bits_get(&b, s), s);
                row[(size_t)x * nc + k] = (uint16_t)(pred + diff);
            }
        }
        if (dcm__bits_overran(&b))
            return ms_errf(MS_EINVAL, "JPEG lossless: entropy data truncated at row %d of %d", y,
                           rows);
    }
    for (int i = 0; i < ns; i++) done[off[i]] = 1 + pt; /* remembers the point transform */
    dcm__jpg_resume(j, &b);
    return MS_OK;
}

ms_status dcm__jpeg_lossless_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g,
                                    uint8_t *out, size_t out_size) {
    dcm__jpg *j = malloc(sizeof(*j));
    uint16_t *buf = NULL;
    ms_status st;
    int done[DCM__JPG_MAX_COMP] = {0};
    if (j == NULL) return ms_errf(MS_ENOMEM, "JPEG lossless: out of memory");
    if ((st = dcm__jpg_init(j, data, len)) != MS_OK) goto out;
    for (;;) {
        int ev;
        if ((st = dcm__jpg_next(j, &ev)) != MS_OK) goto out;
        if (ev == DCM__JPG_EV_EOI) break;
        if (ev == DCM__JPG_EV_SOF) {
            const unsigned width = dcm__sample_bytes(g);
            if (j->sof != 0xC3) {
                st = ms_errf(MS_EINVAL, "JPEG lossless: frame is SOF%d, not lossless SOF3",
                             j->sof - 0xC0);
                goto out;
            }
            if (j->precision < 2 || j->precision > 16 || (unsigned)j->precision > 8 * width) {
                st = ms_errf(MS_EINVAL, "JPEG lossless: precision %d does not fit BitsAllocated %u",
                             j->precision, (unsigned)g->bits_allocated);
                goto out;
            }
            if ((uint32_t)j->width != g->cols || (uint32_t)j->height != g->rows ||
                j->ncomp != g->samples) {
                st = ms_errf(MS_EINVAL,
                             "JPEG lossless: stream is %dx%d with %d components, header says "
                             "%ux%u with %u samples",
                             j->width, j->height, j->ncomp, g->cols, g->rows, g->samples);
                goto out;
            }
            for (int i = 0; i < j->ncomp && j->ncomp > 1; i++) {
                if (j->comp[i].h != 1 || j->comp[i].v != 1) {
                    st = ms_errf(MS_ENOTSUP, "JPEG lossless: subsampled component %d (%dx%d)", i,
                                 j->comp[i].h, j->comp[i].v);
                    goto out;
                }
            }
            buf = calloc((size_t)j->width * j->height * j->ncomp, sizeof(uint16_t));
            if (buf == NULL) {
                st = ms_errf(MS_ENOMEM, "JPEG lossless: out of memory");
                goto out;
            }
        } else if (ev == DCM__JPG_EV_SOS) {
            if (buf == NULL) {
                st = ms_errf(MS_EINVAL, "JPEG lossless: scan before frame header");
                goto out;
            }
            if ((st = decode_scan(j, buf, done)) != MS_OK) goto out;
        }
    }
    if (buf == NULL) {
        st = ms_errf(MS_EINVAL, "JPEG lossless: no frame header (SOF3) in the stream");
        goto out;
    }
    for (int k = 0; k < j->ncomp; k++) {
        if (!done[k]) {
            st = ms_errf(MS_EINVAL, "JPEG lossless: no scan for component %d", k);
            goto out;
        }
    }
    {
        const unsigned width = dcm__sample_bytes(g);
        const size_t n = (size_t)j->width * j->height * j->ncomp;
        const int nc = j->ncomp;
        if (n * width != out_size) {
            st = ms_errf(MS_EINTERNAL, "JPEG lossless: output size mismatch");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            const int pt = done[i % (size_t)nc] - 1;
            dcm__put_sample(out, i, width, (uint32_t)buf[i] << pt);
        }
    }
    st = MS_OK;
out:
    free(buf);
    free(j);
    return st;
}
