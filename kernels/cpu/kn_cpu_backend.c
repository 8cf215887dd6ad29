/* kn_cpu_backend.c - the CPU backend: op lookup over the kernel tables. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "kn_cpu.h"
#include "kn_cpu_backend.h"

static const kn_kernel *const groups[] = {
    kn_cpu_fast_kernels, kn_cpu_conv3d_kernels, kn_cpu_elementwise_kernels, kn_cpu_shape_kernels,
    kn_cpu_reduce_kernels, kn_cpu_nn_kernels, kn_cpu_image_kernels, kn_cpu_index_kernels,
    kn_cpu_reverse_kernels,
    kn_cpu_random_kernels, kn_cpu_imgproj_kernels, kn_cpu_segment_kernels,
    kn_cpu_hash_kernels, kn_cpu_str_kernels, kn_cpu_regex_kernels, kn_cpu_unique_kernels,
    kn_cpu_sparse_kernels, kn_cpu_einsum_kernels, kn_cpu_math_kernels,
    kn_cpu_space_kernels, kn_cpu_nms_kernels, kn_cpu_resize_kernels,
    kn_cpu_fft_kernels, kn_cpu_complex_kernels,
    kn_cpu_dcmxform_kernels,
    kn_cpu_onnx_kernels, kn_cpu_onnx_img_kernels, kn_cpu_onnx_str_kernels,
    kn_cpu_onnx_signal_kernels, kn_cpu_onnx_cache_kernels,
    kn_cpu_rnn_kernels,
    kn_cpu_quant_kernels,
};

const kn_kernel *const *kn_cpu_kernel_tables(size_t *n) {
    *n = sizeof(groups) / sizeof(groups[0]);
    return groups;
}

static const char *cpu_name(kn_backend *b) {
    (void)b;
    return "cpu";
}

static const kn_kernel *cpu_kernel(kn_backend *b, const char *op) {
    (void)b;
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
        for (const kn_kernel *k = groups[g]; k->op != NULL; k++)
            if (strcmp(k->op, op) == 0) return k;
    return NULL;
}

static void cpu_free(kn_backend *b) {
    free(b);
}

kn_backend *kn_cpu_backend_new(int intra_op_threads) {
    kn_backend *b = calloc(1, sizeof(*b));
    if (b == NULL) return NULL;
    if (intra_op_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        intra_op_threads = n > 0 ? (int)n : 1;
    }
    b->api_version = KN_BACKEND_API_VERSION;
    b->iface = (struct kn_backend_i){
        .name = cpu_name,
        .kernel = cpu_kernel,
        .sync = NULL,
        .free = cpu_free,
    };
    b->intra_op_threads = intra_op_threads;
    /* OpenBLAS (reference kernels only) is linked serial where Debian's
     * serial build is installed (CMakeLists.txt); a threaded build keeps its
     * own pool, held to no more threads than ours. */
    openblas_set_num_threads(intra_op_threads);
    return b;
}
