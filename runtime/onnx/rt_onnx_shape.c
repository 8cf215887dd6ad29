/* rt_onnx_shape.c - ONNX op handlers for shapes and data movement
 * (Reshape, Flatten, Squeeze/Unsqueeze, Transpose, Concat, Split, Slice, Pad,
 * Resize/Upsample) and for constants and shape arithmetic (Constant,
 * ConstantOfShape, Shape, Gather, Cast, Identity/Dropout). Values known at
 * conversion time are folded here; see rt_onnx_ops.c for the conventions. */
#include <math.h>
#include <string.h>

#include "rt_onnx_int.h"

/* ======================================================================
 * Shapes and data movement
 * ====================================================================== */

/* Defines output 0 as a reshaped copy of known x (same elements). */
static void fold_reshape(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *x, int r,
                         const int64_t *od) {
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, x->dt, r, od, NULL);
    o->f = x->f;
    o->iv = x->iv;
    o->ik = x->ik;
}

static int is_known(const rt__ox_value *x) {
    return x->f != NULL || x->iv != NULL;
}

/* 1 when v can become a TF tensor (known in full, or computed by a node). */
static int has_tensor(const rt__ox_value *v) {
    return v->tf != NULL || rt__ox_is_const(v);
}

/* An int vector input of static length (its count in *len), for the run-time
 * forms; MS_ENOTSUP naming `what` otherwise. */
static ms_status int_vector(rt__ox_conv *cv, rt__ox_value *v, const char *what, int max,
                            int64_t *len, const char **tf) {
    if (v->rank != 1 || v->dim[0] < 0 || v->dim[0] > max ||
        (v->dt != RT_DT_INT64 && v->dt != RT_DT_INT32))
        return rt__ox_err(cv, MS_ENOTSUP, "%s must be an int32/int64 vector of static length",
                          what);
    *len = v->dim[0];
    return rt__ox_tf(cv, v, tf);
}

/* 0..k-1 (axes) or k ones (steps) as an int64 Const. */
static const char *seq_or_ones(rt__ox_conv *cv, const char *hint, int64_t k, int ones) {
    int64_t v[2 * OX_MAXR];
    for (int64_t j = 0; j < k; j++)
        v[j] = ones ? 1 : j;
    return rt__tf_const_int(cv, hint, RT_DT_INT64, 1, &k, v);
}

/* Marks in keep[] the axes of a rank-r tensor that constant axes input A
 * (NULL: the first k axes) leaves alone; 0 when A is not a constant. */
static int untouched_axes(const rt__ox_value *A, int r, int64_t k, uint8_t *keep) {
    for (int i = 0; i < r; i++)
        keep[i] = A != NULL || i >= k;
    if (A == NULL) return 1;
    if (!A->iv || !rt__ox_is_const(A) || rt__ox_nelem(A) > OX_MAXR) return 0;
    for (int64_t j = 0; j < rt__ox_nelem(A); j++) {
        int a = rt__ox_norm_axis(A->iv[j], r);
        if (a >= 0 && a < r) keep[a] = 0;
    }
    return 1;
}

/* Reshape of x (value) to od (rank r, entries -1 = unknown); emits a TF
 * Reshape unless x is folded. */
static ms_status reshape_to(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *x, int r,
                            const int64_t *od) {
    if (is_known(x) && rt__ox_count_unknown(r, od) == 0) {
        fold_reshape(cv, n, x, r, od);
        /* A partially known shape value keeps its run-time tensor. */
        if (!rt__ox_is_const(x) && x->tf != NULL)
            rt__ox_find(cv, n->output[0])->tf =
                rt__tf_reshape(cv, rt__ox_hint_of(n), x->tf, x->dt, r, od);
        return MS_OK;
    }
    if (rt__ox_count_unknown(r, od) > 1)
        return rt__ox_err(cv, MS_ENOTSUP, "target shape has more than one dynamic dimension");
    const char *t;
    ms_status st = rt__ox_tf(cv, x, &t);
    if (st != MS_OK) return st;
    rt__ox_def_out(cv, n, 0, x->dt, r, od, rt__tf_reshape(cv, rt__ox_hint_of(n), t, x->dt, r, od));
    return MS_OK;
}

/* Elements [b, b + len) of the int64 vector t (a TF Slice). */
static const char *slice_vec(rt__ox_conv *cv, const char *hint, const char *t, int64_t b,
                             int64_t len) {
    Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", hint);
    rt__tf_input(cv, sl, t);
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", sl->name), 1, &b));
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", sl->name), 1, &len));
    rt__tf_attr_type(cv, sl, "T", RT_DT_INT64);
    rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
    return sl->name;
}

/* Reshape to a shape computed at run time (an int64 vector of static length
 * r). ONNX's 0 entries copy the input's dim (unless allowzero); TF's Reshape
 * takes 0 literally, so those entries are replaced by Shape(x)'s first.
 * Entries at or beyond the input rank stay 0, which the run refuses (ONNX
 * forbids them too). */
static ms_status reshape_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X,
                            rt__ox_value *S, int allowzero) {
    const char *x, *s, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK || (st = rt__ox_tf(cv, S, &s)) != MS_OK) return st;
    int r = (int)S->dim[0];
    if (!allowzero) {
        Tensorflow__NodeDef *sh = rt__tf_node(cv, "Shape", rt__ox_printf(cv, "%s/in_shape", h));
        rt__tf_input(cv, sh, x);
        rt__tf_attr_type(cv, sh, "T", X->dt);
        rt__tf_attr_type(cv, sh, "out_type", RT_DT_INT64);
        int64_t zeros[OX_MAXR] = {0}, len = r - X->rank;
        const char *xs = sh->name;
        if (r < X->rank) {
            xs = slice_vec(cv, rt__ox_printf(cv, "%s/head", h), xs, 0, r);
        } else if (r > X->rank) {
            Tensorflow__NodeDef *cc = rt__tf_node(cv, "ConcatV2", rt__ox_printf(cv, "%s/pad", h));
            rt__tf_input(cv, cc, xs);
            rt__tf_input(cv, cc, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/zeros", h),
                                                  RT_DT_INT64, 1, &len, zeros));
            rt__tf_input(cv, cc, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", h), 0));
            rt__tf_attr_type(cv, cc, "T", RT_DT_INT64);
            rt__tf_attr_type(cv, cc, "Tidx", RT_DT_INT32);
            rt__tf_attr_i(cv, cc, "N", 2);
            xs = cc->name;
        }
        int64_t zero = 0;
        const char *z = rt__tf_binary(
            cv, "Equal", rt__ox_printf(cv, "%s/is_zero", h), s,
            rt__tf_const_int(cv, rt__ox_printf(cv, "%s/zero", h), RT_DT_INT64, 0, NULL, &zero),
            RT_DT_INT64);
        s = rt__tf_select(cv, rt__ox_printf(cv, "%s/shape", h), z, xs, s, RT_DT_INT64);
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Reshape", h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, s);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tshape", RT_DT_INT64);
    int64_t od[OX_MAXR];
    for (int i = 0; i < r; i++)
        od[i] = -1;
    rt__ox_def_out(cv, n, 0, X->dt, r, od, nd->name);
    return MS_OK;
}

ms_status rt__ox_op_reshape(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *S = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, NULL)) != MS_OK)
        return st;
    int allowzero = (int)rt__ox_attr_i(n, "allowzero", 0);
    if (!S->iv && S->rank == 1 && S->dim[0] >= 0 && S->dim[0] <= OX_MAXR &&
        S->dt == RT_DT_INT64 && X->rank >= 0)
        return reshape_rt(cv, n, X, S, allowzero);
    if (!S->iv || S->rank != 1 || S->dim[0] > OX_MAXR)
        return rt__ox_err(cv, MS_ENOTSUP, "the shape input must be computable at conversion time");
    int r = (int)S->dim[0];
    int64_t od[OX_MAXR];
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < r; i++) {
        if (!S->ik[i]) {
            od[i] = -1;
        } else if (S->iv[i] == 0 && !allowzero) {
            if (i >= X->rank) return rt__ox_err(cv, MS_EINVAL, "0 in shape beyond input rank");
            od[i] = X->dim[i];
        } else if (S->iv[i] == -1) {
            if (infer >= 0) return rt__ox_err(cv, MS_EINVAL, "more than one -1 in shape");
            infer = i;
            od[i] = -1;
        } else {
            if (rt__ox_out_of(S->iv[i], 0, OX_DIM_MAX))
                return rt__ox_err(cv, MS_EINVAL, "shape entry %lld out of range",
                                  (long long)S->iv[i]);
            od[i] = S->iv[i];
        }
        if (od[i] >= 0 && __builtin_mul_overflow(known, od[i], &known))
            return rt__ox_err(cv, MS_EINVAL, "shape too large");
    }
    /* Resolve the -1 when the input size is static. */
    int64_t total = rt__ox_nelem(X);
    if (total >= 0 && rt__ox_count_unknown(r, od) == 1 && known > 0)
        for (int i = 0; i < r; i++)
            if (od[i] < 0) od[i] = total / known;
    /* x.view(x.size(0), -1): the input's only dynamic dim p and the target's
     * only shape-derived unknown entry are both at p; the -1 then covers the
     * static rest of the input. */
    if (infer >= 0 && rt__ox_count_unknown(r, od) == 2 &&
        rt__ox_count_unknown(X->rank, X->dim) == 1) {
        int p = -1;
        for (int i = 0; i < r; i++)
            if (od[i] < 0 && i != infer) p = i;
        if (p >= 0 && p < X->rank && X->dim[p] < 0 && known > 0) {
            int64_t rest = 1;
            for (int i = 0; i < X->rank; i++)
                if (i != p) rest *= X->dim[i];
            if (rest % known == 0) od[infer] = rest / known;
        }
    }
    /* Still several unknown entries: the shape's run-time tensor. */
    if (rt__ox_count_unknown(r, od) > 1 && S->tf != NULL && S->dt == RT_DT_INT64)
        return reshape_rt(cv, n, X, S, allowzero);
    return reshape_to(cv, n, X, r, od);
}

