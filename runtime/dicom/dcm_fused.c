/* dcm_fused.c - DcmDecodeWindow: DcmDecodeHU -> DcmWindow in one pass.
 *
 * The load-time fusion (runtime/graph/rt_fuse.c) turns a DcmWindow whose
 * inputs are a DcmDecodeHU's hu (and mask) outputs, used by nothing else,
 * into this op. It gives bit for bit what the two ops give (docs/dicom.md):
 *   attrs  frame, pad_value, modalities, expect_size   as DcmDecodeHU
 *          center, width, data_format, size             as DcmWindow
 *          masked: bool                                 DcmWindow had the mask
 *   input  contents: DT_STRING (N files)
 *   output DT_FLOAT (N, h, w, C) or (N, C, h, w)
 * No HU image is materialised: each output row reads the one or two source
 * rows it needs, turned into HU and windowed in a vector loop (AVX-512 /
 * AVX2 clones), resized horizontally, then blended vertically. Native 16-bit
 * grey frames are read straight from the file's bytes; other files go
 * through dcm_decode_hu_ds and the same row pipeline. Row buffers are
 * per-thread and reused across requests. Files of a batch run in parallel
 * on the intra-op pool; a batch of one splits its output rows.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_ops_int.h"
#include "dcm_pixel.h"
#include "kn_ctx.h"
#include "kn_dicom_xform.h"

/* Two float32 roundings per step, never a fused multiply-add: the same
 * arithmetic as dcm_pixel.c and kn_cpu_image.c. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off", "tree-vectorize")
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DCM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DCM_CLONES
#endif

#define ERR_MAX 400

typedef float fw_v16f __attribute__((vector_size(64)));
typedef int32_t fw_v16i __attribute__((vector_size(64)));
typedef uint16_t fw_v16u16 __attribute__((vector_size(32)));

typedef struct fw_state {
    dcm_guard guard;
    int64_t frame;
    float pad;
    float lo, hi, range;
    int nchw, masked;
    int64_t size[2];
} fw_state;

ms_status dcm_fused_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    kn_window w; /* the window exactly as DcmWindow reads it */
    ms_status st = kn_window_attrs(n, &w);
    if (st != MS_OK) return st;
    fw_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if ((st = dcm_guard_prepare(n, &s->guard)) != MS_OK) {
        free(s);
        return st;
    }
    s->frame = kn_attr_i(n, "frame", 0);
    s->pad = kn_attr_f(n, "pad_value", 0.f);
    s->lo = w.lo;
    s->hi = w.hi;
    s->range = w.range;
    s->nchw = w.nchw;
    s->size[0] = w.size[0];
    s->size[1] = w.size[1];
    s->masked = kn_attr_b(n, "masked", 0);
    if (s->frame < 0) {
        long long f = (long long)s->frame;
        free(s);
        return ms_errf(MS_EINVAL, "%s: frame %lld < 0", n->name, f);
    }
    *state = s;
    return MS_OK;
}

/* ---- vector loops ---- */

/* x = (min(max(x, lo), hi) - lo) / range per lane; NaN stays NaN. */
#define CLIP_DIV(x, lov, hiv, rv)                                                                  \
    do {                                                                                           \
        fw_v16i m_ = (x) < (lov);                                                                  \
        (x) = (fw_v16f)(((fw_v16i)(x) & ~m_) | ((fw_v16i)(lov)&m_));                               \
        m_ = (x) > (hiv);                                                                          \
        (x) = (fw_v16f)(((fw_v16i)(x) & ~m_) | ((fw_v16i)(hiv)&m_));                               \
        (x) = ((x) - (lov)) / (rv);                                                                \
    } while (0)

static inline float win1(float x, float lo, float hi, float range) {
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    return (x - lo) / range;
}

