/* json_small.c -- a plain JSON text read straight into jansson's values;
 * see codec/json_small.h. Anything out of the plain form gives NULL: the
 * caller's jansson reads it as before. */
#include "codec/json_small.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_MAX_DEPTH 32

struct rd {
    const char *s;
    size_t n, i;
    int depth;
};

static void skip_ws(struct rd *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
                           r->s[r->i] == '\r'))
        r->i++;
}

static int at(const struct rd *r, char c)
{
    return r->i < r->n && r->s[r->i] == c;
}

static int digit_at(const struct rd *r, size_t j)
{
    return j < r->n && r->s[j] >= '0' && r->s[j] <= '9';
}

/* A string of printable ASCII without '"' escapes: its bytes and length. */
static int plain_string(struct rd *r, const char **p, size_t *len)
{
    if (!at(r, '"'))
        return -1;
    size_t j = ++r->i;
    while (j < r->n && r->s[j] != '"') {
        const unsigned char c = (unsigned char)r->s[j];
        if (c < 0x20 || c > 0x7e || c == '\\')
            return -1;
        j++;
    }
    if (j >= r->n)
        return -1;
    *p = r->s + r->i, *len = j - r->i;
    r->i = j + 1;
    return 0;
}

/* A number as jansson's grammar has it: an integer when it has no
 * fraction and no exponent (NULL when it overflows), else a real (NULL
 * when it overflows). */
static json_t *number(struct rd *r)
{
    size_t j = r->i;
    int real = 0;
    if (j < r->n && r->s[j] == '-')
        j++;
    if (!digit_at(r, j))
        return NULL;
    if (r->s[j] == '0')
        j++;
    else
        while (digit_at(r, j))
            j++;
    if (j < r->n && r->s[j] == '.') {
        real = 1;
        if (!digit_at(r, ++j))
            return NULL;
        while (digit_at(r, j))
            j++;
    }
    if (j < r->n && (r->s[j] == 'e' || r->s[j] == 'E')) {
        real = 1;
        j++;
        if (j < r->n && (r->s[j] == '+' || r->s[j] == '-'))
            j++;
        if (!digit_at(r, j))
            return NULL;
        while (digit_at(r, j))
            j++;
    }
    char buf[64];
    if (j - r->i >= sizeof buf)
        return NULL;
    memcpy(buf, r->s + r->i, j - r->i);
    buf[j - r->i] = '\0';
    r->i = j;
    errno = 0;
    if (!real) {
        const long long v = strtoll(buf, NULL, 10);
        return errno == ERANGE ? NULL : json_integer(v);
    }
    const double d = strtod(buf, NULL);
    return (d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE ? NULL : json_real(d);
}

static json_t *value(struct rd *r);

/* After a member: 1 a ',' (another follows), 0 the close, -1 else. */
static int after_member(struct rd *r, char close)
{
    skip_ws(r);
    if (!at(r, ',') && !at(r, close))
        return -1;
    return r->s[r->i++] == ',';
}

static json_t *object(struct rd *r)
{
    json_t *o = json_object();
    r->i++;
    skip_ws(r);
    if (o && at(r, '}')) {
        r->i++;
        return o;
    }
    while (o) {
        const char *k;
        size_t len;
        skip_ws(r);
        if (plain_string(r, &k, &len))
            break;
        skip_ws(r);
        if (!at(r, ':'))
            break;
        r->i++;
        json_t *v = value(r);
        if (!v)
            break;
        if (json_object_getn(o, k, len)) {
            json_decref(v); /* a key twice: jansson's to refuse */
            break;
        }
        if (json_object_setn_new_nocheck(o, k, len, v)) /* takes v, even when it fails */
            break;
        const int more = after_member(r, '}');
        if (more <= 0)
            return more ? (json_decref(o), NULL) : o;
    }
    json_decref(o);
    return NULL;
}

static json_t *array(struct rd *r)
{
    json_t *a = json_array();
    r->i++;
    skip_ws(r);
    if (a && at(r, ']')) {
        r->i++;
        return a;
    }
    while (a) {
        json_t *v = value(r);
        if (!v || json_array_append_new(a, v))
            break;
        const int more = after_member(r, ']');
        if (more <= 0)
            return more ? (json_decref(a), NULL) : a;
    }
    json_decref(a);
    return NULL;
}

/* A literal word w: jansson reads a run of letters as one token. */
static int word(struct rd *r, const char *w)
{
    const size_t k = strlen(w);
    if (r->n - r->i < k || memcmp(r->s + r->i, w, k))
        return 0;
    r->i += k;
    return 1;
}

static json_t *value(struct rd *r)
{
    skip_ws(r);
    if (r->i >= r->n)
        return NULL;
    const char c = r->s[r->i];
    if (c == '{' || c == '[') {
        if (r->depth >= SMALL_MAX_DEPTH)
            return NULL;
        r->depth++;
        json_t *v = c == '{' ? object(r) : array(r);
        r->depth--;
        return v;
    }
    if (c == '"') {
        const char *p;
        size_t len;
        return plain_string(r, &p, &len) ? NULL : json_stringn_nocheck(p, len);
    }
    if (word(r, "true"))
        return json_true();
    if (word(r, "false"))
        return json_false();
    if (word(r, "null"))
        return json_null();
    return number(r);
}

json_t *json_small_load(const char *s, size_t n)
{
    struct rd r = {s, n, 0, 0};
    skip_ws(&r);
    if (!at(&r, '{') && !at(&r, '['))
        return NULL;
    json_t *v = value(&r);
    skip_ws(&r);
    if (v && r.i != n) {
        json_decref(v);
        v = NULL;
    }
    return v;
}
