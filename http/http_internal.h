/* http_internal.h -- what the parts of the HTTP front share: the server,
 * one connection, one request (http/http.c, conn.c, answer.c, static.c).
 * Not for the rest of the service: see http.h.
 */
#ifndef SERVER_HTTP_INTERNAL_H
#define SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "config/config.h"
#include "api/metrics.h"
#include "lib/pool.h"
#include "api/service.h"
#include "http/tls.h"
#include "api/v2.h"

/* Retry-After of every 503, in seconds (answer.c, and conn.c's cuts). */
#define RETRY_AFTER_S "1"

/* What a connection is doing, for the watchdog's deadlines. */
enum phase {
    PH_HEADERS, /* accepted, or kept alive after an answer: header_timeout */
    PH_BODY,    /* receiving the body: body_timeout, min_upload_rate */
    PH_COMPUTE, /* suspended while a worker has the job: no deadline */
    PH_SEND,    /* sending a POST /attention answer: min_send_rate */
    PH_OTHER,   /* a GET answer: libmicrohttpd's idle timeout only */
};

/* One TCP connection, from accept to close (MHD_OPTION_NOTIFY_CONNECTION),
 * on srv->conns. Every field below `next` is read and written under
 * srv->lock, by the network thread and the watchdog. */
struct conn {
    struct conn *prev, *next;
    int fd;
    enum phase phase;
    int kept_alive; /* PH_HEADERS after an answer on this connection */
    int refused;    /* over max_connections: 503 at its first request */
    int answered;   /* a response is queued: a cut sends no message */
    int cut;        /* the watchdog shut the socket; what comes is dropped */
    double t_phase, t_cut;               /* when the phase began; when cut */
    double t_win;                        /* start of the rate window */
    int eof_seen;   /* watch_eof found the client's end of stream last tick */
    unsigned long long bytes, win_bytes; /* moved in this phase; at t_win */
    /* the request in progress, for an answer the watchdog writes itself */
    int v2;              /* under /v2: {"error": msg} */
    char request_id[72]; /* its X-Request-Id, or "" */
};

struct http_server {
    struct cfg cfg;
    struct codec_limits limits;
    struct pool *pool;
    struct MHD_Daemon *daemon;
    struct tls_pem tls; /* HTTPS certificate and key, or NULLs */
    int port;
    atomic_int draining;
    atomic_int active; /* requests between first call and completion */
    atomic_llong inflight_bytes; /* body bytes held by all requests */
    atomic_llong answer_bytes;   /* answers computed and not yet sent */
    atomic_int open;             /* connections accepted and not yet closed */
    /* the connections and the watchdog */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t watchdog;
    int watchdog_started, stopping;
    struct conn *conns; /* every open connection */
    int live;           /* of them, not cut */
    double t_cut_all;   /* drain deadline passed at this time, or 0 */
    int started_draining; /* connections started since the drain began */
};

struct req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    enum metrics_endpoint ep;
    int v2;            /* under /v2: errors are {"error": msg} */
    struct v2_route rt; /* its route, when v2 */
    long long header_len; /* Inference-Header-Content-Length, or -1 */
    char request_id[72]; /* X-Request-Id: the client's, or made up */
    char method[12];
    char path[128];
    double t0;         /* first call: the headers are in */
    double t_body;     /* final call: the whole body is in */
    /* body */
    char *body;
    size_t len, cap;
    unsigned long long content_length; /* as declared, or 0 (early_check) */
    size_t charged;    /* bytes counted in srv->inflight_bytes */
    int too_large;
    int over_budget;   /* max_inflight_bytes reached: answer 503 */
    struct body_inflate *inflate; /* Content-Encoding gzip/deflate, or NULL */
    int body_error;    /* a compressed body that cannot be read: its error */
    char body_msg[240];
    struct conn *c;    /* its connection, or NULL */
    int fd;            /* the connection's socket, for the worker's look */
    int preflight;     /* OPTIONS with CORS on: answer 204 (send_preflight) */
    /* job, written by the worker before it resumes the connection */
    int submitted, done, client_gone;
    struct service_answer ans;
    size_t ans_charged; /* bytes of ans counted in srv->answer_bytes */
    /* for the access log */
    int sent_status;
    size_t sent_bytes;
};

/* Whether r's endpoint takes a body and runs as a job on the pool. */
static inline int req_is_job(const struct req *r)
{
    return r->ep == EP_ATTENTION || r->ep == EP_V2_INFER || r->ep == EP_V2_REPO;
}

/* Whether r's answers carry CORS headers (when cors_allow_origin is set):
 * every path but the model repository endpoints, which hold the admin
 * token; a page on a listed origin must not drive them, so they get no
 * preflight (OPTIONS is 405 there) and no Access-Control-* header. */
static inline int req_has_cors(const struct req *r)
{
    /* by the path too: an answer sent before routing (framing, limits) */
    return r->ep != EP_V2_REPO && strncmp(r->path, "/v2/repository", 14) != 0;
}

/* body.c: request bodies. */
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

/* http_v2.c: the /v2 front. */
/* Route url (under /v2) into r; 0, or an error code to answer (404). */
int http_v2_route(struct req *r, const char *url, char *msg, size_t msglen);
/* The header checks of a v2 request: method, admin token,
 * Inference-Header-Content-Length. -1 to go on, or an error code. */
int http_v2_early_check(struct req *r, char *msg, size_t msglen);
/* X-Request-Id: the client's when it is a sane token, else a new one. */
void http_request_id(struct req *r);

#endif
