/* http.c -- request lifecycle on libmicrohttpd; see http.h.
 *
 * Lifecycle of one request (as libmicrohttpd's largepost.c example):
 *   1st call       allocate struct req, route, check method, Content-Type and
 *                  Content-Length; an early error is queued right away.
 *   upload calls   append to the body up to max_body_bytes; past it, stop
 *                  storing and remember to answer 413.
 *   final call     POST /attention: suspend, submit to the pool (or answer
 *                  503); a worker runs the job (server/service.c: decode,
 *                  compute, encode) and resumes; the call after the resume
 *                  queues the answer. GETs are answered directly.
 *   completed      NOTIFY_COMPLETED (also for aborted requests): log, count,
 *                  free.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/cors.h"
#include "server/errors.h"
#include "server/framing.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/tls.h"

/* openapi.yaml, linked into the binary (server/embed.S). */
extern const char openapi_yaml[], openapi_yaml_end[];

#define RETRY_AFTER_S "1"
/* Connections libmicrohttpd accepts beyond max_connections. At its own
 * limit it stops polling the listening socket and new connections wait,
 * unanswered, in the kernel's backlog; below it, the watchdog makes room
 * or answers 503 (struct conn). */
#define CONN_RESERVE 64
/* Past max_connections, a connection that has not sent its headers within
 * this many seconds may be closed to make room; a refused one is closed
 * after it if its headers have not come. */
#define EVICT_AFTER_S 1.0
/* Rates are measured over windows of this many seconds; the first window
 * is the grace period (it also absorbs the kernel's socket buffers). */
#define RATE_WINDOW_S 5.0
/* How often the watchdog looks at every connection. */
#define WATCHDOG_MS 100
/* A connection cut with a message (408, 503) has this long to read it and
 * close before it is reset. */
#define LINGER_S 2.0
/* Answers up to this size are sent from their buffer, as they are, and
 * escape min_send_rate (libmicrohttpd's idle timeout still applies): at
 * most max_connections of them. Larger ones go through read_answer. A
 * reader costs tiny requests a third of their throughput at 64 clients. */
#define SMALL_ANSWER_BYTES (64 * 1024)
/* Largest static file served; the web client's files are far smaller. */
#define STATIC_MAX_BYTES (16 << 20)

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
};