/* HU of n 16-bit samples, windowed. */
DCM_CLONES static void hu_win_16(const uint8_t *restrict raw, uint32_t n, uint32_t mask,
                                 uint32_t sign, float sl, float ic, float lo, float hi, float range,
                                 float *restrict out) {
    fw_v16f lov, hiv, rv, slv, icv;
    fw_v16i mv, sv;
    for (int k = 0; k < 16; k++) {
        lov[k] = lo, hiv[k] = hi, rv[k] = range, slv[k] = sl, icv[k] = ic;
        mv[k] = (int32_t)mask, sv[k] = (int32_t)sign;
    }
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        fw_v16u16 w;
        memcpy(&w, raw + 2 * (size_t)i, sizeof(w)); /* little-endian host */
        fw_v16i v = __builtin_convertvector(w, fw_v16i);
        v = ((v & mv) ^ sv) - sv;
        fw_v16f prod = __builtin_convertvector(v, fw_v16f) * slv;
        fw_v16f x = prod + icv;
        CLIP_DIV(x, lov, hiv, rv);
        memcpy(out + i, &x, sizeof(x));
    }
    for (; i < n; i++) {
        uint16_t w;
        memcpy(&w, raw + 2 * (size_t)i, 2);
        int32_t v = (int32_t)((w & mask) ^ sign) - (int32_t)sign;
        float prod = (float)v * sl;
        out[i] = win1(prod + ic, lo, hi, range);
    }
}

/* Windows n floats in place. */
DCM_CLONES static void win_f32(float *restrict x, uint32_t n, float lo, float hi, float range) {
    fw_v16f lov, hiv, rv;
    for (int k = 0; k < 16; k++)
        lov[k] = lo, hiv[k] = hi, rv[k] = range;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        fw_v16f v;
        memcpy(&v, x + i, sizeof(v));
        CLIP_DIV(v, lov, hiv, rv);
        memcpy(x + i, &v, sizeof(v));
    }
    for (; i < n; i++)
        x[i] = win1(x[i], lo, hi, range);
}

/* Horizontal half of the bilinear resize of one row: h[x*c+k] = tl + (tr - tl) * dx. */
DCM_CLONES static void hresize(const float *restrict row, uint32_t ow, uint32_t c,
                               const int32_t *restrict x0, const int32_t *restrict x1,
                               const float *restrict dx, int half2, float *restrict h) {
    if (half2 && c == 1) {
        /* x0 = 2x, x1 = 2x + 1, dx = 0.5: even and odd lanes of 32 inputs. */
        uint32_t x = 0;
        fw_v16f half;
        for (int k = 0; k < 16; k++)
            half[k] = 0.5f;
        for (; x + 16 <= ow; x += 16) {
            fw_v16f p, q;
            memcpy(&p, row + 2 * (size_t)x, sizeof(p));
            memcpy(&q, row + 2 * (size_t)x + 16, sizeof(q));
            fw_v16f a = __builtin_shufflevector(p, q, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
                                                26, 28, 30);
            fw_v16f b = __builtin_shufflevector(p, q, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25,
                                                27, 29, 31);
            fw_v16f r = a + (b - a) * half;
            memcpy(h + x, &r, sizeof(r));
        }
        for (; x < ow; x++) {
            float a = row[2 * x], b = row[2 * x + 1];
            h[x] = a + (b - a) * 0.5f;
        }
        return;
    }
    for (uint32_t x = 0; x < ow; x++)
        for (uint32_t k = 0; k < c; k++) {
            float a = row[(size_t)x0[x] * c + k], b = row[(size_t)x1[x] * c + k];
            h[(size_t)x * c + k] = a + (b - a) * dx[x];
        }
}

DCM_CLONES static void vblend(const float *restrict top, const float *restrict bot, uint32_t n,
                              float dy, float *restrict out) {
    for (uint32_t i = 0; i < n; i++)
        out[i] = top[i] + (bot[i] - top[i]) * dy;
}

/* ---- per-thread row buffers, kept between requests ---- */

