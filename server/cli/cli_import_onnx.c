/* cli_import_onnx.c - `dcmserve import-onnx MODEL.onnx --output_dir BASE/VERSION`:
 * converts an ONNX model into a SavedModel directory (runtime/onnx/rt_onnx.h). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_log.h"
#include "rt_onnx.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dcmserve import-onnx MODEL.onnx --output_dir BASE/VERSION [--tf_layout NHWC]\n"
            "           [--dicom_input NAME --window L,W [--layout NCHW] [--size HxW]]\n"
            "\n"
            "Converts an ONNX model (opsets 11-17) into a SavedModel directory that\n"
            "dcmserve serves: saved_model.pb with a serving_default signature whose\n"
            "keys are the ONNX graph input/output names (dynamic batch = -1).\n"
            "External weight files are read from the model's folder.\n"
            "\n"
            "  --output_dir DIR     where to write (created; usually BASE/1); a folder that\n"
            "                       already holds files is refused (it may be a served version)\n"
            "  --overwrite          write into a --output_dir that already holds files\n"
            "  --dicom_input NAME   the signature input NAME takes DICOM files (DT_STRING,\n"
            "                       one per batch element): decoded to HU, windowed to\n"
            "                       [0, 1] and fed to graph input NAME\n"
            "  --window L,W         window level and width for --dicom_input (optional\n"
            "                       with --dicom_volume: without it the volume is HU)\n"
            "  --layout NCHW|NHWC   layout of graph input NAME (default NCHW, as ONNX)\n"
            "  --size HxW           resize the windowed image to H x W (bilinear)\n"
            "  --dicom_modality CT[,MR...]  refuse DICOM files of other modalities\n"
            "  --dicom_volume       --dicom_input takes a whole series (N files of one\n"
            "                       series in any order, or one multi-frame file) as a\n"
            "                       5-D volume [1, 1, D, H, W] (NDHWC with --layout NHWC)\n"
            "  --spacing Z,Y,X      with --dicom_volume: resample to this spacing (mm)\n"
            "  --dicom_seg_output NAME  with --dicom_volume: the graph output NAME (a label\n"
            "                       volume, uint8/int32/int64, on the series' grid) is also\n"
            "                       returned as a DICOM Segmentation file, output \"dicom_seg\"\n"
            "  --dicom_seg_labels A,B,...  segment labels (label value 1 is A, ...)\n"
            "  --dicom_seg_uid_root ROOT   UID root for the SEG's new UIDs (default 2.25)\n"
            "  --sliding_window roi=Z,Y,X  (implies --dicom_volume) run the 3-D model on\n"
            "                       patches of Z x Y x X voxels over the whole volume and\n"
            "                       blend them (MONAI's SlidingWindowInferer); the output\n"
            "                       is the blended full-volume prediction (with --spacing:\n"
            "                       resampled back to the series' own grid)\n"
            "  --overlap O          window overlap, 0 <= O < 1 (default 0.25)\n"
            "  --blend constant|gaussian  weights (default constant)\n"
            "  --sigma_scale S      gaussian sigma = S * roi per axis (default 0.125)\n"
            "  --sw_batch B         patches per model run (default 1)\n"
            "  --argmax             also output NAME_labels: arg-max over channels, uint8\n"
            "  --tf_layout L        NHWC (default: activations channels-last inside the\n"
            "                       graph, the CPU kernels' native layout) or NCHW\n"
            "  --log_level LEVEL    debug, info, warn, error\n");
}

/* 1 when dir exists and holds anything: a version folder someone may serve
 * (the daemon would pick up a half-written overwrite), so only --overwrite
 * writes there. 0 when it is missing or empty; -1 (errno set) if unreadable. */
static int dir_has_files(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return errno == ENOENT ? 0 : -1;
    int any = 0;
    for (struct dirent *e; !any && (e = readdir(d)) != NULL;)
        any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return any;
}

