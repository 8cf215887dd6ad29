/* kn_slice.c - the canonical form of a StridedSlice spec (kn_slice.h),
 * following TensorFlow's ValidateStridedSliceOp. */
#include "kn_slice.h"

#include <stdarg.h>
#include <stdio.h>

enum { SPEC_MAX = KN_SLICE_MAX_SPEC + 1, NEW_AXIS = -1, SHRINK = -2 };

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...) {
    va_list ap;
    va_start(ap, fmt);
    if (errlen > 0) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 0;
}

int kn_slice_canon(const rt_shape *x, const int64_t *begin, const int64_t *end,
                   const int64_t *strides, int n, const int64_t masks[5], kn_slice *out, char *err,
                   size_t errlen) {
    const int rank = x->rank;
    char sb_[16 * RT_MAX_RANK + 8];
    if (errlen > 0) err[0] = '\0';
    if (rank < 0 || rank > RT_MAX_RANK)
        return fail(err, errlen, "input rank %d is not supported", rank);
    if (n < 0 || n > KN_SLICE_MAX_SPEC)
        return fail(err, errlen, "begin, end and strides have %d values, at most %d", n,
                    KN_SLICE_MAX_SPEC);
    int64_t sb[SPEC_MAX], se[SPEC_MAX], ss[SPEC_MAX];
    for (int i = 0; i < n; i++)
        sb[i] = begin[i], se[i] = end[i], ss[i] = strides[i];
    int64_t bmask = masks[0], emask = masks[1], elmask = masks[2], namask = masks[3],
            shmask = masks[4];
    if (elmask & (elmask - 1)) return fail(err, errlen, "more than one ellipsis in ellipsis_mask");
    int sdims = n;
    /* As TensorFlow: an ellipsis bit beyond the given entries does not count,
     * and without an ellipsis one is implied after the last entry. */
    elmask &= ((int64_t)1 << sdims) - 1;
    if (elmask == 0) {
        elmask = (int64_t)1 << sdims;
        sb[sdims] = se[sdims] = 0;
        ss[sdims] = 1;
        sdims++;
    }
    int el_pos = __builtin_ctzll((unsigned long long)elmask);
    int new_after = 0;
    for (int i = el_pos + 1; i < sdims; i++)
        if (namask & ((int64_t)1 << i)) new_after++;
    /* Dense spec: one entry per input dimension; order lists the output
     * axes as input axes, new axes and shrunk (dropped) axes. */
    int64_t db[RT_MAX_RANK] = {0}, de[RT_MAX_RANK] = {0}, ds[RT_MAX_RANK];
    int dbm[RT_MAX_RANK] = {0}, dem[RT_MAX_RANK] = {0}, dsh[RT_MAX_RANK] = {0};
    int order[SPEC_MAX * 2], no = 0, full = 0;
    for (int d = 0; d < RT_MAX_RANK; d++)
        ds[d] = 1;
    for (int i = 0; i < sdims; i++) {
        int64_t bit = (int64_t)1 << i;
        if (elmask & bit) {
            int next = rank - (sdims - i) + 1 + new_after;
            if (next > rank) next = rank;
            for (; full < next; full++) {
                dbm[full] = dem[full] = 1;
                order[no++] = full;
            }
        } else if (namask & bit) {
            order[no++] = NEW_AXIS;
        } else {
            if (full >= rank)
                return fail(err, errlen, "index %d out of range: input %s has only %d dims", i,
                            rt_shape_str(x, sb_, sizeof sb_), rank);
            db[full] = sb[i], de[full] = se[i], ds[full] = ss[i];
            dbm[full] = (bmask & bit) != 0;
            dem[full] = (emask & bit) != 0;
            dsh[full] = (shmask & bit) != 0;
            order[no++] = dsh[full] ? SHRINK : full;
            full++;
        }
    }
    /* Canonical start / stride / count per input dimension. */
    out->ps = (rt_shape){.rank = rank};
    for (int d = 0; d < rank; d++) {
        int64_t dn = x->dim[d], s = ds[d], b, e;
        if (s == 0) return fail(err, errlen, "strides[%d] must be non-zero", d);
        out->stride[d] = s;
        out->shrink[d] = dsh[d];
        if (dsh[d]) {
            if (s <= 0) return fail(err, errlen, "only stride 1 allowed on a shrunk axis");
            b = db[d] < 0 ? dn + db[d] : db[d];
            if (b < 0 || b >= dn)
                return fail(err, errlen,
                            "slice index %lld of dimension %d out of bounds for input %s",
                            (long long)db[d], d, rt_shape_str(x, sb_, sizeof sb_));
            out->start[d] = b;
            out->ps.dim[d] = 1;
            continue;
        }
        int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dn : dn - 1;
        if (dbm[d]) {
            b = s > 0 ? lo : hi;
        } else {
            b = db[d] < 0 ? dn + db[d] : db[d];
            b = b < lo ? lo : b > hi ? hi : b;
        }
        if (dem[d]) {
            e = s > 0 ? hi : lo;
        } else {
            e = de[d] < 0 ? dn + de[d] : de[d];
            e = e < lo ? lo : e > hi ? hi : e;
        }
        int64_t len = e - b, size;
        if (len == 0 || ((len < 0) != (s < 0)))
            size = 0;
        else
            size = len / s + (len % s != 0);
        out->start[d] = b;
        out->ps.dim[d] = size;
    }
    out->os = (rt_shape){.rank = 0};
    for (int i = 0; i < no; i++) {
        if (order[i] == SHRINK) continue;
        if (out->os.rank >= RT_MAX_RANK) return fail(err, errlen, "result has too many dimensions");
        out->os.dim[out->os.rank++] = order[i] == NEW_AXIS ? 1 : out->ps.dim[order[i]];
    }
    return 1;
}
