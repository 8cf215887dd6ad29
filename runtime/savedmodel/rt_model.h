/* rt_model.h - a loaded SavedModel version: graph, variables, execution plans.
 *
 * rt_model_load reads <export_dir>/saved_model.pb (or converts model.onnx,
 * below), picks the MetaGraphDef whose
 * tag set equals the requested one, inlines functions, checks every op has a
 * kernel (unknown op -> MS_ENOTSUP naming op and node), runs the saver's
 * restore op with the bundle prefix <export_dir>/variables/variables and then
 * the init op (docs/savedmodel_loading.md). A loaded model is immutable except
 * for its variables, and reference-counted: rt_model_unref frees it when the
 * last holder (a request, the model manager) lets go.
 */
#ifndef RT_MODEL_H
#define RT_MODEL_H

#include <stdatomic.h>
#include <stdint.h>

#include "kn_backend.h"
#include "ms_budget.h"
#include "ms_file.h"
#include "ms_status.h"
#include "rt_graph.h"
#include "rt_tensor.h"
#include "rt_vars.h"
#include "tf_savedmodel.pb-c.h"

typedef struct rt_model rt_model;

/* ---- version folders holding model.onnx ----
 * A version folder may hold model.onnx (Triton's <model>/<version>/model.onnx,
 * external data files beside it) instead of saved_model.pb: it is converted in
 * memory when read, into the SavedModel import-onnx would write (one
 * MetaGraphDef tagged "serve", signature serving_default keyed by the graph's
 * input and output names), and from there loads, shows and checks like one.
 * The converter lives in runtime/onnx, a layer above this one, so the program
 * installs it once at start (rt_onnx_serve_enable, rt_onnx.h); without it a
 * model.onnx folder is refused saying so. When a folder holds both files,
 * saved_model.pb is read (it is what import-onnx writes, e.g. with a DICOM
 * front, beside its source) and model.onnx is ignored with a warning. */
#define RT_MODEL_ONNX_FILE "model.onnx"

/* Converts the ONNX model `name` beneath root (every file, external data
 * included, read beneath it: ms_file.h) into a serialized SavedModel: *pb
 * malloc'd, the caller frees it. */
typedef ms_status (*rt_model_onnx_converter)(const ms_dir *root, const char *name, uint8_t **pb,
                                             size_t *pb_len);
/* Installs the converter (NULL removes it); process-wide, before loads start. */
void rt_model_set_onnx_converter(rt_model_onnx_converter fn);

/* What a version folder holds, as the loader reads it: RT_MODEL_FMT_SAVEDMODEL
 * when it holds saved_model.pb (whether or not model.onnx is there too),
 * RT_MODEL_FMT_ONNX when only model.onnx, RT_MODEL_FMT_NONE when neither (a
 * name that resolves outside the folder counts as present: the read refuses it). */
typedef enum rt_model_format {
    RT_MODEL_FMT_NONE = 0,
    RT_MODEL_FMT_SAVEDMODEL,
    RT_MODEL_FMT_ONNX,
} rt_model_format;
rt_model_format rt_model_dir_format(const ms_dir *root);

/* Reads and unpacks <export_dir>/saved_model.pb (no graph work), or converts
 * <export_dir>/model.onnx (above). Free with
 * tensorflow__saved_model__free_unpacked(sm, NULL). */
ms_status rt_savedmodel_read(const char *export_dir, Tensorflow__SavedModel **out);

/* Index of the MetaGraphDef whose tags equal tags[0..ntags-1] as a set, or -1. */
int rt_savedmodel_find_meta_graph(const Tensorflow__SavedModel *sm, const char *const *tags,
                                  int ntags);

/* Every host op table a SavedModel may use (graph plumbing and variables,
 * lookup tables, RestoreV2, the DICOM ops), NULL-terminated: what rt_model_load gives its
 * graph, and what tools running one op alone (rt_op_run1) pass. */
