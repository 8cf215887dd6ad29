/* kn_cpu_einsum.c - the CPU kernel of Einsum (float, double, int32, int64).
 *
 * The equation ("abc,cde->abde", "...ij,...jk", "ii->i", "bij->") is parsed
 * once at prepare; each call maps every axis of each input to a label, with
 * an ellipsis standing for the leading axes right-aligned across the inputs
 * (size-1 axes there broadcast, as TensorFlow's Einsum does). An input that
 * repeats a label reads the diagonal: the label becomes one axis whose
 * stride is the sum of the repeated axes' strides. Without "->" the output
 * is the ellipsis followed by the labels seen exactly once, in alphabetical
 * (ASCII) order; an output without "..." sums over the ellipsis axes.
 *
 * One input: a strided sum over the labels the output drops. Two inputs are
 * lowered to a batched GEMM, as TensorFlow does: labels in both inputs and
 * the output are the batch B, labels of one input only that the output keeps
 * are M (first input) or N (second), labels of both inputs that the output
 * drops are the contraction K, and labels of one input only that the output
 * drops are summed out of that input first. Each operand is used in place
 * when its memory already is [B, M, K] or [B, K, M] (second: [B, K, N] or
 * [B, N, K]), as for the attention and dense projections of transformer
 * models, else gathered into that layout once; each batch is one call of the
 * packed SGEMM (kn_cpu_gemm.c) parallel over the intra-op pool, and the
 * result is written in the output's label order (in place when that is B,
 * M, N, or B, N, M with the inputs' roles swapped). Doubles go through BLAS
 * dgemm. Integers take a direct strided loop (int_einsum).
 */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_gemm.h"
#include "kn_cpu_util.h"

#define EQ_MAX_TERM 16             /* labels of one term, the ellipsis counting one */
#define EQ_NLAB (52 + RT_MAX_RANK) /* letters, then ellipsis axes */
#define EQ_ELL (-1)                /* the ellipsis in a parsed term */
#define ELL_BASE 52

typedef struct eq_term {
    int n;
    int lab[EQ_MAX_TERM]; /* label ids (0..51) or EQ_ELL */
} eq_term;

typedef struct einsum_state {
    int nin;
    eq_term in[2];
    int explicit_out;
    eq_term out;
} einsum_state;

