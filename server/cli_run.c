/* cli_run.c - placeholder until the subcommand lands. */
#include <stdio.h>

#include "srv_cli.h"

int srv_cli_run(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "dcmserve %s: not implemented yet\n", argv[0]);
    return 2;
}
