/* kn_place.c - per-node placement and copies (kn_place.h). */
#include "kn_place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int pinned(const char *dev, const char *kind) {
    /* "/device:GPU:0", "/job:localhost/replica:0/task:0/device:GPU:0", "/gpu:0" */
    if (dev == NULL || dev[0] == '\0') return 0;
    const char *d = strstr(dev, "device:");
    d = d ? d + 7 : (dev[0] == '/' ? dev + 1 : dev);
    size_t k = strlen(kind);
    return strncasecmp(d, kind, k) == 0 && (d[k] == ':' || d[k] == '\0');
}

static ms_status add_copy(kn_placement *p, int *cap, int node, int out, kn_side to, int consumer) {
    for (int i = 0; i < p->ncopies; i++)
        if (p->copies[i].node == node && p->copies[i].out == out && p->copies[i].to == to)
            return MS_OK;
    if (p->ncopies == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        kn_place_copy *c = realloc(p->copies, sizeof(*c) * (size_t)nc);
        if (c == NULL) return ms_errf(MS_ENOMEM, "out of memory placing the plan");
        p->copies = c;
        *cap = nc;
    }
    p->copies[p->ncopies++] = (kn_place_copy){node, out, to, consumer};
    return MS_OK;
}

ms_status kn_place(const kn_place_node *nodes, int n, const kn_place_in *fetches, int nfetches,
                   kn_backend *device, kn_placement *out) {
    memset(out, 0, sizeof(*out));
    out->n = n;
    out->side = calloc((size_t)n + 1, sizeof(kn_side));
    if (out->side == NULL) return ms_errf(MS_ENOMEM, "out of memory placing the plan");
    int cap = 0;
    ms_status st = MS_OK;
    for (int i = 0; i < n; i++) {
        const kn_place_node *nd = &nodes[i];
        if (pinned(nd->device, "GPU")) out->pins_gpu++;
        if (pinned(nd->device, "CPU")) out->pins_cpu++;
        int on_dev = device != NULL && !nd->host_only && nd->op != NULL &&
                     kn_backend_kernel(device, nd->op) != NULL;
        out->side[i] = on_dev ? KN_SIDE_DEVICE : KN_SIDE_HOST;
        out->ndevice += on_dev;
        for (int k = 0; k < nd->nin; k++) {
            const kn_place_in e = nd->in[k];
            if (e.node >= i || e.node < -1) {
                st = ms_errf(MS_EINVAL, "placement: input %d of node %d names node %d (not earlier)",
                             k, i, e.node);
                goto fail;
            }
            kn_side from = e.node < 0 ? KN_SIDE_HOST : out->side[e.node];
            if (from != out->side[i] && (st = add_copy(out, &cap, e.node, e.out, out->side[i], i)) != MS_OK)
                goto fail;
        }
    }
    for (int f = 0; f < nfetches; f++) {
        const kn_place_in e = fetches[f];
        if (e.node < -1 || e.node >= n) {
            st = ms_errf(MS_EINVAL, "placement: fetch %d names node %d of %d", f, e.node, n);
            goto fail;
        }
        if (e.node >= 0 && out->side[e.node] == KN_SIDE_DEVICE &&
            (st = add_copy(out, &cap, e.node, e.out, KN_SIDE_HOST, n)) != MS_OK)
            goto fail;
    }
    return MS_OK;
fail:
    kn_placement_free(out);
    return st;
}

void kn_placement_free(kn_placement *p) {
    if (p == NULL) return;
    free(p->side);
    free(p->copies);
    memset(p, 0, sizeof(*p));
}

void kn_placement_summary(const kn_placement *p, const kn_place_node *nodes, const char *dev,
                          char *buf, size_t len) {
    size_t o = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (o < len) {                                                                             \
            int w_ = snprintf(buf + o, len - o, __VA_ARGS__);                                      \
            if (w_ > 0) o += (size_t)w_;                                                           \
        }                                                                                          \
    } while (0)
    if (len == 0) return;
    buf[0] = '\0';
    PUT("%d of %d nodes on %s, %d copies", p->ndevice, p->n, dev, p->ncopies);
    /* the fallback ops, each named once with its count, in first-seen order */
    int listed = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->side[i] != KN_SIDE_HOST || nodes[i].host_only || nodes[i].op == NULL) continue;
        int seen = 0, count = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = p->side[j] == KN_SIDE_HOST && !nodes[j].host_only && nodes[j].op &&
                   strcmp(nodes[j].op, nodes[i].op) == 0;
        if (seen) continue;
        for (int j = i; j < p->n; j++)
            count += p->side[j] == KN_SIDE_HOST && !nodes[j].host_only && nodes[j].op &&
                     strcmp(nodes[j].op, nodes[i].op) == 0;
        PUT("%s%s x%d", listed ? ", " : "; CPU fallback for ", nodes[i].op, count);
        listed++;
    }
    PUT("; graph pins (hints): %d GPU, %d CPU", p->pins_gpu, p->pins_cpu);
#undef PUT
    if (o >= len && len > 4) memcpy(buf + len - 4, "...", 4);
}
