/* dcm_ops.c - the DICOM graph ops: decode DICOM files inside a graph.
 *
 * DcmDecodeHU (ours)
 *   input  contents: DT_STRING, any shape (read flat: N files, one per element)
 *   attrs  frame: int = 0            which frame of each file
 *          size: list(int) = []      [h, w]: resize each file's HU (bilinear,
 *                                    half-pixel centers) so all come out equal
 *          pad_value: float = 0      HU written outside a smaller file
 *          modalities: string = ""   "CT,MR": refuse files whose Modality
 *                                    (0008,0060) is not listed ("" = any)
 *          expect_size: list(int) = [] [h, w] without size: refuse a file of
 *                                    another size, naming both
 *   output hu:   DT_FLOAT (N, H, W, C), H/W the largest in the batch (or size),
 *                C = 3 when any file is colour (grey files are replicated)
 *          mask: DT_FLOAT (N, H, W, 1), 1 where the file has a pixel, else 0
 *   OpDef (for a graph's stripped_op_list): inputs {contents: string},
 *   outputs {hu: float, mask: float}, attrs frame:int, size:list(int),
 *   pad_value:float.
 *
 * IO>DecodeDICOMImage (TensorFlow I/O's op, so graphs that use it load)
 *   input  contents: scalar DT_STRING; attrs dtype (uint8/16/32/64, float,
 *   double; default uint16), color_dim (accepted; the output is always 4-D),
 *   on_error ("strict" fails; "skip"/"lossy" give an empty tensor), scale
 *   ("preserve": stored values; "auto": stored range stretched to the dtype).
 *   output (frames, rows, cols, samples) of stored values (no Modality LUT,
 *   as tfio).
 *
 * Decode errors are MS_EINVAL "dicom[<index>]: <reason>". Files are decoded
 * in parallel on the intra-op pool (a batch of one: its frames in parallel).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcm_ops.h"
#include "dcm_ops_int.h"
#include "dcm_pixel.h"
#include "kn_ctx.h"

#define ERR_MAX 400

typedef struct decode_job {
    const rt_str *files;
    dcm_info *info;
    dcm_image **imgs;
    ms_status *st;
    char (*err)[ERR_MAX];
    int64_t frame;
    int stored; /* tfio: stored values instead of HU */
    dcm_limits lim;
    atomic_int failed; /* one file failed: the others stop early */
} decode_job;

static void job_fail(decode_job *j, int64_t i, ms_status st) {
    j->st[i] = st;
    /* The message is thread-local: keep it for the calling thread. */
    snprintf(j->err[i], ERR_MAX, "%s", ms_errmsg());
    atomic_store(&j->failed, 1);
}

/* Phase 1: parse every file (a deflated one inflates, taken from the
 * request's budget as it grows) and read its summary. The data set is not
 * kept: thousands of them would cost more than the check saves. */
static void parse_range(void *arg, int64_t b, int64_t e) {
    decode_job *j = arg;
    for (int64_t i = b; i < e && !atomic_load(&j->failed); i++) {
        ms_err_clear();
        dcm_dataset *ds = NULL;
        ms_status st = dcm_parse(j->files[i].data, (size_t)j->files[i].len, &j->lim, &ds);
        if (st == MS_OK) st = dcm_read_info(ds, &j->info[i]);
        /* an impossible size is the file's fault (INVALID_ARGUMENT), found
         * before the budget is asked for it */
        if (st == MS_OK) st = dcm_check_pixel_bytes(ds, &j->info[i]);
        dcm_dataset_free(ds);
        if (st != MS_OK) job_fail(j, i, st);
    }
}

/* Phase 2: parse again and decode the pixels (their bytes were taken from
 * the budget). */
static void decode_range(void *arg, int64_t b, int64_t e) {
    decode_job *j = arg;
    for (int64_t i = b; i < e && !atomic_load(&j->failed); i++) {
        ms_err_clear();
        dcm_dataset *ds = NULL;
        ms_status st = dcm_parse(j->files[i].data, (size_t)j->files[i].len, &j->lim, &ds);
        if (st == MS_OK)
            st = j->stored ? dcm_decode_stored_ds(ds, &j->lim, &j->imgs[i])
                           : dcm_decode_hu_ds(ds, &j->lim, &j->imgs[i]);
        dcm_dataset_free(ds);
        if (st == MS_OK && j->frame >= (int64_t)j->imgs[i]->frames) {
            st = ms_errf(MS_EINVAL, "frame %lld requested, the file has %u", (long long)j->frame,
                         j->imgs[i]->frames);
            dcm_image_free(j->imgs[i]);
            j->imgs[i] = NULL;
        }
        if (st != MS_OK) job_fail(j, i, st);
    }
}