ms_status rt__ox_op_flatten(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (X->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    int64_t ax = rt__ox_attr_i(n, "axis", 1);
    if (ax < 0) ax += X->rank;
    if (ax < 0 || ax > X->rank) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int axis = (int)ax; /* axis == rank is allowed: [N, 1] */
    int64_t od[2] = {1, 1};
    for (int i = 0; i < X->rank; i++) {
        int64_t *p = &od[i < axis ? 0 : 1];
        if (*p < 0 || X->dim[i] < 0)
            *p = -1;
        else if (__builtin_mul_overflow(*p, X->dim[i], p) || *p > OX_DIM_MAX * 64)
            return rt__ox_err(cv, MS_EINVAL, "shape too large");
    }
    return reshape_to(cv, n, X, 2, od);
}

ms_status rt__ox_op_squeeze_unsqueeze(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int unsq = strcmp(n->op_type, "Unsqueeze") == 0;
    rt__ox_value *X = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (X->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    int64_t axes[OX_MAXR];
    int na = rt__ox_attr_ints(n, "axes", axes, OX_MAXR);
    if (na > OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "too many axes");
    rt__ox_value *A = na < 0 ? rt__ox_in(cv, n, 1) : NULL;
    if (A != NULL && (!A->iv || !rt__ox_is_const(A))) {
        /* Axes computed at run time: our OnnxSqueeze / OnnxUnsqueeze (a
         * view; the run checks the axes). The output rank follows from
         * the axes' static count. */
        const char *x, *a;
        int64_t k, od[OX_MAXR];
        if ((st = int_vector(cv, A, "run-time axes", OX_MAXR, &k, &a)) != MS_OK) return st;
        int orank = unsq ? X->rank + (int)k : X->rank - (int)k;
        if ((!unsq && k == 0) || orank < 0 || orank > OX_MAXR)
            return rt__ox_err(cv, MS_ENOTSUP, "run-time axes of %lld values for rank %d",
                              (long long)k, X->rank);
        if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
        Tensorflow__NodeDef *nd =
            rt__tf_node(cv, unsq ? "OnnxUnsqueeze" : "OnnxSqueeze", rt__ox_hint_of(n));
        rt__tf_input(cv, nd, x);
        rt__tf_input(cv, nd, a);
        rt__tf_attr_type(cv, nd, "T", X->dt);
        for (int i = 0; i < orank; i++)
            od[i] = -1;
        rt__ox_def_out(cv, n, 0, X->dt, orank, od, nd->name);
        return MS_OK;
    }
    if (na < 0 && (st = rt__ox_const_ints(cv, n, 1, axes, OX_MAXR, &na)) != MS_OK) return st;
    int64_t od[OX_MAXR];
    int r = 0;
    if (unsq) {
        if (na < 0) return rt__ox_err(cv, MS_EINVAL, "axes are required");
        int orank = X->rank + na;
        if (orank > OX_MAXR) return rt__ox_err(cv, MS_ENOTSUP, "rank too large");
        uint8_t ins[OX_MAXR] = {0};
        for (int i = 0; i < na; i++) {
            int a = rt__ox_norm_axis(axes[i], orank);
            if (a < 0 || a >= orank) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
            ins[a] = 1;
        }
        for (int i = 0, k = 0; i < orank; i++)
            od[r++] = ins[i] ? 1 : X->dim[k++];
    } else {
        uint8_t drop[OX_MAXR] = {0};
        if (na < 0) {
            for (int i = 0; i < X->rank; i++) {
                if (X->dim[i] < 0)
                    return rt__ox_err(cv, MS_ENOTSUP, "Squeeze without axes needs static dims");
                drop[i] = X->dim[i] == 1;
            }
        } else {
            for (int i = 0; i < na; i++) {
                int a = rt__ox_norm_axis(axes[i], X->rank);
                if (a < 0 || a >= X->rank) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
                drop[a] = 1;
            }
        }
        for (int i = 0; i < X->rank; i++)
            if (!drop[i]) od[r++] = X->dim[i];
    }
    if (!is_known(X) && na > 0 && rt__ox_count_unknown(r, od) > 1) {
        /* Several dynamic dims: no Reshape target can say it; our
         * OnnxSqueeze / OnnxUnsqueeze take the constant axes instead (a
         * view; the run checks the axes). */
        const char *x;
        if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
        const char *h = rt__ox_hint_of(n);
        Tensorflow__NodeDef *nd = rt__tf_node(cv, unsq ? "OnnxUnsqueeze" : "OnnxSqueeze", h);
        rt__tf_input(cv, nd, x);
        int64_t k = na;
        rt__tf_input(cv, nd, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/axes", nd->name),
                                              RT_DT_INT64, 1, &k, axes));
        rt__tf_attr_type(cv, nd, "T", X->dt);
        rt__ox_def_out(cv, n, 0, X->dt, r, od, nd->name);
        return MS_OK;
    }
    return reshape_to(cv, n, X, r, od);
}

ms_status rt__ox_op_transpose(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (X->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    int64_t perm[OX_MAXR], od[OX_MAXR];
    int np = rt__ox_attr_ints(n, "perm", perm, OX_MAXR);
    if (np < 0) {
        np = X->rank;
        for (int i = 0; i < np; i++)
            perm[i] = np - 1 - i;
    }
    if (np != X->rank) return rt__ox_err(cv, MS_EINVAL, "perm length != rank");
    uint8_t seen[OX_MAXR] = {0};
    for (int i = 0; i < np; i++) {
        if (perm[i] < 0 || perm[i] >= np || seen[perm[i]])
            return rt__ox_err(cv, MS_EINVAL, "perm is not a permutation of 0..%d", np - 1);
        seen[perm[i]] = 1;
        od[i] = X->dim[perm[i]];
    }
    rt__ox_def_out(cv, n, 0, X->dt, np, od,
                   rt__tf_transpose(cv, rt__ox_hint_of(n), x, X->dt, np, perm));
    return MS_OK;
}

ms_status rt__ox_op_concat(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int ni = (int)n->n_input;
    rt__ox_value *v[64];
    ms_status st;
    if (ni < 1 || ni > 64) return rt__ox_err(cv, MS_ENOTSUP, "1 to 64 inputs are supported");
    if (rt__ox_op3_concat(cv, n)) return MS_OK;
    int all_known = 1;
    for (int i = 0; i < ni; i++) {
        if ((st = rt__ox_need(cv, n, i, &v[i], NULL)) != MS_OK) return st;
        all_known &= is_known(v[i]) && rt__ox_nelem(v[i]) >= 0;
    }
    int r = v[0]->rank;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known and >= 1");
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int64_t od[OX_MAXR];
    memcpy(od, v[0]->dim, sizeof(od));
    od[axis] = 0;
    for (int i = 0; i < ni; i++) {
        if (v[i]->rank != r) return rt__ox_err(cv, MS_EINVAL, "inputs differ in rank");
        od[axis] = (od[axis] < 0 || v[i]->dim[axis] < 0) ? -1 : od[axis] + v[i]->dim[axis];
    }
    if (ni == 1) {
        rt__ox_alias(cv, n, v[0]);
        return MS_OK;
    }
    int64_t *fiv = NULL; /* the folded values, when a node is emitted too */
    uint8_t *fik = NULL;
    if (all_known) {
        int isf = v[0]->f != NULL;
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, v[0]->dt, r, od, NULL);
        int64_t outer = 1, total = rt__ox_nelem(o), pos = 0;
        for (int i = 0; i < axis; i++)
            outer *= od[i];
        if (isf)
            o->f = rt__ox_alloc(cv, (size_t)total * 4 + 4);
        else
            o->iv = rt__ox_alloc(cv, (size_t)total * 8 + 8),
            o->ik = rt__ox_alloc(cv, (size_t)total + 1);
        for (int64_t b = 0; b < outer; b++)
            for (int i = 0; i < ni; i++) {
                int64_t chunk = rt__ox_nelem(v[i]) / (outer ? outer : 1);
                for (int64_t k = 0; k < chunk; k++, pos++) {
                    if (isf) {
                        o->f[pos] =
                            v[i]->f ? v[i]->f[b * chunk + k] : (float)v[i]->iv[b * chunk + k];
                    } else {
                        o->iv[pos] = v[i]->iv ? v[i]->iv[b * chunk + k] : 0;
                        o->ik[pos] = v[i]->iv ? v[i]->ik[b * chunk + k] : 0;
                    }
                }
            }
        /* Partially known (shape arithmetic with dynamic dims): also the
         * ConcatV2 of the inputs' run-time tensors. */
        int tensors = !rt__ox_is_const(o);
        for (int i = 0; i < ni && tensors; i++)
            tensors = has_tensor(v[i]);
        if (!tensors) return MS_OK;
        fiv = o->iv, fik = o->ik;
    }
    int last = 0;
    for (int i = 0; i < ni && r == 4 && axis == 1; i++)
        last |= v[i]->nhwc;
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "ConcatV2", rt__ox_hint_of(n));
    for (int i = 0; i < ni; i++) {
        const char *t;
        st = last ? rt__ox_tf_nhwc(cv, v[i], &t) : rt__ox_tf(cv, v[i], &t);
        if (st != MS_OK) return st;
        rt__tf_input(cv, nd, t);
    }
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", nd->name), last ? 3 : axis));
    rt__tf_attr_i(cv, nd, "N", ni);
    rt__tf_attr_type(cv, nd, "T", v[0]->dt);
    rt__tf_attr_type(cv, nd, "Tidx", RT_DT_INT32);
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, v[0]->dt, r, od, nd->name);
    o->nhwc = last;
    if (fiv != NULL) o->iv = fiv, o->ik = fik;
    return MS_OK;
}

