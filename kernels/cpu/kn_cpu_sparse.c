/* kn_cpu_sparse.c - CPU kernels of sparse and ragged tensors as feature
 * columns and text models export them: SparseReshape, SparseFillEmptyRows
 * and RaggedTensorToTensor.
 *
 * Semantics follow TensorFlow's op documentation:
 * - SparseReshape(indices [N, R], shape [R], new_shape [R']) gives the
 *   indices of the same dense positions in the new shape (row-major order),
 *   and the new shape with its one -1 inferred.
 * - SparseFillEmptyRows(indices [N, R], values [N], dense_shape [R],
 *   default_value) adds an entry (row, 0, ...) = default_value for each row
 *   of dense_shape[0] that has none; the output is ordered by row, keeping
 *   the input order within a row; empty_row_indicator[row] says which rows
 *   were filled and reverse_index_map[i] is the output position of entry i.
 * - RaggedTensorToTensor(shape, values, default_value, row partitions...)
 *   with row_partition_types [FIRST_DIM_SIZE, VALUE_ROWIDS...] or
 *   [ROW_SPLITS...]: the dense tensor of the ragged one, each row cut or
 *   padded with default_value (broadcast to the values' inner shape) to the
 *   given shape; a -1 (or an unknown-rank shape) takes the largest row.
 * Every index read from an input is checked; a bad one fails with
 * INVALID_ARGUMENT naming the op and the index.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"

static int is_idx(rt_dtype dt) {
    return dt == RT_DT_INT32 || dt == RT_DT_INT64;
}

static int64_t idx_get(const rt_tensor *t, int64_t i) {
    return t->dtype == RT_DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* Copies element si of src into element di of dst (same dtype; strings by
 * pointer into src's bytes, which dst must keep alive). */
static void elem_copy(rt_tensor *dst, int64_t di, const rt_tensor *src, int64_t si) {
    if (src->dtype == RT_DT_STRING) {
        rt_tensor_strs(dst)[di] = rt_tensor_strs(src)[si];
        return;
    }
    size_t es = rt_dtype_size(src->dtype);
    memcpy((uint8_t *)dst->data + (size_t)di * es, (const uint8_t *)src->data + (size_t)si * es,
           es);
}

/* A values-like output of dtype dt: pooled for plain dtypes; for strings a
 * tensor of empty strings whose bytes will be copied in by finish_strings. */
static ms_status values_output(kn_ctx *ctx, const kn_node *node, int idx, rt_dtype dt,
                               const rt_shape *shape, rt_tensor **out) {
    if (dt != RT_DT_STRING) return kn__output(ctx, node, idx, dt, shape, out);
    ms_status st = rt_tensor_new(RT_DT_STRING, shape, out);
    if (st != MS_OK)
        return kn__errf(st, node, "output %d %s: %s", idx, kn__shp(shape), ms_errmsg());
    return MS_OK;
}

/* Makes *t own copies of the string bytes it points at (borrowed from the
 * inputs by elem_copy). */
static ms_status finish_strings(const kn_node *node, rt_tensor **t) {
    if ((*t)->dtype != RT_DT_STRING) return MS_OK;
    rt_tensor *c;
    ms_status st = rt_tensor_new_strings(&(*t)->shape, rt_tensor_strs(*t), &c);
    if (st != MS_OK) return kn__errf(st, node, "out of memory for the string output");
    rt_tensor_unref(*t);
    *t = c;
    return MS_OK;
}

/* ====================================================================== */
/* SparseReshape                                                          */
/* ====================================================================== */

