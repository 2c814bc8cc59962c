/* http_util.h -- what the HTTP tests share: the real attention-server
 * process on a free port ($ATTN_SERVER names the binary; each test starts
 * its own with --port 0 and reads the port from its log) and the libcurl
 * client (http_client.h), with Criterion's asserts where they fail. */
#ifndef TESTS_HTTP_UTIL_H
#define TESTS_HTTP_UTIL_H

#include <stddef.h>

#include "tests/support/http_client.h"

/* The service's CORS header lists, as the transport makes them from its
 * route table (HTTP's own headers, then what the rows of api/routes.c read
 * and send); tests/api/test_spec.c holds the docs to the same lists. */
#define SERVICE_CORS_ALLOW \
    "Content-Type, Content-Encoding, X-Request-Id, X-Sequence-Id, Inference-Header-Content-Length"
#define SERVICE_CORS_EXPOSE \
    "Retry-After, Allow, X-Request-Id, Accept-Encoding, Server-Timing, " \
    "Inference-Header-Content-Length"

/* A line in the test log that shows without --verbose and, unlike
 * cr_log_warn (which makes Criterion exit 1), does not fail the run. */
void loud(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Start the server with extra flags (NULL-terminated); wait for its port.
 * It runs without a model repository (--model-repository "" before the
 * extra flags, which may name one), so that the default, the models/
 * folder of the working directory, does not change what a test sees. */
void server_start(struct server *s, const char *const *extra);
/* The same with model_repository left at its default, as `make run`. */
void server_start_default(struct server *s, const char *const *extra);
/* Wait until /v2/health/ready answers 200 (the models of a repository
 * loaded). */
void server_wait_ready(struct server *s);
/* server_start(), then server_wait_ready(). */
void server_start_ready(struct server *s, const char *const *extra);
/* CLOCK_MONOTONIC seconds. */
double check_now(void);

/* The value of the first line of GET /metrics that starts with "name ". */
double server_metric(int port, const char *name);

/* Check an /attention error answer: status, slug, and optional message text. */
void expect_error(const struct http_reply *a, long status, const char *slug, const char *contains);
void server_still_serves(int port);
/* A raw TCP connection to the server at 127.0.0.1:port (malformed requests,
 * slow clients); rcvbuf > 0 shrinks its receive buffer (set before
 * connect, so the window stays small). */
int raw_connect(int port, int rcvbuf);
/* Whether an answer's headers hold the line "name: value". */
int has_header(const struct http_reply *a, const char *name, const char *value);
/* Run the server with "--port 0 --bind 127.0.0.1 args" (a shell command
 * line: later flags win) until it exits, within 10 s; what it printed into
 * out. Its exit status (128: killed). For start-ups that must fail. */
int server_startup_output(const char *args, char *out, size_t outlen);

#endif
