/* fuzz_handlers.c - libFuzzer target: the Predict and ModelInfer handlers
 * after unpack, against a small real model (tests/data half_plus_two, or
 * $DCM_FUZZ_MODEL). The first byte picks the service; the rest is the request
 * message, which goes through what the server does with it: the request
 * pre-scan (ms_wire_check_request), model_spec merging, protobuf-c unpack (a
 * Predict into the server's bump arena, srv_pbarena, as srv_tfs_predict), the
 * tensor conversion of every input (TensorProto with rt_tensor_from_request_proto,
 * large bytes fields handed over by the arena uncopied,
 * KServe with srv_kserve_input) under a 64 MiB request budget, then signature
 * validation and the run (sig_run). A crash, leak, sanitizer report or an
 * allocation past the budget is a finding.
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_handlers CORPUS. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "kserve.pb-c.h"
#include "ms_budget.h"
#include "ms_wire.h"
#include "rt_model.h"
#include "rt_tensor_proto.h"
#include "sig_signature.h"
#include "srv_app.h"
#include "srv_kserve.h"
#include "srv_pbarena.h"
#include "tf_serving.pb-c.h"

#define BUDGET ((uint64_t)64 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rt_model *g_model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char dir[4096];
    const char *env = getenv("DCM_FUZZ_MODEL");
    if (env)
        snprintf(dir, sizeof dir, "%s", env);
    else
        snprintf(dir, sizeof dir, "%s/tests/data/savedmodels/saved_model_half_plus_two_cpu/00000123",
                 getenv("DCM_SRC") ? getenv("DCM_SRC") : ".");
    kn_backend *be = kn_cpu_backend_new(1);
    const char *tags[] = {"serve"};
    if (be == NULL || rt_model_load(dir, tags, 1, be, &g_model) != MS_OK) {
        fprintf(stderr, "fuzz_handlers: cannot load %s: %s (run from the repository root or set "
                        "DCM_FUZZ_MODEL)\n", dir, ms_errmsg());
        exit(1);
    }
    return 0;
}

static void run(const char *sig_key, sig_input *in, int nin, const char *const *filter,
                int nfilter, ms_budget *budget) {
    sig_output *outs = NULL;
    int nouts = 0;
    rt_run_opts opts = {.budget = budget};
    if (sig_run(g_model, sig_key, in, nin, filter, nfilter, &opts, &outs, &nouts) == MS_OK)
        sig_outputs_free(outs, nouts);
}

static void predict(const uint8_t *req, size_t n) {
    /* As srv_tfs_predict: model_spec merged, pre-scanned again, unpacked
     * into a bump arena on a small stack buffer (heap chunks past it). */
    max_align_t arena_buf[2048 / sizeof(max_align_t)];
    srv_pbarena arena;
    srv_pbarena_init(&arena, arena_buf, sizeof arena_buf);
    Tensorflow__Serving__PredictRequest *rq =
        srv_tfs_unpack_in(&tensorflow__serving__predict_request__descriptor, req, n, &arena.alloc);
    if (rq == NULL) {
        srv_pbarena_release(&arena);
        return;
    }
    ms_budget budget;
    ms_budget_init(&budget, BUDGET);
    sig_input *in = calloc(rq->n_inputs + 1, sizeof(*in));
    int nin = 0;
    int ok = in != NULL;
    for (size_t i = 0; ok && i < rq->n_inputs; i++) {
        rt_tensor *t = NULL;
        /* As the server: large bytes fields pass to the tensor uncopied. */
        const rt_strkeep keep = {srv_pbarena_keep, &arena};
        if (rq->inputs[i]->value == NULL ||
            rt_tensor_from_request_proto(rq->inputs[i]->value, &budget, &keep, &t) != MS_OK)
            ok = 0;
        else {
            in[nin].key = rq->inputs[i]->key;
            in[nin++].tensor = t;
        }
    }
    if (ok) {
        const char *key = rq->model_spec && rq->model_spec->signature_name &&
                                  rq->model_spec->signature_name[0]
                              ? rq->model_spec->signature_name
                              : SIG_DEFAULT_KEY;
        run(key, in, nin, (const char *const *)rq->output_filter, (int)rq->n_output_filter,
            &budget);
    }
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i].tensor);
    free(in);
    srv_pbarena_release(&arena); /* frees rq */
}

static void infer(const uint8_t *req, size_t n) {
    Inference__ModelInferRequest *rq = inference__model_infer_request__unpack(NULL, n, req);
    if (rq == NULL) return;
    ms_budget budget;
    ms_budget_init(&budget, BUDGET);
    int use_raw = rq->n_raw_input_contents > 0;
    sig_input *in = calloc(rq->n_inputs + 1, sizeof(*in));
    const char **filter = calloc(rq->n_outputs + 1, sizeof(*filter));
    int nin = 0;
    int ok = in != NULL && filter != NULL &&
             (!use_raw || rq->n_raw_input_contents == rq->n_inputs);
    for (size_t i = 0; ok && i < rq->n_inputs; i++) {
        rt_tensor *t = NULL;
        if ((use_raw && rq->inputs[i]->contents != NULL) ||
            srv_kserve_input(rq->inputs[i], use_raw ? &rq->raw_input_contents[i] : NULL, &budget,
                             &t) != MS_OK)
            ok = 0;
        else {
            in[nin].key = rq->inputs[i]->name;
            in[nin++].tensor = t;
        }
    }
    if (ok) {
        for (size_t i = 0; i < rq->n_outputs; i++)
            filter[i] = rq->outputs[i]->name;
        run(SIG_DEFAULT_KEY, in, nin, filter, (int)rq->n_outputs, &budget);
    }
    for (int i = 0; i < nin; i++)
        rt_tensor_unref(in[i].tensor);
    free(in);
    free(filter);
    inference__model_infer_request__free_unpacked(rq, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *req = data + 1;
    size_t n = size - 1;
    if (ms_wire_check_request(req, n) != MS_OK) return 0;
    if (data[0] & 1)
        infer(req, n);
    else
        predict(req, n);
    return 0;
}
