/* srv_warmup.c - replay of tf_serving_warmup_requests, synthetic warm-up. */
#include "srv_warmup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ms_file.h"
#include "ms_log.h"
#include "ms_watch.h"
#include "ms_wire.h"
#include "rt_crc32c.h"
#include "rt_exec.h"
#include "rt_tensor_proto.h"
#include "sig_signature.h"
#include "srv_metrics.h"
#include "tf_serving_log.pb-c.h"

#define MAX_RECORD_BYTES ((uint64_t)1 << 30)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static _Atomic double g_run_timeout_s = SRV_WARMUP_RUN_TIMEOUT_S;

void srv_warmup_set_run_timeout(double seconds) {
    atomic_store(&g_run_timeout_s, seconds);
}

/* One warm-up run with a deadline (ms_watch.h): a graph that never ends
 * (a While whose condition stays true) fails the warm-up instead of keeping
 * the version LOADING forever; the drain at SIGTERM cancels it too. */
static ms_status warm_run(rt_model *m, const char *sig, const sig_input *in, int nin,
                          const char *const *filter, int nfilter, sig_output **outs, int *nouts) {
    ms_watch w;
    double t = atomic_load(&g_run_timeout_s);
    ms_watch_start(&w, t * 1e3, -1);
    rt_run_opts opts = {.cancelled = &w.cancelled};
    ms_status st = sig_run(m, sig, in, nin, filter, nfilter, &opts, outs, nouts);
    ms_watch_stop(&w);
    if (st == MS_ECANCELED)
        st = ms_errf(MS_ETIMEDOUT, "a warm-up run took longer than %.0f s "
                                   "(--model_warmup_run_timeout_seconds) or the server is "
                                   "shutting down; stopped", t);
    return st;
}

/* Runs one PredictRequest `iterations` times. */
static ms_status run_predict(rt_model *m, const Tensorflow__Serving__PredictRequest *rq,
                             int iterations) {
    sig_input *in = calloc(rq->n_inputs > 0 ? rq->n_inputs : 1, sizeof(*in));
    int nin = 0;
    ms_status st = MS_OK;
    if (in == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    const char *sig = rq->model_spec && rq->model_spec->signature_name &&
                              rq->model_spec->signature_name[0]
                          ? rq->model_spec->signature_name
                          : SIG_DEFAULT_KEY;
    for (size_t i = 0; i < rq->n_inputs && st == MS_OK; i++) {
        rt_tensor *t = NULL;
        if (rq->inputs[i]->value == NULL) {
            st = ms_errf(MS_EINVAL, "input \"%s\": missing TensorProto", rq->inputs[i]->key);
        } else if ((st = rt_tensor_from_proto(rq->inputs[i]->value, &t)) != MS_OK) {
            ms_errwrap(st, "input \"%s\"", rq->inputs[i]->key);
        } else {
            in[nin].key = rq->inputs[i]->key;
            in[nin++].tensor = t;
        }
    }
    for (int it = 0; it < iterations && st == MS_OK; it++) {
        sig_output *outs = NULL;
        int nouts = 0;
        st = warm_run(m, sig, in, nin, (const char *const *)rq->output_filter,
                      (int)rq->n_output_filter, &outs, &nouts);
        sig_outputs_free(outs, nouts);
    }
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i].tensor);
    free(in);
    return st;
}

