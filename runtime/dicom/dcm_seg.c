/* dcm_seg.c - DcmEncodeSeg: a label volume and its source series in, one
 * DICOM Segmentation (PS3.3 A.51, SEG IOD) out.
 *
 *   inputs labels: uint8 / int32 / int64 label volume of the series' own
 *                  grid, D x H x W after dropping size-1 dims (the order of
 *                  DcmDecodeVolume's volume: slices sorted along the normal)
 *          contents: DT_STRING, the series' files (what DcmDecodeVolume took)
 *   attrs  segments: string = ""   comma-separated labels: label value k is
 *                                   segment k ("" = "Segment k" for every
 *                                   value present)
 *          uid_root: string = "2.25"   new UIDs are uid_root.<random>
 *          series_description: string = "dcmserve segmentation"
 *          algorithm: string = "dcmserve"   SegmentAlgorithmName
 *   output seg: DT_STRING scalar, the SEG file (Part 10, Explicit VR LE)
 *
 * The file: SegmentationType BINARY, one frame per segment and slice where
 * that segment is present (as dcmqi writes; one empty frame when no label is),
 * frames ordered by segment then slice, bit-packed (1 bit per pixel, LSB
 * first, frames back to back). Per frame: Derivation Image (the source SOP
 * Instance), Frame Content (dimension index values: segment, slice), Plane
 * Position (the source's ImagePositionPatient, copied), Segment
 * Identification. Shared: Plane Orientation and Pixel Measures of the source.
 * Patient, study and Frame of Reference copied from the source; Referenced
 * Series Sequence lists every source instance. The series is checked as
 * DcmDecodeVolume checks it (dcm_volume_order: same refusals), on headers
 * only. No value of the source ever goes to a log or an error message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "dcm_ops_int.h"
#include "dcm_volume.h"

#define TAG(g, e) DCM_TAG(g, e)
#define SEG_SOP_CLASS "1.2.840.10008.5.1.4.1.1.66.4"
#define EXPLICIT_LE "1.2.840.10008.1.2.1"
/* This implementation's class UID (a fixed 2.25 UUID-derived UID). */
#define IMPL_UID "2.25.95839256290126472347103254869741035867"
#define MAX_SEGMENTS 65535 /* SegmentNumber is US */

typedef struct seg_state {
    char root[40];
    char desc[64], algo[64];
    char *labels; /* the segments attr, "" = none */
} seg_state;

void dcm_seg_release(void *p) {
    seg_state *s = p;
    if (s) free(s->labels);
    free(s);
}

/* Copies attr key into buf (cap bytes), dflt when absent; MS_EINVAL when
 * too long. */
static ms_status attr_str(const kn_node *n, const char *key, const char *dflt, char *buf,
                          size_t cap) {
    size_t len = 0;
    const char *v = kn_attr_s(n, key, &len);
    if (v == NULL) v = dflt, len = strlen(dflt);
    if (len >= cap)
        return ms_errf(MS_EINVAL, "%s: %s is %zu bytes, at most %zu", n->name, key, len, cap - 1);
    memcpy(buf, v, len);
    buf[len] = '\0';
    return MS_OK;
}

ms_status dcm_seg_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    seg_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st;
    if ((st = attr_str(n, "uid_root", "2.25", s->root, sizeof(s->root))) != MS_OK ||
        (st = attr_str(n, "series_description", "dcmserve segmentation", s->desc,
                       sizeof(s->desc))) != MS_OK ||
        (st = attr_str(n, "algorithm", "dcmserve", s->algo, sizeof(s->algo))) != MS_OK)
        goto fail;
    size_t rl = strlen(s->root);
    for (size_t i = 0; i < rl; i++)
        if (!((s->root[i] >= '0' && s->root[i] <= '9') ||
              (s->root[i] == '.' && i > 0 && i + 1 < rl && s->root[i - 1] != '.'))) {
            st = ms_errf(MS_EINVAL, "%s: uid_root must be digits and dots, like 1.2.826.0.1.3680043.2.1125",
                         n->name);
            goto fail;
        }
    if (rl == 0) {
        st = ms_errf(MS_EINVAL, "%s: uid_root is empty", n->name);
        goto fail;
    }
    size_t len = 0;
    const char *v = kn_attr_s(n, "segments", &len);
    s->labels = malloc(len + 1);
    if (s->labels == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if (len) memcpy(s->labels, v, len);
    s->labels[len] = '\0';
    *state = s;
    return MS_OK;
fail:
    dcm_seg_release(s);
    return st;
}

