/* test_base64.c -- lib/base64.c against a naive reference written here
 * (bit by bit, the alphabet searched with strchr): every length around the
 * vector loops' block sizes, every byte value at every place of a string
 * long enough for them, and the streamed ranges. On a CPU with AVX2 this
 * compares the vector loops with the reference; base64_*_scalar are checked
 * the same way, so both paths are covered whatever the CPU. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t ref_encode(char *dst, const unsigned char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = 0;
        for (size_t k = 0; k < 3; k++)
            v = v << 8 | (i + k < n ? src[i + k] : 0);
        for (size_t k = 0; k < 4; k++)
            dst[o + k] = k <= (n - i) ? alphabet[(v >> (18 - 6 * k)) & 63] : '=';
        o += 4;
    }
    return o;
}

static int ref_value(unsigned char c)
{
    const char *p = c ? strchr(alphabet, c) : NULL;
    return p ? (int)(p - alphabet) : -1;
}

/* RFC 4648 with the service's rules: length a multiple of 4 (else bad at
 * n), '=' only as the last one or two characters. */
static long long ref_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at)
{
    if (n % 4) {
        *bad_at = n;
        return -1;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = 0;
        if (i + 4 == n && src[i + 3] == '=')
            pad = src[i + 2] == '=' ? 2 : 1;
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            const int x = k < 4 - pad ? ref_value((unsigned char)src[i + (size_t)k]) : 0;
            if (x < 0) {
                *bad_at = i + (size_t)k;
                return -1;
            }
            v = v << 6 | (uint32_t)x;
        }
        for (int k = 0; k < 3 - pad; k++)
            dst[o++] = (unsigned char)(v >> (16 - 8 * k));
    }
    return (long long)o;
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

#define MAXN 400

Test(base64, encodes_as_the_reference_at_every_length)
{
    unsigned char src[MAXN];
    char want[BASE64_LEN(MAXN)], got[BASE64_LEN(MAXN)], got_s[BASE64_LEN(MAXN)];
    for (size_t n = 0; n <= MAXN; n++) {
        fill(src, n, (unsigned)n);
        const size_t m = ref_encode(want, src, n);
        cr_assert_eq(m, BASE64_LEN(n));
        cr_assert_eq(base64_encode(got, src, n), m, "n=%zu", n);
        cr_assert_eq(base64_encode_scalar(got_s, src, n), m, "n=%zu", n);
        cr_assert(memcmp(got, want, m) == 0, "n=%zu: %.*s", n, (int)m, got);
        cr_assert(memcmp(got_s, want, m) == 0, "n=%zu (scalar)", n);
    }
}

Test(base64, decodes_as_the_reference_at_every_length)
{
    unsigned char src[MAXN], got[MAXN + 1], got_s[MAXN + 1];
    char enc[BASE64_LEN(MAXN)];
    for (size_t n = 0; n <= MAXN; n++) {
        fill(src, n, (unsigned)n + 7);
        const size_t m = ref_encode(enc, src, n);
        size_t bad;
        cr_assert_eq(base64_decode(got, enc, m, &bad), (long long)n, "n=%zu", n);
        cr_assert_eq(base64_decode_scalar(got_s, enc, m, &bad), (long long)n, "n=%zu", n);
        cr_assert(memcmp(got, src, n) == 0, "n=%zu", n);
        cr_assert(memcmp(got_s, src, n) == 0, "n=%zu (scalar)", n);
    }
}

/* Every byte value at every place of a 136-character string (four 32-byte
 * blocks and the last quad), and lengths that are not a multiple of 4: the
 * same count or the same offset as the reference, from both paths. */
Test(base64, refuses_as_the_reference_every_byte_at_every_place)
{
    unsigned char src[102], want[102], got[102];
    char enc[136 + 4];
    fill(src, sizeof src, 3);
    ref_encode(enc, src, sizeof src);
    for (size_t at = 0; at < 136; at++) {
        for (int c = 0; c < 256; c++) {
            char s[136];
            memcpy(s, enc, sizeof s);
            s[at] = (char)c;
            size_t wbad = 0, bad = 0, bad_s = 0;
            const long long w = ref_decode(want, s, sizeof s, &wbad);
            const long long g = base64_decode(got, s, sizeof s, &bad);
            cr_assert_eq(g, w, "byte %d at %zu", c, at);
            if (w < 0)
                cr_assert_eq(bad, wbad, "byte %d at %zu", c, at);
            else
                cr_assert(memcmp(got, want, (size_t)w) == 0, "byte %d at %zu", c, at);
            const long long gs = base64_decode_scalar(got, s, sizeof s, &bad_s);
            cr_assert_eq(gs, w, "byte %d at %zu (scalar)", c, at);
            if (w < 0)
                cr_assert_eq(bad_s, wbad, "byte %d at %zu (scalar)", c, at);
        }
    }
    for (size_t n = 1; n < 140; n++) {
        size_t bad = 0;
        const long long g = base64_decode(got, enc, n, &bad);
        if (n % 4)
            cr_assert(g == -1 && bad == n, "n=%zu", n);
    }
    size_t bad;
    cr_assert_eq(base64_decode(got, "AB=C", 4, &bad), -1);
    cr_assert_eq(bad, 2);
    cr_assert_eq(base64_decode(got, "A===", 4, &bad), -1);
    cr_assert_eq(bad, 1);
    cr_assert_eq(base64_decode(got, "QQ==", 4, &bad), 1);
}

/* Any character range, in pieces of any size, equals the whole encoding. */
Test(base64, ranges_are_pieces_of_the_whole)
{
    unsigned char src[1000];
    char whole[BASE64_LEN(1000)], piece[BASE64_LEN(1000)];
    fill(src, sizeof src, 11);
    const size_t m = ref_encode(whole, src, sizeof src);
    const size_t steps[] = {1, 3, 5, 31, 32, 33, 97, 1000, 2000};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        size_t pos = 0;
        while (pos < m) {
            const size_t w = base64_encode_range(piece + pos, steps[k], src, sizeof src, pos);
            cr_assert(w > 0 && w <= steps[k], "step %zu at %zu", steps[k], pos);
            pos += w;
        }
        cr_assert_eq(pos, m);
        cr_assert(memcmp(piece, whole, m) == 0, "step %zu", steps[k]);
        cr_assert_eq(base64_encode_range(piece, 10, src, sizeof src, m), 0);
    }
}
