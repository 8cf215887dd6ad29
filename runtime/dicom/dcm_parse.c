/* dcm_parse.c - DICOM Part 10 parser (PS3.10 §7, PS3.5 §7, §A.4, §A.5).
 *
 * One pass over the bytes, no recursion: an explicit stack of open sequences
 * and items, each with the byte offset where it must end (its own defined
 * length, or the limit inherited from its parent when undefined). Every
 * header and value is checked against that limit in 64-bit arithmetic before
 * it is read, so no length in the file can make us read past the buffer.
 */
#include "dcm_parse.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ms_log.h"

#define UNDEF_LEN 0xFFFFFFFFu

void dcm_limits_default(dcm_limits *lim) {
    lim->max_depth = 64;
    lim->max_inflated = (uint64_t)256 << 20;
    lim->max_pixel_bytes = (uint64_t)1 << 30;
    lim->max_elements = 1000000;
    lim->allow_no_meta = 1;
    lim->threads = 1;
    lim->budget = NULL;
    lim->header_only = 0;
}

/* ---- byte order helpers ---- */

static uint16_t rd16(const uint8_t *p, int be) {
    return be ? (uint16_t)((p[0] << 8) | p[1]) : (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t rd32(const uint8_t *p, int be) {
    if (be) return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const uint8_t *p, int be) {
    uint64_t a = rd32(p, be), b = rd32(p + 4, be);
    return be ? (a << 32) | b : (b << 32) | a;
}

/* ---- VRs and the small data dictionary ---- */

/* clang-format off */
static const char *const long_vrs[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ", "SV",
                                       "UC", "UN", "UR", "UT", "UV"};
static const char *const short_vrs[] = {"AE", "AS", "AT", "CS", "DA", "DS", "DT", "FL", "FD",
                                        "IS", "LO", "LT", "PN", "SH", "SL", "SS", "ST", "TM",
                                        "UI", "UL", "US"};

/* VRs for implicit VR of the tags this code reads, and of the sequences it
 * must descend into. Anything else is UN (opaque bytes, or a sequence when
 * its length is undefined). */
static const struct { uint32_t tag; const char vr[3]; } dict[] = {
    {DCM_TAG(0x0002, 0x0000), "UL"}, {DCM_TAG(0x0002, 0x0002), "UI"},
    {DCM_TAG(0x0002, 0x0010), "UI"}, {DCM_TAG(0x0008, 0x0016), "UI"},
    {DCM_TAG(0x0008, 0x0018), "UI"}, {DCM_TAG(0x0008, 0x0060), "CS"},
    {DCM_TAG(0x0008, 0x1115), "SQ"}, {DCM_TAG(0x0008, 0x1140), "SQ"},
    {DCM_TAG(0x0008, 0x2112), "SQ"}, {DCM_TAG(0x0020, 0x0013), "IS"},
    {DCM_TAG(0x0020, 0x000E), "UI"}, {DCM_TAG(0x0020, 0x0032), "DS"},
    {DCM_TAG(0x0020, 0x0037), "DS"}, {DCM_TAG(0x0020, 0x9113), "SQ"},
    {DCM_TAG(0x0020, 0x9116), "SQ"}, {DCM_TAG(0x0028, 0x0030), "DS"},
    {DCM_TAG(0x0028, 0x9110), "SQ"}, {DCM_TAG(0x0018, 0x0050), "DS"},
    {DCM_TAG(0x0028, 0x0002), "US"}, {DCM_TAG(0x0028, 0x0004), "CS"},
    {DCM_TAG(0x0028, 0x0006), "US"}, {DCM_TAG(0x0028, 0x0008), "IS"},
    {DCM_TAG(0x0028, 0x0010), "US"}, {DCM_TAG(0x0028, 0x0011), "US"},
    {DCM_TAG(0x0028, 0x0100), "US"}, {DCM_TAG(0x0028, 0x0101), "US"},
    {DCM_TAG(0x0028, 0x0102), "US"}, {DCM_TAG(0x0028, 0x0103), "US"},
    {DCM_TAG(0x0028, 0x0120), "US"}, {DCM_TAG(0x0028, 0x0121), "US"},
    {DCM_TAG(0x0028, 0x1050), "DS"}, {DCM_TAG(0x0028, 0x1051), "DS"},
    {DCM_TAG(0x0028, 0x1052), "DS"}, {DCM_TAG(0x0028, 0x1053), "DS"},
    {DCM_TAG(0x0028, 0x1054), "LO"}, {DCM_TAG(0x0028, 0x1056), "CS"},
    {DCM_TAG(0x0028, 0x3000), "SQ"}, {DCM_TAG(0x0028, 0x3002), "US"},
    {DCM_TAG(0x0028, 0x3004), "LO"}, {DCM_TAG(0x0028, 0x3006), "US"},
    {DCM_TAG(0x0028, 0x3010), "SQ"}, {DCM_TAG(0x0028, 0x9132), "SQ"},
    {DCM_TAG(0x0028, 0x9145), "SQ"}, {DCM_TAG(0x0040, 0x0275), "SQ"},
    {DCM_TAG(0x0088, 0x0200), "SQ"}, {DCM_TAG(0x5200, 0x9229), "SQ"},
    {DCM_TAG(0x5200, 0x9230), "SQ"}, {DCM_TAG(0x7FE0, 0x0001), "OV"},
    {DCM_TAG(0x7FE0, 0x0002), "OV"}, {DCM_TAG(0x7FE0, 0x0008), "OF"},
    {DCM_TAG(0x7FE0, 0x0009), "OD"}, {DCM_TAG(0x7FE0, 0x0010), "OW"},
};

static const struct { const char *uid; const char *name; dcm_codec_kind codec; int kind; } ts_table[] = {
    /* kind: 0 implicit LE, 1 explicit LE, 2 explicit BE, 3 deflated explicit LE */
    {"1.2.840.10008.1.2", "Implicit VR Little Endian", DCM_CODEC_NONE, 0},
    {"1.2.840.10008.1.2.1", "Explicit VR Little Endian", DCM_CODEC_NONE, 1},
    {"1.2.840.10008.1.2.1.99", "Deflated Explicit VR Little Endian", DCM_CODEC_NONE, 3},
    {"1.2.840.10008.1.2.2", "Explicit VR Big Endian", DCM_CODEC_NONE, 2},
    {"1.2.840.10008.1.2.4.50", "JPEG Baseline (Process 1)", DCM_CODEC_JPEG_BASELINE, 1},
    {"1.2.840.10008.1.2.4.51", "JPEG Extended (Process 2 & 4)", DCM_CODEC_JPEG_EXTENDED, 1},
    {"1.2.840.10008.1.2.4.57", "JPEG Lossless, Non-Hierarchical (Process 14)", DCM_CODEC_JPEG_LOSSLESS, 1},
    {"1.2.840.10008.1.2.4.70", "JPEG Lossless, Non-Hierarchical, First-Order Prediction", DCM_CODEC_JPEG_LOSSLESS, 1},
    {"1.2.840.10008.1.2.4.80", "JPEG-LS Lossless", DCM_CODEC_JPEGLS, 1},
    {"1.2.840.10008.1.2.4.81", "JPEG-LS Lossy (Near-Lossless)", DCM_CODEC_JPEGLS, 1},
    {"1.2.840.10008.1.2.4.90", "JPEG 2000 (Lossless Only)", DCM_CODEC_J2K, 1},
    {"1.2.840.10008.1.2.4.91", "JPEG 2000", DCM_CODEC_J2K, 1},
    {"1.2.840.10008.1.2.4.201", "HTJ2K (Lossless Only)", DCM_CODEC_J2K, 1},
    {"1.2.840.10008.1.2.4.202", "HTJ2K with RPCL Options (Lossless Only)", DCM_CODEC_J2K, 1},
    {"1.2.840.10008.1.2.4.203", "HTJ2K", DCM_CODEC_J2K, 1},
    {"1.2.840.10008.1.2.5", "RLE Lossless", DCM_CODEC_RLE, 1},
    {"1.2.840.10008.1.2.8.1", "Deflated Image Frame Compression", DCM_CODEC_DEFLATE_FRAME, 1},
    {"1.2.840.10008.1.2.1.98", "Encapsulated Uncompressed Explicit VR Little Endian", DCM_CODEC_ENCAPS_NATIVE, 1},
};
/* clang-format on */

static int vr_in(uint16_t vr, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (vr == DCM_VR(list[i][0], list[i][1])) return 1;
    return 0;
}

static int vr_is_long(uint16_t vr) {
    return vr_in(vr, long_vrs, sizeof(long_vrs) / sizeof(long_vrs[0]));
}

static int vr_is_known(uint16_t vr) {
    return vr_is_long(vr) || vr_in(vr, short_vrs, sizeof(short_vrs) / sizeof(short_vrs[0]));
}

static int looks_like_vr(const uint8_t *p) {
    return isupper(p[0]) && isupper(p[1]);
}

static uint16_t dict_vr(uint32_t tag) {
    if ((tag & 0xFFFF) == 0) return DCM_VR('U', 'L'); /* group length */
    for (size_t i = 0; i < sizeof(dict) / sizeof(dict[0]); i++)
        if (dict[i].tag == tag) return DCM_VR(dict[i].vr[0], dict[i].vr[1]);
    return DCM_VR('U', 'N');
}

const char *dcm_ts_name(const char *uid) {
    for (size_t i = 0; i < sizeof(ts_table) / sizeof(ts_table[0]); i++)
        if (strcmp(ts_table[i].uid, uid) == 0) return ts_table[i].name;
    return NULL;
}

/* ---- element and fragment arrays ---- */

static ms_status push_elem(dcm_dataset *ds, const dcm_limits *lim, const dcm_elem *e) {
    if (ds->nelems >= lim->max_elements)
        return ms_errf(MS_EINVAL, "more than %u data elements (limit)", lim->max_elements);
    if (ds->nelems == ds->cap_elems) {
        uint32_t cap = ds->cap_elems ? ds->cap_elems * 2 : 64;
        dcm_elem *n = realloc(ds->elems, (size_t)cap * sizeof(*n));
        if (n == NULL) return ms_errf(MS_ENOMEM, "out of memory for data elements");
        ds->elems = n;
        ds->cap_elems = cap;
    }
    ds->elems[ds->nelems++] = *e;
    return MS_OK;
}

static ms_status push_frag(dcm_dataset *ds, const dcm_limits *lim, const dcm_fragment *f) {
    if (ds->nfrags >= lim->max_elements)
        return ms_errf(MS_EINVAL, "more than %u pixel data fragments (limit)", lim->max_elements);
    if (ds->nfrags == ds->cap_frags) {
        uint32_t cap = ds->cap_frags ? ds->cap_frags * 2 : 16;
        dcm_fragment *n = realloc(ds->frags, (size_t)cap * sizeof(*n));
        if (n == NULL) return ms_errf(MS_ENOMEM, "out of memory for fragments");
        ds->frags = n;
        ds->cap_frags = cap;
    }
    ds->frags[ds->nfrags++] = *f;
    return MS_OK;
}

/* ---- the data set walker ---- */

typedef struct pframe {
    uint64_t end;   /* where a defined-length frame ends; UINT64_MAX when undefined */
    uint64_t limit; /* no byte of this frame lies at or beyond this offset */
    uint32_t elem;  /* the SQ or item element; DCM_NO_PARENT for the data set */
    uint8_t is_seq; /* 1: holds items; 0: holds elements */
    uint8_t explicit_vr, big;
} pframe;

#define TAG_FMT     "(%04X,%04X)"
#define TAG_ARGS(t) (unsigned)((t) >> 16), (unsigned)((t)&0xFFFF)

/* Walks the items of encapsulated pixel data starting at *pos (just after
 * the element header). Records the offset table and fragments when `record`. */
static ms_status parse_encaps(dcm_dataset *ds, const dcm_limits *lim, uint64_t *pos, uint64_t limit,
                              int be, int record, uint32_t tag) {
    const uint8_t *b = ds->body;
    uint64_t p = *pos, first_tag = 0;
    int nitem = 0;
    for (;;) {
        if (p == limit && limit == ds->body_len && record) {
            /* Real files end without the sequence delimiter; the fragments
             * are all there, so accept them (pydicom drops the pixels). */
            ds->missing_seq_delim = 1;
            break;
        }
        if (limit - p < 8)
            return ms_errf(MS_EINVAL,
                           "encapsulated pixel data " TAG_FMT ": truncated at byte %llu "
                           "(item header needs 8 bytes, %llu left)",
                           TAG_ARGS(tag), (unsigned long long)p, (unsigned long long)(limit - p));
        uint32_t t = ((uint32_t)rd16(b + p, be) << 16) | rd16(b + p + 2, be);
        uint32_t len = rd32(b + p + 4, be);
        if (t == DCM_TAG_SEQ_DELIM) {
            p += 8;
            break;
        }
        if (t != DCM_TAG_ITEM)
            return ms_errf(MS_EINVAL,
                           "encapsulated pixel data: expected an item (FFFE,E000) at byte %llu, "
                           "found " TAG_FMT,
                           (unsigned long long)p, TAG_ARGS(t));
        if (len == UNDEF_LEN)
            return ms_errf(MS_EINVAL, "encapsulated pixel data: fragment %d has undefined length",
                           nitem);
        if ((uint64_t)len > limit - p - 8)
            return ms_errf(MS_EINVAL,
                           "encapsulated pixel data: fragment %d length %u runs past the end "
                           "(%llu bytes left)",
                           nitem, len, (unsigned long long)(limit - p - 8));
        if (record) {
            if (nitem == 0) {
                ds->bot = b + p + 8;
                ds->bot_len = len;
            } else {
                if (nitem == 1) first_tag = p;
                dcm_fragment f = {.off = p + 8, .len = len, .item_off = p - first_tag};
                ms_status st = push_frag(ds, lim, &f);
                if (st != MS_OK) return st;
            }
        }
        nitem++;
        p += 8 + (uint64_t)len;
    }
    if (record) ds->encapsulated = 1;
    *pos = p;
    return MS_OK;
}

static ms_status close_frame(dcm_dataset *ds, const pframe *f, uint64_t content_end) {
    if (f->elem == DCM_NO_PARENT) return MS_OK;
    dcm_elem *e = &ds->elems[f->elem];
    e->end = ds->nelems;
    if (e->flags & DCM_ELEM_UNDEF_LEN) e->len = content_end - e->off;
    return MS_OK;
}

static ms_status parse_body(dcm_dataset *ds, const dcm_limits *lim) {
    const uint8_t *b = ds->body;
    const uint64_t n = ds->body_len;
    uint32_t cap = lim->max_depth * 2 + 2;
    pframe *stk = calloc(cap, sizeof(*stk));
    if (stk == NULL) return ms_errf(MS_ENOMEM, "out of memory for the parser stack");
    ms_status st = MS_OK;
    uint32_t sp = 1;
    uint64_t pos = 0;
    stk[0] = (pframe){.end = n,
                      .limit = n,
                      .elem = DCM_NO_PARENT,
                      .is_seq = 0,
                      .explicit_vr = (uint8_t)ds->explicit_vr,
                      .big = (uint8_t)ds->big_endian};

    while (sp > 0) {
        pframe *f = &stk[sp - 1];
        if (f->end != UINT64_MAX && pos == f->end) {
            close_frame(ds, f, pos);
            sp--;
            continue;
        }
        if (sp == 1 && n - pos < 8) {
            /* Up to 7 trailing bytes after the last element: padding seen in
             * real files; nothing can be encoded in them. */
            if (pos != n)
                ms_log(MS_LOG_DEBUG, "dicom: ignoring %llu trailing bytes",
                       (unsigned long long)(n - pos));
            break;
        }
        if (f->limit - pos < 8) {
            st = ms_errf(MS_EINVAL, "truncated at byte %llu inside %s (need 8 bytes, %llu left)",
                         (unsigned long long)pos, f->is_seq ? "a sequence" : "an item",
                         (unsigned long long)(f->limit - pos));
            goto done;
        }
        uint32_t tag = ((uint32_t)rd16(b + pos, f->big) << 16) | rd16(b + pos + 2, f->big);

        if (f->is_seq) {
            uint32_t len = rd32(b + pos + 4, f->big);
            if (tag == DCM_TAG_SEQ_DELIM) {
                pos += 8;
                close_frame(ds, f, pos - 8);
                sp--;
                continue;
            }
            if (tag != DCM_TAG_ITEM) {
                st = ms_errf(MS_EINVAL, "expected an item in sequence at byte %llu, found " TAG_FMT,
                             (unsigned long long)pos, TAG_ARGS(tag));
                goto done;
            }
            pos += 8;
            if (len != UNDEF_LEN && (uint64_t)len > f->limit - pos) {
                st =
                    ms_errf(MS_EINVAL, "item length %u at byte %llu runs past the end (%llu left)",
                            len, (unsigned long long)pos - 8, (unsigned long long)(f->limit - pos));
                goto done;
            }
            if (sp + 1 > cap) {
                st = ms_errf(MS_EINVAL, "sequences nested deeper than %u levels", lim->max_depth);
                goto done;
            }
            dcm_elem e = {.tag = tag,
                          .vr = 0,
                          .parent = f->elem,
                          .off = pos,
                          .len = len == UNDEF_LEN ? 0 : len,
                          .big_endian = f->big,
                          .flags = len == UNDEF_LEN ? DCM_ELEM_UNDEF_LEN : 0};
            if ((st = push_elem(ds, lim, &e)) != MS_OK) goto done;
            stk[sp] = (pframe){.end = len == UNDEF_LEN ? UINT64_MAX : pos + len,
                               .limit = len == UNDEF_LEN ? f->limit : pos + len,
                               .elem = ds->nelems - 1,
                               .is_seq = 0,
                               .explicit_vr = f->explicit_vr,
                               .big = f->big};
            sp++;
            continue;
        }

        /* Inside the data set or an item. */
        if (tag == DCM_TAG_ITEM_DELIM) {
            if (sp == 1 || f->end != UINT64_MAX) {
                st = ms_errf(MS_EINVAL, "unexpected item delimiter at byte %llu",
                             (unsigned long long)pos);
                goto done;
            }
            pos += 8;
            close_frame(ds, f, pos - 8);
            sp--;
            continue;
        }
        if (tag == DCM_TAG_SEQ_DELIM) {
            /* An undefined-length item that lacks its item delimiter inside an
             * undefined-length sequence: close both (seen in real files). */
            if (sp >= 3 && f->end == UINT64_MAX && stk[sp - 2].end == UINT64_MAX) {
                pos += 8;
                close_frame(ds, f, pos - 8);
                close_frame(ds, &stk[sp - 2], pos - 8);
                sp -= 2;
                continue;
            }
            st = ms_errf(MS_EINVAL, "unexpected sequence delimiter at byte %llu",
                         (unsigned long long)pos);
            goto done;
        }
        if ((tag >> 16) == 0xFFFE) {
            st = ms_errf(MS_EINVAL, "unexpected item tag " TAG_FMT " at byte %llu", TAG_ARGS(tag),
                         (unsigned long long)pos);
            goto done;
        }

        uint16_t vr;
        uint32_t len;
        uint64_t hdr;
        if (f->explicit_vr) {
            vr = DCM_VR(b[pos + 4], b[pos + 5]);
            if (vr_is_long(vr)) {
                if (f->limit - pos < 12) {
                    st = ms_errf(MS_EINVAL, "truncated element header " TAG_FMT " at byte %llu",
                                 TAG_ARGS(tag), (unsigned long long)pos);
                    goto done;
                }
                len = rd32(b + pos + 8, f->big);
                hdr = 12;
            } else if (vr_is_known(vr)) {
                len = rd16(b + pos + 6, f->big);
                hdr = 8;
            } else {
                st = ms_errf(MS_EINVAL, "invalid VR 0x%02X%02X of element " TAG_FMT " at byte %llu",
                             b[pos + 4], b[pos + 5], TAG_ARGS(tag), (unsigned long long)pos);
                goto done;
            }
        } else {
            vr = dict_vr(tag);
            len = rd32(b + pos + 4, f->big);
            hdr = 8;
        }
        pos += hdr;
        int undef = len == UNDEF_LEN;
        dcm_elem e = {.tag = tag,
                      .vr = vr,
                      .parent = f->elem,
                      .off = pos,
                      .len = undef ? 0 : len,
                      .big_endian = f->big,
                      .flags = undef ? DCM_ELEM_UNDEF_LEN : 0};
        e.end = ds->nelems + 1;
        /* A header-only walk ends at the top-level pixel data, before a byte
         * of it is read (lim->header_only, dcm_parse.h). */
        const int stop = lim->header_only && sp == 1 &&
                         (tag == DCM_TAG_PIXEL_DATA || tag == DCM_TAG_FLOAT_PIXEL_DATA ||
                          tag == DCM_TAG_DOUBLE_PIXEL_DATA);
        if (stop && undef && tag == DCM_TAG_PIXEL_DATA) {
            e.flags |= DCM_ELEM_ENCAPS;
            e.len = f->limit - pos;
            if ((st = push_elem(ds, lim, &e)) != MS_OK) goto done;
            ds->encapsulated = 1;
            ds->header_only = 1;
            break;
        }

        if (undef &&
            (tag == DCM_TAG_PIXEL_DATA || vr == DCM_VR('O', 'B') || vr == DCM_VR('O', 'W'))) {
            int top = sp == 1 && tag == DCM_TAG_PIXEL_DATA;
            uint64_t start = pos;
            e.flags |= DCM_ELEM_ENCAPS;
            if ((st = push_elem(ds, lim, &e)) != MS_OK) goto done;
            uint32_t idx = ds->nelems - 1;
            if ((st = parse_encaps(ds, lim, &pos, f->limit, f->big, top, tag)) != MS_OK) goto done;
            ds->elems[idx].len = pos - start;
            continue;
        }
        int is_seq = vr == DCM_VR('S', 'Q') || (undef && vr == DCM_VR('U', 'N'));
        if (is_seq) {
            if (!undef && (uint64_t)len > f->limit - pos) {
                st = ms_errf(MS_EINVAL,
                             "sequence " TAG_FMT " length %u runs past the end (%llu bytes left)",
                             TAG_ARGS(tag), len, (unsigned long long)(f->limit - pos));
                goto done;
            }
            if (sp + 1 > cap) {
                st = ms_errf(MS_EINVAL, "sequences nested deeper than %u levels", lim->max_depth);
                goto done;
            }
            if ((st = push_elem(ds, lim, &e)) != MS_OK) goto done;
            /* A UN sequence of undefined length is Implicit VR LE inside
             * (PS3.5 §6.2.2). */
            int un = vr == DCM_VR('U', 'N');
            stk[sp] = (pframe){.end = undef ? UINT64_MAX : pos + len,
                               .limit = undef ? f->limit : pos + len,
                               .elem = ds->nelems - 1,
                               .is_seq = 1,
                               .explicit_vr = un ? 0 : f->explicit_vr,
                               .big = un ? 0 : f->big};
            sp++;
            continue;
        }
        if (undef) {
            st = ms_errf(MS_EINVAL, "element " TAG_FMT " (VR %c%c) has undefined length",
                         TAG_ARGS(tag), vr >> 8, vr & 0xFF);
            goto done;
        }
        if ((uint64_t)len > f->limit - pos) {
            st = ms_errf(MS_EINVAL,
                         "element " TAG_FMT " length %u at byte %llu runs past the end "
                         "(%llu bytes left)",
                         TAG_ARGS(tag), len, (unsigned long long)(pos - hdr),
                         (unsigned long long)(f->limit - pos));
            goto done;
        }
        if ((st = push_elem(ds, lim, &e)) != MS_OK) goto done;
        pos += len;
        if (stop) {
            ds->header_only = 1;
            break;
        }
    }
done:
    free(stk);
    return st;
}

/* ---- file meta and transfer syntax ---- */

static void copy_uid(char *dst, size_t cap, const uint8_t *p, uint64_t len) {
    size_t n = len < cap - 1 ? (size_t)len : cap - 1;
    memcpy(dst, p, n);
    dst[n] = '\0';
    while (n > 0 && (dst[n - 1] == '\0' || dst[n - 1] == ' '))
        dst[--n] = '\0';
}

static ms_status parse_meta(dcm_dataset *ds, const uint8_t *b, size_t len, uint64_t *pos) {
    uint64_t p = *pos, group_end = UINT64_MAX;
    while (len - p >= 8 && p < group_end) {
        if (rd16(b + p, 0) != 0x0002) break;
        uint32_t tag = DCM_TAG(0x0002, rd16(b + p + 2, 0));
        uint64_t hdr;
        uint32_t vlen;
        if (looks_like_vr(b + p + 4)) {
            uint16_t vr = DCM_VR(b[p + 4], b[p + 5]);
            if (vr_is_long(vr)) {
                if (len - p < 12) return ms_errf(MS_EINVAL, "file meta: truncated element header");
                vlen = rd32(b + p + 8, 0);
                hdr = 12;
            } else {
                vlen = rd16(b + p + 6, 0);
                hdr = 8;
            }
        } else {
            vlen = rd32(b + p + 4, 0); /* implicit VR meta: seen in broken writers */
            hdr = 8;
        }
        if (vlen == UNDEF_LEN || (uint64_t)vlen > len - p - hdr)
            return ms_errf(MS_EINVAL,
                           "file meta: element " TAG_FMT " length %u runs past the end of the file",
                           TAG_ARGS(tag), vlen);
        const uint8_t *v = b + p + hdr;
        if (tag == DCM_TAG(0x0002, 0x0000) && vlen == 4) {
            group_end = p + hdr + 4 + (uint64_t)rd32(v, 0);
            if (group_end > len)
                return ms_errf(MS_EINVAL,
                               "file meta: group length %u runs past the end of the file",
                               rd32(v, 0));
        } else if (tag == DCM_TAG_TRANSFER_SYNTAX) {
            copy_uid(ds->ts_uid, sizeof(ds->ts_uid), v, vlen);
        } else if (tag == DCM_TAG(0x0002, 0x0002)) {
            copy_uid(ds->sop_class, sizeof(ds->sop_class), v, vlen);
        }
        p += hdr + vlen;
    }
    if (group_end != UINT64_MAX && p < group_end) {
        /* The group length claims more than the group-0002 elements hold;
         * trust the tags (the body starts at the first non-0002 tag). */
        ms_log(MS_LOG_DEBUG, "dicom: meta group length larger than the meta elements");
    }
    *pos = p;
    return MS_OK;
}

/* Sniffs the encoding of the element at b (n >= 8 bytes). */
static void sniff(const uint8_t *b, uint64_t n, int *explicit_vr, int *big) {
    *big = rd16(b, 0) >= 0x0400 && rd16(b, 1) < 0x0400;
    *explicit_vr = n >= 8 && looks_like_vr(b + 4) && vr_is_known(DCM_VR(b[4], b[5]));
}

static ms_status inflate_body(dcm_dataset *ds, const dcm_limits *lim, const uint8_t *src,
                              uint64_t n) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return ms_errf(MS_ENOMEM, "zlib init failed");
    size_t cap = n * 4 + 1024, used = 0;
    if (cap > lim->max_inflated) cap = (size_t)lim->max_inflated;
    ms_status st = ms_budget_take(lim->budget, cap, "inflating a deflated DICOM data set");
    if (st != MS_OK) {
        inflateEnd(&z);
        return st;
    }
    ds->budget = lim->budget;
    ds->budget_held = cap;
    uint8_t *out = malloc(cap ? cap : 1);
    if (out == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory inflating the data set");
        goto done;
    }
    z.next_in = (Bytef *)src;
    uint64_t in_left = n;
    for (;;) {
        if (z.avail_in == 0) {
            uInt chunk = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
            z.avail_in = chunk;
            in_left -= chunk;
        }
        if (used == cap) {
            if (cap >= lim->max_inflated) {
                st = ms_errf(MS_EINVAL, "deflated data set inflates past %llu bytes (limit)",
                             (unsigned long long)lim->max_inflated);
                goto done;
            }
            size_t ncap = cap * 2 > lim->max_inflated ? (size_t)lim->max_inflated : cap * 2;
            if ((st = ms_budget_take(lim->budget, ncap - cap,
                                     "inflating a deflated DICOM data set")) != MS_OK)
                goto done;
            ds->budget_held += ncap - cap;
            uint8_t *o = realloc(out, ncap);
            if (o == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory inflating the data set");
                goto done;
            }
            out = o;
            cap = ncap;
        }
        z.next_out = out + used;
        z.avail_out = (uInt)((cap - used) > (1u << 30) ? (1u << 30) : (cap - used));
        uInt before = z.avail_out;
        int rc = inflate(&z, Z_NO_FLUSH);
        used += before - z.avail_out;
        if (rc == Z_STREAM_END) break;
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_left == 0) {
            st = ms_errf(MS_EINVAL, "deflated data set is truncated");
            goto done;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = ms_errf(MS_EINVAL, "deflated data set is corrupt: %s",
                         z.msg ? z.msg : "zlib error");
            goto done;
        }
    }
    ds->inflated = out;
    ds->body = out;
    ds->body_len = used;
    out = NULL;
done:
    free(out);
    inflateEnd(&z);
    return st;
}

