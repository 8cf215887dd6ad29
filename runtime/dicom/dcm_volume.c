/* dcm_volume.c - DcmDecodeVolume: a whole series in, one HU volume out.
 *
 *   input  contents: DT_STRING, N files of one series in any order, or one
 *          (enhanced) multi-frame file
 *   attrs  modalities: string = ""     as DcmDecodeHU (refuse other modalities)
 *          center, width: float        window like DcmWindow (both or neither)
 *          spacing: list(float) = []   [z, y, x] mm: resample to this spacing
 *          expect_shape: list(int) = [] [D, H, W], <= 0 = any: refuse others
 *   output volume: DT_FLOAT (1, D, H, W, 1)
 *          geometry: DT_DOUBLE [6], the series' own [D, H, W] and spacing
 *          [z, y, x] mm (0 where unknown: one slice, no PixelSpacing), for
 *          _DcmResampleBack (below) to bring an answer back to that grid
 *
 * Slices are sorted by ImagePositionPatient projected on the normal of
 * ImageOrientationPatient (row x column), ascending. A multi-frame file's
 * frames take position, orientation and pixel spacing from the Per-Frame
 * Functional Groups (Plane Position, Plane Orientation, Pixel Measures),
 * then the Shared ones, then the top level; the rescale per frame as
 * dcm_pixel does. Refused with MS_EINVAL naming the problem: files of
 * several series, multi-frame files among several, colour, mixed sizes,
 * missing or duplicate positions, mixed orientations or pixel spacings,
 * slices not along the normal (tilted gantry), uneven gaps (a missing
 * slice). Values: HU exactly as DcmDecodeHU, then the window exactly as
 * DcmWindow, then (with spacing) linear resampling along z, then y, then x:
 * output index i sits at input index p = i * t / s (double; s the series'
 * spacing, t the requested one: the float32 attr widened to double), taken as
 * round(p) within RS_TOL of it, v = a + (b - a) * (float)(p - floor(p)) in
 * float32, b clamped at the last slice; the axis length becomes
 * floor((n - 1) * s / t + RS_TOL) + 1.
 *
 * Every header is read (up to its pixel data, dcm_parse's header_only) before
 * any pixel is decoded: a refused series costs the parse of its headers, and
 * the pixels of one that passes go straight into the output. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_ops_int.h"
#include "dcm_pixel.h"
#include "dcm_volume.h"
#include "kn_ctx.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define ERR_MAX   400
/* Geometry read per frame (about 100 bytes each): a cap far above real
 * multi-frame files (a million frames), against hostile NumberOfFrames. */
#define DCM_VOL_MAX_GEOM_BYTES ((uint64_t)1 << 27)
#define TAG(g, e) DCM_TAG(g, e)

typedef struct vol_state {
    dcm_guard guard;
    int window;
    double center, width; /* for dcm_window */
    double spacing[3]; /* 0 = keep */
    int64_t expect[3];
} vol_state;

ms_status dcm_volume_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    vol_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = dcm_guard_prepare(n, &s->guard);
    if (st != MS_OK) goto fail;
    s->guard.expect[0] = s->guard.expect[1] = 0;
    if (kn_attr_has(n, "center") != kn_attr_has(n, "width")) {
        st = ms_errf(MS_EINVAL, "%s: window needs both center and width", n->name);
        goto fail;
    }
    if (kn_attr_has(n, "center")) {
        double c = kn_attr_f(n, "center", 0.f), w = kn_attr_f(n, "width", 0.f);
        if (!(w > 0) || !isfinite(c) || !isfinite(w)) {
            st = ms_errf(MS_EINVAL, "%s: window width must be > 0 (center %g, width %g)", n->name,
                         c, w);
            goto fail;
        }
        if (!((float)(c + w / 2.0) > (float)(c - w / 2.0))) {
            st = ms_errf(MS_EINVAL, "%s: window %g/%g is empty in float32", n->name, c, w);
            goto fail;
        }
        s->window = 1;
        s->center = c;
        s->width = w;
    }
    float sp[3];
    int k = kn_attr_flist(n, "spacing", sp, 3);
    if (k == 3) {
        for (int a = 0; a < 3; a++) {
            if (!(sp[a] > 0) || !isfinite(sp[a])) {
                st = ms_errf(MS_EINVAL, "%s: spacing values must be > 0 mm", n->name);
                goto fail;
            }
            s->spacing[a] = sp[a];
        }
    } else if (k > 0) {
        st = ms_errf(MS_EINVAL, "%s: spacing wants [z, y, x] in mm, got %d values", n->name, k);
        goto fail;
    }
    int64_t ex[3];
    if (kn_attr_ilist(n, "expect_shape", ex, 3) == 3)
        for (int a = 0; a < 3; a++)
            s->expect[a] = ex[a] > 0 ? ex[a] : 0;
    *state = s;
    return MS_OK;
fail:
    free(s);
    return st;
}

/* ---- per-file decoding and geometry ---- */

typedef struct vol_geom {
    int has_pos, has_ori, has_px;
    double pos[3], ori[6], px[2];
} vol_geom;

typedef struct vol_file {
    dcm_dataset *ds; /* parsed (borrowing the request's bytes) until the end */
    dcm_info info;
    vol_geom *g; /* per frame */
    char series[68];
    ms_status st;
    char err[ERR_MAX];
} vol_file;

typedef struct vol_slice {
    int64_t file;
    uint32_t frame;
    double d; /* position along the normal */
} vol_slice;