ms_status rt__ox_op_split(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    int r = X->rank;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known and >= 1");
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int last = X->nhwc && axis == 1;
    if (last)
        x = X->tf;
    else if ((st = rt__ox_tf(cv, X, &x)) != MS_OK)
        return st;
    int no = (int)n->n_output;
    int64_t sizes[64];
    if (no < 1 || no > 64) return rt__ox_err(cv, MS_ENOTSUP, "1 to 64 outputs are supported");
    int ns = rt__ox_attr_ints(n, "split", sizes, 64);
    rt__ox_value *S = ns < 0 ? rt__ox_in(cv, n, 1) : NULL;
    const char *sizes_tf = NULL;
    int64_t nout_attr = rt__ox_attr_i(n, "num_outputs", -1);
    if (nout_attr >= 0 && nout_attr != no)
        return rt__ox_err(cv, MS_EINVAL, "num_outputs %lld but %d outputs", (long long)nout_attr,
                          no);
    if (S != NULL && !rt__ox_is_const(S)) {
        /* Sizes computed at run time: SplitV takes them as a tensor. */
        if (S->rank != 1 || S->dim[0] != no || (S->dt != RT_DT_INT64 && S->dt != RT_DT_INT32))
            return rt__ox_err(cv, MS_ENOTSUP, "run-time split must be an integer vector of %d",
                              no);
        if ((st = rt__ox_tf(cv, S, &sizes_tf)) != MS_OK) return st;
        for (int i = 0; i < no; i++)
            sizes[i] = -1;
        ns = no;
    } else if (ns < 0 && (st = rt__ox_const_ints(cv, n, 1, sizes, 64, &ns)) != MS_OK) {
        return st;
    }
    if (ns < 0 && nout_attr >= 0) {
        /* Split-18 num_outputs: chunks of ceil(d / n), the last one smaller. */
        int64_t d = X->dim[axis];
        if (d < 0) return rt__ox_err(cv, MS_ENOTSUP, "num_outputs needs a static axis");
        int64_t c = (d + no - 1) / no;
        for (int i = 0; i < no; i++)
            sizes[i] = i < no - 1 ? c : d - c * (no - 1);
        if (sizes[no - 1] < 0)
            return rt__ox_err(cv, MS_EINVAL, "axis of %lld cannot be split into %d chunks",
                              (long long)d, no);
        ns = no;
    }
    if (ns < 0) {
        if (X->dim[axis] < 0 || X->dim[axis] % no != 0)
            return rt__ox_err(cv, MS_ENOTSUP, "equal split needs a static axis divisible by %d",
                              no);
        for (int i = 0; i < no; i++)
            sizes[i] = X->dim[axis] / no;
        ns = no;
    }
    if (ns != no) return rt__ox_err(cv, MS_EINVAL, "split has %d sizes for %d outputs", ns, no);
    for (int i = 0; i < ns && sizes_tf == NULL; i++)
        if (rt__ox_out_of(sizes[i], 0, OX_DIM_MAX))
            return rt__ox_err(cv, MS_EINVAL, "split size out of range");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "SplitV", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, sizes_tf ? sizes_tf
                                  : rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/sizes", nd->name),
                                                  no, sizes));
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", nd->name), last ? 3 : axis));
    rt__tf_attr_i(cv, nd, "num_split", no);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tlen", sizes_tf ? S->dt : RT_DT_INT32);
    for (int i = 0; i < no; i++) {
        int64_t od[OX_MAXR];
        memcpy(od, X->dim, sizeof(od));
        od[axis] = sizes[i];
        rt__ox_def_out(cv, n, i, X->dt, r, od, rt__tf_out(cv, nd, i))->nhwc = last;
    }
    return MS_OK;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Slice whose starts, ends, axes or steps are computed at run time: our
 * OnnxSlice op, which clamps as ONNX does (kn_cpu_shape.c). */
static ms_status slice_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X) {
    static const char *const names[5] = {"data", "starts", "ends", "axes", "steps"};
    const char *h = rt__ox_hint_of(n), *t[5];
    ms_status st;
    int64_t k = -1, len;
    if ((st = rt__ox_tf(cv, X, &t[0])) != MS_OK) return st;
    for (int i = 1; i < 5; i++) {
        rt__ox_value *v = rt__ox_in(cv, n, i);
        if (v == NULL && i <= 2) return rt__ox_err(cv, MS_EINVAL, "input %s is missing", names[i]);
        if (v == NULL) {
            t[i] = seq_or_ones(cv, rt__ox_printf(cv, "%s/%s", h, names[i]), k, i == 4);
            continue;
        }
        if ((st = int_vector(cv, v, rt__ox_printf(cv, "run-time %s", names[i]), OX_MAXR, &len,
                             &t[i])) != MS_OK)
            return st;
        if (k >= 0 && len != k)
            return rt__ox_err(cv, MS_EINVAL, "%s has %lld values, starts has %lld", names[i],
                              (long long)len, (long long)k);
        k = len;
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxSlice", h);
    for (int i = 0; i < 5; i++)
        rt__tf_input(cv, nd, t[i]);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    int64_t od[OX_MAXR];
    uint8_t keep[OX_MAXR];
    int known = untouched_axes(rt__ox_in(cv, n, 3), X->rank, k, keep);
    for (int i = 0; i < X->rank; i++)
        od[i] = known && keep[i] ? X->dim[i] : -1;
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, od, nd->name);
    return MS_OK;
}

