/* tls.h -- the certificate and key for HTTPS, read once at start-up.
 *
 * HTTPS is on when the tls_cert_file and tls_key_file settings name PEM files
 * (both, or neither for plain HTTP). libmicrohttpd does the TLS
 * with GnuTLS and takes the PEM text in memory, so the files are read here,
 * before the daemon starts, and every problem is named with its setting
 * rather than left to libmicrohttpd's "could not start":
 *
 *     struct tls_pem t;
 *     if (tls_pem_load(&t, cert_file, key_file, err, sizeof err) != 0)
 *         // "tls_key_file: ..."
 *         fail;
 *     if (t.cert) ... MHD_USE_TLS, MHD_OPTION_HTTPS_MEM_CERT t.cert,
 *                     MHD_OPTION_HTTPS_MEM_KEY t.key ...
 *     tls_pem_deinit(&t);   after MHD_stop_daemon
 */
#ifndef HTTP_TLS_H
#define HTTP_TLS_H

#include <stddef.h>

struct tls_pem {
    char *cert; /* NUL-terminated PEM text, or NULL when TLS is off */
    char *key;
};

/* Fill t from the files the tls_cert_file and tls_key_file settings name:
 * both NULL when they are empty. Checks that both or neither are set, that libmicrohttpd was built with TLS, that each file is a
 * readable regular file of PEM text (at most 1 MiB) with a certificate and a
 * private key, and that GnuTLS accepts the two as a pair. 0 on success; -1
 * with a message naming the setting in err, t left empty. */
int tls_pem_load(struct tls_pem *t, const char *cert_file, const char *key_file, char *err,
                 size_t errlen);

/* Free what tls_pem_load() read (the key's memory zeroed first). */
void tls_pem_deinit(struct tls_pem *t);

#endif