typedef struct vol_job {
    const rt_str *files;
    vol_file *f;
    dcm_limits lim;
    /* decoding: slice k of sl into vol + k * plane */
    const vol_state *s;
    const vol_slice *sl;
    float *vol;
    uint64_t plane;
    const dcm_image *whole; /* one multi-frame file decoded at once, or NULL */
    atomic_int failed;      /* a slice failed: the others stop early */
    _Atomic uint64_t frames; /* decoded */
    int64_t err_file;        /* the first failure: its file, status, message */
    ms_status st;
    char err[ERR_MAX];
} vol_job;

/* n numbers of element tag under parent (DCM_NO_PARENT: top level). */
static int read_numbers(const dcm_dataset *ds, int64_t parent, uint32_t tag, double *out, int n) {
    if (parent < 0 && parent != (int64_t)DCM_NO_PARENT) return 0;
    int64_t e = dcm_find(ds, (uint32_t)parent, tag);
    if (e < 0 || ds->elems[e].len == 0) return 0;
    for (int k = 0; k < n; k++)
        if (dcm_get_number(ds, e, (uint32_t)k, &out[k]) != MS_OK || !isfinite(out[k])) {
            ms_err_clear();
            return -1;
        }
    return 1;
}

/* Item 0 of sequence seq inside functional-group item fg, or -1. */
static int64_t fg_sub(const dcm_dataset *ds, int64_t fg, uint32_t seq) {
    if (fg < 0) return -1;
    int64_t sq = dcm_find(ds, (uint32_t)fg, seq);
    return sq < 0 ? -1 : dcm_item(ds, (uint32_t)sq, 0);
}

/* One attribute (tag, n numbers) of frame f: per-frame group item, shared
 * group item, then the top level. Returns 1 found, 0 absent, -1 unreadable. */
static int frame_attr(const dcm_dataset *ds, int64_t pf, int64_t sh, uint32_t seq, uint32_t tag,
                      double *out, int n) {
    int64_t it = fg_sub(ds, pf, seq);
    int r = it >= 0 ? read_numbers(ds, it, tag, out, n) : 0;
    if (r == 0 && (it = fg_sub(ds, sh, seq)) >= 0) r = read_numbers(ds, it, tag, out, n);
    if (r == 0) r = read_numbers(ds, (int64_t)DCM_NO_PARENT, tag, out, n);
    return r;
}

static ms_status read_geometry(const dcm_dataset *ds, uint32_t frames, vol_geom *g) {
    int64_t pfs = dcm_find(ds, DCM_NO_PARENT, TAG(0x5200, 0x9230));
    int64_t shs = dcm_find(ds, DCM_NO_PARENT, TAG(0x5200, 0x9229));
    int64_t sh = shs >= 0 ? dcm_item(ds, (uint32_t)shs, 0) : -1;
    for (uint32_t f = 0; f < frames; f++) {
        int64_t pf = pfs >= 0 ? dcm_item(ds, (uint32_t)pfs, f) : -1;
        int r;
        if ((r = frame_attr(ds, pf, sh, TAG(0x0020, 0x9113), TAG(0x0020, 0x0032), g[f].pos, 3)) < 0)
            return ms_errf(MS_EINVAL, "frame %u: ImagePositionPatient is not 3 numbers", f);
        g[f].has_pos = r;
        if ((r = frame_attr(ds, pf, sh, TAG(0x0020, 0x9116), TAG(0x0020, 0x0037), g[f].ori, 6)) < 0)
            return ms_errf(MS_EINVAL, "frame %u: ImageOrientationPatient is not 6 numbers", f);
        g[f].has_ori = r;
        if ((r = frame_attr(ds, pf, sh, TAG(0x0028, 0x9110), TAG(0x0028, 0x0030), g[f].px, 2)) < 0)
            return ms_errf(MS_EINVAL, "frame %u: PixelSpacing is not 2 numbers", f);
        g[f].has_px = r;
    }
    return MS_OK;
}

/* Phase 1: parse each header up to its pixel data (lim.header_only: no
 * pixel byte is read, no fragment walked) and read the summary. */
static void parse_range(void *arg, int64_t b, int64_t e) {
    vol_job *j = arg;
    dcm_limits hl = j->lim;
    hl.header_only = 1;
    for (int64_t i = b; i < e; i++) {
        vol_file *f = &j->f[i];
        ms_err_clear();
        ms_status st = dcm_parse(j->files[i].data, (size_t)j->files[i].len, &hl, &f->ds);
        if (st == MS_OK) st = dcm_read_info(f->ds, &f->info);
        f->st = st;
        if (st != MS_OK) snprintf(f->err, ERR_MAX, "%s", ms_errmsg());
    }
}

/* Phase 2 (once the frame counts are bounded): geometry and series UID. */
static void geom_range(void *arg, int64_t b, int64_t e) {
    vol_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        vol_file *f = &j->f[i];
        ms_err_clear();
        f->g = calloc(f->info.frames ? f->info.frames : 1, sizeof(*f->g));
        ms_status st = f->g ? read_geometry(f->ds, f->info.frames, f->g)
                            : ms_errf(MS_ENOMEM, "out of memory");
        dcm_get_string(f->ds, dcm_find(f->ds, DCM_NO_PARENT, TAG(0x0020, 0x000E)), f->series,
                       sizeof(f->series));
        f->st = st;
        if (st != MS_OK) snprintf(f->err, ERR_MAX, "%s", ms_errmsg());
    }
}

