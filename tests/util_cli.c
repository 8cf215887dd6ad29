/* util_cli.c - helpers for the signature / .npy / CLI Check tests. */
#include "util_cli.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

rt_tensor *util_cli_tensor(rt_dtype dt, int rank, const int64_t *dims, const void *vals) {
    rt_shape s = rt_shape_make(rank, dims);
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(dt, &s, &t), MS_OK);
    if (vals != NULL && rt_tensor_nbytes(t) > 0) memcpy(t->data, vals, rt_tensor_nbytes(t));
    return t;
}

int util_cli_python(const char *dir, const char *script) {
    char path[4096], cmd[8400];
    snprintf(path, sizeof(path), "%s/script.py", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cd '%s' && /usr/bin/python3 script.py", dir);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

char *util_cli_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap + 1);
    while (b != NULL) {
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *nb = realloc(b, cap * 2 + 1);
        if (nb == NULL) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b == NULL) return NULL;
    b[len] = '\0';
    if (n) *n = len;
    return b;
}