ms_status rt__ox_op_slice(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    int r = X->rank;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known and >= 1");
    for (int i = 1; i < 5 && cv->opset >= 10; i++) {
        rt__ox_value *v = rt__ox_in(cv, n, i);
        if (v != NULL && (!v->iv || !rt__ox_is_const(v))) return slice_rt(cv, n, X);
    }
    int64_t starts[OX_MAXR], ends[OX_MAXR], axes[OX_MAXR], steps[OX_MAXR];
    int c1, c2, c3, c4;
    if (cv->opset < 10) {
        c1 = rt__ox_attr_ints(n, "starts", starts, OX_MAXR);
        c2 = rt__ox_attr_ints(n, "ends", ends, OX_MAXR);
        c3 = rt__ox_attr_ints(n, "axes", axes, OX_MAXR);
        c4 = -1;
    } else if ((st = rt__ox_const_ints(cv, n, 1, starts, OX_MAXR, &c1)) != MS_OK ||
               (st = rt__ox_const_ints(cv, n, 2, ends, OX_MAXR, &c2)) != MS_OK ||
               (st = rt__ox_const_ints(cv, n, 3, axes, OX_MAXR, &c3)) != MS_OK ||
               (st = rt__ox_const_ints(cv, n, 4, steps, OX_MAXR, &c4)) != MS_OK) {
        return st;
    }
    if (c1 < 0 || c1 > OX_MAXR || c1 != c2 || (c3 >= 0 && c3 != c1) || (c4 >= 0 && c4 != c1))
        return rt__ox_err(cv, MS_EINVAL, "starts/ends/axes/steps lengths differ");
    int64_t b[OX_MAXR], e[OX_MAXR], s[OX_MAXR], od[OX_MAXR];
    uint8_t sliced[OX_MAXR] = {0}, to_front[OX_MAXR] = {0};
    int any_step = 0;
    for (int i = 0; i < r; i++)
        b[i] = 0, e[i] = X->dim[i], s[i] = 1, od[i] = X->dim[i];
    for (int i = 0; i < c1; i++) {
        int a = c3 >= 0 ? rt__ox_norm_axis(axes[i], r) : i;
        if (a < 0 || a >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
        int64_t step = c4 >= 0 ? steps[i] : 1, d = X->dim[a];
        if (step == 0 || rt__ox_out_of(step, -OX_DIM_MAX, OX_DIM_MAX))
            return rt__ox_err(cv, MS_EINVAL, "step %lld out of range", (long long)step);
        starts[i] = starts[i] < -OX_DIM_MAX  ? -OX_DIM_MAX
                    : starts[i] > OX_DIM_MAX ? OX_DIM_MAX
                                             : starts[i];
        ends[i] = ends[i] < -OX_DIM_MAX - 1 ? -OX_DIM_MAX - 1 : ends[i];
        if (d < 0) {
            /* Dynamic axis: only "from a non-negative start to the end". */
            if (step != 1 || starts[i] < 0 || ends[i] < INT32_MAX)
                return rt__ox_err(cv, MS_ENOTSUP, "slicing dynamic axis %d needs static bounds", a);
            b[a] = starts[i];
            e[a] = -1;
            od[a] = -1;
            sliced[a] = starts[i] != 0;
            continue;
        }
        int64_t st0 = starts[i] < 0 ? starts[i] + d : starts[i];
        int64_t en0 = ends[i] < 0 ? ends[i] + d : ends[i];
        if (step > 0) {
            st0 = clampi(st0, 0, d);
            en0 = clampi(en0, 0, d);
            od[a] = en0 > st0 ? (en0 - st0 + step - 1) / step : 0;
        } else {
            st0 = clampi(st0, 0, d - 1);
            en0 = clampi(en0, -1, d - 1);
            od[a] = st0 > en0 ? (st0 - en0 - step - 1) / -step : 0;
            /* Through index 0: TF would read end -1 as "last", so use the mask. */
            to_front[a] = en0 == -1;
        }
        b[a] = st0, e[a] = en0, s[a] = step;
        sliced[a] = 1;
        if (step != 1) any_step = 1;
    }
    /* Known 1-D vectors (shape arithmetic) fold. */
    int64_t *fiv = NULL; /* the folded values, when a node is emitted too */
    uint8_t *fik = NULL;
    if (X->iv && r == 1 && X->dim[0] >= 0) {
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, X->dt, 1, od, NULL);
        o->iv = rt__ox_alloc(cv, (size_t)od[0] * 8 + 8);
        o->ik = rt__ox_alloc(cv, (size_t)od[0] + 1);
        for (int64_t k = 0; k < od[0]; k++) {
            o->iv[k] = X->iv[b[0] + k * s[0]];
            o->ik[k] = X->ik[b[0] + k * s[0]];
        }
        /* Partially known: also the TF slice of X's run-time tensor. */
        if (rt__ox_is_const(o) || X->tf == NULL) return MS_OK;
        fiv = o->iv, fik = o->ik;
    }
    const char *x;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    int any = 0;
    for (int i = 0; i < r; i++)
        any |= sliced[i] && (b[i] != 0 || od[i] != X->dim[i]);
    if (!any && !any_step) {
        rt__ox_alias(cv, n, X);
        return MS_OK;
    }
    const char *h = rt__ox_hint_of(n);
    Tensorflow__NodeDef *nd;
    if (!any_step) {
        int64_t size[OX_MAXR];
        for (int i = 0; i < r; i++)
            size[i] = od[i] < 0 ? -1 : od[i];
        nd = rt__tf_node(cv, "Slice", h);
        rt__tf_input(cv, nd, x);
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", nd->name), r, b));
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", nd->name), r, size));
    } else {
        int64_t mask = 0, emask = 0;
        for (int i = 0; i < r; i++) {
            if (!sliced[i]) mask |= (int64_t)1 << i, emask |= (int64_t)1 << i;
            if (to_front[i]) emask |= (int64_t)1 << i, e[i] = 0;
        }
        nd = rt__tf_node(cv, "StridedSlice", h);
        rt__tf_input(cv, nd, x);
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", nd->name), r, b));
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/end", nd->name), r, e));
        rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/strides", nd->name), r, s));
        rt__tf_attr_i(cv, nd, "begin_mask", mask);
        rt__tf_attr_i(cv, nd, "end_mask", emask);
        rt__tf_attr_i(cv, nd, "ellipsis_mask", 0);
        rt__tf_attr_i(cv, nd, "new_axis_mask", 0);
        rt__tf_attr_i(cv, nd, "shrink_axis_mask", 0);
    }
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Index", RT_DT_INT32);
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, X->dt, r, od, nd->name);
    if (fiv != NULL) o->iv = fiv, o->ik = fik;
    return MS_OK;
}

/* A scalar of type dt holding v. */
static const char *scalar_of(rt__ox_conv *cv, const char *h, rt_dtype dt, float v) {
    int64_t iv = (int64_t)v;
    if (dt == RT_DT_FLOAT) return rt__ox_scalar_f32(cv, h, v);
    if ((dt == RT_DT_INT64 || dt == RT_DT_INT32 || dt == RT_DT_BOOL || dt == RT_DT_UINT8 ||
         dt == RT_DT_INT8) &&
        (float)iv == v)
        return rt__tf_const_int(cv, h, dt, 0, NULL, &iv);
    return rt__tf_cast(cv, h, rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/f", h), v), RT_DT_FLOAT,
                       dt);
}

/* Pad in the forms TF's Pad/MirrorPad do not cover: pads, value or axes
 * computed at run time, the axes input, negative pads, edge and wrap modes.
 * Our OnnxPad op (kn_cpu_shape.c); pads0 (np0 values) are the constant
 * pads when known (opset < 11 or a constant input), else NULL. */
