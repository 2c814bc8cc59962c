/* jsonnum.c -- fast numeric JSON: DOM-free array input and the stand-ins
 * for numbers jansson cannot hold; see jsonnum.h. The output side is in
 * jsonnum_format.c. */
#include "lib/jsonnum.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *jsonnum_status_str(int status)
{
    switch (status) {
    case JSONNUM_OK:         return "ok";
    case JSONNUM_ERR_SYNTAX: return "not valid JSON";
    case JSONNUM_ERR_TYPE:   return "not a number or an array";
    case JSONNUM_ERR_SHAPE:  return "ragged or empty array";
    case JSONNUM_ERR_DEPTH:  return "nested too deep";
    case JSONNUM_ERR_RANGE:  return "out of float32 range";
    case JSONNUM_ERR_LIMIT:  return "too many numbers";
    case JSONNUM_ERR_NOMEM:  return "out of memory";
    default:                 return "unknown status";
    }
}

/* ---------------------------------------------------------------------- */
/* Reading                                                                 */

struct parser {
    const char *s;
    size_t len;
    float *data;
    size_t count, cap, max_count;
    unsigned flags;
    struct jsonnum_error *err;
};

static int fail(struct parser *ps, int code, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct parser *ps, int code, size_t at, const char *fmt, ...)
{
    va_list ap;
    ps->err->code = code;
    ps->err->offset = at;
    va_start(ap, fmt);
    vsnprintf(ps->err->msg, sizeof ps->err->msg, fmt, ap);
    va_end(ap);
    return code;
}

static inline int is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

static inline size_t skip_space(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws(s[i]))
        i++;
    return i;
}

/* The error for a token that is neither a number nor an array. The
 * characters that can start another JSON value make it TYPE (valid JSON
 * perhaps, but not numbers); anything else is not JSON at all. */
static int bad_token(struct parser *ps, size_t at, const char *where)
{
    const char c = ps->s[at];
    if (c == '"' || c == '{' || c == 't' || c == 'f' || c == 'n')
        return fail(ps, JSONNUM_ERR_TYPE, at, "%s: %s, not a number",
                    where, c == '"' ? "a string" : c == '{' ? "an object" : "a literal");
    return fail(ps, JSONNUM_ERR_SYNTAX, at, "%s: unexpected character '%c'", where,
                (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f ? '?' : c);
}

static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static const uint64_t POW10_INT[16] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u,
    1000000000u, 10000000000u, 100000000000u, 1000000000000u, 10000000000000u,
    100000000000000u, 1000000000000000u,
};

#define TWO53 (1ull << 53)

/* One number token at *pos into *out, as (float)json_number_value would
 * give it; *pos moves past the token. The token must be followed by a
 * delimiter inside the text (whitespace, ',' or ']'): that makes strtod stop
 * where the JSON grammar stops, and turns "0x1", "01", "1.5.2" into syntax
 * errors before any conversion. A NUL also ends a token, as for jansson. */