/* ---- writing Explicit VR Little Endian ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} wbuf;

static void w_bytes(wbuf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void w_u16(wbuf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    w_bytes(b, x, 2);
}

static void w_u32(wbuf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(b, x, 4);
}

static void w_hdr(wbuf *b, uint32_t tag, const char *vr, uint32_t len) {
    w_u16(b, (uint16_t)(tag >> 16));
    w_u16(b, (uint16_t)tag);
    w_bytes(b, vr, 2);
    if (!strcmp(vr, "OB") || !strcmp(vr, "SQ") || !strcmp(vr, "UN") || !strcmp(vr, "UT")) {
        w_u16(b, 0);
        w_u32(b, len);
    } else {
        w_u16(b, (uint16_t)len);
    }
}

/* A string value padded to even length (UI with NUL, others space). */
static void w_str(wbuf *b, uint32_t tag, const char *vr, const char *s) {
    size_t n = strlen(s);
    if (n > 0xFFFE) n = 0xFFFE;
    w_hdr(b, tag, vr, (uint32_t)(n + (n & 1)));
    w_bytes(b, s, n);
    if (n & 1) w_bytes(b, strcmp(vr, "UI") ? " " : "", 1);
}

static void w_us(wbuf *b, uint32_t tag, uint16_t v) {
    w_hdr(b, tag, "US", 2);
    w_u16(b, v);
}

static void w_at(wbuf *b, uint32_t tag, uint32_t v) {
    w_hdr(b, tag, "AT", 4);
    w_u16(b, (uint16_t)(v >> 16));
    w_u16(b, (uint16_t)v);
}

static void w_seq(wbuf *b, uint32_t tag) {
    w_hdr(b, tag, "SQ", 0xFFFFFFFFu);
}
static void w_seq_end(wbuf *b) {
    w_u32(b, 0xE0DDFFFEu);
    w_u32(b, 0);
}
static void w_item(wbuf *b) {
    w_u32(b, 0xE000FFFEu);
    w_u32(b, 0xFFFFFFFFu);
}
static void w_item_end(wbuf *b) {
    w_u32(b, 0xE00DFFFEu);
    w_u32(b, 0);
}

/* A code sequence of one item (value, scheme, meaning). */
static void w_code(wbuf *b, uint32_t tag, const char *value, const char *scheme,
                   const char *meaning) {
    w_seq(b, tag);
    w_item(b);
    w_str(b, TAG(0x0008, 0x0100), "SH", value);
    w_str(b, TAG(0x0008, 0x0102), "SH", scheme);
    w_str(b, TAG(0x0008, 0x0104), "LO", meaning);
    w_item_end(b);
    w_seq_end(b);
}

/* ---- the source ---- */

typedef struct seg_src {
    char sop_class[68], sop_uid[68], ipp[160];
} seg_src;

/* The study-level attributes copied from the first slice. */
static const struct {
    uint32_t tag;
    const char vr[3];
} copied[] = {
    {TAG(0x0008, 0x0005), "CS"}, {TAG(0x0008, 0x0020), "DA"}, {TAG(0x0008, 0x0030), "TM"},
    {TAG(0x0008, 0x0050), "SH"}, {TAG(0x0008, 0x0090), "PN"}, {TAG(0x0010, 0x0010), "PN"},
    {TAG(0x0010, 0x0020), "LO"}, {TAG(0x0010, 0x0030), "DA"}, {TAG(0x0010, 0x0040), "CS"},
    {TAG(0x0020, 0x000D), "UI"}, {TAG(0x0020, 0x0010), "SH"}, {TAG(0x0020, 0x0052), "UI"},
};
#define NCOPIED (sizeof(copied) / sizeof(copied[0]))

typedef struct seg_study {
    char v[NCOPIED][256];
    char ori[160], px[80], thick[40], series[68];
} seg_study;

