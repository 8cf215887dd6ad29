/* kn_cpu_nn.c - CPU kernels of the nn group: Conv2D (im2col + OpenBLAS
 * sgemm), DepthwiseConv2dNative, Conv2DBackpropInput (gemm + col2im),
 * MaxPool, MaxPoolV2, AvgPool, FusedBatchNorm{,V2,V3} (inference), ResizeBilinear,
 * ResizeNearestNeighbor, and for volumes Conv3D, MaxPool3D, AvgPool3D.
 *
 * Convolutions compute in NHWC; NCHW tensors are transposed in and out.
 * Windowed output sizes and SAME/VALID/EXPLICIT padding follow TensorFlow's
 * GetWindowedOutputSize; resize coordinate mapping follows its
 * resize_bilinear_op / resize_nearest_neighbor_op (legacy, align_corners and
 * half_pixel_centers).
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_resize.h"
#include "kn_cpu_util.h"

/* ====================================================================== */
/* shared window attributes                                               */
/* ====================================================================== */

typedef struct win_attrs {
    int nchw;
    int padding;
    int64_t kh, kw;         /* pools: window (ksize); convs: unused */
    int64_t sh, sw, dh, dw; /* strides, dilations */
    int64_t ep[4];          /* EXPLICIT: top, bottom, left, right */
} win_attrs;

static ms_status parse_format(const kn_node *n, int *nchw) {
    *nchw = 0;
    if (kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) return MS_OK;
    if (kn_attr_s_eq(n, "data_format", "NCHW", NULL)) {
        *nchw = 1;
        return MS_OK;
    }
    return KN_EINVAL(n, "data_format must be NHWC or NCHW");
}

/* strides, dilations (convs) or ksize (pools), padding, explicit_paddings. */
static ms_status parse_window(const kn_node *n, int is_pool, win_attrs *a) {
    ms_status st;
    memset(a, 0, sizeof(*a));
    if ((st = parse_format(n, &a->nchw)) != MS_OK) return st;
    if (!kn_attr_has(n, "strides")) return KN_EINVAL(n, "attr strides is missing");
    if ((st = kn__attr_hw(n, "strides", a->nchw, 1, &a->sh, &a->sw)) != MS_OK) return st;
    if (is_pool) {
        if (!kn_attr_has(n, "ksize")) return KN_EINVAL(n, "attr ksize is missing");
        if ((st = kn__attr_hw(n, "ksize", a->nchw, 1, &a->kh, &a->kw)) != MS_OK) return st;
        a->dh = a->dw = 1;
    } else if ((st = kn__attr_hw(n, "dilations", a->nchw, 1, &a->dh, &a->dw)) != MS_OK) {
        return st;
    }
    if ((st = kn__parse_padding(n, a->nchw, &a->padding, a->ep)) != MS_OK) return st;
    return MS_OK;
}

typedef struct geo {
    int64_t N, H, W, C; /* input */
    int64_t KH, KW;     /* window */
    int64_t OH, OW, OC; /* output */
    int64_t pt, pl;     /* leading pads */
} geo;

static ms_status window_geo(const kn_node *n, const win_attrs *a, geo *g) {
    ms_status st = kn__window_dim(n, "height", g->H, g->KH, a->dh, a->sh, a->padding, a->ep[0],
                                  a->ep[1], &g->OH, &g->pt);
    if (st != MS_OK) return st;
    return kn__window_dim(n, "width", g->W, g->KW, a->dw, a->sw, a->padding, a->ep[2], a->ep[3],
                          &g->OW, &g->pl);
}

/* Reads N, H, W, C of a rank-4 tensor in the given layout. */
static ms_status dims4(const kn_node *n, const char *what, const rt_tensor *t, int nchw, int64_t *N,
                       int64_t *H, int64_t *W, int64_t *C) {
    if (t->shape.rank != 4)
        return KN_EINVAL(n, "%s must be 4-D, got shape %s", what, kn__shp(&t->shape));
    const int64_t *d = t->shape.dim;
    for (int i = 0; i < 4; i++)
        if (d[i] > INT32_MAX)
            return KN_EINVAL(n, "%s shape %s: dimensions must be below 2^31", what,
                             kn__shp(&t->shape));
    *N = d[0];
    *H = nchw ? d[2] : d[1];
    *W = nchw ? d[3] : d[2];
    *C = nchw ? d[1] : d[3];
    return MS_OK;
}

static rt_shape shape4(int nchw, int64_t N, int64_t H, int64_t W, int64_t C) {
    rt_shape s = {.rank = 4};
    s.dim[0] = N;
    s.dim[1] = nchw ? C : H;
    s.dim[2] = nchw ? H : W;
    s.dim[3] = nchw ? W : C;
    return s;
}

/* [N, C, HW] <-> [N, HW, C] */
static void to_nhwc(const float *src, float *dst, int64_t N, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++)
                dst[(n * HW + p) * C + c] = src[(n * C + c) * HW + p];
}
static void to_nchw(const float *src, float *dst, int64_t N, int64_t C, int64_t HW) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < HW; p++)
            for (int64_t c = 0; c < C; c++)
                dst[(n * C + c) * HW + p] = src[(n * HW + p) * C + c];
}

static ms_status conv_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    win_attrs *a = malloc(sizeof(*a));
    if (a == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = parse_window(node, 0, a);
    if (st != MS_OK) {
        free(a);
        return st;
    }
    *state = a;
    return MS_OK;
}

static ms_status pool_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    win_attrs *a = malloc(sizeof(*a));
    if (a == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = parse_window(node, 1, a);
    if (st == MS_OK && a->padding == KN_PAD_EXPLICIT && strcmp(node->op, "MaxPool") != 0)
        st = KN_EINVAL(node, "EXPLICIT padding is only supported by MaxPool");
    if (st != MS_OK) {
        free(a);
        return st;
    }
    *state = a;
    return MS_OK;
}

/* MaxPoolV2: ksize and strides are inputs 1 and 2 (read per call); attrs
 * padding (SAME/VALID) and data_format as MaxPool's. */
static ms_status pool_v2_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    win_attrs *a = calloc(1, sizeof(*a));
    if (a == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = parse_format(node, &a->nchw);
    if (st == MS_OK) st = kn__parse_padding(node, a->nchw, &a->padding, a->ep);
    if (st == MS_OK && a->padding == KN_PAD_EXPLICIT)
        st = KN_EINVAL(node, "padding must be SAME or VALID");
    if (st != MS_OK) {
        free(a);
        return st;
    }
    a->dh = a->dw = 1;
    *state = a;
    return MS_OK;
}

/* Reads a 4-value window input of MaxPoolV2 (data-format order) into h, w. */
static ms_status v2_hw(const kn_node *n, const rt_tensor *t, const char *what, int nchw, int64_t *h,
                       int64_t *w) {
    int64_t v[4];
    int cnt;
    ms_status st = kn__read_ints(n, t, what, v, 4, &cnt);
    if (st != MS_OK) return st;
    if (cnt != 4) return KN_EINVAL(n, "%s must have 4 values, got %d", what, cnt);
    if (v[0] != 1 || v[nchw ? 1 : 3] != 1)
        return KN_EINVAL(n, "%s on the batch and channel dimensions must be 1", what);
    *h = v[nchw ? 2 : 1];
    *w = v[nchw ? 3 : 2];
    if (*h < 1 || *w < 1 || *h > INT32_MAX || *w > INT32_MAX)
        return KN_EINVAL(n, "%s must be in [1, 2^31)", what);
    return MS_OK;
}

static void free_state(void *state) {
    free(state);
}

/* ====================================================================== */
/* Conv2D                                                                 */
/* ====================================================================== */

typedef struct im2col_job {
    const geo *g;
    const win_attrs *a;
    const float *x; /* NHWC */
    float *col;     /* [pixels, KH*KW*cg] */
    int64_t p0;     /* first output pixel (flattened n, oh, ow) of the tile */
    int64_t c0, cg; /* channel range of the group: [c0, c0 + cg) */
} im2col_job;

