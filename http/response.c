/* response.c -- queueing responses on libmicrohttpd; see response.h.
 * Part of the HTTP transport (http/http.c).
 */
#include "http/response.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "http/conn.h"
#include "http/cors.h"
#include "http/inflate.h"
#include "lib/errors.h"

/* Responses up to this size are sent from their buffer, as they are, and
 * escape min_send_rate (libmicrohttpd's idle timeout still applies): at
 * most max_connections of them. Larger ones go through read_response. A
 * reader costs tiny requests a third of their throughput at 64 clients. */
#define SMALL_RESPONSE_BYTES (64 * 1024)

/* The methods of r's row, for Allow and Access-Control-Allow-Methods. */
static const char *allowed_methods(const struct req *r)
{
    switch (r->route->methods) {
    case ROUTE_POST:
        return "POST";
    case ROUTE_GET | ROUTE_POST:
        return "GET, HEAD, POST";
    default:
        return "GET, HEAD";
    }
}

/* Whether r's row declares that its handler sends header name (or it is
 * HTTP's own): what a page may read under CORS is what is sent. */
static int sends(const struct req *r, const char *name)
{
    if (route_list_has(r->route->sends, name) || route_list_has(route_http_sends, name))
        return 1;
    fprintf(stderr, "route %s: its handler set %s, which the row does not send "
            "(http/route.h: sends); left out\n", r->route->path, name);
    return 0;
}

enum MHD_Result response_queue(struct req *r, int status, struct MHD_Response *resp,
                              size_t len, const char *ctype)
{
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 405 || r->preflight)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allowed_methods(r));
    if (req_has_cors(r))
        cors_add_headers(resp, r->srv->opt.cors_allow_origin,
                         MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"),
                         &r->srv->cors);
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
    if (status == 401) /* the scheme the credentials must use (RFC 9110 §11.6.1) */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, WWW_AUTHENTICATE);
    if (status == 415) /* the codings a body may have (RFC 9110 §15.5.16) */
        MHD_add_response_header(resp, "Accept-Encoding", INFLATE_ACCEPT_ENCODING);
    for (int i = 0; i < ROUTE_HEADERS; i++) /* the handler's own, as its row declares */
        if (r->resp.headers[i].name && sends(r, r->resp.headers[i].name))
            MHD_add_response_header(resp, r->resp.headers[i].name, r->resp.headers[i].value);
    if (r->request_id[0])
        MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    /* draining: this connection's last answer (a request already on its
     * way into it is not cut off, http_drain) */
    if ((status >= 400 && req_is_job(r) && !r->done) || (r->c && r->c->refused) ||
        atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r->c) {
        pthread_mutex_lock(&r->srv->lock);
        r->c->responded = 1;
        pthread_mutex_unlock(&r->srv->lock);
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->sent_status = status;
    r->sent_bytes = len;
    return ret;
}

/* Queue body (malloc'd, ownership passes to MHD) with status. */
static enum MHD_Result queue_buffer(struct req *r, int status, char *body, size_t len,
                                    const char *ctype)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    return response_queue(r, status, resp, len, ctype);
}

/* A response from a buffer or a generator while it is sent: counted in
 * srv->answer_bytes until libmicrohttpd frees it, its progress reported to
 * the watchdog. */
struct sending {
    struct route_response a; /* moved from the request */
    struct http_server *srv;
    struct conn *c;          /* valid while libmicrohttpd calls the reader */
    size_t charged;
};

/* MHD pulls a response 64 KiB at a time, on the network thread: a copy out
 * of a buffered answer, or base64 encoding (about 4 GB/s) for a streamed
 * one; no parsing. Going through a reader for both lets the watchdog see
 * how fast the client reads (min_send_rate). */
static ssize_t read_response(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct sending *sd = cls;
    struct route_response *a = &sd->a;
    size_t n;
    if (a->body) {
        n = pos < a->len ? a->len - (size_t)pos : 0;
        if (n > max)
            n = max;
        memcpy(buf, a->body + pos, n);
    } else {
        n = a->read(a->reader, (size_t)pos, buf, max);
    }
    conn_progress(sd->srv, sd->c, pos + n);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void free_response(void *cls)
{
    struct sending *sd = cls;
    atomic_fetch_sub(&sd->srv->answer_bytes, (long long)sd->charged);
    route_response_free(&sd->a);
    free(sd);
}

enum MHD_Result response_error(struct req *r, int code, const char *msg)
{
    r->route->error(&r->resp, code, msg);
    char *body = r->resp.body;
    if (!body)
        return MHD_NO;
    r->resp.body = NULL;
    return queue_buffer(r, r->resp.status, body, r->resp.len, r->resp.content_type);
}

/* 204 to OPTIONS on a path that exists, while CORS is on: a preflight. */
enum MHD_Result response_preflight(struct req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    cors_add_preflight_headers(resp, r->srv->opt.cors_allow_origin,
                               MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"),
                               allowed_methods(r), &r->srv->cors);
    return response_queue(r, 204, resp, 0, NULL);
}

/* A file, sent from its descriptor (sendfile where the kernel can): never
 * copied into memory, never read on this thread. */
static enum MHD_Result send_file(struct req *r)
{
    struct route_response *a = &r->resp;
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)a->len, a->fd);
    if (!resp)
        return response_error(r, ERR_INTERNAL, "out of memory sending a static file");
    a->has_fd = 0; /* the response owns it now */
    return response_queue(r, a->status, resp, a->len, a->content_type);
}

/* A small generated answer read into one buffer, so that it goes out as
 * one (with the headers, in one send) rather than through read_response
 * (a send for the headers, another for the body, and a 64 KiB block).
 * Leaves a as it was when that fails. */
static void read_small(struct route_response *a)
{
    char *buf = malloc(a->len ? a->len : 1);
    size_t got = 0, n = 1;
    while (buf && got < a->len && n)
        got += n = a->read(a->reader, got, buf + got, a->len - got);
    if (!buf || got != a->len) {
        free(buf);
        return;
    }
    if (a->free_reader)
        a->free_reader(a->reader);
    a->reader = NULL, a->read = NULL, a->free_reader = NULL;
    a->body = buf;
}

enum MHD_Result response_send(struct req *r)
{
    struct route_response *a = &r->resp;
    if (a->has_fd)
        return send_file(r);
    if (!a->body && a->reader && a->len <= SMALL_RESPONSE_BYTES)
        read_small(a);
    if (!a->body && !a->reader)
        return response_error(r, ERR_INTERNAL, "out of memory encoding the response");
    const char *ctype = a->content_type;
    if (a->body && a->len <= SMALL_RESPONSE_BYTES) {
        /* as one buffer (libmicrohttpd sends it with the headers in one
         * call); its charge goes back at completion, when MHD frees it */
        char *body = a->body;
        a->body = NULL;
        conn_phase_set(r->srv, r->c, PH_OTHER);
        return queue_buffer(r, a->status, body, a->len, ctype);
    }
    struct sending *sd = malloc(sizeof *sd);
    struct MHD_Response *resp = NULL;
    if (sd) {
        *sd = (struct sending){*a, r->srv, r->c, r->resp_charged};
        resp = MHD_create_response_from_callback(a->len, 64 * 1024, read_response, sd,
                                                 free_response);
    }
    if (!resp) {
        free(sd);
        return response_error(r, ERR_INTERNAL, "out of memory sending the response");
    }
    a->body = NULL, a->reader = NULL, a->done = NULL; /* the response owns them now */
    r->resp_charged = 0;
    conn_phase_set(r->srv, r->c, PH_SEND);
    return response_queue(r, a->status, resp, a->len, ctype);
}
