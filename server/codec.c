/* codec.c -- request decoding and response encoding; see codec.h. */
#include "server/codec.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/errors.h"
#include "server/jsonnum.h"

#define MAX_RANK 4

/* What a tensor may hold. */
enum kind { K_FLOAT, K_BOOL, K_MASK /* bools or numbers, not mixed */ };

struct tensor {
    int ndim;
    long long shape[MAX_RANK];
    size_t count;
    int is_bool;    /* data in u8, else in f */
    float *f;       /* owned by the request */
    uint8_t *u8;
};

static int fail(struct codec_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static void *keep(struct codec_request *r, void *b)
{
    if (!b)
        return NULL;
    if (r->nbufs == CODEC_MAX_BUFS) { /* cannot happen: fewer tensors than slots */
        free(b);
        return NULL;
    }
    r->bufs[r->nbufs++] = b;
    return b;
}

static void shape_str(char *dst, size_t n, const long long *shape, int ndim)
{
    size_t o = (size_t)snprintf(dst, n, "(");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(dst + o, n - o, "%s%lld", i ? ", " : "", shape[i]);
    if (o < n)
        snprintf(dst + o, n - o, ndim == 1 ? ",)" : ")");
}

/* Element count from a shape, checked against overflow and the limit. */
static int count_elements(struct tensor *t, const char *name, const struct codec_limits *lim,
                          struct codec_error *err)
{
    const long long max = lim->max_tensor_elements;
    long long c = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 1)
            return fail(err, ERR_INVALID_TENSOR, "%s: dimension %d is %lld; every dimension "
                        "must be >= 1", name, i, t->shape[i]);
        if (t->shape[i] > max || c > max / t->shape[i]) {
            char s[96];
            shape_str(s, sizeof s, t->shape, t->ndim);
            return fail(err, ERR_PAYLOAD_TOO_LARGE, "%s: shape %s has more than %lld elements "
                        "(max_tensor_elements)", name, s, max);
        }
        c *= t->shape[i];
    }
    t->count = (size_t)c;
    return 0;
}

static int alloc_data(struct codec_request *r, struct tensor *t, struct codec_error *err)
{
    if (t->is_bool)
        t->u8 = keep(r, malloc(t->count));
    else
        t->f = keep(r, malloc(t->count * sizeof(float)));
    if (!t->f && !t->u8)
        return fail(err, ERR_INTERNAL, "out of memory for a tensor of %zu elements", t->count);
    return 0;
}

/* One JSON number into a float32, or an error naming where it is. The value
 * is not printed: a number beyond double reaches here as its stand-in
 * (jsonnum_standin), not as written. */
static int to_float(float *dst, json_t *v, const char *name, const char *where,
                    struct codec_error *err)
{
    double d = json_number_value(v);
    float f = (float)d;
    if (!isfinite(d) || !isfinite(f))
        return fail(err, ERR_INVALID_TENSOR, "%s%s is out of float32 range (beyond "
                    "3.4028235e38 in magnitude)", name, where);
    *dst = f;
    return 0;
}

/* The JSON strings that stand for -infinity in a float mask: JSON has no
 * infinity, and JavaScript's JSON.stringify writes -Infinity as null. */
static int is_neg_inf_string(json_t *v)
{
    const char *s = json_string_value(v);
    return s && (strcmp(s, "-inf") == 0 || strcmp(s, "-Infinity") == 0);
}

/* Leaf kind check: is v acceptable for kind k, given the tensor so far? */
static int leaf_ok(json_t *v, enum kind k, int is_bool)
{
    if (k == K_FLOAT)
        return json_is_number(v);
    if (k == K_BOOL)
        return json_is_boolean(v);
    return is_bool ? json_is_boolean(v) : json_is_number(v) || is_neg_inf_string(v);
}

static const char *kind_words(enum kind k, int is_bool)
{
    if (k == K_FLOAT)
        return "a number";
    if (k == K_BOOL)
        return "a boolean";
    return is_bool ? "a boolean (the mask's first element is one)"
                   : "a number or \"-inf\" (the mask's first element is not a boolean)";
}

static int store_leaf(struct tensor *t, size_t at, json_t *v, enum kind k, const char *name,
                      const char *where, struct codec_error *err)
{
    if (!leaf_ok(v, k, t->is_bool)) {
        if (k == K_MASK && !t->is_bool && json_is_null(v))
            return fail(err, ERR_INVALID_TENSOR, "%s%s is null; JavaScript's JSON.stringify "
                        "writes -Infinity so: send the string \"-inf\"", name, where);
        return fail(err, ERR_INVALID_TENSOR, "%s%s is not %s", name, where,
                    kind_words(k, t->is_bool));
    }
    if (t->is_bool) {
        t->u8[at] = json_is_true(v);
        return 0;
    }
    if (json_is_string(v)) { /* "-inf" in a float mask (leaf_ok) */
        t->f[at] = -INFINITY;
        return 0;
    }
    return to_float(&t->f[at], v, name, where, err);
}

/* Nested arrays: walk depth d of array a, writing leaves from *at.
 * path (64 bytes) holds the index path so far, e.g. "[1][0]". */