static void im2col_rows(void *arg, int64_t b, int64_t e) {
    const im2col_job *j = arg;
    const geo *g = j->g;
    const int64_t C = g->C, cg = j->cg, kkc = g->KH * g->KW * cg;
    for (int64_t r = b; r < e; r++) {
        int64_t p = j->p0 + r;
        int64_t ow = p % g->OW, oh = (p / g->OW) % g->OH, n = p / (g->OW * g->OH);
        float *dst = j->col + r * kkc;
        for (int64_t kh = 0; kh < g->KH; kh++) {
            int64_t ih = oh * j->a->sh - g->pt + kh * j->a->dh;
            for (int64_t kw = 0; kw < g->KW; kw++, dst += cg) {
                int64_t iw = ow * j->a->sw - g->pl + kw * j->a->dw;
                if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
                    memset(dst, 0, (size_t)cg * sizeof(float));
                else
                    memcpy(dst, j->x + ((n * g->H + ih) * g->W + iw) * C + j->c0,
                           (size_t)cg * sizeof(float));
            }
        }
    }
}

/* Largest im2col buffer in floats (4 MiB: big enough for long gemm calls,
 * small enough to stay in the per-thread scratch cache). */
#define COL_MAX_FLOATS (1 << 20)

/* Scratch slots (see kn__scratch): columns, layout-converted input, output. */
enum { SCR_COL, SCR_IN, SCR_OUT };

/* y[N*OH*OW, OC] = im2col(x) * f[KH*KW*C/G, OC], all NHWC, per group: group
 * k maps input channels [k*C/G, (k+1)*C/G) to output channels
 * [k*OC/G, (k+1)*OC/G) (TensorFlow's grouped Conv2D, filter depth C/G). */
static ms_status conv_nhwc(kn_ctx *ctx, const kn_node *node, const win_attrs *a, const geo *g,
                           int64_t groups, const float *x, const float *f, float *y) {
    const int64_t cg = g->C / groups, ocg = g->OC / groups;
    const int64_t kkc = g->KH * g->KW * cg, P = g->N * g->OH * g->OW;
    if (P == 0 || g->OC == 0) return MS_OK;
    if (kkc == 0) {
        memset(y, 0, (size_t)(P * g->OC) * sizeof(float));
        return MS_OK;
    }
    if (kkc > INT32_MAX || g->OC > INT32_MAX || g->C > INT32_MAX)
        return KN_EINVAL(node, "filter too large");
    const int ldf = (int)g->OC;
    if (g->KH == 1 && g->KW == 1 && a->sh == 1 && a->sw == 1 && g->pt == 0 && g->pl == 0 &&
        g->OH == g->H && g->OW == g->W && P <= INT32_MAX) {
        /* 1x1 convolution: the input already is the column matrix. */
        for (int64_t k = 0; k < groups; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)P, (int)ocg, (int)cg, 1.0f,
                        x + k * cg, (int)g->C, f + k * ocg, ldf, 0.0f, y + k * ocg, ldf);
        return MS_OK;
    }
    int64_t tile = COL_MAX_FLOATS / kkc;
    if (tile < 1) tile = 1;
    if (tile > P) tile = P;
    float *col = kn__scratch(SCR_COL, (size_t)(tile * kkc) * sizeof(float));
    if (col == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory for im2col", node->name);
    for (int64_t p0 = 0; p0 < P; p0 += tile) {
        int64_t rows = P - p0 < tile ? P - p0 : tile;
        for (int64_t k = 0; k < groups; k++) {
            im2col_job job = {.g = g, .a = a, .x = x, .col = col, .p0 = p0, .c0 = k * cg, .cg = cg};
            kn_ctx_parallel_for(ctx, rows, 64, im2col_rows, &job);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)ocg, (int)kkc,
                        1.0f, col, (int)kkc, f + k * ocg, ldf, 0.0f, y + p0 * g->OC + k * ocg, ldf);
        }
    }
    kn__scratch_done(SCR_COL, col);
    return MS_OK;
}

static ms_status conv2d_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    const win_attrs *a = state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *f = in[1];
    if (x->dtype != RT_DT_FLOAT || f->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                        rt_dtype_name(x->dtype), rt_dtype_name(f->dtype));
    geo g = {0};
    if ((st = dims4(node, "input", x, a->nchw, &g.N, &g.H, &g.W, &g.C)) != MS_OK) return st;
    if (f->shape.rank != 4)
        return KN_EINVAL(node, "filter must be 4-D (HWIO), got %s", kn__shp(&f->shape));
    g.KH = f->shape.dim[0];
    g.KW = f->shape.dim[1];
    g.OC = f->shape.dim[3];
    /* Filter depth C/G makes a grouped convolution of G groups. */
    int64_t fd = f->shape.dim[2];
    if (fd <= 0 || g.C < fd || g.C % fd != 0 || g.OC % (g.C / fd) != 0)
        return KN_EINVAL(node,
                         "filter %s: input channels %lld must be a multiple of the filter "
                         "depth, and output channels of the group count",
                         kn__shp(&f->shape), (long long)g.C);
    int64_t groups = g.C / fd;
    if ((st = window_geo(node, a, &g)) != MS_OK) return st;
    rt_shape os = shape4(a->nchw, g.N, g.OH, g.OW, g.OC);
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (!a->nchw) return conv_nhwc(ctx, node, a, &g, groups, x->data, f->data, out[0]->data);
    float *xt = kn__scratch(SCR_IN, (size_t)x->nelem * sizeof(float));
    float *yt = kn__scratch(SCR_OUT, (size_t)out[0]->nelem * sizeof(float));
    if (xt == NULL || yt == NULL) {
        kn__scratch_done(SCR_IN, xt);
        kn__scratch_done(SCR_OUT, yt);
        return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    }
    to_nhwc(x->data, xt, g.N, g.C, g.H * g.W);
    st = conv_nhwc(ctx, node, a, &g, groups, xt, f->data, yt);
    if (st == MS_OK) to_nchw(yt, out[0]->data, g.N, g.OC, g.OH * g.OW);
    kn__scratch_done(SCR_IN, xt);
    kn__scratch_done(SCR_OUT, yt);
    return st;
}

/* ====================================================================== */
/* DepthwiseConv2dNative                                                  */
/* ====================================================================== */

typedef struct dw_job {
    const geo *g;
    const win_attrs *a;
    int64_t M; /* channel multiplier */
    const float *x, *f;
    float *y;
} dw_job;

/* Over output rows (n, oh), NHWC. */
static void dw_rows(void *arg, int64_t b, int64_t e) {
    const dw_job *j = arg;
    const geo *g = j->g;
    const int64_t C = g->C, M = j->M, OC = C * M;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->OH, oh = r % g->OH;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            float *y = j->y + ((n * g->OH + oh) * g->OW + ow) * OC;
            for (int64_t k = 0; k < OC; k++)
                y[k] = 0;
            for (int64_t kh = 0; kh < g->KH; kh++) {
                int64_t ih = oh * j->a->sh - g->pt + kh * j->a->dh;
                if (ih < 0 || ih >= g->H) continue;
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t iw = ow * j->a->sw - g->pl + kw * j->a->dw;
                    if (iw < 0 || iw >= g->W) continue;
                    const float *x = j->x + ((n * g->H + ih) * g->W + iw) * C;
                    const float *f = j->f + (kh * g->KW + kw) * OC;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t m = 0; m < M; m++)
                            y[c * M + m] += x[c] * f[c * M + m];
                }
            }
        }
    }
}

