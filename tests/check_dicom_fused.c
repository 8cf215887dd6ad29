/* check_dicom_fused.c - the fused DcmDecodeWindow (runtime/dicom/dcm_fused.c)
 * against the two ops it replaces, DcmDecodeHU then the CPU DcmWindow, on
 * real files: tests/data/onnx/ct64.dcm and every .dcm of pydicom's test data
 * (DCM_PYDICOM_FILES, else Debian's python3-pydicom folder; skipped with a
 * line when absent). Each file alone and in mixed batches, with and without
 * resize (down and up), NHWC and NCHW, with and without the mask: the
 * outputs must be identical bit for bit, and a file one path refuses the
 * other refuses too. Run with one and (some) with two intra-op threads.
 * The split form of the fused op (kn_dicom_xform.h: the host's
 * _DcmDecodeRaw, then the CPU's _DcmPixelTransform) must give the fused op's
 * bytes and refuse the same files. A synthetic native 512x512 CT (signed,
 * 12 bits stored) joins the files: large enough for a batch of one to have
 * its rows split over the pool at two threads. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_backend.h"
#include "kn_cpu_backend.h"
#include "kn_ctx.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "rt_ops.h"
#include "tf_framework.pb-c.h"
#include "util_dicom.h"
#include "util_node.h"

#define MAX_FILES 128

typedef struct blob {
    char name[256];
    uint8_t *p;
    size_t n;
} blob;

static blob files[MAX_FILES];
static int nfiles;

static void load(const char *path, const char *name) {
    if (nfiles >= MAX_FILES) return;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    blob *b = &files[nfiles];
    b->p = malloc(n > 0 ? (size_t)n : 1);
    if (b->p && n > 0 && fread(b->p, 1, (size_t)n, f) == (size_t)n) {
        b->n = (size_t)n;
        snprintf(b->name, sizeof(b->name), "%s", name);
        nfiles++;
    } else {
        free(b->p);
    }
    fclose(f);
}

/* A 512x512 explicit VR LE CT, signed 12 of 16 bits, slope 1, intercept
 * -1024, values over the whole stored range (and junk in the top bits, which
 * BitsStored masks off). */
static void add_large_ct(void) {
    ut_dbuf d;
    ut_dbuf_init(&d, 1, 0);
    ut_dbuf_meta(&d, "1.2.840.10008.1.2.1");
    ut_dbuf_str(&d, 0x0008, 0x0060, "CS", "CT");
    ut_dbuf_image(&d, 512, 512, 16, 12, 1, "MONOCHROME2");
    ut_dbuf_str(&d, 0x0028, 0x1052, "DS", "-1024");
    ut_dbuf_str(&d, 0x0028, 0x1053, "DS", "1");
    ut_dbuf_hdr(&d, 0x7FE0, 0x0010, "OW", 512u * 512u * 2u);
    uint32_t x = 12345;
    for (int i = 0; i < 512 * 512; i++) {
        x = x * 1103515245u + 12345u;
        ut_dbuf_u16(&d, (uint16_t)(x >> 12));
    }
    blob *b = &files[nfiles++];
    b->p = malloc(d.n);
    if (b->p == NULL) abort();
    memcpy(b->p, d.p, d.n);
    b->n = d.n;
    snprintf(b->name, sizeof(b->name), "synthetic ct 512x512");
    ut_dbuf_free(&d);
}

static int load_all(void) {
    char path[1024];
    const char *src = getenv("DCM_SRC");
    snprintf(path, sizeof(path), "%s/tests/data/onnx/ct64.dcm", src ? src : ".");
    load(path, "ct64.dcm");
    add_large_ct();
    const char *dir = getenv("DCM_PYDICOM_FILES");
    if (dir == NULL) dir = "/usr/lib/python3/dist-packages/pydicom/data/test_files";
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".dcm") != 0) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        load(path, e->d_name);
    }
    closedir(d);
    return 1;
}

static int g_split_ran, g_split_words;

typedef struct cfg {
    int64_t h, w; /* 0: no resize */
    int nchw, masked;
    float center, width;
} cfg;

