/* answer.c -- queueing answers on libmicrohttpd; see answer.h.
 * Part of the HTTP front (http/http.c).
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
#include "api/service.h"

/* Answers up to this size are sent from their buffer, as they are, and
 * escape min_send_rate (libmicrohttpd's idle timeout still applies): at
 * most max_connections of them. Larger ones go through read_answer. A
 * reader costs tiny requests a third of their throughput at 64 clients. */
#define SMALL_ANSWER_BYTES (64 * 1024)

/* The methods of r's path, for Allow and Access-Control-Allow-Methods. */
static const char *allowed_methods(const struct req *r)
{
    if (r->v2 && r->ep != EP_OTHER)
        return v2_route_has_body(&r->rt) ? "POST" : "GET, HEAD";
    return r->ep == EP_ATTENTION ? "POST" : "GET, HEAD";
}

/* Headers every answer may need, then queue resp (len bytes) with status.
 * ctype NULL: no body, no Content-Type. */
enum MHD_Result send_response(struct req *r, int status, struct MHD_Response *resp,
                              size_t len, const char *ctype)
{
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 405 || r->preflight)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allowed_methods(r));
    if (req_has_cors(r))
        cors_add_headers(resp, r->srv->cfg.cors_allow_origin,
                         MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"));
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
    if (status == 415) /* the codings a body may have (RFC 9110 §15.5.16) */
        MHD_add_response_header(resp, "Accept-Encoding", BODY_INFLATE_ACCEPT_ENCODING);
    if (r->ans.timing[0])
        MHD_add_response_header(resp, "Server-Timing", r->ans.timing);
    if (r->request_id[0])
        MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    /* draining: this connection's last answer (a request already on its
     * way into it is not cut off, http_drain) */
    if ((status >= 400 && req_is_job(r) && !r->done) || (r->c && r->c->refused) ||
        atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r->c) {
        pthread_mutex_lock(&r->srv->lock);
        r->c->answered = 1;
        pthread_mutex_unlock(&r->srv->lock);
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->sent_status = status;
    r->sent_bytes = len;
    return ret;
}

/* Queue body (malloc'd, ownership passes to MHD) with status. */
enum MHD_Result send_owned(struct req *r, int status, char *body, size_t len,
                           const char *ctype)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, body, free);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    return send_response(r, status, resp, len, ctype);
}

/* A POST /attention answer while it is sent: counted in srv->answer_bytes
 * until libmicrohttpd frees it, its progress reported to the watchdog. */
struct sending {
    struct service_answer a; /* moved from the request */
    struct http_server *srv;
    struct conn *c;          /* valid while libmicrohttpd calls the reader */
    size_t charged;
};

/* MHD pulls an answer 64 KiB at a time, on the network thread: a copy out
 * of a buffered answer, or base64 encoding (about 4 GB/s) for a streamed
 * one; no parsing. Going through a reader for both lets the watchdog see
 * how fast the client reads (min_send_rate). */
static ssize_t read_answer(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct sending *sd = cls;
    struct service_answer *a = &sd->a;
    size_t n;
    if (a->body) {
        n = pos < a->len ? a->len - (size_t)pos : 0;
        if (n > max)
            n = max;
        memcpy(buf, a->body + pos, n);
    } else {
        n = a->read(a->reader, (size_t)pos, buf, max);
    }
    phase_progress(sd->srv, sd->c, pos + n);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void free_answer(void *cls)
{
    struct sending *sd = cls;
    atomic_fetch_sub(&sd->srv->answer_bytes, (long long)sd->charged);
    service_answer_free(&sd->a);
    free(sd);
}

enum MHD_Result send_error(struct req *r, enum http_error e, const char *msg)
{
    size_t len = 0;
    char *body = r->v2 ? api_v2_error_body(msg ? msg : http_error_message(e), &len)
                       : api_error_body(e, msg, &len);
    if (!body)
        return MHD_NO;
    return send_owned(r, http_error_status(e), body, len, "application/json");
}

/* 204 to OPTIONS on a path that exists, while CORS is on: a preflight. */
enum MHD_Result send_preflight(struct req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    cors_add_preflight_headers(resp, r->srv->cfg.cors_allow_origin,
                               MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"),
                               allowed_methods(r));
    return send_response(r, 204, resp, 0, NULL);
}

enum MHD_Result send_copy(struct req *r, int status, const char *text, size_t len,
                          const char *ctype)
{
    char *body = malloc(len ? len : 1);
    if (!body)
        return MHD_NO;
    memcpy(body, text, len);
    return send_owned(r, status, body, len, ctype);
}

/* The worker's answer, queued on the network thread. */
enum MHD_Result send_answer(struct req *r)
{
    struct service_answer *a = &r->ans;
    if (!a->body && !a->reader)
        return send_error(r, ERR_INTERNAL, "out of memory encoding the response");
    const char *ctype = a->content_type ? a->content_type : "application/json";
    if (a->body && a->len <= SMALL_ANSWER_BYTES) {
        /* as one buffer (libmicrohttpd sends it with the headers in one
         * call); its charge goes back at completion, when MHD frees it */
        char *body = a->body;
        a->body = NULL;
        phase_set(r->srv, r->c, PH_OTHER);
        return send_owned(r, a->status, body, a->len, a->len || a->status != 200 ? ctype : NULL);
    }
    struct sending *sd = malloc(sizeof *sd);
    struct MHD_Response *resp = NULL;
    if (sd) {
        *sd = (struct sending){*a, r->srv, r->c, r->ans_charged};
        resp = MHD_create_response_from_callback(a->len, 64 * 1024, read_answer, sd,
                                                 free_answer);
    }
    if (!resp) {
        free(sd);
        return send_error(r, ERR_INTERNAL, "out of memory sending the response");
    }
    if (a->has_header_len) { /* a binary v2 answer: where its JSON ends */
        char hl[24];
        snprintf(hl, sizeof hl, "%zu", a->header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
    }
    a->body = NULL, a->reader = NULL; /* the response owns them now */
    r->ans_charged = 0;
    phase_set(r->srv, r->c, PH_SEND);
    return send_response(r, a->status, resp, a->len, ctype);
}
