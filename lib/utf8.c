/* utf8.c -- well-formed UTF-8; see utf8.h. */
#include "lib/utf8.h"

#include <string.h>

size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    const unsigned c = s[0];
    if (c < 0x80)
        return 1;
    /* the lead byte gives the length and the range of the second byte,
     * which is where overlongs, surrogates and > U+10FFFF show */
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong below U+0800 */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong below U+10000 */
        else if (c == 0xf4)
            hi = 0x8f; /* beyond U+10FFFF */
    } else {
        return 0;      /* a continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    return len;
}

int utf8_valid(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        const size_t k = utf8_seq(s + i, n - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

void utf8_clean(char *dst, size_t n, const char *src)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t left = strlen(src), o = 0;
    while (left && o + 4 < n) {
        const size_t k = utf8_seq(s, left);
        if (k) {
            memcpy(dst + o, s, k);
            o += k, s += k, left -= k;
        } else {
            memcpy(dst + o, "\xef\xbf\xbd", 3);
            o += 3, s++, left--;
        }
    }
    dst[o] = '\0';
}
