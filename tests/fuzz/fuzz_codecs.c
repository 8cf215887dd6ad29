/* fuzz_codecs.c - libFuzzer target for dcm_codec_decode.
 *
 * Input: a 10-byte header, then the frame's bytes.
 *   [0] codec kind (dcm_codec_kind, taken modulo 9)
 *   [1..2] rows - 1, [3..4] cols - 1 (little-endian; rows*cols capped at 2^20)
 *   [5] samples (bit 0: 1 = three), [6] BitsAllocated (0: 8, 1: 16, 2: 32, 3: 1)
 *   [7] BitsStored - 1, [8] PixelRepresentation, [9] photometric
 *       (0 MONOCHROME2, 1 RGB, 2 YBR_FULL, 3 YBR_FULL_422)
 * tests/fuzz/seed_codecs.py makes a seed corpus from the test frames. */
#include <stdint.h>
#include <stdlib.h>

#include "dcm_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const phot[] = {"MONOCHROME2", "RGB", "YBR_FULL", "YBR_FULL_422"};
    static const uint16_t bits[] = {8, 16, 32, 1};
    if (size < 10) return 0;
    dcm_frame_geom g = {
        .rows = 1u + (data[1] | ((uint32_t)data[2] << 8)),
        .cols = 1u + (data[3] | ((uint32_t)data[4] << 8)),
        .samples = (data[5] & 1) ? 3 : 1,
        .bits_allocated = bits[data[6] & 3],
        .bits_stored = (uint16_t)(1 + data[7]),
        .pixel_rep = data[8] & 1,
        .photometric = phot[data[9] & 3],
    };
    if ((uint64_t)g.rows * g.cols > (1u << 20)) return 0;
    const uint64_t n = (uint64_t)g.rows * g.cols * g.samples;
    const size_t out_size =
        g.bits_allocated == 1 ? (size_t)((n + 7) / 8) : (size_t)(n * (g.bits_allocated / 8));
    uint8_t *out = malloc(out_size);
    if (out == NULL) return 0;
    int rgb;
    (void)dcm_codec_decode((dcm_codec_kind)(data[0] % 9), data + 10, size - 10, &g, out, out_size,
                           &rgb);
    free(out);
    return 0;
}
