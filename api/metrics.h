/* metrics.h -- counters for GET /metrics, in Prometheus text format.
 *
 * Lock-free (C11 atomics): any thread may record; metrics_write() reads a
 * consistent-enough snapshot for scraping. One process-wide instance. */
#ifndef API_METRICS_H
#define API_METRICS_H

#include <stddef.h>

/* The endpoint labels, at most this many: the route tables' metric
 * columns (api/routes.c, then api/grpc_routes.c, which uses HTTP's labels)
 * declare them at start-up, in their order. */
#define METRICS_ENDPOINTS 16
/* The label of requests that reached no endpoint. */
#define METRICS_OTHER "other"

/* Declare the label name (static storage), if new; every declared label is
 * written, counted or not. -1 when the labels are all taken. */
int metrics_endpoint_add(const char *name);

/* One finished request: its endpoint's label (NULL, or one not declared:
 * "other"), HTTP status and duration. Counted in the attention_http_*
 * families and in attention_requests_total{protocol="http"}. */
void metrics_record(const char *endpoint, int status, double seconds);

/* gRPC's status codes counted apart: 0 .. METRICS_GRPC_CODES - 1. */
#define METRICS_GRPC_CODES 17
/* One finished gRPC call or stream message: its endpoint's label (as
 * metrics_record), its status code and the code's name ("OK",
 * "INVALID_ARGUMENT": static storage), in attention_requests_total
 * {protocol="grpc",endpoint,status=name}. A code beyond the table counts
 * as UNKNOWN (2). */
void metrics_record_grpc(const char *endpoint, int code, const char *name, double seconds);

/* The stages of one POST /attention or v2 infer, in order: the upload, the wait for a
 * worker, then the job's three steps. */
enum metrics_stage {
    STAGE_RECEIVE, STAGE_QUEUE, STAGE_DECODE, STAGE_COMPUTE, STAGE_ENCODE, STAGE_COUNT
};

/* "receive", "queue", "decode", "compute", "encode". */
const char *metrics_stage_name(enum metrics_stage s);

/* Stage times of one POST /attention job, in seconds. */
void metrics_record_stages(const double seconds[STAGE_COUNT]);

/* The gauges the caller reads off the server at scrape time. */
struct metrics_gauges {
    int queue_depth, busy_workers, workers, draining;
    long long inflight_bytes; /* request bodies held (max_inflight_bytes) */
    long long answer_bytes;   /* answers computed, not yet sent (max_answer_bytes) */
    int connections_open;     /* TCP connections accepted and not yet closed */
};

/* Write everything, plus the given gauges and the registry's per-model
 * counters (model/repo.h), as a malloc'd text (caller frees). */
char *metrics_write(const struct metrics_gauges *g, size_t *len);

#endif
