/* rt_objgraph.h - TF2 variables restored through the object graph, and the
 * load-time check that every variable a signature reads has a value.
 *
 * Keras 3 exports (and any TF2 SavedModel whose saver function writes other
 * variables than the ones the signatures capture) are restored as
 * TensorFlow's loader does: a concrete function's captured inputs
 * (SavedConcreteFunction.bound_inputs) are SavedObjectGraph node ids; node i
 * takes the tensor under the checkpoint key of the VARIABLE_VALUE attribute
 * of node i of the checkpoint's TrackableObjectGraph (the bundle entry
 * "_CHECKPOINTABLE_OBJECT_GRAPH"). */
#ifndef RT_OBJGRAPH_H
#define RT_OBJGRAPH_H

#include "rt_graph.h"
#include "rt_vars.h"
#include "tf_savedmodel.pb-c.h"

/* For every call node of mg's graph whose function has bound inputs, gives
 * each captured VarHandleOp still without a value the checkpoint's value
 * (bundle at `prefix`, relative to vars->files, the model folder, and read
 * beneath it: rt_bundle_open_in). Sets *restored to the number of variables set. A
 * model without an object graph or a bundle without one is left as it is. */
ms_status rt_objgraph_restore(const Tensorflow__MetaGraphDef *mg, const rt_graph *g,
                              const char *prefix, rt_vars *vars, int *restored);

/* The resource variables (VarHandleOp) that the given fetches reach in g,
 * walking back from them and stopping at fed nodes, and that have no value:
 * MS_EINVAL naming them (at most 20, then a count). feeds and fetches are
 * tensor names ("x:0"); unknown names are skipped. */
ms_status rt_objgraph_check_vars(const rt_graph *g, rt_vars *vars, const char *const *feeds,
                                 int nfeeds, const char *const *fetches, int nfetches);

/* Calls fn for every variable node (VarHandleOp, VariableV2) those fetches
 * reach (same walk),
 * with its variable (value NULL: not restored). */
ms_status rt_objgraph_walk_vars(const rt_graph *g, rt_vars *vars, const char *const *feeds,
                                int nfeeds, const char *const *fetches, int nfetches,
                                void (*fn)(void *arg, const rt_gnode *node, const rt_var *v),
                                void *arg);

/* The name a variable node's value lives under in rt_vars (its shared_name,
 * else its node name), as the variable ops use it. buf holds the copy. */
const char *rt_objgraph_var_name(const rt_gnode *n, char *buf, size_t cap);

#endif /* RT_OBJGRAPH_H */
