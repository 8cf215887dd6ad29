/* rt_onnx_dtype.c - element types in the ONNX converter: which types each
 * op's handler takes at run time (checked before the handler runs, so a type
 * a handler was not written for is refused at import, naming node, op and
 * type, instead of failing or computing wrongly at run time), the names of
 * ONNX types this build cannot hold, Cast / CastLike between every type the
 * executor holds, and the bit-level ops BitShift, BitCast and Bitwise*.
 *
 * The executor's Cast kernel implements ONNX's rules: float to integer
 * truncates toward zero (saturating, NaN -> 0, where ONNX leaves the result
 * undefined), float16 / bfloat16 round to nearest even in one rounding, to
 * bool is "not zero" (NaN -> true), integer to integer wraps.
 */
#include <math.h>
#include <string.h>

#include "rt_lowp.h"
#include "rt_onnx_int.h"

#define B(dt) (1ull << (dt))
/* What every handler took at run time before the other types reached the
 * converter (graph inputs and Cast results). */
#define TY_BASE (B(RT_DT_FLOAT) | B(RT_DT_INT32) | B(RT_DT_INT64) | B(RT_DT_BOOL))
#define TY_INTS                                                                                    \
    (B(RT_DT_INT8) | B(RT_DT_INT16) | B(RT_DT_INT32) | B(RT_DT_INT64) | B(RT_DT_UINT8) |          \
     B(RT_DT_UINT16) | B(RT_DT_UINT32) | B(RT_DT_UINT64))
#define TY_FLOATS (B(RT_DT_FLOAT) | B(RT_DT_DOUBLE) | B(RT_DT_HALF) | B(RT_DT_BFLOAT16))
#define TY_NUM (TY_INTS | TY_FLOATS)
#define TY_ALL (TY_NUM | B(RT_DT_BOOL) | B(RT_DT_STRING))
/* float8, float4, e8m0, int4, int2 (rt_lowp.h): Cast / CastLike,
 * Quantize / DequantizeLinear, Identity, Shape and Size only */
#define TY_LOWP                                                                                    \
    (B(RT_DT_FLOAT8_E4M3FN) | B(RT_DT_FLOAT8_E4M3FNUZ) | B(RT_DT_FLOAT8_E5M2) |                   \
     B(RT_DT_FLOAT8_E5M2FNUZ) | B(RT_DT_FLOAT8_E8M0) | B(RT_DT_FLOAT4_E2M1FN) | B(RT_DT_INT4) |    \
     B(RT_DT_UINT4) | B(RT_DT_INT2) | B(RT_DT_UINT2))

/* Ops whose handlers take more than TY_BASE: every input must be one of
 * `types` (constants the converter folds included). */
