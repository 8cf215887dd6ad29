/* kn_cpu_elementwise.c - CPU kernels of the elementwise group (table filled as ops land). */
#include "kn_cpu.h"

const kn_kernel kn_cpu_elementwise_kernels[] = {
    {.op = NULL},
};
