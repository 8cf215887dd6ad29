/* srv_flags.c - `dcmserve serve` flag parsing (tensorflow_model_server names). */
#include "srv_flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_INT, F_INT64, F_DOUBLE, F_STR, F_BOOL, F_LOG } flag_kind;

typedef struct flag_def {
    const char *name;
    flag_kind kind;
    size_t off;
    double min, max; /* numeric range, inclusive */
    const char *help;
} flag_def;

#define OFF(field) offsetof(srv_flags, field)

static const flag_def defs[] = {
    /* clang-format off */
    {"port", F_INT, OFF(port), 0, 65535,
     "gRPC port (TF Serving PredictionService, ModelService, KServe v2, health). Default 8500; 0 picks a free port"},
    {"rest_api_port", F_INT, OFF(rest_api_port), 0, 65535,
     "REST/HTTP port. Reserved: accepted and logged, not served yet. Default 0 (off)"},
    {"bind_address", F_STR, OFF(bind_address), 0, 0,
     "address the gRPC port binds to. Default 0.0.0.0"},
    {"model_name", F_STR, OFF(model_name), 0, 0,
     "name of the single model served from --model_base_path. Default \"default\""},
    {"model_base_path", F_STR, OFF(model_base_path), 0, 0,
     "folder holding numbered version folders of one SavedModel"},
    {"model_config_file", F_STR, OFF(model_config_file), 0, 0,
     "ModelServerConfig file: protobuf JSON mapping (or text format) listing several models"},
    {"model_config_file_poll_wait_seconds", F_INT, OFF(model_config_file_poll_wait_seconds), 0, 86400,
     "re-read --model_config_file this often; 0 = only at start and on SIGHUP. Default 0"},
    {"file_system_poll_wait_seconds", F_DOUBLE, OFF(file_system_poll_wait_seconds), 0, 86400,
     "scan base paths for new or removed versions this often; 0 = once at start. Default 1"},
    {"grpc_max_threads", F_INT, OFF(grpc_max_threads), 0, 1024,
     "worker threads that run inference (Predict, ModelInfer); 0 = 4 x cores. Default 0"},
    {"grpc_cq_threads", F_INT, OFF(grpc_cq_threads), 1, 64,
     "gRPC completion-queue threads (protocol work only). Default 2"},
    {"max_message_bytes", F_INT64, OFF(max_message_bytes), 1, INT32_MAX,
     "largest gRPC message received or sent. Default 2147483647 (INT32_MAX, as TF Serving)"},
    {"drain_timeout_seconds", F_DOUBLE, OFF(drain_timeout_seconds), 0, 86400,
     "on SIGTERM/SIGINT, how long in-flight calls may take before they are cancelled. Default 30"},
    {"tensorflow_intra_op_parallelism", F_INT, OFF(intra_op_threads), 0, 1024,
     "threads one kernel may use; 0 = one per core. Default 0"},
    {"log_level", F_LOG, OFF(log_level), 0, 0,
     "debug, info, warn or error. Default info"},
    {"check_config", F_BOOL, OFF(check_config), 0, 0,
     "validate the model config and that each base path has a version directory, then exit (0 = OK)"},
    {"help", F_BOOL, OFF(help), 0, 0, "print this help and exit"},
    {"version", F_BOOL, OFF(version), 0, 0, "print the version and exit"},
    /* clang-format on */
};

void srv_flags_defaults(srv_flags *f) {
    memset(f, 0, sizeof(*f));
    f->port = 8500;
    f->bind_address = "0.0.0.0";
    f->model_name = NULL;
    f->file_system_poll_wait_seconds = 1.0;
    f->grpc_cq_threads = 2;
    f->max_message_bytes = INT32_MAX;
    f->drain_timeout_seconds = 30.0;
    f->log_level = MS_LOG_INFO;
}

static const flag_def *find_def(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0) return &defs[i];
    return NULL;
}

static ms_status set_value(const flag_def *d, const char *val, srv_flags *f) {
    char *end = NULL;
    void *p = (char *)f + d->off;

    switch (d->kind) {
    case F_INT:
    case F_INT64: {
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno != 0 || end == val || *end != '\0' || v < (long long)d->min ||
            v > (long long)d->max)
            return ms_errf(MS_EINVAL, "flag --%s: expected an integer in [%.0f, %.0f], got \"%s\"",
                           d->name, d->min, d->max, val);
        if (d->kind == F_INT)
            *(int *)p = (int)v;
        else
            *(int64_t *)p = (int64_t)v;
        return MS_OK;
    }
    case F_DOUBLE: {
        errno = 0;
        double v = strtod(val, &end);
        if (errno != 0 || end == val || *end != '\0' || !isfinite(v) || v < d->min || v > d->max)
            return ms_errf(MS_EINVAL, "flag --%s: expected a number in [%g, %g], got \"%s\"",
                           d->name, d->min, d->max, val);
        *(double *)p = v;
        return MS_OK;
    }
    case F_STR:
        *(const char **)p = val;
        return MS_OK;
    case F_BOOL:
        if (strcmp(val, "true") == 0 || strcmp(val, "1") == 0) {
            *(int *)p = 1;
        } else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0) {
            *(int *)p = 0;
        } else {
            return ms_errf(MS_EINVAL, "flag --%s: expected true or false, got \"%s\"", d->name,
                           val);
        }
        return MS_OK;
    case F_LOG:
        if (ms_log_parse_level(val, (ms_log_level *)p) != 0)
            return ms_errf(MS_EINVAL, "flag --%s: expected debug, info, warn or error, got \"%s\"",
                           d->name, val);
        return MS_OK;
    }
    return ms_errf(MS_EINTERNAL, "flag --%s: bad definition", d->name);
}

ms_status srv_flags_parse(int argc, char **argv, int first, srv_flags *f) {
    srv_flags_defaults(f);
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-')
            return ms_errf(MS_EINVAL, "unexpected argument \"%s\" (flags start with --)", a);
        const char *name = a + (a[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const flag_def *d = find_def(name, nlen);
        if (d == NULL) {
            if (strcmp(a, "-h") == 0) {
                f->help = 1;
                continue;
            }
            return ms_errf(MS_EINVAL, "unknown flag --%.*s (see dcmserve serve --help)", (int)nlen,
                           name);
        }
        const char *val;
        if (eq != NULL) {
            val = eq + 1;
        } else if (d->kind == F_BOOL) {
            val = "true";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            return ms_errf(MS_EINVAL, "flag --%s needs a value", d->name);
        }
        ms_status st = set_value(d, val, f);
        if (st != MS_OK) return st;
    }
    if (f->model_config_file != NULL && f->model_base_path != NULL)
        return ms_errf(MS_EINVAL, "flags --model_config_file and --model_base_path exclude each "
                                  "other: list the model in the config file instead");
    if (f->model_config_file != NULL && f->model_name != NULL)
        return ms_errf(MS_EINVAL, "flags --model_config_file and --model_name exclude each other");
    return MS_OK;
}

void srv_flags_usage(FILE *out) {
    fprintf(out, "usage: dcmserve serve [--flag=value ...]   (or: dcmserve --flag=value ...)\n"
                 "Serves SavedModels over TF Serving gRPC, KServe v2 gRPC and grpc.health.v1.\n\n");
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++)
        fprintf(out, "  --%s\n      %s\n", defs[i].name, defs[i].help);
    fprintf(out,
            "\nSignals: SIGTERM/SIGINT drain and exit 0; SIGHUP re-reads --model_config_file.\n");
}
