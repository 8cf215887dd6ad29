/* kn_reduce.c - the merged axes of a reduction (kn_reduce.h). */
#include "kn_reduce.h"

#include <string.h>

void kn_reduce_axes_merge(const rt_shape *x, const int *red, kn_reduce_axes *out) {
    memset(out, 0, sizeof(*out));
    out->count = 1;
    for (int d = 0; d < x->rank; d++) {
        const int r = red[d] != 0;
        if (r) out->count *= x->dim[d];
        if (x->dim[d] == 1) continue;
        if (out->rank > 0 && out->red[out->rank - 1] == r) {
            out->dim[out->rank - 1] *= x->dim[d];
            continue;
        }
        out->dim[out->rank] = x->dim[d];
        out->red[out->rank] = r;
        out->rank++;
    }
    if (out->rank == 0) {
        out->rank = 1;
        out->dim[0] = 1;
        out->red[0] = 0;
    }
    out->nout = 1;
    for (int d = 0; d < out->rank; d++)
        if (!out->red[d]) out->nout *= out->dim[d];
}
