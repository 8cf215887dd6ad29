/* cli_opfam.h - the op families of `dcmserve ops` (docs/ops.md): which
 * well-known architectures and exporters put each group of ops into their
 * graphs. Kept as data in one table (cli_opfam.c) so the generated docs
 * never guess: every op a family names must have a kernel or host op, and
 * `dcmserve ops` fails naming it when one does not. */
#ifndef CLI_OPFAM_H
#define CLI_OPFAM_H

typedef struct cli_opfam {
    const char *name;        /* the family, e.g. "depthwise convolution" */
    const char *archs;       /* the architectures / exporters that use it */
    const char *const *ops;  /* NULL-terminated op names */
} cli_opfam;

/* The families, ended by an entry whose name is NULL. An op may be in
 * several. */
extern const cli_opfam cli_opfams[];

#endif /* CLI_OPFAM_H */