static int fill_nested(struct tensor *t, json_t *a, int d, size_t *at, enum kind k,
                       const char *name, char *path, size_t plen, struct codec_error *err)
{
    if (!json_is_array(a))
        return fail(err, ERR_INVALID_TENSOR, "%s%s: ragged array, expected an array of "
                    "length %lld", name, path, t->shape[d]);
    size_t n = json_array_size(a);
    if (n != (size_t)t->shape[d])
        return fail(err, ERR_INVALID_TENSOR, "%s%s: ragged array, length %zu where %lld "
                    "expected", name, path, n, t->shape[d]);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        size_t pl = plen;
        if (plen < 48)
            pl += (size_t)snprintf(path + plen, 64 - plen, "[%zu]", i);
        int rc;
        if (d + 1 < t->ndim)
            rc = fill_nested(t, v, d + 1, at, k, name, path, pl, err);
        else if (json_is_array(v))
            rc = fail(err, ERR_INVALID_TENSOR, "%s%s: ragged array, nested deeper than "
                      "the first element", name, path);
        else
            rc = store_leaf(t, (*at)++, v, k, name, path, err);
        path[plen] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

static int decode_nested(struct codec_request *r, struct tensor *t, json_t *a, enum kind k,
                         const char *name, const struct codec_limits *lim,
                         struct codec_error *err)
{
    json_t *x = a;
    t->ndim = 0;
    while (json_is_array(x)) {
        if (t->ndim == MAX_RANK)
            return fail(err, ERR_INVALID_TENSOR, "%s has more than %d dimensions", name,
                        MAX_RANK);
        t->shape[t->ndim++] = (long long)json_array_size(x);
        if (json_array_size(x) == 0)
            return fail(err, ERR_INVALID_TENSOR, "%s has an empty dimension", name);
        x = json_array_get(x, 0);
    }
    t->is_bool = k == K_BOOL || (k == K_MASK && json_is_boolean(x));
    if (count_elements(t, name, lim, err) || alloc_data(r, t, err))
        return -1;
    char path[64] = "";
    size_t at = 0;
    return fill_nested(t, a, 0, &at, k, name, path, 0, err);
}

/* An integer field (num_heads, a shape dimension): INT_OK with its value,
 * or why not. jansson keeps 2 (an integer) apart from 2.0 (a real), and 2.0
 * is refused. But it cannot hold an integer beyond long long: the reference
 * path reads one as the real of the same value (jsonnum_standin), so an
 * integral real beyond 2^63 in magnitude cannot be told from such an
 * integer, however it was written (JavaScript writes 10^21 as "1e+21"). It
 * is taken for what it is either way: far too large (or too small) for any
 * integer field. */
enum int_field { INT_OK, INT_NOT_INTEGER, INT_HUGE, INT_NEG_HUGE };

static enum int_field int_field(json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return INT_OK;
    }
    /* (every double beyond 2^52 is an integer) */
    if (json_is_real(v) && fabs(json_real_value(v)) >= 0x1p63)
        return json_real_value(v) > 0 ? INT_HUGE : INT_NEG_HUGE;
    return INT_NOT_INTEGER;
}

static int decode_shape(struct tensor *t, json_t *sh, const char *name,
                        const struct codec_limits *lim, struct codec_error *err)
{
    if (!json_is_array(sh) || json_array_size(sh) < 1 || json_array_size(sh) > MAX_RANK)
        return fail(err, ERR_INVALID_TENSOR, "%s.shape must be an array of 1 to %d integers",
                    name, MAX_RANK);
    t->ndim = (int)json_array_size(sh);
    for (int i = 0; i < t->ndim; i++) {
        switch (int_field(json_array_get(sh, (size_t)i), &t->shape[i])) {
        case INT_OK:
            break;
        case INT_HUGE:
            return fail(err, ERR_PAYLOAD_TOO_LARGE, "%s.shape[%d] is beyond 2^63, more than "
                        "%lld elements (max_tensor_elements)", name, i,
                        lim->max_tensor_elements);
        case INT_NEG_HUGE:
            return fail(err, ERR_INVALID_TENSOR, "%s: dimension %d is below -2^63; every "
                        "dimension must be >= 1", name, i);
        default:
            return fail(err, ERR_INVALID_TENSOR, "%s.shape[%d] is not an integer", name, i);
        }
    }
    return 0;
}

/* Value of each base64 character; 0xff for every other byte. */
#define B64_ROW(c0) B64V(c0), B64V(c0 + 1), B64V(c0 + 2), B64V(c0 + 3), B64V(c0 + 4), \
    B64V(c0 + 5), B64V(c0 + 6), B64V(c0 + 7)
#define B64V(c) (unsigned char)((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' \
    : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 \
    : (c) == '+' ? 62 : (c) == '/' ? 63 : 0xff)
static const unsigned char b64_val[256] = {
    B64_ROW(0),   B64_ROW(8),   B64_ROW(16),  B64_ROW(24),  B64_ROW(32),  B64_ROW(40),
    B64_ROW(48),  B64_ROW(56),  B64_ROW(64),  B64_ROW(72),  B64_ROW(80),  B64_ROW(88),
    B64_ROW(96),  B64_ROW(104), B64_ROW(112), B64_ROW(120), B64_ROW(128), B64_ROW(136),
    B64_ROW(144), B64_ROW(152), B64_ROW(160), B64_ROW(168), B64_ROW(176), B64_ROW(184),
    B64_ROW(192), B64_ROW(200), B64_ROW(208), B64_ROW(216), B64_ROW(224), B64_ROW(232),
    B64_ROW(240), B64_ROW(248),
};
#undef B64V
#undef B64_ROW

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters for every 12 bits of input: half the lookups. */
static char b64_pairs[4096][2];
static pthread_once_t b64_pairs_once = PTHREAD_ONCE_INIT;

static void b64_pairs_init(void)
{
    for (int i = 0; i < 4096; i++)
        b64_pairs[i][0] = b64_alphabet[i >> 6], b64_pairs[i][1] = b64_alphabet[i & 63];
}

size_t codec_base64_encode(char *dst, const unsigned char *src, size_t n)
{
    const char *a = b64_alphabet;
    pthread_once(&b64_pairs_once, b64_pairs_init);
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        memcpy(dst + o, b64_pairs[v >> 12], 2);
        memcpy(dst + o + 2, b64_pairs[v & 0xfff], 2);
        o += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)src[i] << 16;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63], dst[o++] = '=', dst[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63];
        dst[o++] = a[(v >> 6) & 63], dst[o++] = '=';
    }
    return o;
}

long long codec_base64_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at)
{
    const unsigned char *s = (const unsigned char *)src;
    if (n % 4) {
        *bad_at = n;
        return -1;
    }
    size_t o = 0, full = n == 0 ? 0 : n - 4; /* the last quad may hold padding */
    for (size_t i = 0; i < full; i += 4) {
        const unsigned a = b64_val[s[i]], b = b64_val[s[i + 1]];
        const unsigned c = b64_val[s[i + 2]], d = b64_val[s[i + 3]];
        if ((a | b | c | d) & 0x80) { /* 0xff marks a byte outside the alphabet */
            *bad_at = i + (a & 0x80 ? 0 : b & 0x80 ? 1 : c & 0x80 ? 2 : 3);
            return -1;
        }
        const uint32_t v = a << 18 | b << 12 | c << 6 | d;
        dst[o] = (unsigned char)(v >> 16);
        dst[o + 1] = (unsigned char)(v >> 8);
        dst[o + 2] = (unsigned char)v;
        o += 3;
    }
    if (n == 0)
        return 0;
    /* last quad: "xxxx", "xxx=" or "xx==" */
    const unsigned char *q = s + full;
    const int pad = q[3] == '=' ? (q[2] == '=' ? 2 : 1) : 0;
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) {
        unsigned x = j >= 4 - pad ? 0 : b64_val[q[j]];
        if (x & 0x80) {
            *bad_at = full + (size_t)j;
            return -1;
        }
        v = v << 6 | x;
    }
    dst[o++] = (unsigned char)(v >> 16);
    if (pad < 2)
        dst[o++] = (unsigned char)(v >> 8);
    if (pad < 1)
        dst[o++] = (unsigned char)v;
    return (long long)o;
}