/* Counts one decode_all: every file's bytes, the frames of those decoded,
 * each refused file by reason (a file not decoded because another one failed
 * its parse counts as neither). */
static void count(const rt_str *files, int64_t n, dcm_image *const *imgs, const ms_status *st) {
    uint64_t bytes = 0, frames = 0;
    for (int64_t i = 0; i < n; i++) {
        bytes += files[i].len;
        if (st[i] != MS_OK) dcm_ops_count_refused(st[i]);
        else if (imgs[i] != NULL) frames += imgs[i]->frames;
    }
    dcm_ops_count((uint64_t)n, bytes, frames);
}

/* a * b, UINT64_MAX when it does not fit (hostile headers). */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Bytes a file's decoded image takes (every frame as float32). */
static uint64_t image_bytes(const dcm_info *in) {
    uint64_t f = in->frames ? in->frames : 1, s = in->samples ? in->samples : 1;
    return mul_sat(mul_sat(mul_sat(f, in->rows), mul_sat(in->cols, s)), sizeof(float));
}

/* Decodes n files in parallel; on failure returns the first error, named by
 * its index, and frees everything. Every file is parsed first and the bytes
 * of all decoded images, plus out_px_bytes per output pixel of the largest
 * image (the op's output; 0: none), are checked against the request's budget
 * before any pixel is decoded; the images' bytes stay taken until
 * free_imgs(). */
static ms_status decode_all(kn_ctx *ctx, const rt_str *files, int64_t n, int64_t frame, int stored,
                            const int64_t *out_hw, uint64_t out_px_bytes, dcm_image ***out,
                            uint64_t *held) {
    decode_job j = {.files = files, .frame = frame, .stored = stored};
    ms_budget *budget = ctx ? ctx->budget : NULL;
    *held = 0;
    atomic_init(&j.failed, 0);
    dcm_limits_default(&j.lim);
    j.lim.budget = budget;
    /* One file: its frames share the pool; several: one file per task. */
    if (n == 1 && ctx != NULL && ctx->nthreads > 1) j.lim.threads = (uint32_t)ctx->nthreads;
    size_t m = (size_t)(n ? n : 1);
    j.info = calloc(m, sizeof(*j.info));
    j.imgs = calloc(m, sizeof(*j.imgs));
    j.st = calloc(m, sizeof(*j.st));
    j.err = calloc(m, sizeof(*j.err));
    ms_status st = MS_OK;
    uint64_t need = 0;
    if (j.info == NULL || j.imgs == NULL || j.st == NULL || j.err == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory for %lld files", (long long)n);
        goto done;
    }
    /* Without a budget (the CLI, tests) there is nothing to check first. */
    if (budget != NULL) kn_ctx_parallel_for(ctx, n, 1, parse_range, &j);
    if (budget == NULL) {
        kn_ctx_parallel_for(ctx, n, 1, decode_range, &j);
    } else if (!atomic_load(&j.failed)) {
        uint64_t H = 0, W = 0, C = 1;
        for (int64_t i = 0; i < n; i++) {
            need = add_sat(need, image_bytes(&j.info[i]));
            if (j.info[i].rows > H) H = j.info[i].rows;
            if (j.info[i].cols > W) W = j.info[i].cols;
            if (j.info[i].samples > C) C = j.info[i].samples;
        }
        if (out_hw != NULL && out_hw[0] > 0) {
            H = (uint64_t)out_hw[0];
            W = (uint64_t)out_hw[1];
        }
        uint64_t out_bytes = mul_sat(mul_sat((uint64_t)n, mul_sat(H, W)), mul_sat(C, out_px_bytes));
        char what[160];
        snprintf(what, sizeof what, "decoding %lld DICOM file%s", (long long)n, n == 1 ? "" : "s");
        if ((st = ms_budget_check(budget, add_sat(need, out_bytes), what)) != MS_OK ||
            (st = ms_budget_take(budget, need, what)) != MS_OK)
            goto done;
        *held = need;
        kn_ctx_parallel_for(ctx, n, 1, decode_range, &j);
    }
    count(files, n, j.imgs, j.st);
    for (int64_t i = 0; i < n; i++)
        if (j.st[i] != MS_OK) {
            /* Every decode failure is the request's fault: bad bytes, or a
             * syntax / size this build does not take. */
            ms_status code = j.st[i] == MS_ENOMEM ? MS_ENOMEM : MS_EINVAL;
            st = ms_errf(code, "dicom[%lld]: %s", (long long)i, j.err[i]);
            goto done;
        }
    *out = j.imgs;
    j.imgs = NULL;
done:
    if (j.imgs) {
        for (int64_t i = 0; i < n; i++)
            dcm_image_free(j.imgs[i]);
        ms_budget_give(budget, *held);
        *held = 0;
    }
    free(j.info);
    free(j.imgs);
    free(j.st);
    free(j.err);
    return st;
}

