/* framing.c -- request-line and header checks against smuggling; see framing.h.
 *
 * The raw target is only visible in the URI log callback: by the first call
 * of the access handler libmicrohttpd has cut it at '?' and unescaped it in
 * place, and a NUL (raw, or %00 once decoded) has already truncated it. The
 * callback leaves two values of kind MHD_FOOTER_KIND on the connection
 * (trailers are read after the body, so a client cannot have set these when
 * framing_check reads them): the verdict on the target, and the target
 * itself, whose length framing_check compares with the span that
 * libmicrohttpd split the request line at.
 */
#include "http/framing.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KEY_TARGET "attn-raw-target"
#define KEY_VERDICT "attn-target-error"

/* Why the raw request target is refused (a static string), or NULL. */
static const char *target_problem(const char *t)
{
    if (t[0] != '/' && strncasecmp(t, "http://", 7) != 0 && strncasecmp(t, "https://", 8) != 0)
        return "the request target must start with '/'";
    for (const unsigned char *c = (const unsigned char *)t; *c; c++) {
        if (*c <= 0x20 || *c == 0x7f)
            return "the request target contains a space or a control character";
        if (c[0] == '%' && c[1] == '0' && c[2] == '0')
            return "the request target contains %00 (an encoded NUL)";
    }
    return NULL;
}

void *framing_uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    const char *bad = target_problem(uri);
    if (bad)
        MHD_set_connection_value(conn, MHD_FOOTER_KIND, KEY_VERDICT, bad);
    /* The pointer is into the request line, which lives as long as the
     * request; only the length is read back. */
    MHD_set_connection_value_n(conn, MHD_FOOTER_KIND, KEY_TARGET, strlen(KEY_TARGET), uri,
                               strlen(uri));
    return NULL;
}

/* RFC 9110 §5.6.2: tchar. */
static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

struct header_counts {
    int host, content_length, transfer_encoding;
    const char *te; /* the first Transfer-Encoding value */
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    struct header_counts *h = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        h->host++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        h->content_length++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0 && !h->transfer_encoding++)
        h->te = value ? value : "";
    return MHD_YES;
}

int framing_check(struct MHD_Connection *conn, const char *method, const char *url,
                  const char *version, struct failure *err)
{
    /* 1. the request line */
    const char *bad = MHD_lookup_connection_value(conn, MHD_FOOTER_KIND, KEY_VERDICT);
    if (bad)
        return fail_with(err, ERR_BAD_REQUEST, "%s", bad);
    const char *raw;
    size_t raw_len;
    /* libmicrohttpd put a NUL where the space before the version was: the
     * target ran from url to there, unless a NUL in it ended it sooner. */
    if (MHD_lookup_connection_value_n(conn, MHD_FOOTER_KIND, KEY_TARGET, strlen(KEY_TARGET),
                                      &raw, &raw_len) == MHD_YES &&
        raw == url && version[0] != '\0' && version > url &&
        (size_t)(version - 1 - url) != raw_len)
        return fail_with(err, ERR_BAD_REQUEST, "the request target contains a NUL byte");
    if (method[0] == '\0')
        return fail_with(err, ERR_BAD_REQUEST, "the method is empty");
    for (const unsigned char *c = (const unsigned char *)method; *c; c++)
        if (!is_tchar(*c))
            return fail_with(err, ERR_BAD_REQUEST,
                             "the method is not a token (byte 0x%02x at %d)", *c,
                             (int)(c - (const unsigned char *)method));

    /* 2. the headers */
    struct header_counts h = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &h);
    if (h.host > 1)
        return fail_with(err, ERR_BAD_REQUEST, "%d Host headers; send one", h.host);
    if (h.host == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
        return fail_with(err, ERR_BAD_REQUEST, "an HTTP/1.1 request needs a Host header");
    if (h.transfer_encoding && h.content_length)
        return fail_with(err, ERR_BAD_REQUEST,
                         "both Content-Length and Transfer-Encoding: the body's length is "
                         "ambiguous");
    if (h.content_length > 1)
        return fail_with(err, ERR_BAD_REQUEST, "%d Content-Length headers; send one",
                         h.content_length);
    if (h.transfer_encoding > 1)
        return fail_with(err, ERR_NOT_IMPLEMENTED,
                         "%d Transfer-Encoding headers; only one, chunked, is supported",
                         h.transfer_encoding);
    if (h.transfer_encoding) {
        const char *v = h.te + strspn(h.te, " \t");
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
            return fail_with(err, ERR_NOT_IMPLEMENTED,
                             "Transfer-Encoding '%.60s' is not supported; only chunked is", h.te);
    }
    return 0;
}

const char *framing_library(void)
{
    static char text[160];
#ifdef ATTN_MHD_CHUNK_PATCH
    const char *chunks = "built here, patched: a chunk size over 2^63 is refused at once";
#else
    const char *chunks = "the system's: a chunk size over what it can hold waits for the "
                         "upload timeouts";
#endif
    snprintf(text, sizeof text, "libmicrohttpd %s (%s)", MHD_get_version(), chunks);
    return text;
}
