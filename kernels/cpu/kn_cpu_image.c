/* kn_cpu_image.c - CPU kernels of the image group (table filled as ops land). */
#include "kn_cpu.h"

const kn_kernel kn_cpu_image_kernels[] = {
    {.op = NULL},
};
