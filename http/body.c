/* body.c -- request bodies: reserved, received piece by piece (inflated on
 * the way when sent with Content-Encoding gzip or deflate), bounded per
 * request and for the whole server, released as soon as they are decoded.
 * Part of the HTTP front (http/http.c); see body.h. */
#include "http/body.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/inflate.h"

void body_release(struct req *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    atomic_fetch_sub(&r->srv->inflight_bytes, (long long)r->charged);
    r->charged = 0;
}

int body_begin(struct req *r, char *msg, size_t msglen)
{
    if (!req_is_job(r))
        return -1;
    const char *ce = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_ENCODING);
    struct failure e;
    if (ce && *ce) {
        r->inflate = inflate_new(ce, (size_t)r->srv->opt.max_body_bytes, &e);
        if (!r->inflate) {
            snprintf(msg, msglen, "%s", e.msg);
            return e.code;
        }
        return -1; /* the inflated size is not known: the buffer grows */
    }
    /* With a Content-Length (first_checks compared it with max_body_bytes),
     * size the buffer once instead of doubling it: no copies of a big
     * upload. The pages are only touched (and counted against
     * max_inflight_bytes) as bytes arrive, so a client that claims a big
     * body and sends little holds little of the budget. */
    const size_t n = (size_t)r->content_length;
    if (n > 0) {
        r->body = malloc(n);
        r->cap = r->body ? n : 0;
    }
    return -1;
}

/* Append n bytes of (inflated) body. Memory is bounded twice: per request
 * by max_body_bytes (413) and for the whole server by max_inflight_bytes
 * (503), which counts the body bytes received and not yet decoded (the job
 * gives them back as soon as the request is decoded). Past either, the
 * rest is read and dropped so the answer can be sent. */
static int append(void *cls, const char *data, size_t n)
{
    struct req *r = cls;
    struct http_server *s = r->srv;
    const size_t max = (size_t)s->opt.max_body_bytes;
    if (r->too_large || r->over_budget)
        return 0;
    if (r->len + n > max) {
        r->too_large = 1;
        body_release(r);
        return 0;
    }
    if (atomic_fetch_add(&s->inflight_bytes, (long long)n) + (long long)n >
        s->opt.max_inflight_bytes) {
        atomic_fetch_sub(&s->inflight_bytes, (long long)n);
        r->over_budget = 1;
        body_release(r);
        return 0;
    }
    r->charged += n;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 16384;
        while (cap < r->len + n)
            cap *= 2;
        if (cap > max)
            cap = max;
        char *nb = realloc(r->body, cap);
        if (!nb)
            return -1;
        r->body = nb, r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return 0;
}

/* A compressed body that cannot be read: keep the reason, drop the rest. */
static void refuse(struct req *r, const struct failure *e)
{
    if (e->code == ERR_PAYLOAD_TOO_LARGE) {
        r->too_large = 1;
    } else if (!r->body_error) {
        r->body_error = e->code;
        snprintf(r->body_msg, sizeof r->body_msg, "%s", e->msg);
    }
    body_release(r);
}

int body_append(struct req *r, const char *data, size_t n)
{
    if (!r->inflate)
        return append(r, data, n);
    if (r->too_large || r->over_budget || r->body_error)
        return 0;
    struct failure e;
    const int rc = inflate_feed(r->inflate, data, n, append, r, &e);
    if (rc == INFLATE_ESINK)
        return -1;
    if (rc != INFLATE_OK)
        refuse(r, &e);
    return 0;
}

void body_end(struct req *r)
{
    struct failure e;
    if (r->inflate && !r->too_large && !r->over_budget && !r->body_error &&
        inflate_finish(r->inflate, &e) != 0)
        refuse(r, &e);
}

void body_free(struct req *r)
{
    body_release(r);
    inflate_free(r->inflate);
    r->inflate = NULL;
}