static ms_status sparse_reshape_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                        rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 3);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[0], *ish = in[1], *nsh = in[2];
    if (ix->dtype != RT_DT_INT64 || ish->dtype != RT_DT_INT64 || nsh->dtype != RT_DT_INT64)
        return KN_EINVAL(node, "input_indices, input_shape and new_shape must be int64");
    if (ix->shape.rank != 2)
        return KN_EINVAL(node, "Input indices should be a matrix but received shape %s",
                         kn__shp(&ix->shape));
    if (ish->shape.rank != 1 || nsh->shape.rank != 1)
        return KN_EINVAL(node, "input_shape %s and new_shape %s must be vectors",
                         kn__shp(&ish->shape), kn__shp(&nsh->shape));
    int64_t n = ix->shape.dim[0], rin = ix->shape.dim[1], rout = nsh->nelem;
    if (ish->nelem != rin)
        return KN_EINVAL(node, "Input tensor rank %lld and the indices' %lld columns differ",
                         (long long)ish->nelem, (long long)rin);
    const int64_t *is = ish->data, *ns = nsh->data, *ip = ix->data;
    int64_t dense = 1, product = 1, unknown = -1;
    for (int64_t d = 0; d < rin; d++) {
        if (is[d] < 0)
            return KN_EINVAL(node, "input_shape[%lld] = %lld is negative", (long long)d,
                             (long long)is[d]);
        dense *= is[d];
    }
    for (int64_t d = 0; d < rout; d++) {
        if (ns[d] == -1) {
            if (unknown != -1)
                return KN_EINVAL(node,
                                 "only one output dimension may be -1, not both %lld and "
                                 "%lld",
                                 (long long)unknown, (long long)d);
            unknown = d;
        } else if (ns[d] < 0) {
            return KN_EINVAL(node, "size %lld must be non-negative, not %lld", (long long)d,
                             (long long)ns[d]);
        } else {
            product *= ns[d];
        }
    }
    rt_shape oss = {.rank = 1, .dim = {rout}};
    rt_shape ois = {.rank = 2, .dim = {n, rout}};
    if ((st = kn__output(ctx, node, 1, RT_DT_INT64, &oss, &out[1])) != MS_OK) return st;
    int64_t *os = out[1]->data;
    for (int64_t d = 0; d < rout; d++) os[d] = ns[d];
    if (unknown != -1) {
        if (product <= 0)
            return KN_EINVAL(node, "reshape cannot infer the missing input size for an empty "
                                   "tensor unless all specified input sizes are non-zero");
        if (dense % product != 0)
            return KN_EINVAL(node,
                             "Input to reshape is a SparseTensor with %lld dense values, "
                             "but the requested shape requires a multiple of %lld",
                             (long long)dense, (long long)product);
        os[unknown] = dense / product;
    } else if (product != dense) {
        return KN_EINVAL(node,
                         "Input to reshape is a tensor with %lld dense values, but the "
                         "requested shape has %lld",
                         (long long)dense, (long long)product);
    }
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &ois, &out[0])) != MS_OK) return st;
    int64_t *op = out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t lin = 0;
        for (int64_t d = 0; d < rin; d++) {
            int64_t v = ip[i * rin + d];
            if (v < 0 || v >= is[d])
                return KN_EINVAL(node, "indices[%lld, %lld] = %lld is not in [0, %lld)",
                                 (long long)i, (long long)d, (long long)v, (long long)is[d]);
            lin = lin * is[d] + v;
        }
        for (int64_t d = rout - 1; d >= 0; d--) {
            op[i * rout + d] = os[d] ? lin % os[d] : 0;
            lin = os[d] ? lin / os[d] : 0;
        }
    }
    return MS_OK;
}

/* ====================================================================== */
/* SparseFillEmptyRows                                                    */
/* ====================================================================== */

