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
    /* Collapse: drop size-1 dims, merge neighbours of the same kind. */
    red_plan p = {.rank = 0, .count = 1};
    for (int d = 0; d < rank; d++) {
        if (red[d]) p.count *= x->shape.dim[d];
        if (x->shape.dim[d] == 1) continue;
        if (p.rank > 0 && p.red[p.rank - 1] == red[d]) {
            p.dim[p.rank - 1] *= x->shape.dim[d];
            continue;
        }
        p.dim[p.rank] = x->shape.dim[d];
        p.red[p.rank] = red[d];
        p.rank++;
    }
    if (p.rank == 0) {
        p.rank = 1;
        p.dim[0] = 1;
        p.red[0] = 0;
    }
    p.nout = 1;
    for (int d = p.rank - 1; d >= 0; d--) {
        p.ostride[d] = p.red[d] ? 0 : p.nout;
        if (!p.red[d]) p.nout *= p.dim[d];
    }
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
    int64_t total = x->nelem;
    if (total > 0 && p.nout > 0) {
        red_job job = {.p = &p, .op = op, .in = x->data, .acc = acc, .dt = dt};
        if (p.rank > 1 && !p.red[0]) {
            int64_t per = total / p.dim[0];
            int64_t chunk = 65536 / (per > 0 ? per : 1);
            kn_ctx_parallel_for(ctx, p.dim[0], chunk > 0 ? chunk : 1, red_chunk, &job);
        } else {
            red_chunk(&job, 0, p.dim[0]);
        }
    }
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

const kn_kernel kn_cpu_reduce_kernels[] = {
    {.op = "Sum", .compute = reduce_compute},
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