static void get_str(const dcm_dataset *ds, uint32_t tag, char *buf, size_t n) {
    buf[0] = '\0';
    dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, tag), buf, n);
}

/* A new UID: root.<random decimal>, at most 64 characters. */
static ms_status new_uid(const char *root, char *out) {
    uint64_t r[2];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return ms_errf(MS_EINTERNAL, "no random bytes for a UID");
    unsigned __int128 v = ((unsigned __int128)r[0] << 64) | r[1];
    if (strcmp(root, "2.25") != 0) v = r[0]; /* a shorter suffix under an org root */
    char d[48];
    int k = 0;
    do {
        d[k++] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v != 0 && k < 47);
    size_t rl = strlen(root);
    int room = 64 - (int)rl - 1;
    if (k > room) k = room; /* the low digits: still random */
    int o = snprintf(out, 65, "%s.", root);
    for (int i = k - 1; i >= 0; i--) out[o++] = d[i];
    if (out[rl + 1] == '0' && k > 1) out[rl + 1] = '1'; /* no leading zero */
    out[o] = '\0';
    return MS_OK;
}

/* Label value at index i of the label tensor, as int64. */
static int64_t label_at(const rt_tensor *t, uint64_t i) {
    switch (t->dtype) {
    case RT_DT_UINT8: return ((const uint8_t *)t->data)[i];
    case RT_DT_INT32: return ((const int32_t *)t->data)[i];
    default: return ((const int64_t *)t->data)[i];
    }
}

/* Segment labels from the attr: names[k - 1] for label k; *ns their count. */
static ms_status seg_names(const char *attr, char ***names, int *ns) {
    *names = NULL;
    *ns = 0;
    if (attr[0] == '\0') return MS_OK;
    int n = 1;
    for (const char *p = attr; *p; p++) n += *p == ',';
    if (n > MAX_SEGMENTS) return ms_errf(MS_EINVAL, "more than %d segments", MAX_SEGMENTS);
    char **v = calloc((size_t)n, sizeof(*v));
    if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    const char *p = attr;
    for (int k = 0; k < n; k++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 64) len = 64; /* LO */
        v[k] = strndup(p, len);
        if (v[k] == NULL) {
            for (int q = 0; q < k; q++) free(v[q]);
            free(v);
            return ms_errf(MS_ENOMEM, "out of memory");
        }
        p = e ? e + 1 : p + len;
    }
    *names = v;
    *ns = n;
    return MS_OK;
}

typedef struct seg_frame {
    uint16_t segment;
    uint32_t slice;
} seg_frame;

