/* grpc_route.h -- what the gRPC transport serves: a table of methods, the
 * call a handler sees and the answer it fills. No gRPC type here, and
 * nothing of a protocol or a model: the api layer (api/grpc_routes.c)
 * writes the table, the transport (grpc/grpc.c) serves it, main.c hands
 * one to the other -- as http/route.h is for HTTP.
 *
 * One row per method:
 *
 *     {"/inference.GRPCInferenceService/ModelInfer", GRPC_ROUTE_POOL, "infer", model_infer}
 *
 * A path no row names is answered UNIMPLEMENTED by the transport.
 *
 *   flags   GRPC_ROUTE_POOL: the handler runs as a job on the worker pool
 *           (the one HTTP's jobs run on); else on the transport's own
 *           thread, for answers that take microseconds.
 *           GRPC_ROUTE_ADMIN: the metadata `authorization: Bearer
 *           <admin_token>` is needed: UNAUTHENTICATED when missing or
 *           wrong, PERMISSION_DENIED (the table's admin_off message) while
 *           no admin token is set; the handler does not run.
 *           GRPC_ROUTE_STREAM: a bidirectional stream: the handler runs once
 *           per request message, in order, one at a time (the next message
 *           is read only once the previous answer has been sent), and each
 *           answer it fills is one message of the stream. An answer with a
 *           code other than OK ends the stream with that status.
 *   metric  the label the row's calls are counted under.
 */
#ifndef GRPC_GRPC_ROUTE_H
#define GRPC_GRPC_ROUTE_H

#include <stddef.h>

enum grpc_route_flag {
    GRPC_ROUTE_POOL = 1,
    GRPC_ROUTE_ADMIN = 2,
    GRPC_ROUTE_STREAM = 4,
};

/* gRPC's status codes (the numbers of <grpc/status.h>, which api/ does not
 * include). */
enum grpc_route_code {
    GRPC_CODE_OK = 0,
    GRPC_CODE_CANCELLED = 1,
    GRPC_CODE_UNKNOWN = 2,
    GRPC_CODE_INVALID_ARGUMENT = 3,
    GRPC_CODE_DEADLINE_EXCEEDED = 4,
    GRPC_CODE_NOT_FOUND = 5,
    GRPC_CODE_PERMISSION_DENIED = 7,
    GRPC_CODE_RESOURCE_EXHAUSTED = 8,
    GRPC_CODE_FAILED_PRECONDITION = 9,
    GRPC_CODE_UNIMPLEMENTED = 12,
    GRPC_CODE_INTERNAL = 13,
    GRPC_CODE_UNAVAILABLE = 14,
    GRPC_CODE_UNAUTHENTICATED = 16,
};

/* "OK", "INVALID_ARGUMENT", ...: the code's name (metrics, the access log). */
const char *grpc_route_code_name(int code);

/* What the transport's state is when a handler runs. */
struct grpc_route_state {
    int draining;             /* shutting down: readiness is false */
    long long inflight_bytes; /* request messages held */
    int calls_open;           /* calls and streams not yet finished */
};

struct grpc_route;

/* One request message, as a handler sees it (borrowed: valid while it
 * runs). */
struct grpc_route_request {
    const struct grpc_route *route; /* its row */
    const unsigned char *msg;       /* the serialized request message */
    size_t len;
    const char *request_id;         /* x-request-id metadata, or made up */
    double t_first, t_msg;          /* grpc_route_now() at the call, at the message */
    double deadline;                /* grpc_route_now() seconds of the deadline; 0: none */
    /* nonzero once the call has ended early: the client cancelled or went
     * away, its deadline passed, or the drain cut it. A long handler
     * stops computing when it turns (the answer goes nowhere). */
    const volatile int *cancelled;
    struct grpc_route_state state;
    /* A metadata value (key in lower case, "x-sequence-id"), or NULL; the
     * first when there are several. */
    const char *(*metadata)(const struct grpc_route_request *rq, const char *key);
    void *transport;                /* the transport's own, for the above */
};

/* Bytes sent after the answer's body, without a copy (a large tensor's). */
struct grpc_route_tail {
    const void *data;
    size_t len;
};
#define GRPC_ROUTE_TAILS 16

/* What a handler fills. code OK: the answer message is body (len bytes)
 * followed by tail[0 .. ntail) (protobuf allows a message to be sent in
 * pieces: the tails are whole fields); else message is the status's text. */
struct grpc_route_response {
    int code;                      /* enum grpc_route_code */
    char *message;                 /* malloc'd, or NULL: the status text */
    unsigned char *body;           /* malloc'd, or NULL with len 0 */
    size_t len;
    struct grpc_route_tail tail[GRPC_ROUTE_TAILS];
    int ntail;
    /* called once when the tails are no longer needed (sent, or given up) */
    void (*free_tails)(void *cls);
    void *tails_cls;
};

typedef void (*grpc_route_handler)(const struct grpc_route_request *rq,
                                   struct grpc_route_response *out);

struct grpc_route {
    const char *path;   /* "/inference.GRPCInferenceService/ModelInfer" */
    unsigned flags;     /* enum grpc_route_flag */
    const char *metric; /* the label of its calls */
    grpc_route_handler handler;
};

/* The whole table (borrowed: must outlive the server). */
struct grpc_route_table {
    const struct grpc_route *rows;
    size_t count;
    /* The PERMISSION_DENIED message of a GRPC_ROUTE_ADMIN row while no
     * admin token is set. */
    const char *admin_off;
    /* Each finished call (or stream message): its row's metric (NULL: no
     * row), its status code and seconds. */
    void (*record)(const char *metric, int code, double seconds);
};

/* CLOCK_MONOTONIC seconds. */
double grpc_route_now(void);

/* out becomes an error: code and a printf-style message. */
void grpc_route_fail(struct grpc_route_response *out, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Free what out still owns (message, body, tails) and empty it. */
void grpc_route_response_free(struct grpc_route_response *out);

#endif
