/* cli_dirs.c - model directories given to the CLI subcommands (cli_dirs.h). */
#include "cli_dirs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int cli_export_dir(const char *dir, char *out, size_t cap) {
    struct stat sb;
    snprintf(out, cap, "%s/saved_model.pb", dir);
    if (stat(out, &sb) == 0) {
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
        char pb[4096];
        snprintf(pb, sizeof pb, "%s/%s/saved_model.pb", dir, e->d_name);
        if (stat(pb, &sb) != 0) continue;
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
