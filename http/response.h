/* answer.h -- queueing answers on libmicrohttpd (http/response.c).
 * Internal to the HTTP front (http/http.c). Each returns what the access
 * handler returns to libmicrohttpd.
 */
#ifndef SERVER_ANSWER_H
#define SERVER_ANSWER_H

#include <stddef.h>

#include "lib/errors.h"
#include "http/http_internal.h"

/* Headers every answer may need, then queue resp (len bytes) with status.
 * ctype NULL: no body, no Content-Type. */
enum MHD_Result send_response(struct req *r, int status, struct MHD_Response *resp,
                              size_t len, const char *ctype);

/* Queue body (malloc'd, ownership passes to MHD) with status. */
enum MHD_Result send_owned(struct req *r, int status, char *body, size_t len,
                           const char *ctype);

/* Queue a copy of text (len bytes) with status. */
enum MHD_Result send_copy(struct req *r, int status, const char *text, size_t len,
                          const char *ctype);

/* The JSON error body of e with msg, at e's status. */
enum MHD_Result send_error(struct req *r, enum http_error e, const char *msg);

/* 204 to OPTIONS on a path that exists, while CORS is on: a preflight. */
enum MHD_Result send_preflight(struct req *r);

/* The worker's answer (r->ans), queued on the network thread. */
enum MHD_Result send_answer(struct req *r);

#endif