/* Without a DICM prefix: does byte 0 start a data set? The first element
 * must have an even (public) group no higher than Pixel Data's, in either
 * byte order, and a length that fits in the file (or is undefined). A PNG,
 * JPEG or PDF fails this at once. */
static int plausible_dataset(const uint8_t *b, uint64_t n) {
    int sx, sb;
    if (n < 8) return 0;
    sniff(b, n, &sx, &sb);
    const int be = sb && sx;
    const uint16_t group = rd16(b, be);
    if ((group & 1) != 0 || group > 0x7FE0) return 0;
    uint64_t len, hdr;
    if (sx && vr_is_long(DCM_VR(b[4], b[5]))) {
        if (n < 12) return 0;
        len = rd32(b + 8, be);
        hdr = 12;
    } else if (sx) {
        len = rd16(b + 6, be);
        hdr = 8;
    } else {
        len = rd32(b + 4, 0);
        hdr = 8;
    }
    return len == 0xFFFFFFFFu || len <= n - hdr;
}

ms_status dcm_parse(const uint8_t *bytes, size_t len, const dcm_limits *lim_in, dcm_dataset **out) {
    dcm_limits dl;
    if (lim_in == NULL) dcm_limits_default(&dl);
    const dcm_limits *lim = lim_in ? lim_in : &dl;
    *out = NULL;
    if (bytes == NULL || len < 8) return ms_errf(MS_EINVAL, "not DICOM: only %zu bytes", len);
    dcm_dataset *ds = calloc(1, sizeof(*ds));
    if (ds == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = MS_OK;
    uint64_t pos = 0;
    if (len >= 132 && memcmp(bytes + 128, "DICM", 4) == 0)
        pos = 132;
    else if (memcmp(bytes, "DICM", 4) == 0)
        pos = 4;

    if (pos > 0) {
        ds->has_meta = 1;
        if ((st = parse_meta(ds, bytes, len, &pos)) != MS_OK) goto fail;
    } else if (!lim->allow_no_meta) {
        st = ms_errf(MS_EINVAL, "not a DICOM Part 10 file: no 'DICM' at byte 128");
        goto fail;
    } else if (!plausible_dataset(bytes, len)) {
        st = ms_errf(MS_EINVAL,
                     "not a DICOM file: no 'DICM' prefix at byte 128 and no data set at byte 0");
        goto fail;
    }
    if (len - pos < 8) {
        st = ms_errf(MS_EINVAL, "no data set after the file meta (%llu bytes left)",
                     (unsigned long long)(len - pos));
        goto fail;
    }

    int kind = -1;
    for (size_t i = 0; i < sizeof(ts_table) / sizeof(ts_table[0]); i++)
        if (strcmp(ts_table[i].uid, ds->ts_uid) == 0) {
            kind = ts_table[i].kind;
            ds->codec = ts_table[i].codec;
        }
    int sx, sb;
    sniff(bytes + pos, len - pos, &sx, &sb);
    if (ds->ts_uid[0] == '\0') {
        ds->explicit_vr = sx;
        ds->big_endian = sb && sx;
        strcpy(ds->ts_uid, !sx  ? "1.2.840.10008.1.2"
                           : sb ? "1.2.840.10008.1.2.2"
                                : "1.2.840.10008.1.2.1");
        ds->ts_note = ds->has_meta ? "no transfer syntax in the file meta: sniffed"
                                   : "no file meta: encoding sniffed";
    } else if (kind < 0) {
        /* Unknown transfer syntax: parse the header anyway (every non-default
         * syntax is explicit VR LE), so the summary can be shown; decoding the
         * pixels fails with the UID named. */
        ds->explicit_vr = sx;
        ds->big_endian = 0;
        ds->codec = DCM_CODEC_NONE;
        ds->ts_note = "unknown transfer syntax";
    } else if (kind == 3) {
        ds->deflated = 1;
        ds->explicit_vr = 1;
        if ((st = inflate_body(ds, lim, bytes + pos, len - pos)) != MS_OK) goto fail;
    } else {
        ds->explicit_vr = kind != 0;
        ds->big_endian = kind == 2;
        if (kind <= 1 && sx != ds->explicit_vr) {
            /* pydicom does the same switch (filereader.py _is_implicit_vr). */
            ds->explicit_vr = sx;
            ds->ts_note = sx ? "transfer syntax says implicit VR, data set is explicit"
                             : "transfer syntax says explicit VR, data set is implicit";
        }
    }
    if (!ds->deflated) {
        ds->body = bytes + pos;
        ds->body_len = len - pos;
    }
    if ((st = parse_body(ds, lim)) != MS_OK) goto fail;
    *out = ds;
    return MS_OK;
fail:
    dcm_dataset_free(ds);
    return st;
}

void dcm_dataset_free(dcm_dataset *ds) {
    if (ds == NULL) return;
    free(ds->inflated);
    ms_budget_give(ds->budget, ds->budget_held);
    free(ds->elems);
    free(ds->frags);
    free(ds);
}

/* ---- lookups ---- */

int64_t dcm_find(const dcm_dataset *ds, uint32_t parent, uint32_t tag) {
    uint32_t i, end;
    if (parent == DCM_NO_PARENT) {
        i = 0;
        end = ds->nelems;
    } else {
        if (parent >= ds->nelems) return -1;
        i = parent + 1;
        end = ds->elems[parent].end;
    }
    while (i < end) {
        const dcm_elem *e = &ds->elems[i];
        if (e->tag == tag) return i;
        i = e->end > i ? e->end : i + 1;
    }
    return -1;
}

int64_t dcm_item(const dcm_dataset *ds, uint32_t seq, uint32_t n) {
    if (seq >= ds->nelems) return -1;
    uint32_t i = seq + 1, end = ds->elems[seq].end, k = 0;
    while (i < end) {
        if (ds->elems[i].tag == DCM_TAG_ITEM && k++ == n) return i;
        i = ds->elems[i].end > i ? ds->elems[i].end : i + 1;
    }
    return -1;
}

uint32_t dcm_item_count(const dcm_dataset *ds, uint32_t seq) {
    if (seq >= ds->nelems) return 0;
    uint32_t i = seq + 1, end = ds->elems[seq].end, k = 0;
    while (i < end) {
        if (ds->elems[i].tag == DCM_TAG_ITEM) k++;
        i = ds->elems[i].end > i ? ds->elems[i].end : i + 1;
    }
    return k;
}

/* ---- values ---- */

static uint16_t value_vr(const dcm_elem *e) {
    return e->vr == DCM_VR('U', 'N') ? dict_vr(e->tag) : e->vr;
}

static int vr_is_text(uint16_t vr) {
    return vr == DCM_VR('D', 'S') || vr == DCM_VR('I', 'S') || vr == DCM_VR('C', 'S') ||
           vr == DCM_VR('L', 'O') || vr == DCM_VR('S', 'H') || vr == DCM_VR('U', 'I') ||
           vr == DCM_VR('S', 'T') || vr == DCM_VR('L', 'T') || vr == DCM_VR('P', 'N') ||
           vr == DCM_VR('A', 'E') || vr == DCM_VR('A', 'S') || vr == DCM_VR('D', 'A') ||
           vr == DCM_VR('T', 'M') || vr == DCM_VR('D', 'T') || vr == DCM_VR('U', 'C') ||
           vr == DCM_VR('U', 'T');
}

/* Finds the k-th backslash-separated token of a text value, trimmed. */
static int text_token(const dcm_dataset *ds, const dcm_elem *e, uint32_t k, const char **s,
                      size_t *n) {
    const char *p = (const char *)ds->body + e->off, *end = p + e->len;
    for (uint32_t j = 0; j < k; j++) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        if (bs == NULL) return 0;
        p = bs + 1;
    }
    const char *q = memchr(p, '\\', (size_t)(end - p));
    if (q == NULL) q = end;
    while (p < q && (*p == ' ' || *p == '\0'))
        p++;
    while (q > p && (q[-1] == ' ' || q[-1] == '\0'))
        q--;
    *s = p;
    *n = (size_t)(q - p);
    return 1;
}

