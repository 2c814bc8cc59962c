/* v2_scan.c -- the big "data" arrays of a v2 infer request, read straight
 * into floats (or bytes) by jsonnum_parse_array_opt(), before jansson reads
 * the rest: see codec/v2_internal.h (struct v2_fast) and codec/v2.h.
 *
 * A walk over the JSON part finds root.inputs[i].data. Each one that is a
 * clean numeric (or boolean) array is read here, and jansson then loads
 * the body with that array's bytes replaced by "0" and spaces (scan_json.h:
 * the blanked load of both fast decoders), so every other byte keeps its
 * offset (and jansson its error columns, which v2's message quotes) and
 * the DOM holds one node where the array held one a number. The schema
 * (codec/v2.c) takes input i's tensor from slot i instead of the
 * placeholder. An array the parser stops in is left to jansson, which
 * says what is wrong; only in a large body (errors) is one of more than
 * SCAN_SMALL bytes replaced too, its refusal kept for when the schema
 * reaches it, and so is a large value the schema ignores (skip_value). */
#include "codec/v2_scan.h"
#include "codec/v2_inputs.h"
#include "codec/v2_params.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonnum.h"
#include "codec/scan_json.h"

enum { MODE_NONE, MODE_READ, MODE_DROP };

static int add_range(struct v2_fast *f, size_t start, size_t end)
{
    return scan_blank(&f->blanks, start, end, 0);
}

/* After a member of an object or array (close: '}' or ']'): 0 when
 * another follows, 1 at the end (the cursor past either), -1 neither. */
static int next_member(struct scan *sc, char close)
{
    const int c = peek(sc);
    sc->pos++;
    return c == close ? 1 : c == ',' ? 0 : -1;
}

/* How input i's "data" is to be read: by its "name" (a plain string),
 * before reading it. MODE_DROP: the schema refuses input i before it
 * reads its data, so only the data's extent matters. */
static int input_mode(struct scan *sc, size_t i, const struct model *m, int *idx)
{
    int mode = MODE_DROP;
    *idx = -1;
    sc->pos++; /* '{' */
    if (peek(sc) == '}')
        return mode;
    for (;;) {
        char k[32];
        int odd;
        if (scan_key(sc, k, &odd))
            return MODE_NONE;
        if (!odd && strcmp(k, "name") == 0 && peek(sc) == '"') {
            const char *s = sc->s + sc->pos + 1;
            const char *q = memchr(s, '"', sc->len - sc->pos - 1);
            char name[32];
            if (!q || memchr(s, '\\', (size_t)(q - s)))
                return MODE_NONE; /* an escape: what it names is for jansson */
            if ((size_t)(q - s) < sizeof name) {
                memcpy(name, s, (size_t)(q - s));
                name[q - s] = '\0';
                *idx = v2_input_index(name);
            }
            mode = *idx < 0 || (*idx >= IN_WEIGHT && m) || i >= IN_COUNT ? MODE_DROP
                                                                          : MODE_READ;
        }
        if (scan_skip_value(sc))
            return MODE_NONE;
        const int nx = next_member(sc, '}');
        if (nx)
            return nx > 0 ? mode : MODE_NONE;
    }
}

/* The options for the array at the cursor: booleans for key_padding_mask,
 * and for attn_mask (or a dropped input) when its first element is one (as
 * tensor.c decides); else numbers, "-inf" among them in attn_mask. */
static unsigned leaf_options(const struct scan *sc, int mode, int idx)
{
    if (mode == MODE_READ && (idx == IN_KPM || idx == IN_SEQ_START || idx == IN_SEQ_END))
        return JSONNUM_BOOL;
    if (mode == MODE_READ && idx != IN_ATTN_MASK)
        return 0;
    size_t p = sc->pos;
    while (p < sc->len && strchr("[ \n\r\t", sc->s[p]) && sc->s[p])
        p++;
    return p < sc->len && (sc->s[p] == 't' || sc->s[p] == 'f') ? JSONNUM_BOOL : JSONNUM_NEG_INF;
}

/* The refusal kept for an array the parser stopped in (a large body). */
static void keep_refusal(struct v2_fast_slot *slot, const struct scan *sc,
                         const struct jsonnum_error *je, size_t at, const char *name)
{
    int line, col;
    slot->state = V2_FAST_REFUSED;
    if (je->code == JSONNUM_ERR_LIMIT) {
        fail_with(&slot->err, ERR_PAYLOAD_TOO_LARGE, "input '%s': data has more than %lld "
                  "elements (max_tensor_elements)", name, sc->max);
        return;
    }
    if (je->code == JSONNUM_ERR_NOMEM) {
        fail_with(&slot->err, ERR_INTERNAL, "out of memory decoding input '%s'", name);
        return;
    }
    scan_line_col(sc, at + je->offset, &line, &col);
    fail_with(&slot->err, ERR_INVALID_TENSOR, "input '%s': data: %s (line %d, column %d)", name,
              je->msg, line, col);
}

