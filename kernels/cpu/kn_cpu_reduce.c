/* kn_cpu_reduce.c - CPU kernels of the reduce group: Sum, Mean, Max, Min,
 * Prod (reduction_indices input, keep_dims), Softmax (last axis), MatMul
 * (OpenBLAS gemm), BiasAdd (NHWC/NCHW) and ArgMax/ArgMin.
 *
 * Reductions walk the input once in memory order after merging adjacent
 * dimensions that are all kept or all reduced, accumulating floats in double
 * and integers in (wrapping) int64.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "kn_reduce.h"

/* ====================================================================== */
/* Sum, Mean, Max, Min, Prod                                              */
/* ====================================================================== */

enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD };

typedef struct red_plan {
    int rank;                     /* collapsed rank, >= 1 */
    int64_t dim[RT_MAX_RANK];     /* collapsed dims */
    int red[RT_MAX_RANK];         /* 1 where the collapsed dim is reduced */
    int64_t ostride[RT_MAX_RANK]; /* accumulator stride per dim, 0 for reduced dims */
    int64_t nout, count;          /* output elements, reduced elements per output */
} red_plan;

static int red_op(const char *op) {
    if (strcmp(op, "Sum") == 0) return RED_SUM;
    if (strcmp(op, "Mean") == 0) return RED_MEAN;
    if (strcmp(op, "Max") == 0) return RED_MAX;
    if (strcmp(op, "Min") == 0) return RED_MIN;
    return RED_PROD;
}

typedef struct red_job {
    const red_plan *p;
    int op;
    const void *in;
    void *acc;
    rt_dtype dt;
} red_job;

/* Accumulates rows of the input whose first collapsed coordinate lies in
 * [b, e) (each such slice touches its own accumulators when dim 0 is kept). */
