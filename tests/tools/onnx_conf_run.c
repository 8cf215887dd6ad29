/* onnx_conf_run.c - the batch worker of the ONNX conformance runner
 * (tests/it_onnx_conformance.py): imports many ONNX models in one process and
 * runs each on its inputs, so the ~1,800 tests of ONNX's node suite do not
 * each pay for a process start.
 *
 * Protocol: one request per stdin line, tab-separated:
 *     MODEL.onnx  WORKDIR  NIN  IN_NAME...  NOUT  OUT_NAME...
 * The inputs are read from WORKDIR/in_K.npy (K = 0..NIN-1, the graph inputs
 * in order, written by the runner); the model is imported into WORKDIR/sm and
 * the outputs written to WORKDIR/out_K.npy. bfloat16 tensors, which numpy
 * lacks, travel as their bits in uint16 arrays both ways; so do the
 * low-precision types (rt_lowp.h), one element per byte: float8 / float4 /
 * e8m0 as their bits in uint8, int4 / int2 as int8 and uint4 / uint2 as
 * uint8 values. One answer line per request,
 * flushed before the next is read:
 *     ok                     outputs written
 *     refused<TAB>MESSAGE    the import refused the model
 *     run-refused<TAB>MESSAGE imported, then the run refused (MS_ENOTSUP) as not
 *                            implemented: a refusal the import should have made
 *                            (the runner counts it as a failure)
 *     error<TAB>MESSAGE      imported, then the load or the run failed
 * `onnx_conf_run --opsets` lists the opsets accepted per op instead.
 * A crash ends the process mid-request; the runner notices the missing answer
 * and starts a fresh worker for the tests after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "ms_status.h"
#include "rt_lowp.h"
#include "rt_model.h"
#include "rt_npy.h"
#include "rt_onnx.h"
#include "util_onnx.h"

#define CONF_MAX_IO 64

/* The message of the last error on one line (tabs and newlines blanked). */
static const char *one_line(void) {
    static char buf[2048];
    snprintf(buf, sizeof buf, "%s", ms_errmsg());
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\t' || *p == '\r') *p = ' ';
    return buf;
}

/* Splits line at tabs into f[0..max); returns the count. */
static int split_tabs(char *line, char **f, int max) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, "\t\n", &save); t && n < max; t = strtok_r(NULL, "\t\n", &save))
        f[n++] = t;
    return n;
}