/* The "data" of input i at the cursor: 0, or -1 (refused: sc->err). */
static int read_one(struct scan *sc, struct v2_fast *f, size_t i, int mode, int idx)
{
    skip_ws(sc);
    const size_t start = sc->pos;
    if (peek(sc) != '[' || (mode == MODE_READ && idx == IN_SEQ_ID))
        return scan_skip_value(sc) ? 1 : 0; /* ids: integers beyond float32, strings */
    struct jsonnum_array a;
    struct jsonnum_error je;
    size_t used;
    const unsigned opt = leaf_options(sc, mode, idx);
    const size_t max = mode == MODE_READ ? (size_t)sc->max : SIZE_MAX;
    const int rc = jsonnum_parse_array_opt(&a, sc->s + start, sc->len - start, max, opt, &used,
                                           &je);
    if (rc == JSONNUM_OK) {
        sc->pos = start + used;
        if (mode == MODE_DROP) {
            jsonnum_array_deinit(&a);
            return add_range(f, start, sc->pos) ? 1 : 0;
        }
        struct v2_fast_slot *slot = &f->slot[i];
        struct tensor *t = &slot->t;
        memset(t, 0, sizeof *t);
        if (!tensor_arena_keep(sc->a, a.data))
            return 1;
        t->f = a.data, t->count = a.count, t->ndim = a.ndim;
        memcpy(t->shape, a.shape, sizeof t->shape);
        if (opt == JSONNUM_BOOL) { /* the 0/1 floats as bytes, in place */
            uint8_t *u = (uint8_t *)(void *)t->f;
            for (size_t j = 0; j < t->count; j++)
                u[j] = t->f[j] != 0;
            t->u8 = u, t->f = NULL, t->is_bool = 1;
        }
        slot->state = V2_FAST_READ;
        return add_range(f, start, sc->pos) ? 1 : 0;
    }
    if (je.code == JSONNUM_ERR_SYNTAX) /* not JSON: the whole body's first fault */
        return sc->errors ? (scan_json_check(sc->s, sc->len, sc->err) ? -1 : 1) : 1;
    sc->pos = start;
    if (!sc->errors)
        return 1; /* jansson reads it and says what is wrong */
    if (scan_skip_value(sc) || scan_json_check(sc->s + start, sc->pos - start, sc->err))
        return scan_json_check(sc->s, sc->len, sc->err) ? -1 : 1; /* not JSON */
    if (sc->pos - start <= SCAN_SMALL)
        return 1; /* jansson reads it (a DOM of at most ~30x SCAN_SMALL) */
    if (mode == MODE_READ)
        keep_refusal(&f->slot[i], sc, &je, start, v2_input_name(idx));
    return add_range(f, start, sc->pos) ? 1 : 0;
}

/* A value at the cursor. One the schema ignores (an unknown field's, an
 * unknown parameter's, any but the name of an input refused before its
 * data is read) is replaced too in a large body when it takes more than
 * SCAN_SMALL bytes, its text checked, not loaded. 0, 1 (stop) or -1. */
static int skip_value(struct scan *sc, struct v2_fast *f, int ignored)
{
    const size_t start = (skip_ws(sc), sc->pos);
    if (scan_skip_value(sc))
        return 1;
    if (!ignored || !sc->errors || sc->pos - start <= SCAN_SMALL)
        return 0;
    if (scan_json_check(sc->s + start, sc->pos - start, sc->err))
        return scan_json_check(sc->s, sc->len, sc->err) ? -1 : 1; /* not JSON */
    return add_range(f, start, sc->pos) ? 1 : 0;
}

/* "parameters", an object at the cursor: the value of a name that is not
 * a parameter (v2_param_known: refused, or Triton's triton_ ones, ignored)
 * is not read. 0, 1 (stop) or -1. */
static int walk_parameters(struct scan *sc, struct v2_fast *f)
{
    sc->pos++; /* '{' */
    if (peek(sc) == '}')
        return sc->pos++, 0;
    for (;;) {
        char k[32];
        int odd;
        if (scan_key(sc, k, &odd))
            return 1;
        const int rc = skip_value(sc, f, odd || !v2_param_known(V2_PARAMS_REQUEST, k));
        if (rc)
            return rc;
        const int nx = next_member(sc, '}');
        if (nx)
            return nx > 0 ? 0 : 1;
    }
}

