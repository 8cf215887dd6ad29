/* check_srv_config.c - Check tests for server/cli/srv_flags.c, srv_config.c,
 * srv_status.c and the version-folder rules of srv_manager.c. */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "srv_config.h"
#include "srv_flags.h"
#include "srv_manager.h"
#include "srv_status.h"
#include "util_serve.h"

/* ---- flags ---- */

START_TEST(test_flags_defaults_match_tf_serving) {
    srv_flags f;
    char *argv[] = {"serve", NULL};
    ck_assert_int_eq(srv_flags_parse(1, argv, 1, &f), MS_OK);
    ck_assert_int_eq(f.port, 8500);
    ck_assert_int_eq(f.rest_api_port, 0);
    ck_assert(f.file_system_poll_wait_seconds == 1.0);
    ck_assert_int_eq(f.model_config_file_poll_wait_seconds, 0);
    ck_assert_int_eq((int)(f.max_message_bytes == 256 << 20), 1);
    ck_assert_int_eq((int)(f.max_request_memory_bytes == (int64_t)1 << 30), 1);
    ck_assert_ptr_null(f.model_base_path);
}
END_TEST

START_TEST(test_flags_both_forms) {
    srv_flags f;
    char *argv[] = {"serve",
                    "--port=9000",
                    "--model_name",
                    "ct",
                    "--model_base_path=/m/ct",
                    "--rest_api_port",
                    "8501",
                    "--log_level=debug",
                    "--file_system_poll_wait_seconds=0.5",
                    "--grpc_max_threads=3",
                    NULL};
    ck_assert_int_eq(srv_flags_parse(10, argv, 1, &f), MS_OK);
    ck_assert_int_eq(f.port, 9000);
    ck_assert_str_eq(f.model_name, "ct");
    ck_assert_str_eq(f.model_base_path, "/m/ct");
    ck_assert_int_eq(f.rest_api_port, 8501);
    ck_assert_int_eq(f.log_level, MS_LOG_DEBUG);
    ck_assert(f.file_system_poll_wait_seconds == 0.5);
    ck_assert_int_eq(f.grpc_max_threads, 3);
}
END_TEST

START_TEST(test_flags_errors_name_the_flag) {
    srv_flags f;
    char *a1[] = {"serve", "--modle_name=x", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a1, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--modle_name"));
    char *a2[] = {"serve", "--port=http", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a2, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--port"));
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "http"));
    char *a3[] = {"serve", "--port", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a3, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "needs a value"));
    char *a4[] = {"serve", "stray", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a4, 1, &f), MS_EINVAL);
    /* As TF Serving, the config file wins over --model_base_path (noted). */
    char *a5[] = {"serve", "--model_config_file=/c", "--model_base_path=/m", NULL};
    ck_assert_int_eq(srv_flags_parse(3, a5, 1, &f), MS_OK);
    ck_assert_int_eq(f.single_model_ignored, 1);
    char *a7[] = {"serve", "--request_log=some", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a7, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--request_log"));
    char *a8[] = {"serve", "--log_format=xml", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a8, 1, &f), MS_EINVAL);
    char *a6[] = {"serve", "--log_level=loud", NULL};
    ck_assert_int_eq(srv_flags_parse(2, a6, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "loud"));
}
END_TEST

/* TF Serving flags without effect here are accepted, their values still
 * checked, and each is noted once for its warning line. */
