/* dcm_guard.c - the checks the DICOM graph ops share (dcm_ops_int.h): the
 * modality guard (attr `modalities`) and the fixed-size check (attr
 * `expect_size`). */
#include <stdio.h>
#include <string.h>

#include "dcm_ops_int.h"

/* Is modality m one of the comma-separated list? */
static int modality_listed(const char *list, const char *m) {
    const size_t n = strlen(m);
    for (const char *p = list; *p;) {
        const char *q = strchr(p, ',');
        const size_t k = q ? (size_t)(q - p) : strlen(p);
        if (k == n && n > 0 && memcmp(p, m, n) == 0) return 1;
        p += k + (q != NULL);
    }
    return 0;
}

ms_status dcm_guard_check(const dcm_guard *g, int64_t i, const dcm_info *info, uint32_t rows,
                          uint32_t cols) {
    if (g->modalities[0] && !modality_listed(g->modalities, info->modality))
        return ms_errf(MS_EINVAL, "dicom[%lld]: Modality is %s%s%s; this model takes %s",
                       (long long)i, info->modality[0] ? "'" : "",
                       info->modality[0] ? info->modality : "missing", info->modality[0] ? "'" : "",
                       g->modalities);
    if (g->expect[0] && (rows != g->expect[0] || cols != g->expect[1]))
        return ms_errf(MS_EINVAL,
                       "dicom[%lld]: image is %ux%u (rows x columns), the model input is "
                       "%lldx%lld (import with --size to resize)",
                       (long long)i, rows, cols, (long long)g->expect[0], (long long)g->expect[1]);
    return MS_OK;
}

ms_status dcm_guard_prepare(const kn_node *n, dcm_guard *g) {
    memset(g, 0, sizeof(*g));
    size_t ml = 0;
    const char *mods = kn_attr_s(n, "modalities", &ml);
    if (mods != NULL && ml > 0) {
        if (ml >= sizeof(g->modalities))
            return ms_errf(MS_EINVAL, "%s: modalities list of %zu bytes is too long", n->name, ml);
        memcpy(g->modalities, mods, ml);
    }
    int64_t sz[2];
    int k = kn_attr_ilist(n, "expect_size", sz, 2);
    if (k == 2 && sz[0] > 0 && sz[1] > 0) {
        g->expect[0] = sz[0];
        g->expect[1] = sz[1];
    }
    return MS_OK;
}
