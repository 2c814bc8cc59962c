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
 */
#ifndef SERVER_CORS_H
#define SERVER_CORS_H

#include <microhttpd.h>

/* Response headers a page's script may read besides the safelisted ones. */
#define CORS_EXPOSE_HEADERS \
    "Server-Timing, Retry-After, Allow, X-Request-Id, Inference-Header-Content-Length"
/* Request headers a page may send besides the safelisted ones. Not
 * Authorization: the admin token is for operators' tools, not web pages. */
#define CORS_ALLOW_HEADERS \
    "Content-Type, Content-Encoding, X-Request-Id, Inference-Header-Content-Length"
/* Seconds a browser may cache a preflight answer (Chromium caps it at 7200). */
#define CORS_MAX_AGE "7200"

/* 1 when policy allows any origin at all. */
int cors_enabled(const char *policy);

/* The Access-Control-Allow-Origin value for a request whose Origin header is
 * origin (NULL when it has none): "*" under the policy "*", origin itself
 * (borrowed) when the list holds it, else NULL. */
const char *cors_allow_origin(const char *policy, const char *origin);

/* Add to resp the headers of an answer to a request from origin (NULL: no
 * Origin header): Access-Control-Allow-Origin and -Expose-Headers when it is
 * allowed, Vary: Origin under a list. Nothing when the policy is off. */
void cors_add_headers(struct MHD_Response *resp, const char *policy, const char *origin);

/* Add what a preflight answer needs on top: Access-Control-Allow-Methods
 * (methods, e.g. "POST"), -Allow-Headers and -Max-Age, when origin is
 * allowed. */
void cors_add_preflight_headers(struct MHD_Response *resp, const char *policy,
                                const char *origin, const char *methods);

#endif
