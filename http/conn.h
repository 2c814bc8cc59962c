/* conn.h -- connections: phases, deadlines, the watchdog (http/conn.c).
 * Internal to the HTTP front (http/http.c).
 */
#ifndef HTTP_CONN_H
#define HTTP_CONN_H

#include "http/state.h"

/* c enters phase ph now: its deadlines and byte count start over (c NULL:
 * untracked, a no-op). */
void conn_phase_set(struct http_server *s, struct conn *c, enum phase ph);

/* c has moved bytes in its phase so far (c NULL: a no-op). */
void conn_progress(struct http_server *s, struct conn *c, unsigned long long bytes);

/* MHD_OPTION_NOTIFY_CONNECTION (cls: the server): track a connection on
 * s->conns from accept to close, refusing it past max_connections. */
void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe);

/* The watchdog thread (arg: the server), until s->stopping. */
void *conn_watchdog(void *arg);

/* Whether the watchdog has cut c (c NULL: no). */
int conn_is_cut(struct http_server *s, struct conn *c);

/* The connection libmicrohttpd keeps our struct conn for (may be NULL). */
struct conn *conn_of(struct MHD_Connection *conn);

/* Whether the client of a connection waiting for its answer has gone. */
int conn_client_gone(int fd);

#endif
