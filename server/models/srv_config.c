/* srv_config.c - ModelServerConfig from JSON (cJSON), text format, or proto.
 *
 * The text format is turned into the same cJSON tree the JSON path reads
 * (repeated fields become arrays, version_labels entries become an object),
 * so both share one converter and one set of checks. */
#include "srv_config.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static char *dupstr(const char *s) {
    return s ? strdup(s) : NULL;
}

void srv_model_config_clear(srv_model_config *m) {
    free(m->name);
    free(m->base_path);
    free(m->versions);
    for (int i = 0; i < m->nlabels; i++)
        free(m->labels[i].name);
    free(m->labels);
    memset(m, 0, sizeof(*m));
}

void srv_config_free(srv_config *c) {
    if (c == NULL) return;
    for (int i = 0; i < c->nmodels; i++)
        srv_model_config_clear(&c->models[i]);
    free(c->models);
    free(c);
}

ms_status srv_model_config_copy(const srv_model_config *src, srv_model_config *dst) {
    memset(dst, 0, sizeof(*dst));
    dst->name = dupstr(src->name);
    dst->base_path = dupstr(src->base_path);
    dst->policy = src->policy;
    dst->num_versions = src->num_versions;
    if (src->nversions > 0) {
        dst->versions = malloc(sizeof(int64_t) * (size_t)src->nversions);
        if (dst->versions)
            memcpy(dst->versions, src->versions, sizeof(int64_t) * (size_t)src->nversions);
        dst->nversions = src->nversions;
    }
    if (src->nlabels > 0) {
        dst->labels = calloc((size_t)src->nlabels, sizeof(srv_label));
        if (dst->labels) {
            dst->nlabels = src->nlabels;
            for (int i = 0; i < src->nlabels; i++) {
                dst->labels[i].name = dupstr(src->labels[i].name);
                dst->labels[i].version = src->labels[i].version;
                if (dst->labels[i].name == NULL) goto oom;
            }
        }
    }
    if (dst->name == NULL || dst->base_path == NULL ||
        (src->nversions > 0 && dst->versions == NULL) || (src->nlabels > 0 && dst->labels == NULL))
        goto oom;
    return MS_OK;
oom:
    srv_model_config_clear(dst);
    return ms_errf(MS_ENOMEM, "out of memory copying model config");
}