START_TEST(test_flags_tf_serving_noted) {
    srv_flags f;
    char *a[] = {"serve", "--flush_filesystem_caches", "--skip_initialize_tpu=true",
                 "--num_load_threads", "4", "--flush_filesystem_caches=false",
                 "--tensorflow_session_parallelism=3", "--port=9000", "--enable_batching", NULL};
    ck_assert_int_eq(srv_flags_parse(9, a, 1, &f), MS_OK);
    ck_assert_int_eq(f.n_noted, 3); /* flush caches once, tpu, load threads */
    ck_assert_int_eq(f.enable_batching, 1); /* implemented: not noted */
    ck_assert_int_eq(f.intra_op_threads, 3);
    ck_assert_int_eq(f.port, 9000);
    char *b[] = {"serve", "--tensorflow_session_parallelism=3",
                 "--tensorflow_intra_op_parallelism=5", NULL};
    ck_assert_int_eq(srv_flags_parse(3, b, 1, &f), MS_OK);
    ck_assert_int_eq(f.intra_op_threads, 5);
    ck_assert_int_eq(f.n_noted, 0);
    char *c[] = {"serve", "--use_alts_credentials=maybe", NULL};
    ck_assert_int_eq(srv_flags_parse(2, c, 1, &f), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "--use_alts_credentials"));
    char *d[] = {"serve", "--per_process_gpu_memory_fraction=1.5", NULL};
    ck_assert_int_eq(srv_flags_parse(2, d, 1, &f), MS_EINVAL);
    ck_assert_str_eq(f.saved_model_tags, "serve");
    ck_assert_int_ge(srv_flags_count(), 48);
    ck_assert_str_eq(srv_flags_name(0), "port");
    ck_assert_ptr_null(srv_flags_name(srv_flags_count()));
}
END_TEST

/* ---- config ---- */

static const char *k_json =
    "{\"model_config_list\": {\"config\": ["
    " {\"name\": \"ct\", \"base_path\": \"/models/ct\", \"model_platform\": \"tensorflow\","
    "  \"model_version_policy\": {\"specific\": {\"versions\": [2, 1, \"2\"]}},"
    "  \"version_labels\": {\"stable\": 1, \"canary\": \"2\"}},"
    " {\"name\": \"mr\", \"basePath\": \"/models/mr\", \"modelVersionPolicy\": {\"latest\": "
    "{\"numVersions\": 3}}},"
    " {\"name\": \"all\", \"base_path\": \"/models/all\", \"model_version_policy\": {\"all\": {}}},"
    " {\"name\": \"plain\", \"base_path\": \"/models/plain\"}"
    "]}}";

static void check_parsed(const srv_config *c) {
    ck_assert_int_eq(c->nmodels, 4);
    const srv_model_config *ct = &c->models[0];
    ck_assert_str_eq(ct->name, "ct");
    ck_assert_str_eq(ct->base_path, "/models/ct");
    ck_assert_int_eq(ct->policy, SRV_POLICY_SPECIFIC);
    ck_assert_int_eq(ct->nversions, 2); /* sorted, duplicates removed */
    ck_assert_int_eq(ct->versions[0], 1);
    ck_assert_int_eq(ct->versions[1], 2);
    ck_assert_int_eq(ct->nlabels, 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(ct->labels[i].name, "stable") == 0)
            ck_assert_int_eq(ct->labels[i].version, 1);
        else if (strcmp(ct->labels[i].name, "canary") == 0)
            ck_assert_int_eq(ct->labels[i].version, 2);
        else
            ck_abort_msg("unexpected label %s", ct->labels[i].name);
    }
    ck_assert_int_eq(c->models[1].policy, SRV_POLICY_LATEST);
    ck_assert_int_eq(c->models[1].num_versions, 3);
    ck_assert_str_eq(c->models[1].base_path, "/models/mr");
    ck_assert_int_eq(c->models[2].policy, SRV_POLICY_ALL);
    ck_assert_int_eq(c->models[3].policy, SRV_POLICY_LATEST);
    ck_assert_int_eq(c->models[3].num_versions, 1);
}

START_TEST(test_config_json) {
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_parse_json(k_json, &c), MS_OK);
    check_parsed(c);
    srv_config_free(c);
}
END_TEST

