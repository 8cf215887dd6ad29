/* srv_runtime_stub.c - TEMPORARY weak stand-ins for the signature functions
 * the server calls (sig_signature.h), so that
 * the daemon links and its gRPC, health, config and manager parts can be
 * tested before signatures/sig_signature.c lands on main. Every Predict and
 * ModelInfer fails with MS_ENOTSUP. Weak symbols lose to the real ones
 * only when the real object file is linked for another reason, so DELETE
 * THIS FILE when main's sig_signature.c is merged. */
#include <stdlib.h>
#include <string.h>

#include "sig_signature.h"

#define WEAK __attribute__((weak))

#define STUB_MSG "signature runner not linked into this build (server/srv_runtime_stub.c)"

WEAK ms_status sig_find(const Tensorflow__MetaGraphDef *mg, const char *key,
                        const Tensorflow__SignatureDef **out) {
    (void)mg;
    (void)key;
    *out = NULL;
    return ms_errf(MS_ENOTSUP, STUB_MSG);
}

WEAK ms_status sig_run(rt_model *m, const char *sig_key, const sig_input *in, int nin,
                       const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                       sig_output **outs, int *nouts) {
    (void)m;
    (void)sig_key;
    (void)in;
    (void)nin;
    (void)output_filter;
    (void)nfilter;
    (void)opts;
    *outs = NULL;
    *nouts = 0;
    return ms_errf(MS_ENOTSUP, STUB_MSG);
}

WEAK void sig_outputs_free(sig_output *outs, int n) {
    (void)n;
    free(outs);
}
