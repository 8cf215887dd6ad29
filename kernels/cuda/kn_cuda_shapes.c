/* kn_cuda_shapes.c - the CUDA table's host-side decisions (kn_cuda_backend.h):
 * TensorFlow's output sizes and padding, the broadcasts, reductions, slices,
 * gathers and batched products the GPU kernels take. Plain arithmetic that
 * builds in every configuration, with or without CUDA, so that
 * check_kn_cuda_backend tests it without a GPU. */
#include "kn_cuda_backend.h"
#include "kn_reduce.h"
#include "kn_slice.h"

#include <stdint.h>
#include <string.h>
ms_status kn_cuda__spatial(int64_t in, int64_t k, int64_t s, int64_t d, int same, int64_t *out,
                           int64_t *pad_lo, int64_t *pad_hi) {
    if (in < 0 || k < 1 || s < 1 || d < 1)
        return ms_errf(MS_EINVAL, "bad window: input %lld, kernel %lld, stride %lld, dilation %lld",
                       (long long)in, (long long)k, (long long)s, (long long)d);
    int64_t ek = (k - 1) * d + 1; /* the dilated kernel's extent */
    if (same == 1) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + ek - in;
        if (total < 0) total = 0;
        *pad_lo = total / 2; /* TensorFlow puts the odd one at the end */
        *pad_hi = total - *pad_lo;
    } else {
        if (same == 0) *pad_lo = *pad_hi = 0;
        if (*pad_lo < 0 || *pad_hi < 0) return ms_errf(MS_EINVAL, "negative explicit padding");
        int64_t span = in + *pad_lo + *pad_hi - ek;
        if (span < 0)
            return ms_errf(MS_EINVAL, "window %lld (dilated) is larger than the padded input %lld",
                           (long long)ek, (long long)(in + *pad_lo + *pad_hi));
        *out = span / s + 1;
    }
    return MS_OK;
}

static int suffix_of(const rt_shape *small, const rt_shape *big, int64_t *nb) {
    int lead = 0;
    while (lead < small->rank && small->dim[lead] == 1)
        lead++;
    int r = small->rank - lead;
    if (r > big->rank || small->rank > big->rank) return 0;
    int64_t n = 1;
    for (int i = 0; i < r; i++) {
        if (small->dim[lead + i] != big->dim[big->rank - r + i]) return 0;
        n *= small->dim[lead + i];
    }
    if (n <= 0) return 0;
    *nb = n;
    return 1;
}

int kn_cuda__bcast(const rt_shape *a, const rt_shape *b, int commutative, int64_t *nb, int *swap) {
    *swap = 0;
    if (suffix_of(b, a, nb)) return 1;
    if (commutative && suffix_of(a, b, nb)) {
        *swap = 1;
        return 1;
    }
    return 0;
}

int kn_cuda__bcast_general(const rt_shape *a, const rt_shape *b, rt_shape *out,
                           kn_cuda_bcast_shape *s) {
    const int rank = a->rank > b->rank ? a->rank : b->rank;
    if (rank > KN_CUDA_BCAST_RANK || rank > RT_MAX_RANK) return 0;
    int64_t da[KN_CUDA_BCAST_RANK], db[KN_CUDA_BCAST_RANK];
    memset(out, 0, sizeof(*out));
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        int ia = d - (rank - a->rank), ib = d - (rank - b->rank);
        da[d] = ia >= 0 ? a->dim[ia] : 1;
        db[d] = ib >= 0 ? b->dim[ib] : 1;
        if (da[d] <= 0 || db[d] <= 0) return 0;
        if (da[d] != db[d] && da[d] != 1 && db[d] != 1) return 0;
        out->dim[d] = da[d] > db[d] ? da[d] : db[d];
    }
    /* row-major strides of each operand, 0 on its broadcast axes; size-1
     * output axes dropped */
    int64_t stra = 1, strb = 1;
    int64_t dim[KN_CUDA_BCAST_RANK], sa[KN_CUDA_BCAST_RANK], sb[KN_CUDA_BCAST_RANK];
    int k = 0;
    for (int d = rank - 1; d >= 0; d--) {
        if (out->dim[d] != 1) {
            dim[k] = out->dim[d];
            sa[k] = da[d] == 1 ? 0 : stra;
            sb[k] = db[d] == 1 ? 0 : strb;
            k++;
        }
        stra *= da[d];
        strb *= db[d];
    }
    /* dim / sa / sb are innermost first; merge an axis into the one inside
     * it when both operands step across them as one axis */
    memset(s, 0, sizeof(*s));
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (m > 0 && sa[i] == s->sa[m - 1] * s->dim[m - 1] &&
            sb[i] == s->sb[m - 1] * s->dim[m - 1]) {
            s->dim[m - 1] *= dim[i];
            continue;
        }
        s->dim[m] = dim[i], s->sa[m] = sa[i], s->sb[m] = sb[i];
        m++;
    }
    if (m == 0) s->dim[m] = 1, s->sa[m] = 0, s->sb[m] = 0, m = 1; /* one value */
    /* outermost first, as the kernel walks them */
    for (int i = 0; i < m / 2; i++) {
        int j = m - 1 - i;
        int64_t t = s->dim[i];
        s->dim[i] = s->dim[j], s->dim[j] = t;
        t = s->sa[i], s->sa[i] = s->sa[j], s->sa[j] = t;
        t = s->sb[i], s->sb[i] = s->sb[j], s->sb[j] = t;
    }
    s->rank = m;
    return 1;
}

