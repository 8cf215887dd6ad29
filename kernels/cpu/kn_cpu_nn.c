/* kn_cpu_nn.c - CPU kernels of the nn group (table filled as ops land). */
#include "kn_cpu.h"

const kn_kernel kn_cpu_nn_kernels[] = {
    {.op = NULL},
};
