/* util_opcases.h - one table of op cases for the both-backends op test: every
 * op of the CUDA backend's table (kn_cuda_backend_ops) on shapes that reach
 * its decisions (odd sizes, trailing and general broadcasts, a scalar, empty
 * tensors, SAME / VALID / strided / dilated windows, constant and computed
 * arguments, a ConcatV2 of 2,000 inputs), each run once on the CPU kernels
 * (rt_op_run1) and once on a device backend (its inputs copied to it, its
 * kernel's prepare given the constant inputs, its outputs copied back), the
 * two compared with the op's tolerance.
 *
 * check_backend_ops runs the table against the test device (the CUDA
 * table's ops over the CPU kernels, util_testdev) in every `make test`;
 * check_cuda_backend_ops (label gpu) runs it against the CUDA backend on a
 * GPU. */
#ifndef UTIL_OPCASES_H
#define UTIL_OPCASES_H

#include "kn_backend.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"

typedef struct ut_opcase {
    char name[96];              /* "AddV2 [2,3,5] + [5]" */
    Tensorflow__NodeDef *def;   /* the node (its name is the case's op in lower case) */
    rt_tensor **in;             /* nin host values */
    unsigned char *is_const;    /* per input: a graph constant (given to prepare) */
    int nin, nout;
    int ncmp;                   /* the first ncmp outputs are compared */
    float tol;                  /* 0: the same bytes; else |got - want| <= tol * max(1, |want|) */
} ut_opcase;

/* The table: *out (free with ut_opcases_free), the number of cases. */
int ut_opcases(ut_opcase **out);
void ut_opcases_free(ut_opcase *c, int n);

/* Runs case c on the CPU backend `cpu` and on `dev`, failing the test
 * (naming the case) when either fails or the outputs differ beyond c->tol. */
void ut_opcase_check(kn_backend *cpu, kn_backend *dev, const ut_opcase *c);
/* The same with tolerance `tol` for float outputs instead of c->tol; adds
 * the largest |got - want| of its float outputs to *max_abs (max). */
void ut_opcase_check_tol(kn_backend *cpu, kn_backend *dev, const ut_opcase *c, float tol,
                         double *max_abs);

/* Ops of kn_cuda_backend_ops() the table leaves out on purpose, with why
 * (NULL-terminated pairs: op, reason). */
extern const char *const ut_opcases_skipped[];

#endif /* UTIL_OPCASES_H */
