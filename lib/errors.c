/* errors.c -- the error table; see errors.h. */
#include "lib/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int status;
    const char *slug, *message;
} table[ERR_COUNT] = {
#define X(name, st, sl, msg) [name] = {st, sl, msg},
    HTTP_ERRORS(X)
#undef X
};

int http_error_status(enum http_error e)
{
    return (unsigned)e < ERR_COUNT ? table[e].status : 500;
}

const char *http_error_slug(enum http_error e)
{
    return (unsigned)e < ERR_COUNT ? table[e].slug : "internal";
}

const char *http_error_message(enum http_error e)
{
    return (unsigned)e < ERR_COUNT ? table[e].message : "internal error";
}

int fail_with(struct failure *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}
