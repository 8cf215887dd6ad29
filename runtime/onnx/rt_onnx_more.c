/* rt_onnx_more.c - ONNX ops that map onto one TF op or a short chain of
 * them, with run-time tensors where TF takes tensors: comparisons and logic,
 * Where, variadic Sum/Mean/Max/Min, more unary math, Elu/Selu/Celu/PRelu/
 * Mish/Gelu, Size, CastLike, Range, Tile, Expand, ArgMax/ArgMin, CumSum,
 * Hardmax, Trilu, Mod (integer), TopK, GatherElements, LayerNormalization and
 * RMSNormalization.
 *
 * Each handler checks the element types its TF ops are run with and refuses
 * others at conversion, naming them (docs/onnx.md). Layout: these ops read
 * and write ONNX order.
 */
#include <math.h>
#include <string.h>

#include "rt_onnx_int.h"

static int is_num(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_INT32 || dt == RT_DT_INT64;
}

static ms_status bad_type(rt__ox_conv *cv, const rt__ox_value *v, const char *want) {
    return rt__ox_err(cv, MS_ENOTSUP, "\"%s\" is %s; supported: %s", v->name,
                      rt_dtype_name(v->dt), want);
}

/* Required input i as an ONNX-order TF tensor of a type passing ok(). */
static ms_status in_typed(rt__ox_conv *cv, const Onnx__NodeProto *n, int i, int (*ok)(rt_dtype),
                          const char *want, rt__ox_value **v, const char **tf) {
    ms_status st = rt__ox_need(cv, n, i, v, tf);
    if (st != MS_OK) return st;
    return ok((*v)->dt) ? MS_OK : bad_type(cv, *v, want);
}

static int is_float(rt_dtype dt) {
    return dt == RT_DT_FLOAT;
}
/* float or double: the unary kernels behind unary_map compute double in
 * double (libm's double functions, not through float) */
static int is_real(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE;
}
static int is_bool(rt_dtype dt) {
    return dt == RT_DT_BOOL;
}
static int is_int(rt_dtype dt) {
    return dt == RT_DT_INT32 || dt == RT_DT_INT64;
}
static int is_any(rt_dtype dt) {
    return is_num(dt) || dt == RT_DT_BOOL;
}

static const char *scalar(rt__ox_conv *cv, const char *h, const char *what, float x) {
    return rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/%s", h, what), x);
}

/* ---- unary ---- */

static const char *const unary_map[][2] = {
    {"Log", "Log"},     {"Reciprocal", "Reciprocal"}, {"Ceil", "Ceil"},   {"Erf", "Erf"},
    {"Sin", "Sin"},     {"Cos", "Cos"},               {"Tan", "Tan"},     {"Asin", "Asin"},
    {"Acos", "Acos"},   {"Atan", "Atan"},             {"Sinh", "Sinh"},   {"Cosh", "Cosh"},
    {"Asinh", "Asinh"}, {"Acosh", "Acosh"},           {"Atanh", "Atanh"}, {"Sign", "Sign"},
    {"Round", "Round"}, {"Softplus", "Softplus"},     {"Softsign", "Softsign"},
    {"IsNaN", "IsNan"}, {"IsInf", "IsInf"},
};

/* IsInf (10, 20): detect_positive / detect_negative pick which infinities
 * count: both, TF's IsInf; one, IsInf and the sign (x > 0 or x < 0); none,
 * x > x (false for every value, NaN included). */
static ms_status is_inf(rt__ox_conv *cv, const Onnx__NodeProto *n, const rt__ox_value *X,
                        const char *x) {
    const char *h = rt__ox_hint_of(n), *y;
    int pos = rt__ox_attr_i(n, "detect_positive", 1) != 0;
    int neg = rt__ox_attr_i(n, "detect_negative", 1) != 0;
    if (!pos && !neg) {
        y = rt__tf_binary(cv, "Greater", h, x, x, X->dt);
    } else {
        y = rt__tf_unary(cv, "IsInf", pos && neg ? h : rt__ox_printf(cv, "%s/any", h), x, X->dt);
        if (!pos || !neg) {
            const char *z = rt__tf_cast(cv, rt__ox_printf(cv, "%s/zero", h),
                                        scalar(cv, h, "zero_f", 0), RT_DT_FLOAT, X->dt);
            const char *sg = rt__tf_binary(cv, pos ? "Greater" : "Less",
                                           rt__ox_printf(cv, "%s/sign", h), x, z, X->dt);
            Tensorflow__NodeDef *nd = rt__tf_node(cv, "LogicalAnd", h);
            rt__tf_input(cv, nd, y);
            rt__tf_input(cv, nd, sg);
            y = nd->name;
        }
    }
    rt__ox_def_out(cv, n, 0, RT_DT_BOOL, X->rank, X->dim, y);
    return MS_OK;
}

static ms_status op_unary_more(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_real, "float or double", &X, &x)) != MS_OK) return st;
    size_t k = 0;
    while (strcmp(unary_map[k][0], n->op_type) != 0)
        k++;
    int pred = strncmp(n->op_type, "Is", 2) == 0;
    rt_dtype odt = pred ? RT_DT_BOOL : X->dt;
    if (strcmp(n->op_type, "IsInf") == 0) return is_inf(cv, n, X, x);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, unary_map[k][1], rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__ox_def_out(cv, n, 0, odt, X->rank, X->dim, nd->name);
    return MS_OK;
}

static ms_status op_not(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_bool, "bool", &X, &x)) != MS_OK) return st;
    int64_t ne = rt__ox_nelem(X);
    if (X->iv != NULL && rt__ox_is_const(X) && ne >= 0) {
        /* Known (a condition folded from static shapes): folded too, so that
         * an If on it takes its branch at import (rt_onnx_ctrl.c). */
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_BOOL, X->rank, X->dim, NULL);
        o->iv = rt__ox_alloc(cv, (size_t)ne * sizeof(int64_t) + 8);
        o->ik = rt__ox_alloc(cv, (size_t)ne + 1);
        for (int64_t i = 0; i < ne; i++)
            o->iv[i] = X->iv[i] == 0, o->ik[i] = 1;
        return MS_OK;
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "LogicalNot", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__ox_def_out(cv, n, 0, RT_DT_BOOL, X->rank, X->dim, nd->name);
    return MS_OK;
}

