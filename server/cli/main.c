/* main.c - dcmserve entry point: dispatches to the subcommands of cli.h.
 * With no subcommand but flags (dcmserve --port=8500 ...), it serves, so that
 * tensorflow_model_server command lines work unchanged. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rt_onnx_load.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cmds[] = {
    {"serve", cli_serve, "run the model server (TF Serving / KServe gRPC, health)"},
    {"show", cli_show, "show a SavedModel's tag-sets and signatures"},
    {"run", cli_run, "run a SavedModel signature on inputs from the command line"},
    {"dicom", cli_dicom, "decode a DICOM file: header summary, HU or windowed arrays"},
    {"import-onnx", cli_import_onnx, "convert an ONNX model into a SavedModel directory"},
    {"benchmark", cli_benchmark, "time a SavedModel signature in-process"},
    {"make-demo-model", cli_make_demo_model, "write the bundled demo SavedModel into a folder"},
    {"health", cli_health, "ask a running server's grpc.health service; exit 0 when SERVING"},
    {"check", cli_check, "say whether a SavedModel serves: ops, unsupported ops, variables"},
    {"ops", cli_ops, "print the supported TensorFlow ops (docs/ops.md)"},
    {"info", cli_info, "version, build options, CPU features, GPUs (or why none is usable)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: dcmserve <command> [flags]   (dcmserve <command> --help for its flags)\n\n");
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "\n`dcmserve --port=8500 --model_name=m --model_base_path=/models/m` (flags only)\n"
               "is the same as `dcmserve serve ...`, as with tensorflow_model_server.\n");
}

int main(int argc, char **argv) {
    /* every subcommand that loads a version folder also takes model.onnx */
    rt_onnx_serve_enable();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (argv[1][0] == '-') return cli_serve(argc, argv);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "dcmserve: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
