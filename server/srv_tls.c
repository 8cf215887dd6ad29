/* srv_tls.c - SSLConfig parsing, gRPC TLS credentials with a reloading
 * certificate fetcher, client-certificate checks for REST. */
#include "srv_tls.h"

#include <ctype.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_log.h"

#define TLS_FILE_MAX (1 << 20) /* an SSLConfig holds a few PEM blocks */

typedef struct tls_fields {
    char *key, *cert, *ca;
    int client_verify;
} tls_fields;

struct srv_tls {
    char *path;
    pthread_mutex_t mu;
    tls_fields cur;  /* what the fetcher hands out next */
    tls_fields first; /* kept for REST for the server's life */
    int changed;     /* the fetcher has not handed out cur yet */
};

static void fields_clear(tls_fields *f) {
    free(f->key);
    free(f->cert);
    free(f->ca);
    memset(f, 0, sizeof(*f));
}

/* ---- SSLConfig text format: name ':' value, values strings or bools ---- */

static const char *skip_ws(const char *p) {
    for (;;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (*p != '#') return p;
        while (*p && *p != '\n')
            p++;
    }
}

/* One or more adjacent quoted strings with C escapes, concatenated. */
static ms_status parse_string(const char **pp, char **out) {
    const char *p = *pp;
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    while (*p == '"' || *p == '\'') {
        char q = *p++;
        while (*p && *p != q) {
            char c = *p++;
            if (c == '\n') {
                free(buf);
                return ms_errf(MS_EINVAL, "newline inside a string");
            }
            if (c == '\\') {
                char e = *p++;
                switch (e) {
                case 'n': c = '\n'; break;
                case 'r': c = '\r'; break;
                case 't': c = '\t'; break;
                case '\\': c = '\\'; break;
                case '"': c = '"'; break;
                case '\'': c = '\''; break;
                case 'x': {
                    int v = 0, k = 0;
                    while (k < 2 && isxdigit((unsigned char)*p)) {
                        v = v * 16 + (isdigit((unsigned char)*p) ? *p - '0'
                                                                 : tolower((unsigned char)*p) - 'a' + 10);
                        p++;
                        k++;
                    }
                    c = (char)v;
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        int v = e - '0', k = 1;
                        while (k < 3 && *p >= '0' && *p <= '7') {
                            v = v * 8 + (*p++ - '0');
                            k++;
                        }
                        c = (char)v;
                    } else {
                        free(buf);
                        return ms_errf(MS_EINVAL, "unknown escape \\%c", e ? e : '0');
                    }
                }
            }
            if (n + 2 > cap) {
                cap *= 2;
                char *nb = realloc(buf, cap);
                if (nb == NULL) {
                    free(buf);
                    return ms_errf(MS_ENOMEM, "out of memory");
                }
                buf = nb;
            }
            buf[n++] = c;
        }
        if (*p != q) {
            free(buf);
            return ms_errf(MS_EINVAL, "unterminated string");
        }
        p = skip_ws(p + 1);
    }
    buf[n] = '\0';
    *pp = p;
    *out = buf;
    return MS_OK;
}

static ms_status parse_fields(const char *text, tls_fields *f) {
    memset(f, 0, sizeof(*f));
    const char *p = skip_ws(text);
    while (*p) {
        char name[64];
        size_t n = 0;
        while ((isalnum((unsigned char)*p) || *p == '_') && n + 1 < sizeof(name))
            name[n++] = *p++;
        name[n] = '\0';
        if (n == 0) goto bad;
        p = skip_ws(p);
        if (*p != ':') return ms_errf(MS_EINVAL, "field %s: expected ':'", name);
        p = skip_ws(p + 1);
        char **dst = strcmp(name, "server_key") == 0    ? &f->key
                     : strcmp(name, "server_cert") == 0 ? &f->cert
                     : strcmp(name, "custom_ca") == 0   ? &f->ca
                                                        : NULL;
        if (dst != NULL) {
            if (*p != '"' && *p != '\'') return ms_errf(MS_EINVAL, "field %s: expected a string", name);
            char *v = NULL;
            ms_status st = parse_string(&p, &v);
            if (st != MS_OK) return ms_errwrap(st, "field %s", name);
            free(*dst);
            *dst = v;
        } else if (strcmp(name, "client_verify") == 0) {
            if (strncmp(p, "true", 4) == 0 && !isalnum((unsigned char)p[4])) {
                f->client_verify = 1;
                p += 4;
            } else if (strncmp(p, "false", 5) == 0 && !isalnum((unsigned char)p[5])) {
                f->client_verify = 0;
                p += 5;
            } else {
                return ms_errf(MS_EINVAL, "field client_verify: expected true or false");
            }
        } else {
            return ms_errf(MS_EINVAL, "unknown field %s (SSLConfig has server_key, server_cert, "
                                      "custom_ca, client_verify)", name);
        }
        p = skip_ws(p);
        if (*p == ';' || *p == ',') p = skip_ws(p + 1);
    }
    if (f->key == NULL || f->key[0] == '\0') return ms_errf(MS_EINVAL, "server_key is missing");
    if (f->cert == NULL || f->cert[0] == '\0') return ms_errf(MS_EINVAL, "server_cert is missing");
    if (f->client_verify && (f->ca == NULL || f->ca[0] == '\0'))
        return ms_errf(MS_EINVAL, "client_verify needs custom_ca (the CA of client certificates)");
    return MS_OK;
bad:
    return ms_errf(MS_EINVAL, "expected a field name near \"%.20s\"", p);
}