static int decode_object(struct codec_request *r, struct tensor *t, json_t *obj, enum kind k,
                         const char *name, const struct codec_limits *lim,
                         struct codec_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (strcmp(key, "shape") && strcmp(key, "data") && strcmp(key, "dtype") &&
            strcmp(key, "b64"))
            return fail(err, ERR_INVALID_TENSOR, "%s has an unknown field '%s' (a tensor is "
                        "nested arrays, {shape, data} or {shape, dtype, b64})", name, key);
    }
    json_t *data = json_object_get(obj, "data"), *b64 = json_object_get(obj, "b64");
    json_t *dtype = json_object_get(obj, "dtype");
    if (decode_shape(t, json_object_get(obj, "shape"), name, lim, err) ||
        count_elements(t, name, lim, err))
        return -1;
    if ((data != NULL) == (b64 != NULL))
        return fail(err, ERR_INVALID_TENSOR, "%s needs exactly one of 'data' or 'b64'", name);

    if (data) {
        if (dtype)
            return fail(err, ERR_INVALID_TENSOR, "%s: 'dtype' goes with 'b64', not 'data'",
                        name);
        if (!json_is_array(data))
            return fail(err, ERR_INVALID_TENSOR, "%s.data must be a flat array", name);
        if (json_array_size(data) != t->count) {
            char s[96];
            shape_str(s, sizeof s, t->shape, t->ndim);
            return fail(err, ERR_INVALID_TENSOR, "%s.data has %zu elements but shape %s "
                        "needs %zu", name, json_array_size(data), s, t->count);
        }
        json_t *first = json_array_get(data, 0);
        t->is_bool = k == K_BOOL || (k == K_MASK && json_is_boolean(first));
        if (alloc_data(r, t, err))
            return -1;
        for (size_t i = 0; i < t->count; i++) {
            char where[40];
            snprintf(where, sizeof where, ".data[%zu]", i);
            if (store_leaf(t, i, json_array_get(data, i), k, name, where, err))
                return -1;
        }
        return 0;
    }

    const char *dt = json_string_value(dtype);
    if (!dt || (strcmp(dt, "float32") && strcmp(dt, "bool")))
        return fail(err, ERR_INVALID_TENSOR, "%s.dtype must be \"float32\" (or \"bool\" for "
                    "masks) with 'b64'", name);
    t->is_bool = strcmp(dt, "bool") == 0;
    if (t->is_bool && k == K_FLOAT)
        return fail(err, ERR_INVALID_TENSOR, "%s must be float32, not bool", name);
    if (!t->is_bool && k == K_BOOL)
        return fail(err, ERR_INVALID_TENSOR, "%s must hold booleans (dtype \"bool\")", name);
    if (!json_is_string(b64))
        return fail(err, ERR_INVALID_TENSOR, "%s.b64 must be a base64 string", name);
    size_t n = json_string_length(b64), want = t->count * (t->is_bool ? 1 : 4), bad;
    if (n / 4 * 3 < want || n / 4 * 3 > want + 2)
        return fail(err, ERR_INVALID_TENSOR, "%s.b64 has %zu characters; shape needs %zu "
                    "bytes (%zu characters)", name, n, want, (want + 2) / 3 * 4);
    unsigned char *bytes = malloc(n / 4 * 3 + 1);
    if (!bytes)
        return fail(err, ERR_INTERNAL, "out of memory decoding %s", name);
    long long got = codec_base64_decode(bytes, json_string_value(b64), n, &bad);
    if (got < 0 || (size_t)got != want) {
        free(bytes);
        if (got < 0)
            return fail(err, ERR_INVALID_TENSOR, "%s.b64 is not valid base64 (at character "
                        "%zu)", name, bad);
        return fail(err, ERR_INVALID_TENSOR, "%s.b64 decodes to %lld bytes; shape needs %zu",
                    name, got, want);
    }
    keep(r, bytes);
    if (t->is_bool) {
        t->u8 = bytes;
        for (size_t i = 0; i < t->count; i++)
            if (bytes[i] > 1)
                return fail(err, ERR_INVALID_TENSOR, "%s: bool byte %zu is %u, not 0 or 1",
                            name, i, bytes[i]);
        return 0;
    }
    t->f = (float *)bytes; /* malloc'd: aligned for float; x86-64 is little-endian */
    for (size_t i = 0; i < t->count; i++)
        if (!isfinite(t->f[i]) && !(k == K_MASK && t->f[i] == -INFINITY))
            return fail(err, ERR_INVALID_TENSOR, k == K_MASK ? "%s element %zu is NaN or "
                        "+inf (of the non-finite values, a float mask takes -inf only)"
                        : "%s element %zu is not finite", name, i);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Fast path (see codec.h). It builds a small jansson object of the request's
 * scalar fields, in which each tensor is a placeholder {FAST_KEY: index}
 * into a table of tensors it decoded itself. It never reports an error:
 * FAST_DEFER sends the body to the jansson path, which gives the answer. */

#define FAST_KEY "\x01tensor"
#define FAST_DEFER (-2)
#define FAST_MAX_TENSORS 12

struct fast {
    struct tensor t[FAST_MAX_TENSORS];
    int n;
};

static int fast_tensor_get(struct codec_request *r, struct tensor *t, json_t *v, enum kind k)
{
    const struct fast *f = r->fast;
    json_int_t i = json_integer_value(json_object_get(v, FAST_KEY));
    if (i < 0 || i >= f->n)
        return FAST_DEFER;
    *t = f->t[i];
    /* a kind mismatch has a precise message on the jansson path */
    if ((k == K_FLOAT && t->is_bool) || (k == K_BOOL && !t->is_bool))
        return FAST_DEFER;
    return 0;
}

