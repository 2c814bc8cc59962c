/* scan.c -- the fast decoder's pass over a request body: its fields, tensors
 * and tokens, and what a large body is refused for; see scan.h. The lexical
 * layer it reads with (cursor, keys, values, line and column, the syntax
 * check of a whole body) is scan_json.c. */
#include "codec/scan.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "options/options.h"
#include "lib/jsonnum.h"
#include "codec/scan_json.h"
#include "lib/suggest.h"

const struct tensor *scan_tensor_of(const struct scan_tensors *st, const json_t *v,
                                    const struct failure **err)
{
    for (int i = 0; st && v && i < st->n; i++)
        if (st->placeholder[i] == v) {
            *err = st->bad[i] ? &st->err[i] : NULL;
            return &st->t[i];
        }
    return NULL;
}

/* The fields of a request: the options table's (options/options.h); of
 * weights: the core's names (att_weight_name). */
int scan_is_field(const char *key)
{
    return opt_find(key) >= 0;
}

int scan_weight_index(const char *key)
{
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        if (strcmp(key, att_weight_name((enum att_weight)i)) == 0)
            return i;
    return -1;
}

int scan_is_weight(const char *key)
{
    return scan_weight_index(key) >= 0;
}

int scan_unknown_field(struct failure *err, int in_weights, const char *key)
{
    char hint[96];
    if (in_weights) {
        const char *names[ATT_NWEIGHTS];
        for (int i = 0; i < ATT_NWEIGHTS; i++)
            names[i] = att_weight_name((enum att_weight)i);
        return fail_with(err, ERR_INVALID_PARAMETER, "weights has an unknown field '%s'%s", key,
                         suggest_hint(hint, sizeof hint, key, names, ATT_NWEIGHTS));
    }
    const char *fields[OPT_COUNT];
    for (int i = 0; i < OPT_COUNT; i++)
        fields[i] = opt_get((enum opt_id)i)->flags & OPT_ATTENTION ? opt_name((enum opt_id)i)
                                                                  : NULL;
    return fail_with(err, ERR_INVALID_PARAMETER, "unknown field '%s'%s", key,
                     suggest_hint(hint, sizeof hint, key, fields, OPT_COUNT));
}

/* The answer for a numeric array the fast reader stopped in; 1 (doubt)
 * where jansson may still read it: booleans, escaped strings. at: the
 * array's offset in the body. */
static int numbers_error(struct scan *sc, const struct jsonnum_error *je, size_t at,
                         const char *name)
{
    const size_t off = at + je->offset;
    const char c = off < sc->len ? sc->s[off] : 0;
    int line, col;
    switch (je->code) {
    case JSONNUM_ERR_SYNTAX:
        return scan_bad_json(sc, off, je->msg);
    case JSONNUM_ERR_LIMIT:
        return scan_refuse(sc, ERR_PAYLOAD_TOO_LARGE, "%s has more than %lld elements "
                           "(max_tensor_elements)", name, sc->max);
    case JSONNUM_ERR_NOMEM:
        return scan_refuse(sc, ERR_INTERNAL, "out of memory decoding %s", name);
    case JSONNUM_ERR_TYPE:
        if (c == '"') {
            for (size_t i = off + 1; i < sc->len && sc->s[i] != '"'; i++)
                if (sc->s[i] == '\\')
                    return 1;
        }
        break;
    default:
        break;
    }
    scan_line_col(sc, off, &line, &col);
    return scan_refuse(sc, ERR_INVALID_TENSOR, "%s: %s (line %d, column %d)", name, je->msg,
                       line, col);
}

/* An array of numbers at the cursor (nested to any rank) into floats kept
 * in the arena: 0, 1 (doubt) or -1 (refused). */
