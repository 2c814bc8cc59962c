/* tls.c -- reading and checking the PEM files for HTTPS; see tls.h. */
#include "http/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A certificate chain or a key is a few KiB; anything near this is not one. */
#define PEM_MAX_BYTES (1 << 20)

/* The whole of path, NUL-terminated, into *out (malloc'd); it must hold
 * marker. key names the setting, for messages. */
static int read_pem(char **out, const char *key, const char *path, const char *marker,
                    char *err, size_t errlen)
{
    struct stat st;
    char *text = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s: %s", key, path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > PEM_MAX_BYTES) {
        snprintf(err, errlen, "%s: %s is not a regular file of at most %d bytes", key, path,
                 PEM_MAX_BYTES);
        goto fail;
    }
    size_t len = (size_t)st.st_size, got = 0;
    text = malloc(len + 1);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory", key);
        goto fail;
    }
    while (got < len) {
        ssize_t n = read(fd, text + got, len - got);
        if (n <= 0) {
            snprintf(err, errlen, "%s: %s: %s", key, path,
                     n < 0 ? strerror(errno) : "shorter than its size");
            goto fail;
        }
        got += (size_t)n;
    }
    text[len] = '\0';
    if (strlen(text) != len || !strstr(text, marker)) {
        snprintf(err, errlen, "%s: %s is not PEM text with a '%s' line", key, path, marker);
        goto fail;
    }
    close(fd);
    *out = text;
    return 0;
fail:
    free(text);
    close(fd);
    return -1;
}

int tls_pem_load(struct tls_pem *t, const char *cert_file, const char *key_file, char *err,
                 size_t errlen)
{
    t->cert = t->key = NULL;
    if (cert_file[0] == '\0' && key_file[0] == '\0')
        return 0;
    if (cert_file[0] == '\0' || key_file[0] == '\0') {
        snprintf(err, errlen, "tls_cert_file and tls_key_file: set both or neither (%s is "
                 "empty)", cert_file[0] ? "tls_key_file" : "tls_cert_file");
        return -1;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "tls_cert_file: this libmicrohttpd was built without TLS");
        return -1;
    }
    if (read_pem(&t->cert, "tls_cert_file", cert_file, "-----BEGIN CERTIFICATE-----",
                 err, errlen) != 0 ||
        read_pem(&t->key, "tls_key_file", key_file, "PRIVATE KEY-----", err,
                 errlen) != 0)
        goto fail;

    /* The pair as libmicrohttpd will load it, so that a bad certificate or a
     * key of another certificate gets GnuTLS's reason, not "cannot start". */
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) {
        snprintf(err, errlen, "tls_cert_file: out of memory");
        goto fail;
    }
    const gnutls_datum_t cd = {(unsigned char *)t->cert, (unsigned)strlen(t->cert)};
    const gnutls_datum_t kd = {(unsigned char *)t->key, (unsigned)strlen(t->key)};
    int rc = gnutls_certificate_set_x509_key_mem2(cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        snprintf(err, errlen, "tls_cert_file, tls_key_file: %s and %s are not a usable "
                 "certificate and key: %s", cert_file, key_file,
                 gnutls_strerror(rc));
        goto fail;
    }
    return 0;
fail:
    tls_pem_deinit(t);
    return -1;
}

void tls_pem_deinit(struct tls_pem *t)
{
    if (t->key) {
        explicit_bzero(t->key, strlen(t->key));
        free(t->key);
    }
    free(t->cert);
    t->cert = t->key = NULL;
}
