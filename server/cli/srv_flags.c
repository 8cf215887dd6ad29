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
    size_t off; /* NOSTORE: value checked, then dropped */
    double min, max; /* numeric range, inclusive */
    const char *help;
    const char *note; /* NULL, or why the flag has no (or only part of its) effect here */
} flag_def;

#define OFF(field) offsetof(srv_flags, field)
#define NOSTORE ((size_t)-1)

/* Reasons shared by several flags. */
#define N_TF "dcmserve has its own executor, not a TensorFlow session; the flag has no effect"
#define N_TFLITE "dcmserve does not run TensorFlow Lite models; the flag has no effect"

/* Every flag of tensorflow_model_server's main.cc (in its order), then ours.
 * Keep one row per flag: other issues wire their flags here. */
static const flag_def defs[] = {
    /* clang-format off */
    {"port", F_INT, OFF(port), 0, 65535,
     "gRPC port (TF Serving PredictionService, ModelService, KServe v2, health). Default 8500; 0 picks a free port", NULL},
    {"grpc_socket_path", F_STR, NOSTORE, 0, 0,
     "TF Serving: also listen on this UNIX socket", "UNIX-socket gRPC not implemented yet; only --port is served"},
    {"rest_api_port", F_INT, OFF(rest_api_port), 0, 65535,
     "REST/HTTP port: TF Serving's /v1/models API, KServe v2 REST, /metrics (docs/serving.md). Default 0 (off)", NULL},
    {"rest_api_num_threads", F_INT, OFF(rest_api_num_threads), 0, 4096,
     "REST threads: libmicrohttpd's pool and as many workers that run calls. Default 0 = 4", NULL},
    {"rest_api_timeout_in_ms", F_INT, OFF(rest_api_timeout_in_ms), 0, INT32_MAX,
     "REST: deadline of a call that runs a model (:predict, :classify, :regress, KServe /infer; "
     "past it the run is cancelled: 504) and the idle "
     "connection timeout (rounded up to seconds). Default 0 = calls 30000 ms (TF Serving's "
     "default), connections --idle_timeout_seconds", NULL},
    {"rest_read_timeout_seconds", F_INT, OFF(rest_read_timeout_seconds), 0, 86400,
     "REST: a new connection must send its request headers within this many seconds, and a "
     "request body may pause no longer than this and must bring 64 KiB per such period; slower "
     "senders are cut. 0 = never. Default 10",
     NULL},
    {"max_rest_buffered_bytes", F_INT64, OFF(max_rest_buffered_bytes), 0, 1e18,
     "REST: request bodies held in memory at once, all connections together; a body past it is "
     "answered 503. Default 0 = the smaller of --max_request_memory_bytes and a quarter of the "
     "memory limit (cgroup or RAM)", NULL},
    {"rest_api_enable_cors_support", F_BOOL, OFF(rest_api_enable_cors_support), 0, 0,
     "REST: Access-Control-Allow-Origin: * on every answer, OPTIONS answered", NULL},
    {"enable_batching", F_BOOL, OFF(enable_batching), 0, 0,
     "batch concurrent requests of one model/version/signature along dim 0 (docs/serving.md)", NULL},
    {"allow_version_labels_for_unavailable_models", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: allow labels that point at versions not loaded yet",
     "labels are checked against the versions on disk when the config is read, not the loaded ones; the flag has no further effect"},
    {"batching_parameters_file", F_STR, OFF(batching_parameters_file), 0, 0,
     "BatchingParameters text proto (max_batch_size, batch_timeout_micros, max_enqueued_batches, num_batch_threads, allowed_batch_sizes, pad_variable_length_inputs)", NULL},
    {"enable_per_model_batching_parameters", F_BOOL, OFF(enable_per_model_batching_parameters), 0, 0,
     "read batching_params.pbtxt from each model version directory (falls back to --batching_parameters_file)", NULL},
    {"model_config_file", F_STR, OFF(model_config_file), 0, 0,
     "ModelServerConfig file: protobuf JSON mapping (or text format) listing several models", NULL},
    {"model_config_file_poll_wait_seconds", F_INT, OFF(model_config_file_poll_wait_seconds), 0, 86400,
     "re-read --model_config_file this often; 0 = only at start and on SIGHUP. Default 0", NULL},
    {"model_name", F_STR, OFF(model_name), 0, 0,
     "name of the single model served from --model_base_path. Default \"default\"", NULL},
    {"model_base_path", F_STR, OFF(model_base_path), 0, 0,
     "folder holding numbered version folders of one SavedModel", NULL},
    {"num_load_threads", F_INT, NOSTORE, 0, 1024,
     "TF Serving: threads that load servables",
     "versions load on the manager's own thread, one at a time; the flag has no effect"},
    {"num_unload_threads", F_INT, NOSTORE, 0, 1024,
     "TF Serving: threads that unload servables",
     "versions unload when their last request ends; the flag has no effect"},
    {"max_num_load_retries", F_INT, NOSTORE, 0, INT32_MAX,
     "TF Serving: load retries after a failure",
     "a failed version is retried when its files change (see Versions, hot reload and failures); the flag has no effect"},
    {"load_retry_interval_micros", F_INT64, NOSTORE, -1e18, 1e18,
     "TF Serving: wait between load retries",
     "a failed version is retried when its files change; the flag has no effect"},
    {"file_system_poll_wait_seconds", F_DOUBLE, OFF(file_system_poll_wait_seconds), 0, 86400,
     "scan base paths for new or removed versions this often; 0 = once at start. Default 1", NULL},
    {"flush_filesystem_caches", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: drop file-system caches after loads",
     "dcmserve reads model files once into its own memory; the flag has no effect"},
    {"tensorflow_session_parallelism", F_INT, OFF(session_parallelism), 0, 1024,
     "threads one kernel may use when --tensorflow_intra_op_parallelism is not given; 0 = one per core", NULL},
    {"tensorflow_session_config_file", F_STR, NOSTORE, 0, 0,
     "TF Serving: session ConfigProto text file", N_TF},
    {"tensorflow_intra_op_parallelism", F_INT, OFF(intra_op_threads), 0, 1024,
     "threads one kernel may use; 0 = one per core. Default 0", NULL},
    {"tensorflow_inter_op_parallelism", F_INT, NOSTORE, 0, 1024,
     "TF Serving: ops run at the same time",
     "the executor runs one op at a time per request (concurrency comes from --grpc_max_threads); the flag has no effect"},
    {"use_alts_credentials", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: Google ALTS credentials",
     "ALTS exists only on Google Cloud; the flag has no effect"},
    {"ssl_config_file", F_STR, OFF(ssl_config_file), 0, 0,
     "TF Serving: SSLConfig text proto (server_key, server_cert, custom_ca, client_verify): "
     "TLS, or mutual TLS with client_verify, on the gRPC and REST ports; re-read on SIGHUP", NULL},
    {"platform_config_file", F_STR, NOSTORE, 0, 0,
     "TF Serving: PlatformConfigMap text proto",
     "dcmserve serves one platform (SavedModel, and ONNX imported with dcmserve import-onnx); the flag has no effect"},
    {"per_process_gpu_memory_fraction", F_DOUBLE, OFF(gpu_memory_fraction), 0, 1,
     "share of the GPU's memory the CUDA backend may hold (the plans' device arenas, its block "
     "cache, constants uploaded at load), a hard cap: a load over it is refused naming the bytes "
     "(0 = no cap; no effect when no GPU is chosen). Default 0",
     NULL},
    {"saved_model_tags", F_STR, OFF(saved_model_tags), 0, 0,
     "tags of the MetaGraph to load. Default \"serve\"", NULL},
    {"grpc_channel_arguments", F_STR, OFF(grpc_channel_arguments), 0, 0,
     "comma-separated gRPC server arguments key=value (integers passed as integers), e.g. grpc.so_reuseport=1", NULL},
    {"grpc_max_threads", F_INT, OFF(grpc_max_threads), 0, 1024,
     "worker threads that run inference (Predict, ModelInfer); 0 = 4 x cores. Default 0", NULL},
    {"enable_model_warmup", F_BOOL, OFF(enable_model_warmup), 0, 0,
     "replay assets.extra/tf_serving_warmup_requests (else synthetic inputs) before a version is AVAILABLE. Default true", NULL},
    {"num_request_iterations_for_warmup", F_INT, OFF(num_request_iterations_for_warmup), 1, 1000000,
     "times each warm-up request is replayed. Default 1", NULL},
    {"version", F_BOOL, OFF(version), 0, 0, "print the version and exit", NULL},
    {"monitoring_config_file", F_STR, OFF(monitoring_config_file), 0, 0,
     "MonitoringConfig text proto: prometheus_config { enable: true path: \"...\" } also serves /metrics at that path on the REST port", NULL},
    {"remove_unused_fields_from_bundle_metagraph", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: drop unused MetaGraphDef fields",
     "dcmserve keeps only the graph it runs, never the whole MetaGraphDef; the flag has no effect"},
    {"prefer_tflite_model", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: load model.tflite instead of saved_model.pb", N_TFLITE},
    {"num_tflite_pools", F_INT, NOSTORE, 0, 4096,
     "TF Serving: TFLite interpreter pools", N_TFLITE},
    {"num_tflite_interpreters_per_pool", F_INT, NOSTORE, 0, 4096,
     "TF Serving: TFLite interpreters per pool", N_TFLITE},
    {"enable_signature_method_name_check", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: require method_name to match the API",
     "the signature's inputs and outputs are checked, never its method_name; the flag has no effect"},
    {"xla_cpu_compilation_enabled", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: XLA:CPU JIT", "dcmserve has no XLA compiler; the flag has no effect"},
    {"xla_gpu_compilation_enabled", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: XLA:CPU and XLA:GPU JIT", "dcmserve has no XLA compiler; the flag has no effect"},
    {"enable_profiler", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: TensorFlow profiler service",
     "dcmserve has no TensorFlow profiler service; the flag has no effect"},
    {"thread_pool_factory_config_file", F_STR, NOSTORE, 0, 0,
     "TF Serving: ThreadPoolConfig text proto", N_TF},
    {"mixed_precision", F_STR, NOSTORE, 0, 0,
     "TF Serving: mixed-precision mode (bfloat16)",
     "kernels compute in the graph's own dtypes; the flag has no effect"},
    {"skip_initialize_tpu", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: skip TPU initialisation", "dcmserve has no TPU support; the flag has no effect"},
    {"enable_grpc_healthcheck_service", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: register grpc.health.v1.Health",
     "grpc.health.v1.Health is always registered; the flag has no effect"},
    {"enable_serialization_as_tensor_content", F_BOOL, NOSTORE, 0, 0,
     "TF Serving: Predict answers in tensor_content",
     "Predict answers in the typed *_val fields (as TF Serving without the flag); the flag has no effect"},
    /* dcmserve's own */
    {"bind_address", F_STR, OFF(bind_address), 0, 0,
     "address the gRPC and REST ports (and so /metrics) bind to. Default 0.0.0.0", NULL},
    {"grpc_cq_threads", F_INT, OFF(grpc_cq_threads), 1, 64,
     "gRPC completion-queue threads (protocol work, cheap calls inline). Default 1", NULL},
    {"grpc_inline_max_micros", F_INT, OFF(grpc_inline_max_micros), 0, 1000000,
     "run a small inference call on the CQ thread when its model/signature's runs average at most this many microseconds; 0 = never. Default 500", NULL},
    {"grpc_handover_max_micros", F_INT, OFF(grpc_handover_max_micros), 0, 60000000,
     "run any other inference call on the CQ thread that accepted it, handing the completion queue to a standby thread, when its model/signature has nothing waiting and its runs average at most this many microseconds; 0 = never. Default 2000", NULL},
    {"grpc_standby_threads", F_INT, OFF(grpc_standby_threads), 0, 8,
     "standby threads per CQ thread, which take the completion queue over while it runs a call (--grpc_handover_max_micros); 0 = no hand-over. Default 1", NULL},
    {"grpc_cq_slice_micros", F_INT, OFF(grpc_cq_slice_micros), 0, 100000,
     "CPU time slice the CQ threads ask the kernel for (Linux 6.12+: a waking CQ thread then preempts a busy worker at once); 0 = the kernel's default. Default 100", NULL},
    {"grpc_worker_nice", F_INT, OFF(grpc_worker_nice), 0, 19,
     "nice increment of the inference worker threads, so that the CQ thread (the protocol and the cheap calls run inline) goes first when the CPUs are busy; 0 = same priority. Default 10", NULL},
    {"max_message_bytes", F_INT64, OFF(max_message_bytes), 1, INT32_MAX,
     "largest gRPC message received or sent, also the inflated size of a compressed one. "
     "Default 268435456 (256 MiB)", NULL},
    {"max_request_memory_bytes", F_INT64, OFF(max_request_memory_bytes), 0, 1e18,
     "memory one request may hold: its tensors, decoded DICOM, live graph outputs; past it "
     "RESOURCE_EXHAUSTED. 0 = no limit. Default 1073741824 (1 GiB)", NULL},
    {"model_warmup_run_timeout_seconds", F_DOUBLE, OFF(model_warmup_run_timeout_seconds), 0,
     86400,
     "deadline of one warm-up run at load; past it the run is cancelled and the load fails "
     "(DEADLINE_EXCEEDED). 0 = none. Default 300", NULL},
    {"max_model_memory_bytes", F_INT64, OFF(max_model_memory_bytes), 0, 1e18,
     "load budget of one model: the memory its broadcast Consts (a few values stored for a "
     "large shape) take beyond the graph file; past it the load fails. 0 = no limit. Default "
     "1073741824 (1 GiB)", NULL},
    {"drain_timeout_seconds", F_DOUBLE, OFF(drain_timeout_seconds), 0, 86400,
     "on SIGTERM/SIGINT, how long in-flight calls may take before they are cancelled. Default 30", NULL},
    {"log_level", F_LOG, OFF(log_level), 0, 0,
     "debug, info, warn or error. Default info", NULL},
    {"request_log", F_STR, OFF(request_log), 0, 0,
     "one log line per request: off, errors (non-OK answers) or all. Default errors", NULL},
    {"log_format", F_STR, OFF(log_format), 0, 0,
     "text (default) or json (one JSON object per line) for every log line", NULL},
    {"max_queued_requests_per_model", F_INT, OFF(max_queued_requests_per_model), 1, 1000000,
     "gRPC inference requests waiting per model/signature queue; more answer UNAVAILABLE at once. Default 128 (with batching: max_enqueued_batches x max_batch_size)", NULL},
    {"check_config", F_BOOL, OFF(check_config), 0, 0,
     "validate the model config and that each base path has a version directory, then exit (0 = OK)",
     NULL},
    /* hostile clients (docs/security.md) */
    {"enable_reload_config_rpc", F_BOOL, OFF(enable_reload_config_rpc), 0, 0,
     "answer HandleReloadConfigRequest and Triton's RepositoryModelLoad / Unload (from loopback or "
     "--admin_client_cn clients only). Default false", NULL},
    {"admin_client_cn", F_STR, OFF(admin_client_cn), 0, 0,
     "comma-separated certificate CNs of mTLS clients allowed to call HandleReloadConfigRequest "
     "and RepositoryModelLoad / Unload", NULL},
    {"model_base_path_prefix", F_STR, OFF(model_base_path_prefix), 0, 0,
     "every model base path must resolve (symlinks, ..) inside this folder. Default: unset", NULL},
    {"max_num_models", F_INT, OFF(max_num_models), 1, 1000000,
     "most models one config may list. Default 1000", NULL},
    {"allow_empty_model_config", F_BOOL, OFF(allow_empty_model_config), 0, 0,
     "let a re-read config or a reload drop every model (otherwise refused and logged). Default false", NULL},
    {"max_connections", F_INT, OFF(max_connections), 0, 1000000,
     "open gRPC connections at most (past it new ones get an HTTP/2 GOAWAY), and REST connections at "
     "most (past it the one idle or waiting longest for its request is closed; with none, 503). "
     "Default 0 = gRPC: only the file-descriptor limit; REST: a quarter of it", NULL},
    {"idle_timeout_seconds", F_INT, OFF(idle_timeout_seconds), 0, 86400,
     "close gRPC connections with no call for this long, and those that send no HTTP/2 preface. Default 300; 0 = never", NULL},
    {"grpc_max_concurrent_streams", F_INT, OFF(grpc_max_concurrent_streams), 1, 100000,
     "HTTP/2 streams open at once per gRPC connection. Default 128", NULL},
    {"grpc_keepalive_time_seconds", F_INT, OFF(grpc_keepalive_time_seconds), 1, 86400,
     "the server pings a connection quiet this long. Default 7200", NULL},
    {"grpc_keepalive_timeout_seconds", F_INT, OFF(grpc_keepalive_timeout_seconds), 1, 86400,
     "and closes it when the ping is not answered within this. Default 20", NULL},
    {"max_connection_age_seconds", F_INT, OFF(max_connection_age_seconds), 0, 86400 * 365,
     "send GOAWAY to a gRPC connection this old (clients reconnect). Default 0 = never", NULL},
    {"max_connection_age_grace_seconds", F_INT, OFF(max_connection_age_grace_seconds), 0, 86400 * 365,
     "after that GOAWAY, cut calls still open after this long. Default 0 = never", NULL},
    {"grpc_memory_quota_bytes", F_INT64, OFF(grpc_memory_quota_bytes), 1 << 20, 1e15,
     "memory gRPC core may use for connection buffers before it cancels streams and sends GOAWAY. Default 1073741824", NULL},
    {"device", F_STR, OFF(device), 0, 0,
     "auto, cpu, cuda or cuda:N. auto: the first usable GPU, else the CPU (logged with the reason); "
     "cuda without a usable GPU refuses to start, saying why. Default auto", NULL},
    {"cuda_graphs", F_BOOL, OFF(cuda_graphs), 0, 0,
     "with a GPU: capture the device work of sized plans into CUDA graphs and replay them "
     "(docs/gpu.md; unmeasured). Default false", NULL},
    {"precision", F_STR, OFF(precision), 0, 0,
     "with a GPU: fp32 (FP32 products, within 1e-5 of the CPU) or tf32 (cuBLASLt and cuDNN may use "
     "TF32 tensor cores); fp16 is refused (not implemented). No effect on the CPU. Default fp32",
     NULL},
    {"help", F_BOOL, OFF(help), 0, 0, "print this help and exit", NULL},
    /* clang-format on */
};

#define NDEFS ((int)(sizeof(defs) / sizeof(defs[0])))

int srv_flags_count(void) { return NDEFS; }

const char *srv_flags_name(int i) { return i >= 0 && i < NDEFS ? defs[i].name : NULL; }

void srv_flags_defaults(srv_flags *f) {
    memset(f, 0, sizeof(*f));
    f->port = 8500;
    f->bind_address = "0.0.0.0";
    f->model_name = NULL;
    f->file_system_poll_wait_seconds = 1.0;
    f->grpc_cq_threads = 1;
    f->grpc_inline_max_micros = 500;
    f->grpc_handover_max_micros = 2000;
    f->grpc_standby_threads = 1;
    f->grpc_worker_nice = 10;
    f->grpc_cq_slice_micros = 100;
    f->max_message_bytes = 256 << 20;
    f->max_request_memory_bytes = (int64_t)1 << 30;
    f->max_model_memory_bytes = (int64_t)1 << 30;
    f->model_warmup_run_timeout_seconds = 300.0;
    f->drain_timeout_seconds = 30.0;
    f->log_level = MS_LOG_INFO;
    f->saved_model_tags = "serve";
    f->enable_model_warmup = 1;
    f->num_request_iterations_for_warmup = 1;
    f->max_num_models = 1000;
    f->idle_timeout_seconds = 300;
    f->rest_read_timeout_seconds = 10;
    f->grpc_max_concurrent_streams = 128;
    f->grpc_keepalive_time_seconds = 7200;
    f->grpc_keepalive_timeout_seconds = 20;
    f->grpc_memory_quota_bytes = (int64_t)1 << 30;
}

static const flag_def *find_def(const char *name, size_t len) {
    for (int i = 0; i < NDEFS; i++)
        if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0) return &defs[i];
    return NULL;
}

static ms_status set_value(const flag_def *d, const char *val, srv_flags *f) {
    char *end = NULL;
    union {
        int i;
        int64_t l;
        double d;
        const char *s;
        ms_log_level g;
    } scratch; /* where a NOSTORE value goes */
    void *p = d->off == NOSTORE ? (void *)&scratch : (void *)((char *)f + d->off);

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

static void note(srv_flags *f, int idx) {
    for (int i = 0; i < f->n_noted; i++)
        if (f->noted[i] == idx) return;
    if (f->n_noted < SRV_FLAGS_MAX_NOTED) f->noted[f->n_noted++] = idx;
}

void srv_flags_log_notes(const srv_flags *f) {
    if (f->single_model_ignored) {
        if (f->model_name)
            MS_WARN("flag --model_name: ignored because --model_config_file lists the models (as TF Serving)");
        if (f->model_base_path)
            MS_WARN("flag --model_base_path: ignored because --model_config_file lists the models (as TF Serving)");
    }
    for (int i = 0; i < f->n_noted; i++)
        MS_WARN("flag --%s: %s", defs[f->noted[i]].name, defs[f->noted[i]].note);
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
        if (d->note != NULL) note(f, (int)(d - defs));
    }
    if (f->intra_op_threads == 0) f->intra_op_threads = f->session_parallelism;
    /* As TF Serving: with --model_config_file, --model_name/--model_base_path
     * are ignored (one warning line each, see srv_flags_log_notes). */
    if (f->model_config_file != NULL && (f->model_base_path != NULL || f->model_name != NULL))
        f->single_model_ignored = 1;
    if (f->request_log != NULL && strcmp(f->request_log, "off") != 0 &&
        strcmp(f->request_log, "errors") != 0 && strcmp(f->request_log, "all") != 0)
        return ms_errf(MS_EINVAL, "flag --request_log: expected off, errors or all, got \"%s\"",
                       f->request_log);
    if (f->log_format != NULL && strcmp(f->log_format, "text") != 0 &&
        strcmp(f->log_format, "json") != 0)
        return ms_errf(MS_EINVAL, "flag --log_format: expected text or json, got \"%s\"",
                       f->log_format);
    return MS_OK;
}

void srv_flags_usage(FILE *out) {
    fprintf(out, "usage: dcmserve serve [--flag=value ...]   (or: dcmserve --flag=value ...)\n"
                 "Serves SavedModels over TF Serving gRPC, KServe v2 gRPC and grpc.health.v1.\n\n");
    for (int i = 0; i < NDEFS; i++) {
        fprintf(out, "  --%s\n      %s\n", defs[i].name, defs[i].help);
        if (defs[i].note != NULL) fprintf(out, "      (here: %s)\n", defs[i].note);
    }
    fprintf(out,
            "\nSignals: SIGTERM/SIGINT drain and exit 0; SIGHUP re-reads --model_config_file.\n");
}