int cli_import_onnx(int argc, char **argv) {
    static const struct option longopts[] = {
        {"output_dir", required_argument, NULL, 'o'},
        {"dicom_input", required_argument, NULL, 'd'},
        {"window", required_argument, NULL, 'w'},
        {"layout", required_argument, NULL, 'l'},
        {"size", required_argument, NULL, 's'},
        {"dicom_modality", required_argument, NULL, 'M'},
        {"dicom_volume", no_argument, NULL, 'V'},
        {"spacing", required_argument, NULL, 'S'},
        {"dicom_seg_output", required_argument, NULL, 'g'},
        {"dicom_seg_labels", required_argument, NULL, 'G'},
        {"dicom_seg_uid_root", required_argument, NULL, 'U'},
        {"tf_layout", required_argument, NULL, 'T'},
        {"sliding_window", required_argument, NULL, 'W'},
        {"overlap", required_argument, NULL, 'P'},
        {"blend", required_argument, NULL, 'B'},
        {"sigma_scale", required_argument, NULL, 'Z'},
        {"sw_batch", required_argument, NULL, 'N'},
        {"argmax", no_argument, NULL, 'A'},
        {"log_level", required_argument, NULL, 'L'},
        {"overwrite", no_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_dir = NULL;
    rt_onnx_opts opts = {0};
    int have_window = 0, overwrite = 0, sw_opt = 0;
    double overlap = 0.25;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out_dir = optarg;
            break;
        case 'd':
            opts.dicom_input = optarg;
            break;
        case 'w':
            if (sscanf(optarg, "%f,%f", &opts.window_center, &opts.window_width) != 2 ||
                !(opts.window_width > 0)) {
                fprintf(stderr, "import-onnx: --window wants L,W with W > 0, got \"%s\"\n", optarg);
                return 2;
            }
            have_window = 1;
            break;
        case 'l':
            if (strcmp(optarg, "NCHW") == 0)
                opts.dicom_nhwc = 0;
            else if (strcmp(optarg, "NHWC") == 0)
                opts.dicom_nhwc = 1;
            else {
                fprintf(stderr, "import-onnx: --layout wants NCHW or NHWC, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 's': {
            long long h, w;
            char extra;
            if (sscanf(optarg, "%lldx%lld%c", &h, &w, &extra) != 2 || h <= 0 || w <= 0) {
                fprintf(stderr, "import-onnx: --size wants HxW (e.g. 512x512), got \"%s\"\n",
                        optarg);
                return 2;
            }
            opts.size_h = h;
            opts.size_w = w;
            break;
        }
        case 'M':
            opts.dicom_modality = optarg;
            break;
        case 'V':
            opts.dicom_volume = 1;
            break;
        case 'g':
            opts.dicom_seg_output = optarg;
            break;
        case 'G':
            opts.dicom_seg_labels = optarg;
            break;
        case 'U':
            opts.dicom_seg_uid_root = optarg;
            break;
        case 'S': {
            char extra;
            float *sp = opts.spacing;
            if (sscanf(optarg, "%f,%f,%f%c", &sp[0], &sp[1], &sp[2], &extra) != 3 ||
                !(sp[0] > 0) || !(sp[1] > 0) || !(sp[2] > 0)) {
                fprintf(stderr, "import-onnx: --spacing wants Z,Y,X in mm (all > 0), got \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'W': {
            long long r[3];
            char extra;
            if (sscanf(optarg, "roi=%lld,%lld,%lld%c", &r[0], &r[1], &r[2], &extra) != 3 ||
                r[0] <= 0 || r[1] <= 0 || r[2] <= 0 || r[0] > INT32_MAX || r[1] > INT32_MAX ||
                r[2] > INT32_MAX) {
                fprintf(stderr, "import-onnx: --sliding_window wants roi=Z,Y,X (voxels, all > 0), "
                                "got \"%s\"\n", optarg);
                return 2;
            }
            for (int a = 0; a < 3; a++) opts.sw_roi[a] = r[a];
            break;
        }
        case 'P': {
            char *end;
            overlap = strtod(optarg, &end);
            if (end == optarg || *end || !(overlap >= 0 && overlap < 1)) {
                fprintf(stderr, "import-onnx: --overlap wants 0 <= O < 1, got \"%s\"\n", optarg);
                return 2;
            }
            sw_opt = 1;
            break;
        }
        case 'B':
            if (strcmp(optarg, "constant") == 0 || strcmp(optarg, "gaussian") == 0)
                opts.sw_gaussian = optarg[0] == 'g';
            else {
                fprintf(stderr, "import-onnx: --blend wants constant or gaussian, got \"%s\"\n",
                        optarg);
                return 2;
            }
            sw_opt = 1;
            break;
        case 'Z': {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || !(v > 0 && v <= 100)) {
                fprintf(stderr, "import-onnx: --sigma_scale wants a number in (0, 100], got "
                                "\"%s\"\n", optarg);
                return 2;
            }
            opts.sw_sigma_scale = (float)v;
            sw_opt = 1;
            break;
        }
        case 'N': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 4096) {
                fprintf(stderr, "import-onnx: --sw_batch wants 1..4096, got \"%s\"\n", optarg);
                return 2;
            }
            opts.sw_batch = v;
            sw_opt = 1;
            break;
        }
        case 'A':
            opts.sw_argmax = 1;
            sw_opt = 1;
            break;
        case 'T':
            if (strcmp(optarg, "NCHW") == 0)
                opts.tf_nchw = 1;
            else if (strcmp(optarg, "NHWC") == 0)
                opts.tf_nchw = 0;
            else {
                fprintf(stderr, "import-onnx: --tf_layout wants NHWC or NCHW, got \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'L': {
            ms_log_level lvl;
            if (ms_log_parse_level(optarg, &lvl) != 0) {
                fprintf(stderr, "import-onnx: unknown --log_level \"%s\"\n", optarg);
                return 2;
            }
            ms_log_set_level(lvl);
            break;
        }
        case 'O':
            overwrite = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "import-onnx: unknown or incomplete option \"%s\"\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc || out_dir == NULL) {
        fprintf(stderr, "import-onnx: need exactly one MODEL.onnx and --output_dir\n");
        usage(stderr);
        return 2;
    }
    if (sw_opt && opts.sw_roi[0] == 0) {
        fprintf(stderr, "import-onnx: --overlap, --blend, --sigma_scale, --sw_batch and --argmax "
                        "go with --sliding_window\n");
        return 2;
    }
    if (opts.sw_roi[0] > 0) {
        if (!opts.dicom_input) {
            fprintf(stderr, "import-onnx: --sliding_window goes with --dicom_input\n");
            return 2;
        }
        opts.dicom_volume = 1;
        /* MONAI's scan interval, in double as it computes it. */
        for (int a = 0; a < 3; a++) {
            int64_t iv = (int64_t)((double)opts.sw_roi[a] * (1.0 - overlap));
            opts.sw_interval[a] = iv > 0 ? iv : 1;
        }
        opts.sw_overlap = (float)overlap;
    }
    if ((opts.dicom_volume || opts.spacing[0] > 0) && !opts.dicom_input) {
        fprintf(stderr, "import-onnx: --dicom_volume and --spacing go with --dicom_input\n");
        return 2;
    }
    if (opts.dicom_volume && opts.size_h > 0) {
        fprintf(stderr, "import-onnx: --size is for 2-D images; a volume takes --spacing Z,Y,X\n");
        return 2;
    }
    if ((opts.dicom_seg_output || opts.dicom_seg_labels || opts.dicom_seg_uid_root) &&
        !opts.dicom_volume) {
        fprintf(stderr, "import-onnx: --dicom_seg_output, --dicom_seg_labels and "
                        "--dicom_seg_uid_root go with --dicom_volume\n");
        return 2;
    }
    if ((opts.dicom_seg_labels || opts.dicom_seg_uid_root) && !opts.dicom_seg_output) {
        fprintf(stderr, "import-onnx: --dicom_seg_labels and --dicom_seg_uid_root need "
                        "--dicom_seg_output\n");
        return 2;
    }
    if (opts.dicom_seg_output && opts.spacing[0] > 0) {
        fprintf(stderr, "import-onnx: --dicom_seg_output needs the labels on the series' own "
                        "grid; it does not go with --spacing\n");
        return 2;
    }
    if (opts.spacing[0] > 0 && !opts.dicom_volume) {
        fprintf(stderr, "import-onnx: --spacing needs --dicom_volume\n");
        return 2;
    }
    if (opts.dicom_input && !have_window && !opts.dicom_volume) {
        fprintf(stderr, "import-onnx: --dicom_input needs --window L,W (or --dicom_volume: "
                        "HU volumes)\n");
        return 2;
    }
    int full = dir_has_files(out_dir);
    if (full != 0 && !overwrite) {
        if (full < 0)
            fprintf(stderr, "import-onnx: --output_dir %s: %s\n", out_dir, strerror(errno));
        else
            fprintf(stderr, "import-onnx: --output_dir %s already holds files (a served version?); "
                            "write a new version folder (e.g. BASE/2), or pass --overwrite\n",
                    out_dir);
        return 1;
    }
    const char *model = argv[optind];
    ms_status st = rt_onnx_import(model, out_dir, &opts);
    if (st != MS_OK) {
        fprintf(stderr, "import-onnx: %s\n", ms_errmsg());
        return 1;
    }
    printf("wrote %s/saved_model.pb\n", out_dir);
    return 0;
}
