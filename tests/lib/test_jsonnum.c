/* test_jsonnum.c -- lib/jsonnum: shortest float32 output checked by
 * round trip and shortness, array parsing checked against jansson as the
 * reference, on hand-picked cases and on generated and mutated inputs. */
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
/* Helpers                                                                 */

static unsigned rng_below(uint64_t *s, unsigned n)
{
    return (unsigned)(check_xorshift_star(s) >> 33) % n;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* RFC 8259 number grammar, the whole string. */
static int is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return 0;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* Significant digits of a decimal string: leading and trailing zeros of the
 * mantissa do not count ("0.00120" and "1.2e-3" both have 2). */
static int sig_digits(const char *s)
{
    char d[64];
    int n = 0;
    for (; *s && *s != 'e' && *s != 'E'; s++)
        if (*s >= '0' && *s <= '9' && n < 63)
            d[n++] = *s;
    int a = 0;
    while (a < n && d[a] == '0')
        a++;
    while (n > a && d[n - 1] == '0')
        n--;
    return n - a;
}

/* p significant digits of f, rounded in the given mode (glibc's printf
 * honours the rounding mode, and is exact). */
static void digits_rounded(char *dst, size_t n, float f, int p, int mode)
{
    fesetround(mode);
    snprintf(dst, n, "%.*e", p - 1, (double)f);
    fesetround(FE_TONEAREST);
}

/* Whether the decimal b reads back as f both ways a client reads JSON:
 * strtof (directly), and (float)strtod (through a double, as Python,
 * JavaScript and jsonnum_parse_array do). */
static int reads_back(const char *b, float f)
{
    return check_float_bits(strtof(b, NULL)) == check_float_bits(f) &&
           check_float_bits((float)strtod(b, NULL)) == check_float_bits(f);
}

/* Check jsonnum_format_float on one finite f: JSON grammar, round trip bit
 * for bit both ways, shortest, and of the shortest the nearest. On failure
 * fills why. */
static int format_ok(float f, char *why, size_t whyn)
{
    char out[64], b[64];
    memset(out, 'Z', sizeof out);
    int len = jsonnum_format_float(out, f);
    if (len < 1 || len >= JSONNUM_FLOAT_MAX || out[len] != '\0' || (int)strlen(out) != len) {
        snprintf(why, whyn, "bad length %d for %a", len, (double)f);
        return 0;
    }
    if (!is_json_number(out)) {
        snprintf(why, whyn, "'%s' is not a JSON number (%a)", out, (double)f);
        return 0;
    }
    if (check_float_bits(strtof(out, NULL)) != check_float_bits(f)) {
        snprintf(why, whyn, "'%s' reads back as %a, not %a", out, (double)strtof(out, NULL),
                 (double)f);
        return 0;
    }
    if (check_float_bits((float)strtod(out, NULL)) != check_float_bits(f)) {
        snprintf(why, whyn, "'%s' reads back through a double as %a, not %a", out,
                 (double)(float)strtod(out, NULL), (double)f);
        return 0;
    }
    const int n = sig_digits(out);
    if (n > 1) {
        /* Shortest: if any (n-1)-digit decimal read back as f, so would one of
         * the two (n-1)-digit neighbours of f's exact value, since the
         * decimals that read back (both ways) form an interval around f. */
        const int modes[2] = {FE_DOWNWARD, FE_UPWARD};
        for (int m = 0; m < 2; m++) {
            digits_rounded(b, sizeof b, f, n - 1, modes[m]);
            if (reads_back(b, f)) {
                snprintf(why, whyn, "'%s' has %d digits but '%s' also reads back", out, n, b);
                return 0;
            }
        }
    }
    /* Nearest: when the correctly rounded n-digit decimal reads back, that is
     * the one (JavaScript's and Python's rule). */
    digits_rounded(b, sizeof b, f, n, FE_TONEAREST);
    if (reads_back(b, f) && strtod(b, NULL) != strtod(out, NULL)) {
        snprintf(why, whyn, "'%s' is not the nearest %d-digit decimal '%s'", out, n, b);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------- */
/* Formatting                                                              */

Test(jsonnum, format_writes_the_expected_special_cases)
{
    const struct { float f; const char *want; } cases[] = {
        {0.1f, "0.1"},
        {1.0f / 3.0f, "0.33333334"},
        {16777216.0f, "16777216"},
        {(float)16777217.0, "16777216"},
        {FLT_MAX, "3.4028235e38"},
        {-FLT_MAX, "-3.4028235e38"},
        {FLT_MIN, "1.1754944e-38"},
        {FLT_TRUE_MIN, "1e-45"},
        {-FLT_TRUE_MIN, "-1e-45"},
        {0.0f, "0"},
        {-0.0f, "-0"},
        {1.0f, "1"},
        {-1.5f, "-1.5"},
        {100.0f, "100"},
        {1000.0f, "1e3"},   /* shorter than "1000" */
        {0.01f, "0.01"},    /* tie with "1e-2": fixed */
        {0.001f, "1e-3"},
        {0.0123f, "0.0123"},
        {123456.7f, "123456.7"},
        {1.5e-7f, "1.5e-7"},
        {1e10f, "1e10"},
        {2.5e30f, "2.5e30"},
        {-1.17549435e-38f, "-1.1754944e-38"},
        {8.589973e9f, "8589974000"}, /* 8589973504: 7 digits either way, the nearer */
        {1.23456789e-30f, "1.2345679e-30"},
        {INFINITY, "null"},
        {-INFINITY, "null"},
        {NAN, "null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[JSONNUM_FLOAT_MAX];
        int n = jsonnum_format_float(out, cases[i].f);
        cr_expect_str_eq(out, cases[i].want, "case %zu (%a): got '%s', want '%s'", i,
                         (double)cases[i].f, out, cases[i].want);
        cr_expect_eq(n, (int)strlen(cases[i].want), "case %zu: length %d", i, n);
        if (isfinite(cases[i].f)) {
            char why[200];
            cr_expect(format_ok(cases[i].f, why, sizeof why), "case %zu: %s", i, why);
        }
    }
}

/* Found by `make roundtrip-check` (tests/roundtrip_all.c) over all 2^32
 * floats. Through a double, a decimal within 2^-53 of the midpoint between
 * a float and its neighbour becomes the midpoint, then rounds to even.
 * Ryu's shortest decimal for 0x15ae43fd (and its negative), 7.038531e-26,
 * is such a decimal: the only ones of all floats. The near misses have a
 * shortest decimal (checked with exact arithmetic in Python) within 2^-49 of
 * a midpoint that does read back: the writer must check them exactly and
 * keep them. */
Test(jsonnum, format_reads_back_through_a_double_on_the_hard_cases)
{
    const struct { uint32_t bits; const char *want; } cases[] = {
        {0x15ae43fd, "7.0385307e-26"}, /* not "7.038531e-26": 0x15ae43fe via double */
        {0x95ae43fd, "-7.0385307e-26"},
        /* near misses: within 2^-49 of a midpoint, checked exactly, kept */
        {0x08898b53, "8.278143e-34"},  /* 2^-50.5 */
        {0x88898b53, "-8.278143e-34"},
        {0x75ce3fbd, "5.229033e32"},   /* 2^-49.9 */
        {0x145dda71, "1.1200729e-26"}, /* 2^-49.8 */
        {0x0d2eaca7, "5.382571e-31"},  /* 2^-49.3 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const float f = check_bits_float(cases[i].bits);
        char out[JSONNUM_FLOAT_MAX], why[200];
        jsonnum_format_float(out, f);
        cr_expect_str_eq(out, cases[i].want, "0x%08x: got '%s', want '%s'", cases[i].bits, out,
                         cases[i].want);
        cr_expect(format_ok(f, why, sizeof why), "0x%08x: %s", cases[i].bits, why);
    }
}

Test(jsonnum, format_writes_powers_of_ten_with_one_digit)
{
    for (int p = -45; p <= 38; p++) {
        char src[16], out[JSONNUM_FLOAT_MAX], why[200];
        snprintf(src, sizeof src, "1e%d", p);
        const float f = strtof(src, NULL);
        jsonnum_format_float(out, f);
        cr_expect_eq(sig_digits(out), 1, "10^%d: '%s' is not one digit", p, out);
        cr_expect_eq(strtod(out, NULL), strtod(src, NULL), "10^%d written as '%s'", p, out);
        cr_expect(format_ok(f, why, sizeof why), "10^%d: %s", p, why);
    }
}

Test(jsonnum, format_round_trips_and_is_shortest_on_millions_of_floats)
{
    /* 1. Random bit patterns (every finite float is a candidate, subnormals
     *    included); 2. every exponent's first, second and last mantissa;
     *    3. every 61st subnormal. */
    uint64_t s = 0x5eed0001;
    long checked = 0, fails = 0;
    char why[200];
    for (long i = 0; i < 2000000; i++) {
        float f = check_bits_float((uint32_t)(check_xorshift_star(&s) >> 32));
        if (!isfinite(f))
            continue;
        checked++;
        if (!format_ok(f, why, sizeof why) && fails++ < 10)
            cr_log_error("%s", why);
    }
    for (uint32_t e = 0; e < 255; e++) {
        const uint32_t ms[3] = {0, 1, (1u << 23) - 1};
        for (int k = 0; k < 3; k++)
            for (uint32_t sign = 0; sign < 2; sign++) {
                checked++;
                if (!format_ok(check_bits_float(sign << 31 | e << 23 | ms[k]), why, sizeof why) &&
                    fails++ < 10)
                    cr_log_error("%s", why);
            }
    }
    for (uint32_t m = 1; m < (1u << 23); m += 61) {
        checked++;
        if (!format_ok(check_bits_float(m), why, sizeof why) && fails++ < 10)
            cr_log_error("%s", why);
    }
    cr_log_info("format: %ld floats checked", checked);
    cr_expect_geq(checked, 2000000);
    cr_expect_eq(fails, 0, "%ld of %ld floats failed (first ones logged)", fails, checked);
}

Test(jsonnum, format_array_writes_a_json_row)
{
    const float x[] = {0.1f, -0.0f, 1e-45f, FLT_MAX, 16777216.0f, -2.5f};
    const size_t n = sizeof x / sizeof x[0];
    char buf[JSONNUM_ARRAY_MAX(6)];
    size_t len = jsonnum_format_array(buf, x, n);
    cr_expect_str_eq(buf, "[0.1,-0,1e-45,3.4028235e38,16777216,-2.5]");
    cr_expect_eq(len, strlen(buf));

    json_error_t je;
    json_t *a = json_loadb(buf, len, 0, &je);
    cr_assert(a && json_array_size(a) == n, "jansson rejects '%s': %s", buf, je.text);
    for (size_t i = 0; i < n; i++) /* by value: "-0" is jansson's integer 0 */
        cr_expect_eq((float)json_number_value(json_array_get(a, i)), x[i], "element %zu", i);
    json_decref(a);

    len = jsonnum_format_array(buf, x, 0);
    cr_expect_str_eq(buf, "[]");
    cr_expect_eq(len, 2);
}

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
