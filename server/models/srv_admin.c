/* srv_admin.c - the admin RPC's gate: peer check and model list limits. */
#include "srv_admin.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int srv_admin_cn_listed(const char *list, const char *cn) {
    if (list == NULL || cn == NULL || cn[0] == '\0') return 0;
    size_t n = strlen(cn);
    for (const char *p = list; *p != '\0';) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e != '\0' && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        if ((size_t)(t - p) == n && n > 0 && memcmp(p, cn, n) == 0) return 1;
        p = e;
    }
    return 0;
}

static ms_status disabled(const char *what) {
    return ms_errf(MS_EPERM, "%s is disabled on this server (start it with "
                             "--enable_reload_config_rpc)", what);
}

ms_status srv_admin_authorize(const srv_admin_policy *p, srv_call *c, char *who, size_t cap) {
    return srv_admin_authorize_as(p, "HandleReloadConfigRequest", c, who, cap);
}

ms_status srv_admin_authorize_peer(const srv_admin_policy *p, const char *what, const char *peer) {
    if (!p->enabled) return disabled(what);
    if (peer != NULL && srv_peer_is_loopback(peer)) return MS_OK;
    return ms_errf(MS_EPERM, "%s over REST is allowed only from loopback (use gRPC with an admin "
                             "certificate, --admin_client_cn, from elsewhere)", what);
}

ms_status srv_admin_authorize_as(const srv_admin_policy *p, const char *what, srv_call *c,
                                 char *who, size_t cap) {
    char peer[300], cn[256];
    srv_call_peer(c, peer, sizeof(peer));
    int has_cn = srv_call_peer_cn(c, cn, sizeof(cn));
    if (has_cn)
        snprintf(who, cap, "%s cn=%s", peer, cn);
    else
        snprintf(who, cap, "%s", peer);
    if (!p->enabled) return disabled(what);
    if (has_cn && srv_admin_cn_listed(p->client_cns, cn)) return MS_OK;
    if (srv_call_peer_is_loopback(c)) return MS_OK;
    return ms_errf(MS_EPERM, "%s is allowed only from loopback or from clients with an admin "
                             "certificate (--admin_client_cn)", what);
}

static int has_dotdot(const char *p) {
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2) {
        int start = s == p || s[-1] == '/';
        int end = s[2] == '\0' || s[2] == '/';
        if (start && end) return 1;
    }
    return 0;
}

/* realpath of the longest existing ancestor of path, then the rest appended;
 * -2 when that rest has a '..' component. */
static int resolve(const char *path, char *out) {
    char tmp[PATH_MAX];
    if (strlen(path) >= sizeof(tmp)) return -1;
    strcpy(tmp, path);
    size_t len = strlen(tmp);
    for (;;) {
        if (realpath(tmp[0] ? tmp : "/", out) != NULL) break;
        if (errno != ENOENT && errno != ENOTDIR) return -1;
        char *slash = strrchr(tmp, '/');
        if (slash == NULL) { /* a relative name with nothing existing: the cwd */
            if (getcwd(out, PATH_MAX) == NULL) return -1;
            slash = tmp - 1;
            tmp[0] = '\0';
            break;
        }
        *slash = '\0';
    }
    size_t used = strlen(tmp);
    if (used < len) {
        const char *rest = path + used;
        while (*rest == '/')
            rest++;
        /* What does not exist yet cannot be resolved: '..' there could
         * climb anywhere once it does. */
        if (has_dotdot(rest)) return -2;
        size_t ol = strlen(out);
        if (ol + 1 + strlen(rest) >= PATH_MAX) return -1;
        if (ol == 0 || out[ol - 1] != '/') strcat(out, "/");
        strcat(out, rest);
    }
    return 0;
}

ms_status srv_admin_check_config(const srv_admin_policy *p, const srv_config *cfg) {
    int max = p->max_models > 0 ? p->max_models : SRV_ADMIN_DEFAULT_MAX_MODELS;
    if (cfg->nmodels > max)
        return ms_errf(MS_EINVAL, "model config lists %d models; at most %d are allowed "
                                  "(--max_num_models)", cfg->nmodels, max);
    if (p->base_path_prefix == NULL || p->base_path_prefix[0] == '\0') return MS_OK;
    char prefix[PATH_MAX], real[PATH_MAX];
    if (realpath(p->base_path_prefix, prefix) == NULL)
        return ms_errf(MS_EINVAL, "--model_base_path_prefix %s cannot be resolved: %s",
                       p->base_path_prefix, strerror(errno));
    size_t pl = strlen(prefix);
    for (int i = 0; i < cfg->nmodels; i++) {
        const srv_model_config *m = &cfg->models[i];
        int r = resolve(m->base_path, real);
        if (r == -2)
            return ms_errf(MS_EINVAL, "model '%s': base_path has a '..' component below the part "
                                      "that exists (--model_base_path_prefix)", m->name);
        if (r != 0)
            return ms_errf(MS_EINVAL, "model '%s': base_path cannot be resolved", m->name);
        int inside = strncmp(real, prefix, pl) == 0 &&
                     (real[pl] == '\0' || real[pl] == '/' || (pl == 1 && prefix[0] == '/'));
        if (!inside)
            return ms_errf(MS_EINVAL, "model '%s': base_path is outside the allowed prefix "
                                      "(--model_base_path_prefix)", m->name);
    }
    return MS_OK;
}
