/* util_codecs.c - helpers for the codec tests (see util_codecs.h). */
#include "util_codecs.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

uint8_t *ucodec_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

size_t ucodec_load_manifest(const char *dir, ucodec_frame **out) {
    char path[1024], line[2048];
    snprintf(path, sizeof(path), "%s/manifest.tsv", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = 0, cap = 0;
    ucodec_frame *v = NULL;
    while (fgets(line, sizeof(line), f)) {
        ucodec_frame fr;
        memset(&fr, 0, sizeof(fr));
        char fb[256], rf[256];
        int kind, spp, ba, bs, prep, planar;
        unsigned rows, cols;
        if (sscanf(line, "%127s %d %u %u %d %d %d %d %d %31s %d %d %255s %255s %63s", fr.name,
                   &kind, &rows, &cols, &spp, &ba, &bs, &prep, &planar, fr.photometric,
                   &fr.tolerance, &fr.expect_rgb, fb, rf, fr.source) != 15)
            continue;
        fr.kind = (dcm_codec_kind)kind;
        fr.geom.rows = rows;
        fr.geom.cols = cols;
        fr.geom.samples = (uint16_t)spp;
        fr.geom.bits_allocated = (uint16_t)ba;
        fr.geom.bits_stored = (uint16_t)bs;
        fr.geom.pixel_rep = (uint16_t)prep;
        fr.geom.planar = (uint16_t)planar;
        snprintf(fr.frame_path, sizeof(fr.frame_path), "%s/%s", dir, fb);
        snprintf(fr.ref_path, sizeof(fr.ref_path), "%s/%s", dir, rf);
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            ucodec_frame *nv = realloc(v, cap * sizeof(*v));
            if (nv == NULL) break;
            v = nv;
        }
        v[n++] = fr;
    }
    fclose(f);
    /* geom.photometric points into the array, so set it once the array is final. */
    for (size_t i = 0; i < n; i++) v[i].geom.photometric = v[i].photometric;
    *out = v;
    return n;
}

int ucodec_run_tool(const char *script, const char *args) {
    const char *src = getenv("DCM_SRC");
    char cmd[2048];
    if (src == NULL) src = ".";
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s/tests/tools/%s' %s", src, script, args);
    int rc = system(cmd);
    return rc == -1 ? -1 : (rc >> 8);
}

size_t ucodec_frame_size(const dcm_frame_geom *g) {
    return (size_t)g->rows * g->cols * g->samples * (g->bits_allocated / 8u);
}

static uint32_t get_sample(const uint8_t *p, size_t i, unsigned w) {
    if (w == 1) return p[i];
    if (w == 2) return (uint32_t)p[2 * i] | ((uint32_t)p[2 * i + 1] << 8);
    return (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) | ((uint32_t)p[4 * i + 2] << 16) |
           ((uint32_t)p[4 * i + 3] << 24);
}

uint32_t ucodec_max_diff(const dcm_frame_geom *g, const uint8_t *a, const uint8_t *b) {
    const unsigned w = g->bits_allocated / 8u;
    const size_t n = (size_t)g->rows * g->cols * g->samples;
    const uint32_t mask = g->bits_stored >= 32 ? 0xFFFFFFFFu : ((1u << g->bits_stored) - 1u);
    uint32_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = get_sample(a, i, w) & mask, y = get_sample(b, i, w) & mask;
        uint32_t d = x > y ? x - y : y - x;
        if (d > worst) worst = d;
    }
    return worst;
}

const char *ucodec_work_dir(const char *sub, char *buf, size_t n) {
    const char *bin = getenv("DCM_BIN");
    snprintf(buf, n, "%s/%s", bin ? bin : "/tmp", sub);
    mkdir(buf, 0755);
    return buf;
}

/* Runs tests/tools/<script> into dir unless dir's manifest is newer than it. */
static int make_frames(const char *script, const char *dir) {
    char path[1200], args[1200];
    struct stat sm, ss;
    const char *src = getenv("DCM_SRC");
    snprintf(path, sizeof(path), "%s/tests/tools/%s", src ? src : ".", script);
    if (stat(path, &ss) != 0) return -1;
    snprintf(args, sizeof(args), "%s/manifest.tsv", dir);
    if (getenv("DCM_CODEC_REGEN") == NULL && stat(args, &sm) == 0 && sm.st_size > 0 &&
        sm.st_mtime > ss.st_mtime)
        return 0;
    snprintf(args, sizeof(args), "'%s' 2>/dev/null", dir);
    return ucodec_run_tool(script, args);
}

/* Appends the frames of dir's manifest to *all. */
static void add_manifest(const char *dir, ucodec_frame **all, size_t *n) {
    ucodec_frame *v = NULL;
    size_t k = ucodec_load_manifest(dir, &v);
    if (k == 0) return;
    ucodec_frame *nv = realloc(*all, (*n + k) * sizeof(**all));
    if (nv == NULL) {
        free(v);
        return;
    }
    memcpy(nv + *n, v, k * sizeof(*v));
    *all = nv;
    *n += k;
    free(v);
}

size_t ucodec_load_all(ucodec_frame **out) {
    char real[1024], gen[1024], lock[1100];
    ucodec_work_dir("codec_frames", real, sizeof(real));
    ucodec_work_dir("codec_generated", gen, sizeof(gen));
    snprintf(lock, sizeof(lock), "%s.lock", real);
    int fd = open(lock, O_CREAT | O_RDWR, 0644);
    if (fd >= 0) flock(fd, LOCK_EX);
    int rc = make_frames("dump_frames.py", real);
    if (rc == 0) rc = make_frames("gen_streams.py", gen);
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
    if (rc != 0) {
        fprintf(stderr, "util_codecs: making test frames failed (tests/tools/*.py)\n");
        return 0;
    }
    ucodec_frame *all = NULL;
    size_t n = 0;
    add_manifest(real, &all, &n);
    add_manifest(gen, &all, &n);
    for (size_t i = 0; i < n; i++) all[i].geom.photometric = all[i].photometric;
    *out = all;
    return n;
}