/* File i's data set in full (its fragments walked) when phase 1 stopped at
 * its pixel data: what the general decoder needs. */
static ms_status full_parse(const vol_job *j, int64_t i) {
    vol_file *f = &j->f[i];
    if (!f->ds->header_only) return MS_OK;
    dcm_dataset *ds = NULL;
    ms_status st = dcm_parse(j->files[i].data, (size_t)j->files[i].len, &j->lim, &ds);
    if (st != MS_OK) return st;
    dcm_dataset_free(f->ds);
    f->ds = ds;
    return MS_OK;
}

/* Phase 3 (the series checked): slice k's HU, windowed, straight into its
 * place in the volume. Native 16-bit frames are converted from the request's
 * bytes; others are parsed in full and go through the general decoder (one
 * file decoded whole beforehand when it is the series alone: j->whole). */
static void decode_range(void *arg, int64_t b, int64_t e) {
    vol_job *j = arg;
    for (int64_t k = b; k < e && !atomic_load(&j->failed); k++) {
        const vol_slice *q = &j->sl[k];
        vol_file *f = &j->f[q->file];
        float *o = j->vol + (uint64_t)k * j->plane;
        dcm_native_view v;
        ms_status st = MS_OK;
        ms_err_clear();
        if (j->whole != NULL) {
            memcpy(o, j->whole->data + (uint64_t)q->frame * j->plane, j->plane * sizeof(float));
        } else if (dcm_native_view_of(f->ds, &f->info, &j->lim, q->frame, &v)) {
            dcm_native_view_hu(&v, 0, v.rows, o);
        } else {
            dcm_image *im = NULL;
            st = full_parse(j, q->file);
            if (st == MS_OK) st = dcm_decode_hu_ds(f->ds, &j->lim, &im);
            if (st == MS_OK && ((uint64_t)im->rows * im->cols != j->plane || im->samples != 1 ||
                                q->frame >= im->frames))
                st = ms_errf(MS_EINVAL, "decoded image is %ux%ux%u, its header says %ux%ux%u",
                             im->rows, im->cols, im->samples, f->info.rows, f->info.cols,
                             f->info.samples);
            if (st == MS_OK)
                memcpy(o, im->data + (uint64_t)q->frame * j->plane, j->plane * sizeof(float));
            dcm_image_free(im);
        }
        if (st == MS_OK && j->s->window)
            st = dcm_window(o, o, (size_t)j->plane, j->s->center, j->s->width);
        if (st != MS_OK) {
            if (atomic_exchange(&j->failed, 1) == 0) {
                j->err_file = q->file;
                j->st = st;
                snprintf(j->err, ERR_MAX, "%s", ms_errmsg());
            }
        } else {
            atomic_fetch_add(&j->frames, 1);
        }
    }
}

/* ---- the volume ---- */

static int by_d(const void *a, const void *b) {
    const vol_slice *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d;
}

/* "dicom[3]" or "dicom[0] frame 7" */
static const char *slice_name(const vol_slice *s, int multi, char *buf, size_t n) {
    if (multi)
        snprintf(buf, n, "dicom[0] frame %u", s->frame);
    else
        snprintf(buf, n, "dicom[%lld]", (long long)s->file);
    return buf;
}

/* Checks the series and orders its slices; *gap = the slice spacing (0 for
 * one slice), px the pixel spacing (0 when absent). */
