/* cli_device.h - --device for serve, run and benchmark (docs/gpu.md). */
#ifndef CLI_DEVICE_H
#define CLI_DEVICE_H

/* Parses `device` (NULL = auto), probes the GPUs and chooses. Logs the
 * choice and its reason once (info). Returns 0 with *gpu = the GPU index or
 * -1 for the CPU; 2 for a bad value and 1 when --device=cuda[:N] cannot be
 * had, after printing "dcmserve <cmd>: <diagnosis>" on stderr (and logging
 * it). `gpu_memory_fraction` (0 = none) becomes the device-memory cap. */
int cli_device_choose(const char *cmd, const char *device, double gpu_memory_fraction, int *gpu);

#endif /* CLI_DEVICE_H */
