/* rt_onnx_misc.c - smaller ONNX ops as short chains of TF ops: Swish,
 * Shrink, LpNormalization, EyeLike, SpaceToDepth, DepthToSpace, OneHot,
 * GatherND, the Hann / Hamming / Blackman windows,
 * MeanVarianceNormalization, NonZero, Compress, CenterCropPad, AffineGrid,
 * CumProd, GroupNormalization and LRN.
 *
 * They read and write ONNX order. Each checks the element types its TF ops
 * run with and refuses other types, attribute values and input forms at
 * conversion, naming them.
 */
#include <math.h>
#include <string.h>

#include "rt_onnx_ext.h"

static ms_status need_float(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, rt__ox_value **X,
                            const char **x) {
    ms_status st = rt__ox_need(cv, n, i, X, x);
    if (st != MS_OK) return st;
    if ((*X)->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "\"%s\" is %s; supported: float", (*X)->name,
                          rt_dtype_name((*X)->dt));
    return MS_OK;
}

static const char *sc(rt__ox_conv *cv, const char *h, const char *what, float x) {
    return rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/%s", h, what), x);
}

static const char *nm(rt__ox_conv *cv, const char *h, const char *what) {
    return rt__ox_printf(cv, "%s/%s", h, what);
}

/* Swish (opset 24): x * sigmoid(alpha * x). */
static ms_status op_swish(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = need_float(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    float alpha = rt__ox_attr_f(n, "alpha", 1.0f);
    const char *t = x;
    if (alpha != 1.0f)
        t = rt__tf_binary(cv, "Mul", nm(cv, h, "ax"), x, sc(cv, h, "alpha", alpha), RT_DT_FLOAT);
    t = rt__tf_unary(cv, "Sigmoid", nm(cv, h, "gate"), t, RT_DT_FLOAT);
    if (strcmp(n->op_type, "SwiGLU") != 0) {
        rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim,
                       rt__tf_binary(cv, "Mul", h, x, t, RT_DT_FLOAT));
        return MS_OK;
    }
    /* SwiGLU (28): Swish(a, alpha) * b, a and b of one shape. */
    rt__ox_value *B;
    const char *b;
    if ((st = need_float(cv, n, 1, &B, &b)) != MS_OK) return st;
    int64_t od[OX_MAXR];
    int same = B->rank == X->rank;
    for (int i = 0; same && i < X->rank; i++) {
        same = X->dim[i] < 0 || B->dim[i] < 0 || X->dim[i] == B->dim[i];
        od[i] = X->dim[i] >= 0 ? X->dim[i] : B->dim[i];
    }
    if (!same) return rt__ox_err(cv, MS_EINVAL, "a and b must have the same shape");
    t = rt__tf_binary(cv, "Mul", nm(cv, h, "swish"), x, t, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, od, rt__tf_binary(cv, "Mul", h, t, b, RT_DT_FLOAT));
    return MS_OK;
}

