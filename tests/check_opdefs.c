/* check_opdefs.c - output-argument tables (runtime/graph/rt_opdefs.c): the
 * flat output index of "node:arg:i" names and the output count of ops found
 * in TF2 saver functions and control flow, with and without list attrs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "rt_model.h"
#include "rt_opdefs.h"
#include "util_node.h"

/* A NodeDef with one type-list attr `key` of n entries (n >= 0), or an int
 * attr when as_int is set. */
typedef struct {
    Tensorflow__NodeDef def;
    Tensorflow__NodeDef__AttrEntry entry, *entries[1];
    Tensorflow__AttrValue value;
    Tensorflow__AttrValue__ListValue list;
    Tensorflow__DataType types[4];
} node_fx;

static void node_init(node_fx *f, const char *key, int n, int as_int) {
    tensorflow__node_def__init(&f->def);
    tensorflow__node_def__attr_entry__init(&f->entry);
    tensorflow__attr_value__init(&f->value);
    tensorflow__attr_value__list_value__init(&f->list);
    f->entry.key = (char *)key;
    f->entry.value = &f->value;
    if (as_int) {
        f->value.value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        f->value.i = n;
    } else {
        for (int i = 0; i < n; i++) f->types[i] = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        f->list.n_type = (size_t)n;
        f->list.type = f->types;
        f->value.value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
        f->value.list = &f->list;
    }
    f->entries[0] = &f->entry;
    f->def.n_attr = 1;
    f->def.attr = f->entries;
}

START_TEST(saver_ops) {
    /* The TF 2.2/2.3 saver function reads ShardedFilename:filename:0. */
    ck_assert_int_eq(rt_opdef_output_index(NULL, "ShardedFilename", NULL, "filename"), 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "ShardedFilename", NULL), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "StringJoin", NULL, "output"), 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "SaveV2", NULL), 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "MergeV2Checkpoints", NULL), 0);
    /* A wrong argument name is not guessed. */
    ck_assert_int_eq(rt_opdef_output_index(NULL, "ShardedFilename", NULL, "output"), -1);
}
END_TEST

START_TEST(control_flow_lists) {
    node_fx f;
    node_init(&f, "T", 3, 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "While", &f.def), 3);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "StatelessWhile", &f.def), 3);
    node_init(&f, "Tout", 2, 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "StatelessIf", &f.def), 2);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "Case", &f.def), 2);
    /* Zero outputs from an empty list. */
    node_init(&f, "Tout", 0, 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "If", &f.def), 0);
}
END_TEST

START_TEST(multi_output_ops) {
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "TensorArrayV3", NULL), 2);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TensorArrayV3", NULL, "flow"), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TensorListPopBack", NULL, "tensor"), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TensorListGetItem", NULL, "item"), 0);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "Switch", NULL, "output_true"), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "TopKV2", NULL, "indices"), 1);
    /* An int-attr list before a later arg shifts its index. */
    node_fx f;
    node_init(&f, "num_split", 4, 1);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "Split", &f.def), 4);
    /* Ops outside the table have one output named "output". */
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "SomeUnlistedOp", NULL), 1);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "SomeUnlistedOp", NULL, "output"), 0);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "SomeUnlistedOp", NULL, "y"), -1);
}
END_TEST

/* Made by the loader (fusion, the DICOM split, TF1 loops) with their output
 * count set there; never read from a GraphDef, so never named by an arg. */
static int loader_made(const char *op) {
    static const char *const ops[] = {"_DcmDecodeRaw", "_DcmPixelTransform", "_FusedMapReduce",
                                      "_TF1Cond", "_TF1WhileLoop"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(ops[i], op) == 0) return 1;
    return 0;
}

/* Every op with a kernel (the CPU tables and the loader's host ops) has an
 * entry: else a function body reading "node:<arg>:0" of it fails to resolve
 * (TF's Cumsum output is "out", not the default "output"). */
START_TEST(every_kernel_listed) {
    size_t ng;
    const kn_kernel *const *cpu = kn_cpu_kernel_tables(&ng);
    int missing = 0, seen = 0;
    for (int pass = 0; pass < 2; pass++) {
        const kn_kernel *const *t = pass ? rt_model_host_ops : cpu;
        for (size_t g = 0; pass ? t[g] != NULL : g < ng; g++)
            for (const kn_kernel *k = t[g]; k->op != NULL; k++, seen++)
                if (!loader_made(k->op) && !rt_opdef_listed(k->op)) {
                    fprintf(stderr, "op %s has a kernel but no entry in rt_opdefs.c\n", k->op);
                    missing++;
                }
    }
    ck_assert_int_gt(seen, 200);
    ck_assert_int_eq(missing, 0);
    /* and the table answers, e.g. for the ops the issue met */
    ck_assert_int_eq(rt_opdef_output_index(NULL, "Cumsum", NULL, "out"), 0);
    ck_assert_int_eq(rt_opdef_output_index(NULL, "AddN", NULL, "sum"), 0);
    ck_assert_int_eq(rt_opdef_num_outputs(NULL, "InitializeTableV2", NULL), 0);
    ck_assert(!rt_opdef_listed("SomeUnlistedOp"));
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"saver_ops", saver_ops},
        {"control_flow_lists", control_flow_lists},
        {"multi_output_ops", multi_output_ops},
        {"every_kernel_listed", every_kernel_listed},
    };
    return tu_suite_main("opdefs", cases, sizeof(cases) / sizeof(cases[0]));
}
