/* srv_admin.h - who may reconfigure the server through
 * tensorflow.serving.ModelService/HandleReloadConfigRequest, and what a new
 * model list may ask for (docs/security.md, "Admin RPC").
 *
 * The RPC is off unless --enable_reload_config_rpc. When on, the caller must
 * connect from a loopback address, or over mTLS with a client certificate
 * whose subject CN is listed in --admin_client_cn. Every model base path of a
 * new list (RPC or config file) must resolve (symlinks and ".." followed, as
 * realpath does) inside --model_base_path_prefix when that is set, and a list
 * holds at most --max_num_models models. */
#ifndef SRV_ADMIN_H
#define SRV_ADMIN_H

#include <stddef.h>

#include "ms_status.h"
#include "srv_config.h"
#include "srv_grpc.h"

#define SRV_ADMIN_DEFAULT_MAX_MODELS 1000

typedef struct srv_admin_policy {
    int enabled;                  /* --enable_reload_config_rpc */
    const char *client_cns;       /* --admin_client_cn: comma-separated CNs, or NULL (borrowed) */
    const char *base_path_prefix; /* --model_base_path_prefix, or NULL (borrowed) */
    int max_models;               /* --max_num_models; <= 0 = SRV_ADMIN_DEFAULT_MAX_MODELS */
} srv_admin_policy;

/* May this call reconfigure the server? MS_OK, or MS_EPERM with a message
 * saying why (RPC disabled, peer not loopback and no admin certificate).
 * `who` receives the peer's description for the log ("ipv4:127.0.0.1:5000",
 * plus " cn=NAME" for a verified client certificate). */
ms_status srv_admin_authorize(const srv_admin_policy *p, srv_call *c, char *who, size_t cap);
/* The same gate for another admin call named `what` in the messages
 * ("RepositoryModelLoad", ...): Triton's repository load / unload. */
ms_status srv_admin_authorize_as(const srv_admin_policy *p, const char *what, srv_call *c,
                                 char *who, size_t cap);
/* The gate for an admin call over REST from `peer` (srv_call_peer's form):
 * on, and from a loopback address (REST has no admin certificate check). */
ms_status srv_admin_authorize_peer(const srv_admin_policy *p, const char *what, const char *peer);

/* Checks a new model list against the policy: the number of models, and
 * every base path confined to the prefix (when set). A path that does not
 * exist yet is judged by its longest existing ancestor, and a ".." in the
 * part that does not exist yet is refused. MS_EINVAL naming the model on failure. */
ms_status srv_admin_check_config(const srv_admin_policy *p, const srv_config *cfg);

/* Non-zero when `cn` is one of the comma-separated names in `list`. */
int srv_admin_cn_listed(const char *list, const char *cn);

#endif /* SRV_ADMIN_H */
