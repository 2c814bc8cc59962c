/* test_scan_blank.c -- the blanked load both fast decoders get their DOM
 * from (codec/scan_json.h): stand-ins where the ranges were, padded (every
 * other byte at its offset: jansson's error line and column are the
 * body's) or compact, with ranges across jansson's read chunks. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "codec/scan_json.h"

/* The range of the value of "key" in s (found by text: the tests' bodies
 * hold each key once and no other '"' inside the value). */
static void value_range(const char *s, const char *key, size_t *start, size_t *end)
{
    char k[40];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(s, k);
    cr_assert_not_null(p, "%s", key);
    *start = (size_t)(p - s) + strlen(k);
    struct scan sc = {s, strlen(s), *start, 0, 0, NULL, NULL, NULL, 0, NULL};
    cr_assert_eq(scan_skip_value(&sc), 0);
    *end = sc.pos;
}

Test(scan_blank, stand_ins_padded_or_compact_across_chunks)
{
    /* "a" starts at byte 1023 so its stand-in crosses jansson's 1024-byte reads */
    char body[8192];
    int n = snprintf(body, sizeof body, "{\"pad\": \"%0*d\", \"a\": [", 1023 - 17, 0);
    for (int i = 0; i < 500; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%s%d.5", i ? ", " : "", i);
    snprintf(body + n, sizeof body - (size_t)n, "], \"b\": {\"x\": [1, 2]}, \"c\": \"s\"}");
    struct scan_blanks b = {0};
    size_t s0, e0, s1, e1;
    value_range(body, "a", &s0, &e0);
    value_range(body, "b", &s1, &e1);
    cr_assert_eq(s0, 1023);
    cr_assert_eq(scan_blank(&b, s0, e0, 0), 0);
    cr_assert_eq(scan_blank(&b, s1, e1, 1), 0);
    for (int compact = 0; compact < 2; compact++) {
        json_error_t je;
        int nomem;
        json_t *root = scan_load_blanked(&b, body, strlen(body), compact, 0, &je, &nomem);
        cr_assert_not_null(root, "compact %d: %s", compact, je.text);
        cr_expect(json_is_integer(json_object_get(root, "a")) &&
                  json_integer_value(json_object_get(root, "a")) == 0);
        cr_expect(json_is_array(json_object_get(root, "b")) &&
                  json_array_size(json_object_get(root, "b")) == 0);
        cr_expect_str_eq(json_string_value(json_object_get(root, "c")), "s");
        cr_expect_eq(json_object_size(root), 4);
        json_decref(root);
    }
    /* an error after the ranges: padded, jansson says where it is in the body */
    char *bad = strdup(body);
    memcpy(strstr(bad, "\"s\"}"), "x  ", 3);
    json_error_t want, got;
    json_t *none = json_loads(bad, 0, &want);
    cr_assert_null(none);
    int nomem;
    cr_assert_null(scan_load_blanked(&b, bad, strlen(bad), 0, 0, &got, &nomem));
    cr_expect_eq(got.line, want.line);
    cr_expect_eq(got.column, want.column, "column %d, the body's %d", got.column, want.column);
    cr_expect_eq(got.position, want.position);
    free(bad);
    scan_blanks_free(&b);
}

/* A number jansson cannot hold outside the ranges: with standin, read as
 * its stand-in (jsonnum.h); without, jansson's refusal. */
Test(scan_blank, numbers_beyond_double_only_with_standin)
{
    const char *body = "{\"t\": [1, 2, 3], \"scale\": 1e999}";
    struct scan_blanks b = {0};
    size_t s, e;
    value_range(body, "t", &s, &e);
    cr_assert_eq(scan_blank(&b, s, e, 0), 0);
    json_error_t je;
    int nomem;
    cr_expect_null(scan_load_blanked(&b, body, strlen(body), 1, 0, &je, &nomem));
    json_t *root = scan_load_blanked(&b, body, strlen(body), 1, 1, &je, &nomem);
    cr_assert_not_null(root, "%s", je.text);
    cr_expect(json_real_value(json_object_get(root, "scale")) > 1e38);
    json_decref(root);
    scan_blanks_free(&b);
}
