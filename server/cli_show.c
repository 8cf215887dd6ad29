/* cli_show.c - placeholder until the subcommand lands. */
#include <stdio.h>

#include "srv_cli.h"

int srv_cli_show(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "dcmserve %s: not implemented yet\n", argv[0]);
    return 2;
}