static ms_status order_slices(vol_file *f, int64_t nf, vol_slice *sl, int64_t D, double *gap,
                              double px[2]) {
    const int multi = nf == 1;
    char a[48], b[48];
    px[0] = px[1] = 0;
    *gap = 0;
    const vol_geom *g0 = &f[sl[0].file].g[sl[0].frame];
    if (g0->has_px) px[0] = g0->px[0], px[1] = g0->px[1];
    for (int64_t k = 0; k < D; k++) {
        const vol_geom *g = &f[sl[k].file].g[sl[k].frame];
        if (g->has_px != g0->has_px ||
            (g->has_px && (fabs(g->px[0] - px[0]) > 1e-4 || fabs(g->px[1] - px[1]) > 1e-4)))
            return ms_errf(MS_EINVAL, "mixed pixel spacing: %s and %s differ in PixelSpacing",
                           slice_name(&sl[0], multi, a, sizeof(a)),
                           slice_name(&sl[k], multi, b, sizeof(b)));
    }
    if (D == 1) return MS_OK;
    for (int64_t k = 0; k < D; k++) {
        const vol_geom *g = &f[sl[k].file].g[sl[k].frame];
        if (!g->has_pos)
            return ms_errf(MS_EINVAL, "missing position: %s has no ImagePositionPatient",
                           slice_name(&sl[k], multi, a, sizeof(a)));
        if (!g->has_ori)
            return ms_errf(MS_EINVAL, "missing orientation: %s has no ImageOrientationPatient",
                           slice_name(&sl[k], multi, a, sizeof(a)));
        for (int q = 0; q < 6; q++)
            if (fabs(g->ori[q] - g0->ori[q]) > 1e-4)
                return ms_errf(MS_EINVAL,
                               "mixed orientation: %s and %s differ in ImageOrientationPatient",
                               slice_name(&sl[0], multi, a, sizeof(a)),
                               slice_name(&sl[k], multi, b, sizeof(b)));
    }
    const double *r = g0->ori, *c = g0->ori + 3;
    const double nr = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    const double nc = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    const double dot = r[0] * c[0] + r[1] * c[1] + r[2] * c[2];
    if (fabs(nr - 1) > 1e-3 || fabs(nc - 1) > 1e-3 || fabs(dot) > 1e-3)
        return ms_errf(MS_EINVAL, "ImageOrientationPatient is not two orthogonal unit vectors");
    const double n[3] = {r[1] * c[2] - r[2] * c[1], r[2] * c[0] - r[0] * c[2],
                         r[0] * c[1] - r[1] * c[0]};
    for (int64_t k = 0; k < D; k++) {
        const double *p = f[sl[k].file].g[sl[k].frame].pos;
        sl[k].d = p[0] * n[0] + p[1] * n[1] + p[2] * n[2];
    }
    qsort(sl, (size_t)D, sizeof(*sl), by_d);
    /* Gaps: none ~0 (duplicates), all along the normal (no tilt), even. */
    double *gaps = malloc(sizeof(double) * (size_t)(D - 1));
    if (gaps == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = MS_OK;
    for (int64_t k = 0; k + 1 < D && st == MS_OK; k++) {
        const double *p = f[sl[k].file].g[sl[k].frame].pos;
        const double *q = f[sl[k + 1].file].g[sl[k + 1].frame].pos;
        const double g = sl[k + 1].d - sl[k].d;
        gaps[k] = g;
        double v[3] = {q[0] - p[0] - g * n[0], q[1] - p[1] - g * n[1], q[2] - p[2] - g * n[2]};
        double off = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        if (g < 1e-3)
            st = ms_errf(MS_EINVAL,
                         "duplicate position: %s and %s are both at %.3f mm along the "
                         "slice normal",
                         slice_name(&sl[k], multi, a, sizeof(a)),
                         slice_name(&sl[k + 1], multi, b, sizeof(b)), sl[k].d);
        else if (off > 1e-2 + 1e-3 * g)
            st = ms_errf(MS_EINVAL,
                         "tilted gantry or sheared series: %s and %s are %.3f mm apart in the "
                         "image plane (slices must stack along the normal of "
                         "ImageOrientationPatient)",
                         slice_name(&sl[k], multi, a, sizeof(a)),
                         slice_name(&sl[k + 1], multi, b, sizeof(b)), off);
    }
    if (st == MS_OK) {
        double g = gaps[0];
        for (int64_t k = 1; k + 1 < D; k++)
            if (gaps[k] < g) g = gaps[k];
        for (int64_t k = 0; k + 1 < D && st == MS_OK; k++)
            if (fabs(gaps[k] - g) > 1e-2 * g + 1e-3)
                st = ms_errf(MS_EINVAL,
                             "%s: %.3f mm between %s and %s, %.3f mm between other slices",
                             gaps[k] > 1.5 * g ? "missing slice" : "uneven slice spacing", gaps[k],
                             slice_name(&sl[k], multi, a, sizeof(a)),
                             slice_name(&sl[k + 1], multi, b, sizeof(b)), g);
        /* The spacing: first to last over the gaps (what numpy gets too). */
        *gap = (sl[D - 1].d - sl[0].d) / (double)(D - 1);
    }
    free(gaps);
    return st;
}

/* A spacing read from the file and a requested one given as float32 can
 * differ by ~1e-7 where they mean the same: positions within RS_TOL of an
 * input index are taken as that index, so equal spacings give the series
 * itself, last slice, row and column included. */
#define RS_TOL 1e-4

/* Input index (fractional) of output index i. */
static double src_pos(int64_t i, double s, double t) {
    const double p = (double)i * t / s, r = floor(p + 0.5);
    return fabs(p - r) <= RS_TOL ? r : p;
}

static int64_t resampled_len(int64_t n, double s, double t) {
    return (int64_t)floor((double)(n - 1) * s / t + RS_TOL) + 1;
}

/* Linear resampling of axis `ax` (0 z, 1 y, 2 x) of a (d0, d1, d2) volume. */
static void resample_axis(const float *in, const int64_t dim[3], int ax, int64_t m, double s,
                          double t, float *out) {
    int64_t od[3] = {dim[0], dim[1], dim[2]};
    od[ax] = m;
    const int64_t n = dim[ax];
    for (int64_t i = 0; i < m; i++) {
        const double p = src_pos(i, s, t);
        int64_t i0 = (int64_t)floor(p);
        if (i0 > n - 1) i0 = n - 1;
        const int64_t i1 = i0 + 1 < n ? i0 + 1 : n - 1;
        const float fr = (float)(p - (double)i0);
        for (int64_t z = 0; z < (ax == 0 ? 1 : od[0]); z++)
            for (int64_t y = 0; y < (ax == 1 ? 1 : od[1]); y++)
                for (int64_t x = 0; x < (ax == 2 ? 1 : od[2]); x++) {
                    int64_t ia[3] = {z, y, x}, ib[3] = {z, y, x}, io[3] = {z, y, x};
                    ia[ax] = i0;
                    ib[ax] = i1;
                    io[ax] = i;
                    const float va = in[(ia[0] * dim[1] + ia[1]) * dim[2] + ia[2]];
                    const float vb = in[(ib[0] * dim[1] + ib[1]) * dim[2] + ib[2]];
                    out[(io[0] * od[1] + io[1]) * od[2] + io[2]] = va + (vb - va) * fr;
                }
    }
}

/* a * b, UINT64_MAX when it does not fit (hostile headers). */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The header checks of file i of nf (bytes: its length), in the order the
 * refusals name them. */
static ms_status check_file(const vol_state *s, const vol_file *f, int64_t i, int64_t nf,
                            uint64_t bytes) {
    const dcm_info *in = &f[i].info, *in0 = &f[0].info;
    ms_status st = dcm_guard_check(&s->guard, i, in, in->rows, in->cols);
    if (st != MS_OK) return st;
    if (in->rows == 0 || in->cols == 0)
        return ms_errf(MS_EINVAL, "dicom[%lld]: image has %u rows and %u columns", (long long)i,
                       in->rows, in->cols);
    if (in->frames == 0)
        return ms_errf(MS_EINVAL, "dicom[%lld]: NumberOfFrames is 0", (long long)i);
    /* Every frame takes bytes of the file (the decoder checks exactly, later);
     * the per-frame geometry read next is bounded like the pixels. */
    const uint64_t bits = in->encapsulated ? 8
                                           : mul_sat(mul_sat((uint64_t)in->rows * in->cols,
                                                             in->samples ? in->samples : 1),
                                                     in->bits_allocated ? in->bits_allocated : 1);
    if (mul_sat(in->frames, bits) > mul_sat(bytes, 8) ||
        mul_sat(in->frames, sizeof(vol_geom)) > DCM_VOL_MAX_GEOM_BYTES)
        return ms_errf(MS_EINVAL, "dicom[%lld]: NumberOfFrames %u does not fit in its %llu bytes",
                       (long long)i, in->frames, (unsigned long long)bytes);
    if (in->samples != 1)
        return ms_errf(MS_EINVAL, "dicom[%lld] is a colour image; volumes take grey images",
                       (long long)i);
    if (nf > 1 && in->frames != 1)
        return ms_errf(MS_EINVAL,
                       "dicom[%lld] has %u frames: a series is single-frame files, or one "
                       "multi-frame file alone",
                       (long long)i, in->frames);
    if (in->rows != in0->rows || in->cols != in0->cols)
        return ms_errf(MS_EINVAL, "mixed sizes: dicom[%lld] is %ux%u, dicom[0] is %ux%u",
                       (long long)i, in->rows, in->cols, in0->rows, in0->cols);
    if (strcmp(f[i].series, f[0].series) != 0)
        return ms_errf(MS_EINVAL,
                       "mixed series: dicom[%lld] and dicom[0] have different "
                       "SeriesInstanceUIDs",
                       (long long)i);
    return MS_OK;
}

/* "dicom[i]: <the file's own message>", counted as a refused file. */
static ms_status file_error(int64_t i, ms_status st, const char *err) {
    dcm_ops_count_refused(st);
    return ms_errf(st == MS_ENOMEM ? MS_ENOMEM : MS_EINVAL, "dicom[%lld]: %s", (long long)i, err);
}

/* The output's shape: the series' own, or resampled to the requested
 * spacing; refused when it is not what the model takes or too large. */
static ms_status out_shape(const vol_state *s, const dcm_limits *lim, const int64_t dim[3],
                           const double have[3], int64_t odim[3]) {
    memcpy(odim, dim, 3 * sizeof(int64_t));
    if (s->spacing[0]) {
        if (have[1] <= 0 || (dim[0] > 1 && have[0] <= 0))
            return ms_errf(MS_EINVAL, "cannot resample to the requested spacing: the series has "
                                      "no PixelSpacing");
        for (int q = 0; q < 3; q++)
            if (have[q] > 0) odim[q] = resampled_len(dim[q], have[q], s->spacing[q]);
    }
    for (int q = 0; q < 3; q++)
        if (s->expect[q] && odim[q] != s->expect[q])
            return ms_errf(MS_EINVAL,
                           "volume is %lldx%lldx%lld (slices x rows x columns), the model input "
                           "is %lldx%lldx%lld",
                           (long long)odim[0], (long long)odim[1], (long long)odim[2],
                           (long long)(s->expect[0] ? s->expect[0] : odim[0]),
                           (long long)(s->expect[1] ? s->expect[1] : odim[1]),
                           (long long)(s->expect[2] ? s->expect[2] : odim[2]));
    /* Largest intermediate volume: every stage is bounded like a decode. */
    uint64_t big = (uint64_t)dim[0] * dim[1] * dim[2];
    uint64_t cur[3] = {(uint64_t)dim[0], (uint64_t)dim[1], (uint64_t)dim[2]};
    for (int q = 0; q < 3; q++) {
        cur[q] = (uint64_t)odim[q];
        uint64_t v = mul_sat(mul_sat(cur[0], cur[1]), cur[2]);
        if (v > big) big = v;
    }
    if (mul_sat(big, 4) > lim->max_pixel_bytes)
        return ms_errf(MS_EINVAL,
                       "volume of %lldx%lldx%lld voxels after resampling is over the limit of "
                       "%llu bytes",
                       (long long)odim[0], (long long)odim[1], (long long)odim[2],
                       (unsigned long long)lim->max_pixel_bytes);
    return MS_OK;
}

/* Resamples vol (dim, spacing have) to dst (odim, spacing to) along z,
 * then y, then x; each stage into a new buffer, the last into dst. An axis
 * whose have is 0 (one slice) is kept. */
static ms_status resample(const double to[3], const float *vol, const int64_t dim[3],
                          const double have[3], const int64_t odim[3], float *dst) {
    const float *cur = vol;
    int64_t cd[3] = {dim[0], dim[1], dim[2]};
    for (int q = 0; q < 3; q++) {
        const double sq = have[q] > 0 ? have[q] : 1.0, tq = have[q] > 0 ? to[q] : 1.0;
        int64_t nd[3] = {cd[0], cd[1], cd[2]};
        nd[q] = odim[q];
        float *o = q == 2 ? dst : malloc(sizeof(float) * (size_t)(nd[0] * nd[1] * nd[2]));
        if (o == NULL) {
            if (cur != vol) free((void *)cur);
            return ms_errf(MS_ENOMEM, "out of memory for the volume");
        }
        resample_axis(cur, cd, q, odim[q], sq, tq, o);
        if (cur != vol) free((void *)cur);
        cur = o;
        memcpy(cd, nd, sizeof(cd));
    }
    return MS_OK;
}

/* The volume of files[0..nf) into *out (out[0]); geom as far as known.
 * With out NULL: the series checked and ordered only (no pixel decoded),
 * order[k] (nf entries) the file of slice k. */
static ms_status vol_run(kn_ctx *ctx, const vol_state *s, const rt_str *files, int64_t nf,
                         rt_tensor **out, dcm_volume_geom *geom, int64_t *order) {
    if (nf < 1) return ms_errf(MS_EINVAL, "a volume needs at least one DICOM file, got none");
    vol_job j = {.files = files, .s = s};
    atomic_init(&j.failed, 0);
    atomic_init(&j.frames, 0);
    dcm_limits_default(&j.lim);
    if (nf == 1 && ctx != NULL && ctx->nthreads > 1) j.lim.threads = (uint32_t)ctx->nthreads;
    j.f = calloc((size_t)nf, sizeof(*j.f));
    vol_slice *sl = NULL;
    float *tmp = NULL;
    dcm_image *whole = NULL;
    ms_status st = MS_OK;
    if (j.f == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory for %lld files", (long long)nf);
        goto done;
    }
    uint64_t bytes = 0;
    for (int64_t i = 0; i < nf; i++)
        bytes += j.files[i].len;
    dcm_ops_count((uint64_t)nf, bytes, 0);
    /* Every header first, then the series checked, then the pixels: a series
     * refused decodes no pixel, and its decoded size is bounded before any is
     * (each file alone is bounded by the decoder). */
    kn_ctx_parallel_for(ctx, nf, 1, parse_range, &j);
    uint64_t total = 0;
    for (int64_t i = 0; i < nf; i++) {
        if (j.f[i].st != MS_OK) break;
        const dcm_info *fi = &j.f[i].info;
        uint64_t v = mul_sat(mul_sat(fi->rows ? fi->rows : 1, fi->cols ? fi->cols : 1),
                             mul_sat(fi->samples ? fi->samples : 1, fi->frames ? fi->frames : 1));
        total = mul_sat(v, 4) > UINT64_MAX - total ? UINT64_MAX : total + mul_sat(v, 4);
    }
    if (total > j.lim.max_pixel_bytes) {
        st = ms_errf(
            MS_EINVAL, "a series of %lld files decodes to %llu bytes, over the limit of %llu",
            (long long)nf, (unsigned long long)total, (unsigned long long)j.lim.max_pixel_bytes);
        goto done;
    }
    for (int64_t i = 0; i < nf; i++)
        if (j.f[i].st != MS_OK) {
            st = file_error(i, j.f[i].st, j.f[i].err);
            goto done;
        }
    for (int64_t i = 0; i < nf; i++)
        dcm_get_string(j.f[i].ds, dcm_find(j.f[i].ds, DCM_NO_PARENT, TAG(0x0020, 0x000E)),
                       j.f[i].series, sizeof(j.f[i].series));
    snprintf(geom->series, sizeof(geom->series), "%s", j.f[0].series);
    snprintf(geom->modality, sizeof(geom->modality), "%s", j.f[0].info.modality);
    for (int64_t i = 0; i < nf; i++)
        if ((st = check_file(s, j.f, i, nf, j.files[i].len)) != MS_OK) goto done;
    kn_ctx_parallel_for(ctx, nf, 1, geom_range, &j);
    for (int64_t i = 0; i < nf; i++)
        if (j.f[i].st != MS_OK) {
            st = file_error(i, j.f[i].st, j.f[i].err);
            goto done;
        }
    const dcm_info *in0 = &j.f[0].info;
    const int64_t D = nf == 1 ? (int64_t)in0->frames : nf;
    const int64_t H = in0->rows, W = in0->cols;
    sl = calloc((size_t)D, sizeof(*sl));
    if (sl == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < D; k++) {
        sl[k].file = nf == 1 ? 0 : k;
        sl[k].frame = nf == 1 ? (uint32_t)k : 0;
    }
    double gap = 0, px[2];
    geom->dim[0] = D;
    geom->dim[1] = H;
    geom->dim[2] = W;
    if ((st = order_slices(j.f, nf, sl, D, &gap, px)) != MS_OK) goto done;
    if (out == NULL) {
        if (nf != D) {
            st = ms_errf(MS_EINVAL, "a multi-frame file where a series of single-frame files "
                                    "is needed");
            goto done;
        }
        for (int64_t k = 0; k < D; k++)
            order[k] = sl[k].file;
    }
    const int64_t dim[3] = {D, H, W};
    const double have[3] = {gap, px[0], px[1]};
    const vol_geom *g0 = &j.f[sl[0].file].g[sl[0].frame];
    const vol_geom *g1 = &j.f[sl[D - 1].file].g[sl[D - 1].frame];
    memcpy(geom->spacing, have, sizeof(have));
    memcpy(geom->ori, g0->ori, sizeof(geom->ori));
    memcpy(geom->first, g0->pos, sizeof(geom->first));
    memcpy(geom->last, g1->pos, sizeof(geom->last));
    if (out == NULL) goto done;
    int64_t odim[3];
    if ((st = out_shape(s, &j.lim, dim, have, odim)) != MS_OK) goto done;
    memcpy(geom->out, odim, sizeof(odim));
    const int resample_to = odim[0] != D || odim[1] != H || odim[2] != W ||
                            (s->spacing[0] && (have[0] != s->spacing[0] ||
                                               have[1] != s->spacing[1] ||
                                               have[2] != s->spacing[2]));
    rt_shape sh = rt_shape_make(5, (int64_t[]){1, odim[0], odim[1], odim[2], 1});
    if ((st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0])) != MS_OK) goto done;
    float *dst = rt_tensor_f32(out[0]);
    j.vol = dst;
    if (resample_to) {
        tmp = malloc(sizeof(float) * (size_t)(D * H * W));
        if (tmp == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory for the volume");
            goto fail_out;
        }
        j.vol = tmp;
    }
    /* The pixels: one multi-frame file that is not native 16-bit is decoded
     * whole (its frames on the pool); slices otherwise each straight into
     * their place. */
    dcm_native_view v;
    if (nf == 1 && !dcm_native_view_of(j.f[0].ds, in0, &j.lim, 0, &v)) {
        ms_err_clear();
        if ((st = full_parse(&j, 0)) != MS_OK ||
            (st = dcm_decode_hu_ds(j.f[0].ds, &j.lim, &whole)) != MS_OK) {
            snprintf(j.err, ERR_MAX, "%s", ms_errmsg());
            st = file_error(0, st, j.err);
            goto fail_out;
        }
        if (whole->rows != H || whole->cols != W || whole->samples != 1 || whole->frames != D) {
            st = ms_errf(MS_EINVAL, "dicom[0]: decoded image is %ux%ux%u, its header says %ux%ux%u",
                         whole->rows, whole->cols, whole->samples, in0->rows, in0->cols,
                         in0->samples);
            goto fail_out;
        }
        j.whole = whole;
    }
    j.sl = sl;
    j.plane = (uint64_t)H * W;
    kn_ctx_parallel_for(ctx, D, 1, decode_range, &j);
    geom->frames_decoded = atomic_load(&j.frames);
    dcm_ops_count(0, 0, geom->frames_decoded);
    if (atomic_load(&j.failed)) {
        st = file_error(j.err_file, j.st, j.err);
        goto fail_out;
    }
    if (resample_to && (st = resample(s->spacing, tmp, dim, have, odim, dst)) != MS_OK)
        goto fail_out;
    goto done;