START_TEST(test_config_text_format_same_as_json) {
    const char *txt =
        "# comment\n"
        "model_config_list {\n"
        "  config {\n"
        "    name: 'ct'\n base_path: \"/models/ct\"\n model_platform: 'tensorflow'\n"
        "    model_version_policy { specific { versions: 2 versions: 1 versions: 2 } }\n"
        "    version_labels { key: 'stable' value: 1 }\n"
        "    version_labels { key: 'canary' value: 2 }\n"
        "  }\n"
        "  config { name: 'mr' base_path: '/models/mr' model_version_policy: { latest { "
        "num_versions: 3 } } }\n"
        "  config < name: 'all' base_path: '/models/all' model_version_policy { all {} } >\n"
        "  config { name: 'plain', base_path: '/models/plain' }\n"
        "}\n";
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_parse_text(txt, &c), MS_OK);
    check_parsed(c);
    srv_config_free(c);
}
END_TEST

START_TEST(test_config_errors_name_the_key) {
    srv_config *c = NULL;
    struct {
        const char *json, *needle;
    } cases[] = {
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_pth\": \"/x\"}]}}",
         "base_pth"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\"}]}}", "base_path"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"\", \"base_path\": \"/x\"}]}}",
         "name"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\"},"
         "{\"name\": \"a\", \"base_path\": \"/y\"}]}}",
         "twice"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"model_platform\": \"pytorch\"}]}}",
         "pytorch"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"model_version_policy\": {\"specific\": {\"versions\": []}}}]}}",
         "at least one"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"model_version_policy\": {\"newest\": {}}}]}}",
         "newest"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"version_labels\": {\"s\": \"one\"}}]}}",
         "one"},
        /* a version past int64 (fuzz_config: the conversion was undefined
         * behaviour), a fraction, a value just past 2^63 */
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"model_version_policy\": {\"specific\": {\"versions\": [7.7e45]}}}]}}",
         "expected an integer (int64), got 7.7e+45"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"model_version_policy\": {\"specific\": {\"versions\": [1.5]}}}]}}",
         "expected an integer"},
        {"{\"model_config_list\": {\"config\": [{\"name\": \"a\", \"base_path\": \"/x\","
         "\"version_labels\": {\"s\": 9223372036854775808}}]}}",
         "expected an integer"},
        {"{\"custom_model_config\": {}}", "custom_model_config"},
        {"{\"model_config_list\": ", "JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_msg(srv_config_parse_json(cases[i].json, &c) == MS_EINVAL, "case %zu accepted",
                      i);
        ck_assert_msg(strstr(ms_errmsg(), cases[i].needle) != NULL, "case %zu: \"%s\" lacks \"%s\"",
                      i, ms_errmsg(), cases[i].needle);
    }
    ck_assert_int_eq(srv_config_parse_text("model_config_list { config { name: 'a' ", &c),
                     MS_EINVAL);
    ck_assert_int_eq(srv_config_parse_text("model_config_list { config { name 'a' } }", &c),
                     MS_EINVAL);
    ck_assert_int_eq(srv_config_parse_text("model_config_list { config { name: 'a' base_path: '/x' "
                                           "version_labels { key: 's' } } }",
                                           &c),
                     MS_EINVAL);
}
END_TEST

START_TEST(test_config_empty_is_no_models) {
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_parse_json("{}", &c), MS_OK);
    ck_assert_int_eq(c->nmodels, 0);
    srv_config_free(c);
    ck_assert_int_eq(srv_config_parse_text("", &c), MS_OK);
    ck_assert_int_eq(c->nmodels, 0);
    srv_config_free(c);
}
END_TEST

/* fuzz_config found it: an empty "versions" list given twice reallocated the
 * list to 0 bytes, which glibc frees, and the config's free freed it again. */
