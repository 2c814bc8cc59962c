/* http.c -- request lifecycle on libmicrohttpd; see http.h.
 *
 * The access handler, the checks a row's columns ask for, the job
 * hand-off and http_start/drain/stop are here; the rest of the transport
 * is in
 *   route.c        matching a path to its row (no libmicrohttpd)
 *   conn.c         connections: phases, deadlines, the watchdog thread
 *   response.c     queueing responses (errors, buffers, generators, files)
 *   body.c         request bodies (inflate.c: Content-Encoding)
 *   request.c      X-Request-Id, the admin token, headers that come once
 *   framing.c, cors.c, tls.c
 * and what they share (the server, a connection, a request) in
 * state.h.
 *
 * Lifecycle of one request (as libmicrohttpd's largepost.c example):
 *   1st call       allocate struct req, find its row, check framing, the
 *                  method, the admin token, that each header the row reads
 *                  comes once, the row's own header checks and
 *                  Content-Length; an early error is queued right away.
 *   upload calls   append to the body up to max_body_bytes; past it, stop
 *                  storing and remember to answer 413.
 *   final call     a row with a body: suspend, submit to the pool (or
 *                  answer 503); a worker runs the row's handler and
 *                  resumes; the call after the resume queues the response.
 *                  A small job that has proved quick runs here instead
 *                  (may_inline), as other rows' handlers do, answered
 *                  directly.
 *   completed      NOTIFY_COMPLETED (also for aborted requests): log, count,
 *                  free.
 */
#define _GNU_SOURCE /* accept4 */ /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include "http/http.h"

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
#include <unistd.h>

/* 1.0 rewrote the request parser (docs/operations.md, "Malformed requests"): 0.9.75
 * (Debian 12) answers a bad Content-Length twice. scripts/mhd.sh builds it. */
#if MHD_VERSION < 0x01000000
#error "libmicrohttpd >= 1.0 is needed: build with make (scripts/mhd.sh)"
#endif

#include "http/body.h"
#include "http/conn.h"
#include "http/cors.h"
#include "http/framing.h"
#include "http/state.h"
#include "http/request.h"
#include "http/response.h"
#include "http/route.h"
#include "http/tls.h"
#include "lib/errors.h"

/* Connections libmicrohttpd accepts beyond max_connections. At its own
 * limit it stops polling the listening socket and new connections wait,
 * unanswered, in the kernel's backlog; below it, the watchdog makes room
 * or answers 503 (struct conn). */
#define CONN_RESERVE 64

/* A job the network thread runs itself (may_inline): body and time; after
 * one that took longer, none for JOB_INLINE_BACKOFF times as long. */
#define JOB_INLINE_BODY_BYTES (64 * 1024)
#define JOB_INLINE_S 250e-6
#define JOB_INLINE_BACKOFF 10

/* ---------------------------------------------------------------------- */
/* The job: runs on a pool worker with a big stack.                        */

static void release_body_cb(void *r)
{
    body_release(r);
}

/* Whether the responses not yet sent have spent max_answer_bytes. */
static int responses_over_budget(const struct http_server *s)
{
    return atomic_load(&s->answer_bytes) >= s->opt.max_answer_bytes;
}

/* Only what the row reads, or HTTP's own: the row's list is what a page
 * may send under CORS, and what comes once (request_check_once). */