/* Shrink: x + bias below -lambd, x - bias above lambd, 0 between. */
static ms_status op_shrink(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = need_float(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    float l = rt__ox_attr_f(n, "lambd", 0.5f), b = rt__ox_attr_f(n, "bias", 0.0f);
    const char *lo =
        rt__tf_binary(cv, "Less", nm(cv, h, "below"), x, sc(cv, h, "neg_l", -l), RT_DT_FLOAT);
    const char *hi =
        rt__tf_binary(cv, "Greater", nm(cv, h, "above"), x, sc(cv, h, "l", l), RT_DT_FLOAT);
    const char *up =
        rt__tf_binary(cv, "AddV2", nm(cv, h, "plus"), x, sc(cv, h, "b", b), RT_DT_FLOAT);
    const char *dn =
        rt__tf_binary(cv, "Sub", nm(cv, h, "minus"), x, sc(cv, h, "b2", b), RT_DT_FLOAT);
    const char *y =
        rt__tf_select(cv, nm(cv, h, "upper"), hi, dn, sc(cv, h, "zero", 0), RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim,
                   rt__tf_select(cv, h, lo, up, y, RT_DT_FLOAT));
    return MS_OK;
}

/* LpNormalization: x / (sum |x|^p over axis)^(1/p), p 1 or 2; 0 where the
 * norm is 0 (as the operator's reference; DivNoNan). */
static ms_status op_lpnorm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = need_float(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int64_t p = rt__ox_attr_i(n, "p", 2);
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", -1), X->rank);
    if (p != 1 && p != 2) return rt__ox_err(cv, MS_ENOTSUP, "p must be 1 or 2");
    if (X->rank < 1 || axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int64_t ax = axis;
    const char *t = rt__tf_unary(cv, p == 1 ? "Abs" : "Square", nm(cv, h, "pow"), x, RT_DT_FLOAT);
    t = rt__ox_reduce(cv, "Sum", nm(cv, h, "sum"), t, RT_DT_FLOAT, &ax, 1, 1);
    if (p == 2) t = rt__tf_unary(cv, "Sqrt", nm(cv, h, "norm"), t, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim,
                   rt__tf_binary(cv, "DivNoNan", h, x, t, RT_DT_FLOAT));
    return MS_OK;
}

/* EyeLike: a constant of the input's static 2-D shape, ones on diagonal k. */
static ms_status op_eyelike(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    ms_status st = rt__ox_need(cv, n, 0, &X, NULL);
    if (st != MS_OK) return st;
    rt_dtype dt = X->dt;
    if (rt__ox_attr(n, "dtype")) dt = rt__ox_onnx_dtype((int32_t)rt__ox_attr_i(n, "dtype", 1));
    /* Other numeric types: the float constant cast (0 and 1 are exact in each). */
    int cast = dt != RT_DT_FLOAT && dt != RT_DT_INT32 && dt != RT_DT_INT64 && dt != RT_DT_BOOL;
    if (cast && !rt__ox_dtype_num(dt))
        return rt__ox_err(cv, MS_ENOTSUP, "output type %s is not supported (numeric types and bool are)",
                          rt_dtype_name(dt));
    if (X->rank != 2 || X->dim[0] < 0 || X->dim[1] < 0 ||
        X->dim[0] * X->dim[1] > ((int64_t)1 << 24))
        return rt__ox_err(cv, MS_ENOTSUP, "the input must be 2-D of static shape");
    int64_t k = rt__ox_attr_i(n, "k", 0), R = X->dim[0], C = X->dim[1], ne = R * C;
    float *f = rt__ox_alloc(cv, (size_t)(ne + 1) * sizeof(float));
    int64_t *iv = rt__ox_alloc(cv, (size_t)(ne + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            f[i * C + j] = (float)(iv[i * C + j] = j - i == k);
    const char *h = rt__ox_hint_of(n);
    const char *y = dt == RT_DT_FLOAT ? rt__tf_const_f32(cv, h, 2, X->dim, f)
                    : cast ? rt__tf_cast(cv, h, rt__tf_const_f32(cv, nm(cv, h, "eye"), 2, X->dim, f),
                                         RT_DT_FLOAT, dt)
                           : rt__tf_const_int(cv, h, dt, 2, X->dim, iv);
    rt__ox_def_out(cv, n, 0, dt, 2, X->dim, y);
    return MS_OK;
}

/* SpaceToDepth / DepthToSpace through a rank-6 Reshape, Transpose, Reshape
 * (the operator's own definition); C, H and W must be static. */
static ms_status op_space_depth(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (X->rank != 4) return rt__ox_err(cv, MS_EINVAL, "the input must be 4-D");
    int64_t b = rt__ox_attr_i(n, "blocksize", 0), N = X->dim[0], C = X->dim[1], H = X->dim[2],
            W = X->dim[3];
    if (b < 1 || b > OX_WIN_MAX) return rt__ox_err(cv, MS_EINVAL, "blocksize must be >= 1");
    if (C < 0 || H < 0 || W < 0)
        return rt__ox_err(cv, MS_ENOTSUP, "channels, height and width must be static");
    int to_depth = strcmp(n->op_type, "SpaceToDepth") == 0;
    int64_t d6[6], perm[6], od[4];
    if (to_depth) {
        if (H % b || W % b)
            return rt__ox_err(cv, MS_EINVAL, "height and width must be multiples of blocksize");
        int64_t a[6] = {N, C, H / b, b, W / b, b}, p[6] = {0, 3, 5, 1, 2, 4};
        int64_t o[4] = {N, C * b * b, H / b, W / b};
        memcpy(d6, a, sizeof d6), memcpy(perm, p, sizeof perm), memcpy(od, o, sizeof od);
    } else {
        if (C % (b * b)) return rt__ox_err(cv, MS_EINVAL, "channels must be a multiple of b*b");
        int64_t o[4] = {N, C / (b * b), H * b, W * b};
        memcpy(od, o, sizeof od);
        if (rt__ox_attr_is(n, "mode", "DCR", "DCR")) {
            int64_t a[6] = {N, b, b, C / (b * b), H, W}, p[6] = {0, 3, 4, 1, 5, 2};
            memcpy(d6, a, sizeof d6), memcpy(perm, p, sizeof perm);
        } else if (rt__ox_attr_is(n, "mode", "CRD", "DCR")) {
            int64_t a[6] = {N, C / (b * b), b, b, H, W}, p[6] = {0, 1, 4, 2, 5, 3};
            memcpy(d6, a, sizeof d6), memcpy(perm, p, sizeof perm);
        } else {
            return rt__ox_err(cv, MS_ENOTSUP, "mode must be \"DCR\" or \"CRD\"");
        }
    }
    const char *t = rt__tf_reshape(cv, nm(cv, h, "blocks"), x, X->dt, 6, d6);
    t = rt__tf_transpose(cv, nm(cv, h, "moved"), t, X->dt, 6, perm);
    rt__ox_def_out(cv, n, 0, X->dt, 4, od, rt__tf_reshape(cv, h, t, X->dt, 4, od));
    return MS_OK;
}

static int is_idx(rt_dtype dt) {
    return dt == RT_DT_INT32 || dt == RT_DT_INT64;
}

/* OneHot: TF's OneHot after indices, depth and values are brought to
 * int64 / int32 / two scalars; from opset 11 negative indices count from
 * the end. */
static ms_status op_onehot(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *I, *D, *V;
    const char *ix, *d, *v, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &I, &ix)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &D, &d)) != MS_OK ||
        (st = rt__ox_need(cv, n, 2, &V, &v)) != MS_OK)
        return st;
    rt_dtype ok[3] = {I->dt, D->dt, V->dt};
    for (int i = 0; i < 3; i++)
        if (ok[i] != RT_DT_FLOAT && !is_idx(ok[i]))
            return rt__ox_err(cv, MS_ENOTSUP, "input %d is %s; supported: float, int32, int64", i,
                              rt_dtype_name(ok[i]));
    if (V->rank != 1 || (V->dim[0] >= 0 && V->dim[0] != 2))
        return rt__ox_err(cv, MS_EINVAL, "values must hold [off, on]");
    if (D->rank > 1 || (D->rank == 1 && D->dim[0] != 1))
        return rt__ox_err(cv, MS_EINVAL, "depth must hold one value");
    int r = I->rank;
    if (r < 0 || r + 1 > OX_MAXR) return rt__ox_err(cv, MS_ENOTSUP, "indices rank unsupported");
    int64_t axis = rt__ox_attr_i(n, "axis", -1);
    if (axis < -r - 1 || axis > r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    if (axis < 0) axis += r + 1;
    /* Indices and depth as int64 (float ones truncated, as a Cast does). */
    if (I->dt != RT_DT_INT64) ix = rt__tf_cast(cv, nm(cv, h, "ix64"), ix, I->dt, RT_DT_INT64);
    if (D->dt != RT_DT_INT64) d = rt__tf_cast(cv, nm(cv, h, "depth64"), d, D->dt, RT_DT_INT64);
    if (D->rank == 1) d = rt__tf_reshape(cv, nm(cv, h, "depth_s"), d, RT_DT_INT64, 0, NULL);
    int vers11 = cv->opset >= 11;
    if (vers11) {
        const char *neg = rt__tf_binary(
            cv, "Less", nm(cv, h, "neg"), ix,
            rt__tf_const_int(cv, nm(cv, h, "z"), RT_DT_INT64, 0, NULL, &(int64_t){0}), RT_DT_INT64);
        const char *up = rt__tf_binary(cv, "AddV2", nm(cv, h, "wrapped"), ix, d, RT_DT_INT64);
        ix = rt__tf_select(cv, nm(cv, h, "ix"), neg, up, ix, RT_DT_INT64);
    }
    const char *dd = rt__tf_cast(cv, nm(cv, h, "depth32"), d, RT_DT_INT64, RT_DT_INT32);
    const char *sel[2];
    for (int i = 0; i < 2; i++) {
        Tensorflow__NodeDef *g = rt__ox_gather_node(
            cv, nm(cv, h, i ? "on" : "off"), v, V->dt,
            rt__tf_i32(cv, nm(cv, h, i ? "on_ix" : "off_ix"), i), RT_DT_INT32, 0);
        sel[i] = g->name;
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OneHot", h);
    rt__tf_input(cv, nd, ix);
    rt__tf_input(cv, nd, dd);
    rt__tf_input(cv, nd, sel[1]);
    rt__tf_input(cv, nd, sel[0]);
    rt__tf_attr_type(cv, nd, "T", V->dt);
    rt__tf_attr_type(cv, nd, "TI", RT_DT_INT64);
    rt__tf_attr_i(cv, nd, "axis", axis == r ? -1 : axis);
    int64_t od[OX_MAXR], depth = -1;
    if (D->rank >= 0 && rt__ox_is_const(D)) depth = D->iv ? D->iv[0] : D->f ? (int64_t)D->f[0] : -1;
    for (int i = 0, s = 0; i <= r; i++)
        od[i] = i == axis ? depth : I->dim[s++];
    rt__ox_def_out(cv, n, 0, V->dt, r + 1, od, nd->name);
    return MS_OK;
}

/* GatherND (batch_dims 0): TF's GatherNd, negative indices moved up by the
 * (static) sizes of the dims they index. */
/* Batch coordinates in front of the index tuples *ix of I (..., m) for
 * GatherND's batch_dims b: a constant (I's dims but the last, b) of each
 * tuple's leading b coordinates, concatenated before the tuple. The batch
 * dims must be static and the same in X and I; the rest of I's dims
 * static too, the constant holding one entry per tuple coordinate. */
static ms_status gathernd_batch(rt__ox_conv *cv, const char *h, const rt__ox_value *X,
                                const rt__ox_value *I, int b, const char **ix) {
    int q = I->rank;
    int64_t tuples = 1;
    for (int i = 0; i < q - 1; i++) {
        if (I->dim[i] < 0)
            return rt__ox_err(cv, MS_ENOTSUP, "batch_dims: the indices' dims must be static");
        if (i < b && I->dim[i] != X->dim[i])
            return rt__ox_err(cv, MS_EINVAL,
                              "batch_dims: batch dim %d is %lld in the data, %lld in the indices", i,
                              (long long)X->dim[i], (long long)I->dim[i]);
        tuples *= I->dim[i];
        if (tuples * b > ((int64_t)1 << 24))
            return rt__ox_err(cv, MS_ENOTSUP, "batch_dims: more than 2^24 index tuples");
    }
    int64_t *bc = rt__ox_alloc(cv, (size_t)(tuples * b + 1) * sizeof(int64_t)), cd[OX_MAXR];
    for (int64_t t = 0; t < tuples; t++) {
        int64_t rest = t;
        for (int i = q - 2; i >= 0; i--) {
            if (i < b) bc[t * b + i] = rest % I->dim[i];
            rest /= I->dim[i];
        }
    }
    memcpy(cd, I->dim, sizeof cd);
    cd[q - 1] = b;
    const char *bct = rt__tf_const_int(cv, nm(cv, h, "batch_ix"), RT_DT_INT64, q, cd, bc);
    Tensorflow__NodeDef *c = rt__tf_node(cv, "ConcatV2", nm(cv, h, "full_ix"));
    rt__tf_input(cv, c, bct);
    rt__tf_input(cv, c, *ix);
    rt__tf_input(cv, c, rt__tf_i32(cv, nm(cv, h, "last"), q - 1));
    rt__tf_attr_i(cv, c, "N", 2);
    rt__tf_attr_type(cv, c, "T", RT_DT_INT64);
    rt__tf_attr_type(cv, c, "Tidx", RT_DT_INT32);
    *ix = c->name;
    return MS_OK;
}

static ms_status op_gathernd(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *I;
    const char *x, *ix, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &I, &ix)) != MS_OK)
        return st;
    if (!is_idx(I->dt)) return rt__ox_err(cv, MS_EINVAL, "indices must be int32 or int64");
    if (X->dt != RT_DT_FLOAT && !is_idx(X->dt) && X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "data is %s; supported: float, int32, int64, bool",
                          rt_dtype_name(X->dt));
    int q = I->rank, r = X->rank;
    int64_t m = q >= 1 ? I->dim[q - 1] : -1, b = rt__ox_attr_i(n, "batch_dims", 0);
    if (cv->opset < 12 && rt__ox_attr(n, "batch_dims"))
        return rt__ox_err(cv, MS_EINVAL, "opset %lld: GatherND has no batch_dims before opset 12",
                          (long long)cv->opset);
    if (b < 0 || b >= q || b >= r)
        return rt__ox_err(cv, MS_EINVAL, "batch_dims %lld must be below both ranks (%d, %d)",
                          (long long)b, r, q);
    if (q < 1 || r < 1 || m < 1 || m > r - b)
        return rt__ox_err(cv, MS_ENOTSUP,
                          "the indices' last dim must be static and in 1..rank - batch_dims");
    int64_t sz[OX_MAXR];
    for (int i = 0; i < m; i++) {
        if (X->dim[b + i] < 0)
            return rt__ox_err(cv, MS_ENOTSUP, "the indexed dims of data must be static");
        sz[i] = X->dim[b + i];
    }
    if (I->dt != RT_DT_INT64) ix = rt__tf_cast(cv, nm(cv, h, "ix64"), ix, I->dt, RT_DT_INT64);
    const char *szc = rt__tf_const_int(cv, nm(cv, h, "sizes"), RT_DT_INT64, 1, &m, sz);
    const char *neg = rt__tf_binary(
        cv, "Less", nm(cv, h, "neg"), ix,
        rt__tf_const_int(cv, nm(cv, h, "z"), RT_DT_INT64, 0, NULL, &(int64_t){0}), RT_DT_INT64);
    const char *up = rt__tf_binary(cv, "AddV2", nm(cv, h, "wrapped"), ix, szc, RT_DT_INT64);
    ix = rt__tf_select(cv, nm(cv, h, "ix"), neg, up, ix, RT_DT_INT64);
    if (b > 0) {
        /* batch_dims: each index tuple gets its batch coordinates in front
         * (a constant of I's leading dims), then a plain GatherNd over
         * b + m dims. */
        if ((st = gathernd_batch(cv, h, X, I, (int)b, &ix)) != MS_OK) return st;
        m += b;
    }
    Tensorflow__NodeDef *g = rt__tf_node(cv, "GatherNd", h);
    rt__tf_input(cv, g, x);
    rt__tf_input(cv, g, ix);
    rt__tf_attr_type(cv, g, "Tparams", X->dt);
    rt__tf_attr_type(cv, g, "Tindices", RT_DT_INT64);
    int64_t od[OX_MAXR];
    int o = 0;
    for (int i = 0; i < q - 1; i++)
        od[o++] = I->dim[i];
    for (int i = (int)m; i < r; i++)
        od[o++] = X->dim[i];
    if (o > OX_MAXR) return rt__ox_err(cv, MS_ENOTSUP, "output rank too large");
    rt__ox_def_out(cv, n, 0, X->dt, o, od, g->name);
    return MS_OK;
}