typedef struct fw_scratch {
    void *buf;
    size_t cap;
} fw_scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    fw_scratch *s = p;
    if (s) free(s->buf);
    free(s);
}

static void scratch_init(void) {
    (void)pthread_key_create(&scratch_key, scratch_free);
}

/* Returns a buffer of `bytes` owned by this thread (NULL on failure). */
static void *scratch(size_t bytes) {
    pthread_once(&scratch_once, scratch_init);
    fw_scratch *s = pthread_getspecific(scratch_key);
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL) return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->cap < bytes) {
        free(s->buf);
        s->cap = 0;
        if ((s->buf = malloc(bytes)) == NULL) return NULL;
        s->cap = bytes;
    }
    return s->buf;
}

/* ---- the pass ---- */

typedef struct fw_file {
    dcm_dataset *ds;
    dcm_image *img; /* general path; NULL with a native view */
    dcm_native_view view;
    int fast;
    dcm_info info;
    uint32_t rows, cols, samples;
    ms_status st;
    char err[ERR_MAX];
} fw_file;

typedef struct fw_job {
    const fw_state *s;
    const rt_str *files;
    fw_file *f;
    dcm_limits lim;
    /* output geometry */
    uint32_t H, W, C, oh, ow;
    float *y;
    float wpad; /* the window of pad_value */
    int64_t nfiles;
    int split_rows; /* one file, output rows split across threads */
    ms_status *row_st;
} fw_job;

static void load_range(void *arg, int64_t b, int64_t e) {
    fw_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        fw_file *f = &j->f[i];
        ms_err_clear();
        ms_status st = dcm_parse(j->files[i].data, (size_t)j->files[i].len, &j->lim, &f->ds);
        if (st == MS_OK) st = dcm_read_info(f->ds, &f->info);
        if (st == MS_OK && j->s->frame < (int64_t)f->info.frames &&
            dcm_native_view_of(f->ds, &f->info, &j->lim, (uint32_t)j->s->frame, &f->view)) {
            f->fast = 1;
            f->rows = f->view.rows;
            f->cols = f->view.cols;
            f->samples = 1;
        } else if (st == MS_OK) {
            st = dcm_decode_hu_ds(f->ds, &j->lim, &f->img);
            if (st == MS_OK && j->s->frame >= (int64_t)f->img->frames)
                st = ms_errf(MS_EINVAL, "frame %lld requested, the file has %u",
                             (long long)j->s->frame, f->img->frames);
            if (st == MS_OK) {
                f->rows = f->img->rows;
                f->cols = f->img->cols;
                f->samples = f->img->samples;
                f->info = f->img->info;
            }
        }
        f->st = st;
        if (st != MS_OK) snprintf(f->err, ERR_MAX, "%s", ms_errmsg());
    }
}

/* Windowed row r of file f's padded (H, W, C) plane into buf. */
static void win_row(const fw_job *j, const fw_file *f, uint32_t r, float *restrict buf,
                    float *restrict tmp) {
    const fw_state *s = j->s;
    const uint32_t W = j->W, C = j->C;
    uint32_t w = 0;
    if (r < f->rows) {
        w = f->cols;
        if (f->fast) {
            const dcm_native_view *v = &f->view;
            float *dst = C == 1 ? buf : tmp;
            dcm_pixels_count(v->cols);
            hu_win_16(v->raw + (size_t)r * v->cols * 2, v->cols, v->mask, v->sign, v->slope,
                      v->intercept, s->lo, s->hi, s->range, dst);
            if (C != 1)
                for (uint32_t x = 0; x < w; x++)
                    for (uint32_t k = 0; k < C; k++)
                        buf[(size_t)x * C + k] = tmp[x];
        } else {
            const uint32_t c = f->samples;
            const float *src =
                f->img->data + (uint64_t)s->frame * f->rows * f->cols * c + (uint64_t)r * w * c;
            if (c == C)
                memcpy(buf, src, (size_t)w * C * sizeof(float));
            else
                for (uint32_t x = 0; x < w; x++)
                    for (uint32_t k = 0; k < C; k++)
                        buf[(size_t)x * C + k] = src[(size_t)x * c];
            win_f32(buf, w * C, s->lo, s->hi, s->range);
        }
    }
    for (size_t i = (size_t)w * C; i < (size_t)W * C; i++)
        buf[i] = j->wpad;
}