static const struct {
    const char *op;
    uint64_t types;
} wide_ops[] = {
    {"Cast", TY_NUM | B(RT_DT_BOOL) | TY_LOWP},
    {"CastLike", TY_NUM | B(RT_DT_BOOL) | TY_LOWP},
    {"Identity", TY_ALL | TY_LOWP},
    /* rt_onnx_ctrl.c: values only pass through (the condition is checked there) */
    {"If", TY_ALL},
    {"Loop", TY_ALL},
    {"Scan", TY_ALL},
    /* only the shape is read (rt_onnx_shape.c, rt_onnx_more.c op_size) */
    {"Shape", TY_ALL | TY_LOWP},
    {"Size", TY_ALL | TY_LOWP},
    /* rt_onnx_ops.c op_binary (two inputs; Max / Min of more are below) */
    {"Add", TY_NUM},
    {"Sub", TY_NUM},
    {"Mul", TY_NUM},
    {"Div", TY_NUM},
    {"Pow", TY_NUM},
    {"Max", TY_NUM},
    {"Min", TY_NUM},
    /* rt_onnx_more.c op_compare and op_mod */
    {"Equal", TY_NUM | B(RT_DT_BOOL) | B(RT_DT_STRING)},
    {"Less", TY_NUM},
    {"Greater", TY_NUM},
    {"LessOrEqual", TY_NUM},
    {"GreaterOrEqual", TY_NUM},
    {"Mod", TY_NUM},
    {"BitShift", B(RT_DT_UINT8) | B(RT_DT_UINT16) | B(RT_DT_UINT32) | B(RT_DT_UINT64)},
    {"BitCast", TY_NUM | B(RT_DT_BOOL)},
    {"Einsum", B(RT_DT_FLOAT) | B(RT_DT_DOUBLE)},
    {"BitwiseAnd", TY_INTS},
    {"BitwiseOr", TY_INTS},
    {"BitwiseXor", TY_INTS},
    {"BitwiseNot", TY_INTS},
    /* rt_onnx_more.c op_expand: BroadcastTo, or x + zeros (float16 and
     * bfloat16 go through float, exactly) */
    {"Expand", TY_BASE | TY_INTS | B(RT_DT_DOUBLE)},
    /* rt_onnx_more.c op_topk (float16 / bfloat16 through float) */
    {"TopK", TY_BASE | TY_INTS | B(RT_DT_DOUBLE)},
    /* rt_onnx_ops.c op_clip (opset 11+) */
    {"Clip", TY_NUM},
    /* rt_onnx_more.c */
    {"Where", TY_NUM | B(RT_DT_BOOL)},
    {"StringConcat", B(RT_DT_STRING)},
    {"StringSplit", B(RT_DT_STRING)},
    {"RegexFullMatch", B(RT_DT_STRING)},
    {"StringNormalizer", B(RT_DT_STRING)},
    {"CumSum", TY_BASE | B(RT_DT_DOUBLE)},
    /* rt_onnx_misc.c op_cumprod: the kernel accumulates in double */
    {"CumProd", TY_BASE | B(RT_DT_DOUBLE)},
    /* rt_onnx_ops.c op_unary: every kernel of its map has a double form
     * (computed in double by libm, not through float) */
    {"Relu", TY_BASE | B(RT_DT_DOUBLE)},
    {"Sigmoid", TY_BASE | B(RT_DT_DOUBLE)},
    {"Tanh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Sqrt", TY_BASE | B(RT_DT_DOUBLE)},
    {"Exp", TY_BASE | B(RT_DT_DOUBLE)},
    {"Abs", TY_BASE | B(RT_DT_DOUBLE)},
    {"Neg", TY_BASE | B(RT_DT_DOUBLE)},
    {"Floor", TY_BASE | B(RT_DT_DOUBLE)},
    /* rt_onnx_more.c op_unary_more (unary_map): float or double */
    {"Log", TY_BASE | B(RT_DT_DOUBLE)},
    {"Reciprocal", TY_BASE | B(RT_DT_DOUBLE)},
    {"Ceil", TY_BASE | B(RT_DT_DOUBLE)},
    {"Erf", TY_BASE | B(RT_DT_DOUBLE)},
    {"Sin", TY_BASE | B(RT_DT_DOUBLE)},
    {"Cos", TY_BASE | B(RT_DT_DOUBLE)},
    {"Tan", TY_BASE | B(RT_DT_DOUBLE)},
    {"Asin", TY_BASE | B(RT_DT_DOUBLE)},
    {"Acos", TY_BASE | B(RT_DT_DOUBLE)},
    {"Atan", TY_BASE | B(RT_DT_DOUBLE)},
    {"Sinh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Cosh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Asinh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Acosh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Atanh", TY_BASE | B(RT_DT_DOUBLE)},
    {"Sign", TY_BASE | B(RT_DT_DOUBLE)},
    {"Round", TY_BASE | B(RT_DT_DOUBLE)},
    {"Softplus", TY_BASE | B(RT_DT_DOUBLE)},
    {"Softsign", TY_BASE | B(RT_DT_DOUBLE)},
    {"IsNaN", TY_BASE | B(RT_DT_DOUBLE)},
    {"IsInf", TY_BASE | B(RT_DT_DOUBLE)},
    /* rt_onnx_ops.c op_reduce: float or double data (the reduce kernel
     * accumulates both in double), integer axes */
    {"ReduceSum", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceMean", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceMax", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceMin", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceProd", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceSumSquare", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceL1", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceL2", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceLogSum", TY_BASE | B(RT_DT_DOUBLE)},
    {"ReduceLogSumExp", TY_BASE | B(RT_DT_DOUBLE)},
    /* rt_onnx_quant.c (its handlers check the exact types) */
    {"QuantizeLinear", TY_NUM | TY_LOWP},
    {"DequantizeLinear", TY_NUM | TY_LOWP},
    {"MatMulInteger", TY_NUM},
    {"QLinearMatMul", TY_NUM},
    {"ConvInteger", TY_NUM},
    {"QLinearConv", TY_NUM},
};

