/* rt_graph.h - a loaded graph: TensorFlow nodes resolved to indices, with
 * every PartitionedCall / StatefulPartitionedCall inlined from the function
 * library, and each node bound to its kernel. Runtime-internal.
 *
 * Inlining: a call node C with function f becomes the body nodes, named
 * "C/<body node>", plus C itself rewritten as an IdentityN over f's return
 * values, so that "C:i" keeps meaning output i. C's IdentityN carries control
 * edges to every body node with side effects or without consumers, so that
 * running C runs the whole body as TensorFlow does.
 */
#ifndef RT_GRAPH_H
#define RT_GRAPH_H

#include "kn_backend.h"
#include "tf_savedmodel.pb-c.h"

typedef struct rt_edge {
    int node;
    int out;
} rt_edge;

typedef struct rt_gnode {
    char *name;                        /* owned */
    const Tensorflow__NodeDef *def;    /* borrowed from the SavedModel or the graph's own */
    int nin;
    rt_edge *in;                       /* owned, data inputs */
    int nctl;
    int *ctl;                          /* owned, control inputs (node indices) */
    int nout;
    const kn_kernel *kernel;           /* borrowed: host op table or backend */
    kn_node kn;                        /* what the kernel sees */
    void *state;                       /* kernel->prepare result */
    int prepared;
    int fused_into;                    /* absorbed into this fused node (rt_fuse.h), or -1 */
    int unfused;                       /* a fused node: its original form (unnamed twin), or -1 */
    char *broken;                      /* owned: why this node cannot run (an output name of
                                        * its function body did not resolve), or NULL; only a
                                        * plan that reaches it fails, with this message */
} rt_gnode;

typedef struct rt_graph rt_graph;
struct rt_graph {
    rt_gnode *nodes;
    int n, cap;
    struct rt_name_map *names;         /* name -> index */
    kn_backend *backend;               /* borrowed */
    /* Borrowed; NULL (the default): every node on the host backend. Set it
     * before the first plan is built: each plan then places its nodes
     * between this device backend and the host (kn_place.h), binding a node
     * to the device's kernel when the device has its op. */
    kn_backend *device;
    const kn_kernel *const *host_ops;  /* borrowed: NULL-terminated host op tables (rt_ops.h) */
    struct rt_graph_mem *mem;          /* owned: memory of rt_graph_alloc */
    const Tensorflow__MetaGraphDef *mg; /* borrowed: its function library (control flow) */
    /* owned: the kernels found so far by op name (rt_graph_kernel) */
    struct rt_name_map *kernel_ix;
    const kn_kernel **kernels;
    int nkernels;
};

/* How kernels read the attributes of a graph node (a TensorFlow NodeDef):
 * the kn_attr_ops every rt_gnode's kn_node carries (rt_attr.c). */
extern const kn_attr_ops rt_nodedef_attrs;

/* Builds the graph of mg with its functions inlined. Kernels are bound (from
 * host_ops first, then be) and prepared by rt_plan_build. Fusion is a
 * separate pass (rt_fuse.h) the loader runs afterwards. */
ms_status rt_graph_build(const Tensorflow__MetaGraphDef *mg, kn_backend *be,
                         const kn_kernel *const *host_ops, rt_graph **out);
void rt_graph_free(rt_graph *g);
/* The kernel of op: host_ops first, then the backend's; NULL when neither
 * has one. Remembered per graph, so a graph of many nodes of few ops looks
 * each op up once. Not thread-safe (called where nodes are prepared). */
const kn_kernel *rt_graph_kernel(rt_graph *g, const char *op);

/* A function of mg's library as a graph of its own, for ops that run a
 * function as a sub-plan (While, If, Case: rt_ops_control.c). Each input
 * argument i is a Placeholder node args[i] (always fed); rets[i] is the
 * tensor of output argument i; ctl[0..nctl-1] are the control_ret nodes (run
 * targets). Calls inside the body are inlined as in rt_graph_build. */
typedef struct rt_fn_graph {
    rt_graph *g;
    int nargs, nrets, nctl;
    rt_edge *args, *rets;
    int *ctl;
} rt_fn_graph;
ms_status rt_graph_build_function(const Tensorflow__MetaGraphDef *mg, const char *fname,
                                  kn_backend *be, const kn_kernel *const *host_ops,
                                  rt_fn_graph **out);
void rt_fn_graph_free(rt_fn_graph *f);

/* Zeroed memory owned by g (NodeDefs made by passes over it), freed with it;
 * NULL on OOM. */
void *rt_graph_alloc(rt_graph *g, size_t n);

/* Node index by name, or -1. */
int rt_graph_find(const rt_graph *g, const char *name);
/* Parses "node", "node:3" into an edge; MS_ENOTFOUND when the node is absent
 * or the index is out of range. */
ms_status rt_graph_tensor(const rt_graph *g, const char *tensor_name, rt_edge *out);

#endif /* RT_GRAPH_H */
