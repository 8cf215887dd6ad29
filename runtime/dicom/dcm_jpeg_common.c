/* dcm_jpeg_common.c - T.81 marker parser, Huffman table builder and entropy
 * bit reader shared by the process-14 lossless and 12-bit DCT decoders. */
#include "dcm_jpeg_common.h"

#include <string.h>

#include "dcm_codec_int.h"

/* clang-format off */
const uint8_t dcm__jpg_zigzag[64] = {
     0,  1,  8, 16,  9,  2,  3, 10, 17, 24, 32, 25, 18, 11,  4,  5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,  6,  7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};
/* clang-format on */

static unsigned rd16(const uint8_t *p) {
    return ((unsigned)p[0] << 8) | p[1];
}

ms_status dcm__jpg_init(dcm__jpg *j, const uint8_t *data, size_t len) {
    memset(j, 0, sizeof(*j));
    j->data = data;
    j->len = len;
    if (len < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return ms_errf(MS_EINVAL, "JPEG: stream does not start with SOI (FF D8)");
    j->pos = 2;
    return MS_OK;
}

/* Builds the derived tables of a Huffman table from its 16 counts and values. */
static ms_status huff_build(dcm__huff *h, const uint8_t counts[16], const uint8_t *vals,
                            int nvals) {
    memset(h, 0, sizeof(*h));
    memcpy(h->vals, vals, (size_t)nvals);
    int32_t code = 0;
    int k = 0;
    for (int l = 1; l <= 16; l++) {
        int n = counts[l - 1];
        h->valoff[l] = k - code;
        if (n == 0) {
            h->maxcode[l] = -1;
        } else {
            for (int i = 0; i < n; i++, k++, code++) {
                if (code >= (1 << l))
                    return ms_errf(MS_EINVAL, "JPEG: Huffman table has too many codes of length %d",
                                   l);
                if (l <= 9) {
                    int shift = 9 - l;
                    uint32_t first = (uint32_t)code << shift;
                    for (uint32_t e = 0; e < (1u << shift); e++)
                        h->look[first + e] = (uint16_t)((l << 8) | vals[k]);
                }
            }
            h->maxcode[l] = code - 1;
        }
        code <<= 1;
    }
    h->maxcode[17] = 0x7FFFFFFF;
    h->present = 1;
    return MS_OK;
}

static ms_status parse_dht(dcm__jpg *j, const uint8_t *p, size_t n) {
    while (n > 0) {
        if (n < 17) return ms_errf(MS_EINVAL, "JPEG: DHT segment truncated");
        int tc = p[0] >> 4, th = p[0] & 15;
        if (tc > 1 || th > 3)
            return ms_errf(MS_EINVAL, "JPEG: DHT class %d / id %d out of range", tc, th);
        int total = 0;
        for (int i = 0; i < 16; i++) total += p[1 + i];
        if (total > 256 || (size_t)total > n - 17)
            return ms_errf(MS_EINVAL, "JPEG: DHT declares %d codes, segment holds %zu", total,
                           n - 17);
        ms_status st = huff_build(tc == 0 ? &j->dc[th] : &j->ac[th], p + 1, p + 17, total);
        if (st != MS_OK) return st;
        p += 17 + total;
        n -= 17 + (size_t)total;
    }
    return MS_OK;
}

static ms_status parse_dqt(dcm__jpg *j, const uint8_t *p, size_t n) {
    while (n > 0) {
        int pq = p[0] >> 4, tq = p[0] & 15;
        size_t need = 1 + (pq ? 128u : 64u);
        if (pq > 1 || tq > 3 || n < need)
            return ms_errf(MS_EINVAL, "JPEG: bad DQT segment (precision %d, id %d, %zu bytes)", pq,
                           tq, n);
        for (int i = 0; i < 64; i++) j->qt[tq][i] = (uint16_t)(pq ? rd16(p + 1 + 2 * i) : p[1 + i]);
        j->qt_present[tq] = 1;
        p += need;
        n -= need;
    }
    return MS_OK;
}

static ms_status parse_sof(dcm__jpg *j, int marker, const uint8_t *p, size_t n) {
    if (j->sof) return ms_errf(MS_EINVAL, "JPEG: second frame header (SOF) in one stream");
    if (n < 6) return ms_errf(MS_EINVAL, "JPEG: SOF segment truncated");
    j->sof = marker;
    j->precision = p[0];
    j->height = (int)rd16(p + 1);
    j->width = (int)rd16(p + 3);
    j->ncomp = p[5];
    if (j->ncomp < 1 || j->ncomp > DCM__JPG_MAX_COMP)
        return ms_errf(MS_EINVAL, "JPEG: %d components in SOF (1..4 supported)", j->ncomp);
    if (n < 6 + 3 * (size_t)j->ncomp) return ms_errf(MS_EINVAL, "JPEG: SOF segment truncated");
    j->hmax = j->vmax = 1;
    for (int i = 0; i < j->ncomp; i++) {
        dcm__jpg_comp *c = &j->comp[i];
        c->id = p[6 + 3 * i];
        c->h = p[7 + 3 * i] >> 4;
        c->v = p[7 + 3 * i] & 15;
        c->tq = p[8 + 3 * i];
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq > 3)
            return ms_errf(MS_EINVAL, "JPEG: component %d has sampling %dx%d, table %d", i, c->h,
                           c->v, c->tq);
        if (c->h > j->hmax) j->hmax = c->h;
        if (c->v > j->vmax) j->vmax = c->v;
    }
    return MS_OK;
}

