/* errors.c -- the error table; see errors.h. */
#include "lib/errors.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/utf8.h"

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

int api_fail(struct api_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* o (taken) as compact JSON text, its length in *len; NULL when out of
 * memory. */
static char *dump(json_t *o, size_t *len)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s)
        *len = strlen(s);
    return s;
}

char *api_error_body(int code, const char *msg, size_t *len)
{
    char clean[4 * sizeof ((struct api_error *)0)->msg];
    utf8_clean(clean, sizeof clean, msg ? msg : http_error_message(code));
    return dump(json_pack("{s:{s:s,s:s}}", "error", "code", http_error_slug(code), "message",
                          clean), len);
}

char *api_v2_error_body(const char *msg, size_t *len)
{
    char clean[4 * sizeof ((struct api_error *)0)->msg];
    utf8_clean(clean, sizeof clean, msg);
    return dump(json_pack("{s:s}", "error", clean), len);
}
