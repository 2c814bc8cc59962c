/* test_jsonnum_differential.c -- lib/jsonnum's array parsing against
 * jansson as the reference on generated and mutated inputs. */
#include <criterion/criterion.h>
#include <fenv.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonnum.h"
#include "tests/support/check.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static unsigned rng_below(uint64_t *s, unsigned n)
{
    return (unsigned)(check_xorshift_star(s) >> 33) % n;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* ---------------------------------------------------------------------- */
/* Differential test                                                       */

/* The naive reference: jansson's DOM (of the text after jsonnum_standin),
 * walked in document order with the rules of jsonnum.h, so it names the same
 * first problem the parser meets. v sits at depth d (0: the document). */
struct ref {
    int ndim;
    long long shape[JSONNUM_MAX_RANK];
    size_t count, max_count;
    unsigned flags;
    float vals[4096];
};

static int is_neg_inf_word(json_t *v)
{
    const char *s = json_string_value(v);
    return s && (strcmp(s, "-inf") == 0 || strcmp(s, "-Infinity") == 0);
}

static int ref_walk(struct ref *r, json_t *v, int d)
{
    if (json_is_array(v)) {
        if (d > 0 && r->ndim && d >= r->ndim)
            return JSONNUM_ERR_SHAPE;
        if (d > 0 && !r->ndim && d >= JSONNUM_MAX_RANK)
            return JSONNUM_ERR_DEPTH;
        const size_t n = json_array_size(v);
        if (n == 0)
            return JSONNUM_ERR_SHAPE;
        for (size_t i = 0; i < n; i++) {
            if (r->shape[d] && (long long)i == r->shape[d])
                return JSONNUM_ERR_SHAPE;
            int rc = ref_walk(r, json_array_get(v, i), d + 1);
            if (rc)
                return rc;
        }
        if (!r->shape[d])
            r->shape[d] = (long long)n;
        else if ((long long)n != r->shape[d])
            return JSONNUM_ERR_SHAPE;
        return JSONNUM_OK;
    }
    const int neg_inf = (r->flags & JSONNUM_NEG_INF) && is_neg_inf_word(v);
    if (d == 0 || (!json_is_number(v) && !neg_inf))
        return JSONNUM_ERR_TYPE;
    if (!r->ndim)
        r->ndim = d;
    else if (d != r->ndim)
        return JSONNUM_ERR_SHAPE;
    const float f = neg_inf ? -INFINITY : (float)json_number_value(v);
    if (isinf(f) && !neg_inf)
        return JSONNUM_ERR_RANGE;
    if (r->count == r->max_count || r->count == sizeof r->vals / sizeof r->vals[0])
        return JSONNUM_ERR_LIMIT;
    r->vals[r->count++] = f;
    return JSONNUM_OK;
}

/* A random number token, from every branch of the grammar. */
static void gen_number(char *dst, size_t n, uint64_t *s)
{
    static const char *const edges[] = {
        "0", "-0", "-0.0", "0.0", "1e-46", "3.4028235e38", "3.4028236e38", "-3.4028236e38",
        "1e39", "7e-46", "7.1e-46", "1e-400", "1e400", "-1e400", "1e308", "1.8e308",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808",
        "-9223372036854775809", "18446744073709551616", "16777217", "1E5", "1e+5", "1e-5",
        "123456789012345678901234567890", "0.000000000000000000000000000001",
        "2.4e-323", "1.17549435e-38", "1e0000000000000000000000000000001", "1e-0",
        "0e-400", "100000000000000000000000000000000000000",
    };
    char *p = dst;
    size_t left = n;
#define PUT(...)                                                                \
    do {                                                                        \
        int k_ = snprintf(p, left, __VA_ARGS__);                                \
        if (k_ > 0 && (size_t)k_ < left)                                        \
            p += k_, left -= (size_t)k_;                                        \
    } while (0)
    switch (rng_below(s, 8)) {
    case 0:
        PUT("%s", edges[rng_below(s, sizeof edges / sizeof edges[0])]);
        return;
    case 1: { /* a float printed with 9 digits: what clients send */
        float f = check_bits_float((uint32_t)(check_xorshift_star(s) >> 32));
        if (!isfinite(f))
            f = 1.0f;
        PUT("%.9g", (double)f);
        return;
    }
    case 2: { /* a double with 17 digits: exercises the double rounding */
        double x;
        uint64_t b = check_xorshift_star(s);
        memcpy(&x, &b, sizeof x);
        if (!isfinite(x))
            x = 0.5;
        PUT("%.17g", x);
        return;
    }
    case 3: { /* near the midpoint of two floats, just above, below or on it */
        float f = check_bits_float((uint32_t)(check_xorshift_star(s) >> 33));
        if (!isfinite(f) || !isfinite(nextafterf(f, INFINITY)))
            f = 1.0f;
        double mid = ((double)f + (double)nextafterf(f, INFINITY)) / 2;
        int k = (int)rng_below(s, 3);
        if (k == 1)
            mid = nextafter(mid, 0);
        else if (k == 2)
            mid = nextafter(mid, INFINITY);
        PUT("%s%.*g", rng_below(s, 2) ? "-" : "", 9 + (int)rng_below(s, 40), mid);
        return;
    }
    case 4: /* a normal-ish activation, as the benchmark's */
        PUT("%.*g", 1 + (int)rng_below(s, 9),
            ((double)(check_xorshift_star(s) >> 11) / 9007199254740992.0 - 0.5) * 8);
        return;
    default: { /* built from the grammar's parts */
        if (rng_below(s, 2))
            PUT("-");
        unsigned kind = rng_below(s, 4), nd;
        if (kind == 0) {
            PUT("0");
        } else {
            nd = kind == 1 ? 1 + rng_below(s, 3) : kind == 2 ? 1 + rng_below(s, 19)
                                                            : 15 + rng_below(s, 20);
            PUT("%c", '1' + rng_below(s, 9));
            for (unsigned i = 1; i < nd; i++)
                PUT("%c", '0' + rng_below(s, 10));
        }
        if (rng_below(s, 2)) {
            PUT(".");
            nd = rng_below(s, 3) ? 1 + rng_below(s, 9) : 1 + rng_below(s, 30);
            unsigned zeros = rng_below(s, 4) ? 0 : rng_below(s, 12);
            for (unsigned i = 0; i < zeros; i++)
                PUT("0");
            for (unsigned i = 0; i < nd; i++)
                PUT("%c", '0' + rng_below(s, 10));
        }
        if (rng_below(s, 2)) {
            PUT("%c", rng_below(s, 2) ? 'e' : 'E');
            unsigned sg = rng_below(s, 3);
            if (sg)
                PUT("%c", sg == 1 ? '+' : '-');
            unsigned e = rng_below(s, 4) ? rng_below(s, 50) : rng_below(s, 500);
            PUT("%s%u", rng_below(s, 8) ? "" : "00", e);
        }
        return;
    }
    }
#undef PUT
}

struct text {
    char b[8192];
    size_t n;
};

static void add(struct text *t, const char *s)
{
    size_t k = strlen(s);
    if (t->n + k < sizeof t->b) {
        memcpy(t->b + t->n, s, k);
        t->n += k;
    }
    t->b[t->n] = '\0';
}

static void add_ws(struct text *t, uint64_t *s)
{
    static const char *const ws[] = {"", "", "", " ", "\n", " \t", "\r\n  "};
    add(t, ws[rng_below(s, sizeof ws / sizeof ws[0])]);
}

/* A random array of rank 1..5, mostly rectangular; with small odds an element
 * is replaced by something non-numeric, an empty array, or a ragged row. */
static void gen_array(struct text *t, uint64_t *s, int depth, int rank, const int *dims,
                      int dirty)
{
    add_ws(t, s);
    add(t, "[");
    int n = dims[depth];
    if (dirty && rng_below(s, 40) == 0)
        n += rng_below(s, 2) ? 1 : -1; /* ragged, or empty when n was 1 */
    for (int i = 0; i < n; i++) {
        if (i)
            add(t, ",");
        add_ws(t, s);
        if (dirty && rng_below(s, 60) == 0) {
            static const char *const junk[] = {
                "\"a\"", "true", "false", "null", "{}", "[]", "[1]", "{\"k\":[1]}", "1",
                "\"-inf\"", "\"-Infinity\"", "\"-inf\"", "\"+inf\"", "\"inf\"", "\"NaN\""};
            add(t, junk[rng_below(s, sizeof junk / sizeof junk[0])]);
        } else if (depth + 1 < rank) {
            gen_array(t, s, depth + 1, rank, dims, dirty);
        } else {
            char num[96];
            gen_number(num, sizeof num, s);
            add(t, num);
        }
        add_ws(t, s);
    }
    add(t, "]");
}

static void mutate(struct text *t, uint64_t *s)
{
    static const char chars[] = "0123456789+-.eE, []\t\n x\"{}:\r";
    unsigned edits = 1 + rng_below(s, 3);
    for (unsigned k = 0; k < edits; k++) {
        size_t at = t->n ? rng_below(s, (unsigned)t->n + 1) : 0;
        char c = rng_below(s, 200) ? chars[rng_below(s, sizeof chars - 1)] : '\0';
        switch (rng_below(s, 3)) {
        case 0: /* insert */
            if (t->n + 1 < sizeof t->b) {
                memmove(t->b + at + 1, t->b + at, t->n - at);
                t->b[at] = c;
                t->n++;
            }
            break;
        case 1: /* delete */
            if (at < t->n) {
                memmove(t->b + at, t->b + at + 1, t->n - at - 1);
                t->n--;
            }
            break;
        default: /* replace */
            if (at < t->n)
                t->b[at] = c;
        }
    }
    t->b[t->n] = '\0';
}

struct tally {
    long inputs, jansson_ok, clean, not_json, stopped_early, standins;
    long by_code[8];
    long fails;
};

static void show(char *dst, size_t n, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            dst[o++] = (char)c;
        else
            o += (size_t)snprintf(dst + o, n - o, "\\x%02x", c);
    }
    dst[o] = '\0';
}

