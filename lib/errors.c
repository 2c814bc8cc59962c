/* errors.c -- the error table; see errors.h. */
#include "lib/errors.h"

#include <jansson.h>
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

int api_fail(struct api_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms,
 * no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

/* msg into dst (n bytes) as valid UTF-8: each byte that does not start a
 * valid sequence becomes U+FFFD. A message can quote what the client sent
 * (a URL, a header, a key) or be cut inside a character by api_fail, and
 * JSON text must be UTF-8. */
static void utf8_clean(char *dst, size_t n, const char *msg)
{
    const unsigned char *s = (const unsigned char *)msg;
    size_t o = 0;
    while (*s && o + 4 < n) {
        size_t k = utf8_seq(s);
        if (k) {
            memcpy(dst + o, s, k);
            o += k, s += k;
        } else {
            memcpy(dst + o, "\xef\xbf\xbd", 3);
            o += 3, s++;
        }
    }
    dst[o] = '\0';
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