static ms_status depthwise_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    const win_attrs *a = state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *f = in[1];
    if (x->dtype != RT_DT_FLOAT || f->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                        rt_dtype_name(x->dtype), rt_dtype_name(f->dtype));
    geo g = {0};
    if ((st = dims4(node, "input", x, a->nchw, &g.N, &g.H, &g.W, &g.C)) != MS_OK) return st;
    if (f->shape.rank != 4 || f->shape.dim[2] != g.C)
        return KN_EINVAL(node, "filter %s must be [KH, KW, %lld, multiplier]", kn__shp(&f->shape),
                         (long long)g.C);
    g.KH = f->shape.dim[0];
    g.KW = f->shape.dim[1];
    int64_t M = f->shape.dim[3];
    g.OC = g.C * M;
    if ((st = window_geo(node, a, &g)) != MS_OK) return st;
    rt_shape os = shape4(a->nchw, g.N, g.OH, g.OW, g.OC);
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    dw_job job = {.g = &g, .a = a, .M = M, .x = x->data, .f = f->data, .y = out[0]->data};
    float *xt = NULL, *yt = NULL;
    if (a->nchw) {
        xt = kn__scratch(SCR_IN, (size_t)x->nelem * sizeof(float));
        yt = kn__scratch(SCR_OUT, (size_t)out[0]->nelem * sizeof(float));
        if (xt == NULL || yt == NULL) {
            kn__scratch_done(SCR_IN, xt);
            kn__scratch_done(SCR_OUT, yt);
            return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
        }
        to_nhwc(x->data, xt, g.N, g.C, g.H * g.W);
        job.x = xt;
        job.y = yt;
    }
    kn_ctx_parallel_for(ctx, g.N * g.OH, 1, dw_rows, &job);
    if (a->nchw) {
        to_nchw(yt, out[0]->data, g.N, g.OC, g.OH * g.OW);
        kn__scratch_done(SCR_IN, xt);
        kn__scratch_done(SCR_OUT, yt);
    }
    return MS_OK;
}

/* ====================================================================== */
/* Conv2DBackpropInput                                                    */
/* ====================================================================== */

/* dx (zeroed, NHWC) += col2im(dy[P, OC] * f[KKC, OC]^T). */
static ms_status backprop_nhwc(const kn_node *node, const win_attrs *a, const geo *g,
                               const float *dy, const float *f, float *dx) {
    const int64_t kkc = g->KH * g->KW * g->C, P = g->N * g->OH * g->OW;
    memset(dx, 0, (size_t)(g->N * g->H * g->W * g->C) * sizeof(float));
    if (P == 0 || kkc == 0) return MS_OK;
    if (g->OC == 0) return MS_OK;
    if (kkc > INT32_MAX || g->OC > INT32_MAX) return KN_EINVAL(node, "filter too large");
    int64_t tile = COL_MAX_FLOATS / kkc;
    if (tile < 1) tile = 1;
    if (tile > P) tile = P;
    float *col = kn__scratch(SCR_COL, (size_t)(tile * kkc) * sizeof(float));
    if (col == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory for col2im", node->name);
    for (int64_t p0 = 0; p0 < P; p0 += tile) {
        int64_t rows = P - p0 < tile ? P - p0 : tile;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)kkc, (int)g->OC, 1.0f,
                    dy + p0 * g->OC, (int)g->OC, f, (int)g->OC, 0.0f, col, (int)kkc);
        for (int64_t r = 0; r < rows; r++) {
            int64_t p = p0 + r;
            int64_t ow = p % g->OW, oh = (p / g->OW) % g->OH, n = p / (g->OW * g->OH);
            const float *src = col + r * kkc;
            for (int64_t kh = 0; kh < g->KH; kh++) {
                int64_t ih = oh * a->sh - g->pt + kh * a->dh;
                for (int64_t kw = 0; kw < g->KW; kw++, src += g->C) {
                    int64_t iw = ow * a->sw - g->pl + kw * a->dw;
                    if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) continue;
                    float *d = dx + ((n * g->H + ih) * g->W + iw) * g->C;
                    for (int64_t c = 0; c < g->C; c++)
                        d[c] += src[c];
                }
            }
        }
    }
    kn__scratch_done(SCR_COL, col);
    return MS_OK;
}

static ms_status backprop_input_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                        rt_tensor *const *in, rt_tensor **out) {
    const win_attrs *a = state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *sz = in[0], *f = in[1], *dy = in[2];
    if (f->dtype != RT_DT_FLOAT || dy->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                        rt_dtype_name(f->dtype), rt_dtype_name(dy->dtype));
    int64_t s[4];
    int cnt;
    if ((st = kn__read_ints(node, sz, "input_sizes", s, 4, &cnt)) != MS_OK) return st;
    if (cnt != 4) return KN_EINVAL(node, "input_sizes must have 4 values, got %d", cnt);
    for (int i = 0; i < 4; i++)
        if (s[i] < 0 || s[i] > INT32_MAX)
            return KN_EINVAL(node, "input_sizes values must be in [0, 2^31)");
    geo g = {0};
    rt_shape xs = {.rank = 4, .dim = {s[0], s[1], s[2], s[3]}};
    g.N = s[0];
    g.H = a->nchw ? s[2] : s[1];
    g.W = a->nchw ? s[3] : s[2];
    g.C = a->nchw ? s[1] : s[3];
    if (f->shape.rank != 4 || f->shape.dim[2] != g.C)
        return KN_EINVAL(node, "filter %s must be [KH, KW, %lld, out_channels]", kn__shp(&f->shape),
                         (long long)g.C);
    g.KH = f->shape.dim[0];
    g.KW = f->shape.dim[1];
    g.OC = f->shape.dim[3];
    if ((st = window_geo(node, a, &g)) != MS_OK) return st;
    rt_shape want = shape4(a->nchw, g.N, g.OH, g.OW, g.OC);
    if (!rt_shape_equal(&dy->shape, &want))
        return KN_EINVAL(node,
                         "out_backprop shape %s does not match the forward output %s of "
                         "input_sizes %s",
                         kn__shp(&dy->shape), kn__shp(&want), kn__shp(&xs));
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &xs, &out[0])) != MS_OK) return st;
    if (!a->nchw) return backprop_nhwc(node, a, &g, dy->data, f->data, out[0]->data);
    float *dyt = kn__scratch(SCR_IN, (size_t)dy->nelem * sizeof(float));
    float *dxt = kn__scratch(SCR_OUT, (size_t)out[0]->nelem * sizeof(float));
    if (dyt == NULL || dxt == NULL) {
        kn__scratch_done(SCR_IN, dyt);
        kn__scratch_done(SCR_OUT, dxt);
        return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    }
    to_nhwc(dy->data, dyt, g.N, g.OC, g.OH * g.OW);
    st = backprop_nhwc(node, a, &g, dyt, f->data, dxt);
    if (st == MS_OK) to_nchw(dxt, out[0]->data, g.N, g.C, g.H * g.W);
    kn__scratch_done(SCR_IN, dyt);
    kn__scratch_done(SCR_OUT, dxt);
    return st;
}

/* ====================================================================== */
/* MaxPool, AvgPool                                                       */
/* ====================================================================== */

typedef struct pool_job {
    const geo *g;
    const win_attrs *a;
    int is_max;
    int dbl;
    const void *x;
    void *y;
    int64_t xs[4], ys[4]; /* element strides of n, h, w, c */
} pool_job;

#define POOL_BODY(T)                                                                               \
    do {                                                                                           \
        const T *x = j->x;                                                                         \
        T *y = j->y;                                                                               \
        int64_t h0 = oh * a->sh - g->pt, w0 = ow * a->sw - g->pl;                                  \
        int64_t hs = h0 < 0 ? 0 : h0, he = h0 + g->KH > g->H ? g->H : h0 + g->KH;                  \
        int64_t ws = w0 < 0 ? 0 : w0, we = w0 + g->KW > g->W ? g->W : w0 + g->KW;                  \
        for (int64_t c = 0; c < g->C; c++) {                                                       \
            double acc = j->is_max ? -INFINITY : 0;                                                \
            for (int64_t ih = hs; ih < he; ih++)                                                   \
                for (int64_t iw = ws; iw < we; iw++) {                                             \
                    double v = x[n * j->xs[0] + ih * j->xs[1] + iw * j->xs[2] + c * j->xs[3]];     \
                    if (j->is_max)                                                                 \
                        acc = v > acc ? v : acc;                                                   \
                    else                                                                           \
                        acc += v;                                                                  \
                }                                                                                  \
            int64_t cnt = (he - hs) * (we - ws);                                                   \
            if (!j->is_max) acc = cnt > 0 ? acc / (double)cnt : 0;                                 \
            y[n * j->ys[0] + oh * j->ys[1] + ow * j->ys[2] + c * j->ys[3]] = (T)acc;               \
        }                                                                                          \
    } while (0)