/* Attributes PS3.15's Basic Application Level Confidentiality Profile
 * (Table E.1-1) removes or replaces, by group and element; whole groups
 * where the profile treats the group so (Patient 0010, Visit 0038, the
 * procedure step groups 0032 and 0040), and private (odd) groups, which may
 * hold anything. */
int dcm_tag_identifying(uint32_t tag) {
    uint16_t g = (uint16_t)(tag >> 16), e = (uint16_t)tag;
    if (g & 1) return 1;
    if (g == 0x0010 || g == 0x0032 || g == 0x0038 || g == 0x0040 || g == 0x4008) return 1;
    static const uint32_t tags[] = {
        0x00080014, 0x00080018, 0x00080020, 0x00080021, 0x00080022, 0x00080023, 0x00080024,
        0x00080025, 0x0008002A, 0x00080030, 0x00080031, 0x00080032, 0x00080033, 0x00080034,
        0x00080035, 0x00080050, 0x00080080, 0x00080081, 0x00080082, 0x00080090, 0x00080092,
        0x00080094, 0x00080096, 0x0008009C, 0x0008009D, 0x00081010, 0x00081030, 0x0008103E,
        0x00081040, 0x00081048, 0x00081049, 0x00081050, 0x00081052, 0x00081060, 0x00081062,
        0x00081070, 0x00081072, 0x00081080, 0x00081084, 0x00081110, 0x00081111, 0x00081120,
        0x00081140, 0x00081155, 0x00081195, 0x00082111, 0x00082112, 0x00089123, 0x00180010,
        0x00181000, 0x00181004, 0x00181005, 0x00181007, 0x00181008, 0x00181030, 0x00181400,
        0x0018700A, 0x00189424, 0x0020000D, 0x0020000E, 0x00200010, 0x00200052, 0x00200200,
        0x00204000, 0x00209158, 0x00209161, 0x00209164, 0x00209221, 0x00209222, 0x00209223,
        0x00209224, 0x30060024, 0x300600C2, 0x300A0013, 0x300E0008, 0x00880140, 0x00880200,
        0x00880904, 0x00880906, 0x00880910, 0x00880912, 0x00282000, 0x04000100, 0x04000402,
        0x04000403, 0x04000404, 0x04000550, 0x04000561, 0x20300020, 0x3010006E, 0x00700001,
        0x00700084, 0x00700086, 0xFFFAFFFA, 0xFFFCFFFC, 0x01000420,
    };
    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
        if (tags[i] == tag) return 1;
    (void)e;
    return 0;
}