static int label_id(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* ASCII code of a letter label id (for the implicit output's order). */
static int label_char(int id) {
    return id < 26 ? 'a' + id : 'A' + (id - 26);
}

static ms_status parse_term(const kn_node *node, const char *s, size_t len, eq_term *t) {
    t->n = 0;
    int ell = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') continue;
        if (s[i] == '.') {
            if (ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return KN_EINVAL(node, "equation has a malformed or second ellipsis");
            ell = 1;
            i += 2;
            if (t->n >= EQ_MAX_TERM) return KN_EINVAL(node, "equation term is too long");
            t->lab[t->n++] = EQ_ELL;
            continue;
        }
        int id = label_id(s[i]);
        if (id < 0) return KN_EINVAL(node, "equation has an invalid character '%c'", s[i]);
        if (t->n >= EQ_MAX_TERM) return KN_EINVAL(node, "equation term is too long");
        t->lab[t->n++] = id;
    }
    return MS_OK;
}

static ms_status einsum_parse(const kn_node *node, einsum_state *s) {
    size_t len = 0;
    const char *eq = kn_attr_s(node, "equation", &len);
    if (eq == NULL) return KN_EINVAL(node, "attr equation is missing");
    size_t arrow = len;
    for (size_t i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') {
            arrow = i;
            break;
        }
    size_t comma = arrow;
    int ncomma = 0;
    for (size_t i = 0; i < arrow; i++)
        if (eq[i] == ',') {
            if (ncomma++ == 0) comma = i;
        }
    if (ncomma > 1) return KN_EINVAL(node, "Einsum takes 1 or 2 inputs; the equation names more");
    s->nin = ncomma + 1;
    ms_status st = parse_term(node, eq, comma, &s->in[0]);
    if (st == MS_OK && s->nin == 2)
        st = parse_term(node, eq + comma + 1, arrow - comma - 1, &s->in[1]);
    if (st != MS_OK) return st;
    s->explicit_out = arrow < len;
    if (s->explicit_out) {
        if ((st = parse_term(node, eq + arrow + 2, len - arrow - 2, &s->out)) != MS_OK) return st;
        for (int i = 0; i < s->out.n; i++)
            for (int j = 0; j < i; j++)
                if (s->out.lab[i] == s->out.lab[j] && s->out.lab[i] != EQ_ELL)
                    return KN_EINVAL(node, "output label '%c' appears more than once",
                                     label_char(s->out.lab[i]));
    }
    return MS_OK;
}

static ms_status einsum_prepare(const kn_node *node, rt_tensor *const *const_in, void **state) {
    (void)const_in;
    einsum_state *s = calloc(1, sizeof(*s));
    if (s == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    ms_status st = einsum_parse(node, s);
    if (st == MS_OK && node->nin != s->nin)
        st = KN_EINVAL(node, "equation has %d inputs, the node %d", s->nin, node->nin);
    if (st != MS_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

static void einsum_release(void *state) {
    free(state);
}

/* One input seen over its distinct labels. */
typedef struct lview {
    int n;
    int lab[RT_MAX_RANK];
    int64_t stride[RT_MAX_RANK];
} lview;

static int64_t view_stride(const lview *v, int lab) {
    for (int i = 0; i < v->n; i++)
        if (v->lab[i] == lab) return v->stride[i];
    return 0;
}

static int view_has(const lview *v, int lab) {
    for (int i = 0; i < v->n; i++)
        if (v->lab[i] == lab) return 1;
    return 0;
}

/* dst (contiguous over dim[0..nd-1]) = src strided by st (elements): one
 * tight loop per row of the last dim (the layout copies of the GEMM
 * operands and of a permuted result). */
static void strided_copy(const void *src, int dbl, int nd, const int64_t *dim, const int64_t *st,
                         void *dst) {
    if (nd == 0) {
        if (dbl)
            *(double *)dst = *(const double *)src;
        else
            *(float *)dst = *(const float *)src;
        return;
    }
    int64_t last = dim[nd - 1], ls = st[nd - 1], rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= dim[d];
    int64_t idx[RT_MAX_RANK] = {0}, off = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (dbl) {
            const double *sp = (const double *)src + off;
            double *dp = (double *)dst + r * last;
            for (int64_t i = 0; i < last; i++) dp[i] = sp[i * ls];
        } else {
            const float *sp = (const float *)src + off;
            float *dp = (float *)dst + r * last;
            if (ls == 1)
                memcpy(dp, sp, (size_t)last * sizeof(float));
            else
                for (int64_t i = 0; i < last; i++) dp[i] = sp[i * ls];
        }
        for (int d = nd - 2; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < dim[d]) break;
            off -= st[d] * dim[d];
            idx[d] = 0;
        }
    }
}

/* dst (contiguous over dim[0..nd-1]) = sum over rdim of src, src strided by
 * st / rst (elements). Sums in double. */
static void strided_sum(const void *src, int dbl, int nd, const int64_t *dim, const int64_t *st,
                        int nr, const int64_t *rdim, const int64_t *rst, void *dst) {
    if (nr == 0) {
        strided_copy(src, dbl, nd, dim, st, dst);
        return;
    }
    int64_t total = 1, rtotal = 1;
    for (int d = 0; d < nd; d++) total *= dim[d];
    for (int d = 0; d < nr; d++) rtotal *= rdim[d];
    int64_t idx[RT_MAX_RANK] = {0}, off = 0;
    for (int64_t o = 0; o < total; o++) {
        double acc = 0;
        if (nr == 0) {
            acc = dbl ? ((const double *)src)[off] : ((const float *)src)[off];
        } else if (rtotal > 0) {
            int64_t ridx[RT_MAX_RANK] = {0}, roff = 0;
            for (int64_t r = 0; r < rtotal; r++) {
                acc += dbl ? ((const double *)src)[off + roff] : ((const float *)src)[off + roff];
                for (int d = nr - 1; d >= 0; d--) {
                    roff += rst[d];
                    if (++ridx[d] < rdim[d]) break;
                    roff -= rst[d] * rdim[d];
                    ridx[d] = 0;
                }
            }
        }
        if (dbl)
            ((double *)dst)[o] = acc;
        else
            ((float *)dst)[o] = (float)acc;
        for (int d = nd - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < dim[d]) break;
            off -= st[d] * dim[d];
            idx[d] = 0;
        }
    }
}

/* Whether strides st over dims dim (in that order) are the contiguous
 * row-major strides (size-1 axes may have any stride). */
static int is_contig(int nd, const int64_t *dim, const int64_t *st) {
    int64_t want = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (dim[d] != 1 && st[d] != want) return 0;
        want *= dim[d];
    }
    return 1;
}

typedef struct group {
    int n;
    int lab[RT_MAX_RANK];
} group;

/* An operand as batches of [L, K] (or [K, L] when kfirst): data, the
 * batch stride, and whether `data` is a copy to free. */
typedef struct opnd {
    const void *data;
    void *own;
    int kfirst;
} opnd;

/* Lays out input v (of x) as [B, L, K] (or uses it in place as [B, L, K] /
 * [B, K, L]), summing over the labels in `sum`. */
static ms_status make_opnd(const kn_node *node, const rt_tensor *x, const lview *v, const group *gb,
                           const group *gl, const group *gk, const group *sum, const int64_t *size,
                           opnd *o) {
    int dbl = x->dtype == RT_DT_DOUBLE;
    int64_t dim[3 * RT_MAX_RANK], st[3 * RT_MAX_RANK], rdim[RT_MAX_RANK], rst[RT_MAX_RANK];
    int nd = 0;
    const group *order[2][3] = {{gb, gl, gk}, {gb, gk, gl}};
    memset(o, 0, sizeof(*o));
    if (sum->n == 0)
        for (int k = 0; k < 2; k++) {
            nd = 0;
            for (int g = 0; g < 3; g++)
                for (int i = 0; i < order[k][g]->n; i++) {
                    dim[nd] = size[order[k][g]->lab[i]];
                    st[nd++] = view_stride(v, order[k][g]->lab[i]);
                }
            if (is_contig(nd, dim, st)) {
                o->data = x->data;
                o->kfirst = k;
                return MS_OK;
            }
        }
    nd = 0;
    int64_t total = 1;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < order[0][g]->n; i++) {
            dim[nd] = size[order[0][g]->lab[i]];
            total *= dim[nd];
            st[nd++] = view_stride(v, order[0][g]->lab[i]);
        }
    for (int i = 0; i < sum->n; i++) {
        rdim[i] = size[sum->lab[i]];
        rst[i] = view_stride(v, sum->lab[i]);
    }
    o->own = malloc((size_t)(total > 0 ? total : 1) * (dbl ? sizeof(double) : sizeof(float)));
    if (o->own == NULL) return kn__errf(MS_ENOMEM, node, "out of memory");
    strided_sum(x->data, dbl, nd, dim, st, sum->n, rdim, rst, o->own);
    o->data = o->own;
    return MS_OK;
}