static ms_status pad_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X,
                        const int64_t *pads0, int np0, float value0, const char *mode) {
    const char *h = rt__ox_hint_of(n), *x, *p, *v, *a;
    int r = X->rank;
    int64_t na = r, np;
    ms_status st;
    rt__ox_value *P = cv->opset >= 11 ? rt__ox_in(cv, n, 1) : NULL;
    rt__ox_value *V = cv->opset >= 11 ? rt__ox_in(cv, n, 2) : NULL;
    rt__ox_value *A = cv->opset >= 18 ? rt__ox_in(cv, n, 3) : NULL;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    if (A != NULL) {
        if ((st = int_vector(cv, A, "axes", OX_MAXR, &na, &a)) != MS_OK) return st;
    } else {
        a = seq_or_ones(cv, rt__ox_printf(cv, "%s/axes", h), r, 0);
    }
    if (pads0 != NULL) {
        int64_t cnt = np0;
        p = rt__tf_const_int(cv, rt__ox_printf(cv, "%s/pads", h), RT_DT_INT64, 1, &cnt, pads0);
        np = cnt;
    } else if (P == NULL) {
        return rt__ox_err(cv, MS_EINVAL, "input pads is missing");
    } else if ((st = int_vector(cv, P, "run-time pads", 2 * OX_MAXR, &np, &p)) != MS_OK) {
        return st;
    }
    if (np != 2 * na)
        return rt__ox_err(cv, MS_EINVAL, "pads has %lld values for %lld axes", (long long)np,
                          (long long)na);
    if (V != NULL && !(V->f && rt__ox_nelem(V) == 1 && X->dt == RT_DT_FLOAT)) {
        if (V->dt != X->dt || (V->rank > 0 && rt__ox_nelem(V) != 1))
            return rt__ox_err(cv, MS_EINVAL, "constant_value must be one %s value",
                              rt_dtype_name(X->dt));
        if ((st = rt__ox_tf(cv, V, &v)) != MS_OK) return st;
    } else {
        v = scalar_of(cv, rt__ox_printf(cv, "%s/value", h), X->dt, V ? V->f[0] : value0);
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxPad", h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, p);
    rt__tf_input(cv, nd, v);
    rt__tf_input(cv, nd, a);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_s(cv, nd, "mode", mode);
    int64_t od[OX_MAXR];
    for (int i = 0; i < r; i++)
        od[i] = pads0 != NULL && A == NULL && X->dim[i] >= 0 && np0 == 2 * r
                    ? X->dim[i] + pads0[i] + pads0[i + r]
                    : -1;
    rt__ox_def_out(cv, n, 0, X->dt, r, od, nd->name);
    return MS_OK;
}

ms_status rt__ox_op_pad(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *V = NULL, *P = NULL;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    int r = X->rank, last;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    const char *mode = NULL;
    for (int m = 0; m < 4; m++)
        if (rt__ox_attr_is(n, "mode", modes[m], "constant")) mode = modes[m];
    if (mode == NULL || (cv->opset < 19 && strcmp(mode, "wrap") == 0))
        return rt__ox_err(cv, MS_ENOTSUP, "mode must be constant, reflect, edge or wrap (wrap "
                                          "from opset 19)");
    int64_t pads[2 * OX_MAXR];
    int np = -1;
    float value = 0.0f;
    if (cv->opset < 11) {
        np = rt__ox_attr_ints(n, "pads", pads, 2 * OX_MAXR);
        value = rt__ox_attr_f(n, "value", 0.0f);
        if (np < 0 || np > 2 * OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "pads must be given");
    } else {
        P = rt__ox_in(cv, n, 1);
        if (P != NULL && P->iv && rt__ox_is_const(P) &&
            (st = rt__ox_const_ints(cv, n, 1, pads, 2 * OX_MAXR, &np)) != MS_OK)
            return st;
        V = rt__ox_in(cv, n, 2);
        if (V != NULL && (V->f || (V->iv && rt__ox_is_const(V))) && rt__ox_nelem(V) == 1)
            value = V->f ? V->f[0] : (float)V->iv[0];
        else if (V != NULL)
            np = -2; /* a run-time value: OnnxPad */
    }
    /* TF's Pad / PadV2 / MirrorPad: constant pads >= 0 of every axis. */
    int tf_form = np == 2 * r && (cv->opset < 18 || rt__ox_in(cv, n, 3) == NULL) &&
                  (strcmp(mode, "constant") == 0 || strcmp(mode, "reflect") == 0) &&
                  (V == NULL || X->dt == RT_DT_FLOAT);
    for (int i = 0; i < np && tf_form; i++)
        tf_form = pads[i] >= 0;
    if (!tf_form) return pad_rt(cv, n, X, np >= 0 ? pads : NULL, np, value, mode);
    int reflect = strcmp(mode, "reflect") == 0;
    if ((st = rt__ox_in_any(cv, X, &x, &last)) != MS_OK) return st;
    int64_t od[OX_MAXR];
    for (int i = 0; i < r; i++) {
        if (pads[i] > OX_DIM_MAX || pads[i + r] > OX_DIM_MAX)
            return rt__ox_err(cv, MS_EINVAL, "pads too large");
        od[i] = X->dim[i] < 0 ? -1 : X->dim[i] + pads[i] + pads[i + r];
    }
    int64_t tp[2 * OX_MAXR];
    memcpy(tp, pads, sizeof(tp));
    if (last) {
        rt__ox_lay4(cv, tp, pads[0], pads[1], pads[2], pads[3]);
        rt__ox_lay4(cv, tp + 4, pads[4], pads[5], pads[6], pads[7]);
    }
    rt__ox_def_out(cv, n, 0, X->dt, r, od,
                   rt__ox_emit_pad(cv, rt__ox_hint_of(n), x, X->dt, r, tp,
                                   reflect ? "reflect" : "constant", value))
        ->nhwc = last;
    return MS_OK;
}

/* The int32 [H, W] size of a resize of NHWC t computed at run time: t's
 * H, W times mul (0: out's static size instead). A size of 2^31 or more is
 * made -2^31, which the resize op refuses, rather than one wrapped. */
static const char *resize_rt_size(rt__ox_conv *cv, const char *h, const char *t,
                                  const int64_t mul[2], const int64_t out[2]) {
    static const int64_t one = 1, two = 2;
    int64_t begin = 1, add[2], lim = (int64_t)1 << 31;
    for (int a = 0; a < 2; a++)
        add[a] = mul[a] ? 0 : out[a];
    Tensorflow__NodeDef *sh = rt__tf_node(cv, "Shape", rt__ox_printf(cv, "%s/in_shape", h));
    rt__tf_input(cv, sh, t);
    rt__tf_attr_type(cv, sh, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, sh, "out_type", RT_DT_INT64);
    Tensorflow__NodeDef *sl = rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/in_hw", h));
    rt__tf_input(cv, sl, sh->name);
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", sl->name), 1, &begin));
    rt__tf_input(cv, sl, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/len", sl->name), 1, &two));
    rt__tf_attr_type(cv, sl, "T", RT_DT_INT64);
    rt__tf_attr_type(cv, sl, "Index", RT_DT_INT32);
    const char *s = rt__tf_binary(
        cv, "Mul", rt__ox_printf(cv, "%s/scaled", h), sl->name,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/mul", h), RT_DT_INT64, 1, &two, mul),
        RT_DT_INT64);
    s = rt__tf_binary(
        cv, "AddV2", rt__ox_printf(cv, "%s/sized", h), s,
        rt__tf_const_int(cv, rt__ox_printf(cv, "%s/add", h), RT_DT_INT64, 1, &two, add),
        RT_DT_INT64);
    s = rt__tf_binary(cv, "Minimum", rt__ox_printf(cv, "%s/capped", h), s,
                      rt__tf_const_int(cv, rt__ox_printf(cv, "%s/lim", h), RT_DT_INT64, 0, &one,
                                       &lim),
                      RT_DT_INT64);
    return rt__tf_cast(cv, rt__ox_printf(cv, "%s/size", h), s, RT_DT_INT64, RT_DT_INT32);
}

/* Resize / Upsample with TF's ResizeBilinear / ResizeNearestNeighbor (the
 * fast path, also for the fused CNN graphs): MS_ENOTSUP for every form they
 * do not compute exactly as ONNX does. */
static ms_status resize_tf(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int upsample = strcmp(n->op_type, "Upsample") == 0;
    rt__ox_value *X = NULL, *S = NULL;
    const char *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (rt__ox_attr_i(n, "antialias", 0) != 0 || rt__ox_attr_i(n, "exclude_outside", 0) != 0 ||
        rt__ox_attr(n, "axes") != NULL ||
        !rt__ox_attr_is(n, "keep_aspect_ratio_policy", "stretch", "stretch"))
        return rt__ox_err(cv, MS_ENOTSUP, "antialias, exclude_outside, axes or "
                                          "keep_aspect_ratio_policy");
    if (X->rank == 5 && !upsample) return rt__ox_op3_resize(cv, n);
    if (!rt__ox_need_rank(cv, X, 4, &st)) return st;
    /* A spatial dim known only at run time: its output size is computed in
     * the graph (resize_rt_size); rt_mul[a] is its scale, 0 when static. */
    int dyn = X->dim[2] < 0 || X->dim[3] < 0;
    int64_t rt_mul[2] = {0, 0};
    float scales[4] = {1, 1, 1, 1};
    int64_t out[2] = {-1, -1};
    int have = 0;
    /* Inputs: Upsample (X, scales); Resize-10 (X, scales); Resize-11+ (X, roi,
     * scales, sizes). Opset-7 Upsample has a scales attribute. */
    int si = (upsample || cv->opset < 11) ? 1 : 2;
    if (upsample && cv->opset < 9) {
        const Onnx__AttributeProto *a = rt__ox_attr(n, "scales");
        if (a && a->n_floats == 4) {
            for (int i = 0; i < 4; i++)
                scales[i] = a->floats[i];
            have = 1;
        }
    } else if ((S = rt__ox_in(cv, n, si)) != NULL && rt__ox_nelem(S) > 0) {
        if (!S->f || rt__ox_nelem(S) != 4)
            return rt__ox_err(cv, MS_ENOTSUP, "scales must be a constant of 4 floats");
        memcpy(scales, S->f, sizeof(scales));
        have = 1;
    }
    if (!upsample && cv->opset >= 11 && (S = rt__ox_in(cv, n, 3)) != NULL) {
        /* sizes: N and C may come from Shape(x) and be dynamic; H, W must be
         * known here. ONNX then maps by out / in; TF too, but in float. */
        if (dyn) return rt__ox_err(cv, MS_ENOTSUP, "sizes with run-time H or W");
        int64_t ns = rt__ox_nelem(S);
        if (ns != 4 || !S->iv || !S->ik[2] || !S->ik[3])
            return rt__ox_err(cv, MS_ENOTSUP, "sizes must be 4 values with static H and W");
        for (int i = 0; i < 2; i++)
            if (S->ik[i] && X->dim[i] >= 0 && S->iv[i] != X->dim[i])
                return rt__ox_err(cv, MS_ENOTSUP, "only H and W may be resized");
        out[0] = S->iv[2], out[1] = S->iv[3];
        if (rt__ox_out_of(out[0], 1, OX_DIM_MAX) || rt__ox_out_of(out[1], 1, OX_DIM_MAX))
            return rt__ox_err(cv, MS_EINVAL, "sizes out of range");
        have = 2;
    }
    if (!have) return rt__ox_err(cv, MS_EINVAL, "neither scales nor sizes given");
    if (have == 1) {
        if (scales[0] != 1.0f || scales[1] != 1.0f)
            return rt__ox_err(cv, MS_ENOTSUP, "only H and W may be resized");
        for (int a = 0; a < 2; a++) {
            if (X->dim[2 + a] < 0) {
                /* in * scale is integral for every in only with an integral
                 * scale; a power of two also makes TF's float in / out and
                 * every index * (in / out) exact, so its index is ONNX's
                 * for every size (3 would need sizes below 2^22). */
                int e;
                float m = frexpf(scales[2 + a], &e);
                if (m != 0.5f || e < 1 || e > 11)
                    return rt__ox_err(cv, MS_ENOTSUP,
                                      "scale %g on a run-time dimension: only 1, 2, 4, ..., "
                                      "1024 are supported",
                                      (double)scales[2 + a]);
                rt_mul[a] = (int64_t)1 << (e - 1);
                continue;
            }
            float o = floorf((float)X->dim[2 + a] * scales[2 + a]);
            if (!(o >= 1.0f && o <= (float)OX_DIM_MAX))
                return rt__ox_err(cv, MS_EINVAL, "scales give an output size out of range");
            out[a] = (int64_t)o;
            /* ONNX maps coordinates with the given scale (align_corners
             * by (in - 1) / (in * scale - 1)), TF's resize ops with out / in:
             * the same only when out = in * scale exactly (0.8 on 4 gives 3
             * and maps by 0.8, TF would map by 0.75); OnnxResize otherwise. */
            if ((double)out[a] != (double)X->dim[2 + a] * (double)scales[2 + a])
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "scale %g on a dimension of %lld gives a fractional output "
                                  "size; only scales with in * scale integral are supported",
                                  (double)scales[2 + a], (long long)X->dim[2 + a]);
        }
    }
    int linear = rt__ox_attr_is(n, "mode", "linear", "nearest") ||
                 rt__ox_attr_is(n, "mode", "bilinear", "nearest");
    if (!linear && !rt__ox_attr_is(n, "mode", "nearest", "nearest"))
        return rt__ox_err(cv, MS_ENOTSUP, "only nearest and linear modes are supported");
    const char *dflt = (upsample || cv->opset < 11) ? "asymmetric" : "half_pixel";
    int hp = rt__ox_attr_is(n, "coordinate_transformation_mode", "half_pixel", dflt);
    int php = rt__ox_attr_is(n, "coordinate_transformation_mode", "pytorch_half_pixel", dflt);
    int ac = rt__ox_attr_is(n, "coordinate_transformation_mode", "align_corners", dflt);
    int asym = rt__ox_attr_is(n, "coordinate_transformation_mode", "asymmetric", dflt);
    int tf_hp = 0, tf_ac = 0;
    if (linear) {
        /* TF's bilinear rounds its lerps in float, OnnxResize once from
         * double: equal for few sizes only, so run-time sizes stay there. */
        if (dyn) return rt__ox_err(cv, MS_ENOTSUP, "linear resize of run-time H or W");
        if (php && (out[0] == 1 || out[1] == 1))
            return rt__ox_err(cv, MS_ENOTSUP, "pytorch_half_pixel to size 1 is not supported");
        if (hp || php)
            tf_hp = 1;
        else if (ac)
            tf_ac = 1;
        else if (!asym)
            return rt__ox_err(cv, MS_ENOTSUP, "coordinate_transformation_mode not supported");
    } else {
        const char *ndflt = (upsample || cv->opset < 11) ? "floor" : "round_prefer_floor";
        int fl = rt__ox_attr_is(n, "nearest_mode", "floor", ndflt);
        int rpf = rt__ox_attr_is(n, "nearest_mode", "round_prefer_floor", ndflt) ||
                  rt__ox_attr_is(n, "nearest_mode", "round_prefer_ceil", ndflt);
        int int_up = (rt_mul[0] || out[0] % X->dim[2] == 0) &&
                     (rt_mul[1] || out[1] % X->dim[3] == 0);
        if (asym && fl) {
            tf_hp = 0;
        } else if ((hp || php) && rpf && int_up) {
            /* For integer upscaling round((x + 0.5) / f - 0.5) never ties and
             * equals floor((x + 0.5) / f), TF's half-pixel nearest. */
            tf_hp = 1;
        } else {
            return rt__ox_err(cv, MS_ENOTSUP,
                              "nearest resize with this coordinate_transformation_"
                              "mode/nearest_mode/scale combination is not supported");
        }
    }
    int64_t od[4] = {X->dim[0], X->dim[1], out[0], out[1]};
    if ((rt_mul[0] ? rt_mul[0] == 1 : out[0] == X->dim[2]) &&
        (rt_mul[1] ? rt_mul[1] == 1 : out[1] == X->dim[3])) {
        rt__ox_alias(cv, n, X);
        return MS_OK;
    }
    /* TF resizes NHWC images; in NCHW mode wrap the op in Transposes. */
    static const int64_t to_nchw[4] = {0, 3, 1, 2};
    const char *t;
    if ((st = rt__ox_tf_nhwc(cv, X, &t)) != MS_OK) return st;
    Tensorflow__NodeDef *nd =
        rt__tf_node(cv, linear ? "ResizeBilinear" : "ResizeNearestNeighbor", h);
    rt__tf_input(cv, nd, t);
    rt__tf_input(cv, nd,
                 dyn ? resize_rt_size(cv, nd->name, t, rt_mul, out)
                     : rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", nd->name), 2, out));
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__tf_attr_b(cv, nd, "align_corners", tf_ac);
    rt__tf_attr_b(cv, nd, "half_pixel_centers", tf_hp);
    if (cv->nhwc) {
        rt__ox_def_out4(cv, n, 0, RT_DT_FLOAT, od, nd->name);
        return MS_OK;
    }
    t = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_nchw", h), nd->name, RT_DT_FLOAT, 4, to_nchw);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 4, od, t);
    return MS_OK;
}

/* A string attribute as a C string (dflt when absent). */
static const char *attr_str(rt__ox_conv *cv, const Onnx__NodeProto *n, const char *key,
                            const char *dflt) {
    const Onnx__AttributeProto *a = rt__ox_attr(n, key);
    if (a == NULL) return dflt;
    return rt__ox_printf(cv, "%.*s", (int)a->s.len, a->s.data ? (const char *)a->s.data : "");
}

/* 1 when s is one of the space-separated words of list. */
static int one_of(const char *s, const char *list) {
    size_t k = strlen(s);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == k && strncmp(p, s, k) == 0) return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* Resize / Upsample in every form ONNX defines (modes nearest, linear and
 * cubic, every coordinate transformation, antialias, axes, aspect-ratio
 * policies, scales and sizes known only at run time): our OnnxResize op
 * (kn_cpu_image.c), which computes as ONNX's reference does. */
static ms_status resize_onnx(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int legacy = strcmp(n->op_type, "Upsample") == 0 || cv->opset < 11;
    rt__ox_value *X = NULL, *in[3] = {NULL, NULL, NULL}; /* roi, scales, sizes */
    const char *h = rt__ox_hint_of(n), *x, *t[3];
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (X->dt != RT_DT_FLOAT || X->rank < 1)
        return rt__ox_err(cv, MS_ENOTSUP, "input must be float of known rank");
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    float fs[OX_MAXR];
    int64_t zero = 0, nfs = -1;
    if (strcmp(n->op_type, "Upsample") == 0 && cv->opset < 9) {
        const Onnx__AttributeProto *a = rt__ox_attr(n, "scales");
        if (a == NULL || a->n_floats != (size_t)X->rank)
            return rt__ox_err(cv, MS_EINVAL, "scales must have %d values", X->rank);
        for (int i = 0; i < X->rank; i++)
            fs[i] = a->floats[i];
        nfs = X->rank;
    } else if (legacy) {
        in[1] = rt__ox_in(cv, n, 1);
    } else {
        for (int i = 0; i < 3; i++)
            in[i] = rt__ox_in(cv, n, i + 1);
    }
    static const rt_dtype want[3] = {RT_DT_FLOAT, RT_DT_FLOAT, RT_DT_INT64};
    static const char *const names[3] = {"roi", "scales", "sizes"};
    for (int i = 0; i < 3; i++) {
        const char *hi = rt__ox_printf(cv, "%s/%s", h, names[i]);
        if (in[i] != NULL) {
            if (in[i]->dt != want[i] || in[i]->rank != 1)
                return rt__ox_err(cv, MS_ENOTSUP, "%s must be a %s vector", names[i],
                                  rt_dtype_name(want[i]));
            if ((st = rt__ox_tf(cv, in[i], &t[i])) != MS_OK) return st;
        } else if (i == 1 && nfs >= 0) {
            t[i] = rt__tf_const_f32(cv, hi, 1, &nfs, fs);
        } else {
            t[i] = i == 2 ? rt__tf_const_int(cv, hi, RT_DT_INT64, 1, &zero, &zero)
                          : rt__tf_const_f32(cv, hi, 1, &zero, fs);
        }
    }
    const char *mode = attr_str(cv, n, "mode", "nearest");
    if (strcmp(mode, "bilinear") == 0 && legacy) mode = "linear";
    const char *ctm = attr_str(cv, n, "coordinate_transformation_mode",
                               legacy ? "asymmetric" : "half_pixel");
    const char *nm = attr_str(cv, n, "nearest_mode", legacy ? "floor" : "round_prefer_floor");
    const char *pol = attr_str(cv, n, "keep_aspect_ratio_policy", "stretch");
    if (!one_of(mode, "nearest linear cubic") ||
        !one_of(ctm, cv->opset >= 19 ? "half_pixel half_pixel_symmetric pytorch_half_pixel "
                                       "align_corners asymmetric tf_crop_and_resize"
                                     : "half_pixel pytorch_half_pixel align_corners asymmetric "
                                       "tf_crop_and_resize") ||
        !one_of(nm, "round_prefer_floor round_prefer_ceil floor ceil") ||
        !one_of(pol, "stretch not_larger not_smaller"))
        return rt__ox_err(cv, MS_ENOTSUP,
                          "opset %lld: mode \"%s\", coordinate_transformation_mode \"%s\", "
                          "nearest_mode \"%s\" or keep_aspect_ratio_policy \"%s\" is not "
                          "supported",
                          (long long)cv->opset, mode, ctm, nm, pol);
    int64_t axes[OX_MAXR];
    int na = rt__ox_attr_ints(n, "axes", axes, OX_MAXR);
    if (na > OX_MAXR) return rt__ox_err(cv, MS_EINVAL, "too many axes");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OnnxResize", h);
    rt__tf_input(cv, nd, x);
    for (int i = 0; i < 3; i++)
        rt__tf_input(cv, nd, t[i]);
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__tf_attr_s(cv, nd, "mode", mode);
    rt__tf_attr_s(cv, nd, "coordinate_transformation_mode", ctm);
    rt__tf_attr_s(cv, nd, "nearest_mode", nm);
    rt__tf_attr_s(cv, nd, "keep_aspect_ratio_policy", pol);
    rt__tf_attr_f(cv, nd, "cubic_coeff_a", rt__ox_attr_f(n, "cubic_coeff_a", -0.75f));
    rt__tf_attr_f(cv, nd, "extrapolation_value", rt__ox_attr_f(n, "extrapolation_value", 0.0f));
    rt__tf_attr_i(cv, nd, "exclude_outside", rt__ox_attr_i(n, "exclude_outside", 0));
    rt__tf_attr_i(cv, nd, "antialias", rt__ox_attr_i(n, "antialias", 0));
    if (na >= 0) rt__tf_attr_ilist(cv, nd, "axes", axes, na);
    /* Output dims: the resized axes unknown unless scales are constants. */
    int64_t od[OX_MAXR];
    uint8_t resized[OX_MAXR] = {0};
    for (int i = 0; i < (na < 0 ? X->rank : na); i++) {
        int a = na < 0 ? i : rt__ox_norm_axis(axes[i], X->rank);
        if (a < 0 || a >= X->rank) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
        resized[a] = 1;
    }
    rt__ox_value *S = in[1];
    int const_scales = in[2] == NULL && ((S && S->f && rt__ox_nelem(S) == (na < 0 ? X->rank : na)) ||
                                         nfs >= 0);
    for (int a = 0, k = 0; a < X->rank; a++) {
        od[a] = X->dim[a];
        if (!resized[a]) continue;
        float sc = nfs >= 0 ? fs[a] : const_scales ? S->f[k] : 0.0f;
        k++;
        od[a] = const_scales && X->dim[a] >= 0 && sc > 0.0f &&
                        (double)X->dim[a] * sc < (double)OX_DIM_MAX
                    ? (int64_t)floor((double)X->dim[a] * (double)sc)
                    : -1;
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, od, nd->name);
    return MS_OK;
}

ms_status rt__ox_op_resize(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    ms_status st = resize_tf(cv, n);
    if (st != MS_ENOTSUP) return st;
    return resize_onnx(cv, n);
}

/* ======================================================================
 * Constants and shape arithmetic
 * ====================================================================== */

ms_status rt__ox_op_constant(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const Onnx__AttributeProto *a;
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, 0, NULL, NULL);
    if ((a = rt__ox_attr(n, "value")) && a->t) return rt__ox_load_tensor(cv, a->t, o);
    if ((a = rt__ox_attr(n, "value_float")) || (a = rt__ox_attr(n, "value_floats"))) {
        int scalar = a->has_f;
        int64_t cnt = scalar ? 1 : (int64_t)a->n_floats;
        o->rank = scalar ? 0 : 1;
        o->dim[0] = cnt;
        o->f = rt__ox_alloc(cv, (size_t)cnt * 4 + 4);
        if (scalar)
            o->f[0] = a->f;
        else
            memcpy(o->f, a->floats, (size_t)cnt * 4);
        return MS_OK;
    }
    if ((a = rt__ox_attr(n, "value_int")) || (a = rt__ox_attr(n, "value_ints"))) {
        int scalar = a->has_i;
        int64_t cnt = scalar ? 1 : (int64_t)a->n_ints;
        o->dt = RT_DT_INT64;
        o->rank = scalar ? 0 : 1;
        o->dim[0] = cnt;
        o->iv = rt__ox_alloc(cv, (size_t)cnt * 8 + 8);
        o->ik = rt__ox_alloc(cv, (size_t)cnt + 1);
        memset(o->ik, 1, (size_t)cnt);
        if (scalar)
            o->iv[0] = a->i;
        else
            memcpy(o->iv, a->ints, (size_t)cnt * 8);
        return MS_OK;
    }
    return rt__ox_err(cv, MS_ENOTSUP, "only value, value_float(s) and value_int(s) are supported");
}

ms_status rt__ox_op_constant_of_shape(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    int64_t dims[OX_MAXR];
    int nd;
    ms_status st;
    rt__ox_value fill = {0}, *S = rt__ox_in(cv, n, 0);
    const Onnx__AttributeProto *a = rt__ox_attr(n, "value");
    if (a && a->t && (st = rt__ox_load_tensor(cv, a->t, &fill)) != MS_OK) return st;
    rt_dtype dt = a && a->t ? fill.dt : RT_DT_FLOAT;
    if (fill.tf != NULL) /* a value the converter does not hold as numbers (rt_lowp.h) */
        return rt__ox_err(cv, MS_ENOTSUP, "value of type %s", rt_dtype_name(dt));
    if (S != NULL && !rt__ox_is_const(S)) {
        /* A shape known at run time only: TF's Fill. */
        const char *s;
        if (S->rank != 1 || S->dim[0] < 0 || S->dim[0] > OX_MAXR ||
            (S->dt != RT_DT_INT64 && S->dt != RT_DT_INT32))
            return rt__ox_err(cv, MS_ENOTSUP, "the shape must be an integer vector of static "
                                              "length");
        if (dt != RT_DT_FLOAT && dt != RT_DT_INT32 && dt != RT_DT_INT64 && dt != RT_DT_BOOL)
            return rt__ox_err(cv, MS_ENOTSUP, "value of type %s", rt_dtype_name(dt));
        if ((st = rt__ox_tf(cv, S, &s)) != MS_OK) return st;
        for (int i = 0; i < (int)S->dim[0]; i++)
            dims[i] = S->iv && S->ik[i] ? S->iv[i] : -1;
        double v = fill.f ? fill.f[0] : fill.iv ? (double)fill.iv[0] : 0.0;
        rt__ox_def_out(cv, n, 0, dt, (int)S->dim[0], dims,
                       rt__ox_fill(cv, rt__ox_hint_of(n), s, S->dt, dt, v));
        return MS_OK;
    }
    if ((st = rt__ox_const_ints(cv, n, 0, dims, OX_MAXR, &nd)) != MS_OK) return st;
    if (nd < 0) return rt__ox_err(cv, MS_EINVAL, "input is missing");
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, dt, nd, dims, NULL);
    int64_t ne = rt__ox_nelem(o);
    if (ne < 0 || ne > (1 << 24)) return rt__ox_err(cv, MS_ENOTSUP, "shape too large");
    if (dt == RT_DT_FLOAT) {
        o->f = rt__ox_alloc(cv, (size_t)ne * 4 + 4);
        for (int64_t i = 0; i < ne; i++)
            o->f[i] = fill.f ? fill.f[0] : 0.0f;
    } else {
        o->iv = rt__ox_alloc(cv, (size_t)ne * 8 + 8);
        o->ik = rt__ox_alloc(cv, (size_t)ne + 1);
        for (int64_t i = 0; i < ne; i++)
            o->iv[i] = fill.iv ? fill.iv[0] : 0, o->ik[i] = 1;
    }
    return MS_OK;
}