static void pool_rows(void *arg, int64_t b, int64_t e) {
    const pool_job *j = arg;
    const geo *g = j->g;
    const win_attrs *a = j->a;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->OH, oh = r % g->OH;
        for (int64_t ow = 0; ow < g->OW; ow++) {
            if (j->dbl)
                POOL_BODY(double);
            else
                POOL_BODY(float);
        }
    }
}

/* NHWC float fast path, over output rows (n, oh): the window is clipped at
 * the borders and the inner loops run over the contiguous channels, so they
 * vectorise. Max keeps the reference's comparison (acc = v > acc ? v : acc
 * from -inf, in window order: NaN inputs are skipped, the first of equal
 * values wins), Avg its double sums divided by the count of valid elements:
 * both results are bit-identical to pool_rows'. */
typedef struct poolf_job {
    const geo *g;
    const win_attrs *a;
    const float *x;
    float *y;
} poolf_job;

/* Clipped window [s, e) of output position o along one dimension. */
#define POOL_CLIP(o, stride, pad, k, in, s, e)                                                     \
    do {                                                                                           \
        int64_t z_ = (o) * (stride) - (pad);                                                       \
        (s) = z_ < 0 ? 0 : z_;                                                                     \
        (e) = z_ + (k) > (in) ? (in) : z_ + (k);                                                   \
    } while (0)

KN_VEC_DEFINE(maxpool_nhwc_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const poolf_job *j = arg;
    const geo *g = j->g;
    const int64_t C = g->C, W = g->W;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->OH, oh = r % g->OH, hs, he;
        POOL_CLIP(oh, j->a->sh, g->pt, g->KH, g->H, hs, he);
        const float *xn = j->x + n * g->H * W * C;
        float *y = j->y + r * g->OW * C;
        for (int64_t ow = 0; ow < g->OW; ow++, y += C) {
            int64_t ws, we;
            POOL_CLIP(ow, j->a->sw, g->pl, g->KW, W, ws, we);
            /* Blocks of 16 channels kept in registers over the window. */
            int64_t c0 = 0;
            for (; c0 + 16 <= C; c0 += 16) {
                float m[16];
                for (int k = 0; k < 16; k++)
                    m[k] = -INFINITY;
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) {
                        const float *xp = xn + (ih * W + iw) * C + c0;
                        for (int k = 0; k < 16; k++)
                            m[k] = xp[k] > m[k] ? xp[k] : m[k];
                    }
                for (int k = 0; k < 16; k++)
                    y[c0 + k] = m[k];
            }
            if (c0 == C) continue;
            for (int64_t c = c0; c < C; c++)
                y[c] = -INFINITY;
            for (int64_t ih = hs; ih < he; ih++)
                for (int64_t iw = ws; iw < we; iw++) {
                    const float *xp = xn + (ih * W + iw) * C;
                    for (int64_t c = c0; c < C; c++)
                        y[c] = xp[c] > y[c] ? xp[c] : y[c];
                }
        }
    }
})

#define AVG_CB 256 /* channels summed at a time (a stack block of doubles) */

KN_VEC_DEFINE(avgpool_nhwc_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const poolf_job *j = arg;
    const geo *g = j->g;
    const int64_t C = g->C, W = g->W;
    double acc[AVG_CB];
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->OH, oh = r % g->OH, hs, he;
        POOL_CLIP(oh, j->a->sh, g->pt, g->KH, g->H, hs, he);
        const float *xn = j->x + n * g->H * W * C;
        float *y = j->y + r * g->OW * C;
        for (int64_t ow = 0; ow < g->OW; ow++, y += C) {
            int64_t ws, we;
            POOL_CLIP(ow, j->a->sw, g->pl, g->KW, W, ws, we);
            int64_t cnt = (he - hs) * (we - ws);
            double dc = (double)cnt;
            for (int64_t c0 = 0; c0 < C; c0 += AVG_CB) {
                int64_t cb = C - c0 < AVG_CB ? C - c0 : AVG_CB;
                for (int64_t c = 0; c < cb; c++)
                    acc[c] = 0;
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) {
                        const float *xp = xn + (ih * W + iw) * C + c0;
                        for (int64_t c = 0; c < cb; c++)
                            acc[c] += (double)xp[c];
                    }
                if (cnt > 0)
                    for (int64_t c = 0; c < cb; c++)
                        y[c0 + c] = (float)(acc[c] / dc);
                else
                    for (int64_t c = 0; c < cb; c++)
                        y[c0 + c] = 0;
            }
        }
    }
})

/* NCHW float fast path, over output rows (n, c, oh): for each window row
 * and column offset kw, the outputs whose column ow*sw - pl + kw lies in
 * the input are updated in one loop over ow (contiguous loads for stride 1,
 * stride 2 specialised). For every output the window elements are visited
 * in the reference's order (ih, then iw ascending), so results are
 * bit-identical to pool_rows' as in the NHWC path. */

/* Outputs [lo, hi) whose column ow * sw - pl + kw is inside [0, W). */
#define POOL_OW_RANGE(kw, sw, pl, W, OW, lo, hi)                                                   \
    do {                                                                                           \
        int64_t a_ = (pl) - (kw), b_ = (W)-1 + (pl) - (kw);                                        \
        (lo) = a_ <= 0 ? 0 : (a_ + (sw)-1) / (sw);                                                 \
        (hi) = b_ < 0 ? 0 : b_ / (sw) + 1;                                                         \
        if ((hi) > (OW)) (hi) = (OW);                                                              \
    } while (0)

/* STMT with v = src[base + ow * sw], q = ow - o0 for ow in [lo, hi); sw 1,
 * 2 or any. */
#define POOL_NCHW_SWEEP(sw, lo, hi, o0, src, base, STMT)                                           \
    do {                                                                                           \
        if ((sw) == 1) {                                                                           \
            for (int64_t ow = (lo); ow < (hi); ow++) {                                             \
                float v = (src)[(base) + ow];                                                      \
                int64_t q = ow - (o0);                                                             \
                STMT;                                                                              \
            }                                                                                      \
        } else if ((sw) == 2) {                                                                    \
            for (int64_t ow = (lo); ow < (hi); ow++) {                                             \
                float v = (src)[(base) + 2 * ow];                                                  \
                int64_t q = ow - (o0);                                                             \
                STMT;                                                                              \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t ow = (lo); ow < (hi); ow++) {                                             \
                float v = (src)[(base) + ow * (sw)];                                               \
                int64_t q = ow - (o0);                                                             \
                STMT;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

KN_VEC_DEFINE(maxpool_nchw_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const poolf_job *j = arg;
    const geo *g = j->g;
    const int64_t W = g->W, OW = g->OW, sw = j->a->sw;
    for (int64_t r = b; r < e; r++) {
        int64_t nc = r / g->OH, oh = r % g->OH, hs, he;
        POOL_CLIP(oh, j->a->sh, g->pt, g->KH, g->H, hs, he);
        const float *xp = j->x + nc * g->H * W;
        float *y = j->y + r * OW;
        for (int64_t ow = 0; ow < OW; ow++)
            y[ow] = -INFINITY;
        for (int64_t ih = hs; ih < he; ih++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                int64_t lo, hi;
                POOL_OW_RANGE(kw, sw, g->pl, W, OW, lo, hi);
                POOL_NCHW_SWEEP(sw, lo, hi, 0, xp, ih * W - g->pl + kw, y[q] = v > y[q] ? v : y[q]);
            }
    }
})

KN_VEC_DEFINE(avgpool_nchw_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const poolf_job *j = arg;
    const geo *g = j->g;
    const int64_t W = g->W, OW = g->OW, sw = j->a->sw;
    double acc[AVG_CB];
    for (int64_t r = b; r < e; r++) {
        int64_t nc = r / g->OH, oh = r % g->OH, hs, he;
        POOL_CLIP(oh, j->a->sh, g->pt, g->KH, g->H, hs, he);
        const float *xp = j->x + nc * g->H * W;
        float *y = j->y + r * OW;
        for (int64_t o0 = 0; o0 < OW; o0 += AVG_CB) {
            int64_t o1 = OW - o0 < AVG_CB ? OW : o0 + AVG_CB;
            for (int64_t q = 0; q < o1 - o0; q++)
                acc[q] = 0;
            for (int64_t ih = hs; ih < he; ih++)
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    int64_t lo, hi;
                    POOL_OW_RANGE(kw, sw, g->pl, W, o1, lo, hi);
                    if (lo < o0) lo = o0;
                    POOL_NCHW_SWEEP(sw, lo, hi, o0, xp, ih * W - g->pl + kw, acc[q] += (double)v);
                }
            for (int64_t ow = o0; ow < o1; ow++) {
                int64_t ws, we;
                POOL_CLIP(ow, sw, g->pl, g->KW, W, ws, we);
                int64_t cnt = (he - hs) * (we - ws);
                y[ow] = cnt > 0 ? (float)(acc[ow - o0] / (double)cnt) : 0;
            }
        }
    }
})