/* Input i, an object at the cursor: 0, 1 (stop the walk) or -1. */
static int walk_input(struct scan *sc, struct v2_fast *f, size_t i, const struct model *m)
{
    const size_t open = sc->pos;
    int idx;
    const int mode = input_mode(sc, i, m, &idx);
    if (mode == MODE_NONE)
        return 1;
    sc->pos = open + 1;
    if (peek(sc) == '}')
        return sc->pos++, 0;
    for (;;) {
        char k[32];
        int odd, rc = 0;
        if (scan_key(sc, k, &odd))
            return 1;
        static const char *const fields[] = {"name", "shape", "datatype", "parameters"};
        int known = 0;
        for (size_t j = 0; j < sizeof fields / sizeof fields[0]; j++)
            known |= !odd && strcmp(k, fields[j]) == 0;
        if (!odd && strcmp(k, "data") == 0)
            rc = read_one(sc, f, i, mode, idx);
        else
            rc = skip_value(sc, f, mode == MODE_DROP ? strcmp(k, "name") != 0 : !known);
        if (rc)
            return rc;
        const int nx = next_member(sc, '}');
        if (nx)
            return nx > 0 ? 0 : 1;
    }
}

/* "inputs", an array at the cursor: 0, 1 (stop) or -1. */
static int walk_inputs(struct scan *sc, struct v2_fast *f, const struct model *m)
{
    sc->pos++; /* '[' */
    if (peek(sc) == ']')
        return sc->pos++, 0;
    for (size_t i = 0;; i++) {
        const int rc = peek(sc) == '{' ? walk_input(sc, f, i, m) : scan_skip_value(sc) ? 1 : 0;
        if (rc)
            return rc;
        const int nx = next_member(sc, ']');
        if (nx)
            return nx > 0 ? 0 : 1;
    }
}

/* Whether "data" (with its quotes) is in s. */
static int has_data(const char *s, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++) {
        const char *q = memchr(s + i, '"', len - i);
        if (!q)
            return 0;
        i = (size_t)(q - s);
        if (i + 6 <= len && memcmp(q, "\"data\"", 6) == 0)
            return 1;
    }
    return 0;
}

int v2_fast_scan(struct v2_fast *f, const char *s, size_t len, int errors,
                 const struct model *m, const struct codec_limits *lim,
                 struct tensor_arena *a, struct failure *err)
{
    memset(f, 0, sizeof *f);
    /* a small body reads only "data" arrays here, and refuses nothing: one
     * without the word (a binary request's header) has none to read */
    if (!errors && !has_data(s, len))
        return 0;
    struct scan sc = {s, len, 0, lim->max_tensor_elements, errors, NULL, a, err, 0, NULL};
    if (expect(&sc, '{') || peek(&sc) == '}')
        return 0;
    for (;;) {
        char k[32];
        int odd, rc;
        if (scan_key(&sc, k, &odd))
            return 0;
        const int known = !odd && (!strcmp(k, "id") || !strcmp(k, "parameters") ||
                                    !strcmp(k, "inputs") || !strcmp(k, "outputs") ||
                                    !strcmp(k, "model_name"));
        if (!odd && strcmp(k, "inputs") == 0 && peek(&sc) == '[')
            rc = walk_inputs(&sc, f, m);
        else if (!odd && strcmp(k, "parameters") == 0 && peek(&sc) == '{')
            rc = walk_parameters(&sc, f);
        else
            rc = skip_value(&sc, f, !known);
        if (rc)
            return rc < 0 ? -1 : 0;
        if (next_member(&sc, '}'))
            return 0;
    }
}

size_t v2_json_end(const char *s, size_t len)
{
    struct scan sc = {s, len, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    if (peek(&sc) != '{' || scan_skip_value(&sc))
        return 0;
    const size_t end = sc.pos;
    struct failure e;
    return peek(&sc) >= 0 && scan_json_check(s, end, &e) == 0 ? end : 0;
}

json_t *v2_fast_load(const struct v2_fast *f, const char *s, size_t n, json_error_t *je,
                     int *nomem)
{
    return scan_load_blanked(&f->blanks, s, n, 0, 1, je, nomem);
}

void v2_fast_free(struct v2_fast *f)
{
    scan_blanks_free(&f->blanks);
}