/* alpha * (exp(min(x, 0)) - 1): TF's Elu of the negative part. */
static const char *neg_elu(rt__ox_conv *cv, const char *h, const char *x, float alpha) {
    const char *m =
        rt__tf_binary(cv, "Minimum", rt__ox_printf(cv, "%s/neg", h), x, scalar(cv, h, "zero", 0),
                      RT_DT_FLOAT);
    const char *e = rt__tf_unary(cv, "Elu", rt__ox_printf(cv, "%s/elu", h), m, RT_DT_FLOAT);
    if (alpha == 1.0f) return e;
    return rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/alpha", h), e,
                         scalar(cv, h, "alpha_c", alpha), RT_DT_FLOAT);
}

/* Elu, Selu, Celu, Mish, Gelu, ThresholdedRelu: compositions. */
static ms_status op_act(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n), *y;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_float, "float", &X, &x)) != MS_OK) return st;
    const char *op = n->op_type;
    const char *relu = NULL;
    if (strcmp(op, "Elu") == 0 || strcmp(op, "Selu") == 0 || strcmp(op, "Celu") == 0)
        relu = rt__tf_unary(cv, "Relu", rt__ox_printf(cv, "%s/pos", h), x, RT_DT_FLOAT);
    if (strcmp(op, "Elu") == 0) {
        y = rt__tf_binary(cv, "AddV2", h, relu,
                          neg_elu(cv, h, x, rt__ox_attr_f(n, "alpha", 1.0f)), RT_DT_FLOAT);
    } else if (strcmp(op, "Selu") == 0) {
        float alpha = rt__ox_attr_f(n, "alpha", 1.67326319217681884765625f);
        float gamma = rt__ox_attr_f(n, "gamma", 1.05070102214813232421875f);
        y = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/sum", h), relu,
                          neg_elu(cv, h, x, alpha), RT_DT_FLOAT);
        y = rt__tf_binary(cv, "Mul", h, y, scalar(cv, h, "gamma", gamma), RT_DT_FLOAT);
    } else if (strcmp(op, "Celu") == 0) {
        /* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
        float alpha = rt__ox_attr_f(n, "alpha", 1.0f);
        if (alpha == 0.0f) return rt__ox_err(cv, MS_EINVAL, "alpha must not be 0");
        const char *xs = rt__tf_binary(cv, "RealDiv", rt__ox_printf(cv, "%s/scaled", h), x,
                                       scalar(cv, h, "alpha_d", alpha), RT_DT_FLOAT);
        y = rt__tf_binary(cv, "AddV2", h, relu, neg_elu(cv, h, xs, alpha), RT_DT_FLOAT);
    } else if (strcmp(op, "Mish") == 0) {
        const char *sp = rt__tf_unary(cv, "Softplus", rt__ox_printf(cv, "%s/softplus", h), x,
                                      RT_DT_FLOAT);
        sp = rt__tf_unary(cv, "Tanh", rt__ox_printf(cv, "%s/tanh", h), sp, RT_DT_FLOAT);
        y = rt__tf_binary(cv, "Mul", h, x, sp, RT_DT_FLOAT);
    } else if (strcmp(op, "ThresholdedRelu") == 0) {
        const char *m = rt__tf_binary(cv, "Greater", rt__ox_printf(cv, "%s/above", h), x,
                                      scalar(cv, h, "alpha", rt__ox_attr_f(n, "alpha", 1.0f)),
                                      RT_DT_FLOAT);
        m = rt__tf_cast(cv, rt__ox_printf(cv, "%s/mask", h), m, RT_DT_BOOL, RT_DT_FLOAT);
        y = rt__tf_binary(cv, "Mul", h, x, m, RT_DT_FLOAT);
    } else { /* Gelu */
        const char *t;
        if (rt__ox_attr_is(n, "approximate", "tanh", "none")) {
            /* tanh(sqrt(2 / pi) * (x + 0.044715 x^3)) */
            t = rt__tf_unary(cv, "Square", rt__ox_printf(cv, "%s/x2", h), x, RT_DT_FLOAT);
            t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/x3", h), t, x, RT_DT_FLOAT);
            t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/cx3", h), t,
                              scalar(cv, h, "c", 0.044715f), RT_DT_FLOAT);
            t = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/inner", h), t, x, RT_DT_FLOAT);
            t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/k", h), t,
                              scalar(cv, h, "sqrt_2_pi", (float)sqrt(2.0 / M_PI)), RT_DT_FLOAT);
            t = rt__tf_unary(cv, "Tanh", rt__ox_printf(cv, "%s/tanh", h), t, RT_DT_FLOAT);
        } else if (rt__ox_attr_is(n, "approximate", "none", "none")) {
            t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/scaled", h), x,
                              scalar(cv, h, "inv_sqrt2", (float)(1.0 / sqrt(2.0))), RT_DT_FLOAT);
            t = rt__tf_unary(cv, "Erf", rt__ox_printf(cv, "%s/erf", h), t, RT_DT_FLOAT);
        } else {
            return rt__ox_err(cv, MS_ENOTSUP, "approximate must be \"none\" or \"tanh\"");
        }
        t = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/one_plus", h), t,
                          scalar(cv, h, "one", 1.0f), RT_DT_FLOAT);
        const char *hx = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/half_x", h), x,
                                       scalar(cv, h, "half", 0.5f), RT_DT_FLOAT);
        y = rt__tf_binary(cv, "Mul", h, hx, t, RT_DT_FLOAT);
    }
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim, y);
    return MS_OK;
}

