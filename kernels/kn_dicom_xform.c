/* kn_dicom_xform.c - attrs and request geometry of _DcmPixelTransform
 * (kn_dicom_xform.h), shared by its CPU and CUDA kernels. */
#include "kn_dicom_xform.h"

#include <string.h>

ms_status kn_dcm_xform_attrs_read(const kn_node *n, kn_dcm_xform_attrs *a) {
    memset(a, 0, sizeof(*a));
    kn_window w;
    ms_status st = kn_window_attrs(n, &w);
    if (st != MS_OK) return st;
    a->lo = w.lo;
    a->hi = w.hi;
    a->range = w.range;
    a->nchw = w.nchw;
    a->size[0] = w.size[0];
    a->size[1] = w.size[1];
    a->masked = kn_attr_b(n, "masked", 0);
    /* the windowed pad_value, as dcm_fused.c's win1 */
    float x = kn_attr_f(n, "pad_value", 0.f);
    x = x < a->lo ? a->lo : x;
    x = x > a->hi ? a->hi : x;
    a->wpad = (x - a->lo) / a->range;
    return MS_OK;
}

ms_status kn_dcm_xform_geometry(const kn_node *n, const kn_dcm_xform_attrs *a, const rt_tensor *raw,
                                const rt_tensor *params, const kn_dcm_xform_file *files,
                                kn_dcm_xform_geom *g) {
    memset(g, 0, sizeof(*g));
    if (raw->dtype == RT_DT_UINT16 && raw->shape.rank == 3) {
        g->C = 1;
    } else if (raw->dtype == RT_DT_FLOAT && raw->shape.rank == 4 &&
               (raw->shape.dim[3] == 1 || raw->shape.dim[3] == 3)) {
        g->C = (uint32_t)raw->shape.dim[3];
        g->raw_float = 1;
    } else {
        return ms_errf(MS_EINVAL, "%s: raw pixels must be uint16 (N, H, W) or float (N, H, W, 1|3)",
                       n->name);
    }
    const int64_t N = raw->shape.dim[0], H = raw->shape.dim[1], W = raw->shape.dim[2];
    if (N < 0 || N > INT32_MAX || H < (N > 0) || H > 65535 || W < (N > 0) || W > 65535)
        return ms_errf(MS_EINVAL, "%s: raw pixels of %lld x %lld x %lld", n->name, (long long)N,
                       (long long)H, (long long)W);
    if (params->dtype != RT_DT_UINT8 || params->shape.rank != 2 || params->shape.dim[0] != N ||
        params->shape.dim[1] != (int64_t)sizeof(kn_dcm_xform_file))
        return ms_errf(MS_EINVAL, "%s: params must be uint8 (%lld, %zu)", n->name, (long long)N,
                       sizeof(kn_dcm_xform_file));
    for (int64_t i = 0; files != NULL && i < N; i++) {
        const kn_dcm_xform_file *f = &files[i];
        if (f->rows < 1 || f->rows > H || f->cols < 1 || f->cols > W || f->mask > 0xFFFFu ||
            (f->sign != 0 && (f->sign & (f->sign - 1)) != 0))
            return ms_errf(MS_EINVAL, "%s: params of file %lld do not fit the raw pixels", n->name,
                           (long long)i);
    }
    g->n = (uint32_t)N;
    g->H = (uint32_t)H;
    g->W = (uint32_t)W;
    g->resize = a->size[0] != 0;
    g->oh = g->resize ? (uint32_t)a->size[0] : g->H;
    g->ow = g->resize ? (uint32_t)a->size[1] : g->W;
    g->masked = a->masked;
    g->nchw = a->nchw;
    g->lo = a->lo;
    g->hi = a->hi;
    g->range = a->range;
    g->wpad = a->wpad;
    return MS_OK;
}
