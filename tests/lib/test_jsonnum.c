/* test_jsonnum.c -- lib/jsonnum: array parsing checked against jansson as
 * the reference, on hand-picked cases. */
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

/* Not a status: "the array parses; something follows it". */
#define OK_THEN_GARBAGE 1

/* ---------------------------------------------------------------------- */
/* Parsing: the reference is jansson                                       */

/* (float)json_number_value of a one-number document, or NAN when jansson
 * rejects it. */
static float jansson_float(const char *tok, int *ok)
{
    json_error_t je;
    json_t *v = json_loads(tok, JSON_DECODE_ANY, &je);
    *ok = v && json_is_number(v);
    float f = *ok ? (float)json_number_value(v) : NAN;
    json_decref(v);
    return f;
}

Test(jsonnum, parses_nested_and_flat_arrays)
{
    const char *t = " \n[ [0.1, -2e3] ,\t[3,4 ] ,[5E-1,\r\n-0.0]]  ,";
    struct jsonnum_array a;
    struct jsonnum_error e;
    size_t used;
    cr_assert_eq(jsonnum_parse_array(&a, t, strlen(t), SIZE_MAX, &used, &e), JSONNUM_OK, "%s",
                 e.msg);
    cr_expect_eq(a.ndim, 2);
    cr_expect_eq(a.shape[0], 3);
    cr_expect_eq(a.shape[1], 2);
    cr_expect_eq(a.shape[2], 0);
    cr_expect_eq(a.count, 6);
    cr_expect_eq(used, strlen(t) - 3, "consumed %zu", used);
    const float want[6] = {0.1f, -2000.0f, 3.0f, 4.0f, 0.5f, -0.0f};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(check_float_bits(a.data[i]), check_float_bits(want[i]), "element %d: %a", i,
                     (double)a.data[i]);
    jsonnum_array_deinit(&a);
    cr_expect_null(a.data);

    /* rank 4, and a flat array of 5000 (several buffer growths) */
    t = "[[[[1,2]],[[3,4]]]]";
    cr_assert_eq(jsonnum_parse_array(&a, t, strlen(t), SIZE_MAX, &used, &e), JSONNUM_OK);
    cr_expect(a.ndim == 4 && a.shape[0] == 1 && a.shape[1] == 2 && a.shape[2] == 1 &&
              a.shape[3] == 2 && a.count == 4);
    jsonnum_array_deinit(&a);

    char *big = malloc(5000 * 8 + 2), *p = big;
    *p++ = '[';
    for (int i = 0; i < 5000; i++)
        p += sprintf(p, "%s%d", i ? "," : "", i - 2500);
    *p++ = ']';
    cr_assert_eq(jsonnum_parse_array(&a, big, (size_t)(p - big), SIZE_MAX, &used, &e),
                 JSONNUM_OK, "%s", e.msg);
    cr_expect(a.ndim == 1 && a.shape[0] == 5000 && a.count == 5000);
    int wrong = 0;
    for (int i = 0; i < 5000; i++)
        wrong += a.data[i] != (float)(i - 2500);
    cr_expect_eq(wrong, 0, "%d of the 5000 flat elements differ", wrong);
    jsonnum_array_deinit(&a);
    free(big);
}