static void free_imgs(kn_ctx *ctx, dcm_image **imgs, int64_t n, uint64_t held) {
    if (imgs == NULL) return;
    for (int64_t i = 0; i < n; i++)
        dcm_image_free(imgs[i]);
    free(imgs);
    ms_budget_give(ctx ? ctx->budget : NULL, held);
}

/* ---- DcmDecodeHU ---- */

/* p[0..n) = v: a few stores, then doubling copies (memcpy is vectorised). */
static void fill_f32(float *p, uint64_t n, float v) {
    uint64_t k = n < 16 ? n : 16;
    for (uint64_t i = 0; i < k; i++)
        p[i] = v;
    while (k < n) {
        uint64_t c = k < n - k ? k : n - k;
        memcpy(p + k, p, (size_t)c * sizeof(float));
        k += c;
    }
}

typedef struct hu_state {
    int64_t frame;
    int64_t size[2]; /* 0 = no resize */
    float pad;
    dcm_guard guard;
} hu_state;

/* The modality guard and the fixed-size check of hu_state, per file. */
static ms_status hu_guard(const hu_state *s, dcm_image *const *imgs, int64_t nf) {
    for (int64_t i = 0; i < nf; i++) {
        ms_status st = dcm_guard_check(&s->guard, i, &imgs[i]->info, imgs[i]->rows, imgs[i]->cols);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

static ms_status hu_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    hu_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    s->frame = kn_attr_i(n, "frame", 0);
    s->pad = kn_attr_f(n, "pad_value", 0.f);
    int64_t sz[2];
    int k = kn_attr_ilist(n, "size", sz, 2);
    if (k == 2) {
        if (sz[0] <= 0 || sz[1] <= 0 || sz[0] > 65535 || sz[1] > 65535) {
            free(s);
            return ms_errf(MS_EINVAL, "%s: size [%lld, %lld] must be in 1..65535", n->name,
                           (long long)sz[0], (long long)sz[1]);
        }
        s->size[0] = sz[0];
        s->size[1] = sz[1];
    } else if (k > 0) {
        free(s);
        return ms_errf(MS_EINVAL, "%s: size wants [height, width], got %d values", n->name, k);
    }
    ms_status gst = dcm_guard_prepare(n, &s->guard);
    if (gst != MS_OK) {
        free(s);
        return gst;
    }
    if (s->frame < 0) {
        long long f = (long long)s->frame;
        free(s);
        return ms_errf(MS_EINVAL, "%s: frame %lld < 0", n->name, f);
    }
    *state = s;
    return MS_OK;
}

typedef struct hu_rows_job {
    const dcm_native_view *v;
    float *hu, *mask;
} hu_rows_job;

/* Rows [b, e) of hu_native's two outputs. */
static void hu_rows(void *arg, int64_t b, int64_t e) {
    const hu_rows_job *j = arg;
    const uint64_t w = j->v->cols;
    dcm_native_view_hu(j->v, (uint32_t)b, (uint32_t)e, j->hu + (uint64_t)b * w);
    fill_f32(j->mask + (uint64_t)b * w, (uint64_t)(e - b) * w, 1.f);
}

/* One native 16-bit grey file whose size needs no resize (the usual CT):
 * its HU are written straight into the output, without the decoded image
 * of decode_all and its copy. Returns 0, having done nothing, for any other
 * file, or one that does not parse (the general path then reports it). */
static int hu_native(kn_ctx *ctx, const hu_state *s, const rt_str *file, rt_tensor **out,
                     ms_status *st_out) {
    dcm_limits lim;
    dcm_limits_default(&lim);
    lim.budget = ctx ? ctx->budget : NULL;
    dcm_dataset *ds = NULL;
    dcm_info info;
    dcm_native_view v;
    ms_err_clear();
    if (dcm_parse(file->data, (size_t)file->len, &lim, &ds) != MS_OK ||
        dcm_read_info(ds, &info) != MS_OK || s->frame >= (int64_t)info.frames ||
        !dcm_native_view_of(ds, &info, &lim, (uint32_t)s->frame, &v) ||
        (s->size[0] && ((int64_t)v.rows != s->size[0] || (int64_t)v.cols != s->size[1]))) {
        dcm_dataset_free(ds);
        ms_err_clear();
        return 0;
    }
    /* Counted as decode_all counts a decoded file. */
    dcm_ops_count(1, (uint64_t)file->len, info.frames);
    ms_status st = dcm_guard_check(&s->guard, 0, &info, v.rows, v.cols);
    rt_shape sh = rt_shape_make(4, (int64_t[]){1, v.rows, v.cols, 1});
    if (st == MS_OK && (st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0])) == MS_OK &&
        (st = kn_ctx_output(ctx, 1, RT_DT_FLOAT, &sh, &out[1])) == MS_OK) {
        hu_rows_job j = {&v, rt_tensor_f32(out[0]), rt_tensor_f32(out[1])};
        /* Rows split over the pool when the image is large enough to pay. */
        if (ctx != NULL && ctx->nthreads > 1 && (int64_t)v.rows * v.cols >= KN_PAR_MIN_VALUES)
            kn_ctx_parallel_for(ctx, v.rows, 16, hu_rows, &j);
        else
            hu_rows(&j, 0, v.rows);
    }
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        rt_tensor_unref(out[1]);
        out[0] = out[1] = NULL;
    }
    dcm_dataset_free(ds);
    *st_out = st;
    return 1;
}

