/* srv_cli.h - the dcmserve subcommands. Each lives in server/cli_<name>.c,
 * takes the arguments after its name (argv[0] = the subcommand) and returns
 * the process exit status. */
#ifndef SRV_CLI_H
#define SRV_CLI_H

int srv_cli_show(int argc, char **argv);            /* like saved_model_cli show */
int srv_cli_run(int argc, char **argv);             /* like saved_model_cli run */
int srv_cli_serve(int argc, char **argv);           /* the daemon */
int srv_cli_dicom(int argc, char **argv);           /* inspect / convert one DICOM file */
int srv_cli_import_onnx(int argc, char **argv);     /* ONNX -> SavedModel */
int srv_cli_benchmark(int argc, char **argv);       /* in-process latency benchmark */
int srv_cli_make_demo_model(int argc, char **argv); /* write the bundled demo model */

#endif /* SRV_CLI_H */
