/* test_json_small.c -- the small header reader (codec/json_small.h) gives
 * what jansson gives (the same values, types and key order) or nothing,
 * over plain texts, texts it leaves to jansson, and random changes of a
 * v2 binary request's header. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "codec/json_small.h"

/* s through both: 1 when the small reader read it (the same as jansson),
 * 0 when it left it (jansson may read it or not). */
static int compare(const char *s, size_t n)
{
    json_error_t je;
    json_t *small = json_small_load(s, n);
    json_t *ref = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    if (small) {
        cr_assert_not_null(ref, "jansson refuses what the small reader read: %.*s (%s)",
                           (int)n, s, je.text);
        char *a = json_dumps(small, JSON_ENCODE_ANY), *b = json_dumps(ref, JSON_ENCODE_ANY);
        cr_assert(json_equal(small, ref) && !strcmp(a, b), "%.*s: %s against jansson's %s",
                  (int)n, s, a, b);
        free(a);
        free(b);
    }
    json_decref(small);
    json_decref(ref);
    return small != NULL;
}

static const char header[] =
    "{\"inputs\":[{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,512],\"parameters\":"
    "{\"binary_data_size\":2048}},{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,128],"
    "\"parameters\":{\"binary_data_size\":512}}],\"parameters\":{\"num_heads\":8,"
    "\"need_weights\":false,\"binary_data_output\":true,\"sequence_id\":\"rtt-step-30\","
    "\"scale\":0.125,\"x\":-1.5e-3,\"y\":null,\"z\":-0,\"w\":[],\"v\":{}}}";

Test(json_small, plain_texts_read_as_jansson_reads_them)
{
    static const char *const plain[] = {
        header, "{}", "[]", " [1, -2, 3.25, 4e2, 5E-1, 6.0e+1, true, false, null] ",
        "{\"a\":{\"b\":{\"c\":[[[]]]}}}", "{\"\":1}", "[9223372036854775807]",
        "[-9223372036854775808]", "[1e-400]", "\t\r\n{\"k\" : \"v\" }\n",
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        cr_assert(compare(plain[i], strlen(plain[i])), "not read: %s", plain[i]);
}

Test(json_small, what_is_not_plain_is_left_to_jansson)
{
    static const char *const left[] = {
        "{\"a\":1,\"a\":2}", "[\"\\n\"]", "[\"\xc3\xa9\"]", "[9223372036854775808]", "[1e400]",
        "[01]", "[1.]", "[.5]", "[-]", "[1e]", "[truex]", "[tru]", "{\"a\" 1}", "{\"a\":1,}",
        "[1,]", "[1 2]", "{} x", "\"s\"", "1", "", "   ", "{", "[\"a]", "[nul]", "{\"a\":1}}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "[\"\t\"]",
        "{\"a\\u0000\":1}", "[1]\0",
    };
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
        cr_assert(!compare(left[i], strlen(left[i]) + (i == sizeof left / sizeof left[0] - 1)),
                  "read: %s", left[i]);
}

Test(json_small, random_changes_of_a_header)
{
    static const char alphabet[] = "{}[]\":,. -+0123456789eEtrufalsn\\\t\nx\xc3";
    char s[sizeof header];
    unsigned seed = 30;
    int read = 0;
    for (int t = 0; t < 20000; t++) {
        memcpy(s, header, sizeof header);
        size_t n = sizeof header - 1;
        for (int k = 1 + t % 3; k > 0 && n > 0; k--) {
            seed = seed * 1103515245u + 12345u;
            const size_t at = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 4 == 0)
                n = at; /* cut */
            else
                s[at] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
        }
        read += compare(s, n);
    }
    cr_assert_gt(read, 100, "the small reader read only %d changed headers", read);
}
