/* srv_tls.c - SSLConfig parsing, gRPC TLS credentials with a reloading
 * certificate fetcher, client-certificate checks for REST. */
#include "srv_tls.h"

#include <ctype.h>
#include <gnutls/abstract.h>
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

#define REST_CHAIN_MAX 16 /* certificates in server_cert */

/* REST's key and certificate chain in GnuTLS form, one per (re)load. A
 * handshake may still use an older one, so all are kept until srv_tls_free
 * (one per SIGHUP that changed them: a few KB each). */
typedef struct rest_cred {
    gnutls_pcert_st chain[REST_CHAIN_MAX];
    unsigned nchain;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t trust; /* custom_ca, for client_verify; NULL without */
    struct rest_cred *older;
} rest_cred;

struct srv_tls {
    char *path;
    pthread_mutex_t mu;
    tls_fields cur;  /* what the fetcher hands out next */
    tls_fields first; /* the PEM strings of the first load */
    int changed;     /* the fetcher has not handed out cur yet */
    rest_cred *rest; /* REST's current credentials (srv_tls_rest_callback), or NULL */
};

/* The REST server's TLS object, for the GnuTLS callbacks (one per process). */
static srv_tls *g_rest_tls;

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

static void rest_cred_free(rest_cred *c) {
    while (c != NULL) {
        rest_cred *o = c->older;
        for (unsigned i = 0; i < c->nchain; i++)
            gnutls_pcert_deinit(&c->chain[i]);
        if (c->key) gnutls_privkey_deinit(c->key);
        if (c->trust) gnutls_x509_trust_list_deinit(c->trust, 1);
        free(c);
        c = o;
    }
}

static gnutls_datum_t pem_datum(const char *pem) {
    return (gnutls_datum_t){(unsigned char *)pem, (unsigned)strlen(pem)};
}

/* GnuTLS's form of the key, the certificate chain and the client CA;
 * MS_EINVAL naming the field GnuTLS cannot read. */
static ms_status rest_cred_new(const tls_fields *f, rest_cred **out) {
    rest_cred *c = calloc(1, sizeof(*c));
    if (c == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    gnutls_datum_t cert = pem_datum(f->cert), key = pem_datum(f->key);
    unsigned n = REST_CHAIN_MAX;
    int rc = gnutls_pcert_list_import_x509_raw(c->chain, &n, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0 || n == 0) {
        rest_cred_free(c);
        return ms_errf(MS_EINVAL, "server_cert: %s (REST, GnuTLS)",
                       rc < 0 ? gnutls_strerror(rc) : "no certificate");
    }
    c->nchain = n;
    if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
        (rc = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        rest_cred_free(c);
        return ms_errf(MS_EINVAL, "server_key: %s (REST, GnuTLS)", gnutls_strerror(rc));
    }
    if (f->client_verify && (f->ca == NULL || !f->ca[0])) {
        rest_cred_free(c);
        return ms_errf(MS_EINVAL, "custom_ca is missing (client_verify stays on until restart)");
    }
    if (f->client_verify) {
        gnutls_datum_t ca = pem_datum(f->ca);
        if ((rc = gnutls_x509_trust_list_init(&c->trust, 0)) < 0 ||
            (rc = gnutls_x509_trust_list_add_trust_mem(c->trust, &ca, NULL, GNUTLS_X509_FMT_PEM,
                                                        0, 0)) <= 0) {
            rest_cred_free(c);
            return ms_errf(MS_EINVAL, "custom_ca: %s (REST, GnuTLS)",
                           rc < 0 ? gnutls_strerror(rc) : "no certificate");
        }
    }
    *out = c;
    return MS_OK;
}

/* gnutls_certificate_retrieve_function2: every REST handshake takes the
 * current key and chain, so a reload applies to the next connection. */
static int rest_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **chain,
                         unsigned int *nchain, gnutls_privkey_t *key) {
    (void)s, (void)req_ca_dn, (void)nreqs, (void)algos, (void)nalgos;
    srv_tls *t = g_rest_tls;
    if (t == NULL) return -1;
    pthread_mutex_lock(&t->mu);
    rest_cred *c = t->rest;
    if (c != NULL) {
        *chain = c->chain;
        *nchain = c->nchain;
        *key = c->key;
    }
    pthread_mutex_unlock(&t->mu);
    return c != NULL ? 0 : -1;
}

ms_status srv_tls_rest_callback(srv_tls *t, gnutls_certificate_retrieve_function2 **cb) {
    pthread_mutex_lock(&t->mu);
    ms_status st = t->rest != NULL ? MS_OK : rest_cred_new(&t->cur, &t->rest);
    pthread_mutex_unlock(&t->mu);
    if (st != MS_OK) return ms_errwrap(st, "--ssl_config_file");
    g_rest_tls = t;
    *cb = rest_retrieve;
    return MS_OK;
}

ms_status srv_tls_reload(srv_tls *t) {
    if (t->path == NULL) return MS_OK;
    tls_fields f;
    ms_status st = read_fields(t->path, &f);
    if (st != MS_OK) return st;
    pthread_mutex_lock(&t->mu);
    /* GnuTLS must read the new key and chain (REST uses them; without REST
     * this still keeps an unreadable key from reaching gRPC's handshakes). */
    rest_cred *rc = NULL;
    tls_fields g = f;
    g.client_verify = t->cur.client_verify;
    st = rest_cred_new(&g, &rc);
    if (st != MS_OK) {
        pthread_mutex_unlock(&t->mu);
        fields_clear(&f);
        return ms_errwrap(st, "--ssl_config_file %s", t->path);
    }
    if (t->rest != NULL) {
        rc->older = t->rest;
        t->rest = rc;
    } else {
        rest_cred_free(rc);
    }
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

/* Verified against the current custom_ca (the one of the last reload), not
 * the one libmicrohttpd was started with. */
int srv_tls_rest_client_ok(void *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    srv_tls *t = g_rest_tls;
    if (ci == NULL || ci->tls_session == NULL || t == NULL) return 0;
    gnutls_session_t s = (gnutls_session_t)ci->tls_session;
    unsigned int n = 0, status = 1;
    const gnutls_datum_t *peers = gnutls_certificate_get_peers(s, &n);
    if (peers == NULL || n == 0) return 0;
    if (n > REST_CHAIN_MAX) n = REST_CHAIN_MAX;
    gnutls_x509_crt_t crts[REST_CHAIN_MAX];
    unsigned ok = 0;
    for (; ok < n; ok++)
        if (gnutls_x509_crt_init(&crts[ok]) < 0) break;
        else if (gnutls_x509_crt_import(crts[ok], &peers[ok], GNUTLS_X509_FMT_DER) < 0) {
            gnutls_x509_crt_deinit(crts[ok]);
            break;
        }
    if (ok == n) {
        pthread_mutex_lock(&t->mu);
        if (t->rest != NULL && t->rest->trust != NULL &&
            gnutls_x509_trust_list_verify_crt(t->rest->trust, crts, n, 0, &status, NULL) < 0)
            status = 1;
        pthread_mutex_unlock(&t->mu);
    }
    for (unsigned i = 0; i < ok; i++)
        gnutls_x509_crt_deinit(crts[i]);
    return status == 0;
}

void srv_tls_free(srv_tls *t) {
    if (t == NULL) return;
    if (g_rest_tls == t) g_rest_tls = NULL;
    rest_cred_free(t->rest);
    fields_clear(&t->cur);
    fields_clear(&t->first);
    pthread_mutex_destroy(&t->mu);
    free(t->path);
    free(t);
}
