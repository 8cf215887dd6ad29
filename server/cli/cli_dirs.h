/* cli_dirs.h - model directories given to the CLI subcommands. */
#ifndef CLI_DIRS_H
#define CLI_DIRS_H

#include <stddef.h>

/* The export dir for DIR: DIR itself when it holds saved_model.pb or
 * model.onnx (rt_model.h), else its highest numeric subfolder holding one (a
 * base directory, as the daemon's --model_base_path). 0 on success, -1 when
 * neither exists. */
int cli_export_dir(const char *dir, char *out, size_t cap);

#endif /* CLI_DIRS_H */