fail_out:
    rt_tensor_unref(out[0]);
    out[0] = NULL;
done:
    dcm_image_free(whole);
    free(tmp);
    free(sl);
    if (j.f)
        for (int64_t i = 0; i < nf; i++) {
            dcm_dataset_free(j.f[i].ds);
            free(j.f[i].g);
        }
    free(j.f);
    return st;
}

ms_status dcm_volume_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    const vol_state *s = state;
    const rt_tensor *x = in[0];
    if (s == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    if (x->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "%s: input must be DT_STRING, got %s", n->name,
                       rt_dtype_name(x->dtype));
    dcm_volume_geom geom;
    memset(&geom, 0, sizeof(geom));
    ms_status st = vol_run(ctx, s, rt_tensor_strs(x), x->nelem, out, &geom, NULL);
    if (st != MS_OK || n->nout < 2) return st;
    /* geometry: the series' own size and spacing, for _DcmResampleBack. */
    rt_shape gs = rt_shape_make(1, (int64_t[]){6});
    if ((st = kn_ctx_output(ctx, 1, RT_DT_DOUBLE, &gs, &out[1])) != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
        return st;
    }
    double *g = out[1]->data;
    for (int q = 0; q < 3; q++) {
        g[q] = (double)geom.dim[q];
        g[3 + q] = geom.spacing[q];
    }
    return MS_OK;
}