static int scan_numbers(struct scan *sc, struct jsonnum_array *a, unsigned opt,
                        const char *name)
{
    struct jsonnum_error je;
    size_t used;
    if (peek(sc) != '[')
        return 1;
    int rc = jsonnum_parse_array_opt(a, sc->s + sc->pos, sc->len - sc->pos, (size_t)sc->max,
                                     opt, &used, &je);
    if (rc != JSONNUM_OK)
        return numbers_error(sc, &je, sc->pos, name);
    sc->pos += used;
    return tensor_arena_keep(sc->a, a->data) ? 0 : 1;
}

/* How to read the array at the cursor for a field of this kind: booleans
 * for key_padding_mask, and for attn_mask when its first element is one
 * (as tensor.c decides); else numbers, "-inf" among them in attn_mask. */
static unsigned leaf_options(struct scan *sc, enum tensor_kind kind)
{
    if (kind == TENSOR_BOOL)
        return JSONNUM_BOOL;
    if (kind == TENSOR_FLOAT)
        return 0;
    size_t p = sc->pos;
    while (p < sc->len && strchr("[ \n\r\t", sc->s[p]) && sc->s[p])
        p++;
    return p < sc->len && (sc->s[p] == 't' || sc->s[p] == 'f') ? JSONNUM_BOOL : JSONNUM_NEG_INF;
}

/* The 0/1 floats of a boolean array as bytes, in place. */
static void to_bytes(struct tensor *t)
{
    uint8_t *u = (uint8_t *)(void *)t->f;
    for (size_t i = 0; i < t->count; i++)
        u[i] = t->f[i] != 0;
    t->u8 = u, t->f = NULL, t->is_bool = 1;
}

/* The "b64" string at the cursor when "shape" and "dtype" came before it
 * (as this service and its clients write them), so its length is known:
 * decoded at once into t, which finds its end too. Returns its length, or
 * 0 to read it the usual way (any problem: that way names it). */
static size_t read_sized(struct scan *sc, struct tensor *t, json_t *shape, json_t *dtype,
                         const char *name)
{
    const char *dt = json_string_value(dtype);
    struct tensor s = {0};
    struct failure e;
    if (!dt || (strcmp(dt, "float32") && strcmp(dt, "bool")) ||
        tensor_shape_from_json(&s, shape, name, sc->max, &e))
        return 0;
    s.is_bool = strcmp(dt, "bool") == 0;
    const size_t at = sc->pos + 1, n = tensor_read_b64_sized(&s, sc->s + at, sc->len - at, sc->a);
    if (n)
        t->f = s.f, t->u8 = s.u8;
    return n;
}

/* {shape, data} or {shape, dtype, b64}, the cursor after the '{': 0, 1
 * (doubt) or -1 (refused, with the messages tensor.c's from_object gives). */
