/* kn_backend.c - NULL-safe wrappers over a backend's function table and over
 * a node's attribute table. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

ms_status kn_backend_to_device(kn_backend *b, rt_tensor *host, rt_tensor **out) {
    if (b == NULL || b->iface.to_device == NULL)
        return ms_errf(MS_ENOTSUP, "backend %s cannot copy to its device",
                       b ? kn_backend_name(b) : "(none)");
    return b->iface.to_device(b, host, out);
}

ms_status kn_backend_to_host(kn_backend *b, rt_tensor *dev, rt_tensor **out) {
    if (b == NULL || b->iface.to_host == NULL)
        return ms_errf(MS_ENOTSUP, "backend %s cannot copy to the host",
                       b ? kn_backend_name(b) : "(none)");
    return b->iface.to_host(b, dev, out);
}

int kn_backend_has_arenas(const kn_backend *b) {
    return b != NULL && b->iface.arena_new && b->iface.arena_begin && b->iface.arena_end &&
           b->iface.arena_free;
}

int kn_backend_has_graphs(const kn_backend *b) {
    return b != NULL && b->iface.graph_begin && b->iface.graph_end && b->iface.graph_launch &&
           b->iface.graph_free;
}

/* ---- node attributes ---- */

int kn_attr_has(const kn_node *n, const char *key) {
    return n->attrs ? n->attrs->has(n, key) : 0;
}

int64_t kn_attr_i(const kn_node *n, const char *key, int64_t dflt) {
    return n->attrs ? n->attrs->i(n, key, dflt) : dflt;
}

float kn_attr_f(const kn_node *n, const char *key, float dflt) {
    return n->attrs ? n->attrs->f(n, key, dflt) : dflt;
}

int kn_attr_b(const kn_node *n, const char *key, int dflt) {
    return n->attrs ? n->attrs->b(n, key, dflt) : dflt;
}

rt_dtype kn_attr_type(const kn_node *n, const char *key, rt_dtype dflt) {
    return n->attrs ? n->attrs->type(n, key, dflt) : dflt;
}

const char *kn_attr_s(const kn_node *n, const char *key, size_t *len) {
    return n->attrs ? n->attrs->s(n, key, len) : NULL;
}

int kn_attr_s_eq(const kn_node *n, const char *key, const char *s, const char *dflt) {
    size_t len;
    const char *v = kn_attr_s(n, key, &len);
    if (v == NULL) return dflt != NULL && strcmp(dflt, s) == 0;
    return strlen(s) == len && memcmp(v, s, len) == 0;
}

int kn_attr_ilist(const kn_node *n, const char *key, int64_t *out, int max) {
    return n->attrs ? n->attrs->ilist(n, key, out, max) : -1;
}

int kn_attr_flist(const kn_node *n, const char *key, float *out, int max) {
    return n->attrs ? n->attrs->flist(n, key, out, max) : -1;
}

int kn_attr_slist(const kn_node *n, const char *key, const char **out, size_t *lens, int max) {
    return n->attrs ? n->attrs->slist(n, key, out, lens, max) : -1;
}

ms_status kn_window_attrs(const kn_node *n, kn_window *win) {
    memset(win, 0, sizeof(*win));
    if (!kn_attr_has(n, "center") || !kn_attr_has(n, "width"))
        return ms_errf(MS_EINVAL, "%s: %s needs attrs center and width", n->name, n->op);
    double c = kn_attr_f(n, "center", 0.f), w = kn_attr_f(n, "width", 0.f);
    if (!(w > 0) || !isfinite(c) || !isfinite(w))
        return ms_errf(MS_EINVAL, "%s: window width must be > 0 (center %g, width %g)", n->name, c,
                       w);
    win->lo = (float)(c - w / 2.0);
    win->hi = (float)(c + w / 2.0);
    win->range = win->hi - win->lo;
    if (kn_attr_s_eq(n, "data_format", "NCHW", "NHWC"))
        win->nchw = 1;
    else if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC"))
        return ms_errf(MS_EINVAL, "%s: data_format must be NHWC or NCHW", n->name);
    int64_t sz[2];
    int k = kn_attr_ilist(n, "size", sz, 2);
    if (k == 2 && sz[0] > 0 && sz[1] > 0 && sz[0] <= 65535 && sz[1] <= 65535) {
        win->size[0] = sz[0];
        win->size[1] = sz[1];
    } else if (k > 0) {
        return ms_errf(MS_EINVAL, "%s: size wants [height, width] in 1..65535", n->name);
    }
    return MS_OK;
}

int kn_attr_typelist(const kn_node *n, const char *key, rt_dtype *out, int max) {
    return n->attrs ? n->attrs->typelist(n, key, out, max) : -1;
}

ms_status kn_attr_shape(const kn_node *n, const char *key, rt_shape *out) {
    if (n->attrs == NULL) return ms_errf(MS_ENOTFOUND, "node '%s': no shape attr '%s'", n->name, key);
    return n->attrs->shape(n, key, out);
}

ms_status kn_attr_tensor(const kn_node *n, const char *key, rt_tensor **out) {
    if (n->attrs == NULL) return ms_errf(MS_EINVAL, "node '%s': no tensor attr '%s'", n->name, key);
    return n->attrs->tensor(n, key, out);
}

ms_status kn__errf(ms_status code, const kn_node *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return ms_errf(code, "node '%s' (%s): %s", n && n->name ? n->name : "?",
                   n && n->op ? n->op : "?", msg);
}