#define DEF_REDUCE(sfx, TI, TA, ADD, MUL)                                                          \
    static void reduce_##sfx(const red_plan *p, int op, const TI *in, TA *acc, int64_t b,          \
                             int64_t e) {                                                          \
        const int last = p->rank - 1;                                                              \
        const int64_t inner = p->dim[last];                                                        \
        int64_t per0 = 1; /* rows per index of dim 0 */                                            \
        for (int d = 1; d < last; d++)                                                             \
            per0 *= p->dim[d];                                                                     \
        if (last == 0) {                                                                           \
            per0 = 1;                                                                              \
            b = 0;                                                                                 \
            e = 1;                                                                                 \
        }                                                                                          \
        for (int64_t row = b * per0; row < e * per0; row++) {                                      \
            int64_t r = row, ob = 0;                                                               \
            for (int d = last - 1; d >= 0; d--) {                                                  \
                ob += (r % p->dim[d]) * p->ostride[d];                                             \
                r /= p->dim[d];                                                                    \
            }                                                                                      \
            const TI *x = in + row * inner;                                                        \
            if (p->red[last]) {                                                                    \
                TA a = acc[ob];                                                                    \
                switch (op) {                                                                      \
                case RED_SUM:                                                                      \
                case RED_MEAN:                                                                     \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a = ADD(a, (TA)x[j]);                                                      \
                    break;                                                                         \
                case RED_PROD:                                                                     \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a = MUL(a, (TA)x[j]);                                                      \
                    break;                                                                         \
                case RED_MAX:                                                                      \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a = (TA)x[j] > a ? (TA)x[j] : a;                                           \
                    break;                                                                         \
                default:                                                                           \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a = (TA)x[j] < a ? (TA)x[j] : a;                                           \
                }                                                                                  \
                acc[ob] = a;                                                                       \
            } else {                                                                               \
                TA *a = acc + ob;                                                                  \
                switch (op) {                                                                      \
                case RED_SUM:                                                                      \
                case RED_MEAN:                                                                     \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a[j] = ADD(a[j], (TA)x[j]);                                                \
                    break;                                                                         \
                case RED_PROD:                                                                     \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a[j] = MUL(a[j], (TA)x[j]);                                                \
                    break;                                                                         \
                case RED_MAX:                                                                      \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a[j] = (TA)x[j] > a[j] ? (TA)x[j] : a[j];                                  \
                    break;                                                                         \
                default:                                                                           \
                    for (int64_t j = 0; j < inner; j++)                                            \
                        a[j] = (TA)x[j] < a[j] ? (TA)x[j] : a[j];                                  \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define F_ADD(a, x) ((a) + (x))
#define F_MUL(a, x) ((a) * (x))
#define I_ADD(a, x) ((int64_t)((uint64_t)(a) + (uint64_t)(x)))
#define I_MUL(a, x) ((int64_t)((uint64_t)(a) * (uint64_t)(x)))
DEF_REDUCE(f32, float, double, F_ADD, F_MUL)
DEF_REDUCE(f64, double, double, F_ADD, F_MUL)
DEF_REDUCE(i32, int32_t, int64_t, I_ADD, I_MUL)
DEF_REDUCE(i64, int64_t, int64_t, I_ADD, I_MUL)

static void red_chunk(void *arg, int64_t b, int64_t e) {
    red_job *j = arg;
    switch (j->dt) {
    case RT_DT_FLOAT:
        reduce_f32(j->p, j->op, j->in, j->acc, b, e);
        break;
    case RT_DT_DOUBLE:
        reduce_f64(j->p, j->op, j->in, j->acc, b, e);
        break;
    case RT_DT_INT32:
        reduce_i32(j->p, j->op, j->in, j->acc, b, e);
        break;
    default:
        reduce_i64(j->p, j->op, j->in, j->acc, b, e);
        break;
    }
}

/* The plan of a reduction of a tensor of shape sh over the dims where
 * red[d]: the merged axes (kn_reduce_axes_merge) and the accumulator strides. */
static void red_plan_make(const rt_shape *sh, const int *red, red_plan *p) {
    kn_reduce_axes ax;
    kn_reduce_axes_merge(sh, red, &ax);
    memset(p, 0, sizeof(*p));
    p->rank = ax.rank;
    p->nout = ax.nout;
    p->count = ax.count;
    int64_t os = 1;
    for (int d = ax.rank - 1; d >= 0; d--) {
        p->dim[d] = ax.dim[d];
        p->red[d] = ax.red[d];
        p->ostride[d] = ax.red[d] ? 0 : os;
        if (!ax.red[d]) os *= ax.dim[d];
    }
}

/* Sums (op) of in (dtype dt) into acc (p->nout doubles or int64, already
 * initialised), in parallel over dim 0 when it is kept. */
static void red_run(kn_ctx *ctx, const red_plan *p, int op, const void *in, void *acc, rt_dtype dt,
                    int64_t total) {
    if (total <= 0 || p->nout <= 0) return;
    red_job job = {.p = p, .op = op, .in = in, .acc = acc, .dt = dt};
    if (p->rank > 1 && !p->red[0]) {
        int64_t per = total / p->dim[0];
        int64_t chunk = 65536 / (per > 0 ? per : 1);
        kn_ctx_parallel_for(ctx, p->dim[0], chunk > 0 ? chunk : 1, red_chunk, &job);
    } else {
        red_chunk(&job, 0, p->dim[0]);
    }
}

static ms_status reduce_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    rt_dtype dt = x->dtype;
    if (dt != RT_DT_FLOAT && dt != RT_DT_DOUBLE && dt != RT_DT_INT32 && dt != RT_DT_INT64)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(dt));
    int op = red_op(node->op);
    const int rank = x->shape.rank;
    int64_t axes[64];
    int na;
    if (in[1]->shape.rank > 1)
        return KN_EINVAL(node, "reduction_indices must be a scalar or vector, got shape %s",
                         kn__shp(&in[1]->shape));
    if ((st = kn__read_ints(node, in[1], "reduction_indices", axes, 64, &na)) != MS_OK) return st;
    int red[RT_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a = kn__axis(axes[i], rank);
        if (a < 0)
            return KN_EINVAL(node, "reduction index %lld out of range for input %s",
                             (long long)axes[i], kn__shp(&x->shape));
        red[a] = 1;
    }
    int keep = kn_attr_b(node, "keep_dims", 0);
    rt_shape os = {.rank = 0};
    for (int d = 0; d < rank; d++) {
        if (!red[d])
            os.dim[os.rank++] = x->shape.dim[d];
        else if (keep)
            os.dim[os.rank++] = 1;
    }
    red_plan p;
    red_plan_make(&x->shape, red, &p);
    if ((st = kn__output(ctx, node, 0, dt, &os, &out[0])) != MS_OK) return st;
    int isf = dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE;
    size_t asz = sizeof(double) > sizeof(int64_t) ? sizeof(double) : sizeof(int64_t);
    void *acc = malloc((size_t)(p.nout > 0 ? p.nout : 1) * asz);
    if (acc == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    for (int64_t i = 0; i < p.nout; i++) {
        if (isf) {
            double v = op == RED_PROD  ? 1
                       : op == RED_MAX ? -INFINITY
                       : op == RED_MIN ? INFINITY
                                       : 0;
            ((double *)acc)[i] = v;
        } else {
            int64_t lo = dt == RT_DT_INT32 ? INT32_MIN : INT64_MIN;
            int64_t hi = dt == RT_DT_INT32 ? INT32_MAX : INT64_MAX;
            ((int64_t *)acc)[i] = op == RED_PROD ? 1 : op == RED_MAX ? lo : op == RED_MIN ? hi : 0;
        }
    }
    red_run(ctx, &p, op, x->data, acc, dt, x->nelem);
    for (int64_t i = 0; i < p.nout; i++) {
        if (isf) {
            double v = ((double *)acc)[i];
            if (op == RED_MEAN) v /= (double)p.count;
            if (dt == RT_DT_FLOAT)
                ((float *)out[0]->data)[i] = (float)v;
            else
                ((double *)out[0]->data)[i] = v;
        } else {
            int64_t v = ((int64_t *)acc)[i];
            if (dt == RT_DT_INT32) v = (int32_t)v; /* wrap as int32 arithmetic would */
            if (op == RED_MEAN) v = p.count > 0 ? v / p.count : 0;
            if (dt == RT_DT_INT32)
                ((int32_t *)out[0]->data)[i] = (int32_t)v;
            else
                ((int64_t *)out[0]->data)[i] = v;
        }
    }
    free(acc);
    return MS_OK;
}

/* ====================================================================== */
/* Softmax                                                                */
/* ====================================================================== */

typedef struct softmax_job {
    const void *in;
    void *out;
    int64_t n;
    int dbl;
    int log; /* LogSoftmax: x - max - log(sum(exp(x - max))) */
} softmax_job;

/* float32 rows, vectorised (KN_VEC_DEFINE, kn__vexpf): the max and the
 * scaling loops run over the row, the exponentials too; the sum stays a
 * sequential double sum. */
KN_VEC_DEFINE(softmax_f32_rows, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const softmax_job *j = arg;
    const int64_t n = j->n;
    for (int64_t r = b; r < e; r++) {
        const float *x = (const float *)j->in + r * n;
        float *y = (float *)j->out + r * n, m = x[0];
        for (int64_t i = 1; i < n; i++)
            m = x[i] > m ? x[i] : m;
        for (int64_t i = 0; i < n; i++)
            y[i] = kn__vexpf(x[i] - m);
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += y[i];
        if (j->log) {
            float ls = (float)log(s);
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] - m - ls;
        } else {
            float inv = (float)(1.0 / s);
            for (int64_t i = 0; i < n; i++)
                y[i] *= inv;
        }
    }
})

static void softmax_rows(void *arg, int64_t b, int64_t e) {
    softmax_job *j = arg;
    for (int64_t r = b; r < e; r++) {
        if (j->dbl) {
            const double *x = (const double *)j->in + r * j->n;
            double *y = (double *)j->out + r * j->n, m = x[0], s = 0;
            for (int64_t i = 1; i < j->n; i++)
                m = x[i] > m ? x[i] : m;
            for (int64_t i = 0; i < j->n; i++)
                s += y[i] = exp(x[i] - m);
            if (j->log) {
                double ls = log(s);
                for (int64_t i = 0; i < j->n; i++)
                    y[i] = x[i] - m - ls;
            } else {
                for (int64_t i = 0; i < j->n; i++)
                    y[i] /= s;
            }
        } else {
            const float *x = (const float *)j->in + r * j->n;
            float *y = (float *)j->out + r * j->n, m = x[0];
            double s = 0;
            for (int64_t i = 1; i < j->n; i++)
                m = x[i] > m ? x[i] : m;
            for (int64_t i = 0; i < j->n; i++)
                s += y[i] = expf(x[i] - m);
            if (j->log) {
                float ls = (float)log(s);
                for (int64_t i = 0; i < j->n; i++)
                    y[i] = x[i] - m - ls;
            } else {
                float inv = (float)(1.0 / s);
                for (int64_t i = 0; i < j->n; i++)
                    y[i] *= inv;
            }
        }
    }
}

static ms_status softmax_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                 rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 1);
    if (st != MS_OK) return st;
    const rt_tensor *x = in[0];
    if (x->dtype != RT_DT_FLOAT && x->dtype != RT_DT_DOUBLE)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    if (x->shape.rank < 1) return KN_EINVAL(node, "logits must have rank >= 1, got a scalar");
    if ((st = kn__output(ctx, node, 0, x->dtype, &x->shape, &out[0])) != MS_OK) return st;
    int64_t n = x->shape.dim[x->shape.rank - 1];
    if (x->nelem == 0) return MS_OK;
    softmax_job job = {.in = x->data,
                       .out = out[0]->data,
                       .n = n,
                       .dbl = x->dtype == RT_DT_DOUBLE,
                       .log = strcmp(node->op, "LogSoftmax") == 0};
    int64_t chunk = 16384 / n;
    kn_ctx_parallel_for(ctx, x->nelem / n, chunk > 0 ? chunk : 1,
                        job.dbl ? softmax_rows : softmax_f32_rows, &job);
    return MS_OK;
}

/* ====================================================================== */
/* MatMul                                                                 */
/* ====================================================================== */