/* Writes output row y (ow * C values, NHWC order in `row`) of image b. */
static void put_row(const fw_job *j, int64_t b, uint32_t y, const float *row) {
    const uint32_t C = j->C, oh = j->oh, ow = j->ow;
    float *base = j->y + (uint64_t)b * oh * ow * C;
    if (!j->s->nchw || C == 1) {
        if (row != base + (uint64_t)y * ow * C)
            memcpy(base + (uint64_t)y * ow * C, row, (size_t)ow * C * sizeof(float));
        return;
    }
    for (uint32_t k = 0; k < C; k++)
        for (uint32_t x = 0; x < ow; x++)
            base[((uint64_t)k * oh + y) * ow + x] = row[(size_t)x * C + k];
}

/* Output rows [y0, y1) of file b. */
static ms_status render(const fw_job *j, int64_t b, uint32_t ya, uint32_t yb) {
    const fw_state *s = j->s;
    const fw_file *f = &j->f[b];
    const uint32_t W = j->W, C = j->C, ow = j->ow, oh = j->oh;
    const size_t wc = (size_t)W * C, oc = (size_t)ow * C;
    /* buffers: win (wc), tmp (W), h[2] (oc each), out row (oc), x0, x1, dx (ow) */
    size_t need = (wc + W + 3 * oc + 3 * (size_t)ow + 16) * sizeof(float);
    float *mem = scratch(need);
    if (mem == NULL)
        return ms_errf(MS_ENOMEM, "out of memory for the rows of dicom[%lld]", (long long)b);
    float *win = mem, *tmp = win + wc, *h0 = tmp + W, *h1 = h0 + oc, *orow = h1 + oc;
    int32_t *x0 = (int32_t *)(orow + oc), *x1 = x0 + ow;
    float *dx = (float *)(x1 + ow);
    const int direct = !s->nchw || C == 1;
    if (!s->size[0]) {
        for (uint32_t y = ya; y < yb; y++) {
            float *dst = direct ? j->y + ((uint64_t)b * oh + y) * ow * C : win;
            win_row(j, f, y, dst, tmp);
            put_row(j, b, y, dst);
        }
        return MS_OK;
    }
    /* The image's own extent (DcmWindow reads it from the mask) or all. */
    const uint32_t ih = s->masked ? f->rows : j->H, iw = s->masked ? f->cols : j->W;
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    int half2 = 1;
    for (uint32_t x = 0; x < ow; x++) {
        float fx = ((float)x + 0.5f) * sx - 0.5f, x0f = floorf(fx);
        int64_t a = (int64_t)x0f, c1 = a + 1;
        a = a < 0 ? 0 : a > (int64_t)iw - 1 ? (int64_t)iw - 1 : a;
        c1 = c1 < 0 ? 0 : c1 > (int64_t)iw - 1 ? (int64_t)iw - 1 : c1;
        x0[x] = (int32_t)a;
        x1[x] = (int32_t)c1;
        dx[x] = fx - x0f;
        half2 &= a == 2 * (int64_t)x && c1 == a + 1 && dx[x] == 0.5f;
    }
    int64_t have[2] = {-1, -1}; /* source rows in h0, h1 */
    float *hb[2] = {h0, h1};
    for (uint32_t y = ya; y < yb; y++) {
        float fy = ((float)y + 0.5f) * sy - 0.5f, y0f = floorf(fy), dy = fy - y0f;
        int64_t r0 = (int64_t)y0f, r1 = r0 + 1;
        r0 = r0 < 0 ? 0 : r0 > (int64_t)ih - 1 ? (int64_t)ih - 1 : r0;
        r1 = r1 < 0 ? 0 : r1 > (int64_t)ih - 1 ? (int64_t)ih - 1 : r1;
        int s0 = have[0] == r0 ? 0 : have[1] == r0 ? 1 : -1;
        if (s0 < 0) {
            s0 = have[0] == r1 ? 1 : 0; /* keep the slot that holds r1 */
            win_row(j, f, (uint32_t)r0, win, tmp);
            hresize(win, ow, C, x0, x1, dx, half2, hb[s0]);
            have[s0] = r0;
        }
        int s1 = have[0] == r1 ? 0 : have[1] == r1 ? 1 : -1;
        if (s1 < 0) {
            s1 = 1 - s0;
            win_row(j, f, (uint32_t)r1, win, tmp);
            hresize(win, ow, C, x0, x1, dx, half2, hb[s1]);
            have[s1] = r1;
        }
        float *rows2[2] = {hb[s0], hb[s1]};
        float *dst = direct ? j->y + ((uint64_t)b * oh + y) * ow * C : orow;
        vblend(rows2[0], rows2[1], (uint32_t)oc, dy, dst);
        put_row(j, b, y, dst);
    }
    return MS_OK;
}