static const char *header_of(const struct route_request *rq, const char *name)
{
    const struct req *r = rq->transport;
    if (!route_list_has(r->route->reads, name) && !route_list_has(route_http_reads, name))
        return NULL;
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static int gone_of(const struct route_request *rq)
{
    const struct req *r = rq->transport;
    return r->fd >= 0 && conn_client_gone(r->fd);
}

/* Run r's handler (on a worker for a row with a body, else here). */
static void run_handler(struct req *r)
{
    struct http_server *s = r->srv;
    r->view.body = r->body, r->view.len = r->len;
    r->view.state = (struct route_state){atomic_load(&s->draining),
                                         atomic_load(&s->inflight_bytes),
                                         atomic_load(&s->answer_bytes), atomic_load(&s->open)};
    r->route->handler(&r->view, &r->resp);
    body_release(r);
}

static void run_job(void *arg)
{
    struct req *r = arg;
    struct http_server *s = r->srv;
    const double t0 = route_now();
    if (!r->inline_job && gone_of(&r->view)) { /* (inline: it has just sent the body) */
        /* nobody to answer: not computed (the access log says 499) */
        body_release(r);
        r->route->error(&r->resp, ERR_OVERLOADED, "the client has gone away");
        r->client_gone = 1;
    } else if (responses_over_budget(s)) {
        body_release(r);
        r->route->error(&r->resp, ERR_OVERLOADED, "answers not yet read by their clients "
                                                  "hold max_answer_bytes; retry later");
    } else {
        run_handler(r);
    }
    r->resp_charged = r->resp.len;
    atomic_fetch_add(&s->answer_bytes, (long long)r->resp_charged);
    r->job_s = route_now() - t0;
    r->done = 1;
    if (!r->inline_job)
        MHD_resume_connection(r->conn);
}

/* Whether the network thread runs r's job itself (two thread wake-ups and
 * a suspend and resume fewer: most of a small request's round trip): when
 * r is the only request in progress, its body is small, its row is not an
 * admin one, the last job on its connection was on its row and quick, and
 * no job here was slow lately (so slow ones take at most a tenth of this
 * thread's time). A request arriving meanwhile waits for it. */
static int may_inline(const struct req *r)
{
    return r->c && r->c->quick == r->route && !(r->route->flags & ROUTE_ADMIN) &&
           atomic_load(&r->srv->active) == 1 && r->len <= JOB_INLINE_BODY_BYTES &&
           route_now() >= r->srv->no_inline_until;
}

/* ---------------------------------------------------------------------- */
/* The access handler                                                      */

/* first_checks: the path names nothing, and the method is not the row's:
 * its handler answers (404) at once. */
#define NOWHERE (-2)

/* First call: the checks that need only the headers, as r's row asks.
 * Returns an error to send now, NOWHERE, or -1 when the request may go on
 * (r->preflight: answer it 204). */
static int first_checks(struct req *r, char *msg, size_t msglen)
{
    struct http_server *s = r->srv;
    const struct route *row = r->route;
    if (!row->methods) { /* no endpoint here: the row's check says why */
        const int e = row->check ? row->check(&r->view, msg, msglen) : -1;
        if (e >= 0)
            return e;
        snprintf(msg, msglen, "no endpoint at %.120s", r->path);
        return ERR_NOT_FOUND;
    }
    const int exists = !row->exists || row->exists(r->view.path);
    if (!exists)
        r->metric = NULL;
    if (strcmp(r->method, "OPTIONS") == 0 && cors_enabled(s->opt.cors_allow_origin) &&
        req_has_cors(r) && exists) {
        r->preflight = 1;
        return -1;
    }
    const int is_get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    const int is_post = strcmp(r->method, "POST") == 0;
    if (!((row->methods & ROUTE_GET) && is_get) && !((row->methods & ROUTE_POST) && is_post)) {
        if (!exists)
            return NOWHERE;
        snprintf(msg, msglen, "%s is not allowed on %.100s; use %s", r->method, r->path,
                 row->methods & ROUTE_GET ? "GET" : "POST");
        return ERR_METHOD_NOT_ALLOWED;
    }
    int e;
    if ((row->flags & ROUTE_ADMIN) && (e = request_check_token(r, msg, msglen)) >= 0)
        return e;
    if ((e = request_check_once(r, msg, msglen)) >= 0)
        return e;
    if (row->check && (e = row->check(&r->view, msg, msglen)) >= 0)
        return e;
    if (!req_is_job(r))
        return -1;
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    r->content_length = cl ? strtoull(cl, NULL, 10) : 0;
    if (r->content_length > (unsigned long long)s->opt.max_body_bytes) {
        snprintf(msg, msglen, "the body is %.30s bytes; the limit is %lld (max_body_bytes)",
                 cl, s->opt.max_body_bytes);
        return ERR_PAYLOAD_TOO_LARGE;
    }
    /* while draining, a request on a connection already open is still
     * answered (with Connection: close, response.c): one arriving on a
     * kept-alive connection was sent before the client could know */
    return -1;
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
        r->srv = s, r->conn = conn;
        r->c = conn_of(conn);
        r->fd = r->c ? r->c->fd : -1;
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        request_id_make(r);
        r->view = (struct route_request){.method = r->method, .path = url,
                                         .request_id = r->request_id, .t_first = route_now(),
                                         .header = header_of, .client_gone = gone_of,
                                         .release_body = release_body_cb, .transport = r};
        r->route = route_find(s->table, url, &r->view);
        if (!r->route) /* (http_start made sure the last row takes every path) */
            r->route = &s->table->rows[s->table->count - 1];
        r->view.route = r->route;
        r->metric = r->route->metric;
        if (r->c) { /* for an answer the watchdog writes (conn.c) */
            pthread_mutex_lock(&s->lock);
            r->c->error = r->route->error;
            snprintf(r->c->request_id, sizeof r->c->request_id, "%s", r->request_id);
            pthread_mutex_unlock(&s->lock);
        }
        atomic_fetch_add(&s->active, 1);
        *con_cls = r;
        conn_phase_set(s, r->c, PH_BODY);
        if (r->c && r->c->refused)
            return response_error(r, ERR_OVERLOADED, "max_connections are open and none is "
                                                     "idle; retry later");
        struct failure fe;
        if (framing_check(conn, method, url, version, &fe) != 0) {
            r->metric = NULL; /* queued before the body: MHD closes after it */
            return response_error(r, fe.code, fe.msg);
        }
        int e = first_checks(r, msg, sizeof msg);
        if (e >= 0)
            return response_error(r, e, msg);
        if (e == NOWHERE) {
            run_handler(r);
            return response_send(r);
        }
        if ((e = body_begin(r, msg, sizeof msg)) >= 0)
            return response_error(r, e, msg);
        return MHD_YES;
    }
    if (r->sent_status || conn_is_cut(s, r->c)) {
        /* answered early, or cut by the watchdog: drop what still comes */
        if (*upload_data_size) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return r->sent_status ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) { /* 2. body pieces */
        int rc = r->preflight ? 0 : body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        conn_progress(s, r->c, r->len);
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->preflight) /* 3. final call (answered now, so the connection stays open) */
        return response_preflight(r);
    if (!req_is_job(r)) {
        conn_phase_set(s, r->c, PH_OTHER);
        run_handler(r);
        return response_send(r);
    }
    if (!r->done && !r->submitted)
        body_end(r);
    if (r->body_error)
        return response_error(r, r->body_error, r->body_msg);
    if (r->too_large) {
        snprintf(msg, sizeof msg, "the body exceeds the limit of %lld bytes (max_body_bytes)",
                 s->opt.max_body_bytes);
        return response_error(r, ERR_PAYLOAD_TOO_LARGE, msg);
    }
    if (r->over_budget)
        return response_error(r, ERR_OVERLOADED, "the server holds max_inflight_bytes of "
                                                 "request bodies already; retry later");
    if (r->done) /* 4. resumed by the worker */
        return r->client_gone ? MHD_NO : response_send(r);
    if (r->submitted)
        return MHD_YES;
    if (responses_over_budget(s))
        return response_error(r, ERR_OVERLOADED, "answers not yet read by their clients hold "
                                                 "max_answer_bytes; retry later");
    /* 5. hand the body to a worker; the connection sleeps meanwhile
     * (or run it here: may_inline) */
    r->submitted = 1;
    r->view.t_body = route_now();
    conn_phase_set(s, r->c, PH_COMPUTE);
    if (may_inline(r)) {
        r->inline_job = 1;
        run_job(r);
        if (r->job_s >= JOB_INLINE_S)
            s->no_inline_until = route_now() + JOB_INLINE_BACKOFF * r->job_s;
        return r->client_gone ? MHD_NO : response_send(r);
    }
    MHD_suspend_connection(conn);
    int rc = pool_submit(s->pool, run_job, r);
    if (rc != POOL_OK) {
        r->route->error(&r->resp, rc == POOL_EFULL ? ERR_OVERLOADED : ERR_SHUTTING_DOWN,
                        rc == POOL_EFULL ? "every worker is busy and the queue is full; retry "
                                           "later"
                                         : "the server is shutting down");
        r->done = 1;
        r->job_s = JOB_INLINE_S; /* not run: no sign that the next is quick */
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
    double ms = (route_now() - r->view.t_first) * 1e3;
    /* 499: the client went away before its answer */
    int status = r->sent_status && !r->client_gone ? r->sent_status : 499;
    if (s->table->record)
        s->table->record(r->metric, status, ms / 1e3);
    if (s->opt.log_requests) { /* escaped: a path cannot forge a line */
        char method[4 * sizeof r->method], path[4 * sizeof r->path];
        fprintf(stderr, "%s %s %d %zu %.1fms id=%s%s\n",
                log_escape(method, sizeof method, r->method),
                log_escape(path, sizeof path, r->path), status, r->sent_bytes, ms,
                r->request_id,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
    body_free(r);
    route_response_free(&r->resp); /* what was never handed to MHD */
    atomic_fetch_sub(&s->answer_bytes, (long long)r->resp_charged);
    if (r->c) { /* kept alive: the next request's headers are due */
        if (r->submitted) /* (the next job's place: may_inline) */
            r->c->quick = r->job_s < JOB_INLINE_S ? r->route : NULL;
        pthread_mutex_lock(&s->lock);
        r->c->phase = PH_HEADERS;
        r->c->eof_seen = 0;
        r->c->kept_alive = 1;
        r->c->error = s->table->rows[s->table->count - 1].error;
        r->c->request_id[0] = '\0';
        r->c->responded = 0;
        r->c->t_phase = r->c->t_win = route_now();
        r->c->bytes = r->c->win_bytes = 0;
        pthread_mutex_unlock(&s->lock);
    }
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&s->active, 1);
}

/* ---------------------------------------------------------------------- */

/* The listening socket, bound here rather than by libmicrohttpd so that a
 * failure names its cause: libmicrohttpd 1.0.1 closes its socket twice
 * after a failed bind, and errno then says EBADF, not EADDRINUSE. The
 * options are libmicrohttpd's own defaults: SO_REUSEADDR, IPV6_V6ONLY off
 * for a dual-stack "::", a backlog of SOMAXCONN. Returns the socket, or -1
 * with errno set. */
static int listen_on(const struct sockaddr *sa, socklen_t len, int dual_stack)
{
    const int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    const int on = 1, v6only = !dual_stack;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (sa->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    if (bind(fd, sa, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

struct http_server *http_start(const struct http_options *c, const struct route_table *table,
                               struct pool *pool, int *setting, char *err, size_t errlen)
{
    *setting = 0;
    struct route_request any = {0};
    if (!table->count || !route_match(table->rows[table->count - 1].path, "", &any)) {
        snprintf(err, errlen, "the route table's last row must take every path (\"*\")");
        return NULL;
    }
    struct cors_lists lists;
    if (cors_lists_build(&lists, table, err, errlen) != 0)
        return NULL;
    struct http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cors = lists;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->opt = *c;
    s->table = table;
    s->pool = pool;
    /* IPv4, or IPv6 ("::" listens on both: dual stack) */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    struct sockaddr_in6 addr6 = {.sin6_family = AF_INET6,
                                 .sin6_port = htons((uint16_t)c->port)};
    struct sockaddr *sa = (struct sockaddr *)&addr;
    socklen_t sa_len = sizeof addr;
    unsigned int family_flags = 0;
    if (inet_pton(AF_INET, c->bind, &addr.sin_addr) != 1) {
        if (inet_pton(AF_INET6, c->bind, &addr6.sin6_addr) != 1) {
            snprintf(err, errlen, "bind: '%s' is not an IPv4 or IPv6 address", c->bind);
            *setting = 1;
            http_stop(s);
            return NULL;
        }
        sa = (struct sockaddr *)&addr6;
        sa_len = sizeof addr6;
        family_flags = IN6_IS_ADDR_UNSPECIFIED(&addr6.sin6_addr) ? MHD_USE_DUAL_STACK
                                                                 : MHD_USE_IPv6;
    }
    if (tls_pem_load(&s->tls, c->tls_cert_file, c->tls_key_file, err, errlen) != 0) {
        *setting = 1;
        http_stop(s);
        return NULL;
    }
    /* HTTPS when the PEM files are set (libmicrohttpd does TLS with GnuTLS) */
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls.cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key},
        {MHD_OPTION_END, 0, NULL},
    };
    const int fd = listen_on(sa, sa_len, family_flags == MHD_USE_DUAL_STACK);
    if (fd < 0) {
        snprintf(err, errlen, "could not listen on %s:%d: %s", c->bind, c->port, strerror(errno));
        http_stop(s);
        return NULL;
    }
    /* epoll, with the watchdog's end-of-stream check (watch_eof) for the
     * close that libmicrohttpd 0.9.75 misses in this mode. Its poll mode
     * sees that close, but also aborts a client that shuts down its
     * sending side after a complete request and waits for the answer. */
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | (s->tls.cert ? MHD_USE_TLS : 0) | family_flags,
        (uint16_t)c->port, NULL, NULL, on_request, s,
        MHD_OPTION_ARRAY, s->tls.cert ? tls_opts : tls_opts + 2,
        MHD_OPTION_LISTEN_SOCKET, fd, /* closed by libmicrohttpd, also on failure */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)c->conn_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)c->conn_memory_limit,
        /* a worker's stack: a job may run on this thread (may_inline) */
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)POOL_DEFAULT_STACK,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(c->max_connections + CONN_RESERVE),
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, conn_notify, s,
        MHD_OPTION_URI_LOG_CALLBACK, framing_uri_log, NULL,
        MHD_OPTION_CLIENT_DISCIPLINE_LVL, 1, /* strict within RFC 9112 (docs/operations.md) */
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "could not start libmicrohttpd on %s:%d (its message above)",
                 c->bind, c->port);
        http_stop(s);
        return NULL;
    }
    if (pthread_create(&s->watchdog, NULL, conn_watchdog, s) != 0) {
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

/* Connections the kernel had accepted into the listening socket's backlog
 * when it was taken from libmicrohttpd: handed to it, to be answered like
 * the others, rather than reset by the close (a client may already have
 * written its request into one). Returns how many were handed over. */
static int adopt_backlog(struct http_server *s, MHD_socket fd)
{
    int n = 0;
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t alen = sizeof addr;
        const int c = accept4(fd, (struct sockaddr *)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return n; /* EAGAIN: the backlog is empty */
        }
        if (MHD_add_connection(s->daemon, c, (struct sockaddr *)&addr, alen) == MHD_YES)
            n++; /* (on failure libmicrohttpd has closed c) */
    }
}

