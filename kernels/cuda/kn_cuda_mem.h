/* kn_cuda_mem.h - the process's device-memory budget
 * (--per_process_gpu_memory_fraction), host-side arithmetic only.
 *
 * TF Serving's flag gives the share of the GPU's memory the process may
 * take. Here it is a hard cap on what the model arenas (kn_cuda_rt.cuh) hold
 * together: a load whose arena would pass it is refused with a message
 * giving the need, the cap and what is already held, and the daemon keeps
 * serving the models it has. Fraction 0 (the default) means "no cap beyond
 * the device's own memory". */
#ifndef KN_CUDA_MEM_H
#define KN_CUDA_MEM_H

#include <stdint.h>

#include "ms_status.h"

/* Sets the cap from the fraction (0 < f <= 1; 0 = none) and the device's
 * total memory. */
void kn_cuda_budget_set(double fraction, uint64_t device_total);
/* Takes `bytes` from the budget, or MS_ENOMEM naming `what` with the figures.
 * Thread-safe. */
ms_status kn_cuda_budget_take(const char *what, uint64_t bytes);
/* Gives back what kn_cuda_budget_take took. */
void kn_cuda_budget_give(uint64_t bytes);
/* Bytes held now. */
uint64_t kn_cuda_budget_held(void);

/* A sticky device error (illegal address, launch failure, ECC ...) leaves
 * the CUDA context unusable until the process restarts: kn_cuda_rt.cu sets
 * the flag, the health service answers NOT_SERVING once it is set (so that
 * Kubernetes restarts the pod). 0 in a build without CUDA. */
int kn_cuda_sticky(void);
void kn_cuda_set_sticky(void);

#endif /* KN_CUDA_MEM_H */