/* Hann, Hamming, Blackman windows of run-time length `size`: sum of
 * a_k cos(2 pi k i / N), N = size (periodic) or size - 1, in float as the
 * operator's reference computes it. */
static ms_status op_window(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *S;
    const char *s, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &S, &s);
    if (st != MS_OK) return st;
    if (!is_idx(S->dt) || rt__ox_nelem(S) != 1)
        return rt__ox_err(cv, MS_EINVAL, "size must be one int32 or int64");
    float a[3];
    if (strcmp(n->op_type, "HannWindow") == 0)
        a[0] = 0.5f, a[1] = -0.5f, a[2] = 0;
    else if (strcmp(n->op_type, "HammingWindow") == 0)
        a[0] = 25.0f / 46.0f, a[1] = -(1.0f - 25.0f / 46.0f), a[2] = 0;
    else
        a[0] = 0.42f, a[1] = -0.5f, a[2] = 0.08f;
    if (S->dt != RT_DT_INT64) s = rt__tf_cast(cv, nm(cv, h, "size64"), s, S->dt, RT_DT_INT64);
    if (S->rank > 0) s = rt__tf_reshape(cv, nm(cv, h, "size_s"), s, RT_DT_INT64, 0, NULL);
    int64_t zero = 0, one = 1;
    Tensorflow__NodeDef *rg = rt__tf_node(cv, "Range", nm(cv, h, "i"));
    rt__tf_input(cv, rg, rt__tf_const_int(cv, nm(cv, h, "start"), RT_DT_INT64, 0, NULL, &zero));
    rt__tf_input(cv, rg, s);
    rt__tf_input(cv, rg, rt__tf_const_int(cv, nm(cv, h, "step"), RT_DT_INT64, 0, NULL, &one));
    rt__tf_attr_type(cv, rg, "Tidx", RT_DT_INT64);
    const char *i = rt__tf_cast(cv, nm(cv, h, "i_f"), rg->name, RT_DT_INT64, RT_DT_FLOAT);
    const char *N = s;
    if (rt__ox_attr_i(n, "periodic", 1) == 0)
        N = rt__tf_binary(cv, "Sub", nm(cv, h, "n_1"), s,
                          rt__tf_const_int(cv, nm(cv, h, "one"), RT_DT_INT64, 0, NULL, &one),
                          RT_DT_INT64);
    N = rt__tf_cast(cv, nm(cv, h, "n_f"), N, RT_DT_INT64, RT_DT_FLOAT);
    const char *y = sc(cv, h, "a0", a[0]);
    for (int k = 1; k <= 2; k++) {
        if (a[k] == 0) continue;
        const char *t = rt__tf_binary(
            cv, "Mul", rt__ox_printf(cv, "%s/ki%d", h, k), i,
            sc(cv, h, rt__ox_printf(cv, "w%d", k), 2.0f * k * (float)M_PI), RT_DT_FLOAT);
        t = rt__tf_binary(cv, "RealDiv", rt__ox_printf(cv, "%s/arg%d", h, k), t, N, RT_DT_FLOAT);
        t = rt__tf_unary(cv, "Cos", rt__ox_printf(cv, "%s/cos%d", h, k), t, RT_DT_FLOAT);
        t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/term%d", h, k), t,
                          sc(cv, h, rt__ox_printf(cv, "a%d", k), a[k]), RT_DT_FLOAT);
        y = rt__tf_binary(cv, "AddV2", k == 2 || a[2] == 0 ? h : rt__ox_printf(cv, "%s/s%d", h, k),
                          y, t, RT_DT_FLOAT);
    }
    int64_t len = rt__ox_is_const(S) && S->iv ? S->iv[0] : -1;
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 1, &len, y);
    return MS_OK;
}

