/* rt_opdefs.h - output arguments of ops: how many outputs a node has and
 * which flat output index "node:out_arg:i" (function-body naming) means.
 * The model's stripped_op_list is consulted first, then a built-in table. */
#ifndef RT_OPDEFS_H
#define RT_OPDEFS_H

#include "tf_savedmodel.pb-c.h"

int rt_opdef_num_outputs(const Tensorflow__MetaGraphDef *mg, const char *op,
                         const Tensorflow__NodeDef *def);
/* Flat index of the first output of argument `arg`, or -1 when unknown. */
int rt_opdef_output_index(const Tensorflow__MetaGraphDef *mg, const char *op,
                          const Tensorflow__NodeDef *def, const char *arg);

/* 1 when the built-in table has an entry for op (its output-arg names). */
int rt_opdef_listed(const char *op);

#endif /* RT_OPDEFS_H */
