/* dcm_stats.c - the counters of the DICOM graph ops (dcm_ops.h,
 * dcm_ops_int.h): files and bytes handed to the decoder, frames decoded,
 * files refused by reason; the ops add to them, /metrics reads them. */
#include <stdatomic.h>

#include "dcm_ops.h"
#include "dcm_ops_int.h"
#include "dcm_pixel.h"

static _Atomic uint64_t g_files, g_bytes, g_frames, g_errors[DCM_ERR_NREASONS];

void dcm_ops_stats_read(dcm_ops_stats *out) {
    out->files = atomic_load(&g_files);
    out->bytes = atomic_load(&g_bytes);
    out->frames = atomic_load(&g_frames);
    out->pixels = dcm_pixels_decoded();
    for (int r = 0; r < DCM_ERR_NREASONS; r++)
        out->errors[r] = atomic_load(&g_errors[r]);
}

void dcm_ops_count(uint64_t files, uint64_t bytes, uint64_t frames) {
    atomic_fetch_add(&g_files, files);
    atomic_fetch_add(&g_bytes, bytes);
    atomic_fetch_add(&g_frames, frames);
}

static int err_reason(ms_status st) {
    switch (st) {
    case MS_EINVAL: return DCM_ERR_INVALID;
    case MS_ENOTSUP: return DCM_ERR_UNSUPPORTED;
    case MS_ENOMEM: return DCM_ERR_TOO_LARGE;
    case MS_EDATALOSS: return DCM_ERR_CORRUPT;
    default: return DCM_ERR_OTHER;
    }
}

void dcm_ops_count_refused(ms_status st) {
    atomic_fetch_add(&g_errors[err_reason(st)], 1);
}

const char *dcm_ops_err_reason_name(int reason) {
    static const char *const names[DCM_ERR_NREASONS] = {"invalid", "unsupported", "too_large",
                                                         "corrupt", "other"};
    return reason >= 0 && reason < DCM_ERR_NREASONS ? names[reason] : "other";
}
