/* cli_flags.c - flag parsing for the CLI subcommands (see cli_flags.h). */
#include "cli_flags.h"

#include <stdio.h>
#include <string.h>

static cli_flag *lookup(cli_flag *flags, const char *name, size_t n) {
    for (cli_flag *f = flags; f->name != NULL; f++)
        if (strlen(f->name) == n && strncmp(f->name, name, n) == 0) return f;
    return NULL;
}

int cli_flags_parse(const char *cmd, int argc, char **argv, cli_flag *flags) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            fprintf(stderr, "dcmserve %s: unexpected argument '%s'\n", cmd, a);
            return -1;
        }
        const char *name = a + (a[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        cli_flag *f = lookup(flags, name, n);
        if (f == NULL) {
            fprintf(stderr, "dcmserve %s: unknown flag '--%.*s' (see dcmserve %s --help)\n", cmd,
                    (int)n, name, cmd);
            return -1;
        }
        if (f->kind == CLI_FLAG_BOOL) {
            if (eq == NULL || strcmp(eq + 1, "true") == 0 || strcmp(eq + 1, "True") == 0 ||
                strcmp(eq + 1, "1") == 0) {
                *f->flag = 1;
            } else if (strcmp(eq + 1, "false") == 0 || strcmp(eq + 1, "False") == 0 ||
                       strcmp(eq + 1, "0") == 0) {
                *f->flag = 0;
            } else {
                fprintf(stderr, "dcmserve %s: flag --%s takes true or false, not '%s'\n", cmd,
                        f->name, eq + 1);
                return -1;
            }
            continue;
        }
        if (eq != NULL) {
            *f->str = eq + 1;
        } else if (i + 1 < argc) {
            *f->str = argv[++i];
        } else {
            fprintf(stderr, "dcmserve %s: flag --%s needs a value\n", cmd, f->name);
            return -1;
        }
    }
    return 0;
}