int rt__ox_dtype_num(rt_dtype dt) {
    return dt < 64 && (B(dt) & TY_NUM) != 0;
}

int rt__ox_dtype_int(rt_dtype dt) {
    return dt < 64 && (B(dt) & TY_INTS) != 0;
}

/* "float, int32, ..." for a type set, from the arena. */
static const char *type_list(rt__ox_conv *cv, uint64_t types) {
    static const struct {
        rt_dtype dt;
        const char *name;
    } names[] = {
        {RT_DT_FLOAT, "float"},   {RT_DT_DOUBLE, "double"}, {RT_DT_HALF, "float16"},
        {RT_DT_BFLOAT16, "bfloat16"}, {RT_DT_INT8, "int8"},     {RT_DT_INT16, "int16"},
        {RT_DT_INT32, "int32"},   {RT_DT_INT64, "int64"},   {RT_DT_UINT8, "uint8"},
        {RT_DT_UINT16, "uint16"}, {RT_DT_UINT32, "uint32"}, {RT_DT_UINT64, "uint64"},
        {RT_DT_BOOL, "bool"},     {RT_DT_STRING, "string"},
        {RT_DT_FLOAT8_E4M3FN, "float8e4m3fn"}, {RT_DT_FLOAT8_E4M3FNUZ, "float8e4m3fnuz"},
        {RT_DT_FLOAT8_E5M2, "float8e5m2"}, {RT_DT_FLOAT8_E5M2FNUZ, "float8e5m2fnuz"},
        {RT_DT_FLOAT8_E8M0, "float8e8m0"}, {RT_DT_FLOAT4_E2M1FN, "float4e2m1"},
        {RT_DT_INT4, "int4"}, {RT_DT_UINT4, "uint4"}, {RT_DT_INT2, "int2"}, {RT_DT_UINT2, "uint2"},
    };
    char *s = rt__ox_alloc(cv, 400);
    size_t o = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (types & B(names[i].dt)) {
            size_t l = strlen(names[i].name);
            if (o) {
                memcpy(s + o, ", ", 2);
                o += 2;
            }
            memcpy(s + o, names[i].name, l);
            o += l;
        }
    s[o] = '\0';
    return s;
}

/* The types node n's handler takes at run time. */
static uint64_t op_types(const Onnx__NodeProto *n) {
    uint64_t types = TY_BASE;
    const char *op = n->op_type ? n->op_type : "";
    int variadic = (strcmp(op, "Max") == 0 || strcmp(op, "Min") == 0) && n->n_input != 2;
    for (size_t i = 0; !variadic && i < sizeof(wide_ops) / sizeof(wide_ops[0]); i++)
        if (strcmp(wide_ops[i].op, op) == 0) types = wide_ops[i].types;
    return types;
}