static ms_status matmul_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *a = in[0], *b = in[1];
    if (a->dtype != b->dtype)
        return KN_EINVAL(node, "a and b dtypes differ: %s and %s", rt_dtype_name(a->dtype),
                         rt_dtype_name(b->dtype));
    if (a->dtype != RT_DT_FLOAT && a->dtype != RT_DT_DOUBLE)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(a->dtype));
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return KN_EINVAL(node, "a and b must be matrices, got %s and %s", kn__shp(&a->shape),
                         kn__shp(&b->shape));
    int ta = kn_attr_b(node, "transpose_a", 0), tb = kn_attr_b(node, "transpose_b", 0);
    int64_t M = ta ? a->shape.dim[1] : a->shape.dim[0];
    int64_t K = ta ? a->shape.dim[0] : a->shape.dim[1];
    int64_t K2 = tb ? b->shape.dim[1] : b->shape.dim[0];
    int64_t N = tb ? b->shape.dim[0] : b->shape.dim[1];
    if (K != K2)
        return KN_EINVAL(node, "inner dimensions differ: a %s%s, b %s%s", kn__shp(&a->shape),
                         ta ? " transposed" : "", kn__shp(&b->shape), tb ? " transposed" : "");
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return KN_EINVAL(node, "matrices too large for BLAS");
    rt_shape os = {.rank = 2, .dim = {M, N}};
    if ((st = kn__output(ctx, node, 0, a->dtype, &os, &out[0])) != MS_OK) return st;
    if (M == 0 || N == 0) return MS_OK;
    if (K == 0) {
        memset(out[0]->data, 0, rt_tensor_nbytes(out[0]));
        return MS_OK;
    }
    int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N);
    enum CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans, ctb = tb ? CblasTrans : CblasNoTrans;
    if (a->dtype == RT_DT_FLOAT)
        cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0f, a->data, lda, b->data,
                    ldb, 0.0f, out[0]->data, (int)N);
    else
        cblas_dgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0, a->data, lda, b->data,
                    ldb, 0.0, out[0]->data, (int)N);
    return MS_OK;
}

/* ====================================================================== */
/* BatchMatMul, BatchMatMulV2                                             */
/* ====================================================================== */

/* Element offset (in batch units) of operand k for output batch index b. */
static int64_t batch_offset(const kn_bcast *bc, int k, int64_t b) {
    int64_t off = 0;
    for (int d = bc->rank - 1; d >= 0; d--) {
        off += (b % bc->dim[d]) * bc->stride[k][d];
        b /= bc->dim[d];
    }
    return off;
}

static ms_status batch_matmul_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                      rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    const rt_tensor *a = in[0], *b = in[1];
    if (a->dtype != b->dtype)
        return KN_EINVAL(node, "x and y dtypes differ: %s and %s", rt_dtype_name(a->dtype),
                         rt_dtype_name(b->dtype));
    if (a->dtype != RT_DT_FLOAT && a->dtype != RT_DT_DOUBLE)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(a->dtype));
    int ra = a->shape.rank, rb = b->shape.rank;
    if (ra < 2 || rb < 2)
        return KN_EINVAL(node, "x %s and y %s must have rank >= 2", kn__shp(&a->shape),
                         kn__shp(&b->shape));
    int ta = kn_attr_b(node, "adj_x", 0), tb = kn_attr_b(node, "adj_y", 0);
    int64_t M = a->shape.dim[ra - (ta ? 1 : 2)], K = a->shape.dim[ra - (ta ? 2 : 1)];
    int64_t K2 = b->shape.dim[rb - (tb ? 1 : 2)], N = b->shape.dim[rb - (tb ? 2 : 1)];
    if (K != K2)
        return KN_EINVAL(node, "inner dimensions differ: x %s%s, y %s%s", kn__shp(&a->shape),
                         ta ? " adjoint" : "", kn__shp(&b->shape), tb ? " adjoint" : "");
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return KN_EINVAL(node, "matrices too large for BLAS");
    rt_shape sa = {.rank = ra - 2}, sb = {.rank = rb - 2};
    memcpy(sa.dim, a->shape.dim, sizeof(int64_t) * (size_t)sa.rank);
    memcpy(sb.dim, b->shape.dim, sizeof(int64_t) * (size_t)sb.rank);
    if (strcmp(node->op, "BatchMatMul") == 0 && !rt_shape_equal(&sa, &sb))
        return KN_EINVAL(node, "batch dimensions of x %s and y %s differ", kn__shp(&a->shape),
                         kn__shp(&b->shape));
    kn_bcast bc;
    const rt_shape *shapes[2] = {&sa, &sb};
    if ((st = kn__bcast_init(&bc, node, shapes, 2)) != MS_OK) return st;
    if (bc.out.rank + 2 > RT_MAX_RANK) return KN_EINVAL(node, "result rank is too large");
    rt_shape os = bc.out;
    os.dim[os.rank++] = M;
    os.dim[os.rank++] = N;
    if ((st = kn__output(ctx, node, 0, a->dtype, &os, &out[0])) != MS_OK) return st;
    int64_t nb = rt_shape_nelem(&bc.out);
    if (out[0]->nelem == 0) return MS_OK;
    if (K == 0) {
        memset(out[0]->data, 0, rt_tensor_nbytes(out[0]));
        return MS_OK;
    }
    int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N);
    enum CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans, ctb = tb ? CblasTrans : CblasNoTrans;
    for (int64_t i = 0; i < nb; i++) {
        int64_t oa = batch_offset(&bc, 0, i) * M * K, ob = batch_offset(&bc, 1, i) * K * N;
        if (a->dtype == RT_DT_FLOAT)
            cblas_sgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0f,
                        (const float *)a->data + oa, lda, (const float *)b->data + ob, ldb, 0.0f,
                        (float *)out[0]->data + i * M * N, (int)N);
        else
            cblas_dgemm(CblasRowMajor, cta, ctb, (int)M, (int)N, (int)K, 1.0,
                        (const double *)a->data + oa, lda, (const double *)b->data + ob, ldb, 0.0,
                        (double *)out[0]->data + i * M * N, (int)N);
    }
    return MS_OK;
}

/* ====================================================================== */
/* BiasAdd                                                                */
/* ====================================================================== */

static ms_status bias_format(const kn_node *node, int *nchw) {
    *nchw = 0;
    if (strcmp(node->op, "BiasAddV1") == 0 || kn_attr_s_eq(node, "data_format", "NHWC", "NHWC"))
        return MS_OK;
    if (kn_attr_s_eq(node, "data_format", "NCHW", NULL)) {
        *nchw = 1;
        return MS_OK;
    }
    return KN_EINVAL(node, "data_format must be NHWC or NCHW");
}

static ms_status bias_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    int nchw;
    return bias_format(node, &nchw);
}

typedef struct bias_job {
    const void *x, *b;
    void *y;
    int64_t C, inner; /* channels; elements per channel run (1 for NHWC) */
    rt_dtype dt;
} bias_job;

/* UT: the type the addition runs in (unsigned for integers, so it wraps). */
#define BIAS_LOOP(T, UT)                                                                           \
    do {                                                                                           \
        const T *x = j->x, *bb = j->b;                                                             \
        T *y = j->y;                                                                               \
        for (int64_t r = b; r < e; r++) {                                                          \
            T v = bb[r % j->C];                                                                    \
            for (int64_t i = r * j->inner; i < (r + 1) * j->inner; i++)                            \
                y[i] = (T)((UT)x[i] + (UT)v);                                                      \
        }                                                                                          \
    } while (0)

/* float32 fast path, vectorised (KN_VEC_DEFINE), bit-identical to
 * BIAS_LOOP: NHWC (inner 1) over rows [b, e) of C channels; NCHW over
 * (n, c) planes [b, e) of `inner` elements. */
KN_VEC_DEFINE(bias_f32, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const bias_job *j = arg;
    const float *bb = j->b;
    const int64_t C = j->C, in = j->inner;
    if (in == 1) {
        const float *x = (const float *)j->x + b * C;
        float *y = (float *)j->y + b * C;
        for (int64_t r = b; r < e; r++, x += C, y += C)
            for (int64_t c = 0; c < C; c++)
                y[c] = x[c] + bb[c];
    } else {
        for (int64_t r = b; r < e; r++) {
            const float *x = (const float *)j->x + r * in;
            float *y = (float *)j->y + r * in;
            float v = bb[r % C];
            for (int64_t i = 0; i < in; i++)
                y[i] = x[i] + v;
        }
    }
})