static void layout_strides(int nchw, int64_t H, int64_t W, int64_t C, int64_t *s) {
    if (nchw) {
        s[0] = C * H * W;
        s[1] = W;
        s[2] = 1;
        s[3] = H * W;
    } else {
        s[0] = H * W * C;
        s[1] = W * C;
        s[2] = C;
        s[3] = 1;
    }
}

static ms_status pool_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    const win_attrs *a = state;
    int v2 = strcmp(node->op, "MaxPoolV2") == 0;
    ms_status st = kn__need_inputs(node, in, v2 ? 3 : 1);
    if (st != MS_OK) return st;
    win_attrs a2;
    if (v2) {
        a2 = *a;
        if ((st = v2_hw(node, in[1], "ksize", a2.nchw, &a2.kh, &a2.kw)) != MS_OK) return st;
        if ((st = v2_hw(node, in[2], "strides", a2.nchw, &a2.sh, &a2.sw)) != MS_OK) return st;
        a = &a2;
    }
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_FLOAT && x->dtype != RT_DT_DOUBLE)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    geo g = {0};
    if ((st = dims4(node, "input", x, a->nchw, &g.N, &g.H, &g.W, &g.C)) != MS_OK) return st;
    g.KH = a->kh;
    g.KW = a->kw;
    if ((st = window_geo(node, a, &g)) != MS_OK) return st;
    rt_shape os = shape4(a->nchw, g.N, g.OH, g.OW, g.C);
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    int is_max = v2 || strcmp(node->op, "MaxPool") == 0;
    if (x->dtype == RT_DT_FLOAT) {
        poolf_job fj = {.g = &g, .a = a, .x = x->data, .y = out[0]->data};
        if (a->nchw) {
            int64_t row = g.OW * g.KH * g.KW; /* work per output row */
            int64_t chunk = row > 0 && row < 16384 ? 16384 / row : 1;
            kn_ctx_parallel_for(ctx, g.N * g.C * g.OH, chunk,
                                is_max ? maxpool_nchw_rows : avgpool_nchw_rows, &fj);
        } else {
            int64_t row = g.OW * g.C * g.KH * g.KW;
            int64_t chunk = row > 0 && row < 16384 ? 16384 / row : 1;
            kn_ctx_parallel_for(ctx, g.N * g.OH, chunk,
                                is_max ? maxpool_nhwc_rows : avgpool_nhwc_rows, &fj);
        }
        return MS_OK;
    }
    pool_job job = {.g = &g,
                    .a = a,
                    .is_max = is_max,
                    .dbl = x->dtype == RT_DT_DOUBLE,
                    .x = x->data,
                    .y = out[0]->data};
    layout_strides(a->nchw, g.H, g.W, g.C, job.xs);
    layout_strides(a->nchw, g.OH, g.OW, g.C, job.ys);
    kn_ctx_parallel_for(ctx, g.N * g.OH, 1, pool_rows, &job);
    return MS_OK;
}

/* ====================================================================== */
/* FusedBatchNorm (inference)                                             */
/* ====================================================================== */

typedef struct bn_state {
    int nchw;
    float eps;
} bn_state;

static ms_status bn_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    bn_state *s = malloc(sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = parse_format(node, &s->nchw);
    if (st == MS_OK && kn_attr_b(node, "is_training", 1))
        st = kn__errf(MS_ENOTSUP, node,
                      "is_training=true (batch statistics) is not supported; "
                      "export the model for inference");
    if (st == MS_OK && node->nout > 6)
        st = KN_EINVAL(node, "at most 6 outputs, node has %d", node->nout);
    if (st != MS_OK) {
        free(s);
        return st;
    }
    s->eps = kn_attr_f(node, "epsilon", 0.0001f);
    *state = s;
    return MS_OK;
}

typedef struct bn_job {
    const float *x;
    float *y;
    const float *mul, *add; /* per channel: y = x * mul + add */
    int64_t C, inner;       /* NHWC: inner 1; NCHW: H*W */
} bn_job;

/* Over runs [b, e): NHWC (inner 1) rows of C channels, NCHW (n, c) planes;
 * vectorised clones (no FMA contraction: y = x * mul + add rounds twice, as
 * the plain expression). */
KN_VEC_DEFINE(bn_runs, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const bn_job *j = arg;
    const int64_t C = j->C, in = j->inner;
    if (in == 1) {
        for (int64_t r = b; r < e; r++) {
            const float *x = j->x + r * C;
            float *y = j->y + r * C;
            for (int64_t c = 0; c < C; c++)
                y[c] = x[c] * j->mul[c] + j->add[c];
        }
    } else {
        for (int64_t r = b; r < e; r++) {
            const float *x = j->x + r * in;
            float *y = j->y + r * in;
            float m = j->mul[r % C], ad = j->add[r % C];
            for (int64_t i = 0; i < in; i++)
                y[i] = x[i] * m + ad;
        }
    }
})

static ms_status bn_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                            rt_tensor **out) {
    const bn_state *s = state;
    ms_status st = kn__need_inputs(node, in, 5);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float x is supported, got %s",
                        rt_dtype_name(x->dtype));
    int64_t N = 0, H = 0, W = 0, C = 0;
    if ((st = dims4(node, "x", x, s->nchw, &N, &H, &W, &C)) != MS_OK) return st;
    static const char *const names[] = {"", "scale", "offset", "mean", "variance"};
    for (int i = 1; i < 5; i++)
        if (in[i]->dtype != RT_DT_FLOAT || in[i]->shape.rank != 1 || in[i]->shape.dim[0] != C)
            return KN_EINVAL(node, "%s must be a float vector of %lld channels, got %s %s",
                             names[i], (long long)C, rt_dtype_name(in[i]->dtype),
                             kn__shp(&in[i]->shape));
    float *coef = kn__scratch(SCR_COL, (size_t)(2 * C > 0 ? 2 * C : 1) * sizeof(float));
    if (coef == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    const float *scale = in[1]->data, *offset = in[2]->data, *mean = in[3]->data,
                *var = in[4]->data;
    for (int64_t c = 0; c < C; c++) {
        float inv = 1.0f / sqrtf(var[c] + s->eps);
        coef[c] = scale[c] * inv;
        coef[C + c] = offset[c] - mean[c] * scale[c] * inv;
    }
    st = kn__output(ctx, node, 0, RT_DT_FLOAT, &x->shape, &out[0]);
    if (st == MS_OK && x->nelem > 0) {
        bn_job job = {.x = x->data,
                      .y = out[0]->data,
                      .mul = coef,
                      .add = coef + C,
                      .C = C,
                      .inner = s->nchw ? H * W : 1};
        int64_t run = s->nchw ? H * W : C, chunk = 16384 / run;
        kn_ctx_parallel_for(ctx, x->nelem / run, chunk > 0 ? chunk : 1, bn_runs, &job);
    }
    kn__scratch_done(SCR_COL, coef);
    if (st != MS_OK) return st;
    /* batch_mean, batch_variance, reserve spaces: the population statistics
     * (what TensorFlow returns for is_training=false). */
    for (int i = 1; i < node->nout && i < 6; i++)
        out[i] = rt_tensor_ref(in[i % 2 ? 3 : 4]);
    return MS_OK;
}

/* ====================================================================== */
/* ResizeBilinear, ResizeNearestNeighbor                                  */
/* ====================================================================== */

