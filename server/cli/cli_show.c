/* cli_show.c - `dcmserve show`: a SavedModel's tag-sets, signature keys and
 * signatures, printed in saved_model_cli's layout so that scripts and eyes
 * used to `saved_model_cli show` read it unchanged:
 *
 *   show --dir D                           the tag-sets, one per line
 *   show --dir D --tag_set T               the SignatureDef keys of graph T
 *   show --dir D --tag_set T --signature_def K   inputs/outputs of K
 *   show --dir D --all                     every graph and signature
 *   show --dir D --tag_set T --list_ops    also the ops of graph T (graph and
 *                                          function library), as saved_model_cli
 *
 * D may be a base directory: its highest numeric version is shown.
 * Only reads saved_model.pb; nothing is loaded or run. dtypes print with
 * TensorFlow's enum names as stored (DT_FLOAT_REF stays DT_FLOAT_REF, as in
 * saved_model_cli).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_dirs.h"
#include "cli_flags.h"
#include "ms_status.h"
#include "rt_model.h"
#include "sig_signature.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: dcmserve show --dir DIR [--tag_set TAGS] [--signature_def KEY] [--all]\n"
               "\n"
               "  --dir DIR            model directory: holds saved_model.pb, or model.onnx\n"
               "                       (converted as the daemon loads it)\n"
               "  --tag_set TAGS       comma-separated tag-set of a MetaGraphDef (e.g. serve);\n"
               "                       without it, the tag-sets are listed\n"
               "  --signature_def KEY  show the inputs and outputs of this SignatureDef;\n"
               "                       without it, the SignatureDef keys are listed\n"
               "  --all                show every MetaGraphDef and SignatureDef\n"
               "  --list_ops           list the ops of the MetaGraphDef (with --tag_set or --all)\n"
               "DIR may also be a base directory; its highest numeric version is used.\n");
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* saved_model_cli's --list_ops line: every op of the graph and of its
 * function library, as a (here sorted) Python set. */
static void print_ops(const Tensorflow__MetaGraphDef *mg) {
    const Tensorflow__GraphDef *gd = mg->graph_def;
    size_t n = gd ? gd->n_node : 0, k = 0;
    const Tensorflow__FunctionDefLibrary *lib = gd ? gd->library : NULL;
    for (size_t i = 0; lib && i < lib->n_function; i++) n += lib->function[i]->n_node_def;
    const char **ops = calloc(n + 1, sizeof(*ops));
    if (ops == NULL) return;
    for (size_t i = 0; gd && i < gd->n_node; i++) ops[k++] = gd->node[i]->op;
    for (size_t i = 0; lib && i < lib->n_function; i++)
        for (size_t j = 0; j < lib->function[i]->n_node_def; j++)
            ops[k++] = lib->function[i]->node_def[j]->op;
    qsort(ops, k, sizeof(*ops), cmp_str);
    printf("The MetaGraph with tag set [");
    size_t nt = mg->meta_info_def ? mg->meta_info_def->n_tags : 0;
    for (size_t i = 0; i < nt; i++) printf("%s'%s'", i ? ", " : "", mg->meta_info_def->tags[i]);
    printf("] contains the following ops: {");
    for (size_t i = 0, first = 1; i < k; i++) {
        if (i > 0 && strcmp(ops[i], ops[i - 1]) == 0) continue;
        printf("%s'%s'", first ? "" : ", ", ops[i]);
        first = 0;
    }
    printf("}\n");
    free(ops);
}

