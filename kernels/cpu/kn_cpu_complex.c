/* kn_cpu_complex.c - TensorFlow's ops between complex and real tensors:
 * ComplexAbs (|z|, hypot as TensorFlow's), Real, Imag, Angle (atan2 of the
 * imaginary and real parts), Conj, and Complex (real + i imag, with numpy
 * broadcasting). complex64 pairs with float32 and complex128 with float64;
 * a node whose T / Tout attrs name another pairing is refused at load.
 * A complex element is two values of its real type, real part first
 * (TensorFlow's layout, and C's _Complex). */
#include <math.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

enum { C_ABS, C_REAL, C_IMAG, C_ANGLE, C_CONJ, C_MAKE };

static const struct {
    const char *op;
    int kind;
} complex_ops[] = {
    {"ComplexAbs", C_ABS}, {"Real", C_REAL},   {"Imag", C_IMAG},
    {"Angle", C_ANGLE},    {"Conj", C_CONJ},   {"Complex", C_MAKE},
};

static int op_kind(const kn_node *node) {
    for (size_t i = 0; i < sizeof(complex_ops) / sizeof(complex_ops[0]); i++)
        if (strcmp(complex_ops[i].op, node->op) == 0) return complex_ops[i].kind;
    return -1;
}

static rt_dtype real_of(rt_dtype c) {
    return c == RT_DT_COMPLEX64 ? RT_DT_FLOAT : c == RT_DT_COMPLEX128 ? RT_DT_DOUBLE
                                                                      : RT_DT_INVALID;
}

/* The attrs: T is the complex input type (Complex: the real input type) and
 * Tout the output's; absent attrs take TensorFlow's defaults. */
static ms_status complex_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    int kind = op_kind(node);
    if (kind < 0) return kn__errf(MS_EINTERNAL, node, "no complex table row for this op");
    *state = (void *)(intptr_t)kind;
    int want = kind == C_MAKE ? 2 : 1;
    if (node->nin != want) return KN_EINVAL(node, "expected %d inputs, got %d", want, node->nin);
    if (kind == C_MAKE) {
        rt_dtype t = kn_attr_type(node, "T", RT_DT_FLOAT);
        rt_dtype o = kn_attr_type(node, "Tout", RT_DT_COMPLEX64);
        if (real_of(o) == RT_DT_INVALID || real_of(o) != t)
            return kn__errf(MS_ENOTSUP, node,
                            "T %s with Tout %s is not implemented (DT_FLOAT -> DT_COMPLEX64, "
                            "DT_DOUBLE -> DT_COMPLEX128)",
                            rt_dtype_name(t), rt_dtype_name(o));
        return MS_OK;
    }
    rt_dtype t = kn_attr_type(node, "T", RT_DT_COMPLEX64);
    if (real_of(t) == RT_DT_INVALID)
        return kn__errf(MS_ENOTSUP, node, "T %s is not implemented (DT_COMPLEX64, DT_COMPLEX128)",
                        rt_dtype_name(t));
    if (kind != C_CONJ) {
        rt_dtype o = kn_attr_type(node, "Tout", real_of(t));
        if (o != real_of(t))
            return kn__errf(MS_ENOTSUP, node, "T %s with Tout %s is not implemented (Tout %s)",
                            rt_dtype_name(t), rt_dtype_name(o), rt_dtype_name(real_of(t)));
    }
    return MS_OK;
}

typedef struct cx_job {
    int kind, dbl;
    const void *a, *b;
    void *o;
    const kn_bcast *bc; /* Complex */
} cx_job;

