/* srv_warmup.h - model warm-up before a version becomes AVAILABLE
 * (--enable_model_warmup, --num_request_iterations_for_warmup).
 *
 * With <export_dir>/assets.extra/tf_serving_warmup_requests (TF Serving's
 * format: a TFRecord file of PredictionLog; the length and data CRC32C of
 * every record are checked), each PredictLog's request is run `iterations`
 * times against the loaded model; classify, regress, multi-inference and
 * session-run logs are skipped with one log line (dcmserve answers those APIs
 * with UNIMPLEMENTED). A file that cannot be read, a bad record, more than
 * 1000 records (TF Serving's limit) or a request that fails makes the warm-up
 * fail, and the load with it.
 *
 * Without that file every signature whose inputs all have a known rank and a
 * numeric dtype runs `iterations` times on zeros of its inputs' shapes, each
 * unknown dim (-1) taken as 1; signatures with a DT_STRING input (DICOM) or an
 * input of unknown rank are skipped. A synthetic run that fails is logged and
 * does not fail the load (zeros are not a real input). */
#ifndef SRV_WARMUP_H
#define SRV_WARMUP_H

#include <stdint.h>

#include "ms_status.h"
#include "srv_batch.h"
#include "rt_model.h"

#define SRV_WARMUP_FILE        "assets.extra/tf_serving_warmup_requests"
#define SRV_WARMUP_MAX_RECORDS 1000

/* Warms model m loaded from dir; logs one line with the time taken. */
/* Deadline of one warm-up run (--model_warmup_run_timeout_seconds; 0 =
 * none): past it the run is cancelled and the version's load fails with
 * DEADLINE_EXCEEDED naming the flag. Process-wide. */
#define SRV_WARMUP_RUN_TIMEOUT_S 300.0
void srv_warmup_set_run_timeout(double seconds);

ms_status srv_warmup_run(rt_model *m, const char *dir, const char *name, int64_t version,
                         int iterations);

/* The device sizing at load (docs/gpu.md, Memory): when m's plans are placed
 * on a device backend with arenas (rt_device_arenas), runs every signature
 * once on zeros of its inputs' shapes (unknown dims 1; an unknown first dim
 * once per entry of batches[0..nbatches-1], NULL: 1) so that each plan lays
 * out and makes its device arena for those feed shapes before the version is
 * AVAILABLE, and the first request of such a shape runs in it. A signature
 * whose inputs cannot be made (a DT_STRING input such as DICOM files, an
 * input of unknown rank) is skipped with one log line: its first request
 * sizes it. A run that fails is logged and does not fail the load. Runs
 * whether or not warm-up is on; does nothing (returns 0) for a model not on
 * such a device, so the CPU path is unchanged. Returns the runs made. */
int srv_warmup_device_size(rt_model *m, const char *name, int64_t version, const int64_t *batches,
                           int nbatches);
/* The batch sizes the batcher with parameters bp (NULL: batching off) can
 * form and the device sizing should size, into out[0..max-1]: its
 * allowed_batch_sizes (batches are padded to one of them), in order, at most
 * max; without allowed_batch_sizes (any size up to max_batch_size) or
 * without batching only 1. Returns how many. */
int srv_warmup_device_batches(const srv_batch_params *bp, int64_t *out, int max);

#endif /* SRV_WARMUP_H */
