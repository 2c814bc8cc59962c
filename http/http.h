/* http.h -- the HTTP front of the service, on libmicrohttpd.
 *
 * One internal polling thread (epoll) does the network work only: it frames
 * requests, enforces the body limit, routes, serves the small GET endpoints
 * and static files, and for POST /attention suspends the connection and
 * hands the body to the worker pool. A worker runs the job
 * (api/service.h: decode, compute, encode) and resumes the connection;
 * the polling thread then queues the answer. A full queue is answered 503
 * at once. A watchdog thread holds every connection to its deadlines
 * (header_timeout, body_timeout, min_upload_rate, min_send_rate) and to
 * max_connections; see http/conn.c.
 *
 *     struct http_server *s = http_start(&cfg, pool, &setting, err, sizeof err);
 *     ... wait for SIGTERM ...
 *     http_drain(s, 20);    readiness 503, stop accepting, answer the rest,
 *                           wait for the connections to close
 *     pool_close(pool);     run what is queued (those jobs resume connections)
 *     http_stop(s);         no more calls into the pool after this
 *     pool_free(pool);
 */
#ifndef SERVER_HTTP_H
#define SERVER_HTTP_H

#include <stddef.h>

#include "config/config.h"
#include "lib/pool.h"

struct http_server;

/* Start listening per c (borrowed: copied). pool is borrowed and must
 * outlive the server. Returns NULL with a message in err on failure, and
 * *setting 1 when a setting's value or what it names was refused
 * (static_dir, bind, the TLS pair), 0 when the system failed (the port in
 * use, out of memory). */
struct http_server *http_start(const struct cfg *c, struct pool *pool, int *setting, char *err,
                               size_t errlen);

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
