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
#include "rt_model.h"

#define SRV_WARMUP_FILE        "assets.extra/tf_serving_warmup_requests"
#define SRV_WARMUP_MAX_RECORDS 1000

/* Warms model m loaded from dir; logs one line with the time taken. */
ms_status srv_warmup_run(rt_model *m, const char *dir, const char *name, int64_t version,
                         int iterations);

#endif /* SRV_WARMUP_H */