START_TEST(test_config_policy_given_twice) {
    srv_config *c = NULL;
    ms_status st = srv_config_parse_json(
        "{\"model_config_list\": {\"config\": [{\"name\": \"m\", \"base_path\": \"/m\", "
        "\"model_version_policy\": {\"specific\": {\"versions\": []}}, "
        "\"model_version_policy\": {\"specific\": {\"versions\": []}}}]}}",
        &c);
    ck_assert_int_eq(st, MS_EINVAL); /* "specific needs at least one version" */
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "at least one version"));
    st = srv_config_parse_json(
        "{\"model_config_list\": {\"config\": [{\"name\": \"m\", \"base_path\": \"/m\", "
        "\"model_version_policy\": {\"specific\": {\"versions\": [], \"versions\": [3]}}}]}}",
        &c);
    ck_assert_int_eq(st, MS_OK);
    ck_assert_int_eq(c->models[0].nversions, 1);
    ck_assert_int_eq(c->models[0].versions[0], 3);
    srv_config_free(c);
}
END_TEST

/* Found by reviewing the parser for keys given twice (the fuzzer had not
 * reached it): a second version_labels object replaced the list but kept the
 * count, and its labels were written past the new list's end. */
START_TEST(test_config_labels_given_twice) {
    srv_config *c = NULL;
    ms_status st = srv_config_parse_json(
        "{\"model_config_list\": {\"config\": [{\"name\": \"m\", \"base_path\": \"/m\", "
        "\"version_labels\": {\"a\": 1}, \"version_labels\": {\"b\": 2, \"c\": 3}}]}}",
        &c);
    ck_assert_int_eq(st, MS_OK);
    ck_assert_int_eq(c->models[0].nlabels, 3);
    ck_assert_str_eq(c->models[0].labels[0].name, "a");
    ck_assert_int_eq(c->models[0].labels[0].version, 1);
    ck_assert_str_eq(c->models[0].labels[2].name, "c");
    ck_assert_int_eq(c->models[0].labels[2].version, 3);
    srv_config_free(c);
    c = NULL;
    st = srv_config_parse_json(
        "{\"model_config_list\": {\"config\": [{\"name\": \"m\", \"base_path\": \"/m\", "
        "\"version_labels\": {\"a\": 1}, \"version_labels\": {\"a\": 2}}]}}",
        &c);
    ck_assert_int_eq(st, MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "given twice"));
}
END_TEST

START_TEST(test_config_from_proto) {
    /* Build a ModelServerConfig, pack it, unpack it: the wire form a
     * ReloadConfigRequest carries. */
    Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy__Specific sp =
        TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__SPECIFIC__INIT;
    int64_t vers[] = {5, 3};
    sp.n_versions = 2;
    sp.versions = vers;
    Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy pol =
        TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__INIT;
    pol.policy_choice_case =
        TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_SPECIFIC;
    pol.specific = &sp;
    Tensorflow__Serving__ModelConfig__VersionLabelsEntry lab =
        TENSORFLOW__SERVING__MODEL_CONFIG__VERSION_LABELS_ENTRY__INIT;
    lab.key = "stable";
    lab.value = 3;
    Tensorflow__Serving__ModelConfig__VersionLabelsEntry *labp = &lab;
    Tensorflow__Serving__ModelConfig mc = TENSORFLOW__SERVING__MODEL_CONFIG__INIT;
    mc.name = "ct";
    mc.base_path = "/m/ct";
    mc.model_platform = "tensorflow";
    mc.model_version_policy = &pol;
    mc.n_version_labels = 1;
    mc.version_labels = &labp;
    Tensorflow__Serving__ModelConfig *mcp = &mc;
    Tensorflow__Serving__ModelConfigList l = TENSORFLOW__SERVING__MODEL_CONFIG_LIST__INIT;
    l.n_config = 1;
    l.config = &mcp;
    Tensorflow__Serving__ModelServerConfig msc = TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__INIT;
    msc.config_case = TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST;
    msc.model_config_list = &l;
    uint8_t buf[512];
    size_t n = tensorflow__serving__model_server_config__pack(&msc, buf);
    Tensorflow__Serving__ModelServerConfig *u =
        tensorflow__serving__model_server_config__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(u);
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_from_proto(u, &c), MS_OK);
    ck_assert_int_eq(c->nmodels, 1);
    ck_assert_str_eq(c->models[0].name, "ct");
    ck_assert_int_eq(c->models[0].policy, SRV_POLICY_SPECIFIC);
    ck_assert_int_eq(c->models[0].nversions, 2);
    ck_assert_int_eq(c->models[0].versions[0], 3);
    ck_assert_int_eq(c->models[0].labels[0].version, 3);
    srv_model_config cp = {0};
    ck_assert_int_eq(srv_model_config_copy(&c->models[0], &cp), MS_OK);
    ck_assert(srv_model_config_equal(&cp, &c->models[0]));
    cp.num_versions = 0;
    cp.versions[0] = 4;
    ck_assert(!srv_model_config_equal(&cp, &c->models[0]));
    srv_model_config_clear(&cp);
    srv_config_free(c);
    tensorflow__serving__model_server_config__free_unpacked(u, NULL);
}
END_TEST