/* MeanVarianceNormalization: (x - mean) / sqrt(var) over axes (default
 * 0, 2, 3), with the 1e-9 the operator's definition adds. */
static ms_status op_mvn(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = need_float(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int64_t ax[OX_MAXR] = {0, 2, 3};
    int na = rt__ox_attr_ints(n, "axes", ax, OX_MAXR);
    if (na < 0) na = 3;
    for (int i = 0; i < na; i++) {
        int a = rt__ox_norm_axis(ax[i], X->rank);
        if (a < 0) return rt__ox_err(cv, MS_EINVAL, "axis %lld out of range", (long long)ax[i]);
        ax[i] = a;
    }
    const char *axt = rt__tf_i32vec(cv, nm(cv, h, "axes"), na, ax);
    /* sqrt(var) + 1e-9 as the definition; rsqrt(var + eps) differs by less
     * than float rounding for any var the epsilon matters to. */
    const char *mean = NULL;
    Tensorflow__NodeDef *m = rt__tf_node(cv, "Mean", nm(cv, h, "mean"));
    rt__tf_input(cv, m, x);
    rt__tf_input(cv, m, axt);
    rt__tf_attr_type(cv, m, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, m, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, m, "keep_dims", 1);
    mean = m->name;
    const char *d = rt__tf_binary(cv, "Sub", nm(cv, h, "centered"), x, mean, RT_DT_FLOAT);
    Tensorflow__NodeDef *v = rt__tf_node(cv, "Mean", nm(cv, h, "var"));
    rt__tf_input(cv, v, rt__tf_unary(cv, "Square", nm(cv, h, "sq"), d, RT_DT_FLOAT));
    rt__tf_input(cv, v, axt);
    rt__tf_attr_type(cv, v, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, v, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, v, "keep_dims", 1);
    const char *sd = rt__tf_unary(cv, "Sqrt", nm(cv, h, "std"), v->name, RT_DT_FLOAT);
    sd = rt__tf_binary(cv, "AddV2", nm(cv, h, "std_eps"), sd, sc(cv, h, "eps", 1e-9f), RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim,
                   rt__tf_binary(cv, "RealDiv", h, d, sd, RT_DT_FLOAT));
    return MS_OK;
}

/* Coordinates of the non-zero elements, (rank, count), from TF's Where. */
static ms_status op_nonzero(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = rt__ox_need(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    if (X->dt != RT_DT_FLOAT && !is_idx(X->dt) && X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "input is %s; supported: float, int32, int64, bool",
                          rt_dtype_name(X->dt));
    if (X->rank < 1) return rt__ox_err(cv, MS_ENOTSUP, "a scalar input is not supported");
    Tensorflow__NodeDef *w = rt__tf_node(cv, "Where", nm(cv, h, "where"));
    rt__tf_input(cv, w, x);
    rt__tf_attr_type(cv, w, "T", X->dt);
    static const int64_t perm[2] = {1, 0};
    int64_t od[2] = {X->rank, -1};
    rt__ox_def_out(cv, n, 0, RT_DT_INT64, 2, od,
                   rt__tf_transpose(cv, h, w->name, RT_DT_INT64, 2, perm));
    return MS_OK;
}

/* Compress: the slices along axis (the flattened input without one) whose
 * condition entry is true; entries past the condition's end are dropped. */
static ms_status op_compress(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *C;
    const char *x, *c, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &C, &c)) != MS_OK)
        return st;
    if (C->dt != RT_DT_BOOL || C->rank != 1)
        return rt__ox_err(cv, MS_EINVAL, "condition must be a bool vector");
    if (X->rank < 1) return rt__ox_err(cv, MS_EINVAL, "input must have rank >= 1");
    int r = X->rank, axis = 0;
    int64_t od[OX_MAXR];
    memcpy(od, X->dim, sizeof od);
    if (rt__ox_attr(n, "axis")) {
        axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
        if (axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    } else {
        int64_t m1 = -1;
        x = rt__tf_reshape(cv, nm(cv, h, "flat"), x, X->dt, 1, &m1);
        r = 1;
    }
    Tensorflow__NodeDef *w = rt__tf_node(cv, "Where", nm(cv, h, "where"));
    rt__tf_input(cv, w, c);
    rt__tf_attr_type(cv, w, "T", RT_DT_BOOL);
    int64_t m1 = -1;
    const char *ix = rt__tf_reshape(cv, nm(cv, h, "ix"), w->name, RT_DT_INT64, 1, &m1);
    Tensorflow__NodeDef *g = rt__ox_gather_node(cv, h, x, X->dt, ix, RT_DT_INT64, axis);
    od[axis] = -1;
    rt__ox_def_out(cv, n, 0, X->dt, r, od, g->name);
    return MS_OK;
}