static int scan_object(struct scan *sc, struct tensor *t, enum tensor_kind kind,
                       const char *name)
{
    json_t *shape = NULL, *dtype = NULL;
    const char *b64 = NULL;
    size_t b64_len = 0, have = 0;
    int have_data = 0, rc = 0, decoded = 0;
    if (peek(sc) == '}')
        sc->pos++;
    else
        for (;;) {
            char k[32];
            int odd;
            const size_t at = (skip_ws(sc), sc->pos);
            if (scan_key(sc, k, &odd)) {
                rc = sc->errors ? scan_bad_json(sc, at, "string or '}' expected") : 1;
            } else if (!odd && strcmp(k, "shape") == 0 && !shape) {
                rc = (shape = scan_field_value(sc)) ? 0 : sc->refused ? -1 : 1;
            } else if (!odd && strcmp(k, "dtype") == 0 && !dtype) {
                rc = (dtype = scan_field_value(sc)) ? 0 : sc->refused ? -1 : 1;
            } else if (!odd && strcmp(k, "b64") == 0 && !b64) {
                /* no escape check here: the base64 decoder refuses '\\' and
                 * every other byte outside its alphabet (then: jansson) */
                const char *q = NULL;
                if (peek(sc) == '"') {
                    const size_t got = read_sized(sc, t, shape, dtype, name);
                    decoded = got > 0;
                    q = decoded ? sc->s + sc->pos + 1 + got
                                : memchr(sc->s + sc->pos + 1, '"', sc->len - sc->pos - 1);
                }
                rc = q ? 0 : sc->errors ? scan_refuse(sc, ERR_INVALID_TENSOR, "%s.b64 must be "
                                                          "a base64 string", name) : 1;
                if (q) {
                    b64 = sc->s + sc->pos + 1, b64_len = (size_t)(q - b64);
                    sc->pos = (size_t)(q - sc->s) + 1;
                }
            } else if (!odd && strcmp(k, "data") == 0 && !have_data) {
                struct jsonnum_array a;
                char dn[48];
                snprintf(dn, sizeof dn, "%s.data", name);
                skip_ws(sc);
                const unsigned o = leaf_options(sc, kind);
                rc = scan_numbers(sc, &a, o, dn);
                if (rc == 0 && a.ndim != 1)
                    rc = scan_refuse(sc, ERR_INVALID_TENSOR, "%s.data must be a flat array",
                                     name);
                if (rc == 0) {
                    t->f = a.data, t->count = have = a.count, have_data = 1;
                    if (o == JSONNUM_BOOL)
                        to_bytes(t);
                }
            } else if (!odd && (!strcmp(k, "shape") || !strcmp(k, "dtype") ||
                                !strcmp(k, "b64") || !strcmp(k, "data"))) {
                rc = scan_bad_json(sc, at, "duplicate object key");
            } else {
                sc->refused = 1;
                rc = tensor_unknown_field(sc->err, name, k);
            }
            if (rc)
                break;
            const int c = peek(sc);
            sc->pos++;
            if (c == '}')
                break;
            if (c != ',') {
                rc = scan_bad_json(sc, sc->pos - 1, "',' or '}' expected");
                break;
            }
        }
    struct failure e;
    if (rc == 0 && tensor_shape_from_json(t, shape, name, sc->max, &e))
        rc = scan_refuse(sc, e.code, "%s", e.msg);
    if (rc == 0 && have_data == (b64 != NULL))
        rc = scan_refuse(sc, ERR_INVALID_TENSOR, "%s needs exactly one of 'data' or 'b64'",
                         name);
    if (rc == 0 && have_data) {
        char s[96];
        tensor_shape_str(s, sizeof s, t->shape, t->ndim);
        if (dtype)
            rc = scan_refuse(sc, ERR_INVALID_TENSOR, "%s: 'dtype' goes with 'b64', not 'data'",
                             name);
        else if (have != t->count)
            rc = scan_refuse(sc, ERR_INVALID_TENSOR, "%s.data has %zu elements but shape %s "
                             "needs %zu", name, have, s, t->count);
    }
    if (rc == 0 && b64) {
        const char *dt = json_string_value(dtype);
        t->is_bool = dt && strcmp(dt, "bool") == 0;
        if (!dt || (!t->is_bool && strcmp(dt, "float32")))
            rc = scan_refuse(sc, ERR_INVALID_TENSOR, "%s.dtype must be \"float32\" (or \"bool\" "
                             "for masks) with 'b64'", name);
        else if (!decoded && tensor_read_b64(t, b64, b64_len, sc->a, name, &e))
            /* an escape is for jansson to read; anything else is the answer */
            rc = memchr(b64, '\\', b64_len) ? 1 : scan_refuse(sc, e.code, "%s", e.msg);
    }
    json_decref(shape);
    json_decref(dtype);
    return rc;
}