/* _DcmResampleBack: x (1, C, d, h, w) or (1, d, h, w, C) with data_format
 * NDHWC, on the grid DcmDecodeVolume resampled to `spacing`, back to the
 * series' own grid given by that op's geometry output [D, H, W, s_z, s_y,
 * s_x]: the volume's formula with the two spacings swapped (output index j
 * reads input index j * s / t), each channel on its own. */
typedef struct back_state {
    double spacing[3];
    int ndhwc;
} back_state;

ms_status dcm_resample_back_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    float sp[3];
    if (kn_attr_flist(n, "spacing", sp, 3) != 3 || !(sp[0] > 0) || !(sp[1] > 0) ||
        !(sp[2] > 0) || !isfinite(sp[0]) || !isfinite(sp[1]) || !isfinite(sp[2]))
        return kn__errf(MS_EINVAL, n, "needs spacing [z, y, x] in mm, each > 0");
    back_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (int q = 0; q < 3; q++) s->spacing[q] = sp[q];
    s->ndhwc = kn_attr_s_eq(n, "data_format", "NDHWC", "NCDHW");
    *state = s;
    return MS_OK;
}

ms_status dcm_resample_back_compute(kn_ctx *ctx, const kn_node *n, void *state,
                                    rt_tensor *const *in, rt_tensor **out) {
    const back_state *s = state;
    const rt_tensor *x = in[0], *gt = in[1];
    const int cx = s->ndhwc ? 4 : 1, sx = s->ndhwc ? 1 : 2;
    if (x->dtype != RT_DT_FLOAT || x->shape.rank != 5 || x->shape.dim[0] != 1 ||
        gt->dtype != RT_DT_DOUBLE || gt->nelem != 6)
        return kn__errf(MS_EINVAL, n, "wants a float (1, ...) 5-D volume and DcmDecodeVolume's "
                        "geometry");
    const double *g = gt->data;
    const int64_t c = x->shape.dim[cx];
    int64_t m[3], dim[3];
    double have[3], from[3];
    for (int q = 0; q < 3; q++) {
        m[q] = x->shape.dim[sx + q];
        dim[q] = (int64_t)g[q];
        have[q] = g[3 + q];
        /* An axis the decode kept (one slice) stays as it is. */
        from[q] = have[q] > 0 ? s->spacing[q] : 0;
        int64_t want = have[q] > 0 ? resampled_len(dim[q], have[q], s->spacing[q]) : dim[q];
        if (m[q] != want)
            return kn__errf(MS_EINVAL, n, "axis %d has %lld voxels; the series' %lld at %g mm "
                            "resampled to %g mm give %lld",
                            q, (long long)m[q], (long long)dim[q], have[q], s->spacing[q],
                            (long long)want);
    }
    int64_t od[5] = {1, c, dim[0], dim[1], dim[2]};
    if (s->ndhwc) od[1] = dim[0], od[2] = dim[1], od[3] = dim[2], od[4] = c;
    rt_shape os = rt_shape_make(5, od);
    ms_status st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &os, &out[0]);
    if (st != MS_OK) return st;
    const int64_t mv = m[0] * m[1] * m[2], nv = dim[0] * dim[1] * dim[2];
    /* One channel at a time: its input (NDHWC: gathered) and output. */
    const uint64_t tb = s->ndhwc ? (uint64_t)(mv + nv) * sizeof(float) : 0;
    ms_budget *budget = ctx ? ctx->budget : NULL;
    float *ci = NULL, *co = NULL;
    if (tb && (st = ms_budget_take(budget, tb, "resampling back to the series' grid")) != MS_OK)
        goto fail;
    if (tb && ((ci = malloc(sizeof(float) * (size_t)mv)) == NULL ||
               (co = malloc(sizeof(float) * (size_t)nv)) == NULL)) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    const float *xd = x->data;
    float *od_ = out[0]->data;
    for (int64_t ch = 0; ch < c && st == MS_OK; ch++) {
        if (s->ndhwc)
            for (int64_t v = 0; v < mv; v++) ci[v] = xd[v * c + ch];
        st = resample(have, s->ndhwc ? ci : xd + ch * mv, m, from, dim,
                      s->ndhwc ? co : od_ + ch * nv);
        if (st == MS_OK && s->ndhwc)
            for (int64_t v = 0; v < nv; v++) od_[v * c + ch] = co[v];
    }
