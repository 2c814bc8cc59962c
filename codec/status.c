/* status.c -- errors as the protocols answer them; see codec/status.h. */
#include "codec/status.h"

#include <jansson.h>
#include <string.h>

#include "core/attention.h"
#include "lib/utf8.h"

enum http_error http_error_from_att(int att_status)
{
    switch (att_status) {
    case ATT_EPARAM:  return ERR_INVALID_PARAMETER;
    case ATT_ESHAPE:  return ERR_SHAPE_MISMATCH;
    case ATT_ETOOBIG: return ERR_PAYLOAD_TOO_LARGE;
    case ATT_ERANGE:  return ERR_INVALID_PARAMETER;
    case ATT_ECANCELLED: return ERR_REQUEST_TIMEOUT;
    default:          return ERR_INTERNAL;
    }
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

char *codec_error_body(int code, const char *msg, size_t *len)
{
    char clean[4 * sizeof ((struct failure *)0)->msg];
    utf8_clean(clean, sizeof clean, msg ? msg : http_error_message(code));
    return dump(json_pack("{s:{s:s,s:s}}", "error", "code", http_error_slug(code), "message",
                          clean), len);
}

char *v2_error_body(const char *msg, size_t *len)
{
    char clean[4 * sizeof ((struct failure *)0)->msg];
    utf8_clean(clean, sizeof clean, msg);
    return dump(json_pack("{s:s}", "error", clean), len);
}