int srv_model_config_equal(const srv_model_config *a, const srv_model_config *b) {
    if (strcmp(a->name, b->name) != 0 || strcmp(a->base_path, b->base_path) != 0) return 0;
    if (a->policy != b->policy || a->nversions != b->nversions || a->nlabels != b->nlabels)
        return 0;
    if (a->policy == SRV_POLICY_LATEST && a->num_versions != b->num_versions) return 0;
    for (int i = 0; i < a->nversions; i++)
        if (a->versions[i] != b->versions[i]) return 0;
    for (int i = 0; i < a->nlabels; i++) {
        int found = 0;
        for (int j = 0; j < b->nlabels; j++)
            if (strcmp(a->labels[i].name, b->labels[j].name) == 0 &&
                a->labels[i].version == b->labels[j].version)
                found = 1;
        if (!found) return 0;
    }
    return 1;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Common checks once a model entry is filled in; sorts and dedups versions. */
static ms_status check_model(srv_model_config *m, int idx) {
    if (m->name == NULL || m->name[0] == '\0')
        return ms_errf(MS_EINVAL, "config[%d]: \"name\" is required and must not be empty", idx);
    if (m->base_path == NULL || m->base_path[0] == '\0')
        return ms_errf(MS_EINVAL, "model \"%s\": \"base_path\" is required", m->name);
    if (m->policy == SRV_POLICY_LATEST && m->num_versions == 0) m->num_versions = 1;
    if (m->policy == SRV_POLICY_SPECIFIC) {
        if (m->nversions == 0)
            return ms_errf(MS_EINVAL,
                           "model \"%s\": model_version_policy.specific needs at least one version",
                           m->name);
        qsort(m->versions, (size_t)m->nversions, sizeof(int64_t), cmp_i64);
        int k = 0;
        for (int i = 0; i < m->nversions; i++)
            if (k == 0 || m->versions[k - 1] != m->versions[i]) m->versions[k++] = m->versions[i];
        m->nversions = k;
        for (int i = 0; i < m->nversions; i++)
            if (m->versions[i] < 0)
                return ms_errf(MS_EINVAL, "model \"%s\": version %lld is negative", m->name,
                               (long long)m->versions[i]);
    }
    for (int i = 0; i < m->nlabels; i++) {
        if (m->labels[i].name[0] == '\0')
            return ms_errf(MS_EINVAL, "model \"%s\": empty version label", m->name);
        if (m->labels[i].version < 0)
            return ms_errf(MS_EINVAL, "model \"%s\": label \"%s\" points to negative version %lld",
                           m->name, m->labels[i].name, (long long)m->labels[i].version);
    }
    return MS_OK;
}

static ms_status check_config(srv_config *c) {
    for (int i = 0; i < c->nmodels; i++) {
        ms_status st = check_model(&c->models[i], i);
        if (st != MS_OK) return st;
        for (int j = 0; j < i; j++)
            if (strcmp(c->models[i].name, c->models[j].name) == 0)
                return ms_errf(MS_EINVAL, "model name \"%s\" appears twice in the config",
                               c->models[i].name);
    }
    return MS_OK;
}

/* ------------------------------------------------------------------------ */
/* cJSON tree -> srv_config                                                  */
/* ------------------------------------------------------------------------ */

/* Field name match: "base_path" also matches "basePath" (protobuf JSON). */
static int key_is(const char *key, const char *proto_name) {
    if (strcmp(key, proto_name) == 0) return 1;
    const char *p = proto_name;
    const char *k = key;
    while (*p && *k) {
        if (*p == '_') {
            p++;
            if (*k != toupper((unsigned char)*p)) return 0;
        } else if (*k != *p) {
            return 0;
        }
        p++;
        k++;
    }
    return *p == '\0' && *k == '\0';
}

static ms_status get_int64(const cJSON *v, const char *what, int64_t *out) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* the range first: converting a double outside int64's range is
         * undefined behaviour in C */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
            return ms_errf(MS_EINVAL, "%s: expected an integer (int64), got %g", what, d);
        *out = (int64_t)d;
        return MS_OK;
    }
    if (cJSON_IsString(v)) { /* protobuf JSON writes int64 as a string */
        char *end;
        errno = 0;
        long long x = strtoll(v->valuestring, &end, 10);
        if (errno == 0 && end != v->valuestring && *end == '\0') {
            *out = x;
            return MS_OK;
        }
        return ms_errf(MS_EINVAL, "%s: expected an integer, got \"%s\"", what, v->valuestring);
    }
    return ms_errf(MS_EINVAL, "%s: expected an integer", what);
}