/* The file: meta, then the data set in ascending tag order. */
static ms_status write_seg(const seg_state *s, const seg_study *sy, const seg_src *src,
                           const rt_tensor *lab, int64_t D, int64_t H, int64_t W,
                           const seg_frame *fr, uint64_t nfr, char **names, int nseg, wbuf *out) {
    char sop[68], series[68], dim_uid[68];
    ms_status st;
    if ((st = new_uid(s->root, sop)) != MS_OK || (st = new_uid(s->root, series)) != MS_OK ||
        (st = new_uid(s->root, dim_uid)) != MS_OK)
        return st;
    char date[16], tim[16];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%Y%m%d", &tm);
    strftime(tim, sizeof(tim), "%H%M%S", &tm);

    /* Meta: 128 zero bytes, DICM, group 0002 with its length first. */
    wbuf meta = {0};
    w_hdr(&meta, TAG(0x0002, 0x0001), "OB", 2);
    w_bytes(&meta, "\0\1", 2);
    w_str(&meta, TAG(0x0002, 0x0002), "UI", SEG_SOP_CLASS);
    w_str(&meta, TAG(0x0002, 0x0003), "UI", sop);
    w_str(&meta, TAG(0x0002, 0x0010), "UI", EXPLICIT_LE);
    w_str(&meta, TAG(0x0002, 0x0012), "UI", IMPL_UID);
    w_str(&meta, TAG(0x0002, 0x0013), "SH", "DCMSERVE");
    static const uint8_t zero[128];
    w_bytes(out, zero, 128);
    w_bytes(out, "DICM", 4);
    w_hdr(out, TAG(0x0002, 0x0000), "UL", 4);
    w_u32(out, (uint32_t)meta.n);
    w_bytes(out, meta.p, meta.n);
    const int oom = meta.oom;
    free(meta.p);
    if (oom) return ms_errf(MS_ENOMEM, "out of memory for the SEG file");

    wbuf *b = out;
    char num[32];
    /* a study-level value copied from the source (k: index in copied[]) */
#define COPY(k) w_str(b, copied[k].tag, copied[k].vr, sy->v[k])
    if (sy->v[0][0]) COPY(0); /* SpecificCharacterSet, when the source has one */
    w_str(b, TAG(0x0008, 0x0008), "CS", "DERIVED\\PRIMARY");
    w_str(b, TAG(0x0008, 0x0016), "UI", SEG_SOP_CLASS);
    w_str(b, TAG(0x0008, 0x0018), "UI", sop);
    COPY(1); /* StudyDate */
    w_str(b, TAG(0x0008, 0x0023), "DA", date);
    COPY(2); /* StudyTime */
    w_str(b, TAG(0x0008, 0x0033), "TM", tim);
    COPY(3); /* AccessionNumber */
    w_str(b, TAG(0x0008, 0x0060), "CS", "SEG");
    w_str(b, TAG(0x0008, 0x0070), "LO", "dcmserve");
    COPY(4); /* ReferringPhysicianName */
    w_str(b, TAG(0x0008, 0x103E), "LO", s->desc);
    w_str(b, TAG(0x0008, 0x1090), "LO", "dcmserve");
    w_seq(b, TAG(0x0008, 0x1115)); /* Referenced Series */
    w_item(b);
    w_seq(b, TAG(0x0008, 0x114A));
    for (int64_t k = 0; k < D; k++) {
        w_item(b);
        w_str(b, TAG(0x0008, 0x1150), "UI", src[k].sop_class);
        w_str(b, TAG(0x0008, 0x1155), "UI", src[k].sop_uid);
        w_item_end(b);
    }
    w_seq_end(b);
    w_str(b, TAG(0x0020, 0x000E), "UI", sy->series);
    w_item_end(b);
    w_seq_end(b);
    COPY(5); /* PatientName */
    COPY(6); /* PatientID */
    COPY(7); /* PatientBirthDate */
    COPY(8); /* PatientSex */
    w_str(b, TAG(0x0018, 0x1000), "LO", "1");
    w_str(b, TAG(0x0018, 0x1020), "LO", "dcmserve");
    COPY(9); /* StudyInstanceUID */
    w_str(b, TAG(0x0020, 0x000E), "UI", series);
    COPY(10); /* StudyID */
    w_str(b, TAG(0x0020, 0x0011), "IS", "300");
    w_str(b, TAG(0x0020, 0x0013), "IS", "1");
    COPY(11); /* FrameOfReferenceUID */
    w_str(b, TAG(0x0020, 0x1040), "LO", "");
#undef COPY
    w_seq(b, TAG(0x0020, 0x9221)); /* Dimension Organization */
    w_item(b);
    w_str(b, TAG(0x0020, 0x9164), "UI", dim_uid);
    w_item_end(b);
    w_seq_end(b);
    w_seq(b, TAG(0x0020, 0x9222)); /* Dimension Index: segment, then position */
    for (int q = 0; q < 2; q++) {
        w_item(b);
        w_str(b, TAG(0x0020, 0x9164), "UI", dim_uid);
        w_at(b, TAG(0x0020, 0x9165), q ? TAG(0x0020, 0x0032) : TAG(0x0062, 0x000B));
        w_at(b, TAG(0x0020, 0x9167), q ? TAG(0x0020, 0x9113) : TAG(0x0062, 0x000A));
        w_str(b, TAG(0x0020, 0x9421), "LO", q ? "ImagePositionPatient" : "ReferencedSegmentNumber");
        w_item_end(b);
    }
    w_seq_end(b);
    w_us(b, TAG(0x0028, 0x0002), 1);
    w_str(b, TAG(0x0028, 0x0004), "CS", "MONOCHROME2");
    snprintf(num, sizeof(num), "%llu", (unsigned long long)nfr);
    w_str(b, TAG(0x0028, 0x0008), "IS", num);
    w_us(b, TAG(0x0028, 0x0010), (uint16_t)H);
    w_us(b, TAG(0x0028, 0x0011), (uint16_t)W);
    w_us(b, TAG(0x0028, 0x0100), 1);
    w_us(b, TAG(0x0028, 0x0101), 1);
    w_us(b, TAG(0x0028, 0x0102), 0);
    w_us(b, TAG(0x0028, 0x0103), 0);
    w_str(b, TAG(0x0028, 0x2110), "CS", "00");
    w_str(b, TAG(0x0062, 0x0001), "CS", "BINARY");
    w_seq(b, TAG(0x0062, 0x0002)); /* Segment Sequence */
    for (int k = 1; k <= nseg; k++) {
        char dflt[32];
        snprintf(dflt, sizeof(dflt), "Segment %d", k);
        w_item(b);
        w_code(b, TAG(0x0062, 0x0003), "91723000", "SCT", "Anatomical Structure");
        w_us(b, TAG(0x0062, 0x0004), (uint16_t)k);
        w_str(b, TAG(0x0062, 0x0005), "LO", names && names[k - 1][0] ? names[k - 1] : dflt);
        w_str(b, TAG(0x0062, 0x0008), "CS", "AUTOMATIC");
        w_str(b, TAG(0x0062, 0x0009), "LO", s->algo);
        w_code(b, TAG(0x0062, 0x000F), "85756007", "SCT", "Tissue");
        w_item_end(b);
    }
    w_seq_end(b);
    w_str(b, TAG(0x0070, 0x0080), "CS", "SEGMENTATION");
    w_str(b, TAG(0x0070, 0x0081), "LO", s->desc);
    w_str(b, TAG(0x0070, 0x0084), "PN", "");
    w_seq(b, TAG(0x5200, 0x9229)); /* Shared Functional Groups */
    w_item(b);
    w_seq(b, TAG(0x0020, 0x9116));
    w_item(b);
    w_str(b, TAG(0x0020, 0x0037), "DS", sy->ori);
    w_item_end(b);
    w_seq_end(b);
    w_seq(b, TAG(0x0028, 0x9110));
    w_item(b);
    w_str(b, TAG(0x0018, 0x0050), "DS", sy->thick);
    w_str(b, TAG(0x0018, 0x0088), "DS", sy->thick);
    w_str(b, TAG(0x0028, 0x0030), "DS", sy->px);
    w_item_end(b);
    w_seq_end(b);
    w_item_end(b);
    w_seq_end(b);
    w_seq(b, TAG(0x5200, 0x9230)); /* Per-frame Functional Groups */
    for (uint64_t f = 0; f < nfr; f++) {
        const seg_src *sr = &src[fr[f].slice];
        w_item(b);
        w_seq(b, TAG(0x0008, 0x9124)); /* Derivation Image */
        w_item(b);
        w_seq(b, TAG(0x0008, 0x2112));
        w_item(b);
        w_str(b, TAG(0x0008, 0x1150), "UI", sr->sop_class);
        w_str(b, TAG(0x0008, 0x1155), "UI", sr->sop_uid);
        w_code(b, TAG(0x0040, 0xA170), "121322", "DCM",
               "Source image for image processing operation");
        w_item_end(b);
        w_seq_end(b);
        w_code(b, TAG(0x0008, 0x9215), "113076", "DCM", "Segmentation");
        w_item_end(b);
        w_seq_end(b);
        w_seq(b, TAG(0x0020, 0x9111)); /* Frame Content */
        w_item(b);
        w_hdr(b, TAG(0x0020, 0x9157), "UL", 8);
        w_u32(b, fr[f].segment);
        w_u32(b, fr[f].slice + 1);
        w_item_end(b);
        w_seq_end(b);
        w_seq(b, TAG(0x0020, 0x9113)); /* Plane Position */
        w_item(b);
        w_str(b, TAG(0x0020, 0x0032), "DS", sr->ipp);
        w_item_end(b);
        w_seq_end(b);
        w_seq(b, TAG(0x0062, 0x000A)); /* Segment Identification */
        w_item(b);
        w_us(b, TAG(0x0062, 0x000B), fr[f].segment);
        w_item_end(b);
        w_seq_end(b);
        w_item_end(b);
    }
    w_seq_end(b);
    /* Pixel Data: frames back to back, 1 bit per pixel, LSB first. */
    const uint64_t plane = (uint64_t)H * W, bits = nfr * plane;
    const uint64_t nbytes = (bits + 7) / 8 + ((bits + 7) / 8 & 1);
    if (nbytes > 0xFFFFFFFEu) return ms_errf(MS_EINVAL, "SEG pixel data over 4 GiB");
    w_hdr(b, TAG(0x7FE0, 0x0010), "OB", (uint32_t)nbytes);
    const size_t at = b->n;
    uint8_t *zeros = calloc(1, (size_t)nbytes ? (size_t)nbytes : 1);
    if (zeros == NULL) return ms_errf(MS_ENOMEM, "out of memory for the SEG pixel data");
    w_bytes(b, zeros, (size_t)nbytes);
    free(zeros);
    if (b->oom) return ms_errf(MS_ENOMEM, "out of memory for the SEG file");
    uint8_t *px = b->p + at;
    for (uint64_t f = 0; f < nfr; f++) {
        const uint64_t base = (uint64_t)fr[f].slice * plane;
        for (uint64_t i = 0; i < plane; i++)
            if (label_at(lab, base + i) == fr[f].segment) {
                const uint64_t bit = f * plane + i;
                px[bit >> 3] |= (uint8_t)(1u << (bit & 7));
            }
    }
    return MS_OK;
}