static void render_files(void *arg, int64_t b, int64_t e) {
    fw_job *j = arg;
    for (int64_t i = b; i < e; i++)
        j->row_st[i] = render(j, i, 0, j->oh);
}

static void render_rows(void *arg, int64_t b, int64_t e) {
    fw_job *j = arg;
    ms_status st = render(j, 0, (uint32_t)b, (uint32_t)e);
    if (st != MS_OK) j->row_st[0] = st;
}

ms_status dcm_fused_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    const fw_state *s = state;
    const rt_tensor *x = in[0];
    if (s == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    if (x->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "%s: input must be DT_STRING, got %s", n->name,
                       rt_dtype_name(x->dtype));
    const int64_t nf = x->nelem;
    fw_file one;
    fw_job j = {.s = s, .files = rt_tensor_strs(x), .nfiles = nf};
    dcm_limits_default(&j.lim);
    ms_status row_st1 = MS_OK;
    j.f = nf == 1 ? &one : calloc((size_t)(nf ? nf : 1), sizeof(*j.f));
    j.row_st = nf == 1 ? &row_st1 : calloc((size_t)(nf ? nf : 1), sizeof(*j.row_st));
    if (nf == 1) memset(&one, 0, sizeof(one));
    ms_status st = MS_OK;
    if (j.f == NULL || j.row_st == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory for %lld files", (long long)nf);
        goto done;
    }
    /* One file: its encapsulated frames share the pool. */
    if (nf == 1 && ctx != NULL && ctx->nthreads > 1) j.lim.threads = (uint32_t)ctx->nthreads;
    if (nf > 1)
        kn_ctx_parallel_for(ctx, nf, 1, load_range, &j);
    else
        load_range(&j, 0, nf);
    for (int64_t i = 0; i < nf; i++)
        if (j.f[i].st != MS_OK) {
            ms_status code = j.f[i].st == MS_ENOMEM ? MS_ENOMEM : MS_EINVAL;
            st = ms_errf(code, "dicom[%lld]: %s", (long long)i, j.f[i].err);
            goto done;
        }
    for (int64_t i = 0; i < nf; i++)
        if ((st = dcm_guard_check(&s->guard, i, &j.f[i].info, j.f[i].rows, j.f[i].cols)) != MS_OK)
            goto done;
    j.C = 1;
    for (int64_t i = 0; i < nf; i++) {
        if (j.f[i].rows > j.H) j.H = j.f[i].rows;
        if (j.f[i].cols > j.W) j.W = j.f[i].cols;
        if (j.f[i].samples > j.C) j.C = j.f[i].samples;
    }
    j.oh = s->size[0] ? (uint32_t)s->size[0] : j.H;
    j.ow = s->size[1] ? (uint32_t)s->size[1] : j.W;
    j.wpad = win1(s->pad, s->lo, s->hi, s->range);
    rt_shape sh = s->nchw ? rt_shape_make(4, (int64_t[]){nf, j.C, j.oh, j.ow})
                          : rt_shape_make(4, (int64_t[]){nf, j.oh, j.ow, j.C});
    if ((st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0])) != MS_OK) goto done;
    j.y = rt_tensor_f32(out[0]);
    if (nf == 1) {
        /* Split the rows only when there is enough work to pay for it
         * (a 512x512 image does; a 256x256 one runs inline). Each output row
         * is computed the same way whichever thread runs it. */
        const uint64_t work = (uint64_t)j.H * j.W;
        if (ctx != NULL && ctx->nthreads > 1 && work >= (uint64_t)KN_PAR_MIN_VALUES && j.oh >= 16)
            kn_ctx_parallel_for(ctx, j.oh, 8, render_rows, &j);
        else
            render_rows(&j, 0, j.oh);
    } else if (nf > 1) {
        kn_ctx_parallel_for(ctx, nf, 1, render_files, &j);
    }
    for (int64_t i = 0; i < nf && st == MS_OK; i++)
        if (j.row_st[i] != MS_OK) st = j.row_st[i];
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
done:
    if (j.f)
        for (int64_t i = 0; i < nf; i++) {
            dcm_image_free(j.f[i].img);
            dcm_dataset_free(j.f[i].ds);
        }
    if (j.f != &one) free(j.f);
    if (j.row_st != &row_st1) free(j.row_st);
    return st;
}

