/* fuzz_dicom.c - libFuzzer target: the DICOM parser, pixel module (and the
 * codecs behind it, when linked), header summary and windowing on arbitrary
 * bytes. Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_dicom -max_total_time=600 CORPUS_DIR SEED_DIR. */
#include <stddef.h>
#include <stdint.h>

#include "dcm_parse.h"
#include "dcm_pixel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dcm_limits lim;
    dcm_limits_default(&lim);
    lim.max_pixel_bytes = (uint64_t)64 << 20; /* keep single inputs small and fast */
    lim.max_inflated = (uint64_t)64 << 20;
    dcm_dataset *ds = NULL;
    if (dcm_parse(data, size, &lim, &ds) != MS_OK) return 0;
    dcm_info info;
    (void)dcm_read_info(ds, &info);
    dcm_image *img = NULL;
    if (dcm_decode_hu_ds(ds, &lim, &img) == MS_OK) {
        size_t n = (size_t)img->frames * img->rows * img->cols * img->samples;
        (void)dcm_window(img->data, img->data, n, 40, 400);
        dcm_image_free(img);
    }
    dcm_dataset_free(ds);
    return 0;
}