/* Replays the warm-up file; *n counts the requests replayed. */
static ms_status replay_file(rt_model *m, const ms_dir *root, int iterations, int *n,
                             int *skipped) {
    /* Beneath the version folder, a regular file only (ms_file.h): a link
     * leaving the folder, a FIFO or a device is refused, never read. */
    int fd;
    ms_status ost = ms_file_open(root, SRV_WARMUP_FILE, &fd);
    if (ost != MS_OK) return ost;
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    ms_status st = MS_OK;
    uint8_t *buf = NULL;
    for (int rec = 0;; rec++) {
        uint8_t hdr[12], foot[4];
        size_t got = fread(hdr, 1, sizeof hdr, f);
        if (got == 0 && feof(f)) break;
        if (rec >= SRV_WARMUP_MAX_RECORDS) {
            st = ms_errf(MS_EINVAL, "more than %d warm-up records", SRV_WARMUP_MAX_RECORDS);
            break;
        }
        if (got != sizeof hdr) {
            st = ms_errf(MS_EINVAL, "record %d: truncated header", rec);
            break;
        }
        uint64_t len = le64(hdr);
        if (rt_crc32c_unmask(le32(hdr + 8)) != rt_crc32c(hdr, 8)) {
            st = ms_errf(MS_EINVAL, "record %d: length CRC mismatch (not a TFRecord file?)", rec);
            break;
        }
        if (len > MAX_RECORD_BYTES) {
            st = ms_errf(MS_EINVAL, "record %d: %" PRIu64 " bytes is too large", rec, len);
            break;
        }
        free(buf);
        buf = malloc(len > 0 ? (size_t)len : 1);
        if (buf == NULL) {
            st = ms_errf(MS_ENOMEM, "record %d: out of memory", rec);
            break;
        }
        if (fread(buf, 1, (size_t)len, f) != len || fread(foot, 1, 4, f) != 4) {
            st = ms_errf(MS_EINVAL, "record %d: truncated", rec);
            break;
        }
        if (rt_crc32c_unmask(le32(foot)) != rt_crc32c(buf, (size_t)len)) {
            st = ms_errf(MS_EINVAL, "record %d: data CRC mismatch", rec);
            break;
        }
        if ((st = ms_wire_check(buf, (size_t)len, MS_WIRE_MAX_DEPTH)) != MS_OK) {
            ms_errwrap(st, "record %d", rec);
            break;
        }
        Tensorflow__Serving__PredictionLog *pl =
            tensorflow__serving__prediction_log__unpack(NULL, (size_t)len, buf);
        if (pl == NULL) {
            st = ms_errf(MS_EINVAL, "record %d: not a PredictionLog", rec);
            break;
        }
        if (pl->log_type_case == TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG) {
            if (pl->predict_log->request == NULL) {
                st = ms_errf(MS_EINVAL, "record %d: PredictLog without a request", rec);
            } else if ((st = run_predict(m, pl->predict_log->request, iterations)) != MS_OK) {
                ms_errwrap(st, "record %d (Predict)", rec);
            } else {
                (*n)++;
            }
        } else if (pl->log_type_case == TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE__NOT_SET) {
            st = ms_errf(MS_EINVAL, "record %d: PredictionLog has no log", rec);
        } else {
            const char *kind =
                pl->log_type_case == TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_CLASSIFY_LOG
                    ? "classify_log"
                : pl->log_type_case == TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_REGRESS_LOG
                    ? "regress_log"
                : pl->log_type_case ==
                        TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_MULTI_INFERENCE_LOG
                    ? "multi_inference_log"
                    : "session_run_log";
            MS_INFO("warm-up record %d: %s skipped (only predict_log is replayed)", rec, kind);
            (*skipped)++;
        }
        tensorflow__serving__prediction_log__free_unpacked(pl, NULL);
        if (st != MS_OK) break;
    }
    free(buf);
    fclose(f);
    return st;
}

/* Zeros for the inputs of signature sd in in[0..*nin-1] (new references),
 * each unknown dim taken as 1, except an unknown first dim, taken as
 * `batch` when batch > 0. 0 when the signature has an input that cannot be
 * made (DT_STRING, unknown rank, a dtype without a size, more than 64
 * inputs); *why then says which, and nothing is left in in[]. */
static int synth_inputs(const Tensorflow__SignatureDef *sd, int64_t batch, sig_input *in, int *nin,
                        const char **why) {
    *nin = 0;
    *why = NULL;
    if (sd == NULL || sd->n_inputs == 0) {
        *why = "no inputs";
        return 0;
    }
    for (size_t i = 0; i < sd->n_inputs; i++) {
        const Tensorflow__TensorInfo *ti = sd->inputs[i]->value;
        if (ti != NULL && ti->dtype == TENSORFLOW__DATA_TYPE__DT_STRING) {
            *why = "a DT_STRING input";
        } else if (ti == NULL || ti->tensor_shape == NULL || ti->tensor_shape->unknown_rank ||
                   ti->tensor_shape->n_dim > RT_MAX_RANK) {
            *why = "an input of unknown rank";
        } else if (ti->dtype <= 0 || (int)ti->dtype >= (int)RT_DT_COUNT ||
                   rt_dtype_size((rt_dtype)ti->dtype) == 0) {
            *why = "an input dtype without a fixed size";
        }
        rt_tensor *t = NULL;
        if (*why == NULL) {
            int64_t dims[RT_MAX_RANK];
            for (size_t d = 0; d < ti->tensor_shape->n_dim; d++) {
                int64_t v = ti->tensor_shape->dim[d]->size;
                dims[d] = v >= 0 ? v : d == 0 && batch > 0 ? batch : 1;
            }
            rt_shape sh = rt_shape_make((int)ti->tensor_shape->n_dim, dims);
            if (rt_tensor_new((rt_dtype)ti->dtype, &sh, &t) != MS_OK) *why = "out of memory";
        }
        if (*why != NULL) {
            for (int j = 0; j < *nin; j++)
                rt_tensor_unref(in[j].tensor);
            *nin = 0;
            return 0;
        }
        in[*nin].key = sd->inputs[i]->key;
        in[(*nin)++].tensor = t;
    }
    return 1;
}