/* A tensor at the cursor into t: 0, 1 (doubt) or -1 (refused). */
static int read_tensor(struct scan *sc, struct tensor *t, enum tensor_kind kind,
                       const char *name)
{
    memset(t, 0, sizeof *t);
    const int c = peek(sc);
    if (c == '[') { /* nested arrays of numbers, or of booleans in a mask */
        struct jsonnum_array a;
        const unsigned o = leaf_options(sc, kind);
        const int rc = scan_numbers(sc, &a, o, name);
        if (rc)
            return rc;
        t->f = a.data, t->count = a.count, t->ndim = a.ndim;
        memcpy(t->shape, a.shape, sizeof t->shape);
        if (o == JSONNUM_BOOL)
            to_bytes(t);
        return 0;
    }
    if (c == '{') {
        sc->pos++;
        return scan_object(sc, t, kind, name);
    }
    return 1;
}

/* A field that is not a tensor (num_heads, scale, ...). On a large body an
 * array or object of more than SCAN_SMALL bytes is none of these fields'
 * types: it is blanked to an empty array, and the schema names the field
 * and its type, without a DOM of the value. 0 or -1. */
static int field_value(struct scan *sc)
{
    const int c = peek(sc);
    if (sc->errors && (c == '[' || c == '{')) {
        const size_t start = sc->pos;
        if (scan_skip_value(sc) == 0 && sc->pos - start > SCAN_SMALL)
            return scan_blank(sc->blanks, start, sc->pos, 1) ? -1 : 0;
        sc->pos = start;
    }
    return scan_checked_value(sc);
}

/* The tensor just read into the next slot, its value [start, pos): blanked
 * for jansson; its placeholder is found in the DOM after the load. */
static int keep(struct scan *sc, size_t start, const char *key, int in_weights)
{
    struct scan_tensors *st = sc->st;
    snprintf(st->key[st->n], sizeof st->key[st->n], "%s", key);
    st->in_weights[st->n] = in_weights;
    st->placeholder[st->n] = NULL;
    if (scan_blank(sc->blanks, start, sc->pos, 0))
        return -1;
    st->n++;
    return 0;
}

/* A tensor at the cursor into the next slot (key: its field, of the
 * request or in_weights). On a large body, a tensor the fast reader could
 * not read (booleans, escapes) or refused while small is left to jansson,
 * and the schema reads that (tensor_from_json: the reference's own
 * messages); a large one it refused keeps the fast reader's message.
 * 0 or -1. */
static int tensor_value(struct scan *sc, enum tensor_kind kind, const char *name,
                        const char *key, int in_weights)
{
    if (sc->st->n == SCAN_MAX_TENSORS)
        return -1;
    const size_t start = (skip_ws(sc), sc->pos);
    const int slot = sc->st->n;
    const int rc = read_tensor(sc, &sc->st->t[slot], kind, name);
    sc->st->bad[slot] = 0;
    if (rc == 0)
        return keep(sc, start, key, in_weights);
    if (!sc->errors)
        return -1;
    sc->pos = start;
    const int sk = scan_skip_value(sc);
    if (rc < 0 && sk == 0 && sc->pos - start > SCAN_SMALL) {
        /* the schema reports it when it reaches this field, in its order */
        sc->st->bad[slot] = 1;
        sc->st->err[slot] = *sc->err;
        sc->refused = 0;
        return keep(sc, start, key, in_weights);
    }
    if (rc < 0 && sk)
        return -1; /* not JSON: sc->err holds the answer */
    sc->refused = 0;
    sc->pos = start;
    return scan_checked_value(sc);
}

/* tokens or key_tokens: counted first, without a DOM; more than max
 * (a bound on L or S) cannot be right, nor more than SCAN_TOKENS_MAX_BYTES
 * of text. Then, bounded, left for jansson. 0 or -1. */