static ms_status run_kernel(const kn_kernel *k, const Tensorflow__NodeDef *def, int nin, int nout,
                            int threads, rt_tensor *const *in, rt_tensor **out) {
    kn_node kn = {.name = def->name,
                  .op = def->op,
                  .def = def,
                  .attrs = &rt_nodedef_attrs,
                  .nin = nin,
                  .nout = nout};
    kn_ctx ctx = {.nthreads = threads};
    void *state = NULL;
    ms_status st = k->prepare ? k->prepare(&kn, NULL, &state) : MS_OK;
    if (st == MS_OK) st = k->compute(&ctx, &kn, state, in, out);
    if (k->release && state) k->release(state);
    return st;
}

static void window_attrs(Tensorflow__NodeDef *d, const cfg *c) {
    tu_attr_f(d, "center", c->center);
    tu_attr_f(d, "width", c->width);
    tu_attr_s(d, "data_format", c->nchw ? "NCHW" : "NHWC");
    if (c->h) tu_attr_ints(d, "size", c->h, c->w);
}

/* 1 when both paths agree (same status; same shape and bytes on success). */
static int compare(const int *idx, int n, const cfg *c, int threads, int *ran) {
    rt_str s[4];
    for (int i = 0; i < n; i++)
        s[i] = (rt_str){.data = files[idx[i]].p, .len = (int64_t)files[idx[i]].n};
    rt_shape sh = rt_shape_make(1, (int64_t[]){n});
    rt_tensor *in = NULL;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, s, &in), MS_OK);

    Tensorflow__NodeDef *dec = tu_node_new("DcmDecodeHU", "dec");
    tu_attr_i(dec, "frame", 0);
    Tensorflow__NodeDef *win = tu_node_new("DcmWindow", "win");
    window_attrs(win, c);
    Tensorflow__NodeDef *fz = tu_node_new("DcmDecodeWindow", "fz");
    tu_attr_i(fz, "frame", 0);
    window_attrs(fz, c);
    tu_attr_b(fz, "masked", c->masked);

    rt_tensor *hu[2] = {NULL, NULL}, *ref = NULL, *got = NULL;
    ms_status a = run_kernel(rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeHU"), dec, 1, 2,
                             threads, &in, hu);
    if (a == MS_OK) {
        kn_backend *b = kn_cpu_backend_new(1);
        a = run_kernel(kn_backend_kernel(b, "DcmWindow"), win, c->masked ? 2 : 1, 1, threads, hu,
                       &ref);
        kn_backend_free(b);
    }
    ms_status f = run_kernel(rt_ops_host_kernel(rt_model_host_ops, "DcmDecodeWindow"), fz, 1, 1,
                             threads, &in, &got);
    /* The split form a device placement uses: _DcmDecodeRaw on the host,
     * then the CPU's _DcmPixelTransform. */
    Tensorflow__NodeDef *rawd = tu_node_new("_DcmDecodeRaw", "raw");
    tu_attr_i(rawd, "frame", 0);
    window_attrs(rawd, c);
    tu_attr_b(rawd, "masked", c->masked);
    Tensorflow__NodeDef *xfd = tu_node_new("_DcmPixelTransform", "xf");
    window_attrs(xfd, c);
    tu_attr_b(xfd, "masked", c->masked);
    rt_tensor *raw[2] = {NULL, NULL}, *spl = NULL;
    ms_status sp = run_kernel(rt_ops_host_kernel(rt_model_host_ops, "_DcmDecodeRaw"), rawd, 1, 2,
                              threads, &in, raw);
    if (sp == MS_OK) {
        kn_backend *b = kn_cpu_backend_new(1);
        sp = run_kernel(kn_backend_kernel(b, "_DcmPixelTransform"), xfd, 2, 1, threads, raw, &spl);
        kn_backend_free(b);
    }
    if (sp == MS_OK) g_split_ran++;
    if (sp == MS_OK && raw[0]->dtype == RT_DT_UINT16) g_split_words++;
    int ok = (a == MS_OK) == (f == MS_OK) && (sp == MS_OK) == (f == MS_OK);
    if (ok && f == MS_OK) {
        ok = rt_shape_equal(&spl->shape, &got->shape) &&
             memcmp(spl->data, got->data, (size_t)got->nelem * sizeof(float)) == 0;
        if (!ok) fprintf(stderr, "split differs from fused\n");
    }
    if (ok && a == MS_OK) {
        (*ran)++;
        ok = rt_shape_equal(&ref->shape, &got->shape) &&
             memcmp(ref->data, got->data, (size_t)ref->nelem * sizeof(float)) == 0;
        if (!ok) {
            int64_t first = -1;
            for (int64_t i = 0;
                 i < ref->nelem && first < 0 && rt_shape_equal(&ref->shape, &got->shape); i++)
                if (memcmp(rt_tensor_f32(ref) + i, rt_tensor_f32(got) + i, 4) != 0) first = i;
            fprintf(stderr, "differs at %lld: %.9g vs %.9g\n", (long long)first,
                    first >= 0 ? rt_tensor_f32(ref)[first] : 0.0,
                    first >= 0 ? rt_tensor_f32(got)[first] : 0.0);
        }
    }
    if (!ok)
        fprintf(
            stderr,
            "mismatch: %s%s (n=%d) size %lldx%lld %s masked %d threads %d: unfused %d fused %d\n",
            files[idx[0]].name, n > 1 ? " +batch" : "", n, (long long)c->h, (long long)c->w,
            c->nchw ? "NCHW" : "NHWC", c->masked, threads, a, f);
    if (!ok) fprintf(stderr, "  split status %d\n", sp);
    rt_tensor_unref(raw[0]);
    rt_tensor_unref(raw[1]);
    rt_tensor_unref(spl);
    tu_node_free(rawd);
    tu_node_free(xfd);
    rt_tensor_unref(hu[0]);
    rt_tensor_unref(hu[1]);
    rt_tensor_unref(ref);
    rt_tensor_unref(got);
    rt_tensor_unref(in);
    tu_node_free(dec);
    tu_node_free(win);
    tu_node_free(fz);
    return ok;
}