Test(jsonnum, reads_numbers_bit_for_bit_as_jansson_does)
{
    /* The edges: signed zeros (jansson's "-0" is the integer 0), float
     * underflow and overflow, double overflow, long long limits, long
     * mantissas, halfway cases that need the double rounding. */
    const char *toks[] = {
        "0", "-0", "-0.0", "0.0", "-0e5", "0e999999", "1e-46", "-1e-46", "7e-46",
        "7.006492321624086e-46", "7.0064923216240862e-46", "1.401298464324817e-45",
        "1e-400", "-1e-400", "3.4028235e38", "3.40282356e38",
        "1.17549435e-38", "16777217", "16777217.0", "16777216.000000001", "0.1", "1E5",
        "1e+5", "1e-5", "1.5E-07", "123456789012345678901234567890.0",
        "123456789012345678901234567890e-3",
        "0.000000000000000000000000000001234567", "1234567890123456789e-30",
        "9007199254740993", "9007199254740993.0", "9223372036854775807",
        "-9223372036854775808", "123e30", "4.7e37", "9.999999e37", "1e22", "1e23",
        "8.589973e9", "0.33333334", "2.2250738585072014e-308", "4.9e-324", "1e-323",
        "1.00000005960464477539062500000000000000001", "1.000000059604644775390625",
        "1.0000000596046447753906249999999", "33554431", "33554433", "-33554435",
    };
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "[%s]", toks[i]);
        int ok;
        const float want = jansson_float(toks[i], &ok);
        cr_assert(ok, "jansson rejects %s", toks[i]);
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used;
        int rc = jsonnum_parse_array(&a, text, strlen(text), SIZE_MAX, &used, &e);
        cr_expect_eq(rc, JSONNUM_OK, "%s: %s", toks[i], e.msg);
        if (rc == JSONNUM_OK)
            cr_expect_eq(check_float_bits(a.data[0]), check_float_bits(want), "%s: %a, jansson %a",
                         toks[i], (double)a.data[0], (double)want);
        jsonnum_array_deinit(&a);
    }
    struct jsonnum_array a;
    struct jsonnum_error e;
    size_t used;
    const char *t = "[-0, 0]";
    cr_assert_eq(jsonnum_parse_array(&a, t, strlen(t), SIZE_MAX, &used, &e), JSONNUM_OK);
    cr_expect_eq(check_float_bits(a.data[0]), 0u, "-0 is jansson's integer 0, +0");
    jsonnum_array_deinit(&a);
}

/* jansson refuses integers beyond long long; JSON does not, and
 * JavaScript writes 1e20 as 100000000000000000000. They are read as reals:
 * (float)strtod, as jansson reads them after jsonnum_standin(). */
Test(jsonnum, reads_integers_beyond_long_long_as_reals)
{
    const char *toks[] = {
        "9223372036854775808", "-9223372036854775809", "9999999999999999999",
        "18446744073709551616", "100000000000000000000", "-100000000000000000000",
        "123456789012345678901234567890", "340282346638528859811704183484516925440",
        "16777217000000000000000000",
    };
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        char text[128], copy[128];
        snprintf(text, sizeof text, "[%s]", toks[i]);
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used;
        int rc = jsonnum_parse_array(&a, text, strlen(text), SIZE_MAX, &used, &e);
        cr_expect_eq(rc, JSONNUM_OK, "%s: %s", toks[i], e.msg);
        const float want = (float)strtod(toks[i], NULL);
        if (rc == JSONNUM_OK)
            cr_expect_eq(check_float_bits(a.data[0]), check_float_bits(want), "%s: %a, want %a",
                         toks[i], (double)a.data[0], (double)want);
        jsonnum_array_deinit(&a);
        /* jansson after the stand-ins reads the same float */
        snprintf(copy, sizeof copy, "%s", toks[i]);
        cr_expect_eq(jsonnum_standin(copy, strlen(copy)), 1, "%s", toks[i]);
        int ok;
        const float j = jansson_float(copy, &ok);
        cr_expect(ok && check_float_bits(j) == check_float_bits(want),
                  "%s: jansson reads '%s' as %a", toks[i], copy, (double)j);
    }
    /* 2^63 - 1 is still an integer, through long long */
    struct jsonnum_array a;
    struct jsonnum_error e;
    size_t used;
    const char *t = "[9223372036854775807, -9223372036854775808]";
    cr_assert_eq(jsonnum_parse_array(&a, t, strlen(t), SIZE_MAX, &used, &e), JSONNUM_OK);
    cr_expect_eq(a.data[0], (float)9223372036854775807LL);
    cr_expect_eq(a.data[1], -0x1p63f);
    jsonnum_array_deinit(&a);
}

