/* sig_signature.h - the SignatureDef as the request contract.
 *
 * Lookup (empty key -> "serving_default"), request validation before anything
 * runs (unknown/missing keys, dtype, rank and dims against -1 / unknown-rank,
 * consistent batch size), defaults for omitted inputs, and mapping signature
 * keys to graph tensor names and back. Each failure is one message naming the
 * signature, the key, what was expected and what came.
 */
#ifndef SIG_SIGNATURE_H
#define SIG_SIGNATURE_H

#include "ms_status.h"
#include "rt_model.h"
#include "rt_tensor.h"
#include "tf_savedmodel.pb-c.h"

#define SIG_DEFAULT_KEY "serving_default"
#define SIG_INIT_OP_KEY "__saved_model_init_op"

/* Finds a signature; key NULL or "" means serving_default. MS_EPRECOND with
 * `Serving signature key "<k>" not found.` when absent. *out is borrowed. */
ms_status sig_find(const Tensorflow__MetaGraphDef *mg, const char *key,
                   const Tensorflow__SignatureDef **out);

/* Map lookups in a SignatureDef (NULL when absent). */
const Tensorflow__TensorInfo *sig_input_info(const Tensorflow__SignatureDef *sd, const char *key);
const Tensorflow__TensorInfo *sig_output_info(const Tensorflow__SignatureDef *sd, const char *key);

/* Trailing dimensions the TensorInfo gives beyond rank `rank`, when every one
 * of them is statically 1 (0 otherwise, or for NULL / unknown rank): the unit
 * dimensions a client may leave out ([1.0, 2.0] for x of shape (-1, 1)), as
 * REST and `dcmserve run` accept (docs/serving.md, "Left-out unit dimensions"). */
int sig_unit_tail(const Tensorflow__TensorInfo *ti, int rank);

typedef struct sig_input {
    const char *key;   /* signature input alias */
    rt_tensor *tensor; /* borrowed */
} sig_input;

typedef struct sig_output {
    char *key;         /* owned */
    rt_tensor *tensor; /* owned reference */
} sig_output;

/* Checks inputs against the signature without running anything: unknown,
 * duplicate or missing keys (a missing key is fine when the SignatureDef has a
 * default for it), dtype (_REF dtypes count as their base type), rank and
 * dimensions against the signature's shape (-1 matches any size, an absent or
 * unknown-rank shape matches anything), and one batch size (dim 0) across the
 * inputs whose signature dim 0 is -1. MS_EINVAL with one message naming the
 * signature (sig_key; NULL/"" = serving_default), the key, what was expected
 * and what came; TF Serving's texts are kept as they are inside it. */
ms_status sig_validate(const char *sig_key, const Tensorflow__SignatureDef *sd, const sig_input *in,
                       int nin);

/* Writes a TensorInfo's shape the way saved_model_cli shows it: "(-1, 1)",
 * "(3)", "()" (no shape or a scalar), "unknown_rank". Returns buf. */
char *sig_shape_str(const Tensorflow__TensorShapeProto *p, char *buf, size_t n);

/* The TensorFlow enum name of a DataType value, _REF types included
 * ("DT_FLOAT", "DT_FLOAT_REF"); "DT_INVALID" for values out of range. */
const char *sig_dtype_name(int v);

/* Validates, fills defaults, runs the model and returns the outputs named by
 * output_filter (all outputs, sorted by key, when nfilter == 0; otherwise in
 * filter order). *outs is a malloc'ed array of *nouts entries, freed with
 * sig_outputs_free. Errors: MS_EPRECOND for an unknown signature key or
 * __saved_model_init_op; MS_EINVAL for bad inputs (see sig_validate), an
 * unknown output alias (`output tensor alias not found in signature: <a>`)
 * or a duplicate one; MS_ENOTSUP for sparse/composite TensorInfos; whatever
 * rt_model_run returns. Inputs are never cast, padded or zero-filled. */
ms_status sig_run(rt_model *m, const char *sig_key, const sig_input *in, int nin,
                  const char *const *output_filter, int nfilter, const rt_run_opts *opts,
                  sig_output **outs, int *nouts);
void sig_outputs_free(sig_output *outs, int n);

#endif /* SIG_SIGNATURE_H */