ms_status rt__ox_op_shape(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    if (X->rank < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    int r = X->rank;
    int64_t b = rt__ox_attr_i(n, "start", 0), e = rt__ox_attr_i(n, "end", r);
    b = clampi(b < 0 ? b + r : b, 0, r);
    e = clampi(e < 0 ? e + r : e, 0, r);
    int64_t len = e > b ? e - b : 0;
    rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_INT64, 1, &len, NULL);
    o->iv = rt__ox_alloc(cv, (size_t)len * 8 + 8);
    o->ik = rt__ox_alloc(cv, (size_t)len + 1);
    for (int64_t i = 0; i < len; i++) {
        o->iv[i] = X->dim[b + i];
        o->ik[i] = X->dim[b + i] >= 0;
    }
    /* A rank-5 value of rt_onnx_3d.c may only have its NDHWC tensor. */
    int ndhwc = X->tf == NULL && X->tf_alt != NULL && r == 5;
    if (rt__ox_is_const(o) || (X->tf == NULL && !ndhwc)) return MS_OK;
    /* Dynamic dims: the run-time Shape too (of the stored tensor, permuted
     * back to ONNX order when it is channels-last), for consumers that
     * need the value as a tensor. */
    const char *h = rt__ox_hint_of(n);
    Tensorflow__NodeDef *sh = rt__tf_node(cv, "Shape", h);
    rt__tf_input(cv, sh, ndhwc ? X->tf_alt : X->tf);
    rt__tf_attr_type(cv, sh, "T", X->dt);
    rt__tf_attr_type(cv, sh, "out_type", RT_DT_INT64);
    const char *t = sh->name;
    if (X->nhwc || ndhwc) {
        static const int64_t p4[4] = {0, 3, 1, 2}, p5[5] = {0, 4, 1, 2, 3};
        const int64_t *perm = ndhwc ? p5 : p4;
        Tensorflow__NodeDef *g = rt__tf_node(cv, "GatherV2", rt__ox_printf(cv, "%s/nchw", h));
        rt__tf_input(cv, g, t);
        rt__tf_input(cv, g, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/perm", h), r, perm));
        rt__tf_input(cv, g, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", h), 0));
        rt__tf_attr_type(cv, g, "Tparams", RT_DT_INT64);
        rt__tf_attr_type(cv, g, "Tindices", RT_DT_INT32);
        rt__tf_attr_type(cv, g, "Taxis", RT_DT_INT32);
        rt__tf_attr_i(cv, g, "batch_dims", 0);
        t = g->name;
    }
    if (b != 0 || len != r) t = slice_vec(cv, rt__ox_printf(cv, "%s/part", h), t, b, len);
    o->tf = t;
    return MS_OK;
}

/* Gather with indices known at run time (or of rank > 1): GatherV2, the
 * negative indices first moved up by the axis size (ONNX counts them from
 * the end; TF refuses them). Out-of-range indices fail the run. */
static ms_status gather_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X,
                           rt__ox_value *I) {
    const char *x, *ix, *h = rt__ox_hint_of(n);
    ms_status st;
    int r = X->rank;
    if (r < 1 || I->rank < 0 || r - 1 + I->rank > OX_MAXR)
        return rt__ox_err(cv, MS_ENOTSUP, "input and indices ranks must be known");
    if (I->dt != RT_DT_INT64 && I->dt != RT_DT_INT32)
        return rt__ox_err(cv, MS_EINVAL, "indices must be int32 or int64");
    if (X->dt != RT_DT_FLOAT && X->dt != RT_DT_INT32 && X->dt != RT_DT_INT64 &&
        X->dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "element type %s is not supported",
                          rt_dtype_name(X->dt));
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    if (X->dim[axis] < 0)
        return rt__ox_err(cv, MS_ENOTSUP, "the gathered axis must be static");
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK || (st = rt__ox_tf(cv, I, &ix)) != MS_OK) return st;
    const char *wix = rt__ox_wrap_index(cv, h, ix, I->dt, X->dim[axis]);
    Tensorflow__NodeDef *g = rt__tf_node(cv, "GatherV2", h);
    rt__tf_input(cv, g, x);
    rt__tf_input(cv, g, wix);
    rt__tf_input(cv, g, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", h), axis));
    rt__tf_attr_type(cv, g, "Tparams", X->dt);
    rt__tf_attr_type(cv, g, "Tindices", I->dt);
    rt__tf_attr_type(cv, g, "Taxis", RT_DT_INT32);
    rt__tf_attr_i(cv, g, "batch_dims", 0);
    int64_t od[OX_MAXR];
    int o = 0;
    for (int i = 0; i < r; i++) {
        if (i == axis)
            for (int k = 0; k < I->rank; k++)
                od[o++] = I->dim[k];
        else
            od[o++] = X->dim[i];
    }
    rt__ox_def_out(cv, n, 0, X->dt, o, od, g->name);
    return MS_OK;
}

ms_status rt__ox_op_gather(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL, *I = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &I, NULL)) != MS_OK)
        return st;
    if (!I->iv || !rt__ox_is_const(I) || I->rank > 1 || rt__ox_nelem(I) > 64)
        return gather_rt(cv, n, X, I);
    int r = X->rank;
    if (r < 1) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known and >= 1");
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int64_t ni = rt__ox_nelem(I), d = X->dim[axis];
    int64_t idx[64];
    if (ni > 64) return rt__ox_err(cv, MS_ENOTSUP, "too many indices");
    for (int64_t i = 0; i < ni; i++) {
        idx[i] = I->iv[i] < 0 && d >= 0 ? I->iv[i] + d : I->iv[i];
        if (idx[i] < 0 || (d >= 0 && idx[i] >= d))
            return rt__ox_err(cv, MS_EINVAL, "index %lld out of range", (long long)I->iv[i]);
    }
    /* Output dims: X's with axis replaced by I's dims. */
    int64_t od[OX_MAXR];
    int orank = 0;
    for (int i = 0; i < r; i++) {
        if (i == axis) {
            if (I->rank == 1) od[orank++] = ni;
        } else {
            od[orank++] = X->dim[i];
        }
    }
    if (is_known(X) && rt__ox_nelem(X) >= 0) {
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < axis; i++)
            outer *= X->dim[i];
        for (int i = axis + 1; i < r; i++)
            inner *= X->dim[i];
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, X->dt, orank, od, NULL);
        int64_t total = outer * ni * inner, pos = 0;
        if (X->f)
            o->f = rt__ox_alloc(cv, (size_t)total * 4 + 4);
        else
            o->iv = rt__ox_alloc(cv, (size_t)total * 8 + 8),
            o->ik = rt__ox_alloc(cv, (size_t)total + 1);
        for (int64_t a = 0; a < outer; a++)
            for (int64_t k = 0; k < ni; k++)
                for (int64_t c = 0; c < inner; c++, pos++) {
                    int64_t src = (a * d + idx[k]) * inner + c;
                    if (X->f)
                        o->f[pos] = X->f[src];
                    else
                        o->iv[pos] = X->iv[src], o->ik[pos] = X->ik[src];
                }
        if (rt__ox_is_const(o) || X->tf == NULL || !rt__ox_is_const(I)) return MS_OK;
        /* Partially known: also the run-time GatherV2. */
        int64_t *iv = o->iv;
        uint8_t *ik = o->ik;
        ms_status gs = gather_rt(cv, n, X, I);
        if (gs != MS_OK) return gs;
        o = rt__ox_find(cv, n->output[0]);
        o->iv = iv, o->ik = ik;
        return MS_OK;
    }
    /* A run-time tensor: one index (or a contiguous range) as a Slice. */
    for (int64_t i = 1; i < ni; i++)
        if (idx[i] != idx[0] + i)
            return rt__ox_err(cv, MS_ENOTSUP, "gathering non-contiguous indices at run time");
    const char *x;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    int64_t b[OX_MAXR], size[OX_MAXR], sd[OX_MAXR];
    for (int i = 0; i < r; i++)
        b[i] = 0, size[i] = -1, sd[i] = X->dim[i];
    b[axis] = idx[0];
    size[axis] = ni;
    sd[axis] = ni;
    const char *h = rt__ox_hint_of(n);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Slice", rt__ox_printf(cv, "%s/slice", h));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/begin", nd->name), r, b));
    rt__tf_input(cv, nd, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/size", nd->name), r, size));
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Index", RT_DT_INT32);
    if (I->rank == 1) {
        rt__ox_def_out(cv, n, 0, X->dt, r, sd, nd->name);
        return MS_OK;
    }
    Tensorflow__NodeDef *sq = rt__tf_node(cv, "Squeeze", h);
    rt__tf_input(cv, sq, nd->name);
    int64_t ax = axis;
    rt__tf_attr_ilist(cv, sq, "squeeze_dims", &ax, 1);
    rt__tf_attr_type(cv, sq, "T", X->dt);
    rt__ox_def_out(cv, n, 0, X->dt, orank, od, sq->name);
    return MS_OK;
}

