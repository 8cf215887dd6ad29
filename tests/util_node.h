/* util_node.h - building TensorFlow NodeDefs and small tensors for kernel
 * tests, running one op on the CPU backend and checking its outputs.
 *
 * Ownership: tu_node_new returns a NodeDef freed with tu_node_free (which
 * frees every attr added with tu_attr_*). tu_t/TU_* return one tensor
 * reference owned by the caller (rt_tensor_unref or tu_unref). The tu_check_*
 * helpers fail the current Check test with a message on mismatch.
 */
#ifndef UTIL_NODE_H
#define UTIL_NODE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "kn_backend.h"
#include "rt_tensor.h"
#include "tf_framework.pb-c.h"

/* ---- NodeDefs ---- */
Tensorflow__NodeDef *tu_node_new(const char *op, const char *name);
void tu_node_free(Tensorflow__NodeDef *d);
void tu_attr_i(Tensorflow__NodeDef *d, const char *key, int64_t v);
void tu_attr_f(Tensorflow__NodeDef *d, const char *key, float v);
void tu_attr_b(Tensorflow__NodeDef *d, const char *key, int v);
void tu_attr_type(Tensorflow__NodeDef *d, const char *key, rt_dtype v);
void tu_attr_s(Tensorflow__NodeDef *d, const char *key, const char *v);
void tu_attr_ilist(Tensorflow__NodeDef *d, const char *key, int n, const int64_t *v);
void tu_attr_flist(Tensorflow__NodeDef *d, const char *key, int n, const float *v);
void tu_attr_typelist(Tensorflow__NodeDef *d, const char *key, int n, const rt_dtype *v);
/* list(string): n NUL-terminated strings. */
void tu_attr_slist(Tensorflow__NodeDef *d, const char *key, int n, const char *const *v);
/* list(shape): n shapes, shape i of ranks[i] dims, all dims concatenated in dims. */
void tu_attr_shapelist(Tensorflow__NodeDef *d, const char *key, int n, const int *ranks,
                       const int64_t *dims);
/* Shape attr of `rank` dims (-1 = unknown dim); rank -1 = unknown rank. */
void tu_attr_shape(Tensorflow__NodeDef *d, const char *key, int rank, const int64_t *dims);
/* tu_attr_ints(d, "strides", 1, 2, 2, 1) */
#define tu_attr_ints(d, key, ...)                                                                  \
    tu_attr_ilist((d), (key), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),           \
                  (const int64_t[]){__VA_ARGS__})

/* ---- tensors ---- */
/* TU_SHAPE(2, 3); TU_SCALAR for rank 0. */
#define TU_SHAPE(...)                                                                              \
    ((rt_shape){.rank = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                 \
                .dim = {__VA_ARGS__}})
#define TU_SCALAR ((rt_shape){.rank = 0})
/* New tensor of dtype/shape holding a copy of vals (nvals must equal the
 * element count; checked). */
rt_tensor *tu_t(rt_dtype dt, rt_shape s, const void *vals, int nvals);
#define TU_NV(T, ...)       (const T[]){__VA_ARGS__}, (int)(sizeof((T[]){__VA_ARGS__}) / sizeof(T))
#define TU_F32(shape, ...)  tu_t(RT_DT_FLOAT, (shape), TU_NV(float, __VA_ARGS__))
#define TU_F64(shape, ...)  tu_t(RT_DT_DOUBLE, (shape), TU_NV(double, __VA_ARGS__))
#define TU_I32(shape, ...)  tu_t(RT_DT_INT32, (shape), TU_NV(int32_t, __VA_ARGS__))
#define TU_I64(shape, ...)  tu_t(RT_DT_INT64, (shape), TU_NV(int64_t, __VA_ARGS__))
#define TU_U8(shape, ...)   tu_t(RT_DT_UINT8, (shape), TU_NV(uint8_t, __VA_ARGS__))
#define TU_BOOL(shape, ...) tu_t(RT_DT_BOOL, (shape), TU_NV(uint8_t, __VA_ARGS__))
/* Float tensor whose element i is start + i * step. */
rt_tensor *tu_iota_f32(rt_shape s, float start, float step);
void tu_unref(rt_tensor **t, int n);
/* DT_STRING tensor of shape s holding copies of the n NUL-terminated strs. */
rt_tensor *tu_strings(rt_shape s, const char *const *strs, int n);

/* ---- running ---- */
/* Runs def on a CPU backend with 2 intra-op threads; outs[0..nout-1] set on
 * success. Returns the kernel's status (message in ms_errmsg()). */
ms_status tu_run(const Tensorflow__NodeDef *def, rt_tensor *const *in, int nin, rt_tensor **outs,
                 int nout);
/* When set (non-NULL), tu_run runs an op found in `table` with that table's
 * kernel directly instead of the backend's lookup (which may pick an
 * optimised kernel registered earlier): lets a suite test the reference
 * kernels too. NULL restores the backend lookup. */
void tu_prefer_table(const kn_kernel *table);
/* Runs def (one output), failing the test unless it succeeds; returns the
 * output and frees def (the inputs stay the caller's). */
rt_tensor *tu_run1(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin);
/* Runs def's CPU kernel (prepare, compute, release) once with the request
 * cancelled, failing the test unless it stops with MS_ECANCELED and
 * "cancelled", then not cancelled, failing unless it succeeds; returns that
 * output and frees def (the inputs stay the caller's). */
rt_tensor *tu_check_cancel(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin);
/* Runs def expecting failure with `code` and a message naming def->name and
 * containing `needle` (NULL: any); frees def. */
void tu_run_fail(Tensorflow__NodeDef *def, rt_tensor *const *in, int nin, int nout, ms_status code,
                 const char *needle);

/* ---- checks ---- */
void tu_check_shape(const rt_tensor *t, rt_dtype dt, rt_shape s);
/* |got - want| <= tol * max(1, |want|) per element; NaN matches NaN. */
void tu_check_f32(const rt_tensor *t, rt_shape s, const float *want, int n, float tol);
void tu_check_f64(const rt_tensor *t, rt_shape s, const double *want, int n, double tol);
/* Exact comparisons of integer-like dtypes (int32, int64, uint8/bool) as int64. */
void tu_check_int(const rt_tensor *t, rt_dtype dt, rt_shape s, const int64_t *want, int n);
#define TU_CHECK_F32(t, shape, tol, ...)                                                           \
    tu_check_f32((t), (shape), TU_NV(float, __VA_ARGS__), (tol))
#define TU_CHECK_F64(t, shape, tol, ...)                                                           \
    tu_check_f64((t), (shape), TU_NV(double, __VA_ARGS__), (tol))
#define TU_CHECK_INT(t, dt, shape, ...)                                                            \
    tu_check_int((t), (dt), (shape), TU_NV(int64_t, __VA_ARGS__))

/* ---- running a suite ----
 * A Check test main: one TCase per entry, named as given; returns
 * EXIT_SUCCESS when every test passed. */
typedef struct tu_case {
    const char *name;
    const TTest *test;
} tu_case;
int tu_suite_main(const char *suite, const tu_case *cases, size_t n);
/* Runs a suite built by the caller (fixtures, timeouts) and frees it: the
 * test main's exit code. */
int tu_suite_run(Suite *s);

#endif /* UTIL_NODE_H */
