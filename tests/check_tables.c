/* check_tables.c - lookup-table host ops (runtime/graph/rt_ops_table.c) run
 * through a real graph so the table handle flows between ops. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_exec.h"
#include "rt_graph.h"
#include "rt_model.h"
#include "util_node.h"

#define NN 8

typedef struct tg {
    Tensorflow__MetaGraphDef mg;
    Tensorflow__GraphDef gd;
    Tensorflow__NodeDef *nodes[NN];
    char *in[NN][4];
    int n;
} tg;

static Tensorflow__NodeDef *tg_node(tg *b, const char *op, const char *name, const char *i0,
                                    const char *i1, const char *i2, const char *i3) {
    Tensorflow__NodeDef *d = tu_node_new(op, name);
    const char *ins[4] = {i0, i1, i2, i3};
    for (int k = 0; k < 4; k++)
        if (ins[k]) b->in[b->n][d->n_input++] = (char *)ins[k];
    d->input = b->in[b->n];
    b->nodes[b->n++] = d;
    b->gd.node = b->nodes;
    b->gd.n_node = (size_t)b->n;
    return d;
}

static void tg_init(tg *b, rt_dtype kt, rt_dtype vt) {
    memset(b, 0, sizeof(*b));
    tensorflow__meta_graph_def__init(&b->mg);
    tensorflow__graph_def__init(&b->gd);
    b->mg.graph_def = &b->gd;
    tg_node(b, "Placeholder", "k", NULL, NULL, NULL, NULL);
    tg_node(b, "Placeholder", "v", NULL, NULL, NULL, NULL);
    tg_node(b, "Placeholder", "q", NULL, NULL, NULL, NULL);
    tg_node(b, "Placeholder", "d", NULL, NULL, NULL, NULL);
    Tensorflow__NodeDef *t = tg_node(b, "HashTableV2", "tbl", NULL, NULL, NULL, NULL);
    tu_attr_type(t, "key_dtype", kt);
    tu_attr_type(t, "value_dtype", vt);
    tg_node(b, "InitializeTableV2", "init", "tbl", "k", "v", NULL);
    tg_node(b, "LookupTableFindV2", "find", "tbl", "q", "d", "^init");
    tg_node(b, "LookupTableSizeV2", "size", "tbl", "^init", NULL, NULL);
}

static void tg_free(tg *b) {
    for (int i = 0; i < b->n; i++) tu_node_free(b->nodes[i]);
}

/* Runs the graph once: feeds k, v, q, d; fetches find and size. */
static ms_status tg_run(tg *b, rt_vars *vars, rt_tensor *const *feeds, rt_tensor **outs) {
    rt_graph *g;
    ck_assert_int_eq(rt_graph_build(&b->mg, NULL, rt_model_host_ops, &g), MS_OK);
    rt_edge f[4], o[2];
    const char *fn[4] = {"k", "v", "q", "d"};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(rt_graph_tensor(g, fn[i], &f[i]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "find", &o[0]), MS_OK);
    ck_assert_int_eq(rt_graph_tensor(g, "size", &o[1]), MS_OK);
    rt_plan *p;
    ck_assert_int_eq(rt_plan_build(g, f, 4, o, 2, NULL, 0, &p), MS_OK);
    kn_ctx ctx = {.nthreads = 1};
    ms_status st = rt_plan_run(p, &ctx, vars, feeds, outs);
    rt_plan_free(p);
    rt_graph_free(g);
    return st;
}

static rt_tensor *strs(int n, const char *const *s) {
    rt_str v[8];
    for (int i = 0; i < n; i++) v[i] = (rt_str){(const uint8_t *)s[i], strlen(s[i])};
    rt_shape sh = {.rank = 1, .dim = {n}};
    rt_tensor *t;
    ck_assert_int_eq(rt_tensor_new_strings(&sh, v, &t), MS_OK);
    return t;
}

static void check_str(const rt_tensor *t, int64_t i, const char *want) {
    const rt_str *s = (const rt_str *)t->data + i;
    ck_assert_uint_eq(s->len, strlen(want));
    ck_assert(memcmp(s->data, want, s->len) == 0);
}

START_TEST(test_string_to_int64) {
    tg b;
    tg_init(&b, RT_DT_STRING, RT_DT_INT64);
    rt_vars vars;
    rt_vars_init(&vars);
    rt_tensor *feeds[4] = {
        strs(3, (const char *[]){"setosa", "versicolor", "virginica"}),
        TU_I64(TU_SHAPE(3), 0, 1, 2),
        strs(4, (const char *[]){"virginica", "rose", "setosa", ""}),
        TU_I64(TU_SCALAR, -1),
    };
    rt_tensor *outs[2];
    ck_assert_int_eq(tg_run(&b, &vars, feeds, outs), MS_OK);
    tu_check_shape(outs[0], RT_DT_INT64, TU_SHAPE(4));
    const int64_t *r = outs[0]->data;
    ck_assert(r[0] == 2 && r[1] == -1 && r[2] == 0 && r[3] == -1);
    ck_assert(*(int64_t *)outs[1]->data == 3);
    tu_unref(outs, 2);
    /* Same data again: a no-op (TensorFlow's behaviour); per-key defaults. */
    tu_unref(&feeds[3], 1);
    feeds[3] = TU_I64(TU_SHAPE(4), 10, 11, 12, 13);
    ck_assert_int_eq(tg_run(&b, &vars, feeds, outs), MS_OK);
    r = outs[0]->data;
    ck_assert(r[0] == 2 && r[1] == 11 && r[2] == 0 && r[3] == 13);
    tu_unref(outs, 2);
    /* Different data: an error naming the node. */
    tu_unref(&feeds[1], 1);
    feeds[1] = TU_I64(TU_SHAPE(3), 5, 1, 2);
    ck_assert_int_eq(tg_run(&b, &vars, feeds, outs), MS_EPRECOND);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "'init'"));
    tu_unref(feeds, 4);
    rt_vars_destroy(&vars);
    tg_free(&b);
}
END_TEST

