/* util_bundle.c - see util_bundle.h. */
#include "util_bundle.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ut_src(void) {
    const char *src = getenv("DCM_SRC");
    return src && *src ? src : "..";
}

char *ut_data_path(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/tests/data/%s", ut_src(), rel);
    return buf;
}

char *ut_shared_path(const char *rel, char *buf, size_t n) {
    const char *root = getenv("DCM_SHARED");
    if (root && *root)
        snprintf(buf, n, "%s/%s", root, rel);
    else
        snprintf(buf, n, "%s/../shared/%s", ut_src(), rel);
    return buf;
}

int ut_shared_missing(const char *rel) {
    char path[4096];
    struct stat st;
    if (stat(ut_shared_path(rel, path, sizeof(path)), &st) == 0)
        return 0;
    printf("SKIP: ../shared/%s not found\n", rel);
    fflush(stdout);
    return 1;
}

int ut_mkdtemp(char *buf, size_t n) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/dcmtest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(buf) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int ut_rmtree(const char *path) {
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint8_t *ut_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf)
        *n = len;
    return buf;
}

int ut_write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(buf, 1, n, f);
    int rc = fclose(f);
    return w == n && rc == 0 ? 0 : -1;
}

void ut_gb_write(rt_gb *g, char *dir, size_t n, char *vdir, size_t vn) {
    ck_assert_int_eq(ut_mkdtemp(dir, n), 0);
    snprintf(vdir, vn, "%s/1", dir);
    ck_assert_msg(rt_savedmodel_write(vdir, g) == MS_OK, "write: %s", ms_errmsg());
    rt_gb_free(g);
}

ms_status ut_load_serve(const char *vdir, kn_backend *be, rt_model **m) {
    static const char *const serve[] = {"serve"};
    *m = NULL;
    return rt_model_load(vdir, serve, 1, be, m);
}