static int tokens_value(struct scan *sc, const char *key, int max, const char *what,
                        const char *limit)
{
    const size_t start = (skip_ws(sc), sc->pos);
    size_t n = 0;
    int strings = 1;
    if (peek(sc) == '[') {
        sc->pos++;
        int c = peek(sc);
        while (c != ']') {
            if (c != '"') {
                strings = 0;
                break;
            }
            sc->pos++;
            while (sc->pos < sc->len && sc->s[sc->pos] != '"')
                sc->pos += sc->s[sc->pos] == '\\' ? 2 : 1;
            if (sc->pos >= sc->len)
                break;
            sc->pos++, n++;
            c = peek(sc);
            if (c == ',')
                sc->pos++, c = peek(sc);
            else if (c != ']')
                break;
        }
    } else {
        strings = 0;
    }
    if (strings && n > (size_t)max) {
        if (sc->errors)
            scan_refuse(sc, ERR_INVALID_PARAMETER, "%s has %zu entries but needs exactly one "
                        "per %s position, and there are at most %d (%s)", key, n, what, max,
                        limit);
        return -1;
    }
    if (strings && sc->errors && sc->pos - start > SCAN_TOKENS_MAX_BYTES) {
        scan_refuse(sc, ERR_PAYLOAD_TOO_LARGE, "%s takes %zu bytes; labels may take at most %d",
                    key, sc->pos - start, SCAN_TOKENS_MAX_BYTES);
        return -1;
    }
    sc->pos = start;
    if (!strings && sc->errors && scan_skip_value(sc) == 0 && sc->pos - start > SCAN_SMALL) {
        if (sc->s[start] == '[')
            scan_refuse(sc, ERR_INVALID_PARAMETER, "%s[%zu] is not a string", key, n);
        else
            scan_refuse(sc, ERR_INVALID_PARAMETER, "%s must be an array of strings", key);
        return -1;
    }
    sc->pos = start;
    return scan_checked_value(sc);
}

/* weights: an object of tensors. 0 or -1. */
static int weights_value(struct scan *sc)
{
    char seen[SCAN_MAX_TENSORS][32];
    size_t n_seen = 0;
    sc->pos++; /* '{' */
    if (peek(sc) == '}') {
        sc->pos++;
        return 0;
    }
    for (;;) {
        char k[32], name[48];
        int odd;
        const size_t at = (skip_ws(sc), sc->pos);
        if (scan_key(sc, k, &odd)) {
            if (sc->errors)
                scan_bad_json(sc, at, "string or '}' expected");
            return -1;
        }
        if (odd || !scan_is_weight(k)) {
            if (sc->errors)
                sc->refused = 1, scan_unknown_field(sc->err, 1, k);
            return -1;
        }
        if (scan_seen_before(seen, &n_seen, SCAN_MAX_TENSORS, k)) {
            if (sc->errors)
                scan_bad_json(sc, at, "duplicate object key");
            return -1;
        }
        snprintf(name, sizeof name, "weights.%s", k);
        if (tensor_value(sc, TENSOR_FLOAT, name, k, 1))
            return -1;
        const int c = peek(sc);
        sc->pos++;
        if (c == '}')
            return 0;
        if (c != ',') {
            if (sc->errors)
                scan_bad_json(sc, sc->pos - 1, "',' or '}' expected");
            return -1;
        }
    }
}

/* jansson over the body with the tensors read blanked; each slot's
 * placeholder is the "0" its value became. */
static json_t *load(struct scan *sc)
{
    json_error_t je;
    int nomem;
    json_t *root = scan_load_blanked(sc->blanks, sc->s, sc->len, 1, sc->errors, &je, &nomem);
    if (!root) {
        /* every value was checked alone: what jansson still finds in the
         * whole (a depth past its limit) is the syntax check's to say */
        if (sc->errors && !nomem && scan_json_check(sc->s, sc->len, sc->err) == 0)
            fail_with(sc->err, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s",
                      je.line, je.column, je.text);
        if (sc->errors && !nomem)
            sc->refused = 1;
        return NULL;
    }
    struct scan_tensors *st = sc->st;
    json_t *weights = json_object_get(root, opt_name(OPT_WEIGHTS));
    for (int i = 0; i < st->n; i++) {
        st->placeholder[i] = json_object_get(st->in_weights[i] ? weights : root, st->key[i]);
        if (!json_is_integer(st->placeholder[i])) { /* cannot be: the walk read this field */
            json_decref(root);
            return NULL;
        }
    }
    return root;
}

