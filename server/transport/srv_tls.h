/* srv_tls.h - TLS and mutual TLS for the gRPC and REST ports, from
 * --ssl_config_file in TF Serving's SSLConfig text format:
 *
 *   server_key: "-----BEGIN PRIVATE KEY-----\n..."
 *   server_cert: "-----BEGIN CERTIFICATE-----\n..."
 *   custom_ca: "-----BEGIN CERTIFICATE-----\n..."   (client CA, for client_verify)
 *   client_verify: true
 *
 * gRPC gets credentials with a certificate-config fetcher: srv_tls_reload
 * (SIGHUP) re-reads the file, and handshakes from then on use the new
 * key, certificate and CA; connections already open keep theirs. REST
 * (libmicrohttpd over GnuTLS) does the same through a GnuTLS certificate
 * callback (srv_tls_rest_callback): each handshake takes the current key and
 * chain, and client certificates are verified against the current custom_ca.
 * A reload that GnuTLS cannot read (for REST) fails as a whole: both keep the
 * old certificates. With client_verify, gRPC requires and verifies a client
 * certificate against custom_ca during the handshake; REST requests one and
 * answers 403 when none was sent or it does not verify. client_verify itself
 * changes only at restart.
 *
 * Ownership: srv_tls_load returns an object freed with srv_tls_free after
 * the servers using it are stopped. */
#ifndef SRV_TLS_H
#define SRV_TLS_H

#include <gnutls/abstract.h>
#include <grpc/grpc_security.h>

#include "ms_status.h"

typedef struct srv_tls srv_tls;

/* Reads and checks the SSLConfig file: server_key and server_cert present,
 * custom_ca present when client_verify. MS_EINVAL naming the file and field. */
ms_status srv_tls_load(const char *path, srv_tls **out);

/* Parses SSLConfig text (for tests). Fields are malloc'ed into *out. */
ms_status srv_tls_parse(const char *text, srv_tls **out);

/* Re-reads the file; on success the next gRPC handshake uses the new
 * certificates; on failure the old ones stay and MS_EINVAL says why. */
ms_status srv_tls_reload(srv_tls *t);

/* gRPC server credentials (caller releases). */
grpc_server_credentials *srv_tls_grpc_credentials(srv_tls *t);

int srv_tls_client_verify(const srv_tls *t);
/* For libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK: builds REST's GnuTLS
 * credentials from the current config (MS_EINVAL naming the field GnuTLS
 * cannot read) and returns the callback. From then on srv_tls_reload
 * refreshes them too. One srv_tls per process serves REST. */
ms_status srv_tls_rest_callback(srv_tls *t, gnutls_certificate_retrieve_function2 **cb);

/* PEM strings of the first config (valid until srv_tls_free). */
const char *srv_tls_key_pem(const srv_tls *t);
const char *srv_tls_cert_pem(const srv_tls *t);
const char *srv_tls_ca_pem(const srv_tls *t); /* NULL when none */

/* For REST with client_verify: non-zero when the TLS session of this
 * libmicrohttpd connection (a `struct MHD_Connection *`) carries a client
 * certificate that verified against custom_ca. */
int srv_tls_rest_client_ok(void *mhd_connection);

void srv_tls_free(srv_tls *t);

#endif /* SRV_TLS_H */
