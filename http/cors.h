/* cors.h -- Cross-Origin Resource Sharing: which web pages on other origins
 * may call the service from a browser, and the headers that tell it so.
 *
 * The policy is the cors_allow_origin setting, as config.c checked it:
 *
 *     ""                       off: no header is added, and OPTIONS is not a
 *                              method of the service (405 / 404 as any other)
 *     "*"                      any origin; Access-Control-Allow-Origin: * on
 *                              every answer, whatever the request's Origin
 *     "https://a.example, http://localhost:3000"
 *                              those origins, compared with the request's
 *                              Origin header exactly (ASCII case aside); a
 *                              match is echoed, and every answer says
 *                              Vary: Origin so caches keep them apart
 *
 * The transport calls cors_add_headers() on every answer it sends, errors
 * included (a browser shows a page nothing of an answer without them), and
 * answers a preflight (OPTIONS on an existing path) 204 with
 * cors_add_preflight_headers() as well -- on the routes whose row has
 * ROUTE_CORS (http/route.h). The model repository's rows (behind the admin
 * token) have not: they send no CORS header and get no preflight, so no
 * page can load or unload models. No credentials (cookies) are ever
 * allowed, nor the Authorization header.
 *
 * Which headers a page may send and read is the route table's: HTTP's own
 * (route_http_reads, route_http_sends), then every header a ROUTE_CORS row
 * reads or sends (its reads and sends columns), once each, in the table's
 * order. cors_lists_build() writes both lists once, at start-up; this
 * module names no header of a protocol.
 */
#ifndef HTTP_CORS_H
#define HTTP_CORS_H

#include <microhttpd.h>
#include <stddef.h>

#include "http/route.h"

/* Seconds a browser may cache a preflight answer (Chromium caps it at 7200). */
#define CORS_MAX_AGE "7200"

/* The two lists of a table, as header values ("A, B"). */
struct cors_lists {
    char allow[512];  /* Access-Control-Allow-Headers: what a page may send */
    char expose[512]; /* Access-Control-Expose-Headers: what it may read */
};

/* Fill l from t's ROUTE_CORS rows. 0, or -1 with err filled when a name is
 * not an HTTP token, Authorization is among them (no page may send the
 * admin token), or a list outgrows its buffer. */
int cors_lists_build(struct cors_lists *l, const struct route_table *t, char *err,
                     size_t errlen);

/* 1 when policy allows any origin at all. */
int cors_enabled(const char *policy);

/* The Access-Control-Allow-Origin value for a request whose Origin header is
 * origin (NULL when it has none): "*" under the policy "*", origin itself
 * (borrowed) when the list holds it, else NULL. */
const char *cors_allow_origin(const char *policy, const char *origin);

/* Add to resp the headers of an answer to a request from origin (NULL: no
 * Origin header): Access-Control-Allow-Origin and -Expose-Headers (l's)
 * when it is allowed, Vary: Origin under a list. Nothing when the policy
 * is off. */
void cors_add_headers(struct MHD_Response *resp, const char *policy, const char *origin,
                      const struct cors_lists *l);

/* Add what a preflight answer needs on top: Access-Control-Allow-Methods
 * (methods, e.g. "POST"), -Allow-Headers (l's) and -Max-Age, when origin
 * is allowed. */
void cors_add_preflight_headers(struct MHD_Response *resp, const char *policy,
                                const char *origin, const char *methods,
                                const struct cors_lists *l);

#endif