int http_drain(struct http_server *s, int timeout_s)
{
    atomic_store(&s->draining, 1);
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    int adopted = 0;
    if (fd != MHD_INVALID_SOCKET) {
        /* no longer polled by libmicrohttpd: new connections wait in the
         * backlog until taken here, or are refused once it is closed */
        const int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        adopted = adopt_backlog(s, fd);
        close(fd);
    }
    /* Until every connection has closed: requests arriving on them are
     * answered with Connection: close; idle kept-alive ones are left for
     * the client (or the idle timeouts) to close, since a request may be on
     * its way into one (a proxy's upstream keepalive_timeout below
     * header_timeout and conn_timeout makes the proxy close them first). */
    const double deadline = route_now() + timeout_s;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        const int pending = s->started_draining < adopted; /* not yet seen */
        pthread_mutex_unlock(&s->lock);
        if ((!pending && atomic_load(&s->open) == 0 && atomic_load(&s->active) == 0) ||
            route_now() >= deadline)
            break;
        usleep(10000);
    }
    int cut = 0;
    if (atomic_load(&s->open) > 0 || atomic_load(&s->active) > 0) {
        /* the deadline: the watchdog closes uploads (503) and idle
         * connections; requests being computed are answered, and answers
         * being sent finish at min_send_rate or better, however long that
         * takes (a second signal stops at once: main.c) */
        pthread_mutex_lock(&s->lock);
        s->t_cut_all = route_now();
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
