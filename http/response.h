/* response.h -- queueing responses on libmicrohttpd (http/response.c).
 * Internal to the HTTP transport (http/http.c). Each returns what the
 * access handler returns to libmicrohttpd.
 */
#ifndef HTTP_RESPONSE_H
#define HTTP_RESPONSE_H

#include <stddef.h>

#include "http/state.h"

/* Headers every response may need, then queue resp (len bytes) with
 * status. ctype NULL: no Content-Type. */
enum MHD_Result response_queue(struct req *r, int status, struct MHD_Response *resp,
                               size_t len, const char *ctype);

/* The error code (enum http_error) with msg (NULL: the code's default), in
 * the style of r's row, queued now. */
enum MHD_Result response_error(struct req *r, int code, const char *msg);

/* 204 to OPTIONS on a path that exists, while CORS is on: a preflight. */
enum MHD_Result response_preflight(struct req *r);

/* The handler's response (r->resp): a small buffer as it is, a large one
 * or a generator pulled as it is sent (min_send_rate), a file from its
 * descriptor. */
enum MHD_Result response_send(struct req *r);

#endif