/* The MetaGraphDef's tags joined with sep, sorted or in stored order. */
static void tags_str(const Tensorflow__MetaGraphDef *mg, const char *sep, int sorted, char *buf,
                     size_t n) {
    size_t nt = mg->meta_info_def ? mg->meta_info_def->n_tags : 0;
    const char **t = calloc(nt + 1, sizeof(*t));
    buf[0] = '\0';
    if (t == NULL) return;
    for (size_t i = 0; i < nt; i++) t[i] = mg->meta_info_def->tags[i];
    if (sorted) qsort(t, nt, sizeof(*t), cmp_str);
    size_t len = 0;
    for (size_t i = 0; i < nt && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", t[i]);
    free(t);
}

/* Sorted keys of a signature_def map (borrowed strings, malloc'ed array). */
static const char **sorted_sig_keys(const Tensorflow__MetaGraphDef *mg) {
    const char **k = calloc(mg->n_signature_def + 1, sizeof(*k));
    if (k == NULL) return NULL;
    for (size_t i = 0; i < mg->n_signature_def; i++) k[i] = mg->signature_def[i]->key;
    qsort(k, mg->n_signature_def, sizeof(*k), cmp_str);
    return k;
}

/* One TensorInfo, two spaces deeper than its "inputs['k']" line. */
static void print_tensor_info(const char *ind, const Tensorflow__TensorInfo *ti) {
    char shape[512];
    printf("%s      dtype: %s\n", ind, sig_dtype_name(ti ? (int)ti->dtype : 0));
    printf("%s      shape: %s\n", ind,
           sig_shape_str(ti ? ti->tensor_shape : NULL, shape, sizeof(shape)));
    const char *name = "";
    if (ti && ti->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME) name = ti->name;
    printf("%s      name: %s\n", ind, name);
}

typedef struct kv {
    const char *key;
    const Tensorflow__TensorInfo *ti;
} kv;

static int cmp_kv(const void *a, const void *b) {
    return strcmp(((const kv *)a)->key, ((const kv *)b)->key);
}

static void print_map(const char *ind, const char *what, void *const *entries, size_t n,
                      int outputs) {
    kv *v = calloc(n + 1, sizeof(*v));
    if (v == NULL) return;
    for (size_t i = 0; i < n; i++) {
        if (outputs) {
            const Tensorflow__SignatureDef__OutputsEntry *e = entries[i];
            v[i].key = e->key;
            v[i].ti = e->value;
        } else {
            const Tensorflow__SignatureDef__InputsEntry *e = entries[i];
            v[i].key = e->key;
            v[i].ti = e->value;
        }
    }
    qsort(v, n, sizeof(*v), cmp_kv);
    for (size_t i = 0; i < n; i++) {
        printf("%s  %s['%s'] tensor_info:\n", ind, what, v[i].key);
        print_tensor_info(ind, v[i].ti);
    }
    free(v);
}

/* saved_model_cli's _show_inputs_outputs, indented by `ind`. */
static void print_signature(const char *ind, const Tensorflow__SignatureDef *sd) {
    printf("%sThe given SavedModel SignatureDef contains the following input(s):\n", ind);
    print_map(ind, "inputs", (void *const *)sd->inputs, sd->n_inputs, 0);
    printf("%sThe given SavedModel SignatureDef contains the following output(s):\n", ind);
    print_map(ind, "outputs", (void *const *)sd->outputs, sd->n_outputs, 1);
    printf("%sMethod name is: %s\n", ind, sd->method_name ? sd->method_name : "");
}

/* Splits "serve,gpu" into tags (pointers into buf, modified in place). */
static int split_tags(char *buf, const char **tags, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max;
         t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        char *e = t + strlen(t);
        while (e > t && e[-1] == ' ') *--e = '\0';
        if (*t) tags[n++] = t;
    }
    return n;
}

static int find_graph(const Tensorflow__SavedModel *sm, const char *dir, const char *tag_set) {
    char buf[1024];
    const char *tags[64];
    snprintf(buf, sizeof(buf), "%s", tag_set);
    int nt = split_tags(buf, tags, 64);
    int idx = rt_savedmodel_find_meta_graph(sm, tags, nt);
    if (idx >= 0) return idx;
    char avail[1024];
    size_t len = 0;
    avail[0] = '\0';
    for (size_t i = 0; i < sm->n_meta_graphs && len < sizeof(avail); i++) {
        char t[512];
        tags_str(sm->meta_graphs[i], ",", 1, t, sizeof(t));
        len += (size_t)snprintf(avail + len, sizeof(avail) - len, "%s'%s'", i ? ", " : "", t);
    }
    fprintf(stderr,
            "dcmserve show: MetaGraphDef associated with tag-set '%s' could not be found in "
            "SavedModel %s (available tag-sets: %s)\n",
            tag_set, dir, avail[0] ? avail : "none");
    return -1;
}

