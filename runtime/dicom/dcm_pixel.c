/* dcm_pixel.c - Image Pixel module (PS3.3 §C.7.6.3), Modality LUT (§C.11.1)
 * and windowing; native frames here, encapsulated ones through dcm_codec.h.
 */
#include "dcm_pixel.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_codec.h"
#include "ms_log.h"
#include "kn_threadpool.h"

/* HU must be two float32 roundings (multiply, then add), never a fused
 * multiply-add, to equal numpy's float32 expression bit for bit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "tree-vectorize", "vect-cost-model=dynamic")
#endif

#define TAG(g, e) DCM_TAG(g, e)

static _Atomic uint64_t g_pixels;

void dcm_pixels_count(uint64_t n) {
    atomic_fetch_add_explicit(&g_pixels, n, memory_order_relaxed);
}

uint64_t dcm_pixels_decoded(void) {
    return atomic_load(&g_pixels);
}

static int streq(const char *a, const char *b) {
    return strcmp(a, b) == 0;
}

/* ---- header ---- */

static ms_status get_u16(const dcm_dataset *ds, uint32_t tag, uint16_t *out, int required,
                         const char *name) {
    int64_t i = dcm_find(ds, DCM_NO_PARENT, tag);
    if (i < 0 || ds->elems[i].len == 0) {
        if (required) return ms_errf(MS_EINVAL, "missing %s", name);
        return MS_OK;
    }
    uint32_t v;
    if (dcm_get_uint(ds, i, 0, &v) != MS_OK || v > 65535)
        return ms_errf(MS_EINVAL, "%s is not a valid unsigned 16-bit value", name);
    *out = (uint16_t)v;
    return MS_OK;
}

/* Rescale slope/intercept of one item (top level: DCM_NO_PARENT). Returns 1
 * when found, 0 when absent, -1 with the error set when unreadable. */
static int read_rescale(const dcm_dataset *ds, uint32_t parent, double *slope, double *icpt) {
    int64_t s = dcm_find(ds, parent, TAG(0x0028, 0x1053));
    int64_t i = dcm_find(ds, parent, TAG(0x0028, 0x1052));
    if ((s < 0 || ds->elems[s].len == 0) && (i < 0 || ds->elems[i].len == 0)) return 0;
    double sv = 1.0, iv = 0.0;
    if (s >= 0 && ds->elems[s].len > 0 && dcm_get_number(ds, s, 0, &sv) != MS_OK) {
        ms_errwrap(MS_EINVAL, "RescaleSlope");
        return -1;
    }
    if (i >= 0 && ds->elems[i].len > 0 && dcm_get_number(ds, i, 0, &iv) != MS_OK) {
        ms_errwrap(MS_EINVAL, "RescaleIntercept");
        return -1;
    }
    if (!isfinite(sv) || !isfinite(iv)) {
        ms_errf(MS_EINVAL, "RescaleSlope/Intercept not finite");
        return -1;
    }
    *slope = sv;
    *icpt = iv;
    return 1;
}

/* First item of sequence `tag` under parent, or -1. */
static int64_t first_item(const dcm_dataset *ds, uint32_t parent, uint32_t tag) {
    int64_t sq = dcm_find(ds, parent, tag);
    if (sq < 0) return -1;
    return dcm_item(ds, (uint32_t)sq, 0);
}

/* Rescale inside a functional-group item: (0028,9145) > item > slope/intercept. */
static int read_fg_rescale(const dcm_dataset *ds, int64_t fg_item, double *slope, double *icpt) {
    if (fg_item < 0) return 0;
    int64_t it = first_item(ds, (uint32_t)fg_item, TAG(0x0028, 0x9145));
    if (it < 0) return 0;
    return read_rescale(ds, (uint32_t)it, slope, icpt);
}

static int read_window(const dcm_dataset *ds, uint32_t parent, double *c, double *w) {
    int64_t ci = dcm_find(ds, parent, TAG(0x0028, 0x1050));
    int64_t wi = dcm_find(ds, parent, TAG(0x0028, 0x1051));
    if (ci < 0 || wi < 0) return 0;
    if (dcm_get_number(ds, ci, 0, c) != MS_OK || dcm_get_number(ds, wi, 0, w) != MS_OK) return 0;
    return 1;
}

