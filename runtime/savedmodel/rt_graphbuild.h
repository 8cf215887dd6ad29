/* rt_graphbuild.h - build TensorFlow graphs in memory and write SavedModels.
 *
 * An rt_gb holds one GraphDef, the SignatureDefs and collections of one
 * MetaGraphDef (tags {serve}), and the model's variables. Every protobuf-c
 * structure it hands out lives in the builder's arena and is freed once, by
 * rt_gb_free; callers never free any of it (the pointers are borrowed and
 * valid until rt_gb_free). Strings and tensors passed in are copied.
 *
 * Errors are sticky, so a graph can be built without checking every call:
 * after the first failure (duplicate node name, bad argument, out of memory)
 * the builder records the error, functions returning pointers return NULL,
 * and functions given a NULL node do nothing. rt_gb_status() reports the first
 * error; rt_gb_meta_graph, rt_gb_pack_saved_model and rt_savedmodel_write
 * return it too.
 *
 *   rt_gb *g;  rt_gb_new(&g);
 *   Tensorflow__NodeDef *x = rt_gb_placeholder(g, "x", RT_DT_FLOAT, &shape);
 *   Tensorflow__NodeDef *w = rt_gb_variable(g, "W", w_value);   // returns "W/read"
 *   Tensorflow__NodeDef *y = rt_gb_matmul(g, "y", x->name, w->name, 0, 0, RT_DT_FLOAT);
 *   Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
 *   rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &shape);
 *   rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &yshape);
 *   ms_status st = rt_savedmodel_write(dir, g);
 *   rt_gb_free(g);
 *
 * Values are what TensorFlow itself writes: attrs named and typed as in TF's
 * op registry, Const values as TensorProto (tensor_content for numbers,
 * string_val for strings), variables in TF1 style (VariableV2 read through an
 * Identity "<name>/read", restored by a SaverDef V2 graph under "save/").
 */
#ifndef RT_GRAPHBUILD_H
#define RT_GRAPHBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"
#include "tf_savedmodel.pb-c.h"

#define RT_GB_PREDICT "tensorflow/serving/predict"
#define RT_GB_CLASSIFY "tensorflow/serving/classify"
#define RT_GB_REGRESS "tensorflow/serving/regress"
/* GraphDef.versions.producer written (the TF 1.14 value). */
#define RT_GB_PRODUCER 27

typedef struct rt_gb rt_gb;

/* ---- builder, arena, errors ---- */

/* New empty builder. Free with rt_gb_free. */
ms_status rt_gb_new(rt_gb **out);
/* Frees the builder, its arena (every proto it handed out) and its
 * references on variable values. NULL is fine. */
void rt_gb_free(rt_gb *g);
/* MS_OK, or the first error (its message is set again for ms_errmsg()). */
ms_status rt_gb_status(const rt_gb *g);
/* Records an error from outside (e.g. an importer's own check); the first
 * one wins. Returns code. */
ms_status rt_gb_fail(rt_gb *g, ms_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Zeroed arena memory (16-byte aligned); NULL after an error. */
void *rt_gb_alloc(rt_gb *g, size_t n);
char *rt_gb_strdup(rt_gb *g, const char *s);
/* printf into the arena. */
char *rt_gb_strf(rt_gb *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- nodes ---- */

/* A name not used yet by any node: `base` itself if free, else "base_1",
 * "base_2", ... (TensorFlow's rule). Arena string. */
const char *rt_gb_unique_name(rt_gb *g, const char *base);
/* Appends a node. name NULL = rt_gb_unique_name(op). A name already in use is
 * an error (MS_EINVAL). */
Tensorflow__NodeDef *rt_gb_node(rt_gb *g, const char *op, const char *name);
/* The node called `name`, or NULL. */
Tensorflow__NodeDef *rt_gb_find(const rt_gb *g, const char *name);
/* Appends an input: "node", "node:1" or "^node" (control). */
void rt_gb_input(rt_gb *g, Tensorflow__NodeDef *n, const char *input);
void rt_gb_control_input(rt_gb *g, Tensorflow__NodeDef *n, const char *node_name);
void rt_gb_device(rt_gb *g, Tensorflow__NodeDef *n, const char *device);

/* ---- attributes (a key set twice keeps the last value) ---- */

/* A fresh AttrValue stored under key, for kinds the helpers below lack. */
Tensorflow__AttrValue *rt_gb_attr(rt_gb *g, Tensorflow__NodeDef *n, const char *key);
void rt_gb_attr_i(rt_gb *g, Tensorflow__NodeDef *n, const char *key, int64_t v);
void rt_gb_attr_f(rt_gb *g, Tensorflow__NodeDef *n, const char *key, float v);
void rt_gb_attr_b(rt_gb *g, Tensorflow__NodeDef *n, const char *key, int v);
/* Bytes (AttrValue.s); rt_gb_attr_str for a C string. */
void rt_gb_attr_s(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const void *p, size_t len);
void rt_gb_attr_str(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const char *s);
void rt_gb_attr_type(rt_gb *g, Tensorflow__NodeDef *n, const char *key, rt_dtype t);
/* shape NULL or rank -1 = unknown rank; dims of -1 are unknown sizes. */
void rt_gb_attr_shape(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_shape *shape);
void rt_gb_attr_ilist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const int64_t *v,
                      size_t count);
void rt_gb_attr_flist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const float *v,
                      size_t count);