static inline int parse_number(struct parser *ps, size_t *pos, float *out)
{
    const char *s = ps->s, *p = s + *pos, *end = s + ps->len;
    const size_t at = *pos;

    /* 1. Grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, gathering
     *    up to 19 significant digits into w and the decimal exponent. */
    int neg = 0, is_int = 1, many = 0, sd = 0, frac = 0;
    uint64_t w = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || !is_digit(*p))
        return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit after '-'");
    if (*p == '0') {
        p++;
    } else {
        do {
            if (sd < 19) {
                w = w * 10 + (uint64_t)(*p - '0');
                sd++;
            } else {
                many = 1;
            }
            p++;
        } while (p < end && is_digit(*p));
    }
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p == end || !is_digit(*p))
            return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit after '.'");
        do {
            if (sd < 19 && frac < 100000) {
                w = w * 10 + (uint64_t)(*p - '0');
                sd += w != 0; /* leading zeros of 0.000123 are not significant */
                frac++;
            } else {
                many = 1;
            }
            p++;
        } while (p < end && is_digit(*p));
    }
    int ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p == end || !is_digit(*p))
            return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit in the exponent");
        do {
            if (ex < 100000) /* saturate: 1e100000 and 1e999999 are both overflow */
                ex = ex * 10 + (*p - '0');
            p++;
        } while (p < end && is_digit(*p));
        if (eneg)
            ex = -ex;
    }
    if (p == end)
        return fail(ps, JSONNUM_ERR_SYNTAX, (size_t)(p - s), "unexpected end of text");
    if (!is_ws(*p) && *p != ',' && *p != ']' && *p != '\0')
        return fail(ps, JSONNUM_ERR_SYNTAX, (size_t)(p - s),
                    "invalid number: unexpected '%c' after it",
                    (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?' : *p);
    /* jansson drops one NUL byte right after a number: its lexer reads it
     * as lookahead, ungets it, and an unget NUL reads as "buffer empty".
     * Skip it too, so that SYNTAX keeps meaning "jansson rejects". */
    *pos = (size_t)(p - s) + (*p == '\0');

    /* 2. Convert. */
    if (is_int && !many && w <= (uint64_t)LLONG_MAX + (uint64_t)neg) {
        /* jansson: strtoll; the value as a double. Beyond long long, an
         * integer is read as a real (below), as jsonnum_standin() has it. */
        const long long v = !neg ? (long long)w
                            : w == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)w;
        *out = (float)(double)v; /* "-0" is the integer 0: +0 */
        return 0;
    }
    const int e10 = ex - frac;
    double d;
    if (!many && w <= TWO53 && e10 >= -22 && e10 <= 22) {
        /* Clinger: w and 10^|e10| are exact doubles, one rounding. */
        d = e10 < 0 ? (double)w / POW10[-e10] : (double)w * POW10[e10];
    } else if (!many && w == 0) {
        d = 0.0;
    } else if (!many && e10 > 22 && e10 <= 22 + 15 && w <= TWO53 / POW10_INT[e10 - 22]) {
        d = (double)(w * POW10_INT[e10 - 22]) * 1e22; /* still one rounding */
    } else {
        /* strtod stops at the delimiter checked above. */
        d = strtod(s + at, NULL); /* ±HUGE_VAL beyond double: out of range too */
        *out = (float)d;
        if (isinf(*out))
            return fail(ps, JSONNUM_ERR_RANGE, at, "number %.*s is out of float32 range",
                        (int)(*pos - at < 40 ? *pos - at : 40), s + at);
        return 0;
    }
    *out = (float)(neg ? -d : d); /* below 2^53·10^22: always a finite float */
    return 0;
}

/* The length of "-inf" or "-Infinity" (quotes included, written exactly
 * so) at s[i], or 0. */
static size_t neg_inf_word(const char *s, size_t len, size_t i)
{
    static const char *const words[2] = {"\"-inf\"", "\"-Infinity\""};
    for (int k = 0; k < 2; k++) {
        const size_t n = strlen(words[k]);
        if (len - i >= n && memcmp(s + i, words[k], n) == 0)
            return n;
    }
    return 0;
}

#define JSONNUM_GROW_STEPS_UP_TO ((size_t)1 << 20)

static int push(struct parser *ps, float v, size_t at)
{
    if (ps->count == ps->cap) {
        if (ps->count >= ps->max_count)
            return fail(ps, JSONNUM_ERR_LIMIT, at, "more than %zu numbers", ps->max_count);
        size_t cap = ps->cap ? ps->cap * 2 : 1024;
        /* Past 1M numbers, one last step to what the rest of the text can
         * hold (each number takes 2 bytes or more: "1,"): a realloc may copy
         * (glibc serves blocks below its mmap threshold, which grows to the
         * largest block freed, from the heap, where the old block stays
         * resident), and doubling would leave old + new, 3x the floats, at
         * the peak. Capacity never written never becomes resident. */
        if (cap > JSONNUM_GROW_STEPS_UP_TO)
            cap = ps->count + (ps->len - at + 1) / 2;
        if (cap > ps->max_count || cap < ps->cap)
            cap = ps->max_count;
        if (cap > SIZE_MAX / sizeof(float))
            return fail(ps, JSONNUM_ERR_NOMEM, at, "array too large");
        float *nd = realloc(ps->data, cap * sizeof(float));
        if (!nd)
            return fail(ps, JSONNUM_ERR_NOMEM, at, "out of memory for %zu numbers", cap);
        ps->data = nd, ps->cap = cap;
    }
    ps->data[ps->count++] = v;
    return 0;
}

