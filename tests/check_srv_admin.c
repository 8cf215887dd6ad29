/* check_srv_admin.c - Check tests for server/models/srv_admin.c (admin CN list,
 * model list limits, base path confinement) and the SSLConfig parser of
 * server/transport/srv_tls.c. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_admin.h"
#include "srv_config.h"
#include "srv_tls.h"
#include "util_node.h"

START_TEST(cn_list) {
    ck_assert(srv_admin_cn_listed("admin", "admin"));
    ck_assert(srv_admin_cn_listed("ops, admin-client ,x", "admin-client"));
    ck_assert(!srv_admin_cn_listed("admin-client", "admin"));
    ck_assert(!srv_admin_cn_listed("admin", "admin-client"));
    ck_assert(!srv_admin_cn_listed("admin", ""));
    ck_assert(!srv_admin_cn_listed(NULL, "admin"));
    ck_assert(!srv_admin_cn_listed(",,", ""));
}
END_TEST

/* The REST gate of Triton's repository load / unload: off unless enabled
 * (naming the call and the flag), then loopback peers only. */
START_TEST(rest_peer_gate) {
    srv_admin_policy p = {0};
    ck_assert_int_eq(srv_admin_authorize_peer(&p, "RepositoryModelLoad", "ipv4:127.0.0.1:5"),
                     MS_EPERM);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "RepositoryModelLoad is disabled"));
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--enable_reload_config_rpc"));
    p.enabled = 1;
    const char *ok[] = {"ipv4:127.0.0.1:5", "ipv4:127.8.9.1:80", "ipv6:[::1]:5",
                        "ipv6:[::ffff:127.0.0.1]:5"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(srv_admin_authorize_peer(&p, "x", ok[i]) == MS_OK, "refused %s", ok[i]);
    const char *no[] = {"ipv4:10.0.0.1:5", "ipv4:128.0.0.1:5", "ipv6:[2001:db8::1]:5", "", NULL};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(srv_admin_authorize_peer(&p, "RepositoryModelUnload", no[i]) == MS_EPERM,
                      "allowed %s", no[i] ? no[i] : "NULL");
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "RepositoryModelUnload over REST"));
}
END_TEST

static srv_config *one_model(const char *path) {
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_single("m", path, &c), MS_OK);
    return c;
}

START_TEST(prefix_confines) {
    char tmpl[] = "/tmp/check_admin_XXXXXX";
    char *root = mkdtemp(tmpl);
    ck_assert_ptr_nonnull(root);
    char inside[PATH_MAX], link[PATH_MAX], deep[PATH_MAX], dotdot[PATH_MAX];
    snprintf(inside, sizeof(inside), "%s/models", root);
    mkdir(inside, 0700);
    snprintf(link, sizeof(link), "%s/models/out", root);
    ck_assert_int_eq(symlink("/etc", link), 0);
    snprintf(deep, sizeof(deep), "%s/models/not/yet/there", root);
    snprintf(dotdot, sizeof(dotdot), "%s/models/../models", root);
    char climb[PATH_MAX];
    snprintf(climb, sizeof(climb), "%s/models/not/../../../etc", root);
    srv_admin_policy p = {.enabled = 1, .base_path_prefix = inside};
    const char *ok[] = {inside, deep, dotdot};
    const char *bad[] = {"/etc", link, climb, "/", root};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        srv_config *c = one_model(ok[i]);
        ck_assert_msg(srv_admin_check_config(&p, c) == MS_OK, "%s: %s", ok[i], ms_errmsg());
        srv_config_free(c);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        srv_config *c = one_model(bad[i]);
        ck_assert_msg(srv_admin_check_config(&p, c) == MS_EINVAL, "%s accepted", bad[i]);
        srv_config_free(c);
    }
    /* A sibling whose name starts with the prefix is outside. */
    char sib[PATH_MAX];
    snprintf(sib, sizeof(sib), "%s/models-evil", root);
    mkdir(sib, 0700);
    srv_config *c = one_model(sib);
    ck_assert_int_eq(srv_admin_check_config(&p, c), MS_EINVAL);
    srv_config_free(c);
    unlink(link);
    rmdir(sib);
    rmdir(inside);
    rmdir(root);
}
END_TEST

START_TEST(max_models) {
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_parse_json("{\"model_config_list\": {\"config\": ["
                                           "{\"name\": \"a\", \"base_path\": \"/m/a\"},"
                                           "{\"name\": \"b\", \"base_path\": \"/m/b\"},"
                                           "{\"name\": \"c\", \"base_path\": \"/m/c\"}]}}",
                                           &c),
                     MS_OK);
    srv_admin_policy p = {.enabled = 1, .max_models = 2};
    ck_assert_int_eq(srv_admin_check_config(&p, c), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--max_num_models"));
    p.max_models = 3;
    ck_assert_int_eq(srv_admin_check_config(&p, c), MS_OK);
    srv_config_free(c);
}
END_TEST

START_TEST(ssl_config_parse) {
    srv_tls *t = NULL;
    ck_assert_int_eq(srv_tls_parse("# comment\nserver_key: \"KEY\\nLINE\"\n"
                                   "server_cert: \"CE\" 'RT'\ncustom_ca: \"CA\\x41\\101\"\n"
                                   "client_verify: true\n",
                                   &t),
                     MS_OK);
    ck_assert_str_eq(srv_tls_key_pem(t), "KEY\nLINE");
    ck_assert_str_eq(srv_tls_cert_pem(t), "CERT");
    ck_assert_str_eq(srv_tls_ca_pem(t), "CAAA");
    ck_assert_int_eq(srv_tls_client_verify(t), 1);
    srv_tls_free(t);
    const char *bad[] = {
        "server_cert: \"C\"",                                        /* no key */
        "server_key: \"K\"",                                         /* no cert */
        "server_key: \"K\" server_cert: \"C\" client_verify: true", /* verify without CA */
        "server_key: \"K\" server_cert: \"C\" bogus: 1",            /* unknown field */
        "server_key: \"K\nserver_cert: \"C\"",                      /* newline in a string */
        "server_key: \"K\" server_cert: \"C\" client_verify: maybe",
        "server_key: \"K\" server_cert: \"C",                       /* unterminated */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = NULL;
        ck_assert_msg(srv_tls_parse(bad[i], &t) == MS_EINVAL, "accepted: %s", bad[i]);
        ck_assert_ptr_null(t);
    }
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"cn_list", cn_list},
        {"rest_peer_gate", rest_peer_gate},
        {"prefix_confines", prefix_confines},
        {"max_models", max_models},
        {"ssl_config_parse", ssl_config_parse},
    };
    return tu_suite_main("srv_admin", cases, sizeof(cases) / sizeof(cases[0]));
}