ms_status dcm_read_info(const dcm_dataset *ds, dcm_info *o) {
    ms_status st;
    memset(o, 0, sizeof(*o));
    snprintf(o->ts_uid, sizeof(o->ts_uid), "%s", ds->ts_uid);
    o->ts_name = dcm_ts_name(ds->ts_uid);
    snprintf(o->sop_class, sizeof(o->sop_class), "%s", ds->sop_class);
    if (o->sop_class[0] == '\0')
        dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, TAG(0x0008, 0x0016)), o->sop_class,
                       sizeof(o->sop_class));
    dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, TAG(0x0008, 0x0060)), o->modality,
                   sizeof(o->modality));
    dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, TAG(0x0028, 0x0004)), o->photometric,
                   sizeof(o->photometric));
    dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, TAG(0x0028, 0x1054)), o->rescale_type,
                   sizeof(o->rescale_type));
    dcm_get_string(ds, dcm_find(ds, DCM_NO_PARENT, TAG(0x0028, 0x1056)), o->voi_function,
                   sizeof(o->voi_function));

    uint16_t rows = 0, cols = 0, spp = 1;
    if ((st = get_u16(ds, TAG(0x0028, 0x0010), &rows, 0, "Rows")) != MS_OK) return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0011), &cols, 0, "Columns")) != MS_OK) return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0002), &spp, 0, "SamplesPerPixel")) != MS_OK) return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0100), &o->bits_allocated, 0, "BitsAllocated")) != MS_OK)
        return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0101), &o->bits_stored, 0, "BitsStored")) != MS_OK)
        return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0102), &o->high_bit, 0, "HighBit")) != MS_OK) return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0103), &o->pixel_rep, 0, "PixelRepresentation")) != MS_OK)
        return st;
    if ((st = get_u16(ds, TAG(0x0028, 0x0006), &o->planar, 0, "PlanarConfiguration")) != MS_OK)
        return st;
    if (dcm_find(ds, DCM_NO_PARENT, TAG(0x0028, 0x0101)) < 0) o->bits_stored = o->bits_allocated;
    o->rows = rows;
    o->cols = cols;
    o->samples = spp;
    o->frames = 1;
    int64_t nf = dcm_find(ds, DCM_NO_PARENT, TAG(0x0028, 0x0008));
    if (nf >= 0 && ds->elems[nf].len > 0) {
        uint32_t v;
        if (dcm_get_uint(ds, nf, 0, &v) != MS_OK) return ms_errwrap(MS_EINVAL, "NumberOfFrames");
        o->frames = v;
    }

    int64_t px = dcm_find(ds, DCM_NO_PARENT, DCM_TAG_PIXEL_DATA);
    if (px >= 0) {
        o->has_pixels = 1;
        o->encapsulated = ds->encapsulated;
        o->fragments = ds->nfrags;
    } else if (dcm_find(ds, DCM_NO_PARENT, DCM_TAG_FLOAT_PIXEL_DATA) >= 0) {
        o->has_pixels = 1;
        o->float_pixels = 32;
    } else if (dcm_find(ds, DCM_NO_PARENT, DCM_TAG_DOUBLE_PIXEL_DATA) >= 0) {
        o->has_pixels = 1;
        o->float_pixels = 64;
    }

    o->slope = 1.0;
    o->intercept = 0.0;
    int r = read_rescale(ds, DCM_NO_PARENT, &o->slope, &o->intercept);
    if (r < 0) return MS_EINVAL;
    if (r > 0) o->rescale_source = DCM_RESCALE_ATTRS;
    if (r == 0) {
        int64_t sh = first_item(ds, DCM_NO_PARENT, TAG(0x5200, 0x9229));
        int64_t pf = first_item(ds, DCM_NO_PARENT, TAG(0x5200, 0x9230));
        int a = read_fg_rescale(ds, pf, &o->slope, &o->intercept);
        if (a == 0) a = read_fg_rescale(ds, sh, &o->slope, &o->intercept);
        if (a < 0) return MS_EINVAL;
        if (a > 0) o->rescale_source = DCM_RESCALE_FUNCTIONAL;
    }
    if (r == 0 && o->rescale_source == DCM_RESCALE_NONE &&
        first_item(ds, DCM_NO_PARENT, TAG(0x0028, 0x3000)) >= 0)
        o->rescale_source = DCM_RESCALE_LUT;

    o->has_window = read_window(ds, DCM_NO_PARENT, &o->window_center, &o->window_width);
    if (!o->has_window) {
        int64_t fgs[2] = {first_item(ds, DCM_NO_PARENT, TAG(0x5200, 0x9229)),
                          first_item(ds, DCM_NO_PARENT, TAG(0x5200, 0x9230))};
        for (int k = 0; k < 2 && !o->has_window; k++) {
            if (fgs[k] < 0) continue;
            int64_t it = first_item(ds, (uint32_t)fgs[k], TAG(0x0028, 0x9132));
            if (it >= 0)
                o->has_window = read_window(ds, (uint32_t)it, &o->window_center, &o->window_width);
        }
    }
    return MS_OK;
}

/* ---- decoding ---- */

typedef struct modality {
    float *slope, *icpt; /* per frame (float32, as the formula uses them) */
    const uint8_t *lut;  /* Modality LUT data; NULL when rescaling */
    uint32_t lut_entries;
    int64_t lut_first;
    int lut_bytes; /* 1 or 2 per entry */
    int lut_be;
} modality;

typedef struct pixfmt {
    uint32_t rows, cols, samples, frames;
    uint16_t ba, bs, pr;
    int be;        /* values stored big endian */
    int swap8;     /* 8-bit values in a big-endian OW: swapped in pairs */
    int planar;    /* native colour by plane */
    int ybr;       /* YBR_FULL: convert to RGB */
    int ybr422;    /* native YBR_FULL_422 (subsampled, 2/3 size) */
    int fmt_float; /* 32 / 64 float pixel data */
} pixfmt;

static uint32_t rdu(const uint8_t *p, int bytes, int be) {
    switch (bytes) {
    case 1:
        return p[0];
    case 2:
        return be ? (uint32_t)((p[0] << 8) | p[1]) : (uint32_t)(p[0] | (p[1] << 8));
    default:
        if (be)
            return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
    }
}

static inline int64_t stored_value(uint32_t word, uint16_t bs, uint16_t pr) {
    if (bs < 32) word &= ((uint32_t)1 << bs) - 1;
    if (pr && (word >> (bs - 1)) & 1) return (int64_t)word - ((int64_t)1 << bs);
    return (int64_t)word;
}

static inline float apply_modality(const modality *m, uint32_t frame, int64_t sv) {
    if (m->lut) {
        int64_t k = sv - m->lut_first;
        if (k < 0) k = 0;
        if (k >= (int64_t)m->lut_entries) k = (int64_t)m->lut_entries - 1;
        return (float)rdu(m->lut + (uint64_t)k * (uint64_t)m->lut_bytes, m->lut_bytes, m->lut_be);
    }
    float prod = (float)sv * m->slope[frame];
    return prod + m->icpt[frame];
}

