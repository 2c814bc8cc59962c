/* scan.c -- the fast decoder's pass over a request body; see scan.h. */
#include "server/scan.h"

#include <stdlib.h>
#include <string.h>

#include "server/jsonnum.h"

/* The placeholder's key: no JSON text can produce it unescaped, and the
 * scanner refuses escaped keys. */
#define SCAN_KEY "\x01tensor"

const struct tensor *scan_tensor_of(const struct scan_tensors *st, json_t *v)
{
    json_t *i = st && json_is_object(v) ? json_object_get(v, SCAN_KEY) : NULL;
    if (!json_is_integer(i) || json_integer_value(i) < 0 || json_integer_value(i) >= st->n)
        return NULL;
    return &st->t[json_integer_value(i)];
}

struct scan {
    const char *s;
    size_t len, pos;
    long long max;            /* max_tensor_elements */
    struct scan_tensors *st;
    struct tensor_arena *a;
};

static void skip_ws(struct scan *sc)
{
    while (sc->pos < sc->len && (sc->s[sc->pos] == ' ' || sc->s[sc->pos] == '\n' ||
                                 sc->s[sc->pos] == '\r' || sc->s[sc->pos] == '\t'))
        sc->pos++;
}

static int peek(struct scan *sc)
{
    skip_ws(sc);
    return sc->pos < sc->len ? (unsigned char)sc->s[sc->pos] : -1;
}

static int expect(struct scan *sc, char c)
{
    if (peek(sc) != c)
        return -1;
    sc->pos++;
    return 0;
}

/* A string without escapes or control characters: its bytes in [*p, +*n).
 * (jansson also checks UTF-8; callers only accept ASCII.) */
static int scan_plain_string(struct scan *sc, const char **p, size_t *n)
{
    if (expect(sc, '"'))
        return -1;
    size_t start = sc->pos;
    const char *q = memchr(sc->s + start, '"', sc->len - start);
    if (!q)
        return -1;
    size_t end = (size_t)(q - sc->s);
    for (size_t i = start; i < end; i++) {
        unsigned char c = (unsigned char)sc->s[i];
        if (c == '\\' || c < 0x20 || c >= 0x80)
            return -1;
    }
    *p = sc->s + start, *n = end - start;
    sc->pos = end + 1;
    return 0;
}

/* A key into key[32], and the ':' after it. */
static int scan_key(struct scan *sc, char key[32])
{
    const char *k;
    size_t kn;
    if (scan_plain_string(sc, &k, &kn) || expect(sc, ':') || kn >= 32)
        return -1;
    memcpy(key, k, kn);
    key[kn] = '\0';
    return 0;
}

/* Skip one JSON value of any kind (extent only; jansson checks it). */
static int skip_value(struct scan *sc)
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
            depth++, sc->pos++;
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

/* One value through jansson, from its own extent in the body. */
static json_t *small_value(struct scan *sc)
{
    skip_ws(sc);
    size_t start = sc->pos;
    if (skip_value(sc))
        return NULL;
    return json_loadb(sc->s + start, sc->pos - start, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                      NULL);
}

/* An array of numbers at the cursor (nested to any rank) into floats kept
 * in the arena. */
static int scan_numbers(struct scan *sc, struct jsonnum_array *a, unsigned opt)
{
    struct jsonnum_error je;
    size_t used;
    if (peek(sc) != '[' ||
        jsonnum_parse_array_opt(a, sc->s + sc->pos, sc->len - sc->pos, (size_t)sc->max, opt,
                                &used, &je) != JSONNUM_OK)
        return -1;
    sc->pos += used;
    return tensor_arena_keep(sc->a, a->data) ? 0 : -1;
}

