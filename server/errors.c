#include "server/errors.h"

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