struct scan {
    const char *s;
    size_t len, pos;
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

static int key_is(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && memcmp(p, name, n) == 0;
}

/* A tensor at the cursor into f's next slot; returns its placeholder.
 * float_mask: it is attn_mask, which may hold -inf ("-inf" or -inf bits). */
static json_t *fast_tensor(struct codec_request *r, struct fast *f, struct scan *sc,
                           const struct codec_limits *lim, int float_mask)
{
    const unsigned opt = float_mask ? JSONNUM_NEG_INF : 0;
    if (f->n == FAST_MAX_TENSORS)
        return NULL;
    struct tensor *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    struct jsonnum_array a;
    struct jsonnum_error je;
    size_t used;
    int c = peek(sc);
    if (c == '[') { /* 1. nested arrays of numbers */
        if (jsonnum_parse_array_opt(&a, sc->s + sc->pos, sc->len - sc->pos,
                                    (size_t)lim->max_tensor_elements, opt, &used,
                                    &je) != JSONNUM_OK)
            return NULL;
        sc->pos += used;
        if (!keep(r, a.data))
            return NULL;
        t->f = a.data, t->count = a.count, t->ndim = a.ndim;
        memcpy(t->shape, a.shape, sizeof t->shape);
    } else if (c == '{') { /* 2. {shape, data} or 3. {shape, dtype, b64} */
        json_t *shape = NULL, *dtype = NULL;
        const char *b64 = NULL;
        size_t b64_len = 0;
        int have_data = 0, ok = 1;
        sc->pos++;
        if (peek(sc) == '}')
            ok = 0;
        while (ok) {
            const char *k;
            size_t kn;
            if (scan_plain_string(sc, &k, &kn) || expect(sc, ':')) {
                ok = 0;
                break;
            }
            if (key_is(k, kn, "shape") && !shape) {
                ok = (shape = small_value(sc)) != NULL;
            } else if (key_is(k, kn, "dtype") && !dtype) {
                ok = (dtype = small_value(sc)) != NULL;
            } else if (key_is(k, kn, "b64") && !b64) {
                /* no escape check here: the base64 decoder refuses '\\' and
                 * every other byte outside its alphabet (then: jansson path) */
                const char *q = NULL;
                if (peek(sc) == '"')
                    q = memchr(sc->s + sc->pos + 1, '"', sc->len - sc->pos - 1);
                ok = q != NULL;
                if (ok) {
                    b64 = sc->s + sc->pos + 1, b64_len = (size_t)(q - b64);
                    sc->pos = (size_t)(q - sc->s) + 1;
                }
            } else if (key_is(k, kn, "data") && !have_data) {
                ok = peek(sc) == '[' &&
                     jsonnum_parse_array_opt(&a, sc->s + sc->pos, sc->len - sc->pos,
                                             (size_t)lim->max_tensor_elements, opt, &used,
                                             &je) == JSONNUM_OK;
                if (ok) {
                    sc->pos += used;
                    ok = keep(r, a.data) != NULL;
                    t->f = a.data;
                    ok = ok && a.ndim == 1;
                    have_data = 1;
                    t->count = a.count;
                }
            } else {
                ok = 0;
            }
            if (!ok || peek(sc) != ',')
                break;
            sc->pos++;
        }
        ok = ok && expect(sc, '}') == 0 && json_is_array(shape) &&
             json_array_size(shape) >= 1 && json_array_size(shape) <= MAX_RANK &&
             (have_data != (b64 != NULL));
        if (ok) {
            t->ndim = (int)json_array_size(shape);
            size_t count = 1;
            for (int i = 0; ok && i < t->ndim; i++) {
                json_t *d = json_array_get(shape, (size_t)i);
                ok = json_is_integer(d) && json_integer_value(d) >= 1 &&
                     json_integer_value(d) <= lim->max_tensor_elements;
                t->shape[i] = json_integer_value(d);
                if (ok && count > (size_t)lim->max_tensor_elements / (size_t)t->shape[i])
                    ok = 0;
                count *= ok ? (size_t)t->shape[i] : 1;
            }
            if (ok && have_data)
                ok = !dtype && t->count == count;
            if (ok && b64) {
                const char *dt = json_string_value(dtype);
                t->is_bool = dt && strcmp(dt, "bool") == 0;
                ok = dt && (t->is_bool || strcmp(dt, "float32") == 0);
                size_t want = count * (t->is_bool ? 1 : 4), bad;
                unsigned char *bytes = ok ? malloc(b64_len / 4 * 3 + 1) : NULL;
                ok = bytes && keep(r, bytes) &&
                     codec_base64_decode(bytes, b64, b64_len, &bad) == (long long)want;
                t->count = count;
                if (ok && t->is_bool) {
                    t->u8 = bytes;
                    for (size_t i = 0; ok && i < count; i++)
                        ok = bytes[i] <= 1;
                } else if (ok) {
                    t->f = (float *)bytes;
                    for (size_t i = 0; ok && i < count; i++)
                        ok = isfinite(t->f[i]) || (float_mask && t->f[i] == -INFINITY);
                }
            }
        }
        json_decref(shape);
        json_decref(dtype);
        if (!ok)
            return NULL;
    } else {
        return NULL;
    }
    return json_pack("{s:i}", FAST_KEY, f->n++);
}

/* The request's top level: tensors fast, small fields through jansson. */
static json_t *fast_scan(struct codec_request *r, struct fast *f, const char *s, size_t len,
                         const struct codec_limits *lim)
{
    static const char *const tensor_keys[] = {"query", "key", "value"};
    struct scan sc = {s, len, 0};
    json_t *root = json_object();
    if (!root || expect(&sc, '{'))
        goto defer;
    if (peek(&sc) == '}')
        goto defer; /* empty: let the jansson path name what is missing */
    for (;;) {
        const char *k;
        size_t kn;
        json_t *v = NULL;
        if (scan_plain_string(&sc, &k, &kn) || expect(&sc, ':'))
            goto defer;
        char key[32];
        if (kn >= sizeof key)
            goto defer;
        memcpy(key, k, kn);
        key[kn] = '\0';
        if (json_object_get(root, key))
            goto defer; /* duplicate */
        int is_tensor = 0;
        for (size_t i = 0; i < 3; i++)
            is_tensor |= strcmp(key, tensor_keys[i]) == 0;
        is_tensor |= (strcmp(key, "attn_mask") == 0 || strcmp(key, "key_padding_mask") == 0) &&
                     peek(&sc) != '"';
        if (is_tensor) {
            v = fast_tensor(r, f, &sc, lim, strcmp(key, "attn_mask") == 0);
        } else if (strcmp(key, "weights") == 0 && peek(&sc) == '{') {
            v = json_object();
            sc.pos++;
            int ok = v && peek(&sc) != '}';
            while (ok) {
                const char *wk;
                size_t wn;
                char wkey[32];
                ok = scan_plain_string(&sc, &wk, &wn) == 0 && expect(&sc, ':') == 0 &&
                     wn < sizeof wkey;
                if (!ok)
                    break;
                memcpy(wkey, wk, wn);
                wkey[wn] = '\0';
                json_t *t = json_object_get(v, wkey) ? NULL : fast_tensor(r, f, &sc, lim, 0);
                ok = t && json_object_set_new(v, wkey, t) == 0;
                if (!ok || peek(&sc) != ',')
                    break;
                sc.pos++;
            }
            if (!ok || expect(&sc, '}')) {
                json_decref(v);
                v = NULL;
            }
        } else {
            v = small_value(&sc);
        }
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

/* Any of the three tensor forms. */
static int decode_tensor(struct codec_request *r, struct tensor *t, json_t *v, enum kind k,
                         const char *name, const struct codec_limits *lim,
                         struct codec_error *err)
{
    memset(t, 0, sizeof *t);
    if (r->fast && json_is_object(v) && json_object_get(v, FAST_KEY))
        return fast_tensor_get(r, t, v, k);
    if (json_is_array(v))
        return decode_nested(r, t, v, k, name, lim, err);
    if (json_is_object(v))
        return decode_object(r, t, v, k, name, lim, err);
    return fail(err, ERR_INVALID_TENSOR, "%s must be a tensor: nested arrays, {shape, data} "
                "or {shape, dtype, b64}", name);
}

static int expect_shape(const struct tensor *t, const char *name, int ndim, long long d0,
                        long long d1, struct codec_error *err)
{
    if (t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1))
        return 0;
    char got[96], want[96];
    long long w[2] = {d0, d1};
    shape_str(got, sizeof got, t->shape, t->ndim);
    shape_str(want, sizeof want, w, ndim);
    return fail(err, ERR_SHAPE_MISMATCH, "%s has shape %s, expected %s", name, got, want);
}

static int check_dim(long long v, int max, const char *what, const char *key,
                     struct codec_error *err)
{
    if (v > max)
        return fail(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld exceeds the limit %d (%s)", what, v,
                    max, key);
    return 0;
}

static int get_bool(json_t *root, const char *key, int dflt, int *out, struct codec_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v))
        return fail(err, ERR_INVALID_PARAMETER, "%s must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

static int get_tokens(json_t *root, const char *key, char **out, struct codec_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_array(v))
        return fail(err, ERR_INVALID_PARAMETER, "%s must be an array of strings", key);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i)))
            return fail(err, ERR_INVALID_PARAMETER, "%s[%zu] is not a string", key, i);
    *out = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
    return *out ? 0 : fail(err, ERR_INTERNAL, "out of memory copying %s", key);
}

