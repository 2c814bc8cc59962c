/* test_utf8.c -- well-formed UTF-8 (lib/utf8.h): the boundary cases of
 * RFC 3629, every sequence of up to three bytes against a decoder written
 * the other way (decode, then refuse overlongs, surrogates and values past
 * U+10FFFF), and the cleaning of messages. */
#include <criterion/criterion.h>
#include <string.h>

#include "lib/utf8.h"

/* The other formulation: decode the code point, then judge it. */
static size_t seq_by_value(const unsigned char *s, size_t n)
{
    const unsigned c = s[0];
    size_t k;
    unsigned min, v;
    if (!n)
        return 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xc0 && c <= 0xdf)
        k = 2, min = 0x80, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, min = 0x800, v = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf7)
        k = 4, min = 0x10000, v = c & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    return v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ? 0 : k;
}

Test(utf8, boundaries_of_rfc_3629)
{
    static const struct { const char *s; size_t n, want; } cases[] = {
        {"a", 1, 1},
        {"\x7f", 1, 1},
        {"\xc2\x80", 2, 2},          /* U+0080 */
        {"\xc1\xbf", 2, 0},          /* overlong U+007F */
        {"\xc0\x80", 2, 0},          /* overlong NUL */
        {"\xdf\xbf", 2, 2},          /* U+07FF */
        {"\xe0\x9f\xbf", 3, 0},      /* overlong U+07FF */
        {"\xe0\xa0\x80", 3, 3},      /* U+0800 */
        {"\xed\x9f\xbf", 3, 3},      /* U+D7FF */
        {"\xed\xa0\x80", 3, 0},      /* U+D800, a surrogate */
        {"\xed\xbf\xbf", 3, 0},      /* U+DFFF */
        {"\xee\x80\x80", 3, 3},      /* U+E000 */
        {"\xef\xbf\xbf", 3, 3},      /* U+FFFF */
        {"\xf0\x8f\xbf\xbf", 4, 0},  /* overlong U+FFFF */
        {"\xf0\x90\x80\x80", 4, 4},  /* U+10000 */
        {"\xf4\x8f\xbf\xbf", 4, 4},  /* U+10FFFF */
        {"\xf4\x90\x80\x80", 4, 0},  /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0},
        {"\x80", 1, 0},              /* a lone continuation byte */
        {"\xe2\x82", 2, 0},          /* cut short */
        {"\xe2\x82\xac", 2, 0},      /* n says it is cut short */
        {"\xe2\x28\xa1", 3, 0},      /* a continuation byte missing */
        {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(utf8_seq((const unsigned char *)cases[i].s, cases[i].n), cases[i].want,
                     "case %zu: %zu, want %zu", i,
                     utf8_seq((const unsigned char *)cases[i].s, cases[i].n), cases[i].want);
    cr_expect(utf8_valid("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    cr_expect(!utf8_valid("na\xc3\xafve \xe2\x82", 9));
    cr_expect(!utf8_valid("ok\xff", 3));
    cr_expect(utf8_valid("", 0));
    /* an embedded NUL is a character: validity goes by n, not by strlen */
    cr_expect(utf8_valid("a\0b", 3));
}

/* Every sequence of one to three bytes, and every four-byte one over a
 * sample of the last two bytes, as the other formulation judges it. */
Test(utf8, agrees_with_decoding_on_every_short_sequence)
{
    unsigned char s[4];
    size_t bad = 0;
    for (unsigned a = 0; a < 256; a++)
        for (unsigned b = 0; b < 256; b++) {
            s[0] = (unsigned char)a, s[1] = (unsigned char)b;
            bad += utf8_seq(s, 1) != seq_by_value(s, 1);
            bad += utf8_seq(s, 2) != seq_by_value(s, 2);
            for (unsigned c = 0; c < 256 && a >= 0xe0; c++) {
                s[2] = (unsigned char)c;
                bad += utf8_seq(s, 3) != seq_by_value(s, 3);
                static const unsigned char last[] = {0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xff};
                for (size_t d = 0; d < sizeof last && a >= 0xf0 && !(c & 0x0f); d++) {
                    s[3] = last[d];
                    bad += utf8_seq(s, 4) != seq_by_value(s, 4);
                }
            }
        }
    cr_expect_eq(bad, 0, "%zu sequences judged differently", bad);
}

Test(utf8, clean_replaces_invalid_bytes_and_cuts_at_a_character)
{
    char out[64];
    utf8_clean(out, sizeof out, "key '\xff\xc3\xa9' \xed\xa0\x80!");
    cr_expect_str_eq(out, "key '\xef\xbf\xbd\xc3\xa9' \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!");
    cr_expect(utf8_valid(out, strlen(out)));
    /* a full buffer: never half a character */
    char small[8];
    utf8_clean(small, sizeof small, "ab\xe2\x82\xac\xe2\x82\xac");
    cr_expect_str_eq(small, "ab\xe2\x82\xac");
}
