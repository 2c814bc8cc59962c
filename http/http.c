/* http.c -- request lifecycle on libmicrohttpd; see http.h.
 *
 * The access handler, routing, the GET endpoints, the job hand-off and
 * http_start/drain/stop are here; the rest of the HTTP front is in
 *   conn.c         connections: phases, deadlines, the watchdog thread
 *   answer.c       queueing answers (errors, buffers, streamed answers)
 *   static.c       the web client's static files
 * and what they share (the server, a connection, a request) in
 * http_internal.h.
 *
 * Lifecycle of one request (as libmicrohttpd's largepost.c example):
 *   1st call       allocate struct req, route, check method, Content-Type and
 *                  Content-Length; an early error is queued right away.
 *   upload calls   append to the body up to max_body_bytes; past it, stop
 *                  storing and remember to answer 413.
 *   final call     POST /attention: suspend, submit to the pool (or answer
 *                  503); a worker runs the job (api/service.c: decode,
 *                  compute, encode) and resumes; the call after the resume
 *                  queues the answer. GETs are answered directly.
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
#include <sys/stat.h>
#include <unistd.h>

/* 1.0 rewrote the request parser (README.md, Malformed requests): 0.9.75
 * (Debian 12) answers a bad Content-Length twice. scripts/mhd.sh builds it. */
#if MHD_VERSION < 0x01000000
#error "libmicrohttpd >= 1.0 is needed: build with make (scripts/mhd.sh)"
#endif

#include "http/response.h"
#include "http/conn.h"
#include "http/cors.h"
#include "lib/errors.h"
#include "http/framing.h"
#include "http/http_internal.h"
#include "api/metrics.h"
#include "api/service.h"
#include "http/static.h"
#include "http/tls.h"
#include "model/repo.h"

/* openapi.yaml, linked into the binary (api/embed.S). */
extern const char openapi_yaml[], openapi_yaml_end[];

/* Connections libmicrohttpd accepts beyond max_connections. At its own
 * limit it stops polling the listening socket and new connections wait,
 * unanswered, in the kernel's backlog; below it, the watchdog makes room
 * or answers 503 (struct conn). */
#define CONN_RESERVE 64

/* ---------------------------------------------------------------------- */
/* The job: runs on a pool worker with a big stack.                        */

static void release_body_cb(void *r)
{
    body_release(r);
}

/* Whether the answers not yet sent have spent max_answer_bytes. */
static int answers_over_budget(const struct http_server *s)
{
    return atomic_load(&s->answer_bytes) >= s->cfg.max_answer_bytes;
}

/* r's answer is an error, in the form of its endpoint (/v2: {"error": msg}). */
static void job_error(struct req *r, int code, const char *msg)
{
    (r->v2 ? service_v2_error : service_error)(&r->ans, code, msg);
}

static void run_job(void *arg)
{
    struct req *r = arg;
    struct http_server *s = r->srv;
    const struct service_times t = {r->t0, r->t_body};
    if (r->fd >= 0 && client_gone(r->fd)) {
        /* nobody to answer: not computed (the access log says 499) */
        body_release(r);
        job_error(r, ERR_OVERLOADED, "the client has gone away");
        r->client_gone = 1;
    } else if (answers_over_budget(s)) {
        body_release(r);
        job_error(r, ERR_OVERLOADED, "answers not yet read by their clients hold "
                                     "max_answer_bytes; retry later");
    } else if (r->ep == EP_V2_INFER) {
        if (r->header_len > (long long)r->len) {
            char msg[160];
            snprintf(msg, sizeof msg, "Inference-Header-Content-Length is %lld but the body has "
                     "only %zu bytes", r->header_len, r->len);
            body_release(r);
            service_v2_error(&r->ans, ERR_BAD_REQUEST, msg);
        } else {
            service_infer(&s->limits, r->rt.model, r->rt.version[0] ? r->rt.version : NULL,
                          r->body, r->len, r->header_len, &t, release_body_cb, r, &r->ans);
        }
    } else if (r->ep == EP_V2_REPO) {
        v2_answer_repository(&r->rt, r->body, r->len, &r->ans);
        body_release(r);
    } else {
        service_attention(&s->limits, r->body, r->len, &t, release_body_cb, r, &r->ans);
    }
    r->ans_charged = r->ans.len;
    atomic_fetch_add(&s->answer_bytes, (long long)r->ans_charged);
    r->done = 1;
    MHD_resume_connection(r->conn);
}

/* ---------------------------------------------------------------------- */
/* Routing and GET endpoints                                               */