int codec_error_from_att(int st)
{
    switch (st) {
    case ATT_EPARAM:  return ERR_INVALID_PARAMETER;
    case ATT_ESHAPE:  return ERR_SHAPE_MISMATCH;
    case ATT_ETOOBIG: return ERR_PAYLOAD_TOO_LARGE;
    case ATT_ERANGE:  return ERR_INVALID_PARAMETER;
    default:          return ERR_INTERNAL;
    }
}

static int decode_fields(struct codec_request *r, json_t *root, const struct codec_limits *lim,
                         struct codec_error *err)
{
    static const char *const known[] = {
        "query", "key", "value", "num_heads", "weights", "attn_mask", "key_padding_mask",
        "need_weights", "average_attn_weights", "scale", "positional_encoding",
        "output_encoding", "tokens", "key_tokens"};
    struct att_params *p = &r->p;
    const char *k;
    json_t *v;

    /* 1. No unknown fields: a typo should not be silently ignored. */
    json_object_foreach(root, k, v) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(k, known[i]))
            i++;
        if (i == sizeof known / sizeof known[0])
            return fail(err, ERR_INVALID_PARAMETER, "unknown field '%s'", k);
    }

    /* 2. num_heads */
    v = json_object_get(root, "num_heads");
    if (!v)
        return fail(err, ERR_INVALID_PARAMETER, "num_heads is required");
    long long heads = 0;
    const enum int_field hk = int_field(v, &heads);
    if (hk == INT_HUGE)
        return fail(err, ERR_PAYLOAD_TOO_LARGE, "num_heads is beyond 2^63; the limit is %d "
                    "(max_heads)", lim->max_heads);
    if (hk != INT_OK || heads < 1)
        return fail(err, ERR_INVALID_PARAMETER, "num_heads must be an integer >= 1");
    if (check_dim(heads, lim->max_heads, "num_heads", "max_heads", err))
        return -1;
    p->H = (int)heads;

    /* 3. query, key, value: same rank, same batch */
    struct tensor q, kt, vt;
    v = json_object_get(root, "query");
    if (!v)
        return fail(err, ERR_INVALID_PARAMETER, "query is required");
    if (decode_tensor(r, &q, v, K_FLOAT, "query", lim, err))
        return -1;
    if (q.ndim != 2 && q.ndim != 3)
        return fail(err, ERR_SHAPE_MISMATCH, "query must have rank 2 (L, E) or 3 (N, L, E), "
                    "got rank %d", q.ndim);
    r->batched = q.ndim == 3;
    kt = q, vt = q;
    if ((v = json_object_get(root, "key"))) {
        if (decode_tensor(r, &kt, v, K_FLOAT, "key", lim, err))
            return -1;
        vt = kt;
    }
    if ((v = json_object_get(root, "value")) && decode_tensor(r, &vt, v, K_FLOAT, "value", lim, err))
        return -1;
    if (kt.ndim != q.ndim || vt.ndim != q.ndim)
        return fail(err, ERR_SHAPE_MISMATCH, "%s has rank %d but query has rank %d",
                    kt.ndim != q.ndim ? "key" : "value", kt.ndim != q.ndim ? kt.ndim : vt.ndim,
                    q.ndim);
    const int b = r->batched;
    if (b && (kt.shape[0] != q.shape[0] || vt.shape[0] != q.shape[0]))
        return fail(err, ERR_SHAPE_MISMATCH, "%s has batch size %lld but query has %lld",
                    kt.shape[0] != q.shape[0] ? "key" : "value",
                    kt.shape[0] != q.shape[0] ? kt.shape[0] : vt.shape[0], q.shape[0]);
    if (kt.shape[b] != vt.shape[b])
        return fail(err, ERR_SHAPE_MISMATCH, "key has source length %lld but value has %lld",
                    kt.shape[b], vt.shape[b]);
    if (check_dim(b ? q.shape[0] : 1, lim->max_batch, "batch size", "max_batch", err) ||
        check_dim(q.shape[b], lim->max_target_len, "target length", "max_target_len", err) ||
        check_dim(kt.shape[b], lim->max_source_len, "source length", "max_source_len", err) ||
        check_dim(q.shape[b + 1], lim->max_embed_dim, "embed_dim", "max_embed_dim", err) ||
        check_dim(kt.shape[b + 1], lim->max_embed_dim, "kdim", "max_embed_dim", err) ||
        check_dim(vt.shape[b + 1], lim->max_embed_dim, "vdim", "max_embed_dim", err))
        return -1;
    p->N = b ? (int)q.shape[0] : 1;
    p->L = (int)q.shape[b], p->E = (int)q.shape[b + 1];
    p->S = (int)kt.shape[b], p->kdim = (int)kt.shape[b + 1], p->vdim = (int)vt.shape[b + 1];
    p->query = q.f, p->key = kt.f, p->value = vt.f;
    if (p->E % p->H)
        return fail(err, ERR_INVALID_PARAMETER, "embed_dim %d is not divisible by num_heads %d",
                    p->E, p->H);

    /* 4. weights, each with its exact PyTorch shape */
    json_t *w = json_object_get(root, "weights");
    if (w && !json_is_object(w))
        return fail(err, ERR_INVALID_PARAMETER, "weights must be an object");
    if (w) {
        const long long E = p->E;
        const struct { const char *key; const float **dst; int ndim; long long d0, d1; } ws[] = {
            {"in_proj_weight", &p->in_proj_weight, 2, 3 * E, E},
            {"q_proj_weight", &p->q_proj_weight, 2, E, E},
            {"k_proj_weight", &p->k_proj_weight, 2, E, p->kdim},
            {"v_proj_weight", &p->v_proj_weight, 2, E, p->vdim},
            {"in_proj_bias", &p->in_proj_bias, 1, 3 * E, 0},
            {"out_proj_weight", &p->out_proj_weight, 2, E, E},
            {"out_proj_bias", &p->out_proj_bias, 1, E, 0},
        };
        const size_t nws = sizeof ws / sizeof ws[0];
        json_object_foreach(w, k, v) {
            size_t i = 0;
            while (i < nws && strcmp(k, ws[i].key))
                i++;
            if (i == nws)
                return fail(err, ERR_INVALID_PARAMETER, "weights has an unknown field '%s'", k);
            char name[48];
            snprintf(name, sizeof name, "weights.%s", k);
            struct tensor t;
            if (decode_tensor(r, &t, v, K_FLOAT, name, lim, err) ||
                expect_shape(&t, name, ws[i].ndim, ws[i].d0, ws[i].d1, err))
                return -1;
            *ws[i].dst = t.f;
        }
    }

    /* 5. masks */
    if ((v = json_object_get(root, "attn_mask"))) {
        if (json_is_string(v)) {
            if (strcmp(json_string_value(v), "causal"))
                return fail(err, ERR_INVALID_PARAMETER, "attn_mask must be \"causal\" or a "
                            "tensor, not \"%s\"", json_string_value(v));
            p->mask_kind = ATT_MASK_CAUSAL;
        } else {
            struct tensor t;
            if (decode_tensor(r, &t, v, K_MASK, "attn_mask", lim, err))
                return -1;
            if (t.ndim != 2 && t.ndim != 3)
                return fail(err, ERR_SHAPE_MISMATCH, "attn_mask must have rank 2 (L, S) or 3 "
                            "(N*num_heads, L, S), got rank %d", t.ndim);
            p->mask_kind = t.is_bool ? ATT_MASK_BOOL : ATT_MASK_FLOAT;
            p->bool_mask = t.u8, p->float_mask = t.f;
            p->mask_ndim = t.ndim;
            for (int i = 0; i < t.ndim; i++)
                p->mask_shape[i] = (int)t.shape[i];
        }
    }
    if ((v = json_object_get(root, "key_padding_mask"))) {
        struct tensor t;
        if (decode_tensor(r, &t, v, K_BOOL, "key_padding_mask", lim, err))
            return -1;
        if (b ? expect_shape(&t, "key_padding_mask", 2, p->N, p->S, err)
              : expect_shape(&t, "key_padding_mask", 1, p->S, 0, err))
            return -1;
        p->key_padding_mask = t.u8;
    }

    /* 6. options */
    int need = 1, avg = 0;
    if (get_bool(root, "need_weights", 1, &need, err) ||
        get_bool(root, "average_attn_weights", 0, &avg, err))
        return -1;
    p->weights_mode = !need ? ATT_WEIGHTS_NONE : avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    if ((v = json_object_get(root, "scale"))) {
        double s = json_number_value(v);
        if (!json_is_number(v) || !(s > 0) || !isfinite((float)s))
            return fail(err, ERR_INVALID_PARAMETER, "scale must be a number > 0");
        p->has_scale = 1, p->scale = (float)s;
    }
    if ((v = json_object_get(root, "positional_encoding"))) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "sinusoidal"))
            return fail(err, ERR_INVALID_PARAMETER, "positional_encoding must be \"sinusoidal\"");
        p->positional_encoding = 1;
    }
    if ((v = json_object_get(root, "output_encoding"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "json") && strcmp(s, "base64")))
            return fail(err, ERR_INVALID_PARAMETER, "output_encoding must be \"json\" or "
                        "\"base64\"");
        r->base64_out = strcmp(s, "base64") == 0;
    }
    if (get_tokens(root, "tokens", &r->tokens_json, err) ||
        get_tokens(root, "key_tokens", &r->key_tokens_json, err))
        return -1;

    /* 7. the whole, as the core sees it; then the weights-output limit */
    size_t out_len, w_len;
    struct att_error ae;
    int st = att_check(p, &out_len, &w_len, &ae);
    if (st != ATT_OK)
        return fail(err, codec_error_from_att(st), "%s", ae.msg);
    if (w_len > (unsigned long long)lim->max_weights_elements)
        return fail(err, ERR_PAYLOAD_TOO_LARGE, "attention weights would have %zu elements, "
                    "more than %lld (max_weights_elements); ask for need_weights false or "
                    "average_attn_weights true", w_len, lim->max_weights_elements);
    return 0;
}