/* Values of kn_cuda_act (kn_cuda_elementwise.cuh), kept in step by a
 * static check in kn_cuda_backend.c. */
int kn_cuda__act(const char *name, size_t len) {
    static const char *const names[] = {"Relu", "Relu6", "Sigmoid", "Tanh"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == len && memcmp(name, names[i], len) == 0) return i + 1;
    return -1;
}

void kn_cuda__reduce_plan(const rt_shape *x, const int *red, kn_cuda_reduce_shape *p) {
    kn_reduce_axes ax;
    kn_reduce_axes_merge(x, red, &ax);
    memset(p, 0, sizeof(*p));
    p->rank = ax.rank;
    for (int d = 0; d < ax.rank; d++)
        p->dim[d] = ax.dim[d], p->red[d] = ax.red[d];
    p->nout = ax.nout;
    p->count = ax.count;
}

/* The strided copy of processing shape ps (one axis per input axis) with
 * element strides st from base: size-1 axes dropped, axes merged where the
 * outer one steps over exactly the inner one's run. */
static void strided_make(const rt_shape *ps, const int64_t *st, int64_t base, kn_cuda_strided *p) {
    memset(p, 0, sizeof(*p));
    p->base = base;
    for (int d = 0; d < ps->rank; d++) {
        if (ps->dim[d] == 1) continue;
        if (p->rank > 0 && ps->dim[d] != 0 && p->dim[p->rank - 1] != 0 &&
            p->stride[p->rank - 1] == st[d] * ps->dim[d]) {
            p->dim[p->rank - 1] *= ps->dim[d];
            p->stride[p->rank - 1] = st[d];
            continue;
        }
        p->dim[p->rank] = ps->dim[d];
        p->stride[p->rank] = st[d];
        p->rank++;
    }
    if (p->rank == 0) {
        p->rank = 1;
        p->dim[0] = 1;
        p->stride[0] = 0;
    }
}

static void strides_of(const rt_shape *x, int64_t *st) {
    int64_t s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= x->dim[d];
    }
}

int kn_cuda__slice(const rt_shape *x, const int64_t *begin, const int64_t *size, int n,
                   kn_cuda_strided *p, rt_shape *os) {
    if (n != x->rank || x->rank > RT_MAX_RANK) return 0;
    int64_t ist[RT_MAX_RANK], st[RT_MAX_RANK], base = 0;
    strides_of(x, ist);
    *os = (rt_shape){.rank = x->rank};
    for (int d = 0; d < x->rank; d++) {
        int64_t dn = x->dim[d], b = begin[d], sz = size[d];
        if (b >= 0 && b <= dn && sz == -1) sz = dn - b;
        if (b < 0 || b > dn || sz < 0 || sz > dn - b) return 0;
        os->dim[d] = sz;
        base += b * ist[d];
        st[d] = ist[d];
    }
    strided_make(os, st, base, p);
    return 1;
}

int kn_cuda__strided_slice(const rt_shape *x, const int64_t *begin, const int64_t *end,
                           const int64_t *strides, int n, const int64_t masks[5],
                           kn_cuda_strided *p, rt_shape *os) {
    kn_slice sl;
    char why[256];
    if (!kn_slice_canon(x, begin, end, strides, n, masks, &sl, why, sizeof why)) return 0;
    int64_t ist[RT_MAX_RANK], st[RT_MAX_RANK], base = 0;
    strides_of(x, ist);
    for (int d = 0; d < x->rank; d++) {
        if (sl.ps.dim[d] > 0) base += sl.start[d] * ist[d]; /* an empty axis reads nothing */
        st[d] = sl.shrink[d] ? 0 : sl.stride[d] * ist[d];
    }
    *os = sl.os;
    strided_make(&sl.ps, st, base, p);
    return 1;
}

