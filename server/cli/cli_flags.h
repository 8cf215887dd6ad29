/* cli_flags.h - a small flag parser for the CLI subcommands (show, run):
 * `--name=value`, `--name value`, `-name=value`, and boolean `--name`
 * (optionally `--name=true|false|1|0`). Unknown flags and stray positional
 * arguments are errors, reported on stderr as one line. */
#ifndef CLI_FLAGS_H
#define CLI_FLAGS_H

typedef enum cli_flag_kind { CLI_FLAG_STR, CLI_FLAG_BOOL } cli_flag_kind;

typedef struct cli_flag {
    const char *name; /* without dashes; NULL ends the table */
    cli_flag_kind kind;
    const char **str; /* CLI_FLAG_STR: receives the value (borrowed from argv) */
    int *flag;        /* CLI_FLAG_BOOL: set to 0/1 */
} cli_flag;

/* Parses argv[1..argc-1] (argv[0] is the subcommand, used in messages).
 * A flag given twice keeps its last value. Returns 0, or -1 after printing
 * "dcmserve <cmd>: <problem>" to stderr. */
int cli_flags_parse(const char *cmd, int argc, char **argv, cli_flag *flags);

#endif /* CLI_FLAGS_H */
