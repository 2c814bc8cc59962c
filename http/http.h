/* http.h -- the HTTP transport of the service, on libmicrohttpd.
 *
 * The http/ layer (the rule: scripts/layers.sh) owns the transport: this
 * header, the route interface (route.h), connections and their deadlines
 * (conn.h), bodies, framing, TLS, CORS and compressed bodies. It includes
 * http/ and lib/ only: no protocol, model or core.
 *
 * It serves a route table (http/route.h) and knows nothing of the
 * protocols or models behind it. One internal polling thread (epoll) does
 * the network work only: it frames requests, matches them to their row,
 * runs the row's checks (method, admin token, CORS, one of each header
 * the row reads, the row's header checks, body limits), runs the handlers
 * of GET rows, and for a row that
 * reads a body suspends the connection and hands the request to the
 * worker pool. A worker runs the row's handler and resumes the connection;
 * the polling thread then queues the response. A full queue is answered
 * 503 at once. A watchdog thread holds every connection to its deadlines
 * (header_timeout, body_timeout, min_upload_rate, min_send_rate) and to
 * max_connections; see http/conn.c.
 *
 *     struct http_server *s = http_start(&options, table, pool, &setting, err, sizeof err);
 *     ... wait for SIGTERM ...
 *     http_drain(s, 20);    readiness 503, stop accepting, answer the rest,
 *                           wait for the connections to close
 *     pool_close(pool);     run what is queued (those jobs resume connections)
 *     http_stop(s);         no more calls into the pool after this
 *     pool_free(pool);
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <stddef.h>

#include "http/route.h"
#include "lib/pool.h"

struct http_server;

/* What the transport is told, by main.c from the settings (config/config.h
 * says what each means). */
struct http_options {
    const char *bind;            /* IPv4 or IPv6 address ("::": both) */
    int port;                    /* 0: a free port (http_port) */
    int conn_timeout;            /* seconds idle (libmicrohttpd's own) */
    long long conn_memory_limit; /* bytes per connection (libmicrohttpd's) */
    int max_connections;
    int header_timeout, body_timeout;        /* seconds */
    long long min_upload_rate, min_send_rate; /* bytes/s; 0: none */
    long long max_body_bytes;     /* one request's body (413) */
    long long max_inflight_bytes; /* every body held at once (503) */
    long long max_answer_bytes;   /* responses not yet sent, all together (503) */
    const char *cors_allow_origin; /* the CORS policy (http/cors.h) */
    const char *admin_token;       /* of ROUTE_ADMIN rows; "": they answer 403 */
    const char *tls_cert_file, *tls_key_file; /* PEM; "": plain HTTP (http/tls.h) */
    int log_requests;              /* an access log line per request on stderr */
};

/* Start listening per o (its strings borrowed: they must outlive the
 * server), serving table (borrowed, likewise). pool is borrowed and must
 * outlive the server. Returns NULL with a message in err on failure, and
 * *setting 1 when a setting's value or what it names was refused (bind,
 * the TLS pair), 0 when the system failed (the port in use, out of
 * memory) or the table is not one to serve (its last row, its header
 * lists: http/cors.h). */
struct http_server *http_start(const struct http_options *o, const struct route_table *table,
                               struct pool *pool, int *setting, char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
int http_port(const struct http_server *s);

/* Readiness goes to 503 and the listening socket closes (connections
 * already in its backlog are served). Requests on connections already open
 * are answered, with Connection: close; idle kept-alive connections are
 * left for their clients to close. Returns when no connection remains, or
 * at timeout_s seconds: then requests still uploading get 503
 * shutting_down and every connection is closed except those whose request
 * is being computed, which this waits for. Returns the number of requests
 * cut off at the deadline (0 when all were answered in time). */
int http_drain(struct http_server *s, int timeout_s);

/* Stop the daemon and free s. NULL is a no-op. */
void http_stop(struct http_server *s);

#endif