int kn_cuda__gather_shape(const rt_shape *p, const rt_shape *ix, int64_t axis, int64_t batch_dims,
                          kn_cuda_gather_shape *g, rt_shape *os) {
    int64_t bd = batch_dims < 0 ? batch_dims + ix->rank : batch_dims;
    if (bd < 0 || bd > ix->rank) return 0;
    if (axis < 0) axis += p->rank;
    if (axis < bd || axis >= p->rank) return 0;
    int a = (int)axis, b = (int)bd;
    for (int d = 0; d < b; d++)
        if (p->dim[d] != ix->dim[d]) return 0;
    if (p->rank - 1 + ix->rank - b > RT_MAX_RANK) return 0;
    *os = (rt_shape){.rank = 0};
    *g = (kn_cuda_gather_shape){.nb = 1, .outer = 1, .n = p->dim[a], .per = 1, .inner = 1};
    for (int d = 0; d < a; d++)
        os->dim[os->rank++] = p->dim[d];
    for (int d = b; d < ix->rank; d++)
        os->dim[os->rank++] = ix->dim[d];
    for (int d = a + 1; d < p->rank; d++)
        os->dim[os->rank++] = p->dim[d];
    for (int d = 0; d < b; d++)
        g->nb *= p->dim[d];
    for (int d = b; d < a; d++)
        g->outer *= p->dim[d];
    for (int d = a + 1; d < p->rank; d++)
        g->inner *= p->dim[d];
    for (int d = b; d < ix->rank; d++)
        g->per *= ix->dim[d];
    return 1;
}

int kn_cuda__bmm(const rt_shape *x, const rt_shape *y, int adj_x, int adj_y, int same_batch,
                 kn_cuda_bmm *p) {
    memset(p, 0, sizeof(*p));
    const int rx = x->rank, ry = y->rank;
    if (rx < 2 || ry < 2) return 0;
    p->m = x->dim[rx - (adj_x ? 1 : 2)], p->k = x->dim[rx - (adj_x ? 2 : 1)];
    int64_t k2 = y->dim[ry - (adj_y ? 1 : 2)];
    p->n = y->dim[ry - (adj_y ? 2 : 1)];
    if (p->k != k2) return 0;
    const int bx = rx - 2, by = ry - 2, br = bx > by ? bx : by;
    if (same_batch) {
        if (bx != by) return 0;
        for (int d = 0; d < bx; d++)
            if (x->dim[d] != y->dim[d]) return 0;
    }
    if (br + 2 > RT_MAX_RANK) return 0;
    /* numpy broadcast of the batch dims, aligned at the right; strides of
     * each operand's batch dims in elements, 0 where it is broadcast */
    int64_t sx = p->m * p->k, sw = p->k * p->n, nx = 1, nw = 1;
    p->brank = br;
    p->batch = 1;
    for (int i = 0; i < br; i++) {
        int d = br - 1 - i, dx = bx - 1 - i, dy = by - 1 - i;
        int64_t ex = dx >= 0 ? x->dim[dx] : 1, ey = dy >= 0 ? y->dim[dy] : 1;
        if (ex != ey && ex != 1 && ey != 1) return 0;
        int64_t e = ex == 1 ? ey : ex;
        p->bdim[d] = e;
        p->bsx[d] = ex == 1 ? 0 : sx;
        p->bsw[d] = ey == 1 ? 0 : sw;
        sx *= ex, sw *= ey, nx *= ex, nw *= ey;
        p->batch *= e;
    }
    p->out = (rt_shape){.rank = br + 2};
    for (int d = 0; d < br; d++)
        p->out.dim[d] = p->bdim[d];
    p->out.dim[br] = p->m, p->out.dim[br + 1] = p->n;
    if (p->batch == 0 || p->m == 0 || p->n == 0 || p->k == 0) return 0;
    if (nx == p->batch && nw == p->batch) {
        p->mode = KN_CUDA_BMM_STRIDED;
        p->stride_x = p->m * p->k, p->stride_w = p->k * p->n;
    } else if (nw == 1 && nx == p->batch && !adj_x) {
        p->mode = KN_CUDA_BMM_FLAT; /* x's batches are rows of one GEMM */
    } else {
        p->mode = KN_CUDA_BMM_LOOP;
    }
    return 1;
}

void kn_cuda__bmm_offsets(const kn_cuda_bmm *p, int64_t i, int64_t *ox, int64_t *ow) {
    *ox = *ow = 0;
    for (int d = p->brank - 1; d >= 0; d--) {
        int64_t c = i % p->bdim[d];
        *ox += c * p->bsx[d];
        *ow += c * p->bsw[d];
        i /= p->bdim[d];
    }
}