ms_status rt__ox_check_dtypes(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    uint64_t types = op_types(n);
    for (size_t k = 0; k < n->n_input; k++) {
        const rt__ox_value *v = rt__ox_in(cv, n, (int)k);
        if (v == NULL) continue;
        /* Folded constants are handled as before: the handlers read f / iv. */
        if (types == TY_BASE && (v->f != NULL || v->iv != NULL)) continue;
        if (v->dt < 64 && (B(v->dt) & types)) continue;
        return rt__ox_err(cv, MS_ENOTSUP,
                          "input %zu (\"%s\") has element type %s, which this op does not take "
                          "(supported: %s)",
                          k, v->name, rt_dtype_name(v->dt), type_list(cv, types));
    }
    return MS_OK;
}

/* The 16-bit float type of n's inputs when n is an op whose handler takes
 * float but not that type and no attribute picks an output type (Cast's
 * `to`, EyeLike's `dtype`, ...); RT_DT_INVALID when that is not the case or
 * float16 and bfloat16 are mixed. */
static rt_dtype narrow_float_of(rt__ox_conv *cv, const Onnx__NodeProto *n, uint64_t types) {
    if (types & B(RT_DT_HALF)) return RT_DT_INVALID;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const char *a = n->attribute[i]->name ? n->attribute[i]->name : "";
        if (strcmp(a, "to") == 0 || strcmp(a, "dtype") == 0 || strcmp(a, "output_datatype") == 0)
            return RT_DT_INVALID;
    }
    rt_dtype nf = RT_DT_INVALID;
    for (size_t k = 0; k < n->n_input; k++) {
        const rt__ox_value *v = rt__ox_in(cv, n, (int)k);
        if (v == NULL || (v->dt != RT_DT_HALF && v->dt != RT_DT_BFLOAT16)) continue;
        if (nf != RT_DT_INVALID && nf != v->dt) return RT_DT_INVALID;
        nf = v->dt;
    }
    return nf;
}

#define TY_NARROW_INTS                                                                             \
    (B(RT_DT_INT8) | B(RT_DT_INT16) | B(RT_DT_UINT8) | B(RT_DT_UINT16) | B(RT_DT_UINT32) |         \
     B(RT_DT_UINT64))

/* Ops whose handlers take float, int64 (TY_BASE) but not these types, run in
 * a carrier type that holds them exactly: float for max and min of small
 * integers and bool (float keeps their order), int64 for data movement (any
 * integer goes to int64 and back unchanged, uint64 by wrapping). */
static const struct {
    const char *op;
    uint64_t types;
    rt_dtype carrier;
} carried_ops[] = {
    {"MaxPool", B(RT_DT_INT8) | B(RT_DT_UINT8), RT_DT_FLOAT},
    {"ReduceMax", B(RT_DT_BOOL) | B(RT_DT_INT8) | B(RT_DT_UINT8), RT_DT_FLOAT},
    {"ReduceMin", B(RT_DT_BOOL) | B(RT_DT_INT8) | B(RT_DT_UINT8), RT_DT_FLOAT},
    {"Tile", TY_NARROW_INTS, RT_DT_INT64},
    {"Pad", TY_NARROW_INTS, RT_DT_INT64},
    {"Transpose", TY_NARROW_INTS, RT_DT_INT64},
    {"Slice", TY_NARROW_INTS, RT_DT_INT64},
    {"Concat", TY_NARROW_INTS, RT_DT_INT64},
    {"Gather", TY_NARROW_INTS, RT_DT_INT64},
    {"GatherElements", TY_NARROW_INTS, RT_DT_INT64},
    {"Reshape", TY_NARROW_INTS, RT_DT_INT64},
    {"Flatten", TY_NARROW_INTS, RT_DT_INT64},
    {"Squeeze", TY_NARROW_INTS, RT_DT_INT64},
    {"Unsqueeze", TY_NARROW_INTS, RT_DT_INT64},
};

/* The type of n's input 0 when n is a carried_ops op and it is one of its
 * types (*carrier set); else RT_DT_INVALID. */