int cli_show(int argc, char **argv) {
    const char *dir = NULL, *tag_set = NULL, *sig_key = NULL;
    int all = 0, help = 0, list_ops = 0;
    cli_flag flags[] = {
        {"list_ops", CLI_FLAG_BOOL, NULL, &list_ops},
        {"dir", CLI_FLAG_STR, &dir, NULL},
        {"tag_set", CLI_FLAG_STR, &tag_set, NULL},
        {"signature_def", CLI_FLAG_STR, &sig_key, NULL},
        {"all", CLI_FLAG_BOOL, NULL, &all},
        {"help", CLI_FLAG_BOOL, NULL, &help},
        {NULL, 0, NULL, NULL},
    };
    if (cli_flags_parse("show", argc, argv, flags) != 0) return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (dir == NULL) {
        fprintf(stderr, "dcmserve show: --dir is required (see dcmserve show --help)\n");
        return 2;
    }
    if (sig_key != NULL && tag_set == NULL && !all) {
        fprintf(stderr, "dcmserve show: --signature_def needs --tag_set\n");
        return 2;
    }
    char export_dir[4096];
    if (cli_export_dir(dir, export_dir, sizeof export_dir) == 0) dir = export_dir;
    Tensorflow__SavedModel *sm = NULL;
    ms_status st = rt_savedmodel_read(dir, &sm);
    if (st != MS_OK) {
        fprintf(stderr, "dcmserve show: %s\n", ms_errmsg());
        return 1;
    }
    int rc = 0;
    if (all) {
        /* Graphs ordered by their sorted tag lists, as saved_model_cli. */
        size_t ng = sm->n_meta_graphs;
        kv *order = calloc(ng + 1, sizeof(*order));
        char(*keys)[512] = calloc(ng + 1, sizeof(*keys));
        if (order == NULL || keys == NULL) {
            free(order);
            free(keys);
            tensorflow__saved_model__free_unpacked(sm, NULL);
            fprintf(stderr, "dcmserve show: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < ng; i++) {
            tags_str(sm->meta_graphs[i], "\x01", 0, keys[i], sizeof(keys[i]));
            order[i].key = keys[i];
            order[i].ti = (const void *)sm->meta_graphs[i];
        }
        qsort(order, ng, sizeof(*order), cmp_kv);
        for (size_t g = 0; g < ng; g++) {
            const Tensorflow__MetaGraphDef *mg = (const void *)order[g].ti;
            char tags[512];
            tags_str(mg, ", ", 0, tags, sizeof(tags));
            printf("\nMetaGraphDef with tag-set: '%s' contains the following SignatureDefs:\n",
                   tags);
            const char **k = sorted_sig_keys(mg);
            for (size_t i = 0; k != NULL && i < mg->n_signature_def; i++) {
                const Tensorflow__SignatureDef *sd = NULL;
                sig_find(mg, k[i], &sd);
                printf("\nsignature_def['%s']:\n", k[i]);
                if (sd) print_signature("  ", sd);
            }
            free(k);
            if (list_ops) print_ops(mg);
        }
        free(order);
        free(keys);
    } else if (tag_set == NULL) {
        if (list_ops) printf("--list_ops must be paired with a tag-set or with --all.\n");
        printf("The given SavedModel contains the following tag-sets:\n");
        size_t ng = sm->n_meta_graphs;
        char(*keys)[512] = calloc(ng + 1, sizeof(*keys));
        const char **p = calloc(ng + 1, sizeof(*p));
        for (size_t i = 0; keys && p && i < ng; i++) {
            tags_str(sm->meta_graphs[i], ", ", 1, keys[i], sizeof(keys[i]));
            p[i] = keys[i];
        }
        if (keys && p) {
            qsort(p, ng, sizeof(*p), cmp_str);
            for (size_t i = 0; i < ng; i++) printf("'%s'\n", p[i]);
        }
        free(keys);
        free(p);
    } else {
        int idx = find_graph(sm, dir, tag_set);
        if (idx >= 0 && list_ops) print_ops(sm->meta_graphs[idx]);
        if (idx < 0) {
            rc = 1;
        } else if (sig_key == NULL) {
            const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[idx];
            printf("The given SavedModel MetaGraphDef contains SignatureDefs with the following "
                   "keys:\n");
            const char **k = sorted_sig_keys(mg);
            for (size_t i = 0; k != NULL && i < mg->n_signature_def; i++)
                printf("SignatureDef key: \"%s\"\n", k[i]);
            free(k);
        } else {
            const Tensorflow__SignatureDef *sd = NULL;
            /* An explicit key: no serving_default fallback for "". */
            if (sig_find(sm->meta_graphs[idx], sig_key[0] ? sig_key : "\x01", &sd) != MS_OK) {
                fprintf(stderr, "dcmserve show: Serving signature key \"%s\" not found.\n",
                        sig_key);
                rc = 1;
            } else {
                print_signature("", sd);
            }
        }
    }
    tensorflow__saved_model__free_unpacked(sm, NULL);
    fflush(stdout);
    return rc;
}
