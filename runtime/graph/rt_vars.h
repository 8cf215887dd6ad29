/* rt_vars.h - variables: the state of one loaded model version. */
#ifndef RT_VARS_H
#define RT_VARS_H

#include <pthread.h>

#include "ms_file.h"
#include "rt_tensor.h"

typedef struct rt_var {
    char *name;
    rt_dtype dtype;
    rt_tensor *value;   /* owned; NULL until initialised */
    struct rt_var *next;
} rt_var;

typedef struct rt_vars {
    pthread_mutex_t mu; /* guards the list; values are guarded by the model's run lock */
    rt_var *head;
    /* Borrowed: the version folder the ops that read files (RestoreV2, the
     * table initialisers) open them beneath (ms_file.h); a file name they are
     * fed must lie inside it. NULL (rt_vars_init): such ops refuse. */
    const ms_dir *files;
} rt_vars;

void rt_vars_init(rt_vars *v);
void rt_vars_destroy(rt_vars *v);
/* Finds or creates the variable called name. NULL on OOM. */
rt_var *rt_vars_get(rt_vars *v, const char *name, rt_dtype dtype);

#endif /* RT_VARS_H */