extern const kn_kernel *const rt_model_host_ops[];

/* Loads a model version. `be` is borrowed and must outlive the model. */
ms_status rt_model_load(const char *export_dir, const char *const *tags, int ntags,
                        kn_backend *be, rt_model **out);
/* The same up to (not including) planning the signatures: for tools that
 * inspect a model that may not serve (`dcmserve check`), which then plan
 * each signature with rt_model_plan_signature. */
ms_status rt_model_load_unplanned(const char *export_dir, const char *const *tags, int ntags,
                                  kn_backend *be, rt_model **out);
/* Plans signature `key` as the load does: MS_ENOTSUP listing every
 * unsupported op and node, MS_EINVAL naming the variables it reads that
 * have no value. */
ms_status rt_model_plan_signature(rt_model *m, const char *key);
/* The same with a device backend (borrowed, may be NULL = rt_model_load):
 * every plan of the model places its nodes between `device` and the host
 * (rt_graph.h, kn_place.h). */
ms_status rt_model_load_on(const char *export_dir, const char *const *tags, int ntags,
                           kn_backend *be, kn_backend *device, rt_model **out);
rt_model *rt_model_ref(rt_model *m);
void rt_model_unref(rt_model *m);

/* Borrowed views, valid while a reference is held. */
const Tensorflow__MetaGraphDef *rt_model_meta_graph(const rt_model *m);
/* Bytes the model's output buffer pool keeps in free buffers for reuse (the
 * memory it holds beyond the tensors in use); for the server's metrics. */
size_t rt_model_pool_free_bytes(const rt_model *m);
const char *rt_model_dir(const rt_model *m);
/* Which file the model was read from (RT_MODEL_FMT_SAVEDMODEL or _ONNX). */
rt_model_format rt_model_format_of(const rt_model *m);
rt_graph *rt_model_graph(rt_model *m);
rt_vars *rt_model_vars(rt_model *m);

typedef struct rt_feed {
    const char *name;   /* tensor name: "x:0" or "x" (= "x:0") */
    rt_tensor *tensor;  /* borrowed */
} rt_feed;

/* Largest saved_model.pb (and ONNX file) read. Real models' graphs are a few
 * MB; weights live in variables/. */
#define RT_SAVED_MODEL_MAX_BYTES ((size_t)1 << 30)

/* The load budget (--max_model_memory_bytes): the memory a model's Consts
 * take beyond the bytes its graph file holds, i.e. TensorFlow's broadcast of
 * a few *_val values to the whole shape (float_val [1.0] with shape [2e8] is
 * 575 bytes in the file and 800 MB in memory). The sum over the graph and its
 * function library is checked before the graph is built; past the limit the
 * load fails with MS_ENOMEM naming the largest such Const and the flag.
 * Process-wide; 0 = no limit. */
#define RT_MODEL_MEMORY_DEFAULT ((uint64_t)1 << 30)
void rt_model_set_max_memory(uint64_t bytes);

typedef struct rt_run_opts {
    const atomic_int *cancelled;   /* optional: non-zero stops the run (MS_ECANCELED) */
    ms_budget *budget;             /* optional: the request's memory budget; outputs that stay
                                      live are taken from it, one that would not fit is refused */
} rt_run_opts;

/* Runs the part of the graph that `fetches` (tensor names) and `targets`
 * (node names, run for effect) need, with `feeds` replacing the tensors they
 * name (any tensor, not only placeholders; everything upstream of a feed is
 * cut). outs[i] receives a new reference for fetches[i]; on error none are
 * set. Thread-safe; runs that touch variables are serialised per model.
 * opts may be NULL. */
ms_status rt_model_run(rt_model *m, const rt_feed *feeds, int nfeeds, const char *const *fetches,
                       int nfetches, const char *const *targets, int ntargets,
                       const rt_run_opts *opts, rt_tensor **outs);

#endif /* RT_MODEL_H */