/* ---- _DcmDecodeRaw: the host half of a split DcmDecodeWindow ---- */

/* The files of one request parsed, decoded where needed and checked as
 * dcm_fused_compute does (same errors, same order); fills j's H, W, C. */
static ms_status load_checked(kn_ctx *ctx, const fw_state *s, fw_job *j) {
    const int64_t nf = j->nfiles;
    if (nf == 1 && ctx != NULL && ctx->nthreads > 1) j->lim.threads = (uint32_t)ctx->nthreads;
    if (nf > 1)
        kn_ctx_parallel_for(ctx, nf, 1, load_range, j);
    else
        load_range(j, 0, nf);
    for (int64_t i = 0; i < nf; i++)
        if (j->f[i].st != MS_OK) {
            ms_status code = j->f[i].st == MS_ENOMEM ? MS_ENOMEM : MS_EINVAL;
            return ms_errf(code, "dicom[%lld]: %s", (long long)i, j->f[i].err);
        }
    ms_status st;
    for (int64_t i = 0; i < nf; i++)
        if ((st = dcm_guard_check(&s->guard, i, &j->f[i].info, j->f[i].rows, j->f[i].cols)) !=
            MS_OK)
            return st;
    j->C = 1;
    for (int64_t i = 0; i < nf; i++) {
        if (j->f[i].rows > j->H) j->H = j->f[i].rows;
        if (j->f[i].cols > j->W) j->W = j->f[i].cols;
        if (j->f[i].samples > j->C) j->C = j->f[i].samples;
    }
    return MS_OK;
}

