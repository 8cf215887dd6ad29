/* cli_check.c - `dcmserve check DIR [--json]`: loads a SavedModel as the
 * daemon would and says, per signature, which ops it needs, which of them
 * dcmserve cannot run (every one, with its nodes), which variables it reads
 * and whether each was restored, and a one-line verdict: serves and why, or
 * does not serve and why. DIR is an export dir or a base dir (highest
 * version). A model that loads still does not serve when requests cannot
 * reach a signature: it has none, or neither serving_default (what a request
 * naming no signature calls) nor the --signature_name given.
 *
 * Exit status: 0 when the model serves, 1 when it does not, 2 on a usage
 * error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_dirs.h"
#include "cli_flags.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "ms_status.h"
#include "rt_model.h"
#include "rt_objgraph.h"
#include "rt_opscan.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dcmserve check DIR [--tag_set serve] [--signature_name KEY] [--json]\n"
            "\n"
            "Loads the SavedModel in DIR (an export dir, or a base dir whose highest numeric\n"
            "version is used; a folder holding model.onnx is converted, as the daemon does)\n"
            "as the daemon would, and prints per signature the ops it needs, the unsupported\n"
            "ones with their nodes, the variables it reads (restored or not) and a verdict: it\n"
            "serves when it loads and the signature requests call (serving_default, or KEY)\n"
            "runs. Exit status 0: the model serves; 1: it does not.\n"
            "\n"
            "  --dir DIR      the same as the positional DIR\n"
            "  --tag_set T    comma-separated tag-set (default serve)\n"
            "  --signature_name KEY  the signature clients name (default serving_default)\n"
            "  --json         one JSON object instead of text\n");
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

typedef struct var_list {
    int n, cap, restored;
    char **names;
    char **desc;     /* "DT_FLOAT (16, 24)" or "" */
    int *ok;
} var_list;

static void add_var(void *arg, const rt_gnode *node, const rt_var *v) {
    (void)node;
    var_list *l = arg;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], v->name) == 0) return;
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 16;
        char **nn = realloc(l->names, sizeof(char *) * (size_t)ncap);
        if (nn) l->names = nn;
        char **nd = realloc(l->desc, sizeof(char *) * (size_t)ncap);
        if (nd) l->desc = nd;
        int *no = realloc(l->ok, sizeof(int) * (size_t)ncap);
        if (no) l->ok = no;
        if (!nn || !nd || !no) return;
        l->cap = ncap;
    }
    char d[160] = "";
    if (v->value) {
        char sh[96];
        snprintf(d, sizeof d, "%s %s", rt_dtype_name(v->value->dtype),
                 rt_shape_str(&v->value->shape, sh, sizeof sh));
    }
    l->names[l->n] = strdup(v->name);
    l->desc[l->n] = strdup(d);
    l->ok[l->n] = v->value != NULL;
    if (l->names[l->n] == NULL || l->desc[l->n] == NULL) {
        free(l->names[l->n]);
        free(l->desc[l->n]);
        return;
    }
    l->restored += l->ok[l->n];
    l->n++;
}

static void var_list_free(var_list *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->desc[i]);
    }
    free(l->names);
    free(l->desc);
    free(l->ok);
}

typedef struct sig_report {
    const char *key;
    const char *method;
    int serves;
    char why[1024];
    rt_opscan *ops;
    var_list vars;
} sig_report;

