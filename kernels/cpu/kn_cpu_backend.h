/* kn_cpu_backend.h - the CPU backend, the one backend always built. */
#ifndef KN_CPU_BACKEND_H
#define KN_CPU_BACKEND_H

#include "kn_backend.h"

/* A new CPU backend; free it with kn_backend_free. intra_op_threads <= 0
 * means one per core. */
kn_backend *kn_cpu_backend_new(int intra_op_threads);

/* The backend's kernel tables in lookup order (each ends with op NULL); *n
 * gets their count. For listings of the supported ops (`dcmserve ops`). */
const kn_kernel *const *kn_cpu_kernel_tables(size_t *n);

#endif /* KN_CPU_BACKEND_H */