/* Over "runs": for NHWC a run is one element; for NCHW one (n, c) plane. */
static void bias_runs(void *arg, int64_t b, int64_t e) {
    bias_job *j = arg;
    switch (j->dt) {
    case RT_DT_FLOAT:
        BIAS_LOOP(float, float);
        break;
    case RT_DT_DOUBLE:
        BIAS_LOOP(double, double);
        break;
    case RT_DT_INT32:
        BIAS_LOOP(int32_t, uint32_t);
        break;
    default:
        BIAS_LOOP(int64_t, uint64_t);
        break;
    }
}

static ms_status bias_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    int nchw;
    if ((st = bias_format(node, &nchw)) != MS_OK) return st;
    const rt_tensor *x = in[0], *bias = in[1];
    if (x->dtype != bias->dtype)
        return KN_EINVAL(node, "value and bias dtypes differ: %s and %s", rt_dtype_name(x->dtype),
                         rt_dtype_name(bias->dtype));
    if (x->dtype != RT_DT_FLOAT && x->dtype != RT_DT_DOUBLE && x->dtype != RT_DT_INT32 &&
        x->dtype != RT_DT_INT64)
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    if (x->shape.rank < (nchw ? 3 : 2) || bias->shape.rank != 1)
        return KN_EINVAL(node, "value %s must have rank >= %d and bias %s rank 1",
                         kn__shp(&x->shape), nchw ? 3 : 2, kn__shp(&bias->shape));
    int cdim = nchw ? 1 : x->shape.rank - 1;
    int64_t C = x->shape.dim[cdim];
    if (bias->shape.dim[0] != C)
        return KN_EINVAL(node, "bias length %lld must equal dimension %d of value %s",
                         (long long)bias->shape.dim[0], cdim, kn__shp(&x->shape));
    if ((st = kn__output(ctx, node, 0, x->dtype, &x->shape, &out[0])) != MS_OK) return st;
    if (x->nelem == 0) return MS_OK;
    int64_t inner = 1;
    if (nchw)
        for (int d = 2; d < x->shape.rank; d++)
            inner *= x->shape.dim[d];
    bias_job job = {
        .x = x->data, .b = bias->data, .y = out[0]->data, .C = C, .inner = inner, .dt = x->dtype};
    if (x->dtype == RT_DT_FLOAT) {
        /* Rows of C channels (NHWC) or planes (NCHW) of about 16K elements. */
        int64_t run = nchw ? inner : C;
        int64_t chunk = run > 0 ? 16384 / run : 1;
        kn_ctx_parallel_for(ctx, x->nelem / run, chunk > 0 ? chunk : 1, bias_f32, &job);
        return MS_OK;
    }
    int64_t chunk = 16384 / inner;
    kn_ctx_parallel_for(ctx, x->nelem / inner, chunk > 0 ? chunk : 1, bias_runs, &job);
    return MS_OK;
}

/* ====================================================================== */
/* ArgMax, ArgMin                                                          */
/* ====================================================================== */

static ms_status arg_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    (void)state;
    rt_dtype t = kn_attr_type(node, "output_type", RT_DT_INT64);
    if (t != RT_DT_INT32 && t != RT_DT_INT64)
        return KN_EINVAL(node, "output_type must be int32 or int64, got %s", rt_dtype_name(t));
    return MS_OK;
}

#define ARG_LOOP(T)                                                                                \
    do {                                                                                           \
        const T *v = x->data;                                                                      \
        for (int64_t o = 0; o < outer; o++)                                                        \
            for (int64_t i = 0; i < after; i++) {                                                  \
                const T *p = v + o * n * after + i;                                                \
                int64_t best = 0;                                                                  \
                for (int64_t k = 1; k < n; k++)                                                    \
                    if (is_max ? p[k * after] > p[best * after] : p[k * after] < p[best * after])  \
                        best = k;                                                                  \
                idx[o * after + i] = best;                                                         \
            }                                                                                      \
    } while (0)

static ms_status arg_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    ms_status st = kn__need_inputs(node, in, 2);
    if (st != MS_OK) return st;
    if ((st = arg_prepare(node, NULL, &state)) != MS_OK) return st;
    const rt_tensor *x = in[0];
    int64_t axis;
    if ((st = kn__read_int1(node, in[1], "dimension", &axis)) != MS_OK) return st;
    int rank = x->shape.rank;
    int a = kn__axis(axis, rank);
    if (a < 0)
        return KN_EINVAL(node, "dimension %lld out of range for input %s", (long long)axis,
                         kn__shp(&x->shape));
    int64_t n = x->shape.dim[a];
    if (n == 0)
        return KN_EINVAL(node, "reduction dimension %d of input %s is empty", a,
                         kn__shp(&x->shape));
    rt_dtype t = kn_attr_type(node, "output_type", RT_DT_INT64);
    rt_shape os = {.rank = 0};
    int64_t outer = 1, after = 1;
    for (int d = 0; d < rank; d++) {
        if (d == a) continue;
        os.dim[os.rank++] = x->shape.dim[d];
        if (d < a)
            outer *= x->shape.dim[d];
        else
            after *= x->shape.dim[d];
    }
    int is_max = strcmp(node->op, "ArgMax") == 0;
    int64_t cnt = outer * after;
    int64_t *idx = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(*idx));
    if (idx == NULL) return ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
    switch (x->dtype) {
    case RT_DT_FLOAT:
        ARG_LOOP(float);
        break;
    case RT_DT_DOUBLE:
        ARG_LOOP(double);
        break;
    case RT_DT_INT32:
        ARG_LOOP(int32_t);
        break;
    case RT_DT_INT64:
        ARG_LOOP(int64_t);
        break;
    case RT_DT_UINT8:
        ARG_LOOP(uint8_t);
        break;
    default:
        free(idx);
        return kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(x->dtype));
    }
    if ((st = kn__output(ctx, node, 0, t, &os, &out[0])) == MS_OK)
        for (int64_t i = 0; i < cnt; i++) {
            if (t == RT_DT_INT32)
                ((int32_t *)out[0]->data)[i] = (int32_t)idx[i];
            else
                ((int64_t *)out[0]->data)[i] = idx[i];
        }
    free(idx);
    return st;
}

/* ====================================================================== */
/* _FusedMapReduce: an elementwise expression -> Sum / Mean (rt_fuse.c)   */
/* ====================================================================== */

/* The node (made by the load-time fusion pass, rt_fuse.h rule 4) evaluates
 * a small program of elementwise ops over its inputs (the leaves, numpy
 * broadcast to one shape) block by block in registers, and reduces several
 * results over the same axes in the same pass, without intermediate tensors.
 *
 * Attrs: Tleaves list(type) (DT_FLOAT | DT_BOOL per input); consts
 * list(float); ops list(string) (TensorFlow op names); args list(int), two
 * per op (-1: none); outputs list(int); reductions list(string) ("Sum" |
 * "Mean" per output); axes list(int); keep_dims bool. Values are numbered:
 * inputs, then consts, then one per op. A bool is held as 0.0f / 1.0f, so
 * Cast(bool -> float) is the value itself.
 *
 * Every op is computed with the expression of its own kernel
 * (kn_cpu_elementwise.c), so each element is bit-identical to the unfused
 * graph. Sums accumulate in double as reduce_compute does. Its order is
 * sequential (memory order per output element); the fused pass sums exact
 * integers (int32 per block of MR_B values, int64 per chunk) in parallel
 * chunks instead, which gives the same double exactly when every value summed into an output is an integer of
 * magnitude <= 2^22 and there are at most 2^29 of them: every partial sum,
 * in any order, is then an integer of magnitude <= 2^51, exactly
 * representable, so no addition rounds. The pass checks that for every
 * value (or proves it from the inputs, see mr_tasks); an output where it
 * fails anywhere is computed again in full and reduced by reduce_compute's
 * own loops (mr_reference), as are reductions over axes that are not a
 * suffix of the shape. */