/* Whether the output's labels are those of g1, g2, g3 in that order. */
static int in_order(const group *out, const group *g1, const group *g2, const group *g3) {
    const group *seq[3] = {g1, g2, g3};
    int p = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < seq[g]->n; i++)
            if (out->lab[p++] != seq[g]->lab[i]) return 0;
    return 1;
}

static int64_t group_size(const group *g, const int64_t *size) {
    int64_t p = 1;
    for (int i = 0; i < g->n; i++) p *= size[g->lab[i]];
    return p;
}

/* Integer Einsum (int32, int64) as TensorFlow's CPU kernel gives it: every
 * output element is the sum over the labels the output drops of the
 * product of the inputs' elements, wrapping as two's complement (computed
 * in uint64, whose low 32 bits are the int32 result). A direct strided loop:
 * integer Einsum is rare (index arithmetic, counting) and never a model's
 * hot path. Checks cancellation every 2^16 products, so a request's
 * deadline bounds the work of a hostile equation. */
static ms_status int_einsum(kn_ctx *ctx, const kn_node *node, rt_tensor *const *in, int nin,
                            const lview *v, const group *og, const int *in_out,
                            const int64_t *size, rt_tensor *out) {
    int i32 = out->dtype == RT_DT_INT32;
    int64_t ost[2][RT_MAX_RANK] = {{0}}, rst[2][2 * RT_MAX_RANK] = {{0}}, rdim[2 * RT_MAX_RANK];
    int nr = 0;
    for (int i = 0; i < og->n; i++)
        for (int k = 0; k < nin; k++) ost[k][i] = view_stride(&v[k], og->lab[i]);
    for (int k = 0; k < nin; k++)
        for (int j = 0; j < v[k].n; j++) {
            int lab = v[k].lab[j], seen = 0;
            if (in_out[lab]) continue;
            for (int q = 0; q < k; q++) seen |= view_has(&v[q], lab);
            if (seen) continue;
            rdim[nr] = size[lab];
            for (int q = 0; q < nin; q++) rst[q][nr] = view_stride(&v[q], lab);
            nr++;
        }
    int64_t rtotal = 1;
    for (int d = 0; d < nr; d++)
        if (rdim[d] == 0) rtotal = 0; /* an empty sum: zeros, whatever the other sizes */
    for (int d = 0; d < nr && rtotal > 0; d++) {
        if (rtotal > INT64_MAX / rdim[d])
            return KN_EINVAL(node, "the summed labels have more than 2^63 combinations");
        rtotal *= rdim[d];
    }
    int64_t idx[RT_MAX_RANK] = {0}, off[2] = {0, 0}, work = 0;
    for (int64_t o = 0; o < out->nelem; o++) {
        uint64_t acc = 0;
        int64_t ridx[2 * RT_MAX_RANK] = {0}, roff[2] = {0, 0};
        for (int64_t r = 0; r < rtotal; r++) {
            uint64_t p = 1;
            for (int k = 0; k < nin; k++) {
                int64_t at = off[k] + roff[k];
                p *= i32 ? (uint64_t)((const int32_t *)in[k]->data)[at]
                         : (uint64_t)((const int64_t *)in[k]->data)[at];
            }
            acc += p;
            if (++work == (1 << 16)) {
                work = 0;
                if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
            }
            for (int d = nr - 1; d >= 0; d--) {
                for (int k = 0; k < nin; k++) roff[k] += rst[k][d];
                if (++ridx[d] < rdim[d]) break;
                for (int k = 0; k < nin; k++) roff[k] -= rst[k][d] * rdim[d];
                ridx[d] = 0;
            }
        }
        if (i32)
            ((int32_t *)out->data)[o] = (int32_t)(uint32_t)acc;
        else
            ((int64_t *)out->data)[o] = (int64_t)acc;
        if (++work >= (1 << 16)) {
            work = 0;
            if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
        }
        for (int d = og->n - 1; d >= 0; d--) {
            for (int k = 0; k < nin; k++) off[k] += ost[k][d];
            if (++idx[d] < size[og->lab[d]]) break;
            for (int k = 0; k < nin; k++) off[k] -= ost[k][d] * size[og->lab[d]];
            idx[d] = 0;
        }
    }
    return MS_OK;
}