/* ---- binary with broadcasting ---- */

static ms_status two_inputs(rt__ox_conv *cv, const Onnx__NodeProto *n, int (*ok)(rt_dtype),
                            const char *want, rt__ox_value **A, rt__ox_value **B, const char **a,
                            const char **b, int *r, int64_t *od) {
    ms_status st;
    if (n->n_input != 2) return rt__ox_err(cv, MS_EINVAL, "needs 2 inputs");
    if ((st = in_typed(cv, n, 0, ok, want, A, a)) != MS_OK ||
        (st = in_typed(cv, n, 1, ok, want, B, b)) != MS_OK)
        return st;
    if ((*A)->dt != (*B)->dt)
        return rt__ox_err(cv, MS_EINVAL, "inputs have different types %s and %s",
                          rt_dtype_name((*A)->dt), rt_dtype_name((*B)->dt));
    *r = rt__ox_broadcast(*A, *B, od);
    if (*r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
    if (*r < 0) return rt__ox_err(cv, MS_ENOTSUP, "input ranks must be known");
    return MS_OK;
}

/* Comparisons and Mod take every integer and floating-point type the
 * executor computes with (rt_onnx_dtype.c). */
static int is_cmp(rt_dtype dt) {
    return rt__ox_dtype_num(dt);
}
static int is_cmp_eq(rt_dtype dt) {
    return rt__ox_dtype_num(dt) || dt == RT_DT_BOOL;
}
static int is_cmp_eq_str(rt_dtype dt) {
    return is_cmp_eq(dt) || dt == RT_DT_STRING;
}

static ms_status op_compare(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    static const char *const map[][2] = {
        {"Equal", "Equal"},          {"Less", "Less"},          {"Greater", "Greater"},
        {"LessOrEqual", "LessEqual"}, {"GreaterOrEqual", "GreaterEqual"},
        {"And", "LogicalAnd"},       {"Or", "LogicalOr"},       {"Xor", "NotEqual"},
    };
    size_t k = 0;
    while (strcmp(map[k][0], n->op_type) != 0)
        k++;
    int logic = k >= 5;
    rt__ox_value *A, *B;
    const char *a, *b;
    int64_t od[OX_MAXR];
    int r;
    ms_status st = two_inputs(cv, n, logic ? is_bool : k == 0 ? is_cmp_eq_str : is_cmp,
                              logic ? "bool" : "integer and floating-point types", &A, &B, &a, &b,
                              &r, od);
    if (st != MS_OK) return st;
    int64_t na = rt__ox_nelem(A), nb = rt__ox_nelem(B), no = 1;
    for (int i = 0; i < r && no >= 0; i++)
        no = od[i] >= 0 ? no * od[i] : -1;
    int folds = A->dt == RT_DT_INT64 || A->dt == RT_DT_INT32 || A->dt == RT_DT_BOOL;
    if (folds && A->iv && B->iv && rt__ox_is_const(A) && rt__ox_is_const(B) && no >= 0 &&
        (na == 1 || na == no) && (nb == 1 || nb == no)) {
        /* Integers known at import (shape arithmetic): folded, so that an If
         * on the result takes its branch at import (rt_onnx_ctrl.c). */
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_BOOL, r, od, NULL);
        o->iv = rt__ox_alloc(cv, (size_t)no * sizeof(int64_t) + 8);
        o->ik = rt__ox_alloc(cv, (size_t)no + 1);
        memset(o->ik, 1, (size_t)no);
        for (int64_t i = 0; i < no; i++) {
            int64_t x = A->iv[na == 1 ? 0 : i], y = B->iv[nb == 1 ? 0 : i];
            int v[8] = {x == y, x < y, x > y, x <= y, x >= y, x && y, x || y, !x != !y};
            o->iv[i] = v[k];
        }
        return MS_OK;
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, map[k][1], rt__ox_hint_of(n));
    rt__tf_input(cv, nd, a);
    rt__tf_input(cv, nd, b);
    if (k < 5 || k == 7) rt__tf_attr_type(cv, nd, "T", A->dt);
    rt__ox_def_out(cv, n, 0, RT_DT_BOOL, r, od, nd->name);
    return MS_OK;
}

static ms_status op_mod(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *A, *B;
    const char *a, *b;
    int64_t od[OX_MAXR];
    int r;
    int64_t fm = rt__ox_attr_i(n, "fmod", 0);
    if (fm != 0 && fm != 1) return rt__ox_err(cv, MS_EINVAL, "fmod must be 0 or 1");
    ms_status st = two_inputs(cv, n, is_cmp, "integer and floating-point types", &A, &B, &a, &b,
                              &r, od);
    if (st != MS_OK) return st;
    if (fm == 0 && !rt__ox_dtype_int(A->dt))
        return rt__ox_err(cv, MS_EINVAL, "fmod=0 needs integer inputs (\"%s\" is %s)", A->name,
                          rt_dtype_name(A->dt));
    /* fmod=0: the result has the divisor's sign, as TF's FloorMod; fmod=1:
     * the dividend's (C's fmod and %), as TruncateMod. */
    rt__ox_def_out(cv, n, 0, A->dt, r, od,
                   rt__tf_binary(cv, fm ? "TruncateMod" : "FloorMod", rt__ox_hint_of(n), a, b,
                                 A->dt));
    return MS_OK;
}

static ms_status op_prelu(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *A, *B;
    const char *a, *b, *h = rt__ox_hint_of(n);
    int64_t od[OX_MAXR];
    int r;
    ms_status st = two_inputs(cv, n, is_float, "float", &A, &B, &a, &b, &r, od);
    if (st != MS_OK) return st;
    /* max(x, 0) + slope * min(x, 0): one of the two terms is 0. */
    const char *p = rt__tf_unary(cv, "Relu", rt__ox_printf(cv, "%s/pos", h), a, RT_DT_FLOAT);
    const char *m = rt__tf_binary(cv, "Minimum", rt__ox_printf(cv, "%s/neg", h), a,
                                  scalar(cv, h, "zero", 0), RT_DT_FLOAT);
    m = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/slope", h), m, b, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, r, od, rt__tf_binary(cv, "AddV2", h, p, m, RT_DT_FLOAT));
    return MS_OK;
}