/* Pack of the n tensors v (type dt) along axis. */
static const char *pack(rt__ox_conv *cv, const char *h, int n, const char *const *v, rt_dtype dt,
                        int axis) {
    Tensorflow__NodeDef *p = rt__tf_node(cv, "Pack", h);
    for (int i = 0; i < n; i++)
        rt__tf_input(cv, p, v[i]);
    rt__tf_attr_i(cv, p, "N", n);
    rt__tf_attr_type(cv, p, "T", dt);
    rt__tf_attr_i(cv, p, "axis", axis);
    return p->name;
}

static const char *shape_of(rt__ox_conv *cv, const char *h, const char *x, rt_dtype dt) {
    Tensorflow__NodeDef *s = rt__tf_node(cv, "Shape", h);
    rt__tf_input(cv, s, x);
    rt__tf_attr_type(cv, s, "T", dt);
    rt__tf_attr_type(cv, s, "out_type", RT_DT_INT64);
    return s->name;
}

static const char *i64(rt__ox_conv *cv, const char *h, int64_t v) {
    return rt__tf_const_int(cv, h, RT_DT_INT64, 0, NULL, &v);
}

/* CenterCropPad: each listed axis cropped around its centre or padded with
 * zeros around it to the run-time target length; start (in - out) / 2 and
 * pad before (out - in) / 2, rounded down, as the operator's reference. */
