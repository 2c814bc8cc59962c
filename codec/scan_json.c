/* scan_json.c -- the fast decoder's lexical layer: keys, values skipped or
 * read alone, refusals with line and column, and the syntax of a whole body
 * (scan_json_check); see scan_json.h and scan.h. */
#include "codec/scan_json.h"
#include "codec/json_small.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonnum.h"
#include "lib/utf8.h"

int scan_refuse(struct scan *sc, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->err->msg, sizeof sc->err->msg, fmt, ap);
    va_end(ap);
    sc->err->code = code;
    sc->refused = 1;
    return -1;
}

/* A refusal found by the fast decoder: the byte offset as jansson counts
 * lines and columns (bytes here, not characters). */
void scan_line_col(const struct scan *sc, size_t off, int *line, int *col)
{
    *line = 1, *col = 1;
    for (size_t i = 0; i < off && i < sc->len; i++) {
        if (sc->s[i] == '\n')
            ++*line, *col = 1;
        else
            ++*col;
    }
}

int scan_bad_json(struct scan *sc, size_t off, const char *what)
{
    int line, col;
    scan_line_col(sc, off, &line, &col);
    return scan_refuse(sc, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s", line,
                       col, what);
}

/* A key into key[32], and the ':' after it. A key that is no field name
 * (too long, or not ASCII) comes back as its raw text, cut to fit, with
 * *odd set: it is unknown for sure. Escapes are read (a field name may be
 * written "qu\u0065ry"). Returns -1 when it is not a key at all. */
int scan_key(struct scan *sc, char key[32], int *odd)
{
    size_t kn = 0;
    *odd = 0;
    if (expect(sc, '"'))
        return -1;
    for (;;) {
        if (sc->pos >= sc->len)
            return -1;
        unsigned char c = (unsigned char)sc->s[sc->pos++];
        if (c == '"')
            break;
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (sc->pos >= sc->len)
                return -1;
            char e = sc->s[sc->pos++];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *m = strchr(from, e);
            if (e == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++, sc->pos++) {
                    char h = sc->pos < sc->len ? sc->s[sc->pos] : 0;
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0)
                        return -1;
                    v = v * 16 + (unsigned)d;
                }
                if (v >= 0x80 || v == 0)
                    *odd = 1, v = '?';
                c = (unsigned char)v;
            } else if (e && m) {
                c = (unsigned char)to[m - from];
            } else {
                return -1;
            }
        } else if (c >= 0x80) {
            *odd = 1;
        }
        if (kn < 31)
            key[kn++] = (char)c;
        else
            *odd = 1;
    }
    key[kn] = '\0';
    return expect(sc, ':');
}

/* Skip one JSON value of any kind (extent only; jansson checks it).
 * -2: nested deeper than jansson's 2048. */
int scan_skip_value(struct scan *sc)
{
    int depth = 0;
    skip_ws(sc);
    do {
        if (sc->pos >= sc->len)
            return -1;
        char c = sc->s[sc->pos];
        if (c == '"') {
            sc->pos++;
            while (sc->pos < sc->len && sc->s[sc->pos] != '"')
                sc->pos += sc->s[sc->pos] == '\\' ? 2 : 1;
            if (sc->pos >= sc->len)
                return -1;
            sc->pos++;
        } else if (c == '[' || c == '{') {
            if (++depth > 2048)
                return -2;
            sc->pos++;
        } else if (c == ']' || c == '}') {
            if (--depth < 0)
                return -1;
            sc->pos++;
        } else if (c == ',' || c == ':' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            if (depth == 0)
                return -1;
            sc->pos++;
        } else { /* number or literal: up to a delimiter; must advance */
            const size_t start = sc->pos;
            while (sc->pos < sc->len && sc->s[sc->pos] != '\0' &&
                   !strchr(",:[]{}\" \n\r\t", sc->s[sc->pos]))
                sc->pos++;
            if (sc->pos == start)
                return -1; /* a NUL or other stray byte: not ours to judge */
        }
    } while (depth > 0);
    return 0;
}

/* One value through jansson, from its own extent in the body (a number
 * jansson cannot hold: again with its stand-in, as the reference does).
 * On a large body, invalid JSON here is the answer. */