static ms_status op_where(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *C, *X, *Y;
    const char *c, *x, *y;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_bool, "bool", &C, &c)) != MS_OK ||
        (st = in_typed(cv, n, 1, is_cmp_eq, "integer, floating and bool types", &X, &x)) != MS_OK ||
        (st = in_typed(cv, n, 2, is_cmp_eq, "integer, floating and bool types", &Y, &y)) != MS_OK)
        return st;
    if (X->dt != Y->dt) return rt__ox_err(cv, MS_EINVAL, "X and Y have different types");
    rt__ox_value t = {.rank = 0};
    int64_t od[OX_MAXR];
    int r = rt__ox_broadcast(C, X, t.dim);
    t.rank = r;
    if (r >= 0) r = rt__ox_broadcast(&t, Y, od);
    if (r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
    if (r < 0) return rt__ox_err(cv, MS_ENOTSUP, "input ranks must be known");
    rt__ox_def_out(cv, n, 0, X->dt, r, od, rt__tf_select(cv, rt__ox_hint_of(n), c, x, y, X->dt));
    return MS_OK;
}

ms_status rt__ox_op_variadic(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    const char *op = strcmp(n->op_type, "Max") == 0   ? "Maximum"
                     : strcmp(n->op_type, "Min") == 0 ? "Minimum"
                                                      : "AddV2";
    const char *h = rt__ox_hint_of(n), *acc = NULL, *x;
    rt__ox_value cur = {.rank = 0}, *X;
    ms_status st;
    if (n->n_input < 1) return rt__ox_err(cv, MS_EINVAL, "needs at least one input");
    for (size_t i = 0; i < n->n_input; i++) {
        if ((st = in_typed(cv, n, (int)i, is_float, "float", &X, &x)) != MS_OK) return st;
        if (i == 0) {
            acc = x;
            cur.rank = X->rank;
            memcpy(cur.dim, X->dim, sizeof(cur.dim));
            continue;
        }
        int64_t od[OX_MAXR];
        int r = rt__ox_broadcast(&cur, X, od);
        if (r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
        if (r < 0) return rt__ox_err(cv, MS_ENOTSUP, "input ranks must be known");
        acc = rt__tf_binary(cv, op, rt__ox_printf(cv, "%s/%zu", h, i), acc, x, RT_DT_FLOAT);
        cur.rank = r;
        memcpy(cur.dim, od, sizeof(od));
    }
    if (strcmp(n->op_type, "Mean") == 0 && n->n_input > 1)
        acc = rt__tf_binary(cv, "RealDiv", h, acc, scalar(cv, h, "count", (float)n->n_input),
                            RT_DT_FLOAT);
    else
        acc = rt__tf_unary(cv, "Identity", h, acc, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, cur.rank, cur.dim, acc);
    return MS_OK;
}

/* ---- shapes and indices ---- */

static ms_status op_size(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    int64_t ne = rt__ox_nelem(X);
    if (ne >= 0) {
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, RT_DT_INT64, 0, NULL, NULL);
        o->iv = rt__ox_alloc(cv, sizeof(int64_t));
        o->ik = rt__ox_alloc(cv, 1);
        o->iv[0] = ne;
        o->ik[0] = 1;
        return MS_OK;
    }
    const char *x;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Size", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "out_type", RT_DT_INT64);
    rt__ox_def_out(cv, n, 0, RT_DT_INT64, 0, NULL, nd->name);
    return MS_OK;
}

static ms_status op_range(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *V[3];
    const char *t[3];
    ms_status st;
    for (int i = 0; i < 3; i++) {
        if ((st = in_typed(cv, n, i, is_num, "float, int32, int64", &V[i], &t[i])) != MS_OK)
            return st;
        if (V[i]->rank > 0 && rt__ox_nelem(V[i]) != 1)
            return rt__ox_err(cv, MS_EINVAL, "start, limit and delta must be scalars");
        if (V[i]->dt != V[0]->dt) return rt__ox_err(cv, MS_EINVAL, "inputs of different types");
    }
    int64_t len = -1;
    if (rt__ox_is_const(V[0]) && rt__ox_is_const(V[1]) && rt__ox_is_const(V[2])) {
        double s = V[0]->f ? V[0]->f[0] : (double)V[0]->iv[0];
        double l = V[1]->f ? V[1]->f[0] : (double)V[1]->iv[0];
        double d = V[2]->f ? V[2]->f[0] : (double)V[2]->iv[0];
        if (d == 0) return rt__ox_err(cv, MS_EINVAL, "delta is 0");
        double c = ceil((l - s) / d);
        if (!(c <= (double)OX_DIM_MAX)) return rt__ox_err(cv, MS_EINVAL, "range too long");
        len = c > 0 ? (int64_t)c : 0;
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Range", rt__ox_hint_of(n));
    for (int i = 0; i < 3; i++)
        rt__tf_input(cv, nd, t[i]);
    rt__tf_attr_type(cv, nd, "Tidx", V[0]->dt);
    rt__ox_def_out(cv, n, 0, V[0]->dt, 1, &len, nd->name);
    return MS_OK;
}

static ms_status op_tile(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *R;
    const char *x, *rp;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_any, "float, int32, int64, bool", &X, &x)) != MS_OK ||
        (st = in_typed(cv, n, 1, is_int, "int64", &R, &rp)) != MS_OK)
        return st;
    if (X->rank < 0 || R->rank != 1 || R->dim[0] != X->rank)
        return rt__ox_err(cv, MS_EINVAL, "repeats must have one entry per input dimension");
    int64_t od[OX_MAXR];
    for (int i = 0; i < X->rank; i++) {
        od[i] = -1;
        if (R->iv && R->ik[i] && X->dim[i] >= 0) {
            if (rt__ox_out_of(R->iv[i], 0, OX_DIM_MAX))
                return rt__ox_err(cv, MS_EINVAL, "repeats out of range");
            od[i] = X->dim[i] * R->iv[i];
        }
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Tile", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rp);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tmultiples", R->dt);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, od, nd->name);
    return MS_OK;
}