ms_status dcm_get_number(const dcm_dataset *ds, int64_t i, uint32_t k, double *out) {
    if (i < 0 || (uint64_t)i >= ds->nelems) return ms_errf(MS_EINVAL, "missing element");
    const dcm_elem *e = &ds->elems[i];
    const uint8_t *v = ds->body + e->off;
    uint16_t vr = value_vr(e);
    int be = e->big_endian;
    if (vr_is_text(vr)) {
        const char *s;
        size_t n;
        char buf[72];
        if (!text_token(ds, e, k, &s, &n) || n == 0)
            return ms_errf(MS_EINVAL, "element " TAG_FMT " has no value %u", TAG_ARGS(e->tag), k);
        if (n >= sizeof(buf))
            return ms_errf(MS_EINVAL, "element " TAG_FMT ": value too long", TAG_ARGS(e->tag));
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *endp;
        double d = strtod(buf, &endp);
        if (endp == buf || *endp != '\0' || d != d) {
            /* Error replies may quote values, never those of identifying
             * attributes (the reply and the log may leave the hospital). */
            if (dcm_tag_identifying(e->tag))
                return ms_errf(MS_EINVAL, "element " TAG_FMT ": value %u is not a number",
                               TAG_ARGS(e->tag), k);
            return ms_errf(MS_EINVAL, "element " TAG_FMT ": '%s' is not a number", TAG_ARGS(e->tag),
                           buf);
        }
        *out = d;
        return MS_OK;
    }
    uint64_t sz = 0;
    if (vr == DCM_VR('U', 'S') || vr == DCM_VR('S', 'S') || vr == DCM_VR('O', 'W'))
        sz = 2;
    else if (vr == DCM_VR('U', 'L') || vr == DCM_VR('S', 'L') || vr == DCM_VR('F', 'L') ||
             vr == DCM_VR('O', 'F') || vr == DCM_VR('O', 'L'))
        sz = 4;
    else if (vr == DCM_VR('F', 'D') || vr == DCM_VR('O', 'D'))
        sz = 8;
    else if (vr == DCM_VR('O', 'B'))
        sz = 1;
    if (sz == 0)
        return ms_errf(MS_EINVAL, "element " TAG_FMT ": VR %c%c is not numeric", TAG_ARGS(e->tag),
                       vr >> 8, vr & 0xFF);
    if ((uint64_t)k >= e->len / sz)
        return ms_errf(MS_EINVAL, "element " TAG_FMT " has no value %u (length %llu)",
                       TAG_ARGS(e->tag), k, (unsigned long long)e->len);
    v += (uint64_t)k * sz;
    if (vr == DCM_VR('U', 'S') || vr == DCM_VR('O', 'W'))
        *out = rd16(v, be);
    else if (vr == DCM_VR('S', 'S'))
        *out = (int16_t)rd16(v, be);
    else if (vr == DCM_VR('U', 'L') || vr == DCM_VR('O', 'L'))
        *out = rd32(v, be);
    else if (vr == DCM_VR('S', 'L'))
        *out = (int32_t)rd32(v, be);
    else if (vr == DCM_VR('O', 'B'))
        *out = v[0];
    else if (sz == 4) {
        uint32_t u = rd32(v, be);
        float fl;
        memcpy(&fl, &u, 4);
        *out = fl;
    } else {
        uint64_t u = rd64(v, be);
        double d;
        memcpy(&d, &u, 8);
        *out = d;
    }
    return MS_OK;
}