ms_status rt__ox_op_identity(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK) return st;
    int dropout = strcmp(n->op_type, "Dropout") == 0;
    if (dropout) {
        /* Opset 12+: Dropout is the identity when training_mode (input 2)
         * is absent or a constant false, or a constant true with a constant
         * ratio (input 1) of 0. Training mode with a ratio above 0 draws a
         * random mask, which is not implemented; whether a run-time
         * training_mode or ratio asks for it is not known here, so those are
         * refused too (at import, not by the run). */
        rt__ox_value *T = rt__ox_in(cv, n, 2), *R = rt__ox_in(cv, n, 1);
        int r_const = R != NULL && R->f && rt__ox_is_const(R) && rt__ox_nelem(R) == 1;
        if (r_const && R->f[0] == 0.0f) T = NULL; /* ratio 0 keeps all in either mode */
        if (T != NULL && !(T->iv && rt__ox_is_const(T) && rt__ox_nelem(T) == 1))
            return rt__ox_err(cv, MS_ENOTSUP,
                              "training_mode comes at run time; training-mode Dropout (a random "
                              "mask) is not implemented; give training_mode as a constant false "
                              "or drop the input");
        if (T != NULL && T->iv[0] != 0) {
            if (R == NULL)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "training_mode is true with the default ratio 0.5: "
                                  "training-mode Dropout (a random mask) is not implemented");
            if (!r_const)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "training_mode is true and ratio comes at run time; "
                                  "training-mode Dropout (a random mask) is not implemented; "
                                  "give ratio as a constant 0 or training_mode as false");
            if (R->f[0] != 0.0f)
                return rt__ox_err(cv, MS_ENOTSUP,
                                  "training_mode is true with ratio %g: training-mode Dropout "
                                  "(a random mask) is not implemented",
                                  (double)R->f[0]);
        }
    }
    rt__ox_alias(cv, n, X);
    if (n->n_output > 1 && n->output[1] && n->output[1][0]) {
        if (!dropout) return rt__ox_err(cv, MS_ENOTSUP, "a second output is not supported");
        /* Dropout as the identity keeps every element: the mask is all true,
         * not (zeros of X's shape) so that NaN elements count too. */
        const char *h = rt__ox_hint_of(n);
        const char *z = rt__tf_unary(cv, "ZerosLike", rt__ox_printf(cv, "%s/zeros", h), x, X->dt);
        const char *b = rt__tf_cast(cv, rt__ox_printf(cv, "%s/zeros_bool", h), z, X->dt, RT_DT_BOOL);
        Tensorflow__NodeDef *m = rt__tf_node(cv, "LogicalNot", rt__ox_printf(cv, "%s/mask", h));
        rt__tf_input(cv, m, b);
        rt__ox_def_out(cv, n, 1, RT_DT_BOOL, X->rank, X->dim, m->name);
    }
    return MS_OK;
}