ms_status kn__resize_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    /* A dtype none of the resize ops take is refused at load already. */
    rt_dtype t = kn_attr_type(node, "T", RT_DT_FLOAT);
    if (!kn__resize_dtype_ok(t))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(t));
    kn__resize_attrs *r = malloc(sizeof(*r));
    if (r == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    r->align_corners = kn_attr_b(node, "align_corners", 0);
    r->half_pixel = kn_attr_b(node, "half_pixel_centers", 0);
    if (r->align_corners && r->half_pixel) {
        free(r);
        return KN_EINVAL(node, "half_pixel_centers requires align_corners=false");
    }
    *state = r;
    return MS_OK;
}

float kn__resize_scale(int64_t in, int64_t out, int align) {
    return (align && out > 1) ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

ms_status kn__resize_check(const kn_node *node, const rt_tensor *x, const rt_tensor *size,
                           int64_t dims[4], int64_t out_hw[2]) {
    if (x->shape.rank != 4)
        return KN_EINVAL(node, "images must be 4-D NHWC, got %s", kn__shp(&x->shape));
    if (size->dtype != RT_DT_INT32 || size->nelem != 2 || size->shape.rank != 1)
        return KN_EINVAL(node, "size must be an int32 vector [height, width], got %s %s",
                         rt_dtype_name(size->dtype), kn__shp(&size->shape));
    const int32_t *sz = size->data;
    for (int i = 0; i < 4; i++)
        dims[i] = x->shape.dim[i];
    out_hw[0] = sz[0];
    out_hw[1] = sz[1];
    if (out_hw[0] <= 0 || out_hw[1] <= 0)
        return KN_EINVAL(node, "size must be positive, got [%lld, %lld]", (long long)out_hw[0],
                         (long long)out_hw[1]);
    /* As TensorFlow's ImageResizerState: empty images are refused even in an
     * empty batch. */
    if (dims[3] <= 0 || dims[1] <= 0 || dims[2] <= 0 || dims[1] > INT32_MAX || dims[2] > INT32_MAX)
        return KN_EINVAL(node,
                         "images %s must have non-zero height, width and channels below "
                         "2^31",
                         kn__shp(&x->shape));
    if (!kn__resize_dtype_ok(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    return MS_OK;
}

typedef struct interp {
    int64_t lo, hi;
    float lerp;
} interp;

typedef struct bilinear_job {
    const rt_tensor *x;
    float *y;
    const interp *ys, *xs;
    int64_t H, W, C, OH, OW;
} bilinear_job;

static void bilinear_rows(void *arg, int64_t b, int64_t e) {
    const bilinear_job *j = arg;
    const int64_t C = j->C;
    const int isf = j->x->dtype == RT_DT_FLOAT;
    const float *xf = j->x->data;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / j->OH, oy = r % j->OH;
        const interp *iy = &j->ys[oy];
        int64_t top = (n * j->H + iy->lo) * j->W, bot = (n * j->H + iy->hi) * j->W;
        for (int64_t ox = 0; ox < j->OW; ox++) {
            const interp *ix = &j->xs[ox];
            float *y = j->y + ((n * j->OH + oy) * j->OW + ox) * C;
            for (int64_t c = 0; c < C; c++) {
                int64_t i00 = (top + ix->lo) * C + c, i01 = (top + ix->hi) * C + c;
                int64_t i10 = (bot + ix->lo) * C + c, i11 = (bot + ix->hi) * C + c;
                float tl, tr, bl, br;
                if (isf) {
                    tl = xf[i00];
                    tr = xf[i01];
                    bl = xf[i10];
                    br = xf[i11];
                } else {
                    tl = kn__load_f(j->x->data, j->x->dtype, i00);
                    tr = kn__load_f(j->x->data, j->x->dtype, i01);
                    bl = kn__load_f(j->x->data, j->x->dtype, i10);
                    br = kn__load_f(j->x->data, j->x->dtype, i11);
                }
                float t = tl + (tr - tl) * ix->lerp;
                float bo = bl + (br - bl) * ix->lerp;
                y[c] = t + (bo - t) * iy->lerp;
            }
        }
    }
}

/* float32 fast path of bilinear_rows: the same three lerps per element, in
 * loops over the contiguous channels (vectorised, bit-identical). */
KN_VEC_DEFINE(bilinear_f32_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const bilinear_job *j = arg;
    const int64_t C = j->C;
    const float *x = j->x->data;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / j->OH, oy = r % j->OH;
        const interp *iy = &j->ys[oy];
        const float ly = iy->lerp;
        const float *top = x + (n * j->H + iy->lo) * j->W * C;
        const float *bot = x + (n * j->H + iy->hi) * j->W * C;
        float *y = j->y + r * j->OW * C;
        for (int64_t ox = 0; ox < j->OW; ox++, y += C) {
            const interp *ix = &j->xs[ox];
            const float lx = ix->lerp;
            const float *tl = top + ix->lo * C, *tr = top + ix->hi * C;
            const float *bl = bot + ix->lo * C, *br = bot + ix->hi * C;
            for (int64_t c = 0; c < C; c++) {
                float t = tl[c] + (tr[c] - tl[c]) * lx;
                float bo = bl[c] + (br[c] - bl[c]) * lx;
                y[c] = t + (bo - t) * ly;
            }
        }
    }
})

static void bilinear_weights(int64_t out, int64_t in, float scale, int half_pixel, interp *w) {
    for (int64_t i = 0; i < out; i++) {
        float v = half_pixel ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
        float fl = floorf(v);
        int64_t lo = (int64_t)fl, hi = (int64_t)ceilf(v);
        w[i].lo = lo > 0 ? lo : 0;
        w[i].hi = hi < in - 1 ? hi : in - 1;
        if (w[i].lo > in - 1) w[i].lo = in - 1;
        if (w[i].hi < 0) w[i].hi = 0;
        w[i].lerp = v - fl;
    }
}

typedef struct nn_job {
    const rt_tensor *x;
    uint8_t *y;
    const int64_t *ys, *xs; /* source row / column per output row / column */
    int64_t H, W, C, OH, OW;
    size_t es;
} nn_job;

static void nearest_rows(void *arg, int64_t b, int64_t e) {
    const nn_job *j = arg;
    const size_t px = (size_t)j->C * j->es, orow = (size_t)j->OW * px;
    const uint8_t *x = j->x->data;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / j->OH, oy = r % j->OH;
        uint8_t *y = j->y + (size_t)r * orow;
        if (r > b && oy > 0 && j->ys[oy] == j->ys[oy - 1]) {
            /* Same source row as the output row above (upsampling): one copy. */
            memcpy(y, y - orow, orow);
            continue;
        }
        const uint8_t *row = x + (size_t)((n * j->H + j->ys[oy]) * j->W) * px;
        if (px == 4) {
            for (int64_t ox = 0; ox < j->OW; ox++)
                memcpy(y + (size_t)ox * 4, row + (size_t)j->xs[ox] * 4, 4);
        } else {
            for (int64_t ox = 0; ox < j->OW; ox++)
                memcpy(y + (size_t)ox * px, row + (size_t)j->xs[ox] * px, px);
        }
    }
}

static void nearest_index(int64_t out, int64_t in, float scale, const kn__resize_attrs *ra,
                          int64_t *idx) {
    for (int64_t i = 0; i < out; i++) {
        float v = ra->half_pixel ? ((float)i + 0.5f) * scale : (float)i * scale;
        int64_t s = ra->align_corners ? (int64_t)roundf(v) : (int64_t)floorf(v);
        if (s > in - 1) s = in - 1;
        if (s < 0) s = 0;
        idx[i] = s;
    }
}