/* pydicom's YBR_FULL -> RGB (pixel_data_handlers/util.py _convert_YBR_FULL_to_RGB):
 * a float32 matrix product, then floor(x + 0.5) clipped to 0..255. */
static void ybr_to_rgb(int32_t y, int32_t cb, int32_t cr, int32_t rgb[3]) {
    static const float m[3][3] = {
        {1.0f, 1.0f, 1.0f},
        {0.0f, (float)(-0.114 * 1.772 / 0.587), 1.772f},
        {1.402f, (float)(-0.299 * 1.402 / 0.587), 0.0f},
    };
    float in[3] = {(float)y, (float)(cb - 128), (float)(cr - 128)};
    for (int j = 0; j < 3; j++) {
        float a = in[0] * m[0][j];
        float b = in[1] * m[1][j];
        float c = in[2] * m[2][j];
        float s = (a + b) + c;
        float r = floorf(s + 0.5f);
        if (r < 0) r = 0;
        if (r > 255) r = 255;
        rgb[j] = (int32_t)r;
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* AVX-512 / AVX2 clones: 16 / 8 lanes per conversion where the CPU has them. */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void hu_u16(const uint8_t *restrict raw, uint64_t n, uint32_t mask, float sl, float ic,
                   float *restrict out) {
    for (uint64_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, raw + 2 * i, 2); /* little-endian host */
        float prod = (float)(int32_t)(w & mask) * sl;
        out[i] = prod + ic;
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* AVX-512 / AVX2 clones: 16 / 8 lanes per conversion where the CPU has them. */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void hu_s16(const uint8_t *restrict raw, uint64_t n, uint32_t mask, uint32_t sign, float sl,
                   float ic, float *restrict out) {
    for (uint64_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, raw + 2 * i, 2);
        int32_t sv = (int32_t)((w & mask) ^ sign) - (int32_t)sign;
        float prod = (float)sv * sl;
        out[i] = prod + ic;
    }
}

/* Converts one frame of native (or codec-output, interleaved) samples at
 * `raw` into HU in `out` (rows*cols*samples floats). `bit0` is the frame's
 * first bit for BitsAllocated 1. */
static void frame_to_hu(const pixfmt *f, const modality *m, uint32_t frame, const uint8_t *raw,
                        uint64_t bit0, float *out) {
    const uint64_t npix = (uint64_t)f->rows * f->cols;
    const uint32_t spp = f->samples;
    dcm_pixels_count(npix * spp);
    if (f->fmt_float) {
        for (uint64_t i = 0; i < npix * spp; i++) {
            float v;
            if (f->fmt_float == 32) {
                uint32_t u = rdu(raw + 4 * i, 4, f->be);
                memcpy(&v, &u, 4);
            } else {
                uint64_t hi = rdu(raw + 8 * i + (f->be ? 0 : 4), 4, f->be);
                uint64_t lo = rdu(raw + 8 * i + (f->be ? 4 : 0), 4, f->be);
                uint64_t u = (hi << 32) | lo;
                double d;
                memcpy(&d, &u, 8);
                v = (float)d;
            }
            float prod = v * m->slope[frame];
            out[i] = prod + m->icpt[frame];
        }
        return;
    }
    if (f->ba == 1) {
        for (uint64_t i = 0; i < npix * spp; i++) {
            uint64_t b = bit0 + i;
            int64_t sv = (raw[b >> 3] >> (b & 7)) & 1;
            out[i] = apply_modality(m, frame, sv);
        }
        return;
    }
    const int bytes = f->ba / 8;
    if (f->ybr422) {
        /* Y1 Y2 Cb Cr per pixel pair (8-bit only). */
        for (uint64_t r = 0; r < f->rows; r++) {
            const uint8_t *row = raw + r * (uint64_t)f->cols * 2;
            for (uint64_t c = 0; c < f->cols; c++) {
                const uint8_t *pair = row + (c / 2) * 4;
                int32_t rgb[3];
                ybr_to_rgb(pair[c & 1], pair[2], pair[3], rgb);
                float *o = out + (r * f->cols + c) * 3;
                for (int k = 0; k < 3; k++)
                    o[k] = apply_modality(m, frame, rgb[k]);
            }
        }
        return;
    }
    if (spp == 3 && (f->planar || f->ybr)) {
        for (uint64_t i = 0; i < npix; i++) {
            int64_t s[3];
            for (uint32_t k = 0; k < 3; k++) {
                uint64_t idx = f->planar ? k * npix + i : i * 3 + k;
                uint64_t at = idx * (uint64_t)bytes;
                if (f->swap8) at ^= 1;
                s[k] = stored_value(rdu(raw + at, bytes, f->be), f->bs, f->pr);
            }
            if (f->ybr) {
                int32_t rgb[3];
                ybr_to_rgb((int32_t)s[0], (int32_t)s[1], (int32_t)s[2], rgb);
                for (int k = 0; k < 3; k++)
                    s[k] = rgb[k];
            }
            for (int k = 0; k < 3; k++)
                out[i * 3 + k] = apply_modality(m, frame, s[k]);
        }
        return;
    }
    const uint64_t n = npix * spp;
    if (bytes == 2 && !f->be && m->lut == NULL) {
        /* The common CT case: simple loops the compiler vectorises. */
        const uint16_t bs = f->bs;
        const uint32_t mask = bs < 16 ? ((uint32_t)1 << bs) - 1 : 0xFFFF;
        if (f->pr)
            hu_s16(raw, n, mask, (uint32_t)1 << (bs - 1), m->slope[frame], m->icpt[frame], out);
        else
            hu_u16(raw, n, mask, m->slope[frame], m->icpt[frame], out);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = i * (uint64_t)bytes;
        if (f->swap8) at ^= 1;
        out[i] = apply_modality(m, frame, stored_value(rdu(raw + at, bytes, f->be), f->bs, f->pr));
    }
}

static ms_status setup_modality(const dcm_dataset *ds, const dcm_info *info, modality *m) {
    uint32_t nf = info->frames;
    m->slope = malloc((size_t)nf * sizeof(float));
    m->icpt = malloc((size_t)nf * sizeof(float));
    if (m->slope == NULL || m->icpt == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (uint32_t f = 0; f < nf; f++) {
        m->slope[f] = (float)info->slope;
        m->icpt[f] = (float)info->intercept;
    }
    if (info->rescale_source == DCM_RESCALE_FUNCTIONAL) {
        /* Shared values first, then each frame's own. */
        double s = info->slope, ic = info->intercept;
        int64_t sh = first_item(ds, DCM_NO_PARENT, TAG(0x5200, 0x9229));
        if (read_fg_rescale(ds, sh, &s, &ic) < 0) return MS_EINVAL;
        int64_t pfs = dcm_find(ds, DCM_NO_PARENT, TAG(0x5200, 0x9230));
        for (uint32_t f = 0; f < nf; f++) {
            double fs = s, fi = ic;
            if (pfs >= 0) {
                int64_t it = dcm_item(ds, (uint32_t)pfs, f);
                if (read_fg_rescale(ds, it, &fs, &fi) < 0) return MS_EINVAL;
            }
            m->slope[f] = (float)fs;
            m->icpt[f] = (float)fi;
        }
    }
    if (info->rescale_source == DCM_RESCALE_LUT) {
        int64_t it = first_item(ds, DCM_NO_PARENT, TAG(0x0028, 0x3000));
        int64_t de = dcm_find(ds, (uint32_t)it, TAG(0x0028, 0x3002));
        int64_t da = dcm_find(ds, (uint32_t)it, TAG(0x0028, 0x3006));
        double d0, d1, d2;
        if (it < 0 || de < 0 || da < 0)
            return ms_errf(MS_EINVAL, "Modality LUT Sequence: no %s",
                           it < 0 ? "item" : de < 0 ? "LUT Descriptor (0028,3002)"
                                                    : "LUT Data (0028,3006)");
        if (dcm_get_number(ds, de, 0, &d0) != MS_OK || dcm_get_number(ds, de, 1, &d1) != MS_OK ||
            dcm_get_number(ds, de, 2, &d2) != MS_OK)
            return ms_errf(MS_EINVAL,
                           "Modality LUT Descriptor: expected 3 US or SS values, got %llu bytes",
                           (unsigned long long)ds->elems[de].len);
        /* PS3.3 C.11.1.1: the entry count is always unsigned and 0 means
         * 65536 (an SS descriptor stores 32768.. as negative); the first
         * mapped value is SS in an explicit SS descriptor, US in an explicit
         * US one and follows PixelRepresentation in implicit VR, as pydicom
         * reads it. */
        uint32_t entries = (uint32_t)((int32_t)d0 & 0xFFFF), bits = (uint32_t)d2;
        if (entries == 0) entries = 65536;
        const uint16_t raw1 = (uint16_t)((int32_t)d1 & 0xFFFF);
        const int signed_first = ds->elems[de].vr == DCM_VR('S', 'S') ||
                                 (!ds->explicit_vr && info->pixel_rep);
        m->lut_first = signed_first ? (int64_t)(int16_t)raw1 : (int64_t)raw1;
        if (bits != 8 && bits != 16)
            return ms_errf(MS_EINVAL, "Modality LUT Descriptor: %u bits per entry (expected 8 or 16)",
                           bits);
        const dcm_elem *e = &ds->elems[da];
        if (e->len == entries && bits == 8)
            m->lut_bytes = 1;
        else if (e->len >= (uint64_t)entries * 2)
            m->lut_bytes = 2;
        else
            return ms_errf(MS_EINVAL, "Modality LUT Data: %llu bytes for %u entries",
                           (unsigned long long)e->len, entries);
        m->lut = ds->body + e->off;
        m->lut_entries = entries;
        m->lut_be = e->big_endian;
    }
    return MS_OK;
}

ms_status dcm_check_pixel_bytes(const dcm_dataset *ds, const dcm_info *in) {
    if (!in->has_pixels) return MS_OK;
    if (in->encapsulated) {
        if (in->frames > in->fragments)
            return ms_errf(MS_EINVAL,
                           "NumberOfFrames %u with %u fragments of pixel data: each frame needs "
                           "at least one",
                           in->frames, in->fragments);
        return MS_OK;
    }
    uint32_t tag = in->float_pixels == 32   ? DCM_TAG_FLOAT_PIXEL_DATA
                   : in->float_pixels == 64 ? DCM_TAG_DOUBLE_PIXEL_DATA
                                            : DCM_TAG_PIXEL_DATA;
    int64_t e = dcm_find(ds, DCM_NO_PARENT, tag);
    uint64_t bits = in->float_pixels ? (uint64_t)in->float_pixels : in->bits_allocated;
    if (e < 0 || bits == 0) return MS_OK; /* the decoder names what is missing */
    /* frames, rows and columns are 32-bit: the product fits in 128 bits, and
     * is compared in two steps to stay within 64 */
    uint64_t px = (uint64_t)in->rows * in->cols; /* < 2^64 */
    uint64_t have = ds->elems[e].len;
    /* bits below 8 pack across frames: floor per frame keeps it a lower bound */
    uint64_t per_frame = px > UINT64_MAX / bits ? UINT64_MAX : px * bits / 8;
    uint64_t frames = in->frames ? in->frames : 1;
    if (per_frame == 0 || have / per_frame >= frames) return MS_OK;
    return ms_errf(MS_EINVAL,
                   "pixel data has %llu bytes; %u frames of %ux%u at %llu bits need at least "
                   "%llu bytes per frame",
                   (unsigned long long)have, in->frames, in->rows, in->cols,
                   (unsigned long long)bits, (unsigned long long)per_frame);
}

static ms_status check_geometry(const dcm_info *in, const dcm_limits *lim, pixfmt *f) {
    if (in->rows == 0 || in->cols == 0)
        return ms_errf(MS_EINVAL, "image has %u rows and %u columns", in->rows, in->cols);
    if (in->frames == 0) return ms_errf(MS_EINVAL, "NumberOfFrames is 0");
    if (in->samples != 1 && in->samples != 3)
        return ms_errf(MS_EINVAL, "SamplesPerPixel %u (expected 1 or 3)", in->samples);
    uint64_t nout = (uint64_t)in->rows * in->cols * in->samples * in->frames;
    if (nout * 4 > lim->max_pixel_bytes)
        return ms_errf(MS_EINVAL,
                       "image of %u frames x %u x %u x %u samples needs %llu bytes as float32, "
                       "over the limit of %llu",
                       in->frames, in->rows, in->cols, in->samples, (unsigned long long)(nout * 4),
                       (unsigned long long)lim->max_pixel_bytes);
    memset(f, 0, sizeof(*f));
    f->rows = in->rows;
    f->cols = in->cols;
    f->samples = in->samples;
    f->frames = in->frames;
    if (in->float_pixels) {
        f->fmt_float = in->float_pixels;
        f->ba = (uint16_t)in->float_pixels;
        return MS_OK;
    }
    f->ba = in->bits_allocated;
    f->bs = in->bits_stored;
    f->pr = in->pixel_rep;
    if (f->ba != 1 && f->ba != 8 && f->ba != 16 && f->ba != 32)
        return ms_errf(MS_EINVAL, "BitsAllocated %u (expected 1, 8, 16 or 32)", f->ba);
    if (f->bs == 0 || f->bs > f->ba)
        return ms_errf(MS_EINVAL, "BitsStored %u with BitsAllocated %u", f->bs, f->ba);
    if (in->high_bit != 0 && in->high_bit != f->bs - 1)
        ms_log(MS_LOG_DEBUG, "dicom: HighBit %u != BitsStored-1; using BitsStored", in->high_bit);
    if (f->pr > 1) return ms_errf(MS_EINVAL, "PixelRepresentation %u", f->pr);
    const char *pi = in->photometric;
    if (in->samples == 1) {
        if (pi[0] && !streq(pi, "MONOCHROME1") && !streq(pi, "MONOCHROME2")) {
            if (streq(pi, "PALETTE COLOR"))
                return ms_errf(MS_ENOTSUP, "PALETTE COLOR images are not supported");
            return ms_errf(MS_EINVAL, "PhotometricInterpretation %s with 1 sample per pixel", pi);
        }
    } else {
        if (streq(pi, "YBR_FULL"))
            f->ybr = 1;
        else if (streq(pi, "YBR_FULL_422"))
            f->ybr422 = 1;
        else if (!streq(pi, "RGB") && !streq(pi, "YBR_RCT") && !streq(pi, "YBR_ICT"))
            return ms_errf(MS_ENOTSUP, "PhotometricInterpretation '%s' is not supported", pi);
        if ((f->ybr || f->ybr422) && f->ba != 8)
            return ms_errf(MS_ENOTSUP, "%s with BitsAllocated %u is not supported", pi, f->ba);
        f->planar = in->planar;
    }
    return MS_OK;
}

static ms_status decode_native(const dcm_dataset *ds, const dcm_info *in, pixfmt *f,
                               const modality *m, float *out) {
    uint32_t tag = in->float_pixels == 32   ? DCM_TAG_FLOAT_PIXEL_DATA
                   : in->float_pixels == 64 ? DCM_TAG_DOUBLE_PIXEL_DATA
                                            : DCM_TAG_PIXEL_DATA;
    const dcm_elem *e = &ds->elems[dcm_find(ds, DCM_NO_PARENT, tag)];
    const uint64_t npix = (uint64_t)f->rows * f->cols;
    const uint64_t per_frame_out = npix * f->samples;
    uint64_t frame_bytes = 0, need;
    f->be = e->big_endian;
    if (f->ba == 1) {
        need = (per_frame_out * f->frames + 7) / 8;
    } else {
        frame_bytes = per_frame_out * (f->ba / 8);
        if (f->ybr422) {
            if (f->cols % 2) return ms_errf(MS_EINVAL, "YBR_FULL_422 with an odd column count");
            frame_bytes = npix * 2;
        }
        need = frame_bytes * f->frames;
    }
    /* Odd-length data may lack its padding byte; anything shorter is truncated. */
    if (e->len < need)
        return ms_errf(MS_EINVAL,
                       "pixel data has %llu bytes, %u frames of %ux%ux%u at %u bits need %llu",
                       (unsigned long long)e->len, f->frames, f->rows, f->cols, f->samples, f->ba,
                       (unsigned long long)need);
    if (f->be && f->ba == 8 && e->vr == DCM_VR('O', 'W')) f->swap8 = 1;
    if (f->swap8 && (need & 1) && e->len < need + 1)
        return ms_errf(MS_EINVAL, "odd-length 8-bit OW pixel data in big endian");
    const uint8_t *raw = ds->body + e->off;
    for (uint32_t fr = 0; fr < f->frames; fr++) {
        if (f->ba == 1)
            frame_to_hu(f, m, fr, raw, (uint64_t)fr * per_frame_out, out + fr * per_frame_out);
        else
            frame_to_hu(f, m, fr, raw + fr * frame_bytes, 0, out + fr * per_frame_out);
    }
    return MS_OK;
}

/* Frames [begin, end) of encapsulated data, each with its own buffers so
 * that ranges can run on several threads. */
typedef struct encaps_job {
    const dcm_dataset *ds;
    const dcm_info *in;
    const pixfmt *f;
    const modality *m;
    float *out;
    const uint32_t *starts;
    ms_status *st;    /* per frame */
    char (*err)[256]; /* per frame: the message (thread-local otherwise) */
    uint32_t codec_threads; /* one frame: the codec's own threads */
} encaps_job;

static ms_status decode_frame(const encaps_job *j, uint32_t fr, uint8_t **joined,
                              uint64_t *joined_cap, uint8_t **native) {
    const dcm_dataset *ds = j->ds;
    const pixfmt *f = j->f;
    const uint64_t per_frame_out = (uint64_t)f->rows * f->cols * f->samples;
    const int bps = f->ba <= 8 ? 1 : f->ba <= 16 ? 2 : 4;
    const uint64_t native_size = per_frame_out * (uint64_t)bps;
    uint32_t a = j->starts[fr], b = j->starts[fr + 1];
    const uint8_t *data;
    uint64_t len = 0;
    if (b - a == 1) {
        data = ds->body + ds->frags[a].off;
        len = ds->frags[a].len;
    } else {
        for (uint32_t k = a; k < b; k++)
            len += ds->frags[k].len;
        if (len > *joined_cap) {
            uint8_t *nj = realloc(*joined, len ? len : 1);
            if (nj == NULL) return ms_errf(MS_ENOMEM, "out of memory joining fragments");
            *joined = nj;
            *joined_cap = len;
        }
        uint64_t at = 0;
        for (uint32_t k = a; k < b; k++) {
            memcpy(*joined + at, ds->body + ds->frags[k].off, ds->frags[k].len);
            at += ds->frags[k].len;
        }
        data = *joined;
    }
    pixfmt ff = *f;
    ff.be = 0;
    ff.swap8 = 0;
    ff.ybr422 = 0;
    float *out = j->out + fr * per_frame_out;
    if (ds->codec == DCM_CODEC_ENCAPS_NATIVE) {
        if (len < native_size)
            return ms_errf(MS_EINVAL, "frame %u: %llu bytes, %llu needed", fr,
                           (unsigned long long)len, (unsigned long long)native_size);
        if (bps != f->ba / 8)
            return ms_errf(MS_ENOTSUP, "encapsulated uncompressed with BitsAllocated %u", f->ba);
        frame_to_hu(&ff, j->m, fr, data, 0, out);
        return MS_OK;
    }
    if (*native == NULL && (*native = malloc(native_size)) == NULL)
        return ms_errf(MS_ENOMEM, "out of memory for a frame");
    dcm_frame_geom g = {.rows = f->rows,
                        .cols = f->cols,
                        .samples = (uint16_t)f->samples,
                        .bits_allocated = f->ba,
                        .bits_stored = f->bs,
                        .pixel_rep = f->pr,
                        .planar = (uint16_t)f->planar,
                        .photometric = j->in->photometric,
                        .threads = j->codec_threads};
    int conv = 0;
    ms_status st =
        dcm_codec_decode(ds->codec, data, (size_t)len, &g, *native, (size_t)native_size, &conv);
    if (st != MS_OK) return ms_errwrap(st, "frame %u", fr);
    /* Codecs write interleaved samples; YBR left as YBR is converted here. */
    ff.planar = 0;
    ff.ybr = f->samples == 3 && !conv &&
             (streq(j->in->photometric, "YBR_FULL") || streq(j->in->photometric, "YBR_FULL_422"));
    if (bps != f->ba / 8)
        return ms_errf(MS_EINTERNAL, "codec output width %d for BitsAllocated %u", bps, f->ba);
    frame_to_hu(&ff, j->m, fr, *native, 0, out);
    return MS_OK;
}

static void encaps_range(void *arg, int64_t begin, int64_t end) {
    encaps_job *j = arg;
    uint8_t *joined = NULL, *native = NULL;
    uint64_t joined_cap = 0;
    for (int64_t fr = begin; fr < end; fr++) {
        ms_err_clear();
        j->st[fr] = decode_frame(j, (uint32_t)fr, &joined, &joined_cap, &native);
        if (j->st[fr] != MS_OK) {
            snprintf(j->err[fr], sizeof(j->err[fr]), "%s", ms_errmsg());
            break;
        }
    }
    free(joined);
    free(native);
}

static ms_status decode_encaps(const dcm_dataset *ds, const dcm_info *in, pixfmt *f,
                               const modality *m, float *out, uint32_t threads) {
    if (f->ba == 1) return ms_errf(MS_ENOTSUP, "encapsulated 1-bit pixel data is not supported");
    ms_status st = MS_OK;
    const size_t nf = f->frames;
    uint32_t *starts = malloc((nf + 1) * sizeof(*starts));
    encaps_job j = {.ds = ds, .in = in, .f = f, .m = m, .out = out, .starts = starts};
    j.st = calloc(nf, sizeof(*j.st));
    j.err = calloc(nf, sizeof(*j.err));
    if (starts == NULL || j.st == NULL || j.err == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < nf; k++)
        j.st[k] = MS_OK;
    if ((st = dcm_encaps_map(ds, f->frames, starts)) != MS_OK) goto done;
    /* Several frames: one per pool thread. One frame: the codec's own
     * threads where it has them (OpenJPEG's code-block parallelism). */
    if (nf == 1 && threads > 1) j.codec_threads = threads;
    if (threads > 1 && nf > 1)
        kn_parallel_for((int)threads, (int64_t)nf, 1, encaps_range, &j);
    else
        encaps_range(&j, 0, (int64_t)nf);
    for (size_t k = 0; k < nf; k++)
        if (j.st[k] != MS_OK) {
            st = ms_errf(j.st[k], "%s", j.err[k]);
            break;
        }
done:
    free(starts);
    free(j.st);
    free(j.err);
    return st;
}

static ms_status decode_ds(const dcm_dataset *ds, const dcm_limits *lim_in, int stored,
                           dcm_image **out) {
    dcm_limits dl;
    if (lim_in == NULL) dcm_limits_default(&dl);
    const dcm_limits *lim = lim_in ? lim_in : &dl;
    *out = NULL;
    dcm_image *img = calloc(1, sizeof(*img));
    if (img == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    modality m = {0};
    pixfmt f;
    ms_status st;
    if ((st = dcm_read_info(ds, &img->info)) != MS_OK) goto fail;
    const dcm_info *in = &img->info;
    if (!in->has_pixels) {
        st = ms_errf(MS_EINVAL, "no Pixel Data in the file");
        goto fail;
    }
    if ((st = check_geometry(in, lim, &f)) != MS_OK) goto fail;
    if (in->ts_name == NULL) {
        st = ms_errf(MS_ENOTSUP, "unsupported transfer syntax %s", in->ts_uid);
        goto fail;
    }
    if (stored) {
        dcm_info ident = *in;
        ident.slope = 1.0;
        ident.intercept = 0.0;
        ident.rescale_source = DCM_RESCALE_NONE;
        st = setup_modality(ds, &ident, &m);
    } else {
        st = setup_modality(ds, in, &m);
    }
    if (st != MS_OK) goto fail;
    img->frames = in->frames;
    img->rows = in->rows;
    img->cols = in->cols;
    img->samples = in->samples;
    size_t n = (size_t)in->frames * in->rows * in->cols * in->samples;
    img->data = malloc(n * sizeof(float));
    if (img->data == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory for %zu pixels", n);
        goto fail;
    }
    int64_t px = dcm_find(ds, DCM_NO_PARENT, DCM_TAG_PIXEL_DATA);
    int encaps = px >= 0 && (ds->elems[px].flags & DCM_ELEM_ENCAPS);
    if (encaps && !ds->encapsulated) {
        st = ms_errf(MS_EINVAL, "encapsulated pixel data not at the top level");
        goto fail;
    }
    if (encaps && ds->header_only) {
        st = ms_errf(MS_EINTERNAL, "encapsulated pixel data of a header-only parse");
        goto fail;
    }
    if (!encaps && ds->codec != DCM_CODEC_NONE && !in->float_pixels) {
        st = ms_errf(MS_EINVAL, "transfer syntax %s needs encapsulated pixel data", in->ts_uid);
        goto fail;
    }
    st = encaps ? decode_encaps(ds, in, &f, &m, img->data, lim->threads)
                : decode_native(ds, in, &f, &m, img->data);
    if (st != MS_OK) goto fail;
    free(m.slope);
    free(m.icpt);
    *out = img;
    return MS_OK;
fail:
    free(m.slope);
    free(m.icpt);
    dcm_image_free(img);
    return st;
}

ms_status dcm_decode_hu_ds(const dcm_dataset *ds, const dcm_limits *lim, dcm_image **out) {
    return decode_ds(ds, lim, 0, out);
}

ms_status dcm_decode_stored_ds(const dcm_dataset *ds, const dcm_limits *lim, dcm_image **out) {
    return decode_ds(ds, lim, 1, out);
}

ms_status dcm_decode_hu(const uint8_t *bytes, size_t len, const dcm_limits *lim, dcm_image **out) {
    dcm_dataset *ds = NULL;
    *out = NULL;
    ms_status st = dcm_parse(bytes, len, lim, &ds);
    if (st != MS_OK) return st;
    st = dcm_decode_hu_ds(ds, lim, out);
    dcm_dataset_free(ds);
    return st;
}

int dcm_native_view_of(const dcm_dataset *ds, const dcm_info *in, const dcm_limits *lim_in,
                       uint32_t frame, dcm_native_view *v) {
    dcm_limits dl;
    if (lim_in == NULL) dcm_limits_default(&dl);
    const dcm_limits *lim = lim_in ? lim_in : &dl;
    pixfmt f;
    if (!in->has_pixels || in->float_pixels || in->ts_name == NULL || ds->codec != DCM_CODEC_NONE ||
        ds->encapsulated || in->samples != 1 || frame >= in->frames)
        return 0;
    if (in->rescale_source != DCM_RESCALE_NONE && in->rescale_source != DCM_RESCALE_ATTRS) return 0;
    ms_status st = check_geometry(in, lim, &f);
    ms_err_clear();
    if (st != MS_OK || f.ba != 16) return 0;
    int64_t px = dcm_find(ds, DCM_NO_PARENT, DCM_TAG_PIXEL_DATA);
    if (px < 0) return 0;
    const dcm_elem *e = &ds->elems[px];
    const uint64_t frame_bytes = (uint64_t)f.rows * f.cols * 2;
    if (e->big_endian || (e->flags & DCM_ELEM_ENCAPS) || e->len < frame_bytes * f.frames) return 0;
    v->raw = ds->body + e->off + frame_bytes * frame;
    v->rows = f.rows;
    v->cols = f.cols;
    v->mask = f.bs < 16 ? ((uint32_t)1 << f.bs) - 1 : 0xFFFF;
    v->sign = f.pr ? (uint32_t)1 << (f.bs - 1) : 0;
    v->slope = (float)in->slope;
    v->intercept = (float)in->intercept;
    return 1;
}

void dcm_native_view_hu(const dcm_native_view *v, uint32_t r0, uint32_t r1, float *out) {
    const uint64_t n = (uint64_t)(r1 - r0) * v->cols;
    const uint8_t *raw = v->raw + (uint64_t)r0 * v->cols * 2;
    dcm_pixels_count(n);
    /* The loops frame_to_hu runs for these files (mask and sign as there). */
    if (v->sign)
        hu_s16(raw, n, v->mask, v->sign, v->slope, v->intercept, out);
    else
        hu_u16(raw, n, v->mask, v->slope, v->intercept, out);
}

void dcm_image_free(dcm_image *img) {
    if (img == NULL) return;
    free(img->data);
    free(img);
}

/* Window 16 values at a time with GCC/Clang vector extensions (the
 * auto-vectoriser would not if-convert the clip): per lane exactly the scalar
 * expression, NaN stays NaN as with np.clip. The division stays a true
 * division, as numpy's, for bit-identical results. */
typedef float dcm_v16f __attribute__((vector_size(64)));
typedef int32_t dcm_v16i __attribute__((vector_size(64)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* AVX-512 / AVX2 clones run 16 / 8 lanes per division where the CPU has them. */
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
window_loop(const float *hu, float *out, size_t n, float lo, float hi, float range) {
    dcm_v16f lov, hiv, rv;
    for (int k = 0; k < 16; k++) lov[k] = lo, hiv[k] = hi, rv[k] = range;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        dcm_v16f x;
        memcpy(&x, hu + i, sizeof(x));
        dcm_v16i m = x < lov;
        x = (dcm_v16f)(((dcm_v16i)x & ~m) | ((dcm_v16i)lov & m));
        m = x > hiv;
        x = (dcm_v16f)(((dcm_v16i)x & ~m) | ((dcm_v16i)hiv & m));
        x = (x - lov) / rv;
        memcpy(out + i, &x, sizeof(x));
    }
    for (; i < n; i++) {
        float x = hu[i];
        x = x < lo ? lo : x;
        x = x > hi ? hi : x;
        out[i] = (x - lo) / range;
    }
}

ms_status dcm_window(const float *hu, float *out, size_t n, double center, double width) {
    if (!(width > 0) || !isfinite(center) || !isfinite(width))
        return ms_errf(MS_EINVAL, "window width must be > 0 (got L=%g W=%g)", center, width);
    const float lo = (float)(center - width / 2.0);
    const float hi = (float)(center + width / 2.0);
    const float range = hi - lo;
    if (!(range > 0)) return ms_errf(MS_EINVAL, "window %g/%g is empty in float32", center, width);
    window_loop(hu, out, n, lo, hi, range);
    return MS_OK;
}

/* TensorFlow's bilinear resize with half-pixel centers (tf.image.resize,
 * ResizeBilinear half_pixel_centers=True): src = (dst + 0.5) * scale - 0.5,
 * neighbours clamped to the image, weights from the fractional part. */
void dcm_resize_bilinear(const float *in, uint32_t ih, uint32_t iw, uint32_t c, float *out,
                         uint32_t oh, uint32_t ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    for (uint32_t y = 0; y < oh; y++) {
        float fy = ((float)y + 0.5f) * sy - 0.5f;
        float y0f = floorf(fy);
        float dy = fy - y0f;
        int64_t y0 = (int64_t)y0f, y1 = y0 + 1;
        if (y0 < 0) y0 = 0;
        if (y1 < 0) y1 = 0;
        if (y0 > (int64_t)ih - 1) y0 = ih - 1;
        if (y1 > (int64_t)ih - 1) y1 = ih - 1;
        for (uint32_t x = 0; x < ow; x++) {
            float fx = ((float)x + 0.5f) * sx - 0.5f;
            float x0f = floorf(fx);
            float dx = fx - x0f;
            int64_t x0 = (int64_t)x0f, x1 = x0 + 1;
            if (x0 < 0) x0 = 0;
            if (x1 < 0) x1 = 0;
            if (x0 > (int64_t)iw - 1) x0 = iw - 1;
            if (x1 > (int64_t)iw - 1) x1 = iw - 1;
            for (uint32_t k = 0; k < c; k++) {
                float tl = in[((uint64_t)y0 * iw + (uint64_t)x0) * c + k];
                float tr = in[((uint64_t)y0 * iw + (uint64_t)x1) * c + k];
                float bl = in[((uint64_t)y1 * iw + (uint64_t)x0) * c + k];
                float br = in[((uint64_t)y1 * iw + (uint64_t)x1) * c + k];
                float top = tl + (tr - tl) * dx;
                float bot = bl + (br - bl) * dx;
                out[((uint64_t)y * ow + x) * c + k] = top + (bot - top) * dy;
            }
        }
    }
}
