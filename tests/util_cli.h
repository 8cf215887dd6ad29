/* util_cli.h - helpers shared by the signature / .npy / CLI Check tests:
 * small tensor builders and a way to run Debian's Python (numpy) as an
 * independent reference. */
#ifndef UTIL_CLI_H
#define UTIL_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "rt_tensor.h"
#include "tf_savedmodel.pb-c.h"

/* "$DCM_SRC/tests/data/savedmodels/<rel>" into buf (the TensorFlow Serving
 * test models committed to the repo); returns buf. */
char *util_cli_model_dir(const char *rel, char *buf, size_t n);

/* A fresh empty directory under $TMPDIR (or /tmp) into buf; ck_asserts on
 * failure. util_cli_rmtree removes it again. */
char *util_cli_tmpdir(char *buf, size_t n);
void util_cli_rmtree(const char *dir);

/* New tensor of dtype dt and the given shape, its bytes copied from vals
 * (NULL: zero-filled). ck_asserts on failure. The caller owns the reference. */
rt_tensor *util_cli_tensor(rt_dtype dt, int rank, const int64_t *dims, const void *vals);

/* Writes `script` to <dir>/script.py and runs `/usr/bin/python3 script.py`
 * with <dir> as working directory. Returns the exit status (-1 when it could
 * not be run). */
int util_cli_python(const char *dir, const char *script);

/* Reads a whole file into a malloc'ed, NUL-terminated buffer (*n = size
 * without the NUL). NULL when it cannot be read. */
char *util_cli_read_file(const char *path, size_t *n);

/* ---- hand-made SavedModels (one MetaGraphDef tagged "serve") ----
 * Everything hangs off an arena freed by util_sm_free. Capacities are fixed
 * (64 nodes, 16 attrs per node, 16 signatures, 16 inputs/outputs/defaults per
 * signature); exceeding them fails the test. */
typedef struct util_sm util_sm;

util_sm *util_sm_new(void);
void util_sm_free(util_sm *sm);
/* The MetaGraphDef (borrowed). */
Tensorflow__MetaGraphDef *util_sm_meta_graph(util_sm *sm);
/* Adds a node; inputs is NULL-terminated (or NULL). Returns it for attrs. */
Tensorflow__NodeDef *util_sm_node(util_sm *sm, const char *name, const char *op,
                                  const char *const *inputs);
void util_sm_attr_type(util_sm *sm, Tensorflow__NodeDef *n, const char *key, rt_dtype dt);
/* rank -1: unknown rank. */
void util_sm_attr_shape(util_sm *sm, Tensorflow__NodeDef *n, const char *key, int rank,
                        const int64_t *dims);
/* A float tensor attr (tensor_content). */
void util_sm_attr_f32(util_sm *sm, Tensorflow__NodeDef *n, const char *key, int rank,
                      const int64_t *dims, const float *vals);
/* Adds a SignatureDef. */
Tensorflow__SignatureDef *util_sm_sig(util_sm *sm, const char *key, const char *method);
/* Adds an input/output TensorInfo. rank -1: unknown rank; rank -2: no
 * tensor_shape at all. dtype is the raw proto value (101 = DT_FLOAT_REF). */
void util_sm_sig_input(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key,
                       const char *tensor, int dtype, int rank, const int64_t *dims);
void util_sm_sig_output(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key,
                        const char *tensor, int dtype, int rank, const int64_t *dims);
/* Adds a float default to the SignatureDef's defaults map (float_val). */
void util_sm_sig_default_f32(util_sm *sm, Tensorflow__SignatureDef *sd, const char *key, int rank,
                             const int64_t *dims, const float *vals);
/* Writes <dir>/saved_model.pb. */
void util_sm_write(util_sm *sm, const char *dir);

#endif /* UTIL_CLI_H */