static rt_dtype carried_of(rt__ox_conv *cv, const Onnx__NodeProto *n, rt_dtype *carrier) {
    const rt__ox_value *v = n->n_input ? rt__ox_in(cv, n, 0) : NULL;
    for (size_t i = 0; v && i < sizeof(carried_ops) / sizeof(carried_ops[0]); i++)
        if (n->op_type && strcmp(n->op_type, carried_ops[i].op) == 0 && v->dt < 64 &&
            (B(v->dt) & carried_ops[i].types)) {
            *carrier = carried_ops[i].carrier;
            return v->dt;
        }
    return RT_DT_INVALID;
}

/* Runs handler h on n with its float16 / bfloat16 inputs cast to float and
 * its float outputs cast back to nf (ONNX gives such outputs the input
 * type, but for LayerNormalization's statistics): computed in float and rounded once per op to nearest even, as
 * numpy computes float16 and as ONNX Runtime does for the float16 ops it
 * runs in float. Integer and bool outputs (ArgMax, IsNaN, ...) pass as
 * they are. The carried_ops run the same way in their carrier type (float
 * or int64), which holds nf exactly; a bool result from float is y > 0. */
static ms_status run_in_float(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_handler h,
                              rt_dtype nf, rt_dtype carrier) {
    const char *cname = carrier == RT_DT_FLOAT ? "float" : "int64";
    ms_status st;
    const char *hint = rt__ox_hint_of(n);
    Onnx__NodeProto *c = rt__ox_alloc(cv, sizeof(*c));
    *c = *n;
    c->input = rt__ox_alloc(cv, (n->n_input + 1) * sizeof(char *));
    c->output = rt__ox_alloc(cv, (n->n_output + 1) * sizeof(char *));
    for (size_t k = 0; k < n->n_input; k++) {
        rt__ox_value *v = rt__ox_in(cv, n, (int)k);
        c->input[k] = n->input[k];
        if (v == NULL || v->dt != nf) continue;
        const char *fname = rt__ox_printf(cv, "%s/as_%s", v->name, cname);
        if (rt__ox_find(cv, fname) == NULL) {
            const char *x;
            if ((st = rt__ox_tf(cv, v, &x)) != MS_OK) return st;
            rt__ox_value *f = rt__ox_define(cv, fname, carrier, v->rank, v->dim);
            f->tf = rt__tf_cast(cv, fname, x, nf, carrier);
        }
        c->input[k] = (char *)fname;
    }
    for (size_t k = 0; k < n->n_output; k++)
        c->output[k] = n->output[k] && n->output[k][0]
                           ? rt__ox_printf(cv, "%s/%s", n->output[k], cname)
                           : n->output[k];
    if ((st = rt__ox_check_dtypes(cv, c)) != MS_OK || (st = h(cv, c)) != MS_OK) return st;
    /* LayerNormalization's Mean and InvStdDev have type U (stash_type,
     * float), not the input's. */
    size_t keep_from =
        n->op_type && strcmp(n->op_type, "LayerNormalization") == 0 ? 1 : n->n_output;
    for (size_t k = 0; k < n->n_output; k++) {
        if (n->output[k] == NULL || n->output[k][0] == '\0') continue;
        rt__ox_value *v = rt__ox_find(cv, c->output[k]);
        if (v == NULL) continue; /* the driver names the missing output */
        if (v->dt != carrier || k >= keep_from) {
            rt__ox_value *o = rt__ox_define(cv, n->output[k], v->dt, 0, NULL);
            const char *nm = o->name;
            *o = *v;
            o->name = nm;
            continue;
        }
        const char *y;
        if ((st = rt__ox_tf(cv, v, &y)) != MS_OK) return st;
        rt__ox_value *o = rt__ox_define(cv, n->output[k], nf, v->rank, v->dim);
        if (nf == RT_DT_BOOL) /* y > 0: a max of nothing (-inf) is false, as ONNX has it */
            o->tf = rt__tf_binary(cv, "Greater", rt__ox_printf(cv, "%s/narrow", hint), y,
                                  rt__ox_scalar_f32(cv, rt__ox_printf(cv, "%s/zero", hint), 0),
                                  RT_DT_FLOAT);
        else /* integers: exact; from float a max or min of nothing saturates to the
              * type's bound */
            o->tf = rt__tf_cast(cv, rt__ox_printf(cv, "%s/narrow", hint), y, carrier, nf);
    }
    return MS_OK;
}