START_TEST(test_config_read_file_detects_format) {
    char dir[512], path[600];
    ut_tmpdir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/m.json", dir);
    FILE *f = fopen(path, "w");
    fputs("  \n{\"model_config_list\": {\"config\": {\"name\": \"a\", \"base_path\": \"/x\"}}}", f);
    fclose(f);
    srv_config *c = NULL;
    ck_assert_int_eq(srv_config_read_file(path, &c), MS_OK);
    ck_assert_int_eq(c->nmodels, 1);
    srv_config_free(c);
    f = fopen(path, "w");
    fputs("model_config_list { config { name: 'b' base_path: '/y' } }", f);
    fclose(f);
    ck_assert_int_eq(srv_config_read_file(path, &c), MS_OK);
    ck_assert_str_eq(c->models[0].name, "b");
    srv_config_free(c);
    unlink(path);
    ck_assert_int_eq(srv_config_read_file(path, &c), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), path));
    rmdir(dir);
}
END_TEST

/* ---- status mapping ---- */

START_TEST(test_status_table) {
    ck_assert_int_eq(srv_status_to_grpc(MS_OK), GRPC_STATUS_OK);
    ck_assert_int_eq(srv_status_to_grpc(MS_EINVAL), GRPC_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(srv_status_to_grpc(MS_ENOTFOUND), GRPC_STATUS_NOT_FOUND);
    ck_assert_int_eq(srv_status_to_grpc(MS_EPRECOND), GRPC_STATUS_FAILED_PRECONDITION);
    ck_assert_int_eq(srv_status_to_grpc(MS_ENOMEM), GRPC_STATUS_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(srv_status_to_grpc(MS_EBUSY), GRPC_STATUS_UNAVAILABLE);
    ck_assert_int_eq(srv_status_to_grpc(MS_ESHUTDOWN), GRPC_STATUS_UNAVAILABLE);
    ck_assert_int_eq(srv_status_to_grpc(MS_ETIMEDOUT), GRPC_STATUS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(srv_status_to_grpc(MS_ECANCELED), GRPC_STATUS_CANCELLED);
    ck_assert_int_eq(srv_status_to_grpc(MS_ENOTSUP), GRPC_STATUS_UNIMPLEMENTED);
    ck_assert_int_eq(srv_status_to_grpc(MS_EDEVICE), GRPC_STATUS_INTERNAL);
    ck_assert_int_eq(srv_status_to_grpc(MS_EINTERNAL), GRPC_STATUS_INTERNAL);
    ck_assert_int_eq(srv_status_to_grpc(MS_EDATALOSS), GRPC_STATUS_DATA_LOSS);
    ck_assert_int_eq(srv_status_to_grpc((ms_status)999), GRPC_STATUS_UNKNOWN);
    ck_assert_str_eq(srv_grpc_code_name(GRPC_STATUS_NOT_FOUND), "NOT_FOUND");
}
END_TEST

/* ---- version folders ---- */

START_TEST(test_parse_version_dir) {
    ck_assert_int_eq(srv_parse_version_dir("00000123"), 123);
    ck_assert_int_eq(srv_parse_version_dir("7"), 7);
    ck_assert_int_eq(srv_parse_version_dir(""), -1);
    ck_assert_int_eq(srv_parse_version_dir("12a"), -1);
    ck_assert_int_eq(srv_parse_version_dir("-3"), -1);
    ck_assert_int_eq(srv_parse_version_dir(".tmp"), -1);
    ck_assert_int_eq(srv_parse_version_dir("99999999999999999999999"), -1);
}
END_TEST

static void copy_file(const char *src, const char *dst, size_t limit) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    char buf[4096];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0 && total < limit) {
        if (total + n > limit) n = limit - total;
        fwrite(buf, 1, n, out);
        total += n;
    }
    fclose(in);
    fclose(out);
}

static void age_file(const char *path) {
    struct timespec ts[2] = {{time(NULL) - 10, 0}, {time(NULL) - 10, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

START_TEST(test_version_dir_complete) {
    char src[1024], dir[512], p[1200], s[1200];
    uint64_t sig1 = 0, sig2 = 0;
    ut_savedmodel_path(src, sizeof(src), "saved_model_half_plus_two_cpu/00000123");
    /* The shared model itself is complete. */
    ck_assert_int_eq(srv_version_dir_complete(src, &sig1), 1);

    ut_tmpdir(dir, sizeof(dir));
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 0); /* empty */
    snprintf(p, sizeof(p), "%s/saved_model.pb", dir);
    snprintf(s, sizeof(s), "%s/saved_model.pb", src);
    copy_file(s, p, SIZE_MAX);
    age_file(p);
    /* The graph restores variables: without variables/ it is not complete. */
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 0);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "variables"));
    snprintf(p, sizeof(p), "%s/variables", dir);
    mkdir(p, 0755);
    /* A truncated index (footer missing) is not complete. */
    snprintf(p, sizeof(p), "%s/variables/variables.index", dir);
    snprintf(s, sizeof(s), "%s/variables/variables.index", src);
    copy_file(s, p, 40);
    age_file(p);
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 0);
    copy_file(s, p, SIZE_MAX);
    age_file(p);
    /* Index complete but the data shard is missing. */
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 0);
    ck_assert_ptr_nonnull(strstr(ms_errmsg(), "shard"));
    snprintf(p, sizeof(p), "%s/variables/variables.data-00000-of-00001", dir);
    snprintf(s, sizeof(s), "%s/variables/variables.data-00000-of-00001", src);
    copy_file(s, p, SIZE_MAX);
    /* Just written: wait for it to settle. */
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 0);
    age_file(p);
    ck_assert_int_eq(srv_version_dir_complete(dir, &sig2), 1);
    /* A model without variables (matrix_half_plus_two) is complete as is. */
    ut_savedmodel_path(src, sizeof(src), "matrix_half_plus_two/1");
    ck_assert_int_eq(srv_version_dir_complete(src, &sig1), 1);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *srv_config_suite(void) {
    Suite *s = suite_create("srv_config");
    TCase *tc = tcase_create("flags");
    tcase_add_test(tc, test_flags_defaults_match_tf_serving);
    tcase_add_test(tc, test_flags_both_forms);
    tcase_add_test(tc, test_flags_errors_name_the_flag);
    tcase_add_test(tc, test_flags_tf_serving_noted);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, test_config_json);
    tcase_add_test(tc, test_config_text_format_same_as_json);
    tcase_add_test(tc, test_config_errors_name_the_key);
    tcase_add_test(tc, test_config_empty_is_no_models);
    tcase_add_test(tc, test_config_policy_given_twice);
    tcase_add_test(tc, test_config_labels_given_twice);
    tcase_add_test(tc, test_config_from_proto);
    tcase_add_test(tc, test_config_read_file_detects_format);
    suite_add_tcase(s, tc);
    tc = tcase_create("status");
    tcase_add_test(tc, test_status_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("version_dirs");
    tcase_add_test(tc, test_parse_version_dir);
    tcase_add_test(tc, test_version_dir_complete);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(srv_config_suite());
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
