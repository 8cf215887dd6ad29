/* kn_cpu_space.c - CPU kernels that move blocks of space into the batch and
 * back: SpaceToBatchND and BatchToSpaceND (TF1 exports of dilated
 * convolutions, DeepLab-style models), any number of block dims, plain
 * dtypes.
 *
 * As TensorFlow's documentation defines them: SpaceToBatchND pads the M
 * block dims of input [batch, s1..sM, rest...] with paddings [M, 2], then
 * output[(o1 * b2 + o2 ... ) * batch + n, j1..jM, rest] = padded[n, j1 * b1
 * + o1, ..., rest] for block offsets o_i in [0, b_i) (padding reads zero);
 * BatchToSpaceND is its inverse followed by cutting crops [M, 2]. A padded
 * size not divisible by its block, a batch not divisible by prod(block) or
 * crops larger than the size are INVALID_ARGUMENT. */
#include <stdint.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

static ms_status space_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    int to_batch = strcmp(node->op, "SpaceToBatchND") == 0;
    const rt_tensor *x = in[0];
    const char *padname = to_batch ? "paddings" : "crops";
    if (!rt_dtype_is_pod(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    int64_t b[RT_MAX_RANK], pad[2 * RT_MAX_RANK];
    int m, np;
    if ((st = kn__read_ints(node, in[1], "block_shape", b, RT_MAX_RANK, &m)) != MS_OK ||
        (st = kn__read_ints(node, in[2], padname, pad, 2 * RT_MAX_RANK, &np)) != MS_OK)
        return st;
    if (m < 1 || np != 2 * m || x->shape.rank < m + 1)
        return KN_EINVAL(node,
                         "block_shape of %d entries needs %s of shape [%d, 2] and an input "
                         "of rank > %d, got %d entries and input %s",
                         m, padname, m, m, np, kn__shp(&x->shape));
    int64_t prodb = 1;
    for (int i = 0; i < m; i++) {
        if (b[i] < 1)
            return KN_EINVAL(node, "block_shape[%d] = %lld must be >= 1", i, (long long)b[i]);
        if (pad[2 * i] < 0 || pad[2 * i + 1] < 0)
            return KN_EINVAL(node, "%s must be non-negative, got [%lld, %lld] for dim %d", padname,
                             (long long)pad[2 * i], (long long)pad[2 * i + 1], i + 1);
        prodb *= b[i];
    }
    rt_shape os = x->shape;
    int64_t nb; /* the space-side batch */
    if (to_batch) {
        nb = x->shape.dim[0];
        os.dim[0] = nb * prodb;
        for (int i = 0; i < m; i++) {
            int64_t p = x->shape.dim[1 + i] + pad[2 * i] + pad[2 * i + 1];
            if (p % b[i] != 0)
                return KN_EINVAL(node, "padded size %lld of dim %d is not divisible by block %lld",
                                 (long long)p, i + 1, (long long)b[i]);
            os.dim[1 + i] = p / b[i];
        }
    } else {
        if (x->shape.dim[0] % prodb != 0)
            return KN_EINVAL(node, "batch %lld is not divisible by the block size product %lld",
                             (long long)x->shape.dim[0], (long long)prodb);
        nb = x->shape.dim[0] / prodb;
        os.dim[0] = nb;
        for (int i = 0; i < m; i++) {
            int64_t full = x->shape.dim[1 + i] * b[i];
            if (pad[2 * i] + pad[2 * i + 1] > full)
                return KN_EINVAL(node, "crops [%lld, %lld] exceed the size %lld of dim %d",
                                 (long long)pad[2 * i], (long long)pad[2 * i + 1], (long long)full,
                                 i + 1);
            os.dim[1 + i] = full - pad[2 * i] - pad[2 * i + 1];
        }
    }
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    if (out[0]->nelem == 0) return MS_OK;
    /* walk the space side [nb, sp1..spM] (padded for SpaceToBatchND, the
     * output for BatchToSpaceND); copy `inner` elements per position */
    const rt_shape *bs = to_batch ? &os : &x->shape; /* batch-side shape */
    int64_t sp[RT_MAX_RANK], inner = 1, total = nb;
    for (int i = 0; i < m; i++) {
        sp[i] = to_batch ? bs->dim[1 + i] * b[i] : os.dim[1 + i];
        total *= sp[i];
    }
    for (int d = m + 1; d < x->shape.rank; d++) inner *= x->shape.dim[d];
    size_t es = rt_dtype_size(x->dtype), row = (size_t)inner * es;
    const uint8_t *src = x->data;
    uint8_t *dst = out[0]->data;
    for (int64_t e = 0; e < total; e++) {
        int64_t rem = e, pos[RT_MAX_RANK];
        for (int i = m - 1; i >= 0; i--) {
            pos[i] = rem % sp[i];
            rem /= sp[i];
        }
        int64_t n = rem, boff = 0, cell[RT_MAX_RANK], sflat = n;
        int inside = 1;
        for (int i = 0; i < m; i++) {
            /* the padded / uncropped coordinate: its block offset and cell */
            int64_t u = to_batch ? pos[i] : pos[i] + pad[2 * i];
            boff = boff * b[i] + u % b[i];
            cell[i] = u / b[i];
            int64_t xi = to_batch ? u - pad[2 * i] : pos[i];
            int64_t S = to_batch ? x->shape.dim[1 + i] : os.dim[1 + i];
            if (xi < 0 || xi >= S) inside = 0;
            sflat = sflat * S + (inside ? xi : 0);
        }
        int64_t bflat = boff * nb + n;
        for (int i = 0; i < m; i++) bflat = bflat * bs->dim[1 + i] + cell[i];
        if (to_batch) {
            if (inside)
                memcpy(dst + (size_t)bflat * row, src + (size_t)sflat * row, row);
            else
                memset(dst + (size_t)bflat * row, 0, row);
        } else {
            memcpy(dst + (size_t)sflat * row, src + (size_t)bflat * row, row);
        }
    }
    return MS_OK;
}

/* ExtractImagePatches (NHWC): out[n, r, c, (i * kc + j) * C + ch] =
 * x[n, r * sr + i * rr - pad_top, c * sc + j * rc - pad_left, ch], zero
 * outside; ksizes / strides / rates are [1, h, w, 1]; padding SAME / VALID
 * as for convolutions. */
static ms_status patches_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (!rt_dtype_is_pod(x->dtype))
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    if (x->shape.rank != 4) return KN_EINVAL(node, "input must be 4-D, got %s", kn__shp(&x->shape));
    int64_t kh, kw, sh, sw, rh, rw, ep[4];
    int padding;
    if ((st = kn__attr_hw(node, "ksizes", 0, 0, &kh, &kw)) != MS_OK ||
        (st = kn__attr_hw(node, "strides", 0, 1, &sh, &sw)) != MS_OK ||
        (st = kn__attr_hw(node, "rates", 0, 1, &rh, &rw)) != MS_OK ||
        (st = kn__parse_padding(node, 0, &padding, ep)) != MS_OK)
        return st;
    if (padding == KN_PAD_EXPLICIT) return KN_EINVAL(node, "padding must be SAME or VALID");
    if (kh < 1 || kw < 1) return KN_EINVAL(node, "ksizes must be >= 1");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    int64_t oh, ow, pt, pl;
    if ((st = kn__window_dim(node, "rows", H, kh, rh, sh, padding, 0, 0, &oh, &pt)) != MS_OK ||
        (st = kn__window_dim(node, "cols", W, kw, rw, sw, padding, 0, 0, &ow, &pl)) != MS_OK)
        return st;
    rt_shape os = {.rank = 4, .dim = {N, oh, ow, kh * kw * C}};
    if ((st = kn__output(ctx, node, 0, x->dtype, &os, &out[0])) != MS_OK) return st;
    size_t es = rt_dtype_size(x->dtype), cb = (size_t)C * es;
    const uint8_t *src = x->data;
    uint8_t *dst = out[0]->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t r = 0; r < oh; r++)
            for (int64_t c = 0; c < ow; c++)
                for (int64_t i = 0; i < kh; i++)
                    for (int64_t j = 0; j < kw; j++, dst += cb) {
                        int64_t y = r * sh + i * rh - pt, xx = c * sw + j * rw - pl;
                        if (y < 0 || y >= H || xx < 0 || xx >= W)
                            memset(dst, 0, cb);
                        else
                            memcpy(dst, src + (size_t)(((n * H + y) * W + xx) * C) * es, cb);
                    }
    return MS_OK;
}

/* clang-format off */
const kn_kernel kn_cpu_space_kernels[] = {
    {.op = "ExtractImagePatches", .compute = patches_compute},
    {.op = "SpaceToBatchND", .compute = space_compute},
    {.op = "BatchToSpaceND", .compute = space_compute},
    {.op = NULL},
};
/* clang-format on */