static ms_status op_center_crop_pad(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *S;
    const char *x, *s, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, &s)) != MS_OK)
        return st;
    int r = X->rank;
    if (X->dt != RT_DT_FLOAT && !is_idx(X->dt) && X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "input is %s; supported: float, int32, int64, bool",
                          rt_dtype_name(X->dt));
    if (r < 1) return rt__ox_err(cv, MS_EINVAL, "the input must have rank >= 1");
    int64_t axes[OX_MAXR];
    int na = rt__ox_attr_ints(n, "axes", axes, OX_MAXR);
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    if (!is_idx(S->dt) || S->rank != 1 || (S->dim[0] >= 0 && S->dim[0] != na))
        return rt__ox_err(cv, MS_EINVAL, "shape must hold one integer per axis (%d)", na);
    /* idx[a]: where the target length of axis a is in concat(Shape(x), shape). */
    int64_t idx[OX_MAXR];
    for (int a = 0; a < r; a++)
        idx[a] = a;
    for (int j = 0; j < na; j++) {
        int a = rt__ox_norm_axis(axes[j], r);
        if (a < 0 || idx[a] != a) return rt__ox_err(cv, MS_EINVAL, "axes out of range or repeated");
        idx[a] = r + j;
    }
    if (S->dt != RT_DT_INT64) s = rt__tf_cast(cv, nm(cv, h, "shape64"), s, S->dt, RT_DT_INT64);
    const char *in = shape_of(cv, nm(cv, h, "in"), x, X->dt);
    Tensorflow__NodeDef *c = rt__tf_node(cv, "ConcatV2", nm(cv, h, "both"));
    rt__tf_input(cv, c, in);
    rt__tf_input(cv, c, s);
    rt__tf_input(cv, c, rt__tf_i32(cv, nm(cv, h, "axis0"), 0));
    rt__tf_attr_i(cv, c, "N", 2);
    rt__tf_attr_type(cv, c, "T", RT_DT_INT64);
    rt__tf_attr_type(cv, c, "Tidx", RT_DT_INT32);
    int64_t rr = r;
    Tensorflow__NodeDef *g = rt__ox_gather_node(
        cv, nm(cv, h, "out"), c->name, RT_DT_INT64,
        rt__tf_const_int(cv, nm(cv, h, "pick"), RT_DT_INT64, 1, &rr, idx), RT_DT_INT64, 0);
    const char *out = g->name, *zero = i64(cv, nm(cv, h, "zero"), 0),
               *two = i64(cv, nm(cv, h, "two"), 2);
    const char *diff = rt__tf_binary(cv, "Sub", nm(cv, h, "diff"), in, out, RT_DT_INT64);
    const char *crop = rt__tf_binary(cv, "Maximum", nm(cv, h, "crop"), diff, zero, RT_DT_INT64);
    const char *begin = rt__tf_binary(cv, "FloorDiv", nm(cv, h, "begin"), crop, two, RT_DT_INT64);
    const char *size = rt__tf_binary(cv, "Minimum", nm(cv, h, "size"), in, out, RT_DT_INT64);
    Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", nm(cv, h, "cropped"));
    rt__tf_input(cv, sl, x);
    rt__tf_input(cv, sl, begin);
    rt__tf_input(cv, sl, size);
    rt__tf_attr_type(cv, sl, "T", X->dt);
    rt__tf_attr_type(cv, sl, "Index", RT_DT_INT64);
    const char *pad = rt__tf_unary(cv, "Neg", nm(cv, h, "neg_diff"), diff, RT_DT_INT64);
    pad = rt__tf_binary(cv, "Maximum", nm(cv, h, "pad"), pad, zero, RT_DT_INT64);
    const char *pb[2];
    pb[0] = rt__tf_binary(cv, "FloorDiv", nm(cv, h, "before"), pad, two, RT_DT_INT64);
    pb[1] = rt__tf_binary(cv, "Sub", nm(cv, h, "after"), pad, pb[0], RT_DT_INT64);
    Tensorflow__NodeDef *pd = rt__tf_node(cv, "Pad", h);
    rt__tf_input(cv, pd, sl->name);
    rt__tf_input(cv, pd, pack(cv, nm(cv, h, "paddings"), 2, pb, RT_DT_INT64, 1));
    rt__tf_attr_type(cv, pd, "T", X->dt);
    rt__tf_attr_type(cv, pd, "Tpaddings", RT_DT_INT64);
    int64_t od[OX_MAXR];
    for (int a = 0; a < r; a++)
        od[a] = idx[a] == a ? X->dim[a] : S->iv && rt__ox_is_const(S) ? S->iv[idx[a] - r] : -1;
    rt__ox_def_out(cv, n, 0, X->dt, r, od, pd->name);
    return MS_OK;
}

/* AffineGrid (opset 20): theta (N, 2, 3) or (N, 3, 4) applied to the
 * normalised coordinates (x, y[, z], 1) of a run-time size (N, C, [D,] H, W):
 * -1..1 over the pixel centres (align_corners) or (2 i + 1) / len - 1. */