static ms_status resize_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    const kn__resize_attrs *ra = state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    int bilinear = strcmp(node->op, "ResizeBilinear") == 0;
    int64_t d[4], o[2];
    if ((st = kn__resize_check(node, x, in[1], d, o)) != MS_OK) return st;
    int64_t N = d[0], H = d[1], W = d[2], C = d[3], OH = o[0], OW = o[1];
    rt_shape os = {.rank = 4, .dim = {N, OH, OW, C}};
    float hs = kn__resize_scale(H, OH, ra->align_corners);
    float wsc = kn__resize_scale(W, OW, ra->align_corners);
    if (bilinear) {
        if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
        if (out[0]->nelem == 0) return MS_OK;
        interp *w = kn__scratch(SCR_COL, (size_t)(OH + OW) * sizeof(*w));
        if (w == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
        bilinear_weights(OH, H, hs, ra->half_pixel, w);
        bilinear_weights(OW, W, wsc, ra->half_pixel, w + OH);
        bilinear_job job = {.x = x,
                            .y = out[0]->data,
                            .ys = w,
                            .xs = w + OH,
                            .H = H,
                            .W = W,
                            .C = C,
                            .OH = OH,
                            .OW = OW};
        int64_t chunk = 4096 / (OW * C) > 1 ? 4096 / (OW * C) : 1;
        kn_ctx_parallel_for(ctx, N * OH, chunk,
                            x->dtype == RT_DT_FLOAT ? bilinear_f32_rows : bilinear_rows, &job);
        kn__scratch_done(SCR_COL, w);
        return MS_OK;
    }
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    int64_t *idx = kn__scratch(SCR_COL, (size_t)(OH + OW) * sizeof(*idx));
    if (idx == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    nearest_index(OH, H, hs, ra, idx);
    nearest_index(OW, W, wsc, ra, idx + OH);
    nn_job job = {.x = x,
                  .y = out[0]->data,
                  .ys = idx,
                  .xs = idx + OH,
                  .H = H,
                  .W = W,
                  .C = C,
                  .OH = OH,
                  .OW = OW,
                  .es = rt_dtype_size(x->dtype)};
    kn_ctx_parallel_for(ctx, N * OH, 1, nearest_rows, &job);
    kn__scratch_done(SCR_COL, idx);
    return MS_OK;
}

/* ====================================================================== */
/* Conv3D, MaxPool3D, AvgPool3D (volumes: NDHWC, or NCDHW transposed)     */
/* ====================================================================== */

typedef struct win3 {
    int ncdhw;
    int same;
    int64_t k[3], s[3], d[3]; /* window (pools), strides, dilations: depth, height, width */
} win3;

/* Reads a 5-list attr (data-format order) into depth/height/width. */
static ms_status attr_dhw(const kn_node *n, const char *key, int ncdhw, int64_t dflt, int64_t *v3) {
    int64_t v[5];
    int cnt = kn_attr_ilist(n, key, v, 5);
    if (cnt < 0) {
        v3[0] = v3[1] = v3[2] = dflt;
        return MS_OK;
    }
    if (cnt != 5) return KN_EINVAL(n, "%s must have 5 values, got %d", key, cnt);
    int ci = ncdhw ? 1 : 4, sp = ncdhw ? 2 : 1;
    if (v[0] != 1 || v[ci] != 1)
        return KN_EINVAL(n, "%s on the batch and channel dimensions must be 1", key);
    for (int i = 0; i < 3; i++) {
        v3[i] = v[sp + i];
        if (v3[i] < 1 || v3[i] > INT32_MAX) return KN_EINVAL(n, "%s must be in [1, 2^31)", key);
    }
    return MS_OK;
}

static ms_status win3_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    int is_pool = strcmp(node->op, "Conv3D") != 0;
    win3 *w = calloc(1, sizeof(*w));
    if (w == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    ms_status st = MS_OK;
    if (kn_attr_s_eq(node, "data_format", "NCDHW", NULL))
        w->ncdhw = 1;
    else if (!kn_attr_s_eq(node, "data_format", "NDHWC", "NDHWC"))
        st = KN_EINVAL(node, "data_format must be NDHWC or NCDHW");
    if (st == MS_OK) {
        if (kn_attr_s_eq(node, "padding", "SAME", NULL))
            w->same = 1;
        else if (!kn_attr_s_eq(node, "padding", "VALID", NULL))
            st = KN_EINVAL(node, "padding must be SAME or VALID");
    }
    if (st == MS_OK && !kn_attr_has(node, "strides"))
        st = KN_EINVAL(node, "attr strides is missing");
    if (st == MS_OK) st = attr_dhw(node, "strides", w->ncdhw, 1, w->s);
    if (st == MS_OK && is_pool) {
        if (!kn_attr_has(node, "ksize"))
            st = KN_EINVAL(node, "attr ksize is missing");
        else
            st = attr_dhw(node, "ksize", w->ncdhw, 1, w->k);
        w->d[0] = w->d[1] = w->d[2] = 1;
    } else if (st == MS_OK) {
        st = attr_dhw(node, "dilations", w->ncdhw, 1, w->d);
    }
    if (st != MS_OK) {
        free(w);
        return st;
    }
    *state = w;
    return MS_OK;
}

typedef struct geo3 {
    int64_t N, C, OC;
    int64_t in[3], k[3], out[3], pad[3]; /* depth, height, width */
} geo3;

static ms_status geo3_window(const kn_node *node, const win3 *w, geo3 *g) {
    static const char *const names[3] = {"depth", "height", "width"};
    for (int i = 0; i < 3; i++) {
        ms_status st =
            kn__window_dim(node, names[i], g->in[i], g->k[i], w->d[i], w->s[i],
                           w->same ? KN_PAD_SAME : KN_PAD_VALID, 0, 0, &g->out[i], &g->pad[i]);
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

/* Reads N, C and D, H, W of a rank-5 tensor. */
static ms_status dims5(const kn_node *n, const rt_tensor *t, int ncdhw, geo3 *g) {
    if (t->shape.rank != 5)
        return KN_EINVAL(n, "input must be 5-D, got shape %s", kn__shp(&t->shape));
    for (int i = 0; i < 5; i++)
        if (t->shape.dim[i] > INT32_MAX)
            return KN_EINVAL(n, "input shape %s: dimensions must be below 2^31",
                             kn__shp(&t->shape));
    g->N = t->shape.dim[0];
    g->C = t->shape.dim[ncdhw ? 1 : 4];
    for (int i = 0; i < 3; i++)
        g->in[i] = t->shape.dim[(ncdhw ? 2 : 1) + i];
    return MS_OK;
}

static rt_shape shape5(int ncdhw, int64_t N, const int64_t *sp, int64_t C) {
    rt_shape s = {.rank = 5};
    s.dim[0] = N;
    for (int i = 0; i < 3; i++)
        s.dim[(ncdhw ? 2 : 1) + i] = sp[i];
    s.dim[ncdhw ? 1 : 4] = C;
    return s;
}

typedef struct vol2col_job {
    const geo3 *g;
    const win3 *w;
    const float *x; /* NDHWC */
    float *col;
    int64_t p0;
} vol2col_job;

static void vol2col_rows(void *arg, int64_t b, int64_t e) {
    const vol2col_job *j = arg;
    const geo3 *g = j->g;
    const int64_t C = g->C, kkc = g->k[0] * g->k[1] * g->k[2] * C;
    for (int64_t r = b; r < e; r++) {
        int64_t p = j->p0 + r;
        int64_t ow = p % g->out[2], oh = (p / g->out[2]) % g->out[1];
        int64_t od = (p / (g->out[2] * g->out[1])) % g->out[0];
        int64_t n = p / (g->out[2] * g->out[1] * g->out[0]);
        float *dst = j->col + r * kkc;
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t id = od * j->w->s[0] - g->pad[0] + kd * j->w->d[0];
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t ih = oh * j->w->s[1] - g->pad[1] + kh * j->w->d[1];
                for (int64_t kw = 0; kw < g->k[2]; kw++, dst += C) {
                    int64_t iw = ow * j->w->s[2] - g->pad[2] + kw * j->w->d[2];
                    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 ||
                        iw >= g->in[2])
                        memset(dst, 0, (size_t)C * sizeof(float));
                    else
                        memcpy(dst,
                               j->x + (((n * g->in[0] + id) * g->in[1] + ih) * g->in[2] + iw) * C,
                               (size_t)C * sizeof(float));
                }
            }
        }
    }
}

