/* grpc.h -- the gRPC transport on gRPC's C core (Debian's libgrpc-dev):
 * the Open Inference Protocol's second transport, beside http/. It knows
 * no protocol message, model or core: bytes in, bytes and a status out,
 * through the table of grpc/grpc_route.h.
 *
 *     struct grpc_transport *g = grpc_start(&options, table, pool, &setting, err, sizeof err);
 *     ... grpc_port(g) ...
 *     grpc_drain(g, drain_timeout);   (SIGTERM: GOAWAY, calls in flight finish)
 *     grpc_stop(g);
 */
/* (not GRPC_GRPC_H: that is the guard of gRPC's own <grpc/grpc.h>) */
#ifndef ATTN_GRPC_GRPC_H
#define ATTN_GRPC_GRPC_H

#include <stddef.h>

#include "grpc/grpc_route.h"
#include "lib/pool.h"

struct grpc_transport;

struct grpc_options {
    const char *address;          /* IPv4 or IPv6 address to listen on */
    int port;                     /* 0: a free port (grpc_port) */
    int max_calls;                /* calls and streams open at once; more: RESOURCE_EXHAUSTED */
    long long max_message_bytes;  /* one request message (RESOURCE_EXHAUSTED) */
    long long max_inflight_bytes; /* request messages held at once (RESOURCE_EXHAUSTED) */
    int idle_timeout;             /* seconds a connection may be idle */
    const char *admin_token;      /* of GRPC_ROUTE_ADMIN rows; "": PERMISSION_DENIED */
    const char *tls_cert_file, *tls_key_file; /* PEM; "": plain HTTP/2 */
    int log_requests;             /* an access log line per call on stderr */
};

/* Listen and serve t with the handlers of GRPC_ROUTE_POOL rows on pool.
 * NULL on failure, err filled; *setting set when a setting is the cause
 * (the TLS files), else the system (the port in use). */
struct grpc_transport *grpc_start(const struct grpc_options *o, const struct grpc_route_table *t,
                               struct pool *pool, int *setting, char *err, size_t errlen);

/* The port it listens on. */
int grpc_port(const struct grpc_transport *s);

/* Stop taking calls at once (GOAWAY; state.draining set), without
 * waiting: SIGTERM starts both transports' drains together. */
void grpc_drain_begin(struct grpc_transport *s);

/* grpc_drain_begin() if not yet, then let the calls in flight finish for
 * up to timeout_s seconds, then cancel the rest. Returns how many were
 * cut. */
int grpc_drain(struct grpc_transport *s, int timeout_s);

/* Free everything (after grpc_drain, or instead of it). */
void grpc_stop(struct grpc_transport *s);

#endif
