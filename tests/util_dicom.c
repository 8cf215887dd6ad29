/* util_dicom.c - DICOM byte-buffer builders for the Check tests. */
#include "util_dicom.h"

#include <stdlib.h>
#include <string.h>

void ut_dbuf_init(ut_dbuf *d, int explicit_vr, int big_endian) {
    memset(d, 0, sizeof(*d));
    d->explicit_vr = explicit_vr;
    d->be = big_endian;
}

void ut_dbuf_free(ut_dbuf *d) {
    free(d->p);
    memset(d, 0, sizeof(*d));
}

void ut_dbuf_bytes(ut_dbuf *d, const void *src, size_t n) {
    if (d->n + n > d->cap) {
        size_t cap = d->cap ? d->cap : 256;
        while (cap < d->n + n)
            cap *= 2;
        d->p = realloc(d->p, cap);
        if (d->p == NULL) abort();
        d->cap = cap;
    }
    if (n) memcpy(d->p + d->n, src, n);
    d->n += n;
}

void ut_dbuf_u16(ut_dbuf *d, uint16_t v) {
    uint8_t b[2] = {(uint8_t)(d->be ? v >> 8 : v), (uint8_t)(d->be ? v : v >> 8)};
    ut_dbuf_bytes(d, b, 2);
}

void ut_dbuf_u32(ut_dbuf *d, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[d->be ? 3 - i : i] = (uint8_t)(v >> (8 * i));
    ut_dbuf_bytes(d, b, 4);
}

static int long_vr(const char *vr) {
    static const char *const l[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                    "SV", "UC", "UN", "UR", "UT", "UV"};
    for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++)
        if (strncmp(vr, l[i], 2) == 0) return 1;
    return 0;
}

void ut_dbuf_hdr(ut_dbuf *d, uint16_t g, uint16_t e, const char *vr, uint32_t len) {
    ut_dbuf_u16(d, g);
    ut_dbuf_u16(d, e);
    if (!d->explicit_vr) {
        ut_dbuf_u32(d, len);
        return;
    }
    ut_dbuf_bytes(d, vr, 2);
    if (long_vr(vr)) {
        ut_dbuf_u16(d, 0);
        ut_dbuf_u32(d, len);
    } else {
        ut_dbuf_u16(d, (uint16_t)len);
    }
}

void ut_dbuf_str(ut_dbuf *d, uint16_t g, uint16_t e, const char *vr, const char *s) {
    size_t n = strlen(s);
    int pad = (int)(n & 1);
    ut_dbuf_hdr(d, g, e, vr, (uint32_t)(n + (size_t)pad));
    ut_dbuf_bytes(d, s, n);
    if (pad) ut_dbuf_bytes(d, strcmp(vr, "UI") == 0 ? "\0" : " ", 1);
}

void ut_dbuf_us(ut_dbuf *d, uint16_t g, uint16_t e, uint16_t v) {
    ut_dbuf_hdr(d, g, e, "US", 2);
    ut_dbuf_u16(d, v);
}

void ut_dbuf_item(ut_dbuf *d, uint16_t e, uint32_t len) {
    ut_dbuf_u16(d, 0xFFFE);
    ut_dbuf_u16(d, e);
    ut_dbuf_u32(d, len);
}

void ut_dbuf_meta(ut_dbuf *d, const char *ts) {
    uint8_t pre[128] = {0};
    ut_dbuf_bytes(d, pre, 128);
    ut_dbuf_bytes(d, "DICM", 4);
    ut_dbuf m;
    ut_dbuf_init(&m, 1, 0);
    ut_dbuf_hdr(&m, 0x0002, 0x0001, "OB", 2);
    ut_dbuf_bytes(&m, "\0\1", 2);
    ut_dbuf_str(&m, 0x0002, 0x0010, "UI", ts);
    ut_dbuf g;
    ut_dbuf_init(&g, 1, 0);
    ut_dbuf_hdr(&g, 0x0002, 0x0000, "UL", 4);
    ut_dbuf_u32(&g, (uint32_t)m.n);
    ut_dbuf_bytes(d, g.p, g.n);
    ut_dbuf_bytes(d, m.p, m.n);
    ut_dbuf_free(&m);
    ut_dbuf_free(&g);
}

void ut_dbuf_image(ut_dbuf *d, uint16_t rows, uint16_t cols, uint16_t ba, uint16_t bs, uint16_t pr,
                   const char *photometric) {
    ut_dbuf_us(d, 0x0028, 0x0002, 1);
    ut_dbuf_str(d, 0x0028, 0x0004, "CS", photometric);
    ut_dbuf_us(d, 0x0028, 0x0010, rows);
    ut_dbuf_us(d, 0x0028, 0x0011, cols);
    ut_dbuf_us(d, 0x0028, 0x0100, ba);
    ut_dbuf_us(d, 0x0028, 0x0101, bs);
    ut_dbuf_us(d, 0x0028, 0x0102, (uint16_t)(bs - 1));
    ut_dbuf_us(d, 0x0028, 0x0103, pr);
}