/* The array walk, iterative: depth is the open array (0 = outermost),
 * idx[depth] its elements so far, shape[d] known (nonzero) once the first
 * array at depth d has closed, ndim known (nonzero) once the first number
 * is read. Later arrays at depth d are checked against shape[d]. */
static int parse(struct parser *ps, struct jsonnum_array *a, size_t *consumed)
{
    const char *s = ps->s;
    const size_t len = ps->len;
    long long idx[JSONNUM_MAX_RANK] = {0};
    int depth = 0, ndim = 0, rc;

    size_t i = skip_space(s, len, 0);
    if (i == len)
        return fail(ps, JSONNUM_ERR_SYNTAX, i, "no value: the text is empty");
    if (s[i] == '-' || is_digit(s[i]))
        return fail(ps, JSONNUM_ERR_TYPE, i, "a number, not an array");
    if (s[i] != '[')
        return bad_token(ps, i, "not an array");
    i++;

    for (;;) {
        /* 1. An element (or the ']' of an empty array). */
        i = skip_space(s, len, i);
        if (i == len)
            return fail(ps, JSONNUM_ERR_SYNTAX, i, "unexpected end of text");
        char c = s[i];
        if (c == ']')
            return idx[depth] ? fail(ps, JSONNUM_ERR_SYNTAX, i, "']' after ','")
                              : fail(ps, JSONNUM_ERR_SHAPE, i, "empty array");
        if (a->shape[depth] && idx[depth] == a->shape[depth])
            return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: more than %lld elements at "
                        "depth %d", a->shape[depth], depth);
        if (c == '[') {
            if (ndim && depth + 1 >= ndim)
                return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: an array where a "
                            "number is expected");
            if (!ndim && depth + 1 >= JSONNUM_MAX_RANK)
                return fail(ps, JSONNUM_ERR_DEPTH, i, "more than %d dimensions",
                            JSONNUM_MAX_RANK);
            idx[++depth] = 0;
            i++;
            continue;
        }
        /* a number, or -infinity in words (JSONNUM_NEG_INF); with
         * JSONNUM_BOOL, true or false and nothing else */
        size_t word = c == '"' && (ps->flags & JSONNUM_NEG_INF) ? neg_inf_word(s, len, i) : 0;
        float lit = 0;
        if (ps->flags & JSONNUM_BOOL) {
            if (len - i >= 4 && memcmp(s + i, "true", 4) == 0)
                word = 4, lit = 1;
            else if (len - i >= 5 && memcmp(s + i, "false", 5) == 0)
                word = 5;
            else if (c == '-' || is_digit(c))
                return fail(ps, JSONNUM_ERR_TYPE, i, "array element: a number, not a boolean");
            else
                return bad_token(ps, i, "array element");
        } else if (c != '-' && !is_digit(c) && !word) {
            return bad_token(ps, i, "array element");
        }
        if (!ndim)
            ndim = depth + 1;
        else if (depth + 1 != ndim)
            return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: a number where an array is "
                        "expected");
        float v = 0;
        const size_t at = i;
        if (word)
            i += word, v = ps->flags & JSONNUM_BOOL ? lit : -INFINITY;
        else if ((rc = parse_number(ps, &i, &v)))
            return rc;
        if ((rc = push(ps, v, at)))
            return rc;
        idx[depth]++;

        /* 2. After a value: ',' or ']' (which may close several arrays). */
        for (;;) {
            i = skip_space(s, len, i);
            if (i == len)
                return fail(ps, JSONNUM_ERR_SYNTAX, i, "unexpected end of text");
            c = s[i];
            if (c == ',') {
                i++;
                break;
            }
            if (c != ']')
                return fail(ps, JSONNUM_ERR_SYNTAX, i, "expected ',' or ']'");
            if (!a->shape[depth])
                a->shape[depth] = idx[depth];
            else if (idx[depth] != a->shape[depth])
                return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: %lld elements where %lld "
                            "expected at depth %d", idx[depth], a->shape[depth], depth);
            i++;
            if (depth == 0) {
                /* Every array at depth d had shape[d] elements, every number
                 * sat at depth ndim: count is the shape's product. */
                a->ndim = ndim;
                *consumed = i;
                return 0;
            }
            idx[--depth]++;
        }
    }
}

