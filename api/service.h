/* service.h -- the job of POST /attention and of v2's infer, without HTTP:
 * decode the body (codec), compute (core; a step of a sequence on its
 * cache, api/sequence.h), encode the answer (codec), time the stages and
 * count them in the metrics.
 *
 * The HTTP layer receives the body, calls service_attention() or
 * service_infer() on a worker (it blocks for the whole computation) and
 * sends the answer it gets back; the gRPC methods (api/grpc_routes.c)
 * call service_infer_run(), the same path without HTTP's answer.
 * Nothing here knows libmicrohttpd, so tests call it directly.
 *
 *     struct route_response a;
 *     service_attention(&limits, body, len, &times, NULL, NULL, &a);
 *     ... send a.status, its Server-Timing header and the body (buffer or
 *     generator: http/route.h) ...
 *     route_response_free(&a);
 */
#ifndef API_SERVICE_H
#define API_SERVICE_H

#include <stddef.h>

#include "api/metrics.h"
#include "config/config.h"
#include "codec/codec.h"
#include "codec/stream.h"
#include "http/route.h"
#include "lib/errors.h"

/* When the request's first byte and its last body byte arrived
 * (CLOCK_MONOTONIC seconds, service_now()). */
struct service_times {
    double first_byte, body_done;
    const char *sequence_id; /* the X-Sequence-Id header (docs/sequences.md), or NULL */
    /* A call that may end early (gRPC; HTTP: NULL and 0): once *cancelled
     * turns nonzero or the deadline (service_now() seconds; 0: none) has
     * passed, the request is not decoded or computed further, and a
     * computation running stops (att_cancel_set): request_timeout. */
    const volatile int *cancelled;
    double deadline;
};

double service_now(void);

/* The request limits a configuration sets. */
struct codec_limits service_limits(const struct cfg *c);

/* Answer one POST /attention body. Always fills a: 200 with the result,
 * or a 4xx/5xx with a JSON error body. release(cls), when given, is called
 * as soon as the body is no longer needed (after decoding, before the
 * computation), so the caller can give its memory back early. */
void service_attention(const struct codec_limits *lim, const char *body, size_t len,
                       const struct service_times *t, void (*release)(void *), void *cls,
                       struct route_response *a);

/* Answer one POST /v2/models/{model}[/versions/{version}]/infer body
 * (version NULL when the URL has none). header_len: the request's
 * Inference-Header-Content-Length, or -1 (codec/v2.h). The same
 * contract as service_attention(); errors are {"error": msg}, a binary
 * answer sets content_type and header_len. Counts the model's statistics. */
void service_infer(const struct codec_limits *lim, const char *model, const char *version,
                   const char *body, size_t len, long long header_len,
                   const struct service_times *t, void (*release)(void *), void *cls,
                   struct route_response *a);

/* What service_infer_run() made of a v2 infer body. */
struct service_result {
    struct stream *st; /* success: v2's 200 answer (codec/stream.h), the caller's to free */
    /* success: called once the answer is sent or given up (a sequence's
     * step held until then), or NULL */
    void (*done)(void *cls);
    void *done_cls;
    struct failure e;              /* failure: the error (enum http_error) and its message */
    double stages[STAGE_COUNT];    /* seconds of each stage (Server-Timing) */
};

/* service_infer() without HTTP's answer, for both protocols: 0 with
 * res->st, or -1 with res->e. Counts the stage metrics and the model's
 * statistics as service_infer() does. */
int service_infer_run(const struct codec_limits *lim, const char *model, const char *version,
                      const char *body, size_t len, long long header_len,
                      const struct service_times *t, void (*release)(void *), void *cls,
                      struct service_result *res);

/* An error answer (code: enum http_error; msg NULL for the default): the
 * error style of /attention (a struct route's error column). */
void service_error(struct route_response *a, int code, const char *msg);
/* The same as the Open Inference Protocol writes it: {"error": msg}. */
void service_v2_error(struct route_response *a, int code, const char *msg);

#endif
