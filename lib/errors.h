/* errors.h -- the one table of the service's errors, and how a failure
 * travels to it.
 *
 * Every non-2xx answer carries {"error": {"code": <slug>, "message": ...}}.
 * HTTP_ERRORS lists, once, each error's enum name, HTTP status, slug and a
 * default message; openapi.yaml lists the same slugs and a test
 * (tests/api/test_spec.c) checks that the two agree. A module that refuses
 * input fills a struct failure (an enum http_error and a message naming
 * the field); the HTTP layer turns it into the answer. The core's statuses
 * map onto the table in codec/ (http_error_from_att, codec/status.h). */
#ifndef LIB_ERRORS_H
#define LIB_ERRORS_H

#include <stddef.h>

#define HTTP_ERRORS(X)                                                                   \
    X(ERR_INVALID_JSON, 400, "invalid_json", "the request body is not valid JSON")        \
    X(ERR_INVALID_TENSOR, 400, "invalid_tensor", "a tensor is malformed")                \
    X(ERR_SHAPE_MISMATCH, 400, "shape_mismatch", "tensor shapes do not agree")            \
    X(ERR_INVALID_PARAMETER, 400, "invalid_parameter", "a parameter is invalid")          \
    X(ERR_BAD_REQUEST, 400, "bad_request", "the request line or headers are malformed")   \
    X(ERR_SEQUENCE_NOT_FOUND, 400, "sequence_not_found",                                 \
      "no such sequence: start it again with sequence_start")                              \
    X(ERR_NOT_FOUND, 404, "not_found", "no such endpoint or model")                       \
    X(ERR_UNAUTHORIZED, 401, "unauthorized", "a bearer token is required")                \
    X(ERR_FORBIDDEN, 403, "forbidden", "not allowed")                                     \
    X(ERR_METHOD_NOT_ALLOWED, 405, "method_not_allowed", "method not allowed here")       \
    X(ERR_REQUEST_TIMEOUT, 408, "request_timeout", "the request did not arrive in time")  \
    X(ERR_PAYLOAD_TOO_LARGE, 413, "payload_too_large", "the request exceeds a limit")     \
    X(ERR_UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type",                          \
      "Content-Type must be application/json")                                            \
    X(ERR_NOT_IMPLEMENTED, 501, "not_implemented", "this transfer coding is not supported") \
    X(ERR_MODEL_NOT_READY, 503, "model_not_ready", "the model is not ready")              \
    X(ERR_OVERLOADED, 503, "overloaded", "the server is busy; retry later")               \
    X(ERR_SHUTTING_DOWN, 503, "shutting_down", "the server is shutting down")             \
    X(ERR_INTERNAL, 500, "internal", "internal error")

enum http_error {
#define X(name, status, slug, msg) name,
    HTTP_ERRORS(X)
#undef X
    ERR_COUNT
};

/* HTTP status, slug and default message of an error. */
int http_error_status(enum http_error e);
const char *http_error_slug(enum http_error e);
const char *http_error_message(enum http_error e);

/* A refusal: which error, and a message naming the field at fault. */
struct failure {
    int code;      /* enum http_error */
    char msg[240];
};

/* Fill err (printf-style message); returns -1, for `return fail_with(...)`. */
int fail_with(struct failure *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