Test(jsonnum, standin_rewrites_what_jansson_cannot_hold_in_place)
{
    static char digits400[420];
    memset(digits400, '9', 400);
    const struct { const char *in, *out; size_t n; } cases[] = {
        {"[100000000000000000000]", "[                 1e20]", 1},
        {"[-100000000000000000000]", "[                 -1e20]", 1},
        {"[9223372036854775807,9223372036854775808]",
         "[9223372036854775807, 9223372036854776e3]", 1},
        {"[1e400, -1E400, 1e-400, 2e308]", "[ 1e39,  -1e39, 1e-400,  1e39]", 3},
        {"{\"a\": 123456789012345678901234567890}", "{\"a\":           12345678901234568e13}", 1},
        /* strings are left alone, escaped quotes included */
        {"[\"100000000000000000000\", \"\\\"1e400\", 1e400]",
         "[\"100000000000000000000\", \"\\\"1e400\",  1e39]", 1},
        /* nothing jansson can hold changes */
        {"[0, -0, 1.5e308, 9223372036854775807, -9223372036854775808, 1e-999]",
         "[0, -0, 1.5e308, 9223372036854775807, -9223372036854775808, 1e-999]", 0},
        /* not numbers: left for jansson to refuse */
        {"[01e400, 1.e400, -e400]", "[0 1e39, 1.e400, -e400]", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        size_t n = jsonnum_standin(buf, strlen(buf));
        cr_expect_str_eq(buf, cases[i].out, "case %zu: '%s' became '%s'", i, cases[i].in, buf);
        cr_expect_eq(n, cases[i].n, "case %zu: %zu replaced", i, n);
    }
    /* an integer beyond double: 400 digits */
    char buf[420];
    memcpy(buf, digits400, 401);
    cr_expect_eq(jsonnum_standin(buf, 400), 1);
    cr_expect_eq(strspn(buf, " "), 396u);
    cr_expect_str_eq(buf + 396, "1e39");
}

/* JSON has no infinity; a float mask needs -inf, and clients send it as
 * the string "-inf" or "-Infinity" (JSONNUM_NEG_INF). */
Test(jsonnum, neg_inf_strings_only_where_asked)
{
    const struct { const char *text; unsigned flags; int code; size_t at; } cases[] = {
        {"[\"-inf\", 1]", JSONNUM_NEG_INF, JSONNUM_OK, 0},
        {"[[\"-Infinity\"],\n [2]]", JSONNUM_NEG_INF, JSONNUM_OK, 0},
        {"[\"-inf\" ,\"-inf\"]", JSONNUM_NEG_INF, JSONNUM_OK, 0},
        {"[\"-inf\"]", 0, JSONNUM_ERR_TYPE, 1},
        {"[\"+inf\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[1, \"inf\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 4},
        {"[\"Infinity\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[\"-INF\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[\"NaN\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[\"-in\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[\"-\\u0069nf\"]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1}, /* escapes: no claim */
        {"[\"-inf", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
        {"[\"-inf\"x]", JSONNUM_NEG_INF, JSONNUM_ERR_SYNTAX, 7},
        {"[[1],\"-inf\"]", JSONNUM_NEG_INF, JSONNUM_ERR_SHAPE, 5},
        {"[null]", JSONNUM_NEG_INF, JSONNUM_ERR_TYPE, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used;
        const char *t = cases[i].text;
        int rc = jsonnum_parse_array_opt(&a, t, strlen(t), SIZE_MAX, cases[i].flags, &used, &e);
        cr_expect_eq(rc, cases[i].code, "'%s': %d (%s), want %d", t, rc, e.msg, cases[i].code);
        if (rc == JSONNUM_OK) {
            cr_expect(a.data[0] == -INFINITY, "'%s': %g", t, (double)a.data[0]);
            cr_expect_eq(used, strlen(t));
        } else if (rc == cases[i].code) {
            cr_expect_eq(e.offset, cases[i].at, "'%s': at %zu, want %zu", t, e.offset,
                         cases[i].at);
        }
        jsonnum_array_deinit(&a);
    }
}

Test(jsonnum, reports_errors_with_their_kind_and_position)
{
    const struct { const char *text; int code; size_t at; } cases[] = {
        {"", JSONNUM_ERR_SYNTAX, 0},
        {"  ", JSONNUM_ERR_SYNTAX, 2},
        {"[", JSONNUM_ERR_SYNTAX, 1},
        {"[1", JSONNUM_ERR_SYNTAX, 2},
        {"[1,", JSONNUM_ERR_SYNTAX, 3},
        {"[1,]", JSONNUM_ERR_SYNTAX, 3},
        {"[1 2]", JSONNUM_ERR_SYNTAX, 3},
        {"[01]", JSONNUM_ERR_SYNTAX, 2},
        {"[-01]", JSONNUM_ERR_SYNTAX, 3},
        {"[+1]", JSONNUM_ERR_SYNTAX, 1},
        {"[.5]", JSONNUM_ERR_SYNTAX, 1},
        {"[5.]", JSONNUM_ERR_SYNTAX, 1},
        {"[1.e5]", JSONNUM_ERR_SYNTAX, 1},
        {"[1e]", JSONNUM_ERR_SYNTAX, 1},
        {"[1e+]", JSONNUM_ERR_SYNTAX, 1},
        {"[-]", JSONNUM_ERR_SYNTAX, 1},
        {"[0x10]", JSONNUM_ERR_SYNTAX, 2},
        {"[NaN]", JSONNUM_ERR_SYNTAX, 1},
        {"[Infinity]", JSONNUM_ERR_SYNTAX, 1},
        {"[-Infinity]", JSONNUM_ERR_SYNTAX, 1},
        {"[1.5.2]", JSONNUM_ERR_SYNTAX, 4},
        {"[1\f]", JSONNUM_ERR_SYNTAX, 2},    /* form feed is not JSON whitespace */
        {"[\v1]", JSONNUM_ERR_SYNTAX, 1},
        {"[1e400]", JSONNUM_ERR_RANGE, 1},  /* beyond double (jansson refuses it) */
        {"[-1e400]", JSONNUM_ERR_RANGE, 1},
        {"[1, 2e308]", JSONNUM_ERR_RANGE, 4},
        {"[9223372036854775808]", JSONNUM_OK, 0}, /* beyond long long: a real */
        {"[-9223372036854775809]", JSONNUM_OK, 0},
        {"[12345678901234567890123]", JSONNUM_OK, 0},
        {"[1000000000000000000000000000000000000000]", JSONNUM_ERR_RANGE, 1}, /* 10^39 */
        {"[1]]", OK_THEN_GARBAGE, 3},
        {"[1e39]", JSONNUM_ERR_RANGE, 1},
        {"[3.4028236e38]", JSONNUM_ERR_RANGE, 1},
        {"[3.4028235677973366e38]", JSONNUM_ERR_RANGE, 1}, /* the midpoint: to even, inf */
        {"[[1],[-1e39]]", JSONNUM_ERR_RANGE, 6},
        {"[1,\"a\"]", JSONNUM_ERR_TYPE, 3},
        {"[1,{}]", JSONNUM_ERR_TYPE, 3},
        {"[true]", JSONNUM_ERR_TYPE, 1},
        {"[null]", JSONNUM_ERR_TYPE, 1},
        {"{\"a\":1}", JSONNUM_ERR_TYPE, 0},
        {"7", JSONNUM_ERR_TYPE, 0},
        {"[]", JSONNUM_ERR_SHAPE, 1},
        {"[[]]", JSONNUM_ERR_SHAPE, 2},
        {"[[1,2],[3]]", JSONNUM_ERR_SHAPE, 9},
        {"[[1],[2,3]]", JSONNUM_ERR_SHAPE, 8},
        {"[[1],2]", JSONNUM_ERR_SHAPE, 5},
        {"[1,[2]]", JSONNUM_ERR_SHAPE, 3},
        {"[[1],[]]", JSONNUM_ERR_SHAPE, 6},
        {"[[[[[1]]]]]", JSONNUM_ERR_DEPTH, 4},
        {"[[[[1]]]]", JSONNUM_OK, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used = 0;
        const char *t = cases[i].text;
        int rc = jsonnum_parse_array(&a, t, strlen(t), SIZE_MAX, &used, &e);
        if (cases[i].code == OK_THEN_GARBAGE) {
            /* The array is fine; what follows is the caller's business. */
            cr_expect_eq(rc, JSONNUM_OK, "'%s'", t);
            cr_expect_eq(used, cases[i].at, "'%s': consumed %zu", t, used);
        } else {
            cr_expect_eq(rc, cases[i].code, "'%s': %d (%s), want %d", t, rc, e.msg,
                         cases[i].code);
            if (rc && rc == cases[i].code)
                cr_expect_eq(e.offset, cases[i].at, "'%s': at %zu (%s), want %zu", t,
                             e.offset, e.msg, cases[i].at);
            if (rc)
                cr_expect(a.data == NULL && a.count == 0 && e.code == rc && e.msg[0]);
        }
        jsonnum_array_deinit(&a);
    }
}

Test(jsonnum, reads_nothing_past_the_end_of_an_unterminated_text)
{
    /* Each text in a heap block of exactly its length, no NUL after it: under
     * -fsanitize=address a read past the end (strtod included) fails here. */
    const struct { const char *text; int code; } cases[] = {
        {"[1e39]", JSONNUM_ERR_RANGE},
        {"[123456789012345678901234567890.5]", JSONNUM_OK},
        {"[1e-400,2.5e-50]", JSONNUM_OK},
        {"[1e39", JSONNUM_ERR_SYNTAX},
        {"[1.5", JSONNUM_ERR_SYNTAX},
        {"[1.", JSONNUM_ERR_SYNTAX},
        {"[1e+", JSONNUM_ERR_SYNTAX},
        {"[-", JSONNUM_ERR_SYNTAX},
        {"[0", JSONNUM_ERR_SYNTAX},
        {"[[1],[2]", JSONNUM_ERR_SYNTAX},
        {"[[1],[2]]", JSONNUM_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t len = strlen(cases[i].text);
        char *b = malloc(len);
        memcpy(b, cases[i].text, len);
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used;
        int rc = jsonnum_parse_array(&a, b, len, SIZE_MAX, &used, &e);
        cr_expect_eq(rc, cases[i].code, "'%s': %d (%s)", cases[i].text, rc, e.msg);
        jsonnum_array_deinit(&a);
        free(b);
    }
}

Test(jsonnum, limit_stops_before_the_buffer_grows)
{
    struct jsonnum_array a;
    struct jsonnum_error e;
    size_t used;
    const char *t = "[[1,2,3],[4,5,6]]";
    cr_expect_eq(jsonnum_parse_array(&a, t, strlen(t), 6, &used, &e), JSONNUM_OK);
    jsonnum_array_deinit(&a);
    cr_expect_eq(jsonnum_parse_array(&a, t, strlen(t), 5, &used, &e), JSONNUM_ERR_LIMIT);
    cr_expect_eq(e.offset, 14);
    cr_expect_eq(jsonnum_parse_array(&a, t, strlen(t), 0, &used, &e), JSONNUM_ERR_LIMIT);
    cr_expect_eq(e.offset, 2);
    cr_expect_null(a.data);
}

Test(jsonnum, status_strings_are_distinct)
{
    for (int a = JSONNUM_ERR_NOMEM; a <= JSONNUM_OK; a++)
        for (int b = a + 1; b <= JSONNUM_OK; b++)
            cr_expect_str_neq(jsonnum_status_str(a), jsonnum_status_str(b));
    cr_expect_str_eq(jsonnum_status_str(42), "unknown status");
}