enum {
    MR_ADD, MR_SUB, MR_MUL, MR_DIV, MR_MAX, MR_MIN, MR_SQDIFF,
    MR_LT, MR_LE, MR_GT, MR_GE, MR_AND, MR_OR,
    MR_NOT, MR_NEG, MR_ABS, MR_SQUARE, MR_ALIAS,
};
enum { MR_B = 256, MR_MAXV = 64, MR_MAXIN = 8, MR_MAXOUT = 16, MR_CHUNK = 32768 };

static const struct {
    const char *name;
    int code, nargs;
} mr_names[] = {
    {"Add", MR_ADD, 2},          {"AddV2", MR_ADD, 2},      {"Sub", MR_SUB, 2},
    {"Mul", MR_MUL, 2},          {"RealDiv", MR_DIV, 2},    {"Maximum", MR_MAX, 2},
    {"Minimum", MR_MIN, 2},      {"SquaredDifference", MR_SQDIFF, 2},
    {"Less", MR_LT, 2},          {"LessEqual", MR_LE, 2},   {"Greater", MR_GT, 2},
    {"GreaterEqual", MR_GE, 2},  {"LogicalAnd", MR_AND, 2}, {"LogicalOr", MR_OR, 2},
    {"LogicalNot", MR_NOT, 1},   {"Neg", MR_NEG, 1},        {"Abs", MR_ABS, 1},
    {"Square", MR_SQUARE, 1},    {"Cast", MR_ALIAS, 1},
};

/* v is an integer of magnitude <= 2^22 (see mr_tasks for the test). */
static inline __attribute__((always_inline)) int mr_small_int(float v) {
    const float w = (v + 12582912.f) - 12582912.f;
    return fabsf(v) <= 4194304.f && w == v;
}

typedef struct mr_ins {
    int code, dst, a, b; /* registers */
    int kb;              /* b is a const: its value is kv (read once, not per element) */
    float kv;
} mr_ins;

typedef struct mr_state {
    int nin, nconst, nins, nout, nreg;
    rt_dtype tin[MR_MAXIN];
    float cval[MR_MAXV];
    int cint[MR_MAXV]; /* const k is an integer of magnitude <= 2^22 */
    mr_ins ins[MR_MAXV];
    int oreg[MR_MAXOUT];
    /* fold[q]: the Mul that computes output q and nothing else reads, run
     * inside q's summation (no store of its values), or -1; skip[k]: op k
     * is such a Mul, left out of the block evaluation of mr_tasks. */
    int fold[MR_MAXOUT];
    unsigned char skip[MR_MAXV];
    int mean[MR_MAXOUT];
    int64_t axes[RT_MAX_RANK];
    int naxes, keep;
} mr_state;

static ms_status mapreduce_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    mr_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    const char *ops[MR_MAXV], *reds[MR_MAXOUT];
    size_t olen[MR_MAXV], rlen[MR_MAXOUT];
    int64_t args[2 * MR_MAXV], outs[MR_MAXOUT];
    int nt = kn_attr_typelist(n, "Tleaves", s->tin, MR_MAXIN);
    int nc = kn_attr_flist(n, "consts", s->cval, MR_MAXV);
    int no = kn_attr_slist(n, "ops", ops, olen, MR_MAXV);
    int na = kn_attr_ilist(n, "args", args, 2 * MR_MAXV);
    int nr = kn_attr_ilist(n, "outputs", outs, MR_MAXOUT);
    int nred = kn_attr_slist(n, "reductions", reds, rlen, MR_MAXOUT);
    s->naxes = kn_attr_ilist(n, "axes", s->axes, RT_MAX_RANK);
    s->keep = kn_attr_b(n, "keep_dims", 0);
    if (nc < 0) nc = 0;
    ms_status st = MS_OK;
    if (nt < 0 || nt > MR_MAXIN || nt != n->nin || no < 1 || no > MR_MAXV || na != 2 * no ||
        nr < 1 || nr > MR_MAXOUT || nred != nr || nc + nt + no > MR_MAXV || s->naxes < 0 ||
        s->naxes > RT_MAX_RANK) {
        st = KN_EINVAL(n, "malformed map-reduce program");
        goto fail;
    }
    s->nin = nt;
    s->nconst = nc;
    for (int k = 0; k < nc; k++)
        s->cint[k] = mr_small_int(s->cval[k]);
    s->nout = nr;
    /* value -> register: inputs and consts first, then one per op but Cast,
     * which is its argument's register. */
    int reg[MR_MAXV];
    int nv = nt + nc;
    for (int v = 0; v < nv; v++)
        reg[v] = v;
    for (int i = 0; i < nt; i++)
        if (s->tin[i] != RT_DT_FLOAT && s->tin[i] != RT_DT_BOOL) {
            st = KN_EINVAL(n, "map-reduce input %d has dtype %s", i, rt_dtype_name(s->tin[i]));
            goto fail;
        }
    s->nreg = nv;
    for (int i = 0; i < no; i++) {
        int code = -1, ar = 0;
        for (size_t k = 0; k < sizeof(mr_names) / sizeof(mr_names[0]); k++)
            if (olen[i] == strlen(mr_names[k].name) && memcmp(ops[i], mr_names[k].name, olen[i]) == 0)
                code = mr_names[k].code, ar = mr_names[k].nargs;
        int64_t a = args[2 * i], b = args[2 * i + 1];
        if (code < 0 || a < 0 || a >= nv || (ar == 2 && (b < 0 || b >= nv)) || (ar == 1 && b != -1)) {
            st = KN_EINVAL(n, "malformed map-reduce op %d", i);
            goto fail;
        }
        if (code == MR_ALIAS) {
            reg[nv++] = reg[a];
            continue;
        }
        mr_ins in = {code, s->nreg, reg[a], ar == 2 ? reg[b] : reg[a], 0, 0.f};
        if (ar == 2 && in.b >= nt && in.b < nt + nc) in.kb = 1, in.kv = s->cval[in.b - nt];
        s->ins[s->nins++] = in;
        reg[nv++] = s->nreg++;
    }
    for (int j = 0; j < nr; j++) {
        if (outs[j] < 0 || outs[j] >= nv) {
            st = KN_EINVAL(n, "malformed map-reduce output %d", j);
            goto fail;
        }
        s->oreg[j] = reg[outs[j]];
        s->mean[j] = rlen[j] == 4 && memcmp(reds[j], "Mean", 4) == 0;
    }
    for (int q = 0; q < nr; q++) {
        s->fold[q] = -1;
        for (int k = 0; k < s->nins; k++) {
            const int r = s->ins[k].dst;
            if (r != s->oreg[q] || s->ins[k].code != MR_MUL) continue;
            int used = 0;
            for (int k2 = 0; k2 < s->nins; k2++)
                used |= s->ins[k2].a == r || s->ins[k2].b == r;
            for (int q2 = 0; q2 < nr; q2++)
                used |= q2 != q && s->oreg[q2] == r;
            if (!used) s->fold[q] = k, s->skip[k] = 1;
        }
    }
    *state = s;
    return MS_OK;
fail:
    free(s);
    return st;
}

