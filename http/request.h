/* request.h -- what a request carries besides its body (http/request.c):
 * its X-Request-Id, the admin token, the headers its row reads. Internal to
 * the HTTP transport (http/http.c).
 */
#ifndef HTTP_REQUEST_H
#define HTTP_REQUEST_H

#include <stddef.h>

#include "http/state.h"

/* X-Request-Id: the client's when it is a sane token, else a new one. */
void request_id_make(struct req *r);
/* The admin token of a ROUTE_ADMIN row: -1 to go on, or an error code
 * (401, 403) with msg filled. */
int request_check_token(struct req *r, char *msg, size_t msglen);
/* Each header r's row reads comes at most once: -1 to go on, or 400 with
 * msg naming the header. */
int request_check_once(struct req *r, char *msg, size_t msglen);

#endif
