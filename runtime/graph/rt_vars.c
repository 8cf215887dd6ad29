/* rt_vars.c - the variables of one loaded model version: a name -> tensor
 * list that VariableV2 / VarHandleOp and the assign ops read and write. */
#include "rt_vars.h"

#include <stdlib.h>
#include <string.h>

/* ================= variables ================= */

void rt_vars_init(rt_vars *v) {
    pthread_mutex_init(&v->mu, NULL);
    v->head = NULL;
    v->files = NULL;
}

void rt_vars_destroy(rt_vars *v) {
    rt_var *x = v->head;
    while (x) {
        rt_var *nx = x->next;
        rt_tensor_unref(x->value);
        free(x->name);
        free(x);
        x = nx;
    }
    v->head = NULL;
    pthread_mutex_destroy(&v->mu);
}

rt_var *rt_vars_get(rt_vars *v, const char *name, rt_dtype dtype) {
    pthread_mutex_lock(&v->mu);
    rt_var *x;
    for (x = v->head; x; x = x->next)
        if (strcmp(x->name, name) == 0) break;
    if (x == NULL && (x = calloc(1, sizeof(*x))) != NULL) {
        x->name = strdup(name);
        if (x->name == NULL) {
            free(x);
            x = NULL;
        } else {
            x->dtype = dtype;
            x->next = v->head;
            v->head = x;
        }
    }
    pthread_mutex_unlock(&v->mu);
    return x;
}