json_t *scan_extent_value(struct scan *sc)
{
    skip_ws(sc);
    const size_t start = sc->pos;
    const int sk = scan_skip_value(sc);
    if (sk) {
        if (sc->errors)
            scan_bad_json(sc, sk == -2 ? start : sc->pos,
                          sk == -2 ? "maximum parsing depth reached" : "a value was expected");
        return NULL;
    }
    const size_t n = sc->pos - start;
    json_error_t je;
    json_t *v = json_loadb(sc->s + start, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v && sc->errors && json_error_code(&je) == json_error_numeric_overflow) {
        char *copy = malloc(n + 1);
        if (copy) {
            memcpy(copy, sc->s + start, n);
            copy[n] = '\0';
            jsonnum_standin(copy, n);
            v = json_loadb(copy, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
            free(copy);
        }
    }
    if (!v && sc->errors)
        scan_bad_json(sc, start + (size_t)je.position, je.text);
    return v;
}

/* A small value inside a tensor object (shape, dtype). On a large body an
 * array or object of more than SCAN_SMALL bytes is neither: an empty array
 * stands in for it, and the tensor's check names the field and its type,
 * without a DOM of the value. */
json_t *scan_field_value(struct scan *sc)
{
    const int c = peek(sc);
    if (sc->errors && (c == '[' || c == '{')) {
        const size_t start = sc->pos;
        if (scan_skip_value(sc) == 0 && sc->pos - start > SCAN_SMALL)
            return json_array();
        sc->pos = start;
    }
    return scan_extent_value(sc);
}

/* ---------------------------------------------------------------------- */
/* The syntax of a whole body, without a DOM                               */

static int hex4(const char *s, size_t n, unsigned *v)
{
    *v = 0;
    if (n < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        const char h = s[i];
        const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

/* A string at s[*i] == '"': *i moves past it; 0, or -1 with *i at the
 * fault. */
static int check_string(const char *s, size_t len, size_t *i)
{
    size_t p = *i + 1;
    for (;;) {
        if (p >= len)
            return *i = p, -1;
        const unsigned char c = (unsigned char)s[p];
        if (c == '"')
            break;
        if (c < 0x20)
            return *i = p, -1;
        if (c == '\\') {
            const char e = p + 1 < len ? s[p + 1] : 0;
            unsigned u, lo;
            if (e && strchr("\"\\/bfnrt", e)) {
                p += 2;
            } else if (e == 'u' && hex4(s + p + 2, len - p - 2, &u) == 0) {
                p += 6;
                if (u >= 0xdc00 && u <= 0xdfff)
                    return *i = p - 6, -1;
                if (u >= 0xd800 && u <= 0xdbff) { /* a low surrogate must follow */
                    if (p + 1 >= len || s[p] != '\\' || s[p + 1] != 'u' ||
                        hex4(s + p + 2, len - p - 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                        return *i = p - 6, -1;
                    p += 6;
                }
            } else {
                return *i = p, -1;
            }
        } else {
            const size_t k = utf8_seq((const unsigned char *)s + p, len - p);
            if (!k)
                return *i = p, -1;
            p += k;
        }
    }
    *i = p + 1;
    return 0;
}

static int check_number(const char *s, size_t len, size_t *i)
{
    size_t p = *i;
#define DIGIT(q) ((q) < len && s[q] >= '0' && s[q] <= '9')
    if (p < len && s[p] == '-')
        p++;
    if (!DIGIT(p))
        return *i = p, -1;
    if (s[p] == '0')
        p++;
    else
        while (DIGIT(p))
            p++;
    if (p < len && s[p] == '.') {
        if (!DIGIT(p + 1))
            return *i = p, -1;
        for (p++; DIGIT(p); p++) {}
    }
    if (p < len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < len && (s[p] == '+' || s[p] == '-'))
            p++;
        if (!DIGIT(p))
            return *i = p, -1;
        while (DIGIT(p))
            p++;
    }
#undef DIGIT
    if (p < len && s[p] == '\0') /* jansson drops one NUL after a number */
        p++;
    *i = p;
    return 0;
}

int scan_json_check(const char *s, size_t len, struct failure *err)
{
    enum { VALUE, VALUE_OR_END, KEY, KEY_OR_END, AFTER } state = VALUE;
    char open[2049];
    int depth = 0;
    size_t i = 0;
    const char *what = NULL;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
            i++;
        if (i == len) {
            if (state == AFTER && depth == 0)
                return 0;
            what = "unexpected end of input";
            break;
        }
        const char c = s[i];
        if (state == AFTER) {
            if (depth == 0) {
                what = "end of file expected";
                break;
            }
            if (c == ',') {
                i++, state = open[depth] == '{' ? KEY : VALUE;
                continue;
            }
            if (c == (open[depth] == '{' ? '}' : ']')) {
                i++, depth--;
                continue;
            }
            what = open[depth] == '{' ? "',' or '}' expected" : "',' or ']' expected";
            break;
        }
        if ((state == KEY_OR_END && c == '}') || (state == VALUE_OR_END && c == ']')) {
            i++, depth--, state = AFTER;
            continue;
        }
        if (state == KEY || state == KEY_OR_END) {
            if (c != '"' || check_string(s, len, &i)) {
                what = c == '"' ? "invalid string" : "string or '}' expected";
                break;
            }
            while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
                i++;
            if (i == len || s[i] != ':') {
                what = "':' expected";
                break;
            }
            i++, state = VALUE;
            continue;
        }
        /* a value */
        state = AFTER;
        if (c == '{' || c == '[') {
            if (depth == 2048) {
                what = "maximum parsing depth reached";
                break;
            }
            open[++depth] = c;
            i++, state = c == '{' ? KEY_OR_END : VALUE_OR_END;
        } else if (c == '"') {
            if (check_string(s, len, &i)) {
                what = "invalid string";
                break;
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (check_number(s, len, &i)) {
                what = "invalid number";
                break;
            }
        } else if (len - i >= 4 && (!memcmp(s + i, "true", 4) || !memcmp(s + i, "null", 4))) {
            i += 4;
        } else if (len - i >= 5 && !memcmp(s + i, "false", 5)) {
            i += 5;
        } else {
            what = "invalid token";
            break;
        }
    }
    struct scan sc = {s, len, 0, 0, 1, NULL, NULL, err, 0, NULL};
    return scan_bad_json(&sc, i, what);
}

int scan_checked_value(struct scan *sc)
{
    if (!sc->errors)
        return scan_skip_value(sc) ? -1 : 0;
    json_t *v = scan_extent_value(sc);
    json_decref(v);
    return v ? 0 : -1;
}

int scan_seen_before(char (*seen)[32], size_t *n, size_t cap, const char *key)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(seen[i], key) == 0)
            return 1;
    if (*n < cap)
        snprintf(seen[(*n)++], sizeof seen[0], "%s", key);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* jansson over the body with the values the fast reader took blanked      */

int scan_blank(struct scan_blanks *b, size_t start, size_t end, int array)
{
    if (b->n == b->cap) {
        const size_t cap = b->cap ? 2 * b->cap : 16;
        struct scan_blank *r = realloc(b->r, cap * sizeof *r);
        if (!r)
            return -1;
        b->r = r, b->cap = cap;
    }
    b->r[b->n++] = (struct scan_blank){start, end, array};
    return 0;
}

struct feed {
    const struct scan_blanks *b;
    const char *s;
    size_t len, pos, r; /* r: the first range not wholly before pos */
    int compact;
};

/* The bytes from pos: the body's, or within a range its stand-in, then
 * spaces to its end (compact: nothing). */
static size_t feed_get(void *buf, size_t max, void *data)
{
    struct feed *d = data;
    char *out = buf;
    size_t n = 0;
    while (n < max && d->pos < d->len) {
        while (d->r < d->b->n && d->b->r[d->r].end <= d->pos)
            d->r++;
        const struct scan_blank *g = d->r < d->b->n ? &d->b->r[d->r] : NULL;
        if (g && d->pos >= g->start) { /* within a range */
            const char *stand = g->array ? "[]" : "0";
            const size_t at = d->pos - g->start, sl = g->array ? 2 : 1;
            if (at < sl) { /* the stand-in, a byte at a time (it is short) */
                out[n++] = stand[at];
                d->pos++;
            } else if (d->compact) {
                d->pos = g->end;
            } else {
                const size_t k = g->end - d->pos < max - n ? g->end - d->pos : max - n;
                memset(out + n, ' ', k);
                n += k, d->pos += k;
            }
        } else {
            const size_t stop = g ? g->start : d->len;
            size_t k = stop - d->pos < max - n ? stop - d->pos : max - n;
            memcpy(out + n, d->s + d->pos, k);
            n += k, d->pos += k;
        }
    }
    return n;
}

json_t *scan_load_blanked(const struct scan_blanks *b, const char *s, size_t n, int compact,
                          int standin, json_error_t *je, int *nomem)
{
    struct feed d = {b, s, n, 0, 0, compact};
    *nomem = 0;
    json_t *small = b->n ? NULL : json_small_load(s, n);
    if (small)
        return small;
    json_t *root = b->n ? json_load_callback(feed_get, &d, JSON_REJECT_DUPLICATES, je)
                        : json_loadb(s, n, JSON_REJECT_DUPLICATES, je);
    if (root || !standin || json_error_code(je) != json_error_numeric_overflow)
        return root;
    /* a number jansson cannot hold (outside the ranges): a copy with its
     * stand-in, as POST /attention's reference reads it (jsonnum_standin) */
    char *copy = malloc(n + 1);
    if (!copy)
        return *nomem = 1, NULL;
    d.pos = d.r = 0;
    const size_t m = feed_get(copy, n, &d);
    copy[m] = '\0';
    jsonnum_standin(copy, m);
    root = json_loadb(copy, m, JSON_REJECT_DUPLICATES, je);
    free(copy);
    return root;
}

void scan_blanks_free(struct scan_blanks *b)
{
    free(b->r);
    b->r = NULL;
    b->n = b->cap = 0;
}
