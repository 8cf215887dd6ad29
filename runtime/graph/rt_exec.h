/* rt_exec.h - runtime-internal pieces shared by the executor, the host ops and
 * the model: the kernel context, variables, the buffer pool. Not for use
 * outside runtime/. */
#ifndef RT_EXEC_H
#define RT_EXEC_H

#include <pthread.h>
#include <stdatomic.h>

#include "kn_backend.h"
#include "rt_graph.h"
#include "rt_tensor.h"

/* ---- variables (state of one loaded model version) ---- */
typedef struct rt_var {
    char *name;
    rt_dtype dtype;
    rt_tensor *value;   /* owned; NULL until initialised */
    struct rt_var *next;
} rt_var;

typedef struct rt_vars {
    pthread_mutex_t mu; /* guards the list; values are guarded by the model's run lock */
    rt_var *head;
} rt_vars;

void rt_vars_init(rt_vars *v);
void rt_vars_destroy(rt_vars *v);
/* Finds or creates the variable called name. NULL on OOM. */
rt_var *rt_vars_get(rt_vars *v, const char *name, rt_dtype dtype);

/* ---- buffer pool: outputs come from here and go back when released ---- */
typedef struct rt_pool rt_pool;
rt_pool *rt_pool_new(void);
/* Drops the creator's reference; buffers still in use keep the pool alive. */
void rt_pool_release(rt_pool *p);
rt_buf *rt_pool_get(rt_pool *p, size_t size);

/* ---- the context a kernel runs in ---- */
struct kn_ctx {
    rt_graph *graph;            /* NULL when running one op alone */
    rt_gnode *gnode;            /* the node being run (NULL when alone) */
    rt_vars *vars;              /* NULL when running one op alone */
    rt_pool *pool;              /* NULL: plain allocations */
    int nthreads;
    const atomic_int *cancelled;
};

/* Runs `g`'s nodes order[0..n-1] (a plan); see rt_exec.c. */
typedef struct rt_plan rt_plan;
ms_status rt_plan_build(rt_graph *g, const rt_edge *feeds, int nfeeds, const rt_edge *fetches,
                        int nfetches, const int *targets, int ntargets, rt_plan **out);
void rt_plan_free(rt_plan *p);
int rt_plan_stateful(const rt_plan *p);
/* feeds are in the order given to rt_plan_build; outs[i] get new references. */
ms_status rt_plan_run(const rt_plan *p, kn_ctx *ctx, rt_tensor *const *feeds, rt_tensor **outs);

/* Binds the node's kernel (host ops first, then the backend) and runs
 * prepare once. Const producers must be prepared first (rt_plan_build does
 * this in topological order). */
ms_status rt_gnode_prepare(rt_graph *g, int idx);

/* The decoded value of a Const node after prepare, else NULL. */
rt_tensor *rt_gnode_const_value(const rt_gnode *n);

#endif /* RT_EXEC_H */
