/* rt_tf1loop.h - TF1 while loops (tf.while_loop, dynamic_rnn: frames of
 * Enter / Merge / Switch / LoopCond / NextIteration / Exit nodes) turned
 * into one node each, run by rt_ops_control.c. The SavedModel loader runs
 * the pass right after rt_graph_build, before fusion. */
#ifndef RT_TF1LOOP_H
#define RT_TF1LOOP_H

#include "rt_graph.h"

/* The op of the node that stands for one TF1 while frame, and of a TF1
 * cond's Merge once converted. */
#define RT_TF1_LOOP_OP "_TF1WhileLoop"
#define RT_TF1_COND_OP "_TF1Cond"

/* One while frame of a graph, by node index. Loop variable i: its Enter,
 * Merge (its value at the start of an iteration), Switch (output 1: into
 * the body) and the body's result (the input of its NextIteration);
 * invariants: Enter nodes with is_constant. pred: the input of the frame's
 * LoopCond. exits: the Exit nodes, exit_var[k] the variable of exit k. */
typedef struct rt_tf1_frame {
    char *name;                 /* owned: the frame_name */
    int nvars, ninv, nexits;
    int *enter, *merge, *sw;    /* owned, nvars each */
    rt_edge *next_in;           /* owned, nvars */
    int *inv;                   /* owned, ninv */
    int *exits, *exit_var;      /* owned, nexits each */
    rt_edge pred;
} rt_tf1_frame;

/* Finds the frame named name in g and checks its shape (every loop variable
 * an Enter feeding one Merge with a NextIteration, that Merge feeding one
 * Switch on the frame's one LoopCond). MS_ENOTSUP with a message naming the
 * frame and the node when the frame has another shape. Free with
 * rt__tf1_frame_free. */
ms_status rt__tf1_frame_find(const rt_graph *g, const char *name, rt_tf1_frame *out);
void rt__tf1_frame_free(rt_tf1_frame *f);

/* The pass (after rt_graph_build, before rt_fuse_graph): every frame of g becomes one RT_TF1_LOOP_OP node (named after
 * the frame, attr frame_name) whose inputs are the outer tensors of its loop
 * variables then of its invariants and whose output i is loop variable i's
 * final value; each Exit reads its variable's output, and control inputs on
 * the frame's Enter / Merge / Switch nodes are dropped (they hold whenever
 * an iteration runs), so that no plan meets the frame's cycle. A frame of
 * another shape is not converted: its Exit and Enter nodes keep the reason
 * (rt_gnode.broken) and fail only a plan that reaches them. Then every TF1
 * cond Merge outside a loop whose two inputs come, walking back, from
 * Switch outputs 1 and 0 of one predicate becomes a RT_TF1_COND_OP node of
 * the same name and outputs (attrs then_tensor, else_tensor, then_index,
 * switches; inputs pred and the Switches' data inputs); other Merges stay
 * (refused at prepare). MS_ENOMEM only. */
ms_status rt_tf1_loops_convert(rt_graph *g);

/* A converted cond, from its node's attrs: the branch results, which Merge
 * input the true branch was (value_index), and the Switches its branches
 * are fed at. Free sw. */
typedef struct rt_tf1_cond {
    rt_edge then_out, else_out;
    int then_index;
    int nsw;
    int *sw; /* owned */
} rt_tf1_cond;
ms_status rt__tf1_cond_find(const rt_graph *g, const rt_gnode *n, rt_tf1_cond *out);

#endif /* RT_TF1LOOP_H */
