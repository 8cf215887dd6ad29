/* cli_dicom.c - `dcmserve dicom FILE [--window L,W] [--out F.npy] [--json] [--png F.png]`:
 * prints the header summary of one DICOM file, and writes its pixels as a
 * float32 .npy (frames, rows, cols, samples) of HU, or of windowed [0,1]
 * values with --window; --png writes the windowed image as 8-bit (grey, RGB
 * for colour), one frame or a contact sheet of all frames.
 * `dcmserve dicom --volume FILE... [--window L,W] [--spacing Z,Y,X] [--out F.npy] [--json]`:
 * the files as one series (DcmDecodeVolume's checks and values): prints the
 * series' geometry and writes the (D, H, W) volume, HU unless --window.
 * Exit status 0 on success, 1 with a one-line reason when the file (series)
 * cannot be decoded, 2 for bad usage. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcm_pixel.h"
#include "dcm_volume.h"
#include "kn_ctx.h"
#include "rt_npy.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: dcmserve dicom FILE [--window L,W] [--out F.npy] [--json] [--png F.png]\n"
               "  prints the header summary (transfer syntax, modality, size, frames, bits,\n"
               "  photometric, slope/intercept, window)\n"
               "  --out F.npy    float32 (frames, rows, cols, samples): HU, or windowed [0,1]\n"
               "                 values when --window is given\n"
               "  --window L,W   clip(HU, L-W/2, L+W/2), then (x-lo)/(hi-lo)\n"
               "  --png F.png    the windowed image, 8-bit (contact sheet for several frames);\n"
               "                 window: --window, else the file's, else min..max\n"
               "  --json         print the summary as one JSON object\n"
               "usage: dcmserve dicom --volume FILE... [--window L,W] [--spacing Z,Y,X]\n"
               "           [--out F.npy] [--json]\n"
               "  the files as one series, checked and sorted as a --dicom_volume model does:\n"
               "  prints slices x rows x columns, spacing, orientation, first and last\n"
               "  position; --out writes float32 (D, H, W): HU, or windowed with --window;\n"
               "  --spacing resamples to Z,Y,X mm. A refused series: exit 1 and the reason\n");
}

static ms_status read_file(const char *path, uint8_t **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf != NULL) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory reading %s", path);
    if (err) {
        free(buf);
        return ms_errf(MS_EINVAL, "read error on %s", path);
    }
    *out = buf;
    *len = n;
    return MS_OK;
}

static const char *rescale_name(int src) {
    switch (src) {
    case DCM_RESCALE_ATTRS:
        return "rescale";
    case DCM_RESCALE_FUNCTIONAL:
        return "functional-groups";
    case DCM_RESCALE_LUT:
        return "modality-lut";
    default:
        return "none";
    }
}

static void print_text(const char *path, const dcm_dataset *ds, const dcm_info *in) {
    printf("file:            %s\n", path);
    printf("transfer syntax: %s (%s)%s%s\n", in->ts_uid, in->ts_name ? in->ts_name : "unknown",
           ds->ts_note ? "; " : "", ds->ts_note ? ds->ts_note : "");
    printf("sop class:       %s\n", in->sop_class);
    printf("modality:        %s\n", in->modality);
    printf("size:            %u rows x %u cols x %u samples\n", in->rows, in->cols, in->samples);
    printf("frames:          %u\n", in->frames);
    if (in->float_pixels)
        printf("bits:            float%d pixel data\n", in->float_pixels);
    else
        printf("bits:            allocated %u, stored %u, high bit %u, %s\n", in->bits_allocated,
               in->bits_stored, in->high_bit, in->pixel_rep ? "signed" : "unsigned");
    printf("photometric:     %s%s\n", in->photometric,
           in->samples > 1 ? (in->planar ? " (planar)" : " (interleaved)") : "");
    printf("pixel data:      %s\n", !in->has_pixels    ? "none"
                                    : in->encapsulated ? "encapsulated"
                                                       : "native");
    if (in->encapsulated) printf("fragments:       %u\n", in->fragments);
    printf("modality lut:    %s, slope %.9g, intercept %.9g%s%s\n",
           rescale_name(in->rescale_source), in->slope, in->intercept,
           in->rescale_type[0] ? ", type " : "", in->rescale_type);
    if (in->has_window)
        printf("window:          center %.9g, width %.9g%s%s\n", in->window_center,
               in->window_width, in->voi_function[0] ? ", " : "", in->voi_function);
    else
        printf("window:          none\n");
}

static void print_json(const char *path, const dcm_dataset *ds, const dcm_info *in) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "transfer_syntax", in->ts_uid);
    cJSON_AddStringToObject(o, "transfer_syntax_name", in->ts_name ? in->ts_name : "unknown");
    if (ds->ts_note) cJSON_AddStringToObject(o, "transfer_syntax_note", ds->ts_note);
    cJSON_AddStringToObject(o, "sop_class", in->sop_class);
    cJSON_AddStringToObject(o, "modality", in->modality);
    cJSON_AddNumberToObject(o, "rows", in->rows);
    cJSON_AddNumberToObject(o, "columns", in->cols);
    cJSON_AddNumberToObject(o, "samples_per_pixel", in->samples);
    cJSON_AddNumberToObject(o, "frames", in->frames);
    cJSON_AddNumberToObject(o, "bits_allocated",
                            in->float_pixels ? in->float_pixels : in->bits_allocated);
    cJSON_AddNumberToObject(o, "bits_stored", in->bits_stored);
    cJSON_AddNumberToObject(o, "high_bit", in->high_bit);
    cJSON_AddNumberToObject(o, "pixel_representation", in->pixel_rep);
    cJSON_AddBoolToObject(o, "float_pixel_data", in->float_pixels != 0);
    cJSON_AddStringToObject(o, "photometric", in->photometric);
    cJSON_AddNumberToObject(o, "planar_configuration", in->planar);
    cJSON_AddStringToObject(o, "pixel_data",
                            !in->has_pixels    ? "none"
                            : in->encapsulated ? "encapsulated"
                                               : "native");
    cJSON_AddNumberToObject(o, "fragments", in->fragments);
    cJSON_AddStringToObject(o, "modality_lut", rescale_name(in->rescale_source));
    cJSON_AddNumberToObject(o, "rescale_slope", in->slope);
    cJSON_AddNumberToObject(o, "rescale_intercept", in->intercept);
    if (in->has_window) {
        cJSON_AddNumberToObject(o, "window_center", in->window_center);
        cJSON_AddNumberToObject(o, "window_width", in->window_width);
    } else {
        cJSON_AddNullToObject(o, "window_center");
        cJSON_AddNullToObject(o, "window_width");
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* Writes [0,1] values as 8-bit PNG: frames tiled in a grid (contact sheet). */
static ms_status write_png(const char *path, const dcm_image *img, const float *v) {
    uint32_t nf = img->frames, gc = 1, gr;
    while ((uint64_t)gc * gc < nf)
        gc++;
    gr = (nf + gc - 1) / gc;
    uint64_t W = (uint64_t)gc * img->cols, H = (uint64_t)gr * img->rows;
    uint32_t ch = img->samples == 3 ? 3 : 1;
    if (W > 65535 * 4 || H > 65535 * 4 || W * H * ch > ((uint64_t)1 << 31))
        return ms_errf(MS_EINVAL, "png: contact sheet of %u frames too large", nf);
    uint8_t *pix = calloc((size_t)(W * H * ch), 1);
    png_bytep *rows = malloc((size_t)H * sizeof(*rows));
    FILE *f = NULL;
    ms_status st = MS_OK;
    if (pix == NULL || rows == NULL) {
        st = ms_errf(MS_ENOMEM, "png: out of memory");
        goto done;
    }
    uint64_t fs = (uint64_t)img->rows * img->cols * img->samples;
    for (uint32_t fr = 0; fr < nf; fr++) {
        uint64_t ox = (uint64_t)(fr % gc) * img->cols, oy = (uint64_t)(fr / gc) * img->rows;
        for (uint64_t r = 0; r < img->rows; r++)
            for (uint64_t c = 0; c < img->cols; c++)
                for (uint32_t k = 0; k < ch; k++) {
                    float x = v[fr * fs + (r * img->cols + c) * img->samples + k];
                    int q = isnan(x) ? 0 : (int)lrintf(fminf(fmaxf(x, 0.f), 1.f) * 255.f);
                    pix[((oy + r) * W + ox + c) * ch + k] = (uint8_t)q;
                }
    }
    for (uint64_t r = 0; r < H; r++)
        rows[r] = pix + r * W * ch;
    f = fopen(path, "wb");
    if (f == NULL) {
        st = ms_errf(MS_EINVAL, "cannot create %s: %s", path, strerror(errno));
        goto done;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (png == NULL || info == NULL) {
        png_destroy_write_struct(&png, NULL);
        st = ms_errf(MS_ENOMEM, "png: out of memory");
        goto done;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        st = ms_errf(MS_EINTERNAL, "png: libpng failed writing %s", path);
        goto done;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8,
                 ch == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
done:
    if (f && fclose(f) != 0 && st == MS_OK) st = ms_errf(MS_EINTERNAL, "closing %s failed", path);
    free(pix);
    free(rows);
    return st;
}

/* Writes n float32 values as an .npy of shape dims (no copy: the tensor
 * borrows v). */
static ms_status save_npy(const char *path, float *v, const uint64_t dims[4]) {
    int64_t d[4] = {(int64_t)dims[0], (int64_t)dims[1], (int64_t)dims[2], (int64_t)dims[3]};
    rt_shape sh = rt_shape_make(4, d);
    size_t bytes = (size_t)rt_shape_nelem(&sh) * sizeof(float);
    rt_buf *b = rt_buf_wrap(v, bytes, NULL, NULL);
    if (b == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    rt_tensor *t = NULL;
    ms_status st = rt_tensor_new_on(RT_DT_FLOAT, &sh, b, 0, &t);
    rt_buf_unref(b);
    if (st == MS_OK) st = rt_npy_write_file(path, t);
    rt_tensor_unref(t);
    return st;
}

static int fail(const char *path, ms_status st) {
    /* The message is for people: no internal status code appended. */
    const char *m = ms_errmsg();
    fprintf(stderr, "dcmserve dicom: %s: %s\n", path, m[0] ? m : ms_status_name(st));
    return 1;
}

/* n numbers as a JSON array added to o under key. */
static void json_nums(cJSON *o, const char *key, const double *v, int n) {
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; a != NULL && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
}

static void print_volume(int json, int64_t nfiles, const dcm_volume_geom *g) {
    if (json) {
        cJSON *o = cJSON_CreateObject();
        const double dim[3] = {(double)g->dim[0], (double)g->dim[1], (double)g->dim[2]};
        const double out[3] = {(double)g->out[0], (double)g->out[1], (double)g->out[2]};
        cJSON_AddNumberToObject(o, "files", (double)nfiles);
        cJSON_AddStringToObject(o, "series", g->series);
        cJSON_AddStringToObject(o, "modality", g->modality);
        json_nums(o, "shape", dim, 3);
        json_nums(o, "out_shape", out, 3);
        json_nums(o, "spacing", g->spacing, 3);
        json_nums(o, "orientation", g->ori, 6);
        json_nums(o, "first_position", g->first, 3);
        json_nums(o, "last_position", g->last, 3);
        cJSON_AddNumberToObject(o, "frames_decoded", (double)g->frames_decoded);
        char *txt = cJSON_PrintUnformatted(o);
        if (txt != NULL) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(o);
        return;
    }
    printf("files:           %lld\n", (long long)nfiles);
    printf("series:          %s\n", g->series);
    printf("modality:        %s\n", g->modality);
    printf("slices x rows x columns: %lld x %lld x %lld\n", (long long)g->dim[0],
           (long long)g->dim[1], (long long)g->dim[2]);
    printf("spacing (mm):    %.6g (slices), %.6g x %.6g (pixels)\n", g->spacing[0], g->spacing[1],
           g->spacing[2]);
    printf("orientation:     %.6g %.6g %.6g  %.6g %.6g %.6g\n", g->ori[0], g->ori[1], g->ori[2],
           g->ori[3], g->ori[4], g->ori[5]);
    printf("first position:  %.6g %.6g %.6g\n", g->first[0], g->first[1], g->first[2]);
    printf("last position:   %.6g %.6g %.6g\n", g->last[0], g->last[1], g->last[2]);
    printf("output:          %lld x %lld x %lld\n", (long long)g->out[0], (long long)g->out[1],
           (long long)g->out[2]);
}

/* `dcmserve dicom --volume`: paths[0..n) as one series. */
static int dicom_volume(char **paths, int n, const dcm_volume_opts *o, const char *npy, int json) {
    uint8_t **bytes = calloc((size_t)n, sizeof(*bytes));
    rt_str *files = calloc((size_t)n, sizeof(*files));
    rt_tensor *vol = NULL;
    int rc = 0;
    ms_status st = bytes && files ? MS_OK : ms_errf(MS_ENOMEM, "out of memory");
    for (int i = 0; i < n && st == MS_OK; i++) {
        size_t len = 0;
        if ((st = read_file(paths[i], &bytes[i], &len)) == MS_OK)
            files[i] = (rt_str){.data = bytes[i], .len = len};
    }
    if (st != MS_OK) {
        rc = fail("--volume", st);
        goto done;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    kn_ctx ctx = {.nthreads = ncpu > 1 ? (int)ncpu : 1};
    dcm_volume_geom g;
    if ((st = dcm_volume_decode(&ctx, o, files, n, &vol, &g)) != MS_OK) {
        const char *m = ms_errmsg();
        fprintf(stderr, "dcmserve dicom: volume of %d files: %s\n", n,
                m[0] ? m : ms_status_name(st));
        rc = 1;
        goto done;
    }
    print_volume(json, n, &g);
    if (npy != NULL) {
        rt_shape sh = rt_shape_make(3, (int64_t[]){g.out[0], g.out[1], g.out[2]});
        rt_tensor *v3 = NULL;
        if ((st = rt_tensor_view(vol, &sh, &v3)) == MS_OK) st = rt_npy_write_file(npy, v3);
        rt_tensor_unref(v3);
        if (st != MS_OK) rc = fail(npy, st);
    }
done:
    rt_tensor_unref(vol);
    for (int i = 0; bytes && i < n; i++)
        free(bytes[i]);
    free(bytes);
    free(files);
    return rc;
}

int cli_dicom(int argc, char **argv) {
    const char *path = NULL, *npy = NULL, *pngp = NULL;
    const char *val = NULL;
    int json = 0, have_window = 0, volume = 0, nfiles = 0;
    double wl = 0, ww = 0, sp[3] = {0, 0, 0};
    char **vfiles = calloc((size_t)argc, sizeof(char *)); /* --volume's files */
    if (vfiles == NULL) return fail("dicom", ms_errf(MS_ENOMEM, "out of memory"));
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        val = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            goto usage_done;
        }
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(a, "--volume") == 0) {
            volume = 1;
            continue;
        }
        if (strncmp(a, "--", 2) == 0) {
            const char *eq = strchr(a, '=');
            size_t klen = eq ? (size_t)(eq - a) : strlen(a);
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "dcmserve dicom: %s needs a value\n", a);
                return 2;
            }
            if (klen == 8 && strncmp(a, "--window", 8) == 0) {
                char *end;
                wl = strtod(val, &end);
                if (end == val || *end != ',') goto bad_window;
                const char *w = end + 1;
                ww = strtod(w, &end);
                if (end == w || *end != '\0' || !(ww > 0) || !isfinite(wl) || !isfinite(ww))
                    goto bad_window;
                have_window = 1;
            } else if (klen == 5 && strncmp(a, "--out", 5) == 0) {
                npy = val;
            } else if (klen == 5 && strncmp(a, "--png", 5) == 0) {
                pngp = val;
            } else if (klen == 9 && strncmp(a, "--spacing", 9) == 0) {
                char tail;
                if (sscanf(val, "%lf,%lf,%lf%c", &sp[0], &sp[1], &sp[2], &tail) != 3 ||
                    !(sp[0] > 0 && sp[1] > 0 && sp[2] > 0)) {
                    fprintf(stderr, "dcmserve dicom: --spacing wants Z,Y,X in mm (all > 0), "
                                    "got '%s'\n", val);
                    goto usage_fail;
                }
            } else {
                fprintf(stderr, "dcmserve dicom: unknown flag %s\n", a);
                usage(stderr);
                goto usage_fail;
            }
            continue;
        }
        vfiles[nfiles++] = (char *)a;
        if (!volume && path != NULL) {
            fprintf(stderr, "dcmserve dicom: one FILE only (got %s and %s; --volume for a "
                            "series)\n", path, a);
            goto usage_fail;
        }
        path = a;
    }
    if (volume) {
        if (nfiles == 0 || pngp != NULL) {
            fprintf(stderr, "dcmserve dicom: --volume takes FILE... (no --png)\n");
            goto usage_fail;
        }
        dcm_volume_opts o = {.window = have_window, .center = wl, .width = ww,
                             .spacing = {sp[0], sp[1], sp[2]}};
        rc = dicom_volume(vfiles, nfiles, &o, npy, json);
        goto usage_done;
    }
    if (sp[0] > 0) {
        fprintf(stderr, "dcmserve dicom: --spacing goes with --volume\n");
        goto usage_fail;
    }
    free(vfiles);
    if (path == NULL) {
        usage(stderr);
        return 2;
    }

    uint8_t *bytes = NULL;
    size_t len = 0;
    dcm_dataset *ds = NULL;
    dcm_image *img = NULL;
    dcm_info info;
    dcm_limits lim;
    dcm_limits_default(&lim);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    lim.threads = ncpu > 1 ? (uint32_t)ncpu : 1; /* frames of a multi-frame file */
    ms_status st = read_file(path, &bytes, &len);
    if (st == MS_OK) st = dcm_parse(bytes, len, &lim, &ds);
    if (st == MS_OK) st = dcm_read_info(ds, &info);
    if (st != MS_OK) {
        rc = fail(path, st);
        goto done;
    }
    if (json)
        print_json(path, ds, &info);
    else
        print_text(path, ds, &info);
    fflush(stdout);
    if (npy == NULL && pngp == NULL) goto done;

    if ((st = dcm_decode_hu_ds(ds, &lim, &img)) != MS_OK) {
        rc = fail(path, st);
        goto done;
    }
    size_t n = (size_t)img->frames * img->rows * img->cols * img->samples;
    if (npy) {
        float *v = img->data;
        float *tmp = NULL;
        if (have_window) {
            tmp = malloc(n * sizeof(float));
            if (tmp == NULL)
                st = ms_errf(MS_ENOMEM, "out of memory");
            else
                st = dcm_window(img->data, tmp, n, wl, ww);
            v = tmp;
        }
        uint64_t dims[4] = {img->frames, img->rows, img->cols, img->samples};
        if (st == MS_OK) st = save_npy(npy, v, dims);
        free(tmp);
        if (st != MS_OK) {
            rc = fail(path, st);
            goto done;
        }
    }
    if (pngp) {
        double l = wl, w = ww;
        if (!have_window && info.has_window && info.window_width > 0) {
            l = info.window_center;
            w = info.window_width;
        } else if (!have_window) {
            float lo = INFINITY, hi = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                if (img->data[i] < lo) lo = img->data[i];
                if (img->data[i] > hi) hi = img->data[i];
            }
            if (!(hi > lo)) hi = lo + 1;
            l = ((double)lo + hi) / 2;
            w = (double)hi - lo;
        }
        float *tmp = malloc(n * sizeof(float));
        if (tmp == NULL)
            st = ms_errf(MS_ENOMEM, "out of memory");
        else
            st = dcm_window(img->data, tmp, n, l, w);
        if (st == MS_OK) st = write_png(pngp, img, tmp);
        free(tmp);
        if (st != MS_OK) rc = fail(path, st);
    }
done:
    dcm_image_free(img);
    dcm_dataset_free(ds);
    free(bytes);
    return rc;
bad_window:
    fprintf(stderr, "dcmserve dicom: --window wants L,W with W > 0 (got '%s')\n", val);
usage_fail:
    rc = 2;
usage_done:
    free(vfiles);
    return rc;
}
