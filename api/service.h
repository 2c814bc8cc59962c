/* service.h -- the job of POST /attention and of v2's infer, without HTTP:
 * decode the body (codec), compute (core; a step of a sequence on its
 * cache, api/sequence.h), encode the answer (codec), time the stages and
 * count them in the metrics.
 *
 * The HTTP layer receives the body, calls service_attention() or
 * service_infer() on a worker (it blocks for the whole computation) and
 * sends the answer it gets back.
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

#include "config/config.h"
#include "codec/codec.h"
#include "http/route.h"

/* When the request's first byte and its last body byte arrived
 * (CLOCK_MONOTONIC seconds, service_now()). */
struct service_times {
    double first_byte, body_done;
    const char *sequence_id; /* the X-Sequence-Id header (docs/sequences.md), or NULL */
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

/* An error answer (code: enum http_error; msg NULL for the default): the
 * error style of /attention (a struct route's error column). */
void service_error(struct route_response *a, int code, const char *msg);
/* The same as the Open Inference Protocol writes it: {"error": msg}. */
void service_v2_error(struct route_response *a, int code, const char *msg);

#endif
