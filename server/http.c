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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/errors.h"
#include "server/framing.h"
#include "server/metrics.h"
#include "server/service.h"

/* openapi.yaml, linked into the binary (server/embed.S). */
extern const char openapi_yaml[], openapi_yaml_end[];

/* Simultaneous connections; beyond this libmicrohttpd refuses new ones. */
#define MAX_CONNECTIONS 1024
#define RETRY_AFTER_S "1"
/* Largest static file served; the web client's files are far smaller. */
#define STATIC_MAX_BYTES (16 << 20)

struct http_server {
    struct cfg cfg;
    struct codec_limits limits;
    struct pool *pool;
    struct MHD_Daemon *daemon;
    int port;
    atomic_int draining;
    atomic_int active; /* requests between first call and completion */
    atomic_llong inflight_bytes; /* body bytes held by all requests */
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
    /* job, written by the worker before it resumes the connection */
    int submitted, done;
    struct service_answer ans;
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

/* Headers every answer may need, then queue resp (len bytes) with status. */
static enum MHD_Result send_response(struct req *r, int status, struct MHD_Response *resp,
                                     size_t len, const char *ctype)
{
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                r->ep == EP_ATTENTION ? "POST" : "GET, HEAD");
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
    if (r->ans.timing[0])
        MHD_add_response_header(resp, "Server-Timing", r->ans.timing);
    if (status >= 400 && r->ep == EP_ATTENTION && !r->done)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
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

/* MHD pulls an answer that has a reader (a base64 answer, encoded as it is
 * sent) 64 KiB at a time, on the network thread: base64 encoding only
 * (about 4 GB/s), no parsing. cls is the struct service_answer, moved. */
static ssize_t read_answer(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct service_answer *a = cls;
    size_t n = a->read(a->reader, (size_t)pos, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void free_answer(void *cls)
{
    service_answer_free(cls);
    free(cls);
}

static enum MHD_Result send_error(struct req *r, enum http_error e, const char *msg)
{
    size_t len = 0;
    char *body = api_error_body(e, msg, &len);
    if (!body)
        return MHD_NO;
    return send_owned(r, http_error_status(e), body, len, "application/json");
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

static void run_job(void *arg)
{
    struct req *r = arg;
    const struct service_times t = {r->t0, r->t_body};
    service_attention(&r->srv->limits, r->body, r->len, &t, release_body_cb, r, &r->ans);
    r->done = 1;
    MHD_resume_connection(r->conn);
}

/* The worker's answer, queued on the network thread. */
static enum MHD_Result send_answer(struct req *r)
{
    struct service_answer *a = &r->ans;
    if (a->body) {
        char *body = a->body;
        a->body = NULL;
        return send_owned(r, a->status, body, a->len, "application/json");
    }
    if (!a->reader)
        return send_error(r, ERR_INTERNAL, "out of memory encoding the response");
    struct service_answer *moved = malloc(sizeof *moved);
    struct MHD_Response *resp = NULL;
    if (moved) {
        *moved = *a;
        resp = MHD_create_response_from_callback(a->len, 64 * 1024, read_answer, moved,
                                                 free_answer);
    }
    if (!resp) {
        free(moved);
        return send_error(r, ERR_INTERNAL, "out of memory sending the response");
    }
    a->reader = NULL; /* the response owns it now */
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
                                         atomic_load(&s->inflight_bytes)};
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

/* First call: checks that need only the headers. Returns an error to send
 * now, or -1 when the request may go on. */
static int early_check(struct req *r, const char *url, char *msg, size_t msglen)
{
    struct http_server *s = r->srv;
    int is_get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (r->ep != EP_ATTENTION) {
        if (is_get)
            return -1;
        /* 405 is for a path that exists with another method */
        const char *type;
        struct stat st;
        int fd = r->ep == EP_STATIC ? open_static(r, url, &type, &st) : -2;
        if (fd >= 0)
            close(fd);
        if (fd == -1) {
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
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        r->ep = route(url);
        atomic_fetch_add(&s->active, 1);
        *con_cls = r;
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
    if (r->sent_status) { /* answered early: drop whatever body still comes */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) { /* 2. body pieces */
        int rc = append_body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->ep != EP_ATTENTION) /* 3. final call */
        return serve_get(r, url);
    if (r->too_large) {
        snprintf(msg, sizeof msg, "the body exceeds the limit of %lld bytes (max_body_bytes)",
                 s->cfg.max_body_bytes);
        return send_error(r, ERR_PAYLOAD_TOO_LARGE, msg);
    }
    if (r->over_budget)
        return send_error(r, ERR_OVERLOADED, "the server holds max_inflight_bytes of request "
                                             "bodies already; retry later");
    if (r->done) /* 4. resumed by the worker */
        return send_answer(r);
    if (r->submitted)
        return MHD_YES;
    /* 5. hand the body to a worker; the connection sleeps meanwhile */
    r->submitted = 1;
    r->t_body = service_now();
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
    int status = r->sent_status ? r->sent_status : 499; /* 499: client went away */
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
    s->cfg = *c;
    s->pool = pool;
    s->limits = service_limits(c);
    char msg[512];
    int sd = cfg_check_static_dir(c->static_dir, msg, sizeof msg);
    if (sd < 0) {
        snprintf(err, errlen, "%s", msg);
        free(s);
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
            free(s);
            return NULL;
        }
        sa = (struct sockaddr *)&addr6;
        family_flags = IN6_IS_ADDR_UNSPECIFIED(&addr6.sin6_addr) ? MHD_USE_DUAL_STACK
                                                                 : MHD_USE_IPv6;
    }
    s->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | family_flags,
        (uint16_t)c->port, NULL, NULL, on_request, s,
        MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)c->conn_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)c->conn_memory_limit,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_URI_LOG_CALLBACK, framing_uri_log, NULL,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "could not listen on %s:%d: %s", c->bind, c->port,
                 errno ? strerror(errno) : "libmicrohttpd refused to start");
        free(s);
        return NULL;
    }
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
    double deadline = service_now() + timeout_s;
    while (atomic_load(&s->active) > 0 && service_now() < deadline)
        usleep(10000);
    return atomic_load(&s->active);
}

void http_stop(struct http_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon);
    free(s);
}
