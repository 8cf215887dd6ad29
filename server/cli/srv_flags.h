/* srv_flags.h - command-line flags of `dcmserve serve`, named as
 * tensorflow_model_server names them (--port, --model_name, ...).
 *
 * Both `--flag=value` and `--flag value` are accepted. Unknown flags and bad
 * values are errors whose message names the flag. Strings in srv_flags point
 * into argv (borrowed); srv_flags has nothing to free. */
#ifndef SRV_FLAGS_H
#define SRV_FLAGS_H

#include <stdint.h>
#include <stdio.h>

#include "ms_log.h"
#include "ms_status.h"

#define SRV_FLAGS_MAX_NOTED 64

typedef struct srv_flags {
    int port;                                /* --port, gRPC, default 8500 */
    int rest_api_port;                       /* --rest_api_port, TF Serving REST (0 = off) */
    int rest_api_num_threads;                /* REST worker threads; 0 = 4 */
    int rest_api_timeout_in_ms;              /* REST idle connection timeout; 0 = none */
    int rest_api_enable_cors_support;        /* Access-Control-Allow-Origin: * */
    int rest_read_timeout_seconds;           /* REST slow senders cut after; 0 = never */
    int64_t max_rest_buffered_bytes;         /* REST bodies held at once; 0 = derived */
    const char *bind_address;                /* --bind_address, default 0.0.0.0 */
    const char *model_name;                  /* --model_name, default "default" */
    const char *model_base_path;             /* --model_base_path */
    const char *model_config_file;           /* --model_config_file (JSON or pbtxt) */
    int model_config_file_poll_wait_seconds; /* 0 = read once (SIGHUP re-reads) */
    double file_system_poll_wait_seconds;    /* default 1; 0 = scan once at start */
    int grpc_max_threads;                    /* inference worker threads; 0 = 4 x cores */
    int grpc_cq_threads;                     /* completion-queue threads; default 1 */
    int grpc_inline_max_micros;              /* inline a call whose model's runs average <= this */
    int grpc_handover_max_micros;            /* hand the CQ over and run a call averaging <= this */
    int grpc_standby_threads;                /* standby pollers per CQ thread; default 1 */
    int grpc_cq_slice_micros;                /* slice the CQ threads ask for; 0 = kernel default */
    int grpc_worker_nice;                    /* nice increment of the inference workers; 0 = none */
    int64_t max_message_bytes;               /* send/receive limit; default 256 MiB */
    int64_t max_request_memory_bytes;        /* per-request memory budget; default 1 GiB */
    int64_t max_model_memory_bytes;          /* load budget of Const broadcasts; default 1 GiB */
    double model_warmup_run_timeout_seconds; /* deadline of one warm-up run; default 300 */
    double drain_timeout_seconds;            /* SIGTERM grace for in-flight calls; 30 */
    int intra_op_threads;                    /* --tensorflow_intra_op_parallelism; 0 = cores */
    int session_parallelism;                 /* --tensorflow_session_parallelism */
    const char *saved_model_tags;            /* --saved_model_tags, default "serve" */
    const char *grpc_channel_arguments;      /* --grpc_channel_arguments "k=v,k=v" or NULL */
    const char *ssl_config_file;             /* --ssl_config_file (TLS: issue #11) */
    const char *monitoring_config_file;      /* --monitoring_config_file */
    int enable_batching;                     /* --enable_batching */
    const char *batching_parameters_file;    /* --batching_parameters_file */
    int enable_per_model_batching_parameters; /* batching_params.pbtxt per version */
    int enable_model_warmup;                 /* default 1 */
    int num_request_iterations_for_warmup;   /* default 1 */
    int max_queued_requests_per_model;       /* 0 = default bound */
    /* hostile clients (issue #11, docs/security.md) */
    int enable_reload_config_rpc;            /* HandleReloadConfigRequest allowed at all */
    const char *admin_client_cn;             /* mTLS CNs allowed to call it (comma list) */
    const char *model_base_path_prefix;      /* base paths must resolve inside this */
    int max_num_models;                      /* models in one config; default 1000 */
    int allow_empty_model_config;            /* a re-read may drop every model */
    int max_connections;                     /* open gRPC connections; 0 = no limit */
    int idle_timeout_seconds;                /* close idle connections; 0 = never */
    int grpc_max_concurrent_streams;         /* per connection; default 128 */
    int grpc_keepalive_time_seconds;         /* server pings an idle connection; 7200 */
    int grpc_keepalive_timeout_seconds;      /* ... and closes it after; 20 */
    int max_connection_age_seconds;          /* GOAWAY after this long; 0 = never */
    int max_connection_age_grace_seconds;    /* then cut open calls after; 0 = never */
    int64_t grpc_memory_quota_bytes;         /* gRPC core's buffers; default 1 GiB */
    ms_log_level log_level;                  /* --log_level debug|info|warn|error */
    const char *request_log;                 /* --request_log off|errors|all (NULL = errors) */
    const char *log_format;                  /* --log_format text|json (NULL = text) */
    int single_model_ignored;                /* --model_name/--model_base_path next to a config file */
    int check_config;                        /* --check_config: validate and exit */
    int help;                                /* --help given */
    int version;                             /* --version given */
    const char *device;                      /* --device auto|cpu|cuda[:N]; NULL = auto */
    int cuda_graphs;                         /* --cuda_graphs; default 0 */
    const char *precision;                   /* --precision fp32|tf32|fp16; NULL = fp32 */
    double gpu_memory_fraction;              /* --per_process_gpu_memory_fraction; 0 = no cap */
    /* Flags given that are accepted without (full) effect: indices into the
     * flag table, each logged once by srv_flags_log_notes. */
    int noted[SRV_FLAGS_MAX_NOTED];
    int n_noted;
} srv_flags;

/* Fills *f with the defaults. */
void srv_flags_defaults(srv_flags *f);

/* Parses argv[first..argc-1] into *f (defaults first). MS_EINVAL with a
 * message naming the flag for an unknown flag, a missing or bad value, or a
 * positional argument; also when --model_config_file and --model_base_path
 * are both given. */
ms_status srv_flags_parse(int argc, char **argv, int first, srv_flags *f);

/* Logs one warning line for each flag given that has no effect (or only
 * part of its TF Serving effect) here, saying why. */
void srv_flags_log_notes(const srv_flags *f);

/* Number of flags in the table and the name of flag i (for tests and docs). */
int srv_flags_count(void);
const char *srv_flags_name(int i);

/* Writes the flag reference (for --help). */
void srv_flags_usage(FILE *out);

#endif /* SRV_FLAGS_H */
