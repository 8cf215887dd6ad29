/* cli.h - the dcmserve subcommands. Each lives in server/cli/cli_<name>.c,
 * takes the arguments after its name (argv[0] = the subcommand) and returns
 * the process exit status. */
#ifndef CLI_H
#define CLI_H

int cli_show(int argc, char **argv);            /* like saved_model_cli show */
int cli_run(int argc, char **argv);             /* like saved_model_cli run */
int cli_serve(int argc, char **argv);           /* the daemon */
int cli_dicom(int argc, char **argv);           /* inspect / convert one DICOM file */
int cli_import_onnx(int argc, char **argv);     /* ONNX -> SavedModel */
int cli_benchmark(int argc, char **argv);       /* in-process latency benchmark */
int cli_make_demo_model(int argc, char **argv); /* write the bundled demo model */
int cli_health(int argc, char **argv);          /* grpc.health.v1 Check: exit 0 if SERVING */
int cli_check(int argc, char **argv);           /* will this SavedModel serve, and why not */
int cli_ops(int argc, char **argv);             /* the supported ops (docs/ops.md) */
int cli_info(int argc, char **argv);            /* version, build, CPU and GPU report */

/* One line to stdout: version, commit and build options (`--version`). */
void cli_print_version(void);

#endif /* CLI_H */
