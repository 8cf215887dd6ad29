/* bench_gpu_dicom.c - achieved memory bandwidth of the fused DICOM kernel
 * (kernels/cuda/kn_cuda_dicom.cu): N int16 CT frames of 512x512 on the
 * device, windowed 40/400 and written as float32 at 512x512 (no resize) and
 * resized to 224x224x3 (NHWC), timed over repeated launches after warm-up.
 * Bytes counted: stored pixels read once + floats written (the kernel's
 * minimum traffic). Prints one markdown row per case. Then the same for
 * _DcmPixelTransform's kernel (kn_cuda_dicom_xform, the one the graph's
 * split DICOM op runs): the same words as stored 16-bit values with per-file
 * parameters, 512x512x1 and resized to 256x256x1 (masked).
 *
 * usage: bench_gpu_dicom [frames=128] [iterations=200]   (needs a GPU) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kn_cuda_dicom.cuh"
#include "kn_cuda_probe.h"
#include "kn_cuda_rt.cuh"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    unsigned frames = argc > 1 ? (unsigned)atoi(argv[1]) : 128;
    int iters = argc > 2 ? atoi(argv[2]) : 200;
    if (frames < 1 || iters < 1) return 2;
    kn_cuda_report r;
    kn_cuda_probe(NULL, &r);
    kn_device_spec spec = {KN_DEVICE_CUDA, -1};
    int gpu = -1;
    char why[768];
    if (kn_device_select(&spec, &r, &gpu, why, sizeof why) != MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 77;
    }
    void *stream = NULL;
    kn_cuda_arena *a = NULL;
    const uint64_t in_bytes = (uint64_t)frames * 512 * 512 * 2;
    const uint64_t out_bytes = (uint64_t)frames * 512 * 512 * 4;
    if (kn_cuda_set_device(gpu) != MS_OK || kn_cuda_stream_new(&stream) != MS_OK ||
        kn_cuda_arena_new("bench", in_bytes + out_bytes + (uint64_t)frames * 64 + 8192, &a) !=
            MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 1;
    }
    int16_t *host = NULL;
    if (kn_cuda_host_alloc(in_bytes, (void **)&host) != MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 1;
    }
    uint32_t s = 1;
    for (uint64_t i = 0; i < in_bytes / 2; i++) {
        s = s * 1664525u + 1013904223u;
        host[i] = (int16_t)((s >> 16) % 4096) - 1024;
    }
    void *draw = kn_cuda_arena_alloc(a, in_bytes);
    float *dout = kn_cuda_arena_alloc(a, out_bytes);
    double t0 = now_s();
    if (kn_cuda_h2d(draw, host, in_bytes, stream, "h2d") != MS_OK ||
        kn_cuda_stream_sync(stream, "h2d") != MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 1;
    }
    double h2d = now_s() - t0;
    printf("%s; H2D of %u frames from pinned memory: %.2f GB/s\n\n", why, frames,
           (double)in_bytes / h2d / 1e9);
    printf("| case | frames | ms per batch | GB/s (read + written) |\n|---|---|---|---|\n");
    const struct {
        const char *name;
        uint32_t oh, ow, ch;
    } cases[] = {{"512x512 int16 -> 512x512x1 f32", 512, 512, 1},
                 {"512x512 int16 -> 224x224x3 f32 (resize)", 224, 224, 3}};
    for (int c = 0; c < 2; c++) {
        kn_cuda_dicom_params p = {.pix = KN_CUDA_PIX_S16, .bits_stored = 16, .slope = 1.f,
                                  .intercept = -1024.f, .window = 1, .lo = -160.f, .hi = 240.f,
                                  .ih = 512, .iw = 512, .oh = cases[c].oh, .ow = cases[c].ow,
                                  .channels = cases[c].ch, .nchw = 0};
        for (int i = 0; i < 10; i++)
            if (kn_cuda_dicom_fused(draw, frames, &p, dout, stream) != MS_OK) {
                printf("bench_gpu_dicom: %s\n", ms_errmsg());
                return 1;
            }
        if (kn_cuda_stream_sync(stream, "warm-up") != MS_OK) {
            printf("bench_gpu_dicom: %s\n", ms_errmsg());
            return 1;
        }
        t0 = now_s();
        for (int i = 0; i < iters; i++)
            if (kn_cuda_dicom_fused(draw, frames, &p, dout, stream) != MS_OK) {
                printf("bench_gpu_dicom: %s\n", ms_errmsg());
                return 1;
            }
        if (kn_cuda_stream_sync(stream, "timed") != MS_OK) {
            printf("bench_gpu_dicom: %s\n", ms_errmsg());
            return 1;
        }
        double dt = (now_s() - t0) / iters;
        printf("| %s | %u | %.3f | %.1f |\n", cases[c].name, frames, dt * 1e3,
               (double)kn_cuda_dicom_bytes(frames, &p) / dt / 1e9);
    }
    /* _DcmPixelTransform: per-file rows on the device, then the same loop */
    kn_dcm_xform_file *files = NULL;
    if (kn_cuda_host_alloc((size_t)frames * sizeof(*files), (void **)&files) != MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 1;
    }
    for (unsigned i = 0; i < frames; i++)
        files[i] = (kn_dcm_xform_file){.rows = 512, .cols = 512, .mask = 0xFFFFu,
                                       .sign = 0x8000u, .slope = 1.f, .intercept = -1024.f};
    void *dfiles = kn_cuda_arena_alloc(a, (uint64_t)frames * sizeof(*files));
    if (dfiles == NULL ||
        kn_cuda_h2d(dfiles, files, (size_t)frames * sizeof(*files), stream, "h2d") != MS_OK ||
        kn_cuda_stream_sync(stream, "h2d") != MS_OK) {
        printf("bench_gpu_dicom: %s\n", ms_errmsg());
        return 1;
    }
    const uint32_t xs[2] = {512, 256};
    for (int c = 0; c < 2; c++) {
        kn_dcm_xform_geom g = {.n = frames, .H = 512, .W = 512, .C = 1, .oh = xs[c], .ow = xs[c],
                               .resize = xs[c] != 512, .masked = 1, .lo = -160.f, .hi = 240.f,
                               .range = 400.f, .wpad = 0.f};
        for (int i = 0; i < 10 + iters; i++) {
            if (i == 10) {
                if (kn_cuda_stream_sync(stream, "warm-up") != MS_OK) break;
                t0 = now_s();
            }
            if (kn_cuda_dicom_xform(draw, dfiles, &g, dout, stream) != MS_OK) {
                printf("bench_gpu_dicom: %s\n", ms_errmsg());
                return 1;
            }
        }
        if (kn_cuda_stream_sync(stream, "timed") != MS_OK) {
            printf("bench_gpu_dicom: %s\n", ms_errmsg());
            return 1;
        }
        double dt = (now_s() - t0) / iters;
        uint64_t bytes = (uint64_t)frames * (512 * 512 * 2 + (uint64_t)xs[c] * xs[c] * 4 +
                                             sizeof(kn_dcm_xform_file));
        printf("| _DcmPixelTransform 512x512 words -> %ux%ux1 f32%s | %u | %.3f | %.1f |\n", xs[c],
               xs[c], g.resize ? " (resize)" : "", frames, dt * 1e3, (double)bytes / dt / 1e9);
    }
    kn_cuda_host_free(files);
    kn_cuda_host_free(host);
    kn_cuda_arena_free(a);
    kn_cuda_stream_free(stream);
    return 0;
}