int codec_decode_request_reference(struct codec_request *r, const char *body, size_t len,
                                   const struct codec_limits *lim, struct codec_error *err)
{
    memset(r, 0, sizeof *r);
    att_params_init(&r->p);
    if (len == 0)
        return fail(err, ERR_INVALID_JSON, "the request body is empty");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root && json_error_code(&je) == json_error_numeric_overflow) {
        /* A number jansson cannot hold (beyond long long or double) is still
         * a JSON number. Load a copy in which each such number is replaced
         * by its stand-in: the real of the same value, or ±1e39 for one
         * beyond double (jsonnum.h). Tensors then read what the fast path
         * reads; integer fields see what int_field() explains. Rare, so a
         * second parse and a copy of the body are fine. */
        char *copy = malloc(len + 1);
        if (!copy)
            return fail(err, ERR_INTERNAL, "out of memory for a copy of the body");
        memcpy(copy, body, len);
        copy[len] = '\0';
        jsonnum_standin(copy, len);
        root = json_loadb(copy, len, JSON_REJECT_DUPLICATES, &je);
        free(copy);
    }
    if (!root)
        return fail(err, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s", je.line,
                    je.column, je.text);
    int rc = json_is_object(root)
                 ? decode_fields(r, root, lim, err)
                 : fail(err, ERR_INVALID_JSON, "the request body must be a JSON object");
    json_decref(root);
    return rc;
}