static ms_status op_affine_grid(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *T, *S;
    const char *t, *s, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need_float(cv, n, 0, &T, &t)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, &s)) != MS_OK)
        return st;
    int nd = T->rank == 3 && T->dim[1] == 2 && T->dim[2] == 3   ? 2
             : T->rank == 3 && T->dim[1] == 3 && T->dim[2] == 4 ? 3
                                                                : 0;
    if (nd == 0) return rt__ox_err(cv, MS_EINVAL, "theta must be (N, 2, 3) or (N, 3, 4)");
    if (!is_idx(S->dt) || S->rank != 1 || (S->dim[0] >= 0 && S->dim[0] != nd + 2))
        return rt__ox_err(cv, MS_EINVAL, "size must hold %d integers", nd + 2);
    if (S->dt != RT_DT_INT64) s = rt__tf_cast(cv, nm(cv, h, "size64"), s, S->dt, RT_DT_INT64);
    int align = rt__ox_attr_i(n, "align_corners", 0) != 0;
    /* Per spatial axis k (outermost first) the coordinates along it,
     * shaped to broadcast over the grid (1 .. len .. 1). */
    const char *coord[3], *lens[3];
    for (int k = 0; k < nd; k++) {
        int64_t at = 2 + k, one = 1;
        Tensorflow__NodeDef *g = rt__ox_gather_node(
            cv, rt__ox_printf(cv, "%s/len%d", h, k), s, RT_DT_INT64,
            rt__tf_const_int(cv, rt__ox_printf(cv, "%s/at%d", h, k), RT_DT_INT64, 0, NULL, &at),
            RT_DT_INT64, 0);
        lens[k] = g->name;
        Tensorflow__NodeDef *rg = rt__tf_node(cv, "Range", rt__ox_printf(cv, "%s/i%d", h, k));
        rt__tf_input(cv, rg, i64(cv, rt__ox_printf(cv, "%s/start%d", h, k), 0));
        rt__tf_input(cv, rg, g->name);
        rt__tf_input(cv, rg, i64(cv, rt__ox_printf(cv, "%s/step%d", h, k), one));
        rt__tf_attr_type(cv, rg, "Tidx", RT_DT_INT64);
        const char *i =
            rt__tf_cast(cv, rt__ox_printf(cv, "%s/if%d", h, k), rg->name, RT_DT_INT64, RT_DT_FLOAT);
        const char *len = rt__tf_cast(cv, rt__ox_printf(cv, "%s/lenf%d", h, k), g->name,
                                      RT_DT_INT64, RT_DT_FLOAT);
        const char *v;
        if (align) {
            /* -1 + 2 i / (len - 1); a single pixel sits at -1. */
            const char *d = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/lm1_%d", h, k), len,
                                          sc(cv, h, rt__ox_printf(cv, "one%d", k), 1), RT_DT_FLOAT);
            v = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/two_i%d", h, k), i,
                              sc(cv, h, rt__ox_printf(cv, "two%d", k), 2), RT_DT_FLOAT);
            v = rt__tf_binary(cv, "DivNoNan", rt__ox_printf(cv, "%s/frac%d", h, k), v, d,
                              RT_DT_FLOAT);
        } else {
            v = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/two_i%d", h, k), i,
                              sc(cv, h, rt__ox_printf(cv, "two%d", k), 2), RT_DT_FLOAT);
            v = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/two_i1_%d", h, k), v,
                              sc(cv, h, rt__ox_printf(cv, "one%d", k), 1), RT_DT_FLOAT);
            v = rt__tf_binary(cv, "RealDiv", rt__ox_printf(cv, "%s/frac%d", h, k), v, len,
                              RT_DT_FLOAT);
        }
        v = rt__tf_binary(cv, "Sub", rt__ox_printf(cv, "%s/c%d", h, k), v,
                          sc(cv, h, rt__ox_printf(cv, "m1_%d", k), 1), RT_DT_FLOAT);
        int64_t d[3] = {1, 1, 1};
        d[k] = -1;
        coord[k] = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/c%d_b", h, k), v, RT_DT_FLOAT, nd, d);
    }
    /* Every coordinate broadcast to the full grid: add zeros of it. */
    const char *zeros = coord[0];
    for (int k = 1; k < nd; k++)
        zeros = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/span%d", h, k), zeros, coord[k],
                              RT_DT_FLOAT);
    zeros = rt__tf_unary(cv, "ZerosLike", nm(cv, h, "zeros"), zeros, RT_DT_FLOAT);
    const char *comp[4];
    for (int k = 0; k < nd; k++) /* (x, y, z): innermost axis first */
        comp[k] = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/full%d", h, k), zeros,
                                coord[nd - 1 - k], RT_DT_FLOAT);
    comp[nd] =
        rt__tf_binary(cv, "AddV2", nm(cv, h, "ones"), zeros, sc(cv, h, "one", 1), RT_DT_FLOAT);
    const char *base = pack(cv, nm(cv, h, "base"), nd + 1, comp, RT_DT_FLOAT, nd);
    int64_t flat[3] = {1, -1, nd + 1};
    base = rt__tf_reshape(cv, nm(cv, h, "base_flat"), base, RT_DT_FLOAT, 3, flat);
    Tensorflow__NodeDef *mm = rt__tf_node(cv, "BatchMatMulV2", nm(cv, h, "points"));
    rt__tf_input(cv, mm, base);
    rt__tf_input(cv, mm, t);
    rt__tf_attr_type(cv, mm, "T", RT_DT_FLOAT);
    rt__tf_attr_b(cv, mm, "adj_x", 0);
    rt__tf_attr_b(cv, mm, "adj_y", 1);
    /* (N, spatial..., nd): N from theta, the lengths from size. */
    Tensorflow__NodeDef *nb = rt__tf_node(cv, "Shape", nm(cv, h, "theta_shape"));
    rt__tf_input(cv, nb, t);
    rt__tf_attr_type(cv, nb, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, nb, "out_type", RT_DT_INT64);
    int64_t b0 = 0, ndv = nd;
    Tensorflow__NodeDef *bn = rt__ox_gather_node(
        cv, nm(cv, h, "batch"), nb->name, RT_DT_INT64,
        rt__tf_const_int(cv, nm(cv, h, "b0"), RT_DT_INT64, 0, NULL, &b0), RT_DT_INT64, 0);
    const char *dims[5] = {bn->name};
    for (int k = 0; k < nd; k++)
        dims[1 + k] = lens[k];
    dims[1 + nd] = rt__tf_const_int(cv, nm(cv, h, "nd"), RT_DT_INT64, 0, NULL, &ndv);
    Tensorflow__NodeDef *rs = rt__tf_node(cv, "Reshape", h);
    rt__tf_input(cv, rs, mm->name);
    rt__tf_input(cv, rs, pack(cv, nm(cv, h, "grid_shape"), nd + 2, dims, RT_DT_INT64, 0));
    rt__tf_attr_type(cv, rs, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, rs, "Tshape", RT_DT_INT64);
    int64_t od[5] = {T->dim[0], -1, -1, -1, -1};
    od[nd + 1] = nd;
    if (S->iv && rt__ox_is_const(S))
        for (int k = 0; k < nd; k++)
            od[1 + k] = S->iv[2 + k];
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, nd + 2, od, rs->name);
    return MS_OK;
}

/* CumProd: TF's Cumprod (exclusive, reverse as ONNX's). */
static ms_status op_cumprod(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *A;
    const char *x, *a, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &A, &a)) != MS_OK)
        return st;
    if (X->dt != RT_DT_FLOAT && X->dt != RT_DT_DOUBLE && !is_idx(X->dt))
        return rt__ox_err(cv, MS_ENOTSUP, "input is %s; supported: float, double, int32, int64",
                          rt_dtype_name(X->dt));
    if (!is_idx(A->dt) || rt__ox_nelem(A) != 1)
        return rt__ox_err(cv, MS_EINVAL, "axis must be one int32 or int64");
    if (A->rank > 0) a = rt__tf_reshape(cv, nm(cv, h, "axis"), a, A->dt, 0, NULL);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Cumprod", h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, a);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tidx", A->dt);
    rt__tf_attr_b(cv, nd, "exclusive", rt__ox_attr_i(n, "exclusive", 0) != 0);
    rt__tf_attr_b(cv, nd, "reverse", rt__ox_attr_i(n, "reverse", 0) != 0);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, nd->name);
    return MS_OK;
}

/* GroupNormalization: x (N, C, ...) normalised over each group of C /
 * num_groups channels and the spatial dims, then scale and bias per channel
 * (opset 21) or per group (opset 18). */