/* One document through both parsers. pre, post: the text around the array
 * the parser is pointed at ("" and "" for the bare document). */
static void compare(struct tally *ty, const char *doc, size_t len, size_t pre,
                    const char *post, size_t max_count, unsigned flags)
{
    ty->inputs++;
    json_error_t je;
    char *fixed = malloc(len + 1);
    memcpy(fixed, doc, len);
    fixed[len] = '\0';
    ty->standins += jsonnum_standin(fixed, len) > 0;
    json_t *root = json_loadb(fixed, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    free(fixed);
    json_t *v = root;
    if (root && pre)
        v = json_object_get(root, "x");

    struct ref *r = calloc(1, sizeof *r);
    r->max_count = max_count;
    r->flags = flags;
    int want = -100;
    if (v) {
        ty->jansson_ok++;
        want = ref_walk(r, v, 0);
    }

    struct jsonnum_array a;
    struct jsonnum_error e;
    size_t used = 0;
    int got = jsonnum_parse_array_opt(&a, doc + pre, len - pre, max_count, flags, &used, &e);
    if (got == JSONNUM_OK) {
        /* The rest must be whitespace, post, whitespace; else not JSON. */
        size_t i = pre + used, k = 0;
        while (i < len && is_ws(doc[i]))
            i++;
        while (post[k] && i < len && doc[i] == post[k])
            i++, k++;
        while (i < len && is_ws(doc[i]))
            i++;
        if (post[k] || i != len) {
            jsonnum_array_deinit(&a);
            got = JSONNUM_ERR_SYNTAX;
        }
    }
    ty->by_code[-got]++;

    const char *bad = NULL;
    if (got == JSONNUM_OK && !v)
        bad = "jsonnum accepts what jansson rejects";
    else if (got == JSONNUM_ERR_SYNTAX && v)
        bad = "jsonnum says not JSON, jansson accepts";
    else if (v && got != want)
        bad = "jsonnum and the jansson reference disagree on the kind";
    else if (got == JSONNUM_OK) {
        if (a.ndim != r->ndim || a.count != r->count)
            bad = "shape or count differs";
        for (int d = 0; !bad && d < JSONNUM_MAX_RANK; d++)
            if (a.shape[d] != r->shape[d])
                bad = "shape differs";
        for (size_t i = 0; !bad && i < a.count; i++)
            if (check_float_bits(a.data[i]) != check_float_bits(r->vals[i]))
                bad = "a float differs from (float)json_number_value";
    }
    if (v && want == JSONNUM_OK)
        ty->clean++;
    else if (!v && got == JSONNUM_ERR_SYNTAX)
        ty->not_json++;
    else if (!v)
        ty->stopped_early++;

    if (bad && ty->fails++ < 8) {
        char shown[600];
        show(shown, sizeof shown, doc, len);
        cr_log_error("%s: '%s' -- jansson %s%s, reference %d, jsonnum %d (%s at %zu)", bad,
                     shown, v ? "accepts" : "rejects: ", v ? "" : je.text, want, got,
                     e.msg, e.offset);
    }
    jsonnum_array_deinit(&a);
    json_decref(root);
    free(r);
}

/* Both as the document itself and as {"x": document}. */
static void compare_both(struct tally *ty, const struct text *t, size_t max_count,
                         unsigned flags)
{
    compare(ty, t->b, t->n, 0, "", max_count, flags);
    static struct text w;
    w.n = 0;
    add(&w, "{\"x\": ");
    size_t pre = w.n;
    if (w.n + t->n + 2 < sizeof w.b) {
        memcpy(w.b + w.n, t->b, t->n);
        w.n += t->n;
        add(&w, "}");
        compare(ty, w.b, w.n, pre, "}", max_count, flags);
    }
}

Test(jsonnum, agrees_with_jansson_on_generated_and_mutated_inputs, .timeout = 600)
{
    uint64_t s = 0xd1ff0001;
    struct tally ty = {0};
    static struct text t;
    for (int it = 0; it < 160000; it++) {
        size_t max_count = rng_below(&s, 20) ? SIZE_MAX : rng_below(&s, 12);
        t.n = 0;
        switch (it % 4) {
        case 0: { /* one or two numbers */
            char num[96];
            add_ws(&t, &s);
            add(&t, "[");
            gen_number(num, sizeof num, &s);
            add(&t, num);
            if (rng_below(&s, 2)) {
                add(&t, ",");
                add_ws(&t, &s);
                gen_number(num, sizeof num, &s);
                add(&t, num);
            }
            add(&t, "]");
            add_ws(&t, &s);
            if (rng_below(&s, 3) == 0)
                mutate(&t, &s);
            break;
        }
        case 1: /* a bare number: valid JSON, not an array */
        {
            char num[96];
            gen_number(num, sizeof num, &s);
            add(&t, num);
            if (rng_below(&s, 2))
                mutate(&t, &s);
            break;
        }
        default: { /* arrays, clean or dirty, then half of them mutated */
            int rank = 1 + (int)rng_below(&s, rng_below(&s, 10) ? 4 : 5), dims[5];
            for (int d = 0; d < rank; d++)
                dims[d] = 1 + (int)rng_below(&s, rank <= 2 ? 6 : 3);
            gen_array(&t, &s, 0, rank, dims, rng_below(&s, 3) == 0);
            if (it % 4 == 3)
                mutate(&t, &s);
        }
        }
        compare_both(&ty, &t, max_count, rng_below(&s, 2) ? JSONNUM_NEG_INF : 0);
    }
    cr_log_info("differential: %ld inputs (%ld with stand-ins); jansson accepts %ld (%ld clean "
                "numeric arrays); not JSON for both %ld; jsonnum stopped early on invalid JSON %ld; "
                "jsonnum: ok %ld syntax %ld type %ld shape %ld depth %ld range %ld limit %ld",
                ty.inputs, ty.standins, ty.jansson_ok, ty.clean, ty.not_json, ty.stopped_early,
                ty.by_code[0], ty.by_code[1], ty.by_code[2], ty.by_code[3], ty.by_code[4],
                ty.by_code[5], ty.by_code[6]);
    cr_expect_eq(ty.fails, 0, "%ld of %ld inputs disagree (first ones logged)", ty.fails,
                 ty.inputs);
    /* The mix must exercise every outcome, or the test proves little. */
    cr_expect_geq(ty.inputs, 300000);
    for (int c = 0; c <= 6; c++)
        cr_expect_geq(ty.by_code[c], 500, "only %ld inputs ended with status %d",
                      ty.by_code[c], -c);
    cr_expect_geq(ty.clean, 50000);
    cr_expect_geq(ty.standins, 5000);
    cr_expect_geq(ty.not_json, 50000);
}
