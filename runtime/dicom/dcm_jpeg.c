/* dcm_jpeg.c - 8-bit JPEG (baseline, extended and progressive DCT) through
 * libjpeg-turbo's libjpeg API. The DICOM header, not the JPEG markers, says
 * whether three components are YCbCr: YBR_FULL / YBR_FULL_422 streams are
 * converted to RGB, anything else is returned as stored (as GDCM does). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "dcm_codec_int.h"

typedef struct jerr_ctx {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int eof_warning; /* libjpeg padded a truncated stream */
} jerr_ctx;

static void on_error_exit(j_common_ptr cinfo) {
    jerr_ctx *e = (jerr_ctx *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jb, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level) {
    jerr_ctx *e = (jerr_ctx *)cinfo->err;
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) e->eof_warning = 1;
}

static void on_output_message(j_common_ptr cinfo) {
    (void)cinfo;
}

/* The body that may longjmp; everything it touches lives in *cinfo or is
 * passed in, so no local is modified between setjmp and longjmp. */
static ms_status run(struct jpeg_decompress_struct *cinfo, jerr_ctx *e, const dcm_frame_geom *g,
                     uint8_t *out, size_t out_size, uint8_t *row, int *out_rgb_converted) {
    const unsigned width = dcm__sample_bytes(g);
    if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK)
        return ms_errf(MS_EINVAL, "JPEG: no image in the stream");
    if (cinfo->data_precision != 8)
        return ms_errf(MS_ENOTSUP, "JPEG: data precision %d is not supported by the 8-bit decoder",
                       cinfo->data_precision);
    if (cinfo->image_width != g->cols || cinfo->image_height != g->rows ||
        cinfo->num_components != g->samples)
        return ms_errf(MS_EINVAL,
                       "JPEG: stream is %ux%u with %d components, header says %ux%u with %u "
                       "samples",
                       cinfo->image_width, cinfo->image_height, cinfo->num_components, g->cols,
                       g->rows, g->samples);
    int ybr = 0;
    if (g->samples == 3) {
        ybr = dcm__photometric_is_ybr(g->photometric);
        cinfo->jpeg_color_space = ybr ? JCS_YCbCr : JCS_RGB;
        cinfo->out_color_space = JCS_RGB;
    } else {
        cinfo->jpeg_color_space = JCS_GRAYSCALE;
        cinfo->out_color_space = JCS_GRAYSCALE;
    }
    cinfo->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(cinfo);
    if ((unsigned)cinfo->output_components != g->samples || cinfo->output_width != g->cols ||
        cinfo->output_height != g->rows)
        return ms_errf(MS_EINTERNAL, "JPEG: decoder output geometry differs from the header");
    const size_t rowlen = (size_t)g->cols * g->samples;
    if (rowlen * g->rows * width != out_size)
        return ms_errf(MS_EINTERNAL, "JPEG: output size mismatch");
    while (cinfo->output_scanline < cinfo->output_height) {
        const size_t y = cinfo->output_scanline;
        JSAMPROW dst = width == 1 ? out + y * rowlen : row;
        if (jpeg_read_scanlines(cinfo, &dst, 1) != 1)
            return ms_errf(MS_EINVAL, "JPEG: decoder stopped at row %zu", y);
        if (width != 1)
            for (size_t i = 0; i < rowlen; i++) dcm__put_sample(out, y * rowlen + i, width, row[i]);
        if (e->eof_warning)
            return ms_errf(MS_EINVAL, "JPEG: stream truncated (data ends before row %zu of %u)",
                           y + 1, g->rows);
    }
    *out_rgb_converted = ybr;
    return MS_OK;
}

ms_status dcm__jpeg_decode(const uint8_t *data, size_t len, const dcm_frame_geom *g, uint8_t *out,
                           size_t out_size, int *out_rgb_converted) {
    struct jpeg_decompress_struct cinfo;
    jerr_ctx e;
    ms_status st;
    uint8_t *row = malloc((size_t)g->cols * g->samples);
    if (row == NULL) return ms_errf(MS_ENOMEM, "JPEG: out of memory");
    memset(&e, 0, sizeof(e));
    memset(&cinfo, 0, sizeof(cinfo));
    cinfo.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error_exit;
    e.pub.emit_message = on_emit_message;
    e.pub.output_message = on_output_message;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&cinfo);
        free(row);
        return ms_errf(MS_EINVAL, "JPEG: %s", e.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    st = run(&cinfo, &e, g, out, out_size, row, out_rgb_converted);
    jpeg_destroy_decompress(&cinfo);
    free(row);
    return st;
}