struct req {
    struct http_server *srv;
    struct MHD_Connection *conn;
    enum metrics_endpoint ep;
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

static void release_body(struct req *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    atomic_fetch_sub(&r->srv->inflight_bytes, (long long)r->charged);
    r->charged = 0;
}

/* ---------------------------------------------------------------------- */
/* Connections: phases, deadlines, the watchdog                            */
/*
 * libmicrohttpd's own timeout is idle-based: every byte restarts it, so a
 * client that sends (or reads) a byte a second is never cut off. Here each
 * connection carries its phase and the bytes moved in it, and a watchdog
 * thread compares them with the settings every WATCHDOG_MS: header_timeout
 * and body_timeout bound the total time of each phase, min_upload_rate and
 * min_send_rate the bytes of each RATE_WINDOW_S window after the first. It
 * closes a connection by shutting its socket down (after writing a 408 or
 * 503 where no answer has started); libmicrohttpd then sees the close,
 * aborts the request (NOTIFY_COMPLETED frees it) and closes the socket.
 * NOTIFY_CONNECTION's CLOSED comes before libmicrohttpd closes the
 * descriptor, and takes srv->lock, so the watchdog never touches a reused
 * descriptor. Suspended connections (PH_COMPUTE) are left alone: their
 * request is being computed and will be answered. */

static void phase_set(struct http_server *s, struct conn *c, enum phase ph)
{
    if (!c)
        return;
    pthread_mutex_lock(&s->lock);
    c->phase = ph;
    c->eof_seen = 0;
    c->t_phase = c->t_win = service_now();
    c->bytes = c->win_bytes = 0;
    pthread_mutex_unlock(&s->lock);
}

static void phase_progress(struct http_server *s, struct conn *c, unsigned long long bytes)
{
    if (!c)
        return;
    pthread_mutex_lock(&s->lock);
    c->bytes = bytes;
    c->eof_seen = 0;
    pthread_mutex_unlock(&s->lock);
}

/* Shut c's socket (under s->lock). With an error (e >= 0) and no answer
 * started, write it first and shut only the sending side, so the client can
 * read it; the watchdog resets the connection LINGER_S later. */
static void conn_cut(struct http_server *s, struct conn *c, int e, const char *msg)
{
    if (c->cut)
        return;
    c->cut = 1;
    s->live--;
    c->t_cut = 0;
    /* (over TLS a raw write would corrupt the stream: the cut is silent) */
    if (e >= 0 && !c->answered && !s->tls.cert) {
        size_t len = 0;
        char *body = api_error_body(e, msg, &len);
        char head[256];
        const int status = http_error_status(e);
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
                         status, status == 408 ? "Request Timeout" : "Service Unavailable",
                         body ? len : 0, status == 503 ? "Retry-After: " RETRY_AFTER_S "\r\n" : "");
        /* a few hundred bytes into an empty send buffer: it never blocks */
        if (send(c->fd, head, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n && body)
            (void)!send(c->fd, body, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        free(body);
        c->answered = 1;
        shutdown(c->fd, SHUT_WR);
        c->t_cut = service_now();
        return;
    }
    /* A slow reader gets a reset, not a close: its answer would otherwise
     * still trickle out of the kernel's send buffer after the close. Any
     * other connection keeps what is queued (the tail of a previous
     * answer, on a kept-alive one). */
    if (c->phase == PH_SEND) {
        const struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    shutdown(c->fd, SHUT_RDWR);
}

/* Past max_connections: close the oldest idle kept-alive connection, else
 * the oldest that has not sent its headers within EVICT_AFTER_S (under
 * s->lock). 0 when one was closed, -1 when none may be. */
static int make_room(struct http_server *s, const struct conn *newc, double now)
{
    struct conn *best = NULL;
    for (struct conn *c = s->conns; c; c = c->next) {
        if (c == newc || c->cut || c->phase != PH_HEADERS)
            continue;
        if (!c->kept_alive && now - c->t_phase < EVICT_AFTER_S)
            continue;
        if (!best || (c->kept_alive && !best->kept_alive) ||
            (c->kept_alive == best->kept_alive && c->t_phase < best->t_phase))
            best = c;
    }
    if (!best)
        return -1;
    conn_cut(s, best, -1, NULL);
    return 0;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    struct conn *c = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        atomic_fetch_add(&s->open, 1);
        c = ci ? calloc(1, sizeof *c) : NULL;
        *socket_context = c;
        if (!c)
            return; /* untracked: libmicrohttpd's own timeout still applies */
        c->fd = ci->connect_fd;
        c->phase = PH_HEADERS;
        c->t_phase = c->t_win = service_now();
        pthread_mutex_lock(&s->lock);
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->live++;
        if (s->live > s->cfg.max_connections && make_room(s, c, c->t_phase) != 0)
            c->refused = 1;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    atomic_fetch_sub(&s->open, 1);
    if (!c)
        return;
    pthread_mutex_lock(&s->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (!c->cut)
        s->live--;
    pthread_mutex_unlock(&s->lock);
    free(c);
    *socket_context = NULL;
}

/* Whether c moved fewer than rate bytes a second over the window that ends
 * now (judged every RATE_WINDOW_S); starts the next window. The first
 * window is the grace period and is not judged. */
static int too_slow(struct conn *c, long long rate, double now)
{
    if (rate <= 0 || now - c->t_win < RATE_WINDOW_S)
        return 0;
    const int judged = c->t_win > c->t_phase;
    const int slow =
        judged && (double)(c->bytes - c->win_bytes) < (double)rate * (now - c->t_win);
    c->t_win = now, c->win_bytes = c->bytes;
    return slow;
}

/* A client that closed before its request was complete (headers or body
 * still due) can never complete it. libmicrohttpd 0.9.75 in epoll mode
 * misses that close when it arrives together with the last data, and the
 * connection would sit in CLOSE-WAIT, holding its slot and its body's
 * bytes, until conn_timeout. Seen here as an end of stream with nothing
 * unread, on two ticks in a row with no progress between them (so a
 * request read whole but not yet handed to on_request is never taken for
 * one). */
static int watch_eof(struct conn *c)
{
    char b;
    const ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    const int eof = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                               errno != EINTR);
    const int gone = eof && c->eof_seen;
    c->eof_seen = eof;
    return gone;
}

static void watch_one(struct http_server *s, struct conn *c, double now)
{
    const struct cfg *cf = &s->cfg;
    const double age = now - c->t_phase;
    if (c->cut) {
        if (c->t_cut > 0 && now - c->t_cut > LINGER_S) {
            shutdown(c->fd, SHUT_RDWR);
            c->t_cut = 0;
        }
        return;
    }
    if ((c->phase == PH_HEADERS || c->phase == PH_BODY) && watch_eof(c)) {
        conn_cut(s, c, -1, NULL);
        return;
    }
    switch (c->phase) {
    case PH_HEADERS:
        if (c->refused && age > EVICT_AFTER_S)
            conn_cut(s, c, ERR_OVERLOADED, "max_connections are open; retry later");
        else if (age > cf->header_timeout || s->t_cut_all > 0)
            conn_cut(s, c, -1, NULL);
        break;
    case PH_BODY: {
        char msg[160];
        if (s->t_cut_all > 0) {
            conn_cut(s, c, ERR_SHUTTING_DOWN, "the server is shutting down; the body did not "
                                              "arrive within drain_timeout");
        } else if (age > cf->body_timeout) {
            snprintf(msg, sizeof msg, "the body did not arrive within %d s (body_timeout)",
                     cf->body_timeout);
            conn_cut(s, c, ERR_REQUEST_TIMEOUT, msg);
        } else if (too_slow(c, cf->min_upload_rate, now)) {
            snprintf(msg, sizeof msg, "the body arrives slower than %lld bytes/s "
                     "(min_upload_rate)", cf->min_upload_rate);
            conn_cut(s, c, ERR_REQUEST_TIMEOUT, msg);
        }
        break;
    }
    case PH_SEND: /* also while draining: min_send_rate bounds it */
        if (too_slow(c, cf->min_send_rate, now))
            conn_cut(s, c, -1, NULL);
        break;
    case PH_COMPUTE:
    case PH_OTHER:
        if (s->t_cut_all > 0 && c->phase == PH_OTHER && c->t_phase < s->t_cut_all)
            conn_cut(s, c, -1, NULL);
        break;
    }
}

static void *watchdog_main(void *arg)
{
    struct http_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCHDOG_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->wake, &s->lock, &ts);
        const double now = service_now();
        for (struct conn *c = s->conns; c && !s->stopping; c = c->next)
            watch_one(s, c, now);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* The connection libmicrohttpd keeps our struct conn for (may be NULL). */
static struct conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Whether the client of a connection waiting for its answer has gone: its
 * socket was reset (a client that closes with unread data, or was killed
 * mid-upload, resets). An end of stream alone is not taken as gone: a
 * client may shut down its sending side after the request and still read
 * the answer (HTTP/1.0 tools, nc -N), and a plain close looks the same
 * from here; such an answer is computed, and freed at the first write
 * that fails. */
static int client_gone(int fd)
{
    char b;
    const ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* The methods of r's path, for Allow and Access-Control-Allow-Methods. */
static const char *allowed_methods(const struct req *r)
{
    return r->ep == EP_ATTENTION ? "POST" : "GET, HEAD";
}

/* Headers every answer may need, then queue resp (len bytes) with status.
 * ctype NULL: no body, no Content-Type. */
static enum MHD_Result send_response(struct req *r, int status, struct MHD_Response *resp,
                                     size_t len, const char *ctype)
{
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 405 || r->preflight)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allowed_methods(r));
    cors_add_headers(resp, r->srv->cfg.cors_allow_origin,
                     MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"));
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
    if (r->ans.timing[0])
        MHD_add_response_header(resp, "Server-Timing", r->ans.timing);
    if ((status >= 400 && r->ep == EP_ATTENTION && !r->done) || (r->c && r->c->refused))
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
static enum MHD_Result send_owned(struct req *r, int status, char *body, size_t len,
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

static enum MHD_Result send_error(struct req *r, enum http_error e, const char *msg)
{
    size_t len = 0;
    char *body = api_error_body(e, msg, &len);
    if (!body)
        return MHD_NO;
    return send_owned(r, http_error_status(e), body, len, "application/json");
}

/* 204 to OPTIONS on a path that exists, while CORS is on: a preflight. */
static enum MHD_Result send_preflight(struct req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    cors_add_preflight_headers(resp, r->srv->cfg.cors_allow_origin,
                               MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin"),
                               allowed_methods(r));
    return send_response(r, 204, resp, 0, NULL);
}

static enum MHD_Result send_copy(struct req *r, int status, const char *text, size_t len,
                                 const char *ctype)
{
    char *body = malloc(len ? len : 1);
    if (!body)
        return MHD_NO;
    memcpy(body, text, len);
    return send_owned(r, status, body, len, ctype);
}

/* ---------------------------------------------------------------------- */
/* The job: runs on a pool worker with a big stack.                        */

static void release_body_cb(void *r)
{
    release_body(r);
}

/* Whether the answers not yet sent have spent max_answer_bytes. */
static int answers_over_budget(const struct http_server *s)
{
    return atomic_load(&s->answer_bytes) >= s->cfg.max_answer_bytes;
}

static void run_job(void *arg)
{
    struct req *r = arg;
    struct http_server *s = r->srv;
    const struct service_times t = {r->t0, r->t_body};
    if (r->fd >= 0 && client_gone(r->fd)) {
        /* nobody to answer: not computed (the access log says 499) */
        release_body(r);
        service_error(&r->ans, ERR_OVERLOADED, "the client has gone away");
        r->client_gone = 1;
    } else if (answers_over_budget(s)) {
        release_body(r);
        service_error(&r->ans, ERR_OVERLOADED, "answers not yet read by their clients hold "
                                               "max_answer_bytes; retry later");
    } else {
        service_attention(&s->limits, r->body, r->len, &t, release_body_cb, r, &r->ans);
    }
    r->ans_charged = r->ans.len;
    atomic_fetch_add(&s->answer_bytes, (long long)r->ans_charged);
    r->done = 1;
    MHD_resume_connection(r->conn);
}

/* The worker's answer, queued on the network thread. */
static enum MHD_Result send_answer(struct req *r)
{
    struct service_answer *a = &r->ans;
    if (!a->body && !a->reader)
        return send_error(r, ERR_INTERNAL, "out of memory encoding the response");
    if (a->body && a->len <= SMALL_ANSWER_BYTES) {
        /* as one buffer (libmicrohttpd sends it with the headers in one
         * call); its charge goes back at completion, when MHD frees it */
        char *body = a->body;
        a->body = NULL;
        phase_set(r->srv, r->c, PH_OTHER);
        return send_owned(r, a->status, body, a->len, "application/json");
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
    a->body = NULL, a->reader = NULL; /* the response owns them now */
    r->ans_charged = 0;
    phase_set(r->srv, r->c, PH_SEND);
    return send_response(r, a->status, resp, a->len, "application/json");
}

/* ---------------------------------------------------------------------- */
/* Routing and GET endpoints                                               */

static enum metrics_endpoint route(const char *url)
{
    if (strcmp(url, "/attention") == 0)
        return EP_ATTENTION;
    if (strcmp(url, "/healthz") == 0)
        return EP_HEALTHZ;
    if (strcmp(url, "/readyz") == 0)
        return EP_READYZ;
    if (strcmp(url, "/metrics") == 0)
        return EP_METRICS;
    if (strcmp(url, "/openapi.yaml") == 0)
        return EP_OPENAPI;
    return EP_STATIC;
}

static const char *content_type_of(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
        {".png", "image/png"},                 {".svg", "image/svg+xml"},
        {".ico", "image/x-icon"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return NULL;
}

/* The file under cfg.static_dir that url names, opened read-only, with its
 * content type and size; -1 when there is none. Only plain names
 * ([A-Za-z0-9_.-], sub-folders allowed, no "..") of known types. */
static int open_static(const struct req *r, const char *url, const char **type,
                       struct stat *st)
{
    const char *rel = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    *type = content_type_of(rel);
    int ok = *type != NULL && strstr(rel, "..") == NULL && rel[0] != '/';
    for (const char *c = rel; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
             (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.' || *c == '/';
    char path[512];
    if (!ok || snprintf(path, sizeof path, "%s/%s", r->srv->cfg.static_dir, rel) >=
                   (int)sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A static file of the web client, sent from its descriptor (sendfile where
 * the kernel can): never copied into memory, never read on this thread. */
static enum MHD_Result serve_static(struct req *r, const char *url)
{
    const char *type;
    struct stat st;
    char msg[200];
    int fd = open_static(r, url, &type, &st);
    if (fd < 0) {
        r->ep = EP_OTHER;
        snprintf(msg, sizeof msg, "no endpoint or file at %.120s", url);
        return send_error(r, ERR_NOT_FOUND, msg);
    }
    if (st.st_size > STATIC_MAX_BYTES) {
        close(fd);
        snprintf(msg, sizeof msg, "%.100s is %lld bytes; static files are served up to %d "
                 "bytes", url, (long long)st.st_size, STATIC_MAX_BYTES);
        return send_error(r, ERR_PAYLOAD_TOO_LARGE, msg);
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        return send_error(r, ERR_INTERNAL, "out of memory sending a static file");
    }
    return send_response(r, 200, resp, (size_t)st.st_size, type);
}

static enum MHD_Result serve_get(struct req *r, const char *url)
{
    struct http_server *s = r->srv;
    switch (r->ep) {
    case EP_HEALTHZ:
        return send_copy(r, 200, "{\"status\":\"ok\"}", 15, "application/json");
    case EP_READYZ:
        if (atomic_load(&s->draining))
            return send_error(r, ERR_SHUTTING_DOWN, "draining: not ready for new requests");
        return send_copy(r, 200, "{\"status\":\"ready\"}", 18, "application/json");
    case EP_METRICS: {
        struct pool_stats ps;
        size_t len;
        pool_get_stats(s->pool, &ps);
        const struct metrics_gauges g = {ps.queued, ps.busy, ps.workers,
                                         atomic_load(&s->draining),
                                         atomic_load(&s->inflight_bytes),
                                         atomic_load(&s->answer_bytes),
                                         atomic_load(&s->open)};
        char *text = metrics_write(&g, &len);
        if (!text)
            return send_error(r, ERR_INTERNAL, "out of memory writing metrics");
        return send_owned(r, 200, text, len, "text/plain; version=0.0.4");
    }
    case EP_OPENAPI:
        return send_copy(r, 200, openapi_yaml, (size_t)(openapi_yaml_end - openapi_yaml),
                         "application/yaml");
    default:
        return serve_static(r, url);
    }
}

/* ---------------------------------------------------------------------- */
/* The access handler                                                      */

static int is_json_type(const char *ct)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* 1 when url is an endpoint or a file of the web client. */
static int path_exists(const struct req *r, const char *url)
{
    const char *type;
    struct stat st;
    int fd = r->ep == EP_STATIC ? open_static(r, url, &type, &st) : -2;
    if (fd >= 0)
        close(fd);
    return fd != -1;
}

/* First call: checks that need only the headers. Returns an error to send
 * now, or -1 when the request may go on (r->preflight: answer it 204). */
static int early_check(struct req *r, const char *url, char *msg, size_t msglen)
{
    struct http_server *s = r->srv;
    int is_get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (strcmp(r->method, "OPTIONS") == 0 && cors_enabled(s->cfg.cors_allow_origin) &&
        path_exists(r, url)) {
        r->preflight = 1;
        return -1;
    }
    if (r->ep != EP_ATTENTION) {
        if (is_get)
            return -1;
        /* 405 is for a path that exists with another method */
        if (!path_exists(r, url)) {
            r->ep = EP_OTHER;
            snprintf(msg, msglen, "no endpoint or file at %.120s", r->path);
            return ERR_NOT_FOUND;
        }
        snprintf(msg, msglen, "%s is not allowed on %.100s; use GET", r->method, r->path);
        return ERR_METHOD_NOT_ALLOWED;
    }
    if (strcmp(r->method, "POST") != 0) {
        snprintf(msg, msglen, "%s is not allowed on /attention; use POST", r->method);
        return ERR_METHOD_NOT_ALLOWED;
    }
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!is_json_type(ct)) {
        snprintf(msg, msglen, "Content-Type must be application/json, not '%.60s'",
                 ct ? ct : "(none)");
        return ERR_UNSUPPORTED_MEDIA_TYPE;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    r->content_length = cl ? strtoull(cl, NULL, 10) : 0;
    if (r->content_length > (unsigned long long)s->cfg.max_body_bytes) {
        snprintf(msg, msglen, "the body is %.30s bytes; the limit is %lld (max_body_bytes)",
                 cl, s->cfg.max_body_bytes);
        return ERR_PAYLOAD_TOO_LARGE;
    }
    if (atomic_load(&s->draining)) {
        snprintf(msg, msglen, "the server is shutting down");
        return ERR_SHUTTING_DOWN;
    }
    return -1;
}

/* With a Content-Length (early_check compared it with max_body_bytes), size the
 * body buffer once instead of doubling it: no copies of a big upload. The
 * pages are only touched (and counted against max_inflight_bytes) as bytes
 * arrive, so a client that claims a big body and sends little holds little
 * of the budget. */
static void reserve_body(struct req *r)
{
    if (r->ep != EP_ATTENTION)
        return;
    const size_t n = (size_t)r->content_length; /* ≤ max_body_bytes: early_check */
    if (n == 0)
        return;
    r->body = malloc(n);
    r->cap = r->body ? n : 0;
}

/* Append a piece of body. Memory is bounded twice: per request by
 * max_body_bytes (413) and for the whole server by max_inflight_bytes (503),
 * which counts the body bytes received and not yet decoded (the job gives
 * them back as soon as the request is decoded). Past either,
 * the rest is read and dropped so the answer can be sent. */
static int append_body(struct req *r, const char *data, size_t n)
{
    struct http_server *s = r->srv;
    const size_t max = (size_t)s->cfg.max_body_bytes;
    if (r->too_large || r->over_budget)
        return 0;
    if (r->len + n > max) {
        r->too_large = 1;
        release_body(r);
        return 0;
    }
    if (atomic_fetch_add(&s->inflight_bytes, (long long)n) + (long long)n >
        s->cfg.max_inflight_bytes) {
        atomic_fetch_sub(&s->inflight_bytes, (long long)n);
        r->over_budget = 1;
        release_body(r);
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

/* Whether the watchdog has cut r's connection. */
static int conn_was_cut(const struct req *r)
{
    if (!r->c)
        return 0;
    pthread_mutex_lock(&r->srv->lock);
    const int cut = r->c->cut;
    pthread_mutex_unlock(&r->srv->lock);
    return cut;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_server *s = cls;
    struct req *r = *con_cls;
    char msg[200];

    if (!r) { /* 1. first call: headers only */
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->srv = s, r->conn = conn, r->t0 = service_now();
        r->c = conn_of(conn);
        r->fd = r->c ? r->c->fd : -1;
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        r->ep = route(url);
        atomic_fetch_add(&s->active, 1);
        *con_cls = r;
        phase_set(s, r->c, PH_BODY);
        if (r->c && r->c->refused)
            return send_error(r, ERR_OVERLOADED, "max_connections are open and none is idle; "
                                                 "retry later");
        struct api_error fe;
        if (framing_check(conn, method, url, version, &fe) != 0) {
            r->ep = EP_OTHER; /* queued before the body: MHD closes after it */
            return send_error(r, fe.code, fe.msg);
        }
        int e = early_check(r, url, msg, sizeof msg);
        if (e >= 0)
            return send_error(r, e, msg);
        reserve_body(r);
        return MHD_YES;
    }
    if (r->sent_status || conn_was_cut(r)) {
        /* answered early, or cut by the watchdog: drop what still comes */
        if (*upload_data_size) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return r->sent_status ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) { /* 2. body pieces */
        int rc = r->preflight ? 0 : append_body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        phase_progress(s, r->c, r->len);
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->preflight) /* 3. final call (answered now, so the connection stays open) */
        return send_preflight(r);
    if (r->ep != EP_ATTENTION) {
        phase_set(s, r->c, PH_OTHER);
        return serve_get(r, url);
    }
    if (r->too_large) {
        snprintf(msg, sizeof msg, "the body exceeds the limit of %lld bytes (max_body_bytes)",
                 s->cfg.max_body_bytes);
        return send_error(r, ERR_PAYLOAD_TOO_LARGE, msg);
    }
    if (r->over_budget)
        return send_error(r, ERR_OVERLOADED, "the server holds max_inflight_bytes of request "
                                             "bodies already; retry later");
    if (r->done) /* 4. resumed by the worker */
        return r->client_gone ? MHD_NO : send_answer(r);
    if (r->submitted)
        return MHD_YES;
    if (answers_over_budget(s))
        return send_error(r, ERR_OVERLOADED, "answers not yet read by their clients hold "
                                             "max_answer_bytes; retry later");
    /* 5. hand the body to a worker; the connection sleeps meanwhile */
    r->submitted = 1;
    r->t_body = service_now();
    phase_set(s, r->c, PH_COMPUTE);
    MHD_suspend_connection(conn);
    int rc = pool_submit(s->pool, run_job, r);
    if (rc != POOL_OK) {
        service_error(&r->ans, rc == POOL_EFULL ? ERR_OVERLOADED : ERR_SHUTTING_DOWN,
                      rc == POOL_EFULL ? "every worker is busy and the queue is full; retry "
                                         "later"
                                       : "the server is shutting down");
        r->done = 1;
        MHD_resume_connection(conn);
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    struct http_server *s = cls;
    struct req *r = *con_cls;
    if (!r)
        return;
    double ms = (service_now() - r->t0) * 1e3;
    /* 499: the client went away before its answer */
    int status = r->sent_status && !r->client_gone ? r->sent_status : 499;
    metrics_record(r->ep, status, ms / 1e3);
    if (s->cfg.log_level >= CFG_LOG_INFO) { /* escaped: a path cannot forge a line */
        char method[4 * sizeof r->method], path[4 * sizeof r->path];
        fprintf(stderr, "%s %s %d %zu %.1fms%s\n",
                framing_log_escape(method, sizeof method, r->method),
                framing_log_escape(path, sizeof path, r->path), status, r->sent_bytes, ms,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
    release_body(r);
    service_answer_free(&r->ans); /* what was never handed to MHD */
    atomic_fetch_sub(&s->answer_bytes, (long long)r->ans_charged);
    if (r->c) { /* kept alive: the next request's headers are due */
        pthread_mutex_lock(&s->lock);
        r->c->phase = PH_HEADERS;
        r->c->eof_seen = 0;
        r->c->kept_alive = 1;
        r->c->answered = 0;
        r->c->t_phase = r->c->t_win = service_now();
        r->c->bytes = r->c->win_bytes = 0;
        pthread_mutex_unlock(&s->lock);
    }
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&s->active, 1);
}

/* ---------------------------------------------------------------------- */

struct http_server *http_start(const struct cfg *c, struct pool *pool, char *err,
                               size_t errlen)
{
    struct http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->cfg = *c;
    s->pool = pool;
    s->limits = service_limits(c);
    char msg[512];
    int sd = cfg_check_static_dir(c->static_dir, msg, sizeof msg);
    if (sd < 0) {
        snprintf(err, errlen, "%s", msg);
        http_stop(s);
        return NULL;
    }
    if (sd > 0 && c->log_level >= CFG_LOG_WARN)
        fprintf(stderr, "attention-server: WARNING: %s\n", msg);
    /* IPv4, or IPv6 ("::" listens on both: dual stack) */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    struct sockaddr_in6 addr6 = {.sin6_family = AF_INET6,
                                 .sin6_port = htons((uint16_t)c->port)};
    struct sockaddr *sa = (struct sockaddr *)&addr;
    unsigned int family_flags = 0;
    if (inet_pton(AF_INET, c->bind, &addr.sin_addr) != 1) {
        if (inet_pton(AF_INET6, c->bind, &addr6.sin6_addr) != 1) {
            snprintf(err, errlen, "bind: '%s' is not an IPv4 or IPv6 address", c->bind);
            http_stop(s);
            return NULL;
        }
        sa = (struct sockaddr *)&addr6;
        family_flags = IN6_IS_ADDR_UNSPECIFIED(&addr6.sin6_addr) ? MHD_USE_DUAL_STACK
                                                                 : MHD_USE_IPv6;
    }
    if (tls_pem_load(&s->tls, c, err, errlen) != 0) {
        http_stop(s);
        return NULL;
    }
    /* HTTPS when the PEM files are set (libmicrohttpd does TLS with GnuTLS) */
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key},
        {MHD_OPTION_END, 0, NULL},
    };
    errno = 0;
    /* epoll, with the watchdog's end-of-stream check (watch_eof) for the
     * close that libmicrohttpd 0.9.75 misses in this mode. Its poll mode
     * sees that close, but also aborts a client that shuts down its
     * sending side after a complete request and waits for the answer. */
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | (s->tls.cert ? MHD_USE_TLS : 0) | family_flags,
        (uint16_t)c->port, NULL, NULL, on_request, s,
        MHD_OPTION_ARRAY, s->tls.cert ? tls_opts : tls_opts + 2,
        MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)c->conn_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)c->conn_memory_limit,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(c->max_connections + CONN_RESERVE),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_URI_LOG_CALLBACK, framing_uri_log, NULL,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "could not listen on %s:%d: %s", c->bind, c->port,
                 errno ? strerror(errno) : "libmicrohttpd refused to start");
        http_stop(s);
        return NULL;
    }
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
        snprintf(err, errlen, "could not start the connection watchdog");
        http_stop(s);
        return NULL;
    }
    s->watchdog_started = 1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : c->port;
    return s;
}

int http_port(const struct http_server *s)
{
    return s->port;
}

int http_drain(struct http_server *s, int timeout_s)
{
    atomic_store(&s->draining, 1);
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    const double deadline = service_now() + timeout_s;
    while (atomic_load(&s->active) > 0 && service_now() < deadline)
        usleep(10000);
    int cut = 0;
    if (atomic_load(&s->active) > 0) {
        /* the deadline: the watchdog closes uploads (503) and idle
         * connections; requests being computed are answered, and answers
         * being sent finish at min_send_rate or better, however long that
         * takes (a second signal stops at once: main.c) */
        pthread_mutex_lock(&s->lock);
        s->t_cut_all = service_now();
        for (struct conn *c = s->conns; c; c = c->next)
            cut += !c->cut && c->phase == PH_BODY;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        while (atomic_load(&s->active) > 0)
            usleep(10000);
    }
    return cut;
}

void http_stop(struct http_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon); /* closes every connection: CLOSED for each */
    if (s->watchdog_started) {
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->watchdog, NULL);
    }
    tls_pem_deinit(&s->tls);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