ms_status dcm_get_uint(const dcm_dataset *ds, int64_t i, uint32_t k, uint32_t *out) {
    double d;
    ms_status st = dcm_get_number(ds, i, k, &d);
    if (st != MS_OK) return st;
    if (!(d >= 0 && d <= 4294967295.0) || d != (double)(uint32_t)d)
        return ms_errf(MS_EINVAL, "element " TAG_FMT ": %g is not an unsigned integer",
                       TAG_ARGS(ds->elems[i].tag), d);
    *out = (uint32_t)d;
    return MS_OK;
}

ms_status dcm_get_int(const dcm_dataset *ds, int64_t i, uint32_t k, int32_t *out) {
    double d;
    ms_status st = dcm_get_number(ds, i, k, &d);
    if (st != MS_OK) return st;
    if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != (double)(int32_t)d)
        return ms_errf(MS_EINVAL, "element " TAG_FMT ": %g is not an integer",
                       TAG_ARGS(ds->elems[i].tag), d);
    *out = (int32_t)d;
    return MS_OK;
}

uint32_t dcm_string_vm(const dcm_dataset *ds, int64_t i) {
    if (i < 0 || (uint64_t)i >= ds->nelems) return 0;
    const dcm_elem *e = &ds->elems[i];
    const char *s;
    size_t n;
    if (!text_token(ds, e, 0, &s, &n)) return 0;
    if (e->len == 0 || (n == 0 && memchr(ds->body + e->off, '\\', (size_t)e->len) == NULL))
        return 0;
    uint32_t vm = 1;
    for (uint64_t j = 0; j < e->len; j++)
        if (ds->body[e->off + j] == '\\') vm++;
    return vm;
}