ms_status dcm_raw_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                          rt_tensor **out) {
    const fw_state *s = state;
    const rt_tensor *x = in[0];
    if (s == NULL) return ms_errf(MS_EINTERNAL, "%s: not prepared", n->name);
    if (x->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "%s: input must be DT_STRING, got %s", n->name,
                       rt_dtype_name(x->dtype));
    const int64_t nf = x->nelem;
    fw_job j = {.s = s, .files = rt_tensor_strs(x), .nfiles = nf};
    dcm_limits_default(&j.lim);
    j.f = calloc((size_t)(nf ? nf : 1), sizeof(*j.f));
    ms_status st = MS_OK;
    if (j.f == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory for %lld files", (long long)nf);
        goto done;
    }
    if ((st = load_checked(ctx, s, &j)) != MS_OK) goto done;
    /* Stored words when every file is native 16-bit grey, else HU. */
    int words = 1;
    for (int64_t i = 0; i < nf; i++) words &= j.f[i].fast;
    const uint32_t H = j.H, W = j.W, C = j.C;
    rt_shape rs = words ? rt_shape_make(3, (int64_t[]){nf, H, W})
                        : rt_shape_make(4, (int64_t[]){nf, H, W, C});
    rt_shape ps = rt_shape_make(2, (int64_t[]){nf, (int64_t)sizeof(kn_dcm_xform_file)});
    if ((st = kn_ctx_output(ctx, 0, words ? RT_DT_UINT16 : RT_DT_FLOAT, &rs, &out[0])) != MS_OK ||
        (st = kn_ctx_output(ctx, 1, RT_DT_UINT8, &ps, &out[1])) != MS_OK)
        goto done;
    if (rt_tensor_nbytes(out[0]) > 0) memset(out[0]->data, 0, rt_tensor_nbytes(out[0]));
    kn_dcm_xform_file *pf = (kn_dcm_xform_file *)out[1]->data;
    for (int64_t i = 0; i < nf; i++) {
        const fw_file *f = &j.f[i];
        kn_dcm_xform_file p = {.rows = f->rows, .cols = f->cols, .mask = 0xFFFFu, .slope = 1.f};
        if (f->fast) {
            p.mask = f->view.mask;
            p.sign = f->view.sign;
            p.slope = f->view.slope;
            p.intercept = f->view.intercept;
        }
        memcpy(&pf[i], &p, sizeof(p));
        if (f->fast) dcm_pixels_count((uint64_t)f->rows * f->cols);
        for (uint32_t r = 0; r < f->rows; r++) {
            if (words) {
                uint16_t *dst = (uint16_t *)out[0]->data + ((uint64_t)i * H + r) * W;
                memcpy(dst, f->view.raw + (size_t)r * f->view.cols * 2, (size_t)f->cols * 2);
                continue;
            }
            float *dst = rt_tensor_f32(out[0]) + (((uint64_t)i * H + r) * W) * C;
            if (f->fast) { /* HU as hu_win_16 computes it, before the window */
                const uint8_t *src = f->view.raw + (size_t)r * f->view.cols * 2;
                for (uint32_t c = 0; c < f->cols; c++) {
                    uint16_t w;
                    memcpy(&w, src + 2 * (size_t)c, 2);
                    int32_t v = (int32_t)((w & p.mask) ^ p.sign) - (int32_t)p.sign;
                    float prod = (float)v * p.slope;
                    float hu = prod + p.intercept;
                    for (uint32_t k = 0; k < C; k++) dst[(size_t)c * C + k] = hu;
                }
                continue;
            }
            const uint32_t c = f->samples;
            const float *src = f->img->data + (uint64_t)s->frame * f->rows * f->cols * c +
                               (uint64_t)r * f->cols * c;
            if (c == C)
                memcpy(dst, src, (size_t)f->cols * C * sizeof(float));
            else
                for (uint32_t x2 = 0; x2 < f->cols; x2++)
                    for (uint32_t k = 0; k < C; k++) dst[(size_t)x2 * C + k] = src[(size_t)x2 * c];
        }
    }
done:
    if (st != MS_OK)
        for (int k = 0; k < 2; k++) {
            rt_tensor_unref(out[k]);
            out[k] = NULL;
        }
    if (j.f)
        for (int64_t i = 0; i < nf; i++) {
            dcm_image_free(j.f[i].img);
            dcm_dataset_free(j.f[i].ds);
        }
    free(j.f);
    return st;
}