const char *rt__ox_fill(rt__ox_conv *cv, const char *h, const char *shape, rt_dtype sdt,
                        rt_dtype dt, double value) {
    const char *v;
    if (dt == RT_DT_FLOAT) {
        v = scalar(cv, h, "value", (float)value);
    } else {
        int64_t iv = (int64_t)value;
        v = rt__tf_const_int(cv, rt__ox_printf(cv, "%s/value", h), dt, 0, NULL, &iv);
    }
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Fill", h);
    rt__tf_input(cv, nd, shape);
    rt__tf_input(cv, nd, v);
    rt__tf_attr_type(cv, nd, "T", dt);
    rt__tf_attr_type(cv, nd, "index_type", sdt);
    return nd->name;
}

/* Expand to a shape known only at run time: x + zeros(shape) broadcasts
 * both ways, which is Expand's rule (bool: x or false). */
static ms_status expand_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X,
                           const char *x, rt__ox_value *S) {
    const char *h = rt__ox_hint_of(n), *s;
    ms_status st;
    if ((st = rt__ox_tf(cv, S, &s)) != MS_OK) return st;
    rt__ox_value t = {.rank = (int)S->dim[0]};
    for (int i = 0; i < t.rank; i++)
        t.dim[i] = S->iv && S->ik[i] && S->iv[i] >= 0 ? S->iv[i] : -1;
    int64_t od[OX_MAXR];
    int r = rt__ox_broadcast(X, &t, od);
    if (r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
    if (r < 0) return rt__ox_err(cv, MS_ENOTSUP, "input rank must be known");
    for (int i = 0; i < r; i++) /* a 1 may still meet a larger run-time entry */
        if (od[i] == 1) od[i] = -1;
    const char *z;
    if (is_any(X->dt)) {
        z = rt__ox_fill(cv, rt__ox_printf(cv, "%s/zeros", h), s, S->dt, X->dt, 0);
    } else { /* int64 zeros cast to the type (Fill's constant is int64 or float) */
        z = rt__ox_fill(cv, rt__ox_printf(cv, "%s/zeros64", h), s, S->dt, RT_DT_INT64, 0);
        z = rt__tf_cast(cv, rt__ox_printf(cv, "%s/zeros", h), z, RT_DT_INT64, X->dt);
    }
    const char *y = X->dt == RT_DT_BOOL ? rt__tf_binary(cv, "LogicalOr", h, x, z, RT_DT_BOOL)
                                        : rt__tf_binary(cv, "AddV2", h, x, z, X->dt);
    rt__ox_def_out(cv, n, 0, X->dt, r, od, y);
    return MS_OK;
}

static ms_status op_expand(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *S;
    const char *x;
    ms_status st;
    /* any type of the executor (rt_onnx_dtype.c's table lets them in) */
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &S, NULL)) != MS_OK)
        return st;
    if (S->rank != 1 || S->dim[0] < 0 || S->dim[0] > OX_MAXR || !is_int(S->dt))
        return rt__ox_err(cv, MS_ENOTSUP, "the shape must be an integer vector of static length");
    if (!rt__ox_is_const(S)) return expand_rt(cv, n, X, x, S);
    rt__ox_value t = {.rank = (int)S->dim[0]};
    for (int i = 0; i < t.rank; i++) {
        if (rt__ox_out_of(S->iv[i], 0, OX_DIM_MAX))
            return rt__ox_err(cv, MS_EINVAL, "shape out of range");
        t.dim[i] = S->iv[i];
    }
    int64_t od[OX_MAXR];
    int r = rt__ox_broadcast(X, &t, od);
    if (r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
    if (r < 0 || rt__ox_count_unknown(r, od) > 0)
        return rt__ox_err(cv, MS_ENOTSUP, "the output shape must be known at conversion time");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "BroadcastTo", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/shape", nd->name),
                                          RT_DT_INT64, 1, (int64_t[]){r}, od));
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tidx", RT_DT_INT64);
    rt__ox_def_out(cv, n, 0, X->dt, r, od, nd->name);
    return MS_OK;
}

/* ArgMax / ArgMin of float x over axis as an int64 tensor (keepdims kept). */
static const char *arg_node(rt__ox_conv *cv, const char *op, const char *h, const char *x,
                            int axis) {
    Tensorflow__NodeDef *nd = rt__tf_node(cv, op, h);
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/axis", h), axis));
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, nd, "Tidx", RT_DT_INT32);
    rt__tf_attr_type(cv, nd, "output_type", RT_DT_INT64);
    return nd->name;
}

