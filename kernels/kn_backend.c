/* kn_backend.c - NULL-safe wrappers over a backend's function table. */
#include "kn_backend.h"

const char *kn_backend_name(kn_backend *b) {
    return b->iface.name ? b->iface.name(b) : "unnamed";
}

const kn_kernel *kn_backend_kernel(kn_backend *b, const char *op) {
    return b->iface.kernel ? b->iface.kernel(b, op) : NULL;
}

ms_status kn_backend_sync(kn_backend *b) {
    if (!b->iface.sync) return MS_OK;
    return b->iface.sync(b);
}

void kn_backend_free(kn_backend *b) {
    if (b != NULL && b->iface.free) b->iface.free(b);
}