ms_status rt__ox_run_handler(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_handler h) {
    uint64_t types = op_types(n);
    rt_dtype carrier = RT_DT_FLOAT, nf = narrow_float_of(cv, n, types);
    if (nf == RT_DT_INVALID) nf = carried_of(cv, n, &carrier);
    if (nf != RT_DT_INVALID) return run_in_float(cv, n, h, nf, carrier);
    ms_status st = rt__ox_check_dtypes(cv, n);
    return st != MS_OK ? st : h(cv, n);
}

const char *rt__ox_onnx_type_name(int32_t t) {
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",        "UINT8",      "INT8",       "UINT16",         "INT16",
        "INT32",     "INT64",        "STRING",     "BOOL",       "FLOAT16",        "DOUBLE",
        "UINT32",    "UINT64",       "COMPLEX64",  "COMPLEX128", "BFLOAT16",       "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",  "INT4",           "FLOAT4E2M1",
        "FLOAT8E8M0", "UINT2",       "INT2",
    };
    if (t >= 0 && (size_t)t < sizeof(names) / sizeof(names[0])) return names[t];
    return "an unknown type";
}

/* ---- Cast / CastLike ---- */

/* Float f as integer type dt by the executor's Cast rules: truncation toward
 * zero, saturating at dt's range, NaN -> 0. */
static int64_t fold_f_to_int(double f, rt_dtype dt) {
    double lo = dt == RT_DT_INT32 ? (double)INT32_MIN : (double)INT64_MIN;
    double hi = dt == RT_DT_INT32 ? (double)INT32_MAX : 9223372036854775807.0;
    if (f != f) return 0;
    if (f <= lo) return dt == RT_DT_INT32 ? INT32_MIN : INT64_MIN;
    if (f >= hi) return dt == RT_DT_INT32 ? INT32_MAX : INT64_MAX;
    return (int64_t)f;
}

/* Output 0 of node n: X converted to dt (a Const folded at import when X is
 * known and dt is one the converter folds, else a TF Cast). */