START_TEST(test_int64_to_string_and_errors) {
    tg b;
    tg_init(&b, RT_DT_INT64, RT_DT_STRING);
    rt_vars vars;
    rt_vars_init(&vars);
    rt_tensor *feeds[4] = {
        TU_I64(TU_SHAPE(2), 7, 42),
        strs(2, (const char *[]){"seven", "forty-two"}),
        TU_I64(TU_SHAPE(3), 42, 8, 7),
        strs(1, (const char *[]){"UNK"}),
    };
    /* default of shape [1] is neither scalar nor shaped like keys [3] */
    rt_tensor *outs[2];
    ck_assert_int_eq(tg_run(&b, &vars, feeds, outs), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "'find'"));
    tu_unref(&feeds[3], 1);
    rt_tensor *d;
    ck_assert_int_eq(rt_tensor_scalar_string("UNK", 3, &d), MS_OK);
    feeds[3] = d;
    ck_assert_int_eq(tg_run(&b, &vars, feeds, outs), MS_OK);
    check_str(outs[0], 0, "forty-two");
    check_str(outs[0], 1, "UNK");
    check_str(outs[0], 2, "seven");
    ck_assert(*(int64_t *)outs[1]->data == 2);
    tu_unref(outs, 2);
    tu_unref(feeds, 4);
    rt_vars_destroy(&vars);
    tg_free(&b);

    /* keys of the wrong dtype; keys/values of different sizes */
    rt_vars_init(&vars);
    tg_init(&b, RT_DT_INT64, RT_DT_FLOAT);
    rt_tensor *bad[4] = {TU_I32(TU_SHAPE(1), 1), TU_F32(TU_SHAPE(1), 1.0f),
                         TU_I64(TU_SHAPE(1), 1), TU_F32(TU_SCALAR, 0.0f)};
    ck_assert_int_eq(tg_run(&b, &vars, bad, outs), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "'init'"));
    tu_unref(&bad[0], 1);
    bad[0] = TU_I64(TU_SHAPE(2), 1, 2);
    ck_assert_int_eq(tg_run(&b, &vars, bad, outs), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "same shape"));
    tu_unref(bad, 4);
    rt_vars_destroy(&vars);
    tg_free(&b);
}
END_TEST


/* A text-file table: HashTableV2 string -> int64 initialised from the file
 * fed as "k" (key_index, value_index, offset as given); fetches the lookups of
 * q and the size. Runs with vars.files = root. */
static ms_status run_text(const ms_dir *root, const char *path, int mode, rt_tensor **outs) {
    tg b;
    memset(&b, 0, sizeof b);
    tensorflow__meta_graph_def__init(&b.mg);
    tensorflow__graph_def__init(&b.gd);
    b.mg.graph_def = &b.gd;
    tg_node(&b, "Placeholder", "k", NULL, NULL, NULL, NULL);
    tg_node(&b, "Placeholder", "v", NULL, NULL, NULL, NULL);
    tg_node(&b, "Placeholder", "q", NULL, NULL, NULL, NULL);
    tg_node(&b, "Placeholder", "d", NULL, NULL, NULL, NULL);
    Tensorflow__NodeDef *t = tg_node(&b, "HashTableV2", "tbl", NULL, NULL, NULL, NULL);
    tu_attr_type(t, "key_dtype", RT_DT_STRING);
    tu_attr_type(t, "value_dtype", RT_DT_INT64);
    Tensorflow__NodeDef *it =
        tg_node(&b, "InitializeTableFromTextFileV2", "init", "tbl", "k", NULL, NULL);
    tu_attr_i(it, "key_index", mode == 0 ? 0 : -1);
    tu_attr_i(it, "value_index", mode == 0 ? -2 : 1);
    tu_attr_i(it, "offset", mode == 0 ? 10 : 0);
    tu_attr_i(it, "vocab_size", -1);
    tu_attr_s(it, "delimiter", "\t");
    tg_node(&b, "LookupTableFindV2", "find", "tbl", "q", "d", "^init");
    tg_node(&b, "LookupTableSizeV2", "size", "tbl", "^init", NULL, NULL);
    rt_vars vars;
    rt_vars_init(&vars);
    vars.files = root;
    rt_tensor *fname;
    ck_assert_int_eq(rt_tensor_scalar_string(path, strlen(path), &fname), MS_OK);
    rt_tensor *feeds[4] = {fname, TU_I64(TU_SCALAR, 0),
                           mode == 0 ? strs(3, (const char *[]){"emu", "cow", "cat"})
                                     : strs(3, (const char *[]){"emu\t9", "emu", "cat\t5"}),
                           TU_I64(TU_SCALAR, -1)};
    ms_status st = tg_run(&b, &vars, feeds, outs);
    tu_unref(feeds, 4);
    rt_vars_destroy(&vars);
    tg_free(&b);
    return st;
}

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Text-file init: "word<TAB>count" lines; key column 0 -> value line number
 * (-2, offset 10), and a second table whole line (-1) -> column 1. */
