/* srv_config.h - the model list the daemon serves: TF Serving's
 * ModelServerConfig read from JSON (protobuf's JSON mapping, with cJSON), from
 * TF Serving's text format (pbtxt), from a ReloadConfigRequest, or built from
 * --model_name/--model_base_path.
 *
 * Ownership: an srv_config owns every string and array in it; free it with
 * srv_config_free. */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stdint.h>

#include "ms_status.h"
#include "tf_serving.pb-c.h"

typedef enum srv_policy_kind {
    SRV_POLICY_LATEST = 0, /* the num_versions highest versions (default 1) */
    SRV_POLICY_ALL,        /* every version on disk */
    SRV_POLICY_SPECIFIC,   /* exactly the listed versions */
} srv_policy_kind;

typedef struct srv_label {
    char *name;
    int64_t version;
} srv_label;

typedef struct srv_model_config {
    char *name;
    char *base_path;
    srv_policy_kind policy;
    uint32_t num_versions; /* SRV_POLICY_LATEST */
    int64_t *versions;     /* SRV_POLICY_SPECIFIC, sorted ascending, no duplicates */
    int nversions;
    srv_label *labels;
    int nlabels;
} srv_model_config;

typedef struct srv_config {
    srv_model_config *models;
    int nmodels;
} srv_config;

/* Parses ModelServerConfig in protobuf's JSON mapping. Accepts both the proto
 * field names (base_path) and lowerCamelCase (basePath), int64 as number or
 * string. MS_EINVAL naming the offending key for unknown keys, wrong types,
 * empty or duplicate names, an empty specific version list, a platform other
 * than "tensorflow", a label on a version outside a specific policy. */
ms_status srv_config_parse_json(const char *text, srv_config **out);

/* Parses ModelServerConfig in protobuf text format (what TF Serving's
 * --model_config_file usually holds), with the same checks. */
ms_status srv_config_parse_text(const char *text, srv_config **out);

/* Reads a config file: JSON when its first non-blank character is '{',
 * text format otherwise. The message names the file on error. */
ms_status srv_config_read_file(const char *path, srv_config **out);

/* Converts the proto form (ReloadConfigRequest.config). MS_EINVAL for
 * custom_model_config or invalid entries. */
ms_status srv_config_from_proto(const Tensorflow__Serving__ModelServerConfig *p, srv_config **out);

/* One model, latest policy with one version. */
ms_status srv_config_single(const char *name, const char *base_path, srv_config **out);

/* Deep copy of one model entry into *dst (which must be zeroed). */
ms_status srv_model_config_copy(const srv_model_config *src, srv_model_config *dst);
void srv_model_config_clear(srv_model_config *m);

/* Non-zero when a and b describe the same model the same way. */
int srv_model_config_equal(const srv_model_config *a, const srv_model_config *b);

void srv_config_free(srv_config *c);

#endif /* SRV_CONFIG_H */