static ms_status get_string(const cJSON *v, const char *what, char **out) {
    if (!cJSON_IsString(v)) return ms_errf(MS_EINVAL, "%s: expected a string", what);
    free(*out);
    *out = strdup(v->valuestring);
    if (*out == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    return MS_OK;
}

static ms_status parse_policy(const cJSON *pol, srv_model_config *m, const char *mname) {
    if (!cJSON_IsObject(pol))
        return ms_errf(MS_EINVAL, "model \"%s\": model_version_policy must be an object", mname);
    int nset = 0;
    for (const cJSON *c = pol->child; c != NULL; c = c->next) {
        nset++;
        if (key_is(c->string, "latest")) {
            m->policy = SRV_POLICY_LATEST;
            if (!cJSON_IsObject(c))
                return ms_errf(MS_EINVAL, "model \"%s\": latest must be an object", mname);
            for (const cJSON *f = c->child; f != NULL; f = f->next) {
                int64_t n;
                if (!key_is(f->string, "num_versions"))
                    return ms_errf(MS_EINVAL, "model \"%s\": unknown key \"%s\" in latest", mname,
                                   f->string);
                ms_status st = get_int64(f, "latest.num_versions", &n);
                if (st != MS_OK) return st;
                if (n < 0 || n > 1000000)
                    return ms_errf(MS_EINVAL, "model \"%s\": latest.num_versions %lld out of range",
                                   mname, (long long)n);
                m->num_versions = (uint32_t)n;
            }
        } else if (key_is(c->string, "all")) {
            m->policy = SRV_POLICY_ALL;
        } else if (key_is(c->string, "specific")) {
            m->policy = SRV_POLICY_SPECIFIC;
            if (!cJSON_IsObject(c))
                return ms_errf(MS_EINVAL, "model \"%s\": specific must be an object", mname);
            for (const cJSON *f = c->child; f != NULL; f = f->next) {
                if (!key_is(f->string, "versions"))
                    return ms_errf(MS_EINVAL, "model \"%s\": unknown key \"%s\" in specific", mname,
                                   f->string);
                int n = cJSON_IsArray(f) ? cJSON_GetArraySize(f) : 1;
                /* never realloc to 0 bytes: glibc frees the block and returns NULL,
                 * and m->versions would be freed twice (two empty "versions") */
                size_t cnt = (size_t)m->nversions + (size_t)n;
                int64_t *v = realloc(m->versions, sizeof(int64_t) * (cnt ? cnt : 1));
                if (v == NULL) return ms_errf(MS_ENOMEM, "out of memory");
                m->versions = v;
                const cJSON *e = cJSON_IsArray(f) ? f->child : f;
                for (; e != NULL; e = cJSON_IsArray(f) ? e->next : NULL) {
                    ms_status st = get_int64(e, "specific.versions", &m->versions[m->nversions]);
                    if (st != MS_OK) return st;
                    m->nversions++;
                }
            }
        } else {
            return ms_errf(MS_EINVAL,
                           "model \"%s\": unknown version policy \"%s\" (expected latest, all or "
                           "specific)",
                           mname, c->string);
        }
    }
    if (nset > 1)
        return ms_errf(MS_EINVAL, "model \"%s\": model_version_policy sets more than one policy",
                       mname);
    return MS_OK;
}

static ms_status parse_labels(const cJSON *lab, srv_model_config *m, const char *mname) {
    if (!cJSON_IsObject(lab))
        return ms_errf(MS_EINVAL, "model \"%s\": version_labels must be an object {label: version}",
                       mname);
    /* version_labels may be given more than once (a JSON map merges, as in
     * proto3): the list grows, it is not replaced */
    size_t cap = (size_t)cJSON_GetArraySize(lab) + (size_t)m->nlabels;
    if (cap == 0) cap = 1; /* never realloc to 0 bytes (see parse_policy) */
    srv_label *nl = realloc(m->labels, cap * sizeof(srv_label));
    if (nl == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    m->labels = nl;
    memset(nl + m->nlabels, 0, (cap - (size_t)m->nlabels) * sizeof(srv_label));
    for (const cJSON *c = lab->child; c != NULL; c = c->next) {
        srv_label *l = &m->labels[m->nlabels];
        char what[300];
        snprintf(what, sizeof(what), "model \"%s\": version_labels.%s", mname, c->string);
        ms_status st = get_int64(c, what, &l->version);
        if (st != MS_OK) return st;
        for (int j = 0; j < m->nlabels; j++)
            if (strcmp(m->labels[j].name, c->string) == 0)
                return ms_errf(MS_EINVAL, "model \"%s\": label \"%s\" given twice", mname,
                               c->string);
        l->name = strdup(c->string);
        if (l->name == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        m->nlabels++;
    }
    return MS_OK;
}

static ms_status parse_model(const cJSON *obj, srv_model_config *m, int idx) {
    char where[64];
    snprintf(where, sizeof(where), "config[%d]", idx);
    if (!cJSON_IsObject(obj)) return ms_errf(MS_EINVAL, "%s: expected an object", where);
    /* The name first, so that later messages can use it. */
    for (const cJSON *c = obj->child; c != NULL; c = c->next)
        if (key_is(c->string, "name")) {
            ms_status st = get_string(c, "config.name", &m->name);
            if (st != MS_OK) return st;
        }
    const char *mname = m->name ? m->name : where;
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        ms_status st = MS_OK;
        if (key_is(c->string, "name")) {
            continue;
        } else if (key_is(c->string, "base_path")) {
            st = get_string(c, "config.base_path", &m->base_path);
        } else if (key_is(c->string, "model_platform")) {
            if (!cJSON_IsString(c) ||
                (strcmp(c->valuestring, "tensorflow") != 0 && c->valuestring[0] != '\0'))
                return ms_errf(MS_EINVAL,
                               "model \"%s\": model_platform must be \"tensorflow\", got \"%s\"",
                               mname, cJSON_IsString(c) ? c->valuestring : "(not a string)");
        } else if (key_is(c->string, "model_version_policy")) {
            st = parse_policy(c, m, mname);
        } else if (key_is(c->string, "version_labels")) {
            st = parse_labels(c, m, mname);
        } else if (key_is(c->string, "model_type") || key_is(c->string, "logging_config")) {
            continue; /* deprecated / not applicable: accepted and ignored */
        } else {
            return ms_errf(MS_EINVAL, "model \"%s\": unknown key \"%s\" in model config", mname,
                           c->string);
        }
        if (st != MS_OK) return st;
    }
    return MS_OK;
}

static ms_status config_from_cjson(const cJSON *root, srv_config **out) {
    ms_status st = MS_OK;
    srv_config *c = calloc(1, sizeof(*c));
    if (c == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (!cJSON_IsObject(root)) {
        st = ms_errf(MS_EINVAL, "model config: expected a JSON object at the top");
        goto fail;
    }
    const cJSON *list = NULL;
    for (const cJSON *e = root->child; e != NULL; e = e->next) {
        if (key_is(e->string, "model_config_list")) {
            list = e;
        } else if (key_is(e->string, "custom_model_config")) {
            st = ms_errf(MS_EINVAL, "model config: custom_model_config is not supported; use "
                                    "model_config_list");
            goto fail;
        } else {
            st = ms_errf(MS_EINVAL, "model config: unknown key \"%s\" (expected model_config_list)",
                         e->string);
            goto fail;
        }
    }
    if (list == NULL) { /* an empty ModelServerConfig: no models */
        *out = c;
        return MS_OK;
    }
    if (!cJSON_IsObject(list)) {
        st = ms_errf(MS_EINVAL, "model config: model_config_list must be an object");
        goto fail;
    }
    const cJSON *cfgs = NULL;
    for (const cJSON *e = list->child; e != NULL; e = e->next) {
        if (!key_is(e->string, "config")) {
            st = ms_errf(MS_EINVAL, "model config: unknown key \"%s\" in model_config_list",
                         e->string);
            goto fail;
        }
        cfgs = e;
    }
    if (cfgs != NULL) {
        int n = cJSON_IsArray(cfgs) ? cJSON_GetArraySize(cfgs) : 1;
        c->models = calloc((size_t)(n > 0 ? n : 1), sizeof(srv_model_config));
        if (c->models == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            goto fail;
        }
        const cJSON *e = cJSON_IsArray(cfgs) ? cfgs->child : cfgs;
        for (; e != NULL; e = cJSON_IsArray(cfgs) ? e->next : NULL) {
            st = parse_model(e, &c->models[c->nmodels], c->nmodels);
            c->nmodels++;
            if (st != MS_OK) goto fail;
        }
    }
    if ((st = check_config(c)) != MS_OK) goto fail;
    *out = c;
    return MS_OK;
fail:
    srv_config_free(c);
    return st;
}

ms_status srv_config_parse_json(const char *text, srv_config **out) {
    const char *err_at = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &err_at, 1);
    if (root == NULL) {
        size_t off = err_at ? (size_t)(err_at - text) : 0;
        int line = 1;
        for (size_t i = 0; i < off && text[i]; i++)
            line += text[i] == '\n';
        return ms_errf(MS_EINVAL, "model config: invalid JSON near line %d, byte %zu", line, off);
    }
    ms_status st = config_from_cjson(root, out);
    cJSON_Delete(root);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Text format (pbtxt) -> cJSON                                              */
/* ------------------------------------------------------------------------ */

typedef struct pbtxt {
    const char *p;
    int line;
} pbtxt;

static void skip_ws(pbtxt *t) {
    for (;;) {
        while (isspace((unsigned char)*t->p)) {
            if (*t->p == '\n') t->line++;
            t->p++;
        }
        if (*t->p == '#') {
            while (*t->p && *t->p != '\n')
                t->p++;
            continue;
        }
        return;
    }
}

static ms_status pb_ident(pbtxt *t, char *buf, size_t n) {
    size_t k = 0;
    skip_ws(t);
    if (!(isalpha((unsigned char)*t->p) || *t->p == '_'))
        return ms_errf(MS_EINVAL, "model config (text format) line %d: expected a field name",
                       t->line);
    while (isalnum((unsigned char)*t->p) || *t->p == '_') {
        if (k + 1 < n) buf[k++] = *t->p;
        t->p++;
    }
    buf[k] = '\0';
    return MS_OK;
}

/* Quoted string with C escapes; adjacent literals concatenate. */
static ms_status pb_string(pbtxt *t, cJSON **out) {
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    if (s == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    while (*t->p == '"' || *t->p == '\'') {
        char q = *t->p++;
        while (*t->p && *t->p != q) {
            char ch = *t->p++;
            if (ch == '\n') break;
            if (ch == '\\' && *t->p) {
                char e = *t->p++;
                switch (e) {
                case 'n':
                    ch = '\n';
                    break;
                case 't':
                    ch = '\t';
                    break;
                case 'r':
                    ch = '\r';
                    break;
                default:
                    ch = e;
                    break;
                }
            }
            if (len + 2 > cap) {
                char *ns = realloc(s, cap *= 2);
                if (ns == NULL) {
                    free(s);
                    return ms_errf(MS_ENOMEM, "out of memory");
                }
                s = ns;
            }
            s[len++] = ch;
        }
        if (*t->p != q) {
            free(s);
            return ms_errf(MS_EINVAL, "model config (text format) line %d: unterminated string",
                           t->line);
        }
        t->p++;
        skip_ws(t);
    }
    s[len] = '\0';
    *out = cJSON_CreateString(s);
    free(s);
    return *out ? MS_OK : ms_errf(MS_ENOMEM, "out of memory");
}

static ms_status pb_message(pbtxt *t, cJSON *obj, char close, int depth);

/* Adds `val` under `name`; a repeated name turns the field into an array. */
static void pb_add(cJSON *obj, const char *name, cJSON *val) {
    cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (old == NULL) {
        cJSON_AddItemToObject(obj, name, val);
    } else if (cJSON_IsArray(old) && old->type != cJSON_Raw && old->string &&
               strcmp(old->string, name) == 0 && old->valueint == 1) {
        cJSON_AddItemToArray(old, val);
    } else {
        cJSON *arr = cJSON_CreateArray();
        arr->valueint = 1; /* marks arrays made here from repeated fields */
        cJSON_DetachItemViaPointer(obj, old);
        cJSON_AddItemToArray(arr, old);
        cJSON_AddItemToArray(arr, val);
        cJSON_AddItemToObject(obj, name, arr);
    }
}

static ms_status pb_field(pbtxt *t, cJSON *obj, int depth) {
    char name[128];
    ms_status st = pb_ident(t, name, sizeof(name));
    if (st != MS_OK) return st;
    skip_ws(t);
    int colon = 0;
    if (*t->p == ':') {
        colon = 1;
        t->p++;
        skip_ws(t);
    }
    cJSON *val = NULL;
    if (*t->p == '{' || *t->p == '<') {
        char close = *t->p == '{' ? '}' : '>';
        t->p++;
        val = cJSON_CreateObject();
        if (val == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        if ((st = pb_message(t, val, close, depth + 1)) != MS_OK) {
            cJSON_Delete(val);
            return st;
        }
        if (strcmp(name, "version_labels") == 0) {
            /* A map entry {key: "stable" value: 1} joins the label object. */
            cJSON *k = cJSON_GetObjectItemCaseSensitive(val, "key");
            cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(val, "value");
            if (!cJSON_IsString(k) || v == NULL || cJSON_GetArraySize(val) != 1) {
                cJSON_Delete(val);
                cJSON_Delete(v);
                return ms_errf(MS_EINVAL,
                               "model config (text format) line %d: version_labels needs "
                               "{ key: \"label\" value: N }",
                               t->line);
            }
            cJSON *labels = cJSON_GetObjectItemCaseSensitive(obj, "version_labels");
            if (labels == NULL) {
                labels = cJSON_CreateObject();
                cJSON_AddItemToObject(obj, "version_labels", labels);
            }
            if (cJSON_GetObjectItemCaseSensitive(labels, k->valuestring) != NULL) {
                cJSON_Delete(val);
                cJSON_Delete(v);
                return ms_errf(MS_EINVAL,
                               "model config (text format) line %d: label \"%s\" given twice",
                               t->line, k->valuestring);
            }
            cJSON_AddItemToObject(labels, k->valuestring, v);
            cJSON_Delete(val);
            return MS_OK;
        }
    } else if (!colon) {
        return ms_errf(MS_EINVAL,
                       "model config (text format) line %d: expected ':' or '{' after %s", t->line,
                       name);
    } else if (*t->p == '"' || *t->p == '\'') {
        if ((st = pb_string(t, &val)) != MS_OK) return st;
    } else if (*t->p == '-' || isdigit((unsigned char)*t->p)) {
        char *end;
        double d = strtod(t->p, &end);
        if (end == t->p)
            return ms_errf(MS_EINVAL, "model config (text format) line %d: bad number", t->line);
        t->p = end;
        val = cJSON_CreateNumber(d);
    } else {
        char word[64];
        if ((st = pb_ident(t, word, sizeof(word))) != MS_OK) return st;
        if (strcmp(word, "true") == 0)
            val = cJSON_CreateTrue();
        else if (strcmp(word, "false") == 0)
            val = cJSON_CreateFalse();
        else
            val = cJSON_CreateString(word); /* enum value */
    }
    if (val == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    pb_add(obj, name, val);
    return MS_OK;
}

static ms_status pb_message(pbtxt *t, cJSON *obj, char close, int depth) {
    if (depth > 32)
        return ms_errf(MS_EINVAL, "model config (text format) line %d: nested too deeply", t->line);
    for (;;) {
        skip_ws(t);
        if (*t->p == '\0') {
            if (close == '\0') return MS_OK;
            return ms_errf(MS_EINVAL, "model config (text format): missing '%c' at the end", close);
        }
        if (close != '\0' && *t->p == close) {
            t->p++;
            return MS_OK;
        }
        ms_status st = pb_field(t, obj, depth);
        if (st != MS_OK) return st;
        skip_ws(t);
        if (*t->p == ',' || *t->p == ';') t->p++;
    }
}

ms_status srv_config_parse_text(const char *text, srv_config **out) {
    pbtxt t = {text, 1};
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    ms_status st = pb_message(&t, root, '\0', 0);
    if (st == MS_OK) st = config_from_cjson(root, out);
    cJSON_Delete(root);
    return st;
}

ms_status srv_config_read_file(const char *path, srv_config **out) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_errf(MS_ENOTFOUND, "cannot open model config file %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) break;
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory reading %s", path);
    buf[len] = '\0';
    const char *p = buf;
    while (isspace((unsigned char)*p))
        p++;
    ms_status st = *p == '{' ? srv_config_parse_json(buf, out) : srv_config_parse_text(buf, out);
    free(buf);
    if (st != MS_OK) return ms_errwrap(st, "%s", path);
    return MS_OK;
}

/* ------------------------------------------------------------------------ */
/* Proto and single-model forms                                              */
/* ------------------------------------------------------------------------ */

ms_status srv_config_from_proto(const Tensorflow__Serving__ModelServerConfig *p, srv_config **out) {
    ms_status st = MS_OK;
    srv_config *c = calloc(1, sizeof(*c));
    if (c == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (p == NULL) goto done;
    if (p->config_case == TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_CUSTOM_MODEL_CONFIG) {
        st = ms_errf(MS_EINVAL, "custom_model_config is not supported; use model_config_list");
        goto fail;
    }
    if (p->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST ||
        p->model_config_list == NULL)
        goto done;
    const Tensorflow__Serving__ModelConfigList *l = p->model_config_list;
    c->models = calloc(l->n_config > 0 ? l->n_config : 1, sizeof(srv_model_config));
    if (c->models == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < l->n_config; i++) {
        const Tensorflow__Serving__ModelConfig *mc = l->config[i];
        srv_model_config *m = &c->models[c->nmodels++];
        m->name = strdup(mc->name ? mc->name : "");
        m->base_path = strdup(mc->base_path ? mc->base_path : "");
        if (m->name == NULL || m->base_path == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            goto fail;
        }
        if (mc->model_platform && mc->model_platform[0] &&
            strcmp(mc->model_platform, "tensorflow") != 0) {
            st = ms_errf(MS_EINVAL,
                         "model \"%s\": model_platform must be \"tensorflow\", got \"%s\"", m->name,
                         mc->model_platform);
            goto fail;
        }
        const Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy *pol =
            mc->model_version_policy;
        if (pol != NULL) {
            switch (pol->policy_choice_case) {
            case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_ALL:
                m->policy = SRV_POLICY_ALL;
                break;
            case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_SPECIFIC:
                m->policy = SRV_POLICY_SPECIFIC;
                m->nversions = (int)pol->specific->n_versions;
                m->versions = malloc(sizeof(int64_t) * (pol->specific->n_versions + 1));
                if (m->versions == NULL) {
                    st = ms_errf(MS_ENOMEM, "out of memory");
                    goto fail;
                }
                if (pol->specific->n_versions > 0)
                    memcpy(m->versions, pol->specific->versions,
                           sizeof(int64_t) * pol->specific->n_versions);
                break;
            case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_LATEST:
                m->num_versions = pol->latest->num_versions;
                break;
            default:
                break;
            }
        }
        if (mc->n_version_labels > 0) {
            m->labels = calloc(mc->n_version_labels, sizeof(srv_label));
            if (m->labels == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory");
                goto fail;
            }
            for (size_t k = 0; k < mc->n_version_labels; k++) {
                const char *key = mc->version_labels[k]->key ? mc->version_labels[k]->key : "";
                for (int j = 0; j < m->nlabels; j++)
                    if (strcmp(m->labels[j].name, key) == 0) {
                        st = ms_errf(MS_EINVAL, "model \"%s\": label \"%s\" given twice", m->name,
                                     key);
                        goto fail;
                    }
                m->labels[m->nlabels].name = strdup(key);
                m->labels[m->nlabels].version = mc->version_labels[k]->value;
                if (m->labels[m->nlabels++].name == NULL) {
                    st = ms_errf(MS_ENOMEM, "out of memory");
                    goto fail;
                }
            }
        }
    }
    if ((st = check_config(c)) != MS_OK) goto fail;
done:
    *out = c;
    return MS_OK;
fail:
    srv_config_free(c);
    return st;
}

ms_status srv_config_single(const char *name, const char *base_path, srv_config **out) {
    srv_config *c = calloc(1, sizeof(*c));
    if (c == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    c->models = calloc(1, sizeof(srv_model_config));
    if (c->models == NULL) {
        free(c);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    c->nmodels = 1;
    c->models[0].name = strdup(name);
    c->models[0].base_path = strdup(base_path);
    c->models[0].policy = SRV_POLICY_LATEST;
    c->models[0].num_versions = 1;
    ms_status st = check_config(c);
    if (c->models[0].name == NULL || c->models[0].base_path == NULL)
        st = ms_errf(MS_ENOMEM, "out of memory");
    if (st != MS_OK) {
        srv_config_free(c);
        return st;
    }
    *out = c;
    return MS_OK;
}
