/* fuzz_model_folder.c - libFuzzer target: whole model folders. The input is
 * cut at each "=DCMFZ=\n" into up to four files of one version folder:
 *   saved_model.pb, variables/variables.index,
 *   variables/variables.data-00000-of-00001, assets/foo.txt (also written as
 *   assets/vocab.txt, the names the seed graphs' asset files have);
 * a part that is absent leaves its file out. The folder is loaded by the real
 * loader (rt_model_load: graph, function inlining, op check, variable
 * restore, init op, asset files, planning) under a 64 MiB load budget
 * (rt_model_set_max_memory, --max_model_memory_bytes), and when it loads every
 * signature runs once on zeros (unknown dims = 1, at most 2^20 elements per
 * input) with a 64 MiB request budget, cancelled after 2 s (a graph that
 * never ends is cut, as a server call's deadline does). A crash, leak,
 * sanitizer report, an allocation past libFuzzer's malloc limit or a run
 * that the cancel does not stop is a finding; load errors are expected.
 * Seeds: the version folders of tests/data/savedmodels (scripts/run_fuzz.sh
 * packs them with tests/fuzz/seed_model_folder.py).
 * Build: CC=clang cmake -S . -B build-fuzz -DMS_FUZZ=ON -DMS_SANITIZE=ON;
 * run: build-fuzz/fuzz_model_folder CORPUS. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kn_cpu_backend.h"
#include "ms_budget.h"
#include "ms_log.h"
#include "rt_model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEP "=DCMFZ=\n"
#define MAX_ELEMS ((int64_t)1 << 20)

static kn_backend *g_be;
static char g_dir[256]; /* <tmp>/1: the version folder */
static atomic_int g_cancel;
static atomic_llong g_run_start_ms; /* 0 = no run */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Cancels a run that has taken more than 2 s. */
static void *watchdog(void *arg) {
    (void)arg;
    for (;;) {
        usleep(50 * 1000);
        long long s = atomic_load(&g_run_start_ms);
        if (s != 0 && now_ms() - s > 2000) atomic_store(&g_cancel, 1);
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char tmpl[] = "/tmp/fuzz_model_folder.XXXXXX";
    pthread_t tid;
    if (mkdtemp(tmpl) == NULL || (g_be = kn_cpu_backend_new(1)) == NULL ||
        pthread_create(&tid, NULL, watchdog, NULL) != 0) {
        fprintf(stderr, "fuzz_model_folder: cannot set up\n");
        exit(1);
    }
    snprintf(g_dir, sizeof g_dir, "%s/1", tmpl);
    ms_log_set_level(MS_LOG_OFF);
    rt_model_set_max_memory(64u << 20);
    return 0;
}

static void put(const char *rel, const uint8_t *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "wb");
    if (f == NULL) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

/* Removes the files of the last input and makes the folders again. */
static void reset_dir(void) {
    static const char *const files[] = {"saved_model.pb", "variables/variables.index",
                                        "variables/variables.data-00000-of-00001",
                                        "assets/foo.txt", "assets/vocab.txt"};
    char path[512];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
        unlink(path);
    }
    mkdir(g_dir, 0700);
    snprintf(path, sizeof path, "%s/variables", g_dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/assets", g_dir);
    mkdir(path, 0700);
}

/* Runs signature s on zeros; every error is fine. */
static void run_signature(rt_model *m, const Tensorflow__SignatureDef *s) {
    size_t ni = s->n_inputs, no = s->n_outputs;
    rt_feed *feeds = calloc(ni + 1, sizeof(*feeds));
    const char **fetches = calloc(no + 1, sizeof(*fetches));
    rt_tensor **outs = calloc(no + 1, sizeof(*outs));
    size_t nf = 0, nfetch = 0;
    if (feeds == NULL || fetches == NULL || outs == NULL) goto done;
    for (size_t i = 0; i < ni; i++) {
        const Tensorflow__TensorInfo *ti = s->inputs[i]->value;
        if (ti == NULL || ti->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME) goto done;
        rt_shape sh = {0};
        const Tensorflow__TensorShapeProto *tp = ti->tensor_shape;
        if (tp && !tp->unknown_rank) {
            if (tp->n_dim > RT_MAX_RANK) goto done;
            sh.rank = (int)tp->n_dim;
            for (size_t d = 0; d < tp->n_dim; d++)
                sh.dim[d] = tp->dim[d]->size < 0 ? 1 : tp->dim[d]->size;
        }
        int64_t ne = rt_shape_nelem(&sh);
        if (ne < 0 || ne > MAX_ELEMS) goto done;
        rt_tensor *t = NULL;
        if (rt_tensor_new((rt_dtype)ti->dtype, &sh, &t) != MS_OK) goto done;
        feeds[nf].name = ti->name;
        feeds[nf++].tensor = t;
    }
    for (size_t i = 0; i < no; i++) {
        const Tensorflow__TensorInfo *ti = s->outputs[i]->value;
        if (ti == NULL || ti->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME) goto done;
        fetches[nfetch++] = ti->name;
    }
    ms_budget b;
    ms_budget_init(&b, 64u << 20);
    rt_run_opts o = {.cancelled = &g_cancel, .budget = &b};
    atomic_store(&g_cancel, 0);
    atomic_store(&g_run_start_ms, now_ms());
    if (rt_model_run(m, feeds, (int)nf, fetches, (int)nfetch, NULL, 0, &o, outs) == MS_OK)
        for (size_t i = 0; i < nfetch; i++)
            rt_tensor_unref(outs[i]);
    atomic_store(&g_run_start_ms, 0);
done:
    for (size_t i = 0; i < nf; i++)
        rt_tensor_unref(feeds[i].tensor);
    free(feeds);
    free(fetches);
    free(outs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"saved_model.pb", "variables/variables.index",
                                        "variables/variables.data-00000-of-00001",
                                        "assets/foo.txt"};
    reset_dir();
    size_t seplen = strlen(SEP), off = 0;
    for (int part = 0; part < 4 && off <= size; part++) {
        const uint8_t *p = data + off;
        const uint8_t *e = size - off >= seplen ? memmem(p, size - off, SEP, seplen) : NULL;
        size_t n = e ? (size_t)(e - p) : size - off;
        put(names[part], p, n);
        if (part == 3) put("assets/vocab.txt", p, n);
        if (e == NULL) break;
        off += n + seplen;
    }
    static const char *const tags[] = {"serve"};
    rt_model *m = NULL;
    if (rt_model_load(g_dir, tags, 1, g_be, &m) != MS_OK) return 0;
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    for (size_t i = 0; mg && i < mg->n_signature_def && i < 8; i++)
        if (mg->signature_def[i]->value) run_signature(m, mg->signature_def[i]->value);
    rt_model_unref(m);
    return 0;
}