/* {shape, data} or {shape, dtype, b64}, the cursor after the '{'. */
static int scan_object(struct scan *sc, struct tensor *t, unsigned opt)
{
    json_t *shape = NULL, *dtype = NULL;
    const char *b64 = NULL;
    size_t b64_len = 0, have = 0;
    int have_data = 0, ok = peek(sc) != '}';
    while (ok) {
        char k[32];
        if (scan_key(sc, k)) {
            ok = 0;
        } else if (strcmp(k, "shape") == 0 && !shape) {
            ok = (shape = small_value(sc)) != NULL;
        } else if (strcmp(k, "dtype") == 0 && !dtype) {
            ok = (dtype = small_value(sc)) != NULL;
        } else if (strcmp(k, "b64") == 0 && !b64) {
            /* no escape check here: the base64 decoder refuses '\\' and
             * every other byte outside its alphabet (then: jansson) */
            const char *q = NULL;
            if (peek(sc) == '"')
                q = memchr(sc->s + sc->pos + 1, '"', sc->len - sc->pos - 1);
            ok = q != NULL;
            if (ok) {
                b64 = sc->s + sc->pos + 1, b64_len = (size_t)(q - b64);
                sc->pos = (size_t)(q - sc->s) + 1;
            }
        } else if (strcmp(k, "data") == 0 && !have_data) {
            struct jsonnum_array a;
            ok = scan_numbers(sc, &a, opt) == 0 && a.ndim == 1;
            if (ok)
                t->f = a.data, have = a.count, have_data = 1;
        } else {
            ok = 0;
        }
        if (!ok || peek(sc) != ',')
            break;
        sc->pos++;
    }
    struct api_error ignored;
    ok = ok && expect(sc, '}') == 0 && (have_data != (b64 != NULL)) &&
         tensor_shape_from_json(t, shape, "", sc->max, &ignored) == 0;
    if (ok && have_data)
        ok = !dtype && have == t->count;
    if (ok && b64) {
        const char *dt = json_string_value(dtype);
        t->is_bool = dt && strcmp(dt, "bool") == 0;
        ok = dt && (t->is_bool || strcmp(dt, "float32") == 0) &&
             tensor_read_b64(t, b64, b64_len, sc->a, "", &ignored) == 0;
    }
    json_decref(shape);
    json_decref(dtype);
    return ok ? 0 : -1;
}

/* A tensor at the cursor into the next slot; returns its placeholder.
 * float_mask: it is attn_mask, whose numbers may include "-inf". */
static json_t *scan_tensor(struct scan *sc, int float_mask)
{
    const unsigned opt = float_mask ? JSONNUM_NEG_INF : 0;
    if (sc->st->n == SCAN_MAX_TENSORS)
        return NULL;
    struct tensor *t = &sc->st->t[sc->st->n];
    memset(t, 0, sizeof *t);
    int c = peek(sc);
    if (c == '[') { /* nested arrays of numbers */
        struct jsonnum_array a;
        if (scan_numbers(sc, &a, opt))
            return NULL;
        t->f = a.data, t->count = a.count, t->ndim = a.ndim;
        memcpy(t->shape, a.shape, sizeof t->shape);
    } else if (c == '{') {
        sc->pos++;
        if (scan_object(sc, t, opt))
            return NULL;
    } else {
        return NULL;
    }
    return json_pack("{s:i}", SCAN_KEY, sc->st->n++);
}

/* "weights": an object of tensors. */
static json_t *scan_weights(struct scan *sc)
{
    json_t *v = json_object();
    sc->pos++; /* '{' */
    int ok = v && peek(sc) != '}';
    while (ok) {
        char k[32];
        json_t *t = NULL;
        ok = scan_key(sc, k) == 0 && !json_object_get(v, k) && (t = scan_tensor(sc, 0)) &&
             json_object_set_new(v, k, t) == 0;
        if (!ok || peek(sc) != ',')
            break;
        sc->pos++;
    }
    if (!ok || expect(sc, '}')) {
        json_decref(v);
        return NULL;
    }
    return v;
}

json_t *scan_request(const char *body, size_t len, long long max_elements,
                     struct scan_tensors *st, struct tensor_arena *a)
{
    struct scan sc = {body, len, 0, max_elements, st, a};
    st->n = 0;
    json_t *root = json_object();
    if (!root || expect(&sc, '{') || peek(&sc) == '}')
        goto defer; /* empty: let jansson name what is missing */
    for (;;) {
        char key[32];
        json_t *v = NULL;
        if (scan_key(&sc, key) || json_object_get(root, key))
            goto defer; /* duplicate */
        const int mask = strcmp(key, "attn_mask") == 0 || strcmp(key, "key_padding_mask") == 0;
        if (strcmp(key, "query") == 0 || strcmp(key, "key") == 0 ||
            strcmp(key, "value") == 0 || (mask && peek(&sc) != '"'))
            v = scan_tensor(&sc, strcmp(key, "attn_mask") == 0);
        else if (strcmp(key, "weights") == 0 && peek(&sc) == '{')
            v = scan_weights(&sc);
        else
            v = small_value(&sc);
        if (!v || json_object_set_new(root, key, v))
            goto defer;
        int c = peek(&sc);
        sc.pos++;
        if (c == '}')
            break;
        if (c != ',')
            goto defer;
    }
    if (peek(&sc) != -1)
        goto defer; /* trailing bytes */
    return root;
defer:
    json_decref(root);
    return NULL;
}
