/* body.h -- request bodies (http/body.c): read as they arrive, through a
 * Content-Encoding's inflater, within the body limits. Internal to the
 * HTTP transport (http/http.c).
 */
#ifndef HTTP_BODY_H
#define HTTP_BODY_H

#include <stddef.h>

#include "http/state.h"

/* After the header checks: a Content-Encoding's inflater, or the buffer
 * sized by Content-Length. -1 to go on, or an error code to answer (415). */
int body_begin(struct req *r, char *msg, size_t msglen);
/* A piece of the body as received; 0, or -1 when out of memory. Limits
 * (too_large, over_budget) and a corrupt compressed body (body_error) are
 * marked on r, and what follows is dropped. */
int body_append(struct req *r, const char *data, size_t n);
/* The body has ended: a compressed body that stops short is body_error. */
void body_end(struct req *r);
/* Give the body's memory and budget back (the job calls it once decoded). */
void body_release(struct req *r);
/* body_release, and the inflater. */
void body_free(struct req *r);

#endif