static ms_status hu_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    hu_state dflt = {0};
    const hu_state *s = state ? state : &dflt;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_STRING)
        return ms_errf(MS_EINVAL, "%s: input must be DT_STRING, got %s", n->name,
                       rt_dtype_name(x->dtype));
    int64_t nf = x->nelem;
    ms_status nst;
    if (nf == 1 && hu_native(ctx, s, rt_tensor_strs(x), out, &nst)) return nst;
    dcm_image **imgs = NULL;
    uint64_t held = 0;
    /* Outputs: hu (C floats per pixel) and mask (one); C is not known yet. */
    ms_status st = decode_all(ctx, rt_tensor_strs(x), nf, s->frame, 0, s->size,
                              2 * sizeof(float), &imgs, &held);
    if (st != MS_OK) return st;
    if ((st = hu_guard(s, imgs, nf)) != MS_OK) {
        free_imgs(ctx, imgs, nf, held);
        return st;
    }
    uint32_t H = 0, W = 0, C = 1;
    for (int64_t i = 0; i < nf; i++) {
        if (imgs[i]->rows > H) H = imgs[i]->rows;
        if (imgs[i]->cols > W) W = imgs[i]->cols;
        if (imgs[i]->samples > C) C = imgs[i]->samples;
    }
    if (s->size[0]) {
        H = (uint32_t)s->size[0];
        W = (uint32_t)s->size[1];
    }
    rt_shape sh = rt_shape_make(4, (int64_t[]){nf, H, W, C});
    rt_shape shm = rt_shape_make(4, (int64_t[]){nf, H, W, 1});
    float *tmp = NULL;
    if ((st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &sh, &out[0])) != MS_OK) goto fail;
    if ((st = kn_ctx_output(ctx, 1, RT_DT_FLOAT, &shm, &out[1])) != MS_OK) goto fail;
    float *hu = rt_tensor_f32(out[0]), *mask = rt_tensor_f32(out[1]);
    const uint64_t plane = (uint64_t)H * W;
    for (int64_t i = 0; i < nf; i++) {
        const dcm_image *im = imgs[i];
        const uint64_t fs = (uint64_t)im->rows * im->cols * im->samples;
        const float *src = im->data + (uint64_t)s->frame * fs;
        uint32_t h = im->rows, w = im->cols, c = im->samples;
        if (s->size[0] && (h != H || w != W)) {
            float *r = realloc(tmp, (size_t)plane * c * sizeof(float));
            if (r == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory resizing dicom[%lld]", (long long)i);
                goto fail;
            }
            tmp = r;
            dcm_resize_bilinear(src, h, w, c, tmp, H, W);
            src = tmp;
            h = H;
            w = W;
        }
        float *dst = hu + (uint64_t)i * plane * C;
        float *dm = mask + (uint64_t)i * plane;
        if (C == 1 && c == 1 && h == H && w == W) {
            /* Grey, no padding: one copy, the mask all ones. */
            memcpy(dst, src, (size_t)plane * sizeof(float));
            fill_f32(dm, plane, 1.f);
            continue;
        }
        if (C == 1 && c == 1) {
            /* Grey: whole rows, then the padding. */
            for (uint32_t y = 0; y < H; y++) {
                float *row = dst + (uint64_t)y * W, *mrow = dm + (uint64_t)y * W;
                const uint32_t in_w = y < h ? (w < W ? w : W) : 0;
                if (in_w) memcpy(row, src + (uint64_t)y * w, (size_t)in_w * sizeof(float));
                for (uint32_t xx = 0; xx < in_w; xx++)
                    mrow[xx] = 1.f;
                for (uint32_t xx = in_w; xx < W; xx++) {
                    row[xx] = s->pad;
                    mrow[xx] = 0.f;
                }
            }
            continue;
        }
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t xx = 0; xx < W; xx++) {
                uint64_t o = (uint64_t)y * W + xx;
                int inside = y < h && xx < w;
                dm[o] = inside ? 1.f : 0.f;
                for (uint32_t k = 0; k < C; k++)
                    dst[o * C + k] =
                        inside ? src[((uint64_t)y * w + xx) * c + (c == 1 ? 0 : k)] : s->pad;
            }
    }
    free(tmp);
    free_imgs(ctx, imgs, nf, held);
    return MS_OK;
