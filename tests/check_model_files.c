/* check_model_files.c - a SavedModel load reads nothing from outside its
 * version folder (common/ms_file.h): the graph, the variables index and
 * shards, each replaced by a link to a copy outside, a folder link, a FIFO or
 * a device, are refused naming the file, without hanging and without a
 * message that tells anything of the file outside; a hard link loads
 * (docs/security.md says why). Uses tests/data/savedmodels. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "rt_bundle.h"
#include "rt_model.h"
#include "util_bundle.h"
#include "util_node.h"

static kn_backend *be;
static char top[256], ver[300], out[300];

static void sh(const char *fmt, const char *a, const char *b) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* <top>/1: a copy of half_plus_two; <top>/out: another copy (the outside). */
static void setup(void) {
    ms_log_set_level(MS_LOG_ERROR);
    be = kn_cpu_backend_new(1);
    char src[1024];
    ut_data_path("savedmodels/saved_model_half_plus_two_cpu/00000123", src, sizeof src);
    strcpy(top, "/tmp/check_model_files_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(top));
    snprintf(ver, sizeof ver, "%s/1", top);
    snprintf(out, sizeof out, "%s/out", top);
    sh("cp -r '%s' '%s'", src, ver);
    sh("cp -r '%s' '%s'", src, out);
}

static void teardown(void) {
    sh("rm -rf '%s'%s", top, "");
    kn_backend_free(be);
}

/* Loads <top>/1; on failure checks the message names `name` and says nothing
 * of the outside copy's sizes or contents. */
static ms_status load_expect(const char *name) {
    const char *serve[] = {"serve"};
    rt_model *m = NULL;
    ms_status st = rt_model_load(ver, serve, 1, be, &m);
    if (st == MS_OK) {
        rt_model_unref(m);
        return st;
    }
    const char *msg = ms_errmsg();
    ck_assert_msg(strstr(msg, name) != NULL, "'%s' not named: %s", name, msg);
    ck_assert_msg(strstr(msg, "truncated") == NULL && strstr(msg, "crc") == NULL &&
                      strstr(msg, "bytes") == NULL,
                  "the message tells of the file: %s", msg);
    return st;
}

/* Replaces <ver>/<rel> by a symbolic link to `target`. */
static void relink(const char *rel, const char *target) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", ver, rel);
    sh("rm -rf '%s'%s", p, "");
    ck_assert_int_eq(symlink(target, p), 0);
}

START_TEST(test_copy_loads) {
    ck_assert_int_eq(load_expect("-"), MS_OK);
}
END_TEST

START_TEST(test_graph_link_outside) {
    char t[512];
    snprintf(t, sizeof t, "%s/saved_model.pb", out);
    relink("saved_model.pb", t);
    ck_assert_int_eq(load_expect("saved_model.pb"), MS_EPERM);
}
END_TEST

START_TEST(test_shard_link_outside) {
    char t[512];
    snprintf(t, sizeof t, "%s/variables/variables.data-00000-of-00001", out);
    relink("variables/variables.data-00000-of-00001", t);
    ck_assert_int_eq(load_expect("variables.data-00000-of-00001"), MS_EPERM);
}
END_TEST

START_TEST(test_index_relative_link_outside) {
    relink("variables/variables.index", "../../out/variables/variables.index");
    ck_assert_int_eq(load_expect("variables.index"), MS_EPERM);
}
END_TEST

START_TEST(test_variables_folder_link) {
    char t[512];
    snprintf(t, sizeof t, "%s/variables", out);
    relink("variables", t);
    ck_assert_int_eq(load_expect("variables"), MS_EPERM);
}
END_TEST

START_TEST(test_shard_fifo) {
    char p[512];
    snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", ver);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    ck_assert_int_eq(load_expect("not a regular file"), MS_EINVAL);
}
END_TEST

START_TEST(test_graph_fifo) {
    char p[512];
    snprintf(p, sizeof p, "%s/saved_model.pb", ver);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    ck_assert_int_eq(load_expect("not a regular file"), MS_EINVAL);
}
END_TEST

START_TEST(test_index_device) {
    relink("variables/variables.index", "/dev/zero");
    ck_assert_int_eq(load_expect("variables.index"), MS_EPERM);
}
END_TEST

/* The operator's own doing (docs/security.md): read. */
START_TEST(test_shard_hard_link) {
    char p[512], t[512];
    snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", ver);
    snprintf(t, sizeof t, "%s/variables/variables.data-00000-of-00001", out);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(link(t, p), 0);
    ck_assert_int_eq(load_expect("-"), MS_OK);
}
END_TEST

/* The manager's completeness check reads beneath the folder too. */
START_TEST(test_verify_in) {
    char t[512];
    snprintf(t, sizeof t, "%s/variables/variables.data-00000-of-00001", out);
    relink("variables/variables.data-00000-of-00001", t);
    ms_dir d;
    ck_assert_int_eq(ms_dir_open(ver, &d), MS_OK);
    ck_assert_int_eq(rt_bundle_verify_in(&d, "variables/variables"), MS_EPERM);
    ms_dir_close(&d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("model_files");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_copy_loads);
    tcase_add_test(tc, test_graph_link_outside);
    tcase_add_test(tc, test_shard_link_outside);
    tcase_add_test(tc, test_index_relative_link_outside);
    tcase_add_test(tc, test_variables_folder_link);
    tcase_add_test(tc, test_shard_fifo);
    tcase_add_test(tc, test_graph_fifo);
    tcase_add_test(tc, test_index_device);
    tcase_add_test(tc, test_shard_hard_link);
    tcase_add_test(tc, test_verify_in);
    suite_add_tcase(s, tc);
    return tu_suite_run(s);
}
