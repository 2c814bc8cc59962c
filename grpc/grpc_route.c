/* grpc_route.c -- the helpers of struct grpc_route_response and the codes'
 * names; see grpc_route.h. No gRPC here: the api layer and the tests link
 * it alone. */
#include "grpc/grpc_route.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double grpc_route_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *grpc_route_code_name(int code)
{
    static const char *const names[] = {
        "OK",                 "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",  "NOT_FOUND",         "ALREADY_EXISTS", "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",      "OUT_OF_RANGE",
        "UNIMPLEMENTED",      "INTERNAL",          "UNAVAILABLE",    "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0])
        return "UNKNOWN";
    return names[code];
}

void grpc_route_fail(struct grpc_route_response *out, int code, const char *fmt, ...)
{
    grpc_route_response_free(out);
    out->code = code;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *m = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (m) /* (out of memory: the status goes without its text) */
        vsnprintf(m, (size_t)n + 1, fmt, again);
    va_end(again);
    out->message = m;
}

void grpc_route_response_free(struct grpc_route_response *out)
{
    free(out->message);
    free(out->body);
    if (out->free_tails)
        out->free_tails(out->tails_cls);
    memset(out, 0, sizeof *out);
}