void dcm_get_string(const dcm_dataset *ds, int64_t i, char *buf, size_t n) {
    if (n == 0) return;
    buf[0] = '\0';
    if (i < 0 || (uint64_t)i >= ds->nelems) return;
    const dcm_elem *e = &ds->elems[i];
    const char *p = (const char *)ds->body + e->off, *q = p + e->len;
    while (p < q && (*p == ' ' || *p == '\0'))
        p++;
    while (q > p && (q[-1] == ' ' || q[-1] == '\0'))
        q--;
    size_t m = (size_t)(q - p) < n - 1 ? (size_t)(q - p) : n - 1;
    memcpy(buf, p, m);
    buf[m] = '\0';
    for (size_t j = 0; j < m; j++)
        if ((unsigned char)buf[j] < 0x20 || (unsigned char)buf[j] > 0x7E) buf[j] = '?';
}

/* ---- encapsulated frames ---- */

static int frag_starts_frame(const dcm_dataset *ds, const dcm_fragment *f) {
    const uint8_t *p = ds->body + f->off;
    switch (ds->codec) {
    case DCM_CODEC_JPEG_BASELINE:
    case DCM_CODEC_JPEG_EXTENDED:
    case DCM_CODEC_JPEG_LOSSLESS:
    case DCM_CODEC_JPEGLS:
        return f->len >= 2 && p[0] == 0xFF && p[1] == 0xD8;
    case DCM_CODEC_J2K:
        return (f->len >= 4 && p[0] == 0xFF && p[1] == 0x4F && p[2] == 0xFF && p[3] == 0x51) ||
               (f->len >= 12 && memcmp(p + 4, "jP  ", 4) == 0);
    case DCM_CODEC_RLE:
        /* RLE header: segment count 1..15, first segment offset 64. */
        return f->len >= 64 && rd32(p, 0) >= 1 && rd32(p, 0) <= 15 && rd32(p + 4, 0) == 64;
    default:
        return 0;
    }
}