static enum metrics_endpoint route(const char *url)
{
    if (strncmp(url, "/v2", 3) == 0 && (url[3] == '\0' || url[3] == '/'))
        return EP_V2; /* refined by http_v2_route() */
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

static enum MHD_Result serve_get(struct req *r, const char *url)
{
    struct http_server *s = r->srv;
    switch (r->ep) {
    case EP_HEALTHZ:
        return send_copy(r, 200, "{\"status\":\"ok\"}", 15, "application/json");
    case EP_V2: {
        const struct v2_server_state st = {atomic_load(&s->draining)};
        v2_answer_get(&r->rt, &st, &r->ans);
        return send_answer(r);
    }
    case EP_READYZ:
        if (atomic_load(&s->draining))
            return send_error(r, ERR_SHUTTING_DOWN, "draining: not ready for new requests");
        if (!repo_loading_done())
            return send_error(r, ERR_MODEL_NOT_READY, "models are still loading");
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
        req_has_cors(r) && path_exists(r, url)) {
        r->preflight = 1;
        return -1;
    }
    if (r->v2 && r->ep != EP_OTHER) {
        int e = http_v2_early_check(r, msg, msglen);
        if (e >= 0 || !req_is_job(r))
            return e;
        goto body;
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
body:; /* like Triton, /v2 takes any Content-Type */
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    r->content_length = cl ? strtoull(cl, NULL, 10) : 0;
    if (r->content_length > (unsigned long long)s->cfg.max_body_bytes) {
        snprintf(msg, msglen, "the body is %.30s bytes; the limit is %lld (max_body_bytes)",
                 cl, s->cfg.max_body_bytes);
        return ERR_PAYLOAD_TOO_LARGE;
    }
    /* while draining, a request on a connection already open is still
     * answered (with Connection: close, answer.c): one arriving on a
     * kept-alive connection was sent before the client could know */
    return -1;
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
        r->v2 = r->ep == EP_V2;
        r->header_len = -1;
        http_request_id(r);
        if (r->c) { /* for an answer the watchdog writes (conn.c) */
            pthread_mutex_lock(&s->lock);
            r->c->v2 = r->v2;
            snprintf(r->c->request_id, sizeof r->c->request_id, "%s", r->request_id);
            pthread_mutex_unlock(&s->lock);
        }
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
        int e = r->ep == EP_V2 ? http_v2_route(r, url, msg, sizeof msg) : 0;
        if (e == 0)
            e = early_check(r, url, msg, sizeof msg);
        if (e >= 0)
            return send_error(r, e, msg);
        if ((e = body_begin(r, msg, sizeof msg)) >= 0)
            return send_error(r, e, msg);
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
        int rc = r->preflight ? 0 : body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        phase_progress(s, r->c, r->len);
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->preflight) /* 3. final call (answered now, so the connection stays open) */
        return send_preflight(r);
    if (!req_is_job(r)) {
        phase_set(s, r->c, PH_OTHER);
        return serve_get(r, url);
    }
    if (!r->done && !r->submitted)
        body_end(r);
    if (r->body_error)
        return send_error(r, r->body_error, r->body_msg);
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
        job_error(r, rc == POOL_EFULL ? ERR_OVERLOADED : ERR_SHUTTING_DOWN,
                  rc == POOL_EFULL ? "every worker is busy and the queue is full; retry later"
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
        fprintf(stderr, "%s %s %d %zu %.1fms id=%s%s\n",
                framing_log_escape(method, sizeof method, r->method),
                framing_log_escape(path, sizeof path, r->path), status, r->sent_bytes, ms,
                r->request_id,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
    body_free(r);
    service_answer_free(&r->ans); /* what was never handed to MHD */
    atomic_fetch_sub(&s->answer_bytes, (long long)r->ans_charged);
    if (r->c) { /* kept alive: the next request's headers are due */
        pthread_mutex_lock(&s->lock);
        r->c->phase = PH_HEADERS;
        r->c->eof_seen = 0;
        r->c->kept_alive = 1;
        r->c->v2 = 0;
        r->c->request_id[0] = '\0';
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

struct http_server *http_start(const struct cfg *c, struct pool *pool, int *setting, char *err,
                               size_t errlen)
{
    *setting = 0;
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
        *setting = 1;
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
            *setting = 1;
            http_stop(s);
            return NULL;
        }
        sa = (struct sockaddr *)&addr6;
        family_flags = IN6_IS_ADDR_UNSPECIFIED(&addr6.sin6_addr) ? MHD_USE_DUAL_STACK
                                                                 : MHD_USE_IPv6;
    }
    if (tls_pem_load(&s->tls, c, err, errlen) != 0) {
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
        MHD_OPTION_CLIENT_DISCIPLINE_LVL, 1, /* strict within RFC 9112 (README.md) */
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
    const double deadline = service_now() + timeout_s;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        const int pending = s->started_draining < adopted; /* not yet seen */
        pthread_mutex_unlock(&s->lock);
        if ((!pending && atomic_load(&s->open) == 0 && atomic_load(&s->active) == 0) ||
            service_now() >= deadline)
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