static ms_status op_argmax(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_float, "float", &X, &x)) != MS_OK) return st;
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), X->rank);
    if (X->rank < 1 || axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    int keep = (int)rt__ox_attr_i(n, "keepdims", 1);
    int lastidx = rt__ox_attr_i(n, "select_last_index", 0) != 0;
    if (lastidx && X->dim[axis] < 0)
        return rt__ox_err(cv, MS_ENOTSUP, "select_last_index needs a static axis");
    if (lastidx) {
        /* The last extreme is the first one of the reversed axis. */
        Tensorflow__NodeDef *rv = rt__tf_node(cv, "ReverseV2", rt__ox_printf(cv, "%s/rev", h));
        rt__tf_input(cv, rv, x);
        rt__tf_input(cv, rv, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/rev_axis", h), 1,
                                           (int64_t[]){axis}));
        rt__tf_attr_type(cv, rv, "T", RT_DT_FLOAT);
        rt__tf_attr_type(cv, rv, "Tidx", RT_DT_INT32);
        x = rv->name;
    }
    const char *y = arg_node(cv, strcmp(n->op_type, "ArgMax") == 0 ? "ArgMax" : "ArgMin",
                             keep || lastidx ? rt__ox_printf(cv, "%s/arg", h) : h, x, axis);
    if (lastidx) {
        int64_t d1 = X->dim[axis] - 1;
        y = rt__tf_binary(cv, "Sub", keep ? rt__ox_printf(cv, "%s/last", h) : h,
                          rt__tf_const_int(cv, rt__ox_printf(cv, "%s/d1", h), RT_DT_INT64, 0,
                                           NULL, &d1),
                          y, RT_DT_INT64);
    }
    int64_t od[OX_MAXR];
    int r = 0;
    for (int i = 0; i < X->rank; i++)
        if (i != axis || keep) od[r++] = i == axis ? 1 : X->dim[i];
    if (keep) {
        Tensorflow__NodeDef *e = rt__tf_node(cv, "ExpandDims", h);
        rt__tf_input(cv, e, y);
        rt__tf_input(cv, e, rt__tf_i32(cv, rt__ox_printf(cv, "%s/dim", h), axis));
        rt__tf_attr_type(cv, e, "T", RT_DT_INT64);
        rt__tf_attr_type(cv, e, "Tdim", RT_DT_INT32);
        y = e->name;
    }
    rt__ox_def_out(cv, n, 0, RT_DT_INT64, r, od, y);
    return MS_OK;
}

static ms_status op_hardmax(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_float, "float", &X, &x)) != MS_OK) return st;
    int axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", -1), X->rank);
    if (X->rank < 1 || axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    if (X->dim[axis] < 0) return rt__ox_err(cv, MS_ENOTSUP, "the axis must be static");
    const char *a = arg_node(cv, "ArgMax", rt__ox_printf(cv, "%s/arg", h), x, axis);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "OneHot", h);
    rt__tf_input(cv, nd, a);
    rt__tf_input(cv, nd, rt__tf_i32(cv, rt__ox_printf(cv, "%s/depth", h), X->dim[axis]));
    rt__tf_input(cv, nd, scalar(cv, h, "on", 1.0f));
    rt__tf_input(cv, nd, scalar(cv, h, "off", 0.0f));
    rt__tf_attr_type(cv, nd, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, nd, "TI", RT_DT_INT64);
    rt__tf_attr_i(cv, nd, "axis", axis);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim, nd->name);
    return MS_OK;
}

static int is_num_or_double(rt_dtype dt) {
    return is_num(dt) || dt == RT_DT_DOUBLE;
}

static ms_status op_cumsum(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *A;
    const char *x, *a;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_num_or_double, "float, double, int32, int64", &X, &x)) !=
            MS_OK ||
        (st = in_typed(cv, n, 1, is_int, "int32, int64", &A, &a)) != MS_OK)
        return st;
    if (A->rank > 0 && rt__ox_nelem(A) != 1) return rt__ox_err(cv, MS_EINVAL, "axis: a scalar");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Cumsum", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, A->rank > 0 ? rt__tf_reshape(cv, rt__ox_printf(cv, "%s/axis", nd->name),
                                                      a, A->dt, 0, NULL)
                                     : a);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tidx", A->dt);
    rt__tf_attr_b(cv, nd, "exclusive", rt__ox_attr_i(n, "exclusive", 0) != 0);
    rt__tf_attr_b(cv, nd, "reverse", rt__ox_attr_i(n, "reverse", 0) != 0);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, nd->name);
    return MS_OK;
}

/* Trilu with k known at run time: keep x where j - i >= k (upper) or
 * j - i <= k (lower), from a constant j - i table of the static last two
 * dims. */
static ms_status trilu_rt(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X,
                          const char *x, rt__ox_value *K, int upper) {
    const char *h = rt__ox_hint_of(n), *k;
    ms_status st;
    int64_t N = X->dim[X->rank - 2], M = X->dim[X->rank - 1];
    if (N < 0 || M < 0 || N * M > ((int64_t)1 << 24))
        return rt__ox_err(cv, MS_ENOTSUP, "a run-time k needs static last two dims");
    if (K->dt != RT_DT_INT64 || rt__ox_nelem(K) != 1)
        return rt__ox_err(cv, MS_EINVAL, "k must be one int64");
    if ((st = rt__ox_tf(cv, K, &k)) != MS_OK) return st;
    if (K->rank > 0)
        k = rt__tf_reshape(cv, rt__ox_printf(cv, "%s/k", h), k, RT_DT_INT64, 0, NULL);
    int64_t *d = rt__ox_alloc(cv, (size_t)(N * M + 1) * sizeof(int64_t)), dd[2] = {N, M};
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++)
            d[i * M + j] = j - i;
    const char *diff = rt__tf_const_int(cv, rt__ox_printf(cv, "%s/diff", h), RT_DT_INT64, 2, dd, d);
    const char *mask = rt__tf_binary(cv, upper ? "GreaterEqual" : "LessEqual",
                                     rt__ox_printf(cv, "%s/mask", h), diff, k, RT_DT_INT64);
    const char *z = rt__tf_unary(cv, "ZerosLike", rt__ox_printf(cv, "%s/zeros", h), x, X->dt);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, rt__tf_select(cv, h, mask, x, z, X->dt));
    return MS_OK;
}