ms_status dcm_seg_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    const seg_state *s = state;
    const rt_tensor *lab = in[0], *files = in[1];
    if (s == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    if (files->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "contents must be DT_STRING, got %s", rt_dtype_name(files->dtype));
    if (lab->dtype != RT_DT_UINT8 && lab->dtype != RT_DT_INT32 && lab->dtype != RT_DT_INT64)
        return ms_errf(MS_EINVAL, "labels must be uint8, int32 or int64, got %s", rt_dtype_name(lab->dtype));
    const int64_t nf = files->nelem;
    const rt_str *fs = rt_tensor_strs(files);
    int64_t *order = calloc((size_t)(nf ? nf : 1), sizeof(*order));
    seg_src *src = calloc((size_t)(nf ? nf : 1), sizeof(*src));
    seg_study *sy = calloc(1, sizeof(*sy));
    seg_frame *fr = NULL;
    char **names = NULL;
    int nnames = 0;
    wbuf b = {0};
    dcm_volume_geom g;
    ms_status st = MS_OK;
    if (order == NULL || src == NULL || sy == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((st = dcm_volume_order(ctx, fs, nf, order, &g)) != MS_OK) goto done;
    const int64_t D = g.dim[0], H = g.dim[1], W = g.dim[2];
    /* The labels' shape without its size-1 dims must be the series'. */
    int64_t sq[RT_MAX_RANK], ns = 0, want[3] = {D, H, W}, nw = 0;
    for (int a = 0; a < lab->shape.rank; a++)
        if (lab->shape.dim[a] != 1) sq[ns++] = lab->shape.dim[a];
    int64_t wq[3];
    for (int a = 0; a < 3; a++)
        if (want[a] != 1) wq[nw++] = want[a];
    int same = ns == nw;
    for (int64_t a = 0; same && a < ns; a++) same = sq[a] == wq[a];
    if (!same) {
        char shp[96];
        st = ms_errf(MS_EINVAL,
                     "labels have shape %s, the series is %lldx%lldx%lld (slices x rows x "
                     "columns): a SEG is written on the series' own grid",
                     rt_shape_str(&lab->shape, shp, sizeof(shp)), (long long)D, (long long)H,
                     (long long)W);
        goto done;
    }
    if ((st = seg_names(s->labels, &names, &nnames)) != MS_OK) goto done;
    /* The source's identifiers, per slice in the volume's order. */
    dcm_limits lim;
    dcm_limits_default(&lim);
    lim.header_only = 1;
    for (int64_t k = 0; k < D; k++) {
        dcm_dataset *ds = NULL;
        const rt_str *f = &fs[order[k]];
        if ((st = dcm_parse(f->data, (size_t)f->len, &lim, &ds)) != MS_OK) goto done;
        get_str(ds, TAG(0x0008, 0x0016), src[k].sop_class, sizeof(src[k].sop_class));
        get_str(ds, TAG(0x0008, 0x0018), src[k].sop_uid, sizeof(src[k].sop_uid));
        get_str(ds, TAG(0x0020, 0x0032), src[k].ipp, sizeof(src[k].ipp));
        if (k == 0) {
            for (size_t c = 0; c < NCOPIED; c++)
                get_str(ds, copied[c].tag, sy->v[c], sizeof(sy->v[c]));
            get_str(ds, TAG(0x0020, 0x0037), sy->ori, sizeof(sy->ori));
            get_str(ds, TAG(0x0028, 0x0030), sy->px, sizeof(sy->px));
            get_str(ds, TAG(0x0018, 0x0050), sy->thick, sizeof(sy->thick));
            get_str(ds, TAG(0x0020, 0x000E), sy->series, sizeof(sy->series));
        }
        dcm_dataset_free(ds);
        if (!src[k].sop_class[0] || !src[k].sop_uid[0] || !src[k].ipp[0]) {
            st = ms_errf(MS_EINVAL,
                         "dicom[%lld] lacks SOPClassUID, SOPInstanceUID or "
                         "ImagePositionPatient, which a SEG references",
                         (long long)order[k]);
            goto done;
        }
    }
    if (!sy->v[11][0] || !sy->v[9][0] || !sy->ori[0] || !sy->px[0]) {
        st = ms_errf(MS_EINVAL,
                     "the series lacks FrameOfReferenceUID, StudyInstanceUID, "
                     "ImageOrientationPatient or PixelSpacing, which a SEG needs");
        goto done;
    }
    if (!sy->thick[0]) snprintf(sy->thick, sizeof(sy->thick), "%.6g", g.spacing[0] > 0 ? g.spacing[0] : 1.0);
    /* Segments present: label values 1..nseg; others refused. */
    const uint64_t plane = (uint64_t)H * W;
    int64_t maxv = 0;
    for (uint64_t i = 0; i < (uint64_t)lab->nelem; i++) {
        const int64_t v = label_at(lab, i);
        if (v < 0 || v > MAX_SEGMENTS || (nnames && v > nnames)) {
            st = ms_errf(MS_EINVAL,
                         "label value %lld at slice %llu; the segments are 1..%d (0 is "
                         "background)",
                         (long long)v, (unsigned long long)(i / plane),
                         nnames ? nnames : MAX_SEGMENTS);
            goto done;
        }
        if (v > maxv) maxv = v;
    }
    const int nseg = nnames ? nnames : (maxv ? (int)maxv : 1);
    /* which (segment, slice) frames hold a pixel */
    uint8_t *has = calloc((size_t)nseg * (size_t)D, 1);
    if (has == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    uint64_t nfr = 0;
    for (uint64_t i = 0; i < (uint64_t)lab->nelem; i++) {
        const int64_t v = label_at(lab, i);
        if (v > 0) {
            uint8_t *h = &has[(size_t)(v - 1) * (size_t)D + i / plane];
            nfr += !*h;
            *h = 1;
        }
    }
    fr = calloc(nfr ? nfr : 1, sizeof(*fr));
    if (fr == NULL) {
        free(has);
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    uint64_t q = 0;
    for (int sg = 0; sg < nseg; sg++)
        for (int64_t k = 0; k < D; k++)
            if (has[(size_t)sg * (size_t)D + (size_t)k])
                fr[q++] = (seg_frame){.segment = (uint16_t)(sg + 1), .slice = (uint32_t)k};
    free(has);
    if (nfr == 0) { /* no label anywhere: one empty frame keeps the file valid */
        fr[0] = (seg_frame){.segment = 1, .slice = 0};
        nfr = 1;
    }
    if ((st = write_seg(s, sy, src, lab, D, H, W, fr, nfr, names, nseg, &b)) != MS_OK) goto done;
    st = rt_tensor_scalar_string((const char *)b.p, b.n, &out[0]);
done:
    if (names)
        for (int k = 0; k < nnames; k++) free(names[k]);
    free(names);
    free(b.p);
    free(fr);
    free(sy);
    free(src);
    free(order);
    return st;
}