/* Maps frames to fragments through offsets (BOT or Extended Offset Table):
 * each offset must name a fragment's item, increasing, the first being 0. */
static int map_offsets(const dcm_dataset *ds, uint32_t nframes, const uint64_t *offs,
                       uint32_t *starts) {
    uint32_t j = 0;
    for (uint32_t f = 0; f < nframes; f++) {
        while (j < ds->nfrags && ds->frags[j].item_off < offs[f])
            j++;
        if (j >= ds->nfrags || ds->frags[j].item_off != offs[f]) return 0;
        if (f == 0 && j != 0) return 0;
        if (f > 0 && j <= starts[f - 1]) return 0;
        starts[f] = j;
    }
    starts[nframes] = ds->nfrags;
    return 1;
}

ms_status dcm_encaps_map(const dcm_dataset *ds, uint32_t nframes, uint32_t *starts) {
    if (!ds->encapsulated || ds->nfrags == 0)
        return ms_errf(MS_EINVAL, "encapsulated pixel data has no fragments");
    if (nframes == 0) return ms_errf(MS_EINVAL, "no frames");
    if (nframes > ds->nfrags)
        return ms_errf(MS_EINVAL, "%u frames but only %u fragments", nframes, ds->nfrags);
    if (nframes == 1) {
        /* One frame: all fragments, whatever the offset table says. */
        starts[0] = 0;
        starts[1] = ds->nfrags;
        return MS_OK;
    }
    uint64_t *offs = malloc((size_t)nframes * sizeof(*offs));
    ms_status st = MS_OK;
    int ok = 0;
    if (offs == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory mapping frames");
        goto done;
    }
    /* Extended Offset Table first (it replaces an empty BOT), then the BOT. */
    int64_t eot = dcm_find(ds, DCM_NO_PARENT, DCM_TAG_EXT_OFFSET_TABLE);
    if (eot >= 0 && ds->elems[eot].len == (uint64_t)nframes * 8) {
        for (uint32_t k = 0; k < nframes; k++)
            offs[k] = rd64(ds->body + ds->elems[eot].off + 8 * (uint64_t)k, 0);
        ok = map_offsets(ds, nframes, offs, starts);
    }
    if (!ok && ds->bot_len == (uint64_t)nframes * 4) {
        for (uint32_t k = 0; k < nframes; k++)
            offs[k] = rd32(ds->bot + 4 * (uint64_t)k, 0);
        ok = map_offsets(ds, nframes, offs, starts);
        if (!ok) {
            st = ms_errf(MS_EINVAL, "basic offset table does not match the fragments");
            goto done;
        }
    }
    if (!ok && ds->nfrags == nframes) {
        for (uint32_t k = 0; k <= nframes; k++)
            starts[k] = k;
        ok = 1;
    }
    if (!ok) {
        /* Empty offset table, more fragments than frames: find frame starts
         * by the codec's start marker. */
        uint32_t k = 0;
        for (uint32_t j = 0; j < ds->nfrags; j++) {
            if (frag_starts_frame(ds, &ds->frags[j])) {
                if (k == nframes) {
                    k++;
                    break;
                }
                starts[k++] = j;
            }
        }
        if (k == nframes && starts[0] == 0) {
            starts[nframes] = ds->nfrags;
            ok = 1;
        }
    }
    if (!ok) {
        /* Last resort, as pydicom: a JPEG end-of-image marker in the last 10
         * bytes of a fragment ends a frame. */
        uint32_t k = 0;
        starts[0] = 0;
        for (uint32_t j = 0; j < ds->nfrags && k < nframes; j++) {
            const dcm_fragment *fr = &ds->frags[j];
            const uint8_t *p = ds->body + fr->off;
            uint64_t from = fr->len > 10 ? fr->len - 10 : 0;
            int eoi = 0;
            for (uint64_t q = from; q + 1 < fr->len; q++)
                if (p[q] == 0xFF && p[q + 1] == 0xD9) eoi = 1;
            if (eoi) starts[++k] = j + 1;
        }
        if (k == nframes && starts[nframes] == ds->nfrags) ok = 1;
    }
    if (!ok) {
        st = ms_errf(MS_EINVAL,
                     "cannot map %u frames to %u fragments (empty offset table, no frame markers)",
                     nframes, ds->nfrags);
        goto done;
    }
done:
    free(offs);
    return st;
}