static ms_status read_fields(const char *path, tls_fields *f) {
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return ms_errf(MS_EINVAL, "--ssl_config_file %s cannot be opened", path);
    char *buf = malloc(TLS_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(fp);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, TLS_FILE_MAX + 1, fp);
    fclose(fp);
    if (n > TLS_FILE_MAX) {
        free(buf);
        return ms_errf(MS_EINVAL, "--ssl_config_file %s is larger than %d bytes", path,
                       TLS_FILE_MAX);
    }
    buf[n] = '\0';
    ms_status st = parse_fields(buf, f);
    free(buf);
    if (st != MS_OK) {
        fields_clear(f);
        return ms_errwrap(st, "--ssl_config_file %s", path);
    }
    return MS_OK;
}

static srv_tls *tls_new(tls_fields *f) {
    srv_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->first = *f;
    /* cur is a copy the fetcher may replace */
    t->cur.key = strdup(f->key);
    t->cur.cert = strdup(f->cert);
    t->cur.ca = f->ca ? strdup(f->ca) : NULL;
    t->cur.client_verify = f->client_verify;
    t->changed = 1;
    return t;
}

ms_status srv_tls_parse(const char *text, srv_tls **out) {
    tls_fields f;
    ms_status st = parse_fields(text, &f);
    if (st != MS_OK) {
        fields_clear(&f);
        return st;
    }
    *out = tls_new(&f);
    return *out ? MS_OK : ms_errf(MS_ENOMEM, "out of memory");
}

ms_status srv_tls_load(const char *path, srv_tls **out) {
    tls_fields f;
    ms_status st = read_fields(path, &f);
    if (st != MS_OK) return st;
    srv_tls *t = tls_new(&f);
    if (t == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    t->path = strdup(path);
    *out = t;
    return MS_OK;
}

ms_status srv_tls_reload(srv_tls *t) {
    if (t->path == NULL) return MS_OK;
    tls_fields f;
    ms_status st = read_fields(t->path, &f);
    if (st != MS_OK) return st;
    pthread_mutex_lock(&t->mu);
    if (f.client_verify != t->cur.client_verify)
        MS_WARN("--ssl_config_file: client_verify changes only at restart; the new value is "
                "ignored");
    f.client_verify = t->cur.client_verify;
    fields_clear(&t->cur);
    t->cur = f;
    t->changed = 1;
    pthread_mutex_unlock(&t->mu);
    return MS_OK;
}

/* Called by gRPC at start and on every handshake. */
static grpc_ssl_certificate_config_reload_status fetch(void *arg,
                                                       grpc_ssl_server_certificate_config **cfg) {
    srv_tls *t = arg;
    grpc_ssl_certificate_config_reload_status rs = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    pthread_mutex_lock(&t->mu);
    if (t->changed) {
        grpc_ssl_pem_key_cert_pair pair = {t->cur.key, t->cur.cert};
        /* gRPC's fetcher path requires root certificates even when no client
         * certificate is asked for: without custom_ca, the server's own
         * certificate stands in (it is never used to verify anyone then). */
        const char *roots = t->cur.ca != NULL && t->cur.ca[0] ? t->cur.ca : t->cur.cert;
        *cfg = grpc_ssl_server_certificate_config_create(roots, &pair, 1);
        rs = *cfg ? GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW : GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
        if (*cfg) t->changed = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return rs;
}

grpc_server_credentials *srv_tls_grpc_credentials(srv_tls *t) {
    grpc_ssl_client_certificate_request_type req =
        t->cur.client_verify ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    grpc_ssl_server_credentials_options *o =
        grpc_ssl_server_credentials_create_options_using_config_fetcher(req, fetch, t);
    if (o == NULL) return NULL;
    return grpc_ssl_server_credentials_create_with_options(o); /* takes o */
}

int srv_tls_client_verify(const srv_tls *t) {
    return t->first.client_verify;
}
const char *srv_tls_key_pem(const srv_tls *t) {
    return t->first.key;
}
const char *srv_tls_cert_pem(const srv_tls *t) {
    return t->first.cert;
}
const char *srv_tls_ca_pem(const srv_tls *t) {
    return t->first.ca;
}

int srv_tls_rest_client_ok(void *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci == NULL || ci->tls_session == NULL) return 0;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    unsigned int n = 0, status = 0;
    if (gnutls_certificate_get_peers(s, &n) == NULL || n == 0) return 0;
    if (gnutls_certificate_verify_peers2(s, &status) != 0) return 0;
    return status == 0;
}

void srv_tls_free(srv_tls *t) {
    if (t == NULL) return;
    fields_clear(&t->cur);
    fields_clear(&t->first);
    pthread_mutex_destroy(&t->mu);
    free(t->path);
    free(t);
}