/* Zeros for every signature that allows them; *n counts the signatures run. */
static void synthetic(rt_model *m, const char *name, int iterations, int *n) {
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    for (size_t s = 0; mg && s < mg->n_signature_def; s++) {
        const Tensorflow__SignatureDef *sd = mg->signature_def[s]->value;
        const char *key = mg->signature_def[s]->key;
        sig_input *in = sd ? calloc(sd->n_inputs + 1, sizeof(*in)) : NULL; /* one per input */
        int nin = 0;
        const char *why = NULL;
        int ok = in != NULL && synth_inputs(sd, 0, in, &nin, &why);
        for (int it = 0; ok && it < iterations; it++) {
            sig_output *outs = NULL;
            int nouts = 0;
            ms_status st = warm_run(m, key, in, nin, NULL, 0, &outs, &nouts);
            sig_outputs_free(outs, nouts);
            if (st != MS_OK) {
                MS_INFO("model %s: synthetic warm-up of signature %s stopped: %s", name, key,
                        ms_errmsg());
                ok = 0;
                break;
            }
            if (it == 0) (*n)++;
        }
        for (int i = 0; i < nin; i++)
            rt_tensor_unref(in[i].tensor);
        free(in);
    }
}

int srv_warmup_device_batches(const srv_batch_params *bp, int64_t *out, int max) {
    int n = 0;
    if (bp == NULL || bp->n_allowed <= 0) {
        out[n++] = 1;
        return n;
    }
    for (int i = 0; i < bp->n_allowed && n < max; i++)
        out[n++] = bp->allowed_batch_sizes[i];
    return n;
}

int srv_warmup_device_size(rt_model *m, const char *name, int64_t version, const int64_t *batches,
                           int nbatches) {
    rt_graph *g = rt_model_graph(m);
    if (g == NULL || !rt_device_arenas(g->device)) return 0;
    static const int64_t one = 1;
    if (batches == NULL || nbatches <= 0) {
        batches = &one;
        nbatches = 1;
    }
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    double t0 = now_ms();
    int runs = 0, failed = 0, skipped = 0;
    for (size_t s = 0; mg && s < mg->n_signature_def; s++) {
        const Tensorflow__SignatureDef *sd = mg->signature_def[s]->value;
        const char *key = mg->signature_def[s]->key;
        sig_input *in = sd ? calloc(sd->n_inputs + 1, sizeof(*in)) : NULL; /* one per input */
        for (int b = 0; in != NULL && b < nbatches; b++) {
            int nin = 0;
            const char *why = NULL;
            if (!synth_inputs(sd, batches[b], in, &nin, &why)) {
                MS_INFO("model %s version %" PRId64 ": signature %s has %s: its device arena is "
                        "sized by its first request",
                        name, version, key, why);
                skipped++;
                break;
            }
            sig_output *outs = NULL;
            int nouts = 0;
            ms_status st = warm_run(m, key, in, nin, NULL, 0, &outs, &nouts);
            sig_outputs_free(outs, nouts);
            for (int i = 0; i < nin; i++)
                rt_tensor_unref(in[i].tensor);
            if (st != MS_OK) {
                MS_INFO("model %s version %" PRId64 ": the device sizing run of signature %s "
                        "(batch %" PRId64 ") failed, its first request sizes it: %s",
                        name, version, key, batches[b], ms_errmsg());
                failed++;
                continue;
            }
            runs++;
            /* without an unknown first dim the batch sizes give one shape */
            int batched = 0;
            for (size_t i = 0; i < sd->n_inputs; i++) {
                const Tensorflow__TensorShapeProto *ts = sd->inputs[i]->value->tensor_shape;
                if (ts->n_dim > 0 && ts->dim[0]->size < 0) batched = 1;
            }
            if (!batched) break;
        }
        free(in);
    }
    MS_INFO("device memory of model %s version %" PRId64 ": %d sizing run(s) at load on "
            "synthetic inputs, %d failed, %d signature(s) left to their first request (%.0f ms)",
            name, version, runs, failed, skipped, now_ms() - t0);
    return runs;
}

ms_status srv_warmup_run(rt_model *m, const char *dir, const char *name, int64_t version,
                         int iterations) {
    double t0 = now_ms();
    int n = 0, skipped = 0;
    if (iterations < 1) iterations = 1;
    ms_dir root;
    ms_status dst = ms_dir_open(dir, &root);
    if (dst != MS_OK) return dst;
    /* present, even as a link outside or a FIFO: replay_file refuses those */
    int present = ms_file_find(&root, SRV_WARMUP_FILE) != MS_ENOTFOUND;
    ms_err_clear();
    if (present) {
        ms_status st = replay_file(m, &root, iterations, &n, &skipped);
        ms_dir_close(&root);
        if (st != MS_OK) return ms_errwrap(st, "warm-up file %s", SRV_WARMUP_FILE);
        srv_metrics_warmup(name, version, (now_ms() - t0) / 1e3);
        MS_INFO("warm-up of model %s version %" PRId64 ": %d request(s) x %d from %s, %d skipped "
                "(%.0f ms)",
                name, version, n, iterations, SRV_WARMUP_FILE, skipped, now_ms() - t0);
        return MS_OK;
    }
    ms_dir_close(&root);
    synthetic(m, name, iterations, &n);
    srv_metrics_warmup(name, version, (now_ms() - t0) / 1e3);
    MS_INFO("warm-up of model %s version %" PRId64 ": %d signature(s) x %d on synthetic inputs "
            "(%.0f ms)",
            name, version, n, iterations, now_ms() - t0);
    return MS_OK;
}
