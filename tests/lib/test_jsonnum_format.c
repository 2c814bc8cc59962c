/* test_jsonnum_format.c -- lib/jsonnum: shortest float32 output checked
 * by round trip and shortness. */
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