static ms_status op_group_norm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *S, *B;
    const char *x, *s, *b, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = need_float(cv, n, 0, &X, &x)) != MS_OK ||
        (st = need_float(cv, n, 1, &S, &s)) != MS_OK ||
        (st = need_float(cv, n, 2, &B, &b)) != MS_OK)
        return st;
    if (rt__ox_attr_i(n, "stash_type", 1) != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "stash_type other than 1 (float) is not supported");
    int r = X->rank;
    int64_t G = rt__ox_attr_i(n, "num_groups", 0), C = r >= 2 ? X->dim[1] : -1;
    if (r < 2 || C < 0 || G <= 0 || C % G != 0)
        return rt__ox_err(cv, MS_EINVAL, "needs a static channel count that num_groups divides");
    if (rt__ox_count_unknown(r, X->dim) > 1)
        return rt__ox_err(cv, MS_ENOTSUP, "more than one dynamic dimension");
    int per_channel = cv->opset >= 21;
    int64_t want = per_channel ? C : G;
    if (S->rank != 1 || B->rank != 1 || S->dim[0] != want || B->dim[0] != want)
        return rt__ox_err(cv, MS_EINVAL, "scale and bias must hold %lld values (opset %lld)",
                          (long long)want, (long long)cv->opset);
    int64_t gd[3] = {X->dim[0], G, -1}, ax = 2;
    if (gd[0] < 0) {
        gd[2] = C / G;
        for (int i = 2; i < r; i++)
            gd[2] *= X->dim[i];
    }
    const char *t = rt__tf_reshape(cv, nm(cv, h, "groups"), x, RT_DT_FLOAT, 3, gd);
    t = rt__ox_normalize(cv, h, t, rt__tf_i32vec(cv, nm(cv, h, "axes"), 1, &ax),
                         rt__ox_attr_f(n, "epsilon", 1e-5f), NULL, NULL);
    t = rt__tf_reshape(cv, nm(cv, h, "ungroup"), t, RT_DT_FLOAT, r, X->dim);
    if (!per_channel) {
        /* The per-group values repeated over each group's channels. */
        int64_t *ix = rt__ox_alloc(cv, (size_t)C * sizeof(int64_t));
        for (int64_t c = 0; c < C; c++)
            ix[c] = c / (C / G);
        const char *ixc = rt__tf_const_int(cv, nm(cv, h, "group_of"), RT_DT_INT64, 1, &C, ix);
        const char *v[2] = {s, b};
        for (int i = 0; i < 2; i++) {
            Tensorflow__NodeDef *g = rt__ox_gather_node(cv, nm(cv, h, i ? "bias_c" : "scale_c"),
                                                        v[i], RT_DT_FLOAT, ixc, RT_DT_INT64, 0);
            v[i] = g->name;
        }
        s = v[0], b = v[1];
    }
    int64_t cd[OX_MAXR];
    for (int i = 0; i < r - 1; i++)
        cd[i] = i == 0 ? C : 1;
    s = rt__tf_reshape(cv, nm(cv, h, "scale_b"), s, RT_DT_FLOAT, r - 1, cd);
    b = rt__tf_reshape(cv, nm(cv, h, "bias_b"), b, RT_DT_FLOAT, r - 1, cd);
    t = rt__tf_binary(cv, "Mul", nm(cv, h, "scaled"), t, s, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim,
                   rt__tf_binary(cv, "AddV2", h, t, b, RT_DT_FLOAT));
    return MS_OK;
}

/* LRN: x / (bias + alpha / size * (sum of x^2 over the size channels
 * around c))^beta; the window runs from c - (size - 1) / 2 to
 * c + ceil((size - 1) / 2): a zero Pad on the channel axis and size
 * shifted Slices added up. */
static ms_status op_lrn(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st = need_float(cv, n, 0, &X, &x);
    if (st != MS_OK) return st;
    int r = X->rank;
    int64_t size = rt__ox_attr_i(n, "size", 0), C = r >= 2 ? X->dim[1] : -1;
    if (size < 1 || size > 64) return rt__ox_err(cv, MS_ENOTSUP, "size must be 1 to 64");
    if (r < 3 || C < 0) return rt__ox_err(cv, MS_ENOTSUP, "needs (N, C, ...) with static C");
    float alpha = rt__ox_attr_f(n, "alpha", 1e-4f), beta = rt__ox_attr_f(n, "beta", 0.75f),
          bias = rt__ox_attr_f(n, "bias", 1.0f);
    int64_t pads[2 * OX_MAXR] = {0};
    pads[1] = (size - 1) / 2;
    pads[r + 1] = size - 1 - pads[1];
    const char *sq = rt__tf_unary(cv, "Square", nm(cv, h, "sq"), x, RT_DT_FLOAT);
    sq = rt__ox_emit_pad(cv, nm(cv, h, "padded"), sq, RT_DT_FLOAT, r, pads, "constant", 0);
    int64_t b[OX_MAXR] = {0}, sz[OX_MAXR];
    for (int i = 0; i < r; i++)
        sz[i] = i == 1 ? C : -1;
    Tensorflow__NodeDef *add = rt__tf_node(cv, "AddN", nm(cv, h, "window_sum"));
    for (int64_t k = 0; k < size; k++) {
        b[1] = k;
        Tensorflow__NodeDef *sl =
            rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/shift%lld", h, (long long)k));
        rt__tf_input(cv, sl, sq);
        rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/b", sl->name), r, b));
        rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/s", sl->name), r, sz));
        rt__tf_attr_type(cv, sl, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
        rt__tf_input(cv, add, sl->name);
    }
    rt__tf_attr_i(cv, add, "N", size);
    rt__tf_attr_type(cv, add, "T", RT_DT_FLOAT);
    const char *t = rt__tf_binary(cv, "Mul", nm(cv, h, "scaled"), add->name,
                                  sc(cv, h, "alpha", alpha / (float)size), RT_DT_FLOAT);
    t = rt__tf_binary(cv, "AddV2", nm(cv, h, "biased"), t, sc(cv, h, "bias", bias), RT_DT_FLOAT);
    t = rt__tf_binary(cv, "Pow", nm(cv, h, "pow"), t, sc(cv, h, "neg_beta", -beta), RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, X->dim,
                   rt__tf_binary(cv, "Mul", h, x, t, RT_DT_FLOAT));
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } misc[] = {
    {"Swish", op_swish}, {"SwiGLU", op_swish}, {"Shrink", op_shrink},
    {"LpNormalization", op_lpnorm},
    {"EyeLike", op_eyelike}, {"SpaceToDepth", op_space_depth}, {"DepthToSpace", op_space_depth},
    {"OneHot", op_onehot}, {"GatherND", op_gathernd}, {"HannWindow", op_window},
    {"HammingWindow", op_window}, {"BlackmanWindow", op_window},
    {"MeanVarianceNormalization", op_mvn}, {"NonZero", op_nonzero}, {"Compress", op_compress},
    {"CenterCropPad", op_center_crop_pad}, {"AffineGrid", op_affine_grid}, {"CumProd", op_cumprod},
    {"GroupNormalization", op_group_norm}, {"LRN", op_lrn},
};
/* clang-format on */

rt__ox_handler rt__ox_misc_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(misc) / sizeof(misc[0]); i++)
        if (strcmp(misc[i].op, op_type) == 0) return misc[i].fn;
    return NULL;
}
