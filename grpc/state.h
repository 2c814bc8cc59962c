/* state.h -- what grpc.c and call.c share: the server and one call (types
 * only). */
#ifndef GRPC_STATE_H
#define GRPC_STATE_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>

#include "grpc/grpc_route.h"
#include "grpc/grpc.h"
#include "lib/pool.h"
#include "lib/access_log.h"

/* request_call slots kept armed: calls arriving at once wait for one */
#define GRPC_ARMED 16

/* What a completion is: a tag points into a call (or the server's). */
enum gtag_kind { TAG_NEW, TAG_CLOSED, TAG_RECV, TAG_SEND, TAG_SHUTDOWN };

struct gtag {
    enum gtag_kind kind;
    struct gcall *call;
};

/* The server behind the handle of grpc.h. */
struct grpc_transport {
    struct grpc_options opt;
    const struct grpc_route_table *table;
    struct pool *pool;
    grpc_server *srv;
    grpc_completion_queue *cq;
    pthread_t thread;
    int thread_started, started, port;
    struct gtag shutdown_tag;
    atomic_int draining;      /* grpc_drain_begin has run */
    atomic_int shut;          /* the shutdown's tag is back */
    atomic_int cut;           /* the drain has cancelled the calls left */
    atomic_int armed;         /* request_call slots waiting for a call */
    atomic_int calls_open;    /* calls arrived and not yet freed */
    atomic_llong inflight_bytes;
    atomic_int jobs;          /* handlers submitted to the pool and not yet done */
    pthread_mutex_t lock;     /* drain_begin against the arming */
};

/* One call (or stream), from its request_call slot to its last tag. */
struct gcall {
    struct grpc_transport *s;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    struct gtag t_new, t_closed, t_recv, t_send;
    /* outstanding tags, plus one while a job holds the call */
    atomic_int refs;
    int cancelled;            /* RECV_CLOSE_ON_SERVER's (the handler reads it volatile) */
    int stream;               /* a GRPC_ROUTE_STREAM row */
    int initial_sent;         /* SEND_INITIAL_METADATA is done */
    int status_sent;          /* SEND_STATUS_FROM_SERVER is started */
    int send_ok;              /* the last send batch's success */
    int code;                 /* the status sent (or to record) */
    int to_record;            /* a stream message's answer to record at its send */
    double job_s;             /* seconds its last handler took (0: none yet) */
    const struct grpc_route *route;
    char path[256];
    char request_id[REQUEST_ID_BYTES]; /* lib/access_log.h */
    char *meta;               /* the metadata copied: key\0value\0 ... */
    size_t meta_len;
    grpc_byte_buffer *recv_bb;
    grpc_slice msg;           /* the request message, contiguous */
    int has_msg;
    long long charged;        /* inflight_bytes held for msg */
    size_t sent_bytes;
    grpc_byte_buffer *send_bb;
    grpc_slice status_text;
    int has_status_text;
    struct grpc_route_response resp;
    struct grpc_route_request view;
};

#endif