static const cfg cfgs[] = {
    {0, 0, 0, 1, 40.f, 400.f},      {0, 0, 1, 0, 40.f, 400.f},     {32, 32, 0, 1, 40.f, 400.f},
    {64, 48, 1, 1, 1000.f, 3000.f}, {200, 130, 0, 0, 50.f, 350.f}, {7, 5, 1, 0, 40.f, 80.f},
};

START_TEST(fused_equals_unfused) {
    int bad = 0, ran = 0;
    /* Every configuration at 1 thread; two of them again at 2 threads
     * (files of a batch in parallel). */
    for (int t = 1; t <= 2; t++)
        for (size_t k = 0; k < sizeof(cfgs) / sizeof(cfgs[0]); k++) {
            if (t == 2 && k != 0 && k != 3) continue;
            for (int i = 0; i < nfiles; i++)
                bad += !compare((int[]){i}, 1, &cfgs[k], t, &ran);
            /* Mixed batches: ct64 with others, and three in a row. */
            for (int i = 1; i + 2 < nfiles; i += 3) {
                bad += !compare((int[]){0, i}, 2, &cfgs[k], t, &ran);
                bad += !compare((int[]){i, i + 1, i + 2}, 3, &cfgs[k], t, &ran);
            }
        }
    fprintf(stderr, "fused vs unfused: %d files, %d decoded comparisons, %d mismatches\n", nfiles,
            ran, bad);
    fprintf(stderr, "split (_DcmDecodeRaw + _DcmPixelTransform): %d decoded, %d as stored words\n",
            g_split_ran, g_split_words);
    ck_assert_int_gt(ran, 100);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(g_split_ran, ran);
    ck_assert_int_gt(g_split_words, 10);
}
END_TEST

int main(void) {
    if (!load_all()) {
        printf(
            "check_dicom_fused: pydicom's test files not found (set DCM_PYDICOM_FILES); skipped\n");
        return 77;
    }
    Suite *s = suite_create("dicom_fused");
    TCase *tc = tcase_create("fused");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, fused_equals_unfused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (int i = 0; i < nfiles; i++)
        free(files[i].p);
    return failed ? 1 : 0;
}