static ms_status fill_empty_rows_compute(kn_ctx *ctx, const kn_node *node, void *state,
                                         rt_tensor *const *in, rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(node, in, 4);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[0], *val = in[1], *dsh = in[2], *dflt = in[3];
    if (ix->dtype != RT_DT_INT64 || dsh->dtype != RT_DT_INT64)
        return KN_EINVAL(node, "indices and dense_shape must be int64");
    if (ix->shape.rank != 2)
        return KN_EINVAL(node, "indices must be a matrix, got shape %s", kn__shp(&ix->shape));
    if (val->shape.rank != 1 || val->nelem != ix->shape.dim[0])
        return KN_EINVAL(node, "values must be a vector of %lld elements, got shape %s",
                         (long long)ix->shape.dim[0], kn__shp(&val->shape));
    if (dsh->shape.rank != 1 || dsh->nelem != ix->shape.dim[1] || dsh->nelem < 1)
        return KN_EINVAL(node,
                         "dense_shape must be a vector of the indices' %lld columns, got "
                         "shape %s",
                         (long long)ix->shape.dim[1], kn__shp(&dsh->shape));
    if (dflt->nelem != 1 || dflt->shape.rank != 0)
        return KN_EINVAL(node, "default_value must be a scalar, got shape %s",
                         kn__shp(&dflt->shape));
    if (dflt->dtype != val->dtype)
        return KN_EINVAL(node, "default_value (%s) and values (%s) differ in dtype",
                         rt_dtype_name(dflt->dtype), rt_dtype_name(val->dtype));
    if (!rt_dtype_is_pod(val->dtype) && val->dtype != RT_DT_STRING)
        return kn__errf(MS_ENOTSUP, node, "values of %s are not supported",
                        rt_dtype_name(val->dtype));
    int64_t n = ix->shape.dim[0], r = ix->shape.dim[1];
    int64_t rows = ((const int64_t *)dsh->data)[0];
    if (rows < 0) return KN_EINVAL(node, "dense_shape[0] = %lld is negative", (long long)rows);
    const int64_t *ip = ix->data;
    int64_t *cnt = calloc((size_t)rows + 1, sizeof(int64_t));
    if (cnt == NULL)
        return kn__errf(MS_ENOMEM, node, "out of memory for %lld rows", (long long)rows);
    for (int64_t i = 0; i < n; i++) {
        int64_t row = ip[i * r];
        if (row < 0 || row >= rows) {
            free(cnt);
            return KN_EINVAL(node, "indices(%lld, 0) is invalid: %lld is not in [0, %lld)",
                             (long long)i, (long long)row, (long long)rows);
        }
        cnt[row + 1]++;
    }
    /* output slots: a row's entries, or its one default entry */
    int64_t empty = 0;
    for (int64_t row = 0; row < rows; row++) empty += cnt[row + 1] == 0;
    int64_t total = n + empty;
    rt_shape ois = {.rank = 2, .dim = {total, r}}, ovs = {.rank = 1, .dim = {total}};
    rt_shape ers = {.rank = 1, .dim = {rows}}, rms = {.rank = 1, .dim = {n}};
    if ((st = kn__output(ctx, node, 0, RT_DT_INT64, &ois, &out[0])) != MS_OK ||
        (st = values_output(ctx, node, 1, val->dtype, &ovs, &out[1])) != MS_OK ||
        (node->nout > 2 && (st = kn__output(ctx, node, 2, RT_DT_BOOL, &ers, &out[2])) != MS_OK) ||
        (node->nout > 3 && (st = kn__output(ctx, node, 3, RT_DT_INT64, &rms, &out[3])) != MS_OK)) {
        free(cnt);
        return st;
    }
    /* start[row]: first output slot of the row */
    int64_t *start = cnt; /* reused in place as running slot positions */
    int64_t acc = 0;
    for (int64_t row = 0; row < rows; row++) {
        int64_t c = cnt[row + 1];
        start[row] = acc;
        acc += c ? c : 1;
    }
    int64_t *oi = out[0]->data;
    uint8_t *er = node->nout > 2 ? out[2]->data : NULL;
    int64_t *rm = node->nout > 3 ? out[3]->data : NULL;
    /* default entries first (slots of empty rows), then the entries */
    int64_t *next = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int64_t));
    if (next == NULL) {
        free(cnt);
        return kn__errf(MS_ENOMEM, node, "out of memory");
    }
    for (int64_t row = 0; row < rows; row++) next[row] = start[row];
    if (er) memset(er, 0, (size_t)rows);
    for (int64_t i = 0; i < n; i++) {
        int64_t row = ip[i * r], slot = next[row]++;
        memcpy(oi + slot * r, ip + i * r, (size_t)r * sizeof(int64_t));
        elem_copy(out[1], slot, val, i);
        if (rm) rm[i] = slot;
    }
    for (int64_t row = 0; row < rows; row++) {
        if (next[row] != start[row]) continue;
        int64_t slot = start[row];
        oi[slot * r] = row;
        for (int64_t d = 1; d < r; d++) oi[slot * r + d] = 0;
        elem_copy(out[1], slot, dflt, 0);
        if (er) er[row] = 1;
    }
    free(next);
    free(cnt);
    return finish_strings(node, &out[1]);
}

/* ====================================================================== */
/* RaggedTensorToTensor                                                   */
/* ====================================================================== */

enum { RP_FIRST_DIM_SIZE, RP_VALUE_ROWIDS, RP_ROW_SPLITS };
#define RP_MAX (RT_MAX_RANK - 1)

