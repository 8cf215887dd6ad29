/* util_onnx.c - see util_onnx.h. */
#include "util_onnx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tox_path(const char *file) {
    static char buf[4096];
    const char *src = getenv("DCM_SRC");
    snprintf(buf, sizeof buf, "%s/tests/data/onnx/%s", src && src[0] ? src : ".", file);
    return buf;
}

/* Parses "(2, 3, 4)" / "(5,)" / "()" after 'shape': in the header dict. */
static int parse_shape(const char *h, rt_shape *s) {
    const char *p = strstr(h, "'shape':");
    if (p == NULL || (p = strchr(p, '(')) == NULL) return -1;
    p++;
    s->rank = 0;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')') return 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || s->rank >= RT_MAX_RANK || v < 0) return -1;
        s->dim[s->rank++] = v;
        p = end;
    }
}

ms_status tox_npy_read(const char *path, rt_tensor **out) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return ms_errf(MS_ENOTFOUND, "cannot open %s", path);
    unsigned char pre[12];
    ms_status st = MS_OK;
    char *hdr = NULL;
    rt_tensor *t = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        st = ms_errf(MS_EINVAL, "%s: not a .npy file", path);
        goto done;
    }
    size_t hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
    if (pre[6] >= 2) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            st = ms_errf(MS_EINVAL, "%s: truncated header", path);
            goto done;
        }
        hlen |= ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
    }
    hdr = calloc(1, hlen + 1);
    if (hdr == NULL || fread(hdr, 1, hlen, f) != hlen) {
        st = ms_errf(MS_EINVAL, "%s: truncated header", path);
        goto done;
    }
    rt_shape s;
    if (strstr(hdr, "'<f4'") == NULL || strstr(hdr, "'fortran_order': False") == NULL ||
        parse_shape(hdr, &s) != 0) {
        st = ms_errf(MS_EINVAL, "%s: want a C-order float32 array, header %s", path, hdr);
        goto done;
    }
    if ((st = rt_tensor_new(RT_DT_FLOAT, &s, &t)) != MS_OK) goto done;
    if (fread(t->data, 4, (size_t)t->nelem, f) != (size_t)t->nelem) {
        st = ms_errf(MS_EINVAL, "%s: truncated data", path);
        rt_tensor_unref(t);
        goto done;
    }
    *out = t;
done:
    free(hdr);
    fclose(f);
    return st;
}

double tox_max_abs_diff(const rt_tensor *a, const rt_tensor *b) {
    if (a->dtype != RT_DT_FLOAT || b->dtype != RT_DT_FLOAT || !rt_shape_equal(&a->shape, &b->shape))
        return -1.0;
    double m = 0.0;
    const float *x = rt_tensor_f32(a), *y = rt_tensor_f32(b);
    for (int64_t i = 0; i < a->nelem; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (isnan(d)) return INFINITY;
        if (d > m) m = d;
    }
    return m;
}

const Tensorflow__TensorInfo *tox_sig_input(const Tensorflow__SignatureDef *sd, const char *key) {
    for (size_t i = 0; i < sd->n_inputs; i++)
        if (strcmp(sd->inputs[i]->key, key) == 0) return sd->inputs[i]->value;
    return NULL;
}

const Tensorflow__TensorInfo *tox_sig_output(const Tensorflow__SignatureDef *sd, const char *key) {
    for (size_t i = 0; i < sd->n_outputs; i++)
        if (strcmp(sd->outputs[i]->key, key) == 0) return sd->outputs[i]->value;
    return NULL;
}

const Tensorflow__SignatureDef *tox_sig(const Tensorflow__MetaGraphDef *mg, const char *key) {
    for (size_t i = 0; i < mg->n_signature_def; i++)
        if (strcmp(mg->signature_def[i]->key, key) == 0) return mg->signature_def[i]->value;
    return NULL;
}
