/* srv_batch.h - dynamic batching (--enable_batching), TF Serving's
 * BatchingParameters.
 *
 * srv_batch_run stands in for sig_run. With batching on, concurrent calls for
 * one model version and signature whose inputs agree in keys, dtypes and
 * every dim but the first (and with the same output filter) are merged along
 * dim 0: the first caller of a batch waits up to batch_timeout_micros (or
 * until max_batch_size rows), then until fewer than num_batch_threads
 * batches of this batcher run (the batch keeps filling meanwhile), merges,
 * pads up to the next allowed_batch_sizes entry with copies of the last row,
 * runs once and gives every caller its own rows of each output (outputs whose
 * dim 0 is not the batch's rows make the batch run each caller alone).
 * DT_STRING inputs (DICOM files) merge by reference, no byte copied. A batch
 * whose run fails is re-run caller by caller, so each gets its own error.
 * Calls that cannot batch (rank 0 inputs, more rows than max_batch_size,
 * differing dim-0 sizes) run alone at once. */
#ifndef SRV_BATCH_H
#define SRV_BATCH_H

#include <stdint.h>

#include "ms_status.h"
#include "rt_model.h"
#include "sig_signature.h"

#define SRV_BATCH_MAX_ALLOWED 32

typedef struct srv_batch_params {
    int64_t max_batch_size;       /* TF Serving default 1000 */
    int64_t batch_timeout_micros; /* default 0 */
    int64_t max_enqueued_batches; /* default 10: bounds the request queue */
    int64_t num_batch_threads;    /* default: cores */
    int64_t allowed_batch_sizes[SRV_BATCH_MAX_ALLOWED];
    int n_allowed;
    int pad_variable_length_inputs; /* accepted; inputs must agree in shape */
} srv_batch_params;

typedef struct srv_batcher srv_batcher; /* also named in srv_app.h */

/* TF Serving's defaults. */
void srv_batch_params_defaults(srv_batch_params *p);
/* Reads a BatchingParameters text proto (`max_batch_size { value: 8 }` or
 * `max_batch_size: 8`, `allowed_batch_sizes: 2` repeated, # comments) over
 * the defaults. MS_ENOTFOUND when unreadable, MS_EINVAL naming the field
 * (unknown field, bad value, allowed_batch_sizes not increasing or its last
 * entry not max_batch_size, as TF Serving requires). */
ms_status srv_batch_params_read(const char *file, srv_batch_params *p);

/* A batcher with these parameters; per_model: read batching_params.pbtxt in
 * each version directory (else the global ones). NULL on OOM. */
srv_batcher *srv_batcher_new(const srv_batch_params *p, int per_model);
void srv_batcher_free(srv_batcher *b);

/* sig_run through the batcher (b may be NULL: sig_run). model_name and
 * version label the dcmserve_batch_size metric. */
ms_status srv_batch_run(srv_batcher *b, rt_model *m, const char *model_name, int64_t version,
                        const char *sig_key, const sig_input *in, int nin,
                        const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                        sig_output **outs, int *nouts);

#endif /* SRV_BATCH_H */
