/* conn.c -- connections: phases, deadlines, the watchdog; see conn.h.
 * Part of the HTTP front (http/http.c).
 */
#include "http/conn.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "http/route.h"
#include "lib/errors.h"

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

void conn_phase_set(struct http_server *s, struct conn *c, enum phase ph)
{
    if (!c)
        return;
    pthread_mutex_lock(&s->lock);
    c->phase = ph;
    c->eof_seen = 0;
    c->t_phase = c->t_win = route_now();
    c->bytes = c->win_bytes = 0;
    pthread_mutex_unlock(&s->lock);
}

void conn_progress(struct http_server *s, struct conn *c, unsigned long long bytes)
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
    if (e >= 0 && !c->responded && !s->tls.cert) {
        struct route_response er = {0}; /* in the style of the connection's row */
        c->error(&er, e, msg);
        const size_t len = er.body ? er.len : 0;
        char head[384], id[96] = "";
        if (c->request_id[0])
            snprintf(id, sizeof id, "X-Request-Id: %s\r\n", c->request_id);
        const int status = http_error_status(e);
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n%s%s\r\n",
                         status, status == 408 ? "Request Timeout" : "Service Unavailable",
                         er.content_type ? er.content_type : "application/json", len,
                         status == 503 ? "Retry-After: " RETRY_AFTER_S "\r\n" : "", id);
        /* a few hundred bytes into an empty send buffer: it never blocks */
        if (send(c->fd, head, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n && er.body)
            (void)!send(c->fd, er.body, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        route_response_free(&er);
        c->responded = 1;
        shutdown(c->fd, SHUT_WR);
        c->t_cut = route_now();
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

void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
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
        c->error = s->table->rows[s->table->count - 1].error;
        c->phase = PH_HEADERS;
        c->t_phase = c->t_win = route_now();
        pthread_mutex_lock(&s->lock);
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->live++;
        if (atomic_load(&s->draining))
            s->started_draining++; /* handed over from the backlog (http_drain) */
        if (s->live > s->opt.max_connections && make_room(s, c, c->t_phase) != 0)
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
    const struct http_options *cf = &s->opt;
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

void *conn_watchdog(void *arg)
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
        const double now = route_now();
        for (struct conn *c = s->conns; c && !s->stopping; c = c->next)
            watch_one(s, c, now);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int conn_is_cut(struct http_server *s, struct conn *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&s->lock);
    const int cut = c->cut;
    pthread_mutex_unlock(&s->lock);
    return cut;
}

/* The connection libmicrohttpd keeps our struct conn for (may be NULL). */
struct conn *conn_of(struct MHD_Connection *conn)
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
int conn_client_gone(int fd)
{
    char b;
    const ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}