static void check_signature(rt_model *m, const char *key, const Tensorflow__SignatureDef *sd,
                            sig_report *r) {
    memset(r, 0, sizeof(*r));
    r->key = key;
    r->method = sd->method_name ? sd->method_name : "";
    /* every named input and output, however many */
    const char **feeds = calloc(sd->n_inputs + 1, sizeof(*feeds));
    const char **fetches = calloc(sd->n_outputs + 1, sizeof(*fetches));
    int nf = 0, no = 0;
    for (size_t k = 0; feeds && k < sd->n_inputs; k++)
        if (sd->inputs[k]->value &&
            sd->inputs[k]->value->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
            feeds[nf++] = sd->inputs[k]->value->name;
    for (size_t k = 0; fetches && k < sd->n_outputs; k++)
        if (sd->outputs[k]->value &&
            sd->outputs[k]->value->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
            fetches[no++] = sd->outputs[k]->value->name;
    if (feeds == NULL || fetches == NULL ||
        rt_opscan_named(rt_model_graph(m), feeds, nf, fetches, no, &r->ops) != MS_OK)
        r->ops = NULL;
    if (feeds && fetches)
        rt_objgraph_walk_vars(rt_model_graph(m), rt_model_vars(m), feeds, nf, fetches, no,
                              add_var, &r->vars);
    free(feeds);
    free(fetches);
    ms_err_clear();
    ms_status st = rt_model_plan_signature(m, key);
    r->serves = st == MS_OK;
    if (!r->serves) snprintf(r->why, sizeof r->why, "%s", ms_errmsg());
    ms_err_clear();
}

/* Why signature r serves, into buf: what check found of its ops and variables. */
static void serves_why(const sig_report *r, char *buf, size_t n) {
    int nops = r->ops ? r->ops->n : 0;
    if (r->vars.n == 0)
        snprintf(buf, n, "%d ops, all with kernels; no variables", nops);
    else
        snprintf(buf, n, "%d ops, all with kernels; %d of %d variables read restored", nops,
                 r->vars.restored, r->vars.n);
}

/* The signature requests reach (sig_name, else serving_default): 1 and *why
 * set when it serves; 0 and verdict set to why no request can be served
 * otherwise (no signature at all, or not the one named). */
static int default_serves(const sig_report *r, int nr, const char *sig_name, char *verdict,
                          size_t vn, char *why, size_t wn) {
    const char *want = sig_name ? sig_name : "serving_default";
    for (int i = 0; i < nr; i++) {
        if (strcmp(r[i].key, want) != 0) continue;
        if (!r[i].serves) {
            snprintf(verdict, vn, "signature '%s': %s", want, r[i].why);
            return 0;
        }
        char w[256];
        serves_why(&r[i], w, sizeof w);
        snprintf(why, wn, "signature '%s': %s", want, w);
        return 1;
    }
    if (nr == 0) {
        snprintf(verdict, vn,
                 "the SavedModel has no signature, so no request can call it; export it with a "
                 "serving signature (tf.saved_model.save(..., signatures=...))");
        return 0;
    }
    size_t o = (size_t)snprintf(verdict, vn,
                                sig_name ? "no signature '%s'; "
                                         : "no '%s' signature, the one requests without a "
                                           "signature_name call, and no --signature_name given; ",
                                want);
    for (int i = 0; i < nr && o < vn; i++)
        o += (size_t)snprintf(verdict + o, vn - o, "%s'%s'", i ? ", " : "the model has ",
                              r[i].key);
    if (!sig_name && o < vn)
        snprintf(verdict + o, vn - o, " (check one with --signature_name; clients must name it)");
    return 0;
}

/* What the folder holds, as the loader reads it (rt_model.h). */
static rt_model_format dir_format(const char *dir) {
    ms_dir d;
    if (ms_dir_open(dir, &d) != MS_OK) {
        ms_err_clear();
        return RT_MODEL_FMT_NONE;
    }
    rt_model_format f = rt_model_dir_format(&d);
    ms_dir_close(&d);
    return f;
}

static void print_text(const char *dir, rt_model_format fmt, const char *load_err, sig_report *r,
                       int nr, int serves, const char *verdict) {
    printf("model: %s\n", dir);
    if (fmt == RT_MODEL_FMT_ONNX) printf("format: model.onnx, converted at load\n");
    if (load_err) printf("load: failed: %s\n", load_err);
    for (int i = 0; i < nr; i++) {
        sig_report *s = &r[i];
        printf("\nsignature '%s' (%s)\n", s->key, s->method);
        if (s->ops) {
            printf("  ops (%d):", s->ops->n);
            for (int k = 0; k < s->ops->n; k++) printf("%s %s", k ? "," : "", s->ops->ops[k].op);
            printf("\n  unsupported ops (%d)%s\n", s->ops->nunsupported,
                   s->ops->nunsupported ? ":" : "");
            for (int k = 0; k < s->ops->n; k++) {
                const rt_opuse *u = &s->ops->ops[k];
                if (u->supported) continue;
                printf("    %s (%d node%s):\n", u->op, u->nnodes, u->nnodes == 1 ? "" : "s");
                for (int j = 0; j < u->nnodes; j++) printf("      %s\n", u->nodes[j]);
            }
            if (s->ops->nbroken) printf("  nodes that cannot run (%d):\n", s->ops->nbroken);
            for (int k = 0; k < s->ops->nbroken; k++) printf("    %s\n", s->ops->broken[k]);
        }
        printf("  variables read (%d, %d restored)%s\n", s->vars.n, s->vars.restored,
               s->vars.n ? ":" : "");
        for (int k = 0; k < s->vars.n; k++)
            printf("    %s: %s%s\n", s->vars.names[k], s->vars.ok[k] ? "restored " : "NOT restored",
                   s->vars.desc[k]);
        if (s->serves) {
            char w[256];
            serves_why(s, w, sizeof w);
            printf("  serves: %s\n", w);
        } else {
            printf("  does not serve:\n    %s\n", s->why);
        }
    }
    if (serves)
        printf("\nverdict: serves (%s)\n", verdict);
    else
        printf("\nverdict: does not serve: %s\n", verdict);
}

static void print_json(const char *dir, rt_model_format fmt, const char *load_err, sig_report *r,
                       int nr, int serves, const char *verdict) {
    printf("{\"dir\": ");
    json_str(stdout, dir);
    printf(", \"format\": \"%s\"", fmt == RT_MODEL_FMT_ONNX ? "onnx" : "savedmodel");
    printf(", \"serves\": %s, \"verdict\": ", serves ? "true" : "false");
    json_str(stdout, serves ? "serves" : verdict);
    printf(", \"why\": ");
    json_str(stdout, verdict);
    printf(", \"load_error\": ");
    if (load_err) json_str(stdout, load_err);
    else printf("null");
    printf(", \"signatures\": [");
    for (int i = 0; i < nr; i++) {
        sig_report *s = &r[i];
        printf("%s{\"key\": ", i ? ", " : "");
        json_str(stdout, s->key);
        printf(", \"method\": ");
        json_str(stdout, s->method);
        printf(", \"serves\": %s, \"error\": ", s->serves ? "true" : "false");
        if (s->serves) printf("null");
        else json_str(stdout, s->why);
        printf(", \"ops\": [");
        for (int k = 0; s->ops && k < s->ops->n; k++) {
            printf("%s", k ? ", " : "");
            json_str(stdout, s->ops->ops[k].op);
        }
        printf("], \"unsupported\": [");
        int c = 0;
        for (int k = 0; s->ops && k < s->ops->n; k++) {
            const rt_opuse *u = &s->ops->ops[k];
            if (u->supported) continue;
            printf("%s{\"op\": ", c++ ? ", " : "");
            json_str(stdout, u->op);
            printf(", \"nodes\": [");
            for (int j = 0; j < u->nnodes; j++) {
                printf("%s", j ? ", " : "");
                json_str(stdout, u->nodes[j]);
            }
            printf("]}");
        }
        printf("], \"cannot_run\": [");
        for (int k = 0; s->ops && k < s->ops->nbroken; k++) {
            printf("%s", k ? ", " : "");
            json_str(stdout, s->ops->broken[k]);
        }
        printf("], \"variables\": [");
        for (int k = 0; k < s->vars.n; k++) {
            printf("%s{\"name\": ", k ? ", " : "");
            json_str(stdout, s->vars.names[k]);
            printf(", \"restored\": %s, \"value\": ", s->vars.ok[k] ? "true" : "false");
            json_str(stdout, s->vars.desc[k]);
            printf("}");
        }
        printf("]}");
    }
    printf("]}\n");
}

static int split_tags(char *buf, const char **tags, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max;
         t = strtok_r(NULL, ",", &save))
        if (*t) tags[n++] = t;
    return n;
}

int cli_check(int argc, char **argv) {
    const char *dir = NULL, *tag_set = "serve", *sig_name = NULL;
    int json = 0, help = 0;
    /* DIR is positional, anywhere among the flags (whose values may follow them). */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            const char *f = argv[i] + (argv[i][1] == '-' ? 2 : 1);
            if ((strcmp(f, "tag_set") == 0 || strcmp(f, "dir") == 0 ||
                 strcmp(f, "signature_name") == 0) &&
                i + 1 < argc)
                i++;
            continue;
        }
        dir = argv[i];
        for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
        argc--;
        break;
    }
    const char *dir_flag = NULL;
    cli_flag flags[] = {
        {"dir", CLI_FLAG_STR, &dir_flag, NULL},
        {"tag_set", CLI_FLAG_STR, &tag_set, NULL},
        {"signature_name", CLI_FLAG_STR, &sig_name, NULL},
        {"json", CLI_FLAG_BOOL, NULL, &json},
        {"help", CLI_FLAG_BOOL, NULL, &help},
        {NULL, 0, NULL, NULL},
    };
    if (cli_flags_parse("check", argc, argv, flags) != 0) return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (dir_flag) dir = dir_flag;
    if (dir == NULL) {
        fprintf(stderr, "dcmserve check: a model directory is required (see dcmserve check --help)\n");
        return 2;
    }
    char export_dir[4096];
    if (cli_export_dir(dir, export_dir, sizeof export_dir) != 0) {
        fprintf(stderr, "dcmserve check: %s has no saved_model.pb or model.onnx and no numeric "
                        "version folder holding one\n",
                dir);
        return 1;
    }
    ms_log_set_level(MS_LOG_ERROR);
    rt_model_format fmt = dir_format(export_dir);
    char tagbuf[1024];
    const char *tags[64];
    snprintf(tagbuf, sizeof tagbuf, "%s", tag_set);
    int ntags = split_tags(tagbuf, tags, 64);
    kn_backend *be = kn_cpu_backend_new(1);
    if (be == NULL) {
        fprintf(stderr, "dcmserve check: cannot create the CPU backend\n");
        return 1;
    }
    /* The daemon's load, for the verdict; then an unplanned load to inspect. */
    rt_model *full = NULL;
    char load_err[1024] = "";
    int serves = rt_model_load(export_dir, tags, ntags, be, &full) == MS_OK;
    if (!serves) snprintf(load_err, sizeof load_err, "%s", ms_errmsg());
    rt_model_unref(full);
    ms_err_clear();
    rt_model *m = NULL;
    if (rt_model_load_unplanned(export_dir, tags, ntags, be, &m) != MS_OK) {
        if (json) print_json(export_dir, fmt, load_err, NULL, 0, 0, load_err);
        else print_text(export_dir, fmt, load_err, NULL, 0, 0, load_err);
        kn_backend_free(be);
        return 1;
    }
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(m);
    sig_report *r = calloc(mg->n_signature_def + 1, sizeof(*r));
    int nr = 0;
    for (size_t i = 0; r && i < mg->n_signature_def; i++) {
        const char *key = mg->signature_def[i]->key;
        if (mg->signature_def[i]->value == NULL || strcmp(key, "__saved_model_init_op") == 0)
            continue;
        check_signature(m, key, mg->signature_def[i]->value, &r[nr++]);
    }
    /* A model that loads serves only when requests reach a signature that plans. */
    char verdict[1536], why[512] = "";
    snprintf(verdict, sizeof verdict, "%s", load_err);
    int loaded = serves;
    if (serves && r)
        serves = default_serves(r, nr, sig_name, verdict, sizeof verdict, why, sizeof why);
    if (serves) snprintf(verdict, sizeof verdict, "%s", why);
    if (json) print_json(export_dir, fmt, loaded ? NULL : load_err, r, nr, serves, verdict);
    else print_text(export_dir, fmt, loaded ? NULL : load_err, r, nr, serves, verdict);
    for (int i = 0; i < nr; i++) {
        rt_opscan_free(r[i].ops);
        var_list_free(&r[i].vars);
    }
    free(r);
    rt_model_unref(m);
    kn_backend_free(be);
    fflush(stdout);
    return serves ? 0 : 1;
}
