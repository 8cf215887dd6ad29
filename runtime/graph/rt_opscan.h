/* rt_opscan.h - which ops a set of fetches needs, and which of them dcmserve
 * cannot run: for the one-message load failure and `dcmserve check`.
 *
 * The scan walks back from the fetches and targets as a plan would (stopping
 * at fed tensors) and, for control-flow nodes (While, If, Case and their
 * stateless forms), into the bodies of their functions in the library (and
 * of calls inside them). An op is supported when a host op table or the
 * backend has a kernel for it and it is not refused by name (TF1 loops). */
#ifndef RT_OPSCAN_H
#define RT_OPSCAN_H

#include "rt_graph.h"

typedef struct rt_opuse {
    char *op;
    int supported;
    int nnodes;
    char **nodes;   /* "node" or "<control node> > <function>/<node>" */
} rt_opuse;

typedef struct rt_opscan {
    int n;          /* distinct ops, sorted by name */
    rt_opuse *ops;
    int nunsupported;
    int nbroken;    /* nodes reached whose op has a kernel but that cannot run */
    char **broken;  /* why, per node (rt_gnode.broken: "... cannot resolve output ...") */
} rt_opscan;

ms_status rt_opscan_run(const rt_graph *g, const rt_edge *feeds, int nfeeds, const rt_edge *fetches,
                        int nfetches, const int *targets, int ntargets, rt_opscan **out);
/* The same with tensor names ("x:0"); names not in g are skipped. */
ms_status rt_opscan_named(const rt_graph *g, const char *const *feeds, int nfeeds,
                          const char *const *fetches, int nfetches, rt_opscan **out);
void rt_opscan_free(rt_opscan *s);
/* Writes "N unsupported ops: A, B; nodes: A 'x', 'y'; B 'z'" (truncated with
 * "..." to fit n bytes; op names first so they survive). */
void rt_opscan_message(const rt_opscan *s, char *buf, size_t n);
/* Whether op has a kernel (host tables of g, then g's backend) and is not refused. */
int rt_opscan_supported(const rt_graph *g, const char *op);

#endif /* RT_OPSCAN_H */
