/* rt_exec.h - execution plans over a graph, and what the host ops see of a
 * run. Kernels get their kn_ctx (kernels/kn_ctx.h) filled by the caller;
 * rt_plan_run adds the graph, the node and the variables as its host part. */
#ifndef RT_EXEC_H
#define RT_EXEC_H

#include "kn_ctx.h"
#include "kn_memplan.h"
#include "rt_graph.h"
#include "rt_tensor.h"
#include "rt_vars.h"

/* ---- what the host ops see of a run (kn_ctx.host while rt_plan_run runs) ---- */
typedef struct rt_hostctx {
    rt_graph *graph;            /* the plan's graph */
    rt_gnode *gnode;            /* the node being run */
    rt_vars *vars;              /* the model's variables; NULL when it has none */
} rt_hostctx;

/* The host context of a kernel's run, or NULL when the kernel runs alone. */
static inline rt_hostctx *rt_hostctx_of(kn_ctx *ctx) {
    return ctx ? (rt_hostctx *)ctx->host : NULL;
}

/* Runs `g`'s nodes order[0..n-1] (a plan); see rt_exec.c. */
typedef struct rt_plan rt_plan;
ms_status rt_plan_build(rt_graph *g, const rt_edge *feeds, int nfeeds, const rt_edge *fetches,
                        int nfetches, const int *targets, int ntargets, rt_plan **out);
void rt_plan_free(rt_plan *p);
int rt_plan_stateful(const rt_plan *p);
/* feeds are in the order given to rt_plan_build; outs[i] get new references.
 * vars (may be NULL) are the variables the host ops read and write. */
ms_status rt_plan_run(const rt_plan *p, kn_ctx *ctx, rt_vars *vars, rt_tensor *const *feeds,
                      rt_tensor **outs);

/* The device memory of a placed plan whose device backend has arenas
 * (kn_backend_i.arena_*): the first run of each set of feed shapes (up to 4
 * sets) records the device tensors it makes and lays them out in one arena
 * (kn_memplan.h); later runs of those shapes take their device tensors from
 * an idle arena of them (one more is made for runs in parallel). What
 * rt_plan_memory reports of the key-th set. */
/* The most sets of feed shapes a plan sizes. */
#define RT_PLAN_MEM_KEYS 4
typedef struct rt_plan_meminfo {
    int nkeys;                   /* feed-shape sets sized so far */
    int ntensors;                /* device tensors of the key's layout */
    int ntemps;                  /* step temporaries of it (bufs[ntensors..]) */
    uint64_t bytes;              /* one arena's size */
    int arenas;                  /* arenas made for the key */
    const kn_memplan_buf *bufs;  /* the layout, tensors then temporaries (borrowed, valid
                                    with the plan) */
} rt_plan_meminfo;
/* MS_ENOTFOUND when the plan has no device arenas or fewer keys. */
ms_status rt_plan_memory(const rt_plan *p, int key, rt_plan_meminfo *out);
/* 1 when plans placed on `device` (may be NULL) get device arenas: it has
 * the arena slots and DCMSERVE_DEVICE_ARENA is not 0. */
int rt_device_arenas(const kn_backend *device);
/* CUDA graphs (docs/gpu.md, Memory; off by default): 1 when plans placed on
 * `device` capture their segments of device nodes into graphs and replay
 * them: the device has the graph slots (kn_backend_i.graph_*) and graphs
 * are on (rt_device_graphs_set, else DCMSERVE_CUDA_GRAPHS=1). Read when a
 * plan is built. */
int rt_device_graphs(const kn_backend *device);
/* Turns graphs on or off for plans built from now on (`--cuda_graphs`),
 * overriding DCMSERVE_CUDA_GRAPHS. */
void rt_device_graphs_set(int on);

/* Binds the node's kernel (host ops first, then the backend) and runs
 * prepare once. Const producers must be prepared first (rt_plan_build does
 * this in topological order). */
ms_status rt_gnode_prepare(rt_graph *g, int idx);

/* Looks the kernel of def up (host_ops, a NULL-terminated list of host
 * tables, then the backend), builds its kn_node, calls prepare (no constant
 * inputs) and compute: one op outside a graph (kernel tests, tools).
 * outs[0..nout-1] get new references; on error none are set. be and host_ops
 * may be NULL. */
ms_status rt_op_run1(kn_backend *be, const kn_kernel *const *host_ops, const Tensorflow__NodeDef *def,
                     rt_tensor *const *in, int nin, rt_tensor **outs, int nout);

/* While a kernel's prepare runs inside rt_gnode_prepare: the node's graph
 * (control-flow ops build their function sub-plans from its library); NULL
 * otherwise (rt_op_run1). */
rt_graph *rt_preparing_graph(void);

/* The decoded value of a Const node after prepare, else NULL. */
rt_tensor *rt_gnode_const_value(const rt_gnode *n);

#endif /* RT_EXEC_H */