typedef struct mr_job {
    const mr_state *s;
    const float *fin[MR_MAXIN];   /* float inputs, full size (or NULL) */
    const uint8_t *bin[MR_MAXIN]; /* bool inputs, full size (or NULL) */
    float scalar[MR_MAXIN];       /* one-element inputs */
    int is_scalar[MR_MAXIN];
    int64_t inner, nchunk; /* elements per output element; chunks per output element */
    double *part;          /* per task and output: the lane sum */
    unsigned char *bad;    /* per task and output: some value broke the exactness rule */
} mr_job;

/* Evaluates the program over elements [p, p + len) into regs (len <= MR_B);
 * consts and scalar inputs are already in their registers. src[r] is where
 * register r's values are read: regs, or a float input in place. */
#define MR_EVAL(s, j, regs, src, p, len, skipv)                                                    \
    do {                                                                                           \
        for (int i_ = 0; i_ < (s)->nin; i_++) {                                                    \
            if ((j)->is_scalar[i_]) continue;                                                      \
            float *d_ = (regs) + (size_t)i_ * MR_B;                                                \
            if ((j)->fin[i_]) {                                                                    \
                (src)[i_] = (j)->fin[i_] + (p); /* read in place */                                \
            } else {                                                                               \
                const uint8_t *x_ = (j)->bin[i_] + (p);                                            \
                for (int64_t e_ = 0; e_ < (len); e_++)                                             \
                    d_[e_] = x_[e_] != 0 ? 1.f : 0.f;                                              \
            }                                                                                      \
        }                                                                                          \
        for (int k_ = 0; k_ < (s)->nins; k_++) {                                                   \
            if ((skipv) != NULL && (skipv)[k_]) continue;                                          \
            const mr_ins *q_ = &(s)->ins[k_];                                                      \
            float *o_ = (regs) + (size_t)q_->dst * MR_B;                                           \
            const float *a_ = (src)[q_->a];                                                        \
            const float *b_ = (src)[q_->b];                                                        \
            switch (q_->code) {                                                                    \
                MR_CASE(MR_ADD, x + y)                                                             \
                MR_CASE(MR_SUB, x - y)                                                             \
                MR_CASE(MR_MUL, x * y)                                                             \
                MR_CASE(MR_DIV, x / y)                                                             \
                MR_CASE(MR_MAX, (x > y || x != x) ? x : y)                                         \
                MR_CASE(MR_MIN, (x < y || x != x) ? x : y)                                         \
                MR_CASE(MR_SQDIFF, (x - y) * (x - y))                                              \
                MR_CASE(MR_LT, x < y ? 1.f : 0.f)                                                  \
                MR_CASE(MR_LE, x <= y ? 1.f : 0.f)                                                 \
                MR_CASE(MR_GT, x > y ? 1.f : 0.f)                                                  \
                MR_CASE(MR_GE, x >= y ? 1.f : 0.f)                                                 \
                MR_CASE(MR_AND, (x != 0.f && y != 0.f) ? 1.f : 0.f)                                \
                MR_CASE(MR_OR, (x != 0.f || y != 0.f) ? 1.f : 0.f)                                 \
                MR_CASE(MR_NOT, x == 0.f ? 1.f : 0.f)                                              \
                MR_CASE(MR_NEG, -x)                                                                \
                MR_CASE(MR_ABS, fabsf(x))                                                          \
            default:                                                                               \
                MR_CASE_BODY(x * x)                                                                \
            }                                                                                      \
        }                                                                                          \
    } while (0)
/* A loop over the block's elements: a whole block has a constant trip
 * count, which the compiler unrolls (the loop overhead is otherwise a large
 * part of these short loops). */
#define MR_LOOP(len, ...)                                                                          \
    do {                                                                                           \
        if ((len) == MR_B) {                                                                       \
            _Pragma("GCC unroll 4") for (int64_t e_ = 0; e_ < MR_B; e_++) __VA_ARGS__             \
        } else {                                                                                   \
            for (int64_t e_ = 0; e_ < (len); e_++) __VA_ARGS__                                    \
        }                                                                                          \
    } while (0)
/* The op's expression per element; against a const, y is that value, so
 * the const's register is not read per element (same value, same result). */
#define MR_CASE_BODY(EXPR)                                                                         \
    if (q_->kb) {                                                                                  \
        const float y = q_->kv;                                                                    \
        (void)y;                                                                                   \
        MR_LOOP(len_, {                                                                            \
            float x = a_[e_];                                                                      \
            o_[e_] = (EXPR);                                                                       \
        });                                                                                        \
    } else {                                                                                       \
        MR_LOOP(len_, {                                                                            \
            float x = a_[e_], y = b_[e_];                                                          \
            (void)y;                                                                               \
            o_[e_] = (EXPR);                                                                       \
        });                                                                                        \
    }                                                                                              \
    break;
#define MR_CASE(code, EXPR)                                                                        \
    case code:                                                                                     \
        MR_CASE_BODY(EXPR)

/* Fills the registers of consts and one-element inputs; points src[] at
 * the registers. */
#define MR_FILL(s, j, regs, src)                                                                   \
    do {                                                                                           \
        for (int r_ = 0; r_ < (s)->nreg; r_++)                                                     \
            (src)[r_] = (regs) + (size_t)r_ * MR_B;                                                \
        for (int i_ = 0; i_ < (s)->nin + (s)->nconst; i_++) {                                      \
            float v_;                                                                              \
            if (i_ < (s)->nin) {                                                                   \
                if (!(j)->is_scalar[i_]) continue;                                                 \
                v_ = (j)->scalar[i_];                                                              \
            } else {                                                                               \
                v_ = (s)->cval[i_ - (s)->nin];                                                     \
            }                                                                                      \
            float *d_ = (regs) + (size_t)i_ * MR_B;                                                \
            for (int e_ = 0; e_ < MR_B; e_++)                                                      \
                d_[e_] = v_;                                                                       \
        }                                                                                          \
    } while (0)

/* Tasks [b, e): task t is chunk t % nchunk of output element t / nchunk;
 * each sums its chunk of every output (as exact integers). */
