/* dcm_jpeg_common.h - ITU T.81 marker parsing, Huffman tables and the entropy
 * bit reader shared by our own JPEG decoders (dcm_jpeg_lossless.c for process
 * 14, dcm_jpeg12.c for 12-bit sequential DCT).
 *
 * Everything here works on a caller-owned byte range and caller-owned structs;
 * nothing is global, so decoders can run on many threads at once. All reads
 * are bounds-checked: a marker segment that runs past the end of the data, a
 * malformed table or an invalid Huffman code is an MS_EINVAL with a reason.
 */
#ifndef DCM_JPEG_COMMON_H
#define DCM_JPEG_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

#define DCM__JPG_MAX_COMP 4

/* A Huffman table (DHT) with its derived decoding tables. */
typedef struct dcm__huff {
    int present;
    uint8_t vals[256];
    int32_t maxcode[18]; /* largest code of each length, -1 when none */
    int32_t valoff[17];  /* vals index of the first code of a length, minus that code */
    uint16_t look[512];  /* 9-bit lookahead: (length << 8) | value, 0 = longer code */
} dcm__huff;

typedef struct dcm__jpg_comp {
    int id, h, v, tq; /* from SOF */
    int td, ta;       /* from the current SOS */
} dcm__jpg_comp;

/* Parser state for one JPEG stream. */
typedef struct dcm__jpg {
    const uint8_t *data; /* borrowed */
    size_t len, pos;
    int sof; /* SOFn marker seen (0xC0..), 0 before */
    int precision, width, height, ncomp;
    dcm__jpg_comp comp[DCM__JPG_MAX_COMP];
    int hmax, vmax;
    dcm__huff dc[4], ac[4];
    uint16_t qt[4][64]; /* in zig-zag order */
    int qt_present[4];
    unsigned restart_interval;
    /* Current scan. */
    int ns;
    int scomp[DCM__JPG_MAX_COMP]; /* indexes into comp[] */
    int ss, se, ah, al;
} dcm__jpg;

/* Entropy-coded data reader: handles FF00 stuffing; stops at a marker and
 * then feeds zero bits, counting them so that truncation can be detected. */
typedef struct dcm__bits {
    const uint8_t *p, *end; /* borrowed */
    uint64_t acc;
    int nbits;
    int marker;   /* marker code that stopped reading, 0 while none */
    size_t zeros; /* zero bytes fed after the data stopped */
} dcm__bits;

/* Events returned by dcm__jpg_next. */
enum {
    DCM__JPG_EV_SOF = 1, /* frame header parsed into j */
    DCM__JPG_EV_SOS,     /* scan header parsed; j->pos is the entropy data start */
    DCM__JPG_EV_EOI,     /* EOI marker, or the end of the data */
};

/* Zig-zag index -> natural (row-major) index. */
extern const uint8_t dcm__jpg_zigzag[64];

/* Starts parsing data[0..len): checks SOI. */
ms_status dcm__jpg_init(dcm__jpg *j, const uint8_t *data, size_t len);

/* Reads markers, storing tables, until SOF, SOS or EOI; *ev says which. Bytes
 * that are not a marker are skipped (garbage after entropy data). */
ms_status dcm__jpg_next(dcm__jpg *j, int *ev);

/* Starts reading entropy-coded data at j->pos. */
void dcm__bits_init(dcm__bits *b, const dcm__jpg *j);

/* Continues parsing after the entropy data that b stopped at. */
void dcm__jpg_resume(dcm__jpg *j, const dcm__bits *b);

/* At a restart boundary: drops the remaining bits and consumes RSTn where n =
 * expected % 8; MS_EINVAL when another marker (or none) is there. */
ms_status dcm__bits_restart(dcm__bits *b, unsigned expected);

/* 1 when bits beyond the end of the entropy data were consumed. */
static inline int dcm__bits_overran(const dcm__bits *b) {
    return b->zeros * 8 > (size_t)b->nbits;
}

void dcm__bits_fill(dcm__bits *b);

static inline uint32_t dcm__bits_get(dcm__bits *b, int n) {
    if (n == 0) return 0;
    if (b->nbits < n) dcm__bits_fill(b);
    b->nbits -= n;
    return (uint32_t)(b->acc >> b->nbits) & ((1u << n) - 1u);
}

/* Decodes one Huffman symbol; -1 for an invalid code. */
static inline int dcm__huff_decode(dcm__bits *b, const dcm__huff *h) {
    if (b->nbits < 16) dcm__bits_fill(b);
    uint32_t peek = (uint32_t)(b->acc >> (b->nbits - 9)) & 0x1FFu;
    uint16_t e = h->look[peek];
    if (e != 0) {
        b->nbits -= e >> 8;
        return e & 0xFF;
    }
    for (int l = 10; l <= 16; l++) {
        int32_t code = (int32_t)((b->acc >> (b->nbits - l)) & ((1u << l) - 1u));
        if (code <= h->maxcode[l]) {
            b->nbits -= l;
            int32_t idx = h->valoff[l] + code;
            if (idx < 0 || idx > 255) return -1;
            return h->vals[idx];
        }
    }
    return -1;
}

/* Sign-extends an s-bit magnitude category value (T.81 F.2.2.1 EXTEND). */
static inline int32_t dcm__jpg_extend(uint32_t v, int s) {
    if (s == 0) return 0;
    return (v < (1u << (s - 1))) ? (int32_t)v - (int32_t)((1u << s) - 1u) : (int32_t)v;
}

#endif /* DCM_JPEG_COMMON_H */
