/* cli_make_demo_model.c - `dcmserve make-demo-model DIR`: writes the bundled
 * demo SavedModel version (runtime/savedmodel/rt_demo_model.c) into DIR. Used by
 * scripts/make_demo_model.sh to regenerate models/demo_ct/1. */
#include <stdio.h>
#include <string.h>

#include "rt_demo_model.h"
#include "cli.h"

int cli_make_demo_model(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: dcmserve make-demo-model VERSION_DIR\n"
                        "  writes the demo SavedModel (saved_model.pb + variables/) into "
                        "VERSION_DIR\n");
        return strcmp(argc > 1 ? argv[1] : "", "--help") == 0 ? 0 : 2;
    }
    ms_status st = rt_demo_model_write(argv[1]);
    if (st != MS_OK) {
        fprintf(stderr, "dcmserve make-demo-model: %s\n", ms_errmsg());
        return 1;
    }
    printf("wrote the demo model to %s\n", argv[1]);
    return 0;
}