int codec_decode_request(struct codec_request *r, const char *body, size_t len,
                         const struct codec_limits *lim, struct codec_error *err)
{
    memset(r, 0, sizeof *r);
    att_params_init(&r->p);

    /* 1. the fast path (an empty body is not for it); on any doubt, start
     *    over on the reference path, which says what is wrong */
    struct fast f = {.n = 0};
    json_t *root = fast_scan(r, &f, body, len, lim);
    if (root) {
        r->fast = &f;
        int rc = decode_fields(r, root, lim, err);
        json_decref(root);
        r->fast = NULL;
        if (rc == 0)
            return 0;
    }
    codec_request_deinit(r);

    /* 2. jansson: the reference for what is accepted and what is said */
    return codec_decode_request_reference(r, body, len, lim, err);
}

void codec_request_deinit(struct codec_request *r)
{
    for (int i = 0; i < r->nbufs; i++)
        free(r->bufs[i]);
    free(r->tokens_json);
    free(r->key_tokens_json);
    r->nbufs = 0;
    r->tokens_json = r->key_tokens_json = NULL;
}

/* ---------------------------------------------------------------------- */
/* Encoding                                                                */

struct codec_stream; /* below: base64 tensors written when sent */

struct buf {
    char *p;
    size_t len, cap;
    int oom;
    struct codec_stream *defer; /* set: leave base64 payloads out, record them */
};

static int reserve(struct buf *b, size_t extra)
{
    if (b->oom)
        return 0;
    if (b->len + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return 0;
    }
    b->p = np, b->cap = cap;
    return 1;
}