int scan_request(json_t **out, const char *body, size_t len, const struct codec_limits *lim,
                 int errors, struct scan_tensors *st, struct tensor_arena *a,
                 struct failure *err)
{
    struct scan_blanks blanks = {0};
    struct scan sc = {body, len, 0, lim->max_tensor_elements, errors, st, a, err, 0, &blanks};
    char seen[128][32]; /* the fields read: each at most once */
    size_t n_seen = 0;
    st->n = 0;
    *out = NULL;
    int c = peek(&sc);
    if (c != '{') {
        if (!errors)
            goto defer;
        if (c == '[') {
            if (scan_skip_value(&sc) == -2)
                scan_bad_json(&sc, 0, "maximum parsing depth reached");
            else
                scan_refuse(&sc, ERR_INVALID_JSON, "the request body must be a JSON object");
        } else {
            scan_bad_json(&sc, sc.pos, "'[' or '{' expected");
        }
        goto defer;
    }
    sc.pos++;
    if (peek(&sc) == '}') {
        sc.pos++;
    } else {
        for (;;) {
            char key[32];
            int odd, rc;
            const size_t at = (skip_ws(&sc), sc.pos);
            if (scan_key(&sc, key, &odd)) {
                if (errors)
                    scan_bad_json(&sc, at, "string or '}' expected");
                goto defer;
            }
            /* an unknown field is refused before its value is read */
            if (odd || !scan_is_field(key)) {
                if (errors)
                    sc.refused = 1, scan_unknown_field(err, 0, key);
                goto defer;
            }
            if (n_seen == sizeof seen / sizeof seen[0])
                goto defer; /* cannot be: more fields than there are */
            if (scan_seen_before(seen, &n_seen, sizeof seen / sizeof seen[0], key)) {
                if (errors)
                    scan_bad_json(&sc, at, "duplicate object key");
                goto defer;
            }
            const int str = peek(&sc) == '"';
            const int id = opt_find(key);
            if (id == OPT_QUERY || id == OPT_KEY || id == OPT_VALUE)
                rc = tensor_value(&sc, TENSOR_FLOAT, key, key, 0);
            else if (!str && id == OPT_KEY_PADDING_MASK)
                rc = tensor_value(&sc, TENSOR_BOOL, key, key, 0);
            else if (!str && id == OPT_ATTN_MASK)
                rc = tensor_value(&sc, TENSOR_MASK, key, key, 0);
            else if (id == OPT_WEIGHTS && peek(&sc) == '{')
                rc = weights_value(&sc);
            else if (id == OPT_TOKENS)
                rc = tokens_value(&sc, key, lim->max_target_len, opt_name(OPT_QUERY),
                                  "max_target_len");
            else if (id == OPT_KEY_TOKENS)
                rc = tokens_value(&sc, key, lim->max_source_len, opt_name(OPT_KEY),
                                  "max_source_len");
            else
                rc = field_value(&sc);
            if (rc)
                goto defer;
            c = peek(&sc);
            sc.pos++;
            if (c == '}')
                break;
            if (c != ',') {
                if (errors)
                    scan_bad_json(&sc, sc.pos - 1, "',' or '}' expected");
                goto defer;
            }
        }
    }
    if (peek(&sc) != -1) {
        if (errors)
            scan_bad_json(&sc, sc.pos, "end of file expected");
        goto defer; /* trailing bytes */
    }
    *out = load(&sc);
    if (!*out)
        goto defer;
    scan_blanks_free(&blanks);
    return 0;
defer:
    scan_blanks_free(&blanks);
    return errors && sc.refused ? -1 : 1;
}