done:
    free(ci);
    free(co);
    if (tb) ms_budget_give(budget, tb);
    if (st == MS_OK) return MS_OK;
fail:
    rt_tensor_unref(out[0]);
    out[0] = NULL;
    return st;
}

ms_status dcm_volume_decode(kn_ctx *ctx, const dcm_volume_opts *o, const rt_str *files, int64_t n,
                            rt_tensor **out, dcm_volume_geom *geom) {
    vol_state s;
    dcm_volume_geom g;
    memset(&s, 0, sizeof(s));
    memset(&g, 0, sizeof(g));
    if (o->modalities != NULL && strlen(o->modalities) >= sizeof(s.guard.modalities))
        return ms_errf(MS_EINVAL, "modalities list of %zu bytes is too long",
                       strlen(o->modalities));
    if (o->modalities != NULL)
        snprintf(s.guard.modalities, sizeof(s.guard.modalities), "%s", o->modalities);
    if (o->window) {
        if (!(o->width > 0) || !isfinite(o->center) ||
            !((float)(o->center + o->width / 2.0) > (float)(o->center - o->width / 2.0)))
            return ms_errf(MS_EINVAL, "window width must be > 0 (center %g, width %g)", o->center,
                           o->width);
        s.window = 1;
        s.center = o->center;
        s.width = o->width;
    }
    if (o->spacing[0] > 0 || o->spacing[1] > 0 || o->spacing[2] > 0)
        for (int a = 0; a < 3; a++) {
            if (!(o->spacing[a] > 0) || !isfinite(o->spacing[a]))
                return ms_errf(MS_EINVAL, "spacing values must be > 0 mm");
            /* as the op's float32 attr */
            s.spacing[a] = (float)o->spacing[a];
        }
    out[0] = NULL;
    ms_status st = vol_run(ctx, &s, files, n, out, &g, NULL);
    if (geom != NULL) *geom = g;
    return st;
}

ms_status dcm_volume_order(kn_ctx *ctx, const rt_str *files, int64_t n, int64_t *order,
                           dcm_volume_geom *geom) {
    vol_state s;
    memset(&s, 0, sizeof(s));
    memset(geom, 0, sizeof(*geom));
    return vol_run(ctx, &s, files, n, NULL, geom, order);
}
