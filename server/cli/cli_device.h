/* cli_device.h - --device for serve, run and benchmark (docs/gpu.md). */
#ifndef CLI_DEVICE_H
#define CLI_DEVICE_H

#include "kn_backend.h"

/* Parses `device` (NULL = auto), probes the GPUs and chooses. Logs the
 * choice and its reason once (info). Returns 0 with *gpu = the GPU index or
 * -1 for the CPU; 2 for a bad value and 1 when --device=cuda[:N] cannot be
 * had, after printing "dcmserve <cmd>: <diagnosis>" on stderr (and logging
 * it). `gpu_memory_fraction` (0 = none) becomes the device-memory cap.
 * `precision` (--precision: NULL or "fp32", "tf32"; "fp16" is refused, as is
 * any other value, returning 2) becomes the CUDA backend's arithmetic
 * (kn_cuda_precision.h); with the CPU chosen it has no effect (logged). */
int cli_device_choose(const char *cmd, const char *device, double gpu_memory_fraction,
                      const char *precision, int *gpu);

/* The device backend of the GPU cli_device_choose chose (*dev NULL when it
 * chose the CPU), placing nodes between it and `cpu` (kn_cuda_backend.h).
 * When the backend cannot be made: with --device=cuda[:N] returns 1 after
 * printing "dcmserve <cmd>: ..." on stderr; with auto logs why and returns 0
 * with *dev NULL (the CPU serves). Free *dev with kn_backend_free after every
 * model loaded on it. */
int cli_device_open(const char *cmd, const char *device, int gpu, kn_backend *cpu,
                    kn_backend **dev);

#endif /* CLI_DEVICE_H */