void rt_gb_attr_typelist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_dtype *v,
                         size_t count);
void rt_gb_attr_strlist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const char *const *v,
                        size_t count);
void rt_gb_attr_shapelist(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_shape *v,
                          size_t count);
/* A TensorProto copy of t (POD dtypes and DT_STRING). */
void rt_gb_attr_tensor(rt_gb *g, Tensorflow__NodeDef *n, const char *key, const rt_tensor *t);
/* AttrValue.func naming function `fname`; returns the NameAttrList so its own
 * attrs can be filled through rt_gb_func_attr. */
Tensorflow__NameAttrList *rt_gb_attr_func(rt_gb *g, Tensorflow__NodeDef *n, const char *key,
                                          const char *fname);
Tensorflow__AttrValue *rt_gb_func_attr(rt_gb *g, Tensorflow__NameAttrList *f, const char *key);

/* ---- proto values ---- */

/* Arena TensorProto / TensorShapeProto copies (NULL shape = unknown rank). */
Tensorflow__TensorProto *rt_gb_tensor_proto(rt_gb *g, const rt_tensor *t);
Tensorflow__TensorShapeProto *rt_gb_shape_proto(rt_gb *g, const rt_shape *shape);

/* ---- common ops (attrs as TensorFlow's op registry defines them) ---- */

/* Placeholder with dtype and shape (NULL = unknown rank). */
Tensorflow__NodeDef *rt_gb_placeholder(rt_gb *g, const char *name, rt_dtype dt,
                                       const rt_shape *shape);
/* Const holding a copy of value. */
Tensorflow__NodeDef *rt_gb_const(rt_gb *g, const char *name, const rt_tensor *value);
/* op(x) with attr T, e.g. Identity, Relu, Sigmoid. */
Tensorflow__NodeDef *rt_gb_unary(rt_gb *g, const char *op, const char *name, const char *x,
                                 rt_dtype T);
/* op(a, b) with attr T, e.g. Add, AddV2, Mul, Sub. */
Tensorflow__NodeDef *rt_gb_binary(rt_gb *g, const char *op, const char *name, const char *a,
                                  const char *b, rt_dtype T);
Tensorflow__NodeDef *rt_gb_matmul(rt_gb *g, const char *name, const char *a, const char *b,
                                  int transpose_a, int transpose_b, rt_dtype T);
/* A TF1 variable: VariableV2 `name` (dtype, shape, container "", shared_name
 * "") and Identity "<name>/read", which is returned: wire data inputs to it.
 * The value is saved under checkpoint key `name` and restored at load by the
 * saver graph rt_gb_meta_graph adds. The builder keeps a reference on value;
 * do not change it afterwards. DT_STRING and POD dtypes. */
Tensorflow__NodeDef *rt_gb_variable(rt_gb *g, const char *name, const rt_tensor *value);
/* Number of variables so far. */
int rt_gb_num_variables(const rt_gb *g);

/* ---- signatures, collections ---- */

/* New SignatureDef under key (a second one with the same key is an error). */
Tensorflow__SignatureDef *rt_gb_signature(rt_gb *g, const char *key, const char *method_name);
/* Adds input/output alias -> tensor ("node:0") with dtype and shape (NULL =
 * no shape info; rank -1 = unknown rank). */
void rt_gb_sig_input(rt_gb *g, Tensorflow__SignatureDef *sig, const char *alias, const char *tensor,
                     rt_dtype dt, const rt_shape *shape);
void rt_gb_sig_output(rt_gb *g, Tensorflow__SignatureDef *sig, const char *alias,
                      const char *tensor, rt_dtype dt, const rt_shape *shape);
/* Appends node_name to the node_list collection `key` (e.g. the TF1 init op
 * collection "saved_model_main_op"). */
void rt_gb_collection_add(rt_gb *g, const char *key, const char *node_name);

/* ---- output ---- */

/* The GraphDef built so far (borrowed). */
Tensorflow__GraphDef *rt_gb_graph(rt_gb *g);
/* Completes and returns the MetaGraphDef (borrowed, arena): tags {serve},
 * graph versions, and when there are variables the saver nodes (save/Const,
 * save/SaveV2, save/control_dependency, save/RestoreV2, save/Assign*,
 * save/restore_all) and a SaverDef (V2, not sharded). Adding variables after
 * this is an error. Returns the sticky error if any. */
ms_status rt_gb_meta_graph(rt_gb *g, Tensorflow__MetaGraphDef **out);
/* Serialized SavedModel (schema version 1, one meta graph); *out malloc'ed,
 * caller frees. */
ms_status rt_gb_pack_saved_model(rt_gb *g, uint8_t **out, size_t *n);
/* Writes a SavedModel version folder: creates dir if needed (not its
 * parents), then variables/variables.{index,data-00000-of-00001} when there
 * are variables, then saved_model.pb (by rename, so it appears complete). */
ms_status rt_savedmodel_write(const char *dir, rt_gb *g);

#endif /* RT_GRAPHBUILD_H */