static ms_status op_trilu(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *K = rt__ox_in(cv, n, 1);
    const char *x;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_any, "float, int32, int64, bool", &X, &x)) != MS_OK) return st;
    if (X->rank < 2) return rt__ox_err(cv, MS_EINVAL, "input rank must be >= 2");
    int64_t k = 0;
    int upper = rt__ox_attr_i(n, "upper", 1) != 0;
    if (K != NULL && (!K->iv || !rt__ox_is_const(K)))
        return trilu_rt(cv, n, X, x, K, upper);
    if (K != NULL) {
        if (rt__ox_nelem(K) != 1) return rt__ox_err(cv, MS_EINVAL, "k must be one value");
        k = K->iv[0];
    }
    /* MatrixBandPart keeps i - j <= lower and j - i <= upper (-1: all). */
    int64_t lo, hi;
    if (upper && k <= 0)
        lo = -k, hi = -1;
    else if (!upper && k >= 0)
        lo = -1, hi = k;
    else
        return rt__ox_err(cv, MS_ENOTSUP, "%s with k = %lld is not supported",
                          upper ? "upper" : "lower", (long long)k);
    if (lo > OX_DIM_MAX || hi > OX_DIM_MAX) return rt__ox_err(cv, MS_EINVAL, "k out of range");
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "MatrixBandPart", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/lower", nd->name),
                                          RT_DT_INT64, 0, NULL, &lo));
    rt__tf_input(cv, nd, rt__tf_const_int(cv, rt__ox_printf(cv, "%s/upper", nd->name),
                                          RT_DT_INT64, 0, NULL, &hi));
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tindex", RT_DT_INT64);
    rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, nd->name);
    return MS_OK;
}

/* The inputs and attributes LayerNormalization and RMSNormalization share:
 * float X and scale, stash_type 1, and the normalised axes axis..rank-1. */
static ms_status norm_common(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value **X,
                             const char **x, const char **s, int *axis, int64_t *axes, int *na) {
    rt__ox_value *S;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_float, "float", X, x)) != MS_OK ||
        (st = in_typed(cv, n, 1, is_float, "float", &S, s)) != MS_OK)
        return st;
    if (rt__ox_attr_i(n, "stash_type", 1) != 1)
        return rt__ox_err(cv, MS_ENOTSUP, "stash_type other than 1 (float) is not supported");
    *axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", -1), (*X)->rank);
    if ((*X)->rank < 1 || *axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    *na = 0;
    for (int i = *axis; i < (*X)->rank; i++)
        axes[(*na)++] = i;
    return MS_OK;
}

/* RMSNormalization (opset 23): x * rsqrt(mean(x^2 over axis..) + eps) * scale. */
static ms_status op_rmsnorm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x, *s, *h = rt__ox_hint_of(n);
    int64_t axes[OX_MAXR];
    int axis, na;
    ms_status st = norm_common(cv, n, &X, &x, &s, &axis, axes, &na);
    if (st != MS_OK) return st;
    Tensorflow__NodeDef *m = rt__tf_node(cv, "Mean", rt__ox_printf(cv, "%s/mean_sq", h));
    rt__tf_input(cv, m, rt__tf_unary(cv, "Square", rt__ox_printf(cv, "%s/sq", h), x, RT_DT_FLOAT));
    rt__tf_input(cv, m, rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/axes", h), na, axes));
    rt__tf_attr_type(cv, m, "T", RT_DT_FLOAT);
    rt__tf_attr_type(cv, m, "Tidx", RT_DT_INT32);
    rt__tf_attr_b(cv, m, "keep_dims", 1);
    const char *t = rt__tf_binary(cv, "AddV2", rt__ox_printf(cv, "%s/eps", h), m->name,
                                  scalar(cv, h, "epsilon", rt__ox_attr_f(n, "epsilon", 1e-5f)),
                                  RT_DT_FLOAT);
    t = rt__tf_unary(cv, "Rsqrt", rt__ox_printf(cv, "%s/rsqrt", h), t, RT_DT_FLOAT);
    t = rt__tf_binary(cv, "Mul", rt__ox_printf(cv, "%s/normalized", h), x, t, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim,
                   rt__tf_binary(cv, "Mul", h, t, s, RT_DT_FLOAT));
    return MS_OK;
}

static ms_status op_layernorm(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *B = rt__ox_in(cv, n, 2);
    const char *x, *s, *b = NULL, *h = rt__ox_hint_of(n);
    int64_t axes[OX_MAXR];
    int axis, na;
    ms_status st = norm_common(cv, n, &X, &x, &s, &axis, axes, &na);
    if (st != MS_OK) return st;
    if (B && (st = in_typed(cv, n, 2, is_float, "float", &B, &b)) != MS_OK) return st;
    float eps = rt__ox_attr_f(n, "epsilon", 1e-5f);
    const char *ax = rt__tf_i32vec(cv, rt__ox_printf(cv, "%s/axes", h), na, axes), *mean, *inv;
    const char *t = rt__ox_normalize(cv, h, x, ax, eps, &mean, &inv);
    t = rt__tf_binary(cv, "Mul", b ? rt__ox_printf(cv, "%s/scaled", h) : h, t, s, RT_DT_FLOAT);
    if (b) t = rt__tf_binary(cv, "AddV2", h, t, b, RT_DT_FLOAT);
    rt__ox_def_out(cv, n, 0, RT_DT_FLOAT, X->rank, X->dim, t);
    /* Mean and InvStdDev: the statistics with the normalised axes kept as 1. */
    int64_t sd[OX_MAXR];
    for (int i = 0; i < X->rank; i++)
        sd[i] = i < axis ? X->dim[i] : 1;
    rt__ox_def_out(cv, n, 1, RT_DT_FLOAT, X->rank, sd, mean);
    rt__ox_def_out(cv, n, 2, RT_DT_FLOAT, X->rank, sd, inv);
    return MS_OK;
}

/* TopKV2's kernel compares every integer type exactly (64-bit keys). */
static int is_topk_type(rt_dtype dt) {
    return dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE || rt__ox_dtype_int(dt);
}