fail:
    free(tmp);
    free_imgs(ctx, imgs, nf, held);
    rt_tensor_unref(out[0]);
    rt_tensor_unref(out[1]);
    out[0] = out[1] = NULL;
    return st;
}

/* ---- IO>DecodeDICOMImage (TensorFlow I/O) ---- */

typedef struct tfio_state {
    rt_dtype dtype;
    int strict;
    int scale_auto;
} tfio_state;

static ms_status tfio_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    tfio_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    s->dtype = kn_attr_type(n, "dtype", RT_DT_UINT16);
    switch (s->dtype) {
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32:
    case RT_DT_UINT64:
    case RT_DT_FLOAT:
    case RT_DT_DOUBLE:
        break;
    default:
        free(s);
        return ms_errf(MS_EINVAL, "%s: dtype %s not supported by DecodeDICOMImage", n->name,
                       rt_dtype_name(kn_attr_type(n, "dtype", RT_DT_UINT16)));
    }
    s->strict = kn_attr_s_eq(n, "on_error", "strict", "skip");
    if (!s->strict && !kn_attr_s_eq(n, "on_error", "skip", "skip") &&
        !kn_attr_s_eq(n, "on_error", "lossy", "skip")) {
        free(s);
        return ms_errf(MS_EINVAL, "%s: on_error must be strict, skip or lossy", n->name);
    }
    s->scale_auto = kn_attr_s_eq(n, "scale", "auto", "preserve");
    if (!s->scale_auto && !kn_attr_s_eq(n, "scale", "preserve", "preserve")) {
        free(s);
        return ms_errf(MS_EINVAL, "%s: scale must be preserve or auto", n->name);
    }
    (void)kn_attr_b(n, "color_dim", 0);
    *state = s;
    return MS_OK;
}

