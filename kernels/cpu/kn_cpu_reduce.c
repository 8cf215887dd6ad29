/* kn_cpu_reduce.c - CPU kernels of the reduce group (table filled as ops land). */
#include "kn_cpu.h"

const kn_kernel kn_cpu_reduce_kernels[] = {
    {.op = NULL},
};