static ms_status cast_to(rt__ox_conv *cv, const Onnx__NodeProto *n, rt__ox_value *X, rt_dtype dt) {
    ms_status st;
    if (!rt__ox_dtype_num(dt) && dt != RT_DT_BOOL && !rt_dtype_is_lowp(dt))
        return rt__ox_err(cv, MS_ENOTSUP, "cast to %s is not supported", rt_dtype_name(dt));
    int64_t ne = rt__ox_nelem(X);
    int foldable = dt == RT_DT_FLOAT || dt == RT_DT_INT64 || dt == RT_DT_INT32 || dt == RT_DT_BOOL;
    if ((X->f != NULL || X->iv != NULL) && ne >= 0 && foldable) {
        if (dt == RT_DT_FLOAT && !X->f && !rt__ox_is_const(X))
            return rt__ox_err(cv, MS_ENOTSUP, "cast of a dynamic shape value to float");
        rt__ox_value *o = rt__ox_def_out(cv, n, 0, dt, X->rank, X->dim, NULL);
        if (dt == RT_DT_FLOAT) {
            o->f = rt__ox_alloc(cv, (size_t)ne * 4 + 4);
            for (int64_t i = 0; i < ne; i++)
                o->f[i] = X->f ? X->f[i] : (float)X->iv[i];
            return MS_OK;
        }
        o->iv = rt__ox_alloc(cv, (size_t)ne * 8 + 8);
        o->ik = rt__ox_alloc(cv, (size_t)ne + 1);
        for (int64_t i = 0; i < ne; i++) {
            int64_t x;
            if (dt == RT_DT_BOOL)
                x = X->f ? X->f[i] != 0 : X->iv[i] != 0; /* NaN is not zero: true */
            else if (X->f)
                x = fold_f_to_int(X->f[i], dt);
            else
                x = dt == RT_DT_INT32 ? (int32_t)(uint32_t)(uint64_t)X->iv[i] : X->iv[i];
            o->iv[i] = x;
            o->ik[i] = X->f ? 1 : X->ik[i];
        }
        /* A shape value with dynamic entries keeps its run-time twin. */
        if (!rt__ox_is_const(o) && X->tf != NULL)
            o->tf = dt == X->dt ? X->tf : rt__tf_cast(cv, rt__ox_hint_of(n), X->tf, X->dt, dt);
        return MS_OK;
    }
    if (dt == X->dt) {
        rt__ox_alias(cv, n, X);
        return MS_OK;
    }
    const char *x;
    if ((st = rt__ox_tf(cv, X, &x)) != MS_OK) return st;
    if (!rt_dtype_is_lowp(dt)) {
        rt__ox_def_out(cv, n, 0, dt, X->rank, X->dim,
                       rt__tf_cast(cv, rt__ox_hint_of(n), x, X->dt, dt));
        return MS_OK;
    }
    /* saturate (19+) and round_mode (24+) change casts to float8 / e8m0:
     * the kernel takes them as attributes of its Cast node. */
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Cast", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "SrcT", X->dt);
    rt__tf_attr_type(cv, nd, "DstT", dt);
    const char *mode = "up";
    if (rt__ox_attr(n, "round_mode") != NULL) {
        if (rt__ox_attr_is(n, "round_mode", "down", NULL))
            mode = "down";
        else if (rt__ox_attr_is(n, "round_mode", "nearest", NULL))
            mode = "nearest";
        else if (!rt__ox_attr_is(n, "round_mode", "up", NULL))
            return rt__ox_err(cv, MS_EINVAL, "round_mode must be up, down or nearest");
    }
    rt__tf_attr_b(cv, nd, "saturate", rt__ox_attr_i(n, "saturate", 1) != 0);
    rt__tf_attr_s(cv, nd, "round_mode", mode);
    rt__ox_def_out(cv, n, 0, dt, X->rank, X->dim, nd->name);
    return MS_OK;
}

ms_status rt__ox_op_cast(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X = NULL;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK) return st;
    const Onnx__AttributeProto *a = rt__ox_attr(n, "to");
    if (a == NULL) return rt__ox_err(cv, MS_EINVAL, "attribute \"to\" is missing");
    int64_t to = rt__ox_attr_i(n, "to", 0);
    rt_dtype dt = to >= 0 && to <= INT32_MAX ? rt__ox_onnx_dtype((int32_t)to) : RT_DT_INVALID;
    if (dt == RT_DT_INVALID || (!rt__ox_dtype_num(dt) && dt != RT_DT_BOOL && !rt_dtype_is_lowp(dt)))
        return rt__ox_err(cv, MS_ENOTSUP, "cast to type %lld (%s) is not supported", (long long)to,
                          to >= 0 && to <= INT32_MAX ? rt__ox_onnx_type_name((int32_t)to)
                                                     : "an unknown type");
    return cast_to(cv, n, X, dt);
}

ms_status rt__ox_op_cast_like(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *T;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, NULL)) != MS_OK ||
        (st = rt__ox_need(cv, n, 1, &T, NULL)) != MS_OK)
        return st;
    return cast_to(cv, n, X, T->dt);
}

/* ---- BitShift, BitCast ---- */

/* Defines output 0 of n as TF's `tf` (x, y): inputs of one type whose shapes
 * broadcast. */
