/* state.h -- what the parts of the HTTP transport share: the
 * server, one connection, one request (http/http.c, conn.c, response.c,
 * body.c, request.c). A leaf: types, constants and static inline functions;
 * each part's functions are in its own header (body.h, conn.h, request.h,
 * response.h). Not for the rest of the service: see http.h.
 */
#ifndef HTTP_STATE_H
#define HTTP_STATE_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "http/cors.h"
#include "http/http.h"
#include "http/route.h"
#include "http/tls.h"
#include "lib/pool.h"
#include "lib/access_log.h"

/* Retry-After of every 503, in seconds (response.c, and conn.c's cuts). */
#define RETRY_AFTER_S "1"
/* The challenge of a 401 (the admin endpoints take a bearer token). */
#define WWW_AUTHENTICATE "Bearer realm=\"attention-admin\""

/* What a connection is doing, for the watchdog's deadlines. */
enum phase {
    PH_HEADERS, /* accepted, or kept alive after an answer: header_timeout */
    PH_BODY,    /* receiving the body: body_timeout, min_upload_rate */
    PH_COMPUTE, /* suspended while a worker has the job: no deadline */
    PH_SEND,    /* sending a large or generated response: min_send_rate */
    PH_OTHER,   /* a small response: libmicrohttpd's idle timeout only */
};

/* One TCP connection, from accept to close (MHD_OPTION_NOTIFY_CONNECTION),
 * on srv->conns. Every field below `next` is read and written under
 * srv->lock, by the network thread and the watchdog. */
struct conn {
    /* the row of its last job (a request with a body) if that took under
     * JOB_INLINE_S, else NULL: the network thread's alone, without the lock */
    const struct route *quick;
    struct conn *prev, *next;
    int fd;
    enum phase phase;
    int kept_alive; /* PH_HEADERS after an answer on this connection */
    int refused;    /* over max_connections: 503 at its first request */
    int responded;  /* a response is queued: a cut sends no message */
    int cut;        /* the watchdog shut the socket; what comes is dropped */
    double t_phase, t_cut;               /* when the phase began; when cut */
    double t_win;                        /* start of the rate window */
    int eof_seen;   /* watch_eof found the client's end of stream last tick */
    unsigned long long bytes, win_bytes; /* moved in this phase; at t_win */
    /* the request in progress, for an answer the watchdog writes itself */
    route_error error;   /* its row's error style (the table's last row's between requests) */
    char request_id[REQUEST_ID_BYTES]; /* its X-Request-Id, or "" */
};

struct http_server {
    struct http_options opt;
    const struct route_table *table;
    struct cors_lists cors; /* the table's CORS header lists (cors_lists_build) */
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
    double no_inline_until; /* no job on the network thread before (its own) */
};

struct req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    const struct route *route; /* its row (the table's last when none else matched) */
    const char *metric;        /* what it is counted under: the row's, NULL when refused */
    struct route_request view; /* what the handler sees */
    struct route_response resp; /* what it answers: the handler's, or an error */
    char request_id[REQUEST_ID_BYTES]; /* X-Request-Id: the client's, or made up */
    char method[12];
    char path[128];      /* cut to fit: for messages and the access log */
    /* body */
    char *body;
    size_t len, cap;
    unsigned long long content_length; /* as declared, or 0 (first_checks) */
    size_t charged;    /* bytes counted in srv->inflight_bytes */
    int too_large;
    int over_budget;   /* max_inflight_bytes reached: answer 503 */
    struct inflate *inflate; /* Content-Encoding gzip/deflate, or NULL */
    int body_error;    /* a compressed body that cannot be read: its error */
    char body_msg[240];
    struct conn *c;    /* its connection, or NULL */
    int fd;            /* the connection's socket, for the worker's look */
    int preflight;     /* OPTIONS with CORS on: answer 204 (response_preflight) */
    /* job, written by the worker before it resumes the connection */
    int submitted, done, client_gone;
    int inline_job;      /* run on the network thread (http.c, may_inline) */
    double job_s;        /* how long the job took (run_job) */
    size_t resp_charged; /* bytes of resp counted in srv->answer_bytes */
    /* for the access log */
    int sent_status;
    size_t sent_bytes;
};

/* Whether r's row takes a body and runs as a job on the pool. */
static inline int req_is_job(const struct req *r)
{
    return (r->route->flags & ROUTE_BODY) != 0;
}

/* Whether r's responses carry CORS headers (when cors_allow_origin is
 * set): its row says. */
static inline int req_has_cors(const struct req *r)
{
    return (r->route->flags & ROUTE_CORS) != 0;
}

#endif