typedef struct ragged_state {
    int n;
    int type[RP_MAX + 1];
} ragged_state;

static ms_status ragged_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    const char *names[RP_MAX + 2];
    size_t lens[RP_MAX + 2];
    int n = kn_attr_slist(node, "row_partition_types", names, lens, RP_MAX + 2);
    if (n < 1) return KN_EINVAL(node, "row_partition_types must name at least one partition");
    if (n > RP_MAX + 1)
        return KN_EINVAL(node, "%d row partitions, at most %d supported", n, RP_MAX);
    ragged_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    s->n = n;
    for (int i = 0; i < n; i++) {
        if (lens[i] == 14 && memcmp(names[i], "FIRST_DIM_SIZE", 14) == 0)
            s->type[i] = RP_FIRST_DIM_SIZE;
        else if (lens[i] == 12 && memcmp(names[i], "VALUE_ROWIDS", 12) == 0)
            s->type[i] = RP_VALUE_ROWIDS;
        else if (lens[i] == 10 && memcmp(names[i], "ROW_SPLITS", 10) == 0)
            s->type[i] = RP_ROW_SPLITS;
        else {
            free(s);
            return KN_EINVAL(node,
                             "row_partition_types[%d] '%.*s' is not FIRST_DIM_SIZE, "
                             "VALUE_ROWIDS or ROW_SPLITS",
                             i, (int)(lens[i] > 40 ? 40 : lens[i]), names[i]);
        }
    }
    /* TensorFlow's two forms: FIRST_DIM_SIZE then VALUE_ROWIDS, or ROW_SPLITS only */
    int ok = 1;
    if (s->type[0] == RP_FIRST_DIM_SIZE) {
        ok = n >= 2;
        for (int i = 1; i < n; i++) ok = ok && s->type[i] == RP_VALUE_ROWIDS;
    } else {
        for (int i = 0; i < n; i++) ok = ok && s->type[i] == RP_ROW_SPLITS;
    }
    if (!ok) {
        free(s);
        return kn__errf(MS_ENOTSUP, node,
                        "row_partition_types must be [FIRST_DIM_SIZE, "
                        "VALUE_ROWIDS...] or [ROW_SPLITS...]");
    }
    *state = s;
    return MS_OK;
}

static void ragged_release(void *state) {
    free(state);
}