static ms_status same_type_binary(rt__ox_conv *cv, const Onnx__NodeProto *n, const char *tf,
                                  const rt__ox_value *X, const char *x, const rt__ox_value *Y,
                                  const char *y) {
    if (X->dt != Y->dt)
        return rt__ox_err(cv, MS_EINVAL, "inputs have different types %s and %s",
                          rt_dtype_name(X->dt), rt_dtype_name(Y->dt));
    int64_t od[OX_MAXR];
    int r = rt__ox_broadcast(X, Y, od);
    if (r == -2) return rt__ox_err(cv, MS_EINVAL, "shapes do not broadcast");
    if (r < 0) return rt__ox_err(cv, MS_ENOTSUP, "input ranks must be known");
    rt__ox_def_out(cv, n, 0, X->dt, r, od, rt__tf_binary(cv, tf, rt__ox_hint_of(n), x, y, X->dt));
    return MS_OK;
}

ms_status rt__ox_op_bitshift(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *Y;
    const char *x, *y;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK || (st = rt__ox_need(cv, n, 1, &Y, &y)) != MS_OK)
        return st;
    int left = rt__ox_attr_is(n, "direction", "LEFT", "");
    if (!left && !rt__ox_attr_is(n, "direction", "RIGHT", ""))
        return rt__ox_err(cv, MS_EINVAL, "direction must be \"LEFT\" or \"RIGHT\"");
    return same_type_binary(cv, n, left ? "LeftShift" : "RightShift", X, x, Y, y);
}

/* BitwiseAnd / Or / Xor (18) with broadcasting, BitwiseNot (18): TF's
 * BitwiseAnd / BitwiseOr / BitwiseXor / Invert over every integer type. */
ms_status rt__ox_op_bitwise(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X, *Y;
    const char *x, *y, *h = rt__ox_hint_of(n);
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (strcmp(n->op_type, "BitwiseNot") == 0) {
        rt__ox_def_out(cv, n, 0, X->dt, X->rank, X->dim, rt__tf_unary(cv, "Invert", h, x, X->dt));
        return MS_OK;
    }
    if ((st = rt__ox_need(cv, n, 1, &Y, &y)) != MS_OK) return st;
    const char *tf = strcmp(n->op_type, "BitwiseAnd") == 0  ? "BitwiseAnd"
                     : strcmp(n->op_type, "BitwiseOr") == 0 ? "BitwiseOr"
                                                             : "BitwiseXor";
    return same_type_binary(cv, n, tf, X, x, Y, y);
}

ms_status rt__ox_op_bitcast(rt__ox_conv *cv, const Onnx__NodeProto *n) {
    rt__ox_value *X;
    const char *x;
    ms_status st;
    if ((st = rt__ox_need(cv, n, 0, &X, &x)) != MS_OK) return st;
    if (rt__ox_attr(n, "to") == NULL) return rt__ox_err(cv, MS_EINVAL, "attribute \"to\" is missing");
    int64_t to = rt__ox_attr_i(n, "to", 0);
    rt_dtype dt = to >= 0 && to <= INT32_MAX ? rt__ox_onnx_dtype((int32_t)to) : RT_DT_INVALID;
    if (!rt__ox_dtype_num(dt) && dt != RT_DT_BOOL)
        return rt__ox_err(cv, MS_ENOTSUP, "bitcast to type %lld (%s) is not supported",
                          (long long)to,
                          to >= 0 && to <= INT32_MAX ? rt__ox_onnx_type_name((int32_t)to)
                                                     : "an unknown type");
    if (rt_dtype_size(dt) != rt_dtype_size(X->dt))
        return rt__ox_err(cv, MS_EINVAL, "bitcast from %s to %s: element sizes differ",
                          rt_dtype_name(X->dt), rt_dtype_name(dt));
    Tensorflow__NodeDef *nd = rt__tf_node(cv, "Bitcast", rt__ox_hint_of(n));
    rt__tf_input(cv, nd, x);
    rt__tf_attr_type(cv, nd, "T", X->dt);
    rt__tf_attr_type(cv, nd, "type", dt);
    rt__ox_def_out(cv, n, 0, dt, X->rank, X->dim, nd->name);
    return MS_OK;
}