static void put(struct buf *b, const char *s, size_t n)
{
    if (reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
    }
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* x: (shape[0], ...) as nested arrays, floats in their shortest form. */
static void put_nested(struct buf *b, const float *x, const long long *shape, int ndim)
{
    if (ndim == 1) {
        if (reserve(b, JSONNUM_ARRAY_MAX(shape[0])))
            b->len += jsonnum_format_array(b->p + b->len, x, (size_t)shape[0]);
        return;
    }
    size_t stride = 1;
    for (int d = 1; d < ndim; d++)
        stride *= (size_t)shape[d];
    put(b, "[", 1);
    for (long long i = 0; i < shape[0]; i++) {
        if (i)
            put(b, ",", 1);
        put_nested(b, x + (size_t)i * stride, shape + 1, ndim - 1);
    }
    put(b, "]", 1);
}

/* A response whose base64 payloads are encoded as it is sent: the JSON
 * text without them, and where each one goes. */
struct codec_stream {
    char *text;
    size_t text_len, total;
    struct {
        size_t at;                /* offset in text where it belongs */
        const unsigned char *src; /* the floats' bytes */
        size_t nbytes, enc;       /* bytes, and their base64 length */
    } bin[2];
    int nbin;
    float *out, *weights; /* owned */
};

static void put_tensor(struct buf *b, const float *x, const long long *shape, int ndim,
                       int base64)
{
    if (!base64) {
        put_nested(b, x, shape, ndim);
        return;
    }
    size_t count = 1;
    char s[32];
    puts_(b, "{\"shape\":[");
    for (int d = 0; d < ndim; d++) {
        int n = snprintf(s, sizeof s, "%s%lld", d ? "," : "", shape[d]);
        put(b, s, (size_t)n);
        count *= (size_t)shape[d];
    }
    puts_(b, "],\"dtype\":\"float32\",\"b64\":\"");
    size_t chars = (count * 4 + 2) / 3 * 4;
    if (b->defer && b->defer->nbin < 2) {
        struct codec_stream *st = b->defer;
        st->bin[st->nbin].at = b->len;
        st->bin[st->nbin].src = (const unsigned char *)x;
        st->bin[st->nbin].nbytes = count * 4;
        st->bin[st->nbin].enc = chars;
        st->nbin++;
    } else if (reserve(b, chars)) {
        b->len += codec_base64_encode(b->p + b->len, (const unsigned char *)x, count * 4);
        b->p[b->len] = '\0';
    }
    puts_(b, "\"}");
}

/* The whole 200 body into b (base64 payloads left out when b->defer). */
static void write_response(struct buf *bp, const struct codec_request *r, const float *out,
                           const float *weights)
{
    struct buf b = *bp;
    const struct att_params *p = &r->p;
    long long shape[4];
    int nd = 0;
    char s[256];

    /* One allocation of the right size: base64 is 4 characters per 3 bytes,
     * a shortest float at most JSONNUM_FLOAT_MAX characters with its comma. */
    size_t floats = (size_t)p->N * p->L * p->E;
    if (weights && p->weights_mode != ATT_WEIGHTS_NONE)
        floats += (size_t)p->N * p->L * p->S *
                  (p->weights_mode == ATT_WEIGHTS_PER_HEAD ? (size_t)p->H : 1);
    reserve(&b, (b.defer ? 0 : r->base64_out ? floats * 4 / 3 + 8 : floats * JSONNUM_FLOAT_MAX) +
                    1024 +
                    (r->tokens_json ? strlen(r->tokens_json) : 0) +
                    (r->key_tokens_json ? strlen(r->key_tokens_json) : 0));
    puts_(&b, "{\"output\":");
    if (r->batched)
        shape[nd++] = p->N;
    shape[nd++] = p->L, shape[nd++] = p->E;
    put_tensor(&b, out, shape, nd, r->base64_out);
    if (weights && p->weights_mode != ATT_WEIGHTS_NONE) {
        nd = 0;
        if (r->batched)
            shape[nd++] = p->N;
        if (p->weights_mode == ATT_WEIGHTS_PER_HEAD)
            shape[nd++] = p->H;
        shape[nd++] = p->L, shape[nd++] = p->S;
        puts_(&b, ",\"attention_weights\":");
        put_tensor(&b, weights, shape, nd, r->base64_out);
    }
    int n = snprintf(s, sizeof s, ",\"num_heads\":%d,\"head_dim\":%d,\"embed_dim\":%d,"
                     "\"target_len\":%d,\"source_len\":%d,\"batch\":%d", p->H, p->E / p->H,
                     p->E, p->L, p->S, p->N);
    put(&b, s, (size_t)n);
    if (r->tokens_json) {
        puts_(&b, ",\"tokens\":");
        puts_(&b, r->tokens_json);
    }
    if (r->key_tokens_json) {
        puts_(&b, ",\"key_tokens\":");
        puts_(&b, r->key_tokens_json);
    }
    put(&b, "}", 1);
    *bp = b;
}

char *codec_encode_response(const struct codec_request *r, const float *out,
                            const float *weights, size_t *len)
{
    struct buf b = {0};
    write_response(&b, r, out, weights);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

char *codec_encode_error(int code, const char *msg, size_t *len)
{
    json_t *o = json_pack("{s:{s:s,s:s}}", "error", "code", http_error_slug(code), "message",
                          msg ? msg : http_error_message(code));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s)
        *len = strlen(s);
    return s;
}

/* ---------------------------------------------------------------------- */
/* Streaming a base64 response                                             */

struct codec_stream *codec_stream_new(const struct codec_request *r, float *out,
                                      float *weights)
{
    struct codec_stream *st = calloc(1, sizeof *st);
    if (!st) {
        free(out);
        free(weights);
        return NULL;
    }
    st->out = out, st->weights = weights;
    struct buf b = {.defer = st};
    write_response(&b, r, out, weights);
    if (b.oom) {
        free(b.p);
        codec_stream_free(st);
        return NULL;
    }
    st->text = b.p, st->text_len = b.len;
    st->total = b.len;
    for (int i = 0; i < st->nbin; i++)
        st->total += st->bin[i].enc;
    return st;
}

size_t codec_stream_size(const struct codec_stream *st)
{
    return st->total;
}

/* Characters [o, o + max) of the base64 of src (nbytes), any o. */
static size_t b64_range(char *dst, size_t max, const unsigned char *src, size_t nbytes,
                        size_t o)
{
    const size_t enc = (nbytes + 2) / 3 * 4;
    size_t done = 0;
    while (done < max && o < enc) {
        const size_t q = o / 4, within = o % 4, from = 3 * q;
        if (within == 0 && max - done >= 4) { /* whole quads straight into dst */
            size_t quads = (max - done) / 4;
            if (quads > enc / 4 - q)
                quads = enc / 4 - q;
            size_t bytes = 3 * quads;
            if (bytes > nbytes - from)
                bytes = nbytes - from;
            const size_t w = codec_base64_encode(dst + done, src + from, bytes);
            done += w, o += w;
        } else { /* part of one quad */
            char tmp[4];
            codec_base64_encode(tmp, src + from, nbytes - from < 3 ? nbytes - from : 3);
            size_t k = 4 - within;
            if (k > max - done)
                k = max - done;
            memcpy(dst + done, tmp + within, k);
            done += k, o += k;
        }
    }
    return done;
}

size_t codec_stream_read(const struct codec_stream *st, size_t pos, char *dst, size_t max)
{
    size_t done = 0, vstart = 0, tpos = 0;
    for (int i = 0; i <= st->nbin && done < max; i++) {
        /* text up to the next payload (or the end), then the payload */
        const size_t tend = i < st->nbin ? st->bin[i].at : st->text_len, tl = tend - tpos;
        if (pos < vstart + tl) {
            size_t k = vstart + tl - pos;
            if (k > max - done)
                k = max - done;
            memcpy(dst + done, st->text + tpos + (pos - vstart), k);
            done += k, pos += k;
        }
        vstart += tl, tpos = tend;
        if (i < st->nbin && done < max) {
            if (pos < vstart + st->bin[i].enc) {
                size_t k = b64_range(dst + done, max - done, st->bin[i].src,
                                     st->bin[i].nbytes, pos - vstart);
                done += k, pos += k;
            }
            vstart += st->bin[i].enc;
        }
    }
    return done;
}

void codec_stream_free(struct codec_stream *st)
{
    if (!st)
        return;
    free(st->text);
    free(st->out);
    free(st->weights);
    free(st);
}