static ms_status op_topk(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *K;
    const char *x, *k, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_topk_type, "float, double, integers", &X, &x)) != MS_OK ||
        (st = in_typed(cv, n, 1, is_int, "int64", &K, &k)) != MS_OK)
        return st;
    int r = X->rank, axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", -1), r);
    if (r < 1 || axis < 0) return rt__ox_err(cv, MS_EINVAL, "axis out of range");
    if (rt__ox_nelem(K) != 1) return rt__ox_err(cv, MS_EINVAL, "K must hold one value");
    int largest = rt__ox_attr_i(n, "largest", 1) != 0;
    if (!largest && X->dt != RT_DT_FLOAT)
        return rt__ox_err(cv, MS_ENOTSUP, "largest=0 is supported for float only");
    /* TF's TopKV2 works on the last axis and picks the largest, ties by the
     * lower index as ONNX wants; other axes go there and back, the smallest
     * are the largest of -x. */
    int64_t perm[OX_MAXR];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[axis] = r - 1;
    perm[r - 1] = axis;
    if (axis != r - 1)
        x = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/to_last", h), x, X->dt, r, perm);
    if (!largest) x = rt__tf_unary(cv, "Neg", rt__ox_printf(cv, "%s/neg", h), x, X->dt);
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "TopKV2", rt__ox_printf(cv, "%s/topk", h));
    rt__tf_input(cv, nd, x);
    rt__tf_input(cv, nd, k);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "Tk", K->dt);
    rt__tf_attr_type(cv, nd, "index_type", RT_DT_INT64);
    rt__tf_attr_b(cv, nd, "sorted", 1);
    const char *v = rt__tf_out(cv, nd, 0), *ix = rt__tf_out(cv, nd, 1);
    if (!largest) v = rt__tf_unary(cv, "Neg", rt__ox_printf(cv, "%s/values", h), v, X->dt);
    if (axis != r - 1) {
        v = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/values_back", h), v, X->dt, r, perm);
        ix = rt__tf_transpose(cv, rt__ox_printf(cv, "%s/indices_back", h), ix, RT_DT_INT64, r,
                              perm);
    }
    int64_t od[OX_MAXR];
    memcpy(od, X->dim, sizeof(od));
    od[axis] = K->iv && rt__ox_is_const(K) ? K->iv[0] : -1;
    rt__ox_def_out(cv, n, 0, X->dt, r, od, rt__tf_unary(cv, "Identity", h, v, X->dt));
    rt__ox_def_out(cv, n, 1, RT_DT_INT64, r, od,
                   rt__tf_unary(cv, "Identity", rt__ox_printf(cv, "%s/indices", h), ix,
                                RT_DT_INT64));
    return MS_OK;
}

/* GatherElements: our OnnxGatherElements kernel (the output takes the
 * indices' shape at run time; negative indices count from the end, one out of
 * range fails the run). */
static ms_status op_gather_elements(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *I;
    const char *x, *ix;
    ms_status st;
    if ((st = in_typed(cv, n, 0, is_any, "float, int32, int64, bool", &X, &x)) != MS_OK ||
        (st = in_typed(cv, n, 1, is_int, "int32, int64", &I, &ix)) != MS_OK)
        return st;
    int r = X->rank, axis = rt__ox_norm_axis(rt__ox_attr_i(n, "axis", 0), r);
    if (r < 1 || axis < 0 || I->rank != r)
        return rt__ox_err(cv, MS_EINVAL, "indices must have the input's rank; axis in range");
    Tensorflow__NodeDef *g = rt__tf_node(cv, "OnnxGatherElements", rt__ox_hint_of(n));
    rt__tf_input(cv, g, x);
    rt__tf_input(cv, g, ix);
    rt__tf_attr_i(cv, g, "axis", axis);
    rt__ox_def_out(cv, n, 0, X->dt, r, I->dim, g->name);
    return MS_OK;
}

/* clang-format off */
static const struct { const char *op; rt__ox_handler fn; } more[] = {
    {"Log", op_unary_more},    {"Reciprocal", op_unary_more}, {"Ceil", op_unary_more},
    {"Erf", op_unary_more},    {"Sin", op_unary_more},        {"Cos", op_unary_more},
    {"Tan", op_unary_more},    {"Asin", op_unary_more},       {"Acos", op_unary_more},
    {"Atan", op_unary_more},   {"Sinh", op_unary_more},       {"Cosh", op_unary_more},
    {"Asinh", op_unary_more},  {"Acosh", op_unary_more},      {"Atanh", op_unary_more},
    {"Sign", op_unary_more},   {"Round", op_unary_more},      {"Softplus", op_unary_more},
    {"Softsign", op_unary_more}, {"IsNaN", op_unary_more},    {"IsInf", op_unary_more},
    {"Not", op_not},
    {"Elu", op_act},  {"Selu", op_act}, {"Celu", op_act}, {"Mish", op_act}, {"Gelu", op_act},
    {"ThresholdedRelu", op_act},
    {"Equal", op_compare}, {"Less", op_compare}, {"Greater", op_compare},
    {"LessOrEqual", op_compare}, {"GreaterOrEqual", op_compare},
    {"And", op_compare}, {"Or", op_compare}, {"Xor", op_compare},
    {"Mod", op_mod}, {"PRelu", op_prelu}, {"Where", op_where},
    {"Sum", rt__ox_op_variadic}, {"Mean", rt__ox_op_variadic},
    {"Size", op_size}, {"CastLike", rt__ox_op_cast_like}, {"Range", op_range}, {"Tile", op_tile},
    {"Expand", op_expand}, {"ArgMax", op_argmax}, {"ArgMin", op_argmax},
    {"Hardmax", op_hardmax}, {"CumSum", op_cumsum}, {"Trilu", op_trilu},
    {"LayerNormalization", op_layernorm}, {"TopK", op_topk},
    {"GatherElements", op_gather_elements}, {"RMSNormalization", op_rmsnorm},
};
/* clang-format on */

rt__ox_handler rt__ox_more_handler(const char *op_type) {
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
        if (strcmp(more[i].op, op_type) == 0) return more[i].fn;
    return NULL;
}