static ms_status einsum_compute(kn_ctx *ctx, const kn_node *node, void *state, rt_tensor *const *in,
                                rt_tensor **out) {
    void *own_state = NULL;
    ms_status st;
    if (state == NULL) {
        if ((st = einsum_prepare(node, NULL, &own_state)) != MS_OK) return st;
        state = own_state;
    }
    const einsum_state *s = state;
    opnd oa = {0}, ob = {0};
    void *cbuf = NULL;
    if ((st = kn__need_inputs(node, in, s->nin)) != MS_OK) goto done;
    rt_dtype dt = in[0]->dtype;
    if (dt != RT_DT_FLOAT && dt != RT_DT_DOUBLE && dt != RT_DT_INT32 && dt != RT_DT_INT64) {
        st = kn__errf(MS_ENOTSUP, node, "dtype %s is not supported", rt_dtype_name(dt));
        goto done;
    }
    if (s->nin == 2 && in[1]->dtype != dt) {
        st = KN_EINVAL(node, "inputs have different dtypes: %s and %s", rt_dtype_name(dt),
                       rt_dtype_name(in[1]->dtype));
        goto done;
    }
    /* ---- labels of every axis ---- */
    int ell_n[2] = {0, 0}, E = 0;
    for (int i = 0; i < s->nin; i++) {
        int explicit_n = 0, has_ell = 0;
        for (int j = 0; j < s->in[i].n; j++) {
            if (s->in[i].lab[j] == EQ_ELL)
                has_ell = 1;
            else
                explicit_n++;
        }
        int r = in[i]->shape.rank;
        if (has_ell ? r < explicit_n : r != explicit_n) {
            st = KN_EINVAL(node, "input %d has rank %d, its equation term %s %d labels", i, r,
                           has_ell ? "needs at least" : "has", explicit_n);
            goto done;
        }
        ell_n[i] = has_ell ? r - explicit_n : 0;
        if (ell_n[i] > E) E = ell_n[i];
    }
    int64_t size[EQ_NLAB];
    int count[EQ_NLAB] = {0};
    for (int l = 0; l < EQ_NLAB; l++) size[l] = -1;
    lview v[2] = {{0}, {0}};
    for (int i = 0; i < s->nin; i++) {
        const rt_tensor *x = in[i];
        int64_t xst[RT_MAX_RANK], acc = 1;
        for (int d = x->shape.rank - 1; d >= 0; d--) {
            xst[d] = acc;
            acc *= x->shape.dim[d];
        }
        int ax = 0;
        for (int j = 0; j < s->in[i].n; j++) {
            int cnt = s->in[i].lab[j] == EQ_ELL ? ell_n[i] : 1;
            for (int e = 0; e < cnt; e++, ax++) {
                int lab = s->in[i].lab[j] == EQ_ELL ? ELL_BASE + E - ell_n[i] + e : s->in[i].lab[j];
                int64_t d = x->shape.dim[ax];
                count[lab]++;
                int ell = lab >= ELL_BASE;
                if (size[lab] < 0 || (ell && size[lab] == 1)) {
                    if (size[lab] < 0 || d != 1) size[lab] = d;
                } else if (d != size[lab] && !(ell && d == 1)) {
                    if (ell)
                        st = KN_EINVAL(node, "ellipsis axes of shapes %s and %s do not broadcast",
                                       kn__shp(&in[0]->shape), kn__shp(&in[s->nin - 1]->shape));
                    else
                        st = KN_EINVAL(node, "label '%c' has sizes %lld and %lld", label_char(lab),
                                       (long long)size[lab], (long long)d);
                    goto done;
                }
                /* the view: repeated labels add their strides (the diagonal) */
                int k;
                for (k = 0; k < v[i].n; k++)
                    if (v[i].lab[k] == lab) break;
                if (k == v[i].n) {
                    v[i].lab[v[i].n] = lab;
                    v[i].stride[v[i].n++] = 0;
                }
                if (d != 1 || !ell) v[i].stride[k] += xst[ax];
            }
        }
    }
    /* ---- the output's labels ---- */
    group og = {0};
    if (s->explicit_out) {
        for (int j = 0; j < s->out.n; j++) {
            int cnt = s->out.lab[j] == EQ_ELL ? E : 1;
            for (int e = 0; e < cnt; e++) {
                int lab = s->out.lab[j] == EQ_ELL ? ELL_BASE + e : s->out.lab[j];
                if (size[lab] < 0) {
                    st = KN_EINVAL(node, "output label '%c' is in no input", label_char(lab));
                    goto done;
                }
                if (og.n >= RT_MAX_RANK) {
                    st = KN_EINVAL(node, "output rank is too large");
                    goto done;
                }
                og.lab[og.n++] = lab;
            }
        }
    } else {
        for (int e = 0; e < E; e++) og.lab[og.n++] = ELL_BASE + e;
        for (int c = 'A'; c <= 'z'; c++) {
            int lab = label_id((char)c);
            if (lab < 0 || count[lab] != 1) continue;
            if (og.n >= RT_MAX_RANK) {
                st = KN_EINVAL(node, "output rank is too large");
                goto done;
            }
            og.lab[og.n++] = lab;
        }
    }
    rt_shape os = {.rank = og.n};
    int in_out[EQ_NLAB] = {0};
    for (int i = 0; i < og.n; i++) {
        os.dim[i] = size[og.lab[i]];
        in_out[og.lab[i]] = 1;
    }
    if ((st = kn__output(ctx, node, 0, dt, &os, &out[0])) != MS_OK) goto done;
    int dbl = dt == RT_DT_DOUBLE;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    if (out[0]->nelem == 0) goto done;
    if (dt == RT_DT_INT32 || dt == RT_DT_INT64) {
        st = int_einsum(ctx, node, in, s->nin, v, &og, in_out, size, out[0]);
        goto done;
    }
    if (s->nin == 1) {
        int64_t dim[RT_MAX_RANK], ost[RT_MAX_RANK], rdim[RT_MAX_RANK], rst[RT_MAX_RANK];
        int nr = 0;
        for (int i = 0; i < og.n; i++) {
            dim[i] = size[og.lab[i]];
            ost[i] = view_stride(&v[0], og.lab[i]);
        }
        for (int k = 0; k < v[0].n; k++)
            if (!in_out[v[0].lab[k]]) {
                rdim[nr] = size[v[0].lab[k]];
                rst[nr++] = v[0].stride[k];
            }
        strided_sum(in[0]->data, dbl, og.n, dim, ost, nr, rdim, rst, out[0]->data);
        goto done;
    }
    /* ---- two inputs: a batched GEMM ---- */
    group gb = {0}, gm = {0}, gn = {0}, gk = {0}, sa = {0}, sb = {0};
    for (int i = 0; i < og.n; i++) {
        int lab = og.lab[i], ha = view_has(&v[0], lab), hb = view_has(&v[1], lab);
        group *g = ha && hb ? &gb : ha ? &gm : &gn;
        g->lab[g->n++] = lab;
    }
    for (int k = 0; k < v[0].n; k++) {
        int lab = v[0].lab[k];
        if (in_out[lab]) continue;
        group *g = view_has(&v[1], lab) ? &gk : &sa;
        g->lab[g->n++] = lab;
    }
    for (int k = 0; k < v[1].n; k++) {
        int lab = v[1].lab[k];
        if (!in_out[lab] && !view_has(&v[0], lab)) sb.lab[sb.n++] = lab;
    }
    /* The result is [B, M, N]: in place when the output has that order; when
     * it is B, N, M the inputs swap roles (C^T = B^T A^T) so that it is, as
     * for Keras' attention scores "aecd,abcd->acbe"; otherwise one
     * permutation at the end. */
    int direct = in_order(&og, &gb, &gm, &gn), swap = 0;
    if (!direct && in_order(&og, &gb, &gn, &gm)) {
        group t = gm;
        gm = gn;
        gn = t;
        t = sa;
        sa = sb;
        sb = t;
        swap = direct = 1;
    }
    int64_t B = group_size(&gb, size), M = group_size(&gm, size), N = group_size(&gn, size);
    int64_t K = group_size(&gk, size);
    if ((st = make_opnd(node, in[swap], &v[swap], &gb, &gm, &gk, &sa, size, &oa)) != MS_OK)
        goto done;
    if ((st = make_opnd(node, in[!swap], &v[!swap], &gb, &gn, &gk, &sb, size, &ob)) != MS_OK)
        goto done;
    void *C = out[0]->data;
    if (!direct) {
        if ((cbuf = malloc((size_t)(B * M * N) * es)) == NULL) {
            st = kn__errf(MS_ENOMEM, node, "out of memory");
            goto done;
        }
        C = cbuf;
    }
    if (K == 0) {
        memset(C, 0, (size_t)(B * M * N) * es);
    } else {
        /* ob's [B, K, N] is the GEMM's usual B; its kfirst = 0 layout is
         * [B, N, K] (lines of K). */
        for (int64_t b = 0; b < B; b++) {
            if (kn_ctx_cancelled(ctx)) {
                st = kn__errf(MS_ECANCELED, node, "cancelled");
                goto done;
            }
            if (!dbl) {
                const float *pa = (const float *)oa.data + b * M * K;
                const float *pb = (const float *)ob.data + b * N * K;
                kn_gemm_mat am = {.p = pa, .sl = oa.kfirst ? 1 : K, .sk = oa.kfirst ? M : 1};
                kn_gemm_mat bm = {.p = pb, .sl = ob.kfirst ? 1 : K, .sk = ob.kfirst ? N : 1};
                kn_gemm_opnd A = {.pack = kn__gemm_pack_mat, .arg = &am};
                kn_gemm_opnd Bo = {.pack = kn__gemm_pack_mat, .arg = &bm};
                if ((st = kn__sgemm(ctx, M, N, K, &A, &Bo, (float *)C + b * M * N, N, NULL)) !=
                    MS_OK)
                    goto done;
            } else {
                if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) {
                    st = KN_EINVAL(node, "matrices too large for BLAS");
                    goto done;
                }
                cblas_dgemm(CblasRowMajor, oa.kfirst ? CblasTrans : CblasNoTrans,
                            ob.kfirst ? CblasNoTrans : CblasTrans, (int)M, (int)N, (int)K, 1.0,
                            (const double *)oa.data + b * M * K, oa.kfirst ? (int)M : (int)K,
                            (const double *)ob.data + b * N * K, ob.kfirst ? (int)N : (int)K, 0.0,
                            (double *)C + b * M * N, (int)N);
            }
        }
    }
    if (!direct) {
        /* out[o] = C[b, m, n]: the strides of each output label in C */
        int64_t dim[RT_MAX_RANK], cst[RT_MAX_RANK];
        const group *seq[3] = {&gb, &gm, &gn};
        for (int i = 0; i < og.n; i++) {
            int64_t stride = 1, found = 0;
            for (int g = 2; g >= 0 && !found; g--)
                for (int j = seq[g]->n - 1; j >= 0; j--) {
                    if (seq[g]->lab[j] == og.lab[i]) {
                        found = 1;
                        break;
                    }
                    stride *= size[seq[g]->lab[j]];
                }
            dim[i] = size[og.lab[i]];
            cst[i] = stride;
        }
        strided_sum(C, dbl, og.n, dim, cst, 0, NULL, NULL, out[0]->data);
    }
done:
    free(cbuf);
    free(oa.own);
    free(ob.own);
    free(own_state);
    return st;
}

/* clang-format off */
const kn_kernel kn_cpu_einsum_kernels[] = {
    {.op = "Einsum", .prepare = einsum_prepare, .compute = einsum_compute,
     .release = einsum_release},
    {.op = NULL},
};
/* clang-format on */