static ms_status parse_sos(dcm__jpg *j, const uint8_t *p, size_t n) {
    if (!j->sof) return ms_errf(MS_EINVAL, "JPEG: scan (SOS) before the frame header (SOF)");
    if (n < 1) return ms_errf(MS_EINVAL, "JPEG: SOS segment truncated");
    j->ns = p[0];
    if (j->ns < 1 || j->ns > j->ncomp || n < 4 + 2 * (size_t)j->ns)
        return ms_errf(MS_EINVAL, "JPEG: SOS with %d components (frame has %d)", j->ns, j->ncomp);
    for (int i = 0; i < j->ns; i++) {
        int id = p[1 + 2 * i], k;
        for (k = 0; k < j->ncomp; k++)
            if (j->comp[k].id == id) break;
        if (k == j->ncomp) return ms_errf(MS_EINVAL, "JPEG: SOS names unknown component %d", id);
        for (int m = 0; m < i; m++)
            if (j->scomp[m] == k) return ms_errf(MS_EINVAL, "JPEG: SOS repeats component %d", id);
        j->scomp[i] = k;
        j->comp[k].td = p[2 + 2 * i] >> 4;
        j->comp[k].ta = p[2 + 2 * i] & 15;
        if (j->comp[k].td > 3 || j->comp[k].ta > 3)
            return ms_errf(MS_EINVAL, "JPEG: SOS Huffman table id out of range");
    }
    const uint8_t *q = p + 1 + 2 * j->ns;
    j->ss = q[0];
    j->se = q[1];
    j->ah = q[2] >> 4;
    j->al = q[2] & 15;
    return MS_OK;
}

ms_status dcm__jpg_next(dcm__jpg *j, int *ev) {
    for (;;) {
        /* Find the next marker: FF followed by a byte other than 00 and FF. */
        while (j->pos + 1 < j->len && !(j->data[j->pos] == 0xFF && j->data[j->pos + 1] != 0x00 &&
                                        j->data[j->pos + 1] != 0xFF))
            j->pos++;
        if (j->pos + 1 >= j->len) {
            j->pos = j->len;
            *ev = DCM__JPG_EV_EOI;
            return MS_OK;
        }
        int m = j->data[j->pos + 1];
        j->pos += 2;
        if (m == 0xD9) {
            *ev = DCM__JPG_EV_EOI;
            return MS_OK;
        }
        if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) continue; /* no length */
        if (j->pos + 2 > j->len)
            return ms_errf(MS_EINVAL, "JPEG: marker FF %02X at end of data", (unsigned)m);
        size_t seglen = rd16(j->data + j->pos);
        if (seglen < 2 || seglen > j->len - j->pos)
            return ms_errf(MS_EINVAL,
                           "JPEG: marker FF %02X segment length %zu runs past the data (%zu left)",
                           (unsigned)m, seglen, j->len - j->pos);
        const uint8_t *p = j->data + j->pos + 2;
        size_t n = seglen - 2;
        j->pos += seglen;
        ms_status st = MS_OK;
        switch (m) {
        case 0xC4: st = parse_dht(j, p, n); break;
        case 0xDB: st = parse_dqt(j, p, n); break;
        case 0xDD:
            if (n < 2) return ms_errf(MS_EINVAL, "JPEG: DRI segment truncated");
            j->restart_interval = rd16(p);
            break;
        case 0xDA:
            if ((st = parse_sos(j, p, n)) != MS_OK) return st;
            *ev = DCM__JPG_EV_SOS;
            return MS_OK;
        case 0xDC: return ms_errf(MS_ENOTSUP, "JPEG: DNL marker (height defined after the scan)");
        case 0xC0:
        case 0xC1:
        case 0xC2:
        case 0xC3:
        case 0xC5:
        case 0xC6:
        case 0xC7:
        case 0xC9:
        case 0xCA:
        case 0xCB:
        case 0xCD:
        case 0xCE:
        case 0xCF:
            if ((st = parse_sof(j, m, p, n)) != MS_OK) return st;
            *ev = DCM__JPG_EV_SOF;
            return MS_OK;
        default: break; /* APPn, COM, DAC, ...: skipped */
        }
        if (st != MS_OK) return st;
    }
}