static ms_status conv3d_ndhwc(kn_ctx *ctx, const kn_node *node, const win3 *w, const geo3 *g,
                              const float *x, const float *f, float *y) {
    const int64_t kkc = g->k[0] * g->k[1] * g->k[2] * g->C;
    const int64_t P = g->N * g->out[0] * g->out[1] * g->out[2];
    if (P == 0 || g->OC == 0) return MS_OK;
    if (kkc == 0) {
        memset(y, 0, (size_t)(P * g->OC) * sizeof(float));
        return MS_OK;
    }
    if (kkc > INT32_MAX || g->OC > INT32_MAX) return KN_EINVAL(node, "filter too large");
    int64_t tile = COL_MAX_FLOATS / kkc;
    if (tile < 1) tile = 1;
    if (tile > P) tile = P;
    float *col = kn__scratch(SCR_COL, (size_t)(tile * kkc) * sizeof(float));
    if (col == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory for im2col", node->name);
    for (int64_t p0 = 0; p0 < P; p0 += tile) {
        int64_t rows = P - p0 < tile ? P - p0 : tile;
        vol2col_job job = {.g = g, .w = w, .x = x, .col = col, .p0 = p0};
        kn_ctx_parallel_for(ctx, rows, 64, vol2col_rows, &job);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)g->OC, (int)kkc,
                    1.0f, col, (int)kkc, f, (int)g->OC, 0.0f, y + p0 * g->OC, (int)g->OC);
    }
    kn__scratch_done(SCR_COL, col);
    return MS_OK;
}

static ms_status conv3d_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    const win3 *w = state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0], *f = in[1];
    if (x->dtype != RT_DT_FLOAT || f->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "only float is supported, got %s and %s",
                        rt_dtype_name(x->dtype), rt_dtype_name(f->dtype));
    geo3 g = {0};
    if ((st = dims5(node, x, w->ncdhw, &g)) != MS_OK) return st;
    if (f->shape.rank != 5 || f->shape.dim[3] != g.C)
        return KN_EINVAL(node, "filter %s must be [KD, KH, KW, %lld, out_channels]",
                         kn__shp(&f->shape), (long long)g.C);
    for (int i = 0; i < 3; i++)
        g.k[i] = f->shape.dim[i];
    g.OC = f->shape.dim[4];
    if ((st = geo3_window(node, w, &g)) != MS_OK) return st;
    rt_shape os = shape5(w->ncdhw, g.N, g.out, g.OC);
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (!w->ncdhw) return conv3d_ndhwc(ctx, node, w, &g, x->data, f->data, out[0]->data);
    float *xt = kn__scratch(SCR_IN, (size_t)x->nelem * sizeof(float));
    float *yt = kn__scratch(SCR_OUT, (size_t)out[0]->nelem * sizeof(float));
    if (xt == NULL || yt == NULL) {
        kn__scratch_done(SCR_IN, xt);
        kn__scratch_done(SCR_OUT, yt);
        return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    }
    to_nhwc(x->data, xt, g.N, g.C, g.in[0] * g.in[1] * g.in[2]);
    st = conv3d_ndhwc(ctx, node, w, &g, xt, f->data, yt);
    if (st == MS_OK) to_nchw(yt, out[0]->data, g.N, g.OC, g.out[0] * g.out[1] * g.out[2]);
    kn__scratch_done(SCR_IN, xt);
    kn__scratch_done(SCR_OUT, yt);
    return st;
}

typedef struct pool3_job {
    const geo3 *g;
    const win3 *w;
    int is_max;
    const float *x;
    float *y;
    int64_t xs[5], ys[5]; /* element strides of n, d, h, w, c */
} pool3_job;

static void layout5(int ncdhw, const int64_t *sp, int64_t C, int64_t *s) {
    int64_t vol = sp[0] * sp[1] * sp[2];
    if (ncdhw) {
        s[0] = C * vol;
        s[1] = sp[1] * sp[2];
        s[2] = sp[2];
        s[3] = 1;
        s[4] = vol;
    } else {
        s[0] = vol * C;
        s[1] = sp[1] * sp[2] * C;
        s[2] = sp[2] * C;
        s[3] = C;
        s[4] = 1;
    }
}

/* Over output rows (n, od, oh). */
static void pool3_rows(void *arg, int64_t b, int64_t e) {
    const pool3_job *j = arg;
    const geo3 *g = j->g;
    for (int64_t r = b; r < e; r++) {
        int64_t oh = r % g->out[1], od = (r / g->out[1]) % g->out[0];
        int64_t n = r / (g->out[1] * g->out[0]);
        int64_t o3[3] = {od, oh, 0}, lo[3], hi[3];
        for (int64_t ow = 0; ow < g->out[2]; ow++) {
            o3[2] = ow;
            for (int i = 0; i < 3; i++) {
                int64_t s0 = o3[i] * j->w->s[i] - g->pad[i];
                lo[i] = s0 < 0 ? 0 : s0;
                hi[i] = s0 + g->k[i] > g->in[i] ? g->in[i] : s0 + g->k[i];
            }
            int64_t cnt = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
            for (int64_t c = 0; c < g->C; c++) {
                double acc = j->is_max ? -INFINITY : 0;
                for (int64_t id = lo[0]; id < hi[0]; id++)
                    for (int64_t ih = lo[1]; ih < hi[1]; ih++)
                        for (int64_t iw = lo[2]; iw < hi[2]; iw++) {
                            double v = j->x[n * j->xs[0] + id * j->xs[1] + ih * j->xs[2] +
                                            iw * j->xs[3] + c * j->xs[4]];
                            if (j->is_max)
                                acc = v > acc ? v : acc;
                            else
                                acc += v;
                        }
                if (!j->is_max) acc = cnt > 0 ? acc / (double)cnt : 0;
                j->y[n * j->ys[0] + od * j->ys[1] + oh * j->ys[2] + ow * j->ys[3] + c * j->ys[4]] =
                    (float)acc;
            }
        }
    }
}

static ms_status pool3d_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    const win3 *w = state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    geo3 g = {0};
    if ((st = dims5(node, x, w->ncdhw, &g)) != MS_OK) return st;
    for (int i = 0; i < 3; i++)
        g.k[i] = w->k[i];
    if ((st = geo3_window(node, w, &g)) != MS_OK) return st;
    rt_shape os = shape5(w->ncdhw, g.N, g.out, g.C);
    if ((st = kn__output(ctx, node, 0, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    pool3_job job = {.g = &g,
                     .w = w,
                     .is_max = strcmp(node->op, "MaxPool3D") == 0,
                     .x = x->data,
                     .y = out[0]->data};
    layout5(w->ncdhw, g.in, g.C, job.xs);
    layout5(w->ncdhw, g.out, g.C, job.ys);
    kn_ctx_parallel_for(ctx, g.N * g.out[0] * g.out[1], 1, pool3_rows, &job);
    return MS_OK;
}

/* ====================================================================== */

const kn_kernel kn_cpu_nn_kernels[] = {
    {.op = "Conv2D", .prepare = conv_prepare, .compute = conv2d_compute, .release = free_state},
    {.op = "DepthwiseConv2dNative",
     .prepare = conv_prepare,
     .compute = depthwise_compute,
     .release = free_state},
    {.op = "Conv2DBackpropInput",
     .prepare = conv_prepare,
     .compute = backprop_input_compute,
     .release = free_state},
    {.op = "MaxPool", .prepare = pool_prepare, .compute = pool_compute, .release = free_state},
    {.op = "AvgPool", .prepare = pool_prepare, .compute = pool_compute, .release = free_state},
    {.op = "MaxPoolV2", .prepare = pool_v2_prepare, .compute = pool_compute, .release = free_state},
    {.op = "FusedBatchNorm", .prepare = bn_prepare, .compute = bn_compute, .release = free_state},
    {.op = "FusedBatchNormV2", .prepare = bn_prepare, .compute = bn_compute, .release = free_state},
    {.op = "FusedBatchNormV3", .prepare = bn_prepare, .compute = bn_compute, .release = free_state},
    {.op = "ResizeBilinear",
     .prepare = kn__resize_prepare,
     .compute = resize_compute,
     .release = free_state},
    {.op = "ResizeNearestNeighbor",
     .prepare = kn__resize_prepare,
     .compute = resize_compute,
     .release = free_state},
    {.op = "Conv3D", .prepare = win3_prepare, .compute = conv3d_compute, .release = free_state},
    {.op = "MaxPool3D", .prepare = win3_prepare, .compute = pool3d_compute, .release = free_state},
    {.op = "AvgPool3D", .prepare = win3_prepare, .compute = pool3d_compute, .release = free_state},
    {.op = NULL},
};
