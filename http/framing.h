/* framing.h -- refuse requests whose framing or request line is ambiguous.
 *
 * libmicrohttpd (0.9.75 more than 1.0, which still takes the first of two
 * Content-Lengths) is lenient where a proxy in front of us may read the
 * same bytes differently (request smuggling, RFC 9112 §6.3 and §3.2). This
 * module decides, once per request and before any body is read, whether
 * the request line and headers are unambiguous:
 *
 *   - Transfer-Encoding other than exactly "chunked"      501 not_implemented
 *   - Transfer-Encoding together with Content-Length      400 bad_request
 *   - more than one Content-Length or Transfer-Encoding   400 / 501
 *   - HTTP/1.1 without Host, or two Hosts                 400 bad_request
 *   - a method that is not an RFC 9110 token              400 bad_request
 *   - a target that does not start with '/', or holds a
 *     NUL (raw or %00) or another control character        400 bad_request
 *
 * Use: pass framing_uri_log as MHD_OPTION_URI_LOG_CALLBACK (it sees the raw
 * target before libmicrohttpd splits and unescapes it, and returns NULL, so
 * *con_cls still starts NULL), then on the first call of the access handler:
 *
 *     struct failure e;
 *     if (framing_check(conn, method, url, version, &e) != 0)
 *         answer e.code with e.msg; the connection closes (queued before
 *         the body, libmicrohttpd discards the rest and sends
 *         "Connection: close")
 *
 * What libmicrohttpd refuses itself, before the application is called
 * (malformed Content-Length, a chunk size over 2^64), is described in
 * docs/operations.md, "Malformed requests".
 */
#ifndef HTTP_FRAMING_H
#define HTTP_FRAMING_H

#include <stddef.h>

#include "lib/errors.h"

struct MHD_Connection;

/* MHD_OPTION_URI_LOG_CALLBACK: checks the raw request target and records
 * the verdict and the target's length on the connection. Returns NULL. */
void *framing_uri_log(void *cls, const char *uri, struct MHD_Connection *conn);

/* 0 when the request may go on; -1 with err filled (code is an enum
 * http_error) when it must be refused. url and version are the access
 * handler's arguments (borrowed). */
int framing_check(struct MHD_Connection *conn, const char *method, const char *url,
                  const char *version, struct failure *err);


/* "libmicrohttpd 1.0.1 (...)": the parser in use and whether it refuses a
 * chunk size over 2^63 at once (scripts/mhd.sh's patch) or, as every
 * release does, waits for the bytes until the upload timeouts. Static. */
const char *framing_library(void);

#endif