START_TEST(test_text_file) {
    char dir[] = "/tmp/check_tables_XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    put_file(path, "cat\t5\ndog\t7\nemu\t9\n");
    ms_dir root;
    ck_assert_int_eq(ms_dir_open(dir, &root), MS_OK);
    for (int mode = 0; mode < 2; mode++) {
        rt_tensor *outs[2];
        ck_assert_msg(run_text(&root, path, mode, outs) == MS_OK, "%s", ms_errmsg());
        const int64_t *r = outs[0]->data;
        if (mode == 0) ck_assert(r[0] == 12 && r[1] == -1 && r[2] == 10);
        else ck_assert(r[0] == 9 && r[1] == -1 && r[2] == 5);
        ck_assert(*(int64_t *)outs[1]->data == 3);
        tu_unref(outs, 2);
    }
    ms_dir_close(&root);
    remove(path);
    rmdir(dir);
}
END_TEST

/* The file name comes from the graph (a Const or the fed asset path): only a
 * regular file inside the model folder is read. Outside: a link to a file
 * outside, an absolute name, "..", a folder link, a FIFO (no hang), a device.
 * The refusal names the file and never quotes its lines. */
START_TEST(test_text_file_outside) {
    char top[] = "/tmp/check_tables_XXXXXX", m[64], p[128], q[128];
    ck_assert_ptr_nonnull(mkdtemp(top));
    snprintf(m, sizeof m, "%s/m", top);
    ck_assert_int_eq(mkdir(m, 0755), 0);
    snprintf(q, sizeof q, "%s/secret.txt", top);
    put_file(q, "SECRET\t1\n");
    snprintf(p, sizeof p, "%s/odir", top);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/odir/v.txt", top);
    put_file(p, "SECRET\t2\n");
    snprintf(p, sizeof p, "%s/assets", m);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/assets/link.txt", m);
    ck_assert_int_eq(symlink(q, p), 0);
    snprintf(p, sizeof p, "%s/assets/rel.txt", m);
    ck_assert_int_eq(symlink("../../secret.txt", p), 0);
    snprintf(p, sizeof p, "%s/odir", top);
    snprintf(q, sizeof q, "%s/assets/d", m);
    ck_assert_int_eq(symlink(p, q), 0);
    snprintf(p, sizeof p, "%s/assets/fifo", m);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/assets/zero", m);
    ck_assert_int_eq(symlink("/dev/zero", p), 0);
    ms_dir root;
    ck_assert_int_eq(ms_dir_open(m, &root), MS_OK);
    char names[7][160];
    snprintf(names[0], 160, "%s/assets/link.txt", m);
    snprintf(names[1], 160, "%s/assets/rel.txt", m);
    snprintf(names[2], 160, "%s/secret.txt", top);        /* absolute, outside */
    snprintf(names[3], 160, "%s/assets/../../secret.txt", m);
    snprintf(names[4], 160, "%s/assets/d/v.txt", m);
    snprintf(names[5], 160, "%s/assets/fifo", m);
    snprintf(names[6], 160, "%s/assets/zero", m);
    const ms_status want[7] = {MS_EPERM, MS_EPERM, MS_EPERM, MS_EPERM, MS_EPERM, MS_EINVAL,
                               MS_EPERM};
    for (int i = 0; i < 7; i++) {
        rt_tensor *outs[2] = {NULL, NULL};
        ms_status st = run_text(&root, names[i], 0, outs);
        ck_assert_msg(st == want[i], "%s: %s (%s)", names[i], ms_status_name(st), ms_errmsg());
        ck_assert_msg(strstr(ms_errmsg(), "SECRET") == NULL, "%s", ms_errmsg());
        ck_assert_msg(strstr(ms_errmsg(), "vocabulary file") != NULL, "%s", ms_errmsg());
    }
    /* Without a model folder (a graph run alone) nothing is read. */
    rt_tensor *outs[2];
    snprintf(p, sizeof p, "%s/secret.txt", top);
    ck_assert_int_eq(run_text(NULL, p, 0, outs), MS_EINVAL);
    ms_dir_close(&root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"string_to_int64", test_string_to_int64},
        {"int64_to_string_and_errors", test_int64_to_string_and_errors},
        {"text_file", test_text_file},
        {"text_file_outside", test_text_file_outside},
    };
    return tu_suite_main("tables", cases, sizeof(cases) / sizeof(cases[0]));
}
