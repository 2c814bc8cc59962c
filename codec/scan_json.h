/* scan_json.h -- the fast decoders' lexical layer, shared by scan.c (the
 * /attention request), v2_scan.c (the v2 request) and scan_json.c (this
 * layer); internal to the codec.
 *
 * A cursor over the body (struct scan, which also carries the request's
 * mode and its tensor slots), whitespace, keys, skipping a value or reading
 * one alone through jansson, refusals with jansson's line and column. The
 * whole-body syntax check, scan_json_check(), is declared in scan.h. */
#ifndef CODEC_SCAN_JSON_H
#define CODEC_SCAN_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "lib/errors.h"
#include "codec/scan.h"
#include "codec/tensor.h"

/* jansson over a body some of whose values the fast reader took itself:
 * the one way both fast decoders get their DOM. Each blanked range (a
 * whole value, in body order) reads as a stand-in, "0" (or "[]"), so the
 * DOM holds one small node where the value was. Padded with spaces, every
 * other byte keeps its offset (and jansson's error lines and columns hold:
 * v2 quotes them); compact, jansson reads only what is left (POST
 * /attention, whose syntax errors the fast reader says itself). */
struct scan_blank {
    size_t start, end;
    int array; /* the stand-in is "[]" (the value is an array or an object), else "0" */
};
struct scan_blanks {
    struct scan_blank *r;
    size_t n, cap;
};
/* Add [start, end) after the ranges added before. 0, or -1 out of memory. */
int scan_blank(struct scan_blanks *b, size_t start, size_t end, int array);
/* s (n bytes) with b's ranges blanked (padded, or compact), through
 * jansson (JSON_REJECT_DUPLICATES; standin: a number it cannot hold, again
 * with its stand-in, jsonnum_standin). With no range, a text of the plain
 * form json_small_load() reads (codec/json_small.h) is read by it, to the
 * same values. NULL with je filled, or with *nomem set. */
json_t *scan_load_blanked(const struct scan_blanks *b, const char *s, size_t n, int compact,
                          int standin, json_error_t *je, int *nomem);
void scan_blanks_free(struct scan_blanks *b);

struct scan {
    const char *s;
    size_t len, pos;
    long long max;            /* max_tensor_elements */
    int errors;               /* large body: say what is wrong, never hand over */
    struct scan_tensors *st;
    struct tensor_arena *a;
    struct failure *err;
    int refused;              /* err holds the answer */
    struct scan_blanks *blanks; /* the values read here, for jansson to skip (or NULL) */
};

/* err gets code and the message; sc->refused is set. Returns -1. */
int scan_refuse(struct scan *sc, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A refusal found by the fast decoder: the byte offset as jansson counts
 * lines and columns (bytes here, not characters). */
void scan_line_col(const struct scan *sc, size_t off, int *line, int *col);

/* An invalid_json refusal at byte off, what is wrong as jansson says it. */
int scan_bad_json(struct scan *sc, size_t off, const char *what);

static inline void skip_ws(struct scan *sc)
{
    while (sc->pos < sc->len && (sc->s[sc->pos] == ' ' || sc->s[sc->pos] == '\n' ||
                                 sc->s[sc->pos] == '\r' || sc->s[sc->pos] == '\t'))
        sc->pos++;
}

static inline int peek(struct scan *sc)
{
    skip_ws(sc);
    return sc->pos < sc->len ? (unsigned char)sc->s[sc->pos] : -1;
}

static inline int expect(struct scan *sc, char c)
{
    if (peek(sc) != c)
        return -1;
    sc->pos++;
    return 0;
}

/* A key into key[32], and the ':' after it; *odd: no field name. -1 when
 * it is not a key at all. */
int scan_key(struct scan *sc, char key[32], int *odd);

/* Skip one JSON value of any kind (extent only; jansson checks it).
 * -2: nested deeper than jansson's 2048. */
int scan_skip_value(struct scan *sc);

/* One value through jansson, from its own extent in the body. */
json_t *scan_extent_value(struct scan *sc);

/* A value left for the blanked load: on a large body checked alone first
 * (its refusal, in body order, is the answer, in the words jansson gives
 * the value alone); on a small one only skipped (the load, or the
 * reference, says what is wrong). 0 or -1. */
int scan_checked_value(struct scan *sc);

/* Whether key is among seen (*n of them); if not, it is added (room: cap). */
int scan_seen_before(char (*seen)[32], size_t *n, size_t cap, const char *key);

/* A small value inside a tensor object (its shape, its dtype); on a large
 * body an array or object of more than SCAN_SMALL bytes reads as []. */
json_t *scan_field_value(struct scan *sc);

#endif
