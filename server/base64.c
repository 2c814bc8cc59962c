/* base64.c -- see base64.h. */
#include "server/base64.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* Value of each base64 character; 0xff for every other byte. */
#define B64_ROW(c0) B64V(c0), B64V(c0 + 1), B64V(c0 + 2), B64V(c0 + 3), B64V(c0 + 4), \
    B64V(c0 + 5), B64V(c0 + 6), B64V(c0 + 7)
#define B64V(c) (unsigned char)((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' \
    : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 \
    : (c) == '+' ? 62 : (c) == '/' ? 63 : 0xff)
static const unsigned char b64_val[256] = {
    B64_ROW(0),   B64_ROW(8),   B64_ROW(16),  B64_ROW(24),  B64_ROW(32),  B64_ROW(40),
    B64_ROW(48),  B64_ROW(56),  B64_ROW(64),  B64_ROW(72),  B64_ROW(80),  B64_ROW(88),
    B64_ROW(96),  B64_ROW(104), B64_ROW(112), B64_ROW(120), B64_ROW(128), B64_ROW(136),
    B64_ROW(144), B64_ROW(152), B64_ROW(160), B64_ROW(168), B64_ROW(176), B64_ROW(184),
    B64_ROW(192), B64_ROW(200), B64_ROW(208), B64_ROW(216), B64_ROW(224), B64_ROW(232),
    B64_ROW(240), B64_ROW(248),
};
#undef B64V
#undef B64_ROW

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters for every 12 bits of input: half the lookups. */
static char b64_pairs[4096][2];
static pthread_once_t b64_pairs_once = PTHREAD_ONCE_INIT;

static void b64_pairs_init(void)
{
    for (int i = 0; i < 4096; i++)
        b64_pairs[i][0] = b64_alphabet[i >> 6], b64_pairs[i][1] = b64_alphabet[i & 63];
}

size_t base64_encode(char *dst, const unsigned char *src, size_t n)
{
    const char *a = b64_alphabet;
    pthread_once(&b64_pairs_once, b64_pairs_init);
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        memcpy(dst + o, b64_pairs[v >> 12], 2);
        memcpy(dst + o + 2, b64_pairs[v & 0xfff], 2);
        o += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)src[i] << 16;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63], dst[o++] = '=', dst[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63];
        dst[o++] = a[(v >> 6) & 63], dst[o++] = '=';
    }
    return o;
}

size_t base64_encode_range(char *dst, size_t max, const unsigned char *src, size_t n,
                           size_t o)
{
    const size_t enc = BASE64_LEN(n);
    size_t done = 0;
    while (done < max && o < enc) {
        const size_t q = o / 4, within = o % 4, from = 3 * q;
        if (within == 0 && max - done >= 4) { /* whole quads straight into dst */
            size_t quads = (max - done) / 4;
            if (quads > enc / 4 - q)
                quads = enc / 4 - q;
            size_t bytes = 3 * quads;
            if (bytes > n - from)
                bytes = n - from;
            const size_t w = base64_encode(dst + done, src + from, bytes);
            done += w, o += w;
        } else { /* part of one quad */
            char tmp[4];
            base64_encode(tmp, src + from, n - from < 3 ? n - from : 3);
            size_t k = 4 - within;
            if (k > max - done)
                k = max - done;
            memcpy(dst + done, tmp + within, k);
            done += k, o += k;
        }
    }
    return done;
}

long long base64_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at)
{
    const unsigned char *s = (const unsigned char *)src;
    if (n % 4) {
        *bad_at = n;
        return -1;
    }
    size_t o = 0, full = n == 0 ? 0 : n - 4; /* the last quad may hold padding */
    for (size_t i = 0; i < full; i += 4) {
        const unsigned a = b64_val[s[i]], b = b64_val[s[i + 1]];
        const unsigned c = b64_val[s[i + 2]], d = b64_val[s[i + 3]];
        if ((a | b | c | d) & 0x80) { /* 0xff marks a byte outside the alphabet */
            *bad_at = i + (a & 0x80 ? 0 : b & 0x80 ? 1 : c & 0x80 ? 2 : 3);
            return -1;
        }
        const uint32_t v = a << 18 | b << 12 | c << 6 | d;
        dst[o] = (unsigned char)(v >> 16);
        dst[o + 1] = (unsigned char)(v >> 8);
        dst[o + 2] = (unsigned char)v;
        o += 3;
    }
    if (n == 0)
        return 0;
    /* last quad: "xxxx", "xxx=" or "xx==" */
    const unsigned char *q = s + full;
    const int pad = q[3] == '=' ? (q[2] == '=' ? 2 : 1) : 0;
    uint32_t v = 0;
    for (int j = 0; j < 4; j++) {
        unsigned x = j >= 4 - pad ? 0 : b64_val[q[j]];
        if (x & 0x80) {
            *bad_at = full + (size_t)j;
            return -1;
        }
        v = v << 6 | x;
    }
    dst[o++] = (unsigned char)(v >> 16);
    if (pad < 2)
        dst[o++] = (unsigned char)(v >> 8);
    if (pad < 1)
        dst[o++] = (unsigned char)v;
    return (long long)o;
}