#define CX_UNARY(T, HYPOT, ATAN2)                                                                  \
    do {                                                                                           \
        const T *x = j->a;                                                                         \
        T *o = j->o;                                                                               \
        for (int64_t i = begin; i < end; i++) {                                                    \
            T re = x[2 * i], im = x[2 * i + 1];                                                    \
            switch (j->kind) {                                                                     \
            case C_ABS: o[i] = HYPOT(re, im); break;                                               \
            case C_REAL: o[i] = re; break;                                                         \
            case C_IMAG: o[i] = im; break;                                                         \
            case C_ANGLE: o[i] = ATAN2(im, re); break;                                             \
            default:                                                                               \
                o[2 * i] = re;                                                                     \
                o[2 * i + 1] = -im;                                                                \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void unary_chunk(void *arg, int64_t begin, int64_t end) {
    const cx_job *j = arg;
    if (j->dbl)
        CX_UNARY(double, hypot, atan2);
    else
        CX_UNARY(float, hypotf, atan2f);
}

/* Complex over rows [begin, end) of the collapsed broadcast. */
#define CX_MAKE(T)                                                                                 \
    do {                                                                                           \
        const T *re = j->a, *im = j->b;                                                            \
        T *o = j->o;                                                                               \
        int last = bc->rank - 1;                                                                   \
        int64_t C = bc->dim[last], sa = bc->stride[0][last], sb = bc->stride[1][last];            \
        for (int64_t r = begin; r < end; r++) {                                                    \
            int64_t off[2];                                                                        \
            kn__bcast_row(bc, r, off, 2);                                                          \
            T *row = o + 2 * r * C;                                                                \
            for (int64_t c = 0; c < C; c++) {                                                      \
                row[2 * c] = re[off[0] + c * sa];                                                  \
                row[2 * c + 1] = im[off[1] + c * sb];                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void make_chunk(void *arg, int64_t begin, int64_t end) {
    const cx_job *j = arg;
    const kn_bcast *bc = j->bc;
    if (j->dbl)
        CX_MAKE(double);
    else
        CX_MAKE(float);
}

static ms_status complex_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    int kind = (int)(intptr_t)state;
    ms_status st = kn__need_inputs(node, in, kind == C_MAKE ? 2 : 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (kind == C_MAKE) {
        if ((x->dtype != RT_DT_FLOAT && x->dtype != RT_DT_DOUBLE) || in[1]->dtype != x->dtype)
            return kn__errf(MS_ENOTSUP, node,
                            "real %s and imag %s: both DT_FLOAT or both DT_DOUBLE are implemented",
                            rt_dtype_name(x->dtype), rt_dtype_name(in[1]->dtype));
        kn_bcast bc;
        const rt_shape *shapes[2] = {&x->shape, &in[1]->shape};
        if ((st = kn__bcast_init(&bc, node, shapes, 2)) != MS_OK) return st;
        int dbl = x->dtype == RT_DT_DOUBLE;
        rt_dtype odt = dbl ? RT_DT_COMPLEX128 : RT_DT_COMPLEX64;
        if ((st = kn__output(ctx, node, 0, odt, &bc.out, &out[0])) != MS_OK) return st;
        if (out[0]->nelem == 0) return MS_OK;
        cx_job j = {.kind = kind, .dbl = dbl, .a = x->data, .b = in[1]->data,
                    .o = out[0]->data, .bc = &bc};
        int64_t C = bc.dim[bc.rank - 1];
        kn_ctx_parallel_for(ctx, out[0]->nelem / C, C >= 16384 ? 1 : 16384 / C, make_chunk, &j);
        return MS_OK;
    }
    rt_dtype rdt = real_of(x->dtype);
    if (rdt == RT_DT_INVALID)
        return kn__errf(MS_ENOTSUP, node, "input dtype %s is not supported (complex64, complex128)",
                        rt_dtype_name(x->dtype));
    if ((st = kn__output(ctx, node, 0, kind == C_CONJ ? x->dtype : rdt, &x->shape, &out[0])) !=
        MS_OK)
        return st;
    cx_job j = {.kind = kind, .dbl = rdt == RT_DT_DOUBLE, .a = x->data, .o = out[0]->data};
    if (x->nelem > 0) kn_ctx_parallel_for(ctx, x->nelem, 16384, unary_chunk, &j);
    return MS_OK;
}

#define CX_KERNEL(name) {.op = name, .prepare = complex_prepare, .compute = complex_compute}

const kn_kernel kn_cpu_complex_kernels[] = {
    CX_KERNEL("ComplexAbs"), CX_KERNEL("Real"), CX_KERNEL("Imag"), CX_KERNEL("Angle"),
    CX_KERNEL("Conj"),       CX_KERNEL("Complex"), {.op = NULL},
};