void dcm__bits_init(dcm__bits *b, const dcm__jpg *j) {
    memset(b, 0, sizeof(*b));
    b->p = j->data + j->pos;
    b->end = j->data + j->len;
}

void dcm__jpg_resume(dcm__jpg *j, const dcm__bits *b) {
    j->pos = (size_t)(b->p - j->data);
}

void dcm__bits_fill(dcm__bits *b) {
    while (b->nbits <= 56) {
        uint32_t byte = 0;
        if (b->marker == 0 && b->p < b->end) {
            byte = *b->p;
            if (byte == 0xFF) {
                if (b->p + 1 < b->end && b->p[1] == 0x00) {
                    b->p += 2;
                } else if (b->p + 1 < b->end && b->p[1] == 0xFF) {
                    b->p++; /* fill byte before a marker */
                    continue;
                } else {
                    b->marker = (b->p + 1 < b->end) ? b->p[1] : 0x100;
                    byte = 0;
                    b->zeros++;
                }
            } else {
                b->p++;
            }
        } else {
            b->zeros++;
        }
        b->acc = (b->acc << 8) | byte;
        b->nbits += 8;
    }
}

ms_status dcm__bits_restart(dcm__bits *b, unsigned expected) {
    int want = 0xD0 + (int)(expected & 7);
    if (b->marker == 0) {
        /* Skip the padding bits of the interval, then expect the marker. */
        while (b->p < b->end && *b->p != 0xFF) b->p++;
        while (b->p + 1 < b->end && b->p[0] == 0xFF && b->p[1] == 0xFF) b->p++;
        if (b->p + 1 < b->end) b->marker = b->p[1];
    }
    if (b->marker != want)
        return ms_errf(MS_EINVAL, "JPEG: expected restart marker RST%u, found %s%02X",
                       expected & 7u, b->marker ? "FF " : "none/", (unsigned)(b->marker & 0xFF));
    b->p += 2;
    b->marker = 0;
    b->acc = 0;
    b->nbits = 0;
    b->zeros = 0;
    return MS_OK;
}

int dcm__photometric_is_ybr(const char *photometric) {
    return photometric != NULL && strncmp(photometric, "YBR_FULL", 8) == 0;
}

ms_status dcm__jpeg_find_sof(const uint8_t *data, size_t len, dcm__jpeg_sof *out) {
    dcm__jpg j;
    out->marker = 0;
    out->precision = 0;
    ms_status st = dcm__jpg_init(&j, data, len);
    if (st != MS_OK) return st;
    for (;;) {
        int ev;
        if ((st = dcm__jpg_next(&j, &ev)) != MS_OK) return st;
        if (ev == DCM__JPG_EV_SOF) {
            out->marker = j.sof;
            out->precision = j.precision;
            return MS_OK;
        }
        if (ev == DCM__JPG_EV_SOS) return ms_errf(MS_EINVAL, "JPEG: scan before frame header");
        if (ev == DCM__JPG_EV_EOI) return ms_errf(MS_EINVAL, "JPEG: no frame header (SOF)");
    }
}