KN_VEC_DEFINE(mr_tasks, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const mr_job *j = arg;
    const mr_state *s = j->s;
    float regs[MR_MAXV * MR_B];
    const float *src[MR_MAXV];
    MR_FILL(s, j, regs, src);
    for (int64_t t = b; t < e; t++) {
        const int64_t o = t / j->nchunk, c = t % j->nchunk;
        const int64_t lo = o * j->inner + c * MR_CHUNK;
        int64_t hi = lo + MR_CHUNK;
        if (hi > (o + 1) * j->inner) hi = (o + 1) * j->inner;
        int64_t isum[MR_MAXOUT];
        int bad[MR_MAXOUT];
        for (int q = 0; q < s->nout; q++)
            isum[q] = 0, bad[q] = 0;
        for (int64_t p = lo; p < hi; p += MR_B) {
            const int64_t len_ = hi - p < MR_B ? hi - p : MR_B;
            MR_EVAL(s, j, regs, src, p, len_, s->skip);
            /* Which values are integers of magnitude <= 2^22 throughout
             * this block: the inputs are checked, the ops' bounds follow
             * (then every op computes exactly, and its result is an
             * integer within its bound). Such an output needs no check. */
            double bnd[MR_MAXV];
            int isint[MR_MAXV];
            /* ones[i]: float input i is exactly 1.0 throughout this block (a
             * mask with nothing padded): a folded Mul by it is its other
             * operand, bit for bit (x * 1 is x for every float but a
             * signalling NaN, which fails the integer test either way). */
            int ones[MR_MAXIN];
            for (int i = 0; i < s->nin; i++) {
                ones[i] = 0;
                if (j->is_scalar[i] || j->bin[i]) {
                    const float v = j->is_scalar[i] ? j->scalar[i] : 1.f;
                    isint[i] = mr_small_int(v);
                    bnd[i] = fabsf(v);
                    continue;
                }
                const float *x = src[i];
                int nb = 0, n1 = 0;
                uint32_t mx = 0;
                MR_LOOP(len_, {
                    const float v = x[e_], w = (v + 12582912.f) - 12582912.f;
                    nb += 1 - ((fabsf(v) <= 4194304.f) & (w == v));
                    n1 += v != 1.f;
                    uint32_t u;
                    memcpy(&u, &v, sizeof u);
                    u &= 0x7FFFFFFFu; /* |v|: bit patterns order as values */
                    mx = u > mx ? u : mx;
                });
                float m;
                memcpy(&m, &mx, sizeof m);
                isint[i] = nb == 0;
                bnd[i] = m;
                ones[i] = n1 == 0;
            }
            for (int k = 0; k < s->nconst; k++) {
                isint[s->nin + k] = s->cint[k];
                bnd[s->nin + k] = fabsf(s->cval[k]);
            }
            for (int k = 0; k < s->nins; k++) {
                const mr_ins *q = &s->ins[k];
                const double ba = bnd[q->a], bb = bnd[q->b];
                int in = isint[q->a] && isint[q->b];
                double bo;
                switch (q->code) {
                case MR_ADD:
                case MR_SUB:
                    bo = ba + bb;
                    break;
                case MR_MUL:
                    bo = ba * bb;
                    break;
                case MR_DIV:
                    bo = 0, in = 0;
                    break;
                case MR_MAX:
                case MR_MIN:
                    bo = ba > bb ? ba : bb;
                    break;
                case MR_SQDIFF:
                    bo = (ba + bb) * (ba + bb);
                    break;
                case MR_NEG:
                case MR_ABS:
                    bo = ba;
                    break;
                case MR_SQUARE:
                    bo = ba * ba;
                    break;
                default: /* comparisons and logic: 0 or 1 */
                    bo = 1, in = 1;
                }
                isint[q->dst] = in && bo <= 4194304.0;
                bnd[q->dst] = bo;
            }
            for (int q = 0; q < s->nout; q++) {
                const float *r = src[s->oreg[q]];
                int32_t bs = 0; /* a block: < 2^8 * 2^22 */
                if (s->fold[q] >= 0) {
                    /* The folded Mul, each product as its kernel computes
                     * it: summed at once when exact, else stored; by an
                     * all-ones input, its other operand is the product. */
                    const mr_ins *m = &s->ins[s->fold[q]];
                    const float *a = src[m->a], *b = src[m->b];
                    if (m->b < s->nin && ones[m->b]) {
                        r = a;
                    } else if (m->a < s->nin && ones[m->a]) {
                        r = b;
                    } else if (isint[s->oreg[q]]) {
                        MR_LOOP(len_, { bs += (int32_t)(a[e_] * b[e_]); });
                        isum[q] += bs;
                        continue;
                    } else {
                        float *o = regs + (size_t)m->dst * MR_B;
                        MR_LOOP(len_, { o[e_] = a[e_] * b[e_]; });
                    }
                }
                if (isint[s->oreg[q]]) {
                    MR_LOOP(len_, { bs += (int32_t)r[e_]; });
                    isum[q] += bs;
                    continue;
                }
                /* Values that are not integers of magnitude <= 2^22
                 * (NaN, inf included) break the exactness rule: for
                 * |v| <= 2^22, v + 1.5 * 2^23 lies where floats are one
                 * apart, so (v + 1.5 * 2^23) - 1.5 * 2^23 is v rounded to an
                 * integer, equal to v exactly when v is one. The integers
                 * are summed exactly in int32 (a block: < 2^31) then int64;
                 * a bad value adds 0 and marks the output. */
                int nb = 0;
                for (int64_t i = 0; i < len_; i++) {
                    const float v = r[i], w = (v + 12582912.f) - 12582912.f;
                    const int ok = (fabsf(v) <= 4194304.f) & (w == v);
                    nb += 1 - ok;
                    bs += (int32_t)(ok ? v : 0.f);
                }
                bad[q] |= nb != 0;
                isum[q] += bs;
            }
        }
        for (int q = 0; q < s->nout; q++) {
            j->part[t * s->nout + q] = (double)isum[q];
            j->bad[t * s->nout + q] = (unsigned char)bad[q];
        }
    }
})

static void mr_task_chunk(void *arg, int64_t b, int64_t e) {
    mr_tasks(arg, b, e);
}

/* Output q of the program over every element, into buf. */
typedef struct mr_mat {
    const mr_job *j;
    int q;
    float *buf;
    int64_t total;
} mr_mat;

/* Blocks [b, e) of MR_B elements. */
KN_VEC_DEFINE(mr_materialize, (void *arg, int64_t b, int64_t e), (arg, b, e), {
    const mr_mat *m = arg;
    const mr_job *j = m->j;
    const mr_state *s = j->s;
    float regs[MR_MAXV * MR_B];
    const float *src[MR_MAXV];
    MR_FILL(s, j, regs, src);
    for (int64_t blk = b; blk < e; blk++) {
        const int64_t p = blk * MR_B;
        const int64_t len_ = m->total - p < MR_B ? m->total - p : MR_B;
        MR_EVAL(s, j, regs, src, p, len_, (const unsigned char *)NULL);
        const float *r = src[s->oreg[m->q]];
        float *o = m->buf + p;
        for (int64_t i = 0; i < len_; i++)
            o[i] = r[i];
    }
})

static void mr_mat_chunk(void *arg, int64_t b, int64_t e) {
    mr_materialize(arg, b, e);
}

/* Output q exactly as the unfused graph computes it: its expression in
 * full, then reduce_compute's own plan and loops (its summation order) into
 * acc[0 .. nouts), which this zeroes first. */
static ms_status mr_reference(kn_ctx *ctx, const mr_job *j, int q, const rt_shape *full,
                              const int *red, double *acc, int64_t total) {
    /* A scratch tensor from the model's buffer pool (kn_ctx_output ignores
     * the index), so that a steady stream of requests reuses it. */
    rt_tensor *scratch = NULL;
    ms_status st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, full, &scratch);
    if (st != MS_OK) return st;
    float *buf = rt_tensor_f32(scratch);
    mr_mat m = {.j = j, .q = q, .buf = buf, .total = total};
    kn_ctx_parallel_for(ctx, (total + MR_B - 1) / MR_B, 16, mr_mat_chunk, &m);
    red_plan p;
    red_plan_make(full, red, &p);
    for (int64_t i = 0; i < p.nout; i++)
        acc[i] = 0;
    red_run(ctx, &p, RED_SUM, buf, acc, RT_DT_FLOAT, total);
    rt_tensor_unref(scratch);
    return MS_OK;
}

/* Copies input t, numpy-broadcast to `full`, into a new buffer of esize-byte
 * elements. */
static void *mr_expand(const rt_tensor *t, const rt_shape *full, size_t esize) {
    int64_t total = 1;
    for (int d = 0; d < full->rank; d++)
        total *= full->dim[d];
    uint8_t *o = malloc((size_t)(total > 0 ? total : 1) * esize);
    if (o == NULL) return NULL;
    int64_t st[RT_MAX_RANK], m = 1;
    const int off = full->rank - t->shape.rank;
    for (int d = full->rank - 1; d >= 0; d--) {
        int64_t td = d >= off ? t->shape.dim[d - off] : 1;
        st[d] = td == 1 ? 0 : m;
        m *= td;
    }
    const uint8_t *src = t->data;
    for (int64_t i = 0; i < total; i++) {
        int64_t r = i, si = 0;
        for (int d = full->rank - 1; d >= 0; d--) {
            si += (r % full->dim[d]) * st[d];
            r /= full->dim[d];
        }
        memcpy(o + (size_t)i * esize, src + (size_t)si * esize, esize);
    }
    return o;
}