/* Runs one request; prints its answer line. */
static void conf_one(kn_backend *be, char **f, int nf) {
    char path[4096];
    rt_model *m = NULL;
    rt_tensor *ins[CONF_MAX_IO] = {0}, *outs[CONF_MAX_IO] = {0};
    rt_feed feeds[CONF_MAX_IO];
    const char *fetches[CONF_MAX_IO];
    int nin = nf > 2 ? atoi(f[2]) : -1;
    int nout = (nin >= 0 && 3 + nin < nf) ? atoi(f[3 + nin]) : -1;
    if (nin < 0 || nin > CONF_MAX_IO || nout < 1 || nout > CONF_MAX_IO || 4 + nin + nout != nf) {
        printf("error\tmalformed request\n");
        return;
    }
    const char *model = f[0], *work = f[1];
    snprintf(path, sizeof path, "%s/sm", work);
    if (rt_onnx_import(model, path, NULL) != MS_OK) {
        printf("refused\t%s\n", one_line());
        return;
    }
    const char *tags[] = {"serve"};
    if (rt_model_load(path, tags, 1, be, &m) != MS_OK) {
        printf("error\tload: %s\n", one_line());
        return;
    }
    const Tensorflow__SignatureDef *sd = tox_sig(rt_model_meta_graph(m), "serving_default");
    int ok = sd != NULL;
    for (int i = 0; ok && i < nin; i++) {
        const Tensorflow__TensorInfo *ti = tox_sig_input(sd, f[3 + i]);
        snprintf(path, sizeof path, "%s/in_%d.npy", work, i);
        if (ti == NULL) {
            printf("error\tno signature input %s\n", f[3 + i]);
            ok = 0;
        } else if (rt_npy_read_file(path, &ins[i]) != MS_OK) {
            printf("error\tinput %s: %s\n", f[3 + i], one_line());
            ok = 0;
        } else {
            /* numpy has no bfloat16: the runner writes its bits as uint16. */
            if (ti->dtype == TENSORFLOW__DATA_TYPE__DT_BFLOAT16 && ins[i]->dtype == RT_DT_UINT16)
                ins[i]->dtype = RT_DT_BFLOAT16;
            if (rt_dtype_is_lowp((rt_dtype)ti->dtype) &&
                (ins[i]->dtype == RT_DT_UINT8 || ins[i]->dtype == RT_DT_INT8))
                ins[i]->dtype = (rt_dtype)ti->dtype;
            feeds[i] = (rt_feed){.name = ti->name, .tensor = ins[i]};
        }
    }
    for (int i = 0; ok && i < nout; i++) {
        const Tensorflow__TensorInfo *ti = tox_sig_output(sd, f[4 + nin + i]);
        if (ti == NULL) {
            printf("error\tno signature output %s\n", f[4 + nin + i]);
            ok = 0;
        } else {
            fetches[i] = ti->name;
        }
    }
    ms_status rs = ok ? rt_model_run(m, feeds, nin, fetches, nout, NULL, 0, NULL, outs) : MS_OK;
    if (rs != MS_OK) {
        /* Not implemented, found only by the run: kept apart from import
         * refusals, since what is missing must be refused at import. */
        printf("%s\trun: %s\n", rs == MS_ENOTSUP ? "run-refused" : "error", one_line());
        ok = 0;
    }
    for (int i = 0; ok && i < nout; i++) {
        snprintf(path, sizeof path, "%s/out_%d.npy", work, i);
        rt_dtype odt = outs[i]->dtype, bits_dt = RT_DT_INVALID;
        if (odt == RT_DT_BFLOAT16)
            bits_dt = RT_DT_UINT16;
        else if (odt == RT_DT_INT4 || odt == RT_DT_INT2)
            bits_dt = RT_DT_INT8;
        else if (rt_dtype_is_lowp(odt))
            bits_dt = RT_DT_UINT8;
        if (bits_dt != RT_DT_INVALID) { /* its bits as uint16 / uint8 / int8 (see above) */
            rt_tensor *bits = NULL;
            if (rt_tensor_view(outs[i], &outs[i]->shape, &bits) != MS_OK) {
                printf("error\toutput %s: %s\n", f[4 + nin + i], one_line());
                ok = 0;
                break;
            }
            bits->dtype = bits_dt;
            rt_tensor_unref(outs[i]);
            outs[i] = bits;
        }
        if (rt_npy_write_file(path, outs[i]) != MS_OK) {
            printf("error\toutput %s: %s\n", f[4 + nin + i], one_line());
            ok = 0;
        }
    }
    if (ok) printf("ok\n");
    for (int i = 0; i < CONF_MAX_IO; i++) {
        if (ins[i]) rt_tensor_unref(ins[i]);
        if (outs[i]) rt_tensor_unref(outs[i]);
    }
    rt_model_unref(m);
}

/* --opsets: one line per op the converter knows, "Op<TAB>a-b, c-d" (the
 * model opsets at which it is accepted), for docs/onnx_conformance.md. */
static void print_opsets(void) {
    for (size_t i = 0; rt_onnx_op_name(i); i++) {
        const char *op = rt_onnx_op_name(i);
        printf("%s\t", op);
        int first = 1;
        for (int64_t x = 1; x <= RT_ONNX_MAX_OPSET; x++) {
            if (!rt_onnx_op_accepts(op, x) || rt_onnx_op_accepts(op, x - 1)) continue;
            int64_t y = x;
            while (y < RT_ONNX_MAX_OPSET && rt_onnx_op_accepts(op, y + 1))
                y++;
            printf("%s%lld-%lld", first ? "" : ", ", (long long)x, (long long)y);
            first = 0;
        }
        printf("\n");
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--opsets") == 0) {
        print_opsets();
        return 0;
    }
    kn_backend *be = kn_cpu_backend_new(1);
    if (be == NULL) {
        fprintf(stderr, "onnx_conf_run: no CPU backend\n");
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        char *f[4 + 2 * CONF_MAX_IO];
        int nf = split_tabs(line, f, 4 + 2 * CONF_MAX_IO);
        if (nf == 0) continue;
        conf_one(be, f, nf);
        fflush(stdout);
    }
    free(line);
    kn_backend_free(be);
    return 0;
}
