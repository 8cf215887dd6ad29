/* kn_place.h - which backend runs each node of a plan, and where copies go.
 *
 * Decided once per plan at load, never per request. A node runs on the
 * device backend when it may (not a host op) and the device backend has a
 * kernel for its op; otherwise it falls back to the host (CPU) backend. A
 * TensorFlow device pin in the graph ("/device:GPU:0", "/device:CPU:0") is a
 * hint only: it is counted for the load-time log line, and never makes a
 * node fail or move against what the backends can run. Every edge whose
 * two ends are on different sides gets one copy (shared by all consumers on
 * the same side); feeds come from the host, fetches go back to it.
 *
 * Host arithmetic only (no device API); the executor (runtime/graph) calls
 * it with its plan's nodes and a kn_backend whose kernel() answers which ops
 * the device has. */
#ifndef KN_PLACE_H
#define KN_PLACE_H

#include <stddef.h>

#include "kn_backend.h"

typedef enum kn_side { KN_SIDE_HOST = 0, KN_SIDE_DEVICE = 1 } kn_side;

/* One input of a node: output `out` of node `node`; node -1 = a feed of
 * the plan (on the host). */
typedef struct kn_place_in {
    int node;
    int out;
} kn_place_in;

typedef struct kn_place_node {
    const char *op;
    const char *device; /* the graph's pin, "" or NULL when none */
    int host_only;      /* host op (graph plumbing, variables, strings, DICOM decode) */
    int nin;
    const kn_place_in *in;
} kn_place_node;

/* A copy of output `out` of `node` (-1: feed number `out`) to side `to`,
 * made once before `first_consumer` runs. */
typedef struct kn_place_copy {
    int node, out;
    kn_side to;
    int first_consumer;
} kn_place_copy;

typedef struct kn_placement {
    int n;
    kn_side *side;          /* per node */
    int ndevice;            /* nodes on the device */
    int ncopies;
    kn_place_copy *copies;
    int pins_gpu, pins_cpu; /* nodes the graph pinned (hints) */
} kn_placement;

/* nodes[0..n-1] in run order (inputs point to earlier nodes); fetches are
 * the plan's outputs. device NULL: everything on the host. MS_ENOMEM or
 * MS_EINVAL (an input naming a later node or out of range). */
ms_status kn_place(const kn_place_node *nodes, int n, const kn_place_in *fetches, int nfetches,
                   kn_backend *device, kn_placement *out);
void kn_placement_free(kn_placement *p);

/* One line for the load log: "12 of 40 nodes on <dev>, 5 copies; CPU
 * fallback for ArgMax x1, Where x2; graph pins (hints): 3 GPU, 0 CPU". */
void kn_placement_summary(const kn_placement *p, const kn_place_node *nodes, const char *dev,
                          char *buf, size_t len);

#endif /* KN_PLACE_H */