static ms_status mapreduce_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                   rt_tensor *const *in, rt_tensor **out) {
    const mr_state *s = state;
    if (s == NULL) return kn__errf(MS_EINTERNAL, node, "not prepared");
    ms_status st = kn__need_inputs(node, in, s->nin);
    if (st != MS_OK) return st;
    /* The broadcast shape of every input. */
    rt_shape full = {.rank = 0};
    for (int i = 0; i < s->nin; i++) {
        if (in[i]->dtype != s->tin[i])
            return KN_EINVAL(node, "input %d has dtype %s, expected %s", i,
                             rt_dtype_name(in[i]->dtype), rt_dtype_name(s->tin[i]));
        const rt_shape *a = &in[i]->shape;
        rt_shape r = {.rank = a->rank > full.rank ? a->rank : full.rank};
        for (int d = 0; d < r.rank; d++) {
            int ia = d - (r.rank - a->rank), ib = d - (r.rank - full.rank);
            int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? full.dim[ib] : 1;
            if (da != db && da != 1 && db != 1)
                return KN_EINVAL(node, "incompatible shapes %s and %s", kn__shp(a),
                                 kn__shp(&full));
            r.dim[d] = da == 1 ? db : da;
        }
        full = r;
    }
    int red[RT_MAX_RANK] = {0};
    for (int i = 0; i < s->naxes; i++) {
        int a = kn__axis(s->axes[i], full.rank);
        if (a < 0)
            return KN_EINVAL(node, "reduction index %lld out of range for input %s",
                             (long long)s->axes[i], kn__shp(&full));
        red[a] = 1;
    }
    rt_shape os = {.rank = 0};
    int64_t total = 1, count = 1, nouts = 1;
    for (int d = 0; d < full.rank; d++) {
        total *= full.dim[d];
        if (red[d]) count *= full.dim[d];
        if (!red[d]) {
            os.dim[os.rank++] = full.dim[d];
            nouts *= full.dim[d];
        } else if (s->keep) {
            os.dim[os.rank++] = 1;
        }
    }
    mr_job j = {.s = s};
    void *tmp[MR_MAXIN] = {NULL};
    double *acc = NULL;
    for (int q = 0; q < s->nout; q++)
        out[q] = NULL;
    for (int q = 0; q < s->nout; q++)
        if ((st = kn__output(ctx, node, q, RT_DT_FLOAT, &os, &out[q])) != MS_OK) goto done;
    for (int i = 0; i < s->nin; i++) {
        const rt_tensor *t = in[i];
        if (t->nelem == 1 && total > 0) {
            j.is_scalar[i] = 1;
            j.scalar[i] = t->dtype == RT_DT_FLOAT ? rt_tensor_f32(t)[0]
                                                  : (((const uint8_t *)t->data)[0] != 0 ? 1.f : 0.f);
            continue;
        }
        const void *data = t->data;
        if (t->nelem != total || t->shape.rank != full.rank) {
            if ((tmp[i] = mr_expand(t, &full, rt_dtype_size(t->dtype))) == NULL) goto oom;
            data = tmp[i];
        }
        if (t->dtype == RT_DT_FLOAT)
            j.fin[i] = data;
        else
            j.bin[i] = data;
    }
    /* Reduced axes are a suffix when no kept dim of size > 1 follows a
     * reduced one: each output element then sums `count` contiguous
     * elements. */
    int suffix = 1, seen = 0;
    for (int d = 0; d < full.rank; d++) {
        if (red[d]) seen = 1;
        else if (seen && full.dim[d] != 1) suffix = 0;
    }
    if ((acc = calloc((size_t)s->nout * (size_t)(nouts > 0 ? nouts : 1), sizeof(double))) == NULL)
        goto oom;
    if (total > 0 && !suffix) {
        for (int q = 0; q < s->nout && st == MS_OK; q++)
            st = mr_reference(ctx, &j, q, &full, red, acc + q * nouts, total);
        if (st != MS_OK) goto done;
    } else if (total > 0) {
        j.inner = count;
        j.nchunk = (count + MR_CHUNK - 1) / MR_CHUNK;
        int64_t ntask = nouts * j.nchunk;
        j.part = malloc(sizeof(double) * (size_t)(ntask * s->nout));
        j.bad = malloc((size_t)(ntask * s->nout));
        if (j.part == NULL || j.bad == NULL) goto oom;
        /* Small inputs run inline (the hand-off would cost what a second
         * thread saves). The tasks are fixed MR_CHUNK slices whatever the
         * thread count, each with its own partial sums, added below in task
         * order: the result does not depend on how they were spread. */
        kn_ctx_parallel_for(ctx, ntask, total < KN_PAR_MIN_VALUES ? ntask : 1, mr_task_chunk, &j);
        for (int q = 0; q < s->nout && st == MS_OK; q++) {
            int bad = count > ((int64_t)1 << 29);
            for (int64_t o = 0; o < nouts; o++) {
                double sum = 0;
                for (int64_t c = 0; c < j.nchunk; c++) {
                    int64_t t = (o * j.nchunk + c) * s->nout + q;
                    bad |= j.bad[t];
                    sum += j.part[t];
                }
                acc[q * nouts + o] = sum;
            }
            if (bad) st = mr_reference(ctx, &j, q, &full, red, acc + q * nouts, total);
        }
        if (st != MS_OK) goto done;
    }
    for (int q = 0; q < s->nout; q++) {
        float *y = rt_tensor_f32(out[q]);
        for (int64_t o = 0; o < nouts; o++) {
            double v = acc[q * nouts + o];
            if (s->mean[q]) v /= (double)count;
            y[o] = (float)v;
        }
    }
    goto done;
oom:
    st = ms_errf(MS_ENOMEM, "%s: out of memory", node->name);
done:
    for (int i = 0; i < s->nin; i++)
        free(tmp[i]);
    free(acc);
    free(j.part);
    free(j.bad);
    if (st != MS_OK)
        for (int q = 0; q < s->nout; q++) {
            rt_tensor_unref(out[q]);
            out[q] = NULL;
        }
    return st;
}

/* ====================================================================== */

const kn_kernel kn_cpu_reduce_kernels[] = {
    {.op = "Sum", .compute = reduce_compute},
    {.op = "_FusedMapReduce", .prepare = mapreduce_prepare, .compute = mapreduce_compute, .release = free},
    {.op = "Mean", .compute = reduce_compute},
    {.op = "Max", .compute = reduce_compute},
    {.op = "Min", .compute = reduce_compute},
    {.op = "Prod", .compute = reduce_compute},
    {.op = "Softmax", .compute = softmax_compute},
    {.op = "MatMul", .compute = matmul_compute},
    {.op = "BatchMatMul", .compute = batch_matmul_compute},
    {.op = "BatchMatMulV2", .compute = batch_matmul_compute},
    {.op = "BatchMatMulV3", .compute = batch_matmul_compute},
    {.op = "LogSoftmax", .compute = softmax_compute},
    {.op = "BiasAdd", .prepare = bias_prepare, .compute = bias_compute},
    {.op = "BiasAddV1", .compute = bias_compute},
    {.op = "ArgMax", .prepare = arg_prepare, .compute = arg_compute},
    {.op = "ArgMin", .prepare = arg_prepare, .compute = arg_compute},
    {.op = NULL},
};
