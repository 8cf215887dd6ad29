/* check_ms_file.c - common/ms_file: files of a model folder are opened beneath
 * it, regular files only, in both ways of resolving (openat2 and the
 * O_NOFOLLOW walk used where openat2 is missing). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_file.h"
#include "util_node.h"

/* A folder tree:
 *   <top>/outside.txt            "SECRET"         (outside the model folder)
 *   <top>/odir/x.txt             "SECRET2"
 *   <top>/m/in.txt               "inside"
 *   <top>/m/sub/in2.txt          "inside2"
 *   <top>/m/link_in  -> in.txt   (relative link, stays inside)
 *   <top>/m/link_out -> ../outside.txt
 *   <top>/m/link_abs -> <top>/outside.txt
 *   <top>/m/dlink    -> <top>/odir
 *   <top>/m/hard     hard link of outside.txt
 *   <top>/m/fifo     a FIFO
 *   <top>/m/zero     -> /dev/zero
 *   <top>/m/null     -> /dev/null */
static char top[256], mdir[300];

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void) {
    char p[512], q[512];
    strcpy(top, "/tmp/check_ms_file_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(top));
    snprintf(mdir, sizeof mdir, "%s/m", top);
    ck_assert_int_eq(mkdir(mdir, 0755), 0);
    snprintf(p, sizeof p, "%s/outside.txt", top);
    put(p, "SECRET");
    snprintf(p, sizeof p, "%s/odir", top);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/odir/x.txt", top);
    put(p, "SECRET2");
    snprintf(p, sizeof p, "%s/in.txt", mdir);
    put(p, "inside");
    snprintf(p, sizeof p, "%s/sub", mdir);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/sub/in2.txt", mdir);
    put(p, "inside2");
    snprintf(p, sizeof p, "%s/link_in", mdir);
    ck_assert_int_eq(symlink("in.txt", p), 0);
    snprintf(p, sizeof p, "%s/link_out", mdir);
    ck_assert_int_eq(symlink("../outside.txt", p), 0);
    snprintf(q, sizeof q, "%s/outside.txt", top);
    snprintf(p, sizeof p, "%s/link_abs", mdir);
    ck_assert_int_eq(symlink(q, p), 0);
    snprintf(p, sizeof p, "%s/hard", mdir);
    ck_assert_int_eq(link(q, p), 0);
    snprintf(q, sizeof q, "%s/odir", top);
    snprintf(p, sizeof p, "%s/dlink", mdir);
    ck_assert_int_eq(symlink(q, p), 0);
    snprintf(p, sizeof p, "%s/fifo", mdir);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/zero", mdir);
    ck_assert_int_eq(symlink("/dev/zero", p), 0);
    snprintf(p, sizeof p, "%s/null", mdir);
    ck_assert_int_eq(symlink("/dev/null", p), 0);
}

static void teardown(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    ck_assert_int_eq(system(cmd), 0);
    ms_file_force_walk(0);
}

/* Reads rel beneath the model folder; the message never holds the bytes of a
 * file outside. */
static ms_status rd(const char *rel, char *got, size_t cap) {
    ms_dir d;
    ck_assert_int_eq(ms_dir_open(mdir, &d), MS_OK);
    uint8_t *buf = NULL;
    size_t n = 0;
    ms_status st = ms_file_read(&d, rel, 1 << 20, &buf, &n);
    got[0] = '\0';
    if (st == MS_OK) {
        ck_assert_uint_lt(n, cap);
        memcpy(got, buf, n);
        got[n] = '\0';
        ck_assert_uint_eq(buf[n], 0);
    } else {
        ck_assert_ptr_null(strstr(ms_errmsg(), "SECRET"));
        ck_assert_msg(strstr(ms_errmsg(), rel) != NULL, "'%s' not named in: %s", rel, ms_errmsg());
    }
    free(buf);
    ms_dir_close(&d);
    return st;
}

/* The cases both ways of resolving agree on. */
static void common_cases(void) {
    char got[64];
    ck_assert_int_eq(rd("in.txt", got, sizeof got), MS_OK);
    ck_assert_str_eq(got, "inside");
    ck_assert_int_eq(rd("sub/in2.txt", got, sizeof got), MS_OK);
    ck_assert_str_eq(got, "inside2");
    ck_assert_int_eq(rd("link_out", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("link_abs", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("dlink/x.txt", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("../outside.txt", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("sub/../../outside.txt", got, sizeof got), MS_EPERM);
    char abs[512];
    snprintf(abs, sizeof abs, "%s/outside.txt", top);
    ck_assert_int_eq(rd(abs, got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("nosuch", got, sizeof got), MS_ENOTFOUND);
    ck_assert_int_eq(rd("sub", got, sizeof got), MS_EINVAL);
    /* A FIFO nobody writes: refused at once, never blocks the open or a read. */
    ck_assert_int_eq(rd("fifo", got, sizeof got), MS_EINVAL);
    /* Hard links are read (ms_file.h: the operator's own doing). */
    ck_assert_int_eq(rd("hard", got, sizeof got), MS_OK);
    ck_assert_str_eq(got, "SECRET");
}

START_TEST(test_openat2) {
    char got[64];
    common_cases();
    /* A relative link that stays inside is followed. */
    ck_assert_int_eq(rd("link_in", got, sizeof got), MS_OK);
    ck_assert_str_eq(got, "inside");
    /* Devices: links to them leave the folder. */
    ck_assert_int_eq(rd("zero", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("null", got, sizeof got), MS_EPERM);
}
END_TEST

START_TEST(test_walk) {
    char got[64];
    ms_file_force_walk(1);
    common_cases();
    /* The walk refuses every link, inside or not. */
    ck_assert_int_eq(rd("link_in", got, sizeof got), MS_EPERM);
    ck_assert_int_eq(rd("zero", got, sizeof got), MS_EPERM);
}
END_TEST

/* A device node inside the folder: mknod needs privileges, so /dev itself is
 * the folder, which holds real character devices. */
START_TEST(test_device_in_folder) {
    ms_dir d;
    ck_assert_int_eq(ms_dir_open("/dev", &d), MS_OK);
    int fd = -1;
    ck_assert_int_eq(ms_file_open(&d, "zero", &fd), MS_EINVAL);
    ck_assert(strstr(ms_errmsg(), "not a regular file") != NULL);
    ck_assert_int_eq(fd, -1);
    ck_assert_int_eq(ms_file_open(&d, "null", &fd), MS_EINVAL);
    ms_dir_close(&d);
}
END_TEST

/* The cap counts bytes read, not what stat says. */
START_TEST(test_cap) {
    ms_dir d;
    ck_assert_int_eq(ms_dir_open(mdir, &d), MS_OK);
    uint8_t *buf = NULL;
    size_t n = 0;
    ck_assert_int_eq(ms_file_read(&d, "in.txt", 5, &buf, &n), MS_EINVAL);
    ck_assert(strstr(ms_errmsg(), "larger than the limit of 5 bytes") != NULL);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(ms_file_read(&d, "in.txt", 6, &buf, &n), MS_OK);
    ck_assert_uint_eq(n, 6);
    free(buf);
    ms_dir_close(&d);
    /* /proc files say size 0 in stat and hold more: read by what is read. */
    ck_assert_int_eq(ms_dir_open("/proc/self", &d), MS_OK);
    ck_assert_int_eq(ms_file_read(&d, "status", 1 << 20, &buf, &n), MS_OK);
    ck_assert_uint_gt(n, 0);
    free(buf);
    ms_dir_close(&d);
}
END_TEST

/* Full paths given to ops map back inside the folder, or are refused. */
START_TEST(test_inside) {
    ms_dir d;
    char dslash[400];
    snprintf(dslash, sizeof dslash, "%s//", mdir);
    ck_assert_int_eq(ms_dir_open(dslash, &d), MS_OK);
    ck_assert_str_eq(d.path, mdir);
    char p[512];
    const char *rel;
    snprintf(p, sizeof p, "%s/assets/vocab.txt", mdir);
    ck_assert_int_eq(ms_dir_inside(&d, p, &rel), MS_OK);
    ck_assert_str_eq(rel, "assets/vocab.txt");
    snprintf(p, sizeof p, "%s/outside.txt", top);
    ck_assert_int_eq(ms_dir_inside(&d, p, &rel), MS_EPERM);
    ck_assert(strstr(ms_errmsg(), "outside the model folder") != NULL);
    snprintf(p, sizeof p, "%sx/y", mdir); /* a sibling whose name starts the same */
    ck_assert_int_eq(ms_dir_inside(&d, p, &rel), MS_EPERM);
    ck_assert_int_eq(ms_dir_inside(&d, "assets/vocab.txt", &rel), MS_EPERM);
    ck_assert_int_eq(ms_dir_inside(&d, mdir, &rel), MS_EPERM);
    ms_dir_close(&d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ms_file");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_openat2);
    tcase_add_test(tc, test_walk);
    tcase_add_test(tc, test_device_in_folder);
    tcase_add_test(tc, test_cap);
    tcase_add_test(tc, test_inside);
    suite_add_tcase(s, tc);
    return tu_suite_run(s);
}
