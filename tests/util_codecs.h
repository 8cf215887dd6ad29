/* util_codecs.h - helpers for the codec tests: files, frame manifests made by
 * tests/tools/dump_frames.py, and comparisons against reference pixels. */
#ifndef UTIL_CODECS_H
#define UTIL_CODECS_H

#include <stddef.h>
#include <stdint.h>

#include "dcm_codec.h"

/* Reads a whole file; NULL when it cannot be read. Caller frees. */
uint8_t *ucodec_read_file(const char *path, size_t *len);

/* One frame of a manifest line. */
typedef struct ucodec_frame {
    char name[128];
    dcm_codec_kind kind;
    dcm_frame_geom geom;
    char photometric[32];
    int tolerance;  /* max |decoded - reference| per stored value */
    int expect_rgb; /* expected *out_rgb_converted */
    char frame_path[512];
    char ref_path[512];
    char source[64]; /* what made the reference */
} ucodec_frame;

/* Parses dir/manifest.tsv. Returns the count (0 on error); *out is malloc'ed. */
size_t ucodec_load_manifest(const char *dir, ucodec_frame **out);

/* Runs `/usr/bin/python3 $DCM_SRC/tests/tools/<script> <args>`; returns the
 * exit status (-1 when it could not run). */
int ucodec_run_tool(const char *script, const char *args);

/* Output bytes of a frame for geom (bits_allocated 8/16/32). */
size_t ucodec_frame_size(const dcm_frame_geom *g);

/* Largest |a - b| over the samples of two frames in codec layout, after masking
 * both to geom->bits_stored. */
uint32_t ucodec_max_diff(const dcm_frame_geom *g, const uint8_t *a, const uint8_t *b);

/* Directory for generated test data: $DCM_BIN/<sub> (or /tmp/<sub>), created. */
const char *ucodec_work_dir(const char *sub, char *buf, size_t n);

/* Makes (or reuses) the test frames of tests/tools/dump_frames.py and
 * gen_streams.py under $DCM_BIN and loads both manifests. The generators run
 * only when a manifest is older than its script (or DCM_CODEC_REGEN is set),
 * under a file lock so that test binaries run by `ctest -j` do not race.
 * Returns the frame count (0 on failure); *out is malloc'ed, caller frees. */
size_t ucodec_load_all(ucodec_frame **out);

#endif /* UTIL_CODECS_H */