static double dtype_max(rt_dtype dt) {
    switch (dt) {
    case RT_DT_UINT8:
        return 255.0;
    case RT_DT_UINT16:
        return 65535.0;
    case RT_DT_UINT32:
        return 4294967295.0;
    case RT_DT_UINT64:
        return 18446744073709551615.0;
    default:
        return 1.0;
    }
}

static ms_status tfio_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    tfio_state dflt = {.dtype = RT_DT_UINT16};
    const tfio_state *s = state ? state : &dflt;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_STRING || x->nelem != 1)
        return ms_errf(MS_EINVAL, "%s: contents must be one DT_STRING", n->name);
    dcm_image **imgs = NULL;
    uint64_t held = 0;
    ms_status st = decode_all(ctx, rt_tensor_strs(x), 1, 0, 1, NULL, rt_dtype_size(s->dtype),
                              &imgs, &held);
    if (st != MS_OK) {
        /* A request over its memory budget is refused even when lossy. */
        if (s->strict || st == MS_ENOMEM) return st;
        rt_shape e = rt_shape_make(4, (int64_t[]){0, 0, 0, 0});
        return kn_ctx_output(ctx, 0, s->dtype, &e, &out[0]);
    }
    const dcm_image *im = imgs[0];
    rt_shape sh = rt_shape_make(4, (int64_t[]){im->frames, im->rows, im->cols, im->samples});
    if ((st = kn_ctx_output(ctx, 0, s->dtype, &sh, &out[0])) != MS_OK) {
        free_imgs(ctx, imgs, 1, held);
        return st;
    }
    uint64_t cnt = (uint64_t)im->frames * im->rows * im->cols * im->samples;
    double scale = 1.0, mx = dtype_max(s->dtype);
    if (s->scale_auto) {
        uint16_t bs = im->info.bits_stored ? im->info.bits_stored : 16;
        double smax = bs >= 64 ? 18446744073709551615.0 : ldexp(1.0, bs) - 1.0;
        scale = mx / smax;
    }
    void *d = out[0]->data;
    for (uint64_t i = 0; i < cnt; i++) {
        double v = (double)im->data[i] * scale;
        if (s->dtype == RT_DT_FLOAT) {
            ((float *)d)[i] = (float)v;
            continue;
        }
        if (s->dtype == RT_DT_DOUBLE) {
            ((double *)d)[i] = v;
            continue;
        }
        v = v < 0 ? 0 : v > mx ? mx : nearbyint(v);
        switch (s->dtype) {
        case RT_DT_UINT8:
            ((uint8_t *)d)[i] = (uint8_t)v;
            break;
        case RT_DT_UINT16:
            ((uint16_t *)d)[i] = (uint16_t)v;
            break;
        case RT_DT_UINT32:
            ((uint32_t *)d)[i] = (uint32_t)v;
            break;
        default:
            ((uint64_t *)d)[i] = v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
            break;
        }
    }
    free_imgs(ctx, imgs, 1, held);
    return MS_OK;
}

const kn_kernel dcm_ops_kernels[] = {
    {.op = "DcmDecodeHU", .prepare = hu_prepare, .compute = hu_compute, .release = free},
    {.op = "DcmDecodeWindow",
     .prepare = dcm_fused_prepare,
     .compute = dcm_fused_compute,
     .release = free},
    {.op = "_DcmDecodeRaw",
     .prepare = dcm_fused_prepare,
     .compute = dcm_raw_compute,
     .release = free},
    {.op = "DcmDecodeVolume",
     .prepare = dcm_volume_prepare,
     .compute = dcm_volume_compute,
     .release = free},
    {.op = "DcmEncodeSeg",
     .prepare = dcm_seg_prepare,
     .compute = dcm_seg_compute,
     .release = dcm_seg_release},
    {.op = "_DcmResampleBack",
     .prepare = dcm_resample_back_prepare,
     .compute = dcm_resample_back_compute,
     .release = free},
    {.op = "IO>DecodeDICOMImage",
     .prepare = tfio_prepare,
     .compute = tfio_compute,
     .release = free},
    {.op = NULL},
};