static ms_status ragged_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    void *own = NULL;
    ms_status st;
    if (state == NULL) {
        if ((st = ragged_prepare(node, NULL, &own)) != MS_OK) return st;
        state = own;
    }
    const ragged_state *s = state;
    int64_t *pos = NULL, *npos = NULL;
    if ((st = kn__need_inputs(node, in, 3 + s->n)) != MS_OK) goto done;
    const rt_tensor *shp = in[0], *val = in[1], *dflt = in[2];
    int first = s->type[0] == RP_FIRST_DIM_SIZE;
    int ragged = first ? s->n - 1 : s->n;
    rt_tensor *const *parts = in + 3 + first;
    if (val->shape.rank < 1) {
        st = KN_EINVAL(node, "values must have rank >= 1, got shape %s", kn__shp(&val->shape));
        goto done;
    }
    if (!rt_dtype_is_pod(val->dtype) && val->dtype != RT_DT_STRING) {
        st =
            kn__errf(MS_ENOTSUP, node, "values of %s are not supported", rt_dtype_name(val->dtype));
        goto done;
    }
    if (dflt->dtype != val->dtype) {
        st = KN_EINVAL(node, "default_value (%s) and values (%s) differ in dtype",
                       rt_dtype_name(dflt->dtype), rt_dtype_name(val->dtype));
        goto done;
    }
    int orank = ragged + val->shape.rank;
    if (orank > RT_MAX_RANK) {
        st = KN_EINVAL(node, "output rank %d is too large", orank);
        goto done;
    }
    for (int k = 0; k < ragged; k++)
        if (!is_idx(parts[k]->dtype) || parts[k]->shape.rank != 1) {
            st = KN_EINVAL(node, "row partition %d must be an int32 or int64 vector, got %s %s", k,
                           rt_dtype_name(parts[k]->dtype), kn__shp(&parts[k]->shape));
            goto done;
        }
    /* rows of the top level */
    int64_t nrows;
    if (first) {
        const rt_tensor *f = in[3];
        if (!is_idx(f->dtype) || f->nelem != 1) {
            st = KN_EINVAL(node, "FIRST_DIM_SIZE must be an integer scalar");
            goto done;
        }
        nrows = idx_get(f, 0);
    } else {
        nrows = parts[0]->nelem - 1;
    }
    if (nrows < 0) {
        st = KN_EINVAL(node, "the first dimension %lld is negative (row_splits must not be empty)",
                       (long long)nrows);
        goto done;
    }
    /* the shape asked for: unknown rank (scalar or empty) or one entry per axis */
    int64_t want[RT_MAX_RANK];
    for (int d = 0; d < orank; d++) want[d] = -1;
    if (shp->shape.rank == 1 && shp->nelem > 0) {
        if (!is_idx(shp->dtype) || shp->nelem != orank) {
            st = KN_EINVAL(node, "shape %s has %lld entries, the result has rank %d",
                           kn__shp(&shp->shape), (long long)shp->nelem, orank);
            goto done;
        }
        for (int d = 0; d < orank; d++) {
            want[d] = idx_get(shp, d);
            if (want[d] < -1) {
                st = KN_EINVAL(node, "shape[%d] = %lld is invalid", d, (long long)want[d]);
                goto done;
            }
        }
    } else if (shp->shape.rank > 1) {
        st = KN_EINVAL(node, "shape must be a vector or a scalar, got %s", kn__shp(&shp->shape));
        goto done;
    }
    /* check the partitions and find each level's largest row */
    int64_t parents = nrows, maxlen[RT_MAX_RANK] = {0};
    for (int k = 0; k < ragged; k++) {
        const rt_tensor *p = parts[k];
        int64_t children = k + 1 < ragged
                               ? (s->type[first + k + 1] == RP_ROW_SPLITS ? parts[k + 1]->nelem - 1
                                                                          : parts[k + 1]->nelem)
                               : val->shape.dim[0];
        if (s->type[first + k] == RP_ROW_SPLITS) {
            if (p->nelem != parents + 1 || idx_get(p, 0) != 0 ||
                idx_get(p, p->nelem - 1) != children) {
                st = KN_EINVAL(node,
                               "row_splits %d (%lld entries) must start at 0, have %lld "
                               "entries and end at %lld",
                               k, (long long)p->nelem, (long long)(parents + 1),
                               (long long)children);
                goto done;
            }
            for (int64_t i = 0; i < parents; i++) {
                int64_t len = idx_get(p, i + 1) - idx_get(p, i);
                if (len < 0) {
                    st = KN_EINVAL(node, "row_splits %d decreases at index %lld", k,
                                   (long long)(i + 1));
                    goto done;
                }
                if (len > maxlen[k]) maxlen[k] = len;
            }
        } else {
            if (p->nelem != children) {
                st = KN_EINVAL(node, "value_rowids %d has %lld entries, %lld values", k,
                               (long long)p->nelem, (long long)children);
                goto done;
            }
            int64_t run = 0;
            for (int64_t i = 0; i < children; i++) {
                int64_t r = idx_get(p, i);
                if (r < 0 || r >= parents || (i > 0 && r < idx_get(p, i - 1))) {
                    st = KN_EINVAL(node,
                                   "value_rowids %d [%lld] = %lld is not a sorted row in "
                                   "[0, %lld)",
                                   k, (long long)i, (long long)r, (long long)parents);
                    goto done;
                }
                run = i > 0 && r == idx_get(p, i - 1) ? run + 1 : 1;
                if (run > maxlen[k]) maxlen[k] = run;
            }
        }
        parents = children;
    }
    rt_shape os = {.rank = orank};
    os.dim[0] = want[0] >= 0 ? want[0] : nrows;
    for (int k = 0; k < ragged; k++) os.dim[k + 1] = want[k + 1] >= 0 ? want[k + 1] : maxlen[k];
    int64_t inner = 1;
    for (int d = 1; d < val->shape.rank; d++) {
        int64_t vd = val->shape.dim[d], wd = want[ragged + d];
        if (wd >= 0 && wd != vd) {
            st = KN_EINVAL(node, "shape[%d] = %lld differs from the values' dimension %lld",
                           ragged + d, (long long)wd, (long long)vd);
            goto done;
        }
        os.dim[ragged + d] = vd;
        inner *= vd;
    }
    /* default_value broadcasts into the values' inner shape (right-aligned) */
    int vr = val->shape.rank - 1;
    if (dflt->shape.rank > vr) {
        st = KN_EINVAL(node, "default_value %s does not broadcast to the values' inner shape",
                       kn__shp(&dflt->shape));
        goto done;
    }
    for (int d = 0; d < dflt->shape.rank; d++) {
        int64_t dd = dflt->shape.dim[d], vd = val->shape.dim[1 + vr - dflt->shape.rank + d];
        if (dd != 1 && dd != vd) {
            st = KN_EINVAL(node, "default_value %s does not broadcast to the values' inner shape",
                           kn__shp(&dflt->shape));
            goto done;
        }
    }
    if ((st = values_output(ctx, node, 0, val->dtype, &os, &out[0])) != MS_OK) goto done;
    int64_t slices = inner > 0 ? out[0]->nelem / inner : 0;
    for (int64_t q = 0; q < slices; q++)
        for (int64_t e = 0; e < inner; e++) {
            /* element e of the inner shape -> its default_value element */
            int64_t rem = e, di = 0, mul = 1;
            for (int d = vr - 1; d >= 0; d--) {
                int64_t vd = val->shape.dim[1 + d], c = rem % vd;
                rem /= vd;
                int dd = d - (vr - dflt->shape.rank);
                if (dd >= 0) {
                    int64_t dsz = dflt->shape.dim[dd];
                    di += (dsz == 1 ? 0 : c) * mul;
                    mul *= dsz;
                }
            }
            elem_copy(out[0], q * inner + e, dflt, di);
        }
    /* positions: each item's flat output index at its level, -1 = cut off */
    pos = malloc((size_t)(nrows > 0 ? nrows : 1) * sizeof(int64_t));
    if (pos == NULL) {
        st = kn__errf(MS_ENOMEM, node, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nrows; i++) pos[i] = i < os.dim[0] ? i : -1;
    parents = nrows;
    for (int k = 0; k < ragged; k++) {
        const rt_tensor *p = parts[k];
        int64_t children = k + 1 < ragged
                               ? (s->type[first + k + 1] == RP_ROW_SPLITS ? parts[k + 1]->nelem - 1
                                                                          : parts[k + 1]->nelem)
                               : val->shape.dim[0];
        int64_t w = os.dim[k + 1];
        npos = malloc((size_t)(children > 0 ? children : 1) * sizeof(int64_t));
        if (npos == NULL) {
            st = kn__errf(MS_ENOMEM, node, "out of memory");
            goto done;
        }
        if (s->type[first + k] == RP_ROW_SPLITS) {
            for (int64_t r = 0; r < parents; r++)
                for (int64_t i = idx_get(p, r); i < idx_get(p, r + 1); i++) {
                    int64_t c = i - idx_get(p, r);
                    npos[i] = pos[r] < 0 || c >= w ? -1 : pos[r] * w + c;
                }
        } else {
            int64_t c = 0;
            for (int64_t i = 0; i < children; i++) {
                int64_t r = idx_get(p, i);
                c = i > 0 && r == idx_get(p, i - 1) ? c + 1 : 0;
                npos[i] = pos[r] < 0 || c >= w ? -1 : pos[r] * w + c;
            }
        }
        free(pos);
        pos = npos;
        npos = NULL;
        parents = children;
    }
    for (int64_t i = 0; i < val->shape.dim[0]; i++) {
        if (pos[i] < 0) continue;
        for (int64_t e = 0; e < inner; e++)
            elem_copy(out[0], pos[i] * inner + e, val, i * inner + e);
    }
    st = finish_strings(node, &out[0]);
done:
    free(pos);
    free(npos);
    free(own);
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_sparse_kernels[] = {
    {.op = "SparseReshape", .compute = sparse_reshape_compute},
    {.op = "SparseFillEmptyRows", .compute = fill_empty_rows_compute},
    {.op = "RaggedTensorToTensor", .prepare = ragged_prepare, .compute = ragged_compute,
     .release = ragged_release},
    {.op = NULL},
};
/* clang-format on */