int jsonnum_parse_array(struct jsonnum_array *a, const char *s, size_t len, size_t max_count,
                        size_t *consumed, struct jsonnum_error *err)
{
    return jsonnum_parse_array_opt(a, s, len, max_count, 0, consumed, err);
}

int jsonnum_parse_array_opt(struct jsonnum_array *a, const char *s, size_t len,
                            size_t max_count, unsigned flags, size_t *consumed,
                            struct jsonnum_error *err)
{
    struct parser ps = {.s = s, .len = len, .max_count = max_count, .flags = flags,
                        .err = err};
    memset(a, 0, sizeof *a);
    err->code = 0, err->offset = 0, err->msg[0] = '\0';
    int rc = parse(&ps, a, consumed);
    if (rc) {
        free(ps.data);
        memset(a, 0, sizeof *a);
        return rc;
    }
    a->count = ps.count;
    a->data = ps.data;
    if (ps.cap > ps.count) { /* give back the spare capacity; keep it if that fails */
        float *nd = realloc(ps.data, ps.count * sizeof(float));
        if (nd)
            a->data = nd;
    }
    return 0;
}

void jsonnum_array_deinit(struct jsonnum_array *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------------- */
/* Stand-ins for the numbers jansson cannot hold                           */

/* Length of the RFC 8259 number token at s[i], or 0 when none starts there;
 * *is_int: no fraction, no exponent. s[len] is a NUL. */
static size_t number_token(const char *s, size_t len, size_t i, int *is_int)
{
    size_t j = i + (s[i] == '-');
    if (j == len || !is_digit(s[j]))
        return 0;
    if (s[j] == '0')
        j++;
    else
        while (is_digit(s[j]))
            j++;
    *is_int = 1;
    if (s[j] == '.' && is_digit(s[j + 1])) {
        *is_int = 0;
        for (j += 2; is_digit(s[j]); j++)
            ;
    }
    if (s[j] == 'e' || s[j] == 'E') {
        size_t k = j + 1 + (s[j + 1] == '+' || s[j + 1] == '-');
        if (is_digit(s[k])) {
            *is_int = 0;
            for (j = k; is_digit(s[j]); j++)
                ;
        }
    }
    return j - i;
}

/* The shortest "DIGITSeEXP" (no point: jansson reads it as a real) that
 * strtod reads back as d, finite; t needs 32 bytes. Returns its length. */
static int shortest_real(char *t, double d)
{
    char e[32];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, d);
    int n = 0;
    const char *c = e;
    for (; *c != 'e'; c++)
        if (*c == '-' || (*c >= '0' && *c <= '9'))
            t[n++] = *c;
    return n + snprintf(t + n, 32 - (size_t)n, "e%d", (int)strtol(c + 1, NULL, 10) - (p - 1));
}

size_t jsonnum_standin(char *s, size_t len)
{
    size_t replaced = 0, i = 0;
    while (i < len) {
        if (s[i] == '"') { /* a string, to its closing quote */
            for (i++; i < len && s[i] != '"'; i += s[i] == '\\' ? 2 : 1)
                ;
            i++;
            continue;
        }
        int is_int;
        const size_t k = s[i] == '-' || is_digit(s[i]) ? number_token(s, len, i, &is_int) : 0;
        if (k == 0) {
            i++;
            continue;
        }
        /* jansson's own tests: strtoll's ERANGE, strtod's ±HUGE_VAL with
         * ERANGE. Both stop where the token does (s[len] is a NUL). */
        errno = 0;
        double d = 0;
        if (is_int)
            (void)strtoll(s + i, NULL, 10);
        else
            d = strtod(s + i, NULL);
        if (errno == ERANGE && (is_int || d == HUGE_VAL || d == -HUGE_VAL)) {
            d = strtod(s + i, NULL);
            char t[32];
            int n = isinf(d) ? snprintf(t, sizeof t, "%s", d < 0 ? "-1e39" : "1e39")
                             : shortest_real(t, d);
            if ((size_t)n <= k) { /* always: 19 digits or more, at most 17 kept */
                memset(s + i, ' ', k - (size_t)n);
                memcpy(s + i + k - (size_t)n, t, (size_t)n);
                replaced++;
            }
        }
        i += k;
    }
    return replaced;
}
