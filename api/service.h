/* service.h -- the job of POST /attention, without HTTP: decode the body
 * (codec), compute (core), encode the answer (codec), time the stages and
 * count them in the metrics.
 *
 * The HTTP layer receives the body, calls service_attention() on a worker
 * (it blocks for the whole computation) and sends the answer it gets back.
 * Nothing here knows libmicrohttpd, so tests call it directly.
 *
 *     struct service_answer a;
 *     service_attention(&limits, body, len, &times, NULL, NULL, &a);
 *     ... send a.status, a.timing and the body (buffer or reader) ...
 *     service_answer_free(&a);
 */
#ifndef SERVER_SERVICE_H
#define SERVER_SERVICE_H

#include <stddef.h>

#include "config/config.h"
#include "codec/codec.h"

/* An answer's body: either a buffer, or a reader the sender pulls from
 * (a base64 answer, encoded as it is sent). */
struct service_answer {
    int status;       /* HTTP status */
    char *body;       /* malloc'd, len bytes; or NULL with a reader */
    size_t len;       /* bytes of the body either way */
    /* reader: up to max bytes from offset pos into dst; 0 at the end */
    size_t (*read)(void *cls, size_t pos, char *dst, size_t max);
    void (*free_reader)(void *cls);
    void *reader;
    char timing[200]; /* Server-Timing header value, or "" */
    const char *content_type; /* NULL: application/json */
    size_t header_len;        /* a binary v2 answer: Inference-Header-Content-Length */
    int has_header_len;
};

/* When the request's first byte and its last body byte arrived
 * (CLOCK_MONOTONIC seconds, service_now()). */
struct service_times {
    double first_byte, body_done;
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
                       struct service_answer *a);

/* Answer one POST /v2/models/{model}[/versions/{version}]/infer body
 * (version NULL when the URL has none). header_len: the request's
 * Inference-Header-Content-Length, or -1 (codec/v2.h). The same
 * contract as service_attention(); errors are {"error": msg}, a binary
 * answer sets content_type and header_len. Counts the model's statistics. */
void service_infer(const struct codec_limits *lim, const char *model, const char *version,
                   const char *body, size_t len, long long header_len,
                   const struct service_times *t, void (*release)(void *), void *cls,
                   struct service_answer *a);

/* An error answer (code: enum http_error; msg NULL for the default). */
void service_error(struct service_answer *a, int code, const char *msg);
/* The same as the Open Inference Protocol writes it: {"error": msg}. */
void service_v2_error(struct service_answer *a, int code, const char *msg);

/* Free what a still owns (a sender that took the body or the reader sets
 * those fields to NULL first). */
void service_answer_free(struct service_answer *a);

#endif
