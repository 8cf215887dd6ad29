/* kn_cpu_shape.c - CPU kernels of the shape group (table filled as ops land). */
#include "kn_cpu.h"

const kn_kernel kn_cpu_shape_kernels[] = {
    {.op = NULL},
};
