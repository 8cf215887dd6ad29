/* cli_dirs.c - model directories given to the CLI subcommands (cli_dirs.h). */
#include "cli_dirs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "rt_model.h"

/* 1 when dir holds a model the loader reads: saved_model.pb or model.onnx. */
static int holds_model(const char *dir) {
    static const char *const files[] = {"saved_model.pb", RT_MODEL_ONNX_FILE};
    struct stat sb;
    char path[4096 + 32];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &sb) == 0) return 1;
    }
    return 0;
}

int cli_export_dir(const char *dir, char *out, size_t cap) {
    if (holds_model(dir)) {
        snprintf(out, cap, "%s", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    long long best = -1;
    char best_name[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long long v = strtoll(e->d_name, &end, 10);
        if (e->d_name[0] == '\0' || e->d_name[0] == '-' || *end != '\0' || v < 0) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (!holds_model(sub)) continue;
        if (v > best) {
            best = v;
            snprintf(best_name, sizeof best_name, "%s", e->d_name); /* "00000123" stays so */
        }
    }
    closedir(d);
    if (best < 0) return -1;
    snprintf(out, cap, "%s/%s", dir, best_name);
    return 0;
}
